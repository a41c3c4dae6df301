//===- Config.h - One configuration of the tuner ----------------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// The zero-pipeline options zero-tune searches (TuneConfig), as pipeline
// options and as the ds_config that sets them.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_TUNING_CONFIG_H
#define ZERO_TUNING_CONFIG_H

#include "zero/Dialect/Zero/IR/ZeroDialect.h"
#include "zero/Pipelines/PipelineOptions.h"

#include "llvm/Support/JSON.h"

#include <optional>
#include <string>
#include <tuple>

namespace mlir::zero {

/// zero-remat's policies on every transformer block, cheapest first: what
/// zero-tune searches (remat=auto's finer mixes are the memory-budget
/// search's, which a configuration of the tuner does not need).
enum class TuneRemat { none, selective, layer };

/// The zero-pipeline `remat` value of `r`.
llvm::StringRef getTuneRematName(TuneRemat r);
/// The policy named `name` (none, selective or layer), if any.
std::optional<TuneRemat> parseTuneRemat(llvm::StringRef name);

/// The zero-pipeline options zero-tune searches; the others keep their
/// defaults. Fields a stage does not use hold their defaults, the passes'.
struct TuneConfig {
  int64_t stage = ZeroPartitionPassOptions().stage;
  int64_t accumulationSteps =
      ZeroGradSyncPassOptions().gradientAccumulationSteps;
  int64_t reduceBucketSize = ZeroGradSyncPassOptions().reduceBucketSize;
  bool overlapComm = ZeroGradSyncPassOptions().overlapComm;
  /// Stages 1-2: the post-step all-gathers.
  int64_t allgatherBucketSize =
      ZeroParamGatherPassOptions().allgatherBucketSize;
  /// Stage 3: the prefetch window, the live gathered elements and the
  /// groups gathered once per step.
  int64_t prefetchBucketSize = ZeroPrefetchPassOptions().prefetchBucketSize;
  int64_t maxLiveParameters = ZeroPrefetchPassOptions().maxLiveParameters;
  int64_t paramPersistenceThreshold =
      ZeroParamGatherPassOptions().paramPersistenceThreshold;
  /// Stage 3: frozen partitions gathered once per optimizer step and kept
  /// across its micro steps (frozen-gather=once) instead of around their
  /// uses.
  bool frozenGatherOnce = false;
  /// Activation recomputation on every block.
  TuneRemat remat = TuneRemat::none;
  /// zero-loss-chunk's rows per chunk of the fused output projection and
  /// loss (0: the logits whole).
  int64_t lossChunk = 0;
  /// Ulysses sequence parallelism: the ranks of a sequence-parallel group,
  /// which read the same rows (1: off).
  int64_t spSize = 1;
  /// zero-tiled-mlp's tiles of rows per MLP (0: off).
  int64_t tiledMlp = 0;
  /// What recomputation keeps waits in pinned host memory between forward
  /// and backward (zero-offload-activations=cpu; only beside a remat
  /// policy, as DeepSpeed's cpu_checkpointing).
  bool offloadActivations = false;
  /// Where the optimizer states (stages 1-3) and the parameter shards
  /// (stage 3) live, and the directory of their NVMe swap files (set only
  /// with either on nvme; the two files' names differ).
  OffloadDevice offloadOptimizer = OffloadDevice::none;
  OffloadDevice offloadParam = OffloadDevice::none;
  std::string nvmePath;
  /// Stage 3, ZeRO++ and MiCS (searched with TuneOptions::zeropp): the
  /// ranks of the hpZ secondary partition (1: none), the MiCS shard group
  /// (0: none), whether the gathers move INT8 weights (qwZ) and whether
  /// the gradient reduce-scatters are INT4 all-to-alls (qgZ).
  int64_t hpzPartitionSize = ZeroPartitionPassOptions().hpzPartitionSize;
  int64_t micsShardSize = ZeroPartitionPassOptions().micsShardSize;
  bool quantizedWeights = ZeroParamGatherPassOptions().quantizedWeights;
  bool quantizedGradients = ZeroGradSyncPassOptions().quantizedGradients;
  /// The precision of the optimizer's states (zero-optimizer's
  /// optimizer-states; unset: the train step's).
  std::optional<StatePrecision> optimizerStates;
  /// Expert parallelism: the ranks that split each MoE layer's experts
  /// (zero-expert-parallel; 1: off). Its receive buffers are dropless.
  int64_t epSize = 1;

  /// Whether the optimizer states or the parameter shards are on NVMe.
  bool isOnNvme() const {
    return offloadOptimizer == OffloadDevice::nvme ||
           offloadParam == OffloadDevice::nvme;
  }
  /// Whether anything is offloaded.
  bool isOffloaded() const {
    return offloadOptimizer != OffloadDevice::none ||
           offloadParam != OffloadDevice::none;
  }

  /// Whether any ZeRO++ or MiCS option is on.
  bool isZeroPP() const {
    return hpzPartitionSize > 1 || micsShardSize > 0 || quantizedWeights ||
           quantizedGradients;
  }

  /// Sets the corresponding options (not the world size).
  void applyTo(ZeroPipelineOptions &options) const;

  auto key() const {
    return std::make_tuple(
        stage, accumulationSteps, offloadOptimizer, offloadParam, remat,
        lossChunk, spSize, tiledMlp, offloadActivations, reduceBucketSize,
        overlapComm, allgatherBucketSize, prefetchBucketSize, maxLiveParameters,
        paramPersistenceThreshold, frozenGatherOnce, hpzPartitionSize,
        micsShardSize, quantizedWeights, quantizedGradients, optimizerStates,
        epSize);
  }
  bool operator<(const TuneConfig &o) const { return key() < o.key(); }
  bool operator==(const TuneConfig &o) const { return key() == o.key(); }
};

/// The DeepSpeed ds_config.json from which zero-pipeline (with the world
/// size) builds `config`'s schedule for a step of `globalBatch`.
llvm::json::Value toDeepSpeedConfig(const TuneConfig &config,
                                    int64_t globalBatch, int64_t worldSize);

} // namespace mlir::zero

#endif // ZERO_TUNING_CONFIG_H
