//===- BenchSupport.h - What the runtime's benchmarks share -----*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// The clock, the order statistics and the JSON output of the ratio
// benchmarks bench/run.sh runs.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_BENCH_BENCHSUPPORT_H
#define ZERO_RT_BENCH_BENCHSUPPORT_H

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace zrt::bench {

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
