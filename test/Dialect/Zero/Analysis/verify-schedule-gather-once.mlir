// RUN: zero-opt %s -split-input-file --zero-verify-schedule -verify-diagnostics

// zero-verify-schedule and a frozen stage-3 partition gathered once per
// optimizer step (zero-param-gather frozen-gather=once): the first micro
// step gathers it and every micro step reads it, which its step-arena place
// allows only while no op of a later micro step can reuse that place.

// Accepted: the gather comes first, its buffer is freed once, after the
// last micro step, and nothing after that free produces a buffer.
zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<2x3xf32> init zeros compute bf16 frozen
zero.partition @flat stage 3 world_size 2 alignment 2 numel 4 padded 4 params [@a] offsets [0]
zero.partition @frozen stage 3 world_size 2 alignment 2 numel 6 padded 8 params [@b] offsets [0] frozen
zero.train_step @step(%x: tensor<2x3xbf16>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 8, accumulation_steps = 2> {
  %full = zero.all_gather group @frozen persistent phase first_micro_step : tensor<8xbf16>
  %b = zero.get_param @b from %full : tensor<8xbf16> -> tensor<2x3xbf16>
  %y = nn.mul %x, %b : tensor<2x3xbf16>, tensor<2x3xbf16>
  %loss = nn.softmax_cross_entropy %y, %lbl : tensor<2x3xbf16>, tensor<2xi64> -> tensor<f32>
  %da = nn.fill 0.0 : tensor<4xbf16>
  zero.grad @a, %da : tensor<4xbf16>
  zero.reduce_scatter group @flat [0, 4) from %da at [0] : tensor<4xbf16>
  zero.free %da : tensor<4xbf16>
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 4.0 phase boundary : tensor<2xf32>
  %g = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %g phase boundary : tensor<2xf32> -> i1
  zero.optimizer_step group @flat stats %g scale %s skip %skip divisor 4.0 phase boundary : tensor<2xf32>
  zero.free %full phase post_step : tensor<8xbf16>
  zero.return %loss : tensor<f32>
}

// -----

// Freed in every micro step (step_end), the buffer is gone in the second.
zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<2x3xf32> init zeros compute bf16 frozen
zero.partition @flat stage 3 world_size 2 alignment 2 numel 4 padded 4 params [@a] offsets [0]
zero.partition @frozen stage 3 world_size 2 alignment 2 numel 6 padded 8 params [@b] offsets [0] frozen
zero.train_step @step(%x: tensor<2x3xbf16>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 8, accumulation_steps = 2> {
  // expected-note @+2 {{computed here}}
  // expected-note @+1 {{the other micro steps may read a buffer the first one gathers only when no op of every micro step comes before the gather, the buffer is freed once, after the last micro step, and no op of a micro step after that free produces a buffer}}
  %full = zero.all_gather group @frozen persistent phase first_micro_step : tensor<8xbf16>
  // expected-error @+1 {{'zero.get_param' op uses a value that only the first micro step computes (phase first_micro_step)}}
  %b = zero.get_param @b from %full : tensor<8xbf16> -> tensor<2x3xbf16>
  %y = nn.mul %x, %b : tensor<2x3xbf16>, tensor<2x3xbf16>
  %loss = nn.softmax_cross_entropy %y, %lbl : tensor<2x3xbf16>, tensor<2xi64> -> tensor<f32>
  %da = nn.fill 0.0 : tensor<4xbf16>
  zero.grad @a, %da : tensor<4xbf16>
  zero.reduce_scatter group @flat [0, 4) from %da at [0] : tensor<4xbf16>
  zero.free %da : tensor<4xbf16>
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 4.0 phase boundary : tensor<2xf32>
  %g = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %g phase boundary : tensor<2xf32> -> i1
  zero.optimizer_step group @flat stats %g scale %s skip %skip divisor 4.0 phase boundary : tensor<2xf32>
  zero.free %full phase step_end : tensor<8xbf16>
  zero.return %loss : tensor<f32>
}

// -----

// An op of every micro step before the gather may reuse its place in a
// later micro step.
zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<2x3xf32> init zeros compute bf16 frozen
zero.partition @flat stage 3 world_size 2 alignment 2 numel 4 padded 4 params [@a] offsets [0]
zero.partition @frozen stage 3 world_size 2 alignment 2 numel 6 padded 8 params [@b] offsets [0] frozen
zero.train_step @step(%x: tensor<2x3xbf16>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 8, accumulation_steps = 2> {
  %da = nn.fill 0.0 : tensor<4xbf16>
  // expected-note @+2 {{computed here}}
  // expected-note @+1 {{the other micro steps may read}}
  %full = zero.all_gather group @frozen persistent phase first_micro_step : tensor<8xbf16>
  // expected-error @+1 {{uses a value that only the first micro step computes}}
  %b = zero.get_param @b from %full : tensor<8xbf16> -> tensor<2x3xbf16>
  %y = nn.mul %x, %b : tensor<2x3xbf16>, tensor<2x3xbf16>
  %loss = nn.softmax_cross_entropy %y, %lbl : tensor<2x3xbf16>, tensor<2xi64> -> tensor<f32>
  zero.grad @a, %da : tensor<4xbf16>
  zero.reduce_scatter group @flat [0, 4) from %da at [0] : tensor<4xbf16>
  zero.free %da : tensor<4xbf16>
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 4.0 phase boundary : tensor<2xf32>
  %g = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %g phase boundary : tensor<2xf32> -> i1
  zero.optimizer_step group @flat stats %g scale %s skip %skip divisor 4.0 phase boundary : tensor<2xf32>
  zero.free %full phase post_step : tensor<8xbf16>
  zero.return %loss : tensor<f32>
}

// -----

// An op of every micro step after the free produces a buffer, which may
// take the kept buffer's place while the next micro step still reads it.
zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<2x3xf32> init zeros compute bf16 frozen
zero.partition @flat stage 3 world_size 2 alignment 2 numel 4 padded 4 params [@a] offsets [0]
zero.partition @frozen stage 3 world_size 2 alignment 2 numel 6 padded 8 params [@b] offsets [0] frozen
zero.train_step @step(%x: tensor<2x3xbf16>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 8, accumulation_steps = 2> {
  // expected-note @+2 {{computed here}}
  // expected-note @+1 {{the other micro steps may read}}
  %full = zero.all_gather group @frozen persistent phase first_micro_step : tensor<8xbf16>
  // expected-error @+1 {{uses a value that only the first micro step computes}}
  %b = zero.get_param @b from %full : tensor<8xbf16> -> tensor<2x3xbf16>
  %y = nn.mul %x, %b : tensor<2x3xbf16>, tensor<2x3xbf16>
  %loss = nn.softmax_cross_entropy %y, %lbl : tensor<2x3xbf16>, tensor<2xi64> -> tensor<f32>
  %da = nn.fill 0.0 : tensor<4xbf16>
  zero.grad @a, %da : tensor<4xbf16>
  zero.reduce_scatter group @flat [0, 4) from %da at [0] : tensor<4xbf16>
  zero.free %da : tensor<4xbf16>
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 4.0 phase boundary : tensor<2xf32>
  %g = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %g phase boundary : tensor<2xf32> -> i1
  zero.optimizer_step group @flat stats %g scale %s skip %skip divisor 4.0 phase boundary : tensor<2xf32>
  zero.free %full phase post_step : tensor<8xbf16>
  %late = nn.fill 0.0 : tensor<6xbf16>
  zero.free %late phase step_end : tensor<6xbf16>
  zero.return %loss : tensor<f32>
}
