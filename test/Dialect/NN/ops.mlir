// RUN: zero-opt %s | zero-opt | FileCheck %s
// RUN: zero-opt %s --mlir-print-op-generic | zero-opt | FileCheck %s

// Every nn op round-trips through the custom and the generic form.

// CHECK-LABEL: func.func @forward
func.func @forward(%x: tensor<2x4x8xf32>, %w: tensor<8x24xf32>, %b: tensor<24xf32>,
                   %g: tensor<8xf32>, %ids: tensor<2x4xi32>, %table: tensor<16x8xf32>,
                   %pos: tensor<4x8xf32>, %labels: tensor<2x4xi64>) -> tensor<f32> {
  // CHECK: nn.embedding %{{.*}}[%{{.*}}] : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
  %e = nn.embedding %table[%ids] : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
  // CHECK: nn.add %{{.*}}, %{{.*}} : tensor<2x4x8xf32>, tensor<4x8xf32>
  %e2 = nn.add %e, %pos : tensor<2x4x8xf32>, tensor<4x8xf32>
  // CHECK: nn.layer_norm %{{.*}}, %{{.*}}, %{{.*}} eps 1.000000e-05 : tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>
  %h = nn.layer_norm %e2, %g, %g eps 1.0e-5 : tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>
  // CHECK: nn.rms_norm %{{.*}}, %{{.*}} eps 1.000000e-05 : tensor<2x4x8xf32>, tensor<8xf32>
  %rn = nn.rms_norm %e2, %g eps 1.0e-5 : tensor<2x4x8xf32>, tensor<8xf32>
  // CHECK: nn.matmul %{{.*}}, %{{.*}} : tensor<2x4x8xf32>, tensor<8x24xf32> -> tensor<2x4x24xf32>
  %qkv0 = nn.matmul %h, %w : tensor<2x4x8xf32>, tensor<8x24xf32> -> tensor<2x4x24xf32>
  %qkv = nn.add %qkv0, %b : tensor<2x4x24xf32>, tensor<24xf32>
  // CHECK: nn.split %{{.*}} axis 2 : tensor<2x4x24xf32> -> tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>
  %q, %k, %v = nn.split %qkv axis 2 : tensor<2x4x24xf32> -> tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>
  // CHECK: nn.split %{{.*}} axis 0 : tensor<16x8xf32> -> tensor<5x8xf32>, tensor<11x8xf32>
  %head, %tail = nn.split %table axis 0 : tensor<16x8xf32> -> tensor<5x8xf32>, tensor<11x8xf32>
  // CHECK: nn.reshape %{{.*}} : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %q4 = nn.reshape %q : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %k4 = nn.reshape %k : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %v4 = nn.reshape %v : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  // CHECK: nn.transpose %{{.*}} [0, 2, 1, 3] : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
  %qt = nn.transpose %q4 [0, 2, 1, 3] : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
  %kt = nn.transpose %k4 [0, 2, 1, 3] : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
  %vt = nn.transpose %v4 [0, 2, 1, 3] : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
  // CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} causal : tensor<2x2x4x4xf32>
  %a = nn.attention %qt, %kt, %vt causal : tensor<2x2x4x4xf32>
  // CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} scale 5.000000e-01 : tensor<2x2x4x4xf32>
  %a2 = nn.attention %qt, %kt, %vt scale 0.5 : tensor<2x2x4x4xf32>
  // CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} causal window 2 softcap 5.000000e+01 : tensor<2x2x4x4xf32>
  %a3 = nn.attention %qt, %kt, %vt causal window 2 softcap 50.0 : tensor<2x2x4x4xf32>
  // CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} alibi [2.500000e-01, 6.250000e-02] : tensor<2x2x4x4xf32>
  %a4 = nn.attention %qt, %kt, %vt alibi [0.25, 0.0625] : tensor<2x2x4x4xf32>
  // CHECK: nn.matmul %{{.*}}, %{{.*}} transpose_rhs : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32> -> tensor<2x2x4x4xf32>
  %s = nn.matmul %qt, %kt transpose_rhs : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32> -> tensor<2x2x4x4xf32>
  // CHECK: nn.scale %{{.*}} by 5.000000e-01 : tensor<2x2x4x4xf32>
  %ss = nn.scale %s by 0.5 : tensor<2x2x4x4xf32>
  // CHECK: nn.softmax %{{.*}} : tensor<2x2x4x4xf32>
  %p = nn.softmax %ss : tensor<2x2x4x4xf32>
  // CHECK: nn.rope %{{.*}} theta 1.000000e+04 : tensor<2x2x4x4xf32>
  %qr = nn.rope %qt theta 1.000000e+04 : tensor<2x2x4x4xf32>
  // CHECK: nn.rope %{{.*}} theta 5.000000e+05 inverse : tensor<2x2x4x4xf32>
  %qi = nn.rope %qr theta 500000.0 inverse : tensor<2x2x4x4xf32>
  // CHECK: nn.rope %{{.*}} theta 1.000000e+04 interleaved : tensor<2x2x4x4xf32>
  %qv = nn.rope %qt theta 1.000000e+04 interleaved : tensor<2x2x4x4xf32>
  // CHECK: nn.rope %{{.*}} theta 1.000000e+04 inverse interleaved : tensor<2x2x4x4xf32>
  %qw = nn.rope %qv theta 1.000000e+04 inverse interleaved : tensor<2x2x4x4xf32>
  // CHECK: nn.rope %{{.*}} inv_freq [1.000000e+00 : f32, 0.316227764 : f32] : tensor<2x2x4x4xf32>
  %qt1 = nn.rope %qt inv_freq [1.0 : f32, 0.316227764 : f32] : tensor<2x2x4x4xf32>
  // CHECK: nn.rope %{{.*}} inv_freq [1.000000e+00 : f32, 0.000000e+00 : f32] scale 1.2079441541679836 inverse interleaved : tensor<2x2x4x4xf32>
  %qt2 = nn.rope %qt1 inv_freq [1.0 : f32, 0.0 : f32] scale 1.2079441541679836 inverse interleaved : tensor<2x2x4x4xf32>
  // CHECK: nn.rope %{{.*}} positions(%{{.*}} : tensor<2x4xi32>) theta 1.000000e+04 inverse : tensor<2x2x4x4xf32>
  %qp = nn.rope %qt positions(%ids : tensor<2x4xi32>) theta 1.000000e+04 inverse : tensor<2x2x4x4xf32>
  // CHECK: nn.mul %{{.*}}, %{{.*}} : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>
  %pm = nn.mul %p, %a2 : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>
  %pa0 = nn.add %pm, %a : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>
  %pa = nn.add %pa0, %qi : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>
  %back = nn.transpose %pa [0, 2, 1, 3] : tensor<2x2x4x4xf32> -> tensor<2x4x2x4xf32>
  %m = nn.reshape %back : tensor<2x4x2x4xf32> -> tensor<2x4x8xf32>
  // CHECK: nn.gelu %{{.*}} : tensor<2x4x8xf32>
  %gl = nn.gelu %m : tensor<2x4x8xf32>
  // CHECK: nn.bias_gelu %{{.*}}, %{{.*}} : tensor<2x4x8xf32>, tensor<8xf32>
  %bg = nn.bias_gelu %gl, %g : tensor<2x4x8xf32>, tensor<8xf32>
  // CHECK: nn.gelu_erf %{{.*}} : tensor<2x4x8xf32>
  %ge = nn.gelu_erf %bg : tensor<2x4x8xf32>
  // CHECK: nn.silu %{{.*}} : tensor<2x4x8xf32>
  %sl = nn.silu %ge : tensor<2x4x8xf32>
  // CHECK: nn.swiglu %{{.*}}, %{{.*}} : tensor<2x4x8xf32>
  %sw = nn.swiglu %sl, %gl : tensor<2x4x8xf32>
  // CHECK: nn.relu %{{.*}} : tensor<2x4x8xf32>
  %r = nn.relu %sw : tensor<2x4x8xf32>
  // CHECK: nn.tanh %{{.*}} : tensor<2x4x8xf32>
  %th = nn.tanh %r : tensor<2x4x8xf32>
  // CHECK: nn.exp %{{.*}} : tensor<2x4x8xf32>
  %ex = nn.exp %th : tensor<2x4x8xf32>
  // CHECK: nn.log %{{.*}} : tensor<2x4x8xf32>
  %lg = nn.log %ex : tensor<2x4x8xf32>
  // CHECK: nn.softplus %{{.*}} beta 1.000000e+00 threshold 2.000000e+01 : tensor<2x4x8xf32>
  %sp = nn.softplus %lg beta 1.0 threshold 20.0 : tensor<2x4x8xf32>
  // CHECK: nn.logsumexp %{{.*}} : tensor<2x4x8xf32> -> tensor<2x4xf32>
  %lse = nn.logsumexp %sp : tensor<2x4x8xf32> -> tensor<2x4xf32>
  // CHECK: nn.reduce_max %{{.*}} : tensor<2x4x8xf32> -> tensor<2x4xf32>
  %mx = nn.reduce_max %sp : tensor<2x4x8xf32> -> tensor<2x4xf32>
  // A vector reduces to a scalar.
  // CHECK: nn.reduce_max %{{.*}} : tensor<8xf32> -> tensor<f32>
  %gmx = nn.reduce_max %g : tensor<8xf32> -> tensor<f32>
  // CHECK: nn.concat %{{.*}}, %{{.*}} axis 2 : tensor<2x4x8xf32>, tensor<2x4x8xf32> -> tensor<2x4x16xf32>
  %cat = nn.concat %th, %h axis 2 : tensor<2x4x8xf32>, tensor<2x4x8xf32> -> tensor<2x4x16xf32>
  // CHECK: nn.cast %{{.*}} : tensor<2x4x16xf32> to tensor<2x4x16xbf16>
  %c = nn.cast %cat : tensor<2x4x16xf32> to tensor<2x4x16xbf16>
  %c2 = nn.cast %c : tensor<2x4x16xbf16> to tensor<2x4x16xf32>
  // CHECK: nn.matmul %{{.*}}, %{{.*}} transpose_rhs : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
  %logits = nn.matmul %r, %table transpose_rhs : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
  %l2 = nn.add %logits, %c2 : tensor<2x4x16xf32>, tensor<2x4x16xf32>
  // CHECK: nn.softmax_cross_entropy %{{.*}}, %{{.*}} : tensor<2x4x16xf32>, tensor<2x4xi64> -> tensor<f32>
  %loss = nn.softmax_cross_entropy %l2, %labels : tensor<2x4x16xf32>, tensor<2x4xi64> -> tensor<f32>
  return %loss : tensor<f32>
}

// CHECK-LABEL: func.func @backward
func.func @backward(%x: tensor<2x4x8xf32>, %w: tensor<8xf32>, %dy: tensor<2x4x8xf32>,
                    %q: tensor<2x2x4x4xf32>, %ids: tensor<2x4xi32>,
                    %logits: tensor<2x4x16xf32>, %labels: tensor<2x4xi64>) {
  // CHECK: nn.fill 1.000000e+00 : tensor<f32>
  %one = nn.fill 1.0 : tensor<f32>
  // CHECK: nn.reduce_sum %{{.*}} : tensor<2x4x8xf32> -> tensor<8xf32>
  %db = nn.reduce_sum %dy : tensor<2x4x8xf32> -> tensor<8xf32>
  // CHECK: nn.reduce_sum_grad %{{.*}}, %{{.*}} : tensor<2x4x8xf32>, tensor<8xf32>
  %ddy = nn.reduce_sum_grad %dy, %db : tensor<2x4x8xf32>, tensor<8xf32>
  // CHECK: nn.gelu_grad %{{.*}}, %{{.*}} : tensor<2x4x8xf32>
  %g = nn.gelu_grad %x, %dy : tensor<2x4x8xf32>
  // CHECK: nn.bias_gelu_grad %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x4x8xf32>, tensor<8xf32>
  %bgg = nn.bias_gelu_grad %x, %w, %dy : tensor<2x4x8xf32>, tensor<8xf32>
  // CHECK: nn.silu_grad %{{.*}}, %{{.*}} : tensor<2x4x8xf32>
  %sg = nn.silu_grad %x, %dy : tensor<2x4x8xf32>
  // CHECK: nn.gelu_erf_grad %{{.*}}, %{{.*}} : tensor<2x4x8xf32>
  %ge = nn.gelu_erf_grad %x, %dy : tensor<2x4x8xf32>
  // CHECK: nn.swiglu_grad %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x4x8xf32>
  %dgate, %dup = nn.swiglu_grad %x, %sg, %dy : tensor<2x4x8xf32>
  // CHECK: nn.relu_grad %{{.*}}, %{{.*}} : tensor<2x4x8xf32>
  %r = nn.relu_grad %x, %dy : tensor<2x4x8xf32>
  // CHECK: nn.tanh_grad %{{.*}}, %{{.*}} : tensor<2x4x8xf32>
  %tg = nn.tanh_grad %x, %dy : tensor<2x4x8xf32>
  // CHECK: nn.softmax_grad %{{.*}}, %{{.*}} : tensor<2x4x8xf32>
  %s = nn.softmax_grad %x, %dy : tensor<2x4x8xf32>
  // CHECK: nn.exp_grad %{{.*}}, %{{.*}} : tensor<2x4x8xf32>
  %eg = nn.exp_grad %x, %dy : tensor<2x4x8xf32>
  // CHECK: nn.log_grad %{{.*}}, %{{.*}} : tensor<2x4x8xf32>
  %lgg = nn.log_grad %x, %dy : tensor<2x4x8xf32>
  // CHECK: nn.softplus_grad %{{.*}}, %{{.*}} beta 2.000000e+00 threshold 1.000000e+01 : tensor<2x4x8xf32>
  %spg = nn.softplus_grad %x, %dy beta 2.0 threshold 10.0 : tensor<2x4x8xf32>
  %lse = nn.logsumexp %x : tensor<2x4x8xf32> -> tensor<2x4xf32>
  // CHECK: nn.logsumexp_grad %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x4x8xf32> -> tensor<2x4xf32>
  %lseg = nn.logsumexp_grad %x, %lse, %lse : tensor<2x4x8xf32> -> tensor<2x4xf32>
  %mx = nn.reduce_max %x : tensor<2x4x8xf32> -> tensor<2x4xf32>
  // CHECK: nn.reduce_max_grad %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x4x8xf32> -> tensor<2x4xf32>
  %mxg = nn.reduce_max_grad %x, %mx, %mx : tensor<2x4x8xf32> -> tensor<2x4xf32>
  // CHECK: nn.layer_norm_grad %{{.*}}, %{{.*}}, %{{.*}} eps 1.000000e-05 : tensor<2x4x8xf32>, tensor<8xf32>
  %dx, %dw, %dbb = nn.layer_norm_grad %x, %w, %dy eps 1.0e-5 : tensor<2x4x8xf32>, tensor<8xf32>
  // CHECK: nn.rms_norm_grad %{{.*}}, %{{.*}}, %{{.*}} eps 1.250000e-01 : tensor<2x4x8xf32>, tensor<8xf32>
  %rdx, %rdw = nn.rms_norm_grad %x, %w, %dy eps 0.125 : tensor<2x4x8xf32>, tensor<8xf32>
  // CHECK: nn.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} causal scale 5.000000e-01 : tensor<2x2x4x4xf32>
  %dq, %dk, %dv = nn.attention_grad %q, %q, %q, %q, %q causal scale 0.5 : tensor<2x2x4x4xf32>
  // CHECK: nn.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} causal scale 5.000000e-01 window 3 softcap 2.000000e+01 : tensor<2x2x4x4xf32>
  %wq, %wk, %wv = nn.attention_grad %q, %q, %q, %q, %q causal scale 0.5 window 3 softcap 20.0 : tensor<2x2x4x4xf32>
  // CHECK: nn.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} causal scale 5.000000e-01 alibi [5.000000e-01, 0.707106769] : tensor<2x2x4x4xf32>
  %aq, %ak, %av = nn.attention_grad %q, %q, %q, %q, %q causal scale 0.5 alibi [0.5, 0.70710677] : tensor<2x2x4x4xf32>
  // CHECK: nn.embedding_grad %{{.*}}[%{{.*}}] : tensor<2x4x8xf32>, tensor<2x4xi32> -> tensor<16x8xf32>
  %dt = nn.embedding_grad %dy[%ids] : tensor<2x4x8xf32>, tensor<2x4xi32> -> tensor<16x8xf32>
  // CHECK: nn.softmax_cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x4x16xf32>, tensor<2x4xi64>, tensor<f32>
  %dl = nn.softmax_cross_entropy_grad %logits, %labels, %one : tensor<2x4x16xf32>, tensor<2x4xi64>, tensor<f32>
  // The padded forms of zero-pad-vocab: 10 valid rows and classes of 16.
  // CHECK: nn.matmul %{{.*}}, %{{.*}} transpose_rhs columns 10 : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
  %pm = nn.matmul %x, %dt transpose_rhs columns 10 : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
  // CHECK: nn.matmul %{{.*}}, %{{.*}} contract 10 : tensor<2x4x16xf32>, tensor<16x8xf32> -> tensor<2x4x8xf32>
  %pc = nn.matmul %logits, %dt contract 10 : tensor<2x4x16xf32>, tensor<16x8xf32> -> tensor<2x4x8xf32>
  // CHECK: nn.embedding %{{.*}}[%{{.*}}] rows 10 : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
  %pe = nn.embedding %dt[%ids] rows 10 : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
  // A padding row (PyTorch's padding_idx) gets no gradient.
  // CHECK: nn.embedding %{{.*}}[%{{.*}}] rows 10 padding_idx 9 : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
  %ppe = nn.embedding %dt[%ids] rows 10 padding_idx 9 : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
  // CHECK: nn.embedding_grad %{{.*}}[%{{.*}}] padding_idx 0 : tensor<2x4x8xf32>, tensor<2x4xi32> -> tensor<16x8xf32>
  %pdt = nn.embedding_grad %dy[%ids] padding_idx 0 : tensor<2x4x8xf32>, tensor<2x4xi32> -> tensor<16x8xf32>
  // CHECK: nn.softmax_cross_entropy %{{.*}}, %{{.*}} classes 10 : tensor<2x4x16xf32>, tensor<2x4xi64> -> tensor<f32>
  %pl = nn.softmax_cross_entropy %logits, %labels classes 10 : tensor<2x4x16xf32>, tensor<2x4xi64> -> tensor<f32>
  // CHECK: nn.softmax_cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} classes 10 : tensor<2x4x16xf32>, tensor<2x4xi64>, tensor<f32>
  %pd = nn.softmax_cross_entropy_grad %logits, %labels, %one classes 10 : tensor<2x4x16xf32>, tensor<2x4xi64>, tensor<f32>
  // The ignored label of a Hugging Face loss, alone and with padding.
  // CHECK: nn.softmax_cross_entropy %{{.*}}, %{{.*}} ignore_index -100 : tensor<2x4x16xf32>, tensor<2x4xi64> -> tensor<f32>
  %il = nn.softmax_cross_entropy %logits, %labels ignore_index -100 : tensor<2x4x16xf32>, tensor<2x4xi64> -> tensor<f32>
  // CHECK: nn.softmax_cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} classes 10 ignore_index -100 : tensor<2x4x16xf32>, tensor<2x4xi64>, tensor<f32>
  %id = nn.softmax_cross_entropy_grad %logits, %labels, %one classes 10 ignore_index -100 : tensor<2x4x16xf32>, tensor<2x4xi64>, tensor<f32>
  // The output projection and loss in chunks of rows (zero-loss-chunk).
  // CHECK: nn.linear_cross_entropy %{{.*}}, %{{.*}}, %{{.*}} chunk 3 ignore_index -100 : tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<2x4xi64> -> tensor<f32>
  %lc = nn.linear_cross_entropy %x, %dt, %labels chunk 3 ignore_index -100 : tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<2x4xi64> -> tensor<f32>
  // CHECK: nn.linear_cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} chunk 3 : tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<2x4xi64>, tensor<f32>
  %lcx, %lcw = nn.linear_cross_entropy_grad %x, %dt, %labels, %one chunk 3 : tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<2x4xi64>, tensor<f32>
  // Llama's MLP in tiles of rows (zero-tiled-mlp).
  %tdown = nn.fill 5.000000e-01 : tensor<8x16xf32>
  // CHECK: nn.tiled_mlp %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} tiles 3 : tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<8x16xf32>
  %tm = nn.tiled_mlp %x, %dt, %dt, %tdown tiles 3 : tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<8x16xf32>
  // CHECK: nn.tiled_mlp_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} tiles 3 : tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<8x16xf32>
  %tmx, %tmg, %tmu, %tmd = nn.tiled_mlp_grad %x, %dt, %dt, %tdown, %tm tiles 3 : tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<8x16xf32>
  // The label shift inside a Hugging Face causal LM's loss.
  // CHECK: nn.shift_labels %{{.*}} fill -100 : tensor<2x4xi64>
  %sl = nn.shift_labels %labels fill -100 : tensor<2x4xi64>
  // CHECK: nn.shift_labels %{{.*}} fill -100 : tensor<2x4xi32>
  %si = nn.shift_labels %ids fill -100 : tensor<2x4xi32>
  return
}

// Grouped-query (2 query heads per key/value head) and multi-query
// attention write the key's type after the query's; with equal types one
// type stands for all, printed alone.
// CHECK-LABEL: func.func @grouped_query
func.func @grouped_query(%q: tensor<2x4x8x16xbf16>, %k: tensor<2x2x8x16xbf16>,
                         %k1: tensor<2x1x8x16xbf16>) {
  // CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} causal : tensor<2x4x8x16xbf16>, tensor<2x2x8x16xbf16>{{$}}
  %o = nn.attention %q, %k, %k causal : tensor<2x4x8x16xbf16>, tensor<2x2x8x16xbf16>
  // CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} scale 2.500000e-01 : tensor<2x4x8x16xbf16>, tensor<2x1x8x16xbf16>{{$}}
  %m = nn.attention %q, %k1, %k1 scale 0.25 : tensor<2x4x8x16xbf16>, tensor<2x1x8x16xbf16>
  // CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} causal : tensor<2x4x8x16xbf16>{{$}}
  %h = nn.attention %q, %q, %q causal : tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>
  // CHECK: nn.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} causal scale 2.500000e-01 : tensor<2x4x8x16xbf16>, tensor<2x2x8x16xbf16>{{$}}
  %dq, %dk, %dv = nn.attention_grad %q, %k, %k, %o, %q causal scale 0.25 : tensor<2x4x8x16xbf16>, tensor<2x2x8x16xbf16>
  // CHECK: nn.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} scale 2.500000e-01 : tensor<2x4x8x16xbf16>{{$}}
  %dq2, %dk2, %dv2 = nn.attention_grad %q, %q, %q, %h, %q scale 0.25 : tensor<2x4x8x16xbf16>
  return
}

// CHECK-LABEL: func.func @sixteen_bit
func.func @sixteen_bit(%a: tensor<4x8xbf16>, %b: tensor<8x2xbf16>, %h: tensor<4x8xf16>,
                       %q: tensor<1x2x3x8xbf16>, %bw: tensor<8xbf16>) -> (tensor<4x2xbf16>, tensor<4x8xf16>, tensor<4x8xf16>, tensor<1x2x3x8xbf16>) {
  // CHECK: nn.matmul %{{.*}}, %{{.*}} : tensor<4x8xbf16>, tensor<8x2xbf16> -> tensor<4x2xbf16>
  %0 = nn.matmul %a, %b : tensor<4x8xbf16>, tensor<8x2xbf16> -> tensor<4x2xbf16>
  // CHECK: nn.gelu %{{.*}} : tensor<4x8xf16>
  %1 = nn.gelu %h : tensor<4x8xf16>
  // CHECK: nn.swiglu %{{.*}}, %{{.*}} : tensor<4x8xf16>
  %2 = nn.swiglu %h, %1 : tensor<4x8xf16>
  // CHECK: nn.rope %{{.*}} theta 1.000000e+04 : tensor<1x2x3x8xbf16>
  %3 = nn.rope %q theta 1.000000e+04 : tensor<1x2x3x8xbf16>
  // CHECK: nn.rms_norm %{{.*}}, %{{.*}} eps 1.000000e-05 : tensor<4x8xbf16>, tensor<8xbf16>
  %rms = nn.rms_norm %a, %bw eps 1.0e-5 : tensor<4x8xbf16>, tensor<8xbf16>
  return %0, %1, %2, %3 : tensor<4x2xbf16>, tensor<4x8xf16>, tensor<4x8xf16>, tensor<1x2x3x8xbf16>
}

// A mixture-of-experts block (Mixtral's, with the grouped experts) and its
// backward ops.
// CHECK-LABEL: func.func @moe
func.func @moe(%x: tensor<6x8xf32>, %logits: tensor<6x4xf32>, %bias: tensor<4xf32>,
               %wgu: tensor<4x16x8xf32>, %wd: tensor<4x8x8xf32>) {
  // CHECK: nn.moe_router %{{.*}} top_k 2 normalize : tensor<6x4xf32> -> tensor<6x2xf32>, tensor<6x2xi32>
  %w, %idx = nn.moe_router %logits top_k 2 normalize : tensor<6x4xf32> -> tensor<6x2xf32>, tensor<6x2xi32>
  // CHECK: nn.moe_router %{{.*}} bias(%{{.*}} : tensor<4xf32>) top_k 3 sigmoid normalize scale 2.500000e+00 : tensor<6x4xf32> -> tensor<6x3xf32>, tensor<6x3xi32>
  %w3, %idx3 = nn.moe_router %logits bias(%bias : tensor<4xf32>) top_k 3 sigmoid normalize scale 2.5 : tensor<6x4xf32> -> tensor<6x3xf32>, tensor<6x3xi32>
  // CHECK: nn.moe_router %{{.*}} bias(%{{.*}} : tensor<4xf32>) top_k 2 sigmoid normalize eps 9.9999999999999995E-21 scale 2.500000e+00 groups 2 top 1 : tensor<6x4xf32> -> tensor<6x2xf32>, tensor<6x2xi32>
  %wg, %idxg = nn.moe_router %logits bias(%bias : tensor<4xf32>) top_k 2 sigmoid normalize eps 1.0e-20 scale 2.5 groups 2 top 1 : tensor<6x4xf32> -> tensor<6x2xf32>, tensor<6x2xi32>
  // CHECK: nn.moe_dispatch %{{.*}}[%{{.*}}] experts 4 : tensor<6x8xf32>, tensor<6x2xi32> -> tensor<12x8xf32>, tensor<4xi32>
  %rows, %pos, %offs = nn.moe_dispatch %x[%idx] experts 4 : tensor<6x8xf32>, tensor<6x2xi32> -> tensor<12x8xf32>, tensor<4xi32>
  // CHECK: nn.grouped_matmul %{{.*}}, %{{.*}}, %{{.*}} transpose_rhs : tensor<12x8xf32>, tensor<4x16x8xf32>, tensor<4xi32> -> tensor<12x16xf32>
  %gu = nn.grouped_matmul %rows, %wgu, %offs transpose_rhs : tensor<12x8xf32>, tensor<4x16x8xf32>, tensor<4xi32> -> tensor<12x16xf32>
  // A 16-bit step's grouped product verifies (the lowering refuses it).
  // CHECK: nn.grouped_matmul %{{.*}}, %{{.*}}, %{{.*}} : tensor<12x16xbf16>, tensor<4x16x8xbf16>, tensor<4xi32> -> tensor<12x8xbf16>
  %gu16 = nn.cast %gu : tensor<12x16xf32> to tensor<12x16xbf16>
  %wgu16 = nn.cast %wgu : tensor<4x16x8xf32> to tensor<4x16x8xbf16>
  %back16 = nn.grouped_matmul %gu16, %wgu16, %offs : tensor<12x16xbf16>, tensor<4x16x8xbf16>, tensor<4xi32> -> tensor<12x8xbf16>
  // CHECK: nn.grouped_matmul %{{.*}}, %{{.*}}, %{{.*}} : tensor<12x16xf32>, tensor<4x16x8xf32>, tensor<4xi32> -> tensor<12x8xf32>
  %back = nn.grouped_matmul %gu, %wgu, %offs : tensor<12x16xf32>, tensor<4x16x8xf32>, tensor<4xi32> -> tensor<12x8xf32>
  // CHECK: nn.moe_combine %{{.*}}[%{{.*}}], %{{.*}} : tensor<12x8xf32>, tensor<6x2xi32>, tensor<6x2xf32> -> tensor<6x8xf32>
  %y = nn.moe_combine %back[%pos], %w : tensor<12x8xf32>, tensor<6x2xi32>, tensor<6x2xf32> -> tensor<6x8xf32>
  // CHECK: nn.moe_aux_loss %{{.*}} top_k 2 : tensor<6x4xf32> -> tensor<f32>
  %aux = nn.moe_aux_loss %logits top_k 2 : tensor<6x4xf32> -> tensor<f32>
  // CHECK: nn.moe_aux_loss_grad %{{.*}}, %{{.*}} top_k 2 : tensor<6x4xf32>, tensor<f32>
  %dl = nn.moe_aux_loss_grad %logits, %aux top_k 2 : tensor<6x4xf32>, tensor<f32>
  // CHECK: %[[COUNTS:.*]] = nn.moe_expert_counts %{{.*}} top_k 2 : tensor<6x4xf32> -> tensor<4xi64>
  %counts = nn.moe_expert_counts %logits top_k 2 : tensor<6x4xf32> -> tensor<4xi64>
  // CHECK: nn.moe_aux_loss %{{.*}} counts(%[[COUNTS]] : tensor<4xi64>) rows 12 top_k 2 : tensor<6x4xf32> -> tensor<f32>
  %auxg = nn.moe_aux_loss %logits counts(%counts : tensor<4xi64>) rows 12 top_k 2 : tensor<6x4xf32> -> tensor<f32>
  // CHECK: nn.moe_aux_loss_grad %{{.*}}, %{{.*}} counts(%[[COUNTS]] : tensor<4xi64>) rows 12 top_k 2 : tensor<6x4xf32>, tensor<f32>
  %dlg = nn.moe_aux_loss_grad %logits, %auxg counts(%counts : tensor<4xi64>) rows 12 top_k 2 : tensor<6x4xf32>, tensor<f32>
  // CHECK: nn.moe_combine_grad %{{.*}}[%{{.*}}], %{{.*}}, %{{.*}} : tensor<12x8xf32>, tensor<6x2xi32>, tensor<6x2xf32>, tensor<6x8xf32>
  %drows, %dw = nn.moe_combine_grad %back[%pos], %w, %y : tensor<12x8xf32>, tensor<6x2xi32>, tensor<6x2xf32>, tensor<6x8xf32>
  // CHECK: nn.grouped_matmul_weight_grad %{{.*}}, %{{.*}}, %{{.*}} transpose_rhs : tensor<12x8xf32>, tensor<12x16xf32>, tensor<4xi32> -> tensor<4x16x8xf32>
  %dwgu = nn.grouped_matmul_weight_grad %rows, %gu, %offs transpose_rhs : tensor<12x8xf32>, tensor<12x16xf32>, tensor<4xi32> -> tensor<4x16x8xf32>
  // CHECK: nn.moe_dispatch_grad %{{.*}}[%{{.*}}] : tensor<12x8xf32>, tensor<6x2xi32> -> tensor<6x8xf32>
  %dx = nn.moe_dispatch_grad %drows[%pos] : tensor<12x8xf32>, tensor<6x2xi32> -> tensor<6x8xf32>
  // CHECK: nn.moe_router_grad %{{.*}}, %{{.*}}, %{{.*}} sigmoid normalize scale 2.500000e+00 : tensor<6x4xf32>, tensor<6x3xi32>, tensor<6x3xf32>
  %dlog = nn.moe_router_grad %logits, %idx3, %w3 sigmoid normalize scale 2.5 : tensor<6x4xf32>, tensor<6x3xi32>, tensor<6x3xf32>
  // CHECK: nn.moe_router_grad %{{.*}}, %{{.*}}, %{{.*}} sigmoid normalize eps 9.9999999999999995E-21 scale 2.500000e+00 : tensor<6x4xf32>, tensor<6x2xi32>, tensor<6x2xf32>
  %dlogg = nn.moe_router_grad %logits, %idxg, %wg sigmoid normalize eps 1.0e-20 scale 2.5 : tensor<6x4xf32>, tensor<6x2xi32>, tensor<6x2xf32>
  return
}

// gpt-oss: attention sinks and the clamped SwiGLU.
// CHECK-LABEL: func.func @gpt_oss
func.func @gpt_oss(%q: tensor<2x4x8x16xf32>, %k: tensor<2x2x8x16xf32>,
                   %sk: tensor<4xf32>, %g: tensor<6x8xf32>, %u: tensor<6x8xf32>) {
  // CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} sinks(%{{.*}} : tensor<4xf32>) causal window 4 : tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>
  %o = nn.attention %q, %k, %k sinks(%sk : tensor<4xf32>) causal window 4 : tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>
  // CHECK: nn.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} sinks(%{{.*}} : tensor<4xf32>) causal scale 2.500000e-01 : tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>
  %dq, %dk, %dv = nn.attention_grad %q, %k, %k, %o, %q sinks(%sk : tensor<4xf32>) causal scale 0.25 : tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>
  // CHECK: nn.attention_sinks_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} causal scale 2.500000e-01 window 4 : tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<4xf32>
  %ds = nn.attention_sinks_grad %q, %k, %sk, %o, %q causal scale 0.25 window 4 : tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<4xf32>
  // CHECK: nn.clamped_swiglu %{{.*}}, %{{.*}} alpha 1.702000e+00 limit 7.000000e+00 : tensor<6x8xf32>
  %y = nn.clamped_swiglu %g, %u alpha 1.702 limit 7.0 : tensor<6x8xf32>
  // CHECK: nn.clamped_swiglu_grad %{{.*}}, %{{.*}}, %{{.*}} alpha 1.702000e+00 limit 7.000000e+00 : tensor<6x8xf32>
  %dg, %du = nn.clamped_swiglu_grad %g, %u, %y alpha 1.702 limit 7.0 : tensor<6x8xf32>
  return
}

// Apertus: xIELU with [1] coefficients.
// CHECK-LABEL: func.func @apertus
func.func @apertus(%x: tensor<2x4x8xf32>, %ap: tensor<1xf32>, %an: tensor<1xf32>) {
  // CHECK: nn.xielu %{{.*}}, %{{.*}}, %{{.*}} beta 5.000000e-01 eps -9.9999999999999995E-7 : tensor<2x4x8xf32>, tensor<1xf32>
  %y = nn.xielu %x, %ap, %an beta 0.5 eps -1.0e-6 : tensor<2x4x8xf32>, tensor<1xf32>
  // CHECK: nn.xielu_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} beta 5.000000e-01 eps -9.9999999747524271E-7 : tensor<2x4x8xf32>, tensor<1xf32>
  %dx, %pp, %pn = nn.xielu_grad %x, %ap, %an, %y beta 0.5 eps -9.9999999747524271E-7 : tensor<2x4x8xf32>, tensor<1xf32>
  return
}

// Packed rows' document ids on attention and its gradients, beside sinks.
// CHECK-LABEL: func.func @attention_segments
func.func @attention_segments(%q: tensor<2x2x4x4xf32>, %ids: tensor<2x4xi32>, %s: tensor<2xf32>) {
  // CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} segments(%{{.*}} : tensor<2x4xi32>) causal window 2 : tensor<2x2x4x4xf32>
  %a = nn.attention %q, %q, %q segments(%ids : tensor<2x4xi32>) causal window 2 : tensor<2x2x4x4xf32>
  // CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} sinks(%{{.*}} : tensor<2xf32>) segments(%{{.*}} : tensor<2x4xi32>) causal : tensor<2x2x4x4xf32>
  %b = nn.attention %q, %q, %q sinks(%s : tensor<2xf32>) segments(%ids : tensor<2x4xi32>) causal : tensor<2x2x4x4xf32>
  // CHECK: nn.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} segments(%{{.*}} : tensor<2x4xi32>) causal scale 5.000000e-01 : tensor<2x2x4x4xf32>
  %dq, %dk, %dv = nn.attention_grad %q, %q, %q, %q, %q segments(%ids : tensor<2x4xi32>) causal scale 0.5 : tensor<2x2x4x4xf32>
  // CHECK: nn.attention_sinks_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} segments(%{{.*}} : tensor<2x4xi32>) causal scale 5.000000e-01 : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2xf32>
  %ds = nn.attention_sinks_grad %q, %q, %s, %q, %q segments(%ids : tensor<2x4xi32>) causal scale 0.5 : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2xf32>
  return
}

// Packed rows' document ids from their positions.
// CHECK-LABEL: func.func @document_ids
func.func @document_ids(%p: tensor<2x8xi64>, %p32: tensor<2x8xi32>) {
  // CHECK: nn.document_ids %{{.*}} : tensor<2x8xi64>
  %a = nn.document_ids %p : tensor<2x8xi64>
  // CHECK: nn.document_ids %{{.*}} : tensor<2x8xi32>
  %b = nn.document_ids %p32 : tensor<2x8xi32>
  return
}

// Reinforcement learning (a GRPO loss): clamp, minimum/maximum, where with
// a float mask, stop_gradient, gather along the last dimension, and the
// reciprocal of a quotient.
// CHECK-LABEL: func.func @rl
func.func @rl(%x: tensor<2x4x8xf32>, %a: tensor<2x4xf32>, %b: tensor<2x4xf32>,
              %ids: tensor<2x4xi64>, %idx: tensor<2x4x3xi32>) {
  // CHECK: nn.reciprocal %{{.*}} : tensor<2x4xf32>
  %r = nn.reciprocal %a : tensor<2x4xf32>
  // CHECK: nn.reciprocal_grad %{{.*}}, %{{.*}} : tensor<2x4xf32>
  %dr = nn.reciprocal_grad %r, %b : tensor<2x4xf32>
  // CHECK: nn.clamp %{{.*}} min 8.000000e-01 max 1.200000e+00 : tensor<2x4xf32>
  %c = nn.clamp %a min 0.8 max 1.2 : tensor<2x4xf32>
  // CHECK: nn.clamp %{{.*}} min 1.000000e+00 : tensor<2x4xf32>
  %lo = nn.clamp %a min 1.0 : tensor<2x4xf32>
  // CHECK: nn.clamp %{{.*}} max -2.500000e-01 : tensor<2x4xf32>
  %hi = nn.clamp %a max -0.25 : tensor<2x4xf32>
  // CHECK: nn.clamp_grad %{{.*}}, %{{.*}} min 8.000000e-01 max 1.200000e+00 : tensor<2x4xf32>
  %dc = nn.clamp_grad %a, %b min 0.8 max 1.2 : tensor<2x4xf32>
  // CHECK: nn.clamp_grad %{{.*}}, %{{.*}} max 1.200000e+00 : tensor<2x4xf32>
  %dh = nn.clamp_grad %a, %b max 1.2 : tensor<2x4xf32>
  // CHECK: nn.minimum %{{.*}}, %{{.*}} : tensor<2x4xf32>
  %mn = nn.minimum %a, %b : tensor<2x4xf32>
  // CHECK: nn.maximum %{{.*}}, %{{.*}} : tensor<2x4xf32>
  %mx = nn.maximum %a, %b : tensor<2x4xf32>
  // CHECK: nn.minimum_grad %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x4xf32>
  %da, %db = nn.minimum_grad %a, %b, %mn : tensor<2x4xf32>
  // CHECK: nn.maximum_grad %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x4xf32>
  %ea, %eb = nn.maximum_grad %a, %b, %mx : tensor<2x4xf32>
  // CHECK: nn.where %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x4xf32>
  %w = nn.where %c, %a, %b : tensor<2x4xf32>
  // CHECK: nn.where_grad %{{.*}}, %{{.*}} : tensor<2x4xf32>
  %dt, %df = nn.where_grad %c, %w : tensor<2x4xf32>
  // CHECK: nn.stop_gradient %{{.*}} : tensor<2x4xf32>
  %s = nn.stop_gradient %w : tensor<2x4xf32>
  // CHECK: nn.gather %{{.*}}[%{{.*}}] : tensor<2x4x8xf32>, tensor<2x4xi64> -> tensor<2x4xf32>
  %g = nn.gather %x[%ids] : tensor<2x4x8xf32>, tensor<2x4xi64> -> tensor<2x4xf32>
  // CHECK: nn.gather %{{.*}}[%{{.*}}] : tensor<2x4x8xf32>, tensor<2x4x3xi32> -> tensor<2x4x3xf32>
  %k = nn.gather %x[%idx] : tensor<2x4x8xf32>, tensor<2x4x3xi32> -> tensor<2x4x3xf32>
  // CHECK: nn.gather_grad %{{.*}}, %{{.*}} : tensor<2x4xi64>, tensor<2x4xf32> -> tensor<2x4x8xf32>
  %dg = nn.gather_grad %ids, %g : tensor<2x4xi64>, tensor<2x4xf32> -> tensor<2x4x8xf32>
  // CHECK: nn.gather_grad %{{.*}}, %{{.*}} : tensor<2x4x3xi32>, tensor<2x4x3xf32> -> tensor<2x4x8xf32>
  %dk = nn.gather_grad %idx, %k : tensor<2x4x3xi32>, tensor<2x4x3xf32> -> tensor<2x4x8xf32>
  return
}
