// Compute ops GPT-2 does not use: relu, erf GELU, silu, swiglu, tanh, exp,
// softplus, log, xielu, elementwise multiplication, scaling, a rotary
// embedding, an RMS norm, logsumexp and reduce_max over the last dimension
// and a row softmax (their derivatives add relu_grad, gelu_erf_grad,
// silu_grad, swiglu_grad, tanh_grad, exp_grad, softplus_grad, log_grad,
// xielu_grad, mul, scale, the inverse rope, rms_norm_grad, logsumexp_grad,
// reduce_max_grad and softmax_grad), labels shifted inside the loss, and a
// policy-gradient loss's clamp, minimum, maximum, where, stop_gradient,
// reciprocal and gather of ids (adding clamp_grad, minimum_grad,
// maximum_grad, where_grad, reciprocal_grad and gather_grad).
zero.param @w : tensor<4x6xf32> init normal std 0.1
zero.param @g : tensor<6xf32> init ones
zero.param @ap : tensor<1xf32> init ones
zero.param @an : tensor<1xf32> init ones
zero.train_step @step(%x: tensor<8x4xf32>, %y: tensor<8xi64>, %ids: tensor<8xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %w = zero.get_param @w : tensor<4x6xf32>
  %g = zero.get_param @g : tensor<6xf32>
  %ap = zero.get_param @ap : tensor<1xf32>
  %an = zero.get_param @an : tensor<1xf32>
  %h = nn.matmul %x, %w : tensor<8x4xf32>, tensor<4x6xf32> -> tensor<8x6xf32>
  %r = nn.relu %h : tensor<8x6xf32>
  %ge = nn.gelu_erf %r : tensor<8x6xf32>
  %q = nn.silu %ge : tensor<8x6xf32>
  %sw = nn.swiglu %q, %h : tensor<8x6xf32>
  %th = nn.tanh %sw : tensor<8x6xf32>
  %ex = nn.exp %th : tensor<8x6xf32>
  %sp = nn.softplus %ex beta 1.0 threshold 20.0 : tensor<8x6xf32>
  %lg = nn.log %sp : tensor<8x6xf32>
  %xi = nn.xielu %lg, %ap, %an beta 0.5 eps -1.0e-6 : tensor<8x6xf32>, tensor<1xf32>
  %cl = nn.clamp %xi min -5.0e-01 max 2.0 : tensor<8x6xf32>
  %mn = nn.minimum %cl, %xi : tensor<8x6xf32>
  %mxm = nn.maximum %mn, %lg : tensor<8x6xf32>
  %sg = nn.stop_gradient %lg : tensor<8x6xf32>
  %wh = nn.where %sg, %mxm, %xi : tensor<8x6xf32>
  %rc = nn.reciprocal %wh : tensor<8x6xf32>
  %gi = nn.gather %rc[%ids] : tensor<8x6xf32>, tensor<8xi64> -> tensor<8xf32>
  %gc = nn.reshape %gi : tensor<8xf32> -> tensor<8x1xf32>
  %ones = nn.fill 1.0 : tensor<1x6xf32>
  %gw = nn.matmul %gc, %ones : tensor<8x1xf32>, tensor<1x6xf32> -> tensor<8x6xf32>
  %ga = nn.add %rc, %gw : tensor<8x6xf32>, tensor<8x6xf32>
  %m = nn.mul %ga, %g : tensor<8x6xf32>, tensor<6xf32>
  %s = nn.scale %m by 0.5 : tensor<8x6xf32>
  %s4 = nn.reshape %s : tensor<8x6xf32> -> tensor<4x1x2x6xf32>
  %ro = nn.rope %s4 theta 1.000000e+04 : tensor<4x1x2x6xf32>
  %s2 = nn.reshape %ro : tensor<4x1x2x6xf32> -> tensor<8x6xf32>
  %rn = nn.rms_norm %s2, %g eps 1.0e-5 : tensor<8x6xf32>, tensor<6xf32>
  %rn3 = nn.reshape %rn : tensor<8x6xf32> -> tensor<8x3x2xf32>
  %lse = nn.logsumexp %rn3 : tensor<8x3x2xf32> -> tensor<8x3xf32>
  %mx = nn.reduce_max %rn3 : tensor<8x3x2xf32> -> tensor<8x3xf32>
  %cat = nn.concat %lse, %mx axis 1 : tensor<8x3xf32>, tensor<8x3xf32> -> tensor<8x6xf32>
  %p = nn.softmax %cat : tensor<8x6xf32>
  %ys = nn.shift_labels %y fill -100 : tensor<8xi64>
  %loss = nn.softmax_cross_entropy %p, %ys ignore_index -100 : tensor<8x6xf32>, tensor<8xi64> -> tensor<f32>
  zero.return %loss : tensor<f32>
}
