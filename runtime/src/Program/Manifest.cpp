//===- Manifest.cpp - Programs: manifest, layout and the shared zrt_ctx ---===//
//
// Part of the zero-mlir project.
//
// What every backend shares about a compiled program, read from its
// manifest and checked before anything runs. Layout.cpp answers what each
// rank owns of it, Init.cpp its initial values and Context.cpp the running
// context; the zrt_ctx_* collectives and optimizer calls are in the files
// beside them.
//
//===----------------------------------------------------------------------===//

#include "Program/Manifest.h"
#include "Data/Files.h"
#include "Support/Support.h"

#include "zero_rt/constants.h"
#include "zero_rt/optimizers.h"
#include "zero_rt/variants.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <set>
#include <stdexcept>

using namespace zrt;
using nlohmann::json;

//===----------------------------------------------------------------------===//
// Reading the manifest
//===----------------------------------------------------------------------===//

namespace {

using manifest::Presence;

[[noreturn]] void invalid(const std::string &msg) {
  throw std::runtime_error("invalid program manifest: " + msg);
}

/// The key path of member `key` of the top-level object `object`.
std::string keyPath(const char *object, const char *key) {
  return std::string(object) + "." + key;
}

/// The value at key path `path` (plan.arena_bytes, partitions[0].buffers;
/// empty: the manifest itself) is not `want`.
[[noreturn]] void mistyped(const std::string &path, const char *want,
                           const json &j) {
  invalid((path.empty() ? std::string("the manifest") : "key '" + path + "'") +
          " must be " + want + ", got " + j.type_name());
}

// The readers of manifest.def's structs, one per object.
#define ZRT_MANIFEST_OBJECT(name)                                              \
  void read(const json &j, const std::string &path, manifest::name &v);
#include "zero_rt/manifest.def"

void read(const json &j, const std::string &path, int64_t &v) {
  if (!j.is_number_integer())
    mistyped(path, "an integer", j);
  if (j.is_number_unsigned() &&
      j.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
    invalid("key '" + path + "' is out of range");
  v = j.get<int64_t>();
}

void read(const json &j, const std::string &path, int32_t &v) {
  int64_t wide = 0;
  read(j, path, wide);
  if (wide < std::numeric_limits<int32_t>::min() ||
      wide > std::numeric_limits<int32_t>::max())
    invalid("key '" + path + "' is out of range");
  v = int32_t(wide);
}

void read(const json &j, const std::string &path, double &v) {
  if (!j.is_number())
    mistyped(path, "a number", j);
  v = j.get<double>();
}

void read(const json &j, const std::string &path, bool &v) {
  if (!j.is_boolean())
    mistyped(path, "true or false", j);
  v = j.get<bool>();
}

void read(const json &j, const std::string &path, std::string &v) {
  if (!j.is_string())
    mistyped(path, "a string", j);
  v = j.get<std::string>();
}

/// A string naming a value of enum E.
template <typename E, std::enable_if_t<std::is_enum_v<E>, int> = 0>
void read(const json &j, const std::string &path, E &v) {
  std::string value;
  read(j, path, value);
  if (std::optional<E> e = manifest::enumOf<E>(value)) {
    v = *e;
    return;
  }
  using Values = manifest::EnumValues<E>;
  std::string values = Values::values[0];
  for (int i = 1; i < Values::size; ++i)
    values +=
        (i + 1 < Values::size ? ", " : " or ") + std::string(Values::values[i]);
  invalid("key '" + path + "' has unknown value '" + value + "' (" + values +
          ")");
}

/// An object keyed by buffer names; other keys are not read.
void read(const json &j, const std::string &path, manifest::BufferMap &v) {
  if (!j.is_object())
    mistyped(path, "an object", j);
  for (int k = 0; k < kNumBufferKinds; ++k)
    if (auto it = j.find(kBufferNames[k]); it != j.end())
      read(*it, path + "." + kBufferNames[k], v[size_t(k)].emplace());
}

template <typename T>
void read(const json &j, const std::string &path, std::vector<T> &v) {
  if (!j.is_array())
    mistyped(path, "an array", j);
  v.resize(j.size());
  for (size_t i = 0; i < j.size(); ++i)
    read(j[i], path + "[" + std::to_string(i) + "]", v[i]);
}

template <typename T>
void read(const json &j, const std::string &path, std::optional<T> &v) {
  read(j, path, v.emplace());
}

/// Member `key` of object `j` at `path`; a missing one keeps `v`.
template <typename T>
void readField(const json &j, const std::string &path, const char *key,
               Presence presence, T &v) {
  std::string at = path.empty() ? key : path + "." + key;
  auto it = j.find(key);
  if (it == j.end()) {
    if (presence == Presence::Required)
      invalid("missing key '" + at + "'");
    return;
  }
  read(*it, at, v);
}

#define ZRT_MANIFEST_OBJECT(name)                                              \
  void read(const json &j, const std::string &path, manifest::name &v) {       \
    if (!j.is_object())                                                        \
      mistyped(path, "an object", j);
#define ZRT_MANIFEST_FIELD(type, name, key, presence, init)                    \
  readField(j, path, key, Presence::presence, v.name);
#define ZRT_MANIFEST_END(name) }
#include "zero_rt/manifest.def"

/// Bytes of an element of `dtype`, a manifest Dtype's value.
int64_t dtypeBytes(const std::string &dtype) {
  using manifest::Dtype;
  std::optional<Dtype> d = manifest::enumOf<Dtype>(dtype);
  return d == Dtype::I64 ? 8 : d == Dtype::BF16 || d == Dtype::F16 ? 2 : 4;
}

/// The optimizer's schedule: the #zero.lr_schedule attribute's kind and
/// parameters, by DeepSpeed's names.
zrt_lr_schedule toSchedule(const manifest::Schedule &w) {
  // By LrScheduleKind.
  static constexpr zrt_lr_kind kinds[] = {ZRT_LR_WARMUP, ZRT_LR_WARMUP_DECAY,
                                          ZRT_LR_WARMUP_COSINE,
                                          ZRT_LR_ONE_CYCLE, ZRT_LR_RANGE_TEST};
  static_assert(std::size(kinds) ==
                manifest::EnumValues<manifest::LrScheduleKind>::size);
  zrt_lr_schedule s{};
  s.kind = kinds[static_cast<int>(w.kind)];
  s.warmup_type = w.warmupType == manifest::WarmupType::Linear;
  s.warmup_min_lr = w.warmupMinLr;
  s.warmup_max_lr = w.warmupMaxLr;
  s.warmup_num_steps = w.warmupNumSteps;
  s.total_num_steps = w.totalNumSteps.value_or(0);
  s.warmup_min_ratio = w.warmupMinRatio;
  s.cos_min_ratio = w.cosMinRatio;
  s.cycle_min_lr = w.cycleMinLr;
  s.cycle_max_lr = w.cycleMaxLr;
  s.decay_lr_rate = w.decayLrRate;
  s.cycle_first_step_size = w.cycleFirstStepSize;
  s.cycle_second_step_size = w.cycleSecondStepSize;
  s.decay_step_size = w.decayStepSize;
  s.cycle_momentum = w.cycleMomentum;
  s.cycle_min_mom = w.cycleMinMom;
  s.cycle_max_mom = w.cycleMaxMom;
  s.decay_mom_rate = w.decayMomRate;
  s.lr_range_test_min_lr = w.lrRangeTestMinLr;
  s.lr_range_test_step_size = w.lrRangeTestStepSize;
  s.lr_range_test_step_rate = w.lrRangeTestStepRate;
  s.lr_range_test_staircase = w.lrRangeTestStaircase;
  if (s.warmup_num_steps < 0 || s.cycle_first_step_size < 1 ||
      s.lr_range_test_step_size < 1)
    invalid("learning-rate schedule step counts must be positive");
  return s;
}

InputInfo toInput(const manifest::Input &w) {
  InputInfo info;
  info.shape = w.shape;
  info.dtype = manifest::valueOf(w.dtype);
  info.offset = w.offset;
  info.indexBound = w.indexBound.value_or(-1);
  info.ignoredIndex = w.ignoredIndex;
  if (w.indexBound &&
      (info.indexBound < 1 ||
       (w.dtype != manifest::Dtype::I32 && w.dtype != manifest::Dtype::I64)))
    invalid(std::string(manifest::Input::indexBoundKey) + " " +
            std::to_string(info.indexBound) + " on a " + info.dtype + " input");
  info.ignoredIndex = w.ignoredIndex;
  if (w.role &&
      (w.dtype != manifest::Dtype::I32 && w.dtype != manifest::Dtype::I64))
    invalid(std::string(manifest::Input::roleKey) + " '" +
            manifest::valueOf(*w.role) + "' on a " + info.dtype + " input");
  info.role = w.role;
  info.name = w.name.value_or("");
  return info;
}

ParamInfo toParam(const manifest::Param &w) {
  ParamInfo info;
  info.name = w.name;
  info.shape = w.shape;
  info.numel = w.numel;
  info.init = w.init;
  info.std = w.std;
  info.partition = w.partition;
  info.offset = w.offset;
  info.weightDecay = w.weightDecay.value_or(-1.0);
  info.frozen = w.frozen.value_or(false);
  info.expertParallel = w.expertParallel.value_or(1);
  info.muon = w.muon.value_or(false);
  if (info.muon && (info.shape.size() < 2 || info.numel <= 0 || info.frozen))
    invalid("parameter '" + info.name +
            "' is marked muon but is no trainable matrix");
  if (info.expertParallel < 1 ||
      (info.expertParallel > 1 && info.shape.empty()))
    invalid("parameter '" + info.name + "' has expert_parallel " +
            std::to_string(info.expertParallel) +
            " (a positive split of its dimension 0)");
  if (info.expertParallel > 1 && w.rows)
    invalid("parameter '" + info.name +
            "' holds a share of experts and padding rows");
  if (w.rows) {
    info.rows = *w.rows;
    if (info.shape.empty() || info.rows < 1 || info.rows >= info.shape[0])
      invalid("parameter '" + info.name + "' has rows " +
              std::to_string(info.rows) + " outside [1, its " +
              std::to_string(info.shape.empty() ? 0 : info.shape[0]) +
              " rows)");
  }
  return info;
}

/// Partition `index` of the manifest.
PartitionInfo toPartition(const manifest::Partition &w, size_t index) {
  PartitionInfo info;
  info.name = w.name;
  info.numel = w.numel;
  info.paddedNumel = w.paddedNumel;
  info.shardNumel = w.shardNumel;
  info.computeDtypeName = manifest::valueOf(w.computeDtype);
  info.computeDtype = computeDtypeOf(info.computeDtypeName);
  if (info.computeDtype < 0)
    invalid("partition '" + info.name + "' has unknown compute dtype '" +
            info.computeDtypeName + "'");
  info.computeBytes = zrt_dtype_size(info.computeDtype);
  info.params = w.params;
  // fp32 parameters are their own masters: no master buffer.
  info.paramsAreMasters = !w.buffers[kMaster];
  for (int k = 0; k < kNumBufferKinds; ++k) {
    info.offsets[k] = -1;
    info.present[k] = w.buffers[size_t(k)].has_value();
    if (!info.present[k])
      continue;
    if (!w.bufferNumel[size_t(k)])
      invalid("missing key '" + std::string(manifest::Program::partitionsKey) +
              "[" + std::to_string(index) + "]." +
              manifest::Partition::bufferNumelKey + "." + kBufferNames[k] +
              "'");
    info.offsets[k] = *w.buffers[size_t(k)];
    info.counts[k] = *w.bufferNumel[size_t(k)];
  }
  auto place = [&](const std::optional<std::vector<BufferKind>> &kinds,
                   const char *memory, std::array<bool, kNumBufferKinds> &on) {
    for (BufferKind k : kinds.value_or(std::vector<BufferKind>{})) {
      if (!info.present[k] || info.onHost[k])
        invalid("partition '" + info.name + "' has no buffer '" +
                kBufferNames[k] + "' to place in " + memory);
      on[k] = true;
    }
  };
  info.expert = w.expert.value_or(false);
  place(w.hostBuffers, "host memory", info.onHost);
  place(w.nvmeBuffers, "the swap file", info.onNvme);
  return info;
}

/// `peft` checked against the parameters as #zero.peft's verifier checks
/// the module: each layer's base [out, in] frozen, its a [r, in] and b
/// [out, r] trainable, each parameter and key once, every other parameter
/// under the prefix.
manifest::Peft checkedPeft(const manifest::Peft &peft,
                           const std::vector<ParamInfo> &params) {
  std::string where = manifest::Program::peftKey;
  if (!nlohmann::json::parse(peft.config, nullptr, false).is_object())
    invalid(keyPath(manifest::Program::peftKey, manifest::Peft::configKey) +
            " is not the text of a JSON object");
  auto find = [&](const std::string &name) -> const ParamInfo & {
    for (const ParamInfo &p : params)
      if (p.name == name)
        return p;
    invalid(where + ": '" + name + "' is no parameter");
  };
  std::set<std::string> adapted, keys, merged;
  for (const manifest::Lora &l : peft.layers) {
    const ParamInfo &w = find(l.base), &a = find(l.a), &b = find(l.b);
    if (w.shape.size() != 2 || a.shape.size() != 2 || b.shape.size() != 2 ||
        a.shape[0] < 1 || a.shape[0] != b.shape[1] ||
        a.shape[1] != w.shape[1] || b.shape[0] != w.shape[0])
      invalid(where + ": '" + l.base + "' " + shapeText(w.shape) +
              " is adapted by a " + shapeText(a.shape) + " and b " +
              shapeText(b.shape) + " (a [r, in], b [out, r], r > 0)");
    if (!w.frozen || a.frozen || b.frozen)
      invalid(where + ": the base '" + l.base +
              "' must be frozen and its adapters train");
    if (!std::isfinite(l.scaling))
      invalid(where + ": the scaling of '" + l.base + "' is not finite");
    for (const std::string *name : {&l.base, &l.a, &l.b})
      if (!adapted.insert(*name).second)
        invalid(where + ": '" + *name + "' is in two layers");
    for (const std::string *key : {&l.aName, &l.bName})
      if (key->empty() || !keys.insert(*key).second)
        invalid(where + ": adapter key '" + *key + "' is empty or repeated");
    if (l.mergedKey.empty() || !merged.insert(l.mergedKey).second)
      invalid(where + ": merged key '" + l.mergedKey +
              "' is empty or repeated");
  }
  for (const ParamInfo &p : params)
    if (p.name.rfind(peft.prefix, 0) != 0 && !adapted.count(p.name))
      invalid(where + ": parameter '" + p.name + "' does not start with '" +
              peft.prefix + "'");
  return peft;
}

} // namespace

int64_t Manifest::findParam(const std::string &name) const {
  for (size_t i = 0; i < params.size(); ++i)
    if (params[i].name == name)
      return int64_t(i);
  return -1;
}

int32_t zrt::computeDtypeOf(const std::string &name) {
  // By Dtype: the floating-point ones.
  static constexpr zrt_dtype kDtypes[] = {ZRT_F32, ZRT_BF16, ZRT_F16};
  std::optional<manifest::Dtype> d = manifest::enumOf<manifest::Dtype>(name);
  if (!d || static_cast<size_t>(*d) >= std::size(kDtypes))
    return -1;
  return kDtypes[static_cast<size_t>(*d)];
}

int64_t InputInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

int64_t InputInfo::elementBytes() const { return dtypeBytes(dtype); }

namespace {

/// The loss scaler, optimizer, schedule and logging of program `w`, whose
/// JSON is `j`.
void readTraining(const manifest::Program &w, const json &j, Manifest &m) {
  const manifest::Precision &prec = w.precision;
  m.precision = manifest::valueOf(prec.kind);
  m.initialScalePower = prec.initialScalePower;
  m.lossScaleWindow = prec.lossScaleWindow;
  m.hysteresis = prec.hysteresis;
  m.minLossScale = prec.minLossScale;
  m.lossScale = prec.lossScale;
  if (!(m.lossScale >= 0) || !std::isfinite(m.lossScale))
    invalid(keyPath(manifest::Program::precisionKey,
                    manifest::Precision::lossScaleKey) +
            " must be >= 0, got " + std::to_string(m.lossScale));

  const manifest::Optimizer &opt = w.optimizer;
  m.optimizer = opt.kind;
  m.lr = opt.lr;
  // Every row's field, whatever the kind (absent: the row's default).
#define ZRT_HYPER_PARAM(name, type, default, check)                            \
  m.hyperParams[size_t(optimizers::HyperParam::name)] = double(opt.name);
#include "zero_rt/optimizers.def"
  m.statePrecision = static_cast<optimizers::StatePrecision>(
      opt.states.value_or(manifest::StatePrecision::F32));
  if (!optimizers::hasPrecision(m.optimizer, m.statePrecision))
    invalid(keyPath(manifest::Program::optimizerKey,
                    manifest::Optimizer::statesKey) +
            " " + optimizers::precisionName(m.statePrecision) + ": " +
            manifest::valueOf(m.optimizer) +
            " cannot keep its states in that precision");
  m.bf16Masters = opt.bf16Masters.value_or(false);
  if (m.bf16Masters && (!(m.optimizer == optimizers::Kind::Adam ||
                          m.optimizer == optimizers::Kind::AdamW) ||
                        m.int8States()))
    invalid(keyPath(manifest::Program::optimizerKey,
                    manifest::Optimizer::bf16MastersKey) +
            ": the bf16-master update is Adam(W)'s with f32 or bf16 states, "
            "not " +
            manifest::valueOf(m.optimizer) + " with " +
            optimizers::precisionName(m.statePrecision) + " states");
  if (opt.schedule) {
    m.schedule = toSchedule(*opt.schedule);
    // Absent for "auto"; only these kinds read it.
    m.scheduleRunLength = !opt.schedule->totalNumSteps &&
                          (m.schedule.kind == ZRT_LR_WARMUP_DECAY ||
                           m.schedule.kind == ZRT_LR_WARMUP_COSINE);
    // Checkpoints record the schedule as the compiler wrote it.
    m.scheduleText = j.at(manifest::Program::optimizerKey)
                         .at(manifest::Optimizer::scheduleKey)
                         .dump();
  }
  m.gradientClipping = w.gradientClipping;
  m.shiftedLabels = w.labels == manifest::LabelConvention::Shifted;
  m.sameTokenLabels =
      w.labels == manifest::LabelConvention::SameTokens || m.shiftedLabels;
  m.stepsPerPrint = w.logging.stepsPerPrint;
  m.wallClockBreakdown = w.logging.wallClockBreakdown;
  if (m.stepsPerPrint < 1)
    invalid(keyPath(manifest::Program::loggingKey,
                    manifest::Logging::stepsPerPrintKey) +
            " must be >= 1, got " + std::to_string(m.stepsPerPrint));
  m.tokenSlots = w.tokenSlots;
}

/// `hf`'s buffers and unused tensors checked: each named once and no
/// parameter or tied name, each buffer's values f32 values that fill its
/// shape.
void checkUntrainedTensors(const manifest::HfModel &hf,
                           const std::vector<manifest::Param> &params) {
  std::set<std::string> taken;
  for (const manifest::Param &p : params)
    taken.insert(p.name);
  for (const manifest::TiedName &t : hf.tied)
    taken.insert(t.name);
  auto claim = [&](const std::string &name, const char *key) {
    if (!taken.insert(name).second)
      invalid(keyPath(manifest::Program::hfModelKey, key) + ": '" + name +
              "' is a parameter, a tied name or named twice");
  };
  for (const manifest::HfBuffer &b :
       hf.buffers.value_or(std::vector<manifest::HfBuffer>())) {
    claim(b.name, manifest::HfModel::buffersKey);
    // Any shape of at most values.size() elements multiplies without
    // overflow.
    int64_t numel = 1;
    for (int64_t d : b.shape)
      numel =
          numel < 0 || d < 0 || (d > 0 && numel > int64_t(b.values.size()) / d)
              ? -1
              : numel * d;
    bool exact = numel == int64_t(b.values.size());
    for (double v : b.values)
      exact &= std::isfinite(v) && double(float(v)) == v;
    if (!exact)
      invalid(keyPath(manifest::Program::hfModelKey,
                      manifest::HfModel::buffersKey) +
              ": '" + b.name + "' must hold the finite f32 values of shape " +
              shapeText(b.shape));
  }
  for (const std::string &name : hf.unused.value_or(std::vector<std::string>()))
    claim(name, manifest::HfModel::unusedKey);
}

/// `hf` checked against the parameters: its config the text of a JSON
/// object, each tied name new and tied to a parameter.
manifest::HfModel checkedHfModel(const manifest::HfModel &hf,
                                 const std::vector<manifest::Param> &params) {
  nlohmann::json config = nlohmann::json::parse(hf.config, nullptr, false);
  if (!config.is_object())
    invalid(
        keyPath(manifest::Program::hfModelKey, manifest::HfModel::configKey) +
        " is not the text of a JSON object");
  std::set<std::string> seen;
  for (const manifest::TiedName &t : hf.tied) {
    bool isParam = false, targetIsParam = false;
    for (const manifest::Param &p : params) {
      isParam |= p.name == t.name;
      targetIsParam |= p.name == t.param;
    }
    if (isParam || !targetIsParam || !seen.insert(t.name).second)
      invalid(
          keyPath(manifest::Program::hfModelKey, manifest::HfModel::tiedKey) +
          ": '" + t.name +
          "' must be a new name tied to a parameter, "
          "not to '" +
          t.param + "'");
  }
  checkUntrainedTensors(hf, params);
  return hf;
}

/// Expert parallelism's parameters split by the program's expert-parallel
/// size, and its partitions sharded over expert replica sets alone (not
/// with MiCS's or hpZ's groups, which the runtime does not combine with
/// them).
void checkExperts(const Manifest &m) {
  for (const ParamInfo &p : m.params)
    if (p.expertParallel > 1 && p.expertParallel != m.expertParallel)
      invalid("parameter '" + p.name + "' holds experts split over " +
              std::to_string(p.expertParallel) +
              " ranks, but expert_parallel is " +
              std::to_string(m.expertParallel));
  for (const PartitionInfo &part : m.partitions)
    if (part.expert && (m.micsShardSize > 0 || m.hpzPartitionSize > 1))
      invalid("expert partition '" + part.name +
              "' with MiCS or hpZ groups (not supported)");
}

/// Names the unnamed inputs (programs compiled before inputs had names):
/// by their role where no other input has it (input_ids, labels,
/// position_ids), else input<k>.
void nameInputs(std::vector<InputInfo> &inputs) {
  auto taken = [&](const std::string &name) {
    for (const InputInfo &in : inputs)
      if (in.name == name)
        return true;
    return false;
  };
  for (size_t k = 0; k < inputs.size(); ++k) {
    for (size_t j = 0; j < k; ++j)
      if (!inputs[k].name.empty() && inputs[k].name == inputs[j].name)
        invalid("inputs " + std::to_string(j) + " and " + std::to_string(k) +
                " are both named '" + inputs[k].name + "'");
  }
  for (size_t k = 0; k < inputs.size(); ++k) {
    InputInfo &in = inputs[k];
    if (!in.name.empty())
      continue;
    std::string byRole;
    if (in.role)
      byRole = *in.role == manifest::IndexRole::Tokens   ? "input_ids"
               : *in.role == manifest::IndexRole::Labels ? "labels"
                                                         : "position_ids";
    in.name = !byRole.empty() && !taken(byRole) ? byRole
                                                : "input" + std::to_string(k);
  }
}

/// The inputs, parameters, partitions and plan of program `w`.
void readLayout(const manifest::Program &w, Manifest &m) {
  for (const manifest::Input &in : w.inputs)
    m.inputs.push_back(toInput(in));
  nameInputs(m.inputs);
  for (const manifest::Param &p : w.params)
    m.params.push_back(toParam(p));
  for (size_t i = 0; i < w.partitions.size(); ++i)
    m.partitions.push_back(toPartition(w.partitions[i], i));
  // A partition is frozen when its parameters are; none mixes them.
  for (PartitionInfo &part : m.partitions) {
    const ParamInfo *first = nullptr;
    for (const ParamInfo &p : m.params) {
      if (p.partition < 0 || size_t(p.partition) >= m.partitions.size() ||
          &m.partitions[size_t(p.partition)] != &part)
        continue;
      if (first && first->frozen != p.frozen)
        invalid("partition '" + part.name + "' mixes frozen parameter '" +
                (p.frozen ? p : *first).name + "' with trainable '" +
                (p.frozen ? *first : p).name + "'");
      if (!first)
        first = &p;
    }
    part.frozen = first && first->frozen;
    if (part.frozen)
      part.paramsAreMasters = part.computeDtype == ZRT_F32;
  }
  const manifest::Plan &plan = w.plan;
  m.persistentBytes = plan.persistentBytes;
  m.arenaBytes = plan.arenaBytes;
  m.peakBytes = plan.peakBytes;
  m.scratchBytes = plan.scratchBytes;
  m.hostBytes = plan.hostBytes.value_or(0);
  m.nvmeBytes = plan.nvmeBytes.value_or(0);
  m.swapOffset = plan.swapOffset.value_or(0);
  m.swapBytes = plan.swapBytes.value_or(0);
  m.nvmePath = w.nvmePath.value_or(std::string());
  m.paramNvmeBytes = plan.paramNvmeBytes.value_or(0);
  m.paramSwapOffset = plan.paramSwapOffset.value_or(0);
  m.paramSwapBytes = plan.paramSwapBytes.value_or(0);
  m.paramNvmePath = w.paramNvmePath.value_or(std::string());
  if (const std::optional<manifest::CommByKind> &comm = plan.comm) {
    m.hasPlannedComm = true;
    const std::optional<manifest::CommBytes> *kinds[kNumCommKinds] = {
        &comm->allGather, &comm->reduceScatter, &comm->reduce, &comm->allReduce,
        &comm->allToAll};
    for (int k = 0; k < kNumCommKinds; ++k) {
      if (!*kinds[k])
        continue;
      const manifest::CommBytes &b = **kinds[k];
      if (b.intraNodeBytes < 0 || b.interNodeBytes < 0)
        invalid("key '" +
                keyPath(manifest::Program::planKey, manifest::Plan::commKey) +
                "." + kCommKindNames[k] + "' has negative bytes");
      m.plannedComm[size_t(k)] = {b.intraNodeBytes, b.interNodeBytes};
    }
  }
  if (const std::optional<manifest::Topology> &t = w.topology) {
    m.ranksPerNode = t->ranksPerNode;
    m.hpzPartitionSize = t->hpzPartitionSize;
    m.micsShardSize = t->micsShardSize;
  }
  if (const std::optional<manifest::MemoryTimeline> &t = w.memoryTimeline) {
    m.plannedLiveBytes = t->liveBytes;
    m.plannedScratchBytes = t->scratchBytes;
    m.backwardStart = t->backwardStart;
  }
}

/// The stage, the world, the arenas and the topology.
void checkTopology(const Manifest &m) {
  // The invariants the zrt_ctx_* calls rely on.
  if (m.stage < 0 || m.stage > 3)
    invalid("stage " + std::to_string(m.stage));
  if (m.worldSize < 1 || m.accumulationSteps < 1)
    invalid("world size and accumulation steps must be positive");
  if (m.persistentBytes < 0 || m.arenaBytes < 0)
    invalid("negative arena size");
  // The rules #zero.schedule verifies.
  using manifest::Topology;
  auto topologyKey = [](const char *key) {
    return "key '" + keyPath(manifest::Program::topologyKey, key) + "' ";
  };
  if (m.ranksPerNode < 0 ||
      (m.ranksPerNode > 0 && m.worldSize % m.ranksPerNode))
    invalid(topologyKey(Topology::ranksPerNodeKey) +
            std::to_string(m.ranksPerNode) +
            " does not divide the world size " + std::to_string(m.worldSize));
  // DeepSpeed's rules for hpZ and MiCS (zero_rt/variants.h).
  zrt_variant_config variants = {};
  variants.stage = m.stage;
  variants.world_size = m.worldSize;
  variants.hpz_partition_size = m.hpzPartitionSize;
  variants.mics_shard_size = m.micsShardSize;
  auto breaks = [&](zrt_variant_rule rule) {
    return zrt_variant_breaks(&variants, rule) != 0;
  };
  if (breaks(ZRT_HPZ_DIVIDES_WORLD))
    invalid(topologyKey(Topology::hpzPartitionSizeKey) +
            std::to_string(m.hpzPartitionSize) +
            " is not a positive divisor of the world size " +
            std::to_string(m.worldSize));
  if (breaks(ZRT_MICS_DIVIDES_WORLD))
    invalid(topologyKey(Topology::micsShardSizeKey) +
            std::to_string(m.micsShardSize) +
            " does not divide the world size " + std::to_string(m.worldSize));
  if (breaks(ZRT_HPZ_NEEDS_STAGE3) || breaks(ZRT_MICS_NEEDS_STAGE3))
    invalid(topologyKey(m.hpzPartitionSize > 1 ? Topology::hpzPartitionSizeKey
                                               : Topology::micsShardSizeKey) +
            "needs stage 3, the program is stage " + std::to_string(m.stage));
  if (breaks(ZRT_HPZ_EXCLUDES_MICS))
    invalid(topologyKey(Topology::hpzPartitionSizeKey) +
            "and mics_shard_size exclude each other");
  // The rank sets are a mesh's (#zero.schedule's verifier refuses sizes
  // that form none).
  zrt_mesh mesh;
  if (zrt_mesh_from_sizes(&mesh, m.worldSize, m.hpzPartitionSize,
                          m.micsShardSize, m.sequenceParallel, m.expertParallel,
                          m.expertPlacement))
    invalid("hpz_partition_size " + std::to_string(m.hpzPartitionSize) +
            ", mics_shard_size " + std::to_string(m.micsShardSize) +
            ", sequence_parallel " + std::to_string(m.sequenceParallel) +
            " and expert_parallel " + std::to_string(m.expertParallel) +
            " form no mesh of " + std::to_string(m.worldSize) + " ranks");
}

/// The swap files and their swap buffers in the host arena.
void checkSwapFiles(const Manifest &m) {
  int64_t optimizerNvme = m.optimizerNvmeBytes();
  constexpr int64_t kBlock = ZRT_NVME_BLOCK_BYTES;
  if (m.nvmeBytes < 0 || m.nvmeBytes % kBlock || m.swapOffset % kBlock ||
      m.swapBytes % kBlock || m.swapOffset < 0 || m.swapBytes < 0 ||
      m.swapOffset + m.swapBytes > m.hostBytes || optimizerNvme < 0 ||
      (optimizerNvme > 0) != (m.swapBytes > 0) ||
      (optimizerNvme > 0) == m.nvmePath.empty())
    invalid("inconsistent NVMe swap file or swap buffers");
  if (m.paramNvmeBytes < 0 || m.paramNvmeBytes % kBlock ||
      m.paramSwapOffset % kBlock || m.paramSwapBytes % kBlock ||
      m.paramSwapOffset < 0 || m.paramSwapBytes < 0 ||
      m.paramSwapOffset + m.paramSwapBytes > m.hostBytes ||
      (m.paramNvmeBytes > 0) != (m.paramSwapBytes > 0) ||
      (m.paramNvmeBytes > 0) == m.paramNvmePath.empty() ||
      (m.paramSwapBytes > 0 && m.swapBytes > 0 &&
       m.paramSwapOffset < m.swapOffset + m.swapBytes &&
       m.swapOffset < m.paramSwapOffset + m.paramSwapBytes))
    invalid("inconsistent parameter swap file or swap buffers");
}

/// Partition `p`: its layout, buffers and placement.
void checkPartition(const Manifest &m, const PartitionInfo &p) {
  int64_t optimizerNvme = m.optimizerNvmeBytes();
  constexpr int64_t kBlock = ZRT_NVME_BLOCK_BYTES;
  if (p.numel < 0 || p.paddedNumel < p.numel || p.shardNumel < 0 ||
      (m.stage > 0 &&
       p.shardNumel * (p.expert ? m.shardGroupSize(p) : m.worldSize) < p.numel))
    invalid("partition '" + p.name + "' has an inconsistent layout");
  // The Adam kernels keep fp32 masters: an fp32 compute copy is one when
  // it lives where Adam runs (both on the device, or both in host memory;
  // never with the states in the swap file).
  bool nvme = optimizerNvme > 0;
  if (p.frozen) {
    // No step changes it: only its parameters, wherever they live.
    for (int k = 0; k < kNumBufferKinds; ++k)
      if (k != kParams && k != kSecondary && p.hasBuffer(BufferKind(k)))
        invalid("frozen partition '" + p.name + "' has a " + kBufferNames[k] +
                " buffer (only params)");
    if (!p.hasBuffer(kParams))
      invalid("frozen partition '" + p.name + "' has no params buffer");
  } else if (m.bf16Masters && p.computeDtype == ZRT_BF16) {
    // The compiler refuses bf16 masters with offload.
    if (!p.paramsAreMasters || p.offloaded() || p.paramsOffloaded())
      invalid("partition '" + p.name +
              "' computes in bf16 with bf16 masters, so it needs its params "
              "on the device as its masters (no master buffer, no offload)");
  } else if (p.paramsAreMasters !=
             (p.computeDtype == ZRT_F32 && !nvme && !p.onNvme[kParams] &&
              p.offloaded() == p.paramsOnHost()))
    invalid("partition '" + p.name + "' " +
            (p.paramsAreMasters ? "has no" : "has a") +
            " master buffer with compute dtype " + p.computeDtypeName +
            " (exactly f32 parameters, and bf16 ones with bf16_masters, are "
            "their own masters)");
  for (int k = 0; k < kNumBufferKinds; ++k) {
    if (!p.hasBuffer(BufferKind(k)))
      continue;
    int64_t bytes = m.bufferBytes(p, BufferKind(k));
    int64_t limit = p.onNvme[k]
                        ? (k == kParams ? m.paramNvmeBytes : optimizerNvme)
                    : p.onHost[k] ? m.hostBytes
                                  : m.persistentBytes;
    if (p.offsets[k] < 0 || p.counts[k] < 0 || p.offsets[k] + bytes > limit ||
        (p.onNvme[k] && p.offsets[k] % kBlock))
      invalid("buffer " + std::string(kBufferNames[k]) + " of partition '" +
              p.name + "' lies outside the " +
              (p.onNvme[k] ? "swap file (or off its " + std::to_string(kBlock) +
                                 "-byte blocks)"
               : p.onHost[k] ? std::string("host arena")
                             : std::string("persistent arena")));
  }
  // What the owned-range arithmetic below reads.
  bool fullMaster = m.stage == 0;
  bool fullGrads = m.stage <= 1, fullParams = m.stage <= 2;
  auto need = [&](int k, bool full) {
    int64_t want = full ? p.numel : std::min(p.shardNumel, p.numel);
    if (p.counts[k] < want)
      invalid("buffer " + std::string(kBufferNames[k]) + " of partition '" +
              p.name + "' has " + std::to_string(p.counts[k]) +
              " elements, stage " + std::to_string(m.stage) + " needs " +
              std::to_string(want));
  };
  need(kParams, fullParams);
  if (!p.frozen)
    need(kGrads, fullGrads);
  // A state kept for one part of the parameters (optimizers.def's parts:
  // Muon's momentum for its matrices, AdamW's moments for the rest) holds
  // that part's owned elements, packed: the most any shard has (the gaps
  // of owner-computes' enlarged slots are in neither part).
  auto partNeed = [&](optimizers::StatePart part) {
    int32_t index = int32_t(&p - m.partitions.data());
    int64_t shards = m.stage == 0 ? 1 : m.shardGroupSize(p), most = 0;
    for (int64_t s = 0; s < shards; ++s) {
      int64_t begin = m.stage == 0 ? 0 : std::min(s * p.shardNumel, p.numel);
      int64_t end =
          m.stage == 0 ? p.numel : std::min((s + 1) * p.shardNumel, p.numel);
      int64_t mine[2] = {0, 0};
      for (const ParamInfo &info : m.params)
        if (info.partition == index)
          mine[info.muon] +=
              std::max<int64_t>(0, std::min(info.offset + info.numel, end) -
                                       std::max(info.offset, begin));
      most =
          std::max(most, mine[part == optimizers::StatePart::Matrices ? 1 : 0]);
    }
    return most;
  };
  for (int k = kMaster; k < kNumBufferKinds; ++k) {
    // A factored state holds statistics, not an element per parameter:
    // the update checks it against zero_rt/adafactor.h's count.
    if (k == kSecondary || !p.hasBuffer(BufferKind(k)) ||
        optimizers::isFactored(m.optimizer, BufferKind(k)))
      continue;
    optimizers::StatePart part =
        optimizers::statePart(m.optimizer, BufferKind(k));
    if (part == optimizers::StatePart::All) {
      need(BufferKind(k), fullMaster);
    } else if (int64_t want = partNeed(part); p.counts[k] < want) {
      invalid("buffer " + std::string(kBufferNames[k]) + " of partition '" +
              p.name + "' has " + std::to_string(p.counts[k]) +
              " elements, its part of the owned parameters needs " +
              std::to_string(want));
    }
  }
  // hpZ: a secondary shard is this rank's slice of the padded group over
  // its hpZ group, on the device.
  if (p.hasBuffer(kSecondary) &&
      (m.hpzPartitionSize <= 1 || p.onHost[kSecondary] ||
       p.onNvme[kSecondary] ||
       p.counts[kSecondary] != p.paddedNumel / m.hpzPartitionSize))
    invalid("buffer secondary of partition '" + p.name +
            "' is not a device buffer of padded / hpz_partition_size = " +
            std::to_string(p.paddedNumel /
                           std::max<int64_t>(1, m.hpzPartitionSize)) +
            " elements");
  // An offloaded optimizer: its masters, moments and gradient copy are on
  // the host, and 16-bit parameters come back through a host copy.
  // On NVMe, the states are in the swap file and every compute type
  // comes back through host_params. Offloaded parameter shards (stage 3)
  // are updated in place by a host Adam.
  auto stateOff = [&](int k) { return nvme ? p.onNvme[k] : p.onHost[k]; };
  // The optimizers' states (optimizers.def), each placed as the masters.
  bool statesOff = true, statesOnHost = false, statesOnNvme = false;
  for (BufferKind k : optimizers::kStateBuffers) {
    if (!p.frozen && p.hasBuffer(k) != m.keepsState(k))
      invalid("partition '" + p.name + "' " +
              (p.hasBuffer(k) ? "has" : "lacks") + " the optimizer state " +
              kBufferNames[k] + " (" + manifest::valueOf(m.optimizer) +
              (p.hasBuffer(k) ? " does not keep it)" : " keeps it)"));
    if (!m.keepsState(k))
      continue;
    statesOff &= stateOff(k);
    statesOnHost |= p.onHost[k];
    statesOnNvme |= p.onNvme[k];
  }
  if ((p.offloaded() &&
       ((!p.paramsAreMasters && !stateOff(kMaster)) || !statesOff ||
        !p.onHost[kHostGrads] || p.onHost[kGrads] ||
        ((nvme || p.computeDtype != ZRT_F32) && !p.paramsOnHost()) !=
            p.hasBuffer(kHostParams))) ||
      (!p.offloaded() &&
       (p.onHost[kMaster] || statesOnHost || p.onHost[kGrads])) ||
      (p.paramsOffloaded() && m.stage != 3))
    invalid("partition '" + p.name + "' has an inconsistent host placement");
  if (!p.offloaded() && (p.onNvme[kMaster] || statesOnNvme))
    invalid("partition '" + p.name +
            "' has buffers on NVMe but keeps its "
            "optimizer on the device");
  if (m.stage == 3 && p.counts[kParams] != p.shardNumel)
    invalid("stage-3 params shard of '" + p.name + "' is not " +
            manifest::Partition::shardNumelKey);
}

/// Each parameter inside its partition, whose starts it records.
void placeParams(Manifest &m) {
  for (const ParamInfo &p : m.params) {
    if (p.partition < 0 || p.partition >= int32_t(m.partitions.size()))
      invalid("parameter '" + p.name + "' is in no partition");
    const PartitionInfo &part = m.partitions[size_t(p.partition)];
    if (p.offset < 0 || p.numel < 0 || p.offset + p.numel > part.numel)
      invalid("parameter '" + p.name + "' lies outside partition '" +
              part.name + "'");
    m.partitions[size_t(p.partition)].paramStarts.push_back(p.offset);
  }
  for (PartitionInfo &part : m.partitions)
    std::sort(part.paramStarts.begin(), part.paramStarts.end());
}

/// The memory timeline and the inputs against the step arena.
void checkStepPlan(const Manifest &m) {
  using manifest::MemoryTimeline;
  const std::string timeline = manifest::Program::memoryTimelineKey;
  size_t ops = m.plannedLiveBytes.size();
  if (m.plannedScratchBytes.size() != ops)
    invalid(timeline + " has " + std::to_string(ops) + " " +
            MemoryTimeline::liveBytesKey + " but " +
            std::to_string(m.plannedScratchBytes.size()) + " " +
            MemoryTimeline::scratchBytesKey);
  for (size_t i = 0; i < ops; ++i)
    if (m.plannedLiveBytes[i] < 0 || m.plannedLiveBytes[i] > m.arenaBytes ||
        m.plannedScratchBytes[i] < 0 ||
        m.plannedScratchBytes[i] > m.scratchBytes)
      invalid(timeline + " at op " + std::to_string(i) +
              " exceeds the plan's step arena or scratch");
  if (m.backwardStart < -1 || m.backwardStart > int64_t(ops))
    invalid(keyPath(timeline.c_str(), MemoryTimeline::backwardStartKey) + " " +
            std::to_string(m.backwardStart) + " is not an op index");
  for (const InputInfo &in : m.inputs)
    if (in.offset < 0 ||
        in.offset + in.numel() * in.elementBytes() > m.arenaBytes)
      invalid("an input lies outside the step arena");
}

} // namespace

Manifest Manifest::parse(const std::string &text) {
  Manifest m;
  manifest::Program w;
  json j;
  try {
    j = json::parse(text);
    // The version first: another version's manifest may lack keys.
    if (!j.is_object())
      mistyped("", "an object", j);
    readField(j, "", manifest::Program::versionKey, Presence::Required,
              w.version);
    if (w.version != ZRT_PROGRAM_VERSION)
      invalid("program version " + std::to_string(w.version) +
              ", this runtime implements version " +
              std::to_string(ZRT_PROGRAM_VERSION) +
              " (recompile with a matching zero-compile)");
    read(j, "", w);
  } catch (const json::exception &e) {
    invalid(e.what());
  }
  m.version = w.version;
  m.stage = w.stage;
  m.worldSize = w.worldSize;
  m.accumulationSteps = w.accumulationSteps;
  m.globalBatch = w.globalBatch;
  m.sequenceParallel = w.sequenceParallel;
  if (m.sequenceParallel < 1 || m.worldSize % m.sequenceParallel != 0)
    invalid("sequence_parallel " + std::to_string(m.sequenceParallel) +
            " does not divide the world size " + std::to_string(m.worldSize));
  m.expertParallel = w.expertParallel.value_or(1);
  if (w.expertParallel &&
      (m.expertParallel < 2 || m.worldSize % m.expertParallel != 0))
    invalid("expert_parallel " + std::to_string(m.expertParallel) +
            " is not a divisor of the world size " +
            std::to_string(m.worldSize) +
            " above 1 (absent without expert parallelism)");
  if (w.expertPlacement && !w.expertParallel)
    invalid("expert_placement without expert_parallel");
  m.expertPlacement = w.expertPlacement == manifest::ExpertPlacement::Strided
                          ? ZRT_EXPERT_STRIDED
                          : ZRT_EXPERT_CONTIGUOUS;
  readTraining(w, j, m);
  if (w.hfModel)
    m.hfModel = checkedHfModel(*w.hfModel, w.params);

  m.hashText = *w.hash;
  size_t used = 0;
  try {
    m.hash = std::stoull(m.hashText, &used, 16);
  } catch (const std::logic_error &e) {
    invalid(std::string("malformed number: ") + e.what());
  }
  if (used != m.hashText.size())
    invalid("malformed hash '" + m.hashText + "'");

  readLayout(w, m);
  checkExperts(m);
  checkTopology(m);
  checkSwapFiles(m);
  for (const PartitionInfo &p : m.partitions)
    checkPartition(m, p);
  if (w.peft)
    m.peft = checkedPeft(*w.peft, m.params);
  placeParams(m);
  checkStepPlan(m);
  return m;
}

void Manifest::resolveRunLength(int64_t steps) {
  if (!scheduleRunLength)
    return;
  // The rules the compiler checks for a literal total_num_steps.
  const char *kind = schedule.kind == ZRT_LR_WARMUP_COSINE ? "warmup_cosine_lr"
                                                           : "warmup_decay_lr";
  int64_t warmup = std::max<int64_t>(2, schedule.warmup_num_steps);
  if (steps < 1)
    throw std::runtime_error(
        std::string("the learning-rate schedule ") + kind +
        " has total_num_steps \"auto\", the run's length, but the run "
        "has none (--steps 0); pass --steps N");
  if (schedule.kind == ZRT_LR_WARMUP_COSINE && steps <= warmup)
    throw std::runtime_error(
        "the learning-rate schedule warmup_cosine_lr has total_num_steps "
        "\"auto\", the run's length --steps " +
        std::to_string(steps) +
        ", which must exceed warmup_num_steps (at least 2), " +
        std::to_string(schedule.warmup_num_steps) +
        ": pass a longer --steps or give total_num_steps");
  schedule.total_num_steps = steps;
}
