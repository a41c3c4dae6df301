//===- CudaGraphs.h - A training step's launches as CUDA graphs -*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// With train's --cuda-graphs, the work a step enqueues on the compute stream
// between two operations that cannot be captured (a host synchronisation, a
// copy from pageable memory, an allocation, a collective or a wait on one)
// is captured into a graph and launched as one. Each step captures its
// segments anew and updates the previous step's executable graph of the
// same position to it (cudaGraphExecUpdate): every kernel argument is the
// step's own (the optimizer's step count, a learning rate, a loss scale),
// and as the plan is static the arena addresses never move, so the update
// succeeds; a graph of another shape is instantiated again.
//
// Capture starts lazily at a kernel entry of abi.def (AbiCuda.cpp), and
// every operation that cannot be captured calls pause() first, which ends
// the capture and launches what it holds: the stream's order is the one
// the step has without graphs. A segment also ends after a fixed number of
// kernel entries, so that the GPU starts on a step while the rest of it is
// captured. A run's first step runs without graphs: cuBLASLt, kernel
// attributes and NCCL initialise lazily on it.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_CUDA_GRAPHS_H
#define ZERO_RT_CUDA_GRAPHS_H

#include <chrono>
#include <cstddef>
#include <vector>

namespace zrt {
namespace cuda {
namespace graphs {

/// One launch of a captured segment, for the trace.
struct Launch {
  int segment;
  size_t nodes;
  /// Instantiated (the first time, or a shape the previous step's graph of
  /// this position did not have) rather than updated.
  bool instantiated;
  std::chrono::steady_clock::time_point start, end;
};

/// --cuda-graphs: whether training steps run as graphs. Frees the
/// executable graphs of an earlier run.
void enable(bool on);

/// A training step begins: from the run's second step on, its kernels are
/// captured.
void beginStep();
/// The step ends: launches what is captured and returns the step's graph
/// launches.
std::vector<Launch> endStep();

/// Around each kernel entry of abi.def: starts a capture when a step may
/// be captured, and ends the segment after enough entries.
void beforeKernel();
void afterKernel();

/// Before an operation that cannot be captured: ends the capture, if one
/// is open, and launches it.
void pause();

} // namespace graphs
} // namespace cuda
} // namespace zrt

#endif // ZERO_RT_CUDA_GRAPHS_H
