//===- Adafactor.cpp - torch.optim.Adafactor's step on the CPU ------------===//
//
// Part of the zero-mlir project.
//
// The phases of Adafactor.h over a slice of a tensor, operation for
// operation as torch's single-tensor step in fp32 (KernelMath.h), with the
// sums of squares in double. The sums run in element order on one thread,
// so that they do not depend on the thread count; the update itself runs
// in parallel.
//
//===----------------------------------------------------------------------===//

#include "Optimizer/Adafactor.h"
#include "Driver/Trace.h"
#include "Kernels/Kernels.h"

#include <algorithm>

using namespace zrt;

namespace {

/// Calls fn(offset, len, row, matrix, col) for each piece of elements
/// [begin, end) within one row: `offset` relative to `begin`, `row` the
/// global row (matrix * rows + i), `col` the piece's first column.
template <typename Fn>
void forRowPieces(const AdafactorShape &s, int64_t begin, int64_t end,
                  const Fn &fn) {
  for (int64_t e = begin; e < end;) {
    int64_t row = e / s.cols, col = e % s.cols;
    int64_t len = std::min(s.cols - col, end - e);
    fn(e - begin, len, row, row / s.rows, col);
    e += len;
  }
}

void checkSlice(const char *kernel, const AdafactorShape &s, int64_t begin,
                int64_t end) {
  if (s.batch < 1 || s.rows < 1 || s.cols < 1)
    fatal("%s: the tensor [%lld, %lld, %lld] is empty", kernel,
          (long long)s.batch, (long long)s.rows, (long long)s.cols);
  if (begin < 0 || end < begin || end > s.numel())
    fatal("%s: the slice [%lld, %lld) is outside the tensor's %lld elements",
          kernel, (long long)begin, (long long)end, (long long)s.numel());
}

/// The update of the element at (row, matrix, col) with gradient g (already
/// scaled and signed), from the factors or the vector's variance.
inline float updateAt(const AdafactorShape &s, const AdafactorConstants &k,
                      float g, const float *rowVar, const float *colVar,
                      const double *rowMeans, int64_t row, int64_t matrix,
                      int64_t col, float variance) {
  if (!s.factored)
    return adafactorUpdate(g, variance, k);
  float v = adafactorFactoredVariance(
      rowVar[row], colVar[matrix * s.cols + col], float(rowMeans[matrix]));
  return adafactorUpdate(g, v, k);
}

} // namespace

void zrt::adafactorSums(int32_t dtype, const void *grad, const float *master,
                        const AdafactorShape &s, int64_t begin, int64_t end,
                        float gradScale, double *sums) {
  KernelSpan span("zrt_adafactor_sums");
  checkSlice("zrt_adafactor_sums", s, begin, end);
  std::fill(sums, sums + adafactorSumsCount(s), 0.0);
  double *rowSq = sums + 2, *colSq = rowSq + s.batch * s.rows;
  double paramSq = 0.0;
  for (int64_t i = 0; i < end - begin; ++i)
    paramSq += double(master[i]) * double(master[i]);
  sums[0] = paramSq;
  if (!s.factored)
    return;
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *gs = static_cast<const T *>(grad);
    alignas(64) float buf[kBlock];
    forRowPieces(s, begin, end,
                 [&](int64_t off, int64_t len, int64_t row, int64_t matrix,
                     int64_t col) {
                   double *colAt = colSq + matrix * s.cols + col;
                   double rowSum = 0.0;
                   forBlocks(gs + off, len, buf,
                             [&](const float *g, int64_t at, int64_t n) {
                               for (int64_t t = 0; t < n; ++t) {
                                 double q = double(g[t] * gradScale);
                                 q *= q;
                                 rowSum += q;
                                 colAt[at + t] += q;
                               }
                             });
                   rowSq[row] += rowSum;
                 });
  });
}

void zrt::adafactorFactors(const AdafactorShape &s, const AdafactorConstants &k,
                           float *rowVar, float *colVar, double *sums) {
  KernelSpan span("zrt_adafactor_factors");
  if (!s.factored)
    return;
  const double *rowSq = sums + 2, *colSq = rowSq + s.batch * s.rows;
  double *rowMeans = sums + adafactorReducedCount(s);
  for (int64_t r = 0; r < s.batch * s.rows; ++r)
    rowVar[r] = lerpTorch(rowVar[r], adafactorMeanSquare(rowSq[r], s.cols),
                          k.beta2Weight);
  for (int64_t c = 0; c < s.batch * s.cols; ++c)
    colVar[c] = lerpTorch(colVar[c], adafactorMeanSquare(colSq[c], s.rows),
                          k.beta2Weight);
  for (int64_t b = 0; b < s.batch; ++b) {
    double sum = 0.0;
    for (int64_t i = 0; i < s.rows; ++i)
      sum += double(rowVar[b * s.rows + i]);
    // row_var.mean(dim=-2).clamp_(min=eps1): the select keeps a NaN.
    float mean = divRn(float(sum), float(s.rows));
    rowMeans[b] = mean < k.eps1 ? k.eps1 : mean;
  }
}

void zrt::adafactorUpdateSums(int32_t dtype, const void *grad,
                              const AdafactorShape &s, int64_t begin,
                              int64_t end, float gradScale,
                              const AdafactorConstants &k, const float *rowVar,
                              const float *colVar, float *variance,
                              double *sums) {
  KernelSpan span("zrt_adafactor_update_sums");
  checkSlice("zrt_adafactor_update_sums", s, begin, end);
  const double *rowMeans = sums + adafactorReducedCount(s);
  float sign = k.maximize ? -1.0f : 1.0f;
  double updateSq = 0.0;
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *gs = static_cast<const T *>(grad);
    alignas(64) float buf[kBlock];
    forRowPieces(
        s, begin, end,
        [&](int64_t off, int64_t len, int64_t row, int64_t matrix,
            int64_t col) {
          forBlocks(gs + off, len, buf,
                    [&](const float *g, int64_t at, int64_t n) {
                      for (int64_t t = 0; t < n; ++t) {
                        float gt = sign * (g[t] * gradScale);
                        float v = 0.0f;
                        if (!s.factored) {
                          float *var = variance + off + at + t;
                          *var = lerpTorch(*var, mulRn(gt, gt), k.beta2Weight);
                          v = *var;
                        }
                        float u = updateAt(s, k, gt, rowVar, colVar, rowMeans,
                                           row, matrix, col + at + t, v);
                        updateSq += double(u) * double(u);
                      }
                    });
        });
  });
  sums[1] = updateSq;
}

void zrt::adafactorApply(int32_t dtype, const void *grad, float *master,
                         void *param, const AdafactorShape &s, int64_t begin,
                         int64_t end, float gradScale,
                         const AdafactorConstants &k, const float *rowVar,
                         const float *colVar, const float *variance,
                         const double *sums) {
  KernelSpan span("zrt_adafactor_apply");
  checkSlice("zrt_adafactor_apply", s, begin, end);
  const double *rowMeans = sums + adafactorReducedCount(s);
  float scale = adafactorStepScale(k, sums[0], sums[1], s.numel());
  float sign = k.maximize ? -1.0f : 1.0f;
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *gs = static_cast<const T *>(grad);
    T *ps = static_cast<T *>(param);
    if (static_cast<void *>(ps) == static_cast<void *>(master))
      ps = nullptr;
    parallelFor(end - begin, kGrain, [&](int64_t lo, int64_t hi) {
      alignas(64) float buf[kBlock], bufP[kBlock];
      forRowPieces(s, begin + lo, begin + hi,
                   [&](int64_t off, int64_t len, int64_t row, int64_t matrix,
                       int64_t col) {
                     off += lo;
                     forBlocks(gs + off, len, buf,
                               [&](const float *g, int64_t at, int64_t n) {
                                 int64_t i = off + at;
                                 float *w = master + i;
                                 float *p = ps ? outF32(ps + i, bufP) : nullptr;
                                 for (int64_t t = 0; t < n; ++t) {
                                   float gt = sign * (g[t] * gradScale);
                                   float u = updateAt(
                                       s, k, gt, rowVar, colVar, rowMeans, row,
                                       matrix, col + at + t,
                                       s.factored ? 0.0f : variance[i + t]);
                                   w[t] = adafactorApply(w[t], u, scale, k);
                                   if (p)
                                     p[t] = w[t];
                                 }
                                 if (p)
                                   storeF32(p, ps + i, n);
                               });
                   });
    });
  });
}

void zrt::adafactorStep(int32_t dtype, const void *grad, float *master,
                        void *param, const AdafactorShape &s, float gradScale,
                        const AdafactorConstants &k, float *rowVar,
                        float *colVar, float *variance, double *sums) {
  int64_t n = s.numel();
  adafactorSums(dtype, grad, master, s, 0, n, gradScale, sums);
  adafactorFactors(s, k, rowVar, colVar, sums);
  adafactorUpdateSums(dtype, grad, s, 0, n, gradScale, k, rowVar, colVar,
                      variance, sums);
  adafactorApply(dtype, grad, master, param, s, 0, n, gradScale, k, rowVar,
                 colVar, variance, sums);
}

namespace {

/// Calls fn(tensor, lo, hi, at, sums) for each tensor of the partition:
/// [lo, hi) its elements in the shard (lo == hi when none), `at` where lo
/// sits in the shard, `sums` its sums.
template <typename Fn>
void forTensors(const AdafactorTensor *tensors, int32_t num, int64_t begin,
                int64_t end, double *sums, const Fn &fn) {
  for (int32_t i = 0; i < num; ++i) {
    int64_t lo, hi;
    adafactorPiece(tensors[i], begin, end, lo, hi);
    fn(i, lo, hi, tensors[i].offset + lo - begin, sums);
    sums += adafactorSumsCount(tensors[i].shape);
  }
}

const char *at(const void *p, int32_t dtype, int64_t i) {
  return static_cast<const char *>(p) + i * dtypeSize(dtype);
}

} // namespace

void zrt::adafactorShardSums(int32_t dtype, const void *grad,
                             const float *master,
                             const AdafactorTensor *tensors, int32_t num,
                             int64_t begin, int64_t end, float gradScale,
                             double *sums) {
  std::fill(sums, sums + adafactorShardSumsCount(tensors, num), 0.0);
  forTensors(tensors, num, begin, end, sums,
             [&](int32_t i, int64_t lo, int64_t hi, int64_t off, double *s) {
               if (lo < hi)
                 adafactorSums(dtype, at(grad, dtype, off), master + off,
                               tensors[i].shape, lo, hi, gradScale, s);
             });
}

void zrt::adafactorShardUpdateSums(int32_t dtype, const void *grad,
                                   const AdafactorTensor *tensors, int32_t num,
                                   int64_t begin, int64_t end, float gradScale,
                                   const AdafactorConstants &k, float *state,
                                   double *sums) {
  double *updates = sums + adafactorShardSumsCount(tensors, num) - num;
  forTensors(tensors, num, begin, end, sums,
             [&](int32_t i, int64_t lo, int64_t hi, int64_t off, double *s) {
               updates[i] = 0.0;
               if (lo == hi)
                 return;
               const AdafactorShape &sh = tensors[i].shape;
               float *rowVar = state, *colVar = state + sh.batch * sh.rows;
               adafactorFactors(sh, k, rowVar, colVar, s);
               adafactorUpdateSums(dtype, at(grad, dtype, off), sh, lo, hi,
                                   gradScale, k, rowVar, colVar, state, s);
               updates[i] = s[1];
               state += sh.factored ? sh.factorCount() : hi - lo;
             });
}

void zrt::adafactorShardApply(int32_t dtype, const void *grad, float *master,
                              void *param, const AdafactorTensor *tensors,
                              int32_t num, int64_t begin, int64_t end,
                              float gradScale, const AdafactorConstants &k,
                              const float *state, double *sums) {
  const double *updates = sums + adafactorShardSumsCount(tensors, num) - num;
  forTensors(tensors, num, begin, end, sums,
             [&](int32_t i, int64_t lo, int64_t hi, int64_t off, double *s) {
               if (lo == hi)
                 return;
               const AdafactorShape &sh = tensors[i].shape;
               s[1] = updates[i];
               void *p =
                   param ? const_cast<char *>(at(param, dtype, off)) : nullptr;
               const float *rowVar = state,
                           *colVar = state + sh.batch * sh.rows;
               adafactorApply(dtype, at(grad, dtype, off), master + off, p, sh,
                              lo, hi, gradScale, k, rowVar, colVar, state, s);
               state += sh.factored ? sh.factorCount() : hi - lo;
             });
}
