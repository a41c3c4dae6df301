// RUN: zero-opt %s -split-input-file --zero-mixed-precision=dtype=bf16 | FileCheck %s --check-prefix=BF16
// RUN: zero-opt %s -split-input-file --zero-mixed-precision=dtype=fp16 | FileCheck %s --check-prefix=FP16
// RUN: zero-opt %s -split-input-file --zero-mixed-precision | FileCheck %s --check-prefix=AUTO
// RUN: zero-opt %s -split-input-file --zero-mixed-precision=dtype=fp32 | FileCheck %s --check-prefix=FP32

// A linear model after zero-autodiff (its input state in zero-pipeline): the
// parameters stay fp32 masters with a 16-bit compute type, the float input
// is cast once, every non-scalar float value (activations, gradients)
// becomes 16-bit, the scalar loss stays fp32 and the labels keep their type.
// At fp16 the seed d loss / d loss = 1 becomes the dynamic loss scale.
zero.param @w : tensor<4x3xf32> init normal std 0.1
zero.param @b : tensor<3xf32> init zeros
// BF16: zero.param @w : tensor<4x3xf32> init normal std 1.000000e-01 compute bf16
// BF16-NEXT: zero.param @b : tensor<3xf32> init zeros compute bf16
// FP16: zero.param @w : tensor<4x3xf32> init normal std 1.000000e-01 compute f16
// AUTO: zero.param @w : tensor<4x3xf32> init normal std 1.000000e-01 compute f16
// FP32: zero.param @w : tensor<4x3xf32> init normal std 1.000000e-01{{$}}
// FP32-NEXT: zero.param @b : tensor<3xf32> init zeros{{$}}

// BF16-LABEL: zero.train_step @linear
// BF16-SAME: (%[[X:.*]]: tensor<8x4xf32>, %[[Y:.*]]: tensor<8xi64>)
// BF16-SAME: precision #zero.precision<kind = bf16
// BF16-NEXT: %[[XC:.*]] = nn.cast %[[X]] : tensor<8x4xf32> to tensor<8x4xbf16>
// BF16-NEXT: %[[W:.*]] = zero.get_param @w : tensor<4x3xbf16>
// BF16-NEXT: nn.matmul %[[XC]], %[[W]] : tensor<8x4xbf16>, tensor<4x3xbf16> -> tensor<8x3xbf16>
// BF16: %[[LOSS:.*]] = nn.softmax_cross_entropy %{{.*}}, %[[Y]] : tensor<8x3xbf16>, tensor<8xi64> -> tensor<f32>
// BF16-NEXT: %[[SEED:.*]] = nn.fill 1.000000e+00 {zero.loss_seed} : tensor<f32>
// BF16-NEXT: nn.softmax_cross_entropy_grad %{{.*}}, %[[Y]], %[[SEED]] : tensor<8x3xbf16>, tensor<8xi64>, tensor<f32>
// BF16-NEXT: nn.reduce_sum %{{.*}} : tensor<8x3xbf16> -> tensor<3xbf16>
// BF16-NEXT: zero.grad @b, %{{.*}} : tensor<3xbf16>
// BF16-NEXT: nn.matmul %[[XC]], %{{.*}} transpose_lhs : tensor<8x4xbf16>, tensor<8x3xbf16> -> tensor<4x3xbf16>
// BF16-NEXT: zero.grad @w, %{{.*}} : tensor<4x3xbf16>
// BF16-NEXT: zero.return %[[LOSS]] : tensor<f32>
// BF16-NOT: zero.loss_scale

// FP16-LABEL: zero.train_step @linear
// FP16-SAME: precision #zero.precision<kind = fp16, initial_scale_power = 8>
// FP16-NOT: zero.loss_seed
// FP16: %[[S:.*]] = zero.loss_scale : tensor<f32>
// FP16-NEXT: nn.softmax_cross_entropy_grad %{{.*}}, %{{.*}}, %[[S]] : tensor<8x3xf16>, tensor<8xi64>, tensor<f32>
// FP16: zero.grad @w, %{{.*}} : tensor<4x3xf16>

// dtype=auto follows the step's attribute (fp16 here).
// AUTO-LABEL: zero.train_step @linear
// AUTO-SAME: precision #zero.precision<kind = fp16, initial_scale_power = 8>
// AUTO: zero.loss_scale : tensor<f32>

// fp32: nothing to cast, the seed stays 1.
// FP32-LABEL: zero.train_step @linear
// FP32-SAME: precision #zero.precision<kind = fp32
// FP32-NOT: nn.cast
// FP32: nn.fill 1.000000e+00 {zero.loss_seed}
// FP32: zero.grad @w, %{{.*}} : tensor<4x3xf32>
// FP32-NOT: zero.loss_scale
zero.train_step @linear(%x: tensor<8x4xf32>, %y: tensor<8xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp16, initial_scale_power = 8> {
  %w = zero.get_param @w : tensor<4x3xf32>
  %h = nn.matmul %x, %w : tensor<8x4xf32>, tensor<4x3xf32> -> tensor<8x3xf32>
  %b = zero.get_param @b : tensor<3xf32>
  %z = nn.add %h, %b : tensor<8x3xf32>, tensor<3xf32>
  %loss = nn.softmax_cross_entropy %z, %y : tensor<8x3xf32>, tensor<8xi64> -> tensor<f32>
  %seed = nn.fill 1.0 {zero.loss_seed} : tensor<f32>
  %dz = nn.softmax_cross_entropy_grad %z, %y, %seed : tensor<8x3xf32>, tensor<8xi64>, tensor<f32>
  %db = nn.reduce_sum %dz : tensor<8x3xf32> -> tensor<3xf32>
  zero.grad @b, %db : tensor<3xf32>
  %dw = nn.matmul %x, %dz transpose_lhs : tensor<8x4xf32>, tensor<8x3xf32> -> tensor<4x3xf32>
  zero.grad @w, %dw : tensor<4x3xf32>
  zero.return %loss : tensor<f32>
}

// -----

// dtype=auto on a bf16 step: bf16 compute, the seed kept (no loss scaling);
// integer token ids are not cast.
zero.param @transformer.wte.weight : tensor<16x4xf32> init normal std 0.02
// AUTO: zero.param @transformer.wte.weight : tensor<16x4xf32> init normal std 2.000000e-02 compute bf16
// AUTO-LABEL: zero.train_step @tokens
// AUTO-SAME: precision #zero.precision<kind = bf16>
// AUTO-NOT: nn.cast
// AUTO: nn.embedding %{{.*}}[%{{.*}}] : tensor<16x4xbf16>, tensor<2x3xi32> -> tensor<2x3x4xbf16>
// AUTO: nn.fill 1.000000e+00 {zero.loss_seed}
// AUTO-NOT: zero.loss_scale
// AUTO: nn.embedding_grad %{{.*}}[%{{.*}}] : tensor<2x3x4xbf16>, tensor<2x3xi32> -> tensor<16x4xbf16>
zero.train_step @tokens(%x: tensor<2x3xi32>, %y: tensor<2x3xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16> {
  %e = zero.get_param @transformer.wte.weight : tensor<16x4xf32>
  %h = nn.embedding %e[%x] : tensor<16x4xf32>, tensor<2x3xi32> -> tensor<2x3x4xf32>
  %loss = nn.softmax_cross_entropy %h, %y : tensor<2x3x4xf32>, tensor<2x3xi32> -> tensor<f32>
  %seed = nn.fill 1.0 {zero.loss_seed} : tensor<f32>
  %dh = nn.softmax_cross_entropy_grad %h, %y, %seed : tensor<2x3x4xf32>, tensor<2x3xi32>, tensor<f32>
  %de = nn.embedding_grad %dh[%x] : tensor<2x3x4xf32>, tensor<2x3xi32> -> tensor<16x4xf32>
  zero.grad @transformer.wte.weight, %de : tensor<16x4xf32>
  zero.return %loss : tensor<f32>
}
