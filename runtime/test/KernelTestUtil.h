//===- KernelTestUtil.h - The kernel tests' fixture -------------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// What zrt-kernel-test's files share (KernelTest.cpp, AttentionTest.cpp,
// NormLossTest.cpp): the per-dtype fixture, one instantiation of it for
// every dtype (in KernelTest.cpp), and its helpers.
//
//===----------------------------------------------------------------------===//

#ifndef ZRT_TEST_KERNEL_TEST_UTIL_H
#define ZRT_TEST_KERNEL_TEST_UTIL_H

#include "Reference.h"
#include "TestUtil.h"
#include "zero_rt/quantize.h"
#include "zero_rt/scratch.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <tuple>

#include <random>

namespace zrt_test {

constexpr double kF32 = 0x1p-24;

inline double maxAbs(const ref::Vec &v) {
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

} // namespace zrt_test

#endif // ZRT_TEST_KERNEL_TEST_UTIL_H
