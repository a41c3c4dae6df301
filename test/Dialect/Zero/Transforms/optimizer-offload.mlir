// RUN: zero-opt %s -split-input-file --zero-optimizer="offload-optimizer=cpu" | FileCheck %s

// Optimizer offload at stage 2 with bf16 compute over two partitions: each
// bucket's owned gradients stream to the host in the last micro step right
// after its reduction completed (after the zero.wait of an asynchronous
// reduction, after a synchronous one itself), overlapping the backward of
// the later buckets. Each host Adam waits for its own partition's copies
// only, and its updated bf16 parameters return while the next partition's
// Adam runs; both uploads are waited for before the step ends.
zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<4xf32> init zeros compute bf16
zero.param @c : tensor<4xf32> init zeros compute bf16
zero.partition @g0 stage 2 world_size 2 alignment 2 numel 8 padded 8 params [@a, @c] offsets [0, 4]
zero.partition @g1 stage 2 world_size 2 alignment 2 numel 4 padded 4 params [@b] offsets [0]
// CHECK-LABEL: zero.train_step @stage2
// CHECK-SAME: offload #zero.offload<optimizer = cpu>
// CHECK: %[[T2:.*]] = zero.reduce_scatter group @g0 [4, 8)
// CHECK: %[[T1:.*]] = zero.reduce_scatter group @g1 [0, 4)
// CHECK-NEXT: zero.wait %[[T2]]{{$}}
// CHECK-NEXT: %[[D2:.*]] = zero.transfer group @g0 grads[4, 8) to host_grads phase last_micro_step -> !zero.token
// CHECK-NEXT: zero.free
// CHECK: zero.reduce_scatter group @g0 [0, 4) from {{.*}}: tensor<4xbf16>{{$}}
// CHECK-NEXT: %[[D0:.*]] = zero.transfer group @g0 grads[0, 4) to host_grads phase last_micro_step -> !zero.token
// CHECK-NEXT: zero.free
// CHECK-NEXT: zero.wait %[[T1]]{{$}}
// CHECK-NEXT: %[[D1:.*]] = zero.transfer group @g1 grads[0, 4) to host_grads phase last_micro_step -> !zero.token
// CHECK-NEXT: zero.free
// CHECK-NEXT: %[[S:.*]] = zero.loss_scale phase boundary
// CHECK-NEXT: zero.check_overflow groups [@g0, @g1]
// CHECK-NEXT: %[[G:.*]] = zero.all_reduce overflow_norm
// CHECK-NEXT: %[[SKIP:.*]] = zero.update_loss_scale
// CHECK-NEXT: zero.wait %[[D2]] phase boundary
// CHECK-NEXT: zero.wait %[[D0]] phase boundary
// CHECK-NEXT: zero.optimizer_step group @g0 stats %[[G]] scale %[[S]] skip %[[SKIP]] divisor 2.000000e+00 host phase boundary
// CHECK-NEXT: %[[U0:.*]] = zero.transfer group @g0 host_params to params phase boundary -> !zero.token
// CHECK-NEXT: zero.wait %[[D1]] phase boundary
// CHECK-NEXT: zero.optimizer_step group @g1 {{.*}} host phase boundary
// CHECK-NEXT: %[[U1:.*]] = zero.transfer group @g1 host_params to params phase boundary -> !zero.token
// CHECK-NEXT: zero.wait %[[U0]] phase boundary
// CHECK-NEXT: zero.wait %[[U1]] phase boundary
// CHECK-NEXT: zero.return
zero.train_step @stage2(%x: tensor<2x4xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 4> {
  %loss = nn.fill 0.0 : tensor<f32>
  %gc = nn.fill 1.0 : tensor<4xbf16>
  zero.grad @c, %gc : tensor<4xbf16>
  %t2 = zero.reduce_scatter group @g0 [4, 8) from %gc at [0] : tensor<4xbf16> -> !zero.token
  %gb = nn.fill 1.0 : tensor<4xbf16>
  zero.grad @b, %gb : tensor<4xbf16>
  %t1 = zero.reduce_scatter group @g1 [0, 4) from %gb at [0] : tensor<4xbf16> -> !zero.token
  zero.wait %t2
  zero.free %gc : tensor<4xbf16>
  %ga = nn.fill 1.0 : tensor<4xbf16>
  zero.grad @a, %ga : tensor<4xbf16>
  zero.reduce_scatter group @g0 [0, 4) from %ga at [0] : tensor<4xbf16>
  zero.free %ga : tensor<4xbf16>
  zero.wait %t1
  zero.free %gb : tensor<4xbf16>
  zero.return %loss : tensor<f32>
}

// -----

// fp32 compute at stage 1: the gradients' reductions run at the boundary, so
// each bucket streams to the host there, after its reduction completed; the
// parameters are uploaded from their host masters, before the post-step
// all-gather.
zero.param @w : tensor<8xf32> init zeros
zero.partition @flat stage 1 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
// CHECK-LABEL: zero.train_step @stage1
// CHECK: %[[R0:.*]] = zero.reduce_scatter group @flat in grads [0, 4) phase boundary -> !zero.token
// CHECK-NEXT: zero.reduce_scatter group @flat in grads [4, 8) phase boundary{{$}}
// CHECK-NEXT: %[[D1:.*]] = zero.transfer group @flat grads[4, 8) to host_grads phase boundary -> !zero.token
// CHECK-NEXT: zero.wait %[[R0]] phase boundary
// CHECK-NEXT: %[[D0:.*]] = zero.transfer group @flat grads[0, 4) to host_grads phase boundary -> !zero.token
// CHECK: zero.wait %[[D1]] phase boundary
// CHECK-NEXT: zero.wait %[[D0]] phase boundary
// CHECK-NEXT: zero.optimizer_step group @flat {{.*}} host phase boundary
// CHECK-NEXT: %[[U:.*]] = zero.transfer group @flat master to params phase boundary -> !zero.token
// CHECK-NEXT: zero.wait %[[U]] phase boundary
// CHECK-NEXT: zero.all_gather group @flat in params [0, 8) phase post_step
zero.train_step @stage1(%x: tensor<2x8xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 1, world_size = 2, global_batch = 4> {
  %loss = nn.fill 0.0 : tensor<f32>
  %g = nn.fill 1.0 : tensor<8xf32>
  zero.grad @w, %g : tensor<8xf32>
  %r0 = zero.reduce_scatter group @flat in grads [0, 4) phase boundary -> !zero.token
  zero.reduce_scatter group @flat in grads [4, 8) phase boundary
  zero.wait %r0 phase boundary
  zero.all_gather group @flat in params [0, 8) phase post_step
  zero.return %loss : tensor<f32>
}

// -----

// A partition without gradient reductions (one rank) copies its whole owned
// part at the boundary.
zero.param @w : tensor<8xf32> init zeros compute bf16
zero.partition @flat stage 2 world_size 1 alignment 2 numel 8 padded 8 params [@w] offsets [0]
// CHECK-LABEL: zero.train_step @unreduced
// CHECK-NOT: last_micro_step
// CHECK: %[[D:.*]] = zero.transfer group @flat grads to host_grads phase boundary -> !zero.token
// CHECK-NEXT: zero.loss_scale phase boundary
// CHECK: zero.wait %[[D]] phase boundary
// CHECK-NEXT: zero.optimizer_step group @flat {{.*}} host phase boundary
zero.train_step @unreduced(%x: tensor<2x8xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 1, global_batch = 2> {
  %loss = nn.fill 0.0 : tensor<f32>
  %g = nn.fill 1.0 : tensor<8xbf16>
  zero.grad @w, %g : tensor<8xbf16>
  zero.return %loss : tensor<f32>
}
