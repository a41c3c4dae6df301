// RUN: zero-opt %s -split-input-file | zero-opt -split-input-file | FileCheck %s
// RUN: zero-opt %s -split-input-file --mlir-print-op-generic | zero-opt -split-input-file | FileCheck %s

// Model structure: parameters with each initializer, a train step with its
// optimizer, precision and clipping attributes, parameter uses and gradients.

// CHECK: zero.param @w : tensor<4x3xf32> init normal std 2.000000e-02
// CHECK: zero.param @b : tensor<3xf32> init zeros
// CHECK: zero.param @g : tensor<3xf32> init ones compute bf16
// CHECK: zero.param @f : tensor<3xf32> init ones weight_decay 0.000000e+00 compute bf16 frozen
zero.param @w : tensor<4x3xf32> init normal std 0.02
zero.param @b : tensor<3xf32> init zeros
zero.param @g : tensor<3xf32> init ones compute bf16
zero.param @f : tensor<3xf32> init ones weight_decay 0.0 compute bf16 frozen

// CHECK-LABEL: zero.train_step @train(
// CHECK-SAME: %{{.*}}: tensor<8x4xf32>, %{{.*}}: tensor<8xi64>)
// CHECK-SAME: optimizer #zero.optimizer<kind = adamw, lr = 6.000000e-04, beta2 = 0.9499{{[0-9]*}}, weight_decay = 1.000000e-01>
// CHECK-SAME: precision #zero.precision<kind = fp16, initial_scale_power = 12, hysteresis = 1>
// CHECK-SAME: gradient_clipping 1.000000e+00
zero.train_step @train(%x: tensor<8x4xf32>, %y: tensor<8xi64>)
    optimizer #zero.optimizer<kind = adamw, lr = 6.0e-4, beta1 = 0.9, beta2 = 0.95, weight_decay = 0.1>
    precision #zero.precision<kind = fp16, initial_scale_power = 12, hysteresis = 1>
    gradient_clipping 1.0 {
  // CHECK: zero.get_param @w : tensor<4x3xf32>
  %w = zero.get_param @w : tensor<4x3xf32>
  %b = zero.get_param @b : tensor<3xf32>
  %h = nn.matmul %x, %w : tensor<8x4xf32>, tensor<4x3xf32> -> tensor<8x3xf32>
  %z = nn.add %h, %b : tensor<8x3xf32>, tensor<3xf32>
  %loss = nn.softmax_cross_entropy %z, %y : tensor<8x3xf32>, tensor<8xi64> -> tensor<f32>
  // CHECK: zero.loss_scale : tensor<f32>
  %s = zero.loss_scale : tensor<f32>
  %dz = nn.softmax_cross_entropy_grad %z, %y, %s : tensor<8x3xf32>, tensor<8xi64>, tensor<f32>
  %db = nn.reduce_sum %dz : tensor<8x3xf32> -> tensor<3xf32>
  // CHECK: zero.grad @b, %{{.*}} : tensor<3xf32>
  zero.grad @b, %db : tensor<3xf32>
  %dw = nn.matmul %x, %dz transpose_lhs : tensor<8x4xf32>, tensor<8x3xf32> -> tensor<4x3xf32>
  zero.grad @w, %dw : tensor<4x3xf32>
  // CHECK: zero.return %{{.*}} : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// In-place gradient reduction and parameter gather of stage 1.

zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones

// CHECK: zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @s1 stage 1 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]

// CHECK-LABEL: zero.train_step @stage1
// CHECK-SAME: schedule #zero.schedule<stage = 1, world_size = 4, global_batch = 32, accumulation_steps = 2>
zero.train_step @stage1(%x: tensor<4x1xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 1, world_size = 4, global_batch = 32, accumulation_steps = 2> {
  // CHECK: zero.reduce_scatter group @s1 in grads [0, 121) phase boundary
  zero.reduce_scatter group @s1 in grads [0, 121) phase boundary
  // CHECK: %[[T:.*]] = zero.all_gather group @s1 in params [0, 121) phase post_step -> !zero.token
  %t2 = zero.all_gather group @s1 in params [0, 121) phase post_step -> !zero.token
  // CHECK: zero.wait %[[T]] phase post_step
  zero.wait %t2 phase post_step
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// SGD round-trips with torch.optim.SGD's parameters; the betas, eps and
// bias_correction it does not read stay at their defaults.
// CHECK-LABEL: zero.train_step @sgd
// CHECK-SAME: optimizer #zero.optimizer<kind = sgd, lr = 1.000000e-02, weight_decay = {{[^,]+}}, momentum = 9.000000e-01, nesterov = true>
zero.train_step @sgd(%x: tensor<4x1xf32>)
    optimizer #zero.optimizer<kind = sgd, lr = 1.0e-2, weight_decay = 1.0e-4, momentum = 0.9, nesterov = true>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Muon round-trips with its own parameters beside the AdamW half's; those
// at torch's defaults (muon_momentum 0.95, ns_a/b/c, ns_eps) are not
// printed, and SGD's momentum and nesterov stay at theirs.
// CHECK-LABEL: zero.train_step @muon
// CHECK-SAME: optimizer #zero.optimizer<kind = muon, lr = 3.000000e-04, beta2 = 0.9499{{[0-9]*}}, weight_decay = 1.000000e-01, muon_lr = 2.000000e-02, muon_nesterov = false, ns_steps = 3, adjust_lr_fn = match_rms_adamw>
zero.train_step @muon(%x: tensor<4x1xf32>)
    optimizer #zero.optimizer<kind = muon, lr = 3.0e-4, beta2 = 0.95, weight_decay = 0.1, muon_lr = 2.0e-2, muon_momentum = 0.95, muon_nesterov = false, ns_steps = 3, ns_a = 3.4445, adjust_lr_fn = match_rms_adamw>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Adafactor round-trips with torch.optim.Adafactor's keywords; those at
// torch's defaults (beta2_decay -0.8, eps1 None as -1, eps2 1e-3, d 1,
// maximize false) are not printed.
// CHECK-LABEL: zero.train_step @adafactor
// CHECK-SAME: optimizer #zero.optimizer<kind = adafactor, lr = 1.000000e-02, weight_decay = 1.000000e-02, beta2_decay = -5.000000e-01, eps1 = 1.000000e-30, d = 2.000000e+00, maximize = true>
zero.train_step @adafactor(%x: tensor<4x1xf32>)
    optimizer #zero.optimizer<kind = adafactor, lr = 1.0e-2, weight_decay = 1.0e-2, beta2_decay = -0.5, eps1 = 1.0e-30, eps2 = 1.0e-3, d = 2.0, maximize = true>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// 8-bit AdamW states (optimizers.def's ZRT_OPTIMIZER_PRECISION) round-trip;
// f32, the default, is not printed.
// CHECK-LABEL: zero.train_step @adamw_int8
// CHECK-SAME: optimizer #zero.optimizer<kind = adamw, lr = 1.000000e-03, states = int8>
zero.train_step @adamw_int8(%x: tensor<4x1xf32>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-3, states = int8>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// bf16 Adam states (DeepSpeed's bf16_optimizer_states) round-trip too.
// CHECK-LABEL: zero.train_step @adam_bf16
// CHECK-SAME: optimizer #zero.optimizer<kind = adam, lr = 1.000000e-03, states = bf16>
zero.train_step @adam_bf16(%x: tensor<4x1xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3, states = bf16>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// bf16 masters (DeepSpeed's bf16_master_weights_and_grads) round-trip, with
// the states they pair with.
// CHECK-LABEL: zero.train_step @adamw_bf16_masters
// CHECK-SAME: optimizer #zero.optimizer<kind = adamw, lr = 1.000000e-03, states = bf16, bf16_masters = true>
zero.train_step @adamw_bf16_masters(%x: tensor<4x1xf32>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-3, states = bf16, bf16_masters = true>
    precision #zero.precision<kind = bf16> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// CHECK-LABEL: zero.train_step @adam_f32
// CHECK-SAME: optimizer #zero.optimizer<kind = adam, lr = 1.000000e-03>
zero.train_step @adam_f32(%x: tensor<4x1xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3, states = f32>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Lion round-trips with the parameters optimizers.def gives it; its eps
// and bias_correction stay at their defaults, which the printer omits.
// CHECK-LABEL: zero.train_step @lion
// CHECK-SAME: optimizer #zero.optimizer<kind = lion, lr = 1.000000e-04, beta2 = 0.98999{{[0-9]*}}, weight_decay = 1.000000e-02>
zero.train_step @lion(%x: tensor<4x1xf32>)
    optimizer #zero.optimizer<kind = lion, lr = 1.0e-4, beta1 = 0.9, beta2 = 0.99, weight_decay = 0.01>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// A frozen partition, with its one buffer.

zero.param @e : tensor<10x10xf32> init ones frozen

// CHECK: zero.partition @frozen stage 3 world_size 4 alignment 2 numel 100 padded 104 params [@e] offsets [0] frozen {zero.buffers = #zero.buffer_offsets<params = 0>}
zero.partition @frozen stage 3 world_size 4 alignment 2 numel 100 padded 104 params [@e] offsets [0] frozen {zero.buffers = #zero.buffer_offsets<params = 0>}

// -----

// The in-place all-reduce of stage 0 (alignment 1: nothing is sharded).

zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones

// CHECK: zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]
zero.partition @s0 stage 0 world_size 4 alignment 1 numel 121 padded 121 params [@a, @c] offsets [0, 100]

// CHECK-LABEL: zero.train_step @stage0
zero.train_step @stage0(%x: tensor<4x1xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 0, world_size = 4, global_batch = 16> {
  // CHECK: zero.all_reduce sum group @s0 in grads [0, 121) token !zero.token
  %t0 = zero.all_reduce sum group @s0 in grads [0, 121) token !zero.token
  zero.wait %t0
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Schedule ops of stage 2 on one flat partition.

zero.param @a : tensor<10x10xbf16> init zeros
zero.param @c : tensor<21xbf16> init ones

// CHECK: zero.partition @flat stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]
zero.partition @flat stage 2 world_size 4 alignment 2 numel 121 padded 128 params [@a, @c] offsets [0, 100]

zero.train_step @sched(%x: tensor<4x1xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 4, global_batch = 16> {
  %ga = nn.fill 1.0 : tensor<10x10xbf16>
  %gc = nn.fill 1.0 : tensor<21xbf16>
  // CHECK: %[[T:.*]] = zero.reduce_scatter group @flat [21, 121) from %{{.*}}, %{{.*}} at [0, 0] : tensor<21xbf16>, tensor<10x10xbf16> -> !zero.token
  %t = zero.reduce_scatter group @flat [21, 121) from %gc, %ga at [0, 0] : tensor<21xbf16>, tensor<10x10xbf16> -> !zero.token
  // CHECK: zero.wait %[[T]]
  zero.wait %t
  // CHECK: zero.free %{{.*}}[0, 50] : tensor<10x10xbf16>
  zero.free %ga[0, 50] : tensor<10x10xbf16>
  // CHECK: zero.free %{{.*}} : tensor<21xbf16>
  zero.free %gc : tensor<21xbf16>
  // CHECK: zero.reduce group @flat [0, 21) from %{{.*}} at [50] : tensor<10x10xbf16>
  zero.reduce group @flat [0, 21) from %ga at [50] : tensor<10x10xbf16>
  %s = zero.loss_scale : tensor<f32>
  // CHECK: zero.check_overflow groups [@flat] scale %{{.*}} divisor 4.000000e+00 : tensor<2xf32>
  %stats = zero.check_overflow groups [@flat] scale %s divisor 4.0 : tensor<2xf32>
  // CHECK: zero.all_reduce overflow_norm %{{.*}} group @flat : tensor<2xf32> -> tensor<2xf32>
  %gstats = zero.all_reduce overflow_norm %stats group @flat : tensor<2xf32> -> tensor<2xf32>
  // CHECK: zero.all_reduce sum %{{.*}} group @flat : tensor<1xi64> -> tensor<1xi64>
  %counts = nn.moe_expert_counts %x top_k 1 : tensor<4x1xf32> -> tensor<1xi64>
  %gcounts = zero.all_reduce sum %counts group @flat : tensor<1xi64> -> tensor<1xi64>
  // CHECK: zero.update_loss_scale %{{.*}} : tensor<2xf32> -> i1
  %skip = zero.update_loss_scale %gstats : tensor<2xf32> -> i1
  // CHECK: zero.optimizer_step group @flat stats %{{.*}} scale %{{.*}} skip %{{.*}} divisor 4.000000e+00 : tensor<2xf32>
  zero.optimizer_step group @flat stats %gstats scale %s skip %skip divisor 4.0 : tensor<2xf32>
  // CHECK: zero.all_gather group @flat in params [0, 64)
  zero.all_gather group @flat in params [0, 64)
  %f32 = nn.fill 1.0 : tensor<16xf32>
  %flat = nn.reshape %f32 : tensor<16xf32> -> tensor<16xf32>
  // CHECK: zero.cast %{{.*}} : tensor<16xf32> to tensor<16xbf16>
  %c = zero.cast %flat : tensor<16xf32> to tensor<16xbf16>
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Stage 3: gathers into a new buffer (synchronous and prefetched), views of
// parameters in it, and frees.

zero.param @w : tensor<4x3xf32> init normal std 0.02 compute bf16
zero.param @b : tensor<3xf32> init zeros compute bf16
// CHECK: zero.partition @layer0 stage 3 world_size 2 alignment 2 numel 15 padded 16
zero.partition @layer0 stage 3 world_size 2 alignment 2 numel 15 padded 16 params [@w, @b] offsets [0, 12]

// CHECK-LABEL: zero.train_step @stage3
zero.train_step @stage3(%x: tensor<8x4xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 16> {
  // A persistent gather, kept to the end of every micro step.
  // CHECK: %[[K:.*]] = zero.all_gather group @layer0 persistent : tensor<16xbf16>
  %kept = zero.all_gather group @layer0 persistent : tensor<16xbf16>
  // CHECK: %[[F:.*]] = zero.all_gather group @layer0 : tensor<16xbf16>
  %full = zero.all_gather group @layer0 : tensor<16xbf16>
  // CHECK: zero.get_param @w from %[[F]] : tensor<16xbf16> -> tensor<4x3xbf16>
  %w = zero.get_param @w from %full : tensor<16xbf16> -> tensor<4x3xbf16>
  %h = nn.matmul %x, %w : tensor<8x4xbf16>, tensor<4x3xbf16> -> tensor<8x3xbf16>
  zero.free %full : tensor<16xbf16>
  // CHECK: zero.free %[[K]] phase step_end : tensor<16xbf16>
  zero.free %kept phase step_end : tensor<16xbf16>
  // CHECK: %[[P:.*]], %[[T:.*]] = zero.prefetch group @layer0 : tensor<16xbf16>
  %p, %t = zero.prefetch group @layer0 : tensor<16xbf16>
  zero.wait %t
  // CHECK: zero.all_gather group @layer0 : tensor<16xbf16> -> !zero.token
  %q, %t2 = zero.all_gather group @layer0 : tensor<16xbf16> -> !zero.token
  zero.wait %t2
  zero.free %q : tensor<16xbf16>
  %b = zero.get_param @b from %p : tensor<16xbf16> -> tensor<3xbf16>
  zero.free %p : tensor<16xbf16>
  // ZeRO++ qwZ: gathers of block-quantized INT8 shards.
  // CHECK: zero.all_gather group @layer0 persistent quantized : tensor<16xbf16>
  %qk = zero.all_gather group @layer0 persistent quantized : tensor<16xbf16>
  zero.free %qk phase step_end : tensor<16xbf16>
  // CHECK: zero.prefetch group @layer0 quantized : tensor<16xbf16>
  %qp, %qt = zero.prefetch group @layer0 quantized : tensor<16xbf16>
  zero.wait %qt
  zero.free %qp : tensor<16xbf16>
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// A recorded memory plan round-trips: the totals, the partition's buffer
// offsets (no master buffer: fp32 parameters are their own masters), the
// inputs' offsets, one offset per result (-1 for a view, a gradient bound by
// zero.grad and a token) and a bucket buffer.

zero.param @w : tensor<2x8xf32> init zeros
zero.param @v : tensor<8xf32> init zeros
// CHECK: zero.partition @l stage 3 {{.*}} {zero.buffers = #zero.buffer_offsets<params = 0, grads = 64, exp_avg = 128, exp_avg_sq = 192>}
zero.partition @l stage 3 world_size 2 alignment 2 numel 24 padded 24 params [@w, @v] offsets [0, 16]
    {zero.buffers = #zero.buffer_offsets<params = 0, grads = 64, exp_avg = 128, exp_avg_sq = 192>}
// CHECK-LABEL: zero.train_step @planned
// CHECK-SAME: attributes {zero.input_offsets = array<i64: 0>, zero.plan = #zero.memory_plan<persistent_bytes = 256, arena_bytes = 448, scratch_bytes = 32, peak_bytes = 736>}
zero.train_step @planned(%x: tensor<2x8xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4>
    attributes {zero.input_offsets = array<i64: 0>,
                zero.plan = #zero.memory_plan<persistent_bytes = 256, arena_bytes = 448, scratch_bytes = 32, peak_bytes = 736>} {
  // CHECK: zero.all_gather group @l {zero.alloc = array<i64: 128, -1>} : tensor<24xf32> -> !zero.token
  %full, %t = zero.all_gather group @l {zero.alloc = array<i64: 128, -1>} : tensor<24xf32> -> !zero.token
  zero.wait %t
  // CHECK: zero.get_param @w from %{{.*}} {zero.alloc = array<i64: -1>}
  %w = zero.get_param @w from %full {zero.alloc = array<i64: -1>} : tensor<24xf32> -> tensor<2x8xf32>
  // CHECK: nn.mul %{{.*}}, %{{.*}} {zero.alloc = array<i64: -1>}
  %dw = nn.mul %x, %w {zero.alloc = array<i64: -1>} : tensor<2x8xf32>, tensor<2x8xf32>
  zero.free %full : tensor<24xf32>
  zero.grad @w, %dw : tensor<2x8xf32>
  %dv = nn.fill 0.0 {zero.alloc = array<i64: 256>} : tensor<8xf32>
  zero.grad @v, %dv : tensor<8xf32>
  // CHECK: zero.reduce_scatter group @l [0, 24) {{.*}} {zero.temp = 320 : i64}
  zero.reduce_scatter group @l [0, 24) from %dw, %dv at [0, 0] : tensor<2x8xf32>, tensor<8xf32> {zero.temp = 320}
  %loss = nn.fill 0.0 {zero.alloc = array<i64: 64>} : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// A static fp16 loss scale and the logging a DeepSpeed config asks for.
// CHECK-LABEL: zero.train_step @static_scale(
// CHECK-SAME: precision #zero.precision<kind = fp16, loss_scale = 1.024000e+03>
// CHECK-SAME: attributes {zero.logging = #zero.logging<steps_per_print = 10, wall_clock_breakdown = true>}
zero.train_step @static_scale(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp16, loss_scale = 1024.0>
    attributes {zero.logging = #zero.logging<steps_per_print = 10, wall_clock_breakdown = true>} {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Optimizer settings: no bias correction, a learning-rate schedule (only
// the parameters that differ from DeepSpeed's defaults are printed), and a
// parameter with its own weight decay (a weight-decay group).
// CHECK: zero.param @bias : tensor<3xf32> init zeros weight_decay 0.000000e+00 compute bf16
// CHECK-LABEL: zero.train_step @scheduled(
// CHECK-SAME: optimizer #zero.optimizer<kind = adamw, lr = 1.000000e-03, weight_decay = 1.000000e-01, bias_correction = false, schedule = <kind = warmup_cosine_lr, warmup_num_steps = 10, warmup_type = linear, total_num_steps = 100, cos_min_ratio = 1.000000e-02>>
zero.param @bias : tensor<3xf32> init zeros weight_decay 0.0 compute bf16
zero.train_step @scheduled(%x: tensor<8x3xf32>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-3, weight_decay = 0.1, bias_correction = false, schedule = #zero.lr_schedule<kind = warmup_cosine_lr, total_num_steps = 100, warmup_num_steps = 10, warmup_type = linear, cos_min_ratio = 0.01>>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// A schedule as long as the run (Hugging Face's "auto"), and a step fed
// the same tokens as ids and labels, its inputs named; the default
// next_token is not printed.
// CHECK-LABEL: zero.train_step @same_tokens(
// CHECK-SAME: %{{.*}}: tensor<2x8xi64>, %{{.*}}: tensor<2x8xi64>)
// CHECK-SAME: schedule = <kind = warmup_decay_lr, warmup_num_steps = 0, total_num_steps = auto>>
// CHECK-SAME: labels same_tokens attributes {input_names = ["input_ids", "labels"]} {
// CHECK-LABEL: zero.train_step @next_token(
// CHECK-SAME: precision #zero.precision<kind = fp32> {
zero.train_step @same_tokens(%ids: tensor<2x8xi64>, %labels: tensor<2x8xi64>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-3, schedule = #zero.lr_schedule<kind = warmup_decay_lr, warmup_num_steps = 0, total_num_steps = auto>>
    precision #zero.precision<kind = fp32>
    labels same_tokens attributes {input_names = ["input_ids", "labels"]} {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}
zero.train_step @next_token(%ids: tensor<2x8xi32>, %labels: tensor<2x8xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    labels next_token {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Where the optimizer states and parameters live (round trip; the default
// device none and the empty path are not printed).
// CHECK-LABEL: zero.train_step @offloaded(
// CHECK-SAME: offload #zero.offload<optimizer = cpu>
zero.train_step @offloaded(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    offload #zero.offload<optimizer = cpu, param = none> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// CHECK-LABEL: zero.train_step @one_cycle(
// CHECK-SAME: schedule = <kind = one_cycle, cycle_min_lr = 1.000000e-04, cycle_max_lr = 1.000000e-03, cycle_first_step_size = 100, cycle_momentum = false>
zero.train_step @one_cycle(%x: tensor<8x3xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3, schedule = #zero.lr_schedule<kind = one_cycle, cycle_min_lr = 1.0e-4, cycle_max_lr = 1.0e-3, cycle_first_step_size = 100, cycle_momentum = false>>
    precision #zero.precision<kind = fp32> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// CHECK-LABEL: zero.train_step @to_nvme(
// CHECK-SAME: offload #zero.offload<optimizer = nvme, param = nvme, nvme_path = "/local_nvme", param_nvme_path = "/local_nvme/params", param_buffer_count = 3>
zero.train_step @to_nvme(%x: tensor<8x4xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    offload #zero.offload<optimizer = nvme, param = nvme, nvme_path = "/local_nvme", param_nvme_path = "/local_nvme/params", param_buffer_count = 3> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Optimizer offload: the transfers between device and host memory and the
// host Adam.
// CHECK-LABEL: zero.train_step @offload_ops(
// CHECK: %[[D:.*]] = zero.transfer group @flat grads to host_grads phase boundary -> !zero.token
// CHECK: %[[R:.*]] = zero.transfer group @flat grads[4, 8) to host_grads phase last_micro_step -> !zero.token
// CHECK: zero.wait %[[R]] phase boundary
// CHECK: zero.optimizer_step group @flat stats %{{.*}} scale %{{.*}} skip %{{.*}} divisor 2.000000e+00 host phase boundary : tensor<2xf32>
// CHECK: zero.transfer group @flat host_params to params phase boundary{{$}}
zero.param @w : tensor<8xf32> init zeros compute bf16
zero.partition @flat stage 2 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.train_step @offload_ops(%x: tensor<2x8xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 2, global_batch = 4>
    offload #zero.offload<optimizer = cpu> {
  %loss = nn.fill 0.0 : tensor<f32>
  %d = zero.transfer group @flat grads to host_grads phase boundary -> !zero.token
  %r = zero.transfer group @flat grads[4, 8) to host_grads phase last_micro_step -> !zero.token
  zero.wait %r phase boundary
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 2.0 phase boundary : tensor<2xf32>
  %skip = zero.update_loss_scale %st phase boundary : tensor<2xf32> -> i1
  zero.wait %d phase boundary
  zero.optimizer_step group @flat stats %st scale %s skip %skip divisor 2.0 host phase boundary : tensor<2xf32>
  zero.transfer group @flat host_params to params phase boundary
  zero.return %loss : tensor<f32>
}

// -----

// Parameter offload: a staged copy of the host shard, the gather reading it,
// and a device Adam writing its new parameters into a staged buffer that
// goes back to the host shard.
// CHECK-LABEL: zero.train_step @param_offload_ops(
// CHECK: %[[S:.*]], %[[T:.*]] = zero.transfer group @flat params to staging : tensor<4xbf16> -> !zero.token
// CHECK: zero.all_gather group @flat from %[[S]] : tensor<4xbf16> : tensor<8xbf16>
// CHECK: %[[P:.*]], %{{.*}} = zero.prefetch group @flat from %[[S]] : tensor<4xbf16> : tensor<8xbf16>
// CHECK: %[[N:.*]] = zero.optimizer_step group @flat {{.*}} phase boundary : tensor<2xf32> -> tensor<4xbf16>
// CHECK: zero.transfer group @flat %[[N]] to params phase boundary : tensor<4xbf16>{{$}}
zero.param @w : tensor<8xf32> init zeros compute bf16
zero.partition @flat stage 3 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.train_step @param_offload_ops(%x: tensor<2x8xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4>
    offload #zero.offload<param = cpu> {
  %loss = nn.fill 0.0 : tensor<f32>
  %sh, %t = zero.transfer group @flat params to staging : tensor<4xbf16> -> !zero.token
  zero.wait %t
  %full = zero.all_gather group @flat from %sh : tensor<4xbf16> : tensor<8xbf16>
  %full2, %t2 = zero.prefetch group @flat from %sh : tensor<4xbf16> : tensor<8xbf16>
  zero.wait %t2
  zero.free %sh : tensor<4xbf16>
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 2.0 phase boundary : tensor<2xf32>
  %skip = zero.update_loss_scale %st phase boundary : tensor<2xf32> -> i1
  %new = zero.optimizer_step group @flat stats %st scale %s skip %skip divisor 2.0 phase boundary : tensor<2xf32> -> tensor<4xbf16>
  zero.transfer group @flat %new to params phase boundary : tensor<4xbf16>
  zero.return %loss : tensor<f32>
}

// -----

// Both offloaded: the staged shard feeds the gather in every micro step,
// the gradients stream to the host by layout range in the last one, and
// the host Adam updates the host shard in place.
// CHECK-LABEL: zero.train_step @param_and_optimizer_offload_ops(
// CHECK: %[[S:.*]], %[[T:.*]] = zero.transfer group @flat params to staging : tensor<4xbf16> -> !zero.token
// CHECK: %[[R:.*]] = zero.transfer group @flat grads[0, 8) to host_grads phase last_micro_step -> !zero.token
// CHECK: zero.optimizer_step group @flat {{.*}} host phase boundary : tensor<2xf32>{{$}}
zero.param @w : tensor<8xf32> init zeros compute bf16
zero.partition @flat stage 3 world_size 2 alignment 2 numel 8 padded 8 params [@w] offsets [0]
zero.train_step @param_and_optimizer_offload_ops(%x: tensor<2x8xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4>
    offload #zero.offload<optimizer = cpu, param = cpu> {
  %loss = nn.fill 0.0 : tensor<f32>
  %sh, %t = zero.transfer group @flat params to staging : tensor<4xbf16> -> !zero.token
  zero.wait %t
  %full = zero.all_gather group @flat from %sh : tensor<4xbf16> : tensor<8xbf16>
  zero.free %sh : tensor<4xbf16>
  %r = zero.transfer group @flat grads[0, 8) to host_grads phase last_micro_step -> !zero.token
  %s = zero.loss_scale phase boundary : tensor<f32>
  %st = zero.check_overflow groups [@flat] scale %s divisor 2.0 phase boundary : tensor<2xf32>
  %skip = zero.update_loss_scale %st phase boundary : tensor<2xf32> -> i1
  zero.wait %r phase boundary
  zero.optimizer_step group @flat stats %st scale %s skip %skip divisor 2.0 host phase boundary : tensor<2xf32>
  zero.return %loss : tensor<f32>
}

// -----

// The mean over the valid labels of the global batch: the label count of
// the first micro step and each micro batch's share of it.

zero.param @w : tensor<4x3xf32> init zeros
zero.partition @flat stage 0 world_size 2 alignment 2 numel 12 padded 12 params [@w] offsets [0]

// CHECK-LABEL: zero.train_step @token_mean
zero.train_step @token_mean(%x: tensor<2x4xf32>, %y: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 2, global_batch = 8, accumulation_steps = 2> {
  // CHECK: zero.count_labels %{{.*}} ignore_index -100 group @flat : tensor<2xi64> -> tensor<1xi64>
  %n = zero.count_labels %y ignore_index -100 group @flat : tensor<2xi64> -> tensor<1xi64>
  %w = zero.get_param @w : tensor<4x3xf32>
  %z = nn.matmul %x, %w : tensor<2x4xf32>, tensor<4x3xf32> -> tensor<2x3xf32>
  %l = nn.softmax_cross_entropy %z, %y ignore_index -100 : tensor<2x3xf32>, tensor<2xi64> -> tensor<f32>
  // CHECK: zero.label_share divisor 4.000000e+00 : tensor<f32>
  %share = zero.label_share divisor 4.0 : tensor<f32>
  %loss = nn.mul %l, %share : tensor<f32>, tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// A loss's denominator summed over the global batch: the sum of the first
// micro step, the global sum read back, and a micro batch's share.

zero.param @w : tensor<4x3xf32> init zeros
zero.partition @flat stage 0 world_size 2 alignment 2 numel 12 padded 12 params [@w] offsets [0]

// CHECK-LABEL: zero.train_step @global_sum
zero.train_step @global_sum(%x: tensor<2x4xf32>, %m: tensor<2x1xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 2, global_batch = 8, accumulation_steps = 2> {
  %s = nn.reduce_sum %m : tensor<2x1xf32> -> tensor<f32>
  // CHECK: zero.count_sum %{{.*}} index 0 group @flat : tensor<f32> -> tensor<1xf32>
  %n = zero.count_sum %s index 0 group @flat : tensor<f32> -> tensor<1xf32>
  // CHECK: zero.step_sum index 0 : tensor<f32>
  %g = zero.step_sum index 0 : tensor<f32>
  // CHECK: zero.micro_share divisor 4.000000e+00 : tensor<f32>
  %share = zero.micro_share divisor 4.0 : tensor<f32>
  %loss = nn.mul %g, %share : tensor<f32>, tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// What an export to Hugging Face writes, on the module.
// CHECK-LABEL: module attributes {zero.hf_model = #zero.hf_model<config = "{\0A  \22model_type\22: \22llama\22\0A}\0A", tied = {lm_head.weight = "model.embed_tokens.weight"}>}
// CHECK: zero.param @model.embed_tokens.weight
module attributes {zero.hf_model = #zero.hf_model<config = "{\0A  \22model_type\22: \22llama\22\0A}\0A", tied = {"lm_head.weight" = "model.embed_tokens.weight"}>} {
  zero.param @model.embed_tokens.weight : tensor<8x4xf32> init normal std 2.0e-02
}

// -----

// The checkpoint's tensors that are no parameter: buffers with their exact
// values (the hexadecimal form reads back as the same floats) and unused
// ones by name.
// CHECK-LABEL: module attributes {zero.hf_model = #zero.hf_model<config = "{\22model_type\22: \22gemma4_text\22}", buffers = {model.layers.0.layer_scalar = dense<5.000000e-01> : tensor<1xf32>, model.layers.1.layer_scalar = dense<0.0999999865> : tensor<1xf32>}, unused = ["bert.pooler.weight"]>}
module attributes {zero.hf_model = #zero.hf_model<config = "{\22model_type\22: \22gemma4_text\22}", buffers = {"model.layers.0.layer_scalar" = dense<5.000000e-01> : tensor<1xf32>, "model.layers.1.layer_scalar" = dense<"0xCBCCCC3D"> : tensor<1xf32>}, unused = ["bert.pooler.weight"]>} {
  zero.param @w : tensor<4xf32> init zeros
}

// -----

// The topology parameters round-trip; the defaults are not printed.

// -----

// Owner-computes with gaps: @k and @n in rank 0's enlarged slot of 12, a
// gap [8, 12) before rank 1's @m, padding past the minimal.
zero.param @m : tensor<2x4xf32> init zeros
zero.param @n : tensor<4xf32> init ones
zero.param @k : tensor<2x2xf32> init zeros
// CHECK: zero.partition @gapped stage 3 world_size 2 alignment 1 numel 20 padded 24 params [@k, @n, @m] offsets [0, 4, 12] owners [0, -1, 1]
zero.partition @gapped stage 3 world_size 2 alignment 1 numel 20 padded 24 params [@k, @n, @m] offsets [0, 4, 12] owners [0, -1, 1]

// -----

// CHECK-LABEL: zero.train_step @topology
// CHECK-SAME: schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 8, ranks_per_node = 2, mesh = #zero.mesh<[data = 2, hpz = 2]>>
zero.train_step @topology(%x: tensor<2x1xf32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 3, world_size = 4, global_batch = 8, accumulation_steps = 1, ranks_per_node = 2, mesh = #zero.mesh<[data = 2, hpz = 2]>> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Muon's owner-computes: the parameters listed out of declaration order,
// each owned matrix whole in its owner's shard of 8 elements.

zero.param @m : tensor<2x4xf32> init zeros
zero.param @n : tensor<4xf32> init ones
zero.param @k : tensor<2x2xf32> init zeros

// CHECK: zero.partition @owned stage 3 world_size 2 alignment 1 numel 16 padded 16 params [@n, @k, @m] offsets [0, 4, 8] owners [-1, 0, 1]
zero.partition @owned stage 3 world_size 2 alignment 1 numel 16 padded 16 params [@n, @k, @m] offsets [0, 4, 8] owners [-1, 0, 1]
