// The `cpu` preset has no network between nodes: its nodes are groups of
// processes on one machine (the 2 x 2 simulation), so the cross-node level
// of a two-level collective runs over shared memory at the rates of the
// level within the node. At 4 ranks its reduce-scatters move 1.329 GB/s
// and a ring step issued back to back (nothing computed before it) costs
// 0.9638 us. A reduce-scatter of B = 2 MiB:
//   one node:   3 x 0.9638 + 3/4 x B / 1.329e9 = 1186.386 us
//   2 nodes of 2: (0.9638 + 1/2 x B / 1.329e9) + (0.9638 + 1/4 x B /
//   1.329e9) = 1185.422 us: the same bytes in one ring step fewer.
// RUN: zero-opt %s -split-input-file --zero-report=hardware=cpu -o /dev/null | FileCheck %s

// CHECK-LABEL: "exposed_comm_ms": 1.186385{{[0-9]*}},
zero.param @w : tensor<1024x1024xf32> init zeros compute bf16
zero.partition @flat stage 1 world_size 4 alignment 2 numel 1048576 padded 1048576 params [@w] offsets [0]
zero.train_step @one_node(%x: tensor<4x4xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 1, world_size = 4, global_batch = 16> {
  zero.reduce_scatter group @flat in grads [0, 1048576) phase boundary
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// CHECK-LABEL: "exposed_comm_ms": 1.185421{{[0-9]*}},
zero.param @w : tensor<1024x1024xf32> init zeros compute bf16
zero.partition @flat stage 1 world_size 4 alignment 2 numel 1048576 padded 1048576 params [@w] offsets [0]
zero.train_step @two_nodes(%x: tensor<4x4xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 1, world_size = 4, global_batch = 16, ranks_per_node = 2> {
  zero.reduce_scatter group @flat in grads [0, 1048576) phase boundary
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}
