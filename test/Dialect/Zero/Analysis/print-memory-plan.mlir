// RUN: zero-opt %s -split-input-file --zero-print-memory-plan -o %t.printed | FileCheck %s
// RUN: zero-opt %s -split-input-file -o %t.plain
// RUN: diff %t.printed %t.plain

// zero-print-memory-plan prints the plan computed by the analysis, one fact a
// line, and leaves the IR as it was (the diff above). Op indices count the
// ops of the step's body from 0; an input's range starts at -1. Every offset
// is a multiple of 64; a buffer allocated past the top of the arena starts at
// the next multiple of 64 (the bytes skipped are not reused).

// A stage-2 step: views take no memory, buffers are reused after their last
// use, a gradient freed slice by slice has two pieces, buckets live to their
// wait.
// Ops: 0 get_param, 1 mul y, 2-3 reshape (views of y), 4 loss, 5 seed, 6 dy,
// 7 mul db, 8 grad, 9 reduce_scatter (bucket 32 bf16), 10 wait, 11 free of
// db's second half, 12 fill da, 13 grad, 14 reduce_scatter (bucket 36 bf16),
// 15-16 frees, 17 loss_scale, 18 check_overflow, 19 all_reduce,
// 20 update_loss_scale, 21 adam, 22 all_gather, 23 return.
// Persistent: params full (68 bf16 = 136 bytes) at 0, grads a shard (36 bf16
// = 72) at 192, master, exp_avg, exp_avg_sq shards (36 f32 = 144) at 320,
// 512, 704; 848 bytes, 896 aligned.
// Arena: x (128) at 0 to its last use 7; labels (16) at 128 to 6; y (128) at
// 192 to 6 (the reshapes' uses count, op 6 reads y); the loss (4) at 320 to
// the return; the seed at 384; dy (128) at 448 to 7: high-water 576.
// db (128) reuses y's [192, 320): its second half [256, 320) ends at the free
// at 11, its first half at the free at 16. The first bucket (64) takes x's
// bytes at 0 until its wait at 10; da (8) takes 0 again until its free at 15;
// the second bucket (72) the next 64-byte boundary of the free [8, 144). The
// optimizer's values: loss_scale 0, check_overflow 64, all_reduce 128 (the
// free [72, 144) is the first to fit 8 bytes at a multiple of 64).
// Peak 896 + 576 + 0 = 1472.
// CHECK-LABEL: zero.train_step @step
// CHECK-NEXT: persistent_bytes 896, arena_bytes 576, scratch_bytes 0, peak_bytes 1472
// CHECK-NEXT: persistent @flat params offset 0 bytes 136
// CHECK-NEXT: persistent @flat grads offset 192 bytes 72
// CHECK-NEXT: persistent @flat master offset 320 bytes 144
// CHECK-NEXT: persistent @flat exp_avg offset 512 bytes 144
// CHECK-NEXT: persistent @flat exp_avg_sq offset 704 bytes 144
// CHECK-NEXT: arena input #0 offset 0 bytes 128 live [-1, 7] inputs
// CHECK-NEXT: arena input #1 offset 128 bytes 16 live [-1, 6] inputs
// CHECK-NEXT: arena op 1 nn.mul result #0 offset 192 bytes 128 live [1, 6] activations
// CHECK-NEXT: arena op 4 nn.softmax_cross_entropy result #0 offset 320 bytes 4 live [4, 23] activations
// CHECK-NEXT: arena op 5 nn.fill result #0 offset 384 bytes 4 live [5, 6] gradients
// CHECK-NEXT: arena op 6 nn.softmax_cross_entropy_grad result #0 offset 448 bytes 128 live [6, 7] gradients
// CHECK-NEXT: arena op 7 nn.mul result #0 offset 192 bytes 128 live [7, 16] gradients
// CHECK-NEXT:   piece offset 256 bytes 64 live [7, 11]
// CHECK-NEXT:   piece offset 192 bytes 64 live [7, 16]
// CHECK-NEXT: arena op 9 zero.reduce_scatter bucket offset 0 bytes 64 live [9, 10] reduce_buckets
// CHECK-NEXT: arena op 12 nn.fill result #0 offset 0 bytes 8 live [12, 15] gradients
// CHECK-NEXT: arena op 14 zero.reduce_scatter bucket offset 64 bytes 72 live [14, 14] reduce_buckets
// CHECK-NEXT: arena op 17 zero.loss_scale result #0 offset 0 bytes 4 live [17, 21] optimizer
// CHECK-NEXT: arena op 18 zero.check_overflow result #0 offset 64 bytes 8 live [18, 19] optimizer
// CHECK-NEXT: arena op 19 zero.all_reduce result #0 offset 128 bytes 8 live [19, 21] optimizer
// CHECK-NOT: arena


zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<2x32xf32> init zeros compute bf16
zero.partition @flat stage 2 world_size 2 alignment 4 numel 68 padded 72 params [@a, @b] offsets [0, 4]
zero.train_step @step(%x: tensor<2x32xbf16>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 4> {
  %b = zero.get_param @b : tensor<2x32xbf16>
  %y = nn.mul %x, %b : tensor<2x32xbf16>, tensor<2x32xbf16>
  %flat = nn.reshape %y : tensor<2x32xbf16> -> tensor<64xbf16>
  %y2 = nn.reshape %flat : tensor<64xbf16> -> tensor<2x32xbf16>
  %loss = nn.softmax_cross_entropy %y2, %lbl : tensor<2x32xbf16>, tensor<2xi64> -> tensor<f32>
  %seed = nn.fill 1.0 : tensor<f32>
  %dy = nn.softmax_cross_entropy_grad %y, %lbl, %seed : tensor<2x32xbf16>, tensor<2xi64>, tensor<f32>
  %db = nn.mul %dy, %x : tensor<2x32xbf16>, tensor<2x32xbf16>
  zero.grad @b, %db : tensor<2x32xbf16>
  %t = zero.reduce_scatter group @flat [36, 68) from %db at [32] : tensor<2x32xbf16> -> !zero.token
  zero.wait %t
  zero.free %db[32, 32] : tensor<2x32xbf16>
  %da = nn.fill 0.0 : tensor<4xbf16>
  zero.grad @a, %da : tensor<4xbf16>
  zero.reduce_scatter group @flat [0, 36) from %da, %db at [0, 0] : tensor<4xbf16>, tensor<2x32xbf16>
  zero.free %da : tensor<4xbf16>
  zero.free %db[0, 32] : tensor<2x32xbf16>
  %s = zero.loss_scale : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 2.0 : tensor<2xf32>
  %g = zero.all_reduce overflow_norm %st group @flat : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %g : tensor<2xf32> -> i1
  zero.optimizer_step group @flat stats %g scale %s skip %skip divisor 2.0 : tensor<2xf32>
  zero.all_gather group @flat in params [0, 68)
  zero.return %loss : tensor<f32>
}

// -----

// Stage 0 without accumulation: the gradients db (op 5) and da (op 7) are
// computed into the persistent `grads` buffer and have no arena buffer.
// Persistent: four full buffers of 24 f32 (96 bytes, 128 aligned) at 0, 128,
// 256, 384 (fp32 parameters are their own masters: no master buffer); 512
// bytes.
// Arena: x (64) at 0 to db at 5, labels (16) at 64 to 4, y (64) at 128, the
// loss at 192, the seed at 256, dy (64) at 320: 384. After op 5 [0, 80) is
// free: loss_scale at 0, check_overflow at 64. Peak 512 + 384 = 896.
// CHECK-LABEL: zero.train_step @direct
// CHECK-NEXT: persistent_bytes 512, arena_bytes 384, scratch_bytes 0, peak_bytes 896
// CHECK-NEXT: persistent @flat params offset 0 bytes 96
// CHECK-NEXT: persistent @flat grads offset 128 bytes 96
// CHECK-NEXT: persistent @flat exp_avg offset 256 bytes 96
// CHECK-NEXT: persistent @flat exp_avg_sq offset 384 bytes 96
// CHECK-NEXT: arena input #0 offset 0 bytes 64 live [-1, 5] inputs
// CHECK-NEXT: arena input #1 offset 64 bytes 16 live [-1, 4] inputs
// CHECK-NEXT: arena op 1 nn.mul result #0 offset 128 bytes 64 live [1, 4] activations
// CHECK-NEXT: arena op 2 nn.softmax_cross_entropy result #0 offset 192 bytes 4 live [2, 14] activations
// CHECK-NEXT: arena op 3 nn.fill result #0 offset 256 bytes 4 live [3, 4] gradients
// CHECK-NEXT: arena op 4 nn.softmax_cross_entropy_grad result #0 offset 320 bytes 64 live [4, 5] gradients
// CHECK-NEXT: arena op 10 zero.loss_scale result #0 offset 0 bytes 4 live [10, 13] optimizer
// CHECK-NEXT: arena op 11 zero.check_overflow result #0 offset 64 bytes 8 live [11, 13] optimizer
// CHECK-NOT: arena
zero.param @a : tensor<8xf32> init zeros
zero.param @b : tensor<2x8xf32> init zeros
zero.partition @flat stage 0 world_size 2 alignment 2 numel 24 padded 24 params [@a, @b] offsets [0, 8]
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
  zero.all_reduce sum group @flat in grads [0, 24) {zero.boundary}
  %s = zero.loss_scale {zero.boundary} : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 2.0 {zero.boundary} : tensor<2xf32>
  %skip = zero.update_loss_scale %st {zero.boundary} : tensor<2xf32> -> i1
  zero.optimizer_step group @flat stats %st scale %s skip %skip divisor 2.0 {zero.boundary} : tensor<2xf32>
  zero.return %loss : tensor<f32>
}

// -----

// Stage 3: the gathered group lives in the step arena from its all-gather
// to its free, and the bucket grows the arena past its top.
// Persistent: four shards of 12 f32 (48 bytes, 64 aligned; no master
// buffer): 256 bytes.
// Arena: x at 0 (to 7), labels at 64 (to 6), the gathered buffer (96) at 128
// until its free at 3, y (64) at 256 (top 224 rounded up). The loss and the
// seed take 128 and 192 in the freed group; dy (64) does not fit in
// [196, 224) and goes to the top, 320. dw reuses y's 256, dv (32) x's 0. The
// bucket (24 f32 = 96) fits in no free range, but the free [320, 384) ends at
// the top, so it starts there: high-water 416, 448 aligned. loss_scale 0,
// check_overflow 64, all_reduce 192 (in [132, 224)). Peak 256 + 448 = 704.
// CHECK-LABEL: zero.train_step @stage3
// CHECK-NEXT: persistent_bytes 256, arena_bytes 448, scratch_bytes 0, peak_bytes 704
// CHECK-NEXT: persistent @l params offset 0 bytes 48
// CHECK-NEXT: persistent @l grads offset 64 bytes 48
// CHECK-NEXT: persistent @l exp_avg offset 128 bytes 48
// CHECK-NEXT: persistent @l exp_avg_sq offset 192 bytes 48
// CHECK-NEXT: arena input #0 offset 0 bytes 64 live [-1, 7] inputs
// CHECK-NEXT: arena input #1 offset 64 bytes 16 live [-1, 6] inputs
// CHECK-NEXT: arena op 0 zero.all_gather result #0 offset 128 bytes 96 live [0, 3] gather_buffers
// CHECK-NEXT: arena op 2 nn.mul result #0 offset 256 bytes 64 live [2, 6] activations
// CHECK-NEXT: arena op 4 nn.softmax_cross_entropy result #0 offset 128 bytes 4 live [4, 19] activations
// CHECK-NEXT: arena op 5 nn.fill result #0 offset 192 bytes 4 live [5, 6] gradients
// CHECK-NEXT: arena op 6 nn.softmax_cross_entropy_grad result #0 offset 320 bytes 64 live [6, 7] gradients
// CHECK-NEXT: arena op 7 nn.mul result #0 offset 256 bytes 64 live [7, 12] gradients
// CHECK-NEXT: arena op 9 nn.fill result #0 offset 0 bytes 32 live [9, 13] gradients
// CHECK-NEXT: arena op 11 zero.reduce_scatter bucket offset 320 bytes 96 live [11, 11] reduce_buckets
// CHECK-NEXT: arena op 14 zero.loss_scale result #0 offset 0 bytes 4 live [14, 18] optimizer
// CHECK-NEXT: arena op 15 zero.check_overflow result #0 offset 64 bytes 8 live [15, 16] optimizer
// CHECK-NEXT: arena op 16 zero.all_reduce result #0 offset 192 bytes 8 live [16, 18] optimizer
// CHECK-NOT: arena
zero.param @w : tensor<2x8xf32> init zeros
zero.param @v : tensor<8xf32> init zeros
zero.partition @l stage 3 world_size 2 alignment 2 numel 24 padded 24 params [@w, @v] offsets [0, 16]
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
  %s = zero.loss_scale {zero.boundary} : tensor<f32>
  %st = zero.check_overflow groups [@l] scale %s divisor 2.0 {zero.boundary} : tensor<2xf32>
  %g = zero.all_reduce overflow_norm %st group @l {zero.boundary} : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %g {zero.boundary} : tensor<2xf32> -> i1
  zero.optimizer_step group @l stats %g scale %s skip %skip divisor 2.0 {zero.boundary} : tensor<2xf32>
  zero.return %loss : tensor<f32>
}
