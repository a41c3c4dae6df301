// RUN: zero-opt %s -split-input-file -verify-diagnostics

// Every condition the nn verifiers and type inference reject, one per case.
// Type-inferring ops report the reason; those whose result type is written
// out (so they are built and then verified) add "failed to infer returned
// types", the others fail while parsing.

// Checks that matmul rejects an lhs of rank < 2.
func.func @matmul_lhs_rank(%a: tensor<4xf32>, %b: tensor<4x2xf32>) {
  // expected-error @+2 {{lhs must have rank >= 2, got rank 1}}
  // expected-error @+1 {{'nn.matmul' op failed to infer returned types}}
  %0 = nn.matmul %a, %b : tensor<4xf32>, tensor<4x2xf32> -> tensor<2xf32>
  return
}

// -----

// Checks that matmul rejects an rhs whose rank is neither 2 nor the lhs rank.
func.func @matmul_rank_mismatch(%a: tensor<2x3x4xf32>, %b: tensor<2x2x4x2xf32>) {
  // expected-error @+2 {{rhs must have rank 2 or the rank of lhs (3), got rank 4}}
  // expected-error @+1 {{'nn.matmul' op failed to infer returned types}}
  %0 = nn.matmul %a, %b : tensor<2x3x4xf32>, tensor<2x2x4x2xf32> -> tensor<2x3x2xf32>
  return
}

// -----

// Checks that a batched matmul rejects differing batch dimensions.
func.func @matmul_batch(%a: tensor<2x3x4xf32>, %b: tensor<3x4x2xf32>) {
  // expected-error @+2 {{batch dimensions differ: [2] vs [3]}}
  // expected-error @+1 {{'nn.matmul' op failed to infer returned types}}
  %0 = nn.matmul %a, %b : tensor<2x3x4xf32>, tensor<3x4x2xf32> -> tensor<2x3x2xf32>
  return
}

// -----

// Checks that matmul rejects mismatched contraction dimensions.
func.func @matmul_contraction(%a: tensor<3x4xf32>, %b: tensor<5x2xf32>) {
  // expected-error @+2 {{contraction dimensions differ: lhs [3, 4] and rhs [5, 2] contract 4 with 5}}
  // expected-error @+1 {{'nn.matmul' op failed to infer returned types}}
  %0 = nn.matmul %a, %b : tensor<3x4xf32>, tensor<5x2xf32> -> tensor<3x2xf32>
  return
}

// -----

// Checks that transpose_rhs changes which rhs dimension is contracted.
func.func @matmul_contraction_transposed(%a: tensor<3x4xf32>, %b: tensor<4x2xf32>) {
  // expected-error @+2 {{contraction dimensions differ: lhs [3, 4] and rhs [4, 2] contract 4 with 2}}
  // expected-error @+1 {{'nn.matmul' op failed to infer returned types}}
  %0 = nn.matmul %a, %b transpose_rhs : tensor<3x4xf32>, tensor<4x2xf32> -> tensor<3x4xf32>
  return
}

// -----

// Checks that matmul rejects operands of different element types.
func.func @matmul_element_types(%a: tensor<3x4xf32>, %b: tensor<4x2xbf16>) {
  // expected-error @+2 {{operand element types differ: 'f32' vs 'bf16'}}
  // expected-error @+1 {{'nn.matmul' op failed to infer returned types}}
  %0 = nn.matmul %a, %b : tensor<3x4xf32>, tensor<4x2xbf16> -> tensor<3x2xf32>
  return
}

// -----

// Checks that matmul rejects a result type other than the inferred one.
func.func @matmul_result(%a: tensor<3x4xf32>, %b: tensor<4x2xf32>) {
  // expected-error @+2 {{'nn.matmul' op inferred type(s) 'tensor<3x2xf32>' are incompatible with return type(s) of operation 'tensor<3x4xf32>'}}
  // expected-error @+1 {{'nn.matmul' op failed to infer returned types}}
  %0 = nn.matmul %a, %b : tensor<3x4xf32>, tensor<4x2xf32> -> tensor<3x4xf32>
  return
}

// -----

// Checks that matmul rejects dynamic shapes.
func.func @matmul_dynamic(%a: tensor<?x4xf32>, %b: tensor<4x2xf32>) {
  // expected-error @+2 {{lhs must have a static shape}}
  // expected-error @+1 {{'nn.matmul' op failed to infer returned types}}
  %0 = nn.matmul %a, %b : tensor<?x4xf32>, tensor<4x2xf32> -> tensor<?x2xf32>
  return
}

// -----

// Checks that add rejects an rhs whose shape is not a suffix of the lhs shape.
func.func @add_not_suffix(%a: tensor<3x4xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{rhs shape [3] is not a suffix of lhs shape [3, 4] (only trailing broadcast is supported)}}
  %0 = nn.add %a, %b : tensor<3x4xf32>, tensor<3xf32>
  return
}

// -----

// Checks that add does not broadcast the lhs to a higher-rank rhs.
func.func @add_rhs_higher_rank(%a: tensor<4xf32>, %b: tensor<3x4xf32>) {
  // expected-error @+1 {{rhs shape [3, 4] is not a suffix of lhs shape [4] (only trailing broadcast is supported)}}
  %0 = nn.add %a, %b : tensor<4xf32>, tensor<3x4xf32>
  return
}

// -----

// Checks that add rejects operands of different element types.
func.func @add_element_types(%a: tensor<3x4xf32>, %b: tensor<4xbf16>) {
  // expected-error @+1 {{operand element types differ: 'f32' vs 'bf16'}}
  %0 = nn.add %a, %b : tensor<3x4xf32>, tensor<4xbf16>
  return
}

// -----

// Checks that mul rejects size-1 (numpy-style) broadcasting.
func.func @mul_not_suffix(%a: tensor<3x4xf32>, %b: tensor<3x1xf32>) {
  // expected-error @+1 {{rhs shape [3, 1] is not a suffix of lhs shape [3, 4] (only trailing broadcast is supported)}}
  %0 = nn.mul %a, %b : tensor<3x4xf32>, tensor<3x1xf32>
  return
}

// -----

// Checks that mul rejects operands of different element types.
func.func @mul_element_types(%a: tensor<3x4xf32>, %b: tensor<4xf16>) {
  // expected-error @+1 {{operand element types differ: 'f32' vs 'f16'}}
  %0 = nn.mul %a, %b : tensor<3x4xf32>, tensor<4xf16>
  return
}

// -----

// Checks that scale keeps the operand type.
func.func @scale_type(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{'nn.scale' op requires the same type for all operands and results}}
  %0 = "nn.scale"(%x) {factor = 2.0 : f64} : (tensor<2x4xf32>) -> tensor<2x4xbf16>
  return
}

// -----

// Checks that unary ops accept only f32, f16 and bf16 tensors.
func.func @gelu_integer(%x: tensor<2x4xi32>) {
  // expected-error @+1 {{'nn.gelu' op operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<2x4xi32>'}}
  %0 = nn.gelu %x : tensor<2x4xi32>
  return
}

// -----

// Checks that layer_norm rejects a negative eps.
func.func @layer_norm_negative_eps(%x: tensor<2x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{eps must be positive, got -1.000000e-05}}
  %0 = nn.layer_norm %x, %w, %w eps -1.0e-5 : tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>
  return
}

// -----

// Checks that layer_norm rejects a zero eps.
func.func @layer_norm_zero_eps(%x: tensor<2x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{eps must be positive, got 0.000000e+00}}
  %0 = nn.layer_norm %x, %w, %w eps 0.0 : tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>
  return
}

// -----

// Checks that layer_norm rejects a weight that does not match the last dimension.
func.func @layer_norm_weight_shape(%x: tensor<2x8xf32>, %w: tensor<4xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{weight and bias must have shape [8], got [4]}}
  %0 = nn.layer_norm %x, %w, %b eps 1.0e-5 : tensor<2x8xf32>, tensor<4xf32>, tensor<8xf32>
  return
}

// -----

// Checks that layer_norm rejects a bias that is not 1-D.
func.func @layer_norm_bias_rank(%x: tensor<2x8xf32>, %w: tensor<8xf32>, %b: tensor<1x8xf32>) {
  // expected-error @+1 {{weight and bias must have shape [8], got [1, 8]}}
  %0 = nn.layer_norm %x, %w, %b eps 1.0e-5 : tensor<2x8xf32>, tensor<8xf32>, tensor<1x8xf32>
  return
}

// -----

// Checks that layer_norm rejects a weight of another element type.
func.func @layer_norm_weight_type(%x: tensor<2x8xf32>, %w: tensor<8xbf16>) {
  // expected-error @+1 {{weight/bias element type 'bf16' differs from input element type 'f32'}}
  %0 = nn.layer_norm %x, %w, %w eps 1.0e-5 : tensor<2x8xf32>, tensor<8xbf16>, tensor<8xbf16>
  return
}

// -----

// Checks that layer_norm rejects a 0-d input.
func.func @layer_norm_scalar(%x: tensor<f32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{input must have rank >= 1}}
  %0 = nn.layer_norm %x, %w, %w eps 1.0e-5 : tensor<f32>, tensor<8xf32>, tensor<8xf32>
  return
}

// -----

// Checks that rms_norm rejects a negative eps.
func.func @rms_norm_negative_eps(%x: tensor<2x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{eps must be positive, got -1.000000e-06}}
  %0 = nn.rms_norm %x, %w eps -1.0e-6 : tensor<2x8xf32>, tensor<8xf32>
  return
}

// -----

// Checks that rms_norm rejects a zero eps.
func.func @rms_norm_zero_eps(%x: tensor<2x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{eps must be positive, got 0.000000e+00}}
  %0 = nn.rms_norm %x, %w eps 0.0 : tensor<2x8xf32>, tensor<8xf32>
  return
}

// -----

// Checks that rms_norm rejects an infinite eps.
func.func @rms_norm_inf_eps(%x: tensor<2x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{eps must be positive, got INF}}
  %0 = nn.rms_norm %x, %w eps 0x7FF0000000000000 : tensor<2x8xf32>, tensor<8xf32>
  return
}

// -----

// Checks that rms_norm rejects a weight that does not match the last dimension.
func.func @rms_norm_weight_size(%x: tensor<2x8xf32>, %w: tensor<4xf32>) {
  // expected-error @+1 {{weight must have shape [8], got [4]}}
  %0 = nn.rms_norm %x, %w eps 1.0e-5 : tensor<2x8xf32>, tensor<4xf32>
  return
}

// -----

// Checks that rms_norm rejects a weight that is not 1-D.
func.func @rms_norm_weight_rank(%x: tensor<2x8xf32>, %w: tensor<1x8xf32>) {
  // expected-error @+1 {{weight must have shape [8], got [1, 8]}}
  %0 = nn.rms_norm %x, %w eps 1.0e-5 : tensor<2x8xf32>, tensor<1x8xf32>
  return
}

// -----

// Checks that rms_norm rejects a weight of another element type (Hugging
// Face's fp32 weight under a bf16 input needs an explicit nn.cast).
func.func @rms_norm_weight_type(%x: tensor<2x8xbf16>, %w: tensor<8xf32>) {
  // expected-error @+1 {{weight element type 'f32' differs from input element type 'bf16'}}
  %0 = nn.rms_norm %x, %w eps 1.0e-5 : tensor<2x8xbf16>, tensor<8xf32>
  return
}

// -----

// Checks that rms_norm rejects a 0-d input.
func.func @rms_norm_scalar(%x: tensor<f32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{input must have rank >= 1}}
  %0 = nn.rms_norm %x, %w eps 1.0e-5 : tensor<f32>, tensor<8xf32>
  return
}

// -----

// Checks that rms_norm's result has the input's type.
func.func @rms_norm_result_type(%x: tensor<2x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+2 {{'nn.rms_norm' op inferred type(s) 'tensor<2x8xf32>' are incompatible with return type(s) of operation 'tensor<2x8xbf16>'}}
  // expected-error @+1 {{'nn.rms_norm' op failed to infer returned types}}
  %0 = "nn.rms_norm"(%x, %w) {eps = 1.0e-5 : f64} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xbf16>
  return
}

// -----

// Checks that rms_norm accepts only f32, f16 and bf16 tensors.
func.func @rms_norm_integer(%x: tensor<2x8xi32>, %w: tensor<8xi32>) {
  // expected-error @+1 {{'nn.rms_norm' op operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<2x8xi32>'}}
  %0 = nn.rms_norm %x, %w eps 1.0e-5 : tensor<2x8xi32>, tensor<8xi32>
  return
}

// -----

// Checks that attention rejects operands that are not rank 4.
func.func @attention_rank(%q: tensor<2x4x8xf32>) {
  // expected-error @+1 {{'nn.attention' op query must have rank 4 [batch, heads, seq, head_dim], got rank 3}}
  %0 = nn.attention %q, %q, %q causal : tensor<2x4x8xf32>
  return
}

// -----

// Checks that attention rejects a key and a value of different types.
func.func @attention_types(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x4xf32>) {
  // expected-error @+1 {{'nn.attention' op failed to verify that all of {key, value} have same type}}
  %0 = "nn.attention"(%q, %k, %q) <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 0>}> : (tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return
}

// -----

// Checks that attention rejects a value with other heads than the key.
func.func @attention_kv_heads(%q: tensor<1x4x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x1x4x8xf32>) {
  // expected-error @+1 {{'nn.attention' op failed to verify that all of {key, value} have same type}}
  %0 = "nn.attention"(%q, %k, %v) <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 0>}> : (tensor<1x4x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x4x4x8xf32>
  return
}

// -----

// Checks that attention rejects a result of other than the query's type.
func.func @attention_result(%q: tensor<1x4x4x8xf32>, %k: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{'nn.attention' op failed to verify that all of {query, result} have same type}}
  %0 = "nn.attention"(%q, %k, %k) <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 0>}> : (tensor<1x4x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return
}

// -----

// Checks that attention rejects key/value heads that do not divide the
// query heads.
func.func @attention_group(%q: tensor<1x4x4x8xf32>, %k: tensor<1x3x4x8xf32>) {
  // expected-error @+1 {{'nn.attention' op key and value heads 3 must divide the query heads 4}}
  %0 = nn.attention %q, %k, %k causal : tensor<1x4x4x8xf32>, tensor<1x3x4x8xf32>
  return
}

// -----

// Checks that attention rejects more key/value heads than query heads.
func.func @attention_more_kv_heads(%q: tensor<1x2x4x8xf32>, %k: tensor<1x4x4x8xf32>) {
  // expected-error @+1 {{'nn.attention' op key and value heads 4 must divide the query heads 2}}
  %0 = nn.attention %q, %k, %k : tensor<1x2x4x8xf32>, tensor<1x4x4x8xf32>
  return
}

// -----

// Checks that attention rejects a key of another batch.
func.func @attention_batch(%q: tensor<2x4x4x8xf32>, %k: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{'nn.attention' op key and value batch 1 differs from the query's 2 (key [1, 2, 4, 8], query [2, 4, 4, 8])}}
  %0 = nn.attention %q, %k, %k : tensor<2x4x4x8xf32>, tensor<1x2x4x8xf32>
  return
}

// -----

// Checks that attention rejects a key of another sequence length.
func.func @attention_seq(%q: tensor<1x4x4x8xf32>, %k: tensor<1x2x6x8xf32>) {
  // expected-error @+1 {{'nn.attention' op key and value seq 6 differs from the query's 4 (key [1, 2, 6, 8], query [1, 4, 4, 8])}}
  %0 = nn.attention %q, %k, %k causal : tensor<1x4x4x8xf32>, tensor<1x2x6x8xf32>
  return
}

// -----

// Checks that attention rejects a key of another head_dim.
func.func @attention_head_dim(%q: tensor<1x4x4x8xf32>, %k: tensor<1x2x4x16xf32>) {
  // expected-error @+1 {{'nn.attention' op key and value head_dim 16 differs from the query's 8 (key [1, 2, 4, 16], query [1, 4, 4, 8])}}
  %0 = nn.attention %q, %k, %k : tensor<1x4x4x8xf32>, tensor<1x2x4x16xf32>
  return
}

// -----

// Checks that attention rejects a key of another element type.
func.func @attention_element_type(%q: tensor<1x4x4x8xf32>, %k: tensor<1x2x4x8xbf16>) {
  // expected-error @+1 {{'nn.attention' op key and value element type 'bf16' differs from the query's 'f32'}}
  %0 = nn.attention %q, %k, %k : tensor<1x4x4x8xf32>, tensor<1x2x4x8xbf16>
  return
}

// -----

// Checks that attention rejects a key that is not rank 4.
func.func @attention_key_rank(%q: tensor<1x4x4x8xf32>, %k: tensor<2x4x8xf32>) {
  // expected-error @+1 {{'nn.attention' op key and value must have rank 4 [batch, kv_heads, seq, head_dim], got rank 3}}
  %0 = nn.attention %q, %k, %k : tensor<1x4x4x8xf32>, tensor<2x4x8xf32>
  return
}

// -----

// Checks that attention rejects a negative scale.
func.func @attention_negative_scale(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{'nn.attention' op scale must be positive, got -5.000000e-01}}
  %0 = nn.attention %q, %q, %q scale -0.5 : tensor<1x2x4x8xf32>
  return
}

// -----

// Checks that attention rejects a zero scale.
func.func @attention_zero_scale(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{'nn.attention' op scale must be positive, got 0.000000e+00}}
  %0 = nn.attention %q, %q, %q causal scale 0.0 : tensor<1x2x4x8xf32>
  return
}

// -----

// Checks that embedding rejects a table that is not [vocab, dim].
func.func @embedding_table_rank(%t: tensor<16xf32>, %ids: tensor<2x4xi32>) {
  // expected-error @+2 {{table must have rank 2 [vocab, dim], got rank 1}}
  // expected-error @+1 {{'nn.embedding' op failed to infer returned types}}
  %0 = nn.embedding %t[%ids] : tensor<16xf32>, tensor<2x4xi32> -> tensor<2x4xf32>
  return
}

// -----

// Checks that embedding rejects a padding_idx among the vocabulary's padding rows.
func.func @embedding_padding_idx(%t: tensor<16x8xf32>, %ids: tensor<2x4xi32>) {
  // expected-error @+1 {{'nn.embedding' op padding_idx must lie in [0, 10), the rows ids select; got 10}}
  %0 = nn.embedding %t[%ids] rows 10 padding_idx 10 : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
  return
}

// -----

// Checks that embedding_grad rejects a negative padding_idx.
func.func @embedding_grad_padding_idx(%dy: tensor<2x4x8xf32>, %ids: tensor<2x4xi32>) {
  // expected-error @+1 {{'nn.embedding_grad' op padding_idx must lie in [0, 16), the rows ids select; got -1}}
  %0 = nn.embedding_grad %dy[%ids] padding_idx -1 : tensor<2x4x8xf32>, tensor<2x4xi32> -> tensor<16x8xf32>
  return
}

// -----

// Checks that embedding rejects a result other than ids shape + [dim].
func.func @embedding_result(%t: tensor<16x8xf32>, %ids: tensor<2x4xi32>) {
  // expected-error @+2 {{'nn.embedding' op inferred type(s) 'tensor<2x4x8xf32>' are incompatible with return type(s) of operation 'tensor<2x4x16xf32>'}}
  // expected-error @+1 {{'nn.embedding' op failed to infer returned types}}
  %0 = nn.embedding %t[%ids] : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x16xf32>
  return
}

// -----

// Checks that embedding ids must be integers.
func.func @embedding_float_ids(%t: tensor<16x8xf32>, %ids: tensor<2x4xf32>) {
  // expected-error @+1 {{'nn.embedding' op operand #1 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<2x4xf32>'}}
  %0 = nn.embedding %t[%ids] : tensor<16x8xf32>, tensor<2x4xf32> -> tensor<2x4x8xf32>
  return
}

// -----

// Checks that reshape preserves the element count.
func.func @reshape_count(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{'nn.reshape' op element count must be preserved: [2, 4] has 8 elements, [9] has 9}}
  %0 = nn.reshape %x : tensor<2x4xf32> -> tensor<9xf32>
  return
}

// -----

// Checks that reshape preserves the element type.
func.func @reshape_element_type(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{'nn.reshape' op element type must be preserved, got 'f32' -> 'bf16'}}
  %0 = nn.reshape %x : tensor<2x4xf32> -> tensor<8xbf16>
  return
}

// -----

// Checks that reshape needs static shapes.
func.func @reshape_dynamic(%x: tensor<?x4xf32>) {
  // expected-error @+1 {{'nn.reshape' op shapes must be static}}
  %0 = nn.reshape %x : tensor<?x4xf32> -> tensor<8xf32>
  return
}

// -----

// Checks that transpose rejects a repeated dimension.
func.func @transpose_repeated(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{permutation [0, 0, 1] is not a permutation of [0, 3)}}
  // expected-error @+1 {{'nn.transpose' op failed to infer returned types}}
  %0 = nn.transpose %x [0, 0, 1] : tensor<2x3x4xf32> -> tensor<2x2x3xf32>
  return
}

// -----

// Checks that transpose rejects an out-of-range dimension.
func.func @transpose_out_of_range(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{permutation [0, 1, 3] is not a permutation of [0, 3)}}
  // expected-error @+1 {{'nn.transpose' op failed to infer returned types}}
  %0 = nn.transpose %x [0, 1, 3] : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  return
}

// -----

// Checks that transpose rejects a negative dimension.
func.func @transpose_negative(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{permutation [0, -1, 1] is not a permutation of [0, 3)}}
  // expected-error @+1 {{'nn.transpose' op failed to infer returned types}}
  %0 = nn.transpose %x [0, -1, 1] : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  return
}

// -----

// Checks that transpose rejects a permutation of the wrong length.
func.func @transpose_length(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{permutation has 2 entries for an input of rank 3}}
  // expected-error @+1 {{'nn.transpose' op failed to infer returned types}}
  %0 = nn.transpose %x [1, 0] : tensor<2x3x4xf32> -> tensor<3x2x4xf32>
  return
}

// -----

// Checks that transpose rejects a result that is not the permuted input.
func.func @transpose_result(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{'nn.transpose' op inferred type(s) 'tensor<3x2x4xf32>' are incompatible with return type(s) of operation 'tensor<2x3x4xf32>'}}
  // expected-error @+1 {{'nn.transpose' op failed to infer returned types}}
  %0 = nn.transpose %x [1, 0, 2] : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  return
}

// -----

// Checks that split rejects parts that do not add up to the input's size.
func.func @split_indivisible(%x: tensor<2x4x10xf32>) {
  // expected-error @+1 {{'nn.split' op results add up to 9 along axis 2, the input has 10}}
  %0:3 = nn.split %x axis 2 : tensor<2x4x10xf32> -> tensor<2x4x3xf32>, tensor<2x4x3xf32>, tensor<2x4x3xf32>
  return
}

// -----

// Checks that split rejects an axis out of range.
func.func @split_axis(%x: tensor<2x4x12xf32>) {
  // expected-error @+1 {{'nn.split' op axis 3 is out of bounds [0, 3)}}
  %0:3 = nn.split %x axis 3 : tensor<2x4x12xf32> -> tensor<2x4x4xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>
  return
}

// -----

// Checks that split rejects a result that differs from the input off the axis.
func.func @split_result_types(%x: tensor<2x4x12xf32>) {
  // expected-error @+1 {{'nn.split' op each result must be the input's type with a positive size along axis 2, got 'tensor<2x5x4xf32>'}}
  %0:3 = nn.split %x axis 2 : tensor<2x4x12xf32> -> tensor<2x4x4xf32>, tensor<2x4x4xf32>, tensor<2x5x4xf32>
  return
}

// -----

// Checks that split rejects an empty part.
func.func @split_empty_part(%x: tensor<2x4x12xf32>) {
  // expected-error @+1 {{'nn.split' op each result must be the input's type with a positive size along axis 2, got 'tensor<2x4x0xf32>'}}
  %0:2 = nn.split %x axis 2 : tensor<2x4x12xf32> -> tensor<2x4x12xf32>, tensor<2x4x0xf32>
  return
}

// -----

// Checks that split needs at least one result.
func.func @split_no_results(%x: tensor<2x4x12xf32>) {
  // expected-error @+1 {{'nn.split' op needs at least one result}}
  "nn.split"(%x) {axis = 2 : i64} : (tensor<2x4x12xf32>) -> ()
  return
}

// -----

// Checks that split rejects a dynamic split dimension.
func.func @split_dynamic(%x: tensor<2x?xf32>) {
  // expected-error @+1 {{'nn.split' op dimension 1 must be static to be split}}
  %0:2 = nn.split %x axis 1 : tensor<2x?xf32> -> tensor<2x?xf32>, tensor<2x?xf32>
  return
}

// -----

// Checks that concat rejects inputs that differ outside the axis.
func.func @concat_dims(%a: tensor<2x4xf32>, %b: tensor<3x4xf32>) {
  // expected-error @+2 {{inputs differ in dimension 0 which is not the concatenation axis}}
  // expected-error @+1 {{'nn.concat' op failed to infer returned types}}
  %0 = nn.concat %a, %b axis 1 : tensor<2x4xf32>, tensor<3x4xf32> -> tensor<2x8xf32>
  return
}

// -----

// Checks that concat rejects an axis out of range.
func.func @concat_axis(%a: tensor<2x4xf32>, %b: tensor<2x4xf32>) {
  // expected-error @+2 {{axis 2 is out of bounds [0, 2)}}
  // expected-error @+1 {{'nn.concat' op failed to infer returned types}}
  %0 = nn.concat %a, %b axis 2 : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x8xf32>
  return
}

// -----

// Checks that concat rejects inputs of different ranks.
func.func @concat_rank(%a: tensor<2x4xf32>, %b: tensor<2x4x1xf32>) {
  // expected-error @+2 {{inputs must have the same rank and element type}}
  // expected-error @+1 {{'nn.concat' op failed to infer returned types}}
  %0 = nn.concat %a, %b axis 1 : tensor<2x4xf32>, tensor<2x4x1xf32> -> tensor<2x8xf32>
  return
}

// -----

// Checks that concat rejects inputs of different element types.
func.func @concat_element_type(%a: tensor<2x4xf32>, %b: tensor<2x4xbf16>) {
  // expected-error @+2 {{inputs must have the same rank and element type}}
  // expected-error @+1 {{'nn.concat' op failed to infer returned types}}
  %0 = nn.concat %a, %b axis 1 : tensor<2x4xf32>, tensor<2x4xbf16> -> tensor<2x8xf32>
  return
}

// -----

// Checks that concat needs at least one input.
func.func @concat_no_inputs() {
  // expected-error @+2 {{needs at least one input}}
  // expected-error @+1 {{'nn.concat' op failed to infer returned types}}
  %0 = "nn.concat"() {axis = 0 : i64} : () -> tensor<2xf32>
  return
}

// -----

// Checks that concat rejects a result other than the concatenation.
func.func @concat_result(%a: tensor<2x4xf32>, %b: tensor<2x4xf32>) {
  // expected-error @+2 {{'nn.concat' op inferred type(s) 'tensor<2x8xf32>' are incompatible with return type(s) of operation 'tensor<4x4xf32>'}}
  // expected-error @+1 {{'nn.concat' op failed to infer returned types}}
  %0 = nn.concat %a, %b axis 1 : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
  return
}

// -----

// Checks that an ignore_index the i32 labels cannot hold is rejected.
func.func @sce_ignore_index_width(%l: tensor<4x10xf32>, %y: tensor<4xi32>) {
  // expected-error @+1 {{'nn.softmax_cross_entropy' op ignore_index 2147483648 does not fit the labels' i32}}
  %0 = nn.softmax_cross_entropy %l, %y ignore_index 2147483648 : tensor<4x10xf32>, tensor<4xi32> -> tensor<f32>
  return
}

// -----

// Checks the same of the gradient, below the i32 range.
func.func @sce_grad_ignore_index_width(%l: tensor<4x10xf32>, %y: tensor<4xi32>, %d: tensor<f32>) {
  // expected-error @+1 {{'nn.softmax_cross_entropy_grad' op ignore_index -2147483649 does not fit the labels' i32}}
  %0 = nn.softmax_cross_entropy_grad %l, %y, %d ignore_index -2147483649 : tensor<4x10xf32>, tensor<4xi32>, tensor<f32>
  return
}

// -----

// Checks that softmax_cross_entropy rejects labels of another batch shape.
func.func @sce_labels_shape(%l: tensor<4x10xf32>, %y: tensor<5xi64>) {
  // expected-error @+2 {{labels shape [5] must be the logits shape without its class dimension, [4]}}
  // expected-error @+1 {{'nn.softmax_cross_entropy' op failed to infer returned types}}
  %0 = nn.softmax_cross_entropy %l, %y : tensor<4x10xf32>, tensor<5xi64> -> tensor<f32>
  return
}

// -----

// Checks that softmax_cross_entropy rejects labels that keep the class dimension.
func.func @sce_labels_rank(%l: tensor<4x10xf32>, %y: tensor<4x10xi64>) {
  // expected-error @+2 {{labels shape [4, 10] must be the logits shape without its class dimension, [4]}}
  // expected-error @+1 {{'nn.softmax_cross_entropy' op failed to infer returned types}}
  %0 = nn.softmax_cross_entropy %l, %y : tensor<4x10xf32>, tensor<4x10xi64> -> tensor<f32>
  return
}

// -----

// Checks that softmax_cross_entropy rejects 0-d logits.
func.func @sce_scalar_logits(%l: tensor<f32>, %y: tensor<i64>) {
  // expected-error @+2 {{logits must have rank >= 1}}
  // expected-error @+1 {{'nn.softmax_cross_entropy' op failed to infer returned types}}
  %0 = nn.softmax_cross_entropy %l, %y : tensor<f32>, tensor<i64> -> tensor<f32>
  return
}

// -----

// Checks that dynamic label dimensions do not match static logits (printed as ?).
func.func @sce_dynamic_labels(%l: tensor<2x4xf32>, %y: tensor<?xi32>) {
  // expected-error @+2 {{labels shape [?] must be the logits shape without its class dimension, [2]}}
  // expected-error @+1 {{'nn.softmax_cross_entropy' op failed to infer returned types}}
  %0 = nn.softmax_cross_entropy %l, %y : tensor<2x4xf32>, tensor<?xi32> -> tensor<f32>
  return
}

// -----

// Checks that the loss is a scalar f32.
func.func @sce_result(%l: tensor<4x10xf32>, %y: tensor<4xi64>) {
  // expected-error @+1 {{'nn.softmax_cross_entropy' op result #0 must be 0D tensor of 32-bit float values, but got 'tensor<4xf32>'}}
  %0 = nn.softmax_cross_entropy %l, %y : tensor<4x10xf32>, tensor<4xi64> -> tensor<4xf32>
  return
}

// -----

// Checks that cast preserves the shape.
func.func @cast_shape(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{'nn.cast' op shape must be preserved: [2, 4] vs [8]}}
  %0 = nn.cast %x : tensor<2x4xf32> to tensor<8xbf16>
  return
}

// -----

// Checks that fill rejects an infinite value.
func.func @fill_inf() {
  // expected-error @+1 {{'nn.fill' op fill value must be finite, got INF}}
  %0 = nn.fill 0x7FF0000000000000 : tensor<2xf32>
  return
}

// -----

// Checks that fill rejects NaN.
func.func @fill_nan() {
  // expected-error @+1 {{'nn.fill' op fill value must be finite, got nan}}
  %0 = nn.fill 0x7FF8000000000000 : tensor<2xf32>
  return
}

// -----

// Checks that fill needs a static shape.
func.func @fill_dynamic() {
  // expected-error @+1 {{'nn.fill' op result must have a static shape}}
  %0 = nn.fill 1.0 : tensor<?xf32>
  return
}

// -----

// Checks that reduce_sum only reduces leading dimensions.
func.func @reduce_sum_not_suffix(%x: tensor<2x4x8xf32>) {
  // expected-error @+1 {{'nn.reduce_sum' op result shape [4] must be a suffix of input shape [2, 4, 8]}}
  %0 = nn.reduce_sum %x : tensor<2x4x8xf32> -> tensor<4xf32>
  return
}

// -----

// Checks that reduce_sum keeps the element type.
func.func @reduce_sum_element_type(%x: tensor<2x4x8xf32>) {
  // expected-error @+1 {{'nn.reduce_sum' op element types differ: 'f32' vs 'bf16'}}
  %0 = nn.reduce_sum %x : tensor<2x4x8xf32> -> tensor<8xbf16>
  return
}

// -----

// Checks that reduce_sum_grad's gradient has the shape of a sum.
func.func @reduce_sum_grad_not_suffix(%x: tensor<2x4x8xf32>, %dy: tensor<4xf32>) {
  // expected-error @+1 {{'nn.reduce_sum_grad' op gradient shape [4] must be a suffix of input shape [2, 4, 8]}}
  %0 = nn.reduce_sum_grad %x, %dy : tensor<2x4x8xf32>, tensor<4xf32>
  return
}

// -----

// Checks that gelu_erf keeps its operand's type.
func.func @gelu_erf_result_type(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{'nn.gelu_erf' op requires the same type for all operands and results}}
  %0 = "nn.gelu_erf"(%x) : (tensor<2x4xf32>) -> tensor<2x4xf16>
  return
}

// -----

// Checks that gelu_erf_grad rejects a gradient of another shape.
func.func @gelu_erf_grad_types(%x: tensor<2x4xf32>, %dy: tensor<2x2xf32>) {
  // expected-error @+1 {{'nn.gelu_erf_grad' op failed to verify that all of {forward, result_grad, result} have same type}}
  %0 = "nn.gelu_erf_grad"(%x, %dy) : (tensor<2x4xf32>, tensor<2x2xf32>) -> tensor<2x4xf32>
  return
}

// -----

// Checks that silu keeps its operand's type.
func.func @silu_result_type(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{'nn.silu' op requires the same type for all operands and results}}
  %0 = "nn.silu"(%x) : (tensor<2x4xf32>) -> tensor<2x4xbf16>
  return
}

// -----

// Checks that silu_grad rejects a gradient of another shape.
func.func @silu_grad_types(%x: tensor<2x4xf32>, %dy: tensor<4x2xf32>) {
  // expected-error @+1 {{'nn.silu_grad' op failed to verify that all of {forward, result_grad, result} have same type}}
  %0 = "nn.silu_grad"(%x, %dy) : (tensor<2x4xf32>, tensor<4x2xf32>) -> tensor<2x4xf32>
  return
}

// -----

// Checks that tanh keeps its operand's type.
func.func @tanh_result_type(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{'nn.tanh' op requires the same type for all operands and results}}
  %0 = "nn.tanh"(%x) : (tensor<2x4xf32>) -> tensor<4x2xf32>
  return
}

// -----

// Checks that tanh_grad rejects a gradient of another element type.
func.func @tanh_grad_types(%y: tensor<2x4xf32>, %dy: tensor<2x4xbf16>) {
  // expected-error @+1 {{'nn.tanh_grad' op failed to verify that all of {forward, result_grad, result} have same type}}
  %0 = "nn.tanh_grad"(%y, %dy) : (tensor<2x4xf32>, tensor<2x4xbf16>) -> tensor<2x4xf32>
  return
}

// -----

// Checks that softplus divides by a positive beta.
func.func @softplus_beta(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{'nn.softplus' op beta must be positive and finite, got 0}}
  %0 = nn.softplus %x beta 0.0 threshold 20.0 : tensor<2x4xf32>
  return
}

// -----

// Checks softplus_grad's beta as the forward's.
func.func @softplus_grad_beta(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{'nn.softplus_grad' op beta must be positive and finite, got -1}}
  %0 = nn.softplus_grad %x, %x beta -1.0 threshold 20.0 : tensor<2x4xf32>
  return
}

// -----

// Checks that softplus's threshold is finite.
func.func @softplus_threshold(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{'nn.softplus' op threshold must be finite, got INF}}
  %0 = nn.softplus %x beta 1.0 threshold 0x7FF0000000000000 : tensor<2x4xf32>
  return
}

// -----

// Checks that logsumexp reduces a last dimension.
func.func @logsumexp_rank(%x: tensor<f32>) {
  // expected-error @+2 {{input must have rank >= 1 (the reduction is over the last dimension)}}
  // expected-error @+1 {{'nn.logsumexp' op failed to infer returned types}}
  %0 = nn.logsumexp %x : tensor<f32> -> tensor<f32>
  return
}

// -----

// Checks that reduce_max's result drops the last dimension.
func.func @reduce_max_result(%x: tensor<2x4xf32>) {
  // expected-error @+2 {{'nn.reduce_max' op inferred type(s) 'tensor<2xf32>' are incompatible with return type(s) of operation 'tensor<4xf32>'}}
  // expected-error @+1 {{'nn.reduce_max' op failed to infer returned types}}
  %0 = nn.reduce_max %x : tensor<2x4xf32> -> tensor<4xf32>
  return
}

// -----

// Checks that reduce_max refuses an empty last dimension (torch.amax does).
func.func @reduce_max_empty(%x: tensor<2x0xf32>) {
  // expected-error @+2 {{the last dimension must not be empty}}
  // expected-error @+1 {{'nn.reduce_max' op failed to infer returned types}}
  %0 = nn.reduce_max %x : tensor<2x0xf32> -> tensor<2xf32>
  return
}

// -----

// Checks logsumexp_grad's forward result against its input.
func.func @logsumexp_grad_output(%x: tensor<2x4xf32>, %y: tensor<4xf32>) {
  // expected-error @+1 {{'nn.logsumexp_grad' op output type 'tensor<4xf32>' must be the input's without its last dimension, 'tensor<2xf32>'}}
  %0 = nn.logsumexp_grad %x, %y, %y : tensor<2x4xf32> -> tensor<4xf32>
  return
}

// -----

// Checks that reduce_max_grad's gradient has its forward result's type.
func.func @reduce_max_grad_types(%x: tensor<2x4xf32>, %y: tensor<2xf32>, %dy: tensor<2xbf16>) {
  // expected-error @+1 {{'nn.reduce_max_grad' op failed to verify that all of {output, output_grad} have same type}}
  %0 = "nn.reduce_max_grad"(%x, %y, %dy) : (tensor<2x4xf32>, tensor<2xf32>, tensor<2xbf16>) -> tensor<2x4xf32>
  return
}

// -----

// Checks that swiglu takes gate and up of one type.
func.func @swiglu_operand_types(%g: tensor<2x4xf32>, %u: tensor<2x4xbf16>) {
  // expected-error @+1 {{'nn.swiglu' op requires the same type for all operands and results}}
  %0 = "nn.swiglu"(%g, %u) : (tensor<2x4xf32>, tensor<2x4xbf16>) -> tensor<2x4xf32>
  return
}

// -----

// Checks that swiglu's custom form names one type for both operands.
// expected-note @+1 {{prior use here}}
func.func @swiglu_operand_shapes(%g: tensor<2x4xf32>, %u: tensor<4x2xf32>) {
  // expected-error @+1 {{use of value '%u' expects different type than prior uses: 'tensor<2x4xf32>' vs 'tensor<4x2xf32>'}}
  %0 = nn.swiglu %g, %u : tensor<2x4xf32>
  return
}

// -----

// Checks that swiglu_grad rejects a gradient of another shape.
func.func @swiglu_grad_types(%g: tensor<2x4xf32>, %dy: tensor<4x2xf32>) {
  // expected-error @+1 {{'nn.swiglu_grad' op failed to verify that all of {gate, up, result_grad, gate_grad, up_grad} have same type}}
  %0:2 = "nn.swiglu_grad"(%g, %g, %dy) : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<4x2xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>)
  return
}

// -----

// Checks that rope rejects an odd head_dim.
func.func @rope_odd_head_dim(%x: tensor<1x2x4x7xf32>) {
  // expected-error @+1 {{'nn.rope' op head_dim must be even (its halves are rotated in pairs), got 7}}
  %0 = nn.rope %x theta 1.000000e+04 : tensor<1x2x4x7xf32>
  return
}

// -----

// Checks that interleaved rope rejects an odd head_dim, naming its pairs.
func.func @rope_interleaved_odd_head_dim(%x: tensor<1x2x4x5xf32>) {
  // expected-error @+1 {{'nn.rope' op head_dim must be even (its neighbours are rotated in pairs), got 5}}
  %0 = nn.rope %x theta 1.000000e+04 interleaved : tensor<1x2x4x5xf32>
  return
}

// -----

// Checks that rope's positions are one per row of each batch entry.
func.func @rope_positions_shape(%x: tensor<2x4x8x4xf32>, %pos: tensor<2x6xi64>) {
  // expected-error @+1 {{'nn.rope' op positions [2, 6] must be [batch, seq] of the input [2, 4, 8, 4]}}
  %0 = nn.rope %x positions(%pos : tensor<2x6xi64>) theta 1.000000e+04 : tensor<2x4x8x4xf32>
  return
}

// -----

// Checks that rope's positions are integers.
func.func @rope_positions_type(%x: tensor<2x4x8x4xf32>, %pos: tensor<2x8xf32>) {
  // expected-error @+1 {{operand #1 must be 2D tensor of 32-bit signless integer or 64-bit signless integer values}}
  %0 = nn.rope %x positions(%pos : tensor<2x8xf32>) theta 1.000000e+04 : tensor<2x4x8x4xf32>
  return
}

// -----

// Checks that rope rejects a tensor without the [batch, heads, seq, head_dim] rank.
func.func @rope_rank(%x: tensor<2x4x8xf32>) {
  // expected-error @+1 {{'nn.rope' op input must have rank 4 [batch, heads, seq, head_dim], got rank 3}}
  %0 = nn.rope %x theta 1.000000e+04 : tensor<2x4x8xf32>
  return
}

// -----

// Checks that rope rejects a zero base.
func.func @rope_theta_zero(%x: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{'nn.rope' op theta must be positive and finite, got 0}}
  %0 = nn.rope %x theta 0.0 : tensor<1x2x4x8xf32>
  return
}

// -----

// Checks that rope rejects a negative base, also on its inverse.
func.func @rope_theta_negative(%x: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{'nn.rope' op theta must be positive and finite, got -1.000000e+04}}
  %0 = nn.rope %x theta -1.000000e+04 inverse : tensor<1x2x4x8xf32>
  return
}

// -----

// Checks that rope needs theta or a table of frequencies.
func.func @rope_no_frequencies(%x: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{'nn.rope' op needs exactly one of theta and inv_freq}}
  %0 = nn.rope %x : tensor<1x2x4x8xf32>
  return
}

// -----

// Checks that rope rejects both theta and a table.
func.func @rope_theta_and_table(%x: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{'nn.rope' op needs exactly one of theta and inv_freq}}
  %0 = nn.rope %x theta 1.000000e+04 inv_freq [1.0 : f32, 0.5 : f32, 0.25 : f32, 0.125 : f32] : tensor<1x2x4x8xf32>
  return
}

// -----

// Checks that rope's table holds one frequency per rotated pair.
func.func @rope_table_length(%x: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{'nn.rope' op inv_freq must hold one value per rotated pair (4), got 3}}
  %0 = nn.rope %x inv_freq [1.0 : f32, 0.5 : f32, 0.25 : f32] : tensor<1x2x4x8xf32>
  return
}

// -----

// Checks that rope's table is finite.
func.func @rope_table_not_finite(%x: tensor<1x2x4x4xf32>) {
  // expected-error @+1 {{'nn.rope' op inv_freq[1] must be finite, got INF}}
  %0 = nn.rope %x inv_freq [1.0 : f32, 0x7F800000 : f32] : tensor<1x2x4x4xf32>
  return
}

// -----

// Checks that rope's scale of cos and sin is positive.
func.func @rope_scale_zero(%x: tensor<1x2x4x4xf32>) {
  // expected-error @+1 {{'nn.rope' op scale must be positive and finite, got 0}}
  %0 = nn.rope %x inv_freq [1.0 : f32, 0.5 : f32] scale 0.0 : tensor<1x2x4x4xf32>
  return
}

// -----

// Checks that rope rejects a dynamic head_dim.
func.func @rope_dynamic_head_dim(%x: tensor<1x2x4x?xf32>) {
  // expected-error @+1 {{'nn.rope' op head_dim must be static}}
  %0 = nn.rope %x theta 1.000000e+04 : tensor<1x2x4x?xf32>
  return
}

// -----

// Checks that rope keeps its operand's type.
func.func @rope_result_type(%x: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{'nn.rope' op failed to verify that all of {input, result} have same type}}
  %0 = "nn.rope"(%x) {theta = 1.0e4 : f64} : (tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xbf16>
  return
}

// -----

// Checks that gelu_grad rejects a gradient of another element type.
func.func @gelu_grad_types(%x: tensor<2x4xf32>, %dy: tensor<2x4xbf16>) {
  // expected-error @+1 {{'nn.gelu_grad' op failed to verify that all of {forward, result_grad, result} have same type}}
  %0 = "nn.gelu_grad"(%x, %dy) : (tensor<2x4xf32>, tensor<2x4xbf16>) -> tensor<2x4xf32>
  return
}

// -----

// Checks that relu_grad rejects a result of another shape.
func.func @relu_grad_result(%x: tensor<2x4xf32>, %dy: tensor<2x4xf32>) {
  // expected-error @+1 {{'nn.relu_grad' op failed to verify that all of {forward, result_grad, result} have same type}}
  %0 = "nn.relu_grad"(%x, %dy) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x2xf32>
  return
}

// -----

// Checks that softmax_grad rejects a gradient of another shape.
func.func @softmax_grad_types(%x: tensor<2x4xf32>, %dy: tensor<4x2xf32>) {
  // expected-error @+1 {{'nn.softmax_grad' op failed to verify that all of {forward, result_grad, result} have same type}}
  %0 = "nn.softmax_grad"(%x, %dy) : (tensor<2x4xf32>, tensor<4x2xf32>) -> tensor<2x4xf32>
  return
}

// -----

// Checks that embedding_grad produces a [vocab, dim] table gradient.
func.func @embedding_grad_rank(%dy: tensor<2x4x8xf32>, %ids: tensor<2x4xi32>) {
  // expected-error @+1 {{'nn.embedding_grad' op result must have rank 2 [vocab, dim], got rank 1}}
  %0 = nn.embedding_grad %dy[%ids] : tensor<2x4x8xf32>, tensor<2x4xi32> -> tensor<128xf32>
  return
}

// -----

// Checks that embedding_grad rejects a table dimension that differs from the gradient's.
func.func @embedding_grad_shape(%dy: tensor<2x4x8xf32>, %ids: tensor<2x4xi32>) {
  // expected-error @+1 {{'nn.embedding_grad' op result_grad shape [2, 4, 8] must be ids shape + [dim] = [2, 4, 4]}}
  %0 = nn.embedding_grad %dy[%ids] : tensor<2x4x8xf32>, tensor<2x4xi32> -> tensor<16x4xf32>
  return
}

// -----

// Checks that embedding_grad keeps the element type.
func.func @embedding_grad_element_type(%dy: tensor<2x4x8xf32>, %ids: tensor<2x4xi32>) {
  // expected-error @+1 {{'nn.embedding_grad' op element types of result_grad and result differ: 'f32' vs 'bf16'}}
  %0 = nn.embedding_grad %dy[%ids] : tensor<2x4x8xf32>, tensor<2x4xi32> -> tensor<16x8xbf16>
  return
}

// -----

// Checks that softmax_cross_entropy_grad rejects labels of another batch shape.
func.func @sce_grad_labels(%l: tensor<4x10xf32>, %y: tensor<5xi64>, %s: tensor<f32>) {
  // expected-error @+1 {{'nn.softmax_cross_entropy_grad' op labels shape [5] must be the logits shape without its class dimension, [4]}}
  %0 = nn.softmax_cross_entropy_grad %l, %y, %s : tensor<4x10xf32>, tensor<5xi64>, tensor<f32>
  return
}

// -----

// Checks that softmax_cross_entropy_grad rejects 0-d logits.
func.func @sce_grad_scalar_logits(%l: tensor<f32>, %y: tensor<i64>, %s: tensor<f32>) {
  // expected-error @+1 {{'nn.softmax_cross_entropy_grad' op logits must have rank >= 1}}
  %0 = nn.softmax_cross_entropy_grad %l, %y, %s : tensor<f32>, tensor<i64>, tensor<f32>
  return
}

// -----

// Checks that softmax_cross_entropy_grad returns the logits type.
func.func @sce_grad_result(%l: tensor<4x10xf32>, %y: tensor<4xi64>, %s: tensor<f32>) {
  // expected-error @+1 {{'nn.softmax_cross_entropy_grad' op failed to verify that all of {logits, result} have same type}}
  %0 = "nn.softmax_cross_entropy_grad"(%l, %y, %s) : (tensor<4x10xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x10xbf16>
  return
}

// -----

// Checks that softmax_cross_entropy_grad takes a scalar f32 loss gradient.
func.func @sce_grad_loss_grad(%l: tensor<4x10xf32>, %y: tensor<4xi64>, %s: tensor<1xf32>) {
  // expected-error @+1 {{'nn.softmax_cross_entropy_grad' op operand #2 must be 0D tensor of 32-bit float values, but got 'tensor<1xf32>'}}
  %0 = nn.softmax_cross_entropy_grad %l, %y, %s : tensor<4x10xf32>, tensor<4xi64>, tensor<1xf32>
  return
}

// -----

// Checks that layer_norm_grad rejects a zero eps.
func.func @layer_norm_grad_eps(%x: tensor<2x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{'nn.layer_norm_grad' op eps must be positive, got 0.000000e+00}}
  %0:3 = nn.layer_norm_grad %x, %w, %x eps 0.0 : tensor<2x8xf32>, tensor<8xf32>
  return
}

// -----

// Checks that layer_norm_grad rejects a weight that does not match the last dimension.
func.func @layer_norm_grad_weight(%x: tensor<2x8xf32>, %w: tensor<4xf32>) {
  // expected-error @+1 {{'nn.layer_norm_grad' op weight and bias must have shape [8], got [4]}}
  %0:3 = nn.layer_norm_grad %x, %w, %x eps 1.0e-5 : tensor<2x8xf32>, tensor<4xf32>
  return
}

// -----

// Checks that layer_norm_grad rejects a result gradient of another type than the input.
func.func @layer_norm_grad_input_types(%x: tensor<2x8xf32>, %w: tensor<8xf32>, %dy: tensor<2x8xbf16>) {
  // expected-error @+1 {{'nn.layer_norm_grad' op failed to verify that all of {input, result_grad, input_grad} have same type}}
  %0:3 = "nn.layer_norm_grad"(%x, %w, %dy) {eps = 1.0e-5 : f64} : (tensor<2x8xf32>, tensor<8xf32>, tensor<2x8xbf16>) -> (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

// Checks that layer_norm_grad returns weight and bias gradients of the weight's type.
func.func @layer_norm_grad_weight_types(%x: tensor<2x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{'nn.layer_norm_grad' op failed to verify that all of {weight, weight_grad, bias_grad} have same type}}
  %0:3 = "nn.layer_norm_grad"(%x, %w, %x) {eps = 1.0e-5 : f64} : (tensor<2x8xf32>, tensor<8xf32>, tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf16>)
  return
}

// -----

// Checks that rms_norm_grad rejects a zero eps.
func.func @rms_norm_grad_eps(%x: tensor<2x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{'nn.rms_norm_grad' op eps must be positive, got 0.000000e+00}}
  %0:2 = nn.rms_norm_grad %x, %w, %x eps 0.0 : tensor<2x8xf32>, tensor<8xf32>
  return
}

// -----

// Checks that rms_norm_grad rejects a weight that does not match the last dimension.
func.func @rms_norm_grad_weight(%x: tensor<2x8xf32>, %w: tensor<4xf32>) {
  // expected-error @+1 {{'nn.rms_norm_grad' op weight must have shape [8], got [4]}}
  %0:2 = nn.rms_norm_grad %x, %w, %x eps 1.0e-5 : tensor<2x8xf32>, tensor<4xf32>
  return
}

// -----

// Checks that rms_norm_grad rejects a weight of another element type.
func.func @rms_norm_grad_weight_type(%x: tensor<2x8xf16>, %w: tensor<8xbf16>) {
  // expected-error @+1 {{'nn.rms_norm_grad' op weight element type 'bf16' differs from input element type 'f16'}}
  %0:2 = nn.rms_norm_grad %x, %w, %x eps 1.0e-5 : tensor<2x8xf16>, tensor<8xbf16>
  return
}

// -----

// Checks that rms_norm_grad rejects a result gradient of another type than the input.
func.func @rms_norm_grad_input_types(%x: tensor<2x8xf32>, %w: tensor<8xf32>, %dy: tensor<2x4xf32>) {
  // expected-error @+1 {{'nn.rms_norm_grad' op failed to verify that all of {input, result_grad, input_grad} have same type}}
  %0:2 = "nn.rms_norm_grad"(%x, %w, %dy) {eps = 1.0e-5 : f64} : (tensor<2x8xf32>, tensor<8xf32>, tensor<2x4xf32>) -> (tensor<2x8xf32>, tensor<8xf32>)
  return
}

// -----

// Checks that rms_norm_grad returns a weight gradient of the weight's type.
func.func @rms_norm_grad_weight_grad_type(%x: tensor<2x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{'nn.rms_norm_grad' op failed to verify that all of {weight, weight_grad} have same type}}
  %0:2 = "nn.rms_norm_grad"(%x, %w, %x) {eps = 1.0e-5 : f64} : (tensor<2x8xf32>, tensor<8xf32>, tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>)
  return
}

// -----

// Checks that attention_grad rejects operands that are not rank 4.
func.func @attention_grad_rank(%q: tensor<2x4x8xf32>) {
  // expected-error @+1 {{'nn.attention_grad' op query must have rank 4 [batch, heads, seq, head_dim], got rank 3}}
  %0:3 = nn.attention_grad %q, %q, %q, %q, %q causal scale 0.5 : tensor<2x4x8xf32>
  return
}

// -----

// Checks that attention_grad rejects a negative scale.
func.func @attention_grad_scale(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{'nn.attention_grad' op scale must be positive, got -1.000000e+00}}
  %0:3 = nn.attention_grad %q, %q, %q, %q, %q scale -1.0 : tensor<1x2x4x8xf32>
  return
}

// -----

// Checks that attention_grad rejects an output of other than the query's
// type.
func.func @attention_grad_types(%q: tensor<1x2x4x8xf32>, %o: tensor<1x2x4x8xbf16>) {
  // expected-error @+1 {{'nn.attention_grad' op failed to verify that all of {query, output, output_grad, query_grad} have same type}}
  %0:3 = "nn.attention_grad"(%q, %q, %q, %o, %q) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 0>}> {scale = 0.5 : f64} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>)
  return
}

// -----

// Checks that attention_grad rejects key and value gradients of other than
// the key's shape (grouped-query: the group's sum has the key's shape).
func.func @attention_grad_kv_grads(%q: tensor<1x4x4x8xf32>, %k: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{'nn.attention_grad' op failed to verify that all of {key, value, key_grad, value_grad} have same type}}
  %0:3 = "nn.attention_grad"(%q, %k, %k, %q, %q) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 0>}> {scale = 0.5 : f64} : (tensor<1x4x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>) -> (tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>)
  return
}

// -----

// Checks that attention_grad rejects key/value heads that do not divide the
// query heads.
func.func @attention_grad_group(%q: tensor<1x6x4x8xf32>, %k: tensor<1x4x4x8xf32>) {
  // expected-error @+1 {{'nn.attention_grad' op key and value heads 4 must divide the query heads 6}}
  %0:3 = nn.attention_grad %q, %k, %k, %q, %q causal scale 0.5 : tensor<1x6x4x8xf32>, tensor<1x4x4x8xf32>
  return
}

// -----

// Checks that attention_grad rejects a key of another head_dim.
func.func @attention_grad_head_dim(%q: tensor<1x4x4x8xf32>, %k: tensor<1x2x4x4xf32>) {
  // expected-error @+1 {{'nn.attention_grad' op key and value head_dim 4 differs from the query's 8 (key [1, 2, 4, 4], query [1, 4, 4, 8])}}
  %0:3 = nn.attention_grad %q, %k, %k, %q, %q scale 0.5 : tensor<1x4x4x8xf32>, tensor<1x2x4x4xf32>
  return
}

// -----

// Checks that attention_grad rejects a key of another element type.
func.func @attention_grad_element_type(%q: tensor<1x4x4x8xbf16>, %k: tensor<1x2x4x8xf16>) {
  // expected-error @+1 {{'nn.attention_grad' op key and value element type 'f16' differs from the query's 'bf16'}}
  %0:3 = nn.attention_grad %q, %k, %k, %q, %q scale 0.5 : tensor<1x4x4x8xbf16>, tensor<1x2x4x8xf16>
  return
}

// -----

// Checks that a window needs the causal mask.
func.func @attention_window_not_causal(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{'nn.attention' op window requires causal}}
  %0 = nn.attention %q, %q, %q window 2 : tensor<1x2x4x8xf32>
  return
}

// -----

// Checks that a window is at least one key.
func.func @attention_window_zero(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{'nn.attention' op window must be at least 1, got 0}}
  %0 = nn.attention %q, %q, %q causal window 0 : tensor<1x2x4x8xf32>
  return
}

// -----

// Checks that attention_grad checks its window as well.
func.func @attention_grad_window_negative(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{'nn.attention_grad' op window must be at least 1, got -3}}
  %0:3 = nn.attention_grad %q, %q, %q, %q, %q causal scale 0.5 window -3 : tensor<1x2x4x8xf32>
  return
}

// -----

// Checks that a softcap is positive.
func.func @attention_softcap_zero(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{'nn.attention' op softcap must be positive, got 0}}
  %0 = nn.attention %q, %q, %q causal softcap 0.0 : tensor<1x2x4x8xf32>
  return
}

// -----

// Checks that attention_grad's softcap is positive.
func.func @attention_grad_softcap_negative(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{'nn.attention_grad' op softcap must be positive, got -5}}
  %0:3 = nn.attention_grad %q, %q, %q, %q, %q scale 0.5 softcap -5.0 : tensor<1x2x4x8xf32>
  return
}

// -----

// Checks that ALiBi has one slope per query head.
func.func @attention_alibi_count(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{'nn.attention' op alibi has 3 slopes for the query's 2 heads}}
  %0 = nn.attention %q, %q, %q causal alibi [0.5, 0.25, 0.125] : tensor<1x2x4x8xf32>
  return
}

// -----

// Checks that attention_grad checks its slopes as well.
func.func @attention_grad_alibi_count(%q: tensor<1x2x4x8xf32>, %k: tensor<1x1x4x8xf32>) {
  // expected-error @+1 {{'nn.attention_grad' op alibi has 1 slopes for the query's 2 heads}}
  %0:3 = nn.attention_grad %q, %k, %k, %q, %q causal scale 0.5 alibi [0.5] : tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32>
  return
}

// -----

// Checks that ALiBi slopes are finite.
func.func @attention_alibi_infinite(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{'nn.attention' op alibi slope INF is not finite}}
  %0 = nn.attention %q, %q, %q alibi [0.5, 1.0e39] : tensor<1x2x4x8xf32>
  return
}

// -----

// Checks that attention_grad needs an explicit scale.
func.func @attention_grad_no_scale(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{'nn.attention_grad' op requires attribute 'scale'}}
  %0:3 = "nn.attention_grad"(%q, %q, %q, %q, %q) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 0>}> : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>)
  return
}

// -----

// Checks that a shift's fill the i32 labels cannot hold is rejected.
func.func @shift_labels_fill_width(%y: tensor<4x8xi32>) {
  // expected-error @+1 {{'nn.shift_labels' op fill 2147483648 does not fit the labels' i32}}
  %0 = nn.shift_labels %y fill 2147483648 : tensor<4x8xi32>
  return
}

// -----

// Checks that the labels of a shift need a last dimension to shift along.
func.func @shift_labels_scalar(%y: tensor<i64>) {
  // expected-error @+1 {{'nn.shift_labels' op labels must have rank >= 1 (the shift is along the last dimension)}}
  %0 = nn.shift_labels %y fill -100 : tensor<i64>
  return
}

// -----

// Checks that float labels are rejected.
func.func @shift_labels_float(%y: tensor<4x8xf32>) {
  // expected-error @+1 {{'nn.shift_labels' op operand #0 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values}}
  %0 = nn.shift_labels %y fill -100 : tensor<4x8xf32>
  return
}

// -----

// Checks that bias_gelu's bias broadcasts as nn.add's rhs (a suffix shape).
func.func @bias_gelu_shape(%x: tensor<2x4x8xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'nn.bias_gelu' op bias shape [4] is not a suffix of input shape [2, 4, 8]}}
  %0 = nn.bias_gelu %x, %b : tensor<2x4x8xf32>, tensor<4xf32>
  return
}

// -----

// Checks that bias_gelu_grad's bias broadcasts as nn.add's rhs.
func.func @bias_gelu_grad_shape(%x: tensor<2x4x8xf32>, %b: tensor<2x8xf32>, %dy: tensor<2x4x8xf32>) {
  // expected-error @+1 {{'nn.bias_gelu_grad' op bias shape [2, 8] is not a suffix of input shape [2, 4, 8]}}
  %0 = nn.bias_gelu_grad %x, %b, %dy : tensor<2x4x8xf32>, tensor<2x8xf32>
  return
}

// -----

// Checks that bias_gelu's bias has the input's element type.
func.func @bias_gelu_type(%x: tensor<2x8xf32>, %b: tensor<8xbf16>) {
  // expected-error @+1 {{'nn.bias_gelu' op failed to verify that all of {input, bias} have same element type}}
  %0 = nn.bias_gelu %x, %b : tensor<2x8xf32>, tensor<8xbf16>
  return
}

// -----

// Checks that linear_cross_entropy's weight is [vocab, hidden] with the
// input's hidden size.
func.func @linear_ce_hidden(%x: tensor<2x4x8xf32>, %w: tensor<16x6xf32>, %y: tensor<2x4xi64>) {
  // expected-error @+1 {{'nn.linear_cross_entropy' op weight [16, 6] must have the input's hidden size 8 as its second dimension}}
  %0 = nn.linear_cross_entropy %x, %w, %y chunk 2 : tensor<2x4x8xf32>, tensor<16x6xf32>, tensor<2x4xi64> -> tensor<f32>
  return
}

// -----

func.func @linear_ce_weight_rank(%x: tensor<2x4x8xf32>, %w: tensor<2x16x8xf32>, %y: tensor<2x4xi64>) {
  // expected-error @+1 {{'nn.linear_cross_entropy' op weight must be a [vocab, hidden] matrix, got [2, 16, 8]}}
  %0 = nn.linear_cross_entropy %x, %w, %y chunk 2 : tensor<2x4x8xf32>, tensor<2x16x8xf32>, tensor<2x4xi64> -> tensor<f32>
  return
}

// -----

func.func @linear_ce_input_rank(%x: tensor<8xf32>, %w: tensor<16x8xf32>, %y: tensor<i64>) {
  // expected-error @+1 {{'nn.linear_cross_entropy' op input must have rank >= 2, got 1}}
  %0 = nn.linear_cross_entropy %x, %w, %y chunk 2 : tensor<8xf32>, tensor<16x8xf32>, tensor<i64> -> tensor<f32>
  return
}

// -----

// Checks that linear_cross_entropy's labels are the input's rows.
func.func @linear_ce_labels(%x: tensor<2x4x8xf32>, %w: tensor<16x8xf32>, %y: tensor<2x5xi64>) {
  // expected-error @+1 {{'nn.linear_cross_entropy' op labels shape [2, 5] must be the input shape without its hidden dimension, [2, 4]}}
  %0 = nn.linear_cross_entropy %x, %w, %y chunk 2 : tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<2x5xi64> -> tensor<f32>
  return
}

// -----

// Checks that linear_cross_entropy's input and weight have one element type.
func.func @linear_ce_mixed(%x: tensor<2x4x8xbf16>, %w: tensor<16x8xf32>, %y: tensor<2x4xi64>) {
  // expected-error @+1 {{'nn.linear_cross_entropy' op input and weight must have one element type, got 'bf16' input and 'f32' weight}}
  %0 = nn.linear_cross_entropy %x, %w, %y chunk 2 : tensor<2x4x8xbf16>, tensor<16x8xf32>, tensor<2x4xi64> -> tensor<f32>
  return
}

// -----

// Checks that a chunk holds at least one row.
func.func @linear_ce_chunk(%x: tensor<2x4x8xf32>, %w: tensor<16x8xf32>, %y: tensor<2x4xi64>) {
  // expected-error @+1 {{'nn.linear_cross_entropy' op chunk must be at least 1, got 0}}
  %0 = nn.linear_cross_entropy %x, %w, %y chunk 0 : tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<2x4xi64> -> tensor<f32>
  return
}

// -----

func.func @linear_ce_ignore(%x: tensor<2x4x8xf32>, %w: tensor<16x8xf32>, %y: tensor<2x4xi32>) {
  // expected-error @+1 {{'nn.linear_cross_entropy' op ignore_index 2147483648 does not fit the labels' i32}}
  %0 = nn.linear_cross_entropy %x, %w, %y chunk 2 ignore_index 2147483648 : tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<2x4xi32> -> tensor<f32>
  return
}

// -----

// Checks that linear_cross_entropy_grad's gradients have their operands'
// types.
func.func @linear_ce_grad_types(%x: tensor<2x4x8xf32>, %w: tensor<16x8xf32>, %y: tensor<2x4xi64>, %d: tensor<f32>) {
  // expected-error @+1 {{'nn.linear_cross_entropy_grad' op failed to verify that all of {weight, weight_grad} have same type}}
  %0:2 = "nn.linear_cross_entropy_grad"(%x, %w, %y, %d) {chunk = 2 : i64} : (tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<2x4xi64>, tensor<f32>) -> (tensor<2x4x8xf32>, tensor<8x16xf32>)
  return
}

// -----

func.func @linear_ce_grad_chunk(%x: tensor<2x4x8xf32>, %w: tensor<16x8xf32>, %y: tensor<2x4xi64>, %d: tensor<f32>) {
  // expected-error @+1 {{'nn.linear_cross_entropy_grad' op chunk must be at least 1, got -1}}
  %0:2 = nn.linear_cross_entropy_grad %x, %w, %y, %d chunk -1 : tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<2x4xi64>, tensor<f32>
  return
}

// -----

// Checks that tiled_mlp's gate and up weights are [intermediate, hidden].
func.func @tiled_mlp_gate(%x: tensor<2x4x8xf32>, %g: tensor<16x6xf32>, %d: tensor<8x16xf32>) {
  // expected-error @+1 {{'nn.tiled_mlp' op gate and up weights must be [intermediate, 8] matrices (the input's hidden size last), got [16, 6]}}
  %0 = nn.tiled_mlp %x, %g, %g, %d tiles 2 : tensor<2x4x8xf32>, tensor<16x6xf32>, tensor<8x16xf32>
  return
}

// -----

// Checks that tiled_mlp's down weight is [hidden, intermediate].
func.func @tiled_mlp_down(%x: tensor<2x4x8xf32>, %g: tensor<16x8xf32>, %d: tensor<16x8xf32>) {
  // expected-error @+1 {{'nn.tiled_mlp' op down weight must be [8, 16] (hidden, intermediate), got [16, 8]}}
  %0 = nn.tiled_mlp %x, %g, %g, %d tiles 2 : tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>
  return
}

// -----

// Checks that tiled_mlp_grad computes in f32 only.
func.func @tiled_mlp_bf16(%x: tensor<2x4x8xbf16>, %g: tensor<16x8xbf16>, %d: tensor<8x16xbf16>) {
  // expected-error @+1 {{'nn.tiled_mlp_grad' op computes in f32 only, got 'bf16' input and 'bf16' weights}}
  %0:4 = nn.tiled_mlp_grad %x, %g, %g, %d, %x tiles 2 : tensor<2x4x8xbf16>, tensor<16x8xbf16>, tensor<8x16xbf16>
  return
}

// -----

// Checks that tiled_mlp has at least one tile.
func.func @tiled_mlp_tiles(%x: tensor<8x8xf32>, %g: tensor<16x8xf32>, %d: tensor<8x16xf32>) {
  // expected-error @+1 {{'nn.tiled_mlp' op tiles must be at least 1, got 0}}
  %0 = nn.tiled_mlp %x, %g, %g, %d tiles 0 : tensor<8x8xf32>, tensor<16x8xf32>, tensor<8x16xf32>
  return
}

// -----

// Checks that the router selects between 1 and E experts.
func.func @moe_router_top_k(%l: tensor<6x4xf32>) {
  // expected-error @+1 {{'nn.moe_router' op top_k must lie in [1, 4] (the experts), got 5}}
  %w, %i = nn.moe_router %l top_k 5 : tensor<6x4xf32> -> tensor<6x5xf32>, tensor<6x5xi32>
  return
}

// -----

// Checks the router's result shapes.
func.func @moe_router_shape(%l: tensor<6x4xf32>) {
  // expected-error @+1 {{'nn.moe_router' op indices must have shape [6, 2], got [6, 3]}}
  %w, %i = nn.moe_router %l top_k 2 : tensor<6x4xf32> -> tensor<6x2xf32>, tensor<6x3xi32>
  return
}

// -----

// Checks the correction bias: one per expert.
func.func @moe_router_bias(%l: tensor<6x4xf32>, %b: tensor<6xf32>) {
  // expected-error @+1 {{'nn.moe_router' op bias must have shape [4], got [6]}}
  %w, %i = nn.moe_router %l bias(%b : tensor<6xf32>) top_k 2 : tensor<6x4xf32> -> tensor<6x2xf32>, tensor<6x2xi32>
  return
}

// -----

// Checks that the routed scaling factor is positive.
func.func @moe_router_scale(%l: tensor<6x4xf32>) {
  // expected-error @+1 {{'nn.moe_router' op scale must be finite and positive, got 0}}
  %w, %i = nn.moe_router %l top_k 2 scale 0.0 : tensor<6x4xf32> -> tensor<6x2xf32>, tensor<6x2xi32>
  return
}

// -----

// Checks that the groups divide the experts.
func.func @moe_router_groups_divide(%l: tensor<6x8xf32>) {
  // expected-error @+1 {{'nn.moe_router' op groups must divide the 8 experts and lie in [1, 64], got 3}}
  %w, %i = nn.moe_router %l top_k 2 sigmoid groups 3 top 2 : tensor<6x8xf32> -> tensor<6x2xf32>, tensor<6x2xi32>
  return
}

// -----

// Checks that a group holds the 2 experts its score sums.
func.func @moe_router_group_size(%l: tensor<6x8xf32>) {
  // expected-error @+1 {{'nn.moe_router' op groups must hold at least 2 experts each, got 1}}
  %w, %i = nn.moe_router %l top_k 2 sigmoid groups 8 top 4 : tensor<6x8xf32> -> tensor<6x2xf32>, tensor<6x2xi32>
  return
}

// -----

// Checks that the kept groups are among the groups.
func.func @moe_router_topk_group(%l: tensor<6x8xf32>) {
  // expected-error @+1 {{'nn.moe_router' op top must lie in [1, 4] (the groups), got 5}}
  %w, %i = nn.moe_router %l top_k 2 sigmoid groups 4 top 5 : tensor<6x8xf32> -> tensor<6x2xf32>, tensor<6x2xi32>
  return
}

// -----

// Checks that the kept groups hold the top k experts.
func.func @moe_router_groups_too_few_experts(%l: tensor<6x8xf32>) {
  // expected-error @+1 {{'nn.moe_router' op top_k 3 exceeds the 2 experts of the top groups}}
  %w, %i = nn.moe_router %l top_k 3 sigmoid groups 4 top 1 : tensor<6x8xf32> -> tensor<6x3xf32>, tensor<6x3xi32>
  return
}

// -----

// Checks that groups come with top (written generically: the assembly
// cannot spell one without the other).
func.func @moe_router_groups_pair(%l: tensor<6x8xf32>) {
  // expected-error @+1 {{'nn.moe_router' op groups and top go together}}
  %w, %i = "nn.moe_router"(%l) <{n_group = 4 : i64, top_k = 2 : i64, operandSegmentSizes = array<i32: 1, 0>}> : (tensor<6x8xf32>) -> (tensor<6x2xf32>, tensor<6x2xi32>)
  return
}

// -----

// Checks that the normalization's eps is not negative.
func.func @moe_router_grad_eps(%l: tensor<6x4xf32>, %i: tensor<6x2xi32>, %d: tensor<6x2xf32>) {
  // expected-error @+1 {{'nn.moe_router_grad' op eps must be finite and non-negative, got -1}}
  %g = nn.moe_router_grad %l, %i, %d normalize eps -1.0 : tensor<6x4xf32>, tensor<6x2xi32>, tensor<6x2xf32>
  return
}

// -----

// Checks that dispatch makes a row per (token, expert) pair.
func.func @moe_dispatch_rows(%x: tensor<6x8xf32>, %i: tensor<6x2xi32>) {
  // expected-error @+1 {{'nn.moe_dispatch' op rows must have shape [12, 8], got [6, 8]}}
  %r, %p, %o = nn.moe_dispatch %x[%i] experts 4 : tensor<6x8xf32>, tensor<6x2xi32> -> tensor<6x8xf32>, tensor<4xi32>
  return
}

// -----

// Checks that the offsets share the indices' integer type.
func.func @moe_dispatch_offsets(%x: tensor<6x8xf32>, %i: tensor<6x2xi32>) {
  // expected-error @+1 {{'nn.moe_dispatch' op offsets must have the indices' element type 'i32'}}
  %r, %p, %o = nn.moe_dispatch %x[%i] experts 4 : tensor<6x8xf32>, tensor<6x2xi32> -> tensor<12x8xf32>, tensor<4xi64>
  return
}

// -----

// Checks the grouped product's weight: [E, D, F], or [E, F, D] transposed.
func.func @grouped_matmul_weight(%x: tensor<12x8xf32>, %w: tensor<4x8x16xf32>, %o: tensor<4xi32>) {
  // expected-error @+1 {{'nn.grouped_matmul' op weight must have shape [4, 16, 8], got [4, 8, 16]}}
  %y = nn.grouped_matmul %x, %w, %o transpose_rhs : tensor<12x8xf32>, tensor<4x8x16xf32>, tensor<4xi32> -> tensor<12x16xf32>
  return
}

// -----

// Checks that the grouped product has an end per expert of the weight.
func.func @grouped_matmul_experts(%x: tensor<12x8xf32>, %w: tensor<4x8x16xf32>, %o: tensor<3xi32>) {
  // expected-error @+1 {{'nn.grouped_matmul' op weight must have shape [3, 8, 16], got [4, 8, 16]}}
  %y = nn.grouped_matmul %x, %w, %o : tensor<12x8xf32>, tensor<4x8x16xf32>, tensor<3xi32> -> tensor<12x16xf32>
  return
}

// -----

// Checks that the grouped product's input and weight share a type (the op
// is defined at 16 bits too; the lowering refuses what no kernel computes).
func.func @grouped_matmul_mixed(%x: tensor<12x8xbf16>, %w: tensor<4x8x16xf32>, %o: tensor<4xi32>) {
  // expected-error @+1 {{'nn.grouped_matmul' op}}
  %y = nn.grouped_matmul %x, %w, %o : tensor<12x8xbf16>, tensor<4x8x16xf32>, tensor<4xi32> -> tensor<12x16xbf16>
  return
}

// -----

// Checks the weight gradient's layout.
func.func @grouped_matmul_weight_grad(%x: tensor<12x8xf32>, %dy: tensor<12x16xf32>, %o: tensor<4xi32>) {
  // expected-error @+1 {{'nn.grouped_matmul_weight_grad' op result must have shape [4, 8, 16], got [4, 16, 8]}}
  %dw = nn.grouped_matmul_weight_grad %x, %dy, %o : tensor<12x8xf32>, tensor<12x16xf32>, tensor<4xi32> -> tensor<4x16x8xf32>
  return
}

// -----

// Checks that combine reads a row per pair.
func.func @moe_combine_rows(%r: tensor<10x8xf32>, %p: tensor<6x2xi32>, %w: tensor<6x2xf32>) {
  // expected-error @+1 {{'nn.moe_combine' op rows must have a row per pair (12), got 10}}
  %y = nn.moe_combine %r[%p], %w : tensor<10x8xf32>, tensor<6x2xi32>, tensor<6x2xf32> -> tensor<6x8xf32>
  return
}

// -----

// Checks the combine weights' type.
func.func @moe_combine_weights(%r: tensor<12x8xf32>, %p: tensor<6x2xi32>, %w: tensor<6x2xbf16>) {
  // expected-error @+1 {{'nn.moe_combine' op element types of rows and weights differ: 'f32' vs 'bf16'}}
  %y = nn.moe_combine %r[%p], %w : tensor<12x8xf32>, tensor<6x2xi32>, tensor<6x2xbf16> -> tensor<6x8xf32>
  return
}

// -----

// Checks that the dispatch gradient sums a row per pair.
func.func @moe_dispatch_grad_rows(%d: tensor<10x8xf32>, %p: tensor<6x2xi32>) {
  // expected-error @+1 {{'nn.moe_dispatch_grad' op rows_grad must have a row per pair (12), got 10}}
  %dx = nn.moe_dispatch_grad %d[%p] : tensor<10x8xf32>, tensor<6x2xi32> -> tensor<6x8xf32>
  return
}

// -----

// Checks the auxiliary loss's top k.
func.func @moe_aux_loss_top_k(%l: tensor<6x4xf32>) {
  // expected-error @+1 {{'nn.moe_aux_loss' op top_k must lie in [1, 4] (the experts), got 0}}
  %a = nn.moe_aux_loss %l top_k 0 : tensor<6x4xf32> -> tensor<f32>
  return
}

// -----

// Checks that given counts come with their rows.
func.func @moe_aux_loss_counts_rows(%l: tensor<6x4xf32>, %c: tensor<4xi64>) {
  // expected-error @+1 {{'nn.moe_aux_loss' op takes counts and their rows together, or neither}}
  %a = nn.moe_aux_loss %l counts(%c : tensor<4xi64>) top_k 2 : tensor<6x4xf32> -> tensor<f32>
  return
}

// -----

// Checks the rows without counts.
func.func @moe_aux_loss_rows_alone(%l: tensor<6x4xf32>) {
  // expected-error @+1 {{'nn.moe_aux_loss' op takes counts and their rows together, or neither}}
  %a = nn.moe_aux_loss %l rows 12 top_k 2 : tensor<6x4xf32> -> tensor<f32>
  return
}

// -----

// Checks a count per expert.
func.func @moe_aux_loss_counts_experts(%l: tensor<6x4xf32>, %c: tensor<3xi64>) {
  // expected-error @+1 {{'nn.moe_aux_loss' op counts must hold one count per expert (4), got 'tensor<3xi64>'}}
  %a = nn.moe_aux_loss %l counts(%c : tensor<3xi64>) rows 12 top_k 2 : tensor<6x4xf32> -> tensor<f32>
  return
}

// -----

// Checks that the global batch is no smaller than the part.
func.func @moe_aux_loss_grad_rows(%l: tensor<6x4xf32>, %c: tensor<4xi64>, %d: tensor<f32>) {
  // expected-error @+1 {{'nn.moe_aux_loss_grad' op rows 5 (the global batch's) must be at least the logits' 6}}
  %g = nn.moe_aux_loss_grad %l, %d counts(%c : tensor<4xi64>) rows 5 top_k 2 : tensor<6x4xf32>, tensor<f32>
  return
}

// -----

// Checks the expert counts' top k.
func.func @moe_expert_counts_top_k(%l: tensor<6x4xf32>) {
  // expected-error @+1 {{'nn.moe_expert_counts' op top_k must lie in [1, 4] (the experts), got 5}}
  %c = nn.moe_expert_counts %l top_k 5 : tensor<6x4xf32> -> tensor<4xi64>
  return
}

// -----

// Checks the router gradient's selection against the logits.
func.func @moe_router_grad_rows(%l: tensor<6x4xf32>, %i: tensor<5x2xi32>, %d: tensor<5x2xf32>) {
  // expected-error @+1 {{'nn.moe_router_grad' op indices must be [6, k <= 4], got [5, 2]}}
  %g = nn.moe_router_grad %l, %i, %d : tensor<6x4xf32>, tensor<5x2xi32>, tensor<5x2xf32>
  return
}

// -----

// Checks that document ids come from integer positions [batch, seq].
func.func @document_ids_float(%p: tensor<2x8xf32>) {
  // expected-error @+1 {{'nn.document_ids' op operand #0 must be 2D tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<2x8xf32>'}}
  %0 = nn.document_ids %p : tensor<2x8xf32>
  return
}

// -----

// Checks that segments hold one document id per token.
func.func @attention_segments_seq(%q: tensor<1x2x4x8xf32>, %ids: tensor<1x5xi32>) {
  // expected-error @+1 {{'nn.attention' op segments [1, 5] have seq 5, the query's is 4 (one document id per token: [batch, seq])}}
  %0 = nn.attention %q, %q, %q segments(%ids : tensor<1x5xi32>) causal : tensor<1x2x4x8xf32>
  return
}

// -----

// Checks that the gradient's segments have the query's batch.
func.func @attention_grad_segments_batch(%q: tensor<1x2x4x8xf32>, %ids: tensor<2x4xi32>) {
  // expected-error @+1 {{'nn.attention_grad' op segments [2, 4] have batch 2, the query's is 1}}
  %0:3 = nn.attention_grad %q, %q, %q, %q, %q segments(%ids : tensor<2x4xi32>) causal scale 0.5 : tensor<1x2x4x8xf32>
  return
}

// -----

// Checks that document ids are i32.
func.func @attention_segments_i64(%q: tensor<1x2x4x8xf32>, %ids: tensor<1x4xi64>) {
  // expected-error @+1 {{'nn.attention' op operand #3 must be 2D tensor of 32-bit signless integer values, but got 'tensor<1x4xi64>'}}
  %0 = nn.attention %q, %q, %q segments(%ids : tensor<1x4xi64>) causal : tensor<1x2x4x8xf32>
  return
}

// -----

// Checks that attention sinks hold one logit per query head.
func.func @attention_sinks_count(%q: tensor<1x2x4x8xf32>, %s: tensor<3xf32>) {
  // expected-error @+1 {{'nn.attention' op sinks has 3 logits for the query's 2 heads}}
  %0 = nn.attention %q, %q, %q sinks(%s : tensor<3xf32>) causal : tensor<1x2x4x8xf32>
  return
}

// -----

// Checks that attention sinks need f32 tensors.
func.func @attention_sinks_bf16(%q: tensor<1x2x4x8xbf16>, %s: tensor<2xf32>) {
  // expected-error @+1 {{'nn.attention' op sinks need f32 tensors, got 'bf16'}}
  %0 = nn.attention %q, %q, %q sinks(%s : tensor<2xf32>) causal : tensor<1x2x4x8xbf16>
  return
}

// -----

// Checks that sinks do not combine with a softcap.
func.func @attention_sinks_softcap(%q: tensor<1x2x4x8xf32>, %s: tensor<2xf32>) {
  // expected-error @+1 {{'nn.attention_grad' op sinks with softcap or alibi are not supported}}
  %0:3 = nn.attention_grad %q, %q, %q, %q, %q sinks(%s : tensor<2xf32>) causal scale 0.5 softcap 5.0 : tensor<1x2x4x8xf32>
  return
}

// -----

// Checks the sinks' gradient against the query's heads.
func.func @attention_sinks_grad_count(%q: tensor<1x2x4x8xf32>, %s: tensor<4xf32>) {
  // expected-error @+1 {{'nn.attention_sinks_grad' op sinks has 4 logits for the query's 2 heads}}
  %0 = nn.attention_sinks_grad %q, %q, %s, %q, %q causal scale 0.5 : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<4xf32>
  return
}

// -----

// Checks that the clamped SwiGLU's limit is positive.
func.func @clamped_swiglu_limit(%g: tensor<4x8xf32>) {
  // expected-error @+1 {{'nn.clamped_swiglu' op limit must be positive, got 0}}
  %0 = nn.clamped_swiglu %g, %g alpha 1.702 limit 0.0 : tensor<4x8xf32>
  return
}

// -----

// Checks that xIELU's coefficients hold one element each.
func.func @xielu_alpha_shape(%x: tensor<4x8xf32>, %a: tensor<2xf32>) {
  // expected-error @+1 {{'nn.xielu' op alpha_p and alpha_n must have shape [1], got 'tensor<2xf32>'}}
  %0 = nn.xielu %x, %a, %a beta 0.5 eps -1.0e-6 : tensor<4x8xf32>, tensor<2xf32>
  return
}

// -----

// Checks that xIELU's coefficients have the input's element type.
func.func @xielu_alpha_type(%x: tensor<4x8xbf16>, %a: tensor<1xf32>) {
  // expected-error @+1 {{'nn.xielu' op alpha_p and alpha_n must have the input's element type, got 'f32'}}
  %0 = nn.xielu %x, %a, %a beta 0.5 eps -1.0e-6 : tensor<4x8xbf16>, tensor<1xf32>
  return
}

// -----

// Checks that xIELU's eps is finite.
func.func @xielu_eps_nan(%x: tensor<4x8xf32>, %a: tensor<1xf32>) {
  // expected-error @+1 {{'nn.xielu' op eps must be finite, got nan}}
  %0 = nn.xielu %x, %a, %a beta 0.5 eps 0x7FF8000000000000 : tensor<4x8xf32>, tensor<1xf32>
  return
}

// -----

// Checks xielu_grad's beta as the forward's.
func.func @xielu_grad_beta(%x: tensor<4x8xf32>, %a: tensor<1xf32>) {
  // expected-error @+1 {{'nn.xielu_grad' op beta must be finite, got INF}}
  %0:3 = nn.xielu_grad %x, %a, %a, %x beta 0x7FF0000000000000 eps -1.0e-6 : tensor<4x8xf32>, tensor<1xf32>
  return
}

// -----

// Checks that clamp has a bound.
func.func @clamp_no_bound(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'nn.clamp' op needs a bound: min, max or both}}
  %0 = nn.clamp %x : tensor<4x8xf32>
  return
}

// -----

// Checks that a clamp bound is no NaN.
func.func @clamp_nan(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'nn.clamp_grad' op max must not be NaN}}
  %0 = nn.clamp_grad %x, %x min 0.0 max 0x7FF8000000000000 : tensor<4x8xf32>
  return
}

// -----

// Checks that minimum takes two tensors of one type (no broadcasting).
func.func @minimum_broadcast(%x: tensor<4x8xf32>, %y: tensor<8xf32>) {
  // expected-error @+1 {{'nn.minimum' op requires the same type for all operands and results}}
  %0 = "nn.minimum"(%x, %y) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return
}

// -----

// Checks that where's mask has the values' type.
func.func @where_mask_type(%m: tensor<4x8xbf16>, %x: tensor<4x8xf32>) {
  // expected-error @+1 {{'nn.where' op failed to verify that all of {condition, true_value, false_value, result} have same type}}
  %0 = "nn.where"(%m, %x, %x) : (tensor<4x8xbf16>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

// Checks gather's indices' rank.
func.func @gather_rank(%x: tensor<4x8xf32>, %i: tensor<4x2x1xi64>) {
  // expected-error @+2 {{indices must have rank 2 ([..., K]) or 1 ([...]), got 3}}
  // expected-error @+1 {{'nn.gather' op failed to infer returned types}}
  %0 = nn.gather %x[%i] : tensor<4x8xf32>, tensor<4x2x1xi64> -> tensor<4x2x1xf32>
  return
}

// -----

// Checks gather's indices' leading dimensions.
func.func @gather_rows(%x: tensor<4x8xf32>, %i: tensor<3x2xi64>) {
  // expected-error @+2 {{indices 'tensor<3x2xi64>' must have the leading dimensions of input 'tensor<4x8xf32>'}}
  // expected-error @+1 {{'nn.gather' op failed to infer returned types}}
  %0 = nn.gather %x[%i] : tensor<4x8xf32>, tensor<3x2xi64> -> tensor<3x2xf32>
  return
}

// -----

// Checks gather's result type.
func.func @gather_result(%x: tensor<4x8xf32>, %i: tensor<4xi64>) {
  // expected-error @+2 {{'nn.gather' op inferred type(s) 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<4x1xf32>'}}
  // expected-error @+1 {{'nn.gather' op failed to infer returned types}}
  %0 = nn.gather %x[%i] : tensor<4x8xf32>, tensor<4xi64> -> tensor<4x1xf32>
  return
}

// -----

// Checks gather_grad's gradient against its indices.
func.func @gather_grad_shape(%i: tensor<4x2xi64>, %dy: tensor<4x3xf32>) {
  // expected-error @+1 {{'nn.gather_grad' op expected a result gradient of type 'tensor<4x2xf32>', got 'tensor<4x3xf32>'}}
  %0 = nn.gather_grad %i, %dy : tensor<4x2xi64>, tensor<4x3xf32> -> tensor<4x8xf32>
  return
}
