// Bad options and batches are errors with the numbers in the message.
// RUN: zero-model-gen mlp --sizes 8,4 --batch 10 | not zero-opt --zero-partition="stage=2 world-size=4" 2>&1 | FileCheck %s --check-prefix=BATCH
// RUN: zero-model-gen mlp --sizes 8,4 --batch 8 | not zero-opt --zero-partition="stage=4 world-size=4" 2>&1 | FileCheck %s --check-prefix=STAGE
// RUN: zero-model-gen mlp --sizes 8,4 --batch 8 | not zero-opt --zero-partition="stage=1 world-size=0" 2>&1 | FileCheck %s --check-prefix=WS
// RUN: zero-model-gen mlp --sizes 8,4 --batch 8 | not zero-opt --zero-partition="stage=1 alignment=0" 2>&1 | FileCheck %s --check-prefix=ALIGN
// RUN: zero-model-gen mlp --sizes 8,4 --batch 8 | not zero-opt --zero-partition --zero-partition 2>&1 | FileCheck %s --check-prefix=TWICE

// BATCH: error: train step @train global batch 10 is not divisible by world-size 4
// STAGE: error: zero-partition: stage must be 0, 1, 2 or 3, got 4
// WS: error: zero-partition: world-size must be >= 1, got 0
// ALIGN: error: zero-partition: alignment must be >= 1, got 0
// TWICE: error: zero-partition: the module is already partitioned
