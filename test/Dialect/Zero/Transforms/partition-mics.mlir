// RUN: zero-opt %s -split-input-file --zero-partition="stage=3 world-size=4 mics-shard-size=2" | FileCheck %s
// RUN: zero-opt %s -split-input-file --zero-partition="stage=3 world-size=4 mics-shard-size=-1" | FileCheck %s --check-prefix=OFF
// RUN: zero-opt %s -split-input-file --zero-partition="stage=3 world-size=2" | FileCheck %s --check-prefix=Z3
// RUN: not zero-opt %s -split-input-file --zero-partition="stage=2 world-size=4 mics-shard-size=2" 2>&1 | FileCheck %s --check-prefix=STAGE
// RUN: not zero-opt %s -split-input-file --zero-partition="stage=3 world-size=4 mics-shard-size=3" 2>&1 | FileCheck %s --check-prefix=DIV
// RUN: not zero-opt %s -split-input-file --zero-partition="stage=3 world-size=4 mics-shard-size=8" 2>&1 | FileCheck %s --check-prefix=DIV8
// RUN: not zero-opt %s -split-input-file --zero-partition="stage=3 world-size=4 mics-shard-size=-2" 2>&1 | FileCheck %s --check-prefix=NEG

// MiCS shard groups of 2 in a world of 4: every partition is laid out as
// ZeRO-3's at world size 2 (fc1: 30 -> 32, fc2: 21 -> 24 at 2 x 2), the
// batch is still divided by the world (8 / 4 = 2 rows), and the schedule
// records the shard groups. -1 (DeepSpeed's default) is no MiCS.
// CHECK: zero.partition @fc1 stage 3 world_size 2 alignment 2 numel 30 padded 32 params [@fc1.weight, @fc1.bias] offsets [0, 24]
// CHECK: zero.partition @fc2 stage 3 world_size 2 alignment 2 numel 21 padded 24 params [@fc2.weight, @fc2.bias] offsets [0, 18]
// CHECK-LABEL: zero.train_step @train
// CHECK-SAME: (%{{.*}}: tensor<2x4xf32>, %{{.*}}: tensor<2xi64>)
// CHECK-SAME: schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 8, mesh = #zero.mesh<[data = 2, mics = 2]>>
// Z3: zero.partition @fc1 stage 3 world_size 2 alignment 2 numel 30 padded 32 params [@fc1.weight, @fc1.bias] offsets [0, 24]
// Z3: zero.partition @fc2 stage 3 world_size 2 alignment 2 numel 21 padded 24 params [@fc2.weight, @fc2.bias] offsets [0, 18]
// OFF: zero.partition @fc1 stage 3 world_size 4 alignment 2 numel 30 padded 32
// OFF: zero.partition @fc2 stage 3 world_size 4 alignment 2 numel 21 padded 24
// OFF-LABEL: zero.train_step @train
// OFF-SAME: schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 8> {
// STAGE: error: zero-partition: mics-shard-size needs stage 3, got stage 2
// DIV: error: zero-partition: mics-shard-size 3 must divide world-size 4 (or be 0 or -1: no MiCS)
// DIV8: error: zero-partition: mics-shard-size 8 must divide world-size 4 (or be 0 or -1: no MiCS)
// NEG: error: zero-partition: mics-shard-size -2 must divide world-size 4 (or be 0 or -1: no MiCS)
zero.param @fc1.weight : tensor<4x6xf32> init normal std 0.5
zero.param @fc1.bias : tensor<6xf32> init zeros
zero.param @fc2.weight : tensor<6x3xf32> init normal std 0.4
zero.param @fc2.bias : tensor<3xf32> init zeros
zero.train_step @train(%x: tensor<8x4xf32>, %y: tensor<8xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %0 = zero.get_param @fc1.weight : tensor<4x6xf32>
  %1 = nn.matmul %x, %0 : tensor<8x4xf32>, tensor<4x6xf32> -> tensor<8x6xf32>
  %2 = zero.get_param @fc1.bias : tensor<6xf32>
  %3 = nn.add %1, %2 : tensor<8x6xf32>, tensor<6xf32>
  %4 = nn.relu %3 : tensor<8x6xf32>
  %5 = zero.get_param @fc2.weight : tensor<6x3xf32>
  %6 = nn.matmul %4, %5 : tensor<8x6xf32>, tensor<6x3xf32> -> tensor<8x3xf32>
  %7 = zero.get_param @fc2.bias : tensor<3xf32>
  %8 = nn.add %6, %7 : tensor<8x3xf32>, tensor<3xf32>
  %9 = nn.softmax_cross_entropy %8, %y : tensor<8x3xf32>, tensor<8xi64> -> tensor<f32>
  %10 = nn.fill 1.0 {zero.loss_seed} : tensor<f32>
  %11 = nn.softmax_cross_entropy_grad %8, %y, %10 : tensor<8x3xf32>, tensor<8xi64>, tensor<f32>
  %12 = nn.reduce_sum %11 : tensor<8x3xf32> -> tensor<3xf32>
  zero.grad @fc2.bias, %12 : tensor<3xf32>
  %13 = nn.matmul %11, %5 transpose_rhs : tensor<8x3xf32>, tensor<6x3xf32> -> tensor<8x6xf32>
  %14 = nn.matmul %4, %11 transpose_lhs : tensor<8x6xf32>, tensor<8x3xf32> -> tensor<6x3xf32>
  zero.grad @fc2.weight, %14 : tensor<6x3xf32>
  %15 = nn.relu_grad %4, %13 : tensor<8x6xf32>
  %16 = nn.reduce_sum %15 : tensor<8x6xf32> -> tensor<6xf32>
  zero.grad @fc1.bias, %16 : tensor<6xf32>
  %17 = nn.matmul %x, %15 transpose_lhs : tensor<8x4xf32>, tensor<8x6xf32> -> tensor<4x6xf32>
  zero.grad @fc1.weight, %17 : tensor<4x6xf32>
  zero.return %9 : tensor<f32>
}
