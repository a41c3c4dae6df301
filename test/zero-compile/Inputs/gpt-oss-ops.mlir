// A training step with gpt-oss's ops: attention with learned sinks over a
// sliding window, and the clamped SwiGLU.
zero.param @qkv : tensor<2x2x8x4xf32> init normal std 0.1
zero.param @sinks : tensor<2xf32> init normal std 0.1
zero.param @up : tensor<2x2x8x4xf32> init normal std 0.1
zero.train_step @train(%y: tensor<2x2x8xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %q = zero.get_param @qkv : tensor<2x2x8x4xf32>
  %s = zero.get_param @sinks : tensor<2xf32>
  %u = zero.get_param @up : tensor<2x2x8x4xf32>
  %o = nn.attention %q, %q, %q sinks(%s : tensor<2xf32>) causal window 3 : tensor<2x2x8x4xf32>
  %a = nn.clamped_swiglu %o, %u alpha 1.702 limit 7.0 : tensor<2x2x8x4xf32>
  %loss = nn.softmax_cross_entropy %a, %y : tensor<2x2x8x4xf32>, tensor<2x2x8xi32> -> tensor<f32>
  zero.return %loss : tensor<f32>
}
