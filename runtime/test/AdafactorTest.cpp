//===- AdafactorTest.cpp - The CPU Adafactor step against torch's ---------===//
//
// Part of the zero-mlir project.
//
// adafactor_reference.py runs torch.optim.Adafactor at test time (the
// project's Python, ZERO_PYTHON) on the tiny Llama's matrices, its norms'
// vectors and a stack of matrices, with weight decay, maximize, eps1 given
// or torch's None, d above 1 and other beta2 decays, 5 steps each; the
// kernel repeats the steps from the same parameter and gradients, on one
// rank and on slices cut anywhere (inside rows too) whose sums are added in
// rank order, as the ranks' all-reduce does.
//
// Every fp32 operation is torch's; only the sums of squares differ: torch
// sums in fp32 in its own order, the kernel in double. Measured over these
// cases: the factors within 3.4e-7 and the parameters within 1.6e-7 of
// torch's largest value (the parameters' largest difference is 3.7e-6 of
// their largest movement), and every slicing gives the one rank's bits.
// Without the update's clipping the parameters miss by up to 1.3 of their
// largest value.
//
//===----------------------------------------------------------------------===//

#include "Optimizer/Adafactor.h"
#include "TestUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace zrt;

namespace {

struct Case {
  std::string name;
  AdafactorShape shape;
  double lr, beta2Decay, eps1, eps2, d, weightDecay;
  int maximize, steps;
};

std::vector<float> readFloats(std::ifstream &in, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  in.read(reinterpret_cast<char *>(v.data()), std::streamsize(n * 4));
  return v;
}

/// One rank's copy of the states: the whole factors, its slice's variance.
struct Rank {
  int64_t begin, end;
  std::vector<float> rowVar, colVar, variance;
  std::vector<double> sums;
};

/// `steps` steps of `c` over the ranks' slices [cuts[r], cuts[r + 1]) of
/// `master`, the sums all-reduced in rank order. Returns the first rank's
/// factors (factored) or the whole variance.
std::vector<float> runSliced(const Case &c, const std::vector<int64_t> &cuts,
                             const std::vector<std::vector<float>> &grads,
                             std::vector<float> &master) {
  const AdafactorShape &s = c.shape;
  std::vector<Rank> ranks;
  for (size_t r = 0; r + 1 < cuts.size(); ++r) {
    Rank rank;
    rank.begin = cuts[r];
    rank.end = cuts[r + 1];
    rank.rowVar.assign(size_t(s.batch * s.rows), 0.0f);
    rank.colVar.assign(size_t(s.batch * s.cols), 0.0f);
    rank.variance.assign(size_t(rank.end - rank.begin), 0.0f);
    rank.sums.assign(size_t(adafactorSumsCount(s)), 0.0);
    ranks.push_back(std::move(rank));
  }
  int64_t reduced = adafactorReducedCount(s);
  for (int step = 1; step <= c.steps; ++step) {
    AdafactorConstants k =
        adafactorConstants(c.lr, c.beta2Decay, c.eps1, c.eps2, c.d,
                           c.weightDecay, c.maximize != 0, step);
    const std::vector<float> &g = grads[size_t(step - 1)];
    std::vector<double> total(size_t(reduced), 0.0);
    for (Rank &r : ranks) {
      adafactorSums(ZRT_F32, g.data() + r.begin, master.data() + r.begin, s,
                    r.begin, r.end, 1.0f, r.sums.data());
      for (int64_t i = 0; i < reduced; ++i)
        total[size_t(i)] += r.sums[size_t(i)];
    }
    double updateSq = 0.0;
    for (Rank &r : ranks) {
      std::copy(total.begin(), total.end(), r.sums.begin());
      adafactorFactors(s, k, r.rowVar.data(), r.colVar.data(), r.sums.data());
      adafactorUpdateSums(ZRT_F32, g.data() + r.begin, s, r.begin, r.end, 1.0f,
                          k, r.rowVar.data(), r.colVar.data(),
                          r.variance.data(), r.sums.data());
      updateSq += r.sums[1];
    }
    for (Rank &r : ranks) {
      r.sums[1] = updateSq;
      adafactorApply(ZRT_F32, g.data() + r.begin, master.data() + r.begin,
                     nullptr, s, r.begin, r.end, 1.0f, k, r.rowVar.data(),
                     r.colVar.data(), r.variance.data(), r.sums.data());
    }
  }
  if (s.factored) {
    for (const Rank &r : ranks) {
      EXPECT_EQ(r.rowVar, ranks[0].rowVar) << "every holder's row_var";
      EXPECT_EQ(r.colVar, ranks[0].colVar) << "every holder's col_var";
    }
    std::vector<float> factors = ranks[0].rowVar;
    factors.insert(factors.end(), ranks[0].colVar.begin(),
                   ranks[0].colVar.end());
    return factors;
  }
  std::vector<float> variance;
  for (const Rank &r : ranks)
    variance.insert(variance.end(), r.variance.begin(), r.variance.end());
  return variance;
}

double maxRelative(const std::vector<float> &a, const std::vector<float> &b) {
  double worst = 0.0, scale = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::fabs(double(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(double(b[i])));
  }
  return scale > 0.0 ? worst / scale : worst;
}

TEST(Adafactor, Shapes) {
  int64_t matrix[] = {172, 64}, stack[] = {3, 5, 7}, vector[] = {37};
  AdafactorShape m = adafactorShape(matrix, 2);
  EXPECT_TRUE(m.factored);
  EXPECT_EQ(m.factorCount(), 172 + 64);
  EXPECT_EQ(adafactorReducedCount(m), 2 + 172 + 64);
  EXPECT_EQ(adafactorSumsCount(m), 2 + 172 + 64 + 1);
  AdafactorShape st = adafactorShape(stack, 3);
  EXPECT_EQ(st.batch, 3);
  EXPECT_EQ(st.factorCount(), 3 * (5 + 7));
  AdafactorShape v = adafactorShape(vector, 1);
  EXPECT_FALSE(v.factored);
  EXPECT_EQ(v.numel(), 37);
  EXPECT_EQ(v.factorCount(), 0);
  EXPECT_EQ(adafactorSumsCount(v), 2);
}

TEST(Adafactor, Constants) {
  // torch: eps1 None is fp32's eps, 1 - beta2_t = t^beta2_decay, rho =
  // min(lr, 1/sqrt(t)).
  AdafactorConstants k =
      adafactorConstants(0.5, -0.8, -1.0, 1e-3, 1.0, 0.1, false, 4);
  EXPECT_EQ(k.eps1, 1.1920928955078125e-07f);
  EXPECT_EQ(k.eps1Squared,
            float(1.1920928955078125e-07 * 1.1920928955078125e-07));
  EXPECT_EQ(k.beta2Weight, float(std::pow(4.0, -0.8)));
  EXPECT_EQ(k.rho, 0.5);
  EXPECT_EQ(k.decay, float(1.0 - 0.05));
  EXPECT_EQ(adafactorConstants(1e-2, -0.8, -1.0, 1e-3, 1.0, 0.0, false, 1)
                .beta2Weight,
            1.0f);
}

TEST(Adafactor, MatchesTorch) {
  const char *python = ZRT_TEST_PYTHON;
  zrt_test::TempDir tmp("zrt-adafactor");
  ASSERT_FALSE(tmp.path().empty()) << "cannot make a directory under /tmp";
  const std::string &dir = tmp.path();
  std::string cmd =
      std::string("'") + python + "' '" ZRT_TORCH_REFERENCE "' " + dir;
  int rc = std::system(cmd.c_str());
  if (WIFEXITED(rc) && WEXITSTATUS(rc) == 77)
    GTEST_SKIP() << "the Python (" << python
                 << ") has no torch, or its torch no torch.optim.Adafactor";
  ASSERT_EQ(rc, 0) << cmd;

  std::ifstream list(std::string(dir) + "/cases.txt");
  std::string line;
  int cases = 0;
  double worstParam = 0.0, worstState = 0.0;
  while (std::getline(list, line)) {
    std::istringstream is(line);
    Case c;
    int factored;
    is >> c.name >> c.shape.batch >> c.shape.rows >> c.shape.cols >> factored >>
        c.lr >> c.beta2Decay >> c.eps1 >> c.eps2 >> c.d >> c.weightDecay >>
        c.maximize >> c.steps;
    ASSERT_TRUE(is) << line;
    c.shape.factored = factored != 0;
    ++cases;
    int64_t n = c.shape.numel();
    std::ifstream in(std::string(dir) + "/" + c.name + ".bin",
                     std::ios::binary);
    std::vector<float> p0 = readFloats(in, n);
    std::vector<std::vector<float>> grads;
    for (int s = 0; s < c.steps; ++s)
      grads.push_back(readFloats(in, n));
    std::vector<float> pTorch = readFloats(in, n);
    std::vector<float> stateTorch =
        readFloats(in, c.shape.factored ? c.shape.factorCount() : n);
    ASSERT_TRUE(in) << c.name;

    // One rank, through adafactorStep.
    std::vector<float> p = p0;
    std::vector<float> rowVar(size_t(c.shape.batch * c.shape.rows), 0.0f);
    std::vector<float> colVar(size_t(c.shape.batch * c.shape.cols), 0.0f);
    std::vector<float> variance(size_t(n), 0.0f);
    std::vector<double> sums(size_t(adafactorSumsCount(c.shape)));
    for (int s = 1; s <= c.steps; ++s) {
      AdafactorConstants k =
          adafactorConstants(c.lr, c.beta2Decay, c.eps1, c.eps2, c.d,
                             c.weightDecay, c.maximize != 0, s);
      adafactorStep(ZRT_F32, grads[size_t(s - 1)].data(), p.data(), nullptr,
                    c.shape, 1.0f, k, rowVar.data(), colVar.data(),
                    variance.data(), sums.data());
    }
    std::vector<float> state = variance;
    if (c.shape.factored) {
      state = rowVar;
      state.insert(state.end(), colVar.begin(), colVar.end());
    }
    double relParam = maxRelative(p, pTorch);
    double relState = maxRelative(state, stateTorch);
    double maxDiff = 0.0, maxMove = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      maxDiff = std::max(maxDiff, std::fabs(double(p[i]) - pTorch[i]));
      maxMove = std::max(maxMove, std::fabs(double(pTorch[i]) - p0[i]));
    }
    std::printf("%-11s [%lld, %3lld, %3lld] param %.3g (of the movement "
                "%.3g), state %.3g\n",
                c.name.c_str(), (long long)c.shape.batch,
                (long long)c.shape.rows, (long long)c.shape.cols, relParam,
                maxDiff / maxMove, relState);
    worstParam = std::max(worstParam, relParam);
    worstState = std::max(worstState, relState);
    EXPECT_LT(relParam, 1e-6) << c.name;
    EXPECT_LT(maxDiff / maxMove, 1e-4) << c.name;
    EXPECT_LT(relState, 1e-6) << c.name;

    // Slices cut anywhere: the same bits as one rank.
    std::vector<std::vector<int64_t>> slicings = {
        {0, n / 2, n},
        {0, 1, n / 3 + 5, n - 1, n},
        {0, 0, std::min(n, c.shape.cols + 1), n}, // ranks without elements
    };
    for (const std::vector<int64_t> &cuts : slicings) {
      std::vector<float> ps = p0;
      std::vector<float> stateSliced = runSliced(c, cuts, grads, ps);
      EXPECT_EQ(ps, p) << c.name << " in " << cuts.size() - 1 << " slices";
      EXPECT_EQ(stateSliced, state)
          << c.name << " in " << cuts.size() - 1 << " slices";
    }
  }
  EXPECT_EQ(cases, 9);
  std::printf("worst param %.3g, state %.3g relative of torch's largest\n",
              worstParam, worstState);
}

TEST(Adafactor, WritesTheParameterCopy) {
  // bf16 gradients and working weights: the master moves as with the
  // widened gradient and the copy is the master rounded.
  int64_t dims[] = {6, 10};
  AdafactorShape s = adafactorShape(dims, 2);
  std::vector<float> master(60), gF32(60);
  std::vector<uint16_t> g16(60), param(60);
  for (int i = 0; i < 60; ++i) {
    master[size_t(i)] = 0.01f * float(i % 7) - 0.02f;
    g16[size_t(i)] = floatToBf16(0.1f * float((i * 5) % 11) - 0.5f);
    gF32[size_t(i)] = bf16ToFloat(g16[size_t(i)]);
  }
  std::vector<float> reference = master;
  std::vector<float> rowVar(6, 0.0f), colVar(10, 0.0f), rowRef(6, 0.0f),
      colRef(10, 0.0f);
  std::vector<double> sums(size_t(adafactorSumsCount(s)));
  AdafactorConstants k =
      adafactorConstants(1e-2, -0.8, -1.0, 1e-3, 1.0, 0.0, false, 1);
  adafactorStep(ZRT_BF16, g16.data(), master.data(), param.data(), s, 1.0f, k,
                rowVar.data(), colVar.data(), nullptr, sums.data());
  adafactorStep(ZRT_F32, gF32.data(), reference.data(), nullptr, s, 1.0f, k,
                rowRef.data(), colRef.data(), nullptr, sums.data());
  EXPECT_EQ(master, reference);
  EXPECT_NE(master[5], 0.01f * 5.0f - 0.02f) << "the step moves it";
  for (int i = 0; i < 60; ++i)
    EXPECT_EQ(param[size_t(i)], floatToBf16(master[size_t(i)])) << i;
}

TEST(Adafactor, ShardsOfAPartition) {
  // A partition of matrices, vectors and a stack, padded to 3 equal shards
  // as ZeRO's flat partitioning cuts it (inside rows and tensors): each
  // rank's shard step, the sums all-reduced in rank order, gives each
  // tensor's one-rank bits, and leaves the padding alone.
  int64_t d0[] = {40, 16}, d1[] = {16}, d2[] = {3, 4, 5}, d3[] = {16, 24},
          d4[] = {7};
  std::vector<AdafactorTensor> tensors = {{0, adafactorShape(d0, 2)},
                                          {640, adafactorShape(d1, 1)},
                                          {656, adafactorShape(d2, 3)},
                                          {716, adafactorShape(d3, 2)},
                                          {1100, adafactorShape(d4, 1)}};
  const int32_t num = int32_t(tensors.size());
  const int64_t shard = 370, ranks = 3, total = shard * ranks;
  // Per rank: the whole factors of each matrix it touches, its vectors'
  // elements; not bytes per parameter times the shard.
  EXPECT_EQ(adafactorStateCount(tensors.data(), num, 0, shard), 40 + 16);
  EXPECT_EQ(adafactorStateCount(tensors.data(), num, shard, 2 * shard),
            (40 + 16) + 16 + 3 * (4 + 5) + (16 + 24));
  EXPECT_EQ(adafactorStateCount(tensors.data(), num, 2 * shard, total),
            (16 + 24) + 7);

  std::vector<float> p0(static_cast<size_t>(total));
  for (int64_t i = 0; i < total; ++i)
    p0[size_t(i)] = 0.05f * std::sin(0.37f * float(i));
  std::vector<std::vector<float>> grads;
  for (int s = 0; s < 3; ++s) {
    std::vector<float> g(static_cast<size_t>(total));
    for (int64_t i = 0; i < total; ++i)
      g[size_t(i)] = (0.1f + float(s)) * std::cos(0.11f * float(i * (s + 2)));
    grads.push_back(g);
  }

  std::vector<float> whole = p0;
  for (const AdafactorTensor &t : tensors) {
    const AdafactorShape &sh = t.shape;
    std::vector<float> rowVar(size_t(sh.batch * sh.rows), 0.0f);
    std::vector<float> colVar(size_t(sh.batch * sh.cols), 0.0f);
    std::vector<float> variance(size_t(sh.numel()), 0.0f);
    std::vector<double> sums(size_t(adafactorSumsCount(sh)));
    for (int s = 1; s <= 3; ++s) {
      AdafactorConstants k =
          adafactorConstants(1e-2, -0.8, -1.0, 1e-3, 1.0, 0.1, false, s);
      adafactorStep(ZRT_F32, grads[size_t(s - 1)].data() + t.offset,
                    whole.data() + t.offset, nullptr, sh, 1.0f, k,
                    rowVar.data(), colVar.data(), variance.data(), sums.data());
    }
  }

  std::vector<float> sharded = p0;
  int64_t sumsCount = adafactorShardSumsCount(tensors.data(), num);
  std::vector<std::vector<float>> states;
  std::vector<std::vector<double>> sums(
      static_cast<size_t>(ranks),
      std::vector<double>(static_cast<size_t>(sumsCount)));
  for (int64_t r = 0; r < ranks; ++r)
    states.emplace_back(size_t(adafactorStateCount(tensors.data(), num,
                                                   r * shard, (r + 1) * shard)),
                        0.0f);
  for (int s = 1; s <= 3; ++s) {
    AdafactorConstants k =
        adafactorConstants(1e-2, -0.8, -1.0, 1e-3, 1.0, 0.1, false, s);
    const float *g = grads[size_t(s - 1)].data();
    auto allReduce = [&](int64_t from, int64_t to) {
      for (int64_t i = from; i < to; ++i) {
        double sum = 0.0;
        for (int64_t r = 0; r < ranks; ++r)
          sum += sums[size_t(r)][size_t(i)];
        for (int64_t r = 0; r < ranks; ++r)
          sums[size_t(r)][size_t(i)] = sum;
      }
    };
    for (int64_t r = 0; r < ranks; ++r)
      adafactorShardSums(ZRT_F32, g + r * shard, sharded.data() + r * shard,
                         tensors.data(), num, r * shard, (r + 1) * shard, 1.0f,
                         sums[size_t(r)].data());
    allReduce(0, sumsCount - num);
    for (int64_t r = 0; r < ranks; ++r)
      adafactorShardUpdateSums(ZRT_F32, g + r * shard, tensors.data(), num,
                               r * shard, (r + 1) * shard, 1.0f, k,
                               states[size_t(r)].data(),
                               sums[size_t(r)].data());
    allReduce(sumsCount - num, sumsCount);
    for (int64_t r = 0; r < ranks; ++r)
      adafactorShardApply(ZRT_F32, g + r * shard, sharded.data() + r * shard,
                          nullptr, tensors.data(), num, r * shard,
                          (r + 1) * shard, 1.0f, k, states[size_t(r)].data(),
                          sums[size_t(r)].data());
  }
  EXPECT_EQ(sharded, whole);
  for (int64_t i = 1107; i < total; ++i)
    EXPECT_EQ(sharded[size_t(i)], p0[size_t(i)]) << "padding " << i;
  EXPECT_NE(sharded[5], p0[5]);
}

} // namespace
