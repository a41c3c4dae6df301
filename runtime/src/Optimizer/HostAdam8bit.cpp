//===- HostAdam8bit.cpp - Adam with block-wise 8-bit states on the host ---===//
//
// Part of the zero-mlir project.
//
// bitsandbytes' block-wise 8-bit Adam (Dettmers et al., 8-bit Optimizers via
// Block-wise Quantization): each moment is kept as one code of a dynamic map
// per element and one fp32 absmax per block of kQuantBlock elements. A
// block is dequantised, updated in fp32 (OptimizerMath.h's adam8bitElement),
// given its new absmax and quantised to the nearest codes; the parameter
// moves with the fp32 moments. This file is built with -ffp-contract=off:
// the formula's products and sums are rounded one at a time, as in the
// tests' NumPy model and in the CUDA kernel.
//
//===----------------------------------------------------------------------===//

#include "Driver/Trace.h"
#include "Kernels/Kernels.h"
#include "Optimizer/DecayRanges.h"
#include "Optimizer/OptimizerMath.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

using namespace zrt;

namespace {

/// The two maps of the 8-bit states, built once.
struct QuantMaps {
  float signedMap[kQuantCodes];   // exp_avg
  float unsignedMap[kQuantCodes]; // exp_avg_sq
  QuantMaps() {
    dynamicQuantMap(true, signedMap);
    dynamicQuantMap(false, unsignedMap);
  }
};

const QuantMaps &quantMaps() {
  static const QuantMaps maps;
  return maps;
}

/// Constants of the elements from `begin` on: the step's, or a decay range's.
struct DecaySpan {
  int64_t begin, end;
  AdamConstants k;
};

/// One quantisation block [begin, end) of the 8-bit update.
template <typename T>
void adam8bitBlock(const T *grad, float *master, uint8_t *qm, float *absmaxM,
                   uint8_t *qv, float *absmaxV, T *param, int64_t block,
                   int64_t begin, int64_t end, float gradScale,
                   const AdamConstants &base,
                   const std::vector<DecaySpan> &spans, bool decoupled,
                   const QuantMaps &maps) {
  alignas(64) float g[kQuantBlock], m[kQuantBlock], v[kQuantBlock],
      p[kQuantBlock];
  const int64_t len = end - begin;
  const float *gf = loadF32(grad + begin, len, g);
  const float am = absmaxM[block], av = absmaxV[block];
  float *w = master + begin;
  auto update = [&](int64_t lo, int64_t hi, const AdamConstants &k) {
    for (int64_t t = lo; t < hi; ++t) {
      float wt = w[t];
      float mt = dequantizeState(maps.signedMap, qm[begin + t], am);
      float vt = dequantizeState(maps.unsignedMap, qv[begin + t], av);
      adam8bitElement(mulRn(gf[t], gradScale), wt, mt, vt, k, decoupled);
      m[t] = mt;
      v[t] = vt;
      w[t] = wt;
      p[t] = wt;
    }
  };
  // The block's elements, split where the decay ranges begin and end.
  auto span = std::lower_bound(
      spans.begin(), spans.end(), begin,
      [](const DecaySpan &s, int64_t at) { return s.end <= at; });
  int64_t at = begin;
  for (; span != spans.end() && span->begin < end; ++span) {
    int64_t lo = std::max(span->begin, at), hi = std::min(span->end, end);
    if (at < lo)
      update(at - begin, lo - begin, base);
    update(lo - begin, hi - begin, span->k);
    at = hi;
  }
  if (at < end)
    update(at - begin, len, base);
  float newM = 0.0f, newV = 0.0f;
  for (int64_t t = 0; t < len; ++t) {
    newM = std::max(newM, std::fabs(m[t]));
    newV = std::max(newV, v[t]);
  }
  absmaxM[block] = newM;
  absmaxV[block] = newV;
  for (int64_t t = 0; t < len; ++t) {
    qm[begin + t] = quantizeState(maps.signedMap, m[t], newM);
    qv[begin + t] = quantizeState(maps.unsignedMap, v[t], newV);
  }
  if (param)
    fromFloat(p, param + begin, len);
}

} // namespace

extern "C" void zrt_adam8bit_map(int32_t isSigned, float *map) {
  const QuantMaps &maps = quantMaps();
  std::copy_n(isSigned ? maps.signedMap : maps.unsignedMap, kQuantCodes, map);
}

void zrt::hostAdam8bit(int32_t dtype, const void *grad, float *master,
                       uint8_t *expAvg, float *expAvgAbsmax, uint8_t *expAvgSq,
                       float *expAvgSqAbsmax, void *param, int64_t n,
                       int64_t step, double lr, double beta1, double beta2,
                       double eps, double weightDecay, int32_t adamw,
                       int32_t biasCorrection, const zrt_lr_schedule *schedule,
                       const int64_t *decayRanges, const double *rangeDecays,
                       int32_t numDecayRanges, double maxGradNorm,
                       const float *stats, float lossScale, int32_t skip) {
  KernelSpan span("zrt_adam8bit");
  checkDims("zrt_adam8bit", n);
  if (!skip && step < 1)
    fatal("zrt_adam8bit: step %lld must be >= 1", (long long)step);
  const QuantMaps &maps = quantMaps();
  float gradScale = 1.0f;
  AdamConstants k{};
  std::vector<DecaySpan> spans;
  if (!skip) {
    double clip = zrt_clip_coefficient(stats, maxGradNorm);
    gradScale = float(clip / double(lossScale));
    lr = zrt_lr_at(schedule, lr, &beta1, &beta2, step);
    k = adamConstants(lr, beta1, beta2, eps, weightDecay, step,
                      biasCorrection != 0);
    checkDecayRanges("zrt_adam8bit", decayRanges, rangeDecays, numDecayRanges,
                     n);
    for (int32_t r = 0; r < numDecayRanges; ++r)
      if (decayRanges[2 * r] < decayRanges[2 * r + 1])
        spans.push_back({decayRanges[2 * r], decayRanges[2 * r + 1],
                         withDecay(k, lr, rangeDecays[r])});
  }
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    T *p = static_cast<T *>(param);
    // An f32 parameter that is its own master is already written.
    if (std::is_same<T, float>::value && param == master)
      p = nullptr;
    if (skip) {
      if (p)
        parallelFor(n, kGrain, [&](int64_t begin, int64_t end) {
          fromFloat(master + begin, p + begin, end - begin);
        });
      return;
    }
    const T *g = static_cast<const T *>(grad);
    int64_t blocks = (n + kQuantBlock - 1) / kQuantBlock;
    parallelFor(blocks, std::max<int64_t>(1, kGrain / kQuantBlock),
                [&](int64_t first, int64_t last) {
                  for (int64_t b = first; b < last; ++b)
                    adam8bitBlock(g, master, expAvg, expAvgAbsmax, expAvgSq,
                                  expAvgSqAbsmax, p, b, b * kQuantBlock,
                                  std::min(n, (b + 1) * kQuantBlock), gradScale,
                                  k, spans, adamw != 0, maps);
                });
  });
}
