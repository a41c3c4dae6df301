//===- AbiCuda.cpp - zrt.h's kernels on the GPU ---------------------------===//
//
// Part of the zero-mlir project.
//
// The C symbols generated code calls, mapped onto the device kernels of
// CudaKernels.h. Every tensor pointer is device memory; arrays of pointers
// and shapes stay on the host. Scalars the ABI passes by value (a loss
// scale) become the kernels' host-side divisor.
//
//===----------------------------------------------------------------------===//

#include "CudaKernels.h"
#include "Support.h"
#include "zero_rt/zrt.h"

using namespace zrt;

extern "C" void zrt_copy(void *dst, const void *src, int64_t bytes) {
  if (bytes < 0)
    fatal("zrt_copy: negative size");
  cuda::copy(dst, src, bytes);
}

extern "C" void zrt_cast(int32_t srcDtype, const void *src, int32_t dstDtype,
                         void *dst, int64_t n) {
  cuda::cast(srcDtype, src, dstDtype, dst, n);
}

extern "C" void zrt_fill(int32_t dtype, void *dst, int64_t n, double value) {
  cuda::fill(dtype, dst, n, value);
}

extern "C" void zrt_add(int32_t dtype, const void *lhs, const void *rhs,
                        void *out, int64_t n, int64_t rhsN) {
  cuda::add(dtype, lhs, rhs, out, n, rhsN);
}

extern "C" void zrt_mul(int32_t dtype, const void *lhs, const void *rhs,
                        void *out, int64_t n, int64_t rhsN) {
  cuda::mul(dtype, lhs, rhs, out, n, rhsN);
}

extern "C" void zrt_scale(int32_t dtype, const void *in, void *out, int64_t n,
                          double factor) {
  cuda::scale(dtype, in, out, n, factor);
}

extern "C" void zrt_gelu(int32_t dtype, const void *x, void *y, int64_t n) {
  cuda::gelu(dtype, x, y, n);
}

extern "C" void zrt_gelu_grad(int32_t dtype, const void *x, const void *dy,
                              void *dx, int64_t n) {
  cuda::geluGrad(dtype, x, dy, dx, n);
}

extern "C" void zrt_relu(int32_t dtype, const void *x, void *y, int64_t n) {
  cuda::relu(dtype, x, y, n);
}

extern "C" void zrt_relu_grad(int32_t dtype, const void *y, const void *dy,
                              void *dx, int64_t n) {
  cuda::reluGrad(dtype, y, dy, dx, n);
}

extern "C" void zrt_reduce_sum(int32_t dtype, const void *in, void *out,
                               int64_t rows, int64_t cols) {
  cuda::reduceSum(dtype, in, out, rows, cols);
}

extern "C" void zrt_transpose(int32_t dtype, const void *in, void *out,
                              int32_t rank, const int64_t *inShape,
                              const int64_t *perm) {
  cuda::transpose(dtype, in, out, rank, inShape, perm);
}

extern "C" void zrt_split(int32_t dtype, const void *in, void *const *outs,
                          const int64_t *sizes, int32_t num, int64_t outer,
                          int64_t inner) {
  cuda::split(dtype, in, outs, sizes, num, outer, inner);
}

extern "C" void zrt_concat(int32_t dtype, const void *const *ins,
                           const int64_t *sizes, int32_t num, void *out,
                           int64_t outer, int64_t inner) {
  cuda::concat(dtype, ins, sizes, num, out, outer, inner);
}

extern "C" void zrt_matmul(int32_t dtype, const void *a, const void *b, void *c,
                           int64_t batch, int64_t m, int64_t n, int64_t k,
                           int32_t transposeA, int32_t transposeB,
                           int32_t bIsBatched) {
  cuda::matmul(dtype, a, b, c, batch, m, n, k, transposeA, transposeB,
               bIsBatched);
}

extern "C" void zrt_softmax(int32_t dtype, const void *x, void *y,
                            int64_t rows, int64_t cols) {
  cuda::softmax(dtype, x, y, rows, cols);
}

extern "C" void zrt_softmax_grad(int32_t dtype, const void *y, const void *dy,
                                 void *dx, int64_t rows, int64_t cols) {
  cuda::softmaxGrad(dtype, y, dy, dx, rows, cols);
}

extern "C" void zrt_layer_norm(int32_t dtype, const void *x, const void *w,
                               const void *b, void *y, int64_t rows,
                               int64_t cols, double eps) {
  cuda::layerNorm(dtype, x, w, b, y, rows, cols, eps);
}

extern "C" void zrt_layer_norm_grad(int32_t dtype, const void *x, const void *w,
                                    const void *dy, void *dx, void *dw,
                                    void *db, int64_t rows, int64_t cols,
                                    double eps) {
  cuda::layerNormGrad(dtype, x, w, dy, dx, dw, db, rows, cols, eps);
}

extern "C" void zrt_attention(int32_t dtype, const void *q, const void *k,
                              const void *v, void *o, int64_t batch,
                              int64_t heads, int64_t seq, int64_t headDim,
                              int32_t causal, double scale) {
  cuda::attention(dtype, q, k, v, o, batch, heads, seq, headDim, causal, scale);
}

extern "C" void zrt_attention_grad(int32_t dtype, const void *q, const void *k,
                                   const void *v, const void *o, const void *dO,
                                   void *dq, void *dk, void *dv, int64_t batch,
                                   int64_t heads, int64_t seq, int64_t headDim,
                                   int32_t causal, double scale) {
  cuda::attentionGrad(dtype, q, k, v, o, dO, dq, dk, dv, batch, heads, seq,
                      headDim, causal, scale);
}

extern "C" void zrt_embedding(int32_t dtype, const void *table, int32_t idType,
                              const void *ids, void *out, int64_t numIds,
                              int64_t vocab, int64_t dim) {
  cuda::embedding(dtype, table, idType, ids, out, numIds, vocab, dim);
}

extern "C" void zrt_embedding_grad(int32_t dtype, const void *dy,
                                   int32_t idType, const void *ids,
                                   void *dtable, int64_t numIds, int64_t vocab,
                                   int64_t dim) {
  cuda::embeddingGrad(dtype, dy, idType, ids, dtable, numIds, vocab, dim);
}

extern "C" void zrt_softmax_cross_entropy(int32_t dtype, const void *logits,
                                          int32_t labelType, const void *labels,
                                          float *loss, int64_t rows,
                                          int64_t classes) {
  cuda::softmaxCrossEntropy(dtype, logits, labelType, labels, loss, rows,
                            classes);
}

extern "C" void zrt_softmax_cross_entropy_grad(
    int32_t dtype, const void *logits, int32_t labelType, const void *labels,
    const float *dloss, void *dlogits, int64_t rows, int64_t classes) {
  cuda::softmaxCrossEntropyGrad(dtype, logits, labelType, labels, dloss,
                                dlogits, rows, classes);
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

extern "C" void zrt_adam(int32_t dtype, const void *grad, float *master,
                         float *expAvg, float *expAvgSq, void *param, int64_t n,
                         int64_t step, double lr, double beta1, double beta2,
                         double eps, double weightDecay, int32_t adamw,
                         double maxGradNorm, const float *stats,
                         float lossScale, int32_t skip) {
  cuda::adam(dtype, grad, master, expAvg, expAvgSq, param, n, step, lr, beta1,
             beta2, eps, weightDecay, adamw, maxGradNorm, stats, nullptr,
             double(lossScale), skip);
}
