// RUN: zero-opt %s -split-input-file --zero-fuse-bias-activation | FileCheck %s

// The bias add of a GELU's input, read by the GELU and by its gradient:
// both take the unbiased product and the bias, and the add is gone.
zero.param @w : tensor<4x8xf32> init zeros
zero.param @b : tensor<8xf32> init zeros
// CHECK-LABEL: zero.train_step @gelu
zero.train_step @gelu(%x: tensor<2x4xf32>, %dy: tensor<2x8xf32>, %l: tensor<2xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %w = zero.get_param @w : tensor<4x8xf32>
  %b = zero.get_param @b : tensor<8xf32>
  // CHECK: %[[MM:.*]] = nn.matmul
  %mm = nn.matmul %x, %w : tensor<2x4xf32>, tensor<4x8xf32> -> tensor<2x8xf32>
  // CHECK-NOT: nn.add
  // CHECK: %[[Y:.*]] = nn.bias_gelu %[[MM]], %[[B:.*]] : tensor<2x8xf32>, tensor<8xf32>
  %s = nn.add %mm, %b : tensor<2x8xf32>, tensor<8xf32>
  %y = nn.gelu %s : tensor<2x8xf32>
  // CHECK: %[[DX:.*]] = nn.bias_gelu_grad %[[MM]], %[[B]], %{{.*}} : tensor<2x8xf32>, tensor<8xf32>
  %dx = nn.gelu_grad %s, %dy : tensor<2x8xf32>
  // CHECK: nn.reduce_sum %[[DX]]
  %db = nn.reduce_sum %dx : tensor<2x8xf32> -> tensor<8xf32>
  zero.grad @b, %db : tensor<8xf32>
  // CHECK: nn.softmax_cross_entropy %[[Y]]
  %loss = nn.softmax_cross_entropy %y, %l : tensor<2x8xf32>, tensor<2xi32> -> tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// A sum that something other than a GELU reads stays: the add is not
// removed, and neither use is rewritten.
zero.param @b : tensor<8xf32> init zeros
// CHECK-LABEL: zero.train_step @other_use
zero.train_step @other_use(%x: tensor<2x8xf32>, %l: tensor<2xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %b = zero.get_param @b : tensor<8xf32>
  // CHECK: %[[S:.*]] = nn.add
  // CHECK-NEXT: nn.gelu %[[S]]
  // CHECK-NEXT: nn.relu %[[S]]
  // CHECK-NOT: nn.bias_gelu
  %s = nn.add %x, %b : tensor<2x8xf32>, tensor<8xf32>
  %y = nn.gelu %s : tensor<2x8xf32>
  %r = nn.relu %s : tensor<2x8xf32>
  %t = nn.add %y, %r : tensor<2x8xf32>, tensor<2x8xf32>
  %loss = nn.softmax_cross_entropy %t, %l : tensor<2x8xf32>, tensor<2xi32> -> tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// A sum that reaches a GELU's gradient as the incoming gradient, not as
// the forward input, stays.
zero.param @b : tensor<8xf32> init zeros
// CHECK-LABEL: zero.train_step @as_gradient
zero.train_step @as_gradient(%x: tensor<2x8xf32>, %g: tensor<2x8xf32>, %l: tensor<2xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %b = zero.get_param @b : tensor<8xf32>
  // CHECK: %[[S:.*]] = nn.add
  // CHECK-NEXT: nn.gelu_grad %{{.*}}, %[[S]]
  %s = nn.add %g, %b : tensor<2x8xf32>, tensor<8xf32>
  %dx = nn.gelu_grad %x, %s : tensor<2x8xf32>
  %loss = nn.softmax_cross_entropy %dx, %l : tensor<2x8xf32>, tensor<2xi32> -> tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Mixed precision: the bf16 sum of a bf16 product and the bias's compute
// copy folds as at fp32 (the kernels round the sum to bf16 as nn.add
// stores it).
zero.param @b : tensor<8xf32> init zeros compute bf16
// CHECK-LABEL: zero.train_step @bf16
zero.train_step @bf16(%x: tensor<2x8xbf16>, %l: tensor<2xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16> {
  %b = zero.get_param @b : tensor<8xbf16>
  // CHECK: nn.bias_gelu %{{.*}}, %{{.*}} : tensor<2x8xbf16>, tensor<8xbf16>
  %s = nn.add %x, %b : tensor<2x8xbf16>, tensor<8xbf16>
  %y = nn.gelu %s : tensor<2x8xbf16>
  %loss = nn.softmax_cross_entropy %y, %l : tensor<2x8xbf16>, tensor<2xi32> -> tensor<f32>
  zero.return %loss : tensor<f32>
}
