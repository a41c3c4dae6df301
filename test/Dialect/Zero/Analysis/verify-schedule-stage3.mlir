// RUN: zero-opt %s -split-input-file --zero-verify-schedule -verify-diagnostics

// zero-verify-schedule on stage-3 and stage-0 schedules: async results, views
// of freed gathers, in-place reductions, and a broken memory plan.

// A prefetched buffer used through a parameter view before its wait.
zero.param @w : tensor<2x2xf32> init zeros compute bf16
zero.partition @l0 stage 3 world_size 2 alignment 2 numel 4 padded 4 params [@w] offsets [0]
zero.train_step @step(%x: tensor<2x2xbf16>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4> {
  // expected-note @+1 {{collective issued here}}
  %full, %t = zero.prefetch group @l0 : tensor<4xbf16>
  // expected-error @+1 {{'zero.get_param' op uses the result of an asynchronous collective before its zero.wait}}
  %w = zero.get_param @w from %full : tensor<4xbf16> -> tensor<2x2xbf16>
  zero.wait %t
  %y = nn.matmul %x, %w : tensor<2x2xbf16>, tensor<2x2xbf16> -> tensor<2x2xbf16>
  zero.free %full : tensor<4xbf16>
  %loss = nn.softmax_cross_entropy %y, %lbl : tensor<2x2xbf16>, tensor<2xi64> -> tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// A wait under control flow might not run, leaving the gather in flight
// after the step.
zero.param @w : tensor<2x2xf32> init zeros compute bf16
zero.partition @l0 stage 3 world_size 2 alignment 2 numel 4 padded 4 params [@w] offsets [0]
zero.train_step @step(%x: tensor<2x2xbf16>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4> {
  // expected-error @+1 {{'zero.prefetch' op is asynchronous but its zero.wait does not run in the step (it must be a top-level op of the step)}}
  %full, %t = zero.prefetch group @l0 : tensor<4xbf16>
  %c = arith.constant true
  scf.if %c {
    zero.wait %t
  }
  %loss = nn.softmax_cross_entropy %x, %lbl : tensor<2x2xbf16>, tensor<2xi64> -> tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// A parameter view used after its gathered buffer was freed.
zero.param @w : tensor<2x2xf32> init zeros compute bf16
zero.partition @l0 stage 3 world_size 2 alignment 2 numel 4 padded 4 params [@w] offsets [0]
zero.train_step @step(%x: tensor<2x2xbf16>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4> {
  %full = zero.all_gather group @l0 : tensor<4xbf16>
  %w = zero.get_param @w from %full : tensor<4xbf16> -> tensor<2x2xbf16>
  // expected-note @+1 {{freed here}}
  zero.free %full : tensor<4xbf16>
  // expected-error @+1 {{'nn.matmul' op uses a buffer after zero.free}}
  %y = nn.matmul %x, %w : tensor<2x2xbf16>, tensor<2x2xbf16> -> tensor<2x2xbf16>
  %loss = nn.softmax_cross_entropy %y, %lbl : tensor<2x2xbf16>, tensor<2xi64> -> tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Freeing a view of the persistent parameters.
zero.param @w : tensor<2x2xf32> init zeros compute bf16
zero.partition @flat stage 2 world_size 2 alignment 2 numel 4 padded 4 params [@w] offsets [0]
zero.train_step @step(%x: tensor<2x2xbf16>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 4> {
  %w = zero.get_param @w : tensor<2x2xbf16>
  // expected-error @+1 {{'zero.free' op frees persistent memory (a parameter view of the persistent buffers)}}
  zero.free %w : tensor<2x2xbf16>
  %loss = nn.softmax_cross_entropy %x, %lbl : tensor<2x2xbf16>, tensor<2xi64> -> tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Stage 0: an in-place all-reduce of a gradient range before that gradient
// has been written by its zero.grad.
zero.param @w : tensor<2x2xf32> init zeros compute bf16
zero.partition @flat stage 0 world_size 2 alignment 1 numel 4 padded 4 params [@w] offsets [0]
zero.train_step @step(%x: tensor<2x2xbf16>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 0, world_size = 2, global_batch = 4> {
  %w = zero.get_param @w : tensor<2x2xbf16>
  %y = nn.matmul %x, %w : tensor<2x2xbf16>, tensor<2x2xbf16> -> tensor<2x2xbf16>
  %loss = nn.softmax_cross_entropy %y, %lbl : tensor<2x2xbf16>, tensor<2xi64> -> tensor<f32>
  %seed = nn.fill 1.0 : tensor<f32>
  %dy = nn.softmax_cross_entropy_grad %y, %lbl, %seed : tensor<2x2xbf16>, tensor<2xi64>, tensor<f32>
  %dw = nn.matmul %x, %dy transpose_lhs : tensor<2x2xbf16>, tensor<2x2xbf16> -> tensor<2x2xbf16>
  // expected-error @+1 {{'zero.all_reduce' op reduces the gradient of @w before its zero.grad (or it has none)}}
  zero.all_reduce sum group @flat in grads [0, 4)
  zero.grad @w, %dw : tensor<2x2xbf16>
  %s = zero.loss_scale : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 2.0 : tensor<2xf32>
  %g = zero.all_reduce overflow_norm %st group @flat : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %g : tensor<2xf32> -> i1
  zero.optimizer_step group @flat stats %g scale %s skip %skip divisor 2.0 : tensor<2xf32>
  zero.return %loss : tensor<f32>
}

// -----

// Stage 0: the gradient is written while an asynchronous all-reduce of its
// range is in flight.
zero.param @w : tensor<2x2xf32> init zeros compute bf16
zero.param @v : tensor<2xf32> init zeros compute bf16
zero.partition @flat stage 0 world_size 2 alignment 1 numel 6 padded 6 params [@w, @v] offsets [0, 4]
zero.train_step @step(%x: tensor<2x2xbf16>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 0, world_size = 2, global_batch = 4> {
  %w = zero.get_param @w : tensor<2x2xbf16>
  %y = nn.matmul %x, %w : tensor<2x2xbf16>, tensor<2x2xbf16> -> tensor<2x2xbf16>
  %loss = nn.softmax_cross_entropy %y, %lbl : tensor<2x2xbf16>, tensor<2xi64> -> tensor<f32>
  %seed = nn.fill 1.0 : tensor<f32>
  %dy = nn.softmax_cross_entropy_grad %y, %lbl, %seed : tensor<2x2xbf16>, tensor<2xi64>, tensor<f32>
  %dw = nn.matmul %x, %dy transpose_lhs : tensor<2x2xbf16>, tensor<2x2xbf16> -> tensor<2x2xbf16>
  %dv = nn.fill 0.0 : tensor<2xbf16>
  zero.grad @v, %dv : tensor<2xbf16>
  zero.grad @w, %dw : tensor<2x2xbf16>
  // expected-note @+1 {{collective issued here}}
  %t = zero.all_reduce sum group @flat in grads [0, 6) token !zero.token
  // expected-error @+1 {{'zero.grad' op writes the gradient into elements [0, 4) of partition @flat (@w) while an asynchronous collective on grads is in flight (wait for its token first)}}
  zero.grad @w, %dw : tensor<2x2xbf16>
  zero.wait %t
  %s = zero.loss_scale : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 2.0 : tensor<2xf32>
  %g = zero.all_reduce overflow_norm %st group @flat : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %g : tensor<2xf32> -> i1
  zero.optimizer_step group @flat stats %g scale %s skip %skip divisor 2.0 : tensor<2xf32>
  zero.return %loss : tensor<f32>
}

// -----

// A memory plan in which two simultaneously live buffers overlap.
zero.param @w : tensor<2x2xf32> init zeros compute bf16
zero.partition @flat stage 0 world_size 1 alignment 1 numel 4 padded 4 params [@w] offsets [0]
zero.train_step @step(%x: tensor<2x2xbf16>, %lbl: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 2>
    attributes {zero.input_offsets = array<i64: 0, 64>,
                zero.plan = #zero.memory_plan<persistent_bytes = 256, arena_bytes = 256, scratch_bytes = 0, peak_bytes = 512>} {
  %w = zero.get_param @w : tensor<2x2xbf16>
  // expected-note @+1 {{the other buffer}}
  %y = nn.matmul %x, %w {zero.alloc = array<i64: 128>} : tensor<2x2xbf16>, tensor<2x2xbf16> -> tensor<2x2xbf16>
  // expected-error @+1 {{'nn.gelu' op buffer at bytes [128, 136) of the step arena overlaps a live buffer at [128, 136)}}
  %z = nn.gelu %y {zero.alloc = array<i64: 128>} : tensor<2x2xbf16>
  %loss = nn.softmax_cross_entropy %z, %lbl {zero.alloc = array<i64: 192>} : tensor<2x2xbf16>, tensor<2xi64> -> tensor<f32>
  %s = zero.loss_scale {zero.alloc = array<i64: 256>} : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 1.0 {zero.alloc = array<i64: 320>} : tensor<2xf32>
  %g = zero.all_reduce overflow_norm %st group @flat {zero.alloc = array<i64: 384>} : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %g : tensor<2xf32> -> i1
  zero.optimizer_step group @flat stats %g scale %s skip %skip divisor 1.0 : tensor<2xf32>
  zero.return %loss : tensor<f32>
}
