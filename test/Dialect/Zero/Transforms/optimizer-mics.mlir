// RUN: zero-opt %s -split-input-file --zero-optimizer | FileCheck %s

// MiCS: two shard groups of 2 in a world of 4. Each partition's gradient
// shards are summed over the replicas (ranks with equal rank % 2) at the
// boundary, all issued before the first wait and all completed before the
// overflow check reads them; the divisor stays the world's (4), and the
// overflow flag and squared norm are reduced over the shard group, whose
// owned gradients together are the whole model's.
zero.param @a.w : tensor<4xf32> init zeros
zero.param @b.w : tensor<6xf32> init zeros
zero.partition @a stage 3 world_size 2 alignment 2 numel 4 padded 4 params [@a.w] offsets [0]
zero.partition @b stage 3 world_size 2 alignment 2 numel 6 padded 8 params [@b.w] offsets [0]
// CHECK-LABEL: zero.train_step @mics
// CHECK: zero.reduce_scatter group @a
// CHECK: %[[TA:.*]] = zero.all_reduce sum group @a in grads [0, 4) over replicas phase boundary token !zero.token
// CHECK-NEXT: %[[TB:.*]] = zero.all_reduce sum group @b in grads [0, 6) over replicas phase boundary token !zero.token
// CHECK-NEXT: zero.wait %[[TA]] phase boundary
// CHECK-NEXT: zero.wait %[[TB]] phase boundary
// CHECK-NEXT: %[[S:.*]] = zero.loss_scale phase boundary
// CHECK-NEXT: %[[ST:.*]] = zero.check_overflow groups [@a, @b] scale %[[S]] divisor 4.000000e+00 phase boundary
// CHECK-NEXT: zero.all_reduce overflow_norm %[[ST]] group @a phase boundary
// CHECK-NOT: over replicas
zero.train_step @mics(%x: tensor<1x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 4, mesh = #zero.mesh<[data = 2, mics = 2]>> {
  %pa = zero.all_gather group @a persistent : tensor<4xf32>
  %pb = zero.all_gather group @b persistent : tensor<8xf32>
  %w = zero.get_param @a.w from %pa : tensor<4xf32> -> tensor<4xf32>
  %v = zero.get_param @b.w from %pb : tensor<8xf32> -> tensor<6xf32>
  %loss = nn.fill 0.0 : tensor<f32>
  %seed = nn.fill 1.0 {zero.loss_seed} : tensor<f32>
  %g = nn.fill 1.0 : tensor<4xf32>
  zero.grad @a.w, %g : tensor<4xf32>
  zero.reduce_scatter group @a [0, 4) from %g at [0] : tensor<4xf32>
  zero.free %g : tensor<4xf32>
  %h = nn.fill 1.0 : tensor<6xf32>
  zero.grad @b.w, %h : tensor<6xf32>
  zero.reduce_scatter group @b [0, 6) from %h at [0] : tensor<6xf32>
  zero.free %h : tensor<6xf32>
  zero.free %pa phase step_end : tensor<4xf32>
  zero.free %pb phase step_end : tensor<8xf32>
  zero.return %loss : tensor<f32>
}

// -----

// One shard group holding the whole world: no replicas, nothing to sum.
zero.param @a.w : tensor<4xf32> init zeros
zero.partition @a stage 3 world_size 2 alignment 2 numel 4 padded 4 params [@a.w] offsets [0]
// CHECK-LABEL: zero.train_step @one_group
// CHECK-NOT: over replicas
// CHECK: zero.check_overflow
zero.train_step @one_group(%x: tensor<2x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4, mesh = #zero.mesh<[data = 1, mics = 2]>> {
  %pa = zero.all_gather group @a persistent : tensor<4xf32>
  %w = zero.get_param @a.w from %pa : tensor<4xf32> -> tensor<4xf32>
  %loss = nn.fill 0.0 : tensor<f32>
  %seed = nn.fill 1.0 {zero.loss_seed} : tensor<f32>
  %g = nn.fill 1.0 : tensor<4xf32>
  zero.grad @a.w, %g : tensor<4xf32>
  zero.reduce_scatter group @a [0, 4) from %g at [0] : tensor<4xf32>
  zero.free %g : tensor<4xf32>
  zero.free %pa phase step_end : tensor<4xf32>
  zero.return %loss : tensor<f32>
}
