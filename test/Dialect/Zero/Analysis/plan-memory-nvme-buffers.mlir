// RUN: zero-opt %s --zero-plan-memory | FileCheck %s

// Two swap buffers of 2048 elements per state: a shard of 5000 fp32
// elements (20000 bytes, padded to 20480 in the file) moves in 3 chunks.
// The states sit at 0, 20480 and 40960 (nvme_bytes 61440); the swap
// buffers take 2 * 12 * 2048 = 49152 bytes of the host arena after the
// gradient and parameter copies (10000 bf16 bytes each, at 0 and 10048),
// from 20480: host_bytes 69632. The step is scheduled as zero-optimizer
// leaves it with nvme-buffer-count=2 and nvme-buffer-size=2048 (the chunk and
// buffer count on its zero.optimizer_step).
zero.param @w : tensor<10000xf32> init zeros compute bf16
// CHECK: zero.buffer_offsets<params = 0, grads = 20032, master = 0, exp_avg = 20480, exp_avg_sq = 40960, host_grads = 0, host_params = 10048>
zero.partition @flat stage 1 world_size 2 alignment 2 numel 10000 padded 10000 params [@w] offsets [0]
// CHECK-LABEL: zero.train_step @chunks
// CHECK-SAME: offload #zero.offload<optimizer = nvme, nvme_path = "/nvme", buffer_count = 2, buffer_size = 2048>
// CHECK-SAME: host_bytes = 69632, nvme_bytes = 61440, swap_offset = 20480, swap_bytes = 49152
// CHECK: host swap <chunk = 2048, buffers = 2>
zero.train_step @chunks(%x: tensor<2x8xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 1, world_size = 2, global_batch = 4>
    offload #zero.offload<optimizer = nvme, nvme_path = "/nvme", buffer_count = 2, buffer_size = 2048> {
  %loss = nn.fill 0.0 : tensor<f32>
  %g = nn.fill 1.0 : tensor<10000xbf16>
  zero.grad @w, %g : tensor<10000xbf16>
  zero.reduce_scatter group @flat in grads [0, 10000) phase boundary
  %down = zero.transfer group @flat grads[0, 10000) to host_grads phase boundary -> !zero.token
  %scale = zero.loss_scale phase boundary : tensor<f32>
  %stats = zero.check_overflow groups [@flat] scale %scale divisor 2.0 phase boundary : tensor<2xf32>
  %norm = zero.all_reduce overflow_norm %stats group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %norm phase boundary : tensor<2xf32> -> i1
  zero.wait %down phase boundary
  zero.optimizer_step group @flat stats %norm scale %scale skip %skip divisor 2.0 host swap <chunk = 2048, buffers = 2> phase boundary : tensor<2xf32>
  %up = zero.transfer group @flat host_params to params phase boundary -> !zero.token
  zero.wait %up phase boundary
  zero.all_gather group @flat in params [0, 10000) phase post_step
  zero.return %loss : tensor<f32>
}
