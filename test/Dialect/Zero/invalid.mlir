// RUN: zero-opt %s -split-input-file -verify-diagnostics

// Every condition the zero dialect's verifiers reject, one per case: the
// parameter, optimizer and precision declarations, the train step, parameter
// uses, the partition layout, every collective, and the optimizer ops.
// Symbol checks (unknown symbols, layouts) run after the per-op checks.

// Checks that the 'normal' initializer needs a std.
// expected-error @+1 {{'zero.param' op 'normal' initializer needs a 'std'}}
zero.param @w : tensor<4x3xf32> init normal

// -----

// Checks that 'zeros' takes no std.
// expected-error @+1 {{'zero.param' op 'std' only applies to the 'normal' initializer}}
zero.param @w : tensor<4x3xf32> init zeros std 2.0e-02

// -----

// Checks that 'ones' takes no std.
// expected-error @+1 {{'zero.param' op 'std' only applies to the 'normal' initializer}}
zero.param @w : tensor<4x3xf32> init ones std 2.0e-02

// -----

// Checks that std must be positive (negative).
// expected-error @+1 {{'zero.param' op std must be positive, got -2.000000e-02}}
zero.param @w : tensor<4x3xf32> init normal std -2.0e-02

// -----

// Checks that std must be positive (zero).
// expected-error @+1 {{'zero.param' op std must be positive, got 0.000000e+00}}
zero.param @w : tensor<4x3xf32> init normal std 0.0

// -----

// Checks that std must be finite.
// expected-error @+1 {{'zero.param' op std must be positive, got INF}}
zero.param @w : tensor<4x3xf32> init normal std 0x7FF0000000000000

// -----

// Checks that parameter shapes are static.
// expected-error @+1 {{'zero.param' op type must be a statically shaped tensor, got 'tensor<?x3xf32>'}}
zero.param @w : tensor<?x3xf32> init zeros

// -----

// Checks that parameter dimensions are positive.
// expected-error @+1 {{'zero.param' op dimensions must be positive, got 'tensor<0x3xf32>'}}
zero.param @w : tensor<0x3xf32> init zeros

// -----

// Checks that the element count must fit in int64.
// expected-error @+1 {{'zero.param' op element count of 'tensor<9223372036854775807x4xf32>' overflows int64}}
zero.param @w : tensor<9223372036854775807x4xf32> init zeros

// -----

// Checks that integer parameters are rejected.
// expected-error @+1 {{'zero.param' op attribute 'type' failed to satisfy constraint: type attribute of ranked tensor of 32-bit float or 16-bit float or bfloat16 type values}}
zero.param @w : tensor<4x3xi32> init zeros

// -----

// Checks that f64 parameters are rejected.
// expected-error @+1 {{'zero.param' op attribute 'type' failed to satisfy constraint: type attribute of ranked tensor of 32-bit float or 16-bit float or bfloat16 type values}}
zero.param @w : tensor<4x3xf64> init zeros

// -----

// Checks that unranked parameters are rejected.
// expected-error @+1 {{'zero.param' op attribute 'type' failed to satisfy constraint: type attribute of ranked tensor of 32-bit float or 16-bit float or bfloat16 type values}}
zero.param @w : tensor<*xf32> init zeros

// -----

// Checks that the compute type is a float type.
// expected-error @+1 {{'zero.param' op compute type must be f32, f16 or bf16, got 'i8'}}
zero.param @w : tensor<4x3xf32> init zeros compute i8

// -----

// Checks that the compute type is not f64.
// expected-error @+1 {{'zero.param' op compute type must be f32, f16 or bf16, got 'f64'}}
zero.param @w : tensor<4x3xf32> init zeros compute f64

// -----

// Checks that parameters live in the module.
func.func @f() {
  // expected-error @+1 {{'zero.param' op expects parent op 'builtin.module'}}
  zero.param @w : tensor<4x3xf32> init zeros
  return
}

// -----

// Checks that unknown initializers are rejected (reported at the next token).
// expected-error @+2 {{expected ::mlir::zero::InitKind to be one of: normal, zeros, ones}}
// expected-error @+2 {{failed to parse Zero_InitKindAttr parameter 'value'}}
zero.param @w : tensor<4xf32> init uniform
zero.param @v : tensor<4xf32> init zeros

// -----

// Checks that lr must be positive (zero).
// expected-error @+2 {{optimizer lr must be positive, got 0.000000e+00}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 0.0>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that SGD (no betas in optimizers.def) rejects a beta1.
// expected-error @+2 {{optimizer sgd has no beta1, got 8.000000e-01}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = sgd, lr = 1.0e-2, beta1 = 0.8>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that SGD (no int8 row in optimizers.def) rejects 8-bit states.
// expected-error @+2 {{optimizer sgd has no int8 states}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = sgd, lr = 1.0e-2, states = int8>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that Lion (no bf16 row in optimizers.def) rejects bf16 states.
// expected-error @+2 {{optimizer lion has no bf16 states}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = lion, lr = 1.0e-2, states = bf16>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that an unknown state precision is refused by name.
zero.train_step @train(%x: tensor<8x4xf32>)
    // expected-error @+2 {{expected one of [f32, bf16, int8] for optimizer state precision, got: fp8}}
    // expected-error @+1 {{failed to parse Zero_OptimizerAttr parameter 'states'}}
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-2, states = fp8>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that AdamW (no Muon half in optimizers.def) rejects Muon's lr.
// expected-error @+2 {{optimizer adamw has no muon_lr, got 2.000000e-02}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-2, muon_lr = 2.0e-2>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that SGD rejects Muon's Nesterov switch (its own is `nesterov`).
// expected-error @+2 {{optimizer sgd has no muon_nesterov}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = sgd, lr = 1.0e-2, muon_nesterov = false>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that Muon rejects SGD's momentum (its own is muon_momentum).
// expected-error @+2 {{optimizer muon has no momentum, got 9.000000e-01}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = muon, lr = 1.0e-3, momentum = 0.9>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks torch.optim.Muon's bound on the Newton-Schulz steps.
// expected-error @+2 {{optimizer ns_steps must be in [1, 100), got 100}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = muon, lr = 1.0e-3, ns_steps = 100>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that Muon's momentum is a lerp weight in [0, 1).
// expected-error @+2 {{optimizer muon_momentum must be in [0, 1), got 1.000000e+00}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = muon, lr = 1.0e-3, muon_momentum = 1.0>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that Muon's Newton-Schulz eps must be positive.
// expected-error @+2 {{optimizer ns_eps must be positive, got 0.000000e+00}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = muon, lr = 1.0e-3, ns_eps = 0.0>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that an adjust_lr_fn torch does not have is refused by name.
zero.train_step @train(%x: tensor<8x4xf32>)
    // expected-error @+2 {{expected one of [original, match_rms_adamw] for Muon learning-rate adjustment, got: spectral}}
    // expected-error @+1 {{failed to parse Zero_OptimizerAttr parameter 'adjust_lr_fn'}}
    optimizer #zero.optimizer<kind = muon, lr = 1.0e-3, adjust_lr_fn = spectral>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that Adam (no momentum in optimizers.def) rejects a momentum.
// expected-error @+2 {{optimizer adam has no momentum, got 9.000000e-01}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-2, momentum = 0.9>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks torch.optim.SGD's rule: Nesterov needs a momentum and no
// dampening.
// expected-error @+2 {{optimizer nesterov requires a momentum > 0 and zero dampening, got momentum 9.000000e-01 and dampening 1.000000e-01}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = sgd, lr = 1.0e-2, momentum = 0.9, dampening = 0.1, nesterov = true>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that a negative momentum is rejected, as torch does.
// expected-error @+2 {{optimizer momentum must be >= 0, got -1.000000e-01}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = sgd, lr = 1.0e-2, momentum = -0.1>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that Lion (no eps in optimizers.def) rejects an eps.
// expected-error @+2 {{optimizer lion has no eps, got 1.000000e-06}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = lion, lr = 1.0e-4, eps = 1.0e-6>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that Lion (no bias correction in optimizers.def) rejects turning
// it off.
// expected-error @+2 {{optimizer lion has no bias_correction}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = lion, lr = 1.0e-4, bias_correction = false>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that lr must be positive (negative).
// expected-error @+2 {{optimizer lr must be positive, got -1.000000e-03}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = -1.0e-3>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that beta1 must be below 1.
// expected-error @+2 {{optimizer beta1 must be in [0, 1), got 1.000000e+00}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3, beta1 = 1.0>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that beta1 must be >= 0.
// expected-error @+2 {{optimizer beta1 must be in [0, 1), got -1.000000e-01}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3, beta1 = -0.1>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that beta2 must be below 1.
// expected-error @+2 {{optimizer beta2 must be in [0, 1), got 1.500000e+00}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3, beta2 = 1.5>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that beta2 must be >= 0.
// expected-error @+2 {{optimizer beta2 must be in [0, 1), got -5.000000e-01}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3, beta2 = -0.5>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that eps must be positive (zero).
// expected-error @+2 {{optimizer eps must be positive, got 0.000000e+00}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3, eps = 0.0>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that eps must be positive (negative).
// expected-error @+2 {{optimizer eps must be positive, got -1.000000e-08}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3, eps = -1.0e-8>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that weight_decay must be >= 0.
// expected-error @+2 {{optimizer weight_decay must be >= 0, got -1.000000e-01}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-3, weight_decay = -0.1>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that unknown optimizers are rejected.
zero.train_step @train(%x: tensor<8x4xf32>)
    // expected-error @+2 {{expected one of [adam, adamw, lion, sgd, muon, adafactor, nadam] for optimizer, got: lamb}}
    // expected-error @+1 {{failed to parse Zero_OptimizerAttr parameter 'kind'}}
    optimizer #zero.optimizer<kind = lamb, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that initial_scale_power must be >= 0.
// expected-error @+3 {{initial_scale_power must be in [0, 64], got -1}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp16, initial_scale_power = -1> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that initial_scale_power must be <= 64.
// expected-error @+3 {{initial_scale_power must be in [0, 64], got 65}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp16, initial_scale_power = 65> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that loss_scale_window must be >= 1.
// expected-error @+3 {{loss_scale_window must be >= 1, got 0}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp16, loss_scale_window = 0> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that hysteresis must be >= 1.
// expected-error @+3 {{hysteresis must be >= 1, got 0}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp16, hysteresis = 0> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that min_loss_scale must be positive (zero).
// expected-error @+3 {{min_loss_scale must be positive, got 0.000000e+00}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp16, min_loss_scale = 0.0> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that min_loss_scale must be positive (negative).
// expected-error @+3 {{min_loss_scale must be positive, got -1.000000e+00}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp16, min_loss_scale = -1.0> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that a static loss scale is not negative.
// expected-error @+3 {{loss_scale must be 0 (dynamic) or a positive static scale, got -1.000000e+00}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp16, loss_scale = -1.0> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that steps_per_print is at least 1.
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    // expected-error @+1 {{steps_per_print must be >= 1, got 0}}
    attributes {zero.logging = #zero.logging<steps_per_print = 0>} {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that zero.logging is a #zero.logging on a train step.
// expected-error @+1 {{'zero.param' op attribute 'zero.logging' is only valid on zero.train_step}}
zero.param @w : tensor<4x3xf32> init zeros {zero.logging = #zero.logging<steps_per_print = 2>}

// -----

// expected-error @+1 {{attribute 'zero.logging' must be a #zero.logging, got 10 : i64}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> attributes {zero.logging = 10} {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that the train step needs an optimizer and a precision attribute.
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.precision<kind = fp32>
    // expected-error @+1 {{expected #zero.optimizer and #zero.precision}}
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that gradient_clipping must be >= 0.
// expected-error @+1 {{'zero.train_step' op gradient_clipping must be >= 0 (0 disables it), got -1.000000e+00}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> gradient_clipping -1.0 {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that every input has a batch dimension.
// expected-error @+1 {{'zero.train_step' op input #1 must be a statically shaped tensor with a batch dimension, got 'tensor<f32>'}}
zero.train_step @train(%x: tensor<8x4xf32>, %s: tensor<f32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that inputs are statically shaped.
// expected-error @+1 {{'zero.train_step' op input #0 must be a statically shaped tensor with a batch dimension, got 'tensor<?x4xf32>'}}
zero.train_step @train(%x: tensor<?x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that inputs are tensors.
// expected-error @+1 {{'zero.train_step' op input #0 must be a statically shaped tensor with a batch dimension, got 'i32'}}
zero.train_step @train(%x: i32)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that inputs agree on the batch dimension.
// expected-error @+1 {{'zero.train_step' op inputs disagree on the batch dimension: input #0 has batch 8, input #1 'tensor<4xi64>' has batch 4}}
zero.train_step @train(%x: tensor<8x4xf32>, %y: tensor<4xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that the loss is a 0-d tensor.
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<1xf32>
  // expected-error @+1 {{'zero.return' op operand #0 must be 0-d f32 tensor, but got 'tensor<1xf32>'}}
  zero.return %loss : tensor<1xf32>
}

// -----

// Checks that the loss is f32.
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<bf16>
  // expected-error @+1 {{'zero.return' op operand #0 must be 0-d f32 tensor, but got 'tensor<bf16>'}}
  zero.return %loss : tensor<bf16>
}

// -----

// Checks that the body ends with zero.return.
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  // expected-error @+1 {{block with no terminator}}
  %loss = nn.fill 0.0 : tensor<f32>
}

// -----

// Checks that the body is not empty.
// expected-error @+1 {{'zero.train_step' op expects a non-empty block}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
}

// -----

// Checks that zero.return only ends a train step.
func.func @f(%loss: tensor<f32>) {
  // expected-error @+1 {{'zero.return' op expects parent op 'zero.train_step'}}
  zero.return %loss : tensor<f32>
}

// -----

// Checks that get_param references a declared parameter.
zero.param @w : tensor<4x3xf32> init zeros
func.func @f() {
  // expected-error @+1 {{'zero.get_param' op references unknown parameter @v}}
  %w = zero.get_param @v : tensor<4x3xf32>
  return
}

// -----

// Checks that get_param references a parameter, not a partition.
zero.param @w : tensor<4x3xf32> init zeros
zero.partition @g stage 0 world_size 2 alignment 1 numel 12 padded 12 params [@w] offsets [0]
func.func @f() {
  // expected-error @+1 {{'zero.get_param' op references unknown parameter @g}}
  %w = zero.get_param @g : tensor<4x3xf32>
  return
}

// -----

// Checks that get_param yields the parameter's compute type.
zero.param @w : tensor<4x3xf32> init zeros compute bf16
func.func @f() {
  // expected-error @+1 {{'zero.get_param' op result type 'tensor<4x3xf32>' does not match parameter @w of compute type 'tensor<4x3xbf16>'}}
  %w = zero.get_param @w : tensor<4x3xf32>
  return
}

// -----

// Checks that get_param yields the parameter's shape.
zero.param @w : tensor<4x3xf32> init zeros
func.func @f() {
  // expected-error @+1 {{'zero.get_param' op result type 'tensor<3x4xf32>' does not match parameter @w of compute type 'tensor<4x3xf32>'}}
  %w = zero.get_param @w : tensor<3x4xf32>
  return
}

// -----

// Checks that a gathered buffer has the compute element type.
zero.param @w : tensor<4x3xf32> init zeros compute bf16
zero.partition @g stage 3 world_size 2 alignment 2 numel 12 padded 12 params [@w] offsets [0]
func.func @f(%full: tensor<12xf16>) {
  // expected-error @+1 {{'zero.get_param' op source element type 'f16' differs from the compute type 'bf16' of parameter @w}}
  %w = zero.get_param @w from %full : tensor<12xf16> -> tensor<4x3xbf16>
  return
}

// -----

// Checks that a gathered buffer is the full buffer of the parameter's partition.
zero.param @w : tensor<4x3xf32> init zeros compute bf16
zero.partition @g stage 3 world_size 2 alignment 2 numel 12 padded 12 params [@w] offsets [0]
func.func @f(%full: tensor<8xbf16>) {
  // expected-error @+1 {{'zero.get_param' op source 'tensor<8xbf16>' is not the gathered buffer of partition @g (12 elements)}}
  %w = zero.get_param @w from %full : tensor<8xbf16> -> tensor<4x3xbf16>
  return
}

// -----

// Checks that a dynamically shaped source is no gathered buffer (the
// verifier asked it for its element count: an assertion).
zero.param @w : tensor<4x3xf32> init zeros compute bf16
zero.partition @g stage 3 world_size 2 alignment 2 numel 12 padded 12 params [@w] offsets [0]
func.func @f(%full: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.get_param' op source 'tensor<?xbf16>' is not the gathered buffer of partition @g (12 elements)}}
  %w = zero.get_param @w from %full : tensor<?xbf16> -> tensor<4x3xbf16>
  return
}

// -----

// Checks that only stage-3 parameters are read from a gathered buffer.
zero.param @w : tensor<4x3xf32> init zeros compute bf16
zero.partition @g stage 2 world_size 2 alignment 2 numel 12 padded 12 params [@w] offsets [0]
func.func @f(%full: tensor<12xbf16>) {
  // expected-error @+1 {{'zero.get_param' op reads parameter @w from a gathered buffer, but its partition @g is stage 2 (only stage 3 gathers)}}
  %w = zero.get_param @w from %full : tensor<12xbf16> -> tensor<4x3xbf16>
  return
}

// -----

// Checks that a parameter read from a gathered buffer belongs to a partition.
zero.param @w : tensor<4x3xf32> init zeros compute bf16
func.func @f(%full: tensor<12xbf16>) {
  // expected-error @+1 {{'zero.get_param' op reads parameter @w from a gathered buffer, but no partition holds it}}
  %w = zero.get_param @w from %full : tensor<12xbf16> -> tensor<4x3xbf16>
  return
}

// -----

// Checks that grad references a declared parameter.
func.func @f(%g: tensor<4x3xf32>) {
  // expected-error @+1 {{'zero.grad' op references unknown parameter @w}}
  zero.grad @w, %g : tensor<4x3xf32>
  return
}

// -----

// Checks that a gradient has its parameter's shape.
zero.param @w : tensor<4x3xf32> init zeros
func.func @f(%g: tensor<3x4xf32>) {
  // expected-error @+1 {{'zero.grad' op gradient type 'tensor<3x4xf32>' does not match the shape of parameter @w 'tensor<4x3xf32>'}}
  zero.grad @w, %g : tensor<3x4xf32>
  return
}

// -----

// Checks that the stage is at most 3.
zero.param @w : tensor<4x3xf32> init zeros
// expected-error @+1 {{'zero.partition' op stage must be 0, 1, 2 or 3, got 4}}
zero.partition @g stage 4 world_size 2 alignment 2 numel 12 padded 12 params [@w] offsets [0]

// -----

// Checks that the stage is not negative.
zero.param @w : tensor<4x3xf32> init zeros
// expected-error @+1 {{'zero.partition' op stage must be 0, 1, 2 or 3, got -1}}
zero.partition @g stage -1 world_size 2 alignment 2 numel 12 padded 12 params [@w] offsets [0]

// -----

// Checks that world_size is at least 1.
zero.param @w : tensor<4x3xf32> init zeros
// expected-error @+1 {{'zero.partition' op world_size must be >= 1, got 0}}
zero.partition @g stage 1 world_size 0 alignment 2 numel 12 padded 12 params [@w] offsets [0]

// -----

// Checks that alignment is at least 1.
zero.param @w : tensor<4x3xf32> init zeros
// expected-error @+1 {{'zero.partition' op alignment must be >= 1, got 0}}
zero.partition @g stage 1 world_size 2 alignment 0 numel 12 padded 12 params [@w] offsets [0]

// -----

// Checks that world_size * alignment does not overflow.
zero.param @w : tensor<4x3xf32> init zeros
// expected-error @+1 {{'zero.partition' op world_size * alignment = 1048576 * 17592186044416 overflows int64}}
zero.partition @g stage 2 world_size 1048576 alignment 17592186044416 numel 12 padded 12 params [@w] offsets [0]

// -----

// Checks that a partition holds at least one parameter.
// expected-error @+1 {{'zero.partition' op needs at least one parameter}}
zero.partition @g stage 2 world_size 2 alignment 2 numel 0 padded 0 params [] offsets []

// -----

// Checks that numel is not negative.
zero.param @w : tensor<4x3xf32> init zeros
// expected-error @+1 {{'zero.partition' op numel must be >= 0, got -4}}
zero.partition @g stage 0 world_size 2 alignment 1 numel -4 padded -4 params [@w] offsets [0]

// -----

// Checks that the padded size is at least numel.
zero.param @w : tensor<4x3xf32> init zeros
// expected-error @+1 {{'zero.partition' op padded size 8 is below numel 12}}
zero.partition @g stage 1 world_size 2 alignment 2 numel 12 padded 8 params [@w] offsets [0]

// -----

// Checks that the padded size is a multiple of world_size * alignment.
zero.param @w : tensor<4x3xf32> init zeros
// expected-error @+1 {{'zero.partition' op padded size 14 is not a multiple of world_size * alignment = 8}}
zero.partition @g stage 1 world_size 4 alignment 2 numel 12 padded 14 params [@w] offsets [0]

// -----

// Checks that the padding is minimal.
zero.param @w : tensor<4x3xf32> init zeros
// expected-error @+1 {{'zero.partition' op padding 12 is not minimal (world_size * alignment = 8)}}
zero.partition @g stage 1 world_size 4 alignment 2 numel 12 padded 24 params [@w] offsets [0]

// -----

// Checks that a stage-0 partition is not padded.
zero.param @w : tensor<4x3xf32> init zeros
// expected-error @+1 {{'zero.partition' op a stage-0 partition is not sharded: padded size must equal numel 12}}
zero.partition @g stage 0 world_size 2 alignment 2 numel 12 padded 16 params [@w] offsets [0]

// -----

// Checks that there is one offset per parameter.
zero.param @w : tensor<4x3xf32> init zeros
// expected-error @+1 {{'zero.partition' op has 1 params but 2 offsets}}
zero.partition @g stage 1 world_size 2 alignment 2 numel 12 padded 12 params [@w] offsets [0, 12]

// -----

// Checks that there is one offset per parameter at stage 0 too.
zero.param @w : tensor<4x3xf32> init zeros
zero.param @b : tensor<3xf32> init zeros
// expected-error @+1 {{'zero.partition' op has 2 params but 1 offsets}}
zero.partition @g stage 0 world_size 2 alignment 1 numel 15 padded 15 params [@w, @b] offsets [0]

// -----

// Checks that parameters are contiguous.
zero.param @w : tensor<4x3xf32> init zeros
zero.param @b : tensor<3xf32> init zeros
// expected-error @+1 {{'zero.partition' op parameter @b is at offset 13, expected 12 (parameters are contiguous in the order listed; only Muon's owner-computes, with owners, leaves gaps)}}
zero.partition @g stage 2 world_size 2 alignment 2 numel 15 padded 16 params [@w, @b] offsets [0, 13]

// -----

// Checks that the first parameter is at offset 0.
zero.param @w : tensor<4x3xf32> init zeros
// expected-error @+1 {{'zero.partition' op parameter @w is at offset 4, expected 0 (parameters are contiguous in the order listed; only Muon's owner-computes, with owners, leaves gaps)}}
zero.partition @g stage 2 world_size 2 alignment 2 numel 12 padded 12 params [@w] offsets [4]

// -----

// Checks that Muon's owners (owner-computes) only shard: stage 0 keeps
// every matrix on every rank.
zero.param @w : tensor<4x3xf32> init zeros
// expected-error @+1 {{'zero.partition' op owners need a sharded trainable partition (stage 1-3, not frozen)}}
zero.partition @g stage 0 world_size 2 alignment 1 numel 12 padded 12 params [@w] offsets [0] owners [0]

// -----

// Checks that owners is one per parameter.
zero.param @w : tensor<4x3xf32> init zeros
zero.param @b : tensor<4xf32> init zeros
// expected-error @+1 {{'zero.partition' op has 2 params but 1 owners}}
zero.partition @g stage 1 world_size 2 alignment 1 numel 16 padded 16 params [@w, @b] offsets [0, 12] owners [0]

// -----

// Checks that an owner is a rank of the partition or -1 (AdamW's).
zero.param @w : tensor<4x3xf32> init zeros
zero.param @b : tensor<4xf32> init zeros
// expected-error @+1 {{'zero.partition' op owner 2 is not a rank of 2 (or -1: AdamW's)}}
zero.partition @g stage 1 world_size 2 alignment 1 numel 16 padded 16 params [@w, @b] offsets [0, 12] owners [2, -1]

// -----

// Checks that owners' gaps do not let parameters overlap: @b from 10
// overlaps @w's [0, 12).
zero.param @w : tensor<4x3xf32> init zeros
zero.param @b : tensor<4xf32> init zeros
// expected-error @+1 {{'zero.partition' op parameter @b is at offset 10, which overlaps the parameter before it (ending at 12)}}
zero.partition @g stage 1 world_size 2 alignment 1 numel 14 padded 24 params [@w, @b] offsets [0, 10] owners [0, -1]

// -----

// Checks that numel is the end of the last parameter with gaps too.
zero.param @w : tensor<4x3xf32> init zeros
zero.param @b : tensor<4xf32> init zeros
// expected-error @+1 {{'zero.partition' op parameters end at element 20 but numel is 16}}
zero.partition @g stage 1 world_size 2 alignment 1 numel 16 padded 24 params [@w, @b] offsets [0, 16] owners [0, -1]

// -----

// Checks that an owned parameter lies whole in its owner's shard: @w's 12
// elements from 4 cross rank 0's shard [0, 8).
zero.param @w : tensor<4x3xf32> init zeros
zero.param @b : tensor<4xf32> init zeros
// expected-error @+1 {{'zero.partition' op parameter @w (elements [4, 16)) is not whole in its owner rank 0's shard [0, 8)}}
zero.partition @g stage 1 world_size 2 alignment 1 numel 16 padded 16 params [@b, @w] offsets [0, 4] owners [-1, 0]

// -----

// Checks that owners own matrices only (Muon's 2-D parameters).
zero.param @w : tensor<4x3xf32> init zeros
zero.param @b : tensor<4xf32> init zeros
// expected-error @+1 {{'zero.partition' op owned parameter @b is not a matrix (Muon's owners own 2-D parameters)}}
zero.partition @g stage 1 world_size 2 alignment 1 numel 16 padded 16 params [@w, @b] offsets [0, 12] owners [-1, 1]

// -----

// Checks that partitions reference declared parameters.
zero.param @w : tensor<4x3xf32> init zeros
// expected-error @+1 {{'zero.partition' op references unknown parameter @v}}
zero.partition @g stage 2 world_size 2 alignment 2 numel 12 padded 12 params [@v] offsets [0]

// -----

// Checks that a parameter is listed once.
zero.param @w : tensor<4x3xf32> init zeros
// expected-error @+1 {{'zero.partition' op lists parameter @w twice}}
zero.partition @g stage 2 world_size 2 alignment 2 numel 24 padded 24 params [@w, @w] offsets [0, 12]

// -----

// Checks that numel is the parameters' total element count.
zero.param @w : tensor<4x3xf32> init zeros
// expected-error @+1 {{'zero.partition' op parameters end at element 12 but numel is 16}}
zero.partition @g stage 2 world_size 2 alignment 2 numel 16 padded 16 params [@w] offsets [0]

// -----

// Checks that all_gather references a declared partition.
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.all_gather' op references unknown partition @nope}}
  zero.all_gather group @nope in params [0, 4)
  return
}

// -----

// Checks that an in-place all_gather range ends within numel.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.all_gather' op range [0, 122) is empty or outside the 121 elements of partition @s2}}
  zero.all_gather group @s2 in params [0, 122)
  return
}

// -----

// Checks that an in-place all_gather range is not empty.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.all_gather' op range [5, 5) is empty or outside the 121 elements of partition @s2}}
  zero.all_gather group @s2 in params [5, 5)
  return
}

// -----

// Checks that an in-place all_gather range does not start below 0.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.all_gather' op range [-1, 5) is empty or outside the 121 elements of partition @s2}}
  zero.all_gather group @s2 in params [-1, 5)
  return
}

// -----

// Checks that all_gather gathers the params buffer.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.all_gather' op gathers the 'params' buffer, not 'grads'}}
  zero.all_gather group @s2 in grads [0, 5)
  return
}

// -----

// Checks that all_gather is not both in place and a value.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.all_gather' op has either a buffer range (in place) or a result, exactly one}}
  %0 = zero.all_gather group @s2 in params [0, 5) : tensor<128xbf16>
  return
}

// -----

// Checks that all_gather is either in place or a value.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.all_gather' op has either a buffer range (in place) or a result, exactly one}}
  zero.all_gather group @s2
  return
}

// -----

// Checks that an in-place all_gather has a range.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.all_gather' op in-place form needs a range [begin, end)}}
  "zero.all_gather"() <{group = @s2, buffer = #zero<buffer params>, resultSegmentSizes = array<i32: 0, 0>}> : () -> ()
  return
}

// -----

// Checks that a value all_gather has no range.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.all_gather' op a range [begin, end) needs a buffer (in-place form)}}
  %0 = "zero.all_gather"() <{group = @s3, begin = 0 : i64, end = 4 : i64, resultSegmentSizes = array<i32: 1, 0>}> : () -> tensor<128xbf16>
  return
}

// -----

// Checks that the value form of all_gather is stage 3 only.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.all_gather' op gathers shards into a new buffer only at stage 3, @s2 is stage 2}}
  %0 = zero.all_gather group @s2 : tensor<128xbf16>
  return
}

// -----

// Checks that the in-place form of all_gather is not stage 3.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.all_gather' op in-place gather of 'params' needs a stage 1 or 2 partition, @s3 is stage 3}}
  zero.all_gather group @s3 in params [0, 5)
  return
}

// -----

// Checks that the in-place form of all_gather is not stage 0.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.all_gather' op in-place gather of 'params' needs a stage 1 or 2 partition, @s0 is stage 0}}
  zero.all_gather group @s0 in params [0, 5)
  return
}

// -----

// Checks that a gathered buffer has padded_numel elements.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.all_gather' op result 'tensor<121xbf16>' must hold the 128 (padded) elements of partition @s3}}
  %0 = zero.all_gather group @s3 : tensor<121xbf16>
  return
}

// -----

// Checks that a gathered buffer is statically shaped.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.all_gather' op result 'tensor<?xbf16>' must hold the 128 (padded) elements of partition @s3}}
  %0 = zero.all_gather group @s3 : tensor<?xbf16>
  return
}

// -----

// Checks that a gathered buffer has the compute element type.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.all_gather' op result element type must be the compute type 'bf16', got 'f32'}}
  %0 = zero.all_gather group @s3 : tensor<128xf32>
  return
}

// -----

// Checks that reduce_scatter references a declared partition.
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.reduce_scatter' op references unknown partition @nope}}
  zero.reduce_scatter group @nope in grads [0, 121)
  return
}

// -----

// Checks that reduce_scatter is not both in place and from sources.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.reduce_scatter' op has either a buffer (in place) or sources, not both}}
  "zero.reduce_scatter"(%ga) <{group = @s1, buffer = #zero<buffer grads>, begin = 0 : i64, end = 100 : i64, source_offsets = array<i64: 0>}> : (tensor<10x10xbf16>) -> ()
  return
}

// -----

// Checks that reduce_scatter is either in place or from sources.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.reduce_scatter' op needs a buffer (in place) or source gradients}}
  zero.reduce_scatter group @s2 [0, 121)
  return
}

// -----

// Checks that reduce_scatter reduces the grads buffer.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.reduce_scatter' op reduces the 'grads' buffer, not 'params'}}
  zero.reduce_scatter group @s1 in params [0, 121)
  return
}

// -----

// Checks that the in-place form of reduce_scatter is stage 1 only.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.reduce_scatter' op reduces the full 'grads' buffer in place only at stage 1, @s2 is stage 2}}
  zero.reduce_scatter group @s2 in grads [0, 121)
  return
}

// -----

// Checks that the source form of reduce_scatter is not stage 1.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.reduce_scatter' op reduces source gradients only at stages 2-3, @s1 is stage 1}}
  zero.reduce_scatter group @s1 [0, 100) from %ga at [0] : tensor<10x10xbf16>
  return
}

// -----

// Checks that the sources of reduce_scatter cover the range.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.reduce_scatter' op sources provide 100 elements (the last one 100), which does not cover the range of 121 elements exactly}}
  zero.reduce_scatter group @s2 [0, 121) from %ga at [0] : tensor<10x10xbf16>
  return
}

// -----

// Checks that the sources of reduce_scatter do not go beyond the range.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.reduce_scatter' op sources provide 121 elements (the last one 21), which does not cover the range of 21 elements exactly}}
  zero.reduce_scatter group @s2 [0, 21) from %ga, %gc at [0, 0] : tensor<10x10xbf16>, tensor<21xbf16>
  return
}

// -----

// Checks that a source offset lies within its source.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.reduce_scatter' op source offset 100 is outside a source of 100 elements}}
  zero.reduce_scatter group @s2 [0, 10) from %ga at [100] : tensor<10x10xbf16>
  return
}

// -----

// Checks that there is one source offset per source.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.reduce_scatter' op has 1 sources but 2 source offsets}}
  "zero.reduce_scatter"(%ga) <{group = @s2, begin = 0 : i64, end = 100 : i64, source_offsets = array<i64: 0, 0>}> : (tensor<10x10xbf16>) -> ()
  return
}

// -----

// Checks that an in-place reduce_scatter range ends within numel.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.reduce_scatter' op range [0, 200) is empty or outside the 121 elements of partition @s1}}
  zero.reduce_scatter group @s1 in grads [0, 200)
  return
}

// -----

// Checks that a source-form reduce_scatter range lies within numel.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.reduce_scatter' op range [100, 200) is empty or outside the 121 elements of partition @s2}}
  zero.reduce_scatter group @s2 [100, 200) from %ga at [0] : tensor<10x10xbf16>
  return
}

// -----

// Checks that reduce references a declared partition.
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.reduce' op references unknown partition @nope}}
  zero.reduce group @nope [0, 100) from %ga at [0] : tensor<10x10xbf16>
  return
}

// -----

// Checks that the source form of reduce is not stage 1.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.reduce' op reduces source gradients only at stages 2-3, @s1 is stage 1}}
  zero.reduce group @s1 [0, 100) from %ga at [0] : tensor<10x10xbf16>
  return
}

// -----

// Checks that the in-place form of reduce is stage 1 only.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.reduce' op reduces the full 'grads' buffer in place only at stage 1, @s3 is stage 3}}
  zero.reduce group @s3 in grads [0, 100)
  return
}

// -----

// Checks that reduce reduces the grads buffer.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.reduce' op reduces the 'grads' buffer, not 'master'}}
  zero.reduce group @s1 in master [0, 100)
  return
}

// -----

// Checks that a source offset is not negative.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.reduce' op source offset -1 is outside a source of 100 elements}}
  zero.reduce group @s2 [0, 10) from %ga at [-1] : tensor<10x10xbf16>
  return
}

// -----

// Checks that sources are statically shaped.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.reduce' op source 'tensor<?xbf16>' must have a static shape}}
  zero.reduce group @s2 [0, 10) from %dyn at [0] : tensor<?xbf16>
  return
}

// -----

// Checks that an in-place reduce range is not empty.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.reduce' op range [10, 10) is empty or outside the 121 elements of partition @s1}}
  zero.reduce group @s1 in grads [10, 10)
  return
}

// -----

// Checks that all_reduce references a declared partition.
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.all_reduce' op references unknown partition @nope}}
  %t = zero.all_reduce sum group @nope in grads [0, 121) token !zero.token
  return
}

// -----

// Checks that an in-place all_reduce sums.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.all_reduce' op in-place gradient reduction must be 'sum', got 'max'}}
  "zero.all_reduce"() <{kind = #zero<reduce_kind max>, group = @s0, buffer = #zero<buffer grads>, begin = 0 : i64, end = 121 : i64, operandSegmentSizes = array<i32: 0>, resultSegmentSizes = array<i32: 0, 0>}> : () -> ()
  return
}

// -----

// Checks that an in-place all_reduce is not an overflow_norm.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.all_reduce' op in-place gradient reduction must be 'sum', got 'overflow_norm'}}
  "zero.all_reduce"() <{kind = #zero<reduce_kind overflow_norm>, group = @s0, buffer = #zero<buffer grads>, begin = 0 : i64, end = 121 : i64, operandSegmentSizes = array<i32: 0>, resultSegmentSizes = array<i32: 0, 0>}> : () -> ()
  return
}

// -----

// Checks that the in-place form of all_reduce is stage 0 only.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.all_reduce' op all-reduces the 'grads' buffer in place only at stage 0, @s1 is stage 1}}
  zero.all_reduce sum group @s1 in grads [0, 121)
  return
}

// -----

// Checks that all_reduce reduces the grads buffer in place.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.all_reduce' op reduces the 'grads' buffer in place, not 'master'}}
  zero.all_reduce sum group @s0 in master [0, 121)
  return
}

// -----

// Checks that all_reduce is not both in place and a value.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.all_reduce' op has either a buffer range (in place) or an input, exactly one}}
  %0 = "zero.all_reduce"(%stats) <{kind = #zero<reduce_kind sum>, group = @s0, buffer = #zero<buffer grads>, begin = 0 : i64, end = 121 : i64, operandSegmentSizes = array<i32: 1>, resultSegmentSizes = array<i32: 1, 0>}> : (tensor<2xf32>) -> tensor<2xf32>
  return
}

// -----

// Checks that all_reduce is either in place or a value.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.all_reduce' op has either a buffer range (in place) or an input, exactly one}}
  "zero.all_reduce"() <{kind = #zero<reduce_kind sum>, group = @s0, operandSegmentSizes = array<i32: 0>, resultSegmentSizes = array<i32: 0, 0>}> : () -> ()
  return
}

// -----

// Checks that an in-place all_reduce has no result.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.all_reduce' op in-place form has no result value}}
  %0 = "zero.all_reduce"() <{kind = #zero<reduce_kind sum>, group = @s0, buffer = #zero<buffer grads>, begin = 0 : i64, end = 121 : i64, operandSegmentSizes = array<i32: 0>, resultSegmentSizes = array<i32: 1, 0>}> : () -> tensor<2xf32>
  return
}

// -----

// Checks that an in-place all_reduce has a range.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.all_reduce' op in-place form needs a range [begin, end)}}
  "zero.all_reduce"() <{kind = #zero<reduce_kind sum>, group = @s0, buffer = #zero<buffer grads>, operandSegmentSizes = array<i32: 0>, resultSegmentSizes = array<i32: 0, 0>}> : () -> ()
  return
}

// -----

// Checks that a value all_reduce has no range.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.all_reduce' op a range [begin, end) needs a buffer (in-place form)}}
  %0 = "zero.all_reduce"(%stats) <{kind = #zero<reduce_kind sum>, group = @s0, begin = 0 : i64, end = 2 : i64, operandSegmentSizes = array<i32: 1>, resultSegmentSizes = array<i32: 1, 0>}> : (tensor<2xf32>) -> tensor<2xf32>
  return
}

// -----

// Checks that a value all_reduce has a result.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.all_reduce' op value form needs a result of the input's type 'tensor<2xf32>'}}
  "zero.all_reduce"(%stats) <{kind = #zero<reduce_kind sum>, group = @s0, operandSegmentSizes = array<i32: 1>, resultSegmentSizes = array<i32: 0, 0>}> : (tensor<2xf32>) -> ()
  return
}

// -----

// Checks that overflow_norm reduces two elements.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.all_reduce' op 'overflow_norm' reduces a tensor<2xf32> (flag, squared norm), got 'tensor<3xf32>'}}
  %0 = zero.all_reduce overflow_norm %stats3 group @s0 : tensor<3xf32> -> tensor<3xf32>
  return
}

// -----

// Checks that integer counts are summed, not reduced as statistics.
zero.param @a : tensor<10x10xbf16> init zeros
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 100 padded 100 params [@a] offsets [0]
func.func @f(%counts: tensor<2xi64>) {
  // expected-error @+1 {{'zero.all_reduce' op an integer value (a router's expert counts) is reduced by 'sum', not 'overflow_norm'}}
  %0 = zero.all_reduce overflow_norm %counts group @s0 : tensor<2xi64> -> tensor<2xi64>
  return
}

// -----

// Checks that integer counts are reduced synchronously.
zero.param @a : tensor<10x10xbf16> init zeros
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 100 padded 100 params [@a] offsets [0]
func.func @f(%counts: tensor<8xi64>) {
  // expected-error @+1 {{'zero.all_reduce' op an integer value (a router's expert counts) is reduced synchronously: it has no token}}
  %0, %t = zero.all_reduce sum %counts group @s0 : tensor<8xi64> -> tensor<8xi64> token !zero.token
  return
}

// -----

// Checks that a value all_reduce returns the input type.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.all_reduce' op result type 'tensor<2xf32>' must be the input type 'tensor<3xf32>'}}
  %0 = zero.all_reduce sum %stats3 group @s0 : tensor<3xf32> -> tensor<2xf32>
  return
}

// -----

// Checks that an in-place all_reduce range ends within numel.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.all_reduce' op range [100, 122) is empty or outside the 121 elements of partition @s0}}
  zero.all_reduce sum group @s0 in grads [100, 122)
  return
}

// -----

// Checks that prefetch references a declared partition.
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.prefetch' op references unknown partition @nope}}
  %p, %t = zero.prefetch group @nope : tensor<128xbf16>
  return
}

// -----

// Checks that only stage-3 partitions are prefetched.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.prefetch' op prefetches only stage-3 partitions, @s2 is stage 2}}
  %p, %t = zero.prefetch group @s2 : tensor<128xbf16>
  return
}

// -----

// Checks that a prefetched buffer has padded_numel elements.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.prefetch' op result 'tensor<121xbf16>' must hold the 128 (padded) elements of partition @s3}}
  %p, %t = zero.prefetch group @s3 : tensor<121xbf16>
  return
}

// -----

// Checks that a prefetched buffer has the compute element type.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.prefetch' op result element type must be the compute type 'bf16', got 'f32'}}
  %p, %t = zero.prefetch group @s3 : tensor<128xf32>
  return
}

// -----

// Checks that free's offset comes with a size.
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.free' op offset and size must be given together}}
  "zero.free"(%gc) {offset = 0 : i64} : (tensor<21xbf16>) -> ()
  return
}

// -----

// Checks that free's size comes with an offset.
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.free' op offset and size must be given together}}
  "zero.free"(%gc) {size = 4 : i64} : (tensor<21xbf16>) -> ()
  return
}

// -----

// Checks that a freed range ends within the buffer.
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.free' op range at offset 20 of size 2 is empty or outside the buffer of 21 elements}}
  zero.free %gc[20, 2] : tensor<21xbf16>
  return
}

// -----

// Checks that a freed range is not empty.
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.free' op range at offset 0 of size 0 is empty or outside the buffer of 21 elements}}
  zero.free %gc[0, 0] : tensor<21xbf16>
  return
}

// -----

// Checks that a freed range does not start below 0.
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.free' op range at offset -1 of size 2 is empty or outside the buffer of 21 elements}}
  zero.free %gc[-1, 2] : tensor<21xbf16>
  return
}

// -----

// Checks that a freed range needs a static buffer.
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.free' op freeing a range needs a statically shaped buffer, got 'tensor<?xbf16>'}}
  zero.free %dyn[0, 2] : tensor<?xbf16>
  return
}

// -----

// Checks that check_overflow names at least one partition.
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.check_overflow' op needs at least one partition}}
  %0 = zero.check_overflow groups [] scale %scale divisor 1.0 : tensor<2xf32>
  return
}

// -----

// Checks that check_overflow returns two elements.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.check_overflow' op result must be tensor<2xf32> (overflow flag, squared norm), got 'tensor<3xf32>'}}
  %0 = zero.check_overflow groups [@s2] scale %scale divisor 1.0 : tensor<3xf32>
  return
}

// -----

// Checks that the check_overflow divisor is at least 1.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.check_overflow' op divisor must be finite and >= 1, got 5.000000e-01}}
  %0 = zero.check_overflow groups [@s2] scale %scale divisor 0.5 : tensor<2xf32>
  return
}

// -----

// Checks that the check_overflow divisor is finite.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.check_overflow' op divisor must be finite and >= 1, got INF}}
  %0 = zero.check_overflow groups [@s2] scale %scale divisor 0x7FF0000000000000 : tensor<2xf32>
  return
}

// -----

// Checks that check_overflow references declared partitions.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.check_overflow' op references unknown partition @nope}}
  %0 = zero.check_overflow groups [@s2, @nope] scale %scale divisor 1.0 : tensor<2xf32>
  return
}

// -----

// Checks that check_overflow references partitions, not parameters.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.check_overflow' op references unknown partition @a}}
  %0 = zero.check_overflow groups [@a] scale %scale divisor 1.0 : tensor<2xf32>
  return
}

// -----

// Checks that adam takes two-element stats.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.optimizer_step' op stats must be tensor<2xf32> (overflow flag, squared norm), got 'tensor<3xf32>'}}
  zero.optimizer_step group @s2 stats %stats3 scale %scale skip %skip divisor 4.0 : tensor<3xf32>
  return
}

// -----

// Checks that the adam divisor is at least 1.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.optimizer_step' op divisor must be finite and >= 1, got 0.000000e+00}}
  zero.optimizer_step group @s2 stats %stats scale %scale skip %skip divisor 0.0 : tensor<2xf32>
  return
}

// -----

// Checks that the adam divisor is not NaN.
zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s2 stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.optimizer_step' op divisor must be finite and >= 1, got nan}}
  zero.optimizer_step group @s2 stats %stats scale %scale skip %skip divisor 0x7FF8000000000000 : tensor<2xf32>
  return
}

// -----

// Checks that adam references a declared partition.
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.optimizer_step' op references unknown partition @nope}}
  zero.optimizer_step group @nope stats %stats scale %scale skip %skip divisor 4.0 : tensor<2xf32>
  return
}

// -----

// Checks that zero.cast preserves the element count.
func.func @f(%ga: tensor<10x10xbf16>, %gc: tensor<21xbf16>, %stats: tensor<2xf32>, %stats3: tensor<3xf32>, %scale: tensor<f32>, %skip: i1, %dyn: tensor<?xbf16>) {
  // expected-error @+1 {{'zero.cast' op element count must be preserved: 'tensor<21xbf16>' -> 'tensor<20xf32>'}}
  %0 = zero.cast %gc : tensor<21xbf16> to tensor<20xf32>
  return
}

// -----

// Checks that zero.free's phase is one of the five.
func.func @bad_phase(%b: tensor<4xf32>) {
  // expected-error @+1 {{expected a phase (micro_step, last_micro_step, step_end, boundary or post_step), got 'later'}}
  zero.free %b phase later : tensor<4xf32>
  return
}

// -----

// Checks that zero.transfer parses its phase as zero.free does, after a range.
func.func @bad_transfer_phase() {
  // expected-error @+1 {{expected a phase (micro_step, last_micro_step, step_end, boundary or post_step), got 'soon'}}
  %t = zero.transfer group @flat grads[0, 4) to host_grads phase soon -> !zero.token
  return
}

// -----

// Checks that the schedule's stage is 0-3.
zero.train_step @bad_stage(%x: tensor<4x2xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    // expected-error @+1 {{stage must be 0, 1, 2 or 3, got 4}}
    schedule #zero.schedule<stage = 4, world_size = 2, global_batch = 8> {
  %l = nn.fill 0.0 : tensor<f32>
  zero.return %l : tensor<f32>
}

// -----

// Checks that the global batch divides over world size x accumulation steps.
zero.train_step @bad_global_batch(%x: tensor<4x2xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    // expected-error @+1 {{global_batch 12 must be a positive multiple of world_size x accumulation_steps = 8}}
    schedule #zero.schedule<stage = 1, world_size = 4, global_batch = 12, accumulation_steps = 2> {
  %l = nn.fill 0.0 : tensor<f32>
  zero.return %l : tensor<f32>
}

// -----

// Checks that the inputs hold one micro batch of the schedule's global batch.
// expected-error @+1 {{'zero.train_step' op inputs hold a batch of 4, but the schedule's global batch 16 over world size 2 x 1 accumulation steps is 8 per micro step}}
zero.train_step @bad_micro_batch(%x: tensor<4x2xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 1, world_size = 2, global_batch = 16> {
  %l = nn.fill 0.0 : tensor<f32>
  zero.return %l : tensor<f32>
}

// -----

// Checks that the schedule agrees with the partitions (one source of truth
// for stage and world size).
zero.param @w : tensor<4xf32> init zeros
zero.partition @g stage 2 world_size 2 alignment 2 numel 4 padded 4 params [@w] offsets [0]
// expected-error @+1 {{'zero.train_step' op schedule has stage 1 and world size 2, but zero.partition @g has stage 2 and world size 2}}
zero.train_step @disagrees(%x: tensor<4x2xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 1, world_size = 2, global_batch = 8> {
  %l = nn.fill 0.0 : tensor<f32>
  zero.return %l : tensor<f32>
}

// -----

// Checks that a partitioned module's step records its schedule.
zero.param @w : tensor<4xf32> init zeros
zero.partition @g stage 2 world_size 2 alignment 2 numel 4 padded 4 params [@w] offsets [0]
// expected-error @+1 {{'zero.train_step' op has no #zero.schedule, but the module has zero.partition @g (zero-partition records both)}}
zero.train_step @unscheduled(%x: tensor<4x2xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %l = nn.fill 0.0 : tensor<f32>
  zero.return %l : tensor<f32>
}

// -----

// Checks that zero.plan holds a #zero.memory_plan.
// expected-error @+1 {{'zero.train_step' op attribute 'zero.plan' must be a #zero.memory_plan, got {arena_bytes = 0 : i64}}}
zero.train_step @plan_untyped(%x: tensor<2x2xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    attributes {zero.plan = {arena_bytes = 0 : i64}} {
  %l = nn.fill 0.0 : tensor<f32>
  zero.return %l : tensor<f32>
}

// -----

// Checks that zero.plan is only on a train step.
zero.train_step @plan_on_op(%x: tensor<2x2xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  // expected-error @+1 {{'nn.fill' op attribute 'zero.plan' is only valid on zero.train_step}}
  %l = nn.fill 0.0 {zero.plan = #zero.memory_plan<persistent_bytes = 0, arena_bytes = 0, scratch_bytes = 0, peak_bytes = 0>} : tensor<f32>
  zero.return %l : tensor<f32>
}

// -----

// Checks that the plan's byte counts are non-negative.
// expected-error @+1 {{memory_plan byte counts must be non-negative}}
#neg = #zero.memory_plan<persistent_bytes = 0, arena_bytes = 0, scratch_bytes = -1, peak_bytes = -1>

// -----

// Checks that the arenas' sizes are multiples of their alignment.
// expected-error @+1 {{memory_plan persistent_bytes and arena_bytes must be multiples of 64 (the arenas' alignment)}}
#unaligned = #zero.memory_plan<persistent_bytes = 0, arena_bytes = 100, scratch_bytes = 0, peak_bytes = 100>

// -----

// Checks that the plan's total fits in int64.
// expected-error @+1 {{memory_plan byte counts overflow int64}}
#overflow = #zero.memory_plan<persistent_bytes = 9223372036854775744, arena_bytes = 64, scratch_bytes = 0, peak_bytes = 0>

// -----

// Checks that the peak is the sum of the arenas and the kernel scratch.
// expected-error @+1 {{memory_plan peak_bytes 512 must be persistent_bytes + arena_bytes + scratch_bytes = 544}}
#peak = #zero.memory_plan<persistent_bytes = 256, arena_bytes = 256, scratch_bytes = 32, peak_bytes = 512>

// -----

// Checks that zero.buffers holds a #zero.buffer_offsets.
zero.param @w : tensor<4xf32> init zeros
// expected-error @+1 {{'zero.partition' op attribute 'zero.buffers' must be a #zero.buffer_offsets, got {params = 0 : i64}}}
zero.partition @g stage 0 world_size 1 alignment 1 numel 4 padded 4 params [@w] offsets [0] {zero.buffers = {params = 0 : i64}}

// -----

// Checks that zero.buffers is only on a partition.
// expected-error @+1 {{'zero.param' op attribute 'zero.buffers' is only valid on zero.partition}}
zero.param @w : tensor<4xf32> init zeros {zero.buffers = #zero.buffer_offsets<params = 0, grads = 64, master = 128, exp_avg = 192, exp_avg_sq = 256>}

// -----

// Checks that every persistent buffer is 64-byte aligned.
// expected-error @+1 {{buffer_offsets grads must be a non-negative multiple of 64, got 32}}
#buffers = #zero.buffer_offsets<params = 0, grads = 32, master = 128, exp_avg = 192, exp_avg_sq = 256>

// -----

// Checks that the optional master buffer is aligned too.
// expected-error @+1 {{buffer_offsets master must be a non-negative multiple of 64, got 100}}
#buffers = #zero.buffer_offsets<params = 0, grads = 64, master = 100, exp_avg = 192, exp_avg_sq = 256>

// -----

// Checks that fp32 parameters have no master buffer: they are their own
// masters.
zero.param @w : tensor<4xf32> init zeros
// expected-error @+1 {{'zero.partition' op buffers #zero.buffer_offsets<params = 0, grads = 64, master = 128, exp_avg = 192, exp_avg_sq = 256> have a master buffer, but parameter @w computes in 'f32' (fp32 parameters are their own masters)}}
zero.partition @g stage 0 world_size 1 alignment 1 numel 4 padded 4 params [@w] offsets [0]
    {zero.buffers = #zero.buffer_offsets<params = 0, grads = 64, master = 128, exp_avg = 192, exp_avg_sq = 256>}

// -----

// Checks that 16-bit parameters have their fp32 master buffer.
zero.param @w : tensor<4xf32> init zeros compute bf16
// expected-error @+1 {{'zero.partition' op buffers #zero.buffer_offsets<params = 0, grads = 64, exp_avg = 128, exp_avg_sq = 192> lack a master buffer, but parameter @w computes in 'bf16' (16-bit parameters need fp32 masters)}}
zero.partition @g stage 0 world_size 1 alignment 1 numel 4 padded 4 params [@w] offsets [0]
    {zero.buffers = #zero.buffer_offsets<params = 0, grads = 64, exp_avg = 128, exp_avg_sq = 192>}

// -----

// Checks that zero.input_offsets is an i64 array.
// expected-error @+1 {{'zero.train_step' op attribute 'zero.input_offsets' must be an array<i64: ...>, got [0]}}
zero.train_step @inputs_untyped(%x: tensor<2x2xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    attributes {zero.input_offsets = [0]} {
  %l = nn.fill 0.0 : tensor<f32>
  zero.return %l : tensor<f32>
}

// -----

// Checks that zero.input_offsets is only on a train step.
zero.train_step @inputs_on_op(%x: tensor<2x2xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  // expected-error @+1 {{'nn.fill' op attribute 'zero.input_offsets' is only valid on zero.train_step}}
  %l = nn.fill 0.0 {zero.input_offsets = array<i64: 0>} : tensor<f32>
  zero.return %l : tensor<f32>
}

// -----

// Checks that there is one offset per input.
// expected-error @+1 {{'zero.train_step' op attribute 'zero.input_offsets' has 2 offsets, but the step has 1 inputs (one offset per input)}}
zero.train_step @inputs_count(%x: tensor<2x2xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    attributes {zero.input_offsets = array<i64: 0, 64>} {
  %l = nn.fill 0.0 : tensor<f32>
  zero.return %l : tensor<f32>
}

// -----

// Checks that every input has a 64-byte aligned offset.
// expected-error @+1 {{'zero.train_step' op attribute 'zero.input_offsets' offset of input #0 must be a non-negative multiple of 64, got -64}}
zero.train_step @inputs_negative(%x: tensor<2x2xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    attributes {zero.input_offsets = array<i64: -64>} {
  %l = nn.fill 0.0 : tensor<f32>
  zero.return %l : tensor<f32>
}

// -----

// Checks that zero.alloc is an i64 array.
zero.train_step @alloc_untyped(%x: tensor<2x2xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  // expected-error @+1 {{'nn.fill' op attribute 'zero.alloc' must be an array<i64: ...>, got 64 : i64}}
  %l = nn.fill 0.0 {zero.alloc = 64} : tensor<f32>
  zero.return %l : tensor<f32>
}

// -----

// Checks that zero.alloc is only on the ops of a train step.
// expected-error @+1 {{'zero.param' op attribute 'zero.alloc' is only valid on an op of a zero.train_step's body}}
zero.param @w : tensor<4xf32> init zeros {zero.alloc = array<i64>}

// -----

// Checks that there is one offset per result.
zero.train_step @alloc_count(%x: tensor<2x2xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  // expected-error @+1 {{'nn.fill' op attribute 'zero.alloc' has 2 offsets, but the op has 1 results (one offset per result)}}
  %l = nn.fill 0.0 {zero.alloc = array<i64: 0, 64>} : tensor<f32>
  zero.return %l : tensor<f32>
}

// -----

// Checks that an offset is -1 or 64-byte aligned.
zero.train_step @alloc_unaligned(%x: tensor<2x2xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  // expected-error @+1 {{'nn.fill' op attribute 'zero.alloc' offset of result #0 must be -1 or a non-negative multiple of 64, got 32}}
  %l = nn.fill 0.0 {zero.alloc = array<i64: 32>} : tensor<f32>
  zero.return %l : tensor<f32>
}

// -----

// Checks that a tensor result that is neither a view nor a gradient bound by
// zero.grad has step memory.
zero.train_step @alloc_missing(%x: tensor<2x2xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  // expected-error @+1 {{'nn.fill' op attribute 'zero.alloc' offset of result #0 is -1, but only views, gradients bound by zero.grad and values that are not tensors own no step memory}}
  %l = nn.fill 0.0 {zero.alloc = array<i64: -1>} : tensor<f32>
  zero.return %l : tensor<f32>
}

// -----

// Checks that a view owns no step memory.
zero.train_step @alloc_view(%x: tensor<2x2xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  // expected-error @+1 {{'nn.reshape' op attribute 'zero.alloc' offset of result #0 must be -1: a view owns no step memory}}
  %r = nn.reshape %x {zero.alloc = array<i64: 0>} : tensor<2x2xf32> -> tensor<4xf32>
  %l = nn.fill 0.0 : tensor<f32>
  zero.return %l : tensor<f32>
}

// -----

// Checks that a value that is not a tensor owns no step memory.
zero.train_step @alloc_flag(%x: tensor<2x2xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %st = nn.fill 0.0 : tensor<2xf32>
  // expected-error @+1 {{'zero.update_loss_scale' op attribute 'zero.alloc' offset of result #0 must be -1: a value that is not a tensor owns no step memory}}
  %skip = zero.update_loss_scale %st {zero.alloc = array<i64: 0>} : tensor<2xf32> -> i1
  %l = nn.fill 0.0 : tensor<f32>
  zero.return %l : tensor<f32>
}

// -----

// Checks that zero.temp is an i64.
zero.param @w : tensor<2x8xf32> init zeros
zero.partition @l stage 3 world_size 2 alignment 2 numel 16 padded 16 params [@w] offsets [0]
zero.train_step @temp_untyped(%x: tensor<2x8xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4> {
  %dw = nn.fill 0.0 : tensor<2x8xf32>
  // expected-error @+1 {{'zero.reduce_scatter' op attribute 'zero.temp' must be an i64 integer, got 0 : i32}}
  zero.reduce_scatter group @l [0, 16) from %dw at [0] : tensor<2x8xf32> {zero.temp = 0 : i32}
  %l = nn.fill 0.0 : tensor<f32>
  zero.return %l : tensor<f32>
}

// -----

// Checks that zero.temp is only on a reduction with a bucket buffer.
zero.param @w : tensor<2x8xf32> init zeros
zero.partition @l stage 1 world_size 2 alignment 2 numel 16 padded 16 params [@w] offsets [0]
zero.train_step @temp_in_place(%x: tensor<2x8xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 1, world_size = 2, global_batch = 4> {
  // expected-error @+1 {{'zero.reduce_scatter' op attribute 'zero.temp' is only valid on a zero.reduce_scatter or zero.reduce of gradient values (`from`), which has a bucket buffer}}
  zero.reduce_scatter group @l in grads [0, 16) {zero.temp = 0}
  %l = nn.fill 0.0 : tensor<f32>
  zero.return %l : tensor<f32>
}

// -----

// Checks that a bucket buffer is 64-byte aligned.
zero.param @w : tensor<2x8xf32> init zeros
zero.partition @l stage 3 world_size 2 alignment 2 numel 16 padded 16 params [@w] offsets [0]
zero.train_step @temp_unaligned(%x: tensor<2x8xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4> {
  %dw = nn.fill 0.0 : tensor<2x8xf32>
  // expected-error @+1 {{'zero.reduce_scatter' op attribute 'zero.temp' must be a non-negative multiple of 64, got 96}}
  zero.reduce_scatter group @l [0, 16) from %dw at [0] : tensor<2x8xf32> {zero.temp = 96}
  %l = nn.fill 0.0 : tensor<f32>
  zero.return %l : tensor<f32>
}

// -----

// Checks that zero.loss_seed marks a scalar: the backward's seed dL/dL.
func.func @seed_not_scalar() {
  // expected-error @+1 {{'nn.fill' op attribute 'zero.loss_seed' marks the backward's seed: a unit attribute on an op with one scalar tensor result}}
  %0 = nn.fill 1.0 {zero.loss_seed} : tensor<4xf32>
  return
}

// -----

// Checks that zero.recompute (zero-remat's clones) sits on nn ops of a
// train step.
func.func @recompute_outside_step(%x: tensor<4xf32>) {
  // expected-error @+1 {{'nn.gelu' op attribute 'zero.recompute' marks a recomputed forward op: a unit attribute on an nn op of a train step's body}}
  %0 = nn.gelu %x {zero.recompute} : tensor<4xf32>
  return
}

// -----

zero.param @w : tensor<4xf32> init zeros
zero.train_step @recompute_not_nn(%x: tensor<2x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  // expected-error @+1 {{'zero.get_param' op attribute 'zero.recompute' marks a recomputed forward op}}
  %w = zero.get_param @w {zero.recompute} : tensor<4xf32>
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that a schedule takes only its own kind's parameters.
// expected-error @+3 {{lr_schedule warmup_lr has no parameter total_num_steps}}
// expected-error @+2 {{failed to parse Zero_OptimizerAttr parameter 'schedule'}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3, schedule = #zero.lr_schedule<kind = warmup_lr, total_num_steps = 10>>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that WarmupDecayLR needs its length.
// expected-error @+3 {{lr_schedule warmup_decay_lr needs total_num_steps >= 1, got 0}}
// expected-error @+2 {{failed to parse Zero_OptimizerAttr parameter 'schedule'}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3, schedule = #zero.lr_schedule<kind = warmup_decay_lr>>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that only the schedules that end take a run-long total.
// expected-error @+3 {{lr_schedule warmup_lr has no parameter total_num_steps}}
// expected-error @+2 {{failed to parse Zero_OptimizerAttr parameter 'schedule'}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3, schedule = #zero.lr_schedule<kind = warmup_lr, total_num_steps = auto>>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that a step count is a count or auto.
// expected-error @+4 {{expected a step count >= 0 or auto, got -1}}
// expected-error @+3 {{failed to parse Zero_LrScheduleAttr parameter 'total_num_steps'}}
// expected-error @+2 {{failed to parse Zero_OptimizerAttr parameter 'schedule'}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3, schedule = #zero.lr_schedule<kind = warmup_decay_lr, total_num_steps = -1>>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that input_names names each input once, by an identifier.
// expected-error @+1 {{'zero.train_step' op input_names has 1 names for 2 inputs (one per input)}}
zero.train_step @train(%x: tensor<8x4xi32>, %y: tensor<8x4xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> attributes {input_names = ["input_ids"]} {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// expected-error @+1 {{'zero.train_step' op input_names #1 is empty}}
zero.train_step @train(%x: tensor<8x4xi32>, %y: tensor<8x4xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> attributes {input_names = ["input_ids", ""]} {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// expected-error @+1 {{'zero.train_step' op input_names #0 '2x' is not an identifier ([A-Za-z_][A-Za-z0-9_]*)}}
zero.train_step @train(%x: tensor<8x4xi32>, %y: tensor<8x4xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> attributes {input_names = ["2x", "labels"]} {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// expected-error @+1 {{'zero.train_step' op input_names #1 'input-ids' is not an identifier ([A-Za-z_][A-Za-z0-9_]*)}}
zero.train_step @train(%x: tensor<8x4xi32>, %y: tensor<8x4xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> attributes {input_names = ["labels", "input-ids"]} {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// expected-error @+1 {{'zero.train_step' op input_names #1 'labels' repeats input_names #0}}
zero.train_step @train(%x: tensor<8x4xi32>, %y: tensor<8x4xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> attributes {input_names = ["labels", "labels"]} {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// expected-error @+1 {{'zero.train_step' op attribute 'input_names' failed to satisfy constraint: string array attribute}}
zero.train_step @train(%x: tensor<8x4xi32>, %y: tensor<8x4xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> attributes {input_names = ["x", 1]} {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that a step fed the same tokens as ids and labels has both, of
// one shape.
// expected-error @+1 {{'zero.train_step' op labels same_tokens needs two inputs, token ids and labels of one shape [B, T] of i32 or i64 (and packed rows' positions of that shape, or of whole rows, where the step reads them), got 2 input(s): 'tensor<8x4xf32>', 'tensor<8xi64>'}}
zero.train_step @train(%x: tensor<8x4xf32>, %y: tensor<8xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    labels same_tokens {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// expected-error @+1 {{'zero.train_step' op labels same_tokens needs two inputs, token ids and labels of one shape [B, T] of i32 or i64 (and packed rows' positions of that shape, or of whole rows, where the step reads them), got 2 input(s): 'tensor<8x4xi32>', 'tensor<8x5xi32>'}}
zero.train_step @train(%x: tensor<8x4xi32>, %y: tensor<8x5xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    labels same_tokens {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// expected-error @+1 {{'zero.train_step' op labels same_tokens needs two inputs, token ids and labels of one shape [B, T] of i32 or i64 (and packed rows' positions of that shape, or of whole rows, where the step reads them), got 1 input(s): 'tensor<8x4xi32>'}}
zero.train_step @train(%x: tensor<8x4xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    labels same_tokens {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that the convention is one of the three.
zero.train_step @train(%x: tensor<8x4xi32>, %y: tensor<8x4xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    // expected-error @+1 {{expected a token-label convention (next_token, same_tokens or shifted), got 'rotated'}}
    labels rotated {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that the cosine has steps after the warmup.
// expected-error @+3 {{lr_schedule warmup_cosine_lr needs total_num_steps > warmup_num_steps (at least 2), got 10 and 10}}
// expected-error @+2 {{failed to parse Zero_OptimizerAttr parameter 'schedule'}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3, schedule = #zero.lr_schedule<kind = warmup_cosine_lr, total_num_steps = 10, warmup_num_steps = 10>>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that learning rates are not negative.
// expected-error @+3 {{lr_schedule warmup_max_lr must be finite and >= 0, got -1.000000e-03}}
// expected-error @+2 {{failed to parse Zero_OptimizerAttr parameter 'schedule'}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3, schedule = #zero.lr_schedule<kind = warmup_lr, warmup_max_lr = -1.0e-3>>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that OneCycle has a peak.
// expected-error @+3 {{lr_schedule one_cycle needs cycle_max_lr > 0}}
// expected-error @+2 {{failed to parse Zero_OptimizerAttr parameter 'schedule'}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3, schedule = #zero.lr_schedule<kind = one_cycle>>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that a step size is positive.
// expected-error @+3 {{lr_schedule lr_range_test_step_size must be >= 1, got 0}}
// expected-error @+2 {{failed to parse Zero_OptimizerAttr parameter 'schedule'}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3, schedule = #zero.lr_schedule<kind = lr_range_test, lr_range_test_step_size = 0>>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that a parameter's own weight decay is not negative.
// expected-error @+1 {{'zero.param' op weight_decay must be finite and >= 0, got -1.000000e-01}}
zero.param @b : tensor<4xf32> init zeros weight_decay -0.1

// -----

// Checks that offload to nvme needs a path.
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    // expected-error @+1 {{optimizer offload to nvme needs an nvme_path}}
    offload #zero.offload<optimizer = nvme> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that an nvme_path comes with an offload to nvme.
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    // expected-error @+1 {{nvme_path '/tmp/x' is given but the optimizer is not offloaded to nvme}}
    offload #zero.offload<optimizer = cpu, nvme_path = "/tmp/x"> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks DeepSpeed's rule: optimizer offload at stages 1-3.
zero.partition @flat stage 0 world_size 2 alignment 2 numel 12 padded 12
    params [@w] offsets [0]
zero.param @w : tensor<4x3xf32> init zeros
// expected-error @+1 {{'zero.train_step' op optimizer offload (offload_optimizer) needs ZeRO stage 1, 2 or 3, the stage is 0}}
zero.train_step @train(%x: tensor<4x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 2, global_batch = 8>
    offload #zero.offload<optimizer = cpu> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks DeepSpeed's rule: parameter offload at stage 3 only.
zero.partition @flat stage 2 world_size 2 alignment 2 numel 12 padded 12
    params [@w] offsets [0]
zero.param @w : tensor<4x3xf32> init zeros
// expected-error @+1 {{'zero.train_step' op parameter offload (offload_param) needs ZeRO stage 3, the stage is 2}}
zero.train_step @train(%x: tensor<4x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 8>
    offload #zero.offload<param = cpu> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that a transfer copies what an offloaded optimizer copies.
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    offload #zero.offload<optimizer = cpu> {
  // expected-error @+1 {{'zero.transfer' op copies params to host_grads; an offloaded optimizer copies grads to host_grads and host_params (or, with fp32 compute, master) to params}}
  zero.transfer group @flat params to host_grads phase boundary
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that transfers need an offloaded optimizer.
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  // expected-error @+1 {{'zero.transfer' op copies between device and host memory, but the train step does not offload the optimizer (#zero.offload)}}
  zero.transfer group @flat grads to host_grads phase boundary
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that transfers run at the boundary.
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    offload #zero.offload<optimizer = cpu> {
  // expected-error @+1 {{'zero.transfer' op moves the gradients of the optimizer step, which runs once per optimizer step: its phase must be boundary or last_micro_step, not micro_step}}
  zero.transfer group @flat grads to host_grads
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that the parameters come back at the boundary, after the host
// Adam, not in the last micro step.
zero.param @w : tensor<8xf32> init zeros
zero.partition @flat stage 2 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.train_step @train(%x: tensor<1x8xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 2>
    offload #zero.offload<optimizer = cpu> {
  // expected-error @+1 {{'zero.transfer' op moves the parameters the host Adam updated: its phase must be boundary, not last_micro_step}}
  zero.transfer group @flat master to params phase last_micro_step
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that a transfer's range is not empty.
zero.param @w : tensor<8xf32> init zeros
zero.partition @flat stage 2 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.train_step @train(%x: tensor<1x8xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 2>
    offload #zero.offload<optimizer = cpu> {
  // expected-error @+1 {{'zero.transfer' op range [4, 4) is empty or negative}}
  zero.transfer group @flat grads[4, 4) to host_grads phase last_micro_step
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that a transfer's range is not negative.
zero.param @w : tensor<8xf32> init zeros
zero.partition @flat stage 2 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.train_step @train(%x: tensor<1x8xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 2>
    offload #zero.offload<optimizer = cpu> {
  // expected-error @+1 {{'zero.transfer' op range [4, -1) is empty or negative}}
  zero.transfer group @flat grads[4, -1) to host_grads phase last_micro_step
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that a transfer's range lies in its partition.
zero.param @w : tensor<8xf32> init zeros
zero.partition @flat stage 2 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.train_step @train(%x: tensor<1x8xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 2>
    offload #zero.offload<optimizer = cpu> {
  // expected-error @+1 {{'zero.transfer' op range [4, 10) exceeds the 8 elements of partition @flat}}
  zero.transfer group @flat grads[4, 10) to host_grads phase last_micro_step
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that begin and end come together.
zero.param @w : tensor<8xf32> init zeros
zero.partition @flat stage 2 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.train_step @train(%x: tensor<1x8xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 2>
    offload #zero.offload<optimizer = cpu> {
  // expected-error @+1 {{'zero.transfer' op begin and end of the range must be given together}}
  zero.transfer group @flat grads to host_grads phase last_micro_step {begin = 4 : i64}
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that 16-bit parameters are uploaded from host_params.
zero.param @w : tensor<8xf32> init zeros compute bf16
zero.partition @flat stage 2 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.train_step @train(%x: tensor<1x8xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 2>
    offload #zero.offload<optimizer = cpu> {
  // expected-error @+1 {{'zero.transfer' op uploads master, but partition @flat computes in 'bf16' (16-bit parameters are uploaded from host_params)}}
  zero.transfer group @flat master to params phase boundary
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that fp32 parameters are uploaded from their masters.
zero.param @w : tensor<8xf32> init zeros
zero.partition @flat stage 2 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.train_step @train(%x: tensor<1x8xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 2>
    offload #zero.offload<optimizer = cpu> {
  // expected-error @+1 {{'zero.transfer' op uploads host_params, but partition @flat computes in 'f32' (fp32 parameters are uploaded from their master)}}
  zero.transfer group @flat host_params to params phase boundary
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that the Adam of an offloaded optimizer runs on the host.
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    offload #zero.offload<optimizer = cpu> {
  %s = zero.loss_scale : tensor<f32>
  %st = nn.fill 0.0 : tensor<2xf32>
  %skip = zero.update_loss_scale %st : tensor<2xf32> -> i1
  // expected-error @+1 {{'zero.optimizer_step' op runs on the device, but the train step offloads the optimizer (#zero.offload): it must be 'host'}}
  zero.optimizer_step group @flat stats %st scale %s skip %skip divisor 2.0 : tensor<2xf32>
  zero.return %s : tensor<f32>
}

// -----

// Checks that a host Adam needs an offloaded optimizer.
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %s = zero.loss_scale : tensor<f32>
  %st = nn.fill 0.0 : tensor<2xf32>
  %skip = zero.update_loss_scale %st : tensor<2xf32> -> i1
  // expected-error @+1 {{'zero.optimizer_step' op runs on the host, but the train step does not offload the optimizer}}
  zero.optimizer_step group @flat stats %st scale %s skip %skip divisor 2.0 host : tensor<2xf32>
  zero.return %s : tensor<f32>
}

// -----

// Checks that host_bytes is aligned.
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    // expected-error @+1 {{memory_plan host_bytes must be a multiple of 64}}
    attributes {zero.plan = #zero.memory_plan<persistent_bytes = 64, arena_bytes = 64, scratch_bytes = 0, peak_bytes = 128, host_bytes = 10>} {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that an offload keeps at least one swap buffer.
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    // expected-error @+1 {{buffer_count must be >= 1, got 0}}
    offload #zero.offload<optimizer = nvme, nvme_path = "/nvme", buffer_count = 0> {
  %s = nn.fill 0.0 : tensor<f32>
  zero.return %s : tensor<f32>
}

// -----

// Checks that swap buffers hold whole 4096-byte blocks of each state.
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    // expected-error @+1 {{buffer_size must be a positive multiple of 1024 elements (4096 bytes of fp32), got 1000}}
    offload #zero.offload<optimizer = nvme, nvme_path = "/nvme", buffer_size = 1000> {
  %s = nn.fill 0.0 : tensor<f32>
  zero.return %s : tensor<f32>
}

// -----

// Checks that one swap transfer stays within 1 GiB.
// expected-error @+1 {{nvme_swap chunk must be at most 268435456 elements (1 GiB of fp32, one transfer), got 268436480}}
#huge = #zero.nvme_swap<chunk = 268436480, buffers = 4>

// -----

// Checks that a swap chunk is whole 4096-byte blocks.
// expected-error @+1 {{nvme_swap chunk must be a positive multiple of 1024 elements (4096 bytes of fp32), got 100}}
#chunk = #zero.nvme_swap<chunk = 100, buffers = 4>

// -----

// Checks that a swap needs a buffer.
// expected-error @+1 {{nvme_swap buffers must be >= 1, got 0}}
#buffers = #zero.nvme_swap<chunk = 1024, buffers = 0>

// -----

// Checks that the Adam of an optimizer on NVMe swaps its states.
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    offload #zero.offload<optimizer = nvme, nvme_path = "/nvme"> {
  %s = zero.loss_scale : tensor<f32>
  %st = nn.fill 0.0 : tensor<2xf32>
  %skip = zero.update_loss_scale %st : tensor<2xf32> -> i1
  // expected-error @+1 {{'zero.optimizer_step' op needs 'swap': the train step keeps the optimizer states on nvme (#zero.offload)}}
  zero.optimizer_step group @flat stats %st scale %s skip %skip divisor 2.0 host : tensor<2xf32>
  zero.return %s : tensor<f32>
}

// -----

// Checks that only an optimizer on NVMe swaps.
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    offload #zero.offload<optimizer = cpu> {
  %s = zero.loss_scale : tensor<f32>
  %st = nn.fill 0.0 : tensor<2xf32>
  %skip = zero.update_loss_scale %st : tensor<2xf32> -> i1
  // expected-error @+1 {{'zero.optimizer_step' op swaps its states with NVMe, but the train step keeps them in host memory}}
  zero.optimizer_step group @flat stats %st scale %s skip %skip divisor 2.0 host swap <chunk = 1024, buffers = 4> : tensor<2xf32>
  zero.return %s : tensor<f32>
}

// -----

// Checks that a swapping Adam runs on the host.
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %s = zero.loss_scale : tensor<f32>
  %st = nn.fill 0.0 : tensor<2xf32>
  %skip = zero.update_loss_scale %st : tensor<2xf32> -> i1
  // expected-error @+1 {{'zero.optimizer_step' op swaps its states with NVMe, so it must be 'host'}}
  zero.optimizer_step group @flat stats %st scale %s skip %skip divisor 2.0 swap <chunk = 1024, buffers = 4> : tensor<2xf32>
  zero.return %s : tensor<f32>
}

// -----

// Checks that parameters come back from host_params when the masters are
// on NVMe (fp32 compute too).
zero.param @w : tensor<8xf32> init zeros
zero.partition @flat stage 1 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.train_step @train(%x: tensor<2x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 1, world_size = 2, global_batch = 4>
    offload #zero.offload<optimizer = nvme, nvme_path = "/nvme"> {
  // expected-error @+1 {{'zero.transfer' op uploads master, but the optimizer states are on nvme: the parameters are uploaded from host_params}}
  zero.transfer group @flat master to params phase boundary
  %s = nn.fill 0.0 : tensor<f32>
  zero.return %s : tensor<f32>
}

// -----

// Checks that the swap file is whole 4096-byte blocks.
// expected-error @+1 {{memory_plan nvme_bytes, swap_offset, swap_bytes, param_nvme_bytes, param_swap_offset and param_swap_bytes must be multiples of 4096 (O_DIRECT's alignment)}}
#nvme = #zero.memory_plan<persistent_bytes = 0, arena_bytes = 0, scratch_bytes = 0, peak_bytes = 0, host_bytes = 8192, nvme_bytes = 100, swap_offset = 0, swap_bytes = 4096>

// -----

// Checks that NVMe states come with swap buffers.
// expected-error @+1 {{memory_plan has an optimizer swap file but no swap_bytes: NVMe-resident states move through swap buffers}}
#noswap = #zero.memory_plan<persistent_bytes = 0, arena_bytes = 0, scratch_bytes = 0, peak_bytes = 0, host_bytes = 8192, nvme_bytes = 4096>

// -----

// Checks that the swap buffers lie in the host arena.
// expected-error @+1 {{memory_plan swap buffers [4096, 12288) must lie in the host arena of host_bytes 8192}}
#outside = #zero.memory_plan<persistent_bytes = 0, arena_bytes = 0, scratch_bytes = 0, peak_bytes = 0, host_bytes = 8192, nvme_bytes = 4096, swap_offset = 4096, swap_bytes = 8192>

// -----

// Checks that states in the swap file sit on 4096-byte blocks.
zero.param @w : tensor<8xf32> init zeros compute bf16
// expected-error @+1 {{'zero.partition' op buffers #zero.buffer_offsets<params = 0, grads = 64, master = 0, exp_avg = 64, exp_avg_sq = 8192, host_grads = 0, host_params = 64>: exp_avg lives in the NVMe swap file, so its offset must be a multiple of 4096, got 64}}
zero.partition @flat stage 1 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0] {zero.buffers = #zero.buffer_offsets<params = 0, grads = 64, master = 0, exp_avg = 64, exp_avg_sq = 8192, host_grads = 0, host_params = 64>}
zero.train_step @train(%x: tensor<2x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 1, world_size = 2, global_batch = 4>
    offload #zero.offload<optimizer = nvme, nvme_path = "/nvme"> {
  %s = nn.fill 0.0 : tensor<f32>
  zero.return %s : tensor<f32>
}

// -----

// Checks that only a step offloading its parameters stages a shard.
zero.param @w : tensor<8xf32> init zeros compute bf16
zero.partition @flat stage 3 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.train_step @train(%x: tensor<2x8xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4>
    offload #zero.offload<optimizer = cpu> {
  %loss = nn.fill 0.0 : tensor<f32>
  // expected-error @+1 {{'zero.transfer' op stages a parameter shard, but the train step does not offload its parameters (#zero.offload)}}
  %sh, %t = zero.transfer group @flat params to staging : tensor<4xbf16> -> !zero.token
  zero.return %loss : tensor<f32>
}

// -----

// Checks that fp32 parameters with masters on NVMe have a host copy.
zero.param @w : tensor<8xf32> init zeros
// expected-error @+1 {{'zero.partition' op buffers #zero.buffer_offsets<params = 0, grads = 64, master = 0, exp_avg = 4096, exp_avg_sq = 8192, host_grads = 0> of an optimizer offloaded to nvme need host_params}}
zero.partition @flat stage 1 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0] {zero.buffers = #zero.buffer_offsets<params = 0, grads = 64, master = 0, exp_avg = 4096, exp_avg_sq = 8192, host_grads = 0>}
zero.train_step @train(%x: tensor<2x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 1, world_size = 2, global_batch = 4>
    offload #zero.offload<optimizer = nvme, nvme_path = "/nvme"> {
  %s = nn.fill 0.0 : tensor<f32>
  zero.return %s : tensor<f32>
}

// -----

// Checks that offloaded parameter shards take the new parameters of a host
// Adam over NVMe states in place: no host copy.
zero.param @w : tensor<8xf32> init zeros compute bf16
// expected-error @+1 {{'zero.partition' op buffers #zero.buffer_offsets<params = 0, grads = 0, master = 0, exp_avg = 4096, exp_avg_sq = 8192, host_grads = 64, host_params = 128> of an optimizer offloaded to nvme have host_params, but the parameter shards are offloaded too (the host Adam writes them in place)}}
zero.partition @flat stage 3 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0] {zero.buffers = #zero.buffer_offsets<params = 0, grads = 0, master = 0, exp_avg = 4096, exp_avg_sq = 8192, host_grads = 64, host_params = 128>}
zero.train_step @train(%x: tensor<2x8xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4>
    offload #zero.offload<optimizer = nvme, param = cpu, nvme_path = "/nvme"> {
  %s = nn.fill 0.0 : tensor<f32>
  zero.return %s : tensor<f32>
}

// -----

// Checks that a staged copy moves the params shard.
zero.param @w : tensor<8xf32> init zeros compute bf16
zero.partition @flat stage 3 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.train_step @train(%x: tensor<2x8xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4>
    offload #zero.offload<param = cpu> {
  %loss = nn.fill 0.0 : tensor<f32>
  // expected-error @+1 {{'zero.transfer' op stages the parameter shard: it copies 'params to staging' or a staged value 'to params'}}
  %sh, %t = zero.transfer group @flat grads to staging : tensor<4xbf16> -> !zero.token
  zero.return %loss : tensor<f32>
}

// -----

// Checks that a staged copy moves the whole shard, not a layout range.
zero.param @w : tensor<8xf32> init zeros compute bf16
zero.partition @flat stage 3 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.train_step @train(%x: tensor<2x8xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4>
    offload #zero.offload<optimizer = cpu, param = cpu> {
  %loss = nn.fill 0.0 : tensor<f32>
  // expected-error @+1 {{'zero.transfer' op stages a whole parameter shard: it takes no range}}
  %sh, %t = zero.transfer group @flat params[0, 4) to staging : tensor<4xbf16> -> !zero.token
  zero.return %loss : tensor<f32>
}

// -----

// Checks that a staged copy holds one shard in the compute type.
zero.param @w : tensor<8xf32> init zeros compute bf16
zero.partition @flat stage 3 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.train_step @train(%x: tensor<2x8xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4>
    offload #zero.offload<param = cpu> {
  %loss = nn.fill 0.0 : tensor<f32>
  // expected-error @+1 {{'zero.transfer' op staged buffer 'tensor<8xbf16>' must hold the 4 elements of a shard of @flat in 'bf16'}}
  %sh, %t = zero.transfer group @flat params to staging : tensor<8xbf16> -> !zero.token
  zero.return %loss : tensor<f32>
}

// -----

// Checks that the new parameters are stored at the step boundary.
zero.param @w : tensor<8xf32> init zeros compute bf16
zero.partition @flat stage 3 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.train_step @train(%x: tensor<2x8xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4>
    offload #zero.offload<param = cpu> {
  %loss = nn.fill 0.0 : tensor<f32>
  %new = nn.fill 0.0 : tensor<4xbf16>
  // expected-error @+1 {{'zero.transfer' op stores the new parameters of the optimizer step: its phase must be boundary, not micro_step}}
  zero.transfer group @flat %new to params : tensor<4xbf16>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that a gather of offloaded parameters reads a staged shard.
zero.param @w : tensor<8xf32> init zeros compute bf16
zero.partition @flat stage 3 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.train_step @train(%x: tensor<2x8xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4>
    offload #zero.offload<param = cpu> {
  %loss = nn.fill 0.0 : tensor<f32>
  // expected-error @+1 {{'zero.all_gather' op reads the parameter shard in place, but the train step offloads its parameters (#zero.offload): it must read a staged shard ('from')}}
  %full = zero.all_gather group @flat : tensor<8xbf16>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that a staged shard comes from a staged copy.
zero.param @w : tensor<8xf32> init zeros compute bf16
zero.partition @flat stage 3 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.train_step @train(%x: tensor<2x8xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4>
    offload #zero.offload<param = cpu> {
  %loss = nn.fill 0.0 : tensor<f32>
  %sh = nn.fill 0.0 : tensor<4xbf16>
  // expected-error @+1 {{'zero.prefetch' op staged shard must be the result of a zero.transfer ... params to staging}}
  %full, %t = zero.prefetch group @flat from %sh : tensor<4xbf16> : tensor<8xbf16>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that the device Adam of offloaded parameters writes a staged buffer.
zero.param @w : tensor<8xf32> init zeros compute bf16
zero.partition @flat stage 3 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.train_step @train(%x: tensor<2x8xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4>
    offload #zero.offload<param = cpu> {
  %loss = nn.fill 0.0 : tensor<f32>
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 2.0 phase boundary : tensor<2xf32>
  %skip = zero.update_loss_scale %st phase boundary : tensor<2xf32> -> i1
  // expected-error @+1 {{'zero.optimizer_step' op runs on the device while the train step offloads its parameters: it must write the new parameters into a staged buffer ('->')}}
  zero.optimizer_step group @flat stats %st scale %s skip %skip divisor 2.0 phase boundary : tensor<2xf32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that the host Adam writes offloaded parameters in place.
zero.param @w : tensor<8xf32> init zeros compute bf16
zero.partition @flat stage 3 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.train_step @train(%x: tensor<2x8xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4>
    offload #zero.offload<optimizer = cpu, param = cpu> {
  %loss = nn.fill 0.0 : tensor<f32>
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 2.0 phase boundary : tensor<2xf32>
  %skip = zero.update_loss_scale %st phase boundary : tensor<2xf32> -> i1
  // expected-error @+1 {{'zero.optimizer_step' op writes its new parameters into a staged buffer, which only a device Adam of offloaded parameters does}}
  %new = zero.optimizer_step group @flat stats %st scale %s skip %skip divisor 2.0 host phase boundary : tensor<2xf32> -> tensor<4xbf16>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that nothing is uploaded when the host Adam updates the host shard.
zero.param @w : tensor<8xf32> init zeros compute bf16
zero.partition @flat stage 3 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.train_step @train(%x: tensor<2x8xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4>
    offload #zero.offload<optimizer = cpu, param = cpu> {
  %loss = nn.fill 0.0 : tensor<f32>
  // expected-error @+1 {{'zero.transfer' op uploads parameters, but the train step keeps its parameter shards in host memory: the host Adam writes them in place}}
  zero.transfer group @flat host_params to params phase boundary
  zero.return %loss : tensor<f32>
}

// -----

// Checks that the staged new parameters hold one shard.
zero.param @w : tensor<8xf32> init zeros compute bf16
zero.partition @flat stage 3 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.train_step @train(%x: tensor<2x8xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4>
    offload #zero.offload<param = cpu> {
  %loss = nn.fill 0.0 : tensor<f32>
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 2.0 phase boundary : tensor<2xf32>
  %skip = zero.update_loss_scale %st phase boundary : tensor<2xf32> -> i1
  // expected-error @+1 {{'zero.optimizer_step' op staged new parameters 'tensor<8xbf16>' must hold the 4 elements of a shard of @flat in 'bf16'}}
  %new = zero.optimizer_step group @flat stats %st scale %s skip %skip divisor 2.0 phase boundary : tensor<2xf32> -> tensor<8xbf16>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that a copy's completion is a !zero.token.
zero.param @w : tensor<8xf32> init zeros compute bf16
zero.partition @flat stage 3 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.train_step @train(%x: tensor<2x8xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4>
    offload #zero.offload<param = cpu> {
  %loss = nn.fill 0.0 : tensor<f32>
  // expected-error @+1 {{expected !zero.token, got 'f32'}}
  %sh, %t = zero.transfer group @flat params to staging : tensor<4xbf16> -> f32
  zero.return %loss : tensor<f32>
}

// -----

// Checks that parameter offload to nvme needs a path of its own.
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    // expected-error @+1 {{parameter offload to nvme needs a param_nvme_path}}
    offload #zero.offload<param = nvme> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that a param_nvme_path comes with parameter offload to nvme.
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    // expected-error @+1 {{param_nvme_path '/p' is given but the parameters are not offloaded to nvme}}
    offload #zero.offload<param = cpu, param_nvme_path = "/p"> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks the parameter swap buffer count.
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    // expected-error @+1 {{param_buffer_count must be >= 1, got 0}}
    offload #zero.offload<param = nvme, param_nvme_path = "/p", param_buffer_count = 0> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// expected-error @+1 {{param_swap buffer 2 is not one of its 2 buffers}}
#swapidx = #zero.param_swap<buffer = 2, buffers = 2, buffer_bytes = 4096>

// -----

// expected-error @+1 {{param_swap buffer_bytes must be a positive multiple of 4096 (O_DIRECT's alignment), got 100}}
#swapbytes = #zero.param_swap<buffer = 0, buffers = 2, buffer_bytes = 100>

// -----

// expected-error @+1 {{param_swap buffers must be >= 1, got 0}}
#swapnone = #zero.param_swap<buffer = 0, buffers = 0, buffer_bytes = 4096>

// -----

// Checks that a parameter swap file comes with its swap buffers.
// expected-error @+1 {{memory_plan has param_nvme_bytes but no param_swap_bytes: NVMe-resident parameter shards move through swap buffers}}
#pnoswap = #zero.memory_plan<persistent_bytes = 0, arena_bytes = 0, scratch_bytes = 0, peak_bytes = 0, host_bytes = 8192, nvme_bytes = 4096, param_nvme_bytes = 4096>

// -----

// Checks that the parameter swap file is part of the swap files' total.
// expected-error @+1 {{memory_plan param_nvme_bytes 8192 exceeds nvme_bytes 4096, the total of the rank's swap files}}
#ptotal = #zero.memory_plan<persistent_bytes = 0, arena_bytes = 0, scratch_bytes = 0, peak_bytes = 0, host_bytes = 8192, nvme_bytes = 4096, param_nvme_bytes = 8192, param_swap_bytes = 4096>

// -----

// Checks that the two swap regions do not overlap.
// expected-error @+1 {{memory_plan parameter swap buffers overlap the optimizer's}}
#poverlap = #zero.memory_plan<persistent_bytes = 0, arena_bytes = 0, scratch_bytes = 0, peak_bytes = 0, host_bytes = 16384, nvme_bytes = 8192, swap_offset = 0, swap_bytes = 8192, param_nvme_bytes = 4096, param_swap_offset = 4096, param_swap_bytes = 4096>

// -----

// Checks that a shard on NVMe moves through a swap buffer.
zero.param @w : tensor<8xf32> init zeros compute bf16
zero.partition @flat stage 3 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.train_step @train(%x: tensor<2x8xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4>
    offload #zero.offload<param = nvme, param_nvme_path = "/p"> {
  %loss = nn.fill 0.0 : tensor<f32>
  // expected-error @+1 {{'zero.transfer' op moves a parameter shard that lives in an NVMe swap file: it needs 'swap' (the host swap buffer it goes through)}}
  %sh, %t = zero.transfer group @flat params to staging : tensor<4xbf16> -> !zero.token
  zero.return %loss : tensor<f32>
}

// -----

// Checks that only a transfer of a shard on NVMe has a swap buffer.
zero.param @w : tensor<8xf32> init zeros compute bf16
zero.partition @flat stage 3 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.train_step @train(%x: tensor<2x8xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4>
    offload #zero.offload<param = cpu> {
  %loss = nn.fill 0.0 : tensor<f32>
  // expected-error @+1 {{'zero.transfer' op has 'swap', but it moves no parameter shard that lives on nvme}}
  %sh, %t = zero.transfer group @flat params to staging swap <buffer = 0, buffers = 1, buffer_bytes = 4096> : tensor<4xbf16> -> !zero.token
  zero.return %loss : tensor<f32>
}

// -----

// Checks that a swap buffer holds the whole shard: 2048 bf16 elements are
// 4096 bytes, 2050 need two blocks.
zero.param @w : tensor<4100xf32> init zeros compute bf16
zero.partition @flat stage 3 world_size 2 alignment 2 numel 4100 padded 4100 params [@w] offsets [0]
zero.train_step @train(%x: tensor<2x8xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4>
    offload #zero.offload<param = nvme, param_nvme_path = "/p"> {
  %loss = nn.fill 0.0 : tensor<f32>
  // expected-error @+1 {{'zero.transfer' op swap buffers of 4096 bytes cannot hold the 2050-element shard of @flat in 'bf16' (8192 bytes in whole 4096-byte blocks)}}
  %sh, %t = zero.transfer group @flat params to staging swap <buffer = 0, buffers = 1, buffer_bytes = 4096> : tensor<2050xbf16> -> !zero.token
  zero.return %loss : tensor<f32>
}

// -----

// Checks that the host Adam's parameters go back to shards on NVMe
// (the host Adam writes only shards in host memory in place).
zero.param @w : tensor<8xf32> init zeros compute bf16
zero.partition @flat stage 3 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.train_step @train(%x: tensor<2x8xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4>
    offload #zero.offload<optimizer = cpu, param = nvme, param_nvme_path = "/p"> {
  %loss = nn.fill 0.0 : tensor<f32>
  // expected-error @+1 {{'zero.transfer' op uploads master, but partition @flat computes in 'bf16' (16-bit parameters are uploaded from host_params)}}
  %t = zero.transfer group @flat master to params swap <buffer = 0, buffers = 1, buffer_bytes = 4096> phase boundary -> !zero.token
  zero.return %loss : tensor<f32>
}

// -----

// Checks that the label count runs in the first micro step only.
zero.param @w : tensor<8xf32> init zeros
zero.partition @flat stage 0 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.train_step @train(%y: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 2, global_batch = 4> {
  // expected-error @+1 {{'zero.count_labels' op counts the labels before the first backward of the optimizer step: its phase must be first_micro_step, not micro_step}}
  %n = zero.count_labels %y ignore_index -100 group @flat phase micro_step : tensor<2xi64> -> tensor<1xi64>
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that the label count is one int64.
zero.param @w : tensor<8xf32> init zeros
zero.partition @flat stage 0 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.train_step @train(%y: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 2, global_batch = 4> {
  // expected-error @+1 {{'zero.count_labels' op the count is one int64, a tensor<1xi64>, got 'tensor<2xi64>'}}
  %n = zero.count_labels %y ignore_index -100 group @flat : tensor<2xi64> -> tensor<2xi64>
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that the label count names a partition.
zero.param @w : tensor<8xf32> init zeros
zero.partition @flat stage 0 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.train_step @train(%y: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 2, global_batch = 4> {
  // expected-error @+1 {{'zero.count_labels' op references unknown partition @nowhere}}
  %n = zero.count_labels %y ignore_index -100 group @nowhere : tensor<2xi64> -> tensor<1xi64>
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that a label share reads counts the step makes.
zero.param @w : tensor<8xf32> init zeros
zero.train_step @train(%y: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  // expected-error @+1 {{'zero.label_share' op reads the step's label counts, but the step has no zero.count_labels}}
  %loss = zero.label_share divisor 1.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that the share's divisor is a world size times accumulation steps.
zero.param @w : tensor<8xf32> init zeros
zero.partition @flat stage 0 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.train_step @train(%y: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 2, global_batch = 4> {
  %n = zero.count_labels %y ignore_index -100 group @flat : tensor<2xi64> -> tensor<1xi64>
  // expected-error @+1 {{'zero.label_share' op divisor must be at least 1 (world size times accumulation steps), got 5.000000e-01}}
  %loss = zero.label_share divisor 0.5 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// zero.hf_model: config.json's text must be a JSON object with a
// model_type.
// expected-error @+1 {{config is not valid JSON}}
module attributes {zero.hf_model = #zero.hf_model<config = "{\22model_type\22: ">} {
}

// -----

// expected-error @+1 {{config has no "model_type" string}}
module attributes {zero.hf_model = #zero.hf_model<config = "{}">} {
}

// -----

// expected-error @+1 {{tied name 'lm_head.weight' must map to a parameter name (a string), got 1 : i64}}
module attributes {zero.hf_model = #zero.hf_model<config = "{\22model_type\22: \22llama\22}", tied = {"lm_head.weight" = 1}>} {
}

// -----

// expected-error @+1 {{'builtin.module' op attribute 'zero.hf_model' ties 'lm_head.weight' to 'embed', which is no zero.param of the module}}
module attributes {zero.hf_model = #zero.hf_model<config = "{\22model_type\22: \22llama\22}", tied = {"lm_head.weight" = "embed"}>} {
  zero.param @w : tensor<4xf32> init zeros
}

// -----

// expected-error @+1 {{'builtin.module' op attribute 'zero.hf_model' ties 'w', which is a symbol of the module itself}}
module attributes {zero.hf_model = #zero.hf_model<config = "{\22model_type\22: \22llama\22}", tied = {"w" = "v"}>} {
  zero.param @v : tensor<4xf32> init zeros
  zero.param @w : tensor<4xf32> init zeros
}

// -----

// expected-error @+1 {{buffer 'model.layers.0.layer_scalar' must be a dense tensor of f32 values, got dense<1.000000e+00> : tensor<1xf64>}}
module attributes {zero.hf_model = #zero.hf_model<config = "{\22model_type\22: \22llama\22}", buffers = {"model.layers.0.layer_scalar" = dense<1.0> : tensor<1xf64>}>} {
}

// -----

// expected-error @+1 {{buffer 's' holds a value that is not finite}}
module attributes {zero.hf_model = #zero.hf_model<config = "{\22model_type\22: \22llama\22}", buffers = {"s" = dense<"0x0000807F"> : tensor<1xf32>}>} {
}

// -----

// expected-error @+1 {{tensor 's' is named twice among buffers and unused}}
module attributes {zero.hf_model = #zero.hf_model<config = "{\22model_type\22: \22llama\22}", buffers = {"s" = dense<1.0> : tensor<1xf32>}, unused = ["s"]>} {
}

// -----

// expected-error @+1 {{unused must hold tensor names (strings), got 1 : i64}}
module attributes {zero.hf_model = #zero.hf_model<config = "{\22model_type\22: \22llama\22}", unused = [1]>} {
}

// -----

// expected-error @+1 {{'builtin.module' op attribute 'zero.hf_model' names 'w' as no parameter of the step, but it is one or a tied name}}
module attributes {zero.hf_model = #zero.hf_model<config = "{\22model_type\22: \22llama\22}", unused = ["w"]>} {
  zero.param @w : tensor<4xf32> init zeros
}

// -----

// expected-error @+1 {{'zero.hf_model' is only valid on a module}}
zero.param @w : tensor<4xf32> init zeros {zero.hf_model = #zero.hf_model<config = "{\22model_type\22: \22llama\22}">}

// -----

// Checks that a frozen partition lists frozen parameters only.
zero.param @w : tensor<4xf32> init zeros
zero.param @f : tensor<4xf32> init ones frozen
// expected-error @+1 {{'zero.partition' op parameter @w is trainable, but the partition is frozen (a partition holds only trainable or only frozen parameters)}}
zero.partition @g stage 0 world_size 1 alignment 1 numel 8 padded 8 params [@f, @w] offsets [0, 4] frozen

// -----

// Checks that a trainable partition lists no frozen parameter.
zero.param @w : tensor<4xf32> init zeros
zero.param @f : tensor<4xf32> init ones frozen
// expected-error @+1 {{'zero.partition' op parameter @f is frozen, but the partition is trainable (a partition holds only trainable or only frozen parameters)}}
zero.partition @g stage 0 world_size 1 alignment 1 numel 8 padded 8 params [@w, @f] offsets [0, 4]

// -----

// Checks that a frozen partition has its parameters only.
zero.param @f : tensor<4xf32> init ones frozen
// expected-error @+1 {{'zero.partition' op buffers #zero.buffer_offsets<params = 0, grads = 64> of a frozen partition have grads (a frozen partition has params only)}}
zero.partition @g stage 0 world_size 1 alignment 1 numel 4 padded 4 params [@f] offsets [0] frozen
    {zero.buffers = #zero.buffer_offsets<params = 0, grads = 64>}

// -----

// Checks that a trainable partition has its gradients and Adam moments.
zero.param @w : tensor<4xf32> init zeros
// expected-error @+1 {{'zero.partition' op buffers #zero.buffer_offsets<params = 0, grads = 64, exp_avg = 128> lack exp_avg_sq (only a frozen partition has params only)}}
zero.partition @g stage 0 world_size 1 alignment 1 numel 4 padded 4 params [@w] offsets [0]
    {zero.buffers = #zero.buffer_offsets<params = 0, grads = 64, exp_avg = 128>}

// -----

// Checks that a frozen parameter has no gradient.
zero.param @w : tensor<4xf32> init zeros
zero.param @f : tensor<4xf32> init ones frozen
func.func @grad_of_frozen(%g: tensor<4xf32>) {
  // expected-error @+1 {{'zero.grad' op binds a gradient of frozen parameter @f (a frozen parameter has no gradient)}}
  zero.grad @f, %g : tensor<4xf32>
  return
}

// -----

// Checks that ranks per node divide the world.
zero.train_step @bad_ranks_per_node(%x: tensor<4x2xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    // expected-error @+1 {{ranks_per_node 3 must divide world_size 4}}
    schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 8, ranks_per_node = 3> {
  %l = nn.fill 0.0 : tensor<f32>
  zero.return %l : tensor<f32>
}

// -----

// Checks that a mesh is written as its sizes build it (equal hpZ and
// sequence-parallel groups: hpz outside, of size 1).
zero.train_step @bad_hpz(%x: tensor<4x2xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    // expected-error @+1 {{mesh #zero.mesh<[data = 1, sequence = 1, hpz = 4]> must be written #zero.mesh<[data = 1, hpz = 1, sequence = 4]>}}
    schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 8, mesh = #zero.mesh<[data = 1, sequence = 1, hpz = 4]>> {
  %l = nn.fill 0.0 : tensor<f32>
  zero.return %l : tensor<f32>
}

// -----

// Checks that MiCS needs stage 3.
zero.train_step @bad_mics_stage(%x: tensor<4x2xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    // expected-error @+1 {{mics_shard_size needs stage 3, got stage 2}}
    schedule #zero.schedule<stage = 2, world_size = 4, global_batch = 8, mesh = #zero.mesh<[data = 2, mics = 2]>> {
  %l = nn.fill 0.0 : tensor<f32>
  zero.return %l : tensor<f32>
}

// -----

// Checks that a mesh holds at most kMaxWorldSize ranks.
zero.train_step @huge_mesh(%x: tensor<4x2xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    // expected-error @+2 {{a mesh has at most 1048576 ranks}}
    // expected-error @+1 {{failed to parse Zero_ScheduleAttr parameter 'mesh'}}
    schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 8, mesh = #zero.mesh<[data = 1048576, hpz = 1048576, sequence = 1048576]>> {
  %l = nn.fill 0.0 : tensor<f32>
  zero.return %l : tensor<f32>
}

// -----

// Checks that a mesh names each axis once.
zero.train_step @bad_mics_size(%x: tensor<4x2xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    // expected-error @+2 {{mesh axis data appears twice}}
    // expected-error @+1 {{failed to parse Zero_ScheduleAttr parameter 'mesh'}}
    schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 8, mesh = #zero.mesh<[data = 4, data = 1]>> {
  %l = nn.fill 0.0 : tensor<f32>
  zero.return %l : tensor<f32>
}

// -----

// Checks that hpZ and MiCS are not combined (as in DeepSpeed).
zero.train_step @bad_hpz_mics(%x: tensor<4x2xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    // expected-error @+1 {{hpz_partition_size and mics_shard_size exclude each other}}
    schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 8, mesh = #zero.mesh<[data = 2, hpz = 1, mics = 2]>> {
  %l = nn.fill 0.0 : tensor<f32>
  zero.return %l : tensor<f32>
}

// -----

// Checks that qwZ quantizes 16-bit weights only.
zero.param @w : tensor<8xf32> init zeros
zero.partition @flat stage 3 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.train_step @train(%x: tensor<2x8xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4> {
  %loss = nn.fill 0.0 : tensor<f32>
  // expected-error @+1 {{'zero.all_gather' op quantizes 16-bit weights (bf16 or f16), not 'f32'}}
  %full = zero.all_gather group @flat quantized : tensor<8xf32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that an in-place gather is not quantized.
zero.param @w : tensor<8xf32> init zeros compute bf16
zero.partition @flat stage 2 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.train_step @train(%x: tensor<2x8xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 4> {
  %loss = nn.fill 0.0 : tensor<f32>
  // expected-error @+1 {{'zero.all_gather' op quantizes only the value form of a stage-3 gather, not an in-place gather}}
  zero.all_gather group @flat in params [0, 8) quantized phase post_step
  zero.return %loss : tensor<f32>
}

// -----

// Checks that a quantized gather reads the device shard, not a staged one.
zero.param @w : tensor<8xf32> init zeros compute bf16
zero.partition @flat stage 3 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.train_step @train(%x: tensor<2x8xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4>
    offload #zero.offload<param = cpu> {
  %loss = nn.fill 0.0 : tensor<f32>
  %sh, %st = zero.transfer group @flat params to staging : tensor<4xbf16> -> !zero.token
  zero.wait %st
  // expected-error @+1 {{'zero.prefetch' op is quantized, so it reads the params shard on the device, not a staged shard}}
  %full, %t = zero.prefetch group @flat from %sh : tensor<4xbf16> quantized : tensor<8xbf16>
  zero.return %loss : tensor<f32>
}

// -----

// Checks torch.optim.Adafactor's bound on beta2_decay (the weight step^beta2_decay
// must not grow).
// expected-error @+2 {{optimizer beta2_decay must be <= 0, got 1.000000e-01}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adafactor, lr = 1.0e-2, beta2_decay = 0.1>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that eps1 is >= 0, or -1 for torch's None only.
// expected-error @+2 {{optimizer eps1 must be >= 0, or -1 for torch's None, got -2.000000e+00}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adafactor, lr = 1.0e-2, eps1 = -2.0>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that eps2 is >= 0, as torch.optim.Adafactor.
// expected-error @+2 {{optimizer eps2 must be >= 0, got -1.000000e-03}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adafactor, lr = 1.0e-2, eps2 = -1.0e-3>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that the clipping threshold d, which the update's RMS is divided
// by, is positive.
// expected-error @+2 {{optimizer d must be positive, got 0.000000e+00}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adafactor, lr = 1.0e-2, d = 0.0>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that Adafactor (no betas in optimizers.def) rejects Adam's beta2.
// expected-error @+2 {{optimizer adafactor has no beta2, got 9.000000e-01}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adafactor, lr = 1.0e-2, beta2 = 0.9>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that AdamW rejects Adafactor's parameters.
// expected-error @+2 {{optimizer adamw has no beta2_decay, got -5.000000e-01}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-2, beta2_decay = -0.5>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that SGD rejects Adafactor's maximize (it has none).
// expected-error @+2 {{optimizer sgd has no maximize}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = sgd, lr = 1.0e-2, maximize = true>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that int8 optimizer states are not offloaded to NVMe, whose swap
// streams f32 states (refused before any lowering, so --emit mlir too).
// expected-error @+1 {{'zero.train_step' op optimizer states in int8 are not swapped to NVMe: offload the optimizer to the CPU or keep it on the device}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-3, states = int8>
    precision #zero.precision<kind = fp32>
    offload #zero.offload<optimizer = nvme, nvme_path = "/nvme"> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that a step's sums are numbered in order.
zero.param @w : tensor<8xf32> init zeros
zero.partition @flat stage 0 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.train_step @train(%m: tensor<2x1xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 2, global_batch = 4> {
  %s = nn.reduce_sum %m : tensor<2x1xf32> -> tensor<f32>
  // expected-error @+1 {{'zero.count_sum' op is the step's zero.count_sum number 0 but has index 1 (indices are 0, 1, ... in the order of the ops)}}
  %n = zero.count_sum %s index 1 group @flat : tensor<f32> -> tensor<1xf32>
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that the sum runs in the first micro step only.
zero.param @w : tensor<8xf32> init zeros
zero.partition @flat stage 0 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.train_step @train(%m: tensor<2x1xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 2, global_batch = 4> {
  %s = nn.reduce_sum %m : tensor<2x1xf32> -> tensor<f32>
  // expected-error @+1 {{'zero.count_sum' op sums before the first backward of the optimizer step: its phase must be first_micro_step, not micro_step}}
  %n = zero.count_sum %s index 0 group @flat phase micro_step : tensor<f32> -> tensor<1xf32>
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that a global sum is one the step counts.
zero.param @w : tensor<8xf32> init zeros
zero.train_step @train(%m: tensor<2x1xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  // expected-error @+1 {{'zero.step_sum' op reads the sum of index 0, but the step has no zero.count_sum of it}}
  %loss = zero.step_sum index 0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that a micro share divides by the world's micro batches.
zero.param @w : tensor<8xf32> init zeros
zero.train_step @train(%m: tensor<2x1xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  // expected-error @+1 {{'zero.micro_share' op divisor must be at least 1 (world size times accumulation steps), got 5.000000e-01}}
  %loss = zero.micro_share divisor 0.5 : tensor<f32>
  zero.return %loss : tensor<f32>
}
