//===- Print.cpp - zero-tune's results in words, tables and JSON ----------===//
//
// Part of the zero-mlir project.
//
// What zero-tune prints of a search: the configurations in words, the
// ranked table, the JSON candidates, the notes on the validation band and
// the expert-parallel sizes, and why nothing fits. A column or field of an
// axis is shown only when the search searched it, so that a search without
// it prints as before the axis existed.
//
//===----------------------------------------------------------------------===//

#include "zero/Tuning/Print.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

using namespace llvm;
using namespace mlir::zero;

/// `bytes` exactly and in a readable unit.
std::string mlir::zero::formatTuneBytes(int64_t bytes) {
  return formatv("{0} bytes ({1})", bytes, formatByteSize(bytes)).str();
}

namespace {

/// The offload choice in words (empty when nothing is offloaded).
std::string describeOffload(const TuneConfig &c) {
  if (!c.isOffloaded())
    return "";
  return formatv("offload_optimizer {0}, offload_param {1}",
                 stringifyOffloadDevice(c.offloadOptimizer),
                 stringifyOffloadDevice(c.offloadParam))
      .str();
}

/// The ZeRO++ and MiCS choice in short ("-" for none), for the table.
std::string zeroppText(const TuneConfig &c) {
  SmallVector<std::string> parts;
  if (c.hpzPartitionSize > 1)
    parts.push_back("hpz" + std::to_string(c.hpzPartitionSize));
  if (c.micsShardSize > 0)
    parts.push_back("mics" + std::to_string(c.micsShardSize));
  if (c.quantizedWeights)
    parts.push_back("qwz");
  if (c.quantizedGradients)
    parts.push_back("qgz");
  return parts.empty() ? "-" : join(parts, "+");
}

/// A number, a knob a stage does not use ("-"), or a fixed-point value.
std::string num(int64_t v) { return std::to_string(v); }
std::string knob(bool used, int64_t v) { return used ? num(v) : "-"; }
std::string fixed(double v, int digits) {
  std::string s;
  raw_string_ostream(s) << format("%.*f", digits, v);
  return s;
}
bool gathers(const TuneConfig &k) { return k.stage == 1 || k.stage == 2; }
bool isStage3(const TuneConfig &k) { return k.stage == 3; }
/// The frozen gather policy of a stage-3 configuration.
const char *frozenGatherText(const TuneConfig &k) {
  return !isStage3(k) ? "-" : k.frozenGatherOnce ? "once" : "per-use";
}

/// One column of the table, right-aligned to `width`: shown in every table
/// (`shown` null) or only where the search searched its axis.
struct Column {
  const char *header;
  int width;
  bool (*shown)(const TuneResult &, const TuneOptions &);
  std::string (*cell)(const TuneCandidate &);
};

bool chunkShown(const TuneResult &r, const TuneOptions &) {
  return r.lossChunkSearched;
}
bool epShown(const TuneResult &r, const TuneOptions &) {
  return !r.epSizes.empty();
}
bool longContextShown(const TuneResult &r, const TuneOptions &) {
  return r.longContextSearched;
}
bool frozenShown(const TuneResult &r, const TuneOptions &) {
  return r.frozenGatherSearched;
}
bool offloadShown(const TuneResult &, const TuneOptions &o) {
  return o.offload != OffloadDevice::none;
}
bool zeroppShown(const TuneResult &, const TuneOptions &o) { return o.zeropp; }

/// The table's columns after the rank, in order.
const Column kColumns[] = {
    {"stage", 5, nullptr,
     [](const TuneCandidate &c) { return num(c.config.stage); }},
    {"accum", 5, nullptr,
     [](const TuneCandidate &c) { return num(c.config.accumulationSteps); }},
    {"micro", 5, nullptr,
     [](const TuneCandidate &c) { return num(c.microBatch); }},
    {"remat", 9, nullptr,
     [](const TuneCandidate &c) {
       return getTuneRematName(c.config.remat).str();
     }},
    {"reduce_bkt", 12, nullptr,
     [](const TuneCandidate &c) { return num(c.config.reduceBucketSize); }},
    {"overlap", 7, nullptr,
     [](const TuneCandidate &c) {
       return std::string(c.config.overlapComm ? "yes" : "no");
     }},
    {"allgather", 12, nullptr,
     [](const TuneCandidate &c) {
       return knob(gathers(c.config), c.config.allgatherBucketSize);
     }},
    {"prefetch", 12, nullptr,
     [](const TuneCandidate &c) {
       return knob(isStage3(c.config), c.config.prefetchBucketSize);
     }},
    {"max_live", 12, nullptr,
     [](const TuneCandidate &c) {
       return knob(isStage3(c.config), c.config.maxLiveParameters);
     }},
    {"persistence", 11, nullptr,
     [](const TuneCandidate &c) {
       return knob(isStage3(c.config), c.config.paramPersistenceThreshold);
     }},
    {"peak_bytes", 16, nullptr,
     [](const TuneCandidate &c) { return num(c.peakBytes); }},
    {"peak", 10, nullptr,
     [](const TuneCandidate &c) { return formatByteSize(c.peakBytes); }},
    {"step_ms", 11, nullptr,
     [](const TuneCandidate &c) { return fixed(c.predictedStepMs, 3); }},
    {"tokens/s", 12, nullptr,
     [](const TuneCandidate &c) { return fixed(c.tokensPerSecond, 0); }},
    {"exposed_ms", 11, nullptr,
     [](const TuneCandidate &c) { return fixed(c.exposedCommMs, 3); }},
    {"loss_chunk", 10, chunkShown,
     [](const TuneCandidate &c) {
       return knob(c.config.lossChunk > 0, c.config.lossChunk);
     }},
    {"ep_size", 7, epShown,
     [](const TuneCandidate &c) { return num(c.config.epSize); }},
    {"sp_size", 7, longContextShown,
     [](const TuneCandidate &c) { return num(c.config.spSize); }},
    {"tiled_mlp", 9, longContextShown,
     [](const TuneCandidate &c) {
       return knob(c.config.tiledMlp > 0, c.config.tiledMlp);
     }},
    {"offload_act", 11, longContextShown,
     [](const TuneCandidate &c) {
       return std::string(c.config.offloadActivations ? "cpu" : "none");
     }},
    {"frozen_gather", 13, frozenShown,
     [](const TuneCandidate &c) {
       return std::string(frozenGatherText(c.config));
     }},
    {"opt_off", 9, offloadShown,
     [](const TuneCandidate &c) {
       return stringifyOffloadDevice(c.config.offloadOptimizer).str();
     }},
    {"param_off", 9, offloadShown,
     [](const TuneCandidate &c) {
       return stringifyOffloadDevice(c.config.offloadParam).str();
     }},
    {"host_peak_bytes", 16, offloadShown,
     [](const TuneCandidate &c) { return num(c.hostPeakBytes); }},
    {"nvme_bytes", 16, offloadShown,
     [](const TuneCandidate &c) { return num(c.nvmeBytes); }},
    {"transfer_ms", 11, offloadShown,
     [](const TuneCandidate &c) { return fixed(c.exposedTransferMs, 3); }},
    {"zeropp", 14, zeroppShown,
     [](const TuneCandidate &c) { return zeroppText(c.config); }},
    {"inter_node_bytes", 16, zeroppShown,
     [](const TuneCandidate &c) { return num(c.interNodeBytes); }},
};

/// One row per ranked group, in the columns the search shows.
void printTable(const TuneResult &r, const TuneOptions &options,
                raw_ostream &os) {
  SmallVector<const Column *> columns;
  for (const Column &column : kColumns)
    if (!column.shown || column.shown(r, options))
      columns.push_back(&column);
  os << right_justify("rank", 4);
  for (const Column *column : columns)
    os << ' ' << right_justify(column->header, column->width);
  os << "\n";
  int64_t rank = 0;
  for (const TuneCandidate &c : r.ranked) {
    os << right_justify(num(++rank), 4);
    for (const Column *column : columns)
      os << ' ' << right_justify(column->cell(c), column->width);
    os << "\n";
  }
}

/// One field of a JSON candidate: in every candidate (`shown` null) or only
/// where the search searched its axis.
struct Field {
  const char *key;
  bool (*shown)(const TuneResult &, const TuneOptions &);
  json::Value (*value)(const TuneCandidate &);
};

bool hostShown(const TuneResult &r, const TuneOptions &o) {
  // Activation offload uses the host too.
  return offloadShown(r, o) || longContextShown(r, o);
}
bool statesShown(const TuneResult &, const TuneOptions &o) {
  return o.optimizerStates.has_value();
}

/// The fields of a JSON candidate besides its rank and ds_config (the
/// printer sorts the keys).
const Field kFields[] = {
    {"stage", nullptr,
     [](const TuneCandidate &c) -> json::Value { return c.config.stage; }},
    {"gradient_accumulation_steps", nullptr,
     [](const TuneCandidate &c) -> json::Value {
       return c.config.accumulationSteps;
     }},
    {"micro_batch_per_rank", nullptr,
     [](const TuneCandidate &c) -> json::Value { return c.microBatch; }},
    {"peak_bytes", nullptr,
     [](const TuneCandidate &c) -> json::Value { return c.peakBytes; }},
    {"persistent_bytes", nullptr,
     [](const TuneCandidate &c) -> json::Value { return c.persistentBytes; }},
    {"predicted_step_ms", nullptr,
     [](const TuneCandidate &c) -> json::Value { return c.predictedStepMs; }},
    {"exposed_comm_ms", nullptr,
     [](const TuneCandidate &c) -> json::Value { return c.exposedCommMs; }},
    {"remat", nullptr,
     [](const TuneCandidate &c) -> json::Value {
       return getTuneRematName(c.config.remat);
     }},
    {"recompute_ms", nullptr,
     [](const TuneCandidate &c) -> json::Value { return c.recomputeMs; }},
    {"tokens_per_second", nullptr,
     [](const TuneCandidate &c) -> json::Value { return c.tokensPerSecond; }},
    {"largest_item", nullptr,
     [](const TuneCandidate &c) -> json::Value {
       return json::Object{{"name", c.fit.largestItem},
                           {"bytes", c.fit.largestItemBytes}};
     }},
    {"loss_chunk", chunkShown,
     [](const TuneCandidate &c) -> json::Value { return c.config.lossChunk; }},
    {"ep_size", epShown,
     [](const TuneCandidate &c) -> json::Value { return c.config.epSize; }},
    {"sp_size", longContextShown,
     [](const TuneCandidate &c) -> json::Value { return c.config.spSize; }},
    {"tiled_mlp", longContextShown,
     [](const TuneCandidate &c) -> json::Value { return c.config.tiledMlp; }},
    {"offload_activations", longContextShown,
     [](const TuneCandidate &c) -> json::Value {
       return c.config.offloadActivations ? "cpu" : "none";
     }},
    {"frozen_gather", frozenShown,
     [](const TuneCandidate &c) -> json::Value {
       return frozenGatherText(c.config);
     }},
    {"offload_optimizer", offloadShown,
     [](const TuneCandidate &c) -> json::Value {
       return stringifyOffloadDevice(c.config.offloadOptimizer);
     }},
    {"offload_param", offloadShown,
     [](const TuneCandidate &c) -> json::Value {
       return stringifyOffloadDevice(c.config.offloadParam);
     }},
    {"host_peak_bytes", hostShown,
     [](const TuneCandidate &c) -> json::Value { return c.hostPeakBytes; }},
    {"nvme_bytes", hostShown,
     [](const TuneCandidate &c) -> json::Value { return c.nvmeBytes; }},
    {"exposed_transfer_ms", hostShown,
     [](const TuneCandidate &c) -> json::Value { return c.exposedTransferMs; }},
    {"optimizer_states", statesShown,
     [](const TuneCandidate &c) -> json::Value {
       return c.config.optimizerStates
                  ? stringifyStatePrecision(*c.config.optimizerStates)
                  : "step";
     }},
    {"hpz_partition_size", zeroppShown,
     [](const TuneCandidate &c) -> json::Value {
       return c.config.hpzPartitionSize;
     }},
    {"mics_shard_size", zeroppShown,
     [](const TuneCandidate &c) -> json::Value {
       return c.config.micsShardSize;
     }},
    {"quantized_weights", zeroppShown,
     [](const TuneCandidate &c) -> json::Value {
       return c.config.quantizedWeights;
     }},
    {"quantized_gradients", zeroppShown,
     [](const TuneCandidate &c) -> json::Value {
       return c.config.quantizedGradients;
     }},
    {"inter_node_bytes_per_rank", zeroppShown,
     [](const TuneCandidate &c) -> json::Value { return c.interNodeBytes; }},
};

} // namespace

/// The configuration in words, for messages.
std::string mlir::zero::describeTuneConfig(const TuneConfig &c) {
  std::string s =
      formatv("stage {0}, {1} accumulation step{2}, remat {3}, reduce "
              "bucket {4}, overlap_comm {5}",
              c.stage, c.accumulationSteps, c.accumulationSteps == 1 ? "" : "s",
              getTuneRematName(c.remat), c.reduceBucketSize, c.overlapComm)
          .str();
  if (c.lossChunk > 0)
    s += formatv(", loss chunk {0}", c.lossChunk).str();
  if (c.spSize > 1)
    s += formatv(", sp size {0}", c.spSize).str();
  if (c.epSize > 1)
    s += formatv(", ep size {0}", c.epSize).str();
  if (c.tiledMlp > 0)
    s += formatv(", MLP in {0} tiles", c.tiledMlp).str();
  if (c.offloadActivations)
    s += ", activations offloaded to cpu";
  if (c.stage == 1 || c.stage == 2)
    s += formatv(", all-gather bucket {0}", c.allgatherBucketSize).str();
  if (c.stage == 3)
    s += formatv(", prefetch {0}, max live {1}, persistence {2}",
                 c.prefetchBucketSize, c.maxLiveParameters,
                 c.paramPersistenceThreshold)
             .str();
  if (c.stage == 3 && c.frozenGatherOnce)
    s += ", frozen partitions gathered once per step";
  if (c.isOffloaded())
    s += ", " + describeOffload(c);
  if (c.hpzPartitionSize > 1)
    s += formatv(", hpZ partition size {0}", c.hpzPartitionSize).str();
  if (c.micsShardSize > 0)
    s += formatv(", MiCS shard size {0}", c.micsShardSize).str();
  if (c.quantizedWeights)
    s += ", qwZ";
  if (c.quantizedGradients)
    s += ", qgZ";
  if (c.optimizerStates)
    s += formatv(", optimizer states {0}",
                 stringifyStatePrecision(*c.optimizerStates))
             .str();
  return s;
}

/// The candidate as JSON; the fields of an axis only when it was searched.
json::Value mlir::zero::tuneCandidateToJson(const TuneCandidate &c,
                                            int64_t rank, const TuneResult &r,
                                            const TuneOptions &options) {
  json::Object o{
      {"rank", rank},
      {"ds_config",
       toDeepSpeedConfig(c.config, r.globalBatch, options.worldSize)},
  };
  for (const Field &field : kFields)
    if (!field.shown || field.shown(r, options))
      o[field.key] = field.value(c);
  return o;
}

std::string mlir::zero::getTuneBandNote(const TuneResult &r) {
  if (!r.band || r.withinBand < 2)
    return "";
  const TuneCandidate &best = r.ranked.front();
  std::string s;
  raw_string_ostream os(s);
  os << formatv("within the validation band: {0} of the {1} ranked "
                "candidates and the fastest predict steps within each other's "
                "band (published runs on {2} took {3:f2} to {4:f2} times their "
                "predicted step, docs/CostModel.md); picked the one with the "
                "smallest peak",
                r.withinBand, r.ranked.size(), r.band->gpu, r.band->minRatio,
                r.band->maxRatio);
  if (best.predictedStepMs > r.fastestStepMs)
    os << formatv(" (the fastest predicts {0:f3} ms)", r.fastestStepMs);
  else
    os << ", the fastest";
  return s;
}

std::string mlir::zero::getTuneEpNote(const TuneResult &r) {
  if (r.epSizes.empty())
    return "";
  std::string s = "ep sizes searched (dropless receive buffers):";
  raw_string_ostream os(s);
  for (const TuneEpSize &t : r.epSizes) {
    os << formatv("\n  ep {0}: ", t.size);
    if (t.fits)
      os << "fits, smallest peak " << formatTuneBytes(t.smallestPeakBytes);
    else if (t.smallestPeakBytes && t.size == 1)
      os << "nothing fits, smallest peak "
         << formatTuneBytes(t.smallestPeakBytes);
    else if (t.smallestPeakBytes)
      os << "nothing fits dropless, smallest peak "
         << formatTuneBytes(t.smallestPeakBytes)
         << " (zero-compile --moe-capacity-factor plans smaller receive "
            "buffers)";
    else
      os << "nothing fits, not even the model states";
  }
  return s;
}

std::string mlir::zero::describeTuneNoFit(const TuneResult &result,
                                          const TuneOptions &options) {
  bool offloadSearched = options.offload != OffloadDevice::none;
  // Model states on the ranks, with the offload choice.
  auto states = [&](const TuneModelStates &s) {
    std::string offloaded = describeOffload(s.config);
    std::string ep = s.config.epSize > 1
                         ? formatv(" at ep size {0}", s.config.epSize).str()
                         : "";
    return formatv("stage {0}'s on {1} ranks{2}{3}{4}", s.config.stage,
                   options.worldSize, ep, offloaded.empty() ? "" : " with ",
                   offloaded)
        .str();
  };
  if (!result.closest) {
    if (options.memoryBudget < result.minModelStates.deviceBytes)
      return formatv("the memory budget {0} is below the model states "
                     "of every stage{1}: "
                     "the smallest, {2}, take {3}",
                     formatTuneBytes(options.memoryBudget),
                     offloadSearched ? " and offload" : "",
                     states(result.minModelStates),
                     formatTuneBytes(result.minModelStates.deviceBytes))
          .str();
    return formatv("the host budget {0} is below the host model states "
                   "of every configuration whose device states fit: "
                   "the smallest, {1}, take {2}",
                   formatTuneBytes(*options.hostBudget),
                   states(*result.minHostStates),
                   formatTuneBytes(result.minHostStates->hostBytes))
        .str();
  }
  const TuneCandidate &c = *result.closest;
  if (!c.hostFits)
    return formatv("no configuration fits the host budget {0}: the "
                   "smallest host peak found, {1}, is {2}, {3} over",
                   formatTuneBytes(*options.hostBudget),
                   describeTuneConfig(c.config),
                   formatTuneBytes(c.hostPeakBytes),
                   formatTuneBytes(c.hostPeakBytes - *options.hostBudget))
        .str();
  return formatv("no configuration fits the memory budget {0}: the "
                 "smallest peak found, {1}, is {2}, {3} over; its "
                 "largest item is {4}: {5}",
                 formatTuneBytes(options.memoryBudget),
                 describeTuneConfig(c.config), formatTuneBytes(c.peakBytes),
                 formatTuneBytes(c.peakBytes - options.memoryBudget),
                 c.fit.largestItem, formatTuneBytes(c.fit.largestItemBytes))
      .str();
}

void mlir::zero::printTuneText(const TuneResult &result,
                               const TuneOptions &options, StringRef summary,
                               StringRef outputFile, raw_ostream &os) {
  const HardwarePreset *hw = options.hardware;
  bool offloadSearched = options.offload != OffloadDevice::none;
  int64_t perNode = options.ranksPerNode;
  os << formatv("zero-tune: {0} ranks on {1}, memory budget {2}, global "
                "batch {3} ({4} tokens per step)",
                options.worldSize, hw->name,
                formatTuneBytes(options.memoryBudget), result.globalBatch,
                result.tokensPerStep);
  // Only across nodes, so one-node output is unchanged.
  if (perNode > 0 && perNode < options.worldSize) {
    os << formatv("; {0} nodes of {1} ranks", options.worldSize / perNode,
                  perNode);
    if (hw->interNodeLinks > 0)
      os << formatv(", each node's network at {0:f2} GB/s each way",
                    hw->getInterNodeBandwidth() / 1e9);
    else
      os << ", the nodes sharing memory";
  }
  if (offloadSearched)
    os << formatv("; offload up to {0}, host budget {1}",
                  stringifyOffloadDevice(options.offload),
                  options.hostBudget ? formatTuneBytes(*options.hostBudget)
                                     : "unbounded");
  os << "\n" << summary << "\n";
  if (std::string note = getTuneEpNote(result); !note.empty())
    os << note << "\n";
  os << "\n";
  printTable(result, options, os);
  const TuneCandidate &best = result.ranked.front();
  os << "\nbest: " << describeTuneConfig(best.config) << "; peak "
     << formatTuneBytes(best.peakBytes)
     << formatv(", predicted step {0:f3} ms", best.predictedStepMs);
  if (best.config.isOffloaded() || best.config.offloadActivations)
    os << "; host peak " << formatTuneBytes(best.hostPeakBytes)
       << (best.nvmeBytes ? ", NVMe " + formatTuneBytes(best.nvmeBytes) : "");
  if (!outputFile.empty())
    os << "; written to " << outputFile;
  os << "\n";
  if (std::string note = getTuneBandNote(result); !note.empty())
    os << note << "\n";
}

std::string mlir::zero::describeTuneSearch(const TuneResult &result,
                                           const TuneOptions &options,
                                           double seconds) {
  bool offloadSearched = options.offload != OffloadDevice::none;
  return formatv("searched {0} configurations in {1} groups (stage x "
                 "accumulation x {5}{6}remat{7}{8}{9}): {2} skipped by their "
                 "model states, {3} pruned by bounds; {4:f2} s",
                 result.evaluated, result.groups, result.prunedByModelStates,
                 result.prunedByBounds, seconds,
                 offloadSearched ? "offload x " : "",
                 options.zeropp ? "ZeRO++ x " : "",
                 result.lossChunkSearched ? " x loss chunk" : "",
                 result.longContextSearched
                     ? " x sp size x tiled MLP x activation offload"
                     : "",
                 result.epSizes.empty() ? "" : " x ep size")
      .str();
}

std::string mlir::zero::describeMaxSeqProbes(const MaxSeqResult &found,
                                             double seconds) {
  std::string s;
  raw_string_ostream os(s);
  os << formatv("searched {0} lengths in multiples of {1} in {2:f2} s:",
                found.probes.size(), found.multiple, seconds);
  for (const MaxSeqProbe &p : found.probes) {
    os << formatv("\n  seq {0}: ", p.seq);
    if (p.fits)
      os << "fits, peak " << formatTuneBytes(p.peakBytes);
    else if (p.peakBytes)
      os << "nothing fits, smallest peak " << formatTuneBytes(p.peakBytes);
    else
      os << "nothing fits, not even the model states";
  }
  return s;
}

std::string mlir::zero::describeMaxSeqVerdict(const MaxSeqResult &found) {
  if (found.reachedLimit)
    return formatv("every length up to {0} tokens fits, the limit searched",
                   found.maxSeq)
        .str();
  return formatv("longest sequence that fits: {0} tokens ({1} does not)",
                 found.maxSeq, found.firstMissSeq)
      .str();
}

json::Value mlir::zero::maxSeqToJson(const MaxSeqResult &found,
                                     const TuneOptions &options) {
  const TuneResult &best = *found.best;
  json::Array probes, candidates;
  for (const MaxSeqProbe &p : found.probes)
    probes.push_back(json::Object{
        {"seq", p.seq}, {"fits", p.fits}, {"peak_bytes", p.peakBytes}});
  int64_t rank = 0;
  for (const TuneCandidate &c : best.ranked)
    candidates.push_back(tuneCandidateToJson(c, ++rank, best, options));
  json::Object o{{"max_seq", found.maxSeq},
                 {"seq_multiple", found.multiple},
                 {"reached_limit", found.reachedLimit},
                 {"probes", std::move(probes)},
                 {"candidates", std::move(candidates)}};
  if (!found.reachedLimit)
    o["first_miss_seq"] = found.firstMissSeq;
  return o;
}
