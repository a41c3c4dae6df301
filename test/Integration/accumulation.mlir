// gradient-accumulation-steps K: the step's inputs are K micro batches of
// every rank; the body runs on one micro batch (64 / 4 ranks / 2 = 8).
// RUN: zero-model-gen mlp --sizes 784,256,256,10 --batch 64 | zero-opt --zero-autodiff --zero-partition="stage=1 world-size=4" --zero-grad-sync="gradient-accumulation-steps=2" --zero-param-gather --zero-optimizer | FileCheck %s --check-prefix=S1
// RUN: zero-model-gen mlp --sizes 784,256,256,10 --batch 64 | zero-opt --zero-autodiff --zero-partition="stage=0 world-size=4" --zero-grad-sync="gradient-accumulation-steps=2 overlap-comm=true" --zero-optimizer | FileCheck %s --check-prefix=S0
// RUN: zero-model-gen mlp --sizes 784,256,256,10 --batch 64 | zero-opt --zero-autodiff --zero-partition="stage=2 world-size=4" --zero-grad-sync="gradient-accumulation-steps=2 reduce-bucket-size=100000" --zero-param-gather --zero-optimizer | FileCheck %s --check-prefix=S2
// RUN: zero-model-gen mlp --sizes 784,256,256,10 --batch 64 | not zero-opt --zero-autodiff --zero-partition="stage=2 world-size=4" --zero-grad-sync="gradient-accumulation-steps=3" 2>&1 | FileCheck %s --check-prefix=BAD

// Stages 0-1 communicate only at the boundary (the last micro step): their
// collectives and waits are in the boundary phase; the optimizer divides by
// world size x K = 8.
// S1: zero.train_step @train(%{{.*}}: tensor<8x784xf32>, %{{.*}}: tensor<8xi64>)
// S1-SAME: schedule #zero.schedule<stage = 1, world_size = 4, global_batch = 64, accumulation_steps = 2>
// S1: nn.matmul %{{.*}}, %{{.*}} : tensor<8x784xf32>, tensor<784x256xf32> -> tensor<8x256xf32>
// S1: zero.grad @fc1.weight
// S1-NEXT: zero.reduce_scatter group @flat in grads [0, 269322) phase boundary
// S1: zero.check_overflow {{.*}} divisor 8.000000e+00 phase boundary
// S1: zero.optimizer_step {{.*}} divisor 8.000000e+00 phase boundary
// S1-NEXT: zero.all_gather group @flat in params [0, 269322) phase post_step

// S0: zero.all_reduce sum group @flat in grads [0, 269322) phase boundary token
// S0-NEXT: zero.wait %{{.*}} phase boundary
// S0-NEXT: zero.loss_scale phase boundary

// Stages 2-3 reduce every micro step into the owner's accumulator: the
// reductions and frees are not tagged, only the optimizer and the gathers.
// S2: zero.grad @fc1.weight
// S2-NEXT: zero.reduce_scatter group @flat [169322, 269322) from {{[^{]*$}}
// S2: zero.reduce_scatter group @flat [0, 69322) from {{[^{]*$}}
// S2-NEXT: zero.free
// S2-NEXT: zero.loss_scale phase boundary
// S2: zero.optimizer_step {{.*}} divisor 8.000000e+00 phase boundary
// S2-NEXT: zero.all_gather group @flat in params [0, 269322) phase post_step

// BAD: global batch 64 is not divisible by world-size 4 x gradient-accumulation-steps 3 = 12
