// The cost model on hand-written schedules, with the times worked out by hand
// from the h100-sxm preset (GEMM 791.2 TFLOP/s, HBM 2.97 TB/s, 3.3 us per
// kernel, ring busbw 365 GB/s, 1.8 us per ring step; reduce-scatters and
// all-gathers at the busbw of its 8-GPU sweep by size, read at 8 chunks of
// the ring, latency included). A GEMM's rate is the
// GEMM rate times the share of its output tiles' slots on the 132 SMs it
// fills (the best of 256x128, 128x256 and 128x128 tiles):
//   matmul 256x1024 out, K 1024: 16 tiles of 128x128 in one wave of 132:
//                              3.3 + max(0.6786 / (16/132) = 5.5981,
//                              3145728 B / 2.97 TB/s = 1.0592) = 8.8981 us
//   matmul 1024x1024 out, K 256: 64 tiles of 128x128 in one wave:
//                              3.3 + max(0.6786 / (64/132) = 1.3995,
//                              1.0592) = 4.6995 us
//   nn.fill of a scalar:       3.3000 us
//   nn.gelu of 256x1024 bf16:  3.3 + 1048576 B / 2.97 TB/s = 3.6531 us
//   reduce_scatter of 2 MiB over 4 ranks, chunks of 524288 B, the sweep's
//   busbw at 8 x 524288 = 4 MiB, 128.73 GB/s:
//                              3/4 x 2097152 / 128.73e9 = 12.2183 us
//   its completion at stage 2, the add of the rank's quarter into its
//   gradient shard: 3.3 + 3 x 524288 B / 2.97 TB/s = 3.8296 us
// RUN: zero-opt %s -split-input-file --zero-report -o /dev/null | FileCheck %s

zero.param @w : tensor<1024x1024xf32> init zeros compute bf16
zero.partition @flat stage 2 world_size 4 alignment 2 numel 1048576 padded 1048576 params [@w] offsets [0]

// Synchronous: the compute stream waits for the whole reduce-scatter and
// then adds, so the step is the sum 8.8981 + 3.3000 + 4.6995 + 12.2183 +
// 3.8296 + 3.6531 = 36.5985 us.
// CHECK: "exposed_comm_ms": 0.012218{{[0-9]*}},
// CHECK: "predicted_step_ms": 0.036598{{[0-9]*}},
zero.train_step @sync(%x: tensor<256x1024xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 4, global_batch = 1024> {
  %w = zero.get_param @w : tensor<1024x1024xbf16>
  %h = nn.matmul %x, %w : tensor<256x1024xbf16>, tensor<1024x1024xbf16> -> tensor<256x1024xbf16>
  %loss = nn.fill 0.0 : tensor<f32>
  %g = nn.matmul %x, %h transpose_lhs : tensor<256x1024xbf16>, tensor<256x1024xbf16> -> tensor<1024x1024xbf16>
  zero.grad @w, %g : tensor<1024x1024xbf16>
  zero.reduce_scatter group @flat [0, 1048576) from %g at [0] : tensor<1024x1024xbf16>
  zero.free %g : tensor<1024x1024xbf16>
  %y = nn.gelu %h : tensor<256x1024xbf16>
  zero.return %loss : tensor<f32>
}

// -----

zero.param @w : tensor<1024x1024xf32> init zeros compute bf16
zero.partition @flat stage 2 world_size 4 alignment 2 numel 1048576 padded 1048576 params [@w] offsets [0]

// Asynchronous: the gelu runs while the reduce-scatter is in flight; the wait
// blocks for 12.2183 - 3.6531 = 8.5653 us until the collective ends at
// 16.8976 + 12.2183 = 29.1159 us, and the step ends with the add after it,
// 29.1159 + 3.8296 = 32.9455 us.
// CHECK: "exposed_comm_ms": 0.008565{{[0-9]*}},
// CHECK: "predicted_step_ms": 0.032945{{[0-9]*}},
zero.train_step @async(%x: tensor<256x1024xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 4, global_batch = 1024> {
  %w = zero.get_param @w : tensor<1024x1024xbf16>
  %h = nn.matmul %x, %w : tensor<256x1024xbf16>, tensor<1024x1024xbf16> -> tensor<256x1024xbf16>
  %loss = nn.fill 0.0 : tensor<f32>
  %g = nn.matmul %x, %h transpose_lhs : tensor<256x1024xbf16>, tensor<256x1024xbf16> -> tensor<1024x1024xbf16>
  zero.grad @w, %g : tensor<1024x1024xbf16>
  %t = zero.reduce_scatter group @flat [0, 1048576) from %g at [0] : tensor<1024x1024xbf16> -> !zero.token
  %y = nn.gelu %h : tensor<256x1024xbf16>
  zero.wait %t
  zero.free %g : tensor<1024x1024xbf16>
  zero.return %loss : tensor<f32>
}

// -----

zero.param @w : tensor<1024x1024xf32> init zeros compute bf16
zero.partition @flat stage 2 world_size 1 alignment 2 numel 1048576 padded 1048576 params [@w] offsets [0]

// One rank: collectives (and their completions) cost nothing; the step is
// the compute alone,
// 8.8981 + 3.3000 + 4.6995 + 3.6531 = 20.5506 us.
// CHECK: "exposed_comm_ms": 0,
// CHECK: "predicted_step_ms": 0.020550{{[0-9]*}},
zero.train_step @single(%x: tensor<256x1024xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 1, global_batch = 256> {
  %w = zero.get_param @w : tensor<1024x1024xbf16>
  %h = nn.matmul %x, %w : tensor<256x1024xbf16>, tensor<1024x1024xbf16> -> tensor<256x1024xbf16>
  %loss = nn.fill 0.0 : tensor<f32>
  %g = nn.matmul %x, %h transpose_lhs : tensor<256x1024xbf16>, tensor<256x1024xbf16> -> tensor<1024x1024xbf16>
  zero.grad @w, %g : tensor<1024x1024xbf16>
  %t = zero.reduce_scatter group @flat [0, 1048576) from %g at [0] : tensor<1024x1024xbf16> -> !zero.token
  %y = nn.gelu %h : tensor<256x1024xbf16>
  zero.wait %t
  zero.free %g : tensor<1024x1024xbf16>
  zero.return %loss : tensor<f32>
}

// -----

zero.param @w : tensor<1024x1024xf32> init zeros compute bf16
zero.partition @flat stage 1 world_size 4 alignment 2 numel 1048576 padded 1048576 params [@w] offsets [0]

// Gradient accumulation over 2 micro steps: the unmarked ops run twice, the
// boundary-phase ones once. Micro step: 8.8981 + 3.3000 + 4.6995 + (zero.grad
// accumulating 2 MiB: 3.3 + 3 x 2097152 B / 2.97 TB/s = 5.4183) = 22.3159
// us. Boundary: reduce_scatter 12.2183 (synchronous), check_overflow over the
// 262144-element shard (3.3 + 524288 B / 2.97 TB/s = 3.4765), the 8-byte
// overflow_norm all_reduce (all-reduces keep the flat ring: 6 x 1.8 us +
// 1.5 x 8 B / 365 GB/s = 10.8000),
// update_loss_scale (3.3000), Adam at 28 B per owned parameter and the
// zeroing of the stage-1 rank's full gradient buffer after it
// (3.3 + (7340032 + 2097152) B / 2.97 TB/s = 6.4775; no add completes a
// stage-1 reduce-scatter): 2 x 22.3159 + 36.2723 = 80.9041 us, of which
// 12.2183 + 10.8000 = 23.0183 us exposed.
// CHECK: "exposed_comm_ms": 0.023018{{[0-9]*}},
// CHECK: "predicted_step_ms": 0.080904{{[0-9]*}},
zero.train_step @accumulate(%x: tensor<256x1024xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 1, world_size = 4, global_batch = 2048, accumulation_steps = 2> {
  %w = zero.get_param @w : tensor<1024x1024xbf16>
  %h = nn.matmul %x, %w : tensor<256x1024xbf16>, tensor<1024x1024xbf16> -> tensor<256x1024xbf16>
  %loss = nn.fill 0.0 : tensor<f32>
  %g = nn.matmul %x, %h transpose_lhs : tensor<256x1024xbf16>, tensor<256x1024xbf16> -> tensor<1024x1024xbf16>
  zero.grad @w, %g : tensor<1024x1024xbf16>
  zero.reduce_scatter group @flat in grads [0, 1048576) phase boundary
  %s = zero.loss_scale phase boundary : tensor<f32>
  %stats = zero.check_overflow groups [@flat] scale %s divisor 8.0 phase boundary : tensor<2xf32>
  %r = zero.all_reduce overflow_norm %stats group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %r phase boundary : tensor<2xf32> -> i1
  zero.optimizer_step group @flat stats %r scale %s skip %skip divisor 8.0 phase boundary : tensor<2xf32>
  zero.return %loss : tensor<f32>
}
