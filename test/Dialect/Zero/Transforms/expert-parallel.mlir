// RUN: zero-opt %s -split-input-file --zero-expert-parallel="ep-size=2" | FileCheck %s
// RUN: zero-opt %s -split-input-file --zero-expert-parallel="ep-size=2 moe-capacity-factor=1.5 moe-drop-tokens" | FileCheck %s --check-prefix=CAP
// RUN: zero-opt %s -split-input-file --zero-expert-parallel="ep-size=2" --zero-autodiff | FileCheck %s --check-prefix=GRAD
// RUN: zero-opt %s -split-input-file --zero-expert-parallel="ep-size=2" --zero-partition="stage=3 world-size=4 ep-size=2" | FileCheck %s --check-prefix=PART
// RUN: zero-opt %s -split-input-file --zero-expert-parallel="ep-size=2" --zero-partition="stage=3 world-size=4 ep-size=2 ep-placement=strided" | FileCheck %s --check-prefix=STRIDED
// RUN: not zero-opt %s -split-input-file --zero-expert-parallel="ep-size=2" --zero-partition="stage=3 world-size=4 ep-size=2 ep-placement=diagonal" 2>&1 | FileCheck %s --check-prefix=BADPLACE
// RUN: not zero-opt %s -split-input-file --zero-partition="stage=3 world-size=4 ep-placement=strided" 2>&1 | FileCheck %s --check-prefix=NOEP

// A Mixtral MoE block (4 experts, top 2, 16 tokens: 32 dispatch rows) on 2
// expert-parallel ranks: each keeps experts [2q, 2q + 2) of the fused
// gate_up and down projections, the dispatch rows go to their experts'
// ranks (64 received rows, the dropless bound), the grouped products run
// over the 2 local experts, and the results come back before the combine.
// CHECK: zero.param @experts.gate_up_proj : tensor<2x12x8xf32> init normal std 3.000000e-01 expert_parallel 2
// CHECK: zero.param @experts.down_proj : tensor<2x8x6xf32> init normal std 3.000000e-01 expert_parallel 2
// CHECK: zero.param @out.weight : tensor<5x8xf32> init normal
// CHECK-LABEL: zero.train_step @train
// CHECK: %[[ROWS:.*]], %[[POS:.*]], %[[OFFS:.*]] = nn.moe_dispatch
// CHECK: %[[RECV:.*]], %[[C:.*]], %[[L:.*]] = zero.moe_exchange %[[ROWS]], %[[OFFS]] layer 0 : tensor<32x8xf32>, tensor<4xi32> -> tensor<64x8xf32>, tensor<2x2xi32>, tensor<2xi32>
// CHECK: %[[WGU:.*]] = zero.get_param @experts.gate_up_proj : tensor<2x12x8xf32>
// CHECK: %[[GU:.*]] = nn.grouped_matmul %[[RECV]], %[[WGU]], %[[L]] transpose_rhs : tensor<64x8xf32>, tensor<2x12x8xf32>, tensor<2xi32> -> tensor<64x12xf32>
// CHECK: nn.split %[[GU]] axis 1 : tensor<64x12xf32> -> tensor<64x6xf32>, tensor<64x6xf32>
// CHECK: %[[A:.*]] = nn.swiglu %{{.*}}, %{{.*}} : tensor<64x6xf32>
// CHECK: %[[H:.*]] = nn.grouped_matmul %[[A]], %{{.*}}, %[[L]] transpose_rhs : tensor<64x6xf32>, tensor<2x8x6xf32>, tensor<2xi32> -> tensor<64x8xf32>
// CHECK: %[[BACK:.*]] = zero.moe_return %[[H]], %[[C]], %[[L]], %[[OFFS]] layer 0 : tensor<64x8xf32>, tensor<2x2xi32>, tensor<2xi32>, tensor<4xi32> -> tensor<32x8xf32>
// CHECK: nn.moe_combine %[[BACK]][%[[POS]]]

// With a capacity factor of 1.5 each rank receives ceil(1.5 x 32) = 48 rows
// and drops the rest.
// CAP: zero.moe_exchange %{{.*}}, %{{.*}} layer 0 capacity 1.500000e+00 drop : tensor<32x8xf32>, tensor<4xi32> -> tensor<48x8xf32>, tensor<2x2xi32>, tensor<2xi32>
// CAP: zero.moe_return %{{.*}} layer 0 : tensor<48x8xf32>, tensor<2x2xi32>, tensor<2xi32>, tensor<4xi32> -> tensor<32x8xf32>

// The backward: the combine's row gradient is exchanged to the experts with
// the forward's counts, the grouped products' gradients run there, and the
// dispatch rows' gradient returns.
// GRAD-LABEL: zero.train_step @train
// GRAD: %[[RECV:.*]], %[[C:.*]], %[[L:.*]] = zero.moe_exchange %{{.*}}, %[[OFFS:.*]] layer 0 :
// GRAD: nn.moe_combine_grad
// GRAD: %[[DH:.*]], %{{.*}}, %{{.*}} = zero.moe_exchange %{{.*}}, %[[OFFS]] known(%[[C]], %[[L]] : tensor<2x2xi32>, tensor<2xi32>) layer 0 : tensor<32x8xf32>, tensor<4xi32> -> tensor<64x8xf32>, tensor<2x2xi32>, tensor<2xi32>
// GRAD: nn.grouped_matmul_weight_grad {{.*}} -> tensor<2x8x6xf32>
// GRAD: nn.grouped_matmul_weight_grad {{.*}} -> tensor<2x12x8xf32>
// GRAD: %[[DROWS:.*]] = zero.moe_return %{{.*}}, %[[C]], %[[L]], %[[OFFS]] layer 0 : tensor<64x8xf32>, tensor<2x2xi32>, tensor<2xi32>, tensor<4xi32> -> tensor<32x8xf32>
// GRAD: nn.moe_dispatch_grad %[[DROWS]]
// zero-partition on 4 ranks: the experts' partition is sharded over the 2
// ranks that hold the same experts, the dense ones over the world; the
// batch divides by the world (4 tokens, 8 dispatch rows a rank, 16 received).
// PART: zero.partition @in stage 3 world_size 4 alignment 2 numel 64 padded 64 params [@in.weight] offsets [0]{{$}}
// PART: zero.partition @experts.experts stage 3 world_size 2 alignment 2 numel 288 padded 288 params [@experts.gate_up_proj, @experts.down_proj] offsets [0, 192] expert
// PART: zero.partition @out stage 3 world_size 4 {{.*}}offsets [0]{{$}}
// PART: schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 16, mesh = #zero.mesh<[data = 2, expert = 2]>>
// PART: zero.moe_exchange %{{.*}}, %{{.*}} layer 0 : tensor<8x8xf32>, tensor<4xi32> -> tensor<16x8xf32>, tensor<2x2xi32>, tensor<2xi32>
// PART: zero.moe_return %{{.*}} layer 0 : tensor<16x8xf32>, tensor<2x2xi32>, tensor<2xi32>, tensor<4xi32> -> tensor<8x8xf32>
// With ep-placement=strided the same partitions (the expert one over the 2
// ranks that hold the same experts, now consecutive) and the placement in
// the schedule; a placement that is neither, or strided without ep-size,
// is refused by name.
// STRIDED: zero.partition @experts.experts stage 3 world_size 2 alignment 2 numel 288 padded 288 params [@experts.gate_up_proj, @experts.down_proj] offsets [0, 192] expert
// STRIDED-LABEL: zero.train_step @train
// STRIDED-SAME: schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 16, mesh = #zero.mesh<[expert = 2, data = 2]>>
// BADPLACE: error: zero-partition: ep-placement 'diagonal' is not contiguous or strided
// NOEP: error: zero-partition: ep-placement strided places expert-parallel sets, but ep-size is 1
zero.param @in.weight : tensor<8x8xf32> init normal std 0.3
zero.param @gate.weight : tensor<4x8xf32> init zeros
zero.param @experts.gate_up_proj : tensor<4x12x8xf32> init normal std 0.3
zero.param @experts.down_proj : tensor<4x8x6xf32> init normal std 0.3
zero.param @out.weight : tensor<5x8xf32> init normal std 0.3
zero.train_step @train(%x: tensor<16x8xf32>, %y: tensor<16xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.000000e-02>
    precision #zero.precision<kind = fp32> {
  %wi = zero.get_param @in.weight : tensor<8x8xf32>
  %hs = nn.matmul %x, %wi transpose_rhs : tensor<16x8xf32>, tensor<8x8xf32> -> tensor<16x8xf32>
  %wr = zero.get_param @gate.weight : tensor<4x8xf32>
  %logits = nn.matmul %hs, %wr transpose_rhs : tensor<16x8xf32>, tensor<4x8xf32> -> tensor<16x4xf32>
  %w, %idx = nn.moe_router %logits top_k 2 normalize : tensor<16x4xf32> -> tensor<16x2xf32>, tensor<16x2xi32>
  %rows, %pos, %offs = nn.moe_dispatch %hs[%idx] experts 4 : tensor<16x8xf32>, tensor<16x2xi32> -> tensor<32x8xf32>, tensor<4xi32>
  %wgu = zero.get_param @experts.gate_up_proj : tensor<4x12x8xf32>
  %gu = nn.grouped_matmul %rows, %wgu, %offs transpose_rhs : tensor<32x8xf32>, tensor<4x12x8xf32>, tensor<4xi32> -> tensor<32x12xf32>
  %g, %u = nn.split %gu axis 1 : tensor<32x12xf32> -> tensor<32x6xf32>, tensor<32x6xf32>
  %a = nn.swiglu %g, %u : tensor<32x6xf32>
  %wd = zero.get_param @experts.down_proj : tensor<4x8x6xf32>
  %h = nn.grouped_matmul %a, %wd, %offs transpose_rhs : tensor<32x6xf32>, tensor<4x8x6xf32>, tensor<4xi32> -> tensor<32x8xf32>
  %moe = nn.moe_combine %h[%pos], %w : tensor<32x8xf32>, tensor<16x2xi32>, tensor<16x2xf32> -> tensor<16x8xf32>
  %wo = zero.get_param @out.weight : tensor<5x8xf32>
  %z = nn.matmul %moe, %wo transpose_rhs : tensor<16x8xf32>, tensor<5x8xf32> -> tensor<16x5xf32>
  %loss = nn.softmax_cross_entropy %z, %y : tensor<16x5xf32>, tensor<16xi32> -> tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// gpt-oss's experts add a bias [E, out] to each expert's rows: the grouped
// product of a column of ones (computed from the routing weights, in the
// dispatch's order) with the bias copied and reshaped to [E, 1, out]. The
// bias is sliced with its views, and the ones travel to the experts by an
// exchange of their own with the layer's counts (no second count exchange).
// CHECK: zero.param @experts.down_proj_bias : tensor<2x8xf32> init zeros expert_parallel 2
// CHECK-LABEL: zero.train_step @train_bias
// CHECK: %[[ROWS:.*]], %[[POS:.*]], %[[OFFS:.*]] = nn.moe_dispatch
// CHECK: %[[RECV:.*]], %[[C:.*]], %[[L:.*]] = zero.moe_exchange %[[ROWS]], %[[OFFS]] layer 0 :
// CHECK: %[[ONES:.*]] = nn.add %{{.*}}, %{{.*}} : tensor<32x1xf32>, tensor<1xf32>
// CHECK: %[[ONESR:.*]], %{{.*}}, %{{.*}} = zero.moe_exchange %[[ONES]], %[[OFFS]] known(%[[C]], %[[L]] : tensor<2x2xi32>, tensor<2xi32>) layer 0 : tensor<32x1xf32>, tensor<4xi32> -> tensor<64x1xf32>, tensor<2x2xi32>, tensor<2xi32>
// CHECK: %[[H:.*]] = nn.grouped_matmul %{{.*}}, %{{.*}}, %[[L]] transpose_rhs : tensor<64x6xf32>, tensor<2x8x6xf32>, tensor<2xi32> -> tensor<64x8xf32>
// CHECK: %[[B:.*]] = zero.get_param @experts.down_proj_bias : tensor<2x8xf32>
// CHECK: %[[BC:.*]] = nn.add %[[B]], %{{.*}} : tensor<2x8xf32>, tensor<8xf32>
// CHECK: %[[B3:.*]] = nn.reshape %[[BC]] : tensor<2x8xf32> -> tensor<2x1x8xf32>
// CHECK: %[[HB:.*]] = nn.grouped_matmul %[[ONESR]], %[[B3]], %[[L]] : tensor<64x1xf32>, tensor<2x1x8xf32>, tensor<2xi32> -> tensor<64x8xf32>
// CHECK: %[[SUM:.*]] = nn.add %[[H]], %[[HB]] : tensor<64x8xf32>, tensor<64x8xf32>
// CHECK: zero.moe_return %[[SUM]], %[[C]], %[[L]], %[[OFFS]] layer 0
// The backward returns the ones' gradient (multiplied by zero) the same way.
// GRAD-LABEL: zero.train_step @train_bias
// GRAD: nn.grouped_matmul_weight_grad {{.*}} -> tensor<2x1x8xf32>
// PART-LABEL: zero.train_step @train_bias
// PART: zero.moe_exchange %{{.*}}, %{{.*}} known({{.*}}) layer 0 : tensor<8x1xf32>, tensor<4xi32> -> tensor<16x1xf32>, tensor<2x2xi32>, tensor<2xi32>
zero.param @in.weight : tensor<8x8xf32> init normal std 0.3
zero.param @gate.weight : tensor<4x8xf32> init zeros
zero.param @experts.gate_up_proj : tensor<4x12x8xf32> init normal std 0.3
zero.param @experts.down_proj : tensor<4x8x6xf32> init normal std 0.3
zero.param @experts.down_proj_bias : tensor<4x8xf32> init zeros
zero.param @out.weight : tensor<5x8xf32> init normal std 0.3
zero.train_step @train_bias(%x: tensor<16x8xf32>, %y: tensor<16xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.000000e-02>
    precision #zero.precision<kind = fp32> {
  %wi = zero.get_param @in.weight : tensor<8x8xf32>
  %hs = nn.matmul %x, %wi transpose_rhs : tensor<16x8xf32>, tensor<8x8xf32> -> tensor<16x8xf32>
  %wr = zero.get_param @gate.weight : tensor<4x8xf32>
  %logits = nn.matmul %hs, %wr transpose_rhs : tensor<16x8xf32>, tensor<4x8xf32> -> tensor<16x4xf32>
  %w, %idx = nn.moe_router %logits top_k 2 normalize : tensor<16x4xf32> -> tensor<16x2xf32>, tensor<16x2xi32>
  %rows, %pos, %offs = nn.moe_dispatch %hs[%idx] experts 4 : tensor<16x8xf32>, tensor<16x2xi32> -> tensor<32x8xf32>, tensor<4xi32>
  %wgu = zero.get_param @experts.gate_up_proj : tensor<4x12x8xf32>
  %gu = nn.grouped_matmul %rows, %wgu, %offs transpose_rhs : tensor<32x8xf32>, tensor<4x12x8xf32>, tensor<4xi32> -> tensor<32x12xf32>
  %g, %u = nn.split %gu axis 1 : tensor<32x12xf32> -> tensor<32x6xf32>, tensor<32x6xf32>
  %a = nn.swiglu %g, %u : tensor<32x6xf32>
  %col = nn.reshape %w : tensor<16x2xf32> -> tensor<32x1xf32>
  %zero1 = nn.fill 0.0 : tensor<1xf32>
  %one1 = nn.fill 1.0 : tensor<1xf32>
  %z = nn.mul %col, %zero1 : tensor<32x1xf32>, tensor<1xf32>
  %ones = nn.add %z, %one1 : tensor<32x1xf32>, tensor<1xf32>
  %wd = zero.get_param @experts.down_proj : tensor<4x8x6xf32>
  %h = nn.grouped_matmul %a, %wd, %offs transpose_rhs : tensor<32x6xf32>, tensor<4x8x6xf32>, tensor<4xi32> -> tensor<32x8xf32>
  %bd = zero.get_param @experts.down_proj_bias : tensor<4x8xf32>
  %zero8 = nn.fill 0.0 : tensor<8xf32>
  %bc = nn.add %bd, %zero8 : tensor<4x8xf32>, tensor<8xf32>
  %b3 = nn.reshape %bc : tensor<4x8xf32> -> tensor<4x1x8xf32>
  %hb = nn.grouped_matmul %ones, %b3, %offs : tensor<32x1xf32>, tensor<4x1x8xf32>, tensor<4xi32> -> tensor<32x8xf32>
  %sum = nn.add %h, %hb : tensor<32x8xf32>, tensor<32x8xf32>
  %moe = nn.moe_combine %sum[%pos], %w : tensor<32x8xf32>, tensor<16x2xi32>, tensor<16x2xf32> -> tensor<16x8xf32>
  %wo = zero.get_param @out.weight : tensor<5x8xf32>
  %zz = nn.matmul %moe, %wo transpose_rhs : tensor<16x8xf32>, tensor<5x8xf32> -> tensor<16x5xf32>
  %loss = nn.softmax_cross_entropy %zz, %y : tensor<16x5xf32>, tensor<16xi32> -> tensor<f32>
  zero.return %loss : tensor<f32>
}
