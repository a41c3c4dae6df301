// A hand-written accumulation_steps outside [1, 65536]: the step's schedule
// attribute rejects it when the file is parsed, before any pass reads it.
// RUN: not zero-opt %s --zero-plan-memory 2>&1 | FileCheck %s

zero.param @w : tensor<4xf32> init zeros
zero.partition @flat stage 0 world_size 1 alignment 1 numel 4 padded 4 params [@w] offsets [0]
zero.train_step @train(%x: tensor<2x4xf32>, %t: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    // CHECK: accumulation-attribute.mlir:[[@LINE+1]]:28: error: accumulation_steps must be between 1 and 65536, got 0
    schedule #zero.schedule<stage = 0, world_size = 1, global_batch = 2, accumulation_steps = 0> {
  %w = zero.get_param @w : tensor<4xf32>
  %a = nn.add %x, %w : tensor<2x4xf32>, tensor<4xf32>
  %l = nn.softmax_cross_entropy %a, %t : tensor<2x4xf32>, tensor<2xi64> -> tensor<f32>
  zero.return %l : tensor<f32>
}
