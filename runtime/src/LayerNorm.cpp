//===- LayerNorm.cpp - Layer and RMS normalization over the last dim -----===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"
#include "Trace.h"
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

} // namespace

extern "C" void zrt_layer_norm(int32_t dtype, const void *x, const void *w,
                               const void *b, void *y, int64_t rows,
                               int64_t cols, double eps) {
  KernelSpan span("zrt_layer_norm");
  checkDims("zrt_layer_norm", rows, cols);
  if (cols == 0)
    return;
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *xv = static_cast<const T *>(x);
    const T *wv = static_cast<const T *>(w);
    const T *bv = static_cast<const T *>(b);
    T *yv = static_cast<T *>(y);
    parallelFor(rows, rowGrain(cols), [&](int64_t begin, int64_t end) {
      alignas(64) float bufX[kBlock], bufW[kBlock], bufB[kBlock],
          bufOut[kBlock];
      for (int64_t r = begin; r < end; ++r) {
        const T *row = xv + r * cols;
        T *out = yv + r * cols;
        Moments mo = rowMoments(row, cols, float(eps), bufX);
        forBlocks(row, cols, bufX,
                  [&](const float *xs, int64_t off, int64_t len) {
                    const float *ws = loadF32(wv + off, len, bufW);
                    const float *bs = loadF32(bv + off, len, bufB);
                    float *o = outF32(out + off, bufOut);
#pragma omp simd
                    for (int64_t t = 0; t < len; ++t)
                      o[t] = (xs[t] - mo.mean) * mo.rstd * ws[t] + bs[t];
                    storeF32(o, out + off, len);
                  });
      }
    });
  });
}

extern "C" void zrt_layer_norm_grad(int32_t dtype, const void *x, const void *w,
                                    const void *dy, void *dx, void *dw,
                                    void *db, int64_t rows, int64_t cols,
                                    double eps) {
  KernelSpan span("zrt_layer_norm_grad");
  checkDims("zrt_layer_norm_grad", rows, cols);
  if (cols == 0)
    return;
  Scratch scratch(zrt_scratch_layer_norm_grad(rows, cols));
  Moments *moments = scratch.as<Moments>();
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *xv = static_cast<const T *>(x);
    const T *wv = static_cast<const T *>(w);
    const T *gv = static_cast<const T *>(dy);
    T *dxv = static_cast<T *>(dx);
    // dx = rstd * (w dy - mean(w dy) - xhat * mean(w dy xhat)), row by row.
    parallelFor(rows, rowGrain(cols), [&](int64_t begin, int64_t end) {
      alignas(64) float bufX[kBlock], bufW[kBlock], bufG[kBlock],
          bufOut[kBlock];
      for (int64_t r = begin; r < end; ++r) {
        const T *row = xv + r * cols, *grow = gv + r * cols;
        T *out = dxv + r * cols;
        Moments mo = rowMoments(row, cols, float(eps), bufX);
        moments[r] = mo;
        float sumWg = 0.0f, sumWgXhat = 0.0f;
        forBlocks(row, cols, bufX,
                  [&](const float *xs, int64_t off, int64_t len) {
                    const float *ws = loadF32(wv + off, len, bufW);
                    const float *gs = loadF32(grow + off, len, bufG);
#pragma omp simd reduction(+ : sumWg, sumWgXhat)
                    for (int64_t t = 0; t < len; ++t) {
                      float wg = ws[t] * gs[t];
                      sumWg += wg;
                      sumWgXhat += wg * (xs[t] - mo.mean) * mo.rstd;
                    }
                  });
        float meanWg = sumWg / float(cols);
        float meanWgXhat = sumWgXhat / float(cols);
        forBlocks(
            row, cols, bufX, [&](const float *xs, int64_t off, int64_t len) {
              const float *ws = loadF32(wv + off, len, bufW);
              const float *gs = loadF32(grow + off, len, bufG);
              float *o = outF32(out + off, bufOut);
#pragma omp simd
              for (int64_t t = 0; t < len; ++t) {
                float xhat = (xs[t] - mo.mean) * mo.rstd;
                o[t] = mo.rstd * (ws[t] * gs[t] - meanWg - xhat * meanWgXhat);
              }
              storeF32(o, out + off, len);
            });
      }
    });
    // dw = sum_rows dy * xhat, db = sum_rows dy.
    T *dwv = static_cast<T *>(dw);
    T *dbv = static_cast<T *>(db);
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
  });
}

extern "C" void zrt_rms_norm(int32_t dtype, const void *x, const void *w,
                             void *y, int64_t rows, int64_t cols, double eps) {
  KernelSpan span("zrt_rms_norm");
  checkDims("zrt_rms_norm", rows, cols);
  if (cols == 0)
    return;
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *xv = static_cast<const T *>(x);
    const T *wv = static_cast<const T *>(w);
    T *yv = static_cast<T *>(y);
    parallelFor(rows, rowGrain(cols), [&](int64_t begin, int64_t end) {
      alignas(64) float bufX[kBlock], bufW[kBlock], bufOut[kBlock];
      for (int64_t r = begin; r < end; ++r) {
        const T *row = xv + r * cols;
        T *out = yv + r * cols;
        float rstd = rowRmsRstd(row, cols, float(eps), bufX);
        forBlocks(row, cols, bufX,
                  [&](const float *xs, int64_t off, int64_t len) {
                    const float *ws = loadF32(wv + off, len, bufW);
                    float *o = outF32(out + off, bufOut);
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
    });
  });
}

extern "C" void zrt_rms_norm_grad(int32_t dtype, const void *x, const void *w,
                                  const void *dy, void *dx, void *dw,
                                  int64_t rows, int64_t cols, double eps) {
  KernelSpan span("zrt_rms_norm_grad");
  checkDims("zrt_rms_norm_grad", rows, cols);
  if (cols == 0)
    return;
  Scratch scratch(zrt_scratch_rms_norm_grad(rows, cols));
  float *rstds = scratch.as<float>();
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *xv = static_cast<const T *>(x);
    const T *wv = static_cast<const T *>(w);
    const T *gv = static_cast<const T *>(dy);
    T *dxv = static_cast<T *>(dx);
    // dx = rstd * (w dy - n * mean(w dy n)), row by row.
    parallelFor(rows, rowGrain(cols), [&](int64_t begin, int64_t end) {
      alignas(64) float bufX[kBlock], bufW[kBlock], bufG[kBlock],
          bufOut[kBlock];
      for (int64_t r = begin; r < end; ++r) {
        const T *row = xv + r * cols, *grow = gv + r * cols;
        T *out = dxv + r * cols;
        float rstd = rowRmsRstd(row, cols, float(eps), bufX);
        rstds[r] = rstd;
        float sumWgN = 0.0f;
        forBlocks(row, cols, bufX,
                  [&](const float *xs, int64_t off, int64_t len) {
                    const float *ws = loadF32(wv + off, len, bufW);
                    const float *gs = loadF32(grow + off, len, bufG);
#pragma omp simd reduction(+ : sumWgN)
                    for (int64_t t = 0; t < len; ++t)
                      sumWgN += ws[t] * gs[t] * (xs[t] * rstd);
                  });
        float meanWgN = sumWgN / float(cols);
        forBlocks(
            row, cols, bufX, [&](const float *xs, int64_t off, int64_t len) {
              const float *ws = loadF32(wv + off, len, bufW);
              const float *gs = loadF32(grow + off, len, bufG);
              float *o = outF32(out + off, bufOut);
#pragma omp simd
              for (int64_t t = 0; t < len; ++t)
                o[t] = rmsNormGrad(xs[t] * rstd, ws[t] * gs[t], meanWgN, rstd);
              storeF32(o, out + off, len);
            });
      }
    });
    // dw = sum_rows dy * n, with n rounded to T as the forward multiplied
    // it by w.
    T *dwv = static_cast<T *>(dw);
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
  });
}
