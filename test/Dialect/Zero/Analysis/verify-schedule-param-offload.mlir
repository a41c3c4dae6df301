// RUN: zero-opt %s -split-input-file --zero-verify-schedule --verify-diagnostics

// Parameter offload (stage 3): zero-verify-schedule's rules for staged
// parameter shards: each gather reads a copy of its own shard that was
// waited for, the staged buffer outlives the gather, and a device
// optimizer's new parameters are stored to the host shard once per step.

// A valid schedule: the staged copy is waited for before its gather reads it,
// which frees the staged buffer after its own wait; the device Adam's new
// parameters go to the host shard.
zero.param @fc1.weight : tensor<4x2xf32> init normal std 5.000000e-01 compute bf16
zero.param @fc1.bias : tensor<2xf32> init zeros compute bf16
zero.partition @fc1 stage 3 world_size 2 alignment 2 numel 10 padded 12 params [@fc1.weight, @fc1.bias] offsets [0, 8]
zero.train_step @valid(%x: tensor<2x4xf32>, %y: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.000000e-03>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4>
    offload #zero.offload<param = cpu> {
  %s, %st = zero.transfer group @fc1 params to staging : tensor<6xbf16> -> !zero.token
  zero.wait %st
  %full, %pt = zero.prefetch group @fc1 from %s : tensor<6xbf16> : tensor<12xbf16>
  %0 = nn.cast %x : tensor<2x4xf32> to tensor<2x4xbf16>
  zero.wait %pt
  zero.free %s : tensor<6xbf16>
  %1 = zero.get_param @fc1.weight from %full : tensor<12xbf16> -> tensor<4x2xbf16>
  %2 = nn.matmul %0, %1 : tensor<2x4xbf16>, tensor<4x2xbf16> -> tensor<2x2xbf16>
  %3 = zero.get_param @fc1.bias from %full : tensor<12xbf16> -> tensor<2xbf16>
  %4 = nn.add %2, %3 : tensor<2x2xbf16>, tensor<2xbf16>
  zero.free %full : tensor<12xbf16>
  %5 = nn.softmax_cross_entropy %4, %y : tensor<2x2xbf16>, tensor<2xi64> -> tensor<f32>
  %6 = nn.fill 1.000000e+00 {zero.loss_seed} : tensor<f32>
  %7 = nn.softmax_cross_entropy_grad %4, %y, %6 : tensor<2x2xbf16>, tensor<2xi64>, tensor<f32>
  %8 = nn.reduce_sum %7 : tensor<2x2xbf16> -> tensor<2xbf16>
  zero.grad @fc1.bias, %8 : tensor<2xbf16>
  %9 = nn.matmul %0, %7 transpose_lhs : tensor<2x4xbf16>, tensor<2x2xbf16> -> tensor<4x2xbf16>
  zero.grad @fc1.weight, %9 : tensor<4x2xbf16>
  zero.reduce_scatter group @fc1 [0, 10) from %9, %8 at [0, 0] : tensor<4x2xbf16>, tensor<2xbf16>
  zero.free %9 : tensor<4x2xbf16>
  zero.free %8 : tensor<2xbf16>
  %10 = zero.loss_scale phase boundary : tensor<f32>
  %11 = zero.check_overflow groups [@fc1] scale %10 divisor 2.000000e+00 phase boundary : tensor<2xf32>
  %r = zero.all_reduce overflow_norm %11 group @fc1 phase boundary : tensor<2xf32> -> tensor<2xf32>
  %12 = zero.update_loss_scale %r phase boundary : tensor<2xf32> -> i1
  %13 = zero.optimizer_step group @fc1 stats %r scale %10 skip %12 divisor 2.000000e+00 phase boundary : tensor<2xf32> -> tensor<6xbf16>
  %ut = zero.transfer group @fc1 %13 to params phase boundary : tensor<6xbf16> -> !zero.token
  zero.wait %ut phase boundary
  zero.free %13 phase boundary : tensor<6xbf16>
  zero.return %5 : tensor<f32>
}

// -----

// The gather reads the staged shard before the copy's wait.
zero.param @fc1.weight : tensor<4x2xf32> init normal std 5.000000e-01 compute bf16
zero.param @fc1.bias : tensor<2xf32> init zeros compute bf16
zero.partition @fc1 stage 3 world_size 2 alignment 2 numel 10 padded 12 params [@fc1.weight, @fc1.bias] offsets [0, 8]
zero.train_step @early_gather(%x: tensor<2x4xf32>, %y: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.000000e-03>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4>
    offload #zero.offload<param = cpu> {
  // expected-note @+1 {{collective issued here}}
  %s, %st = zero.transfer group @fc1 params to staging : tensor<6xbf16> -> !zero.token
  // expected-error @+1 {{'zero.prefetch' op uses the result of an asynchronous collective before its zero.wait}}
  %full, %pt = zero.prefetch group @fc1 from %s : tensor<6xbf16> : tensor<12xbf16>
  zero.wait %st
  %0 = nn.cast %x : tensor<2x4xf32> to tensor<2x4xbf16>
  zero.wait %pt
  zero.free %s : tensor<6xbf16>
  %1 = zero.get_param @fc1.weight from %full : tensor<12xbf16> -> tensor<4x2xbf16>
  %2 = nn.matmul %0, %1 : tensor<2x4xbf16>, tensor<4x2xbf16> -> tensor<2x2xbf16>
  %3 = zero.get_param @fc1.bias from %full : tensor<12xbf16> -> tensor<2xbf16>
  %4 = nn.add %2, %3 : tensor<2x2xbf16>, tensor<2xbf16>
  zero.free %full : tensor<12xbf16>
  %5 = nn.softmax_cross_entropy %4, %y : tensor<2x2xbf16>, tensor<2xi64> -> tensor<f32>
  %6 = nn.fill 1.000000e+00 {zero.loss_seed} : tensor<f32>
  %7 = nn.softmax_cross_entropy_grad %4, %y, %6 : tensor<2x2xbf16>, tensor<2xi64>, tensor<f32>
  %8 = nn.reduce_sum %7 : tensor<2x2xbf16> -> tensor<2xbf16>
  zero.grad @fc1.bias, %8 : tensor<2xbf16>
  %9 = nn.matmul %0, %7 transpose_lhs : tensor<2x4xbf16>, tensor<2x2xbf16> -> tensor<4x2xbf16>
  zero.grad @fc1.weight, %9 : tensor<4x2xbf16>
  zero.reduce_scatter group @fc1 [0, 10) from %9, %8 at [0, 0] : tensor<4x2xbf16>, tensor<2xbf16>
  zero.free %9 : tensor<4x2xbf16>
  zero.free %8 : tensor<2xbf16>
  %10 = zero.loss_scale phase boundary : tensor<f32>
  %11 = zero.check_overflow groups [@fc1] scale %10 divisor 2.000000e+00 phase boundary : tensor<2xf32>
  %r = zero.all_reduce overflow_norm %11 group @fc1 phase boundary : tensor<2xf32> -> tensor<2xf32>
  %12 = zero.update_loss_scale %r phase boundary : tensor<2xf32> -> i1
  %13 = zero.optimizer_step group @fc1 stats %r scale %10 skip %12 divisor 2.000000e+00 phase boundary : tensor<2xf32> -> tensor<6xbf16>
  %ut = zero.transfer group @fc1 %13 to params phase boundary : tensor<6xbf16> -> !zero.token
  zero.wait %ut phase boundary
  zero.free %13 phase boundary : tensor<6xbf16>
  zero.return %5 : tensor<f32>
}

// -----

// The staged shard is freed while the asynchronous gather still reads it.
zero.param @fc1.weight : tensor<4x2xf32> init normal std 5.000000e-01 compute bf16
zero.param @fc1.bias : tensor<2xf32> init zeros compute bf16
zero.partition @fc1 stage 3 world_size 2 alignment 2 numel 10 padded 12 params [@fc1.weight, @fc1.bias] offsets [0, 8]
zero.train_step @early_free(%x: tensor<2x4xf32>, %y: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.000000e-03>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4>
    offload #zero.offload<param = cpu> {
  %s, %st = zero.transfer group @fc1 params to staging : tensor<6xbf16> -> !zero.token
  zero.wait %st
  // expected-note @+1 {{issued here}}
  %full, %pt = zero.prefetch group @fc1 from %s : tensor<6xbf16> : tensor<12xbf16>
  %0 = nn.cast %x : tensor<2x4xf32> to tensor<2x4xbf16>
  // expected-error @+1 {{'zero.free' op frees a staged shard that an asynchronous gather or copy still reads (free it after the zero.wait of its token)}}
  zero.free %s : tensor<6xbf16>
  zero.wait %pt
  %1 = zero.get_param @fc1.weight from %full : tensor<12xbf16> -> tensor<4x2xbf16>
  %2 = nn.matmul %0, %1 : tensor<2x4xbf16>, tensor<4x2xbf16> -> tensor<2x2xbf16>
  %3 = zero.get_param @fc1.bias from %full : tensor<12xbf16> -> tensor<2xbf16>
  %4 = nn.add %2, %3 : tensor<2x2xbf16>, tensor<2xbf16>
  zero.free %full : tensor<12xbf16>
  %5 = nn.softmax_cross_entropy %4, %y : tensor<2x2xbf16>, tensor<2xi64> -> tensor<f32>
  %6 = nn.fill 1.000000e+00 {zero.loss_seed} : tensor<f32>
  %7 = nn.softmax_cross_entropy_grad %4, %y, %6 : tensor<2x2xbf16>, tensor<2xi64>, tensor<f32>
  %8 = nn.reduce_sum %7 : tensor<2x2xbf16> -> tensor<2xbf16>
  zero.grad @fc1.bias, %8 : tensor<2xbf16>
  %9 = nn.matmul %0, %7 transpose_lhs : tensor<2x4xbf16>, tensor<2x2xbf16> -> tensor<4x2xbf16>
  zero.grad @fc1.weight, %9 : tensor<4x2xbf16>
  zero.reduce_scatter group @fc1 [0, 10) from %9, %8 at [0, 0] : tensor<4x2xbf16>, tensor<2xbf16>
  zero.free %9 : tensor<4x2xbf16>
  zero.free %8 : tensor<2xbf16>
  %10 = zero.loss_scale phase boundary : tensor<f32>
  %11 = zero.check_overflow groups [@fc1] scale %10 divisor 2.000000e+00 phase boundary : tensor<2xf32>
  %r = zero.all_reduce overflow_norm %11 group @fc1 phase boundary : tensor<2xf32> -> tensor<2xf32>
  %12 = zero.update_loss_scale %r phase boundary : tensor<2xf32> -> i1
  %13 = zero.optimizer_step group @fc1 stats %r scale %10 skip %12 divisor 2.000000e+00 phase boundary : tensor<2xf32> -> tensor<6xbf16>
  %ut = zero.transfer group @fc1 %13 to params phase boundary : tensor<6xbf16> -> !zero.token
  zero.wait %ut phase boundary
  zero.free %13 phase boundary : tensor<6xbf16>
  zero.return %5 : tensor<f32>
}

// -----

// The new parameters are freed before their copy to the host completed.
zero.param @fc1.weight : tensor<4x2xf32> init normal std 5.000000e-01 compute bf16
zero.param @fc1.bias : tensor<2xf32> init zeros compute bf16
zero.partition @fc1 stage 3 world_size 2 alignment 2 numel 10 padded 12 params [@fc1.weight, @fc1.bias] offsets [0, 8]
zero.train_step @early_store_free(%x: tensor<2x4xf32>, %y: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.000000e-03>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4>
    offload #zero.offload<param = cpu> {
  %s, %st = zero.transfer group @fc1 params to staging : tensor<6xbf16> -> !zero.token
  zero.wait %st
  %full, %pt = zero.prefetch group @fc1 from %s : tensor<6xbf16> : tensor<12xbf16>
  %0 = nn.cast %x : tensor<2x4xf32> to tensor<2x4xbf16>
  zero.wait %pt
  zero.free %s : tensor<6xbf16>
  %1 = zero.get_param @fc1.weight from %full : tensor<12xbf16> -> tensor<4x2xbf16>
  %2 = nn.matmul %0, %1 : tensor<2x4xbf16>, tensor<4x2xbf16> -> tensor<2x2xbf16>
  %3 = zero.get_param @fc1.bias from %full : tensor<12xbf16> -> tensor<2xbf16>
  %4 = nn.add %2, %3 : tensor<2x2xbf16>, tensor<2xbf16>
  zero.free %full : tensor<12xbf16>
  %5 = nn.softmax_cross_entropy %4, %y : tensor<2x2xbf16>, tensor<2xi64> -> tensor<f32>
  %6 = nn.fill 1.000000e+00 {zero.loss_seed} : tensor<f32>
  %7 = nn.softmax_cross_entropy_grad %4, %y, %6 : tensor<2x2xbf16>, tensor<2xi64>, tensor<f32>
  %8 = nn.reduce_sum %7 : tensor<2x2xbf16> -> tensor<2xbf16>
  zero.grad @fc1.bias, %8 : tensor<2xbf16>
  %9 = nn.matmul %0, %7 transpose_lhs : tensor<2x4xbf16>, tensor<2x2xbf16> -> tensor<4x2xbf16>
  zero.grad @fc1.weight, %9 : tensor<4x2xbf16>
  zero.reduce_scatter group @fc1 [0, 10) from %9, %8 at [0, 0] : tensor<4x2xbf16>, tensor<2xbf16>
  zero.free %9 : tensor<4x2xbf16>
  zero.free %8 : tensor<2xbf16>
  %10 = zero.loss_scale phase boundary : tensor<f32>
  %11 = zero.check_overflow groups [@fc1] scale %10 divisor 2.000000e+00 phase boundary : tensor<2xf32>
  %r = zero.all_reduce overflow_norm %11 group @fc1 phase boundary : tensor<2xf32> -> tensor<2xf32>
  %12 = zero.update_loss_scale %r phase boundary : tensor<2xf32> -> i1
  %13 = zero.optimizer_step group @fc1 stats %r scale %10 skip %12 divisor 2.000000e+00 phase boundary : tensor<2xf32> -> tensor<6xbf16>
  // expected-note @+1 {{issued here}}
  %ut = zero.transfer group @fc1 %13 to params phase boundary : tensor<6xbf16> -> !zero.token
  // expected-error @+1 {{'zero.free' op frees a staged shard that an asynchronous gather or copy still reads}}
  zero.free %13 phase boundary : tensor<6xbf16>
  zero.wait %ut phase boundary
  zero.return %5 : tensor<f32>
}

// -----

// The device Adam's new parameters never reach the host shard.
zero.param @fc1.weight : tensor<4x2xf32> init normal std 5.000000e-01 compute bf16
zero.param @fc1.bias : tensor<2xf32> init zeros compute bf16
// expected-error @+1 {{'zero.partition' op has offloaded parameters and a device optimizer: its new parameters must be stored from its zero.optimizer_step's staged buffer once per step, found 0 copies}}
zero.partition @fc1 stage 3 world_size 2 alignment 2 numel 10 padded 12 params [@fc1.weight, @fc1.bias] offsets [0, 8]
zero.train_step @no_store(%x: tensor<2x4xf32>, %y: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.000000e-03>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4>
    offload #zero.offload<param = cpu> {
  %s, %st = zero.transfer group @fc1 params to staging : tensor<6xbf16> -> !zero.token
  zero.wait %st
  %full, %pt = zero.prefetch group @fc1 from %s : tensor<6xbf16> : tensor<12xbf16>
  %0 = nn.cast %x : tensor<2x4xf32> to tensor<2x4xbf16>
  zero.wait %pt
  zero.free %s : tensor<6xbf16>
  %1 = zero.get_param @fc1.weight from %full : tensor<12xbf16> -> tensor<4x2xbf16>
  %2 = nn.matmul %0, %1 : tensor<2x4xbf16>, tensor<4x2xbf16> -> tensor<2x2xbf16>
  %3 = zero.get_param @fc1.bias from %full : tensor<12xbf16> -> tensor<2xbf16>
  %4 = nn.add %2, %3 : tensor<2x2xbf16>, tensor<2xbf16>
  zero.free %full : tensor<12xbf16>
  %5 = nn.softmax_cross_entropy %4, %y : tensor<2x2xbf16>, tensor<2xi64> -> tensor<f32>
  %6 = nn.fill 1.000000e+00 {zero.loss_seed} : tensor<f32>
  %7 = nn.softmax_cross_entropy_grad %4, %y, %6 : tensor<2x2xbf16>, tensor<2xi64>, tensor<f32>
  %8 = nn.reduce_sum %7 : tensor<2x2xbf16> -> tensor<2xbf16>
  zero.grad @fc1.bias, %8 : tensor<2xbf16>
  %9 = nn.matmul %0, %7 transpose_lhs : tensor<2x4xbf16>, tensor<2x2xbf16> -> tensor<4x2xbf16>
  zero.grad @fc1.weight, %9 : tensor<4x2xbf16>
  zero.reduce_scatter group @fc1 [0, 10) from %9, %8 at [0, 0] : tensor<4x2xbf16>, tensor<2xbf16>
  zero.free %9 : tensor<4x2xbf16>
  zero.free %8 : tensor<2xbf16>
  %10 = zero.loss_scale phase boundary : tensor<f32>
  %11 = zero.check_overflow groups [@fc1] scale %10 divisor 2.000000e+00 phase boundary : tensor<2xf32>
  %r = zero.all_reduce overflow_norm %11 group @fc1 phase boundary : tensor<2xf32> -> tensor<2xf32>
  %12 = zero.update_loss_scale %r phase boundary : tensor<2xf32> -> i1
  %13 = zero.optimizer_step group @fc1 stats %r scale %10 skip %12 divisor 2.000000e+00 phase boundary : tensor<2xf32> -> tensor<6xbf16>
  zero.free %13 phase boundary : tensor<6xbf16>
  zero.return %5 : tensor<f32>
}
