// RUN: zero-opt %s -split-input-file --zero-autodiff -verify-diagnostics

// An op on the path from a parameter to the loss without a derivative rule.
zero.param @w : tensor<4x3xf32> init normal std 0.1
zero.train_step @no_rule(%x: tensor<8x4xf32>, %y: tensor<8xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %w = zero.get_param @w : tensor<4x3xf32>
  %h = nn.matmul %x, %w : tensor<8x4xf32>, tensor<4x3xf32> -> tensor<8x3xf32>
  // expected-error @+1 {{'nn.relu_grad' op has no derivative rule (DerivativeOpInterface), so zero-autodiff cannot differentiate the loss through it}}
  %r = nn.relu_grad %h, %h : tensor<8x3xf32>
  %loss = nn.softmax_cross_entropy %r, %y : tensor<8x3xf32>, tensor<8xi64> -> tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// A parameter that does not influence the loss is reported, and gets a zero
// gradient so that every parameter has exactly one zero.grad.
zero.param @w : tensor<4x3xf32> init normal std 0.1
// expected-warning @+1 {{parameter @unused does not influence the loss; its gradient is zero and it is only affected by weight decay (DeepSpeed: ignore_unused_parameters)}}
zero.param @unused : tensor<3xf32> init zeros
zero.train_step @unused_param(%x: tensor<8x4xf32>, %y: tensor<8xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %w = zero.get_param @w : tensor<4x3xf32>
  %u = zero.get_param @unused : tensor<3xf32>
  %h = nn.matmul %x, %w : tensor<8x4xf32>, tensor<4x3xf32> -> tensor<8x3xf32>
  %dead = nn.add %h, %u : tensor<8x3xf32>, tensor<3xf32>
  %loss = nn.softmax_cross_entropy %h, %y : tensor<8x3xf32>, tensor<8xi64> -> tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// A loss that no parameter influences cannot be trained.
zero.param @w : tensor<4x3xf32> init normal std 0.1
// expected-error @+1 {{'zero.train_step' op loss does not depend on any parameter}}
zero.train_step @constant_loss(%x: tensor<8x3xf32>, %y: tensor<8xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %loss = nn.softmax_cross_entropy %x, %y : tensor<8x3xf32>, tensor<8xi64> -> tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Differentiating twice is an error, not a second backward.
zero.param @w : tensor<4x3xf32> init normal std 0.1
// expected-error @+1 {{'zero.train_step' op is already differentiated (it has zero.grad ops)}}
zero.train_step @twice(%x: tensor<8x4xf32>, %y: tensor<8xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %w = zero.get_param @w : tensor<4x3xf32>
  %h = nn.matmul %x, %w : tensor<8x4xf32>, tensor<4x3xf32> -> tensor<8x3xf32>
  %loss = nn.softmax_cross_entropy %h, %y : tensor<8x3xf32>, tensor<8xi64> -> tensor<f32>
  zero.grad @w, %w : tensor<4x3xf32>
  zero.return %loss : tensor<f32>
}

// -----

// A step whose parameters are all frozen has nothing to train.
zero.param @w : tensor<4x3xf32> init normal std 0.1 frozen
// expected-error @+1 {{'zero.train_step' op every parameter is frozen: nothing to train}}
zero.train_step @all_frozen(%x: tensor<8x4xf32>, %y: tensor<8xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %w = zero.get_param @w : tensor<4x3xf32>
  %h = nn.matmul %x, %w : tensor<8x4xf32>, tensor<4x3xf32> -> tensor<8x3xf32>
  %loss = nn.softmax_cross_entropy %h, %y : tensor<8x3xf32>, tensor<8xi64> -> tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// A loss that only frozen parameters influence cannot be trained.
zero.param @w : tensor<4x3xf32> init normal std 0.1 frozen
zero.param @other : tensor<3xf32> init zeros
// expected-error @+1 {{'zero.train_step' op loss does not depend on any trainable parameter}}
zero.train_step @frozen_loss(%x: tensor<8x4xf32>, %y: tensor<8xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %w = zero.get_param @w : tensor<4x3xf32>
  %h = nn.matmul %x, %w : tensor<8x4xf32>, tensor<4x3xf32> -> tensor<8x3xf32>
  %loss = nn.softmax_cross_entropy %h, %y : tensor<8x3xf32>, tensor<8xi64> -> tensor<f32>
  zero.return %loss : tensor<f32>
}
