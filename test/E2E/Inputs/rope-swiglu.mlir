// A Llama-style block on feature rows: a projection read as [batch, heads,
// seq, head_dim] and rotated (nn.rope), SwiGLU gate and up projections
// (nn.swiglu) and a classifier. rope_swiglu_reference.py implements it with
// Hugging Face's rotary embedding in PyTorch.
zero.param @proj.weight : tensor<64x64xf32> init normal std 0.125
zero.param @gate.weight : tensor<64x32xf32> init normal std 0.125
zero.param @up.weight : tensor<64x32xf32> init normal std 0.125
zero.param @head.weight : tensor<32x8xf32> init normal std 0.18
zero.train_step @train(%x: tensor<16x64xf32>, %y: tensor<16xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %wp = zero.get_param @proj.weight : tensor<64x64xf32>
  %h = nn.matmul %x, %wp : tensor<16x64xf32>, tensor<64x64xf32> -> tensor<16x64xf32>
  %h4 = nn.reshape %h : tensor<16x64xf32> -> tensor<16x2x4x8xf32>
  %r4 = nn.rope %h4 theta 1.000000e+02 : tensor<16x2x4x8xf32>
  %r = nn.reshape %r4 : tensor<16x2x4x8xf32> -> tensor<16x64xf32>
  %wg = zero.get_param @gate.weight : tensor<64x32xf32>
  %g = nn.matmul %r, %wg : tensor<16x64xf32>, tensor<64x32xf32> -> tensor<16x32xf32>
  %wu = zero.get_param @up.weight : tensor<64x32xf32>
  %u = nn.matmul %r, %wu : tensor<16x64xf32>, tensor<64x32xf32> -> tensor<16x32xf32>
  %s = nn.swiglu %g, %u : tensor<16x32xf32>
  %wo = zero.get_param @head.weight : tensor<32x8xf32>
  %logits = nn.matmul %s, %wo : tensor<16x32xf32>, tensor<32x8xf32> -> tensor<16x8xf32>
  %loss = nn.softmax_cross_entropy %logits, %y : tensor<16x8xf32>, tensor<16xi64> -> tensor<f32>
  zero.return %loss : tensor<f32>
}
