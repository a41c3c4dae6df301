// RUN: not zero-opt %s -split-input-file --zero-grad-sync="gradient-accumulation-steps=3" 2>&1 | FileCheck %s
// RUN: not zero-opt %s -split-input-file --zero-grad-sync="reduce-bucket-size=0" 2>&1 | FileCheck %s --check-prefix=ZERO

// ZERO: error: zero-grad-sync: reduce-bucket-size must be positive, got 0

// A global batch of 8 on 2 ranks cannot be cut into 3 micro batches.
// CHECK: grad-sync-invalid.mlir:[[# @LINE + 3]]:1: error: train step @train global batch 8 is not divisible by world-size 2 x gradient-accumulation-steps 3 = 6
zero.param @w : tensor<4xf32> init zeros
zero.partition @flat stage 2 world_size 2 alignment 2 numel 4 padded 4 params [@w] offsets [0]
zero.train_step @train(%x: tensor<4x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 8> {
  %loss = nn.fill 0.0 : tensor<f32>
  %g = nn.fill 1.0 : tensor<4xf32>
  zero.grad @w, %g : tensor<4xf32>
  zero.return %loss : tensor<f32>
}

// -----

// Gradient synchronisation needs the layout of zero-partition.
// CHECK: grad-sync-invalid.mlir:[[# @LINE + 2]]:1: error: train step @train: zero-grad-sync needs a partitioned train step (run zero-partition first)
zero.param @w : tensor<4xf32> init zeros
zero.train_step @train(%x: tensor<4x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  %g = nn.fill 1.0 : tensor<4xf32>
  zero.grad @w, %g : tensor<4xf32>
  zero.return %loss : tensor<f32>
}
