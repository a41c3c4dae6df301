// Found with the sanitizer build: the schedule passes read the stage, world
// size and accumulation steps that zero-partition records on a train step,
// and hand-written values were trusted: a world size of 0 made
// zero-grad-sync divide by zero (UBSan "division by zero", SIGFPE in release
// builds). The step's #zero.schedule attribute now verifies them.
// RUN: not zero-opt %s --zero-grad-sync 2>&1 | FileCheck %s

zero.param @w : tensor<4xf32> init zeros
zero.partition @flat stage 1 world_size 2 alignment 2 numel 4 padded 4 params [@w] offsets [0]
zero.train_step @train(%x: tensor<2x4xf32>, %t: tensor<2xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-3>
    precision #zero.precision<kind = fp32>
    // CHECK: step-attributes.mlir:[[@LINE+1]]:28: error: world_size must be between 1 and 1048576, got 0
    schedule #zero.schedule<stage = 1, world_size = 0, global_batch = 2> {
  %w = zero.get_param @w : tensor<4xf32>
  %a = nn.add %x, %w : tensor<2x4xf32>, tensor<4xf32>
  %l = nn.softmax_cross_entropy %a, %t : tensor<2x4xf32>, tensor<2xi64> -> tensor<f32>
  zero.return %l : tensor<f32>
}
