// A classifier whose matmuls compute in bf16 while its layer norm, kept in
// fp32 as Hugging Face keeps `_keep_in_fp32_modules`, computes in fp32 from
// fp32 parameters (their own masters). Written in mixed precision: the
// parameters carry their compute types and the casts between the two are
// the model's own.
zero.param @fc1.weight : tensor<16x32xf32> init normal std 0.2 compute bf16
zero.param @norm.weight : tensor<32xf32> init ones
zero.param @norm.bias : tensor<32xf32> init zeros
zero.param @head.weight : tensor<32x10xf32> init normal std 0.2 compute bf16
zero.train_step @step(%x: tensor<8x16xf32>, %y: tensor<8xi64>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-2, weight_decay = 0.01>
    precision #zero.precision<kind = bf16> {
  %xc = nn.cast %x : tensor<8x16xf32> to tensor<8x16xbf16>
  %w1 = zero.get_param @fc1.weight : tensor<16x32xbf16>
  %h = nn.matmul %xc, %w1 : tensor<8x16xbf16>, tensor<16x32xbf16> -> tensor<8x32xbf16>
  %hf = nn.cast %h : tensor<8x32xbf16> to tensor<8x32xf32>
  %g = zero.get_param @norm.weight : tensor<32xf32>
  %b = zero.get_param @norm.bias : tensor<32xf32>
  %n = nn.layer_norm %hf, %g, %b eps 1.0e-5 : tensor<8x32xf32>, tensor<32xf32>, tensor<32xf32>
  %r = nn.relu %n : tensor<8x32xf32>
  %rc = nn.cast %r : tensor<8x32xf32> to tensor<8x32xbf16>
  %w2 = zero.get_param @head.weight : tensor<32x10xbf16>
  %logits = nn.matmul %rc, %w2 : tensor<8x32xbf16>, tensor<32x10xbf16> -> tensor<8x10xbf16>
  %loss = nn.softmax_cross_entropy %logits, %y : tensor<8x10xbf16>, tensor<8xi64> -> tensor<f32>
  zero.return %loss : tensor<f32>
}
