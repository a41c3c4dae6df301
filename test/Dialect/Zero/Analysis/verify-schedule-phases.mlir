// RUN: zero-opt %s -split-input-file --zero-verify-schedule -verify-diagnostics

// zero-verify-schedule's phase rules: ops run in every micro step or once per
// optimizer step (the boundary), and the lowering emits the two kinds into
// two functions, so values, waits and the optimizer must respect that. One
// accepted schedule, then one broken rule per case.

// A stage-1 schedule with two micro steps: the in-place reduction and its wait at the boundary, the optimizer at the boundary, the parameter gather after it, is accepted.
zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<2x3xf32> init zeros compute bf16
zero.partition @flat stage 1 world_size 2 alignment 2 numel 10 padded 12 params [@a, @b] offsets [0, 4]
zero.train_step @step(%x: tensor<2x3xbf16>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 1, world_size = 2, global_batch = 8, accumulation_steps = 2> {
  %b = zero.get_param @b : tensor<2x3xbf16>
  %y = nn.mul %x, %b : tensor<2x3xbf16>, tensor<2x3xbf16>
  %loss = nn.softmax_cross_entropy %y, %lbl : tensor<2x3xbf16>, tensor<2xi64> -> tensor<f32>
  %seed = nn.fill 1.0 : tensor<f32>
  %dy = nn.softmax_cross_entropy_grad %y, %lbl, %seed : tensor<2x3xbf16>, tensor<2xi64>, tensor<f32>
  %db = nn.mul %dy, %x : tensor<2x3xbf16>, tensor<2x3xbf16>
  zero.grad @b, %db : tensor<2x3xbf16>
  %da = nn.fill 0.0 : tensor<4xbf16>
  zero.grad @a, %da : tensor<4xbf16>
  %t = zero.reduce_scatter group @flat in grads [0, 10) phase boundary -> !zero.token
  zero.wait %t phase boundary
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 4.0 phase boundary : tensor<2xf32>
  %g = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %g phase boundary : tensor<2xf32> -> i1
  zero.optimizer_step group @flat stats %g scale %s skip %skip divisor 4.0 phase boundary : tensor<2xf32>
  zero.all_gather group @flat in params [0, 10) phase post_step
  zero.return %loss : tensor<f32>
}

// -----

// The optimizer runs once per optimizer step.
zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<2x3xf32> init zeros compute bf16
zero.partition @flat stage 1 world_size 2 alignment 2 numel 10 padded 12 params [@a, @b] offsets [0, 4]
zero.train_step @step(%x: tensor<2x3xbf16>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 1, world_size = 2, global_batch = 8, accumulation_steps = 2> {
  %b = zero.get_param @b : tensor<2x3xbf16>
  %y = nn.mul %x, %b : tensor<2x3xbf16>, tensor<2x3xbf16>
  %loss = nn.softmax_cross_entropy %y, %lbl : tensor<2x3xbf16>, tensor<2xi64> -> tensor<f32>
  %seed = nn.fill 1.0 : tensor<f32>
  %dy = nn.softmax_cross_entropy_grad %y, %lbl, %seed : tensor<2x3xbf16>, tensor<2xi64>, tensor<f32>
  %db = nn.mul %dy, %x : tensor<2x3xbf16>, tensor<2x3xbf16>
  zero.grad @b, %db : tensor<2x3xbf16>
  %da = nn.fill 0.0 : tensor<4xbf16>
  zero.grad @a, %da : tensor<4xbf16>
  %t = zero.reduce_scatter group @flat in grads [0, 10) phase boundary -> !zero.token
  zero.wait %t phase boundary
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 4.0 phase boundary : tensor<2xf32>
  %g = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  // expected-error @+1 {{'zero.update_loss_scale' op belongs to the optimizer, which runs once per optimizer step: its phase must be boundary, not micro_step}}
  %skip = zero.update_loss_scale %g : tensor<2xf32> -> i1
  zero.optimizer_step group @flat stats %g scale %s skip %skip divisor 4.0 phase boundary : tensor<2xf32>
  zero.all_gather group @flat in params [0, 10) phase post_step
  zero.return %loss : tensor<f32>
}

// -----

// Nothing of the optimizer comes after an op the step places after it.
zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<2x3xf32> init zeros compute bf16
zero.partition @flat stage 1 world_size 2 alignment 2 numel 10 padded 12 params [@a, @b] offsets [0, 4]
zero.train_step @step(%x: tensor<2x3xbf16>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 1, world_size = 2, global_batch = 8, accumulation_steps = 2> {
  %b = zero.get_param @b : tensor<2x3xbf16>
  %y = nn.mul %x, %b : tensor<2x3xbf16>, tensor<2x3xbf16>
  %loss = nn.softmax_cross_entropy %y, %lbl : tensor<2x3xbf16>, tensor<2xi64> -> tensor<f32>
  %seed = nn.fill 1.0 : tensor<f32>
  %dy = nn.softmax_cross_entropy_grad %y, %lbl, %seed : tensor<2x3xbf16>, tensor<2xi64>, tensor<f32>
  %db = nn.mul %dy, %x : tensor<2x3xbf16>, tensor<2x3xbf16>
  zero.grad @b, %db : tensor<2x3xbf16>
  %da = nn.fill 0.0 : tensor<4xbf16>
  zero.grad @a, %da : tensor<4xbf16>
  %t = zero.reduce_scatter group @flat in grads [0, 10) phase boundary -> !zero.token
  zero.wait %t phase boundary
  // expected-note @+1 {{that op}}
  zero.free %db phase step_end : tensor<2x3xbf16>
  %s = zero.loss_scale phase boundary : tensor<f32>
  // expected-error @+1 {{'zero.check_overflow' op belongs to the optimizer but comes after an op of phase step_end}}
  %st = zero.check_overflow groups [@flat] scale %s divisor 4.0 phase boundary : tensor<2xf32>
  %g = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %g phase boundary : tensor<2xf32> -> i1
  zero.optimizer_step group @flat stats %g scale %s skip %skip divisor 4.0 phase boundary : tensor<2xf32>
  zero.all_gather group @flat in params [0, 10) phase post_step
  zero.return %loss : tensor<f32>
}

// -----

// An in-place reduction of the accumulated gradients runs once per optimizer step.
zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<2x3xf32> init zeros compute bf16
zero.partition @flat stage 1 world_size 2 alignment 2 numel 10 padded 12 params [@a, @b] offsets [0, 4]
zero.train_step @step(%x: tensor<2x3xbf16>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 1, world_size = 2, global_batch = 8, accumulation_steps = 2> {
  %b = zero.get_param @b : tensor<2x3xbf16>
  %y = nn.mul %x, %b : tensor<2x3xbf16>, tensor<2x3xbf16>
  %loss = nn.softmax_cross_entropy %y, %lbl : tensor<2x3xbf16>, tensor<2xi64> -> tensor<f32>
  %seed = nn.fill 1.0 : tensor<f32>
  %dy = nn.softmax_cross_entropy_grad %y, %lbl, %seed : tensor<2x3xbf16>, tensor<2xi64>, tensor<f32>
  %db = nn.mul %dy, %x : tensor<2x3xbf16>, tensor<2x3xbf16>
  zero.grad @b, %db : tensor<2x3xbf16>
  %da = nn.fill 0.0 : tensor<4xbf16>
  zero.grad @a, %da : tensor<4xbf16>
  // expected-error @+1 {{'zero.reduce_scatter' op reduces the accumulated gradients in place, which happens once per optimizer step: its phase must be boundary or last_micro_step, not micro_step}}
  %t = zero.reduce_scatter group @flat in grads [0, 10) -> !zero.token
  zero.wait %t
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 4.0 phase boundary : tensor<2xf32>
  %g = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %g phase boundary : tensor<2xf32> -> i1
  zero.optimizer_step group @flat stats %g scale %s skip %skip divisor 4.0 phase boundary : tensor<2xf32>
  zero.all_gather group @flat in params [0, 10) phase post_step
  zero.return %loss : tensor<f32>
}

// -----

// The in-place gather of the updated parameters comes after the optimizer.
zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<2x3xf32> init zeros compute bf16
zero.partition @flat stage 1 world_size 2 alignment 2 numel 10 padded 12 params [@a, @b] offsets [0, 4]
zero.train_step @step(%x: tensor<2x3xbf16>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 1, world_size = 2, global_batch = 8, accumulation_steps = 2> {
  %b = zero.get_param @b : tensor<2x3xbf16>
  %y = nn.mul %x, %b : tensor<2x3xbf16>, tensor<2x3xbf16>
  %loss = nn.softmax_cross_entropy %y, %lbl : tensor<2x3xbf16>, tensor<2xi64> -> tensor<f32>
  %seed = nn.fill 1.0 : tensor<f32>
  %dy = nn.softmax_cross_entropy_grad %y, %lbl, %seed : tensor<2x3xbf16>, tensor<2xi64>, tensor<f32>
  %db = nn.mul %dy, %x : tensor<2x3xbf16>, tensor<2x3xbf16>
  zero.grad @b, %db : tensor<2x3xbf16>
  %da = nn.fill 0.0 : tensor<4xbf16>
  zero.grad @a, %da : tensor<4xbf16>
  %t = zero.reduce_scatter group @flat in grads [0, 10) phase boundary -> !zero.token
  zero.wait %t phase boundary
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 4.0 phase boundary : tensor<2xf32>
  %g = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %g phase boundary : tensor<2xf32> -> i1
  zero.optimizer_step group @flat stats %g scale %s skip %skip divisor 4.0 phase boundary : tensor<2xf32>
  // expected-error @+1 {{'zero.all_gather' op gathers the updated parameters in place, after the optimizer: its phase must be post_step, not boundary}}
  zero.all_gather group @flat in params [0, 10) phase boundary
  zero.return %loss : tensor<f32>
}

// -----

// A wait runs where its collective runs (every micro step, or once).
zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<2x3xf32> init zeros compute bf16
zero.partition @flat stage 1 world_size 2 alignment 2 numel 10 padded 12 params [@a, @b] offsets [0, 4]
zero.train_step @step(%x: tensor<2x3xbf16>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 1, world_size = 2, global_batch = 8, accumulation_steps = 2> {
  %b = zero.get_param @b : tensor<2x3xbf16>
  %y = nn.mul %x, %b : tensor<2x3xbf16>, tensor<2x3xbf16>
  %loss = nn.softmax_cross_entropy %y, %lbl : tensor<2x3xbf16>, tensor<2xi64> -> tensor<f32>
  %seed = nn.fill 1.0 : tensor<f32>
  %dy = nn.softmax_cross_entropy_grad %y, %lbl, %seed : tensor<2x3xbf16>, tensor<2xi64>, tensor<f32>
  %db = nn.mul %dy, %x : tensor<2x3xbf16>, tensor<2x3xbf16>
  zero.grad @b, %db : tensor<2x3xbf16>
  %da = nn.fill 0.0 : tensor<4xbf16>
  zero.grad @a, %da : tensor<4xbf16>
  // expected-note @+1 {{the collective}}
  %t = zero.reduce_scatter group @flat in grads [0, 10) phase boundary -> !zero.token
  // expected-error @+1 {{'zero.wait' op runs in phase micro_step but waits for a collective of phase boundary: one runs in every micro step, the other once per optimizer step}}
  zero.wait %t
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 4.0 phase boundary : tensor<2xf32>
  %g = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %g phase boundary : tensor<2xf32> -> i1
  zero.optimizer_step group @flat stats %g scale %s skip %skip divisor 4.0 phase boundary : tensor<2xf32>
  zero.all_gather group @flat in params [0, 10) phase post_step
  zero.return %loss : tensor<f32>
}

// -----

// An op of every micro step cannot read a value only the last micro step computes.
zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<2x3xf32> init zeros compute bf16
zero.partition @flat stage 1 world_size 2 alignment 2 numel 10 padded 12 params [@a, @b] offsets [0, 4]
zero.train_step @step(%x: tensor<2x3xbf16>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 1, world_size = 2, global_batch = 8, accumulation_steps = 2> {
  %b = zero.get_param @b : tensor<2x3xbf16>
  %y = nn.mul %x, %b : tensor<2x3xbf16>, tensor<2x3xbf16>
  %loss = nn.softmax_cross_entropy %y, %lbl : tensor<2x3xbf16>, tensor<2xi64> -> tensor<f32>
  // expected-note @+1 {{computed here}}
  %seed = zero.loss_scale phase boundary : tensor<f32>
  // expected-error @+1 {{'nn.softmax_cross_entropy_grad' op runs in every micro step but uses a value that only the last micro step computes (phase boundary)}}
  %dy = nn.softmax_cross_entropy_grad %y, %lbl, %seed : tensor<2x3xbf16>, tensor<2xi64>, tensor<f32>
  %db = nn.mul %dy, %x : tensor<2x3xbf16>, tensor<2x3xbf16>
  zero.grad @b, %db : tensor<2x3xbf16>
  %da = nn.fill 0.0 : tensor<4xbf16>
  zero.grad @a, %da : tensor<4xbf16>
  %t = zero.reduce_scatter group @flat in grads [0, 10) phase boundary -> !zero.token
  zero.wait %t phase boundary
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 4.0 phase boundary : tensor<2xf32>
  %g = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %g phase boundary : tensor<2xf32> -> i1
  zero.optimizer_step group @flat stats %g scale %s skip %skip divisor 4.0 phase boundary : tensor<2xf32>
  zero.all_gather group @flat in params [0, 10) phase post_step
  zero.return %loss : tensor<f32>
}

// -----

// What the first micro step computes is read there only: the other micro
// steps do not run it.
zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<2x3xf32> init zeros compute bf16
zero.partition @flat stage 1 world_size 2 alignment 2 numel 10 padded 12 params [@a, @b] offsets [0, 4]
zero.train_step @step(%x: tensor<2x3xbf16>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 1, world_size = 2, global_batch = 8, accumulation_steps = 2> {
  // expected-note @+1 {{computed here}}
  %n = zero.count_labels %lbl ignore_index -100 group @flat : tensor<2xi64> -> tensor<1xi64>
  %b = zero.get_param @b : tensor<2x3xbf16>
  // expected-error @+1 {{'nn.embedding' op uses a value that only the first micro step computes (phase first_micro_step)}}
  %e = nn.embedding %b[%n] : tensor<2x3xbf16>, tensor<1xi64> -> tensor<1x3xbf16>
  %y = nn.mul %x, %b : tensor<2x3xbf16>, tensor<2x3xbf16>
  %loss = nn.softmax_cross_entropy %y, %lbl : tensor<2x3xbf16>, tensor<2xi64> -> tensor<f32>
  %seed = nn.fill 1.0 : tensor<f32>
  %dy = nn.softmax_cross_entropy_grad %y, %lbl, %seed : tensor<2x3xbf16>, tensor<2xi64>, tensor<f32>
  %db = nn.mul %dy, %x : tensor<2x3xbf16>, tensor<2x3xbf16>
  zero.grad @b, %db : tensor<2x3xbf16>
  %da = nn.fill 0.0 : tensor<4xbf16>
  zero.grad @a, %da : tensor<4xbf16>
  %t = zero.reduce_scatter group @flat in grads [0, 10) phase boundary -> !zero.token
  zero.wait %t phase boundary
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 4.0 phase boundary : tensor<2xf32>
  %g = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %g phase boundary : tensor<2xf32> -> i1
  zero.optimizer_step group @flat stats %g scale %s skip %skip divisor 4.0 phase boundary : tensor<2xf32>
  zero.all_gather group @flat in params [0, 10) phase post_step
  zero.return %loss : tensor<f32>
}
