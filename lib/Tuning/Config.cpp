//===- Config.cpp - One configuration of the tuner ------------------------===//
//
// Part of the zero-mlir project.
//
// A TuneConfig as zero-pipeline's options and as the DeepSpeed ds_config
// that sets the same options.
//
//===----------------------------------------------------------------------===//

#include "zero/Tuning/Config.h"

#include "zero/Pipelines/DeepSpeedKeys.h"

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
