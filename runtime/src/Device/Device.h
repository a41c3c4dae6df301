//===- Device.h - Where a backend keeps tensors -----------------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// The driver, the checkpoints and the arenas are shared by the CPU and CUDA
// backends; they reach tensor memory only through these functions, which
// each backend implements (DeviceCpu.cpp, cuda/src/Device/DeviceCuda.cpp). On
// the CPU they are plain memory operations.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_DEVICE_H
#define ZERO_RT_DEVICE_H

#include "zero_rt/adafactor.h"
#include "zero_rt/zrt.h"

#include <cstdint>
#include <functional>
#include <string>

struct zrt_ctx;

namespace zrt {
struct AdafactorConstants;
namespace device {

/// "cpu" or "cuda".
const char *backendName();

/// Chooses how attention's tensor-core kernels multiply the probabilities
/// and their gradients (train's --attention-precision): "fp32" (also "",
/// the default) keeps fp32's bits, "16bit" rounds them to the step's 16-bit
/// type as FlashAttention does. Returns a one-line reason when this backend
/// has no such choice (the CPU computes attention in fp32 only), else "".
std::string selectAttentionPrecision(const std::string &precision);

/// Chooses whether training steps run as CUDA graphs (train's
/// --cuda-graphs). Returns a one-line reason when this backend has none
/// (the CPU), else "".
std::string selectGraphs(bool on);

/// A training step begins: its micro steps and boundary follow, then
/// finishStep.
void beginStep(zrt_ctx &ctx);

/// Picks the device of a rank (the CUDA backend: GPU localRank modulo the
/// visible GPUs). Throws std::runtime_error with a one-line reason when the
/// backend cannot run here (no usable GPU).
void initialize(int localRank);

/// Memory of the planned arenas: at least 64-byte aligned. Throws
/// zrt::OutOfMemory when the device has not that much free.
void *allocate(int64_t bytes);
void release(void *ptr);

/// Pinned host memory (cudaHostAlloc on the GPU), 64-byte aligned: the host
/// arena of an offloaded optimizer. Throws zrt::OutOfMemory.
void *allocateHost(int64_t bytes);
void releaseHost(void *ptr);

/// Starts copying `bytes` between tensor memory and pinned host memory
/// (`toHost`: src is tensor memory, dst host memory) once every kernel
/// enqueued so far is done, on a copy stream where there is one. The
/// returned function (null when the copy is already complete) completes
/// it: afterwards the host may read a download's destination, later
/// kernels see an upload's destination, and the source may be reused.
std::function<void()> transfer(void *dst, const void *src, int64_t bytes,
                               bool toHost);

/// Host <-> tensor memory copies, ordered after every kernel enqueued so far
/// (the host buffer may be reused once they return).
void upload(void *dst, const void *src, int64_t bytes);
void download(void *dst, const void *src, int64_t bytes);
void zero(void *dst, int64_t bytes);

/// Host fp32 values to tensor memory of `dtype` (rounded to nearest even).
void uploadCast(const float *src, int32_t dtype, void *dst, int64_t n);
/// Tensor memory of `dtype` to host fp32 values.
void downloadCast(const void *src, int32_t dtype, float *dst, int64_t n);

/// memmove in tensor memory (the ranges may overlap), ordered like upload.
void move(void *dst, const void *src, int64_t bytes);
/// One fp32 value to tensor memory, without waiting for the device.
void storeF32(float *dst, float value);

/// Ends a step: waits for its kernels and collectives, reports errors the
/// device found, and completes the context's step results (the loss).
void finishStep(zrt_ctx &ctx);
/// Counts a micro step's loss (fp32 in tensor memory) into ctx.lossSum and
/// ctx.lossCount, by finishStep at the latest.
void recordLoss(zrt_ctx &ctx, const float *loss);

// The optimizer's kernels with the loss scale in tensor memory, as the
// schedule computes it (the CPU reads it, the GPU keeps it on the device):
// zrt_check_overflow and zrt_optimizer_step unscaled by (*lossScale) *
// divisor.

/// Accumulates grad's overflow flag (max) and squared norm (sum) into stats,
/// starting from {0, 0} when `first`.
void checkOverflow(int32_t dtype, const void *grad, int64_t n,
                   const float *lossScale, double divisor, int32_t first,
                   float *stats);
/// zrt_optimizer_step on tensor memory; `update`'s loss_scale is unused.
void optimizerStep(const zrt_optimizer &optimizer, const zrt_update &update,
                   const float *lossScale, double divisor);
/// Tensor memory counted as kernel scratch while it lives (an update's
/// workspace): releaseScratch takes the same bytes.
void *allocateScratch(int64_t bytes);
void releaseScratch(void *ptr, int64_t bytes);
/// Adafactor's phases (Adafactor.h) on elements [begin, end) of one tensor
/// of shape `s`: every pointer is tensor memory, `sums` included.
void adafactorSums(int32_t dtype, const void *grad, const float *master,
                   const AdafactorShape &s, int64_t begin, int64_t end,
                   float gradScale, double *sums);
void adafactorFactors(const AdafactorShape &s, const AdafactorConstants &k,
                      float *rowVar, float *colVar, double *sums);
void adafactorUpdateSums(int32_t dtype, const void *grad,
                         const AdafactorShape &s, int64_t begin, int64_t end,
                         float gradScale, const AdafactorConstants &k,
                         const float *rowVar, const float *colVar,
                         float *variance, double *sums);
void adafactorApply(int32_t dtype, const void *grad, float *master, void *param,
                    const AdafactorShape &s, int64_t begin, int64_t end,
                    float gradScale, const AdafactorConstants &k,
                    const float *rowVar, const float *colVar,
                    const float *variance, const double *sums);
/// torch.optim.Muon's step of one whole row-major [matrix[1], matrix[2]]
/// matrix at element matrix[0] of each buffer (zrt_muon's operands; its
/// scratch, zrt_scratch_muon of the matrix, is the backend's accounted
/// scratch). `lossScale` is device memory, as optimizerStep's.
void muon(int32_t dtype, const void *grad, float *master, float *momentumBuffer,
          void *param, const int64_t matrix[3], int64_t step, double lr,
          double momentum, double weightDecay, int32_t nesterov, double nsA,
          double nsB, double nsC, double eps, int32_t nsSteps,
          int32_t adjustLrFn, const zrt_lr_schedule *schedule,
          double maxGradNorm, const float *stats, const float *lossScale,
          double divisor, int32_t skip);

} // namespace device
} // namespace zrt

#endif // ZERO_RT_DEVICE_H
