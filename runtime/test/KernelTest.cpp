//===- KernelTest.cpp - Kernels against double-precision references -------===//
//
// Part of the zero-mlir project.
//
// Every kernel, for every dtype, against the definitions in Reference.h
// evaluated on the same (already rounded) inputs. The kernels compute in
// fp32 and round the result once, so the tolerances are the output dtype's
// unit roundoff u relative to the result, plus an fp32 accumulation term
// (2^-24 times the size of the summed terms, with slack for the sums'
// length).
//
//===----------------------------------------------------------------------===//

#include "Reference.h"
#include "TestUtil.h"
#include "zero_rt/quantize.h"
#include "zero_rt/scratch.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <tuple>

using namespace zrt_test;

namespace {

constexpr double kF32 = 0x1p-24;

double maxAbs(const ref::Vec &v) {
  double m = 0;
  for (double x : v)
    m = std::max(m, std::fabs(x));
  return m;
}

class KernelTest : public ::testing::TestWithParam<int32_t> {
protected:
  int32_t dtype() const { return GetParam(); }
  double u() const { return unitRoundoff(dtype()); }
  std::mt19937 rng{1234};

  /// Attention's backward derives the scores once per block of query rows
  /// when a block's scores against every key fit its workspace (seq 128
  /// here), and in three passes otherwise (seq 512): runs both with
  /// `run(seq, q, k, v, o, dO, dq, dk, dv)` (the forward, then the backward)
  /// and expects the same bits for the first 128 rows of each head. Causal
  /// rows see only earlier keys, and rows whose dO is zero add exact zeros,
  /// so the first 128 rows of the long problem are the short one.
  template <typename Run>
  void expectGradPathsAgree(int64_t batch, int64_t heads, int64_t kvHeads,
                            int64_t dim, const Run &run) {
    int64_t shortSeq = 128, longSeq = 512;
    auto index = [&](int64_t h, int64_t seq, int64_t i) {
      return (h * seq + i) * dim;
    };
    int64_t n = batch * heads * longSeq * dim,
            nkv = batch * kvHeads * longSeq * dim;
    Buffer q = randomBuffer(dtype(), rng, n, -2, 2),
           k = randomBuffer(dtype(), rng, nkv, -2, 2),
           v = randomBuffer(dtype(), rng, nkv),
           dO = randomBuffer(dtype(), rng, n);
    for (int64_t h = 0; h < batch * heads; ++h)
      for (int64_t e = index(h, longSeq, shortSeq);
           e < index(h, longSeq, longSeq); ++e)
        dO.set(e, 0.0);
    // The first shortSeq rows of each head of a long tensor.
    auto head = [&](const Buffer &x, int64_t count) {
      Buffer y(dtype(), count * shortSeq * dim);
      for (int64_t h = 0; h < count; ++h)
        for (int64_t e = 0; e < shortSeq * dim; ++e)
          y.set(index(h, shortSeq, 0) + e, x.get(index(h, longSeq, 0) + e));
      return y;
    };
    Buffer qs = head(q, batch * heads), ks = head(k, batch * kvHeads),
           vs = head(v, batch * kvHeads), dOs = head(dO, batch * heads);
    int64_t ns = batch * heads * shortSeq * dim,
            nkvs = batch * kvHeads * shortSeq * dim;
    Buffer o(dtype(), n), dq(dtype(), n), dk(dtype(), nkv), dv(dtype(), nkv);
    Buffer os(dtype(), ns), dqs(dtype(), ns), dks(dtype(), nkvs),
        dvs(dtype(), nkvs);
    run(longSeq, q, k, v, o, dO, dq, dk, dv);
    run(shortSeq, qs, ks, vs, os, dOs, dqs, dks, dvs);
    EXPECT_EQ(os.values(), head(o, batch * heads).values()) << "o";
    EXPECT_EQ(dqs.values(), head(dq, batch * heads).values()) << "dq";
    EXPECT_EQ(dks.values(), head(dk, batch * kvHeads).values()) << "dk";
    EXPECT_EQ(dvs.values(), head(dv, batch * kvHeads).values()) << "dv";
  }
};

TEST_P(KernelTest, Matmul) {
  struct Case {
    int64_t batch, m, n, k;
    bool bBatched;
  };
  // 2-D, batched, shared rhs, and one that spans several 16-bit panels.
  for (Case c : {Case{1, 37, 29, 45, true}, Case{3, 17, 33, 20, true},
                 Case{3, 19, 23, 31, false}, Case{2, 300, 520, 24, false}}) {
    for (int ta = 0; ta < 2; ++ta) {
      for (int tb = 0; tb < 2; ++tb) {
        Buffer a = randomBuffer(dtype(), rng, c.batch * c.m * c.k);
        Buffer b =
            randomBuffer(dtype(), rng, (c.bBatched ? c.batch : 1) * c.k * c.n);
        Buffer out(dtype(), c.batch * c.m * c.n);
        zrt_matmul(dtype(), a.data(), b.data(), out.data(), c.batch, c.m, c.n,
                   c.k, ta, tb, c.bBatched, c.k);
        ref::Vec absSum;
        ref::Vec want = ref::matmul(a.values(), b.values(), c.batch, c.m, c.n,
                                    c.k, ta, tb, c.bBatched, &absSum);
        std::vector<double> got = out.values();
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_NEAR(got[i], want[i],
                      u() * std::fabs(want[i]) + c.k * kF32 * absSum[i])
              << "matmul " << dtypeName(dtype()) << " batch " << c.batch
              << " m " << c.m << " ta " << ta << " tb " << tb << " at " << i;
      }
    }
  }
}

// k_sum < k leaves the trailing contraction entries out: the product is
// bitwise that of operands holding only the first k_sum, whatever the rest
// holds (zero-pad-vocab's padding).
TEST_P(KernelTest, MatmulPartialContraction) {
  struct Case {
    int64_t batch, m, n, k, ks;
    bool bBatched;
  };
  for (Case c :
       {Case{1, 37, 29, 256, 200, true}, Case{2, 19, 23, 640, 501, false},
        Case{2, 300, 520, 24, 17, false}}) {
    for (int ta = 0; ta < 2; ++ta) {
      for (int tb = 0; tb < 2; ++tb) {
        int64_t bBatch = c.bBatched ? c.batch : 1;
        Buffer a = randomBuffer(dtype(), rng, c.batch * c.m * c.k);
        Buffer b = randomBuffer(dtype(), rng, bBatch * c.k * c.n);
        // The operands cut to the first ks contraction entries.
        Buffer a2(dtype(), c.batch * c.m * c.ks),
            b2(dtype(), bBatch * c.ks * c.n);
        for (int64_t i = 0; i < c.batch; ++i)
          for (int64_t r = 0; r < c.m; ++r)
            for (int64_t t = 0; t < c.ks; ++t)
              a2.set(i * c.m * c.ks + (ta ? t * c.m + r : r * c.ks + t),
                     a.get(i * c.m * c.k + (ta ? t * c.m + r : r * c.k + t)));
        for (int64_t i = 0; i < bBatch; ++i)
          for (int64_t t = 0; t < c.ks; ++t)
            for (int64_t col = 0; col < c.n; ++col)
              b2.set(
                  i * c.ks * c.n + (tb ? col * c.ks + t : t * c.n + col),
                  b.get(i * c.k * c.n + (tb ? col * c.k + t : t * c.n + col)));
        Buffer out(dtype(), c.batch * c.m * c.n),
            want(dtype(), c.batch * c.m * c.n);
        zrt_matmul(dtype(), a.data(), b.data(), out.data(), c.batch, c.m, c.n,
                   c.k, ta, tb, c.bBatched, c.ks);
        zrt_matmul(dtype(), a2.data(), b2.data(), want.data(), c.batch, c.m,
                   c.n, c.ks, ta, tb, c.bBatched, c.ks);
        EXPECT_EQ(std::memcmp(out.data(), want.data(),
                              size_t(out.size() * zrt_dtype_size(dtype()))),
                  0)
            << "matmul " << dtypeName(dtype()) << " k " << c.k << " k_sum "
            << c.ks << " ta " << ta << " tb " << tb;
      }
    }
  }
}

TEST_P(KernelTest, BroadcastAddMul) {
  for (int64_t rhsN : {1, 7, 1575, 3150}) {
    int64_t n = 3150;
    Buffer lhs = randomBuffer(dtype(), rng, n),
           rhs = randomBuffer(dtype(), rng, rhsN);
    Buffer sum(dtype(), n), prod(dtype(), n);
    zrt_add(dtype(), lhs.data(), rhs.data(), sum.data(), n, rhsN);
    zrt_mul(dtype(), lhs.data(), rhs.data(), prod.data(), n, rhsN);
    expectClose(sum,
                ref::broadcast(lhs.values(), rhs.values(),
                               [](double x, double y) { return x + y; }),
                u(), 0, "add");
    expectClose(prod,
                ref::broadcast(lhs.values(), rhs.values(),
                               [](double x, double y) { return x * y; }),
                u(), 0, "mul");
  }
  // In place over a large tensor (several threads).
  int64_t n = 200000, rhsN = 2000;
  Buffer x = randomBuffer(dtype(), rng, n),
         bias = randomBuffer(dtype(), rng, rhsN);
  ref::Vec want = ref::broadcast(x.values(), bias.values(),
                                 [](double p, double q) { return p + q; });
  zrt_add(dtype(), x.data(), bias.data(), x.data(), n, rhsN);
  expectClose(x, want, u(), 0, "add in place");
}

// The bias-fused GELU and its gradient equal zrt_add followed by zrt_gelu
// and zrt_gelu_grad bit for bit (the sum rounded to the dtype as zrt_add
// stores it), for a short bias (one tile), a long one (wrapping blocks), a
// full-size one, in place, and over several threads.
TEST_P(KernelTest, BiasGeluIsAddThenGelu) {
  for (auto [n, biasN] : {std::pair<int64_t, int64_t>{3150, 1},
                          {3150, 7},
                          {3150, 1575},
                          {3150, 3150},
                          {200000, 2000}}) {
    SCOPED_TRACE(testing::Message() << "n " << n << " bias " << biasN);
    Buffer x = randomBuffer(dtype(), rng, n),
           bias = randomBuffer(dtype(), rng, biasN),
           dy = randomBuffer(dtype(), rng, n);
    size_t bytes = size_t(n) * size_t(zrt_dtype_size(dtype()));
    Buffer sum(dtype(), n), y(dtype(), n), dx(dtype(), n);
    zrt_add(dtype(), x.data(), bias.data(), sum.data(), n, biasN);
    zrt_gelu(dtype(), sum.data(), y.data(), n);
    zrt_gelu_grad(dtype(), sum.data(), dy.data(), dx.data(), n);
    Buffer fy(dtype(), n), fdx(dtype(), n);
    zrt_bias_gelu(dtype(), x.data(), bias.data(), fy.data(), n, biasN);
    zrt_bias_gelu_grad(dtype(), x.data(), bias.data(), dy.data(), fdx.data(), n,
                       biasN);
    EXPECT_EQ(std::memcmp(fy.data(), y.data(), bytes), 0) << "bias_gelu";
    EXPECT_EQ(std::memcmp(fdx.data(), dx.data(), bytes), 0) << "bias_gelu_grad";
    // In place: the output over the input, and the gradient over dy.
    Buffer xi = x, dyi = dy;
    zrt_bias_gelu(dtype(), xi.data(), bias.data(), xi.data(), n, biasN);
    zrt_bias_gelu_grad(dtype(), x.data(), bias.data(), dyi.data(), dyi.data(),
                       n, biasN);
    EXPECT_EQ(std::memcmp(xi.data(), y.data(), bytes), 0) << "in place";
    EXPECT_EQ(std::memcmp(dyi.data(), dx.data(), bytes), 0) << "in place";
  }
}

// gpt-oss's clamped SwiGLU against its definition in double, with inputs
// on both sides of the limits; the gradients are GradTest's.
TEST_P(KernelTest, ClampedSwiglu) {
  int64_t n = 5000;
  double alpha = 1.702, limit = 3.0;
  Buffer gate = randomBuffer(dtype(), rng, n, -6, 6);
  Buffer up = randomBuffer(dtype(), rng, n, -6, 6);
  ref::Vec g = gate.values(), uv = up.values();
  Buffer y(dtype(), n);
  ref::Vec want(g.size());
  for (int64_t i = 0; i < n; ++i) {
    double c = std::min(g[i], limit), d = std::clamp(uv[i], -limit, limit);
    want[i] = (d + 1) * c / (1 + std::exp(-alpha * c));
  }
  zrt_clamped_swiglu(dtype(), gate.data(), up.data(), y.data(), n, alpha,
                     limit);
  expectClose(y, want, u() + 1e-6, 1e-6, "clamped_swiglu");
  zrt_clamped_swiglu(dtype(), nullptr, nullptr, nullptr, 0, alpha, limit);
}

// Attention with sinks against softmax([scores, sink]) without the sink's
// column in double; a sink far below the scores leaves plain attention.
TEST(AttentionSinksTest, MatchesDefinition) {
  std::mt19937 rng{7};
  int64_t batch = 2, heads = 4, kvHeads = 2, t = 9, d = 8, window = 4;
  int64_t n = batch * heads * t * d, nkv = batch * kvHeads * t * d;
  std::uniform_real_distribution<float> dist{-1, 1};
  std::vector<float> q(n), k(nkv), v(nkv), sinks(heads), o(n), plain(n);
  for (auto *x : {&q, &k, &v, &sinks})
    for (float &e : *x)
      e = dist(rng);
  double scale = 1.0 / std::sqrt(double(d));
  for (int64_t w : {int64_t(0), window}) {
    zrt_attention_forward(AttentionDesc(ZRT_F32, batch, heads, kvHeads, t, d, 1,
                                        scale, w, 0, nullptr, sinks.data()),
                          q.data(), k.data(), v.data(), o.data());
    std::vector<double> got(o.begin(), o.end()), want(n, 0.0);
    for (int64_t bh = 0; bh < batch * heads; ++bh) {
      int64_t kv = bh / (heads / kvHeads);
      for (int64_t i = 0; i < t; ++i) {
        int64_t j0 = w ? std::max<int64_t>(0, i - w + 1) : 0;
        std::vector<double> s;
        double m = sinks[bh % heads];
        for (int64_t j = j0; j <= i; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < d; ++e)
            dot += double(q[(bh * t + i) * d + e]) * k[(kv * t + j) * d + e];
          s.push_back(dot * scale);
          m = std::max(m, s.back());
        }
        double sum = std::exp(sinks[bh % heads] - m);
        for (double x : s)
          sum += std::exp(x - m);
        for (int64_t j = j0; j <= i; ++j)
          for (int64_t e = 0; e < d; ++e)
            want[(bh * t + i) * d + e] +=
                std::exp(s[j - j0] - m) / sum * v[(kv * t + j) * d + e];
      }
    }
    expectClose(got, want, 1e-5, 1e-6,
                "attention sinks window " + std::to_string(w));
  }
  // Sinks of -1e30 add nothing to the denominators.
  std::vector<float> none(heads, -1e30f);
  zrt_attention_forward(AttentionDesc(ZRT_F32, batch, heads, kvHeads, t, d, 1,
                                      scale, window, 0, nullptr, none.data()),
                        q.data(), k.data(), v.data(), o.data());
  zrt_attention_forward(AttentionDesc(ZRT_F32, batch, heads, kvHeads, t, d, 1,
                                      scale, window, 0.0, nullptr),
                        q.data(), k.data(), v.data(), plain.data());
  expectClose(std::vector<double>(o.begin(), o.end()),
              std::vector<double>(plain.begin(), plain.end()), 1e-5, 1e-6,
              "attention sinks of -1e30");
}

TEST(AttentionSinksDeathTest, NeedsF32AndNoOtherKnob) {
  float sink = 0;
  EXPECT_DEATH(zrt_attention_forward(AttentionDesc(ZRT_BF16, 1, 1, 1, 1, 1, 1,
                                                   0, 0, 0, nullptr, &sink),
                                     nullptr, nullptr, nullptr, nullptr),
               "zrt_attention_forward: attention sinks need f32 tensors");
  EXPECT_DEATH(zrt_attention_backward(AttentionDesc(ZRT_F32, 1, 1, 1, 1, 1, 1,
                                                    0, 0, 30.0, nullptr, &sink),
                                      nullptr, nullptr, nullptr, nullptr,
                                      nullptr, nullptr, nullptr, nullptr),
               "zrt_attention_backward: attention sinks take no softcap or "
               "ALiBi");
  EXPECT_DEATH(zrt_attention_dsinks(AttentionDesc(ZRT_F32, 1, 1, 1, 1, 1, 1, 0),
                                    nullptr, nullptr, nullptr, nullptr,
                                    nullptr),
               "zrt_attention_dsinks: the descriptor has no sinks");
}

TEST(AttentionDeathTest, DescriptorChecks) {
  EXPECT_DEATH(
      zrt_attention_forward(nullptr, nullptr, nullptr, nullptr, nullptr),
      "zrt_attention_forward: null descriptor");
  int32_t segments[1] = {0};
  zrt_attention_desc desc = *AttentionDesc(ZRT_F32, 1, 1, 1, 1, 1, 1, 0);
  desc.segments = segments;
  EXPECT_DEATH(zrt_attention_backward(&desc, nullptr, nullptr, nullptr, nullptr,
                                      nullptr, nullptr, nullptr, nullptr),
               "zrt_attention_backward: per-token segment ids are not "
               "supported yet");
}

TEST(BiasGeluDeathTest, BiasMustDivideTheInput) {
  Buffer x(ZRT_F32, 10), bias(ZRT_F32, 3), y(ZRT_F32, 10);
  EXPECT_DEATH(zrt_bias_gelu(ZRT_F32, x.data(), bias.data(), y.data(), 10, 3),
               "zrt_bias_gelu: 10 elements do not broadcast over 3");
  EXPECT_DEATH(zrt_bias_gelu_grad(ZRT_F32, x.data(), bias.data(), x.data(),
                                  y.data(), 10, 3),
               "zrt_bias_gelu_grad: 10 elements do not broadcast over 3");
}

TEST_P(KernelTest, PointwiseForwardAndGrad) {
  int64_t n = 5000;
  Buffer x = randomBuffer(dtype(), rng, n, -6, 6);
  Buffer dy = randomBuffer(dtype(), rng, n);
  ref::Vec xv = x.values(), dyv = dy.values();
  Buffer y(dtype(), n), dx(dtype(), n);

  zrt_scale(dtype(), x.data(), y.data(), n, 0.125);
  ref::Vec want(xv.size());
  std::transform(xv.begin(), xv.end(), want.begin(),
                 [](double v) { return v * 0.125; });
  expectClose(y, want, u(), 0, "scale");

  // expApprox is within a few fp32 ulp: 1e-6 relative covers it.
  zrt_gelu(dtype(), x.data(), y.data(), n);
  std::transform(xv.begin(), xv.end(), want.begin(), ref::gelu);
  expectClose(y, want, u() + 1e-6, 1e-7, "gelu");
  zrt_gelu_grad(dtype(), x.data(), dy.data(), dx.data(), n);
  for (int64_t i = 0; i < n; ++i)
    want[i] = ref::geluGrad(xv[i]) * dyv[i];
  expectClose(dx, want, u() + 1e-6, 1e-6, "gelu_grad");

  // Exact GELU: libm's erff (and expApprox in the gradient); the gradient
  // crosses zero near x = -0.75.
  zrt_gelu_erf(dtype(), x.data(), y.data(), n);
  std::transform(xv.begin(), xv.end(), want.begin(), ref::geluErf);
  expectClose(y, want, u() + 1e-6, 1e-7, "gelu_erf");
  zrt_gelu_erf_grad(dtype(), x.data(), dy.data(), dx.data(), n);
  for (int64_t i = 0; i < n; ++i)
    want[i] = ref::geluErfGrad(xv[i]) * dyv[i];
  expectClose(dx, want, u() + 1e-6, 1e-6, "gelu_erf_grad");

  // SiLU: one expApprox as in GELU; the gradient crosses zero near
  // x = -1.28, hence the same absolute term.
  zrt_silu(dtype(), x.data(), y.data(), n);
  std::transform(xv.begin(), xv.end(), want.begin(), ref::silu);
  expectClose(y, want, u() + 1e-6, 1e-7, "silu");
  zrt_silu_grad(dtype(), x.data(), dy.data(), dx.data(), n);
  for (int64_t i = 0; i < n; ++i)
    want[i] = ref::siluGrad(xv[i]) * dyv[i];
  expectClose(dx, want, u() + 1e-6, 1e-6, "silu_grad");

  // tanh: Cephes' polynomial below |x| = 0.625, expApprox above; the
  // gradient, from the result, crosses zero nowhere but is tiny in the
  // tails, hence the absolute term.
  zrt_tanh(dtype(), x.data(), y.data(), n);
  std::transform(xv.begin(), xv.end(), want.begin(), ref::tanh);
  expectClose(y, want, u() + 1e-6, 1e-7, "tanh");
  ref::Vec yv = y.values();
  zrt_tanh_grad(dtype(), y.data(), dy.data(), dx.data(), n);
  for (int64_t i = 0; i < n; ++i)
    want[i] = ref::tanhGrad(yv[i]) * dyv[i];
  expectClose(dx, want, u() + 1e-6, 1e-6, "tanh_grad");

  zrt_relu(dtype(), x.data(), y.data(), n);
  std::transform(xv.begin(), xv.end(), want.begin(),
                 [](double v) { return v > 0 ? v : 0.0; });
  expectClose(y, want, 0, 0, "relu");
  zrt_relu_grad(dtype(), y.data(), dy.data(), dx.data(), n);
  for (int64_t i = 0; i < n; ++i)
    want[i] = xv[i] > 0 ? dyv[i] : 0.0;
  expectClose(dx, want, 0, 0, "relu_grad");
}

// SwiGLU: the SiLU terms above times up (in [-2, 2], hence twice the
// absolute terms); the outputs may alias the inputs.
TEST_P(KernelTest, ExpLogSoftplusAndGrad) {
  int64_t n = 5000;
  Buffer x = randomBuffer(dtype(), rng, n, -15, 15);
  Buffer pos = randomBuffer(dtype(), rng, n, 1e-3, 20);
  Buffer dy = randomBuffer(dtype(), rng, n);
  ref::Vec xv = x.values(), pv = pos.values(), dyv = dy.values();
  Buffer y(dtype(), n), dx(dtype(), n);
  ref::Vec want(xv.size());

  // exp: expApprox, a few fp32 ulp, up to e^10 (f16's range ends at e^11);
  // its gradient from the result is one product.
  Buffer e = randomBuffer(dtype(), rng, n, -10, 10);
  ref::Vec ev = e.values();
  zrt_exp(dtype(), e.data(), y.data(), n);
  for (int64_t i = 0; i < n; ++i)
    want[i] = std::exp(ev[i]);
  expectClose(y, want, u() + 1e-6, 0, "exp");
  ref::Vec yv = y.values();
  zrt_exp_grad(dtype(), y.data(), dy.data(), dx.data(), n);
  for (int64_t i = 0; i < n; ++i)
    want[i] = yv[i] * dyv[i];
  expectClose(dx, want, u(), 0, "exp_grad");

  // log: libm's logf, which crosses zero at 1; its gradient from the input
  // is one quotient.
  zrt_log(dtype(), pos.data(), y.data(), n);
  for (int64_t i = 0; i < n; ++i)
    want[i] = std::log(pv[i]);
  expectClose(y, want, u() + 1e-6, 1e-7, "log");
  zrt_log_grad(dtype(), pos.data(), dy.data(), dx.data(), n);
  for (int64_t i = 0; i < n; ++i)
    want[i] = dyv[i] / pv[i];
  expectClose(dx, want, u(), 0, "log_grad");

  // softplus at PyTorch's defaults and at beta 2, threshold 5, so that
  // inputs fall on both sides of the threshold.
  for (auto [beta, threshold] :
       {std::pair<double, double>{1.0, 20.0}, {2.0, 5.0}}) {
    std::string at = " beta " + std::to_string(beta);
    zrt_softplus(dtype(), x.data(), y.data(), n, beta, threshold);
    for (int64_t i = 0; i < n; ++i)
      want[i] = ref::softplus(xv[i], beta, threshold);
    expectClose(y, want, u() + 1e-6, 1e-7, "softplus" + at);
    zrt_softplus_grad(dtype(), x.data(), dy.data(), dx.data(), n, beta,
                      threshold);
    for (int64_t i = 0; i < n; ++i)
      want[i] = ref::softplusGrad(xv[i], beta, threshold) * dyv[i];
    expectClose(dx, want, u() + 1e-6, 1e-7, "softplus_grad" + at);
  }
}

// xIELU and its gradient against double references, at random inputs and
// at the branches' edges: x == eps (eps representable in every dtype),
// between eps and 0, both zeros, tiny and NaN inputs.
TEST_P(KernelTest, Xielu) {
  const double beta = 0.5, eps = -0x1p-20;
  ref::Vec xs = randomValues(rng, 2000, -6, 6);
  for (double v :
       {-3.0, 2 * eps, eps, eps / 2, 0.0, -0.0, 1e-8, 1.5, std::nan("")})
    xs.push_back(v);
  int64_t n = xs.size();
  Buffer x(dtype(), xs), dy = randomBuffer(dtype(), rng, n);
  Buffer ap(dtype(), ref::Vec{0.8}), an(dtype(), ref::Vec{1.3});
  double apv = ap.values()[0], anv = an.values()[0];
  ref::Vec xv = x.values(), dyv = dy.values();
  Buffer y(dtype(), n), dx(dtype(), n), pp(dtype(), n), pn(dtype(), n);
  zrt_xielu(dtype(), x.data(), ap.data(), an.data(), y.data(), n, beta, eps);
  zrt_xielu_grad(dtype(), x.data(), ap.data(), an.data(), dy.data(), dx.data(),
                 pp.data(), pn.data(), n, beta, eps);
  ref::Vec want(n), wantDx(n), wantPp(n), wantPn(n);
  for (int64_t i = 0; i < n; ++i) {
    double d, p, q;
    want[i] = ref::xielu(xv[i], apv, anv, beta, eps);
    ref::xieluGrad(xv[i], apv, anv, beta, eps, d, p, q);
    wantDx[i] = d * dyv[i];
    wantPp[i] = p * dyv[i];
    wantPn[i] = q * dyv[i];
  }
  // NaN in, NaN out everywhere (as torch, whose where() backward multiplies
  // the NaN input by the other branch's zero gradient).
  ref::Vec got = y.values(), gotDx = dx.values(), gotPp = pp.values(),
           gotPn = pn.values();
  for (ref::Vec *v : {&got, &gotDx, &gotPp, &gotPn}) {
    EXPECT_TRUE(std::isnan(v->back()));
    v->pop_back();
  }
  for (ref::Vec *v : {&want, &wantDx, &wantPp, &wantPn})
    v->pop_back();
  // The sums round in fp32 before the result's dtype; dx's cancels where
  // an * expm1(x) meets -beta.
  expectClose(got, want, u() + 1e-6, 1e-7, "xielu");
  expectClose(gotDx, wantDx, u() + 1e-6, 1e-6, "xielu_grad dx");
  expectClose(gotPp, wantPp, u() + 1e-6, 1e-7, "xielu_grad pp");
  expectClose(gotPn, wantPn, u() + 1e-6, 1e-7, "xielu_grad pn");
  zrt_xielu(dtype(), nullptr, nullptr, nullptr, nullptr, 0, beta, eps);
}

TEST_P(KernelTest, SwigluAndGrad) {
  int64_t n = 5000;
  Buffer gate = randomBuffer(dtype(), rng, n, -6, 6);
  Buffer up = randomBuffer(dtype(), rng, n, -2, 2);
  Buffer dy = randomBuffer(dtype(), rng, n);
  ref::Vec g = gate.values(), uv = up.values(), d = dy.values();
  Buffer y(dtype(), n), dgate(dtype(), n), dup(dtype(), n);
  ref::Vec want(g.size()), wantDgate(g.size()), wantDup(g.size());
  for (int64_t i = 0; i < n; ++i) {
    want[i] = ref::silu(g[i]) * uv[i];
    wantDgate[i] = ref::siluGrad(g[i]) * uv[i] * d[i];
    wantDup[i] = ref::silu(g[i]) * d[i];
  }
  zrt_swiglu(dtype(), gate.data(), up.data(), y.data(), n);
  expectClose(y, want, u() + 1e-6, 2e-7, "swiglu");
  zrt_swiglu_grad(dtype(), gate.data(), up.data(), dy.data(), dgate.data(),
                  dup.data(), n);
  expectClose(dgate, wantDgate, u() + 1e-6, 2e-6, "swiglu_grad dgate");
  expectClose(dup, wantDup, u() + 1e-6, 2e-7, "swiglu_grad dup");
  // In place: dgate over gate, dup over dy.
  zrt_swiglu_grad(dtype(), gate.data(), up.data(), dy.data(), gate.data(),
                  dy.data(), n);
  expectClose(gate, dgate.values(), 0, 0, "swiglu_grad dgate in place");
  expectClose(dy, dup.values(), 0, 0, "swiglu_grad dup in place");
  zrt_swiglu(dtype(), nullptr, nullptr, nullptr, 0);
  zrt_swiglu_grad(dtype(), nullptr, nullptr, nullptr, nullptr, nullptr, 0);
}

// Rotary embedding against exact arithmetic. The kernel's angle is the fp32
// product of an fp32 inverse frequency (<= 1) and the position, within
// 3 * 2^-24 * pos of the exact one, and the rotation adds five roundings:
// 2^-24 (3 pos + 5) (|x1| + |x2|) bounds the fp32 error; a scale of cos and
// sin adds one rounding and multiplies the bound. A table (transformers'
// own inverse frequencies) rotates as theta's would with the same values.
TEST_P(KernelTest, RopeAndInverse) {
  struct Case {
    int64_t batch, heads, seq, dim;
    double theta;
  };
  // Several rows per position, one pair, and a head_dim over two blocks.
  for (Case c : {Case{2, 3, 37, 16, 1e4}, Case{1, 2, 70, 128, 5e5},
                 Case{3, 1, 5, 2, 1e4}, Case{1, 2, 3, 2060, 1e4}}) {
    int64_t rows = c.batch * c.heads, n = rows * c.seq * c.dim;
    Buffer x = randomBuffer(dtype(), rng, n);
    // Llama 3's shape of table: the low frequencies divided by 8, zeros
    // (pairs left unrotated, Gemma 4's proportional rope) at the end.
    std::vector<float> table(static_cast<size_t>(c.dim / 2));
    for (int64_t i = 0; i < c.dim / 2; ++i) {
      double f = std::pow(c.theta, -double(2 * i) / double(c.dim));
      table[i] = float(i >= c.dim / 4 ? f / 8 : f);
      if (c.dim >= 16 && i >= c.dim / 2 - 2)
        table[i] = 0.0f;
    }
    for (int mode = 0; mode < 8; ++mode) {
      int interleaved = mode & 1, inverse = (mode >> 1) & 1;
      const float *invFreq = mode >> 2 ? table.data() : nullptr;
      double scale = mode >> 2 ? 1.2079441541679836 : 1.0;
      double atol = kF32 * (3 * c.seq + 6) * 2 * scale * maxAbs(x.values());
      std::string what =
          std::string("rope ") + dtypeName(dtype()) + " seq " +
          std::to_string(c.seq) + " dim " + std::to_string(c.dim) +
          (interleaved ? " interleaved" : "") + (invFreq ? " table" : "") +
          (inverse ? " inverse" : " forward");
      Buffer y(dtype(), n);
      zrt_rope(dtype(), x.data(), y.data(), c.batch, c.heads, c.seq, c.dim,
               c.theta, inverse, interleaved, invFreq, scale);
      ref::Vec want = ref::rope(x.values(), rows, c.seq, c.dim, c.theta,
                                inverse != 0, interleaved != 0, invFreq, scale);
      expectClose(y, want, u(), atol, what);
      // In place gives the same bits.
      Buffer z(dtype(), x.values());
      zrt_rope(dtype(), z.data(), z.data(), c.batch, c.heads, c.seq, c.dim,
               c.theta, inverse, interleaved, invFreq, scale);
      expectClose(z, y.values(), 0, 0, what + " in place");
    }
  }
  zrt_rope(dtype(), nullptr, nullptr, 0, 4, 8, 16, 1e4, 0, 0, nullptr, 1.0);
  zrt_rope(dtype(), nullptr, nullptr, 0, 4, 8, 16, 1e4, 0, 1, nullptr, 1.0);
}

// f32 rope performs Hugging Face's fp32 steps in their order, bit for bit:
// inv_freq = 1 / theta ** (arange(0, dim, 2).float() / dim), freqs = pos *
// inv_freq, emb = cat(freqs, freqs), x * emb.cos() + rotate_half(x) *
// emb.sin(), each product and the sum rounded (no multiply-add). Where torch
// rounds pow, cos and sin to within an ulp, the kernel rounds them
// correctly, as here.
TEST(RopeTest, HuggingFaceFp32Steps) {
  std::mt19937 rng(99);
  int64_t heads = 3, seq = 300, dim = 64;
  double theta = 5e5;
  std::vector<double> xv = randomValues(rng, heads * seq * dim, -3, 3);
  std::vector<float> x(xv.begin(), xv.end()), y(x.size()), want(x.size());
  int64_t half = dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    float exponent = float(2 * i) / float(dim);
    float invFreq =
        1.0f / float(std::pow(double(float(theta)), double(exponent)));
    for (int64_t p = 0; p < seq; ++p) {
      float freq = float(p) * invFreq;
      float c = float(std::cos(double(freq)));
      float s = float(std::sin(double(freq)));
      for (int64_t h = 0; h < heads; ++h) {
        size_t at = size_t((h * seq + p) * dim + i);
        volatile float x1c = x[at] * c, x2s = x[at + half] * s;
        volatile float x2c = x[at + half] * c, x1s = x[at] * s;
        want[at] = x1c - x2s;
        want[at + half] = x2c + x1s;
      }
    }
  }
  zrt_rope(ZRT_F32, x.data(), y.data(), 1, heads, seq, dim, theta, 0, 0,
           nullptr, 1.0);
  for (size_t k = 0; k < x.size(); ++k)
    ASSERT_EQ(y[k], want[k]) << "element " << k;
  // Interleaved, the same pairs' values sit at (2i, 2i + 1) (GPT-J's
  // rotate_every_two, tables by repeat_interleave): the same bits there.
  std::vector<float> xi(x.size()), yi(x.size());
  for (int64_t r = 0; r < heads * seq; ++r)
    for (int64_t i = 0; i < half; ++i) {
      xi[r * dim + 2 * i] = x[r * dim + i];
      xi[r * dim + 2 * i + 1] = x[r * dim + i + half];
    }
  zrt_rope(ZRT_F32, xi.data(), yi.data(), 1, heads, seq, dim, theta, 0, 1,
           nullptr, 1.0);
  for (int64_t r = 0; r < heads * seq; ++r)
    for (int64_t i = 0; i < half; ++i) {
      ASSERT_EQ(yi[r * dim + 2 * i], want[r * dim + i]) << "row " << r;
      ASSERT_EQ(yi[r * dim + 2 * i + 1], want[r * dim + i + half])
          << "row " << r;
    }
}

// With transformers' own table (YaRN's or Llama 3's inv_freq, its
// attention_scaling), f32 rope performs its fp32 steps bit for bit: freqs =
// pos * inv_freq, cos = emb.cos() * attention_scaling (an fp32 product), the
// rotation as above.
TEST(RopeTest, TransformersTableFp32Steps) {
  std::mt19937 rng(7);
  int64_t heads = 2, seq = 200, dim = 32, half = dim / 2;
  double scale = 1.2079441541679836;
  std::vector<double> xv = randomValues(rng, heads * seq * dim, -3, 3);
  std::vector<float> x(xv.begin(), xv.end()), y(x.size()), want(x.size());
  std::vector<float> table(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i)
    table[i] = float(std::pow(5e5, -double(2 * i) / double(dim)) /
                     (i < half / 2 ? 1.0 : 40.0));
  for (int64_t i = 0; i < half; ++i)
    for (int64_t p = 0; p < seq; ++p) {
      float freq = float(p) * table[i];
      float c = float(std::cos(double(freq))) * float(scale);
      float s = float(std::sin(double(freq))) * float(scale);
      for (int64_t h = 0; h < heads; ++h) {
        size_t at = size_t((h * seq + p) * dim + i);
        volatile float x1c = x[at] * c, x2s = x[at + half] * s;
        volatile float x2c = x[at + half] * c, x1s = x[at] * s;
        want[at] = x1c - x2s;
        want[at + half] = x2c + x1s;
      }
    }
  zrt_rope(ZRT_F32, x.data(), y.data(), 1, heads, seq, dim, 1e4, 0, 0,
           table.data(), scale);
  for (size_t k = 0; k < x.size(); ++k)
    ASSERT_EQ(y[k], want[k]) << "element " << k;
}

TEST(RopeDeathTest, TableAndScaleAreChecked) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const float table[] = {1.0f, NAN};
  EXPECT_DEATH(
      zrt_rope(ZRT_F32, nullptr, nullptr, 1, 1, 2, 4, 1e4, 0, 0, table, 1.0),
      "zrt_rope: inv_freq\\[1\\] is not finite");
  EXPECT_DEATH(
      zrt_rope(ZRT_F32, nullptr, nullptr, 1, 1, 2, 4, 1e4, 0, 0, nullptr, -1.0),
      "zrt_rope: scale -1 is not positive and finite");
}

TEST_P(KernelTest, SoftmaxAndGrad) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{5, 1500}, {64, 10}}) {
    Buffer x = randomBuffer(dtype(), rng, rows * cols, -8, 8);
    Buffer y(dtype(), rows * cols),
        dy = randomBuffer(dtype(), rng, rows * cols), dx(dtype(), rows * cols);
    zrt_softmax(dtype(), x.data(), y.data(), rows, cols);
    expectClose(y, ref::softmax(x.values(), rows, cols), u() + 1e-5, 1e-9,
                "softmax");
    zrt_softmax_grad(dtype(), y.data(), dy.data(), dx.data(), rows, cols);
    ref::Vec want = ref::softmaxGrad(y.values(), dy.values(), rows, cols);
    expectClose(dx, want, u() + 1e-5, 1e-6 * maxAbs(want), "softmax_grad");
  }
}

TEST_P(KernelTest, LogsumexpReduceMaxAndGrad) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{5, 1500}, {64, 10}}) {
    int64_t n = rows * cols;
    Buffer x = randomBuffer(dtype(), rng, n, -8, 8);
    Buffer y(dtype(), rows), dy = randomBuffer(dtype(), rng, rows),
                             dx(dtype(), n);
    ref::Vec xv = x.values(), dyv = dy.values();
    // The sum of exponentials in fp32, its log then added to the maximum.
    zrt_logsumexp(dtype(), x.data(), y.data(), rows, cols);
    expectClose(y, ref::logsumexp(xv, rows, cols), u() + 1e-6, cols * kF32 * 4,
                "logsumexp");
    ref::Vec yv = y.values(), want(xv.size());
    zrt_logsumexp_grad(dtype(), x.data(), y.data(), dy.data(), dx.data(), rows,
                       cols);
    for (int64_t i = 0; i < n; ++i)
      want[i] = dyv[i / cols] * std::exp(xv[i] - yv[i / cols]);
    expectClose(dx, want, u() + 1e-6, 1e-7, "logsumexp_grad");

    zrt_reduce_max(dtype(), x.data(), y.data(), rows, cols);
    expectClose(y, ref::reduceMax(xv, rows, cols), 0, 0, "reduce_max");
    // Integers from -3 to 3: rows whose maximum is tied, the gradient split
    // among the ties.
    ref::Vec ints(xv.size());
    for (int64_t i = 0; i < n; ++i)
      ints[i] = std::round(xv[i] * 0.375);
    Buffer xi(dtype(), ints);
    zrt_reduce_max(dtype(), xi.data(), y.data(), rows, cols);
    zrt_reduce_max_grad(dtype(), xi.data(), y.data(), dy.data(), dx.data(),
                        rows, cols);
    expectClose(dx, ref::reduceMaxGrad(ints, dyv, rows, cols), u(), 0,
                "reduce_max_grad");
  }
  // A row holding NaN has a NaN maximum, as torch.amax's.
  Buffer x = randomBuffer(dtype(), rng, 8), y(dtype(), 2);
  x.set(5, std::nan(""));
  zrt_reduce_max(dtype(), x.data(), y.data(), 2, 4);
  EXPECT_FALSE(std::isnan(y.get(0)));
  EXPECT_TRUE(std::isnan(y.get(1)));
}

TEST_P(KernelTest, LayerNormAndGrad) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{6, 1100}, {70, 64}}) {
    double eps = 1e-5;
    Buffer x = randomBuffer(dtype(), rng, rows * cols, 1, 4);
    Buffer w = randomBuffer(dtype(), rng, cols, 0.5, 1.5);
    Buffer b = randomBuffer(dtype(), rng, cols);
    Buffer dy = randomBuffer(dtype(), rng, rows * cols);
    Buffer y(dtype(), rows * cols), dx(dtype(), rows * cols), dw(dtype(), cols),
        db(dtype(), cols);
    zrt_layer_norm(dtype(), x.data(), w.data(), b.data(), y.data(), rows, cols,
                   eps);
    expectClose(
        y, ref::layerNorm(x.values(), w.values(), b.values(), rows, cols, eps),
        u(), 1e-5, "layer_norm");
    zrt_layer_norm_grad(dtype(), x.data(), w.data(), dy.data(), dx.data(),
                        dw.data(), db.data(), rows, cols, eps);
    ref::Vec wantDx, wantDw, wantDb;
    ref::layerNormGrad(x.values(), w.values(), dy.values(), rows, cols, eps,
                       wantDx, wantDw, wantDb);
    expectClose(dx, wantDx, u(), 1e-4 * maxAbs(wantDx), "layer_norm_grad dx");
    expectClose(dw, wantDw, u(), rows * 1e-6, "layer_norm_grad dw");
    expectClose(db, wantDb, u(), rows * 1e-6, "layer_norm_grad db");
  }
}

// RMS norm, y = w * round(n) with n = x * rsqrt(mean(x^2) + eps) and round
// to the dtype, as Hugging Face's LlamaRMSNorm. For 16-bit dtypes w *
// round(n) is exact in fp32 (8- or 11-bit significands), so y must be the
// reference's round(w * round(n)) bit for bit except where the kernel's
// fp32 n and the double n round to neighbouring values (n within a few fp32
// ulps of a rounding boundary: rare, and then one ulp of the dtype apart).
// Rounding only once, round(w * n), would differ in many more elements; the
// test checks that these inputs tell the two apart.
TEST_P(KernelTest, RmsNormAndGrad) {
  const std::pair<int64_t, int64_t> shapes[] = {{6, 1100}, {70, 64}, {0, 8}};
  for (auto [rows, cols] : shapes) {
    double eps = 1e-5;
    int64_t n = rows * cols;
    Buffer x = randomBuffer(dtype(), rng, n, -3, 3);
    Buffer w = randomBuffer(dtype(), rng, cols, 0.5, 1.5);
    Buffer dy = randomBuffer(dtype(), rng, n);
    Buffer y(dtype(), n), dx(dtype(), n), dw = randomBuffer(dtype(), rng, cols);
    std::string what = std::string("rms_norm ") + dtypeName(dtype()) + " " +
                       std::to_string(rows) + "x" + std::to_string(cols);
    zrt_rms_norm(dtype(), x.data(), w.data(), y.data(), rows, cols, eps);
    ref::Vec normed = ref::rmsNormalized(x.values(), rows, cols, eps);
    ref::Vec wv = w.values();
    auto round = [&](double v) {
      return dtype() == ZRT_F32 ? v : roundTo(dtype(), v);
    };
    ref::Vec want(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      want[i] = round(round(normed[i]) * wv[i % cols]);
    if (dtype() == ZRT_F32) {
      // rstd from an fp32 sum of squares, then two products.
      expectClose(y, want, u() + 1e-6, 1e-7, what);
    } else {
      int64_t differ = 0, onceDiffers = 0;
      for (int64_t i = 0; i < n; ++i) {
        onceDiffers += roundTo(dtype(), normed[i] * wv[i % cols]) != want[i];
        if (y.get(i) == want[i])
          continue;
        ++differ;
        EXPECT_NEAR(y.get(i), want[i],
                    2 * u() * std::fabs(want[i]) +
                        2 * subnormalRoundoff(dtype()))
            << what << " at " << i;
      }
      EXPECT_LE(differ, n / 500 + 1) << what;
      if (n > 0)
        EXPECT_GE(onceDiffers, n / 20) << what;
    }

    zrt_rms_norm_grad(dtype(), x.data(), w.data(), dy.data(), dx.data(),
                      dw.data(), rows, cols, eps);
    ref::Vec wantDx, wantDw;
    ref::rmsNormGrad(x.values(), wv, dy.values(), rows, cols, eps, wantDx,
                     wantDw, round);
    expectClose(dx, wantDx, u(), 1e-4 * maxAbs(wantDx), what + " dx");
    // dw sums dy * round(n) in fp32; a rare n rounded to the neighbouring
    // value moves one term by an ulp of the dtype.
    expectClose(dw, wantDw, u(), rows * 1e-6 + 4 * u(), what + " dw");
  }
}

// Bit for bit the output of Hugging Face's LlamaRMSNorm forward (its code,
// run with PyTorch 1.13 on the CPU) in bf16 and f16, on inputs exactly
// representable in both: x[i] = ((37 i) % 101 - 50) / 16 over [2, 64],
// w[c] = 0.5 + ((13 c) % 17) / 16, eps 1e-5. The tables were printed by
//   h = x.float(); h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-5)
//   (w * h.to(x.dtype)).view(torch.int16)
// Rounding w * n only once differs from them in 30 (bf16) and 32 (f16) of
// the 128 elements.
TEST(RmsNormTest, MatchesHuggingFaceBitForBit) {
  const int64_t rows = 2, cols = 64;
  const uint16_t bf16[] = {
      0xbf59, 0xbf14, 0x3f5d, 0xbf8d, 0xbd6a, 0x3fca, 0xbf92, 0x3e55, 0x3f6f,
      0xbf79, 0x3f2f, 0xbfbf, 0xbe6e, 0x3fb0, 0xbfc8, 0x0000, 0x3f70, 0xbeea,
      0x3ee3, 0x3fd9, 0xbeef, 0x3ec3, 0xc003, 0xbe89, 0x3f64, 0xbf38, 0x3e16,
      0x3fcd, 0xbf43, 0x3e9b, 0x4023, 0xbf18, 0x3f47, 0xbf86, 0xbd8b, 0x3fbc,
      0xbf8e, 0x3e29, 0x3f51, 0xbf7a, 0x3f1c, 0xbfb6, 0xbe6f, 0x3fa2, 0xbfc4,
      0xbd02, 0x3f56, 0xbfb6, 0x3ec3, 0x3fc7, 0xbeea, 0x3ea5, 0xc000, 0xbe94,
      0x3f4c, 0xbf2b, 0x3dbf, 0x3fbe, 0xbf3e, 0x3e82, 0x4018, 0xbf1a, 0x3f33,
      0xbf7a, 0xbdb2, 0x3fba, 0xbf97, 0x3e11, 0x3f52, 0xbf86, 0x3f16, 0xbfbf,
      0xbe85, 0x3fa0, 0xbfcd, 0xbd85, 0x3f56, 0xbfc2, 0x3eb2, 0x3fc8, 0xbefe,
      0x3ea0, 0xc006, 0xbeaa, 0x3f4a, 0xbf34, 0x3d43, 0x3fbe, 0xbf4a, 0x3e74,
      0x4019, 0xbf29, 0x3f2f, 0xbf83, 0xbea0, 0x3fac, 0xbf93, 0x3dd5, 0x3f36,
      0xbf86, 0x3f04, 0xbfb4, 0xbe82, 0x3f92, 0xbfc8, 0xbdba, 0x3f3d, 0xbfbf,
      0x3e94, 0x3fb7, 0xbef5, 0x3f62, 0xc003, 0xbeb2, 0x3f34, 0xbf24, 0x0000,
      0x3fae, 0xbf43, 0x3e48, 0x4010, 0xbf2a, 0x3f1c, 0xbf74, 0xbeb3, 0x3f9e,
      0xbf8e, 0x3d92};
  const uint16_t f16[] = {
      0xbac5, 0xb89f, 0x3ae8, 0xbc66, 0xab50, 0x3e54, 0xbc92, 0x32a2, 0x3b72,
      0xbbc8, 0x3977, 0xbdf7, 0xb372, 0x3d7c, 0xbe42, 0x0000, 0x3b83, 0xb750,
      0x371b, 0x3ec3, 0xb77a, 0x3617, 0xc018, 0xb444, 0x3b1c, 0xb9c0, 0x30ac,
      0x3e6e, 0xba18, 0x34d7, 0x4114, 0xb8bd, 0x3a3a, 0xbc2a, 0xac55, 0x3dde,
      0xbc75, 0x3148, 0x3a8c, 0xbbd2, 0x38e0, 0xbdb0, 0xb372, 0x3d0f, 0xbe1c,
      0xa810, 0x3ab4, 0xbdb0, 0x3618, 0x3e3a, 0xb750, 0x3525, 0xc000, 0xb49a,
      0x3a61, 0xb955, 0x2df5, 0x3df1, 0xb9ec, 0x3410, 0x40c4, 0xb8d3, 0x3996,
      0xbbd2, 0xad8e, 0x3dd4, 0xbcb8, 0x3083, 0x3a90, 0xbc33, 0x38af, 0xbdf4,
      0xb42a, 0x3cfd, 0xbe6e, 0xac2a, 0x3aae, 0xbe0a, 0x358d, 0x3e3f, 0xb7ea,
      0x3500, 0xc031, 0xb550, 0x3a51, 0xb9a0, 0x2a1b, 0x3df0, 0xba51, 0x33a3,
      0x40ca, 0xb946, 0x3978, 0xbc1a, 0xb500, 0x3d62, 0xbc95, 0x2eaa, 0x39b1,
      0xbc31, 0x3821, 0xbda4, 0xb410, 0x3c95, 0xbe40, 0xadd5, 0x39e6, 0xbdfc,
      0x349e, 0x3dba, 0xb7a3, 0x3b14, 0xc014, 0xb58e, 0x399f, 0xb923, 0x0000,
      0x3d75, 0xba17, 0x3240, 0x407d, 0xb94f, 0x38dc, 0xbba3, 0xb596, 0x3cf2,
      0xbc6c, 0x2c95};
  for (int32_t dtype : {ZRT_BF16, ZRT_F16}) {
    const uint16_t *want = dtype == ZRT_BF16 ? bf16 : f16;
    Buffer x(dtype, rows * cols), w(dtype, cols), y(dtype, rows * cols);
    for (int64_t i = 0; i < rows * cols; ++i)
      x.set(i, double((37 * i) % 101 - 50) / 16);
    for (int64_t c = 0; c < cols; ++c)
      w.set(c, 0.5 + double((13 * c) % 17) / 16);
    zrt_rms_norm(dtype, x.data(), w.data(), y.data(), rows, cols, 1e-5);
    const uint16_t *got = static_cast<const uint16_t *>(y.data());
    for (int64_t i = 0; i < rows * cols; ++i)
      EXPECT_EQ(got[i], want[i])
          << dtypeName(dtype) << " element " << i << ": " << y.get(i);
  }
}

TEST_P(KernelTest, AttentionAndGrad) {
  struct Case {
    int64_t batch, heads, kvHeads, seq, dim;
    double scale;
  };
  // Sequences longer than one block, a head_dim that shrinks the block, and
  // explicit scales (1 reads f32 queries in place); grouped-query (2 and 3
  // query heads per key/value head) and multi-query (one key/value head)
  // attention, also over several key and query blocks.
  for (Case c : {Case{2, 3, 3, 37, 16, 0}, Case{1, 2, 2, 100, 72, 0},
                 Case{1, 1, 1, 67, 8, 0.3}, Case{1, 2, 2, 33, 8, 1.0},
                 Case{2, 4, 2, 70, 16, 0}, Case{1, 6, 2, 37, 8, 0.5},
                 Case{2, 3, 1, 29, 16, 0}, Case{1, 4, 1, 100, 72, 0}}) {
    for (int causal = 0; causal < 2; ++causal) {
      int64_t n = c.batch * c.heads * c.seq * c.dim,
              nkv = c.batch * c.kvHeads * c.seq * c.dim;
      double scale = c.scale > 0 ? c.scale : 1.0 / std::sqrt(double(c.dim));
      Buffer q = randomBuffer(dtype(), rng, n, -2, 2),
             k = randomBuffer(dtype(), rng, nkv, -2, 2),
             v = randomBuffer(dtype(), rng, nkv),
             dO = randomBuffer(dtype(), rng, n);
      Buffer o(dtype(), n), dq(dtype(), n), dk(dtype(), nkv), dv(dtype(), nkv);
      zrt_attention_forward(AttentionDesc(dtype(), c.batch, c.heads, c.kvHeads,
                                          c.seq, c.dim, causal, c.scale),
                            q.data(), k.data(), v.data(), o.data());
      std::string what =
          std::string("attention ") + dtypeName(dtype()) + " heads " +
          std::to_string(c.heads) + "/" + std::to_string(c.kvHeads) + " seq " +
          std::to_string(c.seq) + " causal " + std::to_string(causal);
      expectClose(o,
                  ref::attention(q.values(), k.values(), v.values(), c.batch,
                                 c.heads, c.kvHeads, c.seq, c.dim, causal,
                                 scale),
                  u(), 1e-5, what);
      zrt_attention_backward(AttentionDesc(dtype(), c.batch, c.heads, c.kvHeads,
                                           c.seq, c.dim, causal, c.scale),
                             q.data(), k.data(), v.data(), o.data(), dO.data(),
                             dq.data(), dk.data(), dv.data());
      ref::Vec wantQ, wantK, wantV, ov = o.values();
      ref::attentionGrad(q.values(), k.values(), v.values(), dO.values(),
                         c.batch, c.heads, c.kvHeads, c.seq, c.dim, causal,
                         scale, wantQ, wantK, wantV, &ov);
      expectClose(dq, wantQ, u(), 1e-4 * maxAbs(wantQ), what + " dq");
      expectClose(dk, wantK, u(), 1e-4 * maxAbs(wantK), what + " dk");
      expectClose(dv, wantV, u(), 1e-4 * maxAbs(wantV), what + " dv");
    }
  }
}

TEST_P(KernelTest, AttentionGradPathsAgree) {
  // Both paths give the same bits whatever BLAS kernel the CPU gets (ctest
  // runs this suite under OpenBLAS's Haswell and SkylakeX kernels too): the
  // products are our own chains.
  int64_t batch = 2, heads = 4, kvHeads = 2, dim = 16;
  expectGradPathsAgree(
      batch, heads, kvHeads, dim,
      [&](int64_t seq, const Buffer &q, const Buffer &k, const Buffer &v,
          Buffer &o, const Buffer &dO, Buffer &dq, Buffer &dk, Buffer &dv) {
        zrt_attention_forward(
            AttentionDesc(dtype(), batch, heads, kvHeads, seq, dim, 1, 0),
            q.data(), k.data(), v.data(), o.data());
        zrt_attention_backward(
            AttentionDesc(dtype(), batch, heads, kvHeads, seq, dim, 1, 0),
            q.data(), k.data(), v.data(), o.data(), dO.data(), dq.data(),
            dk.data(), dv.data());
      });
}

TEST_P(KernelTest, GroupedAttentionIsRepeatedHeads) {
  // Grouped-query attention is multi-head attention on k and v with each
  // head repeated over its group (Hugging Face's repeat_kv): o and dq have
  // the same bits either way, and dk, dv are the repeated heads' gradients
  // summed over the group. Two runs give the same bits.
  int64_t batch = 2, heads = 6, kvHeads = 2, group = heads / kvHeads, seq = 90,
          dim = 24;
  int64_t n = batch * heads * seq * dim, nkv = batch * kvHeads * seq * dim,
          headSize = seq * dim;
  Buffer q = randomBuffer(dtype(), rng, n, -2, 2),
         k = randomBuffer(dtype(), rng, nkv, -2, 2),
         v = randomBuffer(dtype(), rng, nkv),
         dO = randomBuffer(dtype(), rng, n);
  Buffer kr(dtype(), n), vr(dtype(), n);
  for (int64_t h = 0; h < batch * heads; ++h)
    for (int64_t e = 0; e < headSize; ++e) {
      kr.set(h * headSize + e, k.get((h / group) * headSize + e));
      vr.set(h * headSize + e, v.get((h / group) * headSize + e));
    }
  for (int causal = 0; causal < 2; ++causal) {
    std::string what = std::string("attention ") + dtypeName(dtype()) +
                       " causal " + std::to_string(causal);
    Buffer o(dtype(), n), or_(dtype(), n), dq(dtype(), n), dqr(dtype(), n),
        dk(dtype(), nkv), dv(dtype(), nkv), dkr(dtype(), n), dvr(dtype(), n);
    zrt_attention_forward(
        AttentionDesc(dtype(), batch, heads, kvHeads, seq, dim, causal, 0),
        q.data(), k.data(), v.data(), o.data());
    zrt_attention_forward(
        AttentionDesc(dtype(), batch, heads, heads, seq, dim, causal, 0),
        q.data(), kr.data(), vr.data(), or_.data());
    EXPECT_EQ(o.values(), or_.values()) << what << " o";
    zrt_attention_backward(
        AttentionDesc(dtype(), batch, heads, kvHeads, seq, dim, causal, 0),
        q.data(), k.data(), v.data(), o.data(), dO.data(), dq.data(), dk.data(),
        dv.data());
    zrt_attention_backward(
        AttentionDesc(dtype(), batch, heads, heads, seq, dim, causal, 0),
        q.data(), kr.data(), vr.data(), o.data(), dO.data(), dqr.data(),
        dkr.data(), dvr.data());
    EXPECT_EQ(dq.values(), dqr.values()) << what << " dq";
    ref::Vec sumK(static_cast<size_t>(nkv), 0.0),
        sumV(static_cast<size_t>(nkv), 0.0);
    std::vector<double> dkrv = dkr.values(), dvrv = dvr.values();
    for (int64_t h = 0; h < batch * heads; ++h)
      for (int64_t e = 0; e < headSize; ++e) {
        size_t to = size_t((h / group) * headSize + e),
               from = size_t(h * headSize + e);
        sumK[to] += dkrv[from];
        sumV[to] += dvrv[from];
      }
    // The sides round differently: each repeated head's gradient is rounded
    // to the dtype before the sum (u per term), the grouped one once (u of
    // the sum), and their fp32 sums run in different orders.
    double tolK = group * (u() + 1e-5) * maxAbs(dkrv),
           tolV = group * (u() + 1e-5) * maxAbs(dvrv);
    expectClose(dk, sumK, u(), tolK, what + " dk");
    expectClose(dv, sumV, u(), tolV, what + " dv");
    Buffer dq2(dtype(), n), dk2(dtype(), nkv), dv2(dtype(), nkv);
    zrt_attention_backward(
        AttentionDesc(dtype(), batch, heads, kvHeads, seq, dim, causal, 0),
        q.data(), k.data(), v.data(), o.data(), dO.data(), dq2.data(),
        dk2.data(), dv2.data());
    EXPECT_EQ(dq2.values(), dq.values()) << what << " dq rerun";
    EXPECT_EQ(dk2.values(), dk.values()) << what << " dk rerun";
    EXPECT_EQ(dv2.values(), dv.values()) << what << " dv rerun";
  }
}

TEST_P(KernelTest, AttentionWindowAndSoftcap) {
  struct Case {
    int64_t batch, heads, kvHeads, seq, dim, window;
    double softcap;
  };
  // Windows shorter than a block, across blocks (whole key blocks skipped)
  // and at least the sequence (the causal mask); soft-capping alone and
  // with a window; grouped-query; seq 500 takes the backward's three
  // passes, the others its fused pass (soft-capping always the three).
  for (Case c : {Case{2, 3, 3, 37, 16, 5, 0}, Case{1, 4, 2, 100, 16, 33, 0},
                 Case{1, 2, 2, 70, 8, 70, 0}, Case{2, 2, 1, 29, 16, 0, 3.0},
                 Case{1, 4, 2, 67, 16, 9, 2.0}, Case{1, 2, 1, 500, 16, 70, 0},
                 Case{1, 2, 2, 500, 8, 40, 5.0}}) {
    int64_t n = c.batch * c.heads * c.seq * c.dim,
            nkv = c.batch * c.kvHeads * c.seq * c.dim;
    double scale = 1.0 / std::sqrt(double(c.dim));
    Buffer q = randomBuffer(dtype(), rng, n, -2, 2),
           k = randomBuffer(dtype(), rng, nkv, -2, 2),
           v = randomBuffer(dtype(), rng, nkv),
           dO = randomBuffer(dtype(), rng, n);
    Buffer o(dtype(), n), dq(dtype(), n), dk(dtype(), nkv), dv(dtype(), nkv);
    zrt_attention_forward(AttentionDesc(dtype(), c.batch, c.heads, c.kvHeads,
                                        c.seq, c.dim, 1, 0, c.window, c.softcap,
                                        nullptr),
                          q.data(), k.data(), v.data(), o.data());
    std::string what = std::string("attention ") + dtypeName(dtype()) +
                       " seq " + std::to_string(c.seq) + " window " +
                       std::to_string(c.window) + " softcap " +
                       std::to_string(c.softcap);
    expectClose(o,
                ref::attention(q.values(), k.values(), v.values(), c.batch,
                               c.heads, c.kvHeads, c.seq, c.dim, true, scale,
                               c.window, c.softcap),
                u(), 1e-5, what);
    zrt_attention_backward(AttentionDesc(dtype(), c.batch, c.heads, c.kvHeads,
                                         c.seq, c.dim, 1, 0, c.window,
                                         c.softcap, nullptr),
                           q.data(), k.data(), v.data(), o.data(), dO.data(),
                           dq.data(), dk.data(), dv.data());
    ref::Vec wantQ, wantK, wantV, ov = o.values();
    ref::attentionGrad(q.values(), k.values(), v.values(), dO.values(), c.batch,
                       c.heads, c.kvHeads, c.seq, c.dim, true, scale, wantQ,
                       wantK, wantV, &ov, c.window, c.softcap);
    expectClose(dq, wantQ, u(), 1e-4 * maxAbs(wantQ), what + " dq");
    expectClose(dk, wantK, u(), 1e-4 * maxAbs(wantK), what + " dk");
    expectClose(dv, wantV, u(), 1e-4 * maxAbs(wantV), what + " dv");
    // A window of at least seq and no softcap is zrt_attention, bit for bit.
    if (c.window == 0 || c.window >= c.seq) {
      if (c.softcap > 0)
        continue;
      Buffer o2(dtype(), n), dq2(dtype(), n), dk2(dtype(), nkv),
          dv2(dtype(), nkv);
      zrt_attention_forward(AttentionDesc(dtype(), c.batch, c.heads, c.kvHeads,
                                          c.seq, c.dim, 1, 0),
                            q.data(), k.data(), v.data(), o2.data());
      zrt_attention_backward(AttentionDesc(dtype(), c.batch, c.heads, c.kvHeads,
                                           c.seq, c.dim, 1, 0),
                             q.data(), k.data(), v.data(), o.data(), dO.data(),
                             dq2.data(), dk2.data(), dv2.data());
      EXPECT_EQ(o2.values(), o.values()) << what << " o";
      EXPECT_EQ(dq2.values(), dq.values()) << what << " dq";
      EXPECT_EQ(dk2.values(), dk.values()) << what << " dk";
      EXPECT_EQ(dv2.values(), dv.values()) << what << " dv";
    }
  }
}

TEST_P(KernelTest, AttentionWindowGradPathsAgree) {
  // As AttentionGradPathsAgree, with a window that skips whole key blocks,
  // without and with ALiBi.
  int64_t batch = 1, heads = 2, kvHeads = 1, dim = 16, window = 40;
  const float slopes[] = {0.25f, 0.0625f};
  for (const float *alibi : {static_cast<const float *>(nullptr), slopes})
    expectGradPathsAgree(
        batch, heads, kvHeads, dim,
        [&](int64_t seq, const Buffer &q, const Buffer &k, const Buffer &v,
            Buffer &o, const Buffer &dO, Buffer &dq, Buffer &dk, Buffer &dv) {
          zrt_attention_forward(AttentionDesc(dtype(), batch, heads, kvHeads,
                                              seq, dim, 1, 0, window, 0, alibi),
                                q.data(), k.data(), v.data(), o.data());
          zrt_attention_backward(AttentionDesc(dtype(), batch, heads, kvHeads,
                                               seq, dim, 1, 0, window, 0,
                                               alibi),
                                 q.data(), k.data(), v.data(), o.data(),
                                 dO.data(), dq.data(), dk.data(), dv.data());
        });
}

TEST_P(KernelTest, AttentionAlibi) {
  struct Case {
    int64_t batch, heads, kvHeads, seq, dim;
    bool causal;
    int64_t window;
    double softcap;
  };
  // Causal and not; with a window and with soft-capping; grouped-query;
  // three heads; seq 300 takes the backward's three passes, the others its
  // fused pass.
  for (Case c :
       {Case{2, 3, 3, 37, 16, true, 0, 0}, Case{1, 4, 2, 70, 8, false, 0, 0},
        Case{1, 4, 1, 100, 16, true, 33, 0},
        Case{2, 2, 2, 29, 16, true, 0, 3.0}, Case{1, 2, 1, 300, 16, true, 0, 0},
        Case{1, 2, 2, 300, 8, false, 0, 0}}) {
    std::vector<float> slopes;
    for (int64_t h = 0; h < c.heads; ++h)
      slopes.push_back(std::ldexp(h % 2 ? 1.5f : 1.0f, -int(h + 1)));
    int64_t n = c.batch * c.heads * c.seq * c.dim,
            nkv = c.batch * c.kvHeads * c.seq * c.dim;
    double scale = 1.0 / std::sqrt(double(c.dim));
    Buffer q = randomBuffer(dtype(), rng, n, -2, 2),
           k = randomBuffer(dtype(), rng, nkv, -2, 2),
           v = randomBuffer(dtype(), rng, nkv),
           dO = randomBuffer(dtype(), rng, n);
    Buffer o(dtype(), n), dq(dtype(), n), dk(dtype(), nkv), dv(dtype(), nkv);
    zrt_attention_forward(AttentionDesc(dtype(), c.batch, c.heads, c.kvHeads,
                                        c.seq, c.dim, c.causal, 0, c.window,
                                        c.softcap, slopes.data()),
                          q.data(), k.data(), v.data(), o.data());
    std::string what = std::string("alibi ") + dtypeName(dtype()) + " seq " +
                       std::to_string(c.seq) + " heads " +
                       std::to_string(c.heads) + " causal " +
                       std::to_string(c.causal);
    // Tolerances as AttentionWindowAndSoftcap's: the kernel's fp32 sums and
    // exponentials against the reference's doubles.
    expectClose(o,
                ref::attention(q.values(), k.values(), v.values(), c.batch,
                               c.heads, c.kvHeads, c.seq, c.dim, c.causal,
                               scale, c.window, c.softcap, slopes.data()),
                u(), 1e-5, what);
    zrt_attention_backward(AttentionDesc(dtype(), c.batch, c.heads, c.kvHeads,
                                         c.seq, c.dim, c.causal, 0, c.window,
                                         c.softcap, slopes.data()),
                           q.data(), k.data(), v.data(), o.data(), dO.data(),
                           dq.data(), dk.data(), dv.data());
    ref::Vec wantQ, wantK, wantV, ov = o.values();
    ref::attentionGrad(q.values(), k.values(), v.values(), dO.values(), c.batch,
                       c.heads, c.kvHeads, c.seq, c.dim, c.causal, scale, wantQ,
                       wantK, wantV, &ov, c.window, c.softcap, slopes.data());
    expectClose(dq, wantQ, u(), 1e-4 * maxAbs(wantQ), what + " dq");
    expectClose(dk, wantK, u(), 1e-4 * maxAbs(wantK), what + " dk");
    expectClose(dv, wantV, u(), 1e-4 * maxAbs(wantV), what + " dv");
  }
}

TEST(AttentionDeathTest, WindowAndSoftcapAreChecked) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(zrt_attention_forward(
                   AttentionDesc(ZRT_F32, 1, 2, 2, 8, 16, 0, 0, 4, 0, nullptr),
                   nullptr, nullptr, nullptr, nullptr),
               "zrt_attention_forward: a window requires causal");
  EXPECT_DEATH(zrt_attention_backward(
                   AttentionDesc(ZRT_F32, 1, 2, 2, 8, 16, 1, 0, -1, 0, nullptr),
                   nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                   nullptr, nullptr),
               "zrt_attention_backward: negative window -1");
  EXPECT_DEATH(zrt_attention_forward(AttentionDesc(ZRT_F32, 1, 2, 2, 8, 16, 1,
                                                   0, 0, -2.0, nullptr),
                                     nullptr, nullptr, nullptr, nullptr),
               "zrt_attention_forward: softcap -2 is not a positive number");
}

TEST(AttentionDeathTest, KvHeadsMustDivideHeads) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      zrt_attention_forward(AttentionDesc(ZRT_F32, 1, 4, 3, 8, 16, 1, 0),
                            nullptr, nullptr, nullptr, nullptr),
      "zrt_attention_forward: kv_heads 3 does not divide heads 4");
  EXPECT_DEATH(
      zrt_attention_backward(AttentionDesc(ZRT_BF16, 2, 2, 4, 8, 16, 0, 0),
                             nullptr, nullptr, nullptr, nullptr, nullptr,
                             nullptr, nullptr, nullptr),
      "zrt_attention_backward: kv_heads 4 does not divide heads 2");
  EXPECT_DEATH(
      zrt_attention_forward(AttentionDesc(ZRT_F32, 1, 4, 0, 8, 16, 1, 0),
                            nullptr, nullptr, nullptr, nullptr),
      "zrt_attention_forward: kv_heads 0 does not divide heads 4");
}

TEST_P(KernelTest, EmbeddingAndGrad) {
  int64_t vocab = 50, dim = 1030, numIds = 40;
  Buffer table = randomBuffer(dtype(), rng, vocab * dim);
  Buffer dy = randomBuffer(dtype(), rng, numIds * dim);
  std::vector<int64_t> ids(numIds);
  std::uniform_int_distribution<int64_t> pick(0, 9); // many repeats
  for (int64_t &id : ids)
    id = pick(rng) * 5;
  std::vector<int32_t> ids32(ids.begin(), ids.end());
  for (int32_t idType : {ZRT_I32, ZRT_I64}) {
    const void *idp = idType == ZRT_I32
                          ? static_cast<const void *>(ids32.data())
                          : ids.data();
    Buffer out(dtype(), numIds * dim), dtable(dtype(), vocab * dim);
    zrt_embedding(dtype(), table.data(), idType, idp, out.data(), numIds, vocab,
                  dim);
    expectClose(out, ref::embedding(table.values(), ids, dim), 0, 0,
                "embedding");
    dtable.set(1, 123.0); // must be overwritten with 0
    zrt_embedding_grad(dtype(), dy.data(), idType, idp, dtable.data(), numIds,
                       vocab, dim, -1);
    expectClose(dtable, ref::embeddingGrad(dy.values(), ids, vocab, dim), u(),
                numIds * kF32, "embedding_grad");
    // Row 10, which ids select, as the padding row: it stays zero (over the
    // 123 written before), the others are unchanged.
    ASSERT_NE(std::count(ids.begin(), ids.end(), 10), 0);
    dtable.set(10 * dim, 123.0);
    zrt_embedding_grad(dtype(), dy.data(), idType, idp, dtable.data(), numIds,
                       vocab, dim, 10);
    ref::Vec want = ref::embeddingGrad(dy.values(), ids, vocab, dim, 10);
    EXPECT_TRUE(std::all_of(want.begin() + 10 * dim, want.begin() + 11 * dim,
                            [](double x) { return x == 0; }));
    expectClose(dtable, want, u(), numIds * kF32, "embedding_grad padding_idx");
  }
}

TEST_P(KernelTest, SoftmaxCrossEntropyAndGrad) {
  for (auto [rows, classes] :
       {std::pair<int64_t, int64_t>{7, 1500}, {100, 10}}) {
    Buffer logits = randomBuffer(dtype(), rng, rows * classes, -5, 5);
    std::vector<int64_t> labels(rows);
    std::uniform_int_distribution<int64_t> pick(0, classes - 1);
    for (int64_t &l : labels)
      l = pick(rng);
    std::vector<int32_t> labels32(labels.begin(), labels.end());
    for (int32_t labelType : {ZRT_I32, ZRT_I64}) {
      const void *lp = labelType == ZRT_I32
                           ? static_cast<const void *>(labels32.data())
                           : labels.data();
      float loss = 0;
      zrt_softmax_cross_entropy(dtype(), logits.data(), labelType, lp, &loss,
                                rows, classes, classes, 0, 0);
      double want = ref::crossEntropy(logits.values(), labels, classes);
      EXPECT_NEAR(loss, want, 1e-5 * std::fabs(want)) << dtypeName(dtype());
      float dloss = 1.7f;
      Buffer dlogits(dtype(), rows * classes);
      zrt_softmax_cross_entropy_grad(dtype(), logits.data(), labelType, lp,
                                     &dloss, dlogits.data(), rows, classes,
                                     classes, 0, 0);
      ref::Vec wantGrad =
          ref::crossEntropyGrad(logits.values(), labels, classes, dloss);
      expectClose(dlogits, wantGrad, u() + 1e-5, 1e-6 * maxAbs(wantGrad),
                  "softmax_cross_entropy_grad");
    }
  }
}

// Rows labelled ignore_index (-100, or a class) leave the loss and the
// count of its mean; their gradient rows are 0. With every row ignored the
// loss and the gradient are 0, not NaN.
TEST_P(KernelTest, SoftmaxCrossEntropyIgnoreIndex) {
  for (auto [rows, classes, ignoreIndex] :
       {std::tuple<int64_t, int64_t, int64_t>{7, 1500, -100},
        {100, 10, -100},
        {100, 10, 3}}) {
    Buffer logits = randomBuffer(dtype(), rng, rows * classes, -5, 5);
    std::vector<int64_t> labels(rows);
    std::uniform_int_distribution<int64_t> pick(0, classes - 1);
    for (int64_t &l : labels)
      l = pick(rng);
    // Every third row, and the first, ignored.
    for (int64_t r = 0; r < rows; r += 3)
      labels[r] = ignoreIndex;
    std::vector<int32_t> labels32(labels.begin(), labels.end());
    for (int32_t labelType : {ZRT_I32, ZRT_I64}) {
      const void *lp = labelType == ZRT_I32
                           ? static_cast<const void *>(labels32.data())
                           : labels.data();
      float loss = 0;
      zrt_softmax_cross_entropy(dtype(), logits.data(), labelType, lp, &loss,
                                rows, classes, classes, 1, ignoreIndex);
      double want =
          ref::crossEntropy(logits.values(), labels, classes, ignoreIndex);
      EXPECT_NEAR(loss, want, 1e-5 * std::fabs(want)) << dtypeName(dtype());
      float dloss = 1.7f;
      Buffer dlogits(dtype(), rows * classes);
      for (int64_t i = 0; i < rows * classes; ++i)
        dlogits.set(i, 123.0); // must be overwritten
      zrt_softmax_cross_entropy_grad(dtype(), logits.data(), labelType, lp,
                                     &dloss, dlogits.data(), rows, classes,
                                     classes, 1, ignoreIndex);
      ref::Vec wantGrad = ref::crossEntropyGrad(logits.values(), labels,
                                                classes, dloss, ignoreIndex);
      expectClose(dlogits, wantGrad, u() + 1e-5, 1e-6 * maxAbs(wantGrad),
                  "softmax_cross_entropy_grad ignore_index");
    }
  }
  // No row counts.
  int64_t rows = 4, classes = 10;
  Buffer logits = randomBuffer(dtype(), rng, rows * classes, -5, 5);
  std::vector<int64_t> labels(rows, -100);
  float loss = 1.0f, dloss = 1.0f;
  zrt_softmax_cross_entropy(dtype(), logits.data(), ZRT_I64, labels.data(),
                            &loss, rows, classes, classes, 1, -100);
  EXPECT_EQ(loss, 0.0f);
  Buffer dlogits(dtype(), rows * classes);
  for (int64_t i = 0; i < rows * classes; ++i)
    dlogits.set(i, 123.0);
  zrt_softmax_cross_entropy_grad(dtype(), logits.data(), ZRT_I64, labels.data(),
                                 &dloss, dlogits.data(), rows, classes, classes,
                                 1, -100);
  for (int64_t i = 0; i < rows * classes; ++i)
    EXPECT_EQ(dlogits.get(i), 0.0) << i;
}

// The chunked output projection and loss: for chunks that divide the rows,
// that do not, of one row and of more than all rows, the loss and both
// gradients are those of zrt_matmul then the unchunked loss (f32; the
// loss to rounding of the sums, the gradients to the rounding of BLAS's
// blocking of a chunk's products and of dw's sum over chunks), with
// ignored rows, and against the float64 reference.
TEST(LinearCrossEntropy, MatchesMatmulThenLoss) {
  std::mt19937 rng(7);
  int64_t rows = 23, hidden = 16, vocab = 300;
  Buffer x = randomBuffer(ZRT_F32, rng, rows * hidden, -1, 1);
  Buffer w = randomBuffer(ZRT_F32, rng, vocab * hidden, -1, 1);
  std::vector<int64_t> labels(rows);
  std::uniform_int_distribution<int64_t> pick(0, vocab - 1);
  for (int64_t &l : labels)
    l = pick(rng);
  for (int64_t r = 0; r < rows; r += 4)
    labels[r] = -100;
  for (int32_t ignore : {0, 1}) {
    std::vector<int64_t> used = labels;
    if (!ignore)
      for (int64_t &l : used)
        l = l < 0 ? 5 : l;
    // Unchunked: the logits whole, then the loss and its gradient.
    Buffer logits(ZRT_F32, rows * vocab), dlogits(ZRT_F32, rows * vocab);
    zrt_matmul(ZRT_F32, x.data(), w.data(), logits.data(), 1, rows, vocab,
               hidden, 0, 1, 0, hidden);
    float want = 0, dloss = 1.3f;
    zrt_softmax_cross_entropy(ZRT_F32, logits.data(), ZRT_I64, used.data(),
                              &want, rows, vocab, vocab, ignore, -100);
    zrt_softmax_cross_entropy_grad(ZRT_F32, logits.data(), ZRT_I64, used.data(),
                                   &dloss, dlogits.data(), rows, vocab, vocab,
                                   ignore, -100);
    Buffer wantDx(ZRT_F32, rows * hidden), wantDw(ZRT_F32, vocab * hidden);
    zrt_matmul(ZRT_F32, dlogits.data(), w.data(), wantDx.data(), 1, rows,
               hidden, vocab, 0, 0, 0, vocab);
    zrt_matmul(ZRT_F32, dlogits.data(), x.data(), wantDw.data(), 1, vocab,
               hidden, rows, 1, 0, 0, rows);
    std::optional<int64_t> ignored;
    if (ignore)
      ignored = -100;
    double ref =
        ref::crossEntropy(ref::matmul(x.values(), w.values(), 1, rows, vocab,
                                      hidden, false, true, false),
                          used, vocab, ignored);
    EXPECT_NEAR(want, ref, 1e-5 * std::fabs(ref));
    for (int64_t chunk : {int64_t(1), int64_t(4), int64_t(7), rows, rows + 5}) {
      float loss = 0;
      zrt_linear_cross_entropy(ZRT_F32, x.data(), w.data(), ZRT_I64,
                               used.data(), &loss, rows, hidden, vocab, chunk,
                               ignore, -100);
      EXPECT_NEAR(loss, want, 1e-6 * std::fabs(want))
          << "chunk " << chunk << " ignore " << ignore;
      Buffer dx(ZRT_F32, rows * hidden), dw(ZRT_F32, vocab * hidden);
      for (int64_t i = 0; i < vocab * hidden; ++i)
        dw.set(i, 123.0); // must be overwritten, not added to
      zrt_linear_cross_entropy_grad(ZRT_F32, x.data(), w.data(), ZRT_I64,
                                    used.data(), &dloss, dx.data(), dw.data(),
                                    rows, hidden, vocab, chunk, ignore, -100);
      // A chunk's product may be blocked differently by BLAS: rounding of
      // sums over the vocabulary.
      expectClose(dx, wantDx.values(), 1e-5, 1e-6 * maxAbs(wantDx.values()),
                  "linear_cross_entropy_grad dx");
      expectClose(dw, wantDw.values(), 1e-5, 1e-6 * maxAbs(wantDw.values()),
                  "linear_cross_entropy_grad dw");
    }
  }
}

// The 16-bit chunked loss computes as the unchunked 16-bit program:
// zrt_matmul's rounded logits, the loss in fp32 from them, the logits'
// gradient rounded to 16 bits, dx the 16-bit matmul of it and dw one fp32
// sum over all rows rounded once. The loss and dx agree to the rounding of
// BLAS's blocking of a chunk's products (which can move a 16-bit logit or
// dx element by one unit in the last place); dw to its fp32 sum's order
// over chunks, then one rounding: a unit in the last place at most.
TEST(LinearCrossEntropy, SixteenBitMatchesMatmulThenLoss) {
  std::mt19937 rng(17);
  int64_t rows = 23, hidden = 16, vocab = 300;
  for (int32_t dtype : {ZRT_BF16, ZRT_F16}) {
    double ulp = dtype == ZRT_BF16 ? std::ldexp(1.0, -7) : std::ldexp(1.0, -10);
    Buffer x = randomBuffer(dtype, rng, rows * hidden, -1, 1);
    Buffer w = randomBuffer(dtype, rng, vocab * hidden, -1, 1);
    std::vector<int64_t> labels(rows);
    std::uniform_int_distribution<int64_t> pick(0, vocab - 1);
    for (int64_t &l : labels)
      l = pick(rng);
    for (int64_t r = 0; r < rows; r += 4)
      labels[r] = -100;
    Buffer logits(dtype, rows * vocab), dlogits(dtype, rows * vocab);
    zrt_matmul(dtype, x.data(), w.data(), logits.data(), 1, rows, vocab,
               hidden, 0, 1, 0, hidden);
    float want = 0, dloss = 1.3f;
    zrt_softmax_cross_entropy(dtype, logits.data(), ZRT_I64, labels.data(),
                              &want, rows, vocab, vocab, 1, -100);
    zrt_softmax_cross_entropy_grad(dtype, logits.data(), ZRT_I64,
                                   labels.data(), &dloss, dlogits.data(), rows,
                                   vocab, vocab, 1, -100);
    Buffer wantDx(dtype, rows * hidden), wantDw(dtype, vocab * hidden);
    zrt_matmul(dtype, dlogits.data(), w.data(), wantDx.data(), 1, rows, hidden,
               vocab, 0, 0, 0, vocab);
    zrt_matmul(dtype, dlogits.data(), x.data(), wantDw.data(), 1, vocab,
               hidden, rows, 1, 0, 0, rows);
    for (int64_t chunk : {int64_t(1), int64_t(4), int64_t(7), rows, rows + 5}) {
      std::string what = "dtype " + std::to_string(dtype) + " chunk " +
                         std::to_string(chunk);
      float loss = 0;
      zrt_linear_cross_entropy(dtype, x.data(), w.data(), ZRT_I64,
                               labels.data(), &loss, rows, hidden, vocab, chunk,
                               1, -100);
      EXPECT_NEAR(loss, want, 1e-5 * std::fabs(want)) << what;
      Buffer dx(dtype, rows * hidden), dw(dtype, vocab * hidden);
      for (int64_t i = 0; i < vocab * hidden; ++i)
        dw.set(i, 123.0); // must be overwritten, not added to
      zrt_linear_cross_entropy_grad(dtype, x.data(), w.data(), ZRT_I64,
                                    labels.data(), &dloss, dx.data(),
                                    dw.data(), rows, hidden, vocab, chunk, 1,
                                    -100);
      expectClose(dx, wantDx.values(), ulp, 1e-3 * maxAbs(wantDx.values()),
                  what + " dx");
      expectClose(dw, wantDw.values(), ulp, 1e-3 * maxAbs(wantDw.values()),
                  what + " dw");
    }
  }
}

// The scratch is what zero_rt/scratch.h plans: one chunk of fp32 logits at
// f32; at 16 bits one chunk of 16-bit logits and a 16-bit matmul's panels,
// and for the gradient also the chunk's gradient and rows in fp32 and the
// fp32 sum of dw.
TEST(LinearCrossEntropy, ScratchIsPlanned) {
  std::mt19937 rng(8);
  int64_t rows = 50, hidden = 8, vocab = 1000;
  std::vector<int32_t> labels(rows, 3);
  float loss = 0, dloss = 1.0f;
  for (int32_t dtype : {ZRT_F32, ZRT_BF16}) {
    Buffer x = randomBuffer(dtype, rng, rows * hidden, -1, 1);
    Buffer w = randomBuffer(dtype, rng, vocab * hidden, -1, 1);
    Buffer dx(dtype, rows * hidden), dw(dtype, vocab * hidden);
    for (int64_t chunk : {int64_t(16), int64_t(64)}) {
      int64_t n = std::min(chunk, rows);
      int64_t fwd = zrt_scratch_linear_cross_entropy(dtype, rows, hidden,
                                                     vocab, chunk, 0);
      int64_t bwd = zrt_scratch_linear_cross_entropy(dtype, rows, hidden,
                                                     vocab, chunk, 1);
      if (dtype == ZRT_F32) {
        EXPECT_EQ(fwd, n * vocab * 4);
        EXPECT_EQ(bwd, n * vocab * 4);
      } else {
        EXPECT_EQ(fwd, n * vocab * 2 + zrt_scratch_matmul(dtype, 1, n, vocab,
                                                          hidden, 0, 0));
        EXPECT_GT(bwd, n * vocab * 6 + vocab * hidden * 4);
      }
      zrt_memory_reset_peak();
      zrt_linear_cross_entropy(dtype, x.data(), w.data(), ZRT_I32,
                               labels.data(), &loss, rows, hidden, vocab, chunk,
                               0, 0);
      EXPECT_EQ(zrt_scratch_peak_bytes(), fwd);
      zrt_memory_reset_peak();
      zrt_linear_cross_entropy_grad(dtype, x.data(), w.data(), ZRT_I32,
                                    labels.data(), &dloss, dx.data(),
                                    dw.data(), rows, hidden, vocab, chunk, 0,
                                    0);
      EXPECT_EQ(zrt_scratch_peak_bytes(), bwd);
      EXPECT_EQ(zrt_scratch_bytes_in_use(), 0);
    }
  }
}

// The tiled SwiGLU MLP: for tile counts that divide the rows, that do not,
// of one tile, of one row a tile and of more tiles than rows, the output
// and all four gradients are those of the untiled kernels (zrt_matmul,
// zrt_swiglu, their gradients; f32, the weight gradients to the order of
// their sums over tiles).
TEST(TiledMlp, MatchesUntiledKernels) {
  std::mt19937 rng(9);
  int64_t rows = 23, hidden = 12, inter = 20;
  Buffer x = randomBuffer(ZRT_F32, rng, rows * hidden, -1, 1);
  Buffer wg = randomBuffer(ZRT_F32, rng, inter * hidden, -1, 1);
  Buffer wu = randomBuffer(ZRT_F32, rng, inter * hidden, -1, 1);
  Buffer wd = randomBuffer(ZRT_F32, rng, hidden * inter, -1, 1);
  Buffer dy = randomBuffer(ZRT_F32, rng, rows * hidden, -1, 1);
  // Untiled: the Hugging Face import's ops and their derivatives.
  Buffer g(ZRT_F32, rows * inter), u(ZRT_F32, rows * inter),
      a(ZRT_F32, rows * inter), y(ZRT_F32, rows * hidden);
  zrt_matmul(ZRT_F32, x.data(), wg.data(), g.data(), 1, rows, inter, hidden, 0,
             1, 0, hidden);
  zrt_matmul(ZRT_F32, x.data(), wu.data(), u.data(), 1, rows, inter, hidden, 0,
             1, 0, hidden);
  zrt_swiglu(ZRT_F32, g.data(), u.data(), a.data(), rows * inter);
  zrt_matmul(ZRT_F32, a.data(), wd.data(), y.data(), 1, rows, hidden, inter, 0,
             1, 0, inter);
  Buffer da(ZRT_F32, rows * inter), dg(ZRT_F32, rows * inter),
      du(ZRT_F32, rows * inter), wantDwd(ZRT_F32, hidden * inter),
      wantDwg(ZRT_F32, inter * hidden), wantDwu(ZRT_F32, inter * hidden),
      dx1(ZRT_F32, rows * hidden), dx2(ZRT_F32, rows * hidden);
  zrt_matmul(ZRT_F32, dy.data(), wd.data(), da.data(), 1, rows, inter, hidden,
             0, 0, 0, hidden);
  zrt_matmul(ZRT_F32, dy.data(), a.data(), wantDwd.data(), 1, hidden, inter,
             rows, 1, 0, 0, rows);
  zrt_swiglu_grad(ZRT_F32, g.data(), u.data(), da.data(), dg.data(), du.data(),
                  rows * inter);
  zrt_matmul(ZRT_F32, dg.data(), x.data(), wantDwg.data(), 1, inter, hidden,
             rows, 1, 0, 0, rows);
  zrt_matmul(ZRT_F32, du.data(), x.data(), wantDwu.data(), 1, inter, hidden,
             rows, 1, 0, 0, rows);
  zrt_matmul(ZRT_F32, dg.data(), wg.data(), dx1.data(), 1, rows, hidden, inter,
             0, 0, 0, inter);
  zrt_matmul(ZRT_F32, du.data(), wu.data(), dx2.data(), 1, rows, hidden, inter,
             0, 0, 0, inter);
  std::vector<double> wantDx = dx1.values();
  for (size_t i = 0; i < wantDx.size(); ++i)
    wantDx[i] += dx2.values()[i];
  for (int64_t tiles : {int64_t(1), int64_t(2), int64_t(5), rows, rows + 4}) {
    std::string what = "tiles " + std::to_string(tiles);
    Buffer got(ZRT_F32, rows * hidden);
    zrt_tiled_mlp(ZRT_F32, x.data(), wg.data(), wu.data(), wd.data(),
                  got.data(), rows, hidden, inter, tiles);
    expectClose(got, y.values(), 1e-6, 1e-7 * maxAbs(y.values()),
                "tiled_mlp y " + what);
    Buffer dx(ZRT_F32, rows * hidden), dwg(ZRT_F32, inter * hidden),
        dwu(ZRT_F32, inter * hidden), dwd(ZRT_F32, hidden * inter);
    for (Buffer *b : {&dwg, &dwu, &dwd})
      for (int64_t i = 0; i < inter * hidden; ++i)
        b->set(i, 123.0); // must be overwritten, not added to
    zrt_tiled_mlp_grad(ZRT_F32, x.data(), wg.data(), wu.data(), wd.data(),
                       dy.data(), dx.data(), dwg.data(), dwu.data(), dwd.data(),
                       rows, hidden, inter, tiles);
    expectClose(dx, wantDx, 1e-5, 1e-6 * maxAbs(wantDx), "dx " + what);
    expectClose(dwg, wantDwg.values(), 1e-5, 1e-6 * maxAbs(wantDwg.values()),
                "dwg " + what);
    expectClose(dwu, wantDwu.values(), 1e-5, 1e-6 * maxAbs(wantDwu.values()),
                "dwu " + what);
    expectClose(dwd, wantDwd.values(), 1e-5, 1e-6 * maxAbs(wantDwd.values()),
                "dwd " + what);
  }
}

// The only scratch is one tile's intermediates, as planned: two [tile,
// inter] fp32 blocks forward, three backward.
TEST(TiledMlp, ScratchIsOneTile) {
  std::mt19937 rng(10);
  int64_t rows = 50, hidden = 8, inter = 40;
  Buffer x = randomBuffer(ZRT_F32, rng, rows * hidden, -1, 1);
  Buffer w = randomBuffer(ZRT_F32, rng, inter * hidden, -1, 1);
  Buffer y(ZRT_F32, rows * hidden), dx(ZRT_F32, rows * hidden),
      dwg(ZRT_F32, inter * hidden), dwu(ZRT_F32, inter * hidden),
      dwd(ZRT_F32, inter * hidden);
  for (int64_t tiles : {int64_t(3), int64_t(7)}) {
    int64_t tile = (rows + tiles - 1) / tiles;
    int64_t want = zrt_scratch_tiled_mlp(rows, inter, tiles);
    EXPECT_EQ(want, 2 * tile * inter * 4);
    zrt_memory_reset_peak();
    zrt_tiled_mlp(ZRT_F32, x.data(), w.data(), w.data(), w.data(), y.data(),
                  rows, hidden, inter, tiles);
    EXPECT_EQ(zrt_scratch_peak_bytes(), want);
    int64_t wantGrad = zrt_scratch_tiled_mlp_grad(rows, inter, tiles);
    EXPECT_EQ(wantGrad, 3 * tile * inter * 4);
    zrt_memory_reset_peak();
    zrt_tiled_mlp_grad(ZRT_F32, x.data(), w.data(), w.data(), w.data(),
                       x.data(), dx.data(), dwg.data(), dwu.data(), dwd.data(),
                       rows, hidden, inter, tiles);
    EXPECT_EQ(zrt_scratch_peak_bytes(), wantGrad);
    EXPECT_EQ(zrt_scratch_bytes_in_use(), 0);
  }
}

// Logits padded to `cols` columns give the loss and gradient of the first
// `classes` bit for bit, whatever the padding holds; its gradient is 0.
TEST_P(KernelTest, SoftmaxCrossEntropyPadded) {
  for (auto [rows, classes, cols] :
       {std::tuple<int64_t, int64_t, int64_t>{7, 1500, 1536}, {100, 10, 128}}) {
    Buffer logits = randomBuffer(dtype(), rng, rows * classes, -5, 5);
    Buffer padded(dtype(), rows * cols);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        padded.set(r * cols + c,
                   c < classes ? logits.get(r * classes + c) : 30.0 + c);
    std::vector<int64_t> labels(rows);
    std::uniform_int_distribution<int64_t> pick(0, classes - 1);
    for (int64_t &l : labels)
      l = pick(rng);
    float loss = 0, paddedLoss = 1;
    zrt_softmax_cross_entropy(dtype(), logits.data(), ZRT_I64, labels.data(),
                              &loss, rows, classes, classes, 0, 0);
    zrt_softmax_cross_entropy(dtype(), padded.data(), ZRT_I64, labels.data(),
                              &paddedLoss, rows, classes, cols, 0, 0);
    EXPECT_EQ(std::memcmp(&loss, &paddedLoss, sizeof(float)), 0)
        << loss << " vs " << paddedLoss;
    float dloss = 1.7f;
    Buffer grad(dtype(), rows * classes), paddedGrad(dtype(), rows * cols);
    for (int64_t i = 0; i < rows * cols; ++i)
      paddedGrad.set(i, 123.0); // must be overwritten
    zrt_softmax_cross_entropy_grad(dtype(), logits.data(), ZRT_I64,
                                   labels.data(), &dloss, grad.data(), rows,
                                   classes, classes, 0, 0);
    zrt_softmax_cross_entropy_grad(dtype(), padded.data(), ZRT_I64,
                                   labels.data(), &dloss, paddedGrad.data(),
                                   rows, classes, cols, 0, 0);
    int64_t mismatches = 0;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        double got = paddedGrad.get(r * cols + c);
        double want = c < classes ? grad.get(r * classes + c) : 0.0;
        mismatches += std::memcmp(&got, &want, sizeof(double)) != 0;
      }
    EXPECT_EQ(mismatches, 0) << dtypeName(dtype());
  }
}

TEST_P(KernelTest, ReduceSum) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{100, 700},
                            {1, 5},
                            {5000, 3},
                            {2048, 300}}) {
    Buffer in = randomBuffer(dtype(), rng, rows * cols);
    Buffer out(dtype(), cols);
    zrt_reduce_sum(dtype(), in.data(), out.data(), rows, cols);
    expectClose(out, ref::reduceSum(in.values(), rows, cols), u(),
                rows * kF32 * 4, "reduce_sum");
  }
}

TEST_P(KernelTest, Transpose) {
  struct Case {
    std::vector<int64_t> shape, perm;
  };
  for (const Case &c :
       {Case{{2, 3, 4, 5}, {0, 2, 1, 3}}, Case{{37, 45}, {1, 0}},
        Case{{3, 4, 5}, {2, 1, 0}}, Case{{2, 1, 3}, {1, 0, 2}},
        Case{{4, 6}, {0, 1}}, Case{{4, 64, 12, 16}, {0, 2, 1, 3}},
        Case{{5, 1, 7, 1}, {3, 2, 1, 0}}, Case{{2, 3, 4, 5}, {3, 0, 2, 1}}}) {
    int64_t n = 1;
    for (int64_t d : c.shape)
      n *= d;
    Buffer in = randomBuffer(dtype(), rng, n), out(dtype(), n);
    zrt_transpose(dtype(), in.data(), out.data(), int32_t(c.shape.size()),
                  c.shape.data(), c.perm.data());
    expectClose(out, ref::transpose(in.values(), c.shape, c.perm), 0, 0,
                "transpose");
  }
}

TEST_P(KernelTest, SplitConcat) {
  struct Case {
    int64_t outer, inner;
    std::vector<int64_t> sizes;
  };
  for (const Case &c : {Case{3, 5, {4, 7, 2}}, Case{1, 3, {1000, 24}},
                        Case{64, 1, {8, 8, 8}}}) {
    int64_t total = 0;
    for (int64_t s : c.sizes)
      total += s;
    Buffer whole = randomBuffer(dtype(), rng, c.outer * total * c.inner);
    std::vector<Buffer> parts;
    for (int64_t s : c.sizes)
      parts.emplace_back(dtype(), c.outer * s * c.inner);
    std::vector<void *> outs;
    for (Buffer &p : parts)
      outs.push_back(p.data());
    zrt_split(dtype(), whole.data(), outs.data(), c.sizes.data(),
              int32_t(c.sizes.size()), c.outer, c.inner);
    ref::Vec wv = whole.values();
    for (size_t p = 0, offset = 0; p < parts.size();
         offset += static_cast<size_t>(c.sizes[p++])) {
      ref::Vec want;
      for (int64_t o = 0; o < c.outer; ++o)
        for (int64_t i = 0; i < c.sizes[p] * c.inner; ++i)
          want.push_back(wv[static_cast<size_t>(
              (o * total + int64_t(offset)) * c.inner + i)]);
      expectClose(parts[p], want, 0, 0, "split");
    }
    Buffer back(dtype(), c.outer * total * c.inner);
    std::vector<const void *> ins(outs.begin(), outs.end());
    zrt_concat(dtype(), ins.data(), c.sizes.data(), int32_t(c.sizes.size()),
               back.data(), c.outer, c.inner);
    expectClose(back, wv, 0, 0, "concat");
  }
}

TEST(ShiftLabelsTest, ShiftsLeftAndFillsTheLastPosition) {
  std::mt19937 rng{99};
  std::uniform_int_distribution<int64_t> pick(-100, 1000);
  for (auto [rows, cols] :
       {std::pair<int64_t, int64_t>{3, 7}, {64, 129}, {5, 1}, {0, 4}}) {
    std::vector<int64_t> labels(static_cast<size_t>(rows * cols));
    for (int64_t &l : labels)
      l = pick(rng);
    std::vector<int64_t> want = ref::shiftLabels(labels, rows, cols, -100);
    std::vector<int64_t> out(labels.size(), 7);
    zrt_shift_labels(ZRT_I64, labels.data(), out.data(), rows, cols, -100);
    EXPECT_EQ(out, want) << rows << "x" << cols << " i64";
    std::vector<int32_t> labels32(labels.begin(), labels.end());
    std::vector<int32_t> out32(labels.size(), 7);
    zrt_shift_labels(ZRT_I32, labels32.data(), out32.data(), rows, cols, -100);
    EXPECT_EQ(std::vector<int64_t>(out32.begin(), out32.end()), want)
        << rows << "x" << cols << " i32";
  }
}

TEST(ShiftLabelsDeathTest, FillMustFitTheLabels) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  int32_t labels[4] = {1, 2, 3, 4}, out[4];
  EXPECT_DEATH(zrt_shift_labels(ZRT_I32, labels, out, 2, 2, int64_t(1) << 40),
               "zrt_shift_labels: fill 1099511627776 does not fit the "
               "labels' type");
}

// The quantization kernels' values are checked bit for bit against an
// independent numpy model (test/E2E/quantize-numpy.test); here what the
// model cannot: the size of a chunk, a round trip and the argument checks.
// qwZ's slots: a shard is cut at every parameter start inside it, each
// piece a chunk of its own, and every rank's slot is the largest.
TEST(QuantizeTest, SlotsCutShardsAtParameterStarts) {
  // A weight [0, 128) and its bias [128, 136) over 2 ranks of 68: rank 0
  // holds one piece (4 + 68 bytes), rank 1 two: 4 + 60 and 4 + 8.
  const int64_t mlp[] = {0, 128};
  EXPECT_EQ(zrt_quant_slot_bytes(mlp, 2, 68, 2, 8), 64 + 12);
  EXPECT_EQ(zrt_quant_slot_bytes(mlp, 2, 68, 2, 4), (4 + 30 + 2) + (4 + 4));
  // One parameter: the chunk of the whole shard.
  const int64_t one[] = {0};
  EXPECT_EQ(zrt_quant_slot_bytes(one, 1, 3000, 4, 8), zrt_quant_bytes(3000, 8));
  // Starts on shard boundaries and repeated starts (an empty parameter) cut
  // nothing.
  const int64_t edges[] = {0, 100, 100, 200};
  EXPECT_EQ(zrt_quant_slot_bytes(edges, 4, 100, 3, 8), zrt_quant_bytes(100, 8));
  // A layer norm's gains and bias (128 each) before a 512-element weight
  // over 4 ranks of 192: ranks 0 and 1 hold two pieces (128 + 64, 64 +
  // 128), ranks 2 and 3 one each.
  const int64_t layer[] = {0, 128, 256};
  EXPECT_EQ(zrt_quant_slot_bytes(layer, 3, 192, 4, 8),
            zrt_quant_bytes(128, 8) + zrt_quant_bytes(64, 8));
  EXPECT_EQ(zrt_quant_slot_bytes(layer, 3, 192, 1, 8),
            zrt_quant_bytes(128, 8) + zrt_quant_bytes(64, 8));
  EXPECT_EQ(zrt_quant_slot_bytes(layer, 3, 192, 0, 8), 0);
}

TEST(QuantizeTest, ChunksAreLaidOutBackToBack) {
  EXPECT_EQ(zrt_quant_bytes(0, 8), 0);
  EXPECT_EQ(zrt_quant_bytes(1, 8), 8);
  EXPECT_EQ(zrt_quant_bytes(2048, 8), 4 * 8 + 2048);
  // INT4 blocks are 128 values: 17 scales.
  EXPECT_EQ(zrt_quant_bytes(2049, 4), 4 * 17 + 1025 + 3);
  EXPECT_EQ(zrt_quant_bytes(5, 4), 8);
  // Dequantizing the 3 chunks of a quantized [3, 3000] buffer at once
  // equals dequantizing each chunk alone, and stays within half a step.
  std::vector<float> x(9000);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = float(std::sin(double(i)) * (1.0 + double(i / 3000)));
  int64_t bytes = zrt_quant_bytes(3000, 8);
  std::vector<uint8_t> q(size_t(3 * bytes));
  zrt_quantize(ZRT_F32, x.data(), 3000, 3, 8, q.data());
  std::vector<float> all(9000), one(3000);
  zrt_dequantize(ZRT_F32, q.data(), 3000, 3, 8, all.data());
  for (int64_t c = 0; c < 3; ++c) {
    zrt_dequantize(ZRT_F32, q.data() + c * bytes, 3000, 1, 8, one.data());
    EXPECT_TRUE(std::equal(one.begin(), one.end(), all.begin() + c * 3000));
    for (int64_t i = 0; i < 3000; ++i)
      EXPECT_LE(std::fabs(all[size_t(c * 3000 + i)] - x[size_t(c * 3000 + i)]),
                float(c + 1) / 127 * 0.5001f);
  }
}

TEST(Quantize, DequantizeAddIsDequantizeThenAdd) {
  // qgZ's sums: adding a chunk's dequantization to fp32 values equals
  // dequantizing it and adding in fp32, element by element, bit for bit
  // (an odd INT4 chunk with a ragged last block, and a NaN block).
  int64_t n = 601;
  std::vector<float> in(static_cast<size_t>(n)), sums(in.size()), y(in.size());
  for (int64_t i = 0; i < n; ++i) {
    in[size_t(i)] = float(std::cos(double(i)) * 3.0);
    sums[size_t(i)] = float(std::sin(double(i)));
  }
  in[300] = std::nanf("");
  std::vector<uint8_t> q(size_t(zrt_quant_bytes(n, 4)));
  zrt_quantize(ZRT_F32, in.data(), n, 1, 4, q.data());
  zrt_dequantize(ZRT_F32, q.data(), n, 1, 4, y.data());
  std::vector<float> want(sums);
  for (int64_t i = 0; i < n; ++i)
    want[size_t(i)] += y[size_t(i)];
  zrt_dequantize_add(q.data(), n, 4, sums.data());
  EXPECT_EQ(std::memcmp(sums.data(), want.data(), sums.size() * sizeof(float)),
            0);
  // Element 300 poisons its INT4 block, [256, 384).
  static_assert(ZRT_QUANT_BLOCK_INT4 == 128, "the NaN block below");
  EXPECT_TRUE(std::isnan(sums[256]) && std::isnan(sums[383]));
  EXPECT_FALSE(std::isnan(sums[255]) || std::isnan(sums[384]));
  EXPECT_DEATH(zrt_dequantize_add(q.data(), 4, 3, sums.data()),
               "zrt_dequantize_add: 3-bit quantization is not supported");
}

TEST(QuantizeDeathTest, RejectsBadArguments) {
  float x[4] = {};
  uint8_t q[16] = {};
  EXPECT_DEATH(zrt_quantize(ZRT_F32, x, 4, 1, 2, q),
               "zrt_quantize: 2-bit quantization is not supported");
  EXPECT_DEATH(zrt_dequantize(ZRT_BF16, q, -1, 1, 8, x),
               "zrt_dequantize: negative dimension");
  EXPECT_DEATH(zrt_quantize(9, x, 4, 1, 8, q), "unknown float dtype 9");
}

TEST_P(KernelTest, CastAndFill) {
  int64_t n = 4099;
  Buffer src = randomBuffer(dtype(), rng, n, -70000, 70000);
  src.set(0, INFINITY);
  src.set(1, -INFINITY);
  src.set(2, NAN);
  src.set(3, 1e-6);
  for (int32_t to : {ZRT_F32, ZRT_BF16, ZRT_F16}) {
    Buffer dst(to, n), want(to, src.values());
    zrt_cast(dtype(), src.data(), to, dst.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      double g = dst.get(i), w = want.get(i);
      if (std::isnan(w))
        EXPECT_TRUE(std::isnan(g)) << i;
      else
        EXPECT_EQ(g, w) << dtypeName(dtype()) << " -> " << dtypeName(to)
                        << " at " << i;
    }
  }
  Buffer filled(dtype(), n);
  zrt_fill(dtype(), filled.data(), n, 0.1);
  expectClose(filled, ref::Vec(static_cast<size_t>(n), roundTo(dtype(), 0.1)),
              0, 0, "fill");
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, KernelTest,
                         ::testing::Values(ZRT_F32, ZRT_BF16, ZRT_F16),
                         [](const auto &info) {
                           return std::string(dtypeName(info.param));
                         });

} // namespace
