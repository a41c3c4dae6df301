//===- AttentionTiles.h - The CPU attention's tiles -------------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// What the CPU attention's forward (Attention.cpp) and backward
// (AttentionGrad.cpp) share: the per-thread workspace and its block sizes,
// the fp32 tiles and their chain products, and the mask's, the cap's and
// ALiBi's passes over a tile of scores. Attention.cpp says how the kernels
// are blocked.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_KERNELS_ATTENTION_TILES_H
#define ZERO_RT_KERNELS_ATTENTION_TILES_H

#include "Kernels/AttentionShape.h"
#include "Kernels/Kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#if defined(__AVX__)
#include <immintrin.h>
#endif

namespace zrt::attn {

/// Floats of the per-thread stack workspace (128 KiB).
constexpr int64_t kWorkspaceFloats = 32768;
constexpr int64_t kMaxBlock = 64;
// The backward of the largest head_dim fits the workspace with B = 1.
static_assert(kMaxAttentionHeadDim == (kWorkspaceFloats - 2) / 6,
              "the head_dim limit is the workspace's");

/// The largest power-of-two block B <= kMaxBlock for which need(B) floats
/// fit the workspace.
template <typename Need>
int64_t blockSize(const Need &need) {
  int64_t b = kMaxBlock;
  while (b > 1 && need(b) > kWorkspaceFloats)
    b /= 2;
  return b;
}

// The blocks of the backward's three passes. Each fixes how its output's
// sums are chunked (lse over keys, dK and dV over queries, dQ over keys), so
// the fused backward uses the same three to give the same bits.
inline int64_t rowTermsBlock(int64_t d) {
  return blockSize(
      [&](int64_t b) { return 2 * b * d + 2 * d + b * b + 2 * b; });
}
inline int64_t keyGradsBlock(int64_t d) {
  return blockSize([&](int64_t b) { return 6 * b * d + 2 * b * b; });
}
inline int64_t queryGradsBlock(int64_t d) {
  return blockSize([&](int64_t b) { return 5 * b * d + 2 * b * b; });
}

/// src (rows x dim, contiguous) in fp32 times `mul`: src itself for
/// unscaled f32, else `buf` filled.
template <typename T>
const float *loadRows(const T *src, int64_t rows, int64_t dim, float *buf,
                      float mul = 1.0f) {
  if (mul == 1.0f)
    return loadF32(src, rows * dim, buf);
  // f32 scales in one pass; other types convert first.
  const float *from = loadF32(src, rows * dim, buf);
#pragma omp simd
  for (int64_t i = 0; i < rows * dim; ++i)
    buf[i] = from[i] * mul;
  return buf;
}

// Every tile product is a chain product: per output element one FMA chain
// over the inner index in order from zero, then stored or added to the
// output once. A vector FMA rounds as the scalar one, so the result is the
// same bits on every x86-64 whatever its vector width, and it does not
// depend on the BLAS library or the kernel it picks for the CPU
// (OPENBLAS_CORETYPE): a row's result is the same in every blocking that
// runs the same chains, which is what lets the fused backward and the three
// passes agree bit for bit (KernelTest's AttentionGradPathsAgree). The
// kernels keep the accumulators in registers and skip the causal mask's
// zeros.

/// The causal mask's zeros a chainProduct may skip.
struct Causal {
  /// Out row i is needed at columns <= i + colShift only; the others become
  /// zeros.
  bool lowerCols = false;
  int64_t colShift = 0;
  /// a's entries (i, j) with j < i - leadShift are exact zeros, which leave
  /// a chain from zero unchanged.
  bool skipLead = false;
  int64_t leadShift = 0;
  /// a's entries (i, j) with j > i are exact zeros, which leave the chain
  /// unchanged.
  bool skipTail = false;
};

/// How a chain starts and ends: from zero and stored, from zero and added
/// to the output, or continued from the output (the next part of an inner
/// index split in chunks) and stored. All three are the same chain.
enum class Chain { Store, Add, Continue };

#if defined(__AVX512F__)
/// Sixteen floats; the last vector of a row masked.
struct Lanes {
  using V = __m512;
  using Mask = __mmask16;
  static constexpr int kWidth = 16, kVectors = 4;
  static Mask mask(int64_t n) { return Mask((1u << n) - 1u); }
  static Mask full() { return Mask(0xffff); }
  static V zero() { return _mm512_setzero_ps(); }
  static V load(const float *p, Mask m) { return _mm512_maskz_loadu_ps(m, p); }
  static void store(float *p, Mask m, V x) { _mm512_mask_storeu_ps(p, m, x); }
  static V broadcast(float x) { return _mm512_set1_ps(x); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
};
#elif defined(__AVX2__) && defined(__FMA__)
/// Eight floats; the last vector of a row masked. Two vectors a row keep six
/// rows' accumulators and the operands within the 16 registers.
struct Lanes {
  using V = __m256;
  using Mask = __m256i;
  static constexpr int kWidth = 8, kVectors = 2;
  static Mask mask(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(n)),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static Mask full() { return _mm256_set1_epi32(-1); }
  static V zero() { return _mm256_setzero_ps(); }
  static V load(const float *p, Mask m) { return _mm256_maskload_ps(p, m); }
  static void store(float *p, Mask m, V x) { _mm256_maskstore_ps(p, m, x); }
  static V broadcast(float x) { return _mm256_set1_ps(x); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
};
#else
/// One float at a time (std::fma: the same rounding as the vector FMAs).
struct Lanes {
  using V = float;
  using Mask = bool;
  static constexpr int kWidth = 1, kVectors = 8;
  static Mask mask(int64_t n) { return n > 0; }
  static Mask full() { return true; }
  static V zero() { return 0.0f; }
  static V load(const float *p, Mask m) { return m ? *p : 0.0f; }
  static void store(float *p, Mask m, V x) {
    if (m)
      *p = x;
  }
  static V broadcast(float x) { return x; }
  static V fma(V a, V b, V c) { return std::fma(a, b, c); }
  static V add(V a, V b) { return a + b; }
};
#endif

/// The columns one pass of the kernel covers.
constexpr int64_t kChainCols = Lanes::kWidth * Lanes::kVectors;

/// Rows [0, R) of out over columns [t0, t0 + kWidth * NV), the last vector
/// masked by `last`.
template <int R, int NV>
void chainBlock(const float *a, int64_t ai, int64_t aj, int64_t nIn,
                const float *b, int64_t ldb, float *out, int64_t ldo,
                int64_t t0, typename Lanes::Mask last, Chain mode) {
  using V = typename Lanes::V;
  constexpr int W = Lanes::kWidth;
  auto maskOf = [&](int c) { return c + 1 < NV ? Lanes::full() : last; };
  // Fully unrolled, so that the accumulators stay in registers.
  V acc[R][NV];
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 8
    for (int c = 0; c < NV; ++c)
      acc[i][c] = mode == Chain::Continue
                      ? Lanes::load(out + i * ldo + t0 + W * c, maskOf(c))
                      : Lanes::zero();
  for (int64_t j = 0; j < nIn; ++j) {
    const float *bj = b + j * ldb + t0;
    V x[NV];
#pragma GCC unroll 8
    for (int c = 0; c < NV; ++c)
      x[c] = Lanes::load(bj + W * c, maskOf(c));
    const float *aj0 = a + j * aj;
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
      V w = Lanes::broadcast(aj0[i * ai]);
#pragma GCC unroll 8
      for (int c = 0; c < NV; ++c)
        acc[i][c] = Lanes::fma(w, x[c], acc[i][c]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 8
    for (int c = 0; c < NV; ++c) {
      float *o = out + i * ldo + t0 + W * c;
      V y = acc[i][c];
      if (mode == Chain::Add)
        y = Lanes::add(Lanes::load(o, maskOf(c)), y);
      Lanes::store(o, maskOf(c), y);
    }
}

template <int R, int NV>
void chainRowsAs(const float *a, int64_t ai, int64_t aj, int64_t nIn,
                 const float *b, int64_t ldb, float *out, int64_t ldo,
                 int64_t t0, int64_t width, Chain mode) {
  chainBlock<R, NV>(a, ai, aj, nIn, b, ldb, out, ldo, t0,
                    Lanes::mask(width - Lanes::kWidth * (NV - 1)), mode);
}

template <int R>
void chainRows(const float *a, int64_t ai, int64_t aj, int64_t nIn,
               const float *b, int64_t ldb, int64_t cols, float *out,
               int64_t ldo, Chain mode) {
  for (int64_t t0 = 0; t0 < cols; t0 += kChainCols) {
    int64_t width = std::min<int64_t>(kChainCols, cols - t0);
    int vectors = int(ceilDiv(width, Lanes::kWidth));
    auto run = [&](auto nv) {
      chainRowsAs<R, decltype(nv)::value>(a, ai, aj, nIn, b, ldb, out, ldo, t0,
                                          width, mode);
    };
    static_assert(Lanes::kVectors <= 8, "cases below");
    switch (vectors) {
    case 1:
      run(std::integral_constant<int, 1>());
      break;
    case 2:
      run(std::integral_constant<int, std::min(2, Lanes::kVectors)>());
      break;
    case 3:
      run(std::integral_constant<int, std::min(3, Lanes::kVectors)>());
      break;
    case 4:
      run(std::integral_constant<int, std::min(4, Lanes::kVectors)>());
      break;
    default:
      run(std::integral_constant<int, Lanes::kVectors>());
      break;
    }
  }
}

/// Rows [i, i + R) of chainProduct.
template <int R>
void chainProductRows(int64_t i, const float *a, int64_t ai, int64_t aj,
                      int64_t nIn, const float *b, int64_t ldb, int64_t cols,
                      float *out, int64_t ldo, Chain mode, const Causal &z) {
  int64_t j0 = z.skipLead ? std::clamp<int64_t>(i - z.leadShift, 0, nIn) : 0;
  int64_t j1 = z.skipTail ? std::min<int64_t>(nIn, i + R) : nIn;
  int64_t limit =
      z.lowerCols ? std::clamp<int64_t>(i + z.colShift + R, 0, cols) : cols;
  chainRows<R>(a + i * ai + j0 * aj, ai, aj, std::max<int64_t>(j1 - j0, 0),
               b + j0 * ldb, ldb, limit, out + i * ldo, ldo, mode);
  for (int64_t r = i; r < i + R && limit < cols; ++r)
    std::fill(out + r * ldo + limit, out + r * ldo + cols, 0.0f);
}

/// out[i * ldo + t] = sum_j a[i * ai + j * aj] * b[j * ldb + t] for
/// i < nOut, t < cols, over j < nIn in order (see Chain for where the chain
/// starts and ends).
inline void chainProduct(const float *a, int64_t ai, int64_t aj, int64_t nOut,
                         int64_t nIn, const float *b, int64_t ldb, int64_t cols,
                         float *out, int64_t ldo, Chain mode,
                         const Causal &z = {}) {
  int64_t i = 0;
  for (; i + 6 <= nOut; i += 6)
    chainProductRows<6>(i, a, ai, aj, nIn, b, ldb, cols, out, ldo, mode, z);
  if (i + 4 <= nOut) {
    chainProductRows<4>(i, a, ai, aj, nIn, b, ldb, cols, out, ldo, mode, z);
    i += 4;
  }
  if (i + 2 <= nOut) {
    chainProductRows<2>(i, a, ai, aj, nIn, b, ldb, cols, out, ldo, mode, z);
    i += 2;
  }
  if (i < nOut)
    chainProductRows<1>(i, a, ai, aj, nIn, b, ldb, cols, out, ldo, mode, z);
}

/// out[i] += sum_j p[j * ldp + i] * v[j] for i < nOut, j < nIn.
inline void accumulateTransposed(const float *p, int64_t ldp, int64_t nOut,
                                 int64_t nIn, const float *v, int64_t dim,
                                 float *out, const Causal &z = {}) {
  chainProduct(p, 1, ldp, nOut, nIn, v, dim, dim, out, dim, Chain::Add, z);
}

/// out[i] += sum_j p[i * ldp + j] * v[j] for i < nOut, j < nIn. A
/// `diagonal` tile of a causal problem skips p's masked entries (column >
/// row), which are zeros.
inline void accumulate(const float *p, int64_t ldp, int64_t nOut, int64_t nIn,
                       const float *v, int64_t dim, float *out,
                       bool diagonal = false) {
  Causal z;
  z.skipTail = diagonal;
  chainProduct(p, ldp, 1, nOut, nIn, v, dim, dim, out, dim, Chain::Add, z);
}

/// tb[t * ldt + c] = b[c * dim + t] for c < rows, t < cols.
inline void transposeRows(const float *b, int64_t rows, int64_t dim,
                          int64_t cols, float *tb, int64_t ldt) {
  for (int64_t c0 = 0; c0 < rows; c0 += 8) {
    int64_t cn = std::min<int64_t>(8, rows - c0), t0 = 0;
#if defined(__AVX__)
    // 8 x 8 blocks in registers.
    for (; cn == 8 && t0 + 8 <= cols; t0 += 8) {
      __m256 r[8], u[8], w[8];
      for (int i = 0; i < 8; ++i)
        r[i] = _mm256_loadu_ps(b + (c0 + i) * dim + t0);
      for (int i = 0; i < 8; i += 2) {
        u[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        u[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
      }
      for (int i = 0; i < 8; i += 4) {
        w[i] = _mm256_shuffle_ps(u[i], u[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        w[i + 1] = _mm256_shuffle_ps(u[i], u[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        w[i + 2] =
            _mm256_shuffle_ps(u[i + 1], u[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        w[i + 3] =
            _mm256_shuffle_ps(u[i + 1], u[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
      }
      for (int i = 0; i < 4; ++i) {
        _mm256_storeu_ps(tb + (t0 + i) * ldt + c0,
                         _mm256_permute2f128_ps(w[i], w[i + 4], 0x20));
        _mm256_storeu_ps(tb + (t0 + i + 4) * ldt + c0,
                         _mm256_permute2f128_ps(w[i], w[i + 4], 0x31));
      }
    }
#endif
    for (int64_t c = c0; c < c0 + cn; ++c)
      for (int64_t t = t0; t < cols; ++t)
        tb[t * ldt + c] = b[c * dim + t];
  }
}

/// Inner indices of one transposed panel of dotRows.
constexpr int64_t kPanelInner = 128;

/// s[r * lds + c] = dot(a[r], b[c]) for r < na, c < nb; rows have `dim`
/// floats. b is transposed a panel of kChainCols rows by kPanelInner of
/// its floats at a time (longer rows continue their chains panel by
/// panel). A `diagonal` tile of a causal problem gets its masked entries
/// (column > row) as zeros.
inline void dotRows(const float *a, int64_t na, const float *b, int64_t nb,
                    int64_t dim, float *s, int64_t lds, bool diagonal = false) {
  alignas(64) float panel[kPanelInner * kChainCols];
  for (int64_t c0 = 0; c0 < nb; c0 += kChainCols) {
    int64_t nc = std::min<int64_t>(kChainCols, nb - c0);
    // Causal: rows before c0 see no column of this panel.
    int64_t r0 = diagonal ? std::min(c0, na) : 0;
    for (int64_t r = 0; r < r0; ++r)
      std::fill(s + r * lds + c0, s + r * lds + c0 + nc, 0.0f);
    Causal z;
    z.lowerCols = diagonal;
    z.colShift = r0 - c0;
    for (int64_t t0 = 0; t0 < dim; t0 += kPanelInner) {
      int64_t nt = std::min<int64_t>(kPanelInner, dim - t0);
      transposeRows(b + c0 * dim + t0, nc, dim, nt, panel, nc);
      chainProduct(a + r0 * dim + t0, dim, 1, na - r0, nt, panel, nc, nc,
                   s + r0 * lds + c0, lds,
                   t0 == 0 ? Chain::Store : Chain::Continue, z);
    }
  }
}

/// Keys of [j0, j0 + nc) that query i0 + r sees (attentionSees, as a range)
/// end before this one: the causal mask and the end of its document.
inline int64_t visibleKeys(const Attn &a, int64_t i0, int64_t r, int64_t j0,
                           int64_t nc) {
  int64_t end = a.causal ? i0 + r + 1 : a.seq;
  if (a.docEnd)
    end = std::min(end, a.docEnd[i0 + r]);
  return std::clamp<int64_t>(end - j0, 0, nc);
}

/// ... and start at this one: the window and the start of its document.
/// Without either, a prefix of the block.
inline int64_t firstKey(const Attn &a, int64_t i0, int64_t r, int64_t j0,
                        int64_t nc) {
  int64_t first = a.window ? i0 + r - a.window + 1 : 0;
  if (a.docStart)
    first = std::max(first, a.docStart[i0 + r]);
  return std::clamp<int64_t>(first - j0, 0, nc);
}

/// s[r][c] = softcap * tanh(s[r][c] / softcap) where seen (a.softcap only).
inline void capScores(const Attn &a, float *s, int64_t lds, int64_t i0,
                      int64_t nr, int64_t j0, int64_t nc) {
  float cap = a.softcap, inv = 1.0f / a.softcap;
  for (int64_t r = 0; r < nr; ++r) {
    float *sr = s + r * lds;
    for (int64_t c = firstKey(a, i0, r, j0, nc),
                 end = visibleKeys(a, i0, r, j0, nc);
         c < end; ++c)
      sr[c] = cap * softcapTanh(sr[c], inv);
  }
}

/// s[r][c] gains head h's ALiBi bias where seen (a.alibi only).
inline void addAlibi(const Attn &a, int64_t h, float *s, int64_t lds,
                     int64_t i0, int64_t nr, int64_t j0, int64_t nc) {
  float slope = a.alibi[h % a.alibiHeads];
  for (int64_t r = 0; r < nr; ++r) {
    float *sr = s + r * lds;
    for (int64_t c = firstKey(a, i0, r, j0, nc),
                 end = visibleKeys(a, i0, r, j0, nc);
         c < end; ++c)
      sr[c] = alibiLogit(sr[c], slope, i0 + r, j0 + c);
  }
}

/// p[r][c] = exp(s[r][c] - lse[r]), 0 where masked.
inline void probabilities(const Attn &a, const float *s, int64_t lds,
                          const float *lse, int64_t i0, int64_t nr, int64_t j0,
                          int64_t nc, float *p) {
  for (int64_t r = 0; r < nr; ++r) {
    float l = lse[r];
    const float *sr = s + r * lds;
    float *pr = p + r * lds;
    int64_t first = firstKey(a, i0, r, j0, nc);
    int64_t visible = std::max(first, visibleKeys(a, i0, r, j0, nc));
    std::fill(pr, pr + first, 0.0f);
#pragma omp simd
    for (int64_t c = first; c < visible; ++c)
      pr[c] = expApprox(sr[c] - l);
    std::fill(pr + visible, pr + nc, 0.0f);
  }
}

/// dS = P * (dP - delta) in place in p: query rows [i0, i0 + nr) (their
/// delta first) by keys [j0, j0 + nc). Where P is masked it stays zero.
inline void scoreGrads(const Attn &a, float *p, int64_t ldp, const float *dp,
                       int64_t lddp, int64_t i0, int64_t nr, int64_t j0,
                       int64_t nc, const float *delta) {
  for (int64_t r = 0; r < nr; ++r) {
    float dl = delta[r];
    float *pr = p + r * ldp;
    const float *dpr = dp + r * lddp;
    int64_t visible = visibleKeys(a, i0, r, j0, nc);
#pragma omp simd
    for (int64_t c = firstKey(a, i0, r, j0, nc); c < visible; ++c)
      pr[c] = pr[c] * (dpr[c] - dl);
  }
}

/// Soft-capping's part of the backward, before `probabilities`: s (q k^T
/// scaled) becomes the capped logits softcap * t, t = tanh(s / softcap),
/// and dp becomes (dP - delta) * (1 - t^2), the capped logits' derivative
/// folded in; scoreGradsCapped then multiplies it by P.
inline void capScoreGrads(const Attn &a, float *s, int64_t lds, float *dp,
                          int64_t lddp, int64_t i0, int64_t nr, int64_t j0,
                          int64_t nc, const float *delta) {
  float cap = a.softcap, inv = 1.0f / a.softcap;
  for (int64_t r = 0; r < nr; ++r) {
    float dl = delta[r];
    float *sr = s + r * lds, *dpr = dp + r * lddp;
    for (int64_t c = firstKey(a, i0, r, j0, nc),
                 end = visibleKeys(a, i0, r, j0, nc);
         c < end; ++c) {
      float t = softcapTanh(sr[c], inv);
      sr[c] = cap * t;
      dpr[c] = (dpr[c] - dl) * softcapSlope(t);
    }
  }
}

/// dS = P * dp in place in p, for dp from capScoreGrads.
inline void scoreGradsCapped(const Attn &a, float *p, int64_t ldp,
                             const float *dp, int64_t lddp, int64_t i0,
                             int64_t nr, int64_t j0, int64_t nc) {
  for (int64_t r = 0; r < nr; ++r) {
    float *pr = p + r * ldp;
    const float *dpr = dp + r * lddp;
    int64_t visible = visibleKeys(a, i0, r, j0, nc);
#pragma omp simd
    for (int64_t c = firstKey(a, i0, r, j0, nc); c < visible; ++c)
      pr[c] = pr[c] * dpr[c];
  }
}

/// Flops of one block item doing `products` bs x seq x dim products (about
/// half the keys when causal), to decide how many threads to start.
inline int64_t itemWork(const Attn &a, int64_t bs, int64_t products) {
  int64_t keys = a.causal ? a.seq / 2 + bs : a.seq;
  if (a.window)
    keys = std::min(keys, a.window + bs);
  return products * 2 * bs * keys * a.dim;
}

/// Last key (exclusive) that queries [i0, i0 + nr) see. Documents are
/// runs of positions, so the block's last query's ends last.
inline int64_t keyEnd(const Attn &a, int64_t i0, int64_t nr) {
  int64_t end = a.causal ? i0 + nr : a.seq;
  return a.docEnd ? std::min(end, a.docEnd[i0 + nr - 1]) : end;
}

/// The first block of bs keys that queries from i0 on see: with a window or
/// documents (the block's first query's starts first), the blocks before it
/// are wholly masked and skipped (they would add exact zeros, so the sums
/// keep their bits): the work of packed rows is their documents' squares.
inline int64_t keyBegin(const Attn &a, int64_t i0, int64_t bs) {
  int64_t first = a.window ? std::max<int64_t>(i0 - a.window + 1, 0) : 0;
  if (a.docStart)
    first = std::max(first, a.docStart[i0]);
  return first / bs * bs;
}

/// First query block (of bs rows) that sees a key of [j0, j0 + nc).
inline int64_t queryBegin(const Attn &a, int64_t j0, int64_t bs) {
  int64_t first = a.causal ? j0 : 0;
  if (a.docStart)
    first = std::max(first, a.docStart[j0]);
  return first / bs * bs;
}

/// Last query (exclusive) that sees a key of [j0, j0 + nc).
inline int64_t queryEnd(const Attn &a, int64_t j0, int64_t nc) {
  int64_t end = a.window ? std::min(a.seq, j0 + nc - 1 + a.window) : a.seq;
  return a.docEnd ? std::min(end, a.docEnd[j0 + nc - 1]) : end;
}

/// The documents of a descriptor's segments ([batch, seq] int32, each
/// row's ids non-decreasing: a document is a run of one id), as Attn reads
/// them; empty without segments. Aborts, naming `kernel`, on ids that
/// decrease.
struct AttnDocuments {
  std::vector<int64_t> start, end;

  AttnDocuments(const char *kernel, const zrt_attention_desc *d) {
    if (!d->segments || d->batch == 0 || d->seq == 0)
      return;
    int64_t n = d->batch * d->seq;
    start.resize(size_t(n));
    end.resize(size_t(n));
    for (int64_t b = 0; b < d->batch; ++b) {
      const int32_t *ids = d->segments + b * d->seq;
      int64_t *s = start.data() + b * d->seq, *e = end.data() + b * d->seq;
      for (int64_t i = 0; i < d->seq; ++i) {
        if (i > 0 && ids[i] < ids[i - 1])
          fatal("%s: segment ids of batch element %lld decrease at position "
                "%lld (%d after %d): a document is a run of one id",
                kernel, (long long)b, (long long)i, ids[i], ids[i - 1]);
        s[i] = i > 0 && ids[i] == ids[i - 1] ? s[i - 1] : i;
      }
      for (int64_t i = d->seq - 1; i >= 0; --i)
        e[i] = i + 1 < d->seq && ids[i] == ids[i + 1] ? e[i + 1] : i + 1;
    }
  }

  /// `a` with these documents (heads of a batch element: `heads`).
  Attn apply(Attn a, int64_t heads) const {
    if (start.empty())
      return a;
    a.docStart = start.data();
    a.docEnd = end.data();
    a.headsPerBatch = heads > 0 ? heads : 1;
    return a;
  }
};

/// The backward of the checked problem `a` on the dtype's data (dq, dk, dv
/// from q, k, v, o and dO), with its scratch (AttentionGrad.cpp).
void runGrads(const Attn &a, int32_t dtype, const void *q, const void *k,
              const void *v, const void *o, const void *dO, void *dq, void *dk,
              void *dv, int64_t batch, int64_t heads, int64_t seq,
              int64_t headDim);

} // namespace zrt::attn

#endif // ZERO_RT_KERNELS_ATTENTION_TILES_H
