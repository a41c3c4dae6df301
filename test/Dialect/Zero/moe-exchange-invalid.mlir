// RUN: zero-opt %s -split-input-file -verify-diagnostics

// What the verifiers of zero.moe_exchange and zero.moe_return reject, one
// per case.

// Checks that the received rows are the dropless bound, P x n.
func.func @wrong_capacity(%rows: tensor<128x32xf32>, %offs: tensor<8xi32>) {
  // expected-error @+1 {{'zero.moe_exchange' op receives 128 rows, but its capacity for 128 dispatch rows is 256}}
  %recv, %counts, %loffs = zero.moe_exchange %rows, %offs layer 0 : tensor<128x32xf32>, tensor<8xi32> -> tensor<128x32xf32>, tensor<2x4xi32>, tensor<4xi32>
  return
}

// -----

// Checks that a capacity factor gives ceil(C x n) rows.
func.func @wrong_factor(%rows: tensor<128x32xf32>, %offs: tensor<8xi32>) {
  // expected-error @+1 {{'zero.moe_exchange' op receives 128 rows, but its capacity for 128 dispatch rows is 160}}
  %recv, %counts, %loffs = zero.moe_exchange %rows, %offs layer 0 capacity 1.25 : tensor<128x32xf32>, tensor<8xi32> -> tensor<128x32xf32>, tensor<2x4xi32>, tensor<4xi32>
  return
}

// -----

// Checks that the counts split the experts over the members.
func.func @counts_not_experts(%rows: tensor<128x32xf32>, %offs: tensor<8xi32>) {
  // expected-error @+1 {{'zero.moe_exchange' op counts 'tensor<2x3xi32>' are not [P, E / P] for 8 experts}}
  %recv, %counts, %loffs = zero.moe_exchange %rows, %offs layer 0 : tensor<128x32xf32>, tensor<8xi32> -> tensor<256x32xf32>, tensor<2x3xi32>, tensor<3xi32>
  return
}

// -----

// Checks that the local offsets are one per local expert.
func.func @local_offsets(%rows: tensor<128x32xf32>, %offs: tensor<8xi32>) {
  // expected-error @+1 {{'zero.moe_exchange' op local offsets 'tensor<8xi32>' are not one per local expert (4)}}
  %recv, %counts, %loffs = zero.moe_exchange %rows, %offs layer 0 : tensor<128x32xf32>, tensor<8xi32> -> tensor<256x32xf32>, tensor<2x4xi32>, tensor<8xi32>
  return
}

// -----

// Checks the received rows' width and element type.
func.func @width(%rows: tensor<128x32xf32>, %offs: tensor<8xi32>) {
  // expected-error @+1 {{'zero.moe_exchange' op dispatch rows 'tensor<128x32xf32>' and received rows 'tensor<256x16xf32>' differ in width or element type}}
  %recv, %counts, %loffs = zero.moe_exchange %rows, %offs layer 0 : tensor<128x32xf32>, tensor<8xi32> -> tensor<256x16xf32>, tensor<2x4xi32>, tensor<4xi32>
  return
}

// -----

// Checks that dropping needs a capacity (the dropless bound never drops).
func.func @drop_without_capacity(%rows: tensor<128x32xf32>, %offs: tensor<8xi32>) {
  // expected-error @+1 {{'zero.moe_exchange' op drops rows past a capacity, but has none}}
  %recv, %counts, %loffs = zero.moe_exchange %rows, %offs layer 0 drop : tensor<128x32xf32>, tensor<8xi32> -> tensor<256x32xf32>, tensor<2x4xi32>, tensor<4xi32>
  return
}

// -----

// Checks that a capacity factor is positive.
func.func @negative_capacity(%rows: tensor<128x32xf32>, %offs: tensor<8xi32>) {
  // expected-error @+1 {{'zero.moe_exchange' op capacity factor must be positive, got -1}}
  %recv, %counts, %loffs = zero.moe_exchange %rows, %offs layer 0 capacity -1.0 : tensor<128x32xf32>, tensor<8xi32> -> tensor<256x32xf32>, tensor<2x4xi32>, tensor<4xi32>
  return
}

// -----

// Checks that the known counts are the forward's: two, of its types.
func.func @known_one(%rows: tensor<128x32xf32>, %offs: tensor<8xi32>, %c: tensor<2x4xi32>) {
  // expected-error @+1 {{'zero.moe_exchange' op known counts must be the counts 'tensor<2x4xi32>' and local offsets 'tensor<4xi32>' of the forward exchange}}
  %recv, %counts, %loffs = zero.moe_exchange %rows, %offs known(%c : tensor<2x4xi32>) layer 0 : tensor<128x32xf32>, tensor<8xi32> -> tensor<256x32xf32>, tensor<2x4xi32>, tensor<4xi32>
  return
}

// -----

// Checks the layer index.
func.func @negative_layer(%rows: tensor<128x32xf32>, %offs: tensor<8xi32>) {
  // expected-error @+1 {{'zero.moe_exchange' op layer must be non-negative, got -2}}
  %recv, %counts, %loffs = zero.moe_exchange %rows, %offs layer -2 : tensor<128x32xf32>, tensor<8xi32> -> tensor<256x32xf32>, tensor<2x4xi32>, tensor<4xi32>
  return
}

// -----

// Checks that inside a scheduled step P is the step's expert_parallel.
zero.train_step @step(%x: tensor<128x32xf32>, %idx: tensor<128x1xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 8, global_batch = 1024, mesh = #zero.mesh<[data = 2, expert = 4]>> {
  %rows, %pos, %offs = nn.moe_dispatch %x[%idx] experts 8 : tensor<128x32xf32>, tensor<128x1xi32> -> tensor<128x32xf32>, tensor<8xi32>
  // expected-error @+1 {{'zero.moe_exchange' op runs over 2 members, but the step's expert_parallel is 4}}
  %recv, %counts, %loffs = zero.moe_exchange %rows, %offs layer 0 : tensor<128x32xf32>, tensor<8xi32> -> tensor<256x32xf32>, tensor<2x4xi32>, tensor<4xi32>
  %l = nn.fill 0.0 : tensor<f32>
  zero.return %l : tensor<f32>
}

// -----

// Checks the return's layout as the exchange's.
func.func @return_width(%recv: tensor<256x32xf32>, %c: tensor<2x4xi32>, %l: tensor<4xi32>, %offs: tensor<8xi32>) {
  // expected-error @+1 {{'zero.moe_return' op dispatch rows 'tensor<128x16xf32>' and received rows 'tensor<256x32xf32>' differ in width or element type}}
  %rows = zero.moe_return %recv, %c, %l, %offs layer 0 : tensor<256x32xf32>, tensor<2x4xi32>, tensor<4xi32>, tensor<8xi32> -> tensor<128x16xf32>
  return
}

// -----

// Checks the return's counts against the experts.
func.func @return_counts(%recv: tensor<256x32xf32>, %c: tensor<4x4xi32>, %l: tensor<4xi32>, %offs: tensor<8xi32>) {
  // expected-error @+1 {{'zero.moe_return' op counts 'tensor<4x4xi32>' are not [P, E / P] for 8 experts}}
  %rows = zero.moe_return %recv, %c, %l, %offs layer 0 : tensor<256x32xf32>, tensor<4x4xi32>, tensor<4xi32>, tensor<8xi32> -> tensor<128x32xf32>
  return
}

// -----

// Checks the schedule: the mesh's axes hold the world.
zero.train_step @bad_ep(%x: tensor<4x2xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    // expected-error @+1 {{mesh #zero.mesh<[data = 2, expert = 3]> has 6 ranks, not world_size 8}}
    schedule #zero.schedule<stage = 0, world_size = 8, global_batch = 8, mesh = #zero.mesh<[data = 2, expert = 3]>> {
  %l = nn.fill 0.0 : tensor<f32>
  zero.return %l : tensor<f32>
}

// -----

// Checks the schedule: expert parallelism without sequence parallelism.
zero.train_step @ep_sp(%x: tensor<4x2xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    // expected-error @+1 {{expert_parallel excludes sequence_parallel}}
    schedule #zero.schedule<stage = 0, world_size = 8, global_batch = 8, mesh = #zero.mesh<[data = 2, sequence = 2, expert = 2]>> {
  %l = nn.fill 0.0 : tensor<f32>
  zero.return %l : tensor<f32>
}

// -----

// Checks the schedule: expert parallelism without MiCS.
zero.train_step @ep_mics(%x: tensor<4x2xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    // expected-error @+1 {{expert_parallel excludes mics_shard_size}}
    schedule #zero.schedule<stage = 3, world_size = 8, global_batch = 8, mesh = #zero.mesh<[data = 2, mics = 2, expert = 2]>> {
  %l = nn.fill 0.0 : tensor<f32>
  zero.return %l : tensor<f32>
}

// -----

// Checks a parameter's share of experts.
// expected-error @+1 {{'zero.param' op expert_parallel must be at least 2 on a tensor of experts (dimension 0), got 1 on 'tensor<4x8x6xf32>'}}
zero.param @experts.down_proj : tensor<4x8x6xf32> init normal std 0.3 expert_parallel 1

// -----

// Checks the schedule: every rank set is one run of the mesh's axes (the
// expert replicas {data, sequence} are not).
zero.train_step @strided_no_ep(%x: tensor<4x2xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    // expected-error @+2 {{the expert_replicas rank set of the mesh is no arithmetic progression of ranks: its axes are not one run}}
    // expected-error @+1 {{failed to parse Zero_ScheduleAttr parameter 'mesh'}}
    schedule #zero.schedule<stage = 0, world_size = 8, global_batch = 8, mesh = #zero.mesh<[data = 2, expert = 2, sequence = 2]>> {
  %l = nn.fill 0.0 : tensor<f32>
  zero.return %l : tensor<f32>
}

// -----

// Checks the schedule: the mesh's axes are the ones built (no tensor
// parallelism yet).
zero.train_step @bad_placement(%x: tensor<4x2xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    // expected-error @+2 {{unknown mesh axis 'tensor'}}
    // expected-error @+1 {{failed to parse Zero_ScheduleAttr parameter 'mesh'}}
    schedule #zero.schedule<stage = 0, world_size = 8, global_batch = 8, mesh = #zero.mesh<[data = 4, tensor = 2]>> {
  %l = nn.fill 0.0 : tensor<f32>
  zero.return %l : tensor<f32>
}

// -----

// Checks that a schedule's expert_parallel names experts split over ranks.
zero.param @w : tensor<2x4xf32> init zeros
// expected-error @+1 {{'zero.train_step' op schedule has expert_parallel 2, but the step has no experts split over ranks}}
zero.train_step @dense(%x: tensor<1x2xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 2, global_batch = 2, mesh = #zero.mesh<[data = 1, expert = 2]>> {
  %l = nn.fill 0.0 : tensor<f32>
  zero.return %l : tensor<f32>
}

// -----

// Checks that the parameters' share of experts is the schedule's.
zero.param @e : tensor<2x4xf32> init zeros expert_parallel 4
// expected-error @+1 {{'zero.train_step' op schedule has expert_parallel 2, but zero.param @e holds experts split over 4 ranks}}
zero.train_step @other(%x: tensor<1x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 4, global_batch = 4, mesh = #zero.mesh<[data = 2, expert = 2]>> {
  %l = nn.fill 0.0 : tensor<f32>
  zero.return %l : tensor<f32>
}
