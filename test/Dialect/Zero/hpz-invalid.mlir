// RUN: zero-opt %s -split-input-file -verify-diagnostics

// What the zero dialect's verifiers reject of ZeRO++ hpZ ops, one per case.

// Checks that the store needs hpZ in the step's schedule.
zero.param @w : tensor<2x2xf32> init zeros
zero.partition @l0 stage 3 world_size 4 alignment 2 numel 4 padded 8 params [@w] offsets [0]
zero.train_step @no_hpz(%x: tensor<1x2xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 4> {
  %full = zero.all_gather group @l0 : tensor<8xf32>
  // expected-error @+1 {{'zero.store_secondary' op stores an hpZ secondary shard, but the train step's schedule has no hpZ (hpz_partition_size > 1)}}
  zero.store_secondary %full group @l0 : tensor<8xf32>
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that a gather of the secondary shards needs hpZ.
zero.param @w : tensor<2x2xf32> init zeros
zero.partition @l0 stage 3 world_size 4 alignment 2 numel 4 padded 8 params [@w] offsets [0]
zero.train_step @no_hpz(%x: tensor<1x2xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 4> {
  // expected-error @+1 {{'zero.prefetch' op gathers the hpZ secondary shards, but the train step's schedule has no hpZ (hpz_partition_size > 1)}}
  %full, %t = zero.prefetch group @l0 secondary : tensor<8xf32>
  zero.wait %t
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that the store runs before the gathers of its optimizer step.
zero.param @w : tensor<2x2xf32> init zeros
zero.partition @l0 stage 3 world_size 4 alignment 2 numel 4 padded 8 params [@w] offsets [0]
zero.train_step @late(%x: tensor<1x2xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 4, mesh = #zero.mesh<[data = 2, hpz = 2]>> {
  %full = zero.all_gather group @l0 : tensor<8xf32>
  // expected-error @+1 {{'zero.store_secondary' op stores the hpZ secondary shard before the gathers that read it in the same optimizer step: its phase must be micro_step or first_micro_step, not last_micro_step}}
  zero.store_secondary %full group @l0 phase last_micro_step : tensor<8xf32>
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks the store's buffer: the whole padded group in its compute type.
zero.param @w : tensor<2x2xf32> init zeros
zero.partition @l0 stage 3 world_size 4 alignment 2 numel 4 padded 8 params [@w] offsets [0]
zero.train_step @short(%x: tensor<1x2xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 4, mesh = #zero.mesh<[data = 2, hpz = 2]>> {
  %v = nn.fill 0.0 : tensor<4xf32>
  // expected-error @+1 {{'zero.store_secondary' op gathered buffer 'tensor<4xf32>' must hold the 8 (padded) elements of partition @l0}}
  zero.store_secondary %v group @l0 : tensor<4xf32>
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that hpZ does not combine with parameter offload.
zero.param @w : tensor<2x2xf32> init zeros
zero.partition @l0 stage 3 world_size 4 alignment 2 numel 4 padded 8 params [@w] offsets [0]
zero.train_step @offload(%x: tensor<1x2xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 4, mesh = #zero.mesh<[data = 2, hpz = 2]>>
    offload #zero.offload<param = cpu> {
  // expected-error @+1 {{'zero.all_gather' op gathers the hpZ secondary shards, but the train step offloads its parameters, which hpZ does not support}}
  %full = zero.all_gather group @l0 secondary : tensor<8xf32>
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that the secondary shards are gathered into a new buffer.
zero.param @w : tensor<2x2xf32> init zeros
zero.partition @l0 stage 2 world_size 4 alignment 2 numel 4 padded 8 params [@w] offsets [0]
zero.train_step @in_place(%x: tensor<1x2xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 2, world_size = 4, global_batch = 4> {
  // expected-error @+1 {{'zero.all_gather' op gathers the hpZ secondary shards into a new buffer, never in place}}
  zero.all_gather group @l0 in params [0, 4) secondary phase post_step
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that a gather of the secondary shards is not a kept one.
zero.param @w : tensor<2x2xf32> init zeros
zero.partition @l0 stage 3 world_size 4 alignment 2 numel 4 padded 8 params [@w] offsets [0]
zero.train_step @kept(%x: tensor<1x2xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 4, mesh = #zero.mesh<[data = 2, hpz = 2]>> {
  // expected-error @+1 {{'zero.all_gather' op of the hpZ secondary shards cannot be persistent: a kept gather is the first of the step, before any secondary shard is stored}}
  %full = zero.all_gather group @l0 secondary persistent : tensor<8xf32>
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that a gather of the secondary shards runs in every micro step.
zero.param @w : tensor<2x2xf32> init zeros
zero.partition @l0 stage 3 world_size 4 alignment 2 numel 4 padded 8 params [@w] offsets [0]
zero.train_step @phase(%x: tensor<1x2xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 4, mesh = #zero.mesh<[data = 2, hpz = 2]>> {
  // expected-error @+1 {{'zero.all_gather' op of the hpZ secondary shards must run in every micro step (phase micro_step), not post_step}}
  %full = zero.all_gather group @l0 secondary phase post_step : tensor<8xf32>
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that a gather of the 16-bit secondary shards is never quantized
// (qwZ quantizes the gathers of the params shards).
zero.param @w : tensor<2x2xbf16> init zeros
zero.partition @l0 stage 3 world_size 4 alignment 2 numel 4 padded 8 params [@w] offsets [0]
zero.train_step @quantized(%x: tensor<1x2xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 4, mesh = #zero.mesh<[data = 2, hpz = 2]>> {
  // expected-error @+1 {{'zero.all_gather' op gathers the 16-bit hpZ secondary shards, so it cannot be quantized}}
  %full = zero.all_gather group @l0 secondary quantized : tensor<8xbf16>
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}
