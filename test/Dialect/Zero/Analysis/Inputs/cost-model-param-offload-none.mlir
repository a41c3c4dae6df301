// The step of cost-model-param-offload.mlir as zero-param-gather and
// zero-optimizer schedule it without offload: the gather reads the
// device shard.
zero.param @w : tensor<1024x1024xf32> init zeros compute bf16
zero.partition @flat stage 3 world_size 1 alignment 2 numel 1048576 padded 1048576 params [@w] offsets [0]
zero.train_step @step(%x: tensor<1x1024xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 1, global_batch = 1> {
  %full = zero.all_gather group @flat : tensor<1048576xbf16>
  %w = zero.get_param @w from %full : tensor<1048576xbf16> -> tensor<1024x1024xbf16>
  %y = nn.matmul %x, %w : tensor<1x1024xbf16>, tensor<1024x1024xbf16> -> tensor<1x1024xbf16>
  zero.free %full : tensor<1048576xbf16>
  %loss = nn.fill 0.0 : tensor<f32>
  %g = nn.fill 1.0 : tensor<1024x1024xbf16>
  zero.grad @w, %g : tensor<1024x1024xbf16>
  zero.reduce_scatter group @flat [0, 1048576) from %g at [0] : tensor<1024x1024xbf16>
  zero.free %g : tensor<1024x1024xbf16>
  %scale = zero.loss_scale phase boundary : tensor<f32>
  %stats = zero.check_overflow groups [@flat] scale %scale divisor 1.0 phase boundary : tensor<2xf32>
  %norm = zero.all_reduce overflow_norm %stats group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %norm phase boundary : tensor<2xf32> -> i1
  zero.optimizer_step group @flat stats %norm scale %scale skip %skip divisor 1.0 phase boundary : tensor<2xf32>
  zero.return %loss : tensor<f32>
}
