// RUN: not zero-opt %s -split-input-file --zero-partition="stage=2 world-size=4" 2>&1 | FileCheck %s
// Bad options are errors that name the option and the value.
// RUN: not zero-opt %s -split-input-file --zero-partition="stage=4 world-size=4" 2>&1 | FileCheck %s --check-prefix=STAGE
// RUN: not zero-opt %s -split-input-file --zero-partition="stage=1 world-size=0" 2>&1 | FileCheck %s --check-prefix=WS
// RUN: not zero-opt %s -split-input-file --zero-partition="stage=1 alignment=0" 2>&1 | FileCheck %s --check-prefix=ALIGN
// RUN: not zero-opt %s -split-input-file --zero-partition="stage=1 world-size=4 ranks-per-node=3" 2>&1 | FileCheck %s --check-prefix=RPN
// RUN: not zero-opt %s -split-input-file --zero-partition="stage=1 world-size=4 ranks-per-node=-2" 2>&1 | FileCheck %s --check-prefix=RPN-NEG
// RUN: not zero-opt %s -split-input-file --zero-partition="stage=3 world-size=2 muon-group-layers=-1" 2>&1 | FileCheck %s --check-prefix=MGL

// STAGE: error: zero-partition: stage must be 0, 1, 2 or 3, got 4
// WS: error: zero-partition: world-size must be >= 1, got 0
// ALIGN: error: zero-partition: alignment must be >= 1, got 0
// MGL: error: zero-partition: muon-group-layers must be >= 0, got -1
// RPN: error: zero-partition: ranks-per-node 3 must divide world-size 4 (0: every rank on one node)
// RPN-NEG: error: zero-partition: ranks-per-node -2 must divide world-size 4 (0: every rank on one node)

// A global batch of 10 cannot be split over 4 ranks.
// CHECK: partition-invalid.mlir:[[# @LINE + 2]]:1: error: train step @train global batch 10 is not divisible by world-size 4
zero.param @w : tensor<4x3xf32> init zeros
zero.train_step @train(%x: tensor<10x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %w = zero.get_param @w : tensor<4x3xf32>
  %h = nn.matmul %x, %w : tensor<10x4xf32>, tensor<4x3xf32> -> tensor<10x3xf32>
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// A module that already has partitions is not partitioned again.
// CHECK: error: zero-partition: the module is already partitioned
zero.param @w : tensor<4x3xf32> init zeros
zero.partition @flat stage 2 world_size 4 alignment 2 numel 12 padded 16 params [@w] offsets [0]
zero.train_step @train(%x: tensor<2x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 2, world_size = 4, global_batch = 8> {
  %w = zero.get_param @w : tensor<4x3xf32>
  %h = nn.matmul %x, %w : tensor<2x4xf32>, tensor<4x3xf32> -> tensor<2x3xf32>
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}
