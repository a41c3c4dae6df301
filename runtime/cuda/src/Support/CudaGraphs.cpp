//===- CudaGraphs.cpp - A training step's launches as CUDA graphs ---------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "Support/CudaGraphs.h"
#include "Support/CudaSupport.h"

#include <utility>

using namespace zrt;
using namespace zrt::cuda;

namespace {

/// Kernel entries per segment: the GPU waits for a step's first segment to
/// be captured, and each later one is captured while the GPU runs the
/// ones before it.
constexpr int kMaxSegmentCalls = 64;

struct State {
  bool enabled = false;
  bool inStep = false;
  bool capturing = false;
  /// Steps begun since graphs were enabled.
  int64_t steps = 0;
  /// The position of the next segment in the step, and the kernel entries
  /// of the one being captured.
  int segment = 0, calls = 0;
  /// The executable graph of each position, updated every step.
  std::vector<cudaGraphExec_t> execs;
  std::vector<graphs::Launch> launches;
};

State &state() {
  static State s;
  return s;
}

/// Updates (or instantiates) the executable graph of the next position to
/// `graph` and launches it on the compute stream.
void launchSegment(State &s, cudaGraph_t graph) {
  auto start = std::chrono::steady_clock::now();
  size_t nodes = 0;
  ZRT_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &nodes));
  if (nodes == 0) {
    ZRT_CUDA_CHECK(cudaGraphDestroy(graph));
    return;
  }
  if (size_t(s.segment) >= s.execs.size())
    s.execs.resize(size_t(s.segment) + 1, nullptr);
  cudaGraphExec_t &exec = s.execs[size_t(s.segment)];
  bool instantiated = false;
  if (exec) {
    cudaGraphExecUpdateResultInfo info;
    if (cudaGraphExecUpdate(exec, graph, &info) != cudaSuccess) {
      // Another shape than the last step's (a skipped step's update, say):
      // the failed update leaves no sticky error.
      (void)cudaGetLastError();
      ZRT_CUDA_CHECK(cudaGraphExecDestroy(exec));
      exec = nullptr;
    }
  }
  if (!exec) {
    ZRT_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    instantiated = true;
  }
  ZRT_CUDA_CHECK(cudaGraphLaunch(exec, computeStream()));
  ZRT_CUDA_CHECK(cudaGraphDestroy(graph));
  s.launches.push_back({s.segment, nodes, instantiated, start,
                        std::chrono::steady_clock::now()});
  ++s.segment;
}

} // namespace

void graphs::enable(bool on) {
  State &s = state();
  pause();
  for (cudaGraphExec_t exec : s.execs)
    if (exec)
      ZRT_CUDA_CHECK(cudaGraphExecDestroy(exec));
  s.execs.clear();
  s.launches.clear();
  s.enabled = on;
  s.inStep = false;
  s.steps = 0;
}

void graphs::beginStep() {
  State &s = state();
  if (!s.enabled)
    return;
  pause();
  s.inStep = true;
  s.segment = 0;
  s.launches.clear();
  ++s.steps;
}

std::vector<graphs::Launch> graphs::endStep() {
  State &s = state();
  pause();
  s.inStep = false;
  return std::exchange(s.launches, {});
}

void graphs::beforeKernel() {
  State &s = state();
  if (!s.inStep || s.capturing || s.steps < 2)
    return;
  // Thread-local: a call of this thread that is not allowed while the
  // stream captures fails at once instead of joining the graph.
  ZRT_CUDA_CHECK(cudaStreamBeginCapture(computeStream(),
                                        cudaStreamCaptureModeThreadLocal));
  s.capturing = true;
  s.calls = 0;
}

void graphs::afterKernel() {
  State &s = state();
  if (s.capturing && ++s.calls >= kMaxSegmentCalls)
    pause();
}

void graphs::pause() {
  State &s = state();
  if (!s.capturing)
    return;
  s.capturing = false;
  cudaGraph_t graph = nullptr;
  ZRT_CUDA_CHECK(cudaStreamEndCapture(computeStream(), &graph));
  launchSegment(s, graph);
}
