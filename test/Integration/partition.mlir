// Stages 0-2: one @flat group in declaration order; stage 0 is not padded,
// stages 1-2 pad to a multiple of world-size * alignment (4 * 2 = 8).
// RUN: zero-model-gen mlp --sizes 784,256,256,10 --batch 64 | zero-opt --zero-autodiff --zero-partition="stage=0 world-size=4" | FileCheck %s --check-prefix=S0
// RUN: zero-model-gen mlp --sizes 784,256,256,10 --batch 64 | zero-opt --zero-autodiff --zero-partition="stage=2 world-size=4" | FileCheck %s --check-prefix=S2
// RUN: zero-model-gen mlp --sizes 784,256,256,10 --batch 64 | zero-opt --zero-autodiff --zero-partition="stage=1 world-size=4 alignment=16" | FileCheck %s --check-prefix=ALIGN
// RUN: zero-model-gen mlp --sizes 784,256,256,10 --batch 64 | zero-opt --zero-autodiff --zero-partition="stage=3 world-size=4" | FileCheck %s --check-prefix=MLP3
// RUN: zero-model-gen gpt2 --layers 5 --hidden 128 --heads 4 --vocab 256 --seq 64 --batch 8 | zero-opt --zero-autodiff --zero-partition="stage=3 world-size=4" | FileCheck %s --check-prefix=GPT3
// The layout does not depend on anything but the parameters and options.
// RUN: zero-model-gen mlp --sizes 784,256,256,10 --batch 64 | zero-opt --zero-partition="stage=2 world-size=4" | FileCheck %s --check-prefix=S2

// S0: zero.param @fc3.bias
// S0-NEXT: zero.partition @flat stage 0 world_size 4 alignment 2 numel 269322 padded 269322 params [@fc1.weight, @fc1.bias, @fc2.weight, @fc2.bias, @fc3.weight, @fc3.bias] offsets [0, 200704, 200960, 266496, 266752, 269312]
// S0-NOT: zero.partition
// Data parallelism: the batch of 64 becomes 16 per rank, and every value
// derived from it follows; parameters and their gradients keep their shapes.
// S0: zero.train_step @train(%{{.*}}: tensor<16x784xf32>, %{{.*}}: tensor<16xi64>)
// S0-SAME: schedule #zero.schedule<stage = 0, world_size = 4, global_batch = 64>
// S0: nn.matmul %{{.*}}, %{{.*}} : tensor<16x784xf32>, tensor<784x256xf32> -> tensor<16x256xf32>
// S0: nn.softmax_cross_entropy %{{.*}}, %{{.*}} : tensor<16x10xf32>, tensor<16xi64> -> tensor<f32>
// S0: nn.reduce_sum %{{.*}} : tensor<16x10xf32> -> tensor<10xf32>
// S0: nn.matmul %{{.*}}, %{{.*}} transpose_lhs : tensor<16x784xf32>, tensor<16x256xf32> -> tensor<784x256xf32>
// S0: zero.grad @fc1.weight, %{{.*}} : tensor<784x256xf32>

// S2: zero.partition @flat stage 2 world_size 4 alignment 2 numel 269322 padded 269328 params
// S2: zero.train_step @train(%{{.*}}: tensor<16x784xf32>, %{{.*}}: tensor<16xi64>)

// ALIGN: zero.partition @flat stage 1 world_size 4 alignment 16 numel 269322 padded 269376 params

// Stage 3: one group per layer key (`fc1.weight` -> `fc1`), padded each.
// MLP3: zero.param @fc3.bias
// MLP3-NEXT: zero.partition @fc1 stage 3 world_size 4 alignment 2 numel 200960 padded 200960 params [@fc1.weight, @fc1.bias] offsets [0, 200704]
// MLP3-NEXT: zero.partition @fc2 stage 3 world_size 4 alignment 2 numel 65792 padded 65792 params [@fc2.weight, @fc2.bias] offsets [0, 65536]
// MLP3-NEXT: zero.partition @fc3 stage 3 world_size 4 alignment 2 numel 2570 padded 2576 params [@fc3.weight, @fc3.bias] offsets [0, 2560]
// MLP3-NEXT: zero.train_step

// Layer keys of Hugging Face's names: `transformer.h.3.attn.c_attn.weight`
// -> `transformer.h.3`, `transformer.ln_f.weight` -> `transformer.ln_f`,
// `transformer.wte.weight` -> `transformer.wte`.
// GPT3: zero.partition @transformer.wte stage 3 world_size 4 alignment 2 numel 32768 padded 32768 params [@transformer.wte.weight] offsets [0]
// GPT3-NEXT: zero.partition @transformer.wpe stage 3 {{.*}} params [@transformer.wpe.weight] offsets [0]
// GPT3-NEXT: zero.partition @transformer.h.0 stage 3 world_size 4 alignment 2 numel 198272 padded 198272 params [@transformer.h.0.ln_1.weight, @transformer.h.0.ln_1.bias, @transformer.h.0.attn.c_attn.weight, @transformer.h.0.attn.c_attn.bias, @transformer.h.0.attn.c_proj.weight, @transformer.h.0.attn.c_proj.bias, @transformer.h.0.ln_2.weight, @transformer.h.0.ln_2.bias, @transformer.h.0.mlp.c_fc.weight, @transformer.h.0.mlp.c_fc.bias, @transformer.h.0.mlp.c_proj.weight, @transformer.h.0.mlp.c_proj.bias] offsets [0, 128, 256, 49408, 49792, 66176, 66304, 66432, 66560, 132096, 132608, 198144]
// GPT3-NEXT: zero.partition @transformer.h.1 stage 3
// GPT3-NEXT: zero.partition @transformer.h.2 stage 3
// GPT3-NEXT: zero.partition @transformer.h.3 stage 3
// GPT3-NEXT: zero.partition @transformer.h.4 stage 3
// GPT3-NEXT: zero.partition @transformer.ln_f stage 3 world_size 4 alignment 2 numel 256 padded 256 params [@transformer.ln_f.weight, @transformer.ln_f.bias] offsets [0, 128]
// GPT3-NEXT: zero.train_step @train(%{{.*}}: tensor<2x64xi32>, %{{.*}}: tensor<2x64xi32>)
// Reshapes that flatten the batch into rows divide their leading dimension.
// GPT3: nn.reshape %{{.*}} : tensor<2x64x128xf32> -> tensor<2x64x4x32xf32>
// GPT3: nn.reshape %{{.*}} : tensor<2x64x256xf32> -> tensor<128x256xf32>
// GPT3: nn.embedding_grad %{{.*}}[%{{.*}}] : tensor<2x64x128xf32>, tensor<2x64xi32> -> tensor<256x128xf32>
