// RUN: zero-opt %s -split-input-file --zero-autodiff | FileCheck %s

// Frozen parameters get no gradient, and nothing only they need is
// differentiated.

// A frozen embedding: no embedding_grad, no zero.grad for the table; the
// trainable head still gets its gradient.
zero.param @emb : tensor<16x8xf32> init normal std 0.02 frozen
zero.param @w : tensor<8x16xf32> init normal std 0.02
// CHECK-LABEL: zero.train_step @frozen_embedding
zero.train_step @frozen_embedding(%ids: tensor<2x3xi32>, %y: tensor<2x3xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %emb = zero.get_param @emb : tensor<16x8xf32>
  %e = nn.embedding %emb[%ids] : tensor<16x8xf32>, tensor<2x3xi32> -> tensor<2x3x8xf32>
  %w = zero.get_param @w : tensor<8x16xf32>
  %z = nn.matmul %e, %w : tensor<2x3x8xf32>, tensor<8x16xf32> -> tensor<2x3x16xf32>
  %loss = nn.softmax_cross_entropy %z, %y : tensor<2x3x16xf32>, tensor<2x3xi32> -> tensor<f32>
  // CHECK: nn.fill 1.000000e+00 {zero.loss_seed}
  // CHECK-NOT: nn.embedding_grad
  // CHECK-NOT: zero.grad @emb
  // CHECK: zero.grad @w
  // CHECK-NOT: nn.embedding_grad
  // CHECK-NOT: zero.grad @emb
  // CHECK: zero.return
  zero.return %loss : tensor<f32>
}

// -----

// A frozen first matmul: neither the gradient of its input nor that of its
// weight is computed; only the second layer's weight gradient remains.
zero.param @w1 : tensor<4x6xf32> init normal std 0.1 frozen
zero.param @w2 : tensor<6x3xf32> init normal std 0.1
// CHECK-LABEL: zero.train_step @frozen_first_layer
zero.train_step @frozen_first_layer(%x: tensor<8x4xf32>, %y: tensor<8xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %w1 = zero.get_param @w1 : tensor<4x6xf32>
  %h = nn.matmul %x, %w1 : tensor<8x4xf32>, tensor<4x6xf32> -> tensor<8x6xf32>
  %r = nn.relu %h : tensor<8x6xf32>
  %w2 = zero.get_param @w2 : tensor<6x3xf32>
  %z = nn.matmul %r, %w2 : tensor<8x6xf32>, tensor<6x3xf32> -> tensor<8x3xf32>
  %loss = nn.softmax_cross_entropy %z, %y : tensor<8x3xf32>, tensor<8xi64> -> tensor<f32>
  // CHECK: %[[SEED:.*]] = nn.fill 1.000000e+00 {zero.loss_seed}
  // CHECK-NEXT: %[[DZ:.*]] = nn.softmax_cross_entropy_grad
  // CHECK-NEXT: %[[DW2:.*]] = nn.matmul %{{.*}}, %[[DZ]] transpose_lhs : tensor<8x6xf32>, tensor<8x3xf32> -> tensor<6x3xf32>
  // CHECK-NEXT: zero.grad @w2, %[[DW2]] : tensor<6x3xf32>
  // CHECK-NEXT: zero.return
  zero.return %loss : tensor<f32>
}

// -----

// A frozen weight in the middle: its input gradient still flows to the
// trainable first layer (the backward matmul against the frozen weight
// stays), but its own weight gradient is not computed.
zero.param @w1 : tensor<4x6xf32> init normal std 0.1
zero.param @w2 : tensor<6x5xf32> init normal std 0.1 frozen
zero.param @w3 : tensor<5x3xf32> init normal std 0.1
// CHECK-LABEL: zero.train_step @frozen_middle
zero.train_step @frozen_middle(%x: tensor<8x4xf32>, %y: tensor<8xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %w1 = zero.get_param @w1 : tensor<4x6xf32>
  %h1 = nn.matmul %x, %w1 : tensor<8x4xf32>, tensor<4x6xf32> -> tensor<8x6xf32>
  // CHECK: %[[W2:.*]] = zero.get_param @w2
  %w2 = zero.get_param @w2 : tensor<6x5xf32>
  %h2 = nn.matmul %h1, %w2 : tensor<8x6xf32>, tensor<6x5xf32> -> tensor<8x5xf32>
  %w3 = zero.get_param @w3 : tensor<5x3xf32>
  %z = nn.matmul %h2, %w3 : tensor<8x5xf32>, tensor<5x3xf32> -> tensor<8x3xf32>
  %loss = nn.softmax_cross_entropy %z, %y : tensor<8x3xf32>, tensor<8xi64> -> tensor<f32>
  // CHECK: %[[DZ:.*]] = nn.softmax_cross_entropy_grad
  // CHECK-NEXT: %[[DH2:.*]] = nn.matmul %[[DZ]], %{{.*}} transpose_rhs : tensor<8x3xf32>, tensor<5x3xf32> -> tensor<8x5xf32>
  // CHECK-NEXT: %[[DW3:.*]] = nn.matmul %{{.*}}, %[[DZ]] transpose_lhs
  // CHECK-NEXT: zero.grad @w3, %[[DW3]]
  // CHECK-NEXT: %[[DH1:.*]] = nn.matmul %[[DH2]], %[[W2]] transpose_rhs : tensor<8x5xf32>, tensor<6x5xf32> -> tensor<8x6xf32>
  // CHECK-NEXT: %[[DW1:.*]] = nn.matmul %{{.*}}, %[[DH1]] transpose_lhs
  // CHECK-NEXT: zero.grad @w1, %[[DW1]]
  // CHECK-NEXT: zero.return
  zero.return %loss : tensor<f32>
}

// -----

// A frozen parameter the loss does not read is not reported (it has no
// gradient to be zero).
zero.param @w : tensor<4x3xf32> init normal std 0.1
zero.param @unused : tensor<3xf32> init zeros frozen
// CHECK-LABEL: zero.train_step @frozen_unused
zero.train_step @frozen_unused(%x: tensor<8x4xf32>, %y: tensor<8xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %w = zero.get_param @w : tensor<4x3xf32>
  %h = nn.matmul %x, %w : tensor<8x4xf32>, tensor<4x3xf32> -> tensor<8x3xf32>
  %loss = nn.softmax_cross_entropy %h, %y : tensor<8x3xf32>, tensor<8xi64> -> tensor<f32>
  // CHECK: zero.grad @w
  // CHECK-NOT: zero.grad @unused
  // CHECK: zero.return
  zero.return %loss : tensor<f32>
}
