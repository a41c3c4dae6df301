// RUN: zero-opt %s -split-input-file --zero-pipeline="stage=3 world-size=64 ranks-per-node=8 ep-size=8" --zero-report="format=json hardware=h100-sxm" -o /dev/null > %t.contiguous.json
// RUN: zero-opt %s -split-input-file --zero-pipeline="stage=3 world-size=64 ranks-per-node=8 ep-size=8 ep-placement=strided" --zero-report="format=json hardware=h100-sxm" -o /dev/null > %t.strided.json
// RUN: %python %S/Inputs/placement_bytes.py %t.contiguous.json %t.strided.json | FileCheck %s
// RUN: zero-opt %s -split-input-file --zero-pipeline="stage=3 world-size=64 ranks-per-node=8 ep-size=8 ep-placement=strided" | FileCheck %s --check-prefix=IR

// Where ep 8 on 64 ranks, 8 a node, sends its bytes. The model is a Mixtral
// block of 8 experts (top 2) whose dense layers and router are frozen, so
// the only gradients, and so the only reduce-scatters, are the experts'.
// Contiguous: an expert set is the 8 ranks of a node, so the all-to-alls
// stay within it, and the expert replicas are one rank a node, so their
// reduce-scatters cross nodes. Strided: an expert set is one rank a node
// (all-to-alls across nodes) and the replicas are a node (their
// reduce-scatters within it). Each kind moves the same bytes in both.
// CHECK: contiguous all_to_all: intra > 0, inter 0
// CHECK: strided all_to_all: intra 0, inter = contiguous intra
// CHECK: expert reduce_scatter: contiguous across nodes, strided within
// CHECK: same bytes by kind: True

// IR-LABEL: zero.train_step @train
// IR-SAME: mesh = #zero.mesh<[expert = 8, data = 8]>>
zero.param @in.weight : tensor<8x8xf32> init normal std 0.3 frozen
zero.param @gate.weight : tensor<8x8xf32> init normal std 0.3 frozen
zero.param @experts.gate_up_proj : tensor<8x12x8xf32> init normal std 0.3
zero.param @experts.down_proj : tensor<8x8x6xf32> init normal std 0.3
zero.param @out.weight : tensor<5x8xf32> init normal std 0.3 frozen
zero.train_step @train(%x: tensor<512x8xf32>, %y: tensor<512xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.000000e-02>
    precision #zero.precision<kind = fp32> {
  %wi = zero.get_param @in.weight : tensor<8x8xf32>
  %hs = nn.matmul %x, %wi transpose_rhs : tensor<512x8xf32>, tensor<8x8xf32> -> tensor<512x8xf32>
  %wr = zero.get_param @gate.weight : tensor<8x8xf32>
  %logits = nn.matmul %hs, %wr transpose_rhs : tensor<512x8xf32>, tensor<8x8xf32> -> tensor<512x8xf32>
  %w, %idx = nn.moe_router %logits top_k 2 normalize : tensor<512x8xf32> -> tensor<512x2xf32>, tensor<512x2xi32>
  %rows, %pos, %offs = nn.moe_dispatch %hs[%idx] experts 8 : tensor<512x8xf32>, tensor<512x2xi32> -> tensor<1024x8xf32>, tensor<8xi32>
  %wgu = zero.get_param @experts.gate_up_proj : tensor<8x12x8xf32>
  %gu = nn.grouped_matmul %rows, %wgu, %offs transpose_rhs : tensor<1024x8xf32>, tensor<8x12x8xf32>, tensor<8xi32> -> tensor<1024x12xf32>
  %g, %u = nn.split %gu axis 1 : tensor<1024x12xf32> -> tensor<1024x6xf32>, tensor<1024x6xf32>
  %a = nn.swiglu %g, %u : tensor<1024x6xf32>
  %wd = zero.get_param @experts.down_proj : tensor<8x8x6xf32>
  %h = nn.grouped_matmul %a, %wd, %offs transpose_rhs : tensor<1024x6xf32>, tensor<8x8x6xf32>, tensor<8xi32> -> tensor<1024x8xf32>
  %moe = nn.moe_combine %h[%pos], %w : tensor<1024x8xf32>, tensor<512x2xi32>, tensor<512x2xf32> -> tensor<512x8xf32>
  %wo = zero.get_param @out.weight : tensor<5x8xf32>
  %z = nn.matmul %moe, %wo transpose_rhs : tensor<512x8xf32>, tensor<5x8xf32> -> tensor<512x5xf32>
  %ce = nn.softmax_cross_entropy %z, %y : tensor<512x5xf32>, tensor<512xi32> -> tensor<f32>
  zero.return %ce : tensor<f32>
}
