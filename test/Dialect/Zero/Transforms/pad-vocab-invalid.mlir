// RUN: not zero-opt %s -split-input-file --zero-pad-vocab="multiple=0" 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not zero-opt %s -split-input-file --zero-pad-vocab="multiple=-128" 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// RUN: zero-opt %s -split-input-file --zero-pad-vocab -verify-diagnostics
// RUN: not zero-opt %s -split-input-file --zero-pad-vocab="only-16-bit dtype=f16" 2>&1 | FileCheck %s --check-prefix=DTYPE
// DTYPE: error: zero-pad-vocab: unknown dtype 'f16' (expected auto, fp32, bf16 or fp16)

// ZERO: error: zero-pad-vocab: multiple must be positive, got 0
// NEGATIVE: error: zero-pad-vocab: multiple must be positive, got -128
zero.param @wte : tensor<10x4xf32> init normal std 0.02
zero.train_step @train(%tokens: tensor<2x3xi32>, %targets: tensor<2x3xi32>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %t = zero.get_param @wte : tensor<10x4xf32>
  %e = nn.embedding %t[%tokens] : tensor<10x4xf32>, tensor<2x3xi32> -> tensor<2x3x4xf32>
  %logits = nn.matmul %e, %t transpose_rhs : tensor<2x3x4xf32>, tensor<10x4xf32> -> tensor<2x3x10xf32>
  %loss = nn.softmax_cross_entropy %logits, %targets : tensor<2x3x10xf32>, tensor<2x3xi32> -> tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// The backward would keep the unpadded shapes: padding runs before autodiff.
zero.param @wte : tensor<10x4xf32> init normal std 0.02
// expected-error @+1 {{'zero.train_step' op zero-pad-vocab runs on the forward, before zero-autodiff; this step already has its backward}}
zero.train_step @differentiated(%tokens: tensor<2x3xi32>, %targets: tensor<2x3xi32>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  %g = nn.fill 0.0 : tensor<10x4xf32>
  zero.grad @wte, %g : tensor<10x4xf32>
  zero.return %loss : tensor<f32>
}

// -----

// The padding attributes say how many entries are valid: fewer than the
// padded size and at least one.
// expected-error @+1 {{'zero.param' op rows must lie in [1, 16), the parameter's rows without padding; got 16}}
zero.param @wte : tensor<16x4xf32> init normal std 0.02 rows 16

// -----

// expected-error @+1 {{'zero.param' op rows must lie in [1, 16), the parameter's rows without padding; got 0}}
zero.param @wte : tensor<16x4xf32> init normal std 0.02 rows 0

// -----

func.func @embedding_rows(%t: tensor<16x4xf32>, %ids: tensor<2x3xi32>) {
  // expected-error @+1 {{'nn.embedding' op rows must lie in [1, 16), the table's rows without padding; got 17}}
  %e = nn.embedding %t[%ids] rows 17 : tensor<16x4xf32>, tensor<2x3xi32> -> tensor<2x3x4xf32>
  return
}

// -----

func.func @loss_classes(%l: tensor<2x3x16xf32>, %y: tensor<2x3xi32>) {
  // expected-error @+1 {{'nn.softmax_cross_entropy' op classes must lie in [1, 16), the logits' last dimension without padding; got 16}}
  %loss = nn.softmax_cross_entropy %l, %y classes 16 : tensor<2x3x16xf32>, tensor<2x3xi32> -> tensor<f32>
  return
}

// -----

func.func @loss_grad_classes(%l: tensor<2x3x16xf32>, %y: tensor<2x3xi32>, %d: tensor<f32>) {
  // expected-error @+1 {{'nn.softmax_cross_entropy_grad' op classes must lie in [1, 16), the logits' last dimension without padding; got -1}}
  %g = nn.softmax_cross_entropy_grad %l, %y, %d classes -1 : tensor<2x3x16xf32>, tensor<2x3xi32>, tensor<f32>
  return
}

// -----

func.func @matmul_columns(%x: tensor<2x4xf32>, %w: tensor<16x4xf32>) {
  // expected-error @+1 {{'nn.matmul' op columns must lie in [1, 16), the result's columns without padding; got 0}}
  %y = nn.matmul %x, %w transpose_rhs columns 0 : tensor<2x4xf32>, tensor<16x4xf32> -> tensor<2x16xf32>
  return
}

// -----

func.func @matmul_contract(%dy: tensor<2x16xf32>, %w: tensor<16x4xf32>) {
  // expected-error @+1 {{'nn.matmul' op contract must lie in [1, 16), the contraction's extent without padding; got 20}}
  %dx = nn.matmul %dy, %w contract 20 : tensor<2x16xf32>, tensor<16x4xf32> -> tensor<2x4xf32>
  return
}
