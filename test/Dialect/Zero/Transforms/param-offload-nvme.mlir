// RUN: zero-opt %s -split-input-file --zero-param-gather="offload-param=nvme param-nvme-path=/nvme param-persistence-threshold=0 param-buffer-count=2" | FileCheck %s --check-prefix=GATHER
// RUN: zero-opt %s -split-input-file --zero-param-gather="offload-param=nvme param-nvme-path=/nvme param-persistence-threshold=0 param-buffer-count=2" --zero-prefetch="prefetch-bucket-size=32 max-live-parameters=48" | FileCheck %s --check-prefix=AHEAD
// RUN: zero-opt %s -split-input-file --zero-param-gather="offload-param=nvme param-nvme-path=/nvme param-persistence-threshold=0 param-buffer-count=3" --zero-prefetch | FileCheck %s --check-prefix=THREE
// RUN: zero-opt %s -split-input-file --zero-param-gather="offload-param=nvme nvme-path=/nvme param-persistence-threshold=0 param-buffer-count=1" --zero-prefetch="prefetch-bucket-size=32 max-live-parameters=48" | FileCheck %s --check-prefix=ONE
// RUN: not zero-opt %s -split-input-file --zero-param-gather="offload-param=nvme param-nvme-path=/nvme param-buffer-size=7" 2>&1 | FileCheck %s --check-prefix=SMALL
// RUN: not zero-opt %s -split-input-file --zero-param-gather="offload-param=nvme param-nvme-path=/nvme param-buffer-count=0" 2>&1 | FileCheck %s --check-prefix=COUNT

// Parameter offload to NVMe (ZeRO-Infinity) at stage 3: three bf16 groups
// of 16 elements (shards of 8 = 16 bytes, one 4096-byte block each). Every
// gather reads a staged device copy of its shard, read from the parameter
// swap file through one of the param-buffer-count swap buffers: the copies
// take buffers 0, 1, 0 in program order, each the largest shard in whole
// blocks (4096 bytes).
// SMALL: error: zero-param-gather: param-buffer-size (offload_param.buffer_size) of 7 elements cannot hold the 8-element parameter shard of @g1: a swap buffer holds a whole shard
// COUNT: error: zero-param-gather: param_buffer_count must be >= 1, got 0
zero.param @w1 : tensor<4x4xbf16> init zeros
zero.param @w2 : tensor<4x4xbf16> init zeros
zero.param @w3 : tensor<4x4xbf16> init zeros
zero.partition @g1 stage 3 world_size 2 alignment 2 numel 16 padded 16 params [@w1] offsets [0]
zero.partition @g2 stage 3 world_size 2 alignment 2 numel 16 padded 16 params [@w2] offsets [0]
zero.partition @g3 stage 3 world_size 2 alignment 2 numel 16 padded 16 params [@w3] offsets [0]
// GATHER-LABEL: zero.train_step @train
// GATHER-SAME: offload #zero.offload<param = nvme, param_nvme_path = "/nvme", param_buffer_count = 2>
// GATHER-NEXT: %[[S1:.*]], %[[T1:.*]] = zero.transfer group @g1 params to staging swap <buffer = 0, buffers = 2, buffer_bytes = 4096> : tensor<8xbf16> -> !zero.token
// GATHER-NEXT: zero.wait %[[T1]]
// GATHER-NEXT: %[[F1:.*]] = zero.all_gather group @g1 from %[[S1]] : tensor<8xbf16> : tensor<16xbf16>
// GATHER-NEXT: zero.free %[[S1]] : tensor<8xbf16>
// GATHER: zero.transfer group @g2 params to staging swap <buffer = 1, buffers = 2, buffer_bytes = 4096>
// GATHER: zero.transfer group @g3 params to staging swap <buffer = 0, buffers = 2, buffer_bytes = 4096>
// zero-prefetch issues each read up to one gather less than there are
// swap buffers ahead, before that gather's staging wait, once its buffer
// is free, where the budgets allow: with two buffers g2's read (buffer 1)
// is in flight beside g1's, and g3's (buffer 0, free again once g1's read
// was waited for) is issued at g2's issue point, before g2's read is
// waited for, and runs while the first two matmuls run.
// AHEAD-LABEL: zero.train_step @train
// AHEAD-NEXT: %[[S1:.*]], %[[T1:.*]] = zero.transfer group @g1 params to staging swap <buffer = 0,
// AHEAD-NEXT: %[[S2:.*]], %[[T2:.*]] = zero.transfer group @g2 params to staging swap <buffer = 1,
// AHEAD-NEXT: zero.wait %[[T1]]
// AHEAD-NEXT: %[[F1:.*]], %[[P1:.*]] = zero.prefetch group @g1 from %[[S1]]
// AHEAD-NEXT: zero.wait %[[P1]]
// AHEAD: %[[S3:.*]], %[[T3:.*]] = zero.transfer group @g3 params to staging swap <buffer = 0,
// AHEAD-NEXT: zero.wait %[[T2]]
// AHEAD-NEXT: zero.prefetch group @g2 from %[[S2]]
// AHEAD-NEXT: nn.matmul
// AHEAD-NEXT: nn.matmul
// AHEAD: zero.wait %[[T3]]
// AHEAD-NEXT: zero.prefetch group @g3 from %[[S3]]
// With three buffers and the default budgets every gather is issued at the
// start of the step: the three reads are all in flight on the disk before
// the first is waited for.
// THREE-LABEL: zero.train_step @train
// THREE-NEXT: %[[S1:.*]], %[[T1:.*]] = zero.transfer group @g1 params to staging swap <buffer = 0, buffers = 3,
// THREE-NEXT: %[[S2:.*]], %[[T2:.*]] = zero.transfer group @g2 params to staging swap <buffer = 1, buffers = 3,
// THREE-NEXT: %[[S3:.*]], %[[T3:.*]] = zero.transfer group @g3 params to staging swap <buffer = 2, buffers = 3,
// THREE-NEXT: zero.wait %[[T1]]
// THREE-NEXT: zero.prefetch group @g1 from %[[S1]]
// THREE-NEXT: zero.wait %[[T2]]
// THREE-NEXT: zero.prefetch group @g2 from %[[S2]]
// THREE-NEXT: zero.wait %[[T3]]
// THREE-NEXT: zero.prefetch group @g3 from %[[S3]]
// One buffer (and the optimizer's nvme-path as the parameters' path): every
// copy uses buffer 0, each issued after the previous one was waited for.
// ONE-LABEL: zero.train_step @train
// ONE-SAME: param_nvme_path = "/nvme", param_buffer_count = 1
// ONE: zero.transfer group @g1 params to staging swap <buffer = 0, buffers = 1, buffer_bytes = 4096>
// ONE: zero.transfer group @g2 params to staging swap <buffer = 0, buffers = 1, buffer_bytes = 4096>
// ONE: zero.transfer group @g3 params to staging swap <buffer = 0, buffers = 1, buffer_bytes = 4096>
zero.train_step @train(%x: tensor<2x4xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4> {
  %w1 = zero.get_param @w1 : tensor<4x4xbf16>
  %h = nn.matmul %x, %w1 : tensor<2x4xbf16>, tensor<4x4xbf16> -> tensor<2x4xbf16>
  %h1 = nn.matmul %h, %w1 : tensor<2x4xbf16>, tensor<4x4xbf16> -> tensor<2x4xbf16>
  %w2 = zero.get_param @w2 : tensor<4x4xbf16>
  %y = nn.matmul %h1, %w2 : tensor<2x4xbf16>, tensor<4x4xbf16> -> tensor<2x4xbf16>
  %y1 = nn.matmul %y, %w2 : tensor<2x4xbf16>, tensor<4x4xbf16> -> tensor<2x4xbf16>
  %w3 = zero.get_param @w3 : tensor<4x4xbf16>
  %z = nn.matmul %y1, %w3 : tensor<2x4xbf16>, tensor<4x4xbf16> -> tensor<2x4xbf16>
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}
