// The fuzz finding of ../invalid-utf8-manifest.test as zero-fuzz found it
// (offload.mlir of test/Conversion/ZeroToRuntime with the byte 0xCB, kept
// raw, in its param_nvme_path), and a seed scripts/fuzz-seeds.py replays.

// Parameters on NVMe (stage 3): the shard is read from the swap file through
// swap buffer 1 of 4096 bytes into the staged buffer (to_file = 0), and the
// new parameters are written back from their step buffer through swap
// buffer 0 (to_file = 1).

// CHECK-LABEL: module @params_on_nvme
// CHECK-LABEL: llvm.func @zero_micro_step
// CHECK:      %[[STAGED:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[PARTITION:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[FROM:.*]] = llvm.mlir.constant(-1 : i32) : i32
// CHECK-NEXT: %[[TO_FILE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[BUFFER:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[BUFFER_BYTES:.*]] = llvm.mlir.constant(4096 : i64) : i64
// CHECK-NEXT: %[[SLOT:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: llvm.call @zrt_ctx_swap_params(%arg0, %[[PARTITION]], %[[STAGED]], %[[FROM]], %[[TO_FILE]], %[[BUFFER]], %[[BUFFER_BYTES]], %[[SLOT]])
// CHECK:      llvm.call @zrt_ctx_gather_staged(%arg0, %{{.*}}, %[[STAGED]],
// CHECK-LABEL: llvm.func @zero_boundary
// CHECK:      llvm.call @zrt_ctx_optimizer_step_staged({{.*}}, %[[NEW:[0-9]+]])
// CHECK:      %[[PARTITION:.*]] = llvm.mlir.constant(5 : i32) : i32
// CHECK-NEXT: %[[FROM:.*]] = llvm.mlir.constant(-1 : i32) : i32
// CHECK-NEXT: %[[TO_FILE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[BUFFER:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[BUFFER_BYTES:.*]] = llvm.mlir.constant(4096 : i64) : i64
// CHECK-NEXT: %[[SLOT:.*]] = llvm.mlir.constant(2 : i32) : i32
// CHECK-NEXT: llvm.call @zrt_ctx_swap_params(%arg0, %[[PARTITION]], %[[NEW]], %[[FROM]], %[[TO_FILE]], %[[BUFFER]], %[[BUFFER_BYTES]], %[[SLOT]])

module @params_on_nvme {
  zero.param @w : tensor<4x2xf32> init zeros compute bf16
  zero.partition @flat stage 3 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
  zero.train_step @train(%x: tensor<2x4xbf16>, %dy: tensor<2x2xbf16>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = bf16>
      schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4>
      offload #zero.offload<param = nvme, param_nvme_path = "/nvËe", param_buffer_count = 2> {
    %s1, %t1 = zero.transfer group @flat params to staging swap <buffer = 1, buffers = 2, buffer_bytes = 4096> : tensor<4xbf16> -> !zero.token
    zero.wait %t1
    %full, %t2 = zero.prefetch group @flat from %s1 : tensor<4xbf16> : tensor<8xbf16>
    zero.wait %t2
    zero.free %s1 : tensor<4xbf16>
    %w = zero.get_param @w from %full : tensor<8xbf16> -> tensor<4x2xbf16>
    %y = nn.matmul %x, %w : tensor<2x4xbf16>, tensor<4x2xbf16> -> tensor<2x2xbf16>
    zero.free %full : tensor<8xbf16>
    %dw = nn.matmul %x, %dy transpose_lhs : tensor<2x4xbf16>, tensor<2x2xbf16> -> tensor<4x2xbf16>
    zero.grad @w, %dw : tensor<4x2xbf16>
    zero.reduce_scatter group @flat [0, 8) from %dw at [0] : tensor<4x2xbf16>
    zero.free %dw : tensor<4x2xbf16>
    %loss = nn.fill 0.0 : tensor<f32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 2.0 phase boundary : tensor<2xf32>
    %sum = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
    %skip = zero.update_loss_scale %sum phase boundary : tensor<2xf32> -> i1
    %new = zero.optimizer_step group @flat stats %sum scale %ls skip %skip divisor 2.0 phase boundary : tensor<2xf32> -> tensor<4xbf16>
    %up = zero.transfer group @flat %new to params swap <buffer = 0, buffers = 2, buffer_bytes = 4096> phase boundary : tensor<4xbf16> -> !zero.token
    zero.wait %up phase boundary
    zero.free %new phase boundary : tensor<4xbf16>
    zero.return %loss : tensor<f32>
  }
}

