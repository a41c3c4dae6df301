// RUN: zero-opt %s -split-input-file --zero-optimizer | FileCheck %s

// Stage 0 under expert parallelism (ep 2 on 2 ranks): every rank holds the
// dense gradients whole but only its member's experts. The expert
// partition's flag and squared norm are checked apart, all-reduced over the
// expert-parallel set (`across expert`) and combined with the dense check,
// whose result every later op reads; the dense stats are not reduced.
zero.param @d.w : tensor<4xf32> init zeros
zero.param @e.w : tensor<2x4xf32> init zeros
zero.partition @d stage 0 world_size 2 alignment 1 numel 4 padded 4 params [@d.w] offsets [0]
zero.partition @e stage 0 world_size 1 alignment 1 numel 8 padded 8 params [@e.w] offsets [0] expert
// CHECK-LABEL: zero.train_step @ep_stage0
// CHECK: %[[S:.*]] = zero.loss_scale phase boundary
// CHECK-NEXT: %[[E:.*]] = zero.check_overflow groups [@e] scale %[[S]] divisor 2.000000e+00 phase boundary : tensor<2xf32>
// CHECK-NEXT: %[[R:.*]] = zero.all_reduce overflow_norm %[[E]] group @e across expert phase boundary : tensor<2xf32> -> tensor<2xf32>
// CHECK-NEXT: %[[G:.*]] = zero.check_overflow groups [@d] scale %[[S]] divisor 2.000000e+00 combine %[[R]] phase boundary : tensor<2xf32>
// CHECK-NEXT: %[[SKIP:.*]] = zero.update_loss_scale %[[G]]
// CHECK-NEXT: zero.optimizer_step group @d stats %[[G]] scale %[[S]] skip %[[SKIP]]
// CHECK-NEXT: zero.optimizer_step group @e stats %[[G]] scale %[[S]] skip %[[SKIP]]
// CHECK-NOT: zero.all_reduce
// CHECK: zero.return
zero.train_step @ep_stage0(%x: tensor<2x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 2, global_batch = 4, mesh = #zero.mesh<[data = 1, expert = 2]>> {
  %loss = nn.fill 0.0 : tensor<f32>
  %gd = nn.fill 1.0 : tensor<4xf32>
  zero.grad @d.w, %gd : tensor<4xf32>
  %ge = nn.fill 1.0 : tensor<2x4xf32>
  zero.grad @e.w, %ge : tensor<2x4xf32>
  zero.all_reduce sum group @d in grads [0, 4) phase boundary
  zero.return %loss : tensor<f32>
}

// -----

// Only expert partitions: their reduced stats are the step's.
zero.param @e.w : tensor<2x4xf32> init zeros
zero.partition @e stage 0 world_size 1 alignment 1 numel 8 padded 8 params [@e.w] offsets [0] expert
// CHECK-LABEL: zero.train_step @ep_experts_only
// CHECK: %[[E:.*]] = zero.check_overflow groups [@e]
// CHECK-NEXT: %[[R:.*]] = zero.all_reduce overflow_norm %[[E]] group @e across expert
// CHECK-NEXT: zero.update_loss_scale %[[R]]
// CHECK-NEXT: zero.optimizer_step group @e stats %[[R]]
zero.train_step @ep_experts_only(%x: tensor<2x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 2, global_batch = 4, mesh = #zero.mesh<[data = 1, expert = 2]>> {
  %loss = nn.fill 0.0 : tensor<f32>
  %ge = nn.fill 1.0 : tensor<2x4xf32>
  zero.grad @e.w, %ge : tensor<2x4xf32>
  zero.return %loss : tensor<f32>
}

// -----

// Stage 1 under expert parallelism (ep 2 on 4 ranks), the expert partition
// first: each rank owns a shard of every partition, so one check covers
// them all and its stats are summed over the group, which the dense
// partition names (the expert partition's rank set is its 2 replicas).
zero.param @e.w : tensor<2x4xf32> init zeros
zero.param @d.w : tensor<4xf32> init zeros
zero.partition @e stage 1 world_size 2 alignment 2 numel 8 padded 8 params [@e.w] offsets [0] expert
zero.partition @d stage 1 world_size 4 alignment 1 numel 4 padded 4 params [@d.w] offsets [0]
// CHECK-LABEL: zero.train_step @ep_stage1
// CHECK: %[[ST:.*]] = zero.check_overflow groups [@e, @d] scale
// CHECK-NEXT: zero.all_reduce overflow_norm %[[ST]] group @d phase boundary
// CHECK-NOT: across
// CHECK: zero.return
zero.train_step @ep_stage1(%x: tensor<2x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 1, world_size = 4, global_batch = 8, mesh = #zero.mesh<[data = 2, expert = 2]>> {
  %loss = nn.fill 0.0 : tensor<f32>
  %ge = nn.fill 1.0 : tensor<2x4xf32>
  zero.grad @e.w, %ge : tensor<2x4xf32>
  %gd = nn.fill 1.0 : tensor<4xf32>
  zero.grad @d.w, %gd : tensor<4xf32>
  zero.reduce_scatter group @e in grads [0, 8) phase boundary
  zero.reduce_scatter group @d in grads [0, 4) phase boundary
  zero.return %loss : tensor<f32>
}
