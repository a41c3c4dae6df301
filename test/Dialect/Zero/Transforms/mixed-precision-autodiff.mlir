// zero-autodiff and zero-mixed-precision composed, in either order, on a
// forward-only step (mixed-precision.mlir tests the pass alone).
// RUN: zero-opt %s -split-input-file --zero-autodiff --zero-mixed-precision=dtype=bf16 | FileCheck %s --check-prefix=BF16
// RUN: zero-opt %s -split-input-file --zero-autodiff --zero-mixed-precision=dtype=fp16 | FileCheck %s --check-prefix=FP16
// RUN: zero-opt %s -split-input-file --zero-autodiff --zero-mixed-precision | FileCheck %s --check-prefix=AUTO
// RUN: zero-opt %s -split-input-file --zero-mixed-precision=dtype=fp16 --zero-autodiff | FileCheck %s --check-prefix=FP16
// RUN: zero-opt %s -split-input-file --zero-autodiff --zero-mixed-precision=dtype=fp32 | FileCheck %s --check-prefix=FP32

// fp32 master parameters, 16-bit compute copies, 16-bit activations and
// gradients, an fp32 loss, and at fp16 the backward seeded with the loss scale
// (the same as scaling the loss before backward). The order of autodiff and
// mixed precision does not matter.

zero.param @w : tensor<4x3xf32> init normal std 0.1
zero.param @b : tensor<3xf32> init zeros
// BF16: zero.param @w : tensor<4x3xf32> init normal std 1.000000e-01 compute bf16
// BF16: zero.param @b : tensor<3xf32> init zeros compute bf16
// FP16: zero.param @w : tensor<4x3xf32> init normal std 1.000000e-01 compute f16
// FP32: zero.param @w : tensor<4x3xf32> init normal std 1.000000e-01{{$}}
// AUTO: zero.param @w : tensor<4x3xf32> init normal std 1.000000e-01 compute f16

// BF16-LABEL: zero.train_step @step
// BF16-SAME: precision #zero.precision<kind = bf16
// BF16-NEXT: %[[X:.*]] = nn.cast %arg0 : tensor<8x4xf32> to tensor<8x4xbf16>
// BF16-NEXT: %[[W:.*]] = zero.get_param @w : tensor<4x3xbf16>
// BF16-NEXT: nn.matmul %[[X]], %[[W]] : tensor<8x4xbf16>, tensor<4x3xbf16> -> tensor<8x3xbf16>
// BF16: %[[LOSS:.*]] = nn.softmax_cross_entropy %{{.*}}, %{{.*}} : tensor<8x3xbf16>, tensor<8xi64> -> tensor<f32>
// BF16-NEXT: %[[SEED:.*]] = nn.fill 1.000000e+00 {zero.loss_seed} : tensor<f32>
// BF16-NEXT: nn.softmax_cross_entropy_grad %{{.*}}, %{{.*}}, %[[SEED]] : tensor<8x3xbf16>, tensor<8xi64>, tensor<f32>
// BF16: zero.grad @b, %{{.*}} : tensor<3xbf16>
// BF16: zero.grad @w, %{{.*}} : tensor<4x3xbf16>
// BF16-NEXT: zero.return %[[LOSS]] : tensor<f32>
// BF16-NOT: zero.loss_scale

// FP16-LABEL: zero.train_step @step
// FP16-SAME: precision #zero.precision<kind = fp16
// FP16: %[[S:.*]] = zero.loss_scale : tensor<f32>
// FP16-NEXT: nn.softmax_cross_entropy_grad %{{.*}}, %{{.*}}, %[[S]] : tensor<8x3xf16>, tensor<8xi64>, tensor<f32>
// FP16-NOT: zero.loss_seed
// FP16: zero.grad @w, %{{.*}} : tensor<4x3xf16>

// AUTO-LABEL: zero.train_step @step
// AUTO-SAME: precision #zero.precision<kind = fp16, initial_scale_power = 8>
// AUTO: zero.loss_scale : tensor<f32>

// FP32-LABEL: zero.train_step @step
// FP32-SAME: precision #zero.precision<kind = fp32, initial_scale_power = 8>
// FP32-NOT: nn.cast
// FP32: zero.grad @w, %{{.*}} : tensor<4x3xf32>
zero.train_step @step(%x: tensor<8x4xf32>, %y: tensor<8xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp16, initial_scale_power = 8> {
  %w = zero.get_param @w : tensor<4x3xf32>
  %h = nn.matmul %x, %w : tensor<8x4xf32>, tensor<4x3xf32> -> tensor<8x3xf32>
  %b = zero.get_param @b : tensor<3xf32>
  %z = nn.add %h, %b : tensor<8x3xf32>, tensor<3xf32>
  %loss = nn.softmax_cross_entropy %z, %y : tensor<8x3xf32>, tensor<8xi64> -> tensor<f32>
  zero.return %loss : tensor<f32>
}
