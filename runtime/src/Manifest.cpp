//===- Manifest.cpp - Programs: manifest, layout and the shared zrt_ctx ---===//
//
// Part of the zero-mlir project.
//
// What every backend shares about a compiled program: the manifest, the
// per-rank layout arithmetic (rank r owns [r * shard, (r + 1) * shard) of a
// partition's layout clipped to numel, everything at stage 0), the
// deterministic initializer, and the context's token slots. The zrt_ctx_*
// collectives and optimizer calls are in Program.cpp.
//
//===----------------------------------------------------------------------===//

#include "Program.h"
#include "Support.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

using namespace zrt;
using nlohmann::json;

const char *const zrt::kBufferNames[kNumBufferKinds] = {
    "params",     "grads",      "master",     "exp_avg",
    "exp_avg_sq", "host_grads", "host_params"};

//===----------------------------------------------------------------------===//
// Manifest
//===----------------------------------------------------------------------===//

namespace {

[[noreturn]] void invalid(const std::string &msg) {
  throw std::runtime_error("invalid program manifest: " + msg);
}

int64_t dtypeBytes(const std::string &dtype) {
  if (dtype == "f32" || dtype == "i32")
    return 4;
  if (dtype == "i64")
    return 8;
  if (dtype == "bf16" || dtype == "f16")
    return 2;
  invalid("unknown dtype '" + dtype + "'");
}

/// The optimizer's "schedule" object: the #zero.lr_schedule attribute's
/// kind and parameters, by DeepSpeed's names.
zrt_lr_schedule parseSchedule(const json &j) {
  static const std::pair<const char *, zrt_lr_kind> kinds[] = {
      {"warmup_lr", ZRT_LR_WARMUP},
      {"warmup_decay_lr", ZRT_LR_WARMUP_DECAY},
      {"warmup_cosine_lr", ZRT_LR_WARMUP_COSINE},
      {"one_cycle", ZRT_LR_ONE_CYCLE},
      {"lr_range_test", ZRT_LR_RANGE_TEST}};
  zrt_lr_schedule s{};
  std::string kind = j.at("kind").get<std::string>();
  for (const auto &[name, k] : kinds)
    if (kind == name)
      s.kind = k;
  if (s.kind == ZRT_LR_CONSTANT)
    invalid("unknown learning-rate schedule '" + kind + "'");
  std::string warmupType = j.at("warmup_type").get<std::string>();
  if (warmupType != "log" && warmupType != "linear")
    invalid("unknown warmup_type '" + warmupType + "'");
  s.warmup_type = warmupType == "linear";
  s.warmup_min_lr = j.at("warmup_min_lr").get<double>();
  s.warmup_max_lr = j.at("warmup_max_lr").get<double>();
  s.warmup_num_steps = j.at("warmup_num_steps").get<int64_t>();
  s.total_num_steps = j.at("total_num_steps").get<int64_t>();
  s.warmup_min_ratio = j.at("warmup_min_ratio").get<double>();
  s.cos_min_ratio = j.at("cos_min_ratio").get<double>();
  s.cycle_min_lr = j.at("cycle_min_lr").get<double>();
  s.cycle_max_lr = j.at("cycle_max_lr").get<double>();
  s.decay_lr_rate = j.at("decay_lr_rate").get<double>();
  s.cycle_first_step_size = j.at("cycle_first_step_size").get<int64_t>();
  s.cycle_second_step_size = j.at("cycle_second_step_size").get<int64_t>();
  s.decay_step_size = j.at("decay_step_size").get<int64_t>();
  s.cycle_momentum = j.at("cycle_momentum").get<bool>();
  s.cycle_min_mom = j.at("cycle_min_mom").get<double>();
  s.cycle_max_mom = j.at("cycle_max_mom").get<double>();
  s.decay_mom_rate = j.at("decay_mom_rate").get<double>();
  s.lr_range_test_min_lr = j.at("lr_range_test_min_lr").get<double>();
  s.lr_range_test_step_size = j.at("lr_range_test_step_size").get<int64_t>();
  s.lr_range_test_step_rate = j.at("lr_range_test_step_rate").get<double>();
  s.lr_range_test_staircase = j.at("lr_range_test_staircase").get<bool>();
  if (s.warmup_num_steps < 0 || s.cycle_first_step_size < 1 ||
      s.lr_range_test_step_size < 1)
    invalid("learning-rate schedule step counts must be positive");
  return s;
}

} // namespace

int64_t InputInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

int64_t InputInfo::elementBytes() const { return dtypeBytes(dtype); }

Manifest Manifest::parse(const std::string &text) {
  Manifest m;
  try {
    json j = json::parse(text);
    m.version = j.at("version").get<int32_t>();
    if (m.version != ZRT_PROGRAM_VERSION)
      invalid("program version " + std::to_string(m.version) +
              ", this runtime implements version " +
              std::to_string(ZRT_PROGRAM_VERSION) +
              " (recompile with a matching zero-compile)");
    m.stage = j.at("stage").get<int32_t>();
    m.worldSize = j.at("world_size").get<int32_t>();
    m.accumulationSteps = j.at("accumulation_steps").get<int32_t>();
    m.globalBatch = j.value("global_batch", int64_t(0));
    m.computeDtypeName = j.at("compute_dtype").get<std::string>();
    if (m.computeDtypeName == "f32")
      m.computeDtype = ZRT_F32;
    else if (m.computeDtypeName == "bf16")
      m.computeDtype = ZRT_BF16;
    else if (m.computeDtypeName == "f16")
      m.computeDtype = ZRT_F16;
    else
      invalid("unknown compute dtype '" + m.computeDtypeName + "'");

    const json &prec = j.at("precision");
    m.precision = prec.at("kind").get<std::string>();
    m.initialScalePower = prec.at("initial_scale_power").get<int64_t>();
    m.lossScaleWindow = prec.at("loss_scale_window").get<int64_t>();
    m.hysteresis = prec.at("hysteresis").get<int64_t>();
    m.minLossScale = prec.at("min_loss_scale").get<double>();
    m.lossScale = prec.value("loss_scale", 0.0);
    if (!(m.lossScale >= 0) || !std::isfinite(m.lossScale))
      invalid("precision.loss_scale must be >= 0, got " +
              std::to_string(m.lossScale));

    const json &opt = j.at("optimizer");
    std::string kind = opt.at("kind").get<std::string>();
    if (kind != "adam" && kind != "adamw")
      invalid("unknown optimizer '" + kind + "'");
    m.adamw = kind == "adamw";
    m.lr = opt.at("lr").get<double>();
    m.beta1 = opt.at("beta1").get<double>();
    m.beta2 = opt.at("beta2").get<double>();
    m.eps = opt.at("eps").get<double>();
    m.weightDecay = opt.at("weight_decay").get<double>();
    m.biasCorrection = opt.value("bias_correction", true);
    if (opt.contains("schedule")) {
      m.schedule = parseSchedule(opt.at("schedule"));
      m.scheduleText = opt.at("schedule").dump();
    }
    m.gradientClipping = j.value("gradient_clipping", 0.0);
    if (j.contains("logging")) {
      const json &logging = j.at("logging");
      m.stepsPerPrint = logging.value("steps_per_print", int64_t(1));
      m.wallClockBreakdown = logging.value("wall_clock_breakdown", false);
      if (m.stepsPerPrint < 1)
        invalid("logging.steps_per_print must be >= 1, got " +
                std::to_string(m.stepsPerPrint));
    }
    m.tokenSlots = j.value("token_slots", int64_t(0));

    m.hashText = j.at("hash").get<std::string>();
    size_t used = 0;
    m.hash = std::stoull(m.hashText, &used, 16);
    if (used != m.hashText.size())
      invalid("malformed hash '" + m.hashText + "'");

    for (const json &in : j.at("inputs")) {
      InputInfo info;
      info.shape = in.at("shape").get<std::vector<int64_t>>();
      info.dtype = in.at("dtype").get<std::string>();
      info.offset = in.at("offset").get<int64_t>();
      info.indexBound = in.value("index_bound", int64_t(-1));
      dtypeBytes(info.dtype);
      if (in.contains("index_bound") &&
          (info.indexBound < 1 || (info.dtype != "i32" && info.dtype != "i64")))
        invalid("index_bound " + std::to_string(info.indexBound) + " on a " +
                info.dtype + " input");
      m.inputs.push_back(std::move(info));
    }
    for (const json &p : j.at("params")) {
      ParamInfo info;
      info.name = p.at("name").get<std::string>();
      info.shape = p.at("shape").get<std::vector<int64_t>>();
      info.numel = p.at("numel").get<int64_t>();
      std::string init = p.at("init").get<std::string>();
      if (init == "normal")
        info.init = InitKind::Normal;
      else if (init == "zeros")
        info.init = InitKind::Zeros;
      else if (init == "ones")
        info.init = InitKind::Ones;
      else
        invalid("parameter '" + info.name + "' has unknown initializer '" +
                init + "'");
      info.std = p.value("std", 0.0);
      info.partition = p.at("partition").get<int32_t>();
      info.offset = p.at("offset").get<int64_t>();
      info.weightDecay = p.value("weight_decay", -1.0);
      if (p.contains("rows")) {
        info.rows = p.at("rows").get<int64_t>();
        if (info.shape.empty() || info.rows < 1 || info.rows >= info.shape[0])
          invalid("parameter '" + info.name + "' has rows " +
                  std::to_string(info.rows) + " outside [1, its " +
                  std::to_string(info.shape.empty() ? 0 : info.shape[0]) +
                  " rows)");
      }
      m.params.push_back(std::move(info));
    }
    for (const json &p : j.at("partitions")) {
      PartitionInfo info;
      info.name = p.at("name").get<std::string>();
      info.numel = p.at("numel").get<int64_t>();
      info.paddedNumel = p.at("padded_numel").get<int64_t>();
      info.shardNumel = p.at("shard_numel").get<int64_t>();
      info.params = p.at("params").get<std::vector<std::string>>();
      // fp32 parameters are their own masters: no "master" entry.
      info.paramsAreMasters = !p.at("buffers").contains("master");
      for (int k = 0; k < kNumBufferKinds; ++k) {
        info.offsets[k] = -1;
        info.present[k] = p.at("buffers").contains(kBufferNames[k]);
        if (!info.present[k])
          continue;
        info.offsets[k] = p.at("buffers").at(kBufferNames[k]).get<int64_t>();
        info.counts[k] =
            p.at("buffer_numel").at(kBufferNames[k]).get<int64_t>();
      }
      auto place = [&](const char *key, const char *memory,
                       std::array<bool, kNumBufferKinds> &on) {
        for (const std::string &name :
             p.value(key, std::vector<std::string>{})) {
          int k = 0;
          while (k < kNumBufferKinds && name != kBufferNames[k])
            ++k;
          if (k == kNumBufferKinds || !info.present[k] || info.onHost[k])
            invalid("partition '" + info.name + "' has no buffer '" + name +
                    "' to place in " + memory);
          on[k] = true;
        }
      };
      place("host_buffers", "host memory", info.onHost);
      place("nvme_buffers", "the swap file", info.onNvme);
      m.partitions.push_back(std::move(info));
    }
    const json &plan = j.at("plan");
    m.persistentBytes = plan.at("persistent_bytes").get<int64_t>();
    m.arenaBytes = plan.at("arena_bytes").get<int64_t>();
    m.peakBytes = plan.at("peak_bytes").get<int64_t>();
    m.scratchBytes = plan.value("scratch_bytes", int64_t(0));
    m.hostBytes = plan.value("host_bytes", int64_t(0));
    m.nvmeBytes = plan.value("nvme_bytes", int64_t(0));
    m.swapOffset = plan.value("swap_offset", int64_t(0));
    m.swapBytes = plan.value("swap_bytes", int64_t(0));
    m.nvmePath = j.value("nvme_path", std::string());
    m.paramNvmeBytes = plan.value("param_nvme_bytes", int64_t(0));
    m.paramSwapOffset = plan.value("param_swap_offset", int64_t(0));
    m.paramSwapBytes = plan.value("param_swap_bytes", int64_t(0));
    m.paramNvmePath = j.value("param_nvme_path", std::string());
    if (j.contains("memory_timeline")) {
      const json &t = j.at("memory_timeline");
      m.plannedLiveBytes = t.at("live_bytes").get<std::vector<int64_t>>();
      m.plannedScratchBytes = t.at("scratch_bytes").get<std::vector<int64_t>>();
      m.backwardStart = t.at("backward_start").get<int64_t>();
    }
  } catch (const json::exception &e) {
    invalid(e.what());
  } catch (const std::logic_error &e) { // std::stoull
    invalid(std::string("malformed number: ") + e.what());
  }

  // The invariants the zrt_ctx_* calls rely on.
  if (m.stage < 0 || m.stage > 3)
    invalid("stage " + std::to_string(m.stage));
  if (m.worldSize < 1 || m.accumulationSteps < 1)
    invalid("world size and accumulation steps must be positive");
  if (m.precision != "fp32" && m.precision != "bf16" && m.precision != "fp16")
    invalid("unknown precision '" + m.precision + "'");
  if (m.persistentBytes < 0 || m.arenaBytes < 0)
    invalid("negative arena size");
  int64_t optimizerNvme = m.optimizerNvmeBytes();
  if (m.nvmeBytes < 0 || m.nvmeBytes % 4096 || m.swapOffset % 4096 ||
      m.swapBytes % 4096 || m.swapOffset < 0 || m.swapBytes < 0 ||
      m.swapOffset + m.swapBytes > m.hostBytes || optimizerNvme < 0 ||
      (optimizerNvme > 0) != (m.swapBytes > 0) ||
      (optimizerNvme > 0) == m.nvmePath.empty())
    invalid("inconsistent NVMe swap file or swap buffers");
  if (m.paramNvmeBytes < 0 || m.paramNvmeBytes % 4096 ||
      m.paramSwapOffset % 4096 || m.paramSwapBytes % 4096 ||
      m.paramSwapOffset < 0 || m.paramSwapBytes < 0 ||
      m.paramSwapOffset + m.paramSwapBytes > m.hostBytes ||
      (m.paramNvmeBytes > 0) != (m.paramSwapBytes > 0) ||
      (m.paramNvmeBytes > 0) == m.paramNvmePath.empty() ||
      (m.paramSwapBytes > 0 && m.swapBytes > 0 &&
       m.paramSwapOffset < m.swapOffset + m.swapBytes &&
       m.swapOffset < m.paramSwapOffset + m.paramSwapBytes))
    invalid("inconsistent parameter swap file or swap buffers");
  int64_t computeBytes = zrt_dtype_size(m.computeDtype);
  for (const PartitionInfo &p : m.partitions) {
    if (p.numel < 0 || p.paddedNumel < p.numel || p.shardNumel < 0 ||
        (m.stage > 0 && p.shardNumel * m.worldSize < p.numel))
      invalid("partition '" + p.name + "' has an inconsistent layout");
    // The Adam kernels keep fp32 masters: an fp32 compute copy is one when
    // it lives where Adam runs (both on the device, or both in host memory;
    // never with the states in the swap file).
    bool nvme = optimizerNvme > 0;
    if (p.paramsAreMasters !=
        (m.computeDtype == ZRT_F32 && !nvme && !p.onNvme[kParams] &&
         p.offloaded() == p.paramsOnHost()))
      invalid("partition '" + p.name + "' " +
              (p.paramsAreMasters ? "has no" : "has a") +
              " master buffer with compute dtype " + m.computeDtypeName +
              " (exactly f32 parameters are their own masters)");
    for (int k = 0; k < kNumBufferKinds; ++k) {
      if (!p.hasBuffer(BufferKind(k)))
        continue;
      int64_t bytes =
          p.counts[k] * bufferElementBytes(BufferKind(k), computeBytes);
      int64_t limit = p.onNvme[k]
                          ? (k == kParams ? m.paramNvmeBytes : optimizerNvme)
                      : p.onHost[k] ? m.hostBytes
                                    : m.persistentBytes;
      if (p.offsets[k] < 0 || p.counts[k] < 0 || p.offsets[k] + bytes > limit ||
          (p.onNvme[k] && p.offsets[k] % 4096))
        invalid("buffer " + std::string(kBufferNames[k]) + " of partition '" +
                p.name + "' lies outside the " +
                (p.onNvme[k]   ? "swap file (or off its 4096-byte blocks)"
                 : p.onHost[k] ? "host arena"
                               : "persistent arena"));
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
    need(kGrads, fullGrads);
    for (BufferKind k : {kMaster, kExpAvg, kExpAvgSq, kHostGrads, kHostParams})
      if (p.hasBuffer(k))
        need(k, fullMaster);
    // An offloaded optimizer: its masters, moments and gradient copy are on
    // the host, and 16-bit parameters come back through a host copy.
    // On NVMe, the states are in the swap file and every compute type
    // comes back through host_params. Offloaded parameter shards (stage 3)
    // are updated in place by a host Adam.
    auto stateOff = [&](int k) { return nvme ? p.onNvme[k] : p.onHost[k]; };
    if ((p.offloaded() &&
         ((!p.paramsAreMasters && !stateOff(kMaster)) || !stateOff(kExpAvg) ||
          !stateOff(kExpAvgSq) || !p.onHost[kHostGrads] || p.onHost[kGrads] ||
          ((nvme || m.computeDtype != ZRT_F32) && !p.paramsOnHost()) !=
              p.hasBuffer(kHostParams))) ||
        (!p.offloaded() && (p.onHost[kMaster] || p.onHost[kExpAvg] ||
                            p.onHost[kExpAvgSq] || p.onHost[kGrads])) ||
        (p.paramsOffloaded() && m.stage != 3))
      invalid("partition '" + p.name + "' has an inconsistent host placement");
    if (!p.offloaded() &&
        (p.onNvme[kMaster] || p.onNvme[kExpAvg] || p.onNvme[kExpAvgSq]))
      invalid("partition '" + p.name +
              "' has buffers on NVMe but keeps its "
              "optimizer on the device");
    if (m.stage == 3 && p.counts[kParams] != p.shardNumel)
      invalid("stage-3 params shard of '" + p.name + "' is not shard_numel");
  }
  for (const ParamInfo &p : m.params) {
    if (p.partition < 0 || p.partition >= int32_t(m.partitions.size()))
      invalid("parameter '" + p.name + "' is in no partition");
    const PartitionInfo &part = m.partitions[size_t(p.partition)];
    if (p.offset < 0 || p.numel < 0 || p.offset + p.numel > part.numel)
      invalid("parameter '" + p.name + "' lies outside partition '" +
              part.name + "'");
  }
  size_t ops = m.plannedLiveBytes.size();
  if (m.plannedScratchBytes.size() != ops)
    invalid("memory_timeline has " + std::to_string(ops) + " live_bytes but " +
            std::to_string(m.plannedScratchBytes.size()) + " scratch_bytes");
  for (size_t i = 0; i < ops; ++i)
    if (m.plannedLiveBytes[i] < 0 || m.plannedLiveBytes[i] > m.arenaBytes ||
        m.plannedScratchBytes[i] < 0 ||
        m.plannedScratchBytes[i] > m.scratchBytes)
      invalid("memory_timeline at op " + std::to_string(i) +
              " exceeds the plan's step arena or scratch");
  if (m.backwardStart < -1 || m.backwardStart > int64_t(ops))
    invalid("memory_timeline.backward_start " +
            std::to_string(m.backwardStart) + " is not an op index");
  for (const InputInfo &in : m.inputs)
    if (in.offset < 0 ||
        in.offset + in.numel() * in.elementBytes() > m.arenaBytes)
      invalid("an input lies outside the step arena");
  return m;
}

Range Manifest::owned(const PartitionInfo &p, int rank) const {
  if (stage == 0)
    return {0, p.numel};
  return {std::min(rank * p.shardNumel, p.numel),
          std::min((rank + 1) * p.shardNumel, p.numel)};
}

//===----------------------------------------------------------------------===//
// Deterministic initialization
//===----------------------------------------------------------------------===//

namespace {

uint64_t splitMix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

} // namespace

double zrt::counterNormal(uint64_t seed, uint64_t stream, uint64_t counter) {
  uint64_t key =
      splitMix(splitMix(seed) ^ splitMix(stream + 0x5851f42d4c957f2dull));
  uint64_t h1 = splitMix(key + (2 * counter) * 0x9e3779b97f4a7c15ull);
  uint64_t h2 = splitMix(key + (2 * counter + 1) * 0x9e3779b97f4a7c15ull);
  // u1 in (0, 1] keeps the log finite; 53 random bits each.
  double u1 = (double(h1 >> 11) + 1.0) * 0x1p-53;
  double u2 = double(h2 >> 11) * 0x1p-53;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

float zrt::initValue(const ParamInfo &p, uint64_t seed, uint64_t param,
                     uint64_t element) {
  switch (p.init) {
  case InitKind::Normal:
    return float(p.std * counterNormal(seed, param, element));
  case InitKind::Zeros:
    return 0.0f;
  case InitKind::Ones:
    return 1.0f;
  }
  return 0.0f;
}

//===----------------------------------------------------------------------===//
// zrt_ctx
//===----------------------------------------------------------------------===//

double zrt_ctx::nowUs() const {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now() - traceStart)
      .count();
}

zrt::WaitScope::WaitScope(WaitState *state, const char *what) {
  // Nested scopes (a driver wait around zrt_ctx_wait) keep the outer one.
  if (!state || state->what.load(std::memory_order_relaxed))
    return;
  this->state = state;
  state->sinceNs.store(std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::steady_clock::now().time_since_epoch())
                           .count(),
                       std::memory_order_relaxed);
  state->what.store(what, std::memory_order_release);
}

zrt::WaitScope::~WaitScope() {
  if (state)
    state->what.store(nullptr, std::memory_order_release);
}

int zrt_ctx::drainSlots() {
  int n = 0;
  for (size_t s = 0; s < slots.size(); ++s)
    if (slots[s].live) {
      zrt_ctx_wait(this, int32_t(s));
      ++n;
    }
  return n;
}

const PartitionInfo &zrt::partition(zrt_ctx *ctx, int32_t p, const char *call) {
  if (p < 0 || p >= int32_t(ctx->manifest->partitions.size()))
    fatal("%s: partition %d does not exist", call, int(p));
  return ctx->manifest->partitions[size_t(p)];
}

/// Rank r's owned part of [begin, end).
Range zrt::ownedPart(zrt_ctx *ctx, const PartitionInfo &p, int rank, int64_t begin,
                int64_t end) {
  Range o = ctx->manifest->owned(p, rank);
  return {std::max(begin, o.begin), std::min(end, o.end)};
}

void zrt::checkRange(const PartitionInfo &p, int64_t begin, int64_t end,
                int64_t limit, const char *call) {
  if (begin < 0 || begin > end || end > limit)
    fatal("%s: range [%lld, %lld) outside partition '%s' (%lld elements)", call,
          (long long)begin, (long long)end, p.name.c_str(), (long long)limit);
}

int zrt::mpiInt(int64_t n, const char *call) {
  if (n > std::numeric_limits<int>::max())
    fatal("%s: %lld elements exceed MPI's int counts", call, (long long)n);
  return int(n);
}

/// Per-rank counts (and displacements from `begin`) of the owned parts of
/// [begin, end).
void zrt::splitByOwner(zrt_ctx *ctx, const PartitionInfo &p, int64_t begin,
                  int64_t end, std::vector<int> &counts,
                  std::vector<int> &displs, const char *call) {
  counts.assign(size_t(ctx->world), 0);
  displs.assign(size_t(ctx->world), 0);
  for (int r = 0; r < ctx->world; ++r) {
    Range part = ownedPart(ctx, p, r, begin, end);
    if (part.size() > 0) {
      counts[size_t(r)] = mpiInt(part.size(), call);
      displs[size_t(r)] = mpiInt(part.begin - begin, call);
    }
  }
}

/// Runs a collective's completion now (slot < 0) or at zrt_ctx_wait.
void zrt::launch(zrt_ctx *ctx, int32_t slot, const char *what,
            std::vector<int64_t> tokens, std::function<void()> done) {
  if (slot < 0) {
    // A synchronous collective: the whole call is exposed communication.
    double start = ctx->tracing ? ctx->nowUs() : 0.0;
    {
      WaitScope watched(ctx->waitState, what);
      for (int64_t t : tokens)
        zrt_wait(t);
    }
    // The span is the wait; the completion is compute.
    if (ctx->tracing)
      ctx->trace.push_back(
          {std::string("wait ") + what, start, ctx->nowUs() - start});
    if (done)
      done();
    return;
  }
  if (size_t(slot) >= ctx->slots.size())
    ctx->slots.resize(size_t(slot) + 1);
  zrt_ctx::Pending &pending = ctx->slots[size_t(slot)];
  if (pending.live)
    fatal("%s: token slot %d is still outstanding (%s)", what, int(slot),
          pending.what);
  pending.live = true;
  ++ctx->liveSlots;
  pending.what = what;
  pending.tokens = std::move(tokens);
  pending.done = std::move(done);
}

char *zrt::ownedParams(const zrt_ctx &ctx, int32_t p) {
  const Manifest &m = *ctx.manifest;
  char *params = ctx.buffer(p, kParams);
  if (m.stage <= 2)
    params +=
        m.owned(m.partitions[size_t(p)], ctx.rank).begin * ctx.computeBytes;
  return params;
}

float *zrt::ownedMasters(const zrt_ctx &ctx, int32_t p) {
  if (ctx.manifest->partitions[size_t(p)].paramsAreMasters)
    return reinterpret_cast<float *>(ownedParams(ctx, p));
  return ctx.buffer<float>(p, kMaster);
}

std::pair<char *, int64_t> zrt::ownedGrads(zrt_ctx *ctx, int32_t p,
                                      const PartitionInfo &part) {
  Range o = ctx->manifest->owned(part, ctx->rank);
  char *g = ctx->buffer(p, kGrads);
  if (ctx->manifest->stage <= 1)
    g += o.begin * ctx->computeBytes;
  return {g, o.size()};
}

extern "C" void *zrt_ctx_step(zrt_ctx *ctx, int64_t offset) {
  // Generated code asks for its operands between kernels: the moment to let
  // MPI advance asynchronous collectives, which Open MPI does only inside
  // MPI calls.
  if (ctx->liveSlots > 0)
    zrt_progress();
  if (offset < 0 || offset > ctx->manifest->arenaBytes)
    fatal("zrt_ctx_step: offset %lld outside the step arena of %lld bytes",
          (long long)offset, (long long)ctx->manifest->arenaBytes);
  return ctx->step + offset;
}
extern "C" void *zrt_ctx_persistent(zrt_ctx *ctx, int64_t offset) {
  if (offset < 0 || offset > ctx->manifest->persistentBytes)
    fatal("zrt_ctx_persistent: offset %lld outside the persistent arena of "
          "%lld bytes",
          (long long)offset, (long long)ctx->manifest->persistentBytes);
  return ctx->persistent + offset;
}
extern "C" void zrt_ctx_wait(zrt_ctx *ctx, int32_t slot) {
  if (slot < 0)
    return;
  if (size_t(slot) >= ctx->slots.size() || !ctx->slots[size_t(slot)].live)
    fatal("zrt_ctx_wait: token slot %d has no outstanding collective",
          int(slot));
  zrt_ctx::Pending &pending = ctx->slots[size_t(slot)];
  double start = ctx->tracing ? ctx->nowUs() : 0.0;
  {
    WaitScope watched(ctx->waitState, pending.what);
    for (int64_t t : pending.tokens)
      zrt_wait(t);
  }
  // The span is the wait; the completion is compute.
  if (ctx->tracing)
    ctx->trace.push_back(
        {std::string("wait ") + pending.what, start, ctx->nowUs() - start});
  if (pending.done)
    pending.done();
  pending = zrt_ctx::Pending();
  --ctx->liveSlots;
}

int32_t zrt::updateLossScale(zrt_ctx *ctx, const float *stats) {
  ctx->stats[0] = stats[0];
  ctx->stats[1] = stats[1];
  float seen[2] = {stats[0], stats[1]};
  if (ctx->injectOverflowFirst > 0 &&
      ctx->stepIndex >= ctx->injectOverflowFirst &&
      ctx->stepIndex <= ctx->injectOverflowLast)
    seen[0] = std::numeric_limits<float>::infinity();
  ctx->overflow = seen[0] != 0.0f;
  // DeepSpeed's DynamicLossScaler.update_scale raises here ("Current loss
  // scale already at minimum"); zrt_loss_scaler_update clamps, and the
  // driver decides (--on-min-loss-scale).
  const zrt_loss_scaler &s = ctx->scaler;
  ctx->overflowAtMinScale = ctx->overflow && s.dynamic &&
                            (s.delayed_shift == 1 || s.cur_hysteresis == 1) &&
                            s.cur_scale == s.min_scale;
  int32_t skip = zrt_update_loss_scale(&ctx->scaler, seen);
  ctx->skipped = skip != 0;
  if (!skip)
    ++ctx->adamSteps;
  return skip;
}
