//===- Optimizer.cpp - Overflow check and the optimizer's step ------------===//
//
// Part of the zero-mlir project.
//
// The optimizer kernels are bandwidth bound: each streams its buffers once
// in fp32 blocks with the arithmetic in vector registers (check_overflow
// reads 2 bytes per 16-bit gradient; Adam moves 28 bytes per parameter with
// 16-bit gradients and copies).
//
//===----------------------------------------------------------------------===//

#include "Driver/Trace.h"
#include "Kernels/Kernels.h"

#include <algorithm>
#include <cfloat>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

using namespace zrt;

namespace {

struct OverflowStats {
  double sumSquares = 0.0;
  bool nonFinite = false;

  OverflowStats &operator+=(const OverflowStats &o) {
    sumSquares += o.sumSquares;
    nonFinite |= o.nonFinite;
    return *this;
  }
};

/// True if x holds an infinity or a NaN (all-ones exponent).
template <typename T>
bool anyNonFinite(const T *x, int64_t n) {
  alignas(64) float buf[kBlock];
  uint32_t bad = 0;
  forBlocks(x, n, buf, [&](const float *v, int64_t, int64_t len) {
#pragma omp simd reduction(| : bad)
    for (int64_t t = 0; t < len; ++t)
      bad |= uint32_t((floatBits(v[t]) & 0x7f800000u) == 0x7f800000u);
  });
  return bad != 0;
}

// Sum of squares of x[0, len), len <= kBlock, in fp32 with independent
// vector accumulators: the loop streams at memory speed instead of waiting
// on one accumulator's FMA latency, and widens 16-bit values in registers
// (no fp32 copy of the block). The summation order depends on len only.
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
inline float finishSum(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
  return _mm512_reduce_add_ps(
      _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

inline float blockSumSquares(const BF16 *x, int64_t len) {
  // A 32-bit lane holds two bf16 values: the low one shifted up and the
  // high one masked are both exact fp32 values.
  const __m512i hiMask = _mm512_set1_epi32(int(0xffff0000u));
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  auto add = [&](__m512i v, __m512 &lo, __m512 &hi) {
    __m512 l = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
    __m512 h = _mm512_castsi512_ps(_mm512_and_si512(v, hiMask));
    lo = _mm512_fmadd_ps(l, l, lo);
    hi = _mm512_fmadd_ps(h, h, hi);
  };
  const uint16_t *p = &x->bits;
  int64_t t = 0;
  for (; t + 64 <= len; t += 64) {
    add(_mm512_loadu_si512(p + t), a0, a1);
    add(_mm512_loadu_si512(p + t + 32), a2, a3);
  }
  for (; t < len; t += 32) {
    __mmask32 m = _cvtu32_mask32(
        len - t >= 32 ? 0xffffffffu : (uint32_t(1) << (len - t)) - 1);
    add(_mm512_maskz_loadu_epi16(m, p + t), a0, a1);
  }
  return finishSum(a0, a1, a2, a3);
}

inline float blockSumSquares(const F16 *x, int64_t len) {
  __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                 _mm512_setzero_ps()};
  const uint16_t *p = &x->bits;
  int64_t t = 0;
  for (; t + 64 <= len; t += 64)
    for (int k = 0; k < 4; ++k) {
      __m512 v = _mm512_cvtph_ps(_mm256_loadu_si256(
          reinterpret_cast<const __m256i *>(p + t + 16 * k)));
      a[k] = _mm512_fmadd_ps(v, v, a[k]);
    }
  for (int k = 0; t < len; t += 16, ++k) {
    __mmask16 m = _cvtu32_mask16(
        len - t >= 16 ? 0xffffu : (uint32_t(1) << (len - t)) - 1);
    __m512 v = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p + t));
    a[k] = _mm512_fmadd_ps(v, v, a[k]);
  }
  return finishSum(a[0], a[1], a[2], a[3]);
}

inline float blockSumSquares(const float *x, int64_t len) {
  __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                 _mm512_setzero_ps()};
  int64_t t = 0;
  for (; t + 64 <= len; t += 64)
    for (int k = 0; k < 4; ++k) {
      __m512 v = _mm512_loadu_ps(x + t + 16 * k);
      a[k] = _mm512_fmadd_ps(v, v, a[k]);
    }
  for (int k = 0; t < len; t += 16, ++k) {
    __mmask16 m = _cvtu32_mask16(
        len - t >= 16 ? 0xffffu : (uint32_t(1) << (len - t)) - 1);
    __m512 v = _mm512_maskz_loadu_ps(m, x + t);
    a[k] = _mm512_fmadd_ps(v, v, a[k]);
  }
  return finishSum(a[0], a[1], a[2], a[3]);
}
#else
template <typename T>
float blockSumSquares(const T *x, int64_t len) {
  constexpr int64_t kLanes = 32;
  alignas(64) float acc[kLanes] = {};
  int64_t t = 0;
  for (; t + kLanes <= len; t += kLanes)
#pragma omp simd
    for (int64_t l = 0; l < kLanes; ++l) {
      float v = toFloat(x[t + l]);
      acc[l] += v * v;
    }
  for (int64_t l = 0; t + l < len; ++l) {
    float v = toFloat(x[t + l]);
    acc[l] += v * v;
  }
  for (int64_t w = kLanes / 2; w > 0; w /= 2)
    for (int64_t l = 0; l < w; ++l)
      acc[l] += acc[l + w];
  return acc[0];
}
#endif

template <typename T>
OverflowStats scan(const T *x, int64_t n) {
  OverflowStats st;
  for (int64_t off = 0; off < n; off += kBlock) {
    int64_t len = std::min(kBlock, n - off);
    float sq = blockSumSquares(x + off, len);
    // Squares are >= 0, so an inf or NaN element makes the block's sum inf
    // or NaN; only then (or when finite squares overflow fp32) is the block
    // scanned for an all-ones exponent.
    if (!std::isfinite(sq))
      st.nonFinite |= anyNonFinite(x + off, len);
    st.sumSquares += double(sq);
  }
  return st;
}

/// deterministicSum over the same chunks (so the same rounding: it depends
/// on n only), but handed out to the threads one at a time: on cores shared
/// with other processes a preempted thread does not hold up the pass while
/// the others idle at the barrier. The partials are added in chunk order.
template <typename Fn>
OverflowStats chunkedScan(int64_t n, const Fn &fn) {
  constexpr int64_t kMaxChunks = 256;
  int64_t chunks = std::clamp<int64_t>(ceilDiv(n, kGrain), 1, kMaxChunks);
  OverflowStats partial[kMaxChunks];
  int threads = int(std::min<int64_t>(availableThreads(), chunks));
  if (threads <= 1) {
    for (int64_t c = 0; c < chunks; ++c)
      partial[c] = fn(n * c / chunks, n * (c + 1) / chunks);
  } else {
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int64_t c = 0; c < chunks; ++c)
      partial[c] = fn(n * c / chunks, n * (c + 1) / chunks);
  }
  OverflowStats total = partial[0];
  for (int64_t c = 1; c < chunks; ++c)
    total += partial[c];
  return total;
}

} // namespace

extern "C" void zrt_check_overflow(int32_t dtype, const void *const *grads,
                                   const int64_t *counts, int32_t num,
                                   float lossScale, float *stats) {
  KernelSpan span("zrt_check_overflow");
  int64_t total = 0;
  for (int32_t b = 0; b < num; ++b) {
    checkDims("zrt_check_overflow", counts[b]);
    total += counts[b];
  }
  OverflowStats st;
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    // Chunks of the concatenation of all buffers, so that many small
    // gradients share one parallel pass.
    st = chunkedScan(total, [&](int64_t begin, int64_t end) {
      OverflowStats part;
      int64_t start = 0;
      for (int32_t b = 0; b < num && start < end; start += counts[b++]) {
        int64_t lo = std::max(begin, start);
        int64_t hi = std::min(end, start + counts[b]);
        if (lo < hi)
          part +=
              scan(static_cast<const T *>(grads[b]) + (lo - start), hi - lo);
      }
      return part;
    });
  });
  double scale = double(lossScale);
  stats[0] = st.nonFinite ? 1.0f : 0.0f;
  stats[1] = float(st.sumSquares / (scale * scale));
}

extern "C" void zrt_optimizer_step(const zrt_optimizer *optimizer,
                                   const zrt_update *update) {
  if (!optimizer || !update)
    fatal("zrt_optimizer_step: a null %s", optimizer ? "update" : "optimizer");
  // The same code as the offloaded optimizer's host step, so that both give
  // the same bits.
  hostOptimizerStep(*optimizer, *update);
}
