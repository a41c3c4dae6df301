//===- KernelTest.cpp - Kernels against double-precision references -------===//
//
// Part of the zero-mlir project.
//
// Every kernel, for every dtype, against the definitions in Reference.h
// evaluated on the same (already rounded) inputs. The kernels compute in
// fp32 and round the result once, so the tolerances are the output dtype's
// unit roundoff u relative to the result, plus an fp32 accumulation term
// (2^-24 times the size of the summed terms, with slack for the sums'
// length). Attention (AttentionTest.cpp) and the norms and losses
// (NormLossTest.cpp) are the files beside it, in the same executable.
//
//===----------------------------------------------------------------------===//

#include "KernelTestUtil.h"

using namespace zrt_test;

namespace {

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

// At a packed row's positions, each document is rotated exactly as it would
// be alone in a row of its own (positions 0, 1, ...), bit for bit, for
// int32 and int64 positions, every mode, and in place.
TEST_P(KernelTest, RopeAtPackedPositions) {
  const int64_t batch = 2, heads = 3, seq = 10, dim = 8;
  // Row 0: documents of 4, 3 and 3 tokens; row 1: one of 10.
  const std::vector<int64_t> positions = {0, 1, 2, 3, 0, 1, 2, 0, 1, 2,
                                          0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  const std::vector<std::vector<std::pair<int64_t, int64_t>>> docs = {
      {{0, 4}, {4, 7}, {7, 10}}, {{0, 10}}};
  std::vector<int32_t> positions32(positions.begin(), positions.end());
  int64_t n = batch * heads * seq * dim;
  Buffer x = randomBuffer(dtype(), rng, n);
  std::vector<double> xs = x.values();
  for (int mode = 0; mode < 4; ++mode) {
    int interleaved = mode & 1, inverse = mode >> 1;
    std::string what = std::string("rope at positions ") + dtypeName(dtype()) +
                       (interleaved ? " interleaved" : "") +
                       (inverse ? " inverse" : "");
    Buffer y(dtype(), n), y32(dtype(), n), z(dtype(), xs);
    zrt_rope_positions(dtype(), x.data(), y.data(), batch, heads, seq, dim, 1e4,
                       inverse, interleaved, nullptr, 1.0, ZRT_I64,
                       positions.data());
    zrt_rope_positions(dtype(), x.data(), y32.data(), batch, heads, seq, dim,
                       1e4, inverse, interleaved, nullptr, 1.0, ZRT_I32,
                       positions32.data());
    zrt_rope_positions(dtype(), z.data(), z.data(), batch, heads, seq, dim, 1e4,
                       inverse, interleaved, nullptr, 1.0, ZRT_I64,
                       positions.data());
    expectClose(y32, y.values(), 0, 0, what + " int32");
    expectClose(z, y.values(), 0, 0, what + " in place");
    std::vector<double> ys = y.values();
    for (int64_t b = 0; b < batch; ++b)
      for (auto [begin, end] : docs[size_t(b)]) {
        int64_t len = end - begin;
        // The document alone: [1, heads, len, dim] at positions 0..len-1.
        std::vector<double> alone, got;
        for (int64_t h = 0; h < heads; ++h)
          for (int64_t t = begin; t < end; ++t)
            for (int64_t d = 0; d < dim; ++d) {
              int64_t i = ((b * heads + h) * seq + t) * dim + d;
              alone.push_back(xs[size_t(i)]);
              got.push_back(ys[size_t(i)]);
            }
        Buffer in(dtype(), alone), out(dtype(), int64_t(alone.size()));
        zrt_rope(dtype(), in.data(), out.data(), 1, heads, len, dim, 1e4,
                 inverse, interleaved, nullptr, 1.0);
        expectClose(out, got, 0, 0,
                    what + " row " + std::to_string(b) + " document at " +
                        std::to_string(begin));
      }
  }
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

// Packed rows' document ids: a new document wherever a position does not
// follow the one before by one (a restart at 0, a jump, a repeat), as
// transformers' find_packed_sequence_indices reads positions.
TEST(DocumentIdsTest, NewDocumentWherePositionsDoNotRiseByOne) {
  const int64_t rows = 3, cols = 8;
  std::vector<int64_t> positions = {0, 1, 2, 0, 1, 0, 1, 2,  // three documents
                                    0, 1, 2, 3, 4, 5, 6, 7,  // one
                                    5, 6, 0, 0, 3, 4, 5, 9}; // five
  std::vector<int32_t> want = {0, 0, 0, 1, 1, 2, 2, 2, 0, 0, 0, 0,
                               0, 0, 0, 0, 0, 0, 1, 2, 3, 3, 3, 4};
  std::vector<int32_t> ids(positions.size(), 7);
  zrt_document_ids(ZRT_I64, positions.data(), ids.data(), rows, cols);
  EXPECT_EQ(ids, want) << "i64";
  std::vector<int32_t> positions32(positions.begin(), positions.end());
  std::vector<int32_t> ids32(positions.size(), 7);
  zrt_document_ids(ZRT_I32, positions32.data(), ids32.data(), rows, cols);
  EXPECT_EQ(ids32, want) << "i32";
  zrt_document_ids(ZRT_I64, nullptr, nullptr, 0, cols);
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

// A policy-gradient loss's pointwise ops, exact in every dtype (selects and
// comparisons; a tie's half gradient is exact): clamp with both bounds and
// with one (the bound rounded to the dtype, as torch converts it), at the
// bounds and NaN; minimum and maximum with ties and NaN; where with masks of
// 0, -0, NaN and other nonzero values. Against double references.
namespace {
/// Equal values, NaN equal to NaN.
void expectSame(const ref::Vec &got, const ref::Vec &want,
                const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::isnan(got[i]) && std::isnan(want[i])))
      EXPECT_EQ(got[i], want[i]) << what << " at " << i;
}
} // namespace

TEST_P(KernelTest, ClampMinMaxWhere) {
  const double inf = std::numeric_limits<double>::infinity();
  double lo = Buffer(dtype(), ref::Vec{0.8}).values()[0],
         hi = Buffer(dtype(), ref::Vec{1.2}).values()[0];
  ref::Vec xs = randomValues(rng, 600, -2, 3);
  for (double v : {lo, hi, 0.8, 1.2, -inf, inf, std::nan("")})
    xs.push_back(v);
  int64_t n = xs.size();
  Buffer x(dtype(), xs), dy = randomBuffer(dtype(), rng, n);
  ref::Vec xv = x.values(), dyv = dy.values();
  for (auto [l, h] : {std::make_pair(0.8, 1.2), std::make_pair(0.8, inf),
                      std::make_pair(-inf, 1.2), std::make_pair(1.2, 0.8)}) {
    double rl = l == -inf ? l : (l == 0.8 ? lo : hi);
    double rh = h == inf ? h : (h == 1.2 ? hi : lo);
    Buffer y(dtype(), n), dx(dtype(), n);
    zrt_clamp(dtype(), x.data(), y.data(), n, l, h);
    zrt_clamp_grad(dtype(), x.data(), dy.data(), dx.data(), n, l, h);
    ref::Vec want(n), wantDx(n);
    for (int64_t i = 0; i < n; ++i) {
      double v = xv[i];
      want[i] = std::isnan(v) ? v : std::min(std::max(v, rl), rh);
      wantDx[i] = v >= rl && v <= rh ? dyv[i] : 0.0;
    }
    std::string what = "clamp " + std::to_string(l) + " " + std::to_string(h);
    expectSame(y.values(), want, what);
    expectSame(dx.values(), wantDx, what + " grad");
  }

  // minimum and maximum: every fourth pair ties, NaN in either operand.
  Buffer a = randomBuffer(dtype(), rng, n), b = randomBuffer(dtype(), rng, n);
  for (int64_t i = 0; i < n; i += 4)
    b.set(i, a.values()[i]);
  a.set(1, std::nan(""));
  b.set(2, std::nan(""));
  ref::Vec av = a.values(), bv = b.values();
  for (bool isMax : {false, true}) {
    Buffer y(dtype(), n), da(dtype(), n), db(dtype(), n);
    (isMax ? zrt_maximum : zrt_minimum)(dtype(), a.data(), b.data(), y.data(),
                                        n);
    (isMax ? zrt_maximum_grad : zrt_minimum_grad)(
        dtype(), a.data(), b.data(), dy.data(), da.data(), db.data(), n);
    ref::Vec want(n), wantDa(n), wantDb(n);
    for (int64_t i = 0; i < n; ++i) {
      double p = av[i], q = bv[i], g = dyv[i];
      bool aWins = isMax ? p > q : p < q, bWins = isMax ? q > p : q < p;
      want[i] = std::isnan(p) || std::isnan(q) ? std::nan("") : bWins ? q : p;
      // autograd: where(a == b, g / 2, g), zero where the other wins.
      wantDa[i] = p == q ? g / 2 : (bWins ? 0.0 : g);
      wantDb[i] = p == q ? g / 2 : (aWins ? 0.0 : g);
    }
    std::string what = isMax ? "maximum" : "minimum";
    expectSame(y.values(), want, what);
    expectSame(da.values(), wantDa, what + " grad a");
    expectSame(db.values(), wantDb, what + " grad b");
  }
  zrt_minimum(dtype(), nullptr, nullptr, nullptr, 0);

  // where with a float mask.
  ref::Vec masks{0.0, 1.0, -0.0, std::nan(""), 2.0, -1.0};
  Buffer c(dtype(), n);
  for (int64_t i = 0; i < n; ++i)
    c.set(i, masks[size_t(i) % masks.size()]);
  Buffer y(dtype(), n), dt(dtype(), n), df(dtype(), n);
  zrt_where(dtype(), c.data(), a.data(), b.data(), y.data(), n);
  zrt_where_grad(dtype(), c.data(), dy.data(), dt.data(), df.data(), n);
  ref::Vec want(n), wantT(n), wantF(n);
  ref::Vec cv = c.values();
  for (int64_t i = 0; i < n; ++i) {
    bool on = cv[i] != 0.0; // NaN is true, as bool(nan)
    want[i] = on ? av[i] : bv[i];
    wantT[i] = on ? dyv[i] : 0.0;
    wantF[i] = on ? 0.0 : dyv[i];
  }
  expectSame(y.values(), want, "where");
  expectSame(dt.values(), wantT, "where_grad true");
  expectSame(df.values(), wantF, "where_grad false");
}

// reciprocal and its gradient from the result, against double (a
// division, and -(y * y) * dy rounded twice in fp32); 1 / 0 is inf.
TEST_P(KernelTest, Reciprocal) {
  ref::Vec xs = randomValues(rng, 500, 0.1, 4);
  for (int64_t i = 0; i < 500; i += 2)
    xs[size_t(i)] = -xs[size_t(i)];
  xs.push_back(0.0);
  int64_t n = xs.size();
  Buffer x(dtype(), xs), dy = randomBuffer(dtype(), rng, n);
  Buffer y(dtype(), n), dx(dtype(), n);
  zrt_reciprocal(dtype(), x.data(), y.data(), n);
  zrt_reciprocal_grad(dtype(), y.data(), dy.data(), dx.data(), n);
  ref::Vec xv = x.values(), yv = y.values(), dyv = dy.values();
  ref::Vec want(n), wantDx(n);
  for (int64_t i = 0; i < n; ++i) {
    want[i] = 1.0 / xv[i];
    wantDx[i] = -yv[i] * yv[i] * dyv[i];
  }
  EXPECT_TRUE(std::isinf(yv.back()));
  yv.pop_back();
  want.pop_back();
  expectClose(yv, want, u(), 0, "reciprocal");
  ref::Vec gotDx = dx.values();
  gotDx.pop_back();
  wantDx.pop_back();
  expectClose(gotDx, wantDx, u() + 2e-7, 1e-30, "reciprocal_grad");
}

// gather along the last dimension and its scatter-add, for both index
// types: k = 1 (TRL's selective log-softmax) and k = 5 with repeated
// indices, whose gradients add in fp32 in the order of j.
TEST_P(KernelTest, GatherAndGrad) {
  const int64_t rows = 7, cols = 11;
  Buffer x = randomBuffer(dtype(), rng, rows * cols);
  ref::Vec xv = x.values();
  for (int32_t indexType : {ZRT_I32, ZRT_I64})
    for (int64_t k : {1, 5}) {
      std::vector<int64_t> idx(size_t(rows * k));
      std::uniform_int_distribution<int64_t> pick(0, cols - 1);
      for (int64_t &v : idx)
        v = pick(rng);
      if (k > 1)
        for (int64_t r = 0; r < rows; ++r)
          idx[size_t(r * k + 3)] = idx[size_t(r * k + 1)]; // a repeat
      idx.back() = cols - 1;
      std::vector<int32_t> idx32(idx.begin(), idx.end());
      const void *ip = indexType == ZRT_I32
                           ? static_cast<const void *>(idx32.data())
                           : idx.data();
      Buffer y(dtype(), rows * k), dy = randomBuffer(dtype(), rng, rows * k),
                                   dx(dtype(), rows * cols);
      zrt_gather(dtype(), x.data(), indexType, ip, y.data(), rows, cols, k);
      zrt_gather_grad(dtype(), indexType, ip, dy.data(), dx.data(), rows, cols,
                      k);
      ref::Vec want(rows * k), wantDx(rows * cols, 0.0), dyv = dy.values();
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < k; ++j) {
          int64_t c = idx[size_t(r * k + j)];
          want[r * k + j] = xv[r * cols + c];
          wantDx[r * cols + c] += dyv[r * k + j];
        }
      std::string what = "gather k " + std::to_string(k);
      expectSame(y.values(), want, what);
      // A repeat's two terms round once to the dtype.
      expectClose(dx.values(), wantDx, u(), 1e-7, what + " grad");
    }
  zrt_gather(dtype(), nullptr, ZRT_I64, nullptr, nullptr, 0, cols, 1);
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, KernelTest,
                         ::testing::Values(ZRT_F32, ZRT_BF16, ZRT_F16),
                         [](const auto &info) {
                           return std::string(dtypeName(info.param));
                         });

} // namespace
