// The `cpu` preset's ranks are processes on one machine whose swap files
// share its one disk (1 GB/s reading, 1.9 GB/s writing for one process):
// each of N ranks gets 1/N of those rates. A rank's 2 MiB (2097152-byte)
// bf16 parameter shard on NVMe, read before its gather and written back
// after the optimizer, in the report's timeline:
//   one rank:  2097152 / 1e9 = 2097.152 us, 2097152 / 1.9e9 = 1103.764 us
//   two ranks: 2097152 / 0.5e9 = 4194.304 us, 2097152 / 0.95e9 = 2207.528 us
// The GPU presets assume one disk per rank: h100-sxm's 6 GB/s read takes
// 349.525 us at either world size.
// RUN: zero-opt %s --zero-param-gather="offload-param=nvme param-nvme-path=/nvme param-persistence-threshold=0" --zero-optimizer --zero-report="hardware=cpu trace=%t.cpu.json" -o /dev/null > /dev/null
// RUN: FileCheck %s --check-prefix=CPU < %t.cpu.json
// RUN: zero-opt %s --zero-param-gather="offload-param=nvme param-nvme-path=/nvme param-persistence-threshold=0" --zero-optimizer --zero-report="hardware=h100-sxm trace=%t.h100.json" -o /dev/null > /dev/null
// RUN: FileCheck %s --check-prefix=H100 < %t.h100.json
// The report says which rates it assumed.
// RUN: zero-opt %s --zero-param-gather="offload-param=nvme param-nvme-path=/nvme param-persistence-threshold=0" --zero-optimizer --zero-report="hardware=cpu" -o /dev/null | FileCheck %s --check-prefix=CPUJSON
// RUN: zero-opt %s --zero-param-gather="offload-param=nvme param-nvme-path=/nvme param-persistence-threshold=0" --zero-optimizer --zero-report="hardware=cpu format=text" -o /dev/null | FileCheck %s --check-prefix=CPUTEXT
// RUN: zero-opt %s --zero-param-gather="offload-param=nvme param-nvme-path=/nvme param-persistence-threshold=0" --zero-optimizer --zero-report="hardware=h100-sxm format=text" -o /dev/null | FileCheck %s --check-prefix=H100TEXT
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
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 2> {
  %w = zero.get_param @w : tensor<1024x2048xbf16>
  %y = nn.matmul %x, %w : tensor<1x1024xbf16>, tensor<1024x2048xbf16> -> tensor<1x2048xbf16>
  %loss = nn.fill 0.0 : tensor<f32>
  %g = nn.fill 1.0 : tensor<1024x2048xbf16>
  zero.grad @w, %g : tensor<1024x2048xbf16>
  zero.reduce_scatter group @flat [0, 2097152) from %g at [0] : tensor<1024x2048xbf16>
  zero.free %g : tensor<1024x2048xbf16>
  zero.return %loss : tensor<f32>
}
