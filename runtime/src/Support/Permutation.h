//===- Permutation.h - Transposes reduced to their essentials ---*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// Host-side planning of zrt_transpose, shared by the CPU and CUDA kernels so
// that both validate and merge dimensions the same way.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_PERMUTATION_H
#define ZERO_RT_PERMUTATION_H

#include "Support/Support.h"

#include <cstdint>

namespace zrt {

/// The largest rank zrt_transpose accepts.
constexpr int kMaxTransposeRank = 8;

/// A permuted copy reduced to its essentials: output dims (row-major,
/// contiguous) with the input stride of each, size-1 dims dropped and dims
/// merged where they are contiguous in the input too.
struct Permutation {
  int rank = 0;
  int64_t size[kMaxTransposeRank] = {};
  int64_t inStride[kMaxTransposeRank] = {};
  int64_t outStride[kMaxTransposeRank] = {};
};

/// Row-major output strides of p's sizes.
inline void computeOutStrides(Permutation &p) {
  int64_t s = 1;
  for (int i = p.rank - 1; i >= 0; --i) {
    p.outStride[i] = s;
    s *= p.size[i];
  }
}

/// Validates the arguments of zrt_transpose (aborting on bad ones) and
/// reduces them to a Permutation.
inline Permutation simplifyPermutation(int rank, const int64_t *inShape,
                                       const int64_t *perm) {
  if (rank < 0 || rank > kMaxTransposeRank)
    fatal("zrt_transpose: rank %d is not in [0, %d]", rank, kMaxTransposeRank);
  int64_t stride[kMaxTransposeRank];
  bool seen[kMaxTransposeRank] = {};
  int64_t s = 1;
  for (int i = rank - 1; i >= 0; --i) {
    if (inShape[i] < 0)
      fatal("zrt_transpose: negative dimension");
    stride[i] = s;
    s *= inShape[i];
  }
  Permutation p;
  for (int i = 0; i < rank; ++i) {
    if (perm[i] < 0 || perm[i] >= rank || seen[perm[i]])
      fatal("zrt_transpose: invalid permutation");
    seen[perm[i]] = true;
    int64_t size = inShape[perm[i]], st = stride[perm[i]];
    if (size == 1)
      continue;
    if (p.rank > 0 && p.inStride[p.rank - 1] == st * size) {
      p.size[p.rank - 1] *= size;
      p.inStride[p.rank - 1] = st;
      continue;
    }
    p.size[p.rank] = size;
    p.inStride[p.rank] = st;
    ++p.rank;
  }
  computeOutStrides(p);
  return p;
}

} // namespace zrt

#endif // ZERO_RT_PERMUTATION_H
