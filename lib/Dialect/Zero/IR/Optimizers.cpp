//===- Optimizers.cpp - The optimizers' table, in the compiler's terms ----===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/IR/Optimizers.h"
#include "zero/Dialect/Zero/IR/OptimizerRules.h"

#include "zero_rt/optimizers.h"

#include "llvm/ADT/StringSwitch.h"

#include <cmath>
#include <string>

using namespace mlir;
using namespace mlir::zero;

namespace table = zrt::optimizers;

// The ODS enums are the table's, case for case and in its order: a row
// without its case (or a case without its row) fails to compile here.
#define ZRT_OPTIMIZER(id, name, decoupled, bytes, update, staged, host, nvme)  \
  static_assert(static_cast<int>(OptimizerKind::name) ==                       \
                    static_cast<int>(table::Kind::id),                         \
                "OptimizerKind::" #name " is not optimizers.def's " #id);
#include "zero_rt/optimizers.def"
static_assert(int(getMaxEnumValForOptimizerKind()) + 1 == table::kNumKinds,
              "OptimizerKind has a case optimizers.def lacks");
#define ZRT_OPTIMIZER_BUFFER(bufferId, key)                                    \
  static_assert(static_cast<int>(BufferKind::key) == zrt::bufferId,            \
                "BufferKind::" #key " is not optimizers.def's " #bufferId);
#include "zero_rt/optimizers.def"
static_assert(int(getMaxEnumValForBufferKind()) + 1 == zrt::kNumBufferKinds &&
                  int(kNumBufferKinds) == zrt::kNumBufferKinds,
              "BufferKind has a case manifest.def lacks");

#define ZRT_STATE_PRECISION(id, name)                                          \
  static_assert(static_cast<int>(StatePrecision::name) ==                      \
                    static_cast<int>(table::StatePrecision::id),               \
                "StatePrecision::" #name " is not optimizers.def's " #id);
#include "zero_rt/optimizers.def"
static_assert(int(getMaxEnumValForStatePrecision()) + 1 ==
                  table::kNumStatePrecisions,
              "StatePrecision has a case optimizers.def lacks");

static table::Kind toTable(OptimizerKind kind) {
  return static_cast<table::Kind>(kind);
}

// A gate names a hyper-parameter of its own optimizer.
#define ZRT_OPTIMIZER_STATE_GATE(id, bufferId, param)                          \
  static_assert(table::hasParam(table::Kind::id, #param),                      \
                "optimizers.def: " #id "'s gate " #param " is not its "        \
                "hyper-parameter");
#include "zero_rt/optimizers.def"

std::optional<double> mlir::zero::getOptimizerParamValue(OptimizerAttr opt,
                                                         StringRef name) {
  if (name == "lr")
    return opt.getLr().convertToDouble();
  return opt.getParams().get(name);
}

ArrayRef<StringRef> mlir::zero::getOptimizerHyperParams() {
  static const StringRef names[] = {
#define ZRT_HYPER_PARAM(name, type, default, check) #name,
#include "zero_rt/optimizers.def"
  };
  return names;
}

bool mlir::zero::isBoolHyperParam(StringRef name) {
#define ZRT_HYPER_PARAM(row, type, default, check)                             \
  if (name == #row)                                                            \
    return std::is_same_v<detail::HyperParam##type, bool>;
#include "zero_rt/optimizers.def"
  return false;
}

std::optional<double> OptimizerParams::get(StringRef name) const {
#define ZRT_HYPER_PARAM(row, type, default, check)                             \
  if (name == #row)                                                            \
    return detail::hyperParamToDouble(row);
#include "zero_rt/optimizers.def"
  return std::nullopt;
}

bool OptimizerParams::set(StringRef name, double value) {
#define ZRT_HYPER_PARAM(row, type, default, check)                             \
  if (name == #row) {                                                          \
    row = detail::hyperParamFromDouble<detail::HyperParam##type>(value);       \
    return true;                                                               \
  }
#include "zero_rt/optimizers.def"
  return false;
}

bool OptimizerParams::reset(StringRef name) {
  std::optional<double> value = OptimizerParams().get(name);
  return value && set(name, *value);
}

bool mlir::zero::hasOptimizerState(OptimizerAttr opt, BufferKind buffer) {
  auto b = static_cast<zrt::BufferKind>(buffer);
  if (!table::hasState(toTable(opt.getKind()), b))
    return false;
  const char *gate = table::stateGate(toTable(opt.getKind()), b);
  if (!gate)
    return true;
  std::optional<double> value = getOptimizerParamValue(opt, gate);
  assert(value && "a gate that is not a #zero.optimizer parameter");
  return *value != 0.0;
}

SmallVector<OptimizerState> mlir::zero::getOptimizerStates(OptimizerAttr opt) {
  SmallVector<OptimizerState> states;
  for (const OptimizerState &s : getOptimizerStates(opt.getKind()))
    if (hasOptimizerState(opt, s.buffer))
      states.push_back(s);
  return states;
}

int64_t mlir::zero::getOptimizerStateBytes(OptimizerAttr opt) {
  int64_t bytes = 0;
  for (const OptimizerState &s : getOptimizerStates(opt))
    bytes +=
        table::elementBytes(toTable(opt.getKind()),
                            static_cast<table::StatePrecision>(opt.getStates()),
                            static_cast<zrt::BufferKind>(s.buffer));
  return bytes;
}

bool mlir::zero::hasOptimizerStatePrecision(OptimizerKind kind,
                                            StatePrecision precision) {
  return table::hasPrecision(toTable(kind),
                             static_cast<table::StatePrecision>(precision));
}

bool mlir::zero::hasBf16MasterUpdate(OptimizerKind kind,
                                     StatePrecision precision) {
  return (kind == OptimizerKind::adam || kind == OptimizerKind::adamw) &&
         (precision == StatePrecision::f32 ||
          precision == StatePrecision::bf16);
}

bool mlir::zero::canSwapOptimizerStates(StatePrecision precision) {
  return precision == StatePrecision::f32;
}

int64_t mlir::zero::getOptimizerStateBufferBytes(OptimizerAttr opt,
                                                 BufferKind buffer,
                                                 int64_t numel) {
  if (!hasOptimizerState(opt, buffer))
    return 0;
  return table::stateBufferBytes(
      toTable(opt.getKind()),
      static_cast<table::StatePrecision>(opt.getStates()),
      static_cast<zrt::BufferKind>(buffer), numel);
}

int64_t mlir::zero::getOptimizerAbsmaxBlock(OptimizerAttr opt) {
  return table::absmaxBlock(
      toTable(opt.getKind()),
      static_cast<table::StatePrecision>(opt.getStates()));
}

int64_t mlir::zero::getOptimizerStateBytes(OptimizerAttr opt, int64_t numel) {
  int64_t bytes = 0;
  for (const OptimizerState &s : getOptimizerStates(opt))
    bytes += getOptimizerStateBufferBytes(opt, s.buffer, numel);
  return bytes;
}

SmallVector<OptimizerState> mlir::zero::getOptimizerStates(OptimizerKind kind) {
  SmallVector<OptimizerState> states;
  for (const table::State &s : table::kStates)
    if (s.kind == toTable(kind))
      states.push_back(
          {static_cast<BufferKind>(s.buffer), s.bytes, s.reportKey, s.label});
  return states;
}

int64_t mlir::zero::getOptimizerStateBytes(OptimizerKind kind) {
  return table::bytesPerParam(toTable(kind));
}

bool mlir::zero::isOptimizerState(BufferKind buffer) {
  return table::isStateBuffer(static_cast<zrt::BufferKind>(buffer));
}

bool mlir::zero::hasOptimizerParam(OptimizerKind kind, StringRef name) {
  return llvm::any_of(table::kParams, [&](const table::Param &p) {
    return p.kind == toTable(kind) && name == p.name;
  });
}

bool mlir::zero::hasOptimizerState(OptimizerKind kind, BufferKind buffer) {
  return table::hasState(toTable(kind), static_cast<zrt::BufferKind>(buffer));
}

OptimizerEntries mlir::zero::getOptimizerEntries(OptimizerKind kind) {
  switch (toTable(kind)) {
#define ZRT_OPTIMIZER(id, name, decoupled, bytes, update, staged, host, nvme)  \
  case table::Kind::id:                                                        \
    return {#update, #staged, #host, #nvme};
#include "zero_rt/optimizers.def"
  }
  llvm_unreachable("an OptimizerKind without its optimizers.def row");
}

std::optional<double>
mlir::zero::getDeepSpeedOptimizerDefault(OptimizerKind kind, StringRef name) {
#define ZRT_OPTIMIZER_DS_DEFAULT(id, param, value)                             \
  static_assert(table::hasParam(table::Kind::id, #param),                      \
                "optimizers.def: " #id "'s ds_config default " #param          \
                " is not its hyper-parameter");                                \
  if (toTable(kind) == table::Kind::id && name == #param)                      \
    return std::stod(value);
#include "zero_rt/optimizers.def"
  return std::nullopt;
}

SmallVector<StringRef> mlir::zero::getDeepSpeedOptimizerTypes() {
  return SmallVector<StringRef>(std::begin(table::kDsTypes),
                                std::end(table::kDsTypes));
}

//===----------------------------------------------------------------------===//
// #zero.optimizer: its verifier and builders over the rows
//===----------------------------------------------------------------------===//

/// torch.optim.Adafactor's checks: beta2_decay <= 0, eps1 (unless None,
/// negative here) and eps2 >= 0; and a positive d, which the update's RMS is
/// divided by.
static LogicalResult
verifyAdafactorParams(function_ref<InFlightDiagnostic()> emitError,
                      double beta2Decay, double eps1, double eps2, double d) {
  if (!(beta2Decay <= 0.0) || !std::isfinite(beta2Decay))
    return emitError() << "optimizer beta2_decay must be <= 0, got "
                       << beta2Decay;
  if (!std::isfinite(eps1) || (eps1 < 0.0 && eps1 != -1.0))
    return emitError() << "optimizer eps1 must be >= 0, or -1 for torch's "
                          "None, got "
                       << eps1;
  if (!(eps2 >= 0.0) || !std::isfinite(eps2))
    return emitError() << "optimizer eps2 must be >= 0, got " << eps2;
  if (!(d > 0.0) || !std::isfinite(d))
    return emitError() << "optimizer d must be positive, got " << d;
  return success();
}

/// The check of a ZRT_HYPER_PARAM row (optimizers.def) on `value`, which
/// holds whatever the kind.
static LogicalResult
checkHyperParam(function_ref<InFlightDiagnostic()> emitError, StringRef name,
                StringRef check, double value) {
  StringRef must;
  if (check == "Finite" && !std::isfinite(value))
    must = "finite";
  else if (check == "Positive" && (!(value > 0.0) || !std::isfinite(value)))
    must = "positive";
  else if (check == "NonNegative" && (!(value >= 0.0) || !std::isfinite(value)))
    must = ">= 0";
  else if (check == "Unit" && !(value >= 0.0 && value < 1.0))
    must = "in [0, 1)";
  if (must.empty())
    return success();
  return emitError() << "optimizer " << name << " must be " << must << ", got "
                     << value;
}

/// Each ZRT_HYPER_PARAM row's own range, as the frameworks check their
/// constructors' arguments.
static LogicalResult
checkHyperParams(function_ref<InFlightDiagnostic()> emitError,
                 const OptimizerParams &p) {
  static const std::pair<StringRef, StringRef> checks[] = {
#define ZRT_HYPER_PARAM(name, type, default, check) {#name, #check},
#include "zero_rt/optimizers.def"
  };
  for (auto [name, check] : checks)
    if (failed(checkHyperParam(emitError, name, check, *p.get(name))))
      return failure();
  return success();
}

LogicalResult
OptimizerAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                      OptimizerKind kind, APFloat lrF,
#define ZRT_HYPER_PARAM(name, type, default, check)                            \
  detail::HyperParamArg##type name,
#include "zero_rt/optimizers.def"
                      StatePrecision states, LrScheduleAttr schedule,
                      bool bf16Masters) {
  OptimizerParams p;
#define ZRT_HYPER_PARAM(name, type, default, check)                            \
  p.name = detail::hyperParamValue(name);
#include "zero_rt/optimizers.def"
  double lr = lrF.convertToDouble();
  if (!(lr > 0.0) || !std::isfinite(lr))
    return emitError() << "optimizer lr must be positive, got " << lr;
  if (bf16Masters && !hasBf16MasterUpdate(kind, states))
    return emitError() << "optimizer bf16_masters is implemented for adam "
                          "and adamw with f32 or bf16 states, got "
                       << stringifyOptimizerKind(kind) << " with "
                       << stringifyStatePrecision(states) << " states";
  if (failed(checkHyperParams(emitError, p)))
    return failure();
  // The rules that read several values. torch.optim.SGD's:
  if (p.nesterov && (!(p.momentum > 0.0) || p.dampening != 0.0))
    return emitError() << "optimizer nesterov requires a momentum > 0 and "
                          "zero dampening, got momentum "
                       << p.momentum << " and dampening " << p.dampening;
  // torch.optim.Muon's ns_steps below 100.
  if (p.ns_steps < 1 || p.ns_steps >= 100)
    return emitError() << "optimizer ns_steps must be in [1, 100), got "
                       << p.ns_steps;
  if (!std::isfinite(p.ns_a) || !std::isfinite(p.ns_b) ||
      !std::isfinite(p.ns_c))
    return emitError() << "optimizer ns_a, ns_b and ns_c must be finite";
  if (failed(
          verifyAdafactorParams(emitError, p.beta2_decay, p.eps1, p.eps2, p.d)))
    return failure();
  // A parameter the optimizer does not read (optimizers.def) keeps its
  // default, so that the attribute never says what does not happen.
  OptimizerParams defaults;
  for (StringRef name : getOptimizerHyperParams()) {
    double value = *p.get(name);
    if (hasOptimizerParam(kind, name) || value == *defaults.get(name))
      continue;
    InFlightDiagnostic d = emitError();
    d << "optimizer " << stringifyOptimizerKind(kind) << " has no " << name;
    if (!isBoolHyperParam(name))
      d << ", got " << value;
    return d;
  }
  if (!hasOptimizerStatePrecision(kind, states))
    return emitError() << "optimizer " << stringifyOptimizerKind(kind)
                       << " has no " << stringifyStatePrecision(states)
                       << " states";
  return success();
}

OptimizerAttr OptimizerAttr::get(MLIRContext *ctx, OptimizerKind kind,
                                 double lr, const OptimizerParams &p,
                                 StatePrecision states, LrScheduleAttr schedule,
                                 bool bf16Masters) {
  return get(ctx, kind, APFloat(lr),
#define ZRT_HYPER_PARAM(name, type, default, check)                            \
  detail::hyperParamArg<detail::HyperParamArg##type>(p.name),
#include "zero_rt/optimizers.def"
             states, schedule, bf16Masters);
}

OptimizerAttr
OptimizerAttr::getChecked(function_ref<InFlightDiagnostic()> emitError,
                          MLIRContext *ctx, OptimizerKind kind, double lr,
                          const OptimizerParams &p, StatePrecision states,
                          LrScheduleAttr schedule, bool bf16Masters) {
  return getChecked(emitError, ctx, kind, APFloat(lr),
#define ZRT_HYPER_PARAM(name, type, default, check)                            \
  detail::hyperParamArg<detail::HyperParamArg##type>(p.name),
#include "zero_rt/optimizers.def"
                    states, schedule, bf16Masters);
}
