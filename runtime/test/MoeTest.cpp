//===- MoeTest.cpp - Mixture-of-experts kernels against references -------===//
//
// Part of the zero-mlir project.
//
// Each MoE kernel (f32) against a float64 reference written here; the
// gradients against finite differences of those references in float64 with
// the selection held fixed; the router's ties against torch.topk's order
// (the expected indices were printed by torch 2.15 on the CPU).
//
//===----------------------------------------------------------------------===//

#include "Support/Types.h"
#include "zero_rt/scratch.h"
#include "zero_rt/zrt.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

namespace {

using Vec = std::vector<double>;

std::vector<float> randomFloats(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(gen);
  return v;
}

/// The fp32 scores of one row, as the router computes them (softmax or
/// sigmoid), in double.
Vec scores(const double *row, int64_t experts, bool sigmoid) {
  Vec s(experts);
  if (sigmoid) {
    for (int64_t e = 0; e < experts; ++e)
      s[e] = 1.0 / (1.0 + std::exp(-row[e]));
    return s;
  }
  double m = *std::max_element(row, row + experts), sum = 0;
  for (int64_t e = 0; e < experts; ++e)
    sum += s[e] = std::exp(row[e] - m);
  for (double &x : s)
    x /= sum;
  return s;
}

/// The router's weights of one row for a fixed selection.
Vec routerWeights(const double *row, int64_t experts, const int32_t *sel,
                  int64_t k, bool sigmoid, bool normalize, double scale,
                  double eps = 0) {
  Vec s = scores(row, experts, sigmoid), w(k);
  double sum = eps;
  for (int64_t j = 0; j < k; ++j)
    sum += s[sel[j]];
  for (int64_t j = 0; j < k; ++j)
    w[j] = (normalize ? s[sel[j]] / sum : s[sel[j]]) * scale;
  return w;
}

std::vector<int32_t> routeIndices(const std::vector<float> &logits,
                                  int64_t tokens, int64_t experts, int64_t k,
                                  const float *bias = nullptr,
                                  int32_t sigmoid = 0, int64_t groups = 0,
                                  int64_t topGroups = 0) {
  std::vector<float> w(tokens * k);
  std::vector<int32_t> idx(tokens * k);
  zrt_moe_router(ZRT_F32, logits.data(), bias, w.data(), ZRT_I32, idx.data(),
                 tokens, experts, k, sigmoid, 1, 1.0, groups, topGroups, 0.0);
  return idx;
}

TEST(MoeRouter, TiesInTorchTopkOrder) {
  struct Case {
    int64_t experts, k;
    std::vector<int32_t> expected;
  };
  // torch.topk(torch.softmax(torch.zeros(1, E), -1), k).indices.
  for (const Case &c :
       {Case{4, 2, {2, 3}}, Case{8, 2, {6, 5}}, Case{40, 4, {28, 26, 27, 25}},
        Case{128, 2, {0, 1}}, Case{6, 3, {3, 5, 4}}, Case{64, 1, {0}},
        Case{4, 1, {2}}}) {
    std::vector<float> zeros(c.experts, 0.0f);
    EXPECT_EQ(routeIndices(zeros, 1, c.experts, c.k), c.expected)
        << c.experts << " experts, top " << c.k;
  }
  // Partial ties: torch.topk(softmax([1, 3, 3, 1, 3, 0]), 3) is 2, 4, 1.
  std::vector<float> row{1, 3, 3, 1, 3, 0};
  EXPECT_EQ(routeIndices(row, 1, 6, 3), (std::vector<int32_t>{2, 4, 1}));
}

TEST(MoeRouter, WeightsAgainstReference) {
  const int64_t tokens = 7, experts = 6, k = 3;
  std::vector<float> logits = randomFloats(tokens * experts, 1);
  std::vector<float> bias = randomFloats(experts, 2, 0.5f);
  for (int32_t sigmoid : {0, 1})
    for (int32_t normalize : {0, 1})
      for (const float *b :
           {(const float *)nullptr, (const float *)bias.data()}) {
        double scale = 2.5;
        std::vector<float> w(tokens * k);
        std::vector<int64_t> idx(tokens * k);
        zrt_moe_router(ZRT_F32, logits.data(), b, w.data(), ZRT_I64, idx.data(),
                       tokens, experts, k, sigmoid, normalize, scale, 0, 0,
                       0.0);
        for (int64_t t = 0; t < tokens; ++t) {
          Vec row(logits.begin() + t * experts,
                  logits.begin() + (t + 1) * experts);
          Vec s = scores(row.data(), experts, sigmoid);
          // The selection: the k largest keys, in decreasing order.
          std::vector<int32_t> order(experts);
          std::iota(order.begin(), order.end(), 0);
          auto key = [&](int e) { return s[e] + (b ? b[e] : 0.0); };
          std::stable_sort(order.begin(), order.end(),
                           [&](int a, int c) { return key(a) > key(c); });
          Vec ref = routerWeights(row.data(), experts, order.data(), k, sigmoid,
                                  normalize, scale);
          for (int64_t j = 0; j < k; ++j) {
            EXPECT_EQ(idx[t * k + j], order[j]) << "token " << t;
            EXPECT_NEAR(w[t * k + j], ref[j], 1e-6 * scale);
          }
        }
      }
}

// With eps 0.5 (not DeepSeek-V3's 1e-20, which no difference could see)
// the normalization's denominator is visibly sum + eps.
TEST(MoeRouter, GradientAgainstFiniteDifferences) {
  const int64_t tokens = 5, experts = 6, k = 2;
  std::vector<float> logits = randomFloats(tokens * experts, 3);
  std::vector<float> dw = randomFloats(tokens * k, 4);
  for (double eps : {0.0, 0.5})
    for (int32_t sigmoid : {0, 1})
      for (int32_t normalize : {0, 1}) {
        double scale = 1.5;
        std::vector<float> w(tokens * k), dl(tokens * experts);
        std::vector<int32_t> idx(tokens * k);
        zrt_moe_router(ZRT_F32, logits.data(), nullptr, w.data(), ZRT_I32,
                       idx.data(), tokens, experts, k, sigmoid, normalize,
                       scale, 0, 0, eps);
        zrt_moe_router_grad(ZRT_F32, logits.data(), ZRT_I32, idx.data(),
                            dw.data(), dl.data(), tokens, experts, k, sigmoid,
                            normalize, scale, eps);
        for (int64_t t = 0; t < tokens; ++t) {
          Vec row(logits.begin() + t * experts,
                  logits.begin() + (t + 1) * experts);
          auto f = [&](const Vec &r) {
            Vec wr = routerWeights(r.data(), experts, idx.data() + t * k, k,
                                   sigmoid, normalize, scale, eps);
            double v = 0;
            for (int64_t j = 0; j < k; ++j)
              v += wr[j] * dw[t * k + j];
            return v;
          };
          for (int64_t e = 0; e < experts; ++e) {
            Vec hi = row, lo = row;
            hi[e] += 1e-6;
            lo[e] -= 1e-6;
            double fd = (f(hi) - f(lo)) / 2e-6;
            EXPECT_NEAR(dl[t * experts + e], fd, 1e-5)
                << "eps " << eps << " sigmoid " << sigmoid << " normalize "
                << normalize << " token " << t << " expert " << e;
          }
        }
      }
}

/// DeepSeek-V3's group-limited selection of one row in float64, step by
/// step as transformers' DeepseekV3TopkRouter: keys s + bias, a group's
/// score the sum of its 2 largest keys, the topGroups best groups, the
/// top k keys of their experts in decreasing order (no ties here).
std::vector<int32_t> groupLimitedReference(const Vec &s, const float *bias,
                                           int64_t groups, int64_t topGroups,
                                           int64_t k) {
  int64_t experts = s.size(), size = experts / groups;
  Vec key(experts);
  for (int64_t e = 0; e < experts; ++e)
    key[e] = s[e] + bias[e];
  std::vector<std::pair<double, int64_t>> group(groups);
  for (int64_t g = 0; g < groups; ++g) {
    Vec part(key.begin() + g * size, key.begin() + (g + 1) * size);
    std::sort(part.rbegin(), part.rend());
    group[g] = {part[0] + part[1], g};
  }
  std::sort(group.begin(), group.end(),
            [](auto a, auto b) { return a.first > b.first; });
  std::vector<bool> kept(groups, false);
  for (int64_t j = 0; j < topGroups; ++j)
    kept[group[j].second] = true;
  std::vector<int32_t> order(experts);
  std::iota(order.begin(), order.end(), 0);
  auto masked = [&](int e) {
    return kept[e / size] ? key[e] : -std::numeric_limits<double>::infinity();
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return masked(a) > masked(b); });
  order.resize(k);
  return order;
}

TEST(MoeRouter, GroupLimitedAgainstReference) {
  const int64_t tokens = 9, experts = 16, groups = 4, topGroups = 2, k = 4;
  const double scale = 2.5, eps = 1e-20;
  std::vector<float> logits = randomFloats(tokens * experts, 11);
  std::vector<float> bias = randomFloats(experts, 12, 0.3f);
  std::vector<float> w(tokens * k);
  std::vector<int32_t> idx(tokens * k);
  zrt_moe_router(ZRT_F32, logits.data(), bias.data(), w.data(), ZRT_I32,
                 idx.data(), tokens, experts, k, 1, 1, scale, groups, topGroups,
                 eps);
  int64_t differs = 0;
  for (int64_t t = 0; t < tokens; ++t) {
    Vec row(logits.begin() + t * experts, logits.begin() + (t + 1) * experts);
    Vec s = scores(row.data(), experts, true);
    std::vector<int32_t> want =
        groupLimitedReference(s, bias.data(), groups, topGroups, k);
    std::vector<int32_t> got(idx.begin() + t * k, idx.begin() + (t + 1) * k);
    EXPECT_EQ(got, want) << "token " << t;
    // The groups change the choice of some tokens (else this tests nothing).
    std::vector<int32_t> plain =
        groupLimitedReference(s, bias.data(), groups, groups, k);
    differs += plain != want;
    Vec ref = routerWeights(row.data(), experts, want.data(), k, true, true,
                            scale, eps);
    for (int64_t j = 0; j < k; ++j)
      EXPECT_NEAR(w[t * k + j], ref[j], 1e-6 * scale) << "token " << t;
  }
  EXPECT_GT(differs, 0);
}

// Equal group scores: the kept groups, and then the experts, are those of
// torch.topk's selection. The expected indices were printed by torch 2.15
// on the CPU for transformers' DeepseekV3TopkRouter steps on sigmoid scores
// without bias.
TEST(MoeRouter, GroupTiesInTorchTopkOrder) {
  struct Case {
    std::vector<float> row;
    int64_t groups, topGroups, k;
    std::vector<int32_t> expected;
  };
  std::vector<float> partial{2, 2, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0};
  for (const Case &c : {
           Case{std::vector<float>(16, 0.0f), 4, 2, 4, {10, 11, 12, 9}},
           Case{std::vector<float>(16, 0.0f), 8, 3, 2, {9, 11}},
           Case{std::vector<float>(12, 0.0f), 6, 4, 5, {9, 7, 8, 6, 10}},
           Case{std::vector<float>(64, 0.0f),
                32,
                5,
                6,
                {44, 41, 42, 43, 46, 47}},
           // Group 0 first, then one of the three tied groups (2).
           Case{partial, 4, 2, 3, {1, 0, 9}},
       }) {
    int64_t experts = c.row.size();
    EXPECT_EQ(
        routeIndices(c.row, 1, experts, c.k, nullptr, 1, c.groups, c.topGroups),
        c.expected)
        << experts << " experts, " << c.groups << " groups, top "
        << c.topGroups;
  }
}

// Logits near -40: the chosen sigmoid scores sum to about 1e-17, where
// DeepSeek-V3's + 1e-20 in the denominator is a relative 1e-3.
TEST(MoeRouter, NormEpsAgainstReference) {
  const int64_t tokens = 3, experts = 8, k = 2;
  const double eps = 1e-20;
  std::vector<float> logits = randomFloats(tokens * experts, 13);
  for (float &l : logits)
    l -= 40.0f;
  std::vector<float> w(tokens * k), plain(tokens * k);
  std::vector<int32_t> idx(tokens * k);
  zrt_moe_router(ZRT_F32, logits.data(), nullptr, w.data(), ZRT_I32, idx.data(),
                 tokens, experts, k, 1, 1, 1.0, 0, 0, eps);
  zrt_moe_router(ZRT_F32, logits.data(), nullptr, plain.data(), ZRT_I32,
                 idx.data(), tokens, experts, k, 1, 1, 1.0, 0, 0, 0.0);
  for (int64_t t = 0; t < tokens; ++t) {
    Vec row(logits.begin() + t * experts, logits.begin() + (t + 1) * experts);
    Vec ref = routerWeights(row.data(), experts, idx.data() + t * k, k, true,
                            true, 1.0, eps);
    double sum = 0;
    for (int64_t j = 0; j < k; ++j) {
      EXPECT_NEAR(w[t * k + j], ref[j], 1e-6 * ref[j]) << "token " << t;
      sum += w[t * k + j];
    }
    EXPECT_LT(sum, 1.0 - 1e-4) << "token " << t;
    EXPECT_NEAR(plain[t * k] + plain[t * k + 1], 1.0, 1e-6) << "token " << t;
  }
}

TEST(MoeDispatch, StableSortCountsAndRows) {
  const int64_t tokens = 9, dim = 5, k = 2, experts = 4;
  std::vector<int32_t> idx{3, 1, 0, 3, 1, 3, 3, 0, 1,
                           2, 0, 1, 3, 1, 0, 2, 1, 0};
  std::vector<float> x = randomFloats(tokens * dim, 5);
  std::vector<float> rows(tokens * k * dim, -1.0f);
  std::vector<int32_t> pos(tokens * k), offs(experts);
  zrt_moe_dispatch(ZRT_F32, x.data(), ZRT_I32, idx.data(), rows.data(),
                   pos.data(), offs.data(), tokens, dim, k, experts);
  // The reference: pairs in expert order, each expert's in pair order.
  std::vector<int32_t> order(tokens * k);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return idx[a] < idx[b]; });
  std::vector<int32_t> ends(experts, 0);
  for (int32_t e : idx)
    ++ends[e];
  std::partial_sum(ends.begin(), ends.end(), ends.begin());
  EXPECT_EQ(offs, ends);
  for (int64_t s = 0; s < tokens * k; ++s) {
    EXPECT_EQ(pos[order[s]], s);
    for (int64_t c = 0; c < dim; ++c)
      EXPECT_EQ(rows[s * dim + c], x[(order[s] / k) * dim + c]);
  }
}

TEST(MoeDispatch, EveryTokenToOneExpert) {
  const int64_t tokens = 6, dim = 3, k = 1, experts = 4;
  std::vector<int64_t> idx(tokens, 2), pos(tokens), offs(experts);
  std::vector<float> x = randomFloats(tokens * dim, 6), rows(tokens * dim);
  zrt_moe_dispatch(ZRT_F32, x.data(), ZRT_I64, idx.data(), rows.data(),
                   pos.data(), offs.data(), tokens, dim, k, experts);
  EXPECT_EQ(offs, (std::vector<int64_t>{0, 0, 6, 6}));
  EXPECT_EQ(rows, x);
}

TEST(MoeDispatch, GradientSumsEachTokensRows) {
  const int64_t tokens = 4, dim = 3, k = 2;
  std::vector<int32_t> pos{5, 0, 3, 7, 1, 6, 2, 4};
  std::vector<float> drows = randomFloats(tokens * k * dim, 7);
  std::vector<float> dx(tokens * dim);
  zrt_moe_dispatch_grad(ZRT_F32, drows.data(), ZRT_I32, pos.data(), dx.data(),
                        tokens, dim, k);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t c = 0; c < dim; ++c)
      EXPECT_NEAR(dx[t * dim + c],
                  double(drows[pos[t * k] * dim + c]) +
                      drows[pos[t * k + 1] * dim + c],
                  1e-6);
}

/// y [rows, out] of a grouped product in double.
Vec groupedReference(const std::vector<float> &x, const std::vector<float> &w,
                     const std::vector<int32_t> &offs, int64_t rows, int64_t in,
                     int64_t out, bool transposeW) {
  Vec y(rows * out, 0.0);
  int64_t start = 0;
  for (size_t e = 0; e < offs.size(); ++e) {
    for (int64_t s = start; s < offs[e]; ++s)
      for (int64_t f = 0; f < out; ++f)
        for (int64_t d = 0; d < in; ++d)
          y[s * out + f] +=
              double(x[s * in + d]) *
              w[e * in * out + (transposeW ? f * in + d : d * out + f)];
    start = offs[e];
  }
  return y;
}

TEST(GroupedMatmul, BothLayoutsAgainstReference) {
  const int64_t rows = 11, in = 5, out = 7, experts = 4;
  // Expert 1 has no rows; the last two rows belong to none.
  std::vector<int32_t> offs{3, 3, 6, 9};
  std::vector<float> x = randomFloats(rows * in, 8);
  std::vector<float> w = randomFloats(experts * in * out, 9);
  for (int32_t t : {0, 1}) {
    std::vector<float> y(rows * out, 42.0f);
    zrt_grouped_matmul(ZRT_F32, x.data(), w.data(), ZRT_I32, offs.data(),
                       y.data(), rows, in, out, experts, t);
    Vec ref = groupedReference(x, w, offs, rows, in, out, t);
    for (int64_t i = 0; i < rows * out; ++i)
      EXPECT_NEAR(y[i], ref[i], 1e-5) << "transpose " << t << " at " << i;
  }
}

TEST(GroupedMatmul, WeightGradientBothLayouts) {
  const int64_t rows = 10, in = 4, out = 3, experts = 3;
  std::vector<int32_t> offs{4, 4, 10}; // expert 1 gets zeros
  std::vector<int64_t> offs64(offs.begin(), offs.end());
  std::vector<float> x = randomFloats(rows * in, 10);
  std::vector<float> dy = randomFloats(rows * out, 11);
  for (int32_t t : {0, 1}) {
    std::vector<float> dw(experts * in * out, 42.0f);
    zrt_grouped_matmul_weight_grad(ZRT_F32, x.data(), dy.data(), ZRT_I64,
                                   offs64.data(), dw.data(), rows, in, out,
                                   experts, t);
    int64_t start = 0;
    for (int64_t e = 0; e < experts; ++e) {
      for (int64_t d = 0; d < in; ++d)
        for (int64_t f = 0; f < out; ++f) {
          double ref = 0;
          for (int64_t s = start; s < offs[e]; ++s)
            ref += double(x[s * in + d]) * dy[s * out + f];
          int64_t at = e * in * out + (t ? f * in + d : d * out + f);
          EXPECT_NEAR(dw[at], ref, 1e-5) << "transpose " << t;
        }
      start = offs[e];
    }
  }
}

/// Values of T widened back to f32, and the raw 16-bit storage.
template <typename T>
struct Rounded {
  std::vector<T> stored;
  std::vector<float> values;
};
template <typename T>
Rounded<T> roundTo(const std::vector<float> &v) {
  Rounded<T> r{std::vector<T>(v.size()), std::vector<float>(v.size())};
  for (size_t i = 0; i < v.size(); ++i) {
    r.stored[i] = zrt::fromFloat<T>(v[i]);
    r.values[i] = zrt::toFloat(r.stored[i]);
  }
  return r;
}

/// The 16-bit kernels round fp32 sums once: against a double reference on
/// the same (rounded) inputs, the error is half an ulp of T (2^-8 relative
/// for bf16's 8 significant bits, 2^-11 for f16's 11) plus fp32 summation
/// error, far below 1e-4 absolute at these sizes and magnitudes.
double tolerance16(int32_t dtype, double ref) {
  return std::fabs(ref) * (dtype == ZRT_BF16 ? 0x1p-8 : 0x1p-11) + 1e-4;
}

template <typename T>
void checkGrouped16(int32_t dtype) {
  // Wider than one 512-column panel and taller than one 512-row panel, so
  // the panels' seams are crossed; expert 1 has no rows, the last 50 rows
  // belong to none.
  const int64_t rows = 700, in = 16, out = 530, experts = 3;
  std::vector<int32_t> offs{300, 300, 650};
  Rounded<T> x = roundTo<T>(randomFloats(rows * in, 21));
  Rounded<T> w = roundTo<T>(randomFloats(experts * in * out, 22));
  Rounded<T> dy = roundTo<T>(randomFloats(rows * out, 23));
  for (int32_t t : {0, 1}) {
    std::vector<T> y(rows * out, zrt::fromFloat<T>(42.0f));
    zrt_memory_reset_peak();
    zrt_grouped_matmul(dtype, x.stored.data(), w.stored.data(), ZRT_I32,
                       offs.data(), y.data(), rows, in, out, experts, t);
    EXPECT_EQ(zrt_scratch_peak_bytes(),
              zrt_scratch_grouped_matmul(dtype, rows, in, out));
    Vec ref = groupedReference(x.values, w.values, offs, rows, in, out, t);
    int64_t bad = 0;
    for (int64_t i = 0; i < rows * out; ++i)
      bad +=
          std::fabs(zrt::toFloat(y[i]) - ref[i]) > tolerance16(dtype, ref[i]);
    EXPECT_EQ(bad, 0) << "forward, transpose " << t;

    std::vector<T> dw(experts * in * out, zrt::fromFloat<T>(42.0f));
    zrt_memory_reset_peak();
    zrt_grouped_matmul_weight_grad(dtype, x.stored.data(), dy.stored.data(),
                                   ZRT_I32, offs.data(), dw.data(), rows, in,
                                   out, experts, t);
    EXPECT_EQ(zrt_scratch_peak_bytes(),
              zrt_scratch_grouped_matmul_weight_grad(dtype, rows, in, out));
    EXPECT_EQ(zrt_scratch_bytes_in_use(), 0);
    int64_t start = 0;
    bad = 0;
    for (int64_t e = 0; e < experts; ++e) {
      for (int64_t d = 0; d < in; ++d)
        for (int64_t f = 0; f < out; ++f) {
          double ref = 0;
          for (int64_t s = start; s < offs[e]; ++s)
            ref += double(x.values[s * in + d]) * dy.values[s * out + f];
          int64_t at = e * in * out + (t ? f * in + d : d * out + f);
          bad +=
              std::fabs(zrt::toFloat(dw[at]) - ref) > tolerance16(dtype, ref);
        }
      start = offs[e];
    }
    EXPECT_EQ(bad, 0) << "weight gradient, transpose " << t;
  }
}

TEST(GroupedMatmul, Bf16AgainstFp32Reference) {
  checkGrouped16<zrt::BF16>(ZRT_BF16);
}
TEST(GroupedMatmul, F16AgainstFp32Reference) {
  checkGrouped16<zrt::F16>(ZRT_F16);
}

TEST(GroupedMatmul, ScratchIsThePanelsOf16BitTypes) {
  EXPECT_EQ(zrt_scratch_grouped_matmul(ZRT_F32, 700, 16, 530), 0);
  EXPECT_EQ(zrt_scratch_grouped_matmul_weight_grad(ZRT_F32, 700, 16, 530), 0);
  // fp32 panels: x [512, 16], w [16, 512], y [512, 512].
  EXPECT_EQ(zrt_scratch_grouped_matmul(ZRT_BF16, 700, 16, 530),
            4 * (512 * 16 + 16 * 512 + 512 * 512));
  // x^T [16, 700], dy [700, 512], dw [16, 512]; the transposed layout's
  // panels swap roles but not size.
  EXPECT_EQ(zrt_scratch_grouped_matmul_weight_grad(ZRT_F16, 700, 16, 530),
            4 * (16 * 700 + 700 * 512 + 16 * 512));
}

TEST(MoeCombine, WeightedSumAndGradients) {
  const int64_t tokens = 4, dim = 3, k = 2;
  std::vector<int32_t> pos{5, 0, 3, 7, 1, 6, 2, 4};
  std::vector<float> rows = randomFloats(tokens * k * dim, 12);
  std::vector<float> w = randomFloats(tokens * k, 13);
  std::vector<float> dout = randomFloats(tokens * dim, 14);
  std::vector<float> out(tokens * dim), drows(tokens * k * dim, 42.0f),
      dw(tokens * k);
  zrt_moe_combine(ZRT_F32, rows.data(), ZRT_I32, pos.data(), w.data(),
                  out.data(), tokens, dim, k);
  zrt_moe_combine_grad(ZRT_F32, rows.data(), ZRT_I32, pos.data(), w.data(),
                       dout.data(), drows.data(), dw.data(), tokens, dim, k);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t c = 0; c < dim; ++c) {
      double ref = 0;
      for (int64_t j = 0; j < k; ++j)
        ref += double(w[t * k + j]) * rows[pos[t * k + j] * dim + c];
      EXPECT_NEAR(out[t * dim + c], ref, 1e-6);
    }
    for (int64_t j = 0; j < k; ++j) {
      int64_t p = pos[t * k + j];
      double dot = 0;
      for (int64_t c = 0; c < dim; ++c) {
        EXPECT_NEAR(drows[p * dim + c],
                    double(w[t * k + j]) * dout[t * dim + c], 1e-6);
        dot += double(dout[t * dim + c]) * rows[p * dim + c];
      }
      EXPECT_NEAR(dw[t * k + j], dot, 1e-5);
    }
  }
}

/// transformers' load_balancing_loss_func on logits [rows, experts] in
/// double, with the selections given.
double auxReference(const Vec &logits, int64_t rows, int64_t experts,
                    const std::vector<int32_t> &sel, int64_t k) {
  Vec counts(experts, 0.0), sums(experts, 0.0);
  for (int64_t n = 0; n < rows; ++n) {
    Vec s = scores(logits.data() + n * experts, experts, false);
    for (int64_t e = 0; e < experts; ++e)
      sums[e] += s[e];
    for (int64_t j = 0; j < k; ++j)
      counts[sel[n * k + j]] += 1;
  }
  double loss = 0;
  for (int64_t e = 0; e < experts; ++e)
    loss += counts[e] / rows * sums[e] / rows;
  return loss * experts;
}

TEST(MoeAuxLoss, LossAndGradientAgainstReference) {
  const int64_t rows = 12, experts = 5, k = 2;
  std::vector<float> logits = randomFloats(rows * experts, 15);
  // Two rows of ties: their selections follow torch.topk.
  std::fill(logits.begin(), logits.begin() + 2 * experts, 0.0f);
  std::vector<int32_t> sel = routeIndices(logits, rows, experts, k);
  Vec l(logits.begin(), logits.end());
  float loss = 0;
  zrt_moe_aux_loss(ZRT_F32, logits.data(), &loss, rows, experts, k);
  EXPECT_NEAR(loss, auxReference(l, rows, experts, sel, k), 1e-6);

  float dloss = 0.75f;
  std::vector<float> dl(rows * experts);
  zrt_moe_aux_loss_grad(ZRT_F32, logits.data(), &dloss, dl.data(), rows,
                        experts, k);
  for (int64_t i = 0; i < rows * experts; ++i) {
    Vec hi = l, lo = l;
    hi[i] += 1e-6;
    lo[i] -= 1e-6;
    double fd = dloss *
                (auxReference(hi, rows, experts, sel, k) -
                 auxReference(lo, rows, experts, sel, k)) /
                2e-6;
    EXPECT_NEAR(dl[i], fd, 1e-6) << "at " << i;
  }
}

// A batch divided in two halves: each half's loss from the summed counts
// over the 12 rows; the mean of the halves' losses is the whole batch's,
// and the halves' gradients are twice its gradient (the optimizer divides
// their sum by the 2 ranks).
TEST(MoeAuxLoss, DividedBatchFromSummedCounts) {
  const int64_t rows = 12, half = 6, experts = 5, k = 2;
  std::vector<float> logits = randomFloats(rows * experts, 16);
  std::fill(logits.begin(), logits.begin() + 2 * experts, 0.0f);
  std::vector<int32_t> sel = routeIndices(logits, rows, experts, k);
  std::vector<int64_t> counts(experts), part(experts);
  zrt_moe_expert_counts(ZRT_F32, logits.data(), counts.data(), rows, experts,
                        k);
  std::vector<int64_t> expected(experts, 0);
  for (int32_t e : sel)
    ++expected[e];
  EXPECT_EQ(counts, expected);
  std::vector<int64_t> sum(experts, 0);
  for (int64_t h = 0; h < 2; ++h) {
    zrt_moe_expert_counts(ZRT_F32, logits.data() + h * half * experts,
                          part.data(), half, experts, k);
    for (int64_t e = 0; e < experts; ++e)
      sum[e] += part[e];
  }
  EXPECT_EQ(sum, counts);

  float whole = 0, dloss = 0.75f;
  zrt_moe_aux_loss(ZRT_F32, logits.data(), &whole, rows, experts, k);
  std::vector<float> dl(rows * experts), dh(rows * experts);
  zrt_moe_aux_loss_grad(ZRT_F32, logits.data(), &dloss, dl.data(), rows,
                        experts, k);
  double mean = 0;
  for (int64_t h = 0; h < 2; ++h) {
    float loss = 0;
    const float *at = logits.data() + h * half * experts;
    zrt_moe_aux_loss_counts(ZRT_F32, at, counts.data(), &loss, half, experts, k,
                            rows);
    mean += loss / 2.0;
    zrt_moe_aux_loss_counts_grad(ZRT_F32, at, counts.data(), &dloss,
                                 dh.data() + h * half * experts, half, experts,
                                 k, rows);
  }
  EXPECT_NEAR(mean, whole, 1e-6);
  for (int64_t i = 0; i < rows * experts; ++i)
    EXPECT_NEAR(dh[i] / 2.0, dl[i], 1e-8) << "at " << i;
}

TEST(MoeScratch, PlannedBytes) {
  // The queue of (score, expert) pairs and the scores; then the counts and
  // sums of the auxiliary loss.
  EXPECT_EQ(zrt_scratch_moe_router(8), 8 * 20);
  // Grouped: the groups' (score, group) queue and a kept flag each.
  EXPECT_EQ(zrt_scratch_moe_router_grouped(16, 4), 16 * 20 + 4 * 17);
  EXPECT_EQ(zrt_scratch_moe_aux_loss(8), 8 * 36);
}

} // namespace
