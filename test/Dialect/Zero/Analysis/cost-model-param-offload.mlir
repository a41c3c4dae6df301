// The cost model of parameter offload, worked out by hand from the h100-sxm
// preset (pinned copies at 0.8 x 64 GB/s = 51.2 GB/s over PCIe Gen5, 3.3 us
// per copy), for one bf16 partition of 1048576 elements on one rank at
// stage 3 (the shard is the whole group, 2 MiB):
//   each copy of the shard:  3.3 + 2097152 / 51.2e9 = 44.26 us
// With the optimizer on the device: the staged copy before the gather is
// waited for at once (nothing to overlap it at the top of the step), and the
// device Adam's new parameters go back after it and are waited for at once:
// 88.52 us exposed.
// With both offloaded: the staged copy (44.26 us) and the gradients' copy to the host,
// 7.3061 us of which the overflow check and the loss-scale update hide
// (36.9539 us, as in cost-model-offload.mlir); the host Adam updates the
// host shard in place, so nothing comes back: 81.2139 us exposed. Host
// memory: the shard (2 MiB), the fp32 master, m and v (4 MiB each) and the
// gradient copy (2 MiB). The step is scheduled as zero-param-gather (the
// shards in host memory, no group persistent) and zero-optimizer leave it
// with the optimizer on the device; with both offloaded in
// Inputs/cost-model-param-offload-host-adam.mlir, with neither in
// Inputs/cost-model-param-offload-none.mlir.
// RUN: zero-opt %s --zero-report -o /dev/null | FileCheck %s --check-prefix=PARAM
// RUN: zero-opt %S/Inputs/cost-model-param-offload-host-adam.mlir --zero-report -o /dev/null | FileCheck %s --check-prefix=BOTH
// RUN: zero-opt %S/Inputs/cost-model-param-offload-host-adam.mlir --zero-report=format=text -o /dev/null | FileCheck %s --check-prefix=TEXT
// RUN: zero-opt %S/Inputs/cost-model-param-offload-none.mlir --zero-report -o /dev/null | FileCheck %s --check-prefix=NONE

// PARAM: "exposed_transfer_ms": 0.0885{{[0-9]*}},
// PARAM: "host_peak_bytes": 2097152,
// PARAM: "peak_bytes": 20979712,
// BOTH: "exposed_transfer_ms": 0.081213{{[0-9]*}},
// BOTH: "host_peak_bytes": 16777216,
// BOTH: "peak_bytes": 8396800,
// NONE: "exposed_transfer_ms": 0,
// NONE: "host_peak_bytes": 0,
// NONE: "peak_bytes": 23074880,
// TEXT: Per-rank pinned host memory
// TEXT-NEXT: bf16 parameter shards 2097152
// TEXT-NEXT: fp32 master parameters 4194304
// TEXT-NEXT: Adam m 4194304
// TEXT-NEXT: Adam v 4194304
// TEXT-NEXT: gradient copy 2097152
// TEXT-NEXT: host peak 16777216
// TEXT: The stage-3 parameter shards live in pinned host memory (offload_param): each gather reads a device copy of its shard (counted with the gathered parameters), and the host Adam updates them in place.
// TEXT: 0.081 ms exposed device-host transfers (of 0.089 ms copying)
zero.param @w : tensor<1024x1024xf32> init zeros compute bf16
zero.partition @flat stage 3 world_size 1 alignment 2 numel 1048576 padded 1048576 params [@w] offsets [0]
zero.train_step @step(%x: tensor<1x1024xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 1, global_batch = 1>
    offload #zero.offload<param = cpu> {
  %shard, %read = zero.transfer group @flat params to staging : tensor<1048576xbf16> -> !zero.token
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
  %up = zero.transfer group @flat %new to params phase boundary : tensor<1048576xbf16> -> !zero.token
  zero.wait %up phase boundary
  zero.free %new phase boundary : tensor<1048576xbf16>
  zero.return %loss : tensor<f32>
}
