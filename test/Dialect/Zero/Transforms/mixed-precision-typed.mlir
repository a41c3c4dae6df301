// RUN: zero-opt %s -split-input-file --zero-autodiff --zero-mixed-precision | FileCheck %s

// A step written in mixed precision: its parameters carry their compute
// types, and a module kept in fp32 (Hugging Face's _keep_in_fp32_modules)
// has parameters without one. zero-mixed-precision leaves its types as they
// are: the matmul and its gradient stay bf16, the layer norm, its
// parameters and their gradients fp32, and no cast is added.

// CHECK: zero.param @w : tensor<4x3xf32> init normal std 1.000000e-01 compute bf16
// CHECK-NEXT: zero.param @g : tensor<3xf32> init ones{{$}}
// CHECK-NEXT: zero.param @b : tensor<3xf32> init zeros{{$}}
// CHECK-LABEL: zero.train_step @step
// CHECK-SAME: precision #zero.precision<kind = bf16>
// CHECK-NEXT: %[[X:.*]] = nn.cast %arg0 : tensor<8x4xf32> to tensor<8x4xbf16>
// CHECK-NEXT: %[[W:.*]] = zero.get_param @w : tensor<4x3xbf16>
// CHECK-NEXT: nn.matmul %[[X]], %[[W]] : tensor<8x4xbf16>, tensor<4x3xbf16> -> tensor<8x3xbf16>
// CHECK-NEXT: nn.cast %{{.*}} : tensor<8x3xbf16> to tensor<8x3xf32>
// CHECK-NEXT: zero.get_param @g : tensor<3xf32>
// CHECK-NEXT: zero.get_param @b : tensor<3xf32>
// CHECK-NEXT: nn.layer_norm {{.*}} : tensor<8x3xf32>, tensor<3xf32>, tensor<3xf32>
// CHECK: nn.fill 1.000000e+00 {zero.loss_seed}
// CHECK-DAG: zero.grad @g, %{{.*}} : tensor<3xf32>
// CHECK-DAG: zero.grad @b, %{{.*}} : tensor<3xf32>
// CHECK-DAG: zero.grad @w, %{{.*}} : tensor<4x3xbf16>
// CHECK-NOT: nn.cast %arg0
zero.param @w : tensor<4x3xf32> init normal std 0.1 compute bf16
zero.param @g : tensor<3xf32> init ones
zero.param @b : tensor<3xf32> init zeros
zero.train_step @step(%x: tensor<8x4xf32>, %y: tensor<8xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16> {
  %xc = nn.cast %x : tensor<8x4xf32> to tensor<8x4xbf16>
  %w = zero.get_param @w : tensor<4x3xbf16>
  %h = nn.matmul %xc, %w : tensor<8x4xbf16>, tensor<4x3xbf16> -> tensor<8x3xbf16>
  %hf = nn.cast %h : tensor<8x3xbf16> to tensor<8x3xf32>
  %g = zero.get_param @g : tensor<3xf32>
  %b = zero.get_param @b : tensor<3xf32>
  %n = nn.layer_norm %hf, %g, %b eps 1.0e-5 : tensor<8x3xf32>, tensor<3xf32>, tensor<3xf32>
  %loss = nn.softmax_cross_entropy %n, %y : tensor<8x3xf32>, tensor<8xi64> -> tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// At fp16 the backward is seeded with the loss scale.
// CHECK-LABEL: zero.train_step @fp16
// CHECK-NOT: zero.loss_seed
// CHECK: %[[S:.*]] = zero.loss_scale : tensor<f32>
// CHECK-NEXT: nn.softmax_cross_entropy_grad %{{.*}}, %{{.*}}, %[[S]] : tensor<8x3xf32>, tensor<8xi64>, tensor<f32>
// CHECK: zero.grad @w, %{{.*}} : tensor<4x3xf16>
zero.param @w : tensor<4x3xf32> init normal std 0.1 compute f16
zero.param @b : tensor<3xf32> init zeros
zero.train_step @fp16(%x: tensor<8x4xf32>, %y: tensor<8xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp16> {
  %xc = nn.cast %x : tensor<8x4xf32> to tensor<8x4xf16>
  %w = zero.get_param @w : tensor<4x3xf16>
  %h = nn.matmul %xc, %w : tensor<8x4xf16>, tensor<4x3xf16> -> tensor<8x3xf16>
  %hf = nn.cast %h : tensor<8x3xf16> to tensor<8x3xf32>
  %b = zero.get_param @b : tensor<3xf32>
  %z = nn.add %hf, %b : tensor<8x3xf32>, tensor<3xf32>
  %loss = nn.softmax_cross_entropy %z, %y : tensor<8x3xf32>, tensor<8xi64> -> tensor<f32>
  zero.return %loss : tensor<f32>
}
