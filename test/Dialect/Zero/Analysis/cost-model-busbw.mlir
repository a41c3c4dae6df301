// All-gathers and reduce-scatters within a node at the bus bandwidth that
// nccl-tests published for 8 GPUs at their size (docs/HardwarePresets.md,
// "Collectives by message size"): a ring of q members over an array of B
// bytes takes (q-1)/q x B / busbw(8 B / q), the sweep interpolated in log2
// of the size and its latency included; at most the preset's ring plateau.
// All-reduces and presets without a sweep (l4) keep latency + flat busbw.
// RUN: zero-opt %s -split-input-file --zero-report -o /dev/null | FileCheck %s
// RUN: zero-opt %s -split-input-file --zero-report="hardware=a100-80gb" -o /dev/null | FileCheck %s --check-prefix=A100
// RUN: zero-opt %s -split-input-file --zero-report="hardware=h200-sxm" -o /dev/null | FileCheck %s --check-prefix=H200
// RUN: zero-opt %s -split-input-file --zero-report="hardware=l4" -o /dev/null | FileCheck %s --check-prefix=FLAT

// A reduce-scatter of 512 B over 8 ranks reads the sweep at 512 B, below
// its first point: the time stays the 1 KiB point's, latency-bound.
// h100-sxm: 7/8 x 1024 / 0.07e9 = 12.8000 us (the flat model: 7 x 1.8 +
// 7/8 x 512 / 365e9 = 12.6012 us); a100-80gb: 7/8 x 1024 / 0.04e9 =
// 22.4000 us; l4, flat: 7 x 1.8 + 7/8 x 512 / 25.92e9 = 12.6173 us.
// CHECK: "exposed_comm_ms": 0.012800{{[0-9]*}},
// A100: "exposed_comm_ms": 0.0224{{[0-9]*}},
// FLAT: "exposed_comm_ms": 0.012617{{[0-9]*}},
zero.param @w : tensor<16x16xf32> init zeros compute bf16
zero.partition @flat stage 2 world_size 8 alignment 2 numel 256 padded 256 params [@w] offsets [0]
zero.train_step @tiny(%g: tensor<16x16xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 8, global_batch = 128> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.grad @w, %g : tensor<16x16xbf16>
  zero.reduce_scatter group @flat [0, 256) from %g at [0] : tensor<16x16xbf16>
  zero.free %g : tensor<16x16xbf16>
  zero.return %loss : tensor<f32>
}

// -----

// An all-gather of 3 MiB over 8 ranks, between the sweep's 2 MiB (81.93
// GB/s) and 4 MiB (128.73 GB/s) on h100-sxm: 81.93 + log2(1.5) x 46.80 =
// 109.3062 GB/s, 7/8 x 3145728 / 109.3062e9 = 25.1817 us.
// CHECK: "exposed_comm_ms": 0.025181{{[0-9]*}},
zero.param @w : tensor<1536x1024xf32> init zeros compute bf16
zero.partition @flat stage 2 world_size 8 alignment 2 numel 1572864 padded 1572864 params [@w] offsets [0]
zero.train_step @gather(%x: tensor<1x1024xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 8, global_batch = 8> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.all_gather group @flat in params [0, 1572864)
  zero.return %loss : tensor<f32>
}

// -----

// A reduce-scatter of 128 MiB over 4 ranks reads the sweep at 256 MiB,
// where NVLink SHARP's all-reduce (423.38 GB/s on H100, 432.24 on H200)
// is above the ring's plateau: h100-sxm 3/4 x 134217728 / 365e9 =
// 275.7899 us, h200-sxm / 362e9 = 278.0754 us; a100-80gb at its sweep's
// 213.87 GB/s: 470.6752 us.
// CHECK: "exposed_comm_ms": 0.275789{{[0-9]*}},
// H200: "exposed_comm_ms": 0.278075{{[0-9]*}},
// A100: "exposed_comm_ms": 0.470675{{[0-9]*}},
zero.param @w : tensor<8192x8192xf32> init zeros compute bf16
zero.partition @flat stage 2 world_size 4 alignment 2 numel 67108864 padded 67108864 params [@w] offsets [0]
zero.train_step @big(%g: tensor<8192x8192xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 4, global_batch = 32768> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.grad @w, %g : tensor<8192x8192xbf16>
  zero.reduce_scatter group @flat [0, 67108864) from %g at [0] : tensor<8192x8192xbf16>
  zero.free %g : tensor<8192x8192xbf16>
  zero.return %loss : tensor<f32>
}
