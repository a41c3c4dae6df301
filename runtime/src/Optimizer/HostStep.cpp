//===- HostStep.cpp - The element-wise optimizers on host memory ----------===//
//
// Part of the zero-mlir project.
//
// Every ElementRule's step over fp32 masters and states in host memory:
// the CPU backend's zrt_optimizer_step, and the host update of an
// offloaded optimizer on both backends (ZeRO-Offload), which is why it
// lives in the runtime's shared core with the learning-rate schedule it
// applies (zrt_lr_at). Adam streams 28 bytes per parameter with 16-bit
// gradients and copies.
//
//===----------------------------------------------------------------------===//

#include "Driver/Trace.h"
#include "Kernels/Kernels.h"
#include "Optimizer/DecayRanges.h"
#include "Optimizer/ElementRules.h"

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

/// Rule R's step on elements [begin, end) with constants k, over its N
/// live states. Without masters (bf16 masters) the parameter, widened
/// exactly, is the master; its block is then read and written in place.
template <class R, int N, typename T>
void elementBlocks(const T *grad, float *master, float *const *states, T *param,
                   int64_t begin, int64_t end, float gradScale,
                   const typename R::Constants &k) {
  alignas(64) float bufG[kBlock], bufP[kBlock];
  constexpr int kSlots = N > 0 ? N : 1;
  for (int64_t i = begin; i < end; i += kBlock) {
    int64_t len = std::min(kBlock, end - i);
    const float *g = loadF32(grad + i, len, bufG);
    const float *cur = master ? master + i : loadF32(param + i, len, bufP);
    float *p = outF32(param + i, bufP);
    float *w = master ? master + i : p;
    float *s[kSlots] = {};
    for (int j = 0; j < N; ++j)
      s[j] = states[j] + i;
#pragma omp simd
    for (int64_t t = 0; t < len; ++t) {
      float gt = g[t] * gradScale;
      float wt = cur[t];
      float st[kSlots] = {};
      for (int j = 0; j < N; ++j)
        st[j] = s[j][t];
      R::element(gt, wt, st, k);
      for (int j = 0; j < N; ++j)
        s[j][t] = st[j];
      w[t] = wt;
      p[t] = wt;
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

/// Rule R's step of zrt_update `u`.
template <class R>
void elementStep(const zrt_optimizer &o, const zrt_update &u) {
  KernelSpan span(R::kSpan);
  checkDims(R::kSpan, u.n);
  if (!u.skip && u.step < 1)
    fatal("%s: step %lld must be >= 1", R::kSpan, (long long)u.step);
  const int live = R::liveStates(o);
  float *states[ZRT_MAX_OPTIMIZER_STATES] = {};
  for (int j = 0; j < live; ++j) {
    states[j] = static_cast<float *>(u.states[j]);
    if (!states[j] && u.n > 0)
      fatal("%s: its state %d is null", R::kSpan, j);
  }
  OptimizerScalars<typename R::Constants> s;
  if (!u.skip) {
    double clip = zrt_clip_coefficient(u.stats, u.max_grad_norm);
    s.gradScale = float(clip / double(u.loss_scale));
    double lr = 0.0;
    s.k = R::constants(o, u.schedule, u.step, lr);
    addDecayRuns(R::kSpan, s, lr, u.decay_ranges, u.range_decays,
                 u.num_decay_ranges, u.n);
  }
  dispatchFloat(u.dtype, [&](auto tag) {
    using T = decltype(tag);
    T *p = static_cast<T *>(u.param);
    if (u.skip) {
      // The step is skipped, but the parameter copy is still a result
      // (without masters it is already the step's).
      if (u.master)
        parallelFor(u.n, kGrain, [&](int64_t begin, int64_t end) {
          fromFloat(u.master + begin, p + begin, end - begin);
        });
      return;
    }
    const T *g = static_cast<const T *>(u.grad);
    auto run = [&](auto live) {
      constexpr int kLive = decltype(live)::value;
      stepOverRuns(
          u.n, s,
          [&](int64_t begin, int64_t end, const typename R::Constants &k) {
            elementBlocks<R, kLive>(g, u.master, states, p, begin, end,
                                    s.gradScale, k);
          });
    };
    if (live == 3)
      run(std::integral_constant<int, 3>());
    else if (live == 2)
      run(std::integral_constant<int, 2>());
    else if (live == 1)
      run(std::integral_constant<int, 1>());
    else
      run(std::integral_constant<int, 0>());
  });
}

/// Kind K's step, or a refusal for an optimizer that is not element-wise.
template <optimizers::Kind K>
void kindStep(const zrt_optimizer &o, const zrt_update &u) {
  using Rule = optimizers::ElementRule<K>;
  if constexpr (Rule::kDefined)
    elementStep<Rule>(o, u);
  else
    fatal("zrt_optimizer_step: %s updates whole tensors, not elements",
          optimizers::kindName(o.kind));
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

void zrt::hostOptimizerStep(const zrt_optimizer &o, const zrt_update &u) {
  using optimizers::Kind;
  using optimizers::StatePrecision;
  StatePrecision precision = optimizers::checkedPrecision(o);
  if (precision != StatePrecision::F32) {
    // Adam's and AdamW's 8-bit and bf16 states (the only rows that declare
    // another precision) have kernels of their own.
    optimizers::AdamHyper h = optimizers::adamHyper(o);
    if (precision == StatePrecision::Int8)
      hostAdam8bit(u.dtype, u.grad, u.master,
                   static_cast<uint8_t *>(u.states[0]), u.absmax[0],
                   static_cast<uint8_t *>(u.states[1]), u.absmax[1], u.param,
                   u.n, u.step, h.lr, h.beta1, h.beta2, h.eps, h.weightDecay,
                   h.decoupled, h.biasCorrection, u.schedule, u.decay_ranges,
                   u.range_decays, u.num_decay_ranges, u.max_grad_norm, u.stats,
                   u.loss_scale, u.skip);
    else
      hostAdamBf16(
          u.dtype, u.grad, u.master, static_cast<uint16_t *>(u.states[0]),
          static_cast<uint16_t *>(u.states[1]), u.param, u.n, u.step, h.lr,
          h.beta1, h.beta2, h.eps, h.weightDecay, h.decoupled, h.biasCorrection,
          u.schedule, u.decay_ranges, u.range_decays, u.num_decay_ranges,
          u.max_grad_norm, u.stats, u.loss_scale, u.skip);
    return;
  }
  switch (Kind(o.kind)) {
#define ZRT_OPTIMIZER(id, name, decoupled, bytes, update, staged, host, nvme)  \
  case Kind::id:                                                               \
    return kindStep<Kind::id>(o, u);
#include "zero_rt/optimizers.def"
  }
}
