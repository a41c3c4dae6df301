// RUN: zero-opt %s -split-input-file | zero-opt -split-input-file | FileCheck %s
// RUN: zero-opt %s -split-input-file --mlir-print-op-generic | zero-opt -split-input-file | FileCheck %s

// zero.all_to_all round-trips: Ulysses' sequence shards to head shards and
// back (asynchronous, with its token), on P = 2 implied by the shapes.

// CHECK-LABEL: func.func @ulysses
// CHECK: %[[H:.*]] = zero.all_to_all %{{.*}} split 2 concat 1 over world : tensor<1x8x4x16xbf16> -> tensor<1x16x2x16xbf16>
// CHECK: %{{.*}}, %[[T:.*]] = zero.all_to_all %[[H]] split 1 concat 2 over world : tensor<1x16x2x16xbf16> -> tensor<1x8x4x16xbf16>, !zero.token
// CHECK: zero.wait %[[T]]
func.func @ulysses(%x: tensor<1x8x4x16xbf16>) -> tensor<1x8x4x16xbf16> {
  %h = zero.all_to_all %x split 2 concat 1 over world : tensor<1x8x4x16xbf16> -> tensor<1x16x2x16xbf16>
  %s, %t = zero.all_to_all %h split 1 concat 2 over world : tensor<1x16x2x16xbf16> -> tensor<1x8x4x16xbf16>, !zero.token
  zero.wait %t
  return %s : tensor<1x8x4x16xbf16>
}

// -----

// Inside a scheduled step P is its world size (4): the split and the concat
// dimension may be the same (the chunks are permuted, the shape stays).

// CHECK-LABEL: zero.train_step @step
// CHECK: zero.all_to_all %{{.*}} split 0 concat 0 over world : tensor<8x3xf32> -> tensor<8x3xf32>
// CHECK: zero.all_to_all %{{.*}} split 1 concat 0 over world : tensor<8x4xf32> -> tensor<32x1xf32>
zero.train_step @step(%x: tensor<8x3xf32>, %y: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 4, global_batch = 32> {
  %a = zero.all_to_all %x split 0 concat 0 over world : tensor<8x3xf32> -> tensor<8x3xf32>
  %b = zero.all_to_all %y split 1 concat 0 over world : tensor<8x4xf32> -> tensor<32x1xf32>
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Over the sequence-parallel group P is the step's sequence_parallel (2),
// not its world size (4): DP 2 x SP 2.

// CHECK-LABEL: zero.train_step @sequence
// CHECK: zero.all_to_all %{{.*}} split 1 concat 0 over sequence : tensor<8x4xf32> -> tensor<16x2xf32>
zero.train_step @sequence(%y: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 4, global_batch = 16, mesh = #zero.mesh<[data = 2, sequence = 2]>> {
  %b = zero.all_to_all %y split 1 concat 0 over sequence : tensor<8x4xf32> -> tensor<16x2xf32>
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}
