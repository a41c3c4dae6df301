// RUN: zero-opt %s -split-input-file --zero-verify-schedule -o /dev/null
// RUN: zero-opt %s -split-input-file --convert-zero-to-runtime | FileCheck %s

// Stage 0 under expert parallelism (ep 2 on 2 ranks): the expert
// partition's stats (first = 1) are all-reduced over rank set 5
// (ZRT_RANKS_EXPERT) into their own buffer; the dense check copies them (an
// f32-to-f32 zrt_cast of 2 elements, dtype 0) into its result and
// accumulates onto them (first = 0), and every later call reads that result.

// CHECK-LABEL: module @expert_stats
// CHECK-LABEL: llvm.func @zero_boundary
// CHECK:      %[[LS:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: llvm.call @zrt_ctx_loss_scale(%arg0, %[[LS]])
// CHECK:      %[[E:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[PARTITION:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[FIRST:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[DIVISOR:.*]] = llvm.mlir.constant(2.000000e+00 : f64) : f64
// CHECK-NEXT: llvm.call @zrt_ctx_check_overflow(%arg0, %[[PARTITION]], %[[FIRST]], %[[LS]], %[[DIVISOR]], %[[E]])
// CHECK:      %[[R:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[RANKS:.*]] = llvm.mlir.constant(5 : i32) : i32
// CHECK-NEXT: %[[SLOT:.*]] = llvm.mlir.constant(-1 : i32) : i32
// CHECK-NEXT: llvm.call @zrt_ctx_all_reduce_stats(%arg0, %[[RANKS]], %[[E]], %[[R]], %[[SLOT]])
// CHECK:      %[[G:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[F32:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[F32B:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[TWO:.*]] = llvm.mlir.constant(2 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_cast(%[[F32]], %[[R]], %[[F32B]], %[[G]], %[[TWO]])
// CHECK-NEXT: %[[PARTITION:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[FIRST:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[DIVISOR:.*]] = llvm.mlir.constant(2.000000e+00 : f64) : f64
// CHECK-NEXT: llvm.call @zrt_ctx_check_overflow(%arg0, %[[PARTITION]], %[[FIRST]], %[[LS]], %[[DIVISOR]], %[[G]])
// CHECK:      %[[SKIP:.*]] = llvm.call @zrt_ctx_update_loss_scale(%arg0, %[[G]])
// CHECK:      llvm.call @zrt_ctx_optimizer_step(%arg0, %{{.*}}, %[[G]], %[[LS]], %[[SKIP]], %{{.*}})
// CHECK:      llvm.call @zrt_ctx_optimizer_step(%arg0, %{{.*}}, %[[G]], %[[LS]], %[[SKIP]], %{{.*}})
// CHECK-NOT:  llvm.call @zrt_ctx_all_reduce_stats
// CHECK-LABEL: llvm.func @zero_eval_step

module @expert_stats {
  zero.param @d.w : tensor<4xf32> init zeros
  zero.param @e.w : tensor<2x4xf32> init zeros
  zero.partition @d stage 0 world_size 2 alignment 1 numel 4 padded 4 params [@d.w] offsets [0]
  zero.partition @e stage 0 world_size 1 alignment 1 numel 8 padded 8 params [@e.w] offsets [0] expert
  zero.train_step @train(%x: tensor<2x4xf32>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 0, world_size = 2, global_batch = 4, mesh = #zero.mesh<[data = 1, expert = 2]>> {
    %loss = nn.fill 0.0 : tensor<f32>
    %gd = nn.reduce_sum %x : tensor<2x4xf32> -> tensor<4xf32>
    zero.grad @d.w, %gd : tensor<4xf32>
    %ge = nn.fill 1.0 : tensor<2x4xf32>
    zero.grad @e.w, %ge : tensor<2x4xf32>
    zero.all_reduce sum group @d in grads [0, 4) phase boundary
    zero.all_reduce sum group @e in grads [0, 8) phase boundary
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %e = zero.check_overflow groups [@e] scale %ls divisor 2.0 phase boundary : tensor<2xf32>
    %r = zero.all_reduce overflow_norm %e group @e across expert phase boundary : tensor<2xf32> -> tensor<2xf32>
    %g = zero.check_overflow groups [@d] scale %ls divisor 2.0 combine %r phase boundary : tensor<2xf32>
    %skip = zero.update_loss_scale %g phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @d stats %g scale %ls skip %skip divisor 2.0 phase boundary : tensor<2xf32>
    zero.optimizer_step group @e stats %g scale %ls skip %skip divisor 2.0 phase boundary : tensor<2xf32>
    zero.return %loss : tensor<f32>
  }
}
