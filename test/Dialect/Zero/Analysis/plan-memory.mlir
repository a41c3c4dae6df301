// RUN: zero-opt %s -split-input-file --zero-plan-memory --zero-verify-schedule | FileCheck %s

// The arena plan of a small stage-2 schedule, offset by offset: views take no
// memory, buffers are reused after their last use, a gradient split over two
// reductions is released slice by slice, and bucket buffers live from the
// reduction to its wait.

zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<2x32xf32> init zeros compute bf16
// Persistent arena: params (full, 68 x 2 bytes), grads (shard 36 x 2),
// master, exp_avg, exp_avg_sq (shard 36 x 4), each 64-byte aligned: 896 bytes.
// CHECK: zero.partition @flat {{.*}} {zero.buffers = #zero.buffer_offsets<params = 0, grads = 192, master = 320, exp_avg = 512, exp_avg_sq = 704>}
zero.partition @flat stage 2 world_size 2 alignment 4 numel 68 padded 72 params [@a, @b] offsets [0, 4]
// CHECK-LABEL: zero.train_step @step
// Inputs first: x (2x32 bf16 = 128 bytes) at 0, labels (2 x i64) at 128.
// CHECK-SAME: zero.input_offsets = array<i64: 0, 128>
// CHECK-SAME: zero.plan = #zero.memory_plan<persistent_bytes = 896, arena_bytes = 576, scratch_bytes = 0, peak_bytes = 1472>
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
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 2.0 phase boundary : tensor<2xf32>
  %g = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %g phase boundary : tensor<2xf32> -> i1
  zero.optimizer_step group @flat stats %g scale %s skip %skip divisor 2.0 phase boundary : tensor<2xf32>
  zero.all_gather group @flat in params [0, 68) phase post_step
  zero.return %loss : tensor<f32>
}

// -----

// Stage 0 without accumulation: every persistent buffer is full (24 fp32
// elements = 96 bytes, 128 aligned: 5 x 128 = 640), and each gradient bound
// by zero.grad is computed straight into its slot of `grads` (no zero.alloc).
zero.param @a : tensor<8xf32> init zeros
zero.param @b : tensor<2x8xf32> init zeros
// fp32 parameters are their own masters: no master buffer.
// CHECK: zero.partition @flat stage 0 {{.*}} {zero.buffers = #zero.buffer_offsets<params = 0, grads = 128, exp_avg = 256, exp_avg_sq = 384>}
zero.partition @flat stage 0 world_size 2 alignment 2 numel 24 padded 24 params [@a, @b] offsets [0, 8]
// CHECK-LABEL: zero.train_step @direct
// Step arena: x (64 bytes) at 0, labels at 64, y at 128, loss at 192, seed
// at 256, dy at 320: 384 bytes; peak 640 + 384 = 1024.
// CHECK-SAME: zero.input_offsets = array<i64: 0, 64>
// CHECK-SAME: zero.plan = #zero.memory_plan<persistent_bytes = 512, arena_bytes = 384, scratch_bytes = 0, peak_bytes = 896>
// CHECK: nn.mul %{{.*}}, %{{.*}} {zero.alloc = array<i64: 128>}
// CHECK: nn.softmax_cross_entropy_grad {{.*}} {zero.alloc = array<i64: 320>}
// CHECK-NEXT: nn.mul %{{.*}}, %{{.*}} : tensor<2x8xf32>
// CHECK-NEXT: zero.grad @b
// CHECK-NEXT: nn.fill 0.000000e+00 : tensor<8xf32>
// CHECK-NEXT: zero.grad @a
// The optimizer's small values reuse the inputs' bytes.
// CHECK: zero.loss_scale phase boundary {zero.alloc = array<i64: 0>}
// CHECK-NEXT: zero.check_overflow {{.*}} phase boundary {zero.alloc = array<i64: 64>}
zero.train_step @direct(%x: tensor<2x8xf32>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 2, global_batch = 4> {
  %b = zero.get_param @b : tensor<2x8xf32>
  %y = nn.mul %x, %b : tensor<2x8xf32>, tensor<2x8xf32>
  %loss = nn.softmax_cross_entropy %y, %lbl : tensor<2x8xf32>, tensor<2xi64> -> tensor<f32>
  %seed = nn.fill 1.0 : tensor<f32>
  %dy = nn.softmax_cross_entropy_grad %y, %lbl, %seed : tensor<2x8xf32>, tensor<2xi64>, tensor<f32>
  %db = nn.mul %dy, %x : tensor<2x8xf32>, tensor<2x8xf32>
  zero.grad @b, %db : tensor<2x8xf32>
  %da = nn.fill 0.0 : tensor<8xf32>
  zero.grad @a, %da : tensor<8xf32>
  zero.all_reduce sum group @flat in grads [0, 24) phase boundary
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 2.0 phase boundary : tensor<2xf32>
  %skip = zero.update_loss_scale %st phase boundary : tensor<2xf32> -> i1
  zero.optimizer_step group @flat stats %st scale %s skip %skip divisor 2.0 phase boundary : tensor<2xf32>
  zero.return %loss : tensor<f32>
}

// -----

// The same step with 2 accumulation steps: a micro step's gradient is added
// into `grads`, so it needs its own arena bytes: db reuses y's (dead after
// dy) and da the inputs' (dead after db). The arena does not grow.
zero.param @a : tensor<8xf32> init zeros
zero.param @b : tensor<2x8xf32> init zeros
zero.partition @flat stage 0 world_size 2 alignment 2 numel 24 padded 24 params [@a, @b] offsets [0, 8]
// CHECK-LABEL: zero.train_step @accumulate
// CHECK-SAME: zero.plan = #zero.memory_plan<persistent_bytes = 512, arena_bytes = 384, scratch_bytes = 0, peak_bytes = 896>
// CHECK: nn.softmax_cross_entropy_grad {{.*}} {zero.alloc = array<i64: 320>}
// CHECK-NEXT: nn.mul %{{.*}}, %{{.*}} {zero.alloc = array<i64: 128>}
// CHECK-NEXT: zero.grad @b
// CHECK-NEXT: nn.fill 0.000000e+00 {zero.alloc = array<i64: 0>}
zero.train_step @accumulate(%x: tensor<2x8xf32>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 2, global_batch = 8, accumulation_steps = 2> {
  %b = zero.get_param @b : tensor<2x8xf32>
  %y = nn.mul %x, %b : tensor<2x8xf32>, tensor<2x8xf32>
  %loss = nn.softmax_cross_entropy %y, %lbl : tensor<2x8xf32>, tensor<2xi64> -> tensor<f32>
  %seed = nn.fill 1.0 : tensor<f32>
  %dy = nn.softmax_cross_entropy_grad %y, %lbl, %seed : tensor<2x8xf32>, tensor<2xi64>, tensor<f32>
  %db = nn.mul %dy, %x : tensor<2x8xf32>, tensor<2x8xf32>
  zero.grad @b, %db : tensor<2x8xf32>
  %da = nn.fill 0.0 : tensor<8xf32>
  zero.grad @a, %da : tensor<8xf32>
  zero.all_reduce sum group @flat in grads [0, 24) phase boundary
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 4.0 phase boundary : tensor<2xf32>
  %skip = zero.update_loss_scale %st phase boundary : tensor<2xf32> -> i1
  zero.optimizer_step group @flat stats %st scale %s skip %skip divisor 4.0 phase boundary : tensor<2xf32>
  zero.return %loss : tensor<f32>
}

// -----

// Stage 3: every persistent buffer is a shard (12 fp32 elements = 48 bytes,
// 64 aligned: 5 x 64 = 320); the gathered group (24 x 4 = 96 bytes) lives in
// the step arena from its all-gather to its free.
zero.param @w : tensor<2x8xf32> init zeros
zero.param @v : tensor<8xf32> init zeros
// CHECK: zero.partition @l stage 3 {{.*}} {zero.buffers = #zero.buffer_offsets<params = 0, grads = 64, exp_avg = 128, exp_avg_sq = 192>}
zero.partition @l stage 3 world_size 2 alignment 2 numel 24 padded 24 params [@w, @v] offsets [0, 16]
// Arena: x at 0, labels at 64, the gathered buffer at 128 (to 224), y at
// 256; after the free, the loss and seed take 128 and 192, dy 320, dw
// reuses y's 256, dv the inputs' 0, and the bucket buffer (96 bytes) dy's
// 320: high-water 416, 448 aligned; peak 320 + 448 = 768.
// CHECK-LABEL: zero.train_step @stage3
// CHECK-SAME: zero.plan = #zero.memory_plan<persistent_bytes = 256, arena_bytes = 448, scratch_bytes = 0, peak_bytes = 704>
// CHECK-NEXT: zero.all_gather group @l {zero.alloc = array<i64: 128>}
// CHECK-NEXT: zero.get_param @w from
// CHECK-NEXT: nn.mul %{{.*}}, %{{.*}} {zero.alloc = array<i64: 256>}
// CHECK-NEXT: zero.free
// CHECK-NEXT: nn.softmax_cross_entropy {{.*}} {zero.alloc = array<i64: 128>}
// CHECK-NEXT: nn.fill 1.000000e+00 {zero.alloc = array<i64: 192>}
// CHECK-NEXT: nn.softmax_cross_entropy_grad {{.*}} {zero.alloc = array<i64: 320>}
// CHECK-NEXT: nn.mul {{.*}} {zero.alloc = array<i64: 256>}
// CHECK-NEXT: zero.grad @w
// CHECK-NEXT: nn.fill 0.000000e+00 {zero.alloc = array<i64: 0>}
// CHECK-NEXT: zero.grad @v
// CHECK-NEXT: zero.reduce_scatter group @l [0, 24) {{.*}} {zero.temp = 320 : i64}
zero.train_step @stage3(%x: tensor<2x8xf32>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4> {
  %full = zero.all_gather group @l : tensor<24xf32>
  %w = zero.get_param @w from %full : tensor<24xf32> -> tensor<2x8xf32>
  %y = nn.mul %x, %w : tensor<2x8xf32>, tensor<2x8xf32>
  zero.free %full : tensor<24xf32>
  %loss = nn.softmax_cross_entropy %y, %lbl : tensor<2x8xf32>, tensor<2xi64> -> tensor<f32>
  %seed = nn.fill 1.0 : tensor<f32>
  %dy = nn.softmax_cross_entropy_grad %y, %lbl, %seed : tensor<2x8xf32>, tensor<2xi64>, tensor<f32>
  %dw = nn.mul %dy, %x : tensor<2x8xf32>, tensor<2x8xf32>
  zero.grad @w, %dw : tensor<2x8xf32>
  %dv = nn.fill 0.0 : tensor<8xf32>
  zero.grad @v, %dv : tensor<8xf32>
  zero.reduce_scatter group @l [0, 24) from %dw, %dv at [0, 0] : tensor<2x8xf32>, tensor<8xf32>
  zero.free %dw : tensor<2x8xf32>
  zero.free %dv : tensor<8xf32>
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@l] scale %s divisor 2.0 phase boundary : tensor<2xf32>
  %g = zero.all_reduce overflow_norm %st group @l phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %g phase boundary : tensor<2xf32> -> i1
  zero.optimizer_step group @l stats %g scale %s skip %skip divisor 2.0 phase boundary : tensor<2xf32>
  zero.return %loss : tensor<f32>
}
