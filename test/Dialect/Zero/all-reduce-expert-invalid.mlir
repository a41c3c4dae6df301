// RUN: zero-opt %s -split-input-file -verify-diagnostics

// The zero.all_reduce rank set `across expert` and zero.check_overflow's
// `combine`, each rule broken once.

// Checks that only the expert set is named.
zero.param @e.w : tensor<8xf32> init zeros
zero.partition @e stage 0 world_size 1 alignment 1 numel 8 padded 8 params [@e.w] offsets [0] expert
func.func @f(%stats: tensor<2xf32>) {
  // expected-error @+1 {{'zero.all_reduce' op names only the 'expert' rank set (the expert partitions' statistics), not 'world'}}
  %0 = zero.all_reduce overflow_norm %stats group @e across world : tensor<2xf32> -> tensor<2xf32>
  return
}

// -----

// Checks that the expert set reduces the overflow_norm value form only.
zero.param @e.w : tensor<8xf32> init zeros
zero.partition @e stage 0 world_size 1 alignment 1 numel 8 padded 8 params [@e.w] offsets [0] expert
func.func @f() {
  // expected-error @+1 {{'zero.all_reduce' op reduces over the expert-parallel set only the 'overflow_norm' value form (the expert partitions' statistics)}}
  zero.all_reduce sum group @e in grads [0, 8) across expert
  return
}

// -----

// Checks that the expert set needs expert parallelism (a step without it
// holds no expert partition, so the group is a dense one).
zero.param @d.w : tensor<8xf32> init zeros
zero.partition @d stage 0 world_size 2 alignment 1 numel 8 padded 8 params [@d.w] offsets [0]
zero.train_step @s(%x: tensor<2x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 2, global_batch = 4> {
  %loss = nn.fill 0.0 : tensor<f32>
  %stats = nn.fill 0.0 : tensor<2xf32>
  // expected-error @+1 {{'zero.all_reduce' op reduces over the expert-parallel set, but the schedule's expert_parallel is 1}}
  %0 = zero.all_reduce overflow_norm %stats group @d across expert : tensor<2xf32> -> tensor<2xf32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that the expert set reduces an expert partition's statistics.
zero.param @d.w : tensor<8xf32> init zeros
zero.partition @d stage 0 world_size 2 alignment 1 numel 8 padded 8 params [@d.w] offsets [0]
func.func @f(%stats: tensor<2xf32>) {
  // expected-error @+1 {{'zero.all_reduce' op reduces over the expert-parallel set the statistics of an expert partition, but @d is not one}}
  %0 = zero.all_reduce overflow_norm %stats group @d across expert : tensor<2xf32> -> tensor<2xf32>
  return
}

// -----

// Checks that the expert set is for stage 0 only (at stages 1-3 the stats
// of shards are summed over the group).
zero.param @e.w : tensor<8xf32> init zeros
zero.partition @e stage 1 world_size 2 alignment 2 numel 8 padded 8 params [@e.w] offsets [0] expert
func.func @f(%stats: tensor<2xf32>) {
  // expected-error @+1 {{'zero.all_reduce' op reduces the expert statistics over the expert-parallel set only at stage 0 (each rank holds its experts whole), @e is stage 1}}
  %0 = zero.all_reduce overflow_norm %stats group @e across expert : tensor<2xf32> -> tensor<2xf32>
  return
}

// -----

// Checks that combined statistics have the result's type.
zero.param @d.w : tensor<8xf32> init zeros
zero.partition @d stage 0 world_size 2 alignment 1 numel 8 padded 8 params [@d.w] offsets [0]
func.func @f(%scale: tensor<f32>, %partial: tensor<3xf32>) {
  // expected-error @+1 {{'zero.check_overflow' op combines statistics of type 'tensor<3xf32>' into a result of type 'tensor<2xf32>': they must be equal}}
  %0 = "zero.check_overflow"(%scale, %partial) <{groups = [@d], divisor = 2.0 : f64}> : (tensor<f32>, tensor<3xf32>) -> tensor<2xf32>
  return
}
