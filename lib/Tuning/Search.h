//===- Search.h - The tuner's search, shared by its files -------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// The search's state and steps (lib/Tuning only): Choices.cpp enumerates
// the choices of a group and builds the differentiated steps, Evaluate.cpp
// plans and costs one configuration and descends over the knobs, Tuner.cpp
// orders, bounds and ranks the groups.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_LIB_TUNING_SEARCH_H
#define ZERO_LIB_TUNING_SEARCH_H

#include "zero/Dialect/Zero/Transforms/LossChunk.h"
#include "zero/Tuning/Tuner.h"

#include "llvm/ADT/SmallVector.h"

#include <cmath>
#include <functional>
#include <map>
#include <tuple>
#include <vector>

namespace mlir::zero::tuning {

/// `v` rounded up to two significant digits, so that the values a ladder
/// tries read well in a ds_config and never fall below what they bound.
inline int64_t roundUpNice(double v) {
  if (v <= 1)
    return 1;
  double unit = std::pow(10.0, std::floor(std::log10(v)) - 1);
  return static_cast<int64_t>(std::ceil(v / unit - 1e-9) * unit);
}

/// The configuration and what the group's bounds need of it.
struct Evaluation {
  TuneCandidate candidate;
  /// Empty when the pipeline and the analyses succeeded.
  std::string error;
  /// A lower bound on the step of any configuration of its group: the
  /// compute stream's kernels other than the completions of collectives.
  double computeBoundMs = 0;
  /// A lower bound on the peak of any configuration of its group.
  int64_t memoryBound = 0;
  /// Elements of each partition (the stage-3 groups), for the knobs' ladders.
  SmallVector<int64_t> groupNumels;
  /// Whether any partition is frozen.
  bool frozenGroups = false;

  bool ok() const { return error.empty(); }
};

/// Whether `a` is the better configuration: one that fits over one that does
/// not, then the faster (the smaller peak on a tie), or, when neither fits,
/// the smaller peak.
inline bool isBetter(const Evaluation &a, const Evaluation &b) {
  if (a.ok() != b.ok())
    return a.ok();
  const TuneCandidate &x = a.candidate, &y = b.candidate;
  if (x.fits != y.fits)
    return x.fits;
  if (!x.fits)
    return x.peakBytes < y.peakBytes;
  if (x.predictedStepMs != y.predictedStepMs)
    return x.predictedStepMs < y.predictedStepMs;
  return x.peakBytes < y.peakBytes;
}

/// A (stage, accumulation, optimizer offload, parameter offload, hpZ size,
/// MiCS shard size, qwZ, qgZ, optimizer states, ep size) group.
using GroupKey =
    std::tuple<int64_t, int64_t, OffloadDevice, OffloadDevice, int64_t, int64_t,
               bool, bool, std::optional<StatePrecision>, int64_t>;

/// The group of a configuration: what the knobs do not change.
inline GroupKey groupOf(const TuneConfig &c) {
  return {c.stage,
          c.accumulationSteps,
          c.offloadOptimizer,
          c.offloadParam,
          c.hpzPartitionSize,
          c.micsShardSize,
          c.quantizedWeights,
          c.quantizedGradients,
          c.optimizerStates,
          c.epSize};
}

/// `opt` with its states in `states`.
inline OptimizerAttr withStates(OptimizerAttr opt, StatePrecision states) {
  return OptimizerAttr::get(opt.getContext(), opt.getKind(),
                            opt.getLr().convertToDouble(), opt.getParams(),
                            states, opt.getSchedule(), opt.getBf16Masters());
}

/// The divisors of `n` strictly between 1 and `n`, ascending.
inline SmallVector<int64_t> getProperDivisors(int64_t n) {
  SmallVector<int64_t> divisors;
  for (int64_t d = 2; d < n; ++d)
    if (n % d == 0)
      divisors.push_back(d);
  return divisors;
}

/// Whether, when nothing fits, `a` is closer to fitting than `b`: one within
/// the host budget over one that is not, then the smaller peak (the smaller
/// host peak when neither is within the host budget).
inline bool isCloser(const TuneCandidate &a, const TuneCandidate &b) {
  if (a.hostFits != b.hostFits)
    return a.hostFits;
  if (!a.hostFits)
    return a.hostPeakBytes < b.hostPeakBytes;
  return a.peakBytes < b.peakBytes;
}

/// One knob of the coordinate descent: the values it tries and how to set it.
struct Knob {
  std::vector<int64_t> values;
  std::function<void(TuneConfig &, int64_t)> set;
};

class Tuner {
public:
  /// `front` is `model` differentiated; `head` is set where zero-loss-chunk
  /// applies to `model`, `hidden` and `seqLen` where the step has a hidden
  /// size and a sequence (zero-tiled-mlp's tiles).
  Tuner(ModuleOp model, ModuleOp front, std::optional<LossHead> head,
        int64_t hidden, int64_t seqLen, const TuneOptions &options,
        TuneResult &result)
      : model(model), ctx(front.getContext()), head(head), hidden(hidden),
        seqLen(seqLen), options(options), result(result) {
    fronts[{0, 0, 1, 1}] = front;
  }

  LogicalResult run();

private:
  /// The offload choices of `stage` the search makes, nothing offloaded
  /// first.
  SmallVector<TuneConfig> getOffloadChoices(int64_t stage) const;
  /// The MiCS shard sizes of `stage` the search makes, none (0) first.
  SmallVector<int64_t> getMicsChoices(int64_t stage) const;
  /// `choice` (a stage, offload and MiCS choice) with each hpZ, qwZ and qgZ
  /// choice the search makes and DeepSpeed allows beside it, none first.
  SmallVector<TuneConfig> getZeroPPChoices(const TuneConfig &choice) const;
  /// The step's offload of `config`'s offload choice (set only when
  /// something is offloaded).
  OffloadAttr getOffloadAttr(const TuneConfig &config) const;
  /// The model states zero-partition gives `stage` (over MiCS shard groups
  /// of `mics` ranks when positive) under each of its offload choices, and
  /// the padded parameter count, or the partition's error.
  FailureOr<std::pair<SmallVector<TuneModelStates>, int64_t>>
  partitionStage(int64_t stage, int64_t mics, int64_t sp, int64_t ep);
  /// The step differentiated with the loss in chunks of `chunk` rows (0:
  /// the whole logits), its MLPs in `tiles` tiles (0: whole), its
  /// sequence over `sp` ranks and its experts over `ep`, or null when the
  /// passes refuse it.
  ModuleOp getFront(int64_t chunk, int64_t tiles = 0, int64_t sp = 1,
                    int64_t ep = 1);
  /// The loss chunks a group of `accumulation` steps tries, the whole
  /// logits (0) first.
  SmallVector<int64_t> getLossChunks(int64_t accumulation, int64_t tiles,
                                     int64_t sp, int64_t ep);
  /// The expert-parallel sizes the search tries, 1 first: options.epSize,
  /// or every divisor of the world size that divides each MoE layer's
  /// experts.
  SmallVector<int64_t> getEpSizes() const;
  /// The sequence-parallel sizes that divide the world and leave whole rows
  /// on each data-parallel rank, ascending.
  SmallVector<int64_t> getSpSizes() const;
  /// The MLP tiles ALST picks for a rank's share of one sequence over `sp`
  /// ranks (its tokens over the hidden size, rounded up), or 0 when that is
  /// one tile.
  int64_t getDefaultTiles(int64_t sp) const;
  /// Builds and searches the groups of every stage, offload and ZeRO++
  /// choice with each sequence-parallel size in `sps`, expert-parallel
  /// size of getEpSizes, MLP tiling in `tiles` and activation offload in
  /// `offloads`.
  LogicalResult search(ArrayRef<TuneRemat> remats, ArrayRef<int64_t> sps,
                       ArrayRef<int64_t> tiles, ArrayRef<bool> offloads);
  /// Whether any configuration evaluated so far fits.
  bool anyFits() const;
  const Evaluation &evaluate(const TuneConfig &config, bool verify = false);
  /// The group's knobs, their ladders derived from the base evaluation.
  std::vector<Knob> getKnobs(const TuneConfig &base, const Evaluation &e) const;
  void descend(const TuneConfig &base);
  /// The step of the `top`-th fastest group so far, or infinity.
  double getPruneMs() const;
  /// The step a configuration of `config`'s group must beat to matter: the
  /// group's fastest so far, and the `top`-th fastest group's.
  double getBoundMs(const TuneConfig &config) const;

  ModuleOp model;
  MLIRContext *ctx;
  std::optional<LossHead> head;
  int64_t hidden, seqLen;
  /// The differentiated steps by (loss chunk, MLP tiles, sequence-parallel
  /// size, expert-parallel size); null where refused.
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t>, ModuleOp> fronts;
  SmallVector<OwningOpRef<ModuleOp>> ownedFronts;
  const TuneOptions &options;
  TuneResult &result;
  std::map<TuneConfig, Evaluation> memo;
  /// The fastest fitting step of each group found so far.
  std::map<GroupKey, double> groupBestMs;
  /// Whether any stage's model states were read.
  bool anyStage = false;
  /// Whether the offload choices include options.optimizerStates: only
  /// where nothing fits with the step's precision.
  bool lowerStates = false;
};

} // namespace mlir::zero::tuning

#endif // ZERO_LIB_TUNING_SEARCH_H
