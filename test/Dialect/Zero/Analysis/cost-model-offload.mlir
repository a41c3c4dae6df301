// The cost model of an offloaded optimizer, worked out by hand from the
// h100-sxm preset (HBM 2.97 TB/s, 3.3 us per kernel, pinned copies at 0.8 x
// 64 GB/s = 51.2 GB/s over PCIe Gen5, the host's CPU Adam at 40 GB/s), for
// one bf16 partition of 1048576 elements on one rank (stage 1: the rank owns
// everything):
//   each copy, 1048576 bf16 = 2 MiB:    3.3 + 2097152 / 51.2e9 = 44.26 us
//   check_overflow, reads 2 MiB:        3.3 + 2097152 / 2.97e12 = 4.0061 us
//   update_loss_scale (8 B of stats):                          ~  3.3000 us
//   host Adam, 28 B a parameter:        3.3 + 29360128 / 40e9  = 737.3032 us
// The gradients start for the host before the overflow check, so 7.3061 us
// of their copy is hidden: 44.26 - 7.3061 = 36.9539 us exposed; the
// parameters return after the Adam and are waited for at once: 44.26 us.
// Exposed transfer: 81.2139 us; the copy stream is busy 88.52 us. The step
// is scheduled as zero-optimizer leaves it with the optimizer on the host;
// Inputs/cost-model-offload-device.mlir with the optimizer on the device.
// RUN: zero-opt %s --zero-report -o /dev/null | FileCheck %s
// RUN: zero-opt %s --zero-report=format=text -o /dev/null | FileCheck %s --check-prefix=TEXT
// RUN: zero-opt %S/Inputs/cost-model-offload-device.mlir --zero-report -o /dev/null | FileCheck %s --check-prefix=NONE
// The `cpu` preset (one rank: 0.08836 us per kernel, 31.83 GB/s) copies
// with a memcpy on the compute thread, reading and writing each byte:
// 0.08836 + 2 * 2097152 / 3.183e10 = 131.8603 us a copy, all of it exposed:
// 263.7208 us for the two.
// RUN: zero-opt %s --zero-report="hardware=cpu format=text" -o /dev/null | FileCheck %s --check-prefix=CPU
// CPU: 0.264 ms exposed device-host transfers (of 0.264 ms copying)
// RUN: zero-opt %s --zero-report="hardware=cpu" -o /dev/null | FileCheck %s --check-prefix=CPUJSON
// CPUJSON: "exposed_transfer_ms": 0.263720{{[0-9]*}},

// CHECK: "exposed_transfer_ms": 0.08121{{[0-9]*}},
// CHECK: "host_peak_bytes": 16777216,
// CHECK: "nvme_bytes": 0,
// The host arena: master, m, v (4 MiB each), the gradient and parameter
// copies (2 MiB each).
// TEXT: Per-rank pinned host memory
// TEXT-NEXT: fp32 master parameters 4194304
// TEXT-NEXT: Adam m 4194304
// TEXT-NEXT: Adam v 4194304
// TEXT-NEXT: gradient copy 2097152
// TEXT-NEXT: parameter copy 2097152
// TEXT-NEXT: host peak 16777216
// TEXT-NEXT: NVMe files 0
// TEXT: 0.081 ms exposed device-host transfers (of 0.089 ms copying)
// NONE: "exposed_transfer_ms": 0,
// NONE: "host_peak_bytes": 0,

zero.param @w : tensor<1024x1024xf32> init zeros compute bf16
zero.partition @flat stage 1 world_size 1 alignment 2 numel 1048576 padded 1048576 params [@w] offsets [0]
zero.train_step @step(%x: tensor<2x4xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 1, world_size = 1, global_batch = 2>
    offload #zero.offload<optimizer = cpu> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.reduce_scatter group @flat in grads [0, 1048576) phase boundary
  %down = zero.transfer group @flat grads[0, 1048576) to host_grads phase boundary -> !zero.token
  %scale = zero.loss_scale phase boundary : tensor<f32>
  %stats = zero.check_overflow groups [@flat] scale %scale divisor 1.0 phase boundary : tensor<2xf32>
  %norm = zero.all_reduce overflow_norm %stats group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %norm phase boundary : tensor<2xf32> -> i1
  zero.wait %down phase boundary
  zero.optimizer_step group @flat stats %norm scale %scale skip %skip divisor 1.0 host phase boundary : tensor<2xf32>
  %up = zero.transfer group @flat host_params to params phase boundary -> !zero.token
  zero.wait %up phase boundary
  zero.all_gather group @flat in params [0, 1048576) phase post_step
  zero.return %loss : tensor<f32>
}
