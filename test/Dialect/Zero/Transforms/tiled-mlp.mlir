// RUN: zero-opt %s -split-input-file --zero-tiled-mlp="tiles=4" | FileCheck %s
// RUN: zero-opt %s -split-input-file --zero-tiled-mlp="tiles=4" --zero-autodiff | FileCheck %s --check-prefix=GRAD

// Llama's MLP as the Hugging Face import writes it: gate and up projections
// of one input, nn.swiglu, the down projection. They become one
// nn.tiled_mlp over 4 tiles of the 6 rows (2, 2, 2); the [2, 3, 8] gate, up
// and activation are gone. The head's matmul, which is no MLP, is left
// alone.
// CHECK-LABEL: zero.train_step @llama
// CHECK: %[[X:.*]] = nn.rms_norm
// CHECK: %[[WG:.*]] = zero.get_param @gate : tensor<8x4xf32>
// CHECK: %[[WU:.*]] = zero.get_param @up : tensor<8x4xf32>
// CHECK: %[[WD:.*]] = zero.get_param @down : tensor<4x8xf32>
// CHECK-NOT: nn.swiglu
// CHECK: %[[Y:.*]] = nn.tiled_mlp %[[X]], %[[WG]], %[[WU]], %[[WD]] tiles 4 : tensor<2x3x4xf32>, tensor<8x4xf32>, tensor<4x8xf32>
// CHECK: nn.add %{{.*}}, %[[Y]]
// CHECK: nn.matmul %{{.*}}, %{{.*}} transpose_rhs : tensor<2x3x4xf32>, tensor<10x4xf32> -> tensor<2x3x10xf32>
// CHECK-NOT: tensor<2x3x8xf32>
// The backward recomputes the tiles: one op gives the input's gradient and
// the three weights'.
// GRAD-LABEL: zero.train_step @llama
// GRAD: %{{.*}}, %[[DWG:.*]], %[[DWU:.*]], %[[DWD:.*]] = nn.tiled_mlp_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} tiles 4 : tensor<2x3x4xf32>, tensor<8x4xf32>, tensor<4x8xf32>
// GRAD-NOT: nn.swiglu_grad
// GRAD-DAG: zero.grad @gate, %[[DWG]]
// GRAD-DAG: zero.grad @up, %[[DWU]]
// GRAD-DAG: zero.grad @down, %[[DWD]]
zero.param @embed : tensor<10x4xf32> init normal std 0.02
zero.param @norm : tensor<4xf32> init ones
zero.param @gate : tensor<8x4xf32> init normal std 0.02
zero.param @up : tensor<8x4xf32> init normal std 0.02
zero.param @down : tensor<4x8xf32> init normal std 0.02
zero.param @head : tensor<10x4xf32> init normal std 0.02
zero.train_step @llama(%tokens: tensor<2x3xi32>, %targets: tensor<2x3xi32>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %t = zero.get_param @embed : tensor<10x4xf32>
  %h = nn.embedding %t[%tokens] : tensor<10x4xf32>, tensor<2x3xi32> -> tensor<2x3x4xf32>
  %n = zero.get_param @norm : tensor<4xf32>
  %x = nn.rms_norm %h, %n eps 1.0e-06 : tensor<2x3x4xf32>, tensor<4xf32>
  %wg = zero.get_param @gate : tensor<8x4xf32>
  %g = nn.matmul %x, %wg transpose_rhs : tensor<2x3x4xf32>, tensor<8x4xf32> -> tensor<2x3x8xf32>
  %wu = zero.get_param @up : tensor<8x4xf32>
  %u = nn.matmul %x, %wu transpose_rhs : tensor<2x3x4xf32>, tensor<8x4xf32> -> tensor<2x3x8xf32>
  %a = nn.swiglu %g, %u : tensor<2x3x8xf32>
  %wd = zero.get_param @down : tensor<4x8xf32>
  %y = nn.matmul %a, %wd transpose_rhs : tensor<2x3x8xf32>, tensor<4x8xf32> -> tensor<2x3x4xf32>
  %r = nn.add %h, %y : tensor<2x3x4xf32>, tensor<2x3x4xf32>
  %w = zero.get_param @head : tensor<10x4xf32>
  %logits = nn.matmul %r, %w transpose_rhs : tensor<2x3x4xf32>, tensor<10x4xf32> -> tensor<2x3x10xf32>
  %loss = nn.softmax_cross_entropy %logits, %targets : tensor<2x3x10xf32>, tensor<2x3xi32> -> tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Two layers' MLPs, both tiled; more tiles than rows leaves one row a tile.
// CHECK-LABEL: zero.train_step @two
// CHECK-COUNT-2: nn.tiled_mlp %{{.*}} tiles 4 : tensor<3x4xf32>, tensor<8x4xf32>, tensor<4x8xf32>
// CHECK-NOT: nn.swiglu
zero.param @g0 : tensor<8x4xf32> init normal std 0.02
zero.param @u0 : tensor<8x4xf32> init normal std 0.02
zero.param @d0 : tensor<4x8xf32> init normal std 0.02
zero.param @g1 : tensor<8x4xf32> init normal std 0.02
zero.param @u1 : tensor<8x4xf32> init normal std 0.02
zero.param @d1 : tensor<4x8xf32> init normal std 0.02
zero.train_step @two(%x: tensor<3x4xf32>, %t: tensor<3xi32>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-3>
    precision #zero.precision<kind = fp32> {
  %wg0 = zero.get_param @g0 : tensor<8x4xf32>
  %wu0 = zero.get_param @u0 : tensor<8x4xf32>
  %wd0 = zero.get_param @d0 : tensor<4x8xf32>
  %g0 = nn.matmul %x, %wg0 transpose_rhs : tensor<3x4xf32>, tensor<8x4xf32> -> tensor<3x8xf32>
  %u0 = nn.matmul %x, %wu0 transpose_rhs : tensor<3x4xf32>, tensor<8x4xf32> -> tensor<3x8xf32>
  %a0 = nn.swiglu %g0, %u0 : tensor<3x8xf32>
  %y0 = nn.matmul %a0, %wd0 transpose_rhs : tensor<3x8xf32>, tensor<4x8xf32> -> tensor<3x4xf32>
  %wg1 = zero.get_param @g1 : tensor<8x4xf32>
  %wu1 = zero.get_param @u1 : tensor<8x4xf32>
  %wd1 = zero.get_param @d1 : tensor<4x8xf32>
  %g1 = nn.matmul %y0, %wg1 transpose_rhs : tensor<3x4xf32>, tensor<8x4xf32> -> tensor<3x8xf32>
  %u1 = nn.matmul %y0, %wu1 transpose_rhs : tensor<3x4xf32>, tensor<8x4xf32> -> tensor<3x8xf32>
  %a1 = nn.swiglu %g1, %u1 : tensor<3x8xf32>
  %y1 = nn.matmul %a1, %wd1 transpose_rhs : tensor<3x8xf32>, tensor<4x8xf32> -> tensor<3x4xf32>
  %loss = nn.softmax_cross_entropy %y1, %t : tensor<3x4xf32>, tensor<3xi32> -> tensor<f32>
  zero.return %loss : tensor<f32>
}
