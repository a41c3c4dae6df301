// The model of hostile-moe-capacity.test: moe_model_divided.mlir's MoE
// block (4 experts of intermediate size 6, top 2, renormalized, no
// load-balancing loss) on 8 tokens of hidden size 8, 16 dispatch rows. On 2
// ranks with expert parallelism 2 a rank sends 8 rows, whose capacity at
// 1.3 is ceil(10.4) = 11 rows, while the global batch's ceil(20.8) = 21 does
// not divide over the ranks.
zero.param @in.weight : tensor<8x8xf32> init normal std 0.3
zero.param @gate.weight : tensor<4x8xf32> init normal std 0.3
zero.param @experts.gate_up_proj : tensor<4x12x8xf32> init normal std 0.3
zero.param @experts.down_proj : tensor<4x8x6xf32> init normal std 0.3
zero.param @out.weight : tensor<5x8xf32> init normal std 0.3
zero.train_step @train(%x: tensor<8x8xf32>, %y: tensor<8xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.000000e-02>
    precision #zero.precision<kind = fp32> {
  %wi = zero.get_param @in.weight : tensor<8x8xf32>
  %hs = nn.matmul %x, %wi transpose_rhs : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
  %wr = zero.get_param @gate.weight : tensor<4x8xf32>
  %logits = nn.matmul %hs, %wr transpose_rhs : tensor<8x8xf32>, tensor<4x8xf32> -> tensor<8x4xf32>
  %w, %idx = nn.moe_router %logits top_k 2 normalize : tensor<8x4xf32> -> tensor<8x2xf32>, tensor<8x2xi32>
  %rows, %pos, %offs = nn.moe_dispatch %hs[%idx] experts 4 : tensor<8x8xf32>, tensor<8x2xi32> -> tensor<16x8xf32>, tensor<4xi32>
  %wgu = zero.get_param @experts.gate_up_proj : tensor<4x12x8xf32>
  %gu = nn.grouped_matmul %rows, %wgu, %offs transpose_rhs : tensor<16x8xf32>, tensor<4x12x8xf32>, tensor<4xi32> -> tensor<16x12xf32>
  %g, %u = nn.split %gu axis 1 : tensor<16x12xf32> -> tensor<16x6xf32>, tensor<16x6xf32>
  %a = nn.swiglu %g, %u : tensor<16x6xf32>
  %wd = zero.get_param @experts.down_proj : tensor<4x8x6xf32>
  %h = nn.grouped_matmul %a, %wd, %offs transpose_rhs : tensor<16x6xf32>, tensor<4x8x6xf32>, tensor<4xi32> -> tensor<16x8xf32>
  %moe = nn.moe_combine %h[%pos], %w : tensor<16x8xf32>, tensor<8x2xi32>, tensor<8x2xf32> -> tensor<8x8xf32>
  %wo = zero.get_param @out.weight : tensor<5x8xf32>
  %z = nn.matmul %moe, %wo transpose_rhs : tensor<8x8xf32>, tensor<5x8xf32> -> tensor<8x5xf32>
  %loss = nn.softmax_cross_entropy %z, %y : tensor<8x5xf32>, tensor<8xi32> -> tensor<f32>
  zero.return %loss : tensor<f32>
}
