// The cost model of gradients streamed to the host (phase last_micro_step),
// worked out by hand from the h100-sxm preset (HBM 2.97 TB/s, 3.3 us per
// kernel, pinned copies at 51.2 GB/s, the CPU Adam at 40 GB/s) for one bf16
// partition of two 1 MiB gradients, @a [0, 524288) and @b [524288, 1048576),
// at stage 2 on one rank (its reductions take no time), with a 128 MiB fill
// standing for the backward between the two buckets:
//   %loss (4 B):                      3.3000 us          ->   3.3000
//   %gb, 1 MiB:   3.3 + 1048576 / 2.97e12 = 3.6531 us      ->   6.9531
//   copy of [524288, 1048576), 1 MiB: 3.3 + 1048576 / 51.2e9 = 23.78 us on
//     the copy stream, from 6.9531 to 30.7331, under the backward:
//   %big, 128 MiB: 3.3 + 134217728 / 2.97e12 = 48.4912 us ->  55.4442
//   %ga, 1 MiB:                       3.6531 us            ->  59.0973
//   copy of [0, 524288): 23.78 us, from 59.0973 to 82.8773
//   check_overflow, reads 2 MiB:      4.0061 us            ->  63.1034
//   update_loss_scale:                3.3000 us            ->  66.4034
//   wait for the first copy: done at 30.7331, nothing exposed;
//   wait for the second: 82.8773 - 66.4034 = 16.4739 us exposed;
//   host Adam, 28 B a parameter: 3.3 + 29360128 / 40e9 = 737.3032 us;
//   the parameters return (2 MiB, 44.26 us), waited for at once.
// Exposed transfer: 16.4739 + 44.26 = 60.7339 us. Copied whole at the
// boundary as before streaming (Inputs/offload-copied-whole.mlir), the 2 MiB
// of gradients (44.26 us) start at 59.0973 and expose 44.26 - 7.3061 =
// 36.9539 us: 81.2139 us. Both schedules pass zero-verify-schedule. The
// step below is scheduled as zero-optimizer leaves it with the optimizer on
// the host (the streamed copies in phase last_micro_step).
// RUN: zero-opt %s --zero-verify-schedule --zero-report="hardware=h100-sxm trace=%t.trace.json" -o /dev/null | FileCheck %s
// RUN: zero-opt %S/Inputs/offload-copied-whole.mlir --zero-verify-schedule --zero-report="hardware=h100-sxm" -o /dev/null | FileCheck %s --check-prefix=WHOLE
// RUN: %python -c "import json; e = [x for x in json.load(open('%t.trace.json'))['traceEvents'] if x.get('pid') == 0 and x['ph'] == 'X']; c = [x for x in e if x['cat'] == 'copy']; big = [x for x in e if x['name'] == 'nn.fill' and x['dur'] > 40][0]; print('copies', len(c), 'first copy', round(c[0]['ts'], 4), round(c[0]['dur'], 4), 'backward', round(big['ts'], 4), round(big['ts'] + big['dur'], 4), 'overlaps', c[0]['ts'] < big['ts'] + big['dur'] and c[0]['ts'] + c[0]['dur'] > big['ts'])" | FileCheck %s --check-prefix=TRACE

// With two micro steps (and the divisor of two) the copies run in the second
// only.
// RUN: sed -e 's/global_batch = 2>/global_batch = 4, accumulation_steps = 2>/' -e 's/divisor 1.0 /divisor 2.0 /' %s | zero-opt --zero-report="hardware=h100-sxm trace=%t.acc.json" -o /dev/null
// RUN: %python -c "import json; e = [x for x in json.load(open('%t.acc.json'))['traceEvents'] if x.get('pid') == 0 and x['ph'] == 'X']; print('copies in micro steps', [x['args']['micro_step'] for x in e if x['cat'] == 'copy'], 'fills', len([x for x in e if x['name'] == 'nn.fill']))" | FileCheck %s --check-prefix=ACC

// CHECK: "exposed_transfer_ms": 0.06073{{[0-9]*}},
// WHOLE: "exposed_transfer_ms": 0.08121{{[0-9]*}},
// ACC: copies in micro steps [1, 1, 1] fills 8
// TRACE: copies 3 first copy 6.9531 23.78 backward 6.9531 55.4442 overlaps True

zero.param @a : tensor<1024x512xf32> init zeros compute bf16
zero.param @b : tensor<1024x512xf32> init zeros compute bf16
zero.partition @flat stage 2 world_size 1 alignment 2 numel 1048576 padded 1048576 params [@a, @b] offsets [0, 524288]
zero.train_step @step(%x: tensor<2x4xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 1, global_batch = 2>
    offload #zero.offload<optimizer = cpu> {
  %loss = nn.fill 0.0 : tensor<f32>
  %gb = nn.fill 1.0 : tensor<1024x512xbf16>
  zero.grad @b, %gb : tensor<1024x512xbf16>
  zero.reduce_scatter group @flat [524288, 1048576) from %gb at [0] : tensor<1024x512xbf16>
  %down = zero.transfer group @flat grads[524288, 1048576) to host_grads phase last_micro_step -> !zero.token
  zero.free %gb : tensor<1024x512xbf16>
  %big = nn.fill 1.0 : tensor<1024x65536xbf16>
  zero.free %big : tensor<1024x65536xbf16>
  %ga = nn.fill 1.0 : tensor<1024x512xbf16>
  zero.grad @a, %ga : tensor<1024x512xbf16>
  zero.reduce_scatter group @flat [0, 524288) from %ga at [0] : tensor<1024x512xbf16>
  %down2 = zero.transfer group @flat grads[0, 524288) to host_grads phase last_micro_step -> !zero.token
  zero.free %ga : tensor<1024x512xbf16>
  %scale = zero.loss_scale phase boundary : tensor<f32>
  %stats = zero.check_overflow groups [@flat] scale %scale divisor 1.0 phase boundary : tensor<2xf32>
  %norm = zero.all_reduce overflow_norm %stats group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
  %skip = zero.update_loss_scale %norm phase boundary : tensor<2xf32> -> i1
  zero.wait %down phase boundary
  zero.wait %down2 phase boundary
  zero.optimizer_step group @flat stats %norm scale %scale skip %skip divisor 1.0 host phase boundary : tensor<2xf32>
  %up = zero.transfer group @flat host_params to params phase boundary -> !zero.token
  zero.wait %up phase boundary
  zero.return %loss : tensor<f32>
}
