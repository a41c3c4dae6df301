// RUN: zero-opt %s -split-input-file --zero-verify-schedule -verify-diagnostics

// zero-verify-schedule's rules for gradients streamed to the host in the last
// micro step (phase last_micro_step): each owned range is copied once, after
// its reduction completed, and the copies' tokens are waited in a phase that
// runs once per optimizer step and not before their issue. One accepted
// schedule, then one broken rule per case.

// A streamed stage-2 schedule with two micro steps is accepted: each
// bucket's owned gradients go to the host in the last micro step right
// after its reduction completed, while the other bucket's reduction is
// still in flight, and the host Adam waits for both copies.
zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<4xf32> init zeros compute bf16
zero.partition @flat stage 2 world_size 2 alignment 2 numel 8 padded 8 params [@a, @b] offsets [0, 4]
zero.train_step @step(%x: tensor<2x8xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 8, accumulation_steps = 2>
    offload #zero.offload<optimizer = cpu> {
  %loss = nn.fill 0.0 : tensor<f32>
  %gb = nn.fill 1.0 : tensor<4xbf16>
  zero.grad @b, %gb : tensor<4xbf16>
  %t1 = zero.reduce_scatter group @flat [4, 8) from %gb at [0] : tensor<4xbf16> -> !zero.token
  %ga = nn.fill 1.0 : tensor<4xbf16>
  zero.grad @a, %ga : tensor<4xbf16>
  %t0 = zero.reduce_scatter group @flat [0, 4) from %ga at [0] : tensor<4xbf16> -> !zero.token
  zero.wait %t1
  %d1 = zero.transfer group @flat grads[4, 8) to host_grads phase last_micro_step -> !zero.token
  zero.free %gb : tensor<4xbf16>
  zero.wait %t0
  %d0 = zero.transfer group @flat grads[0, 4) to host_grads phase last_micro_step -> !zero.token
  zero.free %ga : tensor<4xbf16>
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 4.0 phase boundary : tensor<2xf32>
  %gs = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %gs phase boundary : tensor<2xf32> -> i1
  zero.wait %d1 phase boundary
  zero.wait %d0 phase boundary
  zero.optimizer_step group @flat stats %gs scale %s skip %skip divisor 4.0 host phase boundary : tensor<2xf32>
  %u = zero.transfer group @flat host_params to params phase boundary -> !zero.token
  zero.wait %u phase boundary
  zero.all_gather group @flat in params [0, 8) phase post_step
  zero.return %loss : tensor<f32>
}

// -----

// A bucket copied while its own reduction is in flight.
zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<4xf32> init zeros compute bf16
zero.partition @flat stage 2 world_size 2 alignment 2 numel 8 padded 8 params [@a, @b] offsets [0, 4]
zero.train_step @step(%x: tensor<2x8xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 8, accumulation_steps = 2>
    offload #zero.offload<optimizer = cpu> {
  %loss = nn.fill 0.0 : tensor<f32>
  %gb = nn.fill 1.0 : tensor<4xbf16>
  zero.grad @b, %gb : tensor<4xbf16>
  %t1 = zero.reduce_scatter group @flat [4, 8) from %gb at [0] : tensor<4xbf16> -> !zero.token
  %ga = nn.fill 1.0 : tensor<4xbf16>
  zero.grad @a, %ga : tensor<4xbf16>
  %t0 = zero.reduce_scatter group @flat [0, 4) from %ga at [0] : tensor<4xbf16> -> !zero.token
  // expected-note @+1 {{collective issued here}}
  %t1b = zero.reduce_scatter group @flat [4, 8) from %gb at [0] : tensor<4xbf16> -> !zero.token
  zero.wait %t1
  // expected-error @+1 {{'zero.transfer' op copies elements [4, 8) of partition @flat (@b) while an asynchronous collective on grads is in flight (wait for its token first)}}
  %d1 = zero.transfer group @flat grads[4, 8) to host_grads phase last_micro_step -> !zero.token
  zero.wait %t1b
  zero.free %gb : tensor<4xbf16>
  zero.wait %t0
  %d0 = zero.transfer group @flat grads[0, 4) to host_grads phase last_micro_step -> !zero.token
  zero.free %ga : tensor<4xbf16>
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 4.0 phase boundary : tensor<2xf32>
  %gs = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %gs phase boundary : tensor<2xf32> -> i1
  zero.wait %d1 phase boundary
  zero.wait %d0 phase boundary
  zero.optimizer_step group @flat stats %gs scale %s skip %skip divisor 4.0 host phase boundary : tensor<2xf32>
  %u = zero.transfer group @flat host_params to params phase boundary -> !zero.token
  zero.wait %u phase boundary
  zero.all_gather group @flat in params [0, 8) phase post_step
  zero.return %loss : tensor<f32>
}

// -----

// A copy of the last micro step waited in every micro step.
zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<4xf32> init zeros compute bf16
zero.partition @flat stage 2 world_size 2 alignment 2 numel 8 padded 8 params [@a, @b] offsets [0, 4]
zero.train_step @step(%x: tensor<2x8xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 8, accumulation_steps = 2>
    offload #zero.offload<optimizer = cpu> {
  %loss = nn.fill 0.0 : tensor<f32>
  %gb = nn.fill 1.0 : tensor<4xbf16>
  zero.grad @b, %gb : tensor<4xbf16>
  %t1 = zero.reduce_scatter group @flat [4, 8) from %gb at [0] : tensor<4xbf16> -> !zero.token
  %ga = nn.fill 1.0 : tensor<4xbf16>
  zero.grad @a, %ga : tensor<4xbf16>
  %t0 = zero.reduce_scatter group @flat [0, 4) from %ga at [0] : tensor<4xbf16> -> !zero.token
  zero.wait %t1
  %d1 = zero.transfer group @flat grads[4, 8) to host_grads phase last_micro_step -> !zero.token
  zero.free %gb : tensor<4xbf16>
  zero.wait %t0
  // expected-note @+1 {{the collective}}
  %d0 = zero.transfer group @flat grads[0, 4) to host_grads phase last_micro_step -> !zero.token
  zero.free %ga : tensor<4xbf16>
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 4.0 phase boundary : tensor<2xf32>
  %gs = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %gs phase boundary : tensor<2xf32> -> i1
  zero.wait %d1 phase boundary
  // expected-error @+1 {{'zero.wait' op runs in phase micro_step but waits for a collective of phase last_micro_step: one runs in every micro step, the other once per optimizer step}}
  zero.wait %d0
  zero.optimizer_step group @flat stats %gs scale %s skip %skip divisor 4.0 host phase boundary : tensor<2xf32>
  %u = zero.transfer group @flat host_params to params phase boundary -> !zero.token
  zero.wait %u phase boundary
  zero.all_gather group @flat in params [0, 8) phase post_step
  zero.return %loss : tensor<f32>
}

// -----

// The last micro step cannot wait for a copy the boundary issues after it.
zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<4xf32> init zeros compute bf16
zero.partition @flat stage 2 world_size 2 alignment 2 numel 8 padded 8 params [@a, @b] offsets [0, 4]
zero.train_step @step(%x: tensor<2x8xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 8, accumulation_steps = 2>
    offload #zero.offload<optimizer = cpu> {
  %loss = nn.fill 0.0 : tensor<f32>
  %gb = nn.fill 1.0 : tensor<4xbf16>
  zero.grad @b, %gb : tensor<4xbf16>
  %t1 = zero.reduce_scatter group @flat [4, 8) from %gb at [0] : tensor<4xbf16> -> !zero.token
  %ga = nn.fill 1.0 : tensor<4xbf16>
  zero.grad @a, %ga : tensor<4xbf16>
  %t0 = zero.reduce_scatter group @flat [0, 4) from %ga at [0] : tensor<4xbf16> -> !zero.token
  zero.wait %t1
  %d1 = zero.transfer group @flat grads[4, 8) to host_grads phase last_micro_step -> !zero.token
  zero.free %gb : tensor<4xbf16>
  zero.wait %t0
  %d0 = zero.transfer group @flat grads[0, 4) to host_grads phase last_micro_step -> !zero.token
  zero.free %ga : tensor<4xbf16>
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 4.0 phase boundary : tensor<2xf32>
  %gs = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %gs phase boundary : tensor<2xf32> -> i1
  zero.wait %d1 phase boundary
  zero.wait %d0 phase boundary
  zero.optimizer_step group @flat stats %gs scale %s skip %skip divisor 4.0 host phase boundary : tensor<2xf32>
  // expected-note @+1 {{the collective}}
  %u = zero.transfer group @flat host_params to params phase boundary -> !zero.token
  // expected-error @+1 {{'zero.wait' op runs in phase last_micro_step but waits for a collective of phase boundary, which is issued after the last micro step}}
  zero.wait %u phase last_micro_step
  zero.all_gather group @flat in params [0, 8) phase post_step
  zero.return %loss : tensor<f32>
}

// -----

// A bucket copied before its (synchronous) reduction ran.
zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<4xf32> init zeros compute bf16
zero.partition @flat stage 2 world_size 2 alignment 2 numel 8 padded 8 params [@a, @b] offsets [0, 4]
zero.train_step @step(%x: tensor<2x8xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 8, accumulation_steps = 2>
    offload #zero.offload<optimizer = cpu> {
  %loss = nn.fill 0.0 : tensor<f32>
  %gb = nn.fill 1.0 : tensor<4xbf16>
  zero.grad @b, %gb : tensor<4xbf16>
  %t1 = zero.reduce_scatter group @flat [4, 8) from %gb at [0] : tensor<4xbf16> -> !zero.token
  %ga = nn.fill 1.0 : tensor<4xbf16>
  zero.grad @a, %ga : tensor<4xbf16>
  zero.wait %t1
  %d1 = zero.transfer group @flat grads[4, 8) to host_grads phase last_micro_step -> !zero.token
  zero.free %gb : tensor<4xbf16>
  // expected-error @+1 {{'zero.transfer' op copies the gradients of elements [0, 4) of partition @flat (@a) to the host before their reduction completed}}
  %d0 = zero.transfer group @flat grads[0, 4) to host_grads phase last_micro_step -> !zero.token
  // expected-note @+1 {{the reduction completes here}}
  zero.reduce_scatter group @flat [0, 4) from %ga at [0] : tensor<4xbf16>
  zero.free %ga : tensor<4xbf16>
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 4.0 phase boundary : tensor<2xf32>
  %gs = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %gs phase boundary : tensor<2xf32> -> i1
  zero.wait %d1 phase boundary
  zero.wait %d0 phase boundary
  zero.optimizer_step group @flat stats %gs scale %s skip %skip divisor 4.0 host phase boundary : tensor<2xf32>
  %u = zero.transfer group @flat host_params to params phase boundary -> !zero.token
  zero.wait %u phase boundary
  zero.all_gather group @flat in params [0, 8) phase post_step
  zero.return %loss : tensor<f32>
}

// -----

// A bucket copied twice.
zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<4xf32> init zeros compute bf16
zero.partition @flat stage 2 world_size 2 alignment 2 numel 8 padded 8 params [@a, @b] offsets [0, 4]
zero.train_step @step(%x: tensor<2x8xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 8, accumulation_steps = 2>
    offload #zero.offload<optimizer = cpu> {
  %loss = nn.fill 0.0 : tensor<f32>
  %gb = nn.fill 1.0 : tensor<4xbf16>
  zero.grad @b, %gb : tensor<4xbf16>
  %t1 = zero.reduce_scatter group @flat [4, 8) from %gb at [0] : tensor<4xbf16> -> !zero.token
  %ga = nn.fill 1.0 : tensor<4xbf16>
  zero.grad @a, %ga : tensor<4xbf16>
  %t0 = zero.reduce_scatter group @flat [0, 4) from %ga at [0] : tensor<4xbf16> -> !zero.token
  zero.wait %t1
  %d1 = zero.transfer group @flat grads[4, 8) to host_grads phase last_micro_step -> !zero.token
  zero.free %gb : tensor<4xbf16>
  zero.wait %t0
  %d0 = zero.transfer group @flat grads[0, 4) to host_grads phase last_micro_step -> !zero.token
  zero.free %ga : tensor<4xbf16>
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 4.0 phase boundary : tensor<2xf32>
  %gs = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %gs phase boundary : tensor<2xf32> -> i1
  zero.wait %d1 phase boundary
  zero.wait %d0 phase boundary
  // expected-error @+1 {{'zero.transfer' op copies the gradients of elements [6, 8) of partition @flat (@b) a second time in this step}}
  %d2 = zero.transfer group @flat grads[6, 8) to host_grads phase boundary -> !zero.token
  zero.wait %d2 phase boundary
  zero.optimizer_step group @flat stats %gs scale %s skip %skip divisor 4.0 host phase boundary : tensor<2xf32>
  %u = zero.transfer group @flat host_params to params phase boundary -> !zero.token
  zero.wait %u phase boundary
  zero.all_gather group @flat in params [0, 8) phase post_step
  zero.return %loss : tensor<f32>
}

// -----

// A bucket never copied.
zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<4xf32> init zeros compute bf16
// expected-error @+1 {{'zero.partition' op elements [0, 4) of partition @flat (@a) are never copied to the host}}
zero.partition @flat stage 2 world_size 2 alignment 2 numel 8 padded 8 params [@a, @b] offsets [0, 4]
zero.train_step @step(%x: tensor<2x8xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 8, accumulation_steps = 2>
    offload #zero.offload<optimizer = cpu> {
  %loss = nn.fill 0.0 : tensor<f32>
  %gb = nn.fill 1.0 : tensor<4xbf16>
  zero.grad @b, %gb : tensor<4xbf16>
  %t1 = zero.reduce_scatter group @flat [4, 8) from %gb at [0] : tensor<4xbf16> -> !zero.token
  %ga = nn.fill 1.0 : tensor<4xbf16>
  zero.grad @a, %ga : tensor<4xbf16>
  %t0 = zero.reduce_scatter group @flat [0, 4) from %ga at [0] : tensor<4xbf16> -> !zero.token
  zero.wait %t1
  %d1 = zero.transfer group @flat grads[4, 8) to host_grads phase last_micro_step -> !zero.token
  zero.free %gb : tensor<4xbf16>
  zero.wait %t0
  zero.free %ga : tensor<4xbf16>
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 4.0 phase boundary : tensor<2xf32>
  %gs = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %gs phase boundary : tensor<2xf32> -> i1
  zero.wait %d1 phase boundary
  zero.optimizer_step group @flat stats %gs scale %s skip %skip divisor 4.0 host phase boundary : tensor<2xf32>
  %u = zero.transfer group @flat host_params to params phase boundary -> !zero.token
  zero.wait %u phase boundary
  zero.all_gather group @flat in params [0, 8) phase post_step
  zero.return %loss : tensor<f32>
}

// -----

// An op of every micro step cannot use a value of the last micro step only.
zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<4xf32> init zeros compute bf16
zero.partition @flat stage 2 world_size 2 alignment 2 numel 8 padded 8 params [@a, @b] offsets [0, 4]
zero.train_step @step(%x: tensor<2x8xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 8, accumulation_steps = 2>
    offload #zero.offload<optimizer = cpu> {
  %loss = nn.fill 0.0 : tensor<f32>
  %gb = nn.fill 1.0 : tensor<4xbf16>
  zero.grad @b, %gb : tensor<4xbf16>
  %t1 = zero.reduce_scatter group @flat [4, 8) from %gb at [0] : tensor<4xbf16> -> !zero.token
  %ga = nn.fill 1.0 : tensor<4xbf16>
  zero.grad @a, %ga : tensor<4xbf16>
  %t0 = zero.reduce_scatter group @flat [0, 4) from %ga at [0] : tensor<4xbf16> -> !zero.token
  zero.wait %t1
  %d1 = zero.transfer group @flat grads[4, 8) to host_grads phase last_micro_step -> !zero.token
  zero.free %gb : tensor<4xbf16>
  zero.wait %t0
  %d0 = zero.transfer group @flat grads[0, 4) to host_grads phase last_micro_step -> !zero.token
  zero.free %ga : tensor<4xbf16>
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 4.0 phase boundary : tensor<2xf32>
  %gs = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %gs phase boundary : tensor<2xf32> -> i1
  zero.wait %d1 phase boundary
  zero.wait %d0 phase boundary
  zero.optimizer_step group @flat stats %gs scale %s skip %skip divisor 4.0 host phase boundary : tensor<2xf32>
  %u = zero.transfer group @flat host_params to params phase boundary -> !zero.token
  zero.wait %u phase boundary
  zero.all_gather group @flat in params [0, 8) phase post_step
  // expected-note @+1 {{computed here}}
  %s2 = zero.loss_scale phase last_micro_step : tensor<f32>
  // expected-error @+1 {{'zero.free' op runs in every micro step but uses a value that only the last micro step computes (phase last_micro_step)}}
  zero.free %s2 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// An op of the last micro step cannot use a value of the boundary after it.
zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<4xf32> init zeros compute bf16
zero.partition @flat stage 2 world_size 2 alignment 2 numel 8 padded 8 params [@a, @b] offsets [0, 4]
zero.train_step @step(%x: tensor<2x8xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 8, accumulation_steps = 2>
    offload #zero.offload<optimizer = cpu> {
  %loss = nn.fill 0.0 : tensor<f32>
  %gb = nn.fill 1.0 : tensor<4xbf16>
  zero.grad @b, %gb : tensor<4xbf16>
  %t1 = zero.reduce_scatter group @flat [4, 8) from %gb at [0] : tensor<4xbf16> -> !zero.token
  %ga = nn.fill 1.0 : tensor<4xbf16>
  zero.grad @a, %ga : tensor<4xbf16>
  %t0 = zero.reduce_scatter group @flat [0, 4) from %ga at [0] : tensor<4xbf16> -> !zero.token
  zero.wait %t1
  %d1 = zero.transfer group @flat grads[4, 8) to host_grads phase last_micro_step -> !zero.token
  zero.free %gb : tensor<4xbf16>
  zero.wait %t0
  %d0 = zero.transfer group @flat grads[0, 4) to host_grads phase last_micro_step -> !zero.token
  zero.free %ga : tensor<4xbf16>
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 4.0 phase boundary : tensor<2xf32>
  %gs = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %gs phase boundary : tensor<2xf32> -> i1
  zero.wait %d1 phase boundary
  zero.wait %d0 phase boundary
  zero.optimizer_step group @flat stats %gs scale %s skip %skip divisor 4.0 host phase boundary : tensor<2xf32>
  %u = zero.transfer group @flat host_params to params phase boundary -> !zero.token
  zero.wait %u phase boundary
  zero.all_gather group @flat in params [0, 8) phase post_step
  // expected-note @+1 {{computed here}}
  %s2 = zero.loss_scale phase boundary : tensor<f32>
  // expected-error @+1 {{'zero.free' op runs in the last micro step but uses a value computed after it (phase boundary)}}
  zero.free %s2 phase last_micro_step : tensor<f32>
  zero.return %loss : tensor<f32>
}
