// Attention over packed rows of 4096 tokens (8 heads of 64), whose
// documents' lengths price it: ids, positions, labels, the queries, keys
// and values one parameter.
zero.param @qkv : tensor<2x8x4096x64xf32> init normal std 0.02
zero.train_step @train(%y: tensor<2x8x4096xi32>, %pos: tensor<2x4096xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %q = zero.get_param @qkv : tensor<2x8x4096x64xf32>
  %ids = nn.document_ids %pos : tensor<2x4096xi64>
  %o = nn.attention %q, %q, %q segments(%ids : tensor<2x4096xi32>) causal : tensor<2x8x4096x64xf32>
  %loss = nn.softmax_cross_entropy %o, %y : tensor<2x8x4096x64xf32>, tensor<2x8x4096xi32> -> tensor<f32>
  zero.return %loss : tensor<f32>
}
