// RUN: zero-opt %s -split-input-file --zero-optimizer | FileCheck %s
// RUN: zero-opt %s -split-input-file --zero-optimizer="gradient-clipping=0.5" | FileCheck %s --check-prefix=CLIP
// RUN: zero-opt %s -split-input-file --zero-optimizer="gradient-clipping=0.0" | FileCheck %s --check-prefix=NOCLIP

// Stage 2 at fp16 after an overlapped zero-grad-sync on 2 ranks: after the
// last wait come the loss scale, one read-only overflow/norm pass over the
// owned gradients, one small all-reduce (flag max, norm sum), the scaler
// update and fused Adam, all in the boundary phase. The divisor is world size
// x accumulation steps = 2.
zero.param @a : tensor<4xf32> init zeros compute f16
zero.param @b : tensor<4xf32> init zeros compute f16
zero.partition @flat stage 2 world_size 2 alignment 2 numel 8 padded 8 params [@a, @b] offsets [0, 4]
// CHECK-LABEL: zero.train_step @stage2
// CHECK-SAME: gradient_clipping 1.000000e+00
// CHECK: zero.wait
// CHECK-NEXT: zero.free
// CHECK-NEXT: zero.free
// CHECK-NEXT: %[[S:.*]] = zero.loss_scale phase boundary : tensor<f32>
// CHECK-NEXT: %[[ST:.*]] = zero.check_overflow groups [@flat] scale %[[S]] divisor 2.000000e+00 phase boundary : tensor<2xf32>
// CHECK-NEXT: %[[G:.*]] = zero.all_reduce overflow_norm %[[ST]] group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
// CHECK-NEXT: %[[SKIP:.*]] = zero.update_loss_scale %[[G]] phase boundary : tensor<2xf32> -> i1
// CHECK-NEXT: zero.optimizer_step group @flat stats %[[G]] scale %[[S]] skip %[[SKIP]] divisor 2.000000e+00 phase boundary : tensor<2xf32>
// CHECK-NEXT: zero.return
// gradient-clipping >= 0 overrides the step's value; 0 disables clipping.
// CLIP-LABEL: zero.train_step @stage2
// CLIP-SAME: gradient_clipping 5.000000e-01
// NOCLIP-LABEL: zero.train_step @stage2
// NOCLIP-NOT: gradient_clipping
// NOCLIP: zero.optimizer_step
zero.train_step @stage2(%x: tensor<2x4xf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp16>
    gradient_clipping 1.0
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 4> {
  %loss = nn.fill 0.0 : tensor<f32>
  %gb = nn.fill 1.0 : tensor<4xf16>
  zero.grad @b, %gb : tensor<4xf16>
  %ga = nn.fill 1.0 : tensor<4xf16>
  zero.grad @a, %ga : tensor<4xf16>
  %t = zero.reduce_scatter group @flat [0, 8) from %ga, %gb at [0, 0] : tensor<4xf16>, tensor<4xf16> -> !zero.token
  zero.wait %t
  zero.free %ga : tensor<4xf16>
  zero.free %gb : tensor<4xf16>
  zero.return %loss : tensor<f32>
}

// -----

// Stage 0: every rank already holds the fully reduced gradients, so the
// stats are not all-reduced (that would count the norm world-size times).
zero.param @a : tensor<4xf32> init zeros
zero.partition @flat stage 0 world_size 2 alignment 2 numel 4 padded 4 params [@a] offsets [0]
// CHECK-LABEL: zero.train_step @stage0
// CHECK: %[[ST:.*]] = zero.check_overflow groups [@flat] scale %{{.*}} divisor 2.000000e+00
// CHECK-NOT: overflow_norm
// CHECK-NEXT: zero.update_loss_scale %[[ST]]
// CHECK-NEXT: zero.optimizer_step group @flat stats %[[ST]]
zero.train_step @stage0(%x: tensor<2x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 2, global_batch = 4> {
  %loss = nn.fill 0.0 : tensor<f32>
  %ga = nn.fill 1.0 : tensor<4xf32>
  zero.grad @a, %ga : tensor<4xf32>
  zero.all_reduce sum group @flat in grads [0, 4) phase boundary
  zero.return %loss : tensor<f32>
}

// -----

// Stage 1 with 2 accumulation steps on 2 ranks (global batch 8 = 2 rows x
// 2 ranks x 2): the divisor is 2 x 2 = 4, and the step goes before the
// post-step gather that zero-param-gather already emitted.
zero.param @a : tensor<4xf32> init zeros
zero.partition @flat stage 1 world_size 2 alignment 2 numel 4 padded 4 params [@a] offsets [0]
// CHECK-LABEL: zero.train_step @accumulate
// CHECK: zero.reduce_scatter group @flat in grads [0, 4) phase boundary
// CHECK-NEXT: zero.loss_scale
// CHECK-NEXT: zero.check_overflow {{.*}} divisor 4.000000e+00 phase boundary
// CHECK: zero.optimizer_step group @flat {{.*}} divisor 4.000000e+00 phase boundary
// CHECK-NEXT: zero.all_gather group @flat in params [0, 4) phase post_step
// CHECK-NEXT: zero.return
zero.train_step @accumulate(%x: tensor<2x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 1, world_size = 2, global_batch = 8, accumulation_steps = 2> {
  %loss = nn.fill 0.0 : tensor<f32>
  %ga = nn.fill 1.0 : tensor<4xf32>
  zero.grad @a, %ga : tensor<4xf32>
  zero.reduce_scatter group @flat in grads [0, 4) phase boundary
  zero.all_gather group @flat in params [0, 4) phase post_step
  zero.return %loss : tensor<f32>
}

// -----

// Stage 3: one overflow pass over every group, the stats reduced over the
// first group, one Adam per group, all before the post-step free of a
// persistent gather.
zero.param @l0.w : tensor<4xf32> init zeros
zero.param @l1.w : tensor<4xf32> init zeros
zero.partition @l0 stage 3 world_size 2 alignment 2 numel 4 padded 4 params [@l0.w] offsets [0]
zero.partition @l1 stage 3 world_size 2 alignment 2 numel 4 padded 4 params [@l1.w] offsets [0]
// CHECK-LABEL: zero.train_step @stage3
// CHECK: zero.check_overflow groups [@l0, @l1] scale %{{.*}} divisor 2.000000e+00
// CHECK-NEXT: zero.all_reduce overflow_norm %{{.*}} group @l0
// CHECK-NEXT: zero.update_loss_scale
// CHECK-NEXT: zero.optimizer_step group @l0
// CHECK-NEXT: zero.optimizer_step group @l1
// CHECK-NEXT: zero.free %{{.*}} phase step_end
// CHECK-NEXT: zero.return
zero.train_step @stage3(%x: tensor<2x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4> {
  %full = zero.all_gather group @l0 persistent : tensor<4xf32>
  %w = zero.get_param @l0.w from %full : tensor<4xf32> -> tensor<4xf32>
  %loss = nn.fill 0.0 : tensor<f32>
  %g1 = nn.fill 1.0 : tensor<4xf32>
  zero.grad @l1.w, %g1 : tensor<4xf32>
  zero.reduce_scatter group @l1 [0, 4) from %g1 at [0] : tensor<4xf32>
  zero.free %g1 : tensor<4xf32>
  %g0 = nn.fill 1.0 : tensor<4xf32>
  zero.grad @l0.w, %g0 : tensor<4xf32>
  zero.reduce_scatter group @l0 [0, 4) from %g0 at [0] : tensor<4xf32>
  zero.free %g0 : tensor<4xf32>
  zero.free %full phase step_end : tensor<4xf32>
  zero.return %loss : tensor<f32>
}
