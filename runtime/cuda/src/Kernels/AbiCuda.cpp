//===- AbiCuda.cpp - zrt.h's kernels on the GPU ---------------------------===//
//
// Part of the zero-mlir project.
//
// The C symbols generated code calls, mapped onto the device kernels of
// CudaKernels.h: generated from zero_rt/abi.def, except the entries with
// logic of their own (argument checks, host arrays, host scalars). Every
// tensor pointer is device memory; arrays of pointers and shapes stay on the
// host. Scalars the ABI passes by value (a loss scale) become the kernels'
// host-side divisor.
//
//===----------------------------------------------------------------------===//

#include "Kernels/CudaKernels.h"
#include "Optimizer/Muon.h"
#include "Support/CudaGraphs.h"
#include "Support/Support.h"
#include "zero_rt/zrt.h"

using namespace zrt;

extern "C" void zrt_copy(void *dst, const void *src, int64_t bytes) {
  if (bytes < 0)
    fatal("zrt_copy: negative size");
  cuda::copy(dst, src, bytes);
}

namespace {
/// A kernel entry: with --cuda-graphs, where a step's capture starts and
/// its segments end (Support/CudaGraphs.h).
struct KernelEntry {
  KernelEntry() { cuda::graphs::beforeKernel(); }
  ~KernelEntry() { cuda::graphs::afterKernel(); }
};
} // namespace

// Every kernel is a plain call of its device implementation.
#define ZRT_KERNEL(name, impl, ret, params, args)                              \
  extern "C" ret name params {                                                 \
    KernelEntry entry;                                                         \
    return cuda::impl args;                                                    \
  }
#include "zero_rt/abi.def"

extern "C" void zrt_quantize(int32_t dtype, const void *src, int64_t n,
                             int64_t chunks, int32_t bits, void *dst) {
  cuda::quantize(dtype, src, n, chunks, bits, dst);
}

extern "C" void zrt_dequantize(int32_t dtype, const void *src, int64_t n,
                               int64_t chunks, int32_t bits, void *dst) {
  cuda::dequantize(dtype, src, n, chunks, bits, dst);
}

extern "C" void zrt_dequantize_add(const void *src, int64_t n, int32_t bits,
                                   float *acc) {
  cuda::dequantizeAdd(src, n, bits, acc);
}

extern "C" void zrt_check_overflow(int32_t dtype, const void *const *grads,
                                   const int64_t *counts, int32_t num,
                                   float lossScale, float *stats) {
  if (num < 0)
    fatal("zrt_check_overflow: %d buffers", int(num));
  if (num == 0) {
    cuda::fill(ZRT_F32, stats, 2, 0.0);
    return;
  }
  for (int32_t i = 0; i < num; ++i)
    cuda::checkOverflow(dtype, grads[i], counts[i], nullptr, double(lossScale),
                        i == 0, stats);
}

extern "C" void zrt_optimizer_step(const zrt_optimizer *optimizer,
                                   const zrt_update *update) {
  if (!optimizer || !update)
    fatal("zrt_optimizer_step: a null %s", optimizer ? "update" : "optimizer");
  cuda::optimizerStep(*optimizer, *update, nullptr, double(update->loss_scale));
}

extern "C" void
zrt_muon(int32_t dtype, const void *grad, float *master, float *momentumBuffer,
         void *param, const int64_t *matrices, int32_t numMatrices,
         int64_t step, double lr, double momentum, double weightDecay,
         int32_t nesterov, double nsA, double nsB, double nsC, double eps,
         int32_t nsSteps, int32_t adjustLrFn, const zrt_lr_schedule *schedule,
         double maxGradNorm, const float *stats, float lossScale, int32_t skip,
         void *scratch, int64_t scratchBytes) {
  cuda::muon(dtype, grad, master, momentumBuffer, param, matrices, numMatrices,
             step, lr, momentum, weightDecay, nesterov, nsA, nsB, nsC, eps,
             nsSteps, adjustLrFn, schedule, maxGradNorm, stats, lossScale, skip,
             scratch, scratchBytes);
}
