// A step computing, besides its loss, a value with an op that no runtime
// kernel model describes (arith.negf on a tensor).
zero.param @w : tensor<4x3xf32> init normal std 0.1
zero.train_step @step(%x: tensor<8x4xf32>, %y: tensor<8xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %w = zero.get_param @w : tensor<4x3xf32>
  %h = nn.matmul %x, %w : tensor<8x4xf32>, tensor<4x3xf32> -> tensor<8x3xf32>
  %n = arith.negf %h : tensor<8x3xf32>
  %loss = nn.softmax_cross_entropy %h, %y : tensor<8x3xf32>, tensor<8xi64> -> tensor<f32>
  zero.return %loss : tensor<f32>
}
