// RUN: zero-opt %s -split-input-file --zero-verify-schedule -verify-diagnostics

// zero-verify-schedule with a frozen partition: only its parameters exist,
// so no op may reduce, check, update or gather (after the step) what it
// lacks.

// A frozen partition that nothing reduces, updates or gathers is accepted.
zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<2x3xf32> init zeros compute bf16 frozen
zero.partition @flat stage 2 world_size 2 alignment 2 numel 4 padded 4 params [@a] offsets [0]
zero.partition @frozen stage 2 world_size 2 alignment 2 numel 6 padded 8 params [@b] offsets [0] frozen
zero.train_step @step(%x: tensor<2x3xbf16>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 4> {
  %a = zero.get_param @a : tensor<4xbf16>
  %b = zero.get_param @b : tensor<2x3xbf16>
  %y = nn.mul %x, %b : tensor<2x3xbf16>, tensor<2x3xbf16>
  %loss = nn.softmax_cross_entropy %y, %lbl : tensor<2x3xbf16>, tensor<2xi64> -> tensor<f32>
  %da = nn.fill 0.0 : tensor<4xbf16>
  zero.grad @a, %da : tensor<4xbf16>
  zero.reduce_scatter group @flat [0, 4) from %da at [0] : tensor<4xbf16>
  zero.free %da : tensor<4xbf16>
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 2.0 phase boundary : tensor<2xf32>
  %g = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %g phase boundary : tensor<2xf32> -> i1
  zero.optimizer_step group @flat stats %g scale %s skip %skip divisor 2.0 phase boundary : tensor<2xf32>
  zero.all_gather group @flat in params [0, 4) phase post_step
  zero.return %loss : tensor<f32>
}

// -----

// No optimizer state to update in a frozen partition.
zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<2x3xf32> init zeros compute bf16 frozen
zero.partition @flat stage 2 world_size 2 alignment 2 numel 4 padded 4 params [@a] offsets [0]
zero.partition @frozen stage 2 world_size 2 alignment 2 numel 6 padded 8 params [@b] offsets [0] frozen
zero.train_step @step(%x: tensor<2x3xbf16>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 4> {
  %a = zero.get_param @a : tensor<4xbf16>
  %b = zero.get_param @b : tensor<2x3xbf16>
  %y = nn.mul %x, %b : tensor<2x3xbf16>, tensor<2x3xbf16>
  %loss = nn.softmax_cross_entropy %y, %lbl : tensor<2x3xbf16>, tensor<2xi64> -> tensor<f32>
  %da = nn.fill 0.0 : tensor<4xbf16>
  zero.grad @a, %da : tensor<4xbf16>
  zero.reduce_scatter group @flat [0, 4) from %da at [0] : tensor<4xbf16>
  zero.free %da : tensor<4xbf16>
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 2.0 phase boundary : tensor<2xf32>
  %g = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %g phase boundary : tensor<2xf32> -> i1
  zero.optimizer_step group @flat stats %g scale %s skip %skip divisor 2.0 phase boundary : tensor<2xf32>
  // expected-error @+1 {{'zero.optimizer_step' op updates frozen partition @frozen, which has params only (no gradients, optimizer states or master)}}
  zero.optimizer_step group @frozen stats %g scale %s skip %skip divisor 2.0 phase boundary : tensor<2xf32>
  zero.all_gather group @flat in params [0, 4) phase post_step
  zero.return %loss : tensor<f32>
}

// -----

// No gradients to check in a frozen partition.
zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<2x3xf32> init zeros compute bf16 frozen
zero.partition @flat stage 2 world_size 2 alignment 2 numel 4 padded 4 params [@a] offsets [0]
zero.partition @frozen stage 2 world_size 2 alignment 2 numel 6 padded 8 params [@b] offsets [0] frozen
zero.train_step @step(%x: tensor<2x3xbf16>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 4> {
  %a = zero.get_param @a : tensor<4xbf16>
  %b = zero.get_param @b : tensor<2x3xbf16>
  %y = nn.mul %x, %b : tensor<2x3xbf16>, tensor<2x3xbf16>
  %loss = nn.softmax_cross_entropy %y, %lbl : tensor<2x3xbf16>, tensor<2xi64> -> tensor<f32>
  %da = nn.fill 0.0 : tensor<4xbf16>
  zero.grad @a, %da : tensor<4xbf16>
  zero.reduce_scatter group @flat [0, 4) from %da at [0] : tensor<4xbf16>
  zero.free %da : tensor<4xbf16>
  %s = zero.loss_scale phase boundary : tensor<f32>
  // expected-error @+1 {{'zero.check_overflow' op reads the gradients of frozen partition @frozen, which has params only (no gradients, optimizer states or master)}}
  %st = zero.check_overflow groups [@flat, @frozen] scale %s divisor 2.0 phase boundary : tensor<2xf32>
  %g = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %g phase boundary : tensor<2xf32> -> i1
  zero.optimizer_step group @flat stats %g scale %s skip %skip divisor 2.0 phase boundary : tensor<2xf32>
  zero.all_gather group @flat in params [0, 4) phase post_step
  zero.return %loss : tensor<f32>
}

// -----

// No gradients to reduce in a frozen partition.
zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<2x3xf32> init zeros compute bf16 frozen
zero.partition @flat stage 2 world_size 2 alignment 2 numel 4 padded 4 params [@a] offsets [0]
zero.partition @frozen stage 2 world_size 2 alignment 2 numel 6 padded 8 params [@b] offsets [0] frozen
zero.train_step @step(%x: tensor<2x3xbf16>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 4> {
  %a = zero.get_param @a : tensor<4xbf16>
  %b = zero.get_param @b : tensor<2x3xbf16>
  %y = nn.mul %x, %b : tensor<2x3xbf16>, tensor<2x3xbf16>
  %loss = nn.softmax_cross_entropy %y, %lbl : tensor<2x3xbf16>, tensor<2xi64> -> tensor<f32>
  %da = nn.fill 0.0 : tensor<4xbf16>
  zero.grad @a, %da : tensor<4xbf16>
  zero.reduce_scatter group @flat [0, 4) from %da at [0] : tensor<4xbf16>
  zero.free %da : tensor<4xbf16>
  %db = nn.fill 0.0 : tensor<2x3xbf16>
  // expected-error @+1 {{'zero.reduce_scatter' op reduces the gradients of frozen partition @frozen, which has params only (no gradients, optimizer states or master)}}
  zero.reduce_scatter group @frozen [0, 6) from %db at [0] : tensor<2x3xbf16>
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 2.0 phase boundary : tensor<2xf32>
  %g = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %g phase boundary : tensor<2xf32> -> i1
  zero.optimizer_step group @flat stats %g scale %s skip %skip divisor 2.0 phase boundary : tensor<2xf32>
  zero.all_gather group @flat in params [0, 4) phase post_step
  zero.return %loss : tensor<f32>
}

// -----

// A frozen partition is never updated: nothing to gather after the step.
zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<2x3xf32> init zeros compute bf16 frozen
zero.partition @flat stage 2 world_size 2 alignment 2 numel 4 padded 4 params [@a] offsets [0]
zero.partition @frozen stage 2 world_size 2 alignment 2 numel 6 padded 8 params [@b] offsets [0] frozen
zero.train_step @step(%x: tensor<2x3xbf16>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 4> {
  %a = zero.get_param @a : tensor<4xbf16>
  %b = zero.get_param @b : tensor<2x3xbf16>
  %y = nn.mul %x, %b : tensor<2x3xbf16>, tensor<2x3xbf16>
  %loss = nn.softmax_cross_entropy %y, %lbl : tensor<2x3xbf16>, tensor<2xi64> -> tensor<f32>
  %da = nn.fill 0.0 : tensor<4xbf16>
  zero.grad @a, %da : tensor<4xbf16>
  zero.reduce_scatter group @flat [0, 4) from %da at [0] : tensor<4xbf16>
  zero.free %da : tensor<4xbf16>
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 2.0 phase boundary : tensor<2xf32>
  %g = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %g phase boundary : tensor<2xf32> -> i1
  zero.optimizer_step group @flat stats %g scale %s skip %skip divisor 2.0 phase boundary : tensor<2xf32>
  zero.all_gather group @flat in params [0, 4) phase post_step
  // expected-error @+1 {{'zero.all_gather' op gathers the updated parameters of frozen partition @frozen, which has params only (no gradients, optimizer states or master)}}
  zero.all_gather group @frozen in params [0, 6) phase post_step
  zero.return %loss : tensor<f32>
}

// -----

// No gradients of a frozen partition to copy to the host.
zero.param @w : tensor<8xf32> init zeros compute bf16
zero.param @f : tensor<8xf32> init zeros compute bf16 frozen
zero.partition @flat stage 1 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.partition @frozen stage 1 world_size 2 alignment 2 numel 8 padded 8 params [@f] offsets [0] frozen
zero.train_step @step(%x: tensor<2x8xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 1, world_size = 2, global_batch = 4>
    offload #zero.offload<optimizer = cpu> {
  %w = zero.get_param @w : tensor<8xbf16>
  %y = nn.mul %x, %w : tensor<2x8xbf16>, tensor<8xbf16>
  %loss = nn.fill 0.0 : tensor<f32>
  %g = nn.fill 1.0 : tensor<8xbf16>
  zero.grad @w, %g : tensor<8xbf16>
  zero.reduce_scatter group @flat in grads [0, 8) phase boundary
  %d = zero.transfer group @flat grads to host_grads phase boundary -> !zero.token
  // expected-error @+1 {{'zero.transfer' op copies the grads of frozen partition @frozen, which has params only (no gradients, optimizer states or master)}}
  %e = zero.transfer group @frozen grads to host_grads phase boundary -> !zero.token
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 2.0 phase boundary : tensor<2xf32>
  %gs = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %gs phase boundary : tensor<2xf32> -> i1
  zero.wait %d phase boundary
  zero.wait %e phase boundary
  zero.optimizer_step group @flat stats %gs scale %s skip %skip divisor 2.0 host phase boundary : tensor<2xf32>
  %u = zero.transfer group @flat host_params to params phase boundary -> !zero.token
  zero.wait %u phase boundary
  zero.all_gather group @flat in params [0, 8) phase post_step
  zero.return %loss : tensor<f32>
}
