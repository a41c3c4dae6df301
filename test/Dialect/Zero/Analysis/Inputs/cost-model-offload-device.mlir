// The step of cost-model-offload.mlir as zero-optimizer schedules it with
// the optimizer on the device: no copies.
zero.param @w : tensor<1024x1024xf32> init zeros compute bf16
zero.partition @flat stage 1 world_size 1 alignment 2 numel 1048576 padded 1048576 params [@w] offsets [0]
zero.train_step @step(%x: tensor<2x4xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 1, world_size = 1, global_batch = 2> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.reduce_scatter group @flat in grads [0, 1048576) phase boundary
  %scale = zero.loss_scale phase boundary : tensor<f32>
  %stats = zero.check_overflow groups [@flat] scale %scale divisor 1.0 phase boundary : tensor<2xf32>
  %norm = zero.all_reduce overflow_norm %stats group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %norm phase boundary : tensor<2xf32> -> i1
  zero.optimizer_step group @flat stats %norm scale %scale skip %skip divisor 1.0 phase boundary : tensor<2xf32>
  zero.all_gather group @flat in params [0, 1048576) phase post_step
  zero.return %loss : tensor<f32>
}
