//===- HostAdam.cpp - The fused Adam and Lion on host memory --------------===//
//
// Part of the zero-mlir project.
//
// torch.optim.Adam/AdamW's step over fp32 masters and moments in host
// memory: the CPU backend's zrt_adam, and the host Adam of an offloaded
// optimizer on both backends (ZeRO-Offload), which is why it lives in the
// runtime's shared core with the learning-rate schedule it applies
// (zrt_lr_at). It streams 28 bytes per parameter with 16-bit gradients and
// copies. DeepSpeed's Lion (DeepSpeedCPULion) is here for the same
// reasons: the CPU backend's zrt_lion and the host Lion.
//
//===----------------------------------------------------------------------===//

#include "Driver/Trace.h"
#include "Kernels/Kernels.h"
#include "Optimizer/DecayRanges.h"
#include "Optimizer/OptimizerMath.h"

#include <algorithm>
#include <vector>

using namespace zrt;

namespace {

/// A range of elements [begin, end) with its own weight decay, in an
/// optimizer's constants K.
template <typename K>
struct DecayRun {
  int64_t begin, end;
  K k;
};

/// What an optimizer's host step applies to every element.
template <typename K>
struct OptimizerScalars {
  float gradScale = 1; // clip coefficient / loss scale
  K k;                 // elements outside every run
  std::vector<DecayRun<K>> runs;
};
using AdamScalars = OptimizerScalars<AdamConstants>;
using LionScalars = OptimizerScalars<LionConstants>;
using SgdScalars = OptimizerScalars<SgdConstants>;

/// Runs `blocks(begin, end, k)` over n elements in parallel, each work
/// item's range split where the weight-decay runs of `s` begin and end.
template <typename K, typename Blocks>
void stepOverRuns(int64_t n, const OptimizerScalars<K> &s, Blocks blocks) {
  parallelFor(n, kGrain, [&](int64_t begin, int64_t end) {
    auto run = std::lower_bound(
        s.runs.begin(), s.runs.end(), begin,
        [](const DecayRun<K> &r, int64_t at) { return r.end <= at; });
    int64_t at = begin;
    for (; run != s.runs.end() && run->begin < end; ++run) {
      int64_t lo = std::max(run->begin, at), hi = std::min(run->end, end);
      if (at < lo)
        blocks(at, lo, s.k);
      blocks(lo, hi, run->k);
      at = hi;
    }
    if (at < end)
      blocks(at, end, s.k);
  });
}

/// torch.optim.Adam/AdamW's single-tensor step, operation for operation,
/// on elements [begin, end) with constants k.
template <bool kDecoupled, typename T>
void adamBlocks(const T *grad, float *master, float *m, float *v, T *param,
                int64_t begin, int64_t end, float gradScale,
                const AdamConstants &k) {
  alignas(64) float bufG[kBlock], bufP[kBlock];
  for (int64_t i = begin; i < end; i += kBlock) {
    int64_t len = std::min(kBlock, end - i);
    const float *g = loadF32(grad + i, len, bufG);
    float *mi = m + i, *vi = v + i;
    // Without masters (bf16 masters) the parameter, widened exactly, is the
    // master; its block is then read and written in place.
    const float *cur = master ? master + i : loadF32(param + i, len, bufP);
    float *p = outF32(param + i, bufP);
    float *w = master ? master + i : p;
#pragma omp simd
    for (int64_t t = 0; t < len; ++t) {
      float gt = g[t] * gradScale;
      float wt = cur[t];
      if constexpr (kDecoupled)
        wt *= k.decay;
      else
        gt = gt + k.weightDecay * wt;
      float mt = mi[t] + k.oneMinusBeta1 * (gt - mi[t]); // lerp_
      float vt = vi[t] * k.beta2 + k.oneMinusBeta2 * gt * gt;
      float denom = std::sqrt(vt) / k.bc2Sqrt + k.eps;
      wt = wt + k.negStepSize * mt / denom; // addcdiv_
      mi[t] = mt;
      vi[t] = vt;
      w[t] = wt;
      p[t] = wt;
    }
    storeF32(p, param + i, len);
  }
}

/// adamBlocks over n elements, split at the weight-decay runs.
template <bool kDecoupled, typename T>
void adamStep(const T *grad, float *master, float *m, float *v, T *param,
              int64_t n, const AdamScalars &s) {
  stepOverRuns(n, s, [&](int64_t begin, int64_t end, const AdamConstants &k) {
    adamBlocks<kDecoupled>(grad, master, m, v, param, begin, end, s.gradScale,
                           k);
  });
}

template <typename T>
void lionBlocks(const T *grad, float *master, float *m, T *param, int64_t begin,
                int64_t end, float gradScale, const LionConstants &k) {
  alignas(64) float bufG[kBlock], bufP[kBlock];
  for (int64_t i = begin; i < end; i += kBlock) {
    int64_t len = std::min(kBlock, end - i);
    const float *g = loadF32(grad + i, len, bufG);
    float *w = master + i, *mi = m + i;
    float *p = outF32(param + i, bufP);
#pragma omp simd
    for (int64_t t = 0; t < len; ++t) {
      float wt = w[t], mt = mi[t];
      lionElement(g[t] * gradScale, wt, mt, k);
      mi[t] = mt;
      w[t] = wt;
      p[t] = wt;
    }
    storeF32(p, param + i, len);
  }
}

/// lionBlocks over n elements, split at the weight-decay runs.
template <typename T>
void lionStep(const T *grad, float *master, float *m, T *param, int64_t n,
              const LionScalars &s) {
  stepOverRuns(n, s, [&](int64_t begin, int64_t end, const LionConstants &k) {
    lionBlocks(grad, master, m, param, begin, end, s.gradScale, k);
  });
}

/// torch.optim.SGD on elements [begin, end) with constants k; m is null
/// without momentum.
template <typename T>
void sgdBlocks(const T *grad, float *master, float *m, T *param, int64_t begin,
               int64_t end, float gradScale, const SgdConstants &k) {
  alignas(64) float bufG[kBlock], bufP[kBlock];
  for (int64_t i = begin; i < end; i += kBlock) {
    int64_t len = std::min(kBlock, end - i);
    const float *g = loadF32(grad + i, len, bufG);
    float *w = master + i;
    float *p = outF32(param + i, bufP);
    if (m) {
      float *mi = m + i;
#pragma omp simd
      for (int64_t t = 0; t < len; ++t) {
        float wt = w[t], mt = mi[t];
        sgdElement(g[t] * gradScale, wt, mt, k);
        mi[t] = mt;
        w[t] = wt;
        p[t] = wt;
      }
    } else {
#pragma omp simd
      for (int64_t t = 0; t < len; ++t) {
        float wt = w[t], mt = 0.0f;
        sgdElement(g[t] * gradScale, wt, mt, k);
        w[t] = wt;
        p[t] = wt;
      }
    }
    storeF32(p, param + i, len);
  }
}

/// The decay runs of a step: each range [decayRanges[2r], decayRanges[2r+1])
/// with its weight decay rangeDecays[r], on the step's constants.
template <typename K>
void addDecayRuns(const char *kernel, OptimizerScalars<K> &s, double lr,
                  const int64_t *decayRanges, const double *rangeDecays,
                  int32_t numDecayRanges, int64_t n) {
  checkDecayRanges(kernel, decayRanges, rangeDecays, numDecayRanges, n);
  s.runs.reserve(size_t(std::max(numDecayRanges, 0)));
  for (int32_t r = 0; r < numDecayRanges; ++r) {
    int64_t b = decayRanges[2 * r], e = decayRanges[2 * r + 1];
    if (b < e)
      s.runs.push_back({b, e, withDecay(s.k, lr, rangeDecays[r])});
  }
}

} // namespace

extern "C" double zrt_lr_at(const zrt_lr_schedule *schedule, double lr,
                            double *beta1, double *beta2, int64_t step) {
  if (!schedule)
    return lr;
  double b1 = beta1 ? *beta1 : 0.0, b2 = beta2 ? *beta2 : 0.0;
  double out = lrAt(*schedule, lr, b1, b2, step);
  if (beta1)
    *beta1 = b1;
  if (beta2)
    *beta2 = b2;
  return out;
}

void zrt::hostAdam(int32_t dtype, const void *grad, float *master,
                   float *expAvg, float *expAvgSq, void *param, int64_t n,
                   int64_t step, double lr, double beta1, double beta2,
                   double eps, double weightDecay, int32_t adamw,
                   int32_t biasCorrection, const zrt_lr_schedule *schedule,
                   const int64_t *decayRanges, const double *rangeDecays,
                   int32_t numDecayRanges, double maxGradNorm,
                   const float *stats, float lossScale, int32_t skip) {
  KernelSpan span("zrt_adam");
  checkDims("zrt_adam", n);
  if (!skip && step < 1)
    fatal("zrt_adam: step %lld must be >= 1", (long long)step);
  AdamScalars s;
  if (!skip) {
    double clip = zrt_clip_coefficient(stats, maxGradNorm);
    s.gradScale = float(clip / double(lossScale));
    lr = zrt_lr_at(schedule, lr, &beta1, &beta2, step);
    s.k = adamConstants(lr, beta1, beta2, eps, weightDecay, step,
                        biasCorrection != 0);
    addDecayRuns("zrt_adam", s, lr, decayRanges, rangeDecays, numDecayRanges,
                 n);
  }
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    T *p = static_cast<T *>(param);
    if (skip) {
      // The step is skipped, but the parameter copy is still a result
      // (without masters it is already the step's).
      if (master)
        parallelFor(n, kGrain, [&](int64_t begin, int64_t end) {
          fromFloat(master + begin, p + begin, end - begin);
        });
      return;
    }
    const T *g = static_cast<const T *>(grad);
    if (adamw)
      adamStep<true>(g, master, expAvg, expAvgSq, p, n, s);
    else
      adamStep<false>(g, master, expAvg, expAvgSq, p, n, s);
  });
}

void zrt::hostSgd(int32_t dtype, const void *grad, float *master,
                  float *momentumBuffer, void *param, int64_t n, int64_t step,
                  double lr, double momentum, double dampening,
                  double weightDecay, int32_t nesterov,
                  const zrt_lr_schedule *schedule, const int64_t *decayRanges,
                  const double *rangeDecays, int32_t numDecayRanges,
                  double maxGradNorm, const float *stats, float lossScale,
                  int32_t skip) {
  KernelSpan span("zrt_sgd");
  checkDims("zrt_sgd", n);
  if (!skip && step < 1)
    fatal("zrt_sgd: step %lld must be >= 1", (long long)step);
  if (momentum != 0.0 && !momentumBuffer && n > 0)
    fatal("zrt_sgd: momentum %g without a momentum buffer", momentum);
  SgdScalars s;
  if (!skip) {
    double clip = zrt_clip_coefficient(stats, maxGradNorm);
    s.gradScale = float(clip / double(lossScale));
    // A cycled momentum (OneCycle) is SGD's momentum, as DeepSpeed cycles
    // a torch optimizer's `momentum` when it has no betas.
    lr = zrt_lr_at(schedule, lr, momentum != 0.0 ? &momentum : nullptr, nullptr,
                   step);
    s.k =
        sgdConstants(lr, momentum, dampening, weightDecay, nesterov != 0, step);
    addDecayRuns("zrt_sgd", s, lr, decayRanges, rangeDecays, numDecayRanges, n);
  }
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    T *p = static_cast<T *>(param);
    if (skip) {
      parallelFor(n, kGrain, [&](int64_t begin, int64_t end) {
        fromFloat(master + begin, p + begin, end - begin);
      });
      return;
    }
    const T *g = static_cast<const T *>(grad);
    float *m = momentum != 0.0 ? momentumBuffer : nullptr;
    stepOverRuns(n, s, [&](int64_t begin, int64_t end, const SgdConstants &k) {
      sgdBlocks(g, master, m, p, begin, end, s.gradScale, k);
    });
  });
}

void zrt::hostLion(int32_t dtype, const void *grad, float *master,
                   float *expAvg, void *param, int64_t n, int64_t step,
                   double lr, double beta1, double beta2, double weightDecay,
                   const zrt_lr_schedule *schedule, const int64_t *decayRanges,
                   const double *rangeDecays, int32_t numDecayRanges,
                   double maxGradNorm, const float *stats, float lossScale,
                   int32_t skip) {
  KernelSpan span("zrt_lion");
  checkDims("zrt_lion", n);
  if (!skip && step < 1)
    fatal("zrt_lion: step %lld must be >= 1", (long long)step);
  LionScalars s;
  if (!skip) {
    double clip = zrt_clip_coefficient(stats, maxGradNorm);
    s.gradScale = float(clip / double(lossScale));
    lr = zrt_lr_at(schedule, lr, &beta1, &beta2, step);
    s.k = lionConstants(lr, beta1, beta2, weightDecay);
    addDecayRuns("zrt_lion", s, lr, decayRanges, rangeDecays, numDecayRanges,
                 n);
  }
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    T *p = static_cast<T *>(param);
    if (skip) {
      parallelFor(n, kGrain, [&](int64_t begin, int64_t end) {
        fromFloat(master + begin, p + begin, end - begin);
      });
      return;
    }
    lionStep(static_cast<const T *>(grad), master, expAvg, p, n, s);
  });
}
