// RUN: zero-opt %s -split-input-file --zero-token-mean -verify-diagnostics

// A loss divided by the mean of its mask: the global batch's mean is not
// the sum of the micro batches' (nor their mean, with different counts),
// so the pass names the op rather than divide by each rank's own.
zero.param @w : tensor<4x3xf32> init zeros
zero.partition @flat stage 0 world_size 2 alignment 2 numel 12 padded 12 params [@w] offsets [0]
zero.train_step @mean(%x: tensor<2x4xf32>, %mask: tensor<2x3xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 2, global_batch = 4> {
  %w = zero.get_param @w : tensor<4x3xf32>
  %z = nn.matmul %x, %w : tensor<2x4xf32>, tensor<4x3xf32> -> tensor<2x3xf32>
  %ones = nn.fill 1.0 : tensor<1x3xf32>
  %zs = nn.matmul %z, %ones transpose_rhs : tensor<2x3xf32>, tensor<1x3xf32> -> tensor<2x1xf32>
  %num = nn.reduce_sum %zs : tensor<2x1xf32> -> tensor<f32>
  %ms = nn.matmul %mask, %ones transpose_rhs : tensor<2x3xf32>, tensor<1x3xf32> -> tensor<2x1xf32>
  %sum = nn.reduce_sum %ms : tensor<2x1xf32> -> tensor<f32>
  %mean = nn.scale %sum by 0.16666666666666666 : tensor<f32>
  // expected-error @+1 {{'nn.reciprocal' op divides the loss by a scalar computed from the step's inputs alone, whose value over the global batch (every rank and micro step) is known only for a sum, `x.sum()`, optionally clamped or plus a constant; got nn.scale}}
  %inv = nn.reciprocal %mean : tensor<f32>
  %loss = nn.mul %num, %inv : tensor<f32>, tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// A loss that is not linear in the quotient (its square): the micro
// batches' parts do not add up to the global batch's.
zero.param @w : tensor<4x3xf32> init zeros
zero.partition @flat stage 0 world_size 2 alignment 2 numel 12 padded 12 params [@w] offsets [0]
zero.train_step @square(%x: tensor<2x4xf32>, %mask: tensor<2x3xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 2, global_batch = 4> {
  %w = zero.get_param @w : tensor<4x3xf32>
  %z = nn.matmul %x, %w : tensor<2x4xf32>, tensor<4x3xf32> -> tensor<2x3xf32>
  %ones = nn.fill 1.0 : tensor<1x3xf32>
  %zs = nn.matmul %z, %ones transpose_rhs : tensor<2x3xf32>, tensor<1x3xf32> -> tensor<2x1xf32>
  %num = nn.reduce_sum %zs : tensor<2x1xf32> -> tensor<f32>
  %ms = nn.matmul %mask, %ones transpose_rhs : tensor<2x3xf32>, tensor<1x3xf32> -> tensor<2x1xf32>
  %sum = nn.reduce_sum %ms : tensor<2x1xf32> -> tensor<f32>
  // expected-error @+1 {{'nn.reciprocal' op divides the loss by a sum over the global batch, which is exact only for a loss that is a sum of terms proportional to the quotient (nn.mul, nn.add, nn.scale, nn.reshape); the quotient reaches nn.exp}}
  %inv = nn.reciprocal %sum : tensor<f32>
  %ratio = nn.mul %num, %inv : tensor<f32>, tensor<f32>
  %loss = nn.exp %ratio : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// A loss that is not linear in a sum over the batch (its exponential): the
// global batch's is not the micro batches' sum.
zero.param @w : tensor<4x3xf32> init zeros
zero.partition @flat stage 0 world_size 2 alignment 2 numel 12 padded 12 params [@w] offsets [0]
zero.train_step @exp(%x: tensor<2x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 2, global_batch = 4> {
  %w = zero.get_param @w : tensor<4x3xf32>
  %z = nn.matmul %x, %w : tensor<2x4xf32>, tensor<4x3xf32> -> tensor<2x3xf32>
  %ones = nn.fill 1.0 : tensor<1x3xf32>
  %rows = nn.matmul %z, %ones transpose_rhs : tensor<2x3xf32>, tensor<1x3xf32> -> tensor<2x1xf32>
  // expected-error @+1 {{'nn.reduce_sum' op sums over the batch, whose global value is the sum of the micro batches' only for a loss that is a sum of terms proportional to it (nn.mul, nn.add, nn.scale, nn.reshape); the sum reaches nn.exp}}
  %sum = nn.reduce_sum %rows : tensor<2x1xf32> -> tensor<f32>
  %loss = nn.exp %sum : tensor<f32>
  zero.return %loss : tensor<f32>
}
