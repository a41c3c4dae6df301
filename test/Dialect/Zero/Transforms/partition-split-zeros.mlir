// RUN: zero-opt %s --zero-autodiff --zero-partition="stage=0 world-size=2" | FileCheck %s

// nn.split's derivative fills a part without a gradient (here the first 2
// positions of the sequence, which the loss never reads, as a causal LM's
// loss slices its completion) with zeros. On 2 ranks the concat of the
// gradients takes those zeros with the local batch's rows, as the others.
zero.param @w : tensor<4x3xf32> init normal std 0.5
// CHECK-LABEL: zero.train_step @slice(
// CHECK-SAME: %{{.*}}: tensor<2x5x4xf32>)
// CHECK: %[[ZEROS:.*]] = nn.fill 0.000000e+00 : tensor<2x2x3xf32>
// CHECK-NEXT: nn.concat %[[ZEROS]], %{{.*}} axis 1 : tensor<2x2x3xf32>, tensor<2x3x3xf32> -> tensor<2x5x3xf32>
// CHECK-NOT: tensor<4x2x3xf32>
zero.train_step @slice(%x: tensor<4x5x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %w = zero.get_param @w : tensor<4x3xf32>
  %h = nn.matmul %x, %w : tensor<4x5x4xf32>, tensor<4x3xf32> -> tensor<4x5x3xf32>
  %a, %b = nn.split %h axis 1 : tensor<4x5x3xf32> -> tensor<4x2x3xf32>, tensor<4x3x3xf32>
  %r = nn.reshape %b : tensor<4x3x3xf32> -> tensor<4x9xf32>
  %ones = nn.fill 1.0 : tensor<1x9xf32>
  %rows = nn.matmul %r, %ones transpose_rhs : tensor<4x9xf32>, tensor<1x9xf32> -> tensor<4x1xf32>
  %loss = nn.reduce_sum %rows : tensor<4x1xf32> -> tensor<f32>
  zero.return %loss : tensor<f32>
}
