// RUN: zero-opt %s -split-input-file --zero-moe-aux-counts -verify-diagnostics

// What zero-moe-aux-counts refuses, one case each.

// Gradient accumulation: the first micro step's backward would need the
// counts of the second.
zero.param @w : tensor<3x4xf32> init zeros
zero.partition @flat stage 0 world_size 1 alignment 2 numel 12 padded 12 params [@w] offsets [0]
zero.train_step @accumulated(%x: tensor<6x3xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 12, accumulation_steps = 2> {
  %w = zero.get_param @w : tensor<3x4xf32>
  %l = nn.matmul %x, %w : tensor<6x3xf32>, tensor<3x4xf32> -> tensor<6x4xf32>
  // expected-error @+1 {{'nn.moe_aux_loss' op (the load-balancing loss) is the global batch's: its expert counts are summed over the ranks, which is not supported with gradient accumulation (a micro step's backward would need the later micro steps' expert counts)}}
  %aux = nn.moe_aux_loss %l top_k 2 : tensor<6x4xf32> -> tensor<f32>
  zero.return %aux : tensor<f32>
}

// -----

// A step that is not partitioned yet.
zero.param @w : tensor<3x4xf32> init zeros
// expected-error @+1 {{'zero.train_step' op zero-moe-aux-counts needs the step's #zero.schedule (zero-partition and zero-grad-sync first)}}
zero.train_step @unscheduled(%x: tensor<6x3xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %w = zero.get_param @w : tensor<3x4xf32>
  %l = nn.matmul %x, %w : tensor<6x3xf32>, tensor<3x4xf32> -> tensor<6x4xf32>
  %aux = nn.moe_aux_loss %l top_k 2 : tensor<6x4xf32> -> tensor<f32>
  zero.return %aux : tensor<f32>
}

// -----

// Only an expert partition: its rank set is the ranks holding the same
// experts, not the world that sums the counts.
zero.param @e.w : tensor<2x3x4xf32> init zeros
zero.partition @e stage 0 world_size 1 alignment 2 numel 24 padded 24 params [@e.w] offsets [0] expert
// expected-error @+1 {{'zero.train_step' op zero-moe-aux-counts needs a dense (non-expert) partition, whose data-parallel world sums the counts}}
zero.train_step @only_experts(%x: tensor<2x3xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 2, global_batch = 4, mesh = #zero.mesh<[data = 1, expert = 2]>> {
  %w = nn.fill 1.0 : tensor<3x4xf32>
  %l = nn.matmul %x, %w : tensor<2x3xf32>, tensor<3x4xf32> -> tensor<2x4xf32>
  %aux = nn.moe_aux_loss %l top_k 1 : tensor<2x4xf32> -> tensor<f32>
  zero.return %aux : tensor<f32>
}
