// RUN: zero-opt %s -split-input-file --zero-verify-schedule -o /dev/null
// RUN: zero-opt %s -split-input-file --convert-zero-to-runtime=max-function-ops=20 | FileCheck %s
// RUN: zero-opt %s -split-input-file --convert-zero-to-runtime=max-function-ops=0 | FileCheck %s --check-prefix=UNSPLIT
// RUN: not zero-opt %s -split-input-file --convert-zero-to-runtime=max-function-ops=-1 2>&1 | FileCheck %s --check-prefix=NEG

// A phase longer than max-function-ops LLVM operations (20 here; the
// memory-tracing calls are not counted) is emitted as internal functions
// `<entry>_<k>(ctx, carry)` that the entry function calls in order; a
// shorter phase stays one function. Each function asks the context for its
// own pointers; the skip flag of zero.update_loss_scale reaches the Adam
// updates of a later function through `carry`, one 8-byte slot a value
// (null when nothing is carried). max-function-ops=0 keeps one function a
// phase; a negative value is an error.

// UNSPLIT-NOT: llvm.func internal
// NEG: error: convert-zero-to-runtime: max-function-ops must be >= 0, got -1

// Four matmuls and the loss: the micro step becomes three functions (two
// matmuls, two matmuls, the loss), the boundary two; the evaluation step (a
// fill and the loss) stays one. The second function asks for the weight's
// pointer again.

// CHECK-LABEL: module @split_micro_step
// CHECK-LABEL: llvm.func @zero_micro_step(%arg0: !llvm.ptr)
// CHECK-NEXT: %[[NONE:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK-NEXT: llvm.call @zero_micro_step_0(%arg0, %[[NONE]])
// CHECK-NEXT: llvm.call @zero_micro_step_1(%arg0, %[[NONE]])
// CHECK-NEXT: llvm.call @zero_micro_step_2(%arg0, %[[NONE]])
// CHECK-NEXT: llvm.return
// CHECK-LABEL: llvm.func @zero_boundary(%arg0: !llvm.ptr)
// CHECK-NEXT: %[[NONE:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK-NEXT: llvm.call @zero_boundary_0(%arg0, %[[NONE]])
// CHECK-NEXT: llvm.call @zero_boundary_1(%arg0, %[[NONE]])
// CHECK-NEXT: llvm.return
// CHECK-LABEL: llvm.func @zero_eval_step(%arg0: !llvm.ptr)
// CHECK-NOT:  llvm.call @zero_eval_step_
// CHECK:      llvm.call @zrt_ctx_set_loss(
// CHECK-NEXT: llvm.return
// CHECK-LABEL: llvm.func internal @zero_micro_step_0(%arg0: !llvm.ptr, %arg1: !llvm.ptr)
// CHECK:      %[[W:.*]] = llvm.call @zrt_ctx_persistent(%arg0,
// CHECK:      llvm.call @zrt_matmul(
// CHECK-SAME: %[[W]]
// CHECK:      llvm.call @zrt_matmul(
// CHECK-SAME: %[[W]]
// CHECK-NOT:  llvm.call @zrt_matmul(
// CHECK:      llvm.return
// CHECK-LABEL: llvm.func internal @zero_micro_step_1(%arg0: !llvm.ptr, %arg1: !llvm.ptr)
// CHECK:      %[[W:.*]] = llvm.call @zrt_ctx_persistent(%arg0,
// CHECK:      llvm.call @zrt_matmul(
// CHECK-SAME: %[[W]]
// CHECK:      llvm.call @zrt_matmul(
// CHECK-NOT:  llvm.call @zrt_matmul(
// CHECK:      llvm.return
// CHECK-LABEL: llvm.func internal @zero_micro_step_2(%arg0: !llvm.ptr, %arg1: !llvm.ptr)
// CHECK:      llvm.call @zrt_fill(
// CHECK:      llvm.call @zrt_ctx_set_loss(
// CHECK:      llvm.return
// CHECK-LABEL: llvm.func internal @zero_boundary_0(%arg0: !llvm.ptr, %arg1: !llvm.ptr)
// CHECK:      llvm.call @zrt_ctx_all_reduce_stats(
// CHECK-NOT:  llvm.call @zrt_ctx_update_loss_scale(
// CHECK:      llvm.return
// CHECK-LABEL: llvm.func internal @zero_boundary_1(%arg0: !llvm.ptr, %arg1: !llvm.ptr)
// CHECK:      llvm.call @zrt_ctx_update_loss_scale(
// CHECK:      llvm.call @zrt_ctx_optimizer_step(
// CHECK:      llvm.call @zrt_ctx_all_gather_params(
// CHECK:      llvm.return

// UNSPLIT-LABEL: module @split_micro_step
// UNSPLIT-NOT:   llvm.func internal

module @split_micro_step {
  zero.param @w : tensor<4x4xf32> init zeros
  zero.partition @flat stage 1 world_size 2 alignment 2 numel 16 padded 16 params [@w] offsets [0]
  zero.train_step @train(%x: tensor<2x4xf32>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 1, world_size = 2, global_batch = 4> {
    %w = zero.get_param @w : tensor<4x4xf32>
    %h1 = nn.matmul %x, %w : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    %h2 = nn.matmul %h1, %w : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    %h3 = nn.matmul %h2, %w : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    %dw = nn.matmul %x, %h3 transpose_lhs : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
    zero.grad @w, %dw : tensor<4x4xf32>
    zero.reduce_scatter group @flat in grads [0, 16) phase boundary
    %loss = nn.fill 0.0 : tensor<f32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 2.0 phase boundary : tensor<2xf32>
    %sum = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
    %skip = zero.update_loss_scale %sum phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @flat stats %sum scale %ls skip %skip divisor 2.0 phase boundary : tensor<2xf32>
    zero.all_gather group @flat in params [0, 16) phase post_step
    zero.return %loss : tensor<f32>
  }
}

// -----

// Three partitions: the overflow checks and the update of the loss scale
// fill the first function of the boundary, the three Adam updates the
// second, which loads the skip flag the first stored in the carry's slot 0.

// CHECK-LABEL: module @carry
// CHECK-LABEL: llvm.func @zero_micro_step(%arg0: !llvm.ptr)
// CHECK-NOT:  llvm.call @zero_micro_step_
// CHECK:      llvm.call @zrt_ctx_set_loss(
// CHECK-LABEL: llvm.func @zero_boundary(%arg0: !llvm.ptr)
// CHECK-NEXT: %[[SLOTS:.*]] = llvm.mlir.constant(1 : i64) : i64
// CHECK-NEXT: %[[CARRY:.*]] = llvm.alloca %[[SLOTS]] x !llvm.array<1 x i64> : (i64) -> !llvm.ptr
// CHECK-NEXT: llvm.call @zero_boundary_0(%arg0, %[[CARRY]])
// CHECK-NEXT: llvm.call @zero_boundary_1(%arg0, %[[CARRY]])
// CHECK-NEXT: llvm.return
// CHECK-LABEL: llvm.func internal @zero_boundary_0(%arg0: !llvm.ptr, %arg1: !llvm.ptr)
// CHECK-COUNT-3: llvm.call @zrt_ctx_check_overflow(
// CHECK:      %[[SKIP:.*]] = llvm.call @zrt_ctx_update_loss_scale(%arg0,
// CHECK-NEXT: %[[SLOT:.*]] = llvm.getelementptr %arg1[0] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT: llvm.store %[[SKIP]], %[[SLOT]] : i32, !llvm.ptr
// CHECK-NEXT: llvm.return
// CHECK-LABEL: llvm.func internal @zero_boundary_1(%arg0: !llvm.ptr, %arg1: !llvm.ptr)
// CHECK-NEXT: %[[SLOT:.*]] = llvm.getelementptr %arg1[0] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT: %[[SKIP:.*]] = llvm.load %[[SLOT]] : !llvm.ptr -> i32
// CHECK:      llvm.call @zrt_ctx_optimizer_step(%arg0, %{{.*}}, %{{.*}}, %{{.*}}, %[[SKIP]], %{{.*}})
// CHECK:      llvm.call @zrt_ctx_optimizer_step(%arg0, %{{.*}}, %{{.*}}, %{{.*}}, %[[SKIP]], %{{.*}})
// CHECK:      llvm.call @zrt_ctx_optimizer_step(%arg0, %{{.*}}, %{{.*}}, %{{.*}}, %[[SKIP]], %{{.*}})
// CHECK:      llvm.return

// UNSPLIT-LABEL: module @carry
// UNSPLIT-NOT:   llvm.func internal
// UNSPLIT:     %[[SKIP:.*]] = llvm.call @zrt_ctx_update_loss_scale(
// UNSPLIT-NOT:   llvm.store
// UNSPLIT:     llvm.call @zrt_ctx_optimizer_step(%arg0, %{{.*}}, %{{.*}}, %{{.*}}, %[[SKIP]], %{{.*}})

module @carry {
  zero.param @a : tensor<4xf32> init zeros
  zero.param @b : tensor<4xf32> init zeros
  zero.param @c : tensor<4xf32> init zeros
  zero.partition @pa stage 0 world_size 1 alignment 2 numel 4 padded 4 params [@a] offsets [0]
  zero.partition @pb stage 0 world_size 1 alignment 2 numel 4 padded 4 params [@b] offsets [0]
  zero.partition @pc stage 0 world_size 1 alignment 2 numel 4 padded 4 params [@c] offsets [0]
  zero.train_step @train(%x: tensor<4xf32>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 4> {
    %loss = nn.fill 0.0 : tensor<f32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@pa, @pb, @pc] scale %ls divisor 1.0 phase boundary : tensor<2xf32>
    %skip = zero.update_loss_scale %st phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @pa stats %st scale %ls skip %skip divisor 1.0 phase boundary : tensor<2xf32>
    zero.optimizer_step group @pb stats %st scale %ls skip %skip divisor 1.0 phase boundary : tensor<2xf32>
    zero.optimizer_step group @pc stats %st scale %ls skip %skip divisor 1.0 phase boundary : tensor<2xf32>
    zero.return %loss : tensor<f32>
  }
}

// -----

// An op of the last micro step in a split phase: its guard and both of its
// blocks belong to the function the op falls in.

// CHECK-LABEL: module @guard
// CHECK-LABEL: llvm.func @zero_micro_step(%arg0: !llvm.ptr)
// CHECK-NOT:  zrt_ctx_last_micro_step
// CHECK:      llvm.return
// CHECK-LABEL: llvm.func internal @zero_micro_step_0(%arg0: !llvm.ptr, %arg1: !llvm.ptr)
// CHECK-NOT:  zrt_ctx_last_micro_step
// CHECK:      llvm.return
// CHECK-LABEL: llvm.func internal @zero_micro_step_1(%arg0: !llvm.ptr, %arg1: !llvm.ptr)
// CHECK-NEXT: %{{.*}} = llvm.mlir.constant
// CHECK-NEXT: llvm.call @zrt_ctx_trace_op(
// CHECK-NEXT: %[[LAST:.*]] = llvm.call @zrt_ctx_last_micro_step(%arg0) : (!llvm.ptr) -> i32
// CHECK-NEXT: %[[ZERO:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[FLAG:.*]] = llvm.icmp "ne" %[[LAST]], %[[ZERO]] : i32
// CHECK-NEXT: llvm.cond_br %[[FLAG]], ^[[THEN:bb[0-9]+]], ^[[AFTER:bb[0-9]+]]
// CHECK-NEXT: ^[[THEN]]:
// CHECK:      llvm.call @zrt_ctx_transfer(%arg0,
// CHECK-NEXT: llvm.br ^[[AFTER]]
// CHECK-NEXT: ^[[AFTER]]:
// CHECK:      llvm.return
// CHECK-LABEL: llvm.func internal @zero_micro_step_2(%arg0: !llvm.ptr, %arg1: !llvm.ptr)
// CHECK-NOT:  ^bb

// UNSPLIT-LABEL: module @guard
// UNSPLIT-NOT:   llvm.func internal
// UNSPLIT:     llvm.func @zero_micro_step(%arg0: !llvm.ptr)
// UNSPLIT:     llvm.call @zrt_ctx_last_micro_step(%arg0)
// UNSPLIT:     llvm.call @zrt_ctx_set_loss(
// UNSPLIT-NOT:   llvm.func internal

module @guard {
  zero.param @w : tensor<4x2xf32> init zeros compute bf16
  zero.partition @flat stage 2 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
  zero.train_step @train(%x: tensor<2x4xbf16>, %dy: tensor<2x2xbf16>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = bf16>
      schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 4>
      offload #zero.offload<optimizer = cpu> {
    %dw = nn.matmul %x, %dy transpose_lhs : tensor<2x4xbf16>, tensor<2x2xbf16> -> tensor<4x2xbf16>
    zero.grad @w, %dw : tensor<4x2xbf16>
    zero.reduce_scatter group @flat [0, 8) from %dw at [0] : tensor<4x2xbf16>
    %down = zero.transfer group @flat grads[0, 8) to host_grads phase last_micro_step -> !zero.token
    zero.free %dw : tensor<4x2xbf16>
    %loss = nn.fill 0.0 : tensor<f32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 2.0 phase boundary : tensor<2xf32>
    %sum = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
    %skip = zero.update_loss_scale %sum phase boundary : tensor<2xf32> -> i1
    zero.wait %down phase boundary
    zero.optimizer_step group @flat stats %sum scale %ls skip %skip divisor 2.0 host phase boundary : tensor<2xf32>
    %up = zero.transfer group @flat host_params to params phase boundary -> !zero.token
    zero.wait %up phase boundary
    zero.all_gather group @flat in params [0, 8) phase post_step
    zero.return %loss : tensor<f32>
  }
}
