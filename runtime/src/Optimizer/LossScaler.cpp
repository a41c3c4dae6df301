//===- LossScaler.cpp - Loss scaling and gradient clipping on the host ----===//
//
// Part of the zero-mlir project.
//
// Host arithmetic that every backend shares: the scaler runs on the host
// once per step, after the overflow flag has reached it.
//
//===----------------------------------------------------------------------===//

#include "Support/Support.h"
#include "zero_rt/zrt.h"

#include <algorithm>
#include <cmath>

using namespace zrt;

extern "C" float zrt_clip_coefficient(const float *stats, double maxNorm) {
  if (maxNorm <= 0)
    return 1.0f;
  double coef = maxNorm / (std::sqrt(double(stats[1])) + 1e-6);
  // As torch's clamp(max=1): a NaN norm stays NaN.
  return coef >= 1.0 ? 1.0f : float(coef);
}

extern "C" void zrt_loss_scaler_init(zrt_loss_scaler *s, int32_t dynamic,
                                     int64_t initialScalePower,
                                     int64_t scaleWindow, int64_t hysteresis,
                                     double minScale, double staticScale) {
  if (dynamic && (scaleWindow < 1 || hysteresis < 1 || !(minScale > 0)))
    fatal("zrt_loss_scaler_init: window %lld, hysteresis %lld and min scale "
          "%g must be positive",
          (long long)scaleWindow, (long long)hysteresis, minScale);
  if (!dynamic && !(staticScale > 0 && std::isfinite(staticScale)))
    fatal("zrt_loss_scaler_init: the static scale must be positive, got %g",
          staticScale);
  s->cur_scale =
      dynamic ? std::ldexp(1.0, int(initialScalePower)) : staticScale;
  s->min_scale = minScale;
  s->scale_factor = 2.0;
  s->cur_iter = 0;
  s->last_overflow_iter = -1;
  s->scale_window = scaleWindow;
  s->delayed_shift = hysteresis;
  s->cur_hysteresis = hysteresis;
  s->consecutive_hysteresis = 0;
  s->dynamic = dynamic != 0;
}

extern "C" int32_t zrt_loss_scaler_update(zrt_loss_scaler *s,
                                          int32_t overflow) {
  // DynamicLossScaler.update_scale, rule for rule (DeepSpeed <= 0.16 growth
  // test); DeepSpeed raises instead of halving at min_scale, we clamp. A
  // static scale (DeepSpeed's LossScaler) never changes; an overflow still
  // skips the step.
  if (s->dynamic) {
    if (overflow) {
      if (s->delayed_shift == 1 || s->cur_hysteresis == 1)
        s->cur_scale = std::max(s->cur_scale / s->scale_factor, s->min_scale);
      else
        --s->cur_hysteresis;
      s->last_overflow_iter = s->cur_iter;
    } else {
      if (s->consecutive_hysteresis)
        s->cur_hysteresis = s->delayed_shift;
      if ((s->cur_iter - s->last_overflow_iter) % s->scale_window == 0) {
        if (!s->consecutive_hysteresis)
          s->cur_hysteresis = s->delayed_shift;
        s->cur_scale *= s->scale_factor;
      }
    }
  }
  ++s->cur_iter;
  return overflow != 0;
}

extern "C" int32_t zrt_update_loss_scale(zrt_loss_scaler *s,
                                         const float *stats) {
  return zrt_loss_scaler_update(s, stats[0] != 0.0f);
}

extern "C" float zrt_loss_scaler_scale(const zrt_loss_scaler *s) {
  return float(s->cur_scale);
}
