// The model of moe-torch.test with top 1: the tied first step sends every
// token to one expert. An input layer, then a Mixtral sparse MoE block
// (transformers' MixtralSparseMoeBlock, grouped experts) on its 16 tokens of
// hidden size 8: 4 experts of intermediate size 6, top 1, renormalized; an
// output layer, the cross-entropy and the router's load-balancing loss times
// 0.02 (router_aux_loss_coef). The router starts at zeros: every logit of
// the first step ties.
zero.param @in.weight : tensor<8x8xf32> init normal std 0.3
zero.param @gate.weight : tensor<4x8xf32> init zeros
zero.param @experts.gate_up_proj : tensor<4x12x8xf32> init normal std 0.3
zero.param @experts.down_proj : tensor<4x8x6xf32> init normal std 0.3
zero.param @out.weight : tensor<5x8xf32> init normal std 0.3
zero.train_step @train(%x: tensor<16x8xf32>, %y: tensor<16xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.000000e-02>
    precision #zero.precision<kind = fp32> {
  %wi = zero.get_param @in.weight : tensor<8x8xf32>
  %hs = nn.matmul %x, %wi transpose_rhs : tensor<16x8xf32>, tensor<8x8xf32> -> tensor<16x8xf32>
  %wr = zero.get_param @gate.weight : tensor<4x8xf32>
  %logits = nn.matmul %hs, %wr transpose_rhs : tensor<16x8xf32>, tensor<4x8xf32> -> tensor<16x4xf32>
  %w, %idx = nn.moe_router %logits top_k 1 normalize : tensor<16x4xf32> -> tensor<16x1xf32>, tensor<16x1xi32>
  %rows, %pos, %offs = nn.moe_dispatch %hs[%idx] experts 4 : tensor<16x8xf32>, tensor<16x1xi32> -> tensor<16x8xf32>, tensor<4xi32>
  %wgu = zero.get_param @experts.gate_up_proj : tensor<4x12x8xf32>
  %gu = nn.grouped_matmul %rows, %wgu, %offs transpose_rhs : tensor<16x8xf32>, tensor<4x12x8xf32>, tensor<4xi32> -> tensor<16x12xf32>
  %g, %u = nn.split %gu axis 1 : tensor<16x12xf32> -> tensor<16x6xf32>, tensor<16x6xf32>
  %a = nn.swiglu %g, %u : tensor<16x6xf32>
  %wd = zero.get_param @experts.down_proj : tensor<4x8x6xf32>
  %h = nn.grouped_matmul %a, %wd, %offs transpose_rhs : tensor<16x6xf32>, tensor<4x8x6xf32>, tensor<4xi32> -> tensor<16x8xf32>
  %moe = nn.moe_combine %h[%pos], %w : tensor<16x8xf32>, tensor<16x1xi32>, tensor<16x1xf32> -> tensor<16x8xf32>
  %wo = zero.get_param @out.weight : tensor<5x8xf32>
  %z = nn.matmul %moe, %wo transpose_rhs : tensor<16x8xf32>, tensor<5x8xf32> -> tensor<16x5xf32>
  %ce = nn.softmax_cross_entropy %z, %y : tensor<16x5xf32>, tensor<16xi32> -> tensor<f32>
  %aux = nn.moe_aux_loss %logits top_k 1 : tensor<16x4xf32> -> tensor<f32>
  %auxs = nn.scale %aux by 2.000000e-02 : tensor<f32>
  %loss = nn.add %ce, %auxs : tensor<f32>, tensor<f32>
  zero.return %loss : tensor<f32>
}
