// RUN: zero-opt %s -split-input-file --zero-verify-schedule -verify-diagnostics

// zero-verify-schedule on hand-written schedules: one consistent stage-2
// schedule, then one broken schedule per rule.

// A consistent stage-2 schedule is accepted.
zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<2x3xf32> init zeros compute bf16
zero.partition @flat stage 2 world_size 2 alignment 2 numel 10 padded 12 params [@a, @b] offsets [0, 4]
zero.train_step @step(%x: tensor<2x3xbf16>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 4> {
  %b = zero.get_param @b : tensor<2x3xbf16>
  %y = nn.mul %x, %b : tensor<2x3xbf16>, tensor<2x3xbf16>
  %loss = nn.softmax_cross_entropy %y, %lbl : tensor<2x3xbf16>, tensor<2xi64> -> tensor<f32>
  %seed = nn.fill 1.0 : tensor<f32>
  %dy = nn.softmax_cross_entropy_grad %y, %lbl, %seed : tensor<2x3xbf16>, tensor<2xi64>, tensor<f32>
  %db = nn.mul %dy, %x : tensor<2x3xbf16>, tensor<2x3xbf16>
  zero.grad @b, %db : tensor<2x3xbf16>
  %t = zero.reduce_scatter group @flat [4, 10) from %db at [0] : tensor<2x3xbf16> -> !zero.token
  %da = nn.fill 0.0 : tensor<4xbf16>
  zero.grad @a, %da : tensor<4xbf16>
  zero.reduce_scatter group @flat [0, 4) from %da at [0] : tensor<4xbf16>
  zero.free %da : tensor<4xbf16>
  zero.wait %t
  zero.free %db : tensor<2x3xbf16>
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 2.0 phase boundary : tensor<2xf32>
  %g = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %g phase boundary : tensor<2xf32> -> i1
  zero.optimizer_step group @flat stats %g scale %s skip %skip divisor 2.0 phase boundary : tensor<2xf32>
  zero.all_gather group @flat in params [0, 10) phase post_step
  zero.return %loss : tensor<f32>
}

// -----

// A collective under control flow could run on some ranks only.
zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<2x3xf32> init zeros compute bf16
zero.partition @flat stage 2 world_size 2 alignment 2 numel 10 padded 12 params [@a, @b] offsets [0, 4]
zero.train_step @step(%x: tensor<2x3xbf16>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 4> {
  %b = zero.get_param @b : tensor<2x3xbf16>
  %y = nn.mul %x, %b : tensor<2x3xbf16>, tensor<2x3xbf16>
  %loss = nn.softmax_cross_entropy %y, %lbl : tensor<2x3xbf16>, tensor<2xi64> -> tensor<f32>
  %seed = nn.fill 1.0 : tensor<f32>
  %dy = nn.softmax_cross_entropy_grad %y, %lbl, %seed : tensor<2x3xbf16>, tensor<2xi64>, tensor<f32>
  %db = nn.mul %dy, %x : tensor<2x3xbf16>, tensor<2x3xbf16>
  zero.grad @b, %db : tensor<2x3xbf16>
  %t = zero.reduce_scatter group @flat [4, 10) from %db at [0] : tensor<2x3xbf16> -> !zero.token
  %da = nn.fill 0.0 : tensor<4xbf16>
  zero.grad @a, %da : tensor<4xbf16>
  %c = arith.constant true
  scf.if %c {
    // expected-error @+1 {{'zero.reduce_scatter' op is nested in control flow: whether it runs could depend on the rank, and a collective that some ranks skip hangs the others}}
    zero.reduce_scatter group @flat [0, 4) from %da at [0] : tensor<4xbf16>
  }
  zero.free %da : tensor<4xbf16>
  zero.wait %t
  zero.free %db : tensor<2x3xbf16>
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 2.0 phase boundary : tensor<2xf32>
  %g = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %g phase boundary : tensor<2xf32> -> i1
  zero.optimizer_step group @flat stats %g scale %s skip %skip divisor 2.0 phase boundary : tensor<2xf32>
  zero.all_gather group @flat in params [0, 10) phase post_step
  zero.return %loss : tensor<f32>
}

// -----

// A token waited twice.
zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<2x3xf32> init zeros compute bf16
zero.partition @flat stage 2 world_size 2 alignment 2 numel 10 padded 12 params [@a, @b] offsets [0, 4]
zero.train_step @step(%x: tensor<2x3xbf16>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 4> {
  %b = zero.get_param @b : tensor<2x3xbf16>
  %y = nn.mul %x, %b : tensor<2x3xbf16>, tensor<2x3xbf16>
  %loss = nn.softmax_cross_entropy %y, %lbl : tensor<2x3xbf16>, tensor<2xi64> -> tensor<f32>
  %seed = nn.fill 1.0 : tensor<f32>
  %dy = nn.softmax_cross_entropy_grad %y, %lbl, %seed : tensor<2x3xbf16>, tensor<2xi64>, tensor<f32>
  %db = nn.mul %dy, %x : tensor<2x3xbf16>, tensor<2x3xbf16>
  zero.grad @b, %db : tensor<2x3xbf16>
  // expected-error @+1 {{'zero.reduce_scatter' op is asynchronous but its token is waited 2 times (exactly once is required)}}
  %t = zero.reduce_scatter group @flat [4, 10) from %db at [0] : tensor<2x3xbf16> -> !zero.token
  %da = nn.fill 0.0 : tensor<4xbf16>
  zero.grad @a, %da : tensor<4xbf16>
  zero.reduce_scatter group @flat [0, 4) from %da at [0] : tensor<4xbf16>
  zero.free %da : tensor<4xbf16>
  zero.wait %t
  zero.wait %t
  zero.free %db : tensor<2x3xbf16>
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 2.0 phase boundary : tensor<2xf32>
  %g = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %g phase boundary : tensor<2xf32> -> i1
  zero.optimizer_step group @flat stats %g scale %s skip %skip divisor 2.0 phase boundary : tensor<2xf32>
  zero.all_gather group @flat in params [0, 10) phase post_step
  zero.return %loss : tensor<f32>
}

// -----

// A token never waited.
zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<2x3xf32> init zeros compute bf16
zero.partition @flat stage 2 world_size 2 alignment 2 numel 10 padded 12 params [@a, @b] offsets [0, 4]
zero.train_step @step(%x: tensor<2x3xbf16>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 4> {
  %b = zero.get_param @b : tensor<2x3xbf16>
  %y = nn.mul %x, %b : tensor<2x3xbf16>, tensor<2x3xbf16>
  %loss = nn.softmax_cross_entropy %y, %lbl : tensor<2x3xbf16>, tensor<2xi64> -> tensor<f32>
  %seed = nn.fill 1.0 : tensor<f32>
  %dy = nn.softmax_cross_entropy_grad %y, %lbl, %seed : tensor<2x3xbf16>, tensor<2xi64>, tensor<f32>
  %db = nn.mul %dy, %x : tensor<2x3xbf16>, tensor<2x3xbf16>
  zero.grad @b, %db : tensor<2x3xbf16>
  // expected-error @+1 {{'zero.reduce_scatter' op is asynchronous but its token is waited 0 times (exactly once is required)}}
  %t = zero.reduce_scatter group @flat [4, 10) from %db at [0] : tensor<2x3xbf16> -> !zero.token
  %da = nn.fill 0.0 : tensor<4xbf16>
  zero.grad @a, %da : tensor<4xbf16>
  zero.reduce_scatter group @flat [0, 4) from %da at [0] : tensor<4xbf16>
  zero.free %da : tensor<4xbf16>
  zero.free %db : tensor<2x3xbf16>
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 2.0 phase boundary : tensor<2xf32>
  %g = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %g phase boundary : tensor<2xf32> -> i1
  zero.optimizer_step group @flat stats %g scale %s skip %skip divisor 2.0 phase boundary : tensor<2xf32>
  zero.all_gather group @flat in params [0, 10) phase post_step
  zero.return %loss : tensor<f32>
}

// -----

// A gradient freed while its asynchronous reduction still reads it.
zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<2x3xf32> init zeros compute bf16
zero.partition @flat stage 2 world_size 2 alignment 2 numel 10 padded 12 params [@a, @b] offsets [0, 4]
zero.train_step @step(%x: tensor<2x3xbf16>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 4> {
  %b = zero.get_param @b : tensor<2x3xbf16>
  %y = nn.mul %x, %b : tensor<2x3xbf16>, tensor<2x3xbf16>
  %loss = nn.softmax_cross_entropy %y, %lbl : tensor<2x3xbf16>, tensor<2xi64> -> tensor<f32>
  %seed = nn.fill 1.0 : tensor<f32>
  %dy = nn.softmax_cross_entropy_grad %y, %lbl, %seed : tensor<2x3xbf16>, tensor<2xi64>, tensor<f32>
  %db = nn.mul %dy, %x : tensor<2x3xbf16>, tensor<2x3xbf16>
  zero.grad @b, %db : tensor<2x3xbf16>
  // expected-note @+1 {{reduction issued here}}
  %t = zero.reduce_scatter group @flat [4, 10) from %db at [0] : tensor<2x3xbf16> -> !zero.token
  %da = nn.fill 0.0 : tensor<4xbf16>
  zero.grad @a, %da : tensor<4xbf16>
  zero.reduce_scatter group @flat [0, 4) from %da at [0] : tensor<4xbf16>
  zero.free %da : tensor<4xbf16>
  // expected-error @+1 {{'zero.free' op frees a gradient that an asynchronous reduction still reads (free it after the zero.wait of its token)}}
  zero.free %db : tensor<2x3xbf16>
  zero.wait %t
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 2.0 phase boundary : tensor<2xf32>
  %g = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %g phase boundary : tensor<2xf32> -> i1
  zero.optimizer_step group @flat stats %g scale %s skip %skip divisor 2.0 phase boundary : tensor<2xf32>
  zero.all_gather group @flat in params [0, 10) phase post_step
  zero.return %loss : tensor<f32>
}

// -----

// The optimizer reads gradients before their reduction completed.
zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<2x3xf32> init zeros compute bf16
zero.partition @flat stage 2 world_size 2 alignment 2 numel 10 padded 12 params [@a, @b] offsets [0, 4]
zero.train_step @step(%x: tensor<2x3xbf16>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 4> {
  %b = zero.get_param @b : tensor<2x3xbf16>
  %y = nn.mul %x, %b : tensor<2x3xbf16>, tensor<2x3xbf16>
  %loss = nn.softmax_cross_entropy %y, %lbl : tensor<2x3xbf16>, tensor<2xi64> -> tensor<f32>
  %seed = nn.fill 1.0 : tensor<f32>
  %dy = nn.softmax_cross_entropy_grad %y, %lbl, %seed : tensor<2x3xbf16>, tensor<2xi64>, tensor<f32>
  %db = nn.mul %dy, %x : tensor<2x3xbf16>, tensor<2x3xbf16>
  zero.grad @b, %db : tensor<2x3xbf16>
  // expected-note @+1 {{collective issued here}}
  %t = zero.reduce_scatter group @flat [4, 10) from %db at [0] : tensor<2x3xbf16> -> !zero.token
  %da = nn.fill 0.0 : tensor<4xbf16>
  zero.grad @a, %da : tensor<4xbf16>
  zero.reduce_scatter group @flat [0, 4) from %da at [0] : tensor<4xbf16>
  zero.free %da : tensor<4xbf16>
  %s = zero.loss_scale phase boundary : tensor<f32>
  // expected-error @+1 {{'zero.check_overflow' op reads the gradients of elements [0, 10) of partition @flat (@a, @b) while an asynchronous collective on grads is in flight (wait for its token first)}}
  %st = zero.check_overflow groups [@flat] scale %s divisor 2.0 phase boundary : tensor<2xf32>
  %g = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %g phase boundary : tensor<2xf32> -> i1
  zero.optimizer_step group @flat stats %g scale %s skip %skip divisor 2.0 phase boundary : tensor<2xf32>
  zero.wait %t
  zero.free %db : tensor<2x3xbf16>
  zero.all_gather group @flat in params [0, 10) phase post_step
  zero.return %loss : tensor<f32>
}

// -----

// A buffer used after zero.free.
zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<2x3xf32> init zeros compute bf16
zero.partition @flat stage 2 world_size 2 alignment 2 numel 10 padded 12 params [@a, @b] offsets [0, 4]
zero.train_step @step(%x: tensor<2x3xbf16>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 4> {
  %b = zero.get_param @b : tensor<2x3xbf16>
  %y = nn.mul %x, %b : tensor<2x3xbf16>, tensor<2x3xbf16>
  %loss = nn.softmax_cross_entropy %y, %lbl : tensor<2x3xbf16>, tensor<2xi64> -> tensor<f32>
  %seed = nn.fill 1.0 : tensor<f32>
  %dy = nn.softmax_cross_entropy_grad %y, %lbl, %seed : tensor<2x3xbf16>, tensor<2xi64>, tensor<f32>
  %db = nn.mul %dy, %x : tensor<2x3xbf16>, tensor<2x3xbf16>
  zero.grad @b, %db : tensor<2x3xbf16>
  %t = zero.reduce_scatter group @flat [4, 10) from %db at [0] : tensor<2x3xbf16> -> !zero.token
  %da = nn.fill 0.0 : tensor<4xbf16>
  zero.grad @a, %da : tensor<4xbf16>
  zero.reduce_scatter group @flat [0, 4) from %da at [0] : tensor<4xbf16>
  zero.free %da : tensor<4xbf16>
  zero.wait %t
  // expected-note @+1 {{freed here}}
  zero.free %db : tensor<2x3xbf16>
  // expected-error @+1 {{'nn.mul' op uses a buffer after zero.free}}
  %late = nn.mul %db, %db : tensor<2x3xbf16>, tensor<2x3xbf16>
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 2.0 phase boundary : tensor<2xf32>
  %g = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %g phase boundary : tensor<2xf32> -> i1
  zero.optimizer_step group @flat stats %g scale %s skip %skip divisor 2.0 phase boundary : tensor<2xf32>
  zero.all_gather group @flat in params [0, 10) phase post_step
  zero.return %loss : tensor<f32>
}

// -----

// A slice freed twice.
zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<2x3xf32> init zeros compute bf16
zero.partition @flat stage 2 world_size 2 alignment 2 numel 10 padded 12 params [@a, @b] offsets [0, 4]
zero.train_step @step(%x: tensor<2x3xbf16>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 4> {
  %b = zero.get_param @b : tensor<2x3xbf16>
  %y = nn.mul %x, %b : tensor<2x3xbf16>, tensor<2x3xbf16>
  %loss = nn.softmax_cross_entropy %y, %lbl : tensor<2x3xbf16>, tensor<2xi64> -> tensor<f32>
  %seed = nn.fill 1.0 : tensor<f32>
  %dy = nn.softmax_cross_entropy_grad %y, %lbl, %seed : tensor<2x3xbf16>, tensor<2xi64>, tensor<f32>
  %db = nn.mul %dy, %x : tensor<2x3xbf16>, tensor<2x3xbf16>
  zero.grad @b, %db : tensor<2x3xbf16>
  %t = zero.reduce_scatter group @flat [4, 10) from %db at [0] : tensor<2x3xbf16> -> !zero.token
  %da = nn.fill 0.0 : tensor<4xbf16>
  zero.grad @a, %da : tensor<4xbf16>
  zero.reduce_scatter group @flat [0, 4) from %da at [0] : tensor<4xbf16>
  zero.free %da : tensor<4xbf16>
  zero.wait %t
  // expected-note @+1 {{first freed here}}
  zero.free %db[0, 4] : tensor<2x3xbf16>
  // expected-error @+1 {{'zero.free' op frees elements [2, 4) a second time}}
  zero.free %db[2, 4] : tensor<2x3xbf16>
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 2.0 phase boundary : tensor<2xf32>
  %g = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %g phase boundary : tensor<2xf32> -> i1
  zero.optimizer_step group @flat stats %g scale %s skip %skip divisor 2.0 phase boundary : tensor<2xf32>
  zero.all_gather group @flat in params [0, 10) phase post_step
  zero.return %loss : tensor<f32>
}

// -----

// A slice overlapping two earlier slices: the diagnostic names the earlier
// free (in program order), not the nearer one.
zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<2x3xf32> init zeros compute bf16
zero.partition @flat stage 2 world_size 2 alignment 2 numel 10 padded 12 params [@a, @b] offsets [0, 4]
zero.train_step @step(%x: tensor<2x3xbf16>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 4> {
  %b = zero.get_param @b : tensor<2x3xbf16>
  %y = nn.mul %x, %b : tensor<2x3xbf16>, tensor<2x3xbf16>
  %loss = nn.softmax_cross_entropy %y, %lbl : tensor<2x3xbf16>, tensor<2xi64> -> tensor<f32>
  %seed = nn.fill 1.0 : tensor<f32>
  %dy = nn.softmax_cross_entropy_grad %y, %lbl, %seed : tensor<2x3xbf16>, tensor<2xi64>, tensor<f32>
  %db = nn.mul %dy, %x : tensor<2x3xbf16>, tensor<2x3xbf16>
  zero.grad @b, %db : tensor<2x3xbf16>
  %t = zero.reduce_scatter group @flat [4, 10) from %db at [0] : tensor<2x3xbf16> -> !zero.token
  %da = nn.fill 0.0 : tensor<4xbf16>
  zero.grad @a, %da : tensor<4xbf16>
  zero.reduce_scatter group @flat [0, 4) from %da at [0] : tensor<4xbf16>
  zero.free %da : tensor<4xbf16>
  zero.wait %t
  // expected-note @+1 {{first freed here}}
  zero.free %db[4, 2] : tensor<2x3xbf16>
  zero.free %db[0, 2] : tensor<2x3xbf16>
  // expected-error @+1 {{'zero.free' op frees elements [4, 5) a second time}}
  zero.free %db[1, 4] : tensor<2x3xbf16>
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 2.0 phase boundary : tensor<2xf32>
  %g = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %g phase boundary : tensor<2xf32> -> i1
  zero.optimizer_step group @flat stats %g scale %s skip %skip divisor 2.0 phase boundary : tensor<2xf32>
  zero.all_gather group @flat in params [0, 10) phase post_step
  zero.return %loss : tensor<f32>
}

// -----

// A gradient reduced twice.
zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<2x3xf32> init zeros compute bf16
zero.partition @flat stage 2 world_size 2 alignment 2 numel 10 padded 12 params [@a, @b] offsets [0, 4]
zero.train_step @step(%x: tensor<2x3xbf16>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 4> {
  %b = zero.get_param @b : tensor<2x3xbf16>
  %y = nn.mul %x, %b : tensor<2x3xbf16>, tensor<2x3xbf16>
  %loss = nn.softmax_cross_entropy %y, %lbl : tensor<2x3xbf16>, tensor<2xi64> -> tensor<f32>
  %seed = nn.fill 1.0 : tensor<f32>
  %dy = nn.softmax_cross_entropy_grad %y, %lbl, %seed : tensor<2x3xbf16>, tensor<2xi64>, tensor<f32>
  %db = nn.mul %dy, %x : tensor<2x3xbf16>, tensor<2x3xbf16>
  zero.grad @b, %db : tensor<2x3xbf16>
  %t = zero.reduce_scatter group @flat [4, 10) from %db at [0] : tensor<2x3xbf16> -> !zero.token
  %da = nn.fill 0.0 : tensor<4xbf16>
  zero.grad @a, %da : tensor<4xbf16>
  zero.reduce_scatter group @flat [0, 4) from %da at [0] : tensor<4xbf16>
  // expected-error @+1 {{'zero.reduce_scatter' op reduces the gradients of elements [0, 4) of partition @flat (@a) a second time in this step}}
  zero.reduce_scatter group @flat [0, 4) from %da at [0] : tensor<4xbf16>
  zero.free %da : tensor<4xbf16>
  zero.wait %t
  zero.free %db : tensor<2x3xbf16>
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 2.0 phase boundary : tensor<2xf32>
  %g = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %g phase boundary : tensor<2xf32> -> i1
  zero.optimizer_step group @flat stats %g scale %s skip %skip divisor 2.0 phase boundary : tensor<2xf32>
  zero.all_gather group @flat in params [0, 10) phase post_step
  zero.return %loss : tensor<f32>
}

// -----

// A gradient never reduced.
zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<2x3xf32> init zeros compute bf16
// expected-error @+1 {{'zero.partition' op elements [0, 4) of partition @flat (@a) are never reduced in this step}}
zero.partition @flat stage 2 world_size 2 alignment 2 numel 10 padded 12 params [@a, @b] offsets [0, 4]
zero.train_step @step(%x: tensor<2x3xbf16>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 4> {
  %b = zero.get_param @b : tensor<2x3xbf16>
  %y = nn.mul %x, %b : tensor<2x3xbf16>, tensor<2x3xbf16>
  %loss = nn.softmax_cross_entropy %y, %lbl : tensor<2x3xbf16>, tensor<2xi64> -> tensor<f32>
  %seed = nn.fill 1.0 : tensor<f32>
  %dy = nn.softmax_cross_entropy_grad %y, %lbl, %seed : tensor<2x3xbf16>, tensor<2xi64>, tensor<f32>
  %db = nn.mul %dy, %x : tensor<2x3xbf16>, tensor<2x3xbf16>
  zero.grad @b, %db : tensor<2x3xbf16>
  %t = zero.reduce_scatter group @flat [4, 10) from %db at [0] : tensor<2x3xbf16> -> !zero.token
  %da = nn.fill 0.0 : tensor<4xbf16>
  zero.grad @a, %da : tensor<4xbf16>
  zero.free %da : tensor<4xbf16>
  zero.wait %t
  zero.free %db : tensor<2x3xbf16>
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 2.0 phase boundary : tensor<2xf32>
  %g = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %g phase boundary : tensor<2xf32> -> i1
  zero.optimizer_step group @flat stats %g scale %s skip %skip divisor 2.0 phase boundary : tensor<2xf32>
  zero.all_gather group @flat in params [0, 10) phase post_step
  zero.return %loss : tensor<f32>
}

// -----

// A gradient reduced into the layout range of another parameter.
zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<2x3xf32> init zeros compute bf16
zero.partition @flat stage 2 world_size 2 alignment 2 numel 10 padded 12 params [@a, @b] offsets [0, 4]
zero.train_step @step(%x: tensor<2x3xbf16>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 4> {
  %b = zero.get_param @b : tensor<2x3xbf16>
  %y = nn.mul %x, %b : tensor<2x3xbf16>, tensor<2x3xbf16>
  %loss = nn.softmax_cross_entropy %y, %lbl : tensor<2x3xbf16>, tensor<2xi64> -> tensor<f32>
  %seed = nn.fill 1.0 : tensor<f32>
  %dy = nn.softmax_cross_entropy_grad %y, %lbl, %seed : tensor<2x3xbf16>, tensor<2xi64>, tensor<f32>
  %db = nn.mul %dy, %x : tensor<2x3xbf16>, tensor<2x3xbf16>
  zero.grad @b, %db : tensor<2x3xbf16>
  %t = zero.reduce_scatter group @flat [4, 10) from %db at [0] : tensor<2x3xbf16> -> !zero.token
  %da = nn.fill 0.0 : tensor<4xbf16>
  zero.grad @a, %da : tensor<4xbf16>
  // expected-error @+1 {{'zero.reduce_scatter' op reduces the gradient of @a (elements [0, 4)) at layout position 6, but they belong at 0}}
  zero.reduce_scatter group @flat [6, 10) from %da at [0] : tensor<4xbf16>
  zero.free %da : tensor<4xbf16>
  zero.wait %t
  zero.free %db : tensor<2x3xbf16>
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 2.0 phase boundary : tensor<2xf32>
  %g = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %g phase boundary : tensor<2xf32> -> i1
  zero.optimizer_step group @flat stats %g scale %s skip %skip divisor 2.0 phase boundary : tensor<2xf32>
  zero.all_gather group @flat in params [0, 10) phase post_step
  zero.return %loss : tensor<f32>
}

// -----

// A shard never updated.
zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<2x3xf32> init zeros compute bf16
// expected-error @+1 {{'zero.partition' op is never updated: no zero.optimizer_step for partition @flat}}
zero.partition @flat stage 2 world_size 2 alignment 2 numel 10 padded 12 params [@a, @b] offsets [0, 4]
zero.train_step @step(%x: tensor<2x3xbf16>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 4> {
  %b = zero.get_param @b : tensor<2x3xbf16>
  %y = nn.mul %x, %b : tensor<2x3xbf16>, tensor<2x3xbf16>
  %loss = nn.softmax_cross_entropy %y, %lbl : tensor<2x3xbf16>, tensor<2xi64> -> tensor<f32>
  %seed = nn.fill 1.0 : tensor<f32>
  %dy = nn.softmax_cross_entropy_grad %y, %lbl, %seed : tensor<2x3xbf16>, tensor<2xi64>, tensor<f32>
  %db = nn.mul %dy, %x : tensor<2x3xbf16>, tensor<2x3xbf16>
  zero.grad @b, %db : tensor<2x3xbf16>
  %t = zero.reduce_scatter group @flat [4, 10) from %db at [0] : tensor<2x3xbf16> -> !zero.token
  %da = nn.fill 0.0 : tensor<4xbf16>
  zero.grad @a, %da : tensor<4xbf16>
  zero.reduce_scatter group @flat [0, 4) from %da at [0] : tensor<4xbf16>
  zero.free %da : tensor<4xbf16>
  zero.wait %t
  zero.free %db : tensor<2x3xbf16>
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 2.0 phase boundary : tensor<2xf32>
  %g = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %g phase boundary : tensor<2xf32> -> i1
  zero.all_gather group @flat in params [0, 10) phase post_step
  zero.return %loss : tensor<f32>
}

// -----

// A shard updated twice.
zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<2x3xf32> init zeros compute bf16
zero.partition @flat stage 2 world_size 2 alignment 2 numel 10 padded 12 params [@a, @b] offsets [0, 4]
zero.train_step @step(%x: tensor<2x3xbf16>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 4> {
  %b = zero.get_param @b : tensor<2x3xbf16>
  %y = nn.mul %x, %b : tensor<2x3xbf16>, tensor<2x3xbf16>
  %loss = nn.softmax_cross_entropy %y, %lbl : tensor<2x3xbf16>, tensor<2xi64> -> tensor<f32>
  %seed = nn.fill 1.0 : tensor<f32>
  %dy = nn.softmax_cross_entropy_grad %y, %lbl, %seed : tensor<2x3xbf16>, tensor<2xi64>, tensor<f32>
  %db = nn.mul %dy, %x : tensor<2x3xbf16>, tensor<2x3xbf16>
  zero.grad @b, %db : tensor<2x3xbf16>
  %t = zero.reduce_scatter group @flat [4, 10) from %db at [0] : tensor<2x3xbf16> -> !zero.token
  %da = nn.fill 0.0 : tensor<4xbf16>
  zero.grad @a, %da : tensor<4xbf16>
  zero.reduce_scatter group @flat [0, 4) from %da at [0] : tensor<4xbf16>
  zero.free %da : tensor<4xbf16>
  zero.wait %t
  zero.free %db : tensor<2x3xbf16>
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 2.0 phase boundary : tensor<2xf32>
  %g = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %g phase boundary : tensor<2xf32> -> i1
  // expected-note @+1 {{first updated here}}
  zero.optimizer_step group @flat stats %g scale %s skip %skip divisor 2.0 phase boundary : tensor<2xf32>
  // expected-error @+1 {{'zero.optimizer_step' op updates partition @flat a second time in this step}}
  zero.optimizer_step group @flat stats %g scale %s skip %skip divisor 2.0 phase boundary : tensor<2xf32>
  zero.all_gather group @flat in params [0, 10) phase post_step
  zero.return %loss : tensor<f32>
}

// -----

// Parameters gathered before they are updated.
zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<2x3xf32> init zeros compute bf16
zero.partition @flat stage 2 world_size 2 alignment 2 numel 10 padded 12 params [@a, @b] offsets [0, 4]
zero.train_step @step(%x: tensor<2x3xbf16>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 4> {
  %b = zero.get_param @b : tensor<2x3xbf16>
  %y = nn.mul %x, %b : tensor<2x3xbf16>, tensor<2x3xbf16>
  %loss = nn.softmax_cross_entropy %y, %lbl : tensor<2x3xbf16>, tensor<2xi64> -> tensor<f32>
  %seed = nn.fill 1.0 : tensor<f32>
  %dy = nn.softmax_cross_entropy_grad %y, %lbl, %seed : tensor<2x3xbf16>, tensor<2xi64>, tensor<f32>
  %db = nn.mul %dy, %x : tensor<2x3xbf16>, tensor<2x3xbf16>
  zero.grad @b, %db : tensor<2x3xbf16>
  %t = zero.reduce_scatter group @flat [4, 10) from %db at [0] : tensor<2x3xbf16> -> !zero.token
  %da = nn.fill 0.0 : tensor<4xbf16>
  zero.grad @a, %da : tensor<4xbf16>
  zero.reduce_scatter group @flat [0, 4) from %da at [0] : tensor<4xbf16>
  zero.free %da : tensor<4xbf16>
  zero.wait %t
  zero.free %db : tensor<2x3xbf16>
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 2.0 phase boundary : tensor<2xf32>
  %g = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %g phase boundary : tensor<2xf32> -> i1
  // expected-error @+1 {{'zero.all_gather' op gathers parameters of @flat before their zero.optimizer_step update}}
  zero.all_gather group @flat in params [0, 10) phase post_step
  zero.optimizer_step group @flat stats %g scale %s skip %skip divisor 2.0 phase boundary : tensor<2xf32>
  zero.return %loss : tensor<f32>
}
