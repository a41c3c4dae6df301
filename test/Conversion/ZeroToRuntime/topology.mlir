// RUN: zero-opt %s -split-input-file --convert-zero-to-runtime | FileCheck %s

// The manifest carries the schedule's topology only when it differs from
// one node without hpZ or MiCS, so single-node programs keep their
// manifests (and schedule hashes).

// CHECK-LABEL: module @one_node
// CHECK-NOT:   topology
// CHECK-LABEL: module @two_nodes

module @one_node {
  zero.param @w : tensor<4x2xf32> init zeros
  zero.param @b : tensor<2xf32> init zeros
  zero.partition @flat stage 1 world_size 2 alignment 2 numel 10 padded 12 params [@w, @b] offsets [0, 8]
      {zero.buffers = #zero.buffer_offsets<params = 0, grads = 64, exp_avg = 128, exp_avg_sq = 192>}
  zero.train_step @train(%x: tensor<2x4xf32>, %dy: tensor<2x2xf32>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 1, world_size = 2, global_batch = 4>
      attributes {zero.input_offsets = array<i64: 0, 64>,
                  zero.plan = #zero.memory_plan<persistent_bytes = 256, arena_bytes = 256, scratch_bytes = 0, peak_bytes = 512>} {
    %w = zero.get_param @w : tensor<4x2xf32>
    %b = zero.get_param @b : tensor<2xf32>
    %h = nn.matmul %x, %w {zero.alloc = array<i64: 128>} : tensor<2x4xf32>, tensor<4x2xf32> -> tensor<2x2xf32>
    %y = nn.add %h, %b {zero.alloc = array<i64: 192>} : tensor<2x2xf32>, tensor<2xf32>
    %flat = nn.reshape %y : tensor<2x2xf32> -> tensor<4xf32>
    %z = nn.scale %flat by 2.0 {zero.alloc = array<i64: 128>} : tensor<4xf32>
    %dw = nn.matmul %x, %dy transpose_lhs : tensor<2x4xf32>, tensor<2x2xf32> -> tensor<4x2xf32>
    zero.grad @w, %dw : tensor<4x2xf32>
    %db = nn.reduce_sum %dy : tensor<2x2xf32> -> tensor<2xf32>
    zero.grad @b, %db : tensor<2xf32>
    zero.reduce_scatter group @flat in grads [0, 10) phase boundary
    %loss = nn.fill 0.0 {zero.alloc = array<i64: 0>} : tensor<f32>
    %ls = zero.loss_scale phase boundary {zero.alloc = array<i64: 64>} : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 2.0 phase boundary {zero.alloc = array<i64: 128>} : tensor<2xf32>
    %sum = zero.all_reduce overflow_norm %st group @flat phase boundary {zero.alloc = array<i64: 192>} : tensor<2xf32> -> tensor<2xf32>
    %skip = zero.update_loss_scale %sum phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @flat stats %sum scale %ls skip %skip divisor 2.0 phase boundary : tensor<2xf32>
    zero.all_gather group @flat in params [0, 10) phase post_step
    zero.return %loss : tensor<f32>
  }
}

// -----

// Two nodes of one rank: every field of the topology is written.

// CHECK:       \22topology\22:{\22hpz_partition_size\22:1,\22mics_shard_size\22:0,\22ranks_per_node\22:1}

module @two_nodes {
  zero.param @w : tensor<4x2xf32> init zeros
  zero.param @b : tensor<2xf32> init zeros
  zero.partition @flat stage 1 world_size 2 alignment 2 numel 10 padded 12 params [@w, @b] offsets [0, 8]
      {zero.buffers = #zero.buffer_offsets<params = 0, grads = 64, exp_avg = 128, exp_avg_sq = 192>}
  zero.train_step @train(%x: tensor<2x4xf32>, %dy: tensor<2x2xf32>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 1, world_size = 2, global_batch = 4, ranks_per_node = 1>
      attributes {zero.input_offsets = array<i64: 0, 64>,
                  zero.plan = #zero.memory_plan<persistent_bytes = 256, arena_bytes = 256, scratch_bytes = 0, peak_bytes = 512>} {
    %w = zero.get_param @w : tensor<4x2xf32>
    %b = zero.get_param @b : tensor<2xf32>
    %h = nn.matmul %x, %w {zero.alloc = array<i64: 128>} : tensor<2x4xf32>, tensor<4x2xf32> -> tensor<2x2xf32>
    %y = nn.add %h, %b {zero.alloc = array<i64: 192>} : tensor<2x2xf32>, tensor<2xf32>
    %flat = nn.reshape %y : tensor<2x2xf32> -> tensor<4xf32>
    %z = nn.scale %flat by 2.0 {zero.alloc = array<i64: 128>} : tensor<4xf32>
    %dw = nn.matmul %x, %dy transpose_lhs : tensor<2x4xf32>, tensor<2x2xf32> -> tensor<4x2xf32>
    zero.grad @w, %dw : tensor<4x2xf32>
    %db = nn.reduce_sum %dy : tensor<2x2xf32> -> tensor<2xf32>
    zero.grad @b, %db : tensor<2xf32>
    zero.reduce_scatter group @flat in grads [0, 10) phase boundary
    %loss = nn.fill 0.0 {zero.alloc = array<i64: 0>} : tensor<f32>
    %ls = zero.loss_scale phase boundary {zero.alloc = array<i64: 64>} : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 2.0 phase boundary {zero.alloc = array<i64: 128>} : tensor<2xf32>
    %sum = zero.all_reduce overflow_norm %st group @flat phase boundary {zero.alloc = array<i64: 192>} : tensor<2xf32> -> tensor<2xf32>
    %skip = zero.update_loss_scale %sum phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @flat stats %sum scale %ls skip %skip divisor 2.0 phase boundary : tensor<2xf32>
    zero.all_gather group @flat in params [0, 10) phase post_step
    zero.return %loss : tensor<f32>
  }
}
