//===- OptimizerLaunch.cuh - What the optimizer kernels share ---*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// The launch shape and Adam's step arguments of the optimizer kernels,
// shared by Optimizer.cu (overflow, Adam, Lion, SGD) and AdamStates.cu
// (Adam with 8-bit and bf16 states); Optimizer.cu says why the kernels are
// launched as they are.
//
//===----------------------------------------------------------------------===//

#ifndef ZRT_CUDA_OPTIMIZER_LAUNCH_CUH
#define ZRT_CUDA_OPTIMIZER_LAUNCH_CUH

#include "Optimizer/OptimizerMath.h"
#include "Support/CudaSupport.h"

#include <cstdint>

namespace zrt::cuda::optimizer {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

/// Blocks of kThreads of `kernel` one multiprocessor holds at once.
inline int residentBlocks(const void *kernel) {
  int blocks = 0;
  ZRT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel,
                                                               kThreads, 0));
  return blocks < 1 ? 1 : blocks;
}

/// Blocks for a kernel of which each multiprocessor holds `perSM`: enough
/// to fill the device once, at most `want` (and at most `cap` when
/// positive).
inline unsigned residentGrid(int perSM, int64_t want, int64_t cap = 0) {
  int64_t sms = multiprocessorCount();
  int64_t perDevice = sms * perSM;
  // A multiple of the multiprocessor count under the cap, so that every
  // multiprocessor gets the same number of blocks.
  if (cap > 0 && perDevice > cap)
    perDevice = cap >= sms ? cap / sms * sms : cap;
  int64_t blocks = want < perDevice ? want : perDevice;
  return unsigned(blocks < 1 ? 1 : blocks);
}

/// zrt_adam's step constants, rounded to fp32 on the host as the CPU does;
/// the gradient's factor is computed on the device from stats and
/// lossScale.
struct AdamArgs : AdamConstants {
  double maxGradNorm;
  double divisor;
  const float *stats;
  const float *lossScale;
};

/// zrt_clip_coefficient(stats, maxGradNorm) / ((*lossScale) * divisor),
/// in fp64 as the CPU (device fp64 division and sqrt round correctly).
__device__ inline float gradScale(const AdamArgs &a) {
  double clip = 1.0;
  if (a.maxGradNorm > 0) {
    double coef = a.maxGradNorm / (sqrt(double(a.stats[1])) + 1e-6);
    // As torch's clamp(max=1): a NaN norm stays NaN.
    clip = coef >= 1.0 ? 1.0 : double(float(coef));
  }
  // Rounded to fp32 first, as the CPU's zrt_ctx_adam passes
  // float(loss scale * divisor) to zrt_adam.
  double scale =
      double(float((a.lossScale ? double(*a.lossScale) : 1.0) * a.divisor));
  return float(clip / scale);
}

/// A skipped step's copy of the fp32 masters into the parameters: the
/// scalar grid-stride loop, or (kVector) 16-byte units after `head` scalar
/// elements (Optimizer.cu).
template <typename T, bool kVector>
void launchCopyMaster(const float *master, T *param, int64_t n, int64_t head);

} // namespace zrt::cuda::optimizer

#endif // ZRT_CUDA_OPTIMIZER_LAUNCH_CUH
