// RUN: zero-opt %s -split-input-file --zero-optimizer | FileCheck %s --check-prefix=PARAM
// RUN: zero-opt %s -split-input-file --zero-optimizer="offload-optimizer=cpu" | FileCheck %s --check-prefix=BOTH
// RUN: zero-opt %s -split-input-file --zero-optimizer | zero-opt -split-input-file --zero-verify-schedule > /dev/null
// RUN: zero-opt %s -split-input-file --zero-optimizer="offload-optimizer=cpu" | zero-opt -split-input-file --zero-verify-schedule > /dev/null

// Parameter offload at stage 3 (the step's offload, by zero-param-gather)
// with bf16 compute over two partitions.
// With the optimizer on the device the Adam writes each partition's new parameters into a
// staged buffer of the shard (2 elements), which goes to the host shard
// while the next partition's Adam runs; both copies are waited for, then
// the staged buffers freed, all in the boundary phase.
// With both offloaded the host Adam updates the host shard in place: the
// gradients stream to the host after each reduction completed (phase
// last_micro_step), nothing comes back.
zero.param @a : tensor<4xf32> init zeros compute bf16
zero.param @b : tensor<4xf32> init zeros compute bf16
zero.partition @g0 stage 3 world_size 2 alignment 2 numel 4 padded 4 params [@a] offsets [0]
zero.partition @g1 stage 3 world_size 2 alignment 2 numel 4 padded 4 params [@b] offsets [0]
// PARAM-LABEL: zero.train_step @bf16
// PARAM-SAME: offload #zero.offload<param = cpu>
// PARAM: %[[SKIP:.*]] = zero.update_loss_scale
// PARAM-NEXT: %[[N0:.*]] = zero.optimizer_step group @g0 {{.*}} phase boundary : tensor<2xf32> -> tensor<2xbf16>
// PARAM-NEXT: %[[T0:.*]] = zero.transfer group @g0 %[[N0]] to params phase boundary : tensor<2xbf16> -> !zero.token
// PARAM-NEXT: %[[N1:.*]] = zero.optimizer_step group @g1 {{.*}} phase boundary : tensor<2xf32> -> tensor<2xbf16>
// PARAM-NEXT: %[[T1:.*]] = zero.transfer group @g1 %[[N1]] to params phase boundary : tensor<2xbf16> -> !zero.token
// PARAM-NEXT: zero.wait %[[T0]] phase boundary
// PARAM-NEXT: zero.wait %[[T1]] phase boundary
// PARAM-NEXT: zero.free %[[N0]] phase boundary : tensor<2xbf16>
// PARAM-NEXT: zero.free %[[N1]] phase boundary : tensor<2xbf16>
// PARAM-NEXT: zero.return
// BOTH-LABEL: zero.train_step @bf16
// BOTH-SAME: offload #zero.offload<optimizer = cpu, param = cpu>
// BOTH: zero.wait
// BOTH-NEXT: %[[D1:.*]] = zero.transfer group @g1 grads[0, 4) to host_grads phase last_micro_step -> !zero.token
// BOTH-NEXT: zero.wait
// BOTH-NEXT: %[[D0:.*]] = zero.transfer group @g0 grads[0, 4) to host_grads phase last_micro_step -> !zero.token
// BOTH-NOT: zero.transfer
// BOTH: zero.wait %[[D0]] phase boundary
// BOTH-NEXT: zero.optimizer_step group @g0 {{.*}} host phase boundary : tensor<2xf32>{{$}}
// BOTH-NEXT: zero.wait %[[D1]] phase boundary
// BOTH-NEXT: zero.optimizer_step group @g1 {{.*}} host phase boundary : tensor<2xf32>{{$}}
// BOTH-NEXT: zero.return
zero.train_step @bf16(%x: tensor<2x4xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4>
    offload #zero.offload<param = cpu> {
  %loss = nn.fill 0.0 : tensor<f32>
  %gb = nn.fill 1.0 : tensor<4xbf16>
  zero.grad @b, %gb : tensor<4xbf16>
  %ga = nn.fill 1.0 : tensor<4xbf16>
  zero.grad @a, %ga : tensor<4xbf16>
  %t1 = zero.reduce_scatter group @g1 [0, 4) from %gb at [0] : tensor<4xbf16> -> !zero.token
  %t0 = zero.reduce_scatter group @g0 [0, 4) from %ga at [0] : tensor<4xbf16> -> !zero.token
  zero.wait %t1
  zero.wait %t0
  zero.free %ga : tensor<4xbf16>
  zero.free %gb : tensor<4xbf16>
  zero.return %loss : tensor<f32>
}

// -----

// fp32 compute: with the optimizer on the device the staged buffer holds
// fp32 parameters (the device masters are a separate buffer); with both
// offloaded the host shard is its own master.
zero.param @w : tensor<8xf32> init zeros
zero.partition @flat stage 3 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
// PARAM-LABEL: zero.train_step @fp32
// PARAM: %[[N:.*]] = zero.optimizer_step group @flat {{.*}} : tensor<2xf32> -> tensor<4xf32>
// PARAM-NEXT: %[[T:.*]] = zero.transfer group @flat %[[N]] to params phase boundary : tensor<4xf32> -> !zero.token
// PARAM-NEXT: zero.wait %[[T]] phase boundary
// PARAM-NEXT: zero.free %[[N]] phase boundary : tensor<4xf32>
// BOTH-LABEL: zero.train_step @fp32
// BOTH: zero.transfer group @flat grads[0, 8) to host_grads phase last_micro_step -> !zero.token
// BOTH-NOT: zero.transfer
// BOTH: zero.optimizer_step group @flat {{.*}} host phase boundary : tensor<2xf32>{{$}}
// BOTH-NEXT: zero.return
zero.train_step @fp32(%x: tensor<2x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4>
    offload #zero.offload<param = cpu> {
  %loss = nn.fill 0.0 : tensor<f32>
  %g = nn.fill 1.0 : tensor<8xf32>
  zero.grad @w, %g : tensor<8xf32>
  %t = zero.reduce_scatter group @flat [0, 8) from %g at [0] : tensor<8xf32> -> !zero.token
  zero.wait %t
  zero.free %g : tensor<8xf32>
  zero.return %loss : tensor<f32>
}
