// RUN: zero-opt %s -split-input-file -verify-diagnostics

// Strings that go into the program's JSON manifest (paths, parameter and
// adapter names) must be UTF-8: a quoted MLIR string may hold any bytes
// (\FF is the byte 0xFF), and llvm::json asserts on them. The verifiers name
// the string, its first bad byte and that byte's offset. UTF-8 paths are
// carried as they are (test/Conversion/ZeroToRuntime/utf8-strings.mlir).

// The optimizer's swap folder.
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    // expected-error @+1 {{nvme_path "/nv\FFme" is not valid UTF-8: byte 0xFF at offset 3 (the path goes into the program's JSON manifest)}}
    offload #zero.offload<optimizer = nvme, nvme_path = "/nv\FFme"> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// The parameters' swap folder (the fuzz finding of
// test/Fuzz/invalid-utf8-manifest.test); a Latin-1 name's byte.
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    // expected-error @+1 {{param_nvme_path "/donn\E9es" is not valid UTF-8: byte 0xE9 at offset 5}}
    offload #zero.offload<param = nvme, param_nvme_path = "/donn\E9es", param_buffer_count = 2> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// A sequence cut short: the offset is its first byte's.
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    // expected-error @+1 {{nvme_path "/caf\C3" is not valid UTF-8: byte 0xC3 at offset 4}}
    offload #zero.offload<optimizer = nvme, nvme_path = "/caf\C3"> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// A UTF-16 surrogate (U+D800) encoded as UTF-8, which JSON's UTF-8 excludes.
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    // expected-error @+1 {{nvme_path "/x\ED\A0\80" is not valid UTF-8: byte 0xED at offset 2}}
    offload #zero.offload<optimizer = nvme, nvme_path = "/x\ED\A0\80"> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// A parameter's name (also the manifest's, the checkpoints' and the
// exported safetensors' key).
// expected-error @+1 {{'zero.param' op name @"w\E9" is not valid UTF-8: byte 0xE9 at offset 1 (names go into the JSON manifest and reports)}}
zero.param @"w\E9" : tensor<4xf32> init zeros

// -----

// A name zero.hf_model ties to a parameter, and the parameter's.
// expected-error @+1 {{tied name "lm_head.\FF" is not valid UTF-8: byte 0xFF at offset 8 (it goes into the program's JSON manifest)}}
module attributes {zero.hf_model = #zero.hf_model<config = "{\22model_type\22: \22llama\22}", tied = {"lm_head.\FF" = "embed"}>} {
  zero.param @embed : tensor<4x2xf32> init zeros
}

// -----

// expected-error @+1 {{tied name's parameter "emb\FF" is not valid UTF-8: byte 0xFF at offset 3}}
module attributes {zero.hf_model = #zero.hf_model<config = "{\22model_type\22: \22llama\22}", tied = {"lm_head.weight" = "emb\FF"}>} {
}

// -----

// expected-error @+1 {{buffer name "s\FF" is not valid UTF-8: byte 0xFF at offset 1 (it goes into the program's JSON manifest)}}
module attributes {zero.hf_model = #zero.hf_model<config = "{\22model_type\22: \22llama\22}", buffers = {"s\FF" = dense<1.0> : tensor<1xf32>}>} {
}

// -----

// expected-error @+1 {{unused tensor name "pooler.\FF" is not valid UTF-8: byte 0xFF at offset 7 (it goes into the program's JSON manifest)}}
module attributes {zero.hf_model = #zero.hf_model<config = "{\22model_type\22: \22llama\22}", unused = ["pooler.\FF"]>} {
}

// -----

// zero.peft's prefix and its layers' names and keys.
// expected-error @+1 {{prefix "base_\FF." is not valid UTF-8: byte 0xFF at offset 5 (names go into the program's JSON manifest)}}
module attributes {zero.peft = #zero.peft<config = "{\22peft_type\22: \22LORA\22, \22r\22: 2}", prefix = "base_\FF.", layers = []>} {
}

// -----

// expected-error @+1 {{a layer's merged_key "l0.\E9" is not valid UTF-8: byte 0xE9 at offset 3}}
module attributes {zero.peft = #zero.peft<config = "{\22peft_type\22: \22LORA\22, \22r\22: 2}", prefix = "base_model.model.", layers = [#zero.lora<base = "base_model.model.l0.weight", a = "base_model.model.l0.lora_A.default.weight", b = "base_model.model.l0.lora_B.default.weight", scaling = 2.000000e+00, merged_key = "l0.\E9", a_key = "base_model.model.l0.lora_A.weight", b_key = "base_model.model.l0.lora_B.weight">]>} {
  zero.param @"base_model.model.l0.weight" : tensor<3x4xf32> init normal std 0.02 frozen
  zero.param @"base_model.model.l0.lora_A.default.weight" : tensor<2x4xf32> init normal std 0.02
  zero.param @"base_model.model.l0.lora_B.default.weight" : tensor<3x2xf32> init zeros
}

// -----

// expected-error @+1 {{a layer's a_key "\FF" is not valid UTF-8: byte 0xFF at offset 0}}
module attributes {zero.peft = #zero.peft<config = "{\22peft_type\22: \22LORA\22, \22r\22: 2}", prefix = "base_model.model.", layers = [#zero.lora<base = "base_model.model.l0.weight", a = "base_model.model.l0.lora_A.default.weight", b = "base_model.model.l0.lora_B.default.weight", scaling = 2.000000e+00, merged_key = "l0.weight", a_key = "\FF", b_key = "base_model.model.l0.lora_B.weight">]>} {
  zero.param @"base_model.model.l0.weight" : tensor<3x4xf32> init normal std 0.02 frozen
  zero.param @"base_model.model.l0.lora_A.default.weight" : tensor<2x4xf32> init normal std 0.02
  zero.param @"base_model.model.l0.lora_B.default.weight" : tensor<3x2xf32> init zeros
}
