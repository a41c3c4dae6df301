//===- OptimizerTest.cpp - Overflow check, Adam, loss scaler --------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "Kernels/Kernels.h"
#include "TestUtil.h"
#include "zero_rt/optimizers.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace zrt_test;

namespace {

class OptimizerTest : public ::testing::TestWithParam<int32_t> {
protected:
  int32_t dtype() const { return GetParam(); }
  std::mt19937 rng{7};
};

double maxAbs(const std::vector<double> &v) {
  double m = 0;
  for (double x : v)
    m = std::max(m, std::fabs(x));
  return m;
}

std::vector<float> check(int32_t dtype, std::vector<Buffer> &bufs,
                         float scale) {
  std::vector<const void *> ptrs;
  std::vector<int64_t> counts;
  for (Buffer &b : bufs) {
    ptrs.push_back(b.data());
    counts.push_back(b.size());
  }
  std::vector<float> stats(2, -1.0f);
  zrt_check_overflow(dtype, ptrs.data(), counts.data(), int32_t(bufs.size()),
                     scale, stats.data());
  return stats;
}

TEST_P(OptimizerTest, CheckOverflow) {
  float scale = dtype() == ZRT_F16 ? 1024.0f : 1.0f;
  std::vector<Buffer> bufs;
  for (int64_t n : {1, 1000, 70000, 33, 0, 200001})
    bufs.push_back(randomBuffer(dtype(), rng, n, -8, 8));
  double want = 0;
  for (Buffer &b : bufs)
    for (double v : b.values())
      want += v * v;
  want /= double(scale) * scale;
  std::vector<float> stats = check(dtype(), bufs, scale);
  EXPECT_EQ(stats[0], 0.0f);
  EXPECT_NEAR(stats[1], want, 1e-5 * want);

  for (double bad : {std::numeric_limits<double>::infinity(),
                     -std::numeric_limits<double>::infinity(),
                     std::numeric_limits<double>::quiet_NaN()}) {
    for (size_t which : {0, 2, 5}) {
      double old = bufs[which].get(bufs[which].size() - 1);
      bufs[which].set(bufs[which].size() - 1, bad);
      EXPECT_EQ(check(dtype(), bufs, scale)[0], 1.0f)
          << bad << " in buffer " << which;
      bufs[which].set(bufs[which].size() - 1, old);
    }
  }
  // The largest finite values are not overflows.
  bufs[1].set(3, dtype() == ZRT_F16 ? 65504.0 : 3e38);
  EXPECT_EQ(check(dtype(), bufs, scale)[0], 0.0f);
}

/// torch.optim.Adam / AdamW in double, with DeepSpeed-style unscaling and
/// torch-style global-norm clipping.
struct RefAdam {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, wd = 0.1;
  bool adamw;
  std::vector<double> p, m, v;

  void step(const std::vector<double> &g, int64_t t, double lossScale,
            double clip) {
    for (size_t i = 0; i < p.size(); ++i) {
      double gi = g[i] * clip / lossScale;
      if (adamw)
        p[i] *= 1 - lr * wd;
      else
        gi += wd * p[i];
      m[i] = beta1 * m[i] + (1 - beta1) * gi;
      v[i] = beta2 * v[i] + (1 - beta2) * gi * gi;
      double denom = std::sqrt(v[i]) / std::sqrt(1 - std::pow(beta2, t)) + eps;
      p[i] -= lr / (1 - std::pow(beta1, t)) * m[i] / denom;
    }
  }
};

TEST_P(OptimizerTest, AdamMatchesTorchSemantics) {
  int64_t n = 3001; // odd: exercises block tails
  for (int adamw = 0; adamw < 2; ++adamw) {
    for (double maxNorm : {0.0, 1.0}) {
      double lossScale = dtype() == ZRT_F16 ? 512.0 : 1.0;
      RefAdam ref;
      ref.adamw = adamw;
      ref.p = randomValues(rng, n);
      ref.m.assign(static_cast<size_t>(n), 0.0);
      ref.v.assign(static_cast<size_t>(n), 0.0);
      std::vector<float> master(ref.p.begin(), ref.p.end()),
          m(static_cast<size_t>(n), 0), v(static_cast<size_t>(n), 0);
      for (size_t i = 0; i < ref.p.size(); ++i)
        ref.p[i] = master[i];
      Buffer param(dtype(), n);
      for (int64_t t = 1; t <= 5; ++t) {
        // Scaled gradients with a norm well above 1 (so clipping acts).
        std::vector<Buffer> grad;
        grad.push_back(
            randomBuffer(dtype(), rng, n, -0.1 * lossScale, 0.1 * lossScale));
        std::vector<float> stats = check(dtype(), grad, float(lossScale));
        double norm = std::sqrt(double(stats[1]));
        double clip = maxNorm > 0 && norm + 1e-6 > maxNorm
                          ? maxNorm / (norm + 1e-6)
                          : 1.0;
        EXPECT_FLOAT_EQ(zrt_clip_coefficient(stats.data(), maxNorm),
                        float(clip));
        zrt_test::adamStep(dtype(), grad[0].data(), master.data(), m.data(),
                           v.data(), param.data(), n, t, ref.lr, ref.beta1,
                           ref.beta2, ref.eps, ref.wd, adamw, 1, nullptr,
                           nullptr, nullptr, 0, maxNorm, stats.data(),
                           float(lossScale), 0);
        ref.step(grad[0].values(), t, lossScale, clip);
      }
      std::string what = std::string(adamw ? "adamw" : "adam") + " clip " +
                         std::to_string(maxNorm);
      expectClose(std::vector<double>(master.begin(), master.end()), ref.p,
                  1e-6, 1e-7, what + " params");
      // Moments near zero come from cancellation (L2 term against the
      // gradient): bound their error by the moments' scale.
      expectClose(std::vector<double>(m.begin(), m.end()), ref.m, 1e-5,
                  1e-6 * maxAbs(ref.m), what + " exp_avg");
      expectClose(std::vector<double>(v.begin(), v.end()), ref.v, 1e-5,
                  1e-6 * maxAbs(ref.v), what + " exp_avg_sq");
      // The compute copy is the master rounded to the dtype.
      expectClose(
          param,
          Buffer(dtype(), std::vector<double>(master.begin(), master.end()))
              .values(),
          0, 0, what + " copy");
    }
  }
}

TEST_P(OptimizerTest, AdamSkipWritesCopyOnly) {
  int64_t n = 100;
  std::vector<float> master(static_cast<size_t>(n), 0.3f),
      m(static_cast<size_t>(n), 0.1f), v(static_cast<size_t>(n), 0.2f);
  Buffer grad = randomBuffer(dtype(), rng, n), param(dtype(), n);
  float stats[2] = {1.0f, 0.0f};
  zrt_test::adamStep(dtype(), grad.data(), master.data(), m.data(), v.data(),
                     param.data(), n, 3, 1e-3, 0.9, 0.999, 1e-8, 0.0, 1, 1,
                     nullptr, nullptr, nullptr, 0, 1.0, stats, 1.0f, 1);
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(master[i], 0.3f);
    EXPECT_EQ(m[i], 0.1f);
    EXPECT_EQ(v[i], 0.2f);
    EXPECT_EQ(param.get(i), roundTo(dtype(), 0.3));
  }
}

// bf16 masters (DeepSpeed's bf16_master_weights_and_grads, no fp32 copy):
// each step of zrt_optimizer_step widens the bf16 parameter, runs the fp32
// update and rounds it back to nearest even. Against RefAdam in double
// restarted from the widened parameter each step and rounded: equal but where
// the fp32 update lands within its rounding error of a bf16 midpoint (rare;
// bounded below), and never more than one bf16 ulp apart. A skipped step leaves
// the parameters as they are.
TEST(AdamTest, Bf16ParamsAsMasters) {
  const int64_t n = 5001;
  std::mt19937 rng{11};
  for (int adamw = 0; adamw < 2; ++adamw) {
    Buffer param(ZRT_BF16, randomValues(rng, n));
    std::vector<float> m(n, 0.0f), v(n, 0.0f);
    RefAdam ref;
    ref.adamw = adamw;
    ref.lr = 1e-2;
    ref.m.assign(size_t(n), 0.0);
    ref.v.assign(size_t(n), 0.0);
    int64_t differ = 0, moved = 0;
    for (int64_t t = 1; t <= 4; ++t) {
      Buffer grad = randomBuffer(ZRT_BF16, rng, n, -0.1, 0.1);
      std::vector<double> before = param.values();
      float stats[2] = {0, 1.0f};
      zrt_test::adamStep(ZRT_BF16, grad.data(), nullptr, m.data(), v.data(),
                         param.data(), n, t, ref.lr, ref.beta1, ref.beta2,
                         ref.eps, ref.wd, adamw, 1, nullptr, nullptr, nullptr,
                         0, 0.0, stats, 1.0f, 0);
      ref.p = before;
      ref.step(grad.values(), t, 1.0, 1.0);
      std::vector<double> want = Buffer(ZRT_BF16, ref.p).values();
      std::vector<double> got = param.values();
      for (int64_t i = 0; i < n; ++i) {
        double mag = std::max(std::fabs(want[size_t(i)]), 1e-30);
        double ulp = std::ldexp(1.0, std::ilogb(mag) - 7);
        ASSERT_LE(std::fabs(got[size_t(i)] - want[size_t(i)]), ulp)
            << "step " << t << " element " << i;
        differ += got[size_t(i)] != want[size_t(i)];
        moved += got[size_t(i)] != before[size_t(i)];
      }
      float skip[2] = {1.0f, 0.0f};
      zrt_test::adamStep(ZRT_BF16, grad.data(), nullptr, m.data(), v.data(),
                         param.data(), n, t + 1, ref.lr, ref.beta1, ref.beta2,
                         ref.eps, ref.wd, adamw, 1, nullptr, nullptr, nullptr,
                         0, 0.0, skip, 1.0f, 1);
      EXPECT_EQ(param.values(), got);
    }
    // The fp32 update's error (about 1e-7 relative) rarely straddles a
    // bf16 midpoint (2^-9 relative apart).
    EXPECT_LE(differ, 4 * n / 1000);
    EXPECT_GT(moved, 2 * n);
  }
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, OptimizerTest,
                         ::testing::Values(ZRT_F32, ZRT_BF16, ZRT_F16),
                         [](const auto &info) {
                           return std::string(dtypeName(info.param));
                         });

TEST(AdamTest, F32ParamMayAliasMaster) {
  std::vector<float> master = {1.0f, -2.0f}, m(2, 0), v(2, 0),
                     grad = {0.5f, 0.25f};
  std::vector<float> copy = master, mc(2, 0), vc(2, 0), param(2);
  float stats[2] = {0, 0.3125f};
  zrt_test::adamStep(ZRT_F32, grad.data(), master.data(), m.data(), v.data(),
                     master.data(), 2, 1, 0.1, 0.9, 0.999, 1e-8, 0.0, 0, 1,
                     nullptr, nullptr, nullptr, 0, 0.0, stats, 1.0f, 0);
  zrt_test::adamStep(ZRT_F32, grad.data(), copy.data(), mc.data(), vc.data(),
                     param.data(), 2, 1, 0.1, 0.9, 0.999, 1e-8, 0.0, 0, 1,
                     nullptr, nullptr, nullptr, 0, 0.0, stats, 1.0f, 0);
  EXPECT_EQ(master, copy);
  EXPECT_EQ(master, param);

  // fp32 parameters that are their own masters: many blocks, AdamW with
  // decay and clipping, then a skipped step that must leave them as they
  // are.
  const int64_t n = 5000;
  std::vector<float> w(n), g(n), m1(n, 0.0f), v1(n, 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    w[size_t(i)] = std::sin(0.37f * float(i));
    g[size_t(i)] = std::cos(0.11f * float(i));
  }
  std::vector<float> w2 = w, m2 = m1, v2 = v1, p2(n);
  float big[2] = {0, 1e4f};
  zrt_test::adamStep(ZRT_F32, g.data(), w.data(), m1.data(), v1.data(),
                     w.data(), n, 1, 0.01, 0.9, 0.95, 1e-8, 0.1, 1, 1, nullptr,
                     nullptr, nullptr, 0, 1.0, big, 1.0f, 0);
  zrt_test::adamStep(ZRT_F32, g.data(), w2.data(), m2.data(), v2.data(),
                     p2.data(), n, 1, 0.01, 0.9, 0.95, 1e-8, 0.1, 1, 1, nullptr,
                     nullptr, nullptr, 0, 1.0, big, 1.0f, 0);
  EXPECT_EQ(w, w2);
  EXPECT_EQ(w, p2);
  EXPECT_EQ(m1, m2);
  EXPECT_EQ(v1, v2);
  std::vector<float> before = w;
  zrt_test::adamStep(ZRT_F32, g.data(), w.data(), m1.data(), v1.data(),
                     w.data(), n, 2, 0.01, 0.9, 0.95, 1e-8, 0.1, 1, 1, nullptr,
                     nullptr, nullptr, 0, 1.0, big, 1.0f, 1);
  EXPECT_EQ(w, before);
}

// Weight-decay ranges: one call over parameters of three groups (ranges
// crossing the parallel work items and the kernel's blocks) equals one call
// per group, bitwise; a schedule's lr equals zrt_lr_at's; no bias
// correction is the step lr and the denominator sqrt(v) + eps.
TEST(AdamTest, DecayRangesScheduleAndBiasCorrection) {
  const int64_t n = 70000;
  std::vector<float> w(n), g(n), m(n), v(n);
  for (int64_t i = 0; i < n; ++i) {
    w[size_t(i)] = std::sin(0.37f * float(i));
    g[size_t(i)] = std::cos(0.11f * float(i));
    m[size_t(i)] = 0.01f * std::sin(0.5f * float(i));
    v[size_t(i)] = 0.001f + 0.001f * std::cos(0.3f * float(i));
  }
  zrt_lr_schedule sched{};
  sched.kind = ZRT_LR_WARMUP_DECAY;
  sched.warmup_type = 1;
  sched.warmup_min_lr = 1e-4;
  sched.warmup_max_lr = 1e-2;
  sched.warmup_num_steps = 10;
  sched.total_num_steps = 100;
  const int64_t step = 7;
  double b1 = 0.9, b2 = 0.95;
  double lr = zrt_lr_at(&sched, 0.5, &b1, &b2, step);
  EXPECT_DOUBLE_EQ(lr, 1e-4 + (1e-2 - 1e-4) * (5.0 / 10.0));
  float stats[2] = {0, 1.0f};
  for (int32_t bc = 0; bc <= 1; ++bc) {
    std::vector<float> w1 = w, m1 = m, v1 = v, w2 = w, m2 = m, v2 = v;
    const int64_t ranges[] = {5, 40000, 50000, 69999};
    const double decays[] = {0.0, 0.3};
    zrt_test::adamStep(ZRT_F32, g.data(), w1.data(), m1.data(), v1.data(),
                       w1.data(), n, step, 0.5, 0.9, 0.95, 1e-8, 0.1, 1, bc,
                       &sched, ranges, decays, 2, 0.0, stats, 1.0f, 0);
    // The same in pieces, each with its decay and the schedule's lr.
    const int64_t cuts[] = {0, 5, 40000, 50000, 69999, n};
    const double pieceDecay[] = {0.1, 0.0, 0.1, 0.3, 0.1};
    for (int k = 0; k < 5; ++k) {
      int64_t b = cuts[k], len = cuts[k + 1] - cuts[k];
      zrt_test::adamStep(ZRT_F32, g.data() + b, w2.data() + b, m2.data() + b,
                         v2.data() + b, w2.data() + b, len, step, lr, 0.9, 0.95,
                         1e-8, pieceDecay[k], 1, bc, nullptr, nullptr, nullptr,
                         0, 0.0, stats, 1.0f, 0);
    }
    EXPECT_EQ(w1, w2) << "bias_correction " << bc;
    EXPECT_EQ(m1, m2);
    EXPECT_EQ(v1, v2);
    if (!bc) {
      // Element 0 (decay 0.1) by hand: no bias correction at all.
      float gt = g[0], mt = m[0] + float(1.0 - 0.9) * (gt - m[0]);
      float vt = v[0] * float(0.95) + float(1.0 - 0.95) * gt * gt;
      float wt = w[0] * float(1.0 - lr * 0.1);
      wt = wt + float(-lr) * mt / (std::sqrt(vt) / 1.0f + float(1e-8));
      EXPECT_NEAR(w1[0], wt, 1e-7f);
    }
  }
}

/// DeepSpeed's Lion in double (cpu_lion's operation order): c = beta1*m +
/// (1-beta1)*g, p = p*(1 - lr*wd) - lr*sign(c), m = beta2*m + (1-beta2)*g.
struct RefLion {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.99, wd = 0.1;
  std::vector<double> p, m;
  void step(const std::vector<double> &grad, double gradScale) {
    for (size_t i = 0; i < p.size(); ++i) {
      double g = grad[i] * gradScale;
      double c = beta1 * m[i] + (1.0 - beta1) * g;
      double sign = c > 0 ? 1.0 : c < 0 ? -1.0 : 0.0;
      p[i] = p[i] * (1.0 - lr * wd) - lr * sign;
      m[i] = beta2 * m[i] + (1.0 - beta2) * g;
    }
  }
};

TEST_P(OptimizerTest, LionMatchesDeepSpeed) {
  int64_t n = 3001;
  for (double maxNorm : {0.0, 1.0}) {
    double lossScale = dtype() == ZRT_F16 ? 512.0 : 1.0;
    RefLion ref;
    ref.p = randomValues(rng, n);
    ref.m.assign(static_cast<size_t>(n), 0.0);
    std::vector<float> master(ref.p.begin(), ref.p.end()),
        m(static_cast<size_t>(n), 0);
    for (size_t i = 0; i < ref.p.size(); ++i)
      ref.p[i] = master[i];
    Buffer param(dtype(), n);
    for (int64_t t = 1; t <= 5; ++t) {
      std::vector<Buffer> grad;
      grad.push_back(
          randomBuffer(dtype(), rng, n, -0.1 * lossScale, 0.1 * lossScale));
      std::vector<float> stats = check(dtype(), grad, float(lossScale));
      double clip = zrt_clip_coefficient(stats.data(), maxNorm);
      zrt_test::lionStep(dtype(), grad[0].data(), master.data(), m.data(),
                         param.data(), n, t, ref.lr, ref.beta1, ref.beta2,
                         ref.wd, nullptr, nullptr, nullptr, 0, maxNorm,
                         stats.data(), float(lossScale), 0);
      ref.step(grad[0].values(), float(clip / lossScale));
    }
    std::string what = "lion clip " + std::to_string(maxNorm);
    // Each step moves every element by exactly lr (the sign), so a wrong
    // sign anywhere is an error of 2 lr, far above this tolerance.
    expectClose(std::vector<double>(master.begin(), master.end()), ref.p, 1e-6,
                1e-6, what + " params");
    expectClose(std::vector<double>(m.begin(), m.end()), ref.m, 1e-5,
                1e-6 * maxAbs(ref.m), what + " exp_avg");
    expectClose(
        param,
        Buffer(dtype(), std::vector<double>(master.begin(), master.end()))
            .values(),
        0, 0, what + " copy");
  }
}

TEST_P(OptimizerTest, LionSkipWritesCopyOnly) {
  int64_t n = 100;
  std::vector<float> master(static_cast<size_t>(n), 0.3f),
      m(static_cast<size_t>(n), 0.1f);
  Buffer grad = randomBuffer(dtype(), rng, n), param(dtype(), n);
  float stats[2] = {1.0f, 0.0f};
  zrt_test::lionStep(dtype(), grad.data(), master.data(), m.data(),
                     param.data(), n, 3, 1e-3, 0.9, 0.99, 0.0, nullptr, nullptr,
                     nullptr, 0, 1.0, stats, 1.0f, 1);
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(master[i], 0.3f);
    EXPECT_EQ(m[i], 0.1f);
    EXPECT_EQ(param.get(i), roundTo(dtype(), 0.3));
  }
}

// Lion's weight-decay ranges and schedule, as Adam's: one call equals one
// call per group, bitwise. A zero gradient on a zero momentum moves nothing
// but the decay (DeepSpeed's sign(0) = 0).
TEST(LionTest, DecayRangesScheduleAndZeroSign) {
  const int64_t n = 70000;
  std::vector<float> w(n), g(n), m(n);
  for (int64_t i = 0; i < n; ++i) {
    w[size_t(i)] = std::sin(0.37f * float(i));
    g[size_t(i)] = std::cos(0.11f * float(i));
    m[size_t(i)] = 0.01f * std::sin(0.5f * float(i));
  }
  g[3] = 0.0f;
  m[3] = 0.0f;
  zrt_lr_schedule sched{};
  sched.kind = ZRT_LR_WARMUP_DECAY;
  sched.warmup_type = 1;
  sched.warmup_min_lr = 1e-4;
  sched.warmup_max_lr = 1e-2;
  sched.warmup_num_steps = 10;
  sched.total_num_steps = 100;
  const int64_t step = 7;
  double b1 = 0.9, b2 = 0.99;
  double lr = zrt_lr_at(&sched, 0.5, &b1, &b2, step);
  float stats[2] = {0, 1.0f};
  std::vector<float> w1 = w, m1 = m, w2 = w, m2 = m;
  const int64_t ranges[] = {5, 40000, 50000, 69999};
  const double decays[] = {0.0, 0.3};
  zrt_test::lionStep(ZRT_F32, g.data(), w1.data(), m1.data(), w1.data(), n,
                     step, 0.5, 0.9, 0.99, 0.1, &sched, ranges, decays, 2, 0.0,
                     stats, 1.0f, 0);
  const int64_t cuts[] = {0, 5, 40000, 50000, 69999, n};
  const double pieceDecay[] = {0.1, 0.0, 0.1, 0.3, 0.1};
  for (int k = 0; k < 5; ++k) {
    int64_t b = cuts[k], len = cuts[k + 1] - cuts[k];
    zrt_test::lionStep(ZRT_F32, g.data() + b, w2.data() + b, m2.data() + b,
                       w2.data() + b, len, step, lr, 0.9, 0.99, pieceDecay[k],
                       nullptr, nullptr, nullptr, 0, 0.0, stats, 1.0f, 0);
  }
  EXPECT_EQ(w1, w2);
  EXPECT_EQ(m1, m2);
  EXPECT_EQ(w1[3], w[3] * float(1.0 - lr * 0.1));
  EXPECT_EQ(m1[3], 0.0f);
  // Element 10 (decay 0.0) moved by exactly the schedule's lr.
  EXPECT_NEAR(std::fabs(w1[10] - w[10]), lr, 1e-6);
}

/// Runs the scaler over `overflows` and checks the scale and hysteresis
/// after each update.
void expectSequence(zrt_loss_scaler &s, const std::vector<int> &overflows,
                    const std::vector<double> &scales,
                    const std::vector<int64_t> &hysteresis) {
  for (size_t i = 0; i < overflows.size(); ++i) {
    EXPECT_EQ(zrt_loss_scaler_update(&s, overflows[i]), overflows[i])
        << "update " << i;
    EXPECT_EQ(s.cur_scale, scales[i]) << "update " << i;
    if (!hysteresis.empty()) {
      EXPECT_EQ(s.cur_hysteresis, hysteresis[i]) << "update " << i;
    }
  }
}

TEST(LossScalerTest, HysteresisAndWindowGrowth) {
  zrt_loss_scaler s;
  zrt_loss_scaler_init(&s, 1, 4, 3, 2, 1.0, 1.0);
  EXPECT_EQ(zrt_loss_scaler_scale(&s), 16.0f);
  // iter 2: (2 - -1) % 3 == 0 doubles. iter 3: hysteresis absorbs the first
  // overflow; iter 4 halves. iter 9 = 6 + 3 doubles again and refills the
  // hysteresis, which absorbs iter 10.
  expectSequence(s, {0, 0, 0, 1, 1, 0, 1, 0, 0, 0, 1},
                 {16, 16, 32, 32, 16, 16, 8, 8, 8, 16, 16},
                 {2, 2, 2, 1, 1, 1, 1, 1, 1, 2, 1});
  EXPECT_EQ(s.cur_iter, 11);
  EXPECT_EQ(s.last_overflow_iter, 10);
}

TEST(LossScalerTest, MinScale) {
  zrt_loss_scaler s;
  zrt_loss_scaler_init(&s, 1, 1, 1000, 1, 1.0, 1.0);
  expectSequence(s, {1, 1, 1}, {1, 1, 1}, {});
  zrt_loss_scaler_init(&s, 1, 3, 1000, 1, 0.25, 1.0);
  expectSequence(s, {1, 1, 1, 1, 1}, {4, 2, 1, 0.5, 0.25}, {});
  expectSequence(s, {1}, {0.25}, {});
}

TEST(LossScalerTest, ConsecutiveHysteresis) {
  zrt_loss_scaler s;
  zrt_loss_scaler_init(&s, 1, 4, 100, 3, 1.0, 1.0);
  s.consecutive_hysteresis = 1;
  // A clean step refills the hysteresis at once.
  expectSequence(s, {1, 0, 1, 1, 1, 1}, {16, 16, 16, 16, 8, 4},
                 {2, 3, 2, 1, 1, 1});
}

TEST(LossScalerTest, WindowOfOne) {
  zrt_loss_scaler s;
  zrt_loss_scaler_init(&s, 1, 0, 1, 2, 1.0, 1.0);
  expectSequence(s, {0, 0, 1, 0}, {2, 4, 4, 8}, {2, 2, 1, 2});
}

TEST(LossScalerTest, StaticScalerOnlyReportsOverflow) {
  zrt_loss_scaler s;
  zrt_loss_scaler_init(&s, 0, 16, 1000, 2, 1.0, 1.0);
  EXPECT_EQ(zrt_loss_scaler_scale(&s), 1.0f);
  float clean[2] = {0, 4}, bad[2] = {1, NAN};
  EXPECT_EQ(zrt_update_loss_scale(&s, clean), 0);
  EXPECT_EQ(zrt_update_loss_scale(&s, bad), 1);
  EXPECT_EQ(zrt_loss_scaler_scale(&s), 1.0f);
}

TEST(LossScalerTest, StaticScaleStaysAndOverflowSkips) {
  // fp16.loss_scale 128: DeepSpeed's static LossScaler.
  zrt_loss_scaler s;
  zrt_loss_scaler_init(&s, 0, 16, 1000, 2, 1.0, 128.0);
  float clean[2] = {0, 4}, bad[2] = {1, NAN};
  for (float *stats : {clean, bad, bad, clean, bad}) {
    EXPECT_EQ(zrt_update_loss_scale(&s, stats), stats == bad ? 1 : 0);
    EXPECT_EQ(zrt_loss_scaler_scale(&s), 128.0f);
  }
}

} // namespace

/// torch.optim.SGD in double (its single-tensor loop): g += wd*p; with
/// momentum, buf = g on the first step, else momentum*buf + (1-dampening)*g,
/// and g = g + momentum*buf (nesterov) or buf; p -= lr*g.
struct RefSgd {
  double lr = 0.05, momentum = 0.9, dampening = 0.0, wd = 0.01;
  bool nesterov = true;
  std::vector<double> p, buf;
  void step(const std::vector<double> &grad, double gradScale, bool first) {
    for (size_t i = 0; i < p.size(); ++i) {
      double g = grad[i] * gradScale + wd * p[i];
      if (momentum != 0.0) {
        buf[i] = first ? g : momentum * buf[i] + (1.0 - dampening) * g;
        g = nesterov ? g + momentum * buf[i] : buf[i];
      }
      p[i] -= lr * g;
    }
  }
};

TEST_P(OptimizerTest, SgdMatchesTorch) {
  int64_t n = 3001;
  struct Case {
    double momentum, dampening;
    bool nesterov;
  };
  for (Case c :
       {Case{0.9, 0.0, true}, Case{0.8, 0.25, false}, Case{0.0, 0.0, false}})
    for (double maxNorm : {0.0, 1.0}) {
      double lossScale = dtype() == ZRT_F16 ? 512.0 : 1.0;
      RefSgd ref;
      ref.momentum = c.momentum;
      ref.dampening = c.dampening;
      ref.nesterov = c.nesterov;
      ref.p = randomValues(rng, n);
      ref.buf.assign(static_cast<size_t>(n), 0.0);
      std::vector<float> master(ref.p.begin(), ref.p.end()),
          buf(static_cast<size_t>(n), 0);
      for (size_t i = 0; i < ref.p.size(); ++i)
        ref.p[i] = master[i];
      Buffer param(dtype(), n);
      for (int64_t t = 1; t <= 5; ++t) {
        std::vector<Buffer> grad;
        grad.push_back(
            randomBuffer(dtype(), rng, n, -0.1 * lossScale, 0.1 * lossScale));
        std::vector<float> stats = check(dtype(), grad, float(lossScale));
        double clip = zrt_clip_coefficient(stats.data(), maxNorm);
        // Without momentum there is no buffer.
        zrt_test::sgdStep(dtype(), grad[0].data(), master.data(),
                          c.momentum != 0.0 ? buf.data() : nullptr,
                          param.data(), n, t, ref.lr, c.momentum, c.dampening,
                          ref.wd, c.nesterov, nullptr, nullptr, nullptr, 0,
                          maxNorm, stats.data(), float(lossScale), 0);
        ref.step(grad[0].values(), float(clip / lossScale), t == 1);
      }
      std::string what = "sgd momentum " + std::to_string(c.momentum) +
                         " clip " + std::to_string(maxNorm);
      expectClose(std::vector<double>(master.begin(), master.end()), ref.p,
                  1e-5, 1e-6, what + " params");
      if (c.momentum != 0.0)
        expectClose(std::vector<double>(buf.begin(), buf.end()), ref.buf, 1e-5,
                    1e-6 * maxAbs(ref.buf), what + " momentum_buffer");
      expectClose(
          param,
          Buffer(dtype(), std::vector<double>(master.begin(), master.end()))
              .values(),
          0, 0, what + " copy");
    }
}

TEST_P(OptimizerTest, SgdSkipWritesCopyOnly) {
  int64_t n = 100;
  std::vector<float> master(static_cast<size_t>(n), 0.3f),
      buf(static_cast<size_t>(n), 0.1f);
  Buffer grad = randomBuffer(dtype(), rng, n), param(dtype(), n);
  float stats[2] = {1.0f, 0.0f};
  zrt_test::sgdStep(dtype(), grad.data(), master.data(), buf.data(),
                    param.data(), n, 3, 0.1, 0.9, 0.0, 0.0, 1, nullptr, nullptr,
                    nullptr, 0, 1.0, stats, 1.0f, 1);
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(master[i], 0.3f);
    EXPECT_EQ(buf[i], 0.1f);
    EXPECT_EQ(param.get(i), roundTo(dtype(), 0.3));
  }
}

// SGD's weight-decay ranges: one call equals one call per group, bitwise,
// and the first step sets the buffer to the gradient (no dampening).
TEST(SgdTest, DecayRangesAndFirstStep) {
  const int64_t n = 70000;
  std::vector<float> w(n), g(n), m(n, 0.5f);
  for (int64_t i = 0; i < n; ++i) {
    w[size_t(i)] = std::sin(0.37f * float(i));
    g[size_t(i)] = std::cos(0.11f * float(i));
  }
  float stats[2] = {0, 1.0f};
  const int64_t ranges[] = {5, 40000, 50000, 69999};
  const double decays[] = {0.0, 0.3};
  for (int64_t step : {1, 2}) {
    std::vector<float> w1 = w, m1 = m, w2 = w, m2 = m;
    zrt_test::sgdStep(ZRT_F32, g.data(), w1.data(), m1.data(), w1.data(), n,
                      step, 0.1, 0.9, 0.5, 0.1, 0, nullptr, ranges, decays, 2,
                      0.0, stats, 1.0f, 0);
    const int64_t cuts[] = {0, 5, 40000, 50000, 69999, n};
    const double pieceDecay[] = {0.1, 0.0, 0.1, 0.3, 0.1};
    for (int k = 0; k < 5; ++k) {
      int64_t b = cuts[k], len = cuts[k + 1] - cuts[k];
      zrt_test::sgdStep(ZRT_F32, g.data() + b, w2.data() + b, m2.data() + b,
                        w2.data() + b, len, step, 0.1, 0.9, 0.5, pieceDecay[k],
                        0, nullptr, nullptr, nullptr, 0, 0.0, stats, 1.0f, 0);
    }
    EXPECT_EQ(w1, w2);
    EXPECT_EQ(m1, m2);
    // Element 10 has decay 0: its buffer is the gradient on step 1, and
    // 0.9*0.5 + 0.5*g after.
    if (step == 1)
      EXPECT_EQ(m1[10], g[10]);
    else
      EXPECT_NEAR(m1[10], 0.5f * 0.9f + 0.5f * g[10], 1e-6);
  }
}

/// Adam/AdamW with bf16 moments, one element written out in plain fp32 (one
/// rounding an operation: this file's x86-64 build forms no FMAs), the
/// moments rounded to bf16 to nearest even as torch's .to(torch.bfloat16).
struct RefAdamBf16 {
  float decay, weightDecay, oneMinusBeta1, beta2, oneMinusBeta2, negStepSize,
      bc2Sqrt, eps;
  bool decoupled;
  RefAdamBf16(double lr, double b1, double b2, double eps, double wd,
              int64_t step, bool decoupled)
      : decay(float(1.0 - lr * wd)), weightDecay(float(wd)),
        oneMinusBeta1(float(1.0 - b1)), beta2(float(b2)),
        oneMinusBeta2(float(1.0 - b2)),
        negStepSize(float(-(lr / (1.0 - std::pow(b1, double(step)))))),
        bc2Sqrt(float(std::sqrt(1.0 - std::pow(b2, double(step))))),
        eps(float(eps)), decoupled(decoupled) {}
  void step(float g, float &w, uint16_t &m16, uint16_t &v16) const {
    float m = zrt_bf16_to_f32(m16), v = zrt_bf16_to_f32(v16);
    if (decoupled)
      w = w * decay;
    else
      g = g + weightDecay * w;
    m = m + oneMinusBeta1 * (g - m);
    v = v * beta2 + (oneMinusBeta2 * g) * g;
    float denom = std::sqrt(v) / bc2Sqrt + eps;
    w = w + (negStepSize * m) / denom;
    m16 = zrt_f32_to_bf16(m);
    v16 = zrt_f32_to_bf16(v);
  }
};

// Three steps over more elements than one thread's grain, with bf16
// parameters, fp32 masters, a loss scale and weight-decay ranges: every
// master, moment and parameter bit is the scalar model's.
TEST(AdamBf16Test, MatchesScalarModel) {
  const int64_t n = 70000;
  const int64_t ranges[] = {5, 40000, 50000, 69999};
  const double decays[] = {0.0, 0.3};
  for (int32_t adamw = 0; adamw <= 1; ++adamw) {
    std::vector<float> master(n), refW(n);
    std::vector<uint16_t> m(n, 0), v(n, 0), refM(n, 0), refV(n, 0),
        param(n, 0);
    for (int64_t i = 0; i < n; ++i)
      master[size_t(i)] = refW[size_t(i)] = std::sin(0.37f * float(i));
    float stats[2] = {0, 1.0f};
    for (int64_t step = 1; step <= 3; ++step) {
      std::vector<uint16_t> g(n);
      for (int64_t i = 0; i < n; ++i)
        g[size_t(i)] =
            zrt_f32_to_bf16(4.0f * std::cos(0.11f * float(i) + float(step)));
      zrt::hostAdamBf16(ZRT_BF16, g.data(), master.data(), m.data(), v.data(),
                        param.data(), n, step, 1e-2, 0.9, 0.95, 1e-8, 0.1,
                        adamw, 1, nullptr, ranges, decays, 2, 0.0, stats, 4.0f,
                        0);
      const int64_t cuts[] = {0, 5, 40000, 50000, 69999, n};
      const double pieceDecay[] = {0.1, 0.0, 0.1, 0.3, 0.1};
      for (int k = 0; k < 5; ++k) {
        RefAdamBf16 ref(1e-2, 0.9, 0.95, 1e-8, pieceDecay[k], step, adamw);
        for (int64_t i = cuts[k]; i < cuts[k + 1]; ++i)
          ref.step(zrt_bf16_to_f32(g[size_t(i)]) * 0.25f, refW[size_t(i)],
                   refM[size_t(i)], refV[size_t(i)]);
      }
    }
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(master[size_t(i)], refW[size_t(i)]) << "adamw " << adamw
                                                    << " element " << i;
      ASSERT_EQ(m[size_t(i)], refM[size_t(i)]) << "element " << i;
      ASSERT_EQ(v[size_t(i)], refV[size_t(i)]) << "element " << i;
      ASSERT_EQ(param[size_t(i)], zrt_f32_to_bf16(refW[size_t(i)]));
    }
  }
}

// Without masters (DeepSpeed's bf16_master_weights_and_grads) the bf16
// parameter is widened, updated and rounded back; a skipped step writes
// nothing (there is no master to copy from) and a step with masters copies
// them into the parameters.
TEST(AdamBf16Test, ParamsAsMastersAndSkip) {
  const int64_t n = 3000;
  std::vector<uint16_t> param(n), g(n), m(n, 0), v(n, 0);
  for (int64_t i = 0; i < n; ++i) {
    param[size_t(i)] = zrt_f32_to_bf16(std::sin(0.37f * float(i)));
    g[size_t(i)] = zrt_f32_to_bf16(std::cos(0.11f * float(i)));
  }
  std::vector<uint16_t> start = param, refM = m, refV = v;
  float stats[2] = {0, 1.0f};
  zrt::hostAdamBf16(ZRT_BF16, g.data(), nullptr, m.data(), v.data(),
                    param.data(), n, 1, 1e-2, 0.9, 0.999, 1e-8, 0.0, 1, 1,
                    nullptr, nullptr, nullptr, 0, 0.0, stats, 1.0f, 0);
  RefAdamBf16 ref(1e-2, 0.9, 0.999, 1e-8, 0.0, 1, true);
  int64_t moved = 0;
  for (int64_t i = 0; i < n; ++i) {
    float w = zrt_bf16_to_f32(start[size_t(i)]);
    ref.step(zrt_bf16_to_f32(g[size_t(i)]), w, refM[size_t(i)],
             refV[size_t(i)]);
    ASSERT_EQ(param[size_t(i)], zrt_f32_to_bf16(w)) << "element " << i;
    ASSERT_EQ(m[size_t(i)], refM[size_t(i)]);
    ASSERT_EQ(v[size_t(i)], refV[size_t(i)]);
    moved += param[size_t(i)] != start[size_t(i)];
  }
  EXPECT_GT(moved, n / 2);
  std::vector<uint16_t> before = param, mBefore = m;
  zrt::hostAdamBf16(ZRT_BF16, g.data(), nullptr, m.data(), v.data(),
                    param.data(), n, 2, 1e-2, 0.9, 0.999, 1e-8, 0.0, 1, 1,
                    nullptr, nullptr, nullptr, 0, 0.0, stats, 1.0f, 1);
  EXPECT_EQ(param, before);
  EXPECT_EQ(m, mBefore);
  std::vector<float> master(n, 0.5f);
  zrt::hostAdamBf16(ZRT_BF16, g.data(), master.data(), m.data(), v.data(),
                    param.data(), n, 2, 1e-2, 0.9, 0.999, 1e-8, 0.0, 1, 1,
                    nullptr, nullptr, nullptr, 0, 0.0, stats, 1.0f, 1);
  EXPECT_EQ(param, std::vector<uint16_t>(n, zrt_f32_to_bf16(0.5f)));
  EXPECT_EQ(m, mBefore);
}

// zrt_optimizer_step refuses, by name, what no launcher updates: a null
// operand, a kind that is no row, a precision the row does not keep, a
// whole-tensor optimizer, and a live state that is null.
TEST(OptimizerStepTest, RefusesWhatItDoesNotUpdate) {
  std::vector<float> w(4, 0.5f), g(4, 0.1f);
  zrt_update u = zrt_test::makeUpdate(ZRT_F32, g.data(), w.data(), nullptr,
                                      nullptr, w.data(), 4, 1, nullptr, nullptr,
                                      nullptr, 0, 0.0, nullptr, 1.0f, 0);
  zrt_optimizer lion = zrt_test::lionOptimizer(1e-3, 0.9, 0.99, 0.0);
  EXPECT_DEATH(zrt_optimizer_step(nullptr, &u), "a null optimizer");
  EXPECT_DEATH(zrt_optimizer_step(&lion, nullptr), "a null update");
  zrt_optimizer unknown = lion;
  unknown.kind = 99;
  EXPECT_DEATH(zrt_optimizer_step(&unknown, &u), "unknown optimizer kind 99");
  zrt_optimizer int8Lion = lion;
  int8Lion.states = 2;
  EXPECT_DEATH(zrt_optimizer_step(&int8Lion, &u),
               "lion keeps no states of precision 2");
  zrt_optimizer muon = lion;
  muon.kind = 4;
  EXPECT_DEATH(zrt_optimizer_step(&muon, &u),
               "muon updates whole tensors, not elements");
  // Lion's exp_avg is live on every step.
  EXPECT_DEATH(zrt_optimizer_step(&lion, &u), "zrt_lion: its state 0 is null");
}

/// torch.optim.NAdam's single-tensor step in double, its mu_product in
/// double too: mu_t = beta1 (1 - 0.5 * 0.96^(t psi)); the gradient and
/// exp_avg each step by their own coefficient over sqrt(v / bc2) + eps.
struct RefNadam {
  double lr = 2e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, wd = 0.05,
         psi = 4e-3;
  bool decoupled = false;
  double muProduct = 1.0;
  std::vector<double> p, m, v;
  void step(const std::vector<double> &grad, double gradScale, int64_t t) {
    double mu = beta1 * (1.0 - 0.5 * std::pow(0.96, double(t) * psi));
    double muNext = beta1 * (1.0 - 0.5 * std::pow(0.96, double(t + 1) * psi));
    muProduct *= mu;
    double bc2 = 1.0 - std::pow(beta2, double(t));
    for (size_t i = 0; i < p.size(); ++i) {
      double g = grad[i] * gradScale;
      if (decoupled)
        p[i] *= 1.0 - lr * wd;
      else
        g += wd * p[i];
      m[i] += (1.0 - beta1) * (g - m[i]);
      v[i] = beta2 * v[i] + (1.0 - beta2) * g * g;
      double denom = std::sqrt(v[i] / bc2) + eps;
      p[i] += -lr * (1.0 - mu) / (1.0 - muProduct) * g / denom;
      p[i] += -lr * muNext / (1.0 - muProduct * muNext) * m[i] / denom;
    }
  }
};

// NAdam (an ElementRule run by the CPU launcher) against torch's formula in
// double over 6 steps, L2 and decoupled decay, with and without clipping;
// the low-precision copy is the master rounded.
TEST_P(OptimizerTest, NadamMatchesTorch) {
  int64_t n = 2049;
  for (bool decoupled : {false, true}) {
    for (double maxNorm : {0.0, 1.0}) {
      double lossScale = dtype() == ZRT_F16 ? 512.0 : 1.0;
      RefNadam ref;
      ref.decoupled = decoupled;
      std::vector<double> init = randomValues(rng, n);
      std::vector<float> master(init.begin(), init.end()),
          m(static_cast<size_t>(n), 0), v(static_cast<size_t>(n), 0);
      ref.p.assign(master.begin(), master.end());
      ref.m.assign(static_cast<size_t>(n), 0.0);
      ref.v.assign(static_cast<size_t>(n), 0.0);
      zrt_optimizer o{};
      o.kind = int32_t(zrt::optimizers::Kind::NAdam);
      o.params.nadam.lr = ref.lr;
      o.params.nadam.beta1 = ref.beta1;
      o.params.nadam.beta2 = ref.beta2;
      o.params.nadam.eps = ref.eps;
      o.params.nadam.weight_decay = ref.wd;
      o.params.nadam.momentum_decay = ref.psi;
      o.params.nadam.decoupled_weight_decay = decoupled ? 1.0 : 0.0;
      Buffer param(dtype(), n);
      for (int64_t t = 1; t <= 6; ++t) {
        std::vector<Buffer> grad;
        grad.push_back(
            randomBuffer(dtype(), rng, n, -0.1 * lossScale, 0.1 * lossScale));
        std::vector<float> stats = check(dtype(), grad, float(lossScale));
        double clip = zrt_clip_coefficient(stats.data(), maxNorm);
        zrt_update u = zrt_test::makeUpdate(
            dtype(), grad[0].data(), master.data(), m.data(), v.data(),
            param.data(), n, t, nullptr, nullptr, nullptr, 0, maxNorm,
            stats.data(), float(lossScale), 0);
        zrt_optimizer_step(&o, &u);
        ref.step(grad[0].values(), float(clip / lossScale), t);
      }
      std::string what = std::string("nadam ") +
                         (decoupled ? "decoupled" : "L2") + " clip " +
                         std::to_string(maxNorm);
      expectClose(std::vector<double>(master.begin(), master.end()), ref.p,
                  1e-5, 1e-6, what + " params");
      expectClose(std::vector<double>(m.begin(), m.end()), ref.m, 1e-4,
                  1e-6 * maxAbs(ref.m), what + " exp_avg");
      expectClose(std::vector<double>(v.begin(), v.end()), ref.v, 1e-4,
                  1e-6 * maxAbs(ref.v), what + " exp_avg_sq");
      expectClose(
          param,
          Buffer(dtype(), std::vector<double>(master.begin(), master.end()))
              .values(),
          0, 0, what + " copy");
    }
  }
}
