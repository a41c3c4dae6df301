// RUN: zero-opt %s -split-input-file --zero-optimizer="offload-optimizer=nvme nvme-path=/nvme nvme-buffer-count=3" | FileCheck %s
// RUN: zero-opt %s -split-input-file --zero-optimizer="offload-optimizer=nvme nvme-path=/nvme nvme-buffer-count=2 nvme-buffer-size=2048" | FileCheck %s --check-prefix=CHUNK

// Optimizer offload to NVMe streams the gradients as offload to the host
// does: each bucket's owned gradients go to host_grads in the last micro
// step right after its reduction completed, and each partition's host Adam
// (with its swap buffers) waits for that partition's copies only, so that
// @g1's last copy may still run during @g0's Adam. The updated parameters
// return through host_params.
zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<4xf32> init zeros compute bf16
zero.param @c : tensor<4xf32> init zeros compute bf16
zero.partition @g0 stage 2 world_size 2 alignment 2 numel 8 padded 8 params [@a, @c] offsets [0, 4]
zero.partition @g1 stage 2 world_size 2 alignment 2 numel 4 padded 4 params [@b] offsets [0]
// CHECK-LABEL: zero.train_step @stage2
// CHECK-SAME: offload #zero.offload<optimizer = nvme, nvme_path = "/nvme", buffer_count = 3>
// CHECK: %[[T2:.*]] = zero.reduce_scatter group @g0 [4, 8)
// CHECK: %[[T1:.*]] = zero.reduce_scatter group @g1 [0, 4)
// CHECK-NEXT: zero.wait %[[T2]]{{$}}
// CHECK-NEXT: %[[D2:.*]] = zero.transfer group @g0 grads[4, 8) to host_grads phase last_micro_step -> !zero.token
// CHECK: zero.reduce_scatter group @g0 [0, 4) from {{.*}}: tensor<4xbf16>{{$}}
// CHECK-NEXT: %[[D0:.*]] = zero.transfer group @g0 grads[0, 4) to host_grads phase last_micro_step -> !zero.token
// CHECK: zero.wait %[[T1]]{{$}}
// CHECK-NEXT: %[[D1:.*]] = zero.transfer group @g1 grads[0, 4) to host_grads phase last_micro_step -> !zero.token
// CHECK: %[[SKIP:.*]] = zero.update_loss_scale
// CHECK-NEXT: zero.wait %[[D2]] phase boundary
// CHECK-NEXT: zero.wait %[[D0]] phase boundary
// CHECK-NEXT: zero.optimizer_step group @g0 {{.*}} skip %[[SKIP]] divisor 2.000000e+00 host swap <chunk = 1024, buffers = 3> phase boundary
// CHECK-NEXT: %[[U0:.*]] = zero.transfer group @g0 host_params to params phase boundary -> !zero.token
// CHECK-NEXT: zero.wait %[[D1]] phase boundary
// CHECK-NEXT: zero.optimizer_step group @g1 {{.*}} host swap <chunk = 1024, buffers = 3> phase boundary
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

// fp32 compute at stage 1: the buckets stream to the host at the boundary;
// with the masters in the swap file the parameters come back from
// host_params (offload to host memory uploads the masters).
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
// CHECK-NEXT: zero.optimizer_step group @flat {{.*}} host swap <chunk = 1024, buffers = 3> phase boundary
// CHECK-NEXT: %[[U:.*]] = zero.transfer group @flat host_params to params phase boundary -> !zero.token
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

// nvme-buffer-size chunks the swap: a 5000-element shard (10000 elements on
// 2 ranks) streams through swap buffers of 2048 elements per state, which
// the host Adam moves in 3 chunks (2048, 2048 and 904 elements). Without
// the option (1048576 elements) the chunk is the shard rounded up to 1024
// elements, one chunk.
zero.param @w : tensor<10000xf32> init zeros
zero.partition @flat stage 1 world_size 2 alignment 2 numel 10000 padded 10000 params [@w] offsets [0]
// CHECK-LABEL: zero.train_step @chunks
// CHECK-SAME: offload #zero.offload<optimizer = nvme, nvme_path = "/nvme", buffer_count = 3>
// CHECK: zero.optimizer_step group @flat {{.*}} host swap <chunk = 5120, buffers = 3> phase boundary
// CHUNK-LABEL: zero.train_step @chunks
// CHUNK-SAME: offload #zero.offload<optimizer = nvme, nvme_path = "/nvme", buffer_count = 2, buffer_size = 2048>
// CHUNK: zero.optimizer_step group @flat {{.*}} host swap <chunk = 2048, buffers = 2> phase boundary
zero.train_step @chunks(%x: tensor<2x8xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 1, world_size = 2, global_batch = 4> {
  %loss = nn.fill 0.0 : tensor<f32>
  %g = nn.fill 1.0 : tensor<10000xf32>
  zero.grad @w, %g : tensor<10000xf32>
  zero.reduce_scatter group @flat in grads [0, 10000) phase boundary
  zero.all_gather group @flat in params [0, 10000) phase post_step
  zero.return %loss : tensor<f32>
}
