// RUN: zero-model-gen mlp --sizes 784,256,256,10 --batch 64 --gradient-clipping 1.0 | zero-opt --zero-autodiff --zero-mixed-precision=dtype=fp16 --zero-partition="stage=2 world-size=4" --zero-grad-sync="overlap-comm=true reduce-bucket-size=100000" --zero-optimizer | FileCheck %s --check-prefix=S2
// RUN: zero-model-gen mlp --sizes 784,256,256,10 --batch 64 --gradient-clipping 1.0 | zero-opt --zero-autodiff --zero-partition="stage=2 world-size=4" --zero-grad-sync --zero-optimizer="gradient-clipping=0.5" | FileCheck %s --check-prefix=CLIP
// RUN: zero-model-gen mlp --sizes 784,256,256,10 --batch 64 | zero-opt --zero-autodiff --zero-partition="stage=0 world-size=4" --zero-grad-sync --zero-optimizer | FileCheck %s --check-prefix=S0
// RUN: zero-model-gen mlp --sizes 784,256,256,10 --batch 64 | zero-opt --zero-autodiff --zero-partition="stage=3 world-size=8" --zero-grad-sync --zero-param-gather --zero-optimizer | FileCheck %s --check-prefix=S3
// RUN: zero-model-gen mlp --sizes 8,4 --batch 8 | not zero-opt --zero-autodiff --zero-optimizer 2>&1 | FileCheck %s --check-prefix=UNPART
// RUN: zero-model-gen mlp --sizes 8,4 --batch 8 | not zero-opt --zero-autodiff --zero-partition --zero-optimizer --zero-optimizer 2>&1 | FileCheck %s --check-prefix=TWICE

// After the last wait: loss scale, one read-only overflow/norm pass, one
// small all-reduce (flag max, norm sum), the scaler update, fused Adam.
// S2-LABEL: zero.train_step
// S2-SAME: gradient_clipping 1.000000e+00
// S2: zero.grad @fc1.weight
// S2: zero.wait
// S2: zero.wait
// S2-NOT: zero.reduce_scatter
// S2: %[[S:.*]] = zero.loss_scale phase boundary : tensor<f32>
// S2-NEXT: %[[ST:.*]] = zero.check_overflow groups [@flat] scale %[[S]] divisor 4.000000e+00 phase boundary : tensor<2xf32>
// S2-NEXT: %[[G:.*]] = zero.all_reduce overflow_norm %[[ST]] group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
// S2-NEXT: %[[SKIP:.*]] = zero.update_loss_scale %[[G]] phase boundary : tensor<2xf32> -> i1
// S2-NEXT: zero.optimizer_step group @flat stats %[[G]] scale %[[S]] skip %[[SKIP]] divisor 4.000000e+00 phase boundary : tensor<2xf32>
// S2-NEXT: zero.return

// CLIP: gradient_clipping 5.000000e-01

// Stage 0: every rank holds the reduced gradients: no stats all-reduce.
// S0: %[[ST:.*]] = zero.check_overflow groups [@flat]
// S0-NOT: overflow_norm
// S0-NEXT: zero.update_loss_scale %[[ST]]

// Stage 3: one Adam per layer group, stats reduced over the first group;
// the persistent buffers are freed after the optimizer.
// S3: zero.check_overflow groups [@fc1, @fc2, @fc3] {{.*}} divisor 8.000000e+00
// S3-NEXT: zero.all_reduce overflow_norm %{{.*}} group @fc1
// S3-NEXT: zero.update_loss_scale
// S3-NEXT: zero.optimizer_step group @fc1
// S3-NEXT: zero.optimizer_step group @fc2
// S3-NEXT: zero.optimizer_step group @fc3
// S3-NEXT: zero.free %{{.*}} phase step_end
// S3-NOT: zero.all_gather

// UNPART: zero-optimizer needs a partitioned train step
// TWICE: already has an optimizer step
