// RUN: zero-opt %s -split-input-file -verify-diagnostics

// Checks that bf16 masters (DeepSpeed's bf16_master_weights_and_grads) are
// refused for an optimizer whose update has no bf16-master form.
// expected-error @+2 {{optimizer bf16_masters is implemented for adam and adamw with f32 or bf16 states, got lion with f32 states}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = lion, lr = 1.0e-4, bf16_masters = true>
    precision #zero.precision<kind = bf16> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that bf16 masters are refused with 8-bit states.
// expected-error @+2 {{optimizer bf16_masters is implemented for adam and adamw with f32 or bf16 states, got adamw with int8 states}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-3, states = int8, bf16_masters = true>
    precision #zero.precision<kind = bf16> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that bf16 masters are refused by name with an offloaded optimizer.
// expected-error @+1 {{'zero.train_step' op bf16_masters (bf16 parameters as their own masters) is not implemented with optimizer or parameter offload}}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-3, bf16_masters = true>
    precision #zero.precision<kind = bf16>
    offload #zero.offload<optimizer = cpu> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that bf16 parameters under bf16_masters have no master buffer:
// they are their own masters.
zero.param @w : tensor<4xf32> init zeros compute bf16
// expected-error @+1 {{'zero.partition' op buffers #zero.buffer_offsets<params = 0, grads = 64, master = 128, exp_avg = 192, exp_avg_sq = 256> have a master buffer, but parameter @w computes in 'bf16' (bf16 parameters with bf16_masters are their own masters)}}
zero.partition @g stage 0 world_size 1 alignment 1 numel 4 padded 4 params [@w] offsets [0]
    {zero.buffers = #zero.buffer_offsets<params = 0, grads = 64, master = 128, exp_avg = 192, exp_avg_sq = 256>}
zero.train_step @train(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-3, bf16_masters = true>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 8> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}
