//===- DeviceCuda.cpp - Tensor memory of the CUDA backend -----------------===//
//
// Part of the zero-mlir project.
//
// Arenas are device memory; the driver reaches them through copies on the
// compute stream, so they are ordered after the step's kernels. Copies from
// pageable host memory have consumed their source when they return, so the
// driver may reuse its staging buffers at once. With --cuda-graphs every
// function here that cannot join a captured graph (an allocation, a copy
// from or to pageable memory, a wait for the device) launches the capture
// so far first (Support/CudaGraphs.h).
//
//===----------------------------------------------------------------------===//

#include "Collectives/CommCuda.h"
#include "Device/Device.h"
#include "Device/Memory.h"
#include "Kernels/CudaKernels.h"
#include "Optimizer/Adafactor.h"
#include "Optimizer/Muon.h"
#include "Program/Manifest.h"
#include "Support/CudaGraphs.h"
#include "Support/CudaSupport.h"
#include "Support/Support.h"
#include "Support/Types.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

using namespace zrt;
using namespace zrt::cuda;

namespace {

/// Pinned host slots the micro steps' losses are copied into.
struct LossSlots {
  float *host = nullptr;
  int32_t capacity = 0;
};

LossSlots &lossSlots() {
  static LossSlots s;
  return s;
}

} // namespace

const char *device::backendName() { return "cuda"; }

void device::initialize(int localRank) { initializeWorld(localRank); }

std::string device::selectAttentionPrecision(const std::string &precision) {
  if (!precision.empty() && precision != "fp32" && precision != "16bit")
    return "attention precision '" + precision + "': expected fp32 or 16bit";
  cuda::setAttentionSplitProbs(precision != "16bit");
  return "";
}

std::string device::selectGraphs(bool on) {
  graphs::enable(on);
  return "";
}

void device::beginStep(zrt_ctx &) { graphs::beginStep(); }

void *device::allocate(int64_t bytes) {
  graphs::pause();
  void *ptr = nullptr;
  cudaError_t err = cudaMalloc(&ptr, size_t(bytes > 0 ? bytes : 1));
  if (err != cudaSuccess)
    throw OutOfMemory("cannot allocate " + std::to_string(bytes) +
                      " bytes of GPU memory: " + cudaGetErrorString(err));
  return ptr;
}

void device::release(void *ptr) {
  if (ptr) {
    graphs::pause();
    ZRT_CUDA_CHECK(cudaDeviceSynchronize());
    ZRT_CUDA_CHECK(cudaFree(ptr));
  }
}

// The pinned host arena holds the O_DIRECT swap buffers of NVMe offload,
// which need block-aligned addresses. cudaHostAlloc does not promise that:
// on an H100 a 212 KB arena came back off a 4096-byte boundary and the first
// parameter write was refused. So the pages are allocated block-aligned, as
// the CPU backend's, and then pinned.
void *device::allocateHost(int64_t bytes) {
  graphs::pause();
  void *ptr = tryAlignedAlloc(bytes > 0 ? bytes : 1, ZRT_NVME_BLOCK_BYTES);
  if (!ptr)
    throw OutOfMemory("cannot allocate " + std::to_string(bytes) +
                      " bytes of host memory");
  cudaError_t err = cudaHostRegister(ptr, size_t(bytes > 0 ? bytes : 1),
                                     cudaHostRegisterDefault);
  if (err != cudaSuccess) {
    std::free(ptr);
    throw OutOfMemory("cannot pin " + std::to_string(bytes) +
                      " bytes of host memory: " + cudaGetErrorString(err));
  }
  return ptr;
}

void device::releaseHost(void *ptr) {
  if (ptr) {
    graphs::pause();
    ZRT_CUDA_CHECK(cudaDeviceSynchronize());
    ZRT_CUDA_CHECK(cudaHostUnregister(ptr));
    std::free(ptr);
  }
}

namespace {
/// The stream of an offloaded optimizer's device-host copies, so that they
/// overlap the compute stream (a copy engine of its own).
cudaStream_t copyStream() {
  static cudaStream_t stream = [] {
    cudaStream_t s;
    ZRT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return s;
  }();
  return stream;
}
} // namespace

std::function<void()> device::transfer(void *dst, const void *src,
                                       int64_t bytes, bool toHost) {
  if (bytes <= 0)
    return nullptr;
  graphs::pause();
  // After the kernels enqueued so far (the gradients' reductions, the
  // host Adam's writes are host-side and already done).
  cudaEvent_t ready, done;
  ZRT_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  ZRT_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  ZRT_CUDA_CHECK(cudaEventRecord(ready, computeStream()));
  ZRT_CUDA_CHECK(cudaStreamWaitEvent(copyStream(), ready, 0));
  ZRT_CUDA_CHECK(cudaMemcpyAsync(
      dst, src, size_t(bytes),
      toHost ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice, copyStream()));
  ZRT_CUDA_CHECK(cudaEventRecord(done, copyStream()));
  ZRT_CUDA_CHECK(cudaEventDestroy(ready));
  return [done, toHost] {
    graphs::pause();
    // The host reads a download; later kernels read an upload, and the
    // host may overwrite its source only once it landed.
    if (toHost)
      ZRT_CUDA_CHECK(cudaEventSynchronize(done));
    else
      ZRT_CUDA_CHECK(cudaStreamWaitEvent(computeStream(), done, 0));
    ZRT_CUDA_CHECK(cudaEventSynchronize(done));
    ZRT_CUDA_CHECK(cudaEventDestroy(done));
  };
}

void device::upload(void *dst, const void *src, int64_t bytes) {
  graphs::pause();
  if (bytes > 0)
    ZRT_CUDA_CHECK(cudaMemcpyAsync(dst, src, size_t(bytes),
                                   cudaMemcpyHostToDevice, computeStream()));
}

void device::download(void *dst, const void *src, int64_t bytes) {
  if (bytes <= 0)
    return;
  graphs::pause();
  ZRT_CUDA_CHECK(cudaMemcpyAsync(dst, src, size_t(bytes),
                                 cudaMemcpyDeviceToHost, computeStream()));
  ZRT_CUDA_CHECK(cudaStreamSynchronize(computeStream()));
}

void device::zero(void *dst, int64_t bytes) {
  if (bytes > 0)
    ZRT_CUDA_CHECK(cudaMemsetAsync(dst, 0, size_t(bytes), computeStream()));
}

void device::uploadCast(const float *src, int32_t dtype, void *dst, int64_t n) {
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

/// cudaMemcpyAsync forbids overlapping ranges, so overlapping ones move in
/// stream-ordered pieces no longer than the distance between them (front
/// first when moving down, back first when moving up), each piece free of
/// overlap.
void device::move(void *dstV, const void *srcV, int64_t bytes) {
  char *dst = static_cast<char *>(dstV);
  const char *src = static_cast<const char *>(srcV);
  if (bytes <= 0 || dst == src)
    return;
  int64_t gap = dst > src ? dst - src : src - dst;
  if (gap >= bytes) {
    cuda::copy(dst, src, bytes);
    return;
  }
  if (dst < src) {
    for (int64_t at = 0; at < bytes; at += gap)
      cuda::copy(dst + at, src + at, std::min(gap, bytes - at));
  } else {
    for (int64_t end = bytes; end > 0; end -= gap) {
      int64_t at = std::max<int64_t>(0, end - gap);
      cuda::copy(dst + at, src + at, end - at);
    }
  }
}

void device::storeF32(float *dst, float value) {
  cuda::fill(ZRT_F32, dst, 1, double(value));
}

void device::finishStep(zrt_ctx &ctx) {
  std::vector<graphs::Launch> launches = graphs::endStep();
  ZRT_CUDA_CHECK(cudaStreamSynchronize(computeStream()));
  ZRT_CUDA_CHECK(cudaStreamSynchronize(commStream(ctx.comm)));
  checkDeviceErrors();
  const LossSlots &s = lossSlots();
  for (int32_t i = 0; i < ctx.lossCount && i < s.capacity; ++i)
    ctx.lossSum += double(s.host[i]);
  if (!ctx.tracing)
    return;
  auto us = [&](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double, std::micro>(t - ctx.traceStart)
        .count();
  };
  // The host's side of each graph launch: its update (or instantiation)
  // and the launch.
  for (const graphs::Launch &l : launches)
    ctx.trace.push_back({"cuda graph " + std::to_string(l.segment) + " (" +
                             std::to_string(l.nodes) + " nodes, " +
                             (l.instantiated ? "instantiated" : "updated") +
                             ")",
                         us(l.start), us(l.end) - us(l.start)});
}

/// The loss is copied to pinned memory asynchronously and summed by
/// finishStep.
void device::recordLoss(zrt_ctx &ctx, const float *loss) {
  LossSlots &s = lossSlots();
  // Outside any captured graph: the slots may move (below), and the host
  // reads them at finishStep.
  graphs::pause();
  if (ctx.lossCount >= s.capacity) {
    // Pending copies target the old slots: let them land first.
    ZRT_CUDA_CHECK(cudaStreamSynchronize(computeStream()));
    int32_t grown = std::max<int32_t>(64, 2 * s.capacity);
    float *host = nullptr;
    ZRT_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void **>(&host),
                                  size_t(grown) * sizeof(float)));
    for (int32_t i = 0; i < s.capacity; ++i)
      host[i] = s.host[i];
    if (s.host)
      ZRT_CUDA_CHECK(cudaFreeHost(s.host));
    s.host = host;
    s.capacity = grown;
  }
  ZRT_CUDA_CHECK(cudaMemcpyAsync(s.host + ctx.lossCount, loss, sizeof(float),
                                 cudaMemcpyDeviceToHost, computeStream()));
  ++ctx.lossCount;
}

void device::checkOverflow(int32_t dtype, const void *grad, int64_t n,
                           const float *lossScale, double divisor,
                           int32_t first, float *stats) {
  cuda::checkOverflow(dtype, grad, n, lossScale, divisor, first, stats);
}

void device::optimizerStep(const zrt_optimizer &optimizer,
                           const zrt_update &update, const float *lossScale,
                           double divisor) {
  cuda::optimizerStep(optimizer, update, lossScale, divisor);
}

void *device::allocateScratch(int64_t bytes) {
  if (bytes <= 0)
    return nullptr;
  graphs::pause();
  void *ptr = nullptr;
  ZRT_CUDA_CHECK(cudaMallocAsync(&ptr, size_t(bytes), computeStream()));
  accountScratch(bytes);
  return ptr;
}

void device::releaseScratch(void *ptr, int64_t bytes) {
  if (!ptr)
    return;
  // Stream order keeps the memory alive until the kernels that use it ran.
  graphs::pause();
  cudaFreeAsync(ptr, computeStream());
  accountScratch(-bytes);
}

void device::adafactorSums(int32_t dtype, const void *grad, const float *master,
                           const AdafactorShape &s, int64_t begin, int64_t end,
                           float gradScale, double *sums) {
  cuda::adafactorSums(dtype, grad, master, s, begin, end, gradScale, sums);
}

void device::adafactorFactors(const AdafactorShape &s,
                              const AdafactorConstants &k, float *rowVar,
                              float *colVar, double *sums) {
  cuda::adafactorFactors(s, k, rowVar, colVar, sums);
}

void device::adafactorUpdateSums(int32_t dtype, const void *grad,
                                 const AdafactorShape &s, int64_t begin,
                                 int64_t end, float gradScale,
                                 const AdafactorConstants &k,
                                 const float *rowVar, const float *colVar,
                                 float *variance, double *sums) {
  cuda::adafactorUpdateSums(dtype, grad, s, begin, end, gradScale, k, rowVar,
                            colVar, variance, sums);
}

void device::adafactorApply(int32_t dtype, const void *grad, float *master,
                            void *param, const AdafactorShape &s, int64_t begin,
                            int64_t end, float gradScale,
                            const AdafactorConstants &k, const float *rowVar,
                            const float *colVar, const float *variance,
                            const double *sums) {
  cuda::adafactorApply(dtype, grad, master, param, s, begin, end, gradScale, k,
                       rowVar, colVar, variance, sums);
}

void device::muon(int32_t dtype, const void *grad, float *master,
                  float *momentumBuffer, void *param, const int64_t matrix[3],
                  int64_t step, double lr, double momentum, double weightDecay,
                  int32_t nesterov, double nsA, double nsB, double nsC,
                  double eps, int32_t nsSteps, int32_t adjustLrFn,
                  const zrt_lr_schedule *schedule, double maxGradNorm,
                  const float *stats, const float *lossScale, double divisor,
                  int32_t skip) {
  float scale = 1.0f;
  if (!skip) {
    device::download(&scale, lossScale, sizeof(scale));
    scale = float(double(scale) * divisor);
  }
  int64_t bytes = skip ? 0 : zrt_scratch_muon(matrix[1], matrix[2]);
  DeviceScratch scratch(bytes);
  cuda::muon(dtype, grad, master, momentumBuffer, param, matrix, 1, step, lr,
             momentum, weightDecay, nesterov, nsA, nsB, nsC, eps, nsSteps,
             adjustLrFn, schedule, maxGradNorm, stats, scale, skip,
             scratch.as(), bytes);
}
