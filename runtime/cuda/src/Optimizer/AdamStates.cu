//===- AdamStates.cu - Adam with 8-bit and bf16 states on the GPU ---------===//
//
// Part of the zero-mlir project.
//
// cuda::adam8bit (zrt_adam8bit on the device) and cuda::adamBf16 (the device
// update of Adam with bf16 states): the CPU's block-wise 8-bit and bf16
// states (runtime/src/Optimizer/HostAdam8bit.cpp, HostAdamBf16.cpp) with
// OptimizerMath.h's formulas, launched as Optimizer.cu's Adam is.
//
//===----------------------------------------------------------------------===//

#include "Kernels/CudaKernels.h"
#include "Optimizer/DecayRanges.h"
#include "Optimizer/OptimizerLaunch.cuh"
#include "Optimizer/OptimizerMath.h"
#include "Support/CudaSupport.h"
#include "Support/Support.h"

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace zrt;
using namespace zrt::cuda;
using namespace zrt::cuda::optimizer;

//===----------------------------------------------------------------------===//
// Adam with block-wise 8-bit states
//===----------------------------------------------------------------------===//

namespace {

/// Decay ranges one launch of adam8bitKernel can see: a launch covers the
/// quantisation blocks that meet at most this many.
constexpr int kMaxAdam8bitSpans = 8;
/// Elements of a quantisation block each thread updates.
constexpr int kAdam8bitPerThread = int(kQuantBlock) / kThreads;
static_assert(kAdam8bitPerThread * kThreads == kQuantBlock,
              "a block of threads covers one quantisation block");

/// zrt_adam8bit's step constants, the gradient factor's inputs (as
/// AdamArgs), the two maps and the decay ranges that meet the launch's
/// blocks (their decay and L2 coefficients replace the step's).
struct Adam8bitArgs : AdamArgs {
  float signedMap[kQuantCodes];
  float unsignedMap[kQuantCodes];
  int32_t numSpans;
  int64_t spanBegin[kMaxAdam8bitSpans], spanEnd[kMaxAdam8bitSpans];
  float spanDecay[kMaxAdam8bitSpans], spanWeightDecay[kMaxAdam8bitSpans];
};

/// One block of threads per quantisation block [b*2048, min(n, (b+1)*2048)),
/// b = firstBlock + blockIdx.x: OptimizerMath.h's formulas, as the CPU's
/// adam8bitBlock. param is null when it is the master (f32).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    adam8bitKernel(const T *grad, float *master, uint8_t *qm, float *absmaxM,
                   uint8_t *qv, float *absmaxV, T *param, int64_t n,
                   int64_t firstBlock, bool decoupled, Adam8bitArgs a) {
  __shared__ float smap[kQuantCodes], umap[kQuantCodes];
  __shared__ float warpM[kWarps], warpV[kWarps];
  for (int c = threadIdx.x; c < kQuantCodes; c += kThreads) {
    smap[c] = a.signedMap[c];
    umap[c] = a.unsignedMap[c];
  }
  __syncthreads();
  const int64_t block = firstBlock + blockIdx.x;
  const int64_t begin = block * kQuantBlock;
  const int64_t end = begin + kQuantBlock < n ? begin + kQuantBlock : n;
  const float am = absmaxM[block], av = absmaxV[block];
  const float gs = gradScale(a);
  float m[kAdam8bitPerThread], v[kAdam8bitPerThread];
  float maxM = 0.0f, maxV = 0.0f;
  for (int r = 0; r < kAdam8bitPerThread; ++r) {
    int64_t i = begin + threadIdx.x + int64_t(r) * kThreads;
    if (i >= end)
      continue;
    AdamConstants k = a;
    for (int s = 0; s < a.numSpans; ++s)
      if (a.spanBegin[s] <= i && i < a.spanEnd[s]) {
        k.decay = a.spanDecay[s];
        k.weightDecay = a.spanWeightDecay[s];
      }
    float w = master[i];
    float mt = dequantizeState(smap, qm[i], am);
    float vt = dequantizeState(umap, qv[i], av);
    adam8bitElement(mulRn(toF32(grad[i]), gs), w, mt, vt, k, decoupled);
    master[i] = w;
    if (param)
      param[i] = fromF32<T>(w);
    m[r] = mt;
    v[r] = vt;
    maxM = fmaxf(maxM, fabsf(mt));
    maxV = fmaxf(maxV, vt);
  }
  // The block's new absmax: max is exact, so its order does not matter.
  for (int off = 16; off > 0; off /= 2) {
    maxM = fmaxf(maxM, __shfl_xor_sync(0xffffffffu, maxM, off));
    maxV = fmaxf(maxV, __shfl_xor_sync(0xffffffffu, maxV, off));
  }
  if (threadIdx.x % 32 == 0) {
    warpM[threadIdx.x / 32] = maxM;
    warpV[threadIdx.x / 32] = maxV;
  }
  __syncthreads();
  float newM = 0.0f, newV = 0.0f;
  for (int w = 0; w < kWarps; ++w) {
    newM = fmaxf(newM, warpM[w]);
    newV = fmaxf(newV, warpV[w]);
  }
  if (threadIdx.x == 0) {
    absmaxM[block] = newM;
    absmaxV[block] = newV;
  }
  for (int r = 0; r < kAdam8bitPerThread; ++r) {
    int64_t i = begin + threadIdx.x + int64_t(r) * kThreads;
    if (i >= end)
      continue;
    qm[i] = quantizeState(smap, m[r], newM);
    qv[i] = quantizeState(umap, v[r], newV);
  }
}

} // namespace

void zrt::cuda::adam8bit(
    int32_t dtype, const void *grad, float *master, uint8_t *expAvg,
    float *expAvgAbsmax, uint8_t *expAvgSq, float *expAvgSqAbsmax, void *param,
    int64_t n, int64_t step, double lr, double beta1, double beta2, double eps,
    double weightDecay, int32_t adamw, int32_t biasCorrection,
    const zrt_lr_schedule *schedule, const int64_t *decayRanges,
    const double *rangeDecays, int32_t numDecayRanges, double maxGradNorm,
    const float *stats, const float *lossScale, double divisor, int32_t skip) {
  if (!checkUpdate("adam8bit", n, step, skip, maxGradNorm, stats))
    return;
  dispatch(dtype, "adam8bit", [&](auto tag) {
    using T = decltype(tag);
    T *p = static_cast<T *>(param);
    if (std::is_same<T, float>::value && param == master)
      p = nullptr;
    if (skip) {
      if (p)
        launchCopyMaster<T, false>(master, p, n, 0);
      return;
    }
    Adam8bitArgs a;
    static_cast<AdamArgs &>(a) =
        adamArgs(lr, beta1, beta2, eps, weightDecay, biasCorrection, step,
                 schedule, maxGradNorm, divisor, stats, lossScale);
    dynamicQuantMap(true, a.signedMap);
    dynamicQuantMap(false, a.unsignedMap);
    checkDecayRanges("adam8bit", decayRanges, rangeDecays, numDecayRanges, n);
    // Launches over runs of whole blocks (a block's absmax needs all its
    // elements), each run meeting at most kMaxAdam8bitSpans decay ranges; a
    // single block that meets more is refused.
    const int64_t blocks = ceilDiv(n, kQuantBlock);
    int32_t r = 0;
    int64_t first = 0;
    while (first < blocks) {
      a.numSpans = 0;
      int64_t last = first; // exclusive
      int32_t rr = r;
      while (last < blocks) {
        int64_t bEnd = std::min(n, (last + 1) * kQuantBlock);
        // The ranges that begin before this block's end.
        int32_t take = rr;
        while (take < numDecayRanges && decayRanges[2 * take] < bEnd)
          ++take;
        if (take - r > kMaxAdam8bitSpans) {
          if (last == first)
            fatal("adam8bit: more than %d decay ranges meet one block of %lld "
                  "elements",
                  kMaxAdam8bitSpans, (long long)kQuantBlock);
          break;
        }
        rr = take;
        ++last;
      }
      for (int32_t s = r; s < rr; ++s) {
        AdamConstants own = withDecay(a, lr, rangeDecays[s]);
        a.spanBegin[a.numSpans] = decayRanges[2 * s];
        a.spanEnd[a.numSpans] = decayRanges[2 * s + 1];
        a.spanDecay[a.numSpans] = own.decay;
        a.spanWeightDecay[a.numSpans] = own.weightDecay;
        ++a.numSpans;
      }
      adam8bitKernel<T>
          <<<unsigned(last - first), kThreads, 0, computeStream()>>>(
              static_cast<const T *>(grad), master, expAvg, expAvgAbsmax,
              expAvgSq, expAvgSqAbsmax, p, n, first, adamw != 0, a);
      checkLaunch("adam8bit");
      // The next launch starts with the ranges that reach past its first
      // block.
      int64_t nextBegin = last * kQuantBlock;
      while (r < rr && decayRanges[2 * r + 1] <= nextBegin)
        ++r;
      first = last;
    }
  });
}

//===----------------------------------------------------------------------===//
// Adam with bf16 states
//===----------------------------------------------------------------------===//

namespace {

/// A grid-stride loop of hostAdamBf16's element: the bf16 moments widened,
/// OptimizerMath.h's adam8bitElement (every operation rounded once, as the CPU
/// file built without contractions), the moments rounded back to nearest
/// even. param is null when it is the master (f32); master is null when the
/// parameter is its own master.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    adamBf16Kernel(const T *grad, float *master, uint16_t *m, uint16_t *v,
                   T *param, int64_t n, bool decoupled, AdamArgs a) {
  const float gs = gradScale(a);
  const AdamConstants &k = a;
  const int64_t threads = int64_t(gridDim.x) * kThreads;
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += threads) {
    float w = master ? master[i] : toF32(param[i]);
    float mi = bf16ToFloat(m[i]), vi = bf16ToFloat(v[i]);
    adam8bitElement(mulRn(toF32(grad[i]), gs), w, mi, vi, k, decoupled);
    m[i] = floatToBf16(mi);
    v[i] = floatToBf16(vi);
    if (master)
      master[i] = w;
    if (param)
      param[i] = fromF32<T>(w);
  }
}

template <typename T>
void launchAdamBf16(const T *grad, float *master, uint16_t *m, uint16_t *v,
                    T *param, int64_t n, bool decoupled, const AdamArgs &a) {
  static const int perSM =
      residentBlocks(reinterpret_cast<const void *>(&adamBf16Kernel<T>));
  unsigned grid = residentGrid(perSM, ceilDiv(n, kThreads));
  adamBf16Kernel<T><<<grid, kThreads, 0, computeStream()>>>(
      grad, master, m, v, param, n, decoupled, a);
  checkLaunch("adam (bf16 states)");
}

} // namespace

void zrt::cuda::adamBf16(int32_t dtype, const void *grad, float *master,
                         uint16_t *expAvg, uint16_t *expAvgSq, void *param,
                         int64_t n, int64_t step, double lr, double beta1,
                         double beta2, double eps, double weightDecay,
                         int32_t adamw, int32_t biasCorrection,
                         const zrt_lr_schedule *schedule,
                         const int64_t *decayRanges, const double *rangeDecays,
                         int32_t numDecayRanges, double maxGradNorm,
                         const float *stats, const float *lossScale,
                         double divisor, int32_t skip) {
  if (!checkUpdate("adam (bf16 states)", n, step, skip, maxGradNorm, stats))
    return;
  dispatch(dtype, "adam (bf16 states)", [&](auto tag) {
    using T = decltype(tag);
    T *p = static_cast<T *>(param);
    if (std::is_same<T, float>::value && param == master)
      p = nullptr;
    if (skip) {
      // Without masters the parameters are already the step's.
      if (p && master)
        launchCopyMaster<T, false>(master, p, n, 0);
      return;
    }
    AdamArgs a =
        adamArgs(lr, beta1, beta2, eps, weightDecay, biasCorrection, step,
                 schedule, maxGradNorm, divisor, stats, lossScale);
    auto launch = [&](int64_t b, int64_t e, const AdamArgs &args) {
      if (b < e)
        launchAdamBf16<T>(static_cast<const T *>(grad) + b,
                          master ? master + b : nullptr, expAvg + b,
                          expAvgSq + b, p ? p + b : nullptr, e - b, adamw != 0,
                          args);
    };
    forDecayRuns("adam (bf16 states)", decayRanges, rangeDecays, numDecayRanges,
                 n, lr, a, launch);
  });
}
