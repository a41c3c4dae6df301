//===- DeviceCpu.cpp - Tensor memory of the CPU backend -------------------===//
//
// Part of the zero-mlir project.
//
// Tensors live in host memory: the device functions are plain copies, and a
// step is over when the step function returns.
//
//===----------------------------------------------------------------------===//

#include "Device/Device.h"
#include "Device/Memory.h"
#include "Driver/Trace.h"
#include "Kernels/Kernels.h"
#include "Optimizer/Adafactor.h"
#include "Program/Manifest.h"
#include "Support/Support.h"
#include "zero_rt/scratch.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

using namespace zrt;

const char *device::backendName() { return "cpu"; }

void device::initialize(int) {}

static void *allocateOrThrow(int64_t bytes, int64_t alignment) {
  if (void *p = tryAlignedAlloc(bytes, alignment))
    return p;
  throw OutOfMemory("cannot allocate " + std::to_string(bytes) +
                    " bytes of host memory");
}

void *device::allocate(int64_t bytes) {
  return allocateOrThrow(bytes, ZRT_ARENA_ALIGNMENT);
}

void device::release(void *ptr) { std::free(ptr); }

// Block-aligned: the swap buffers of an optimizer on NVMe are O_DIRECT
// buffers (cudaHostAlloc's pages are aligned too).
void *device::allocateHost(int64_t bytes) {
  return allocateOrThrow(bytes, ZRT_NVME_BLOCK_BYTES);
}

void device::releaseHost(void *ptr) { std::free(ptr); }

// The "device" arenas are host memory too: a copy between the arenas is a
// memcpy on the calling thread, complete when it returns (the caller's
// "copy to host"/"copy to device" span in --trace times it).
std::function<void()> device::transfer(void *dst, const void *src,
                                       int64_t bytes, bool) {
  if (bytes > 0 && dst != src)
    std::memcpy(dst, src, size_t(bytes));
  return nullptr;
}

void device::upload(void *dst, const void *src, int64_t bytes) {
  if (bytes > 0 && dst != src)
    std::memcpy(dst, src, size_t(bytes));
}

void device::download(void *dst, const void *src, int64_t bytes) {
  if (bytes > 0 && dst != src)
    std::memcpy(dst, src, size_t(bytes));
}

void device::zero(void *dst, int64_t bytes) {
  if (bytes > 0)
    std::memset(dst, 0, size_t(bytes));
}

void device::uploadCast(const float *src, int32_t dtype, void *dst, int64_t n) {
  zrt_cast(ZRT_F32, src, dtype, dst, n);
}

void device::downloadCast(const void *src, int32_t dtype, float *dst,
                          int64_t n) {
  zrt_cast(dtype, src, ZRT_F32, dst, n);
}

void device::move(void *dst, const void *src, int64_t bytes) {
  if (bytes > 0 && dst != src)
    std::memmove(dst, src, size_t(bytes));
}

void device::storeF32(float *dst, float value) { *dst = value; }

void device::finishStep(zrt_ctx &) {}

std::string device::selectGraphs(bool on) {
  return on ? "--cuda-graphs needs a program compiled with --target cuda; the "
              "CPU backend runs kernels as it calls them"
            : "";
}

void device::beginStep(zrt_ctx &) {}

std::string device::selectAttentionPrecision(const std::string &precision) {
  if (precision.empty() || precision == "fp32")
    return "";
  return "attention precision '" + precision +
         "' needs a program compiled with --target cuda; the CPU backend "
         "computes attention in fp32";
}

void device::recordLoss(zrt_ctx &ctx, const float *loss) {
  ctx.lossSum += double(*loss);
  ++ctx.lossCount;
}

void device::checkOverflow(int32_t dtype, const void *grad, int64_t n,
                           const float *lossScale, double divisor,
                           int32_t first, float *stats) {
  if (first)
    stats[0] = stats[1] = 0.0f;
  const void *buffers[1] = {grad};
  float local[2];
  zrt_check_overflow(dtype, buffers, &n, 1, float(double(*lossScale) * divisor),
                     local);
  stats[0] = std::max(stats[0], local[0]);
  stats[1] += local[1];
}

void device::optimizerStep(const zrt_optimizer &optimizer,
                           const zrt_update &update, const float *lossScale,
                           double divisor) {
  zrt_update u = update;
  u.loss_scale = float(double(*lossScale) * divisor);
  zrt_optimizer_step(&optimizer, &u);
}

void *device::allocateScratch(int64_t bytes) {
  if (bytes <= 0)
    return nullptr;
  void *ptr = alignedAlloc(bytes);
  accountScratch(bytes);
  return ptr;
}

void device::releaseScratch(void *ptr, int64_t bytes) {
  if (!ptr)
    return;
  std::free(ptr);
  accountScratch(-bytes);
}

void device::adafactorSums(int32_t dtype, const void *grad, const float *master,
                           const AdafactorShape &s, int64_t begin, int64_t end,
                           float gradScale, double *sums) {
  zrt::adafactorSums(dtype, grad, master, s, begin, end, gradScale, sums);
}

void device::adafactorFactors(const AdafactorShape &s,
                              const AdafactorConstants &k, float *rowVar,
                              float *colVar, double *sums) {
  zrt::adafactorFactors(s, k, rowVar, colVar, sums);
}

void device::adafactorUpdateSums(int32_t dtype, const void *grad,
                                 const AdafactorShape &s, int64_t begin,
                                 int64_t end, float gradScale,
                                 const AdafactorConstants &k,
                                 const float *rowVar, const float *colVar,
                                 float *variance, double *sums) {
  zrt::adafactorUpdateSums(dtype, grad, s, begin, end, gradScale, k, rowVar,
                           colVar, variance, sums);
}

void device::adafactorApply(int32_t dtype, const void *grad, float *master,
                            void *param, const AdafactorShape &s, int64_t begin,
                            int64_t end, float gradScale,
                            const AdafactorConstants &k, const float *rowVar,
                            const float *colVar, const float *variance,
                            const double *sums) {
  zrt::adafactorApply(dtype, grad, master, param, s, begin, end, gradScale, k,
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
  int64_t bytes = zrt_scratch_muon(matrix[1], matrix[2]);
  Scratch scratch(skip ? 0 : bytes);
  zrt_muon(dtype, grad, master, momentumBuffer, param, matrix, 1, step, lr,
           momentum, weightDecay, nesterov, nsA, nsB, nsC, eps, nsSteps,
           adjustLrFn, schedule, maxGradNorm, stats,
           float(double(*lossScale) * divisor), skip, scratch.as<void>(),
           skip ? 0 : bytes);
}
