// Compute ops GPT-2 does not use: relu, silu, elementwise multiplication,
// scaling and a row softmax (their derivatives add relu_grad, silu_grad,
// mul, scale and softmax_grad), and an RMS norm (rms_norm_grad).
zero.param @w : tensor<4x6xf32> init normal std 0.1
zero.param @g : tensor<6xf32> init ones
zero.train_step @step(%x: tensor<8x4xf32>, %y: tensor<8xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %w = zero.get_param @w : tensor<4x6xf32>
  %g = zero.get_param @g : tensor<6xf32>
  %h = nn.matmul %x, %w : tensor<8x4xf32>, tensor<4x6xf32> -> tensor<8x6xf32>
  %r = nn.relu %h : tensor<8x6xf32>
  %q = nn.silu %r : tensor<8x6xf32>
  %m = nn.mul %q, %g : tensor<8x6xf32>, tensor<6xf32>
  %s0 = nn.scale %m by 0.5 : tensor<8x6xf32>
  %s = nn.rms_norm %s0, %g eps 1.0e-5 : tensor<8x6xf32>, tensor<6xf32>
  %p = nn.softmax %s : tensor<8x6xf32>
  %loss = nn.softmax_cross_entropy %p, %y : tensor<8x6xf32>, tensor<8xi64> -> tensor<f32>
  zero.return %loss : tensor<f32>
}
