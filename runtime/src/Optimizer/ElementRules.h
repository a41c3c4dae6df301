//===- ElementRules.h - Element-wise optimizers as rules --------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// An optimizer that updates each element of a flat shard on its own (Adam,
// AdamW, Lion, SGD) is an ElementRule: its step's fp32 constants, computed
// once on the host from its hyper-parameters (zrt_optimizer), and its
// per-element formula (OptimizerMath.h). One launcher per backend runs every
// rule (HostStep.cpp on the CPU and for host updates, Optimizer.cu on CUDA),
// so a new element-wise optimizer is its optimizers.def rows and a rule
// here. Muon and Adafactor read whole tensors and keep their own bodies.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_ELEMENT_RULES_H
#define ZERO_RT_ELEMENT_RULES_H

#include "zero_rt/optimizers.h"
#include "zero_rt/zrt.h"

#include "Optimizer/OptimizerMath.h"
#include "Support/Support.h"

#include <algorithm>
#include <cstring>

namespace zrt::optimizers {

/// The hyper-parameters of kind K in an optimizer: its zrt_<name>_params.
template <Kind K>
struct ParamsOf;
#define ZRT_OPTIMIZER(id, name, decoupled, bytes, update, staged, host, nvme)  \
  template <>                                                                  \
  struct ParamsOf<Kind::id> {                                                  \
    using Type = zrt_##name##_params;                                          \
    static const Type &get(const zrt_optimizer &o) { return o.params.name; }   \
    static Type &get(zrt_optimizer &o) { return o.params.name; }               \
  };
#include "zero_rt/optimizers.def"

/// The rule of kind K; kDefined is false for an optimizer that is not
/// element-wise. A rule has:
///  - kSpan: the kernel's name in traces and messages;
///  - Constants, its step's fp32 constants, from constants(optimizer,
///    schedule, step, lr), which applies the schedule (zrt_lr_at) and
///    returns the step's learning rate in `lr`; OptimizerMath.h's
///    withDecay(constants, lr, weightDecay) gives those of a parameter with
///    a weight decay of its own;
///  - liveStates(optimizer): how many of its states (zrt_update's, in its
///    rows' order) the step reads and writes, fewer than its rows when a
///    gate is 0;
///  - element(g, w, s, k): one element, g the unscaled gradient, w the
///    master, s its live states;
///  - kSharedElement: whether element() is also the device's formula (CUDA
///    runs it in the generic launcher); Adam's is spelled per backend.
template <Kind K>
struct ElementRule {
  static constexpr bool kDefined = false;
};

/// torch.optim.Adam (L2 added to the gradient) or AdamW (decoupled decay),
/// with optional bias correction (DeepSpeed's bias_correction).
template <Kind K, bool kDecoupled>
struct AdamRule {
  static constexpr bool kDefined = true;
  static constexpr bool kSharedElement = false;
  static constexpr const char *kSpan = "zrt_adam";
  using Constants = AdamConstants;

  static Constants constants(const zrt_optimizer &o,
                             const zrt_lr_schedule *schedule, int64_t step,
                             double &lr) {
    const auto &p = ParamsOf<K>::get(o);
    double beta1 = p.beta1, beta2 = p.beta2;
    lr = zrt_lr_at(schedule, p.lr, &beta1, &beta2, step);
    return adamConstants(lr, beta1, beta2, p.eps, p.weight_decay, step,
                         p.bias_correction != 0.0);
  }
  static int liveStates(const zrt_optimizer &) { return 2; }

  /// torch's single-tensor step, operation for operation (the CPU's
  /// contractions; the CUDA kernel pins the same roundings with intrinsics).
  static inline void element(float g, float &w, float *s, const Constants &k) {
    if constexpr (kDecoupled)
      w *= k.decay;
    else
      g = g + k.weightDecay * w;
    float m = s[0] + k.oneMinusBeta1 * (g - s[0]); // lerp_
    float v = s[1] * k.beta2 + k.oneMinusBeta2 * g * g;
    float denom = std::sqrt(v) / k.bc2Sqrt + k.eps;
    w = w + k.negStepSize * m / denom; // addcdiv_
    s[0] = m;
    s[1] = v;
  }
};

template <>
struct ElementRule<Kind::Adam> : AdamRule<Kind::Adam, false> {};
template <>
struct ElementRule<Kind::AdamW> : AdamRule<Kind::AdamW, true> {};

/// DeepSpeed's Lion.
template <>
struct ElementRule<Kind::Lion> {
  static constexpr bool kDefined = true;
  static constexpr bool kSharedElement = true;
  static constexpr const char *kSpan = "zrt_lion";
  using Constants = LionConstants;

  static Constants constants(const zrt_optimizer &o,
                             const zrt_lr_schedule *schedule, int64_t step,
                             double &lr) {
    const zrt_lion_params &p = o.params.lion;
    double beta1 = p.beta1, beta2 = p.beta2;
    lr = zrt_lr_at(schedule, p.lr, &beta1, &beta2, step);
    return lionConstants(lr, beta1, beta2, p.weight_decay);
  }
  static int liveStates(const zrt_optimizer &) { return 1; }
  ZRT_HOST_DEVICE static inline void element(float g, float &w, float *s,
                                             const Constants &k) {
    lionElement(g, w, s[0], k);
  }
};

/// torch.optim.SGD; its momentum_buffer lives only with a momentum.
template <>
struct ElementRule<Kind::SGD> {
  static constexpr bool kDefined = true;
  static constexpr bool kSharedElement = true;
  static constexpr const char *kSpan = "zrt_sgd";
  using Constants = SgdConstants;

  static Constants constants(const zrt_optimizer &o,
                             const zrt_lr_schedule *schedule, int64_t step,
                             double &lr) {
    const zrt_sgd_params &p = o.params.sgd;
    // A cycled momentum (OneCycle) is SGD's momentum, as DeepSpeed cycles
    // a torch optimizer's `momentum` when it has no betas.
    double momentum = p.momentum;
    lr = zrt_lr_at(schedule, p.lr, momentum != 0.0 ? &momentum : nullptr,
                   nullptr, step);
    return sgdConstants(lr, momentum, p.dampening, p.weight_decay,
                        p.nesterov != 0.0, step);
  }
  static int liveStates(const zrt_optimizer &o) {
    return o.params.sgd.momentum != 0.0 ? 1 : 0;
  }
  ZRT_HOST_DEVICE static inline void element(float g, float &w, float *s,
                                             const Constants &k) {
    sgdElement(g, w, s[0], k);
  }
};

/// torch.optim.NAdam, with its decoupled_weight_decay. Its mu_product is
/// not a state: the product of mu_1..mu_t in fp32, as torch's scalar state
/// keeps it, follows from the step and the schedule's beta1s, and is carried
/// from one step to the next on each thread.
template <>
struct ElementRule<Kind::NAdam> {
  static constexpr bool kDefined = true;
  static constexpr bool kSharedElement = true;
  static constexpr const char *kSpan = "zrt_nadam";
  using Constants = NadamConstants;

  static Constants constants(const zrt_optimizer &o,
                             const zrt_lr_schedule *schedule, int64_t step,
                             double &lr) {
    const zrt_nadam_params &p = o.params.nadam;
    double beta1 = p.beta1, beta2 = p.beta2;
    lr = zrt_lr_at(schedule, p.lr, &beta1, &beta2, step);
    return nadamConstants(lr, beta1, beta2, p.eps, p.weight_decay,
                          p.momentum_decay, p.decoupled_weight_decay != 0.0,
                          muProduct(p, schedule, step), step);
  }
  static int liveStates(const zrt_optimizer &) { return 2; }
  ZRT_HOST_DEVICE static inline void element(float g, float &w, float *s,
                                             const Constants &k) {
    nadamElement(g, w, s[0], s[1], k);
  }

private:
  /// mu_1 * ... * mu_step in fp32, each mu with the schedule's beta1 of its
  /// step (torch's `mu_product *= mu`).
  static float muProduct(const zrt_nadam_params &p,
                         const zrt_lr_schedule *schedule, int64_t step) {
    struct Memo {
      zrt_nadam_params params;
      bool scheduled;
      zrt_lr_schedule schedule;
      int64_t step = 0;
      float product = 1.0f;
    };
    static thread_local Memo memo;
    bool same = memo.step > 0 && memo.step <= step &&
                std::memcmp(&memo.params, &p, sizeof p) == 0 &&
                memo.scheduled == (schedule != nullptr) &&
                (!schedule ||
                 std::memcmp(&memo.schedule, schedule, sizeof *schedule) == 0);
    if (!same) {
      memo = Memo{};
      memo.params = p;
      memo.scheduled = schedule != nullptr;
      if (schedule)
        memo.schedule = *schedule;
    }
    for (int64_t t = memo.step + 1; t <= step; ++t) {
      double beta1 = p.beta1, beta2 = p.beta2;
      zrt_lr_at(schedule, p.lr, &beta1, &beta2, t);
      memo.product *= float(nadamMu(beta1, p.momentum_decay, t));
    }
    memo.step = std::max(memo.step, step);
    return memo.product;
  }
};

/// Adam's and AdamW's hyper-parameters, whichever of the two `o` is (their
/// 8-bit and bf16 states' kernels take them as arguments).
struct AdamHyper {
  double lr, beta1, beta2, eps, weightDecay;
  int32_t decoupled, biasCorrection;
};

inline AdamHyper adamHyper(const zrt_optimizer &o) {
  auto from = [](const auto &p, bool decoupled) {
    return AdamHyper{p.lr,
                     p.beta1,
                     p.beta2,
                     p.eps,
                     p.weight_decay,
                     int32_t(decoupled),
                     int32_t(p.bias_correction != 0.0)};
  };
  return Kind(o.kind) == Kind::AdamW ? from(o.params.adamw, true)
                                     : from(o.params.adam, false);
}

/// The name of kind `kind` (its optimizers.def `name`), or "unknown".
inline const char *kindName(int32_t kind) {
#define ZRT_OPTIMIZER(id, name, decoupled, bytes, update, staged, host, nvme)  \
  if (kind == int32_t(Kind::id))                                               \
    return #name;
#include "zero_rt/optimizers.def"
  return "unknown";
}

/// The precision of `o`'s states, after checking that its kind is a row
/// and keeps its states in that precision (zrt_optimizer_step's checks on
/// both backends).
inline StatePrecision checkedPrecision(const zrt_optimizer &o) {
  if (o.kind < 0 || o.kind >= kNumKinds)
    fatal("zrt_optimizer_step: unknown optimizer kind %d", int(o.kind));
  auto precision = StatePrecision(o.states);
  if (o.states < 0 || o.states >= kNumStatePrecisions ||
      !hasPrecision(Kind(o.kind), precision))
    fatal("zrt_optimizer_step: %s keeps no states of precision %d",
          kindName(o.kind), int(o.states));
  return precision;
}

} // namespace zrt::optimizers

#endif // ZERO_RT_ELEMENT_RULES_H
