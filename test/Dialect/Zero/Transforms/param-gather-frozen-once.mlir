// RUN: zero-opt %s --zero-param-gather="param-persistence-threshold=0 max-reuse-distance=0" | FileCheck %s --check-prefix=USE
// RUN: zero-opt %s --zero-param-gather="param-persistence-threshold=0 max-reuse-distance=0 frozen-gather=once" | FileCheck %s --check-prefix=ONCE
// RUN: zero-opt %s --zero-param-gather="frozen-gather=once" | FileCheck %s --check-prefix=PERSIST
// RUN: zero-opt %s --zero-param-gather="param-persistence-threshold=0 frozen-gather=once" --zero-prefetch | FileCheck %s --check-prefix=PREFETCH
// RUN: not zero-opt %s --zero-param-gather="frozen-gather=always" 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: error: zero-param-gather: frozen-gather must be per-use or once, got 'always'

// Stage 3 on a three-layer MLP whose middle layer is frozen (fc2: no
// gradient, but its weight is read again in the backward for the input
// gradient of fc1's layer), after autodiff and zero-partition, with 2
// micro steps per optimizer step.

// per-use: fc2 is gathered around its uses like any group, here twice per
// micro step (a reuse distance of 0 frees it between forward and backward).
// USE-LABEL: zero.train_step @stage3
// USE-COUNT-2: zero.all_gather group @fc2 : tensor<44xf32>
// USE-NOT: zero.all_gather group @fc2
// USE-NOT: phase first_micro_step

// once: fc2 is gathered first in the step, in the first micro step only,
// serves both of its uses in every micro step and is freed after the last
// one; the other groups are unchanged.
// ONCE-LABEL: zero.train_step @stage3
// ONCE-NEXT: %[[F2:.*]] = zero.all_gather group @fc2 persistent phase first_micro_step : tensor<44xf32>
// ONCE-NEXT: zero.all_gather group @fc1 : tensor<32xf32>
// ONCE-NOT: zero.all_gather group @fc2
// ONCE: zero.get_param @fc2.weight from %[[F2]]
// ONCE: %[[F3:.*]] = zero.all_gather group @fc3 : tensor<24xf32>
// ONCE-NOT: zero.all_gather group @fc2
// ONCE-NOT: zero.free %[[F2]] {{.*}}:
// ONCE: nn.matmul %{{.*}}, %{{.*}} transpose_rhs : tensor<4x6xf32>, tensor<6x6xf32>
// ONCE-NOT: zero.free %[[F2]] {{.*}}:
// ONCE: zero.grad @fc1.weight
// ONCE-NEXT: zero.free %[[F2]] phase post_step : tensor<44xf32>
// ONCE-NEXT: zero.return

// Below the persistence threshold the other groups stay persistent (every
// micro step, freed at step_end), after the frozen one.
// PERSIST-LABEL: zero.train_step @stage3
// PERSIST-NEXT: %[[F2:.*]] = zero.all_gather group @fc2 persistent phase first_micro_step : tensor<44xf32>
// PERSIST-NEXT: %[[F1:.*]] = zero.all_gather group @fc1 persistent : tensor<32xf32>
// PERSIST-NEXT: %[[F3:.*]] = zero.all_gather group @fc3 persistent : tensor<24xf32>
// PERSIST: zero.free %[[F3]] phase step_end
// PERSIST-NEXT: zero.free %[[F2]] phase post_step
// PERSIST-NEXT: zero.free %[[F1]] phase step_end
// PERSIST-NEXT: zero.return

// zero-prefetch leaves the kept gather synchronous and hoists no prefetch
// above it.
// PREFETCH-LABEL: zero.train_step @stage3
// PREFETCH-NEXT: %[[F2:.*]] = zero.all_gather group @fc2 persistent phase first_micro_step : tensor<44xf32>
// PREFETCH-NEXT: zero.prefetch group @fc1
// PREFETCH-NOT: zero.all_gather
zero.param @fc1.weight : tensor<4x6xf32> init normal std 0.5
zero.param @fc1.bias : tensor<6xf32> init zeros
zero.param @fc2.weight : tensor<6x6xf32> init normal std 0.4 frozen
zero.param @fc2.bias : tensor<6xf32> init zeros frozen
zero.param @fc3.weight : tensor<6x3xf32> init normal std 0.4
zero.param @fc3.bias : tensor<3xf32> init zeros
zero.partition @fc1 stage 3 world_size 2 alignment 2 numel 30 padded 32 params [@fc1.weight, @fc1.bias] offsets [0, 24]
zero.partition @fc2 stage 3 world_size 2 alignment 2 numel 42 padded 44 params [@fc2.weight, @fc2.bias] offsets [0, 36] frozen
zero.partition @fc3 stage 3 world_size 2 alignment 2 numel 21 padded 24 params [@fc3.weight, @fc3.bias] offsets [0, 18]
zero.train_step @stage3(%arg0: tensor<4x4xf32>, %arg1: tensor<4xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 16, accumulation_steps = 2> {
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
  %22 = nn.matmul %20, %5 transpose_rhs : tensor<4x6xf32>, tensor<6x6xf32> -> tensor<4x6xf32>
  %24 = nn.relu_grad %4, %22 : tensor<4x6xf32>
  %25 = nn.reduce_sum %24 : tensor<4x6xf32> -> tensor<6xf32>
  zero.grad @fc1.bias, %25 : tensor<6xf32>
  %26 = nn.matmul %arg0, %24 transpose_lhs : tensor<4x4xf32>, tensor<4x6xf32> -> tensor<4x6xf32>
  zero.grad @fc1.weight, %26 : tensor<4x6xf32>
  zero.return %14 : tensor<f32>
}
