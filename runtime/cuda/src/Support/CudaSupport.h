//===- CudaSupport.h - Streams, errors and dtypes of the CUDA backend -----===//
//
// Part of the zero-mlir project.
//
// Every kernel of the CUDA backend runs on one compute stream per process,
// asynchronously: host functions only enqueue work, so the generated step
// function runs ahead of the GPU and a collective's completion becomes a
// stream dependency (see Comm.cpp), never a host wait.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_CUDA_SUPPORT_H
#define ZERO_RT_CUDA_SUPPORT_H

#include "zero_rt/zrt.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace zrt {
namespace cuda {

/// Prints "zrt: error: CUDA: <call> failed: <reason> (<file>:<line>)" and
/// aborts, as every runtime error does.
[[noreturn]] void cudaFatal(cudaError_t err, const char *expr, const char *file,
                            int line);

#define ZRT_CUDA_CHECK(expr)                                                   \
  do {                                                                         \
    cudaError_t zrtErr_ = (expr);                                              \
    if (zrtErr_ != cudaSuccess)                                                \
      ::zrt::cuda::cudaFatal(zrtErr_, #expr, __FILE__, __LINE__);              \
  } while (0)

/// Checks that the last launch was accepted (launch errors only: kernels
/// run asynchronously).
void checkLaunch(const char *kernel);

/// The stream all kernels run on; created on first use on the current
/// device.
cudaStream_t computeStream();
/// Multiprocessors of the current device (for grid sizes).
int multiprocessorCount();

/// Blocks of `threads` for a grid-stride loop over n items: enough to fill
/// the device (a few waves), never more than the items need.
inline unsigned gridFor(int64_t n, int threads = 256) {
  int64_t need = (n + threads - 1) / threads;
  int64_t cap = int64_t(multiprocessorCount()) * 32;
  if (need > cap)
    need = cap;
  return unsigned(need < 1 ? 1 : need);
}

/// Stream-ordered device scratch of a kernel (cudaMallocAsync on the compute
/// stream, freed in stream order). Accounted like the CPU backend's heap
/// scratch, so the measured peak still compares with the plan: kernels must
/// allocate exactly what zero_rt/scratch.h says.
class DeviceScratch {
public:
  explicit DeviceScratch(int64_t bytes);
  ~DeviceScratch();
  DeviceScratch(const DeviceScratch &) = delete;
  DeviceScratch &operator=(const DeviceScratch &) = delete;

  template <typename T = void>
  T *as() const {
    return static_cast<T *>(ptr);
  }
  int64_t size() const { return bytes; }

private:
  void *ptr = nullptr;
  int64_t bytes = 0;
};

/// Errors kernels find in data (ids or labels out of range) cannot abort on
/// the device: the kernel skips the element and stores the code (first one
/// wins) in a word of mapped host memory, which the host reads whenever it
/// synchronizes (checkDeviceErrors) and turns into the usual fatal error.
enum DeviceError : int {
  kNoError = 0,
  kIdOutOfRange = 1,
  kLabelOutOfRange = 2
};
/// The device pointer of that word.
int *deviceErrorWord();
/// Aborts with a message if a kernel reported an error; call after a
/// synchronization.
void checkDeviceErrors();
#ifdef __CUDACC__
__device__ inline void reportDeviceError(int *word, int code) {
  atomicCAS(word, 0, code);
}
#endif

//===----------------------------------------------------------------------===//
// Storage types: float, __nv_bfloat16, __half; arithmetic is fp32.
//===----------------------------------------------------------------------===//

#ifdef __CUDACC__
__host__ __device__ inline float toF32(float x) { return x; }
__device__ inline float toF32(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ inline float toF32(__half x) { return __half2float(x); }

/// Round to nearest even (as the CPU backend).
template <typename T>
__device__ inline T fromF32(float x);
template <>
__device__ inline float fromF32<float>(float x) {
  return x;
}
template <>
__device__ inline __nv_bfloat16 fromF32<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ inline __half fromF32<__half>(float x) {
  return __float2half_rn(x);
}

#endif // __CUDACC__

/// Calls fn(T{}) with the storage type of a zrt_dtype; aborts on an unknown
/// one, naming `kernel`.
[[noreturn]] void badDtype(const char *kernel, int32_t dtype);
template <typename Fn>
void dispatch(int32_t dtype, const char *kernel, Fn &&fn) {
  switch (dtype) {
  case ZRT_F32:
    fn(float());
    return;
  case ZRT_BF16:
    fn(__nv_bfloat16());
    return;
  case ZRT_F16:
    fn(__half());
    return;
  default:
    badDtype(kernel, dtype);
  }
}

/// Id and label buffers: int32_t or int64_t.
[[noreturn]] void badIndexType(const char *kernel, int32_t type);
template <typename Fn>
void dispatchIndex(int32_t type, const char *kernel, Fn &&fn) {
  switch (type) {
  case ZRT_I32:
    fn(int32_t());
    return;
  case ZRT_I64:
    fn(int64_t());
    return;
  default:
    badIndexType(kernel, type);
  }
}

} // namespace cuda
} // namespace zrt

#endif // ZERO_RT_CUDA_SUPPORT_H
