// ALiBi slopes written as f32 bit patterns: 0.5 and 0.25 (hostile-moe.test).
func.func @alibi(%q: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %0 = nn.attention %q, %q, %q causal alibi [0x3F000000, 0x3E800000] : tensor<1x2x4x8xf32>
  return %0 : tensor<1x2x4x8xf32>
}
