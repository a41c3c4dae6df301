// RUN: zero-opt %s -split-input-file --zero-prefetch | FileCheck %s --check-prefix=DEF
// RUN: zero-opt %s -split-input-file --zero-prefetch="prefetch-bucket-size=1" | FileCheck %s --check-prefix=NONE
// RUN: zero-opt %s -split-input-file --zero-prefetch="prefetch-bucket-size=60" | FileCheck %s --check-prefix=FLIGHT
// RUN: zero-opt %s -split-input-file --zero-prefetch="max-live-parameters=80" | FileCheck %s --check-prefix=LIVE
// RUN: not zero-opt %s -split-input-file --zero-prefetch="prefetch-bucket-size=0" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not zero-opt %s -split-input-file --zero-prefetch="max-live-parameters=0" 2>&1 | FileCheck %s --check-prefix=BADLIVE

// BAD: error: zero-prefetch: prefetch-bucket-size and max-live-parameters must be positive, got 0 and 1000000000
// BADLIVE: error: zero-prefetch: prefetch-bucket-size and max-live-parameters must be positive, got 50000000 and 0

// Input: the stage-3 three-layer MLP after zero-param-gather with nothing
// persistent and max-reuse-distance=23: gathers of fc1 (32 elements), fc2
// (44), fc3 (24) in the forward and fc2 again in the backward.
zero.param @fc1.weight : tensor<4x6xf32> init normal std 0.5
zero.param @fc1.bias : tensor<6xf32> init zeros
zero.param @fc2.weight : tensor<6x6xf32> init normal std 0.4
zero.param @fc2.bias : tensor<6xf32> init zeros
zero.param @fc3.weight : tensor<6x3xf32> init normal std 0.4
zero.param @fc3.bias : tensor<3xf32> init zeros
zero.partition @fc1 stage 3 world_size 2 alignment 2 numel 30 padded 32 params [@fc1.weight, @fc1.bias] offsets [0, 24]
zero.partition @fc2 stage 3 world_size 2 alignment 2 numel 42 padded 44 params [@fc2.weight, @fc2.bias] offsets [0, 36]
zero.partition @fc3 stage 3 world_size 2 alignment 2 numel 21 padded 24 params [@fc3.weight, @fc3.bias] offsets [0, 18]

// DeepSpeed's budgets (5e7 in flight, 1e9 live) hoist every forward gather
// to the top; the backward re-gather of fc2 rises to the free of fc2's
// previous buffer and no further. Each wait sits right before the first use.
// DEF-LABEL: zero.train_step @stage3
// DEF-NOT: zero.all_gather
// DEF-NEXT: %[[F1:.*]], %[[T1:.*]] = zero.prefetch group @fc1 : tensor<32xf32>
// DEF-NEXT: %[[F2:.*]], %[[T2:.*]] = zero.prefetch group @fc2 : tensor<44xf32>
// DEF-NEXT: %[[F3:.*]], %[[T3:.*]] = zero.prefetch group @fc3 : tensor<24xf32>
// DEF-NEXT: zero.wait %[[T1]]
// DEF-NEXT: zero.get_param @fc1.weight from %[[F1]]
// DEF: zero.wait %[[T2]]
// DEF-NEXT: zero.get_param @fc2.weight from %[[F2]]
// DEF: zero.free %[[F2]]
// DEF-NEXT: %[[F2B:.*]], %[[T2B:.*]] = zero.prefetch group @fc2 : tensor<44xf32>
// DEF-NEXT: nn.relu
// DEF-NEXT: zero.wait %[[T3]]
// DEF: zero.wait %[[T2B]]
// DEF-NEXT: zero.get_param @fc2.weight from %[[F2B]]
// DEF-NOT: zero.all_gather

// A budget below one group: every gather becomes a prefetch waited at once.
// NONE-LABEL: zero.train_step @stage3
// NONE-NEXT: %{{.*}}, %[[T1:.*]] = zero.prefetch group @fc1
// NONE-NEXT: zero.wait %[[T1]]
// NONE: %{{.*}}, %[[T2:.*]] = zero.prefetch group @fc2
// NONE-NEXT: zero.wait %[[T2]]
// NONE: %{{.*}}, %[[T3:.*]] = zero.prefetch group @fc3
// NONE-NEXT: zero.wait %[[T3]]
// NONE: %{{.*}}, %[[T4:.*]] = zero.prefetch group @fc2
// NONE-NEXT: zero.wait %[[T4]]

// 60 elements in flight: fc1 + fc2 = 76 and fc2 + fc3 = 68 do not fit, so
// each prefetch is issued only once the previous one has been waited for
// (and no earlier than where it then stands in issue order).
// FLIGHT-LABEL: zero.train_step @stage3
// FLIGHT-NEXT: %[[F1:.*]], %[[T1:.*]] = zero.prefetch group @fc1
// FLIGHT-NEXT: zero.wait %[[T1]]
// FLIGHT-NEXT: zero.get_param @fc1.weight
// FLIGHT-NEXT: %{{.*}}, %[[T2:.*]] = zero.prefetch group @fc2
// FLIGHT: zero.wait %[[T2]]
// FLIGHT-NEXT: zero.get_param @fc2.weight
// FLIGHT-NEXT: %{{.*}}, %[[T3:.*]] = zero.prefetch group @fc3
// FLIGHT: zero.wait %[[T3]]
// FLIGHT-NEXT: zero.get_param @fc3.weight
// FLIGHT-NEXT: zero.prefetch group @fc2

// 80 live elements: fc1 + fc2 = 76 fit, + fc3 = 100 do not, so fc3 is
// prefetched right after fc1 is freed (44 + 24 = 68 live).
// LIVE-LABEL: zero.train_step @stage3
// LIVE-NEXT: %[[F1:.*]], %{{.*}} = zero.prefetch group @fc1
// LIVE-NEXT: zero.prefetch group @fc2
// LIVE-NOT: zero.prefetch group @fc3
// LIVE: zero.free %[[F1]]
// LIVE-NEXT: zero.prefetch group @fc3
zero.train_step @stage3(%arg0: tensor<4x4xf32>, %arg1: tensor<4xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 8> {
  %result = zero.all_gather group @fc1 : tensor<32xf32>
  %0 = zero.get_param @fc1.weight from %result : tensor<32xf32> -> tensor<4x6xf32>
  %1 = nn.matmul %arg0, %0 : tensor<4x4xf32>, tensor<4x6xf32> -> tensor<4x6xf32>
  %2 = zero.get_param @fc1.bias from %result : tensor<32xf32> -> tensor<6xf32>
  %3 = nn.add %1, %2 : tensor<4x6xf32>, tensor<6xf32>
  zero.free %result : tensor<32xf32>
  %4 = nn.relu %3 : tensor<4x6xf32>
  %result_0 = zero.all_gather group @fc2 : tensor<44xf32>
  %5 = zero.get_param @fc2.weight from %result_0 : tensor<44xf32> -> tensor<6x6xf32>
  %6 = nn.matmul %4, %5 : tensor<4x6xf32>, tensor<6x6xf32> -> tensor<4x6xf32>
  %7 = zero.get_param @fc2.bias from %result_0 : tensor<44xf32> -> tensor<6xf32>
  %8 = nn.add %6, %7 : tensor<4x6xf32>, tensor<6xf32>
  zero.free %result_0 : tensor<44xf32>
  %9 = nn.relu %8 : tensor<4x6xf32>
  %result_1 = zero.all_gather group @fc3 : tensor<24xf32>
  %10 = zero.get_param @fc3.weight from %result_1 : tensor<24xf32> -> tensor<6x3xf32>
  %11 = nn.matmul %9, %10 : tensor<4x6xf32>, tensor<6x3xf32> -> tensor<4x3xf32>
  %12 = zero.get_param @fc3.bias from %result_1 : tensor<24xf32> -> tensor<3xf32>
  %13 = nn.add %11, %12 : tensor<4x3xf32>, tensor<3xf32>
  %14 = nn.softmax_cross_entropy %13, %arg1 : tensor<4x3xf32>, tensor<4xi64> -> tensor<f32>
  %15 = nn.fill 1.000000e+00 {zero.loss_seed} : tensor<f32>
  %16 = nn.softmax_cross_entropy_grad %13, %arg1, %15 : tensor<4x3xf32>, tensor<4xi64>, tensor<f32>
  %17 = nn.reduce_sum %16 : tensor<4x3xf32> -> tensor<3xf32>
  zero.grad @fc3.bias, %17 : tensor<3xf32>
  %18 = nn.matmul %16, %10 transpose_rhs : tensor<4x3xf32>, tensor<6x3xf32> -> tensor<4x6xf32>
  zero.free %result_1 : tensor<24xf32>
  %19 = nn.matmul %9, %16 transpose_lhs : tensor<4x6xf32>, tensor<4x3xf32> -> tensor<6x3xf32>
  zero.grad @fc3.weight, %19 : tensor<6x3xf32>
  %20 = nn.relu_grad %9, %18 : tensor<4x6xf32>
  %21 = nn.reduce_sum %20 : tensor<4x6xf32> -> tensor<6xf32>
  zero.grad @fc2.bias, %21 : tensor<6xf32>
  %result_2 = zero.all_gather group @fc2 : tensor<44xf32>
  %22 = zero.get_param @fc2.weight from %result_2 : tensor<44xf32> -> tensor<6x6xf32>
  %23 = nn.matmul %20, %22 transpose_rhs : tensor<4x6xf32>, tensor<6x6xf32> -> tensor<4x6xf32>
  zero.free %result_2 : tensor<44xf32>
  %24 = nn.matmul %4, %20 transpose_lhs : tensor<4x6xf32>, tensor<4x6xf32> -> tensor<6x6xf32>
  zero.grad @fc2.weight, %24 : tensor<6x6xf32>
  %25 = nn.relu_grad %4, %23 : tensor<4x6xf32>
  %26 = nn.reduce_sum %25 : tensor<4x6xf32> -> tensor<6xf32>
  zero.grad @fc1.bias, %26 : tensor<6xf32>
  %27 = nn.matmul %arg0, %25 transpose_lhs : tensor<4x4xf32>, tensor<4x6xf32> -> tensor<4x6xf32>
  zero.grad @fc1.weight, %27 : tensor<4x6xf32>
  zero.return %14 : tensor<f32>
}

// -----

// Stages 0-2 have no stage-3 gathers: the post-step gather stays as it is.
zero.param @w : tensor<4xf32> init zeros
zero.partition @flat stage 2 world_size 2 alignment 2 numel 4 padded 4 params [@w] offsets [0]
// DEF-LABEL: zero.train_step @stage2
// DEF-NOT: zero.prefetch
// DEF: zero.all_gather group @flat in params [0, 4) phase post_step
// DEF-NOT: zero.prefetch
zero.train_step @stage2(%x: tensor<2x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 4> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.all_gather group @flat in params [0, 4) phase post_step
  zero.return %loss : tensor<f32>
}
