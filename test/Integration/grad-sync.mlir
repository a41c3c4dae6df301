// Layout of the MLP (784,256,256,10): fc1.weight [0, 200704), fc1.bias
// [200704, 200960), fc2.weight [200960, 266496), fc2.bias [266496, 266752),
// fc3.weight [266752, 269312), fc3.bias [269312, 269322). Gradients complete
// in reverse order; fc3.* + fc2.* hold 68362 elements.

// RUN: zero-model-gen mlp --sizes 784,256,256,10 --batch 64 | zero-opt --zero-autodiff --zero-partition="stage=2 world-size=4" --zero-grad-sync="reduce-bucket-size=68362" | FileCheck %s --check-prefix=S2
// RUN: zero-model-gen mlp --sizes 784,256,256,10 --batch 64 | zero-opt --zero-autodiff --zero-partition="stage=2 world-size=4" --zero-grad-sync="reduce-bucket-size=68362 reduce-scatter=false" | FileCheck %s --check-prefix=REDUCE
// RUN: zero-model-gen mlp --sizes 784,256,256,10 --batch 64 | zero-opt --zero-autodiff --zero-partition="stage=2 world-size=4" --zero-grad-sync | FileCheck %s --check-prefix=BIG
// RUN: zero-model-gen mlp --sizes 784,256,256,10 --batch 64 | zero-opt --zero-autodiff --zero-partition="stage=2 world-size=4" --zero-grad-sync="reduce-bucket-size=68362 overlap-comm=true" | FileCheck %s --check-prefix=OVERLAP
// RUN: zero-model-gen mlp --sizes 784,256,256,10 --batch 64 | zero-opt --zero-autodiff --zero-partition="stage=0 world-size=4" --zero-grad-sync="reduce-bucket-size=68362" | FileCheck %s --check-prefix=S0
// RUN: zero-model-gen mlp --sizes 784,256,256,10 --batch 64 | zero-opt --zero-autodiff --zero-partition="stage=1 world-size=4" --zero-grad-sync="reduce-bucket-size=100000 contiguous-gradients=false" | FileCheck %s --check-prefix=S1
// RUN: zero-model-gen gpt2 --layers 2 --hidden 64 --heads 4 --vocab 256 --seq 32 --batch 8 | zero-opt --zero-autodiff --zero-partition="stage=3 world-size=4" --zero-grad-sync | FileCheck %s --check-prefix=S3
// RUN: zero-model-gen mlp --sizes 8,4 --batch 8 | not zero-opt --zero-autodiff --zero-partition="stage=2 world-size=4" --zero-grad-sync="reduce-bucket-size=0" 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: zero-model-gen mlp --sizes 8,4 --batch 8 | not zero-opt --zero-autodiff --zero-grad-sync 2>&1 | FileCheck %s --check-prefix=UNPART

// Stage 2, bucket = fc3.* + fc2.*: the first bucket is reduced and freed as
// soon as fc2.weight's gradient is complete, before fc1's backward; fc1.weight
// (200704 elements) spans three buckets and is freed slice by slice.
// S2-LABEL: zero.train_step
// S2-SAME: schedule #zero.schedule<stage = 2, world_size = 4, global_batch = 64>
// S2: zero.grad @fc3.bias, %[[G3B:[0-9]+]]
// S2: zero.grad @fc3.weight, %[[G3W:[0-9]+]]
// S2: zero.grad @fc2.bias, %[[G2B:[0-9]+]]
// S2: zero.grad @fc2.weight, %[[G2W:[0-9]+]]
// S2-NEXT: zero.reduce_scatter group @flat [200960, 269322) from %[[G2W]], %[[G2B]], %[[G3W]], %[[G3B]] at [0, 0, 0, 0] :
// S2-NEXT: zero.free %[[G2W]] :
// S2-NEXT: zero.free %[[G2B]] :
// S2-NEXT: zero.free %[[G3W]] :
// S2-NEXT: zero.free %[[G3B]] :
// S2-NEXT: nn.relu_grad
// S2: zero.grad @fc1.bias, %[[G1B:[0-9]+]]
// S2: nn.matmul
// S2-NEXT: zero.grad @fc1.weight, %[[G1W:[0-9]+]]
// S2-NEXT: zero.reduce_scatter group @flat [132598, 200960) from %[[G1W]], %[[G1B]] at [132598, 0] :
// S2-NEXT: zero.free %[[G1W]][132598, 68106] : tensor<784x256xf32>
// S2-NEXT: zero.free %[[G1B]] :
// S2-NEXT: zero.reduce_scatter group @flat [64236, 132598) from %[[G1W]] at [64236] :
// S2-NEXT: zero.free %[[G1W]][64236, 68362] : tensor<784x256xf32>
// S2-NEXT: zero.reduce_scatter group @flat [0, 64236) from %[[G1W]] at [0] :
// S2-NEXT: zero.free %[[G1W]][0, 64236] : tensor<784x256xf32>
// S2-NEXT: zero.return
// S2-NOT: phase boundary

// REDUCE-NOT: zero.reduce_scatter
// REDUCE: zero.grad @fc2.weight
// REDUCE-NEXT: zero.reduce group @flat [200960, 269322) from
// REDUCE: zero.reduce group @flat [132598, 200960) from
// REDUCE: zero.reduce group @flat [64236, 132598) from
// REDUCE: zero.reduce group @flat [0, 64236) from
// REDUCE-NOT: zero.reduce_scatter

// The default bucket (5e8, DeepSpeed's) holds the whole model: one reduction
// after the last gradient.
// BIG: zero.grad @fc1.weight
// BIG-NEXT: zero.reduce_scatter group @flat [0, 269322) from %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} at [0, 0, 0, 0, 0, 0]
// BIG-NOT: zero.reduce_scatter

// overlap-comm: asynchronous reductions on two alternating buffers: the wait
// of bucket 0 comes right before bucket 2 is issued, then its frees.
// OVERLAP: zero.grad @fc2.weight, %[[G2W:[0-9]+]]
// OVERLAP-NEXT: %[[T0:.*]] = zero.reduce_scatter group @flat [200960, 269322) {{.*}} -> !zero.token
// OVERLAP-NOT: zero.free
// OVERLAP: zero.grad @fc1.weight, %[[G1W:[0-9]+]]
// OVERLAP-NEXT: %[[T1:.*]] = zero.reduce_scatter group @flat [132598, 200960) {{.*}} -> !zero.token
// OVERLAP-NEXT: zero.wait %[[T0]]
// OVERLAP-NEXT: zero.free %[[G2W]] :
// OVERLAP-COUNT-3: zero.free
// OVERLAP-NEXT: %[[T2:.*]] = zero.reduce_scatter group @flat [64236, 132598) {{.*}} -> !zero.token
// OVERLAP-NEXT: zero.wait %[[T1]]
// OVERLAP-NEXT: zero.free %[[G1W]][132598, 68106]
// OVERLAP-NEXT: zero.free
// OVERLAP-NEXT: %[[T3:.*]] = zero.reduce_scatter group @flat [0, 64236) {{.*}} -> !zero.token
// OVERLAP-NEXT: zero.wait %[[T2]]
// OVERLAP-NEXT: zero.free %[[G1W]][64236, 68362]
// OVERLAP-NEXT: zero.wait %[[T3]]
// OVERLAP-NEXT: zero.free %[[G1W]][0, 64236]
// OVERLAP-NEXT: zero.return

// Stage 0: in-place all-reduce of the full gradient buffer as buckets fill,
// no frees (the gradients live in the persistent buffer), boundary-only.
// S0-NOT: zero.reduce_scatter
// S0: zero.grad @fc2.weight
// S0-NEXT: zero.all_reduce sum group @flat in grads [200960, 269322) phase boundary
// S0-NEXT: nn.relu_grad
// S0: zero.grad @fc1.weight
// S0-NEXT: zero.all_reduce sum group @flat in grads [132598, 200960) phase boundary
// S0-NEXT: zero.all_reduce sum group @flat in grads [64236, 132598) phase boundary
// S0-NEXT: zero.all_reduce sum group @flat in grads [0, 64236) phase boundary
// S0-NEXT: zero.return
// S0-NOT: zero.free
// S0-NOT: zero.all_gather

// Stage 1: gradients stay whole until the backward is done, then in-place
// reduce-scatter of the full buffer in buckets.
// S1-LABEL: zero.train_step
// S1-NOT: zero.reduce_scatter
// S1: zero.grad @fc1.weight
// S1-NEXT: zero.reduce_scatter group @flat in grads [0, 100000) phase boundary
// S1-NEXT: zero.reduce_scatter group @flat in grads [100000, 200000) phase boundary
// S1-NEXT: zero.reduce_scatter group @flat in grads [200000, 269322) phase boundary
// S1-NEXT: zero.return
// S1-NOT: zero.free

// Stage 3: buckets never span groups. A layer norm completes its weight
// gradient before its bias, so ln_2.weight is not adjacent to the bucket
// below c_fc.weight: that bucket is flushed and a new one starts.
// S3: zero.grad @transformer.ln_f.bias
// S3-NEXT: zero.reduce_scatter group @transformer.ln_f [0, 128) from
// S3: zero.grad @transformer.h.1.mlp.c_fc.weight
// S3-NEXT: zero.reduce_scatter group @transformer.h.1 [16896, 49984) from
// S3: zero.grad @transformer.h.1.attn.c_attn.weight
// S3-NEXT: zero.reduce_scatter group @transformer.h.1 [128, 16896) from
// S3: zero.grad @transformer.h.1.ln_1.bias
// S3-NEXT: zero.reduce_scatter group @transformer.h.1 [0, 128) from
// S3: zero.grad @transformer.h.0.ln_1.bias
// S3-NEXT: zero.reduce_scatter group @transformer.h.0 [0, 128) from
// S3: zero.grad @transformer.wpe.weight
// S3-NEXT: zero.reduce_scatter group @transformer.wpe [0, 2048) from
// S3: zero.grad @transformer.wte.weight
// S3-NEXT: zero.reduce_scatter group @transformer.wte [0, 16384) from

// ZERO: zero-grad-sync: reduce-bucket-size must be positive, got 0
// UNPART: error: train step @train: zero-grad-sync needs a partitioned train step (run zero-partition first)
