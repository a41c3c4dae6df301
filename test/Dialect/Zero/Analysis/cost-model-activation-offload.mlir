// The cost model of activation offload, worked out by hand from the
// h100-sxm preset (HBM 2.97 TB/s, 3.3 us per kernel, pinned copies at 51.2
// GB/s on the copy stream), for one 1 MiB activation:
//   %act, 1 MiB:    3.3 + 1048576 / 2.97e12 = 3.6531 us          ->  3.6531
//   its offload: 3.3 + 1048576 / 51.2e9 = 23.78 us on the copy stream,
//     from 3.6531 to 27.4331, under the next kernel:
//   %big, 128 MiB: 3.3 + 134217728 / 2.97e12 = 48.4912 us      -> 52.1443
//   wait for the offload: done at 27.4331, nothing exposed;
//   %loss:                                  3.3 us              -> 55.4443
//   the reload, waited at once: 23.78 us exposed                -> 79.2243
//   %sum reads 1 MiB: 3.3 + 1049600 / 2.97e12 = 3.6534 us         -> 82.8777
// Exposed transfer: 23.78 us; the host peak is the one host copy.
// RUN: zero-opt %s --zero-report="hardware=h100-sxm" -o /dev/null | FileCheck %s
// With a 128 MiB kernel between the reload and its wait, the reload is
// hidden too.
// RUN: sed -e 's/^  zero.wait %reload$/  %big2 = nn.fill 1.0 : tensor<1024x32768xf32>\n  zero.wait %reload/' %s \
// RUN:   | zero-opt --zero-report="hardware=h100-sxm" -o /dev/null | FileCheck %s --check-prefix=HIDDEN

// CHECK: "exposed_transfer_ms": 0.02377{{[0-9]*}},
// CHECK: "host_peak_bytes": 1048576,
// CHECK: "predicted_step_ms": 0.08287{{[0-9]*}},
// HIDDEN: "exposed_transfer_ms": 0,

zero.param @w : tensor<4xf32> init zeros
zero.partition @flat stage 0 world_size 1 alignment 1 numel 4 padded 4 params [@w] offsets [0]
zero.train_step @step(%x: tensor<2x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 2> {
  %act = nn.fill 1.0 : tensor<1024x256xf32>
  %host, %offload = zero.offload_activation %act : tensor<1024x256xf32> -> !zero.token
  %big = nn.fill 1.0 : tensor<1024x32768xf32>
  zero.wait %offload
  %loss = nn.fill 0.0 : tensor<f32>
  %back, %reload = zero.reload_activation %host : tensor<1024x256xf32> -> !zero.token
  zero.wait %reload
  %sum = nn.reduce_sum %back : tensor<1024x256xf32> -> tensor<256xf32>
  zero.return %loss : tensor<f32>
}
