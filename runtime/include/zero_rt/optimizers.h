//===- optimizers.h - zero-mlir runtime: the optimizers' table --*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// What the compiler and the runtime derive from optimizers.def: an
// optimizer's bytes per parameter, its state buffers, whether its weight
// decay is decoupled, and how a ds_config names it. Plain C++17, with no
// LLVM dependency; each row's figures are checked here at compile time.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_OPTIMIZERS_H
#define ZERO_RT_OPTIMIZERS_H

#include "zero_rt/manifest.h"
#include "zero_rt/zrt.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace zrt::optimizers {

using Kind = manifest::OptimizerKind;

/// The number of optimizer kinds.
constexpr int kNumKinds = 0
#define ZRT_OPTIMIZER(id, name, decoupled, bytes, update, staged, host, nvme) +1
#include "zero_rt/optimizers.def"
    ;

/// The optimizers' state buffer kinds, each once, in the partition's order.
inline constexpr BufferKind kStateBuffers[] = {
#define ZRT_OPTIMIZER_BUFFER(bufferId, key) bufferId,
#include "zero_rt/optimizers.def"
};

/// Whether `buffer` is an optimizer's state.
constexpr bool isStateBuffer(BufferKind buffer) {
  for (BufferKind k : kStateBuffers)
    if (k == buffer)
      return true;
  return false;
}

/// One state buffer of an optimizer.
struct State {
  Kind kind;
  BufferKind buffer;
  int32_t dtype; // zrt_dtype
  int64_t bytes; // per parameter
  const char *reportKey;
  const char *label;
};

/// Every optimizer's state buffers, in the table's order.
inline constexpr State kStates[] = {
#define ZRT_OPTIMIZER_STATE(id, bufferId, dtype, bytes, reportKey, label)      \
  {Kind::id, bufferId, dtype, bytes, reportKey, label},
#include "zero_rt/optimizers.def"
};

/// The bytes per parameter of `kind`'s states, as its row states them.
constexpr int64_t bytesPerParam(Kind kind) {
#define ZRT_OPTIMIZER(id, name, decoupled, bytes, update, staged, host, nvme)  \
  if (kind == Kind::id)                                                        \
    return bytes;
#include "zero_rt/optimizers.def"
  return 0;
}

/// The sum of `kind`'s state rows' bytes.
constexpr int64_t stateBytes(Kind kind) {
  int64_t sum = 0;
  for (const State &s : kStates)
    if (s.kind == kind)
      sum += s.bytes;
  return sum;
}

/// Whether `kind` decays the parameter itself rather than its gradient.
constexpr bool isDecoupled(Kind kind) {
#define ZRT_OPTIMIZER(id, name, decoupled, bytes, update, staged, host, nvme)  \
  if (kind == Kind::id)                                                        \
    return decoupled;
#include "zero_rt/optimizers.def"
  return false;
}

/// The number of `kind`'s state rows: the state operands of its update
/// (zrt_update's `states`, in the rows' order).
constexpr int numStates(Kind kind) {
  int count = 0;
  for (const State &s : kStates)
    count += s.kind == kind;
  return count;
}

/// The place of `kind`'s state `buffer` among its states (zrt_update's
/// `states`), -1 when it keeps none.
constexpr int stateIndex(Kind kind, BufferKind buffer) {
  int index = 0;
  for (const State &s : kStates) {
    if (s.kind != kind)
      continue;
    if (s.buffer == buffer)
      return index;
    ++index;
  }
  return -1;
}

/// Whether `kind` keeps a state buffer of kind `buffer`.
constexpr bool hasState(Kind kind, BufferKind buffer) {
  for (const State &s : kStates)
    if (s.kind == kind && s.buffer == buffer)
      return true;
  return false;
}

/// The hyper-parameter that gates `kind`'s state `buffer` (its
/// ZRT_OPTIMIZER_STATE_GATE): the state exists only when it is not 0. Null
/// for a state that always exists.
constexpr const char *stateGate(Kind kind, BufferKind buffer) {
#define ZRT_OPTIMIZER_STATE_GATE(id, bufferId, param)                          \
  if (kind == Kind::id && buffer == bufferId)                                  \
    return #param;
#include "zero_rt/optimizers.def"
  return nullptr;
}

/// The parameters a state is kept for (ZRT_OPTIMIZER_STATE_PART): all, or
/// one of the two sets an optimizer such as Muon updates differently.
enum class StatePart : int32_t { All, Matrices, Others };

/// The part of `kind`'s parameters its state `buffer` is kept for.
constexpr StatePart statePart(Kind kind, BufferKind buffer) {
#define ZRT_OPTIMIZER_STATE_PART(id, bufferId, part)                           \
  if (kind == Kind::id && buffer == bufferId)                                  \
    return StatePart::part;
#include "zero_rt/optimizers.def"
  return StatePart::All;
}

/// Whether `kind` keeps its state `buffer` factored for tensors of two or
/// more dims (ZRT_OPTIMIZER_STATE_FACTORED): a rank's elements of it follow
/// the tensors' shapes, not the shard's size.
constexpr bool isFactored(Kind kind, BufferKind buffer) {
#define ZRT_OPTIMIZER_STATE_FACTORED(id, bufferId)                             \
  if (kind == Kind::id && buffer == bufferId)                                  \
    return true;
#include "zero_rt/optimizers.def"
  return false;
}

/// Whether `kind` splits its states between matrices and others.
constexpr bool hasStateParts(Kind kind) {
  for (const State &s : kStates)
    if (s.kind == kind && statePart(kind, s.buffer) != StatePart::All)
      return true;
  return false;
}

/// Whether `kind` keeps any state factored (ZRT_OPTIMIZER_STATE_FACTORED).
constexpr bool hasFactoredStates(Kind kind) {
  for (const State &s : kStates)
    if (s.kind == kind && isFactored(kind, s.buffer))
      return true;
  return false;
}

/// How `kind` lays its states out by each rank's layout
/// (ZRT_OPTIMIZER_LAYOUT_STATES), or nullptr when they are one element per
/// element of the shard: a checkpoint then saves them as their bytes, which
/// another layout reads by parameter (layoutStateRuns).
constexpr const char *layoutStatesText(Kind kind) {
#define ZRT_OPTIMIZER_LAYOUT_STATES(id, description)                           \
  if (kind == Kind::id)                                                        \
    return description;
#include "zero_rt/optimizers.def"
  return nullptr;
}

/// The bytes one parameter of `part` (Matrices or Others) keeps under
/// `kind`: its states for that part and those for all.
constexpr int64_t partBytes(Kind kind, StatePart part) {
  int64_t sum = 0;
  for (const State &s : kStates)
    if (s.kind == kind && (statePart(kind, s.buffer) == StatePart::All ||
                           statePart(kind, s.buffer) == part))
      sum += s.bytes;
  return sum;
}

/// The most one parameter keeps: the states' sum, or with parts the
/// larger part's.
constexpr int64_t maxParamBytes(Kind kind) {
  if (!hasStateParts(kind))
    return stateBytes(kind);
  int64_t matrices = partBytes(kind, StatePart::Matrices),
          others = partBytes(kind, StatePart::Others);
  return matrices > others ? matrices : others;
}

// States by part or factored follow each rank's layout, which the
// checkpoint must know.
#define ZRT_OPTIMIZER(id, name, decoupled, bytes, update, staged, host, nvme)  \
  static_assert(!(hasStateParts(Kind::id) || hasFactoredStates(Kind::id)) ||   \
                    layoutStatesText(Kind::id) != nullptr,                     \
                "optimizers.def: " #name                                       \
                " needs a ZRT_OPTIMIZER_LAYOUT_STATES "                        \
                "row");
#include "zero_rt/optimizers.def"

// zrt_update holds every row's states.
#define ZRT_OPTIMIZER(id, name, decoupled, bytes, update, staged, host, nvme)  \
  static_assert(numStates(Kind::id) <= ZRT_MAX_OPTIMIZER_STATES,               \
                "optimizers.def: " #name " keeps more states than "            \
                "ZRT_MAX_OPTIMIZER_STATES (zrt.h)");
#include "zero_rt/optimizers.def"

// A row's bytes are its states' bytes (the larger part's with parts), and
// a state's bytes its dtype's.
#define ZRT_OPTIMIZER(id, name, decoupled, bytes, update, staged, host, nvme)  \
  static_assert(bytesPerParam(Kind::id) == maxParamBytes(Kind::id),            \
                "optimizers.def: " #name "'s bytes are not its states' sum");
#include "zero_rt/optimizers.def"
#define ZRT_OPTIMIZER_STATE(id, bufferId, dtype, bytes, reportKey, label)      \
  static_assert((dtype == ZRT_F32 ? 4 : 2) == bytes,                           \
                "optimizers.def: a state's bytes are not its dtype's");
#include "zero_rt/optimizers.def"

/// A precision the states may be kept in (ZRT_STATE_PRECISION).
enum class StatePrecision : int32_t {
#define ZRT_STATE_PRECISION(id, name) id,
#include "zero_rt/optimizers.def"
};

/// The number of state precisions.
constexpr int kNumStatePrecisions = 0
#define ZRT_STATE_PRECISION(id, name) +1
#include "zero_rt/optimizers.def"
    ;

/// The name of `precision` (#zero.optimizer's `states`, the manifest's and
/// the checkpoint's spelling).
constexpr const char *precisionName(StatePrecision precision) {
#define ZRT_STATE_PRECISION(id, name)                                          \
  if (precision == StatePrecision::id)                                         \
    return #name;
#include "zero_rt/optimizers.def"
  return "";
}

/// Whether `kind` can keep its states in `precision`: f32 always, another
/// when a ZRT_OPTIMIZER_PRECISION row says so.
constexpr bool hasPrecision(Kind kind, StatePrecision precision) {
  if (precision == StatePrecision::F32)
    return true;
#define ZRT_OPTIMIZER_PRECISION(id, prec, bytes, block)                        \
  if (kind == Kind::id && precision == StatePrecision::prec)                   \
    return true;
#include "zero_rt/optimizers.def"
  return false;
}

/// The bytes per element of each of `kind`'s states in `precision` (f32:
/// the state's row), 0 when `kind` has no such precision or state.
constexpr int64_t elementBytes(Kind kind, StatePrecision precision,
                               BufferKind buffer) {
  if (precision == StatePrecision::F32) {
    for (const State &s : kStates)
      if (s.kind == kind && s.buffer == buffer)
        return s.bytes;
    return 0;
  }
  if (!hasState(kind, buffer))
    return 0;
#define ZRT_OPTIMIZER_PRECISION(id, prec, bytes, block)                        \
  if (kind == Kind::id && precision == StatePrecision::prec)                   \
    return bytes;
#include "zero_rt/optimizers.def"
  return 0;
}

/// The elements of a state that share one fp32 absmax in `precision`, 0
/// when it keeps none.
constexpr int64_t absmaxBlock(Kind kind, StatePrecision precision) {
#define ZRT_OPTIMIZER_PRECISION(id, prec, bytes, block)                        \
  if (kind == Kind::id && precision == StatePrecision::prec)                   \
    return block;
#include "zero_rt/optimizers.def"
  return 0;
}

/// The bytes of `kind`'s state `buffer` in `precision` over a shard of
/// `numel` elements: the elements, and one fp32 absmax per block (the last
/// one may be short).
constexpr int64_t stateBufferBytes(Kind kind, StatePrecision precision,
                                   BufferKind buffer, int64_t numel) {
  int64_t block = absmaxBlock(kind, precision);
  int64_t bytes = numel * elementBytes(kind, precision, buffer);
  if (block > 0 && bytes > 0)
    bytes += 4 * ((numel + block - 1) / block);
  return bytes;
}

/// One hyper-parameter of an optimizer.
struct Param {
  Kind kind;
  const char *name;         // the #zero.optimizer parameter
  std::string_view key;     // the ds_config optimizer.params key
  const char *defaultValue; // "" when it has none
};

/// Every optimizer's hyper-parameters, in the table's order.
inline constexpr Param kParams[] = {
#define ZRT_OPTIMIZER_PARAM(id, name, key, default)                            \
  {Kind::id, #name, key, default},
#include "zero_rt/optimizers.def"
};

/// Whether `kind` has the hyper-parameter `name` (a #zero.optimizer
/// parameter).
constexpr bool hasParam(Kind kind, std::string_view name) {
  for (const Param &p : kParams)
    if (p.kind == kind && name == p.name)
      return true;
  return false;
}

/// Whether `kind` takes the ds_config `optimizer.params` key `key` (a
/// pair's key, "betas", stands for its halves "betas[0]", "betas[1]").
constexpr bool hasParamKey(Kind kind, std::string_view key) {
  for (const Param &p : kParams)
    if (p.kind == kind &&
        (p.key == key ||
         (p.key.size() == key.size() + 3 &&
          p.key.substr(0, key.size()) == key && p.key[key.size()] == '[')))
      return true;
  return false;
}

/// The type of a #zero.optimizer hyper-parameter (ZRT_HYPER_PARAM's
/// `type`): its manifest field is a double, a bool, an int64_t or, for the
/// enum MuonAdjustLr, an int32_t of the enum's number.
enum class HyperParamType : int32_t { Double, Bool, Int, MuonAdjustLr };

/// A hyper-parameter of #zero.optimizer besides `lr` (a ZRT_HYPER_PARAM
/// row), named as its row, in the table's order.
enum class HyperParam : int32_t {
#define ZRT_HYPER_PARAM(name, type, default, check) name,
#include "zero_rt/optimizers.def"
};

/// The number of ZRT_HYPER_PARAM rows.
constexpr int kNumHyperParams = 0
#define ZRT_HYPER_PARAM(name, type, default, check) +1
#include "zero_rt/optimizers.def"
    ;

/// One ZRT_HYPER_PARAM row.
struct HyperParamRow {
  HyperParam id;
  const char *name; // the #zero.optimizer parameter, the manifest's key
  HyperParamType type;
  double defaultValue; // true is 1, an enum's value its number
};

/// Every hyper-parameter, by HyperParam.
inline constexpr HyperParamRow kHyperParams[] = {
#define ZRT_HYPER_PARAM(name, type, default, check)                            \
  {HyperParam::name, #name, HyperParamType::type, double(default)},
#include "zero_rt/optimizers.def"
};
static_assert(sizeof(kHyperParams) / sizeof(kHyperParams[0]) ==
              size_t(kNumHyperParams));

/// The row of hyper-parameter `p`.
constexpr const HyperParamRow &hyperParamRow(HyperParam p) {
  return kHyperParams[static_cast<size_t>(p)];
}

/// Every row's default, by HyperParam.
constexpr std::array<double, kNumHyperParams> hyperParamDefaults() {
  std::array<double, kNumHyperParams> values{};
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = kHyperParams[i].defaultValue;
  return values;
}

/// The hyper-parameter named `name`, if it is a row's.
constexpr std::optional<HyperParam> hyperParamOf(std::string_view name) {
  for (const HyperParamRow &p : kHyperParams)
    if (name == p.name)
      return p.id;
  return std::nullopt;
}

// Each optimizer's hyper-parameter is `lr` or a ZRT_HYPER_PARAM row: the
// manifest carries it, and the runtime reads it by name.
#define ZRT_OPTIMIZER_PARAM(id, name, key, default)                            \
  static_assert(std::string_view(#name) == "lr" || hyperParamOf(#name),        \
                "optimizers.def: " #id "'s " #name                             \
                " is not a ZRT_HYPER_PARAM row");
#include "zero_rt/optimizers.def"

/// The ds_config `optimizer.type` names, DeepSpeed's own then torch.optim's
/// classes, as DeepSpeed and torch spell them.
inline constexpr std::string_view kDsTypes[] = {
#define ZRT_OPTIMIZER_DS_TYPE(id, type) type,
#define ZRT_OPTIMIZER_TORCH_TYPE(id, type) type,
#include "zero_rt/optimizers.def"
};

/// Whether `kind` is a torch.optim class to DeepSpeed (its
/// ZRT_OPTIMIZER_TORCH_TYPE): untested under ZeRO at stages 1-3.
constexpr bool isTorchFallback(Kind kind) {
#define ZRT_OPTIMIZER_TORCH_TYPE(id, type)                                     \
  if (kind == Kind::id)                                                        \
    return true;
#include "zero_rt/optimizers.def"
  return false;
}

/// The kind a ds_config `optimizer.type` names, if any: DeepSpeed's own
/// names matched without regard to case as DeepSpeed does, torch.optim's
/// classes exactly. (DeepSpeed's Adam is AdamW unless its
/// adam_w_mode is false: the reader's rule, not the table's.)
inline std::optional<Kind> kindOfDsType(std::string_view name) {
  auto lower = [](char c) {
    return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c;
  };
  auto equalNoCase = [&](std::string_view a, std::string_view b) {
    if (a.size() != b.size())
      return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (lower(a[i]) != lower(b[i]))
        return false;
    return true;
  };
#define ZRT_OPTIMIZER_DS_TYPE(id, type)                                        \
  if (equalNoCase(name, type))                                                 \
    return Kind::id;
#define ZRT_OPTIMIZER_TORCH_TYPE(id, type)                                     \
  if (name == type)                                                            \
    return Kind::id;
#include "zero_rt/optimizers.def"
  return std::nullopt;
}

} // namespace zrt::optimizers

#endif // ZERO_RT_OPTIMIZERS_H
