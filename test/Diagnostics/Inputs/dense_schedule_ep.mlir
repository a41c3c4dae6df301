// A dense step (no MoE layer) whose hand-written schedule splits experts
// over 2 ranks (hostile-moe.test).
zero.param @w : tensor<5x8xf32> init normal std 0.3
zero.train_step @train(%x: tensor<4x8xf32>, %y: tensor<4xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 2, global_batch = 8, mesh = #zero.mesh<[data = 1, expert = 2]>> {
  %w = zero.get_param @w : tensor<5x8xf32>
  %z = nn.matmul %x, %w transpose_rhs : tensor<4x8xf32>, tensor<5x8xf32> -> tensor<4x5xf32>
  %l = nn.softmax_cross_entropy %z, %y : tensor<4x5xf32>, tensor<4xi32> -> tensor<f32>
  zero.return %l : tensor<f32>
}
