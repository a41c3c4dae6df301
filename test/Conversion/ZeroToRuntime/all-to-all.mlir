// RUN: zero-opt %s --zero-verify-schedule -o /dev/null
// RUN: zero-opt %s --zero-plan-memory --convert-zero-to-runtime | FileCheck %s

// zero.all_to_all lowers to zrt_ctx_all_to_all (zero-sequence-parallel emits
// it around attention). World 4 on 2 nodes of 2 ranks. The call
// passes the rank set (ZRT_RANKS_WORLD, 3; all-to-all-sequence.mlir has the
// sequence-parallel group), the dtype, the input and result buffers, the
// op's staging, the
// input as (outer, P, inner) at the split dimension and the result at the
// concat dimension, and the token slot.
//
// %x (2x4 f32) split 1 concat 0: the input's chunks are scattered (outer 2,
// inner 1) and packed through the staging; the result's (8x1 at dimension
// 0: outer 1, inner 2) are contiguous. Synchronous (slot -1).
// CHECK-LABEL: llvm.func @zero_micro_step
// CHECK:      %[[RS:.*]] = llvm.mlir.constant(3 : i32) : i32
// CHECK-NEXT: %[[DT:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK:      %[[SO:.*]] = llvm.mlir.constant(2 : i64) : i64
// CHECK-NEXT: %[[SI:.*]] = llvm.mlir.constant(1 : i64) : i64
// CHECK-NEXT: %[[CO:.*]] = llvm.mlir.constant(1 : i64) : i64
// CHECK-NEXT: %[[CI:.*]] = llvm.mlir.constant(2 : i64) : i64
// CHECK-NEXT: %[[SL:.*]] = llvm.mlir.constant(-1 : i32) : i32
// CHECK-NEXT: llvm.call @zrt_ctx_all_to_all(%arg0, %[[RS]], %[[DT]], %{{.*}}, %{{.*}}, %{{.*}}, %[[SO]], %[[SI]], %[[CO]], %[[CI]], %[[SL]])
// %s (2x8x4 f32) split 2 concat 1 -> 2x32x1: scattered both ways (outer
// 16, inner 1; outer 2, inner 8), asynchronous in slot 0 and waited.
// CHECK:      %[[SO:.*]] = llvm.mlir.constant(16 : i64) : i64
// CHECK-NEXT: %[[SI:.*]] = llvm.mlir.constant(1 : i64) : i64
// CHECK-NEXT: %[[CO:.*]] = llvm.mlir.constant(2 : i64) : i64
// CHECK-NEXT: %[[CI:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-NEXT: %[[SL:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: llvm.call @zrt_ctx_all_to_all(%arg0, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[SO]], %[[SI]], %[[CO]], %[[CI]], %[[SL]])
// Its result (unread) and staging stay planned until the wait: nothing
// dies in between.
// CHECK-NOT:  @zrt_ctx_trace_dead
// CHECK:      llvm.call @zrt_ctx_wait(%arg0, %{{.*}})
// CHECK-NEXT: %[[B:.*]] = llvm.mlir.constant({{[0-9]+}} : i64) : i64
// CHECK-NEXT: %[[N:.*]] = llvm.mlir.constant(256 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_ctx_trace_dead(%arg0, %[[B]], %[[N]])
//
// The manifest plans each all-to-all's bytes from rank 0: a chunk (a
// quarter of the tensor) to its node peer and one to each of the 2 ranks
// of the other node: 8 + 64 bytes within the node, 16 + 128 across.
// CHECK: \22all_to_all\22:{\22inter_node_bytes\22:144,\22intra_node_bytes\22:72}
//
// The report counts the same bytes under the kind all_to_all.
// RUN: zero-opt %s --zero-report -o /dev/null | FileCheck %s --check-prefix=REPORT
// REPORT:      "all_to_all": {
// REPORT-NEXT:   "inter_node": 144,
// REPORT-NEXT:   "intra_node": 72
// REPORT:      "all_to_all": 2,
module @all_to_all {
  zero.param @w : tensor<4x2xf32> init zeros
  zero.param @b : tensor<2xf32> init zeros
  zero.partition @flat stage 1 world_size 4 alignment 2 numel 10 padded 16 params [@w, @b] offsets [0, 8]
  zero.train_step @train(%x: tensor<2x4xf32>, %dy: tensor<2x2xf32>, %s: tensor<2x8x4xf32>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 1, world_size = 4, global_batch = 8, ranks_per_node = 2> {
    %w = zero.get_param @w : tensor<4x2xf32>
    %b = zero.get_param @b : tensor<2xf32>
    %a = zero.all_to_all %x split 1 concat 0 over world : tensor<2x4xf32> -> tensor<8x1xf32>
    %c, %t = zero.all_to_all %s split 2 concat 1 over world : tensor<2x8x4xf32> -> tensor<2x32x1xf32>, !zero.token
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
