// RUN: zero-opt %s -split-input-file -verify-diagnostics --zero-sequence-parallel="sp-size=4"

// 2 heads cannot be split over 4 ranks.
zero.param @head : tensor<10x8xf32> init normal std 0.02
zero.train_step @heads(%ids: tensor<1x4xi64>, %labels: tensor<1x4xi64>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %e = zero.get_param @head : tensor<10x8xf32>
  %h = nn.embedding %e[%ids] : tensor<10x8xf32>, tensor<1x4xi64> -> tensor<1x4x8xf32>
  %q1 = nn.reshape %h : tensor<1x4x8xf32> -> tensor<1x4x2x4xf32>
  %q2 = nn.transpose %q1 [0, 2, 1, 3] : tensor<1x4x2x4xf32> -> tensor<1x2x4x4xf32>
  // expected-error @below {{has 2 heads, not divisible by sp-size 4}}
  %a = nn.attention %q2, %q2, %q2 causal : tensor<1x2x4x4xf32>
  %a1 = nn.transpose %a [0, 2, 1, 3] : tensor<1x2x4x4xf32> -> tensor<1x4x2x4xf32>
  %a2 = nn.reshape %a1 : tensor<1x4x2x4xf32> -> tensor<1x4x8xf32>
  %logits = nn.matmul %a2, %e transpose_rhs : tensor<1x4x8xf32>, tensor<10x8xf32> -> tensor<1x4x10xf32>
  %loss = nn.softmax_cross_entropy %logits, %labels : tensor<1x4x10xf32>, tensor<1x4xi64> -> tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// 12 query heads, 3 key/value heads: 3 neither divides 4 nor is divisible
// by it.
zero.param @head : tensor<10x48xf32> init normal std 0.02
zero.train_step @kv(%ids: tensor<1x4xi64>, %labels: tensor<1x4xi64>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %e = zero.get_param @head : tensor<10x48xf32>
  %h = nn.embedding %e[%ids] : tensor<10x48xf32>, tensor<1x4xi64> -> tensor<1x4x48xf32>
  %q1 = nn.reshape %h : tensor<1x4x48xf32> -> tensor<1x4x12x4xf32>
  %q2 = nn.transpose %q1 [0, 2, 1, 3] : tensor<1x4x12x4xf32> -> tensor<1x12x4x4xf32>
  %k:2 = nn.split %h axis 2 : tensor<1x4x48xf32> -> tensor<1x4x12xf32>, tensor<1x4x36xf32>
  %k1 = nn.reshape %k#0 : tensor<1x4x12xf32> -> tensor<1x4x3x4xf32>
  %k2 = nn.transpose %k1 [0, 2, 1, 3] : tensor<1x4x3x4xf32> -> tensor<1x3x4x4xf32>
  // expected-error @below {{has 3 key/value heads, which neither divide sp-size 4 nor are divisible by it}}
  %a = nn.attention %q2, %k2, %k2 causal : tensor<1x12x4x4xf32>, tensor<1x3x4x4xf32>
  %a1 = nn.transpose %a [0, 2, 1, 3] : tensor<1x12x4x4xf32> -> tensor<1x4x12x4xf32>
  %a2 = nn.reshape %a1 : tensor<1x4x12x4xf32> -> tensor<1x4x48xf32>
  %logits = nn.matmul %a2, %e transpose_rhs : tensor<1x4x48xf32>, tensor<10x48xf32> -> tensor<1x4x10xf32>
  %loss = nn.softmax_cross_entropy %logits, %labels : tensor<1x4x10xf32>, tensor<1x4xi64> -> tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// 6 tokens are not divisible by 4 ranks.
zero.param @head : tensor<10x8xf32> init normal std 0.02
// expected-error @below {{train step @seq: input #0 'tensor<1x6xi64>' has no sequence dimension (dim 1) divisible by sp-size 4}}
zero.train_step @seq(%ids: tensor<1x6xi64>, %labels: tensor<1x6xi64>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %e = zero.get_param @head : tensor<10x8xf32>
  %h = nn.embedding %e[%ids] : tensor<10x8xf32>, tensor<1x6xi64> -> tensor<1x6x8xf32>
  %logits = nn.matmul %h, %e transpose_rhs : tensor<1x6x8xf32>, tensor<10x8xf32> -> tensor<1x6x10xf32>
  %loss = nn.softmax_cross_entropy %logits, %labels : tensor<1x6x10xf32>, tensor<1x6xi64> -> tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// A step without attention has nothing to parallelize over the sequence.
zero.param @head : tensor<10x8xf32> init normal std 0.02
// expected-error @below {{train step @mlp has no nn.attention; sp-size shards the sequence around attention}}
zero.train_step @mlp(%ids: tensor<1x8xi64>, %labels: tensor<1x8xi64>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %e = zero.get_param @head : tensor<10x8xf32>
  %h = nn.embedding %e[%ids] : tensor<10x8xf32>, tensor<1x8xi64> -> tensor<1x8x8xf32>
  %logits = nn.matmul %h, %e transpose_rhs : tensor<1x8x8xf32>, tensor<10x8xf32> -> tensor<1x8x10xf32>
  %loss = nn.softmax_cross_entropy %logits, %labels : tensor<1x8x10xf32>, tensor<1x8xi64> -> tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Packed documents' ids that are not those of the step's positions (which
// every rank takes whole) would be cut at each rank's shard.
zero.param @pk : tensor<10x16xf32> init normal std 0.02
zero.train_step @packed(%ids: tensor<1x8xi64>, %labels: tensor<1x8xi64>, %docs: tensor<1x8xi32>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %e = zero.get_param @pk : tensor<10x16xf32>
  %h = nn.embedding %e[%ids] : tensor<10x16xf32>, tensor<1x8xi64> -> tensor<1x8x16xf32>
  %q1 = nn.reshape %h : tensor<1x8x16xf32> -> tensor<1x8x4x4xf32>
  %q2 = nn.transpose %q1 [0, 2, 1, 3] : tensor<1x8x4x4xf32> -> tensor<1x4x8x4xf32>
  // expected-error @below {{reads packed documents' segments that are not the document ids of the step's positions, which sequence parallelism (sp-size) would cut at each rank's shard}}
  %a = nn.attention %q2, %q2, %q2 segments(%docs : tensor<1x8xi32>) causal : tensor<1x4x8x4xf32>
  %a1 = nn.transpose %a [0, 2, 1, 3] : tensor<1x4x8x4xf32> -> tensor<1x8x4x4xf32>
  %a2 = nn.reshape %a1 : tensor<1x8x4x4xf32> -> tensor<1x8x16xf32>
  %logits = nn.matmul %a2, %e transpose_rhs : tensor<1x8x16xf32>, tensor<10x16xf32> -> tensor<1x8x10xf32>
  %loss = nn.softmax_cross_entropy %logits, %labels : tensor<1x8x10xf32>, tensor<1x8xi64> -> tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Packed rows' positions reach a rank whole: a rotation by them whose
// result is not attention's query or key would rotate a shard by the whole
// row's positions.
zero.param @pr : tensor<10x16xf32> init normal std 0.02
zero.train_step @packed_rope(%ids: tensor<1x8xi64>, %labels: tensor<1x8xi64>, %pos: tensor<1x8xi64>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %e = zero.get_param @pr : tensor<10x16xf32>
  %h = nn.embedding %e[%ids] : tensor<10x16xf32>, tensor<1x8xi64> -> tensor<1x8x16xf32>
  %q1 = nn.reshape %h : tensor<1x8x16xf32> -> tensor<1x8x4x4xf32>
  %q2 = nn.transpose %q1 [0, 2, 1, 3] : tensor<1x8x4x4xf32> -> tensor<1x4x8x4xf32>
  // expected-error @below {{reads packed rows' positions on a sequence shard, which sp-size does not give it (the rows' documents and the rotations of attention's query and key see the whole row)}}
  %q3 = nn.rope %q2 positions(%pos : tensor<1x8xi64>) theta 1.000000e+04 : tensor<1x4x8x4xf32>
  %q4 = nn.add %q3, %q2 : tensor<1x4x8x4xf32>, tensor<1x4x8x4xf32>
  %a = nn.attention %q4, %q4, %q2 causal : tensor<1x4x8x4xf32>
  %a1 = nn.transpose %a [0, 2, 1, 3] : tensor<1x4x8x4xf32> -> tensor<1x8x4x4xf32>
  %a2 = nn.reshape %a1 : tensor<1x8x4x4xf32> -> tensor<1x8x16xf32>
  %logits = nn.matmul %a2, %e transpose_rhs : tensor<1x8x16xf32>, tensor<10x16xf32> -> tensor<1x8x10xf32>
  %loss = nn.softmax_cross_entropy %logits, %labels : tensor<1x8x10xf32>, tensor<1x8xi64> -> tensor<f32>
  zero.return %loss : tensor<f32>
}
