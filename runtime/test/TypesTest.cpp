//===- TypesTest.cpp - bf16 and f16 conversions ---------------------------===//
//
// Part of the zero-mlir project.
//
// The conversions are checked against their definitions computed in double:
// every 16-bit pattern widens exactly, and narrowing picks the nearest
// representable value with ties to even, saturating to infinity and keeping
// NaN. The vectorized block paths (through zrt_cast) must agree bit for bit
// with the scalar ones, and the software f16 path with the F16C one.
//
//===----------------------------------------------------------------------===//

#include "Support/Types.h"
#include "TestUtil.h"

#include <limits>

using namespace zrt_test;

namespace {

uint32_t bitsOf(float x) { return zrt::floatBits(x); }

/// Value of an f16 bit pattern from its definition.
double f16Value(uint16_t h) {
  int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  double mag =
      exp == 0 ? std::ldexp(mant, -24) : std::ldexp(1024 + mant, exp - 25);
  return sign ? -mag : mag;
}

/// The nearest f16 value (or +-inf from 65520 on), ties to even, by a
/// search over the ordered finite patterns in double: the definition of
/// round-to-nearest-even.
uint16_t f16Nearest(float x) {
  uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  double a = std::fabs(double(x));
  if (a >= 65520.0)
    return sign | 0x7c00;
  uint16_t lo = 0, hi = 0x7bff; // largest pattern with value <= a
  while (lo < hi) {
    uint16_t mid = uint16_t((lo + hi + 1) / 2);
    if (f16Value(mid) <= a)
      lo = mid;
    else
      hi = uint16_t(mid - 1);
  }
  if (lo == 0x7bff)
    return sign | lo;
  double dLo = a - f16Value(lo), dHi = f16Value(uint16_t(lo + 1)) - a;
  bool up = dHi < dLo || (dHi == dLo && (lo & 1));
  return sign | uint16_t(up ? lo + 1 : lo);
}

uint16_t bf16Nearest(float x) {
  uint32_t u = bitsOf(x);
  uint16_t lo = uint16_t(u >> 16), hi = uint16_t(lo + 1);
  double vlo = zrt::bitsFloat(uint32_t(lo) << 16);
  double vhi = zrt::bitsFloat(uint32_t(hi) << 16); // may be inf: fine
  double dlo = std::fabs(double(x) - vlo), dhi = std::fabs(vhi - double(x));
  if ((u & 0x7fffffff) >= 0x7f7f8000 && (u & 0x7fffffff) < 0x7f800000)
    return uint16_t((u >> 16) & 0x8000) | 0x7f80; // rounds past max: inf
  if (dlo < dhi || (dlo == dhi && (lo & 1) == 0))
    return lo;
  return hi;
}

TEST(TypesTest, Bf16WidensExactly) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = zrt_bf16_to_f32(uint16_t(h));
    EXPECT_EQ(bitsOf(f), h << 16);
  }
}

TEST(TypesTest, Bf16RoundsToNearestEven) {
  EXPECT_EQ(zrt_f32_to_bf16(zrt::bitsFloat(0x3f808000)), 0x3f80); // tie, even
  EXPECT_EQ(zrt_f32_to_bf16(zrt::bitsFloat(0x3f818000)), 0x3f82); // tie, up
  EXPECT_EQ(zrt_f32_to_bf16(zrt::bitsFloat(0x3f808001)), 0x3f81);
  EXPECT_EQ(zrt_f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(zrt_f32_to_bf16(-INFINITY), 0xff80);
  EXPECT_EQ(zrt_f32_to_bf16(zrt::bitsFloat(0x00000001)), 0x0000); // subnormal
  EXPECT_EQ(zrt_f32_to_bf16(zrt::bitsFloat(0x00018000)), 0x0002); // tie, even
  // NaN stays NaN, with its sign, even when only low payload bits are set.
  for (uint32_t nan : {0x7fc00000u, 0x7f800001u, 0xff800001u, 0x7fffffffu}) {
    uint16_t h = zrt_f32_to_bf16(zrt::bitsFloat(nan));
    EXPECT_TRUE(std::isnan(zrt_bf16_to_f32(h))) << std::hex << nan;
    EXPECT_EQ(h >> 15, nan >> 31);
  }
  std::mt19937 rng(3);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = bits(rng);
    if ((u & 0x7fffffff) > 0x7f800000)
      continue;
    float x = zrt::bitsFloat(u);
    ASSERT_EQ(zrt_f32_to_bf16(x), bf16Nearest(x)) << std::hex << u;
  }
}

TEST(TypesTest, F16WidensExactly) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = zrt_f16_to_f32(uint16_t(h));
    float soft = zrt::f16ToFloatSoft(uint16_t(h));
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) {
      EXPECT_TRUE(std::isnan(f));
      EXPECT_EQ(bitsOf(f), bitsOf(soft)) << std::hex << h;
      continue;
    }
    EXPECT_EQ(double(f), (h & 0x7c00) == 0x7c00
                             ? (h >> 15 ? -INFINITY : INFINITY)
                             : f16Value(uint16_t(h)))
        << std::hex << h;
    EXPECT_EQ(bitsOf(f), bitsOf(soft)) << std::hex << h;
  }
}

TEST(TypesTest, F16RoundsToNearestEven) {
  EXPECT_EQ(zrt_f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(zrt_f32_to_f16(65519.99f), 0x7bff);
  EXPECT_EQ(zrt_f32_to_f16(65520.0f), 0x7c00); // tie rounds to even: inf
  EXPECT_EQ(zrt_f32_to_f16(-1e10f), 0xfc00);
  EXPECT_EQ(zrt_f32_to_f16(0x1p-24f), 0x0001);
  EXPECT_EQ(zrt_f32_to_f16(0x1p-25f), 0x0000);        // tie to even (zero)
  EXPECT_EQ(zrt_f32_to_f16(0x1.8p-24f), 0x0002);      // tie to even (2)
  EXPECT_EQ(zrt_f32_to_f16(0x1.000002p-25f), 0x0001); // just above the tie
  EXPECT_EQ(zrt_f32_to_f16(0x1.ffcp-15f), 0x0400);    // rounds up to normal
  EXPECT_TRUE(std::isnan(zrt_f16_to_f32(zrt_f32_to_f16(NAN))));
  // Every f16 value round-trips, and midpoints between neighbours go even.
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    float x = zrt_f16_to_f32(uint16_t(h));
    ASSERT_EQ(zrt_f32_to_f16(x), h);
    ASSERT_EQ(zrt_f32_to_f16(-x), h | 0x8000);
    if (h + 1 < 0x7c00) {
      float mid =
          float((f16Value(uint16_t(h)) + f16Value(uint16_t(h + 1))) / 2);
      ASSERT_EQ(zrt_f32_to_f16(mid), (h & 1) ? h + 1 : h) << std::hex << h;
      ASSERT_EQ(zrt::floatToF16Soft(mid), (h & 1) ? h + 1 : h);
    }
  }
  // Random floats in and around the f16 range against the definition, and
  // the software path against the hardware one everywhere.
  std::mt19937 rng(5);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    float x = zrt::bitsFloat(0x30000000u + bits(rng) % 0x18000000u);
    ASSERT_EQ(zrt_f32_to_f16(x), f16Nearest(x)) << x;
  }
  for (int i = 0; i < 500000; ++i) {
    float x = zrt::bitsFloat(bits(rng));
    uint16_t hw = zrt_f32_to_f16(x), sw = zrt::floatToF16Soft(x);
    if (std::isnan(x))
      ASSERT_TRUE(std::isnan(zrt_f16_to_f32(hw)) &&
                  std::isnan(zrt_f16_to_f32(sw)));
    else
      ASSERT_EQ(hw, sw) << std::hex << bitsOf(x);
  }
}

TEST(TypesTest, BlockConversionsMatchScalar) {
  // Every 16-bit pattern through the vector paths, both directions.
  int64_t n = 0x10000;
  std::vector<uint16_t> all(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    all[i] = uint16_t(i);
  std::vector<float> wide(static_cast<size_t>(n));
  for (int32_t dtype : {ZRT_BF16, ZRT_F16}) {
    zrt_cast(dtype, all.data(), ZRT_F32, wide.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      float want =
          dtype == ZRT_BF16 ? zrt_bf16_to_f32(all[i]) : zrt_f16_to_f32(all[i]);
      ASSERT_EQ(bitsOf(wide[i]), bitsOf(want)) << dtypeName(dtype) << " " << i;
    }
  }
  std::mt19937 rng(11);
  std::uniform_int_distribution<uint32_t> bits;
  std::vector<float> floats(static_cast<size_t>(n));
  for (float &f : floats)
    f = zrt::bitsFloat(bits(rng));
  std::vector<uint16_t> narrow(static_cast<size_t>(n));
  for (int32_t dtype : {ZRT_BF16, ZRT_F16}) {
    zrt_cast(ZRT_F32, floats.data(), dtype, narrow.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      uint16_t want = dtype == ZRT_BF16 ? zrt_f32_to_bf16(floats[i])
                                        : zrt_f32_to_f16(floats[i]);
      ASSERT_EQ(narrow[i], want) << dtypeName(dtype) << " " << i;
    }
  }
}

} // namespace
