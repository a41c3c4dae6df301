// RUN: zero-opt %s -split-input-file -verify-diagnostics --convert-zero-to-runtime -o /dev/null

// The lowering's errors on input that is not a scheduled, planned step, each
// on the op it cannot lower. (A call whose arguments disagree with the
// runtime's ABI table, zero_rt/abi.def, is also an error of the lowering,
// but no input reaches it: the kernel models and the lowering build every
// call; abi.test checks the calls of lowered programs against the table, and
// abi-errors.mlir those errors through the test-only -test-zero-runtime-abi.)

// The pass lowers one step.
// expected-error@+1 {{convert-zero-to-runtime: expected exactly one zero.train_step, found 0}}
module @no_step {
  zero.param @w : tensor<4xf32> init zeros
}

// -----

// expected-error@+1 {{convert-zero-to-runtime: expected exactly one zero.train_step, found 2}}
module @two_steps {
  zero.param @w : tensor<4xf32> init zeros
  zero.partition @flat stage 0 world_size 1 alignment 2 numel 4 padded 4 params [@w] offsets [0]
  zero.train_step @first(%x: tensor<4xf32>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 4> {
    %loss = nn.fill 0.0 : tensor<f32>
    zero.return %loss : tensor<f32>
  }
  zero.train_step @second(%x: tensor<4xf32>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 4> {
    %loss = nn.fill 0.0 : tensor<f32>
    zero.return %loss : tensor<f32>
  }
}

// -----

// A step before zero-partition has no schedule to lower.
module @unpartitioned {
  zero.param @w : tensor<4xf32> init zeros
  // expected-error@+1 {{'zero.train_step' op has no partitions: run zero-partition first}}
  zero.train_step @train(%x: tensor<4xf32>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32> {
    %loss = nn.fill 0.0 : tensor<f32>
    zero.return %loss : tensor<f32>
  }
}

// -----

// An op without a runtime kernel model is reported by the memory plan the
// lowering computes first, never planned or lowered as nothing.
module @no_kernel_model {
  zero.param @w : tensor<4xf32> init zeros
  zero.partition @flat stage 0 world_size 1 alignment 2 numel 4 padded 4 params [@w] offsets [0]
  zero.train_step @train(%x: tensor<4xf32>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 4> {
    // expected-error@+1 {{'arith.negf' op has no runtime kernel model (RuntimeKernelOpInterface), so its kernel scratch cannot be planned}}
    %n = arith.negf %x : tensor<4xf32>
    %loss = nn.fill 0.0 : tensor<f32>
    zero.return %loss : tensor<f32>
  }
}

// -----

// Of the value forms of zero.all_reduce the runtime has only the optimizer's
// statistics (overflow_norm).
module @sum_value_form {
  zero.param @w : tensor<4xf32> init zeros
  zero.partition @flat stage 1 world_size 2 alignment 2 numel 4 padded 4 params [@w] offsets [0]
  zero.train_step @train(%x: tensor<2x4xf32>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 1, world_size = 2, global_batch = 4> {
    %s = nn.reduce_sum %x : tensor<2x4xf32> -> tensor<4xf32>
    // expected-error@+1 {{'zero.all_reduce' op only the overflow_norm value form lowers to the runtime}}
    %r = zero.all_reduce sum %s group @flat : tensor<4xf32> -> tensor<4xf32>
    %loss = nn.fill 0.0 : tensor<f32>
    zero.return %loss : tensor<f32>
  }
}

// -----

// The skip flag is a value of the function that computed it (or of the
// carry of a split phase), so zero.optimizer_step needs its zero.update_loss_scale in
// the same phase: here the update runs in the micro step (its default
// phase), the Adam at the boundary.
module @skip_in_other_phase {
  zero.param @w : tensor<4xf32> init zeros
  zero.partition @flat stage 0 world_size 1 alignment 2 numel 4 padded 4 params [@w] offsets [0]
  zero.train_step @train(%x: tensor<4xf32>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 4> {
    %loss = nn.fill 0.0 : tensor<f32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 1.0 phase boundary : tensor<2xf32>
    %skip = zero.update_loss_scale %st : tensor<2xf32> -> i1
    // expected-error@+1 {{'zero.optimizer_step' op needs its zero.update_loss_scale in the same function (both run at the step boundary)}}
    zero.optimizer_step group @flat stats %st scale %ls skip %skip divisor 1.0 phase boundary : tensor<2xf32>
    zero.return %loss : tensor<f32>
  }
}

// -----

// A gradient stored into the persistent grads buffer (stages 0-1) has the
// partition's compute type: the store does not cast.
module @gradient_type {
  zero.param @w : tensor<4xf32> init zeros
  zero.partition @flat stage 0 world_size 1 alignment 2 numel 4 padded 4 params [@w] offsets [0]
  zero.train_step @train(%x: tensor<4xbf16>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 4> {
    %g = nn.scale %x by 1.0 : tensor<4xbf16>
    // expected-error@+1 {{'zero.grad' op gradient element type differs from the partition's compute type}}
    zero.grad @w, %g : tensor<4xbf16>
    %loss = nn.fill 0.0 : tensor<f32>
    zero.return %loss : tensor<f32>
  }
}

// -----

// At stage 3 a rank holds only its shard: a parameter is read from a
// gathered group.
module @stage3_param_without_gather {
  zero.param @w : tensor<4xf32> init zeros
  zero.partition @flat stage 3 world_size 2 alignment 2 numel 4 padded 4 params [@w] offsets [0]
  zero.train_step @train(%x: tensor<2x4xf32>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4> {
    // expected-error@+1 {{'zero.get_param' op stage-3 parameters must be read from a gather}}
    %w = zero.get_param @w : tensor<4xf32>
    %y = nn.add %x, %w : tensor<2x4xf32>, tensor<4xf32>
    %loss = nn.fill 0.0 : tensor<f32>
    zero.return %loss : tensor<f32>
  }
}

// -----

// A parameter outside every partition has no bytes.
module @param_in_no_partition {
  zero.param @w : tensor<4xf32> init zeros
  zero.param @v : tensor<4xf32> init zeros
  zero.partition @flat stage 0 world_size 1 alignment 2 numel 4 padded 4 params [@w] offsets [0]
  zero.train_step @train(%x: tensor<4x4xf32>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 4> {
    // expected-error@+1 {{'zero.get_param' op parameter is in no partition}}
    %v = zero.get_param @v : tensor<4xf32>
    %y = nn.add %x, %v : tensor<4x4xf32>, tensor<4xf32>
    %loss = nn.fill 0.0 : tensor<f32>
    zero.return %loss : tensor<f32>
  }
}

// -----

// Muon at stage 1 on two ranks: the matrix @w (16 elements) lies across
// the two 8-element shards, so no rank holds it whole for its
// Newton-Schulz. The partition, written by hand, has no owners:
// zero-partition would lay the group out with gaps in slots of 16 (16
// elements of padding), and the lowering refuses this layout by name.
module @muon_across_shards {
  zero.param @w : tensor<4x4xf32> init zeros
  zero.partition @flat stage 1 world_size 2 alignment 2 numel 16 padded 16 params [@w] offsets [0]
  zero.train_step @train(%x: tensor<2x4xf32>)
      optimizer #zero.optimizer<kind = muon, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 1, world_size = 2, global_batch = 4> {
    %w = zero.get_param @w : tensor<4x4xf32>
    %h = nn.matmul %x, %w : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    %dw = nn.matmul %x, %h transpose_lhs : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
    zero.grad @w, %dw : tensor<4x4xf32>
    zero.reduce_scatter group @flat in grads [0, 16) phase boundary
    %loss = nn.fill 0.0 : tensor<f32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 2.0 phase boundary : tensor<2xf32>
    %sum = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
    %skip = zero.update_loss_scale %sum phase boundary : tensor<2xf32> -> i1
    // expected-error@+1 {{muon at ZeRO stage 1 on 2 ranks: matrix @w (elements [0, 16)) crosses the shard boundary at 8 of group @flat: its order does not put each Muon matrix whole in one rank's shard of 8 elements, and it has no owners (zero-partition lays such a group out with gaps: slots of 16, 16 elements of padding)}}
    zero.optimizer_step group @flat stats %sum scale %ls skip %skip divisor 2.0 phase boundary : tensor<2xf32>
    zero.all_gather group @flat in params [0, 16) phase post_step
    zero.return %loss : tensor<f32>
  }
}

// -----

// Muon's Newton-Schulz has no host kernel: its offloaded update is refused.
module @muon_offload {
  zero.param @w : tensor<4x2xf32> init zeros compute bf16
  zero.partition @flat stage 2 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
  zero.train_step @train(%x: tensor<2x4xbf16>, %dy: tensor<2x2xbf16>)
      optimizer #zero.optimizer<kind = muon, lr = 1.0e-3>
      precision #zero.precision<kind = bf16>
      schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 4>
      offload #zero.offload<optimizer = cpu> {
    %dw = nn.matmul %x, %dy transpose_lhs : tensor<2x4xbf16>, tensor<2x2xbf16> -> tensor<4x2xbf16>
    zero.grad @w, %dw : tensor<4x2xbf16>
    zero.reduce_scatter group @flat [0, 8) from %dw at [0] : tensor<4x2xbf16>
    %down = zero.transfer group @flat grads[0, 8) to host_grads phase last_micro_step -> !zero.token
    zero.free %dw : tensor<4x2xbf16>
    %loss = nn.fill 0.0 : tensor<f32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 2.0 phase boundary : tensor<2xf32>
    %sum = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
    %skip = zero.update_loss_scale %sum phase boundary : tensor<2xf32> -> i1
    zero.wait %down phase boundary
    // expected-error@+1 {{muon with offload (its host optimizer update) is not supported: Muon's Newton-Schulz runs on the device only}}
    zero.optimizer_step group @flat stats %sum scale %ls skip %skip divisor 2.0 host phase boundary : tensor<2xf32>
    %up = zero.transfer group @flat host_params to params phase boundary -> !zero.token
    zero.wait %up phase boundary
    zero.all_gather group @flat in params [0, 8) phase post_step
    zero.return %loss : tensor<f32>
  }
}

// -----

// A padded parameter's zero rows would count in Adafactor's row and column
// means: refused, naming it.
module @adafactor_padded {
  zero.param @w : tensor<4x2xf32> init zeros rows 3
  zero.partition @flat stage 0 world_size 1 alignment 2 numel 8 padded 8 params [@w] offsets [0]
  zero.train_step @train(%x: tensor<2x4xf32>, %dy: tensor<2x2xf32>)
      optimizer #zero.optimizer<kind = adafactor, lr = 1.0e-2>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 2> {
    %loss = nn.fill 0.0 : tensor<f32>
    %dw = nn.matmul %x, %dy transpose_lhs : tensor<2x4xf32>, tensor<2x2xf32> -> tensor<4x2xf32>
    zero.grad @w, %dw : tensor<4x2xf32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 1.0 phase boundary : tensor<2xf32>
    %skip = zero.update_loss_scale %st phase boundary : tensor<2xf32> -> i1
    // expected-error@+1 {{adafactor: parameter @w is padded; its padding rows would count in Adafactor's row and column statistics}}
    zero.optimizer_step group @flat stats %st scale %ls skip %skip divisor 1.0 phase boundary : tensor<2xf32>
    zero.return %loss : tensor<f32>
  }
}
