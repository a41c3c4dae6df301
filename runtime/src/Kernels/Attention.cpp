//===- Attention.cpp - Fused scaled dot-product attention -----------------===//
//
// Part of the zero-mlir project.
//
// Blocked as flash attention: per (batch * head, block of B rows), blocks of
// q/k/v rows are converted to fp32 in a per-thread stack workspace, scores
// and probabilities live only for one B x B tile, and the forward keeps a
// running max and sum (online softmax). Nothing of size seq x seq is ever
// stored. The tile products are chain products (chainProduct below): our
// own FMA chains, not a BLAS call, so the bits do not depend on the BLAS
// kernel the CPU gets, and the causal mask's zeros are skipped.
//
// The backward recomputes the probabilities from the row log-sum-exp, which
// it derives from q and k along with delta = rowsum(dO * O); those
// 2 * batch * heads * seq floats are the only heap scratch. When a block of
// query rows' scores against every key fits the workspace (seq up to 378
// for f32 at head_dim 64), one pass per key/value head derives the
// scores of each query block once and, from them, lse, dV, dK and dQ.
// Otherwise three passes do: lse and delta first, then dK and dV per key
// block over all query blocks, and dQ per query block over all key blocks,
// recomputing q k^T and dO v^T. Either way every output tile has one owner
// (no atomics, no per-thread copies) and each sum runs over the same blocks
// in the same order, so both give the same bits at every thread count.
//
// Grouped-query attention: query head h (of batch * heads) reads key/value
// head h / group, group = heads / kv_heads. The item that owns a key block
// of a key/value head walks the group's query heads in order inside its
// loop, so the group's sum of dK and dV keeps one owner and a fixed order
// (and needs no scratch). With group 1 this is the multi-head loop.
//
//===----------------------------------------------------------------------===//

#include "Device/Memory.h"
#include "Driver/Trace.h"
#include "Kernels/AttentionShape.h"
#include "Kernels/Kernels.h"
#include "zero_rt/scratch.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#if defined(__AVX__)
#include <immintrin.h>
#endif

using namespace zrt;

namespace {

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
void chainProduct(const float *a, int64_t ai, int64_t aj, int64_t nOut,
                  int64_t nIn, const float *b, int64_t ldb, int64_t cols,
                  float *out, int64_t ldo, Chain mode, const Causal &z = {}) {
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
void accumulateTransposed(const float *p, int64_t ldp, int64_t nOut,
                          int64_t nIn, const float *v, int64_t dim, float *out,
                          const Causal &z = {}) {
  chainProduct(p, 1, ldp, nOut, nIn, v, dim, dim, out, dim, Chain::Add, z);
}

/// out[i] += sum_j p[i * ldp + j] * v[j] for i < nOut, j < nIn. A
/// `diagonal` tile of a causal problem skips p's masked entries (column >
/// row), which are zeros.
void accumulate(const float *p, int64_t ldp, int64_t nOut, int64_t nIn,
                const float *v, int64_t dim, float *out,
                bool diagonal = false) {
  Causal z;
  z.skipTail = diagonal;
  chainProduct(p, ldp, 1, nOut, nIn, v, dim, dim, out, dim, Chain::Add, z);
}

/// tb[t * ldt + c] = b[c * dim + t] for c < rows, t < cols.
void transposeRows(const float *b, int64_t rows, int64_t dim, int64_t cols,
                   float *tb, int64_t ldt) {
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
void dotRows(const float *a, int64_t na, const float *b, int64_t nb,
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
/// end before this one: the causal mask.
inline int64_t visibleKeys(const Attn &a, int64_t i0, int64_t r, int64_t j0,
                           int64_t nc) {
  return a.causal ? std::clamp<int64_t>(i0 + r - j0 + 1, 0, nc) : nc;
}

/// ... and start at this one: the window. Without one, a prefix of the
/// block.
inline int64_t firstKey(const Attn &a, int64_t i0, int64_t r, int64_t j0,
                        int64_t nc) {
  return a.window ? std::clamp<int64_t>(i0 + r - a.window + 1 - j0, 0, nc) : 0;
}

/// s[r][c] = softcap * tanh(s[r][c] / softcap) where seen (a.softcap only).
void capScores(const Attn &a, float *s, int64_t lds, int64_t i0, int64_t nr,
               int64_t j0, int64_t nc) {
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
void addAlibi(const Attn &a, int64_t h, float *s, int64_t lds, int64_t i0,
              int64_t nr, int64_t j0, int64_t nc) {
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
void probabilities(const Attn &a, const float *s, int64_t lds, const float *lse,
                   int64_t i0, int64_t nr, int64_t j0, int64_t nc, float *p) {
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
void scoreGrads(const Attn &a, float *p, int64_t ldp, const float *dp,
                int64_t lddp, int64_t i0, int64_t nr, int64_t j0, int64_t nc,
                const float *delta) {
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
void capScoreGrads(const Attn &a, float *s, int64_t lds, float *dp,
                   int64_t lddp, int64_t i0, int64_t nr, int64_t j0, int64_t nc,
                   const float *delta) {
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
void scoreGradsCapped(const Attn &a, float *p, int64_t ldp, const float *dp,
                      int64_t lddp, int64_t i0, int64_t nr, int64_t j0,
                      int64_t nc) {
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

/// Last key (exclusive) that queries [i0, i0 + nr) see.
inline int64_t keyEnd(const Attn &a, int64_t i0, int64_t nr) {
  return a.causal ? i0 + nr : a.seq;
}

/// The first block of bs keys that queries from i0 on see: with a window,
/// the blocks before it are wholly masked and skipped (they would add exact
/// zeros, so the sums keep their bits).
inline int64_t keyBegin(const Attn &a, int64_t i0, int64_t bs) {
  return a.window ? std::max<int64_t>(i0 - a.window + 1, 0) / bs * bs : 0;
}

/// Last query (exclusive) that sees a key of [j0, j0 + nc).
inline int64_t queryEnd(const Attn &a, int64_t j0, int64_t nc) {
  return a.window ? std::min(a.seq, j0 + nc - 1 + a.window) : a.seq;
}

template <typename T>
void forward(const Attn &a, const T *q, const T *k, const T *v, T *o) {
  int64_t d = a.dim;
  int64_t bs = blockSize([&](int64_t b) { return 4 * b * d + b * b + 2 * b; });
  int64_t blocks = ceilDiv(a.seq, bs);
  parallelForEach(a.heads * blocks, itemWork(a, bs, 2), [&](int64_t item) {
    int64_t h = item / blocks, i0 = (item % blocks) * bs;
    int64_t nr = std::min(bs, a.seq - i0);
    int64_t kvh = h / a.group;
    const T *qh = q + h * a.seq * d, *kh = k + kvh * a.seq * d,
            *vh = v + kvh * a.seq * d;
    alignas(64) float ws[kWorkspaceFloats];
    float *qBuf = ws, *kBuf = qBuf + bs * d, *vBuf = kBuf + bs * d;
    float *oBuf = vBuf + bs * d, *s = oBuf + bs * d, *rowMax = s + bs * bs,
          *rowSum = rowMax + bs;
    T *oRows = o + (h * a.seq + i0) * d;
    float *ob = outF32(oRows, oBuf);
    const float *qb = loadRows(qh + i0 * d, nr, d, qBuf, a.scale);
    std::fill(ob, ob + nr * d, 0.0f);
    std::fill(rowMax, rowMax + nr, -std::numeric_limits<float>::infinity());
    std::fill(rowSum, rowSum + nr, 0.0f);
    for (int64_t j0 = keyBegin(a, i0, bs), end = keyEnd(a, i0, nr); j0 < end;
         j0 += bs) {
      int64_t nc = std::min(bs, end - j0);
      const float *kb = loadRows(kh + j0 * d, nc, d, kBuf);
      const float *vb = loadRows(vh + j0 * d, nc, d, vBuf);
      dotRows(qb, nr, kb, nc, d, s, bs, a.causal && j0 == i0);
      if (a.softcap)
        capScores(a, s, bs, i0, nr, j0, nc);
      if (a.alibi)
        addAlibi(a, h, s, bs, i0, nr, j0, nc);
      for (int64_t r = 0; r < nr; ++r) {
        float *sr = s + r * bs;
        int64_t first = firstKey(a, i0, r, j0, nc);
        int64_t visible = visibleKeys(a, i0, r, j0, nc);
        if (first >= visible) {
          // A row the window hides this block from: it adds nothing.
          std::fill(sr, sr + nc, 0.0f);
          continue;
        }
        float mx = rowMax[r];
#pragma omp simd reduction(max : mx)
        for (int64_t c = first; c < visible; ++c)
          mx = sr[c] > mx ? sr[c] : mx;
        // Rescale what earlier key blocks accumulated to the new max.
        float alpha = expApprox(rowMax[r] - mx);
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int64_t c = 0; c < nc; ++c) {
          float e = c >= first && c < visible ? expApprox(sr[c] - mx) : 0.0f;
          sr[c] = e;
          sum += e;
        }
        rowSum[r] = rowSum[r] * alpha + sum;
        rowMax[r] = mx;
        if (alpha != 1.0f) {
          float *orow = ob + r * d;
#pragma omp simd
          for (int64_t t = 0; t < d; ++t)
            orow[t] *= alpha;
        }
      }
      accumulate(s, bs, nr, nc, vb, d, ob, a.causal && j0 == i0);
    }
    for (int64_t r = 0; r < nr; ++r) {
      float inv = 1.0f / rowSum[r];
      float *orow = ob + r * d;
#pragma omp simd
      for (int64_t t = 0; t < d; ++t)
        orow[t] *= inv;
    }
    storeF32(ob, oRows, nr * d);
  });
}

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
void rowTerms(const Attn &a, const T *q, const T *k, const T *o, const T *dO,
              float *lse, float *delta) {
  int64_t d = a.dim;
  int64_t bs = rowTermsBlock(d);
  int64_t blocks = ceilDiv(a.seq, bs);
  parallelForEach(a.heads * blocks, itemWork(a, bs, 1), [&](int64_t item) {
    int64_t h = item / blocks, i0 = (item % blocks) * bs;
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
void keyGrads(const Attn &a, const T *q, const T *k, const T *v, const T *dO,
              const float *lse, const float *delta, T *dk, T *dv) {
  int64_t d = a.dim;
  int64_t bs = keyGradsBlock(d);
  int64_t blocks = ceilDiv(a.seq, bs);
  // Each item sums over the group's query heads.
  int64_t kvHeads = a.heads / a.group, work = a.group * itemWork(a, bs, 4);
  parallelForEach(kvHeads * blocks, work, [&](int64_t item) {
    int64_t hk = item / blocks, j0 = (item % blocks) * bs;
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
      // Causal: queries before j0 see none of these keys; a window hides
      // them from the queries from queryEnd on.
      for (int64_t i0 = a.causal ? j0 : 0, iEnd = queryEnd(a, j0, nc);
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
void queryGrads(const Attn &a, const T *q, const T *k, const T *v, const T *dO,
                const float *lse, const float *delta, T *dq) {
  int64_t d = a.dim;
  int64_t bs = queryGradsBlock(d);
  int64_t blocks = ceilDiv(a.seq, bs);
  parallelForEach(a.heads * blocks, itemWork(a, bs, 3), [&](int64_t item) {
    int64_t h = item / blocks, i0 = (item % blocks) * bs;
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
void fusedGrads(const Attn &a, const T *q, const T *k, const T *v, const T *o,
                const T *dO, float *lse, float *delta, T *dq, T *dk, T *dv) {
  int64_t n = a.seq, d = a.dim;
  int64_t bs = keyGradsBlock(d);
  int64_t work = a.group * ceilDiv(n, bs) * itemWork(a, bs, 5);
  parallelForEach(a.kvHeads(), work, [&](int64_t hk) {
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

/// The checked problem `a` on the dtype's data.
void runForward(const Attn &a, int32_t dtype, const void *q, const void *k,
                const void *v, void *o) {
  if (a.heads == 0 || a.seq == 0 || a.dim == 0)
    return;
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    forward(a, static_cast<const T *>(q), static_cast<const T *>(k),
            static_cast<const T *>(v), static_cast<T *>(o));
  });
}

void runGrads(const Attn &a, int32_t dtype, const void *q, const void *k,
              const void *v, const void *o, const void *dO, void *dq, void *dk,
              void *dv, int64_t batch, int64_t heads, int64_t seq,
              int64_t headDim) {
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

} // namespace

//===----------------------------------------------------------------------===//
// Attention sinks (gpt-oss)
//===----------------------------------------------------------------------===//
//
// One learned logit per query head joins each row's softmax denominator
// without a value. Plain f32 loops without heap scratch: the scores are
// recomputed rather than kept, which the tiny models that use them afford.

namespace {

struct SinkAttn {
  Attn a;
  int64_t heads; // query heads of one batch element
  const float *q, *k, *v, *sinks;

  const float *query(int64_t bh, int64_t i) const {
    return q + (bh * a.seq + i) * a.dim;
  }
  const float *key(int64_t bh, int64_t j) const {
    return k + ((bh / a.group) * a.seq + j) * a.dim;
  }
  const float *value(int64_t bh, int64_t j) const {
    return v + ((bh / a.group) * a.seq + j) * a.dim;
  }
  float sink(int64_t bh) const { return sinks[bh % heads]; }
  /// The keys query i sees: [first, last].
  int64_t first(int64_t i) const {
    return a.window > 0 ? std::max<int64_t>(0, i - a.window + 1) : 0;
  }
  int64_t last(int64_t i) const { return a.causal ? i : a.seq - 1; }
  float score(int64_t bh, int64_t i, int64_t j) const {
    const float *x = query(bh, i), *y = key(bh, j);
    float s = 0;
    for (int64_t d = 0; d < a.dim; ++d)
      s += x[d] * y[d];
    return s * a.scale;
  }
  /// The log of the row's denominator, the sink's term included.
  float lse(int64_t bh, int64_t i) const {
    float m = sink(bh);
    for (int64_t j = first(i); j <= last(i); ++j)
      m = std::max(m, score(bh, i, j));
    float sum = std::exp(sink(bh) - m);
    for (int64_t j = first(i); j <= last(i); ++j)
      sum += std::exp(score(bh, i, j) - m);
    return m + std::log(sum);
  }
};

SinkAttn makeSinkAttn(const char *name, const zrt_attention_desc *d,
                      const void *q, const void *k, const void *v) {
  if (d->dtype != ZRT_F32)
    fatal("%s: attention sinks need f32 tensors", name);
  if (d->softcap != 0.0 || d->alibi)
    fatal("%s: attention sinks take no softcap or ALiBi", name);
  return {attentionProblem(name, d),     d->heads,
          static_cast<const float *>(q), static_cast<const float *>(k),
          static_cast<const float *>(v), d->sinks};
}

/// dot(d_o, o) of row i of head bh.
float rowDelta(const SinkAttn &s, const float *o, const float *dO, int64_t bh,
               int64_t i) {
  const float *x = o + (bh * s.a.seq + i) * s.a.dim;
  const float *y = dO + (bh * s.a.seq + i) * s.a.dim;
  float d = 0;
  for (int64_t e = 0; e < s.a.dim; ++e)
    d += x[e] * y[e];
  return d;
}

void sinksForward(const char *name, const zrt_attention_desc *d, const void *q,
                  const void *k, const void *v, void *o) {
  SinkAttn s = makeSinkAttn(name, d, q, k, v);
  float *out = static_cast<float *>(o);
  int64_t rows = s.a.heads * s.a.seq;
  parallelFor(rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      int64_t bh = r / s.a.seq, i = r % s.a.seq;
      float l = s.lse(bh, i);
      float *y = out + r * s.a.dim;
      std::fill(y, y + s.a.dim, 0.0f);
      for (int64_t j = s.first(i); j <= s.last(i); ++j) {
        float p = std::exp(s.score(bh, i, j) - l);
        const float *x = s.value(bh, j);
        for (int64_t d = 0; d < s.a.dim; ++d)
          y[d] += p * x[d];
      }
    }
  });
}

void sinksBackward(const char *name, const zrt_attention_desc *d, const void *q,
                   const void *k, const void *v, const void *o, const void *dO,
                   void *dq, void *dk, void *dv) {
  SinkAttn s = makeSinkAttn(name, d, q, k, v);
  const float *outs = static_cast<const float *>(o);
  const float *dOut = static_cast<const float *>(dO);
  float *dQ = static_cast<float *>(dq), *dK = static_cast<float *>(dk),
        *dV = static_cast<float *>(dv);
  int64_t dim = s.a.dim, t = s.a.seq;
  // One key/value head (of one batch element) per task: it alone writes
  // its dK and dV rows and the dQ rows of its query heads.
  parallelFor(s.a.kvHeads(), 1, [&](int64_t begin, int64_t end) {
    for (int64_t kv = begin; kv < end; ++kv) {
      std::fill(dK + kv * t * dim, dK + (kv + 1) * t * dim, 0.0f);
      std::fill(dV + kv * t * dim, dV + (kv + 1) * t * dim, 0.0f);
      for (int64_t bh = kv * s.a.group; bh < (kv + 1) * s.a.group; ++bh) {
        for (int64_t i = 0; i < t; ++i) {
          float l = s.lse(bh, i);
          float delta = rowDelta(s, outs, dOut, bh, i);
          const float *g = dOut + (bh * t + i) * dim;
          const float *x = s.query(bh, i);
          float *gq = dQ + (bh * t + i) * dim;
          std::fill(gq, gq + dim, 0.0f);
          for (int64_t j = s.first(i); j <= s.last(i); ++j) {
            float p = std::exp(s.score(bh, i, j) - l);
            const float *y = s.key(bh, j), *z = s.value(bh, j);
            float dp = 0;
            for (int64_t d = 0; d < dim; ++d)
              dp += g[d] * z[d];
            float ds = p * (dp - delta) * s.a.scale;
            float *gk = dK + (kv * t + j) * dim, *gv = dV + (kv * t + j) * dim;
            for (int64_t d = 0; d < dim; ++d) {
              gv[d] += p * g[d];
              gq[d] += ds * y[d];
              gk[d] += ds * x[d];
            }
          }
        }
      }
    }
  });
}

} // namespace

extern "C" void zrt_attention_forward(const zrt_attention_desc *desc,
                                      const void *q, const void *k,
                                      const void *v, void *o) {
  const char *name = "zrt_attention_forward";
  KernelSpan span(name);
  Attn a = attentionProblem(name, desc);
  if (desc->sinks)
    return sinksForward(name, desc, q, k, v, o);
  runForward(a, desc->dtype, q, k, v, o);
}

extern "C" void zrt_attention_backward(const zrt_attention_desc *desc,
                                       const void *q, const void *k,
                                       const void *v, const void *o,
                                       const void *dO, void *dq, void *dk,
                                       void *dv) {
  const char *name = "zrt_attention_backward";
  KernelSpan span(name);
  Attn a = attentionProblem(name, desc);
  if (desc->sinks)
    return sinksBackward(name, desc, q, k, v, o, dO, dq, dk, dv);
  runGrads(a, desc->dtype, q, k, v, o, dO, dq, dk, dv, desc->batch, desc->heads,
           desc->seq, desc->head_dim);
}

extern "C" void zrt_attention_dsinks(const zrt_attention_desc *desc,
                                     const void *q, const void *k,
                                     const void *o, const void *dO,
                                     void *dsinks) {
  const char *name = "zrt_attention_dsinks";
  KernelSpan span(name);
  attentionProblem(name, desc);
  if (!desc->sinks)
    fatal("%s: the descriptor has no sinks", name);
  // The values are not read: the sink's probability needs only the scores.
  SinkAttn s = makeSinkAttn(name, desc, q, k, nullptr);
  const float *outs = static_cast<const float *>(o);
  const float *dOut = static_cast<const float *>(dO);
  float *out = static_cast<float *>(dsinks);
  int64_t batch = desc->batch, heads = desc->heads, seq = desc->seq;
  // Summed in a fixed order (batch, then rows) per head.
  parallelFor(heads, 1, [&](int64_t begin, int64_t end) {
    for (int64_t h = begin; h < end; ++h) {
      float sum = 0;
      for (int64_t b = 0; b < batch; ++b) {
        int64_t bh = b * heads + h;
        for (int64_t i = 0; i < seq; ++i)
          sum += std::exp(s.sink(bh) - s.lse(bh, i)) *
                 rowDelta(s, outs, dOut, bh, i);
      }
      out[h] = -sum;
    }
  });
}
