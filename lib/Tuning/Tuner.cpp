//===- Tuner.cpp - The fastest ZeRO configuration that fits ---------------===//
//
// Part of the zero-mlir project.
//
// The search, for a world size, a hardware preset and a memory budget:
//
//  1. Autodiff and mixed precision run once; every candidate is a clone of
//     that module through the rest of zero-pipeline
//     (buildZeroSchedulePipeline), planned (computeMemoryPlan) and costed
//     (computeReport).
//  2. Each stage's model states are read off zero-partition alone, for each
//     offload choice the search may make (the optimizer states at stages
//     1-3, the parameter shards at stage 3, to host memory or to NVMe):
//     what stays on the device, and what is in pinned host memory (with
//     optimizer states or parameter shards on NVMe, the swap buffers they
//     are read and written through, sized by the partitions alone: the
//     host states are then the planned host peak). A (stage,
//     offload) whose device states exceed the budget, or whose host states
//     exceed the host budget, is skipped whole; the knobs and accumulation
//     do not move model states between memories.
//  3. Every (stage, accumulation, offload) group is evaluated once at its base
//     configuration (no recomputation, DeepSpeed's defaults, buckets capped
//     at the model). Two bounds hold for every configuration of a (stage,
//     accumulation, remat) group, since the knobs only move communication:
//     the peak is at least the persistent buffers plus the activations at
//     their peak (the same values live over the same compute ops), and the
//     step at least the compute stream's kernels other than the completions
//     of collectives (copies to and from host memory are not kernels; the
//     host Adam over NVMe-resident states is, with the disk time it
//     exposes, which the knobs do not change). Since the bounds are per
//     offload choice, an offloaded group's smaller device states are what
//     its memory bound counts.
//  4. Groups are searched in the order of their time bound: a group whose
//     memory bound exceeds the budget, or whose time bound is no faster than
//     the `top`-th configuration found so far, is pruned; the others descend
//     coordinate-wise over their knobs (bucket sizes, overlap, and at stage 3
//     the prefetch window, the live parameters and the persistence
//     threshold), each value tried with the others held, twice over.
//  5. Recomputation (zero-remat on every block, selective then layer) comes
//     after a group's remat=none: it only adds kernels, so the time bound of
//     none bounds it too, and a remat group is evaluated only when that
//     bound is faster than the group's best so far and the `top`-th; then
//     its own bounds (its activations, its recompute) prune it or it
//     descends like the others.
//  6. The fused output projection and loss (zero-loss-chunk), where it
//     applies, is tried beside the whole logits in every group: a
//     differentiated clone of the step with the chunk each micro batch's
//     rows give (getDefaultLossChunk), whose base is evaluated and bounded as
//     the group's own (its backward recomputes the logits chunk by chunk,
//     and its loss kernels differ, so the whole logits' bounds do not bound
//     it); recomputation then follows each as in 5. The group's winner is
//     the fastest that fits, so a chunk is chosen when the plan needs its
//     lower peak to fit, or where it is faster.
//  7. With --zeropp, stage 3 is also partitioned over each MiCS shard size
//     and every stage-3 choice is repeated with each hpZ size, qwZ and qgZ
//     (getZeroPPChoices); each is a group of its own, skipped, bounded and
//     descended like the others. hpZ's secondary partition only adds to
//     the model states zero-partition gives, so those skip it soundly.
//  8. Where no configuration fits, the search is repeated with the
//     long-context options (unless given): each sequence-parallel size
//     that divides the world into whole rows per data-parallel rank, each
//     MLP in ALST's tiles, and activation offload beside each remat policy
//     (zero-offload-activations; its copies are not kernels, so the remat
//     policy's time bound holds). Sequence parallelism and the tiles
//     rewrite the forward, so each builds a differentiated step of its own,
//     as the loss chunk does; a size or tiling the passes refuse is no
//     choice. Plans that fit without them are never displaced.
//  9. For a step with MoE layers, expert parallelism: each size that
//     divides the world and every layer's experts is a dimension of the
//     groups like the ZeRO++ choices (zero-expert-parallel before autodiff,
//     so each size builds a differentiated step of its own; zero-partition
//     with the same size), not beside sequence parallelism, MiCS or hpZ,
//     which the schedule refuses with it. Its receive buffers are planned
//     dropless; the result says which sizes fit.
// 10. Where the preset's GPU has a validation band (lookupValidationBand,
//     docs/CostModel.md), a ranked candidate and the fastest whose
//     predicted steps lie each within the other's band cannot be told
//     apart, and the one of those with the smallest peak goes first.
//
//===----------------------------------------------------------------------===//

#include "zero/Tuning/Tuner.h"

#include "zero/Dialect/NN/IR/NNDialect.h"
#include "zero/Dialect/Zero/Analysis/MemoryPlan.h"
#include "zero/Dialect/Zero/Analysis/Report.h"
#include "zero/Dialect/Zero/Analysis/Schedule.h"
#include "zero/Dialect/Zero/IR/Optimizers.h"
#include "zero/Dialect/Zero/Transforms/LossChunk.h"
#include "zero/Dialect/Zero/Transforms/Passes.h"
#include "zero/Dialect/Zero/Transforms/Remat.h"
#include "zero/Pipelines/DeepSpeedKeys.h"
#include "zero/Pipelines/Pipeline.h"
#include "zero/Support/UTF8.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>

using namespace mlir;
using namespace mlir::zero;

StringRef mlir::zero::getTuneRematName(TuneRemat r) {
  switch (r) {
  case TuneRemat::none:
    return "none";
  case TuneRemat::selective:
    return "selective";
  case TuneRemat::layer:
    return "layer";
  }
  llvm_unreachable("unknown remat policy");
}

std::optional<TuneRemat> mlir::zero::parseTuneRemat(StringRef name) {
  for (TuneRemat r : {TuneRemat::none, TuneRemat::selective, TuneRemat::layer})
    if (name == getTuneRematName(r))
      return r;
  return std::nullopt;
}

void TuneConfig::applyTo(ZeroPipelineOptions &o) const {
  o.stage = stage;
  o.remat = getTuneRematName(remat).str();
  o.lossChunk = lossChunk;
  o.spSize = spSize;
  o.epSize = epSize;
  o.tiledMlp = tiledMlp;
  o.offloadActivations = offloadActivations ? "cpu" : "none";
  o.gradientAccumulationSteps = accumulationSteps;
  o.reduceBucketSize = reduceBucketSize;
  o.overlapComm = overlapComm;
  o.allgatherBucketSize = allgatherBucketSize;
  o.prefetchBucketSize = prefetchBucketSize;
  o.maxLiveParameters = maxLiveParameters;
  o.paramPersistenceThreshold = paramPersistenceThreshold;
  o.frozenGather = frozenGatherOnce ? "once" : "per-use";
  o.offloadOptimizer = stringifyOffloadDevice(offloadOptimizer).str();
  o.offloadParam = stringifyOffloadDevice(offloadParam).str();
  // One directory holds both swap files (their names differ); each option
  // is set only for the states on NVMe, as DeepSpeed reads nvme_path.
  o.nvmePath = offloadOptimizer == OffloadDevice::nvme ? nvmePath : "";
  o.paramNvmePath = offloadParam == OffloadDevice::nvme ? nvmePath : "";
  o.hpzPartitionSize = hpzPartitionSize;
  o.micsShardSize = micsShardSize;
  o.quantizedWeights = quantizedWeights;
  o.quantizedGradients = quantizedGradients;
  if (optimizerStates)
    o.optimizerStates = stringifyStatePrecision(*optimizerStates).str();
}

namespace {

/// `v` rounded up to two significant digits, so that the values a ladder
/// tries read well in a ds_config and never fall below what they bound.
int64_t roundUpNice(double v) {
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
bool isBetter(const Evaluation &a, const Evaluation &b) {
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
GroupKey groupOf(const TuneConfig &c) {
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
OptimizerAttr withStates(OptimizerAttr opt, StatePrecision states) {
  return OptimizerAttr::get(
      opt.getContext(), opt.getKind(), opt.getLr(), opt.getBeta1(),
      opt.getBeta2(), opt.getEps(), opt.getWeightDecay(),
      opt.getBiasCorrection(), opt.getMomentum(), opt.getDampening(),
      opt.getNesterov(), states, opt.getSchedule(), opt.getMuonLr(),
      opt.getMuonMomentum(), opt.getMuonNesterov(), opt.getNsSteps(),
      opt.getNsA(), opt.getNsB(), opt.getNsC(), opt.getNsEps(),
      opt.getAdjustLrFn(), opt.getBeta2Decay(), opt.getEps1(), opt.getEps2(),
      opt.getD(), opt.getMaximize(), opt.getBf16Masters());
}

/// The divisors of `n` strictly between 1 and `n`, ascending.
SmallVector<int64_t> getProperDivisors(int64_t n) {
  SmallVector<int64_t> divisors;
  for (int64_t d = 2; d < n; ++d)
    if (n % d == 0)
      divisors.push_back(d);
  return divisors;
}

/// Whether, when nothing fits, `a` is closer to fitting than `b`: one within
/// the host budget over one that is not, then the smaller peak (the smaller
/// host peak when neither is within the host budget).
bool isCloser(const TuneCandidate &a, const TuneCandidate &b) {
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

} // namespace

SmallVector<TuneConfig> Tuner::getOffloadChoices(int64_t stage) const {
  SmallVector<OffloadDevice> devices;
  for (OffloadDevice d :
       {OffloadDevice::none, OffloadDevice::cpu, OffloadDevice::nvme})
    if (d <= options.offload)
      devices.push_back(d);
  SmallVector<TuneConfig> choices;
  ModuleOp module = model;
  StatePrecision stepStates =
      (*module.getOps<TrainStepOp>().begin()).getOptimizer().getStates();
  // DeepSpeed's rules of the stage, as zero-optimizer checks them; a
  // choice they reject is not one.
  ScopedDiagnosticHandler quiet(ctx, [](Diagnostic &) { return success(); });
  for (OffloadDevice param : devices) {
    for (OffloadDevice optimizer : devices) {
      TuneConfig c;
      c.stage = stage;
      c.offloadOptimizer = optimizer;
      c.offloadParam = param;
      if (c.isOnNvme())
        c.nvmePath = options.nvmePath;
      if (failed(getOffloadAttr(c).verifyStage(
              [&] { return mlir::emitError(UnknownLoc::get(ctx)); }, stage)))
        continue;
      choices.push_back(c);
      // The lower precision, where the lowering takes it: int8 and bf16
      // states are not swapped through NVMe.
      if (lowerStates && *options.optimizerStates != stepStates &&
          !(*options.optimizerStates != StatePrecision::f32 &&
            optimizer == OffloadDevice::nvme)) {
        c.optimizerStates = options.optimizerStates;
        choices.push_back(c);
      }
    }
  }
  return choices;
}

SmallVector<int64_t> Tuner::getMicsChoices(int64_t stage) const {
  SmallVector<int64_t> sizes = {0};
  // DeepSpeed's MiCS takes any shard size that divides the data-parallel
  // world; m = n is plain ZeRO-3 and m = 1 shards nothing, so neither is a
  // choice of its own.
  if (options.zeropp && stage == 3)
    llvm::append_range(sizes, getProperDivisors(options.worldSize));
  return sizes;
}

SmallVector<TuneConfig>
Tuner::getZeroPPChoices(const TuneConfig &choice) const {
  SmallVector<TuneConfig> choices = {choice};
  if (!options.zeropp || choice.stage != 3)
    return choices;
  // hpZ keeps its secondary partition within a node, so it is searched
  // across nodes only, over the divisors of the ranks per node (the whole
  // node included); it excludes MiCS and, here, parameter offload, whose
  // shards are not on the device.
  int64_t perNode = options.ranksPerNode;
  if (perNode > 0 && perNode < options.worldSize && choice.micsShardSize == 0 &&
      choice.offloadParam == OffloadDevice::none)
    for (int64_t h = 2; h <= perNode; ++h)
      if (perNode % h == 0) {
        TuneConfig c = choice;
        c.hpzPartitionSize = h;
        choices.push_back(c);
      }
  // qwZ gathers the device shards (not with parameter offload); the
  // pipeline refuses it for weights that are not 16-bit.
  if (choice.offloadParam == OffloadDevice::none)
    for (int64_t i = 0, e = choices.size(); i < e; ++i) {
      TuneConfig c = choices[i];
      c.quantizedWeights = true;
      choices.push_back(c);
    }
  // qgZ quantizes the reduce-scatters across nodes only (on one node the
  // pipeline falls back to the plain one) and, as DeepSpeed's MiCS reduces
  // with the plain reduce-scatter, not beside MiCS.
  if (perNode > 0 && perNode < options.worldSize && choice.micsShardSize == 0)
    for (int64_t i = 0, e = choices.size(); i < e; ++i) {
      TuneConfig c = choices[i];
      c.quantizedGradients = true;
      choices.push_back(c);
    }
  return choices;
}

OffloadAttr Tuner::getOffloadAttr(const TuneConfig &c) const {
  // The swap buffers zero-pipeline builds at its defaults, which the
  // candidates keep.
  ZeroPipelineOptions defaults;
  StringRef path = c.nvmePath;
  return OffloadAttr::get(ctx, c.offloadOptimizer, c.offloadParam,
                          c.offloadOptimizer == OffloadDevice::nvme ? path : "",
                          defaults.nvmeBufferCount, defaults.nvmeBufferSize,
                          c.offloadParam == OffloadDevice::nvme ? path : "",
                          defaults.paramBufferCount, defaults.paramBufferSize);
}

FailureOr<std::pair<SmallVector<TuneModelStates>, int64_t>>
Tuner::partitionStage(int64_t stage, int64_t mics, int64_t sp, int64_t ep) {
  // The loss chunk and the MLP tiles change no parameter; the
  // sequence-parallel step divides its batch over fewer ranks, the
  // expert-parallel one keeps E / ep experts of each expert parameter.
  OwningOpRef<ModuleOp> module = getFront(0, 0, sp, ep).clone();
  PassManager pm(ctx);
  ZeroPartitionPassOptions part;
  part.stage = stage;
  part.worldSize = options.worldSize;
  part.spSize = sp;
  part.epSize = ep;
  part.ranksPerNode = options.ranksPerNode;
  part.micsShardSize = mics;
  pm.addPass(createZeroPartitionPass(part));
  if (failed(pm.run(*module)))
    return failure();
  TrainStepOp step = *module->getOps<TrainStepOp>().begin();
  OptimizerAttr stepOptimizer = step.getOptimizer();
  SmallVector<TuneModelStates> states;
  int64_t padded = 0;
  for (TuneConfig choice : getOffloadChoices(stage)) {
    // DeepSpeed refuses MiCS with either offload.
    if (mics > 0 && choice.isOffloaded())
      continue;
    choice.micsShardSize = mics;
    choice.epSize = ep;
    // The buffers' memories follow the step's offload, as zero-optimizer
    // records it.
    if (choice.isOffloaded())
      step.setOffloadAttr(getOffloadAttr(choice));
    else
      step.removeOffloadAttr();
    // And the states' bytes their precision.
    step.setOptimizerAttr(
        choice.optimizerStates
            ? withStates(stepOptimizer, *choice.optimizerStates)
            : stepOptimizer);
    FailureOr<StepSchedule> schedule = StepSchedule::get(step);
    if (failed(schedule))
      return failure();
    TuneModelStates s;
    s.config = choice;
    for (const PartitionBuffers &p : schedule->getPartitions()) {
      for (unsigned k = 0; k < kNumBufferKinds; ++k) {
        MemoryKind memory = p.getMemory(static_cast<BufferKind>(k));
        if (memory == MemoryKind::device)
          s.deviceBytes += p.bytes[k];
        else if (memory == MemoryKind::host)
          s.hostBytes += p.bytes[k];
      }
    }
    // States on NVMe: the host arena holds their swap buffers, as many and
    // as large as the plan reserves for the step's Adams and transfers.
    if (NvmeSwapAttr swap = schedule->getOptimizerSwap())
      s.hostBytes += swap.getBuffers() * swap.getBufferBytes();
    if (ParamSwapAttr swap = schedule->getParamSwap(0))
      s.hostBytes += swap.getBuffers() * swap.getBufferBytes();
    padded = schedule->getPaddedParamCount();
    states.push_back(s);
  }
  return std::make_pair(std::move(states), padded);
}

const Evaluation &Tuner::evaluate(const TuneConfig &configRef, bool verify) {
  // A copy: `configRef` may be the memoized entry that is re-evaluated.
  TuneConfig config = configRef;
  auto it = memo.find(config);
  if (it != memo.end() && !verify)
    return it->second;
  if (it == memo.end())
    ++result.evaluated;
  Evaluation &e = memo[config];
  e = Evaluation();
  e.candidate.config = config;

  ModuleOp front =
      getFront(config.lossChunk, config.tiledMlp, config.spSize, config.epSize);
  if (!front) {
    e.error = "zero-loss-chunk, zero-tiled-mlp, zero-sequence-parallel or "
              "zero-expert-parallel refuses the step";
    return e;
  }
  OwningOpRef<ModuleOp> module = front.clone();
  std::string error;
  {
    // A candidate the passes reject is recorded, not reported.
    ScopedDiagnosticHandler handler(ctx, [&](Diagnostic &diag) {
      if (diag.getSeverity() == DiagnosticSeverity::Error && error.empty())
        error = diag.str();
      return success();
    });
    PassManager pm(ctx);
    // The op verifier after every pass costs a third of a candidate; the
    // winner is re-run with it and with the schedule verifier.
    pm.enableVerifier(verify);
    ZeroPipelineOptions pipeline;
    config.applyTo(pipeline);
    pipeline.worldSize = options.worldSize;
    pipeline.ranksPerNode = options.ranksPerNode;
    pipeline.verify = verify;
    buildZeroSchedulePipeline(pm, pipeline);
    bool ok = succeeded(pm.run(*module));
    FailureOr<StepSchedule> schedule = failure();
    FailureOr<MemoryPlan> plan = failure();
    FailureOr<StepReport> report = failure();
    if (ok)
      schedule = StepSchedule::get(*module->getOps<TrainStepOp>().begin());
    if (succeeded(schedule))
      plan = computeMemoryPlan(*schedule);
    if (succeeded(plan))
      report = computeReport(*schedule, *plan, *options.hardware);
    if (failed(report)) {
      e.error = error.empty() ? "the pipeline failed" : error;
      return e;
    }

    TuneCandidate &c = e.candidate;
    c.microBatch = result.globalBatch / (options.worldSize / config.spSize *
                                         config.accumulationSteps);
    c.peakBytes = plan->peakBytes;
    c.persistentBytes = plan->persistentBytes;
    c.hostPeakBytes = plan->hostBytes;
    c.nvmeBytes = plan->nvmeBytes;
    c.predictedStepMs = report->predictedStepMs;
    c.exposedCommMs = report->exposedCommMs;
    c.exposedTransferMs = report->exposedTransferMs;
    c.recomputeMs = report->recomputeMs;
    c.interNodeBytes = report->interNodeBytesPerRank;
    c.tokensPerSecond =
        report->predictedStepMs > 0
            ? result.tokensPerStep * 1e3 / report->predictedStepMs
            : 0;
    c.fit = computeFitVerdict(*plan, options.memoryBudget);
    c.hostFits = !options.hostBudget || plan->hostBytes <= *options.hostBudget;
    c.fits = c.fit.fits && c.hostFits;

    for (const TimelineEvent &ev : report->timeline.events)
      if (ev.stream == 0 && ev.category == "compute" &&
          !isa_and_nonnull<CollectiveOpInterface>(ev.op))
        e.computeBoundMs += ev.durationUs * 1e-3;
    // Summed here, accumulated along the stream there: no rounding may lift
    // the bound above a step it bounds.
    e.computeBoundMs *= 1 - 1e-9;
    e.memoryBound =
        plan->persistentBytes + plan->peakByCategory[static_cast<unsigned>(
                                    MemoryCategory::Activations)];
    for (const PartitionBuffers &p : schedule->getPartitions()) {
      e.groupNumels.push_back(p.partition.getNumelValue());
      e.frozenGroups |= p.partition.getFrozen();
    }
  }
  if (e.candidate.fits) {
    auto [slot, inserted] =
        groupBestMs.try_emplace(groupOf(config), e.candidate.predictedStepMs);
    if (!inserted)
      slot->second = std::min(slot->second, e.candidate.predictedStepMs);
  }
  return e;
}

ModuleOp Tuner::getFront(int64_t chunk, int64_t tiles, int64_t sp, int64_t ep) {
  auto [it, inserted] = fronts.try_emplace({chunk, tiles, sp, ep}, nullptr);
  if (!inserted)
    return it->second;
  OwningOpRef<ModuleOp> module = model.clone();
  PassManager pm(ctx);
  // In zero-pipeline's order.
  if (chunk != 0) {
    ZeroLossChunkPassOptions fuse;
    fuse.chunk = chunk;
    pm.addPass(createZeroLossChunkPass(fuse));
  }
  if (tiles != 0) {
    ZeroTiledMlpPassOptions tiled;
    tiled.tiles = tiles;
    pm.addPass(createZeroTiledMlpPass(tiled));
  }
  if (sp != 1) {
    ZeroSequenceParallelPassOptions seq;
    seq.spSize = sp;
    pm.addPass(createZeroSequenceParallelPass(seq));
  }
  if (ep != 1) {
    ZeroExpertParallelPassOptions experts;
    experts.epSize = ep;
    pm.addPass(createZeroExpertParallelPass(experts));
  }
  pm.addPass(createZeroAutodiffPass());
  pm.addPass(createZeroMixedPrecisionPass());
  // A refusal (a 16-bit step, say) leaves the chunk out of the search.
  ScopedDiagnosticHandler quiet(ctx, [](Diagnostic &) { return success(); });
  if (failed(pm.run(*module)))
    return nullptr;
  it->second = *module;
  ownedFronts.push_back(std::move(module));
  return it->second;
}

SmallVector<int64_t> Tuner::getLossChunks(int64_t accumulation, int64_t tiles,
                                          int64_t sp, int64_t ep) {
  if (options.lossChunk)
    return {*options.lossChunk};
  SmallVector<int64_t> chunks = {0};
  if (!head)
    return chunks;
  // One chunk as large as the micro batch's rows is the whole logits. A
  // rank holds as many rows with sequence parallelism as without: more
  // sequences, each a part.
  int64_t rows = head->rows / (options.worldSize * accumulation);
  int64_t chunk = getDefaultLossChunk(rows, *head);
  if (chunk < rows && getFront(chunk, tiles, sp, ep))
    chunks.push_back(chunk);
  return chunks;
}

SmallVector<int64_t> Tuner::getEpSizes() const {
  if (options.epSize)
    return {*options.epSize};
  SmallVector<int64_t> experts;
  ModuleOp module = model;
  module.walk([&](nn::MoeDispatchOp d) { experts.push_back(d.getExperts()); });
  SmallVector<int64_t> sizes = {1};
  if (experts.empty())
    return sizes;
  for (int64_t p = 2; p <= options.worldSize; ++p)
    if (options.worldSize % p == 0 &&
        llvm::all_of(experts, [&](int64_t e) { return e % p == 0; }))
      sizes.push_back(p);
  return sizes;
}

SmallVector<int64_t> Tuner::getSpSizes() const {
  SmallVector<int64_t> sizes;
  for (int64_t p = 1; p <= options.worldSize; ++p)
    if (options.worldSize % p == 0 &&
        result.globalBatch % (options.worldSize / p) == 0)
      sizes.push_back(p);
  return sizes;
}

int64_t Tuner::getDefaultTiles(int64_t sp) const {
  if (hidden < 1 || seqLen < 1)
    return 0;
  int64_t tiles = llvm::divideCeil(seqLen / sp, hidden);
  return tiles > 1 ? tiles : 0;
}

bool Tuner::anyFits() const {
  return llvm::any_of(memo, [&](const auto &entry) {
    return entry.second.ok() && entry.second.candidate.fits &&
           (!options.offloadActivations ||
            entry.first.offloadActivations == *options.offloadActivations);
  });
}

double Tuner::getPruneMs() const {
  if (static_cast<int64_t>(groupBestMs.size()) < options.top)
    return INFINITY;
  std::vector<double> ms;
  for (const auto &[group, best] : groupBestMs)
    ms.push_back(best);
  std::nth_element(ms.begin(), ms.begin() + (options.top - 1), ms.end());
  return ms[options.top - 1];
}

double Tuner::getBoundMs(const TuneConfig &config) const {
  double ms = getPruneMs();
  auto it = groupBestMs.find(groupOf(config));
  return it == groupBestMs.end() ? ms : std::min(ms, it->second);
}

std::vector<Knob> Tuner::getKnobs(const TuneConfig &base,
                                  const Evaluation &e) const {
  // Bucket sizes from the whole model down by 4x: fewer, larger collectives
  // against smaller bucket buffers.
  std::vector<int64_t> buckets;
  for (int64_t b = base.reduceBucketSize, i = 0; i < 4; ++i, b /= 4)
    buckets.push_back(roundUpNice(std::max<int64_t>(b, 1)));
  std::vector<Knob> knobs;
  knobs.push_back(
      {buckets, [](TuneConfig &c, int64_t v) { c.reduceBucketSize = v; }});
  knobs.push_back(
      {{0, 1}, [](TuneConfig &c, int64_t v) { c.overlapComm = v != 0; }});
  if (base.stage == 1 || base.stage == 2)
    knobs.push_back(
        {buckets, [](TuneConfig &c, int64_t v) { c.allgatherBucketSize = v; }});
  if (base.stage != 3)
    return knobs;

  // Stage 3: windows in units of the largest group G (none, one, two, four
  // groups ahead), and persistence thresholds that change which groups are
  // gathered once per step.
  int64_t g = 1;
  for (int64_t n : e.groupNumels)
    g = std::max(g, n);
  TuneConfig defaults;
  std::vector<int64_t> prefetch = {1, roundUpNice(g), roundUpNice(2.0 * g),
                                   roundUpNice(4.0 * g),
                                   defaults.prefetchBucketSize};
  std::vector<int64_t> live = {roundUpNice(g), roundUpNice(2.0 * g),
                               roundUpNice(4.0 * g),
                               defaults.maxLiveParameters};
  std::vector<int64_t> persistence;
  std::set<int64_t> persistentSets;
  for (int64_t t : {int64_t(0), defaults.paramPersistenceThreshold,
                    int64_t(1000000), roundUpNice(g + 1.0)}) {
    int64_t count =
        llvm::count_if(e.groupNumels, [&](int64_t n) { return n < t; });
    if (persistentSets.insert(count).second)
      persistence.push_back(t);
  }
  knobs.push_back(
      {prefetch, [](TuneConfig &c, int64_t v) { c.prefetchBucketSize = v; }});
  knobs.push_back(
      {live, [](TuneConfig &c, int64_t v) { c.maxLiveParameters = v; }});
  knobs.push_back({persistence, [](TuneConfig &c, int64_t v) {
                     c.paramPersistenceThreshold = v;
                   }});
  // Frozen partitions gathered once per step: one gather instead of one per
  // micro step (or per use), for a buffer held the whole step.
  if (e.frozenGroups)
    knobs.push_back(
        {{0, 1}, [](TuneConfig &c, int64_t v) { c.frozenGatherOnce = v; }});
  return knobs;
}

void Tuner::descend(const TuneConfig &base) {
  TuneConfig current = base;
  const Evaluation *best = &evaluate(current);
  std::vector<Knob> knobs = getKnobs(base, *best);
  result.frozenGatherSearched |= base.stage == 3 && best->frozenGroups;
  for (int pass = 0; pass < 2; ++pass) {
    bool moved = false;
    for (const Knob &knob : knobs) {
      for (int64_t v : knob.values) {
        TuneConfig c = current;
        knob.set(c, v);
        if (c == current)
          continue;
        const Evaluation &e = evaluate(c);
        if (isBetter(e, *best)) {
          current = c;
          best = &e;
          moved = true;
        }
      }
    }
    if (!moved)
      break;
  }
}

LogicalResult Tuner::search(ArrayRef<TuneRemat> remats, ArrayRef<int64_t> sps,
                            ArrayRef<int64_t> tiles, ArrayRef<bool> offloads) {
  int64_t numRemats = remats.size();
  // The remat and activation offload pairs each group tries.
  int64_t numTries = 0;
  for (TuneRemat r : remats)
    for (bool off : offloads)
      numTries += !off || r != TuneRemat::none;

  // Stages whose model states fit; the padded parameter count caps the
  // buckets (one bucket holds the whole model).
  struct Group {
    TuneConfig base;
    const Evaluation *eval;
  };
  std::vector<Group> groups;
  SmallVector<std::pair<int64_t, int64_t>> layouts;
  for (int64_t sp : sps)
    for (int64_t ep : getEpSizes())
      // The schedule refuses expert parallelism beside sequence
      // parallelism.
      if (sp == 1 || ep == 1)
        layouts.push_back({sp, ep});
  for (auto [sp, ep] : layouts) {
    if (options.worldSize % sp != 0 ||
        result.globalBatch % (options.worldSize / sp) != 0)
      continue;
    // A sequence- or expert-parallel size the passes refuse (the step's
    // heads or sequence, the world) is no choice; without one, a refusal
    // is the error.
    bool asked = (sp != 1 && options.spSize) || (ep != 1 && options.epSize);
    bool optional = (sp != 1 || ep != 1) && !asked;
    std::optional<ScopedDiagnosticHandler> quiet;
    if (optional)
      quiet.emplace(ctx, [](Diagnostic &) { return success(); });
    if ((sp != 1 || ep != 1) && !getFront(0, 0, sp, ep))
      continue;
    int64_t perRank = result.globalBatch / (options.worldSize / sp);
    bool refused = false;
    for (int64_t stage = 0; stage <= 3 && !refused; ++stage) {
      for (int64_t mics : getMicsChoices(stage)) {
        // Nor MiCS.
        if (ep != 1 && mics > 0)
          continue;
        auto states = partitionStage(stage, mics, sp, ep);
        if (failed(states)) {
          if (!optional)
            return failure();
          refused = true;
          break;
        }
        auto &[choices, padded] = *states;
        for (const TuneModelStates &s : choices) {
          // MiCS only adds model states: the smallest are without it.
          if (mics == 0 &&
              (!anyStage || s.deviceBytes < result.minModelStates.deviceBytes))
            result.minModelStates = s;
          anyStage = true;
          bool deviceFits = s.deviceBytes <= options.memoryBudget;
          bool hostFits =
              !options.hostBudget || s.hostBytes <= *options.hostBudget;
          if (mics == 0 && deviceFits &&
              (!result.minHostStates ||
               s.hostBytes < result.minHostStates->hostBytes))
            result.minHostStates = s;
          // hpZ's secondary partition and qwZ's and qgZ's staging only add
          // to these states, so the same bound skips them. The schedule
          // refuses hpZ beside expert parallelism.
          SmallVector<TuneConfig> variants;
          for (TuneConfig v : getZeroPPChoices(s.config)) {
            if (ep != 1 && v.hpzPartitionSize > 1)
              continue;
            variants.push_back(v);
          }
          for (int64_t k = 1; k <= std::min(perRank, kMaxAccumulationSteps);
               ++k) {
            if (perRank % k != 0)
              continue;
            for (int64_t tile : tiles) {
              // Skipped groups build no chunked or tiled step.
              if (tile != 0 &&
                  (!deviceFits || !hostFits || !getFront(0, tile, sp, ep)))
                continue;
              SmallVector<int64_t> chunks = deviceFits && hostFits
                                                ? getLossChunks(k, tile, sp, ep)
                                                : SmallVector<int64_t>{0};
              int64_t count =
                  numTries * int64_t(variants.size()) * int64_t(chunks.size());
              result.groups += count;
              if (!deviceFits || !hostFits) {
                result.prunedByModelStates += count;
                continue;
              }
              result.lossChunkSearched |= chunks.size() > 1 || chunks[0] != 0;
              for (const TuneConfig &variant : variants) {
                for (int64_t chunk : chunks) {
                  TuneConfig base = variant;
                  base.accumulationSteps = k;
                  base.remat = remats.front();
                  base.lossChunk = chunk;
                  base.spSize = sp;
                  base.tiledMlp = tile;
                  base.reduceBucketSize = std::min(base.reduceBucketSize,
                                                   roundUpNice(double(padded)));
                  if (stage == 1 || stage == 2)
                    base.allgatherBucketSize = base.reduceBucketSize;
                  groups.push_back({base, nullptr});
                }
              }
            }
          }
        }
      }
    }
  }

  for (Group &g : groups)
    g.eval = &evaluate(g.base);
  if (!groups.empty() &&
      llvm::none_of(groups, [](const Group &g) { return g.eval->ok(); })) {
    TrainStepOp step = *model.getOps<TrainStepOp>().begin();
    return step.emitError("zero-tune: no configuration could be "
                          "scheduled; the first: ")
           << groups.front().eval->error;
  }
  llvm::stable_sort(groups, [](const Group &a, const Group &b) {
    return a.eval->computeBoundMs < b.eval->computeBoundMs;
  });
  for (const Group &g : groups) {
    if (!g.eval->ok())
      continue;
    for (int64_t i = 0; i < numRemats; ++i) {
      TuneConfig base = g.base;
      base.remat = remats[i];
      const Evaluation *e = g.eval;
      if (i > 0) {
        // Recomputation only adds kernels to the compute stream: the bound
        // of the first policy (none) holds for the others, before
        // evaluating them.
        if (g.eval->computeBoundMs >= getBoundMs(base)) {
          result.prunedByBounds += numRemats - i;
          break;
        }
        e = &evaluate(base);
        if (!e->ok())
          continue;
      }
      // Activation offload adds copies, not kernels, beside the policy.
      for (bool off : offloads) {
        if (off && base.remat == TuneRemat::none)
          continue;
        TuneConfig c = base;
        c.offloadActivations = off;
        const Evaluation *ce = off ? &evaluate(c) : e;
        if (!ce->ok())
          continue;
        if (ce->memoryBound > options.memoryBudget ||
            ce->computeBoundMs >= getBoundMs(c)) {
          ++result.prunedByBounds;
          continue;
        }
        descend(c);
      }
    }
  }
  return success();
}

LogicalResult Tuner::run() {
  TrainStepOp step = *fronts[{0, 0, 1, 1}].getOps<TrainStepOp>().begin();
  // Recomputation needs transformer blocks (an MLP has none).
  bool hasBlocks = !getRematBlocks(step).empty();
  SmallVector<TuneRemat> remats = {TuneRemat::none};
  if (options.remat)
    remats = {*options.remat};
  else if (hasBlocks)
    remats.append({TuneRemat::selective, TuneRemat::layer});
  if (remats.front() != TuneRemat::none && !hasBlocks)
    return step.emitError("zero-tune: remat ")
           << getTuneRematName(remats.front())
           << " recomputes transformer blocks, and train step @"
           << step.getSymName()
           << " has none (no parameter group named like transformer.h.N)";
  if (options.offloadActivations.value_or(false) &&
      llvm::none_of(remats, [](TuneRemat r) { return r != TuneRemat::none; }))
    return step.emitError("zero-tune: offload-activations cpu offloads what "
                          "recomputation keeps, and remat is none");

  // The long-context options, off unless given; where nothing fits without
  // them, searched.
  SmallVector<int64_t> sps = {options.spSize.value_or(1)};
  SmallVector<int64_t> tiles = {options.tiledMlp.value_or(0)};
  SmallVector<bool> offloads = {options.offloadActivations.value_or(false)};
  result.longContextSearched = sps[0] != 1 || tiles[0] != 0 || offloads[0];
  if (failed(search(remats, sps, tiles, offloads)))
    return failure();
  // The states in the lower precision asked for, where nothing fits in the
  // step's.
  if (!anyFits() && options.optimizerStates) {
    lowerStates = true;
    result.groups = result.prunedByModelStates = result.prunedByBounds = 0;
    if (failed(search(remats, sps, tiles, offloads)))
      return failure();
  }
  if (!anyFits()) {
    if (!options.spSize)
      sps = getSpSizes();
    if (!options.tiledMlp) {
      std::set<int64_t> counts = {0};
      for (int64_t sp : sps)
        counts.insert(getDefaultTiles(sp));
      tiles.assign(counts.begin(), counts.end());
    }
    if (!options.offloadActivations && hasBlocks)
      offloads = {false, true};
    if (sps != ArrayRef<int64_t>{options.spSize.value_or(1)} ||
        tiles.size() > 1 || offloads.size() > 1) {
      result.longContextSearched = true;
      result.groups = result.prunedByModelStates = result.prunedByBounds = 0;
      if (failed(search(remats, sps, tiles, offloads)))
        return failure();
    }
  }
  if (!anyStage)
    return step.emitError("zero-tune: the global batch ")
           << result.globalBatch << " of train step @" << step.getSymName()
           << " is not divisible by the world size " << options.worldSize
           << ", and no sequence-parallel size that the step allows "
              "divides it into whole rows per data-parallel rank";

  // What each expert-parallel size gave: the receive buffers are planned
  // dropless, so a size none of whose configurations fits is reported.
  if (SmallVector<int64_t> eps = getEpSizes(); eps != ArrayRef<int64_t>{1}) {
    for (int64_t ep : eps) {
      TuneEpSize t;
      t.size = ep;
      for (auto &[config, e] : memo) {
        if (config.epSize != ep || !e.ok())
          continue;
        t.fits |= e.candidate.fits;
        if (t.smallestPeakBytes == 0 ||
            e.candidate.peakBytes < t.smallestPeakBytes)
          t.smallestPeakBytes = e.candidate.peakBytes;
      }
      result.epSizes.push_back(t);
    }
  }

  // The best configuration of each group, and the smallest peak.
  std::map<GroupKey, const Evaluation *> winners;
  const Evaluation *closest = nullptr;
  for (auto &[config, e] : memo) {
    // Activation offload asked for: the configurations without it only
    // bounded those with it.
    if (!e.ok() || (options.offloadActivations &&
                    config.offloadActivations != *options.offloadActivations))
      continue;
    const Evaluation *&winner = winners[groupOf(config)];
    if (e.candidate.fits && (!winner || isBetter(e, *winner)))
      winner = &e;
    if (!closest || isCloser(e.candidate, closest->candidate))
      closest = &e;
  }
  std::vector<const Evaluation *> fitting;
  for (auto &[group, e] : winners)
    if (e)
      fitting.push_back(e);
  llvm::stable_sort(fitting, [](const Evaluation *a, const Evaluation *b) {
    return isBetter(*a, *b);
  });
  if (static_cast<int64_t>(fitting.size()) > options.top)
    fitting.resize(options.top);
  if (fitting.empty()) {
    if (closest)
      result.closest = closest->candidate;
    return success();
  }
  // The validation band of the preset's GPU: a candidate whose predicted
  // step lies within the fastest's band, and the fastest's within its own,
  // cannot be told apart from it by the cost model, so the one with the
  // smallest peak among them goes first. The band around a step p is
  // [minRatio p, maxRatio p]; for a slower candidate the two conditions
  // are p <= maxRatio f and f >= minRatio p.
  if (options.preferSmallerPeakWithinBand)
    result.band = lookupValidationBand(options.hardware->name);
  if (result.band) {
    double fastestMs = fitting.front()->candidate.predictedStepMs;
    auto inBand = [&](const Evaluation *e) {
      double p = e->candidate.predictedStepMs;
      return p <= fastestMs * result.band->maxRatio &&
             p * result.band->minRatio <= fastestMs;
    };
    auto smallest = fitting.begin();
    for (auto it = fitting.begin(); it != fitting.end(); ++it) {
      if (!inBand(*it))
        continue;
      ++result.withinBand;
      if ((*it)->candidate.peakBytes < (*smallest)->candidate.peakBytes)
        smallest = it;
    }
    result.fastestStepMs = fastestMs;
    std::rotate(fitting.begin(), smallest, smallest + 1);
  }
  // The winner is checked by the schedule verifier, as zero-compile will.
  const Evaluation &verified = evaluate(fitting.front()->candidate.config,
                                        /*verify=*/true);
  if (!verified.ok())
    return step.emitError("zero-tune: the best configuration fails the "
                          "schedule verifier: ")
           << verified.error;
  for (const Evaluation *e : fitting)
    result.ranked.push_back(e->candidate);
  return success();
}

FailureOr<TuneResult> mlir::zero::tuneTrainStep(ModuleOp module,
                                                const TuneOptions &options) {
  auto steps = module.getOps<TrainStepOp>();
  if (steps.empty())
    return module.emitError("zero-tune: the module has no zero.train_step");
  if (std::next(steps.begin()) != steps.end())
    return module.emitError("zero-tune: the module has more than one "
                            "zero.train_step");
  TrainStepOp step = *steps.begin();
  // Candidates carry the path in their #zero.offload and the winner's
  // ds_config.json, both UTF-8 only.
  if (failed(::zero::checkUTF8([&] { return module.emitError("zero-tune: "); },
                               "nvme-path ", options.nvmePath,
                               "it goes into ds_config.json's nvme_path")))
    return failure();

  if (options.optimizerStates &&
      !hasOptimizerStatePrecision(step.getOptimizer().getKind(),
                                  *options.optimizerStates))
    return step.emitError("zero-tune: --optimizer-states ")
           << stringifyStatePrecision(*options.optimizerStates)
           << ": optimizer "
           << stringifyOptimizerKind(step.getOptimizer().getKind())
           << " has no " << stringifyStatePrecision(*options.optimizerStates)
           << " states";

  TuneResult result;
  if (step.getBodyBlock().getNumArguments() != 0)
    result.globalBatch =
        cast<RankedTensorType>(step.getBodyBlock().getArgument(0).getType())
            .getDimSize(0);
  // Sequence parallelism divides the batch over fewer ranks, the world
  // over each group's; without attention there is none.
  bool hasAttention = false;
  step.walk([&](Operation *op) {
    hasAttention |= op->hasTrait<nn::OpTrait::Attention>();
  });
  int64_t dataParallel = options.worldSize / options.spSize.value_or(1);
  if (result.globalBatch < 1 || (result.globalBatch % dataParallel != 0 &&
                                 (options.spSize || !hasAttention)))
    return step.emitError("zero-tune: the global batch ")
           << result.globalBatch << " of train step @" << step.getSymName()
           << " is not divisible by the world size " << options.worldSize
           << (options.spSize.value_or(1) > 1
                   ? " / sp-size " + std::to_string(*options.spSize)
                   : "");
  step.walk([&](LossOpInterface loss) {
    result.tokensPerStep += loss.getLabels().getType().getNumElements();
  });
  if (result.tokensPerStep == 0)
    result.tokensPerStep = result.globalBatch;

  // Autodiff and mixed precision once, for every candidate.
  OwningOpRef<ModuleOp> front = module.clone();
  PassManager pm(module.getContext());
  pm.addPass(createZeroAutodiffPass());
  pm.addPass(createZeroMixedPrecisionPass());
  if (failed(pm.run(*front)))
    return failure();

  // The head zero-loss-chunk would fuse, when the search may chunk the loss;
  // a chunk asked for must apply, and its refusal is the error.
  std::optional<LossHead> head;
  if (options.lossChunk) {
    OwningOpRef<ModuleOp> probe = module.clone();
    PassManager fuse(module.getContext());
    ZeroLossChunkPassOptions chunk;
    chunk.chunk = *options.lossChunk;
    fuse.addPass(createZeroLossChunkPass(chunk));
    fuse.addPass(createZeroAutodiffPass());
    fuse.addPass(createZeroMixedPrecisionPass());
    if (*options.lossChunk != 0 && failed(fuse.run(*probe)))
      return failure();
  }
  // The hidden size, which the MLP tiles are counted by, is the head's.
  int64_t hidden = 0;
  {
    ScopedDiagnosticHandler quiet(module.getContext(),
                                  [](Diagnostic &) { return success(); });
    if (FailureOr<LossHead> h = matchLossHead(step); succeeded(h)) {
      hidden = h->hidden;
      if (!options.lossChunk)
        head = *h;
    }
  }
  if (options.spSize.value_or(1) > 1 && options.epSize.value_or(1) > 1)
    return step.emitError("zero-tune: ep-size ")
           << *options.epSize << " excludes sp-size " << *options.spSize
           << " (the schedule does not combine expert and sequence "
              "parallelism)";
  // The tiles and the sequence- and expert-parallel sizes asked for must
  // apply, and their refusal is the error.
  if (options.tiledMlp.value_or(0) != 0 || options.spSize.value_or(1) != 1 ||
      options.epSize.value_or(1) != 1) {
    OwningOpRef<ModuleOp> probe = module.clone();
    PassManager passes(module.getContext());
    if (options.tiledMlp.value_or(0) != 0) {
      ZeroTiledMlpPassOptions tiled;
      tiled.tiles = *options.tiledMlp;
      passes.addPass(createZeroTiledMlpPass(tiled));
    }
    if (options.spSize.value_or(1) != 1) {
      ZeroSequenceParallelPassOptions seq;
      seq.spSize = *options.spSize;
      passes.addPass(createZeroSequenceParallelPass(seq));
    }
    if (options.epSize.value_or(1) != 1) {
      ZeroExpertParallelPassOptions experts;
      experts.epSize = *options.epSize;
      passes.addPass(createZeroExpertParallelPass(experts));
    }
    if (failed(passes.run(*probe)))
      return failure();
  }
  int64_t seqLen = 0;
  if (step.getBodyBlock().getNumArguments() != 0) {
    auto type =
        cast<RankedTensorType>(step.getBodyBlock().getArgument(0).getType());
    if (type.getRank() >= 2)
      seqLen = type.getDimSize(1);
  }

  Tuner tuner(module, *front, head, hidden, seqLen, options, result);
  if (failed(tuner.run()))
    return failure();
  return result;
}

llvm::json::Value mlir::zero::toDeepSpeedConfig(const TuneConfig &c,
                                                int64_t globalBatch,
                                                int64_t worldSize) {
  using namespace dskeys;
  // DeepSpeed's batch arithmetic counts data-parallel ranks.
  llvm::json::Object config{
      {kTrainBatchSize, globalBatch},
      {kTrainMicroBatchSizePerGpu,
       globalBatch / (worldSize / c.spSize * c.accumulationSteps)},
      {kGradientAccumulationSteps, c.accumulationSteps},
  };
  // DeepSpeed's key, only when on; the tiles are this project's.
  if (c.spSize > 1)
    config[kSequenceParallelSize] = c.spSize;
  // DeepSpeed AutoEP's section, only when on.
  if (c.epSize > 1)
    config[kExpertParallel] = llvm::json::Object{{kExpertParallelEnabled, true},
                                                 {kAutoepSize, c.epSize}};
  if (c.tiledMlp > 0)
    config[kTiledMlp] = c.tiledMlp;
  // DeepSpeed's section, every block (no number_checkpoints), with the
  // granularity Megatron-LM calls --recompute-granularity full|selective.
  // This project's key, only when on.
  if (c.lossChunk > 0)
    config[kLossChunk] = c.lossChunk;
  if (c.optimizerStates)
    config[kOptimizerStates] = stringifyStatePrecision(*c.optimizerStates);
  if (c.remat != TuneRemat::none) {
    llvm::json::Object checkpointing{
        {kRecomputeGranularity, c.remat == TuneRemat::layer
                                    ? kGranularityFull
                                    : kGranularitySelective}};
    // DeepSpeed's checkpoints in host memory (over a model-parallel group
    // of one rank here): zero-offload-activations of what remat keeps.
    if (c.offloadActivations) {
      checkpointing[kPartitionActivations] = true;
      checkpointing[kCpuCheckpointing] = true;
    }
    config[kActivationCheckpointing] = std::move(checkpointing);
  }
  llvm::json::Object zero{
      {kStage, c.stage},
      {kReduceBucketSize, c.reduceBucketSize},
      {kOverlapComm, c.overlapComm},
      // The passes' defaults, which every candidate keeps.
      {kReduceScatter, ZeroGradSyncPassOptions().reduceScatter},
      {kContiguousGradients, ZeroGradSyncPassOptions().contiguousGradients},
  };
  if (c.stage == 1 || c.stage == 2)
    zero[kAllgatherBucketSize] = c.allgatherBucketSize;
  if (c.stage == 3) {
    zero[kPrefetchBucketSize] = c.prefetchBucketSize;
    zero[kMaxLiveParameters] = c.maxLiveParameters;
    zero[kParamPersistenceThreshold] = c.paramPersistenceThreshold;
    // This project's key (DeepSpeed has none); absent means per-use.
    if (c.frozenGatherOnce)
      zero[kFrozenGather] = "once";
    // ZeRO++ and MiCS, only when on.
    if (c.hpzPartitionSize > 1)
      zero[kHpzPartitionSize] = c.hpzPartitionSize;
    if (c.micsShardSize > 0)
      zero[kMicsShardSize] = c.micsShardSize;
    if (c.quantizedWeights)
      zero[kQuantizedWeights] = true;
    if (c.quantizedGradients)
      zero[kQuantizedGradients] = true;
  }
  // DeepSpeed's sections; host buffers are always pinned here.
  auto offload = [&](StringRef key, OffloadDevice device) {
    if (device == OffloadDevice::none)
      return;
    llvm::json::Object section{{kDevice, stringifyOffloadDevice(device)},
                               {kPinMemory, true}};
    // UTF-8: tuneTrainStep refuses another path.
    if (device == OffloadDevice::nvme)
      section[kNvmePath] = c.nvmePath;
    zero[key] = std::move(section);
  };
  offload(kOffloadOptimizer, c.offloadOptimizer);
  offload(kOffloadParam, c.offloadParam);
  config[kZeroOptimization] = std::move(zero);
  return config;
}
