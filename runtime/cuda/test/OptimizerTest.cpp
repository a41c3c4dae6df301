//===- OptimizerTest.cpp - CUDA overflow check and Adam vs the CPU --------===//
//
// Part of the zero-mlir project.
//
// cuda::checkOverflow and cuda::optimizerStep (Adam, Lion, SGD, NAdam, Adam
// with 8-bit and bf16 states) against zrt_check_overflow, zrt_optimizer_step
// and zrt::hostAdamBf16 on the same inputs, for every dtype, Adam and AdamW,
// with and without clipping, loss scales other than 1, sizes that leave a
// scalar tail, pointers off 16-byte alignment, skipped steps and empty shards.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"
#include "Kernels/Kernels.h"
#include "TestUtil.h"
#include "zero_rt/optimizers.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

using namespace zrt::cuda;
using zrt::cuda::test::DeviceArray;
using zrt::cuda::test::DeviceBuffer;
using zrt_test::Buffer;
using zrt_test::dtypeName;

namespace {

// The device's optimizer steps with their operands positional, as the
// tests spell them: cuda::optimizerStep of the kind's zrt_optimizer.
void adam(int32_t dtype, const void *grad, float *master, float *expAvg,
          float *expAvgSq, void *param, int64_t n, int64_t step, double lr,
          double beta1, double beta2, double eps, double weightDecay,
          int32_t adamw, int32_t biasCorrection,
          const zrt_lr_schedule *schedule, const int64_t *ranges,
          const double *decays, int32_t numRanges, double maxGradNorm,
          const float *stats, const float *lossScale, double divisor,
          int32_t skip) {
  optimizerStep(zrt_test::adamOptimizer(lr, beta1, beta2, eps, weightDecay,
                                        adamw, biasCorrection),
                zrt_test::makeUpdate(dtype, grad, master, expAvg, expAvgSq,
                                     param, n, step, schedule, ranges, decays,
                                     numRanges, maxGradNorm, stats, 1.0f, skip),
                lossScale, divisor);
}

void lion(int32_t dtype, const void *grad, float *master, float *expAvg,
          void *param, int64_t n, int64_t step, double lr, double beta1,
          double beta2, double weightDecay, const zrt_lr_schedule *schedule,
          const int64_t *ranges, const double *decays, int32_t numRanges,
          double maxGradNorm, const float *stats, const float *lossScale,
          double divisor, int32_t skip) {
  optimizerStep(zrt_test::lionOptimizer(lr, beta1, beta2, weightDecay),
                zrt_test::makeUpdate(dtype, grad, master, expAvg, nullptr,
                                     param, n, step, schedule, ranges, decays,
                                     numRanges, maxGradNorm, stats, 1.0f, skip),
                lossScale, divisor);
}

void sgd(int32_t dtype, const void *grad, float *master, float *momentumBuffer,
         void *param, int64_t n, int64_t step, double lr, double momentum,
         double dampening, double weightDecay, int32_t nesterov,
         const zrt_lr_schedule *schedule, const int64_t *ranges,
         const double *decays, int32_t numRanges, double maxGradNorm,
         const float *stats, const float *lossScale, double divisor,
         int32_t skip) {
  optimizerStep(
      zrt_test::sgdOptimizer(lr, momentum, dampening, weightDecay, nesterov),
      zrt_test::makeUpdate(dtype, grad, master, momentumBuffer, nullptr, param,
                           n, step, schedule, ranges, decays, numRanges,
                           maxGradNorm, stats, 1.0f, skip),
      lossScale, divisor);
}

void adam8bit(int32_t dtype, const void *grad, float *master, uint8_t *expAvg,
              float *expAvgAbsmax, uint8_t *expAvgSq, float *expAvgSqAbsmax,
              void *param, int64_t n, int64_t step, double lr, double beta1,
              double beta2, double eps, double weightDecay, int32_t adamw,
              int32_t biasCorrection, const zrt_lr_schedule *schedule,
              const int64_t *ranges, const double *decays, int32_t numRanges,
              double maxGradNorm, const float *stats, const float *lossScale,
              double divisor, int32_t skip) {
  zrt_update u = zrt_test::makeUpdate(
      dtype, grad, master, expAvg, expAvgSq, param, n, step, schedule, ranges,
      decays, numRanges, maxGradNorm, stats, 1.0f, skip);
  u.absmax[0] = expAvgAbsmax;
  u.absmax[1] = expAvgSqAbsmax;
  optimizerStep(zrt_test::adamOptimizer(lr, beta1, beta2, eps, weightDecay,
                                        adamw, biasCorrection, 2),
                u, lossScale, divisor);
}

void adamBf16(int32_t dtype, const void *grad, float *master, uint16_t *expAvg,
              uint16_t *expAvgSq, void *param, int64_t n, int64_t step,
              double lr, double beta1, double beta2, double eps,
              double weightDecay, int32_t adamw, int32_t biasCorrection,
              const zrt_lr_schedule *schedule, const int64_t *ranges,
              const double *decays, int32_t numRanges, double maxGradNorm,
              const float *stats, const float *lossScale, double divisor,
              int32_t skip) {
  optimizerStep(zrt_test::adamOptimizer(lr, beta1, beta2, eps, weightDecay,
                                        adamw, biasCorrection, 1),
                zrt_test::makeUpdate(dtype, grad, master, expAvg, expAvgSq,
                                     param, n, step, schedule, ranges, decays,
                                     numRanges, maxGradNorm, stats, 1.0f, skip),
                lossScale, divisor);
}

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// Device fp32 scalars (stats, loss scale).
class DeviceFloats {
public:
  explicit DeviceFloats(const std::vector<float> &v)
      : mem(v.size() * sizeof(float)) {
    mem.upload(v);
  }
  float *get() const { return mem.get<float>(); }
  std::vector<float> download() const { return mem.download<float>(); }

private:
  DeviceBuffer mem;
};

bool sameBits(double a, double b) {
  float x = float(a), y = float(b);
  return std::memcmp(&x, &y, sizeof(float)) == 0;
}

/// Spacing of the 16-bit dtype's values at |x|: the most one rounding step
/// can move a value.
double ulp16(int32_t dtype, double x) {
  int mantissa = dtype == ZRT_BF16 ? 7 : 10;
  int minExp = dtype == ZRT_BF16 ? -126 : -14;
  int e = minExp;
  if (x != 0) {
    std::frexp(std::fabs(x), &e);
    e = std::max(e - 1, minExp);
  }
  return std::ldexp(1.0, e - mantissa);
}

//===----------------------------------------------------------------------===//
// Overflow check
//===----------------------------------------------------------------------===//

// Tolerance of the squared norm, the same for every dtype: bf16 and f16
// widen to fp32 exactly, so only the sums round. Both add non-negative squares
// in fp32 (exact products up to one rounding per fused multiply-add) and
// combine partials in fp64, so each sum's relative error is at most
// (longest fp32 addition chain) * 2^-24. The CPU's chains are at most 1024
// / 32 + 10 = 42 long (a block of kBlock over 32 lanes, then the lane
// tree); the GPU's are a thread's elements (8 per unit, 4 accumulators,
// under 70 units per thread at these sizes: at most ~150 additions) plus 13
// tree levels. With the final fp32 roundings that bounds the difference by
// ~210 * 2^-24 = 1.3e-5 in the worst case; rounding errors of random
// signs make it far smaller (~1e-7), so 2e-5 is safe. That cannot see one
// element missed or counted twice among millions: OverflowSumIsExact checks
// coverage with sums that are exact in fp32.
constexpr double kNormRtol = 2e-5;

/// The CPU's stats of one or more buffers.
std::vector<float> cpuStats(int32_t dtype, const std::vector<Buffer *> &bufs,
                            float scale) {
  std::vector<const void *> ptrs;
  std::vector<int64_t> counts;
  for (Buffer *b : bufs) {
    ptrs.push_back(b->data());
    counts.push_back(b->size());
  }
  std::vector<float> stats(2, -1.0f);
  zrt_check_overflow(dtype, ptrs.data(), counts.data(), int32_t(bufs.size()),
                     scale, stats.data());
  return stats;
}

void expectStatsMatch(const std::vector<float> &gpu,
                      const std::vector<float> &cpu, const std::string &what) {
  EXPECT_EQ(gpu[0], cpu[0]) << what << ": overflow flag";
  if (std::isnan(cpu[1]) || std::isinf(cpu[1])) {
    EXPECT_EQ(std::isnan(gpu[1]), std::isnan(cpu[1])) << what << ": " << gpu[1];
    EXPECT_EQ(std::isinf(gpu[1]), std::isinf(cpu[1])) << what << ": " << gpu[1];
    return;
  }
  EXPECT_NEAR(gpu[1], cpu[1], kNormRtol * std::fabs(cpu[1]))
      << what << ": squared norm";
}

/// Gradients of a model trained with loss scale `scale`: |g| up to 8 *
/// scale, all of comparable size.
Buffer randomGrads(int32_t dtype, std::mt19937 &rng, int64_t n, double scale) {
  std::uniform_real_distribution<double> mag(0.5, 8.0);
  std::bernoulli_distribution sign(0.5);
  Buffer b(dtype, n);
  for (int64_t i = 0; i < n; ++i)
    b.set(i, (sign(rng) ? -1 : 1) * mag(rng) * scale);
  return b;
}

struct OverflowRun {
  int32_t dtype;
  int64_t offset = 0;
  float lossScale = 1.0f;
  double divisor = 1.0;
};

/// GPU stats of `grads` (first = 1) next to the CPU's.
void compareOverflow(const OverflowRun &r, Buffer &grads,
                     const std::string &what) {
  DeviceArray d(grads, r.offset);
  DeviceFloats scale({r.lossScale});
  DeviceFloats stats({-7.0f, -7.0f});
  checkOverflow(r.dtype, d.get(), grads.size(), scale.get(), r.divisor, 1,
                stats.get());
  std::vector<float> gpu = stats.download();
  std::vector<float> cpu =
      cpuStats(r.dtype, {&grads}, float(r.lossScale * r.divisor));
  expectStatsMatch(gpu, cpu, what);
}

class CudaOptimizerTest : public ::testing::TestWithParam<int32_t> {
protected:
  int32_t dtype() const { return GetParam(); }
  std::mt19937 rng{20240611};
};

TEST_P(CudaOptimizerTest, OverflowMatchesCpu) {
  ZRT_REQUIRE_GPU();
  // Sizes below one 16-byte unit, with a tail, and large enough that the
  // grid-stride loop wraps (3M elements: more than one pass of a grid that
  // fills a 132-multiprocessor device).
  for (int64_t n :
       {int64_t(1), int64_t(7), int64_t(8), int64_t(100003), int64_t(3000001)})
    for (int64_t offset : {0, 1})
      for (auto [lossScale, divisor] :
           {std::pair<float, double>{1.0f, 1.0}, {1024.0f, 4.0}}) {
        OverflowRun r{dtype(), offset, lossScale, divisor};
        Buffer g = randomGrads(dtype(), rng, n, lossScale * divisor / 64);
        compareOverflow(r, g,
                        std::string(dtypeName(dtype())) +
                            " n=" + std::to_string(n) +
                            " offset=" + std::to_string(offset) +
                            " scale=" + std::to_string(lossScale));
      }
}

TEST_P(CudaOptimizerTest, OverflowSumIsExact) {
  ZRT_REQUIRE_GPU();
  // Values in {-2, ..., 2}: every partial sum is an integer below 2^24, so
  // both backends are exact and any element skipped or read twice shows.
  for (int64_t n : {int64_t(1), int64_t(9), int64_t(100003), int64_t(3000001)})
    for (int64_t offset : {0, 1, 3}) {
      Buffer g(dtype(), n);
      int64_t want = 0;
      for (int64_t i = 0; i < n; ++i) {
        int64_t v = (i * 7) % 5 - 2;
        g.set(i, double(v));
        want += v * v;
      }
      DeviceArray d(g, offset);
      DeviceFloats scale({4.0f}), stats({0.0f, 0.0f});
      checkOverflow(dtype(), d.get(), n, scale.get(), 0.5, 1, stats.get());
      std::vector<float> gpu = stats.download();
      std::vector<float> cpu = cpuStats(dtype(), {&g}, 2.0f);
      EXPECT_EQ(gpu[0], 0.0f);
      EXPECT_EQ(gpu[1], float(double(want) / 4.0))
          << "n=" << n << " offset=" << offset;
      EXPECT_EQ(cpu[1], gpu[1]) << "n=" << n;
    }
}

TEST_P(CudaOptimizerTest, OverflowDetectsInfAndNaN) {
  ZRT_REQUIRE_GPU();
  const int64_t n = 100003;
  for (int64_t offset : {0, 1})
    // The scalar head (index 0 when misaligned), a vector unit, the tail.
    for (int64_t where : {int64_t(0), int64_t(5), n / 2, n - 1})
      for (double bad : {kInf, -kInf, kNaN}) {
        Buffer g = randomGrads(dtype(), rng, n, 1.0);
        g.set(where, bad);
        compareOverflow({dtype(), offset, 1.0f, 1.0}, g,
                        std::string(dtypeName(dtype())) + " " +
                            std::to_string(bad) + " at " +
                            std::to_string(where) +
                            " offset=" + std::to_string(offset));
      }
}

TEST_P(CudaOptimizerTest, OverflowIgnoresFiniteSquaresThatOverflow) {
  ZRT_REQUIRE_GPU();
  if (dtype() == ZRT_F16)
    GTEST_SKIP() << "f16 squares cannot overflow fp32";
  // 1e20^2 is inf in fp32, but no element is: the flag stays 0 and the norm
  // is inf, as on the CPU.
  Buffer g = randomGrads(dtype(), rng, 4099, 1.0);
  g.set(4000, 1e20);
  compareOverflow({dtype(), 0, 1.0f, 1.0}, g, "large finite");
}

TEST_P(CudaOptimizerTest, OverflowAccumulatesWhenNotFirst) {
  ZRT_REQUIRE_GPU();
  DeviceFloats scale({256.0f});
  const double divisor = 2.0;
  for (int64_t badIn : {-1, 0, 1}) {
    Buffer a = randomGrads(dtype(), rng, 70001, 8.0);
    Buffer b = randomGrads(dtype(), rng, 33, 8.0);
    if (badIn == 0)
      a.set(12, kInf);
    if (badIn == 1)
      b.set(32, kNaN);
    DeviceArray da(a, 1), db(b, 0);
    DeviceFloats stats({-3.0f, -3.0f});
    checkOverflow(dtype(), da.get(), a.size(), scale.get(), divisor, 1,
                  stats.get());
    checkOverflow(dtype(), db.get(), b.size(), scale.get(), divisor, 0,
                  stats.get());
    std::vector<float> cpu = cpuStats(dtype(), {&a, &b}, 512.0f);
    expectStatsMatch(stats.download(), cpu,
                     "two buffers, bad in " + std::to_string(badIn));
  }
  // first = 0 keeps a flag that is already set and adds to the norm.
  Buffer c = randomGrads(dtype(), rng, 1000, 1.0);
  DeviceArray dc(c, 0);
  DeviceFloats stats({1.0f, 2.5f});
  checkOverflow(dtype(), dc.get(), c.size(), nullptr, 1.0, 0, stats.get());
  std::vector<float> cpu = cpuStats(dtype(), {&c}, 1.0f);
  std::vector<float> gpu = stats.download();
  EXPECT_EQ(gpu[0], 1.0f);
  EXPECT_NEAR(gpu[1], 2.5f + cpu[1], kNormRtol * (2.5f + cpu[1]));
}

TEST_P(CudaOptimizerTest, OverflowIsDeterministic) {
  ZRT_REQUIRE_GPU();
  // The same bits on every launch: the partials are combined in a fixed
  // order whichever block finishes last, and the block count resets.
  Buffer g = randomGrads(dtype(), rng, 2000003, 1.0);
  DeviceArray d(g, 3);
  std::vector<float> first;
  for (int run = 0; run < 4; ++run) {
    DeviceFloats stats({0.0f, 0.0f});
    checkOverflow(dtype(), d.get(), g.size(), nullptr, 1.0, 1, stats.get());
    std::vector<float> s = stats.download();
    if (run == 0)
      first = s;
    EXPECT_TRUE(sameBits(s[0], first[0]) && sameBits(s[1], first[1]))
        << "run " << run << ": " << s[1] << " vs " << first[1];
  }
}

TEST_P(CudaOptimizerTest, OverflowOfNothing) {
  ZRT_REQUIRE_GPU();
  DeviceFloats stats({5.0f, 6.0f});
  checkOverflow(dtype(), nullptr, 0, nullptr, 1.0, 0, stats.get());
  EXPECT_EQ(stats.download(), (std::vector<float>{5.0f, 6.0f}));
  checkOverflow(dtype(), nullptr, 0, nullptr, 1.0, 1, stats.get());
  EXPECT_EQ(stats.download(), (std::vector<float>{0.0f, 0.0f}));
}

//===----------------------------------------------------------------------===//
// Adam
//===----------------------------------------------------------------------===//

// Tolerances of Adam. The kernel replays zrt_optimizer_step's fp32 operations
// one for one, fused multiply-adds where GCC contracts the CPU's loop and
// correctly rounded division and sqrt elsewhere, so with the GCC-built CPU
// backend the results are bitwise equal. A CPU compiled with other
// contractions differs by at most one rounding per operation, i.e. 2^-23
// of the largest operand's magnitude; over the <= 6 operations on a value's
// path we allow 16 * 2^-23 of these magnitudes (in fp64 below):
//   m: |m_old| + a,   v: |v_old| + a^2,   where a = |g * scale| (+ |wd * w|
//      for adam's L2 term) bounds the gradient term;
//   master: 4 ulp of |w| for its own rounding, plus the update's error
//      lr / bc1 * (|m_old| + a) / denom;
// a 16-bit parameter copy may then round to the neighbouring value: one ulp
// of its dtype. A wrong formula (a missing bias correction, a doubled decay)
// is off by orders of magnitude more.
constexpr double kAdamUlps = 16 * FLT_EPSILON;

struct AdamRun {
  int32_t dtype;
  int32_t adamw = 1;
  bool clip = false;
  float lossScale = 1.0f;
  double divisor = 1.0;
  int64_t n = 100003;
  // Element offsets of grad, master, exp_avg, exp_avg_sq, param.
  int64_t offsets[5] = {0, 0, 0, 0, 0};
  bool paramIsMaster = false; // f32 only
  int32_t skip = 0;
  int32_t biasCorrection = 1;
  // A WarmupDecayLR schedule and weight-decay ranges (no decay, 0.3).
  bool scheduleAndGroups = false;
};

constexpr int64_t kStep = 7;
constexpr double kLr = 1e-3, kBeta1 = 0.9, kBeta2 = 0.999, kEps = 1e-8,
                 kWeightDecay = 0.1;

std::string describe(const AdamRun &r) {
  std::string s = std::string(dtypeName(r.dtype)) +
                  (r.adamw ? " adamw" : " adam") + (r.clip ? " clip" : "") +
                  " scale=" + std::to_string(r.lossScale) +
                  " divisor=" + std::to_string(r.divisor) +
                  " n=" + std::to_string(r.n) + " offsets=";
  for (int64_t o : r.offsets)
    s += std::to_string(o);
  if (r.paramIsMaster)
    s += " param=master";
  if (r.skip)
    s += " skip";
  if (!r.biasCorrection)
    s += " no-bias-correction";
  if (r.scheduleAndGroups)
    s += " schedule+groups";
  return s;
}

/// Counts values that are not bitwise equal and fails the ones outside the
/// tolerance tol(i).
template <typename Tol>
void expectAdamClose(const Buffer &gpu, const Buffer &cpu, Tol tol,
                     const std::string &what) {
  int failures = 0;
  int64_t differ = 0;
  for (int64_t i = 0; i < cpu.size(); ++i) {
    double x = gpu.get(i), want = cpu.get(i);
    if (sameBits(x, want))
      continue;
    ++differ;
    if (!(std::fabs(x - want) <= tol(i)) && failures++ < 5)
      ADD_FAILURE() << what << ": element " << i << " is " << x
                    << ", the CPU's " << want << " (tolerance " << tol(i)
                    << ")";
  }
  if (differ)
    std::printf("note: %s: %lld of %lld values differ from the CPU's in the "
                "last bits (a CPU build with other FMA contractions?)\n",
                what.c_str(), (long long)differ, (long long)cpu.size());
}

void runAdam(const AdamRun &r, std::mt19937 &rng) {
  SCOPED_TRACE(describe(r));
  const int64_t n = r.n;
  const double scale = double(r.lossScale) * r.divisor;
  // Unscaled gradients ~1e-2, stored scaled; weights ~0.02; moments of a
  // run that has taken a few steps.
  std::normal_distribution<double> normal(0.0, 1.0);
  Buffer grad(r.dtype, n), master(ZRT_F32, n), m(ZRT_F32, n), v(ZRT_F32, n);
  for (int64_t i = 0; i < n; ++i) {
    double g = 1e-2 * normal(rng);
    grad.set(i, g * scale);
    master.set(i, 0.02 * normal(rng));
    m.set(i, 0.5 * g + 1e-3 * normal(rng));
    double s = 1e-2 * normal(rng);
    v.set(i, s * s + 1e-6);
  }
  Buffer param(r.dtype, n);
  for (int64_t i = 0; i < n; ++i)
    param.set(i, -99.0); // overwritten by both backends

  // The stats the schedule would hand over: the CPU's, for both backends.
  std::vector<float> stats = cpuStats(r.dtype, {&grad}, float(scale));
  double maxNorm = r.clip ? 0.5 * std::sqrt(double(stats[1])) : 0.0;

  zrt_lr_schedule sched{};
  sched.kind = ZRT_LR_WARMUP_DECAY;
  sched.warmup_type = 1;
  sched.warmup_max_lr = 2e-3;
  sched.warmup_num_steps = 10;
  sched.total_num_steps = 100;
  const zrt_lr_schedule *schedule = r.scheduleAndGroups ? &sched : nullptr;
  // Ranges that start and end off the vector units' alignment.
  const int64_t ranges[] = {n / 5 + 1, n / 2 + 3, (3 * n) / 4 + 2, n - 1};
  const double decays[] = {0.0, 0.3};
  int32_t numRanges = r.scheduleAndGroups && n >= 8 ? 2 : 0;

  // GPU.
  DeviceArray dGrad(grad, r.offsets[0]), dMaster(master, r.offsets[1]),
      dM(m, r.offsets[2]), dV(v, r.offsets[3]), dParam(param, r.offsets[4]);
  DeviceFloats dStats(stats), dScale({r.lossScale});
  void *paramPtr = r.paramIsMaster ? dMaster.get() : dParam.get();
  adam(r.dtype, r.skip ? nullptr : dGrad.get(), dMaster.as<float>(),
       dM.as<float>(), dV.as<float>(), paramPtr, n, kStep, kLr, kBeta1, kBeta2,
       kEps, kWeightDecay, r.adamw, r.biasCorrection, schedule, ranges, decays,
       numRanges, maxNorm, r.skip ? nullptr : dStats.get(),
       r.skip ? nullptr : dScale.get(), r.divisor, r.skip);
  Buffer gMaster = dMaster.download(), gM = dM.download(), gV = dV.download();
  Buffer gParam = r.paramIsMaster ? gMaster : dParam.download();

  // CPU.
  Buffer cMaster = master, cM = m, cV = v, cParam = param;
  zrt_test::adamStep(
      r.dtype, grad.data(), static_cast<float *>(cMaster.data()),
      static_cast<float *>(cM.data()), static_cast<float *>(cV.data()),
      r.paramIsMaster ? cMaster.data() : cParam.data(), n, kStep, kLr, kBeta1,
      kBeta2, kEps, kWeightDecay, r.adamw, r.biasCorrection, schedule, ranges,
      decays, numRanges, maxNorm, stats.data(), float(scale), r.skip);
  if (r.paramIsMaster)
    cParam = cMaster;

  if (r.skip) {
    // Master and moments untouched, bit for bit; the copy is the master's.
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_TRUE(sameBits(gMaster.get(i), master.get(i))) << i;
      ASSERT_TRUE(sameBits(gM.get(i), m.get(i))) << i;
      ASSERT_TRUE(sameBits(gV.get(i), v.get(i))) << i;
      ASSERT_TRUE(sameBits(gParam.get(i), cParam.get(i))) << i;
    }
    return;
  }

  double gs = double(zrt_clip_coefficient(stats.data(), maxNorm)) / scale;
  double lr = zrt_lr_at(schedule, kLr, nullptr, nullptr, kStep);
  double bc1 = r.biasCorrection ? 1.0 - std::pow(kBeta1, double(kStep)) : 1.0;
  double bc2Sqrt =
      r.biasCorrection ? std::sqrt(1.0 - std::pow(kBeta2, double(kStep))) : 1.0;
  auto gradTerm = [&](int64_t i) {
    double a = std::fabs(grad.get(i) * gs);
    // The largest decay of any range bounds the L2 term.
    if (!r.adamw)
      a += std::fabs(std::max(kWeightDecay, 0.3) * master.get(i));
    return a;
  };
  expectAdamClose(
      gM, cM,
      [&](int64_t i) {
        return kAdamUlps * (std::fabs(m.get(i)) + gradTerm(i));
      },
      "exp_avg");
  expectAdamClose(
      gV, cV,
      [&](int64_t i) {
        double a = gradTerm(i);
        return kAdamUlps * (std::fabs(v.get(i)) + a * a);
      },
      "exp_avg_sq");
  auto masterTol = [&](int64_t i) {
    double denom = std::sqrt(cV.get(i)) / bc2Sqrt + kEps;
    return 4 * FLT_EPSILON * std::fabs(cMaster.get(i)) +
           kAdamUlps * lr / bc1 * (std::fabs(m.get(i)) + gradTerm(i)) / denom;
  };
  expectAdamClose(gMaster, cMaster, masterTol, "master");
  if (r.dtype == ZRT_F32)
    expectAdamClose(gParam, cParam, masterTol, "param");
  else
    expectAdamClose(
        gParam, cParam,
        [&](int64_t i) { return ulp16(r.dtype, cParam.get(i)); }, "param");
  // Whatever the CPU does, the copy is this kernel's master rounded.
  for (int64_t i = 0; i < n; ++i)
    ASSERT_TRUE(
        sameBits(gParam.get(i), zrt_test::roundTo(r.dtype, gMaster.get(i))))
        << "param " << i;
}

TEST_P(CudaOptimizerTest, AdamMatchesCpu) {
  ZRT_REQUIRE_GPU();
  for (int32_t adamw : {0, 1})
    for (bool clip : {false, true})
      for (auto [lossScale, divisor] :
           {std::pair<float, double>{1.0f, 1.0}, {1024.0f, 4.0}}) {
        AdamRun r{dtype()};
        r.adamw = adamw;
        r.clip = clip;
        r.lossScale = lossScale;
        r.divisor = divisor;
        runAdam(r, rng);
      }
}

TEST_P(CudaOptimizerTest, AdamScheduleGroupsAndNoBiasCorrection) {
  ZRT_REQUIRE_GPU();
  for (int32_t adamw : {0, 1})
    for (int32_t biasCorrection : {0, 1}) {
      AdamRun r{dtype()};
      r.adamw = adamw;
      r.biasCorrection = biasCorrection;
      r.scheduleAndGroups = true;
      r.clip = true;
      runAdam(r, rng);
    }
}

TEST_P(CudaOptimizerTest, AdamSmallAndEmpty) {
  ZRT_REQUIRE_GPU();
  for (int64_t n : {1, 3, 4, 5, 8, 13}) {
    AdamRun r{dtype()};
    r.n = n;
    r.clip = true;
    runAdam(r, rng);
    r.offsets[0] = r.offsets[1] = r.offsets[2] = r.offsets[3] = r.offsets[4] =
        1;
    runAdam(r, rng);
  }
  // n = 0 touches nothing (and reads no buffer).
  float canary = 42.0f;
  DeviceFloats buf({canary}), stats({0.0f, 4.0f});
  adam(dtype(), nullptr, buf.get(), buf.get(), buf.get(), nullptr, 0, kStep,
       kLr, kBeta1, kBeta2, kEps, kWeightDecay, 1, 1, nullptr, nullptr, nullptr,
       0, 1.0, stats.get(), nullptr, 1.0, 0);
  EXPECT_EQ(buf.download()[0], canary);
}

TEST_P(CudaOptimizerTest, AdamMisaligned) {
  ZRT_REQUIRE_GPU();
  // Every pointer one element off: the vectorized path after a scalar head.
  AdamRun all{dtype()};
  for (int64_t &o : all.offsets)
    o = 1;
  runAdam(all, rng);
  // Pointers that disagree (only one of them off): the scalar path.
  for (int which = 0; which < 5; ++which) {
    AdamRun one{dtype()};
    one.adamw = which % 2;
    one.offsets[which] = 1;
    runAdam(one, rng);
  }
}

TEST_P(CudaOptimizerTest, AdamGridStride) {
  ZRT_REQUIRE_GPU();
  // More units than one pass of the grid over a 132-multiprocessor device
  // covers, with a tail.
  AdamRun r{dtype()};
  r.n = 5000011;
  r.clip = true;
  r.lossScale = 65536.0f;
  runAdam(r, rng);
}

TEST_P(CudaOptimizerTest, AdamSkippedStep) {
  ZRT_REQUIRE_GPU();
  for (int64_t offset : {0, 1}) {
    AdamRun r{dtype()};
    r.skip = 1;
    r.offsets[4] = offset;
    runAdam(r, rng);
  }
}

TEST(CudaOptimizerF32Test, AdamParamIsMaster) {
  ZRT_REQUIRE_GPU();
  std::mt19937 rng(5);
  for (int32_t adamw : {0, 1}) {
    AdamRun r{ZRT_F32};
    r.adamw = adamw;
    r.paramIsMaster = true;
    r.lossScale = 8.0f;
    runAdam(r, rng);
    r.skip = 1;
    runAdam(r, rng);
  }
}

// Lion: the same element formula (OptimizerMath.h's lionElement) on both
// backends, so the momentum agrees within the contractions' last bits and
// every master moved by the same +-lr, decayed, except where the sign's
// argument is within a rounding of 0 (none in these draws: |g| >= 0.5).
TEST_P(CudaOptimizerTest, LionMatchesCpu) {
  ZRT_REQUIRE_GPU();
  const int64_t n = 4099;
  const double scale = dtype() == ZRT_F16 ? 256.0 : 1.0;
  Buffer grad = randomGrads(dtype(), rng, n, scale), master(ZRT_F32, n),
         m(ZRT_F32, n), param(dtype(), n);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (int64_t i = 0; i < n; ++i) {
    master.set(i, u(rng));
    m.set(i, 0.0);
  }
  std::vector<float> stats = cpuStats(dtype(), {&grad}, float(scale));
  const int64_t ranges[] = {7, n / 2};
  const double decays[] = {0.0};
  for (int64_t step = 1; step <= 3; ++step) {
    DeviceArray dGrad(grad), dMaster(master), dM(m), dParam(param);
    DeviceFloats dStats(stats), dScale({float(scale)});
    lion(dtype(), dGrad.get(), dMaster.as<float>(), dM.as<float>(),
         dParam.get(), n, step, 1e-3, 0.9, 0.99, 0.1, nullptr, ranges, decays,
         1, 1.0, dStats.get(), dScale.get(), 1.0, 0);
    Buffer gMaster = dMaster.download(), gM = dM.download(),
           gParam = dParam.download();
    Buffer cMaster = master, cM = m, cParam = param;
    zrt_test::lionStep(dtype(), grad.data(),
                       static_cast<float *>(cMaster.data()),
                       static_cast<float *>(cM.data()), cParam.data(), n, step,
                       1e-3, 0.9, 0.99, 0.1, nullptr, ranges, decays, 1, 1.0,
                       stats.data(), float(scale), 0);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_NEAR(gM.get(i), cM.get(i), 4 * FLT_EPSILON * std::fabs(cM.get(i)))
          << "exp_avg " << i;
      ASSERT_NEAR(gMaster.get(i), cMaster.get(i), 4 * FLT_EPSILON)
          << "master " << i;
      ASSERT_TRUE(
          sameBits(gParam.get(i), zrt_test::roundTo(dtype(), gMaster.get(i))))
          << "param " << i;
    }
    master = gMaster;
    m = gM;
  }
}

// The block-wise 8-bit Adam: every operation rounded once on both backends
// (OptimizerMath.h's adam8bitElement and quantisation), so masters, codes and
// absmaxes are equal bit for bit, over a short last block and a decay range
// that crosses a block boundary, for Adam and AdamW.
TEST_P(CudaOptimizerTest, Adam8bitMatchesCpu) {
  ZRT_REQUIRE_GPU();
  const int64_t n = 2 * 2048 + 3, blocks = 3;
  const double scale = dtype() == ZRT_F16 ? 256.0 : 1.0;
  const int64_t ranges[] = {7, 2048 + 100};
  const double decays[] = {0.0};
  for (int32_t adamw = 0; adamw <= 1; ++adamw) {
    Buffer master(ZRT_F32, n), param(dtype(), n);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    for (int64_t i = 0; i < n; ++i)
      master.set(i, u(rng));
    std::vector<uint8_t> qm(n, 0), qv(n, 0);
    std::vector<float> am(blocks, 0.0f), av(blocks, 0.0f);
    for (int64_t step = 1; step <= 3; ++step) {
      Buffer grad = randomGrads(dtype(), rng, n, scale);
      DeviceArray dGrad(grad), dMaster(master), dParam(param);
      DeviceBuffer dQm(qm), dQv(qv), dAm(am), dAv(av);
      DeviceFloats dScale({float(scale)});
      adam8bit(dtype(), dGrad.get(), dMaster.as<float>(), dQm.get<uint8_t>(),
               dAm.get<float>(), dQv.get<uint8_t>(), dAv.get<float>(),
               dParam.get(), n, step, 1e-3, 0.9, 0.999, 1e-8, 0.1, adamw, 1,
               nullptr, ranges, decays, 1, 0.0, nullptr, dScale.get(), 1.0, 0);
      Buffer gMaster = dMaster.download(), gParam = dParam.download();
      std::vector<uint8_t> gQm = dQm.download<uint8_t>(),
                           gQv = dQv.download<uint8_t>();
      std::vector<float> gAm = dAm.download<float>(),
                         gAv = dAv.download<float>();
      Buffer cParam = param;
      zrt_test::adam8bitStep(
          dtype(), grad.data(), static_cast<float *>(master.data()), qm.data(),
          am.data(), qv.data(), av.data(), cParam.data(), n, step, 1e-3, 0.9,
          0.999, 1e-8, 0.1, adamw, 1, nullptr, ranges, decays, 1, 0.0, nullptr,
          float(scale), 0);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_TRUE(sameBits(gMaster.get(i), master.get(i))) << "master " << i;
        ASSERT_TRUE(sameBits(gParam.get(i), cParam.get(i))) << "param " << i;
        ASSERT_EQ(gQm[i], qm[i]) << "exp_avg code " << i;
        ASSERT_EQ(gQv[i], qv[i]) << "exp_avg_sq code " << i;
      }
      for (int64_t b = 0; b < blocks; ++b) {
        ASSERT_TRUE(sameBits(gAm[b], am[b])) << "exp_avg absmax " << b;
        ASSERT_TRUE(sameBits(gAv[b], av[b])) << "exp_avg_sq absmax " << b;
      }
    }
  }
}

// bf16 moments: the same element formula (OptimizerMath.h's adam8bitElement)
// and rounding on both backends, with and without fp32 masters.
TEST_P(CudaOptimizerTest, AdamBf16MatchesCpu) {
  ZRT_REQUIRE_GPU();
  const int64_t n = 4099;
  const double scale = dtype() == ZRT_F16 ? 256.0 : 1.0;
  const int64_t ranges[] = {7, 2048 + 100};
  const double decays[] = {0.0};
  for (int32_t masters = 0; masters <= 1; ++masters)
    for (int32_t adamw = 0; adamw <= 1; ++adamw) {
      Buffer master(ZRT_F32, n), param(dtype(), n);
      std::uniform_real_distribution<double> u(-1.0, 1.0);
      for (int64_t i = 0; i < n; ++i) {
        master.set(i, u(rng));
        param.set(i, master.get(i));
      }
      std::vector<uint16_t> m(n, 0), v(n, 0);
      for (int64_t step = 1; step <= 3; ++step) {
        Buffer grad = randomGrads(dtype(), rng, n, scale);
        DeviceArray dGrad(grad), dMaster(master), dParam(param);
        DeviceBuffer dM(m), dV(v);
        DeviceFloats dScale({float(scale)});
        adamBf16(dtype(), dGrad.get(), masters ? dMaster.as<float>() : nullptr,
                 dM.get<uint16_t>(), dV.get<uint16_t>(), dParam.get(), n, step,
                 1e-3, 0.9, 0.999, 1e-8, 0.1, adamw, 1, nullptr, ranges,
                 decays, 1, 0.0, nullptr, dScale.get(), 1.0, 0);
        Buffer gMaster = dMaster.download(), gParam = dParam.download();
        std::vector<uint16_t> gM = dM.download<uint16_t>(),
                              gV = dV.download<uint16_t>();
        zrt::hostAdamBf16(
            dtype(), grad.data(),
            masters ? static_cast<float *>(master.data()) : nullptr, m.data(),
            v.data(), param.data(), n, step, 1e-3, 0.9, 0.999, 1e-8, 0.1,
            adamw, 1, nullptr, ranges, decays, 1, 0.0, nullptr, float(scale),
            0);
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_TRUE(sameBits(gMaster.get(i), master.get(i))) << "master " << i;
          ASSERT_TRUE(sameBits(gParam.get(i), param.get(i))) << "param " << i;
          ASSERT_EQ(gM[i], m[i]) << "exp_avg " << i;
          ASSERT_EQ(gV[i], v[i]) << "exp_avg_sq " << i;
        }
      }
    }
}

// SGD: the same element formula (OptimizerMath.h's sgdElement) on both
// backends, with Nesterov momentum and a decay range; step 1 sets the buffer
// to the gradient.
TEST_P(CudaOptimizerTest, SgdMatchesCpu) {
  ZRT_REQUIRE_GPU();
  const int64_t n = 4099;
  const double scale = dtype() == ZRT_F16 ? 256.0 : 1.0;
  Buffer grad = randomGrads(dtype(), rng, n, scale), master(ZRT_F32, n),
         m(ZRT_F32, n), param(dtype(), n);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (int64_t i = 0; i < n; ++i) {
    master.set(i, u(rng));
    m.set(i, 0.0);
  }
  std::vector<float> stats = cpuStats(dtype(), {&grad}, float(scale));
  const int64_t ranges[] = {7, n / 2};
  const double decays[] = {0.0};
  for (int64_t step = 1; step <= 3; ++step) {
    DeviceArray dGrad(grad), dMaster(master), dM(m), dParam(param);
    DeviceFloats dStats(stats), dScale({float(scale)});
    sgd(dtype(), dGrad.get(), dMaster.as<float>(), dM.as<float>(), dParam.get(),
        n, step, 0.05, 0.9, 0.0, 0.01, 1, nullptr, ranges, decays, 1, 1.0,
        dStats.get(), dScale.get(), 1.0, 0);
    Buffer gMaster = dMaster.download(), gM = dM.download(),
           gParam = dParam.download();
    Buffer cMaster = master, cM = m, cParam = param;
    zrt_test::sgdStep(dtype(), grad.data(),
                      static_cast<float *>(cMaster.data()),
                      static_cast<float *>(cM.data()), cParam.data(), n, step,
                      0.05, 0.9, 0.0, 0.01, 1, nullptr, ranges, decays, 1, 1.0,
                      stats.data(), float(scale), 0);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_NEAR(gM.get(i), cM.get(i),
                  4 * FLT_EPSILON * std::max(1.0, std::fabs(cM.get(i))))
          << "momentum_buffer " << i;
      ASSERT_NEAR(gMaster.get(i), cMaster.get(i), 4 * FLT_EPSILON)
          << "master " << i;
      ASSERT_TRUE(
          sameBits(gParam.get(i), zrt_test::roundTo(dtype(), gMaster.get(i))))
          << "param " << i;
    }
    master = gMaster;
    m = gM;
  }
}

// NAdam: the same element formula (OptimizerMath.h's nadamElement) and the
// same host constants (its fp32 mu_product included) on both backends, with
// decoupled decay and a decay range, over 3 steps.
TEST_P(CudaOptimizerTest, NadamMatchesCpu) {
  ZRT_REQUIRE_GPU();
  const int64_t n = 4099;
  const double scale = dtype() == ZRT_F16 ? 256.0 : 1.0;
  Buffer grad = randomGrads(dtype(), rng, n, scale), master(ZRT_F32, n),
         m(ZRT_F32, n), v(ZRT_F32, n), param(dtype(), n);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (int64_t i = 0; i < n; ++i) {
    master.set(i, u(rng));
    m.set(i, 0.0);
    v.set(i, 0.0);
  }
  zrt_optimizer o{};
  o.kind = int32_t(zrt::optimizers::Kind::NAdam);
  zrt_nadam_params &p = o.params.nadam;
  p.lr = 2e-3;
  p.beta1 = 0.9;
  p.beta2 = 0.999;
  p.eps = 1e-8;
  p.weight_decay = 0.1;
  p.momentum_decay = 4e-3;
  p.decoupled_weight_decay = 1.0;
  std::vector<float> stats = cpuStats(dtype(), {&grad}, float(scale));
  const int64_t ranges[] = {7, n / 2};
  const double decays[] = {0.0};
  for (int64_t step = 1; step <= 3; ++step) {
    DeviceArray dGrad(grad), dMaster(master), dM(m), dV(v), dParam(param);
    DeviceFloats dStats(stats), dScale({float(scale)});
    optimizerStep(o,
                  zrt_test::makeUpdate(
                      dtype(), dGrad.get(), dMaster.as<float>(), dM.as<float>(),
                      dV.as<float>(), dParam.get(), n, step, nullptr, ranges,
                      decays, 1, 1.0, dStats.get(), 1.0f, 0),
                  dScale.get(), 1.0);
    Buffer gMaster = dMaster.download(), gM = dM.download(), gV = dV.download(),
           gParam = dParam.download();
    Buffer cMaster = master, cM = m, cV = v, cParam = param;
    zrt_update cu = zrt_test::makeUpdate(
        dtype(), grad.data(), static_cast<float *>(cMaster.data()), cM.data(),
        cV.data(), cParam.data(), n, step, nullptr, ranges, decays, 1, 1.0,
        stats.data(), float(scale), 0);
    zrt_optimizer_step(&o, &cu);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_NEAR(gM.get(i), cM.get(i),
                  4 * FLT_EPSILON * std::max(1.0, std::fabs(cM.get(i))))
          << "exp_avg " << i;
      ASSERT_NEAR(gV.get(i), cV.get(i),
                  4 * FLT_EPSILON * std::max(1e-12, std::fabs(cV.get(i))))
          << "exp_avg_sq " << i;
      ASSERT_NEAR(gMaster.get(i), cMaster.get(i), 8 * FLT_EPSILON)
          << "master " << i;
      ASSERT_TRUE(
          sameBits(gParam.get(i), zrt_test::roundTo(dtype(), gMaster.get(i))))
          << "param " << i;
    }
    master = gMaster;
    m = gM;
    v = gV;
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaOptimizerTest,
                         ::testing::Values(ZRT_F32, ZRT_BF16, ZRT_F16),
                         [](const ::testing::TestParamInfo<int32_t> &info) {
                           return std::string(dtypeName(info.param));
                         });

} // namespace
