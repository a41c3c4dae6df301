// RUN: zero-opt %s -split-input-file -verify-diagnostics

// What zero.all_to_all's verifier rejects, one per case.

// Checks that the split dimension is one of the tensor's.
func.func @split_out_of_range(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'zero.all_to_all' op split_dim 2 is not a dimension of a rank-2 tensor}}
  %r = zero.all_to_all %x split 2 concat 0 over world : tensor<4x8xf32> -> tensor<8x4xf32>
  return
}

// -----

// Checks that the concat dimension is one of the tensor's.
func.func @concat_out_of_range(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'zero.all_to_all' op concat_dim -1 is not a dimension of a rank-2 tensor}}
  %r = zero.all_to_all %x split 1 concat -1 over world : tensor<4x8xf32> -> tensor<8x4xf32>
  return
}

// -----

// Checks that the element types are equal.
func.func @element_type(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'zero.all_to_all' op result element type 'bf16' differs from the input's 'f32'}}
  %r = zero.all_to_all %x split 1 concat 0 over world : tensor<4x8xf32> -> tensor<8x4xbf16>
  return
}

// -----

// Checks that the result shape is the input's with the split dimension
// divided and the concat dimension multiplied by P (here 2, from dim 0).
func.func @result_shape(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'zero.all_to_all' op result type 'tensor<8x2xf32>' is not the input's shape with dimension 1 divided and dimension 0 multiplied by 2 members}}
  %r = zero.all_to_all %x split 1 concat 0 over world : tensor<4x8xf32> -> tensor<8x2xf32>
  return
}

// -----

// Checks that the concat dimension grows by a whole factor.
func.func @concat_factor(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'zero.all_to_all' op result concat dimension 6 is not a multiple of the input's 4}}
  %r = zero.all_to_all %x split 1 concat 0 over world : tensor<4x8xf32> -> tensor<6x4xf32>
  return
}

// -----

// Checks that the split dimension divides by the step's world size (3).
zero.train_step @divisible(%x: tensor<4x8xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 3, global_batch = 12> {
  // expected-error @+1 {{'zero.all_to_all' op split dimension 1 of extent 8 does not divide by the rank set's 3 members}}
  %r = zero.all_to_all %x split 1 concat 0 over world : tensor<4x8xf32> -> tensor<12x2xf32>
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks the result shape against the step's world size (4), not the
// factor the shapes would imply (2).
zero.train_step @world(%x: tensor<4x8xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 4, global_batch = 16> {
  // expected-error @+1 {{'zero.all_to_all' op result type 'tensor<8x4xf32>' is not the input's shape with dimension 1 divided and dimension 0 multiplied by 4 members}}
  %r = zero.all_to_all %x split 1 concat 0 over world : tensor<4x8xf32> -> tensor<8x4xf32>
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Checks that it runs over the world or the sequence-parallel group.
func.func @rank_set(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'zero.all_to_all' op runs over the world or the sequence-parallel group, not group}}
  %r = zero.all_to_all %x split 1 concat 0 over group : tensor<4x8xf32> -> tensor<8x4xf32>
  return
}

// -----

// Checks the result shape of one over the sequence-parallel group against
// the step's sequence_parallel (2), not its world size (4): DP 2 x SP 2.
zero.train_step @sequence(%x: tensor<4x8xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 4, global_batch = 8, mesh = #zero.mesh<[data = 2, sequence = 2]>> {
  // expected-error @+1 {{'zero.all_to_all' op result type 'tensor<16x2xf32>' is not the input's shape with dimension 1 divided and dimension 0 multiplied by 2 members}}
  %r = zero.all_to_all %x split 1 concat 0 over sequence : tensor<4x8xf32> -> tensor<16x2xf32>
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}
