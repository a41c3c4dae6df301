//===- Support.h - Errors and small helpers of the runtime ------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_SUPPORT_H
#define ZERO_RT_SUPPORT_H

#include "zero_rt/constants.h"
#include "zero_rt/quantize.h"

#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <stdexcept>

namespace zrt {

/// Prints "zrt: error: <message>" to stderr and aborts. Kernels are called
/// by generated code through a C ABI, so invalid arguments cannot be
/// reported any other way.
[[noreturn]] void fatal(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
/// Prints "zrt: error: <message>" to stderr after flushing stdout, as fatal
/// does, for errors that end the run another way.
void printError(const char *fmt, va_list args)
    __attribute__((format(printf, 1, 0)));

inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// An allocation aligned like an arena (by default), released by std::free;
/// aborts when out of memory.
void *alignedAlloc(int64_t bytes, int64_t alignment = ZRT_ARENA_ALIGNMENT);
/// alignedAlloc, but nullptr when out of memory.
void *tryAlignedAlloc(int64_t bytes,
                      int64_t alignment = ZRT_ARENA_ALIGNMENT) noexcept;

/// The planned arenas do not fit in this rank's memory. Thrown while a run
/// or a session sets up, where every rank agrees on the failure instead of
/// one rank aborting while the others wait for it.
struct OutOfMemory : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Aborts unless every dimension is non-negative.
inline void checkDims(const char *kernel, int64_t a, int64_t b = 0,
                      int64_t c = 0, int64_t d = 0) {
  if (a < 0 || b < 0 || c < 0 || d < 0)
    fatal("%s: negative dimension", kernel);
}

/// Aborts unless zrt_matmul's dimensions are non-negative and its k_sum
/// lies in [0, k].
inline void checkMatmul(int64_t batch, int64_t m, int64_t n, int64_t k,
                        int64_t kSum) {
  checkDims("zrt_matmul", batch, m, n, k);
  if (kSum < 0 || kSum > k)
    fatal("zrt_matmul: k_sum %lld is outside [0, k = %lld]", (long long)kSum,
          (long long)k);
}

/// Aborts unless a router's top k lies in [1, experts] (both backends).
inline void checkRouting(const char *kernel, int64_t tokens, int64_t experts,
                         int64_t k) {
  checkDims(kernel, tokens, experts, k);
  if (k < 1 || k > experts)
    fatal("%s: top k %lld outside [1, %lld] (the experts)", kernel,
          (long long)k, (long long)experts);
}

/// Aborts unless a router's group-limited routing can choose: groups of
/// at least 2 experts (the group score sums 2), at most 64 groups
/// (CUDA's mask), enough experts in the kept groups for the top k.
/// groups 0 is none.
inline void checkGroups(const char *kernel, int64_t experts, int64_t k,
                        int64_t groups, int64_t topGroups) {
  if (groups == 0)
    return;
  if (groups < 0 || groups > 64 || experts % groups != 0 ||
      experts / groups < 2 || topGroups < 1 || topGroups > groups ||
      k > topGroups * (experts / groups))
    fatal("%s: %lld groups, top %lld, of %lld experts cannot choose %lld",
          kernel, (long long)groups, (long long)topGroups, (long long)experts,
          (long long)k);
}

/// Aborts unless zrt_rope's frequencies are valid: theta positive and
/// finite, or the head_dim / 2 entries of `invFreq` finite; `scale`
/// positive and finite.
inline void checkRopeFrequencies(const char *kernel, int64_t headDim,
                                 double theta, const float *invFreq,
                                 double scale) {
  if (invFreq) {
    for (int64_t i = 0; i < headDim / 2; ++i)
      if (!std::isfinite(invFreq[i]))
        fatal("%s: inv_freq[%lld] is not finite", kernel, (long long)i);
  } else if (!(theta > 0.0) || !std::isfinite(theta)) {
    fatal("%s: theta %g is not positive and finite", kernel, theta);
  }
  if (!(scale > 0.0) || !std::isfinite(scale))
    fatal("%s: scale %g is not positive and finite", kernel, scale);
}

/// Checks zrt_split's or zrt_concat's [outer, sum(sizes), inner] and
/// returns sum(sizes).
inline int64_t checkParts(const char *kernel, const int64_t *sizes, int32_t num,
                          int64_t outer, int64_t inner) {
  checkDims(kernel, outer, inner, num);
  int64_t total = 0;
  for (int32_t p = 0; p < num; ++p) {
    if (sizes[p] < 0)
      fatal("%s: negative part size", kernel);
    total += sizes[p];
  }
  return total;
}

/// Aborts unless a loss's dimensions are non-negative and its `rows` rows,
/// padded to `cols` entries, hold its `classes` classes.
inline void checkLoss(const char *kernel, int64_t rows, int64_t classes,
                      int64_t cols) {
  checkDims(kernel, rows, classes, cols);
  if (cols < classes)
    fatal("%s: %lld columns hold fewer than the %lld classes", kernel,
          (long long)cols, (long long)classes);
}

/// Aborts unless zrt_quantize's or zrt_dequantize's dimensions are
/// non-negative and `bits` is a supported width (zero_rt/quantize.h).
inline void checkQuantArgs(const char *kernel, int64_t n, int64_t chunks,
                           int32_t bits) {
  checkDims(kernel, n, chunks);
  if (!zrt_quant_bits_valid(bits))
    fatal("%s: %d-bit quantization is not supported (8 or 4)", kernel,
          int(bits));
}

} // namespace zrt

#endif // ZERO_RT_SUPPORT_H
