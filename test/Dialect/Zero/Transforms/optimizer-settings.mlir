// RUN: zero-opt %s -split-input-file --zero-optimizer="lr-schedule=WarmupDecayLR:warmup_max_lr=6e-4,warmup_num_steps=100,warmup_type=linear,total_num_steps=1000 bias-correction=false" | FileCheck %s --check-prefix=SCHED
// RUN: zero-opt %s -split-input-file --zero-optimizer="no-decay-bias-norm" | FileCheck %s --check-prefix=BIAS
// RUN: zero-opt %s -split-input-file --zero-optimizer="no-decay-bias-norm no-decay-embeddings" | FileCheck %s --check-prefix=EMB
// RUN: zero-opt %s -split-input-file --zero-optimizer="lr-schedule=none" | FileCheck %s --check-prefix=NONE
// RUN: not zero-opt %s -split-input-file --zero-optimizer="lr-schedule=Cosine" 2>&1 | FileCheck %s --check-prefix=BADTYPE
// RUN: not zero-opt %s -split-input-file --zero-optimizer="lr-schedule=WarmupLR:total_num_steps=5" 2>&1 | FileCheck %s --check-prefix=BADPARAM
// RUN: not zero-opt %s -split-input-file --zero-optimizer="lr-schedule=WarmupLR:warmup_num_steps=1.5" 2>&1 | FileCheck %s --check-prefix=BADVALUE
// RUN: not zero-opt %s -split-input-file --zero-optimizer="lr-schedule=WarmupLR:warmup_num_steps" 2>&1 | FileCheck %s --check-prefix=BADSPEC
// RUN: not zero-opt %s -split-input-file --zero-optimizer="bias-correction=maybe" 2>&1 | FileCheck %s --check-prefix=BADBC

// The optimizer settings zero-optimizer sets without a ds_config: a
// learning-rate schedule by DeepSpeed's names, bias correction, and the
// weight-decay groups (1-D parameters: biases and norm weights; the tables
// nn.embedding reads).
zero.param @wte : tensor<16x4xf32> init normal std 0.02
zero.param @w : tensor<4x4xf32> init normal std 0.02
zero.param @b : tensor<4xf32> init zeros
zero.partition @flat stage 0 world_size 1 alignment 2 numel 84 padded 84 params [@wte, @w, @b] offsets [0, 64, 80]
// SCHED-LABEL: zero.train_step @train
// SCHED-SAME: optimizer #zero.optimizer<kind = adamw, lr = 1.000000e-03, weight_decay = 1.000000e-01, bias_correction = false, schedule = <kind = warmup_decay_lr, warmup_max_lr = 6.000000e-04, warmup_num_steps = 100, warmup_type = linear, total_num_steps = 1000>>
// BIAS: zero.param @wte : tensor<16x4xf32> init normal std 2.000000e-02{{$}}
// BIAS-NEXT: zero.param @w : tensor<4x4xf32> init normal std 2.000000e-02{{$}}
// BIAS-NEXT: zero.param @b : tensor<4xf32> init zeros weight_decay 0.000000e+00{{$}}
// EMB: zero.param @wte : tensor<16x4xf32> init normal std 2.000000e-02 weight_decay 0.000000e+00
// EMB-NEXT: zero.param @w : tensor<4x4xf32> init normal std 2.000000e-02{{$}}
// EMB-NEXT: zero.param @b : tensor<4xf32> init zeros weight_decay 0.000000e+00
// NONE-LABEL: zero.train_step @train
// NONE-SAME: optimizer #zero.optimizer<kind = adamw, lr = 1.000000e-03, weight_decay = 1.000000e-01>
// BADTYPE: error: zero-optimizer: unknown learning-rate scheduler 'Cosine' (DeepSpeed's are WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle and LRRangeTest)
// BADPARAM: error: zero-optimizer: lr_schedule warmup_lr has no parameter total_num_steps
// BADVALUE: error: zero-optimizer: scheduler WarmupLR: warmup_num_steps must be a whole number, got '1.5'
// BADSPEC: error: zero-optimizer: lr-schedule 'WarmupLR:warmup_num_steps': expected name=value after the scheduler type, got 'warmup_num_steps'
// BADBC: error: zero-optimizer: bias-correction must be true or false, got 'maybe'
zero.train_step @train(%ids: tensor<2xi32>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-3, weight_decay = 0.1, schedule = #zero.lr_schedule<kind = warmup_lr>>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 2> {
  %wte = zero.get_param @wte : tensor<16x4xf32>
  %e = nn.embedding %wte[%ids] : tensor<16x4xf32>, tensor<2xi32> -> tensor<2x4xf32>
  %loss = nn.fill 0.0 : tensor<f32>
  %g = nn.fill 1.0 : tensor<84xf32>
  zero.all_reduce sum group @flat in grads [0, 84) phase boundary
  zero.return %loss : tensor<f32>
}
