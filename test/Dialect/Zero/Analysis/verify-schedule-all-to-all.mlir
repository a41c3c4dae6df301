// RUN: zero-opt %s -split-input-file --zero-verify-schedule -verify-diagnostics

// zero-verify-schedule on zero.all_to_all, through CollectiveOpInterface
// alone: an asynchronous one is waited exactly once, and its result is
// read only after its zero.wait.

module @unwaited {
  zero.param @w : tensor<4x2xf32> init zeros
  zero.param @b : tensor<2xf32> init zeros
  zero.partition @flat stage 1 world_size 4 alignment 2 numel 10 padded 16 params [@w, @b] offsets [0, 8]
  zero.train_step @train(%x: tensor<2x4xf32>, %dy: tensor<2x2xf32>, %s: tensor<2x8x4xf32>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 1, world_size = 4, global_batch = 8, ranks_per_node = 2> {
    %w = zero.get_param @w : tensor<4x2xf32>
    %b = zero.get_param @b : tensor<2xf32>
    %a = zero.all_to_all %x split 1 concat 0 over world : tensor<2x4xf32> -> tensor<8x1xf32>
    // expected-error @+1 {{'zero.all_to_all' op is asynchronous but its token is waited 0 times (exactly once is required)}}
    %c, %t = zero.all_to_all %s split 2 concat 1 over world : tensor<2x8x4xf32> -> tensor<2x32x1xf32>, !zero.token
    %h = nn.matmul %x, %w : tensor<2x4xf32>, tensor<4x2xf32> -> tensor<2x2xf32>
    %y = nn.add %h, %b : tensor<2x2xf32>, tensor<2xf32>
    %dw = nn.matmul %x, %dy transpose_lhs : tensor<2x4xf32>, tensor<2x2xf32> -> tensor<4x2xf32>
    zero.grad @w, %dw : tensor<4x2xf32>
    %db = nn.reduce_sum %dy : tensor<2x2xf32> -> tensor<2xf32>
    zero.grad @b, %db : tensor<2xf32>
    zero.reduce_scatter group @flat in grads [0, 10) phase boundary
    %loss = nn.fill 0.0 : tensor<f32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 4.0 phase boundary : tensor<2xf32>
    %sum = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
    %skip = zero.update_loss_scale %sum phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @flat stats %sum scale %ls skip %skip divisor 4.0 phase boundary : tensor<2xf32>
    zero.all_gather group @flat in params [0, 10) phase post_step
    zero.return %loss : tensor<f32>
  }
}

// -----

module @early_use {
  zero.param @w : tensor<4x2xf32> init zeros
  zero.param @b : tensor<2xf32> init zeros
  zero.partition @flat stage 1 world_size 4 alignment 2 numel 10 padded 16 params [@w, @b] offsets [0, 8]
  zero.train_step @train(%x: tensor<2x4xf32>, %dy: tensor<2x2xf32>, %s: tensor<2x8x4xf32>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 1, world_size = 4, global_batch = 8, ranks_per_node = 2> {
    %w = zero.get_param @w : tensor<4x2xf32>
    %b = zero.get_param @b : tensor<2xf32>
    %a = zero.all_to_all %x split 1 concat 0 over world : tensor<2x4xf32> -> tensor<8x1xf32>
    // expected-note @+1 {{collective issued here}}
    %c, %t = zero.all_to_all %s split 2 concat 1 over world : tensor<2x8x4xf32> -> tensor<2x32x1xf32>, !zero.token
    // expected-error @+1 {{'nn.add' op uses the result of an asynchronous collective before its zero.wait}}
    %u = nn.add %c, %c : tensor<2x32x1xf32>, tensor<2x32x1xf32>
    zero.wait %t
    %h = nn.matmul %x, %w : tensor<2x4xf32>, tensor<4x2xf32> -> tensor<2x2xf32>
    %y = nn.add %h, %b : tensor<2x2xf32>, tensor<2xf32>
    %dw = nn.matmul %x, %dy transpose_lhs : tensor<2x4xf32>, tensor<2x2xf32> -> tensor<4x2xf32>
    zero.grad @w, %dw : tensor<4x2xf32>
    %db = nn.reduce_sum %dy : tensor<2x2xf32> -> tensor<2xf32>
    zero.grad @b, %db : tensor<2xf32>
    zero.reduce_scatter group @flat in grads [0, 10) phase boundary
    %loss = nn.fill 0.0 : tensor<f32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 4.0 phase boundary : tensor<2xf32>
    %sum = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
    %skip = zero.update_loss_scale %sum phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @flat stats %sum scale %ls skip %skip divisor 4.0 phase boundary : tensor<2xf32>
    zero.all_gather group @flat in params [0, 10) phase post_step
    zero.return %loss : tensor<f32>
  }
}
