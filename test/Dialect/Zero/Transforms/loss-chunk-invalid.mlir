// RUN: not zero-opt %s -split-input-file --zero-loss-chunk="chunk=0" 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: zero-opt %s -split-input-file --zero-loss-chunk="chunk=4" -verify-diagnostics

// ZERO: error: zero-loss-chunk: loss-chunk must be at least 1, got 0
zero.param @w : tensor<10x4xf32> init normal std 0.02
zero.train_step @ok(%x: tensor<2x3x4xf32>, %targets: tensor<2x3xi32>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %w = zero.get_param @w : tensor<10x4xf32>
  %logits = nn.matmul %x, %w transpose_rhs : tensor<2x3x4xf32>, tensor<10x4xf32> -> tensor<2x3x10xf32>
  %loss = nn.softmax_cross_entropy %logits, %targets : tensor<2x3x10xf32>, tensor<2x3xi32> -> tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// A biased head: refused at its bias add.
zero.param @w : tensor<10x4xf32> init normal std 0.02
zero.param @b : tensor<10xf32> init zeros
zero.train_step @bias(%x: tensor<2x3x4xf32>, %targets: tensor<2x3xi32>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %w = zero.get_param @w : tensor<10x4xf32>
  %b = zero.get_param @b : tensor<10xf32>
  %y = nn.matmul %x, %w transpose_rhs : tensor<2x3x4xf32>, tensor<10x4xf32> -> tensor<2x3x10xf32>
  // expected-error @+1 {{'nn.add' op adds a bias to the output projection; loss-chunk fuses a bias-free head only}}
  %logits = nn.add %y, %b : tensor<2x3x10xf32>, tensor<10xf32>
  %loss = nn.softmax_cross_entropy %logits, %targets : tensor<2x3x10xf32>, tensor<2x3xi32> -> tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Logits used beside the loss would be needed whole.
zero.param @w : tensor<10x4xf32> init normal std 0.02
zero.train_step @reused(%x: tensor<2x3x4xf32>, %targets: tensor<2x3xi32>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %w = zero.get_param @w : tensor<10x4xf32>
  // expected-error @+1 {{'nn.matmul' op computes logits that are used beside the loss; loss-chunk would need them whole}}
  %logits = nn.matmul %x, %w transpose_rhs : tensor<2x3x4xf32>, tensor<10x4xf32> -> tensor<2x3x10xf32>
  %l1 = nn.softmax_cross_entropy %logits, %targets : tensor<2x3x10xf32>, tensor<2x3xi32> -> tensor<f32>
  %l2 = nn.softmax_cross_entropy %logits, %targets : tensor<2x3x10xf32>, tensor<2x3xi32> -> tensor<f32>
  %loss = nn.add %l1, %l2 : tensor<f32>, tensor<f32>
  zero.return %l1 : tensor<f32>
}

// -----

// A [hidden, vocab] head (no transpose_rhs) is not the fused op's layout.
zero.param @w : tensor<4x10xf32> init normal std 0.02
zero.train_step @layout(%x: tensor<2x3x4xf32>, %targets: tensor<2x3xi32>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %w = zero.get_param @w : tensor<4x10xf32>
  // expected-error @+1 {{'nn.matmul' op is not a [vocab, hidden] head applied with transpose_rhs; loss-chunk fuses only that form}}
  %logits = nn.matmul %x, %w : tensor<2x3x4xf32>, tensor<4x10xf32> -> tensor<2x3x10xf32>
  %loss = nn.softmax_cross_entropy %logits, %targets : tensor<2x3x10xf32>, tensor<2x3xi32> -> tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// A padded vocabulary (zero-pad-vocab first) is not chunked.
zero.param @w : tensor<16x4xf32> init normal std 0.02 rows 10
zero.train_step @padded(%x: tensor<2x3x4xf32>, %targets: tensor<2x3xi32>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %w = zero.get_param @w : tensor<16x4xf32>
  %logits = nn.matmul %x, %w transpose_rhs columns 10 : tensor<2x3x4xf32>, tensor<16x4xf32> -> tensor<2x3x16xf32>
  // expected-error @+1 {{'nn.softmax_cross_entropy' op has padded classes (zero-pad-vocab); loss-chunk does not chunk a padded vocabulary}}
  %loss = nn.softmax_cross_entropy %logits, %targets classes 10 : tensor<2x3x16xf32>, tensor<2x3xi32> -> tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// A loss that is not a cross-entropy.
zero.param @w : tensor<4x4xf32> init normal std 0.02
// expected-error @+1 {{'zero.train_step' op zero-loss-chunk (loss-chunk) needs the step's loss to be an nn.softmax_cross_entropy}}
zero.train_step @other(%x: tensor<2x4xf32>, %targets: tensor<2x3xi32>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// The backward is derived from the fused forward: the pass runs first.
zero.param @w : tensor<10x4xf32> init normal std 0.02
// expected-error @+1 {{'zero.train_step' op zero-loss-chunk runs on the forward, before zero-autodiff; this step already has its backward}}
zero.train_step @differentiated(%x: tensor<2x3x4xf32>, %targets: tensor<2x3xi32>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  %g = nn.fill 0.0 : tensor<10x4xf32>
  zero.grad @w, %g : tensor<10x4xf32>
  zero.return %loss : tensor<f32>
}
