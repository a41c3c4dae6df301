// RUN: zero-opt %s -split-input-file --zero-grad-sync="reduce-bucket-size=21" | FileCheck %s --check-prefix=B21
// contiguous-gradients is a hint to the memory planner: the schedule is the same.
// RUN: zero-opt %s -split-input-file --zero-grad-sync="reduce-bucket-size=21 contiguous-gradients=false" | FileCheck %s --check-prefix=B21
// RUN: zero-opt %s -split-input-file --zero-grad-sync | FileCheck %s --check-prefix=BIG
// RUN: zero-opt %s -split-input-file --zero-grad-sync="reduce-bucket-size=21 reduce-scatter=false" | FileCheck %s --check-prefix=REDUCE
// RUN: zero-opt %s -split-input-file --zero-grad-sync="reduce-bucket-size=21 overlap-comm=true" | FileCheck %s --check-prefix=OVERLAP
// RUN: zero-opt %s -split-input-file --zero-grad-sync="gradient-accumulation-steps=2 overlap-comm=true" | FileCheck %s --check-prefix=ACC

// Inputs: a two-layer MLP after autodiff and zero-partition on 2 ranks
// (global batch 8, 4 per rank). Layout: fc1.weight [0, 24), fc1.bias
// [24, 30), fc2.weight [30, 48), fc2.bias [48, 51). Gradients complete in
// reverse order, so buckets fill downward: with 21 elements per bucket, fc2.*
// is [30, 51), then fc1.bias + the top 15 of fc1.weight is [9, 30), then the
// rest of fc1.weight [0, 9).

// Stage 2: each bucket is reduce-scattered from the gradient values as soon
// as it fills and exactly the elements it consumed are freed.
zero.param @fc1.weight : tensor<4x6xf32> init normal std 0.5
zero.param @fc1.bias : tensor<6xf32> init zeros
zero.param @fc2.weight : tensor<6x3xf32> init normal std 0.4
zero.param @fc2.bias : tensor<3xf32> init zeros
zero.partition @flat stage 2 world_size 2 alignment 2 numel 51 padded 52 params [@fc1.weight, @fc1.bias, @fc2.weight, @fc2.bias] offsets [0, 24, 30, 48]
// B21-LABEL: zero.train_step @stage2
// B21-SAME: schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 8>
// B21: zero.grad @fc2.weight, %[[G2W:.*]] :
// B21-NEXT: zero.reduce_scatter group @flat [30, 51) from %[[G2W]], %[[G2B:.*]] at [0, 0] : tensor<6x3xf32>, tensor<3xf32>{{$}}
// B21-NEXT: zero.free %[[G2W]] : tensor<6x3xf32>
// B21-NEXT: zero.free %[[G2B]] : tensor<3xf32>
// B21-NEXT: nn.relu_grad
// B21: zero.grad @fc1.weight, %[[G1W:.*]] :
// B21-NEXT: zero.reduce_scatter group @flat [9, 30) from %[[G1W]], %[[G1B:.*]] at [9, 0] :
// B21-NEXT: zero.free %[[G1W]][9, 15] : tensor<4x6xf32>
// B21-NEXT: zero.free %[[G1B]] : tensor<6xf32>
// B21-NEXT: zero.reduce_scatter group @flat [0, 9) from %[[G1W]] at [0] :
// B21-NEXT: zero.free %[[G1W]][0, 9] : tensor<4x6xf32>
// B21-NEXT: zero.return
// B21-NOT: phase boundary

// The default bucket (5e8) holds the whole model: one reduction at the end.
// BIG-LABEL: zero.train_step @stage2
// BIG: zero.grad @fc1.weight
// BIG-NEXT: zero.reduce_scatter group @flat [0, 51) from %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} at [0, 0, 0, 0] :
// BIG-COUNT-4: zero.free
// BIG-NEXT: zero.return

// reduce-scatter=false: one zero.reduce per bucket instead.
// REDUCE-LABEL: zero.train_step @stage2
// REDUCE-NOT: zero.reduce_scatter
// REDUCE: zero.grad @fc2.weight
// REDUCE-NEXT: zero.reduce group @flat [30, 51) from
// REDUCE: zero.reduce group @flat [9, 30) from
// REDUCE: zero.reduce group @flat [0, 9) from
// REDUCE-NOT: zero.reduce_scatter

// overlap-comm: each reduction returns a token; with two alternating bucket
// buffers, bucket 0 is waited for right before bucket 2 is issued, its frees
// follow its wait, and the last ones are waited for at the end.
// OVERLAP-LABEL: zero.train_step @stage2
// OVERLAP: zero.grad @fc2.weight, %[[G2W:.*]] :
// OVERLAP-NEXT: %[[T0:.*]] = zero.reduce_scatter group @flat [30, 51) {{.*}} -> !zero.token
// OVERLAP-NOT: zero.free
// OVERLAP: zero.grad @fc1.weight, %[[G1W:.*]] :
// OVERLAP-NEXT: %[[T1:.*]] = zero.reduce_scatter group @flat [9, 30) {{.*}} -> !zero.token
// OVERLAP-NEXT: zero.wait %[[T0]]
// OVERLAP-NEXT: zero.free %[[G2W]] :
// OVERLAP-NEXT: zero.free
// OVERLAP-NEXT: %[[T2:.*]] = zero.reduce_scatter group @flat [0, 9) {{.*}} -> !zero.token
// OVERLAP-NEXT: zero.wait %[[T1]]
// OVERLAP-NEXT: zero.free %[[G1W]][9, 15]
// OVERLAP-NEXT: zero.free
// OVERLAP-NEXT: zero.wait %[[T2]]
// OVERLAP-NEXT: zero.free %[[G1W]][0, 9]
// OVERLAP-NEXT: zero.return

// gradient-accumulation-steps=2: the inputs become one micro batch of one
// rank (8 / 2 ranks / 2 = 2 rows) and every value carrying it follows; at
// stage 2 every micro step reduces into the owner's accumulator, so nothing
// is in the boundary phase.
// ACC-LABEL: zero.train_step @stage2(%{{.*}}: tensor<2x4xf32>, %{{.*}}: tensor<2xi64>)
// ACC-SAME: schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 8, accumulation_steps = 2>
// ACC: nn.matmul %{{.*}}, %{{.*}} : tensor<2x4xf32>, tensor<4x6xf32> -> tensor<2x6xf32>
// ACC: nn.matmul %{{.*}}, %{{.*}} transpose_lhs : tensor<2x4xf32>, tensor<2x6xf32> -> tensor<4x6xf32>
// ACC-NEXT: zero.grad @fc1.weight
// ACC-NEXT: %[[T:.*]] = zero.reduce_scatter group @flat [0, 51) from {{[^{]*}} -> !zero.token{{$}}
// ACC-NEXT: zero.wait %[[T]]{{$}}
// ACC-NOT: phase boundary
zero.train_step @stage2(%x: tensor<4x4xf32>, %y: tensor<4xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 8> {
  %0 = zero.get_param @fc1.weight : tensor<4x6xf32>
  %1 = nn.matmul %x, %0 : tensor<4x4xf32>, tensor<4x6xf32> -> tensor<4x6xf32>
  %2 = zero.get_param @fc1.bias : tensor<6xf32>
  %3 = nn.add %1, %2 : tensor<4x6xf32>, tensor<6xf32>
  %4 = nn.relu %3 : tensor<4x6xf32>
  %5 = zero.get_param @fc2.weight : tensor<6x3xf32>
  %6 = nn.matmul %4, %5 : tensor<4x6xf32>, tensor<6x3xf32> -> tensor<4x3xf32>
  %7 = zero.get_param @fc2.bias : tensor<3xf32>
  %8 = nn.add %6, %7 : tensor<4x3xf32>, tensor<3xf32>
  %loss = nn.softmax_cross_entropy %8, %y : tensor<4x3xf32>, tensor<4xi64> -> tensor<f32>
  %seed = nn.fill 1.0 {zero.loss_seed} : tensor<f32>
  %11 = nn.softmax_cross_entropy_grad %8, %y, %seed : tensor<4x3xf32>, tensor<4xi64>, tensor<f32>
  %g2b = nn.reduce_sum %11 : tensor<4x3xf32> -> tensor<3xf32>
  zero.grad @fc2.bias, %g2b : tensor<3xf32>
  %13 = nn.matmul %11, %5 transpose_rhs : tensor<4x3xf32>, tensor<6x3xf32> -> tensor<4x6xf32>
  %g2w = nn.matmul %4, %11 transpose_lhs : tensor<4x6xf32>, tensor<4x3xf32> -> tensor<6x3xf32>
  zero.grad @fc2.weight, %g2w : tensor<6x3xf32>
  %15 = nn.relu_grad %4, %13 : tensor<4x6xf32>
  %g1b = nn.reduce_sum %15 : tensor<4x6xf32> -> tensor<6xf32>
  zero.grad @fc1.bias, %g1b : tensor<6xf32>
  %g1w = nn.matmul %x, %15 transpose_lhs : tensor<4x4xf32>, tensor<4x6xf32> -> tensor<4x6xf32>
  zero.grad @fc1.weight, %g1w : tensor<4x6xf32>
  zero.return %loss : tensor<f32>
}

// -----

// Stage 0: in-place all-reduce of the persistent gradient buffer as buckets
// fill, during the backward; no frees (zero.grad accumulates into `grads`).
// Stages 0-1 communicate only at the accumulation boundary, so their
// collectives (and waits) are in the boundary phase.
zero.param @fc1.weight : tensor<4x6xf32> init normal std 0.5
zero.param @fc1.bias : tensor<6xf32> init zeros
zero.param @fc2.weight : tensor<6x3xf32> init normal std 0.4
zero.param @fc2.bias : tensor<3xf32> init zeros
zero.partition @flat stage 0 world_size 2 alignment 2 numel 51 padded 51 params [@fc1.weight, @fc1.bias, @fc2.weight, @fc2.bias] offsets [0, 24, 30, 48]
// B21-LABEL: zero.train_step @stage0
// B21: zero.grad @fc2.weight
// B21-NEXT: zero.all_reduce sum group @flat in grads [30, 51) phase boundary
// B21-NEXT: nn.relu_grad
// B21: zero.grad @fc1.weight
// B21-NEXT: zero.all_reduce sum group @flat in grads [9, 30) phase boundary
// B21-NEXT: zero.all_reduce sum group @flat in grads [0, 9) phase boundary
// B21-NEXT: zero.return
// B21-NOT: zero.free

// OVERLAP-LABEL: zero.train_step @stage0
// OVERLAP: zero.grad @fc2.weight
// OVERLAP-NEXT: %[[T0:.*]] = zero.all_reduce sum group @flat in grads [30, 51) phase boundary token !zero.token

// ACC-LABEL: zero.train_step @stage0(%{{.*}}: tensor<2x4xf32>, %{{.*}}: tensor<2xi64>)
// ACC-SAME: schedule #zero.schedule<stage = 0, world_size = 2, global_batch = 8, accumulation_steps = 2>
// ACC: zero.grad @fc1.weight
// ACC-NEXT: %[[T:.*]] = zero.all_reduce sum group @flat in grads [0, 51) phase boundary token !zero.token
// ACC-NEXT: zero.wait %[[T]] phase boundary
// ACC-NEXT: zero.return
zero.train_step @stage0(%x: tensor<4x4xf32>, %y: tensor<4xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 2, global_batch = 8> {
  %0 = zero.get_param @fc1.weight : tensor<4x6xf32>
  %1 = nn.matmul %x, %0 : tensor<4x4xf32>, tensor<4x6xf32> -> tensor<4x6xf32>
  %2 = zero.get_param @fc1.bias : tensor<6xf32>
  %3 = nn.add %1, %2 : tensor<4x6xf32>, tensor<6xf32>
  %4 = nn.relu %3 : tensor<4x6xf32>
  %5 = zero.get_param @fc2.weight : tensor<6x3xf32>
  %6 = nn.matmul %4, %5 : tensor<4x6xf32>, tensor<6x3xf32> -> tensor<4x3xf32>
  %7 = zero.get_param @fc2.bias : tensor<3xf32>
  %8 = nn.add %6, %7 : tensor<4x3xf32>, tensor<3xf32>
  %loss = nn.softmax_cross_entropy %8, %y : tensor<4x3xf32>, tensor<4xi64> -> tensor<f32>
  %seed = nn.fill 1.0 {zero.loss_seed} : tensor<f32>
  %11 = nn.softmax_cross_entropy_grad %8, %y, %seed : tensor<4x3xf32>, tensor<4xi64>, tensor<f32>
  %g2b = nn.reduce_sum %11 : tensor<4x3xf32> -> tensor<3xf32>
  zero.grad @fc2.bias, %g2b : tensor<3xf32>
  %13 = nn.matmul %11, %5 transpose_rhs : tensor<4x3xf32>, tensor<6x3xf32> -> tensor<4x6xf32>
  %g2w = nn.matmul %4, %11 transpose_lhs : tensor<4x6xf32>, tensor<4x3xf32> -> tensor<6x3xf32>
  zero.grad @fc2.weight, %g2w : tensor<6x3xf32>
  %15 = nn.relu_grad %4, %13 : tensor<4x6xf32>
  %g1b = nn.reduce_sum %15 : tensor<4x6xf32> -> tensor<6xf32>
  zero.grad @fc1.bias, %g1b : tensor<6xf32>
  %g1w = nn.matmul %x, %15 transpose_lhs : tensor<4x4xf32>, tensor<4x6xf32> -> tensor<4x6xf32>
  zero.grad @fc1.weight, %g1w : tensor<4x6xf32>
  zero.return %loss : tensor<f32>
}

// -----

// Stage 1: gradients stay whole until the backward is done, then the full
// buffer is reduce-scattered in place, in buckets going up the layout.
zero.param @fc1.weight : tensor<4x6xf32> init normal std 0.5
zero.param @fc1.bias : tensor<6xf32> init zeros
zero.param @fc2.weight : tensor<6x3xf32> init normal std 0.4
zero.param @fc2.bias : tensor<3xf32> init zeros
zero.partition @flat stage 1 world_size 2 alignment 2 numel 51 padded 52 params [@fc1.weight, @fc1.bias, @fc2.weight, @fc2.bias] offsets [0, 24, 30, 48]
// B21-LABEL: zero.train_step @stage1
// B21-NOT: zero.reduce_scatter
// B21: zero.grad @fc1.weight
// B21-NEXT: zero.reduce_scatter group @flat in grads [0, 21) phase boundary
// B21-NEXT: zero.reduce_scatter group @flat in grads [21, 42) phase boundary
// B21-NEXT: zero.reduce_scatter group @flat in grads [42, 51) phase boundary
// B21-NEXT: zero.return
// B21-NOT: zero.free

// REDUCE-LABEL: zero.train_step @stage1
// REDUCE: zero.grad @fc1.weight
// REDUCE-NEXT: zero.reduce group @flat in grads [0, 21) phase boundary

// ACC-LABEL: zero.train_step @stage1(%{{.*}}: tensor<2x4xf32>, %{{.*}}: tensor<2xi64>)
// ACC: zero.grad @fc1.weight
// ACC-NEXT: %[[T:.*]] = zero.reduce_scatter group @flat in grads [0, 51) phase boundary -> !zero.token
// ACC-NEXT: zero.wait %[[T]] phase boundary
zero.train_step @stage1(%x: tensor<4x4xf32>, %y: tensor<4xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 1, world_size = 2, global_batch = 8> {
  %0 = zero.get_param @fc1.weight : tensor<4x6xf32>
  %1 = nn.matmul %x, %0 : tensor<4x4xf32>, tensor<4x6xf32> -> tensor<4x6xf32>
  %2 = zero.get_param @fc1.bias : tensor<6xf32>
  %3 = nn.add %1, %2 : tensor<4x6xf32>, tensor<6xf32>
  %4 = nn.relu %3 : tensor<4x6xf32>
  %5 = zero.get_param @fc2.weight : tensor<6x3xf32>
  %6 = nn.matmul %4, %5 : tensor<4x6xf32>, tensor<6x3xf32> -> tensor<4x3xf32>
  %7 = zero.get_param @fc2.bias : tensor<3xf32>
  %8 = nn.add %6, %7 : tensor<4x3xf32>, tensor<3xf32>
  %loss = nn.softmax_cross_entropy %8, %y : tensor<4x3xf32>, tensor<4xi64> -> tensor<f32>
  %seed = nn.fill 1.0 {zero.loss_seed} : tensor<f32>
  %11 = nn.softmax_cross_entropy_grad %8, %y, %seed : tensor<4x3xf32>, tensor<4xi64>, tensor<f32>
  %g2b = nn.reduce_sum %11 : tensor<4x3xf32> -> tensor<3xf32>
  zero.grad @fc2.bias, %g2b : tensor<3xf32>
  %13 = nn.matmul %11, %5 transpose_rhs : tensor<4x3xf32>, tensor<6x3xf32> -> tensor<4x6xf32>
  %g2w = nn.matmul %4, %11 transpose_lhs : tensor<4x6xf32>, tensor<4x3xf32> -> tensor<6x3xf32>
  zero.grad @fc2.weight, %g2w : tensor<6x3xf32>
  %15 = nn.relu_grad %4, %13 : tensor<4x6xf32>
  %g1b = nn.reduce_sum %15 : tensor<4x6xf32> -> tensor<6xf32>
  zero.grad @fc1.bias, %g1b : tensor<6xf32>
  %g1w = nn.matmul %x, %15 transpose_lhs : tensor<4x4xf32>, tensor<4x6xf32> -> tensor<4x6xf32>
  zero.grad @fc1.weight, %g1w : tensor<4x6xf32>
  zero.return %loss : tensor<f32>
}

// -----

// Stage 3: buckets never span groups; each group is reduced from the top of
// its own layout (fc2 [0, 21) fits one bucket, fc1 [0, 30) needs two).
zero.param @fc1.weight : tensor<4x6xf32> init normal std 0.5
zero.param @fc1.bias : tensor<6xf32> init zeros
zero.param @fc2.weight : tensor<6x3xf32> init normal std 0.4
zero.param @fc2.bias : tensor<3xf32> init zeros
zero.partition @fc1 stage 3 world_size 2 alignment 2 numel 30 padded 32 params [@fc1.weight, @fc1.bias] offsets [0, 24]
zero.partition @fc2 stage 3 world_size 2 alignment 2 numel 21 padded 24 params [@fc2.weight, @fc2.bias] offsets [0, 18]
// B21-LABEL: zero.train_step @stage3
// B21: zero.grad @fc2.weight, %[[G2W:.*]] :
// B21-NEXT: zero.reduce_scatter group @fc2 [0, 21) from %[[G2W]], %{{.*}} at [0, 0] :
// B21: zero.grad @fc1.weight, %[[G1W:.*]] :
// B21-NEXT: zero.reduce_scatter group @fc1 [9, 30) from %[[G1W]], %{{.*}} at [9, 0] :
// B21-NEXT: zero.free %[[G1W]][9, 15]
// B21-NEXT: zero.free
// B21-NEXT: zero.reduce_scatter group @fc1 [0, 9) from %[[G1W]] at [0] :
// B21-NEXT: zero.free %[[G1W]][0, 9]
// B21-NEXT: zero.return

// Even with one bucket large enough for the model, the groups are reduced
// separately as each completes.
// BIG-LABEL: zero.train_step @stage3
// BIG: zero.grad @fc2.weight
// BIG-NEXT: zero.reduce_scatter group @fc2 [0, 21) from
// BIG: zero.grad @fc1.weight
// BIG-NEXT: zero.reduce_scatter group @fc1 [0, 30) from
zero.train_step @stage3(%x: tensor<4x4xf32>, %y: tensor<4xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 8> {
  %0 = zero.get_param @fc1.weight : tensor<4x6xf32>
  %1 = nn.matmul %x, %0 : tensor<4x4xf32>, tensor<4x6xf32> -> tensor<4x6xf32>
  %2 = zero.get_param @fc1.bias : tensor<6xf32>
  %3 = nn.add %1, %2 : tensor<4x6xf32>, tensor<6xf32>
  %4 = nn.relu %3 : tensor<4x6xf32>
  %5 = zero.get_param @fc2.weight : tensor<6x3xf32>
  %6 = nn.matmul %4, %5 : tensor<4x6xf32>, tensor<6x3xf32> -> tensor<4x3xf32>
  %7 = zero.get_param @fc2.bias : tensor<3xf32>
  %8 = nn.add %6, %7 : tensor<4x3xf32>, tensor<3xf32>
  %loss = nn.softmax_cross_entropy %8, %y : tensor<4x3xf32>, tensor<4xi64> -> tensor<f32>
  %seed = nn.fill 1.0 {zero.loss_seed} : tensor<f32>
  %11 = nn.softmax_cross_entropy_grad %8, %y, %seed : tensor<4x3xf32>, tensor<4xi64>, tensor<f32>
  %g2b = nn.reduce_sum %11 : tensor<4x3xf32> -> tensor<3xf32>
  zero.grad @fc2.bias, %g2b : tensor<3xf32>
  %13 = nn.matmul %11, %5 transpose_rhs : tensor<4x3xf32>, tensor<6x3xf32> -> tensor<4x6xf32>
  %g2w = nn.matmul %4, %11 transpose_lhs : tensor<4x6xf32>, tensor<4x3xf32> -> tensor<6x3xf32>
  zero.grad @fc2.weight, %g2w : tensor<6x3xf32>
  %15 = nn.relu_grad %4, %13 : tensor<4x6xf32>
  %g1b = nn.reduce_sum %15 : tensor<4x6xf32> -> tensor<6xf32>
  zero.grad @fc1.bias, %g1b : tensor<6xf32>
  %g1w = nn.matmul %x, %15 transpose_lhs : tensor<4x4xf32>, tensor<4x6xf32> -> tensor<4x6xf32>
  zero.grad @fc1.weight, %g1w : tensor<4x6xf32>
  zero.return %loss : tensor<f32>
}

// -----

// A gradient that is not adjacent to the bucket being filled flushes it:
// l.c [8, 12) completes first and the next one, l.a [0, 4), does not touch it,
// so [8, 12) is reduced at once; l.b [4, 8) then extends l.a's bucket to [0, 8).
zero.param @l.a : tensor<4xf32> init ones
zero.param @l.b : tensor<4xf32> init zeros
zero.param @l.c : tensor<4xf32> init zeros
zero.partition @l stage 3 world_size 2 alignment 2 numel 12 padded 12 params [@l.a, @l.b, @l.c] offsets [0, 4, 8]
// BIG-LABEL: zero.train_step @tied
// BIG: zero.grad @l.c, %[[GC:.*]] :
// BIG-NEXT: zero.reduce_scatter group @l [8, 12) from %[[GC]] at [0] :
// BIG-NEXT: zero.free %[[GC]]
// BIG: zero.grad @l.a, %[[GA:.*]] :
// BIG-NOT: zero.reduce_scatter
// BIG: zero.grad @l.b, %[[GB:.*]] :
// BIG-NEXT: zero.reduce_scatter group @l [0, 8) from %[[GA]], %[[GB]] at [0, 0] :
zero.train_step @tied(%x: tensor<2x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4> {
  %loss = nn.fill 0.0 : tensor<f32>
  %gc = nn.fill 1.0 : tensor<4xf32>
  zero.grad @l.c, %gc : tensor<4xf32>
  %ga = nn.fill 1.0 : tensor<4xf32>
  zero.grad @l.a, %ga : tensor<4xf32>
  %gb = nn.fill 1.0 : tensor<4xf32>
  zero.grad @l.b, %gb : tensor<4xf32>
  zero.return %loss : tensor<f32>
}
