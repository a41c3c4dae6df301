//===- OptimizerLaunch.cuh - What the optimizer kernels share ---*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// The launch shape and the step arguments of the optimizer kernels, shared
// by Optimizer.cu (overflow, Adam, the element-wise rules) and AdamStates.cu
// (Adam with 8-bit and bf16 states); Optimizer.cu says why the kernels are
// launched as they are.
//
//===----------------------------------------------------------------------===//

#ifndef ZRT_CUDA_OPTIMIZER_LAUNCH_CUH
#define ZRT_CUDA_OPTIMIZER_LAUNCH_CUH

#include "Optimizer/DecayRanges.h"
#include "Optimizer/OptimizerMath.h"
#include "Support/CudaSupport.h"
#include "Support/Support.h"

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

/// What the gradient's factor is computed from on the device: the clipping
/// norm and stats, and the loss scale (device memory, null: 1) times the
/// divisor.
struct GradScaleArgs {
  double maxGradNorm;
  double divisor;
  const float *stats;
  const float *lossScale;
};

/// A step's constants K, rounded to fp32 on the host as the CPU does, with
/// the gradient factor's inputs.
template <typename K>
struct StepArgs : K, GradScaleArgs {};

/// Adam's step arguments.
using AdamArgs = StepArgs<AdamConstants>;

/// The step arguments of constants k.
template <typename K>
StepArgs<K> stepArgs(const K &k, double maxGradNorm, double divisor,
                     const float *stats, const float *lossScale) {
  StepArgs<K> a;
  static_cast<K &>(a) = k;
  a.maxGradNorm = maxGradNorm;
  a.divisor = divisor;
  a.stats = stats;
  a.lossScale = lossScale;
  return a;
}

/// Adam's step arguments with the learning rate and betas of the schedule
/// at `step` (the host's step counter), rounded as the CPU rounds them; `lr`
/// becomes the step's.
inline AdamArgs adamArgs(double &lr, double beta1, double beta2, double eps,
                         double weightDecay, int32_t biasCorrection,
                         int64_t step, const zrt_lr_schedule *schedule,
                         double maxGradNorm, double divisor, const float *stats,
                         const float *lossScale) {
  if (schedule)
    lr = lrAt(*schedule, lr, beta1, beta2, step);
  return stepArgs(adamConstants(lr, beta1, beta2, eps, weightDecay, step,
                                biasCorrection != 0),
                  maxGradNorm, divisor, stats, lossScale);
}

/// zrt_clip_coefficient(stats, maxGradNorm) / ((*lossScale) * divisor),
/// in fp64 as the CPU (device fp64 division and sqrt round correctly).
__device__ inline float gradScale(const GradScaleArgs &a) {
  double clip = 1.0;
  if (a.maxGradNorm > 0) {
    double coef = a.maxGradNorm / (sqrt(double(a.stats[1])) + 1e-6);
    // As torch's clamp(max=1): a NaN norm stays NaN.
    clip = coef >= 1.0 ? 1.0 : double(float(coef));
  }
  // Rounded to fp32 first, as the CPU's device::optimizerStep passes
  // float(loss scale * divisor) to zrt_optimizer_step.
  double scale =
      double(float((a.lossScale ? double(*a.lossScale) : 1.0) * a.divisor));
  return float(clip / scale);
}

/// The checks every update makes before it runs: false when there is
/// nothing to update (n == 0).
inline bool checkUpdate(const char *name, int64_t n, int64_t step, int32_t skip,
                        double maxGradNorm, const float *stats) {
  checkDims(name, n);
  if (!skip && step < 1)
    fatal("%s: step %lld must be >= 1", name, (long long)step);
  if (!skip && maxGradNorm > 0 && !stats)
    fatal("%s: gradient clipping needs the stats", name);
  return n > 0;
}

/// Calls launch(begin, end, args) over n elements: `a` between the decay
/// ranges (host memory) and, in range r, `a` with the constants
/// withDecay(a, lr, decays[r]), one launch per run.
template <typename K, typename Launch>
void forDecayRuns(const char *name, const int64_t *ranges, const double *decays,
                  int32_t num, int64_t n, double lr, const StepArgs<K> &a,
                  Launch launch) {
  checkDecayRanges(name, ranges, decays, num, n);
  int64_t at = 0;
  for (int32_t r = 0; r < num; ++r) {
    int64_t b = ranges[2 * r], e = ranges[2 * r + 1];
    launch(at, b, a);
    StepArgs<K> own = a;
    static_cast<K &>(own) = withDecay(static_cast<const K &>(a), lr, decays[r]);
    launch(b, e, own);
    at = e;
  }
  launch(at, n, a);
}

/// A skipped step's copy of the fp32 masters into the parameters: the
/// scalar grid-stride loop, or (kVector) 16-byte units after `head` scalar
/// elements (Optimizer.cu).
template <typename T, bool kVector>
void launchCopyMaster(const float *master, T *param, int64_t n, int64_t head);

} // namespace zrt::cuda::optimizer

namespace zrt::cuda {

// Adam's kernels, which optimizerStep runs for Adam and AdamW: the fp32
// states' (Optimizer.cu), and the 8-bit and bf16 states' (AdamStates.cu).
// The gradient factor is zrt_optimizer_step's, with the loss scale in
// device memory (null: 1) times `divisor`.
void adam(int32_t dtype, const void *grad, float *master, float *expAvg,
          float *expAvgSq, void *param, int64_t n, int64_t step, double lr,
          double beta1, double beta2, double eps, double weightDecay,
          int32_t adamw, int32_t biasCorrection,
          const zrt_lr_schedule *schedule, const int64_t *decayRanges,
          const double *rangeDecays, int32_t numDecayRanges, double maxGradNorm,
          const float *stats, const float *lossScale, double divisor,
          int32_t skip);
void adam8bit(int32_t dtype, const void *grad, float *master, uint8_t *expAvg,
              float *expAvgAbsmax, uint8_t *expAvgSq, float *expAvgSqAbsmax,
              void *param, int64_t n, int64_t step, double lr, double beta1,
              double beta2, double eps, double weightDecay, int32_t adamw,
              int32_t biasCorrection, const zrt_lr_schedule *schedule,
              const int64_t *decayRanges, const double *rangeDecays,
              int32_t numDecayRanges, double maxGradNorm, const float *stats,
              const float *lossScale, double divisor, int32_t skip);
void adamBf16(int32_t dtype, const void *grad, float *master, uint16_t *expAvg,
              uint16_t *expAvgSq, void *param, int64_t n, int64_t step,
              double lr, double beta1, double beta2, double eps,
              double weightDecay, int32_t adamw, int32_t biasCorrection,
              const zrt_lr_schedule *schedule, const int64_t *decayRanges,
              const double *rangeDecays, int32_t numDecayRanges,
              double maxGradNorm, const float *stats, const float *lossScale,
              double divisor, int32_t skip);

} // namespace zrt::cuda

#endif // ZRT_CUDA_OPTIMIZER_LAUNCH_CUH
