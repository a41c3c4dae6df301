//===- CudaKernelsTestUtil.h - The CUDA kernel tests' fixture ---*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// What zrt-cuda-kernels-test's files share (KernelsTest.cpp,
// NormLossTest.cpp, MoeQuantizeTest.cpp): the per-dtype fixture, one
// instantiation of it for every dtype (in KernelsTest.cpp), and the
// helpers that compare the backends. KernelsTest.cpp says how close.
//
//===----------------------------------------------------------------------===//

#ifndef ZRT_CUDA_TEST_KERNELS_TEST_UTIL_H
#define ZRT_CUDA_TEST_KERNELS_TEST_UTIL_H

#include "CudaTestUtil.h"
#include "TestUtil.h"
#include "zero_rt/quantize.h"
#include "zero_rt/scratch.h"
#include "zero_rt/zrt.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace zrt::cuda::test {

using zrt_test::Buffer;
using zrt_test::dtypeName;
using zrt_test::randomBuffer;

constexpr double kF32 = 0x1p-24;

inline int64_t elemSize(int32_t dtype) { return zrt_dtype_size(dtype); }

/// Waits for everything on the device: cudaMemcpy runs on the legacy
/// stream, which does not order the non-blocking compute stream.
inline void settle() { ZRT_CUDA_CHECK(cudaDeviceSynchronize()); }

/// A device copy of host ids or labels.
template <typename T>
std::unique_ptr<DeviceBuffer> deviceCopy(const std::vector<T> &host) {
  auto d = std::make_unique<DeviceBuffer>(host);
  settle();
  return d;
}

/// Bitwise equality, except that any NaN matches any NaN.
inline void expectSame(const Buffer &got, const Buffer &want,
                       const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int64_t size = elemSize(got.dtype);
  int failures = 0;
  for (int64_t i = 0; i < got.size(); ++i) {
    const char *g = static_cast<const char *>(got.data()) + i * size;
    const char *w = static_cast<const char *>(want.data()) + i * size;
    if (std::memcmp(g, w, size_t(size)) == 0 ||
        (std::isnan(got.get(i)) && std::isnan(want.get(i))))
      continue;
    ADD_FAILURE() << what << ": element " << i << " is " << got.get(i)
                  << ", expected " << want.get(i);
    if (++failures == 5)
      return;
  }
}

/// Exact equality of the bits (two runs, or two code paths, of the GPU).
inline void expectBitwise(const Buffer &a, const Buffer &b,
                          const std::string &what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  EXPECT_EQ(
      0, std::memcmp(a.data(), b.data(), size_t(a.size() * elemSize(a.dtype))))
      << what << " is not bitwise reproducible";
}

/// |got - want| <= atol + rtol |want|, plus one ulp of a 16-bit result.
inline void expectNear(const Buffer &got, const Buffer &want, double rtol,
                       double atol, const std::string &what) {
  bool f32 = got.dtype == ZRT_F32;
  double ulpRel = f32 ? 0.0 : 2 * zrt_test::unitRoundoff(got.dtype);
  double ulpAbs = f32 ? 0.0 : 2 * zrt_test::subnormalRoundoff(got.dtype);
  zrt_test::expectClose(got.values(), want.values(), rtol + ulpRel,
                        atol + ulpAbs, what);
}

inline double maxAbs(const Buffer &b) {
  double m = 0;
  for (int64_t i = 0; i < b.size(); ++i)
    m = std::max(m, std::fabs(b.get(i)));
  return m;
}

/// The largest 1/sqrt(biased variance + eps) over the rows of x, in double.
inline double maxRstd(const Buffer &x, int64_t rows, int64_t cols, double eps) {
  double m = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t c = 0; c < cols; ++c)
      mean += x.get(r * cols + c);
    mean /= double(cols);
    for (int64_t c = 0; c < cols; ++c)
      var += (x.get(r * cols + c) - mean) * (x.get(r * cols + c) - mean);
    m = std::max(m, 1.0 / std::sqrt(var / double(cols) + eps));
  }
  return m;
}

inline std::string label(const char *kernel, int32_t dtype, int64_t a,
                         int64_t b = -1, int64_t offset = 0) {
  std::string s =
      std::string(kernel) + " " + dtypeName(dtype) + " " + std::to_string(a);
  if (b >= 0)
    s += "x" + std::to_string(b);
  if (offset)
    s += " misaligned";
  return s;
}

class CudaKernelsTest : public ::testing::TestWithParam<int32_t> {
protected:
  int32_t dtype() const { return GetParam(); }
  std::mt19937 rng{2024};
};

/// The scratch peak a kernel causes (it must be freed when it returns).
template <typename Fn>
int64_t scratchOf(const Fn &kernel) {
  ZRT_CUDA_CHECK(cudaDeviceSynchronize());
  zrt_memory_reset_peak();
  kernel();
  EXPECT_EQ(zrt_scratch_bytes_in_use(), 0);
  ZRT_CUDA_CHECK(cudaDeviceSynchronize());
  return zrt_scratch_peak_bytes();
}

} // namespace zrt::cuda::test

#endif // ZRT_CUDA_TEST_KERNELS_TEST_UTIL_H
