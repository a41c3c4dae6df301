// RUN: zero-opt %s -split-input-file | FileCheck %s
// RUN: zero-opt %s -split-input-file --mlir-print-op-generic | zero-opt | FileCheck %s

// ZeRO++ qgZ: a quantized gradient reduce-scatter round-trips, synchronous
// and with a token, in bf16 and f32, beside a plain one.
// CHECK-LABEL: zero.train_step @qgz
// CHECK: zero.reduce_scatter group @l0 [0, 8) quantized from %{{.*}} at [0] : tensor<2x4xbf16>
// CHECK-NEXT: %[[T:.*]] = zero.reduce_scatter group @l0 [0, 8) quantized from %{{.*}} at [0] : tensor<2x4xbf16> -> !zero.token
// CHECK-NEXT: zero.wait %[[T]]
// CHECK-NEXT: zero.reduce_scatter group @l0 [0, 8) from %{{.*}} at [0] : tensor<2x4xbf16>
zero.param @w : tensor<2x4xbf16> init zeros
zero.partition @l0 stage 3 world_size 4 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.train_step @qgz(%x: tensor<1x2xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 4, ranks_per_node = 2> {
  %g = nn.fill 0.0 : tensor<2x4xbf16>
  zero.reduce_scatter group @l0 [0, 8) quantized from %g at [0] : tensor<2x4xbf16>
  %t = zero.reduce_scatter group @l0 [0, 8) quantized from %g at [0] : tensor<2x4xbf16> -> !zero.token
  zero.wait %t
  zero.reduce_scatter group @l0 [0, 8) from %g at [0] : tensor<2x4xbf16>
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// CHECK-LABEL: zero.train_step @qgz_f32
// CHECK: zero.reduce_scatter group @l0 [0, 8) quantized from %{{.*}} at [0] : tensor<2x4xf32>
zero.param @w : tensor<2x4xf32> init zeros
zero.partition @l0 stage 3 world_size 4 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.train_step @qgz_f32(%x: tensor<1x2xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 4, ranks_per_node = 1> {
  %g = nn.fill 0.0 : tensor<2x4xf32>
  zero.reduce_scatter group @l0 [0, 8) quantized from %g at [0] : tensor<2x4xf32>
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}
