//===- Types.h - Storage types, conversions and dtype dispatch --*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// Kernels are templates over the storage type T (float, BF16 or F16) and
// compute in fp32. They move data through small fp32 blocks: loadF32 returns
// the source itself for f32 and a converted copy otherwise, so the f32 path
// pays no copy and the 16-bit paths convert with vector instructions.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_TYPES_H
#define ZERO_RT_TYPES_H

#include "Support/Half.h"
#include "Support/Support.h"
#include "zero_rt/zrt.h"

#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace zrt {

/// 16-bit storage types; only their bits are stored.
struct BF16 {
  uint16_t bits;
};
struct F16 {
  uint16_t bits;
};

//===----------------------------------------------------------------------===//
// Scalar conversions (exact ones in Half.h)
//===----------------------------------------------------------------------===//

inline float f16ToFloat(uint16_t h) {
#if defined(__F16C__)
  return _cvtsh_ss(h);
#else
  return f16ToFloatSoft(h);
#endif
}

inline uint16_t floatToF16(float x) {
#if defined(__F16C__)
  return uint16_t(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#else
  return floatToF16Soft(x);
#endif
}

inline float toFloat(float x) { return x; }
inline float toFloat(BF16 x) { return bf16ToFloat(x.bits); }
inline float toFloat(F16 x) { return f16ToFloat(x.bits); }

template <typename T>
T fromFloat(float x);
template <>
inline float fromFloat<float>(float x) {
  return x;
}
template <>
inline BF16 fromFloat<BF16>(float x) {
  return BF16{floatToBf16(x)};
}
template <>
inline F16 fromFloat<F16>(float x) {
  return F16{floatToF16(x)};
}

//===----------------------------------------------------------------------===//
// Block conversions
//===----------------------------------------------------------------------===//

inline void toFloat(const float *src, float *dst, int64_t n) {
  std::memcpy(dst, src, size_t(n) * sizeof(float));
}
inline void toFloat(const BF16 *src, float *dst, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    dst[i] = bitsFloat(uint32_t(src[i].bits) << 16);
}
inline void toFloat(const F16 *src, float *dst, int64_t n) {
  int64_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(
                                  reinterpret_cast<const __m128i *>(src + i))));
#endif
  for (; i < n; ++i)
    dst[i] = f16ToFloat(src[i].bits);
}

inline void fromFloat(const float *src, float *dst, int64_t n) {
  if (src != dst)
    std::memcpy(dst, src, size_t(n) * sizeof(float));
}
inline void fromFloat(const float *src, BF16 *dst, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    dst[i].bits = floatToBf16(src[i]);
}
inline void fromFloat(const float *src, F16 *dst, int64_t n) {
  int64_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(
        reinterpret_cast<__m128i *>(dst + i),
        _mm256_cvtps_ph(_mm256_loadu_ps(src + i),
                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
  for (; i < n; ++i)
    dst[i].bits = floatToF16(src[i]);
}

/// `src` as n fp32 values: src itself for f32, else `buf` filled.
inline const float *loadF32(const float *src, int64_t, float *) { return src; }
template <typename T>
const float *loadF32(const T *src, int64_t n, float *buf) {
  toFloat(src, buf, n);
  return buf;
}

/// Where fp32 results for `dst` are written before storeF32: dst itself for
/// f32, else `buf`.
inline float *outF32(float *dst, float *) { return dst; }
template <typename T>
float *outF32(T *, float *buf) {
  return buf;
}

/// Completes a write started at outF32(dst, buf).
inline void storeF32(const float *, float *, int64_t) {}
template <typename T>
void storeF32(const float *buf, T *dst, int64_t n) {
  fromFloat(buf, dst, n);
}

//===----------------------------------------------------------------------===//
// Dispatch
//===----------------------------------------------------------------------===//

inline int64_t dtypeSize(int32_t dtype) {
  switch (dtype) {
  case ZRT_F32:
    return 4;
  case ZRT_BF16:
  case ZRT_F16:
    return 2;
  }
  fatal("unknown float dtype %d", int(dtype));
}

/// Calls fn(T{}) with the storage type of `dtype`.
template <typename Fn>
void dispatchFloat(int32_t dtype, Fn &&fn) {
  switch (dtype) {
  case ZRT_F32:
    fn(float());
    return;
  case ZRT_BF16:
    fn(BF16());
    return;
  case ZRT_F16:
    fn(F16());
    return;
  }
  fatal("unknown float dtype %d", int(dtype));
}

/// Calls fn(I{}) with the integer type of an id or label buffer.
template <typename Fn>
void dispatchIndex(int32_t type, Fn &&fn) {
  switch (type) {
  case ZRT_I32:
    fn(int32_t());
    return;
  case ZRT_I64:
    fn(int64_t());
    return;
  }
  fatal("unknown index type %d", int(type));
}

} // namespace zrt

#endif // ZERO_RT_TYPES_H
