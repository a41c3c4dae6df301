//===- LrSchedule.cpp - DeepSpeed scheduler settings to IR ----------------===//
//
// Part of the zero-mlir project.
//
// DeepSpeed passes a scheduler's `params` to its constructor as keyword
// arguments, so an unknown name is an error there (TypeError) and here.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/Transforms/LrSchedule.h"

#include "llvm/ADT/StringSwitch.h"

#include <cmath>
#include <optional>

using namespace mlir;
using namespace mlir::zero;

namespace {

/// The attribute's parameters as the builder collects them, at their
/// defaults (the attribute's, which are DeepSpeed's).
struct Fields {
  double warmupMinLr = 0.0, warmupMaxLr = 0.001;
  int64_t warmupNumSteps = 1000;
  WarmupType warmupType = WarmupType::log;
  int64_t totalNumSteps = 0;
  double warmupMinRatio = 0.0, cosMinRatio = 0.0001;
  double cycleMinLr = 0.0, cycleMaxLr = 0.0, decayLrRate = 0.0;
  int64_t cycleFirstStepSize = 2000, cycleSecondStepSize = 0, decayStepSize = 0;
  bool cycleMomentum = true;
  double cycleMinMom = 0.8, cycleMaxMom = 0.9, decayMomRate = 0.0;
  double lrRangeTestMinLr = 0.001;
  int64_t lrRangeTestStepSize = 2000;
  double lrRangeTestStepRate = 1.0;
  bool lrRangeTestStaircase = false;
};

std::optional<double> toDouble(StringRef v) {
  double d;
  if (v.trim().getAsDouble(d) || !std::isfinite(d))
    return std::nullopt;
  return d;
}

std::optional<int64_t> toInt(StringRef v) {
  std::optional<double> d = toDouble(v);
  // JSON numbers may be written 1000.0; they must still be whole.
  if (!d || *d != std::floor(*d) || std::fabs(*d) > 9.0e15)
    return std::nullopt;
  return static_cast<int64_t>(*d);
}

std::optional<bool> toBool(StringRef v) {
  v = v.trim();
  if (v == "true" || v == "True" || v == "1")
    return true;
  if (v == "false" || v == "False" || v == "0")
    return false;
  return std::nullopt;
}

} // namespace

LrScheduleAttr mlir::zero::buildLrSchedule(
    MLIRContext *ctx, StringRef type, ArrayRef<LrScheduleParam> params,
    function_ref<InFlightDiagnostic(int64_t param)> emitError) {
  auto whole = [&] { return emitError(-1); };
  std::optional<LrScheduleKind> kind =
      llvm::StringSwitch<std::optional<LrScheduleKind>>(type)
          .Cases({"WarmupLR", "warmup_lr"}, LrScheduleKind::warmup_lr)
          .Cases({"WarmupDecayLR", "warmup_decay_lr"},
                 LrScheduleKind::warmup_decay_lr)
          .Cases({"WarmupCosineLR", "warmup_cosine_lr"},
                 LrScheduleKind::warmup_cosine_lr)
          .Cases({"OneCycle", "one_cycle"}, LrScheduleKind::one_cycle)
          .Cases({"LRRangeTest", "lr_range_test"},
                 LrScheduleKind::lr_range_test)
          .Default(std::nullopt);
  if (!kind) {
    whole() << "unknown learning-rate scheduler '" << type
            << "' (DeepSpeed's are WarmupLR, WarmupDecayLR, "
               "WarmupCosineLR, OneCycle and LRRangeTest)";
    return {};
  }
  Fields f;
  for (int64_t index = 0, e = params.size(); index < e; ++index) {
    const std::string &name = params[index].first;
    const std::string &value = params[index].second;
    auto bad = [&](const char *what) {
      emitError(index) << "scheduler " << type << ": " << name << " must be "
                       << what << ", got '" << value << "'";
      return LrScheduleAttr();
    };
    auto real = [&](double &out) {
      std::optional<double> d = toDouble(value);
      if (d)
        out = *d;
      return d.has_value();
    };
    auto integer = [&](int64_t &out) {
      std::optional<int64_t> i = toInt(value);
      if (i)
        out = *i;
      return i.has_value();
    };
    auto boolean = [&](bool &out) {
      std::optional<bool> b = toBool(value);
      if (b)
        out = *b;
      return b.has_value();
    };
    StringRef n = name;
    bool ok = true;
    if (n == "warmup_min_lr")
      ok = real(f.warmupMinLr);
    else if (n == "warmup_max_lr")
      ok = real(f.warmupMaxLr);
    else if (n == "warmup_num_steps")
      ok = integer(f.warmupNumSteps);
    else if (n == "warmup_type") {
      StringRef v = StringRef(value).trim();
      // DeepSpeed warns and uses log for any other word.
      if (v != "log" && v != "linear")
        return bad("'log' or 'linear'");
      f.warmupType = v == "linear" ? WarmupType::linear : WarmupType::log;
    } else if (n == "total_num_steps") {
      // "auto" (Hugging Face's): the length of the run, known when it runs.
      if (StringRef(value).trim() == "auto")
        f.totalNumSteps = LrScheduleAttr::kAutoSteps;
      else
        ok = integer(f.totalNumSteps) && f.totalNumSteps >= 0;
    } else if (n == "warmup_min_ratio")
      ok = real(f.warmupMinRatio);
    else if (n == "cos_min_ratio")
      ok = real(f.cosMinRatio);
    else if (n == "cycle_min_lr")
      ok = real(f.cycleMinLr);
    else if (n == "cycle_max_lr")
      ok = real(f.cycleMaxLr);
    else if (n == "decay_lr_rate")
      ok = real(f.decayLrRate);
    else if (n == "cycle_first_step_size")
      ok = integer(f.cycleFirstStepSize);
    else if (n == "cycle_second_step_size")
      ok = integer(f.cycleSecondStepSize);
    else if (n == "decay_step_size")
      ok = integer(f.decayStepSize);
    else if (n == "cycle_momentum")
      ok = boolean(f.cycleMomentum);
    else if (n == "cycle_min_mom")
      ok = real(f.cycleMinMom);
    else if (n == "cycle_max_mom")
      ok = real(f.cycleMaxMom);
    else if (n == "decay_mom_rate")
      ok = real(f.decayMomRate);
    else if (n == "lr_range_test_min_lr")
      ok = real(f.lrRangeTestMinLr);
    else if (n == "lr_range_test_step_size")
      ok = integer(f.lrRangeTestStepSize);
    else if (n == "lr_range_test_step_rate")
      ok = real(f.lrRangeTestStepRate);
    else if (n == "lr_range_test_staircase")
      ok = boolean(f.lrRangeTestStaircase);
    else if ((n == "cycle_first_stair_count" ||
              n == "cycle_second_stair_count") &&
             *kind == LrScheduleKind::one_cycle) {
      // OneCycle takes them and never reads them.
      int64_t unused;
      ok = integer(unused);
    } else if (n == "last_batch_iteration") {
      // Resuming is the checkpoint's business (its optimizer step count).
      int64_t it;
      if (!integer(it) || it != -1)
        return bad("-1 (a resumed run continues from its checkpoint's "
                   "optimizer step)");
    } else {
      emitError(index) << "scheduler " << type << " has no parameter '" << name
                       << "'";
      return {};
    }
    if (!ok)
      return bad(
          n.ends_with("staircase") || n == "cycle_momentum" ? "true or false"
          : n == "total_num_steps" ? "a whole number >= 0 or auto"
          : n.contains("steps") || n.contains("size") || n.contains("count")
              ? "a whole number"
              : "a finite number");
  }
  return LrScheduleAttr::getChecked(
      whole, ctx, *kind, APFloat(f.warmupMinLr), APFloat(f.warmupMaxLr),
      f.warmupNumSteps, f.warmupType, f.totalNumSteps,
      APFloat(f.warmupMinRatio), APFloat(f.cosMinRatio), APFloat(f.cycleMinLr),
      APFloat(f.cycleMaxLr), APFloat(f.decayLrRate), f.cycleFirstStepSize,
      f.cycleSecondStepSize, f.decayStepSize, f.cycleMomentum,
      APFloat(f.cycleMinMom), APFloat(f.cycleMaxMom), APFloat(f.decayMomRate),
      APFloat(f.lrRangeTestMinLr), f.lrRangeTestStepSize,
      APFloat(f.lrRangeTestStepRate), f.lrRangeTestStaircase);
}

LrScheduleAttr
mlir::zero::parseLrScheduleSpec(MLIRContext *ctx, StringRef spec,
                                function_ref<InFlightDiagnostic()> emitError) {
  auto [type, rest] = spec.split(':');
  SmallVector<LrScheduleParam> params;
  SmallVector<StringRef> items;
  rest.split(items, ',', -1, /*KeepEmpty=*/false);
  for (StringRef item : items) {
    auto [name, value] = item.split('=');
    if (!item.contains('=') || name.trim().empty()) {
      emitError() << "lr-schedule '" << spec
                  << "': expected name=value after the scheduler type, got '"
                  << item << "'";
      return {};
    }
    params.emplace_back(name.trim().str(), value.trim().str());
  }
  return buildLrSchedule(ctx, type.trim(), params,
                         [&](int64_t) { return emitError(); });
}
