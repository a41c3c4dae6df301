// RUN: zero-opt %s -split-input-file --zero-verify-schedule -verify-diagnostics

// zero-verify-schedule on ZeRO++ hpZ schedules: a gather of the secondary
// shards reads what a zero.store_secondary of the same optimizer step
// wrote, from the group's own gather of its parameter shards, before the
// optimizer.

// The secondary shards gathered before any store filled them this step
// (they would hold the previous step's parameters).
zero.param @w : tensor<2x2xf32> init zeros compute bf16
zero.partition @l0 stage 3 world_size 4 alignment 2 numel 4 padded 8 params [@w] offsets [0]
zero.train_step @step(%x: tensor<2x2xbf16>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 8, mesh = #zero.mesh<[data = 2, hpz = 2]>> {
  // expected-error @+1 {{'zero.all_gather' op gathers the hpZ secondary shards of @l0 before any zero.store_secondary of the group fills them in this optimizer step}}
  %again = zero.all_gather group @l0 secondary : tensor<8xbf16>
  %w2 = zero.get_param @w from %again : tensor<8xbf16> -> tensor<2x2xbf16>
  %z = nn.matmul %x, %w2 : tensor<2x2xbf16>, tensor<2x2xbf16> -> tensor<2x2xbf16>
  zero.free %again : tensor<8xbf16>
  %full = zero.all_gather group @l0 : tensor<8xbf16>
  zero.store_secondary %full group @l0 phase first_micro_step : tensor<8xbf16>
  zero.free %full : tensor<8xbf16>
  %loss = nn.softmax_cross_entropy %z, %lbl : tensor<2x2xbf16>, tensor<2xi64> -> tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// A store of another group's buffer.
zero.param @w : tensor<2x2xf32> init zeros compute bf16
zero.param @v : tensor<2x2xf32> init zeros compute bf16
zero.partition @l0 stage 3 world_size 4 alignment 2 numel 4 padded 8 params [@w] offsets [0]
zero.partition @l1 stage 3 world_size 4 alignment 2 numel 4 padded 8 params [@v] offsets [0]
zero.train_step @step(%x: tensor<2x2xbf16>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 8, mesh = #zero.mesh<[data = 2, hpz = 2]>> {
  %full = zero.all_gather group @l1 : tensor<8xbf16>
  // expected-error @+1 {{'zero.store_secondary' op stores into the secondary shard of @l0 a buffer that is not that group's gather of its parameter shards}}
  zero.store_secondary %full group @l0 phase first_micro_step : tensor<8xbf16>
  zero.free %full : tensor<8xbf16>
  %loss = nn.softmax_cross_entropy %x, %lbl : tensor<2x2xbf16>, tensor<2xi64> -> tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// A store of a secondary gather: the secondary shards would be refilled
// from themselves.
zero.param @w : tensor<2x2xf32> init zeros compute bf16
zero.partition @l0 stage 3 world_size 4 alignment 2 numel 4 padded 8 params [@w] offsets [0]
zero.train_step @step(%x: tensor<2x2xbf16>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 8, mesh = #zero.mesh<[data = 2, hpz = 2]>> {
  %full = zero.all_gather group @l0 : tensor<8xbf16>
  zero.store_secondary %full group @l0 phase first_micro_step : tensor<8xbf16>
  zero.free %full : tensor<8xbf16>
  %again = zero.all_gather group @l0 secondary : tensor<8xbf16>
  // expected-error @+1 {{'zero.store_secondary' op stores into the secondary shard of @l0 a buffer that is not that group's gather of its parameter shards}}
  zero.store_secondary %again group @l0 : tensor<8xbf16>
  zero.free %again : tensor<8xbf16>
  %loss = nn.softmax_cross_entropy %x, %lbl : tensor<2x2xbf16>, tensor<2xi64> -> tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// A secondary gather after the optimizer changed the parameters.
zero.param @w : tensor<2x2xf32> init zeros compute bf16
zero.partition @l0 stage 3 world_size 4 alignment 2 numel 4 padded 8 params [@w] offsets [0]
zero.train_step @step(%x: tensor<2x2xbf16>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 8, mesh = #zero.mesh<[data = 2, hpz = 2]>> {
  %kept = zero.all_gather group @l0 persistent : tensor<8xbf16>
  %full = zero.all_gather group @l0 : tensor<8xbf16>
  zero.store_secondary %full group @l0 phase first_micro_step : tensor<8xbf16>
  zero.free %full : tensor<8xbf16>
  // expected-note @+1 {{the optimizer's place}}
  zero.free %kept phase step_end : tensor<8xbf16>
  // expected-error @+1 {{'zero.all_gather' op gathers the hpZ secondary shards of @l0 after the optimizer changed the parameters (they are stale)}}
  %again = zero.all_gather group @l0 secondary : tensor<8xbf16>
  zero.free %again : tensor<8xbf16>
  %loss = nn.softmax_cross_entropy %x, %lbl : tensor<2x2xbf16>, tensor<2xi64> -> tensor<f32>
  zero.return %loss : tensor<f32>
}
