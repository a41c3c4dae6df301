// RUN: zero-opt %s -split-input-file --zero-token-mean | FileCheck %s

// A loss with ignore_index on 2 ranks x 2 micro steps: the label count at
// the top of the step (the labels are an input), the micro batch's share
// right after the loss, the loss and the backward's seed multiplied by it.
zero.param @w : tensor<4x3xf32> init zeros
zero.partition @flat stage 0 world_size 2 alignment 2 numel 12 padded 12 params [@w] offsets [0]
// CHECK-LABEL: zero.train_step @train(
// CHECK-SAME: %{{.*}}: tensor<2x4xf32>, %[[Y:.*]]: tensor<2xi64>)
zero.train_step @train(%x: tensor<2x4xf32>, %y: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 2, global_batch = 8, accumulation_steps = 2> {
  // CHECK-NEXT: zero.count_labels %[[Y]] ignore_index -100 group @flat : tensor<2xi64> -> tensor<1xi64>
  // CHECK-NEXT: zero.get_param @w
  %w = zero.get_param @w : tensor<4x3xf32>
  %z = nn.matmul %x, %w : tensor<2x4xf32>, tensor<4x3xf32> -> tensor<2x3xf32>
  // CHECK: %[[LOSS:.*]] = nn.softmax_cross_entropy %[[Z:.*]], %[[Y]] ignore_index -100
  // CHECK-NEXT: %[[SHARE:.*]] = zero.label_share divisor 4.000000e+00 : tensor<f32>
  // CHECK-NEXT: %[[MEAN:.*]] = nn.mul %[[LOSS]], %[[SHARE]] : tensor<f32>, tensor<f32>
  %loss = nn.softmax_cross_entropy %z, %y ignore_index -100 : tensor<2x3xf32>, tensor<2xi64> -> tensor<f32>
  // CHECK-NEXT: %[[SEED:.*]] = nn.fill 1.000000e+00 {zero.loss_seed} : tensor<f32>
  // CHECK-NEXT: %[[SCALED:.*]] = nn.mul %[[SEED]], %[[SHARE]] : tensor<f32>, tensor<f32>
  // CHECK-NEXT: nn.softmax_cross_entropy_grad %[[Z]], %[[Y]], %[[SCALED]] ignore_index -100
  %seed = nn.fill 1.0 {zero.loss_seed} : tensor<f32>
  %dz = nn.softmax_cross_entropy_grad %z, %y, %seed ignore_index -100 : tensor<2x3xf32>, tensor<2xi64>, tensor<f32>
  %dw = nn.matmul %x, %dz transpose_lhs : tensor<2x4xf32>, tensor<2x3xf32> -> tensor<4x3xf32>
  zero.grad @w, %dw : tensor<4x3xf32>
  // CHECK: zero.return %[[MEAN]] : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// At fp16 the seed is the loss scale, multiplied by the share like any
// seed: the gradients keep the magnitude of a mean, which the overflow
// check and the loss scaler see as without ignore_index. One rank, one
// micro step: the divisor is 1.
zero.param @w : tensor<4x3xf32> init zeros compute f16
zero.partition @flat stage 0 world_size 1 alignment 2 numel 12 padded 12 params [@w] offsets [0]
// CHECK-LABEL: zero.train_step @fp16
zero.train_step @fp16(%x: tensor<2x4xf16>, %y: tensor<2xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp16>
    schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 2> {
  // CHECK: zero.count_labels %{{.*}} ignore_index -1 group @flat : tensor<2xi32> -> tensor<1xi64>
  %w = zero.get_param @w : tensor<4x3xf16>
  %z = nn.matmul %x, %w : tensor<2x4xf16>, tensor<4x3xf16> -> tensor<2x3xf16>
  %loss = nn.softmax_cross_entropy %z, %y ignore_index -1 : tensor<2x3xf16>, tensor<2xi32> -> tensor<f32>
  // CHECK: %[[SHARE:.*]] = zero.label_share divisor 1.000000e+00 : tensor<f32>
  // CHECK: %[[SCALE:.*]] = zero.loss_scale : tensor<f32>
  // CHECK-NEXT: %[[SEED:.*]] = nn.mul %[[SCALE]], %[[SHARE]]
  // CHECK-NEXT: nn.softmax_cross_entropy_grad %{{.*}}, %{{.*}}, %[[SEED]] ignore_index -1
  %s = zero.loss_scale : tensor<f32>
  %dz = nn.softmax_cross_entropy_grad %z, %y, %s ignore_index -1 : tensor<2x3xf16>, tensor<2xi32>, tensor<f32>
  %dw = nn.matmul %x, %dz transpose_lhs : tensor<2x4xf16>, tensor<2x3xf16> -> tensor<4x3xf16>
  zero.grad @w, %dw : tensor<4x3xf16>
  zero.return %loss : tensor<f32>
}

// -----

// A loss without ignore_index is left alone.
zero.param @w : tensor<4x3xf32> init zeros
zero.partition @flat stage 0 world_size 2 alignment 2 numel 12 padded 12 params [@w] offsets [0]
// CHECK-LABEL: zero.train_step @plain
// CHECK-NOT: zero.count_labels
// CHECK-NOT: zero.label_share
// CHECK: zero.return %{{.*}} : tensor<f32>
zero.train_step @plain(%x: tensor<2x4xf32>, %y: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 2, global_batch = 4> {
  %w = zero.get_param @w : tensor<4x3xf32>
  %z = nn.matmul %x, %w : tensor<2x4xf32>, tensor<4x3xf32> -> tensor<2x3xf32>
  %loss = nn.softmax_cross_entropy %z, %y : tensor<2x3xf32>, tensor<2xi64> -> tensor<f32>
  %seed = nn.fill 1.0 {zero.loss_seed} : tensor<f32>
  %dz = nn.softmax_cross_entropy_grad %z, %y, %seed : tensor<2x3xf32>, tensor<2xi64>, tensor<f32>
  %dw = nn.matmul %x, %dz transpose_lhs : tensor<2x4xf32>, tensor<2x3xf32> -> tensor<4x3xf32>
  zero.grad @w, %dw : tensor<4x3xf32>
  zero.return %loss : tensor<f32>
}

// -----

// Labels computed in the step (shifted inside a causal LM's loss): the
// count goes right after the op that computes them, so that the label count
// function runs that op and nothing after it.
zero.param @w : tensor<4x3xf32> init zeros
zero.partition @flat stage 0 world_size 2 alignment 2 numel 12 padded 12 params [@w] offsets [0]
// CHECK-LABEL: zero.train_step @shifted
zero.train_step @shifted(%x: tensor<10x4xf32>, %y: tensor<10xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 2, global_batch = 20> {
  %w = zero.get_param @w : tensor<4x3xf32>
  %z = nn.matmul %x, %w : tensor<10x4xf32>, tensor<4x3xf32> -> tensor<10x3xf32>
  // CHECK: %[[S:.*]] = nn.shift_labels %{{.*}} fill -100 : tensor<10xi64>
  // CHECK-NEXT: zero.count_labels %[[S]] ignore_index -100 group @flat : tensor<10xi64> -> tensor<1xi64>
  // CHECK-NEXT: nn.softmax_cross_entropy %{{.*}}, %[[S]] ignore_index -100
  %s = nn.shift_labels %y fill -100 : tensor<10xi64>
  %loss = nn.softmax_cross_entropy %z, %s ignore_index -100 : tensor<10x3xf32>, tensor<10xi64> -> tensor<f32>
  %seed = nn.fill 1.0 {zero.loss_seed} : tensor<f32>
  %dz = nn.softmax_cross_entropy_grad %z, %s, %seed ignore_index -100 : tensor<10x3xf32>, tensor<10xi64>, tensor<f32>
  %dw = nn.matmul %x, %dz transpose_lhs : tensor<10x4xf32>, tensor<10x3xf32> -> tensor<4x3xf32>
  zero.grad @w, %dw : tensor<4x3xf32>
  zero.return %loss : tensor<f32>
}

// -----

// A term added to the loss (a mixture of experts' load-balancing loss,
// `loss += coef * aux`): only the cross entropy, the add's operand, is
// scaled by the share; the add then sums the scaled loss and the term.
zero.param @w : tensor<4x3xf32> init zeros
zero.partition @flat stage 0 world_size 1 alignment 2 numel 12 padded 12 params [@w] offsets [0]
// CHECK-LABEL: zero.train_step @added
zero.train_step @added(%x: tensor<2x4xf32>, %y: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 2> {
  %w = zero.get_param @w : tensor<4x3xf32>
  %z = nn.matmul %x, %w : tensor<2x4xf32>, tensor<4x3xf32> -> tensor<2x3xf32>
  // CHECK: %[[CE:.*]] = nn.softmax_cross_entropy %{{.*}}, %{{.*}} ignore_index -100
  // CHECK-NEXT: %[[SHARE:.*]] = zero.label_share divisor 1.000000e+00 : tensor<f32>
  // CHECK-NEXT: %[[MEAN:.*]] = nn.mul %[[CE]], %[[SHARE]] : tensor<f32>, tensor<f32>
  %ce = nn.softmax_cross_entropy %z, %y ignore_index -100 : tensor<2x3xf32>, tensor<2xi64> -> tensor<f32>
  %aux = nn.moe_aux_loss %z top_k 1 : tensor<2x3xf32> -> tensor<f32>
  %term = nn.scale %aux by 5.000000e-02 : tensor<f32>
  // CHECK: %[[LOSS:.*]] = nn.add %[[MEAN]], %{{.*}} : tensor<f32>, tensor<f32>
  %loss = nn.add %ce, %term : tensor<f32>, tensor<f32>
  // CHECK: %[[SEED:.*]] = nn.fill 1.000000e+00 {zero.loss_seed} : tensor<f32>
  // CHECK-NEXT: %[[SCALED:.*]] = nn.mul %[[SEED]], %[[SHARE]] : tensor<f32>, tensor<f32>
  // CHECK-NEXT: nn.softmax_cross_entropy_grad %{{.*}}, %{{.*}}, %[[SCALED]] ignore_index -100
  %seed = nn.fill 1.0 {zero.loss_seed} : tensor<f32>
  %dz = nn.softmax_cross_entropy_grad %z, %y, %seed ignore_index -100 : tensor<2x3xf32>, tensor<2xi64>, tensor<f32>
  %dw = nn.matmul %x, %dz transpose_lhs : tensor<2x4xf32>, tensor<2x3xf32> -> tensor<4x3xf32>
  zero.grad @w, %dw : tensor<4x3xf32>
  // CHECK: zero.return %[[LOSS]] : tensor<f32>
  zero.return %loss : tensor<f32>
}
