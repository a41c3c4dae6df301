// The model of rms-norm-torch.test: linear (no bias), RMS norm over
// [4, 4, 16], linear in nn.Linear's [out, in] layout, cross-entropy.
zero.param @fc1.weight : tensor<32x16xf32> init normal std 0.2
zero.param @norm.weight : tensor<16xf32> init ones
zero.param @fc2.weight : tensor<8x16xf32> init normal std 0.25
zero.train_step @train(%x: tensor<16x32xf32>, %y: tensor<16xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.000000e-02>
    precision #zero.precision<kind = fp32> {
  %w1 = zero.get_param @fc1.weight : tensor<32x16xf32>
  %h = nn.matmul %x, %w1 : tensor<16x32xf32>, tensor<32x16xf32> -> tensor<16x16xf32>
  %h3 = nn.reshape %h : tensor<16x16xf32> -> tensor<4x4x16xf32>
  %g = zero.get_param @norm.weight : tensor<16xf32>
  %n3 = nn.rms_norm %h3, %g eps 1.000000e-06 : tensor<4x4x16xf32>, tensor<16xf32>
  %n = nn.reshape %n3 : tensor<4x4x16xf32> -> tensor<16x16xf32>
  %w2 = zero.get_param @fc2.weight : tensor<8x16xf32>
  %z = nn.matmul %n, %w2 transpose_rhs : tensor<16x16xf32>, tensor<8x16xf32> -> tensor<16x8xf32>
  %loss = nn.softmax_cross_entropy %z, %y : tensor<16x8xf32>, tensor<16xi32> -> tensor<f32>
  zero.return %loss : tensor<f32>
}
