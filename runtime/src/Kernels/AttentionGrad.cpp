//===- AttentionGrad.cpp - The CPU attention's backward -------------------===//
//
// Part of the zero-mlir project.
//
// The backward of Attention.cpp's blocked attention (see there): the row
// terms (log-sum-exp and delta), dK and dV per key block over all query
// blocks, dQ per query block over all key blocks, or all of them in one
// pass per key/value head when a query block's scores fit the workspace.
//
//===----------------------------------------------------------------------===//

#include "Device/Memory.h"
#include "Kernels/AttentionTiles.h"
#include "zero_rt/scratch.h"

using namespace zrt;
using namespace zrt::attn;

namespace {

/// delta[r] = dO_r . O_r for rows r < nr of `o` and `dO` (d floats each);
/// oBuf and gBuf hold one converted row each.
template <typename T>
void rowDeltas(const T *o, const T *dO, int64_t nr, int64_t d, float *oBuf,
               float *gBuf, float *delta) {
  for (int64_t r = 0; r < nr; ++r) {
    const float *oRow = loadRows(o + r * d, 1, d, oBuf);
    const float *gRow = loadRows(dO + r * d, 1, d, gBuf);
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int64_t t = 0; t < d; ++t)
      dot += oRow[t] * gRow[t];
    delta[r] = dot;
  }
}

/// One key block of a row's log-sum-exp: folds exp(sr[c]) over scores
/// [first, visible) of nc into the running max and sum. A block the row
/// sees none of leaves both exactly unchanged.
inline void sumExps(const float *sr, int64_t nc, int64_t first, int64_t visible,
                    float &rowMax, float &rowSum) {
  if (first >= visible)
    return;
  float mx = rowMax;
#pragma omp simd reduction(max : mx)
  for (int64_t c = first; c < visible; ++c)
    mx = sr[c] > mx ? sr[c] : mx;
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < nc; ++c)
    sum += c >= first && c < visible ? expApprox(sr[c] - mx) : 0.0f;
  rowSum = rowSum * expApprox(rowMax - mx) + sum;
  rowMax = mx;
}

/// lse[i] = log sum_j exp(scale q_i . k_j) over visible keys and
/// delta[i] = dO_i . O_i, for every query row.
template <typename T>
void rowTerms(const Attn &all, const T *q, const T *k, const T *o, const T *dO,
              float *lse, float *delta) {
  int64_t d = all.dim;
  int64_t bs = rowTermsBlock(d);
  int64_t blocks = ceilDiv(all.seq, bs);
  parallelForEach(all.heads * blocks, itemWork(all, bs, 1), [&](int64_t item) {
    int64_t h = item / blocks, i0 = (item % blocks) * bs;
    const Attn a = all.forHead(h);
    int64_t nr = std::min(bs, a.seq - i0);
    int64_t row0 = h * a.seq + i0;
    const T *kh = k + h / a.group * a.seq * d;
    alignas(64) float ws[kWorkspaceFloats];
    float *qBuf = ws, *kBuf = qBuf + bs * d, *oBuf = kBuf + bs * d,
          *gBuf = oBuf + d;
    float *s = gBuf + d, *rowMax = s + bs * bs, *rowSum = rowMax + bs;
    rowDeltas(o + row0 * d, dO + row0 * d, nr, d, oBuf, gBuf, delta + row0);
    const float *qb = loadRows(q + row0 * d, nr, d, qBuf, a.scale);
    std::fill(rowMax, rowMax + nr, -std::numeric_limits<float>::infinity());
    std::fill(rowSum, rowSum + nr, 0.0f);
    for (int64_t j0 = keyBegin(a, i0, bs), end = keyEnd(a, i0, nr); j0 < end;
         j0 += bs) {
      int64_t nc = std::min(bs, end - j0);
      const float *kb = loadRows(kh + j0 * d, nc, d, kBuf);
      dotRows(qb, nr, kb, nc, d, s, bs);
      if (a.softcap)
        capScores(a, s, bs, i0, nr, j0, nc);
      if (a.alibi)
        addAlibi(a, h, s, bs, i0, nr, j0, nc);
      for (int64_t r = 0; r < nr; ++r)
        sumExps(s + r * bs, nc, firstKey(a, i0, r, j0, nc),
                visibleKeys(a, i0, r, j0, nc), rowMax[r], rowSum[r]);
    }
    for (int64_t r = 0; r < nr; ++r)
      lse[row0 + r] = rowMax[r] + std::log(rowSum[r]);
  });
}

/// dK and dV of each key block of a key/value head, summed over the query
/// blocks that see it of each query head of its group, in order.
template <typename T>
void keyGrads(const Attn &all, const T *q, const T *k, const T *v, const T *dO,
              const float *lse, const float *delta, T *dk, T *dv) {
  int64_t d = all.dim;
  int64_t bs = keyGradsBlock(d);
  int64_t blocks = ceilDiv(all.seq, bs);
  // Each item sums over the group's query heads (of one batch element).
  int64_t kvHeads = all.heads / all.group,
          work = all.group * itemWork(all, bs, 4);
  parallelForEach(kvHeads * blocks, work, [&](int64_t item) {
    int64_t hk = item / blocks, j0 = (item % blocks) * bs;
    const Attn a = all.forHead(hk * all.group);
    int64_t nc = std::min(bs, a.seq - j0);
    int64_t kvBase = hk * a.seq;
    alignas(64) float ws[kWorkspaceFloats];
    float *kBuf = ws, *vBuf = kBuf + bs * d, *dkb = vBuf + bs * d,
          *dvb = dkb + bs * d, *qBuf = dvb + bs * d, *gBuf = qBuf + bs * d,
          *p = gBuf + bs * d, *dp = p + bs * bs;
    const float *kb = loadRows(k + (kvBase + j0) * d, nc, d, kBuf);
    const float *vb = loadRows(v + (kvBase + j0) * d, nc, d, vBuf);
    std::fill(dkb, dkb + 2 * bs * d, 0.0f);
    for (int64_t h = hk * a.group; h < (hk + 1) * a.group; ++h) {
      int64_t base = h * a.seq;
      // Causal: queries before j0 see none of these keys; a window or their
      // document hides them from the queries from queryEnd on, and the
      // document from those before queryBegin.
      for (int64_t i0 = queryBegin(a, j0, bs), iEnd = queryEnd(a, j0, nc);
           i0 < iEnd; i0 += bs) {
        int64_t nr = std::min(bs, a.seq - i0);
        const float *qb = loadRows(q + (base + i0) * d, nr, d, qBuf, a.scale);
        const float *gb = loadRows(dO + (base + i0) * d, nr, d, gBuf);
        dotRows(qb, nr, kb, nc, d, p, bs);
        if (a.softcap) {
          dotRows(gb, nr, vb, nc, d, dp, bs);
          capScoreGrads(a, p, bs, dp, bs, i0, nr, j0, nc, delta + base + i0);
        }
        if (a.alibi)
          addAlibi(a, h, p, bs, i0, nr, j0, nc);
        probabilities(a, p, bs, lse + base + i0, i0, nr, j0, nc, p);
        accumulateTransposed(p, bs, nc, nr, gb, d, dvb);
        if (a.softcap) {
          scoreGradsCapped(a, p, bs, dp, bs, i0, nr, j0, nc);
        } else {
          dotRows(gb, nr, vb, nc, d, dp, bs);
          scoreGrads(a, p, bs, dp, bs, i0, nr, j0, nc, delta + base + i0);
        }
        // qb holds scale * q, so this is scale * dS^T q.
        accumulateTransposed(p, bs, nc, nr, qb, d, dkb);
      }
    }
    fromFloat(dkb, dk + (kvBase + j0) * d, nc * d);
    fromFloat(dvb, dv + (kvBase + j0) * d, nc * d);
  });
}

/// dQ of each query block, summed over the key blocks it sees.
template <typename T>
void queryGrads(const Attn &all, const T *q, const T *k, const T *v,
                const T *dO, const float *lse, const float *delta, T *dq) {
  int64_t d = all.dim;
  int64_t bs = queryGradsBlock(d);
  int64_t blocks = ceilDiv(all.seq, bs);
  parallelForEach(all.heads * blocks, itemWork(all, bs, 3), [&](int64_t item) {
    int64_t h = item / blocks, i0 = (item % blocks) * bs;
    const Attn a = all.forHead(h);
    int64_t nr = std::min(bs, a.seq - i0);
    int64_t base = h * a.seq, kvBase = h / a.group * a.seq;
    alignas(64) float ws[kWorkspaceFloats];
    float *qBuf = ws, *gBuf = qBuf + bs * d, *dqb = gBuf + bs * d,
          *kBuf = dqb + bs * d, *vBuf = kBuf + bs * d, *p = vBuf + bs * d,
          *dp = p + bs * bs;
    const float *qb = loadRows(q + (base + i0) * d, nr, d, qBuf, a.scale);
    const float *gb = loadRows(dO + (base + i0) * d, nr, d, gBuf);
    std::fill(dqb, dqb + nr * d, 0.0f);
    for (int64_t j0 = keyBegin(a, i0, bs), end = keyEnd(a, i0, nr); j0 < end;
         j0 += bs) {
      int64_t nc = std::min(bs, end - j0);
      const float *kb = loadRows(k + (kvBase + j0) * d, nc, d, kBuf);
      const float *vb = loadRows(v + (kvBase + j0) * d, nc, d, vBuf);
      dotRows(qb, nr, kb, nc, d, p, bs);
      dotRows(gb, nr, vb, nc, d, dp, bs);
      if (a.softcap)
        capScoreGrads(a, p, bs, dp, bs, i0, nr, j0, nc, delta + base + i0);
      if (a.alibi)
        addAlibi(a, h, p, bs, i0, nr, j0, nc);
      probabilities(a, p, bs, lse + base + i0, i0, nr, j0, nc, p);
      if (a.softcap)
        scoreGradsCapped(a, p, bs, dp, bs, i0, nr, j0, nc);
      else
        scoreGrads(a, p, bs, dp, bs, i0, nr, j0, nc, delta + base + i0);
      accumulate(p, bs, nr, nc, kb, d, dqb);
    }
#pragma omp simd
    for (int64_t t = 0; t < nr * d; ++t)
      dqb[t] *= a.scale;
    fromFloat(dqb, dq + (base + i0) * d, nr * d);
  });
}

/// Whether fusedGrads takes the problem: the three passes use one block
/// size (so their sums over key and query blocks are chunked alike), and a
/// block of query rows' scores against every key fits the workspace, with a
/// block of dP, the row statistics and the scaled query block, plus fp32
/// copies of the head's k and v, its dK and dV sums and a dO and dQ block
/// when T is not f32. For f32 at head_dim 64 that is seq <= 378.
template <typename T>
bool fusedGradsFit(const Attn &a) {
  int64_t n = a.seq, d = a.dim, bs = keyGradsBlock(d);
  // Soft-capping's derivative needs each tile's dP beside its scores.
  if (a.softcap || rowTermsBlock(d) != bs || queryGradsBlock(d) != bs)
    return false;
  int64_t floats = bs * n + bs * bs + 2 * bs + 2 * d + bs * d;
  if (!std::is_same_v<T, float>)
    floats += 4 * n * d + 2 * bs * d;
  return floats <= kWorkspaceFloats;
}

/// The backward in one pass over the scores (when fusedGradsFit): per
/// key/value head, per query head of its group and block of query rows in
/// order, q k^T is derived once, and lse, delta, P, dV, dS, dK and dQ
/// follow from it. Every product is the same chain as in the three passes,
/// the dK and dV sums run over the same query blocks in the same order, and
/// lse and dQ add the same key blocks in order (a block a row sees none of
/// adds exact zeros), so the results are bit for bit those of rowTerms,
/// keyGrads and queryGrads.
template <typename T>
void fusedGrads(const Attn &all, const T *q, const T *k, const T *v, const T *o,
                const T *dO, float *lse, float *delta, T *dq, T *dk, T *dv) {
  int64_t n = all.seq, d = all.dim;
  int64_t bs = keyGradsBlock(d);
  int64_t work = all.group * ceilDiv(n, bs) * itemWork(all, bs, 5);
  parallelForEach(all.kvHeads(), work, [&](int64_t hk) {
    const Attn a = all.forHead(hk * all.group);
    alignas(64) float ws[kWorkspaceFloats];
    float *p = ws, *dp = p + bs * n, *rowMax = dp + bs * bs,
          *rowSum = rowMax + bs, *oBuf = rowSum + bs, *gRowBuf = oBuf + d,
          *qBuf = gRowBuf + d;
    // fp32 copies and sums, for 16-bit types only.
    float *kBuf = nullptr, *vBuf = nullptr, *dkSum = nullptr, *dvSum = nullptr,
          *gBuf = nullptr, *dqSum = nullptr;
    if (!std::is_same_v<T, float>) {
      kBuf = qBuf + bs * d;
      vBuf = kBuf + n * d;
      dkSum = vBuf + n * d;
      dvSum = dkSum + n * d;
      gBuf = dvSum + n * d;
      dqSum = gBuf + bs * d;
    }
    int64_t kvBase = hk * n;
    const float *kb = loadRows(k + kvBase * d, n, d, kBuf);
    const float *vb = loadRows(v + kvBase * d, n, d, vBuf);
    float *dkb = outF32(dk + kvBase * d, dkSum);
    float *dvb = outF32(dv + kvBase * d, dvSum);
    std::fill(dkb, dkb + n * d, 0.0f);
    std::fill(dvb, dvb + n * d, 0.0f);
    for (int64_t h = hk * a.group; h < (hk + 1) * a.group; ++h) {
      for (int64_t i0 = 0; i0 < n; i0 += bs) {
        int64_t nr = std::min(bs, n - i0), end = keyEnd(a, i0, nr);
        int64_t begin = keyBegin(a, i0, bs);
        int64_t row0 = h * n + i0;
        rowDeltas(o + row0 * d, dO + row0 * d, nr, d, oBuf, gRowBuf,
                  delta + row0);
        const float *qb = loadRows(q + row0 * d, nr, d, qBuf, a.scale);
        const float *gb = loadRows(dO + row0 * d, nr, d, gBuf);
        // q k^T in the tiles of the three passes.
        for (int64_t j0 = begin; j0 < end; j0 += bs)
          dotRows(qb, nr, kb + j0 * d, std::min(bs, end - j0), d, p + j0, n,
                  a.causal && j0 == i0);
        if (a.alibi)
          addAlibi(a, h, p + begin, n, i0, nr, begin, end - begin);
        std::fill(rowMax, rowMax + nr, -std::numeric_limits<float>::infinity());
        std::fill(rowSum, rowSum + nr, 0.0f);
        for (int64_t r = 0; r < nr; ++r) {
          for (int64_t j0 = begin; j0 < end; j0 += bs) {
            int64_t nc = std::min(bs, end - j0);
            sumExps(p + r * n + j0, nc, firstKey(a, i0, r, j0, nc),
                    visibleKeys(a, i0, r, j0, nc), rowMax[r], rowSum[r]);
          }
          lse[row0 + r] = rowMax[r] + std::log(rowSum[r]);
        }
        probabilities(a, p + begin, n, lse + row0, i0, nr, begin, end - begin,
                      p + begin);
        // Key c is seen by the block's rows r >= c - i0 only.
        Causal z;
        z.skipLead = a.causal;
        z.leadShift = i0 - begin;
        accumulateTransposed(p + begin, n, end - begin, nr, gb, d,
                             dvb + begin * d, z);
        // dP a key block at a time, into dS in place of P.
        for (int64_t j0 = begin; j0 < end; j0 += bs) {
          int64_t nc = std::min(bs, end - j0);
          dotRows(gb, nr, vb + j0 * d, nc, d, dp, bs, a.causal && j0 == i0);
          scoreGrads(a, p + j0, n, dp, bs, i0, nr, j0, nc, delta + row0);
        }
        // qb holds scale * q, so this is scale * dS^T q.
        accumulateTransposed(p + begin, n, end - begin, nr, qb, d,
                             dkb + begin * d, z);
        float *dqb = outF32(dq + row0 * d, dqSum);
        std::fill(dqb, dqb + nr * d, 0.0f);
        for (int64_t j0 = begin; j0 < end; j0 += bs) {
          int64_t nc = std::min(bs, end - j0);
          accumulate(p + j0, n, nr, nc, kb + j0 * d, d, dqb,
                     a.causal && j0 == i0);
        }
#pragma omp simd
        for (int64_t t = 0; t < nr * d; ++t)
          dqb[t] *= a.scale;
        storeF32(dqb, dq + row0 * d, nr * d);
      }
    }
    storeF32(dkb, dk + kvBase * d, n * d);
    storeF32(dvb, dv + kvBase * d, n * d);
  });
}

} // namespace

void attn::runGrads(const Attn &a, int32_t dtype, const void *q, const void *k,
                    const void *v, const void *o, const void *dO, void *dq,
                    void *dk, void *dv, int64_t batch, int64_t heads,
                    int64_t seq, int64_t headDim) {
  if (a.heads == 0 || a.seq == 0 || a.dim == 0)
    return;
  Scratch scratch(zrt_scratch_attention_grad(batch, heads, seq, headDim));
  float *lse = scratch.as<float>();
  float *delta = lse + a.heads * a.seq;
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *qv = static_cast<const T *>(q), *kv = static_cast<const T *>(k),
            *vv = static_cast<const T *>(v), *ov = static_cast<const T *>(o),
            *gv = static_cast<const T *>(dO);
    T *dqv = static_cast<T *>(dq), *dkv = static_cast<T *>(dk),
      *dvv = static_cast<T *>(dv);
    if (fusedGradsFit<T>(a)) {
      fusedGrads(a, qv, kv, vv, ov, gv, lse, delta, dqv, dkv, dvv);
      return;
    }
    rowTerms(a, qv, kv, ov, gv, lse, delta);
    keyGrads(a, qv, kv, vv, gv, lse, delta, dkv, dvv);
    queryGrads(a, qv, kv, vv, gv, lse, delta, dqv);
  });
}
