// RUN: zero-opt %s --zero-autodiff --zero-remat=policy=op | FileCheck %s --check-prefix=OP
// RUN: zero-opt %s --zero-autodiff --zero-remat=policy=selective | FileCheck %s --check-prefix=SEL
// RUN: zero-opt %s --zero-autodiff --zero-remat=policy=op --zero-partition="stage=3 world-size=2" \
// RUN:   --zero-grad-sync --zero-param-gather="param-persistence-threshold=0 max-reuse-distance=0" \
// RUN:   --zero-optimizer --zero-verify-schedule | FileCheck %s --check-prefix=STAGE3

// Input: one Llama-like block (norm; q, k, v projections; rope; attention;
// o projection; residual; gate and up projections; swiglu; down
// projection; residual) between an embedding and a head.

// op (torchtitan's op-level policy): of the block's seven matmuls the
// first, third, fifth and seventh (q, v, gate, down) and the attention
// output are kept; the second, fourth and sixth (k, o, up) are recomputed
// with the norm, rope and residual work that needs them, before the
// block's first backward use. The attention gradient reads the forward
// attention output, not a clone.
// OP-LABEL: zero.train_step @op
// OP: %[[N:.*]] = nn.rms_norm %[[X:[0-9]+]], %[[NW:[0-9]+]] eps
// OP: %[[Q:.*]] = nn.matmul %[[N]], %{{.*}} :
// OP: %[[WK:.*]] = zero.get_param @layers.0.k
// OP-NEXT: nn.matmul %[[N]], %[[WK]] :
// OP-NEXT: zero.get_param @layers.0.v
// OP-NEXT: %[[V:.*]] = nn.matmul %[[N]], %{{.*}} :
// OP: %[[A:.*]] = nn.attention
// OP: %[[WO:.*]] = zero.get_param @layers.0.o
// OP: %[[G:.*]] = nn.matmul %{{.*}}, %{{.*}} : tensor<2x4x8xf32>, tensor<8x16xf32>
// OP: %[[WU:.*]] = zero.get_param @layers.0.up
// OP: zero.grad @head.w
// OP-NOT: zero.grad
// OP: %[[NR:.*]] = nn.rms_norm %[[X]], %[[NW]] eps 1.000000e-05 {zero.recompute}
// OP-NEXT: %[[KR:.*]] = nn.matmul %[[NR]], %[[WK]] {zero.recompute}
// OP-NEXT: nn.reshape %[[Q]] {zero.recompute}
// OP-NEXT: nn.reshape %[[KR]] {zero.recompute}
// OP-NEXT: nn.reshape %[[V]] {zero.recompute}
// OP-NEXT: nn.rope {{.*}} {zero.recompute}
// OP-NEXT: nn.rope {{.*}} {zero.recompute}
// OP-NEXT: %[[AM:.*]] = nn.reshape %[[A]] {zero.recompute}
// OP-NEXT: %[[OR:.*]] = nn.matmul %[[AM]], %[[WO]] {zero.recompute}
// OP-NEXT: %[[RR:.*]] = nn.add %[[X]], %[[OR]] {zero.recompute}
// OP-NEXT: %[[UR:.*]] = nn.matmul %[[RR]], %[[WU]] {zero.recompute}
// OP-NEXT: nn.swiglu %[[G]], %[[UR]] {zero.recompute}
// OP-NOT: nn.attention {{.*}}zero.recompute
// OP: nn.attention_grad {{.*}}, %[[A]], %{{.*}} causal
// OP-NOT: {zero.recompute}
// OP: zero.return

// selective keeps every matmul output and recomputes the attention.
// SEL-LABEL: zero.train_step @op
// SEL: zero.grad @head.w
// SEL-NOT: nn.matmul {{.*}}{zero.recompute}
// SEL: %[[AR:.*]] = nn.attention {{.*}} {zero.recompute}
// SEL-NOT: nn.matmul {{.*}}{zero.recompute}
// SEL: nn.attention_grad {{.*}}, %[[AR]], %{{.*}} causal
// SEL: zero.return

// Stage 3: the recomputed matmuls read the block's parameters again, so
// zero-param-gather gathers the group before the recompute and frees it
// after the block's last backward use; zero-verify-schedule accepts it.
// STAGE3-LABEL: zero.train_step @op
// STAGE3: zero.grad @head.w
// STAGE3: %[[G0:.*]] = zero.all_gather group @layers.0
// STAGE3: nn.rms_norm {{.*}} {zero.recompute}
// STAGE3: nn.matmul {{.*}} {zero.recompute}
// STAGE3: zero.free %[[G0]]
// STAGE3: zero.return

zero.param @emb.w : tensor<16x8xf32> init normal std 0.5
zero.param @layers.0.norm : tensor<8xf32> init ones
zero.param @layers.0.q : tensor<8x8xf32> init normal std 0.5
zero.param @layers.0.k : tensor<8x8xf32> init normal std 0.5
zero.param @layers.0.v : tensor<8x8xf32> init normal std 0.5
zero.param @layers.0.o : tensor<8x8xf32> init normal std 0.5
zero.param @layers.0.gate : tensor<8x16xf32> init normal std 0.5
zero.param @layers.0.up : tensor<8x16xf32> init normal std 0.5
zero.param @layers.0.down : tensor<16x8xf32> init normal std 0.5
zero.param @head.w : tensor<8x16xf32> init normal std 0.5
zero.train_step @op(%tokens: tensor<2x4xi32>, %targets: tensor<2x4xi32>) optimizer #zero.optimizer<kind = adam, lr = 1.0e-03> precision #zero.precision<kind = fp32> {
  %e = zero.get_param @emb.w : tensor<16x8xf32>
  %x = nn.embedding %e[%tokens] : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
  %nw = zero.get_param @layers.0.norm : tensor<8xf32>
  %n = nn.rms_norm %x, %nw eps 1.0e-05 : tensor<2x4x8xf32>, tensor<8xf32>
  %wq = zero.get_param @layers.0.q : tensor<8x8xf32>
  %q = nn.matmul %n, %wq : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
  %wk = zero.get_param @layers.0.k : tensor<8x8xf32>
  %k = nn.matmul %n, %wk : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
  %wv = zero.get_param @layers.0.v : tensor<8x8xf32>
  %v = nn.matmul %n, %wv : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
  %qh = nn.reshape %q : tensor<2x4x8xf32> -> tensor<2x1x4x8xf32>
  %kh = nn.reshape %k : tensor<2x4x8xf32> -> tensor<2x1x4x8xf32>
  %vh = nn.reshape %v : tensor<2x4x8xf32> -> tensor<2x1x4x8xf32>
  %qr = nn.rope %qh theta 1.000000e+04 : tensor<2x1x4x8xf32>
  %kr = nn.rope %kh theta 1.000000e+04 : tensor<2x1x4x8xf32>
  %a = nn.attention %qr, %kr, %vh causal : tensor<2x1x4x8xf32>
  %am = nn.reshape %a : tensor<2x1x4x8xf32> -> tensor<2x4x8xf32>
  %wo = zero.get_param @layers.0.o : tensor<8x8xf32>
  %o = nn.matmul %am, %wo : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
  %r = nn.add %x, %o : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  %wg = zero.get_param @layers.0.gate : tensor<8x16xf32>
  %g = nn.matmul %r, %wg : tensor<2x4x8xf32>, tensor<8x16xf32> -> tensor<2x4x16xf32>
  %wu = zero.get_param @layers.0.up : tensor<8x16xf32>
  %u = nn.matmul %r, %wu : tensor<2x4x8xf32>, tensor<8x16xf32> -> tensor<2x4x16xf32>
  %s = nn.swiglu %g, %u : tensor<2x4x16xf32>
  %wd = zero.get_param @layers.0.down : tensor<16x8xf32>
  %d = nn.matmul %s, %wd : tensor<2x4x16xf32>, tensor<16x8xf32> -> tensor<2x4x8xf32>
  %y = nn.add %r, %d : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  %wh = zero.get_param @head.w : tensor<8x16xf32>
  %logits = nn.matmul %y, %wh : tensor<2x4x8xf32>, tensor<8x16xf32> -> tensor<2x4x16xf32>
  %loss = nn.softmax_cross_entropy %logits, %targets : tensor<2x4x16xf32>, tensor<2x4xi32> -> tensor<f32>
  zero.return %loss : tensor<f32>
}
