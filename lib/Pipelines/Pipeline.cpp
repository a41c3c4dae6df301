//===- Pipeline.cpp - The zero-pipeline pass pipeline ---------------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//
//
// Without a config, zero-pipeline is its passes with the options given.
// With one, the first pass reads the train steps, resolves what the file
// leaves to the model ("auto", the batch arithmetic), writes the optimizer
// and precision into the steps and then runs the passes with the resolved
// options: bucket sizes may depend on the model's hidden size
// (ApplyDeepSpeedConfig.cpp).
//
//===----------------------------------------------------------------------===//

#include "zero/Pipelines/Pipeline.h"
#include "zero/Dialect/Zero/Analysis/Passes.h"
#include "zero/Dialect/Zero/Transforms/Passes.h"

#include "PipelineDetail.h"

using namespace mlir;
using namespace mlir::zero;
using namespace mlir::zero::pipeline;

/// The rows the cuda target pads a 16-bit step's vocabulary to a multiple
/// of, unless pad-vocab is given.
static constexpr int64_t kCudaVocabMultiple = 64;

static SmallVector<int64_t> blockRange(int64_t begin, int64_t end) {
  SmallVector<int64_t> blocks;
  for (int64_t b = begin; b < end; ++b)
    blocks.push_back(b);
  return blocks;
}

void mlir::zero::addPadVocabPass(OpPassManager &pm,
                                 const ZeroPipelineOptions &o) {
  if (o.padVocab != 0) {
    ZeroPadVocabPassOptions pad;
    pad.multiple = o.padVocab;
    pm.addPass(createZeroPadVocabPass(pad));
  } else if (!o.padVocab.hasValue() && o.target == "cuda" && o.lossChunk == 0) {
    // Where padding pays: cuBLASLt runs a 16-bit GEMM whose leading
    // dimension is not a multiple of 8 on slow unaligned kernels, and 64
    // rows keep the head's tiles whole. A chunked loss takes no padding.
    ZeroPadVocabPassOptions pad;
    pad.multiple = kCudaVocabMultiple;
    pad.only16Bit = true;
    pad.dtype = o.dtype;
    pm.addPass(createZeroPadVocabPass(pad));
  }
}

/// zero-remat as `remat` says, then partition, gradient sync, the mean over
/// valid labels, gathers, prefetch (stage 3) and the optimizer.
static void addZeroPasses(OpPassManager &pm, const ZeroPipelineOptions &o,
                          const RematChoice &remat) {
  if (remat.layerBlocks > 0) {
    ZeroRematPassOptions r;
    r.policy = "layer";
    r.blocks = blockRange(0, remat.layerBlocks);
    pm.addPass(createZeroRematPass(r));
  }
  if (remat.selectiveBlocks > 0) {
    ZeroRematPassOptions r;
    r.policy = "selective";
    r.blocks = blockRange(remat.layerBlocks,
                          remat.layerBlocks + remat.selectiveBlocks);
    pm.addPass(createZeroRematPass(r));
  }
  if (remat.opBlocks > 0) {
    ZeroRematPassOptions r;
    r.policy = "op";
    int64_t begin = remat.layerBlocks + remat.selectiveBlocks;
    r.blocks = blockRange(begin, begin + remat.opBlocks);
    pm.addPass(createZeroRematPass(r));
  }
  pm.addPass(createZeroPartitionPass(o.getZeroPartitionPassOptions()));
  pm.addPass(createZeroGradSyncPass(o.getZeroGradSyncPassOptions()));
  pm.addPass(createZeroTokenMeanPass());
  pm.addPass(createZeroMoeAuxCountsPass());
  pm.addPass(createZeroParamGatherPass(o.getZeroParamGatherPassOptions()));
  if (o.stage == 3)
    pm.addPass(createZeroPrefetchPass(o.getZeroPrefetchPassOptions()));
  pm.addPass(createZeroOptimizerPass(o.getZeroOptimizerPassOptions()));
  if (o.offloadActivations != "none") {
    ZeroOffloadActivationsPassOptions a;
    a.device = o.offloadActivations;
    a.budget = o.memoryBudget;
    pm.addPass(createZeroOffloadActivationsPass(a));
  }
}

/// The passes after mixed precision, what the ZeRO options decide:
/// zero-remat (on the first `rematBlocks` blocks, when given) and partition to
/// optimizer, or the memory-budget search over them, then the verifier.
static void addSchedulePasses(OpPassManager &pm, const ZeroPipelineOptions &o,
                              std::optional<int64_t> rematBlocks) {
  if (!o.memoryBudget.empty() || o.remat == "auto") {
    pm.addPass(createFitMemoryBudgetPass(o, rematBlocks, addZeroPasses));
  } else {
    if (o.remat != "none") {
      ZeroRematPassOptions r;
      r.policy = o.remat;
      if (rematBlocks)
        r.firstBlocks = *rematBlocks;
      pm.addPass(createZeroRematPass(r));
    }
    addZeroPasses(pm, o, RematChoice());
  }
  if (o.verify)
    pm.addPass(createZeroVerifySchedulePass());
}

/// zero-pipeline's passes with the options `o` (a ds_config's, once
/// resolved): zero-pad-vocab, zero-loss-chunk, zero-tiled-mlp, autodiff,
/// mixed precision, the bias fusion and the schedule.
static void addPasses(OpPassManager &pm, const ZeroPipelineOptions &o,
                      std::optional<int64_t> rematBlocks) {
  // Under a budget, the loss is chunked when no plan fits without it (the
  // pass runs this function again with loss-chunk given).
  if (!o.memoryBudget.empty() && !o.lossChunk.hasValue()) {
    pm.addPass(createFitLossChunkPass(o, rematBlocks, addPasses));
    return;
  }
  addPadVocabPass(pm, o);
  // A negative chunk is refused by the pass.
  if (o.lossChunk != 0) {
    ZeroLossChunkPassOptions chunk;
    chunk.chunk = o.lossChunk;
    pm.addPass(createZeroLossChunkPass(chunk));
  }
  // So is a negative tile count.
  if (o.tiledMlp != 0) {
    ZeroTiledMlpPassOptions tiled;
    tiled.tiles = o.tiledMlp;
    pm.addPass(createZeroTiledMlpPass(tiled));
  }
  // zero-partition reads the same option (the batch over world / sp-size).
  if (o.spSize != 1) {
    ZeroSequenceParallelPassOptions sp;
    sp.spSize = o.spSize;
    pm.addPass(createZeroSequenceParallelPass(sp));
  }
  // zero-partition reads ep-size too (expert partitions over world /
  // ep-size ranks); the pass refuses the MoE options without it.
  if (o.epSize != 1 || o.moeCapacityFactor != 0.0 || o.moeDropTokens) {
    ZeroExpertParallelPassOptions ep;
    ep.epSize = o.epSize;
    ep.capacityFactor = o.moeCapacityFactor;
    ep.dropTokens = o.moeDropTokens;
    pm.addPass(createZeroExpertParallelPass(ep));
  }
  pm.addPass(createZeroAutodiffPass());
  pm.addPass(
      createZeroMixedPrecisionPass(o.getZeroMixedPrecisionPassOptions()));
  if (o.fuseBiasActivation)
    pm.addPass(createZeroFuseBiasActivationPass());
  addSchedulePasses(pm, o, rematBlocks);
}

void mlir::zero::buildZeroPipeline(OpPassManager &pm,
                                   const ZeroPipelineOptions &o) {
  // Keeping the global batch needs the train step's batch, and
  // muon-group-layers the step's optimizer: the config's pass resolves
  // them, with an empty config when none is given.
  // The config's pass also checks the options that need the module to
  // report on (an unknown target).
  if (o.config.empty() && o.elasticMicroBatch == 0 &&
      !o.muonGroupLayers.hasValue() && isKnownTarget(o.target))
    return addPasses(pm, o, /*rematBlocks=*/std::nullopt);
  pm.addPass(createApplyDeepSpeedConfigPass(o, addPasses));
}

void mlir::zero::buildZeroSchedulePipeline(OpPassManager &pm,
                                           const ZeroPipelineOptions &o) {
  addSchedulePasses(pm, o, /*rematBlocks=*/std::nullopt);
}
