// RUN: zero-opt %s --convert-zero-to-runtime | FileCheck %s

// Strings in UTF-8 beyond ASCII reach the program's JSON manifest as they
// are: a parameter's name and the parameters' swap folder keep their bytes
// (é is \C3\A9 in MLIR's and the manifest global's escapes). Other bytes
// are refused (test/Dialect/Zero/invalid-utf8.mlir).

// CHECK: llvm.mlir.global {{.*}}@zero_manifest(
// CHECK-SAME: \22param_nvme_path\22:\22/donn\C3\A9es\22
// CHECK-SAME: \22name\22:\22caf\C3\A9\22

module @utf8_strings {
  zero.param @"caf\C3\A9" : tensor<4x2xf32> init zeros compute bf16
  zero.partition @flat stage 3 world_size 2 alignment 2 numel 8 padded 8 params [@"caf\C3\A9"] offsets [0]
  zero.train_step @train(%x: tensor<2x4xbf16>, %dy: tensor<2x2xbf16>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = bf16>
      schedule #zero.schedule<stage = 3, world_size = 2, global_batch = 4>
      offload #zero.offload<param = nvme, param_nvme_path = "/donn\C3\A9es", param_buffer_count = 2> {
    %s1, %t1 = zero.transfer group @flat params to staging swap <buffer = 1, buffers = 2, buffer_bytes = 4096> : tensor<4xbf16> -> !zero.token
    zero.wait %t1
    %full, %t2 = zero.prefetch group @flat from %s1 : tensor<4xbf16> : tensor<8xbf16>
    zero.wait %t2
    zero.free %s1 : tensor<4xbf16>
    %w = zero.get_param @"caf\C3\A9" from %full : tensor<8xbf16> -> tensor<4x2xbf16>
    %y = nn.matmul %x, %w : tensor<2x4xbf16>, tensor<4x2xbf16> -> tensor<2x2xbf16>
    zero.free %full : tensor<8xbf16>
    %dw = nn.matmul %x, %dy transpose_lhs : tensor<2x4xbf16>, tensor<2x2xbf16> -> tensor<4x2xbf16>
    zero.grad @"caf\C3\A9", %dw : tensor<4x2xbf16>
    zero.reduce_scatter group @flat [0, 8) from %dw at [0] : tensor<4x2xbf16>
    zero.free %dw : tensor<4x2xbf16>
    %loss = nn.fill 0.0 : tensor<f32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 2.0 phase boundary : tensor<2xf32>
    %sum = zero.all_reduce overflow_norm %st group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
    %skip = zero.update_loss_scale %sum phase boundary : tensor<2xf32> -> i1
    %new = zero.optimizer_step group @flat stats %sum scale %ls skip %skip divisor 2.0 phase boundary : tensor<2xf32> -> tensor<4xbf16>
    %up = zero.transfer group @flat %new to params swap <buffer = 0, buffers = 2, buffer_bytes = 4096> phase boundary : tensor<4xbf16> -> !zero.token
    zero.wait %up phase boundary
    zero.free %new phase boundary : tensor<4xbf16>
    zero.return %loss : tensor<f32>
  }
}
