// RUN: zero-opt %s -split-input-file --zero-token-mean -verify-diagnostics

// What zero-token-mean refuses, one case each.

// A loss with ignore_index inside a larger loss: the mean over the global
// batch's valid labels would have to scale only its part.
zero.param @w : tensor<4x3xf32> init zeros
zero.partition @flat stage 0 world_size 2 alignment 2 numel 12 padded 12 params [@w] offsets [0]
zero.train_step @train(%x: tensor<2x4xf32>, %y: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 2, global_batch = 4> {
  %w = zero.get_param @w : tensor<4x3xf32>
  %z = nn.matmul %x, %w : tensor<2x4xf32>, tensor<4x3xf32> -> tensor<2x3xf32>
  // expected-error @+1 {{'nn.softmax_cross_entropy' op with ignore_index must be the train step's loss (zero.return's operand): the step's loss is then the mean over the valid labels of the global batch, which zero-token-mean computes from it}}
  %ce = nn.softmax_cross_entropy %z, %y ignore_index -100 : tensor<2x3xf32>, tensor<2xi64> -> tensor<f32>
  %loss = nn.scale %ce by 2.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// The loss read by another op too.
zero.param @w : tensor<4x3xf32> init zeros
zero.partition @flat stage 0 world_size 2 alignment 2 numel 12 padded 12 params [@w] offsets [0]
zero.train_step @train(%x: tensor<2x4xf32>, %y: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 2, global_batch = 4> {
  %w = zero.get_param @w : tensor<4x3xf32>
  %z = nn.matmul %x, %w : tensor<2x4xf32>, tensor<4x3xf32> -> tensor<2x3xf32>
  // expected-error @+1 {{'nn.softmax_cross_entropy' op with ignore_index is the step's loss and must be used by zero.return (or the nn.add of a term to it) only}}
  %loss = nn.softmax_cross_entropy %z, %y ignore_index -100 : tensor<2x3xf32>, tensor<2xi64> -> tensor<f32>
  %dz = nn.softmax_cross_entropy_grad %z, %y, %loss ignore_index -100 : tensor<2x3xf32>, tensor<2xi64>, tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Before zero-autodiff there is no backward to scale.
zero.param @w : tensor<4x3xf32> init zeros
zero.partition @flat stage 0 world_size 2 alignment 2 numel 12 padded 12 params [@w] offsets [0]
zero.train_step @train(%x: tensor<2x4xf32>, %y: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 2, global_batch = 4> {
  %w = zero.get_param @w : tensor<4x3xf32>
  %z = nn.matmul %x, %w : tensor<2x4xf32>, tensor<4x3xf32> -> tensor<2x3xf32>
  // expected-error @+1 {{'nn.softmax_cross_entropy' op with ignore_index needs its one nn.softmax_cross_entropy_grad (zero-autodiff first), found 0}}
  %loss = nn.softmax_cross_entropy %z, %y ignore_index -100 : tensor<2x3xf32>, tensor<2xi64> -> tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Before zero-partition and zero-grad-sync the world and the micro steps
// are unknown.
zero.param @w : tensor<4x3xf32> init zeros
// expected-error @+1 {{'zero.train_step' op zero-token-mean needs the step's #zero.schedule (zero-partition and zero-grad-sync first)}}
zero.train_step @train(%x: tensor<2x4xf32>, %y: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %w = zero.get_param @w : tensor<4x3xf32>
  %z = nn.matmul %x, %w : tensor<2x4xf32>, tensor<4x3xf32> -> tensor<2x3xf32>
  %loss = nn.softmax_cross_entropy %z, %y ignore_index -100 : tensor<2x3xf32>, tensor<2xi64> -> tensor<f32>
  %seed = nn.fill 1.0 {zero.loss_seed} : tensor<f32>
  %dz = nn.softmax_cross_entropy_grad %z, %y, %seed ignore_index -100 : tensor<2x3xf32>, tensor<2xi64>, tensor<f32>
  %dw = nn.matmul %x, %dz transpose_lhs : tensor<2x4xf32>, tensor<2x3xf32> -> tensor<4x3xf32>
  zero.grad @w, %dw : tensor<4x3xf32>
  zero.return %loss : tensor<f32>
}
