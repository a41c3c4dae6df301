module {
  zero.param @w : tensor<4xf32> init zeros
