//===- CudaKernels.h - The CUDA backend's kernels ---------------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// The device implementations of zrt.h's kernels, with the same arguments and
// semantics (see zero_rt/zrt.h and runtime/README.md): every pointer is
// device memory, except the arrays of pointers and shapes, which are host
// arrays. Each function enqueues its work on computeStream() and returns
// without waiting. AbiCuda.cpp maps the zrt_* symbols onto them; keeping them
// in a namespace lets the GPU tests link them beside the CPU backend and
// compare the two.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_CUDA_KERNELS_H
#define ZERO_RT_CUDA_KERNELS_H

#include <cstdint>

namespace zrt {
namespace cuda {

// Elementwise, casts and layout (Elementwise.cu, Layout.cu).
void copy(void *dst, const void *src, int64_t bytes);
void cast(int32_t srcDtype, const void *src, int32_t dstDtype, void *dst,
          int64_t n);
void fill(int32_t dtype, void *dst, int64_t n, double value);
void add(int32_t dtype, const void *lhs, const void *rhs, void *out, int64_t n,
         int64_t rhsN);
void mul(int32_t dtype, const void *lhs, const void *rhs, void *out, int64_t n,
         int64_t rhsN);
void scale(int32_t dtype, const void *in, void *out, int64_t n, double factor);
void gelu(int32_t dtype, const void *x, void *y, int64_t n);
void geluGrad(int32_t dtype, const void *x, const void *dy, void *dx,
              int64_t n);
void relu(int32_t dtype, const void *x, void *y, int64_t n);
void reluGrad(int32_t dtype, const void *y, const void *dy, void *dx,
              int64_t n);
void reduceSum(int32_t dtype, const void *in, void *out, int64_t rows,
               int64_t cols);
void transpose(int32_t dtype, const void *in, void *out, int32_t rank,
               const int64_t *inShape, const int64_t *perm);
void split(int32_t dtype, const void *in, void *const *outs,
           const int64_t *sizes, int32_t num, int64_t outer, int64_t inner);
void concat(int32_t dtype, const void *const *ins, const int64_t *sizes,
            int32_t num, void *out, int64_t outer, int64_t inner);

// Matmul (Matmul.cu, cuBLASLt with fp32 accumulation; its workspace is the
// scratch zero_rt/scratch.h plans for zrt_matmul).
void matmul(int32_t dtype, const void *a, const void *b, void *c,
            int64_t batch, int64_t m, int64_t n, int64_t k, int32_t transposeA,
            int32_t transposeB, int32_t bIsBatched);

// Softmax, layer norm, losses, embedding (Softmax.cu, LayerNorm.cu,
// Embedding.cu).
void softmax(int32_t dtype, const void *x, void *y, int64_t rows,
             int64_t cols);
void softmaxGrad(int32_t dtype, const void *y, const void *dy, void *dx,
                 int64_t rows, int64_t cols);
void layerNorm(int32_t dtype, const void *x, const void *w, const void *b,
               void *y, int64_t rows, int64_t cols, double eps);
void layerNormGrad(int32_t dtype, const void *x, const void *w,
                   const void *dy, void *dx, void *dw, void *db, int64_t rows,
                   int64_t cols, double eps);
void embedding(int32_t dtype, const void *table, int32_t idType,
               const void *ids, void *out, int64_t numIds, int64_t vocab,
               int64_t dim);
void embeddingGrad(int32_t dtype, const void *dy, int32_t idType,
                   const void *ids, void *dtable, int64_t numIds,
                   int64_t vocab, int64_t dim);
/// *loss (device fp32) = mean over rows.
void softmaxCrossEntropy(int32_t dtype, const void *logits, int32_t labelType,
                         const void *labels, float *loss, int64_t rows,
                         int64_t classes);
/// dloss: device fp32 scalar.
void softmaxCrossEntropyGrad(int32_t dtype, const void *logits,
                             int32_t labelType, const void *labels,
                             const float *dloss, void *dlogits, int64_t rows,
                             int64_t classes);

// Attention (Attention.cu).
void attention(int32_t dtype, const void *q, const void *k, const void *v,
               void *o, int64_t batch, int64_t heads, int64_t seq,
               int64_t headDim, int32_t causal, double scale);
void attentionGrad(int32_t dtype, const void *q, const void *k, const void *v,
                   const void *o, const void *dO, void *dq, void *dk, void *dv,
                   int64_t batch, int64_t heads, int64_t seq, int64_t headDim,
                   int32_t causal, double scale);

// Optimizer (Optimizer.cu). Scalars that the schedule computes live on the
// device, so no launch waits for the host.
/// stats[0] = max(stats[0], any inf/NaN in grad ? 1 : 0); stats[1] +=
/// sum(grad^2) / (lossScale * divisor)^2, where lossScale is a device fp32
/// scalar (null: 1). With first != 0 stats starts from {0, 0}. One read-only
/// pass over grad, no host synchronization.
void checkOverflow(int32_t dtype, const void *grad, int64_t n,
                   const float *lossScale, double divisor, int32_t first,
                   float *stats);
/// zrt_adam on the device: stats (device, {flag, squared norm}) gives the
/// clip coefficient, the gradient is multiplied by it and divided by
/// (*lossScale) * divisor (lossScale device, null: 1). One launch, 16-byte
/// accesses where the pointers allow; the gradient is only read.
void adam(int32_t dtype, const void *grad, float *master, float *expAvg,
          float *expAvgSq, void *param, int64_t n, int64_t step, double lr,
          double beta1, double beta2, double eps, double weightDecay,
          int32_t adamw, double maxGradNorm, const float *stats,
          const float *lossScale, double divisor, int32_t skip);

} // namespace cuda
} // namespace zrt

#endif // ZERO_RT_CUDA_KERNELS_H
