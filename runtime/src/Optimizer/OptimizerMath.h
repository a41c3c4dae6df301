//===- OptimizerMath.h - The optimizers' formulas ---------------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// The optimizers' step constants (host code: the learning-rate schedules,
// Adam's, Lion's, SGD's, Muon's and Adafactor's fp32 constants) and their
// per-element updates, compiled for the host and the device as
// KernelMath.h's formulas are, so that both backends round alike; the Adam
// update itself stays per backend (see adamConstants).
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_OPTIMIZER_MATH_H
#define ZERO_RT_OPTIMIZER_MATH_H

#include "Kernels/KernelMath.h"

#include <cmath>
#include <cstdint>

namespace zrt {

/// The fp32 constants of one Adam/AdamW step (host code), computed in double
/// as torch does in Python and rounded once. The per-element update itself
/// stays per backend: the CUDA kernel pins with intrinsics the roundings that
/// GCC's contractions give the CPU loop, the same arithmetic spelled twice.
/// zrt_lr_at: DeepSpeed's scheduler formulas (lr_schedules.py) in its
/// operation order, in fp64 as Python computes them, for optimizer step
/// `step` (1-based), i.e. last_batch_iteration = step - 2 (DeepSpeed steps
/// the scheduler after each applied optimizer step; -1 is the value its
/// constructor sets). The step counter lives on the host in both backends
/// (the skip decision is made there), so both compute the step's constants
/// from it with this one host function at launch and round them alike, as
/// adamConstants; the log reports the same value.
inline double lrAt(const zrt_lr_schedule &s, double lr, double &beta1,
                   double &beta2, int64_t step) {
  const int64_t it = step - 2;
  switch (s.kind) {
  case ZRT_LR_WARMUP:
  case ZRT_LR_WARMUP_DECAY: {
    if (it < 0)
      return s.warmup_min_lr;
    int64_t warmup = s.warmup_num_steps > 2 ? s.warmup_num_steps : 2;
    double gamma;
    if (it < warmup)
      gamma = s.warmup_type == 0
                  ? (1.0 / ::log(double(warmup))) * ::log(double(it + 1))
                  : double(it) / double(warmup);
    else if (s.kind == ZRT_LR_WARMUP)
      gamma = 1.0;
    else {
      double rest = double(s.total_num_steps - warmup);
      gamma = double(s.total_num_steps - it) / (rest > 1.0 ? rest : 1.0);
      gamma = gamma > 0.0 ? gamma : 0.0;
    }
    return s.warmup_min_lr + (s.warmup_max_lr - s.warmup_min_lr) * gamma;
  }
  case ZRT_LR_WARMUP_COSINE: {
    if (it < 0)
      return 0.0;
    int64_t warmup = s.warmup_num_steps > 2 ? s.warmup_num_steps : 2;
    double ratio;
    if (it < warmup) {
      ratio = s.warmup_type == 0
                  ? (1.0 / ::log(double(warmup))) * ::log(double(it + 1))
                  : double(it) / double(warmup);
      ratio = s.warmup_min_ratio + ratio * (1.0 - s.warmup_min_ratio);
    } else {
      double last = double(it - warmup + 1);
      double total = double(s.total_num_steps - warmup);
      ratio = (1.0 + ::cos(3.141592653589793 * last / total)) / 2.0;
      ratio = s.cos_min_ratio + (1.0 - s.cos_min_ratio) * ratio;
      ratio = ratio > 0.0 ? ratio : 0.0;
    }
    return lr * ratio;
  }
  case ZRT_LR_ONE_CYCLE: {
    double first = double(s.cycle_first_step_size);
    double second =
        s.cycle_second_step_size > 0 ? double(s.cycle_second_step_size) : first;
    double total = first + second;
    double stepRatio = first / total;
    double minLr = s.cycle_min_lr, maxLr = s.cycle_max_lr;
    if (it < 0) {
      if (s.cycle_momentum) {
        beta1 = s.cycle_min_mom;
        beta2 = 0.99;
      }
      return minLr;
    }
    if (double(it) < total) {
      double bi = double(it + 1);
      double cycle = ::floor(1.0 + bi / total);
      double x = 1.0 + bi / total - cycle;
      double scale =
          x <= stepRatio ? x / stepRatio : (x - 1.0) / (stepRatio - 1.0);
      if (s.cycle_momentum) {
        beta1 = s.cycle_max_mom - (s.cycle_max_mom - s.cycle_min_mom) * scale;
        beta2 = 0.99;
      }
      return minLr + (maxLr - minLr) * scale;
    }
    double interval = (double(it) - total + 1.0) / double(s.decay_step_size);
    if (s.cycle_momentum) {
      beta1 = s.decay_step_size == 0 || s.decay_mom_rate == 0.0
                  ? s.cycle_max_mom
                  : s.cycle_max_mom * (1.0 + s.decay_mom_rate * interval);
      beta2 = 0.99;
    }
    if (s.decay_step_size == 0 || s.decay_lr_rate == 0.0)
      return minLr;
    return minLr / (1.0 + s.decay_lr_rate * interval);
  }
  case ZRT_LR_RANGE_TEST: {
    double interval = double(it + 1) / double(s.lr_range_test_step_size);
    if (s.lr_range_test_staircase)
      interval = ::floor(interval);
    return s.lr_range_test_min_lr *
           (1.0 + s.lr_range_test_step_rate * interval);
  }
  default:
    return lr;
  }
}

struct AdamConstants {
  float decay;       // adamw: 1 - lr * weight_decay
  float weightDecay; // adam: L2 coefficient
  float oneMinusBeta1;
  float beta2;
  float oneMinusBeta2;
  float negStepSize; // -lr / (1 - beta1^t)
  float bc2Sqrt;     // sqrt(1 - beta2^t)
  float eps;
};

/// Without bias correction (DeepSpeed's bias_correction = false) the step
/// is lr and the denominator sqrt(v) + eps: bc1 = bc2Sqrt = 1 exactly.
inline AdamConstants adamConstants(double lr, double beta1, double beta2,
                                   double eps, double weightDecay, int64_t step,
                                   bool biasCorrection = true) {
  AdamConstants c;
  c.decay = float(1.0 - lr * weightDecay);
  c.weightDecay = float(weightDecay);
  c.oneMinusBeta1 = float(1.0 - beta1);
  c.beta2 = float(beta2);
  c.oneMinusBeta2 = float(1.0 - beta2);
  double bc1 = biasCorrection ? 1.0 - std::pow(beta1, double(step)) : 1.0;
  c.negStepSize = float(-(lr / bc1));
  c.bc2Sqrt = biasCorrection
                  ? float(std::sqrt(1.0 - std::pow(beta2, double(step))))
                  : 1.0f;
  c.eps = float(eps);
  return c;
}

/// The same constants with another weight decay (a parameter's own).
inline AdamConstants withDecay(AdamConstants c, double lr, double weightDecay) {
  c.decay = float(1.0 - lr * weightDecay);
  c.weightDecay = float(weightDecay);
  return c;
}

/// The fp32 constants of one Lion step (host code), rounded once from the
/// double hyper-parameters as DeepSpeed's CPU Lion rounds its floats.
struct LionConstants {
  float decay; // 1 - lr * weight_decay
  float lr;
  float beta1;
  float oneMinusBeta1;
  float beta2;
  float oneMinusBeta2;
};

inline LionConstants lionConstants(double lr, double beta1, double beta2,
                                   double weightDecay) {
  LionConstants c;
  c.decay = float(1.0 - lr * weightDecay);
  c.lr = float(lr);
  c.beta1 = float(beta1);
  c.oneMinusBeta1 = float(1.0 - beta1);
  c.beta2 = float(beta2);
  c.oneMinusBeta2 = float(1.0 - beta2);
  return c;
}

/// The same constants with another weight decay (a parameter's own).
inline LionConstants withDecay(LionConstants c, double lr, double weightDecay) {
  c.decay = float(1.0 - lr * weightDecay);
  return c;
}

/// One element of DeepSpeed's Lion (cpu_lion and fused_lion): the update's
/// sign is taken of beta1*m + (1-beta1)*g, the decay is decoupled, and the
/// momentum moves with beta2 after the update. sign(0) is 0, as there.
/// Unlike Adam's, one formula serves both backends: the sign hides the
/// last-bit differences of contracted multiply-adds unless c is within a
/// rounding of 0, and the momentum may differ in its last bit.
ZRT_HOST_DEVICE inline void lionElement(float g, float &w, float &m,
                                        const LionConstants &k) {
  float c = m * k.beta1 + g * k.oneMinusBeta1;
  float update = c > 0.0f ? -k.lr : (c < 0.0f ? k.lr : 0.0f);
  w = w * k.decay + update;
  m = m * k.beta2 + g * k.oneMinusBeta2;
}

/// The fp32 constants of one SGD step (host code), rounded once from the
/// double hyper-parameters as torch rounds a Python float `alpha`.
struct SgdConstants {
  float negLr;             // -lr
  float weightDecay;       // L2, added to the gradient
  float momentum;          // 0: no momentum buffer
  float oneMinusDampening; // 1 - dampening
  bool first;              // the buffer's first step: it is the gradient
  bool nesterov;
};

inline SgdConstants sgdConstants(double lr, double momentum, double dampening,
                                 double weightDecay, bool nesterov,
                                 int64_t step) {
  SgdConstants c;
  c.negLr = float(-lr);
  c.weightDecay = float(weightDecay);
  c.momentum = float(momentum);
  c.oneMinusDampening = float(1.0 - dampening);
  c.first = step == 1;
  c.nesterov = nesterov;
  return c;
}

/// The same constants with another weight decay (a parameter's own).
inline SgdConstants withDecay(SgdConstants c, double /*lr*/,
                              double weightDecay) {
  c.weightDecay = float(weightDecay);
  return c;
}

/// One element of torch.optim.SGD's single-tensor step, operation for
/// operation: g += wd*w; with momentum, buf = g on its first step, else
/// buf = buf*momentum + (1-dampening)*g, and g = g + momentum*buf
/// (Nesterov) or buf; w += -lr*g. `m` is unused without momentum. One
/// formula serves both backends.
ZRT_HOST_DEVICE inline void sgdElement(float g, float &w, float &m,
                                       const SgdConstants &k) {
  if (k.weightDecay != 0.0f)
    g = g + k.weightDecay * w;
  if (k.momentum != 0.0f) {
    m = k.first ? g : m * k.momentum + k.oneMinusDampening * g;
    g = k.nesterov ? g + k.momentum * m : m;
  }
  w = w + k.negLr * g;
}

/// torch.optim.NAdam's momentum cache of step t: mu_t = beta1 (1 - 0.5 *
/// 0.96^(t psi)), psi its momentum_decay, in double as torch's Python.
inline double nadamMu(double beta1, double momentumDecay, int64_t t) {
  return beta1 * (1.0 - 0.5 * std::pow(0.96, double(t) * momentumDecay));
}

/// The fp32 constants of one NAdam step (host code), each rounded once from
/// the double that torch computes in Python.
struct NadamConstants {
  float decay;         // 1 - lr * weight_decay (decoupled)
  float weightDecay;   // L2, added to the gradient (not decoupled)
  float oneMinusBeta1; // exp_avg.lerp_(grad, 1 - beta1)
  float beta2;
  float oneMinusBeta2;
  float bc2; // 1 - beta2^t
  float eps;
  float gradStep;     // -lr (1 - mu_t) / (1 - mu_product_t)
  float momentumStep; // -lr mu_{t+1} / (1 - mu_product_t mu_{t+1})
  bool decoupled;
};

/// `muProduct` is the fp32 product of mu_1..mu_t, as torch keeps it.
inline NadamConstants nadamConstants(double lr, double beta1, double beta2,
                                     double eps, double weightDecay,
                                     double momentumDecay, bool decoupled,
                                     float muProduct, int64_t step) {
  double mu = nadamMu(beta1, momentumDecay, step);
  double muNext = nadamMu(beta1, momentumDecay, step + 1);
  NadamConstants c;
  c.decay = float(1.0 - lr * weightDecay);
  c.weightDecay = float(weightDecay);
  c.oneMinusBeta1 = float(1.0 - beta1);
  c.beta2 = float(beta2);
  c.oneMinusBeta2 = float(1.0 - beta2);
  c.bc2 = float(1.0 - std::pow(beta2, double(step)));
  c.eps = float(eps);
  c.gradStep = float(-lr * (1.0 - mu) / (1.0 - double(muProduct)));
  c.momentumStep = float(-lr * muNext / (1.0 - double(muProduct) * muNext));
  c.decoupled = decoupled;
  return c;
}

/// The same constants with another weight decay (a parameter's own).
inline NadamConstants withDecay(NadamConstants c, double lr,
                                double weightDecay) {
  c.decay = float(1.0 - lr * weightDecay);
  c.weightDecay = float(weightDecay);
  return c;
}

/// One element of torch.optim.NAdam's single-tensor step, operation for
/// operation: the decay (decoupled, or L2 on the gradient), the moments
/// (exp_avg by lerp), denom = sqrt(exp_avg_sq / bc2) + eps, then the two
/// addcdiv_ of the gradient and of exp_avg. One formula serves both
/// backends.
ZRT_HOST_DEVICE inline void nadamElement(float g, float &w, float &m, float &v,
                                         const NadamConstants &k) {
  if (k.decoupled)
    w = w * k.decay;
  else if (k.weightDecay != 0.0f)
    g = g + k.weightDecay * w;
  m = m + k.oneMinusBeta1 * (g - m);
  v = v * k.beta2 + k.oneMinusBeta2 * g * g;
  float denom = sqrtf(v / k.bc2) + k.eps;
  w = w + k.gradStep * (g / denom);
  w = w + k.momentumStep * (m / denom);
}

//===----------------------------------------------------------------------===//
// Muon (torch.optim.Muon)
//===----------------------------------------------------------------------===//

/// How torch.optim.Muon scales the learning rate by the matrix's shape
/// [rows, cols] (its `adjust_lr_fn`).
enum class MuonAdjustLr : int32_t {
  Original = 0,          // None or "original": sqrt(max(1, rows / cols))
  MatchRmsAdamw = 1,     // 0.2 * sqrt(max(rows, cols))
  SpectralUnclamped = 2, // sqrt(rows / cols)
};

/// The fp32 constants of one Muon step (host code), each rounded once from
/// the double that torch computes in Python: the lerp weights, the decay
/// factor of `mul_` and the `alpha` of `add_`.
struct MuonConstants {
  float lerpWeight;     // 1 - momentum: buf.lerp_(grad, 1 - momentum)
  float nesterovWeight; // momentum: grad.lerp(buf, momentum)
  float decay;          // 1 - lr * weight_decay
  float negAdjustedLr;  // -adjusted_lr
  bool nesterov;
  // Newton-Schulz: X = a X + (b G + c G G) X with G = X X^T.
  float a, b, c;
  float eps;
};

inline double muonAdjustedLr(double lr, MuonAdjustLr fn, int64_t rows,
                             int64_t cols) {
  double ratio = double(rows) / double(cols);
  switch (fn) {
  case MuonAdjustLr::Original:
    return lr * std::sqrt(std::max(1.0, ratio));
  case MuonAdjustLr::MatchRmsAdamw:
    return lr * (0.2 * std::sqrt(double(std::max(rows, cols))));
  case MuonAdjustLr::SpectralUnclamped:
    return lr * std::sqrt(ratio);
  }
  return lr;
}

inline MuonConstants muonConstants(double lr, double momentum,
                                   double weightDecay, bool nesterov, double a,
                                   double b, double c, double eps,
                                   MuonAdjustLr fn, int64_t rows,
                                   int64_t cols) {
  MuonConstants k;
  k.lerpWeight = float(1.0 - momentum);
  k.nesterovWeight = float(momentum);
  k.decay = float(1.0 - lr * weightDecay);
  k.negAdjustedLr = float(-muonAdjustedLr(lr, fn, rows, cols));
  k.nesterov = nesterov;
  k.a = float(a);
  k.b = float(b);
  k.c = float(c);
  k.eps = float(eps);
  return k;
}

ZRT_HOST_DEVICE inline float fmaF32(float x, float y, float z) {
#ifdef __CUDA_ARCH__
  return fmaf(x, y, z);
#else
  return std::fma(x, y, z);
#endif
}

/// fp32 rounded to bf16 (nearest even) and widened back: the value a bf16
/// tensor holds.
ZRT_HOST_DEVICE inline float roundBf16(float x) {
  return bf16ToFloat(floatToBf16(x));
}

/// torch's CPU lerp (LerpKernel.cpp, vectorized and scalar alike): one fused
/// multiply-add from the nearer end, with the weight and 1 - weight in fp32.
ZRT_HOST_DEVICE inline float lerpTorch(float self, float end, float weight) {
  bool small = weight < 0.5f && weight > -0.5f;
  return fmaF32(small ? weight : weight - 1.0f, end - self, small ? self : end);
}

/// The momentum of one element: buf.lerp_(grad, 1 - momentum); returns the
/// matrix Newton-Schulz starts from, rounded to bf16 (grad.lerp(buf,
/// momentum) with Nesterov, else buf).
ZRT_HOST_DEVICE inline float muonMomentum(float g, float &buf,
                                          const MuonConstants &k) {
  buf = lerpTorch(buf, g, k.lerpWeight);
  return roundBf16(k.nesterov ? lerpTorch(g, buf, k.nesterovWeight) : buf);
}

/// The elements of torch.addmm(C, A, B, beta, alpha) on bf16 CPU tensors
/// (oneDNN): the fp32 product sum scaled by alpha, then beta * C fused into
/// it, rounded once to bf16. `acc` is the fp32 sum of A B's products.
ZRT_HOST_DEVICE inline float addmmBf16(float beta, float cIn, float alpha,
                                       float acc) {
  return roundBf16(fmaF32(beta, cIn, alpha * acc));
}

/// The parameter's step: param.mul_(1 - lr*wd); param.add_(update,
/// alpha=-adjusted_lr), the add one fused multiply-add as torch's CPU add.
ZRT_HOST_DEVICE inline float muonApply(float w, float update,
                                       const MuonConstants &k) {
  return fmaF32(update, k.negAdjustedLr, w * k.decay);
}

//===----------------------------------------------------------------------===//
// 8-bit Adam states: bitsandbytes' block-wise dynamic quantisation
//===----------------------------------------------------------------------===//

/// The elements of a state that share one fp32 absmax (optimizers.def's
/// ZRT_OPTIMIZER_PRECISION block of int8 states).
constexpr int64_t kQuantBlock = 2048;
/// The codes of a dynamic map.
constexpr int kQuantCodes = 256;

/// bitsandbytes' dynamic quantisation map (create_dynamic_map with 7
/// exponent bits and 8 bits in all), in ascending order: for each decade
/// i = 0..6, 2^i (signed, with their negatives) or 2^(i+1) (unsigned)
/// midpoints of linspace(0.1, 1) scaled by 10^(i-6), then 0 and 1. Computed
/// in double and rounded once; the tests' NumPy model computes the same.
inline void dynamicQuantMap(bool isSigned, float *map) {
  static const double kDecades[7] = {1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0};
  double values[kQuantCodes];
  int count = 0;
  for (int i = 0; i < 7; ++i) {
    int64_t parts = isSigned ? int64_t(1) << i : int64_t(1) << (i + 1);
    for (int64_t j = 0; j < parts; ++j) {
      double lo = 0.1 + 0.9 * double(j) / double(parts);
      double hi = 0.1 + 0.9 * double(j + 1) / double(parts);
      double v = kDecades[i] * ((lo + hi) / 2.0);
      values[count++] = v;
      if (isSigned)
        values[count++] = -v;
    }
  }
  values[count++] = 0.0;
  values[count++] = 1.0;
  std::sort(values, values + count);
  for (int c = 0; c < kQuantCodes; ++c)
    map[c] = float(values[c]);
}

/// fp32 arithmetic rounded one operation at a time on both backends, so that
/// a plain fp32 model (NumPy) gives the same bits: CUDA's _rn intrinsics are
/// never contracted; the host files that use these are built with
/// -ffp-contract=off.
ZRT_HOST_DEVICE inline float mulRn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
ZRT_HOST_DEVICE inline float addRn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
ZRT_HOST_DEVICE inline float subRn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
ZRT_HOST_DEVICE inline float divRn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
ZRT_HOST_DEVICE inline float sqrtRn(float a) {
#ifdef __CUDA_ARCH__
  return __fsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}

/// The code of `map` (ascending) nearest to x, the lower one of a tie: the
/// first minimum of |map - x|, found between x's two neighbours.
ZRT_HOST_DEVICE inline uint8_t quantizeNearest(const float *map, float x) {
  if (!(x > map[0]))
    return 0;
  if (!(x < map[kQuantCodes - 1]))
    return uint8_t(kQuantCodes - 1);
  int lo = 0, hi = kQuantCodes - 1; // map[lo] < x < map[hi]
  while (hi - lo > 1) {
    int mid = (lo + hi) / 2;
    if (map[mid] < x)
      lo = mid;
    else
      hi = mid;
  }
  return subRn(map[hi], x) < subRn(x, map[lo]) ? uint8_t(hi) : uint8_t(lo);
}

/// A state's value in a block: its code's map value times the absmax.
ZRT_HOST_DEVICE inline float dequantizeState(const float *map, uint8_t code,
                                             float absmax) {
  return mulRn(map[code], absmax);
}

/// A state's code in a block of absmax `absmax` (0: every value is 0).
ZRT_HOST_DEVICE inline uint8_t quantizeState(const float *map, float x,
                                             float absmax) {
  return quantizeNearest(map, absmax > 0.0f ? divRn(x, absmax) : 0.0f);
}

/// One element of the 8-bit Adam/AdamW update on the dequantised fp32
/// moments m and v, torch's operation order (adamBlocks) rounded one
/// operation at a time: the same bits on both backends and in a NumPy model.
/// The block's new absmax and the codes follow from the updated m and v.
ZRT_HOST_DEVICE inline void adam8bitElement(float g, float &w, float &m,
                                            float &v, const AdamConstants &k,
                                            bool decoupled) {
  if (decoupled)
    w = mulRn(w, k.decay);
  else
    g = addRn(g, mulRn(k.weightDecay, w));
  m = addRn(m, mulRn(k.oneMinusBeta1, subRn(g, m)));
  v = addRn(mulRn(v, k.beta2), mulRn(mulRn(k.oneMinusBeta2, g), g));
  float denom = addRn(divRn(sqrtRn(v), k.bc2Sqrt), k.eps);
  w = addRn(w, divRn(mulRn(k.negStepSize, m), denom));
}

//===----------------------------------------------------------------------===//
// Adafactor (torch.optim.Adafactor)
//===----------------------------------------------------------------------===//

/// The constants of one Adafactor step (host code), as torch's
/// single-tensor step computes them in Python: the fp32 ones rounded once
/// from its doubles (a Python float meets an fp32 tensor as fp32), the
/// step size's ingredients kept in double.
struct AdafactorConstants {
  float beta2Weight; // 1 - beta2_t = step^beta2_decay, the lerp weight
  float eps1;        // row_var's mean is clamped to it
  float eps1Squared; // var_estimate is clamped to it
  float decay;       // 1 - lr * weight_decay
  bool decays;       // weight_decay != 0: torch skips the multiply
  bool maximize;
  double eps2; // the least RMS the step size scales by
  double rho;  // min(lr, 1 / sqrt(step))
  double d;    // the update's RMS clipping threshold
};

/// `eps1` < 0 stands for torch's None: fp32's machine epsilon (the
/// master's dtype). `lr` is the step's (after the schedule).
inline AdafactorConstants adafactorConstants(double lr, double beta2Decay,
                                             double eps1, double eps2, double d,
                                             double weightDecay, bool maximize,
                                             int64_t step) {
  AdafactorConstants k;
  double t = double(step);
  if (eps1 < 0.0)
    eps1 = double(std::numeric_limits<float>::epsilon());
  k.beta2Weight = float(std::pow(t, beta2Decay));
  k.eps1 = float(eps1);
  k.eps1Squared = float(eps1 * eps1);
  k.decay = float(1.0 - lr * weightDecay);
  k.decays = weightDecay != 0.0;
  k.maximize = maximize;
  k.eps2 = eps2;
  k.rho = std::min(lr, 1.0 / std::pow(t, 0.5));
  k.d = d;
  return k;
}

/// A row's (column's) mean of grad^2 from its sum of squares, as torch's
/// vector_norm(grad, dim).square_().div_(n): the fp32 norm squared, divided.
ZRT_HOST_DEVICE inline float adafactorMeanSquare(double sumSquares, int64_t n) {
  float norm = sqrtRn(float(sumSquares));
  return divRn(mulRn(norm, norm), float(n));
}

/// The update of one element from its variance estimate (factored:
/// row_var * col_var / clamped mean of row_var), as torch:
/// var.clamp_(min=eps1^2).rsqrt_().mul_(grad), rsqrt rounded as 1 / sqrt.
ZRT_HOST_DEVICE inline float adafactorUpdate(float g, float variance,
                                             const AdafactorConstants &k) {
  float v = variance < k.eps1Squared ? k.eps1Squared : variance;
  return mulRn(divRn(1.0f, sqrtRn(v)), g);
}

/// The factored variance estimate of element (i, j): row_var @ col_var
/// divided by the clamped mean of row_var.
ZRT_HOST_DEVICE inline float adafactorFactoredVariance(float row, float col,
                                                       float rowMean) {
  return divRn(mulRn(row, col), rowMean);
}

/// The step's signed scale of the update, -alpha / denom, from the whole
/// tensor's sums of squares of the parameter (before the step) and of the
/// update: alpha = max(eps2, RMS(param)) * rho and denom =
/// max(1, RMS(update) / d), each norm fp32 as torch's `.norm(2).item()`.
ZRT_HOST_DEVICE inline float adafactorStepScale(const AdafactorConstants &k,
                                                double paramSquares,
                                                double updateSquares,
                                                int64_t numel) {
  double root = sqrt(double(numel));
  double rms = double(sqrtRn(float(paramSquares))) / root;
  double alpha = (k.eps2 < rms ? rms : k.eps2) * k.rho;
  double clip = double(sqrtRn(float(updateSquares))) / (root * k.d);
  double denom = clip > 1.0 ? clip : 1.0;
  return float(-alpha / denom);
}

/// The parameter's step: param.mul_(1 - lr*wd) when wd != 0, then
/// param.add_(update, alpha=scale), one fused multiply-add as torch's CPU
/// add.
ZRT_HOST_DEVICE inline float adafactorApply(float w, float update, float scale,
                                            const AdafactorConstants &k) {
  if (k.decays)
    w = mulRn(w, k.decay);
  return fmaF32(update, scale, w);
}

} // namespace zrt

#endif // ZERO_RT_OPTIMIZER_MATH_H
