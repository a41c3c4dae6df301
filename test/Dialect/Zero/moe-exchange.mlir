// RUN: zero-opt %s -split-input-file | zero-opt -split-input-file | FileCheck %s
// RUN: zero-opt %s -split-input-file --mlir-print-op-generic | zero-opt -split-input-file | FileCheck %s

// zero.moe_exchange and zero.moe_return round-trip: 8 experts over P = 2
// members (4 local), 128 dispatch rows; dropless (2 x 128 received rows) and
// with a capacity factor (ceil(1.25 x 128) = 160), the backward's exchange
// with the forward's counts.

// CHECK-LABEL: func.func @dropless
// CHECK: %[[R:.*]], %[[C:.*]], %[[L:.*]] = zero.moe_exchange %{{.*}}, %[[O:.*]] layer 3 : tensor<128x32xf32>, tensor<8xi32> -> tensor<256x32xf32>, tensor<2x4xi32>, tensor<4xi32>
// CHECK: zero.moe_return %[[R]], %[[C]], %[[L]], %[[O]] layer 3 : tensor<256x32xf32>, tensor<2x4xi32>, tensor<4xi32>, tensor<8xi32> -> tensor<128x32xf32>
func.func @dropless(%rows: tensor<128x32xf32>, %offs: tensor<8xi32>) -> tensor<128x32xf32> {
  %recv, %counts, %loffs = zero.moe_exchange %rows, %offs layer 3 : tensor<128x32xf32>, tensor<8xi32> -> tensor<256x32xf32>, tensor<2x4xi32>, tensor<4xi32>
  %back = zero.moe_return %recv, %counts, %loffs, %offs layer 3 : tensor<256x32xf32>, tensor<2x4xi32>, tensor<4xi32>, tensor<8xi32> -> tensor<128x32xf32>
  return %back : tensor<128x32xf32>
}

// -----

// CHECK-LABEL: func.func @capacity
// CHECK: zero.moe_exchange %{{.*}}, %{{.*}} known(%{{.*}}, %{{.*}} : tensor<2x4xi32>, tensor<4xi32>) layer 0 capacity 1.250000e+00 drop : tensor<128x32xbf16>, tensor<8xi32> -> tensor<160x32xbf16>, tensor<2x4xi32>, tensor<4xi32>
func.func @capacity(%rows: tensor<128x32xbf16>, %offs: tensor<8xi32>, %c: tensor<2x4xi32>, %l: tensor<4xi32>) -> tensor<160x32xbf16> {
  %recv, %counts, %loffs = zero.moe_exchange %rows, %offs known(%c, %l : tensor<2x4xi32>, tensor<4xi32>) layer 0 capacity 1.25 drop : tensor<128x32xbf16>, tensor<8xi32> -> tensor<160x32xbf16>, tensor<2x4xi32>, tensor<4xi32>
  return %recv : tensor<160x32xbf16>
}

// -----

// The schedule's expert placement round-trips; contiguous, the default,
// is not printed. A schedule with expert_parallel needs experts split over
// ranks (here a parameter's share).
zero.param @experts : tensor<2x4xf32> init zeros expert_parallel 2
// CHECK-LABEL: zero.train_step @strided
// CHECK-SAME: schedule #zero.schedule<stage = 3, world_size = 8, global_batch = 8, mesh = #zero.mesh<[expert = 2, data = 4]>>
zero.train_step @strided(%x: tensor<1x2xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 3, world_size = 8, global_batch = 8, mesh = #zero.mesh<[expert = 2, data = 4]>> {
  %l = nn.fill 0.0 : tensor<f32>
  zero.return %l : tensor<f32>
}

// -----

zero.param @experts : tensor<2x4xf32> init zeros expert_parallel 2
// CHECK-LABEL: zero.train_step @contiguous
// CHECK-SAME: schedule #zero.schedule<stage = 3, world_size = 8, global_batch = 8, mesh = #zero.mesh<[data = 4, expert = 2]>>
zero.train_step @contiguous(%x: tensor<1x2xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 3, world_size = 8, global_batch = 8, mesh = #zero.mesh<[data = 4, expert = 2]>> {
  %l = nn.fill 0.0 : tensor<f32>
  zero.return %l : tensor<f32>
}
