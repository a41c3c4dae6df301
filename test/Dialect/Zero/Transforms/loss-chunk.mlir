// RUN: zero-opt %s -split-input-file --zero-loss-chunk="chunk=4" | FileCheck %s
// RUN: zero-opt %s -split-input-file --zero-loss-chunk="chunk=4" --zero-autodiff | FileCheck %s --check-prefix=GRAD

// A tied head (GPT-2's wte): the LM head's product and the loss become one
// nn.linear_cross_entropy over chunks of 4 of the 6 rows (4, then 2); the
// logits are gone.
// CHECK-LABEL: zero.train_step @tied
// CHECK: %[[X:.*]] = nn.add
// CHECK: %[[W:.*]] = zero.get_param @wte : tensor<10x4xf32>
// CHECK-NOT: nn.matmul
// CHECK: %[[L:.*]] = nn.linear_cross_entropy %[[X]], %[[W]], %{{.*}} chunk 4 : tensor<2x3x4xf32>, tensor<10x4xf32>, tensor<2x3xi32> -> tensor<f32>
// CHECK-NOT: nn.softmax_cross_entropy
// CHECK: zero.return %[[L]]
// The backward recomputes the chunks: one op gives both gradients, the
// table's summed with the embedding's.
// GRAD-LABEL: zero.train_step @tied
// GRAD: %[[DX:.*]], %[[DW:.*]] = nn.linear_cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} chunk 4 : tensor<2x3x4xf32>, tensor<10x4xf32>, tensor<2x3xi32>, tensor<f32>
// GRAD-NOT: nn.softmax_cross_entropy_grad
// GRAD: nn.embedding_grad %{{.*}}[%{{.*}}] : tensor<2x3x4xf32>, tensor<2x3xi32> -> tensor<10x4xf32>
// GRAD: zero.grad @wte
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

// A Llama head of its own with Hugging Face's ignored label: the fused op
// keeps ignore_index, and so does its gradient.
// CHECK-LABEL: zero.train_step @untied
// CHECK: nn.linear_cross_entropy %{{.*}}, %{{.*}}, %{{.*}} chunk 4 ignore_index -100 : tensor<2x3x4xf32>, tensor<10x4xf32>, tensor<2x3xi64> -> tensor<f32>
// GRAD-LABEL: zero.train_step @untied
// GRAD: nn.linear_cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} chunk 4 ignore_index -100
// GRAD: zero.grad @lm_head
zero.param @embed : tensor<10x4xf32> init normal std 0.02
zero.param @lm_head : tensor<10x4xf32> init normal std 0.02
zero.train_step @untied(%tokens: tensor<2x3xi64>, %targets: tensor<2x3xi64>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %t = zero.get_param @embed : tensor<10x4xf32>
  %x = nn.embedding %t[%tokens] : tensor<10x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
  %w = zero.get_param @lm_head : tensor<10x4xf32>
  %logits = nn.matmul %x, %w transpose_rhs : tensor<2x3x4xf32>, tensor<10x4xf32> -> tensor<2x3x10xf32>
  %loss = nn.softmax_cross_entropy %logits, %targets ignore_index -100 : tensor<2x3x10xf32>, tensor<2x3xi64> -> tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// A step written in mixed precision: the 16-bit head and hidden states fuse
// as at fp32 (the kernels compute as the unchunked 16-bit program), and so
// does the gradient.
// CHECK-LABEL: zero.train_step @bf16
// CHECK: nn.linear_cross_entropy %{{.*}}, %{{.*}}, %{{.*}} chunk 4 : tensor<2x3x4xbf16>, tensor<10x4xbf16>, tensor<2x3xi32> -> tensor<f32>
// GRAD-LABEL: zero.train_step @bf16
// GRAD: nn.linear_cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} chunk 4 : tensor<2x3x4xbf16>, tensor<10x4xbf16>
// GRAD: zero.grad @head16
zero.param @embed16 : tensor<10x4xf32> init normal std 0.02 compute bf16
zero.param @head16 : tensor<10x4xf32> init normal std 0.02 compute bf16
zero.train_step @bf16(%tokens: tensor<2x3xi32>, %targets: tensor<2x3xi32>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-3>
    precision #zero.precision<kind = bf16> {
  %t = zero.get_param @embed16 : tensor<10x4xbf16>
  %x = nn.embedding %t[%tokens] : tensor<10x4xbf16>, tensor<2x3xi32> -> tensor<2x3x4xbf16>
  %w = zero.get_param @head16 : tensor<10x4xbf16>
  %logits = nn.matmul %x, %w transpose_rhs : tensor<2x3x4xbf16>, tensor<10x4xbf16> -> tensor<2x3x10xbf16>
  %loss = nn.softmax_cross_entropy %logits, %targets : tensor<2x3x10xbf16>, tensor<2x3xi32> -> tensor<f32>
  zero.return %loss : tensor<f32>
}
