// RUN: not zero-opt %s -split-input-file --zero-optimizer 2>&1 | FileCheck %s

// The optimizer step needs the layout and divisor of a partitioned step.
// CHECK: error: {{.*}}zero-optimizer needs a partitioned train step
zero.param @a : tensor<4xf32> init zeros
zero.train_step @train(%x: tensor<2x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  %ga = nn.fill 1.0 : tensor<4xf32>
  zero.grad @a, %ga : tensor<4xf32>
  zero.return %loss : tensor<f32>
}

// -----

// A step that already updates its shards is not given a second optimizer.
// CHECK: error: {{.*}}already has an optimizer step
zero.param @a : tensor<4xf32> init zeros
zero.partition @flat stage 0 world_size 2 alignment 2 numel 4 padded 4 params [@a] offsets [0]
zero.train_step @train(%x: tensor<2x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 2, global_batch = 4> {
  %loss = nn.fill 0.0 : tensor<f32>
  %ga = nn.fill 1.0 : tensor<4xf32>
  zero.grad @a, %ga : tensor<4xf32>
  zero.all_reduce sum group @flat in grads [0, 4) phase boundary
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 2.0 phase boundary : tensor<2xf32>
  %skip = zero.update_loss_scale %st phase boundary : tensor<2xf32> -> i1
  zero.optimizer_step group @flat stats %st scale %s skip %skip divisor 2.0 phase boundary : tensor<2xf32>
  zero.return %loss : tensor<f32>
}
