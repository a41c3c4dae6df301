//===- HostAdam.cpp - The fused Adam on host memory -----------------------===//
//
// Part of the zero-mlir project.
//
// torch.optim.Adam/AdamW's step over fp32 masters and moments in host
// memory: the CPU backend's zrt_adam, and the host Adam of an offloaded
// optimizer on both backends (ZeRO-Offload), which is why it lives in the
// runtime's shared core. It streams 28 bytes per parameter with 16-bit
// gradients and copies.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"
#include "Trace.h"

using namespace zrt;

namespace {

struct AdamScalars {
  float gradScale; // clip coefficient / loss scale
  AdamConstants k;
};

/// torch.optim.Adam/AdamW's single-tensor step, operation for operation.
template <bool kDecoupled, typename T>
void adamStep(const T *grad, float *master, float *m, float *v, T *param,
              int64_t n, const AdamScalars &s) {
  parallelFor(n, kGrain, [&](int64_t begin, int64_t end) {
    alignas(64) float bufG[kBlock], bufP[kBlock];
    for (int64_t i = begin; i < end; i += kBlock) {
      int64_t len = std::min(kBlock, end - i);
      const float *g = loadF32(grad + i, len, bufG);
      float *w = master + i, *mi = m + i, *vi = v + i;
      float *p = outF32(param + i, bufP);
#pragma omp simd
      for (int64_t t = 0; t < len; ++t) {
        float gt = g[t] * s.gradScale;
        float wt = w[t];
        if constexpr (kDecoupled)
          wt *= s.k.decay;
        else
          gt = gt + s.k.weightDecay * wt;
        float mt = mi[t] + s.k.oneMinusBeta1 * (gt - mi[t]); // lerp_
        float vt = vi[t] * s.k.beta2 + s.k.oneMinusBeta2 * gt * gt;
        float denom = std::sqrt(vt) / s.k.bc2Sqrt + s.k.eps;
        wt = wt + s.k.negStepSize * mt / denom; // addcdiv_
        mi[t] = mt;
        vi[t] = vt;
        w[t] = wt;
        p[t] = wt;
      }
      storeF32(p, param + i, len);
    }
  });
}

} // namespace

void zrt::hostAdam(int32_t dtype, const void *grad, float *master,
                   float *expAvg, float *expAvgSq, void *param, int64_t n,
                   int64_t step, double lr, double beta1, double beta2,
                   double eps, double weightDecay, int32_t adamw,
                   double maxGradNorm, const float *stats, float lossScale,
                   int32_t skip) {
  KernelSpan span("zrt_adam");
  checkDims("zrt_adam", n);
  if (!skip && step < 1)
    fatal("zrt_adam: step %lld must be >= 1", (long long)step);
  AdamScalars s;
  if (!skip) {
    double clip = zrt_clip_coefficient(stats, maxGradNorm);
    s.gradScale = float(clip / double(lossScale));
    s.k = adamConstants(lr, beta1, beta2, eps, weightDecay, step);
  }
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    T *p = static_cast<T *>(param);
    if (skip) {
      // The step is skipped, but the parameter copy is still a result.
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
