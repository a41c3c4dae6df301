// RUN: zero-opt %s -split-input-file --zero-plan-memory | FileCheck %s --check-prefix=PLAN
// RUN: zero-opt %s -split-input-file --zero-plan-memory --convert-zero-to-runtime | grep -B7 -e "llvm.call @zrt_grouped_matmul" -e "^module" | FileCheck %s

// 16-bit grouped products lower to the same kernels with their element type
// (bf16 1, f16 2; grep keeps each call and its 7 argument constants), and the planner counts their fp32 panels
// (zrt_scratch_grouped_matmul*, sized for all rows in one expert).

// Forward, bf16, 12 rows x 8 -> 16 over 4 experts: panels x [12, 8],
// w [8, 16], y [12, 16] in fp32: 4 * (96 + 128 + 192) = 1664 bytes.
// PLAN-LABEL: zero.train_step @fwd
// PLAN-SAME: scratch_bytes = 1664
// CHECK-LABEL: module @grouped_bf16
// CHECK:      %[[DT:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK:      llvm.call @zrt_grouped_matmul(%[[DT]],
module @grouped_bf16 {
  zero.param @w : tensor<4x8x16xf32> init zeros
  zero.partition @flat stage 0 world_size 1 alignment 2 numel 512 padded 512 params [@w] offsets [0]
  zero.train_step @fwd(%x: tensor<6x8xbf16>, %idx: tensor<6x2xi32>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 6> {
    %w = zero.get_param @w : tensor<4x8x16xf32>
    %w16 = nn.cast %w : tensor<4x8x16xf32> to tensor<4x8x16xbf16>
    %rows, %pos, %o = nn.moe_dispatch %x[%idx] experts 4 : tensor<6x8xbf16>, tensor<6x2xi32> -> tensor<12x8xbf16>, tensor<4xi32>
    %y = nn.grouped_matmul %rows, %w16, %o : tensor<12x8xbf16>, tensor<4x8x16xbf16>, tensor<4xi32> -> tensor<12x16xbf16>
    %loss = nn.fill 0.0 : tensor<f32>
    zero.return %loss : tensor<f32>
  }
}

// -----

// Weight gradient, f16, transformers' [E, out, in] layout, 12 rows x 8 in,
// 6 out: panels x^T [8, 12], dy [12, 6], dw [8, 6]: 4 * (96 + 72 + 48) =
// 864 bytes, the same for either layout.
// PLAN-LABEL: zero.train_step @wgrad
// PLAN-SAME: scratch_bytes = 864
// CHECK-LABEL: module @grouped_f16_weight_grad
// CHECK:      %[[DT:.*]] = llvm.mlir.constant(2 : i32) : i32
// CHECK:      %[[T:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: llvm.call @zrt_grouped_matmul_weight_grad(%[[DT]], {{.*}}, %[[T]])
module @grouped_f16_weight_grad {
  zero.param @w : tensor<4xf32> init zeros
  zero.partition @flat stage 0 world_size 1 alignment 2 numel 4 padded 4 params [@w] offsets [0]
  zero.train_step @wgrad(%x: tensor<6x8xf16>, %idx: tensor<6x2xi32>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 6> {
    %rows, %pos, %o = nn.moe_dispatch %x[%idx] experts 4 : tensor<6x8xf16>, tensor<6x2xi32> -> tensor<12x8xf16>, tensor<4xi32>
    %dy = nn.fill 1.0 : tensor<12x6xf16>
    %dw = nn.grouped_matmul_weight_grad %rows, %dy, %o transpose_rhs : tensor<12x8xf16>, tensor<12x6xf16>, tensor<4xi32> -> tensor<4x6x8xf16>
    %loss = nn.fill 0.0 : tensor<f32>
    zero.return %loss : tensor<f32>
  }
}
