// RUN: zero-opt %s -split-input-file --zero-sequence-parallel="sp-size=2" | FileCheck %s
// RUN: zero-opt %s -split-input-file --zero-sequence-parallel="sp-size=2" --zero-autodiff | FileCheck %s --check-prefix=GRAD

// A Llama attention block as the Hugging Face import writes it (4 query
// heads, 2 key/value heads, rope, a loss that shifts its labels). Each rank
// holds 4 of the 8 tokens: every op but attention runs on [2, 4, ...]; the
// query, key and value go from sequence shards [2, H, 4, 4] to head shards
// [2, H/2, 8, 4] before the rotation, attention runs on the whole sequence,
// and its result comes back. The label shift is gone: the step's labels are
// `shifted` (the driver shifts whole rows).
// CHECK-LABEL: zero.train_step @llama
// CHECK-SAME: (%{{.*}}: tensor<2x4xi64>, %[[L:.*]]: tensor<2x4xi64>)
// CHECK-SAME: labels shifted
// CHECK: nn.embedding {{.*}} -> tensor<2x4x8xf32>
// CHECK: nn.reshape %{{.*}} : tensor<2x4x16xf32> -> tensor<2x4x4x4xf32>
// CHECK: %[[QT:.*]] = nn.transpose {{.*}} -> tensor<2x4x4x4xf32>
// CHECK: %[[KT:.*]] = nn.transpose {{.*}} -> tensor<2x2x4x4xf32>
// CHECK: %[[VT:.*]] = nn.transpose {{.*}} -> tensor<2x2x4x4xf32>
// CHECK-NOT: nn.rope
// CHECK: %[[QA:.*]] = zero.all_to_all %[[QT]] split 1 concat 2 over sequence : tensor<2x4x4x4xf32> -> tensor<2x2x8x4xf32>
// CHECK: %[[Q:.*]] = nn.rope %[[QA]] theta 1.000000e+04 : tensor<2x2x8x4xf32>
// CHECK: %[[KA:.*]] = zero.all_to_all %[[KT]] split 1 concat 2 over sequence : tensor<2x2x4x4xf32> -> tensor<2x1x8x4xf32>
// CHECK: %[[K:.*]] = nn.rope %[[KA]] theta 1.000000e+04 : tensor<2x1x8x4xf32>
// CHECK: %[[V:.*]] = zero.all_to_all %[[VT]] split 1 concat 2 over sequence : tensor<2x2x4x4xf32> -> tensor<2x1x8x4xf32>
// CHECK: %[[O:.*]] = nn.attention %[[Q]], %[[K]], %[[V]] causal : tensor<2x2x8x4xf32>, tensor<2x1x8x4xf32>
// CHECK: zero.all_to_all %[[O]] split 2 concat 1 over sequence : tensor<2x2x8x4xf32> -> tensor<2x4x4x4xf32>
// CHECK-NOT: nn.shift_labels
// CHECK: nn.softmax_cross_entropy %{{.*}}, %[[L]] ignore_index -100 : tensor<2x4x10xf32>, tensor<2x4xi64> -> tensor<f32>
// The derivative of each all-to-all is the inverse exchange.
// GRAD-LABEL: zero.train_step @llama
// GRAD: nn.attention_grad
// GRAD-SAME: tensor<2x2x8x4xf32>, tensor<2x1x8x4xf32>
// GRAD-DAG: zero.all_to_all %{{.*}} split 2 concat 1 over sequence : tensor<2x1x8x4xf32> -> tensor<2x2x4x4xf32>
// GRAD-DAG: zero.all_to_all %{{.*}} split 2 concat 1 over sequence : tensor<2x2x8x4xf32> -> tensor<2x4x4x4xf32>
zero.param @embed : tensor<10x8xf32> init normal std 0.02
zero.param @q : tensor<16x8xf32> init normal std 0.02
zero.param @k : tensor<8x8xf32> init normal std 0.02
zero.param @v : tensor<8x8xf32> init normal std 0.02
zero.param @o : tensor<8x16xf32> init normal std 0.02
zero.param @head : tensor<10x8xf32> init normal std 0.02
zero.train_step @llama(%ids: tensor<2x8xi64>, %labels: tensor<2x8xi64>)
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
  %qr = nn.rope %q2 theta 10000.0 : tensor<2x4x8x4xf32>
  %kr = nn.rope %k2 theta 10000.0 : tensor<2x2x8x4xf32>
  %a = nn.attention %qr, %kr, %v2 causal : tensor<2x4x8x4xf32>, tensor<2x2x8x4xf32>
  %a1 = nn.transpose %a [0, 2, 1, 3] : tensor<2x4x8x4xf32> -> tensor<2x8x4x4xf32>
  %a2 = nn.reshape %a1 : tensor<2x8x4x4xf32> -> tensor<2x8x16xf32>
  %wo = zero.get_param @o : tensor<8x16xf32>
  %y = nn.matmul %a2, %wo transpose_rhs : tensor<2x8x16xf32>, tensor<8x16xf32> -> tensor<2x8x8xf32>
  %r = nn.add %h, %y : tensor<2x8x8xf32>, tensor<2x8x8xf32>
  %w = zero.get_param @head : tensor<10x8xf32>
  %logits = nn.matmul %r, %w transpose_rhs : tensor<2x8x8xf32>, tensor<10x8xf32> -> tensor<2x8x10xf32>
  %l = nn.shift_labels %labels fill -100 : tensor<2x8xi64>
  %loss = nn.softmax_cross_entropy %logits, %l ignore_index -100 : tensor<2x8x10xf32>, tensor<2x8xi64> -> tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Packed rows: the positions reach every rank whole ([2, 8] while the ids
// and labels are shards [2, 4]), so that the documents' ids are the whole
// row's and the rotations after the exchange turn each token by its own
// position; the attention on the whole sequence masks by those documents.
// CHECK-LABEL: zero.train_step @packed
// CHECK-SAME: (%{{.*}}: tensor<2x4xi64>, %[[POS:.*]]: tensor<2x8xi64>, %{{.*}}: tensor<2x4xi64>)
// CHECK: %[[D:.*]] = nn.document_ids %[[POS]] : tensor<2x8xi64>
// CHECK: %[[QA:.*]] = zero.all_to_all %{{.*}} split 1 concat 2 over sequence : tensor<2x4x4x4xf32> -> tensor<2x2x8x4xf32>
// CHECK: %[[Q:.*]] = nn.rope %[[QA]] positions(%[[POS]] : tensor<2x8xi64>) theta 1.000000e+04 : tensor<2x2x8x4xf32>
// CHECK: nn.attention %[[Q]], %{{.*}}, %{{.*}} segments(%[[D]] : tensor<2x8xi32>) causal : tensor<2x2x8x4xf32>
// GRAD-LABEL: zero.train_step @packed
// GRAD: nn.attention_grad {{.*}} segments(%{{.*}} : tensor<2x8xi32>) causal
// GRAD: nn.rope %{{.*}} positions(%{{.*}} : tensor<2x8xi64>) theta 1.000000e+04 inverse : tensor<2x2x8x4xf32>
zero.param @pe : tensor<10x16xf32> init normal std 0.02
zero.train_step @packed(%ids: tensor<2x8xi64>, %pos: tensor<2x8xi64>, %labels: tensor<2x8xi64>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> labels same_tokens {
  %e = zero.get_param @pe : tensor<10x16xf32>
  %h = nn.embedding %e[%ids] : tensor<10x16xf32>, tensor<2x8xi64> -> tensor<2x8x16xf32>
  %q1 = nn.reshape %h : tensor<2x8x16xf32> -> tensor<2x8x4x4xf32>
  %q2 = nn.transpose %q1 [0, 2, 1, 3] : tensor<2x8x4x4xf32> -> tensor<2x4x8x4xf32>
  %d = nn.document_ids %pos : tensor<2x8xi64>
  %qr = nn.rope %q2 positions(%pos : tensor<2x8xi64>) theta 10000.0 : tensor<2x4x8x4xf32>
  %a = nn.attention %qr, %qr, %q2 segments(%d : tensor<2x8xi32>) causal : tensor<2x4x8x4xf32>
  %a1 = nn.transpose %a [0, 2, 1, 3] : tensor<2x4x8x4xf32> -> tensor<2x8x4x4xf32>
  %a2 = nn.reshape %a1 : tensor<2x8x4x4xf32> -> tensor<2x8x16xf32>
  %logits = nn.matmul %a2, %e transpose_rhs : tensor<2x8x16xf32>, tensor<10x16xf32> -> tensor<2x8x10xf32>
  %l = nn.shift_labels %labels fill -100 : tensor<2x8xi64>
  %loss = nn.softmax_cross_entropy %logits, %l ignore_index -100 : tensor<2x8x10xf32>, tensor<2x8xi64> -> tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// One key/value head (multi-query attention) with P = 2: the head is
// repeated before the exchange, so each rank receives it, and the
// replicas' gradients add up in the backward.
// CHECK-LABEL: zero.train_step @mqa
// CHECK: %[[KT:.*]] = nn.transpose {{.*}} -> tensor<1x1x2x4xf32>
// CHECK: %[[KR:.*]] = nn.concat %[[KT]], %[[KT]] axis 1 : tensor<1x1x2x4xf32>, tensor<1x1x2x4xf32> -> tensor<1x2x2x4xf32>
// CHECK: zero.all_to_all %[[KR]] split 1 concat 2 over sequence : tensor<1x2x2x4xf32> -> tensor<1x1x4x4xf32>
// CHECK: nn.attention {{.*}} causal : tensor<1x1x4x4xf32>
// GRAD-LABEL: zero.train_step @mqa
// GRAD: nn.split %{{.*}} axis 1 : tensor<1x2x2x4xf32> -> tensor<1x1x2x4xf32>, tensor<1x1x2x4xf32>
// GRAD: nn.add
zero.param @embed : tensor<10x8xf32> init normal std 0.02
zero.param @q : tensor<8x8xf32> init normal std 0.02
zero.param @k : tensor<4x8xf32> init normal std 0.02
zero.param @head : tensor<10x8xf32> init normal std 0.02
zero.train_step @mqa(%ids: tensor<1x4xi64>, %labels: tensor<1x4xi64>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %e = zero.get_param @embed : tensor<10x8xf32>
  %h = nn.embedding %e[%ids] : tensor<10x8xf32>, tensor<1x4xi64> -> tensor<1x4x8xf32>
  %wq = zero.get_param @q : tensor<8x8xf32>
  %q0 = nn.matmul %h, %wq transpose_rhs : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  %q1 = nn.reshape %q0 : tensor<1x4x8xf32> -> tensor<1x4x2x4xf32>
  %q2 = nn.transpose %q1 [0, 2, 1, 3] : tensor<1x4x2x4xf32> -> tensor<1x2x4x4xf32>
  %wk = zero.get_param @k : tensor<4x8xf32>
  %k0 = nn.matmul %h, %wk transpose_rhs : tensor<1x4x8xf32>, tensor<4x8xf32> -> tensor<1x4x4xf32>
  %k1 = nn.reshape %k0 : tensor<1x4x4xf32> -> tensor<1x4x1x4xf32>
  %k2 = nn.transpose %k1 [0, 2, 1, 3] : tensor<1x4x1x4xf32> -> tensor<1x1x4x4xf32>
  %a = nn.attention %q2, %k2, %k2 causal : tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>
  %a1 = nn.transpose %a [0, 2, 1, 3] : tensor<1x2x4x4xf32> -> tensor<1x4x2x4xf32>
  %a2 = nn.reshape %a1 : tensor<1x4x2x4xf32> -> tensor<1x4x8xf32>
  %w = zero.get_param @head : tensor<10x8xf32>
  %logits = nn.matmul %a2, %w transpose_rhs : tensor<1x4x8xf32>, tensor<10x8xf32> -> tensor<1x4x10xf32>
  %loss = nn.softmax_cross_entropy %logits, %labels : tensor<1x4x10xf32>, tensor<1x4xi64> -> tensor<f32>
  zero.return %loss : tensor<f32>
}
