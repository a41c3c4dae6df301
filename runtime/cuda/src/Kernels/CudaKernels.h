//===- CudaKernels.h - The CUDA backend's kernels ---------------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// The device implementations of zrt.h's kernels, with the same arguments and
// semantics (see zero_rt/zrt.h and runtime/README.md): every pointer is
// device memory, except the arrays of pointers and shapes, which are host
// arrays. Each function enqueues its work on computeStream() and returns
// without waiting. AbiCuda.cpp defines the zrt_* symbols as calls of them,
// both from zero_rt/abi.def; keeping them in a namespace lets the GPU tests
// link them beside the CPU backend and compare the two.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_CUDA_KERNELS_H
#define ZERO_RT_CUDA_KERNELS_H

#include "zero_rt/zrt.h"

#include <cstdint>

namespace zrt {
namespace cuda {

// The kernels of zrt.h, one for each ZRT_KERNEL entry of abi.def, named by
// its `impl` field and taking its parameters (Elementwise.cu, Layout.cu,
// Matmul.cu, Softmax.cu, Rope.cu, LayerNorm.cu, Embedding.cu,
// Attention*.cu). The matmul's cuBLASLt workspace is the scratch
// zero_rt/scratch.h plans for zrt_matmul; softmaxCrossEntropy writes its
// mean to device memory, and softmaxCrossEntropyGrad reads `dloss` from
// there.
#define ZRT_KERNEL(name, impl, ret, params, args) ret impl params;
#include "zero_rt/abi.def"

/// Whether the tensor-core attention kernels keep P and dS to fp32's bits,
/// each as two 16-bit operands (true, the default), or round them to one as
/// FlashAttention does (train's --attention-precision 16bit; Attention.cu).
/// Process-wide; the kernels read it when they are launched.
void setAttentionSplitProbs(bool split);
bool attentionSplitProbs();

/// c [m, n] += op(a) op(b), one product of zrt_matmul's layout (Matmul.cu).
void matmulAccumulate(int32_t dtype, const void *a, const void *b, void *c,
                      int64_t m, int64_t n, int64_t k, int32_t transposeA,
                      int32_t transposeB);

/// zrt_copy without its argument check (Elementwise.cu).
void copy(void *dst, const void *src, int64_t bytes);

/// zrt_quantize and zrt_dequantize (Quantize.cu): the CPU backend's bits.
void quantize(int32_t dtype, const void *src, int64_t n, int64_t chunks,
              int32_t bits, void *dst);
void dequantize(int32_t dtype, const void *src, int64_t n, int64_t chunks,
                int32_t bits, void *dst);
/// zrt_dequantize_add (Quantize.cu): acc += the chunk's dequantization.
void dequantizeAdd(const void *src, int64_t n, int32_t bits, float *acc);

// Optimizer (Optimizer.cu). Scalars that the schedule computes live on the
// device, so no launch waits for the host.
/// stats[0] = max(stats[0], any inf/NaN in grad ? 1 : 0); stats[1] +=
/// sum(grad^2) / (lossScale * divisor)^2, where lossScale is a device fp32
/// scalar (null: 1). With first != 0 stats starts from {0, 0}. One read-only
/// pass over grad, no host synchronization.
void checkOverflow(int32_t dtype, const void *grad, int64_t n,
                   const float *lossScale, double divisor, int32_t first,
                   float *stats);
/// zrt_optimizer_step on the device: stats (device, {flag, squared norm})
/// gives the clip coefficient, the gradient is multiplied by it and divided
/// by (*lossScale) * divisor (lossScale device, null: 1; `update`'s
/// loss_scale is unused). One launch per run of equal weight decay (the
/// decay ranges are host memory); Adam's with 16-byte accesses where the
/// pointers allow, 8-bit states' one block of threads per quantisation
/// block, the other rules' a grid-stride loop; the gradient is only read.
void optimizerStep(const zrt_optimizer &optimizer, const zrt_update &update,
                   const float *lossScale, double divisor);

} // namespace cuda
} // namespace zrt

#endif // ZERO_RT_CUDA_KERNELS_H
