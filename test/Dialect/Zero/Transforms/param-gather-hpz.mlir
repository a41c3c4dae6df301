// RUN: zero-opt %s -split-input-file --zero-param-gather="param-persistence-threshold=21 max-reuse-distance=23" | FileCheck %s --check-prefix=HPZ
// RUN: zero-opt %s -split-input-file --zero-param-gather="param-persistence-threshold=21 max-reuse-distance=24" | FileCheck %s --check-prefix=KEPT
// RUN: zero-opt %s -split-input-file --zero-param-gather="param-persistence-threshold=22 max-reuse-distance=23" | FileCheck %s --check-prefix=PERSIST
// RUN: zero-opt %s -split-input-file --zero-param-gather="param-persistence-threshold=21 max-reuse-distance=23" --zero-prefetch | FileCheck %s --check-prefix=PREFETCH
// RUN: not zero-opt %s -split-input-file --zero-param-gather="param-persistence-threshold=21 max-reuse-distance=23 offload-param=cpu" 2>&1 | FileCheck %s --check-prefix=OFFLOAD

// ZeRO++ hpZ (hpz_partition_size = 2) on the three-layer MLP of
// param-gather.mlir at stage 3 (groups fc1 32, fc2 44 and fc3 24 padded
// elements). fc2 is gathered twice in the step (a reuse distance of 23):
// its first gather fills the secondary shard once per optimizer step, and
// the backward gathers the secondary shards within the hpZ group.

// HPZ-LABEL: zero.train_step @stage3
// HPZ: %[[F2:.*]] = zero.all_gather group @fc2 : tensor<44xf32>
// HPZ-NEXT: zero.store_secondary %[[F2]] group @fc2 phase  first_micro_step : tensor<44xf32>
// HPZ-NEXT: zero.get_param @fc2.weight from %[[F2]]
// HPZ: zero.free %[[F2]]
// HPZ: %[[F3:.*]] = zero.all_gather group @fc3 : tensor<24xf32>
// HPZ-NOT: zero.store_secondary
// HPZ: zero.free %[[F3]]
// HPZ: %[[F2B:.*]] = zero.all_gather group @fc2 secondary : tensor<44xf32>
// HPZ-NEXT: %[[V:.*]] = zero.get_param @fc2.weight from %[[F2B]]
// HPZ-NEXT: nn.matmul %{{.*}}, %[[V]] transpose_rhs
// HPZ-NEXT: zero.free %[[F2B]]
// HPZ-NOT: zero.all_gather
// HPZ-NOT: zero.store_secondary
// HPZ: zero.return

// A group gathered once in the step (fc2 kept from its forward to its
// backward) keeps no secondary shard.
// KEPT-LABEL: zero.train_step @stage3
// KEPT-NOT: secondary
// KEPT: zero.return

// A persistent group (fc3) is gathered once per micro step, at the top:
// it keeps no secondary shard (nor does fc2, then kept from its forward to
// its backward).
// PERSIST-LABEL: zero.train_step @stage3
// PERSIST: zero.all_gather group @fc3 persistent
// PERSIST-NOT: secondary
// PERSIST: zero.return

// zero-prefetch issues the secondary gather ahead like any other, waited
// before its first use; the store waits for the forward gather.
// PREFETCH-LABEL: zero.train_step @stage3
// PREFETCH: %[[F2:.*]], %[[T2:.*]] = zero.prefetch group @fc2 : tensor<44xf32>
// PREFETCH: zero.wait %[[T2]]
// PREFETCH-NEXT: zero.store_secondary %[[F2]] group @fc2
// PREFETCH: %[[F2B:.*]], %[[T2B:.*]] = zero.prefetch group @fc2 secondary : tensor<44xf32>
// PREFETCH: zero.wait %[[T2B]]
// PREFETCH-NEXT: zero.get_param @fc2.weight from %[[F2B]]

// The secondary shards live on the device: no parameter offload.
// OFFLOAD: error: zero-param-gather: hpZ (hpz_partition_size 2) does not combine with offload-param: the secondary shards live on the device
zero.param @fc1.weight : tensor<4x6xf32> init normal std 0.5
zero.param @fc1.bias : tensor<6xf32> init zeros
zero.param @fc2.weight : tensor<6x6xf32> init normal std 0.4
zero.param @fc2.bias : tensor<6xf32> init zeros
zero.param @fc3.weight : tensor<6x3xf32> init normal std 0.4
zero.param @fc3.bias : tensor<3xf32> init zeros
zero.partition @fc1 stage 3 world_size 2 alignment 2 numel 30 padded 32 params [@fc1.weight, @fc1.bias] offsets [0, 24]
zero.partition @fc2 stage 3 world_size 2 alignment 2 numel 42 padded 44 params [@fc2.weight, @fc2.bias] offsets [0, 36]
zero.partition @fc3 stage 3 world_size 2 alignment 2 numel 21 padded 24 params [@fc3.weight, @fc3.bias] offsets [0, 18]


zero.train_step @stage3(%arg0: tensor<4x4xf32>, %arg1: tensor<4xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 8, mesh = #zero.mesh<[data = 1, hpz = 2]>> {
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
