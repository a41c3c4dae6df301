// RUN: zero-opt %s -split-input-file --zero-verify-schedule -verify-diagnostics

// MiCS with two replicas: each partition's gradient shards are summed over
// the replicas once, after the shard group's reduction and before the
// optimizer reads them.
zero.param @a.w : tensor<4xf32> init zeros
zero.partition @a stage 3 world_size 2 alignment 2 numel 4 padded 4 params [@a.w] offsets [0]
zero.train_step @ok(%x: tensor<1x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 4, mesh = #zero.mesh<[data = 2, mics = 2]>> {
  %pa = zero.all_gather group @a persistent : tensor<4xf32>
  %w = zero.get_param @a.w from %pa : tensor<4xf32> -> tensor<4xf32>
  %loss = nn.fill 0.0 : tensor<f32>
  %seed = nn.fill 1.0 {zero.loss_seed} : tensor<f32>
  %g = nn.fill 1.0 : tensor<4xf32>
  zero.grad @a.w, %g : tensor<4xf32>
  zero.reduce_scatter group @a [0, 4) from %g at [0] : tensor<4xf32>
  zero.free %g : tensor<4xf32>
  %t = zero.all_reduce sum group @a in grads [0, 4) over replicas phase boundary token !zero.token
  zero.wait %t phase boundary
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@a] scale %s divisor 4.0 phase boundary : tensor<2xf32>
  %n = zero.all_reduce overflow_norm %st group @a phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %n phase boundary : tensor<2xf32> -> i1

  zero.optimizer_step group @a stats %n scale %s skip %skip divisor 4.0 phase boundary : tensor<2xf32>
  zero.free %pa phase step_end : tensor<4xf32>
  zero.return %loss : tensor<f32>
}

// -----

// MiCS without the replica sum.
// // expected-error @+2 {{elements [0, 4) of partition @a (@a.w) are never summed over the MiCS replicas}}
zero.param @a.w : tensor<4xf32> init zeros
zero.partition @a stage 3 world_size 2 alignment 2 numel 4 padded 4 params [@a.w] offsets [0]
zero.train_step @missing(%x: tensor<1x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 4, mesh = #zero.mesh<[data = 2, mics = 2]>> {
  %pa = zero.all_gather group @a persistent : tensor<4xf32>
  %w = zero.get_param @a.w from %pa : tensor<4xf32> -> tensor<4xf32>
  %loss = nn.fill 0.0 : tensor<f32>
  %seed = nn.fill 1.0 {zero.loss_seed} : tensor<f32>
  %g = nn.fill 1.0 : tensor<4xf32>
  zero.grad @a.w, %g : tensor<4xf32>
  zero.reduce_scatter group @a [0, 4) from %g at [0] : tensor<4xf32>
  zero.free %g : tensor<4xf32>

  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@a] scale %s divisor 4.0 phase boundary : tensor<2xf32>
  %n = zero.all_reduce overflow_norm %st group @a phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %n phase boundary : tensor<2xf32> -> i1

  zero.optimizer_step group @a stats %n scale %s skip %skip divisor 4.0 phase boundary : tensor<2xf32>
  zero.free %pa phase step_end : tensor<4xf32>
  zero.return %loss : tensor<f32>
}

// -----

// The replica sum twice.
zero.param @a.w : tensor<4xf32> init zeros
zero.partition @a stage 3 world_size 2 alignment 2 numel 4 padded 4 params [@a.w] offsets [0]
zero.train_step @twice(%x: tensor<1x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 4, mesh = #zero.mesh<[data = 2, mics = 2]>> {
  %pa = zero.all_gather group @a persistent : tensor<4xf32>
  %w = zero.get_param @a.w from %pa : tensor<4xf32> -> tensor<4xf32>
  %loss = nn.fill 0.0 : tensor<f32>
  %seed = nn.fill 1.0 {zero.loss_seed} : tensor<f32>
  %g = nn.fill 1.0 : tensor<4xf32>
  zero.grad @a.w, %g : tensor<4xf32>
  zero.reduce_scatter group @a [0, 4) from %g at [0] : tensor<4xf32>
  zero.free %g : tensor<4xf32>
  %t = zero.all_reduce sum group @a in grads [0, 4) over replicas phase boundary token !zero.token
  zero.wait %t phase boundary
  // expected-error @+1 {{'zero.all_reduce' op sums over the MiCS replicas the gradients of elements [0, 4) of partition @a (@a.w) a second time in this step}}
  %t2 = zero.all_reduce sum group @a in grads [0, 4) over replicas phase boundary token !zero.token
  zero.wait %t2 phase boundary
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@a] scale %s divisor 4.0 phase boundary : tensor<2xf32>
  %n = zero.all_reduce overflow_norm %st group @a phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %n phase boundary : tensor<2xf32> -> i1

  zero.optimizer_step group @a stats %n scale %s skip %skip divisor 4.0 phase boundary : tensor<2xf32>
  zero.free %pa phase step_end : tensor<4xf32>
  zero.return %loss : tensor<f32>
}

// -----

// A replica sum without MiCS.
zero.param @a.w : tensor<4xf32> init zeros
zero.partition @a stage 3 world_size 2 alignment 2 numel 4 padded 4 params [@a.w] offsets [0]
zero.train_step @no_mics(%x: tensor<1x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 2> {
  %pa = zero.all_gather group @a persistent : tensor<4xf32>
  %w = zero.get_param @a.w from %pa : tensor<4xf32> -> tensor<4xf32>
  %loss = nn.fill 0.0 : tensor<f32>
  %seed = nn.fill 1.0 {zero.loss_seed} : tensor<f32>
  %g = nn.fill 1.0 : tensor<4xf32>
  zero.grad @a.w, %g : tensor<4xf32>
  zero.reduce_scatter group @a [0, 4) from %g at [0] : tensor<4xf32>
  zero.free %g : tensor<4xf32>
  // expected-error @+1 {{'zero.all_reduce' op sums gradients over the MiCS replicas, but the schedule has none (no mics_shard_size below the world size)}}
  %t = zero.all_reduce sum group @a in grads [0, 4) over replicas phase boundary token !zero.token
  zero.wait %t phase boundary
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@a] scale %s divisor 2.0 phase boundary : tensor<2xf32>
  %n = zero.all_reduce overflow_norm %st group @a phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %n phase boundary : tensor<2xf32> -> i1

  zero.optimizer_step group @a stats %n scale %s skip %skip divisor 2.0 phase boundary : tensor<2xf32>
  zero.free %pa phase step_end : tensor<4xf32>
  zero.return %loss : tensor<f32>
}

// -----

// A replica sum with one shard group (no replicas).
zero.param @a.w : tensor<4xf32> init zeros
zero.partition @a stage 3 world_size 2 alignment 2 numel 4 padded 4 params [@a.w] offsets [0]
zero.train_step @one_group(%x: tensor<1x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 2, mesh = #zero.mesh<[data = 1, mics = 2]>> {
  %pa = zero.all_gather group @a persistent : tensor<4xf32>
  %w = zero.get_param @a.w from %pa : tensor<4xf32> -> tensor<4xf32>
  %loss = nn.fill 0.0 : tensor<f32>
  %seed = nn.fill 1.0 {zero.loss_seed} : tensor<f32>
  %g = nn.fill 1.0 : tensor<4xf32>
  zero.grad @a.w, %g : tensor<4xf32>
  zero.reduce_scatter group @a [0, 4) from %g at [0] : tensor<4xf32>
  zero.free %g : tensor<4xf32>
  // expected-error @+1 {{'zero.all_reduce' op sums gradients over the MiCS replicas, but the schedule has none (no mics_shard_size below the world size)}}
  %t = zero.all_reduce sum group @a in grads [0, 4) over replicas phase boundary token !zero.token
  zero.wait %t phase boundary
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@a] scale %s divisor 2.0 phase boundary : tensor<2xf32>
  %n = zero.all_reduce overflow_norm %st group @a phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %n phase boundary : tensor<2xf32> -> i1

  zero.optimizer_step group @a stats %n scale %s skip %skip divisor 2.0 phase boundary : tensor<2xf32>
  zero.free %pa phase step_end : tensor<4xf32>
  zero.return %loss : tensor<f32>
}

// -----

// The replica sum completes after the overflow check read the gradients.
zero.param @a.w : tensor<4xf32> init zeros
zero.partition @a stage 3 world_size 2 alignment 2 numel 4 padded 4 params [@a.w] offsets [0]
zero.train_step @late(%x: tensor<1x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 4, mesh = #zero.mesh<[data = 2, mics = 2]>> {
  %pa = zero.all_gather group @a persistent : tensor<4xf32>
  %w = zero.get_param @a.w from %pa : tensor<4xf32> -> tensor<4xf32>
  %loss = nn.fill 0.0 : tensor<f32>
  %seed = nn.fill 1.0 {zero.loss_seed} : tensor<f32>
  %g = nn.fill 1.0 : tensor<4xf32>
  zero.grad @a.w, %g : tensor<4xf32>
  zero.reduce_scatter group @a [0, 4) from %g at [0] : tensor<4xf32>
  zero.free %g : tensor<4xf32>

  %s = zero.loss_scale phase boundary : tensor<f32>
  // expected-note @+1 {{the overflow check}}
  %st = zero.check_overflow groups [@a] scale %s divisor 4.0 phase boundary : tensor<2xf32>
  %n = zero.all_reduce overflow_norm %st group @a phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %n phase boundary : tensor<2xf32> -> i1
  // expected-error @+2 {{'zero.wait' op completes the MiCS replica sum of @a after the overflow check reads it}}
  %t = zero.all_reduce sum group @a in grads [0, 4) over replicas phase boundary token !zero.token
  zero.wait %t phase boundary
  zero.optimizer_step group @a stats %n scale %s skip %skip divisor 4.0 phase boundary : tensor<2xf32>
  zero.free %pa phase step_end : tensor<4xf32>
  zero.return %loss : tensor<f32>
}

// -----

// The replica sum starts before the shard group's reduction completed.
zero.param @a.w : tensor<4xf32> init zeros
zero.partition @a stage 3 world_size 2 alignment 2 numel 4 padded 4 params [@a.w] offsets [0]
zero.train_step @early(%x: tensor<1x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 4, mesh = #zero.mesh<[data = 2, mics = 2]>> {
  %pa = zero.all_gather group @a persistent : tensor<4xf32>
  %w = zero.get_param @a.w from %pa : tensor<4xf32> -> tensor<4xf32>
  %loss = nn.fill 0.0 : tensor<f32>
  %seed = nn.fill 1.0 {zero.loss_seed} : tensor<f32>
  %g = nn.fill 1.0 : tensor<4xf32>
  zero.grad @a.w, %g : tensor<4xf32>
  %r = zero.reduce_scatter group @a [0, 4) from %g at [0] : tensor<4xf32> phase last_micro_step -> !zero.token
  // expected-error @+1 {{'zero.all_reduce' op sums gradients of @a over the MiCS replicas before the shard group's reduction completed}}
  %t = zero.all_reduce sum group @a in grads [0, 4) over replicas phase boundary token !zero.token
  // expected-note @+1 {{the reduction completes here}}
  zero.wait %r phase boundary
  zero.free %g phase boundary : tensor<4xf32>
  zero.wait %t phase boundary
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@a] scale %s divisor 4.0 phase boundary : tensor<2xf32>
  %n = zero.all_reduce overflow_norm %st group @a phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %n phase boundary : tensor<2xf32> -> i1

  zero.optimizer_step group @a stats %n scale %s skip %skip divisor 4.0 phase boundary : tensor<2xf32>
  zero.free %pa phase step_end : tensor<4xf32>
  zero.return %loss : tensor<f32>
}
