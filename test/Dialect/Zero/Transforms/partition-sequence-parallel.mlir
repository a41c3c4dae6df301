// RUN: not zero-opt %s -split-input-file --zero-partition="stage=3 world-size=4 sp-size=2" 2>/dev/null | FileCheck %s
// RUN: not zero-opt %s -split-input-file --zero-partition="stage=3 world-size=4 sp-size=2" 2>&1 >/dev/null | FileCheck %s --check-prefix=ODD
// RUN: not zero-opt %s -split-input-file --zero-partition="stage=3 world-size=4 sp-size=3" 2>&1 | FileCheck %s --check-prefix=DIVIDE
// RUN: not zero-opt %s -split-input-file --zero-partition="stage=3 world-size=4 sp-size=0" 2>&1 | FileCheck %s --check-prefix=ZERO

// DP x SP (Ulysses beside data parallelism): with sp-size 2 on 4 ranks the
// 2 ranks of each sequence-parallel group read the same rows, so the global
// batch of 4 rows is divided by the 2 data-parallel ranks, while every
// group is partitioned over all 4 ranks; the schedule records both.
// CHECK-LABEL: zero.partition @
// CHECK-SAME: stage 3 world_size 4
// CHECK-LABEL: zero.train_step @train
// CHECK-SAME: tensor<2x4xf32>
// CHECK-SAME: schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 4, mesh = #zero.mesh<[data = 2, sequence = 2]>>
// DIVIDE: partition-sequence-parallel.mlir:[[# @LINE + 4]]:1: error: zero-partition: sp-size 3 does not divide world-size 4
// DIVIDE: partition-sequence-parallel.mlir:{{[0-9]+}}:1: error: zero-partition: sp-size 3 does not divide world-size 4
// ZERO: error: zero-partition: sp-size 0 does not divide world-size 4
zero.param @w : tensor<4x3xf32> init zeros
zero.train_step @train(%x: tensor<4x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %w = zero.get_param @w : tensor<4x3xf32>
  %h = nn.matmul %x, %w : tensor<4x4xf32>, tensor<4x3xf32> -> tensor<4x3xf32>
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// The exchanges of zero-sequence-parallel take the local batch: the
// all-to-all's result is the divided input's shape exchanged (rows 4 -> 2,
// the head and sequence dimensions as before).
// CHECK-LABEL: zero.train_step @exchange
// CHECK: zero.all_to_all %{{.*}} split 1 concat 2 over sequence : tensor<2x4x4x8xf32> -> tensor<2x2x8x8xf32>
// CHECK: zero.all_to_all %{{.*}} split 2 concat 1 over sequence : tensor<2x2x8x8xf32> -> tensor<2x4x4x8xf32>
zero.param @w : tensor<4x3xf32> init zeros
zero.train_step @exchange(%x: tensor<4x4x4x8xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %h = zero.all_to_all %x split 1 concat 2 over sequence : tensor<4x4x4x8xf32> -> tensor<4x2x8x8xf32>
  %s = zero.all_to_all %h split 2 concat 1 over sequence : tensor<4x2x8x8xf32> -> tensor<4x4x4x8xf32>
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// A global batch of 3 rows cannot be split over the 2 data-parallel ranks.
// ODD: partition-sequence-parallel.mlir:[[# @LINE + 2]]:1: error: train step @odd global batch 3 is not divisible by world-size 4 / sp-size 2
zero.param @w : tensor<4x3xf32> init zeros
zero.train_step @odd(%x: tensor<3x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %w = zero.get_param @w : tensor<4x3xf32>
  %h = nn.matmul %x, %w : tensor<3x4xf32>, tensor<4x3xf32> -> tensor<3x3xf32>
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}
