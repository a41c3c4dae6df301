//===- LayerNorm.cpp - Layer and RMS normalization over the last dim -----===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "Device/Memory.h"
#include "Driver/Trace.h"
#include "Kernels/Kernels.h"
#include "zero_rt/scratch.h"

using namespace zrt;

namespace {

struct Moments {
  float mean;
  float rstd;
};

/// Two-pass mean and 1/sqrt(biased variance + eps) of one row, in fp32.
template <typename T>
Moments rowMoments(const T *row, int64_t n, float eps, float *buf) {
  float sum = 0.0f;
  forBlocks(row, n, buf, [&](const float *x, int64_t, int64_t len) {
#pragma omp simd reduction(+ : sum)
    for (int64_t t = 0; t < len; ++t)
      sum += x[t];
  });
  float mean = sum / float(n);
  float sq = 0.0f;
  forBlocks(row, n, buf, [&](const float *x, int64_t, int64_t len) {
#pragma omp simd reduction(+ : sq)
    for (int64_t t = 0; t < len; ++t)
      sq += (x[t] - mean) * (x[t] - mean);
  });
  return {mean, 1.0f / std::sqrt(sq / float(n) + eps)};
}

/// rsqrt(mean(x^2) + eps) of one row, in fp32.
template <typename T>
float rowRmsRstd(const T *row, int64_t n, float eps, float *buf) {
  float sq = 0.0f;
  forBlocks(row, n, buf, [&](const float *x, int64_t, int64_t len) {
#pragma omp simd reduction(+ : sq)
    for (int64_t t = 0; t < len; ++t)
      sq += x[t] * x[t];
  });
  return rmsNormRstd(sq, n, eps);
}

/// Rounds n <= kBlock fp32 values to T and back, in place: the normalized
/// value of an RMS norm as Hugging Face multiplies it by the weight.
inline void roundToStorage(float, float *, int64_t) {}
inline void roundToStorage(BF16, float *v, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    v[i] = bf16ToFloat(floatToBf16(v[i]));
}
inline void roundToStorage(F16, float *v, int64_t n) {
  F16 tmp[kBlock];
  fromFloat(v, tmp, n);
  toFloat(tmp, v, n);
}

/// The fp32 blocks of one thread of a row-wise kernel: the row, the
/// weight, a third operand (the bias, or the row of dy) and the output.
struct RowBuffers {
  alignas(64) float x[kBlock], w[kBlock], other[kBlock], out[kBlock];
};

/// Calls fn(r, buffers) for every row of `rows` rows of `cols` elements,
/// rows split over threads.
template <typename Fn>
void forEachRow(int64_t rows, int64_t cols, const Fn &fn) {
  parallelFor(rows, rowGrain(cols), [&](int64_t begin, int64_t end) {
    RowBuffers buf;
    for (int64_t r = begin; r < end; ++r)
      fn(r, buf);
  });
}

/// Calls fn(xs, ws, os, off, len) on the fp32 values of a row of `x`, the
/// weight `w` and the third operand `other`, block by block.
template <typename T, typename Fn>
void forRowBlocks(const T *x, const T *w, const T *other, int64_t cols,
                  RowBuffers &buf, const Fn &fn) {
  forBlocks(x, cols, buf.x, [&](const float *xs, int64_t off, int64_t len) {
    fn(xs, loadF32(w + off, len, buf.w), loadF32(other + off, len, buf.other),
       off, len);
  });
}

/// One row of a layer norm: (x - mean) * rstd * w + b.
template <typename T>
void layerNormRow(const T *row, const T *w, const T *b, T *out, int64_t cols,
                  float eps, RowBuffers &buf) {
  Moments mo = rowMoments(row, cols, eps, buf.x);
  forRowBlocks(row, w, b, cols, buf,
               [&](const float *xs, const float *ws, const float *bs,
                   int64_t off, int64_t len) {
                 float *o = outF32(out + off, buf.out);
#pragma omp simd
                 for (int64_t t = 0; t < len; ++t)
                   o[t] = (xs[t] - mo.mean) * mo.rstd * ws[t] + bs[t];
                 storeF32(o, out + off, len);
               });
}

/// One row of an RMS norm: x * rstd rounded to T, times w.
template <typename T>
void rmsNormRow(const T *row, const T *w, T *out, int64_t cols, float eps,
                RowBuffers &buf) {
  float rstd = rowRmsRstd(row, cols, eps, buf.x);
  forBlocks(row, cols, buf.x, [&](const float *xs, int64_t off, int64_t len) {
    const float *ws = loadF32(w + off, len, buf.w);
    float *o = outF32(out + off, buf.out);
#pragma omp simd
    for (int64_t t = 0; t < len; ++t)
      o[t] = xs[t] * rstd;
    roundToStorage(T(), o, len);
#pragma omp simd
    for (int64_t t = 0; t < len; ++t)
      o[t] *= ws[t];
    storeF32(o, out + off, len);
  });
}

/// A layer norm (kLayer) or an RMS norm (`b` unused) over the last dim.
template <bool kLayer>
void norm(const char *kernel, int32_t dtype, const void *x, const void *w,
          const void *b, void *y, int64_t rows, int64_t cols, double eps) {
  KernelSpan span(kernel);
  checkDims(kernel, rows, cols);
  if (cols == 0)
    return;
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *xv = static_cast<const T *>(x);
    const T *wv = static_cast<const T *>(w);
    T *yv = static_cast<T *>(y);
    forEachRow(rows, cols, [&](int64_t r, RowBuffers &buf) {
      if constexpr (kLayer)
        layerNormRow(xv + r * cols, wv, static_cast<const T *>(b),
                     yv + r * cols, cols, float(eps), buf);
      else
        rmsNormRow(xv + r * cols, wv, yv + r * cols, cols, float(eps), buf);
    });
  });
}

/// dx of one row of a layer norm, rstd * (w dy - mean(w dy) - xhat *
/// mean(w dy xhat)); returns the row's moments.
template <typename T>
Moments layerNormRowGrad(const T *row, const T *w, const T *grow, T *out,
                         int64_t cols, float eps, RowBuffers &buf) {
  Moments mo = rowMoments(row, cols, eps, buf.x);
  float sumWg = 0.0f, sumWgXhat = 0.0f;
  forRowBlocks(row, w, grow, cols, buf,
               [&](const float *xs, const float *ws, const float *gs, int64_t,
                   int64_t len) {
#pragma omp simd reduction(+ : sumWg, sumWgXhat)
                 for (int64_t t = 0; t < len; ++t) {
                   float wg = ws[t] * gs[t];
                   sumWg += wg;
                   sumWgXhat += wg * (xs[t] - mo.mean) * mo.rstd;
                 }
               });
  float meanWg = sumWg / float(cols);
  float meanWgXhat = sumWgXhat / float(cols);
  forRowBlocks(row, w, grow, cols, buf,
               [&](const float *xs, const float *ws, const float *gs,
                   int64_t off, int64_t len) {
                 float *o = outF32(out + off, buf.out);
#pragma omp simd
                 for (int64_t t = 0; t < len; ++t) {
                   float xhat = (xs[t] - mo.mean) * mo.rstd;
                   o[t] =
                       mo.rstd * (ws[t] * gs[t] - meanWg - xhat * meanWgXhat);
                 }
                 storeF32(o, out + off, len);
               });
  return mo;
}

/// dx of one row of an RMS norm, rstd * (w dy - n * mean(w dy n)) with n =
/// x * rstd; returns the row's rstd.
template <typename T>
float rmsNormRowGrad(const T *row, const T *w, const T *grow, T *out,
                     int64_t cols, float eps, RowBuffers &buf) {
  float rstd = rowRmsRstd(row, cols, eps, buf.x);
  float sumWgN = 0.0f;
  forRowBlocks(row, w, grow, cols, buf,
               [&](const float *xs, const float *ws, const float *gs, int64_t,
                   int64_t len) {
#pragma omp simd reduction(+ : sumWgN)
                 for (int64_t t = 0; t < len; ++t)
                   sumWgN += ws[t] * gs[t] * (xs[t] * rstd);
               });
  float meanWgN = sumWgN / float(cols);
  forRowBlocks(row, w, grow, cols, buf,
               [&](const float *xs, const float *ws, const float *gs,
                   int64_t off, int64_t len) {
                 float *o = outF32(out + off, buf.out);
#pragma omp simd
                 for (int64_t t = 0; t < len; ++t)
                   o[t] =
                       rmsNormGrad(xs[t] * rstd, ws[t] * gs[t], meanWgN, rstd);
                 storeF32(o, out + off, len);
               });
  return rstd;
}

/// dw = sum_rows dy * xhat, db = sum_rows dy.
template <typename T>
void layerNormParamGrads(const T *xv, const T *gv, const Moments *moments,
                         T *dwv, T *dbv, int64_t rows, int64_t cols) {
  columnReduce<2>(
      rows, cols,
      [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1, float *const *acc) {
        alignas(64) float bufX[kColBlock], bufG[kColBlock];
        int64_t len = c1 - c0;
        for (int64_t r = r0; r < r1; ++r) {
          const float *xs = loadF32(xv + r * cols + c0, len, bufX);
          const float *gs = loadF32(gv + r * cols + c0, len, bufG);
          Moments mo = moments[r];
#pragma omp simd
          for (int64_t c = 0; c < len; ++c) {
            acc[0][c] += gs[c] * (xs[c] - mo.mean) * mo.rstd;
            acc[1][c] += gs[c];
          }
        }
      },
      [&](int64_t c0, int64_t c1, const float *const *sums) {
        fromFloat(sums[0], dwv + c0, c1 - c0);
        fromFloat(sums[1], dbv + c0, c1 - c0);
      });
}

/// dw = sum_rows dy * n, with n rounded to T as the forward multiplied it
/// by w.
template <typename T>
void rmsNormWeightGrad(const T *xv, const T *gv, const float *rstds, T *dwv,
                       int64_t rows, int64_t cols) {
  columnReduce<1>(
      rows, cols,
      [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1, float *const *acc) {
        alignas(64) float bufX[kColBlock], bufG[kColBlock], bufN[kColBlock];
        int64_t len = c1 - c0;
        for (int64_t r = r0; r < r1; ++r) {
          const float *xs = loadF32(xv + r * cols + c0, len, bufX);
          const float *gs = loadF32(gv + r * cols + c0, len, bufG);
          float rstd = rstds[r];
#pragma omp simd
          for (int64_t c = 0; c < len; ++c)
            bufN[c] = xs[c] * rstd;
          roundToStorage(T(), bufN, len);
#pragma omp simd
          for (int64_t c = 0; c < len; ++c)
            acc[0][c] += gs[c] * bufN[c];
        }
      },
      [&](int64_t c0, int64_t c1, const float *const *sums) {
        fromFloat(sums[0], dwv + c0, c1 - c0);
      });
}

/// The backward of a layer norm (kLayer) or an RMS norm: dx row by row,
/// each row's statistics (moments, or rstd) kept in the planned scratch,
/// then the column sums of dw (and db) over them.
template <bool kLayer>
void normGrad(const char *kernel, int32_t dtype, const void *x, const void *w,
              const void *dy, void *dx, void *dw, void *db, int64_t rows,
              int64_t cols, double eps) {
  KernelSpan span(kernel);
  checkDims(kernel, rows, cols);
  if (cols == 0)
    return;
  using Stat = std::conditional_t<kLayer, Moments, float>;
  Scratch scratch(kLayer ? zrt_scratch_layer_norm_grad(rows, cols)
                         : zrt_scratch_rms_norm_grad(rows, cols));
  Stat *stats = scratch.as<Stat>();
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *xv = static_cast<const T *>(x);
    const T *wv = static_cast<const T *>(w);
    const T *gv = static_cast<const T *>(dy);
    T *dxv = static_cast<T *>(dx);
    forEachRow(rows, cols, [&](int64_t r, RowBuffers &buf) {
      const T *row = xv + r * cols, *grow = gv + r * cols;
      T *out = dxv + r * cols;
      if constexpr (kLayer)
        stats[r] = layerNormRowGrad(row, wv, grow, out, cols, float(eps), buf);
      else
        stats[r] = rmsNormRowGrad(row, wv, grow, out, cols, float(eps), buf);
    });
    if constexpr (kLayer)
      layerNormParamGrads(xv, gv, stats, static_cast<T *>(dw),
                          static_cast<T *>(db), rows, cols);
    else
      rmsNormWeightGrad(xv, gv, stats, static_cast<T *>(dw), rows, cols);
  });
}

} // namespace

extern "C" void zrt_layer_norm(int32_t dtype, const void *x, const void *w,
                               const void *b, void *y, int64_t rows,
                               int64_t cols, double eps) {
  norm<true>("zrt_layer_norm", dtype, x, w, b, y, rows, cols, eps);
}

extern "C" void zrt_rms_norm(int32_t dtype, const void *x, const void *w,
                             void *y, int64_t rows, int64_t cols, double eps) {
  norm<false>("zrt_rms_norm", dtype, x, w, nullptr, y, rows, cols, eps);
}

extern "C" void zrt_layer_norm_grad(int32_t dtype, const void *x, const void *w,
                                    const void *dy, void *dx, void *dw,
                                    void *db, int64_t rows, int64_t cols,
                                    double eps) {
  normGrad<true>("zrt_layer_norm_grad", dtype, x, w, dy, dx, dw, db, rows, cols,
                 eps);
}

extern "C" void zrt_rms_norm_grad(int32_t dtype, const void *x, const void *w,
                                  const void *dy, void *dx, void *dw,
                                  int64_t rows, int64_t cols, double eps) {
  normGrad<false>("zrt_rms_norm_grad", dtype, x, w, dy, dx, dw, nullptr, rows,
                  cols, eps);
}
