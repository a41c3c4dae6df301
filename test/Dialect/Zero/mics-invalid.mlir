// RUN: zero-opt %s -split-input-file -verify-diagnostics

// Checks that the replica form sums the grads buffer in place, not a value.
zero.param @a : tensor<10x10xbf16> init zeros
zero.partition @s3 stage 3 world_size 2 alignment 2 numel 100 padded 100 params [@a] offsets [0]
func.func @f(%stats: tensor<2xf32>) {
  // expected-error @+1 {{'zero.all_reduce' op sums gradients over the MiCS replicas in place: it needs a 'grads' range, not an input}}
  %r = zero.all_reduce overflow_norm %stats group @s3 over replicas : tensor<2xf32> -> tensor<2xf32>
  return
}

// -----

// Checks that the replica form is stage 3 only.
zero.param @a : tensor<10x10xbf16> init zeros
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 100 padded 100 params [@a] offsets [0]
func.func @f() {
  // expected-error @+1 {{'zero.all_reduce' op sums gradient shards over the MiCS replicas only at stage 3, @s0 is stage 0}}
  zero.all_reduce sum group @s0 in grads [0, 100) over replicas
  return
}

// -----

// Checks that a stage-3 gradient shard is all-reduced in place only over
// the replicas.
zero.param @a : tensor<10x10xbf16> init zeros
zero.partition @s3 stage 3 world_size 2 alignment 2 numel 100 padded 100 params [@a] offsets [0]
func.func @f() {
  // expected-error @+1 {{'zero.all_reduce' op all-reduces the 'grads' buffer in place only at stage 0, @s3 is stage 3}}
  zero.all_reduce sum group @s3 in grads [0, 100)
  return
}

// -----

// Checks that the replica sum stays within the layout.
zero.param @a : tensor<10x10xbf16> init zeros
zero.partition @s3 stage 3 world_size 2 alignment 2 numel 100 padded 100 params [@a] offsets [0]
func.func @f() {
  // expected-error @+1 {{'zero.all_reduce' op range [0, 101) is empty or outside the 100 elements of partition @s3}}
  zero.all_reduce sum group @s3 in grads [0, 101) over replicas
  return
}

// -----

// Checks that under MiCS each partition is laid out over one shard group.
zero.param @a : tensor<10x10xbf16> init zeros
zero.partition @s3 stage 3 world_size 4 alignment 2 numel 100 padded 104 params [@a] offsets [0]
// expected-error @+1 {{'zero.train_step' op schedule has stage 3 and world size 4 (MiCS shard groups of 2), but zero.partition @s3 has stage 3 and world size 4}}
zero.train_step @mics(%x: tensor<2x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 8, mesh = #zero.mesh<[data = 2, mics = 2]>> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that MiCS excludes offload, as DeepSpeed's does.
zero.param @a : tensor<10x10xbf16> init zeros
zero.partition @s3 stage 3 world_size 2 alignment 2 numel 100 padded 100 params [@a] offsets [0]
// expected-error @+1 {{'zero.train_step' op MiCS (mics_shard_size 2) does not support optimizer or parameter offload}}
zero.train_step @mics(%x: tensor<2x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 8, mesh = #zero.mesh<[data = 2, mics = 2]>>
    offload #zero.offload<optimizer = cpu> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}
