//===- Embedding.cu - Table lookup and its deterministic gradient ---------===//
//
// Part of the zero-mlir project.
//
// The gradient groups positions by id with a counting sort in the planned
// int64 scratch (bucket ends, then positions), then sums each id's dy rows
// in fp32 in a fixed order and stores each table row once: no float
// atomics, and the result does not depend on scheduling.
//
//===----------------------------------------------------------------------===//

#include "Kernels/CudaKernels.h"
#include "Kernels/DeviceUtil.cuh"
#include "Kernels/KernelMath.h"
#include "Support/Support.h"
#include "zero_rt/scratch.h"

using namespace zrt;
using namespace zrt::cuda;

namespace {

constexpr int kThreads = 256;
constexpr int kScanThreads = 1024;
constexpr int kScanPerThread = 8;
constexpr int kBucketThreads = 256;
constexpr int kBucketWarps = kBucketThreads / 32;
/// Buckets up to this size are sorted in shared memory, larger ones in
/// place in the scratch.
constexpr int kSortShared = 2048;
/// Buckets from this size on split their positions over the block's warps;
/// smaller ones give each thread whole columns.
constexpr int64_t kSplitMin = 32;

template <typename I>
__device__ inline bool validId(I id, int64_t vocab) {
  return int64_t(id) >= 0 && int64_t(id) < vocab;
}

/// out[i] = table[ids[i]] in words of W, a warp per id.
template <typename I, typename W>
__global__ void __launch_bounds__(kThreads)
    embeddingKernel(const W *table, const I *ids, W *out, int64_t numIds,
                    int64_t vocab, int64_t rowWords, int *error) {
  int lane = threadIdx.x % 32;
  for (int64_t i = globalThread() / 32; i < numIds; i += globalThreads() / 32) {
    I id = ids[i];
    if (!validId(id, vocab)) {
      // Reported; the output row is left unchanged.
      if (lane == 0)
        reportDeviceError(error, kIdOutOfRange);
      continue;
    }
    const W *src = table + int64_t(id) * rowWords;
    W *dst = out + i * rowWords;
#pragma unroll 4
    for (int64_t c = lane; c < rowWords; c += 32)
      dst[c] = src[c];
  }
}

/// ends[id + 1] counts the valid positions of each id (ends is zero).
template <typename I>
__global__ void __launch_bounds__(kThreads)
    histogramKernel(const I *ids, int64_t numIds, int64_t vocab, int64_t *ends,
                    int *error) {
  for (int64_t i = globalThread(); i < numIds; i += globalThreads()) {
    I id = ids[i];
    if (!validId(id, vocab)) {
      reportDeviceError(error, kIdOutOfRange);
      continue;
    }
    atomicAdd(reinterpret_cast<unsigned long long *>(ends + int64_t(id) + 1),
              1ull);
  }
}

/// Inclusive prefix sum of a[0, n) in place, by one block: afterwards
/// a[v] is the start of bucket v and a[vocab] the number of valid ids.
__global__ void __launch_bounds__(kScanThreads)
    scanKernel(int64_t *a, int64_t n) {
  __shared__ int64_t warpTotals[kScanThreads / 32];
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int64_t carry = 0;
  for (int64_t base = 0; base < n; base += kScanThreads * kScanPerThread) {
    int64_t first = base + int64_t(threadIdx.x) * kScanPerThread;
    int64_t v[kScanPerThread];
#pragma unroll
    for (int j = 0; j < kScanPerThread; ++j)
      v[j] = first + j < n ? a[first + j] : 0;
#pragma unroll
    for (int j = 1; j < kScanPerThread; ++j)
      v[j] += v[j - 1];
    int64_t mine = v[kScanPerThread - 1];
    int64_t incl = mine;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      int64_t up = __shfl_up_sync(kFullMask, incl, o);
      if (lane >= o)
        incl += up;
    }
    if (lane == 31)
      warpTotals[warp] = incl;
    __syncthreads();
    if (warp == 0) {
      int64_t t = warpTotals[lane];
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        int64_t up = __shfl_up_sync(kFullMask, t, o);
        if (lane >= o)
          t += up;
      }
      warpTotals[lane] = t;
    }
    __syncthreads();
    int64_t prefix =
        carry + (incl - mine) + (warp > 0 ? warpTotals[warp - 1] : 0);
#pragma unroll
    for (int j = 0; j < kScanPerThread; ++j)
      if (first + j < n)
        a[first + j] = v[j] + prefix;
    carry += warpTotals[kScanThreads / 32 - 1];
    __syncthreads(); // warpTotals is rewritten by the next tile.
  }
}

/// order[ends[id]++] = i: each bucket receives its positions (in an order
/// the bucket kernel sorts away); afterwards ends[v] is the end of bucket
/// v.
template <typename I>
__global__ void __launch_bounds__(kThreads)
    fillKernel(const I *ids, int64_t numIds, int64_t vocab, int64_t *ends,
               int64_t *order) {
  for (int64_t i = globalThread(); i < numIds; i += globalThreads()) {
    I id = ids[i];
    if (!validId(id, vocab))
      continue;
    unsigned long long p = atomicAdd(
        reinterpret_cast<unsigned long long *>(ends + int64_t(id)), 1ull);
    order[p] = i;
  }
}

/// Sorts a[0, n) ascending with the whole block: a bitonic network in the
/// form whose merges all sort ascending (the first step of each merge
/// compares mirrored pairs), so the virtual padding up to a power of two
/// is +infinity that never moves and comparators reaching it are skipped.
/// `a` is shared or global memory; __syncthreads orders both in a block.
__device__ void blockSort(int64_t *a, int64_t n) {
  int64_t padded = 1;
  while (padded < n)
    padded <<= 1;
  for (int64_t size = 2; size <= padded; size <<= 1) {
    int64_t half = size / 2;
    for (int64_t i = threadIdx.x; i < padded / 2; i += blockDim.x) {
      int64_t base = i / half * size, offset = i % half;
      int64_t lo = base + offset, hi = base + size - 1 - offset;
      if (hi < n && a[lo] > a[hi]) {
        int64_t t = a[lo];
        a[lo] = a[hi];
        a[hi] = t;
      }
    }
    __syncthreads();
    for (int64_t stride = half / 2; stride > 0; stride >>= 1) {
      for (int64_t i = threadIdx.x; i < padded / 2; i += blockDim.x) {
        int64_t lo = i / stride * 2 * stride + i % stride;
        int64_t hi = lo + stride;
        if (hi < n && a[lo] > a[hi]) {
          int64_t t = a[lo];
          a[lo] = a[hi];
          a[hi] = t;
        }
      }
      __syncthreads();
    }
  }
}

/// dtable[v] = sum of dy[p] over the positions p of bucket v in ascending
/// order, one block per bucket (found at its first sorted position). Short
/// buckets: a thread per column pack adds the positions in order. Long
/// buckets: warp w adds positions w, w + kBucketWarps, ... in order, then
/// the warps' partials are added in warp order. Rows of empty buckets and
/// the padding row keep the zeros written before.
template <typename T, typename I, bool kAligned>
__global__ void __launch_bounds__(kBucketThreads)
    bucketSumKernel(const T *dy, const I *ids, const int64_t *ends,
                    int64_t *order, T *dtable, int64_t vocab, int64_t dim,
                    int64_t paddingIdx) {
  constexpr int kVec = vecWidth<T>();
  __shared__ int64_t sorted[kSortShared];
  __shared__ float part[kBucketWarps][kVec][32];
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int64_t total = ends[vocab];
  int64_t packs = (dim + kVec - 1) / kVec;
  for (int64_t p = blockIdx.x; p < total; p += gridDim.x) {
    // Uniform over the block: every thread reads the same values.
    int64_t v = int64_t(ids[order[p]]);
    int64_t start = v == 0 ? 0 : ends[v - 1];
    // The padding row keeps its zeros.
    if (p != start || v == paddingIdx)
      continue;
    int64_t count = ends[v] - start;
    const int64_t *pos = order + start;
    if (count >= 2) {
      // Every thread has read the bucket's bounds before any sorts it.
      __syncthreads();
      if (count <= kSortShared) {
        for (int64_t t = threadIdx.x; t < count; t += blockDim.x)
          sorted[t] = order[start + t];
        __syncthreads();
        blockSort(sorted, count);
        pos = sorted;
      } else {
        blockSort(order + start, count);
      }
    }
    T *row = dtable + v * dim;
    if (count < kSplitMin) {
      for (int64_t q = threadIdx.x; q < packs; q += blockDim.x) {
        float acc[kVec] = {};
        for (int64_t t = 0; t < count; ++t) {
          float g[kVec];
          loadSpan<kVec, kAligned>(dy + pos[t] * dim, q * kVec, dim, g);
#pragma unroll
          for (int e = 0; e < kVec; ++e)
            acc[e] += g[e];
        }
        storeSpan<kVec, kAligned>(row, q * kVec, dim, acc);
      }
    } else {
      for (int64_t q0 = 0; q0 < packs; q0 += 32) {
        int64_t q = q0 + lane;
        float acc[kVec] = {};
        if (q < packs) {
          for (int64_t t = warp; t < count; t += kBucketWarps) {
            float g[kVec];
            loadSpan<kVec, kAligned>(dy + pos[t] * dim, q * kVec, dim, g);
#pragma unroll
            for (int e = 0; e < kVec; ++e)
              acc[e] += g[e];
          }
        }
#pragma unroll
        for (int e = 0; e < kVec; ++e)
          part[warp][e][lane] = acc[e];
        __syncthreads();
        if (warp == 0 && q < packs) {
          for (int w = 1; w < kBucketWarps; ++w)
#pragma unroll
            for (int e = 0; e < kVec; ++e)
              acc[e] += part[w][e][lane];
          storeSpan<kVec, kAligned>(row, q * kVec, dim, acc);
        }
        __syncthreads(); // `part` is rewritten by the next chunk.
      }
    }
    __syncthreads(); // `sorted` is rewritten by the next bucket.
  }
}

/// The widest word (16, 8, 4 or 2 bytes) dividing the row and aligning both
/// pointers.
int rowWordBytes(int64_t rowBytes, const void *a, const void *b) {
  for (int w : {16, 8, 4})
    if (rowBytes % w == 0 && isAligned(a, w) && isAligned(b, w))
      return w;
  return 2;
}

/// y[r * k + j] = x[r * cols + indices[r * k + j]], a thread per element;
/// an index outside [0, cols) is reported and its element left unchanged.
template <typename T, typename I>
__global__ void __launch_bounds__(kThreads)
    gatherKernel(const T *x, const I *indices, T *y, int64_t rows, int64_t cols,
                 int64_t k, int *error) {
  for (int64_t i = globalThread(); i < rows * k; i += globalThreads()) {
    I c = indices[i];
    if (!validId(c, cols)) {
      reportDeviceError(error, kIdOutOfRange);
      continue;
    }
    y[i] = x[(i / k) * cols + int64_t(c)];
  }
}

/// dx (zeroed) [r * cols + indices[r * k + j]] = the fp32 sum of the dy of
/// that index in the order of j, a thread per row (as the CPU's).
template <typename T, typename I>
__global__ void __launch_bounds__(kThreads)
    gatherGradKernel(const I *indices, const T *dy, T *dx, int64_t rows,
                     int64_t cols, int64_t k, int *error) {
  for (int64_t r = globalThread(); r < rows; r += globalThreads()) {
    const I *ir = indices + r * k;
    const T *gr = dy + r * k;
    bool valid = true;
    for (int64_t j = 0; j < k; ++j)
      valid &= validId(ir[j], cols);
    if (!valid) {
      reportDeviceError(error, kIdOutOfRange);
      continue;
    }
    T *o = dx + r * cols;
    zrt::gatherGradRow(
        ir, k, [&](int64_t p) { return toF32(gr[p]); },
        [&](int64_t c, float sum) { o[c] = fromF32<T>(sum); });
  }
}

} // namespace

void zrt::cuda::embedding(int32_t dtype, const void *table, int32_t idType,
                          const void *ids, void *out, int64_t numIds,
                          int64_t vocab, int64_t dim) {
  const char *kernel = "zrt_embedding";
  checkDims(kernel, numIds, vocab, dim);
  int64_t rowBytes = dim * elementSize(dtype, kernel);
  dispatchIndex(idType, kernel, [&](auto idTag) {
    using I = decltype(idTag);
    // Ids are checked even when rows are empty, as on the CPU.
    if (numIds == 0)
      return;
    const I *idv = static_cast<const I *>(ids);
    int bytes = rowWordBytes(rowBytes, table, out);
    unsigned grid = gridFor(numIds, kThreads / 32);
    cudaStream_t stream = computeStream();
    int *error = deviceErrorWord();
    auto launch = [&](auto wordTag) {
      using W = decltype(wordTag);
      embeddingKernel<I, W><<<grid, kThreads, 0, stream>>>(
          static_cast<const W *>(table), idv, static_cast<W *>(out), numIds,
          vocab, rowBytes / bytes, error);
    };
    if (bytes == 16)
      launch(uint4());
    else if (bytes == 8)
      launch(uint2());
    else if (bytes == 4)
      launch(uint32_t());
    else
      launch(uint16_t());
    checkLaunch(kernel);
  });
}

void zrt::cuda::embeddingGrad(int32_t dtype, const void *dy, int32_t idType,
                              const void *ids, void *dtable, int64_t numIds,
                              int64_t vocab, int64_t dim, int64_t paddingIdx) {
  const char *kernel = "zrt_embedding_grad";
  checkDims(kernel, numIds, vocab, dim);
  // Exactly the planned scratch: vocab + 1 bucket ends, numIds positions.
  DeviceScratch scratch(zrt_scratch_embedding_grad(numIds, vocab, dim));
  int64_t *ends = scratch.as<int64_t>();
  int64_t *order = ends + vocab + 1;
  dispatch(dtype, kernel, [&](auto tag) {
    dispatchIndex(idType, kernel, [&](auto idTag) {
      using T = decltype(tag);
      using I = decltype(idTag);
      const I *idv = static_cast<const I *>(ids);
      const T *g = static_cast<const T *>(dy);
      T *out = static_cast<T *>(dtable);
      cudaStream_t stream = computeStream();
      if (vocab * dim > 0)
        ZRT_CUDA_CHECK(
            cudaMemsetAsync(out, 0, size_t(vocab * dim) * sizeof(T), stream));
      if (numIds == 0)
        return;
      ZRT_CUDA_CHECK(cudaMemsetAsync(ends, 0, size_t(vocab + 1) * 8, stream));
      unsigned grid = gridFor(numIds, kThreads);
      histogramKernel<I><<<grid, kThreads, 0, stream>>>(
          idv, numIds, vocab, ends, deviceErrorWord());
      checkLaunch(kernel);
      if (dim == 0 || vocab == 0)
        return;
      scanKernel<<<1, kScanThreads, 0, stream>>>(ends, vocab + 1);
      checkLaunch(kernel);
      fillKernel<I>
          <<<grid, kThreads, 0, stream>>>(idv, numIds, vocab, ends, order);
      checkLaunch(kernel);
      unsigned buckets = gridFor(numIds, 1);
      if (rowsAligned<T>(dim, {g, out}))
        bucketSumKernel<T, I, true><<<buckets, kBucketThreads, 0, stream>>>(
            g, idv, ends, order, out, vocab, dim, paddingIdx);
      else
        bucketSumKernel<T, I, false><<<buckets, kBucketThreads, 0, stream>>>(
            g, idv, ends, order, out, vocab, dim, paddingIdx);
      checkLaunch(kernel);
    });
  });
}

void zrt::cuda::gather(int32_t dtype, const void *x, int32_t indexType,
                       const void *indices, void *y, int64_t rows, int64_t cols,
                       int64_t k) {
  const char *kernel = "zrt_gather";
  checkDims(kernel, rows, cols, k);
  dispatch(dtype, kernel, [&](auto tag) {
    dispatchIndex(indexType, kernel, [&](auto idTag) {
      using T = decltype(tag);
      using I = decltype(idTag);
      if (rows * k == 0)
        return;
      gatherKernel<T, I>
          <<<gridFor(rows * k, kThreads), kThreads, 0, computeStream()>>>(
              static_cast<const T *>(x), static_cast<const I *>(indices),
              static_cast<T *>(y), rows, cols, k, deviceErrorWord());
      checkLaunch(kernel);
    });
  });
}

void zrt::cuda::gatherGrad(int32_t dtype, int32_t indexType,
                           const void *indices, const void *dy, void *dx,
                           int64_t rows, int64_t cols, int64_t k) {
  const char *kernel = "zrt_gather_grad";
  checkDims(kernel, rows, cols, k);
  dispatch(dtype, kernel, [&](auto tag) {
    dispatchIndex(indexType, kernel, [&](auto idTag) {
      using T = decltype(tag);
      using I = decltype(idTag);
      cudaStream_t stream = computeStream();
      if (rows * cols > 0)
        ZRT_CUDA_CHECK(
            cudaMemsetAsync(dx, 0, size_t(rows * cols) * sizeof(T), stream));
      if (rows * k == 0)
        return;
      gatherGradKernel<T, I><<<gridFor(rows, kThreads), kThreads, 0, stream>>>(
          static_cast<const I *>(indices), static_cast<const T *>(dy),
          static_cast<T *>(dx), rows, cols, k, deviceErrorWord());
      checkLaunch(kernel);
    });
  });
}
