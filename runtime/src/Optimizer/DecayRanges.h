//===- DecayRanges.h - The update's weight-decay ranges --------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// Shared by the host and CUDA Adam (runtime/src/Optimizer/HostAdam.cpp,
// runtime/cuda/src/Optimizer/Optimizer.cu).
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_DECAY_RANGES_H
#define ZERO_RT_DECAY_RANGES_H

#include "Support/Support.h"

#include <cstdint>

namespace zrt {

/// Aborts unless zrt_update's weight-decay ranges ([ranges[2k],
/// ranges[2k+1]) with decays[k]) are sorted, disjoint, within n elements
/// and decay by >= 0.
inline void checkDecayRanges(const char *kernel, const int64_t *ranges,
                             const double *decays, int32_t num, int64_t n) {
  int64_t last = 0;
  for (int32_t r = 0; r < num; ++r) {
    int64_t b = ranges[2 * r], e = ranges[2 * r + 1];
    if (b < last || e < b || e > n || !(decays[r] >= 0.0))
      fatal("%s: weight-decay range %d [%lld, %lld) with decay %g is not "
            "sorted, disjoint and within the %lld elements",
            kernel, int(r), (long long)b, (long long)e, decays[r],
            (long long)n);
    last = e;
  }
}

} // namespace zrt

#endif // ZERO_RT_DECAY_RANGES_H
