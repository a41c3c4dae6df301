//===- AttentionTcForward.cu - Attention forward on tensor cores ----------===//
//
// Part of the zero-mlir project.
//
// The forward kernel of the tensor-core path (AttentionFragments.cuh), also
// the backward's first pass (the log-sum-exp only).
//
//===----------------------------------------------------------------------===//

#include "Kernels/AttentionFragments.cuh"

#include <algorithm>

using namespace zrt;
using namespace zrt::cuda;
using namespace zrt::cuda::attn;

namespace {

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
  const int64_t kvOffset = kvHeadOf(s, head) * s.seq * s.dim;
  q += headOffset;
  k += kvOffset;
  v += kvOffset;
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
        splitA<T, kN>(sc, kk, s.splitProbs, hi, lo);
        accumulateSlice<T, kD>(acc, hi, lo, s.splitProbs, vb + 16 * kk * kLd,
                               lane, s.dim);
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

template <int kD, bool kStats, typename T>
void launchTcForward(const Attn &a, const Shape &s, const T *q, const T *k,
                     const T *v, T *o, float *lse) {
  launch<tcForwardKernel<kD, kStats, T>, kTcThreads>(
      kStats ? "attention_grad (lse)" : "attention",
      gridOf(a.heads, s, kD, false), tcForwardSmem(kD, kStats), q, k, v, o, lse,
      s);
}

} // namespace

int attn::tcChunk(int dim) {
  if (dim <= 64)
    return 64;
  size_t most = std::max(
      {tcForwardSmem(128, false), tcKeyGradSmem(128), tcQueryGradSmem(128)});
  return dim <= 128 && most <= size_t(maxSharedPerBlock()) ? 128 : 0;
}

template <bool kStats, typename T>
void attn::tcForward(const Attn &a, const Shape &s, int chunk, const T *q,
                     const T *k, const T *v, T *o, float *lse) {
  if (chunk == 64)
    launchTcForward<64, kStats>(a, s, q, k, v, o, lse);
  else
    launchTcForward<128, kStats>(a, s, q, k, v, o, lse);
}

#define ZRT_INSTANTIATE(T)                                                     \
  template void attn::tcForward<false, T>(const Attn &, const Shape &, int,    \
                                          const T *, const T *, const T *,     \
                                          T *, float *);                       \
  template void attn::tcForward<true, T>(const Attn &, const Shape &, int,     \
                                         const T *, const T *, const T *, T *, \
                                         float *);
ZRT_INSTANTIATE(__nv_bfloat16)
ZRT_INSTANTIATE(__half)
#undef ZRT_INSTANTIATE
