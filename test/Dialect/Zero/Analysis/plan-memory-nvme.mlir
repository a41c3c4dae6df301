// RUN: zero-opt %s -split-input-file --zero-plan-memory --zero-verify-schedule | FileCheck %s
// RUN: zero-opt %s -split-input-file --zero-print-memory-plan -o /dev/null | FileCheck %s --check-prefix=PRINT

// The optimizer on NVMe (ZeRO-Infinity): the master, exp_avg and exp_avg_sq
// shards (36 f32 = 144 bytes each) live in the rank's swap file at
// 4096-byte boundaries, each padded to 4096 bytes: nvme_bytes 12288. The
// host arena keeps the gradient and parameter copies (72 bytes each, at 0
// and 128) and, from the next 4096-byte boundary, the 4 swap buffers of a
// 1024-element chunk (the largest owned shard, 36, rounded up to 1024
// elements) of the three states: 4 * 12 * 1024 = 49152 bytes at 4096, so
// host_bytes 53248. The device side is the same as with cpu offload. The
// steps are scheduled as zero-optimizer leaves them with the optimizer on
// NVMe (the chunk and buffer count on their zero.optimizer_step).
zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<2x32xf32> init zeros compute bf16
// CHECK: zero.partition @flat {{.*}} {zero.buffers = #zero.buffer_offsets<params = 0, grads = 192, master = 0, exp_avg = 4096, exp_avg_sq = 8192, host_grads = 0, host_params = 128>}
zero.partition @flat stage 2 world_size 2 alignment 4 numel 68 padded 72 params [@a, @b] offsets [0, 4]
// CHECK-LABEL: zero.train_step @step
// CHECK-SAME: offload #zero.offload<optimizer = nvme, nvme_path = "/nvme">
// CHECK-SAME: zero.plan = #zero.memory_plan<persistent_bytes = 320, arena_bytes = 448, scratch_bytes = 0, peak_bytes = 768, host_bytes = 53248, nvme_bytes = 12288, swap_offset = 4096, swap_bytes = 49152>
// CHECK: zero.optimizer_step group @flat {{.*}} host swap <chunk = 1024, buffers = 4> phase boundary
// PRINT: persistent_bytes 320, arena_bytes 448, scratch_bytes 0, peak_bytes 768, host_bytes 53248, nvme_bytes 12288, swap_offset 4096, swap_bytes 49152
// PRINT-NEXT: persistent @flat params offset 0 bytes 136
// PRINT-NEXT: persistent @flat grads offset 192 bytes 72
// PRINT-NEXT: nvme @flat master offset 0 bytes 144
// PRINT-NEXT: nvme @flat exp_avg offset 4096 bytes 144
// PRINT-NEXT: nvme @flat exp_avg_sq offset 8192 bytes 144
// PRINT-NEXT: host @flat host_grads offset 0 bytes 72
// PRINT-NEXT: host @flat host_params offset 128 bytes 72
zero.train_step @step(%x: tensor<2x32xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 4>
    offload #zero.offload<optimizer = nvme, nvme_path = "/nvme"> {
  %loss = nn.fill 0.0 : tensor<f32>
  %gb = nn.fill 1.0 : tensor<2x32xbf16>
  zero.grad @b, %gb : tensor<2x32xbf16>
  %ga = nn.fill 1.0 : tensor<4xbf16>
  zero.grad @a, %ga : tensor<4xbf16>
  %t = zero.reduce_scatter group @flat [0, 68) from %ga, %gb at [0, 0] : tensor<4xbf16>, tensor<2x32xbf16> -> !zero.token
  zero.wait %t
  %down = zero.transfer group @flat grads[0, 68) to host_grads phase last_micro_step -> !zero.token
  zero.free %ga : tensor<4xbf16>
  zero.free %gb : tensor<2x32xbf16>
  %scale = zero.loss_scale phase boundary : tensor<f32>
  %stats = zero.check_overflow groups [@flat] scale %scale divisor 2.0 phase boundary : tensor<2xf32>
  %norm = zero.all_reduce overflow_norm %stats group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %norm phase boundary : tensor<2xf32> -> i1
  zero.wait %down phase boundary
  zero.optimizer_step group @flat stats %norm scale %scale skip %skip divisor 2.0 host swap <chunk = 1024, buffers = 4> phase boundary : tensor<2xf32>
  %up = zero.transfer group @flat host_params to params phase boundary -> !zero.token
  zero.wait %up phase boundary
  zero.all_gather group @flat in params [0, 68) phase post_step
  zero.return %loss : tensor<f32>
}

// -----

// fp32 compute: the masters are in the swap file, so the updated fp32
// parameters come back through a host parameter copy too (16 bytes at 64,
// after the 16-byte gradient copy), uploaded from host_params.
zero.param @w : tensor<8xf32> init zeros
// CHECK: zero.partition @flat {{.*}} {zero.buffers = #zero.buffer_offsets<params = 0, grads = 64, master = 0, exp_avg = 4096, exp_avg_sq = 8192, host_grads = 0, host_params = 64>}
zero.partition @flat stage 1 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
// CHECK-LABEL: zero.train_step @fp32
// CHECK-SAME: host_bytes = 53248, nvme_bytes = 12288, swap_offset = 4096, swap_bytes = 49152
// CHECK: zero.optimizer_step group @flat {{.*}} host swap <chunk = 1024, buffers = 4> phase boundary
// CHECK-NEXT: %[[U:.*]] = zero.transfer group @flat host_params to params phase boundary -> !zero.token
zero.train_step @fp32(%x: tensor<2x8xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 1, world_size = 2, global_batch = 4>
    offload #zero.offload<optimizer = nvme, nvme_path = "/nvme"> {
  %loss = nn.fill 0.0 : tensor<f32>
  %g = nn.fill 1.0 : tensor<8xf32>
  zero.grad @w, %g : tensor<8xf32>
  zero.reduce_scatter group @flat in grads [0, 8) phase boundary
  %down = zero.transfer group @flat grads[0, 8) to host_grads phase boundary -> !zero.token
  %scale = zero.loss_scale phase boundary : tensor<f32>
  %stats = zero.check_overflow groups [@flat] scale %scale divisor 2.0 phase boundary : tensor<2xf32>
  %norm = zero.all_reduce overflow_norm %stats group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %norm phase boundary : tensor<2xf32> -> i1
  zero.wait %down phase boundary
  zero.optimizer_step group @flat stats %norm scale %scale skip %skip divisor 2.0 host swap <chunk = 1024, buffers = 4> phase boundary : tensor<2xf32>
  %up = zero.transfer group @flat host_params to params phase boundary -> !zero.token
  zero.wait %up phase boundary
  zero.all_gather group @flat in params [0, 8) phase post_step
  zero.return %loss : tensor<f32>
}
