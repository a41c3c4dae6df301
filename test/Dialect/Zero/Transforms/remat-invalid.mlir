// RUN: not zero-opt %s -split-input-file --zero-remat=policy=layer 2>&1 | FileCheck %s
// Bad options are errors that name the option and the value.
// RUN: not zero-opt %s -split-input-file --zero-remat=policy=full 2>&1 | FileCheck %s --check-prefix=POLICY
// RUN: not zero-opt %s -split-input-file --zero-remat=policy=auto 2>&1 | FileCheck %s --check-prefix=AUTO
// RUN: not zero-opt %s -split-input-file --zero-remat="policy=layer blocks=0,2" 2>&1 | FileCheck %s --check-prefix=BLOCK
// RUN: not zero-opt %s -split-input-file --zero-remat="policy=layer blocks=0 first-blocks=1" 2>&1 | FileCheck %s --check-prefix=BOTH
// RUN: not zero-opt %s -split-input-file --zero-remat="policy=layer first-blocks=-2" 2>&1 | FileCheck %s --check-prefix=FIRST

// POLICY: error: zero-remat: policy must be none, layer, selective or op, got 'full'
// AUTO: error: zero-remat: policy must be none, layer, selective or op, got 'auto' (auto is zero-pipeline's remat=auto, which needs a memory-budget)

// A step without a backward has nothing to recompute for.
// CHECK: remat-invalid.mlir:[[# @LINE + 3]]:1: error: train step @forward: zero-remat needs a differentiated train step (run zero-autodiff first)
// BLOCK: error: train step @forward: zero-remat needs a differentiated train step
zero.param @h.0.w : tensor<4x3xf32> init zeros
zero.train_step @forward(%x: tensor<2x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %w = zero.get_param @h.0.w : tensor<4x3xf32>
  %h = nn.matmul %x, %w : tensor<2x4xf32>, tensor<4x3xf32> -> tensor<2x3xf32>
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// After zero-partition the stage-3 gathers exist already and would not
// cover the recomputed ops.
// CHECK: remat-invalid.mlir:[[# @LINE + 4]]:1: error: train step @partitioned: zero-remat runs before zero-partition
// BLOCK: error: train step @partitioned: zero-remat runs before zero-partition
zero.param @h.0.w : tensor<4xf32> init zeros
zero.partition @h.0 stage 3 world_size 2 alignment 2 numel 4 padded 4 params [@h.0.w] offsets [0]
zero.train_step @partitioned(%x: tensor<1x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 2> {
  %g = zero.all_gather group @h.0 : tensor<4xf32>
  %w = zero.get_param @h.0.w from %g : tensor<4xf32> -> tensor<4xf32>
  %y = nn.mul %x, %w : tensor<1x4xf32>, tensor<4xf32>
  zero.free %g : tensor<4xf32>
  %loss = nn.fill 0.0 : tensor<f32>
  %seed = nn.fill 1.0 {zero.loss_seed} : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// A model without numbered layers (an MLP) has no block: a warning, and the
// step is unchanged. With blocks=0,2 the index names the blocks that exist.
// CHECK: remat-invalid.mlir:[[# @LINE + 3]]:1: warning: train step @mlp: zero-remat found no transformer block (a parameter group named like transformer.h.N) to recompute
// BLOCK: warning: train step @mlp: zero-remat found no transformer block
zero.param @fc1.w : tensor<4xf32> init zeros
zero.train_step @mlp(%x: tensor<2x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %w = zero.get_param @fc1.w : tensor<4xf32>
  %y = nn.mul %x, %w : tensor<2x4xf32>, tensor<4xf32>
  %loss = nn.fill 0.0 : tensor<f32>
  %seed = nn.fill 1.0 {zero.loss_seed} : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// CHECK-NOT: error
// BOTH: error: train step @two: zero-remat: give blocks or first-blocks, not both
// FIRST: error: train step @two: zero-remat: first-blocks must be >= 0 (or -1: unset), got -2
// BLOCK: remat-invalid.mlir:[[# @LINE + 3]]:1: error: train step @two: zero-remat: block 2 does not exist (the step has 2 blocks, 0-1)
zero.param @h.0.w : tensor<4xf32> init zeros
zero.param @h.1.w : tensor<4xf32> init zeros
zero.train_step @two(%x: tensor<2x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %w0 = zero.get_param @h.0.w : tensor<4xf32>
  %y0 = nn.mul %x, %w0 : tensor<2x4xf32>, tensor<4xf32>
  %w1 = zero.get_param @h.1.w : tensor<4xf32>
  %y1 = nn.mul %y0, %w1 : tensor<2x4xf32>, tensor<4xf32>
  %loss = nn.fill 0.0 : tensor<f32>
  %seed = nn.fill 1.0 {zero.loss_seed} : tensor<f32>
  zero.return %loss : tensor<f32>
}
