// RUN: zero-opt %s -split-input-file --zero-offload-activations | FileCheck %s
// RUN: zero-opt %s -split-input-file --zero-offload-activations=device=none | FileCheck %s --check-prefix=NONE
// RUN: zero-opt %s -split-input-file --zero-remat=policy=layer --zero-offload-activations | FileCheck %s --check-prefix=LAYER
// RUN: zero-opt %s -split-input-file --zero-partition="stage=0 world-size=1" --zero-grad-sync \
// RUN:   --zero-optimizer --zero-offload-activations --zero-plan-memory --zero-verify-schedule \
// RUN:   | zero-opt --zero-print-memory-plan -o /dev/null | FileCheck %s --check-prefix=PLAN
// RUN: zero-opt %s -split-input-file --zero-partition="stage=0 world-size=1" --zero-grad-sync \
// RUN:   --zero-optimizer --zero-plan-memory | zero-opt --zero-print-memory-plan -o /dev/null | FileCheck %s --check-prefix=DEVICE
// RUN: zero-opt %s -split-input-file --zero-partition="stage=0 world-size=1" --zero-grad-sync \
// RUN:   --zero-optimizer --zero-offload-activations="device=auto budget=1700" --zero-verify-schedule \
// RUN:   | zero-opt --zero-print-memory-plan -o /dev/null | FileCheck %s --check-prefix=AUTO
// RUN: zero-opt %s -split-input-file --zero-partition="stage=0 world-size=1" --zero-grad-sync \
// RUN:   --zero-optimizer --zero-offload-activations="device=auto budget=1800" \
// RUN:   | zero-opt --zero-print-memory-plan -o /dev/null | FileCheck %s --check-prefix=FITS
// RUN: not zero-opt %s -split-input-file --zero-offload-activations=device=gpu 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not zero-opt %s -split-input-file --zero-offload-activations=device=auto 2>&1 | FileCheck %s --check-prefix=NOBUDGET

// Input: two pre-norm blocks and a head, differentiated by zero-autodiff
// (remat.mlir's @blocks). The backward reads the norm outputs %n0 and %n1,
// the matmul outputs %a0 and %a1, the residuals %r0 and %r1, and the
// logits; the input %x stays (a step input), and so do the logits, whose
// backward use follows their last forward one within two ops.

// Each saved activation goes out after its last forward use, waited after
// the next kernel, and comes back before the last kernel ahead of its first
// backward use, waited right before that use; every backward use reads the
// reload.
// CHECK-LABEL: zero.train_step @blocks
// CHECK: %[[N0:.*]] = nn.rms_norm %arg0
// CHECK-NEXT: %[[W0:.*]] = zero.get_param @h.0.w
// CHECK-NEXT: %[[A0:.*]] = nn.matmul %[[N0]], %[[W0]]
// CHECK-NEXT: %[[HN0:.*]], %[[TN0:.*]] = zero.offload_activation %[[N0]] : tensor<2x4xf32> -> !zero.token
// CHECK-NEXT: %[[G0:.*]] = nn.gelu %[[A0]]
// CHECK-NEXT: %[[HA0:.*]], %[[TA0:.*]] = zero.offload_activation %[[A0]] : tensor<2x4xf32> -> !zero.token
// CHECK-NEXT: zero.wait %[[TN0]]
// CHECK-NEXT: %[[R0:.*]] = nn.add %arg0, %[[G0]]
// CHECK-NEXT: zero.wait %[[TA0]]
// CHECK: %[[R1:.*]] = nn.add %[[R0]], %{{.*}} :
// CHECK: %[[HR0:.*]], %[[TR0:.*]] = zero.offload_activation %[[R0]]
// CHECK-NEXT: zero.get_param @head.w
// CHECK-NEXT: %[[LOGITS:.*]] = nn.matmul %[[R1]]
// CHECK-NEXT: %[[HR1:.*]], %[[TR1:.*]] = zero.offload_activation %[[R1]]
// CHECK-NEXT: zero.wait %[[TR0]]
// CHECK-NEXT: %[[LOSS:.*]] = nn.softmax_cross_entropy %[[LOGITS]]
// CHECK-NEXT: zero.wait %[[TR1]]
// CHECK-NEXT: nn.fill
// CHECK-NEXT: %[[DLOGITS:.*]] = nn.softmax_cross_entropy_grad %[[LOGITS]]
// CHECK-NEXT: %[[R1B:.*]], %[[TR1B:.*]] = zero.reload_activation %[[HR1]] : tensor<2x4xf32> -> !zero.token
// CHECK-NEXT: nn.matmul %[[DLOGITS]]
// CHECK-NEXT: %[[A1B:.*]], %[[TA1B:.*]] = zero.reload_activation
// CHECK-NEXT: zero.wait %[[TR1B]]
// CHECK-NEXT: nn.matmul %[[R1B]], %[[DLOGITS]] transpose_lhs
// CHECK: zero.wait %[[TA1B]]
// CHECK-NEXT: nn.gelu_grad %[[A1B]],
// CHECK: %[[R0B:.*]], %[[TR0B:.*]] = zero.reload_activation %[[HR0]]
// CHECK: zero.wait %[[TR0B]]
// CHECK-NEXT: nn.rms_norm_grad %[[R0B]],
// CHECK: %[[A0B:.*]], %[[TA0B:.*]] = zero.reload_activation %[[HA0]]
// CHECK: zero.wait %[[TA0B]]
// CHECK-NEXT: nn.gelu_grad %[[A0B]],
// CHECK-NEXT: %[[N0B:.*]], %[[TN0B:.*]] = zero.reload_activation %[[HN0]]
// CHECK-NEXT: nn.matmul
// CHECK-NEXT: zero.wait %[[TN0B]]
// CHECK-NEXT: nn.matmul %[[N0B]], %{{.*}} transpose_lhs
// CHECK: nn.rms_norm_grad %arg0,
// CHECK-NOT: zero.reload_activation
// CHECK: zero.return %[[LOSS]]

// none: nothing moves.
// NONE-LABEL: zero.train_step @blocks
// NONE-NOT: zero.offload_activation
// NONE-NOT: zero.reload_activation
// NONE: zero.return

// With remat layer only the blocks' outputs are kept, so only they move
// (the input %x is the step's); the recomputed norms and matmuls stay.
// LAYER-LABEL: zero.train_step @blocks
// LAYER-COUNT-2: zero.offload_activation
// LAYER-NOT: zero.offload_activation
// LAYER-COUNT-2: zero.reload_activation
// LAYER-NOT: zero.reload_activation
// LAYER: zero.return

// Scheduled and planned: each host copy has its own place in the host
// arena (8 f32 = 32 bytes, 64-byte aligned), which is the host peak.
// PLAN: zero.train_step @blocks
// PLAN-NEXT: persistent_bytes 1024, arena_bytes 512, scratch_bytes 8, peak_bytes 1544, host_bytes 384
// PLAN: host activation op {{[0-9]+}} offset 0 bytes 32
// PLAN-NEXT: host activation op {{[0-9]+}} offset 64 bytes 32
// PLAN-NEXT: host activation op {{[0-9]+}} offset 128 bytes 32
// PLAN-NEXT: host activation op {{[0-9]+}} offset 192 bytes 32
// PLAN-NEXT: host activation op {{[0-9]+}} offset 256 bytes 32
// PLAN-NEXT: host activation op {{[0-9]+}} offset 320 bytes 32
// PLAN-NOT: host activation

// Without offload the step arena needs 768 bytes; with every saved
// activation offloaded, 512 (above).
// DEVICE: persistent_bytes 1024, arena_bytes 768, scratch_bytes 8, peak_bytes 1800{{$}}

// auto under a budget: the fewest saved activations, in forward order,
// whose offload brings the peak within it. 1700 bytes: the first two (%n0
// and %a0) bring it to 1672.
// AUTO: persistent_bytes 1024, arena_bytes 640, scratch_bytes 8, peak_bytes 1672, host_bytes 128
// AUTO-COUNT-2: host activation op
// AUTO-NOT: host activation op
// A budget the plan meets offloads nothing.
// FITS: persistent_bytes 1024, arena_bytes 768, scratch_bytes 8, peak_bytes 1800{{$}}
// FITS-NOT: host activation op

// BAD: zero-offload-activations: device must be none, cpu or auto, got 'gpu'
// NOBUDGET: zero-offload-activations: device=auto offloads what a memory budget needs: give budget (zero-pipeline: memory-budget)
zero.param @h.0.norm : tensor<4xf32> init ones
zero.param @h.0.w : tensor<4x4xf32> init normal std 0.5
zero.param @h.1.norm : tensor<4xf32> init ones
zero.param @h.1.w : tensor<4x4xf32> init normal std 0.5
zero.param @head.w : tensor<4x3xf32> init normal std 0.5
zero.train_step @blocks(%x: tensor<2x4xf32>, %y: tensor<2xi64>) optimizer #zero.optimizer<kind = adam, lr = 1.0e-03> precision #zero.precision<kind = fp32> {
  %n0w = zero.get_param @h.0.norm : tensor<4xf32>
  %n0 = nn.rms_norm %x, %n0w eps 1.0e-05 : tensor<2x4xf32>, tensor<4xf32>
  %w0 = zero.get_param @h.0.w : tensor<4x4xf32>
  %a0 = nn.matmul %n0, %w0 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %g0 = nn.gelu %a0 : tensor<2x4xf32>
  %r0 = nn.add %x, %g0 : tensor<2x4xf32>, tensor<2x4xf32>
  %n1w = zero.get_param @h.1.norm : tensor<4xf32>
  %n1 = nn.rms_norm %r0, %n1w eps 1.0e-05 : tensor<2x4xf32>, tensor<4xf32>
  %w1 = zero.get_param @h.1.w : tensor<4x4xf32>
  %a1 = nn.matmul %n1, %w1 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %g1 = nn.gelu %a1 : tensor<2x4xf32>
  %r1 = nn.add %r0, %g1 : tensor<2x4xf32>, tensor<2x4xf32>
  %wh = zero.get_param @head.w : tensor<4x3xf32>
  %logits = nn.matmul %r1, %wh : tensor<2x4xf32>, tensor<4x3xf32> -> tensor<2x3xf32>
  %loss = nn.softmax_cross_entropy %logits, %y : tensor<2x3xf32>, tensor<2xi64> -> tensor<f32>
  %seed = nn.fill 1.0 {zero.loss_seed} : tensor<f32>
  %dlogits = nn.softmax_cross_entropy_grad %logits, %y, %seed : tensor<2x3xf32>, tensor<2xi64>, tensor<f32>
  %dr1 = nn.matmul %dlogits, %wh transpose_rhs : tensor<2x3xf32>, tensor<4x3xf32> -> tensor<2x4xf32>
  %dwh = nn.matmul %r1, %dlogits transpose_lhs : tensor<2x4xf32>, tensor<2x3xf32> -> tensor<4x3xf32>
  zero.grad @head.w, %dwh : tensor<4x3xf32>
  %da1 = nn.gelu_grad %a1, %dr1 : tensor<2x4xf32>
  %dn1 = nn.matmul %da1, %w1 transpose_rhs : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %dw1 = nn.matmul %n1, %da1 transpose_lhs : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
  zero.grad @h.1.w, %dw1 : tensor<4x4xf32>
  %dr0n, %dn1w = nn.rms_norm_grad %r0, %n1w, %dn1 eps 1.0e-05 : tensor<2x4xf32>, tensor<4xf32>
  %dr0 = nn.add %dr1, %dr0n : tensor<2x4xf32>, tensor<2x4xf32>
  zero.grad @h.1.norm, %dn1w : tensor<4xf32>
  %da0 = nn.gelu_grad %a0, %dr0 : tensor<2x4xf32>
  %dn0 = nn.matmul %da0, %w0 transpose_rhs : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %dw0 = nn.matmul %n0, %da0 transpose_lhs : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
  zero.grad @h.0.w, %dw0 : tensor<4x4xf32>
  %dx, %dn0w = nn.rms_norm_grad %x, %n0w, %dn0 eps 1.0e-05 : tensor<2x4xf32>, tensor<4xf32>
  zero.grad @h.0.norm, %dn0w : tensor<4xf32>
  zero.return %loss : tensor<f32>
}
