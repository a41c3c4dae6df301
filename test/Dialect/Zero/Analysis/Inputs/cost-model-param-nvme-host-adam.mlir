// The step of cost-model-param-nvme.mlir as zero-param-gather and
// zero-optimizer schedule it with the parameter shards on NVMe and the
// optimizer on the host: the gradients stream to the host, the host Adam's
// new parameters go back to the swap file from host_params.
zero.param @w : tensor<1024x1024xf32> init zeros compute bf16
zero.partition @flat stage 3 world_size 1 alignment 2 numel 1048576 padded 1048576 params [@w] offsets [0]
zero.train_step @step(%x: tensor<1x1024xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 1, global_batch = 1>
    offload #zero.offload<optimizer = cpu, param = nvme, param_nvme_path = "/nvme"> {
  %shard, %read = zero.transfer group @flat params to staging swap <buffer = 0, buffers = 5, buffer_bytes = 2097152> : tensor<1048576xbf16> -> !zero.token
  zero.wait %read
  %full = zero.all_gather group @flat from %shard : tensor<1048576xbf16> : tensor<1048576xbf16>
  zero.free %shard : tensor<1048576xbf16>
  %w = zero.get_param @w from %full : tensor<1048576xbf16> -> tensor<1024x1024xbf16>
  %y = nn.matmul %x, %w : tensor<1x1024xbf16>, tensor<1024x1024xbf16> -> tensor<1x1024xbf16>
  zero.free %full : tensor<1048576xbf16>
  %loss = nn.fill 0.0 : tensor<f32>
  %g = nn.fill 1.0 : tensor<1024x1024xbf16>
  zero.grad @w, %g : tensor<1024x1024xbf16>
  zero.reduce_scatter group @flat [0, 1048576) from %g at [0] : tensor<1024x1024xbf16>
  %up = zero.transfer group @flat grads[0, 1048576) to host_grads phase last_micro_step -> !zero.token
  zero.free %g : tensor<1024x1024xbf16>
  %scale = zero.loss_scale phase boundary : tensor<f32>
  %stats = zero.check_overflow groups [@flat] scale %scale divisor 1.0 phase boundary : tensor<2xf32>
  %norm = zero.all_reduce overflow_norm %stats group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %norm phase boundary : tensor<2xf32> -> i1
  zero.wait %up phase boundary
  zero.optimizer_step group @flat stats %norm scale %scale skip %skip divisor 1.0 host phase boundary : tensor<2xf32>
  %up2 = zero.transfer group @flat host_params to params swap <buffer = 0, buffers = 5, buffer_bytes = 2097152> phase boundary -> !zero.token
  zero.wait %up2 phase boundary
  zero.return %loss : tensor<f32>
}
