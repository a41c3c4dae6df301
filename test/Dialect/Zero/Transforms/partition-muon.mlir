// RUN: zero-opt %s -split-input-file --zero-partition="stage=1 world-size=2" | FileCheck %s --check-prefixes=CHECK,S1
// RUN: zero-opt %s -split-input-file --zero-partition="stage=3 world-size=2" | FileCheck %s --check-prefixes=CHECK,S3
// RUN: zero-opt %s -split-input-file --zero-partition="stage=0 world-size=2" | FileCheck %s --check-prefixes=CHECK,S0
// RUN: zero-opt %s -split-input-file --zero-partition="stage=3 world-size=2 muon-group-layers=1" | FileCheck %s --check-prefixes=CHECK,L1

// Muon's owner-computes: the hidden matrices w1-w4 (projections) are
// Muon's, each owned by one rank and whole in its shard; the bias and the
// head (the projection into the loss's logits) are AdamW's. Newton-Schulz
// FLOPs (5 steps): w1 [4, 8] and w2 [8, 4] 3200 each, w3 and w4 [4, 4] 1920
// each, so {w1, w3} and {w2, w4} split them evenly, 48 elements a rank.
// Stage 1: one group of 112 elements, shards of 56. Rank 0's matrices from
// 0, then the head (12) crosses the boundary at 56 so that rank 1's start
// at 60 and end at 108 <= 112; the bias follows. Same numel and padding as
// in declaration order: the reduce-scatter moves the same bytes.
// S1: zero.partition @flat stage 1 world_size 2 alignment 2 numel 112 padded 112 params [@h.0.w1, @h.0.w3, @head, @h.0.w2, @h.0.w4, @h.0.b] offsets [0, 32, 48, 60, 92, 108] owners [0, 0, -1, 1, 1, -1]
// Stage 3: the layer's group of 100 elements, shards of 50; the bias (4)
// between the owners' matrices puts rank 1's at [52, 100). The head's group
// holds no Muon matrix and keeps no owners.
// S3: zero.partition @h.0 stage 3 world_size 2 alignment 2 numel 100 padded 100 params [@h.0.w1, @h.0.w3, @h.0.b, @h.0.w2, @h.0.w4] offsets [0, 32, 48, 52, 84] owners [0, 0, -1, 1, 1]
// S3-NEXT: zero.partition @head_1 stage 3 world_size 2 alignment 2 numel 12 padded 12 params [@head] offsets [0]{{$}}
// Stage 0 is not sharded: declaration order, no owners (every rank runs
// every matrix after the all-reduce).
// S0: zero.partition @flat stage 0 world_size 2 alignment 2 numel 112 padded 112 params [@h.0.w1, @h.0.w2, @h.0.w3, @h.0.w4, @h.0.b, @head] offsets [0, 32, 64, 80, 96, 100]{{$}}
// CHECK-LABEL: zero.train_step @train
zero.param @h.0.w1 : tensor<4x8xf32> init normal std 0.5
zero.param @h.0.w2 : tensor<8x4xf32> init normal std 0.5
zero.param @h.0.w3 : tensor<4x4xf32> init normal std 0.5
zero.param @h.0.w4 : tensor<4x4xf32> init normal std 0.5
zero.param @h.0.b : tensor<4xf32> init zeros
zero.param @head : tensor<4x3xf32> init normal std 0.5
zero.train_step @train(%x: tensor<8x4xf32>, %y: tensor<8xi64>)
    optimizer #zero.optimizer<kind = muon, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %w1 = zero.get_param @h.0.w1 : tensor<4x8xf32>
  %0 = nn.matmul %x, %w1 : tensor<8x4xf32>, tensor<4x8xf32> -> tensor<8x8xf32>
  %1 = nn.relu %0 : tensor<8x8xf32>
  %w2 = zero.get_param @h.0.w2 : tensor<8x4xf32>
  %2 = nn.matmul %1, %w2 : tensor<8x8xf32>, tensor<8x4xf32> -> tensor<8x4xf32>
  %w3 = zero.get_param @h.0.w3 : tensor<4x4xf32>
  %3 = nn.matmul %2, %w3 : tensor<8x4xf32>, tensor<4x4xf32> -> tensor<8x4xf32>
  %w4 = zero.get_param @h.0.w4 : tensor<4x4xf32>
  %4 = nn.matmul %3, %w4 : tensor<8x4xf32>, tensor<4x4xf32> -> tensor<8x4xf32>
  %b = zero.get_param @h.0.b : tensor<4xf32>
  %5 = nn.add %4, %b : tensor<8x4xf32>, tensor<4xf32>
  %head = zero.get_param @head : tensor<4x3xf32>
  %6 = nn.matmul %5, %head : tensor<8x4xf32>, tensor<4x3xf32> -> tensor<8x3xf32>
  %7 = nn.softmax_cross_entropy %6, %y : tensor<8x3xf32>, tensor<8xi64> -> tensor<f32>
  zero.return %7 : tensor<f32>
}

// -----

// No gap-free layout at stage 3: the layer's 84 elements give shards of 42,
// and no split of w1 (32), w2 (32) and w3 (16) keeps every rank's matrices
// within 42. Owner-computes with gaps: w1 to rank 0, w2 to rank 1, w3 (a
// tie of FLOPs) to rank 0, whose 48 elements set the slots; the bias
// follows rank 1's matrices, and padded 96 exceeds numel 84 by more than
// world-size * alignment (the enlarged slots). At stage 1 the head fills
// the shards instead: {w1, w3} fill rank 0's 48 exactly, without gaps.
// S1: zero.partition @flat stage 1 world_size 2 alignment 2 numel 96 padded 96 params [@h.0.w1, @h.0.w3, @h.0.w2, @h.0.b, @head] offsets [0, 32, 48, 80, 84] owners [0, 0, 1, -1, -1]
// S3: zero.partition @h.0 stage 3 world_size 2 alignment 2 numel 84 padded 96 params [@h.0.w1, @h.0.w3, @h.0.w2, @h.0.b] offsets [0, 32, 48, 80] owners [0, 0, 1, -1]{{$}}
// S0: zero.partition @flat stage 0 world_size 2 alignment 2 numel 96 padded 96 params [@h.0.w1, @h.0.w2, @h.0.w3, @h.0.b, @head] offsets [0, 32, 64, 80, 84]{{$}}
// CHECK-LABEL: zero.train_step @gaps
zero.param @h.0.w1 : tensor<4x8xf32> init normal std 0.5
zero.param @h.0.w2 : tensor<8x4xf32> init normal std 0.5
zero.param @h.0.w3 : tensor<4x4xf32> init normal std 0.5
zero.param @h.0.b : tensor<4xf32> init zeros
zero.param @head : tensor<4x3xf32> init normal std 0.5
zero.train_step @gaps(%x: tensor<8x4xf32>, %y: tensor<8xi64>)
    optimizer #zero.optimizer<kind = muon, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %w1 = zero.get_param @h.0.w1 : tensor<4x8xf32>
  %0 = nn.matmul %x, %w1 : tensor<8x4xf32>, tensor<4x8xf32> -> tensor<8x8xf32>
  %w2 = zero.get_param @h.0.w2 : tensor<8x4xf32>
  %1 = nn.matmul %0, %w2 : tensor<8x8xf32>, tensor<8x4xf32> -> tensor<8x4xf32>
  %w3 = zero.get_param @h.0.w3 : tensor<4x4xf32>
  %2 = nn.matmul %1, %w3 : tensor<8x4xf32>, tensor<4x4xf32> -> tensor<8x4xf32>
  %b = zero.get_param @h.0.b : tensor<4xf32>
  %3 = nn.add %2, %b : tensor<8x4xf32>, tensor<4xf32>
  %head = zero.get_param @head : tensor<4x3xf32>
  %4 = nn.matmul %3, %head : tensor<8x4xf32>, tensor<4x3xf32> -> tensor<8x3xf32>
  %5 = nn.softmax_cross_entropy %4, %y : tensor<8x3xf32>, tensor<8xi64> -> tensor<f32>
  zero.return %5 : tensor<f32>
}

// -----

// A gap inside the layout. Newton-Schulz FLOPs (5 steps): a [8, 8] 15360,
// f [8, 4] 3200, b [4, 16] and c [16, 4] 5760 each, 64 elements each but
// f's 32. Largest first to the rank with the fewest FLOPs: a to rank 0,
// then b, c and f to rank 1 (14720 < 15360), whose 160 elements set the
// slots (AdamW's would be 114 at stage 3, 120 at stage 1). Rank 0's slot
// holds a, then the AdamW parameters that fit (the bias, and at stage 1
// the head), then a gap up to 160, where rank 1's f, b, c start.
// S1: zero.partition @flat stage 1 world_size 2 alignment 2 numel 320 padded 320 params [@h.0.a, @h.0.bias, @head, @h.0.f, @h.0.b, @h.0.c] offsets [0, 64, 68, 160, 192, 256] owners [0, -1, -1, 1, 1, 1]
// S3: zero.partition @h.0 stage 3 world_size 2 alignment 2 numel 320 padded 320 params [@h.0.a, @h.0.bias, @h.0.f, @h.0.b, @h.0.c] offsets [0, 64, 160, 192, 256] owners [0, -1, 1, 1, 1]
// S3-NEXT: zero.partition @head_1 stage 3 world_size 2 alignment 2 numel 12 padded 12 params [@head] offsets [0]{{$}}
// S0: zero.partition @flat stage 0 world_size 2 alignment 2 numel 240 padded 240 params [@h.0.a, @h.0.f, @h.0.b, @h.0.c, @h.0.bias, @head] offsets [0, 64, 96, 160, 224, 228]{{$}}
// CHECK-LABEL: zero.train_step @inner_gap
zero.param @h.0.a : tensor<8x8xf32> init normal std 0.5
zero.param @h.0.f : tensor<8x4xf32> init normal std 0.5
zero.param @h.0.b : tensor<4x16xf32> init normal std 0.5
zero.param @h.0.c : tensor<16x4xf32> init normal std 0.5
zero.param @h.0.bias : tensor<4xf32> init zeros
zero.param @head : tensor<4x3xf32> init normal std 0.5
zero.train_step @inner_gap(%x: tensor<8x8xf32>, %y: tensor<8xi64>)
    optimizer #zero.optimizer<kind = muon, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %a = zero.get_param @h.0.a : tensor<8x8xf32>
  %0 = nn.matmul %x, %a : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
  %f = zero.get_param @h.0.f : tensor<8x4xf32>
  %1 = nn.matmul %0, %f : tensor<8x8xf32>, tensor<8x4xf32> -> tensor<8x4xf32>
  %b = zero.get_param @h.0.b : tensor<4x16xf32>
  %2 = nn.matmul %1, %b : tensor<8x4xf32>, tensor<4x16xf32> -> tensor<8x16xf32>
  %c = zero.get_param @h.0.c : tensor<16x4xf32>
  %3 = nn.matmul %2, %c : tensor<8x16xf32>, tensor<16x4xf32> -> tensor<8x4xf32>
  %bias = zero.get_param @h.0.bias : tensor<4xf32>
  %4 = nn.add %3, %bias : tensor<8x4xf32>, tensor<4xf32>
  %head = zero.get_param @head : tensor<4x3xf32>
  %5 = nn.matmul %4, %head : tensor<8x4xf32>, tensor<4x3xf32> -> tensor<8x3xf32>
  %6 = nn.softmax_cross_entropy %5, %y : tensor<8x3xf32>, tensor<8xi64> -> tensor<f32>
  zero.return %6 : tensor<f32>
}

// -----

// AdamW on the same model: no owners, declaration order at every stage.
// S1: zero.partition @flat stage 1 world_size 2 alignment 2 numel 112 padded 112 params [@h.0.w1, @h.0.w2, @h.0.w3, @h.0.w4, @h.0.b, @head] offsets [0, 32, 64, 80, 96, 100]{{$}}
// S3: zero.partition @h.0 stage 3 world_size 2 alignment 2 numel 100 padded 100 params [@h.0.w1, @h.0.w2, @h.0.w3, @h.0.w4, @h.0.b] offsets [0, 32, 64, 80, 96]{{$}}
// S0: zero.partition @flat stage 0 world_size 2 alignment 2 numel 112 padded 112 params [@h.0.w1, @h.0.w2, @h.0.w3, @h.0.w4, @h.0.b, @head] offsets [0, 32, 64, 80, 96, 100]{{$}}
// CHECK-LABEL: zero.train_step @adamw
zero.param @h.0.w1 : tensor<4x8xf32> init normal std 0.5
zero.param @h.0.w2 : tensor<8x4xf32> init normal std 0.5
zero.param @h.0.w3 : tensor<4x4xf32> init normal std 0.5
zero.param @h.0.w4 : tensor<4x4xf32> init normal std 0.5
zero.param @h.0.b : tensor<4xf32> init zeros
zero.param @head : tensor<4x3xf32> init normal std 0.5
zero.train_step @adamw(%x: tensor<8x4xf32>, %y: tensor<8xi64>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %w1 = zero.get_param @h.0.w1 : tensor<4x8xf32>
  %0 = nn.matmul %x, %w1 : tensor<8x4xf32>, tensor<4x8xf32> -> tensor<8x8xf32>
  %w2 = zero.get_param @h.0.w2 : tensor<8x4xf32>
  %1 = nn.matmul %0, %w2 : tensor<8x8xf32>, tensor<8x4xf32> -> tensor<8x4xf32>
  %w3 = zero.get_param @h.0.w3 : tensor<4x4xf32>
  %2 = nn.matmul %1, %w3 : tensor<8x4xf32>, tensor<4x4xf32> -> tensor<8x4xf32>
  %w4 = zero.get_param @h.0.w4 : tensor<4x4xf32>
  %3 = nn.matmul %2, %w4 : tensor<8x4xf32>, tensor<4x4xf32> -> tensor<8x4xf32>
  %b = zero.get_param @h.0.b : tensor<4xf32>
  %4 = nn.add %3, %b : tensor<8x4xf32>, tensor<4xf32>
  %head = zero.get_param @head : tensor<4x3xf32>
  %5 = nn.matmul %4, %head : tensor<8x4xf32>, tensor<4x3xf32> -> tensor<8x3xf32>
  %6 = nn.softmax_cross_entropy %5, %y : tensor<8x3xf32>, tensor<8xi64> -> tensor<f32>
  zero.return %6 : tensor<f32>
}

// -----

// Stage 3 groups layers for Muon: each layer alone is @gaps' layer (84
// elements, no layout without gaps), but the two layers together give
// shards of 84 that hold one layer's w1, w2 and w3 (80, 8320 FLOPs each)
// and its bias: one group @"h.0-1" with AdamW's numel and padding, gathered
// as one. muon-group-layers=1 keeps a group per layer, each with gaps.
// S3: zero.partition @"h.0-1" stage 3 world_size 2 alignment 2 numel 168 padded 168 params [@h.0.w1, @h.0.w2, @h.0.w3, @h.0.b, @h.1.w1, @h.1.w2, @h.1.w3, @h.1.b] offsets [0, 32, 64, 80, 84, 116, 148, 164] owners [0, 0, 0, -1, 1, 1, 1, -1]
// S3-NEXT: zero.partition @head_1 stage 3 world_size 2 alignment 2 numel 12 padded 12 params [@head] offsets [0]{{$}}
// L1: zero.partition @h.0 stage 3 world_size 2 alignment 2 numel 84 padded 96 params [@h.0.w1, @h.0.w3, @h.0.w2, @h.0.b] offsets [0, 32, 48, 80] owners [0, 0, 1, -1]
// L1-NEXT: zero.partition @h.1 stage 3 world_size 2 alignment 2 numel 84 padded 96 params [@h.1.w1, @h.1.w3, @h.1.w2, @h.1.b] offsets [0, 32, 48, 80] owners [0, 0, 1, -1]
// L1-NEXT: zero.partition @head_1 stage 3 world_size 2 alignment 2 numel 12 padded 12 params [@head] offsets [0]{{$}}
// S1: zero.partition @flat stage 1 world_size 2 alignment 2 numel 180 padded 180 params [@h.0.w1, @h.0.w2, @h.0.w3, @head, @h.1.w1, @h.1.w2, @h.1.w3, @h.0.b, @h.1.b] offsets [0, 32, 64, 80, 92, 124, 156, 172, 176] owners [0, 0, 0, -1, 1, 1, 1, -1, -1]
// S0: zero.partition @flat stage 0 world_size 2 alignment 2 numel 180 padded 180 params [@h.0.w1, @h.0.w2, @h.0.w3, @h.0.b, @h.1.w1, @h.1.w2, @h.1.w3, @h.1.b, @head] offsets [0, 32, 64, 80, 84, 116, 148, 164, 168]{{$}}
// CHECK-LABEL: zero.train_step @layers
zero.param @h.0.w1 : tensor<4x8xf32> init normal std 0.5
zero.param @h.0.w2 : tensor<8x4xf32> init normal std 0.5
zero.param @h.0.w3 : tensor<4x4xf32> init normal std 0.5
zero.param @h.0.b : tensor<4xf32> init zeros
zero.param @h.1.w1 : tensor<4x8xf32> init normal std 0.5
zero.param @h.1.w2 : tensor<8x4xf32> init normal std 0.5
zero.param @h.1.w3 : tensor<4x4xf32> init normal std 0.5
zero.param @h.1.b : tensor<4xf32> init zeros
zero.param @head : tensor<4x3xf32> init normal std 0.5
zero.train_step @layers(%x: tensor<8x4xf32>, %y: tensor<8xi64>)
    optimizer #zero.optimizer<kind = muon, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %a1 = zero.get_param @h.0.w1 : tensor<4x8xf32>
  %0 = nn.matmul %x, %a1 : tensor<8x4xf32>, tensor<4x8xf32> -> tensor<8x8xf32>
  %a2 = zero.get_param @h.0.w2 : tensor<8x4xf32>
  %1 = nn.matmul %0, %a2 : tensor<8x8xf32>, tensor<8x4xf32> -> tensor<8x4xf32>
  %a3 = zero.get_param @h.0.w3 : tensor<4x4xf32>
  %2 = nn.matmul %1, %a3 : tensor<8x4xf32>, tensor<4x4xf32> -> tensor<8x4xf32>
  %ab = zero.get_param @h.0.b : tensor<4xf32>
  %3 = nn.add %2, %ab : tensor<8x4xf32>, tensor<4xf32>
  %b1 = zero.get_param @h.1.w1 : tensor<4x8xf32>
  %4 = nn.matmul %3, %b1 : tensor<8x4xf32>, tensor<4x8xf32> -> tensor<8x8xf32>
  %b2 = zero.get_param @h.1.w2 : tensor<8x4xf32>
  %5 = nn.matmul %4, %b2 : tensor<8x8xf32>, tensor<8x4xf32> -> tensor<8x4xf32>
  %b3 = zero.get_param @h.1.w3 : tensor<4x4xf32>
  %6 = nn.matmul %5, %b3 : tensor<8x4xf32>, tensor<4x4xf32> -> tensor<8x4xf32>
  %bb = zero.get_param @h.1.b : tensor<4xf32>
  %7 = nn.add %6, %bb : tensor<8x4xf32>, tensor<4xf32>
  %head = zero.get_param @head : tensor<4x3xf32>
  %8 = nn.matmul %7, %head : tensor<8x4xf32>, tensor<4x3xf32> -> tensor<8x3xf32>
  %9 = nn.softmax_cross_entropy %8, %y : tensor<8x3xf32>, tensor<8xi64> -> tensor<f32>
  zero.return %9 : tensor<f32>
}
