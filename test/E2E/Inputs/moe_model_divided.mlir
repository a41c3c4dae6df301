// The model of moe-divided.test: moe_model.mlir without the load-balancing
// loss (Mixtral's default, output_router_logits false), whose batch may be
// divided over ranks and micro steps. An input layer, then a Mixtral sparse
// MoE block (transformers' MixtralSparseMoeBlock, grouped experts) on its 16
// tokens of hidden size 8: 4 experts of intermediate size 6, top 2,
// renormalized; an output layer and the cross-entropy. The router starts
// random: without the load-balancing loss, a renormalized top 2 gives an
// expert's router row a gradient only from the tokens that select it, and
// at zeros every token would select the same two (the others' rows would
// train on rounding noise, which Adam turns into steps of lr).
zero.param @in.weight : tensor<8x8xf32> init normal std 0.3
zero.param @gate.weight : tensor<4x8xf32> init normal std 0.3
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
  %w, %idx = nn.moe_router %logits top_k 2 normalize : tensor<16x4xf32> -> tensor<16x2xf32>, tensor<16x2xi32>
  %rows, %pos, %offs = nn.moe_dispatch %hs[%idx] experts 4 : tensor<16x8xf32>, tensor<16x2xi32> -> tensor<32x8xf32>, tensor<4xi32>
  %wgu = zero.get_param @experts.gate_up_proj : tensor<4x12x8xf32>
  %gu = nn.grouped_matmul %rows, %wgu, %offs transpose_rhs : tensor<32x8xf32>, tensor<4x12x8xf32>, tensor<4xi32> -> tensor<32x12xf32>
  %g, %u = nn.split %gu axis 1 : tensor<32x12xf32> -> tensor<32x6xf32>, tensor<32x6xf32>
  %a = nn.swiglu %g, %u : tensor<32x6xf32>
  %wd = zero.get_param @experts.down_proj : tensor<4x8x6xf32>
  %h = nn.grouped_matmul %a, %wd, %offs transpose_rhs : tensor<32x6xf32>, tensor<4x8x6xf32>, tensor<4xi32> -> tensor<32x8xf32>
  %moe = nn.moe_combine %h[%pos], %w : tensor<32x8xf32>, tensor<16x2xi32>, tensor<16x2xf32> -> tensor<16x8xf32>
  %wo = zero.get_param @out.weight : tensor<5x8xf32>
  %z = nn.matmul %moe, %wo transpose_rhs : tensor<16x8xf32>, tensor<5x8xf32> -> tensor<16x5xf32>
  %loss = nn.softmax_cross_entropy %z, %y : tensor<16x5xf32>, tensor<16xi32> -> tensor<f32>
  zero.return %loss : tensor<f32>
}
