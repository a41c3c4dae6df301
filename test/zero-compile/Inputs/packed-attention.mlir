// A training step whose attention masks packed documents by the ids of
// their positions (nn.document_ids).
zero.param @qkv : tensor<2x2x8x4xf32> init normal std 0.1
zero.train_step @train(%y: tensor<2x2x8xi32>, %pos: tensor<2x8xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %q = zero.get_param @qkv : tensor<2x2x8x4xf32>
  %ids = nn.document_ids %pos : tensor<2x8xi64>
  %o = nn.attention %q, %q, %q segments(%ids : tensor<2x8xi32>) causal : tensor<2x2x8x4xf32>
  %loss = nn.softmax_cross_entropy %o, %y : tensor<2x2x8x4xf32>, tensor<2x2x8xi32> -> tensor<f32>
  zero.return %loss : tensor<f32>
}
