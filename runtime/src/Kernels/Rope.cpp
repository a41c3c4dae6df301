//===- Rope.cpp - Rotary position embedding -------------------------------===//
//
// Part of the zero-mlir project.
//
// Rows of [batch, heads, seq, head_dim] are taken position by position, so
// that the cosines and sines of a position (one per pair, KernelMath.h) are
// computed once for all the rows there rather than per element. This file is
// compiled with -ffp-contract=off: the rotation rounds each product as
// Hugging Face's fp32 arithmetic does.
//
//===----------------------------------------------------------------------===//

#include "Driver/Trace.h"
#include "Kernels/Kernels.h"

#include <climits>
#include <cmath>

using namespace zrt;

namespace {

/// Positions [batch, seq] of int32 or int64, or 0..seq-1 where there are
/// none.
struct Positions {
  const void *data = nullptr;
  bool wide = false;
  int64_t heads = 1, seq = 1;

  /// The position of row `row` (of batch * heads) at index t.
  int64_t at(int64_t row, int64_t t) const {
    if (!data)
      return t;
    int64_t i = row / heads * seq + t;
    return wide ? static_cast<const int64_t *>(data)[i]
                : static_cast<const int32_t *>(data)[i];
  }
};

template <typename T>
void rope(const T *x, T *y, int64_t rows, int64_t seq, int64_t headDim,
          double theta, bool inverse, bool interleaved, const float *table,
          float scale, Positions positions) {
  int64_t half = headDim / 2;
  // Item r is row r % rows at index r / rows along seq; its position is
  // the index itself or positions' at that row's batch entry.
  parallelFor(rows * seq, rowGrain(headDim), [&](int64_t begin, int64_t end) {
    alignas(64) float invFreq[kBlock], cosT[kBlock], sinT[kBlock];
    alignas(64) float bufA[2 * kBlock], bufB[kBlock], bufOutA[2 * kBlock],
        bufOutB[kBlock];
    // Pairs in blocks: one block unless head_dim > 2 * kBlock.
    for (int64_t c0 = 0; c0 < half; c0 += kBlock) {
      int64_t len = std::min(kBlock, half - c0);
      for (int64_t i = 0; i < len; ++i)
        invFreq[i] =
            table ? table[c0 + i] : ropeInvFreq(theta, c0 + i, headDim);
      int64_t pos = -1, cached = INT64_MIN;
      for (int64_t r = begin; r < end; ++r) {
        pos = r / rows;
        if (int64_t at = positions.at(r % rows, pos); at != cached) {
          cached = at;
          for (int64_t i = 0; i < len; ++i) {
            ropeCosSin(at, invFreq[i], scale, cosT[i], sinT[i]);
            if (inverse)
              sinT[i] = -sinT[i];
          }
        }
        int64_t row = ((r % rows) * seq + pos) * headDim;
        if (interleaved) {
          // Pairs (2i, 2i + 1): the block's 2 * len neighbours at once.
          int64_t offset = row + 2 * c0;
          const float *a = loadF32(x + offset, 2 * len, bufA);
          float *ya = outF32(y + offset, bufOutA);
#pragma omp simd
          for (int64_t t = 0; t < len; ++t) {
            float p = a[2 * t], q = a[2 * t + 1];
            ropeRotate(p, q, cosT[t], sinT[t], ya[2 * t], ya[2 * t + 1]);
          }
          storeF32(ya, y + offset, 2 * len);
          continue;
        }
        int64_t offset = row + c0;
        const float *a = loadF32(x + offset, len, bufA);
        const float *b = loadF32(x + offset + half, len, bufB);
        float *ya = outF32(y + offset, bufOutA);
        float *yb = outF32(y + offset + half, bufOutB);
#pragma omp simd
        for (int64_t t = 0; t < len; ++t) {
          float p = a[t], q = b[t];
          ropeRotate(p, q, cosT[t], sinT[t], ya[t], yb[t]);
        }
        storeF32(ya, y + offset, len);
        storeF32(yb, y + offset + half, len);
      }
    }
  });
}

} // namespace

static void ropeAt(const char *name, int32_t dtype, const void *x, void *y,
                   int64_t batch, int64_t heads, int64_t seq, int64_t headDim,
                   double theta, int32_t inverse, int32_t interleaved,
                   const float *invFreq, double scale, Positions positions) {
  KernelSpan span(name);
  checkDims(name, batch, heads, seq, headDim);
  if (headDim % 2 != 0)
    fatal("%s: head_dim %lld is odd", name, (long long)headDim);
  checkRopeFrequencies(name, headDim, theta, invFreq, scale);
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    rope(static_cast<const T *>(x), static_cast<T *>(y), batch * heads, seq,
         headDim, theta, inverse != 0, interleaved != 0, invFreq, float(scale),
         positions);
  });
}

extern "C" void zrt_rope(int32_t dtype, const void *x, void *y, int64_t batch,
                         int64_t heads, int64_t seq, int64_t headDim,
                         double theta, int32_t inverse, int32_t interleaved,
                         const float *invFreq, double scale) {
  ropeAt("zrt_rope", dtype, x, y, batch, heads, seq, headDim, theta, inverse,
         interleaved, invFreq, scale, Positions());
}

extern "C" void
zrt_rope_positions(int32_t dtype, const void *x, void *y, int64_t batch,
                   int64_t heads, int64_t seq, int64_t headDim, double theta,
                   int32_t inverse, int32_t interleaved, const float *invFreq,
                   double scale, int32_t positionType, const void *positions) {
  if (positionType != ZRT_I32 && positionType != ZRT_I64)
    fatal("zrt_rope_positions: position type %d is neither int32 nor int64",
          int(positionType));
  ropeAt("zrt_rope_positions", dtype, x, y, batch, heads, seq, headDim, theta,
         inverse, interleaved, invFreq, scale,
         Positions{positions, positionType == ZRT_I64, heads, seq});
}
