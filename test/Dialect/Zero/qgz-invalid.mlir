// RUN: zero-opt %s -split-input-file -verify-diagnostics

// What the zero dialect's verifiers reject of ZeRO++ qgZ's quantized
// reduce-scatter, one per case.

// Checks that a quantized reduce-scatter needs ranks on several nodes.
zero.param @w : tensor<2x4xbf16> init zeros
zero.partition @l0 stage 3 world_size 4 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.train_step @one_node(%x: tensor<1x2xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 4> {
  %g = nn.fill 0.0 : tensor<2x4xbf16>
  // expected-error @+1 {{'zero.reduce_scatter' op is quantized, so its ranks must span several nodes; the train step's 4 ranks are on one node (ranks_per_node 0)}}
  zero.reduce_scatter group @l0 [0, 8) quantized from %g at [0] : tensor<2x4xbf16>
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks the same with ranks_per_node equal to the world size.
zero.param @w : tensor<2x4xbf16> init zeros
zero.partition @l0 stage 3 world_size 4 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.train_step @one_node(%x: tensor<1x2xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 4, ranks_per_node = 4> {
  %g = nn.fill 0.0 : tensor<2x4xbf16>
  // expected-error @+1 {{'zero.reduce_scatter' op is quantized, so its ranks must span several nodes; the train step's 4 ranks are on one node (ranks_per_node 4)}}
  zero.reduce_scatter group @l0 [0, 8) quantized from %g at [0] : tensor<2x4xbf16>
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that it reduces gradient values, not the grads buffer in place.
zero.param @w : tensor<2x4xbf16> init zeros
zero.partition @l0 stage 1 world_size 4 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.train_step @in_place(%x: tensor<1x2xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 1, world_size = 4, global_batch = 4, ranks_per_node = 2> {
  // expected-error @+1 {{'zero.reduce_scatter' op is quantized, so it reduces gradient values ('from'), not the 'grads' buffer in place}}
  zero.reduce_scatter group @l0 in grads [0, 8) quantized phase boundary
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that it reduces stage-3 gradients only.
zero.param @w : tensor<2x4xbf16> init zeros
zero.partition @l0 stage 2 world_size 4 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.train_step @stage2(%x: tensor<1x2xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 4, global_batch = 4, ranks_per_node = 2> {
  %g = nn.fill 0.0 : tensor<2x4xbf16>
  // expected-error @+1 {{'zero.reduce_scatter' op is quantized (ZeRO++ qgZ), which reduces stage-3 gradients only, @l0 is stage 2}}
  zero.reduce_scatter group @l0 [0, 8) quantized from %g at [0] : tensor<2x4xbf16>
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that it does not run over MiCS shard groups.
zero.param @w : tensor<2x4xbf16> init zeros
zero.partition @l0 stage 3 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.train_step @mics(%x: tensor<1x2xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 4, ranks_per_node = 1, mesh = #zero.mesh<[data = 2, mics = 2]>> {
  %g = nn.fill 0.0 : tensor<2x4xbf16>
  // expected-error @+1 {{'zero.reduce_scatter' op is quantized, but the train step partitions over MiCS shard groups (mics_shard_size 2), which qgZ does not}}
  zero.reduce_scatter group @l0 [0, 8) quantized from %g at [0] : tensor<2x4xbf16>
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that it is in a train step.
zero.param @w : tensor<2x4xbf16> init zeros
zero.partition @l0 stage 3 world_size 4 alignment 2 numel 8 padded 8 params [@w] offsets [0]
func.func @outside(%g: tensor<2x4xbf16>) {
  // expected-error @+1 {{'zero.reduce_scatter' op is quantized, so it must be in a zero.train_step with a #zero.schedule}}
  zero.reduce_scatter group @l0 [0, 8) quantized from %g at [0] : tensor<2x4xbf16>
  return
}
