//===- AttentionTest.cpp - Attention against its reference ----------------===//
//
// Part of the zero-mlir project.
//
// The attention kernels, forward and backward, for every dtype against
// Reference.h's definition: grouped heads, both backward paths, windows,
// soft-capping, ALiBi, sinks, packed documents, and the descriptor's
// checks.
//
//===----------------------------------------------------------------------===//

#include "KernelTestUtil.h"

using namespace zrt_test;

namespace {

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
  // A document is a run of one id: ids that decrease are refused.
  int32_t segments[4] = {0, 0, 1, 0};
  zrt_attention_desc desc = *AttentionDesc(ZRT_F32, 1, 1, 1, 4, 1, 1, 0);
  desc.segments = segments;
  float x[4] = {0, 0, 0, 0};
  EXPECT_DEATH(zrt_attention_backward(&desc, x, x, x, x, x, x, x, x),
               "zrt_attention_backward: segment ids of batch element 0 "
               "decrease at position 3 \\(0 after 1\\)");
}

// Packed rows: attention over a row of documents (the descriptor's segment
// ids) is attention over each document alone, forward and backward, with
// every knob that composes with packing (grouped heads, windows, soft-caps,
// ALiBi, sinks). Rows of several blocks (the block skipping of documents the
// queries cannot see) and both backward paths.
TEST_P(KernelTest, PackedDocumentsAreSeparate) {
  struct Case {
    int64_t batch, heads, kvHeads, dim, window;
    double softcap;
    bool alibi, sinks;
    std::vector<std::vector<int64_t>> docs; // lengths, one list per row
  };
  std::vector<Case> cases = {
      {2, 2, 1, 8, 0, 0, false, false, {{5, 9, 1, 17}, {32}}},
      {1, 4, 2, 16, 0, 0, false, false, {{40, 3, 57, 30}}},
      {1, 2, 2, 8, 6, 0, false, false, {{20, 7, 13}}},
      {1, 2, 1, 8, 0, 30, true, false, {{11, 2, 19}}},
      {2, 2, 2, 8, 4, 0, false, true, {{3, 9, 4}, {6, 10}}},
      {1, 1, 1, 72, 0, 0, false, false, {{150, 80, 70}}},
  };
  for (const Case &c : cases) {
    if (c.sinks && dtype() != ZRT_F32)
      continue;
    int64_t seq = 0;
    for (int64_t n : c.docs[0])
      seq += n;
    int64_t d = c.dim, n = c.batch * c.heads * seq * d,
            nkv = c.batch * c.kvHeads * seq * d;
    std::vector<int32_t> segments;
    for (const auto &row : c.docs)
      for (size_t doc = 0; doc < row.size(); ++doc)
        segments.insert(segments.end(), size_t(row[doc]), int32_t(doc));
    ASSERT_EQ(int64_t(segments.size()), c.batch * seq);
    std::vector<float> alibi = {0.5f, 0.25f, 0.125f, 0.0625f};
    std::vector<float> sinks = {0.3f, -1.2f, 0.7f, 0.1f};
    Buffer q = randomBuffer(dtype(), rng, n, -2, 2),
           k = randomBuffer(dtype(), rng, nkv, -2, 2),
           v = randomBuffer(dtype(), rng, nkv),
           dO = randomBuffer(dtype(), rng, n);
    for (int causal = c.window || c.sinks ? 1 : 0; causal < 2; ++causal) {
      auto desc = [&](int64_t b, int64_t t, const int32_t *seg) {
        zrt_attention_desc r = *AttentionDesc(dtype(), b, c.heads, c.kvHeads, t,
                                              d, causal, 0, c.window, c.softcap,
                                              c.alibi ? alibi.data() : nullptr,
                                              c.sinks ? sinks.data() : nullptr);
        r.segments = seg;
        return r;
      };
      zrt_attention_desc packed = desc(c.batch, seq, segments.data());
      Buffer o(dtype(), n), dq(dtype(), n), dk(dtype(), nkv), dv(dtype(), nkv);
      zrt_attention_forward(&packed, q.data(), k.data(), v.data(), o.data());
      zrt_attention_backward(&packed, q.data(), k.data(), v.data(), o.data(),
                             dO.data(), dq.data(), dk.data(), dv.data());
      // Each document alone: its rows of every head, copied out and back.
      for (int64_t b = 0; b < c.batch; ++b) {
        int64_t at = 0;
        for (int64_t len : c.docs[size_t(b)]) {
          std::string what = std::string("packed ") + dtypeName(dtype()) +
                             " causal " + std::to_string(causal) + " doc at " +
                             std::to_string(b) + ":" + std::to_string(at) +
                             " of " + std::to_string(len);
          auto slice = [&](const Buffer &from, int64_t heads) {
            Buffer out(dtype(), heads * len * d);
            for (int64_t h = 0; h < heads; ++h)
              for (int64_t e = 0; e < len * d; ++e)
                out.set(h * len * d + e,
                        from.get(((b * heads + h) * seq + at) * d + e));
            return out;
          };
          Buffer qs = slice(q, c.heads), ks = slice(k, c.kvHeads),
                 vs = slice(v, c.kvHeads), gs = slice(dO, c.heads);
          Buffer os(dtype(), c.heads * len * d),
              dqs(dtype(), c.heads * len * d),
              dks(dtype(), c.kvHeads * len * d),
              dvs(dtype(), c.kvHeads * len * d);
          zrt_attention_desc alone = desc(1, len, nullptr);
          zrt_attention_forward(&alone, qs.data(), ks.data(), vs.data(),
                                os.data());
          zrt_attention_backward(&alone, qs.data(), ks.data(), vs.data(),
                                 os.data(), gs.data(), dqs.data(), dks.data(),
                                 dvs.data());
          std::vector<double> want[4] = {os.values(), dqs.values(),
                                         dks.values(), dvs.values()};
          Buffer got[4] = {slice(o, c.heads), slice(dq, c.heads),
                           slice(dk, c.kvHeads), slice(dv, c.kvHeads)};
          const char *names[4] = {" o", " dq", " dk", " dv"};
          // The documents' blocks start elsewhere in the row than alone,
          // so the fp32 sums chunk differently: a 16-bit result may round
          // to the next value.
          for (int x = 0; x < 4; ++x)
            expectClose(got[x], want[x], 2 * u(),
                        (x ? 1e-4 : 1e-5) * std::max(1.0, maxAbs(want[x])),
                        what + names[x]);
          at += len;
        }
      }
    }
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

} // namespace
