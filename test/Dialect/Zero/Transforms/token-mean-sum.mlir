// RUN: zero-opt %s -split-input-file --zero-token-mean | FileCheck %s

// A loss divided by its mask's sum, clamped to 1 (TRL's
// `(x * mask).sum() / mask.sum().clamp(min=1)`), on 2 ranks x 2 micro
// steps: the micro batch's sum is summed over the global batch
// (zero.count_sum, read back by zero.step_sum), the clamp applies to that
// global sum, and the denominator is multiplied by the micro batch's share
// 1/4, so that the mean of the 4 micro losses is the global ratio.
zero.param @w : tensor<4x3xf32> init zeros
zero.partition @flat stage 0 world_size 2 alignment 2 numel 12 padded 12 params [@w] offsets [0]
// CHECK-LABEL: zero.train_step @masked(
// CHECK-SAME: %[[X:.*]]: tensor<2x4xf32>, %[[MASK:.*]]: tensor<2x3xf32>)
zero.train_step @masked(%x: tensor<2x4xf32>, %mask: tensor<2x3xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 2, global_batch = 8, accumulation_steps = 2> {
  %w = zero.get_param @w : tensor<4x3xf32>
  %z = nn.matmul %x, %w : tensor<2x4xf32>, tensor<4x3xf32> -> tensor<2x3xf32>
  %zm = nn.mul %z, %mask : tensor<2x3xf32>, tensor<2x3xf32>
  %ones = nn.fill 1.0 : tensor<1x3xf32>
  %zs = nn.matmul %zm, %ones transpose_rhs : tensor<2x3xf32>, tensor<1x3xf32> -> tensor<2x1xf32>
  %num = nn.reduce_sum %zs : tensor<2x1xf32> -> tensor<f32>
  // CHECK: %[[ROWS:.*]] = nn.matmul %[[MASK]], %{{.*}} transpose_rhs
  // CHECK-NEXT: %[[SUM:.*]] = nn.reduce_sum %[[ROWS]] : tensor<2x1xf32> -> tensor<f32>
  // CHECK-NEXT: zero.count_sum %[[SUM]] index 0 group @flat : tensor<f32> -> tensor<1xf32>
  // CHECK-NEXT: %[[GLOBAL:.*]] = zero.step_sum index 0 : tensor<f32>
  // CHECK-NEXT: %[[CLAMPED:.*]] = nn.clamp %[[GLOBAL]] min 1.000000e+00 : tensor<f32>
  // CHECK-NEXT: %[[SHARE:.*]] = zero.micro_share divisor 4.000000e+00 : tensor<f32>
  // CHECK-NEXT: %[[DENOM:.*]] = nn.mul %[[CLAMPED]], %[[SHARE]] : tensor<f32>, tensor<f32>
  // CHECK-NEXT: %[[INV:.*]] = nn.reciprocal %[[DENOM]] : tensor<f32>
  // CHECK-NEXT: %[[LOSS:.*]] = nn.mul %{{.*}}, %[[INV]]
  %ones2 = nn.fill 1.0 : tensor<1x3xf32>
  %ms = nn.matmul %mask, %ones2 transpose_rhs : tensor<2x3xf32>, tensor<1x3xf32> -> tensor<2x1xf32>
  %den = nn.reduce_sum %ms : tensor<2x1xf32> -> tensor<f32>
  %c = nn.clamp %den min 1.0 : tensor<f32>
  %inv = nn.reciprocal %c : tensor<f32>
  %loss = nn.mul %num, %inv : tensor<f32>, tensor<f32>
  // CHECK: nn.mul %{{.*}}, %[[INV]] : tensor<f32>, tensor<f32>
  %seed = nn.fill 1.0 {zero.loss_seed} : tensor<f32>
  %dnum = nn.mul %seed, %inv : tensor<f32>, tensor<f32>
  %dzs = nn.reduce_sum_grad %zs, %dnum : tensor<2x1xf32>, tensor<f32>
  %dzm = nn.matmul %dzs, %ones2 : tensor<2x1xf32>, tensor<1x3xf32> -> tensor<2x3xf32>
  %dz = nn.mul %dzm, %mask : tensor<2x3xf32>, tensor<2x3xf32>
  %dw = nn.matmul %x, %dz transpose_lhs : tensor<2x4xf32>, tensor<2x3xf32> -> tensor<4x3xf32>
  zero.grad @w, %dw : tensor<4x3xf32>
  // CHECK: zero.return %[[LOSS]] : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// One rank, one micro step: the micro batch's sum is the global batch's,
// and the step is left as it is.
zero.param @w : tensor<4x3xf32> init zeros
zero.partition @flat stage 0 world_size 1 alignment 2 numel 12 padded 12 params [@w] offsets [0]
// CHECK-LABEL: zero.train_step @alone
// CHECK-NOT: zero.count_sum
// CHECK: zero.return
zero.train_step @alone(%x: tensor<2x4xf32>, %mask: tensor<2x3xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 2> {
  %w = zero.get_param @w : tensor<4x3xf32>
  %z = nn.matmul %x, %w : tensor<2x4xf32>, tensor<4x3xf32> -> tensor<2x3xf32>
  %zm = nn.mul %z, %mask : tensor<2x3xf32>, tensor<2x3xf32>
  %ones = nn.fill 1.0 : tensor<1x3xf32>
  %zs = nn.matmul %zm, %ones transpose_rhs : tensor<2x3xf32>, tensor<1x3xf32> -> tensor<2x1xf32>
  %num = nn.reduce_sum %zs : tensor<2x1xf32> -> tensor<f32>
  %ms = nn.matmul %mask, %ones transpose_rhs : tensor<2x3xf32>, tensor<1x3xf32> -> tensor<2x1xf32>
  %den = nn.reduce_sum %ms : tensor<2x1xf32> -> tensor<f32>
  %inv = nn.reciprocal %den : tensor<f32>
  %loss = nn.mul %num, %inv : tensor<f32>, tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// A division by something of the parameters (a norm of their sum) is the
// model's own and left alone, as is that sum (every micro batch's); two
// terms over the same mask's sums each get their global sum, numbered in
// order, and an eps added to the sum is added to the global sum. The
// numerators, divided by global sums, are left as they are.
zero.param @w : tensor<4x3xf32> init zeros
zero.partition @flat stage 0 world_size 2 alignment 2 numel 12 padded 12 params [@w] offsets [0]
// CHECK-LABEL: zero.train_step @terms
// CHECK-NOT: nn.scale %{{.*}} by 2.0
// CHECK: nn.reciprocal %{{.*}} : tensor<f32>
// CHECK: zero.count_sum %{{.*}} index 0 group @flat
// CHECK-NEXT: %[[G0:.*]] = zero.step_sum index 0 : tensor<f32>
// CHECK-NEXT: %[[S0:.*]] = zero.micro_share divisor 2.000000e+00
// CHECK-NEXT: nn.mul %[[G0]], %[[S0]]
// CHECK: zero.count_sum %{{.*}} index 1 group @flat
// CHECK-NEXT: %[[G1:.*]] = zero.step_sum index 1 : tensor<f32>
// CHECK-NEXT: %[[EPS:.*]] = nn.add %[[G1]], %{{.*}} : tensor<f32>, tensor<f32>
// CHECK-NEXT: %[[S1:.*]] = zero.micro_share divisor 2.000000e+00
// CHECK-NEXT: nn.mul %[[EPS]], %[[S1]]
zero.train_step @terms(%x: tensor<2x4xf32>, %mask: tensor<2x3xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 2, global_batch = 4> {
  %w = zero.get_param @w : tensor<4x3xf32>
  %z = nn.matmul %x, %w : tensor<2x4xf32>, tensor<4x3xf32> -> tensor<2x3xf32>
  %ones = nn.fill 1.0 : tensor<1x3xf32>
  %zs = nn.matmul %z, %ones transpose_rhs : tensor<2x3xf32>, tensor<1x3xf32> -> tensor<2x1xf32>
  %num = nn.reduce_sum %zs : tensor<2x1xf32> -> tensor<f32>
  %wsum = nn.reduce_sum %w : tensor<4x3xf32> -> tensor<f32>
  %norm = nn.exp %wsum : tensor<f32>
  %ninv = nn.reciprocal %norm : tensor<f32>
  %a = nn.mul %num, %ninv : tensor<f32>, tensor<f32>
  %m1 = nn.matmul %mask, %ones transpose_rhs : tensor<2x3xf32>, tensor<1x3xf32> -> tensor<2x1xf32>
  %d1 = nn.reduce_sum %m1 : tensor<2x1xf32> -> tensor<f32>
  %i1 = nn.reciprocal %d1 : tensor<f32>
  %t1 = nn.mul %a, %i1 : tensor<f32>, tensor<f32>
  %m2 = nn.matmul %mask, %ones transpose_rhs : tensor<2x3xf32>, tensor<1x3xf32> -> tensor<2x1xf32>
  %s2 = nn.reduce_sum %m2 : tensor<2x1xf32> -> tensor<f32>
  %eps = nn.fill 1.0e-6 : tensor<f32>
  %d2 = nn.add %s2, %eps : tensor<f32>, tensor<f32>
  %i2 = nn.reciprocal %d2 : tensor<f32>
  %t2 = nn.mul %num, %i2 : tensor<f32>, tensor<f32>
  %t2s = nn.scale %t2 by 0.5 : tensor<f32>
  %loss = nn.add %t1, %t2s : tensor<f32>, tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// A mean over the batch (zero-import's x.mean(): the sum scaled by 1 /
// numel of the global batch) on 2 ranks x 2 micro steps: the sum and the
// gradient its backward broadcasts are multiplied by 4, so each micro
// batch's loss is its own mean, whose mean over the 4 is the global one.
zero.param @w : tensor<4x3xf32> init zeros
zero.partition @flat stage 0 world_size 2 alignment 2 numel 12 padded 12 params [@w] offsets [0]
// CHECK-LABEL: zero.train_step @mean
zero.train_step @mean(%x: tensor<2x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 2, global_batch = 8, accumulation_steps = 2> {
  %w = zero.get_param @w : tensor<4x3xf32>
  %z = nn.matmul %x, %w : tensor<2x4xf32>, tensor<4x3xf32> -> tensor<2x3xf32>
  %ones = nn.fill 1.0 : tensor<1x3xf32>
  %rows = nn.matmul %z, %ones transpose_rhs : tensor<2x3xf32>, tensor<1x3xf32> -> tensor<2x1xf32>
  // CHECK: %[[SUM:.*]] = nn.reduce_sum %[[ROWS:.*]] : tensor<2x1xf32> -> tensor<f32>
  // CHECK-NEXT: %[[ALL:.*]] = nn.scale %[[SUM]] by 4.000000e+00 : tensor<f32>
  // CHECK-NEXT: %[[LOSS:.*]] = nn.scale %[[ALL]] by 0.0416
  %sum = nn.reduce_sum %rows : tensor<2x1xf32> -> tensor<f32>
  %loss = nn.scale %sum by 0.041666666666666664 : tensor<f32>
  %seed = nn.fill 1.0 {zero.loss_seed} : tensor<f32>
  %dsum = nn.scale %seed by 0.041666666666666664 : tensor<f32>
  // CHECK: %[[DSUM:.*]] = nn.scale %{{.*}} by 0.0416
  // CHECK-NEXT: %[[DALL:.*]] = nn.scale %[[DSUM]] by 4.000000e+00 : tensor<f32>
  // CHECK-NEXT: nn.reduce_sum_grad %[[ROWS]], %[[DALL]] : tensor<2x1xf32>, tensor<f32>
  %drows = nn.reduce_sum_grad %rows, %dsum : tensor<2x1xf32>, tensor<f32>
  %dz = nn.matmul %drows, %ones : tensor<2x1xf32>, tensor<1x3xf32> -> tensor<2x3xf32>
  %dw = nn.matmul %x, %dz transpose_lhs : tensor<2x4xf32>, tensor<2x3xf32> -> tensor<4x3xf32>
  zero.grad @w, %dw : tensor<4x3xf32>
  // CHECK: zero.return %[[LOSS]] : tensor<f32>
  zero.return %loss : tensor<f32>
}
