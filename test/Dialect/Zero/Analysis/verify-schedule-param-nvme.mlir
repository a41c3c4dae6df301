// RUN: zero-opt %s -split-input-file --zero-verify-schedule --verify-diagnostics

// Parameter offload to NVMe (stage 3): every transfer of a shard goes
// through one of the step's parameter swap buffers (all transfers agree on
// them: the plan reserves one region), and a buffer serves one transfer at
// a time, from its issue to the zero.wait of its token.

// A valid schedule with one buffer: each read is waited for before the next
// one is issued, and the second write waits for the first.
zero.param @w1 : tensor<4x4xf32> init zeros compute bf16
zero.param @w2 : tensor<4x4xf32> init zeros compute bf16
zero.partition @g1 stage 3 world_size 2 alignment 2 numel 16 padded 16 params [@w1] offsets [0]
zero.partition @g2 stage 3 world_size 2 alignment 2 numel 16 padded 16 params [@w2] offsets [0]
zero.train_step @valid(%arg0: tensor<2x4xbf16>) optimizer #zero.optimizer<kind = adam, lr = 1.000000e-03> precision #zero.precision<kind = bf16> schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4> offload #zero.offload<param = nvme, param_nvme_path = "/nvme", param_buffer_count = 1> {
  %staged, %token = zero.transfer group @g1 params to staging swap <buffer = 0, buffers = 1, buffer_bytes = 4096> : tensor<8xbf16> -> !zero.token
  zero.wait %token
  %result = zero.all_gather group @g1 from %staged : tensor<8xbf16> : tensor<16xbf16>
  zero.free %staged : tensor<8xbf16>
  %0 = zero.get_param @w1 from %result : tensor<16xbf16> -> tensor<4x4xbf16>
  %1 = nn.matmul %arg0, %0 : tensor<2x4xbf16>, tensor<4x4xbf16> -> tensor<2x4xbf16>
  zero.free %result : tensor<16xbf16>
  %staged_0, %token_1 = zero.transfer group @g2 params to staging swap <buffer = 0, buffers = 1, buffer_bytes = 4096> : tensor<8xbf16> -> !zero.token
  zero.wait %token_1
  %result_2 = zero.all_gather group @g2 from %staged_0 : tensor<8xbf16> : tensor<16xbf16>
  zero.free %staged_0 : tensor<8xbf16>
  %2 = zero.get_param @w2 from %result_2 : tensor<16xbf16> -> tensor<4x4xbf16>
  %3 = nn.matmul %1, %2 : tensor<2x4xbf16>, tensor<4x4xbf16> -> tensor<2x4xbf16>
  zero.free %result_2 : tensor<16xbf16>
  %4 = nn.fill 0.000000e+00 : tensor<f32>
  %5 = nn.fill 1.000000e+00 : tensor<4x4xbf16>
  zero.grad @w1, %5 : tensor<4x4xbf16>
  zero.reduce_scatter group @g1 [0, 16) from %5 at [0] : tensor<4x4xbf16>
  %6 = nn.fill 1.000000e+00 : tensor<4x4xbf16>
  zero.grad @w2, %6 : tensor<4x4xbf16>
  zero.reduce_scatter group @g2 [0, 16) from %6 at [0] : tensor<4x4xbf16>
  zero.free %5 : tensor<4x4xbf16>
  zero.free %6 : tensor<4x4xbf16>
  %7 = zero.loss_scale phase  boundary : tensor<f32>
  %8 = zero.check_overflow groups [@g1, @g2] scale %7 divisor 2.000000e+00 phase  boundary : tensor<2xf32>
  %result_3 = zero.all_reduce overflow_norm %8 group @g1 phase  boundary : tensor<2xf32> -> tensor<2xf32>
  %9 = zero.update_loss_scale %result_3 phase  boundary : tensor<2xf32> -> i1
  %10 = zero.optimizer_step group @g1 stats %result_3 scale %7 skip %9 divisor 2.000000e+00 phase  boundary : tensor<2xf32> -> tensor<8xbf16>
  %token_4 = zero.transfer group @g1 %10 to params swap <buffer = 0, buffers = 1, buffer_bytes = 4096> phase boundary : tensor<8xbf16> -> !zero.token
  %11 = zero.optimizer_step group @g2 stats %result_3 scale %7 skip %9 divisor 2.000000e+00 phase  boundary : tensor<2xf32> -> tensor<8xbf16>
  zero.wait %token_4 phase  boundary
  %token_5 = zero.transfer group @g2 %11 to params swap <buffer = 0, buffers = 1, buffer_bytes = 4096> phase boundary : tensor<8xbf16> -> !zero.token
  zero.wait %token_5 phase  boundary
  zero.free %10 phase boundary : tensor<8xbf16>
  zero.free %11 phase boundary : tensor<8xbf16>
  zero.return %4 : tensor<f32>
}

// -----

// Two reads in flight through the same buffer: the second would overwrite
// the first before its copy to the device.
zero.param @w1 : tensor<4x4xf32> init zeros compute bf16
zero.param @w2 : tensor<4x4xf32> init zeros compute bf16
zero.partition @g1 stage 3 world_size 2 alignment 2 numel 16 padded 16 params [@w1] offsets [0]
zero.partition @g2 stage 3 world_size 2 alignment 2 numel 16 padded 16 params [@w2] offsets [0]
zero.train_step @reads(%arg0: tensor<2x4xbf16>) optimizer #zero.optimizer<kind = adam, lr = 1.000000e-03> precision #zero.precision<kind = bf16> schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4> offload #zero.offload<param = nvme, param_nvme_path = "/nvme", param_buffer_count = 1> {
  // expected-note @+1 {{the earlier transfer is issued here}}
  %staged, %token = zero.transfer group @g1 params to staging swap <buffer = 0, buffers = 1, buffer_bytes = 4096> : tensor<8xbf16> -> !zero.token
  // expected-error @+1 {{'zero.transfer' op uses parameter swap buffer 0 while an earlier transfer still uses it (issue it after the zero.wait of that transfer's token)}}
  %staged_0, %token_1 = zero.transfer group @g2 params to staging swap <buffer = 0, buffers = 1, buffer_bytes = 4096> : tensor<8xbf16> -> !zero.token
  zero.wait %token
  %result = zero.all_gather group @g1 from %staged : tensor<8xbf16> : tensor<16xbf16>
  zero.free %staged : tensor<8xbf16>
  %0 = zero.get_param @w1 from %result : tensor<16xbf16> -> tensor<4x4xbf16>
  %1 = nn.matmul %arg0, %0 : tensor<2x4xbf16>, tensor<4x4xbf16> -> tensor<2x4xbf16>
  zero.free %result : tensor<16xbf16>
  zero.wait %token_1
  %result_2 = zero.all_gather group @g2 from %staged_0 : tensor<8xbf16> : tensor<16xbf16>
  zero.free %staged_0 : tensor<8xbf16>
  %2 = zero.get_param @w2 from %result_2 : tensor<16xbf16> -> tensor<4x4xbf16>
  %3 = nn.matmul %1, %2 : tensor<2x4xbf16>, tensor<4x4xbf16> -> tensor<2x4xbf16>
  zero.free %result_2 : tensor<16xbf16>
  %4 = nn.fill 0.000000e+00 : tensor<f32>
  %5 = nn.fill 1.000000e+00 : tensor<4x4xbf16>
  zero.grad @w1, %5 : tensor<4x4xbf16>
  zero.reduce_scatter group @g1 [0, 16) from %5 at [0] : tensor<4x4xbf16>
  %6 = nn.fill 1.000000e+00 : tensor<4x4xbf16>
  zero.grad @w2, %6 : tensor<4x4xbf16>
  zero.reduce_scatter group @g2 [0, 16) from %6 at [0] : tensor<4x4xbf16>
  zero.free %5 : tensor<4x4xbf16>
  zero.free %6 : tensor<4x4xbf16>
  %7 = zero.loss_scale phase  boundary : tensor<f32>
  %8 = zero.check_overflow groups [@g1, @g2] scale %7 divisor 2.000000e+00 phase  boundary : tensor<2xf32>
  %result_3 = zero.all_reduce overflow_norm %8 group @g1 phase  boundary : tensor<2xf32> -> tensor<2xf32>
  %9 = zero.update_loss_scale %result_3 phase  boundary : tensor<2xf32> -> i1
  %10 = zero.optimizer_step group @g1 stats %result_3 scale %7 skip %9 divisor 2.000000e+00 phase  boundary : tensor<2xf32> -> tensor<8xbf16>
  %token_4 = zero.transfer group @g1 %10 to params swap <buffer = 0, buffers = 1, buffer_bytes = 4096> phase boundary : tensor<8xbf16> -> !zero.token
  %11 = zero.optimizer_step group @g2 stats %result_3 scale %7 skip %9 divisor 2.000000e+00 phase  boundary : tensor<2xf32> -> tensor<8xbf16>
  zero.wait %token_4 phase  boundary
  %token_5 = zero.transfer group @g2 %11 to params swap <buffer = 0, buffers = 1, buffer_bytes = 4096> phase boundary : tensor<8xbf16> -> !zero.token
  zero.wait %token_5 phase  boundary
  zero.free %10 phase boundary : tensor<8xbf16>
  zero.free %11 phase boundary : tensor<8xbf16>
  zero.return %4 : tensor<f32>
}

// -----

// Two writes in flight through the same buffer.
zero.param @w1 : tensor<4x4xf32> init zeros compute bf16
zero.param @w2 : tensor<4x4xf32> init zeros compute bf16
zero.partition @g1 stage 3 world_size 2 alignment 2 numel 16 padded 16 params [@w1] offsets [0]
zero.partition @g2 stage 3 world_size 2 alignment 2 numel 16 padded 16 params [@w2] offsets [0]
zero.train_step @writes(%arg0: tensor<2x4xbf16>) optimizer #zero.optimizer<kind = adam, lr = 1.000000e-03> precision #zero.precision<kind = bf16> schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4> offload #zero.offload<param = nvme, param_nvme_path = "/nvme", param_buffer_count = 1> {
  %staged, %token = zero.transfer group @g1 params to staging swap <buffer = 0, buffers = 1, buffer_bytes = 4096> : tensor<8xbf16> -> !zero.token
  zero.wait %token
  %result = zero.all_gather group @g1 from %staged : tensor<8xbf16> : tensor<16xbf16>
  zero.free %staged : tensor<8xbf16>
  %0 = zero.get_param @w1 from %result : tensor<16xbf16> -> tensor<4x4xbf16>
  %1 = nn.matmul %arg0, %0 : tensor<2x4xbf16>, tensor<4x4xbf16> -> tensor<2x4xbf16>
  zero.free %result : tensor<16xbf16>
  %staged_0, %token_1 = zero.transfer group @g2 params to staging swap <buffer = 0, buffers = 1, buffer_bytes = 4096> : tensor<8xbf16> -> !zero.token
  zero.wait %token_1
  %result_2 = zero.all_gather group @g2 from %staged_0 : tensor<8xbf16> : tensor<16xbf16>
  zero.free %staged_0 : tensor<8xbf16>
  %2 = zero.get_param @w2 from %result_2 : tensor<16xbf16> -> tensor<4x4xbf16>
  %3 = nn.matmul %1, %2 : tensor<2x4xbf16>, tensor<4x4xbf16> -> tensor<2x4xbf16>
  zero.free %result_2 : tensor<16xbf16>
  %4 = nn.fill 0.000000e+00 : tensor<f32>
  %5 = nn.fill 1.000000e+00 : tensor<4x4xbf16>
  zero.grad @w1, %5 : tensor<4x4xbf16>
  zero.reduce_scatter group @g1 [0, 16) from %5 at [0] : tensor<4x4xbf16>
  %6 = nn.fill 1.000000e+00 : tensor<4x4xbf16>
  zero.grad @w2, %6 : tensor<4x4xbf16>
  zero.reduce_scatter group @g2 [0, 16) from %6 at [0] : tensor<4x4xbf16>
  zero.free %5 : tensor<4x4xbf16>
  zero.free %6 : tensor<4x4xbf16>
  %7 = zero.loss_scale phase  boundary : tensor<f32>
  %8 = zero.check_overflow groups [@g1, @g2] scale %7 divisor 2.000000e+00 phase  boundary : tensor<2xf32>
  %result_3 = zero.all_reduce overflow_norm %8 group @g1 phase  boundary : tensor<2xf32> -> tensor<2xf32>
  %9 = zero.update_loss_scale %result_3 phase  boundary : tensor<2xf32> -> i1
  %10 = zero.optimizer_step group @g1 stats %result_3 scale %7 skip %9 divisor 2.000000e+00 phase  boundary : tensor<2xf32> -> tensor<8xbf16>
  // expected-note @+1 {{the earlier transfer is issued here}}
  %token_4 = zero.transfer group @g1 %10 to params swap <buffer = 0, buffers = 1, buffer_bytes = 4096> phase boundary : tensor<8xbf16> -> !zero.token
  %11 = zero.optimizer_step group @g2 stats %result_3 scale %7 skip %9 divisor 2.000000e+00 phase  boundary : tensor<2xf32> -> tensor<8xbf16>
  // expected-error @+1 {{'zero.transfer' op uses parameter swap buffer 0 while an earlier transfer still uses it}}
  %token_5 = zero.transfer group @g2 %11 to params swap <buffer = 0, buffers = 1, buffer_bytes = 4096> phase boundary : tensor<8xbf16> -> !zero.token
  zero.wait %token_4 phase  boundary
  zero.wait %token_5 phase  boundary
  zero.free %10 phase boundary : tensor<8xbf16>
  zero.free %11 phase boundary : tensor<8xbf16>
  zero.return %4 : tensor<f32>
}

// -----

// A transfer through a different set of buffers than the step's.
zero.param @w1 : tensor<4x4xf32> init zeros compute bf16
zero.param @w2 : tensor<4x4xf32> init zeros compute bf16
zero.partition @g1 stage 3 world_size 2 alignment 2 numel 16 padded 16 params [@w1] offsets [0]
zero.partition @g2 stage 3 world_size 2 alignment 2 numel 16 padded 16 params [@w2] offsets [0]
zero.train_step @regions(%arg0: tensor<2x4xbf16>) optimizer #zero.optimizer<kind = adam, lr = 1.000000e-03> precision #zero.precision<kind = bf16> schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4> offload #zero.offload<param = nvme, param_nvme_path = "/nvme", param_buffer_count = 1> {
  %staged, %token = zero.transfer group @g1 params to staging swap <buffer = 0, buffers = 1, buffer_bytes = 4096> : tensor<8xbf16> -> !zero.token
  zero.wait %token
  %result = zero.all_gather group @g1 from %staged : tensor<8xbf16> : tensor<16xbf16>
  zero.free %staged : tensor<8xbf16>
  %0 = zero.get_param @w1 from %result : tensor<16xbf16> -> tensor<4x4xbf16>
  %1 = nn.matmul %arg0, %0 : tensor<2x4xbf16>, tensor<4x4xbf16> -> tensor<2x4xbf16>
  zero.free %result : tensor<16xbf16>
  // expected-error @+1 {{'zero.transfer' op swaps through #zero.param_swap<buffer = 1, buffers = 2, buffer_bytes = 4096>, but the step's parameter swap buffers are #zero.param_swap<buffer = 0, buffers = 1, buffer_bytes = 4096>}}
  %staged_0, %token_1 = zero.transfer group @g2 params to staging swap <buffer = 1, buffers = 2, buffer_bytes = 4096> : tensor<8xbf16> -> !zero.token
  zero.wait %token_1
  %result_2 = zero.all_gather group @g2 from %staged_0 : tensor<8xbf16> : tensor<16xbf16>
  zero.free %staged_0 : tensor<8xbf16>
  %2 = zero.get_param @w2 from %result_2 : tensor<16xbf16> -> tensor<4x4xbf16>
  %3 = nn.matmul %1, %2 : tensor<2x4xbf16>, tensor<4x4xbf16> -> tensor<2x4xbf16>
  zero.free %result_2 : tensor<16xbf16>
  %4 = nn.fill 0.000000e+00 : tensor<f32>
  %5 = nn.fill 1.000000e+00 : tensor<4x4xbf16>
  zero.grad @w1, %5 : tensor<4x4xbf16>
  zero.reduce_scatter group @g1 [0, 16) from %5 at [0] : tensor<4x4xbf16>
  %6 = nn.fill 1.000000e+00 : tensor<4x4xbf16>
  zero.grad @w2, %6 : tensor<4x4xbf16>
  zero.reduce_scatter group @g2 [0, 16) from %6 at [0] : tensor<4x4xbf16>
  zero.free %5 : tensor<4x4xbf16>
  zero.free %6 : tensor<4x4xbf16>
  %7 = zero.loss_scale phase  boundary : tensor<f32>
  %8 = zero.check_overflow groups [@g1, @g2] scale %7 divisor 2.000000e+00 phase  boundary : tensor<2xf32>
  %result_3 = zero.all_reduce overflow_norm %8 group @g1 phase  boundary : tensor<2xf32> -> tensor<2xf32>
  %9 = zero.update_loss_scale %result_3 phase  boundary : tensor<2xf32> -> i1
  %10 = zero.optimizer_step group @g1 stats %result_3 scale %7 skip %9 divisor 2.000000e+00 phase  boundary : tensor<2xf32> -> tensor<8xbf16>
  %token_4 = zero.transfer group @g1 %10 to params swap <buffer = 0, buffers = 1, buffer_bytes = 4096> phase boundary : tensor<8xbf16> -> !zero.token
  %11 = zero.optimizer_step group @g2 stats %result_3 scale %7 skip %9 divisor 2.000000e+00 phase  boundary : tensor<2xf32> -> tensor<8xbf16>
  zero.wait %token_4 phase  boundary
  %token_5 = zero.transfer group @g2 %11 to params swap <buffer = 0, buffers = 1, buffer_bytes = 4096> phase boundary : tensor<8xbf16> -> !zero.token
  zero.wait %token_5 phase  boundary
  zero.free %10 phase boundary : tensor<8xbf16>
  zero.free %11 phase boundary : tensor<8xbf16>
  zero.return %4 : tensor<f32>
}

// -----

// A read of a shard while its write is in flight through another buffer:
// the swap file does not order them, so the read could see the old shard.
// The data-race check of transfers and collectives on persistent buffers
// already sees it (the write is in flight on @g1's params).
zero.param @w1 : tensor<4x4xf32> init zeros compute bf16
zero.param @w2 : tensor<4x4xf32> init zeros compute bf16
zero.partition @g1 stage 3 world_size 2 alignment 2 numel 16 padded 16 params [@w1] offsets [0]
zero.partition @g2 stage 3 world_size 2 alignment 2 numel 16 padded 16 params [@w2] offsets [0]
zero.train_step @reread(%arg0: tensor<2x4xbf16>) optimizer #zero.optimizer<kind = adam, lr = 1.000000e-03> precision #zero.precision<kind = bf16> schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4> offload #zero.offload<param = nvme, param_nvme_path = "/nvme", param_buffer_count = 2> {
  %staged, %token = zero.transfer group @g1 params to staging swap <buffer = 0, buffers = 2, buffer_bytes = 4096> : tensor<8xbf16> -> !zero.token
  zero.wait %token
  %result = zero.all_gather group @g1 from %staged : tensor<8xbf16> : tensor<16xbf16>
  zero.free %staged : tensor<8xbf16>
  %0 = zero.get_param @w1 from %result : tensor<16xbf16> -> tensor<4x4xbf16>
  %1 = nn.matmul %arg0, %0 : tensor<2x4xbf16>, tensor<4x4xbf16> -> tensor<2x4xbf16>
  zero.free %result : tensor<16xbf16>
  %staged_0, %token_1 = zero.transfer group @g2 params to staging swap <buffer = 0, buffers = 2, buffer_bytes = 4096> : tensor<8xbf16> -> !zero.token
  zero.wait %token_1
  %result_2 = zero.all_gather group @g2 from %staged_0 : tensor<8xbf16> : tensor<16xbf16>
  zero.free %staged_0 : tensor<8xbf16>
  %2 = zero.get_param @w2 from %result_2 : tensor<16xbf16> -> tensor<4x4xbf16>
  %3 = nn.matmul %1, %2 : tensor<2x4xbf16>, tensor<4x4xbf16> -> tensor<2x4xbf16>
  zero.free %result_2 : tensor<16xbf16>
  %4 = nn.fill 0.000000e+00 : tensor<f32>
  %5 = nn.fill 1.000000e+00 : tensor<4x4xbf16>
  zero.grad @w1, %5 : tensor<4x4xbf16>
  zero.reduce_scatter group @g1 [0, 16) from %5 at [0] : tensor<4x4xbf16>
  %6 = nn.fill 1.000000e+00 : tensor<4x4xbf16>
  zero.grad @w2, %6 : tensor<4x4xbf16>
  zero.reduce_scatter group @g2 [0, 16) from %6 at [0] : tensor<4x4xbf16>
  zero.free %5 : tensor<4x4xbf16>
  zero.free %6 : tensor<4x4xbf16>
  %7 = zero.loss_scale phase  boundary : tensor<f32>
  %8 = zero.check_overflow groups [@g1, @g2] scale %7 divisor 2.000000e+00 phase  boundary : tensor<2xf32>
  %result_3 = zero.all_reduce overflow_norm %8 group @g1 phase  boundary : tensor<2xf32> -> tensor<2xf32>
  %9 = zero.update_loss_scale %result_3 phase  boundary : tensor<2xf32> -> i1
  %10 = zero.optimizer_step group @g1 stats %result_3 scale %7 skip %9 divisor 2.000000e+00 phase  boundary : tensor<2xf32> -> tensor<8xbf16>
  // expected-note @+1 {{collective issued here}}
  %token_4 = zero.transfer group @g1 %10 to params swap <buffer = 0, buffers = 2, buffer_bytes = 4096> phase boundary : tensor<8xbf16> -> !zero.token
  // expected-error @+1 {{'zero.transfer' op copies elements [0, 16) of partition @g1 (@w1) while an asynchronous collective on params is in flight (wait for its token first)}}
  %staged_r, %token_r = zero.transfer group @g1 params to staging swap <buffer = 1, buffers = 2, buffer_bytes = 4096> phase boundary : tensor<8xbf16> -> !zero.token
  zero.wait %token_r phase boundary
  zero.free %staged_r phase boundary : tensor<8xbf16>
  %11 = zero.optimizer_step group @g2 stats %result_3 scale %7 skip %9 divisor 2.000000e+00 phase  boundary : tensor<2xf32> -> tensor<8xbf16>
  zero.wait %token_4 phase  boundary
  %token_5 = zero.transfer group @g2 %11 to params swap <buffer = 0, buffers = 2, buffer_bytes = 4096> phase boundary : tensor<8xbf16> -> !zero.token
  zero.wait %token_5 phase  boundary
  zero.free %10 phase boundary : tensor<8xbf16>
  zero.free %11 phase boundary : tensor<8xbf16>
  zero.return %4 : tensor<f32>
}

