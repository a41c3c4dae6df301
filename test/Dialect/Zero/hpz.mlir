// RUN: zero-opt %s -split-input-file | FileCheck %s
// RUN: zero-opt %s -split-input-file --mlir-print-op-generic | zero-opt | FileCheck %s

// ZeRO++ hpZ: the store of the secondary shard, the gathers of the
// secondary shards (all_gather and prefetch) and the partition's secondary
// buffer round-trip.
// CHECK-LABEL: zero.partition @l0
// CHECK-SAME: zero.buffers = #zero.buffer_offsets<params = 0, grads = 64, exp_avg = 128, exp_avg_sq = 192, secondary = 256>
// CHECK-LABEL: zero.train_step @hpz
// CHECK: %[[F:.*]] = zero.all_gather group @l0 : tensor<8xf32>
// CHECK-NEXT: zero.store_secondary %[[F]] group @l0 phase first_micro_step : tensor<8xf32>
// CHECK-NEXT: zero.store_secondary %[[F]] group @l0 : tensor<8xf32>
// CHECK: %{{.*}} = zero.all_gather group @l0 secondary : tensor<8xf32>
// CHECK: %{{.*}}, %{{.*}} = zero.prefetch group @l0 secondary : tensor<8xf32>
zero.param @w : tensor<2x2xf32> init zeros
zero.partition @l0 stage 3 world_size 4 alignment 2 numel 4 padded 8 params [@w] offsets [0] {zero.buffers = #zero.buffer_offsets<params = 0, grads = 64, exp_avg = 128, exp_avg_sq = 192, secondary = 256>}
zero.train_step @hpz(%x: tensor<1x2xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 4, ranks_per_node = 2, mesh = #zero.mesh<[data = 2, hpz = 2]>> {
  %full = zero.all_gather group @l0 : tensor<8xf32>
  zero.store_secondary %full group @l0 phase first_micro_step : tensor<8xf32>
  zero.store_secondary %full group @l0 : tensor<8xf32>
  zero.free %full : tensor<8xf32>
  %again = zero.all_gather group @l0 secondary : tensor<8xf32>
  zero.free %again : tensor<8xf32>
  %ahead, %t = zero.prefetch group @l0 secondary : tensor<8xf32>
  zero.wait %t
  zero.free %ahead : tensor<8xf32>
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}
