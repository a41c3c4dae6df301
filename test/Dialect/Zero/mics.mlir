// RUN: zero-opt %s -split-input-file | zero-opt -split-input-file | FileCheck %s
// RUN: zero-opt %s -split-input-file --mlir-print-op-generic | zero-opt -split-input-file | FileCheck %s

// The MiCS replica form of zero.all_reduce round-trips; the shard groups are
// recorded in the schedule, and each partition is laid out over one group.
zero.param @a : tensor<10x10xbf16> init zeros
zero.partition @s3 stage 3 world_size 2 alignment 2 numel 100 padded 100 params [@a] offsets [0]
// CHECK-LABEL: zero.train_step @mics
// CHECK-SAME: schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 8, mesh = #zero.mesh<[data = 2, mics = 2]>>
// CHECK: %[[T:.*]] = zero.all_reduce sum group @s3 in grads [0, 100) over replicas phase boundary token !zero.token
// CHECK: zero.all_reduce sum group @s3 in grads [0, 50) over replicas phase boundary
// CHECK-NOT: token
// CHECK: zero.wait %[[T]] phase boundary
zero.train_step @mics(%x: tensor<2x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 8, mesh = #zero.mesh<[data = 2, mics = 2]>> {
  %t = zero.all_reduce sum group @s3 in grads [0, 100) over replicas phase boundary token !zero.token
  zero.all_reduce sum group @s3 in grads [0, 50) over replicas phase boundary
  zero.wait %t phase boundary
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}
