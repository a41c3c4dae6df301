//===- CudaSupport.cpp - Streams, errors and scratch of the CUDA backend --===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "Support/CudaSupport.h"
#include "Device/Memory.h"
#include "Support/CudaGraphs.h"
#include "Support/Support.h"

#include <mutex>

using namespace zrt;
using namespace zrt::cuda;

namespace {

struct DeviceState {
  std::once_flag once;
  cudaStream_t stream = nullptr;
  int sms = 1;
  int *errorHost = nullptr, *errorDevice = nullptr;
};

DeviceState &state() {
  static DeviceState s;
  return s;
}

void initialize() {
  DeviceState &s = state();
  std::call_once(s.once, [&] {
    int device = 0;
    ZRT_CUDA_CHECK(cudaGetDevice(&device));
    ZRT_CUDA_CHECK(
        cudaDeviceGetAttribute(&s.sms, cudaDevAttrMultiProcessorCount, device));
    // Non-blocking: the legacy default stream must not serialize it with the
    // communication stream.
    ZRT_CUDA_CHECK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
    ZRT_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void **>(&s.errorHost),
                                 sizeof(int), cudaHostAllocMapped));
    *s.errorHost = kNoError;
    ZRT_CUDA_CHECK(cudaHostGetDevicePointer(
        reinterpret_cast<void **>(&s.errorDevice), s.errorHost, 0));
    // Scratch comes from the stream-ordered pool; keeping freed blocks in
    // the pool makes each kernel's allocation a pointer bump after the
    // first step.
    cudaMemPool_t pool;
    ZRT_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device));
    uint64_t keep = UINT64_MAX;
    ZRT_CUDA_CHECK(
        cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  });
}

} // namespace

void zrt::cuda::cudaFatal(cudaError_t err, const char *expr, const char *file,
                          int line) {
  fatal("CUDA: %s failed: %s (%s:%d)", expr, cudaGetErrorString(err), file,
        line);
}

void zrt::cuda::checkLaunch(const char *kernel) {
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    fatal("%s: CUDA launch failed: %s", kernel, cudaGetErrorString(err));
}

cudaStream_t zrt::cuda::computeStream() {
  initialize();
  return state().stream;
}

int zrt::cuda::multiprocessorCount() {
  initialize();
  return state().sms;
}

int *zrt::cuda::deviceErrorWord() {
  initialize();
  return state().errorDevice;
}

void zrt::cuda::checkDeviceErrors() {
  initialize();
  int code = *const_cast<volatile int *>(state().errorHost);
  if (code == kIdOutOfRange)
    fatal("embedding: an id is out of range of the table");
  if (code == kLabelOutOfRange)
    fatal("softmax_cross_entropy: a label is out of range of the classes");
  if (code != kNoError)
    fatal("a CUDA kernel reported error %d", code);
}

void zrt::cuda::badDtype(const char *kernel, int32_t dtype) {
  fatal("%s: unknown dtype %d", kernel, int(dtype));
}

void zrt::cuda::badIndexType(const char *kernel, int32_t type) {
  fatal("%s: unknown index type %d", kernel, int(type));
}

DeviceScratch::DeviceScratch(int64_t bytes) : bytes(bytes) {
  if (bytes <= 0) {
    this->bytes = 0;
    return;
  }
  // An allocation would join a captured graph as a node that
  // cudaGraphExecUpdate cannot update.
  graphs::pause();
  ZRT_CUDA_CHECK(cudaMallocAsync(&ptr, size_t(bytes), computeStream()));
  accountScratch(bytes);
}

DeviceScratch::~DeviceScratch() {
  if (!ptr)
    return;
  // Stream order keeps the memory alive until the kernels that use it ran.
  graphs::pause();
  cudaFreeAsync(ptr, computeStream());
  accountScratch(-bytes);
}
