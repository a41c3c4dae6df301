// RUN: zero-opt %s --zero-autodiff --zero-mixed-precision=dtype=fp16 | FileCheck %s --check-prefix=FP16
// RUN: zero-opt %s --zero-autodiff --zero-mixed-precision=dtype=bf16 | FileCheck %s --check-prefix=BF16

// A frozen parameter gets its compute type like the others (the copy the
// forward reads; zero-partition gives it no master). At fp16 the backward
// of the trainable part is still seeded with the loss scale, and the
// frozen weight's copy is what the input gradient flows through.
zero.param @w1 : tensor<4x6xf32> init normal std 0.1
zero.param @w2 : tensor<6x3xf32> init normal std 0.1 frozen
// FP16: zero.param @w1 : tensor<4x6xf32> init normal std 1.000000e-01 compute f16{{$}}
// FP16-NEXT: zero.param @w2 : tensor<6x3xf32> init normal std 1.000000e-01 compute f16 frozen
// BF16: zero.param @w2 : tensor<6x3xf32> init normal std 1.000000e-01 compute bf16 frozen
// FP16-LABEL: zero.train_step @frozen_head
// FP16: %[[W2:.*]] = zero.get_param @w2 : tensor<6x3xf16>
// FP16: %[[SEED:.*]] = zero.loss_scale : tensor<f32>
// FP16-NEXT: %[[DZ:.*]] = nn.softmax_cross_entropy_grad %{{.*}}, %{{.*}}, %[[SEED]]
// FP16-NEXT: %[[DH:.*]] = nn.matmul %[[DZ]], %[[W2]] transpose_rhs : tensor<8x3xf16>, tensor<6x3xf16> -> tensor<8x6xf16>
// FP16-NEXT: %[[DW1:.*]] = nn.matmul %{{.*}}, %[[DH]] transpose_lhs
// FP16-NEXT: zero.grad @w1, %[[DW1]] : tensor<4x6xf16>
// FP16-NEXT: zero.return
// BF16: nn.fill 1.000000e+00 {zero.loss_seed}
// BF16-NOT: zero.grad @w2
zero.train_step @frozen_head(%x: tensor<8x4xf32>, %y: tensor<8xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %w1 = zero.get_param @w1 : tensor<4x6xf32>
  %h = nn.matmul %x, %w1 : tensor<8x4xf32>, tensor<4x6xf32> -> tensor<8x6xf32>
  %w2 = zero.get_param @w2 : tensor<6x3xf32>
  %z = nn.matmul %h, %w2 : tensor<8x6xf32>, tensor<6x3xf32> -> tensor<8x3xf32>
  %loss = nn.softmax_cross_entropy %z, %y : tensor<8x3xf32>, tensor<8xi64> -> tensor<f32>
  zero.return %loss : tensor<f32>
}
