//===- LayerNorm.cu - Layer and RMS normalization over the last dim ------===//
//
// Part of the zero-mlir project.
//
// Two-pass mean and biased variance in fp32 per row (a warp per row held in
// registers up to kWarpCols elements, else a block per row). The backward
// keeps each row's mean and rstd in the planned scratch (8 bytes per row)
// for the dw/db column sums, which a column-tiled kernel adds in a fixed
// order. The RMS norm (Llama) has the same structure with one statistic:
// the sum of squares, its rstd kept in 4 bytes per row for the dw sums.
//
// The arithmetic pins every rounding (__fmul_rn, fmaf): the aligned and
// misaligned instantiations of a kernel must give the same bits, and with
// plain `a * b + c` ptxas decides per instantiation whether to fuse.
//
//===----------------------------------------------------------------------===//

#include "Kernels/CudaKernels.h"
#include "Kernels/DeviceUtil.cuh"
#include "Support/Support.h"
#include "zero_rt/scratch.h"

using namespace zrt;
using namespace zrt::cuda;

namespace {

/// Mean and 1/sqrt(biased variance + eps) of a warp-held row (padding is
/// zero and skipped).
template <typename T, int kIters>
__device__ inline float2 warpMoments(const float *v, int64_t cols, int lane,
                                     float eps) {
  constexpr int kVec = vecWidth<T>();
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kIters * kVec; ++i)
    sum += v[i];
  float mean = warpSum(sum) / float(cols);
  float sq = 0.0f;
#pragma unroll
  for (int k = 0; k < kIters; ++k)
#pragma unroll
    for (int e = 0; e < kVec; ++e)
      if (warpCol<T>(k, lane, e) < cols) {
        float d = v[k * kVec + e] - mean;
        sq = fmaf(d, d, sq);
      }
  return make_float2(mean, 1.0f / sqrtf(warpSum(sq) / float(cols) + eps));
}

/// (x - mean) * rstd.
__device__ inline float xhatOf(float x, float2 mo) {
  return __fmul_rn(x - mo.x, mo.y);
}

/// xhat * w + b.
__device__ inline float normalize(float x, float2 mo, float w, float b) {
  return fmaf(xhatOf(x, mo), w, b);
}

/// rstd * (w dy - mean(w dy) - xhat * mean(w dy xhat)).
__device__ inline float gradOf(float x, float2 mo, float wg, float meanWg,
                               float meanWgXhat) {
  return __fmul_rn(mo.y, fmaf(-xhatOf(x, mo), meanWgXhat, wg - meanWg));
}

template <bool kAligned, typename T>
__device__ inline float2 blockMoments(const T *row, int64_t cols, float eps,
                                      float *red) {
  constexpr int kVec = vecWidth<T>();
  float sum = 0.0f;
  forBlockRow<kAligned>(row, cols, [&](int64_t, const float *v) {
#pragma unroll
    for (int e = 0; e < kVec; ++e)
      sum += v[e];
  });
  float mean = blockSum(sum, red) / float(cols);
  float sq = 0.0f;
  forBlockRow<kAligned>(row, cols, [&](int64_t c, const float *v) {
#pragma unroll
    for (int e = 0; e < kVec; ++e)
      if (c + e < cols) {
        float d = v[e] - mean;
        sq = fmaf(d, d, sq);
      }
  });
  return make_float2(mean, 1.0f / sqrtf(blockSum(sq, red) / float(cols) + eps));
}

template <typename T, int kIters, bool kAligned>
__global__ void __launch_bounds__(kRowWarpThreads)
    layerNormWarpKernel(const T *x, const T *w, const T *b, T *y, int64_t rows,
                        int64_t cols, float eps) {
  constexpr int kVec = vecWidth<T>();
  int lane = threadIdx.x % 32;
  for (int64_t r = globalThread() / 32; r < rows; r += globalThreads() / 32) {
    float v[kIters * kVec];
    warpLoadRow<kIters, kAligned>(x + r * cols, cols, lane, v);
    float2 mo = warpMoments<T, kIters>(v, cols, lane, eps);
#pragma unroll
    for (int k = 0; k < kIters; ++k) {
      float ws[kVec], bs[kVec];
      int64_t c = warpCol<T>(k, lane, 0);
      loadSpan<kVec, kAligned>(w, c, cols, ws);
      loadSpan<kVec, kAligned>(b, c, cols, bs);
#pragma unroll
      for (int e = 0; e < kVec; ++e)
        v[k * kVec + e] = normalize(v[k * kVec + e], mo, ws[e], bs[e]);
    }
    warpStoreRow<kIters, kAligned>(y + r * cols, cols, lane, v);
  }
}

template <typename T, bool kAligned>
__global__ void __launch_bounds__(kRowBlockThreads)
    layerNormBlockKernel(const T *x, const T *w, const T *b, T *y, int64_t rows,
                         int64_t cols, float eps) {
  constexpr int kVec = vecWidth<T>();
  __shared__ float red[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *xr = x + r * cols;
    T *yr = y + r * cols;
    float2 mo = blockMoments<kAligned>(xr, cols, eps, red);
    forBlockRow<kAligned>(xr, cols, [&](int64_t c, const float *v) {
      float ws[kVec], bs[kVec], o[kVec];
      loadSpan<kVec, kAligned>(w, c, cols, ws);
      loadSpan<kVec, kAligned>(b, c, cols, bs);
#pragma unroll
      for (int e = 0; e < kVec; ++e)
        o[e] = normalize(v[e], mo, ws[e], bs[e]);
      storeSpan<kVec, kAligned>(yr, c, cols, o);
    });
  }
}

// dx = rstd * (w dy - mean(w dy) - xhat * mean(w dy xhat)), row by row, as
// the CPU backend; each row's moments go to `moments` for dw and db.

template <typename T, int kIters, bool kAligned>
__global__ void __launch_bounds__(kRowWarpThreads)
    layerNormGradWarpKernel(const T *x, const T *w, const T *dy, T *dx,
                            float2 *moments, int64_t rows, int64_t cols,
                            float eps) {
  constexpr int kVec = vecWidth<T>();
  int lane = threadIdx.x % 32;
  for (int64_t r = globalThread() / 32; r < rows; r += globalThreads() / 32) {
    float xv[kIters * kVec], gv[kIters * kVec];
    warpLoadRow<kIters, kAligned>(x + r * cols, cols, lane, xv);
    warpLoadRow<kIters, kAligned>(dy + r * cols, cols, lane, gv);
    float2 mo = warpMoments<T, kIters>(xv, cols, lane, eps);
    if (lane == 0)
      moments[r] = mo;
    // Padding has w = dy = 0, so it adds nothing.
    float sumWg = 0.0f, sumWgXhat = 0.0f;
#pragma unroll
    for (int k = 0; k < kIters; ++k) {
      float ws[kVec];
      loadSpan<kVec, kAligned>(w, warpCol<T>(k, lane, 0), cols, ws);
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        float wg = __fmul_rn(ws[e], gv[k * kVec + e]);
        sumWg += wg;
        sumWgXhat = fmaf(wg, xhatOf(xv[k * kVec + e], mo), sumWgXhat);
      }
    }
    float meanWg = warpSum(sumWg) / float(cols);
    float meanWgXhat = warpSum(sumWgXhat) / float(cols);
#pragma unroll
    for (int k = 0; k < kIters; ++k) {
      float ws[kVec];
      loadSpan<kVec, kAligned>(w, warpCol<T>(k, lane, 0), cols, ws);
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        int i = k * kVec + e;
        xv[i] = gradOf(xv[i], mo, __fmul_rn(ws[e], gv[i]), meanWg, meanWgXhat);
      }
    }
    warpStoreRow<kIters, kAligned>(dx + r * cols, cols, lane, xv);
  }
}

template <typename T, bool kAligned>
__global__ void __launch_bounds__(kRowBlockThreads)
    layerNormGradBlockKernel(const T *x, const T *w, const T *dy, T *dx,
                             float2 *moments, int64_t rows, int64_t cols,
                             float eps) {
  constexpr int kVec = vecWidth<T>();
  __shared__ float red[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *xr = x + r * cols, *gr = dy + r * cols;
    T *dxr = dx + r * cols;
    float2 mo = blockMoments<kAligned>(xr, cols, eps, red);
    if (threadIdx.x == 0)
      moments[r] = mo;
    float sumWg = 0.0f, sumWgXhat = 0.0f;
    forBlockRow<kAligned>(xr, cols, [&](int64_t c, const float *v) {
      float ws[kVec], gs[kVec];
      loadSpan<kVec, kAligned>(w, c, cols, ws);
      loadSpan<kVec, kAligned>(gr, c, cols, gs);
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        float wg = __fmul_rn(ws[e], gs[e]);
        sumWg += wg;
        sumWgXhat = fmaf(wg, xhatOf(v[e], mo), sumWgXhat);
      }
    });
    float meanWg = blockSum(sumWg, red) / float(cols);
    float meanWgXhat = blockSum(sumWgXhat, red) / float(cols);
    forBlockRow<kAligned>(xr, cols, [&](int64_t c, const float *v) {
      float ws[kVec], gs[kVec], o[kVec];
      loadSpan<kVec, kAligned>(w, c, cols, ws);
      loadSpan<kVec, kAligned>(gr, c, cols, gs);
#pragma unroll
      for (int e = 0; e < kVec; ++e)
        o[e] = gradOf(v[e], mo, __fmul_rn(ws[e], gs[e]), meanWg, meanWgXhat);
      storeSpan<kVec, kAligned>(dxr, c, cols, o);
    });
  }
}

/// dw = sum_rows dy * xhat, db = sum_rows dy.
template <typename T>
__global__ void __launch_bounds__(kColumnThreads)
    layerNormParamGradKernel(const T *x, const T *dy, const float2 *moments,
                             T *dw, T *db, int64_t rows, int64_t cols) {
  columnReduce<2>(
      rows, cols,
      [&](int64_t r, int64_t c, float *acc) {
        float2 mo = moments[r];
        float g = toF32(dy[r * cols + c]);
        acc[0] = fmaf(g, xhatOf(toF32(x[r * cols + c]), mo), acc[0]);
        acc[1] += g;
      },
      [&](int64_t c, const float *sums) {
        dw[c] = fromF32<T>(sums[0]);
        db[c] = fromF32<T>(sums[1]);
      });
}

//===----------------------------------------------------------------------===//
// RMS norm
//===----------------------------------------------------------------------===//

/// rsqrt(mean(x^2) + eps) of a warp-held row (padding is zero).
template <typename T, int kIters>
__device__ inline float warpRmsRstd(const float *v, int64_t cols, float eps) {
  constexpr int kVec = vecWidth<T>();
  float sq = 0.0f;
#pragma unroll
  for (int i = 0; i < kIters * kVec; ++i)
    sq = fmaf(v[i], v[i], sq);
  return rmsNormRstd(warpSum(sq), cols, eps);
}

template <bool kAligned, typename T>
__device__ inline float blockRmsRstd(const T *row, int64_t cols, float eps,
                                     float *red) {
  constexpr int kVec = vecWidth<T>();
  float sq = 0.0f;
  forBlockRow<kAligned>(row, cols, [&](int64_t, const float *v) {
#pragma unroll
    for (int e = 0; e < kVec; ++e)
      sq = fmaf(v[e], v[e], sq);
  });
  return rmsNormRstd(blockSum(sq, red), cols, eps);
}

/// x * rstd rounded to T (the identity for float), the value the forward
/// multiplies by the weight.
template <typename T>
__device__ inline float rmsNormalized(float x, float rstd) {
  return toF32(fromF32<T>(__fmul_rn(x, rstd)));
}

template <typename T, int kIters, bool kAligned>
__global__ void __launch_bounds__(kRowWarpThreads)
    rmsNormWarpKernel(const T *x, const T *w, T *y, int64_t rows, int64_t cols,
                      float eps) {
  constexpr int kVec = vecWidth<T>();
  int lane = threadIdx.x % 32;
  for (int64_t r = globalThread() / 32; r < rows; r += globalThreads() / 32) {
    float v[kIters * kVec];
    warpLoadRow<kIters, kAligned>(x + r * cols, cols, lane, v);
    float rstd = warpRmsRstd<T, kIters>(v, cols, eps);
#pragma unroll
    for (int k = 0; k < kIters; ++k) {
      float ws[kVec];
      loadSpan<kVec, kAligned>(w, warpCol<T>(k, lane, 0), cols, ws);
#pragma unroll
      for (int e = 0; e < kVec; ++e)
        v[k * kVec + e] = rmsNormalized<T>(v[k * kVec + e], rstd) * ws[e];
    }
    warpStoreRow<kIters, kAligned>(y + r * cols, cols, lane, v);
  }
}

template <typename T, bool kAligned>
__global__ void __launch_bounds__(kRowBlockThreads)
    rmsNormBlockKernel(const T *x, const T *w, T *y, int64_t rows, int64_t cols,
                       float eps) {
  constexpr int kVec = vecWidth<T>();
  __shared__ float red[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *xr = x + r * cols;
    T *yr = y + r * cols;
    float rstd = blockRmsRstd<kAligned>(xr, cols, eps, red);
    forBlockRow<kAligned>(xr, cols, [&](int64_t c, const float *v) {
      float ws[kVec], o[kVec];
      loadSpan<kVec, kAligned>(w, c, cols, ws);
#pragma unroll
      for (int e = 0; e < kVec; ++e)
        o[e] = rmsNormalized<T>(v[e], rstd) * ws[e];
      storeSpan<kVec, kAligned>(yr, c, cols, o);
    });
  }
}

// dx = rstd * (w dy - n * mean(w dy n)) with n = x * rstd, row by row, as
// the CPU backend (zrt::rmsNormGrad); each row's rstd goes to `rstds` for dw.

template <typename T, int kIters, bool kAligned>
__global__ void __launch_bounds__(kRowWarpThreads)
    rmsNormGradWarpKernel(const T *x, const T *w, const T *dy, T *dx,
                          float *rstds, int64_t rows, int64_t cols, float eps) {
  constexpr int kVec = vecWidth<T>();
  int lane = threadIdx.x % 32;
  for (int64_t r = globalThread() / 32; r < rows; r += globalThreads() / 32) {
    float xv[kIters * kVec], gv[kIters * kVec];
    warpLoadRow<kIters, kAligned>(x + r * cols, cols, lane, xv);
    warpLoadRow<kIters, kAligned>(dy + r * cols, cols, lane, gv);
    float rstd = warpRmsRstd<T, kIters>(xv, cols, eps);
    if (lane == 0)
      rstds[r] = rstd;
    // Padding has x = w = dy = 0, so it adds nothing.
    float sumWgN = 0.0f;
#pragma unroll
    for (int k = 0; k < kIters; ++k) {
      float ws[kVec];
      loadSpan<kVec, kAligned>(w, warpCol<T>(k, lane, 0), cols, ws);
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        int i = k * kVec + e;
        sumWgN = fmaf(__fmul_rn(ws[e], gv[i]), __fmul_rn(xv[i], rstd), sumWgN);
      }
    }
    float meanWgN = warpSum(sumWgN) / float(cols);
#pragma unroll
    for (int k = 0; k < kIters; ++k) {
      float ws[kVec];
      loadSpan<kVec, kAligned>(w, warpCol<T>(k, lane, 0), cols, ws);
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        int i = k * kVec + e;
        xv[i] = rmsNormGrad(__fmul_rn(xv[i], rstd), __fmul_rn(ws[e], gv[i]),
                            meanWgN, rstd);
      }
    }
    warpStoreRow<kIters, kAligned>(dx + r * cols, cols, lane, xv);
  }
}

template <typename T, bool kAligned>
__global__ void __launch_bounds__(kRowBlockThreads)
    rmsNormGradBlockKernel(const T *x, const T *w, const T *dy, T *dx,
                           float *rstds, int64_t rows, int64_t cols,
                           float eps) {
  constexpr int kVec = vecWidth<T>();
  __shared__ float red[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *xr = x + r * cols, *gr = dy + r * cols;
    T *dxr = dx + r * cols;
    float rstd = blockRmsRstd<kAligned>(xr, cols, eps, red);
    if (threadIdx.x == 0)
      rstds[r] = rstd;
    float sumWgN = 0.0f;
    forBlockRow<kAligned>(xr, cols, [&](int64_t c, const float *v) {
      float ws[kVec], gs[kVec];
      loadSpan<kVec, kAligned>(w, c, cols, ws);
      loadSpan<kVec, kAligned>(gr, c, cols, gs);
#pragma unroll
      for (int e = 0; e < kVec; ++e)
        sumWgN = fmaf(__fmul_rn(ws[e], gs[e]), __fmul_rn(v[e], rstd), sumWgN);
    });
    float meanWgN = blockSum(sumWgN, red) / float(cols);
    forBlockRow<kAligned>(xr, cols, [&](int64_t c, const float *v) {
      float ws[kVec], gs[kVec], o[kVec];
      loadSpan<kVec, kAligned>(w, c, cols, ws);
      loadSpan<kVec, kAligned>(gr, c, cols, gs);
#pragma unroll
      for (int e = 0; e < kVec; ++e)
        o[e] = rmsNormGrad(__fmul_rn(v[e], rstd), __fmul_rn(ws[e], gs[e]),
                           meanWgN, rstd);
      storeSpan<kVec, kAligned>(dxr, c, cols, o);
    });
  }
}

/// dw = sum_rows dy * n, with n rounded to T as the forward used it.
template <typename T>
__global__ void __launch_bounds__(kColumnThreads)
    rmsNormWeightGradKernel(const T *x, const T *dy, const float *rstds, T *dw,
                            int64_t rows, int64_t cols) {
  columnReduce<1>(
      rows, cols,
      [&](int64_t r, int64_t c, float *acc) {
        float n = rmsNormalized<T>(toF32(x[r * cols + c]), rstds[r]);
        acc[0] = fmaf(toF32(dy[r * cols + c]), n, acc[0]);
      },
      [&](int64_t c, const float *sums) { dw[c] = fromF32<T>(sums[0]); });
}

/// The backward of a layer norm (kLayer) or an RMS norm: dx row by row (a
/// warp or a block per row), each row's statistics kept in the planned
/// scratch (mean and rstd, or rstd), then dw (and db) by the column-tile
/// reduction over them.
template <bool kLayer>
void normGrad(const char *kernel, int32_t dtype, const void *x, const void *w,
              const void *dy, void *dx, void *dw, void *db, int64_t rows,
              int64_t cols, double eps) {
  checkDims(kernel, rows, cols);
  dispatch(dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    if (cols == 0)
      return;
    // Exactly the planned scratch.
    using Stat = std::conditional_t<kLayer, float2, float>;
    DeviceScratch scratch(kLayer ? zrt_scratch_layer_norm_grad(rows, cols)
                                 : zrt_scratch_rms_norm_grad(rows, cols));
    Stat *stats = scratch.as<Stat>();
    const T *xv = static_cast<const T *>(x);
    const T *wv = static_cast<const T *>(w);
    const T *gv = static_cast<const T *>(dy);
    T *dxv = static_cast<T *>(dx);
    cudaStream_t stream = computeStream();
    float e = float(eps);
    if (rows > 0) {
      launchRows<T>(
          rows, cols, rowsAligned<T>(cols, {xv, wv, gv, dxv}),
          [&](auto iters, auto aligned, unsigned grid, int threads) {
            constexpr int kIters = decltype(iters)::value;
            constexpr bool kAligned = decltype(aligned)::value;
            if constexpr (kLayer && kIters > 0)
              layerNormGradWarpKernel<T, kIters, kAligned>
                  <<<grid, threads, 0, stream>>>(xv, wv, gv, dxv, stats, rows,
                                                 cols, e);
            else if constexpr (kLayer)
              layerNormGradBlockKernel<T, kAligned>
                  <<<grid, threads, 0, stream>>>(xv, wv, gv, dxv, stats, rows,
                                                 cols, e);
            else if constexpr (kIters > 0)
              rmsNormGradWarpKernel<T, kIters, kAligned>
                  <<<grid, threads, 0, stream>>>(xv, wv, gv, dxv, stats, rows,
                                                 cols, e);
            else
              rmsNormGradBlockKernel<T, kAligned><<<grid, threads, 0, stream>>>(
                  xv, wv, gv, dxv, stats, rows, cols, e);
          });
      checkLaunch(kernel);
    }
    // With no rows, dw and db are zero.
    unsigned grid = gridFor((cols + kColTile - 1) / kColTile, 1);
    dim3 block(kColTile, kRowLanes);
    if constexpr (kLayer)
      layerNormParamGradKernel<T>
          <<<grid, block, 0, stream>>>(xv, gv, stats, static_cast<T *>(dw),
                                       static_cast<T *>(db), rows, cols);
    else
      rmsNormWeightGradKernel<T><<<grid, block, 0, stream>>>(
          xv, gv, stats, static_cast<T *>(dw), rows, cols);
    checkLaunch(kernel);
  });
}

} // namespace

void zrt::cuda::layerNorm(int32_t dtype, const void *x, const void *w,
                          const void *b, void *y, int64_t rows, int64_t cols,
                          double eps) {
  checkDims("zrt_layer_norm", rows, cols);
  dispatch(dtype, "zrt_layer_norm", [&](auto tag) {
    using T = decltype(tag);
    if (rows == 0 || cols == 0)
      return;
    const T *xv = static_cast<const T *>(x);
    const T *wv = static_cast<const T *>(w);
    const T *bv = static_cast<const T *>(b);
    T *yv = static_cast<T *>(y);
    cudaStream_t stream = computeStream();
    float e = float(eps);
    launchRows<T>(
        rows, cols, rowsAligned<T>(cols, {xv, wv, bv, yv}),
        [&](auto iters, auto aligned, unsigned grid, int threads) {
          constexpr int kIters = decltype(iters)::value;
          constexpr bool kAligned = decltype(aligned)::value;
          if constexpr (kIters > 0)
            layerNormWarpKernel<T, kIters, kAligned>
                <<<grid, threads, 0, stream>>>(xv, wv, bv, yv, rows, cols, e);
          else
            layerNormBlockKernel<T, kAligned>
                <<<grid, threads, 0, stream>>>(xv, wv, bv, yv, rows, cols, e);
        });
    checkLaunch("zrt_layer_norm");
  });
}

void zrt::cuda::rmsNorm(int32_t dtype, const void *x, const void *w, void *y,
                        int64_t rows, int64_t cols, double eps) {
  checkDims("zrt_rms_norm", rows, cols);
  dispatch(dtype, "zrt_rms_norm", [&](auto tag) {
    using T = decltype(tag);
    if (rows == 0 || cols == 0)
      return;
    const T *xv = static_cast<const T *>(x);
    const T *wv = static_cast<const T *>(w);
    T *yv = static_cast<T *>(y);
    cudaStream_t stream = computeStream();
    float e = float(eps);
    launchRows<T>(
        rows, cols, rowsAligned<T>(cols, {xv, wv, yv}),
        [&](auto iters, auto aligned, unsigned grid, int threads) {
          constexpr int kIters = decltype(iters)::value;
          constexpr bool kAligned = decltype(aligned)::value;
          if constexpr (kIters > 0)
            rmsNormWarpKernel<T, kIters, kAligned>
                <<<grid, threads, 0, stream>>>(xv, wv, yv, rows, cols, e);
          else
            rmsNormBlockKernel<T, kAligned>
                <<<grid, threads, 0, stream>>>(xv, wv, yv, rows, cols, e);
        });
    checkLaunch("zrt_rms_norm");
  });
}

void zrt::cuda::layerNormGrad(int32_t dtype, const void *x, const void *w,
                              const void *dy, void *dx, void *dw, void *db,
                              int64_t rows, int64_t cols, double eps) {
  normGrad<true>("zrt_layer_norm_grad", dtype, x, w, dy, dx, dw, db, rows, cols,
                 eps);
}

void zrt::cuda::rmsNormGrad(int32_t dtype, const void *x, const void *w,
                            const void *dy, void *dx, void *dw, int64_t rows,
                            int64_t cols, double eps) {
  normGrad<false>("zrt_rms_norm_grad", dtype, x, w, dy, dx, dw, nullptr, rows,
                  cols, eps);
}
