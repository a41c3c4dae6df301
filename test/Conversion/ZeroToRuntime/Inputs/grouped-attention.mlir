// Grouped-query attention: 4 query heads over 2 key/value heads, whose
// derivative writes key and value gradients of the key's shape.
zero.param @gq : tensor<16xf32> init ones
zero.param @gkv : tensor<16xf32> init ones
zero.train_step @step(%x: tensor<4x4x8x16xf32>, %xkv: tensor<4x2x8x16xf32>,
                      %y: tensor<4x4x8xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %gq = zero.get_param @gq : tensor<16xf32>
  %gkv = zero.get_param @gkv : tensor<16xf32>
  %q = nn.mul %x, %gq : tensor<4x4x8x16xf32>, tensor<16xf32>
  %kv = nn.mul %xkv, %gkv : tensor<4x2x8x16xf32>, tensor<16xf32>
  %o = nn.attention %q, %kv, %kv causal : tensor<4x4x8x16xf32>, tensor<4x2x8x16xf32>
  %loss = nn.softmax_cross_entropy %o, %y : tensor<4x4x8x16xf32>, tensor<4x4x8xi64> -> tensor<f32>
  zero.return %loss : tensor<f32>
}
