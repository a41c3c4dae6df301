//===- DeviceCuda.cpp - Tensor memory of the CUDA backend -----------------===//
//
// Part of the zero-mlir project.
//
// Arenas are device memory; the driver reaches them through copies on the
// compute stream, so they are ordered after the step's kernels. Copies from
// pageable host memory have consumed their source when they return, so the
// driver may reuse its staging buffers at once.
//
//===----------------------------------------------------------------------===//

#include "CommCuda.h"
#include "CudaKernels.h"
#include "CudaSupport.h"
#include "Device.h"
#include "Support.h"
#include "Types.h"

#include <vector>

using namespace zrt;
using namespace zrt::cuda;

const char *device::backendName() { return "cuda"; }

void device::initialize(int localRank) { initializeWorld(localRank); }

void *device::allocate(int64_t bytes) {
  void *ptr = nullptr;
  cudaError_t err = cudaMalloc(&ptr, size_t(bytes > 0 ? bytes : 1));
  if (err != cudaSuccess)
    fatal("cannot allocate %lld bytes of GPU memory: %s", (long long)bytes,
          cudaGetErrorString(err));
  return ptr;
}

void device::release(void *ptr) {
  if (ptr) {
    ZRT_CUDA_CHECK(cudaDeviceSynchronize());
    ZRT_CUDA_CHECK(cudaFree(ptr));
  }
}

void device::upload(void *dst, const void *src, int64_t bytes) {
  if (bytes > 0)
    ZRT_CUDA_CHECK(cudaMemcpyAsync(dst, src, size_t(bytes),
                                   cudaMemcpyHostToDevice, computeStream()));
}

void device::download(void *dst, const void *src, int64_t bytes) {
  if (bytes <= 0)
    return;
  ZRT_CUDA_CHECK(cudaMemcpyAsync(dst, src, size_t(bytes),
                                 cudaMemcpyDeviceToHost, computeStream()));
  ZRT_CUDA_CHECK(cudaStreamSynchronize(computeStream()));
}

void device::zero(void *dst, int64_t bytes) {
  if (bytes > 0)
    ZRT_CUDA_CHECK(cudaMemsetAsync(dst, 0, size_t(bytes), computeStream()));
}

void device::uploadCast(const float *src, int32_t dtype, void *dst,
                        int64_t n) {
  if (dtype == ZRT_F32) {
    upload(dst, src, n * 4);
    return;
  }
  if (dtype != ZRT_BF16 && dtype != ZRT_F16)
    badDtype("uploadCast", dtype);
  std::vector<uint16_t> bits(size_t(n > 0 ? n : 0));
  for (int64_t i = 0; i < n; ++i)
    bits[size_t(i)] =
        dtype == ZRT_BF16 ? floatToBf16(src[i]) : floatToF16(src[i]);
  upload(dst, bits.data(), n * 2);
}

void device::downloadCast(const void *src, int32_t dtype, float *dst,
                          int64_t n) {
  if (dtype == ZRT_F32) {
    download(dst, src, n * 4);
    return;
  }
  if (dtype != ZRT_BF16 && dtype != ZRT_F16)
    badDtype("downloadCast", dtype);
  std::vector<uint16_t> bits(size_t(n > 0 ? n : 0));
  download(bits.data(), src, n * 2);
  for (int64_t i = 0; i < n; ++i)
    dst[i] = dtype == ZRT_BF16 ? bf16ToFloat(bits[size_t(i)])
                               : f16ToFloat(bits[size_t(i)]);
}
