// Bad options and configs: clear errors, non-zero exit, no crash.
// RUN: zero-model-gen mlp --sizes 8,4 --batch 8 | not zero-opt --zero-pipeline="stage=4 world-size=4" 2>&1 | FileCheck %s --check-prefix=STAGE
// RUN: zero-model-gen mlp --sizes 8,4 --batch 8 | not zero-opt --zero-pipeline="stage=2 world-size=0" 2>&1 | FileCheck %s --check-prefix=WS
// RUN: zero-model-gen mlp --sizes 8,4 --batch 8 | not zero-opt --zero-pipeline="stage=2 world-size=4 reduce-bucket-size=0" 2>&1 | FileCheck %s --check-prefix=BUCKET
// RUN: zero-model-gen mlp --sizes 8,4 --batch 8 | not zero-opt --zero-pipeline="stage=1 world-size=4 allgather-bucket-size=0" 2>&1 | FileCheck %s --check-prefix=AGBUCKET
// RUN: zero-model-gen mlp --sizes 8,4 --batch 8 | not zero-opt --zero-pipeline="stage=3 world-size=4 prefetch-bucket-size=0" 2>&1 | FileCheck %s --check-prefix=PFBUCKET
// RUN: zero-model-gen mlp --sizes 8,4 --batch 10 | not zero-opt --zero-pipeline="stage=2 world-size=4" 2>&1 | FileCheck %s --check-prefix=BATCH
// RUN: zero-model-gen mlp --sizes 8,4 --batch 8 | not zero-opt --zero-pipeline="stage=2 world-size=4 dtype=fp8" 2>&1 | FileCheck %s --check-prefix=DTYPE
// RUN: zero-model-gen mlp --sizes 8,4 --batch 8 | not zero-opt --zero-pipeline="world-size=4 config=%S/Inputs/ds_fp16_bf16.json" 2>&1 | FileCheck %s --check-prefix=BOTH
// RUN: zero-model-gen mlp --sizes 8,4 --batch 64 | not zero-opt --zero-pipeline="world-size=4 config=%S/Inputs/ds_bad_batch.json" 2>&1 | FileCheck %s --check-prefix=TBS
// RUN: zero-model-gen mlp --sizes 8,4 --batch 64 | not zero-opt --zero-pipeline="world-size=4 config=%S/Inputs/ds_bad_micro.json" 2>&1 | FileCheck %s --check-prefix=MICRO
// RUN: zero-model-gen mlp --sizes 8,4 --batch 8 | not zero-opt --zero-pipeline="config=%S/Inputs/ds_not_json.json" 2>&1 | FileCheck %s --check-prefix=JSON
// RUN: zero-model-gen mlp --sizes 8,4 --batch 8 | not zero-opt --zero-pipeline="config=%S/Inputs/ds_sgd.json" 2>&1 | FileCheck %s --check-prefix=SGD
// RUN: zero-model-gen mlp --sizes 8,4 --batch 8 | not zero-opt --zero-pipeline="config=%S/Inputs/missing.json" 2>&1 | FileCheck %s --check-prefix=MISSING

// STAGE: error: zero-partition: stage must be 0, 1, 2 or 3, got 4
// WS: error: zero-partition: world-size must be >= 1, got 0
// BUCKET: error: zero-grad-sync: reduce-bucket-size must be positive, got 0
// AGBUCKET: error: zero-param-gather: allgather-bucket-size must be positive, got 0
// PFBUCKET: error: zero-prefetch: prefetch-bucket-size and max-live-parameters must be positive, got 0 and 1000000000
// BATCH: error: train step @train global batch 10 is not divisible by world-size 4
// DTYPE: error: zero-mixed-precision: unknown dtype 'fp8'
// BOTH: ds_fp16_bf16.json:1:22: error: fp16.enabled and bf16.enabled are both true
// TBS: ds_bad_batch.json:1:22: error: train_batch_size 32 does not match the global batch 64 of train step @train
// MICRO: ds_bad_micro.json:1:22: error: Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * gradient_acc_step * world_size 64 != 4 * 2 * 4
// JSON: ds_not_json.json:2:1: error: syntax error: expected ',' or '}' after the value of "zero_optimization"
// SGD: ds_sgd.json:1:24: error: optimizer.type: 'sgd' is not supported (supported: Adam, AdamW, Lion, SGD, Muon, Adafactor, NAdam)
// MISSING: error: {{.*}}missing.json: cannot read the file: {{.*}}
