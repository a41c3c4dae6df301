// The fused output projection and loss (zero-loss-chunk) priced chunk by
// chunk on the h100-sxm preset (f32 GEMM 53.52 TFLOP/s, HBM 2.97 TB/s,
// 3.3 us a kernel, 132 SMs). 256 rows, hidden 64, vocabulary 1024 (a
// 256 KiB weight). A chunk's products are shaped as its logits; 256 or
// 4 x 64 rows by 1024 fill 16 of 128x128 tiles in one wave either way, a
// share of 262144 / (132 x 16384) = 0.121212 of the rate:
//   forward, 2 x 256 x 1024 x 64 FLOP:  5.1723 us of compute;
//   backward, three such products:     15.5170 us.
// The bytes (operands, results, one chunk's logits written and read by each
// product, and the weight or its gradient streamed again by each further
// pass) stay below the compute here; the kernels launched are what the chunk
// changes: the forward launches a product and a loss kernel a chunk and one
// sum, the backward a label count and four kernels a chunk.
// RUN: zero-opt %s -split-input-file --zero-report=hardware=h100-sxm -o /dev/null | FileCheck %s

// One chunk: 3 x 3.3 + 5.1723 = 15.0723 us.
// CHECK: "predicted_step_ms": 0.015072{{[0-9]*}},
zero.param @w : tensor<1024x64xf32> init zeros
zero.partition @flat stage 0 world_size 1 alignment 1 numel 65536 padded 65536 params [@w] offsets [0]
zero.train_step @forward_whole(%x: tensor<2x128x64xf32>, %labels: tensor<2x128xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 2> {
  %w = zero.get_param @w : tensor<1024x64xf32>
  %loss = nn.linear_cross_entropy %x, %w, %labels chunk 256 : tensor<2x128x64xf32>, tensor<1024x64xf32>, tensor<2x128xi64> -> tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// Four chunks: 9 x 3.3 + 5.1723 = 34.8723 us (the weight read four times,
// 0.73 us of bytes, hides under the compute).
// CHECK: "predicted_step_ms": 0.034872{{[0-9]*}},
zero.param @w : tensor<1024x64xf32> init zeros
zero.partition @flat stage 0 world_size 1 alignment 1 numel 65536 padded 65536 params [@w] offsets [0]
zero.train_step @forward_chunks(%x: tensor<2x128x64xf32>, %labels: tensor<2x128xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 2> {
  %w = zero.get_param @w : tensor<1024x64xf32>
  %loss = nn.linear_cross_entropy %x, %w, %labels chunk 64 : tensor<2x128x64xf32>, tensor<1024x64xf32>, tensor<2x128xi64> -> tensor<f32>
  zero.return %loss : tensor<f32>
}

// -----

// The backward in one chunk: 5 x 3.3 + 15.5170 = 32.0170 us, after the
// 3.3 us fill of its incoming gradient: 35.3170 us.
// CHECK: "predicted_step_ms": 0.035317{{[0-9]*}},
zero.param @w : tensor<1024x64xf32> init zeros
zero.partition @flat stage 0 world_size 1 alignment 1 numel 65536 padded 65536 params [@w] offsets [0]
zero.train_step @backward_whole(%x: tensor<2x128x64xf32>, %labels: tensor<2x128xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 2> {
  %w = zero.get_param @w : tensor<1024x64xf32>
  %one = nn.fill 1.0 : tensor<f32>
  %dx, %dw = nn.linear_cross_entropy_grad %x, %w, %labels, %one chunk 256 : tensor<2x128x64xf32>, tensor<1024x64xf32>, tensor<2x128xi64>, tensor<f32>
  zero.return %one : tensor<f32>
}

// -----

// The backward in four chunks: 17 x 3.3 + 15.5170 = 71.6170 us, and the
// fill: 74.9170 us.
// CHECK: "predicted_step_ms": 0.074917{{[0-9]*}},
zero.param @w : tensor<1024x64xf32> init zeros
zero.partition @flat stage 0 world_size 1 alignment 1 numel 65536 padded 65536 params [@w] offsets [0]
zero.train_step @backward_chunks(%x: tensor<2x128x64xf32>, %labels: tensor<2x128xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 2> {
  %w = zero.get_param @w : tensor<1024x64xf32>
  %one = nn.fill 1.0 : tensor<f32>
  %dx, %dw = nn.linear_cross_entropy_grad %x, %w, %labels, %one chunk 64 : tensor<2x128x64xf32>, tensor<1024x64xf32>, tensor<2x128xi64>, tensor<f32>
  zero.return %one : tensor<f32>
}
