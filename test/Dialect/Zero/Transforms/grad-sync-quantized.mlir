// RUN: zero-opt %s -split-input-file --zero-grad-sync="quantized-gradients=1" 2>/dev/null | FileCheck %s
// RUN: zero-opt %s -split-input-file --zero-grad-sync="quantized-gradients=1" 2>&1 >/dev/null | FileCheck %s --check-prefix=WARN
// RUN: zero-opt %s -split-input-file --zero-grad-sync 2>/dev/null | FileCheck %s --check-prefix=PLAIN
// RUN: zero-opt %s -split-input-file --zero-grad-sync="quantized-gradients=1 overlap-comm=true" 2>/dev/null | FileCheck %s --check-prefix=OVERLAP

// zero-grad-sync quantized-gradients (ZeRO++ qgZ): stage 3 on 4 ranks, 2
// per node. Layout of @flat: fc1.weight [0, 24), fc1.bias [24, 30),
// fc2.weight [30, 48), fc2.bias [48, 51). As DeepSpeed, only gradients that
// are not 1-D and whose size is a multiple of 2 x 4 = 8 are quantized:
// fc1.weight (24) is; fc2.weight (18) and the biases are not. A bucket
// holds one kind: fc2.bias, fc2.weight and fc1.bias make the plain
// [24, 51), and fc1.weight closes it and is reduced quantized alone.
// CHECK-LABEL: zero.train_step @qgz
// CHECK: zero.grad @fc1.bias
// CHECK-NEXT: zero.reduce_scatter group @flat [24, 51) from %{{.*}}, %{{.*}}, %{{.*}} at [0, 0, 0] : tensor<6xf32>, tensor<6x3xf32>, tensor<3xf32>{{$}}
// CHECK: zero.grad @fc1.weight, %[[G1W:.*]] :
// CHECK-NEXT: zero.reduce_scatter group @flat [0, 24) quantized from %[[G1W]] at [0] : tensor<4x6xf32>{{$}}
// CHECK-NEXT: zero.free %[[G1W]]
// CHECK-NEXT: zero.return

// Without the option the four gradients share one bucket.
// PLAIN-LABEL: zero.train_step @qgz
// PLAIN: zero.reduce_scatter group @flat [0, 51) from
// PLAIN-NOT: quantized

// OVERLAP-LABEL: zero.train_step @qgz
// OVERLAP: zero.reduce_scatter group @flat [24, 51) from {{.*}} -> !zero.token
// OVERLAP: zero.reduce_scatter group @flat [0, 24) quantized from {{.*}} -> !zero.token
zero.param @fc1.weight : tensor<4x6xf32> init normal std 0.5
zero.param @fc1.bias : tensor<6xf32> init zeros
zero.param @fc2.weight : tensor<6x3xf32> init normal std 0.4
zero.param @fc2.bias : tensor<3xf32> init zeros
zero.partition @flat stage 3 world_size 4 alignment 2 numel 51 padded 56 params [@fc1.weight, @fc1.bias, @fc2.weight, @fc2.bias] offsets [0, 24, 30, 48]
zero.train_step @qgz(%x: tensor<2x4xf32>, %y: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 8, ranks_per_node = 2> {
  %0 = zero.get_param @fc1.weight : tensor<4x6xf32>
  %1 = nn.matmul %x, %0 : tensor<2x4xf32>, tensor<4x6xf32> -> tensor<2x6xf32>
  %2 = zero.get_param @fc1.bias : tensor<6xf32>
  %3 = nn.add %1, %2 : tensor<2x6xf32>, tensor<6xf32>
  %4 = nn.relu %3 : tensor<2x6xf32>
  %5 = zero.get_param @fc2.weight : tensor<6x3xf32>
  %6 = nn.matmul %4, %5 : tensor<2x6xf32>, tensor<6x3xf32> -> tensor<2x3xf32>
  %7 = zero.get_param @fc2.bias : tensor<3xf32>
  %8 = nn.add %6, %7 : tensor<2x3xf32>, tensor<3xf32>
  %loss = nn.softmax_cross_entropy %8, %y : tensor<2x3xf32>, tensor<2xi64> -> tensor<f32>
  %seed = nn.fill 1.0 {zero.loss_seed} : tensor<f32>
  %11 = nn.softmax_cross_entropy_grad %8, %y, %seed : tensor<2x3xf32>, tensor<2xi64>, tensor<f32>
  %g2b = nn.reduce_sum %11 : tensor<2x3xf32> -> tensor<3xf32>
  zero.grad @fc2.bias, %g2b : tensor<3xf32>
  %13 = nn.matmul %11, %5 transpose_rhs : tensor<2x3xf32>, tensor<6x3xf32> -> tensor<2x6xf32>
  %g2w = nn.matmul %4, %11 transpose_lhs : tensor<2x6xf32>, tensor<2x3xf32> -> tensor<6x3xf32>
  zero.grad @fc2.weight, %g2w : tensor<6x3xf32>
  %15 = nn.relu_grad %4, %13 : tensor<2x6xf32>
  %g1b = nn.reduce_sum %15 : tensor<2x6xf32> -> tensor<6xf32>
  zero.grad @fc1.bias, %g1b : tensor<6xf32>
  %g1w = nn.matmul %x, %15 transpose_lhs : tensor<2x4xf32>, tensor<2x6xf32> -> tensor<4x6xf32>
  zero.grad @fc1.weight, %g1w : tensor<4x6xf32>
  zero.return %loss : tensor<f32>
}

// -----

// On one node DeepSpeed reduces with the plain reduce-scatter: so does the
// pass, with a warning.
// WARN: grad-sync-quantized.mlir:[[# @LINE + 6]]:1: warning: zero-grad-sync: quantized-gradients (qgZ) falls back to the plain reduce-scatter: the 4 ranks are on one node
// CHECK-LABEL: zero.train_step @one_node
// CHECK: zero.reduce_scatter group @l [0, 8) from
// CHECK-NOT: quantized
zero.param @w : tensor<2x4xf32> init zeros
zero.partition @l stage 3 world_size 4 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.train_step @one_node(%x: tensor<1x2xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 4> {
  %loss = nn.fill 0.0 : tensor<f32>
  %g = nn.fill 1.0 : tensor<2x4xf32>
  zero.grad @w, %g : tensor<2x4xf32>
  zero.return %loss : tensor<f32>
}
