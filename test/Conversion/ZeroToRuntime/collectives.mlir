// RUN: zero-opt %s -split-input-file --zero-verify-schedule -o /dev/null
// RUN: zero-opt %s -split-input-file --convert-zero-to-runtime | FileCheck %s

// The collectives of the schedule as calls of the runtime's context: each
// passes the index of its partition (the order of the zero.partition ops),
// its element range of the partition's flat layout, and the slot of its
// token (slots number the step's tokens in program order; -1 when the
// collective is synchronous). zero.free emits no call.

// Stage 2: the source form of zero.reduce_scatter packs its gradient values
// into a bucket of the step arena (zrt_ctx_bucket_add: the partition, whose
// compute dtype the bucket holds, the bucket, the position in it, the first
// element of the source as a byte offset from the gradient's pointer, the
// count) and reduce-scatters the bucket
// (to_owners = 0). The first bucket, [2, 10) of the layout, is the last 6
// elements of @w's gradient (8 bytes in) and @b's 2; it is asynchronous (token
// slot 0) and waited. The second, [0, 2), is synchronous (slot -1).

// CHECK-LABEL: module @bucket_reduce_scatter
// CHECK-LABEL: llvm.func @zero_micro_step
// CHECK:      llvm.call @zrt_reduce_sum(%{{[0-9]+}}, %{{[0-9]+}}, %[[DB:[0-9]+]],
// CHECK:      llvm.call @zrt_matmul(%{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %[[DW:[0-9]+]],
// CHECK:      %[[BUCKET:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[SKIP:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-NEXT: %[[FROM:.*]] = llvm.getelementptr %[[DW]][%[[SKIP]]] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// CHECK-NEXT: %[[PART:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[AT:.*]] = llvm.mlir.constant(0 : i64) : i64
// CHECK-NEXT: %[[TAKE:.*]] = llvm.mlir.constant(6 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_ctx_bucket_add(%arg0, %[[PART]], %[[BUCKET]], %[[AT]], %[[FROM]], %[[TAKE]])
// CHECK-NEXT: %[[SKIP:.*]] = llvm.mlir.constant(0 : i64) : i64
// CHECK-NEXT: %[[FROM:.*]] = llvm.getelementptr %[[DB]][%[[SKIP]]] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// CHECK-NEXT: %[[PART:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[AT:.*]] = llvm.mlir.constant(6 : i64) : i64
// CHECK-NEXT: %[[TAKE:.*]] = llvm.mlir.constant(2 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_ctx_bucket_add(%arg0, %[[PART]], %[[BUCKET]], %[[AT]], %[[FROM]], %[[TAKE]])
// CHECK-NEXT: %[[PARTITION:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[BEGIN:.*]] = llvm.mlir.constant(2 : i64) : i64
// CHECK-NEXT: %[[END:.*]] = llvm.mlir.constant(10 : i64) : i64
// CHECK-NEXT: %[[TO_OWNERS:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[SLOT:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: llvm.call @zrt_ctx_reduce_bucket(%arg0, %[[PARTITION]], %[[BEGIN]], %[[END]], %[[BUCKET]], %[[TO_OWNERS]], %[[SLOT]])
// CHECK:      %[[SLOT:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: llvm.call @zrt_ctx_wait(%arg0, %[[SLOT]])
// CHECK:      %[[BUCKET:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[SKIP:.*]] = llvm.mlir.constant(0 : i64) : i64
// CHECK-NEXT: %[[FROM:.*]] = llvm.getelementptr %[[DW]][%[[SKIP]]] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// CHECK-NEXT: %[[PART:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[AT:.*]] = llvm.mlir.constant(0 : i64) : i64
// CHECK-NEXT: %[[TAKE:.*]] = llvm.mlir.constant(2 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_ctx_bucket_add(%arg0, %[[PART]], %[[BUCKET]], %[[AT]], %[[FROM]], %[[TAKE]])
// CHECK-NEXT: %[[PARTITION:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[BEGIN:.*]] = llvm.mlir.constant(0 : i64) : i64
// CHECK-NEXT: %[[END:.*]] = llvm.mlir.constant(2 : i64) : i64
// CHECK-NEXT: %[[TO_OWNERS:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[SLOT:.*]] = llvm.mlir.constant(-1 : i32) : i32
// CHECK-NEXT: llvm.call @zrt_ctx_reduce_bucket(%arg0, %[[PARTITION]], %[[BEGIN]], %[[END]], %[[BUCKET]], %[[TO_OWNERS]], %[[SLOT]])
// CHECK-NOT:  llvm.call @zrt_ctx_reduce_bucket
// CHECK-LABEL: llvm.func @zero_boundary
// CHECK-NOT:  llvm.call @zrt_ctx_reduce_bucket

module @bucket_reduce_scatter {
  zero.param @w : tensor<4x2xf32> init zeros
  zero.param @b : tensor<2xf32> init zeros
  zero.partition @flat stage 2 world_size 2 alignment 2 numel 10 padded 12 params [@w, @b] offsets [0, 8]
  zero.train_step @train(%x: tensor<2x4xf32>, %dy: tensor<2x2xf32>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 4> {
    %db = nn.reduce_sum %dy : tensor<2x2xf32> -> tensor<2xf32>
    zero.grad @b, %db : tensor<2xf32>
    %dw = nn.matmul %x, %dy transpose_lhs : tensor<2x4xf32>, tensor<2x2xf32> -> tensor<4x2xf32>
    zero.grad @w, %dw : tensor<4x2xf32>
    %t = zero.reduce_scatter group @flat [2, 10) from %dw, %db at [2, 0] : tensor<4x2xf32>, tensor<2xf32> -> !zero.token
    zero.wait %t
    zero.free %dw[2, 6] : tensor<4x2xf32>
    zero.free %db : tensor<2xf32>
    zero.reduce_scatter group @flat [0, 2) from %dw at [0] : tensor<4x2xf32>
    zero.free %dw[0, 2] : tensor<4x2xf32>
    %loss = nn.fill 0.0 : tensor<f32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 2.0 phase boundary : tensor<2xf32>
    %sum = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
    %skip = zero.update_loss_scale %sum phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @flat stats %sum scale %ls skip %skip divisor 2.0 phase boundary : tensor<2xf32>
    zero.all_gather group @flat in params [0, 10) phase post_step
    zero.return %loss : tensor<f32>
  }
}

// -----

// zero.reduce (DeepSpeed's reduce_scatter=false) lowers like the source form
// of zero.reduce_scatter, with to_owners = 1.

// CHECK-LABEL: module @bucket_reduce
// CHECK-LABEL: llvm.func @zero_micro_step
// CHECK:      llvm.call @zrt_matmul(
// CHECK:      %[[BUCKET:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      llvm.call @zrt_ctx_bucket_add(%arg0, %{{[0-9]+}}, %[[BUCKET]],
// CHECK-NEXT: %[[PARTITION:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[BEGIN:.*]] = llvm.mlir.constant(0 : i64) : i64
// CHECK-NEXT: %[[END:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-NEXT: %[[TO_OWNERS:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[SLOT:.*]] = llvm.mlir.constant(-1 : i32) : i32
// CHECK-NEXT: llvm.call @zrt_ctx_reduce_bucket(%arg0, %[[PARTITION]], %[[BEGIN]], %[[END]], %[[BUCKET]], %[[TO_OWNERS]], %[[SLOT]])

module @bucket_reduce {
  zero.param @w : tensor<4x2xf32> init zeros
  zero.partition @flat stage 2 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
  zero.train_step @train(%x: tensor<2x4xf32>, %dy: tensor<2x2xf32>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 4> {
    %dw = nn.matmul %x, %dy transpose_lhs : tensor<2x4xf32>, tensor<2x2xf32> -> tensor<4x2xf32>
    zero.grad @w, %dw : tensor<4x2xf32>
    zero.reduce group @flat [0, 8) from %dw at [0] : tensor<4x2xf32>
    zero.free %dw : tensor<4x2xf32>
    %loss = nn.fill 0.0 : tensor<f32>
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

// Stage 1, two partitions: the in-place reductions of the persistent grads
// buffer (zrt_ctx_reduce_scatter_grads) and the post-step gathers of the
// persistent params buffer (zrt_ctx_all_gather_params) run at the boundary,
// after the micro steps, each with its partition's index (@second is 1),
// its range and its slot: the asynchronous ones take slots 0 and 1 and are
// waited.

// CHECK-LABEL: module @in_place_stage1
// CHECK-LABEL: llvm.func @zero_micro_step
// CHECK-NOT:  llvm.call @zrt_ctx_reduce_scatter_grads
// CHECK-LABEL: llvm.func @zero_boundary
// CHECK:      %[[PARTITION:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[BEGIN:.*]] = llvm.mlir.constant(0 : i64) : i64
// CHECK-NEXT: %[[END:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-NEXT: %[[SLOT:.*]] = llvm.mlir.constant(-1 : i32) : i32
// CHECK-NEXT: llvm.call @zrt_ctx_reduce_scatter_grads(%arg0, %[[PARTITION]], %[[BEGIN]], %[[END]], %[[SLOT]])
// CHECK:      %[[PARTITION:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[BEGIN:.*]] = llvm.mlir.constant(2 : i64) : i64
// CHECK-NEXT: %[[END:.*]] = llvm.mlir.constant(6 : i64) : i64
// CHECK-NEXT: %[[SLOT:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: llvm.call @zrt_ctx_reduce_scatter_grads(%arg0, %[[PARTITION]], %[[BEGIN]], %[[END]], %[[SLOT]])
// CHECK:      %[[SLOT:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: llvm.call @zrt_ctx_wait(%arg0, %[[SLOT]])
// CHECK:      %[[PARTITION:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[BEGIN:.*]] = llvm.mlir.constant(0 : i64) : i64
// CHECK-NEXT: %[[END:.*]] = llvm.mlir.constant(2 : i64) : i64
// CHECK-NEXT: %[[SLOT:.*]] = llvm.mlir.constant(-1 : i32) : i32
// CHECK-NEXT: llvm.call @zrt_ctx_reduce_scatter_grads(%arg0, %[[PARTITION]], %[[BEGIN]], %[[END]], %[[SLOT]])
// CHECK:      llvm.call @zrt_ctx_optimizer_step(
// CHECK:      llvm.call @zrt_ctx_optimizer_step(
// CHECK:      %[[PARTITION:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[BEGIN:.*]] = llvm.mlir.constant(0 : i64) : i64
// CHECK-NEXT: %[[END:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-NEXT: %[[SLOT:.*]] = llvm.mlir.constant(-1 : i32) : i32
// CHECK-NEXT: llvm.call @zrt_ctx_all_gather_params(%arg0, %[[PARTITION]], %[[BEGIN]], %[[END]], %[[SLOT]])
// CHECK:      %[[PARTITION:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[BEGIN:.*]] = llvm.mlir.constant(0 : i64) : i64
// CHECK-NEXT: %[[END:.*]] = llvm.mlir.constant(6 : i64) : i64
// CHECK-NEXT: %[[SLOT:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: llvm.call @zrt_ctx_all_gather_params(%arg0, %[[PARTITION]], %[[BEGIN]], %[[END]], %[[SLOT]])
// CHECK:      %[[SLOT:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: llvm.call @zrt_ctx_wait(%arg0, %[[SLOT]])

module @in_place_stage1 {
  zero.param @w : tensor<4x2xf32> init zeros
  zero.param @v : tensor<6xf32> init zeros
  zero.partition @first stage 1 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
  zero.partition @second stage 1 world_size 2 alignment 2 numel 6 padded 8 params [@v] offsets [0]
  zero.train_step @train(%x: tensor<2x4xf32>, %dy: tensor<2x2xf32>, %dv: tensor<2x6xf32>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 1, world_size = 2, global_batch = 4> {
    %dw = nn.matmul %x, %dy transpose_lhs : tensor<2x4xf32>, tensor<2x2xf32> -> tensor<4x2xf32>
    zero.grad @w, %dw : tensor<4x2xf32>
    %gv = nn.reduce_sum %dv : tensor<2x6xf32> -> tensor<6xf32>
    zero.grad @v, %gv : tensor<6xf32>
    zero.reduce_scatter group @first in grads [0, 8) phase boundary
    %t = zero.reduce_scatter group @second in grads [2, 6) phase boundary -> !zero.token
    zero.wait %t phase boundary
    zero.reduce_scatter group @second in grads [0, 2) phase boundary
    %loss = nn.fill 0.0 : tensor<f32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@first, @second] scale %ls divisor 2.0 phase boundary : tensor<2xf32>
    %sum = zero.all_reduce overflow_norm %st group @first phase boundary : tensor<2xf32> -> tensor<2xf32>
    %skip = zero.update_loss_scale %sum phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @first stats %sum scale %ls skip %skip divisor 2.0 phase boundary : tensor<2xf32>
    zero.optimizer_step group @second stats %sum scale %ls skip %skip divisor 2.0 phase boundary : tensor<2xf32>
    zero.all_gather group @first in params [0, 8) phase post_step
    %g = zero.all_gather group @second in params [0, 6) phase post_step -> !zero.token
    zero.wait %g phase post_step
    zero.return %loss : tensor<f32>
  }
}

// -----

// Stage 1 with reduce-scatter=false: a zero.reduce in place becomes
// zrt_ctx_reduce_grads (the same reduce-scatter of the grads buffer, whose
// bytes the runtime counts as the report's reduce).

// CHECK-LABEL: module @in_place_reduce_stage1
// CHECK-LABEL: llvm.func @zero_boundary
// CHECK-NOT:  llvm.call @zrt_ctx_reduce_scatter_grads
// CHECK:      %[[PARTITION:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[BEGIN:.*]] = llvm.mlir.constant(0 : i64) : i64
// CHECK-NEXT: %[[END:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-NEXT: %[[SLOT:.*]] = llvm.mlir.constant(-1 : i32) : i32
// CHECK-NEXT: llvm.call @zrt_ctx_reduce_grads(%arg0, %[[PARTITION]], %[[BEGIN]], %[[END]], %[[SLOT]])
// CHECK-NOT:  llvm.call @zrt_ctx_reduce_scatter_grads
// CHECK:      llvm.call @zrt_ctx_optimizer_step(

module @in_place_reduce_stage1 {
  zero.param @w : tensor<4x2xf32> init zeros
  zero.partition @first stage 1 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
  zero.train_step @train(%x: tensor<2x4xf32>, %dy: tensor<2x2xf32>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 1, world_size = 2, global_batch = 4> {
    %dw = nn.matmul %x, %dy transpose_lhs : tensor<2x4xf32>, tensor<2x2xf32> -> tensor<4x2xf32>
    zero.grad @w, %dw : tensor<4x2xf32>
    zero.reduce group @first in grads [0, 8) phase boundary
    %loss = nn.fill 0.0 : tensor<f32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@first] scale %ls divisor 2.0 phase boundary : tensor<2xf32>
    %sum = zero.all_reduce overflow_norm %st group @first phase boundary : tensor<2xf32> -> tensor<2xf32>
    %skip = zero.update_loss_scale %sum phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @first stats %sum scale %ls skip %skip divisor 2.0 phase boundary : tensor<2xf32>
    zero.all_gather group @first in params [0, 8) phase post_step
    zero.return %loss : tensor<f32>
  }
}

// -----

// Stage 0: the in-place all-reduce of the full grads buffer, asynchronous
// (slot 0), at the boundary.

// CHECK-LABEL: module @all_reduce_stage0
// CHECK-LABEL: llvm.func @zero_boundary
// CHECK:      %[[PARTITION:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[BEGIN:.*]] = llvm.mlir.constant(0 : i64) : i64
// CHECK-NEXT: %[[END:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-NEXT: %[[SLOT:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: llvm.call @zrt_ctx_all_reduce_grads(%arg0, %[[PARTITION]], %[[BEGIN]], %[[END]], %[[SLOT]])
// CHECK:      %[[SLOT:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: llvm.call @zrt_ctx_wait(%arg0, %[[SLOT]])

module @all_reduce_stage0 {
  zero.param @w : tensor<4x2xf32> init zeros
  zero.partition @flat stage 0 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
  zero.train_step @train(%x: tensor<2x4xf32>, %dy: tensor<2x2xf32>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 0, world_size = 2, global_batch = 4> {
    %dw = nn.matmul %x, %dy transpose_lhs : tensor<2x4xf32>, tensor<2x2xf32> -> tensor<4x2xf32>
    zero.grad @w, %dw : tensor<4x2xf32>
    %t = zero.all_reduce sum group @flat in grads [0, 8) phase boundary token !zero.token
    zero.wait %t phase boundary
    %loss = nn.fill 0.0 : tensor<f32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 2.0 phase boundary : tensor<2xf32>
    %skip = zero.update_loss_scale %st phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @flat stats %st scale %ls skip %skip divisor 2.0 phase boundary : tensor<2xf32>
    zero.return %loss : tensor<f32>
  }
}

// -----

// Stage 3: the value forms gather a group's shards into a buffer of the step
// arena (zrt_ctx_gather_partition: the partition, the buffer, the slot): a
// persistent prefetch of @fc2 (partition 1, slot 0) and a synchronous
// zero.all_gather of @fc1 (partition 0, slot -1). A parameter read from a
// gathered group points into the buffer at the parameter's offset: @w1 at
// its start, @b1 8 floats (32 bytes) in.

// CHECK-LABEL: module @stage3_gathers
// CHECK-LABEL: llvm.func @zero_micro_step
// CHECK:      %[[P2:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[PARTITION:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[SLOT:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: llvm.call @zrt_ctx_gather_partition(%arg0, %[[PARTITION]], %[[P2]], %[[SLOT]])
// CHECK:      llvm.call @zrt_ctx_trace_live(
// CHECK-NEXT: %[[P1OFF:.*]] = llvm.mlir.constant([[#G1:]] : i64) : i64
// CHECK-NEXT: %[[P1:.*]] = llvm.call @zrt_ctx_step(%arg0, %[[P1OFF]])
// CHECK-NEXT: %[[PARTITION:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[SLOT:.*]] = llvm.mlir.constant(-1 : i32) : i32
// CHECK-NEXT: llvm.call @zrt_ctx_gather_partition(%arg0, %[[PARTITION]], %[[P1]], %[[SLOT]])
// CHECK:      %[[X:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[W1OFF:.*]] = llvm.mlir.constant([[#G1]] : i64) : i64
// CHECK-NEXT: %[[W1:.*]] = llvm.call @zrt_ctx_step(%arg0, %[[W1OFF]])
// CHECK:      llvm.call @zrt_matmul(
// CHECK-SAME: %[[W1]]
// CHECK:      llvm.call @zrt_ctx_trace_live(
// CHECK-NEXT: %[[B1OFF:.*]] = llvm.mlir.constant([[#G1+32]] : i64) : i64
// CHECK-NEXT: %[[B1:.*]] = llvm.call @zrt_ctx_step(%arg0, %[[B1OFF]])
// CHECK:      llvm.call @zrt_add(
// CHECK-SAME: %[[B1]]
// CHECK:      %[[SLOT:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: llvm.call @zrt_ctx_wait(%arg0, %[[SLOT]])
// CHECK-NOT:  llvm.call @zrt_ctx_gather_partition
// CHECK-LABEL: llvm.func @zero_boundary

module @stage3_gathers {
  zero.param @w1 : tensor<4x2xf32> init zeros
  zero.param @b1 : tensor<2xf32> init zeros
  zero.param @w2 : tensor<2x2xf32> init zeros
  zero.partition @fc1 stage 3 world_size 2 alignment 2 numel 10 padded 12 params [@w1, @b1] offsets [0, 8]
  zero.partition @fc2 stage 3 world_size 2 alignment 2 numel 4 padded 4 params [@w2] offsets [0]
  zero.train_step @train(%x: tensor<2x4xf32>, %dy: tensor<2x2xf32>, %dh: tensor<2x2xf32>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4> {
    %p2, %t2 = zero.prefetch group @fc2 persistent : tensor<4xf32>
    %p1 = zero.all_gather group @fc1 : tensor<12xf32>
    %w1 = zero.get_param @w1 from %p1 : tensor<12xf32> -> tensor<4x2xf32>
    %b1 = zero.get_param @b1 from %p1 : tensor<12xf32> -> tensor<2xf32>
    %h = nn.matmul %x, %w1 : tensor<2x4xf32>, tensor<4x2xf32> -> tensor<2x2xf32>
    %hb = nn.add %h, %b1 : tensor<2x2xf32>, tensor<2xf32>
    zero.free %p1 : tensor<12xf32>
    zero.wait %t2
    %w2 = zero.get_param @w2 from %p2 : tensor<4xf32> -> tensor<2x2xf32>
    %y = nn.matmul %hb, %w2 : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
    %dw2 = nn.matmul %hb, %dy transpose_lhs : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
    zero.grad @w2, %dw2 : tensor<2x2xf32>
    zero.reduce_scatter group @fc2 [0, 4) from %dw2 at [0] : tensor<2x2xf32>
    zero.free %dw2 : tensor<2x2xf32>
    %dw1 = nn.matmul %x, %dh transpose_lhs : tensor<2x4xf32>, tensor<2x2xf32> -> tensor<4x2xf32>
    zero.grad @w1, %dw1 : tensor<4x2xf32>
    %db1 = nn.reduce_sum %dh : tensor<2x2xf32> -> tensor<2xf32>
    zero.grad @b1, %db1 : tensor<2xf32>
    zero.reduce_scatter group @fc1 [0, 10) from %dw1, %db1 at [0, 0] : tensor<4x2xf32>, tensor<2xf32>
    zero.free %dw1 : tensor<4x2xf32>
    zero.free %db1 : tensor<2xf32>
    %loss = nn.fill 0.0 : tensor<f32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@fc1, @fc2] scale %ls divisor 2.0 phase boundary : tensor<2xf32>
    %sum = zero.all_reduce overflow_norm %st group @fc1 phase boundary : tensor<2xf32> -> tensor<2xf32>
    %skip = zero.update_loss_scale %sum phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @fc1 stats %sum scale %ls skip %skip divisor 2.0 phase boundary : tensor<2xf32>
    zero.optimizer_step group @fc2 stats %sum scale %ls skip %skip divisor 2.0 phase boundary : tensor<2xf32>
    zero.free %p2 phase step_end : tensor<4xf32>
    zero.return %loss : tensor<f32>
  }
}
