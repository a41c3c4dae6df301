// RUN: zero-opt %s -split-input-file --zero-param-gather="offload-param=cpu param-persistence-threshold=0" | FileCheck %s --check-prefix=GATHER
// RUN: zero-opt %s -split-input-file --zero-param-gather="offload-param=cpu" | FileCheck %s --check-prefix=PERSIST
// RUN: zero-opt %s -split-input-file --zero-param-gather="offload-param=cpu param-persistence-threshold=0" --zero-prefetch | FileCheck %s --check-prefix=AHEAD
// RUN: zero-opt %s -split-input-file --zero-param-gather="offload-param=cpu param-persistence-threshold=0" --zero-prefetch="prefetch-bucket-size=24" | FileCheck %s --check-prefix=TIGHT
// RUN: not zero-opt %s -split-input-file --zero-param-gather="offload-param=disk" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not zero-opt %s -split-input-file --zero-param-gather="offload-param=nvme" 2>&1 | FileCheck %s --check-prefix=NVME

// BAD: error: zero-param-gather: offload-param must be none, cpu or nvme, got 'disk'
// NVME: error: zero-param-gather: parameter offload to nvme needs a param_nvme_path

// Parameter offload at stage 3: two bf16 groups of 16 elements (shards of
// 8). Each gather reads a staged device copy of the host shard: the copy,
// its wait, the gather `from` the staged buffer and the staged buffer's free
// right after it.
zero.param @w1 : tensor<4x4xbf16> init zeros
zero.param @w2 : tensor<4x4xbf16> init zeros
zero.partition @g1 stage 3 world_size 2 alignment 2 numel 16 padded 16 params [@w1] offsets [0]
zero.partition @g2 stage 3 world_size 2 alignment 2 numel 16 padded 16 params [@w2] offsets [0]
// GATHER-LABEL: zero.train_step @train
// GATHER-SAME: offload #zero.offload<param = cpu>
// GATHER-NEXT: %[[S1:.*]], %[[T1:.*]] = zero.transfer group @g1 params to staging : tensor<8xbf16> -> !zero.token
// GATHER-NEXT: zero.wait %[[T1]]
// GATHER-NEXT: %[[F1:.*]] = zero.all_gather group @g1 from %[[S1]] : tensor<8xbf16> : tensor<16xbf16>
// GATHER-NEXT: zero.free %[[S1]] : tensor<8xbf16>
// GATHER-NEXT: zero.get_param @w1 from %[[F1]]
// GATHER-NEXT: nn.matmul
// GATHER-NEXT: zero.free %[[F1]]
// GATHER-NEXT: %[[S2:.*]], %[[T2:.*]] = zero.transfer group @g2 params to staging : tensor<8xbf16> -> !zero.token
// GATHER-NEXT: zero.wait %[[T2]]
// GATHER-NEXT: zero.all_gather group @g2 from %[[S2]] : tensor<8xbf16> : tensor<16xbf16>
// GATHER-NEXT: zero.free %[[S2]] : tensor<8xbf16>
// Persistent groups: both staged and gathered once at the top.
// PERSIST-LABEL: zero.train_step @train
// PERSIST-NEXT: %[[S1:.*]], %[[T1:.*]] = zero.transfer group @g1 params to staging
// PERSIST-NEXT: zero.wait %[[T1]]
// PERSIST-NEXT: zero.all_gather group @g1 from %[[S1]] : tensor<8xbf16> persistent
// PERSIST-NEXT: zero.free %[[S1]]
// PERSIST-NEXT: %[[S2:.*]], %[[T2:.*]] = zero.transfer group @g2 params to staging
// PERSIST-NEXT: zero.wait %[[T2]]
// PERSIST-NEXT: zero.all_gather group @g2 from %[[S2]] : tensor<8xbf16> persistent
// PERSIST-NEXT: zero.free %[[S2]]
// PERSIST-NEXT: zero.get_param @w1
// DeepSpeed's budgets hoist both gathers to the top; g2's copy is issued
// right after g1's gather (at g1's issue point), and each staged buffer is
// freed once its gather completed, before the first use.
// AHEAD-LABEL: zero.train_step @train
// AHEAD-NEXT: %[[S1:.*]], %[[T1:.*]] = zero.transfer group @g1 params to staging
// AHEAD-NEXT: zero.wait %[[T1]]
// AHEAD-NEXT: %[[F1:.*]], %[[P1:.*]] = zero.prefetch group @g1 from %[[S1]] : tensor<8xbf16> : tensor<16xbf16>
// AHEAD-NEXT: %[[S2:.*]], %[[T2:.*]] = zero.transfer group @g2 params to staging
// AHEAD-NEXT: zero.wait %[[T2]]
// AHEAD-NEXT: %[[F2:.*]], %[[P2:.*]] = zero.prefetch group @g2 from %[[S2]]
// AHEAD-NEXT: zero.wait %[[P1]]
// AHEAD-NEXT: zero.free %[[S1]]
// AHEAD-NEXT: zero.get_param @w1 from %[[F1]]
// AHEAD: zero.wait %[[P2]]
// AHEAD-NEXT: zero.free %[[S2]]
// AHEAD-NEXT: zero.get_param @w2 from %[[F2]]
// With 24 elements in flight g2 (16 + its shard of 8) waits for g1's
// gather: its copy and gather are issued after g1's wait.
// TIGHT-LABEL: zero.train_step @train
// TIGHT: %{{.*}}, %[[P1:.*]] = zero.prefetch group @g1
// TIGHT-NEXT: zero.wait %[[P1]]
// TIGHT-NEXT: zero.free
// TIGHT-NEXT: zero.get_param @w1
// TIGHT-NEXT: %[[S2:.*]], %[[T2:.*]] = zero.transfer group @g2 params to staging
// TIGHT-NEXT: zero.wait %[[T2]]
// TIGHT-NEXT: zero.prefetch group @g2 from %[[S2]]
// TIGHT-NEXT: nn.matmul
zero.train_step @train(%x: tensor<2x4xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4> {
  %w1 = zero.get_param @w1 : tensor<4x4xbf16>
  %h = nn.matmul %x, %w1 : tensor<2x4xbf16>, tensor<4x4xbf16> -> tensor<2x4xbf16>
  %w2 = zero.get_param @w2 : tensor<4x4xbf16>
  %y = nn.matmul %h, %w2 : tensor<2x4xbf16>, tensor<4x4xbf16> -> tensor<2x4xbf16>
  %loss = nn.fill 0.0 : tensor<f32>
  zero.return %loss : tensor<f32>
}

