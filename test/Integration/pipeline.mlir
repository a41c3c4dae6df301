// zero-pipeline on the MLP (784,256,256,10, batch 64) and a 5-layer GPT-2
// at world size 4: where each kind of op sits relative to the forward
// compute, the zero.grad ops and zero.optimizer_step.

// RUN: zero-model-gen mlp --sizes 784,256,256,10 --batch 64 | zero-opt --zero-pipeline="stage=0 world-size=4 reduce-bucket-size=68362" | FileCheck %s --check-prefix=S0
// RUN: zero-model-gen gpt2 --layers 5 --hidden 128 --heads 4 --vocab 256 --seq 64 --batch 8 | zero-opt --zero-pipeline="stage=1 world-size=4 dtype=bf16 reduce-bucket-size=400000 allgather-bucket-size=600000" | FileCheck %s --check-prefix=S1
// RUN: zero-model-gen mlp --sizes 784,256,256,10 --batch 64 | zero-opt --zero-pipeline="stage=2 world-size=4 dtype=bf16 reduce-bucket-size=68362" | FileCheck %s --check-prefix=S2
// RUN: zero-model-gen gpt2 --layers 5 --hidden 128 --heads 4 --vocab 256 --seq 64 --batch 8 | zero-opt --zero-pipeline="stage=3 world-size=4 dtype=bf16 max-reuse-distance=500000 prefetch-bucket-size=400000 max-live-parameters=700000" | FileCheck %s --check-prefix=S3
// A DeepSpeed config drives the pipeline; explicit options win over it.
// RUN: zero-model-gen mlp --sizes 784,256,256,10 --batch 64 | zero-opt --zero-pipeline="config=%S/Inputs/ds_config.json world-size=4" 2>&1 | FileCheck %s --check-prefix=CFG
// RUN: zero-model-gen mlp --sizes 784,256,256,10 --batch 64 | zero-opt --zero-pipeline="config=%S/Inputs/ds_config.json world-size=4 stage=1 gradient-clipping=0.0" 2>/dev/null | FileCheck %s --check-prefix=OVERRIDE

// Stage 0: gradients are all-reduced in place as buckets fill; nothing is
// reduce-scattered or gathered.
// S0-NOT: zero.reduce_scatter
// S0-NOT: zero.all_gather
// S0: zero.train_step @train(%{{.*}}: tensor<16x784xf32>
// S0: nn.softmax_cross_entropy
// S0: zero.grad @fc2.weight
// S0-NEXT: zero.all_reduce sum group @flat in grads [200960, 269322)
// S0-NEXT: nn.relu_grad
// S0: zero.grad @fc1.weight
// S0-NEXT: zero.all_reduce sum group @flat in grads [132598, 200960)
// S0: zero.check_overflow
// S0: zero.optimizer_step group @flat
// S0-NOT: zero.reduce_scatter
// S0-NOT: zero.all_gather

// Stage 1: every reduce-scatter after the last zero.grad, the gathers after
// zero.optimizer_step.
// S1-NOT: zero.reduce_scatter
// S1: zero.grad @transformer.h.4.ln_1.bias
// S1-NOT: zero.reduce_scatter
// S1: zero.grad @transformer.wte.weight
// S1-NOT: zero.grad
// S1: zero.reduce_scatter group @flat in grads [0, 400000)
// S1-NEXT: zero.reduce_scatter group @flat in grads [400000, 800000)
// S1-NEXT: zero.reduce_scatter group @flat in grads [800000, 1032576)
// S1-NOT: zero.all_gather
// S1: zero.optimizer_step group @flat
// S1-NEXT: zero.all_gather group @flat in params [0, 600000)
// S1-NEXT: zero.all_gather group @flat in params [600000, 1032576)
// S1-NEXT: zero.return

// Stage 2 with a small bucket: reductions and frees interleave with the
// backward compute.
// S2: nn.fill 1.000000e+00 {zero.loss_seed}
// S2-NOT: zero.reduce_scatter
// S2: zero.grad @fc2.weight
// S2-NEXT: zero.reduce_scatter group @flat [200960, 269322)
// S2-NEXT: zero.free
// S2-NEXT: zero.free
// S2-NEXT: zero.free
// S2-NEXT: zero.free
// S2-NEXT: nn.relu_grad
// S2-NEXT: nn.reduce_sum
// S2-NEXT: zero.grad @fc1.bias
// S2-NEXT: nn.matmul
// S2-NEXT: zero.grad @fc1.weight
// S2-NEXT: zero.reduce_scatter
// S2-NEXT: zero.free %{{.*}}[132598, 68106]
// S2: zero.optimizer_step group @flat
// S2-NEXT: zero.all_gather group @flat in params [0, 269322)
// S2-NEXT: zero.return

// Stage 3: prefetches (waited right before the first use) ahead of the
// forward uses, frees after the last uses, the first layers gathered again
// in the backward (the last ones are reused within max-reuse-distance), and
// nothing gathered after the step.
// S3: %[[H0:.*]], %[[T0:.*]] = zero.prefetch group @transformer.h.0
// S3: zero.wait %[[T0]]
// S3-NEXT: zero.get_param @transformer.h.0.ln_1.weight from %[[H0]]
// S3: zero.get_param @transformer.h.0.mlp.c_proj.bias from %[[H0]]
// S3-NEXT: nn.add
// S3-NEXT: zero.free %[[H0]]
// S3: %[[H4:.*]], %{{.*}} = zero.prefetch group @transformer.h.4
// S3-NOT: zero.free %[[H4]]
// S3: nn.fill 1.000000e+00 {zero.loss_seed}
// S3-NOT: zero.free %[[H4]]
// S3: zero.grad @transformer.h.4.mlp.c_proj.bias
// S3: zero.free %[[H4]]
// S3: %[[H1B:.*]], %[[T1B:.*]] = zero.prefetch group @transformer.h.1
// S3: zero.grad @transformer.h.1.mlp.c_proj.bias
// S3-NEXT: zero.wait %[[T1B]]
// S3: zero.free %[[H1B]]
// S3: zero.grad @transformer.h.1.ln_1.bias
// S3: %[[H0B:.*]] = zero.get_param @transformer.h.0.mlp.c_proj.weight from
// S3: zero.free
// S3: zero.grad @transformer.h.0.ln_1.bias
// S3-NOT: zero.prefetch
// S3-NOT: zero.all_gather
// S3: zero.optimizer_step group @transformer.h.0
// S3-NOT: zero.prefetch
// S3-NOT: zero.all_gather
// S3: zero.return

// The config sets stage 2, buckets, reduce (not reduce-scatter), overlap,
// accumulation 2 (global 64 = 8 x 2 x 4), fp16 with its scaler settings,
// AdamW and clipping; wall_clock_breakdown is read quietly, the keys not
// offload_optimizer with device none is read quietly.
// CFG-NOT: warning
// CFG: zero.partition @flat stage 2
// CFG: zero.train_step @train(%{{.*}}: tensor<8x784xf32>, %{{.*}}: tensor<8xi64>) optimizer #zero.optimizer<kind = adamw, lr = 3.000000e-04, beta2 = 0.9{{.*}}, weight_decay = 1.000000e-01> precision #zero.precision<kind = fp16, initial_scale_power = 12, loss_scale_window = 500, hysteresis = 3> gradient_clipping 1.000000e+00
// CFG-SAME: schedule #zero.schedule<stage = 2, world_size = 4, global_batch = 64, accumulation_steps = 2>
// CFG: nn.matmul {{.*}} : tensor<8x784xf16>, tensor<784x256xf16>
// CFG: zero.reduce group @flat [169322, 269322) from {{.*}} -> !zero.token
// CFG: zero.wait
// CFG: zero.optimizer_step group @flat {{.*}} divisor 8.000000e+00
// CFG-NEXT: zero.all_gather group @flat in params [0, 200000)
// CFG-NEXT: zero.all_gather group @flat in params [200000, 269322)

// OVERRIDE: zero.partition @flat stage 1
// OVERRIDE-NOT: gradient_clipping 1.0
// OVERRIDE: zero.reduce group @flat in grads [0, 100000)
