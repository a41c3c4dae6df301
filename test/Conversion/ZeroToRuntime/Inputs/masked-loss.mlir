// A loss divided by the sum of a float mask input over the batch, clamped
// to 1 (test/Engine/Inputs/custom_loss.py as zero-import writes it): on
// more than one micro batch, zero-token-mean's global sum.
module {
  zero.param @emb.weight : tensor<24x16xf32> init normal std 0.9597466396740048
  zero.param @mix.weight : tensor<16x16xf32> init normal std 0.1500347139627021
  zero.param @mix.bias : tensor<16xf32> init normal std 0.15397037626938304
  zero.param @head.weight : tensor<24x16xf32> init normal std 0.1437750444303225
  zero.train_step @train(%input_ids: tensor<4x8xi64>, %completion_mask: tensor<4x8xf32>, %advantages: tensor<4xf32>) optimizer #zero.optimizer<kind = adamw, lr = 0.001, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.01> precision #zero.precision<kind = fp32> attributes {input_names = ["input_ids", "completion_mask", "advantages"]} {
    %p0 = zero.get_param @emb.weight : tensor<24x16xf32>
    %embedding1 = nn.embedding %p0[%input_ids] : tensor<24x16xf32>, tensor<4x8xi64> -> tensor<4x8x16xf32>
    %p2 = zero.get_param @mix.weight : tensor<16x16xf32>
    %matmul3 = nn.matmul %embedding1, %p2 transpose_rhs : tensor<4x8x16xf32>, tensor<16x16xf32> -> tensor<4x8x16xf32>
    %p4 = zero.get_param @mix.bias : tensor<16xf32>
    %add5 = nn.add %matmul3, %p4 : tensor<4x8x16xf32>, tensor<16xf32>
    %tanh6 = nn.tanh %add5 : tensor<4x8x16xf32>
    %p7 = zero.get_param @head.weight : tensor<24x16xf32>
    %matmul8 = nn.matmul %tanh6, %p7 transpose_rhs : tensor<4x8x16xf32>, tensor<24x16xf32> -> tensor<4x8x24xf32>
    %gather9 = nn.gather %matmul8[%input_ids] : tensor<4x8x24xf32>, tensor<4x8xi64> -> tensor<4x8xf32>
    %reshape10 = nn.reshape %gather9 : tensor<4x8xf32> -> tensor<4x8x1xf32>
    %reshape11 = nn.reshape %reshape10 : tensor<4x8x1xf32> -> tensor<4x8xf32>
    %logsumexp12 = nn.logsumexp %matmul8 : tensor<4x8x24xf32> -> tensor<4x8xf32>
    %scale13 = nn.scale %logsumexp12 by -1.0 : tensor<4x8xf32>
    %add14 = nn.add %reshape11, %scale13 : tensor<4x8xf32>, tensor<4x8xf32>
    %stop_gradient15 = nn.stop_gradient %add14 : tensor<4x8xf32>
    %scale16 = nn.scale %stop_gradient15 by -1.0 : tensor<4x8xf32>
    %add17 = nn.add %add14, %scale16 : tensor<4x8xf32>, tensor<4x8xf32>
    %exp18 = nn.exp %add17 : tensor<4x8xf32>
    %clamp19 = nn.clamp %exp18 min 0.8 max 1.2 : tensor<4x8xf32>
    %reshape20 = nn.reshape %advantages : tensor<4xf32> -> tensor<4x1xf32>
    %fill21 = nn.fill 1.0 : tensor<1x8xf32>
    %matmul22 = nn.matmul %reshape20, %fill21 : tensor<4x1xf32>, tensor<1x8xf32> -> tensor<4x8xf32>
    %mul23 = nn.mul %exp18, %matmul22 : tensor<4x8xf32>, tensor<4x8xf32>
    %reshape24 = nn.reshape %advantages : tensor<4xf32> -> tensor<4x1xf32>
    %fill25 = nn.fill 1.0 : tensor<1x8xf32>
    %matmul26 = nn.matmul %reshape24, %fill25 : tensor<4x1xf32>, tensor<1x8xf32> -> tensor<4x8xf32>
    %mul27 = nn.mul %clamp19, %matmul26 : tensor<4x8xf32>, tensor<4x8xf32>
    %minimum28 = nn.minimum %mul23, %mul27 : tensor<4x8xf32>
    %scale29 = nn.scale %minimum28 by -1.0 : tensor<4x8xf32>
    %mul30 = nn.mul %scale29, %completion_mask : tensor<4x8xf32>, tensor<4x8xf32>
    %fill31 = nn.fill 1.0 : tensor<1x8xf32>
    %matmul32 = nn.matmul %mul30, %fill31 transpose_rhs : tensor<4x8xf32>, tensor<1x8xf32> -> tensor<4x1xf32>
    %reduce_sum33 = nn.reduce_sum %matmul32 : tensor<4x1xf32> -> tensor<f32>
    %fill34 = nn.fill 1.0 : tensor<1x8xf32>
    %matmul35 = nn.matmul %completion_mask, %fill34 transpose_rhs : tensor<4x8xf32>, tensor<1x8xf32> -> tensor<4x1xf32>
    %reduce_sum36 = nn.reduce_sum %matmul35 : tensor<4x1xf32> -> tensor<f32>
    %clamp37 = nn.clamp %reduce_sum36 min 1.0 : tensor<f32>
    %reciprocal38 = nn.reciprocal %clamp37 : tensor<f32>
    %mul39 = nn.mul %reduce_sum33, %reciprocal38 : tensor<f32>, tensor<f32>
    zero.return %mul39 : tensor<f32>
  }
}
