//===- zero-tune.cpp - The fastest ZeRO configuration that fits -----------===//
//
// Part of the zero-mlir project.
//
// Searches stage x accumulation (at the model's global batch) x remat
// policy x bucket sizes x overlap x the stage-3 prefetch, live and
// persistence thresholds and frozen gather policy, and with --offload the
// optimizer and parameter offload (to a host budget), and with --zeropp
// the ZeRO++ and MiCS choices of stage 3, with the memory
// planner and the cost model (lib/Tuning), prints the fastest
// configurations that fit the budget, and writes the best as a DeepSpeed
// ds_config.json that `zero-compile --config` compiles to the same plan.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/Analysis/CostModel.h"
#include "zero/InitAll.h"
#include "zero/Support/CommandLine.h"
#include "zero/Support/ModelFile.h"
#include "zero/Support/ToolOptions.h"
#include "zero/Support/UTF8.h"
#include "zero/Tuning/MaxSeq.h"
#include "zero/Tuning/Tuner.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/Timer.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

#include <chrono>
#include <numeric>
#include <string>

using namespace llvm;
using namespace mlir::zero;

static cl::OptionCategory tuneCat("zero-tune options");

/// The search's options, stored where the tuner reads them; getTuneOptions()
/// adds the checked and parsed ones.
static TuneOptions tuneOptions;

static cl::list<std::string>
    inputFiles(cl::Positional, cl::desc("<model.mlir>"), cl::cat(tuneCat));
static cl::opt<int64_t, true>
    worldSize("world-size", cl::desc("Number of data-parallel ranks"),
              cl::location(tuneOptions.worldSize), cl::init(0),
              cl::cat(tuneCat));
static cl::opt<int64_t, true> ranksPerNode(
    "ranks-per-node",
    cl::desc("Ranks per node, a divisor of --world-size (default 0: every "
             "rank on one node); collectives across nodes are priced on the "
             "preset's inter-node fabric"),
    cl::location(tuneOptions.ranksPerNode), cl::init(0), cl::cat(tuneCat));
static cl::opt<std::string> memoryBudget(
    "memory-budget",
    cl::desc("Bytes one rank may use: a number and an optional unit KiB, "
             "MiB, GiB, TiB or decimal KB, MB, GB, TB, without a space "
             "(e.g. 40GiB); default: the preset's device memory"),
    cl::cat(tuneCat));
static cl::opt<std::string>
    remat("remat",
          cl::desc("Activation recomputation on every transformer block: "
                   "auto (default: none, selective and layer are searched), "
                   "or only none, selective or layer"),
          cl::init("auto"), cl::cat(tuneCat));
static cl::opt<std::string> lossChunk(
    "loss-chunk",
    cl::desc("The output projection and the loss in chunks of rows "
             "(zero-loss-chunk): auto (default: the whole logits and, where "
             "the step's head can be fused, Liger-Kernel's chunk for each "
             "micro batch are searched), 0 (never) or a number of rows"),
    cl::init("auto"), cl::cat(tuneCat));
static cl::opt<std::string> spSize(
    "sp-size",
    cl::desc("Ulysses sequence parallelism, ranks per group: auto (default: "
             "1, and where nothing fits without, each divisor of "
             "--world-size that leaves whole rows per data-parallel rank and "
             "that the step allows) or a number"),
    cl::init("auto"), cl::cat(tuneCat));
static cl::opt<std::string> epSize(
    "ep-size",
    cl::desc("Expert parallelism, ranks that split each MoE layer's experts: "
             "auto (default: 1 and, for a model with MoE layers, each divisor "
             "of --world-size that divides every layer's expert count) or a "
             "number"),
    cl::init("auto"), cl::cat(tuneCat));
static cl::opt<std::string> tiledMlp(
    "tiled-mlp",
    cl::desc("Each SwiGLU MLP in tiles of rows (zero-tiled-mlp): auto "
             "(default: whole, and where nothing fits without, ALST's tiles, "
             "a rank's tokens of one sequence over the hidden size), 0 "
             "(never) or a number of tiles"),
    cl::init("auto"), cl::cat(tuneCat));
static cl::opt<std::string> offloadActivations(
    "offload-activations",
    cl::desc("What recomputation keeps waits in pinned host memory "
             "(zero-offload-activations, DeepSpeed's cpu_checkpointing): "
             "auto (default: not, and where nothing fits without, both), "
             "none or cpu"),
    cl::init("auto"), cl::cat(tuneCat));
static cl::opt<std::string>
    offload("offload",
            cl::desc("The deepest tier the search may offload to: none "
                     "(default), cpu (the optimizer states at stages 1-3 "
                     "and the stage-3 parameter shards to pinned host "
                     "memory) or nvme (the optimizer states and the stage-3 "
                     "parameter shards also to NVMe; needs --nvme-path)"),
            cl::init("none"), cl::cat(tuneCat));
static cl::opt<std::string, true>
    nvmePath("nvme-path",
             cl::desc("Directory of the ranks' NVMe swap files, for "
                      "--offload=nvme (offload_optimizer.nvme_path and "
                      "offload_param.nvme_path)"),
             cl::location(tuneOptions.nvmePath), cl::cat(tuneCat));
static cl::opt<std::string> optimizerStates(
    "optimizer-states",
    cl::desc("A lower precision the search may keep the optimizer's states "
             "in beside the train step's: bf16 or int8 (bitsandbytes' "
             "block-wise 8-bit Adam), where the optimizer has it; default: "
             "the step's only"),
    cl::cat(tuneCat));
static cl::opt<std::string> hostBudget(
    "host-budget",
    cl::desc("Pinned host bytes one rank may use for offloaded states "
             "(its host_peak_bytes; a node's host memory divided by its "
             "ranks), written like --memory-budget; default: no bound"),
    cl::cat(tuneCat));
static cl::opt<int64_t, true>
    top("top",
        cl::desc("How many (stage, accumulation, offload) groups to rank, "
                 "each by its best configuration (default 10)"),
        cl::location(tuneOptions.top), cl::init(10), cl::cat(tuneCat));
static cl::opt<bool, true> withinBand(
    "within-band",
    cl::desc("Where the preset's GPU has a validation band "
             "(docs/CostModel.md), pick the smallest peak among the ranked "
             "candidates within the band of the fastest, and it within "
             "theirs (default true; false: the fastest)"),
    cl::location(tuneOptions.preferSmallerPeakWithinBand), cl::init(true),
    cl::cat(tuneCat));
static cl::opt<std::string>
    outputFile("o",
               cl::desc("Write the best configuration as a DeepSpeed "
                        "ds_config.json"),
               cl::cat(tuneCat));
static cl::opt<bool> maxSeq(
    "max-seq",
    cl::desc("Find the longest sequence at which a configuration fits: the "
             "search at lengths the model is built again at from the options "
             "zero-model-gen recorded on it (--record-spec), doubling from "
             "its own length until nothing fits, then bisecting; prints each "
             "length searched and the best configuration at the longest"),
    cl::init(false), cl::cat(tuneCat));
static cl::opt<int64_t> seqMultiple(
    "seq-multiple",
    cl::desc("With --max-seq, the lengths searched are multiples of this "
             "and of the sequence-parallel sizes the search may pick "
             "(--sp-size, else --world-size) (default 1024)"),
    cl::init(1024), cl::cat(tuneCat));
static zero::SharedToolOptions shared(
    tuneCat,
    {/*hardware=*/"Hardware preset of the cost model (a100-40gb, a100-80gb, "
                  "l4, rtx-4090, h100-sxm, h100-sxm-96gb, h100-pcie, h200-sxm, "
                  "mi300x, cpu)",
     /*interNodeBandwidth=*/
     "Line rate of each of the preset's links between nodes, in Gb/s each "
     "way (400 or 400Gb/s; default: the preset's)",
     /*zeropp=*/
     "Also search ZeRO++ and MiCS at stage 3: the hpZ partition size (the "
     "divisors of --ranks-per-node, across nodes), the MiCS shard size (the "
     "divisors of --world-size), qwZ, and qgZ (across nodes, not with MiCS); "
     "each choice is ranked as a group of its own",
     /*format=*/"Output: text (a table) or json (an array, best first)"});

static int fail(const Twine &msg) {
  WithColor::error(errs(), "zero-tune") << msg << "\n";
  return 1;
}

/// `bytes` exactly and in a readable unit.
static std::string bytesText(int64_t bytes) {
  return formatv("{0} bytes ({1})", bytes, formatByteSize(bytes)).str();
}

/// The offload choice in words (empty when nothing is offloaded).
static std::string describeOffload(const TuneConfig &c) {
  if (!c.isOffloaded())
    return "";
  return formatv("offload_optimizer {0}, offload_param {1}",
                 stringifyOffloadDevice(c.offloadOptimizer),
                 stringifyOffloadDevice(c.offloadParam))
      .str();
}

/// The ZeRO++ and MiCS choice in short ("-" for none), for the table.
static std::string zeroppText(const TuneConfig &c) {
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

/// The configuration in words, for messages.
static std::string describe(const TuneConfig &c) {
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

/// The candidate as JSON; the offload and ZeRO++ fields only when they are
/// searched.
static json::Value toJson(const TuneCandidate &c, int64_t rank,
                          int64_t globalBatch, bool offloadSearched,
                          bool frozenSearched, bool chunkSearched,
                          bool longContextSearched, bool epSearched) {
  json::Object o{
      {"rank", rank},
      {"stage", c.config.stage},
      {"gradient_accumulation_steps", c.config.accumulationSteps},
      {"micro_batch_per_rank", c.microBatch},
      {"peak_bytes", c.peakBytes},
      {"persistent_bytes", c.persistentBytes},
      {"predicted_step_ms", c.predictedStepMs},
      {"exposed_comm_ms", c.exposedCommMs},
      {"remat", getTuneRematName(c.config.remat)},
      {"recompute_ms", c.recomputeMs},
      {"tokens_per_second", c.tokensPerSecond},
      {"largest_item", json::Object{{"name", c.fit.largestItem},
                                    {"bytes", c.fit.largestItemBytes}}},
      {"ds_config",
       toDeepSpeedConfig(c.config, globalBatch, tuneOptions.worldSize)},
  };
  if (chunkSearched)
    o["loss_chunk"] = c.config.lossChunk;
  if (epSearched)
    o["ep_size"] = c.config.epSize;
  if (longContextSearched) {
    o["sp_size"] = c.config.spSize;
    o["tiled_mlp"] = c.config.tiledMlp;
    o["offload_activations"] = c.config.offloadActivations ? "cpu" : "none";
  }
  if (frozenSearched)
    o["frozen_gather"] = c.config.stage != 3         ? "-"
                         : c.config.frozenGatherOnce ? "once"
                                                     : "per-use";
  if (offloadSearched) {
    o["offload_optimizer"] = stringifyOffloadDevice(c.config.offloadOptimizer);
    o["offload_param"] = stringifyOffloadDevice(c.config.offloadParam);
  }
  // Activation offload uses the host too.
  if (offloadSearched || longContextSearched) {
    o["host_peak_bytes"] = c.hostPeakBytes;
    o["nvme_bytes"] = c.nvmeBytes;
    o["exposed_transfer_ms"] = c.exposedTransferMs;
  }
  if (tuneOptions.optimizerStates)
    o["optimizer_states"] =
        c.config.optimizerStates
            ? stringifyStatePrecision(*c.config.optimizerStates)
            : "step";
  if (shared.zeropp) {
    o["hpz_partition_size"] = c.config.hpzPartitionSize;
    o["mics_shard_size"] = c.config.micsShardSize;
    o["quantized_weights"] = c.config.quantizedWeights;
    o["quantized_gradients"] = c.config.quantizedGradients;
    o["inter_node_bytes_per_rank"] = c.interNodeBytes;
  }
  return o;
}

/// What the validation band of the preset's GPU says of the ranking: how
/// many of the top candidates it cannot tell apart from the fastest, and
/// that the one with the smallest peak of them was picked.
static std::string bandNote(const TuneResult &r) {
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

/// What the search found at each expert-parallel size (empty without MoE
/// layers): the receive buffers are planned dropless, and a size at which
/// nothing fits is said to be so.
static std::string epNote(const TuneResult &r) {
  if (r.epSizes.empty())
    return "";
  std::string s = "ep sizes searched (dropless receive buffers):";
  raw_string_ostream os(s);
  for (const TuneEpSize &t : r.epSizes) {
    os << formatv("\n  ep {0}: ", t.size);
    if (t.fits)
      os << "fits, smallest peak " << bytesText(t.smallestPeakBytes);
    else if (t.smallestPeakBytes && t.size == 1)
      os << "nothing fits, smallest peak " << bytesText(t.smallestPeakBytes);
    else if (t.smallestPeakBytes)
      os << "nothing fits dropless, smallest peak "
         << bytesText(t.smallestPeakBytes)
         << " (zero-compile --moe-capacity-factor plans smaller receive "
            "buffers)";
    else
      os << "nothing fits, not even the model states";
  }
  return s;
}

/// One row per ranked group; with offload searched, the offload choice,
/// the host and NVMe bytes and the exposed transfer time too.
static void printTable(const TuneResult &r, bool offloadSearched,
                       raw_ostream &os) {
  os << format("%4s %5s %5s %5s %9s %12s %7s %12s %12s %12s %11s %16s %10s "
               "%11s %12s %11s",
               "rank", "stage", "accum", "micro", "remat", "reduce_bkt",
               "overlap", "allgather", "prefetch", "max_live", "persistence",
               "peak_bytes", "peak", "step_ms", "tokens/s", "exposed_ms");
  if (r.lossChunkSearched)
    os << format(" %10s", "loss_chunk");
  if (!r.epSizes.empty())
    os << format(" %7s", "ep_size");
  if (r.longContextSearched)
    os << format(" %7s %9s %11s", "sp_size", "tiled_mlp", "offload_act");
  if (r.frozenGatherSearched)
    os << format(" %13s", "frozen_gather");
  if (offloadSearched)
    os << format(" %9s %9s %16s %16s %11s", "opt_off", "param_off",
                 "host_peak_bytes", "nvme_bytes", "transfer_ms");
  if (shared.zeropp)
    os << format(" %14s %16s", "zeropp", "inter_node_bytes");
  os << "\n";
  auto knob = [](bool used, int64_t v) {
    return used ? std::to_string(v) : std::string("-");
  };
  int64_t rank = 0;
  for (const TuneCandidate &c : r.ranked) {
    const TuneConfig &k = c.config;
    bool gathers = k.stage == 1 || k.stage == 2, stage3 = k.stage == 3;
    os << format("%4lld %5lld %5lld %5lld %9s %12lld %7s %12s %12s %12s %11s "
                 "%16lld %10s %11.3f %12.0f %11.3f",
                 static_cast<long long>(++rank),
                 static_cast<long long>(k.stage),
                 static_cast<long long>(k.accumulationSteps),
                 static_cast<long long>(c.microBatch),
                 getTuneRematName(k.remat).str().c_str(),
                 static_cast<long long>(k.reduceBucketSize),
                 k.overlapComm ? "yes" : "no",
                 knob(gathers, k.allgatherBucketSize).c_str(),
                 knob(stage3, k.prefetchBucketSize).c_str(),
                 knob(stage3, k.maxLiveParameters).c_str(),
                 knob(stage3, k.paramPersistenceThreshold).c_str(),
                 static_cast<long long>(c.peakBytes),
                 formatByteSize(c.peakBytes).c_str(), c.predictedStepMs,
                 c.tokensPerSecond, c.exposedCommMs);
    if (r.lossChunkSearched)
      os << format(" %10s", knob(k.lossChunk > 0, k.lossChunk).c_str());
    if (!r.epSizes.empty())
      os << format(" %7lld", static_cast<long long>(k.epSize));
    if (r.longContextSearched)
      os << format(" %7lld %9s %11s", static_cast<long long>(k.spSize),
                   knob(k.tiledMlp > 0, k.tiledMlp).c_str(),
                   k.offloadActivations ? "cpu" : "none");
    if (r.frozenGatherSearched)
      os << format(" %13s", !stage3              ? "-"
                            : k.frozenGatherOnce ? "once"
                                                 : "per-use");
    if (offloadSearched)
      os << format(" %9s %9s %16lld %16lld %11.3f",
                   stringifyOffloadDevice(k.offloadOptimizer).str().c_str(),
                   stringifyOffloadDevice(k.offloadParam).str().c_str(),
                   static_cast<long long>(c.hostPeakBytes),
                   static_cast<long long>(c.nvmeBytes), c.exposedTransferMs);
    if (shared.zeropp)
      os << format(" %14s %16lld", zeroppText(k).c_str(),
                   static_cast<long long>(c.interNodeBytes));
    os << "\n";
  }
}

/// The byte count of `text` (--memory-budget, --host-budget), or none after
/// reporting why not.
static std::optional<int64_t> parseBudget(StringRef option,
                                          const std::string &text) {
  std::string why;
  std::optional<int64_t> bytes = parseMemoryBudget(text, why);
  if (!bytes)
    fail("bad --" + option + " '" + text + "': " + why);
  return bytes;
}

/// Checks the input file's argument; false after reporting the problem.
static bool checkInputFiles() {
  if (inputFiles.empty()) {
    fail("no input file (zero-tune model.mlir --world-size N "
         "--hardware PRESET ...; --help lists the options)");
    return false;
  }
  if (inputFiles.size() > 1) {
    // `--memory-budget 40 GB` leaves the unit behind as an argument.
    std::string hint;
    if (isStrayByteUnit(inputFiles[1]))
      hint = " (a memory budget is written without a space, as in 40GB)";
    fail("one input file expected, got '" + inputFiles[0] + "' and '" +
         inputFiles[1] + "'" + hint);
    return false;
  }
  // `-o ''` would otherwise write nothing and say nothing.
  if (outputFile.getNumOccurrences() && outputFile.empty()) {
    fail("-o: expected a file name, got an empty one");
    return false;
  }
  return true;
}

/// Checks the ranks and the hardware, and sets tuneOptions' hardware to
/// `rates` (the preset with --inter-node-bandwidth applied) and its memory
/// budget; false after reporting the first problem.
static bool checkHardware(HardwarePreset &rates) {
  if (worldSize < 1) {
    fail(worldSize.getNumOccurrences()
             ? "--world-size must be >= 1, got " + Twine(tuneOptions.worldSize)
             : Twine("--world-size N is required"));
    return false;
  }
  if (shared.hardware.empty()) {
    fail("--hardware PRESET is required (known: " + getHardwarePresetNames() +
         ")");
    return false;
  }
  const HardwarePreset *preset = lookupHardwarePreset(shared.hardware);
  if (!preset) {
    fail("unknown hardware preset '" + shared.hardware +
         "' (known: " + getHardwarePresetNames() + ")");
    return false;
  }
  int64_t perNode = tuneOptions.ranksPerNode;
  if (perNode < 0 || (perNode > 0 && tuneOptions.worldSize % perNode)) {
    fail("--ranks-per-node " + Twine(perNode) + " must divide --world-size " +
         Twine(tuneOptions.worldSize) + " (0: every rank on one node)");
    return false;
  }
  rates = *preset;
  std::string why;
  if (failed(applyInterNodeBandwidth(rates, shared.interNodeBandwidth, why))) {
    fail("--inter-node-bandwidth: " + why);
    return false;
  }
  tuneOptions.hardware = &rates;
  tuneOptions.memoryBudget = rates.deviceMemoryBytes;
  if (memoryBudget.getNumOccurrences()) {
    std::optional<int64_t> bytes = parseBudget("memory-budget", memoryBudget);
    if (!bytes)
      return false;
    tuneOptions.memoryBudget = *bytes;
  } else if (tuneOptions.memoryBudget == 0) {
    fail("--memory-budget is required with the " + rates.name +
         " preset, which has no device memory");
    return false;
  }
  return true;
}

/// Checks the search's choices (remat, offload, the host budget, --top and
/// --format) into tuneOptions; false after reporting the first problem.
static bool checkSearch() {
  if (remat != "auto") {
    tuneOptions.remat = parseTuneRemat(remat);
    if (!tuneOptions.remat) {
      fail("--remat must be auto, none, selective or layer, got '" + remat +
           "'");
      return false;
    }
  }
  if (lossChunk != "auto") {
    int64_t rows = 0;
    if (StringRef(lossChunk).getAsInteger(10, rows) || rows < 0) {
      fail("--loss-chunk must be auto, 0 or a number of rows, got '" +
           lossChunk + "'");
      return false;
    }
    tuneOptions.lossChunk = rows;
  }
  // --sp-size and --ep-size: auto, or one divisor of the world size.
  auto parseDivisor = [&](StringRef flag, StringRef text,
                          std::optional<int64_t> &out) {
    if (text == "auto")
      return true;
    int64_t p = 0;
    if (text.getAsInteger(10, p) || p < 1 || tuneOptions.worldSize % p != 0) {
      fail("--" + flag + " must be auto or a divisor of --world-size " +
           Twine(tuneOptions.worldSize) + ", got '" + text + "'");
      return false;
    }
    out = p;
    return true;
  };
  if (!parseDivisor("sp-size", spSize, tuneOptions.spSize) ||
      !parseDivisor("ep-size", epSize, tuneOptions.epSize))
    return false;
  if (tiledMlp != "auto") {
    int64_t tiles = 0;
    if (StringRef(tiledMlp).getAsInteger(10, tiles) || tiles < 0) {
      fail("--tiled-mlp must be auto, 0 or a number of tiles, got '" +
           tiledMlp + "'");
      return false;
    }
    tuneOptions.tiledMlp = tiles;
  }
  if (offloadActivations != "auto") {
    if (offloadActivations != "none" && offloadActivations != "cpu") {
      fail("--offload-activations must be auto, none or cpu, got '" +
           offloadActivations + "'");
      return false;
    }
    tuneOptions.offloadActivations = offloadActivations == "cpu";
  }
  std::optional<OffloadDevice> offloadTier = symbolizeOffloadDevice(offload);
  if (!offloadTier) {
    fail("--offload must be none, cpu or nvme, got '" + offload + "'");
    return false;
  }
  tuneOptions.offload = *offloadTier;
  if (optimizerStates.getNumOccurrences()) {
    std::optional<StatePrecision> p = symbolizeStatePrecision(optimizerStates);
    if (!p || *p == StatePrecision::f32) {
      fail("--optimizer-states must be bf16 or int8, got '" + optimizerStates +
           "'");
      return false;
    }
    tuneOptions.optimizerStates = p;
  }
  const std::string &path = tuneOptions.nvmePath;
  if (*offloadTier == OffloadDevice::nvme && path.empty()) {
    fail("--offload=nvme needs --nvme-path DIR, the directory of the "
         "ranks' swap files");
    return false;
  }
  if (!path.empty() && *offloadTier != OffloadDevice::nvme) {
    fail("--nvme-path is for --offload=nvme, and the offload is " + offload);
    return false;
  }
  if (std::optional<size_t> bad = ::zero::findInvalidUTF8(path)) {
    fail(::zero::describeInvalidUTF8("--nvme-path ", path, *bad) +
         " (it goes into ds_config.json's nvme_path, and JSON is UTF-8)");
    return false;
  }
  if (hostBudget.getNumOccurrences()) {
    if (*offloadTier == OffloadDevice::none) {
      fail("--host-budget bounds offloaded states: give --offload "
           "cpu or nvme");
      return false;
    }
    tuneOptions.hostBudget = parseBudget("host-budget", hostBudget);
    if (!tuneOptions.hostBudget)
      return false;
  }
  if (tuneOptions.top < 1) {
    fail("--top must be >= 1, got " + Twine(tuneOptions.top));
    return false;
  }
  if (seqMultiple.getNumOccurrences() && !maxSeq) {
    fail("--seq-multiple " + Twine(seqMultiple) +
         " sets the lengths --max-seq searches; without --max-seq nothing "
         "is searched by length (give --max-seq, or leave it out)");
    return false;
  }
  if (seqMultiple < 1) {
    fail("--seq-multiple must be >= 1, got " + Twine(seqMultiple));
    return false;
  }
  if (!shared.isValidFormat()) {
    fail("--format must be text or json, got '" + shared.format + "'");
    return false;
  }
  tuneOptions.zeropp = shared.zeropp;
  return true;
}

/// Reports why no configuration was ranked: the budgets below every
/// configuration's model states, or the closest configuration's overshoot.
static int failNoFit(const TuneResult &result) {
  const TuneOptions &options = tuneOptions;
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
      return fail(formatv("the memory budget {0} is below the model states "
                          "of every stage{1}: "
                          "the smallest, {2}, take {3}",
                          bytesText(options.memoryBudget),
                          offloadSearched ? " and offload" : "",
                          states(result.minModelStates),
                          bytesText(result.minModelStates.deviceBytes)));
    return fail(formatv("the host budget {0} is below the host model states "
                        "of every configuration whose device states fit: "
                        "the smallest, {1}, take {2}",
                        bytesText(*options.hostBudget),
                        states(*result.minHostStates),
                        bytesText(result.minHostStates->hostBytes)));
  }
  const TuneCandidate &c = *result.closest;
  if (!c.hostFits)
    return fail(formatv("no configuration fits the host budget {0}: the "
                        "smallest host peak found, {1}, is {2}, {3} over",
                        bytesText(*options.hostBudget), describe(c.config),
                        bytesText(c.hostPeakBytes),
                        bytesText(c.hostPeakBytes - *options.hostBudget)));
  return fail(formatv("no configuration fits the memory budget {0}: the "
                      "smallest peak found, {1}, is {2}, {3} over; its "
                      "largest item is {4}: {5}",
                      bytesText(options.memoryBudget), describe(c.config),
                      bytesText(c.peakBytes),
                      bytesText(c.peakBytes - options.memoryBudget),
                      c.fit.largestItem, bytesText(c.fit.largestItemBytes)));
}

/// The text output: the search, the table and the best configuration.
static void printText(const TuneResult &result, StringRef summary,
                      raw_ostream &os) {
  const TuneOptions &options = tuneOptions;
  const HardwarePreset *hw = options.hardware;
  bool offloadSearched = options.offload != OffloadDevice::none;
  int64_t perNode = options.ranksPerNode;
  os << formatv("zero-tune: {0} ranks on {1}, memory budget {2}, global "
                "batch {3} ({4} tokens per step)",
                options.worldSize, hw->name, bytesText(options.memoryBudget),
                result.globalBatch, result.tokensPerStep);
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
    os << formatv("; offload up to {0}, host budget {1}", offload,
                  options.hostBudget ? bytesText(*options.hostBudget)
                                     : "unbounded");
  os << "\n" << summary << "\n";
  if (std::string note = epNote(result); !note.empty())
    os << note << "\n";
  os << "\n";
  printTable(result, offloadSearched, os);
  const TuneCandidate &best = result.ranked.front();
  os << "\nbest: " << describe(best.config) << "; peak "
     << bytesText(best.peakBytes)
     << formatv(", predicted step {0:f3} ms", best.predictedStepMs);
  if (best.config.isOffloaded() || best.config.offloadActivations)
    os << "; host peak " << bytesText(best.hostPeakBytes)
       << (best.nvmeBytes ? ", NVMe " + bytesText(best.nvmeBytes) : "");
  if (!outputFile.empty())
    os << "; written to " << outputFile;
  os << "\n";
  if (std::string note = bandNote(result); !note.empty())
    os << note << "\n";
}

/// How the parameters and train step inputs of `file` differ from those of
/// `built`, the model its model_gen.spec builds at the same length; empty
/// where they agree.
static std::string describeSpecMismatch(mlir::ModuleOp file,
                                        mlir::ModuleOp built) {
  struct Model {
    SmallVector<std::pair<StringRef, mlir::Type>> params;
    int64_t elements = 0;
    SmallVector<mlir::Type> inputs;
  };
  auto read = [](mlir::ModuleOp m) {
    Model model;
    for (ParamOp p : m.getOps<ParamOp>()) {
      model.params.push_back({p.getSymName(), p.getTensorType()});
      model.elements += p.getTensorType().getNumElements();
    }
    for (TrainStepOp step : m.getOps<TrainStepOp>())
      llvm::append_range(model.inputs, step.getBodyBlock().getArgumentTypes());
    return model;
  };
  Model have = read(file), spec = read(built);
  if (have.params == spec.params && have.inputs == spec.inputs)
    return "";
  auto typeText = [](mlir::Type t) {
    std::string text;
    raw_string_ostream os(text);
    t.print(os);
    return text;
  };
  std::string first;
  for (size_t i = 0; first.empty(); ++i) {
    if (i >= have.params.size() || i >= spec.params.size()) {
      if (have.params.size() != spec.params.size()) {
        bool fileLonger = have.params.size() > spec.params.size();
        first = formatv("parameter '{0}' is the {1}'s only",
                        (fileLonger ? have : spec).params[i].first,
                        fileLonger ? "file" : "spec")
                    .str();
      } else {
        first = "the train step's inputs are " +
                llvm::join(llvm::map_range(have.inputs, typeText), ", ") +
                ", the spec's " +
                llvm::join(llvm::map_range(spec.inputs, typeText), ", ");
      }
    } else if (have.params[i] != spec.params[i]) {
      first = formatv("parameter {0} is '{1}' {2} in the file, '{3}' {4} in "
                      "the spec's model",
                      i, have.params[i].first, typeText(have.params[i].second),
                      spec.params[i].first, typeText(spec.params[i].second))
                  .str();
    }
  }
  return formatv("its spec builds {0} parameters of {1} elements, its train "
                 "step has {2} parameters of {3} elements; {4}",
                 spec.params.size(), spec.elements, have.params.size(),
                 have.elements, first)
      .str();
}

/// Lengths --max-seq does not search past.
static constexpr int64_t kMaxSeqLimit = int64_t(1) << 30;

/// --max-seq: the longest sequence at which a configuration of the model
/// `module` records fits, the lengths searched and the best configuration
/// there.
static int runMaxSeq(mlir::ModuleOp module, mlir::MLIRContext &context) {
  const TuneOptions &options = tuneOptions;
  StringRef file = inputFiles.front();
  ModelSpecAttr spec = getModelSpec(module);
  if (!spec)
    return fail("--max-seq: '" + file +
                "' has no model_gen.spec, the options zero-model-gen built "
                "it from, with which it is built again at each length "
                "(generate it with zero-model-gen --record-spec)");
  if (spec.getKind() == ModelKind::mlp)
    return fail("--max-seq: '" + file +
                "' is an mlp (model_gen.spec), which has no sequence");
  mlir::FailureOr<ModelGenOptions> spelled = getModelGenOptions(
      spec, [&] { return mlir::emitError(module.getLoc()); });
  if (failed(spelled))
    return 1;
  // Every sequence-parallel size the search may pick divides the length.
  int64_t multiple =
      std::lcm(seqMultiple.getValue(),
               options.spSize ? *options.spSize : options.worldSize);
  // The generator reports at no location: name the file and its spec.
  mlir::ScopedDiagnosticHandler specErrors(
      &context, [&](mlir::Diagnostic &diag) -> mlir::LogicalResult {
        if (!isa<mlir::UnknownLoc>(diag.getLocation()))
          return mlir::failure();
        fail("--max-seq: building '" + file +
             "' again from its model_gen.spec: " + diag.str());
        return mlir::success();
      });
  // The search builds the spec's model: the file must be that model (a spec
  // left on another model would answer for the spec's).
  ModelGenOptions own = *spelled;
  own.recordSpec = false;
  mlir::OwningOpRef<mlir::ModuleOp> built = generateModel(&context, own);
  if (!built)
    return 1;
  if (std::string mismatch = describeSpecMismatch(module, *built);
      !mismatch.empty())
    return fail("--max-seq: '" + file +
                "' is not the model its model_gen.spec builds: " + mismatch +
                " (the lengths would be searched for the spec's model; "
                "generate the file and its spec together with zero-model-gen "
                "--record-spec)");
  auto start = std::chrono::steady_clock::now();
  mlir::FailureOr<MaxSeqResult> found =
      findMaxSequence(&context, *spelled, options, multiple, kMaxSeqLimit);
  if (failed(found))
    return 1;
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  std::string probes;
  raw_string_ostream ps(probes);
  ps << formatv("searched {0} lengths in multiples of {1} in {2:f2} s:",
                found->probes.size(), multiple, seconds);
  for (const MaxSeqProbe &p : found->probes) {
    ps << formatv("\n  seq {0}: ", p.seq);
    if (p.fits)
      ps << "fits, peak " << bytesText(p.peakBytes);
    else if (p.peakBytes)
      ps << "nothing fits, smallest peak " << bytesText(p.peakBytes);
    else
      ps << "nothing fits, not even the model states";
  }
  if (!found->best) {
    errs() << "zero-tune: " << probes << "\n";
    fail(formatv("--max-seq: nothing fits at {0} tokens, the shortest "
                 "length searched",
                 found->firstMissSeq));
    return failNoFit(*found->firstMiss);
  }
  const TuneResult &best = *found->best;
  std::string verdict =
      found->reachedLimit
          ? formatv("every length up to {0} tokens fits, the limit searched",
                    found->maxSeq)
                .str()
          : formatv("longest sequence that fits: {0} tokens ({1} does not)",
                    found->maxSeq, found->firstMissSeq)
                .str();
  if (!outputFile.empty()) {
    std::error_code ec;
    ToolOutputFile out(outputFile, ec, sys::fs::OF_Text);
    if (ec)
      return fail("cannot write '" + outputFile + "': " + ec.message());
    out.os() << formatv("{0:2}",
                        toDeepSpeedConfig(best.ranked.front().config,
                                          best.globalBatch, options.worldSize))
             << "\n";
    out.keep();
  }
  bool offloadSearched = options.offload != OffloadDevice::none;
  if (shared.isJson()) {
    errs() << "zero-tune: " << probes << "\nzero-tune: " << verdict << "\n";
    json::Array probeArray, candidates;
    for (const MaxSeqProbe &p : found->probes)
      probeArray.push_back(json::Object{
          {"seq", p.seq}, {"fits", p.fits}, {"peak_bytes", p.peakBytes}});
    int64_t rank = 0;
    for (const TuneCandidate &c : best.ranked)
      candidates.push_back(
          toJson(c, ++rank, best.globalBatch, offloadSearched,
                 best.frozenGatherSearched, best.lossChunkSearched,
                 best.longContextSearched, !best.epSizes.empty()));
    json::Object o{{"max_seq", found->maxSeq},
                   {"seq_multiple", multiple},
                   {"reached_limit", found->reachedLimit},
                   {"probes", std::move(probeArray)},
                   {"candidates", std::move(candidates)}};
    if (!found->reachedLimit)
      o["first_miss_seq"] = found->firstMissSeq;
    outs() << formatv("{0:2}", json::Value(std::move(o))) << "\n";
    return 0;
  }
  outs() << "zero-tune --max-seq: " << probes << "\n" << verdict << "\n\n";
  std::string summary =
      formatv("at {0} tokens: searched {1} configurations in {2} groups",
              found->maxSeq, best.evaluated, best.groups)
          .str();
  printText(best, summary, outs());
  return 0;
}

int main(int argc, char **argv) {
  InitLLVM y(argc, argv);
  cl::HideUnrelatedOptions(tuneCat);
  // `--zeropp false` as --help shows a flag with its value.
  ::zero::FlagArgs args(argc, argv);
  cl::ParseCommandLineOptions(
      args.argc(), args.argv(),
      "zero-tune: the ZeRO configuration that fits a memory budget and runs "
      "fastest, by the memory planner and the cost model\n\n"
      "  zero-tune model.mlir --world-size N --hardware PRESET "
      "[--memory-budget B] [--remat auto|none|selective|layer] "
      "[--loss-chunk auto|0|ROWS] [--sp-size auto|P] [--ep-size auto|P] "
      "[--tiled-mlp auto|0|K] [--offload-activations auto|none|cpu] "
      "[--offload none|cpu|nvme [--nvme-path DIR] [--host-budget B]] "
      "[--top K] [--format text|json] [-o best.json]\n"
      "  zero-tune model.mlir --max-seq [--seq-multiple N] --world-size N "
      "--hardware PRESET ...\n");
  HardwarePreset rates;
  if (!checkInputFiles() || !checkHardware(rates) || !checkSearch())
    return 1;

  mlir::DialectRegistry registry;
  zero::registerAllDialects(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  context.printOpOnDiagnostic(false);
  SourceMgr sourceMgr;
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  std::string error;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      zero::parseModelFile(inputFiles.front(), sourceMgr, context, error);
  if (!module)
    return error.empty() ? 1 : fail(error);

  if (maxSeq)
    return runMaxSeq(*module, context);

  const TuneOptions &options = tuneOptions;
  bool offloadSearched = options.offload != OffloadDevice::none;
  auto start = std::chrono::steady_clock::now();
  mlir::FailureOr<TuneResult> result = tuneTrainStep(*module, options);
  if (failed(result))
    return 1;
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();

  std::string summary =
      formatv("searched {0} configurations in {1} groups (stage x "
              "accumulation x {5}{6}remat{7}{8}{9}): {2} skipped by their "
              "model states, {3} pruned by bounds; {4:f2} s",
              result->evaluated, result->groups, result->prunedByModelStates,
              result->prunedByBounds, seconds,
              offloadSearched ? "offload x " : "",
              options.zeropp ? "ZeRO++ x " : "",
              result->lossChunkSearched ? " x loss chunk" : "",
              result->longContextSearched
                  ? " x sp size x tiled MLP x activation offload"
                  : "",
              result->epSizes.empty() ? "" : " x ep size")
          .str();
  // Beside a JSON array or an error, the summary goes to stderr.
  if (shared.isJson() || result->ranked.empty()) {
    errs() << "zero-tune: " << summary << "\n";
    if (std::string note = epNote(*result); !note.empty())
      errs() << "zero-tune: " << note << "\n";
  }
  if (shared.isJson() && !result->ranked.empty())
    if (std::string note = bandNote(*result); !note.empty())
      errs() << "zero-tune: " << note << "\n";
  if (result->ranked.empty())
    return failNoFit(*result);

  const TuneCandidate &best = result->ranked.front();
  if (!outputFile.empty()) {
    std::error_code ec;
    ToolOutputFile out(outputFile, ec, sys::fs::OF_Text);
    if (ec)
      return fail("cannot write '" + outputFile + "': " + ec.message());
    out.os() << formatv("{0:2}",
                        toDeepSpeedConfig(best.config, result->globalBatch,
                                          options.worldSize))
             << "\n";
    out.keep();
  }

  if (shared.isJson()) {
    json::Array array;
    int64_t rank = 0;
    for (const TuneCandidate &c : result->ranked)
      array.push_back(
          toJson(c, ++rank, result->globalBatch, offloadSearched,
                 result->frozenGatherSearched, result->lossChunkSearched,
                 result->longContextSearched, !result->epSizes.empty()));
    outs() << formatv("{0:2}", json::Value(std::move(array))) << "\n";
    return 0;
  }
  printText(*result, summary, outs());
  return 0;
}
