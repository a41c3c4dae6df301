// RUN: zero-opt %s -split-input-file --zero-plan-memory --zero-verify-schedule | FileCheck %s
// RUN: zero-opt %s -split-input-file --zero-print-memory-plan -o /dev/null | FileCheck %s --check-prefix=PRINT

// The plan of an offloaded optimizer knows two memories. Device: params
// (full, 68 bf16 = 136 bytes) at 0 and the grads shard (36 bf16 = 72) at
// 192: 320 bytes. Pinned host: master, exp_avg, exp_avg_sq shards (36 f32 =
// 144 each) at 0, 192, 384, the gradient and parameter copies (36 bf16 = 72
// each) at 576 and 704: 832 bytes. The steps are scheduled as
// zero-optimizer leaves them with the optimizer on the host.
zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<2x32xf32> init zeros compute bf16
// CHECK: zero.partition @flat {{.*}} {zero.buffers = #zero.buffer_offsets<params = 0, grads = 192, master = 0, exp_avg = 192, exp_avg_sq = 384, host_grads = 576, host_params = 704>}
zero.partition @flat stage 2 world_size 2 alignment 4 numel 68 padded 72 params [@a, @b] offsets [0, 4]
// CHECK-LABEL: zero.train_step @step
// CHECK-SAME: zero.plan = #zero.memory_plan<persistent_bytes = 320, arena_bytes = 448, scratch_bytes = 0, peak_bytes = 768, host_bytes = 832>
// PRINT: persistent_bytes 320, arena_bytes 448, scratch_bytes 0, peak_bytes 768, host_bytes 832
// PRINT-NEXT: persistent @flat params offset 0 bytes 136
// PRINT-NEXT: persistent @flat grads offset 192 bytes 72
// PRINT-NEXT: host @flat master offset 0 bytes 144
// PRINT-NEXT: host @flat exp_avg offset 192 bytes 144
// PRINT-NEXT: host @flat exp_avg_sq offset 384 bytes 144
// PRINT-NEXT: host @flat host_grads offset 576 bytes 72
// PRINT-NEXT: host @flat host_params offset 704 bytes 72
zero.train_step @step(%x: tensor<2x32xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 4>
    offload #zero.offload<optimizer = cpu> {
  %loss = nn.fill 0.0 : tensor<f32>
  %gb = nn.fill 1.0 : tensor<2x32xbf16>
  zero.grad @b, %gb : tensor<2x32xbf16>
  %ga = nn.fill 1.0 : tensor<4xbf16>
  zero.grad @a, %ga : tensor<4xbf16>
  %t = zero.reduce_scatter group @flat [0, 68) from %ga, %gb at [0, 0] : tensor<4xbf16>, tensor<2x32xbf16> -> !zero.token
  zero.wait %t
  %down = zero.transfer group @flat grads[0, 68) to host_grads phase last_micro_step -> !zero.token
  zero.free %ga : tensor<4xbf16>
  zero.free %gb : tensor<2x32xbf16>
  %scale = zero.loss_scale phase boundary : tensor<f32>
  %stats = zero.check_overflow groups [@flat] scale %scale divisor 2.0 phase boundary : tensor<2xf32>
  %norm = zero.all_reduce overflow_norm %stats group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %norm phase boundary : tensor<2xf32> -> i1
  zero.wait %down phase boundary
  zero.optimizer_step group @flat stats %norm scale %scale skip %skip divisor 2.0 host phase boundary : tensor<2xf32>
  %up = zero.transfer group @flat host_params to params phase boundary -> !zero.token
  zero.wait %up phase boundary
  zero.all_gather group @flat in params [0, 68) phase post_step
  zero.return %loss : tensor<f32>
}

// -----

// fp32 compute: the parameters are not their own masters any more; the
// fp32 masters live on the host beside the gradient copy, and there is no
// parameter copy (the masters are uploaded).
zero.param @w : tensor<8xf32> init zeros
// CHECK: zero.partition @flat {{.*}} {zero.buffers = #zero.buffer_offsets<params = 0, grads = 64, master = 0, exp_avg = 64, exp_avg_sq = 128, host_grads = 192>}
zero.partition @flat stage 1 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
// CHECK-LABEL: zero.train_step @fp32
// CHECK-SAME: host_bytes = 256
zero.train_step @fp32(%x: tensor<2x8xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 1, world_size = 2, global_batch = 4>
    offload #zero.offload<optimizer = cpu> {
  %loss = nn.fill 0.0 : tensor<f32>
  %g = nn.fill 1.0 : tensor<8xf32>
  zero.grad @w, %g : tensor<8xf32>
  zero.reduce_scatter group @flat in grads [0, 8) phase boundary
  %down = zero.transfer group @flat grads[0, 8) to host_grads phase boundary -> !zero.token
  %scale = zero.loss_scale phase boundary : tensor<f32>
  %stats = zero.check_overflow groups [@flat] scale %scale divisor 2.0 phase boundary : tensor<2xf32>
  %norm = zero.all_reduce overflow_norm %stats group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %norm phase boundary : tensor<2xf32> -> i1
  zero.wait %down phase boundary
  zero.optimizer_step group @flat stats %norm scale %scale skip %skip divisor 2.0 host phase boundary : tensor<2xf32>
  %up = zero.transfer group @flat master to params phase boundary -> !zero.token
  zero.wait %up phase boundary
  zero.all_gather group @flat in params [0, 8) phase post_step
  zero.return %loss : tensor<f32>
}
