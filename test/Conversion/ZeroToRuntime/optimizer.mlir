// RUN: zero-opt %s -split-input-file --zero-verify-schedule -o /dev/null
// RUN: zero-opt %s -split-input-file --convert-zero-to-runtime | FileCheck %s

// The loss scaler and the optimizer, at the boundary: zero.loss_scale reads
// the current scale into a step buffer, zero.check_overflow accumulates each
// group's overflow flag and squared gradient norm into the statistics (the
// first group resets them), zero.all_reduce overflow_norm reduces them over
// the ranks, zero.update_loss_scale returns the skip flag (an i32 value, not
// a buffer) and each zero.optimizer_step reads the statistics, the scale, the flag and
// the divisor (the micro steps times the world size). Where the update runs
// selects the call: on the device, on the host (optimizer offload), on the
// host from NVMe swap files (chunk and buffer count), or on the device into
// a staged buffer of new parameters (parameter offload).

// On the device, fp16 with two partitions: one overflow check a partition,
// one Adam a partition, all with the same scale, statistics and skip flag.

// CHECK-LABEL: module @device_adam
// CHECK-LABEL: llvm.func @zero_boundary
// CHECK:      %[[LS:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: llvm.call @zrt_ctx_loss_scale(%arg0, %[[LS]])
// CHECK:      %[[ST:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[PARTITION:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[FIRST:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[DIVISOR:.*]] = llvm.mlir.constant(2.000000e+00 : f64) : f64
// CHECK-NEXT: llvm.call @zrt_ctx_check_overflow(%arg0, %[[PARTITION]], %[[FIRST]], %[[LS]], %[[DIVISOR]], %[[ST]])
// CHECK-NEXT: %[[PARTITION:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[FIRST:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[DIVISOR:.*]] = llvm.mlir.constant(2.000000e+00 : f64) : f64
// CHECK-NEXT: llvm.call @zrt_ctx_check_overflow(%arg0, %[[PARTITION]], %[[FIRST]], %[[LS]], %[[DIVISOR]], %[[ST]])
// CHECK:      %[[SUM:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[RANKS:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[SLOT:.*]] = llvm.mlir.constant(-1 : i32) : i32
// CHECK-NEXT: llvm.call @zrt_ctx_all_reduce_stats(%arg0, %[[RANKS]], %[[ST]], %[[SUM]], %[[SLOT]])
// CHECK:      %[[SKIP:.*]] = llvm.call @zrt_ctx_update_loss_scale(%arg0, %[[SUM]])
// CHECK:      %[[PARTITION:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[DIVISOR:.*]] = llvm.mlir.constant(2.000000e+00 : f64) : f64
// CHECK-NEXT: llvm.call @zrt_ctx_optimizer_step(%arg0, %[[PARTITION]], %[[SUM]], %[[LS]], %[[SKIP]], %[[DIVISOR]])
// CHECK:      %[[PARTITION:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[DIVISOR:.*]] = llvm.mlir.constant(2.000000e+00 : f64) : f64
// CHECK-NEXT: llvm.call @zrt_ctx_optimizer_step(%arg0, %[[PARTITION]], %[[SUM]], %[[LS]], %[[SKIP]], %[[DIVISOR]])
// CHECK-LABEL: llvm.func @zero_eval_step
// CHECK-NOT:  llvm.call @zrt_ctx_optimizer_step

module @device_adam {
  zero.param @w : tensor<4x2xf32> init zeros compute f16
  zero.param @v : tensor<4xf32> init zeros compute f16
  zero.partition @first stage 1 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
  zero.partition @second stage 1 world_size 2 alignment 2 numel 4 padded 4 params [@v] offsets [0]
  zero.train_step @train(%x: tensor<2x4xf16>, %dy: tensor<2x2xf16>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp16>
      schedule #zero.schedule<stage = 1, world_size = 2, global_batch = 4> {
    %loss = nn.fill 0.0 : tensor<f32>
    %dw = nn.matmul %x, %dy transpose_lhs : tensor<2x4xf16>, tensor<2x2xf16> -> tensor<4x2xf16>
    zero.grad @w, %dw : tensor<4x2xf16>
    %dv = nn.reduce_sum %x : tensor<2x4xf16> -> tensor<4xf16>
    zero.grad @v, %dv : tensor<4xf16>
    zero.reduce_scatter group @first in grads [0, 8) phase boundary
    zero.reduce_scatter group @second in grads [0, 4) phase boundary
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@first, @second] scale %ls divisor 2.0 phase boundary : tensor<2xf32>
    %sum = zero.all_reduce overflow_norm %st group @first phase boundary : tensor<2xf32> -> tensor<2xf32>
    %skip = zero.update_loss_scale %sum phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @first stats %sum scale %ls skip %skip divisor 2.0 phase boundary : tensor<2xf32>
    zero.optimizer_step group @second stats %sum scale %ls skip %skip divisor 2.0 phase boundary : tensor<2xf32>
    zero.all_gather group @first in params [0, 8) phase post_step
    zero.all_gather group @second in params [0, 4) phase post_step
    zero.return %loss : tensor<f32>
  }
}

// -----

// Optimizer offload: the host Adam, after the wait for the gradients' copy.

// CHECK-LABEL: module @host_adam
// CHECK-LABEL: llvm.func @zero_boundary
// CHECK:      %[[LS:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: llvm.call @zrt_ctx_loss_scale(%arg0, %[[LS]])
// CHECK:      llvm.call @zrt_ctx_all_reduce_stats(%arg0, %{{[0-9]+}}, %{{[0-9]+}}, %[[SUM:[0-9]+]], %{{[0-9]+}})
// CHECK:      %[[SKIP:.*]] = llvm.call @zrt_ctx_update_loss_scale(%arg0, %[[SUM]])
// CHECK:      llvm.call @zrt_ctx_wait(
// CHECK:      %[[PARTITION:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[DIVISOR:.*]] = llvm.mlir.constant(2.000000e+00 : f64) : f64
// CHECK-NEXT: llvm.call @zrt_ctx_optimizer_step_host(%arg0, %[[PARTITION]], %[[SUM]], %[[LS]], %[[SKIP]], %[[DIVISOR]])
// CHECK-NOT:  llvm.call @zrt_ctx_optimizer_step(

module @host_adam {
  zero.param @w : tensor<4x2xf32> init zeros compute bf16
  zero.partition @flat stage 1 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
  zero.train_step @train(%x: tensor<2x4xbf16>, %dy: tensor<2x2xbf16>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = bf16>
      schedule #zero.schedule<stage = 1, world_size = 2, global_batch = 4>
      offload #zero.offload<optimizer = cpu> {
    %loss = nn.fill 0.0 : tensor<f32>
    %dw = nn.matmul %x, %dy transpose_lhs : tensor<2x4xbf16>, tensor<2x2xbf16> -> tensor<4x2xbf16>
    zero.grad @w, %dw : tensor<4x2xbf16>
    zero.reduce_scatter group @flat in grads [0, 8) phase boundary
    %down = zero.transfer group @flat grads[0, 8) to host_grads phase boundary -> !zero.token
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

// -----

// The optimizer states on NVMe: the host Adam streams them through its swap
// buffers, chunk (1024 elements) by chunk, with 3 buffers.

// CHECK-LABEL: module @nvme_adam
// CHECK-LABEL: llvm.func @zero_boundary
// CHECK:      %[[LS:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: llvm.call @zrt_ctx_loss_scale(%arg0, %[[LS]])
// CHECK:      llvm.call @zrt_ctx_all_reduce_stats(%arg0, %{{[0-9]+}}, %{{[0-9]+}}, %[[SUM:[0-9]+]], %{{[0-9]+}})
// CHECK:      %[[SKIP:.*]] = llvm.call @zrt_ctx_update_loss_scale(%arg0, %[[SUM]])
// CHECK:      llvm.call @zrt_ctx_wait(
// CHECK:      %[[PARTITION:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[DIVISOR:.*]] = llvm.mlir.constant(2.000000e+00 : f64) : f64
// CHECK-NEXT: %[[CHUNK:.*]] = llvm.mlir.constant(1024 : i64) : i64
// CHECK-NEXT: %[[BUFFERS:.*]] = llvm.mlir.constant(3 : i32) : i32
// CHECK-NEXT: llvm.call @zrt_ctx_optimizer_step_nvme(%arg0, %[[PARTITION]], %[[SUM]], %[[LS]], %[[SKIP]], %[[DIVISOR]], %[[CHUNK]], %[[BUFFERS]])

module @nvme_adam {
  zero.param @w : tensor<4x2xf32> init zeros compute bf16
  zero.partition @flat stage 1 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
  zero.train_step @train(%x: tensor<2x4xbf16>, %dy: tensor<2x2xbf16>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = bf16>
      schedule #zero.schedule<stage = 1, world_size = 2, global_batch = 4>
      offload #zero.offload<optimizer = nvme, nvme_path = "/nvme", buffer_count = 3> {
    %loss = nn.fill 0.0 : tensor<f32>
    %dw = nn.matmul %x, %dy transpose_lhs : tensor<2x4xbf16>, tensor<2x2xbf16> -> tensor<4x2xbf16>
    zero.grad @w, %dw : tensor<4x2xbf16>
    zero.reduce_scatter group @flat in grads [0, 8) phase boundary
    %down = zero.transfer group @flat grads[0, 8) to host_grads phase boundary -> !zero.token
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 2.0 phase boundary : tensor<2xf32>
    %sum = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
    %skip = zero.update_loss_scale %sum phase boundary : tensor<2xf32> -> i1
    zero.wait %down phase boundary
    zero.optimizer_step group @flat stats %sum scale %ls skip %skip divisor 2.0 host swap <chunk = 1024, buffers = 3> phase boundary : tensor<2xf32>
    %up = zero.transfer group @flat host_params to params phase boundary -> !zero.token
    zero.wait %up phase boundary
    zero.all_gather group @flat in params [0, 8) phase post_step
    zero.return %loss : tensor<f32>
  }
}

// -----

// Parameter offload with the optimizer on the device: Adam writes the new
// parameters into a step buffer (its result), which the following transfer
// copies to the host shard.

// CHECK-LABEL: module @staged_adam
// CHECK-LABEL: llvm.func @zero_boundary
// CHECK:      %[[LS:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: llvm.call @zrt_ctx_loss_scale(%arg0, %[[LS]])
// CHECK:      llvm.call @zrt_ctx_all_reduce_stats(%arg0, %{{[0-9]+}}, %{{[0-9]+}}, %[[SUM:[0-9]+]], %{{[0-9]+}})
// CHECK:      %[[SKIP:.*]] = llvm.call @zrt_ctx_update_loss_scale(%arg0, %[[SUM]])
// CHECK:      %[[PARTITION:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[DIVISOR:.*]] = llvm.mlir.constant(2.000000e+00 : f64) : f64
// CHECK:      %[[NEW:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: llvm.call @zrt_ctx_optimizer_step_staged(%arg0, %[[PARTITION]], %[[SUM]], %[[LS]], %[[SKIP]], %[[DIVISOR]], %[[NEW]])
// CHECK:      llvm.call @zrt_ctx_stage_params(
// CHECK-SAME: %[[NEW]]

module @staged_adam {
  zero.param @w : tensor<4x2xf32> init zeros compute bf16
  zero.partition @flat stage 3 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
  zero.train_step @train(%x: tensor<2x4xbf16>, %dy: tensor<2x2xbf16>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = bf16>
      schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4>
      offload #zero.offload<param = cpu> {
    %loss = nn.fill 0.0 : tensor<f32>
    %dw = nn.matmul %x, %dy transpose_lhs : tensor<2x4xbf16>, tensor<2x2xbf16> -> tensor<4x2xbf16>
    zero.grad @w, %dw : tensor<4x2xbf16>
    zero.reduce_scatter group @flat [0, 8) from %dw at [0] : tensor<4x2xbf16>
    zero.free %dw : tensor<4x2xbf16>
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

// Lion (optimizers.def's lion row): the update calls the row's entries,
// zrt_ctx_optimizer_step on the device and zrt_ctx_optimizer_step_host with the optimizer
// offloaded, with Adam's operands; no Adam entry is called.

// CHECK-LABEL: module @device_lion
// CHECK-LABEL: llvm.func @zero_boundary
// CHECK:      %[[SKIP:.*]] = llvm.call @zrt_ctx_update_loss_scale(%arg0, %[[SUM:[0-9]+]])
// CHECK:      %[[PARTITION:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[DIVISOR:.*]] = llvm.mlir.constant(2.000000e+00 : f64) : f64
// CHECK-NEXT: llvm.call @zrt_ctx_optimizer_step(%arg0, %[[PARTITION]], %[[SUM]], %{{[0-9]+}}, %[[SKIP]], %[[DIVISOR]])
// CHECK-NOT:  llvm.call @zrt_ctx_optimizer_step

module @device_lion {
  zero.param @w : tensor<4x2xf32> init zeros compute f16
  zero.partition @first stage 1 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
  zero.train_step @train(%x: tensor<2x4xf16>, %dy: tensor<2x2xf16>)
      optimizer #zero.optimizer<kind = lion, lr = 1.0e-4, beta2 = 0.99>
      precision #zero.precision<kind = fp16>
      schedule #zero.schedule<stage = 1, world_size = 2, global_batch = 4> {
    %loss = nn.fill 0.0 : tensor<f32>
    %dw = nn.matmul %x, %dy transpose_lhs : tensor<2x4xf16>, tensor<2x2xf16> -> tensor<4x2xf16>
    zero.grad @w, %dw : tensor<4x2xf16>
    zero.reduce_scatter group @first in grads [0, 8) phase boundary
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

// CHECK-LABEL: module @host_lion
// CHECK-LABEL: llvm.func @zero_boundary
// CHECK:      llvm.call @zrt_ctx_wait(
// CHECK:      %[[PARTITION:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[DIVISOR:.*]] = llvm.mlir.constant(2.000000e+00 : f64) : f64
// CHECK-NEXT: llvm.call @zrt_ctx_optimizer_step_host(%arg0, %[[PARTITION]], %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %[[DIVISOR]])
// CHECK-NOT:  llvm.call @zrt_ctx_optimizer_step

module @host_lion {
  zero.param @w : tensor<4x2xf32> init zeros compute bf16
  zero.partition @flat stage 1 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
  zero.train_step @train(%x: tensor<2x4xbf16>, %dy: tensor<2x2xbf16>)
      optimizer #zero.optimizer<kind = lion, lr = 1.0e-4>
      precision #zero.precision<kind = bf16>
      schedule #zero.schedule<stage = 1, world_size = 2, global_batch = 4>
      offload #zero.offload<optimizer = cpu> {
    %loss = nn.fill 0.0 : tensor<f32>
    %dw = nn.matmul %x, %dy transpose_lhs : tensor<2x4xbf16>, tensor<2x2xbf16> -> tensor<4x2xbf16>
    zero.grad @w, %dw : tensor<4x2xbf16>
    zero.reduce_scatter group @flat in grads [0, 8) phase boundary
    %down = zero.transfer group @flat grads[0, 8) to host_grads phase boundary -> !zero.token
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

// -----

// SGD (optimizers.def's sgd row): the update calls zrt_ctx_optimizer_step with Adam's
// operands; no Adam entry is called. Its partition's momentum_buffer exists
// only with a momentum.

// CHECK-LABEL: module @device_sgd
// CHECK-LABEL: llvm.func @zero_boundary
// CHECK:      %[[SKIP:.*]] = llvm.call @zrt_ctx_update_loss_scale(%arg0, %[[SUM:[0-9]+]])
// CHECK:      %[[PARTITION:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[DIVISOR:.*]] = llvm.mlir.constant(2.000000e+00 : f64) : f64
// CHECK-NEXT: llvm.call @zrt_ctx_optimizer_step(%arg0, %[[PARTITION]], %[[SUM]], %{{[0-9]+}}, %[[SKIP]], %[[DIVISOR]])
// CHECK-NOT:  llvm.call @zrt_ctx_optimizer_step

module @device_sgd {
  zero.param @w : tensor<4x2xf32> init zeros compute f16
  zero.partition @first stage 1 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
  zero.train_step @train(%x: tensor<2x4xf16>, %dy: tensor<2x2xf16>)
      optimizer #zero.optimizer<kind = sgd, lr = 1.0e-2, momentum = 0.9, nesterov = true>
      precision #zero.precision<kind = fp16>
      schedule #zero.schedule<stage = 1, world_size = 2, global_batch = 4> {
    %loss = nn.fill 0.0 : tensor<f32>
    %dw = nn.matmul %x, %dy transpose_lhs : tensor<2x4xf16>, tensor<2x2xf16> -> tensor<4x2xf16>
    zero.grad @w, %dw : tensor<4x2xf16>
    zero.reduce_scatter group @first in grads [0, 8) phase boundary
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@first] scale %ls divisor 2.0 phase boundary : tensor<2xf32>
    %sum = zero.all_reduce overflow_norm %st group @first phase boundary : tensor<2xf32> -> tensor<2xf32>
    %skip = zero.update_loss_scale %sum phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @first stats %sum scale %ls skip %skip divisor 2.0 phase boundary : tensor<2xf32>
    zero.all_gather group @first in params [0, 8) phase post_step
    zero.return %loss : tensor<f32>
  }
}
