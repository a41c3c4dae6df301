// RUN: zero-opt %s -split-input-file --zero-moe-aux-counts | FileCheck %s

// Two ranks of 6 rows each: the local expert counts, their sum over the
// ranks right before the loss, and the loss and its gradient given the
// global counts over the global batch's 12 rows.
zero.param @w : tensor<3x4xf32> init zeros
zero.partition @flat stage 0 world_size 2 alignment 2 numel 12 padded 12 params [@w] offsets [0]
// CHECK-LABEL: zero.train_step @divided
zero.train_step @divided(%x: tensor<6x3xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 2, global_batch = 12> {
  %w = zero.get_param @w : tensor<3x4xf32>
  // CHECK: %[[L:.*]] = nn.matmul
  %l = nn.matmul %x, %w : tensor<6x3xf32>, tensor<3x4xf32> -> tensor<6x4xf32>
  // CHECK-NEXT: %[[C:.*]] = nn.moe_expert_counts %[[L]] top_k 2 : tensor<6x4xf32> -> tensor<4xi64>
  // CHECK-NEXT: %[[G:.*]] = zero.all_reduce sum %[[C]] group @flat : tensor<4xi64> -> tensor<4xi64>
  // CHECK-NEXT: %[[AUX:.*]] = nn.moe_aux_loss %[[L]] counts(%[[G]] : tensor<4xi64>) rows 12 top_k 2 : tensor<6x4xf32> -> tensor<f32>
  %aux = nn.moe_aux_loss %l top_k 2 : tensor<6x4xf32> -> tensor<f32>
  %seed = nn.fill 1.0 {zero.loss_seed} : tensor<f32>
  // CHECK: nn.moe_aux_loss_grad %[[L]], %{{.*}} counts(%[[G]] : tensor<4xi64>) rows 12 top_k 2 : tensor<6x4xf32>, tensor<f32>
  %dl = nn.moe_aux_loss_grad %l, %seed top_k 2 : tensor<6x4xf32>, tensor<f32>
  %dw = nn.matmul %x, %dl transpose_lhs : tensor<6x3xf32>, tensor<6x4xf32> -> tensor<3x4xf32>
  zero.grad @w, %dw : tensor<3x4xf32>
  // CHECK: zero.return %[[AUX]] : tensor<f32>
  zero.return %aux : tensor<f32>
}

// -----

// One rank, one micro step: the loss counts its own rows, unchanged.
zero.param @w : tensor<3x4xf32> init zeros
zero.partition @flat stage 0 world_size 1 alignment 2 numel 12 padded 12 params [@w] offsets [0]
// CHECK-LABEL: zero.train_step @whole
// CHECK-NOT: nn.moe_expert_counts
// CHECK-NOT: zero.all_reduce
// CHECK: nn.moe_aux_loss %{{.*}} top_k 2 : tensor<6x4xf32> -> tensor<f32>
// CHECK: nn.moe_aux_loss_grad %{{.*}}, %{{.*}} top_k 2 : tensor<6x4xf32>, tensor<f32>
zero.train_step @whole(%x: tensor<6x3xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 6> {
  %w = zero.get_param @w : tensor<3x4xf32>
  %l = nn.matmul %x, %w : tensor<6x3xf32>, tensor<3x4xf32> -> tensor<6x4xf32>
  %aux = nn.moe_aux_loss %l top_k 2 : tensor<6x4xf32> -> tensor<f32>
  %seed = nn.fill 1.0 {zero.loss_seed} : tensor<f32>
  %dl = nn.moe_aux_loss_grad %l, %seed top_k 2 : tensor<6x4xf32>, tensor<f32>
  %dw = nn.matmul %x, %dl transpose_lhs : tensor<6x3xf32>, tensor<6x4xf32> -> tensor<3x4xf32>
  zero.grad @w, %dw : tensor<3x4xf32>
  zero.return %aux : tensor<f32>
}

// -----

// Stage 3 on four ranks: the counts are summed over the first group's
// data-parallel world (every group's is the world), 4 x 2 rows.
zero.param @h.0.w : tensor<3x4xf32> init zeros
zero.partition @h.0 stage 3 world_size 4 alignment 2 numel 12 padded 16 params [@h.0.w] offsets [0]
// CHECK-LABEL: zero.train_step @stage3
// CHECK: %[[G:.*]] = zero.all_reduce sum %{{.*}} group @h.0 : tensor<4xi64> -> tensor<4xi64>
// CHECK-NEXT: nn.moe_aux_loss %{{.*}} counts(%[[G]] : tensor<4xi64>) rows 8 top_k 1
zero.train_step @stage3(%x: tensor<2x3xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 8> {
  %w = nn.fill 1.0 : tensor<3x4xf32>
  %l = nn.matmul %x, %w : tensor<2x3xf32>, tensor<3x4xf32> -> tensor<2x4xf32>
  %aux = nn.moe_aux_loss %l top_k 1 : tensor<2x4xf32> -> tensor<f32>
  zero.return %aux : tensor<f32>
}

// -----

// Expert parallelism (4 ranks, ep 2) with the experts' partition first:
// the counts are summed over the world, so the all-reduce names the dense
// partition, not the expert partition (whose rank set is the 2 ranks that
// hold the same experts).
zero.param @e.w : tensor<2x3x4xf32> init zeros
zero.param @d.w : tensor<3x4xf32> init zeros
zero.partition @e stage 3 world_size 2 alignment 2 numel 24 padded 24 params [@e.w] offsets [0] expert
zero.partition @d stage 3 world_size 4 alignment 2 numel 12 padded 16 params [@d.w] offsets [0]
// CHECK-LABEL: zero.train_step @experts_first
// CHECK: %[[G:.*]] = zero.all_reduce sum %{{.*}} group @d : tensor<4xi64> -> tensor<4xi64>
// CHECK-NEXT: nn.moe_aux_loss %{{.*}} counts(%[[G]] : tensor<4xi64>) rows 8 top_k 1
zero.train_step @experts_first(%x: tensor<2x3xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 8, mesh = #zero.mesh<[data = 2, expert = 2]>> {
  %w = nn.fill 1.0 : tensor<3x4xf32>
  %l = nn.matmul %x, %w : tensor<2x3xf32>, tensor<3x4xf32> -> tensor<2x4xf32>
  %aux = nn.moe_aux_loss %l top_k 1 : tensor<2x4xf32> -> tensor<f32>
  zero.return %aux : tensor<f32>
}
