// RUN: zero-opt %s -split-input-file --zero-plan-memory --convert-zero-to-runtime | FileCheck %s

// With a topology the manifest's plan carries the bytes rank 0 sends per
// optimizer step by collective kind, within its node and across nodes, as
// the report computes them (computeCommPlan); on one node it has none, so
// single-node manifests are unchanged.

// One node: no plan.comm.
// CHECK-LABEL: module @one_node
// CHECK-NOT: \22comm\22
module @one_node {
  zero.param @w : tensor<4x2xf32> init zeros
  zero.param @b : tensor<2xf32> init zeros
  zero.partition @flat stage 1 world_size 4 alignment 2 numel 10 padded 16 params [@w, @b] offsets [0, 8]
  zero.train_step @train(%x: tensor<2x4xf32>, %dy: tensor<2x2xf32>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 1, world_size = 4, global_batch = 8> {
    %w = zero.get_param @w : tensor<4x2xf32>
    %b = zero.get_param @b : tensor<2xf32>
    %h = nn.matmul %x, %w : tensor<2x4xf32>, tensor<4x2xf32> -> tensor<2x2xf32>
    %y = nn.add %h, %b : tensor<2x2xf32>, tensor<2xf32>
    %dw = nn.matmul %x, %dy transpose_lhs : tensor<2x4xf32>, tensor<2x2xf32> -> tensor<4x2xf32>
    zero.grad @w, %dw : tensor<4x2xf32>
    %db = nn.reduce_sum %dy : tensor<2x2xf32> -> tensor<2xf32>
    zero.grad @b, %db : tensor<2xf32>
    zero.reduce_scatter group @flat in grads [0, 10) phase boundary
    %loss = nn.fill 0.0 : tensor<f32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 4.0 phase boundary : tensor<2xf32>
    %sum = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
    %skip = zero.update_loss_scale %sum phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @flat stats %sum scale %ls skip %skip divisor 4.0 phase boundary : tensor<2xf32>
    zero.all_gather group @flat in params [0, 10) phase post_step
    zero.return %loss : tensor<f32>
  }
}

// -----

// 2 nodes of 2 ranks, fp32: the layout of 10 elements is padded to 16,
// shards of 4, so the reduce-scatter and the all-gather of [0, 10) have
// parts 4, 4, 2, 0: rank 0 sends rank 1's 4 elements within its node and
// rank 2's 2 across (16 and 8 bytes); the all-reduce of the overflow flag
// and norm (2 fp32, parts 1, 1, 0, 0) sends twice rank 1's part within the
// node and nothing across (rank 2's part is empty).
// CHECK-LABEL: module @two_nodes
// CHECK: \22comm\22:{\22all_gather\22:{\22inter_node_bytes\22:8,\22intra_node_bytes\22:16},\22all_reduce\22:{\22inter_node_bytes\22:0,\22intra_node_bytes\22:8},\22reduce_scatter\22:{\22inter_node_bytes\22:8,\22intra_node_bytes\22:16}}
// CHECK-SAME: \22topology\22:{\22hpz_partition_size\22:1,\22mics_shard_size\22:0,\22ranks_per_node\22:2}
module @two_nodes {
  zero.param @w : tensor<4x2xf32> init zeros
  zero.param @b : tensor<2xf32> init zeros
  zero.partition @flat stage 1 world_size 4 alignment 2 numel 10 padded 16 params [@w, @b] offsets [0, 8]
  zero.train_step @train(%x: tensor<2x4xf32>, %dy: tensor<2x2xf32>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 1, world_size = 4, global_batch = 8, ranks_per_node = 2> {
    %w = zero.get_param @w : tensor<4x2xf32>
    %b = zero.get_param @b : tensor<2xf32>
    %h = nn.matmul %x, %w : tensor<2x4xf32>, tensor<4x2xf32> -> tensor<2x2xf32>
    %y = nn.add %h, %b : tensor<2x2xf32>, tensor<2xf32>
    %dw = nn.matmul %x, %dy transpose_lhs : tensor<2x4xf32>, tensor<2x2xf32> -> tensor<4x2xf32>
    zero.grad @w, %dw : tensor<4x2xf32>
    %db = nn.reduce_sum %dy : tensor<2x2xf32> -> tensor<2xf32>
    zero.grad @b, %db : tensor<2xf32>
    zero.reduce_scatter group @flat in grads [0, 10) phase boundary
    %loss = nn.fill 0.0 : tensor<f32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 4.0 phase boundary : tensor<2xf32>
    %sum = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
    %skip = zero.update_loss_scale %sum phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @flat stats %sum scale %ls skip %skip divisor 4.0 phase boundary : tensor<2xf32>
    zero.all_gather group @flat in params [0, 10) phase post_step
    zero.return %loss : tensor<f32>
  }
}
