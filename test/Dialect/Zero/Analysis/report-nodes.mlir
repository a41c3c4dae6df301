// The report's split of each collective's bytes between the links within a
// node and those between nodes, on 2 nodes of 2 ranks (rank 0 and 1 on node
// 0). Across nodes a collective runs in two levels (zero_rt/topology.h):
// rank 0 sends the parts of the other member of its node within the node,
// and across nodes the part of rank 2, the member of its local index, but
// its own; the sum is the one-level ring's. In bf16, 2 bytes an element.
// RUN: zero-opt %s -split-input-file --zero-report -o /dev/null | FileCheck %s
// RUN: zero-opt %s -split-input-file --zero-report=format=text -o /dev/null | FileCheck %s --check-prefix=TEXT

// Stage 0: an all-reduce of 1048576 elements in parts of 262144, twice (a
// reduce-scatter, then an all-gather): within the node 2 x (1048576 -
// 524288) elements, across 2 x (524288 - 262144).
// CHECK-LABEL: "bytes_by_kind": {
// CHECK-NEXT:    "all_reduce": {
// CHECK-NEXT:      "inter_node": 1048576,
// CHECK-NEXT:      "intra_node": 2097152
// CHECK:       "bytes_per_rank": 3145728,
// CHECK:       "inter_node_bytes_per_rank": 1048576,
// CHECK-NEXT:  "intra_node_bytes_per_rank": 2097152,
// CHECK:       "ranks_per_node": 2,
// TEXT-LABEL: ZeRO stage 0 on 4 ranks
// TEXT:       3145728 bytes sent by rank 0 per step
// TEXT-NEXT:    2097152 bytes within its node, 1048576 across nodes (2 nodes of 2 ranks)
// TEXT-NEXT:    all_reduce: 1 (2097152 bytes within the node, 1048576 across)
zero.param @w : tensor<1024x1024xf32> init zeros compute bf16
zero.partition @flat stage 0 world_size 4 alignment 2 numel 1048576 padded 1048576 params [@w] offsets [0]
zero.train_step @stage0(%x: tensor<4x4xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 0, world_size = 4, global_batch = 16, ranks_per_node = 2> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.all_reduce sum group @flat in grads [0, 1048576) phase boundary
  zero.return %loss : tensor<f32>
}

// -----

// Stage 1, buckets that split unevenly over the owners (shards of 262144):
// [0, 300000) has parts 262144, 37856, 0, 0: rank 0 sends 37856 elements
// within the node and nothing across (rank 2 owns none of it); [300000,
// 800000) has parts 0, 224288, 262144, 13568: 224288 + 13568 within, 262144
// across.
// CHECK-LABEL: "bytes_by_kind": {
// CHECK-NEXT:    "reduce_scatter": {
// CHECK-NEXT:      "inter_node": 524288,
// CHECK-NEXT:      "intra_node": 551424
// CHECK:       "bytes_per_rank": 1075712,
// CHECK:       "inter_node_bytes_per_rank": 524288,
// CHECK-NEXT:  "intra_node_bytes_per_rank": 551424,
// TEXT-LABEL: ZeRO stage 1 on 4 ranks
// TEXT:       1075712 bytes sent by rank 0 per step
// TEXT-NEXT:    551424 bytes within its node, 524288 across nodes (2 nodes of 2 ranks)
// TEXT-NEXT:    reduce_scatter: 2 (551424 bytes within the node, 524288 across)
zero.param @w : tensor<1024x1024xf32> init zeros compute bf16
zero.partition @flat stage 1 world_size 4 alignment 2 numel 1048576 padded 1048576 params [@w] offsets [0]
zero.train_step @stage1(%x: tensor<4x4xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 1, world_size = 4, global_batch = 16, ranks_per_node = 2> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.reduce_scatter group @flat in grads [0, 300000) phase boundary
  zero.reduce_scatter group @flat in grads [300000, 800000) phase boundary
  zero.return %loss : tensor<f32>
}

// -----

// Stage 2, a bucket reduced to each owner and one reduce-scattered, each
// of uneven parts: [200000, 300000) has parts 62144, 37856, 0, 0 (all of
// the sends within the node), [600000, 1048576) has parts 0, 0, 186432,
// 262144: 262144 within, 186432 across.
// CHECK-LABEL: "bytes_by_kind": {
// CHECK-NEXT:    "reduce": {
// CHECK-NEXT:      "inter_node": 0,
// CHECK-NEXT:      "intra_node": 75712
// CHECK-NEXT:    },
// CHECK-NEXT:    "reduce_scatter": {
// CHECK-NEXT:      "inter_node": 372864,
// CHECK-NEXT:      "intra_node": 524288
// CHECK:       "bytes_per_rank": 972864,
// TEXT-LABEL: ZeRO stage 2 on 4 ranks
// TEXT:         reduce: 1 (75712 bytes within the node, 0 across)
// TEXT-NEXT:    reduce_scatter: 1 (524288 bytes within the node, 372864 across)
zero.param @w : tensor<1024x1024xf32> init zeros compute bf16
zero.partition @flat stage 2 world_size 4 alignment 2 numel 1048576 padded 1048576 params [@w] offsets [0]
zero.train_step @stage2(%x: tensor<4x4xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 4, global_batch = 16, ranks_per_node = 2> {
  %w = zero.get_param @w : tensor<1024x1024xbf16>
  %g = nn.fill 0.0 : tensor<1024x1024xbf16>
  %loss = nn.fill 0.0 : tensor<f32>
  zero.grad @w, %g : tensor<1024x1024xbf16>
  zero.reduce group @flat [200000, 300000) from %g at [0] : tensor<1024x1024xbf16>
  zero.reduce_scatter group @flat [600000, 1048576) from %g at [0] : tensor<1024x1024xbf16>
  zero.free %g : tensor<1024x1024xbf16>
  zero.return %loss : tensor<f32>
}

// -----

// Stage 3: the gather of a whole group of 999 elements, padded to 1000, in
// shards of 250 (500 within the node, 250 across), and the reduce-scatter
// of its gradients' 999 elements, parts 250, 250, 250, 249 (499 within, 250
// across).
// CHECK-LABEL: "bytes_by_kind": {
// CHECK-NEXT:    "all_gather": {
// CHECK-NEXT:      "inter_node": 500,
// CHECK-NEXT:      "intra_node": 1000
// CHECK-NEXT:    },
// CHECK-NEXT:    "reduce_scatter": {
// CHECK-NEXT:      "inter_node": 500,
// CHECK-NEXT:      "intra_node": 998
// CHECK:       "bytes_per_rank": 2998,
// CHECK:       "inter_node_bytes_per_rank": 1000,
// CHECK-NEXT:  "intra_node_bytes_per_rank": 1998,
// TEXT-LABEL: ZeRO stage 3 on 4 ranks
// TEXT:       2998 bytes sent by rank 0 per step
// TEXT-NEXT:    1998 bytes within its node, 1000 across nodes (2 nodes of 2 ranks)
zero.param @w : tensor<27x37xf32> init zeros compute bf16
zero.partition @l0 stage 3 world_size 4 alignment 2 numel 999 padded 1000 params [@w] offsets [0]
zero.train_step @stage3(%x: tensor<4x4xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 16, ranks_per_node = 2> {
  %full = zero.all_gather group @l0 : tensor<1000xbf16>
  %w = zero.get_param @w from %full : tensor<1000xbf16> -> tensor<27x37xbf16>
  %g = nn.fill 0.0 : tensor<27x37xbf16>
  %loss = nn.fill 0.0 : tensor<f32>
  zero.grad @w, %g : tensor<27x37xbf16>
  zero.reduce_scatter group @l0 [0, 999) from %g at [0] : tensor<27x37xbf16>
  zero.free %g : tensor<27x37xbf16>
  zero.free %full : tensor<1000xbf16>
  zero.return %loss : tensor<f32>
}

// -----

// One node (ranks_per_node equal to the world size, as the default 0): the
// same keys, every byte staying within the node.
// CHECK-LABEL: "comm": {
// CHECK-NEXT:    "bytes_by_kind": {
// CHECK-NEXT:      "all_reduce": {
// CHECK-NEXT:        "inter_node": 0,
// CHECK-NEXT:        "intra_node": 3145728
// CHECK-NEXT:      }
// CHECK-NEXT:    },
// CHECK-NEXT:    "bytes_per_rank": 3145728,
// CHECK:         "inter_node_bytes_per_rank": 0,
// CHECK-NEXT:    "intra_node_bytes_per_rank": 3145728,
// CHECK:       "ranks_per_node": 4,
// CHECK:       "world_size": 4
// TEXT-LABEL: ZeRO stage 0 on 4 ranks
// TEXT:       3145728 bytes sent by rank 0 per step
// TEXT-NEXT:    all_reduce: 1
// TEXT-EMPTY:
zero.param @w : tensor<1024x1024xf32> init zeros compute bf16
zero.partition @flat stage 0 world_size 4 alignment 2 numel 1048576 padded 1048576 params [@w] offsets [0]
zero.train_step @one_node(%x: tensor<4x4xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 0, world_size = 4, global_batch = 16, ranks_per_node = 4> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.all_reduce sum group @flat in grads [0, 1048576) phase boundary
  zero.return %loss : tensor<f32>
}
