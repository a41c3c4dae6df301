// RUN: zero-opt %s --zero-param-gather="offload-param=nvme param-nvme-path=/nvme param-persistence-threshold=0 param-buffer-count=1" --zero-optimizer --zero-plan-memory --zero-verify-schedule | FileCheck %s --check-prefix=STORE
// RUN: zero-opt %s --zero-param-gather="offload-param=nvme param-nvme-path=/nvme param-persistence-threshold=0 param-buffer-count=2" --zero-optimizer="offload-optimizer=cpu" --zero-plan-memory --zero-verify-schedule | FileCheck %s --check-prefix=HOST
// RUN: zero-opt %s --zero-param-gather="offload-param=nvme param-nvme-path=/nvme param-persistence-threshold=0 param-buffer-count=1" --zero-optimizer="offload-optimizer=nvme nvme-path=/opt" --zero-plan-memory --zero-verify-schedule | FileCheck %s --check-prefix=BOTH

// The optimizer step writes the new parameters back to the swap file
// through the swap buffers. With the optimizer on the device each Adam's
// staged new parameters go back right after it; with one buffer, g2's write
// waits for g1's (which used it) first. With the optimizer in host memory
// the host Adam's host_params go back the same way, round robin over the
// two buffers. The plan: the shards in the parameter swap file (one block
// each at 0 and 4096: param_nvme_bytes 8192, all of nvme_bytes) and the
// swap buffers in the host arena (param_swap_bytes = buffers * 4096, after
// the host buffers at a 4096-byte boundary).
zero.param @w1 : tensor<4x4xf32> init zeros compute bf16
zero.param @w2 : tensor<4x4xf32> init zeros compute bf16
// STORE: zero.partition @g1 {{.*}} {zero.buffers = #zero.buffer_offsets<params = 0, grads = 0, master = 64, exp_avg = 128, exp_avg_sq = 192>}
// STORE: zero.partition @g2 {{.*}} {zero.buffers = #zero.buffer_offsets<params = 4096, grads = 256, master = 320, exp_avg = 384, exp_avg_sq = 448>}
// HOST: zero.partition @g1 {{.*}} {zero.buffers = #zero.buffer_offsets<params = 0, grads = 0, master = 0, exp_avg = 64, exp_avg_sq = 128, host_grads = 192, host_params = 256>}
// HOST: zero.partition @g2 {{.*}} {zero.buffers = #zero.buffer_offsets<params = 4096, grads = 64, master = 320, exp_avg = 384, exp_avg_sq = 448, host_grads = 512, host_params = 576>}
zero.partition @g1 stage 3 world_size 2 alignment 2 numel 16 padded 16 params [@w1] offsets [0]
zero.partition @g2 stage 3 world_size 2 alignment 2 numel 16 padded 16 params [@w2] offsets [0]
// STORE-LABEL: zero.train_step @opt
// STORE-SAME: host_bytes = 4096, nvme_bytes = 8192, param_nvme_bytes = 8192, param_swap_bytes = 4096>
// STORE: %[[N1:.*]] = zero.optimizer_step group @g1 {{.*}} -> tensor<8xbf16>
// STORE-NEXT: %[[W1:.*]] = zero.transfer group @g1 %[[N1]] to params swap <buffer = 0, buffers = 1, buffer_bytes = 4096> phase boundary : tensor<8xbf16> -> !zero.token
// STORE-NEXT: %[[N2:.*]] = zero.optimizer_step group @g2 {{.*}} -> tensor<8xbf16>
// STORE-NEXT: zero.wait %[[W1]] phase  boundary
// STORE-NEXT: %[[W2:.*]] = zero.transfer group @g2 %[[N2]] to params swap <buffer = 0, buffers = 1, buffer_bytes = 4096> phase boundary : tensor<8xbf16> -> !zero.token
// STORE-NEXT: zero.wait %[[W2]] phase  boundary
// Both on NVMe: two swap files per rank. The optimizer's holds the master,
// exp_avg and exp_avg_sq shards (8 fp32 = 32 bytes, one block each) of both
// partitions: 6 blocks = 24576 bytes; the parameters' 8192 bytes, so
// nvme_bytes 32768. The host arena: the gradient and parameter copies (16
// bytes each at 0, 64, 128, 192), the optimizer's 4 swap buffers of a
// 1024-element chunk of the three states at 4096 (49152 bytes), then the
// parameters' one buffer at 53248 (4096 bytes): host_bytes 57344. The host
// Adam swaps the states and its host_params go back to the parameter file.
// BOTH: zero.partition @g1 {{.*}} {zero.buffers = #zero.buffer_offsets<params = 0, grads = 0, master = 0, exp_avg = 4096, exp_avg_sq = 8192, host_grads = 0, host_params = 64>}
// BOTH: zero.partition @g2 {{.*}} {zero.buffers = #zero.buffer_offsets<params = 4096, grads = 64, master = 12288, exp_avg = 16384, exp_avg_sq = 20480, host_grads = 128, host_params = 192>}
// BOTH-LABEL: zero.train_step @opt
// BOTH-SAME: host_bytes = 57344, nvme_bytes = 32768, swap_offset = 4096, swap_bytes = 49152, param_nvme_bytes = 8192, param_swap_offset = 53248, param_swap_bytes = 4096>
// BOTH: zero.optimizer_step group @g1 {{.*}} host swap <chunk = 1024, buffers = 4> phase  boundary
// BOTH-NEXT: zero.transfer group @g1 host_params to params swap <buffer = 0, buffers = 1, buffer_bytes = 4096> phase boundary -> !zero.token
// HOST-LABEL: zero.train_step @opt
// HOST-SAME: host_bytes = 12288, nvme_bytes = 8192, param_nvme_bytes = 8192, param_swap_offset = 4096, param_swap_bytes = 8192>
// HOST: zero.optimizer_step group @g1 {{.*}} host phase  boundary
// HOST-NEXT: %[[W1:.*]] = zero.transfer group @g1 host_params to params swap <buffer = 0, buffers = 2, buffer_bytes = 4096> phase boundary -> !zero.token
// HOST: zero.optimizer_step group @g2 {{.*}} host phase  boundary
// HOST-NEXT: %[[W2:.*]] = zero.transfer group @g2 host_params to params swap <buffer = 1, buffers = 2, buffer_bytes = 4096> phase boundary -> !zero.token
// HOST-NEXT: zero.wait %[[W1]] phase  boundary
// HOST-NEXT: zero.wait %[[W2]] phase  boundary
zero.train_step @opt(%x: tensor<2x4xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4> {
  %w1 = zero.get_param @w1 : tensor<4x4xbf16>
  %h = nn.matmul %x, %w1 : tensor<2x4xbf16>, tensor<4x4xbf16> -> tensor<2x4xbf16>
  %w2 = zero.get_param @w2 : tensor<4x4xbf16>
  %y = nn.matmul %h, %w2 : tensor<2x4xbf16>, tensor<4x4xbf16> -> tensor<2x4xbf16>
  %loss = nn.fill 0.0 : tensor<f32>
  %g = nn.fill 1.0 : tensor<4x4xbf16>
  zero.grad @w1, %g : tensor<4x4xbf16>
  zero.reduce_scatter group @g1 [0, 16) from %g at [0] : tensor<4x4xbf16>
  %g2 = nn.fill 1.0 : tensor<4x4xbf16>
  zero.grad @w2, %g2 : tensor<4x4xbf16>
  zero.reduce_scatter group @g2 [0, 16) from %g2 at [0] : tensor<4x4xbf16>
  zero.free %g : tensor<4x4xbf16>
  zero.free %g2 : tensor<4x4xbf16>
  zero.return %loss : tensor<f32>
}
