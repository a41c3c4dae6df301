// A training step whose attention has a sliding window, soft-capping and
// ALiBi.
zero.param @qkv : tensor<2x2x8x4xf32> init normal std 0.1
zero.train_step @train(%y: tensor<2x2x8xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %q = zero.get_param @qkv : tensor<2x2x8x4xf32>
  %o = nn.attention %q, %q, %q causal window 3 softcap 5.0 alibi [0.5, 0.25] : tensor<2x2x8x4xf32>
  %loss = nn.softmax_cross_entropy %o, %y : tensor<2x2x8x4xf32>, tensor<2x2x8xi32> -> tensor<f32>
  zero.return %loss : tensor<f32>
}
