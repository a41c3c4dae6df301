// RUN: zero-opt %s -split-input-file --zero-expert-parallel="ep-size=2" -verify-diagnostics

// What zero-expert-parallel refuses, by name.

// Checks that the experts divide over the ranks.
zero.param @experts.w : tensor<3x4x8xf32> init normal std 0.3
zero.train_step @train(%x: tensor<8x8xf32>, %idx: tensor<8x1xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.000000e-02>
    precision #zero.precision<kind = fp32> {
  // expected-error @+1 {{'nn.moe_dispatch' op has 3 experts, not divisible by ep-size 2}}
  %rows, %pos, %offs = nn.moe_dispatch %x[%idx] experts 3 : tensor<8x8xf32>, tensor<8x1xi32> -> tensor<8x8xf32>, tensor<3xi32>
  %w = zero.get_param @experts.w : tensor<3x4x8xf32>
  %h = nn.grouped_matmul %rows, %w, %offs transpose_rhs : tensor<8x8xf32>, tensor<3x4x8xf32>, tensor<3xi32> -> tensor<8x4xf32>
  %l = nn.reduce_sum %h : tensor<8x4xf32> -> tensor<f32>
  zero.return %l : tensor<f32>
}

// -----

// Checks that expert rows are combined before they leave the layer.
zero.param @experts.w : tensor<2x8x8xf32> init normal std 0.3
zero.train_step @train(%x: tensor<8x8xf32>, %idx: tensor<8x1xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.000000e-02>
    precision #zero.precision<kind = fp32> {
  %rows, %pos, %offs = nn.moe_dispatch %x[%idx] experts 2 : tensor<8x8xf32>, tensor<8x1xi32> -> tensor<8x8xf32>, tensor<2xi32>
  %w = zero.get_param @experts.w : tensor<2x8x8xf32>
  %h = nn.grouped_matmul %rows, %w, %offs transpose_rhs : tensor<8x8xf32>, tensor<2x8x8xf32>, tensor<2xi32> -> tensor<8x8xf32>
  // expected-error @+1 {{'nn.reduce_sum' op reads an expert's rows outside its layer; ep-size needs them combined (nn.moe_combine)}}
  %s = nn.reduce_sum %h : tensor<8x8xf32> -> tensor<f32>
  zero.return %s : tensor<f32>
}

// -----

// Checks that the expert weights are parameters read by the products only.
zero.param @experts.w : tensor<2x8x8xf32> init normal std 0.3
zero.train_step @train(%x: tensor<8x8xf32>, %idx: tensor<8x1xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.000000e-02>
    precision #zero.precision<kind = fp32> {
  %rows, %pos, %offs = nn.moe_dispatch %x[%idx] experts 2 : tensor<8x8xf32>, tensor<8x1xi32> -> tensor<8x8xf32>, tensor<2xi32>
  %w = zero.get_param @experts.w : tensor<2x8x8xf32>
  %h = nn.grouped_matmul %rows, %w, %offs transpose_rhs : tensor<8x8xf32>, tensor<2x8x8xf32>, tensor<2xi32> -> tensor<8x8xf32>
  // expected-error @+1 {{'nn.reduce_sum' op reads expert parameter @experts.w other than as a grouped product's weights; ep-size splits its experts over the ranks}}
  %s = nn.reduce_sum %w : tensor<2x8x8xf32> -> tensor<f32>
  zero.return %s : tensor<f32>
}

// -----

// Checks that a product's rows are the dispatched rows or rows in their
// order (here the tokens themselves, 8 rows for 16 dispatch rows).
zero.param @experts.w : tensor<2x8x8xf32> init normal std 0.3
zero.param @experts.v : tensor<2x8x8xf32> init normal std 0.3
zero.train_step @train(%x: tensor<8x8xf32>, %idx: tensor<8x2xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.000000e-02>
    precision #zero.precision<kind = fp32> {
  %rows, %pos, %offs = nn.moe_dispatch %x[%idx] experts 2 : tensor<8x8xf32>, tensor<8x2xi32> -> tensor<16x8xf32>, tensor<2xi32>
  %w = zero.get_param @experts.w : tensor<2x8x8xf32>
  %h = nn.grouped_matmul %rows, %w, %offs transpose_rhs : tensor<16x8xf32>, tensor<2x8x8xf32>, tensor<2xi32> -> tensor<16x8xf32>
  %v = zero.get_param @experts.v : tensor<2x8x8xf32>
  // expected-error @+1 {{'nn.grouped_matmul' op reads rows 'tensor<8x8xf32>' that are neither the dispatched rows nor 16 rows in their order; ep-size sends a product's rows to its experts}}
  %g = nn.grouped_matmul %x, %v, %offs transpose_rhs : tensor<8x8xf32>, tensor<2x8x8xf32>, tensor<2xi32> -> tensor<8x8xf32>
  %s = nn.reduce_sum %h : tensor<16x8xf32> -> tensor<f32>
  zero.return %s : tensor<f32>
}

// -----

// Checks that the step has a MoE layer.
zero.param @w : tensor<8x8xf32> init normal std 0.3
// expected-error @+1 {{train step @train has no MoE layer (nn.moe_dispatch); ep-size 2 splits experts}}
zero.train_step @train(%x: tensor<8x8xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.000000e-02>
    precision #zero.precision<kind = fp32> {
  %w = zero.get_param @w : tensor<8x8xf32>
  %h = nn.matmul %x, %w : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
  %s = nn.reduce_sum %h : tensor<8x8xf32> -> tensor<f32>
  zero.return %s : tensor<f32>
}
