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

#include "Search.h"

#include "zero/Dialect/NN/IR/NNDialect.h"
#include "zero/Dialect/Zero/IR/Optimizers.h"
#include "zero/Dialect/Zero/Transforms/Passes.h"
#include "zero/Dialect/Zero/Transforms/Remat.h"
#include "zero/Pipelines/Pipeline.h"
#include "zero/Support/UTF8.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <map>
#include <set>

using namespace mlir;
using namespace mlir::zero;
using namespace mlir::zero::tuning;

/// Whether a world of `world` ranks has a mesh of hpZ groups of `hpz`
/// (1: none), MiCS groups of `mics` (0: none) and sequence-parallel groups
/// of `sp`: whether they nest, one of each two holding the other.
static bool nests(int64_t world, int64_t hpz, int64_t mics, int64_t sp) {
  zrt_mesh mesh;
  return zrt_mesh_from_sizes(&mesh, world, hpz, mics, sp, 1,
                             ZRT_EXPERT_CONTIGUOUS) == 0;
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
        // Nor MiCS, nor MiCS groups that do not nest with the
        // sequence-parallel groups (no mesh holds both).
        if (ep != 1 && mics > 0)
          continue;
        if (!nests(options.worldSize, /*hpz=*/1, mics, sp))
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
            if (!nests(options.worldSize, v.hpzPartitionSize, mics, sp))
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

  // Autodiff and mixed precision once, for every candidate (after the
  // target's vocabulary padding, as zero-pipeline).
  OwningOpRef<ModuleOp> front = module.clone();
  PassManager pm(module.getContext());
  ZeroPipelineOptions padding;
  padding.target = options.target;
  addPadVocabPass(pm, padding);
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
