//===- TestUtil.h - Buffers and checks shared by the runtime tests -*- C++
//-*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_TEST_TESTUTIL_H
#define ZERO_RT_TEST_TESTUTIL_H

#include "zero_rt/zrt.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace zrt_test {

/// The operands of a zrt_optimizer_step (zrt_update) from positional
/// arguments, with up to two states.
inline zrt_update makeUpdate(int32_t dtype, const void *grad, float *master,
                             void *s0, void *s1, void *param, int64_t n,
                             int64_t step, const zrt_lr_schedule *schedule,
                             const int64_t *ranges, const double *decays,
                             int32_t numRanges, double maxGradNorm,
                             const float *stats, float lossScale,
                             int32_t skip) {
  zrt_update u{};
  u.dtype = dtype;
  u.grad = grad;
  u.master = master;
  u.states[0] = s0;
  u.states[1] = s1;
  u.param = param;
  u.n = n;
  u.step = step;
  u.schedule = schedule;
  u.decay_ranges = ranges;
  u.range_decays = decays;
  u.num_decay_ranges = numRanges;
  u.max_grad_norm = maxGradNorm;
  u.stats = stats;
  u.loss_scale = lossScale;
  u.skip = skip;
  return u;
}

/// Adam (adamw 0) or AdamW (1), with states of precision `states`
/// (optimizers.def's ZRT_STATE_PRECISION order: 0 f32, 1 bf16, 2 int8).
inline zrt_optimizer adamOptimizer(double lr, double beta1, double beta2,
                                   double eps, double weightDecay,
                                   int32_t adamw, int32_t biasCorrection,
                                   int32_t states = 0) {
  zrt_optimizer o{};
  o.kind = adamw ? 1 : 0;
  o.states = states;
  auto set = [&](auto &p) {
    p.lr = lr;
    p.beta1 = beta1;
    p.beta2 = beta2;
    p.eps = eps;
    p.weight_decay = weightDecay;
    p.bias_correction = biasCorrection;
  };
  if (adamw)
    set(o.params.adamw);
  else
    set(o.params.adam);
  return o;
}

inline zrt_optimizer lionOptimizer(double lr, double beta1, double beta2,
                                   double weightDecay) {
  zrt_optimizer o{};
  o.kind = 2;
  o.params.lion.lr = lr;
  o.params.lion.beta1 = beta1;
  o.params.lion.beta2 = beta2;
  o.params.lion.weight_decay = weightDecay;
  return o;
}

inline zrt_optimizer sgdOptimizer(double lr, double momentum, double dampening,
                                  double weightDecay, int32_t nesterov) {
  zrt_optimizer o{};
  o.kind = 3;
  o.params.sgd.lr = lr;
  o.params.sgd.momentum = momentum;
  o.params.sgd.dampening = dampening;
  o.params.sgd.weight_decay = weightDecay;
  o.params.sgd.nesterov = nesterov;
  return o;
}

/// zrt_optimizer_step of Adam or AdamW, its operands positional.
inline void adamStep(int32_t dtype, const void *grad, float *master,
                     float *expAvg, float *expAvgSq, void *param, int64_t n,
                     int64_t step, double lr, double beta1, double beta2,
                     double eps, double weightDecay, int32_t adamw,
                     int32_t biasCorrection, const zrt_lr_schedule *schedule,
                     const int64_t *ranges, const double *decays,
                     int32_t numRanges, double maxGradNorm, const float *stats,
                     float lossScale, int32_t skip) {
  zrt_optimizer o =
      adamOptimizer(lr, beta1, beta2, eps, weightDecay, adamw, biasCorrection);
  zrt_update u = makeUpdate(dtype, grad, master, expAvg, expAvgSq, param, n,
                            step, schedule, ranges, decays, numRanges,
                            maxGradNorm, stats, lossScale, skip);
  zrt_optimizer_step(&o, &u);
}

/// zrt_optimizer_step of Lion, its operands positional.
inline void lionStep(int32_t dtype, const void *grad, float *master,
                     float *expAvg, void *param, int64_t n, int64_t step,
                     double lr, double beta1, double beta2, double weightDecay,
                     const zrt_lr_schedule *schedule, const int64_t *ranges,
                     const double *decays, int32_t numRanges,
                     double maxGradNorm, const float *stats, float lossScale,
                     int32_t skip) {
  zrt_optimizer o = lionOptimizer(lr, beta1, beta2, weightDecay);
  zrt_update u = makeUpdate(dtype, grad, master, expAvg, nullptr, param, n,
                            step, schedule, ranges, decays, numRanges,
                            maxGradNorm, stats, lossScale, skip);
  zrt_optimizer_step(&o, &u);
}

/// zrt_optimizer_step of SGD, its operands positional.
inline void sgdStep(int32_t dtype, const void *grad, float *master,
                    float *momentumBuffer, void *param, int64_t n, int64_t step,
                    double lr, double momentum, double dampening,
                    double weightDecay, int32_t nesterov,
                    const zrt_lr_schedule *schedule, const int64_t *ranges,
                    const double *decays, int32_t numRanges, double maxGradNorm,
                    const float *stats, float lossScale, int32_t skip) {
  zrt_optimizer o =
      sgdOptimizer(lr, momentum, dampening, weightDecay, nesterov);
  zrt_update u = makeUpdate(dtype, grad, master, momentumBuffer, nullptr, param,
                            n, step, schedule, ranges, decays, numRanges,
                            maxGradNorm, stats, lossScale, skip);
  zrt_optimizer_step(&o, &u);
}

/// zrt_optimizer_step of Adam or AdamW with int8 states, positional.
inline void adam8bitStep(int32_t dtype, const void *grad, float *master,
                         uint8_t *expAvg, float *expAvgAbsmax,
                         uint8_t *expAvgSq, float *expAvgSqAbsmax, void *param,
                         int64_t n, int64_t step, double lr, double beta1,
                         double beta2, double eps, double weightDecay,
                         int32_t adamw, int32_t biasCorrection,
                         const zrt_lr_schedule *schedule, const int64_t *ranges,
                         const double *decays, int32_t numRanges,
                         double maxGradNorm, const float *stats,
                         float lossScale, int32_t skip) {
  zrt_optimizer o = adamOptimizer(lr, beta1, beta2, eps, weightDecay, adamw,
                                  biasCorrection, 2);
  zrt_update u = makeUpdate(dtype, grad, master, expAvg, expAvgSq, param, n,
                            step, schedule, ranges, decays, numRanges,
                            maxGradNorm, stats, lossScale, skip);
  u.absmax[0] = expAvgAbsmax;
  u.absmax[1] = expAvgSqAbsmax;
  zrt_optimizer_step(&o, &u);
}

/// A zrt_attention_desc of positional arguments (zero_rt/attention.def's
/// order), for a call in one expression:
/// `zrt_attention_forward(AttentionDesc(dtype, ...), q, k, v, o)`.
struct AttentionDesc {
  zrt_attention_desc desc;
  AttentionDesc(int32_t dtype, int64_t batch, int64_t heads, int64_t kvHeads,
                int64_t seq, int64_t headDim, int32_t causal, double scale,
                int64_t window = 0, double softcap = 0,
                const float *alibi = nullptr, const float *sinks = nullptr)
      : desc{dtype, causal, batch,   heads, kvHeads, seq,    headDim,
             scale, window, softcap, alibi, sinks,   nullptr} {}
  operator const zrt_attention_desc *() const { return &desc; }
};

inline const char *dtypeName(int32_t dtype) {
  return dtype == ZRT_F32 ? "f32" : dtype == ZRT_BF16 ? "bf16" : "f16";
}

/// Unit roundoff of a dtype: the largest relative error of one rounding.
inline double unitRoundoff(int32_t dtype) {
  return dtype == ZRT_F32    ? std::ldexp(1.0, -24)
         : dtype == ZRT_BF16 ? std::ldexp(1.0, -8)
                             : std::ldexp(1.0, -11);
}

/// A host tensor of a zrt dtype, read and written as doubles (writes round
/// to the dtype, so a reference computed from get() sees the exact inputs).
class Buffer {
public:
  Buffer(int32_t dtype, int64_t n)
      : dtype(dtype), n(n),
        bytes(static_cast<size_t>(n * zrt_dtype_size(dtype)) + 1) {}
  Buffer(int32_t dtype, const std::vector<double> &values)
      : Buffer(dtype, int64_t(values.size())) {
    for (int64_t i = 0; i < n; ++i)
      set(i, values[i]);
  }

  void *data() { return bytes.data(); }
  const void *data() const { return bytes.data(); }
  int64_t size() const { return n; }

  double get(int64_t i) const {
    if (dtype == ZRT_F32) {
      float f;
      std::memcpy(&f, bytes.data() + 4 * i, 4);
      return f;
    }
    uint16_t h;
    std::memcpy(&h, bytes.data() + 2 * i, 2);
    return dtype == ZRT_BF16 ? zrt_bf16_to_f32(h) : zrt_f16_to_f32(h);
  }
  void set(int64_t i, double v) {
    float f = float(v);
    if (dtype == ZRT_F32) {
      std::memcpy(bytes.data() + 4 * i, &f, 4);
      return;
    }
    uint16_t h = dtype == ZRT_BF16 ? zrt_f32_to_bf16(f) : zrt_f32_to_f16(f);
    std::memcpy(bytes.data() + 2 * i, &h, 2);
  }
  std::vector<double> values() const {
    std::vector<double> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      v[i] = get(i);
    return v;
  }

  int32_t dtype;

private:
  int64_t n;
  std::vector<uint8_t> bytes; // one spare byte: data() is never null
};

/// v rounded to the dtype.
inline double roundTo(int32_t dtype, double v) {
  return Buffer(dtype, std::vector<double>{v}).get(0);
}

inline std::vector<double> randomValues(std::mt19937 &rng, int64_t n,
                                        double lo = -1.0, double hi = 1.0) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(static_cast<size_t>(n));
  for (double &x : v)
    x = dist(rng);
  return v;
}

inline Buffer randomBuffer(int32_t dtype, std::mt19937 &rng, int64_t n,
                           double lo = -1.0, double hi = 1.0) {
  return Buffer(dtype, randomValues(rng, n, lo, hi));
}

/// Expects |got[i] - want[i]| <= atol + rtol * |want[i]| everywhere and
/// reports the first few violations.
inline void expectClose(const std::vector<double> &got,
                        const std::vector<double> &want, double rtol,
                        double atol, const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int failures = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double tol = atol + rtol * std::fabs(want[i]);
    if (!(std::fabs(got[i] - want[i]) <= tol)) {
      ADD_FAILURE() << what << ": element " << i << " is " << got[i]
                    << ", expected " << want[i] << " (tolerance " << tol << ")";
      if (++failures == 5)
        return;
    }
  }
}

/// Half the spacing of a dtype's subnormals: the absolute rounding error of
/// results too small for the relative bound (it matters for f16, whose
/// subnormals start at 6e-5).
inline double subnormalRoundoff(int32_t dtype) {
  return dtype == ZRT_F32    ? std::ldexp(1.0, -150)
         : dtype == ZRT_BF16 ? std::ldexp(1.0, -134)
                             : std::ldexp(1.0, -25);
}

/// As above, for a result of dtype got.dtype.
inline void expectClose(const Buffer &got, const std::vector<double> &want,
                        double rtol, double atol, const std::string &what) {
  expectClose(got.values(), want, rtol, atol + subnormalRoundoff(got.dtype),
              what);
}

/// Runs every test on every rank of `comm` (an MPI test's main), then
/// finalizes the runtime: rank 0 prints `banner` and the one report, and
/// every rank's exit status counts.
inline int runOnRanks(zrt_comm *comm, const std::string &banner) {
  if (zrt_comm_rank(comm) == 0) {
    std::printf("%s\n", banner.c_str());
  } else {
    auto &listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int failed = RUN_ALL_TESTS();
  zrt_finalize();
  return failed;
}

/// A fresh directory under /tmp for a test's files (a torch reference's
/// output), removed with its contents when the test ends, however it ends.
class TempDir {
public:
  explicit TempDir(const std::string &prefix) {
    std::string templ = "/tmp/" + prefix + "-XXXXXX";
    std::vector<char> buf(templ.begin(), templ.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data()))
      path_ = buf.data();
  }
  ~TempDir() {
    if (!path_.empty()) {
      std::error_code ignored;
      std::filesystem::remove_all(path_, ignored);
    }
  }
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;
  /// Empty when the directory could not be made.
  const std::string &path() const { return path_; }

private:
  std::string path_;
};

} // namespace zrt_test

#endif // ZERO_RT_TEST_TESTUTIL_H
