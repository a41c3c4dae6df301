// RUN: zero-opt %s -split-input-file --zero-fuse-bias-activation -verify-diagnostics

// A scheduled step is refused: its memory plan counts the sums.
zero.param @b : tensor<8xf32> init zeros
zero.partition @flat stage 0 world_size 1 alignment 2 numel 8 padded 8 params [@b] offsets [0]
// expected-error @+1 {{'zero.train_step' op is already scheduled: zero-fuse-bias-activation runs before zero-partition}}
zero.train_step @train(%x: tensor<2x8xf32>, %l: tensor<2xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 2> {
  %b = zero.get_param @b : tensor<8xf32>
  %s = nn.add %x, %b : tensor<2x8xf32>, tensor<8xf32>
  %y = nn.gelu %s : tensor<2x8xf32>
  %loss = nn.softmax_cross_entropy %y, %l : tensor<2x8xf32>, tensor<2xi32> -> tensor<f32>
  zero.return %loss : tensor<f32>
}
