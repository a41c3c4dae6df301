//===- Tuner.h - The fastest ZeRO configuration that fits -------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// zero-tune's search: the compiler run many times, cheaply. The step is
// differentiated and cast to its compute precision once; each candidate
// configuration runs the rest of zero-pipeline on a clone, and the memory
// planner and the cost model judge it. Bounds prune: a stage and offload
// choice whose device model states exceed the budget (or host states the
// host budget) is never scheduled, and a (stage, accumulation, offload,
// remat) group whose activations cannot fit, or whose compute alone
// (recomputation included) is slower than the configurations already found,
// is not searched further.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_TUNING_TUNER_H
#define ZERO_TUNING_TUNER_H

#include "zero/Dialect/Zero/Analysis/CostModel.h"
#include "zero/Dialect/Zero/IR/ZeroDialect.h"
#include "zero/Tuning/Config.h"

#include "mlir/IR/BuiltinOps.h"

#include <optional>
#include <string>
#include <vector>

namespace mlir::zero {

/// One configuration as the planner and the cost model see it.
struct TuneCandidate {
  TuneConfig config;
  /// The rank's micro batch: global batch / (world size x accumulation).
  int64_t microBatch = 0;
  int64_t peakBytes = 0;
  /// The model states and other persistent buffers.
  int64_t persistentBytes = 0;
  /// Offload: the rank's pinned host arena (its host peak) and NVMe swap
  /// file.
  int64_t hostPeakBytes = 0;
  int64_t nvmeBytes = 0;
  double predictedStepMs = 0;
  double exposedCommMs = 0;
  /// The time compute waits for device-host and NVMe transfers.
  double exposedTransferMs = 0;
  /// The part of the step spent recomputing activations (zero-remat).
  double recomputeMs = 0;
  /// The bytes one rank sends per step across nodes (rank 0's, as the
  /// report counts them).
  int64_t interNodeBytes = 0;
  /// Tokens (positions of the loss) per second over the world.
  double tokensPerSecond = 0;
  /// Whether the peak fits the memory budget and the host peak the host
  /// budget.
  bool fits = false;
  /// The biggest contributor to the peak.
  FitVerdict fit;
  /// Whether the host peak fits the host budget (true without one).
  bool hostFits = true;
};

struct TuneOptions {
  int64_t worldSize = 1;
  /// The backend the step will train on, as zero-compile's --target: cpu,
  /// or cuda, which pads a 16-bit step's vocabulary to a multiple of 64
  /// rows where its loss is not chunked (every candidate so planned).
  std::string target = "cpu";
  /// Ranks per node (0: every rank on one node), which the cost model
  /// prices the collectives by.
  int64_t ranksPerNode = 0;
  const HardwarePreset *hardware = nullptr;
  /// The packed rows' document lengths (--doc-lengths), which price the
  /// attention over them; null: full rows.
  const DocumentLengths *documents = nullptr;
  int64_t memoryBudget = 0;
  /// How many groups to rank; the bounds prune against the slowest of them.
  int64_t top = 10;
  /// The one recomputation policy to consider; unset: every policy.
  std::optional<TuneRemat> remat;
  /// The one loss chunk to consider (0: the logits whole); unset: both the
  /// whole logits and, where zero-loss-chunk applies, the chunk
  /// getDefaultLossChunk gives each micro batch.
  std::optional<int64_t> lossChunk;
  /// The long-context options. Each unset one is off in the search, and
  /// where no configuration fits without them, the search is repeated with
  /// them: the sequence-parallel sizes that divide the world and leave a
  /// whole number of rows per data-parallel rank, the MLP in tiles of about
  /// the hidden size's rows of one sequence (ALST's), and activation offload
  /// beside each recomputation. A set one is the only value considered.
  std::optional<int64_t> spSize;
  std::optional<int64_t> tiledMlp;
  std::optional<bool> offloadActivations;
  /// The deepest tier the search may offload to: none (no offload), cpu
  /// (the optimizer at stages 1-3, the parameter shards at stage 3, to
  /// pinned host memory) or nvme (either also to NVMe swap files in
  /// `nvmePath`).
  OffloadDevice offload = OffloadDevice::none;
  std::string nvmePath;
  /// Pinned host bytes one rank may use (its host_peak_bytes); unset: no
  /// bound.
  std::optional<int64_t> hostBudget;
  /// Also search ZeRO++ and MiCS at stage 3 (getZeroPPChoices): each choice
  /// is a group of its own.
  bool zeropp = false;
  /// With the preset's validation band, put first the candidate with the
  /// smallest peak among those within the band of the fastest.
  bool preferSmallerPeakWithinBand = true;
  /// A precision the search may also keep the optimizer's states in
  /// (zero-tune --optimizer-states; one the optimizer's optimizers.def row
  /// declares): each stage and offload choice is a group with the step's
  /// precision and one with this. Unset: the step's only.
  std::optional<StatePrecision> optimizerStates;
  /// The one expert-parallel size to consider; unset: 1 and, for a step
  /// with MoE layers, every size above 1 that divides the world size and
  /// each layer's expert count (each a group of its own; none beside
  /// sequence parallelism, MiCS or hpZ, which the schedule refuses with it).
  std::optional<int64_t> epSize;
};

/// What the search found for one expert-parallel size.
struct TuneEpSize {
  int64_t size = 1;
  /// Whether any configuration with it fits the budgets.
  bool fits = false;
  /// The smallest peak of its configurations (0 when none was planned).
  int64_t smallestPeakBytes = 0;
};

/// The model states one configuration keeps on the device and in pinned
/// host memory, read off zero-partition with its offload choice (the host
/// part includes the swap buffers of optimizer states and parameter shards
/// on NVMe).
struct TuneModelStates {
  /// Only stage and the offload fields are set.
  TuneConfig config;
  int64_t deviceBytes = 0;
  int64_t hostBytes = 0;
};

struct TuneResult {
  /// The best fitting configuration of each (stage, accumulation, offload,
  /// ZeRO++ choice, ep size) group, whichever its remat policy, fastest
  /// first (ties: smaller peak), at most `top` of them; with a validation
  /// band, the one with the smallest peak of those within the band of the
  /// fastest comes first.
  std::vector<TuneCandidate> ranked;
  /// The validation band of the hardware preset's GPU (docs/CostModel.md),
  /// if it has one; then how many ranked candidates' predicted steps lie
  /// within the fastest's band (predicted step times the band's ratios),
  /// and its within theirs, and the fastest's predicted step.
  std::optional<ValidationBand> band;
  int64_t withinBand = 0;
  double fastestStepMs = 0;
  /// When nothing fits: the configuration with the smallest peak found.
  std::optional<TuneCandidate> closest;
  int64_t globalBatch = 0;
  /// Positions the loss is computed over per optimizer step (tokens for a
  /// language model, samples for a classifier).
  int64_t tokensPerStep = 0;
  /// The smallest device model states of any stage and offload choice
  /// (zero-partition's persistent buffers).
  TuneModelStates minModelStates;
  /// Of the choices whose device states fit the budget, the smallest host
  /// states (unset when none fits).
  std::optional<TuneModelStates> minHostStates;
  /// Configurations planned and costed; (stage, accumulation, offload,
  /// remat) groups, those skipped because their model states exceed the
  /// budget or the host budget and those pruned by a memory or time bound.
  int64_t evaluated = 0;
  int64_t groups = 0;
  /// Whether a stage-3 configuration had frozen partitions, so that the
  /// frozen gather policy was searched.
  bool frozenGatherSearched = false;
  /// Whether a configuration computed the loss in chunks
  /// (zero-loss-chunk), so that the loss chunk was searched.
  bool lossChunkSearched = false;
  /// Whether the long-context options were searched (set, or since nothing
  /// fit without them).
  bool longContextSearched = false;
  int64_t prunedByModelStates = 0;
  int64_t prunedByBounds = 0;
  /// The expert-parallel sizes searched, ascending (empty for a step
  /// without MoE layers).
  std::vector<TuneEpSize> epSizes;
};

/// Searches the configurations of the single train step of `module` (an
/// undifferentiated model, left unchanged). Fails with a diagnostic when the
/// step cannot be scheduled at all.
FailureOr<TuneResult> tuneTrainStep(ModuleOp module,
                                    const TuneOptions &options);

} // namespace mlir::zero

#endif // ZERO_TUNING_TUNER_H
