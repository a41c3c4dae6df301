// RUN: not zero-opt %s -split-input-file --zero-tiled-mlp="tiles=0" 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: zero-opt %s -split-input-file --zero-tiled-mlp="tiles=2" -verify-diagnostics

// ZERO: error: zero-tiled-mlp: tiled-mlp must be at least 1, got 0
zero.param @g : tensor<8x4xf32> init normal std 0.02
zero.param @u : tensor<8x4xf32> init normal std 0.02
zero.param @d : tensor<4x8xf32> init normal std 0.02
zero.train_step @ok(%x: tensor<3x4xf32>, %t: tensor<3xi32>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %wg = zero.get_param @g : tensor<8x4xf32>
  %wu = zero.get_param @u : tensor<8x4xf32>
  %wd = zero.get_param @d : tensor<4x8xf32>
  %g = nn.matmul %x, %wg transpose_rhs : tensor<3x4xf32>, tensor<8x4xf32> -> tensor<3x8xf32>
  %u = nn.matmul %x, %wu transpose_rhs : tensor<3x4xf32>, tensor<8x4xf32> -> tensor<3x8xf32>
  %a = nn.swiglu %g, %u : tensor<3x8xf32>
  %y = nn.matmul %a, %wd transpose_rhs : tensor<3x8xf32>, tensor<4x8xf32> -> tensor<3x4xf32>
  %loss = nn.softmax_cross_entropy %y, %t : tensor<3x4xf32>, tensor<3xi32> -> tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// GPT-2's MLP (a biased fc, GELU, a biased proj) is not tiled: a step
// without a SwiGLU MLP is refused, naming it.
zero.param @fc : tensor<4x8xf32> init normal std 0.02
zero.param @fcb : tensor<8xf32> init zeros
zero.param @proj : tensor<8x4xf32> init normal std 0.02
// expected-error @+1 {{'zero.train_step' op has no SwiGLU MLP (gate and up projections, nn.swiglu, down projection) for tiled-mlp to tile; GPT-2's MLP (fc with bias, GELU, proj with bias) is not tiled}}
zero.train_step @gpt2(%x: tensor<3x4xf32>, %t: tensor<3xi32>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %w = zero.get_param @fc : tensor<4x8xf32>
  %b = zero.get_param @fcb : tensor<8xf32>
  %p = zero.get_param @proj : tensor<8x4xf32>
  %h = nn.matmul %x, %w : tensor<3x4xf32>, tensor<4x8xf32> -> tensor<3x8xf32>
  %a = nn.bias_gelu %h, %b : tensor<3x8xf32>, tensor<8xf32>
  %y = nn.matmul %a, %p : tensor<3x8xf32>, tensor<8x4xf32> -> tensor<3x4xf32>
  %loss = nn.softmax_cross_entropy %y, %t : tensor<3x4xf32>, tensor<3xi32> -> tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// The gate is kept for another use: tiling would need it whole.
zero.param @g : tensor<8x4xf32> init normal std 0.02
zero.param @u : tensor<8x4xf32> init normal std 0.02
zero.param @d : tensor<4x8xf32> init normal std 0.02
zero.train_step @gate_used(%x: tensor<3x4xf32>, %t: tensor<3xi32>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %wg = zero.get_param @g : tensor<8x4xf32>
  %wu = zero.get_param @u : tensor<8x4xf32>
  %wd = zero.get_param @d : tensor<4x8xf32>
  %g = nn.matmul %x, %wg transpose_rhs : tensor<3x4xf32>, tensor<8x4xf32> -> tensor<3x8xf32>
  %u = nn.matmul %x, %wu transpose_rhs : tensor<3x4xf32>, tensor<8x4xf32> -> tensor<3x8xf32>
  // expected-error @+1 {{'nn.swiglu' op reads a gate or up used beside the MLP; tiled-mlp would need it whole}}
  %a = nn.swiglu %g, %u : tensor<3x8xf32>
  %a2 = nn.add %a, %g : tensor<3x8xf32>, tensor<3x8xf32>
  %y = nn.matmul %a2, %wd transpose_rhs : tensor<3x8xf32>, tensor<4x8xf32> -> tensor<3x4xf32>
  %loss = nn.softmax_cross_entropy %y, %t : tensor<3x4xf32>, tensor<3xi32> -> tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Gate and up of different inputs are no Llama MLP.
zero.param @g : tensor<8x4xf32> init normal std 0.02
zero.param @u : tensor<8x4xf32> init normal std 0.02
zero.param @d : tensor<4x8xf32> init normal std 0.02
zero.train_step @two_inputs(%x: tensor<3x4xf32>, %z: tensor<3x4xf32>, %t: tensor<3xi32>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %wg = zero.get_param @g : tensor<8x4xf32>
  %wu = zero.get_param @u : tensor<8x4xf32>
  %wd = zero.get_param @d : tensor<4x8xf32>
  %g = nn.matmul %x, %wg transpose_rhs : tensor<3x4xf32>, tensor<8x4xf32> -> tensor<3x8xf32>
  %u = nn.matmul %z, %wu transpose_rhs : tensor<3x4xf32>, tensor<8x4xf32> -> tensor<3x8xf32>
  // expected-error @+1 {{'nn.swiglu' op reads gate and up projections of different inputs; tiled-mlp tiles Llama's MLP only}}
  %a = nn.swiglu %g, %u : tensor<3x8xf32>
  %y = nn.matmul %a, %wd transpose_rhs : tensor<3x8xf32>, tensor<4x8xf32> -> tensor<3x4xf32>
  %loss = nn.softmax_cross_entropy %y, %t : tensor<3x4xf32>, tensor<3xi32> -> tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// A down projection without transpose_rhs (a [I, H] weight) is not the
// form Hugging Face's Linear is imported as.
zero.param @g : tensor<8x4xf32> init normal std 0.02
zero.param @u : tensor<8x4xf32> init normal std 0.02
zero.param @d : tensor<8x4xf32> init normal std 0.02
zero.train_step @down_form(%x: tensor<3x4xf32>, %t: tensor<3xi32>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %wg = zero.get_param @g : tensor<8x4xf32>
  %wu = zero.get_param @u : tensor<8x4xf32>
  %wd = zero.get_param @d : tensor<8x4xf32>
  %g = nn.matmul %x, %wg transpose_rhs : tensor<3x4xf32>, tensor<8x4xf32> -> tensor<3x8xf32>
  %u = nn.matmul %x, %wu transpose_rhs : tensor<3x4xf32>, tensor<8x4xf32> -> tensor<3x8xf32>
  // expected-error @+1 {{'nn.swiglu' op is not read by a bias-free down projection (nn.matmul with transpose_rhs); tiled-mlp tiles Llama's MLP only}}
  %a = nn.swiglu %g, %u : tensor<3x8xf32>
  %y = nn.matmul %a, %wd : tensor<3x8xf32>, tensor<8x4xf32> -> tensor<3x4xf32>
  %loss = nn.softmax_cross_entropy %y, %t : tensor<3x4xf32>, tensor<3xi32> -> tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// A bf16 MLP: refused, the kernels compute in f32 only.
zero.param @g : tensor<8x4xbf16> init normal std 0.02
zero.param @u : tensor<8x4xbf16> init normal std 0.02
zero.param @d : tensor<4x8xbf16> init normal std 0.02
zero.train_step @bf16(%x: tensor<3x4xbf16>, %t: tensor<3xi32>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %wg = zero.get_param @g : tensor<8x4xbf16>
  %wu = zero.get_param @u : tensor<8x4xbf16>
  %wd = zero.get_param @d : tensor<4x8xbf16>
  %g = nn.matmul %x, %wg transpose_rhs : tensor<3x4xbf16>, tensor<8x4xbf16> -> tensor<3x8xbf16>
  %u = nn.matmul %x, %wu transpose_rhs : tensor<3x4xbf16>, tensor<8x4xbf16> -> tensor<3x8xbf16>
  // expected-error @+1 {{'nn.swiglu' op is not f32; tiled-mlp computes in f32 only}}
  %a = nn.swiglu %g, %u : tensor<3x8xbf16>
  %y = nn.matmul %a, %wd transpose_rhs : tensor<3x8xbf16>, tensor<4x8xbf16> -> tensor<3x4xbf16>
  %yf = nn.cast %y : tensor<3x4xbf16> to tensor<3x4xf32>
  %loss = nn.softmax_cross_entropy %yf, %t : tensor<3x4xf32>, tensor<3xi32> -> tensor<f32>
  zero.return %loss : tensor<f32>
}
