// A PEFT-style LoRA model written by hand: two linear layers whose weights
// (PEFT's base_layer) and biases are frozen, each adapted with r = 2 and
// scaling 2 (lora_alpha 4), PEFT's names under the prefix.
module attributes {zero.hf_model = #zero.hf_model<config = "{\22model_type\22: \22toy\22}">, zero.peft = #zero.peft<config = "{\22peft_type\22: \22LORA\22, \22r\22: 2, \22lora_alpha\22: 4, \22target_modules\22: [\22l0\22, \22l1\22]}", prefix = "base_model.model.", layers = [#zero.lora<base = "base_model.model.l0.base_layer.weight", a = "base_model.model.l0.lora_A.default.weight", b = "base_model.model.l0.lora_B.default.weight", scaling = 2.000000e+00, merged_key = "l0.weight", a_key = "base_model.model.l0.lora_A.weight", b_key = "base_model.model.l0.lora_B.weight">, #zero.lora<base = "base_model.model.l1.base_layer.weight", a = "base_model.model.l1.lora_A.default.weight", b = "base_model.model.l1.lora_B.default.weight", scaling = 2.000000e+00, merged_key = "l1.weight", a_key = "base_model.model.l1.lora_A.weight", b_key = "base_model.model.l1.lora_B.weight">]>} {
  zero.param @base_model.model.l0.base_layer.weight : tensor<6x4xf32> init normal std 5.000000e-01 frozen
  zero.param @base_model.model.l0.base_layer.bias : tensor<6xf32> init normal std 1.000000e-01 frozen
  zero.param @base_model.model.l0.lora_A.default.weight : tensor<2x4xf32> init normal std 3.000000e-01
  zero.param @base_model.model.l0.lora_B.default.weight : tensor<6x2xf32> init normal std 3.000000e-01
  zero.param @base_model.model.l1.base_layer.weight : tensor<3x6xf32> init normal std 4.000000e-01 frozen
  zero.param @base_model.model.l1.lora_A.default.weight : tensor<2x6xf32> init normal std 3.000000e-01
  zero.param @base_model.model.l1.lora_B.default.weight : tensor<3x2xf32> init normal std 3.000000e-01
  zero.train_step @train(%x: tensor<8x4xf32>, %y: tensor<8xi32>) optimizer #zero.optimizer<kind = adam, lr = 1.000000e-02> precision #zero.precision<kind = fp32> {
    %w0 = zero.get_param @base_model.model.l0.base_layer.weight : tensor<6x4xf32>
    %h0 = nn.matmul %x, %w0 transpose_rhs : tensor<8x4xf32>, tensor<6x4xf32> -> tensor<8x6xf32>
    %a0 = zero.get_param @base_model.model.l0.lora_A.default.weight : tensor<2x4xf32>
    %u0 = nn.matmul %x, %a0 transpose_rhs : tensor<8x4xf32>, tensor<2x4xf32> -> tensor<8x2xf32>
    %b0 = zero.get_param @base_model.model.l0.lora_B.default.weight : tensor<6x2xf32>
    %v0 = nn.matmul %u0, %b0 transpose_rhs : tensor<8x2xf32>, tensor<6x2xf32> -> tensor<8x6xf32>
    %s0 = nn.scale %v0 by 2.000000e+00 : tensor<8x6xf32>
    %y0 = nn.add %h0, %s0 : tensor<8x6xf32>, tensor<8x6xf32>
    %c0 = zero.get_param @base_model.model.l0.base_layer.bias : tensor<6xf32>
    %z0 = nn.add %y0, %c0 : tensor<8x6xf32>, tensor<6xf32>
    %r0 = nn.relu %z0 : tensor<8x6xf32>
    %w1 = zero.get_param @base_model.model.l1.base_layer.weight : tensor<3x6xf32>
    %h1 = nn.matmul %r0, %w1 transpose_rhs : tensor<8x6xf32>, tensor<3x6xf32> -> tensor<8x3xf32>
    %a1 = zero.get_param @base_model.model.l1.lora_A.default.weight : tensor<2x6xf32>
    %u1 = nn.matmul %r0, %a1 transpose_rhs : tensor<8x6xf32>, tensor<2x6xf32> -> tensor<8x2xf32>
    %b1 = zero.get_param @base_model.model.l1.lora_B.default.weight : tensor<3x2xf32>
    %v1 = nn.matmul %u1, %b1 transpose_rhs : tensor<8x2xf32>, tensor<3x2xf32> -> tensor<8x3xf32>
    %s1 = nn.scale %v1 by 2.000000e+00 : tensor<8x3xf32>
    %y1 = nn.add %h1, %s1 : tensor<8x3xf32>, tensor<8x3xf32>
    %loss = nn.softmax_cross_entropy %y1, %y : tensor<8x3xf32>, tensor<8xi32> -> tensor<f32>
    zero.return %loss : tensor<f32>
  }
}
