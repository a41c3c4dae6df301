//===- Rope.cu - Rotary position embedding --------------------------------===//
//
// Part of the zero-mlir project.
//
// A block takes one position and a group of rows there: it computes the
// cosines and sines of the position once into shared memory (KernelMath.h,
// as the CPU backend), then rotates the pairs of its rows, consecutive
// threads on consecutive pairs. A table of inverse frequencies (host memory)
// travels in the launch's parameters, kTablePairs pairs per launch. The
// rotation pins its roundings, so the results equal the CPU's but for a
// near-tie in a double cosine, sine or power.
//
//===----------------------------------------------------------------------===//

#include "Kernels/CudaKernels.h"
#include "Kernels/DeviceUtil.cuh"
#include "Support/Support.h"

#include <algorithm>

using namespace zrt;
using namespace zrt::cuda;

namespace {

constexpr int kThreads = 256;
/// Pairs whose cosines and sines a block holds at once (8 KiB).
constexpr int kPairs = 1024;
/// Most rows per block, so that the table is reused over several rows.
constexpr int64_t kRowsPerBlock = 16;
constexpr int64_t kMaxGridY = 65535;
/// Pairs of a table passed by value in one launch (1 KiB of parameters).
constexpr int kTablePairs = 256;

/// Inverse frequencies of pairs [begin, begin + kTablePairs) of a table.
struct FreqTable {
  float invFreq[kTablePairs];
};

/// Per-token positions [groups, seq] of int32 or int64 (null: 0..seq-1),
/// each group holding `rowsPerGroup` rows (a batch entry's heads).
struct Positions {
  const void *data;
  bool wide;
  int64_t rowsPerGroup;
};

/// Group blockIdx.y / blocksPerGroup's rows [r0, r0 + rowsPerBlock) at index
/// blockIdx.x along seq, pairs [pairBegin, pairEnd); y may alias x (each
/// pair is read, then written, by one thread). The position is the index,
/// or the group's positions there. With `useTable`, pair i's inverse
/// frequency is table.invFreq[i - pairBegin], otherwise theta's.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    ropeKernel(const T *x, T *y, int64_t seq, int64_t headDim,
               int64_t rowsPerBlock, int64_t blocksPerGroup, int64_t pairBegin,
               int64_t pairEnd, double theta, const FreqTable table,
               bool useTable, float scale, bool inverse, bool interleaved,
               const Positions positions) {
  __shared__ float cosT[kPairs], sinT[kPairs];
  int64_t index = blockIdx.x;
  int64_t group = int64_t(blockIdx.y) / blocksPerGroup;
  int64_t first = int64_t(blockIdx.y) % blocksPerGroup * rowsPerBlock;
  int64_t r0 = group * positions.rowsPerGroup + first;
  int64_t nr = positions.rowsPerGroup - first < rowsPerBlock
                   ? positions.rowsPerGroup - first
                   : rowsPerBlock;
  int64_t at = group * seq + index;
  int64_t pos = !positions.data ? index
                : positions.wide
                    ? static_cast<const int64_t *>(positions.data)[at]
                    : static_cast<const int32_t *>(positions.data)[at];
  int64_t half = headDim / 2;
  for (int64_t c0 = pairBegin; c0 < pairEnd; c0 += kPairs) {
    int len = int(pairEnd - c0 < kPairs ? pairEnd - c0 : kPairs);
    for (int i = threadIdx.x; i < len; i += blockDim.x) {
      float c, s;
      float invFreq = useTable ? table.invFreq[c0 + i - pairBegin]
                               : ropeInvFreq(theta, c0 + i, headDim);
      ropeCosSin(pos, invFreq, scale, c, s);
      cosT[i] = c;
      sinT[i] = inverse ? -s : s;
    }
    __syncthreads();
    for (int k = threadIdx.x; k < int(nr) * len; k += blockDim.x) {
      int r = k / len, i = k % len;
      int64_t row = ((r0 + r) * seq + index) * headDim;
      // The pair (c0 + i, c0 + i + half), or (2 (c0 + i), 2 (c0 + i) + 1).
      int64_t first = interleaved ? row + 2 * (c0 + i) : row + c0 + i;
      int64_t second = interleaved ? first + 1 : first + half;
      float a, b;
      ropeRotate(toF32(x[first]), toF32(x[second]), cosT[i], sinT[i], a, b);
      y[first] = fromF32<T>(a);
      y[second] = fromF32<T>(b);
    }
    __syncthreads();
  }
}

} // namespace

namespace {

void ropeAt(const char *name, int32_t dtype, const void *x, void *y,
            int64_t batch, int64_t heads, int64_t seq, int64_t headDim,
            double theta, int32_t inverse, int32_t interleaved,
            const float *invFreq, double scale, const void *positions,
            bool wide) {
  checkDims(name, batch, heads, seq, headDim);
  if (headDim % 2 != 0)
    fatal("%s: head_dim %lld is odd", name, (long long)headDim);
  checkRopeFrequencies(name, headDim, theta, invFreq, scale);
  int64_t rows = batch * heads;
  if (rows == 0 || seq == 0 || headDim == 0)
    return;
  if (seq > int64_t(0x7fffffff))
    fatal("%s: seq %lld exceeds the grid", name, (long long)seq);
  // Without positions every row shares them: one group of all the rows.
  int64_t groups = positions ? batch : 1, perGroup = rows / groups;
  if (groups > kMaxGridY)
    fatal("%s: batch %lld exceeds the grid", name, (long long)batch);
  int64_t rowsPerBlock = std::max(std::min(perGroup, kRowsPerBlock),
                                  ceilDiv(perGroup, kMaxGridY / groups));
  int64_t blocksPerGroup = ceilDiv(perGroup, rowsPerBlock);
  dim3 grid(unsigned(seq), unsigned(groups * blocksPerGroup));
  Positions where{positions, wide, perGroup};
  int64_t half = headDim / 2;
  // theta's frequencies are computed on the device in one launch; a table's
  // pairs go kTablePairs at a time.
  int64_t step = invFreq ? kTablePairs : half;
  dispatch(dtype, name, [&](auto tag) {
    using T = decltype(tag);
    for (int64_t begin = 0; begin < half; begin += step) {
      int64_t end = std::min(half, begin + step);
      FreqTable table{};
      if (invFreq)
        std::copy(invFreq + begin, invFreq + end, table.invFreq);
      ropeKernel<T><<<grid, kThreads, 0, computeStream()>>>(
          static_cast<const T *>(x), static_cast<T *>(y), seq, headDim,
          rowsPerBlock, blocksPerGroup, begin, end, theta, table,
          invFreq != nullptr, float(scale), inverse != 0, interleaved != 0,
          where);
      checkLaunch(name);
    }
  });
}

} // namespace

void zrt::cuda::rope(int32_t dtype, const void *x, void *y, int64_t batch,
                     int64_t heads, int64_t seq, int64_t headDim, double theta,
                     int32_t inverse, int32_t interleaved, const float *invFreq,
                     double scale) {
  ropeAt("zrt_rope", dtype, x, y, batch, heads, seq, headDim, theta, inverse,
         interleaved, invFreq, scale, nullptr, false);
}

void zrt::cuda::ropePositions(int32_t dtype, const void *x, void *y,
                              int64_t batch, int64_t heads, int64_t seq,
                              int64_t headDim, double theta, int32_t inverse,
                              int32_t interleaved, const float *invFreq,
                              double scale, int32_t positionType,
                              const void *positions) {
  if (positionType != ZRT_I32 && positionType != ZRT_I64)
    fatal("zrt_rope_positions: position type %d is neither int32 nor int64",
          int(positionType));
  ropeAt("zrt_rope_positions", dtype, x, y, batch, heads, seq, headDim, theta,
         inverse, interleaved, invFreq, scale, positions,
         positionType == ZRT_I64);
}
