//===- DeepSpeedKeys.h - The keys of a ds_config file -----------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// The spelling of each ds_config key that zero-pipeline's reader
// (DeepSpeedConfig.cpp) and zero-tune's writer (toDeepSpeedConfig) share,
// so that what zero-tune writes is what zero-pipeline reads back. Grouped by
// the section that holds them.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_PIPELINES_DEEPSPEEDKEYS_H
#define ZERO_PIPELINES_DEEPSPEEDKEYS_H

#include "llvm/ADT/StringRef.h"

namespace mlir::zero::dskeys {

// The top level.
inline constexpr llvm::StringLiteral kTrainBatchSize = "train_batch_size";
inline constexpr llvm::StringLiteral kTrainMicroBatchSizePerGpu =
    "train_micro_batch_size_per_gpu";
inline constexpr llvm::StringLiteral kGradientAccumulationSteps =
    "gradient_accumulation_steps";
inline constexpr llvm::StringLiteral kZeroOptimization = "zero_optimization";
/// Ulysses' sequence-parallel group size (DeepSpeed's engine reads it at the
/// top level).
inline constexpr llvm::StringLiteral kSequenceParallelSize =
    "sequence_parallel_size";
/// DeepSpeed AutoEP's section: `enabled` and `autoep_size`, the ranks that
/// split each MoE layer's experts.
inline constexpr llvm::StringLiteral kExpertParallel = "expert_parallel";
inline constexpr llvm::StringLiteral kExpertParallelEnabled = "enabled";
inline constexpr llvm::StringLiteral kAutoepSize = "autoep_size";
/// This project's key in that section: where the expert sets lie,
/// "contiguous" (P consecutive ranks, DeepSpeed's default E + D) or
/// "strided" (world / P apart, DeepSpeed's D + E).
inline constexpr llvm::StringLiteral kExpertPlacement = "placement";
/// DeepSpeed's top-level switch to the D + E topology: true is "strided".
inline constexpr llvm::StringLiteral kUseDataBeforeExpertParallel =
    "use_data_before_expert_parallel_";
inline constexpr llvm::StringLiteral kActivationCheckpointing =
    "activation_checkpointing";
/// This project's key (DeepSpeed has none): zero-loss-chunk's rows per
/// chunk, 0 for off.
inline constexpr llvm::StringLiteral kLossChunk = "zero_mlir_loss_chunk";
/// This project's key (DeepSpeed has none): zero-tiled-mlp's tiles per MLP,
/// 0 for off.
inline constexpr llvm::StringLiteral kTiledMlp = "zero_mlir_tiled_mlp";
/// This project's key (DeepSpeed has none for 8-bit states): zero-optimizer's
/// optimizer-states, the precision of the optimizer's states.
inline constexpr llvm::StringLiteral kOptimizerStates =
    "zero_mlir_optimizer_states";

// activation_checkpointing: Megatron-LM's granularity, "full" (zero-remat's
// layer policy) or "selective".
inline constexpr llvm::StringLiteral kRecomputeGranularity =
    "recompute_granularity";
inline constexpr llvm::StringLiteral kGranularityFull = "full";
inline constexpr llvm::StringLiteral kGranularitySelective = "selective";
/// Both true: the checkpoints wait in host memory.
inline constexpr llvm::StringLiteral kPartitionActivations =
    "partition_activations";
inline constexpr llvm::StringLiteral kCpuCheckpointing = "cpu_checkpointing";

// zero_optimization.
inline constexpr llvm::StringLiteral kStage = "stage";
inline constexpr llvm::StringLiteral kReduceBucketSize = "reduce_bucket_size";
inline constexpr llvm::StringLiteral kAllgatherBucketSize =
    "allgather_bucket_size";
inline constexpr llvm::StringLiteral kReduceScatter = "reduce_scatter";
inline constexpr llvm::StringLiteral kOverlapComm = "overlap_comm";
inline constexpr llvm::StringLiteral kContiguousGradients =
    "contiguous_gradients";
inline constexpr llvm::StringLiteral kPrefetchBucketSize =
    "stage3_prefetch_bucket_size";
inline constexpr llvm::StringLiteral kMaxLiveParameters =
    "stage3_max_live_parameters";
inline constexpr llvm::StringLiteral kMaxReuseDistance =
    "stage3_max_reuse_distance";
inline constexpr llvm::StringLiteral kParamPersistenceThreshold =
    "stage3_param_persistence_threshold";
inline constexpr llvm::StringLiteral kHpzPartitionSize =
    "zero_hpz_partition_size";
inline constexpr llvm::StringLiteral kMicsShardSize = "mics_shard_size";
inline constexpr llvm::StringLiteral kQuantizedWeights =
    "zero_quantized_weights";
inline constexpr llvm::StringLiteral kQuantizedGradients =
    "zero_quantized_gradients";
/// This project's key (DeepSpeed has none): "per-use" or "once".
inline constexpr llvm::StringLiteral kFrozenGather = "zero_mlir_frozen_gather";
inline constexpr llvm::StringLiteral kOffloadOptimizer = "offload_optimizer";
inline constexpr llvm::StringLiteral kOffloadParam = "offload_param";

// offload_optimizer and offload_param.
inline constexpr llvm::StringLiteral kDevice = "device";
inline constexpr llvm::StringLiteral kNvmePath = "nvme_path";
inline constexpr llvm::StringLiteral kPinMemory = "pin_memory";
inline constexpr llvm::StringLiteral kBufferCount = "buffer_count";
inline constexpr llvm::StringLiteral kBufferSize = "buffer_size";

} // namespace mlir::zero::dskeys

#endif // ZERO_PIPELINES_DEEPSPEEDKEYS_H
