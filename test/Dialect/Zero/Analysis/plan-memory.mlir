// RUN: zero-opt %s -split-input-file --zero-plan-memory --zero-verify-schedule | FileCheck %s

// The arena plan of a small stage-2 schedule, offset by offset: views take no
// memory, buffers are reused after their last use, a gradient split over two
// reductions is released slice by slice, and bucket buffers live from the
// reduction to its wait.

zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<2x32xf32> init zeros compute bf16
// Persistent arena: params (full, 68 x 2 bytes), grads (shard 36 x 2),
// master, exp_avg, exp_avg_sq (shard 36 x 4), each 64-byte aligned: 896 bytes.
// CHECK: zero.partition @flat {{.*}} {zero.buffers = {exp_avg = 512 : i64, exp_avg_sq = 704 : i64, grads = 192 : i64, master = 320 : i64, params = 0 : i64}}
zero.partition @flat stage 2 world_size 2 alignment 4 numel 68 padded 72 params [@a, @b] offsets [0, 4]
// CHECK-LABEL: zero.train_step @step
// Inputs first: x (2x32 bf16 = 128 bytes) at 0, labels (2 x i64) at 128.
// CHECK-SAME: zero.input_offsets = array<i64: 0, 128>
// CHECK-SAME: zero.plan = {arena_bytes = 576 : i64, peak_bytes = 1472 : i64, persistent_bytes = 896 : i64, scratch_bytes = 0 : i64}
zero.train_step @step(%x: tensor<2x32xbf16>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 4> {
  // CHECK: zero.get_param @b : tensor<2x32xbf16>
  // CHECK-NEXT: nn.mul %{{.*}}, %{{.*}} {zero.alloc = array<i64: 192>}
  %b = zero.get_param @b : tensor<2x32xbf16>
  %y = nn.mul %x, %b : tensor<2x32xbf16>, tensor<2x32xbf16>
  // A view: no allocation.
  // CHECK-NEXT: nn.reshape %{{.*}} : tensor<2x32xbf16> -> tensor<64xbf16>
  %flat = nn.reshape %y : tensor<2x32xbf16> -> tensor<64xbf16>
  %y2 = nn.reshape %flat : tensor<64xbf16> -> tensor<2x32xbf16>
  // CHECK: nn.softmax_cross_entropy {{.*}} {zero.alloc = array<i64: 320>}
  %loss = nn.softmax_cross_entropy %y2, %lbl : tensor<2x32xbf16>, tensor<2xi64> -> tensor<f32>
  // CHECK-NEXT: nn.fill {{.*}} {zero.alloc = array<i64: 384>}
  %seed = nn.fill 1.0 : tensor<f32>
  // CHECK-NEXT: nn.softmax_cross_entropy_grad {{.*}} {zero.alloc = array<i64: 448>}
  %dy = nn.softmax_cross_entropy_grad %y, %lbl, %seed : tensor<2x32xbf16>, tensor<2xi64>, tensor<f32>
  // y, the seed and the labels are dead now: db reuses y's bytes.
  // CHECK-NEXT: nn.mul {{.*}} {zero.alloc = array<i64: 192>}
  %db = nn.mul %dy, %x : tensor<2x32xbf16>, tensor<2x32xbf16>
  zero.grad @b, %db : tensor<2x32xbf16>
  // The bucket of the second half of b's gradient (64 bytes) takes the place
  // of x, dead after db.
  // CHECK: zero.reduce_scatter {{.*}} [36, 68) {{.*}} {zero.temp = 0 : i64}
  %t = zero.reduce_scatter group @flat [36, 68) from %db at [32] : tensor<2x32xbf16> -> !zero.token
  zero.wait %t
  zero.free %db[32, 32] : tensor<2x32xbf16>
  %da = nn.fill 0.0 : tensor<4xbf16>
  zero.grad @a, %da : tensor<4xbf16>
  // da (8 bytes) reuses the first bucket's bytes after its wait; the second
  // bucket (72 bytes) follows at the next 64-byte boundary.
  // CHECK: nn.fill 0.000000e+00 {zero.alloc = array<i64: 0>}
  // CHECK: zero.reduce_scatter {{.*}} [0, 36) {{.*}} {zero.temp = 64 : i64}
  zero.reduce_scatter group @flat [0, 36) from %da, %db at [0, 0] : tensor<4xbf16>, tensor<2x32xbf16>
  zero.free %da : tensor<4xbf16>
  zero.free %db[0, 32] : tensor<2x32xbf16>
  %s = zero.loss_scale : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 2.0 : tensor<2xf32>
  %g = zero.all_reduce overflow_norm %st group @flat : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %g : tensor<2xf32> -> i1
  zero.adam group @flat stats %g scale %s skip %skip divisor 2.0 : tensor<2xf32>
  zero.all_gather group @flat in params [0, 68)
  zero.return %loss : tensor<f32>
}
