// The step of cost-model-offload-stream.mlir as zero-optimizer scheduled an
// offloaded optimizer before the gradients streamed: one copy of the whole
// owned gradients at the boundary, after the backward.
zero.param @a : tensor<1024x512xf32> init zeros compute bf16
zero.param @b : tensor<1024x512xf32> init zeros compute bf16
zero.partition @flat stage 2 world_size 1 alignment 2 numel 1048576 padded 1048576 params [@a, @b] offsets [0, 524288]
zero.train_step @step(%x: tensor<2x4xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 1, global_batch = 2>
    offload #zero.offload<optimizer = cpu> {
  %loss = nn.fill 0.0 : tensor<f32>
  %gb = nn.fill 1.0 : tensor<1024x512xbf16>
  zero.grad @b, %gb : tensor<1024x512xbf16>
  zero.reduce_scatter group @flat [524288, 1048576) from %gb at [0] : tensor<1024x512xbf16>
  zero.free %gb : tensor<1024x512xbf16>
  %big = nn.fill 1.0 : tensor<1024x65536xbf16>
  zero.free %big : tensor<1024x65536xbf16>
  %ga = nn.fill 1.0 : tensor<1024x512xbf16>
  zero.grad @a, %ga : tensor<1024x512xbf16>
  zero.reduce_scatter group @flat [0, 524288) from %ga at [0] : tensor<1024x512xbf16>
  zero.free %ga : tensor<1024x512xbf16>
  %d = zero.transfer group @flat grads to host_grads phase boundary -> !zero.token
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 1.0 phase boundary : tensor<2xf32>
  %gs = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %gs phase boundary : tensor<2xf32> -> i1
  zero.wait %d phase boundary
  zero.optimizer_step group @flat stats %gs scale %s skip %skip divisor 1.0 host phase boundary : tensor<2xf32>
  %u = zero.transfer group @flat host_params to params phase boundary -> !zero.token
  zero.wait %u phase boundary
  zero.return %loss : tensor<f32>
}
