//===- DeepSpeedConfig.h - Reading DeepSpeed ds_config files ----*- C++ -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//
//
// The keys of a DeepSpeed ds_config file that zero-pipeline's `config`
// reads, each with its place in the file; zero-pipeline resolves them
// against the train steps.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_PIPELINES_DEEPSPEEDCONFIG_H
#define ZERO_PIPELINES_DEEPSPEEDCONFIG_H

#include "mlir/Support/LLVM.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mlir::zero {

/// One value of a ds_config file: absent, "auto" (resolved by zero-pipeline
/// as Hugging Face's integration resolves it) or set, with the place of its
/// value in the file (1-based line and column; 0 when absent).
template <typename T>
struct DeepSpeedValue {
  std::optional<T> value;
  bool isAuto = false;
  unsigned line = 0, column = 0;

  bool given() const { return value.has_value() || isAuto; }
};

/// The keys of a DeepSpeed ds_config file that zero-mlir understands.
struct DeepSpeedConfig {
  /// A problem at line:col of the file (0:0: the file as a whole).
  struct Diagnostic {
    unsigned line = 0, column = 0;
    std::string message;
  };

  std::string path;
  /// Problems found while reading; reported by the pipeline as diagnostics.
  std::vector<Diagnostic> errors, warnings;
  /// Keys read but not implemented here, listed in one warning.
  std::vector<std::string> unimplemented;

  DeepSpeedValue<int64_t> stage, reduceBucketSize, allgatherBucketSize,
      prefetchBucketSize, maxLiveParameters, maxReuseDistance,
      paramPersistenceThreshold, gradientAccumulationSteps, trainBatchSize,
      trainMicroBatchSizePerGpu, hpzPartitionSize, sequenceParallelSize;
  /// expert_parallel.autoep_size when expert_parallel.enabled is true.
  DeepSpeedValue<int64_t> expertParallelSize;
  /// expert_parallel.placement (or use_data_before_expert_parallel_ true:
  /// "strided") when expert_parallel.enabled is true.
  DeepSpeedValue<std::string> expertPlacement;
  DeepSpeedValue<bool> reduceScatter, overlapComm, contiguousGradients;
  /// fp16.enabled and bf16.enabled (or the old section name bfloat16).
  DeepSpeedValue<bool> fp16, bf16;
  DeepSpeedValue<int64_t> initialScalePower, lossScaleWindow, hysteresis;
  /// fp16.loss_scale: 0 is DeepSpeed's dynamic scaler, > 0 a static scale.
  DeepSpeedValue<double> minLossScale, lossScale;
  /// The compiler's OptimizerKind name of optimizer.type (optimizers.def):
  /// DeepSpeed's `Adam` is `adamw` unless `adam_w_mode` is false. At the
  /// place of optimizer.type.
  DeepSpeedValue<std::string> optimizer;
  /// betas is one value: both halves are "auto" or neither.
  DeepSpeedValue<double> lr, beta1, beta2, eps, weightDecay, gradientClipping;
  DeepSpeedValue<bool> biasCorrection;
  /// SGD's (torch.optim.SGD's keywords).
  DeepSpeedValue<double> momentum, dampening;
  DeepSpeedValue<bool> nesterov;
  /// DeepSpeed's Muon: `muon_lr` and `adam_lr` (each its half's lr, over
  /// the shared `lr`) and `momentum` (Muon's).
  DeepSpeedValue<double> muonLr, adamLr, muonMomentum;
  /// torch.optim.Adafactor's keywords: `beta2_decay`, `eps` (a pair whose
  /// first may be null, torch's None: -1 here), `d` and `maximize`.
  DeepSpeedValue<double> beta2Decay, eps1, eps2, d;
  DeepSpeedValue<bool> maximize;
  /// The values of the optimizer's other ZRT_OPTIMIZER_PARAM rows whose
  /// key is a plain name, read by their row's type (a number, or a boolean
  /// for a Bool row), by #zero.optimizer parameter name.
  std::vector<std::pair<std::string, DeepSpeedValue<double>>> hyperParams;
  /// zero_allow_untested_optimizer: DeepSpeed's leave for a torch.optim
  /// optimizer (SGD) at stages 1-3.
  DeepSpeedValue<bool> allowUntestedOptimizer;
  /// Whether optimizer.type is a torch.optim class (optimizers.def's
  /// ZRT_OPTIMIZER_TORCH_TYPE), not one of DeepSpeed's.
  bool optimizerIsTorch = false;
  /// optimizer.type as the file spells it.
  std::string optimizerType;
  /// The `scheduler` section: its type, and each of its params as text (a
  /// number as DeepSpeed prints it, true/false or a word; "auto" is
  /// isAuto), with their places; resolved by the pipeline against the train
  /// step and read by buildLrSchedule, which knows each type's parameters.
  DeepSpeedValue<std::string> schedulerType;
  struct SchedulerParam {
    std::string name;
    DeepSpeedValue<std::string> value;
  };
  std::vector<SchedulerParam> schedulerParams;
  /// Logging: the progress-line interval and per-step timing.
  DeepSpeedValue<int64_t> stepsPerPrint;
  DeepSpeedValue<bool> wallClockBreakdown;
  /// activation_checkpointing: "layer" when present (each checkpointed
  /// transformer layer keeps only its input), or "selective" with
  /// recompute_granularity "selective"; number_checkpoints limits it to the
  /// first N blocks.
  std::optional<std::string> remat;
  DeepSpeedValue<int64_t> rematBlocks;
  /// activation_checkpointing: "cpu" when partition_activations and
  /// cpu_checkpointing are both on (the checkpoints in host memory).
  DeepSpeedValue<std::string> offloadActivations;
  /// zero_optimization.offload_optimizer.device and offload_param.device
  /// ("none", "cpu" or "nvme"; the older cpu_offload and cpu_offload_params
  /// booleans set "cpu") at the place of the key that chose them, and the
  /// nvme_path that goes with them.
  DeepSpeedValue<std::string> offloadOptimizer, offloadParam, nvmePath;
  /// offload_optimizer.buffer_count: the swap buffers of an optimizer on
  /// nvme.
  DeepSpeedValue<int64_t> optimizerBufferCount;
  /// offload_param's nvme_path, buffer_count and buffer_size: the
  /// parameter swap files' directory and swap buffers.
  DeepSpeedValue<std::string> paramNvmePath;
  DeepSpeedValue<int64_t> paramBufferCount, paramBufferSize;
  /// zero_optimization.zero_mlir_frozen_gather ("per-use" or "once"): this
  /// project's key for zero-param-gather's frozen-gather (DeepSpeed has
  /// none).
  DeepSpeedValue<std::string> frozenGather;
  /// zero_mlir_loss_chunk: this project's key for the pipeline's
  /// loss-chunk (DeepSpeed has none).
  DeepSpeedValue<int64_t> lossChunk;
  /// zero_mlir_tiled_mlp: this project's key for the pipeline's tiled-mlp
  /// (DeepSpeed has none).
  DeepSpeedValue<int64_t> tiledMlp;
  /// zero_mlir_optimizer_states: this project's key for zero-optimizer's
  /// optimizer-states (f32, bf16 or int8).
  DeepSpeedValue<std::string> optimizerStates;
  /// bf16.bf16_master_weights_and_grads: zero-optimizer's bf16-masters.
  DeepSpeedValue<bool> bf16Masters;
  /// bf16.bf16_optimizer_states as given (optimizerStates carries it).
  DeepSpeedValue<bool> bf16OptimizerStates;
  /// zero_optimization.mics_shard_size (-1: no MiCS) and
  /// mics_hierarchical_params_gather.
  DeepSpeedValue<int64_t> micsShardSize;
  DeepSpeedValue<bool> micsHierarchicalParamsGather;
  /// zero_optimization.zero_quantized_weights: ZeRO++ qwZ
  /// (zero-param-gather's quantized-weights).
  DeepSpeedValue<bool> quantizedWeights;
  /// zero_optimization.zero_quantized_gradients: ZeRO++ qgZ
  /// (zero-grad-sync's quantized-gradients).
  DeepSpeedValue<bool> quantizedGradients;
  /// The `elasticity` section (DeepSpeed's version 0.1): with `enabled`
  /// true, the train batch and the micro batch of each world size are
  /// chosen from micro_batch_sizes and max_train_batch_size, within
  /// min_gpus and max_gpus (absent keys are DeepSpeed's defaults).
  DeepSpeedValue<bool> elasticEnabled, elasticPreferLargerBatch,
      elasticIgnoreNonElasticBatchInfo;
  DeepSpeedValue<int64_t> elasticMaxTrainBatchSize, elasticMinGpus,
      elasticMaxGpus;
  DeepSpeedValue<std::vector<int64_t>> elasticMicroBatchSizes;
};

/// Reads `path`; never fails hard: problems land in `errors`/`warnings`.
DeepSpeedConfig parseDeepSpeedConfig(llvm::StringRef path);

} // namespace mlir::zero

#endif // ZERO_PIPELINES_DEEPSPEEDCONFIG_H
