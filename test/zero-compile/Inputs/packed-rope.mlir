// A packed causal LM's step: token ids, the rows' positions and labels
// [2, 8], one head of 8 dims; rotary embeddings at the positions, attention
// masked by the documents they mark, labels shifted inside the loss.
zero.param @embed : tensor<16x8xf32> init normal std 0.1
zero.train_step @train(%ids: tensor<2x8xi64>, %pos: tensor<2x8xi64>, %labels: tensor<2x8xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> labels same_tokens {
  %table = zero.get_param @embed : tensor<16x8xf32>
  %x = nn.embedding %table[%ids] : tensor<16x8xf32>, tensor<2x8xi64> -> tensor<2x8x8xf32>
  %x4 = nn.reshape %x : tensor<2x8x8xf32> -> tensor<2x1x8x8xf32>
  %q = nn.rope %x4 positions(%pos : tensor<2x8xi64>) theta 1.000000e+04 : tensor<2x1x8x8xf32>
  %doc = nn.document_ids %pos : tensor<2x8xi64>
  %o = nn.attention %q, %q, %x4 segments(%doc : tensor<2x8xi32>) causal : tensor<2x1x8x8xf32>
  %o3 = nn.reshape %o : tensor<2x1x8x8xf32> -> tensor<2x8x8xf32>
  %logits = nn.matmul %o3, %table transpose_rhs : tensor<2x8x8xf32>, tensor<16x8xf32> -> tensor<2x8x16xf32>
  %shifted = nn.shift_labels %labels fill -100 : tensor<2x8xi64>
  %loss = nn.softmax_cross_entropy %logits, %shifted ignore_index -100 : tensor<2x8x16xf32>, tensor<2x8xi64> -> tensor<f32>
  zero.return %loss : tensor<f32>
}
