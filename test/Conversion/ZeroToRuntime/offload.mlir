// RUN: zero-opt %s -split-input-file --zero-verify-schedule -o /dev/null
// RUN: zero-opt %s -split-input-file --convert-zero-to-runtime | FileCheck %s

// zero.transfer, the copies of offloaded model states, as calls of the
// runtime's context. Between persistent buffers (zrt_ctx_transfer) it passes
// the partition, the source and target buffers (BufferKind: params 0,
// grads 1, master 2, host_grads 5, host_params 6), the layout range and the
// slot; a staged parameter shard (zrt_ctx_stage_params) passes its step
// buffer and the direction (1: to the host); a shard in an NVMe swap file
// (zrt_ctx_swap_params) its step buffer (null when there is none), the host
// buffer a write takes the new parameters from (-1: none, the step buffer
// or a read), the direction (1: to the file), its swap buffer and the
// buffers' size. A stage-3 gather from a staged shard is
// zrt_ctx_gather_staged.

// The optimizer on the host at stage 1 (fp32): after the reduce-scatter
// (slot 0) the owned gradients of [0, 10) go to host_grads (slot 1); after the
// host Adam the fp32 masters come back to params (no range: the whole layout,
// [0, numel); slot 2).

// CHECK-LABEL: module @optimizer_on_host
// CHECK-LABEL: llvm.func @zero_boundary
// CHECK:      llvm.call @zrt_ctx_wait(
// CHECK:      %[[PARTITION:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[FROM:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[TO:.*]] = llvm.mlir.constant(6 : i32) : i32
// CHECK-NEXT: %[[BEGIN:.*]] = llvm.mlir.constant(0 : i64) : i64
// CHECK-NEXT: %[[END:.*]] = llvm.mlir.constant(10 : i64) : i64
// CHECK-NEXT: %[[SLOT:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: llvm.call @zrt_ctx_transfer(%arg0, %[[PARTITION]], %[[FROM]], %[[TO]], %[[BEGIN]], %[[END]], %[[SLOT]])
// CHECK:      llvm.call @zrt_ctx_optimizer_step_host(
// CHECK:      %[[PARTITION:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[FROM:.*]] = llvm.mlir.constant(2 : i32) : i32
// CHECK-NEXT: %[[TO:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[BEGIN:.*]] = llvm.mlir.constant(0 : i64) : i64
// CHECK-NEXT: %[[END:.*]] = llvm.mlir.constant(10 : i64) : i64
// CHECK-NEXT: %[[SLOT:.*]] = llvm.mlir.constant(2 : i32) : i32
// CHECK-NEXT: llvm.call @zrt_ctx_transfer(%arg0, %[[PARTITION]], %[[FROM]], %[[TO]], %[[BEGIN]], %[[END]], %[[SLOT]])

module @optimizer_on_host {
  zero.param @w : tensor<4x2xf32> init zeros
  zero.param @b : tensor<2xf32> init zeros
  zero.partition @flat stage 1 world_size 2 alignment 2 numel 10 padded 12 params [@w, @b] offsets [0, 8]
  zero.train_step @train(%x: tensor<2x4xf32>, %dy: tensor<2x2xf32>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 1, world_size = 2, global_batch = 4>
      offload #zero.offload<optimizer = cpu> {
    %loss = nn.fill 0.0 : tensor<f32>
    %dw = nn.matmul %x, %dy transpose_lhs : tensor<2x4xf32>, tensor<2x2xf32> -> tensor<4x2xf32>
    zero.grad @w, %dw : tensor<4x2xf32>
    %db = nn.reduce_sum %dy : tensor<2x2xf32> -> tensor<2xf32>
    zero.grad @b, %db : tensor<2xf32>
    %rs = zero.reduce_scatter group @flat in grads [0, 10) phase boundary -> !zero.token
    zero.wait %rs phase boundary
    %down = zero.transfer group @flat grads[0, 10) to host_grads phase boundary -> !zero.token
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 2.0 phase boundary : tensor<2xf32>
    %sum = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
    %skip = zero.update_loss_scale %sum phase boundary : tensor<2xf32> -> i1
    zero.wait %down phase boundary
    zero.optimizer_step group @flat stats %sum scale %ls skip %skip divisor 2.0 host phase boundary : tensor<2xf32>
    %up = zero.transfer group @flat master to params phase boundary -> !zero.token
    zero.wait %up phase boundary
    zero.all_gather group @flat in params [0, 10) phase post_step
    zero.return %loss : tensor<f32>
  }
}

// -----

// Parameters on the host (stage 3): each gather first stages the shard in a
// step buffer (to_host = 0), then gathers from it, asynchronously (a prefetch,
// slots 0 and 1) or not (an all_gather, slot -1); the new parameters the
// device Adam wrote go back to the host shard (to_host = 1, slot 3).

// CHECK-LABEL: module @params_on_host
// CHECK-LABEL: llvm.func @zero_micro_step
// CHECK:      %[[STAGED:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[PARTITION:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[TO_HOST:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[SLOT:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: llvm.call @zrt_ctx_stage_params(%arg0, %[[PARTITION]], %[[STAGED]], %[[TO_HOST]], %[[SLOT]])
// CHECK:      %[[FULL:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[PARTITION:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[SLOT:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: llvm.call @zrt_ctx_gather_staged(%arg0, %[[PARTITION]], %[[STAGED]], %[[FULL]], %[[SLOT]])
// CHECK:      llvm.call @zrt_matmul(
// CHECK:      %[[STAGED2:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[PARTITION:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[TO_HOST:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[SLOT:.*]] = llvm.mlir.constant(2 : i32) : i32
// CHECK-NEXT: llvm.call @zrt_ctx_stage_params(%arg0, %[[PARTITION]], %[[STAGED2]], %[[TO_HOST]], %[[SLOT]])
// CHECK:      %[[AGAIN:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[PARTITION:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[SLOT:.*]] = llvm.mlir.constant(-1 : i32) : i32
// CHECK-NEXT: llvm.call @zrt_ctx_gather_staged(%arg0, %[[PARTITION]], %[[STAGED2]], %[[AGAIN]], %[[SLOT]])
// CHECK-LABEL: llvm.func @zero_boundary
// CHECK:      llvm.call @zrt_ctx_optimizer_step_staged({{.*}}, %[[NEW:[0-9]+]])
// CHECK:      %[[PARTITION:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[TO_HOST:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[SLOT:.*]] = llvm.mlir.constant(3 : i32) : i32
// CHECK-NEXT: llvm.call @zrt_ctx_stage_params(%arg0, %[[PARTITION]], %[[NEW]], %[[TO_HOST]], %[[SLOT]])

module @params_on_host {
  zero.param @w : tensor<4x2xf32> init zeros compute bf16
  zero.partition @flat stage 3 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
  zero.train_step @train(%x: tensor<2x4xbf16>, %dy: tensor<2x2xbf16>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = bf16>
      schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4>
      offload #zero.offload<param = cpu> {
    %s1, %t1 = zero.transfer group @flat params to staging : tensor<4xbf16> -> !zero.token
    zero.wait %t1
    %full, %t2 = zero.prefetch group @flat from %s1 : tensor<4xbf16> : tensor<8xbf16>
    zero.wait %t2
    zero.free %s1 : tensor<4xbf16>
    %w = zero.get_param @w from %full : tensor<8xbf16> -> tensor<4x2xbf16>
    %y = nn.matmul %x, %w : tensor<2x4xbf16>, tensor<4x2xbf16> -> tensor<2x2xbf16>
    zero.free %full : tensor<8xbf16>
    %s2, %t3 = zero.transfer group @flat params to staging : tensor<4xbf16> -> !zero.token
    zero.wait %t3
    %again = zero.all_gather group @flat from %s2 : tensor<4xbf16> : tensor<8xbf16>
    zero.free %s2 : tensor<4xbf16>
    %w2 = zero.get_param @w from %again : tensor<8xbf16> -> tensor<4x2xbf16>
    %dx = nn.matmul %dy, %w2 transpose_rhs : tensor<2x2xbf16>, tensor<4x2xbf16> -> tensor<2x4xbf16>
    zero.free %again : tensor<8xbf16>
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
    %up = zero.transfer group @flat %new to params phase boundary : tensor<4xbf16> -> !zero.token
    zero.wait %up phase boundary
    zero.free %new phase boundary : tensor<4xbf16>
    zero.return %loss : tensor<f32>
  }
}

// -----

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
// CHECK:      %[[PARTITION:.*]] = llvm.mlir.constant(0 : i32) : i32
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
      offload #zero.offload<param = nvme, param_nvme_path = "/nvme", param_buffer_count = 2> {
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

// -----

// Parameters on NVMe and the optimizer on the host: after the host Adam the
// shard is written to the file from host_params, with no staged buffer (a
// null pointer).

// CHECK-LABEL: module @both_offloaded_to_nvme
// CHECK-LABEL: llvm.func @zero_boundary
// CHECK:      llvm.call @zrt_ctx_optimizer_step_host(
// CHECK:      %[[NULL:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK-NEXT: %[[PARTITION:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[FROM:.*]] = llvm.mlir.constant(7 : i32) : i32
// CHECK-NEXT: %[[TO_FILE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[BUFFER:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[BUFFER_BYTES:.*]] = llvm.mlir.constant(4096 : i64) : i64
// CHECK-NEXT: %[[SLOT:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: llvm.call @zrt_ctx_swap_params(%arg0, %[[PARTITION]], %[[NULL]], %[[FROM]], %[[TO_FILE]], %[[BUFFER]], %[[BUFFER_BYTES]], %[[SLOT]])

module @both_offloaded_to_nvme {
  zero.param @w : tensor<4x2xf32> init zeros compute bf16
  zero.partition @flat stage 3 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
  zero.train_step @train(%x: tensor<2x4xbf16>, %dy: tensor<2x2xbf16>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = bf16>
      schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4>
      offload #zero.offload<optimizer = cpu, param = nvme, param_nvme_path = "/nvme", param_buffer_count = 2> {
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
    %up = zero.transfer group @flat host_params to params swap <buffer = 1, buffers = 2, buffer_bytes = 4096> phase boundary -> !zero.token
    zero.wait %up phase boundary
    zero.return %loss : tensor<f32>
  }
}
