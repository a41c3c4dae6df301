// RUN: zero-opt %s --zero-verify-schedule -o /dev/null
// RUN: zero-opt %s --convert-zero-to-runtime | FileCheck %s

// MiCS: each partition's replica sum becomes zrt_ctx_all_reduce_replicas
// (the partition, its element range, the token's slot) in the boundary
// function, before the overflow check; the manifest carries the shard
// groups in its topology.

// CHECK-LABEL: llvm.func @zero_boundary
// CHECK:      %[[P0:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[B0:.*]] = llvm.mlir.constant(0 : i64) : i64
// CHECK-NEXT: %[[E0:.*]] = llvm.mlir.constant(4 : i64) : i64
// CHECK-NEXT: %[[S0:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: llvm.call @zrt_ctx_all_reduce_replicas(%arg0, %[[P0]], %[[B0]], %[[E0]], %[[S0]])
// CHECK:      %[[P1:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[B1:.*]] = llvm.mlir.constant(0 : i64) : i64
// CHECK-NEXT: %[[E1:.*]] = llvm.mlir.constant(6 : i64) : i64
// CHECK-NEXT: %[[S1:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: llvm.call @zrt_ctx_all_reduce_replicas(%arg0, %[[P1]], %[[B1]], %[[E1]], %[[S1]])
// CHECK:      llvm.call @zrt_ctx_wait
// CHECK:      llvm.call @zrt_ctx_wait
// CHECK:      llvm.call @zrt_ctx_check_overflow
// CHECK:      llvm.call @zrt_ctx_all_reduce_stats
// CHECK:      llvm.func @zrt_ctx_all_reduce_replicas(!llvm.ptr, i32, i64, i64, i32)
// CHECK:      \22topology\22:{\22hpz_partition_size\22:1,\22mics_shard_size\22:2,\22ranks_per_node\22:0}
module {
  zero.param @a.w : tensor<4xf32> init zeros
  zero.param @b.w : tensor<6xf32> init zeros
  zero.partition @a stage 3 world_size 2 alignment 2 numel 4 padded 4 params [@a.w] offsets [0]
  zero.partition @b stage 3 world_size 2 alignment 2 numel 6 padded 8 params [@b.w] offsets [0]
  zero.train_step @mics(%arg0: tensor<1x4xf32>) optimizer #zero.optimizer<kind = adam, lr = 1.000000e-03> precision #zero.precision<kind = fp32> schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 4, mesh = #zero.mesh<[data = 2, mics = 2]>> {
    %result = zero.all_gather group @a persistent : tensor<4xf32>
    %result_0 = zero.all_gather group @b persistent : tensor<8xf32>
    %0 = zero.get_param @a.w from %result : tensor<4xf32> -> tensor<4xf32>
    %1 = zero.get_param @b.w from %result_0 : tensor<8xf32> -> tensor<6xf32>
    %2 = nn.fill 0.000000e+00 : tensor<f32>
    %3 = nn.fill 1.000000e+00 {zero.loss_seed} : tensor<f32>
    %4 = nn.fill 1.000000e+00 : tensor<4xf32>
    zero.grad @a.w, %4 : tensor<4xf32>
    zero.reduce_scatter group @a [0, 4) from %4 at [0] : tensor<4xf32>
    zero.free %4 : tensor<4xf32>
    %5 = nn.fill 1.000000e+00 : tensor<6xf32>
    zero.grad @b.w, %5 : tensor<6xf32>
    zero.reduce_scatter group @b [0, 6) from %5 at [0] : tensor<6xf32>
    zero.free %5 : tensor<6xf32>
    %token = zero.all_reduce sum group @a in grads [0, 4) over replicas phase  boundary token !zero.token
    %token_1 = zero.all_reduce sum group @b in grads [0, 6) over replicas phase  boundary token !zero.token
    zero.wait %token phase  boundary
    zero.wait %token_1 phase  boundary
    %6 = zero.loss_scale phase  boundary : tensor<f32>
    %7 = zero.check_overflow groups [@a, @b] scale %6 divisor 4.000000e+00 phase  boundary : tensor<2xf32>
    %result_2 = zero.all_reduce overflow_norm %7 group @a phase  boundary : tensor<2xf32> -> tensor<2xf32>
    %8 = zero.update_loss_scale %result_2 phase  boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @a stats %result_2 scale %6 skip %8 divisor 4.000000e+00 phase  boundary : tensor<2xf32>
    zero.optimizer_step group @b stats %result_2 scale %6 skip %8 divisor 4.000000e+00 phase  boundary : tensor<2xf32>
    zero.free %result phase step_end : tensor<4xf32>
    zero.free %result_0 phase step_end : tensor<8xf32>
    zero.return %2 : tensor<f32>
  }
}

