//===- Layout.cu - Transpose, split, concat and the label shift -----------===//
//
// Part of the zero-mlir project.
//
// Pure data movement: elements move as 2- or 4-byte words, or as wider
// words (up to 16 bytes) when contiguous runs and pointers allow (labels as
// their 4- or 8-byte integers), without conversion.
//
//===----------------------------------------------------------------------===//

#include "Kernels/CudaKernels.h"
#include "Kernels/DeviceUtil.cuh"
#include "Kernels/KernelMath.h"
#include "Support/Permutation.h"
#include "Support/Support.h"

#include <initializer_list>

using namespace zrt;
using namespace zrt::cuda;

namespace {

constexpr int kThreads = 256;
constexpr int kTile = 32;
constexpr int kTileRows = 8;
constexpr int kTileThreads = kTile * kTileRows;

/// Sizes and input strides of a gather in Idx arithmetic (32-bit when the
/// tensor allows: 64-bit division is several times slower).
template <typename Idx>
struct GatherArgs {
  int rank;
  Idx size[kMaxTransposeRank];
  Idx inStride[kMaxTransposeRank];
};

/// out[o] = in[offset of o]: writes are contiguous, reads follow the
/// permutation (contiguous too when the innermost dim is).
template <typename W, typename Idx>
__global__ void __launch_bounds__(kThreads)
    gatherKernel(const W *in, W *out, Idx n, GatherArgs<Idx> a) {
  Idx stride = Idx(gridDim.x) * blockDim.x;
  for (Idx o = Idx(blockIdx.x) * blockDim.x + threadIdx.x; o < n; o += stride) {
    Idx rem = o, off = 0;
#pragma unroll
    for (int i = kMaxTransposeRank - 1; i >= 0; --i) {
      if (i < a.rank) {
        off += (rem % a.size[i]) * a.inStride[i];
        rem /= a.size[i];
      }
    }
    out[o] = in[off];
  }
}

/// A 2-D transpose between output dim `a` (contiguous in the input) and the
/// output's innermost dim, batched over the other dims.
struct TileArgs {
  Permutation p;
  int a;
  int64_t tilesA, tilesB, items;
};

template <typename W>
__global__ void __launch_bounds__(kTileThreads)
    tiledKernel(const W *in, W *out, TileArgs t) {
  // Padding to an odd number of 32-bit words per row keeps the column reads
  // free of bank conflicts.
  __shared__ W tile[kTile][kTile + (sizeof(W) == 2 ? 2 : 1)];
  const Permutation &p = t.p;
  int last = p.rank - 1;
  int64_t sizeA = p.size[t.a], sizeB = p.size[last];
  int64_t strideA = p.inStride[t.a], strideB = p.inStride[last];
  int64_t outA = p.outStride[t.a];
  for (int64_t item = blockIdx.x; item < t.items; item += gridDim.x) {
    int64_t tb = item % t.tilesB, rest = item / t.tilesB;
    int64_t ta = rest % t.tilesA, outer = rest / t.tilesA;
    int64_t inOff = 0, outOff = 0;
    for (int i = last - 1; i >= 0; --i) {
      if (i == t.a)
        continue;
      int64_t idx = outer % p.size[i];
      outer /= p.size[i];
      inOff += idx * p.inStride[i];
      outOff += idx * p.outStride[i];
    }
    int64_t a0 = ta * kTile, b0 = tb * kTile;
    // Reads run along a (threadIdx.x), writes along b.
    for (int k = threadIdx.y; k < kTile; k += kTileRows) {
      int64_t ia = a0 + threadIdx.x, ib = b0 + k;
      if (ia < sizeA && ib < sizeB)
        tile[k][threadIdx.x] = in[inOff + ia * strideA + ib * strideB];
    }
    __syncthreads();
    for (int k = threadIdx.y; k < kTile; k += kTileRows) {
      int64_t ia = a0 + k, ib = b0 + threadIdx.x;
      if (ia < sizeA && ib < sizeB)
        out[outOff + ia * outA + ib] = tile[threadIdx.x][k];
    }
    __syncthreads(); // The tile is refilled by the next item.
  }
}

template <typename W>
void launchGather(const void *in, void *out, const Permutation &p, int64_t n) {
  cudaStream_t stream = computeStream();
  if (n <= INT32_MAX) {
    // o + grid stride stays below 2^32: n < 2^31 and the grid has far fewer
    // than 2^31 threads.
    GatherArgs<uint32_t> a{p.rank, {}, {}};
    for (int i = 0; i < p.rank; ++i) {
      a.size[i] = uint32_t(p.size[i]);
      a.inStride[i] = uint32_t(p.inStride[i]);
    }
    gatherKernel<W, uint32_t><<<gridFor(n, kThreads), kThreads, 0, stream>>>(
        static_cast<const W *>(in), static_cast<W *>(out), uint32_t(n), a);
  } else {
    GatherArgs<uint64_t> a{p.rank, {}, {}};
    for (int i = 0; i < p.rank; ++i) {
      a.size[i] = uint64_t(p.size[i]);
      a.inStride[i] = uint64_t(p.inStride[i]);
    }
    gatherKernel<W, uint64_t><<<gridFor(n, kThreads), kThreads, 0, stream>>>(
        static_cast<const W *>(in), static_cast<W *>(out), uint64_t(n), a);
  }
  checkLaunch("zrt_transpose");
}

/// The widest word (16, 8, 4 or 2 bytes) that divides every byte count and
/// aligns every pointer.
int wordBytes(std::initializer_list<int64_t> counts,
              std::initializer_list<const void *> ptrs) {
  for (int w : {16, 8, 4}) {
    bool ok = true;
    for (int64_t c : counts)
      ok = ok && c % w == 0;
    for (const void *q : ptrs)
      ok = ok && isAligned(q, w);
    if (ok)
      return w;
  }
  return 2;
}

/// Calls fn(W{}) with the unsigned word type of `bytes` bytes.
template <typename Fn>
void dispatchWord(int bytes, Fn &&fn) {
  switch (bytes) {
  case 16:
    fn(uint4());
    return;
  case 8:
    fn(uint2());
    return;
  case 4:
    fn(uint32_t());
    return;
  default:
    fn(uint16_t());
    return;
  }
}

/// dst[r * dstPitch + c] = src[r * srcPitch + c] for c < rowWords.
template <typename W>
__global__ void __launch_bounds__(kThreads)
    copyRowsKernel(W *dst, int64_t dstPitch, const W *src, int64_t srcPitch,
                   int64_t rowWords, int64_t rows) {
  int64_t total = rows * rowWords;
  for (int64_t i = globalThread(); i < total; i += globalThreads()) {
    int64_t r = i / rowWords, c = i - r * rowWords;
    dst[r * dstPitch + c] = src[r * srcPitch + c];
  }
}

/// Copies between [outer, sum(sizes), inner] and the parts [outer,
/// sizes[p], inner], one strided row copy per part; `toParts` chooses the
/// direction.
void segmentCopy(int64_t elemSize, char *whole, char *const *parts,
                 const int64_t *sizes, int32_t num, int64_t outer,
                 int64_t inner, bool toParts, const char *kernel) {
  int64_t total = checkParts(kernel, sizes, num, outer, inner);
  int64_t wholePitch = total * inner * elemSize;
  int64_t offset = 0;
  for (int32_t p = 0; p < num; offset += sizes[p++]) {
    int64_t rowBytes = sizes[p] * inner * elemSize;
    if (rowBytes == 0 || outer == 0)
      continue;
    char *w = whole + offset * inner * elemSize;
    char *dst = toParts ? parts[p] : w;
    const char *src = toParts ? w : parts[p];
    int64_t dstPitch = toParts ? rowBytes : wholePitch;
    int64_t srcPitch = toParts ? wholePitch : rowBytes;
    int bytes = wordBytes({rowBytes, wholePitch}, {dst, src});
    dispatchWord(bytes, [&](auto tag) {
      using W = decltype(tag);
      int64_t rowWords = rowBytes / bytes;
      copyRowsKernel<W><<<gridFor(outer * rowWords, kThreads), kThreads, 0,
                          computeStream()>>>(
          reinterpret_cast<W *>(dst), dstPitch / bytes,
          reinterpret_cast<const W *>(src), srcPitch / bytes, rowWords, outer);
      checkLaunch(kernel);
    });
  }
}

/// out[r, c] = labels[r, c + 1], the last column `fill`.
template <typename I>
__global__ void __launch_bounds__(kThreads)
    shiftLabelsKernel(const I *labels, I *out, int64_t rows, int64_t cols,
                      I fill) {
  int64_t total = rows * cols;
  for (int64_t i = globalThread(); i < total; i += globalThreads()) {
    int64_t c = i % cols;
    out[i] = c + 1 < cols ? labels[i + 1] : fill;
  }
}

/// One packed row's document ids per thread (a scan along the row).
template <typename I>
__global__ void __launch_bounds__(kThreads)
    documentIdsKernel(const I *positions, int32_t *ids, int64_t rows,
                      int64_t cols) {
  for (int64_t r = globalThread(); r < rows; r += globalThreads())
    documentIdsRow(positions + r * cols, ids + r * cols, cols);
}

} // namespace

void zrt::cuda::transpose(int32_t dtype, const void *in, void *out,
                          int32_t rank, const int64_t *inShape,
                          const int64_t *perm) {
  Permutation p = simplifyPermutation(rank, inShape, perm);
  int64_t elemSize = elementSize(dtype, "zrt_transpose");
  int64_t n = 1;
  for (int i = 0; i < rank; ++i)
    n *= inShape[i];
  if (n == 0)
    return;
  int last = p.rank - 1;
  if (p.rank == 0 || p.inStride[last] == 1) {
    // Contiguous runs: gather whole words of the run. Every other input
    // stride is a multiple of the run (the run is the input's innermost
    // dims), so the strides stay whole in words.
    int64_t runBytes = (p.rank ? p.size[last] : 1) * elemSize;
    int bytes = wordBytes({runBytes}, {in, out});
    if (bytes < elemSize)
      bytes = int(elemSize);
    int64_t perWord = bytes / elemSize;
    if (p.rank) {
      p.size[last] /= perWord;
      for (int i = 0; i < last; ++i)
        p.inStride[i] /= perWord;
      computeOutStrides(p);
    }
    dispatchWord(bytes, [&](auto tag) {
      launchGather<decltype(tag)>(in, out, p, n / perWord);
    });
    return;
  }
  // The innermost output dim is strided in the input: tile it against the
  // dim with the smallest input stride (1: the input's innermost dim).
  TileArgs t;
  t.p = p;
  t.a = 0;
  for (int i = 1; i < last; ++i)
    if (p.inStride[i] < p.inStride[t.a])
      t.a = i;
  int64_t sizeA = p.size[t.a], sizeB = p.size[last];
  t.tilesA = (sizeA + kTile - 1) / kTile;
  t.tilesB = (sizeB + kTile - 1) / kTile;
  t.items = n / (sizeA * sizeB) * t.tilesA * t.tilesB;
  dim3 block(kTile, kTileRows);
  cudaStream_t stream = computeStream();
  if (elemSize == 4)
    tiledKernel<uint32_t><<<gridFor(t.items, 1), block, 0, stream>>>(
        static_cast<const uint32_t *>(in), static_cast<uint32_t *>(out), t);
  else
    tiledKernel<uint16_t><<<gridFor(t.items, 1), block, 0, stream>>>(
        static_cast<const uint16_t *>(in), static_cast<uint16_t *>(out), t);
  checkLaunch("zrt_transpose");
}

void zrt::cuda::split(int32_t dtype, const void *in, void *const *outs,
                      const int64_t *sizes, int32_t num, int64_t outer,
                      int64_t inner) {
  segmentCopy(elementSize(dtype, "zrt_split"),
              static_cast<char *>(const_cast<void *>(in)),
              reinterpret_cast<char *const *>(outs), sizes, num, outer, inner,
              true, "zrt_split");
}

void zrt::cuda::concat(int32_t dtype, const void *const *ins,
                       const int64_t *sizes, int32_t num, void *out,
                       int64_t outer, int64_t inner) {
  segmentCopy(
      elementSize(dtype, "zrt_concat"), static_cast<char *>(out),
      const_cast<char *const *>(reinterpret_cast<const char *const *>(ins)),
      sizes, num, outer, inner, false, "zrt_concat");
}

void zrt::cuda::shiftLabels(int32_t labelType, const void *labels, void *out,
                            int64_t rows, int64_t cols, int64_t fill) {
  const char *kernel = "zrt_shift_labels";
  checkDims(kernel, rows, cols);
  dispatchIndex(labelType, kernel, [&](auto tag) {
    using I = decltype(tag);
    if (int64_t(I(fill)) != fill)
      fatal("%s: fill %lld does not fit the labels' type", kernel,
            (long long)fill);
    if (rows * cols == 0)
      return;
    shiftLabelsKernel<I>
        <<<gridFor(rows * cols, kThreads), kThreads, 0, computeStream()>>>(
            static_cast<const I *>(labels), static_cast<I *>(out), rows, cols,
            I(fill));
    checkLaunch(kernel);
  });
}

void zrt::cuda::documentIds(int32_t positionType, const void *positions,
                            int32_t *ids, int64_t rows, int64_t cols) {
  const char *kernel = "zrt_document_ids";
  checkDims(kernel, rows, cols);
  dispatchIndex(positionType, kernel, [&](auto tag) {
    using I = decltype(tag);
    if (rows * cols == 0)
      return;
    documentIdsKernel<I>
        <<<gridFor(rows, kThreads), kThreads, 0, computeStream()>>>(
            static_cast<const I *>(positions), ids, rows, cols);
    checkLaunch(kernel);
  });
}
