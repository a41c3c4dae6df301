//===- BenchSupport.h - What the runtime's benchmarks share -----*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// The clock, the order statistics and the JSON output of the ratio
// benchmarks bench/run.sh runs, and the optimizer step they time.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_BENCH_BENCHSUPPORT_H
#define ZERO_RT_BENCH_BENCHSUPPORT_H

#include "zero_rt/zrt.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace zrt::bench {

/// The AdamW step the benchmarks time (lr 1e-3, betas 0.9 and 0.95, eps
/// 1e-8, weight decay 0.1, clipping at 1 with `stats`), on n elements.
inline void adamwStep(int32_t dtype, const void *grad, float *master,
                      float *expAvg, float *expAvgSq, void *param, int64_t n,
                      int64_t step, const float *stats) {
  zrt_optimizer o{};
  o.kind = 1; // AdamW, optimizers.def's second row
  o.params.adamw.lr = 1e-3;
  o.params.adamw.beta1 = 0.9;
  o.params.adamw.beta2 = 0.95;
  o.params.adamw.eps = 1e-8;
  o.params.adamw.weight_decay = 0.1;
  o.params.adamw.bias_correction = 1;
  zrt_update u{};
  u.dtype = dtype;
  u.grad = grad;
  u.master = master;
  u.param = param;
  u.states[0] = expAvg;
  u.states[1] = expAvgSq;
  u.n = n;
  u.step = step;
  u.max_grad_norm = 1.0;
  u.stats = stats;
  u.loss_scale = 1.0f;
  zrt_optimizer_step(&o, &u);
}

/// Seconds on the steady clock.
inline double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// The element at fraction `q` of the sorted values (nearest rank).
inline double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[size_t(q * double(v.size() - 1) + 0.5)];
}

/// Writes `text` to `path`; false (with perror's message) when it cannot.
inline bool writeText(const std::string &path, const std::string &text) {
  FILE *f = std::fopen(path.c_str(), "w");
  if (!f) {
    std::perror(path.c_str());
    return false;
  }
  std::fputs(text.c_str(), f);
  return std::fclose(f) == 0;
}

} // namespace zrt::bench

#endif // ZERO_RT_BENCH_BENCHSUPPORT_H
