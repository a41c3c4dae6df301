// RUN: zero-opt %s -split-input-file --zero-verify-schedule -o /dev/null
// RUN: zero-opt %s -split-input-file --convert-zero-to-runtime | FileCheck %s

// The phases of the step become the program's entry points: ops of phase
// micro_step (and step_end) run in zero_micro_step, once per micro step;
// boundary and post_step ops in zero_boundary, once per optimizer step after
// the last micro step; last_micro_step ops in zero_micro_step behind a test
// of the runtime's flag (zrt_ctx_last_micro_step); zero_eval_step is the
// forward cut at the loss. The micro step records the loss; the memory
// tracing calls mark each op of the micro step and the boundary.

// Stage 2: the forward, the loss, the backward and the bucket reduction run in
// the micro step, which records the loss last; the loss scaler, the optimizer
// and then the post-step gather run at the boundary; the evaluation step is
// the forward and the loss only (the backward, the seed, the reductions and
// the memory tracing left out).

// CHECK-LABEL: module @phases
// CHECK-LABEL: llvm.func @zero_micro_step
// CHECK:      llvm.call @zrt_matmul(
// CHECK:      llvm.call @zrt_softmax_cross_entropy(%{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %[[LOSS:[0-9]+]],
// CHECK:      llvm.call @zrt_fill(
// CHECK:      llvm.call @zrt_softmax_cross_entropy_grad(
// CHECK:      llvm.call @zrt_matmul(
// CHECK:      llvm.call @zrt_ctx_bucket_add(
// CHECK:      llvm.call @zrt_ctx_reduce_bucket(
// CHECK-NOT:  llvm.call @zrt_ctx_{{loss_scale|check_overflow|all_reduce_stats|update_loss_scale|adam|all_gather_params}}
// CHECK:      llvm.call @zrt_ctx_set_loss(%arg0, %[[LOSS]])
// CHECK:      llvm.return
// CHECK-LABEL: llvm.func @zero_boundary
// CHECK-NOT:  llvm.call @zrt_{{matmul|softmax|fill|ctx_bucket_add|ctx_reduce_bucket|ctx_set_loss}}
// CHECK:      llvm.call @zrt_ctx_loss_scale(
// CHECK:      llvm.call @zrt_ctx_check_overflow(
// CHECK:      llvm.call @zrt_ctx_all_reduce_stats(
// CHECK:      llvm.call @zrt_ctx_update_loss_scale(
// CHECK:      llvm.call @zrt_ctx_optimizer_step(
// CHECK:      llvm.call @zrt_ctx_all_gather_params(
// CHECK:      llvm.return
// CHECK-LABEL: llvm.func @zero_eval_step
// CHECK-NOT:  llvm.call @zrt_ctx_trace
// CHECK:      llvm.call @zrt_matmul(
// CHECK-NOT:  llvm.call @zrt_ctx_trace
// CHECK:      llvm.call @zrt_softmax_cross_entropy(%{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %[[LOSS:[0-9]+]],
// CHECK-NEXT: llvm.call @zrt_ctx_set_loss(%arg0, %[[LOSS]])
// CHECK-NEXT: llvm.return

module @phases {
  zero.param @w : tensor<4x2xf32> init zeros
  zero.partition @flat stage 2 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
  zero.train_step @train(%x: tensor<2x4xf32>, %labels: tensor<2xi64>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 4> {
    %w = zero.get_param @w : tensor<4x2xf32>
    %y = nn.matmul %x, %w : tensor<2x4xf32>, tensor<4x2xf32> -> tensor<2x2xf32>
    %loss = nn.softmax_cross_entropy %y, %labels : tensor<2x2xf32>, tensor<2xi64> -> tensor<f32>
    %seed = nn.fill 1.0 {zero.loss_seed} : tensor<f32>
    %dy = nn.softmax_cross_entropy_grad %y, %labels, %seed : tensor<2x2xf32>, tensor<2xi64>, tensor<f32>
    %dw = nn.matmul %x, %dy transpose_lhs : tensor<2x4xf32>, tensor<2x2xf32> -> tensor<4x2xf32>
    zero.grad @w, %dw : tensor<4x2xf32>
    zero.reduce_scatter group @flat [0, 8) from %dw at [0] : tensor<4x2xf32>
    zero.free %dw : tensor<4x2xf32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 2.0 phase boundary : tensor<2xf32>
    %sum = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
    %skip = zero.update_loss_scale %sum phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @flat stats %sum scale %ls skip %skip divisor 2.0 phase boundary : tensor<2xf32>
    zero.all_gather group @flat in params [0, 8) phase post_step
    zero.return %loss : tensor<f32>
  }
}

// -----

// Phase last_micro_step: the gradients of an offloaded optimizer at stage 2
// stream to the host bucket by bucket, right after each bucket's reduction,
// but only in the last micro step of the optimizer step (two micro steps
// here): each copy runs in a block the runtime's flag guards, and the
// following ops continue after the guard. The boundary waits for both copies
// and tests no flag.

// CHECK-LABEL: module @last_micro_step
// CHECK-LABEL: llvm.func @zero_micro_step
// CHECK:      llvm.call @zrt_ctx_reduce_bucket(
// CHECK:      %[[LAST:.*]] = llvm.call @zrt_ctx_last_micro_step(%arg0) : (!llvm.ptr) -> i32
// CHECK-NEXT: %[[ZERO:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[FLAG:.*]] = llvm.icmp "ne" %[[LAST]], %[[ZERO]] : i32
// CHECK-NEXT: llvm.cond_br %[[FLAG]], ^[[THEN:bb[0-9]+]], ^[[AFTER:bb[0-9]+]]
// CHECK-NEXT: ^[[THEN]]:
// CHECK:      llvm.call @zrt_ctx_transfer(%arg0,
// CHECK-NEXT: llvm.br ^[[AFTER]]
// CHECK-NEXT: ^[[AFTER]]:
// CHECK:      llvm.call @zrt_matmul(
// CHECK:      llvm.call @zrt_ctx_reduce_bucket(
// CHECK:      %[[LAST:.*]] = llvm.call @zrt_ctx_last_micro_step(%arg0) : (!llvm.ptr) -> i32
// CHECK-NEXT: %[[ZERO:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[FLAG:.*]] = llvm.icmp "ne" %[[LAST]], %[[ZERO]] : i32
// CHECK-NEXT: llvm.cond_br %[[FLAG]], ^[[THEN:bb[0-9]+]], ^[[AFTER:bb[0-9]+]]
// CHECK-NEXT: ^[[THEN]]:
// CHECK:      llvm.call @zrt_ctx_transfer(%arg0,
// CHECK-NEXT: llvm.br ^[[AFTER]]
// CHECK-NEXT: ^[[AFTER]]:
// CHECK:      llvm.call @zrt_ctx_set_loss(
// CHECK-LABEL: llvm.func @zero_boundary
// CHECK-NOT:  zrt_ctx_last_micro_step
// CHECK:      llvm.call @zrt_ctx_wait(
// CHECK:      llvm.call @zrt_ctx_wait(
// CHECK:      llvm.call @zrt_ctx_optimizer_step_host(
// CHECK:      llvm.call @zrt_ctx_transfer(
// CHECK-LABEL: llvm.func @zero_eval_step
// CHECK-NOT:  llvm.call @zrt_ctx_transfer
// CHECK:      llvm.return

module @last_micro_step {
  zero.param @w : tensor<4x2xf32> init zeros compute bf16
  zero.param @b : tensor<4xf32> init zeros compute bf16
  zero.partition @flat stage 2 world_size 2 alignment 2 numel 12 padded 12 params [@w, @b] offsets [0, 8]
  zero.train_step @train(%x: tensor<2x4xbf16>, %dy: tensor<2x2xbf16>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = bf16>
      schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 8, accumulation_steps = 2>
      offload #zero.offload<optimizer = cpu> {
    %db = nn.reduce_sum %x : tensor<2x4xbf16> -> tensor<4xbf16>
    zero.grad @b, %db : tensor<4xbf16>
    zero.reduce_scatter group @flat [8, 12) from %db at [0] : tensor<4xbf16>
    %t1 = zero.transfer group @flat grads[8, 12) to host_grads phase last_micro_step -> !zero.token
    zero.free %db : tensor<4xbf16>
    %dw = nn.matmul %x, %dy transpose_lhs : tensor<2x4xbf16>, tensor<2x2xbf16> -> tensor<4x2xbf16>
    zero.grad @w, %dw : tensor<4x2xbf16>
    zero.reduce_scatter group @flat [0, 8) from %dw at [0] : tensor<4x2xbf16>
    %t2 = zero.transfer group @flat grads[0, 8) to host_grads phase last_micro_step -> !zero.token
    zero.free %dw : tensor<4x2xbf16>
    %loss = nn.fill 0.0 : tensor<f32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 4.0 phase boundary : tensor<2xf32>
    %sum = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
    %skip = zero.update_loss_scale %sum phase boundary : tensor<2xf32> -> i1
    zero.wait %t1 phase boundary
    zero.wait %t2 phase boundary
    zero.optimizer_step group @flat stats %sum scale %ls skip %skip divisor 4.0 host phase boundary : tensor<2xf32>
    %up = zero.transfer group @flat host_params to params phase boundary -> !zero.token
    zero.wait %up phase boundary
    zero.all_gather group @flat in params [0, 12) phase post_step
    zero.return %loss : tensor<f32>
  }
}

// -----

// The evaluation step at stage 3 gathers what the forward reads, in the
// training step's order and token slots (@fc1 in slot 0, @fc2 in slot 1),
// waits for each before its use, and records the loss; the backward's
// prefetch of @fc1 (slot 2), issued before the loss in the training step, is
// left out, with the rest of the backward.

// CHECK-LABEL: module @eval_step
// CHECK-LABEL: llvm.func @zero_micro_step
// CHECK-COUNT-3: llvm.call @zrt_ctx_gather_partition(
// CHECK-LABEL: llvm.func @zero_eval_step
// CHECK:      %[[P0:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[S0:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: llvm.call @zrt_ctx_gather_partition(%arg0, %[[P0]], %{{.*}}, %[[S0]])
// CHECK:      %[[P1:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[S1:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: llvm.call @zrt_ctx_gather_partition(%arg0, %[[P1]], %{{.*}}, %[[S1]])
// CHECK-NEXT: %[[W0:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: llvm.call @zrt_ctx_wait(%arg0, %[[W0]])
// CHECK:      llvm.call @zrt_matmul(
// CHECK-NEXT: %[[W1:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: llvm.call @zrt_ctx_wait(%arg0, %[[W1]])
// CHECK:      llvm.call @zrt_matmul(
// CHECK-NOT:  llvm.call @zrt_ctx_gather_partition
// CHECK:      llvm.call @zrt_softmax_cross_entropy(
// CHECK-NEXT: llvm.call @zrt_ctx_set_loss(
// CHECK-NEXT: llvm.return

module @eval_step {
  zero.param @w1 : tensor<4x4xf32> init zeros
  zero.param @w2 : tensor<4x2xf32> init zeros
  zero.partition @fc1 stage 3 world_size 2 alignment 2 numel 16 padded 16 params [@w1] offsets [0]
  zero.partition @fc2 stage 3 world_size 2 alignment 2 numel 8 padded 8 params [@w2] offsets [0]
  zero.train_step @train(%x: tensor<2x4xf32>, %labels: tensor<2xi64>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4> {
    %g1, %t1 = zero.prefetch group @fc1 : tensor<16xf32>
    %g2, %t2 = zero.prefetch group @fc2 : tensor<8xf32>
    zero.wait %t1
    %w1 = zero.get_param @w1 from %g1 : tensor<16xf32> -> tensor<4x4xf32>
    %h = nn.matmul %x, %w1 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    zero.free %g1 : tensor<16xf32>
    zero.wait %t2
    %w2 = zero.get_param @w2 from %g2 : tensor<8xf32> -> tensor<4x2xf32>
    %y = nn.matmul %h, %w2 : tensor<2x4xf32>, tensor<4x2xf32> -> tensor<2x2xf32>
    %g3, %t3 = zero.prefetch group @fc1 : tensor<16xf32>
    %loss = nn.softmax_cross_entropy %y, %labels : tensor<2x2xf32>, tensor<2xi64> -> tensor<f32>
    %seed = nn.fill 1.0 {zero.loss_seed} : tensor<f32>
    %dy = nn.softmax_cross_entropy_grad %y, %labels, %seed : tensor<2x2xf32>, tensor<2xi64>, tensor<f32>
    %dh = nn.matmul %dy, %w2 transpose_rhs : tensor<2x2xf32>, tensor<4x2xf32> -> tensor<2x4xf32>
    %dw2 = nn.matmul %h, %dy transpose_lhs : tensor<2x4xf32>, tensor<2x2xf32> -> tensor<4x2xf32>
    zero.free %g2 : tensor<8xf32>
    zero.grad @w2, %dw2 : tensor<4x2xf32>
    zero.reduce_scatter group @fc2 [0, 8) from %dw2 at [0] : tensor<4x2xf32>
    zero.free %dw2 : tensor<4x2xf32>
    zero.wait %t3
    %dw1 = nn.matmul %x, %dh transpose_lhs : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
    zero.free %g3 : tensor<16xf32>
    zero.grad @w1, %dw1 : tensor<4x4xf32>
    zero.reduce_scatter group @fc1 [0, 16) from %dw1 at [0] : tensor<4x4xf32>
    zero.free %dw1 : tensor<4x4xf32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@fc1, @fc2] scale %ls divisor 2.0 phase boundary : tensor<2xf32>
    %sum = zero.all_reduce overflow_norm %st group @fc1 phase boundary : tensor<2xf32> -> tensor<2xf32>
    %skip = zero.update_loss_scale %sum phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @fc1 stats %sum scale %ls skip %skip divisor 2.0 phase boundary : tensor<2xf32>
    zero.optimizer_step group @fc2 stats %sum scale %ls skip %skip divisor 2.0 phase boundary : tensor<2xf32>
    zero.return %loss : tensor<f32>
  }
}

// -----

// Memory tracing: before each op that runs something, zrt_ctx_trace_op with
// the op's index in the step and zrt_ctx_trace_live of each step-arena range
// [offset, bytes) that its plan begins there; after it, zrt_ctx_trace_dead of
// each range that ends. The input (offset 0, 128 bytes) is live before the
// first op (the driver marks it when it loads the batch) and ends after
// op 0; the relu's result (offset 128) lives from
// op 0 to op 2, through the reshape (op 1, a view that changes no bytes and
// is not marked). The boundary's ops keep their indices (4 to 7); the
// terminator is op 8. The evaluation step traces nothing.

// CHECK-LABEL: module @memory_trace
// CHECK-LABEL: llvm.func @zero_micro_step
// CHECK-NEXT: %[[I:.*]] = llvm.mlir.constant(0 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_ctx_trace_op(%arg0, %[[I]])
// CHECK-NEXT: %[[AT:.*]] = llvm.mlir.constant(128 : i64) : i64
// CHECK-NEXT: %[[BYTES:.*]] = llvm.mlir.constant(128 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_ctx_trace_live(%arg0, %[[AT]], %[[BYTES]])
// CHECK:      llvm.call @zrt_relu(
// CHECK-NEXT: %[[AT:.*]] = llvm.mlir.constant(0 : i64) : i64
// CHECK-NEXT: %[[BYTES:.*]] = llvm.mlir.constant(128 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_ctx_trace_dead(%arg0, %[[AT]], %[[BYTES]])
// CHECK-NEXT: %[[I:.*]] = llvm.mlir.constant(2 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_ctx_trace_op(%arg0, %[[I]])
// CHECK-NEXT: %[[AT:.*]] = llvm.mlir.constant(0 : i64) : i64
// CHECK-NEXT: %[[BYTES:.*]] = llvm.mlir.constant(128 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_ctx_trace_live(%arg0, %[[AT]], %[[BYTES]])
// CHECK:      llvm.call @zrt_scale(
// CHECK-NEXT: %[[AT:.*]] = llvm.mlir.constant(128 : i64) : i64
// CHECK-NEXT: %[[BYTES:.*]] = llvm.mlir.constant(128 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_ctx_trace_dead(%arg0, %[[AT]], %[[BYTES]])
// CHECK-NEXT: %[[AT:.*]] = llvm.mlir.constant(0 : i64) : i64
// CHECK-NEXT: %[[BYTES:.*]] = llvm.mlir.constant(128 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_ctx_trace_dead(%arg0, %[[AT]], %[[BYTES]])
// CHECK-NEXT: %[[I:.*]] = llvm.mlir.constant(3 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_ctx_trace_op(%arg0, %[[I]])
// CHECK-NEXT: %[[AT:.*]] = llvm.mlir.constant(0 : i64) : i64
// CHECK-NEXT: %[[BYTES:.*]] = llvm.mlir.constant(4 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_ctx_trace_live(%arg0, %[[AT]], %[[BYTES]])
// CHECK:      llvm.call @zrt_fill(
// CHECK-NEXT: %[[I:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_ctx_trace_op(%arg0, %[[I]])
// CHECK-NEXT: llvm.call @zrt_ctx_set_loss(
// CHECK-NEXT: %[[AT:.*]] = llvm.mlir.constant(0 : i64) : i64
// CHECK-NEXT: %[[BYTES:.*]] = llvm.mlir.constant(4 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_ctx_trace_dead(%arg0, %[[AT]], %[[BYTES]])
// CHECK-NEXT: llvm.return
// CHECK-LABEL: llvm.func @zero_boundary
// CHECK-NEXT: %[[I:.*]] = llvm.mlir.constant(4 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_ctx_trace_op(%arg0, %[[I]])
// CHECK:      llvm.call @zrt_ctx_loss_scale(
// CHECK-NEXT: %[[I:.*]] = llvm.mlir.constant(5 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_ctx_trace_op(%arg0, %[[I]])
// CHECK:      llvm.call @zrt_ctx_check_overflow(
// CHECK-NEXT: %[[I:.*]] = llvm.mlir.constant(6 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_ctx_trace_op(%arg0, %[[I]])
// CHECK-NEXT: llvm.call @zrt_ctx_update_loss_scale(
// CHECK-NEXT: %[[I:.*]] = llvm.mlir.constant(7 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_ctx_trace_op(%arg0, %[[I]])
// CHECK:      llvm.call @zrt_ctx_optimizer_step(
// CHECK-LABEL: llvm.func @zero_eval_step
// CHECK-NOT:  llvm.call @zrt_ctx_trace
// CHECK:      llvm.return

module @memory_trace {
  zero.param @w : tensor<2xf32> init zeros
  zero.partition @flat stage 0 world_size 1 alignment 2 numel 2 padded 2 params [@w] offsets [0]
  zero.train_step @train(%x: tensor<4x8xf32>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 4> {
    %r = nn.relu %x : tensor<4x8xf32>
    %f = nn.reshape %r : tensor<4x8xf32> -> tensor<32xf32>
    %s = nn.scale %f by 2.0 : tensor<32xf32>
    %loss = nn.fill 0.0 : tensor<f32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 1.0 phase boundary : tensor<2xf32>
    %skip = zero.update_loss_scale %st phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @flat stats %st scale %ls skip %skip divisor 1.0 phase boundary : tensor<2xf32>
    zero.return %loss : tensor<f32>
  }
}
