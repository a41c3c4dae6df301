//===- Half.h - bf16 and f16 scalar conversions -----------------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// The exact conversions of 16-bit storage values, for both backends: round
// to nearest even, NaN kept (quieted), infinities kept. The CPU converts
// with them (f16 through F16C where compiled for it, Types.h), the CUDA
// backend on the host (uploads, downloads, tests). Device kernels convert
// with the hardware's cvt instructions instead (CudaSupport.h): the same
// values, one instruction, but NaNs come out canonical rather than with
// their payload.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_HALF_H
#define ZERO_RT_HALF_H

#include "Kernels/HostDevice.h"

#include <cstdint>

namespace zrt {

ZRT_HOST_DEVICE inline float bf16ToFloat(uint16_t h) {
  return bitsFloat(uint32_t(h) << 16);
}

ZRT_HOST_DEVICE inline uint16_t floatToBf16(float x) {
  uint32_t u = floatBits(x);
  // A NaN keeps its sign and top payload bits and is made quiet so that the
  // truncation cannot turn it into an infinity.
  uint32_t nan = (u >> 16) | 0x40u;
  uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return uint16_t((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

/// IEEE binary16 conversions in software (the reference for the F16C path
/// and the fallback without it). NaNs are quieted as F16C does.
ZRT_HOST_DEVICE inline float f16ToFloatSoft(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f)
    return bitsFloat(sign | 0x7f800000u | (mant << 13) |
                     (mant ? 0x400000u : 0));
  if (exp == 0) {
    float f = float(mant) * 0x1p-24f; // Exact: zero or subnormal.
    return sign ? -f : f;
  }
  return bitsFloat(sign | ((exp + 112) << 23) | (mant << 13));
}

ZRT_HOST_DEVICE inline uint16_t floatToF16Soft(float x) {
  uint32_t u = floatBits(x);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) // NaN
    return uint16_t(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u) // >= 65520 rounds (ties to even) to infinity.
    return uint16_t(sign | 0x7c00u);
  if (a >= 0x38800000u) { // Normal half: round at bit 13, rebias by 112.
    uint32_t r = a + 0xfffu + ((a >> 13) & 1u) - (112u << 23);
    return uint16_t(sign | (r >> 13));
  }
  uint32_t e = a >> 23;
  if (e < 102) // Below 2^-25: rounds to zero.
    return uint16_t(sign);
  // Subnormal half: the value in units of 2^-24, rounded to nearest even.
  uint32_t m = (a & 0x7fffffu) | 0x800000u;
  uint32_t shift = 126 - e;
  uint32_t q = m >> shift;
  uint32_t rem = m & ((1u << shift) - 1);
  uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1u)))
    ++q;
  return uint16_t(sign | q);
}

} // namespace zrt

#endif // ZERO_RT_HALF_H
