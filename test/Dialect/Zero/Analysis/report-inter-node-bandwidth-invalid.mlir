// A bad inter-node-bandwidth is an error naming the value; the cpu preset's
// nodes share memory, so it has no network to override.
// RUN: not zero-opt %s --zero-report="inter-node-bandwidth=fast" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not zero-opt %s --zero-report="inter-node-bandwidth=-100" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NEG
// RUN: not zero-opt %s --zero-report="hardware=cpu inter-node-bandwidth=100" -o /dev/null 2>&1 | FileCheck %s --check-prefix=CPU

// BAD: error: zero-report: inter-node-bandwidth: expected a positive number of Gb/s per link, as in 400 or 400Gb/s, got 'fast'
// NEG: error: zero-report: inter-node-bandwidth: expected a positive number of Gb/s per link, as in 400 or 400Gb/s, got '-100'
// CPU: error: zero-report: inter-node-bandwidth: the 'cpu' preset has no network between its nodes (they share memory)
zero.param @w : tensor<4xf32> init zeros
