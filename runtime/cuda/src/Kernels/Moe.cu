//===- Moe.cu - Mixture of experts: routing, dispatch, grouped products ---===//
//
// Part of the zero-mlir project.
//
// Plain SIMT kernels, written for exactness first: every sum has one
// thread and a fixed order, and nothing reads the routing back to the host.
// The top-k selection breaks ties by the lower expert, which is not
// torch.topk's CPU order (that is the CPU backend's); scores are computed
// on the fly, so the planned scratch of the router and the auxiliary loss
// (sized for the CPU's queues) is held but only partly used; the grouped
// products sum in registers and hold the CPU's fp32 panels' scratch unused,
// so a step's peak matches its one plan on either backend.
//
//===----------------------------------------------------------------------===//

#include "Kernels/CudaKernels.h"
#include "Kernels/DeviceUtil.cuh"
#include "Support/Support.h"
#include "zero_rt/scratch.h"

using namespace zrt;
using namespace zrt::cuda;

namespace {

constexpr int kThreads = 256;

/// The max and the sum of exp(x - max) of one row of logits.
template <typename T>
__device__ void softmaxStats(const T *row, int64_t experts, float &m,
                             float &sum) {
  m = -INFINITY;
  for (int64_t e = 0; e < experts; ++e)
    m = fmaxf(m, toF32(row[e]));
  sum = 0.0f;
  for (int64_t e = 0; e < experts; ++e)
    sum += expf(toF32(row[e]) - m);
}

template <typename T>
__device__ float scoreOf(const T *row, int64_t e, bool sigmoid, float m,
                         float sum) {
  float x = toF32(row[e]);
  return sigmoid ? 1.0f / (1.0f + expf(-x)) : expf(x - m) / sum;
}

/// Whether expert e is among the top k of `key` (larger first, then the
/// lower expert).
template <typename Key>
__device__ bool inTopK(Key key, int64_t e, int64_t experts, int64_t k) {
  float v = key(e);
  int64_t rank = 0;
  for (int64_t o = 0; o < experts && rank < k; ++o) {
    float u = key(o);
    if (u > v || (u == v && o < e))
      ++rank;
  }
  return rank < k;
}

template <typename T, typename I>
__global__ void __launch_bounds__(kThreads)
    routerKernel(const T *logits, const T *bias, T *weights, I *indices,
                 int64_t tokens, int64_t experts, int64_t k, bool sigmoid,
                 bool normalize, float scale, int64_t groups, int64_t topGroups,
                 float eps) {
  int64_t size = groups > 0 ? experts / groups : experts;
  for (int64_t t = globalThread(); t < tokens; t += globalThreads()) {
    const T *row = logits + t * experts;
    float m = 0.0f, sum = 1.0f;
    if (!sigmoid)
      softmaxStats(row, experts, m, sum);
    auto score = [&](int64_t e) {
      float s = scoreOf(row, e, sigmoid, m, sum);
      return bias ? s + toF32(bias[e]) : s;
    };
    // With groups, bit g of `keep` marks a group among the topGroups best
    // (the sum of its 2 largest keys; ties to the lower group); the other
    // groups' experts get -inf keys.
    uint64_t keep = ~uint64_t(0);
    if (groups > 0) {
      auto groupScore = [&](int64_t g) {
        float a = -INFINITY, b = -INFINITY;
        for (int64_t e = g * size; e < (g + 1) * size; ++e) {
          float v = score(e);
          if (v > a) {
            b = a;
            a = v;
          } else if (v > b) {
            b = v;
          }
        }
        return a + b;
      };
      keep = 0;
      for (int64_t g = 0; g < groups; ++g) {
        float v = groupScore(g);
        int64_t rank = 0;
        for (int64_t o = 0; o < groups && rank < topGroups; ++o) {
          float u = groupScore(o);
          if (u > v || (u == v && o < g))
            ++rank;
        }
        if (rank < topGroups)
          keep |= uint64_t(1) << g;
      }
    }
    auto key = [&](int64_t e) {
      return (keep >> (e / size)) & 1 ? score(e) : -INFINITY;
    };
    // The expert with j larger keys (or equal ones of lower experts) is the
    // j-th.
    float total = 0.0f;
    for (int64_t e = 0; e < experts; ++e) {
      float v = key(e);
      int64_t rank = 0;
      for (int64_t o = 0; o < experts && rank < k; ++o) {
        float u = key(o);
        if (u > v || (u == v && o < e))
          ++rank;
      }
      if (rank < k)
        indices[t * k + rank] = I(e);
    }
    for (int64_t i = 0; i < k; ++i)
      total += scoreOf(row, int64_t(indices[t * k + i]), sigmoid, m, sum);
    total += eps;
    for (int64_t i = 0; i < k; ++i) {
      float s = scoreOf(row, int64_t(indices[t * k + i]), sigmoid, m, sum);
      weights[t * k + i] = fromF32<T>((normalize ? s / total : s) * scale);
    }
  }
}

template <typename T, typename I>
__global__ void __launch_bounds__(kThreads)
    routerGradKernel(const T *logits, const I *indices, const T *dweights,
                     T *dlogits, int64_t tokens, int64_t experts, int64_t k,
                     bool sigmoid, bool normalize, float scale, float eps,
                     int *error) {
  for (int64_t t = globalThread(); t < tokens; t += globalThreads()) {
    const T *row = logits + t * experts;
    const I *sel = indices + t * k;
    float m = 0.0f, sum = 1.0f;
    if (!sigmoid)
      softmaxStats(row, experts, m, sum);
    float total = 0.0f, dot = 0.0f;
    bool valid = true;
    for (int64_t j = 0; j < k; ++j) {
      int64_t e = int64_t(sel[j]);
      if (e < 0 || e >= experts) {
        valid = false;
        continue;
      }
      float s = scoreOf(row, e, sigmoid, m, sum);
      total += s;
      dot += toF32(dweights[t * k + j]) * scale * s;
    }
    if (!valid) {
      reportDeviceError(error, kIdOutOfRange);
      continue;
    }
    total += eps;
    auto dscore = [&](int64_t j) {
      float g = toF32(dweights[t * k + j]) * scale;
      return normalize ? (g - dot / total) / total : g;
    };
    T *out = dlogits + t * experts;
    float sdp = 0.0f;
    for (int64_t j = 0; j < k; ++j)
      sdp += scoreOf(row, int64_t(sel[j]), sigmoid, m, sum) * dscore(j);
    for (int64_t e = 0; e < experts; ++e)
      out[e] =
          fromF32<T>(sigmoid ? 0.0f : -scoreOf(row, e, sigmoid, m, sum) * sdp);
    for (int64_t j = 0; j < k; ++j) {
      int64_t e = int64_t(sel[j]);
      float s = scoreOf(row, e, sigmoid, m, sum);
      out[e] = fromF32<T>(sigmoid ? dscore(j) * s * (1.0f - s)
                                  : s * (dscore(j) - sdp));
    }
  }
}

/// One block: thread e counts expert e's pairs, one thread turns the
/// counts into starts, and thread e numbers its pairs in order.
template <typename I>
__global__ void __launch_bounds__(kThreads)
    sortPairsKernel(const I *indices, I *positions, I *offsets, int64_t pairs,
                    int64_t experts, int *error) {
  for (int64_t e = threadIdx.x; e < experts; e += blockDim.x) {
    int64_t count = 0;
    for (int64_t p = 0; p < pairs; ++p)
      count += int64_t(indices[p]) == e;
    offsets[e] = I(count);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int64_t run = 0;
    for (int64_t e = 0; e < experts; ++e) {
      int64_t c = int64_t(offsets[e]);
      offsets[e] = I(run);
      run += c;
    }
    if (run != pairs)
      reportDeviceError(error, kIdOutOfRange);
  }
  __syncthreads();
  for (int64_t e = threadIdx.x; e < experts; e += blockDim.x) {
    int64_t next = int64_t(offsets[e]);
    for (int64_t p = 0; p < pairs; ++p)
      if (int64_t(indices[p]) == e)
        positions[p] = I(next++);
    // Each thread reads only its own expert's start: ends can replace them.
    offsets[e] = I(next);
  }
}

template <typename T, typename I>
__global__ void __launch_bounds__(kThreads)
    scatterRowsKernel(const T *x, const I *positions, T *rows, int64_t pairs,
                      int64_t dim, int64_t k) {
  for (int64_t i = globalThread(); i < pairs * dim; i += globalThreads()) {
    int64_t p = i / dim, c = i % dim;
    int64_t pos = int64_t(positions[p]);
    if (pos >= 0 && pos < pairs)
      rows[pos * dim + c] = x[(p / k) * dim + c];
  }
}

template <typename T, typename I>
__global__ void __launch_bounds__(kThreads)
    gatherSumKernel(const T *rows, const I *positions, const T *weights, T *out,
                    int64_t tokens, int64_t dim, int64_t k, int *error) {
  int64_t pairs = tokens * k;
  for (int64_t i = globalThread(); i < tokens * dim; i += globalThreads()) {
    int64_t t = i / dim, c = i % dim;
    float acc = 0.0f;
    for (int64_t j = 0; j < k; ++j) {
      int64_t p = int64_t(positions[t * k + j]);
      if (p < 0 || p >= pairs) {
        reportDeviceError(error, kIdOutOfRange);
        continue;
      }
      float w = weights ? toF32(weights[t * k + j]) : 1.0f;
      acc += w * toF32(rows[p * dim + c]);
    }
    out[i] = fromF32<T>(acc);
  }
}

template <typename T, typename I>
__global__ void __launch_bounds__(kThreads)
    combineGradKernel(const T *rows, const I *positions, const T *weights,
                      const T *dout, T *drows, T *dweights, int64_t tokens,
                      int64_t dim, int64_t k, int *error) {
  int64_t pairs = tokens * k;
  for (int64_t q = globalThread(); q < pairs; q += globalThreads()) {
    int64_t t = q / k, p = int64_t(positions[q]);
    if (p < 0 || p >= pairs) {
      reportDeviceError(error, kIdOutOfRange);
      continue;
    }
    float w = toF32(weights[q]), dot = 0.0f;
    for (int64_t c = 0; c < dim; ++c) {
      float g = toF32(dout[t * dim + c]);
      drows[p * dim + c] = fromF32<T>(w * g);
      dot += g * toF32(rows[p * dim + c]);
    }
    dweights[q] = fromF32<T>(dot);
  }
}

/// The expert whose rows hold row s: the first e with s < offsets[e]
/// (experts when none).
template <typename I>
__device__ int64_t expertOf(const I *offsets, int64_t experts, int64_t s) {
  int64_t lo = 0, hi = experts;
  while (lo < hi) {
    int64_t mid = (lo + hi) / 2;
    if (s < int64_t(offsets[mid]))
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

/// One output element per thread, summed in fp32 in a fixed order and
/// rounded to T once (the CPU's 16-bit products do the same through fp32
/// panels).
template <typename T, typename I>
__global__ void __launch_bounds__(kThreads)
    groupedMatmulKernel(const T *x, const T *w, const I *offsets, T *y,
                        int64_t rows, int64_t in, int64_t out, int64_t experts,
                        bool transposeW) {
  for (int64_t i = globalThread(); i < rows * out; i += globalThreads()) {
    int64_t s = i / out, f = i % out;
    int64_t e = expertOf(offsets, experts, s);
    float acc = 0.0f;
    if (e < experts) {
      const T *we = w + e * in * out;
      for (int64_t d = 0; d < in; ++d)
        acc += toF32(x[s * in + d]) *
               toF32(transposeW ? we[f * in + d] : we[d * out + f]);
    }
    y[i] = fromF32<T>(acc);
  }
}

template <typename T, typename I>
__global__ void __launch_bounds__(kThreads)
    groupedWeightGradKernel(const T *x, const T *dy, const I *offsets, T *dw,
                            int64_t in, int64_t out, int64_t experts,
                            bool transposeW) {
  int64_t per = in * out;
  for (int64_t i = globalThread(); i < experts * per; i += globalThreads()) {
    int64_t e = i / per, r = i % per;
    // Element r of dw[e] in its layout: [in, out], or [out, in].
    int64_t d = transposeW ? r % in : r / out;
    int64_t f = transposeW ? r / in : r % out;
    int64_t start = e == 0 ? 0 : int64_t(offsets[e - 1]);
    int64_t end = int64_t(offsets[e]);
    float acc = 0.0f;
    for (int64_t s = start; s < end; ++s)
      acc += toF32(x[s * in + d]) * toF32(dy[s * out + f]);
    dw[i] = fromF32<T>(acc);
  }
}

/// Thread e: c[e] (rows whose top k hold e) and the sum of p[., e].
template <typename T>
__global__ void __launch_bounds__(kThreads)
    auxCountsKernel(const T *logits, int64_t rows, int64_t experts, int64_t k,
                    double *counts, double *sums) {
  for (int64_t e = globalThread(); e < experts; e += globalThreads()) {
    double c = 0.0, s = 0.0;
    for (int64_t n = 0; n < rows; ++n) {
      const T *row = logits + n * experts;
      float m, sum;
      softmaxStats(row, experts, m, sum);
      auto key = [&](int64_t o) { return scoreOf(row, o, false, m, sum); };
      s += key(e);
      c += inTopK(key, e, experts, k) ? 1.0 : 0.0;
    }
    counts[e] = c;
    sums[e] = s;
  }
}

__global__ void auxLossKernel(const double *counts, const double *sums,
                              float *loss, int64_t rows, int64_t experts) {
  double total = 0.0, n = double(rows);
  for (int64_t e = 0; e < experts; ++e)
    total += (counts[e] / n) * (sums[e] / n);
  *loss = rows ? float(total * double(experts)) : 0.0f;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    auxGradKernel(const T *logits, const double *counts, const float *dloss,
                  T *dlogits, int64_t rows, int64_t experts) {
  double scale = double(*dloss) * double(experts) / (double(rows) * rows);
  for (int64_t n = globalThread(); n < rows; n += globalThreads()) {
    const T *row = logits + n * experts;
    float m, sum;
    softmaxStats(row, experts, m, sum);
    double dot = 0.0;
    for (int64_t e = 0; e < experts; ++e)
      dot += double(scoreOf(row, e, false, m, sum)) * scale * counts[e];
    for (int64_t e = 0; e < experts; ++e) {
      double p = scoreOf(row, e, false, m, sum);
      dlogits[n * experts + e] =
          fromF32<T>(float(p * (scale * counts[e] - dot)));
    }
  }
}

__global__ void countsToInt64Kernel(const double *counts, int64_t *out,
                                    int64_t experts) {
  for (int64_t e = globalThread(); e < experts; e += globalThreads())
    out[e] = int64_t(counts[e]);
}

/// A rank's part of the loss of a divided batch: the given counts over
/// globalRows, the local probability sums over rows.
__global__ void auxLossCountsKernel(const int64_t *counts, const double *sums,
                                    float *loss, int64_t rows,
                                    int64_t globalRows, int64_t experts) {
  double total = 0.0, n = double(rows), g = double(globalRows);
  for (int64_t e = 0; e < experts; ++e)
    total += (double(counts[e]) / g) * (sums[e] / n);
  *loss = rows && globalRows ? float(total * double(experts)) : 0.0f;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    auxGradCountsKernel(const T *logits, const int64_t *counts,
                        const float *dloss, T *dlogits, int64_t rows,
                        int64_t globalRows, int64_t experts) {
  double scale =
      double(*dloss) * double(experts) / (double(globalRows) * double(rows));
  for (int64_t n = globalThread(); n < rows; n += globalThreads()) {
    const T *row = logits + n * experts;
    float m, sum;
    softmaxStats(row, experts, m, sum);
    double dot = 0.0;
    for (int64_t e = 0; e < experts; ++e)
      dot += double(scoreOf(row, e, false, m, sum)) * scale * double(counts[e]);
    for (int64_t e = 0; e < experts; ++e) {
      double p = scoreOf(row, e, false, m, sum);
      dlogits[n * experts + e] =
          fromF32<T>(float(p * (scale * double(counts[e]) - dot)));
    }
  }
}

void checkGrouped(const char *kernel, int64_t rows, int64_t in, int64_t out,
                  int64_t experts) {
  checkDims(kernel, rows, in, out, experts);
}

} // namespace

void zrt::cuda::moeRouter(int32_t dtype, const void *logits, const void *bias,
                          void *weights, int32_t indexType, void *indices,
                          int64_t tokens, int64_t experts, int64_t k,
                          int32_t sigmoid, int32_t normalize, double scale,
                          int64_t groups, int64_t topkGroup, double eps) {
  const char *kernel = "zrt_moe_router";
  checkRouting(kernel, tokens, experts, k);
  checkGroups(kernel, experts, k, groups, topkGroup);
  DeviceScratch scratch(groups > 0
                            ? zrt_scratch_moe_router_grouped(experts, groups)
                            : zrt_scratch_moe_router(experts));
  if (tokens == 0)
    return;
  dispatch(dtype, kernel, [&](auto tag) {
    dispatchIndex(indexType, kernel, [&](auto idTag) {
      using T = decltype(tag);
      using I = decltype(idTag);
      routerKernel<T, I>
          <<<gridFor(tokens, kThreads), kThreads, 0, computeStream()>>>(
              static_cast<const T *>(logits), static_cast<const T *>(bias),
              static_cast<T *>(weights), static_cast<I *>(indices), tokens,
              experts, k, sigmoid != 0, normalize != 0, float(scale), groups,
              topkGroup, float(eps));
      checkLaunch(kernel);
    });
  });
}

void zrt::cuda::moeRouterGrad(int32_t dtype, const void *logits,
                              int32_t indexType, const void *indices,
                              const void *dweights, void *dlogits,
                              int64_t tokens, int64_t experts, int64_t k,
                              int32_t sigmoid, int32_t normalize, double scale,
                              double eps) {
  const char *kernel = "zrt_moe_router_grad";
  checkRouting(kernel, tokens, experts, k);
  DeviceScratch scratch(zrt_scratch_moe_router(experts));
  if (tokens == 0)
    return;
  dispatch(dtype, kernel, [&](auto tag) {
    dispatchIndex(indexType, kernel, [&](auto idTag) {
      using T = decltype(tag);
      using I = decltype(idTag);
      routerGradKernel<T, I>
          <<<gridFor(tokens, kThreads), kThreads, 0, computeStream()>>>(
              static_cast<const T *>(logits), static_cast<const I *>(indices),
              static_cast<const T *>(dweights), static_cast<T *>(dlogits),
              tokens, experts, k, sigmoid != 0, normalize != 0, float(scale),
              float(eps), deviceErrorWord());
      checkLaunch(kernel);
    });
  });
}

void zrt::cuda::moeDispatch(int32_t dtype, const void *x, int32_t indexType,
                            const void *indices, void *rows, void *positions,
                            void *offsets, int64_t tokens, int64_t dim,
                            int64_t k, int64_t experts) {
  const char *kernel = "zrt_moe_dispatch";
  checkDims(kernel, tokens, dim, k, experts);
  int64_t pairs = tokens * k;
  if (experts == 0)
    return;
  dispatch(dtype, kernel, [&](auto tag) {
    dispatchIndex(indexType, kernel, [&](auto idTag) {
      using T = decltype(tag);
      using I = decltype(idTag);
      cudaStream_t stream = computeStream();
      sortPairsKernel<I><<<1, kThreads, 0, stream>>>(
          static_cast<const I *>(indices), static_cast<I *>(positions),
          static_cast<I *>(offsets), pairs, experts, deviceErrorWord());
      checkLaunch(kernel);
      if (pairs * dim == 0)
        return;
      scatterRowsKernel<T, I>
          <<<gridFor(pairs * dim, kThreads), kThreads, 0, stream>>>(
              static_cast<const T *>(x), static_cast<const I *>(positions),
              static_cast<T *>(rows), pairs, dim, k);
      checkLaunch(kernel);
    });
  });
}

void zrt::cuda::moeDispatchGrad(int32_t dtype, const void *drows,
                                int32_t indexType, const void *positions,
                                void *dx, int64_t tokens, int64_t dim,
                                int64_t k) {
  const char *kernel = "zrt_moe_dispatch_grad";
  checkDims(kernel, tokens, dim, k);
  if (tokens * dim == 0)
    return;
  dispatch(dtype, kernel, [&](auto tag) {
    dispatchIndex(indexType, kernel, [&](auto idTag) {
      using T = decltype(tag);
      using I = decltype(idTag);
      gatherSumKernel<T, I>
          <<<gridFor(tokens * dim, kThreads), kThreads, 0, computeStream()>>>(
              static_cast<const T *>(drows), static_cast<const I *>(positions),
              static_cast<const T *>(nullptr), static_cast<T *>(dx), tokens,
              dim, k, deviceErrorWord());
      checkLaunch(kernel);
    });
  });
}

void zrt::cuda::groupedMatmul(int32_t dtype, const void *x, const void *w,
                              int32_t indexType, const void *offsets, void *y,
                              int64_t rows, int64_t inDim, int64_t outDim,
                              int64_t experts, int32_t transposeW) {
  const char *kernel = "zrt_grouped_matmul";
  checkGrouped(kernel, rows, inDim, outDim, experts);
  DeviceScratch scratch(zrt_scratch_grouped_matmul(dtype, rows, inDim, outDim));
  if (rows * outDim == 0)
    return;
  dispatch(dtype, kernel, [&](auto tag) {
    dispatchIndex(indexType, kernel, [&](auto idTag) {
      using T = decltype(tag);
      using I = decltype(idTag);
      groupedMatmulKernel<T, I>
          <<<gridFor(rows * outDim, kThreads), kThreads, 0, computeStream()>>>(
              static_cast<const T *>(x), static_cast<const T *>(w),
              static_cast<const I *>(offsets), static_cast<T *>(y), rows, inDim,
              outDim, experts, transposeW != 0);
      checkLaunch(kernel);
    });
  });
}

void zrt::cuda::groupedMatmulWeightGrad(int32_t dtype, const void *x,
                                        const void *dy, int32_t indexType,
                                        const void *offsets, void *dw,
                                        int64_t rows, int64_t inDim,
                                        int64_t outDim, int64_t experts,
                                        int32_t transposeW) {
  const char *kernel = "zrt_grouped_matmul_weight_grad";
  checkGrouped(kernel, rows, inDim, outDim, experts);
  DeviceScratch scratch(
      zrt_scratch_grouped_matmul_weight_grad(dtype, rows, inDim, outDim));
  if (experts * inDim * outDim == 0)
    return;
  dispatch(dtype, kernel, [&](auto tag) {
    dispatchIndex(indexType, kernel, [&](auto idTag) {
      using T = decltype(tag);
      using I = decltype(idTag);
      groupedWeightGradKernel<T, I>
          <<<gridFor(experts * inDim * outDim, kThreads), kThreads, 0,
             computeStream()>>>(
              static_cast<const T *>(x), static_cast<const T *>(dy),
              static_cast<const I *>(offsets), static_cast<T *>(dw), inDim,
              outDim, experts, transposeW != 0);
      checkLaunch(kernel);
    });
  });
}

void zrt::cuda::moeCombine(int32_t dtype, const void *rows, int32_t indexType,
                           const void *positions, const void *weights,
                           void *out, int64_t tokens, int64_t dim, int64_t k) {
  const char *kernel = "zrt_moe_combine";
  checkDims(kernel, tokens, dim, k);
  if (tokens * dim == 0)
    return;
  dispatch(dtype, kernel, [&](auto tag) {
    dispatchIndex(indexType, kernel, [&](auto idTag) {
      using T = decltype(tag);
      using I = decltype(idTag);
      gatherSumKernel<T, I>
          <<<gridFor(tokens * dim, kThreads), kThreads, 0, computeStream()>>>(
              static_cast<const T *>(rows), static_cast<const I *>(positions),
              static_cast<const T *>(weights), static_cast<T *>(out), tokens,
              dim, k, deviceErrorWord());
      checkLaunch(kernel);
    });
  });
}

void zrt::cuda::moeCombineGrad(int32_t dtype, const void *rows,
                               int32_t indexType, const void *positions,
                               const void *weights, const void *dout,
                               void *drows, void *dweights, int64_t tokens,
                               int64_t dim, int64_t k) {
  const char *kernel = "zrt_moe_combine_grad";
  checkDims(kernel, tokens, dim, k);
  if (tokens * k == 0)
    return;
  dispatch(dtype, kernel, [&](auto tag) {
    dispatchIndex(indexType, kernel, [&](auto idTag) {
      using T = decltype(tag);
      using I = decltype(idTag);
      combineGradKernel<T, I>
          <<<gridFor(tokens * k, kThreads), kThreads, 0, computeStream()>>>(
              static_cast<const T *>(rows), static_cast<const I *>(positions),
              static_cast<const T *>(weights), static_cast<const T *>(dout),
              static_cast<T *>(drows), static_cast<T *>(dweights), tokens, dim,
              k, deviceErrorWord());
      checkLaunch(kernel);
    });
  });
}

void zrt::cuda::moeAuxLoss(int32_t dtype, const void *logits, float *loss,
                           int64_t rows, int64_t experts, int64_t k) {
  const char *kernel = "zrt_moe_aux_loss";
  checkRouting(kernel, rows, experts, k);
  DeviceScratch scratch(zrt_scratch_moe_aux_loss(experts));
  double *counts = scratch.as<double>(), *sums = counts + experts;
  dispatch(dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    cudaStream_t stream = computeStream();
    auxCountsKernel<T><<<gridFor(experts, kThreads), kThreads, 0, stream>>>(
        static_cast<const T *>(logits), rows, experts, k, counts, sums);
    checkLaunch(kernel);
    auxLossKernel<<<1, 1, 0, stream>>>(counts, sums, loss, rows, experts);
    checkLaunch(kernel);
  });
}

void zrt::cuda::moeAuxLossGrad(int32_t dtype, const void *logits,
                               const float *dloss, void *dlogits, int64_t rows,
                               int64_t experts, int64_t k) {
  const char *kernel = "zrt_moe_aux_loss_grad";
  checkRouting(kernel, rows, experts, k);
  DeviceScratch scratch(zrt_scratch_moe_aux_loss(experts));
  double *counts = scratch.as<double>(), *sums = counts + experts;
  if (rows == 0)
    return;
  dispatch(dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    cudaStream_t stream = computeStream();
    auxCountsKernel<T><<<gridFor(experts, kThreads), kThreads, 0, stream>>>(
        static_cast<const T *>(logits), rows, experts, k, counts, sums);
    checkLaunch(kernel);
    auxGradKernel<T><<<gridFor(rows, kThreads), kThreads, 0, stream>>>(
        static_cast<const T *>(logits), counts, dloss,
        static_cast<T *>(dlogits), rows, experts);
    checkLaunch(kernel);
  });
}

void zrt::cuda::moeExpertCounts(int32_t dtype, const void *logits,
                                int64_t *counts, int64_t rows, int64_t experts,
                                int64_t k) {
  const char *kernel = "zrt_moe_expert_counts";
  checkRouting(kernel, rows, experts, k);
  DeviceScratch scratch(zrt_scratch_moe_aux_loss(experts));
  double *c = scratch.as<double>(), *sums = c + experts;
  dispatch(dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    cudaStream_t stream = computeStream();
    auxCountsKernel<T><<<gridFor(experts, kThreads), kThreads, 0, stream>>>(
        static_cast<const T *>(logits), rows, experts, k, c, sums);
    checkLaunch(kernel);
    countsToInt64Kernel<<<gridFor(experts, kThreads), kThreads, 0, stream>>>(
        c, counts, experts);
    checkLaunch(kernel);
  });
}

void zrt::cuda::moeAuxLossCounts(int32_t dtype, const void *logits,
                                 const int64_t *counts, float *loss,
                                 int64_t rows, int64_t experts, int64_t k,
                                 int64_t globalRows) {
  const char *kernel = "zrt_moe_aux_loss_counts";
  checkRouting(kernel, rows, experts, k);
  DeviceScratch scratch(zrt_scratch_moe_aux_loss(experts));
  double *c = scratch.as<double>(), *sums = c + experts;
  dispatch(dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    cudaStream_t stream = computeStream();
    auxCountsKernel<T><<<gridFor(experts, kThreads), kThreads, 0, stream>>>(
        static_cast<const T *>(logits), rows, experts, k, c, sums);
    checkLaunch(kernel);
    auxLossCountsKernel<<<1, 1, 0, stream>>>(counts, sums, loss, rows,
                                             globalRows, experts);
    checkLaunch(kernel);
  });
}

void zrt::cuda::moeAuxLossCountsGrad(int32_t dtype, const void *logits,
                                     const int64_t *counts, const float *dloss,
                                     void *dlogits, int64_t rows,
                                     int64_t experts, int64_t k,
                                     int64_t globalRows) {
  const char *kernel = "zrt_moe_aux_loss_counts_grad";
  checkRouting(kernel, rows, experts, k);
  DeviceScratch scratch(zrt_scratch_moe_aux_loss(experts));
  if (rows == 0 || globalRows == 0)
    return;
  dispatch(dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    auxGradCountsKernel<T>
        <<<gridFor(rows, kThreads), kThreads, 0, computeStream()>>>(
            static_cast<const T *>(logits), counts, dloss,
            static_cast<T *>(dlogits), rows, globalRows, experts);
    checkLaunch(kernel);
  });
}
