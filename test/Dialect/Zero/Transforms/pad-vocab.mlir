// RUN: zero-opt %s -split-input-file --zero-pad-vocab | FileCheck %s
// RUN: zero-opt %s -split-input-file --zero-pad-vocab="multiple=8" | FileCheck %s --check-prefix=EIGHT
// RUN: zero-opt %s -split-input-file --zero-pad-vocab --zero-autodiff | FileCheck %s --check-prefix=GRAD
// only-16-bit pads these fp32 steps only when dtype makes them 16-bit.
// RUN: zero-opt %s -split-input-file --zero-pad-vocab="only-16-bit dtype=bf16" | FileCheck %s
// RUN: zero-opt %s -split-input-file --zero-pad-vocab="only-16-bit" | FileCheck %s --check-prefix=FP32
// RUN: zero-opt %s -split-input-file --zero-pad-vocab="only-16-bit dtype=fp32" | FileCheck %s --check-prefix=FP32
// FP32-NOT: rows {{[0-9]}}

// A tied table (GPT-2's wte): the lookup absorbs the padding, the LM head's
// product pads the logits, the loss masks the padded classes. The other
// parameters are left alone, even the [vocab, ...]-shaped positional table.
// CHECK-LABEL: zero.param @wte : tensor<128x4xf32> init normal std 2.000000e-02 rows 10
// CHECK: zero.param @wpe : tensor<10x4xf32> init normal std 1.000000e-02
// CHECK-NOT: rows
// CHECK-LABEL: zero.train_step @tied
// CHECK: %[[T:.*]] = zero.get_param @wte : tensor<128x4xf32>
// CHECK: nn.embedding %[[T]][%{{.*}}] rows 10 : tensor<128x4xf32>, tensor<2x3xi32> -> tensor<2x3x4xf32>
// CHECK: %[[W:.*]] = zero.get_param @wte : tensor<128x4xf32>
// CHECK: %[[L:.*]] = nn.matmul %{{.*}}, %[[W]] transpose_rhs columns 10 : tensor<2x3x4xf32>, tensor<128x4xf32> -> tensor<2x3x128xf32>
// CHECK: nn.softmax_cross_entropy %[[L]], %{{.*}} classes 10 : tensor<2x3x128xf32>, tensor<2x3xi32> -> tensor<f32>
// EIGHT-LABEL: zero.param @wte : tensor<16x4xf32> init normal std 2.000000e-02 rows 10
// EIGHT: nn.softmax_cross_entropy %{{.*}}, %{{.*}} classes 10 : tensor<2x3x16xf32>
// The backward is derived from the padded forward: the loss gradient masks
// the padded classes, the input gradient of the LM head leaves them out of
// its sums, the table's gradient has the padded shape.
// GRAD-LABEL: zero.train_step @tied
// GRAD: nn.softmax_cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} classes 10 : tensor<2x3x128xf32>
// GRAD: nn.matmul %{{.*}}, %{{.*}} contract 10 : tensor<2x3x128xf32>, tensor<128x4xf32> -> tensor<2x3x4xf32>
// GRAD: nn.matmul %{{.*}}, %{{.*}} transpose_lhs : tensor<6x128xf32>, tensor<6x4xf32> -> tensor<128x4xf32>
// GRAD: nn.embedding_grad %{{.*}}[%{{.*}}] : tensor<2x3x4xf32>, tensor<2x3xi32> -> tensor<128x4xf32>
// GRAD: zero.grad @wte, %{{.*}} : tensor<128x4xf32>
zero.param @wte : tensor<10x4xf32> init normal std 0.02
zero.param @wpe : tensor<10x4xf32> init normal std 0.01
zero.train_step @tied(%tokens: tensor<2x3xi32>, %targets: tensor<2x3xi32>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %t = zero.get_param @wte : tensor<10x4xf32>
  %e = nn.embedding %t[%tokens] : tensor<10x4xf32>, tensor<2x3xi32> -> tensor<2x3x4xf32>
  %p = zero.get_param @wpe : tensor<10x4xf32>
  %pe = nn.embedding %p[%tokens] : tensor<10x4xf32>, tensor<2x3xi32> -> tensor<2x3x4xf32>
  %x = nn.add %e, %pe : tensor<2x3x4xf32>, tensor<2x3x4xf32>
  %w = zero.get_param @wte : tensor<10x4xf32>
  %logits = nn.matmul %x, %w transpose_rhs : tensor<2x3x4xf32>, tensor<10x4xf32> -> tensor<2x3x10xf32>
  %loss = nn.softmax_cross_entropy %logits, %targets : tensor<2x3x10xf32>, tensor<2x3xi32> -> tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// An untied head stored [hidden, vocab] pads its columns, not its rows: it is
// left alone, and so is the embedding, whose padding no loss masks.
// CHECK-LABEL: zero.param @emb : tensor<10x4xf32> init normal std 2.000000e-02
// CHECK-NOT: rows
// CHECK: zero.param @head : tensor<4x10xf32>
// CHECK-NOT: rows
// CHECK-LABEL: zero.train_step @untied_columns
// CHECK: nn.softmax_cross_entropy %{{.*}}, %{{.*}} : tensor<2x3x10xf32>
zero.param @emb : tensor<10x4xf32> init normal std 0.02
zero.param @head : tensor<4x10xf32> init normal std 0.02
zero.train_step @untied_columns(%tokens: tensor<2x3xi32>, %targets: tensor<2x3xi32>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %t = zero.get_param @emb : tensor<10x4xf32>
  %e = nn.embedding %t[%tokens] : tensor<10x4xf32>, tensor<2x3xi32> -> tensor<2x3x4xf32>
  %w = zero.get_param @head : tensor<4x10xf32>
  %logits = nn.matmul %e, %w : tensor<2x3x4xf32>, tensor<4x10xf32> -> tensor<2x3x10xf32>
  %loss = nn.softmax_cross_entropy %logits, %targets : tensor<2x3x10xf32>, tensor<2x3xi32> -> tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// An untied head stored [vocab, hidden] (Llama's lm_head) is padded on its
// own; the embedding table, which only a lookup reads, is not.
// CHECK-LABEL: zero.param @emb : tensor<10x4xf32> init normal std 2.000000e-02
// CHECK-NEXT: zero.param @head : tensor<128x4xf32> init normal std 2.000000e-02 rows 10
// CHECK-LABEL: zero.train_step @untied_rows
// CHECK: nn.embedding %{{.*}}[%{{.*}}] : tensor<10x4xf32>
// CHECK: nn.matmul %{{.*}}, %{{.*}} transpose_rhs columns 10 : tensor<2x3x4xf32>, tensor<128x4xf32> -> tensor<2x3x128xf32>
// CHECK: nn.softmax_cross_entropy %{{.*}}, %{{.*}} classes 10 : tensor<2x3x128xf32>
zero.param @emb : tensor<10x4xf32> init normal std 0.02
zero.param @head : tensor<10x4xf32> init normal std 0.02
zero.train_step @untied_rows(%tokens: tensor<2x3xi32>, %targets: tensor<2x3xi32>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %t = zero.get_param @emb : tensor<10x4xf32>
  %e = nn.embedding %t[%tokens] : tensor<10x4xf32>, tensor<2x3xi32> -> tensor<2x3x4xf32>
  %w = zero.get_param @head : tensor<10x4xf32>
  %logits = nn.matmul %e, %w transpose_rhs : tensor<2x3x4xf32>, tensor<10x4xf32> -> tensor<2x3x10xf32>
  %loss = nn.softmax_cross_entropy %logits, %targets : tensor<2x3x10xf32>, tensor<2x3xi32> -> tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// A table whose logits reach an op that cannot take padding (here a bias
// add, whose bias would need padding too) is left alone.
// CHECK-LABEL: zero.param @wte : tensor<10x4xf32> init normal std 2.000000e-02
// CHECK-NOT: rows
// CHECK-LABEL: zero.train_step @blocked
// CHECK: nn.softmax_cross_entropy %{{.*}}, %{{.*}} : tensor<2x3x10xf32>
zero.param @wte : tensor<10x4xf32> init normal std 0.02
zero.param @bias : tensor<10xf32> init zeros
zero.train_step @blocked(%tokens: tensor<2x3xi32>, %targets: tensor<2x3xi32>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %t = zero.get_param @wte : tensor<10x4xf32>
  %e = nn.embedding %t[%tokens] : tensor<10x4xf32>, tensor<2x3xi32> -> tensor<2x3x4xf32>
  %w = zero.get_param @wte : tensor<10x4xf32>
  %mm = nn.matmul %e, %w transpose_rhs : tensor<2x3x4xf32>, tensor<10x4xf32> -> tensor<2x3x10xf32>
  %b = zero.get_param @bias : tensor<10xf32>
  %logits = nn.add %mm, %b : tensor<2x3x10xf32>, tensor<10xf32>
  %loss = nn.softmax_cross_entropy %logits, %targets : tensor<2x3x10xf32>, tensor<2x3xi32> -> tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// A vocabulary that is a multiple already is not padded; with multiple=8 a
// table of 16 rows is not padded either.
// CHECK-LABEL: zero.param @wte : tensor<256x4xf32> init normal std 2.000000e-02
// CHECK-NOT: rows
// CHECK-LABEL: zero.train_step @aligned
// CHECK: nn.softmax_cross_entropy %{{.*}}, %{{.*}} : tensor<2x3x256xf32>
// EIGHT-LABEL: zero.param @wte : tensor<256x4xf32>
// EIGHT-NOT: rows
zero.param @wte : tensor<256x4xf32> init normal std 0.02
zero.train_step @aligned(%tokens: tensor<2x3xi32>, %targets: tensor<2x3xi32>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %t = zero.get_param @wte : tensor<256x4xf32>
  %e = nn.embedding %t[%tokens] : tensor<256x4xf32>, tensor<2x3xi32> -> tensor<2x3x4xf32>
  %logits = nn.matmul %e, %t transpose_rhs : tensor<2x3x4xf32>, tensor<256x4xf32> -> tensor<2x3x256xf32>
  %loss = nn.softmax_cross_entropy %logits, %targets : tensor<2x3x256xf32>, tensor<2x3xi32> -> tensor<f32>
  zero.return %loss : tensor<f32>
}
