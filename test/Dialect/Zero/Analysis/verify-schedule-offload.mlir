// RUN: zero-opt %s -split-input-file --zero-verify-schedule -verify-diagnostics

// zero-verify-schedule's rules for an offloaded optimizer: the host Adam
// reads the host gradients only after their copy completed, the parameters
// are copied back after it and gathered only after that copy completed, and
// each partition is copied each way exactly once. One accepted schedule,
// then one broken rule per case.

// A stage-1 bf16 schedule with optimizer offload is accepted.
zero.param @w : tensor<8xf32> init zeros compute bf16
zero.partition @flat stage 1 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
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
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 2.0 phase boundary : tensor<2xf32>
  %gs = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %gs phase boundary : tensor<2xf32> -> i1
  zero.wait %d phase boundary
  zero.optimizer_step group @flat stats %gs scale %s skip %skip divisor 2.0 host phase boundary : tensor<2xf32>
  %u = zero.transfer group @flat host_params to params phase boundary -> !zero.token
  zero.wait %u phase boundary
  zero.all_gather group @flat in params [0, 8) phase post_step
  zero.return %loss : tensor<f32>
}

// -----

// The host Adam reads the host gradients while their copy is in flight.
zero.param @w : tensor<8xf32> init zeros compute bf16
zero.partition @flat stage 1 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
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
  // expected-note @+1 {{collective issued here}}
  %d = zero.transfer group @flat grads to host_grads phase boundary -> !zero.token
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 2.0 phase boundary : tensor<2xf32>
  %gs = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %gs phase boundary : tensor<2xf32> -> i1
  // expected-error @+1 {{'zero.optimizer_step' op reads the gradients of}}
  zero.optimizer_step group @flat stats %gs scale %s skip %skip divisor 2.0 host phase boundary : tensor<2xf32>
  zero.wait %d phase boundary
  %u = zero.transfer group @flat host_params to params phase boundary -> !zero.token
  zero.wait %u phase boundary
  zero.all_gather group @flat in params [0, 8) phase post_step
  zero.return %loss : tensor<f32>
}

// -----

// The parameters are gathered while their copy from the host is in flight.
zero.param @w : tensor<8xf32> init zeros compute bf16
zero.partition @flat stage 1 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
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
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 2.0 phase boundary : tensor<2xf32>
  %gs = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %gs phase boundary : tensor<2xf32> -> i1
  zero.wait %d phase boundary
  zero.optimizer_step group @flat stats %gs scale %s skip %skip divisor 2.0 host phase boundary : tensor<2xf32>
  // expected-note @+1 {{collective issued here}}
  %u = zero.transfer group @flat host_params to params phase boundary -> !zero.token
  // expected-error @+1 {{'zero.all_gather' op works in place on}}
  zero.all_gather group @flat in params [0, 8) phase post_step
  zero.wait %u phase boundary
  zero.return %loss : tensor<f32>
}

// -----

// The parameters are copied to the device before the host Adam updated them.
zero.param @w : tensor<8xf32> init zeros compute bf16
zero.partition @flat stage 1 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
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
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 2.0 phase boundary : tensor<2xf32>
  %gs = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %gs phase boundary : tensor<2xf32> -> i1
  // expected-error @+1 {{'zero.transfer' op copies the parameters of @flat to the device before their host zero.optimizer_step}}
  %u = zero.transfer group @flat host_params to params phase boundary -> !zero.token
  zero.wait %u phase boundary
  zero.wait %d phase boundary
  zero.optimizer_step group @flat stats %gs scale %s skip %skip divisor 2.0 host phase boundary : tensor<2xf32>
  zero.all_gather group @flat in params [0, 8) phase post_step
  zero.return %loss : tensor<f32>
}

// -----

// The gradients never reach the host.
zero.param @w : tensor<8xf32> init zeros compute bf16
// expected-error @+1 {{'zero.partition' op has an offloaded optimizer: its gradients must be copied to the host and its parameters back in every step (never with parameter shards in host memory), found 0 and 1 copies}}
zero.partition @flat stage 1 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
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
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 2.0 phase boundary : tensor<2xf32>
  %gs = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %gs phase boundary : tensor<2xf32> -> i1
  zero.optimizer_step group @flat stats %gs scale %s skip %skip divisor 2.0 host phase boundary : tensor<2xf32>
  %u = zero.transfer group @flat host_params to params phase boundary -> !zero.token
  zero.wait %u phase boundary
  zero.all_gather group @flat in params [0, 8) phase post_step
  zero.return %loss : tensor<f32>
}
