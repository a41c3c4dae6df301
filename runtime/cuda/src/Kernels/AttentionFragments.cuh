//===- AttentionFragments.cuh - Tensor-core tiles of attention --*- C++ -*-===//
//
// Part of the zero-mlir project.
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
// MMAs that keep 16 or 22 bits. With train's --attention-precision 16bit
// (Shape::splitProbs false) they enter as hi alone, one MMA, as
// FlashAttention and PyTorch's flash kernels round P: 2 of the forward's 3
// MMA passes and 7 of the backward's 11 remain. For f16, P (<= 1) is scaled by
// 2^14 and each row of dS (unbounded) by a power of two, so that neither half
// overflows nor goes subnormal; the scales are exact and undone at the
// store. Odd head dims and misaligned tensors load with element loads
// instead of cp.async into the same tiles, so results do not depend on
// pointer alignment.
//
// The pieces both tensor-core files use: mma.sync fragments, ldmatrix,
// cp.async, the split of fp32 operands into 16-bit halves, tile loads and
// the shared memory each kernel needs.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_CUDA_ATTENTION_FRAGMENTS_CUH
#define ZERO_RT_CUDA_ATTENTION_FRAGMENTS_CUH

#include "Kernels/Attention.cuh"

#include <type_traits>

namespace zrt {
namespace cuda {
namespace attn {

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

/// (x, y) rounded to 16 bits and packed as in a fragment register.
template <typename T>
__device__ inline uint32_t round2(float x, float y) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    __nv_bfloat162 h = __floats2bfloat162_rn(x, y);
    return *reinterpret_cast<uint32_t *>(&h);
  } else {
    __half2 h = __floats2half2_rn(x, y);
    return *reinterpret_cast<uint32_t *>(&h);
  }
}

/// split2 when `split`, else hi = round16(x, y) alone (lo not set).
template <typename T>
__device__ inline void split2(float x, float y, bool split, uint32_t &hi,
                              uint32_t &lo) {
  if (split)
    split2<T>(x, y, hi, lo);
  else
    hi = round2<T>(x, y);
}

/// The A fragments of keys or queries [16 kk, 16 kk + 16) of a warp's
/// 16-row tile held as accumulators c (a C fragment of 16 x 8 per entry:
/// its layout is the A layout of two adjacent column blocks): hi and lo
/// parts when `split`, else hi alone.
template <typename T, int kN>
__device__ inline void splitA(const float (&c)[kN / 8][4], int kk, bool split,
                              uint32_t (&hi)[4], uint32_t (&lo)[4]) {
  split2<T>(c[2 * kk][0], c[2 * kk][1], split, hi[0], lo[0]);
  split2<T>(c[2 * kk][2], c[2 * kk][3], split, hi[1], lo[1]);
  split2<T>(c[2 * kk + 1][0], c[2 * kk + 1][1], split, hi[2], lo[2]);
  split2<T>(c[2 * kk + 1][2], c[2 * kk + 1][3], split, hi[3], lo[3]);
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

/// acc += (hi + lo) B (hi B without `split`) for the A fragments of one
/// 16-row k slice and b the matching 16 rows of a shared [rows, kD] tile
/// (read transposed), over the column blocks that hold data.
template <typename T, int kD>
__device__ inline void accumulateSlice(float (&acc)[kD / 8][4],
                                       const uint32_t (&hi)[4],
                                       const uint32_t (&lo)[4], bool split,
                                       const T *b, int lane, int dim) {
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
    if (split) {
      mma16816<T>(acc[2 * np], lo, bf[0], bf[1]);
      mma16816<T>(acc[2 * np + 1], lo, bf[2], bf[3]);
    }
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

} // namespace attn
} // namespace cuda
} // namespace zrt

#endif // ZERO_RT_CUDA_ATTENTION_FRAGMENTS_CUH
