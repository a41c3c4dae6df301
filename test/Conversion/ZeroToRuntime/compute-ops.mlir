// RUN: zero-opt %s -split-input-file --zero-verify-schedule -o /dev/null
// RUN: zero-opt %s -split-input-file --convert-zero-to-runtime | FileCheck %s

// The runtime call of each family of compute ops (their RuntimeKernelOpInterface
// models in KernelModels.cpp), one family a case: the kernel, its element type
// (ZRT_F32 0, ZRT_BF16 1, ZRT_F16 2; index types ZRT_I32 0, ZRT_I64 1), the
// pointers of its operands and results in operand order, and its dimensions.
// Each input is a scheduled, verified step (the first RUN line checks that)
// whose ops under test run in the micro step; the lowering recomputes the
// memory plan, so the inputs carry no plan attributes. A pointer is asked of
// the context once per value and function, so a value read twice passes the
// same SSA pointer.

// nn.matmul: (batch, m, n, k) with the transposes and whether the right
// operand is batched too; a 3-d activation times a 2-d weight (the weight, a
// parameter, read in place from the persistent arena), a transposed left
// operand (a weight gradient), and a batched product with a transposed right
// operand that contracts over its first 6 columns only (`contract`).

// CHECK-LABEL: module @matmul
// CHECK-LABEL: llvm.func @zero_micro_step
// CHECK:      %[[Q:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[W:.*]] = llvm.call @zrt_ctx_persistent(%arg0, %{{.*}})
// CHECK:      %[[Y:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[BATCH:.*]] = llvm.mlir.constant(4 : i64) : i64
// CHECK-NEXT: %[[M:.*]] = llvm.mlir.constant(3 : i64) : i64
// CHECK-NEXT: %[[N:.*]] = llvm.mlir.constant(2 : i64) : i64
// CHECK-NEXT: %[[K:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-NEXT: %[[TRANSPOSE_A:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[TRANSPOSE_B:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[B_IS_BATCHED:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[K_SUM:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_matmul(%[[DTYPE]], %[[Q]], %[[W]], %[[Y]], %[[BATCH]], %[[M]], %[[N]], %[[K]], %[[TRANSPOSE_A]], %[[TRANSPOSE_B]], %[[B_IS_BATCHED]], %[[K_SUM]])
// CHECK:      %[[X:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[DY:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[DW:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[BATCH:.*]] = llvm.mlir.constant(1 : i64) : i64
// CHECK-NEXT: %[[M:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-NEXT: %[[N:.*]] = llvm.mlir.constant(2 : i64) : i64
// CHECK-NEXT: %[[K:.*]] = llvm.mlir.constant(4 : i64) : i64
// CHECK-NEXT: %[[TRANSPOSE_A:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[TRANSPOSE_B:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[B_IS_BATCHED:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[K_SUM:.*]] = llvm.mlir.constant(4 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_matmul(%[[DTYPE]], %[[X]], %[[DY]], %[[DW]], %[[BATCH]], %[[M]], %[[N]], %[[K]], %[[TRANSPOSE_A]], %[[TRANSPOSE_B]], %[[B_IS_BATCHED]], %[[K_SUM]])
// CHECK:      %[[KEY:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[S:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[BATCH:.*]] = llvm.mlir.constant(4 : i64) : i64
// CHECK-NEXT: %[[M:.*]] = llvm.mlir.constant(3 : i64) : i64
// CHECK-NEXT: %[[N:.*]] = llvm.mlir.constant(5 : i64) : i64
// CHECK-NEXT: %[[K:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-NEXT: %[[TRANSPOSE_A:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[TRANSPOSE_B:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[B_IS_BATCHED:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[K_SUM:.*]] = llvm.mlir.constant(6 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_matmul(%[[DTYPE]], %[[Q]], %[[KEY]], %[[S]], %[[BATCH]], %[[M]], %[[N]], %[[K]], %[[TRANSPOSE_A]], %[[TRANSPOSE_B]], %[[B_IS_BATCHED]], %[[K_SUM]])

module @matmul {
  zero.param @w : tensor<8x2xf32> init zeros
  zero.partition @flat stage 0 world_size 1 alignment 2 numel 16 padded 16 params [@w] offsets [0]
  zero.train_step @train(%x: tensor<4x8xf32>, %dy: tensor<4x2xf32>, %q: tensor<4x3x8xf32>, %k: tensor<4x5x8xf32>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 4> {
    %w = zero.get_param @w : tensor<8x2xf32>
    %y = nn.matmul %q, %w : tensor<4x3x8xf32>, tensor<8x2xf32> -> tensor<4x3x2xf32>
    %dw = nn.matmul %x, %dy transpose_lhs : tensor<4x8xf32>, tensor<4x2xf32> -> tensor<8x2xf32>
    %s = nn.matmul %q, %k transpose_rhs contract 6 : tensor<4x3x8xf32>, tensor<4x5x8xf32> -> tensor<4x3x5xf32>
    %loss = nn.fill 0.0 : tensor<f32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 1.0 phase boundary : tensor<2xf32>
    %skip = zero.update_loss_scale %st phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @flat stats %st scale %ls skip %skip divisor 1.0 phase boundary : tensor<2xf32>
    zero.return %loss : tensor<f32>
  }
}

// -----

// Binary elementwise ops pass both element counts, so a right operand that is
// a suffix of the left one (a bias, here a bf16 parameter) is broadcast;
// nn.scale passes its factor.

// CHECK-LABEL: module @binary
// CHECK-LABEL: llvm.func @zero_micro_step
// CHECK:      %[[X:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[Y:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[SUM:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[N:.*]] = llvm.mlir.constant(32 : i64) : i64
// CHECK-NEXT: %[[RHS_N:.*]] = llvm.mlir.constant(32 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_add(%[[DTYPE]], %[[X]], %[[Y]], %[[SUM]], %[[N]], %[[RHS_N]])
// CHECK:      %[[B:.*]] = llvm.call @zrt_ctx_persistent(%arg0, %{{.*}})
// CHECK:      %[[XB:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[N:.*]] = llvm.mlir.constant(32 : i64) : i64
// CHECK-NEXT: %[[RHS_N:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_add(%[[DTYPE]], %[[X]], %[[B]], %[[XB]], %[[N]], %[[RHS_N]])
// CHECK:      %[[PROD:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[N:.*]] = llvm.mlir.constant(32 : i64) : i64
// CHECK-NEXT: %[[RHS_N:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_mul(%[[DTYPE]], %[[SUM]], %[[B]], %[[PROD]], %[[N]], %[[RHS_N]])
// CHECK:      %[[HALF:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[N:.*]] = llvm.mlir.constant(32 : i64) : i64
// CHECK-NEXT: %[[FACTOR:.*]] = llvm.mlir.constant(5.000000e-01 : f64) : f64
// CHECK-NEXT: llvm.call @zrt_scale(%[[DTYPE]], %[[X]], %[[HALF]], %[[N]], %[[FACTOR]])

module @binary {
  zero.param @w : tensor<8xf32> init zeros compute bf16
  zero.partition @flat stage 0 world_size 1 alignment 2 numel 8 padded 8 params [@w] offsets [0]
  zero.train_step @train(%x: tensor<4x8xbf16>, %y: tensor<4x8xbf16>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = bf16>
      schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 4> {
    %sum = nn.add %x, %y : tensor<4x8xbf16>, tensor<4x8xbf16>
    %b = zero.get_param @w : tensor<8xbf16>
    %xb = nn.add %x, %b : tensor<4x8xbf16>, tensor<8xbf16>
    %prod = nn.mul %sum, %b : tensor<4x8xbf16>, tensor<8xbf16>
    %half = nn.scale %x by 0.5 : tensor<4x8xbf16>
    %loss = nn.fill 0.0 : tensor<f32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 1.0 phase boundary : tensor<2xf32>
    %skip = zero.update_loss_scale %st phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @flat stats %st scale %ls skip %skip divisor 1.0 phase boundary : tensor<2xf32>
    zero.return %loss : tensor<f32>
  }
}

// -----

// Pointwise activations (f16): the input, the result and the element count;
// nn.swiglu reads the gate and the up projection.

// CHECK-LABEL: module @activations
// CHECK-LABEL: llvm.func @zero_micro_step
// CHECK:      %[[X:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[R:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(2 : i32) : i32
// CHECK-NEXT: %[[N:.*]] = llvm.mlir.constant(32 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_relu(%[[DTYPE]], %[[X]], %[[R]], %[[N]])
// CHECK:      %[[G:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(2 : i32) : i32
// CHECK-NEXT: %[[N:.*]] = llvm.mlir.constant(32 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_gelu(%[[DTYPE]], %[[X]], %[[G]], %[[N]])
// CHECK:      %[[E:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(2 : i32) : i32
// CHECK-NEXT: %[[N:.*]] = llvm.mlir.constant(32 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_gelu_erf(%[[DTYPE]], %[[X]], %[[E]], %[[N]])
// CHECK:      %[[S:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(2 : i32) : i32
// CHECK-NEXT: %[[N:.*]] = llvm.mlir.constant(32 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_silu(%[[DTYPE]], %[[X]], %[[S]], %[[N]])
// CHECK:      %[[T:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(2 : i32) : i32
// CHECK-NEXT: %[[N:.*]] = llvm.mlir.constant(32 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_tanh(%[[DTYPE]], %[[X]], %[[T]], %[[N]])
// CHECK:      %[[UP:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[SW:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(2 : i32) : i32
// CHECK-NEXT: %[[N:.*]] = llvm.mlir.constant(32 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_swiglu(%[[DTYPE]], %[[X]], %[[UP]], %[[SW]], %[[N]])

module @activations {
  zero.param @w : tensor<2xf32> init zeros
  zero.partition @flat stage 0 world_size 1 alignment 2 numel 2 padded 2 params [@w] offsets [0]
  zero.train_step @train(%x: tensor<4x8xf16>, %up: tensor<4x8xf16>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 4> {
    %r = nn.relu %x : tensor<4x8xf16>
    %g = nn.gelu %x : tensor<4x8xf16>
    %e = nn.gelu_erf %x : tensor<4x8xf16>
    %s = nn.silu %x : tensor<4x8xf16>
    %t = nn.tanh %x : tensor<4x8xf16>
    %sw = nn.swiglu %x, %up : tensor<4x8xf16>
    %loss = nn.fill 0.0 : tensor<f32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 1.0 phase boundary : tensor<2xf32>
    %skip = zero.update_loss_scale %st phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @flat stats %st scale %ls skip %skip divisor 1.0 phase boundary : tensor<2xf32>
    zero.return %loss : tensor<f32>
  }
}

// -----

// The bias-fused GELU and its gradient (bf16): the unbiased input, the bias
// (here a column sum, broadcast as zrt_add's rhs), the gradient for the
// backward, the result, the element count and the bias's.

// CHECK-LABEL: module @bias_gelu
// CHECK-LABEL: llvm.func @zero_micro_step
// CHECK:      llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[B:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      llvm.call @zrt_reduce_sum(%{{.*}}, %{{.*}}, %[[B]], %{{.*}}, %{{.*}})
// CHECK:      %[[X:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[Y:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[N:.*]] = llvm.mlir.constant(32 : i64) : i64
// CHECK-NEXT: %[[BN:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_bias_gelu(%[[DTYPE]], %[[X]], %[[B]], %[[Y]], %[[N]], %[[BN]])
// CHECK:      %[[DY:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[DX:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[N:.*]] = llvm.mlir.constant(32 : i64) : i64
// CHECK-NEXT: %[[BN:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_bias_gelu_grad(%[[DTYPE]], %[[X]], %[[B]], %[[DY]], %[[DX]], %[[N]], %[[BN]])

module @bias_gelu {
  zero.param @w : tensor<2xf32> init zeros
  zero.partition @flat stage 0 world_size 1 alignment 2 numel 2 padded 2 params [@w] offsets [0]
  zero.train_step @train(%x: tensor<4x8xbf16>, %rows: tensor<4x8xbf16>, %dy: tensor<4x8xbf16>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 4> {
    %b = nn.reduce_sum %rows : tensor<4x8xbf16> -> tensor<8xbf16>
    %y = nn.bias_gelu %x, %b : tensor<4x8xbf16>, tensor<8xbf16>
    %dx = nn.bias_gelu_grad %x, %b, %dy : tensor<4x8xbf16>, tensor<8xbf16>
    %loss = nn.fill 0.0 : tensor<f32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 1.0 phase boundary : tensor<2xf32>
    %skip = zero.update_loss_scale %st phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @flat stats %st scale %ls skip %skip divisor 1.0 phase boundary : tensor<2xf32>
    zero.return %loss : tensor<f32>
  }
}

// -----

// Their derivatives read the forward value their op names (nn.relu_grad and
// nn.tanh_grad their op's result, the others its input) and the output
// gradient; nn.swiglu_grad writes the gradients of both inputs.

// CHECK-LABEL: module @activation_grads
// CHECK-LABEL: llvm.func @zero_micro_step
// CHECK:      %[[X:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[R:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[DY:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[DR:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[N:.*]] = llvm.mlir.constant(32 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_relu_grad(%[[DTYPE]], %[[R]], %[[DY]], %[[DR]], %[[N]])
// CHECK:      %[[DG:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[N:.*]] = llvm.mlir.constant(32 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_gelu_grad(%[[DTYPE]], %[[X]], %[[DY]], %[[DG]], %[[N]])
// CHECK:      %[[DE:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[N:.*]] = llvm.mlir.constant(32 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_gelu_erf_grad(%[[DTYPE]], %[[X]], %[[DY]], %[[DE]], %[[N]])
// CHECK:      %[[DS:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[N:.*]] = llvm.mlir.constant(32 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_silu_grad(%[[DTYPE]], %[[X]], %[[DY]], %[[DS]], %[[N]])
// CHECK:      %[[UP:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[DGATE:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[DUP:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[N:.*]] = llvm.mlir.constant(32 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_swiglu_grad(%[[DTYPE]], %[[X]], %[[UP]], %[[DY]], %[[DGATE]], %[[DUP]], %[[N]])
// CHECK:      %[[T:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      llvm.call @zrt_tanh(%{{.*}}, %[[X]], %[[T]], %{{.*}})
// CHECK:      %[[DT:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[N:.*]] = llvm.mlir.constant(32 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_tanh_grad(%[[DTYPE]], %[[T]], %[[DY]], %[[DT]], %[[N]])

module @activation_grads {
  zero.param @w : tensor<2xf32> init zeros
  zero.partition @flat stage 0 world_size 1 alignment 2 numel 2 padded 2 params [@w] offsets [0]
  zero.train_step @train(%x: tensor<4x8xf32>, %up: tensor<4x8xf32>, %dy: tensor<4x8xf32>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 4> {
    %r = nn.relu %x : tensor<4x8xf32>
    %dr = nn.relu_grad %r, %dy : tensor<4x8xf32>
    %dg = nn.gelu_grad %x, %dy : tensor<4x8xf32>
    %de = nn.gelu_erf_grad %x, %dy : tensor<4x8xf32>
    %ds = nn.silu_grad %x, %dy : tensor<4x8xf32>
    %dgate, %dup = nn.swiglu_grad %x, %up, %dy : tensor<4x8xf32>
    %t = nn.tanh %x : tensor<4x8xf32>
    %dt = nn.tanh_grad %t, %dy : tensor<4x8xf32>
    %loss = nn.fill 0.0 : tensor<f32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 1.0 phase boundary : tensor<2xf32>
    %skip = zero.update_loss_scale %st phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @flat stats %st scale %ls skip %skip divisor 1.0 phase boundary : tensor<2xf32>
    zero.return %loss : tensor<f32>
  }
}

// -----

// Norms run over the rows of the last dimension: 4 x 3 = 12 rows of 8 with
// their epsilon, the weight and bias parameters read in place; the
// gradients write dx and the weight's (and the bias's) gradient.

// CHECK-LABEL: module @norms
// CHECK-LABEL: llvm.func @zero_micro_step
// CHECK:      %[[X:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[G:.*]] = llvm.call @zrt_ctx_persistent(%arg0, %{{.*}})
// CHECK:      %[[B:.*]] = llvm.call @zrt_ctx_persistent(%arg0, %{{.*}})
// CHECK:      %[[LN:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[ROWS:.*]] = llvm.mlir.constant(12 : i64) : i64
// CHECK-NEXT: %[[COLS:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-NEXT: %[[EPS:.*]] = llvm.mlir.constant(1.000000e-05 : f64) : f64
// CHECK-NEXT: llvm.call @zrt_layer_norm(%[[DTYPE]], %[[X]], %[[G]], %[[B]], %[[LN]], %[[ROWS]], %[[COLS]], %[[EPS]])
// CHECK:      %[[DY:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[DX:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[DG:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[DB:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[ROWS:.*]] = llvm.mlir.constant(12 : i64) : i64
// CHECK-NEXT: %[[COLS:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-NEXT: %[[EPS:.*]] = llvm.mlir.constant(1.000000e-05 : f64) : f64
// CHECK-NEXT: llvm.call @zrt_layer_norm_grad(%[[DTYPE]], %[[X]], %[[G]], %[[DY]], %[[DX]], %[[DG]], %[[DB]], %[[ROWS]], %[[COLS]], %[[EPS]])
// CHECK:      %[[RN:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[ROWS:.*]] = llvm.mlir.constant(12 : i64) : i64
// CHECK-NEXT: %[[COLS:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-NEXT: %[[EPS:.*]] = llvm.mlir.constant(9.9999999999999995E-7 : f64) : f64
// CHECK-NEXT: llvm.call @zrt_rms_norm(%[[DTYPE]], %[[X]], %[[G]], %[[RN]], %[[ROWS]], %[[COLS]], %[[EPS]])
// CHECK:      %[[RDX:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[RDG:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[ROWS:.*]] = llvm.mlir.constant(12 : i64) : i64
// CHECK-NEXT: %[[COLS:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-NEXT: %[[EPS:.*]] = llvm.mlir.constant(9.9999999999999995E-7 : f64) : f64
// CHECK-NEXT: llvm.call @zrt_rms_norm_grad(%[[DTYPE]], %[[X]], %[[G]], %[[DY]], %[[RDX]], %[[RDG]], %[[ROWS]], %[[COLS]], %[[EPS]])

module @norms {
  zero.param @g : tensor<8xf32> init ones
  zero.param @b : tensor<8xf32> init zeros
  zero.partition @flat stage 0 world_size 1 alignment 2 numel 16 padded 16 params [@g, @b] offsets [0, 8]
  zero.train_step @train(%x: tensor<4x3x8xf32>, %dy: tensor<4x3x8xf32>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 4> {
    %g = zero.get_param @g : tensor<8xf32>
    %b = zero.get_param @b : tensor<8xf32>
    %ln = nn.layer_norm %x, %g, %b eps 1.0e-5 : tensor<4x3x8xf32>, tensor<8xf32>, tensor<8xf32>
    %dx, %dg, %db = nn.layer_norm_grad %x, %g, %dy eps 1.0e-5 : tensor<4x3x8xf32>, tensor<8xf32>
    %rn = nn.rms_norm %x, %g eps 1.0e-6 : tensor<4x3x8xf32>, tensor<8xf32>
    %rdx, %rdg = nn.rms_norm_grad %x, %g, %dy eps 1.0e-6 : tensor<4x3x8xf32>, tensor<8xf32>
    %loss = nn.fill 0.0 : tensor<f32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 1.0 phase boundary : tensor<2xf32>
    %skip = zero.update_loss_scale %st phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @flat stats %st scale %ls skip %skip divisor 1.0 phase boundary : tensor<2xf32>
    zero.return %loss : tensor<f32>
  }
}

// -----

// Row softmax and its gradient (from the softmax's result): 12 rows of 8.

// CHECK-LABEL: module @softmax
// CHECK-LABEL: llvm.func @zero_micro_step
// CHECK:      %[[X:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[P:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[ROWS:.*]] = llvm.mlir.constant(12 : i64) : i64
// CHECK-NEXT: %[[COLS:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_softmax(%[[DTYPE]], %[[X]], %[[P]], %[[ROWS]], %[[COLS]])
// CHECK:      %[[DY:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[DX:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[ROWS:.*]] = llvm.mlir.constant(12 : i64) : i64
// CHECK-NEXT: %[[COLS:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_softmax_grad(%[[DTYPE]], %[[P]], %[[DY]], %[[DX]], %[[ROWS]], %[[COLS]])

module @softmax {
  zero.param @w : tensor<2xf32> init zeros
  zero.partition @flat stage 0 world_size 1 alignment 2 numel 2 padded 2 params [@w] offsets [0]
  zero.train_step @train(%x: tensor<4x3x8xf32>, %dy: tensor<4x3x8xf32>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 4> {
    %p = nn.softmax %x : tensor<4x3x8xf32>
    %dx = nn.softmax_grad %p, %dy : tensor<4x3x8xf32>
    %loss = nn.fill 0.0 : tensor<f32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 1.0 phase boundary : tensor<2xf32>
    %skip = zero.update_loss_scale %st phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @flat stats %st scale %ls skip %skip divisor 1.0 phase boundary : tensor<2xf32>
    zero.return %loss : tensor<f32>
  }
}

// -----

// exp, log and softplus (bf16) and their gradients: exp_grad reads exp's
// result, log_grad and softplus_grad their op's input; softplus passes its
// beta and threshold as doubles.

// CHECK-LABEL: module @exp_log_softplus
// CHECK-LABEL: llvm.func @zero_micro_step
// CHECK:      %[[X:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[E:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[N:.*]] = llvm.mlir.constant(32 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_exp(%[[DTYPE]], %[[X]], %[[E]], %[[N]])
// CHECK:      %[[DY:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[DE:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[N:.*]] = llvm.mlir.constant(32 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_exp_grad(%[[DTYPE]], %[[E]], %[[DY]], %[[DE]], %[[N]])
// CHECK:      %[[L:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[N:.*]] = llvm.mlir.constant(32 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_log(%[[DTYPE]], %[[X]], %[[L]], %[[N]])
// CHECK:      %[[DL:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[N:.*]] = llvm.mlir.constant(32 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_log_grad(%[[DTYPE]], %[[X]], %[[DY]], %[[DL]], %[[N]])
// CHECK:      %[[S:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[N:.*]] = llvm.mlir.constant(32 : i64) : i64
// CHECK-NEXT: %[[BETA:.*]] = llvm.mlir.constant(2.000000e+00 : f64) : f64
// CHECK-NEXT: %[[THRESHOLD:.*]] = llvm.mlir.constant(1.500000e+01 : f64) : f64
// CHECK-NEXT: llvm.call @zrt_softplus(%[[DTYPE]], %[[X]], %[[S]], %[[N]], %[[BETA]], %[[THRESHOLD]])
// CHECK:      %[[DS:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[N:.*]] = llvm.mlir.constant(32 : i64) : i64
// CHECK-NEXT: %[[BETA:.*]] = llvm.mlir.constant(2.000000e+00 : f64) : f64
// CHECK-NEXT: %[[THRESHOLD:.*]] = llvm.mlir.constant(1.500000e+01 : f64) : f64
// CHECK-NEXT: llvm.call @zrt_softplus_grad(%[[DTYPE]], %[[X]], %[[DY]], %[[DS]], %[[N]], %[[BETA]], %[[THRESHOLD]])

module @exp_log_softplus {
  zero.param @w : tensor<2xf32> init zeros
  zero.partition @flat stage 0 world_size 1 alignment 2 numel 2 padded 2 params [@w] offsets [0]
  zero.train_step @train(%x: tensor<4x8xbf16>, %dy: tensor<4x8xbf16>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 4> {
    %e = nn.exp %x : tensor<4x8xbf16>
    %de = nn.exp_grad %e, %dy : tensor<4x8xbf16>
    %l = nn.log %x : tensor<4x8xbf16>
    %dl = nn.log_grad %x, %dy : tensor<4x8xbf16>
    %s = nn.softplus %x beta 2.0 threshold 15.0 : tensor<4x8xbf16>
    %ds = nn.softplus_grad %x, %dy beta 2.0 threshold 15.0 : tensor<4x8xbf16>
    %loss = nn.fill 0.0 : tensor<f32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 1.0 phase boundary : tensor<2xf32>
    %skip = zero.update_loss_scale %st phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @flat stats %st scale %ls skip %skip divisor 1.0 phase boundary : tensor<2xf32>
    zero.return %loss : tensor<f32>
  }
}

// -----

// xIELU and its gradient: the coefficients are [1] parameters passed as
// pointers, beta and eps as doubles; the gradient writes dx and the two
// per-element terms.

// CHECK-LABEL: module @xielu
// CHECK-LABEL: llvm.func @zero_micro_step
// CHECK:      %[[X:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[AP:.*]] = llvm.call @zrt_ctx_persistent(%arg0, %{{.*}})
// CHECK:      %[[AN:.*]] = llvm.call @zrt_ctx_persistent(%arg0, %{{.*}})
// CHECK:      %[[Y:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[N:.*]] = llvm.mlir.constant(32 : i64) : i64
// CHECK-NEXT: %[[BETA:.*]] = llvm.mlir.constant(5.000000e-01 : f64) : f64
// CHECK-NEXT: %[[EPS:.*]] = llvm.mlir.constant(-9.9999999999999995E-7 : f64) : f64
// CHECK-NEXT: llvm.call @zrt_xielu(%[[DTYPE]], %[[X]], %[[AP]], %[[AN]], %[[Y]], %[[N]], %[[BETA]], %[[EPS]])
// CHECK:      %[[DY:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[DX:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[PP:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[PN:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[N:.*]] = llvm.mlir.constant(32 : i64) : i64
// CHECK-NEXT: %[[BETA:.*]] = llvm.mlir.constant(5.000000e-01 : f64) : f64
// CHECK-NEXT: %[[EPS:.*]] = llvm.mlir.constant(-9.9999999999999995E-7 : f64) : f64
// CHECK-NEXT: llvm.call @zrt_xielu_grad(%[[DTYPE]], %[[X]], %[[AP]], %[[AN]], %[[DY]], %[[DX]], %[[PP]], %[[PN]], %[[N]], %[[BETA]], %[[EPS]])

module @xielu {
  zero.param @ap : tensor<1xf32> init zeros
  zero.param @an : tensor<1xf32> init zeros
  zero.partition @flat stage 0 world_size 1 alignment 2 numel 2 padded 2 params [@ap, @an] offsets [0, 1]
  zero.train_step @train(%x: tensor<4x8xf32>, %dy: tensor<4x8xf32>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 4> {
    %ap = zero.get_param @ap : tensor<1xf32>
    %an = zero.get_param @an : tensor<1xf32>
    %y = nn.xielu %x, %ap, %an beta 0.5 eps -1.0e-6 : tensor<4x8xf32>, tensor<1xf32>
    %dx, %pp, %pn = nn.xielu_grad %x, %ap, %an, %dy beta 0.5 eps -1.0e-6 : tensor<4x8xf32>, tensor<1xf32>
    %loss = nn.fill 0.0 : tensor<f32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 1.0 phase boundary : tensor<2xf32>
    %skip = zero.update_loss_scale %st phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @flat stats %st scale %ls skip %skip divisor 1.0 phase boundary : tensor<2xf32>
    zero.return %loss : tensor<f32>
  }
}

// -----

// A policy-gradient loss's ops: clamp with its bounds as doubles (inf for
// one left out), minimum/maximum, where and reciprocal over n elements,
// their two-result gradients, gather and its scatter-add over rows of the
// last dimension with the index type; stop_gradient is a view (no call).

// CHECK-LABEL: module @rl
// CHECK-LABEL: llvm.func @zero_micro_step
// CHECK:      %[[A:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[C:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[N:.*]] = llvm.mlir.constant(12 : i64) : i64
// CHECK-NEXT: %[[LO:.*]] = llvm.mlir.constant(8.000000e-01 : f64) : f64
// CHECK-NEXT: %[[HI:.*]] = llvm.mlir.constant(1.200000e+00 : f64) : f64
// CHECK-NEXT: llvm.call @zrt_clamp(%[[DTYPE]], %[[A]], %[[C]], %[[N]], %[[LO]], %[[HI]])
// CHECK:      %[[B:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[DC:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[INF:.*]] = llvm.mlir.constant(0x7FF0000000000000 : f64) : f64
// CHECK-NEXT: llvm.call @zrt_clamp_grad(%{{.*}}, %[[A]], %[[B]], %[[DC]], %{{.*}}, %{{.*}}, %[[INF]])
// CHECK:      llvm.call @zrt_minimum(%{{.*}}, %[[C]], %[[B]], %[[MN:.*]], %{{.*}})
// CHECK:      llvm.call @zrt_maximum(%{{.*}}, %[[MN]], %[[DC]], %[[MX:.*]], %{{.*}})
// CHECK:      llvm.call @zrt_minimum_grad(%{{.*}}, %[[C]], %[[B]], %[[MX]], %[[DA:.*]], %[[DB:.*]], %{{.*}})
// CHECK:      llvm.call @zrt_maximum_grad(%{{.*}}, %[[DA]], %[[DB]], %[[A]], %[[EA:.*]], %[[EB:.*]], %{{.*}})
// CHECK:      llvm.call @zrt_where(%{{.*}}, %[[S:.*]], %[[EB]], %[[A]], %[[W:.*]], %{{.*}})
// CHECK:      llvm.call @zrt_where_grad(%{{.*}}, %[[S]], %[[W]], %[[DT:.*]], %[[DF:.*]], %{{.*}})
// CHECK:      llvm.call @zrt_reciprocal(%{{.*}}, %[[DT]], %[[R:.*]], %{{.*}})
// CHECK:      llvm.call @zrt_reciprocal_grad(%{{.*}}, %[[R]], %[[DF]], %[[DR:.*]], %{{.*}})
// CHECK:      %[[I64:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[ROWS:.*]] = llvm.mlir.constant(12 : i64) : i64
// CHECK-NEXT: %[[COLS:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-NEXT: %[[K:.*]] = llvm.mlir.constant(1 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_gather(%{{.*}}, %[[X:.*]], %[[I64]], %[[IDS:.*]], %{{.*}}, %[[ROWS]], %[[COLS]], %[[K]])
// CHECK:      llvm.call @zrt_gather_grad(%{{.*}}, %{{.*}}, %[[IDS]], %[[DR]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}})
// CHECK-NOT:  stop_gradient
module @rl {
  zero.param @w : tensor<2xf32> init zeros
  zero.partition @flat stage 0 world_size 1 alignment 2 numel 2 padded 2 params [@w] offsets [0]
  zero.train_step @train(%x: tensor<4x3x8xf32>, %a: tensor<4x3xf32>, %b: tensor<4x3xf32>, %ids: tensor<4x3xi64>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 4> {
    %c = nn.clamp %a min 0.8 max 1.2 : tensor<4x3xf32>
    %dc = nn.clamp_grad %a, %b min 0.8 : tensor<4x3xf32>
    %mn = nn.minimum %c, %b : tensor<4x3xf32>
    %mx = nn.maximum %mn, %dc : tensor<4x3xf32>
    %da, %db = nn.minimum_grad %c, %b, %mx : tensor<4x3xf32>
    %ea, %eb = nn.maximum_grad %da, %db, %a : tensor<4x3xf32>
    %s = nn.stop_gradient %ea : tensor<4x3xf32>
    %w = nn.where %s, %eb, %a : tensor<4x3xf32>
    %dt, %df = nn.where_grad %s, %w : tensor<4x3xf32>
    %r = nn.reciprocal %dt : tensor<4x3xf32>
    %dr = nn.reciprocal_grad %r, %df : tensor<4x3xf32>
    %g = nn.gather %x[%ids] : tensor<4x3x8xf32>, tensor<4x3xi64> -> tensor<4x3xf32>
    %dx = nn.gather_grad %ids, %dr : tensor<4x3xi64>, tensor<4x3xf32> -> tensor<4x3x8xf32>
    %loss = nn.fill 0.0 : tensor<f32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 1.0 phase boundary : tensor<2xf32>
    %skip = zero.update_loss_scale %st phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @flat stats %st scale %ls skip %skip divisor 1.0 phase boundary : tensor<2xf32>
    zero.return %loss : tensor<f32>
  }
}

// -----

// The reductions over the last dimension and their gradients, over the rows
// of the input: 12 rows of 8 into 12 values; the gradients read the forward
// input and result and the result's gradient.

// CHECK-LABEL: module @row_reductions
// CHECK-LABEL: llvm.func @zero_micro_step
// CHECK:      %[[X:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[Y:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[ROWS:.*]] = llvm.mlir.constant(12 : i64) : i64
// CHECK-NEXT: %[[COLS:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_logsumexp(%[[DTYPE]], %[[X]], %[[Y]], %[[ROWS]], %[[COLS]])
// CHECK:      %[[DY:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[DX:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[ROWS:.*]] = llvm.mlir.constant(12 : i64) : i64
// CHECK-NEXT: %[[COLS:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_logsumexp_grad(%[[DTYPE]], %[[X]], %[[Y]], %[[DY]], %[[DX]], %[[ROWS]], %[[COLS]])
// CHECK:      %[[M:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[ROWS:.*]] = llvm.mlir.constant(12 : i64) : i64
// CHECK-NEXT: %[[COLS:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_reduce_max(%[[DTYPE]], %[[X]], %[[M]], %[[ROWS]], %[[COLS]])
// CHECK:      %[[DM:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[ROWS:.*]] = llvm.mlir.constant(12 : i64) : i64
// CHECK-NEXT: %[[COLS:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_reduce_max_grad(%[[DTYPE]], %[[X]], %[[M]], %[[DY]], %[[DM]], %[[ROWS]], %[[COLS]])

module @row_reductions {
  zero.param @w : tensor<2xf32> init zeros
  zero.partition @flat stage 0 world_size 1 alignment 2 numel 2 padded 2 params [@w] offsets [0]
  zero.train_step @train(%x: tensor<4x3x8xf32>, %dy: tensor<4x3xf32>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 4> {
    %y = nn.logsumexp %x : tensor<4x3x8xf32> -> tensor<4x3xf32>
    %dx = nn.logsumexp_grad %x, %y, %dy : tensor<4x3x8xf32> -> tensor<4x3xf32>
    %m = nn.reduce_max %x : tensor<4x3x8xf32> -> tensor<4x3xf32>
    %dm = nn.reduce_max_grad %x, %m, %dy : tensor<4x3x8xf32> -> tensor<4x3xf32>
    %loss = nn.fill 0.0 : tensor<f32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 1.0 phase boundary : tensor<2xf32>
    %skip = zero.update_loss_scale %st phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @flat stats %st scale %ls skip %skip divisor 1.0 phase boundary : tensor<2xf32>
    zero.return %loss : tensor<f32>
  }
}

// -----

// Attention fills zrt_attention_desc (zero_rt/attention.def) field by field
// on the stack and passes its address before the tensors: 6 query heads
// over 3 key/value heads (grouped), causal, the default scale
// 1/sqrt(16), no window, softcap, ALiBi, sinks or segments; the gradient
// reads q, k, v, the output and its gradient; a non-causal self-attention
// with scale 0.5.

// CHECK-LABEL: module @attention
// CHECK-LABEL: llvm.func @zero_micro_step
// CHECK:      %[[Q:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[K:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[V:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[O:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[CAUSAL:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[BATCH:.*]] = llvm.mlir.constant(4 : i64) : i64
// CHECK-NEXT: %[[HEADS:.*]] = llvm.mlir.constant(6 : i64) : i64
// CHECK-NEXT: %[[KV_HEADS:.*]] = llvm.mlir.constant(3 : i64) : i64
// CHECK-NEXT: %[[SEQ:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-NEXT: %[[HEAD_DIM:.*]] = llvm.mlir.constant(16 : i64) : i64
// CHECK-NEXT: %[[SCALE:.*]] = llvm.mlir.constant(2.500000e-01 : f64) : f64
// CHECK-NEXT: %[[WINDOW:.*]] = llvm.mlir.constant(0 : i64) : i64
// CHECK-NEXT: %[[SOFTCAP:.*]] = llvm.mlir.constant(0.000000e+00 : f64) : f64
// CHECK-NEXT: %[[ALIBI:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK-NEXT: %[[SINKS:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK-NEXT: %[[SEGMENTS:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK-NEXT: %[[D0:.*]] = llvm.mlir.undef : !llvm.struct<(i32, i32, i64, i64, i64, i64, i64, f64, i64, f64, ptr, ptr, ptr)>
// CHECK-NEXT: %[[D1:.*]] = llvm.insertvalue %[[DTYPE]], %[[D0]][0]
// CHECK-NEXT: %[[D2:.*]] = llvm.insertvalue %[[CAUSAL]], %[[D1]][1]
// CHECK-NEXT: %[[D3:.*]] = llvm.insertvalue %[[BATCH]], %[[D2]][2]
// CHECK-NEXT: %[[D4:.*]] = llvm.insertvalue %[[HEADS]], %[[D3]][3]
// CHECK-NEXT: %[[D5:.*]] = llvm.insertvalue %[[KV_HEADS]], %[[D4]][4]
// CHECK-NEXT: %[[D6:.*]] = llvm.insertvalue %[[SEQ]], %[[D5]][5]
// CHECK-NEXT: %[[D7:.*]] = llvm.insertvalue %[[HEAD_DIM]], %[[D6]][6]
// CHECK-NEXT: %[[D8:.*]] = llvm.insertvalue %[[SCALE]], %[[D7]][7]
// CHECK-NEXT: %[[D9:.*]] = llvm.insertvalue %[[WINDOW]], %[[D8]][8]
// CHECK-NEXT: %[[D10:.*]] = llvm.insertvalue %[[SOFTCAP]], %[[D9]][9]
// CHECK-NEXT: %[[D11:.*]] = llvm.insertvalue %[[ALIBI]], %[[D10]][10]
// CHECK-NEXT: %[[D12:.*]] = llvm.insertvalue %[[SINKS]], %[[D11]][11]
// CHECK-NEXT: %[[D13:.*]] = llvm.insertvalue %[[SEGMENTS]], %[[D12]][12]
// CHECK-NEXT: %[[ONE:.*]] = llvm.mlir.constant(1 : i64) : i64
// CHECK-NEXT: %[[DESC:.*]] = llvm.alloca %[[ONE]] x !llvm.struct<(i32, i32, i64, i64, i64, i64, i64, f64, i64, f64, ptr, ptr, ptr)>
// CHECK-NEXT: llvm.store %[[D13]], %[[DESC]]
// CHECK-NEXT: llvm.call @zrt_attention_forward(%[[DESC]], %[[Q]], %[[K]], %[[V]], %[[O]])
// CHECK:      %[[DY:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[DQ:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[DK:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[DV:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[CAUSAL:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[BATCH:.*]] = llvm.mlir.constant(4 : i64) : i64
// CHECK-NEXT: %[[HEADS:.*]] = llvm.mlir.constant(6 : i64) : i64
// CHECK-NEXT: %[[KV_HEADS:.*]] = llvm.mlir.constant(3 : i64) : i64
// CHECK-NEXT: %[[SEQ:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-NEXT: %[[HEAD_DIM:.*]] = llvm.mlir.constant(16 : i64) : i64
// CHECK-NEXT: %[[SCALE:.*]] = llvm.mlir.constant(2.500000e-01 : f64) : f64
// CHECK-NEXT: %[[WINDOW:.*]] = llvm.mlir.constant(0 : i64) : i64
// CHECK-NEXT: %[[SOFTCAP:.*]] = llvm.mlir.constant(0.000000e+00 : f64) : f64
// CHECK-NEXT: %[[ALIBI:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK-NEXT: %[[SINKS:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK-NEXT: %[[SEGMENTS:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK-NEXT: %[[D0:.*]] = llvm.mlir.undef : !llvm.struct<(i32, i32, i64, i64, i64, i64, i64, f64, i64, f64, ptr, ptr, ptr)>
// CHECK-NEXT: %[[D1:.*]] = llvm.insertvalue %[[DTYPE]], %[[D0]][0]
// CHECK-NEXT: %[[D2:.*]] = llvm.insertvalue %[[CAUSAL]], %[[D1]][1]
// CHECK-NEXT: %[[D3:.*]] = llvm.insertvalue %[[BATCH]], %[[D2]][2]
// CHECK-NEXT: %[[D4:.*]] = llvm.insertvalue %[[HEADS]], %[[D3]][3]
// CHECK-NEXT: %[[D5:.*]] = llvm.insertvalue %[[KV_HEADS]], %[[D4]][4]
// CHECK-NEXT: %[[D6:.*]] = llvm.insertvalue %[[SEQ]], %[[D5]][5]
// CHECK-NEXT: %[[D7:.*]] = llvm.insertvalue %[[HEAD_DIM]], %[[D6]][6]
// CHECK-NEXT: %[[D8:.*]] = llvm.insertvalue %[[SCALE]], %[[D7]][7]
// CHECK-NEXT: %[[D9:.*]] = llvm.insertvalue %[[WINDOW]], %[[D8]][8]
// CHECK-NEXT: %[[D10:.*]] = llvm.insertvalue %[[SOFTCAP]], %[[D9]][9]
// CHECK-NEXT: %[[D11:.*]] = llvm.insertvalue %[[ALIBI]], %[[D10]][10]
// CHECK-NEXT: %[[D12:.*]] = llvm.insertvalue %[[SINKS]], %[[D11]][11]
// CHECK-NEXT: %[[D13:.*]] = llvm.insertvalue %[[SEGMENTS]], %[[D12]][12]
// CHECK-NEXT: %[[ONE:.*]] = llvm.mlir.constant(1 : i64) : i64
// CHECK-NEXT: %[[DESC:.*]] = llvm.alloca %[[ONE]] x !llvm.struct<(i32, i32, i64, i64, i64, i64, i64, f64, i64, f64, ptr, ptr, ptr)>
// CHECK-NEXT: llvm.store %[[D13]], %[[DESC]]
// CHECK-NEXT: llvm.call @zrt_attention_backward(%[[DESC]], %[[Q]], %[[K]], %[[V]], %[[O]], %[[DY]], %[[DQ]], %[[DK]], %[[DV]])
// CHECK:      %[[M:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[CAUSAL:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[BATCH:.*]] = llvm.mlir.constant(4 : i64) : i64
// CHECK-NEXT: %[[HEADS:.*]] = llvm.mlir.constant(6 : i64) : i64
// CHECK-NEXT: %[[KV_HEADS:.*]] = llvm.mlir.constant(6 : i64) : i64
// CHECK-NEXT: %[[SEQ:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-NEXT: %[[HEAD_DIM:.*]] = llvm.mlir.constant(16 : i64) : i64
// CHECK-NEXT: %[[SCALE:.*]] = llvm.mlir.constant(5.000000e-01 : f64) : f64
// CHECK-NEXT: %[[WINDOW:.*]] = llvm.mlir.constant(0 : i64) : i64
// CHECK-NEXT: %[[SOFTCAP:.*]] = llvm.mlir.constant(0.000000e+00 : f64) : f64
// CHECK-NEXT: %[[ALIBI:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK-NEXT: %[[SINKS:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK-NEXT: %[[SEGMENTS:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK-NEXT: %[[D0:.*]] = llvm.mlir.undef : !llvm.struct<(i32, i32, i64, i64, i64, i64, i64, f64, i64, f64, ptr, ptr, ptr)>
// CHECK-NEXT: %[[D1:.*]] = llvm.insertvalue %[[DTYPE]], %[[D0]][0]
// CHECK-NEXT: %[[D2:.*]] = llvm.insertvalue %[[CAUSAL]], %[[D1]][1]
// CHECK-NEXT: %[[D3:.*]] = llvm.insertvalue %[[BATCH]], %[[D2]][2]
// CHECK-NEXT: %[[D4:.*]] = llvm.insertvalue %[[HEADS]], %[[D3]][3]
// CHECK-NEXT: %[[D5:.*]] = llvm.insertvalue %[[KV_HEADS]], %[[D4]][4]
// CHECK-NEXT: %[[D6:.*]] = llvm.insertvalue %[[SEQ]], %[[D5]][5]
// CHECK-NEXT: %[[D7:.*]] = llvm.insertvalue %[[HEAD_DIM]], %[[D6]][6]
// CHECK-NEXT: %[[D8:.*]] = llvm.insertvalue %[[SCALE]], %[[D7]][7]
// CHECK-NEXT: %[[D9:.*]] = llvm.insertvalue %[[WINDOW]], %[[D8]][8]
// CHECK-NEXT: %[[D10:.*]] = llvm.insertvalue %[[SOFTCAP]], %[[D9]][9]
// CHECK-NEXT: %[[D11:.*]] = llvm.insertvalue %[[ALIBI]], %[[D10]][10]
// CHECK-NEXT: %[[D12:.*]] = llvm.insertvalue %[[SINKS]], %[[D11]][11]
// CHECK-NEXT: %[[D13:.*]] = llvm.insertvalue %[[SEGMENTS]], %[[D12]][12]
// CHECK-NEXT: %[[ONE:.*]] = llvm.mlir.constant(1 : i64) : i64
// CHECK-NEXT: %[[DESC:.*]] = llvm.alloca %[[ONE]] x !llvm.struct<(i32, i32, i64, i64, i64, i64, i64, f64, i64, f64, ptr, ptr, ptr)>
// CHECK-NEXT: llvm.store %[[D13]], %[[DESC]]
// CHECK-NEXT: llvm.call @zrt_attention_forward(%[[DESC]], %[[Q]], %[[Q]], %[[Q]], %[[M]])

module @attention {
  zero.param @w : tensor<2xf32> init zeros
  zero.partition @flat stage 0 world_size 1 alignment 2 numel 2 padded 2 params [@w] offsets [0]
  zero.train_step @train(%q: tensor<4x6x8x16xbf16>, %k: tensor<4x3x8x16xbf16>, %v: tensor<4x3x8x16xbf16>, %dy: tensor<4x6x8x16xbf16>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 4> {
    %o = nn.attention %q, %k, %v causal : tensor<4x6x8x16xbf16>, tensor<4x3x8x16xbf16>
    %dq, %dk, %dv = nn.attention_grad %q, %k, %v, %o, %dy causal scale 0.25 : tensor<4x6x8x16xbf16>, tensor<4x3x8x16xbf16>
    %m = nn.attention %q, %q, %q scale 0.5 : tensor<4x6x8x16xbf16>, tensor<4x6x8x16xbf16>
    %loss = nn.fill 0.0 : tensor<f32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 1.0 phase boundary : tensor<2xf32>
    %skip = zero.update_loss_scale %st phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @flat stats %st scale %ls skip %skip divisor 1.0 phase boundary : tensor<2xf32>
    zero.return %loss : tensor<f32>
  }
}

// -----

// Packed rows' document ids (segments) are the descriptor's last field: the
// address of the ids tensor, for the forward and the gradient.

// CHECK-LABEL: module @attention_segments
// CHECK-LABEL: llvm.func @zero_micro_step
// CHECK:      %[[Q:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[IDS:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      llvm.insertvalue %[[IDS]], %{{.*}}[12]
// CHECK:      llvm.call @zrt_attention_forward(
// CHECK:      llvm.insertvalue %[[IDS]], %{{.*}}[12]
// CHECK:      llvm.call @zrt_attention_backward(

module @attention_segments {
  zero.param @w : tensor<2xf32> init zeros
  zero.partition @flat stage 0 world_size 1 alignment 2 numel 2 padded 2 params [@w] offsets [0]
  zero.train_step @train(%q: tensor<4x6x8x16xf32>, %ids: tensor<4x8xi32>, %dy: tensor<4x6x8x16xf32>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 4> {
    %o = nn.attention %q, %q, %q segments(%ids : tensor<4x8xi32>) causal : tensor<4x6x8x16xf32>, tensor<4x6x8x16xf32>
    %dq, %dk, %dv = nn.attention_grad %q, %q, %q, %o, %dy segments(%ids : tensor<4x8xi32>) causal scale 0.25 : tensor<4x6x8x16xf32>, tensor<4x6x8x16xf32>
    %loss = nn.fill 0.0 : tensor<f32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 1.0 phase boundary : tensor<2xf32>
    %skip = zero.update_loss_scale %st phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @flat stats %st scale %ls skip %skip divisor 1.0 phase boundary : tensor<2xf32>
    zero.return %loss : tensor<f32>
  }
}

// -----

// Document ids from positions: zrt_document_ids(position type (1: i64),
// positions, ids, rows, cols).

// CHECK-LABEL: module @document_ids
// CHECK-LABEL: llvm.func @zero_micro_step
// CHECK:      %[[POS:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[IDS:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[TYPE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[ROWS:.*]] = llvm.mlir.constant(4 : i64) : i64
// CHECK-NEXT: %[[COLS:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_document_ids(%[[TYPE]], %[[POS]], %[[IDS]], %[[ROWS]], %[[COLS]])

module @document_ids {
  zero.param @w : tensor<2xf32> init zeros
  zero.partition @flat stage 0 world_size 1 alignment 2 numel 2 padded 2 params [@w] offsets [0]
  zero.train_step @train(%pos: tensor<4x8xi64>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 4> {
    %ids = nn.document_ids %pos : tensor<4x8xi64>
    %loss = nn.fill 0.0 : tensor<f32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 1.0 phase boundary : tensor<2xf32>
    %skip = zero.update_loss_scale %st phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @flat stats %st scale %ls skip %skip divisor 1.0 phase boundary : tensor<2xf32>
    zero.return %loss : tensor<f32>
  }
}

// -----

// Rotary embeddings at a packed row's positions: zrt_rope's arguments, then
// the position type (1: i64) and the positions.

// CHECK-LABEL: module @rope_positions
// CHECK-LABEL: llvm.func @zero_micro_step
// CHECK:      %[[POS:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[SCALE:.*]] = llvm.mlir.constant(1.000000e+00 : f64) : f64
// CHECK-NEXT: %[[TYPE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: llvm.call @zrt_rope_positions(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[SCALE]], %[[TYPE]], %[[POS]])
// CHECK-NOT:  llvm.call @zrt_rope(

module @rope_positions {
  zero.param @w : tensor<2x2x4x4xf32> init normal std 0.1
  zero.partition @flat stage 0 world_size 1 alignment 2 numel 64 padded 64 params [@w] offsets [0]
  zero.train_step @train(%pos: tensor<2x4xi64>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 2> {
    %w = zero.get_param @w : tensor<2x2x4x4xf32>
    %r = nn.rope %w positions(%pos : tensor<2x4xi64>) theta 1.000000e+04 : tensor<2x2x4x4xf32>
    %loss = nn.fill 0.0 : tensor<f32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 1.0 phase boundary : tensor<2xf32>
    %skip = zero.update_loss_scale %st phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @flat stats %st scale %ls skip %skip divisor 1.0 phase boundary : tensor<2xf32>
    zero.return %loss : tensor<f32>
  }
}

// -----

// A sliding window, soft-capping or ALiBi are fields of the same descriptor
// (0 or null: none); the slopes are a constant global, passed by address.

// CHECK-LABEL: module @attention_ext
// CHECK: llvm.mlir.global internal constant @[[GLOBAL:zero_const_[0-9]+]](dense<[5.000000e-01, 2.500000e-01, 1.250000e-01, 6.250000e-02, 3.125000e-02, 1.562500e-02]> : tensor<6xf32>)
// CHECK-LABEL: llvm.func @zero_micro_step
// CHECK:      %[[WINDOW:.*]] = llvm.mlir.constant(3 : i64) : i64
// CHECK-NEXT: %[[CAP:.*]] = llvm.mlir.constant(0.000000e+00 : f64) : f64
// CHECK-NEXT: %[[NONE:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK:      llvm.insertvalue %[[WINDOW]], %{{.*}}[8]
// CHECK-NEXT: llvm.insertvalue %[[CAP]], %{{.*}}[9]
// CHECK-NEXT: llvm.insertvalue %[[NONE]], %{{.*}}[10]
// CHECK:      llvm.call @zrt_attention_forward(
// CHECK:      %[[WINDOW:.*]] = llvm.mlir.constant(0 : i64) : i64
// CHECK-NEXT: %[[CAP:.*]] = llvm.mlir.constant(5.000000e+01 : f64) : f64
// CHECK-NEXT: %[[NONE:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK:      llvm.insertvalue %[[WINDOW]], %{{.*}}[8]
// CHECK-NEXT: llvm.insertvalue %[[CAP]], %{{.*}}[9]
// CHECK-NEXT: llvm.insertvalue %[[NONE]], %{{.*}}[10]
// CHECK:      llvm.call @zrt_attention_backward(
// CHECK:      %[[SLOPES:.*]] = llvm.mlir.addressof @[[GLOBAL]] : !llvm.ptr
// CHECK:      llvm.insertvalue %[[SLOPES]], %{{.*}}[10]
// CHECK:      llvm.call @zrt_attention_forward(

module @attention_ext {
  zero.param @w : tensor<2xf32> init zeros
  zero.partition @flat stage 0 world_size 1 alignment 2 numel 2 padded 2 params [@w] offsets [0]
  zero.train_step @train(%q: tensor<4x6x8x16xf32>, %dy: tensor<4x6x8x16xf32>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 4> {
    %o = nn.attention %q, %q, %q causal window 3 : tensor<4x6x8x16xf32>
    %dq, %dk, %dv = nn.attention_grad %q, %q, %q, %o, %dy scale 0.25 softcap 50.0 : tensor<4x6x8x16xf32>
    %a = nn.attention %q, %q, %q alibi [0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625] : tensor<4x6x8x16xf32>
    %loss = nn.fill 0.0 : tensor<f32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 1.0 phase boundary : tensor<2xf32>
    %skip = zero.update_loss_scale %st phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @flat stats %st scale %ls skip %skip divisor 1.0 phase boundary : tensor<2xf32>
    zero.return %loss : tensor<f32>
  }
}

// -----

// Rotary embedding: the (batch, heads, seq, head_dim) shape, theta, the
// inverse rotation (its derivative) and the interleaved pairing as flags,
// then the table of frequencies (a constant global, or null for theta's) and
// the scale of cos and sin.

// CHECK-LABEL: module @rope
// CHECK:      llvm.mlir.global internal constant @[[TABLE:zero_const_[0-9]+]](dense<[1.000000e+00, 2.500000e-01, 1.250000e-02, 0.000000e+00]> : tensor<4xf32>) {addr_space = 0 : i32} : !llvm.array<4 x f32>

// CHECK-LABEL: llvm.func @zero_micro_step
// CHECK:      %[[X:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[R:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[BATCH:.*]] = llvm.mlir.constant(4 : i64) : i64
// CHECK-NEXT: %[[HEADS:.*]] = llvm.mlir.constant(2 : i64) : i64
// CHECK-NEXT: %[[SEQ:.*]] = llvm.mlir.constant(3 : i64) : i64
// CHECK-NEXT: %[[HEAD_DIM:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-NEXT: %[[THETA:.*]] = llvm.mlir.constant(1.000000e+04 : f64) : f64
// CHECK-NEXT: %[[INVERSE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[INTERLEAVED:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[NULL:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK-NEXT: %[[ONE:.*]] = llvm.mlir.constant(1.000000e+00 : f64) : f64
// CHECK-NEXT: llvm.call @zrt_rope(%[[DTYPE]], %[[X]], %[[R]], %[[BATCH]], %[[HEADS]], %[[SEQ]], %[[HEAD_DIM]], %[[THETA]], %[[INVERSE]], %[[INTERLEAVED]], %[[NULL]], %[[ONE]])
// CHECK:      %[[I:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[BATCH:.*]] = llvm.mlir.constant(4 : i64) : i64
// CHECK-NEXT: %[[HEADS:.*]] = llvm.mlir.constant(2 : i64) : i64
// CHECK-NEXT: %[[SEQ:.*]] = llvm.mlir.constant(3 : i64) : i64
// CHECK-NEXT: %[[HEAD_DIM:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-NEXT: %[[THETA:.*]] = llvm.mlir.constant(5.000000e+05 : f64) : f64
// CHECK-NEXT: %[[INVERSE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[INTERLEAVED:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[NULL:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK-NEXT: %[[ONE:.*]] = llvm.mlir.constant(1.000000e+00 : f64) : f64
// CHECK-NEXT: llvm.call @zrt_rope(%[[DTYPE]], %[[R]], %[[I]], %[[BATCH]], %[[HEADS]], %[[SEQ]], %[[HEAD_DIM]], %[[THETA]], %[[INVERSE]], %[[INTERLEAVED]], %[[NULL]], %[[ONE]])
// CHECK:      %[[T:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[THETA:.*]] = llvm.mlir.constant(0.000000e+00 : f64) : f64
// CHECK-NEXT: %[[INVERSE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[INTERLEAVED:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[ADDR:.*]] = llvm.mlir.addressof @[[TABLE]] : !llvm.ptr
// CHECK-NEXT: %[[SCALE:.*]] = llvm.mlir.constant(1.250000e+00 : f64) : f64
// CHECK-NEXT: llvm.call @zrt_rope(%{{.*}}, %[[I]], %[[T]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[THETA]], %[[INVERSE]], %[[INTERLEAVED]], %[[ADDR]], %[[SCALE]])

module @rope {
  zero.param @w : tensor<2xf32> init zeros
  zero.partition @flat stage 0 world_size 1 alignment 2 numel 2 padded 2 params [@w] offsets [0]
  zero.train_step @train(%x: tensor<4x2x3x8xf32>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 4> {
    %r = nn.rope %x theta 1.000000e+04 : tensor<4x2x3x8xf32>
    %i = nn.rope %r theta 5.000000e+05 inverse interleaved : tensor<4x2x3x8xf32>
    %t = nn.rope %i inv_freq [1.0 : f32, 0.25 : f32, 0.0125 : f32, 0.0 : f32] scale 1.25 : tensor<4x2x3x8xf32>
    %loss = nn.fill 0.0 : tensor<f32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 1.0 phase boundary : tensor<2xf32>
    %skip = zero.update_loss_scale %st phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @flat stats %st scale %ls skip %skip divisor 1.0 phase boundary : tensor<2xf32>
    zero.return %loss : tensor<f32>
  }
}

// -----

// Embedding (bf16): the table (a parameter) and the ids with their index
// type (i32), the number of ids, the rows an id may select (`rows 10` of the
// 16 in the table, the others padding) and the row width; its gradient
// writes all 16 rows of the table's gradient and passes its padding_idx
// (-1 without one).

// CHECK-LABEL: module @embedding
// CHECK-LABEL: llvm.func @zero_micro_step
// CHECK:      %[[T:.*]] = llvm.call @zrt_ctx_persistent(%arg0, %{{.*}})
// CHECK:      %[[IDS:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[E:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[ID_TYPE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[NUM_IDS:.*]] = llvm.mlir.constant(12 : i64) : i64
// CHECK-NEXT: %[[VOCAB:.*]] = llvm.mlir.constant(10 : i64) : i64
// CHECK-NEXT: %[[DIM:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_embedding(%[[DTYPE]], %[[T]], %[[ID_TYPE]], %[[IDS]], %[[E]], %[[NUM_IDS]], %[[VOCAB]], %[[DIM]])
// CHECK:      %[[DY:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[DT:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[ID_TYPE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[NUM_IDS:.*]] = llvm.mlir.constant(12 : i64) : i64
// CHECK-NEXT: %[[VOCAB:.*]] = llvm.mlir.constant(16 : i64) : i64
// CHECK-NEXT: %[[DIM:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-NEXT: %[[NO_PAD:.*]] = llvm.mlir.constant(-1 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_embedding_grad(%[[DTYPE]], %[[DY]], %[[ID_TYPE]], %[[IDS]], %[[DT]], %[[NUM_IDS]], %[[VOCAB]], %[[DIM]], %[[NO_PAD]])
// CHECK:      %[[DP:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[ID_TYPE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[NUM_IDS:.*]] = llvm.mlir.constant(12 : i64) : i64
// CHECK-NEXT: %[[VOCAB:.*]] = llvm.mlir.constant(16 : i64) : i64
// CHECK-NEXT: %[[DIM:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-NEXT: %[[PAD:.*]] = llvm.mlir.constant(3 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_embedding_grad(%[[DTYPE]], %[[DY]], %[[ID_TYPE]], %[[IDS]], %[[DP]], %[[NUM_IDS]], %[[VOCAB]], %[[DIM]], %[[PAD]])

module @embedding {
  zero.param @w : tensor<16x8xf32> init zeros compute bf16
  zero.partition @flat stage 0 world_size 1 alignment 2 numel 128 padded 128 params [@w] offsets [0]
  zero.train_step @train(%ids: tensor<4x3xi32>, %dy: tensor<4x3x8xbf16>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = bf16>
      schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 4> {
    %t = zero.get_param @w : tensor<16x8xbf16>
    %e = nn.embedding %t[%ids] rows 10 : tensor<16x8xbf16>, tensor<4x3xi32> -> tensor<4x3x8xbf16>
    %dt = nn.embedding_grad %dy[%ids] : tensor<4x3x8xbf16>, tensor<4x3xi32> -> tensor<16x8xbf16>
    %dp = nn.embedding_grad %dy[%ids] padding_idx 3 : tensor<4x3x8xbf16>, tensor<4x3xi32> -> tensor<16x8xbf16>
    %loss = nn.fill 0.0 : tensor<f32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 1.0 phase boundary : tensor<2xf32>
    %skip = zero.update_loss_scale %st phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @flat stats %st scale %ls skip %skip divisor 1.0 phase boundary : tensor<2xf32>
    zero.return %loss : tensor<f32>
  }
}

// -----

// The loss: softmax cross-entropy over 4 rows of 16 logits of which the first
// 10 are classes (`classes 10`), with i64 labels; its gradient reads the loss
// seed. The step records the loss (zrt_ctx_set_loss) after its last op; the
// evaluation step computes it again from the forward and records it.

// CHECK-LABEL: module @cross_entropy
// CHECK-LABEL: llvm.func @zero_micro_step
// CHECK:      %[[LOGITS:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[LABELS:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[LOSS:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[LABEL_TYPE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[ROWS:.*]] = llvm.mlir.constant(4 : i64) : i64
// CHECK-NEXT: %[[CLASSES:.*]] = llvm.mlir.constant(10 : i64) : i64
// CHECK-NEXT: %[[COLS:.*]] = llvm.mlir.constant(16 : i64) : i64
// CHECK-NEXT: %[[IGNORE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[IGNORE_INDEX:.*]] = llvm.mlir.constant(0 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_softmax_cross_entropy(%[[DTYPE]], %[[LOGITS]], %[[LABEL_TYPE]], %[[LABELS]], %[[LOSS]], %[[ROWS]], %[[CLASSES]], %[[COLS]], %[[IGNORE]], %[[IGNORE_INDEX]])
// CHECK:      %[[DLOSS:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[DL:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[LABEL_TYPE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[ROWS:.*]] = llvm.mlir.constant(4 : i64) : i64
// CHECK-NEXT: %[[CLASSES:.*]] = llvm.mlir.constant(10 : i64) : i64
// CHECK-NEXT: %[[COLS:.*]] = llvm.mlir.constant(16 : i64) : i64
// CHECK-NEXT: %[[IGNORE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[IGNORE_INDEX:.*]] = llvm.mlir.constant(0 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_softmax_cross_entropy_grad(%[[DTYPE]], %[[LOGITS]], %[[LABEL_TYPE]], %[[LABELS]], %[[DLOSS]], %[[DL]], %[[ROWS]], %[[CLASSES]], %[[COLS]], %[[IGNORE]], %[[IGNORE_INDEX]])
// CHECK:      llvm.call @zrt_ctx_set_loss(%arg0, %[[LOSS]])
// CHECK-LABEL: llvm.func @zero_eval_step
// CHECK:      %[[ELOGITS:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[ELABELS:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[ELOSS:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[LABEL_TYPE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[ROWS:.*]] = llvm.mlir.constant(4 : i64) : i64
// CHECK-NEXT: %[[CLASSES:.*]] = llvm.mlir.constant(10 : i64) : i64
// CHECK-NEXT: %[[COLS:.*]] = llvm.mlir.constant(16 : i64) : i64
// CHECK-NEXT: %[[IGNORE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[IGNORE_INDEX:.*]] = llvm.mlir.constant(0 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_softmax_cross_entropy(%[[DTYPE]], %[[ELOGITS]], %[[LABEL_TYPE]], %[[ELABELS]], %[[ELOSS]], %[[ROWS]], %[[CLASSES]], %[[COLS]], %[[IGNORE]], %[[IGNORE_INDEX]])
// CHECK-NEXT: llvm.call @zrt_ctx_set_loss(%arg0, %[[ELOSS]])

module @cross_entropy {
  zero.param @w : tensor<2xf32> init zeros
  zero.partition @flat stage 0 world_size 1 alignment 2 numel 2 padded 2 params [@w] offsets [0]
  zero.train_step @train(%logits: tensor<4x16xf32>, %labels: tensor<4xi64>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 4> {
    %loss = nn.softmax_cross_entropy %logits, %labels classes 10 : tensor<4x16xf32>, tensor<4xi64> -> tensor<f32>
    %seed = nn.fill 1.0 {zero.loss_seed} : tensor<f32>
    %dl = nn.softmax_cross_entropy_grad %logits, %labels, %seed classes 10 : tensor<4x16xf32>, tensor<4xi64>, tensor<f32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 1.0 phase boundary : tensor<2xf32>
    %skip = zero.update_loss_scale %st phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @flat stats %st scale %ls skip %skip divisor 1.0 phase boundary : tensor<2xf32>
    zero.return %loss : tensor<f32>
  }
}

// -----

// The chunked output projection and loss: its operands' and results'
// pointers (the weight a persistent parameter), the rows (4 x 3), hidden size,
// vocabulary and chunk; forward and backward the same dimensions.

// CHECK-LABEL: module @linear_cross_entropy
// CHECK-LABEL: llvm.func @zero_micro_step
// CHECK:      %[[X:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[W:.*]] = llvm.call @zrt_ctx_persistent(%arg0, %{{.*}})
// CHECK:      %[[LABELS:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[LOSS:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[LABEL_TYPE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[ROWS:.*]] = llvm.mlir.constant(12 : i64) : i64
// CHECK-NEXT: %[[HIDDEN:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-NEXT: %[[VOCAB:.*]] = llvm.mlir.constant(10 : i64) : i64
// CHECK-NEXT: %[[CHUNK:.*]] = llvm.mlir.constant(5 : i64) : i64
// CHECK-NEXT: %[[IGNORE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[IGNORE_INDEX:.*]] = llvm.mlir.constant(-100 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_linear_cross_entropy(%[[DTYPE]], %[[X]], %[[W]], %[[LABEL_TYPE]], %[[LABELS]], %[[LOSS]], %[[ROWS]], %[[HIDDEN]], %[[VOCAB]], %[[CHUNK]], %[[IGNORE]], %[[IGNORE_INDEX]])
// CHECK:      %[[DLOSS:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[DX:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[DW:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[LABEL_TYPE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[ROWS:.*]] = llvm.mlir.constant(12 : i64) : i64
// CHECK-NEXT: %[[HIDDEN:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-NEXT: %[[VOCAB:.*]] = llvm.mlir.constant(10 : i64) : i64
// CHECK-NEXT: %[[CHUNK:.*]] = llvm.mlir.constant(5 : i64) : i64
// CHECK-NEXT: %[[IGNORE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[IGNORE_INDEX:.*]] = llvm.mlir.constant(-100 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_linear_cross_entropy_grad(%[[DTYPE]], %[[X]], %[[W]], %[[LABEL_TYPE]], %[[LABELS]], %[[DLOSS]], %[[DX]], %[[DW]], %[[ROWS]], %[[HIDDEN]], %[[VOCAB]], %[[CHUNK]], %[[IGNORE]], %[[IGNORE_INDEX]])

module @linear_cross_entropy {
  zero.param @w : tensor<10x8xf32> init zeros
  zero.partition @flat stage 0 world_size 1 alignment 2 numel 80 padded 80 params [@w] offsets [0]
  zero.train_step @train(%x: tensor<4x3x8xf32>, %labels: tensor<4x3xi64>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 4> {
    %w = zero.get_param @w : tensor<10x8xf32>
    %loss = nn.linear_cross_entropy %x, %w, %labels chunk 5 ignore_index -100 : tensor<4x3x8xf32>, tensor<10x8xf32>, tensor<4x3xi64> -> tensor<f32>
    %seed = nn.fill 1.0 {zero.loss_seed} : tensor<f32>
    %dx, %dw = nn.linear_cross_entropy_grad %x, %w, %labels, %seed chunk 5 ignore_index -100 : tensor<4x3x8xf32>, tensor<10x8xf32>, tensor<4x3xi64>, tensor<f32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 1.0 phase boundary : tensor<2xf32>
    %skip = zero.update_loss_scale %st phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @flat stats %st scale %ls skip %skip divisor 1.0 phase boundary : tensor<2xf32>
    zero.return %loss : tensor<f32>
  }
}

// -----

// The tiled MLP: its operands' and results' pointers (the three weights
// persistent parameters), the rows (4 x 3), hidden size, intermediate size
// and tiles; the backward reads the same operands, with the same dimensions.

// CHECK-LABEL: module @tiled_mlp
// CHECK-LABEL: llvm.func @zero_micro_step
// CHECK:      %[[X:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[WG:.*]] = llvm.call @zrt_ctx_persistent(%arg0, %{{.*}})
// CHECK:      %[[WU:.*]] = llvm.call @zrt_ctx_persistent(%arg0, %{{.*}})
// CHECK:      %[[WD:.*]] = llvm.call @zrt_ctx_persistent(%arg0, %{{.*}})
// CHECK:      %[[Y:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[ROWS:.*]] = llvm.mlir.constant(12 : i64) : i64
// CHECK-NEXT: %[[HIDDEN:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-NEXT: %[[INTER:.*]] = llvm.mlir.constant(16 : i64) : i64
// CHECK-NEXT: %[[TILES:.*]] = llvm.mlir.constant(5 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_tiled_mlp(%[[DTYPE]], %[[X]], %[[WG]], %[[WU]], %[[WD]], %[[Y]], %[[ROWS]], %[[HIDDEN]], %[[INTER]], %[[TILES]])
// CHECK:      llvm.call @zrt_tiled_mlp_grad(%{{[0-9]+}}, %[[X]], %[[WG]], %[[WU]], %[[WD]], %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}})

module @tiled_mlp {
  zero.param @wg : tensor<16x8xf32> init zeros
  zero.param @wu : tensor<16x8xf32> init zeros
  zero.param @wd : tensor<8x16xf32> init zeros
  zero.partition @flat stage 0 world_size 1 alignment 2 numel 384 padded 384 params [@wg, @wu, @wd] offsets [0, 128, 256]
  zero.train_step @train(%x: tensor<4x3x8xf32>, %labels: tensor<4x3xi64>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 4> {
    %wg = zero.get_param @wg : tensor<16x8xf32>
    %wu = zero.get_param @wu : tensor<16x8xf32>
    %wd = zero.get_param @wd : tensor<8x16xf32>
    %y = nn.tiled_mlp %x, %wg, %wu, %wd tiles 5 : tensor<4x3x8xf32>, tensor<16x8xf32>, tensor<8x16xf32>
    %loss = nn.softmax_cross_entropy %y, %labels : tensor<4x3x8xf32>, tensor<4x3xi64> -> tensor<f32>
    %seed = nn.fill 1.0 {zero.loss_seed} : tensor<f32>
    %dy = nn.softmax_cross_entropy_grad %y, %labels, %seed : tensor<4x3x8xf32>, tensor<4x3xi64>, tensor<f32>
    %dx, %dwg, %dwu, %dwd = nn.tiled_mlp_grad %x, %wg, %wu, %wd, %dy tiles 5 : tensor<4x3x8xf32>, tensor<16x8xf32>, tensor<8x16xf32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 1.0 phase boundary : tensor<2xf32>
    %skip = zero.update_loss_scale %st phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @flat stats %st scale %ls skip %skip divisor 1.0 phase boundary : tensor<2xf32>
    zero.return %loss : tensor<f32>
  }
}

// -----

// nn.reduce_sum sums the leading dimensions: 12 rows of 8 into 8.

// CHECK-LABEL: module @reduce_sum
// CHECK-LABEL: llvm.func @zero_micro_step
// CHECK:      %[[DY:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[DB:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[ROWS:.*]] = llvm.mlir.constant(12 : i64) : i64
// CHECK-NEXT: %[[COLS:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_reduce_sum(%[[DTYPE]], %[[DY]], %[[DB]], %[[ROWS]], %[[COLS]])

module @reduce_sum {
  zero.param @w : tensor<2xf32> init zeros
  zero.partition @flat stage 0 world_size 1 alignment 2 numel 2 padded 2 params [@w] offsets [0]
  zero.train_step @train(%dy: tensor<4x3x8xf32>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 4> {
    %db = nn.reduce_sum %dy : tensor<4x3x8xf32> -> tensor<8xf32>
    %loss = nn.fill 0.0 : tensor<f32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 1.0 phase boundary : tensor<2xf32>
    %skip = zero.update_loss_scale %st phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @flat stats %st scale %ls skip %skip divisor 1.0 phase boundary : tensor<2xf32>
    zero.return %loss : tensor<f32>
  }
}

// -----

// Layout ops: nn.transpose passes the rank and the input's shape and the
// permutation as constant arrays; nn.split and nn.concat pass their
// results' (inputs') pointers in an array with the sizes along the axis and
// the (outer, inner) extents around it. nn.reshape is a view: it emits no
// call, and its users read the bytes of its source (%y, the second input, at
// offset 384 after the 384 bytes of %x). Each op's pointers follow its
// memory tracing calls (zrt_ctx_trace_*), which anchor the offsets below.

// CHECK-LABEL: module @layout
// CHECK-DAG:  llvm.mlir.global internal constant @[[SHAPE:zero_const_[0-9]+]](dense<[4, 3, 8]> : tensor<3xi64>)
// CHECK-DAG:  llvm.mlir.global internal constant @[[PERM:zero_const_[0-9]+]](dense<[0, 2, 1]> : tensor<3xi64>)
// CHECK-DAG:  llvm.mlir.global internal constant @[[HALVES:zero_const_[0-9]+]](dense<4> : tensor<2xi64>)
// CHECK-DAG:  llvm.mlir.global internal constant @[[PARTS:zero_const_[0-9]+]](dense<[4, 2]> : tensor<2xi64>)
// CHECK-LABEL: llvm.func @zero_micro_step
// CHECK:      %[[X:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[T:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[RANK:.*]] = llvm.mlir.constant(3 : i32) : i32
// CHECK-NEXT: %[[SHAPE_PTR:.*]] = llvm.mlir.addressof @[[SHAPE]] : !llvm.ptr
// CHECK-NEXT: %[[PERM_PTR:.*]] = llvm.mlir.addressof @[[PERM]] : !llvm.ptr
// CHECK-NEXT: llvm.call @zrt_transpose(%[[DTYPE]], %[[X]], %[[T]], %[[RANK]], %[[SHAPE_PTR]], %[[PERM_PTR]])
// CHECK:      %[[A:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[B:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[ONE:.*]] = llvm.mlir.constant(1 : i64) : i64
// CHECK-NEXT: %[[OUTS:.*]] = llvm.alloca %[[ONE]] x !llvm.array<2 x ptr>
// CHECK-NEXT: %[[OUT0:.*]] = llvm.getelementptr %[[OUTS]][0, 0]
// CHECK-NEXT: llvm.store %[[A]], %[[OUT0]]
// CHECK-NEXT: %[[OUT1:.*]] = llvm.getelementptr %[[OUTS]][0, 1]
// CHECK-NEXT: llvm.store %[[B]], %[[OUT1]]
// CHECK-NEXT: %[[SIZES:.*]] = llvm.mlir.addressof @[[HALVES]] : !llvm.ptr
// CHECK-NEXT: %[[NUM:.*]] = llvm.mlir.constant(2 : i32) : i32
// CHECK-NEXT: %[[OUTER:.*]] = llvm.mlir.constant(12 : i64) : i64
// CHECK-NEXT: %[[INNER:.*]] = llvm.mlir.constant(1 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_split(%[[DTYPE]], %[[X]], %[[OUTS]], %[[SIZES]], %[[NUM]], %[[OUTER]], %[[INNER]])
// CHECK:      llvm.call @zrt_ctx_trace_live(
// CHECK-NEXT: %[[YOFF:.*]] = llvm.mlir.constant([[YBYTES:384]] : i64) : i64
// CHECK-NEXT: %[[Y:.*]] = llvm.call @zrt_ctx_step(%arg0, %[[YOFF]])
// CHECK-NEXT: %{{.*}} = llvm.mlir.constant
// CHECK-NEXT: %[[C:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[ONE:.*]] = llvm.mlir.constant(1 : i64) : i64
// CHECK-NEXT: %[[INS:.*]] = llvm.alloca %[[ONE]] x !llvm.array<2 x ptr>
// CHECK-NEXT: %[[IN0:.*]] = llvm.getelementptr %[[INS]][0, 0]
// CHECK-NEXT: llvm.store %[[A]], %[[IN0]]
// CHECK-NEXT: %[[IN1:.*]] = llvm.getelementptr %[[INS]][0, 1]
// CHECK-NEXT: llvm.store %[[Y]], %[[IN1]]
// CHECK-NEXT: %[[SIZES:.*]] = llvm.mlir.addressof @[[PARTS]] : !llvm.ptr
// CHECK-NEXT: %[[NUM:.*]] = llvm.mlir.constant(2 : i32) : i32
// CHECK-NEXT: %[[OUTER:.*]] = llvm.mlir.constant(12 : i64) : i64
// CHECK-NEXT: %[[INNER:.*]] = llvm.mlir.constant(1 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_concat(%[[DTYPE]], %[[INS]], %[[SIZES]], %[[NUM]], %[[C]], %[[OUTER]], %[[INNER]])
// CHECK-NOT:  llvm.call @zrt_reshape
// CHECK:      llvm.call @zrt_ctx_trace_live(
// CHECK-NEXT: %[[ROFF:.*]] = llvm.mlir.constant([[YBYTES]] : i64) : i64
// CHECK-NEXT: %[[R:.*]] = llvm.call @zrt_ctx_step(%arg0, %[[ROFF]])
// CHECK-NEXT: %{{.*}} = llvm.mlir.constant
// CHECK-NEXT: %[[S:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[N:.*]] = llvm.mlir.constant(24 : i64) : i64
// CHECK-NEXT: %[[FACTOR:.*]] = llvm.mlir.constant(2.000000e+00 : f64) : f64
// CHECK-NEXT: llvm.call @zrt_scale(%[[DTYPE]], %[[R]], %[[S]], %[[N]], %[[FACTOR]])

module @layout {
  zero.param @w : tensor<2xf32> init zeros
  zero.partition @flat stage 0 world_size 1 alignment 2 numel 2 padded 2 params [@w] offsets [0]
  zero.train_step @train(%x: tensor<4x3x8xf32>, %y: tensor<4x3x2xf32>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 4> {
    %t = nn.transpose %x [0, 2, 1] : tensor<4x3x8xf32> -> tensor<4x8x3xf32>
    %a, %b = nn.split %x axis 2 : tensor<4x3x8xf32> -> tensor<4x3x4xf32>, tensor<4x3x4xf32>
    %c = nn.concat %a, %y axis 2 : tensor<4x3x4xf32>, tensor<4x3x2xf32> -> tensor<4x3x6xf32>
    %r = nn.reshape %y : tensor<4x3x2xf32> -> tensor<4x6xf32>
    %s = nn.scale %r by 2.0 : tensor<4x6xf32>
    %loss = nn.fill 0.0 : tensor<f32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 1.0 phase boundary : tensor<2xf32>
    %skip = zero.update_loss_scale %st phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @flat stats %st scale %ls skip %skip divisor 1.0 phase boundary : tensor<2xf32>
    zero.return %loss : tensor<f32>
  }
}

// -----

// Casts pass both element types (nn.cast and zero.cast lower alike; here
// the flat zero.cast reads a reshape of the nn.cast's result, so its
// pointer has the same offset), and nn.fill its value.

// CHECK-LABEL: module @fill_cast
// CHECK-LABEL: llvm.func @zero_micro_step
// CHECK:      %[[X:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[COFF:.*]] = llvm.mlir.constant([[C:[0-9]+]] : i64) : i64
// CHECK-NEXT: %[[CB:.*]] = llvm.call @zrt_ctx_step(%arg0, %[[COFF]])
// CHECK-NEXT: %[[F32:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[BF16:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[N:.*]] = llvm.mlir.constant(32 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_cast(%[[F32]], %[[X]], %[[BF16]], %[[CB]], %[[N]])
// The pointer of the view follows the memory tracing of op 2, the zero.cast.
// CHECK:      llvm.call @zrt_ctx_trace_live(
// CHECK-NEXT: %[[FOFF:.*]] = llvm.mlir.constant([[C]] : i64) : i64
// CHECK-NEXT: %[[F:.*]] = llvm.call @zrt_ctx_step(%arg0, %[[FOFF]])
// CHECK-NEXT: %{{.*}} = llvm.mlir.constant
// CHECK-NEXT: %[[U:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[BF16:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[F32:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[N:.*]] = llvm.mlir.constant(32 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_cast(%[[BF16]], %[[F]], %[[F32]], %[[U]], %[[N]])
// CHECK:      %[[O:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[F16:.*]] = llvm.mlir.constant(2 : i32) : i32
// CHECK-NEXT: %[[N:.*]] = llvm.mlir.constant(32 : i64) : i64
// CHECK-NEXT: %[[VALUE:.*]] = llvm.mlir.constant(1.500000e+00 : f64) : f64
// CHECK-NEXT: llvm.call @zrt_fill(%[[F16]], %[[O]], %[[N]], %[[VALUE]])

module @fill_cast {
  zero.param @w : tensor<2xf32> init zeros
  zero.partition @flat stage 0 world_size 1 alignment 2 numel 2 padded 2 params [@w] offsets [0]
  zero.train_step @train(%x: tensor<4x8xf32>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 4> {
    %c = nn.cast %x : tensor<4x8xf32> to tensor<4x8xbf16>
    %f = nn.reshape %c : tensor<4x8xbf16> -> tensor<32xbf16>
    %u = zero.cast %f : tensor<32xbf16> to tensor<32xf32>
    %o = nn.fill 1.5 : tensor<4x8xf16>
    %loss = nn.fill 0.0 : tensor<f32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 1.0 phase boundary : tensor<2xf32>
    %skip = zero.update_loss_scale %st phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @flat stats %st scale %ls skip %skip divisor 1.0 phase boundary : tensor<2xf32>
    zero.return %loss : tensor<f32>
  }
}

// -----

// A loss with ignore_index -100 (ignore 1 and the index in its calls) and
// the mean over the global batch's valid labels (zero-token-mean): the label
// count's all-reduce guarded by the flag of the first micro step, the
// micro batch's share, and the label count function, which counts one micro
// batch's 4 labels. The evaluation step reads the share too (1 there), and
// the program descriptor points at the count function.

// CHECK-LABEL: module @ignore_index
// CHECK-LABEL: llvm.func @zero_micro_step
// CHECK:      %[[FIRST:.*]] = llvm.call @zrt_ctx_first_micro_step(%arg0)
// CHECK:      llvm.cond_br %{{.*}}, ^[[COUNT:.*]], ^[[AFTER:.*]]
// CHECK:      ^[[COUNT]]:
// CHECK:      %[[N:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: llvm.call @zrt_ctx_all_reduce_labels(%arg0, %[[N]])
// CHECK-NEXT: llvm.br ^[[AFTER]]
// CHECK:      ^[[AFTER]]:
// CHECK:      llvm.mlir.constant(16 : i64) : i64
// CHECK-NEXT: llvm.mlir.constant(16 : i64) : i64
// CHECK-NEXT: %[[IGNORE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[IGNORE_INDEX:.*]] = llvm.mlir.constant(-100 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_softmax_cross_entropy(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[IGNORE]], %[[IGNORE_INDEX]])
// CHECK:      %[[SHARE:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DIVISOR:.*]] = llvm.mlir.constant(2.000000e+00 : f64) : f64
// CHECK-NEXT: llvm.call @zrt_ctx_label_share(%arg0, %[[DIVISOR]], %[[SHARE]])
// CHECK:      llvm.mlir.constant(16 : i64) : i64
// CHECK-NEXT: llvm.mlir.constant(16 : i64) : i64
// CHECK-NEXT: %[[IGNORE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[IGNORE_INDEX:.*]] = llvm.mlir.constant(-100 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_softmax_cross_entropy_grad(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[IGNORE]], %[[IGNORE_INDEX]])
// CHECK-LABEL: llvm.func @zero_eval_step
// CHECK-NOT:  zrt_ctx_all_reduce_labels
// CHECK:      llvm.call @zrt_ctx_label_share(
// CHECK-LABEL: llvm.func @zero_count_labels
// CHECK:      %[[LABELS:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[LABEL_TYPE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[NUM:.*]] = llvm.mlir.constant(4 : i64) : i64
// CHECK-NEXT: %[[IGNORE_INDEX:.*]] = llvm.mlir.constant(-100 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_ctx_count_labels(%arg0, %[[LABEL_TYPE]], %[[LABELS]], %[[NUM]], %[[IGNORE_INDEX]])
// CHECK-NEXT: llvm.return
// CHECK:      llvm.mlir.addressof @zero_count_labels

module @ignore_index {
  zero.param @w : tensor<2xf32> init zeros
  zero.partition @flat stage 0 world_size 1 alignment 2 numel 2 padded 2 params [@w] offsets [0]
  zero.train_step @train(%logits: tensor<4x16xf32>, %labels: tensor<4xi64>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 8, accumulation_steps = 2> {
    %n = zero.count_labels %labels ignore_index -100 group @flat : tensor<4xi64> -> tensor<1xi64>
    %l = nn.softmax_cross_entropy %logits, %labels ignore_index -100 : tensor<4x16xf32>, tensor<4xi64> -> tensor<f32>
    %share = zero.label_share divisor 2.0 : tensor<f32>
    %loss = nn.mul %l, %share : tensor<f32>, tensor<f32>
    %seed = nn.fill 1.0 {zero.loss_seed} : tensor<f32>
    %scaled = nn.mul %seed, %share : tensor<f32>, tensor<f32>
    %dl = nn.softmax_cross_entropy_grad %logits, %labels, %scaled ignore_index -100 : tensor<4x16xf32>, tensor<4xi64>, tensor<f32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 2.0 phase boundary : tensor<2xf32>
    %skip = zero.update_loss_scale %st phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @flat stats %st scale %ls skip %skip divisor 2.0 phase boundary : tensor<2xf32>
    zero.return %loss : tensor<f32>
  }
}

// -----

// Labels shifted inside the model (nn.shift_labels): zrt_shift_labels with
// the label type, the labels, its result, rows, columns and the fill. The
// label count function counts the shifted labels, so it shifts them first,
// into the buffer the micro step shifts them into.

// CHECK-LABEL: module @shift_labels
// CHECK-LABEL: llvm.func @zero_micro_step
// CHECK:      %[[LABELS:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[SHIFTED:.*]] = llvm.call @zrt_ctx_step(%arg0, %[[AT:.*]])
// CHECK-NEXT: %[[LABEL_TYPE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[ROWS:.*]] = llvm.mlir.constant(2 : i64) : i64
// CHECK-NEXT: %[[COLS:.*]] = llvm.mlir.constant(3 : i64) : i64
// CHECK-NEXT: %[[FILL:.*]] = llvm.mlir.constant(-100 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_shift_labels(%[[LABEL_TYPE]], %[[LABELS]], %[[SHIFTED]], %[[ROWS]], %[[COLS]], %[[FILL]])
// CHECK:      llvm.call @zrt_softmax_cross_entropy(%{{.*}}, %{{.*}}, %{{.*}}, %[[SHIFTED]],
// CHECK-LABEL: llvm.func @zero_count_labels
// CHECK:      %[[CLABELS:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[CSHIFTED:.*]] = llvm.call @zrt_ctx_step(%arg0, %[[CAT:.*]])
// CHECK:      llvm.call @zrt_shift_labels(%{{.*}}, %[[CLABELS]], %[[CSHIFTED]], %{{.*}}, %{{.*}}, %{{.*}})
// CHECK:      %[[NUM:.*]] = llvm.mlir.constant(6 : i64) : i64
// CHECK-NEXT: %[[IGNORE_INDEX:.*]] = llvm.mlir.constant(-100 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_ctx_count_labels(%arg0, %{{.*}}, %[[CSHIFTED]], %[[NUM]], %[[IGNORE_INDEX]])
// CHECK-NEXT: llvm.return

module @shift_labels {
  zero.param @w : tensor<2xf32> init zeros
  zero.partition @flat stage 0 world_size 1 alignment 2 numel 2 padded 2 params [@w] offsets [0]
  zero.train_step @train(%logits: tensor<2x3x16xf32>, %labels: tensor<2x3xi64>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 2> {
    %y = nn.shift_labels %labels fill -100 : tensor<2x3xi64>
    %n = zero.count_labels %y ignore_index -100 group @flat : tensor<2x3xi64> -> tensor<1xi64>
    %l = nn.softmax_cross_entropy %logits, %y ignore_index -100 : tensor<2x3x16xf32>, tensor<2x3xi64> -> tensor<f32>
    %share = zero.label_share divisor 1.0 : tensor<f32>
    %loss = nn.mul %l, %share : tensor<f32>, tensor<f32>
    %seed = nn.fill 1.0 {zero.loss_seed} : tensor<f32>
    %scaled = nn.mul %seed, %share : tensor<f32>, tensor<f32>
    %dl = nn.softmax_cross_entropy_grad %logits, %y, %scaled ignore_index -100 : tensor<2x3x16xf32>, tensor<2x3xi64>, tensor<f32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 1.0 phase boundary : tensor<2xf32>
    %skip = zero.update_loss_scale %st phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @flat stats %st scale %ls skip %skip divisor 1.0 phase boundary : tensor<2xf32>
    zero.return %loss : tensor<f32>
  }
}

// -----

// The mixture-of-experts ops (i64 experts, positions and offsets; ZRT_I64
// 1): the router's logits (the split's first part), its correction bias
// (the fill), weights and experts, with tokens, experts, top k, sigmoid,
// normalize and scale; dispatch reads the tokens and the router's experts
// and writes rows, positions and offsets, with tokens, hidden size, top k
// and experts; the grouped product reads the rows, the weight (a
// persistent parameter) and the offsets, with rows, in, out, experts and
// the transposed layout.

// CHECK-LABEL: module @moe
// CHECK-LABEL: llvm.func @zero_micro_step
// CHECK:      %[[X:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[LOGITS:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      llvm.call @zrt_split(
// CHECK:      %[[BIAS:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      llvm.call @zrt_fill(%{{.*}}, %[[BIAS]],
// CHECK:      %[[W:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[IDX:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[ITYPE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[TOKENS:.*]] = llvm.mlir.constant(6 : i64) : i64
// CHECK-NEXT: %[[EXPERTS:.*]] = llvm.mlir.constant(4 : i64) : i64
// CHECK-NEXT: %[[K:.*]] = llvm.mlir.constant(2 : i64) : i64
// CHECK-NEXT: %[[SIGMOID:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[NORMALIZE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[SCALE:.*]] = llvm.mlir.constant(2.500000e+00 : f64) : f64
// CHECK-NEXT: %[[GROUPS:.*]] = llvm.mlir.constant(2 : i64) : i64
// CHECK-NEXT: %[[TOPGROUPS:.*]] = llvm.mlir.constant(1 : i64) : i64
// CHECK-NEXT: %[[EPS:.*]] = llvm.mlir.constant(9.9999999999999995E-21 : f64) : f64
// CHECK-NEXT: llvm.call @zrt_moe_router(%[[DTYPE]], %[[LOGITS]], %[[BIAS]], %[[W]], %[[ITYPE]], %[[IDX]], %[[TOKENS]], %[[EXPERTS]], %[[K]], %[[SIGMOID]], %[[NORMALIZE]], %[[SCALE]], %[[GROUPS]], %[[TOPGROUPS]], %[[EPS]])
// CHECK:      %[[ROWS:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[POS:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[OFFS:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %[[DTYPE2:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[ITYPE2:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[TOKENS2:.*]] = llvm.mlir.constant(6 : i64) : i64
// CHECK-NEXT: %[[DIM:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-NEXT: %[[K2:.*]] = llvm.mlir.constant(2 : i64) : i64
// CHECK-NEXT: %[[EXPERTS2:.*]] = llvm.mlir.constant(4 : i64) : i64
// CHECK-NEXT: llvm.call @zrt_moe_dispatch(%[[DTYPE2]], %[[X]], %[[ITYPE2]], %[[IDX]], %[[ROWS]], %[[POS]], %[[OFFS]], %[[TOKENS2]], %[[DIM]], %[[K2]], %[[EXPERTS2]])
// CHECK:      %[[WGU:.*]] = llvm.call @zrt_ctx_persistent(%arg0, %{{.*}})
// CHECK-NEXT: %{{.*}} = llvm.mlir.constant
// CHECK-NEXT: %[[H:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: %{{.*}} = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %{{.*}} = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[GROWS:.*]] = llvm.mlir.constant(12 : i64) : i64
// CHECK-NEXT: %[[IN:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-NEXT: %[[OUT:.*]] = llvm.mlir.constant(6 : i64) : i64
// CHECK-NEXT: %[[GEXPERTS:.*]] = llvm.mlir.constant(4 : i64) : i64
// CHECK-NEXT: %[[TRANSPOSED:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: llvm.call @zrt_grouped_matmul(%{{.*}}, %[[ROWS]], %[[WGU]], %{{.*}}, %[[OFFS]], %[[H]], %[[GROWS]], %[[IN]], %[[OUT]], %[[GEXPERTS]], %[[TRANSPOSED]])
// CHECK:      llvm.call @zrt_moe_combine(%{{.*}}, %[[H]], %{{.*}}, %[[POS]], %[[W]],
// CHECK:      llvm.call @zrt_moe_combine_grad(%{{.*}}, %[[H]], %{{.*}}, %[[POS]], %[[W]],
// CHECK:      llvm.call @zrt_grouped_matmul_weight_grad(%{{.*}}, %[[ROWS]],
// CHECK:      %[[GEPS:.*]] = llvm.mlir.constant(9.9999999999999995E-21 : f64) : f64
// CHECK-NEXT: llvm.call @zrt_moe_router_grad(%{{.*}}, %[[LOGITS]], %{{.*}}, %[[IDX]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[GEPS]])

module @moe {
  zero.param @wgu : tensor<4x6x8xf32> init zeros
  zero.partition @flat stage 0 world_size 1 alignment 2 numel 192 padded 192 params [@wgu] offsets [0]
  zero.train_step @train(%x: tensor<6x8xf32>, %labels: tensor<6xi64>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 6> {
    %wgu = zero.get_param @wgu : tensor<4x6x8xf32>
    %logits, %rest = nn.split %x axis 1 : tensor<6x8xf32> -> tensor<6x4xf32>, tensor<6x4xf32>
    %bias = nn.fill 1.0e-01 : tensor<4xf32>
    %w, %idx = nn.moe_router %logits bias(%bias : tensor<4xf32>) top_k 2 sigmoid normalize eps 1.0e-20 scale 2.5 groups 2 top 1 : tensor<6x4xf32> -> tensor<6x2xf32>, tensor<6x2xi32>
    %rows, %pos, %offs = nn.moe_dispatch %x[%idx] experts 4 : tensor<6x8xf32>, tensor<6x2xi32> -> tensor<12x8xf32>, tensor<4xi32>
    %h = nn.grouped_matmul %rows, %wgu, %offs transpose_rhs : tensor<12x8xf32>, tensor<4x6x8xf32>, tensor<4xi32> -> tensor<12x6xf32>
    %y = nn.moe_combine %h[%pos], %w : tensor<12x6xf32>, tensor<6x2xi32>, tensor<6x2xf32> -> tensor<6x6xf32>
    %loss = nn.softmax_cross_entropy %y, %labels : tensor<6x6xf32>, tensor<6xi64> -> tensor<f32>
    %seed = nn.fill 1.0 {zero.loss_seed} : tensor<f32>
    %dy = nn.softmax_cross_entropy_grad %y, %labels, %seed : tensor<6x6xf32>, tensor<6xi64>, tensor<f32>
    %dh, %dw = nn.moe_combine_grad %h[%pos], %w, %dy : tensor<12x6xf32>, tensor<6x2xi32>, tensor<6x2xf32>, tensor<6x6xf32>
    %dwgu = nn.grouped_matmul_weight_grad %rows, %dh, %offs transpose_rhs : tensor<12x8xf32>, tensor<12x6xf32>, tensor<4xi32> -> tensor<4x6x8xf32>
    %dl = nn.moe_router_grad %logits, %idx, %dw sigmoid normalize eps 1.0e-20 scale 2.5 : tensor<6x4xf32>, tensor<6x2xi32>, tensor<6x2xf32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 1.0 phase boundary : tensor<2xf32>
    %skip = zero.update_loss_scale %st phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @flat stats %st scale %ls skip %skip divisor 1.0 phase boundary : tensor<2xf32>
    zero.return %loss : tensor<f32>
  }
}

// -----

// gpt-oss: attention with sinks puts the sinks' address in the descriptor
// (field 11) beside its window, zrt_attention_dsinks writes the sinks'
// gradient from the same descriptor, and the clamped SwiGLU passes alpha and
// limit.

// CHECK-LABEL: module @gpt_oss
// CHECK-LABEL: llvm.func @zero_micro_step
// CHECK:      %[[Q:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK:      %[[S:.*]] = llvm.call @zrt_ctx_persistent(%arg0, %{{.*}})
// CHECK:      %[[O:.*]] = llvm.call @zrt_ctx_step(%arg0, %{{.*}})
// CHECK-NEXT: llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: llvm.mlir.constant(1 : i32) : i32
// CHECK:      %[[WINDOW:.*]] = llvm.mlir.constant(3 : i64) : i64
// CHECK:      llvm.insertvalue %[[WINDOW]], %{{.*}}[8]
// CHECK:      llvm.insertvalue %[[S]], %{{.*}}[11]
// CHECK:      %[[DESC:.*]] = llvm.alloca
// CHECK:      llvm.call @zrt_attention_forward(%[[DESC]], %[[Q]], %[[Q]], %[[Q]], %[[O]])
// CHECK:      llvm.insertvalue %[[S]], %{{.*}}[11]
// CHECK:      %[[DESC:.*]] = llvm.alloca
// CHECK:      llvm.call @zrt_attention_backward(%[[DESC]], %[[Q]], %[[Q]], %[[Q]], %[[O]], %[[DY:[0-9]+]], %{{.*}}, %{{.*}}, %{{.*}})
// CHECK:      llvm.insertvalue %[[S]], %{{.*}}[11]
// CHECK:      %[[DESC:.*]] = llvm.alloca
// CHECK:      llvm.call @zrt_attention_dsinks(%[[DESC]], %[[Q]], %[[Q]], %[[O]], %[[DY]], %{{.*}})
// CHECK:      %[[ALPHA:.*]] = llvm.mlir.constant(1.702000e+00 : f64) : f64
// CHECK-NEXT: %[[LIMIT:.*]] = llvm.mlir.constant(7.000000e+00 : f64) : f64
// CHECK-NEXT: llvm.call @zrt_clamped_swiglu(%{{.*}}, %[[Q]], %[[DY]], %{{.*}}, %{{.*}}, %[[ALPHA]], %[[LIMIT]])
// CHECK:      llvm.call @zrt_clamped_swiglu_grad(%{{.*}}, %[[Q]], %[[DY]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}})

module @gpt_oss {
  zero.param @sinks : tensor<6xf32> init zeros
  zero.partition @flat stage 0 world_size 1 alignment 2 numel 6 padded 6 params [@sinks] offsets [0]
  zero.train_step @train(%q: tensor<4x6x8x16xf32>, %dy: tensor<4x6x8x16xf32>)
      optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
      precision #zero.precision<kind = fp32>
      schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 4> {
    %s = zero.get_param @sinks : tensor<6xf32>
    %o = nn.attention %q, %q, %q sinks(%s : tensor<6xf32>) causal window 3 : tensor<4x6x8x16xf32>
    %dq, %dk, %dv = nn.attention_grad %q, %q, %q, %o, %dy sinks(%s : tensor<6xf32>) causal scale 0.25 window 3 : tensor<4x6x8x16xf32>
    %ds = nn.attention_sinks_grad %q, %q, %s, %o, %dy causal scale 0.25 window 3 : tensor<4x6x8x16xf32>, tensor<4x6x8x16xf32>, tensor<6xf32>
    %a = nn.clamped_swiglu %q, %dy alpha 1.702 limit 7.0 : tensor<4x6x8x16xf32>
    %dg, %du = nn.clamped_swiglu_grad %q, %dy, %a alpha 1.702 limit 7.0 : tensor<4x6x8x16xf32>
    %loss = nn.fill 0.0 : tensor<f32>
    %ls = zero.loss_scale phase boundary : tensor<f32>
    %st = zero.check_overflow groups [@flat] scale %ls divisor 1.0 phase boundary : tensor<2xf32>
    %skip = zero.update_loss_scale %st phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @flat stats %st scale %ls skip %skip divisor 1.0 phase boundary : tensor<2xf32>
    zero.return %loss : tensor<f32>
  }
}
