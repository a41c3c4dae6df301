// zero-partition records ranks-per-node in the step's schedule, and
// zero-grad-sync keeps it when it records the accumulation steps; 0 (the
// default: every rank on one node) is not printed.
// RUN: zero-opt %s -split-input-file --zero-partition="stage=2 world-size=4 ranks-per-node=2" | FileCheck %s --check-prefix=NODES
// RUN: zero-opt %s -split-input-file --zero-partition="stage=2 world-size=4 ranks-per-node=2" --zero-grad-sync="gradient-accumulation-steps=2" | FileCheck %s --check-prefix=SYNC
// RUN: zero-opt %s -split-input-file --zero-partition="stage=2 world-size=4" | FileCheck %s --check-prefix=ONE

// NODES-LABEL: zero.train_step @train
// NODES: schedule #zero.schedule<stage = 2, world_size = 4, global_batch = 8, ranks_per_node = 2>
// SYNC-LABEL: zero.train_step @train
// SYNC: schedule #zero.schedule<stage = 2, world_size = 4, global_batch = 8, accumulation_steps = 2, ranks_per_node = 2>
// ONE-LABEL: zero.train_step @train
// ONE: schedule #zero.schedule<stage = 2, world_size = 4, global_batch = 8>
zero.param @w : tensor<4x3xf32> init zeros
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %w = zero.get_param @w : tensor<4x3xf32>
  %h = nn.matmul %x, %w : tensor<8x4xf32>, tensor<4x3xf32> -> tensor<8x3xf32>
  %loss = nn.fill 0.0 : tensor<f32>
  %gw = nn.fill 0.0 : tensor<4x3xf32>
  zero.grad @w, %gw : tensor<4x3xf32>
  zero.return %loss : tensor<f32>
}
