// RUN: zero-opt %s -split-input-file -verify-diagnostics

// Hostile nn.attention attributes (issue 70). The ALiBi slopes are read by
// MLIR's float rule: a hexadecimal integer is the f32 bit pattern, so a NaN
// or an infinity written in hex is refused as not finite (the dense array
// parser read every hex float as 0.0, and they passed); hostile-moe.test
// checks that a finite one keeps its value.

func.func @alibi_hex_nan(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{'nn.attention' op alibi slope nan is not finite}}
  %0 = nn.attention %q, %q, %q causal alibi [5.0e-01, 0x7FC00000] : tensor<1x2x4x8xf32>
  return
}

// -----

func.func @alibi_hex_inf(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{'nn.attention' op alibi slope INF is not finite}}
  %0 = nn.attention %q, %q, %q alibi [0x7F800000, 2.5e-01] : tensor<1x2x4x8xf32>
  return
}

// -----

func.func @alibi_hex_negative_inf(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{'nn.attention' op alibi slope -INF is not finite}}
  %0 = nn.attention %q, %q, %q alibi [0.5, 0xFF800000] : tensor<1x2x4x8xf32>
  return
}

// -----

func.func @alibi_grad_hex_nan(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{'nn.attention_grad' op alibi slope nan is not finite}}
  %0:3 = nn.attention_grad %q, %q, %q, %q, %q causal scale 0.5 alibi [0x7FC00000, 0.5] : tensor<1x2x4x8xf32>
  return
}

// -----

func.func @alibi_hex_too_wide(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{hexadecimal float constant out of range for type}}
  %0 = nn.attention %q, %q, %q alibi [0.5, 0x7FF8000000000000] : tensor<1x2x4x8xf32>
  return
}
