//===- Parallel.h - OpenMP work splitting -----------------------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// All kernel parallelism goes through OpenMP; OpenBLAS is kept
// single-threaded and called from inside these regions, so the process has
// one thread pool. Reductions are split into a number of chunks that depends
// on the problem size only, which makes results bitwise independent of the
// thread count.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_PARALLEL_H
#define ZERO_RT_PARALLEL_H

#include "Support/Support.h"

#include <algorithm>
#include <cstdint>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace zrt {

/// Threads a kernel may use here: 1 inside an enclosing parallel region.
inline int availableThreads() {
#ifdef _OPENMP
  return omp_in_parallel() ? 1 : omp_get_max_threads();
#else
  return 1;
#endif
}

/// Calls fn(begin, end) on contiguous ranges covering [0, n), one per
/// thread, using at most n / grain threads.
template <typename Fn>
void parallelFor(int64_t n, int64_t grain, const Fn &fn) {
  if (n <= 0)
    return;
  int64_t threads =
      std::min<int64_t>(availableThreads(), std::max<int64_t>(1, n / grain));
  if (threads <= 1) {
    fn(int64_t(0), n);
    return;
  }
#ifdef _OPENMP
#pragma omp parallel num_threads(int(threads))
  {
    int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    int64_t begin = n * t / nt, end = n * (t + 1) / nt;
    if (begin < end)
      fn(begin, end);
  }
#endif
}

/// Work (about a flop each) below which a thread is not worth starting.
constexpr int64_t kMinThreadWork = int64_t(1) << 18;

/// Calls fn(i) for every i in [0, n), balancing uneven items dynamically;
/// itemWork estimates the work of one item.
template <typename Fn>
void parallelForEach(int64_t n, int64_t itemWork, const Fn &fn) {
  int64_t most = std::max<int64_t>(1, std::min<int64_t>(availableThreads(), n));
  int threads =
      int(std::clamp<int64_t>(n * itemWork / kMinThreadWork, 1, most));
  if (threads <= 1) {
    for (int64_t i = 0; i < n; ++i)
      fn(i);
    return;
  }
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (int64_t i = 0; i < n; ++i)
    fn(i);
#endif
}

/// Sum of fn(begin, end) over chunks of [0, n) of at least `grain` elements;
/// the chunks, and so the rounding, depend on n only. V needs += and a
/// default value of zero.
template <typename V, typename Fn>
V deterministicSum(int64_t n, int64_t grain, const Fn &fn) {
  constexpr int64_t kMaxChunks = 256;
  int64_t chunks = std::clamp<int64_t>(ceilDiv(n, grain), 1, kMaxChunks);
  V partial[kMaxChunks];
  parallelFor(chunks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c)
      partial[c] = fn(n * c / chunks, n * (c + 1) / chunks);
  });
  V total = partial[0];
  for (int64_t c = 1; c < chunks; ++c)
    total += partial[c];
  return total;
}

} // namespace zrt

#endif // ZERO_RT_PARALLEL_H
