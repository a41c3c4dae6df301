// The `cpu` preset's ranks are processes on one machine whose swap files
// share its one disk (1 GB/s reading, 1.9 GB/s writing for one process):
// each of N ranks gets 1/N of those rates. A rank's 2 MiB (2097152-byte)
// bf16 parameter shard on NVMe, read before its gather and written back
// after the optimizer, in the report's timeline:
//   one rank:  2097152 / 1e9 = 2097.152 us, 2097152 / 1.9e9 = 1103.764 us
//   two ranks: 2097152 / 0.5e9 = 4194.304 us, 2097152 / 0.95e9 = 2207.528 us
// The GPU presets assume one disk per rank: h100-sxm's 6 GB/s read takes
// 349.525 us at either world size. The step is scheduled as zero-param-gather
// (the shards in a swap file, no group persistent) and zero-optimizer leave
// it.
// RUN: zero-opt %s --zero-report="hardware=cpu trace=%t.cpu.json" -o /dev/null > /dev/null
// RUN: FileCheck %s --check-prefix=CPU < %t.cpu.json
// RUN: zero-opt %s --zero-report="hardware=h100-sxm trace=%t.h100.json" -o /dev/null > /dev/null
// RUN: FileCheck %s --check-prefix=H100 < %t.h100.json
// The report says which rates it assumed.
// RUN: zero-opt %s --zero-report="hardware=cpu" -o /dev/null | FileCheck %s --check-prefix=CPUJSON
// RUN: zero-opt %s --zero-report="hardware=cpu format=text" -o /dev/null | FileCheck %s --check-prefix=CPUTEXT
// RUN: zero-opt %s --zero-report="hardware=h100-sxm format=text" -o /dev/null | FileCheck %s --check-prefix=H100TEXT
// CPUJSON: "nvme_read_bytes_per_s": 500000000,
// CPUJSON: "nvme_write_bytes_per_s": 950000000,
// CPUTEXT: Predicted step on cpu: {{.*}}; the swap files' disk at 0.50 GB/s reading and 0.95 GB/s writing per rank (one disk shared by 2 ranks)
// H100TEXT: Predicted step on h100-sxm: {{.*}}; the swap files' disk at 6.00 GB/s reading and 3.00 GB/s writing per rank{{$}}

// CPU: "world_size":2
// CPU: "name":"nvme zero.transfer @flat","cat":"copy","ph":"X","ts":{{[0-9.]+}},"dur":4194.304{{[0-9]*}},
// CPU: "name":"nvme zero.transfer @flat","cat":"copy","ph":"X","ts":{{[0-9.]+}},"dur":2207.528{{[0-9]*}},
// H100: "world_size":2
// H100: "name":"nvme zero.transfer @flat","cat":"copy","ph":"X","ts":{{[0-9.]+}},"dur":349.525{{[0-9]*}},

zero.param @w : tensor<1024x2048xf32> init zeros compute bf16
zero.partition @flat stage 3 world_size 2 alignment 2 numel 2097152 padded 2097152 params [@w] offsets [0]
zero.train_step @step(%x: tensor<1x1024xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 2>
    offload #zero.offload<param = nvme, param_nvme_path = "/nvme"> {
  %shard, %read = zero.transfer group @flat params to staging swap <buffer = 0, buffers = 5, buffer_bytes = 2097152> : tensor<1048576xbf16> -> !zero.token
  zero.wait %read
  %full = zero.all_gather group @flat from %shard : tensor<1048576xbf16> : tensor<2097152xbf16>
  zero.free %shard : tensor<1048576xbf16>
  %w = zero.get_param @w from %full : tensor<2097152xbf16> -> tensor<1024x2048xbf16>
  %y = nn.matmul %x, %w : tensor<1x1024xbf16>, tensor<1024x2048xbf16> -> tensor<1x2048xbf16>
  zero.free %full : tensor<2097152xbf16>
  %loss = nn.fill 0.0 : tensor<f32>
  %g = nn.fill 1.0 : tensor<1024x2048xbf16>
  zero.grad @w, %g : tensor<1024x2048xbf16>
  zero.reduce_scatter group @flat [0, 2097152) from %g at [0] : tensor<1024x2048xbf16>
  zero.free %g : tensor<1024x2048xbf16>
  %scale = zero.loss_scale phase boundary : tensor<f32>
  %stats = zero.check_overflow groups [@flat] scale %scale divisor 2.0 phase boundary : tensor<2xf32>
  %norm = zero.all_reduce overflow_norm %stats group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %norm phase boundary : tensor<2xf32> -> i1
  %new = zero.optimizer_step group @flat stats %norm scale %scale skip %skip divisor 2.0 phase boundary : tensor<2xf32> -> tensor<1048576xbf16>
  %up = zero.transfer group @flat %new to params swap <buffer = 0, buffers = 5, buffer_bytes = 2097152> phase boundary : tensor<1048576xbf16> -> !zero.token
  zero.wait %up phase boundary
  zero.free %new phase boundary : tensor<1048576xbf16>
  zero.return %loss : tensor<f32>
}
