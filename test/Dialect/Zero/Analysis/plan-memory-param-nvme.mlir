// RUN: zero-opt %s --zero-plan-memory --zero-verify-schedule | FileCheck %s
// RUN: zero-opt %s --zero-print-memory-plan -o /dev/null | FileCheck %s --check-prefix=PRINT

// Parameter offload to NVMe (stage 3, bf16, world size 2, a 12-element
// padded group): the params shard (6 bf16 = 12 bytes) is the rank's
// parameter swap file, padded to one 4096-byte block: param_nvme_bytes =
// nvme_bytes = 4096. The host arena holds only the 2 swap buffers of one
// block each (the shard's 12 bytes in whole blocks): param_swap_bytes 8192
// at 0, host_bytes 8192. The device keeps the grads shard (12 bytes) at 0
// and the fp32 master, exp_avg and exp_avg_sq shards (24 bytes each) at
// 64, 128 and 192: 256 bytes, and the step arena is the same as with
// offload to host memory (the staged copy and the staged new parameters).
// CHECK: zero.partition @fc1 {{.*}} {zero.buffers = #zero.buffer_offsets<params = 0, grads = 0, master = 64, exp_avg = 128, exp_avg_sq = 192>}
// CHECK-LABEL: zero.train_step @valid
// CHECK-SAME: zero.plan = #zero.memory_plan<persistent_bytes = 256, arena_bytes = 384, scratch_bytes = 80, peak_bytes = 720, host_bytes = 8192, nvme_bytes = 4096, param_nvme_bytes = 4096, param_swap_bytes = 8192>
// CHECK: zero.transfer group @fc1 params to staging swap <buffer = 0, buffers = 2, buffer_bytes = 4096> {zero.alloc = array<i64: 128, -1>} : tensor<6xbf16> -> !zero.token
// PRINT: persistent_bytes 256, arena_bytes 384, scratch_bytes 80, peak_bytes 720, host_bytes 8192, nvme_bytes 4096, param_nvme_bytes 4096, param_swap_offset 0, param_swap_bytes 8192
// PRINT-NEXT: nvme @fc1 params offset 0 bytes 12
// PRINT-NEXT: persistent @fc1 grads offset 0 bytes 12
// PRINT-NEXT: persistent @fc1 master offset 64 bytes 24
// PRINT-NEXT: persistent @fc1 exp_avg offset 128 bytes 24
// PRINT-NEXT: persistent @fc1 exp_avg_sq offset 192 bytes 24
// PRINT: arena op 0 zero.transfer result #0 offset 128 bytes 12 live [0, 5] gather_buffers
zero.param @fc1.weight : tensor<4x2xf32> init normal std 5.000000e-01 compute bf16
zero.param @fc1.bias : tensor<2xf32> init zeros compute bf16
zero.partition @fc1 stage 3 world_size 2 alignment 2 numel 10 padded 12 params [@fc1.weight, @fc1.bias] offsets [0, 8]
zero.train_step @valid(%x: tensor<2x4xf32>, %y: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.000000e-03>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4>
    offload #zero.offload<param = nvme, param_nvme_path = "/nvme", param_buffer_count = 2> {
  %s, %st = zero.transfer group @fc1 params to staging swap <buffer = 0, buffers = 2, buffer_bytes = 4096> : tensor<6xbf16> -> !zero.token
  zero.wait %st
  %full, %pt = zero.prefetch group @fc1 from %s : tensor<6xbf16> : tensor<12xbf16>
  %0 = nn.cast %x : tensor<2x4xf32> to tensor<2x4xbf16>
  zero.wait %pt
  zero.free %s : tensor<6xbf16>
  %1 = zero.get_param @fc1.weight from %full : tensor<12xbf16> -> tensor<4x2xbf16>
  %2 = nn.matmul %0, %1 : tensor<2x4xbf16>, tensor<4x2xbf16> -> tensor<2x2xbf16>
  %3 = zero.get_param @fc1.bias from %full : tensor<12xbf16> -> tensor<2xbf16>
  %4 = nn.add %2, %3 : tensor<2x2xbf16>, tensor<2xbf16>
  zero.free %full : tensor<12xbf16>
  %5 = nn.softmax_cross_entropy %4, %y : tensor<2x2xbf16>, tensor<2xi64> -> tensor<f32>
  %6 = nn.fill 1.000000e+00 {zero.loss_seed} : tensor<f32>
  %7 = nn.softmax_cross_entropy_grad %4, %y, %6 : tensor<2x2xbf16>, tensor<2xi64>, tensor<f32>
  %8 = nn.reduce_sum %7 : tensor<2x2xbf16> -> tensor<2xbf16>
  zero.grad @fc1.bias, %8 : tensor<2xbf16>
  %9 = nn.matmul %0, %7 transpose_lhs : tensor<2x4xbf16>, tensor<2x2xbf16> -> tensor<4x2xbf16>
  zero.grad @fc1.weight, %9 : tensor<4x2xbf16>
  zero.reduce_scatter group @fc1 [0, 10) from %9, %8 at [0, 0] : tensor<4x2xbf16>, tensor<2xbf16>
  zero.free %9 : tensor<4x2xbf16>
  zero.free %8 : tensor<2xbf16>
  %10 = zero.loss_scale phase boundary : tensor<f32>
  %11 = zero.check_overflow groups [@fc1] scale %10 divisor 2.000000e+00 phase boundary : tensor<2xf32>
  %r = zero.all_reduce overflow_norm %11 group @fc1 phase boundary : tensor<2xf32> -> tensor<2xf32>
  %12 = zero.update_loss_scale %r phase boundary : tensor<2xf32> -> i1
  %13 = zero.optimizer_step group @fc1 stats %r scale %10 skip %12 divisor 2.000000e+00 phase boundary : tensor<2xf32> -> tensor<6xbf16>
  %ut = zero.transfer group @fc1 %13 to params swap <buffer = 1, buffers = 2, buffer_bytes = 4096> phase boundary : tensor<6xbf16> -> !zero.token
  zero.wait %ut phase boundary
  zero.free %13 phase boundary : tensor<6xbf16>
  zero.return %5 : tensor<f32>
}
