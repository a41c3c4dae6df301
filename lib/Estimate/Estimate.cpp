//===- Estimate.cpp - Model-state memory of a hypothetical model ----------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//
//
// computeEstimate: DeepSpeed's figures, the paper's and ours, the offloaded
// plans, the per-link traffic and the fit verdict.
//
//===----------------------------------------------------------------------===//

#include "EstimateDetail.h"

#include "zero/Dialect/Zero/Analysis/MemoryPlan.h"
#include "zero/Dialect/Zero/IR/Optimizers.h"
#include "zero_rt/optimizers.h"

#include <algorithm>

using namespace llvm;
using namespace zero::estimate;
using namespace zero::estimate::detail;

int64_t zero::estimate::detail::stateBytes(
    ArrayRef<mlir::zero::OptimizerState> states) {
  int64_t bytes = 0;
  for (const mlir::zero::OptimizerState &state : states)
    bytes += state.bytes;
  return bytes;
}

/// The fp32 absmaxes a block-quantized state adds to its elements over
/// `shardName` (zrt_adam8bit's one per block; the compiler's plan counts
/// them per partition shard, exactly): " + 4 x ceil(S'/n / 2048)", or
/// nothing.
static std::string absmaxFormula(const Estimate &e, StringRef shardName) {
  if (e.absmaxBlock <= 0)
    return "";
  return (" + 4 x ceil(" + shardName + " / " + Twine(e.absmaxBlock) + ")")
      .str();
}

/// Whether `key` is one of the optimizer's state lines.
static bool isStateKey(const Estimate &e, StringRef key) {
  return llvm::any_of(e.optimizerStates,
                      [&](const mlir::zero::OptimizerState &state) {
                        return state.reportKey == key;
                      });
}

std::pair<int64_t, int64_t>
zero::estimate::detail::modelStateSplit(int64_t stage, int64_t c,
                                        int64_t optimizer) {
  switch (stage) {
  case 0:
    return {2 * c + optimizer, 0};
  case 1:
    return {2 * c, optimizer};
  case 2:
    return {c, c + optimizer};
  default:
    return {0, 2 * c + optimizer};
  }
}

int64_t zero::estimate::detail::modelStateBytes(int64_t stage, int64_t s,
                                                int64_t sharded, int64_t n,
                                                int64_t c,
                                                int64_t optimizerBytes) {
  auto [full, shard] = modelStateSplit(stage, c, optimizerBytes);
  return full * s + shard * sharded / n;
}

/// The ZeRO paper's formula with only the trainable parameters carrying
/// gradients and optimizer states (DeepSpeedEstimators.h).
static Line paperWithFrozen(int64_t stage, int64_t trainable, int64_t frozen,
                            int64_t n) {
  FrozenModelStates states = modelStatesWithFrozen(stage, trainable, frozen, n);
  return {"paper_frozen", "ZeRO paper, frozen apart", states.formula,
          states.bytes};
}

/// The per-link traffic of plain ZeRO at `stage` (Estimate::traffic): the
/// model states' collectives over `elements` (S' or S) in even parts, as the
/// report counts them with zrt_collective_link_bytes for rank 0; on one
/// node every byte within it. False when a count overflows int64.
static bool computeTraffic(Estimate &e, int64_t stage, int64_t elements,
                           int64_t ranksPerNode, int64_t nodes) {
  // Rank 0's parts with even parts of `elements`: its own, and those of the
  // members of its local index (ranks 0, K, 2K, ...), the larger parts
  // going to the first `elements % n` ranks.
  int64_t q = elements / e.n, r = elements % e.n;
  int64_t own = q + (r > 0 ? 1 : 0);
  int64_t cross = nodes * q + (r + ranksPerNode - 1) / ranksPerNode;
  std::string sym = stage == 0 ? "S" : "S'";
  struct Kind {
    const char *name;
    int64_t count, passes;
  };
  SmallVector<Kind> kinds;
  if (stage == 0)
    kinds.push_back({"all_reduce", 1, 2});
  else
    kinds.push_back({"reduce_scatter", 1, 1});
  if (stage == 1 || stage == 2)
    kinds.push_back({"all_gather", 1, 1});
  if (stage == 3)
    kinds.push_back({"all_gather", 2, 1});
  for (const Kind &k : kinds) {
    int64_t coefficient = k.count * k.passes * e.c;
    LinkTraffic t;
    t.kind = k.name;
    t.count = k.count;
    t.intraFormula = std::to_string(coefficient) + sym + "(K-1)/K";
    t.interFormula = std::to_string(coefficient) + sym + "(N-1)/n";
    if (__builtin_mul_overflow(coefficient, elements - cross, &t.intraBytes) ||
        __builtin_mul_overflow(coefficient, cross - own, &t.interBytes) ||
        __builtin_add_overflow(e.trafficIntraBytes, t.intraBytes,
                               &e.trafficIntraBytes) ||
        __builtin_add_overflow(e.trafficInterBytes, t.interBytes,
                               &e.trafficInterBytes))
      return false;
    e.traffic.push_back(std::move(t));
  }
  return true;
}

/// DeepSpeed's figures at stages 2-3, exactly as the
/// Python computes them, and its *_all_cold table; none
/// at stages 0-1.
static Error addDeepSpeed(Estimate &e) {
  const EstimateOptions &options = e.options;
  const int64_t stage = options.stage, gpusPerNode = options.gpusPerNode,
                nodes = options.nodes, s = e.s;
  const DeepSpeedOptions &dsOptions = options.deepspeed;
  switch (stage) {
  case 0:
    e.deepspeed = {"deepspeed", "DeepSpeed estimator", "none for stage 0",
                   std::nullopt};
    return Error::success();
  case 1:
    e.deepspeed = {"deepspeed", "DeepSpeed estimator",
                   "none for stage 1 (issue #5102)", std::nullopt};
    return Error::success();
  default:
    break;
  }
  Expected<DeepSpeedEstimate> ds =
      estimateDeepSpeed(stage, s, e.l, gpusPerNode, nodes, dsOptions);
  DeepSpeedOptions noOffload = dsOptions;
  noOffload.cpuOffload = noOffload.cpuOffloadParams = false;
  Expected<DeepSpeedEstimate> dsNoOffload =
      estimateDeepSpeed(stage, s, e.l, gpusPerNode, nodes, noOffload);
  auto rows = deepspeedTableRows(stage, s, e.l, gpusPerNode, nodes,
                                 dsOptions.additionalBufferFactor);
  // The table has every branch, so where the chosen one
  // fails the table has already said which.
  if (!rows) {
    consumeError(ds.takeError());
    consumeError(dsNoOffload.takeError());
    return rows.takeError();
  }
  if (!ds)
    return ds.takeError();
  if (!dsNoOffload)
    return dsNoOffload.takeError();
  std::string name = "DeepSpeed estimate_zero" + std::to_string(stage);
  e.deepspeed = {"deepspeed", name, ds->gpuFormula, ds->gpuBytes};
  e.deepspeedCpu = {"deepspeed_cpu", name, ds->cpuFormula, ds->cpuBytes};
  e.deepspeedLargestLayerMemory = ds->largestLayerMemory;
  e.deepspeedNoOffloadBytes = dsNoOffload->gpuBytes;
  if (stage == 2 && !dsOptions.cpuOffload)
    e.deepspeedDocs = {"deepspeed_docs", "DeepSpeed memory.rst (older)",
                       "4S + int(16S/n)", olderZero2GpuBytes(s, e.n)};
  e.deepspeedTableHeader =
      deepspeedTableHeader(stage, s, e.l, gpusPerNode, nodes);
  e.deepspeedTable = std::move(*rows);
  return Error::success();
}

/// The terms of the formulas, from the estimate's
/// inputs.
static Terms getTerms(const Estimate &e) {
  Terms t;
  t.stage = e.options.stage;
  t.s = e.s;
  t.n = e.n;
  t.c = e.c;
  t.stateBytes = stateBytes(e.optimizerStates);
  // No fp32 copy where the parameters are the masters: at fp32, and bf16
  // parameters with bf16_master_weights_and_grads.
  t.masterBytes = t.c == 4 || e.bf16Masters ? 0 : 4;
  t.sp = e.sPadded;
  // Stage 0 shards nothing, so it pads nothing.
  t.pad = e.n * e.options.alignment;
  t.cs = std::to_string(t.c);
  t.shard = t.stage == 0 ? t.s : t.sp / t.n;
  t.shardName = t.stage == 0 ? "S" : "S'/n";
  // Only the St trainable parameters have gradients,
  // masters and moments; their runs are padded as one
  // (the compiler pads each run: its report has the
  // exact bytes). Without frozen parameters St = S.
  t.frozen = e.model ? e.model->frozenParams : 0;
  t.st = t.s - t.frozen;
  t.tshard = t.stage == 0 ? t.st : roundUp(t.st, t.pad) / t.n;
  t.tName = t.frozen == 0 ? "S" : "St";
  t.tshardName = t.frozen == 0 ? t.shardName : t.stage == 0 ? "St" : "St'/n";
  if (e.absmaxBlock > 0)
    t.absmaxBytes = 4 * ((t.tshard + e.absmaxBlock - 1) / e.absmaxBlock);
  return t;
}

/// The paper's line, and with frozen parameters the
/// paper's with them apart.
static void addPaper(Estimate &e, const Terms &t) {
  // 2 + 2 + K bytes per parameter, K the fp32 masters and the optimizer's
  // states (12 for Adam).
  const int64_t k = 4 + t.stateBytes;
  const int64_t paperBytes[][2] = {{4 + k, 0}, {4, k}, {2, 2 + k}, {0, 4 + k}};
  auto [full, shard] = paperBytes[t.stage];
  std::string formula;
  if (full)
    formula = std::to_string(full) + "S";
  if (shard)
    formula += (full ? " + " : "") + std::to_string(shard) + "S/n";
  e.paper = {"paper", "ZeRO paper (16-bit)", formula,
             full * t.s + shard * t.s / t.n};
  if (t.frozen > 0)
    e.paperFrozen = paperWithFrozen(t.stage, t.st, t.frozen, t.n);
}

/// Ours: the five persistent buffers of zero-partition
/// per rank, their sum, and the buffers DeepSpeed's
/// estimator ignores and we plan.
static void addOurs(Estimate &e, Terms &t) {
  const int64_t stage = t.stage, s = t.s, sp = t.sp, n = t.n, c = t.c,
                frozen = t.frozen, st = t.st, shard = t.shard,
                tshard = t.tshard, pad = t.pad;
  const std::string &cs = t.cs, &shardName = t.shardName, &tName = t.tName,
                    &tshardName = t.tshardName;
  e.ours.push_back({"params", "ours: params",
                    cs + (stage == 3 ? shardName : "S"),
                    c * (stage == 3 ? shard : s)});
  e.ours.push_back({"grads", "ours: grads",
                    cs + (stage >= 2 ? tshardName : tName),
                    c * (stage >= 2 ? tshard : st)});
  // At fp32 the parameters are the masters: no separate
  // copy.
  int64_t mst = t.masterBytes;
  e.ours.push_back({"master_params", "ours: master_params",
                    mst      ? "4" + tshardName
                    : c == 4 ? "0 (fp32 params are the masters)"
                             : "0 (bf16 params are the masters)",
                    mst * tshard});
  ArrayRef<mlir::zero::OptimizerState> states = e.optimizerStates;
  // A factored state (Adafactor's) is the plan's where the model's plan
  // was formed: the statistics of the tensors a rank's shard touches.
  // Otherwise the table's bytes per parameter bound it.
  int64_t factoredDelta = 0, partDelta = 0;
  auto planPart = [&](mlir::zero::BufferKind buffer) -> std::optional<int64_t> {
    if (!e.model)
      return std::nullopt;
    auto it = e.model->planPartStateBytes.find(static_cast<unsigned>(buffer));
    if (it == e.model->planPartStateBytes.end())
      return std::nullopt;
    return it->second;
  };
  for (const mlir::zero::OptimizerState &state : states) {
    bool factored = zrt::optimizers::isFactored(
        static_cast<zrt::optimizers::Kind>(e.optimizer),
        static_cast<zrt::BufferKind>(state.buffer));
    int64_t bytes = state.bytes * tshard + t.absmaxBytes;
    std::string formula =
        std::to_string(state.bytes) + tshardName + absmaxFormula(e, tshardName);
    if (factored && e.model && e.model->planFactoredStateBytes) {
      factoredDelta = *e.model->planFactoredStateBytes - bytes;
      bytes = *e.model->planFactoredStateBytes;
      formula = "factored (this model's plan: each matrix's row and column "
                "statistics, each vector's elements)";
    } else if (factored) {
      formula += " (a bound: the factored statistics are fewer)";
    } else if (std::optional<int64_t> part = planPart(state.buffer)) {
      // A state kept by part (Muon's): the plan's packed buffer.
      partDelta += *part - bytes;
      bytes = *part;
      formula = std::to_string(state.bytes) +
                (zrt::optimizers::statePart(
                     static_cast<zrt::optimizers::Kind>(e.optimizer),
                     static_cast<zrt::BufferKind>(state.buffer)) ==
                         zrt::optimizers::StatePart::Matrices
                     ? " x its matrices' elements a rank owns (the plan's)"
                     : " x the other elements a rank owns (the plan's)");
    }
    e.ours.push_back({state.reportKey.str(), "ours: " + state.reportKey.str(),
                      formula, bytes});
  }
  std::string statesFormula;
  if (frozen == 0) {
    e.ourStates = modelStateBytes(stage, s, sp, n, c, t.optimizerBytes());
    auto [fullBytes, shardBytes] =
        modelStateSplit(stage, c, t.optimizerBytes());
    if (fullBytes)
      statesFormula = std::to_string(fullBytes) + "S";
    if (shardBytes)
      statesFormula +=
          (fullBytes ? " + " : "") + std::to_string(shardBytes) + "S'/n";
    if (t.absmaxBytes) {
      e.ourStates += int64_t(states.size()) * t.absmaxBytes;
      statesFormula += " + " + std::to_string(states.size()) + " x" +
                       absmaxFormula(e, tshardName).substr(2);
    }
    if (factoredDelta) {
      e.ourStates += factoredDelta;
      statesFormula += ", the factored state the plan's";
    }
    if (partDelta) {
      e.ourStates += partDelta;
      statesFormula += ", the states by part the plan's";
    }
  } else {
    e.ourStates = 0;
    size_t lines = 3 + states.size();
    for (size_t i = 0; i < lines; ++i)
      e.ourStates += *e.ours[e.ours.size() - lines + i].bytes;
    statesFormula = "params + grads + master_params";
    for (const mlir::zero::OptimizerState &state : states)
      statesFormula += " + " + state.reportKey.str();
  }
  e.ours.push_back(
      {"model_states", "ours: model states", statesFormula, e.ourStates});

  // What DeepSpeed's estimator ignores and we plan.
  const bool overlapComm = e.options.overlapComm;
  const int64_t prefetchBucketSize = e.options.prefetchBucketSize;
  t.buffers = overlapComm ? 2 : 1;
  int64_t bucket = std::min<int64_t>(e.options.reduceBucketSize,
                                     frozen == 0 ? sp : roundUp(st, pad));
  t.bucketBytes = stage >= 2 ? t.buffers * bucket * c : 0;
  e.ours.push_back(
      {"reduce_buckets", "ours: reduce buckets",
       stage >= 2 ? std::string("at most ") + (overlapComm ? "2 x " : "") +
                        "min(reduce_bucket_size, " +
                        (frozen == 0 ? "S'" : "St'") + ") x " + cs + " B"
                  : "0 (in place in grads)",
       t.bucketBytes});
  t.gatherBytes = stage == 3 ? c * (e.lPadded + prefetchBucketSize) : 0;
  e.ours.push_back(
      {"gather_buffers", "ours: gather buffers",
       stage == 3
           ? cs + "L'" + (prefetchBucketSize ? " + " + cs + " x prefetch" : "")
           : "0 (in place in params)",
       t.gatherBytes});
  e.ourTotal = e.ourStates + t.bucketBytes + t.gatherBytes;
  e.ours.push_back(
      {"total", "ours: total", "model states + buffers", e.ourTotal});
}

/// Ours with the optimizer offloaded (stages 2-3), and
/// with the parameters offloaded too (stage 3).
static void addOffload(Estimate &e, Terms &t) {
  const int64_t stage = t.stage, s = t.s, n = t.n, c = t.c, frozen = t.frozen,
                shard = t.shard, tshard = t.tshard;
  const int64_t prefetchBucketSize = e.options.prefetchBucketSize;
  // With the optimizer offloaded (stages 2-3, as
  // DeepSpeed's estimators): the params and grads stay
  // on the device; the fp32 masters (fp32 parameters
  // are no longer their own), Adam's m and v and the
  // copies of the owned gradient and (16-bit) parameter
  // shard live in the pinned host arena, each buffer at
  // a 64-byte boundary and the arena rounded up to 64
  // as zero-plan-memory places them (MemoryPlan.cpp).
  if (stage >= 2) {
    e.offloadDeviceBytes = c * (stage == 3 ? shard : s) + c * tshard +
                           t.bucketBytes + t.gatherBytes;
    e.offloadDevice = Line{"device_total", "ours offloaded: device",
                           "params + grads + buffers", e.offloadDeviceBytes};
    auto align = [](int64_t x) {
      return roundUp(x, mlir::zero::kArenaAlignment);
    };
    int64_t at = 0;
    auto host = [&](StringRef key, StringRef what, int64_t bytesPerElement,
                    bool state = false) {
      std::string name = frozen == 0 ? "S'/n" : "St'/n";
      int64_t bytes = bytesPerElement * tshard + (state ? t.absmaxBytes : 0);
      e.offloadHost.push_back(
          {key.str(), "ours offloaded: host " + what.str(),
           std::to_string(bytesPerElement) + name +
               (state ? absmaxFormula(e, name) : std::string()),
           bytes});
      at = align(at) + bytes;
    };
    host("master_params", "master_params", 4);
    for (const mlir::zero::OptimizerState &state : e.optimizerStates)
      host(state.reportKey, state.reportKey, state.bytes, /*state=*/true);
    host("host_grads", "grads copy", c);
    if (c != 4)
      host("host_params", "params copy", c);
    e.offloadHostBytes = align(at);
    e.offloadHost.push_back({"host_total", "ours offloaded: host arena",
                             "each buffer at a 64-byte boundary",
                             e.offloadHostBytes});
  }
  // With the parameters offloaded as well (stage 3):
  // the owned parameter shard lives in the host arena,
  // and each gather reads a staged device copy of its
  // group's shard from the step arena
  // (zero-param-gather): the largest group's, L'/n
  // elements, and with a prefetch window the shards of
  // the groups gathered ahead, 1/n of the window's
  // gathered elements.
  if (stage == 3) {
    int64_t staged = c * (e.lPadded / n + roundUp(prefetchBucketSize, n) / n);
    e.offloadParamDeviceBytes =
        c * tshard + t.bucketBytes + t.gatherBytes + staged;
    e.offloadParamDevice =
        Line{"device_total", "ours params offloaded: device",
             "grads + buffers + " + t.cs + "L'/n" +
                 (prefetchBucketSize ? " + " + t.cs + " x prefetch/n" : "") +
                 " staged",
             e.offloadParamDeviceBytes};
  }
  // The plan the verdict and the comparison with
  // DeepSpeed's figure use: ours offloaded as
  // DeepSpeed's is, else ours.
  t.oursOffloaded = e.options.deepspeed.cpuOffload && e.offloadDevice;
  t.paramsOffloaded = t.oursOffloaded && e.options.deepspeed.cpuOffloadParams;
}

/// The time of the traffic across nodes at --hardware's
/// network, and the verdict for the device: our total,
/// whose biggest line is the largest item.
static Error addVerdict(Estimate &e, const Terms &t) {
  const EstimateOptions &options = e.options;
  const std::string &hardware = options.hardware,
                    &deviceMemory = options.deviceMemory;
  const int64_t nodes = options.nodes, gpusPerNode = options.gpusPerNode;
  const bool oursOffloaded = t.oursOffloaded,
             paramsOffloaded = t.paramsOffloaded;
  int64_t oursDevice = paramsOffloaded ? e.offloadParamDeviceBytes
                       : oursOffloaded ? e.offloadDeviceBytes
                                       : e.ourTotal;
  // With expert parallelism a rank keeps the ep model states, not the
  // whole model's; its buffers are the same.
  const ExpertParallelEstimate *ep =
      e.expertParallel ? &*e.expertParallel : nullptr;
  if (ep && oursOffloaded && (!hardware.empty() || !deviceMemory.empty()))
    return createStringError("the fit verdict with --ep-size and "
                             "offload_optimizer=cpu is not estimated (the "
                             "offloaded lines count every expert)");
  if (ep)
    oursDevice = ep->modelStateBytes + t.bucketBytes + t.gatherBytes;
  const mlir::zero::HardwarePreset *hw =
      hardware.empty() ? nullptr : mlir::zero::lookupHardwarePreset(hardware);
  if (hw && nodes > 1) {
    mlir::zero::HardwarePreset rates = *hw;
    std::string error;
    if (failed(mlir::zero::applyInterNodeBandwidth(
            rates, options.interNodeBandwidth, error)))
      return createStringError(Twine("--inter-node-bandwidth: ") + error);
    if (rates.interNodeLinks > 0) {
      e.trafficInterBandwidth =
          rates.getInterNodeBandwidth() / double(gpusPerNode);
      e.trafficInterSeconds =
          double(e.trafficInterBytes) / e.trafficInterBandwidth;
    }
  }
  int64_t device = hw ? hw->deviceMemoryBytes : 0;
  if (hw && device)
    e.deviceMemorySource = hw->name.str();
  if (!deviceMemory.empty()) {
    device = *mlir::zero::parseByteSize(deviceMemory);
    e.deviceMemorySource = "device-memory=" + deviceMemory;
  }
  if (device) {
    mlir::zero::FitVerdict fit;
    fit.deviceMemoryBytes = device;
    fit.freeBytes = device - oursDevice;
    fit.fits = fit.freeBytes >= 0;
    // Under ep the largest item is a line of the ep states or a buffer.
    SmallVector<Line> items;
    for (const Line &line : e.ours)
      if (!ep || line.key == "reduce_buckets" || line.key == "gather_buffers")
        items.push_back(line);
    if (ep)
      items.append(ep->lines.begin(), ep->lines.end());
    for (const Line &line : items)
      if (line.key != "model_states" && line.key != "ep_model_states" &&
          line.key != "total" && line.bytes &&
          // Offloaded, the optimizer states are not on
          // the device.
          !(oursOffloaded &&
            (line.key == "master_params" || isStateKey(e, line.key))) &&
          // Nor the parameter shard with the parameters
          // offloaded.
          !(paramsOffloaded && line.key == "params") &&
          *line.bytes > fit.largestItemBytes) {
        fit.largestItem = line.key;
        fit.largestItemBytes = *line.bytes;
      }
    e.fit = fit;
  }
  return Error::success();
}

Expected<Estimate>
zero::estimate::computeEstimate(int64_t sParams, int64_t lParams,
                                std::optional<ModelCounts> counts,
                                const EstimateOptions &options) {
  Estimate e;
  e.options = options;
  e.model = std::move(counts);
  e.s = sParams;
  e.l = lParams;
  e.n = options.gpusPerNode * options.nodes;
  e.c = options.dtype == "fp32" ? 4 : 2;
  e.optimizer = e.model ? e.model->optimizer : options.optimizer;
  e.optimizerStates = e.model ? e.model->optimizerStates
                              : mlir::zero::getOptimizerStates(e.optimizer);
  e.bf16Masters = e.model ? e.model->bf16Masters : options.bf16Masters;
  if (e.model) {
    e.statePrecision = e.model->statePrecision;
    e.absmaxBlock = e.model->absmaxBlock;
  }
  // The compiler refuses the pair (train_step's verifier): the host
  // optimizer keeps fp32 masters.
  if (e.bf16Masters && e.c == 2 && options.deepspeed.cpuOffload)
    return createStringError(
        "bf16 master weights (bf16_master_weights_and_grads) with "
        "--cpu-offload: the offloaded optimizer keeps fp32 masters, so the "
        "compiler refuses the pair");
  // Stage 0 shards nothing, so it pads nothing.
  int64_t pad = e.n * options.alignment;
  e.sPadded = options.stage == 0 ? e.s : roundUp(e.s, pad);
  e.lPadded = roundUp(e.l, pad);
  if (!computeTraffic(e, options.stage, e.sPadded, options.gpusPerNode,
                      options.nodes))
    return createStringError(Twine("the per-link traffic of S' = ") +
                             std::to_string(e.sPadded) + " overflows int64");
  if (Error error = addDeepSpeed(e))
    return std::move(error);
  Terms t = getTerms(e);
  addPaper(e, t);
  addOurs(e, t);
  addOffload(e, t);
  if (options.epSize != 1)
    if (Error error = addExpertParallel(e, t))
      return std::move(error);
  explainDifferences(e, t);
  if (Error error = addVerdict(e, t))
    return std::move(error);
  return e;
}
