// RUN: zero-opt %s -split-input-file --zero-remat=policy=layer | FileCheck %s --check-prefix=LAYER
// RUN: zero-opt %s -split-input-file --zero-remat=policy=selective | FileCheck %s --check-prefix=SEL
// RUN: zero-opt %s -split-input-file --zero-remat="policy=layer blocks=1" | FileCheck %s --check-prefix=ONE
// RUN: zero-opt %s -split-input-file --zero-remat="policy=layer first-blocks=1" | FileCheck %s --check-prefix=FIRST
// RUN: zero-opt %s -split-input-file --zero-remat="policy=layer first-blocks=5" | FileCheck %s --check-prefix=LAYER
// RUN: zero-opt %s -split-input-file --zero-remat=policy=none | FileCheck %s --check-prefix=NONE
// RUN: zero-opt %s -split-input-file --zero-remat=policy=layer --zero-partition="stage=3 world-size=2" \
// RUN:   --zero-grad-sync --zero-param-gather="param-persistence-threshold=0 max-reuse-distance=0" \
// RUN:   --zero-optimizer --zero-verify-schedule | FileCheck %s --check-prefix=STAGE3

// Input: two pre-norm blocks (h.0, h.1: rms_norm, matmul, gelu, residual
// add) and a head, differentiated by zero-autodiff. The backward of each
// block reads its norm output (weight gradient), its matmul output (gelu
// gradient) and its input (norm gradient).

// layer: only the blocks' inputs and outputs (%x, %r0, %r1) are kept. Each
// block's norm and matmul are recomputed right before the block's first
// backward use; the forward copies are used by the forward only.
// LAYER-LABEL: zero.train_step @blocks
// LAYER: %[[N0:.*]] = nn.rms_norm %arg0, %[[N0W:.*]] eps
// LAYER: %[[A0:.*]] = nn.matmul %[[N0]], %[[W0:[0-9]+]] :
// LAYER: %[[R0:.*]] = nn.add %arg0,
// LAYER: %[[N1:.*]] = nn.rms_norm %[[R0]], %[[N1W:.*]] eps
// LAYER: %[[A1:.*]] = nn.matmul %[[N1]], %[[W1:[0-9]+]] :
// LAYER: zero.grad @head.w
// LAYER-NEXT: %[[N1R:.*]] = nn.rms_norm %[[R0]], %[[N1W]] eps 1.000000e-05 {zero.recompute}
// LAYER-NEXT: %[[A1R:.*]] = nn.matmul %[[N1R]], %[[W1]] {zero.recompute}
// LAYER-NEXT: nn.gelu_grad %[[A1R]],
// LAYER-NEXT: nn.matmul
// LAYER-NEXT: nn.matmul %[[N1R]],
// LAYER-NEXT: zero.grad @h.1.w
// LAYER-NEXT: nn.rms_norm_grad %[[R0]], %[[N1W]]
// LAYER: zero.grad @h.1.norm
// LAYER-NEXT: %[[N0R:.*]] = nn.rms_norm %arg0, %[[N0W]] eps 1.000000e-05 {zero.recompute}
// LAYER-NEXT: %[[A0R:.*]] = nn.matmul %[[N0R]], %[[W0]] {zero.recompute}
// LAYER-NEXT: nn.gelu_grad %[[A0R]],
// LAYER-NEXT: nn.matmul
// LAYER-NEXT: nn.matmul %[[N0R]],
// LAYER-NOT: {zero.recompute}
// LAYER: zero.return

// selective: matmul outputs are kept (the gelu gradients read the forward
// %a0, %a1); only the norms are recomputed, each right before its one
// backward use, the weight gradient.
// SEL-LABEL: zero.train_step @blocks
// SEL: %[[N0:.*]] = nn.rms_norm %arg0, %[[N0W:.*]] eps
// SEL: %[[A0:.*]] = nn.matmul %[[N0]]
// SEL: %[[N1:.*]] = nn.rms_norm %[[R0:.*]], %[[N1W:.*]] eps
// SEL: %[[A1:.*]] = nn.matmul %[[N1]]
// SEL: %[[DA1:.*]] = nn.gelu_grad %[[A1]],
// SEL-NEXT: nn.matmul %[[DA1]]
// SEL-NEXT: %[[N1R:.*]] = nn.rms_norm %[[R0]], %[[N1W]] eps 1.000000e-05 {zero.recompute}
// SEL-NEXT: nn.matmul %[[N1R]], %[[DA1]] transpose_lhs
// SEL: %[[DA0:.*]] = nn.gelu_grad %[[A0]],
// SEL-NEXT: nn.matmul %[[DA0]]
// SEL-NEXT: %[[N0R:.*]] = nn.rms_norm %arg0, %[[N0W]] eps 1.000000e-05 {zero.recompute}
// SEL-NEXT: nn.matmul %[[N0R]], %[[DA0]] transpose_lhs
// SEL-NOT: {zero.recompute}
// SEL: zero.return

// blocks=1: only the second block is recomputed.
// ONE-LABEL: zero.train_step @blocks
// ONE-COUNT-2: {zero.recompute}
// ONE-NEXT: nn.gelu_grad
// ONE-NOT: {zero.recompute}
// ONE: zero.return

// first-blocks=1: only the first block (more than the step has: all).
// FIRST-LABEL: zero.train_step @blocks
// FIRST: zero.grad @h.1.norm
// FIRST-NOT: zero.grad
// FIRST-COUNT-2: {zero.recompute}
// FIRST-NEXT: nn.gelu_grad
// FIRST-NOT: {zero.recompute}
// FIRST: zero.return

// NONE-LABEL: zero.train_step @blocks
// NONE-NOT: zero.recompute

// Stage 3: the recomputed norm and matmul of each block read the block's
// parameters again in the backward, so zero-param-gather gathers the group
// before the recompute and frees it after the block's last backward use;
// zero-verify-schedule accepts the schedule.
// STAGE3-LABEL: zero.train_step @blocks
// STAGE3: zero.grad @head.w
// STAGE3: %[[G1:.*]] = zero.all_gather group @h.1
// STAGE3-NEXT: %[[N1W:.*]] = zero.get_param @h.1.norm from %[[G1]]
// STAGE3-NEXT: %[[W1:.*]] = zero.get_param @h.1.w from %[[G1]]
// STAGE3-NEXT: nn.rms_norm %{{.*}}, %[[N1W]] eps 1.000000e-05 {zero.recompute}
// STAGE3-NEXT: nn.matmul %{{.*}}, %[[W1]] {zero.recompute}
// STAGE3: nn.rms_norm_grad
// STAGE3-NEXT: zero.free %[[G1]]
// STAGE3: %[[G0:.*]] = zero.all_gather group @h.0
// STAGE3-NEXT: %[[N0W:.*]] = zero.get_param @h.0.norm from %[[G0]]
// STAGE3-NEXT: %[[W0:.*]] = zero.get_param @h.0.w from %[[G0]]
// STAGE3-NEXT: nn.rms_norm %arg0, %[[N0W]] eps 1.000000e-05 {zero.recompute}
// STAGE3-NEXT: nn.matmul %{{.*}}, %[[W0]] {zero.recompute}
// STAGE3: nn.rms_norm_grad
// STAGE3-NEXT: zero.free %[[G0]]

zero.param @h.0.norm : tensor<4xf32> init ones
zero.param @h.0.w : tensor<4x4xf32> init normal std 0.5
zero.param @h.1.norm : tensor<4xf32> init ones
zero.param @h.1.w : tensor<4x4xf32> init normal std 0.5
zero.param @head.w : tensor<4x3xf32> init normal std 0.5
zero.train_step @blocks(%x: tensor<2x4xf32>, %y: tensor<2xi64>) optimizer #zero.optimizer<kind = adam, lr = 1.0e-03> precision #zero.precision<kind = fp32> {
  %n0w = zero.get_param @h.0.norm : tensor<4xf32>
  %n0 = nn.rms_norm %x, %n0w eps 1.0e-05 : tensor<2x4xf32>, tensor<4xf32>
  %w0 = zero.get_param @h.0.w : tensor<4x4xf32>
  %a0 = nn.matmul %n0, %w0 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %g0 = nn.gelu %a0 : tensor<2x4xf32>
  %r0 = nn.add %x, %g0 : tensor<2x4xf32>, tensor<2x4xf32>
  %n1w = zero.get_param @h.1.norm : tensor<4xf32>
  %n1 = nn.rms_norm %r0, %n1w eps 1.0e-05 : tensor<2x4xf32>, tensor<4xf32>
  %w1 = zero.get_param @h.1.w : tensor<4x4xf32>
  %a1 = nn.matmul %n1, %w1 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %g1 = nn.gelu %a1 : tensor<2x4xf32>
  %r1 = nn.add %r0, %g1 : tensor<2x4xf32>, tensor<2x4xf32>
  %wh = zero.get_param @head.w : tensor<4x3xf32>
  %logits = nn.matmul %r1, %wh : tensor<2x4xf32>, tensor<4x3xf32> -> tensor<2x3xf32>
  %loss = nn.softmax_cross_entropy %logits, %y : tensor<2x3xf32>, tensor<2xi64> -> tensor<f32>
  %seed = nn.fill 1.0 {zero.loss_seed} : tensor<f32>
  %dlogits = nn.softmax_cross_entropy_grad %logits, %y, %seed : tensor<2x3xf32>, tensor<2xi64>, tensor<f32>
  %dr1 = nn.matmul %dlogits, %wh transpose_rhs : tensor<2x3xf32>, tensor<4x3xf32> -> tensor<2x4xf32>
  %dwh = nn.matmul %r1, %dlogits transpose_lhs : tensor<2x4xf32>, tensor<2x3xf32> -> tensor<4x3xf32>
  zero.grad @head.w, %dwh : tensor<4x3xf32>
  %da1 = nn.gelu_grad %a1, %dr1 : tensor<2x4xf32>
  %dn1 = nn.matmul %da1, %w1 transpose_rhs : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %dw1 = nn.matmul %n1, %da1 transpose_lhs : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
  zero.grad @h.1.w, %dw1 : tensor<4x4xf32>
  %dr0n, %dn1w = nn.rms_norm_grad %r0, %n1w, %dn1 eps 1.0e-05 : tensor<2x4xf32>, tensor<4xf32>
  %dr0 = nn.add %dr1, %dr0n : tensor<2x4xf32>, tensor<2x4xf32>
  zero.grad @h.1.norm, %dn1w : tensor<4xf32>
  %da0 = nn.gelu_grad %a0, %dr0 : tensor<2x4xf32>
  %dn0 = nn.matmul %da0, %w0 transpose_rhs : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %dw0 = nn.matmul %n0, %da0 transpose_lhs : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
  zero.grad @h.0.w, %dw0 : tensor<4x4xf32>
  %dx, %dn0w = nn.rms_norm_grad %x, %n0w, %dn0 eps 1.0e-05 : tensor<2x4xf32>, tensor<4xf32>
  zero.grad @h.0.norm, %dn0w : tensor<4xf32>
  zero.return %loss : tensor<f32>
}

// -----

// Block outputs are kept wherever a later forward op reads them: layers.0
// hands both %s and %g to layers.1, so only its matmul output %a (read by
// the gelu gradient) is recomputed. Parameters without a layer number
// (emb.w, used again by the tied head) start segments that are never
// recomputed. Under selective nothing is recomputed: the only values the
// backward reads besides the kept outputs are matmul outputs.
// LAYER-LABEL: zero.train_step @outputs
// LAYER: %[[H:.*]] = nn.matmul %arg0, %{{.*}} : tensor<2x4xf32>, tensor<4x4xf32>
// LAYER-NEXT: %[[W:.*]] = zero.get_param @layers.0.w
// LAYER: %[[S:.*]] = nn.scale
// LAYER-NEXT: %[[V:.*]] = zero.get_param @layers.1.v
// LAYER: nn.softmax_cross_entropy_grad
// LAYER-NOT: zero.recompute
// LAYER: %[[BR:.*]] = nn.matmul %[[S]], %[[V]] {zero.recompute}
// LAYER-NEXT: nn.gelu_grad %[[BR]],
// LAYER-NOT: zero.recompute
// LAYER: %[[AR:.*]] = nn.matmul %[[H]], %[[W]] {zero.recompute}
// LAYER-NEXT: nn.gelu_grad %[[AR]],
// LAYER-NOT: zero.recompute
// LAYER: zero.return
// SEL-LABEL: zero.train_step @outputs
// SEL-NOT: zero.recompute
// SEL: zero.return
zero.param @emb.w : tensor<4x4xf32> init normal std 0.5
zero.param @layers.0.w : tensor<4x4xf32> init normal std 0.5
zero.param @layers.1.v : tensor<4x4xf32> init normal std 0.5
zero.train_step @outputs(%x: tensor<2x4xf32>, %y: tensor<2xi64>) optimizer #zero.optimizer<kind = adam, lr = 1.0e-03> precision #zero.precision<kind = fp32> {
  %e = zero.get_param @emb.w : tensor<4x4xf32>
  %h = nn.matmul %x, %e : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %w = zero.get_param @layers.0.w : tensor<4x4xf32>
  %a = nn.matmul %h, %w : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %g = nn.gelu %a : tensor<2x4xf32>
  %s = nn.scale %g by 0.5 : tensor<2x4xf32>
  %v = zero.get_param @layers.1.v : tensor<4x4xf32>
  %b = nn.matmul %s, %v : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %gb = nn.gelu %b : tensor<2x4xf32>
  %r = nn.add %gb, %g : tensor<2x4xf32>, tensor<2x4xf32>
  %e2 = zero.get_param @emb.w : tensor<4x4xf32>
  %logits = nn.matmul %r, %e2 transpose_rhs : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %loss = nn.softmax_cross_entropy %logits, %y : tensor<2x4xf32>, tensor<2xi64> -> tensor<f32>
  %seed = nn.fill 1.0 {zero.loss_seed} : tensor<f32>
  %dlogits = nn.softmax_cross_entropy_grad %logits, %y, %seed : tensor<2x4xf32>, tensor<2xi64>, tensor<f32>
  %dr = nn.matmul %dlogits, %e2 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %de2 = nn.matmul %dlogits, %r transpose_lhs : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
  %db = nn.gelu_grad %b, %dr : tensor<2x4xf32>
  %ds = nn.matmul %db, %v transpose_rhs : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %dv = nn.matmul %s, %db transpose_lhs : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
  zero.grad @layers.1.v, %dv : tensor<4x4xf32>
  %dg1 = nn.scale %ds by 0.5 : tensor<2x4xf32>
  %dg = nn.add %dr, %dg1 : tensor<2x4xf32>, tensor<2x4xf32>
  %da = nn.gelu_grad %a, %dg : tensor<2x4xf32>
  %dh = nn.matmul %da, %w transpose_rhs : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %dw = nn.matmul %h, %da transpose_lhs : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
  zero.grad @layers.0.w, %dw : tensor<4x4xf32>
  %de1 = nn.matmul %x, %dh transpose_lhs : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
  %de = nn.add %de2, %de1 : tensor<4x4xf32>, tensor<4x4xf32>
  zero.grad @emb.w, %de : tensor<4x4xf32>
  zero.return %loss : tensor<f32>
}
