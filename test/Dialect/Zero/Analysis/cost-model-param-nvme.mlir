// The cost model of parameter offload to NVMe, worked out by hand from the
// h100-sxm preset (pinned copies at 0.8 x 64 GB/s = 51.2 GB/s over PCIe
// Gen5, 3.3 us per transfer; one data-center SSD at 6 GB/s read and 3 GB/s
// write; the host's memory at 40 GB/s), for one bf16 partition of 1048576
// elements on one rank at stage 3 (the shard is the whole group, 2 MiB =
// 2097152 bytes, whole 4096-byte blocks). As the runtime moves a shard,
// the disk runs asynchronously from the transfer's issue and the copy
// between the swap buffer and the staged (or host) buffer on the host,
// exposed: a read's at its wait, after the disk, a write's at its issue,
// before it:
//   the read before the gather:  3.3 + 2097152 / 51.2e9 + 2097152 / 6e9
//                              = 3.3 + 40.96 + 349.5253 = 393.7853 us
//   a device Adam's write back:  3.3 + 40.96 + 2097152 / 3e9
//                              = 3.3 + 40.96 + 699.0507 = 743.3107 us
//   a host Adam's write back:    3.3 + 2 * 2097152 / 40e9 (a memcpy into the
//                                swap buffer) + 699.0507 = 807.2083 us
// With the optimizer on the device both are waited for at once (nothing to
// overlap the disk here): 1137.096 us exposed. With the optimizer in host memory too:
// the read, the gradients' copy to the host (36.9539 us exposed, as in
// cost-model-param-offload.mlir) and the host write: 1237.9475 us. The host
// arena adds the 5 swap buffers of 2 MiB (DeepSpeed's default buffer_count);
// nvme_bytes is the parameter file, the shard. The step is scheduled as
// zero-param-gather (the shards in a swap file, no group persistent) and
// zero-optimizer leave it with the optimizer on the device;
// Inputs/cost-model-param-nvme-host-adam.mlir with the optimizer on the host.
// RUN: zero-opt %s --zero-report -o /dev/null | FileCheck %s --check-prefix=PARAM
// RUN: zero-opt %S/Inputs/cost-model-param-nvme-host-adam.mlir --zero-report -o /dev/null | FileCheck %s --check-prefix=BOTH
// RUN: zero-opt %S/Inputs/cost-model-param-nvme-host-adam.mlir --zero-report=format=text -o /dev/null | FileCheck %s --check-prefix=TEXT

// PARAM: "exposed_transfer_ms": 1.13709{{[0-9]*}},
// PARAM: "host_peak_bytes": 10485760,
// PARAM: "nvme_bytes": 2097152,
// PARAM: "nvme_param_bytes": 2097152,
// PARAM: "nvme_param_swap_buffer_bytes": 10485760,
// PARAM: "nvme_swap_buffer_bytes": 0,
// PARAM: "peak_bytes": 20979712,
// BOTH: "exposed_transfer_ms": 1.23794748{{[0-9]*}},
// BOTH: "host_peak_bytes": 27262976,
// BOTH: "nvme_bytes": 2097152,
// BOTH: "peak_bytes": 8396800,
// TEXT: Per-rank pinned host memory
// TEXT-NEXT: fp32 master parameters 4194304
// TEXT-NEXT: Adam m 4194304
// TEXT-NEXT: Adam v 4194304
// TEXT-NEXT: gradient copy 2097152
// TEXT-NEXT: parameter copy 2097152
// TEXT-NEXT: NVMe parameter swap buffers 10485760
// TEXT-NEXT: host peak 27262976
// TEXT-NEXT: NVMe bf16 parameter shards 2097152
// TEXT-NEXT: NVMe files 2097152
// TEXT: Model states on the device are the gradients only: the fp32 masters and Adam moments live in pinned host memory (ZeRO-Offload).
// TEXT-NEXT: The stage-3 parameter shards live in the ranks' parameter swap files (offload_param to nvme, ZeRO-Infinity): each gather reads a device copy of its shard (counted with the gathered parameters), read from the file through a pinned host swap buffer, and the host Adam's new parameters are written back through one.
// TEXT: 1.238 ms exposed device-host and NVMe transfers (of 1.245 ms copying)
zero.param @w : tensor<1024x1024xf32> init zeros compute bf16
zero.partition @flat stage 3 world_size 1 alignment 2 numel 1048576 padded 1048576 params [@w] offsets [0]
zero.train_step @step(%x: tensor<1x1024xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 1, global_batch = 1>
    offload #zero.offload<param = nvme, param_nvme_path = "/nvme"> {
  %shard, %read = zero.transfer group @flat params to staging swap <buffer = 0, buffers = 5, buffer_bytes = 2097152> : tensor<1048576xbf16> -> !zero.token
  zero.wait %read
  %full = zero.all_gather group @flat from %shard : tensor<1048576xbf16> : tensor<1048576xbf16>
  zero.free %shard : tensor<1048576xbf16>
  %w = zero.get_param @w from %full : tensor<1048576xbf16> -> tensor<1024x1024xbf16>
  %y = nn.matmul %x, %w : tensor<1x1024xbf16>, tensor<1024x1024xbf16> -> tensor<1x1024xbf16>
  zero.free %full : tensor<1048576xbf16>
  %loss = nn.fill 0.0 : tensor<f32>
  %g = nn.fill 1.0 : tensor<1024x1024xbf16>
  zero.grad @w, %g : tensor<1024x1024xbf16>
  zero.reduce_scatter group @flat [0, 1048576) from %g at [0] : tensor<1024x1024xbf16>
  zero.free %g : tensor<1024x1024xbf16>
  %scale = zero.loss_scale phase boundary : tensor<f32>
  %stats = zero.check_overflow groups [@flat] scale %scale divisor 1.0 phase boundary : tensor<2xf32>
  %norm = zero.all_reduce overflow_norm %stats group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %norm phase boundary : tensor<2xf32> -> i1
  %new = zero.optimizer_step group @flat stats %norm scale %scale skip %skip divisor 1.0 phase boundary : tensor<2xf32> -> tensor<1048576xbf16>
  %up = zero.transfer group @flat %new to params swap <buffer = 0, buffers = 5, buffer_bytes = 2097152> phase boundary : tensor<1048576xbf16> -> !zero.token
  zero.wait %up phase boundary
  zero.free %new phase boundary : tensor<1048576xbf16>
  zero.return %loss : tensor<f32>
}
