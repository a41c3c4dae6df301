// A causal LM with one attention block and one Mixtral MoE block (4
// experts, top 2) on [2, 8] tokens, as the Hugging Face import writes them:
// the MoE block routes the flattened [16, 8] tokens (hostile-moe.test).
zero.param @embed : tensor<10x8xf32> init normal std 0.02
zero.param @q : tensor<16x8xf32> init normal std 0.02
zero.param @k : tensor<8x8xf32> init normal std 0.02
zero.param @v : tensor<8x8xf32> init normal std 0.02
zero.param @o : tensor<8x16xf32> init normal std 0.02
zero.param @gate : tensor<4x8xf32> init normal std 0.02
zero.param @experts.gate_up_proj : tensor<4x12x8xf32> init normal std 0.02
zero.param @experts.down_proj : tensor<4x8x6xf32> init normal std 0.02
zero.param @head : tensor<10x8xf32> init normal std 0.02
zero.train_step @train(%ids: tensor<2x8xi64>, %labels: tensor<2x8xi64>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> labels same_tokens {
  %e = zero.get_param @embed : tensor<10x8xf32>
  %h = nn.embedding %e[%ids] : tensor<10x8xf32>, tensor<2x8xi64> -> tensor<2x8x8xf32>
  %wq = zero.get_param @q : tensor<16x8xf32>
  %q0 = nn.matmul %h, %wq transpose_rhs : tensor<2x8x8xf32>, tensor<16x8xf32> -> tensor<2x8x16xf32>
  %q1 = nn.reshape %q0 : tensor<2x8x16xf32> -> tensor<2x8x4x4xf32>
  %q2 = nn.transpose %q1 [0, 2, 1, 3] : tensor<2x8x4x4xf32> -> tensor<2x4x8x4xf32>
  %wk = zero.get_param @k : tensor<8x8xf32>
  %k0 = nn.matmul %h, %wk transpose_rhs : tensor<2x8x8xf32>, tensor<8x8xf32> -> tensor<2x8x8xf32>
  %k1 = nn.reshape %k0 : tensor<2x8x8xf32> -> tensor<2x8x2x4xf32>
  %k2 = nn.transpose %k1 [0, 2, 1, 3] : tensor<2x8x2x4xf32> -> tensor<2x2x8x4xf32>
  %wv = zero.get_param @v : tensor<8x8xf32>
  %v0 = nn.matmul %h, %wv transpose_rhs : tensor<2x8x8xf32>, tensor<8x8xf32> -> tensor<2x8x8xf32>
  %v1 = nn.reshape %v0 : tensor<2x8x8xf32> -> tensor<2x8x2x4xf32>
  %v2 = nn.transpose %v1 [0, 2, 1, 3] : tensor<2x8x2x4xf32> -> tensor<2x2x8x4xf32>
  %a = nn.attention %q2, %k2, %v2 causal : tensor<2x4x8x4xf32>, tensor<2x2x8x4xf32>
  %a1 = nn.transpose %a [0, 2, 1, 3] : tensor<2x4x8x4xf32> -> tensor<2x8x4x4xf32>
  %a2 = nn.reshape %a1 : tensor<2x8x4x4xf32> -> tensor<2x8x16xf32>
  %wo = zero.get_param @o : tensor<8x16xf32>
  %y = nn.matmul %a2, %wo transpose_rhs : tensor<2x8x16xf32>, tensor<8x16xf32> -> tensor<2x8x8xf32>
  %r = nn.add %h, %y : tensor<2x8x8xf32>, tensor<2x8x8xf32>
  %t = nn.reshape %r : tensor<2x8x8xf32> -> tensor<16x8xf32>
  %wr = zero.get_param @gate : tensor<4x8xf32>
  %logits = nn.matmul %t, %wr transpose_rhs : tensor<16x8xf32>, tensor<4x8xf32> -> tensor<16x4xf32>
  %w, %idx = nn.moe_router %logits top_k 2 normalize : tensor<16x4xf32> -> tensor<16x2xf32>, tensor<16x2xi32>
  %rows, %pos, %offs = nn.moe_dispatch %t[%idx] experts 4 : tensor<16x8xf32>, tensor<16x2xi32> -> tensor<32x8xf32>, tensor<4xi32>
  %wgu = zero.get_param @experts.gate_up_proj : tensor<4x12x8xf32>
  %gu = nn.grouped_matmul %rows, %wgu, %offs transpose_rhs : tensor<32x8xf32>, tensor<4x12x8xf32>, tensor<4xi32> -> tensor<32x12xf32>
  %g, %u = nn.split %gu axis 1 : tensor<32x12xf32> -> tensor<32x6xf32>, tensor<32x6xf32>
  %act = nn.swiglu %g, %u : tensor<32x6xf32>
  %wd = zero.get_param @experts.down_proj : tensor<4x8x6xf32>
  %eo = nn.grouped_matmul %act, %wd, %offs transpose_rhs : tensor<32x6xf32>, tensor<4x8x6xf32>, tensor<4xi32> -> tensor<32x8xf32>
  %moe = nn.moe_combine %eo[%pos], %w : tensor<32x8xf32>, tensor<16x2xi32>, tensor<16x2xf32> -> tensor<16x8xf32>
  %m = nn.reshape %moe : tensor<16x8xf32> -> tensor<2x8x8xf32>
  %r2 = nn.add %r, %m : tensor<2x8x8xf32>, tensor<2x8x8xf32>
  %wh = zero.get_param @head : tensor<10x8xf32>
  %z = nn.matmul %r2, %wh transpose_rhs : tensor<2x8x8xf32>, tensor<10x8xf32> -> tensor<2x8x10xf32>
  %l = nn.shift_labels %labels fill -100 : tensor<2x8xi64>
  %loss = nn.softmax_cross_entropy %z, %l ignore_index -100 : tensor<2x8x10xf32>, tensor<2x8xi64> -> tensor<f32>
  zero.return %loss : tensor<f32>
}
