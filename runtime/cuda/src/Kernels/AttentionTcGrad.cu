//===- AttentionTcGrad.cu - Attention backward on tensor cores ------------===//
//
// Part of the zero-mlir project.
//
// The dK/dV and dQ kernels of the tensor-core path (AttentionFragments.cuh),
// after the forward's statistics pass.
//
//===----------------------------------------------------------------------===//

#include "Kernels/AttentionFragments.cuh"

using namespace zrt;
using namespace zrt::cuda;
using namespace zrt::cuda::attn;

namespace {

/// dK and dV of one 64-key tile of a key/value head, a warp per 16 keys,
/// summed over the 32-query tiles that see it of each query head of its
/// group in order (kGrouped; else of its own query head): S^T = K Q^T,
/// dP^T = V dO^T, dV += P^T dO and dK += dS^T Q on tensor cores, Q, dO, lse
/// and delta pipelined (across the group's heads: the steps of head
/// h0 + g follow those of h0 + g - 1).
template <int kD, bool kGrouped, typename T>
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
  int64_t kvHead, tile;
  blockTile(s, false, kvHead, tile);
  const int64_t j0 = tile * kRowTile;
  const int64_t kvOffset = kvHead * s.seq * s.dim;
  k += kvOffset;
  v += kvOffset;
  // Accumulator rows (keys) row0 and row0 + 8, columns col, col + 1 of 8.
  const int64_t wrow0 = j0 + 16 * warp, row0 = wrow0 + (lane >> 2);
  const int col = 2 * (lane & 3);
  // Causal: queries before j0 see none of these keys. j0 < seq, so every
  // query head has at least one step.
  const int64_t first = s.causal ? j0 : 0;
  const int headSteps = int((s.seq - first + kN - 1) / kN);
  const int group = kGrouped ? s.group : 1;
  const int steps = headSteps * group;
  // Step `step` covers queries [i0, i0 + kN) of query head h0 + step /
  // headSteps, i0 = first + (step % headSteps) kN.
  const int64_t h0 = kvHead * group;
  auto queryRow0 = [&](int step) {
    return first + int64_t(kGrouped ? step % headSteps : step) * kN;
  };
  auto load = [&](int step) {
    if (step < steps) {
      const int64_t head = kGrouped ? h0 + step / headSteps : h0;
      const int64_t i0 = queryRow0(step);
      const int64_t headOffset = head * s.seq * s.dim;
      const int buf = step % kStages;
      tcLoadTile<kN, kD>(qs + buf * kN * kLd, q + headOffset, i0, s);
      tcLoadTile<kN, kD>(gs + buf * kN * kLd, dO + headOffset, i0, s);
      tcLoadRowTerms<kN>(terms + buf * 2 * kN, lse + head * s.seq,
                         delta + head * s.seq, i0, s);
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
    const int64_t i0 = queryRow0(step);
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
      splitA<T, kN>(st, kk, s.splitProbs, hi, lo);
      accumulateSlice<T, kD>(accV, hi, lo, s.splitProbs, gb + 16 * kk * kLd,
                             lane, s.dim);
      splitA<T, kN>(dpt, kk, s.splitProbs, hi, lo);
      accumulateSlice<T, kD>(accK, hi, lo, s.splitProbs, qb + 16 * kk * kLd,
                             lane, s.dim);
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
    T *outK = dk + kvOffset + j * s.dim, *outV = dv + kvOffset + j * s.dim;
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
/// tiles it sees (of its key/value head when kGrouped): S = Q K^T,
/// dP = dO V^T and dQ += dS K on tensor cores, K and V pipelined.
template <int kD, bool kGrouped, typename T>
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
  const int64_t kvOffset =
      kGrouped ? kvHeadOf(s, head) * s.seq * s.dim : headOffset;
  q += headOffset;
  k += kvOffset;
  v += kvOffset;
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
      splitA<T, kN>(dp, kk, s.splitProbs, hi, lo);
      accumulateSlice<T, kD>(acc, hi, lo, s.splitProbs, kb + 16 * kk * kLd,
                             lane, s.dim);
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

template <int kD, bool kGrouped, typename T>
void launchTcGradKernels(const Attn &a, const Shape &s, const T *q, const T *k,
                         const T *v, const T *dO, const float *lse,
                         const float *delta, T *dq, T *dk, T *dv) {
  launch<tcKeyGradKernel<kD, kGrouped, T>, kTcThreads>(
      "attention_grad (dk, dv)", gridOf(a.kvHeads(), s, kD, false),
      tcKeyGradSmem(kD), q, k, v, dO, lse, delta, dk, dv, s);
  launch<tcQueryGradKernel<kD, kGrouped, T>, kTcThreads>(
      "attention_grad (dq)", gridOf(a.heads, s, kD, false), tcQueryGradSmem(kD),
      q, k, v, dO, lse, delta, dq, s);
}

/// The multi-head instantiation keeps the code multi-head attention had: a
/// second head offset live across the dQ kernel's loop spills at its
/// register cap.
template <int kD, typename T>
void launchTcGrads(const Attn &a, const Shape &s, const T *q, const T *k,
                   const T *v, const T *dO, float *lse, const float *delta,
                   T *dq, T *dk, T *dv) {
  tcForward<true>(a, s, kD, q, k, v, static_cast<T *>(nullptr), lse);
  if (s.group > 1)
    launchTcGradKernels<kD, true>(a, s, q, k, v, dO, lse, delta, dq, dk, dv);
  else
    launchTcGradKernels<kD, false>(a, s, q, k, v, dO, lse, delta, dq, dk, dv);
}

} // namespace

template <typename T>
void attn::tcGrads(const Attn &a, const Shape &s, int chunk, const T *q,
                   const T *k, const T *v, const T *dO, float *lse,
                   const float *delta, T *dq, T *dk, T *dv) {
  if (chunk == 64)
    launchTcGrads<64>(a, s, q, k, v, dO, lse, delta, dq, dk, dv);
  else
    launchTcGrads<128>(a, s, q, k, v, dO, lse, delta, dq, dk, dv);
}

#define ZRT_INSTANTIATE(T)                                                     \
  template void attn::tcGrads<T>(const Attn &, const Shape &, int, const T *,  \
                                 const T *, const T *, const T *, float *,     \
                                 const float *, T *, T *, T *);
ZRT_INSTANTIATE(__nv_bfloat16)
ZRT_INSTANTIATE(__half)
#undef ZRT_INSTANTIATE
