//===- AttentionSimt.cu - Attention on CUDA cores -------------------------===//
//
// Part of the zero-mlir project.
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
// These kernels also run the descriptor's sliding window (the steps a
// window hides wholly are skipped) and soft-capping: the scores become
// softcap * tanh(scale q . k / softcap), and dS gets the cap's derivative
// 1 - tanh^2, with AttentionShape.h's formulas as the CPU; and ALiBi, whose
// bias (the slope times log2(e), times j - i) is added to the log2-domain
// logit after the cap.
//
//===----------------------------------------------------------------------===//

#include "Kernels/Attention.cuh"

#include <type_traits>

using namespace zrt;
using namespace zrt::cuda;
using namespace zrt::cuda::attn;

namespace {

/// Rows of the other side per step.
constexpr int kColTile = 32;
/// Floats of padding per shared row (bank spread, keeps 16-byte alignment).
constexpr int kPad = 4;

static_assert(kThreads == 16 * (kRowTile / 4), "16 threads per 4 rows");
static_assert(kColTile == 2 * 16, "two score columns per thread");

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

/// The backward's scores and dP of a tile pair, summed over the head's
/// column chunks: sc = a . b and dp = a2 . b2, with a and a2 kRowTile rows
/// from row a0 (reloaded per chunk unless `resident`) and b and b2
/// kColTile rows from row b0.
template <int kD, typename T>
__device__ inline void
gradScores(float (&sc)[4][2], float (&dp)[4][2], float *as, const T *a,
           float *a2s, const T *a2, int64_t a0, float *bs, const T *b,
           float *b2s, const T *b2, int64_t b0, bool resident, const Shape &s,
           int ty, int tx) {
  constexpr int kLd = rowStride(kD);
  for (int dc = 0; dc < s.dim; dc += kD) {
    __syncthreads();
    if (!resident) {
      loadTile<kRowTile, kD>(as, a, a0, s, dc);
      loadTile<kRowTile, kD>(a2s, a2, a0, s, dc);
    }
    loadTile<kColTile, kD>(bs, b, b0, s, dc);
    loadTile<kColTile, kD>(b2s, b2, b0, s, dc);
    __syncthreads();
    int len = chunkLength<kD>(s, dc);
    dotTile<kLd>(sc, as, bs, len, ty, tx);
    dotTile<kLd>(dp, a2s, b2s, len, ty, tx);
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
  const int64_t kvOffset = kvHeadOf(s, head) * s.seq * s.dim;
  q += headOffset;
  k += kvOffset;
  v += kvOffset;

  float acc[4][kD / 16] = {};
  const float slope2 = alibiSlope2(s, head);
  float m[4], l[4];
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
  }
  const bool resident = s.dim <= kD;
  if (resident)
    loadTile<kRowTile, kD>(qs, q, i0, s, 0);
  // The keys the tile's queries can see: before them (causal), within the
  // window, of their documents.
  const int32_t *docs = documentsOf(s, head, s.headsPerBatch);
  int64_t begin = firstKeyStep(s, i0, kColTile),
          end = s.causal ? min(s.seq, i0 + kRowTile) : s.seq;
  documentRange(s, docs, i0, kRowTile, kColTile, begin, end);
  for (int64_t j0 = begin; j0 < end; j0 += kColTile) {
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
        bool ok = visible(s, docs, i, j0 + tx + 16 * c);
        float t, x = logit2(s, sc[r][c], slope2, i, j0 + tx + 16 * c, t);
        sc[r][c] = ok ? x : -INFINITY;
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

/// dK and dV of one 64-key tile of a key/value head, output columns
/// [blockIdx.y * kD, + kD), summed over the 32-query tiles that see it of
/// each query head of its group, in order (kGrouped; else of its own
/// query head).
template <int kD, bool kGrouped, bool kExt, typename T>
__global__ void __launch_bounds__(kThreads, 1)
    keyGradKernel(const T *__restrict__ q0, const T *__restrict__ k,
                  const T *__restrict__ v, const T *__restrict__ dO0,
                  const float *__restrict__ lse0,
                  const float *__restrict__ delta0, T *__restrict__ dk,
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
  int64_t kvHead, tile;
  blockTile(s, false, kvHead, tile);
  const int64_t j0 = tile * kRowTile;
  const int c0 = int(blockIdx.y) * kD;
  const int64_t kvOffset = kvHead * s.seq * s.dim;
  k += kvOffset;
  v += kvOffset;

  float accK[4][kD / 16] = {}, accV[4][kD / 16] = {};
  const bool resident = s.dim <= kD;
  const int lastChunk = (s.dim - 1) / kD * kD;
  if (resident) {
    loadTile<kRowTile, kD>(ks, k, j0, s, 0);
    loadTile<kRowTile, kD>(vs, v, j0, s, 0);
  }
  const int group = kGrouped ? s.group : 1;
  // Every query head of the group is of the key/value head's batch element.
  const int32_t *docs = documentsOf(s, kvHead, s.kvHeadsPerBatch);
  for (int g = 0; g < group; ++g) {
    const int64_t head = kvHead * group + g;
    const int64_t headOffset = head * s.seq * s.dim;
    const T *__restrict__ q = q0 + headOffset;
    const T *__restrict__ dO = dO0 + headOffset;
    const float *__restrict__ lse = lse0 + head * s.seq;
    const float *__restrict__ delta = delta0 + head * s.seq;
    const float slope2 = kExt ? alibiSlope2(s, head) : 0.0f;
    // Causal: queries before j0 see none of these keys (j0 is a multiple of
    // kColTile); a window hides them from the queries from iEnd on, and
    // documents from those outside the keys' documents.
    int64_t iBegin = s.causal ? j0 : 0,
            iEnd = kExt ? queryEnd(s, j0, kRowTile) : s.seq;
    if constexpr (kExt)
      documentRange(s, docs, j0, kRowTile, kColTile, iBegin, iEnd);
    for (int64_t i0 = iBegin; i0 < iEnd; i0 += kColTile) {
      float sc[4][2] = {}, dp[4][2] = {};
      gradScores<kD>(sc, dp, ks, k, vs, v, j0, qs, q, gs, dO, i0, resident, s,
                     ty, tx);
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int64_t i = i0 + tx + 16 * c;
        const float rowLse = i < s.seq ? lse[i] : 0.0f;
        const float rowDelta = i < s.seq ? delta[i] : 0.0f;
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          bool ok = visibleIf<kExt>(s, docs, i, j0 + 4 * ty + r);
          float t,
              x = logit2If<kExt>(s, sc[r][c], slope2, i, j0 + 4 * ty + r, t);
          float p = ok ? exp2f(x - rowLse) : 0.0f;
          float g = dp[r][c] - rowDelta;
          // dS in the scaled logit: through the cap's derivative.
          if (kExt && s.softcap)
            g *= softcapSlope(t);
          int at = (4 * ty + r) * scoreStride() + tx + 16 * c;
          pt[at] = p;
          dst[at] = p * g;
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
  }

#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int64_t j = j0 + 4 * ty + r;
    if (j >= s.seq)
      continue;
    storeRow<kD>(dk + kvOffset + j * s.dim, accK[r], s.scale, c0, tx, s);
    storeRow<kD>(dv + kvOffset + j * s.dim, accV[r], 1.0f, c0, tx, s);
  }
}

/// dQ of one 64-query tile, output columns [blockIdx.y * kD, + kD), summed
/// over the 32-key tiles it sees (of its key/value head when kGrouped).
template <int kD, bool kGrouped, bool kExt, typename T>
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
  const int64_t kvOffset =
      kGrouped ? kvHeadOf(s, head) * s.seq * s.dim : headOffset;
  q += headOffset;
  k += kvOffset;
  v += kvOffset;
  dO += headOffset;
  lse += head * s.seq;
  delta += head * s.seq;

  const float slope2 = kExt ? alibiSlope2(s, head) : 0.0f;
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
  const int32_t *docs = documentsOf(s, head, s.headsPerBatch);
  int64_t begin = kExt ? firstKeyStep(s, i0, kColTile) : 0,
          end = s.causal ? min(s.seq, i0 + kRowTile) : s.seq;
  if constexpr (kExt)
    documentRange(s, docs, i0, kRowTile, kColTile, begin, end);
  for (int64_t j0 = begin; j0 < end; j0 += kColTile) {
    float sc[4][2] = {}, dp[4][2] = {};
    gradScores<kD>(sc, dp, qs, q, gs, dO, i0, ks, k, vs, v, j0, resident, s, ty,
                   tx);
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int64_t i = i0 + 4 * ty + r;
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        bool ok = visibleIf<kExt>(s, docs, i, j0 + tx + 16 * c);
        float t,
            x = logit2If<kExt>(s, sc[r][c], slope2, i, j0 + tx + 16 * c, t);
        float p = ok ? exp2f(x - rowLse[r]) : 0.0f;
        float g = dp[r][c] - rowDelta[r];
        if (kExt && s.softcap)
          g *= softcapSlope(t);
        ds[(4 * ty + r) * scoreStride() + tx + 16 * c] = p * g;
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
// Host side
//===----------------------------------------------------------------------===//

/// 128-column chunks when the head dim needs more than 64 and the device
/// has the shared memory (every sm_80+ part has it for 64).
bool wideChunks(int dim, size_t smemWide) {
  return dim > 64 && smemWide <= size_t(maxSharedPerBlock());
}

template <int kD, bool kStats, typename T>
void launchForward(const Attn &a, const Shape &s, const T *q, const T *k,
                   const T *v, T *o, float *lse) {
  launch<forwardKernel<kD, kStats, T>>(
      kStats ? "attention_grad (lse)" : "attention",
      gridOf(a.heads, s, kD, !kStats), forwardSmem(kD, kStats), q, k, v, o, lse,
      s);
}

} // namespace

template <bool kStats, typename T>
void attn::simtForward(const Attn &a, const Shape &s, const T *q, const T *k,
                       const T *v, T *o, float *lse) {
  if (wideChunks(s.dim, forwardSmem(128, kStats)))
    launchForward<128, kStats>(a, s, q, k, v, o, lse);
  else
    launchForward<64, kStats>(a, s, q, k, v, o, lse);
}

namespace {

template <int kD, bool kGrouped, bool kExt, typename T>
void launchGradKernels(const Attn &a, const Shape &s, const T *q, const T *k,
                       const T *v, const T *dO, const float *lse,
                       const float *delta, T *dq, T *dk, T *dv) {
  launch<keyGradKernel<kD, kGrouped, kExt, T>>(
      "attention_grad (dk, dv)", gridOf(a.kvHeads(), s, kD, true),
      keyGradSmem(kD), q, k, v, dO, lse, delta, dk, dv, s);
  launch<queryGradKernel<kD, kGrouped, kExt, T>>(
      "attention_grad (dq)", gridOf(a.heads, s, kD, true), queryGradSmem(kD), q,
      k, v, dO, lse, delta, dq, s);
}

/// The plain instantiation (no window, soft-cap, ALiBi or documents) or the
/// general one.
template <int kD, bool kGrouped, typename T>
void launchGradsOf(const Attn &a, const Shape &s, const T *q, const T *k,
                   const T *v, const T *dO, const float *lse,
                   const float *delta, T *dq, T *dk, T *dv) {
  if (s.window || s.softcap || s.alibiHeads || s.segments)
    launchGradKernels<kD, kGrouped, true>(a, s, q, k, v, dO, lse, delta, dq, dk,
                                          dv);
  else
    launchGradKernels<kD, kGrouped, false>(a, s, q, k, v, dO, lse, delta, dq,
                                           dk, dv);
}

/// The multi-head instantiation keeps the code multi-head attention had: a
/// second head offset live across the loops would cost registers (spills
/// at the dQ kernels' cap, a block per multiprocessor less for dK/dV).
template <int kD, typename T>
void launchGrads(const Attn &a, const Shape &s, const T *q, const T *k,
                 const T *v, const T *dO, const float *lse, const float *delta,
                 T *dq, T *dk, T *dv) {
  if (s.group > 1)
    launchGradsOf<kD, true>(a, s, q, k, v, dO, lse, delta, dq, dk, dv);
  else
    launchGradsOf<kD, false>(a, s, q, k, v, dO, lse, delta, dq, dk, dv);
}

} // namespace

template <typename T>
void attn::simtGrads(const Attn &a, const Shape &s, const T *q, const T *k,
                     const T *v, const T *dO, const float *lse,
                     const float *delta, T *dq, T *dk, T *dv) {
  if (wideChunks(s.dim, keyGradSmem(128)))
    launchGrads<128>(a, s, q, k, v, dO, lse, delta, dq, dk, dv);
  else
    launchGrads<64>(a, s, q, k, v, dO, lse, delta, dq, dk, dv);
}

#define ZRT_INSTANTIATE(T)                                                     \
  template void attn::simtForward<false, T>(const Attn &, const Shape &,       \
                                            const T *, const T *, const T *,   \
                                            T *, float *);                     \
  template void attn::simtForward<true, T>(const Attn &, const Shape &,        \
                                           const T *, const T *, const T *,    \
                                           T *, float *);                      \
  template void attn::simtGrads<T>(                                            \
      const Attn &, const Shape &, const T *, const T *, const T *, const T *, \
      const float *, const float *, T *, T *, T *);
ZRT_INSTANTIATE(float)
ZRT_INSTANTIATE(__nv_bfloat16)
ZRT_INSTANTIATE(__half)
#undef ZRT_INSTANTIATE
