//===- Adafactor.cu - torch.optim.Adafactor's step on the GPU -------------===//
//
// Part of the zero-mlir project.
//
// The CPU's phases (src/Optimizer/Adafactor.cpp) with the same per-element
// formulas (KernelMath.h): the fp32 operations agree to the bit, the double
// sums of squares up to their order (each row by one block, each column by one
// thread, the whole slice's by one block, every tree fixed), which moves an
// fp32 value only when a sum lies within a double rounding of an fp32 tie.
// The sums stay on the device for NCCL and no launch waits for the host.
//
//===----------------------------------------------------------------------===//

#include "Kernels/CudaKernels.h"
#include "Optimizer/Adafactor.h"
#include "Support/CudaSupport.h"
#include "Support/Support.h"

#include <algorithm>
#include <type_traits>

using namespace zrt;
using namespace zrt::cuda;

namespace {

constexpr int kThreads = 256;
constexpr int kSumThreads = 1024;

unsigned gridOf(int64_t n) {
  return unsigned(std::min<int64_t>(ceilDiv(n, kThreads), 65535));
}

/// The sum of every thread's `value` in a block of `kN` threads, in a fixed
/// tree; valid in thread 0.
template <int kN>
__device__ double blockSum(double value, double *shared) {
  shared[threadIdx.x] = value;
  __syncthreads();
  for (int half = kN / 2; half > 0; half /= 2) {
    if (int(threadIdx.x) < half)
      shared[threadIdx.x] += shared[threadIdx.x + half];
    __syncthreads();
  }
  return shared[0];
}

/// sums[0] = the slice's sum of the parameter's squares, by one block.
__global__ void __launch_bounds__(kSumThreads)
    paramSquaresKernel(const float *master, int64_t n, double *sums) {
  __shared__ double partial[kSumThreads];
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += kSumThreads)
    sum += double(master[i]) * double(master[i]);
  sum = blockSum<kSumThreads>(sum, partial);
  if (threadIdx.x == 0)
    sums[0] = sum;
}

/// Block b: the squares of global row firstRow + b within the slice.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    rowSquaresKernel(const T *grad, int64_t cols, int64_t begin, int64_t end,
                     int64_t firstRow, float gradScale, double *rowSq) {
  __shared__ double partial[kThreads];
  int64_t row = firstRow + blockIdx.x;
  int64_t lo = max(begin, row * cols), hi = min(end, (row + 1) * cols);
  double sum = 0.0;
  for (int64_t e = lo + threadIdx.x; e < hi; e += kThreads) {
    double q = double(toF32(grad[e - begin]) * gradScale);
    sum += q * q;
  }
  sum = blockSum<kThreads>(sum, partial);
  if (threadIdx.x == 0)
    rowSq[row] = sum;
}

/// Thread (m, j): column j of matrix firstMatrix + m, its rows in order.
template <typename T>
__global__ void colSquaresKernel(const T *grad, int64_t rows, int64_t cols,
                                 int64_t begin, int64_t end,
                                 int64_t firstMatrix, int64_t matrices,
                                 float gradScale, double *colSq) {
  for (int64_t at = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
       at < matrices * cols; at += int64_t(gridDim.x) * blockDim.x) {
    int64_t matrix = firstMatrix + at / cols, j = at % cols;
    double sum = 0.0;
    for (int64_t i = 0; i < rows; ++i) {
      int64_t e = (matrix * rows + i) * cols + j;
      if (e >= begin && e < end) {
        double q = double(toF32(grad[e - begin]) * gradScale);
        sum += q * q;
      }
    }
    colSq[matrix * cols + j] = sum;
  }
}

__global__ void factorsKernel(int64_t rowCount, int64_t colCount, int64_t rows,
                              int64_t cols, AdafactorConstants k, float *rowVar,
                              float *colVar, const double *rowSq,
                              const double *colSq) {
  for (int64_t at = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
       at < rowCount + colCount; at += int64_t(gridDim.x) * blockDim.x) {
    if (at < rowCount)
      rowVar[at] = lerpTorch(rowVar[at], adafactorMeanSquare(rowSq[at], cols),
                             k.beta2Weight);
    else
      colVar[at - rowCount] = lerpTorch(
          colVar[at - rowCount],
          adafactorMeanSquare(colSq[at - rowCount], rows), k.beta2Weight);
  }
}

/// Block b: matrix b's clamped mean of row_var.
__global__ void __launch_bounds__(kThreads)
    rowMeanKernel(const float *rowVar, int64_t rows, float eps1,
                  double *rowMeans) {
  __shared__ double partial[kThreads];
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < rows; i += kThreads)
    sum += double(rowVar[blockIdx.x * rows + i]);
  sum = blockSum<kThreads>(sum, partial);
  if (threadIdx.x == 0) {
    float mean = divRn(float(sum), float(rows));
    rowMeans[blockIdx.x] = mean < eps1 ? eps1 : mean;
  }
}

/// The update of slice element e - begin (a vector's variance given).
__device__ inline float updateAt(const AdafactorShape &s,
                                 const AdafactorConstants &k, float g,
                                 const float *rowVar, const float *colVar,
                                 const double *rowMeans, int64_t e,
                                 float variance) {
  if (!s.factored)
    return adafactorUpdate(g, variance, k);
  int64_t row = e / s.cols, matrix = row / s.rows;
  float v = adafactorFactoredVariance(rowVar[row],
                                      colVar[matrix * s.cols + e % s.cols],
                                      float(rowMeans[matrix]));
  return adafactorUpdate(g, v, k);
}

/// sums[1] = the slice's sum of the update's squares, by one block; a
/// vector's variance moves.
template <typename T>
__global__ void __launch_bounds__(kSumThreads)
    updateSquaresKernel(const T *grad, AdafactorShape s, int64_t begin,
                        int64_t end, float gradScale, AdafactorConstants k,
                        const float *rowVar, const float *colVar,
                        float *variance, double *sums, int64_t reduced) {
  __shared__ double partial[kSumThreads];
  float sign = k.maximize ? -1.0f : 1.0f;
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < end - begin; i += kSumThreads) {
    float g = sign * (toF32(grad[i]) * gradScale);
    float v = 0.0f;
    if (!s.factored) {
      v = lerpTorch(variance[i], mulRn(g, g), k.beta2Weight);
      variance[i] = v;
    }
    float u = updateAt(s, k, g, rowVar, colVar, sums + reduced, begin + i, v);
    sum += double(u) * double(u);
  }
  sum = blockSum<kSumThreads>(sum, partial);
  if (threadIdx.x == 0)
    sums[1] = sum;
}

template <typename T>
__global__ void
applyKernel(const T *grad, float *master, T *param, AdafactorShape s,
            int64_t begin, int64_t end, float gradScale, AdafactorConstants k,
            const float *rowVar, const float *colVar, const float *variance,
            const double *sums, int64_t reduced) {
  float scale = adafactorStepScale(k, sums[0], sums[1], s.numel());
  float sign = k.maximize ? -1.0f : 1.0f;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
       i < end - begin; i += int64_t(gridDim.x) * blockDim.x) {
    float g = sign * (toF32(grad[i]) * gradScale);
    float u = updateAt(s, k, g, rowVar, colVar, sums + reduced, begin + i,
                       s.factored ? 0.0f : variance[i]);
    float w = adafactorApply(master[i], u, scale, k);
    master[i] = w;
    if (param)
      param[i] = fromF32<T>(w);
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

} // namespace

void zrt::cuda::adafactorSums(int32_t dtype, const void *grad,
                              const float *master, const AdafactorShape &s,
                              int64_t begin, int64_t end, float gradScale,
                              double *sums) {
  checkSlice("adafactor_sums", s, begin, end);
  cudaStream_t stream = computeStream();
  ZRT_CUDA_CHECK(
      cudaMemsetAsync(sums, 0, size_t(adafactorSumsCount(s)) * 8, stream));
  paramSquaresKernel<<<1, kSumThreads, 0, stream>>>(master, end - begin, sums);
  checkLaunch("adafactor_sums");
  if (!s.factored || end == begin)
    return;
  double *rowSq = sums + 2, *colSq = rowSq + s.batch * s.rows;
  int64_t firstRow = begin / s.cols, lastRow = (end - 1) / s.cols;
  int64_t firstMatrix = firstRow / s.rows, lastMatrix = lastRow / s.rows;
  int64_t matrices = lastMatrix - firstMatrix + 1;
  dispatch(dtype, "adafactor_sums", [&](auto tag) {
    using T = decltype(tag);
    const T *g = static_cast<const T *>(grad);
    rowSquaresKernel<T>
        <<<unsigned(lastRow - firstRow + 1), kThreads, 0, stream>>>(
            g, s.cols, begin, end, firstRow, gradScale, rowSq);
    colSquaresKernel<T><<<gridOf(matrices * s.cols), kThreads, 0, stream>>>(
        g, s.rows, s.cols, begin, end, firstMatrix, matrices, gradScale, colSq);
  });
  checkLaunch("adafactor_sums");
}

void zrt::cuda::adafactorFactors(const AdafactorShape &s,
                                 const AdafactorConstants &k, float *rowVar,
                                 float *colVar, double *sums) {
  if (!s.factored)
    return;
  cudaStream_t stream = computeStream();
  int64_t rowCount = s.batch * s.rows, colCount = s.batch * s.cols;
  const double *rowSq = sums + 2, *colSq = rowSq + rowCount;
  factorsKernel<<<gridOf(rowCount + colCount), kThreads, 0, stream>>>(
      rowCount, colCount, s.rows, s.cols, k, rowVar, colVar, rowSq, colSq);
  rowMeanKernel<<<unsigned(s.batch), kThreads, 0, stream>>>(
      rowVar, s.rows, k.eps1, sums + adafactorReducedCount(s));
  checkLaunch("adafactor_factors");
}

void zrt::cuda::adafactorUpdateSums(int32_t dtype, const void *grad,
                                    const AdafactorShape &s, int64_t begin,
                                    int64_t end, float gradScale,
                                    const AdafactorConstants &k,
                                    const float *rowVar, const float *colVar,
                                    float *variance, double *sums) {
  checkSlice("adafactor_update_sums", s, begin, end);
  cudaStream_t stream = computeStream();
  dispatch(dtype, "adafactor_update_sums", [&](auto tag) {
    using T = decltype(tag);
    updateSquaresKernel<T><<<1, kSumThreads, 0, stream>>>(
        static_cast<const T *>(grad), s, begin, end, gradScale, k, rowVar,
        colVar, variance, sums, adafactorReducedCount(s));
  });
  checkLaunch("adafactor_update_sums");
}

void zrt::cuda::adafactorApply(int32_t dtype, const void *grad, float *master,
                               void *param, const AdafactorShape &s,
                               int64_t begin, int64_t end, float gradScale,
                               const AdafactorConstants &k, const float *rowVar,
                               const float *colVar, const float *variance,
                               const double *sums) {
  checkSlice("adafactor_apply", s, begin, end);
  if (end == begin)
    return;
  cudaStream_t stream = computeStream();
  dispatch(dtype, "adafactor_apply", [&](auto tag) {
    using T = decltype(tag);
    T *p = static_cast<T *>(param);
    if (static_cast<void *>(p) == static_cast<void *>(master))
      p = nullptr;
    applyKernel<T><<<gridOf(end - begin), kThreads, 0, stream>>>(
        static_cast<const T *>(grad), master, p, s, begin, end, gradScale, k,
        rowVar, colVar, variance, sums, adafactorReducedCount(s));
  });
  checkLaunch("adafactor_apply");
}
