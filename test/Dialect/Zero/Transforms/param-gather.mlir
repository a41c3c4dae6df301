// RUN: zero-opt %s -split-input-file --zero-param-gather | FileCheck %s --check-prefix=DEF
// RUN: zero-opt %s -split-input-file --zero-param-gather="allgather-bucket-size=20" | FileCheck %s --check-prefix=B20
// RUN: zero-opt %s -split-input-file --zero-param-gather="param-persistence-threshold=22" | FileCheck %s --check-prefix=T22
// RUN: zero-opt %s -split-input-file --zero-param-gather="param-persistence-threshold=21 max-reuse-distance=23" | FileCheck %s --check-prefix=R23
// RUN: zero-opt %s -split-input-file --zero-param-gather="param-persistence-threshold=21 max-reuse-distance=24" | FileCheck %s --check-prefix=R24
// RUN: not zero-opt %s -split-input-file --zero-param-gather="allgather-bucket-size=0" 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: error: zero-param-gather: allgather-bucket-size must be positive, got 0

// Stages 1-2: after the optimizer step, the updated parameters (51 elements
// of the two-layer MLP) are gathered in place in buckets of
// allgather-bucket-size, tagged post-step and boundary. Input: after
// zero-grad-sync and zero-optimizer.
zero.param @fc1.weight : tensor<4x6xf32> init normal std 0.5
zero.param @fc1.bias : tensor<6xf32> init zeros
zero.param @fc2.weight : tensor<6x3xf32> init normal std 0.4
zero.param @fc2.bias : tensor<3xf32> init zeros
zero.partition @flat stage 2 world_size 2 alignment 2 numel 51 padded 52 params [@fc1.weight, @fc1.bias, @fc2.weight, @fc2.bias] offsets [0, 24, 30, 48]
// DEF-LABEL: zero.train_step @stage2
// DEF: zero.optimizer_step group @flat
// DEF-NEXT: zero.all_gather group @flat in params [0, 51) phase post_step
// DEF-NEXT: zero.return
// B20-LABEL: zero.train_step @stage2
// B20-NOT: zero.all_gather
// B20: zero.optimizer_step group @flat
// B20-NEXT: zero.all_gather group @flat in params [0, 20) phase post_step
// B20-NEXT: zero.all_gather group @flat in params [20, 40) phase post_step
// B20-NEXT: zero.all_gather group @flat in params [40, 51) phase post_step
// B20-NEXT: zero.return
zero.train_step @stage2(%x: tensor<4x4xf32>, %y: tensor<4xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 8> {
  %0 = zero.get_param @fc1.weight : tensor<4x6xf32>
  %1 = nn.matmul %x, %0 : tensor<4x4xf32>, tensor<4x6xf32> -> tensor<4x6xf32>
  %2 = zero.get_param @fc1.bias : tensor<6xf32>
  %3 = nn.add %1, %2 : tensor<4x6xf32>, tensor<6xf32>
  %4 = nn.relu %3 : tensor<4x6xf32>
  %5 = zero.get_param @fc2.weight : tensor<6x3xf32>
  %6 = nn.matmul %4, %5 : tensor<4x6xf32>, tensor<6x3xf32> -> tensor<4x3xf32>
  %7 = zero.get_param @fc2.bias : tensor<3xf32>
  %8 = nn.add %6, %7 : tensor<4x3xf32>, tensor<3xf32>
  %loss = nn.softmax_cross_entropy %8, %y : tensor<4x3xf32>, tensor<4xi64> -> tensor<f32>
  %seed = nn.fill 1.0 {zero.loss_seed} : tensor<f32>
  %11 = nn.softmax_cross_entropy_grad %8, %y, %seed : tensor<4x3xf32>, tensor<4xi64>, tensor<f32>
  %g2b = nn.reduce_sum %11 : tensor<4x3xf32> -> tensor<3xf32>
  zero.grad @fc2.bias, %g2b : tensor<3xf32>
  %13 = nn.matmul %11, %5 transpose_rhs : tensor<4x3xf32>, tensor<6x3xf32> -> tensor<4x6xf32>
  %g2w = nn.matmul %4, %11 transpose_lhs : tensor<4x6xf32>, tensor<4x3xf32> -> tensor<6x3xf32>
  zero.grad @fc2.weight, %g2w : tensor<6x3xf32>
  %15 = nn.relu_grad %4, %13 : tensor<4x6xf32>
  %g1b = nn.reduce_sum %15 : tensor<4x6xf32> -> tensor<6xf32>
  zero.grad @fc1.bias, %g1b : tensor<6xf32>
  %g1w = nn.matmul %x, %15 transpose_lhs : tensor<4x4xf32>, tensor<4x6xf32> -> tensor<4x6xf32>
  zero.grad @fc1.weight, %g1w : tensor<4x6xf32>
  zero.reduce_scatter group @flat [0, 51) from %g1w, %g1b, %g2w, %g2b at [0, 0, 0, 0] : tensor<4x6xf32>, tensor<6xf32>, tensor<6x3xf32>, tensor<3xf32>
  zero.free %g1w : tensor<4x6xf32>
  zero.free %g1b : tensor<6xf32>
  zero.free %g2w : tensor<6x3xf32>
  zero.free %g2b : tensor<3xf32>
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 2.0 phase boundary : tensor<2xf32>
  %g = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %g phase boundary : tensor<2xf32> -> i1
  zero.optimizer_step group @flat stats %g scale %s skip %skip divisor 2.0 phase boundary : tensor<2xf32>
  zero.return %loss : tensor<f32>
}

// -----

// Stage 1 before the optimizer has been emitted: the gathers go right before
// zero.return (zero-optimizer will put its step in front of them).
zero.param @fc1.weight : tensor<4x6xf32> init normal std 0.5
zero.param @fc1.bias : tensor<6xf32> init zeros
zero.param @fc2.weight : tensor<6x3xf32> init normal std 0.4
zero.param @fc2.bias : tensor<3xf32> init zeros
zero.partition @flat stage 1 world_size 2 alignment 2 numel 51 padded 52 params [@fc1.weight, @fc1.bias, @fc2.weight, @fc2.bias] offsets [0, 24, 30, 48]
// B20-LABEL: zero.train_step @stage1
// B20: zero.reduce_scatter group @flat in grads [0, 51) phase boundary
// B20-NEXT: zero.all_gather group @flat in params [0, 20) phase post_step
// B20-NEXT: zero.all_gather group @flat in params [20, 40) phase post_step
// B20-NEXT: zero.all_gather group @flat in params [40, 51) phase post_step
// B20-NEXT: zero.return
zero.train_step @stage1(%x: tensor<4x4xf32>, %y: tensor<4xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 1, world_size = 2, global_batch = 8> {
  %0 = zero.get_param @fc1.weight : tensor<4x6xf32>
  %1 = nn.matmul %x, %0 : tensor<4x4xf32>, tensor<4x6xf32> -> tensor<4x6xf32>
  %2 = zero.get_param @fc1.bias : tensor<6xf32>
  %3 = nn.add %1, %2 : tensor<4x6xf32>, tensor<6xf32>
  %4 = nn.relu %3 : tensor<4x6xf32>
  %5 = zero.get_param @fc2.weight : tensor<6x3xf32>
  %6 = nn.matmul %4, %5 : tensor<4x6xf32>, tensor<6x3xf32> -> tensor<4x3xf32>
  %7 = zero.get_param @fc2.bias : tensor<3xf32>
  %8 = nn.add %6, %7 : tensor<4x3xf32>, tensor<3xf32>
  %loss = nn.softmax_cross_entropy %8, %y : tensor<4x3xf32>, tensor<4xi64> -> tensor<f32>
  %seed = nn.fill 1.0 {zero.loss_seed} : tensor<f32>
  %11 = nn.softmax_cross_entropy_grad %8, %y, %seed : tensor<4x3xf32>, tensor<4xi64>, tensor<f32>
  %g2b = nn.reduce_sum %11 : tensor<4x3xf32> -> tensor<3xf32>
  zero.grad @fc2.bias, %g2b : tensor<3xf32>
  %13 = nn.matmul %11, %5 transpose_rhs : tensor<4x3xf32>, tensor<6x3xf32> -> tensor<4x6xf32>
  %g2w = nn.matmul %4, %11 transpose_lhs : tensor<4x6xf32>, tensor<4x3xf32> -> tensor<6x3xf32>
  zero.grad @fc2.weight, %g2w : tensor<6x3xf32>
  %15 = nn.relu_grad %4, %13 : tensor<4x6xf32>
  %g1b = nn.reduce_sum %15 : tensor<4x6xf32> -> tensor<6xf32>
  zero.grad @fc1.bias, %g1b : tensor<6xf32>
  %g1w = nn.matmul %x, %15 transpose_lhs : tensor<4x4xf32>, tensor<4x6xf32> -> tensor<4x6xf32>
  zero.grad @fc1.weight, %g1w : tensor<4x6xf32>
  zero.reduce_scatter group @flat in grads [0, 51) phase boundary
  zero.return %loss : tensor<f32>
}

// -----

// Stage 0: every rank holds every parameter: nothing to gather.
zero.param @fc1.weight : tensor<4x6xf32> init normal std 0.5
zero.param @fc1.bias : tensor<6xf32> init zeros
zero.param @fc2.weight : tensor<6x3xf32> init normal std 0.4
zero.param @fc2.bias : tensor<3xf32> init zeros
zero.partition @flat stage 0 world_size 2 alignment 2 numel 51 padded 51 params [@fc1.weight, @fc1.bias, @fc2.weight, @fc2.bias] offsets [0, 24, 30, 48]
// DEF-LABEL: zero.train_step @stage0
// DEF-NOT: zero.all_gather
// DEF: zero.return
// B20-LABEL: zero.train_step @stage0
// B20-NOT: zero.all_gather
zero.train_step @stage0(%x: tensor<4x4xf32>, %y: tensor<4xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 2, global_batch = 8> {
  %0 = zero.get_param @fc1.weight : tensor<4x6xf32>
  %1 = nn.matmul %x, %0 : tensor<4x4xf32>, tensor<4x6xf32> -> tensor<4x6xf32>
  %2 = zero.get_param @fc1.bias : tensor<6xf32>
  %3 = nn.add %1, %2 : tensor<4x6xf32>, tensor<6xf32>
  %4 = nn.relu %3 : tensor<4x6xf32>
  %5 = zero.get_param @fc2.weight : tensor<6x3xf32>
  %6 = nn.matmul %4, %5 : tensor<4x6xf32>, tensor<6x3xf32> -> tensor<4x3xf32>
  %7 = zero.get_param @fc2.bias : tensor<3xf32>
  %8 = nn.add %6, %7 : tensor<4x3xf32>, tensor<3xf32>
  %loss = nn.softmax_cross_entropy %8, %y : tensor<4x3xf32>, tensor<4xi64> -> tensor<f32>
  %seed = nn.fill 1.0 {zero.loss_seed} : tensor<f32>
  %11 = nn.softmax_cross_entropy_grad %8, %y, %seed : tensor<4x3xf32>, tensor<4xi64>, tensor<f32>
  %g2b = nn.reduce_sum %11 : tensor<4x3xf32> -> tensor<3xf32>
  zero.grad @fc2.bias, %g2b : tensor<3xf32>
  %13 = nn.matmul %11, %5 transpose_rhs : tensor<4x3xf32>, tensor<6x3xf32> -> tensor<4x6xf32>
  %g2w = nn.matmul %4, %11 transpose_lhs : tensor<4x6xf32>, tensor<4x3xf32> -> tensor<6x3xf32>
  zero.grad @fc2.weight, %g2w : tensor<6x3xf32>
  %15 = nn.relu_grad %4, %13 : tensor<4x6xf32>
  %g1b = nn.reduce_sum %15 : tensor<4x6xf32> -> tensor<6xf32>
  zero.grad @fc1.bias, %g1b : tensor<6xf32>
  %g1w = nn.matmul %x, %15 transpose_lhs : tensor<4x4xf32>, tensor<4x6xf32> -> tensor<4x6xf32>
  zero.grad @fc1.weight, %g1w : tensor<4x6xf32>
  zero.all_reduce sum group @flat in grads [0, 51) phase boundary
  %s = zero.loss_scale phase boundary : tensor<f32>
  %g = zero.check_overflow groups [@flat] scale %s divisor 2.0 phase boundary : tensor<2xf32>
  %skip = zero.update_loss_scale %g phase boundary : tensor<2xf32> -> i1
  zero.optimizer_step group @flat stats %g scale %s skip %skip divisor 2.0 phase boundary : tensor<2xf32>
  zero.return %loss : tensor<f32>
}

// -----

// Stage 3 on a three-layer MLP after autodiff and zero-partition (groups
// fc1 30 elements padded to 32, fc2 42 -> 44, fc3 21 -> 24). fc1 is used in
// the forward only (the input gradient is not computed); fc3 and fc2 are
// used again in the backward (the input gradients of their layers).
zero.param @fc1.weight : tensor<4x6xf32> init normal std 0.5
zero.param @fc1.bias : tensor<6xf32> init zeros
zero.param @fc2.weight : tensor<6x6xf32> init normal std 0.4
zero.param @fc2.bias : tensor<6xf32> init zeros
zero.param @fc3.weight : tensor<6x3xf32> init normal std 0.4
zero.param @fc3.bias : tensor<3xf32> init zeros
zero.partition @fc1 stage 3 world_size 2 alignment 2 numel 30 padded 32 params [@fc1.weight, @fc1.bias] offsets [0, 24]
zero.partition @fc2 stage 3 world_size 2 alignment 2 numel 42 padded 44 params [@fc2.weight, @fc2.bias] offsets [0, 36]
zero.partition @fc3 stage 3 world_size 2 alignment 2 numel 21 padded 24 params [@fc3.weight, @fc3.bias] offsets [0, 18]
// Defaults: every group is below DeepSpeed's persistence threshold (1e5):
// each is gathered once at the top and freed after the step.
// DEF-LABEL: zero.train_step @stage3
// DEF-NEXT: %[[F1:.*]] = zero.all_gather group @fc1 persistent : tensor<32xf32>
// DEF-NEXT: %[[F2:.*]] = zero.all_gather group @fc2 persistent : tensor<44xf32>
// DEF-NEXT: %[[F3:.*]] = zero.all_gather group @fc3 persistent : tensor<24xf32>
// DEF-NEXT: zero.get_param @fc1.weight from %[[F1]] : tensor<32xf32> -> tensor<4x6xf32>
// DEF-NOT: zero.all_gather
// DEF-NOT: zero.free
// DEF: zero.grad @fc1.weight
// DEF-NEXT: zero.free %[[F3]] phase step_end
// DEF-NEXT: zero.free %[[F2]] phase step_end
// DEF-NEXT: zero.free %[[F1]] phase step_end
// DEF-NEXT: zero.return

// Threshold 22: only fc3 (21 elements) is persistent; fc1 and fc2 are
// gathered before their first use and freed after their last (the default
// reuse distance keeps fc2 from its forward to its backward).
// T22-LABEL: zero.train_step @stage3
// T22-NEXT: %[[F3:.*]] = zero.all_gather group @fc3 persistent
// T22-NEXT: %[[F1:.*]] = zero.all_gather group @fc1 : tensor<32xf32>
// T22-NEXT: zero.get_param @fc1.weight from %[[F1]]
// T22: zero.get_param @fc1.bias from %[[F1]]
// T22-NEXT: nn.add
// T22-NEXT: zero.free %[[F1]] : tensor<32xf32>
// T22: %[[F2:.*]] = zero.all_gather group @fc2 : tensor<44xf32>
// T22-NOT: zero.all_gather
// T22: nn.matmul %{{.*}}, %{{.*}} transpose_rhs : tensor<4x6xf32>, tensor<6x6xf32>
// T22: zero.free %[[F2]] : tensor<44xf32>
// T22: zero.free %[[F3]] phase step_end
// T22-NEXT: zero.return

// Threshold 21: nothing is persistent. Between fc2's last forward use and
// its first backward use only fc3 (24 gathered elements) is used: a reuse
// distance of 23 frees fc2 and gathers it again with fresh views, 24 keeps it.
// R23-LABEL: zero.train_step @stage3
// R23-NOT:  persistent
// R23: %[[F2:.*]] = zero.all_gather group @fc2 : tensor<44xf32>
// R23: zero.get_param @fc2.bias from %[[F2]]
// R23-NEXT: nn.add
// R23-NEXT: zero.free %[[F2]]
// R23: %[[F3:.*]] = zero.all_gather group @fc3 : tensor<24xf32>
// R23: zero.free %[[F3]]
// R23: %[[F2B:.*]] = zero.all_gather group @fc2 : tensor<44xf32>
// R23-NEXT: %[[V:.*]] = zero.get_param @fc2.weight from %[[F2B]]
// R23-NEXT: nn.matmul %{{.*}}, %[[V]] transpose_rhs
// R23-NEXT: zero.free %[[F2B]]
// R23-NOT: zero.all_gather
// R23: zero.return
// R24-LABEL: zero.train_step @stage3
// R24-COUNT-3: zero.all_gather
// R24-NOT: zero.all_gather
// R24: zero.return
// Stage 3 has no post-step gathers.
// B20-LABEL: zero.train_step @stage3
zero.train_step @stage3(%arg0: tensor<4x4xf32>, %arg1: tensor<4xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 8> {
  %0 = zero.get_param @fc1.weight : tensor<4x6xf32>
  %1 = nn.matmul %arg0, %0 : tensor<4x4xf32>, tensor<4x6xf32> -> tensor<4x6xf32>
  %2 = zero.get_param @fc1.bias : tensor<6xf32>
  %3 = nn.add %1, %2 : tensor<4x6xf32>, tensor<6xf32>
  %4 = nn.relu %3 : tensor<4x6xf32>
  %5 = zero.get_param @fc2.weight : tensor<6x6xf32>
  %6 = nn.matmul %4, %5 : tensor<4x6xf32>, tensor<6x6xf32> -> tensor<4x6xf32>
  %7 = zero.get_param @fc2.bias : tensor<6xf32>
  %8 = nn.add %6, %7 : tensor<4x6xf32>, tensor<6xf32>
  %9 = nn.relu %8 : tensor<4x6xf32>
  %10 = zero.get_param @fc3.weight : tensor<6x3xf32>
  %11 = nn.matmul %9, %10 : tensor<4x6xf32>, tensor<6x3xf32> -> tensor<4x3xf32>
  %12 = zero.get_param @fc3.bias : tensor<3xf32>
  %13 = nn.add %11, %12 : tensor<4x3xf32>, tensor<3xf32>
  %14 = nn.softmax_cross_entropy %13, %arg1 : tensor<4x3xf32>, tensor<4xi64> -> tensor<f32>
  %15 = nn.fill 1.000000e+00 {zero.loss_seed} : tensor<f32>
  %16 = nn.softmax_cross_entropy_grad %13, %arg1, %15 : tensor<4x3xf32>, tensor<4xi64>, tensor<f32>
  %17 = nn.reduce_sum %16 : tensor<4x3xf32> -> tensor<3xf32>
  zero.grad @fc3.bias, %17 : tensor<3xf32>
  %18 = nn.matmul %16, %10 transpose_rhs : tensor<4x3xf32>, tensor<6x3xf32> -> tensor<4x6xf32>
  %19 = nn.matmul %9, %16 transpose_lhs : tensor<4x6xf32>, tensor<4x3xf32> -> tensor<6x3xf32>
  zero.grad @fc3.weight, %19 : tensor<6x3xf32>
  %20 = nn.relu_grad %9, %18 : tensor<4x6xf32>
  %21 = nn.reduce_sum %20 : tensor<4x6xf32> -> tensor<6xf32>
  zero.grad @fc2.bias, %21 : tensor<6xf32>
  %22 = nn.matmul %20, %5 transpose_rhs : tensor<4x6xf32>, tensor<6x6xf32> -> tensor<4x6xf32>
  %23 = nn.matmul %4, %20 transpose_lhs : tensor<4x6xf32>, tensor<4x6xf32> -> tensor<6x6xf32>
  zero.grad @fc2.weight, %23 : tensor<6x6xf32>
  %24 = nn.relu_grad %4, %22 : tensor<4x6xf32>
  %25 = nn.reduce_sum %24 : tensor<4x6xf32> -> tensor<6xf32>
  zero.grad @fc1.bias, %25 : tensor<6xf32>
  %26 = nn.matmul %arg0, %24 transpose_lhs : tensor<4x4xf32>, tensor<4x6xf32> -> tensor<4x6xf32>
  zero.grad @fc1.weight, %26 : tensor<4x6xf32>
  zero.return %14 : tensor<f32>
}
