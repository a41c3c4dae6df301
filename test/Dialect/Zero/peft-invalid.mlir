// RUN: zero-opt %s -split-input-file -verify-diagnostics

// Every condition the verifier of #zero.peft and #zero.lora rejects, one
// per case: the attributes themselves, then against the module's
// parameters.

// The config is adapter_config.json's text, a JSON object.
// expected-error @+1 {{config must be a JSON object (adapter_config.json)}}
module attributes {zero.peft = #zero.peft<config = "[1]", prefix = "base_model.model.", layers = [#zero.lora<base = "base_model.model.l0.weight", a = "base_model.model.l0.lora_A.default.weight", b = "base_model.model.l0.lora_B.default.weight", scaling = 2.000000e+00, merged_key = "l0.weight", a_key = "base_model.model.l0.lora_A.weight", b_key = "base_model.model.l0.lora_B.weight">]>} {
  zero.param @"base_model.model.l0.weight" : tensor<3x4xf32> init normal std 0.02 frozen
  zero.param @"base_model.model.l0.lora_A.default.weight" : tensor<2x4xf32> init normal std 0.02
  zero.param @"base_model.model.l0.lora_B.default.weight" : tensor<3x2xf32> init zeros
}

// -----

// A layer is a #zero.lora.
// expected-error @+1 {{layers must be #zero.lora attributes, got 1 : i64}}
module attributes {zero.peft = #zero.peft<config = "{\22peft_type\22: \22LORA\22, \22r\22: 2}", prefix = "base_model.model.", layers = [1]>} {
  zero.param @"base_model.model.l0.weight" : tensor<3x4xf32> init normal std 0.02 frozen
  zero.param @"base_model.model.l0.lora_A.default.weight" : tensor<2x4xf32> init normal std 0.02
  zero.param @"base_model.model.l0.lora_B.default.weight" : tensor<3x2xf32> init zeros
}

// -----

// LoRA adapters are three distinct parameters.
// expected-error @+1 {{a layer's base, a and b must name three parameters, got 'base_model.model.l0.weight', 'base_model.model.l0.weight' and 'base_model.model.l0.lora_B.default.weight'}}
module attributes {zero.peft = #zero.peft<config = "{\22peft_type\22: \22LORA\22, \22r\22: 2}", prefix = "base_model.model.", layers = [#zero.lora<base = "base_model.model.l0.weight", a = "base_model.model.l0.weight", b = "base_model.model.l0.lora_B.default.weight", scaling = 2.000000e+00, merged_key = "l0.weight", a_key = "base_model.model.l0.lora_A.weight", b_key = "base_model.model.l0.lora_B.weight">]>} {
  zero.param @"base_model.model.l0.weight" : tensor<3x4xf32> init normal std 0.02 frozen
  zero.param @"base_model.model.l0.lora_A.default.weight" : tensor<2x4xf32> init normal std 0.02
  zero.param @"base_model.model.l0.lora_B.default.weight" : tensor<3x2xf32> init zeros
}

// -----

// The scaling is finite.
// expected-error @+1 {{the scaling of 'base_model.model.l0.weight' must be finite}}
module attributes {zero.peft = #zero.peft<config = "{\22peft_type\22: \22LORA\22, \22r\22: 2}", prefix = "base_model.model.", layers = [#zero.lora<base = "base_model.model.l0.weight", a = "base_model.model.l0.lora_A.default.weight", b = "base_model.model.l0.lora_B.default.weight", scaling = 0x7FF0000000000000, merged_key = "l0.weight", a_key = "base_model.model.l0.lora_A.weight", b_key = "base_model.model.l0.lora_B.weight">]>} {
  zero.param @"base_model.model.l0.weight" : tensor<3x4xf32> init normal std 0.02 frozen
  zero.param @"base_model.model.l0.lora_A.default.weight" : tensor<2x4xf32> init normal std 0.02
  zero.param @"base_model.model.l0.lora_B.default.weight" : tensor<3x2xf32> init zeros
}

// -----

// Keys are not empty.
// expected-error @+1 {{the merged_key of 'base_model.model.l0.weight' must not be empty}}
module attributes {zero.peft = #zero.peft<config = "{\22peft_type\22: \22LORA\22, \22r\22: 2}", prefix = "base_model.model.", layers = [#zero.lora<base = "base_model.model.l0.weight", a = "base_model.model.l0.lora_A.default.weight", b = "base_model.model.l0.lora_B.default.weight", scaling = 2.000000e+00, merged_key = "", a_key = "base_model.model.l0.lora_A.weight", b_key = "base_model.model.l0.lora_B.weight">]>} {
  zero.param @"base_model.model.l0.weight" : tensor<3x4xf32> init normal std 0.02 frozen
  zero.param @"base_model.model.l0.lora_A.default.weight" : tensor<2x4xf32> init normal std 0.02
  zero.param @"base_model.model.l0.lora_B.default.weight" : tensor<3x2xf32> init zeros
}

// -----

// Each adapter key is written once.
// expected-error @+1 {{adapter key 'base_model.model.l0.lora_A.weight' appears twice}}
module attributes {zero.peft = #zero.peft<config = "{\22peft_type\22: \22LORA\22, \22r\22: 2}", prefix = "base_model.model.", layers = [#zero.lora<base = "base_model.model.l0.weight", a = "base_model.model.l0.lora_A.default.weight", b = "base_model.model.l0.lora_B.default.weight", scaling = 2.000000e+00, merged_key = "l0.weight", a_key = "base_model.model.l0.lora_A.weight", b_key = "base_model.model.l0.lora_B.weight">, #zero.lora<base = "base_model.model.l1.weight", a = "base_model.model.l1.lora_A.default.weight", b = "base_model.model.l1.lora_B.default.weight", scaling = 2.000000e+00, merged_key = "l1.weight", a_key = "base_model.model.l0.lora_A.weight", b_key = "base_model.model.l1.lora_B.weight">]>} {
  zero.param @"base_model.model.l0.weight" : tensor<3x4xf32> init normal std 0.02 frozen
  zero.param @"base_model.model.l0.lora_A.default.weight" : tensor<2x4xf32> init normal std 0.02
  zero.param @"base_model.model.l0.lora_B.default.weight" : tensor<3x2xf32> init zeros
  zero.param @"base_model.model.l1.weight" : tensor<3x4xf32> init normal std 0.02 frozen
  zero.param @"base_model.model.l1.lora_A.default.weight" : tensor<2x4xf32> init normal std 0.02
  zero.param @"base_model.model.l1.lora_B.default.weight" : tensor<3x2xf32> init zeros
}

// -----

// Each merged weight is written once.
// expected-error @+1 {{merged_key 'l0.weight' appears twice}}
module attributes {zero.peft = #zero.peft<config = "{\22peft_type\22: \22LORA\22, \22r\22: 2}", prefix = "base_model.model.", layers = [#zero.lora<base = "base_model.model.l0.weight", a = "base_model.model.l0.lora_A.default.weight", b = "base_model.model.l0.lora_B.default.weight", scaling = 2.000000e+00, merged_key = "l0.weight", a_key = "base_model.model.l0.lora_A.weight", b_key = "base_model.model.l0.lora_B.weight">, #zero.lora<base = "base_model.model.l1.weight", a = "base_model.model.l1.lora_A.default.weight", b = "base_model.model.l1.lora_B.default.weight", scaling = 2.000000e+00, merged_key = "l0.weight", a_key = "base_model.model.l1.lora_A.weight", b_key = "base_model.model.l1.lora_B.weight">]>} {
  zero.param @"base_model.model.l0.weight" : tensor<3x4xf32> init normal std 0.02 frozen
  zero.param @"base_model.model.l0.lora_A.default.weight" : tensor<2x4xf32> init normal std 0.02
  zero.param @"base_model.model.l0.lora_B.default.weight" : tensor<3x2xf32> init zeros
  zero.param @"base_model.model.l1.weight" : tensor<3x4xf32> init normal std 0.02 frozen
  zero.param @"base_model.model.l1.lora_A.default.weight" : tensor<2x4xf32> init normal std 0.02
  zero.param @"base_model.model.l1.lora_B.default.weight" : tensor<3x2xf32> init zeros
}

// -----

// Each parameter is adapted once.
// expected-error @+1 {{parameter 'base_model.model.l0.weight' appears in two layers}}
module attributes {zero.peft = #zero.peft<config = "{\22peft_type\22: \22LORA\22, \22r\22: 2}", prefix = "base_model.model.", layers = [#zero.lora<base = "base_model.model.l0.weight", a = "base_model.model.l0.lora_A.default.weight", b = "base_model.model.l0.lora_B.default.weight", scaling = 2.000000e+00, merged_key = "l0.weight", a_key = "base_model.model.l0.lora_A.weight", b_key = "base_model.model.l0.lora_B.weight">, #zero.lora<base = "base_model.model.l0.weight", a = "base_model.model.l1.lora_A.default.weight", b = "base_model.model.l1.lora_B.default.weight", scaling = 2.000000e+00, merged_key = "l1.weight", a_key = "base_model.model.l1.lora_A.weight", b_key = "base_model.model.l1.lora_B.weight">]>} {
  zero.param @"base_model.model.l0.weight" : tensor<3x4xf32> init normal std 0.02 frozen
  zero.param @"base_model.model.l0.lora_A.default.weight" : tensor<2x4xf32> init normal std 0.02
  zero.param @"base_model.model.l0.lora_B.default.weight" : tensor<3x2xf32> init zeros
  zero.param @"base_model.model.l1.weight" : tensor<3x4xf32> init normal std 0.02 frozen
  zero.param @"base_model.model.l1.lora_A.default.weight" : tensor<2x4xf32> init normal std 0.02
  zero.param @"base_model.model.l1.lora_B.default.weight" : tensor<3x2xf32> init zeros
}

// -----

// The layers name parameters of the module.
// expected-error @+1 {{'builtin.module' op attribute 'zero.peft' adapts 'base_model.model.l1.weight', which is no zero.param of the module}}
module attributes {zero.peft = #zero.peft<config = "{\22peft_type\22: \22LORA\22, \22r\22: 2}", prefix = "base_model.model.", layers = [#zero.lora<base = "base_model.model.l1.weight", a = "base_model.model.l1.lora_A.default.weight", b = "base_model.model.l1.lora_B.default.weight", scaling = 2.000000e+00, merged_key = "l1.weight", a_key = "base_model.model.l1.lora_A.weight", b_key = "base_model.model.l1.lora_B.weight">]>} {
  zero.param @"base_model.model.l0.weight" : tensor<3x4xf32> init normal std 0.02 frozen
  zero.param @"base_model.model.l0.lora_A.default.weight" : tensor<2x4xf32> init normal std 0.02
  zero.param @"base_model.model.l0.lora_B.default.weight" : tensor<3x2xf32> init zeros
}

// -----

// a is [r, in], b is [out, r] of a base [out, in].
// expected-error @+1 {{'builtin.module' op attribute 'zero.peft' adapts 'base_model.model.l0.weight' 'tensor<3x4xf32>' with a 'tensor<2x4xf32>' and b 'tensor<3x1xf32>': a must be [r, in] and b [out, r] of a base [out, in], r > 0}}
module attributes {zero.peft = #zero.peft<config = "{\22peft_type\22: \22LORA\22, \22r\22: 2}", prefix = "base_model.model.", layers = [#zero.lora<base = "base_model.model.l0.weight", a = "base_model.model.l0.lora_A.default.weight", b = "base_model.model.l0.lora_B.default.weight", scaling = 2.000000e+00, merged_key = "l0.weight", a_key = "base_model.model.l0.lora_A.weight", b_key = "base_model.model.l0.lora_B.weight">]>} {
  zero.param @"base_model.model.l0.weight" : tensor<3x4xf32> init normal std 0.02 frozen
  zero.param @"base_model.model.l0.lora_A.default.weight" : tensor<2x4xf32> init normal std 0.02
  zero.param @"base_model.model.l0.lora_B.default.weight" : tensor<3x1xf32> init zeros
}

// -----

// r > 0.
// expected-error @+1 {{a must be [r, in] and b [out, r] of a base [out, in], r > 0}}
module attributes {zero.peft = #zero.peft<config = "{\22peft_type\22: \22LORA\22, \22r\22: 2}", prefix = "base_model.model.", layers = [#zero.lora<base = "base_model.model.l0.weight", a = "base_model.model.l0.lora_A.default.weight", b = "base_model.model.l0.lora_B.default.weight", scaling = 2.000000e+00, merged_key = "l0.weight", a_key = "base_model.model.l0.lora_A.weight", b_key = "base_model.model.l0.lora_B.weight">]>} {
  zero.param @"base_model.model.l0.weight" : tensor<3x4xf32> init normal std 0.02 frozen
  zero.param @"base_model.model.l0.lora_A.default.weight" : tensor<0x4xf32> init normal std 0.02
  zero.param @"base_model.model.l0.lora_B.default.weight" : tensor<3x0xf32> init zeros
}

// -----

// The base is frozen.
// expected-error @+1 {{'builtin.module' op attribute 'zero.peft' adapts 'base_model.model.l0.weight', which trains: a LoRA base must be frozen}}
module attributes {zero.peft = #zero.peft<config = "{\22peft_type\22: \22LORA\22, \22r\22: 2}", prefix = "base_model.model.", layers = [#zero.lora<base = "base_model.model.l0.weight", a = "base_model.model.l0.lora_A.default.weight", b = "base_model.model.l0.lora_B.default.weight", scaling = 2.000000e+00, merged_key = "l0.weight", a_key = "base_model.model.l0.lora_A.weight", b_key = "base_model.model.l0.lora_B.weight">]>} {
  zero.param @"base_model.model.l0.weight" : tensor<3x4xf32> init normal std 0.02
  zero.param @"base_model.model.l0.lora_A.default.weight" : tensor<2x4xf32> init normal std 0.02
  zero.param @"base_model.model.l0.lora_B.default.weight" : tensor<3x2xf32> init zeros
}

// -----

// The adapters train.
// expected-error @+1 {{'builtin.module' op attribute 'zero.peft' has adapter 'base_model.model.l0.lora_B.default.weight' frozen: LoRA adapters train}}
module attributes {zero.peft = #zero.peft<config = "{\22peft_type\22: \22LORA\22, \22r\22: 2}", prefix = "base_model.model.", layers = [#zero.lora<base = "base_model.model.l0.weight", a = "base_model.model.l0.lora_A.default.weight", b = "base_model.model.l0.lora_B.default.weight", scaling = 2.000000e+00, merged_key = "l0.weight", a_key = "base_model.model.l0.lora_A.weight", b_key = "base_model.model.l0.lora_B.weight">]>} {
  zero.param @"base_model.model.l0.weight" : tensor<3x4xf32> init normal std 0.02 frozen
  zero.param @"base_model.model.l0.lora_A.default.weight" : tensor<2x4xf32> init normal std 0.02
  zero.param @"base_model.model.l0.lora_B.default.weight" : tensor<3x2xf32> init zeros frozen
}

// -----

// Every other parameter starts with the prefix.
// expected-error @+1 {{'builtin.module' op attribute 'zero.peft' has prefix 'base_model.model.', which parameter 'lm_head.weight' does not start with}}
module attributes {zero.peft = #zero.peft<config = "{\22peft_type\22: \22LORA\22, \22r\22: 2}", prefix = "base_model.model.", layers = [#zero.lora<base = "base_model.model.l0.weight", a = "base_model.model.l0.lora_A.default.weight", b = "base_model.model.l0.lora_B.default.weight", scaling = 2.000000e+00, merged_key = "l0.weight", a_key = "base_model.model.l0.lora_A.weight", b_key = "base_model.model.l0.lora_B.weight">]>} {
  zero.param @"base_model.model.l0.weight" : tensor<3x4xf32> init normal std 0.02 frozen
  zero.param @"base_model.model.l0.lora_A.default.weight" : tensor<2x4xf32> init normal std 0.02
  zero.param @"base_model.model.l0.lora_B.default.weight" : tensor<3x2xf32> init zeros
  zero.param @"lm_head.weight" : tensor<4xf32> init zeros
}

// -----

// Only on a module.
// expected-error @+1 {{'zero.peft' is only valid on a module}}
zero.param @w : tensor<4xf32> init zeros {zero.peft = #zero.peft<config = "{\22peft_type\22: \22LORA\22, \22r\22: 2}", prefix = "base_model.model.", layers = []>}
