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

#include <algorithm>

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
                   c.k, ta, tb, c.bBatched);
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

  // SiLU: one expApprox as in GELU; the gradient crosses zero near
  // x = -1.28, hence the same absolute term.
  zrt_silu(dtype(), x.data(), y.data(), n);
  std::transform(xv.begin(), xv.end(), want.begin(), ref::silu);
  expectClose(y, want, u() + 1e-6, 1e-7, "silu");
  zrt_silu_grad(dtype(), x.data(), dy.data(), dx.data(), n);
  for (int64_t i = 0; i < n; ++i)
    want[i] = ref::siluGrad(xv[i]) * dyv[i];
  expectClose(dx, want, u() + 1e-6, 1e-6, "silu_grad");

  zrt_relu(dtype(), x.data(), y.data(), n);
  std::transform(xv.begin(), xv.end(), want.begin(),
                 [](double v) { return v > 0 ? v : 0.0; });
  expectClose(y, want, 0, 0, "relu");
  zrt_relu_grad(dtype(), y.data(), dy.data(), dx.data(), n);
  for (int64_t i = 0; i < n; ++i)
    want[i] = xv[i] > 0 ? dyv[i] : 0.0;
  expectClose(dx, want, 0, 0, "relu_grad");
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
      zrt_attention(dtype(), q.data(), k.data(), v.data(), o.data(), c.batch,
                    c.heads, c.kvHeads, c.seq, c.dim, causal, c.scale);
      std::string what =
          std::string("attention ") + dtypeName(dtype()) + " heads " +
          std::to_string(c.heads) + "/" + std::to_string(c.kvHeads) + " seq " +
          std::to_string(c.seq) + " causal " + std::to_string(causal);
      expectClose(o,
                  ref::attention(q.values(), k.values(), v.values(), c.batch,
                                 c.heads, c.kvHeads, c.seq, c.dim, causal,
                                 scale),
                  u(), 1e-5, what);
      zrt_attention_grad(dtype(), q.data(), k.data(), v.data(), o.data(),
                         dO.data(), dq.data(), dk.data(), dv.data(), c.batch,
                         c.heads, c.kvHeads, c.seq, c.dim, causal, c.scale);
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
    zrt_attention(dtype(), q.data(), k.data(), v.data(), o.data(), batch, heads,
                  kvHeads, seq, dim, causal, 0);
    zrt_attention(dtype(), q.data(), kr.data(), vr.data(), or_.data(), batch,
                  heads, heads, seq, dim, causal, 0);
    EXPECT_EQ(o.values(), or_.values()) << what << " o";
    zrt_attention_grad(dtype(), q.data(), k.data(), v.data(), o.data(),
                       dO.data(), dq.data(), dk.data(), dv.data(), batch, heads,
                       kvHeads, seq, dim, causal, 0);
    zrt_attention_grad(dtype(), q.data(), kr.data(), vr.data(), o.data(),
                       dO.data(), dqr.data(), dkr.data(), dvr.data(), batch,
                       heads, heads, seq, dim, causal, 0);
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
    zrt_attention_grad(dtype(), q.data(), k.data(), v.data(), o.data(),
                       dO.data(), dq2.data(), dk2.data(), dv2.data(), batch,
                       heads, kvHeads, seq, dim, causal, 0);
    EXPECT_EQ(dq2.values(), dq.values()) << what << " dq rerun";
    EXPECT_EQ(dk2.values(), dk.values()) << what << " dk rerun";
    EXPECT_EQ(dv2.values(), dv.values()) << what << " dv rerun";
  }
}

TEST(AttentionDeathTest, KvHeadsMustDivideHeads) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(zrt_attention(ZRT_F32, nullptr, nullptr, nullptr, nullptr, 1, 4,
                             3, 8, 16, 1, 0),
               "zrt_attention: kv_heads 3 does not divide heads 4");
  EXPECT_DEATH(zrt_attention_grad(ZRT_BF16, nullptr, nullptr, nullptr, nullptr,
                                  nullptr, nullptr, nullptr, nullptr, 2, 2, 4,
                                  8, 16, 0, 0),
               "zrt_attention_grad: kv_heads 4 does not divide heads 2");
  EXPECT_DEATH(zrt_attention(ZRT_F32, nullptr, nullptr, nullptr, nullptr, 1, 4,
                             0, 8, 16, 1, 0),
               "zrt_attention: kv_heads 0 does not divide heads 4");
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
                       vocab, dim);
    expectClose(dtable, ref::embeddingGrad(dy.values(), ids, vocab, dim), u(),
                numIds * kF32, "embedding_grad");
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
                                rows, classes);
      double want = ref::crossEntropy(logits.values(), labels, classes);
      EXPECT_NEAR(loss, want, 1e-5 * std::fabs(want)) << dtypeName(dtype());
      float dloss = 1.7f;
      Buffer dlogits(dtype(), rows * classes);
      zrt_softmax_cross_entropy_grad(dtype(), logits.data(), labelType, lp,
                                     &dloss, dlogits.data(), rows, classes);
      ref::Vec wantGrad =
          ref::crossEntropyGrad(logits.values(), labels, classes, dloss);
      expectClose(dlogits, wantGrad, u() + 1e-5, 1e-6 * maxAbs(wantGrad),
                  "softmax_cross_entropy_grad");
    }
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
