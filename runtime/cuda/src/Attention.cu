//===- Attention.cu - Fused scaled dot-product attention on the device ----===//
//
// Part of the zero-mlir project.
//
// Flash attention: scores and probabilities live only for one tile, the
// forward keeps a running max and sum per row (online softmax), and nothing
// of size seq x seq is ever stored. Two implementations, chosen per call by
// dtype and head dim; both are deterministic.
//
// 16-bit inputs with head_dim <= 128 run on tensor cores (mma.sync
// m16n8k16, fp32 accumulators). A block of 4 warps owns 64 rows (queries,
// or keys for dK/dV), 16 per warp, and walks the other side in steps of 64
// rows (32 for dK/dV); tiles stay 16-bit in shared memory, fed by a
// cp.async pipeline that runs two steps ahead (one at 128 columns) and read
// as fragments with ldmatrix; scores, probabilities and outputs stay in
// registers. Products of two 16-bit values are exact in fp32, so S = Q K^T
// and dP = dO V^T keep fp32 accuracy. P and dS are fp32 and would keep only
// 8 (bf16) or 11 (f16) bits as one 16-bit operand of P V, P^T dO, dS K and
// dS^T Q: each is split into hi = round16(x) and lo = round16(x - hi), two
// MMAs that keep 16 or 22 bits. For f16, P (<= 1) is scaled by 2^14 and
// each row of dS (unbounded) by a power of two, so that neither half
// overflows nor goes subnormal; the scales are exact and undone at the
// store. Odd head dims and misaligned tensors load with element loads
// instead of cp.async into the same tiles, so results do not depend on
// pointer alignment.
//
// fp32 inputs (whose arithmetic stays fp32: no TF32) and wider heads run on
// CUDA cores. A block of 256 threads owns a tile of 64 rows and walks the
// other side in steps of 32 rows; tiles live in shared memory as fp32,
// scores and probabilities only for one 64 x 32 tile. Thread (ty, tx) =
// (tid / 16, tid % 16) holds rows 4 ty .. 4 ty + 3 of the block's tile,
// columns tx and tx + 16 of a score tile and output columns 4 tx + 64 g ..
// + 3; the 16 threads of a row are 16 lanes of one warp, so row maxima and
// sums are shuffles. Shared rows are padded by 4 floats: the float4 reads of
// 8 consecutive rows then hit 32 distinct banks. Head dims go in chunks of
// kD = 64 or 128 columns (zero padded). When the head dim fits one chunk
// the block's own tile stays resident; beyond that every score is a sum
// over chunks and each block computes one output chunk (grid.y),
// recomputing the scores for each: correct for any head_dim up to the CPU
// backend's limit, fast up to 128.
//
// Scores are kept in the log2 domain (scale * log2(e) folded in) so that
// every exponential is one exp2. The backward stores that log2-domain
// log-sum-exp and delta = rowsum(dO * O) in the scratch zero_rt/scratch.h
// plans, then recomputes P = exp2(s - lse): dK and dV per key tile over the
// query tiles that see it, dQ per query tile over its key tiles. Every
// output element has one owner, so there are no atomics and results are
// deterministic. The forward allocates nothing.
//
//===----------------------------------------------------------------------===//

#include "CudaKernels.h"
#include "CudaSupport.h"
#include "Support.h"

#include "zero_rt/scratch.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <initializer_list>
#include <type_traits>

using namespace zrt;
using namespace zrt::cuda;

namespace {

constexpr int kThreads = 256;
/// Rows a block owns: queries (forward, dQ) or keys (dK, dV).
constexpr int kRowTile = 64;
/// Rows of the other side per step.
constexpr int kColTile = 32;
/// Floats of padding per shared row (bank spread, keeps 16-byte alignment).
constexpr int kPad = 4;
/// The CPU backend's limit (its backward workspace), kept for parity.
constexpr int64_t kMaxHeadDim = 5461;
constexpr double kLog2e = 1.4426950408889634;

static_assert(kThreads == 16 * (kRowTile / 4), "16 threads per 4 rows");
static_assert(kColTile == 2 * 16, "two score columns per thread");

struct Shape {
  int64_t seq;
  int dim;
  int64_t tiles; // row tiles per head
  bool causal;
  float scale;     // of the scores
  float scaleLog2; // scale * log2(e)
  bool vec;        // dim % 4 == 0 and every tensor 4-element aligned
  bool vec8;       // dim % 8 == 0 and every tensor 16-byte aligned
};

__host__ __device__ constexpr int rowStride(int kD) { return kD + kPad; }
__host__ __device__ constexpr int scoreStride() { return kColTile + kPad; }

constexpr size_t forwardSmem(int kD, bool stats) {
  return sizeof(float) * size_t(kRowTile * rowStride(kD) +
                                (stats ? 1 : 2) * kColTile * rowStride(kD) +
                                (stats ? 0 : kRowTile * scoreStride()));
}
constexpr size_t keyGradSmem(int kD) {
  return sizeof(float) *
         size_t(2 * kRowTile * rowStride(kD) + 2 * kColTile * rowStride(kD) +
                2 * kRowTile * scoreStride());
}
constexpr size_t queryGradSmem(int kD) {
  return sizeof(float) *
         size_t(2 * kRowTile * rowStride(kD) + 2 * kColTile * rowStride(kD) +
                kRowTile * scoreStride());
}

//===----------------------------------------------------------------------===//
// Device helpers
//===----------------------------------------------------------------------===//

/// Bit patterns of 16-bit storage types.
__device__ inline unsigned short bitsOf(__nv_bfloat16 x) {
  return __bfloat16_as_ushort(x);
}
__device__ inline unsigned short bitsOf(__half x) {
  return __half_as_ushort(x);
}
template <typename T>
__device__ inline T fromBits(unsigned short bits);
template <>
__device__ inline __nv_bfloat16 fromBits<__nv_bfloat16>(unsigned short bits) {
  return __ushort_as_bfloat16(bits);
}
template <>
__device__ inline __half fromBits<__half>(unsigned short bits) {
  return __ushort_as_half(bits);
}

/// Four consecutive elements in fp32; p is 4-element aligned.
template <typename T>
__device__ inline float4 load4(const T *p) {
  if constexpr (std::is_same_v<T, float>) {
    return *reinterpret_cast<const float4 *>(p);
  } else {
    uint2 raw = *reinterpret_cast<const uint2 *>(p);
    auto at = [](uint32_t word, int half) {
      return toF32(fromBits<T>((unsigned short)(word >> (16 * half))));
    };
    return make_float4(at(raw.x, 0), at(raw.x, 1), at(raw.y, 0), at(raw.y, 1));
  }
}

template <typename T>
__device__ inline void store4(T *p, float4 v) {
  if constexpr (std::is_same_v<T, float>) {
    *reinterpret_cast<float4 *>(p) = v;
  } else {
    auto pack = [](float lo, float hi) {
      return uint32_t(bitsOf(fromF32<T>(lo))) | uint32_t(bitsOf(fromF32<T>(hi)))
                                                    << 16;
    };
    *reinterpret_cast<uint2 *>(p) = make_uint2(pack(v.x, v.y), pack(v.z, v.w));
  }
}

__device__ inline float lane(const float4 &v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

/// Reductions over the 16 lanes of a row (xor butterflies: every lane ends
/// with the bitwise same value).
__device__ inline float rowMax(float x) {
#pragma unroll
  for (int off = 8; off > 0; off >>= 1)
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, off));
  return x;
}
__device__ inline float rowSum(float x) {
#pragma unroll
  for (int off = 8; off > 0; off >>= 1)
    x += __shfl_xor_sync(0xffffffffu, x, off);
  return x;
}

/// Rows [row0, row0 + kRows) and columns [col0, col0 + kD) of one head's
/// [seq, dim] matrix into dst (row stride kD + kPad) as fp32, zero outside
/// the matrix.
template <int kRows, int kD, typename T>
__device__ inline void loadTile(float *dst, const T *src, int64_t row0,
                                const Shape &s, int col0) {
  constexpr int kGroups = kD / 4;
  static_assert(kRows * kGroups % kThreads == 0, "whole rounds");
  // Two loads in flight per thread: unrolling further makes the kernels
  // spill registers.
#pragma unroll 2
  for (int round = 0; round < kRows * kGroups / kThreads; ++round) {
    int idx = threadIdx.x + round * kThreads;
    int r = idx / kGroups, g = idx % kGroups;
    int64_t row = row0 + r;
    int col = col0 + 4 * g;
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (row < s.seq && col < s.dim) {
      const T *p = src + row * s.dim + col;
      if (s.vec) {
        v = load4(p);
      } else {
        int left = s.dim - col;
        v.x = toF32(p[0]);
        v.y = left > 1 ? toF32(p[1]) : 0.0f;
        v.z = left > 2 ? toF32(p[2]) : 0.0f;
        v.w = left > 3 ? toF32(p[3]) : 0.0f;
      }
    }
    *reinterpret_cast<float4 *>(dst + r * rowStride(kD) + 4 * g) = v;
  }
}

/// Writes acc[r][4 g .. 4 g + 3] * mul to columns col0 + 4 tx + 64 g of row
/// `row` (a pointer to its first element), within dim.
template <int kD, typename T>
__device__ inline void storeRow(T *row, const float (&acc)[kD / 16], float mul,
                                int col0, int tx, const Shape &s) {
#pragma unroll
  for (int g = 0; g < kD / 64; ++g) {
    int col = col0 + 4 * tx + 64 * g;
    if (col >= s.dim)
      continue;
    float4 v = make_float4(acc[4 * g] * mul, acc[4 * g + 1] * mul,
                           acc[4 * g + 2] * mul, acc[4 * g + 3] * mul);
    if (s.vec) {
      store4(row + col, v);
    } else {
      int left = s.dim - col;
      row[col] = fromF32<T>(v.x);
      if (left > 1)
        row[col + 1] = fromF32<T>(v.y);
      if (left > 2)
        row[col + 2] = fromF32<T>(v.z);
      if (left > 3)
        row[col + 3] = fromF32<T>(v.w);
    }
  }
}

/// Columns of a chunk starting at dc that hold data, rounded up to 4 (the
/// rest of the round-up is zero).
template <int kD>
__device__ inline int chunkLength(const Shape &s, int dc) {
  return min(kD, (s.dim - dc + 3) & ~3);
}

/// acc[r][c] += dot(a[4 ty + r], b[tx + 16 c]) over the first len columns
/// of two shared tiles of row stride kLd, summed in column order (so every
/// kernel recomputes bitwise the same scores).
template <int kLd>
__device__ inline void dotTile(float (&acc)[4][2], const float *a,
                               const float *b, int len, int ty, int tx) {
  const float *ar = a + 4 * ty * kLd;
  const float *br = b + tx * kLd;
#pragma unroll 2
  for (int d = 0; d < len; d += 4) {
    float4 x[4], y[2];
#pragma unroll
    for (int r = 0; r < 4; ++r)
      x[r] = *reinterpret_cast<const float4 *>(ar + r * kLd + d);
#pragma unroll
    for (int c = 0; c < 2; ++c)
      y[c] = *reinterpret_cast<const float4 *>(br + 16 * c * kLd + d);
#pragma unroll
    for (int r = 0; r < 4; ++r) {
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        float t = acc[r][c];
        t = fmaf(x[r].x, y[c].x, t);
        t = fmaf(x[r].y, y[c].y, t);
        t = fmaf(x[r].z, y[c].z, t);
        t = fmaf(x[r].w, y[c].w, t);
        acc[r][c] = t;
      }
    }
  }
}

/// acc[r][4 g + e] += sum_j w[4 ty + r][j] * v[j][4 tx + 64 g + e] over the
/// kColTile rows j of v; w has row stride scoreStride(), v rowStride(kD).
template <int kD>
__device__ inline void accumulateTile(float (&acc)[4][kD / 16], const float *w,
                                      const float *v, int ty, int tx) {
  const float *wr = w + 4 * ty * scoreStride();
  const float *vc = v + 4 * tx;
#pragma unroll 2
  for (int j = 0; j < kColTile; j += 4) {
    float4 p[4];
#pragma unroll
    for (int r = 0; r < 4; ++r)
      p[r] = *reinterpret_cast<const float4 *>(wr + r * scoreStride() + j);
#pragma unroll
    for (int jj = 0; jj < 4; ++jj) {
#pragma unroll
      for (int g = 0; g < kD / 64; ++g) {
        float4 x = *reinterpret_cast<const float4 *>(
            vc + (j + jj) * rowStride(kD) + 64 * g);
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          float pr = lane(p[r], jj);
          acc[r][4 * g] = fmaf(pr, x.x, acc[r][4 * g]);
          acc[r][4 * g + 1] = fmaf(pr, x.y, acc[r][4 * g + 1]);
          acc[r][4 * g + 2] = fmaf(pr, x.z, acc[r][4 * g + 2]);
          acc[r][4 * g + 3] = fmaf(pr, x.w, acc[r][4 * g + 3]);
        }
      }
    }
  }
}

/// The head and row tile of this block. With a causal mask, tiles of late
/// queries have the most keys: heavyLast runs them first.
__device__ inline void blockTile(const Shape &s, bool heavyLast, int64_t &head,
                                 int64_t &tile) {
  int64_t x = blockIdx.x;
  head = x / s.tiles;
  tile = x % s.tiles;
  if (s.causal && heavyLast)
    tile = s.tiles - 1 - tile;
}

/// Whether query i sees key j.
__device__ inline bool visible(const Shape &s, int64_t i, int64_t j) {
  return i < s.seq && j < s.seq && (!s.causal || j <= i);
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

/// Forward over one 64-query tile: online softmax over 32-key tiles, o for
/// output columns [blockIdx.y * kD, + kD). With kStats it only writes the
/// log2-domain log-sum-exp of each row (the backward's first pass).
template <int kD, bool kStats, typename T>
__global__ void __launch_bounds__(kThreads, 2)
    forwardKernel(const T *__restrict__ q, const T *__restrict__ k,
                  const T *__restrict__ v, T *__restrict__ o,
                  float *__restrict__ lse, Shape s) {
  constexpr int kLd = rowStride(kD);
  extern __shared__ float4 smem[];
  float *qs = reinterpret_cast<float *>(smem);
  float *ks = qs + kRowTile * kLd;
  float *vs = ks + kColTile * kLd;
  float *ps = vs + kColTile * kLd;
  const int ty = threadIdx.x >> 4, tx = threadIdx.x & 15;
  int64_t head, tile;
  blockTile(s, true, head, tile);
  const int64_t i0 = tile * kRowTile;
  const int c0 = int(blockIdx.y) * kD;
  const int64_t headOffset = head * s.seq * s.dim;
  q += headOffset;
  k += headOffset;
  v += headOffset;

  float acc[4][kD / 16] = {};
  float m[4], l[4];
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
  }
  const bool resident = s.dim <= kD;
  if (resident)
    loadTile<kRowTile, kD>(qs, q, i0, s, 0);
  const int64_t end = s.causal ? min(s.seq, i0 + kRowTile) : s.seq;
  for (int64_t j0 = 0; j0 < end; j0 += kColTile) {
    float sc[4][2] = {};
    for (int dc = 0; dc < s.dim; dc += kD) {
      // The previous step's readers of every buffer are done.
      __syncthreads();
      if (!resident)
        loadTile<kRowTile, kD>(qs, q, i0, s, dc);
      loadTile<kColTile, kD>(ks, k, j0, s, dc);
      if (!kStats && dc == 0)
        loadTile<kColTile, kD>(vs, v, j0, s, c0);
      __syncthreads();
      dotTile<kLd>(sc, qs, ks, chunkLength<kD>(s, dc), ty, tx);
    }
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int64_t i = i0 + 4 * ty + r;
      float mx = -INFINITY;
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        // Rows past seq see nothing (and are never stored).
        bool ok = visible(s, i, j0 + tx + 16 * c);
        sc[r][c] = ok ? sc[r][c] * s.scaleLog2 : -INFINITY;
        mx = fmaxf(mx, sc[r][c]);
      }
      float mNew = fmaxf(m[r], rowMax(mx));
      // Nothing visible yet: keep exponents finite (exp2(-inf) = 0).
      float base = mNew == -INFINITY ? 0.0f : mNew;
      float alpha = exp2f(m[r] - base);
      m[r] = mNew;
      float sum = 0.0f;
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        float p = exp2f(sc[r][c] - base);
        sum += p;
        if constexpr (!kStats)
          ps[(4 * ty + r) * scoreStride() + tx + 16 * c] = p;
      }
      l[r] = l[r] * alpha + sum;
      if constexpr (!kStats) {
#pragma unroll
        for (int e = 0; e < kD / 16; ++e)
          acc[r][e] *= alpha;
      }
    }
    if constexpr (!kStats) {
      __syncthreads();
      accumulateTile<kD>(acc, ps, vs, ty, tx);
    }
  }

#pragma unroll
  for (int r = 0; r < 4; ++r) {
    float total = rowSum(l[r]);
    const int64_t i = i0 + 4 * ty + r;
    if (i >= s.seq)
      continue;
    if constexpr (kStats) {
      if (tx == 0)
        lse[head * s.seq + i] = m[r] + log2f(total);
    } else {
      storeRow<kD>(o + headOffset + i * s.dim, acc[r], 1.0f / total, c0, tx, s);
    }
  }
}

/// delta[row] = dot(o[row], dO[row]) in fp32, a warp per row.
template <typename T>
__global__ void __launch_bounds__(256)
    deltaKernel(const T *__restrict__ o, const T *__restrict__ dO,
                float *__restrict__ delta, int64_t rows, int dim) {
  const int laneId = threadIdx.x & 31;
  const int64_t warps = (int64_t(gridDim.x) * blockDim.x) >> 5;
  for (int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
       row < rows; row += warps) {
    const T *a = o + row * dim, *b = dO + row * dim;
    float sum = 0.0f;
    for (int d = laneId; d < dim; d += 32)
      sum = fmaf(toF32(a[d]), toF32(b[d]), sum);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1)
      sum += __shfl_xor_sync(0xffffffffu, sum, off);
    if (laneId == 0)
      delta[row] = sum;
  }
}

/// dK and dV of one 64-key tile, output columns [blockIdx.y * kD, + kD),
/// summed over the 32-query tiles that see it.
template <int kD, typename T>
__global__ void __launch_bounds__(kThreads, 1)
    keyGradKernel(const T *__restrict__ q, const T *__restrict__ k,
                  const T *__restrict__ v, const T *__restrict__ dO,
                  const float *__restrict__ lse,
                  const float *__restrict__ delta, T *__restrict__ dk,
                  T *__restrict__ dv, Shape s) {
  constexpr int kLd = rowStride(kD);
  extern __shared__ float4 smem[];
  float *ks = reinterpret_cast<float *>(smem);
  float *vs = ks + kRowTile * kLd;
  float *qs = vs + kRowTile * kLd;
  float *gs = qs + kColTile * kLd;
  float *pt = gs + kColTile * kLd;
  float *dst = pt + kRowTile * scoreStride();
  const int ty = threadIdx.x >> 4, tx = threadIdx.x & 15;
  int64_t head, tile;
  blockTile(s, false, head, tile);
  const int64_t j0 = tile * kRowTile;
  const int c0 = int(blockIdx.y) * kD;
  const int64_t headOffset = head * s.seq * s.dim;
  q += headOffset;
  k += headOffset;
  v += headOffset;
  dO += headOffset;
  lse += head * s.seq;
  delta += head * s.seq;

  float accK[4][kD / 16] = {}, accV[4][kD / 16] = {};
  const bool resident = s.dim <= kD;
  const int lastChunk = (s.dim - 1) / kD * kD;
  if (resident) {
    loadTile<kRowTile, kD>(ks, k, j0, s, 0);
    loadTile<kRowTile, kD>(vs, v, j0, s, 0);
  }
  // Causal: queries before j0 see none of these keys (j0 is a multiple of
  // kColTile).
  for (int64_t i0 = s.causal ? j0 : 0; i0 < s.seq; i0 += kColTile) {
    float sc[4][2] = {}, dp[4][2] = {};
    for (int dc = 0; dc < s.dim; dc += kD) {
      __syncthreads();
      if (!resident) {
        loadTile<kRowTile, kD>(ks, k, j0, s, dc);
        loadTile<kRowTile, kD>(vs, v, j0, s, dc);
      }
      loadTile<kColTile, kD>(qs, q, i0, s, dc);
      loadTile<kColTile, kD>(gs, dO, i0, s, dc);
      __syncthreads();
      int len = chunkLength<kD>(s, dc);
      dotTile<kLd>(sc, ks, qs, len, ty, tx);
      dotTile<kLd>(dp, vs, gs, len, ty, tx);
    }
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const int64_t i = i0 + tx + 16 * c;
      const float rowLse = i < s.seq ? lse[i] : 0.0f;
      const float rowDelta = i < s.seq ? delta[i] : 0.0f;
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        bool ok = visible(s, i, j0 + 4 * ty + r);
        float p = ok ? exp2f(sc[r][c] * s.scaleLog2 - rowLse) : 0.0f;
        int at = (4 * ty + r) * scoreStride() + tx + 16 * c;
        pt[at] = p;
        dst[at] = p * (dp[r][c] - rowDelta);
      }
    }
    if (lastChunk != c0) {
      // The products below need this block's output columns of q and dO.
      __syncthreads();
      loadTile<kColTile, kD>(qs, q, i0, s, c0);
      loadTile<kColTile, kD>(gs, dO, i0, s, c0);
    }
    __syncthreads();
    accumulateTile<kD>(accV, pt, gs, ty, tx);
    // qs holds q unscaled: dK = scale * dS^T q, applied at the store.
    accumulateTile<kD>(accK, dst, qs, ty, tx);
  }

#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int64_t j = j0 + 4 * ty + r;
    if (j >= s.seq)
      continue;
    storeRow<kD>(dk + headOffset + j * s.dim, accK[r], s.scale, c0, tx, s);
    storeRow<kD>(dv + headOffset + j * s.dim, accV[r], 1.0f, c0, tx, s);
  }
}

/// dQ of one 64-query tile, output columns [blockIdx.y * kD, + kD), summed
/// over the 32-key tiles it sees.
template <int kD, typename T>
__global__ void __launch_bounds__(kThreads, 2)
    queryGradKernel(const T *__restrict__ q, const T *__restrict__ k,
                    const T *__restrict__ v, const T *__restrict__ dO,
                    const float *__restrict__ lse,
                    const float *__restrict__ delta, T *__restrict__ dq,
                    Shape s) {
  constexpr int kLd = rowStride(kD);
  extern __shared__ float4 smem[];
  float *qs = reinterpret_cast<float *>(smem);
  float *gs = qs + kRowTile * kLd;
  float *ks = gs + kRowTile * kLd;
  float *vs = ks + kColTile * kLd;
  float *ds = vs + kColTile * kLd;
  const int ty = threadIdx.x >> 4, tx = threadIdx.x & 15;
  int64_t head, tile;
  blockTile(s, true, head, tile);
  const int64_t i0 = tile * kRowTile;
  const int c0 = int(blockIdx.y) * kD;
  const int64_t headOffset = head * s.seq * s.dim;
  q += headOffset;
  k += headOffset;
  v += headOffset;
  dO += headOffset;
  lse += head * s.seq;
  delta += head * s.seq;

  float rowLse[4], rowDelta[4];
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int64_t i = i0 + 4 * ty + r;
    rowLse[r] = i < s.seq ? lse[i] : 0.0f;
    rowDelta[r] = i < s.seq ? delta[i] : 0.0f;
  }
  float acc[4][kD / 16] = {};
  const bool resident = s.dim <= kD;
  const int lastChunk = (s.dim - 1) / kD * kD;
  if (resident) {
    loadTile<kRowTile, kD>(qs, q, i0, s, 0);
    loadTile<kRowTile, kD>(gs, dO, i0, s, 0);
  }
  const int64_t end = s.causal ? min(s.seq, i0 + kRowTile) : s.seq;
  for (int64_t j0 = 0; j0 < end; j0 += kColTile) {
    float sc[4][2] = {}, dp[4][2] = {};
    for (int dc = 0; dc < s.dim; dc += kD) {
      __syncthreads();
      if (!resident) {
        loadTile<kRowTile, kD>(qs, q, i0, s, dc);
        loadTile<kRowTile, kD>(gs, dO, i0, s, dc);
      }
      loadTile<kColTile, kD>(ks, k, j0, s, dc);
      loadTile<kColTile, kD>(vs, v, j0, s, dc);
      __syncthreads();
      int len = chunkLength<kD>(s, dc);
      dotTile<kLd>(sc, qs, ks, len, ty, tx);
      dotTile<kLd>(dp, gs, vs, len, ty, tx);
    }
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int64_t i = i0 + 4 * ty + r;
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        bool ok = visible(s, i, j0 + tx + 16 * c);
        float p = ok ? exp2f(sc[r][c] * s.scaleLog2 - rowLse[r]) : 0.0f;
        ds[(4 * ty + r) * scoreStride() + tx + 16 * c] =
            p * (dp[r][c] - rowDelta[r]);
      }
    }
    if (lastChunk != c0) {
      // The product below needs this block's output columns of k.
      __syncthreads();
      loadTile<kColTile, kD>(ks, k, j0, s, c0);
    }
    __syncthreads();
    accumulateTile<kD>(acc, ds, ks, ty, tx);
  }

#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int64_t i = i0 + 4 * ty + r;
    if (i < s.seq)
      storeRow<kD>(dq + headOffset + i * s.dim, acc[r], s.scale, c0, tx, s);
  }
}

//===----------------------------------------------------------------------===//
// Tensor-core kernels (16-bit inputs, head_dim <= 128)
//===----------------------------------------------------------------------===//

constexpr int kTcWarps = 4;
constexpr int kTcThreads = 32 * kTcWarps;
/// Rows of the other side per step: keys in the forward and dQ, queries in
/// dK/dV (32: its two 16 x kD accumulators and two score tiles then stay in
/// registers with room for three blocks per multiprocessor at 64 columns).
constexpr int kTcCols = 64;
constexpr int kTcKeyCols = 32;
static_assert(kRowTile == 16 * kTcWarps, "16 rows of the block per warp");

/// Shared row stride in elements: rows 16 bytes apart modulo 128, so the
/// eight rows of an ldmatrix hit distinct banks.
__host__ __device__ constexpr int tcStride(int kD) { return kD + 8; }

/// f16 products scale P (<= 1) by 2^14: its halves then stay normal (hi
/// down to P = 2^-28) instead of going subnormal below 2^-14. bf16 has
/// fp32's range.
template <typename T>
constexpr float kProbScale = std::is_same_v<T, __half> ? 16384.0f : 1.0f;

__device__ inline uint32_t smemAddr(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

/// 16 bytes global -> shared without registers; `bytes` < 16 zero-fills the
/// rest (0: all zeros, src not read).
__device__ inline void cpAsync16(void *dst, const void *src, int bytes) {
  asm volatile(
      "cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smemAddr(dst)),
      "l"(__cvta_generic_to_global(src)), "r"(bytes));
}
__device__ inline void cpAsync4(void *dst, const void *src, int bytes) {
  asm volatile(
      "cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smemAddr(dst)),
      "l"(__cvta_generic_to_global(src)), "r"(bytes));
}
__device__ inline void cpAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
/// Waits until at most kPending committed groups are in flight.
template <int kPending>
__device__ inline void cpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

/// Four 8x8 16-bit matrices; lanes 8 m .. 8 m + 7 address the rows of matrix
/// m, and r[m] holds (row lane / 4, columns 2 (lane % 4) + {0, 1}) of it, or
/// of its transpose with ldsm4t.
__device__ inline void ldsm4(uint32_t (&r)[4], const void *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smemAddr(p)));
}
__device__ inline void ldsm4t(uint32_t (&r)[4], const void *p) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(smemAddr(p)));
}

/// d += a * b for a 16x16 A fragment, a 16x8 B fragment (b0, b1) and a 16x8
/// fp32 accumulator: d[0], d[1] are (row lane / 4, columns 2 (lane % 4) +
/// {0, 1}), d[2], d[3] the same columns of row lane / 4 + 8.
template <typename T>
__device__ inline void mma16816(float (&d)[4], const uint32_t (&a)[4],
                                uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/// (x, y) = hi + lo with hi = round16(x, y) and lo = round16((x, y) - hi),
/// packed as in a fragment register (x in the low half): 16 (bf16) or 22
/// (f16) bits of each value, where hi alone would keep 8 or 11.
template <typename T>
__device__ inline void split2(float x, float y, uint32_t &hi, uint32_t &lo) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    __nv_bfloat162 h = __floats2bfloat162_rn(x, y);
    float2 hf = __bfloat1622float2(h);
    __nv_bfloat162 l = __floats2bfloat162_rn(x - hf.x, y - hf.y);
    hi = *reinterpret_cast<uint32_t *>(&h);
    lo = *reinterpret_cast<uint32_t *>(&l);
  } else {
    __half2 h = __floats2half2_rn(x, y);
    float2 hf = __half22float2(h);
    __half2 l = __floats2half2_rn(x - hf.x, y - hf.y);
    hi = *reinterpret_cast<uint32_t *>(&h);
    lo = *reinterpret_cast<uint32_t *>(&l);
  }
}

/// The A fragments (hi and lo parts) of keys or queries [16 kk, 16 kk + 16)
/// of a warp's 16-row tile held as accumulators c (a C fragment of 16 x 8
/// per entry: its layout is the A layout of two adjacent column blocks).
template <typename T, int kN>
__device__ inline void splitA(const float (&c)[kN / 8][4], int kk,
                              uint32_t (&hi)[4], uint32_t (&lo)[4]) {
  split2<T>(c[2 * kk][0], c[2 * kk][1], hi[0], lo[0]);
  split2<T>(c[2 * kk][2], c[2 * kk][3], hi[1], lo[1]);
  split2<T>(c[2 * kk + 1][0], c[2 * kk + 1][1], hi[2], lo[2]);
  split2<T>(c[2 * kk + 1][2], c[2 * kk + 1][3], hi[3], lo[3]);
}

/// Max and sum over the 4 lanes that hold one accumulator row (xor
/// butterflies: every lane ends with the bitwise same value).
__device__ inline float quadMax(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ inline float quadSum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

/// 2^n for n in [-126, 127].
__device__ inline float pow2(int n) {
  return __uint_as_float(uint32_t(n + 127) << 23);
}

/// Rows [row0, row0 + kRows) of one head's [seq, dim] matrix into dst (row
/// stride tcStride(kD)), zero outside the matrix: 16-byte cp.async when
/// s.vec8, else element loads (the same tile either way, so results do not
/// depend on pointer alignment). Commit and wait before reading.
template <int kRows, int kD, typename T>
__device__ inline void tcLoadTile(T *dst, const T *src, int64_t row0,
                                  const Shape &s) {
  constexpr int kChunks = kD / 8;
  static_assert(kRows * kChunks % kTcThreads == 0, "whole rounds");
#pragma unroll
  for (int round = 0; round < kRows * kChunks / kTcThreads; ++round) {
    int idx = int(threadIdx.x) + round * kTcThreads;
    int r = idx / kChunks, col = 8 * (idx % kChunks);
    int64_t row = row0 + r;
    T *d = dst + r * tcStride(kD) + col;
    bool in = row < s.seq && col < s.dim;
    const T *p = src + (in ? row * s.dim + col : 0);
    if (s.vec8) {
      cpAsync16(d, p, in ? 16 : 0);
    } else {
      uint32_t w[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        uint32_t x0 = in && col + 2 * e < s.dim ? bitsOf(p[2 * e]) : 0;
        uint32_t x1 = in && col + 2 * e + 1 < s.dim ? bitsOf(p[2 * e + 1]) : 0;
        w[e] = x0 | x1 << 16;
      }
      *reinterpret_cast<uint4 *>(d) = make_uint4(w[0], w[1], w[2], w[3]);
    }
  }
}

/// lse and delta of queries [i0, i0 + kN) into dst[0, kN) and dst[kN, 2 kN),
/// zero past seq.
template <int kN>
__device__ inline void tcLoadRowTerms(float *dst, const float *lse,
                                      const float *delta, int64_t i0,
                                      const Shape &s) {
  static_assert(2 * kN <= kTcThreads, "one element per thread");
  int idx = int(threadIdx.x);
  if (idx < 2 * kN) {
    int64_t i = i0 + idx % kN;
    const float *src = idx < kN ? lse : delta;
    bool in = i < s.seq;
    cpAsync4(dst + idx, src + (in ? i : 0), in ? 4 : 0);
  }
}

/// c = A B^T over the first dim columns for the warp's 16 rows a and the kN
/// rows b of two shared tiles (row stride tcStride(kD)).
template <typename T, int kD, int kN>
__device__ inline void scoreTile(float (&c)[kN / 8][4], const T *a, const T *b,
                                 int lane, int dim) {
  constexpr int kLd = tcStride(kD);
#pragma unroll
  for (int nt = 0; nt < kN / 8; ++nt)
    c[nt][0] = c[nt][1] = c[nt][2] = c[nt][3] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) {
    if (kk * 16 >= dim)
      break;
    uint32_t af[4];
    ldsm4(af, a + (lane & 15) * kLd + kk * 16 + (lane >> 4) * 8);
#pragma unroll
    for (int np = 0; np < kN / 16; ++np) {
      // Matrices: rows n, n + 8 of b by columns k, k + 8.
      uint32_t bf[4];
      ldsm4(bf, b + (np * 16 + (lane >> 4) * 8 + (lane & 7)) * kLd + kk * 16 +
                    ((lane >> 3) & 1) * 8);
      mma16816<T>(c[2 * np], af, bf[0], bf[1]);
      mma16816<T>(c[2 * np + 1], af, bf[2], bf[3]);
    }
  }
}

/// acc += (hi + lo) B for the A fragments of one 16-row k slice and b the
/// matching 16 rows of a shared [rows, kD] tile (read transposed), over the
/// column blocks that hold data.
template <typename T, int kD>
__device__ inline void
accumulateSlice(float (&acc)[kD / 8][4], const uint32_t (&hi)[4],
                const uint32_t (&lo)[4], const T *b, int lane, int dim) {
  constexpr int kLd = tcStride(kD);
#pragma unroll
  for (int np = 0; np < kD / 16; ++np) {
    if (np * 16 >= dim)
      break;
    // Matrices: rows k, k + 8 of b by columns n, n + 8 (transposed).
    uint32_t bf[4];
    ldsm4t(bf, b + (((lane >> 3) & 1) * 8 + (lane & 7)) * kLd + np * 16 +
                   (lane >> 4) * 8);
    mma16816<T>(acc[2 * np], hi, bf[0], bf[1]);
    mma16816<T>(acc[2 * np + 1], hi, bf[2], bf[3]);
    mma16816<T>(acc[2 * np], lo, bf[0], bf[1]);
    mma16816<T>(acc[2 * np + 1], lo, bf[2], bf[3]);
  }
}

/// f16 only: scales row h of ds (accumulator layout) by 2^k[h], chosen so
/// that the row's largest |value| lies in [2^14, 2^15): its 16-bit parts
/// then neither overflow (dS is not bounded) nor lose bits to subnormals.
/// acc holds 2^k[h] times the row's sum so far; k only decreases, and acc
/// is rescaled by the exact power of two (to zero when the new terms are
/// 2^126 times larger than anything before).
template <int kN, int kAcc>
__device__ inline void scaleRows(float (&ds)[kN / 8][4], float (&acc)[kAcc][4],
                                 int (&k)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float mx = 0.0f;
#pragma unroll
    for (int nt = 0; nt < kN / 8; ++nt)
      mx = fmaxf(mx, fmaxf(fabsf(ds[nt][2 * h]), fabsf(ds[nt][2 * h + 1])));
    mx = quadMax(mx);
    if (mx > 0.0f) {
      int e = int(__float_as_uint(mx) >> 23) - 127;
      int kNew = min(k[h], min(126, 14 - e));
      if (kNew != k[h]) {
        float r = kNew - k[h] < -126 ? 0.0f : pow2(kNew - k[h]);
#pragma unroll
        for (int nd = 0; nd < kAcc; ++nd) {
          acc[nd][2 * h] *= r;
          acc[nd][2 * h + 1] *= r;
        }
        k[h] = kNew;
      }
    }
    float f = pow2(k[h]);
#pragma unroll
    for (int nt = 0; nt < kN / 8; ++nt) {
      ds[nt][2 * h] *= f;
      ds[nt][2 * h + 1] *= f;
    }
  }
}

/// Columns col, col + 1 of a row (a pointer to its first element), within
/// dim.
template <typename T>
__device__ inline void storePair(T *row, int col, float x, float y,
                                 const Shape &s) {
  if (col >= s.dim)
    return;
  if (s.vec8) {
    uint32_t w =
        uint32_t(bitsOf(fromF32<T>(x))) | uint32_t(bitsOf(fromF32<T>(y))) << 16;
    *reinterpret_cast<uint32_t *>(row + col) = w;
  } else {
    row[col] = fromF32<T>(x);
    if (col + 1 < s.dim)
      row[col + 1] = fromF32<T>(y);
  }
}

/// Stages of the cp.async pipelines: each step's tiles are requested
/// kStages - 1 steps ahead. Three for 64 columns; 128 columns keep two,
/// where a third would leave one block per multiprocessor.
__host__ __device__ constexpr int tcStages(int kD) { return kD > 64 ? 2 : 3; }

/// Blocks per multiprocessor the 64-column kernels are compiled for (their
/// shared memory allows three; registers are capped at 168 to match).
__host__ __device__ constexpr int tcMinBlocks(int kD) {
  return kD > 64 ? 1 : 3;
}

/// 2^x on the SFU alone. exp2f adds the subnormal range to the same
/// approximation; results below 2^-126 flush to zero here, far below what
/// a softmax sum of terms <= 1 (or an fp32 accumulator) resolves.
__device__ inline float exp2Fast(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

/// Forward over one 64-query tile, a warp per 16 queries: S = Q K^T and
/// O += P V on tensor cores per 64-key tile, K and V pipelined. With
/// kStats it only writes the log2-domain log-sum-exp of each row.
template <int kD, bool kStats, typename T>
__global__ void __launch_bounds__(kTcThreads, tcMinBlocks(kD))
    tcForwardKernel(const T *__restrict__ q, const T *__restrict__ k,
                    const T *__restrict__ v, T *__restrict__ o,
                    float *__restrict__ lse, Shape s) {
  constexpr int kLd = tcStride(kD), kN = kTcCols, kStages = tcStages(kD);
  extern __shared__ float4 smem[];
  T *qs = reinterpret_cast<T *>(smem);
  T *ks = qs + kRowTile * kLd;
  T *vs = ks + kStages * kN * kLd;
  const int warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31;
  int64_t head, tile;
  blockTile(s, true, head, tile);
  const int64_t i0 = tile * kRowTile;
  const int64_t headOffset = head * s.seq * s.dim;
  q += headOffset;
  k += headOffset;
  v += headOffset;
  // This thread's accumulator rows are row0 and row0 + 8, its columns
  // col, col + 1 of every 8.
  const int64_t wrow0 = i0 + 16 * warp, row0 = wrow0 + (lane >> 2);
  const int col = 2 * (lane & 3);
  const int64_t end = s.causal ? min(s.seq, i0 + kRowTile) : s.seq;
  const int steps = int((end + kN - 1) / kN);
  // One commit group per step (empty past the last).
  auto load = [&](int step) {
    if (step < steps) {
      const int buf = step % kStages;
      tcLoadTile<kN, kD>(ks + buf * kN * kLd, k, int64_t(step) * kN, s);
      if (!kStats)
        tcLoadTile<kN, kD>(vs + buf * kN * kLd, v, int64_t(step) * kN, s);
    }
    cpAsyncCommit();
  };

  tcLoadTile<kRowTile, kD>(qs, q, i0, s);
#pragma unroll
  for (int step = 0; step < kStages - 1; ++step)
    load(step);

  float acc[kStats ? 1 : kD / 8][4] = {};
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  for (int step = 0; step < steps; ++step) {
    const int64_t j0 = int64_t(step) * kN;
    const int buf = step % kStages;
    // Its buffers' readers finished with the last step's barrier.
    load(step + kStages - 1);
    cpAsyncWait<kStages - 1>();
    __syncthreads();

    float sc[kN / 8][4];
    scoreTile<T, kD, kN>(sc, qs + 16 * warp * kLd, ks + buf * kN * kLd, lane,
                         s.dim);
    if (j0 + kN > s.seq || (s.causal && j0 + kN - 1 > wrow0)) {
#pragma unroll
      for (int nt = 0; nt < kN / 8; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          // Rows past seq see nothing (and are never stored).
          if (!visible(s, row0 + 8 * (e >> 1), j0 + 8 * nt + col + (e & 1)))
            sc[nt][e] = -INFINITY;
        }
      }
    }
    // The max of the raw scores, scaled: scaleLog2 > 0 and rounding is
    // monotonic, so it is the max of the scaled scores.
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nt = 0; nt < kN / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e)
        mx[e >> 1] = fmaxf(mx[e >> 1], sc[nt][e]);
    }
    float base[2], alpha[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mNew = fmaxf(m[h], quadMax(mx[h]) * s.scaleLog2);
      // Nothing visible yet: keep exponents finite (exp2(-inf) = 0).
      base[h] = mNew == -INFINITY ? 0.0f : mNew;
      alpha[h] = exp2Fast(m[h] - base[h]);
      m[h] = mNew;
    }
    float sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int nt = 0; nt < kN / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float p = exp2Fast(fmaf(sc[nt][e], s.scaleLog2, -base[e >> 1]));
        sum[e >> 1] += p;
        sc[nt][e] = p * kProbScale<T>;
      }
    }
    // Partial sums per lane; the quad's lanes are added at the end.
#pragma unroll
    for (int h = 0; h < 2; ++h)
      l[h] = l[h] * alpha[h] + sum[h];
    if constexpr (!kStats) {
#pragma unroll
      for (int nd = 0; nd < kD / 8; ++nd) {
#pragma unroll
        for (int e = 0; e < 4; ++e)
          acc[nd][e] *= alpha[e >> 1];
      }
      const T *vb = vs + buf * kN * kLd;
#pragma unroll
      for (int kk = 0; kk < kN / 16; ++kk) {
        uint32_t hi[4], lo[4];
        splitA<T, kN>(sc, kk, hi, lo);
        accumulateSlice<T, kD>(acc, hi, lo, vb + 16 * kk * kLd, lane, s.dim);
      }
    }
    // Every warp is done with this step's buffers.
    __syncthreads();
  }

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float total = quadSum(l[h]);
    const int64_t i = row0 + 8 * h;
    if (i >= s.seq)
      continue;
    if constexpr (kStats) {
      if ((lane & 3) == 0)
        lse[head * s.seq + i] = m[h] + log2f(total);
    } else {
      // A power of two apart: one rounding, as acc / kProbScale / total.
      float mul = 1.0f / total * (1.0f / kProbScale<T>);
      T *out = o + headOffset + i * s.dim;
#pragma unroll
      for (int nd = 0; nd < kD / 8; ++nd)
        storePair(out, 8 * nd + col, acc[nd][2 * h] * mul,
                  acc[nd][2 * h + 1] * mul, s);
    }
  }
}

/// dK and dV of one 64-key tile, a warp per 16 keys, summed over the
/// 32-query tiles that see it: S^T = K Q^T, dP^T = V dO^T, dV += P^T dO and
/// dK += dS^T Q on tensor cores, Q, dO, lse and delta pipelined.
template <int kD, typename T>
__global__ void __launch_bounds__(kTcThreads, tcMinBlocks(kD))
    tcKeyGradKernel(const T *__restrict__ q, const T *__restrict__ k,
                    const T *__restrict__ v, const T *__restrict__ dO,
                    const float *__restrict__ lse,
                    const float *__restrict__ delta, T *__restrict__ dk,
                    T *__restrict__ dv, Shape s) {
  constexpr int kLd = tcStride(kD), kN = kTcKeyCols, kStages = tcStages(kD);
  extern __shared__ float4 smem[];
  T *ks = reinterpret_cast<T *>(smem);
  T *vs = ks + kRowTile * kLd;
  T *qs = vs + kRowTile * kLd;
  T *gs = qs + kStages * kN * kLd;
  float *terms = reinterpret_cast<float *>(gs + kStages * kN * kLd);
  const int warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31;
  int64_t head, tile;
  blockTile(s, false, head, tile);
  const int64_t j0 = tile * kRowTile;
  const int64_t headOffset = head * s.seq * s.dim;
  q += headOffset;
  k += headOffset;
  v += headOffset;
  dO += headOffset;
  lse += head * s.seq;
  delta += head * s.seq;
  // Accumulator rows (keys) row0 and row0 + 8, columns col, col + 1 of 8.
  const int64_t wrow0 = j0 + 16 * warp, row0 = wrow0 + (lane >> 2);
  const int col = 2 * (lane & 3);
  // Causal: queries before j0 see none of these keys.
  const int64_t first = s.causal ? j0 : 0;
  const int steps = int((s.seq - first + kN - 1) / kN);
  auto load = [&](int step) {
    if (step < steps) {
      const int64_t i0 = first + int64_t(step) * kN;
      const int buf = step % kStages;
      tcLoadTile<kN, kD>(qs + buf * kN * kLd, q, i0, s);
      tcLoadTile<kN, kD>(gs + buf * kN * kLd, dO, i0, s);
      tcLoadRowTerms<kN>(terms + buf * 2 * kN, lse, delta, i0, s);
    }
    cpAsyncCommit();
  };

  tcLoadTile<kRowTile, kD>(ks, k, j0, s);
  tcLoadTile<kRowTile, kD>(vs, v, j0, s);
#pragma unroll
  for (int step = 0; step < kStages - 1; ++step)
    load(step);

  float accK[kD / 8][4] = {}, accV[kD / 8][4] = {};
  int kExp[2] = {126, 126}; // f16: accK rows hold 2^kExp dK / scale
  for (int step = 0; step < steps; ++step) {
    const int64_t i0 = first + int64_t(step) * kN;
    const int buf = step % kStages;
    load(step + kStages - 1);
    cpAsyncWait<kStages - 1>();
    __syncthreads();
    const T *qb = qs + buf * kN * kLd, *gb = gs + buf * kN * kLd;
    const float *lb = terms + buf * 2 * kN, *db = lb + kN;

    float st[kN / 8][4], dpt[kN / 8][4];
    scoreTile<T, kD, kN>(st, ks + 16 * warp * kLd, qb, lane, s.dim);
    scoreTile<T, kD, kN>(dpt, vs + 16 * warp * kLd, gb, lane, s.dim);
#pragma unroll
    for (int nt = 0; nt < kN / 8; ++nt) {
      const float2 rowLse =
          *reinterpret_cast<const float2 *>(lb + 8 * nt + col);
#pragma unroll
      for (int e = 0; e < 4; ++e)
        st[nt][e] = exp2Fast(
            fmaf(st[nt][e], s.scaleLog2, -((e & 1) ? rowLse.y : rowLse.x)));
    }
    if (i0 + kN > s.seq || (s.causal && wrow0 + 15 > i0)) {
#pragma unroll
      for (int nt = 0; nt < kN / 8; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          if (!visible(s, i0 + 8 * nt + col + (e & 1), row0 + 8 * (e >> 1)))
            st[nt][e] = 0.0f;
        }
      }
    }
#pragma unroll
    for (int nt = 0; nt < kN / 8; ++nt) {
      const float2 rowDelta =
          *reinterpret_cast<const float2 *>(db + 8 * nt + col);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        dpt[nt][e] =
            st[nt][e] * (dpt[nt][e] - ((e & 1) ? rowDelta.y : rowDelta.x));
        st[nt][e] *= kProbScale<T>;
      }
    }
    if constexpr (std::is_same_v<T, __half>)
      scaleRows<kN, kD / 8>(dpt, accK, kExp);
#pragma unroll
    for (int kk = 0; kk < kN / 16; ++kk) {
      uint32_t hi[4], lo[4];
      splitA<T, kN>(st, kk, hi, lo);
      accumulateSlice<T, kD>(accV, hi, lo, gb + 16 * kk * kLd, lane, s.dim);
      splitA<T, kN>(dpt, kk, hi, lo);
      accumulateSlice<T, kD>(accK, hi, lo, qb + 16 * kk * kLd, lane, s.dim);
    }
    __syncthreads();
  }

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t j = row0 + 8 * h;
    if (j >= s.seq)
      continue;
    // Powers of two apart: one rounding, as the unscaled sums times scale.
    float mulK = s.scale, mulV = 1.0f / kProbScale<T>;
    if constexpr (std::is_same_v<T, __half>)
      mulK *= pow2(-kExp[h]);
    T *outK = dk + headOffset + j * s.dim, *outV = dv + headOffset + j * s.dim;
#pragma unroll
    for (int nd = 0; nd < kD / 8; ++nd) {
      storePair(outK, 8 * nd + col, accK[nd][2 * h] * mulK,
                accK[nd][2 * h + 1] * mulK, s);
      storePair(outV, 8 * nd + col, accV[nd][2 * h] * mulV,
                accV[nd][2 * h + 1] * mulV, s);
    }
  }
}

/// dQ of one 64-query tile, a warp per 16 queries, summed over the 64-key
/// tiles it sees: S = Q K^T, dP = dO V^T and dQ += dS K on tensor cores, K
/// and V pipelined.
template <int kD, typename T>
__global__ void __launch_bounds__(kTcThreads, tcMinBlocks(kD))
    tcQueryGradKernel(const T *__restrict__ q, const T *__restrict__ k,
                      const T *__restrict__ v, const T *__restrict__ dO,
                      const float *__restrict__ lse,
                      const float *__restrict__ delta, T *__restrict__ dq,
                      Shape s) {
  constexpr int kLd = tcStride(kD), kN = kTcCols, kStages = tcStages(kD);
  extern __shared__ float4 smem[];
  T *qs = reinterpret_cast<T *>(smem);
  T *gs = qs + kRowTile * kLd;
  T *ks = gs + kRowTile * kLd;
  T *vs = ks + kStages * kN * kLd;
  const int warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31;
  int64_t head, tile;
  blockTile(s, true, head, tile);
  const int64_t i0 = tile * kRowTile;
  const int64_t headOffset = head * s.seq * s.dim;
  q += headOffset;
  k += headOffset;
  v += headOffset;
  dO += headOffset;
  lse += head * s.seq;
  delta += head * s.seq;
  const int64_t wrow0 = i0 + 16 * warp, row0 = wrow0 + (lane >> 2);
  const int col = 2 * (lane & 3);
  float rowLse[2], rowDelta[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t i = row0 + 8 * h;
    rowLse[h] = i < s.seq ? lse[i] : 0.0f;
    rowDelta[h] = i < s.seq ? delta[i] : 0.0f;
  }
  const int64_t end = s.causal ? min(s.seq, i0 + kRowTile) : s.seq;
  const int steps = int((end + kN - 1) / kN);
  auto load = [&](int step) {
    if (step < steps) {
      const int buf = step % kStages;
      tcLoadTile<kN, kD>(ks + buf * kN * kLd, k, int64_t(step) * kN, s);
      tcLoadTile<kN, kD>(vs + buf * kN * kLd, v, int64_t(step) * kN, s);
    }
    cpAsyncCommit();
  };

  tcLoadTile<kRowTile, kD>(qs, q, i0, s);
  tcLoadTile<kRowTile, kD>(gs, dO, i0, s);
#pragma unroll
  for (int step = 0; step < kStages - 1; ++step)
    load(step);

  float acc[kD / 8][4] = {};
  int kExp[2] = {126, 126}; // f16: acc rows hold 2^kExp dQ / scale
  for (int step = 0; step < steps; ++step) {
    const int64_t j0 = int64_t(step) * kN;
    const int buf = step % kStages;
    load(step + kStages - 1);
    cpAsyncWait<kStages - 1>();
    __syncthreads();
    const T *kb = ks + buf * kN * kLd, *vb = vs + buf * kN * kLd;

    float sc[kN / 8][4], dp[kN / 8][4];
    scoreTile<T, kD, kN>(sc, qs + 16 * warp * kLd, kb, lane, s.dim);
    scoreTile<T, kD, kN>(dp, gs + 16 * warp * kLd, vb, lane, s.dim);
#pragma unroll
    for (int nt = 0; nt < kN / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e)
        sc[nt][e] = exp2Fast(fmaf(sc[nt][e], s.scaleLog2, -rowLse[e >> 1]));
    }
    if (j0 + kN > s.seq || (s.causal && j0 + kN - 1 > wrow0)) {
#pragma unroll
      for (int nt = 0; nt < kN / 8; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          if (!visible(s, row0 + 8 * (e >> 1), j0 + 8 * nt + col + (e & 1)))
            sc[nt][e] = 0.0f;
        }
      }
    }
#pragma unroll
    for (int nt = 0; nt < kN / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e)
        dp[nt][e] = sc[nt][e] * (dp[nt][e] - rowDelta[e >> 1]);
    }
    if constexpr (std::is_same_v<T, __half>)
      scaleRows<kN, kD / 8>(dp, acc, kExp);
#pragma unroll
    for (int kk = 0; kk < kN / 16; ++kk) {
      uint32_t hi[4], lo[4];
      splitA<T, kN>(dp, kk, hi, lo);
      accumulateSlice<T, kD>(acc, hi, lo, kb + 16 * kk * kLd, lane, s.dim);
    }
    __syncthreads();
  }

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t i = row0 + 8 * h;
    if (i >= s.seq)
      continue;
    float mul = s.scale;
    if constexpr (std::is_same_v<T, __half>)
      mul *= pow2(-kExp[h]);
    T *out = dq + headOffset + i * s.dim;
#pragma unroll
    for (int nd = 0; nd < kD / 8; ++nd)
      storePair(out, 8 * nd + col, acc[nd][2 * h] * mul,
                acc[nd][2 * h + 1] * mul, s);
  }
}

//===----------------------------------------------------------------------===//
// Host side
//===----------------------------------------------------------------------===//

int maxSharedPerBlock() {
  static const int bytes = [] {
    computeStream(); // selects the device
    int device = 0, value = 0;
    ZRT_CUDA_CHECK(cudaGetDevice(&device));
    ZRT_CUDA_CHECK(cudaDeviceGetAttribute(
        &value, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    return value;
  }();
  return bytes;
}

/// 128-column chunks when the head dim needs more than 64 and the device
/// has the shared memory (every sm_80+ part has it for 64).
bool wideChunks(int dim, size_t smemWide) {
  return dim > 64 && smemWide <= size_t(maxSharedPerBlock());
}

/// Launches a kernel with `smem` bytes of dynamic shared memory, opting in
/// above the 48 KiB default once per kernel.
template <auto kKernel, int kBlock = kThreads, typename... Args>
void launch(const char *name, dim3 grid, size_t smem, Args... args) {
  static const bool optedIn = [&] {
    ZRT_CUDA_CHECK(cudaFuncSetAttribute(
        kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    return true;
  }();
  (void)optedIn;
  kKernel<<<grid, kBlock, smem, computeStream()>>>(args...);
  checkLaunch(name);
}

struct Attn {
  int64_t heads; // batch * heads
  int64_t seq;
  int64_t dim;
  bool causal;
  float scale;
};

Attn makeAttn(const char *kernel, int64_t batch, int64_t heads, int64_t seq,
              int64_t dim, int32_t causal, double scale) {
  checkDims(kernel, batch, heads, seq, dim);
  if (dim > kMaxHeadDim)
    fatal("%s: head_dim %lld exceeds the supported %lld", kernel,
          (long long)dim, (long long)kMaxHeadDim);
  float s = scale > 0 ? float(scale) : float(1.0 / std::sqrt(double(dim)));
  return {batch * heads, seq, dim, causal != 0, s};
}

bool aligned4(const void *p, size_t elem) {
  return reinterpret_cast<uintptr_t>(p) % (4 * elem) == 0;
}

/// The kernels' view of the problem; `ptrs` are every tensor they access.
Shape makeShape(const char *kernel, const Attn &a, size_t elem,
                std::initializer_list<const void *> ptrs) {
  Shape s;
  s.seq = a.seq;
  s.dim = int(a.dim);
  s.tiles = ceilDiv(a.seq, kRowTile);
  s.causal = a.causal;
  s.scale = a.scale;
  s.scaleLog2 = float(double(a.scale) * kLog2e);
  s.vec = a.dim % 4 == 0;
  s.vec8 = a.dim % 8 == 0;
  for (const void *p : ptrs) {
    s.vec = s.vec && aligned4(p, elem);
    s.vec8 = s.vec8 && reinterpret_cast<uintptr_t>(p) % 16 == 0;
  }
  if (a.heads > INT_MAX / s.tiles)
    fatal("%s: batch * heads * ceil(seq / %d) exceeds the CUDA grid", kernel,
          kRowTile);
  return s;
}

dim3 gridOf(const Attn &a, const Shape &s, int kD, bool allChunks) {
  return dim3(unsigned(a.heads * s.tiles),
              allChunks ? unsigned(ceilDiv(a.dim, kD)) : 1u);
}

template <int kD, bool kStats, typename T>
void launchForward(const Attn &a, const Shape &s, const T *q, const T *k,
                   const T *v, T *o, float *lse) {
  launch<forwardKernel<kD, kStats, T>>(
      kStats ? "attention_grad (lse)" : "attention", gridOf(a, s, kD, !kStats),
      forwardSmem(kD, kStats), q, k, v, o, lse, s);
}

template <bool kStats, typename T>
void forward(const Attn &a, const Shape &s, const T *q, const T *k, const T *v,
             T *o, float *lse) {
  if (wideChunks(s.dim, forwardSmem(128, kStats)))
    launchForward<128, kStats>(a, s, q, k, v, o, lse);
  else
    launchForward<64, kStats>(a, s, q, k, v, o, lse);
}

template <int kD, typename T>
void launchGrads(const Attn &a, const Shape &s, const T *q, const T *k,
                 const T *v, const T *dO, const float *lse, const float *delta,
                 T *dq, T *dk, T *dv) {
  dim3 grid = gridOf(a, s, kD, true);
  launch<keyGradKernel<kD, T>>("attention_grad (dk, dv)", grid, keyGradSmem(kD),
                               q, k, v, dO, lse, delta, dk, dv, s);
  launch<queryGradKernel<kD, T>>("attention_grad (dq)", grid, queryGradSmem(kD),
                                 q, k, v, dO, lse, delta, dq, s);
}

constexpr size_t tcForwardSmem(int kD, bool stats) {
  return 2 * size_t((kRowTile + (stats ? 1 : 2) * tcStages(kD) * kTcCols) *
                    tcStride(kD));
}
constexpr size_t tcKeyGradSmem(int kD) {
  return 2 * size_t((2 * kRowTile + 2 * tcStages(kD) * kTcKeyCols) *
                    tcStride(kD)) +
         sizeof(float) * 2 * size_t(tcStages(kD) * kTcKeyCols);
}
constexpr size_t tcQueryGradSmem(int kD) {
  return 2 * size_t((2 * kRowTile + 2 * tcStages(kD) * kTcCols) * tcStride(kD));
}

/// The tensor-core kernels' chunk for 16-bit inputs (64 or 128 columns), or
/// 0 where they do not apply: wider heads, or a device without the shared
/// memory (every sm_80+ part has it for 64).
int tcChunk(int dim) {
  if (dim <= 64)
    return 64;
  size_t most = std::max(
      {tcForwardSmem(128, false), tcKeyGradSmem(128), tcQueryGradSmem(128)});
  return dim <= 128 && most <= size_t(maxSharedPerBlock()) ? 128 : 0;
}

template <int kD, bool kStats, typename T>
void launchTcForward(const Attn &a, const Shape &s, const T *q, const T *k,
                     const T *v, T *o, float *lse) {
  launch<tcForwardKernel<kD, kStats, T>, kTcThreads>(
      kStats ? "attention_grad (lse)" : "attention", gridOf(a, s, kD, false),
      tcForwardSmem(kD, kStats), q, k, v, o, lse, s);
}

template <int kD, typename T>
void launchTcGrads(const Attn &a, const Shape &s, const T *q, const T *k,
                   const T *v, const T *dO, float *lse, const float *delta,
                   T *dq, T *dk, T *dv) {
  dim3 grid = gridOf(a, s, kD, false);
  launchTcForward<kD, true>(a, s, q, k, v, static_cast<T *>(nullptr), lse);
  launch<tcKeyGradKernel<kD, T>, kTcThreads>(
      "attention_grad (dk, dv)", grid, tcKeyGradSmem(kD), q, k, v, dO,
      static_cast<const float *>(lse), delta, dk, dv, s);
  launch<tcQueryGradKernel<kD, T>, kTcThreads>(
      "attention_grad (dq)", grid, tcQueryGradSmem(kD), q, k, v, dO,
      static_cast<const float *>(lse), delta, dq, s);
}

} // namespace

void zrt::cuda::attention(int32_t dtype, const void *q, const void *k,
                          const void *v, void *o, int64_t batch, int64_t heads,
                          int64_t seq, int64_t headDim, int32_t causal,
                          double scale) {
  Attn a = makeAttn("zrt_attention", batch, heads, seq, headDim, causal, scale);
  if (a.heads == 0 || a.seq == 0 || a.dim == 0)
    return;
  dispatch(dtype, "zrt_attention", [&](auto tag) {
    using T = decltype(tag);
    Shape s = makeShape("zrt_attention", a, sizeof(T), {q, k, v, o});
    const T *qv = static_cast<const T *>(q), *kv = static_cast<const T *>(k),
            *vv = static_cast<const T *>(v);
    T *ov = static_cast<T *>(o);
    if constexpr (!std::is_same_v<T, float>) {
      if (int chunk = tcChunk(s.dim)) {
        if (chunk == 64)
          launchTcForward<64, false>(a, s, qv, kv, vv, ov, nullptr);
        else
          launchTcForward<128, false>(a, s, qv, kv, vv, ov, nullptr);
        return;
      }
    }
    forward<false>(a, s, qv, kv, vv, ov, nullptr);
  });
}

void zrt::cuda::attentionGrad(int32_t dtype, const void *q, const void *k,
                              const void *v, const void *o, const void *dO,
                              void *dq, void *dk, void *dv, int64_t batch,
                              int64_t heads, int64_t seq, int64_t headDim,
                              int32_t causal, double scale) {
  Attn a =
      makeAttn("zrt_attention_grad", batch, heads, seq, headDim, causal, scale);
  if (a.heads == 0 || a.seq == 0 || a.dim == 0)
    return;
  dispatch(dtype, "zrt_attention_grad", [&](auto tag) {
    using T = decltype(tag);
    Shape s = makeShape("zrt_attention_grad", a, sizeof(T),
                        {q, k, v, dO, dq, dk, dv});
    DeviceScratch scratch(
        zrt_scratch_attention_grad(batch, heads, seq, headDim));
    float *lse = scratch.as<float>();
    float *delta = lse + a.heads * a.seq;
    const T *qv = static_cast<const T *>(q), *kv = static_cast<const T *>(k),
            *vv = static_cast<const T *>(v), *ov = static_cast<const T *>(o),
            *gv = static_cast<const T *>(dO);
    int64_t rows = a.heads * a.seq;
    deltaKernel<T><<<gridFor(rows * 32), 256, 0, computeStream()>>>(
        ov, gv, delta, rows, s.dim);
    checkLaunch("attention_grad (delta)");
    T *dqv = static_cast<T *>(dq), *dkv = static_cast<T *>(dk),
      *dvv = static_cast<T *>(dv);
    if constexpr (!std::is_same_v<T, float>) {
      if (int chunk = tcChunk(s.dim)) {
        if (chunk == 64)
          launchTcGrads<64>(a, s, qv, kv, vv, gv, lse, delta, dqv, dkv, dvv);
        else
          launchTcGrads<128>(a, s, qv, kv, vv, gv, lse, delta, dqv, dkv, dvv);
        return;
      }
    }
    forward<true>(a, s, qv, kv, vv, static_cast<T *>(nullptr), lse);
    if (wideChunks(s.dim, keyGradSmem(128)))
      launchGrads<128>(a, s, qv, kv, vv, gv, lse, delta, dqv, dkv, dvv);
    else
      launchGrads<64>(a, s, qv, kv, vv, gv, lse, delta, dqv, dkv, dvv);
  });
}
