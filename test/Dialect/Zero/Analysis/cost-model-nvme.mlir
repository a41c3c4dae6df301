// The cost model of an optimizer offloaded to NVMe, worked out by hand from
// the h100-sxm preset (as cost-model-offload.mlir, plus the assumed disk:
// 6 GB/s reads, 3 GB/s writes) for one bf16 partition of 1048576 elements
// on one rank, swapped in 4 chunks of 262144 elements (4 buffers):
//   host Adam, 28 B a parameter:   3.3 + 29360128 / 40e9            =  737.3032 us
//   swap file, 3 x 4 MiB read and written:
//                                  12582912 / 6e9 + 12582912 / 3e9  = 6291.456 us
//   the pipelined Adam over 4 chunks:
//     (6291.456 + 737.3032) / 4 + 3 / 4 * max(6291.456, 737.3032)   = 6475.7818 us
// so 6475.7818 - 737.3032 = 5738.4786 us of NVMe transfer are exposed,
// beside the device-host copies' 36.9539 + 44.26 us: 5819.6925 us in all;
// copying takes 88.52 + 6291.456 = 6379.976 us. The step is scheduled as
// zero-optimizer leaves it with the states on NVMe in swap buffers of 262144
// elements.
// RUN: zero-opt %s --zero-report -o /dev/null | FileCheck %s
// RUN: zero-opt %s --zero-report=format=text -o /dev/null | FileCheck %s --check-prefix=TEXT

// CHECK: "exposed_transfer_ms": 5.81969{{[0-9]*}},
// The host arena: the gradient and parameter copies (2 MiB each) and 4
// swap buffers of 3 x 1 MiB; the swap file: master, m and v (4 MiB each).
// CHECK: "host_peak_bytes": 16777216,
// CHECK: "nvme_bytes": 12582912,
// CHECK: "nvme_swap_buffer_bytes": 12582912,
// TEXT: Per-rank pinned host memory
// TEXT-NEXT: gradient copy 2097152
// TEXT-NEXT: parameter copy 2097152
// TEXT-NEXT: NVMe swap buffers 12582912
// TEXT-NEXT: host peak 16777216
// TEXT-NEXT: NVMe fp32 master parameters 4194304
// TEXT-NEXT: NVMe Adam m 4194304
// TEXT-NEXT: NVMe Adam v 4194304
// TEXT-NEXT: NVMe files 12582912
// TEXT: 5.820 ms exposed {{.*}}transfers (of 6.380 ms copying)

zero.param @w : tensor<1024x1024xf32> init zeros compute bf16
zero.partition @flat stage 1 world_size 1 alignment 2 numel 1048576 padded 1048576 params [@w] offsets [0]
zero.train_step @step(%x: tensor<2x4xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 1, world_size = 1, global_batch = 2>
    offload #zero.offload<optimizer = nvme, nvme_path = "/nvme", buffer_size = 262144> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.reduce_scatter group @flat in grads [0, 1048576) phase boundary
  %down = zero.transfer group @flat grads[0, 1048576) to host_grads phase boundary -> !zero.token
  %scale = zero.loss_scale phase boundary : tensor<f32>
  %stats = zero.check_overflow groups [@flat] scale %scale divisor 1.0 phase boundary : tensor<2xf32>
  %norm = zero.all_reduce overflow_norm %stats group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %norm phase boundary : tensor<2xf32> -> i1
  zero.wait %down phase boundary
  zero.optimizer_step group @flat stats %norm scale %scale skip %skip divisor 1.0 host swap <chunk = 262144, buffers = 4> phase boundary : tensor<2xf32>
  %up = zero.transfer group @flat host_params to params phase boundary -> !zero.token
  zero.wait %up phase boundary
  zero.all_gather group @flat in params [0, 1048576) phase post_step
  zero.return %loss : tensor<f32>
}
