//===- CudaTestUtil.h - Helpers of the CUDA backend's tests -----*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// The GPU tests compare each CUDA kernel with the CPU backend's zrt_* kernel
// on the same inputs. Without a usable GPU they skip with the reason.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_CUDA_TEST_UTIL_H
#define ZERO_RT_CUDA_TEST_UTIL_H

#include "Kernels/CudaKernels.h"
#include "Support/CudaSupport.h"
#include "TestUtil.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace zrt {
namespace cuda {
namespace test {

/// Empty when a GPU is usable, else why not.
inline std::string gpuUnavailableReason() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess)
    return std::string("no usable CUDA GPU (") + cudaGetErrorString(err) + ")";
  if (count == 0)
    return "no CUDA GPU";
  return "";
}

#define ZRT_REQUIRE_GPU()                                                      \
  do {                                                                         \
    std::string why = ::zrt::cuda::test::gpuUnavailableReason();               \
    if (!why.empty())                                                          \
      GTEST_SKIP() << why;                                                     \
  } while (0)

/// A device buffer of `bytes` bytes, freed on destruction.
class DeviceBuffer {
public:
  explicit DeviceBuffer(size_t bytes) : bytes(bytes) {
    ZRT_CUDA_CHECK(cudaMalloc(&ptr, bytes ? bytes : 1));
  }
  template <typename T>
  explicit DeviceBuffer(const std::vector<T> &host)
      : DeviceBuffer(host.size() * sizeof(T)) {
    upload(host);
  }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;

  template <typename T = void>
  T *get() const {
    return static_cast<T *>(ptr);
  }
  template <typename T>
  void upload(const std::vector<T> &host) {
    ZRT_CUDA_CHECK(cudaMemcpy(ptr, host.data(), host.size() * sizeof(T),
                              cudaMemcpyHostToDevice));
    // A pageable cudaMemcpy may return before its DMA lands, and the legacy
    // stream does not order the non-blocking compute stream.
    ZRT_CUDA_CHECK(cudaDeviceSynchronize());
  }
  /// Waits for the compute stream, then copies everything back.
  template <typename T>
  std::vector<T> download() const {
    ZRT_CUDA_CHECK(cudaStreamSynchronize(computeStream()));
    std::vector<T> host(bytes / sizeof(T));
    ZRT_CUDA_CHECK(cudaMemcpy(host.data(), ptr, host.size() * sizeof(T),
                              cudaMemcpyDeviceToHost));
    return host;
  }

private:
  void *ptr = nullptr;
  size_t bytes = 0;
};

/// A device copy of a host buffer that starts `offset` elements into its
/// allocation: cudaMalloc aligns to 256 bytes, so offset 1 puts the data off
/// every vector alignment. 8 more elements follow the data.
class DeviceArray {
public:
  DeviceArray(int32_t dtype, int64_t n, int64_t offset = 0)
      : dtype(dtype), n(n), offset(offset),
        mem(size_t((n + offset + 8) * zrt_dtype_size(dtype))) {}
  explicit DeviceArray(const zrt_test::Buffer &host, int64_t offset = 0)
      : DeviceArray(host.dtype, host.size(), offset) {
    upload(host);
  }

  void *get() const {
    return mem.get<char>() + offset * zrt_dtype_size(dtype);
  }
  template <typename T>
  T *as() const {
    return static_cast<T *>(get());
  }
  void upload(const zrt_test::Buffer &host) {
    ZRT_CUDA_CHECK(
        cudaMemcpy(get(), host.data(), bytes(), cudaMemcpyHostToDevice));
    // A pageable cudaMemcpy may return before its DMA lands, and the legacy
    // stream does not order the non-blocking compute stream.
    ZRT_CUDA_CHECK(cudaDeviceSynchronize());
  }
  /// Waits for the compute stream first.
  zrt_test::Buffer download() const {
    ZRT_CUDA_CHECK(cudaStreamSynchronize(computeStream()));
    zrt_test::Buffer host(dtype, n);
    ZRT_CUDA_CHECK(
        cudaMemcpy(host.data(), get(), bytes(), cudaMemcpyDeviceToHost));
    return host;
  }

private:
  size_t bytes() const { return size_t(n * zrt_dtype_size(dtype)); }

  int32_t dtype;
  int64_t n, offset;
  DeviceBuffer mem;
};

} // namespace test
} // namespace cuda
} // namespace zrt

#endif // ZERO_RT_CUDA_TEST_UTIL_H
