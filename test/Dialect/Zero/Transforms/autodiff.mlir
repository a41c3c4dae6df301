// RUN: zero-opt %s -split-input-file --zero-autodiff | FileCheck %s

// Backward structure of each compute op in isolation: the derivative ops,
// their order (reverse of the forward) and one zero.grad per parameter.

// Matmul with a weight shared over the batch; bias add reduces the gradient
// over the broadcast dimension. The input's own gradient is not computed.
zero.param @w : tensor<4x3xf32> init normal std 0.1
zero.param @b : tensor<3xf32> init zeros
// CHECK-LABEL: zero.train_step @linear
zero.train_step @linear(%x: tensor<8x4xf32>, %y: tensor<8xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %w = zero.get_param @w : tensor<4x3xf32>
  %h = nn.matmul %x, %w : tensor<8x4xf32>, tensor<4x3xf32> -> tensor<8x3xf32>
  %b = zero.get_param @b : tensor<3xf32>
  %z = nn.add %h, %b : tensor<8x3xf32>, tensor<3xf32>
  %loss = nn.softmax_cross_entropy %z, %y : tensor<8x3xf32>, tensor<8xi64> -> tensor<f32>
  // CHECK: %[[LOSS:.*]] = nn.softmax_cross_entropy
  // CHECK-NEXT: %[[SEED:.*]] = nn.fill 1.000000e+00 {zero.loss_seed} : tensor<f32>
  // CHECK-NEXT: %[[DZ:.*]] = nn.softmax_cross_entropy_grad %{{.*}}, %{{.*}}, %[[SEED]]
  // CHECK-NEXT: %[[DB:.*]] = nn.reduce_sum %[[DZ]] : tensor<8x3xf32> -> tensor<3xf32>
  // CHECK-NEXT: zero.grad @b, %[[DB]] : tensor<3xf32>
  // CHECK-NEXT: %[[DW:.*]] = nn.matmul %{{.*}}, %[[DZ]] transpose_lhs : tensor<8x4xf32>, tensor<8x3xf32> -> tensor<4x3xf32>
  // CHECK-NEXT: zero.grad @w, %[[DW]] : tensor<4x3xf32>
  // CHECK-NEXT: zero.return %[[LOSS]]
  zero.return %loss : tensor<f32>
}

// -----

// Labels shifted inside the loss: the shift computes no value of a
// parameter, so it needs no derivative; the gradient reads the shifted
// labels.
zero.param @w : tensor<4x3xf32> init normal std 0.1
// CHECK-LABEL: zero.train_step @shifted_labels
zero.train_step @shifted_labels(%x: tensor<8x4xf32>, %y: tensor<8xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %w = zero.get_param @w : tensor<4x3xf32>
  %z = nn.matmul %x, %w : tensor<8x4xf32>, tensor<4x3xf32> -> tensor<8x3xf32>
  // CHECK: %[[S:.*]] = nn.shift_labels %{{.*}} fill -100 : tensor<8xi64>
  %s = nn.shift_labels %y fill -100 : tensor<8xi64>
  %loss = nn.softmax_cross_entropy %z, %s ignore_index -100 : tensor<8x3xf32>, tensor<8xi64> -> tensor<f32>
  // CHECK: nn.softmax_cross_entropy_grad %{{.*}}, %[[S]], %{{.*}} ignore_index -100
  // CHECK-NEXT: nn.matmul
  // CHECK-NEXT: zero.grad @w
  zero.return %loss : tensor<f32>
}

// -----

// Matmul with transpose flags and a batched (rank-3) operand: the weight
// gradient contracts over every leading dimension.
zero.param @w : tensor<3x4xf32> init normal std 0.1
// CHECK-LABEL: zero.train_step @transposed
zero.train_step @transposed(%x: tensor<2x5x4xf32>, %y: tensor<2x5xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %w = zero.get_param @w : tensor<3x4xf32>
  %h = nn.matmul %x, %w transpose_rhs : tensor<2x5x4xf32>, tensor<3x4xf32> -> tensor<2x5x3xf32>
  %r = nn.relu %h : tensor<2x5x3xf32>
  %loss = nn.softmax_cross_entropy %r, %y : tensor<2x5x3xf32>, tensor<2x5xi32> -> tensor<f32>
  // CHECK: %[[R:.*]] = nn.relu
  // CHECK: %[[DR:.*]] = nn.softmax_cross_entropy_grad
  // CHECK-NEXT: %[[DH:.*]] = nn.relu_grad %[[R]], %[[DR]] : tensor<2x5x3xf32>
  // CHECK-NEXT: %[[X2:.*]] = nn.reshape %{{.*}} : tensor<2x5x4xf32> -> tensor<10x4xf32>
  // CHECK-NEXT: %[[DH2:.*]] = nn.reshape %[[DH]] : tensor<2x5x3xf32> -> tensor<10x3xf32>
  // CHECK-NEXT: %[[DW:.*]] = nn.matmul %[[DH2]], %[[X2]] transpose_lhs : tensor<10x3xf32>, tensor<10x4xf32> -> tensor<3x4xf32>
  // CHECK-NEXT: zero.grad @w, %[[DW]] : tensor<3x4xf32>
  zero.return %loss : tensor<f32>
}

// -----

// Elementwise ops: mul (both operands), scale, gelu, gelu_erf, silu, tanh,
// softmax, cast.
zero.param @a : tensor<4x6xf32> init normal std 0.1
zero.param @g : tensor<6xf32> init ones
// CHECK-LABEL: zero.train_step @pointwise
zero.train_step @pointwise(%y: tensor<4xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %a = zero.get_param @a : tensor<4x6xf32>
  %g = zero.get_param @g : tensor<6xf32>
  %m = nn.mul %a, %g : tensor<4x6xf32>, tensor<6xf32>
  %s = nn.scale %m by 0.5 : tensor<4x6xf32>
  %e0 = nn.gelu %s : tensor<4x6xf32>
  %e = nn.gelu_erf %e0 : tensor<4x6xf32>
  %w = nn.silu %e : tensor<4x6xf32>
  %t = nn.tanh %w : tensor<4x6xf32>
  %p = nn.softmax %t : tensor<4x6xf32>
  %c = nn.cast %p : tensor<4x6xf32> to tensor<4x6xbf16>
  %c2 = nn.cast %c : tensor<4x6xbf16> to tensor<4x6xf32>
  %loss = nn.softmax_cross_entropy %c2, %y : tensor<4x6xf32>, tensor<4xi64> -> tensor<f32>
  // CHECK: %[[E0:.*]] = nn.gelu %
  // CHECK: %[[E:.*]] = nn.gelu_erf %[[E0]]
  // CHECK: %[[T:.*]] = nn.tanh %
  // CHECK: %[[D0:.*]] = nn.softmax_cross_entropy_grad
  // CHECK-NEXT: %[[D1:.*]] = nn.cast %[[D0]] : tensor<4x6xf32> to tensor<4x6xbf16>
  // CHECK-NEXT: %[[D2:.*]] = nn.cast %[[D1]] : tensor<4x6xbf16> to tensor<4x6xf32>
  // CHECK-NEXT: %[[D3S:.*]] = nn.softmax_grad %{{.*}}, %[[D2]] : tensor<4x6xf32>
  // The tanh derivative reads the forward result.
  // CHECK-NEXT: %[[D3T:.*]] = nn.tanh_grad %[[T]], %[[D3S]] : tensor<4x6xf32>
  // The SiLU derivative reads the forward input (the GELU result).
  // CHECK-NEXT: %[[D3:.*]] = nn.silu_grad %[[E]], %[[D3T]] : tensor<4x6xf32>
  // The erf GELU's derivative reads its input, the tanh GELU's result.
  // CHECK-NEXT: %[[D3E:.*]] = nn.gelu_erf_grad %[[E0]], %[[D3]] : tensor<4x6xf32>
  // CHECK-NEXT: %[[D4:.*]] = nn.gelu_grad %{{.*}}, %[[D3E]] : tensor<4x6xf32>
  // CHECK-NEXT: %[[D5:.*]] = nn.scale %[[D4]] by 5.000000e-01 : tensor<4x6xf32>
  // CHECK-NEXT: %[[DA:.*]] = nn.mul %[[D5]], %{{.*}} : tensor<4x6xf32>, tensor<6xf32>
  // CHECK-NEXT: %[[P:.*]] = nn.mul %[[D5]], %{{.*}} : tensor<4x6xf32>, tensor<4x6xf32>
  // CHECK-NEXT: %[[DG:.*]] = nn.reduce_sum %[[P]] : tensor<4x6xf32> -> tensor<6xf32>
  // CHECK-NEXT: zero.grad @a, %[[DA]] : tensor<4x6xf32>
  // CHECK-NEXT: zero.grad @g, %[[DG]] : tensor<6xf32>
  zero.return %loss : tensor<f32>
}

// -----

// exp, log, softplus and the reductions over the last dimension: exp's
// derivative reads its result, log's and softplus's their input, and
// logsumexp's and reduce_max's both their input and their result.
zero.param @a : tensor<4x6x8xf32> init normal std 0.1
// CHECK-LABEL: zero.train_step @exp_log_reductions
zero.train_step @exp_log_reductions(%y: tensor<4xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %a = zero.get_param @a : tensor<4x6x8xf32>
  %e = nn.exp %a : tensor<4x6x8xf32>
  %l = nn.log %e : tensor<4x6x8xf32>
  %s = nn.softplus %l beta 2.0 threshold 15.0 : tensor<4x6x8xf32>
  %m = nn.logsumexp %s : tensor<4x6x8xf32> -> tensor<4x6xf32>
  %r = nn.reduce_max %s : tensor<4x6x8xf32> -> tensor<4x6xf32>
  %sum = nn.add %m, %r : tensor<4x6xf32>, tensor<4x6xf32>
  %loss = nn.softmax_cross_entropy %sum, %y : tensor<4x6xf32>, tensor<4xi64> -> tensor<f32>
  // CHECK: %[[E:.*]] = nn.exp %{{.*}} : tensor<4x6x8xf32>
  // CHECK-NEXT: %[[L:.*]] = nn.log %[[E]] : tensor<4x6x8xf32>
  // CHECK-NEXT: %[[S:.*]] = nn.softplus %[[L]] beta 2.000000e+00 threshold 1.500000e+01 : tensor<4x6x8xf32>
  // CHECK-NEXT: %[[M:.*]] = nn.logsumexp %[[S]] : tensor<4x6x8xf32> -> tensor<4x6xf32>
  // CHECK-NEXT: %[[R:.*]] = nn.reduce_max %[[S]] : tensor<4x6x8xf32> -> tensor<4x6xf32>
  // CHECK: %[[D0:.*]] = nn.softmax_cross_entropy_grad
  // CHECK-NEXT: %[[DR:.*]] = nn.reduce_max_grad %[[S]], %[[R]], %[[D0]] : tensor<4x6x8xf32> -> tensor<4x6xf32>
  // CHECK-NEXT: %[[DM:.*]] = nn.logsumexp_grad %[[S]], %[[M]], %[[D0]] : tensor<4x6x8xf32> -> tensor<4x6xf32>
  // CHECK-NEXT: %[[DS:.*]] = nn.add %[[DR]], %[[DM]] : tensor<4x6x8xf32>, tensor<4x6x8xf32>
  // The softplus gradient keeps the forward's beta and threshold.
  // CHECK-NEXT: %[[DL:.*]] = nn.softplus_grad %[[L]], %[[DS]] beta 2.000000e+00 threshold 1.500000e+01 : tensor<4x6x8xf32>
  // CHECK-NEXT: %[[DE:.*]] = nn.log_grad %[[E]], %[[DL]] : tensor<4x6x8xf32>
  // CHECK-NEXT: %[[DA:.*]] = nn.exp_grad %[[E]], %[[DE]] : tensor<4x6x8xf32>
  // CHECK-NEXT: zero.grad @a, %[[DA]] : tensor<4x6x8xf32>
  zero.return %loss : tensor<f32>
}

// -----

// The bias-fused GELU: its gradient from the unbiased input and the bias,
// and the bias's gradient summed over the leading dimensions as nn.add's.
zero.param @a : tensor<4x6xf32> init normal std 0.1
zero.param @b : tensor<6xf32> init zeros
// CHECK-LABEL: zero.train_step @bias_gelu
zero.train_step @bias_gelu(%y: tensor<4xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  // CHECK: %[[A:.*]] = zero.get_param @a
  // CHECK: %[[B:.*]] = zero.get_param @b
  %a = zero.get_param @a : tensor<4x6xf32>
  %b = zero.get_param @b : tensor<6xf32>
  %g = nn.bias_gelu %a, %b : tensor<4x6xf32>, tensor<6xf32>
  %loss = nn.softmax_cross_entropy %g, %y : tensor<4x6xf32>, tensor<4xi64> -> tensor<f32>
  // CHECK: %[[D0:.*]] = nn.softmax_cross_entropy_grad
  // CHECK-NEXT: %[[DA:.*]] = nn.bias_gelu_grad %[[A]], %[[B]], %[[D0]] : tensor<4x6xf32>, tensor<6xf32>
  // CHECK-NEXT: %[[DB:.*]] = nn.reduce_sum %[[DA]] : tensor<4x6xf32> -> tensor<6xf32>
  // CHECK-NEXT: zero.grad @a, %[[DA]] : tensor<4x6xf32>
  // CHECK-NEXT: zero.grad @b, %[[DB]] : tensor<6xf32>
  zero.return %loss : tensor<f32>
}

// -----

// Llama's SwiGLU and rotary embedding. swiglu_grad yields both operands'
// gradients from the forward operands; the derivative of a rope is the
// inverse rope of the gradient and that of an inverse rope the rope, so
// neither keeps its input alive.
zero.param @q : tensor<1x2x4x8xf32> init normal std 0.1
zero.param @u : tensor<1x2x4x8xf32> init normal std 0.1
// CHECK-LABEL: zero.train_step @llama
zero.train_step @llama(%y: tensor<1x2x4xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %q = zero.get_param @q : tensor<1x2x4x8xf32>
  %u = zero.get_param @u : tensor<1x2x4x8xf32>
  %r = nn.rope %q theta 1.000000e+04 : tensor<1x2x4x8xf32>
  %i = nn.rope %r theta 5.000000e+05 inverse : tensor<1x2x4x8xf32>
  %s = nn.swiglu %i, %u : tensor<1x2x4x8xf32>
  %loss = nn.softmax_cross_entropy %s, %y : tensor<1x2x4x8xf32>, tensor<1x2x4xi64> -> tensor<f32>
  // CHECK: %[[U:.*]] = zero.get_param @u
  // CHECK: %[[I:.*]] = nn.rope %{{.*}} theta 5.000000e+05 inverse : tensor<1x2x4x8xf32>
  // CHECK: %[[DS:.*]] = nn.softmax_cross_entropy_grad
  // CHECK-NEXT: %[[DG:.*]], %[[DU:.*]] = nn.swiglu_grad %[[I]], %[[U]], %[[DS]] : tensor<1x2x4x8xf32>
  // CHECK-NEXT: zero.grad @u, %[[DU]] : tensor<1x2x4x8xf32>
  // CHECK-NEXT: %[[DR:.*]] = nn.rope %[[DG]] theta 5.000000e+05 : tensor<1x2x4x8xf32>
  // CHECK-NEXT: %[[DQ:.*]] = nn.rope %[[DR]] theta 1.000000e+04 inverse : tensor<1x2x4x8xf32>
  // CHECK-NEXT: zero.grad @q, %[[DQ]] : tensor<1x2x4x8xf32>
  zero.return %loss : tensor<f32>
}

// -----

// GPT-J's interleaved rotary embedding: the derivative keeps the pairing
// and inverts the rotation.
zero.param @q : tensor<1x2x4x8xf32> init normal std 0.1
// CHECK-LABEL: zero.train_step @gptj
zero.train_step @gptj(%y: tensor<1x2x4xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %q = zero.get_param @q : tensor<1x2x4x8xf32>
  %r = nn.rope %q theta 1.000000e+04 interleaved : tensor<1x2x4x8xf32>
  %i = nn.rope %r theta 5.000000e+05 inverse interleaved : tensor<1x2x4x8xf32>
  %loss = nn.softmax_cross_entropy %i, %y : tensor<1x2x4x8xf32>, tensor<1x2x4xi64> -> tensor<f32>
  // CHECK: %[[DS:.*]] = nn.softmax_cross_entropy_grad
  // CHECK-NEXT: %[[DR:.*]] = nn.rope %[[DS]] theta 5.000000e+05 interleaved : tensor<1x2x4x8xf32>
  // CHECK-NEXT: %[[DQ:.*]] = nn.rope %[[DR]] theta 1.000000e+04 inverse interleaved : tensor<1x2x4x8xf32>
  // CHECK-NEXT: zero.grad @q, %[[DQ]] : tensor<1x2x4x8xf32>
  zero.return %loss : tensor<f32>
}

// -----

// A rotary embedding with transformers' own table and a scale of cos and
// sin (YaRN's): the derivative keeps both and inverts the rotation.
zero.param @q : tensor<1x2x4x8xf32> init normal std 0.1
// CHECK-LABEL: zero.train_step @yarn
zero.train_step @yarn(%y: tensor<1x2x4xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %q = zero.get_param @q : tensor<1x2x4x8xf32>
  %r = nn.rope %q inv_freq [1.0 : f32, 0.25 : f32, 0.0125 : f32, 0.0 : f32] scale 1.25 : tensor<1x2x4x8xf32>
  %loss = nn.softmax_cross_entropy %r, %y : tensor<1x2x4x8xf32>, tensor<1x2x4xi64> -> tensor<f32>
  // CHECK: %[[DS:.*]] = nn.softmax_cross_entropy_grad
  // CHECK-NEXT: %[[DQ:.*]] = nn.rope %[[DS]] inv_freq [1.000000e+00 : f32, 2.500000e-01 : f32, 1.250000e-02 : f32, 0.000000e+00 : f32] scale 1.250000e+00 inverse : tensor<1x2x4x8xf32>
  // CHECK-NEXT: zero.grad @q, %[[DQ]] : tensor<1x2x4x8xf32>
  zero.return %loss : tensor<f32>
}

// -----

// Layer norm: one backward op yields the input, weight and bias gradients.
zero.param @w : tensor<8xf32> init ones
zero.param @b : tensor<8xf32> init zeros
zero.param @emb : tensor<16x8xf32> init normal std 0.02
// CHECK-LABEL: zero.train_step @norm
zero.train_step @norm(%ids: tensor<2x3xi32>, %y: tensor<2x3xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %emb = zero.get_param @emb : tensor<16x8xf32>
  %e = nn.embedding %emb[%ids] : tensor<16x8xf32>, tensor<2x3xi32> -> tensor<2x3x8xf32>
  %w = zero.get_param @w : tensor<8xf32>
  %b = zero.get_param @b : tensor<8xf32>
  %n = nn.layer_norm %e, %w, %b eps 1.0e-5 : tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32>
  %loss = nn.softmax_cross_entropy %n, %y : tensor<2x3x8xf32>, tensor<2x3xi32> -> tensor<f32>
  // CHECK: %[[DN:.*]] = nn.softmax_cross_entropy_grad
  // CHECK-NEXT: %[[DX:.*]], %[[DW:.*]], %[[DB:.*]] = nn.layer_norm_grad %{{.*}}, %{{.*}}, %[[DN]] eps 1.000000e-05 : tensor<2x3x8xf32>, tensor<8xf32>
  // CHECK-NEXT: zero.grad @w, %[[DW]]
  // CHECK-NEXT: zero.grad @b, %[[DB]]
  // CHECK-NEXT: %[[DE:.*]] = nn.embedding_grad %[[DX]][%{{.*}}] : tensor<2x3x8xf32>, tensor<2x3xi32> -> tensor<16x8xf32>
  // CHECK-NEXT: zero.grad @emb, %[[DE]] : tensor<16x8xf32>
  zero.return %loss : tensor<f32>
}

// -----

// RMS norm: one backward op, from the forward input and weight, yields the
// input gradient and the weight gradient already summed over the leading
// dimensions (no nn.reduce_sum follows). The norm's gradient of a bf16
// input stays bf16.
zero.param @w : tensor<8xbf16> init ones
zero.param @emb : tensor<16x8xbf16> init normal std 0.02
// CHECK-LABEL: zero.train_step @rms_norm
zero.train_step @rms_norm(%ids: tensor<2x3xi32>, %y: tensor<2x3xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %emb = zero.get_param @emb : tensor<16x8xbf16>
  %e = nn.embedding %emb[%ids] : tensor<16x8xbf16>, tensor<2x3xi32> -> tensor<2x3x8xbf16>
  %w = zero.get_param @w : tensor<8xbf16>
  %n = nn.rms_norm %e, %w eps 1.0e-5 : tensor<2x3x8xbf16>, tensor<8xbf16>
  %f = nn.cast %n : tensor<2x3x8xbf16> to tensor<2x3x8xf32>
  %loss = nn.softmax_cross_entropy %f, %y : tensor<2x3x8xf32>, tensor<2x3xi32> -> tensor<f32>
  // CHECK: %[[E:.*]] = nn.embedding
  // CHECK-NEXT: %[[W:.*]] = zero.get_param @w
  // CHECK: %[[DF:.*]] = nn.softmax_cross_entropy_grad
  // CHECK-NEXT: %[[DN:.*]] = nn.cast %[[DF]] : tensor<2x3x8xf32> to tensor<2x3x8xbf16>
  // CHECK-NEXT: %[[DX:.*]], %[[DW:.*]] = nn.rms_norm_grad %[[E]], %[[W]], %[[DN]] eps 1.000000e-05 : tensor<2x3x8xbf16>, tensor<8xbf16>
  // CHECK-NEXT: zero.grad @w, %[[DW]] : tensor<8xbf16>
  // CHECK-NEXT: %[[DE:.*]] = nn.embedding_grad %[[DX]][%{{.*}}] : tensor<2x3x8xbf16>, tensor<2x3xi32> -> tensor<16x8xbf16>
  // CHECK-NEXT: zero.grad @emb, %[[DE]] : tensor<16x8xbf16>
  zero.return %loss : tensor<f32>
}

// -----

// Attention through split, reshape and transpose: the adjoints are concat,
// reshape and the inverse permutation.
zero.param @qkv : tensor<2x4x24xf32> init normal std 0.1
// CHECK-LABEL: zero.train_step @attention
zero.train_step @attention(%y: tensor<2x4xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %qkv = zero.get_param @qkv : tensor<2x4x24xf32>
  %q, %k, %v = nn.split %qkv axis 2 : tensor<2x4x24xf32> -> tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>
  %q4 = nn.reshape %q : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %k4 = nn.reshape %k : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %v4 = nn.reshape %v : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %qt = nn.transpose %q4 [0, 2, 1, 3] : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
  %kt = nn.transpose %k4 [0, 2, 1, 3] : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
  %vt = nn.transpose %v4 [0, 2, 1, 3] : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
  %o = nn.attention %qt, %kt, %vt causal : tensor<2x2x4x4xf32>
  %ot = nn.transpose %o [0, 2, 1, 3] : tensor<2x2x4x4xf32> -> tensor<2x4x2x4xf32>
  %m = nn.reshape %ot : tensor<2x4x2x4xf32> -> tensor<2x4x8xf32>
  %loss = nn.softmax_cross_entropy %m, %y : tensor<2x4x8xf32>, tensor<2x4xi32> -> tensor<f32>
  // CHECK: %[[DM:.*]] = nn.softmax_cross_entropy_grad
  // CHECK-NEXT: %[[DOT:.*]] = nn.reshape %[[DM]] : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  // CHECK-NEXT: %[[DO:.*]] = nn.transpose %[[DOT]] [0, 2, 1, 3] : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
  // CHECK-NEXT: %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = nn.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[DO]] causal scale 5.000000e-01 : tensor<2x2x4x4xf32>
  // CHECK: nn.concat %{{.*}}, %{{.*}}, %{{.*}} axis 2 : tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32> -> tensor<2x4x24xf32>
  // CHECK-NEXT: zero.grad @qkv
  zero.return %loss : tensor<f32>
}

// -----

// Grouped-query attention (two query heads, one key/value head): the key
// and value gradients have the key's shape, [2, 1, 4, 4], and flow back
// through its transpose and reshape into the key/value projection.
zero.param @wq : tensor<2x4x8xf32> init normal std 0.1
zero.param @wkv : tensor<2x4x8xf32> init normal std 0.1
// CHECK-LABEL: zero.train_step @grouped_query_attention
zero.train_step @grouped_query_attention(%y: tensor<2x4xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %q = zero.get_param @wq : tensor<2x4x8xf32>
  %kv = zero.get_param @wkv : tensor<2x4x8xf32>
  %k, %v = nn.split %kv axis 2 : tensor<2x4x8xf32> -> tensor<2x4x4xf32>, tensor<2x4x4xf32>
  %q4 = nn.reshape %q : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %k4 = nn.reshape %k : tensor<2x4x4xf32> -> tensor<2x4x1x4xf32>
  %v4 = nn.reshape %v : tensor<2x4x4xf32> -> tensor<2x4x1x4xf32>
  %qt = nn.transpose %q4 [0, 2, 1, 3] : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
  %kt = nn.transpose %k4 [0, 2, 1, 3] : tensor<2x4x1x4xf32> -> tensor<2x1x4x4xf32>
  %vt = nn.transpose %v4 [0, 2, 1, 3] : tensor<2x4x1x4xf32> -> tensor<2x1x4x4xf32>
  %o = nn.attention %qt, %kt, %vt causal : tensor<2x2x4x4xf32>, tensor<2x1x4x4xf32>
  %ot = nn.transpose %o [0, 2, 1, 3] : tensor<2x2x4x4xf32> -> tensor<2x4x2x4xf32>
  %m = nn.reshape %ot : tensor<2x4x2x4xf32> -> tensor<2x4x8xf32>
  %loss = nn.softmax_cross_entropy %m, %y : tensor<2x4x8xf32>, tensor<2x4xi32> -> tensor<f32>
  // CHECK: %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = nn.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} causal scale 5.000000e-01 : tensor<2x2x4x4xf32>, tensor<2x1x4x4xf32>
  // CHECK-DAG: nn.transpose %[[DQ]] [0, 2, 1, 3] : tensor<2x2x4x4xf32> -> tensor<2x4x2x4xf32>
  // CHECK-DAG: %[[DKT:.*]] = nn.transpose %[[DK]] [0, 2, 1, 3] : tensor<2x1x4x4xf32> -> tensor<2x4x1x4xf32>
  // CHECK-DAG: %[[DVT:.*]] = nn.transpose %[[DV]] [0, 2, 1, 3] : tensor<2x1x4x4xf32> -> tensor<2x4x1x4xf32>
  // CHECK-DAG: %[[DKR:.*]] = nn.reshape %[[DKT]] : tensor<2x4x1x4xf32> -> tensor<2x4x4xf32>
  // CHECK-DAG: %[[DVR:.*]] = nn.reshape %[[DVT]] : tensor<2x4x1x4xf32> -> tensor<2x4x4xf32>
  // CHECK-DAG: %[[DKV:.*]] = nn.concat %[[DKR]], %[[DVR]] axis 2 : tensor<2x4x4xf32>, tensor<2x4x4xf32> -> tensor<2x4x8xf32>
  // CHECK-DAG: zero.grad @wkv, %[[DKV]]
  // CHECK-DAG: zero.grad @wq
  zero.return %loss : tensor<f32>
}

// -----

// A sliding window and soft-capping carry over to the derivative.
zero.param @sw : tensor<2x2x4x4xf32> init normal std 0.1
// CHECK-LABEL: zero.train_step @windowed_attention
zero.train_step @windowed_attention(%y: tensor<2x2x4xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %q = zero.get_param @sw : tensor<2x2x4x4xf32>
  %o = nn.attention %q, %q, %q causal window 2 softcap 50.0 : tensor<2x2x4x4xf32>
  %loss = nn.softmax_cross_entropy %o, %y : tensor<2x2x4x4xf32>, tensor<2x2x4xi32> -> tensor<f32>
  // CHECK: nn.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} causal scale 5.000000e-01 window 2 softcap 5.000000e+01 : tensor<2x2x4x4xf32>
  zero.return %loss : tensor<f32>
}

// -----

// ALiBi's slopes carry over to the derivative (constants: no gradient).
zero.param @al : tensor<2x2x4x4xf32> init normal std 0.1
// CHECK-LABEL: zero.train_step @alibi_attention
zero.train_step @alibi_attention(%y: tensor<2x2x4xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %q = zero.get_param @al : tensor<2x2x4x4xf32>
  %o = nn.attention %q, %q, %q causal alibi [0.25, 0.0625] : tensor<2x2x4x4xf32>
  %loss = nn.softmax_cross_entropy %o, %y : tensor<2x2x4x4xf32>, tensor<2x2x4xi32> -> tensor<f32>
  // CHECK: nn.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} causal scale 5.000000e-01 alibi [2.500000e-01, 6.250000e-02] : tensor<2x2x4x4xf32>
  zero.return %loss : tensor<f32>
}

// -----

// Packed documents' segments carry over to the derivative (document ids:
// no gradient), and to the sinks' gradient.
zero.param @pk : tensor<2x2x4x4xf32> init normal std 0.1
zero.param @pks : tensor<2xf32> init normal std 0.1
// CHECK-LABEL: zero.train_step @packed_attention
zero.train_step @packed_attention(%y: tensor<2x2x4xi32>, %ids: tensor<2x4xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %q = zero.get_param @pk : tensor<2x2x4x4xf32>
  %s = zero.get_param @pks : tensor<2xf32>
  %o = nn.attention %q, %q, %q sinks(%s : tensor<2xf32>) segments(%ids : tensor<2x4xi32>) causal : tensor<2x2x4x4xf32>
  %loss = nn.softmax_cross_entropy %o, %y : tensor<2x2x4x4xf32>, tensor<2x2x4xi32> -> tensor<f32>
  // CHECK: nn.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} sinks(%{{.*}} : tensor<2xf32>) segments(%arg1 : tensor<2x4xi32>) causal scale 5.000000e-01 : tensor<2x2x4x4xf32>
  // CHECK-NEXT: nn.attention_sinks_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} segments(%arg1 : tensor<2x4xi32>) causal scale 5.000000e-01 : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2xf32>
  zero.return %loss : tensor<f32>
}

// -----

// A packed row's positions carry over to the rotary embedding's derivative
// (the inverse rotation at the same positions; positions: no gradient).
zero.param @pr : tensor<2x2x4x4xf32> init normal std 0.1
// CHECK-LABEL: zero.train_step @packed_rope
zero.train_step @packed_rope(%y: tensor<2x2x4xi32>, %pos: tensor<2x4xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %q = zero.get_param @pr : tensor<2x2x4x4xf32>
  %r = nn.rope %q positions(%pos : tensor<2x4xi64>) theta 1.000000e+04 : tensor<2x2x4x4xf32>
  %loss = nn.softmax_cross_entropy %r, %y : tensor<2x2x4x4xf32>, tensor<2x2x4xi32> -> tensor<f32>
  // CHECK: nn.rope %{{.*}} positions(%arg1 : tensor<2x4xi64>) theta 1.000000e+04 inverse : tensor<2x2x4x4xf32>
  zero.return %loss : tensor<f32>
}

// -----

// A split part that does not reach the loss contributes a zero gradient to
// the concatenation.
zero.param @p : tensor<4x6xf32> init normal std 0.1
// CHECK-LABEL: zero.train_step @split_unused
zero.train_step @split_unused(%y: tensor<4xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %p = zero.get_param @p : tensor<4x6xf32>
  %a, %b = nn.split %p axis 1 : tensor<4x6xf32> -> tensor<4x3xf32>, tensor<4x3xf32>
  %loss = nn.softmax_cross_entropy %a, %y : tensor<4x3xf32>, tensor<4xi64> -> tensor<f32>
  // CHECK: %[[DA:.*]] = nn.softmax_cross_entropy_grad
  // CHECK-NEXT: %[[Z:.*]] = nn.fill 0.000000e+00 : tensor<4x3xf32>
  // CHECK-NEXT: %[[C:.*]] = nn.concat %[[DA]], %[[Z]] axis 1
  // CHECK-NEXT: zero.grad @p, %[[C]]
  zero.return %loss : tensor<f32>
}

// -----

// Parts of different sizes: the adjoint of a concatenation splits into its
// inputs' sizes, the adjoint of a split concatenates its parts' sizes.
zero.param @table : tensor<6x4xf32> init normal std 0.1
// CHECK-LABEL: zero.train_step @unequal_parts
zero.train_step @unequal_parts(%y: tensor<6xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %t = zero.get_param @table : tensor<6x4xf32>
  %a, %b = nn.split %t axis 0 : tensor<6x4xf32> -> tensor<2x4xf32>, tensor<4x4xf32>
  %c = nn.concat %b, %a axis 0 : tensor<4x4xf32>, tensor<2x4xf32> -> tensor<6x4xf32>
  %loss = nn.softmax_cross_entropy %c, %y : tensor<6x4xf32>, tensor<6xi64> -> tensor<f32>
  // CHECK: %[[DC:.*]] = nn.softmax_cross_entropy_grad
  // CHECK-NEXT: %[[DB:.*]]:2 = nn.split %[[DC]] axis 0 : tensor<6x4xf32> -> tensor<4x4xf32>, tensor<2x4xf32>
  // CHECK-NEXT: %[[DT:.*]] = nn.concat %[[DB]]#1, %[[DB]]#0 axis 0 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<6x4xf32>
  // CHECK-NEXT: zero.grad @table, %[[DT]]
  zero.return %loss : tensor<f32>
}

// -----

// An embedding with a padding row: its gradient keeps the padding_idx (the
// row gets no gradient).
zero.param @pad_emb : tensor<16x8xf32> init normal std 0.02
// CHECK-LABEL: zero.train_step @padding_idx
zero.train_step @padding_idx(%ids: tensor<2x3xi32>, %y: tensor<2x3xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %emb = zero.get_param @pad_emb : tensor<16x8xf32>
  %e = nn.embedding %emb[%ids] padding_idx 5 : tensor<16x8xf32>, tensor<2x3xi32> -> tensor<2x3x8xf32>
  %loss = nn.softmax_cross_entropy %e, %y : tensor<2x3x8xf32>, tensor<2x3xi32> -> tensor<f32>
  // CHECK: %[[DX:.*]] = nn.softmax_cross_entropy_grad
  // CHECK-NEXT: %[[DE:.*]] = nn.embedding_grad %[[DX]][%{{.*}}] padding_idx 5 : tensor<2x3x8xf32>, tensor<2x3xi32> -> tensor<16x8xf32>
  // CHECK-NEXT: zero.grad @pad_emb, %[[DE]] : tensor<16x8xf32>
  zero.return %loss : tensor<f32>
}

// -----

// A parameter used twice (tied embedding): both contributions are summed
// before its single zero.grad, which comes after the earliest use's
// derivative (the embedding), i.e. at the very end of the backward.
zero.param @transformer.wte.weight : tensor<16x8xf32> init normal std 0.02
// CHECK-LABEL: zero.train_step @tied
zero.train_step @tied(%ids: tensor<2x3xi32>, %y: tensor<2x3xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %wte = zero.get_param @transformer.wte.weight : tensor<16x8xf32>
  %e = nn.embedding %wte[%ids] : tensor<16x8xf32>, tensor<2x3xi32> -> tensor<2x3x8xf32>
  %r = nn.relu %e : tensor<2x3x8xf32>
  %wte2 = zero.get_param @transformer.wte.weight : tensor<16x8xf32>
  %logits = nn.matmul %r, %wte2 transpose_rhs : tensor<2x3x8xf32>, tensor<16x8xf32> -> tensor<2x3x16xf32>
  %loss = nn.softmax_cross_entropy %logits, %y : tensor<2x3x16xf32>, tensor<2x3xi32> -> tensor<f32>
  // CHECK-NOT: zero.grad
  // CHECK: %[[HEAD:.*]] = nn.matmul %{{.*}}, %{{.*}} transpose_lhs : tensor<{{.*}}>, tensor<{{.*}}> -> tensor<16x8xf32>
  // CHECK-NOT: zero.grad
  // CHECK: %[[EMB:.*]] = nn.embedding_grad
  // CHECK-NEXT: %[[SUM:.*]] = nn.add %[[HEAD]], %[[EMB]] : tensor<16x8xf32>, tensor<16x8xf32>
  // CHECK-NEXT: zero.grad @transformer.wte.weight, %[[SUM]] : tensor<16x8xf32>
  // CHECK-NEXT: zero.return
  zero.return %loss : tensor<f32>
}

// -----

// A value used twice (residual connection) accumulates both gradients.
zero.param @w : tensor<4x4xf32> init normal std 0.1
// CHECK-LABEL: zero.train_step @residual
zero.train_step @residual(%x: tensor<8x4xf32>, %y: tensor<8xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %w = zero.get_param @w : tensor<4x4xf32>
  %h = nn.matmul %x, %w : tensor<8x4xf32>, tensor<4x4xf32> -> tensor<8x4xf32>
  %g = nn.gelu %h : tensor<8x4xf32>
  %r = nn.add %h, %g : tensor<8x4xf32>, tensor<8x4xf32>
  %loss = nn.softmax_cross_entropy %r, %y : tensor<8x4xf32>, tensor<8xi64> -> tensor<f32>
  // CHECK: %[[DR:.*]] = nn.softmax_cross_entropy_grad
  // CHECK-NEXT: %[[DG:.*]] = nn.gelu_grad %{{.*}}, %[[DR]]
  // CHECK-NEXT: %[[DH:.*]] = nn.add %[[DR]], %[[DG]]
  // CHECK-NEXT: %[[DW:.*]] = nn.matmul %{{.*}}, %[[DH]] transpose_lhs
  // CHECK-NEXT: zero.grad @w, %[[DW]]
  zero.return %loss : tensor<f32>
}

// -----

// Concatenation: the adjoint splits the gradient back into the inputs.
zero.param @a : tensor<4x3xf32> init normal std 0.1
zero.param @b : tensor<4x3xf32> init normal std 0.1
// CHECK-LABEL: zero.train_step @concat
zero.train_step @concat(%y: tensor<4xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %a = zero.get_param @a : tensor<4x3xf32>
  %b = zero.get_param @b : tensor<4x3xf32>
  %c = nn.concat %a, %b axis 1 : tensor<4x3xf32>, tensor<4x3xf32> -> tensor<4x6xf32>
  %loss = nn.softmax_cross_entropy %c, %y : tensor<4x6xf32>, tensor<4xi64> -> tensor<f32>
  // CHECK: %[[DC:.*]] = nn.softmax_cross_entropy_grad
  // CHECK-NEXT: %[[DA:.*]]:2 = nn.split %[[DC]] axis 1 : tensor<4x6xf32> -> tensor<4x3xf32>, tensor<4x3xf32>
  // CHECK-NEXT: zero.grad @a, %[[DA]]#0
  // CHECK-NEXT: zero.grad @b, %[[DA]]#1
  zero.return %loss : tensor<f32>
}

// -----

// A loss with ignore_index (and padded classes): its derivative carries
// both, so that the ignored rows get a zero gradient and the mean's count
// leaves them out.
zero.param @w : tensor<4x16xf32> init normal std 0.1
// CHECK-LABEL: zero.train_step @ignored_labels
zero.train_step @ignored_labels(%x: tensor<2x3x4xf32>, %y: tensor<2x3xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %w = zero.get_param @w : tensor<4x16xf32>
  %z = nn.matmul %x, %w : tensor<2x3x4xf32>, tensor<4x16xf32> -> tensor<2x3x16xf32>
  %loss = nn.softmax_cross_entropy %z, %y classes 10 ignore_index -100 : tensor<2x3x16xf32>, tensor<2x3xi64> -> tensor<f32>
  // CHECK: %[[Z:.*]] = nn.matmul
  // CHECK: %[[LOSS:.*]] = nn.softmax_cross_entropy %[[Z]], %[[Y:.*]] classes 10 ignore_index -100
  // CHECK-NEXT: %[[SEED:.*]] = nn.fill 1.000000e+00 {zero.loss_seed} : tensor<f32>
  // CHECK-NEXT: %[[DZ:.*]] = nn.softmax_cross_entropy_grad %[[Z]], %[[Y]], %[[SEED]] classes 10 ignore_index -100 : tensor<2x3x16xf32>, tensor<2x3xi64>, tensor<f32>
  // CHECK: %[[DZ2:.*]] = nn.reshape %[[DZ]] : tensor<2x3x16xf32> -> tensor<6x16xf32>
  // CHECK-NEXT: %[[DW:.*]] = nn.matmul %{{.*}}, %[[DZ2]] transpose_lhs
  // CHECK-NEXT: zero.grad @w, %[[DW]] : tensor<4x16xf32>
  zero.return %loss : tensor<f32>
}

// -----

// A mixture-of-experts block with its auxiliary loss: the router's logits
// get the auxiliary loss's gradient and the router's, summed; the experts'
// weight gradient contracts the dispatched rows by expert; the routing
// (indices, positions, offsets) carries no gradient, and the tokens' rows
// none either, the input being data.
zero.param @wr : tensor<4x8xf32> init normal std 0.1
zero.param @wgu : tensor<4x12x8xf32> init normal std 0.1
// CHECK-LABEL: zero.train_step @moe
zero.train_step @moe(%x: tensor<6x8xf32>, %y: tensor<6xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %wr = zero.get_param @wr : tensor<4x8xf32>
  // CHECK: %[[LOGITS:.*]] = nn.matmul
  %logits = nn.matmul %x, %wr transpose_rhs : tensor<6x8xf32>, tensor<4x8xf32> -> tensor<6x4xf32>
  // CHECK: %[[W:.*]], %[[IDX:.*]] = nn.moe_router %[[LOGITS]] top_k 2 normalize eps 9.9999999999999995E-21
  %w, %idx = nn.moe_router %logits top_k 2 normalize eps 1.0e-20 : tensor<6x4xf32> -> tensor<6x2xf32>, tensor<6x2xi32>
  // CHECK: %[[ROWS:.*]], %[[POS:.*]], %[[OFFS:.*]] = nn.moe_dispatch %{{.*}}[%[[IDX]]]
  %rows, %pos, %offs = nn.moe_dispatch %x[%idx] experts 4 : tensor<6x8xf32>, tensor<6x2xi32> -> tensor<12x8xf32>, tensor<4xi32>
  %wgu = zero.get_param @wgu : tensor<4x12x8xf32>
  // CHECK: %[[H:.*]] = nn.grouped_matmul %[[ROWS]], %{{.*}}, %[[OFFS]] transpose_rhs
  %h = nn.grouped_matmul %rows, %wgu, %offs transpose_rhs : tensor<12x8xf32>, tensor<4x12x8xf32>, tensor<4xi32> -> tensor<12x12xf32>
  %z = nn.moe_combine %h[%pos], %w : tensor<12x12xf32>, tensor<6x2xi32>, tensor<6x2xf32> -> tensor<6x12xf32>
  %ce = nn.softmax_cross_entropy %z, %y : tensor<6x12xf32>, tensor<6xi32> -> tensor<f32>
  %aux = nn.moe_aux_loss %logits top_k 2 : tensor<6x4xf32> -> tensor<f32>
  %loss = nn.add %ce, %aux : tensor<f32>, tensor<f32>
  // CHECK: %[[DAUX:.*]] = nn.moe_aux_loss_grad %[[LOGITS]], %{{.*}} top_k 2 : tensor<6x4xf32>, tensor<f32>
  // CHECK: %[[DZ:.*]] = nn.softmax_cross_entropy_grad
  // CHECK: %[[DROWS:.*]], %[[DW:.*]] = nn.moe_combine_grad %[[H]][%[[POS]]], %[[W]], %[[DZ]]
  // CHECK: %[[DWGU:.*]] = nn.grouped_matmul_weight_grad %[[ROWS]], %[[DROWS]], %[[OFFS]] transpose_rhs : tensor<12x8xf32>, tensor<12x12xf32>, tensor<4xi32> -> tensor<4x12x8xf32>
  // CHECK: zero.grad @wgu, %[[DWGU]]
  // CHECK-NOT: nn.moe_dispatch_grad
  // The normalization's eps carries to the gradient.
  // CHECK: %[[DR:.*]] = nn.moe_router_grad %[[LOGITS]], %[[IDX]], %[[DW]] normalize eps 9.9999999999999995E-21 :
  // CHECK: %[[DL:.*]] = nn.add %[[DAUX]], %[[DR]]
  // CHECK: nn.matmul %[[DL]], %{{.*}} transpose_lhs
  // CHECK: zero.grad @wr
  zero.return %loss : tensor<f32>
}

// -----

// gpt-oss: attention with sinks passes them to its gradient, and the sinks'
// own gradient is nn.attention_sinks_grad's; the clamped SwiGLU's gradient
// keeps its alpha and limit.
zero.param @q : tensor<1x2x4x8xf32> init normal std 0.1
zero.param @sinks : tensor<2xf32> init normal std 0.1
// CHECK-LABEL: zero.train_step @gpt_oss
zero.train_step @gpt_oss(%y: tensor<1x2x4xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %q = zero.get_param @q : tensor<1x2x4x8xf32>
  %s = zero.get_param @sinks : tensor<2xf32>
  %o = nn.attention %q, %q, %q sinks(%s : tensor<2xf32>) causal window 2 : tensor<1x2x4x8xf32>
  %a = nn.clamped_swiglu %o, %q alpha 1.702 limit 7.0 : tensor<1x2x4x8xf32>
  %loss = nn.softmax_cross_entropy %a, %y : tensor<1x2x4x8xf32>, tensor<1x2x4xi32> -> tensor<f32>
  // CHECK: %[[DA:.*]] = nn.softmax_cross_entropy_grad
  // CHECK-NEXT: %[[DO:.*]], %[[DU:.*]] = nn.clamped_swiglu_grad %{{.*}}, %{{.*}}, %[[DA]] alpha 1.702000e+00 limit 7.000000e+00 : tensor<1x2x4x8xf32>
  // CHECK-NEXT: %{{.*}}, %{{.*}}, %{{.*}} = nn.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[DO]] sinks(%{{.*}} : tensor<2xf32>) causal scale 0.35355339059327373 window 2 : tensor<1x2x4x8xf32>
  // CHECK-NEXT: %[[DS:.*]] = nn.attention_sinks_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[DO]] causal scale 0.35355339059327373 window 2 : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<2xf32>
  // CHECK: zero.grad @sinks, %[[DS]]
  zero.return %loss : tensor<f32>
}

// -----

// xIELU: its gradient gives dx and the per-element terms of the two
// coefficients, each summed to [1] (over the leading dimensions, then over
// the last); alpha_p's then goes through its softplus.
zero.param @a : tensor<4x6x8xf32> init normal std 0.1
zero.param @p : tensor<1xf32> init zeros
zero.param @n : tensor<1xf32> init zeros
// CHECK-LABEL: zero.train_step @xielu
zero.train_step @xielu(%y: tensor<4x6xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %a = zero.get_param @a : tensor<4x6x8xf32>
  %p = zero.get_param @p : tensor<1xf32>
  %n = zero.get_param @n : tensor<1xf32>
  %ap = nn.softplus %p beta 1.0 threshold 20.0 : tensor<1xf32>
  %x = nn.xielu %a, %ap, %n beta 0.5 eps -1.0e-6 : tensor<4x6x8xf32>, tensor<1xf32>
  %loss = nn.softmax_cross_entropy %x, %y : tensor<4x6x8xf32>, tensor<4x6xi64> -> tensor<f32>
  // CHECK: %[[AP:.*]] = nn.softplus %[[P:.*]] beta
  // CHECK: %[[D:.*]] = nn.softmax_cross_entropy_grad
  // CHECK-NEXT: %[[DX:.*]], %[[PP:.*]], %[[PN:.*]] = nn.xielu_grad %{{.*}}, %[[AP]], %{{.*}}, %[[D]] beta 5.000000e-01 eps -9.9999999999999995E-7 : tensor<4x6x8xf32>, tensor<1xf32>
  // CHECK-NEXT: %[[SP:.*]] = nn.reduce_sum %[[PP]] : tensor<4x6x8xf32> -> tensor<8xf32>
  // CHECK-NEXT: %[[SP2:.*]] = nn.reshape %[[SP]] : tensor<8xf32> -> tensor<8x1xf32>
  // CHECK-NEXT: %[[DAP:.*]] = nn.reduce_sum %[[SP2]] : tensor<8x1xf32> -> tensor<1xf32>
  // CHECK-NEXT: %[[SN:.*]] = nn.reduce_sum %[[PN]] : tensor<4x6x8xf32> -> tensor<8xf32>
  // CHECK-NEXT: %[[SN2:.*]] = nn.reshape %[[SN]] : tensor<8xf32> -> tensor<8x1xf32>
  // CHECK-NEXT: %[[DAN:.*]] = nn.reduce_sum %[[SN2]] : tensor<8x1xf32> -> tensor<1xf32>
  // CHECK-DAG: zero.grad @a, %[[DX]] : tensor<4x6x8xf32>
  // CHECK-DAG: zero.grad @n, %[[DAN]] : tensor<1xf32>
  // CHECK-DAG: %[[DP:.*]] = nn.softplus_grad %[[P]], %[[DAP]] beta 1.000000e+00 threshold 2.000000e+01 : tensor<1xf32>
  // CHECK-DAG: zero.grad @p, %[[DP]] : tensor<1xf32>
  zero.return %loss : tensor<f32>
}

// -----

// A policy-gradient loss's ops: gather's gradient is a scatter-add of the
// indices, where's goes to both branches (its mask none), maximum's and
// minimum's to both operands, clamp's through its mask of the input; no
// gradient flows through stop_gradient, so @v gets minimum's only.
zero.param @w : tensor<4x6x8xf32> init normal std 0.1
zero.param @v : tensor<4x6x8xf32> init normal std 0.1
// CHECK-LABEL: zero.train_step @rl
zero.train_step @rl(%idx: tensor<4x6x8xi64>, %y: tensor<4x6xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %w = zero.get_param @w : tensor<4x6x8xf32>
  %v = zero.get_param @v : tensor<4x6x8xf32>
  // CHECK: %[[SG:.*]] = nn.stop_gradient %[[V:.*]] :
  %sg = nn.stop_gradient %v : tensor<4x6x8xf32>
  // CHECK: %[[C:.*]] = nn.clamp %[[W:.*]] min -5.000000e-01 max 5.000000e-01
  %c = nn.clamp %w min -0.5 max 0.5 : tensor<4x6x8xf32>
  // CHECK: %[[MN:.*]] = nn.minimum %[[C]], %[[V]]
  %mn = nn.minimum %c, %v : tensor<4x6x8xf32>
  // CHECK: %[[MX:.*]] = nn.maximum %[[MN]], %[[SG]]
  %mx = nn.maximum %mn, %sg : tensor<4x6x8xf32>
  // CHECK: %[[WH:.*]] = nn.where %[[SG]], %[[MX]], %[[W]]
  %wh = nn.where %sg, %mx, %w : tensor<4x6x8xf32>
  // CHECK: %[[G:.*]] = nn.gather %[[WH]][%[[IDX:.*]]] :
  %g = nn.gather %wh[%idx] : tensor<4x6x8xf32>, tensor<4x6x8xi64> -> tensor<4x6x8xf32>
  %loss = nn.softmax_cross_entropy %g, %y : tensor<4x6x8xf32>, tensor<4x6xi64> -> tensor<f32>
  // CHECK: %[[D:.*]] = nn.softmax_cross_entropy_grad %[[G]]
  // CHECK-NEXT: %[[DWH:.*]] = nn.gather_grad %[[IDX]], %[[D]] : tensor<4x6x8xi64>, tensor<4x6x8xf32> -> tensor<4x6x8xf32>
  // CHECK-NEXT: %[[DT:.*]], %[[DF:.*]] = nn.where_grad %[[SG]], %[[DWH]] : tensor<4x6x8xf32>
  // CHECK-NEXT: %[[DMN:.*]], %{{.*}} = nn.maximum_grad %[[MN]], %[[SG]], %[[DT]] : tensor<4x6x8xf32>
  // CHECK-NEXT: %[[DC:.*]], %[[DV:.*]] = nn.minimum_grad %[[C]], %[[V]], %[[DMN]] : tensor<4x6x8xf32>
  // CHECK-NEXT: %[[DW:.*]] = nn.clamp_grad %[[W]], %[[DC]] min -5.000000e-01 max 5.000000e-01 : tensor<4x6x8xf32>
  // CHECK-DAG: zero.grad @v, %[[DV]] : tensor<4x6x8xf32>
  // CHECK-DAG: %[[SUM:.*]] = nn.add %{{.*}}, %{{.*}} : tensor<4x6x8xf32>, tensor<4x6x8xf32>
  // CHECK-DAG: zero.grad @w, %[[SUM]] : tensor<4x6x8xf32>
  // CHECK-NOT: nn.stop_gradient
  zero.return %loss : tensor<f32>
}

// -----

// reciprocal's gradient comes from its result, as PyTorch's.
zero.param @r : tensor<4x6x8xf32> init ones
// CHECK-LABEL: zero.train_step @reciprocal
zero.train_step @reciprocal(%y: tensor<4x6xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %r = zero.get_param @r : tensor<4x6x8xf32>
  // CHECK: %[[Q:.*]] = nn.reciprocal %{{.*}} : tensor<4x6x8xf32>
  %q = nn.reciprocal %r : tensor<4x6x8xf32>
  %loss = nn.softmax_cross_entropy %q, %y : tensor<4x6x8xf32>, tensor<4x6xi64> -> tensor<f32>
  // CHECK: %[[D:.*]] = nn.softmax_cross_entropy_grad
  // CHECK-NEXT: %[[DR:.*]] = nn.reciprocal_grad %[[Q]], %[[D]] : tensor<4x6x8xf32>
  // CHECK: zero.grad @r, %[[DR]]
  zero.return %loss : tensor<f32>
}

// -----

// A sum over the batch (zero-import's x.sum()): the gradient broadcast back
// over the rows it summed.
zero.param @s : tensor<4x1xf32> init ones
// CHECK-LABEL: zero.train_step @sum
zero.train_step @sum(%m: tensor<4x1xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %s = zero.get_param @s : tensor<4x1xf32>
  // CHECK: %[[X:.*]] = nn.mul
  %x = nn.mul %s, %m : tensor<4x1xf32>, tensor<4x1xf32>
  %loss = nn.reduce_sum %x : tensor<4x1xf32> -> tensor<f32>
  // CHECK: %[[SEED:.*]] = nn.fill 1.000000e+00 {zero.loss_seed} : tensor<f32>
  // CHECK-NEXT: %[[DX:.*]] = nn.reduce_sum_grad %[[X]], %[[SEED]] : tensor<4x1xf32>, tensor<f32>
  // CHECK-NEXT: %[[DS:.*]] = nn.mul %[[DX]], %{{.*}} : tensor<4x1xf32>, tensor<4x1xf32>
  // CHECK: zero.grad @s, %[[DS]]
  zero.return %loss : tensor<f32>
}
