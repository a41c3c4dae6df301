// RUN: not zero-opt %s -split-input-file --zero-grad-sync="quantized-gradients=1" 2>&1 | FileCheck %s
// RUN: not zero-opt %s -split-input-file --zero-grad-sync="quantized-gradients=1 reduce-scatter=false" 2>&1 | FileCheck %s --check-prefix=REDUCE

// What zero-grad-sync quantized-gradients (ZeRO++ qgZ) refuses, as
// DeepSpeed: another stage than 3, reduce-scatter=false, MiCS.

// CHECK: grad-sync-quantized-invalid.mlir:[[# @LINE + 3]]:1: error: 'zero.train_step' op zero-grad-sync: quantized-gradients (qgZ) needs stage 3, the step is stage 2
zero.param @w : tensor<2x4xf32> init zeros
zero.partition @l stage 2 world_size 4 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.train_step @stage2(%x: tensor<1x2xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 2, world_size = 4, global_batch = 4, ranks_per_node = 2> {
  %loss = nn.fill 0.0 : tensor<f32>
  %g = nn.fill 1.0 : tensor<2x4xf32>
  zero.grad @w, %g : tensor<2x4xf32>
  zero.return %loss : tensor<f32>
}

// -----

// REDUCE: grad-sync-quantized-invalid.mlir:[[# @LINE + 3]]:1: error: 'zero.train_step' op zero-grad-sync: quantized-gradients (qgZ) replaces the gradient reduce-scatter; it does not combine with reduce-scatter=false
zero.param @w : tensor<2x4xf32> init zeros
zero.partition @l stage 3 world_size 4 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.train_step @reduce(%x: tensor<1x2xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 4, ranks_per_node = 2> {
  %loss = nn.fill 0.0 : tensor<f32>
  %g = nn.fill 1.0 : tensor<2x4xf32>
  zero.grad @w, %g : tensor<2x4xf32>
  zero.return %loss : tensor<f32>
}

// -----

// CHECK: grad-sync-quantized-invalid.mlir:[[# @LINE + 3]]:1: error: 'zero.train_step' op zero-grad-sync: quantized-gradients (qgZ) does not combine with MiCS (mics_shard_size 2): DeepSpeed's MiCS reduces with the plain reduce-scatter
zero.param @w : tensor<2x4xf32> init zeros
zero.partition @l stage 3 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.train_step @mics(%x: tensor<1x2xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 4, ranks_per_node = 1, mesh = #zero.mesh<[data = 2, mics = 2]>> {
  %loss = nn.fill 0.0 : tensor<f32>
  %g = nn.fill 1.0 : tensor<2x4xf32>
  zero.grad @w, %g : tensor<2x4xf32>
  zero.return %loss : tensor<f32>
}
