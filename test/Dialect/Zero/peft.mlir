// RUN: zero-opt %s | zero-opt | FileCheck %s
// RUN: zero-opt %s --mlir-print-op-generic | zero-opt | FileCheck %s

// A PEFT LoRA module: two adapted layers and a norm under the prefix; the
// attribute round-trips.

// CHECK: module attributes {zero.peft = #zero.peft<config = "{\22peft_type\22: \22LORA\22, \22r\22: 2}", prefix = "base_model.model.", layers = [#zero.lora<base = "base_model.model.l0.weight", a = "base_model.model.l0.lora_A.default.weight", b = "base_model.model.l0.lora_B.default.weight", scaling = 2.000000e+00, merged_key = "l0.weight", a_key = "base_model.model.l0.lora_A.weight", b_key = "base_model.model.l0.lora_B.weight">, #zero.lora<base = "base_model.model.l1.weight"
module attributes {zero.peft = #zero.peft<config = "{\22peft_type\22: \22LORA\22, \22r\22: 2}", prefix = "base_model.model.", layers = [#zero.lora<base = "base_model.model.l0.weight", a = "base_model.model.l0.lora_A.default.weight", b = "base_model.model.l0.lora_B.default.weight", scaling = 2.000000e+00, merged_key = "l0.weight", a_key = "base_model.model.l0.lora_A.weight", b_key = "base_model.model.l0.lora_B.weight">, #zero.lora<base = "base_model.model.l1.weight", a = "base_model.model.l1.lora_A.default.weight", b = "base_model.model.l1.lora_B.default.weight", scaling = 2.000000e+00, merged_key = "l1.weight", a_key = "base_model.model.l1.lora_A.weight", b_key = "base_model.model.l1.lora_B.weight">]>} {
  zero.param @"base_model.model.l0.weight" : tensor<3x4xf32> init normal std 0.02 frozen
  zero.param @"base_model.model.l0.lora_A.default.weight" : tensor<2x4xf32> init normal std 0.02
  zero.param @"base_model.model.l0.lora_B.default.weight" : tensor<3x2xf32> init zeros
  zero.param @"base_model.model.l1.weight" : tensor<3x4xf32> init normal std 0.02 frozen
  zero.param @"base_model.model.l1.lora_A.default.weight" : tensor<2x4xf32> init normal std 0.02
  zero.param @"base_model.model.l1.lora_B.default.weight" : tensor<3x2xf32> init zeros
  zero.param @"base_model.model.norm.weight" : tensor<4xf32> init ones frozen
}
