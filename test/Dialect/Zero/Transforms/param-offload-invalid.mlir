// RUN: zero-opt %s -split-input-file --zero-param-gather="offload-param=cpu" --verify-diagnostics
// RUN: not zero-opt %s -split-input-file --zero-param-gather --zero-optimizer="offload-param=cpu" 2>&1 | FileCheck %s --check-prefix=OPT

// DeepSpeed's rule: parameter offload at stage 3 only.
zero.param @w : tensor<4x4xf32> init zeros
zero.partition @flat stage 2 world_size 2 alignment 2 numel 16 padded 16 params [@w] offsets [0]
// expected-error @+1 {{zero-param-gather: parameter offload (offload_param) needs ZeRO stage 3, the stage is 2}}
zero.train_step @stage2(%x: tensor<2x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 4> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// zero-optimizer alone cannot offload the parameters: the gathers must
// read staged shards, which zero-param-gather emits.
// OPT: error: zero-optimizer: parameter offload (offload_param) needs zero-param-gather's offload-param=cpu, whose gathers read staged shards
zero.param @w : tensor<4x4xf32> init zeros
zero.partition @flat stage 3 world_size 2 alignment 2 numel 16 padded 16 params [@w] offsets [0]
zero.train_step @stage3(%x: tensor<2x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}
