// The cost model across nodes, on the h100-sxm preset: a collective whose
// ranks span several nodes runs in two levels (zero_rt/topology.h), a ring
// within each node at the busbw of the preset's 8-GPU NVLink sweep at 8
// chunks of that ring (latency included) and a ring across the nodes among the ranks of the same local index, at
// the node's InfiniBand bandwidth (0.81 x 8 links x 400 Gb/s = 324 GB/s
// each way) shared by the node's ranks, which all cross at once, and 9.6 us
// a step. The step is cost-model.mlir's first one, a reduce-scatter of
// 2 MiB (B = 2097152 bytes) over 4 ranks, whose compute takes 8.8981 +
// 3.3000 + 4.6995 + 3.8296 + 3.6531 = 24.3803 us; on one node the
// reduce-scatter took 12.2183 us (36.5985 us the step).
// RUN: zero-opt %s -split-input-file --zero-report -o /dev/null | FileCheck %s
// RUN: zero-opt %s -split-input-file --zero-report="inter-node-bandwidth=100" -o /dev/null | FileCheck %s --check-prefix=SLOW
// RUN: zero-opt %s -split-input-file --zero-report="inter-node-bandwidth=400Gb/s" -o /dev/null | FileCheck %s

// 2 nodes of 2 ranks: within the node, chunks of B/2 = 1 MiB, the sweep's
// busbw at 8 MiB (172.13 GB/s): 1/2 x B / 172.13e9 = 6.0918 us; across
// 1 x 9.6 + 1/4 x B / (324e9 / 2) = 12.8363 us; 18.9281 us in all,
// 43.3083 us the step. At 100 Gb/s a link (81 GB/s a node) the cross-node
// level takes 9.6 + 1/4 x B / 40.5e9 = 22.5454 us: 28.6372 us in all,
// 53.0174 us the step.
// CHECK-LABEL: "exposed_comm_ms": 0.018928{{[0-9]*}},
// CHECK: "predicted_step_ms": 0.043308{{[0-9]*}},
// SLOW-LABEL: "exposed_comm_ms": 0.028637{{[0-9]*}},
// SLOW: "predicted_step_ms": 0.053017{{[0-9]*}},
zero.param @w : tensor<1024x1024xf32> init zeros compute bf16
zero.partition @flat stage 2 world_size 4 alignment 2 numel 1048576 padded 1048576 params [@w] offsets [0]
zero.train_step @sync(%x: tensor<256x1024xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 4, global_batch = 1024, ranks_per_node = 2> {
  %w = zero.get_param @w : tensor<1024x1024xbf16>
  %h = nn.matmul %x, %w : tensor<256x1024xbf16>, tensor<1024x1024xbf16> -> tensor<256x1024xbf16>
  %loss = nn.fill 0.0 : tensor<f32>
  %g = nn.matmul %x, %h transpose_lhs : tensor<256x1024xbf16>, tensor<256x1024xbf16> -> tensor<1024x1024xbf16>
  zero.grad @w, %g : tensor<1024x1024xbf16>
  zero.reduce_scatter group @flat [0, 1048576) from %g at [0] : tensor<1024x1024xbf16>
  zero.free %g : tensor<1024x1024xbf16>
  %y = nn.gelu %h : tensor<256x1024xbf16>
  zero.return %loss : tensor<f32>
}

// -----

// 4 nodes of 1 rank: no level within the node; across 3 x 9.6 + 3/4 x B /
// 324e9 = 33.6545 us, more than on 2 nodes; 58.0347 us the step; at 100
// Gb/s a link 3 x 9.6 + 3/4 x B / 81e9 = 48.2181 us.
// CHECK-LABEL: "exposed_comm_ms": 0.033654{{[0-9]*}},
// CHECK: "predicted_step_ms": 0.058034{{[0-9]*}},
// SLOW-LABEL: "exposed_comm_ms": 0.048218{{[0-9]*}},
zero.param @w : tensor<1024x1024xf32> init zeros compute bf16
zero.partition @flat stage 2 world_size 4 alignment 2 numel 1048576 padded 1048576 params [@w] offsets [0]
zero.train_step @sync(%x: tensor<256x1024xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 4, global_batch = 1024, ranks_per_node = 1> {
  %w = zero.get_param @w : tensor<1024x1024xbf16>
  %h = nn.matmul %x, %w : tensor<256x1024xbf16>, tensor<1024x1024xbf16> -> tensor<256x1024xbf16>
  %loss = nn.fill 0.0 : tensor<f32>
  %g = nn.matmul %x, %h transpose_lhs : tensor<256x1024xbf16>, tensor<256x1024xbf16> -> tensor<1024x1024xbf16>
  zero.grad @w, %g : tensor<1024x1024xbf16>
  zero.reduce_scatter group @flat [0, 1048576) from %g at [0] : tensor<1024x1024xbf16>
  zero.free %g : tensor<1024x1024xbf16>
  %y = nn.gelu %h : tensor<256x1024xbf16>
  zero.return %loss : tensor<f32>
}

// -----

// One node (ranks_per_node = 4): the one-level ring, as without a topology.
// CHECK-LABEL: "exposed_comm_ms": 0.012218{{[0-9]*}},
// CHECK: "predicted_step_ms": 0.036598{{[0-9]*}},
// SLOW-LABEL: "exposed_comm_ms": 0.012218{{[0-9]*}},
zero.param @w : tensor<1024x1024xf32> init zeros compute bf16
zero.partition @flat stage 2 world_size 4 alignment 2 numel 1048576 padded 1048576 params [@w] offsets [0]
zero.train_step @sync(%x: tensor<256x1024xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 4, global_batch = 1024, ranks_per_node = 4> {
  %w = zero.get_param @w : tensor<1024x1024xbf16>
  %h = nn.matmul %x, %w : tensor<256x1024xbf16>, tensor<1024x1024xbf16> -> tensor<256x1024xbf16>
  %loss = nn.fill 0.0 : tensor<f32>
  %g = nn.matmul %x, %h transpose_lhs : tensor<256x1024xbf16>, tensor<256x1024xbf16> -> tensor<1024x1024xbf16>
  zero.grad @w, %g : tensor<1024x1024xbf16>
  zero.reduce_scatter group @flat [0, 1048576) from %g at [0] : tensor<1024x1024xbf16>
  zero.free %g : tensor<1024x1024xbf16>
  %y = nn.gelu %h : tensor<256x1024xbf16>
  zero.return %loss : tensor<f32>
}
