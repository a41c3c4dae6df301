// RUN: zero-opt %s -split-input-file --zero-partition="stage=0 world-size=4" | FileCheck %s --check-prefixes=CHECK,S0
// RUN: zero-opt %s -split-input-file --zero-partition="stage=1 world-size=2" | FileCheck %s --check-prefixes=CHECK,S1
// RUN: zero-opt %s -split-input-file --zero-partition="stage=2 world-size=4" | FileCheck %s --check-prefixes=CHECK,S2
// RUN: zero-opt %s -split-input-file --zero-partition="stage=1 world-size=2 alignment=16" | FileCheck %s --check-prefixes=CHECK,ALIGN
// RUN: zero-opt %s -split-input-file --zero-partition="stage=3 world-size=2" | FileCheck %s --check-prefixes=CHECK,S3

// The layout of a two-layer MLP after autodiff: fc1.weight [0, 24), fc1.bias
// [24, 30), fc2.weight [30, 48), fc2.bias [48, 51). Stage 0 is not padded;
// stages 1-2 pad the one @flat group to a multiple of world-size x alignment
// (2 x 2 = 4: 52; 4 x 2 = 8: 56; 2 x 16 = 32: 64); stage 3 has one group per
// layer (fc1: 30 -> 32, fc2: 21 -> 24 at 2 x 2). The batch of 8 becomes 8 /
// world-size per rank in every value that carries it; parameters, gradients
// and the loss keep their shapes.
zero.param @fc1.weight : tensor<4x6xf32> init normal std 0.5
zero.param @fc1.bias : tensor<6xf32> init zeros
zero.param @fc2.weight : tensor<6x3xf32> init normal std 0.4
zero.param @fc2.bias : tensor<3xf32> init zeros
// CHECK: zero.param @fc2.bias
// S0-NEXT: zero.partition @flat stage 0 world_size 4 alignment 2 numel 51 padded 51 params [@fc1.weight, @fc1.bias, @fc2.weight, @fc2.bias] offsets [0, 24, 30, 48]
// S1-NEXT: zero.partition @flat stage 1 world_size 2 alignment 2 numel 51 padded 52 params [@fc1.weight, @fc1.bias, @fc2.weight, @fc2.bias] offsets [0, 24, 30, 48]
// S2-NEXT: zero.partition @flat stage 2 world_size 4 alignment 2 numel 51 padded 56 params
// ALIGN-NEXT: zero.partition @flat stage 1 world_size 2 alignment 16 numel 51 padded 64 params
// S3-NEXT: zero.partition @fc1 stage 3 world_size 2 alignment 2 numel 30 padded 32 params [@fc1.weight, @fc1.bias] offsets [0, 24]
// S3-NEXT: zero.partition @fc2 stage 3 world_size 2 alignment 2 numel 21 padded 24 params [@fc2.weight, @fc2.bias] offsets [0, 18]
// CHECK-NOT: zero.partition
// CHECK-LABEL: zero.train_step @train
// S0-SAME: (%{{.*}}: tensor<2x4xf32>, %{{.*}}: tensor<2xi64>)
// S0-SAME: schedule #zero.schedule<stage = 0, world_size = 4, global_batch = 8>
// S1-SAME: (%{{.*}}: tensor<4x4xf32>, %{{.*}}: tensor<4xi64>)
// S1-SAME: schedule #zero.schedule<stage = 1, world_size = 2, global_batch = 8>
// S2-SAME: schedule #zero.schedule<stage = 2, world_size = 4, global_batch = 8>
// ALIGN-SAME: schedule #zero.schedule<stage = 1, world_size = 2, global_batch = 8>
// S3-SAME: schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 8>
// S0: nn.matmul %{{.*}}, %{{.*}} : tensor<2x4xf32>, tensor<4x6xf32> -> tensor<2x6xf32>
// S0: nn.softmax_cross_entropy %{{.*}}, %{{.*}} : tensor<2x3xf32>, tensor<2xi64> -> tensor<f32>
// S0: nn.reduce_sum %{{.*}} : tensor<2x3xf32> -> tensor<3xf32>
// S0: nn.matmul %{{.*}}, %{{.*}} transpose_lhs : tensor<2x6xf32>, tensor<2x3xf32> -> tensor<6x3xf32>
// S0: zero.grad @fc1.weight, %{{.*}} : tensor<4x6xf32>
// S3: nn.matmul %{{.*}}, %{{.*}} : tensor<4x4xf32>, tensor<4x6xf32> -> tensor<4x6xf32>
zero.train_step @train(%x: tensor<8x4xf32>, %y: tensor<8xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %0 = zero.get_param @fc1.weight : tensor<4x6xf32>
  %1 = nn.matmul %x, %0 : tensor<8x4xf32>, tensor<4x6xf32> -> tensor<8x6xf32>
  %2 = zero.get_param @fc1.bias : tensor<6xf32>
  %3 = nn.add %1, %2 : tensor<8x6xf32>, tensor<6xf32>
  %4 = nn.relu %3 : tensor<8x6xf32>
  %5 = zero.get_param @fc2.weight : tensor<6x3xf32>
  %6 = nn.matmul %4, %5 : tensor<8x6xf32>, tensor<6x3xf32> -> tensor<8x3xf32>
  %7 = zero.get_param @fc2.bias : tensor<3xf32>
  %8 = nn.add %6, %7 : tensor<8x3xf32>, tensor<3xf32>
  %9 = nn.softmax_cross_entropy %8, %y : tensor<8x3xf32>, tensor<8xi64> -> tensor<f32>
  %10 = nn.fill 1.0 {zero.loss_seed} : tensor<f32>
  %11 = nn.softmax_cross_entropy_grad %8, %y, %10 : tensor<8x3xf32>, tensor<8xi64>, tensor<f32>
  %12 = nn.reduce_sum %11 : tensor<8x3xf32> -> tensor<3xf32>
  zero.grad @fc2.bias, %12 : tensor<3xf32>
  %13 = nn.matmul %11, %5 transpose_rhs : tensor<8x3xf32>, tensor<6x3xf32> -> tensor<8x6xf32>
  %14 = nn.matmul %4, %11 transpose_lhs : tensor<8x6xf32>, tensor<8x3xf32> -> tensor<6x3xf32>
  zero.grad @fc2.weight, %14 : tensor<6x3xf32>
  %15 = nn.relu_grad %4, %13 : tensor<8x6xf32>
  %16 = nn.reduce_sum %15 : tensor<8x6xf32> -> tensor<6xf32>
  zero.grad @fc1.bias, %16 : tensor<6xf32>
  %17 = nn.matmul %x, %15 transpose_lhs : tensor<8x4xf32>, tensor<8x6xf32> -> tensor<4x6xf32>
  zero.grad @fc1.weight, %17 : tensor<4x6xf32>
  zero.return %9 : tensor<f32>
}

// -----

// Stage-3 layer keys: up to the first all-digit component (`h.0.w` -> h.0),
// else the name without its last component (`ln_f.weight` -> ln_f), else the
// whole name (`wte`, renamed @wte_1 because @wte is the parameter); a key
// that comes back after another (h.0.g) gets a fresh group @h.0_1. Stages
// 0-2 keep one @flat group of all 75 elements (padded to 76, 80 and 96 as above). Reshapes that flatten the
// batch into rows divide their leading dimension (8 x 3 -> 24 rows, 12 at
// world size 2).
zero.param @wte : tensor<8x4xf32> init zeros
zero.param @h.0.w : tensor<4x4xf32> init zeros
zero.param @h.0.b : tensor<4xf32> init zeros
zero.param @h.1.w : tensor<4x4xf32> init zeros
zero.param @ln_f.weight : tensor<3xf32> init ones
zero.param @h.0.g : tensor<4xf32> init ones
// CHECK: zero.param @h.0.g
// S0-NEXT: zero.partition @flat stage 0 world_size 4 alignment 2 numel 75 padded 75 params [@wte, @h.0.w, @h.0.b, @h.1.w, @ln_f.weight, @h.0.g] offsets [0, 32, 48, 52, 68, 71]
// S1-NEXT: zero.partition @flat stage 1 world_size 2 alignment 2 numel 75 padded 76
// S2-NEXT: zero.partition @flat stage 2 world_size 4 alignment 2 numel 75 padded 80
// ALIGN-NEXT: zero.partition @flat stage 1 world_size 2 alignment 16 numel 75 padded 96
// S3-NEXT: zero.partition @wte_1 stage 3 world_size 2 alignment 2 numel 32 padded 32 params [@wte] offsets [0]
// S3-NEXT: zero.partition @h.0 stage 3 world_size 2 alignment 2 numel 20 padded 20 params [@h.0.w, @h.0.b] offsets [0, 16]
// S3-NEXT: zero.partition @h.1 stage 3 world_size 2 alignment 2 numel 16 padded 16 params [@h.1.w] offsets [0]
// S3-NEXT: zero.partition @ln_f stage 3 world_size 2 alignment 2 numel 3 padded 4 params [@ln_f.weight] offsets [0]
// S3-NEXT: zero.partition @h.0_1 stage 3 world_size 2 alignment 2 numel 4 padded 4 params [@h.0.g] offsets [0]
// CHECK-NOT: zero.partition
// CHECK-LABEL: zero.train_step @lm
// S3-SAME: (%{{.*}}: tensor<4x3xi32>)
// S3: nn.embedding %{{.*}}[%{{.*}}] : tensor<8x4xf32>, tensor<4x3xi32> -> tensor<4x3x4xf32>
// S3-NEXT: nn.reshape %{{.*}} : tensor<4x3x4xf32> -> tensor<12x4xf32>
// S3: nn.matmul %{{.*}}, %{{.*}} : tensor<12x4xf32>, tensor<4x4xf32> -> tensor<12x4xf32>
// S0: nn.reshape %{{.*}} : tensor<2x3x4xf32> -> tensor<6x4xf32>
zero.train_step @lm(%x: tensor<8x3xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %e = zero.get_param @wte : tensor<8x4xf32>
  %h = nn.embedding %e[%x] : tensor<8x4xf32>, tensor<8x3xi32> -> tensor<8x3x4xf32>
  %r = nn.reshape %h : tensor<8x3x4xf32> -> tensor<24x4xf32>
  %w = zero.get_param @h.0.w : tensor<4x4xf32>
  %m = nn.matmul %r, %w : tensor<24x4xf32>, tensor<4x4xf32> -> tensor<24x4xf32>
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// A group's buffers hold one compute type: where the compute type changes
// (a module kept in fp32 beside bf16 ones, as Hugging Face's
// `_keep_in_fp32_modules`), a new group starts, at stages 0-2 (@flat_1,
// @flat_2) as at stage 3 (the layer @h.0 splits at @h.0.b).
zero.param @wte : tensor<8x4xf32> init zeros compute bf16
zero.param @h.0.w : tensor<4x4xf32> init zeros compute bf16
zero.param @h.0.b : tensor<4xf32> init zeros
zero.param @ln_f.weight : tensor<4xf32> init ones compute bf16
// CHECK: zero.param @ln_f.weight
// S0-NEXT: zero.partition @flat stage 0 world_size 4 alignment 2 numel 48 padded 48 params [@wte, @h.0.w] offsets [0, 32]
// S0-NEXT: zero.partition @flat_1 stage 0 world_size 4 alignment 2 numel 4 padded 4 params [@h.0.b] offsets [0]
// S0-NEXT: zero.partition @flat_2 stage 0 world_size 4 alignment 2 numel 4 padded 4 params [@ln_f.weight] offsets [0]
// S1-NEXT: zero.partition @flat stage 1 world_size 2 alignment 2 numel 48 padded 48
// S1-NEXT: zero.partition @flat_1 stage 1 world_size 2 alignment 2 numel 4 padded 4
// S1-NEXT: zero.partition @flat_2 stage 1 world_size 2 alignment 2 numel 4 padded 4
// S2-NEXT: zero.partition @flat stage 2 world_size 4 alignment 2 numel 48 padded 48
// S2-NEXT: zero.partition @flat_1 stage 2 world_size 4 alignment 2 numel 4 padded 8
// S2-NEXT: zero.partition @flat_2 stage 2 world_size 4 alignment 2 numel 4 padded 8
// ALIGN-NEXT: zero.partition @flat stage 1 world_size 2 alignment 16 numel 48 padded 64
// ALIGN-NEXT: zero.partition @flat_1 stage 1 world_size 2 alignment 16 numel 4 padded 32
// ALIGN-NEXT: zero.partition @flat_2 stage 1 world_size 2 alignment 16 numel 4 padded 32
// S3-NEXT: zero.partition @wte_1 stage 3 world_size 2 alignment 2 numel 32 padded 32 params [@wte] offsets [0]
// S3-NEXT: zero.partition @h.0 stage 3 world_size 2 alignment 2 numel 16 padded 16 params [@h.0.w] offsets [0]
// S3-NEXT: zero.partition @h.0_1 stage 3 world_size 2 alignment 2 numel 4 padded 4 params [@h.0.b] offsets [0]
// S3-NEXT: zero.partition @ln_f stage 3 world_size 2 alignment 2 numel 4 padded 4 params [@ln_f.weight] offsets [0]
// CHECK-NOT: zero.partition
// CHECK-LABEL: zero.train_step @mixed
zero.train_step @mixed(%x: tensor<8x3xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Frozen runs in declaration order are groups of their own: `frozen` at
// stages 0-2 beside `flat`, `<layer>.frozen` beside the layer's trainable
// group at stage 3 (the symbol names are made unique as usual).
zero.param @emb.weight : tensor<4x6xf32> init normal std 0.5 frozen
zero.param @fc1.weight : tensor<6x6xf32> init normal std 0.5
zero.param @fc1.norm : tensor<6xf32> init ones frozen
zero.param @fc2.weight : tensor<6x3xf32> init normal std 0.4
zero.param @fc2.bias : tensor<3xf32> init zeros
// CHECK: zero.param @fc2.bias
// S0-NEXT: zero.partition @frozen stage 0 world_size 4 alignment 2 numel 24 padded 24 params [@emb.weight] offsets [0] frozen
// S0-NEXT: zero.partition @flat stage 0 world_size 4 alignment 2 numel 36 padded 36 params [@fc1.weight] offsets [0]{{$}}
// S0-NEXT: zero.partition @frozen_1 stage 0 world_size 4 alignment 2 numel 6 padded 6 params [@fc1.norm] offsets [0] frozen
// S0-NEXT: zero.partition @flat_1 stage 0 world_size 4 alignment 2 numel 21 padded 21 params [@fc2.weight, @fc2.bias] offsets [0, 18]{{$}}
// S1-NEXT: zero.partition @frozen stage 1 world_size 2 alignment 2 numel 24 padded 24 params [@emb.weight] offsets [0] frozen
// S1-NEXT: zero.partition @flat stage 1 world_size 2 alignment 2 numel 36 padded 36 params [@fc1.weight] offsets [0]{{$}}
// S1-NEXT: zero.partition @frozen_1 stage 1 world_size 2 alignment 2 numel 6 padded 8 params [@fc1.norm] offsets [0] frozen
// S1-NEXT: zero.partition @flat_1 stage 1 world_size 2 alignment 2 numel 21 padded 24 params [@fc2.weight, @fc2.bias] offsets [0, 18]{{$}}
// S2-NEXT: zero.partition @frozen stage 2
// S2-NEXT: zero.partition @flat stage 2
// S2-NEXT: zero.partition @frozen_1 stage 2
// S2-NEXT: zero.partition @flat_1 stage 2
// ALIGN-NEXT: zero.partition @frozen stage 1
// ALIGN-NEXT: zero.partition @flat stage 1
// ALIGN-NEXT: zero.partition @frozen_1 stage 1
// ALIGN-NEXT: zero.partition @flat_1 stage 1
// S3-NEXT: zero.partition @emb.frozen stage 3 world_size 2 alignment 2 numel 24 padded 24 params [@emb.weight] offsets [0] frozen
// S3-NEXT: zero.partition @fc1 stage 3 world_size 2 alignment 2 numel 36 padded 36 params [@fc1.weight] offsets [0]{{$}}
// S3-NEXT: zero.partition @fc1.frozen stage 3 world_size 2 alignment 2 numel 6 padded 8 params [@fc1.norm] offsets [0] frozen
// S3-NEXT: zero.partition @fc2 stage 3 world_size 2 alignment 2 numel 21 padded 24 params [@fc2.weight, @fc2.bias] offsets [0, 18]{{$}}
// CHECK-NOT: zero.partition
// CHECK-LABEL: zero.train_step @frozen_runs
zero.train_step @frozen_runs(%x: tensor<8x4xi32>, %y: tensor<8x4xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}
