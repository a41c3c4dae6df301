// RUN: zero-opt %s -split-input-file --zero-verify-schedule -o /dev/null
// RUN: zero-opt %s -split-input-file --convert-zero-to-runtime | FileCheck %s

// Where the lowering points each value: a pointer into the step arena
// (zrt_ctx_step) or the persistent arena (zrt_ctx_persistent) at the offset
// of the memory plan. The lowering computes the plan itself; the first case
// carries the plan zero-plan-memory records (zero.buffers, zero.input_offsets,
// zero.alloc), which the first RUN line checks against the plan, so the
// offsets below are the recorded ones. An op's pointers are asked for right
// after its memory-tracing calls (zrt_ctx_trace_*), in operand order.

// Stage 1, fp32: the inputs at their input offsets (0 and 64); a parameter
// in its partition's params buffer (at 0) at its offset in the layout (@b at
// 8 floats, 32 bytes); results at their zero.alloc offsets; a view (the
// reshape, op 4) at its source's offset; and a gradient value bound to one
// parameter written in place into the grads buffer (at 64): @w's at 64,
// @b's at 96, with no copy (no zrt_ctx_store_grad). A value read again in
// the same function reuses its pointer (%x in op 6, %dy in op 8).

// CHECK-LABEL: module @storage
// CHECK-LABEL: llvm.func @zero_micro_step
// CHECK:      llvm.call @zrt_ctx_trace_live(
// CHECK-NEXT: %[[OFF:.*]] = llvm.mlir.constant(0 : i64) : i64
// CHECK-NEXT: %[[X:.*]] = llvm.call @zrt_ctx_step(%arg0, %[[OFF]])
// CHECK-NEXT: %[[OFF:.*]] = llvm.mlir.constant(0 : i64) : i64
// CHECK-NEXT: %{{.*}} = llvm.call @zrt_ctx_persistent(%arg0, %[[OFF]])
// CHECK-NEXT: %[[OFF:.*]] = llvm.mlir.constant(128 : i64) : i64
// CHECK-NEXT: %[[H:.*]] = llvm.call @zrt_ctx_step(%arg0, %[[OFF]])
// CHECK:      llvm.call @zrt_matmul(
// CHECK:      llvm.call @zrt_ctx_trace_live(
// CHECK-NEXT: %[[OFF:.*]] = llvm.mlir.constant(32 : i64) : i64
// CHECK-NEXT: %{{.*}} = llvm.call @zrt_ctx_persistent(%arg0, %[[OFF]])
// CHECK-NEXT: %[[OFF:.*]] = llvm.mlir.constant(192 : i64) : i64
// CHECK-NEXT: %{{.*}} = llvm.call @zrt_ctx_step(%arg0, %[[OFF]])
// CHECK:      llvm.call @zrt_add(
// CHECK-SAME: %[[H]]
// CHECK:      llvm.call @zrt_ctx_trace_live(
// CHECK-NEXT: %[[OFF:.*]] = llvm.mlir.constant(192 : i64) : i64
// CHECK-NEXT: %{{.*}} = llvm.call @zrt_ctx_step(%arg0, %[[OFF]])
// CHECK-NEXT: %[[OFF:.*]] = llvm.mlir.constant(128 : i64) : i64
// CHECK-NEXT: %{{.*}} = llvm.call @zrt_ctx_step(%arg0, %[[OFF]])
// CHECK:      llvm.call @zrt_scale(
// CHECK:      %[[I:.*]] = llvm.mlir.constant(6 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_ctx_trace_op(%arg0, %[[I]])
// CHECK-NEXT: %[[OFF:.*]] = llvm.mlir.constant(64 : i64) : i64
// CHECK-NEXT: %[[DY:.*]] = llvm.call @zrt_ctx_step(%arg0, %[[OFF]])
// CHECK-NEXT: %[[OFF:.*]] = llvm.mlir.constant(64 : i64) : i64
// CHECK-NEXT: %{{.*}} = llvm.call @zrt_ctx_persistent(%arg0, %[[OFF]])
// CHECK:      llvm.call @zrt_matmul(
// CHECK-SAME: %[[X]]
// CHECK:      %[[I:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_ctx_trace_op(%arg0, %[[I]])
// CHECK-NEXT: %[[OFF:.*]] = llvm.mlir.constant(96 : i64) : i64
// CHECK-NEXT: %{{.*}} = llvm.call @zrt_ctx_persistent(%arg0, %[[OFF]])
// CHECK:      llvm.call @zrt_reduce_sum(
// CHECK-SAME: %[[DY]]
// CHECK-NOT:  llvm.call @zrt_ctx_store_grad
// CHECK:      llvm.return

module @storage {
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

// With gradient accumulation (two micro steps) a gradient cannot be written
// in place: each micro step adds it to the grads buffer
// (zrt_ctx_store_grad: the partition, the parameter's offset in the layout,
// the value, its element count).

// CHECK-LABEL: module @accumulated_grads
// CHECK-LABEL: llvm.func @zero_micro_step
// CHECK:      llvm.call @zrt_matmul(%{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %[[DW:[0-9]+]],
// CHECK:      %[[PARTITION:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[OFFSET:.*]] = llvm.mlir.constant(0 : i64) : i64
// CHECK-NEXT: %[[N:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_ctx_store_grad(%arg0, %[[PARTITION]], %[[OFFSET]], %[[DW]], %[[N]])
// CHECK:      llvm.call @zrt_reduce_sum(%{{[0-9]+}}, %{{[0-9]+}}, %[[DB:[0-9]+]],
// CHECK:      %[[PARTITION:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[OFFSET:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-NEXT: %[[N:.*]] = llvm.mlir.constant(2 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_ctx_store_grad(%arg0, %[[PARTITION]], %[[OFFSET]], %[[DB]], %[[N]])

module @accumulated_grads {
  zero.param @w : tensor<4x2xf32> init zeros compute bf16
  zero.param @b : tensor<2xf32> init zeros compute bf16
  zero.partition @flat stage 1 world_size 2 alignment 2 numel 10 padded 12 params [@w, @b] offsets [0, 8]
  zero.train_step @train(%x: tensor<2x4xbf16>, %dy: tensor<2x2xbf16>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = bf16>
      schedule #zero.schedule<stage = 1, world_size = 2, global_batch = 8, accumulation_steps = 2> {
    %dw = nn.matmul %x, %dy transpose_lhs : tensor<2x4xbf16>, tensor<2x2xbf16> -> tensor<4x2xbf16>
    zero.grad @w, %dw : tensor<4x2xbf16>
    %db = nn.reduce_sum %dy : tensor<2x2xbf16> -> tensor<2xbf16>
    zero.grad @b, %db : tensor<2xbf16>
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
