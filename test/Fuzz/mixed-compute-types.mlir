// Found by zero-fuzz: parameters that compute in different types (a module
// kept in fp32 beside a bf16 one). zero-partition put both in one group
// whose master buffer the fp32 parameter must not have, and the
// partition's verifier rejected the IR the pass left. A change of compute
// type now starts a new group, so each keeps its own master (or none).
// RUN: zero-opt %s --zero-pipeline="stage=2 world-size=2" 2>&1 | FileCheck %s
// RUN: zero-compile %s --stage 2 --world-size 2 --emit llvm -o /dev/null
// RUN: zero-opt %s --zero-pipeline="stage=2 world-size=2" --zero-plan-memory 2>&1 | FileCheck %s --check-prefix=PLAN
// RUN: zero-opt %s --zero-pipeline="stage=2 world-size=2" --zero-report=format=text -o /dev/null 2>&1 | FileCheck %s --check-prefix=REPORT

// CHECK: zero.partition @flat stage 2 world_size 2 alignment 2 numel 8 padded 8 params [@w]
// CHECK: zero.partition @flat_1 stage 2 world_size 2 alignment 2 numel 128 padded 128 params [@transformer.wte.weight]
// The bf16 group has a master buffer, the fp32 one none.
// PLAN: zero.partition @flat {{.*}}master =
// PLAN: zero.partition @flat_1
// PLAN-NOT: master
// PLAN-SAME: {{$}}
// The report names both compute types and sums each group's model states
// by its own formula: the bf16 group's 8 elements 2S + 14S'/n = 72 bytes,
// the fp32 group's 128 4S + 12S'/n = 1280.
// REPORT: bf16+fp32 parameters
// REPORT: = model states 1352
// REPORT: Model states add up each group's in its own compute type (bf16+fp32): 2S + 14S'/n for 16-bit groups, 4S + 12S'/n for fp32 ones
zero.param @w : tensor<8xf32> init zeros compute bf16
zero.param @transformer.wte.weight : tensor<16x8xf32> init normal std 0.02
zero.train_step @tied(%ids: tensor<2x3xi32>, %y: tensor<2x3xi32>) optimizer #zero.optimizer<kind = adam, lr = 1.0e-3> precision #zero.precision<kind = fp32> {
  %wte = zero.get_param @transformer.wte.weight : tensor<16x8xf32>
  %e = nn.embedding %wte[%ids] : tensor<16x8xf32>, tensor<2x3xi32> -> tensor<2x3x8xf32>
  %r = nn.relu %e : tensor<2x3x8xf32>
  %logits = nn.matmul %r, %wte transpose_rhs : tensor<2x3x8xf32>, tensor<16x8xf32> -> tensor<2x3x16xf32>
  %loss = nn.softmax_cross_entropy %logits, %y : tensor<2x3x16xf32>, tensor<2x3xi32> -> tensor<f32>
  zero.return %loss : tensor<f32>
}
