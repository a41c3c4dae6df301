//===- Softmax.cu - Softmax, cross-entropy and row reductions -------------===//
//
// Part of the zero-mlir project.
//
// Row-wise kernels in fp32 with max subtraction and the CPU backend's exp:
// rows up to kWarpCols elements take a warp each and stay in registers,
// longer rows take a block each and are read again from cache for every
// pass. No scratch: the cross-entropy mean is reduced through a fixed array
// of per-block partial sums in device memory, in a fixed order. The chunked
// output projection and loss (zrt_linear_cross_entropy) keeps one chunk's
// logits in the scratch zero_rt/scratch.h plans.
//
//===----------------------------------------------------------------------===//

#include "Kernels/CudaKernels.h"
#include "Kernels/DeviceUtil.cuh"
#include "Support/CudaSupport.h"
#include "Support/Support.h"

#include "zero_rt/scratch.h"

#include <algorithm>

using namespace zrt;
using namespace zrt::cuda;

namespace {

/// Blocks of the cross-entropy loss: min(rows, this), a function of the
/// shape, so the order of the final sum is fixed.
constexpr int kLossBlocks = 1024;

/// Per-block partial sums of the loss and the count of blocks done: the
/// last block to finish adds the partials in a fixed order and resets the
/// count. Launches on the compute stream never overlap, so one set (8 KiB
/// of static device memory, not scratch) suffices.
__device__ double lossPartials[kLossBlocks];
__device__ double lossCountPartials[kLossBlocks];
__device__ unsigned lossBlocksDone;
/// The rows of the gradient's mean (countLabelsKernel), read by the
/// gradient kernel that follows it on the stream.
__device__ long long gradCountedRows;
/// The loss and label count of the chunks of zrt_linear_cross_entropy so
/// far, summed by crossEntropyKernel's last block in chunk order.
__device__ double chunkedLossTotal;
__device__ double chunkedLossCount;

struct RowStats {
  float max;
  float sum; // of exp(x - max)
};

/// The maximum (a select that skips NaN, as the CPU backend) and the sum of
/// exponentials of a row, on a whole block.
template <bool kAligned, typename T>
__device__ float blockRowMax(const T *row, int64_t cols, float *red) {
  constexpr int kVec = vecWidth<T>();
  float m = -INFINITY;
  forBlockRow<kAligned>(row, cols, [&](int64_t c, const float *v) {
#pragma unroll
    for (int e = 0; e < kVec; ++e)
      if (c + e < cols)
        m = v[e] > m ? v[e] : m;
  });
  return blockMax(m, red);
}

/// The sum of exp(x - shift) over a row, on a whole block.
template <bool kAligned, typename T>
__device__ float blockRowExpSum(const T *row, int64_t cols, float shift,
                                float *red) {
  constexpr int kVec = vecWidth<T>();
  float s = 0.0f;
  forBlockRow<kAligned>(row, cols, [&](int64_t c, const float *v) {
#pragma unroll
    for (int e = 0; e < kVec; ++e)
      if (c + e < cols)
        s += expApprox(v[e] - shift);
  });
  return blockSum(s, red);
}

template <bool kAligned, typename T>
__device__ RowStats blockRowStats(const T *row, int64_t cols, float *red) {
  float m = blockRowMax<kAligned>(row, cols, red);
  return {m, blockRowExpSum<kAligned>(row, cols, m, red)};
}

template <typename T, int kIters, bool kAligned>
__global__ void __launch_bounds__(kRowWarpThreads)
    softmaxWarpKernel(const T *x, T *y, int64_t rows, int64_t cols) {
  constexpr int kVec = vecWidth<T>();
  int lane = threadIdx.x % 32;
  for (int64_t r = globalThread() / 32; r < rows; r += globalThreads() / 32) {
    float v[kIters * kVec];
    warpLoadRow<kIters, kAligned>(x + r * cols, cols, lane, v);
    float m = -INFINITY;
#pragma unroll
    for (int k = 0; k < kIters; ++k)
#pragma unroll
      for (int e = 0; e < kVec; ++e)
        if (warpCol<T>(k, lane, e) < cols)
          m = v[k * kVec + e] > m ? v[k * kVec + e] : m;
    m = warpMax(m);
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < kIters; ++k)
#pragma unroll
      for (int e = 0; e < kVec; ++e)
        if (warpCol<T>(k, lane, e) < cols) {
          v[k * kVec + e] = expApprox(v[k * kVec + e] - m);
          s += v[k * kVec + e];
        }
    float scale = 1.0f / warpSum(s);
#pragma unroll
    for (int i = 0; i < kIters * kVec; ++i)
      v[i] *= scale;
    warpStoreRow<kIters, kAligned>(y + r * cols, cols, lane, v);
  }
}

template <typename T, bool kAligned>
__global__ void __launch_bounds__(kRowBlockThreads)
    softmaxBlockKernel(const T *x, T *y, int64_t rows, int64_t cols) {
  constexpr int kVec = vecWidth<T>();
  __shared__ float red[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *xr = x + r * cols;
    T *yr = y + r * cols;
    RowStats st = blockRowStats<kAligned>(xr, cols, red);
    float scale = 1.0f / st.sum;
    forBlockRow<kAligned>(xr, cols, [&](int64_t c, const float *v) {
      float o[kVec];
#pragma unroll
      for (int e = 0; e < kVec; ++e)
        o[e] = expApprox(v[e] - st.max) * scale;
      storeSpan<kVec, kAligned>(yr, c, cols, o);
    });
  }
}

template <typename T, int kIters, bool kAligned>
__global__ void __launch_bounds__(kRowWarpThreads)
    softmaxGradWarpKernel(const T *y, const T *dy, T *dx, int64_t rows,
                          int64_t cols) {
  constexpr int kVec = vecWidth<T>();
  int lane = threadIdx.x % 32;
  for (int64_t r = globalThread() / 32; r < rows; r += globalThreads() / 32) {
    float p[kIters * kVec], g[kIters * kVec];
    warpLoadRow<kIters, kAligned>(y + r * cols, cols, lane, p);
    warpLoadRow<kIters, kAligned>(dy + r * cols, cols, lane, g);
    // Padding is zero in both, so it adds nothing.
    float dot = 0.0f;
#pragma unroll
    for (int i = 0; i < kIters * kVec; ++i)
      dot += p[i] * g[i];
    dot = warpSum(dot);
#pragma unroll
    for (int i = 0; i < kIters * kVec; ++i)
      p[i] = p[i] * (g[i] - dot);
    warpStoreRow<kIters, kAligned>(dx + r * cols, cols, lane, p);
  }
}

template <typename T, bool kAligned>
__global__ void __launch_bounds__(kRowBlockThreads)
    softmaxGradBlockKernel(const T *y, const T *dy, T *dx, int64_t rows,
                           int64_t cols) {
  constexpr int kVec = vecWidth<T>();
  __shared__ float red[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *yr = y + r * cols, *gr = dy + r * cols;
    T *dxr = dx + r * cols;
    float dot = 0.0f;
    forBlockRow<kAligned>(yr, cols, [&](int64_t c, const float *p) {
      float g[kVec];
      loadSpan<kVec, kAligned>(gr, c, cols, g);
#pragma unroll
      for (int e = 0; e < kVec; ++e)
        dot += p[e] * g[e];
    });
    dot = blockSum(dot, red);
    forBlockRow<kAligned>(yr, cols, [&](int64_t c, const float *p) {
      float g[kVec], o[kVec];
      loadSpan<kVec, kAligned>(gr, c, cols, g);
#pragma unroll
      for (int e = 0; e < kVec; ++e)
        o[e] = p[e] * (g[e] - dot);
      storeSpan<kVec, kAligned>(dxr, c, cols, o);
    });
  }
}

// The reductions over the last dimension: a block per row, with
// KernelMath.h's per-row and per-element steps.

template <typename T, bool kAligned>
__global__ void __launch_bounds__(kRowBlockThreads)
    logsumexpKernel(const T *x, T *y, int64_t rows, int64_t cols) {
  __shared__ float red[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *xr = x + r * cols;
    float shift = zrt::logsumexpShift(blockRowMax<kAligned>(xr, cols, red));
    float s = blockRowExpSum<kAligned>(xr, cols, shift, red);
    if (threadIdx.x == 0)
      y[r] = fromF32<T>(zrt::logsumexp(s, shift));
  }
}

template <typename T, bool kAligned>
__global__ void __launch_bounds__(kRowBlockThreads)
    logsumexpGradKernel(const T *x, const T *y, const T *dy, T *dx,
                        int64_t rows, int64_t cols) {
  constexpr int kVec = vecWidth<T>();
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float yr = toF32(y[r]), g = toF32(dy[r]);
    T *dxr = dx + r * cols;
    forBlockRow<kAligned>(x + r * cols, cols, [&](int64_t c, const float *v) {
      float o[kVec];
#pragma unroll
      for (int e = 0; e < kVec; ++e)
        o[e] = zrt::logsumexpGrad(v[e], yr, g);
      storeSpan<kVec, kAligned>(dxr, c, cols, o);
    });
  }
}

/// The maximum over a block that keeps NaN, as zrt::maxNaN.
__device__ float blockMaxNaN(float v, float *shared) {
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int warps = blockDim.x / 32;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v = zrt::maxNaN(v, __shfl_xor_sync(kFullMask, v, o));
  __syncthreads();
  if (lane == 0)
    shared[warp] = v;
  __syncthreads();
  v = lane < warps ? shared[lane] : -INFINITY;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v = zrt::maxNaN(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}

template <typename T, bool kAligned>
__global__ void __launch_bounds__(kRowBlockThreads)
    reduceMaxKernel(const T *x, T *y, int64_t rows, int64_t cols) {
  constexpr int kVec = vecWidth<T>();
  __shared__ float red[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float m = -INFINITY;
    forBlockRow<kAligned>(x + r * cols, cols, [&](int64_t c, const float *v) {
#pragma unroll
      for (int e = 0; e < kVec; ++e)
        if (c + e < cols)
          m = zrt::maxNaN(m, v[e]);
    });
    m = blockMaxNaN(m, red);
    if (threadIdx.x == 0)
      y[r] = fromF32<T>(m);
  }
}

template <typename T, bool kAligned>
__global__ void __launch_bounds__(kRowBlockThreads)
    reduceMaxGradKernel(const T *x, const T *y, const T *dy, T *dx,
                        int64_t rows, int64_t cols) {
  constexpr int kVec = vecWidth<T>();
  __shared__ float red[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *xr = x + r * cols;
    T *dxr = dx + r * cols;
    float yr = toF32(y[r]);
    float ties = 0.0f;
    forBlockRow<kAligned>(xr, cols, [&](int64_t c, const float *v) {
#pragma unroll
      for (int e = 0; e < kVec; ++e)
        if (c + e < cols && v[e] == yr)
          ties += 1.0f;
    });
    // Whole numbers below 2^24: the sum is exact in any order.
    float g = toF32(dy[r]) / blockSum(ties, red);
    forBlockRow<kAligned>(xr, cols, [&](int64_t c, const float *v) {
      float o[kVec];
#pragma unroll
      for (int e = 0; e < kVec; ++e)
        o[e] = zrt::reduceMaxGrad(v[e], yr, g);
      storeSpan<kVec, kAligned>(dxr, c, cols, o);
    });
  }
}

/// The loss: each block adds the terms of rows blockIdx.x, + gridDim.x, ...
/// in order (in double, as the CPU backend), the last block to finish adds
/// the block partials in a fixed tree.
template <typename T, typename I, bool kAligned>
__global__ void __launch_bounds__(kRowBlockThreads)
    crossEntropyKernel(const T *logits, const I *labels, float *loss,
                       int64_t rows, int64_t classes, int64_t cols,
                       int32_t ignore, int64_t ignoreIndex, int *error,
                       bool accumulate) {
  __shared__ float red[32];
  __shared__ double redTotal[32];
  __shared__ bool lastBlock;
  double partial = 0.0, counted = 0.0;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int64_t label = int64_t(labels[r]);
    if (ignoredLabel(label, ignore, ignoreIndex))
      continue;
    const T *row = logits + r * cols;
    RowStats st = blockRowStats<kAligned>(row, classes, red);
    if (threadIdx.x == 0) {
      counted += 1.0;
      if (label < 0 || label >= classes)
        reportDeviceError(error, kLabelOutOfRange);
      else
        partial +=
            log(double(st.sum)) + double(st.max) - double(toF32(row[label]));
    }
  }
  if (threadIdx.x == 0) {
    lossPartials[blockIdx.x] = partial;
    lossCountPartials[blockIdx.x] = counted;
    // Publish the partial before counting this block as done.
    __threadfence();
    lastBlock = atomicAdd(&lossBlocksDone, 1u) == gridDim.x - 1;
    if (lastBlock)
      __threadfence();
  }
  __syncthreads();
  if (!lastBlock)
    return;
  double total = 0.0, count = 0.0;
  for (int64_t b = threadIdx.x; b < gridDim.x; b += blockDim.x) {
    total += __ldcg(&lossPartials[b]);
    count += __ldcg(&lossCountPartials[b]);
  }
  total = blockSum(total, redTotal);
  // Whole numbers below 2^53: the sum is exact in any order.
  count = blockSum(count, redTotal);
  if (threadIdx.x == 0) {
    if (accumulate) {
      chunkedLossTotal += total;
      chunkedLossCount += count;
    } else {
      *loss = lossMean(total, int64_t(count));
    }
    lossBlocksDone = 0;
  }
}

/// *loss = the mean of the chunks' loss; resets the sums for the next call.
__global__ void finishChunkedLossKernel(float *loss) {
  *loss = lossMean(chunkedLossTotal, int64_t(chunkedLossCount));
  chunkedLossTotal = 0.0;
  chunkedLossCount = 0.0;
}

/// gradCountedRows = the rows whose label is not ignored, on one block.
template <typename I>
__global__ void __launch_bounds__(kRowBlockThreads)
    countLabelsKernel(const I *labels, int64_t rows, int64_t ignoreIndex) {
  __shared__ double red[32];
  double n = 0.0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x)
    n += ignoredLabel(int64_t(labels[r]), 1, ignoreIndex) ? 0.0 : 1.0;
  n = blockSum(n, red);
  if (threadIdx.x == 0)
    gradCountedRows = (long long)n;
}

template <typename T, typename I, bool kAligned>
__global__ void __launch_bounds__(kRowBlockThreads)
    crossEntropyGradKernel(const T *logits, const I *labels, const float *dloss,
                           T *dlogits, int64_t rows, int64_t classes,
                           int64_t cols, int32_t ignore, int64_t ignoreIndex,
                           int *error, int64_t countRows) {
  constexpr int kVec = vecWidth<T>();
  __shared__ float red[32];
  // countRows: the rows of the mean without ignore_index, which a chunk's
  // rows are only part of.
  float g = lossRowGrad(*dloss, ignore ? int64_t(gradCountedRows) : countRows);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *row = logits + r * cols;
    T *out = dlogits + r * cols;
    int64_t label = int64_t(labels[r]);
    if (ignoredLabel(label, ignore, ignoreIndex)) {
      forBlockRow<kAligned>(row, cols, [&](int64_t c, const float *) {
        float o[kVec];
#pragma unroll
        for (int e = 0; e < kVec; ++e)
          o[e] = 0.0f;
        storeSpan<kVec, kAligned>(out, c, cols, o);
      });
      continue;
    }
    if (label < 0 || label >= classes) {
      // Reported; the row is written without its one-hot term.
      if (threadIdx.x == 0)
        reportDeviceError(error, kLabelOutOfRange);
      label = -1;
    }
    RowStats st = blockRowStats<kAligned>(row, classes, red);
    float scale = g / st.sum;
    // The padding columns [classes, cols) get a zero gradient.
    forBlockRow<kAligned>(row, cols, [&](int64_t c, const float *v) {
      float o[kVec];
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        o[e] = c + e < classes ? expApprox(v[e] - st.max) * scale : 0.0f;
        if (c + e == label)
          o[e] -= g;
      }
      storeSpan<kVec, kAligned>(out, c, cols, o);
    });
  }
}

/// Checks a loss kernel's shape, then calls fn(T(), I()) with the logits'
/// and the labels' element types.
template <typename Fn>
void dispatchLoss(const char *kernel, int32_t dtype, int32_t labelType,
                  int64_t rows, int64_t classes, int64_t cols, const Fn &fn) {
  checkLoss(kernel, rows, classes, cols);
  if (rows > 0 && classes == 0)
    fatal("%s: no classes", kernel);
  dispatch(dtype, kernel, [&](auto tag) {
    dispatchIndex(labelType, kernel, [&](auto labelTag) { fn(tag, labelTag); });
  });
}

} // namespace

void zrt::cuda::softmax(int32_t dtype, const void *x, void *y, int64_t rows,
                        int64_t cols) {
  checkDims("zrt_softmax", rows, cols);
  dispatch(dtype, "zrt_softmax", [&](auto tag) {
    using T = decltype(tag);
    if (rows == 0 || cols == 0)
      return;
    const T *in = static_cast<const T *>(x);
    T *out = static_cast<T *>(y);
    cudaStream_t stream = computeStream();
    launchRows<T>(rows, cols, rowsAligned<T>(cols, {in, out}),
                  [&](auto iters, auto aligned, unsigned grid, int threads) {
                    constexpr int kIters = decltype(iters)::value;
                    constexpr bool kAligned = decltype(aligned)::value;
                    if constexpr (kIters > 0)
                      softmaxWarpKernel<T, kIters, kAligned>
                          <<<grid, threads, 0, stream>>>(in, out, rows, cols);
                    else
                      softmaxBlockKernel<T, kAligned>
                          <<<grid, threads, 0, stream>>>(in, out, rows, cols);
                  });
    checkLaunch("zrt_softmax");
  });
}

void zrt::cuda::softmaxGrad(int32_t dtype, const void *y, const void *dy,
                            void *dx, int64_t rows, int64_t cols) {
  checkDims("zrt_softmax_grad", rows, cols);
  dispatch(dtype, "zrt_softmax_grad", [&](auto tag) {
    using T = decltype(tag);
    if (rows == 0 || cols == 0)
      return;
    const T *yv = static_cast<const T *>(y);
    const T *gv = static_cast<const T *>(dy);
    T *out = static_cast<T *>(dx);
    cudaStream_t stream = computeStream();
    launchRows<T>(
        rows, cols, rowsAligned<T>(cols, {yv, gv, out}),
        [&](auto iters, auto aligned, unsigned grid, int threads) {
          constexpr int kIters = decltype(iters)::value;
          constexpr bool kAligned = decltype(aligned)::value;
          if constexpr (kIters > 0)
            softmaxGradWarpKernel<T, kIters, kAligned>
                <<<grid, threads, 0, stream>>>(yv, gv, out, rows, cols);
          else
            softmaxGradBlockKernel<T, kAligned>
                <<<grid, threads, 0, stream>>>(yv, gv, out, rows, cols);
        });
    checkLaunch("zrt_softmax_grad");
  });
}

namespace {
/// Launches a block-per-row reduction kernel over `rows` rows of `cols`
/// elements of T: launch(kAligned, grid, threads).
template <typename T, typename Launch>
void launchRowReduction(const char *kernel, int64_t rows, int64_t cols,
                        bool aligned, const Launch &launch) {
  if (rows == 0 || cols == 0)
    return;
  unsigned grid = gridFor(rows, 1);
  int threads = blockThreadsFor<T>(cols);
  if (aligned)
    launch(std::true_type(), grid, threads);
  else
    launch(std::false_type(), grid, threads);
  checkLaunch(kernel);
}
} // namespace

void zrt::cuda::logsumexp(int32_t dtype, const void *x, void *y, int64_t rows,
                          int64_t cols) {
  const char *kernel = "zrt_logsumexp";
  checkDims(kernel, rows, cols);
  dispatch(dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    const T *in = static_cast<const T *>(x);
    T *out = static_cast<T *>(y);
    launchRowReduction<T>(kernel, rows, cols, rowsAligned<T>(cols, {in}),
                          [&](auto aligned, unsigned grid, int threads) {
                            logsumexpKernel<T, decltype(aligned)::value>
                                <<<grid, threads, 0, computeStream()>>>(
                                    in, out, rows, cols);
                          });
  });
}

void zrt::cuda::logsumexpGrad(int32_t dtype, const void *x, const void *y,
                              const void *dy, void *dx, int64_t rows,
                              int64_t cols) {
  const char *kernel = "zrt_logsumexp_grad";
  checkDims(kernel, rows, cols);
  dispatch(dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    const T *xv = static_cast<const T *>(x);
    const T *yv = static_cast<const T *>(y);
    const T *gv = static_cast<const T *>(dy);
    T *out = static_cast<T *>(dx);
    launchRowReduction<T>(kernel, rows, cols, rowsAligned<T>(cols, {xv, out}),
                          [&](auto aligned, unsigned grid, int threads) {
                            logsumexpGradKernel<T, decltype(aligned)::value>
                                <<<grid, threads, 0, computeStream()>>>(
                                    xv, yv, gv, out, rows, cols);
                          });
  });
}

void zrt::cuda::reduceMax(int32_t dtype, const void *x, void *y, int64_t rows,
                          int64_t cols) {
  const char *kernel = "zrt_reduce_max";
  checkDims(kernel, rows, cols);
  dispatch(dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    const T *in = static_cast<const T *>(x);
    T *out = static_cast<T *>(y);
    launchRowReduction<T>(kernel, rows, cols, rowsAligned<T>(cols, {in}),
                          [&](auto aligned, unsigned grid, int threads) {
                            reduceMaxKernel<T, decltype(aligned)::value>
                                <<<grid, threads, 0, computeStream()>>>(
                                    in, out, rows, cols);
                          });
  });
}

void zrt::cuda::reduceMaxGrad(int32_t dtype, const void *x, const void *y,
                              const void *dy, void *dx, int64_t rows,
                              int64_t cols) {
  const char *kernel = "zrt_reduce_max_grad";
  checkDims(kernel, rows, cols);
  dispatch(dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    const T *xv = static_cast<const T *>(x);
    const T *yv = static_cast<const T *>(y);
    const T *gv = static_cast<const T *>(dy);
    T *out = static_cast<T *>(dx);
    launchRowReduction<T>(kernel, rows, cols, rowsAligned<T>(cols, {xv, out}),
                          [&](auto aligned, unsigned grid, int threads) {
                            reduceMaxGradKernel<T, decltype(aligned)::value>
                                <<<grid, threads, 0, computeStream()>>>(
                                    xv, yv, gv, out, rows, cols);
                          });
  });
}

void zrt::cuda::softmaxCrossEntropy(int32_t dtype, const void *logits,
                                    int32_t labelType, const void *labels,
                                    float *loss, int64_t rows, int64_t classes,
                                    int64_t cols, int32_t ignore,
                                    int64_t ignoreIndex) {
  const char *kernel = "zrt_softmax_cross_entropy";
  dispatchLoss(
      kernel, dtype, labelType, rows, classes, cols,
      [&](auto tag, auto labelTag) {
        using T = decltype(tag);
        using I = decltype(labelTag);
        cudaStream_t stream = computeStream();
        if (rows == 0) {
          ZRT_CUDA_CHECK(cudaMemsetAsync(loss, 0, sizeof(float), stream));
          return;
        }
        const T *x = static_cast<const T *>(logits);
        const I *l = static_cast<const I *>(labels);
        unsigned grid = unsigned(rows < kLossBlocks ? rows : kLossBlocks);
        int threads = blockThreadsFor<T>(classes);
        // Packs of a padded row may reach into its padding, never past it.
        if (rowsAligned<T>(cols, {x}))
          crossEntropyKernel<T, I, true><<<grid, threads, 0, stream>>>(
              x, l, loss, rows, classes, cols, ignore, ignoreIndex,
              deviceErrorWord(), false);
        else
          crossEntropyKernel<T, I, false><<<grid, threads, 0, stream>>>(
              x, l, loss, rows, classes, cols, ignore, ignoreIndex,
              deviceErrorWord(), false);
        checkLaunch(kernel);
      });
}

void zrt::cuda::softmaxCrossEntropyGrad(int32_t dtype, const void *logits,
                                        int32_t labelType, const void *labels,
                                        const float *dloss, void *dlogits,
                                        int64_t rows, int64_t classes,
                                        int64_t cols, int32_t ignore,
                                        int64_t ignoreIndex) {
  const char *kernel = "zrt_softmax_cross_entropy_grad";
  dispatchLoss(
      kernel, dtype, labelType, rows, classes, cols,
      [&](auto tag, auto labelTag) {
        using T = decltype(tag);
        using I = decltype(labelTag);
        if (rows == 0)
          return;
        const T *x = static_cast<const T *>(logits);
        const I *l = static_cast<const I *>(labels);
        T *out = static_cast<T *>(dlogits);
        cudaStream_t stream = computeStream();
        unsigned grid = gridFor(rows, 1);
        // The threads of an unpadded row, so that its statistics are summed
        // as there.
        int threads = blockThreadsFor<T>(classes);
        if (ignore)
          countLabelsKernel<I>
              <<<1, kRowBlockThreads, 0, stream>>>(l, rows, ignoreIndex);
        if (rowsAligned<T>(cols, {x, out}))
          crossEntropyGradKernel<T, I, true><<<grid, threads, 0, stream>>>(
              x, l, dloss, out, rows, classes, cols, ignore, ignoreIndex,
              deviceErrorWord(), rows);
        else
          crossEntropyGradKernel<T, I, false><<<grid, threads, 0, stream>>>(
              x, l, dloss, out, rows, classes, cols, ignore, ignoreIndex,
              deviceErrorWord(), rows);
        checkLaunch(kernel);
      });
}

namespace {
/// Checks a chunked loss's shape, then calls fn(T(), I()) with its element
/// and labels' types.
template <typename Fn>
void dispatchLinearLoss(const char *kernel, int32_t dtype, int32_t labelType,
                        int64_t rows, int64_t hidden, int64_t vocab,
                        int64_t chunk, const Fn &fn) {
  checkDims(kernel, rows, hidden);
  dispatchLoss(kernel, dtype, labelType, rows, vocab, vocab,
               [&](auto tag, auto labelTag) {
                 if (chunk < 1)
                   fatal("%s: chunk %lld is not positive", kernel,
                         (long long)chunk);
                 fn(tag, labelTag);
               });
}
} // namespace

// One chunk's logits at a time in the planned scratch
// (zrt_scratch_linear_cross_entropy), through the same matmul and row
// kernels as the unchunked loss (16-bit logits rounded as its matmul rounds
// them; the matmul's workspace is its own planned scratch).
void zrt::cuda::linearCrossEntropy(int32_t dtype, const void *x, const void *w,
                                   int32_t labelType, const void *labels,
                                   float *loss, int64_t rows, int64_t hidden,
                                   int64_t vocab, int64_t chunk, int32_t ignore,
                                   int64_t ignoreIndex) {
  const char *kernel = "zrt_linear_cross_entropy";
  dispatchLinearLoss(
      kernel, dtype, labelType, rows, hidden, vocab, chunk,
      [&](auto tag, auto labelTag) {
        using T = decltype(tag);
        using I = decltype(labelTag);
        cudaStream_t stream = computeStream();
        if (rows == 0) {
          ZRT_CUDA_CHECK(cudaMemsetAsync(loss, 0, sizeof(float), stream));
          return;
        }
        const T *xv = static_cast<const T *>(x);
        const I *l = static_cast<const I *>(labels);
        DeviceScratch scratch(std::min(chunk, rows) * vocab *
                              int64_t(sizeof(T)));
        T *logits = scratch.as<T>();
        int threads = blockThreadsFor<T>(vocab);
        bool aligned = rowsAligned<T>(vocab, {logits});
        for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
          int64_t n = std::min(chunk, rows - r0);
          matmul(dtype, xv + r0 * hidden, w, logits, 1, n, vocab, hidden, 0, 1,
                 0, hidden);
          unsigned grid = unsigned(n < kLossBlocks ? n : kLossBlocks);
          if (aligned)
            crossEntropyKernel<T, I, true><<<grid, threads, 0, stream>>>(
                logits, l + r0, loss, n, vocab, vocab, ignore, ignoreIndex,
                deviceErrorWord(), true);
          else
            crossEntropyKernel<T, I, false><<<grid, threads, 0, stream>>>(
                logits, l + r0, loss, n, vocab, vocab, ignore, ignoreIndex,
                deviceErrorWord(), true);
          checkLaunch(kernel);
        }
        finishChunkedLossKernel<<<1, 1, 0, stream>>>(loss);
        checkLaunch(kernel);
      });
}

// f32: dw is summed over chunks by cuBLASLt into the result. 16-bit, as the
// CPU backend: the chunk's logits gradient is rounded to 16 bits, dx's rows
// are the 16-bit matmul of it, and dw is summed in fp32 scratch from fp32
// copies of the chunk's gradient and input rows, then rounded once.
void zrt::cuda::linearCrossEntropyGrad(int32_t dtype, const void *x,
                                       const void *w, int32_t labelType,
                                       const void *labels, const float *dloss,
                                       void *dx, void *dw, int64_t rows,
                                       int64_t hidden, int64_t vocab,
                                       int64_t chunk, int32_t ignore,
                                       int64_t ignoreIndex) {
  const char *kernel = "zrt_linear_cross_entropy_grad";
  dispatchLinearLoss(
      kernel, dtype, labelType, rows, hidden, vocab, chunk,
      [&](auto tag, auto labelTag) {
        using T = decltype(tag);
        using I = decltype(labelTag);
        constexpr bool k16 = !std::is_same_v<T, float>;
        cudaStream_t stream = computeStream();
        if (rows == 0) {
          ZRT_CUDA_CHECK(cudaMemsetAsync(
              dw, 0, size_t(vocab * hidden) * sizeof(T), stream));
          return;
        }
        const T *xv = static_cast<const T *>(x);
        const I *l = static_cast<const I *>(labels);
        T *dxv = static_cast<T *>(dx);
        int64_t n0 = std::min(chunk, rows);
        // 16-bit: dw's fp32 sum, the chunk's gradient and input rows in
        // fp32, then its 16-bit logits; f32: the chunk's logits only.
        int64_t floats = k16 ? vocab * hidden + n0 * vocab + n0 * hidden : 0;
        DeviceScratch scratch(floats * 4 + n0 * vocab * int64_t(sizeof(T)));
        float *acc = scratch.as<float>();
        float *dlogits32 = acc + vocab * hidden;
        float *x32 = dlogits32 + n0 * vocab;
        T *logits = reinterpret_cast<T *>(scratch.as<float>() + floats);
        int threads = blockThreadsFor<T>(vocab);
        bool aligned = rowsAligned<T>(vocab, {logits});
        // The count of the mean is over every row, not a chunk's.
        if (ignore)
          countLabelsKernel<I>
              <<<1, kRowBlockThreads, 0, stream>>>(l, rows, ignoreIndex);
        for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
          int64_t n = std::min(chunk, rows - r0);
          matmul(dtype, xv + r0 * hidden, w, logits, 1, n, vocab, hidden, 0, 1,
                 0, hidden);
          unsigned grid = gridFor(n, 1);
          // In place: each row is read before it is written.
          if (aligned)
            crossEntropyGradKernel<T, I, true><<<grid, threads, 0, stream>>>(
                logits, l + r0, dloss, logits, n, vocab, vocab, ignore,
                ignoreIndex, deviceErrorWord(), rows);
          else
            crossEntropyGradKernel<T, I, false><<<grid, threads, 0, stream>>>(
                logits, l + r0, dloss, logits, n, vocab, vocab, ignore,
                ignoreIndex, deviceErrorWord(), rows);
          checkLaunch(kernel);
          matmul(dtype, logits, w, dxv + r0 * hidden, 1, n, hidden, vocab, 0, 0,
                 0, vocab);
          const void *dl = logits, *xr = xv + r0 * hidden;
          void *into = dw;
          if constexpr (k16) {
            cast(dtype, logits, ZRT_F32, dlogits32, n * vocab);
            cast(dtype, xv + r0 * hidden, ZRT_F32, x32, n * hidden);
            dl = dlogits32;
            xr = x32;
            into = acc;
          }
          if (r0 == 0)
            matmul(ZRT_F32, dl, xr, into, 1, vocab, hidden, n, 1, 0, 0, n);
          else
            matmulAccumulate(ZRT_F32, dl, xr, into, vocab, hidden, n, 1, 0);
        }
        if constexpr (k16)
          cast(ZRT_F32, acc, dtype, dw, vocab * hidden);
      });
}
