// The eager runtime profile (zero-report runtime=eager): each op whose eager
// PyTorch decomposition differs from our fused kernel is priced as the chain
// of unfused kernels an eager peer runs, on the h100-sxm preset (HBM
// 2.97 TB/s, 3.3 us a kernel). The default, runtime=fused, is unchanged.
// Every step also runs the 3.3013 us fill of the scalar it returns.
// RUN: zero-opt %s -split-input-file --zero-report=hardware=h100-sxm -o /dev/null | FileCheck %s --check-prefix=FUSED
// RUN: zero-opt %s -split-input-file --zero-report="hardware=h100-sxm runtime=eager" -o /dev/null | FileCheck %s --check-prefix=EAGER
// RUN: zero-opt %s -split-input-file --zero-report="hardware=h100-sxm runtime=eager format=text" -o /dev/null | FileCheck %s --check-prefix=TEXT
// runtime=compiled: the eager peer with each transformer block compiled
// prices only the loss (outside the blocks) eager, and keeps FSDP2's copies.
// RUN: zero-opt %s -split-input-file --zero-report="hardware=h100-sxm runtime=compiled" -o /dev/null | FileCheck %s --check-prefix=COMPILED
// reduce-dtype=f32: the reduce-scatters move fp32 elements.
// RUN: zero-opt %s -split-input-file --zero-report="hardware=h100-sxm reduce-dtype=f32" -o /dev/null | FileCheck %s --check-prefix=F32
// RUN: zero-opt %s -split-input-file --zero-report="hardware=h100-sxm runtime=eager reduce-dtype=f32" -o /dev/null | FileCheck %s --check-prefix=EAGER-F32
// RUN: zero-opt %s -split-input-file --zero-report="hardware=h100-sxm runtime=compiled reduce-dtype=f32 format=text" -o /dev/null | FileCheck %s --check-prefix=TEXT-COMPILED
// RUN: not zero-opt %s -split-input-file --zero-report="runtime=jit" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not zero-opt %s -split-input-file --zero-report="reduce-dtype=f16" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BAD-DTYPE

// TEXT: Predicted step on h100-sxm with eager PyTorch's unfused kernels:
// TEXT-NOT: Validation band
// TEXT-COMPILED: Predicted step on h100-sxm with compiled blocks and eager PyTorch's loss, gradients reduced in f32:
// TEXT-COMPILED-NOT: Validation band
// BAD: zero-report: unknown runtime 'jit' (expected fused, eager or compiled)
// BAD-DTYPE: zero-report: unknown reduce-dtype 'f16' (expected f32)

// RMSNorm over n = 2^20 bf16 elements in 1024 rows of d = 1024. Fused: one
// kernel over x, w and y, 4n + 2d bytes: 4.7129 us. Eager, 8 kernels:
// x.float() 6n, pow 8n, mean 4n + 4 rows, + eps 8 rows, rsqrt 8 rows,
// x * rsqrt 8n + 4 rows, type_as 6n, * weight 4n + 2d: 37,775,360 bytes,
// 8 x 3.3 + 12.7190 = 39.1190 us.
// FUSED: "predicted_step_ms": 0.0080129{{[0-9]*}},
// EAGER: "predicted_step_ms": 0.0424189{{[0-9]*}},
// COMPILED: "predicted_step_ms": 0.0080129{{[0-9]*}},
zero.param @w : tensor<1024xbf16> init zeros
zero.partition @flat stage 0 world_size 1 alignment 1 numel 1024 padded 1024 params [@w] offsets [0]
zero.train_step @rms_norm(%x: tensor<4x256x1024xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 4> {
  %w = zero.get_param @w : tensor<1024xbf16>
  %y = nn.rms_norm %x, %w eps 1.0e-05 : tensor<4x256x1024xbf16>, tensor<1024xbf16>
  %one = nn.fill 1.0 : tensor<f32>
  zero.return %one : tensor<f32>
}

// -----

// Its backward. Fused: 6n + 4d bytes, 5.4184 us. Eager, autograd's 16
// kernels: dy * w 4n + 2d, dy * normed 6n and its sum over the rows
// 2n + 2d, the conversion to fp32 6n, g * rsqrt 8n + 4 rows, g * x 12n
// and its sum over the row 4n + 4 rows, rsqrt's backward 8 + 8 + 12 rows,
// mean's 4n + 4 rows, pow's 8n + 8n + 12n, the two gradients summed 12n,
// the conversion back 6n: 96,514,048 bytes, 16 x 3.3 + 32.4963 = 85.2963 us.
// FUSED: "predicted_step_ms": 0.0087197{{[0-9]*}},
// EAGER: "predicted_step_ms": 0.0885963{{[0-9]*}},
zero.param @w : tensor<1024xbf16> init zeros
zero.partition @flat stage 0 world_size 1 alignment 1 numel 1024 padded 1024 params [@w] offsets [0]
zero.train_step @rms_norm_grad(%x: tensor<4x256x1024xbf16>, %dy: tensor<4x256x1024xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 4> {
  %w = zero.get_param @w : tensor<1024xbf16>
  %dx, %dw = nn.rms_norm_grad %x, %w, %dy eps 1.0e-05 : tensor<4x256x1024xbf16>, tensor<1024xbf16>
  %one = nn.fill 1.0 : tensor<f32>
  zero.return %one : tensor<f32>
}

// -----

// RoPE over n = 2^19 bf16 elements, 256 positions of head dimension 128.
// Fused: 4n bytes, 4.0061 us. Eager, 3 kernels: x.float() 6n, the complex
// product 8n and the 256 x 64 complex64 table (128 KiB), the conversion
// back 6n: 10,616,832 bytes, 3 x 3.3 + 3.5747 = 13.4747 us. The inverse
// rotation (the backward) runs the same three.
// FUSED: "predicted_step_ms": 0.0073061{{[0-9]*}},
// EAGER: "predicted_step_ms": 0.0167746{{[0-9]*}},
zero.param @w : tensor<1024xbf16> init zeros
zero.partition @flat stage 0 world_size 1 alignment 1 numel 1024 padded 1024 params [@w] offsets [0]
zero.train_step @rope(%x: tensor<2x8x256x128xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 2> {
  %y = nn.rope %x theta 5.0e+05 : tensor<2x8x256x128xbf16>
  %one = nn.fill 1.0 : tensor<f32>
  zero.return %one : tensor<f32>
}

// -----

// FUSED: "predicted_step_ms": 0.0073061{{[0-9]*}},
// EAGER: "predicted_step_ms": 0.0167746{{[0-9]*}},
zero.param @w : tensor<1024xbf16> init zeros
zero.partition @flat stage 0 world_size 1 alignment 1 numel 1024 padded 1024 params [@w] offsets [0]
zero.train_step @rope_inverse(%x: tensor<2x8x256x128xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 2> {
  %y = nn.rope %x theta 5.0e+05 inverse : tensor<2x8x256x128xbf16>
  %one = nn.fill 1.0 : tensor<f32>
  zero.return %one : tensor<f32>
}

// -----

// SwiGLU over n = 2^20 bf16 elements. Fused: 6n bytes, 5.4170 us. Eager:
// silu(gate) 4n, * up 6n: 2 x 3.3 + 3.5305 = 10.1305 us.
// FUSED: "predicted_step_ms": 0.0087183{{[0-9]*}},
// EAGER: "predicted_step_ms": 0.0134305{{[0-9]*}},
zero.param @w : tensor<1024xbf16> init zeros
zero.partition @flat stage 0 world_size 1 alignment 1 numel 1024 padded 1024 params [@w] offsets [0]
zero.train_step @swiglu(%a: tensor<4x256x1024xbf16>, %b: tensor<4x256x1024xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 4> {
  %y = nn.swiglu %a, %b : tensor<4x256x1024xbf16>
  %one = nn.fill 1.0 : tensor<f32>
  zero.return %one : tensor<f32>
}

// -----

// Its backward. Fused: 10n bytes, 6.8292 us. Eager: dy * up, dy * silu(gate)
// and silu_backward, 6n each: 3 x 3.3 + 6.3537 = 16.2537 us.
// FUSED: "predicted_step_ms": 0.0101305{{[0-9]*}},
// EAGER: "predicted_step_ms": 0.0195550{{[0-9]*}},
zero.param @w : tensor<1024xbf16> init zeros
zero.partition @flat stage 0 world_size 1 alignment 1 numel 1024 padded 1024 params [@w] offsets [0]
zero.train_step @swiglu_grad(%a: tensor<4x256x1024xbf16>, %b: tensor<4x256x1024xbf16>, %dy: tensor<4x256x1024xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 4> {
  %da, %db = nn.swiglu_grad %a, %b, %dy : tensor<4x256x1024xbf16>
  %one = nn.fill 1.0 : tensor<f32>
  zero.return %one : tensor<f32>
}

// -----

// The loss over n = 2^18 bf16 logits in 256 rows, i32 labels (1 KiB). Fused:
// 2n + 1028 bytes, 3.4769 us (the step returns the loss; no fill). Eager:
// logits.float() 6n, log_softmax 8n, nll_loss 256 x 4 + 1024 + 4 bytes:
// 3 x 3.3 + 1.2364 = 11.1364 us.
// FUSED: "predicted_step_ms": 0.0034768{{[0-9]*}},
// EAGER: "predicted_step_ms": 0.0111363{{[0-9]*}},
// COMPILED: "predicted_step_ms": 0.0111363{{[0-9]*}},
zero.param @w : tensor<1024xbf16> init zeros
zero.partition @flat stage 0 world_size 1 alignment 1 numel 1024 padded 1024 params [@w] offsets [0]
zero.train_step @cross_entropy(%logits: tensor<2x128x1024xbf16>, %labels: tensor<2x128xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 2> {
  %loss = nn.softmax_cross_entropy %logits, %labels : tensor<2x128x1024xbf16>, tensor<2x128xi32> -> tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Its backward. Fused: 4n + 1028 bytes, 3.6521 us. Eager: nll_loss's zeroed
// fp32 gradient 4n and its scatter (1028 + 1024 bytes), log_softmax's
// backward 12n, the conversion back 6n: 4 x 3.3 + 1.9412 = 15.1412 us.
// FUSED: "predicted_step_ms": 0.0069534{{[0-9]*}},
// EAGER: "predicted_step_ms": 0.0184424{{[0-9]*}},
// COMPILED: "predicted_step_ms": 0.0184424{{[0-9]*}},
zero.param @w : tensor<1024xbf16> init zeros
zero.partition @flat stage 0 world_size 1 alignment 1 numel 1024 padded 1024 params [@w] offsets [0]
zero.train_step @cross_entropy_grad(%logits: tensor<2x128x1024xbf16>, %labels: tensor<2x128xi32>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 2> {
  %one = nn.fill 1.0 : tensor<f32>
  %dlogits = nn.softmax_cross_entropy_grad %logits, %labels, %one : tensor<2x128x1024xbf16>, tensor<2x128xi32>, tensor<f32>
  zero.return %one : tensor<f32>
}

// -----

// An op whose eager decomposition is our kernel (a residual add) costs the
// same under both: 6n bytes, 5.4170 us.
// FUSED: "predicted_step_ms": 0.0087183{{[0-9]*}},
// EAGER: "predicted_step_ms": 0.0087183{{[0-9]*}},
zero.param @w : tensor<1024xbf16> init zeros
zero.partition @flat stage 0 world_size 1 alignment 1 numel 1024 padded 1024 params [@w] offsets [0]
zero.train_step @add(%a: tensor<4x256x1024xbf16>, %b: tensor<4x256x1024xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 4> {
  %y = nn.add %a, %b : tensor<4x256x1024xbf16>, tensor<4x256x1024xbf16>
  %one = nn.fill 1.0 : tensor<f32>
  zero.return %one : tensor<f32>
}

// -----

// FSDP2, the eager peer's runtime, copies the gradients into its
// reduce-scatter buffer on the communication stream before the collective,
// and each gathered array out of its all-gather buffer on the compute stream
// after it: a pass over the full array (read and write) each.
// cost-model.mlir's synchronous reduce-scatter of 2 MiB over 4 ranks at
// stage 2: fused, matmul 8.8981, fill 3.3000, matmul 4.6995, the
// reduce-scatter 12.2183 and its completion, the add of the rank's quarter
// into its shard, 3.3 + 3 x 524288 B / 2.97 TB/s = 3.8296, and gelu 3.6531:
// 36.5985 us. Eager: the copy-in, 3.3 + 2 x 2097152 B / 2.97 TB/s =
// 4.7122 us, lengthens the collective the compute stream waits for to
// 16.9305 us: 41.3107 us.
// FUSED: "exposed_comm_ms": 0.012218{{[0-9]*}},
// FUSED: "predicted_step_ms": 0.036598{{[0-9]*}},
// EAGER: "exposed_comm_ms": 0.016930{{[0-9]*}},
// EAGER: "predicted_step_ms": 0.041310{{[0-9]*}},
// COMPILED: "exposed_comm_ms": 0.016930{{[0-9]*}},
// COMPILED: "predicted_step_ms": 0.041310{{[0-9]*}},
// With reduce-dtype=f32 the collective moves the 4 MiB of fp32 gradients
// (RS4), and its completion adds 3 x 1 MiB: 3.3 + 1.0591 = 4.3591 us. Eager,
// the copy-in reads the bf16 gradients and writes them in fp32: 3.3 +
// (2 + 4) MiB / 2.97 TB/s = 5.4183 us.
// The reduce-scatter of 4 MiB takes 18.2753 us: fused 43.1851 us; eager,
// with the copy-in waited for, 23.6936 us exposed and 48.6034 us.
// F32: "exposed_comm_ms": 0.018275{{[0-9]*}},
// F32: "predicted_step_ms": 0.043185{{[0-9]*}},
// EAGER-F32: "exposed_comm_ms": 0.023693{{[0-9]*}},
// EAGER-F32: "predicted_step_ms": 0.048603{{[0-9]*}},
zero.param @w : tensor<1024x1024xf32> init zeros compute bf16
zero.partition @flat stage 2 world_size 4 alignment 2 numel 1048576 padded 1048576 params [@w] offsets [0]
zero.train_step @reduce_scatter(%x: tensor<256x1024xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 4, global_batch = 1024> {
  %w = zero.get_param @w : tensor<1024x1024xbf16>
  %h = nn.matmul %x, %w : tensor<256x1024xbf16>, tensor<1024x1024xbf16> -> tensor<256x1024xbf16>
  %loss = nn.fill 0.0 : tensor<f32>
  %g = nn.matmul %x, %h transpose_lhs : tensor<256x1024xbf16>, tensor<256x1024xbf16> -> tensor<1024x1024xbf16>
  zero.grad @w, %g : tensor<1024x1024xbf16>
  zero.reduce_scatter group @flat [0, 1048576) from %g at [0] : tensor<1024x1024xbf16>
  zero.free %g : tensor<1024x1024xbf16>
  %y = nn.gelu %h : tensor<256x1024xbf16>
  zero.return %loss : tensor<f32>
}

// -----

// cost-model-busbw.mlir's all-gather of 3 MiB over 8 ranks: fused, the fill
// 3.3000 and the gather 25.1817: 28.4817 us. Eager: the copy out of the
// gathered array, 3.3 + 2 x 3145728 B / 2.97 TB/s = 5.4183 us: 33.9000 us.
// FUSED: "predicted_step_ms": 0.028481{{[0-9]*}},
// EAGER: "predicted_step_ms": 0.0338999{{[0-9]*}},
zero.param @w : tensor<1536x1024xf32> init zeros compute bf16
zero.partition @flat stage 2 world_size 8 alignment 2 numel 1572864 padded 1572864 params [@w] offsets [0]
zero.train_step @all_gather(%x: tensor<1x1024xbf16>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 2, world_size = 8, global_batch = 8> {
  %loss = nn.fill 0.0 : tensor<f32>
  zero.all_gather group @flat in params [0, 1572864)
  zero.return %loss : tensor<f32>
}

// -----

// The eager peer's optimizer: foreach gradient clipping and PyTorch's
// foreach AdamW over n = 2^20 owned fp32 elements, 24 fp32 passes (96n
// bytes) in 10 launches: 10 x 3.3 + 100663296 B / 2.97 TB/s = 66.8934 us.
// Fused, our Adam: the fp32 master and moments read and written (24n), the
// bf16 gradient read and the bf16 parameters written (4n), the gradients
// zeroed (2n): 3.3 + 31457280 B / 2.97 TB/s = 13.8917 us. The step also
// runs the fill (3.3 us), the overflow check over the gradients (3.3 + 2n /
// 2.97 TB/s = 4.0061 us) and the loss scale's update (3.3 us): 24.4978 us
// fused, 77.4995 us eager or compiled. reduce-dtype changes no optimizer.
// FUSED: "predicted_step_ms": 0.024497{{[0-9]*}},
// EAGER: "predicted_step_ms": 0.077499{{[0-9]*}},
// COMPILED: "predicted_step_ms": 0.077499{{[0-9]*}},
// F32: "predicted_step_ms": 0.024497{{[0-9]*}},
// EAGER-F32: "predicted_step_ms": 0.077499{{[0-9]*}},
zero.param @w : tensor<1024x1024xf32> init zeros compute bf16
zero.partition @flat stage 0 world_size 1 alignment 1 numel 1048576 padded 1048576 params [@w] offsets [0]
zero.train_step @adamw(%x: tensor<1x1024xbf16>)
    optimizer #zero.optimizer<kind = adamw, lr = 1.0e-3>
    precision #zero.precision<kind = bf16>
    schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 1> {
  %loss = nn.fill 0.0 : tensor<f32>
  %scale = zero.loss_scale phase boundary : tensor<f32>
  %stats = zero.check_overflow groups [@flat] scale %scale divisor 1.0 phase boundary : tensor<2xf32>
  %skip = zero.update_loss_scale %stats phase boundary : tensor<2xf32> -> i1
  zero.optimizer_step group @flat stats %stats scale %scale skip %skip divisor 1.0 phase boundary : tensor<2xf32>
  zero.return %loss : tensor<f32>
}
