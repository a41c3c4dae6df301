//===- MatmulAttentionTest.cpp - CUDA matmul and attention vs the CPU -----===//
//
// Part of the zero-mlir project.
//
// cuda::matmul, cuda::attentionForward and cuda::attentionBackward against
// zrt_matmul, zrt_attention_forward and _backward on the same inputs: every
// dtype, all transpose combinations, batches with shared and batched rhs, odd
// sizes, k = 0 and empty products, causal and full attention with head dims
// that take each kernel path (64, 128, padded 40 and 72, unaligned 37, chunked
// 200 and 260), GPT-2's sequence length, a dS beyond f16's range, pointers off
// alignment (which must not change a bit), determinism, and the scratch the
// compiler plans for both. Grouped-query and multi-query attention on every
// path: against the CPU, and against multi-head attention on the key/value
// heads repeated over their groups (the same bits for o and dQ). The
// descriptor's sliding window (cutting, and at least seq), soft-capping and
// ALiBi against the CPU's on the same paths.
//
// Tolerances. Both backends compute in fp32 from the same stored inputs;
// only the summation order (and the exponential) differ.
//  * matmul: a k-term fp32 dot product in any order is within
//    k * 2^-24 * sum_l |a_l b_l| of the exact value (gamma_k), twice that
//    for tensor cores that truncate instead of rounding; the two results are
//    within the sum of both bounds, 4 k 2^-24 sum_l |a_l b_l| with margin.
//    16-bit results are those fp32 values rounded once more on each side:
//    at most one ulp (2u |c|) apart on top, checked as 3u |c|.
//  * attention: every output sums at most K = max(seq, head_dim) terms of
//    values (probabilities, dS) that themselves carry a few fp32 roundings;
//    the difference grows like sqrt(K) 2^-24 relative to the largest output.
//    1e-5 sqrt(K) max|want| leaves a margin of about 40 over that estimate,
//    while a wrong mask, tile or chunk is off by O(max|want|). dQ and dK
//    come from dS = P (dP - delta), which cancels (exactly for one key, where
//    o = v): they may be pure rounding noise of size about
//    2^-24 scale head_dim max|dO| (max|v| + max|o|) max(|q|, |k|), allowed
//    8 times over. 16-bit adds the final rounding, 3u |want| as for
//    matmul. With grouped-query attention dK and dV sum over the group's
//    query heads too: K = max(group * seq, head_dim), and the cancellation
//    term is allowed group times. The CUDA backend's 16-bit tensor-core kernels
//    multiply P and dS as the sum of two 16-bit values, 16 (bf16) or 22 (f16)
//    significant bits: a relative error of at most 2^-17 per term, well inside
//    the 1e-5 sqrt(K) floor.
//    Soft-capping's tanh (libm's on the CPU, CUDA's tanhf, a few ulp each)
//    and its derivative add a few roundings per score, and its slope is at
//    most 1: the same bounds hold.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"
#include "TestUtil.h"

#include "zero_rt/scratch.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace zrt::cuda;
using zrt::cuda::test::DeviceArray;
using zrt::cuda::test::DeviceBuffer;
using zrt_test::AttentionDesc;
using zrt_test::Buffer;
using zrt_test::dtypeName;
using zrt_test::randomBuffer;
using zrt_test::subnormalRoundoff;
using zrt_test::unitRoundoff;

namespace {

constexpr int32_t kDtypes[] = {ZRT_F32, ZRT_BF16, ZRT_F16};
const double kF32 = std::ldexp(1.0, -24);

Buffer filled(int32_t dtype, int64_t n, double value) {
  return Buffer(dtype, std::vector<double>(size_t(n), value));
}

double maxAbs(const std::vector<double> &v) {
  double m = 0;
  for (double x : v)
    m = std::max(m, std::fabs(x));
  return m;
}

/// Expects |got - want| <= tol(i) everywhere; reports the first few misses.
template <typename Tol>
void expectWithin(const Buffer &got, const Buffer &want, const Tol &tol,
                  const std::string &what) {
  std::vector<double> g = got.values(), w = want.values();
  ASSERT_EQ(g.size(), w.size()) << what;
  int failures = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    double t = tol(i, w[i]);
    if (!(std::fabs(g[i] - w[i]) <= t)) {
      ADD_FAILURE() << what << ": element " << i << " is " << g[i]
                    << ", the CPU has " << w[i] << " (tolerance " << t << ")";
      if (++failures == 5)
        return;
    }
  }
}

//===----------------------------------------------------------------------===//
// Matmul
//===----------------------------------------------------------------------===//

struct MatmulCase {
  int64_t batch, m, n, k;
  int32_t bBatched;
};

std::string describe(int32_t dtype, const MatmulCase &c, int32_t ta,
                     int32_t tb) {
  return std::string("matmul ") + dtypeName(dtype) + " batch " +
         std::to_string(c.batch) + " m " + std::to_string(c.m) + " n " +
         std::to_string(c.n) + " k " + std::to_string(c.k) + " ta " +
         std::to_string(ta) + " tb " + std::to_string(tb) + " b_batched " +
         std::to_string(c.bBatched);
}

/// Runs both backends on random inputs and compares within the bound of the
/// header comment, computed per element from sum_l |a_l b_l|. kSum >= 0
/// sums over the first kSum of the k contraction entries only.
void checkMatmul(int32_t dtype, const MatmulCase &c, int32_t ta, int32_t tb,
                 std::mt19937 &rng, int64_t offset = 0, int64_t kSum = -1) {
  int64_t m = c.m, n = c.n, k = c.k, ks = kSum < 0 ? k : kSum;
  int64_t aN = c.batch * m * k, bN = (c.bBatched ? c.batch : 1) * k * n,
          cN = c.batch * m * n;
  Buffer a = randomBuffer(dtype, rng, aN), b = randomBuffer(dtype, rng, bN);
  Buffer want(dtype, cN);
  zrt_matmul(dtype, a.data(), b.data(), want.data(), c.batch, m, n, k, ta, tb,
             c.bBatched, ks);
  DeviceArray da(a, offset), db(b, offset), dc(filled(dtype, cN, 7.0), offset);
  matmul(dtype, da.get(), db.get(), dc.get(), c.batch, m, n, k, ta, tb,
         c.bBatched, ks);
  Buffer got = dc.download();

  std::vector<double> av = a.values(), bv = b.values();
  std::vector<double> bound(static_cast<size_t>(cN));
  for (int64_t i = 0; i < c.batch; ++i) {
    const double *ai = av.data() + i * m * k;
    const double *bi = bv.data() + (c.bBatched ? i * k * n : 0);
    for (int64_t r = 0; r < m; ++r)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t l = 0; l < ks; ++l)
          s += std::fabs(ta ? ai[l * m + r] : ai[r * k + l]) *
               std::fabs(tb ? bi[j * k + l] : bi[l * n + j]);
        bound[size_t((i * m + r) * n + j)] = s;
      }
  }
  double u = dtype == ZRT_F32 ? 0.0 : unitRoundoff(dtype);
  expectWithin(
      got, want,
      [&](size_t i, double w) {
        return 4.0 * double(k) * kF32 * bound[i] + 3.0 * u * std::fabs(w) +
               2.0 * subnormalRoundoff(dtype);
      },
      describe(dtype, c, ta, tb));
}

TEST(CudaMatmul, MatchesCpu) {
  ZRT_REQUIRE_GPU();
  std::mt19937 rng(1);
  // Odd sizes, batches that fold (shared rhs, lhs not transposed) and that
  // do not, a long reduction, and single elements.
  const MatmulCase cases[] = {
      {1, 37, 29, 53, 0},  {3, 17, 33, 40, 0}, {3, 17, 33, 40, 1},
      {2, 64, 128, 96, 1}, {1, 5, 7, 300, 0},  {4, 1, 1, 1, 1},
      {2, 70, 9, 130, 0},
  };
  for (int32_t dtype : kDtypes)
    for (const MatmulCase &c : cases)
      for (int32_t ta = 0; ta < 2; ++ta)
        for (int32_t tb = 0; tb < 2; ++tb)
          checkMatmul(dtype, c, ta, tb, rng);
}

// k_sum < k (zero-pad-vocab's LM head input gradient): the trailing
// contraction entries, random here, are left out on both backends.
TEST(CudaMatmul, PartialContraction) {
  ZRT_REQUIRE_GPU();
  std::mt19937 rng(3);
  const std::pair<MatmulCase, int64_t> cases[] = {
      {{1, 37, 29, 128, 0}, 100},
      {{3, 17, 33, 64, 0}, 41},
      {{2, 64, 96, 1024, 1}, 1000},
  };
  for (int32_t dtype : kDtypes)
    for (const auto &[c, ks] : cases)
      for (int32_t ta = 0; ta < 2; ++ta)
        for (int32_t tb = 0; tb < 2; ++tb)
          checkMatmul(dtype, c, ta, tb, rng, 0, ks);
}

TEST(CudaMatmul, LargeProducts) {
  ZRT_REQUIRE_GPU();
  std::mt19937 rng(2);
  // Beyond the CPU backend's 512-row panels, where cuBLASLt picks its large
  // tiles (and may split k through the workspace).
  for (int32_t dtype : kDtypes) {
    checkMatmul(dtype, {1, 520, 600, 700, 0}, 0, 0, rng);
    checkMatmul(dtype, {2, 300, 260, 530, 1}, 1, 1, rng);
  }
}

TEST(CudaMatmul, UnalignedPointers) {
  ZRT_REQUIRE_GPU();
  std::mt19937 rng(3);
  for (int32_t dtype : kDtypes)
    for (int32_t ta = 0; ta < 2; ++ta)
      for (int32_t tb = 0; tb < 2; ++tb) {
        checkMatmul(dtype, {2, 33, 17, 45, 1}, ta, tb, rng, 1);
        checkMatmul(dtype, {3, 31, 18, 24, 0}, ta, tb, rng, 1);
      }
}

TEST(CudaMatmul, EmptyAndZeroK) {
  ZRT_REQUIRE_GPU();
  for (int32_t dtype : kDtypes) {
    // k = 0: c is all zeros, as an empty sum.
    Buffer a(dtype, 1), b(dtype, 1);
    DeviceArray da(a), db(b), dc(filled(dtype, 2 * 3 * 4, 7.0));
    matmul(dtype, da.get(), db.get(), dc.get(), 2, 3, 4, 0, 0, 1, 0, 0);
    EXPECT_EQ(dc.download().values(), std::vector<double>(24, 0.0))
        << dtypeName(dtype);
    // An empty c: nothing is written.
    DeviceArray untouched(filled(dtype, 4, 7.0));
    matmul(dtype, da.get(), db.get(), untouched.get(), 0, 3, 4, 5, 0, 0, 1, 5);
    matmul(dtype, da.get(), db.get(), untouched.get(), 2, 0, 4, 5, 1, 0, 0, 5);
    matmul(dtype, da.get(), db.get(), untouched.get(), 2, 3, 0, 5, 0, 1, 0, 5);
    EXPECT_EQ(untouched.download().values(), std::vector<double>(4, 7.0))
        << dtypeName(dtype);
  }
}

TEST(CudaMatmul, ScratchIsThePlannedWorkspace) {
  ZRT_REQUIRE_GPU();
  std::mt19937 rng(4);
  for (int32_t dtype : kDtypes)
    for (int32_t ta = 0; ta < 2; ++ta) {
      int64_t batch = 3, m = 100, n = 50, k = 70;
      Buffer a = randomBuffer(dtype, rng, batch * m * k),
             b = randomBuffer(dtype, rng, k * n);
      DeviceArray da(a), db(b), dc(Buffer(dtype, batch * m * n));
      ZRT_CUDA_CHECK(cudaStreamSynchronize(computeStream()));
      ASSERT_EQ(zrt_scratch_bytes_in_use(), 0);
      zrt_memory_reset_peak();
      matmul(dtype, da.get(), db.get(), dc.get(), batch, m, n, k, ta, 0, 0, k);
      ZRT_CUDA_CHECK(cudaStreamSynchronize(computeStream()));
      int64_t planned = zrt_scratch_matmul(dtype, batch, m, n, k, ta, 0);
      EXPECT_EQ(planned == 0, dtype == ZRT_F32);
      EXPECT_EQ(zrt_scratch_peak_bytes(), planned)
          << dtypeName(dtype) << " ta " << ta;
      EXPECT_EQ(zrt_scratch_bytes_in_use(), 0);
    }
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

struct AttnCase {
  int64_t batch, heads, seq, dim;
  double scale;
  /// Key/value heads; 0: heads (multi-head attention).
  int64_t kvHeads = 0;

  int64_t kv() const { return kvHeads ? kvHeads : heads; }
  int64_t group() const { return heads / kv(); }
  int64_t numel() const { return batch * heads * seq * dim; }
  int64_t kvNumel() const { return batch * kv() * seq * dim; }
};

struct AttnData {
  Buffer q, k, v, dO;
};

/// The descriptor's sliding window, soft-capping and ALiBi slopes (one per
/// head); none by default (the plain path).
struct AttnMask {
  int64_t window = 0;
  double softcap = 0;
  const float *alibi = nullptr;
  /// Packed rows' document ids [batch, seq] (host memory; the CUDA side
  /// gets a device copy).
  const std::vector<int32_t> *segments = nullptr;

  bool any() const { return window || softcap || alibi || segments; }
};

AttnData randomAttn(int32_t dtype, const AttnCase &c, std::mt19937 &rng) {
  int64_t n = c.numel(), nkv = c.kvNumel();
  // Scores of a few units: peaked but not one-hot softmax rows.
  return {randomBuffer(dtype, rng, n, -2, 2),
          randomBuffer(dtype, rng, nkv, -2, 2), randomBuffer(dtype, rng, nkv),
          randomBuffer(dtype, rng, n)};
}

std::string describe(int32_t dtype, const AttnCase &c, int32_t causal,
                     AttnMask mask = {}) {
  std::string s = std::string("attention ") + dtypeName(dtype) + " batch " +
                  std::to_string(c.batch) + " heads " +
                  std::to_string(c.heads) + " kv_heads " +
                  std::to_string(c.kv()) + " seq " + std::to_string(c.seq) +
                  " head_dim " + std::to_string(c.dim) + " causal " +
                  std::to_string(causal);
  if (mask.any())
    s += " window " + std::to_string(mask.window) + " softcap " +
         std::to_string(mask.softcap) + (mask.alibi ? " alibi" : "") +
         (mask.segments ? " documents" : "");
  return s;
}

/// The tolerance of the header comment for sums of `terms` terms; `noise`
/// is the cancellation term of dQ and dK.
void expectAttnClose(const Buffer &got, const Buffer &want, const AttnCase &c,
                     const std::string &what, double noise = 0,
                     int64_t terms = 0) {
  double floor = 1e-5 *
                     std::sqrt(double(std::max(terms ? terms : c.seq, c.dim))) *
                     maxAbs(want.values()) +
                 noise;
  double u = want.dtype == ZRT_F32 ? 0.0 : unitRoundoff(want.dtype);
  expectWithin(
      got, want,
      [&](size_t, double w) {
        return floor + 3.0 * u * std::fabs(w) +
               2.0 * subnormalRoundoff(want.dtype);
      },
      what);
}

/// Forward and backward of both backends on the same inputs; the backward
/// gets the CPU's o on both sides so that its comparison stands alone.
void checkAttention(int32_t dtype, const AttnCase &c, int32_t causal,
                    const AttnData &in, int64_t offset = 0,
                    AttnMask mask = {}) {
  int64_t n = c.numel(), nkv = c.kvNumel();
  std::string what = describe(dtype, c, causal, mask);
  Buffer o(dtype, n), dq(dtype, n), dk(dtype, nkv), dv(dtype, nkv);
  // The descriptor of the mask, its documents at `segments`.
  auto descOf = [&](const int32_t *segments) {
    AttentionDesc d(dtype, c.batch, c.heads, c.kv(), c.seq, c.dim, causal,
                    c.scale, mask.window, mask.softcap, mask.alibi);
    d.desc.segments = segments;
    return d;
  };
  std::unique_ptr<DeviceBuffer> deviceSegments;
  if (mask.segments)
    deviceSegments = std::make_unique<DeviceBuffer>(*mask.segments);
  const int32_t *hostIds = mask.segments ? mask.segments->data() : nullptr;
  const int32_t *deviceIds =
      deviceSegments ? deviceSegments->get<const int32_t>() : nullptr;
  if (mask.any()) {
    zrt_attention_forward(descOf(hostIds), in.q.data(), in.k.data(),
                          in.v.data(), o.data());
    zrt_attention_backward(descOf(hostIds), in.q.data(), in.k.data(),
                           in.v.data(), o.data(), in.dO.data(), dq.data(),
                           dk.data(), dv.data());
  } else {
    zrt_attention_forward(AttentionDesc(dtype, c.batch, c.heads, c.kv(), c.seq,
                                        c.dim, causal, c.scale),
                          in.q.data(), in.k.data(), in.v.data(), o.data());
    zrt_attention_backward(AttentionDesc(dtype, c.batch, c.heads, c.kv(), c.seq,
                                         c.dim, causal, c.scale),
                           in.q.data(), in.k.data(), in.v.data(), o.data(),
                           in.dO.data(), dq.data(), dk.data(), dv.data());
  }

  DeviceArray gq(in.q, offset), gk(in.k, offset), gv(in.v, offset),
      gdO(in.dO, offset), go(o, offset);
  Buffer junk = filled(dtype, n, 7.0), kvJunk = filled(dtype, nkv, 7.0);
  DeviceArray gout(junk, offset), gdq(junk, offset), gdk(kvJunk, offset),
      gdv(kvJunk, offset);
  if (mask.any()) {
    attentionForward(descOf(deviceIds), gq.get(), gk.get(), gv.get(),
                     gout.get());
    attentionBackward(descOf(deviceIds), gq.get(), gk.get(), gv.get(), go.get(),
                      gdO.get(), gdq.get(), gdk.get(), gdv.get());
  } else {
    attentionForward(AttentionDesc(dtype, c.batch, c.heads, c.kv(), c.seq,
                                   c.dim, causal, c.scale),
                     gq.get(), gk.get(), gv.get(), gout.get());
    attentionBackward(AttentionDesc(dtype, c.batch, c.heads, c.kv(), c.seq,
                                    c.dim, causal, c.scale),
                      gq.get(), gk.get(), gv.get(), go.get(), gdO.get(),
                      gdq.get(), gdk.get(), gdv.get());
  }
  expectAttnClose(gout.download(), o, c, what + " o");
  double scale = c.scale > 0 ? c.scale : 1.0 / std::sqrt(double(c.dim));
  double noise = 8.0 * kF32 * scale * double(c.dim) * maxAbs(in.dO.values()) *
                 (maxAbs(in.v.values()) + maxAbs(o.values())) *
                 std::max(maxAbs(in.q.values()), maxAbs(in.k.values()));
  int64_t groupTerms = c.group() * c.seq;
  expectAttnClose(gdq.download(), dq, c, what + " dq", noise);
  expectAttnClose(gdk.download(), dk, c, what + " dk", c.group() * noise,
                  groupTerms);
  expectAttnClose(gdv.download(), dv, c, what + " dv", 0, groupTerms);
}

void checkAttention(int32_t dtype, const AttnCase &c, int32_t causal,
                    std::mt19937 &rng, int64_t offset = 0, AttnMask mask = {}) {
  checkAttention(dtype, c, causal, randomAttn(dtype, c, rng), offset, mask);
}

TEST(CudaAttention, MatchesCpu) {
  ZRT_REQUIRE_GPU();
  std::mt19937 rng(5);
  // Head dims: 64 and 128 (one chunk), 40 and 72 (zero-padded chunk), 37
  // (scalar loads), 200 and 260 (two and three 128-column chunks, one
  // output chunk per block). Sequences: partial tiles, a single row, a
  // multiple of the tile. Explicit scales besides 1/sqrt(head_dim).
  const AttnCase cases[] = {
      {2, 3, 100, 64, 0},  {1, 2, 130, 128, 0}, {1, 2, 77, 40, 0},
      {1, 2, 64, 72, 0.3}, {2, 1, 33, 37, 0},   {1, 1, 70, 200, 0.1},
      {1, 1, 50, 260, 0},  {1, 3, 1, 64, 0},    {1, 1, 192, 16, 1.0},
  };
  for (int32_t dtype : kDtypes)
    for (const AttnCase &c : cases)
      for (int32_t causal = 0; causal < 2; ++causal)
        checkAttention(dtype, c, causal, rng);
}

/// Sets the tensor-core kernels' precision for a scope (process-wide).
struct SplitProbsScope {
  explicit SplitProbsScope(bool split) { setAttentionSplitProbs(split); }
  ~SplitProbsScope() { setAttentionSplitProbs(true); }
};

/// With 16-bit probabilities (train's --attention-precision 16bit) each
/// term of o = sum_j P_ij v_j moves by at most u |P_ij v_j| and each of
/// dV_j = sum_i P_ij dO_i by u |P_ij dO_i|: their bounds are the CPU's
/// attention of |v| and its dV for |dO|, element by element, held at 2u
/// for the bounds' own rounding. dQ and dK sum terms of dS that cancel,
/// and their rounding errors add as the terms do (a random walk): they are
/// held to 8u max|want|, about eight times the expected error, which a
/// wrong mask or tile (off by O(max|want|)) exceeds.
void checkSixteenBit(int32_t dtype, const AttnCase &c, int32_t causal,
                     const AttnData &in) {
  int64_t n = c.numel(), nkv = c.kvNumel();
  std::string what = describe(dtype, c, causal) + " 16-bit probabilities";
  AttentionDesc desc(dtype, c.batch, c.heads, c.kv(), c.seq, c.dim, causal,
                     c.scale);
  auto absOf = [&](const Buffer &b) {
    std::vector<double> v = b.values();
    for (double &x : v)
      x = std::fabs(x);
    return Buffer(dtype, v);
  };
  Buffer absV = absOf(in.v), absDO = absOf(in.dO);
  Buffer o(dtype, n), dq(dtype, n), dk(dtype, nkv), dv(dtype, nkv);
  Buffer oBound(dtype, n), dqUnused(dtype, n), dkUnused(dtype, nkv),
      dvBound(dtype, nkv);
  zrt_attention_forward(desc, in.q.data(), in.k.data(), in.v.data(), o.data());
  zrt_attention_backward(desc, in.q.data(), in.k.data(), in.v.data(), o.data(),
                         in.dO.data(), dq.data(), dk.data(), dv.data());
  zrt_attention_forward(desc, in.q.data(), in.k.data(), absV.data(),
                        oBound.data());
  zrt_attention_backward(desc, in.q.data(), in.k.data(), in.v.data(), o.data(),
                         absDO.data(), dqUnused.data(), dkUnused.data(),
                         dvBound.data());

  DeviceArray gq(in.q), gk(in.k), gv(in.v), gdO(in.dO), go(o);
  Buffer junk = filled(dtype, n, 7.0), kvJunk = filled(dtype, nkv, 7.0);
  DeviceArray gout(junk), gdq(junk), gdk(kvJunk), gdv(kvJunk);
  {
    SplitProbsScope sixteenBit(false);
    attentionForward(desc, gq.get(), gk.get(), gv.get(), gout.get());
    attentionBackward(desc, gq.get(), gk.get(), gv.get(), go.get(), gdO.get(),
                      gdq.get(), gdk.get(), gdv.get());
  }
  double u = unitRoundoff(dtype);
  auto floorOf = [&](const Buffer &want) {
    return 1e-5 * std::sqrt(double(std::max(c.group() * c.seq, c.dim))) *
               maxAbs(want.values()) +
           2.0 * subnormalRoundoff(dtype);
  };
  auto byBound = [&](const Buffer &got, const Buffer &want, const Buffer &bound,
                     const std::string &name) {
    std::vector<double> b = bound.values();
    double f = floorOf(want);
    expectWithin(
        got, want,
        [&](size_t i, double w) {
          return 2.0 * u * b[i] + 3.0 * u * std::fabs(w) + f;
        },
        what + " " + name);
  };
  auto byMax = [&](const Buffer &got, const Buffer &want,
                   const std::string &name) {
    double t = 8.0 * u * maxAbs(want.values()) + floorOf(want);
    expectWithin(
        got, want, [&](size_t, double w) { return t + 3.0 * u * std::fabs(w); },
        what + " " + name);
  };
  byBound(gout.download(), o, oBound, "o");
  byBound(gdv.download(), dv, dvBound, "dv");
  byMax(gdq.download(), dq, "dq");
  byMax(gdk.download(), dk, "dk");
}

TEST(CudaAttention, SixteenBitProbabilitiesMatchCpu) {
  ZRT_REQUIRE_GPU();
  std::mt19937 rng(21);
  // Both tensor-core chunks, GPT-2's heads over many steps, and a
  // grouped-query case (whose dK and dV sum over the group).
  const AttnCase cases[] = {{2, 3, 100, 64, 0},
                            {1, 2, 130, 128, 0},
                            {1, 2, 1024, 64, 0},
                            {1, 4, 96, 64, 0, 2}};
  for (int32_t dtype : {ZRT_BF16, ZRT_F16})
    for (const AttnCase &c : cases)
      for (int32_t causal = 0; causal < 2; ++causal)
        checkSixteenBit(dtype, c, causal, randomAttn(dtype, c, rng));
}

TEST(CudaAttention, LongSequences) {
  ZRT_REQUIRE_GPU();
  std::mt19937 rng(9);
  // GPT-2's heads (seq 1024, head_dim 64): many key and query steps; and
  // 128-column heads over several steps of each kernel.
  const AttnCase cases[] = {{1, 2, 1024, 64, 0}, {1, 1, 300, 128, 0}};
  for (int32_t dtype : kDtypes)
    for (const AttnCase &c : cases)
      for (int32_t causal = 0; causal < 2; ++causal)
        checkAttention(dtype, c, causal, rng);
}

TEST(CudaAttention, GroupedQueryMatchesCpu) {
  ZRT_REQUIRE_GPU();
  std::mt19937 rng(11);
  // Grouped-query (2, 3 and 4 query heads per key/value head) and
  // multi-query attention on each path: tensor cores at head_dim 64 and
  // 128 for 16-bit inputs (CUDA cores for f32), a zero-padded chunk (40),
  // scalar loads (37), chunked heads (200), a single row, and sequences of
  // several key and query tiles, with batches whose key/value heads must
  // not be mixed up.
  const AttnCase cases[] = {
      {2, 4, 100, 64, 0, 2},   {1, 8, 130, 128, 0, 2}, {2, 6, 77, 40, 0.3, 3},
      {1, 4, 70, 200, 0.1, 1}, {2, 3, 33, 37, 0, 1},   {1, 4, 1, 64, 0, 2},
      {1, 4, 300, 128, 0, 1},  {2, 8, 256, 64, 0, 2},  {1, 4, 192, 16, 1.0, 1},
  };
  for (int32_t dtype : kDtypes)
    for (const AttnCase &c : cases)
      for (int32_t causal = 0; causal < 2; ++causal)
        checkAttention(dtype, c, causal, rng);
}

TEST(CudaAttention, GroupedQueryIsRepeatedHeads) {
  ZRT_REQUIRE_GPU();
  std::mt19937 rng(12);
  // Against multi-head attention on the device with each key/value head
  // repeated over its group (Hugging Face's repeat_kv): o and dQ read the
  // same values in the same order, so they have the same bits; dK and dV
  // are the repeated heads' gradients summed over the group (rounded once
  // instead of per head). Both tensor-core chunks and the CUDA-core path.
  const AttnCase cases[] = {{2, 4, 100, 64, 0, 2},
                            {1, 6, 90, 128, 0, 2},
                            {1, 4, 70, 72, 0, 1},
                            {1, 2, 40, 200, 0, 1}};
  for (int32_t dtype : kDtypes)
    for (const AttnCase &c : cases)
      for (int32_t causal = 0; causal < 2; ++causal) {
        std::string what = describe(dtype, c, causal);
        int64_t n = c.numel(), nkv = c.kvNumel(), head = c.seq * c.dim;
        AttnData in = randomAttn(dtype, c, rng);
        Buffer kr(dtype, n), vr(dtype, n);
        for (int64_t h = 0; h < c.batch * c.heads; ++h)
          for (int64_t e = 0; e < head; ++e) {
            kr.set(h * head + e, in.k.get(h / c.group() * head + e));
            vr.set(h * head + e, in.v.get(h / c.group() * head + e));
          }
        DeviceArray q(in.q), k(in.k), v(in.v), dO(in.dO), krd(kr), vrd(vr);
        DeviceArray o(Buffer(dtype, n)), orep(Buffer(dtype, n)),
            dq(Buffer(dtype, n)), dqrep(Buffer(dtype, n)),
            dk(Buffer(dtype, nkv)), dv(Buffer(dtype, nkv)),
            dkrep(Buffer(dtype, n)), dvrep(Buffer(dtype, n));
        attentionForward(AttentionDesc(dtype, c.batch, c.heads, c.kv(), c.seq,
                                       c.dim, causal, c.scale),
                         q.get(), k.get(), v.get(), o.get());
        attentionForward(AttentionDesc(dtype, c.batch, c.heads, c.heads, c.seq,
                                       c.dim, causal, c.scale),
                         q.get(), krd.get(), vrd.get(), orep.get());
        attentionBackward(AttentionDesc(dtype, c.batch, c.heads, c.kv(), c.seq,
                                        c.dim, causal, c.scale),
                          q.get(), k.get(), v.get(), o.get(), dO.get(),
                          dq.get(), dk.get(), dv.get());
        attentionBackward(AttentionDesc(dtype, c.batch, c.heads, c.heads, c.seq,
                                        c.dim, causal, c.scale),
                          q.get(), krd.get(), vrd.get(), o.get(), dO.get(),
                          dqrep.get(), dkrep.get(), dvrep.get());
        EXPECT_EQ(o.download().values(), orep.download().values())
            << what << " o";
        EXPECT_EQ(dq.download().values(), dqrep.download().values())
            << what << " dq";
        std::vector<double> dkr = dkrep.download().values(),
                            dvr = dvrep.download().values();
        std::vector<double> sumK(size_t(nkv), 0.0), sumV(size_t(nkv), 0.0);
        for (int64_t h = 0; h < c.batch * c.heads; ++h)
          for (int64_t e = 0; e < head; ++e) {
            sumK[size_t(h / c.group() * head + e)] += dkr[size_t(h * head + e)];
            sumV[size_t(h / c.group() * head + e)] += dvr[size_t(h * head + e)];
          }
        // Each repeated head's gradient is rounded to the dtype (u of it),
        // the grouped one once (u of the sum), and the fp32 sums run in
        // other orders: 1e-5 of the terms as the CPU comparison allows.
        double u = dtype == ZRT_F32 ? kF32 : unitRoundoff(dtype);
        double tolK = double(c.group()) * (u + 1e-5) * maxAbs(dkr),
               tolV = double(c.group()) * (u + 1e-5) * maxAbs(dvr);
        Buffer wantK(ZRT_F32, sumK), wantV(ZRT_F32, sumV);
        expectWithin(
            dk.download(), wantK,
            [&](size_t, double w) { return tolK + u * std::fabs(w); },
            what + " dk");
        expectWithin(
            dv.download(), wantV,
            [&](size_t, double w) { return tolV + u * std::fabs(w); },
            what + " dv");
      }
}

TEST(CudaAttention, WindowAndSoftcapMatchCpu) {
  ZRT_REQUIRE_GPU();
  std::mt19937 rng(13);
  // Windows of one key, of a few (every query tile then skips key steps
  // and every key tile query steps), of most of the sequence, of exactly
  // seq and beyond it (the causal mask); soft-capping that bends the
  // scores (2) or barely does (50), with each window and without one,
  // causal or not. Head dims that take the tensor cores without a mask
  // (64, 128), a padded chunk (40), scalar loads (37), chunked heads (200),
  // grouped-query attention and a sequence of many tiles.
  const AttnCase cases[] = {
      {2, 3, 100, 64, 0}, {1, 2, 130, 128, 0},   {1, 2, 77, 40, 0.3},
      {2, 1, 33, 37, 0},  {1, 1, 70, 200, 0.1},  {2, 4, 100, 64, 0, 2},
      {1, 1, 1, 64, 0},   {1, 2, 300, 64, 0, 1},
  };
  const int64_t windows[] = {1, 7, 40, 0};
  const double softcaps[] = {0, 2.0, 50.0};
  for (int32_t dtype : kDtypes)
    for (const AttnCase &c : cases) {
      for (int64_t window : windows)
        for (double softcap : softcaps)
          if (window || softcap)
            checkAttention(dtype, c, 1, rng, 0, {window, softcap});
      checkAttention(dtype, c, 1, rng, 0, {c.seq, 0});
      checkAttention(dtype, c, 1, rng, 0, {c.seq + 5, 2.0});
      checkAttention(dtype, c, 0, rng, 0, {0, 2.0});
    }
}

/// Document ids of `batch` rows of `seq` tokens: runs of 1 to `longest`
/// tokens, each row cut elsewhere.
std::vector<int32_t> randomDocuments(int64_t batch, int64_t seq,
                                     int64_t longest, std::mt19937 &rng) {
  std::uniform_int_distribution<int64_t> length(1, longest);
  std::vector<int32_t> ids;
  for (int64_t b = 0; b < batch; ++b) {
    int32_t id = 0;
    for (int64_t t = 0, left = length(rng); t < seq; ++t, --left) {
      if (left == 0) {
        ++id;
        left = length(rng);
      }
      ids.push_back(id);
    }
  }
  return ids;
}

// Packed rows' documents: the CPU's results, with documents shorter and
// longer than a tile (the CUDA-core kernels skip the key and query steps
// of other documents), alone and with a window, a soft-cap and
// grouped-query heads, causal or not.
TEST(CudaAttention, DocumentsMatchCpu) {
  ZRT_REQUIRE_GPU();
  std::mt19937 rng(17);
  const AttnCase cases[] = {{2, 3, 100, 64, 0},
                            {1, 2, 300, 128, 0, 1},
                            {2, 4, 77, 40, 0.3, 2},
                            {3, 1, 33, 37, 0}};
  for (int32_t dtype : kDtypes)
    for (const AttnCase &c : cases)
      for (int64_t longest : {int64_t(5), int64_t(90), c.seq}) {
        std::vector<int32_t> ids =
            randomDocuments(c.batch, c.seq, longest, rng);
        checkAttention(dtype, c, 1, rng, 0, {0, 0, nullptr, &ids});
        checkAttention(dtype, c, 0, rng, 0, {0, 0, nullptr, &ids});
        checkAttention(dtype, c, 1, rng, 0, {7, 2.0, nullptr, &ids});
      }
}

TEST(CudaAttention, AlibiMatchesCpu) {
  ZRT_REQUIRE_GPU();
  std::mt19937 rng(15);
  // BLOOM-like slopes (of six heads: 1/4, 1/16, ..., then 1/2, 1/8), causal
  // and not, with a window and a softcap; the shapes of WindowAndSoftcap's
  // paths: tensor-core head dims (64, 128) that ALiBi sends to the CUDA
  // cores, scalar loads (37), chunked heads (200), grouped-query attention.
  const float slopes[] = {0.25f, 0.0625f, 0.015625f, 0.00390625f, 0.5f, 0.125f};
  const AttnCase cases[] = {
      {2, 3, 100, 64, 0},   {1, 2, 130, 128, 0},   {2, 1, 33, 37, 0},
      {1, 1, 70, 200, 0.1}, {2, 6, 100, 64, 0, 2}, {1, 2, 300, 64, 0, 1},
  };
  for (int32_t dtype : kDtypes)
    for (const AttnCase &c : cases) {
      checkAttention(dtype, c, 1, rng, 0, {0, 0, slopes});
      checkAttention(dtype, c, 0, rng, 0, {0, 0, slopes});
      checkAttention(dtype, c, 1, rng, 0, {7, 2.0, slopes});
    }
}

TEST(CudaAttention, WindowAndSoftcapUnalignedAndDeterministic) {
  ZRT_REQUIRE_GPU();
  std::mt19937 rng(14);
  // The scalar load path, and the same bits from a second run and from
  // aligned pointers.
  const AttnCase c{1, 4, 90, 64, 0, 2};
  const AttnMask mask{20, 3.0};
  for (int32_t dtype : kDtypes) {
    int64_t n = c.numel(), nkv = c.kvNumel();
    AttnData in = randomAttn(dtype, c, rng);
    checkAttention(dtype, c, 1, in, 1, mask);
    std::vector<double> out[3][4];
    for (int run = 0; run < 3; ++run) {
      int64_t offset = run == 2;
      DeviceArray q(in.q, offset), k(in.k, offset), v(in.v, offset),
          dO(in.dO, offset), o(Buffer(dtype, n), offset),
          dq(Buffer(dtype, n), offset), dk(Buffer(dtype, nkv), offset),
          dv(Buffer(dtype, nkv), offset);
      attentionForward(AttentionDesc(dtype, c.batch, c.heads, c.kv(), c.seq,
                                     c.dim, 1, c.scale, mask.window,
                                     mask.softcap, mask.alibi),
                       q.get(), k.get(), v.get(), o.get());
      attentionBackward(AttentionDesc(dtype, c.batch, c.heads, c.kv(), c.seq,
                                      c.dim, 1, c.scale, mask.window,
                                      mask.softcap, mask.alibi),
                        q.get(), k.get(), v.get(), o.get(), dO.get(), dq.get(),
                        dk.get(), dv.get());
      out[run][0] = o.download().values();
      out[run][1] = dq.download().values();
      out[run][2] = dk.download().values();
      out[run][3] = dv.download().values();
    }
    for (int run = 1; run < 3; ++run)
      for (int t = 0; t < 4; ++t)
        EXPECT_EQ(out[run][t], out[0][t])
            << describe(dtype, c, 1, mask) << " run " << run << " output " << t;
  }
}

TEST(CudaAttention, LargeGradients) {
  ZRT_REQUIRE_GPU();
  // dS = P (dP - delta) reaches 2^17 here, beyond f16's range, while every
  // output fits it: q = 0 makes P = 1/2 for both keys of the second query,
  // v = +-1 and dO = 4096 make dP = +-2^18 with delta = 0. dQ = -4096 in
  // its first column, dK = 0.
  AttnCase c{1, 1, 2, 64, 0};
  std::vector<double> q(128, 0.0), k(128, 0.0), v(128), dO(128, 4096.0);
  k[64] = 0.25;
  for (int d = 0; d < 64; ++d) {
    v[d] = 1.0;
    v[64 + d] = -1.0;
  }
  for (int32_t dtype : kDtypes)
    for (int32_t causal = 0; causal < 2; ++causal)
      checkAttention(dtype, c, causal,
                     {Buffer(dtype, q), Buffer(dtype, k), Buffer(dtype, v),
                      Buffer(dtype, dO)});
}

TEST(CudaAttention, UnalignedPointers) {
  ZRT_REQUIRE_GPU();
  std::mt19937 rng(6);
  // head_dim 64 with every tensor one element off: the scalar load path,
  // also with grouped-query attention.
  const AttnCase cases[] = {{1, 2, 90, 64, 0}, {1, 4, 90, 64, 0, 2}};
  for (int32_t dtype : kDtypes)
    for (const AttnCase &c : cases)
      for (int32_t causal = 0; causal < 2; ++causal)
        checkAttention(dtype, c, causal, rng, 1);
}

TEST(CudaAttention, AlignmentKeepsBits) {
  ZRT_REQUIRE_GPU();
  std::mt19937 rng(10);
  // Vector loads (aligned) and element loads (one element off) fill the
  // same tiles: every output has the same bits either way.
  const AttnCase cases[] = {
      {1, 2, 100, 64, 0}, {1, 1, 70, 128, 0}, {1, 4, 70, 128, 0, 2}};
  for (int32_t dtype : kDtypes)
    for (const AttnCase &c : cases)
      for (int32_t causal = 0; causal < 2; ++causal) {
        int64_t n = c.numel(), nkv = c.kvNumel();
        AttnData in = randomAttn(dtype, c, rng);
        std::vector<double> out[2][4];
        for (int64_t offset = 0; offset < 2; ++offset) {
          DeviceArray q(in.q, offset), k(in.k, offset), v(in.v, offset),
              dO(in.dO, offset), o(Buffer(dtype, n), offset),
              dq(Buffer(dtype, n), offset), dk(Buffer(dtype, nkv), offset),
              dv(Buffer(dtype, nkv), offset);
          attentionForward(AttentionDesc(dtype, c.batch, c.heads, c.kv(), c.seq,
                                         c.dim, causal, c.scale),
                           q.get(), k.get(), v.get(), o.get());
          attentionBackward(AttentionDesc(dtype, c.batch, c.heads, c.kv(),
                                          c.seq, c.dim, causal, c.scale),
                            q.get(), k.get(), v.get(), o.get(), dO.get(),
                            dq.get(), dk.get(), dv.get());
          out[offset][0] = o.download().values();
          out[offset][1] = dq.download().values();
          out[offset][2] = dk.download().values();
          out[offset][3] = dv.download().values();
        }
        for (int t = 0; t < 4; ++t)
          EXPECT_EQ(out[0][t], out[1][t])
              << describe(dtype, c, causal) << " output " << t;
      }
}

TEST(CudaAttention, Deterministic) {
  ZRT_REQUIRE_GPU();
  std::mt19937 rng(7);
  // Multi-head, grouped-query (each dK/dV a sum over 4 query heads) and
  // multi-query attention at 64 and 128 columns.
  const AttnCase cases[] = {
      {2, 2, 150, 64, 0}, {2, 8, 150, 64, 0, 2}, {1, 4, 150, 128, 0, 1}};
  for (const AttnCase &c : cases)
    for (int32_t dtype : kDtypes) {
      int64_t n = c.numel(), nkv = c.kvNumel();
      AttnData in = randomAttn(dtype, c, rng);
      DeviceArray q(in.q), k(in.k), v(in.v), dO(in.dO);
      DeviceArray o(Buffer(dtype, n));
      attentionForward(AttentionDesc(dtype, c.batch, c.heads, c.kv(), c.seq,
                                     c.dim, 1, c.scale),
                       q.get(), k.get(), v.get(), o.get());
      std::vector<double> first[3];
      for (int run = 0; run < 2; ++run) {
        DeviceArray dq(Buffer(dtype, n)), dk(Buffer(dtype, nkv)),
            dv(Buffer(dtype, nkv));
        attentionBackward(AttentionDesc(dtype, c.batch, c.heads, c.kv(), c.seq,
                                        c.dim, 1, c.scale),
                          q.get(), k.get(), v.get(), o.get(), dO.get(),
                          dq.get(), dk.get(), dv.get());
        std::vector<double> now[3] = {dq.download().values(),
                                      dk.download().values(),
                                      dv.download().values()};
        for (int t = 0; t < 3; ++t) {
          if (run == 0)
            first[t] = now[t];
          else
            EXPECT_EQ(now[t], first[t])
                << describe(dtype, c, 1) << " output " << t;
        }
      }
    }
}

TEST(CudaAttention, ScratchIsThePlannedRowTerms) {
  ZRT_REQUIRE_GPU();
  std::mt19937 rng(8);
  // Per query row, with or without shared key/value heads.
  const AttnCase cases[] = {{2, 3, 45, 32, 0}, {2, 6, 45, 64, 0, 2}};
  for (const AttnCase &c : cases)
    for (int32_t dtype : kDtypes) {
      int64_t n = c.numel(), nkv = c.kvNumel();
      AttnData in = randomAttn(dtype, c, rng);
      DeviceArray q(in.q), k(in.k), v(in.v), dO(in.dO), o(Buffer(dtype, n)),
          dq(Buffer(dtype, n)), dk(Buffer(dtype, nkv)), dv(Buffer(dtype, nkv));
      ZRT_CUDA_CHECK(cudaStreamSynchronize(computeStream()));
      ASSERT_EQ(zrt_scratch_bytes_in_use(), 0);
      zrt_memory_reset_peak();
      attentionForward(AttentionDesc(dtype, c.batch, c.heads, c.kv(), c.seq,
                                     c.dim, 0, c.scale),
                       q.get(), k.get(), v.get(), o.get());
      EXPECT_EQ(zrt_scratch_peak_bytes(), 0) << describe(dtype, c, 0);
      attentionBackward(AttentionDesc(dtype, c.batch, c.heads, c.kv(), c.seq,
                                      c.dim, 0, c.scale),
                        q.get(), k.get(), v.get(), o.get(), dO.get(), dq.get(),
                        dk.get(), dv.get());
      ZRT_CUDA_CHECK(cudaStreamSynchronize(computeStream()));
      EXPECT_EQ(zrt_scratch_peak_bytes(),
                zrt_scratch_attention_grad(c.batch, c.heads, c.seq, c.dim))
          << describe(dtype, c, 0);
      EXPECT_EQ(zrt_scratch_bytes_in_use(), 0);
    }
}

TEST(CudaMatmulAttentionDeathTest, InvalidArguments) {
  ZRT_REQUIRE_GPU();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      matmul(ZRT_F32, nullptr, nullptr, nullptr, 1, -1, 2, 3, 0, 0, 0, 3),
      "negative dimension");
  EXPECT_DEATH(matmul(7, nullptr, nullptr, nullptr, 1, 1, 1, 1, 0, 0, 0, 1),
               "unknown dtype");
  EXPECT_DEATH(attentionForward(AttentionDesc(ZRT_F32, 1, 1, 1, -2, 8, 0, 0),
                                nullptr, nullptr, nullptr, nullptr),
               "negative dimension");
  EXPECT_DEATH(
      attentionBackward(AttentionDesc(ZRT_BF16, 1, 1, 1, 4, 5462, 1, 0),
                        nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                        nullptr, nullptr),
      "head_dim 5462 exceeds");
  EXPECT_DEATH(attentionForward(AttentionDesc(ZRT_BF16, 1, 4, 3, 8, 64, 1, 0),
                                nullptr, nullptr, nullptr, nullptr),
               "zrt_attention_forward: kv_heads 3 does not divide heads 4");
  EXPECT_DEATH(attentionBackward(AttentionDesc(ZRT_F32, 1, 4, 0, 8, 64, 1, 0),
                                 nullptr, nullptr, nullptr, nullptr, nullptr,
                                 nullptr, nullptr, nullptr),
               "zrt_attention_backward: kv_heads 0 does not divide heads 4");
  EXPECT_DEATH(attentionForward(
                   AttentionDesc(ZRT_BF16, 1, 1, 1, 8, 64, 0, 0, 4, 0, nullptr),
                   nullptr, nullptr, nullptr, nullptr),
               "zrt_attention_forward: a window requires causal");
  EXPECT_DEATH(attentionBackward(AttentionDesc(ZRT_F32, 1, 1, 1, 8, 64, 1, 0, 0,
                                               -1.0, nullptr),
                                 nullptr, nullptr, nullptr, nullptr, nullptr,
                                 nullptr, nullptr, nullptr),
               "zrt_attention_backward: softcap -1 is not a positive number");
  std::vector<float> slopes(257, 0.5f);
  EXPECT_DEATH(
      attentionForward(
          AttentionDesc(ZRT_F32, 1, 257, 257, 8, 64, 1, 0, 0, 0, slopes.data()),
          nullptr, nullptr, nullptr, nullptr),
      "zrt_attention_forward: ALiBi over 257 heads exceeds the supported "
      "256");
}

} // namespace
