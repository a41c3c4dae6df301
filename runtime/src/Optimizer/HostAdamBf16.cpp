//===- HostAdamBf16.cpp - Adam with bf16 states on the host ---------------===//
//
// Part of the zero-mlir project.
//
// Adam/AdamW whose moments are kept in bf16, as DeepSpeed's
// bf16_optimizer_states: each element's moments are widened to fp32,
// updated with OptimizerMath.h's adam8bitElement and rounded back to bf16 to
// nearest even (torch's .to(torch.bfloat16)); the parameter moves with the
// fp32 moments. This file is built with -ffp-contract=off, so each product
// and sum is rounded once, as in the CUDA kernel (Optimizer.cu's
// adamBf16Kernel): both backends give the same bits.
//
//===----------------------------------------------------------------------===//

#include "Driver/Trace.h"
#include "Kernels/Kernels.h"
#include "Optimizer/DecayRanges.h"
#include "Optimizer/OptimizerMath.h"

#include <algorithm>
#include <type_traits>
#include <vector>

using namespace zrt;

namespace {

/// Elements [begin, end) under the constants k.
template <typename T>
void adamBf16Range(const T *grad, float *master, uint16_t *m, uint16_t *v,
                   T *param, int64_t begin, int64_t end, float gradScale,
                   const AdamConstants &k, bool decoupled) {
  alignas(64) float g[kBlock], w[kBlock];
  for (int64_t at = begin; at < end; at += kBlock) {
    const int64_t len = std::min(kBlock, end - at);
    const float *gf = loadF32(grad + at, len, g);
    // Without masters the parameter is the master: widened exactly.
    if (master)
      std::copy_n(master + at, len, w);
    else
      toFloat(param + at, w, len);
    for (int64_t t = 0; t < len; ++t) {
      float mt = bf16ToFloat(m[at + t]), vt = bf16ToFloat(v[at + t]);
      adam8bitElement(mulRn(gf[t], gradScale), w[t], mt, vt, k, decoupled);
      m[at + t] = floatToBf16(mt);
      v[at + t] = floatToBf16(vt);
    }
    if (master)
      std::copy_n(w, len, master + at);
    if (param)
      fromFloat(w, param + at, len);
  }
}

} // namespace

void zrt::hostAdamBf16(int32_t dtype, const void *grad, float *master,
                       uint16_t *expAvg, uint16_t *expAvgSq, void *param,
                       int64_t n, int64_t step, double lr, double beta1,
                       double beta2, double eps, double weightDecay,
                       int32_t adamw, int32_t biasCorrection,
                       const zrt_lr_schedule *schedule,
                       const int64_t *decayRanges, const double *rangeDecays,
                       int32_t numDecayRanges, double maxGradNorm,
                       const float *stats, float lossScale, int32_t skip) {
  KernelSpan span("zrt_adam_bf16");
  checkDims("zrt_adam_bf16", n);
  if (!skip && step < 1)
    fatal("zrt_adam_bf16: step %lld must be >= 1", (long long)step);
  if (!master && !param)
    fatal("zrt_adam_bf16: neither masters nor parameters");
  float gradScale = 1.0f;
  AdamConstants k{};
  // The runs of equal constants: the step's, then each decay range's.
  struct Run {
    int64_t begin, end;
    AdamConstants k;
  };
  std::vector<Run> runs;
  if (!skip) {
    double clip = zrt_clip_coefficient(stats, maxGradNorm);
    gradScale = float(clip / double(lossScale));
    lr = zrt_lr_at(schedule, lr, &beta1, &beta2, step);
    k = adamConstants(lr, beta1, beta2, eps, weightDecay, step,
                      biasCorrection != 0);
    checkDecayRanges("zrt_adam_bf16", decayRanges, rangeDecays, numDecayRanges,
                     n);
    int64_t at = 0;
    for (int32_t r = 0; r < numDecayRanges; ++r) {
      int64_t b = decayRanges[2 * r], e = decayRanges[2 * r + 1];
      if (at < b)
        runs.push_back({at, b, k});
      if (b < e)
        runs.push_back({b, e, withDecay(k, lr, rangeDecays[r])});
      at = std::max(at, e);
    }
    if (at < n)
      runs.push_back({at, n, k});
  }
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    T *p = static_cast<T *>(param);
    // An f32 parameter that is its own master is already written.
    if (std::is_same<T, float>::value && param == master)
      p = nullptr;
    if (skip) {
      // Without masters the parameters are already the step's.
      if (p && master)
        parallelFor(n, kGrain, [&](int64_t begin, int64_t end) {
          fromFloat(master + begin, p + begin, end - begin);
        });
      return;
    }
    const T *g = static_cast<const T *>(grad);
    parallelFor(n, kGrain, [&](int64_t begin, int64_t end) {
      auto run = std::lower_bound(
          runs.begin(), runs.end(), begin,
          [](const Run &r, int64_t at) { return r.end <= at; });
      for (; run != runs.end() && run->begin < end; ++run)
        adamBf16Range(g, master, expAvg, expAvgSq, p,
                      std::max(run->begin, begin), std::min(run->end, end),
                      gradScale, run->k, adamw != 0);
    });
  });
}
