// RUN: zero-opt %s -split-input-file --zero-verify-schedule -o /dev/null
// RUN: zero-opt %s -split-input-file --zero-plan-memory --convert-zero-to-runtime | FileCheck %s
// RUN: zero-opt %s -split-input-file --zero-report -o /dev/null | FileCheck %s --check-prefix=REPORT

// zero.all_to_all over the sequence-parallel group (DP 2 x SP 2 on 4 ranks,
// sequence_parallel = 2): the call names ZRT_RANKS_SEQUENCE (4), its
// chunks are halves (P = 2, not the world's 4), and the bytes it plans are
// those of the 2 ranks of rank 0's group {0, 1}.

// On 2 nodes of 2 ranks the group is one node's: %x's 32 bytes send one
// 16-byte chunk and %s's 256 one of 128, all within the node.
// CHECK-LABEL: llvm.func @zero_micro_step
// CHECK:      %[[RS:.*]] = llvm.mlir.constant(4 : i32) : i32
// CHECK-NEXT: %[[DT:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK:      %[[SO:.*]] = llvm.mlir.constant(2 : i64) : i64
// CHECK-NEXT: %[[SI:.*]] = llvm.mlir.constant(2 : i64) : i64
// CHECK-NEXT: %[[CO:.*]] = llvm.mlir.constant(1 : i64) : i64
// CHECK-NEXT: %[[CI:.*]] = llvm.mlir.constant(4 : i64) : i64
// CHECK-NEXT: %[[SL:.*]] = llvm.mlir.constant(-1 : i32) : i32
// CHECK-NEXT: llvm.call @zrt_ctx_all_to_all(%arg0, %[[RS]], %[[DT]], %{{.*}}, %{{.*}}, %{{.*}}, %[[SO]], %[[SI]], %[[CO]], %[[CI]], %[[SL]])
// CHECK:      %[[RS2:.*]] = llvm.mlir.constant(4 : i32) : i32
// CHECK:      llvm.call @zrt_ctx_all_to_all(%arg0, %[[RS2]],
// CHECK: \22all_to_all\22:{\22inter_node_bytes\22:0,\22intra_node_bytes\22:144}
// REPORT-LABEL: "all_to_all": {
// REPORT-NEXT:   "inter_node": 0,
// REPORT-NEXT:   "intra_node": 144
// REPORT:      "all_to_all": 2,
module @sequence_one_node {
  zero.param @w : tensor<4x2xf32> init zeros
  zero.param @b : tensor<2xf32> init zeros
  zero.partition @flat stage 1 world_size 4 alignment 2 numel 10 padded 16 params [@w, @b] offsets [0, 8]
  zero.train_step @train(%x: tensor<2x4xf32>, %dy: tensor<2x2xf32>, %s: tensor<2x8x4xf32>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 1, world_size = 4, global_batch = 4, ranks_per_node = 2, mesh = #zero.mesh<[data = 2, sequence = 2]>> {
    %w = zero.get_param @w : tensor<4x2xf32>
    %b = zero.get_param @b : tensor<2xf32>
    %a = zero.all_to_all %x split 1 concat 0 over sequence : tensor<2x4xf32> -> tensor<4x2xf32>
    %c, %t = zero.all_to_all %s split 2 concat 1 over sequence : tensor<2x8x4xf32> -> tensor<2x16x2xf32>, !zero.token
    zero.wait %t
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

// On 4 nodes of 1 rank the group's 2 ranks are on 2 nodes: the same chunks
// cross between them.
// CHECK-LABEL: llvm.func @zero_micro_step
// CHECK: \22all_to_all\22:{\22inter_node_bytes\22:144,\22intra_node_bytes\22:0}
// REPORT-LABEL: "all_to_all": {
// REPORT-NEXT:   "inter_node": 144,
// REPORT-NEXT:   "intra_node": 0
// REPORT:      "all_to_all": 2,
module @sequence_two_nodes {
  zero.param @w : tensor<4x2xf32> init zeros
  zero.param @b : tensor<2xf32> init zeros
  zero.partition @flat stage 1 world_size 4 alignment 2 numel 10 padded 16 params [@w, @b] offsets [0, 8]
  zero.train_step @train(%x: tensor<2x4xf32>, %dy: tensor<2x2xf32>, %s: tensor<2x8x4xf32>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 1, world_size = 4, global_batch = 4, ranks_per_node = 1, mesh = #zero.mesh<[data = 2, sequence = 2]>> {
    %w = zero.get_param @w : tensor<4x2xf32>
    %b = zero.get_param @b : tensor<2xf32>
    %a = zero.all_to_all %x split 1 concat 0 over sequence : tensor<2x4xf32> -> tensor<4x2xf32>
    %c, %t = zero.all_to_all %s split 2 concat 1 over sequence : tensor<2x8x4xf32> -> tensor<2x16x2xf32>, !zero.token
    zero.wait %t
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
