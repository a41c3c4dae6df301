//===- ApplyDeepSpeedConfig.cpp - A ds_config against the train steps ----===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//
//
// The options a ds_config file gives (DeepSpeedConfig.cpp reads it) are
// those not given explicitly; what the file leaves to the model ("auto",
// DeepSpeed's batch arithmetic) is resolved against the train steps, each
// resolved value said once as a remark at its place in the file, and the
// file's optimizer, precision and logging are written into the steps.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/NN/IR/NNDialect.h"
#include "zero/Dialect/Zero/IR/OptimizerRules.h"
#include "zero/Dialect/Zero/IR/Optimizers.h"
#include "zero/Dialect/Zero/IR/ZeroDialect.h"
#include "zero/Dialect/Zero/Transforms/LrSchedule.h"
#include "zero/Pipelines/DeepSpeedConfig.h"
#include "zero/Pipelines/DeepSpeedKeys.h"
#include "zero/Pipelines/Elasticity.h"

#include "DeepSpeedJson.h"
#include "PipelineDetail.h"

#include "zero_rt/variants.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::zero;
using namespace mlir::zero::pipeline;

namespace {

/// Sets `option` to the file's value `v`, unless the option was given.
template <typename T, typename U>
void takeFromFile(mlir::detail::PassOptions::Option<T> &option,
                  const DeepSpeedValue<U> &v) {
  if (!option.hasValue() && v.value)
    option = static_cast<T>(*v.value);
}

/// The global batch of a train step: the leading dimension of its inputs.
int64_t globalBatch(TrainStepOp step) {
  if (step.getBodyBlock().getNumArguments() == 0)
    return 0;
  return cast<RankedTensorType>(step.getBodyBlock().getArgument(0).getType())
      .getDimSize(0);
}

/// The model's hidden size as Hugging Face's config.hidden_size gives it:
/// the width of the first layer_norm or rms_norm, else of the first
/// embedding; the op that gave it is returned too.
std::optional<std::pair<int64_t, Operation *>> hiddenSize(ModuleOp module) {
  std::optional<std::pair<int64_t, Operation *>> embedding, norm;
  module.walk([&](Operation *op) {
    if (auto n = dyn_cast<NormOpInterface>(op)) {
      norm = {n.getWeight().getType().getDimSize(0), op};
      return WalkResult::interrupt();
    }
    if (auto e = dyn_cast<EmbeddingOpInterface>(op); e && !embedding)
      embedding = {
          cast<ShapedType>(e.getTableMutable().get().getType()).getDimSize(1),
          op};
    return WalkResult::advance();
  });
  return norm ? norm : embedding;
}

std::string formatValue(double v) {
  return deepspeed::formatDeepSpeedNumber(v);
}
std::string formatValue(int64_t v) { return std::to_string(v); }
std::string formatValue(bool v) { return v ? "true" : "false"; }

/// Reports the config's diagnostics, resolves what it leaves to the train
/// steps, writes its optimizer and precision settings into them and runs
/// the passes of the pipeline. Created only by zero-pipeline, which read
/// the file when the pipeline was built.
struct ApplyDeepSpeedConfigPass
    : public PassWrapper<ApplyDeepSpeedConfigPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(ApplyDeepSpeedConfigPass)

  ApplyDeepSpeedConfigPass(std::shared_ptr<const DeepSpeedConfig> cfg,
                           const ZeroPipelineOptions &options,
                           AddPipelinePasses addPasses)
      : cfg(std::move(cfg)), given(copyOptions(options)), addPasses(addPasses) {
  }

  StringRef getArgument() const override { return "zero-apply-ds-config"; }
  StringRef getDescription() const override {
    return "Apply a DeepSpeed config to the train steps and run the ZeRO "
           "passes (zero-pipeline)";
  }

  void getDependentDialects(DialectRegistry &registry) const override {
    OpPassManager pm(ModuleOp::getOperationName());
    std::unique_ptr<ZeroPipelineOptions> s = withFile();
    s->stage = 3; // Every pass.
    addPasses(pm, *s, getRematBlocks());
    pm.getDependentDialects(registry);
  }

  /// The options given explicitly, else the file's values (before those
  /// that depend on the train steps are resolved).
  std::unique_ptr<ZeroPipelineOptions> withFile() const {
    std::unique_ptr<ZeroPipelineOptions> s = copyOptions(*given);
    takeFromFile(s->stage, cfg->stage);
    takeFromFile(s->reduceBucketSize, cfg->reduceBucketSize);
    takeFromFile(s->reduceScatter, cfg->reduceScatter);
    takeFromFile(s->overlapComm, cfg->overlapComm);
    // DeepSpeed's overlap_comm, absent, follows the stage
    // (overlap_comm_valid): on at stage 3 only.
    if (!cfg->path.empty() && !given->overlapComm.hasValue() &&
        !cfg->overlapComm.value)
      s->overlapComm = s->stage == 3;
    takeFromFile(s->contiguousGradients, cfg->contiguousGradients);
    takeFromFile(s->allgatherBucketSize, cfg->allgatherBucketSize);
    takeFromFile(s->paramPersistenceThreshold, cfg->paramPersistenceThreshold);
    takeFromFile(s->hpzPartitionSize, cfg->hpzPartitionSize);
    takeFromFile(s->maxReuseDistance, cfg->maxReuseDistance);
    takeFromFile(s->frozenGather, cfg->frozenGather);
    takeFromFile(s->lossChunk, cfg->lossChunk);
    takeFromFile(s->tiledMlp, cfg->tiledMlp);
    takeFromFile(s->optimizerStates, cfg->optimizerStates);
    if (!s->bf16Masters.hasValue() && cfg->bf16Masters.value)
      s->bf16Masters =
          std::string(*cfg->bf16Masters.value ? "true" : "false");
    takeFromFile(s->micsShardSize, cfg->micsShardSize);
    takeFromFile(s->spSize, cfg->sequenceParallelSize);
    takeFromFile(s->epSize, cfg->expertParallelSize);
    takeFromFile(s->epPlacement, cfg->expertPlacement);
    takeFromFile(s->quantizedWeights, cfg->quantizedWeights);
    takeFromFile(s->quantizedGradients, cfg->quantizedGradients);
    takeFromFile(s->prefetchBucketSize, cfg->prefetchBucketSize);
    takeFromFile(s->maxLiveParameters, cfg->maxLiveParameters);
    takeFromFile(s->gradientClipping, cfg->gradientClipping);
    takeFromFile(s->offloadOptimizer, cfg->offloadOptimizer);
    takeFromFile(s->offloadParam, cfg->offloadParam);
    // DeepSpeed reads nvme_path only for a device "nvme" (Hugging Face's
    // examples give one beside "cpu").
    auto onNvme = [](const DeepSpeedValue<std::string> &device) {
      return device.value == std::optional<std::string>("nvme");
    };
    if (onNvme(cfg->offloadOptimizer))
      takeFromFile(s->nvmePath, cfg->nvmePath);
    if (onNvme(cfg->offloadParam))
      takeFromFile(s->paramNvmePath, cfg->paramNvmePath);
    takeFromFile(s->nvmeBufferCount, cfg->optimizerBufferCount);
    takeFromFile(s->paramBufferCount, cfg->paramBufferCount);
    takeFromFile(s->paramBufferSize, cfg->paramBufferSize);
    if (!s->remat.hasValue() && cfg->remat)
      s->remat = *cfg->remat;
    takeFromFile(s->offloadActivations, cfg->offloadActivations);
    return s;
  }

  /// The blocks the remat policy covers: activation_checkpointing's
  /// number_checkpoints, unless the remat option was given.
  std::optional<int64_t> getRematBlocks() const {
    if (given->remat.hasValue())
      return std::nullopt;
    return cfg->rematBlocks.value;
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (const DeepSpeedConfig::Diagnostic &w : cfg->warnings)
      emitAt(w, DiagnosticSeverity::Warning);
    if (!cfg->unimplemented.empty()) {
      InFlightDiagnostic d = mlir::emitWarning(module.getLoc());
      d << cfg->path << ": not implemented, ignored: ";
      llvm::interleaveComma(cfg->unimplemented, d);
    }
    if (!cfg->errors.empty()) {
      for (const DeepSpeedConfig::Diagnostic &e : cfg->errors)
        emitAt(e, DiagnosticSeverity::Error);
      return signalPassFailure();
    }
    std::unique_ptr<ZeroPipelineOptions> options = withFile();
    ZeroPipelineOptions &s = *options;
    auto steps = llvm::to_vector(module.getOps<TrainStepOp>());
    if (failed(checkSequenceParallel(s)))
      return signalPassFailure();
    if (!steps.empty() &&
        (failed(resolveBatch(steps, s)) || failed(resolveSizes(module, s)) ||
         failed(resolvePrecision(steps.front(), s))))
      return signalPassFailure();
    if (failed(checkOffload(s)) || failed(checkHpz(s)) ||
        failed(checkMics(s)) || failed(checkQuantizedGradients(s)))
      return signalPassFailure();
    for (TrainStepOp step : steps)
      if (failed(checkOptimizerKeys(step, s)))
        return signalPassFailure();
    if (failed(checkMuonGroupLayers(module, s)))
      return signalPassFailure();
    if (!steps.empty()) {
      resolveOptimizer(steps.front(), s);
      if (cfg->schedulerType.value &&
          !(schedule = resolveSchedule(steps.front())))
        return signalPassFailure();
      for (TrainStepOp step : steps)
        if (failed(apply(step)))
          return signalPassFailure();
    }
    OpPassManager pm(ModuleOp::getOperationName());
    addPasses(pm, s, getRematBlocks());
    if (failed(runPipeline(pm, module)))
      return signalPassFailure();
  }

  //===--------------------------------------------------------------------===//
  // Diagnostics at the file's places
  //===--------------------------------------------------------------------===//

  template <typename T>
  Location locOf(const DeepSpeedValue<T> &v) {
    return locAt(v.line, v.column);
  }
  Location locAt(unsigned line, unsigned column) {
    if (line == 0)
      return getOperation().getLoc();
    return FileLineColLoc::get(&getContext(), cfg->path, line, column);
  }

  void emitAt(const DeepSpeedConfig::Diagnostic &d, DiagnosticSeverity sev) {
    Location loc = locAt(d.line, d.column);
    InFlightDiagnostic diag = sev == DiagnosticSeverity::Error
                                  ? mlir::emitError(loc)
                                  : mlir::emitWarning(loc);
    if (d.line == 0)
      diag << cfg->path << ": ";
    diag << d.message;
  }

  template <typename T>
  InFlightDiagnostic errorAt(const DeepSpeedValue<T> &v) {
    InFlightDiagnostic d = mlir::emitError(locOf(v));
    if (v.line == 0)
      d << cfg->path << ": ";
    return d;
  }

  /// Says once what an "auto" became, at its place in the file.
  template <typename T, typename U>
  void resolved(const DeepSpeedValue<T> &v, StringRef key, U value,
                const Twine &why) {
    mlir::emitRemark(locOf(v)) << "\"auto\" resolved: " << key << " = "
                               << formatValue(value) << " (" << why << ")";
  }

  //===--------------------------------------------------------------------===//
  // Resolution
  //===--------------------------------------------------------------------===//

  /// DeepSpeed's batch arithmetic counts data-parallel ranks: the world
  /// over the sequence-parallel groups (0 where they do not divide it, which
  /// checkSequenceParallel reports).
  int64_t dataParallelRanks(const ZeroPipelineOptions &s) {
    int64_t sp = s.spSize.getValue(), world = s.worldSize.getValue();
    if (sp < 1 || world % sp != 0)
      return sp == 1 ? world : 0;
    return world / sp;
  }

  /// sequence_parallel_size divides the world, at its place in the file.
  LogicalResult checkSequenceParallel(const ZeroPipelineOptions &s) {
    int64_t sp = s.spSize.getValue(), world = s.worldSize.getValue();
    if (sp >= 1 && world >= 1 && world % sp == 0)
      return success();
    if (cfg->sequenceParallelSize.value)
      return errorAt(cfg->sequenceParallelSize)
             << "sequence_parallel_size " << s.spSize.getValue()
             << " does not divide the world size " << s.worldSize.getValue();
    return success(); // zero-partition says why.
  }

  /// DeepSpeed's batch arithmetic (_set_batch_related_parameters and
  /// _batch_assertion) over train_batch_size, train_micro_batch_size_per_gpu,
  /// gradient_accumulation_steps and the world size, the "auto" values
  /// filled first as the Hugging Face Trainer fills them. The train step's
  /// batch is the global batch, and stands for train_batch_size when the
  /// file gives neither it nor the micro batch.
  LogicalResult resolveBatch(ArrayRef<TrainStepOp> steps,
                             ZeroPipelineOptions &s) {
    TrainStepOp first = steps.front();
    int64_t batch = globalBatch(first);
    int64_t world = dataParallelRanks(s);
    if (world < 1)
      return success(); // zero-partition says why.
    const DeepSpeedValue<int64_t> &cfgTrain = cfg->trainBatchSize;
    const DeepSpeedValue<int64_t> &cfgMicro = cfg->trainMicroBatchSizePerGpu;
    const DeepSpeedValue<int64_t> &cfgAcc = cfg->gradientAccumulationSteps;
    if (cfg->elasticEnabled.value.value_or(false))
      return resolveElasticity(steps, s);
    if (s.elasticMicroBatch != 0)
      return resolveElasticMicroBatch(steps, s);
    std::optional<int64_t> train = cfgTrain.value, micro = cfgMicro.value,
                           acc = cfgAcc.value;
    if (given->gradientAccumulationSteps.hasValue() || cfgAcc.isAuto)
      acc = s.gradientAccumulationSteps;
    if (cfgAcc.isAuto)
      resolved(cfgAcc, "gradient_accumulation_steps", *acc,
               "the gradient-accumulation-steps option");
    if (cfgTrain.isAuto) {
      train = batch;
      resolved(cfgTrain, "train_batch_size", batch,
               "the global batch of train step @" + first.getSymName());
    }
    if (cfgMicro.isAuto) {
      // The Trainer's per_device_train_batch_size.
      int64_t k = acc.value_or(s.gradientAccumulationSteps);
      if (batch % (world * k) != 0)
        return errorAt(cfgMicro)
               << "train_micro_batch_size_per_gpu: cannot resolve \"auto\": "
                  "the global batch "
               << batch << " is not divisible by world size " << world
               << " x gradient_accumulation_steps " << k;
      micro = batch / (world * k);
      resolved(cfgMicro, "train_micro_batch_size_per_gpu", *micro,
               llvm::formatv("global batch {0} / world size {1} / "
                             "gradient_accumulation_steps {2}",
                             batch, world, k));
    }
    // Errors about the batch are placed at the first batch key given.
    const DeepSpeedValue<int64_t> &where = cfgTrain.given()   ? cfgTrain
                                           : cfgMicro.given() ? cfgMicro
                                                              : cfgAcc;
    if (!train && !micro)
      train = batch;

    // _set_batch_related_parameters, rule for rule (Python's // on
    // positive integers).
    bool overflow = false;
    if (train && micro && acc) {
    } else if (train && micro) {
      acc = *train / *micro / world;
    } else if (train && acc) {
      micro = *train / world / *acc;
    } else if (micro && acc) {
      int64_t t;
      overflow = __builtin_mul_overflow(*micro, *acc, &t) ||
                 __builtin_mul_overflow(t, world, &t);
      train = t;
    } else if (train) {
      acc = 1;
      micro = *train / world;
    } else {
      int64_t t;
      overflow = __builtin_mul_overflow(*micro, world, &t);
      train = t;
      acc = 1;
    }

    // _batch_assertion, with DeepSpeed's words.
    if (*micro <= 0)
      return errorAt(where) << "Micro batch size per gpu: " << *micro
                            << " has to be greater than 0";
    if (*acc <= 0)
      return errorAt(where) << "Gradient accumulation steps: " << *acc
                            << " has to be greater than 0";
    int64_t product;
    overflow = overflow || __builtin_mul_overflow(*micro, *acc, &product) ||
               __builtin_mul_overflow(product, world, &product);
    if (overflow || product != *train) {
      InFlightDiagnostic d = errorAt(where);
      d << "Check batch related parameters. train_batch_size is not equal "
           "to micro_batch_per_gpu * gradient_acc_step * world_size ";
      if (overflow)
        return d << "(the product of " << *micro << " * " << *acc << " * "
                 << world << " overflows int64)";
      return d << *train << " != " << *micro << " * " << *acc << " * " << world;
    }
    for (TrainStepOp step : steps)
      if (globalBatch(step) != *train)
        return errorAt(where)
               << "train_batch_size " << *train
               << " does not match the global batch " << globalBatch(step)
               << " of train step @" << step.getSymName();
    if (*acc > kMaxAccumulationSteps)
      return errorAt(where) << "gradient_accumulation_steps " << *acc
                            << " is more than " << kMaxAccumulationSteps;
    s.gradientAccumulationSteps = *acc;
    return success();
  }

  /// The global batch every train step shares, or an error at the first
  /// step that has another one.
  FailureOr<int64_t> sharedGlobalBatch(ArrayRef<TrainStepOp> steps) {
    TrainStepOp first = steps.front();
    int64_t batch = globalBatch(first);
    for (TrainStepOp step : steps)
      if (globalBatch(step) != batch)
        return step.emitOpError()
               << "has the global batch " << globalBatch(step)
               << ", train step @" << first.getSymName() << " " << batch
               << ": an elastic split keeps one global batch";
    return batch;
  }

  /// The file's train_batch_size, when given, is the global batch.
  LogicalResult checkTrainBatch(int64_t batch, TrainStepOp step) {
    const DeepSpeedValue<int64_t> &train = cfg->trainBatchSize;
    if (train.value && *train.value != batch)
      return errorAt(train) << "train_batch_size " << *train.value
                            << " does not match the global batch " << batch
                            << " of train step @" << step.getSymName();
    return success();
  }

  /// Sets the accumulation of `split` and says what it became.
  LogicalResult takeSplit(BatchSplit split, int64_t batch, int64_t world,
                          Location loc, StringRef why, ZeroPipelineOptions &s) {
    if (split.accumulationSteps > kMaxAccumulationSteps)
      return mlir::emitError(loc)
             << why << ": gradient accumulation " << split.accumulationSteps
             << " (global batch " << batch << " / world size " << world
             << " / micro batch " << split.microBatch << ") is more than "
             << kMaxAccumulationSteps;
    mlir::emitRemark(loc) << why << ": global batch " << batch
                          << " = micro batch " << split.microBatch
                          << " x gradient accumulation "
                          << split.accumulationSteps << " x world size "
                          << world;
    s.gradientAccumulationSteps = split.accumulationSteps;
    return success();
  }

  /// elastic-micro-batch: the global batch kept on this world size, the
  /// accumulation changed first, then the micro batch. The file's micro
  /// batch and accumulation describe the split of another world size.
  LogicalResult resolveElasticMicroBatch(ArrayRef<TrainStepOp> steps,
                                         ZeroPipelineOptions &s) {
    ModuleOp module = getOperation();
    if (s.elasticMicroBatch < 0)
      return module.emitError() << "elastic-micro-batch must be >= 1 (0: "
                                   "off), got "
                                << s.elasticMicroBatch.getValue();
    if (given->gradientAccumulationSteps.hasValue())
      return module.emitError()
             << "elastic-micro-batch chooses the gradient accumulation; do "
                "not give gradient-accumulation-steps with it";
    TrainStepOp first = steps.front();
    FailureOr<int64_t> batch = sharedGlobalBatch(steps);
    if (failed(batch) || failed(checkTrainBatch(*batch, first)))
      return failure();
    int64_t world = dataParallelRanks(s);
    std::optional<BatchSplit> split =
        splitGlobalBatch(*batch, world, s.elasticMicroBatch);
    if (!split)
      return first.emitOpError()
             << "cannot keep its global batch of " << *batch << " on " << world
             << " ranks: " << *batch << " is not divisible by " << world
             << " (micro batch x gradient accumulation x world size "
             << "must equal the global batch)";
    return takeSplit(*split, *batch, world, first.getLoc(),
                     "elastic-micro-batch", s);
  }

  /// DeepSpeed's elasticity (compute_elastic_config, version 0.1): its
  /// train batch must be the train step's global batch (the model fixes
  /// it), the world size one it splits over, and the micro batch is the
  /// largest of micro_batch_sizes that divides the rows per rank.
  LogicalResult resolveElasticity(ArrayRef<TrainStepOp> steps,
                                  ZeroPipelineOptions &s) {
    constexpr int64_t kMaxLcm = int64_t(1) << 40;
    const DeepSpeedValue<std::vector<int64_t>> &micros =
        cfg->elasticMicroBatchSizes;
    // DeepSpeed refuses batch keys beside the section unless told to
    // ignore them.
    if (!*cfg->elasticIgnoreNonElasticBatchInfo.value)
      for (auto [v, key] : {std::pair(&cfg->trainBatchSize, "train_batch_size"),
                            std::pair(&cfg->trainMicroBatchSizePerGpu,
                                      "train_micro_batch_size_per_gpu"),
                            std::pair(&cfg->gradientAccumulationSteps,
                                      "gradient_accumulation_steps")})
        if (v->given())
          return errorAt(*v)
                 << key
                 << ": elasticity is enabled and chooses the batch; this "
                    "key would be ignored (set "
                    "elasticity.ignore_non_elastic_batch_info to true to "
                    "ignore it)";
    if (given->gradientAccumulationSteps.hasValue())
      return errorAt(cfg->elasticEnabled)
             << "elasticity: it chooses the gradient accumulation; do not "
                "give gradient-accumulation-steps with it";
    TrainStepOp first = steps.front();
    FailureOr<int64_t> batch = sharedGlobalBatch(steps);
    if (failed(batch))
      return failure();
    std::optional<ElasticBatch> elastic = computeElasticBatch(
        *micros.value, *cfg->elasticMaxTrainBatchSize.value,
        *cfg->elasticMinGpus.value, *cfg->elasticMaxGpus.value,
        *cfg->elasticPreferLargerBatch.value, kMaxLcm);
    if (!elastic)
      return errorAt(micros) << "elasticity.micro_batch_sizes: their least "
                                "common multiple is more than "
                             << kMaxLcm;
    int64_t world = dataParallelRanks(s);
    auto list = [](ArrayRef<int64_t> v) {
      std::string text;
      llvm::raw_string_ostream os(text);
      os << "[";
      llvm::interleaveComma(v, os);
      os << "]";
      return text;
    };
    if (elastic->trainBatch != *batch)
      return errorAt(cfg->elasticMaxTrainBatchSize)
             << "elasticity: DeepSpeed's elastic train batch is "
             << elastic->trainBatch << " (for max_train_batch_size "
             << *cfg->elasticMaxTrainBatchSize.value
             << " and micro_batch_sizes " << list(*micros.value)
             << "), the global batch of train step @" << first.getSymName()
             << " is " << *batch
             << "; the model's batch must be the elastic one";
    if (!llvm::is_contained(elastic->validWorldSizes, world))
      return errorAt(cfg->elasticEnabled)
             << "elasticity: world size " << world
             << " is not valid with the elastic train batch "
             << elastic->trainBatch << "; the valid world sizes are "
             << list(elastic->validWorldSizes);
    // A valid world size divides the batch with one of the micro batches.
    int64_t micro = *elasticMicroBatch(*micros.value, *batch, world);
    return takeSplit({micro, *batch / (world * micro)}, *batch, world,
                     locOf(cfg->elasticEnabled), "elasticity", s);
  }

  /// Bucket sizes from the hidden size, as the Trainer's
  /// trainer_config_finalize sets them (the stage-3 ones at stage 3 only).
  LogicalResult resolveSizes(ModuleOp module, ZeroPipelineOptions &s) {
    struct Auto {
      const DeepSpeedValue<int64_t> &value;
      bool explicitOption;
      bool stage3Only;
      StringRef key;
      mlir::detail::PassOptions::Option<int64_t> &setting;
    } autos[] = {
        {cfg->reduceBucketSize, given->reduceBucketSize.hasValue(), false,
         "zero_optimization.reduce_bucket_size", s.reduceBucketSize},
        {cfg->prefetchBucketSize, given->prefetchBucketSize.hasValue(), true,
         "zero_optimization.stage3_prefetch_bucket_size", s.prefetchBucketSize},
        {cfg->paramPersistenceThreshold,
         given->paramPersistenceThreshold.hasValue(), true,
         "zero_optimization.stage3_param_persistence_threshold",
         s.paramPersistenceThreshold},
    };
    for (Auto &a : autos) {
      if (!a.value.isAuto || a.explicitOption || (a.stage3Only && s.stage != 3))
        continue;
      std::optional<std::pair<int64_t, Operation *>> hidden =
          hiddenSize(module);
      if (!hidden)
        return errorAt(a.value)
               << a.key
               << ": cannot resolve \"auto\": the model has no layer_norm, "
                  "rms_norm or embedding to take the hidden size from";
      int64_t h = hidden->first;
      std::string from = llvm::formatv("hidden size {0}, from {1}", h,
                                       hidden->second->getName())
                             .str();
      // As Python evaluates hidden*hidden, int(0.9*hidden*hidden) and
      // 10*hidden.
      if (a.key.ends_with("reduce_bucket_size")) {
        a.setting = h * h;
        resolved(a.value, a.key, a.setting.getValue(), "hidden^2, " + from);
      } else if (a.key.ends_with("prefetch_bucket_size")) {
        a.setting = static_cast<int64_t>(0.9 * h * h);
        resolved(a.value, a.key, a.setting.getValue(),
                 "int(0.9 * hidden^2), " + from);
      } else {
        a.setting = 10 * h;
        resolved(a.value, a.key, a.setting.getValue(), "10 * hidden, " + from);
      }
    }
    return success();
  }

  /// fp16/bf16 "enabled": "auto" from the train step's precision (the
  /// Trainer's --fp16/--bf16), then the precision the file asks for.
  LogicalResult resolvePrecision(TrainStepOp step, ZeroPipelineOptions &s) {
    PrecisionKind kind = step.getPrecision().getKind();
    auto enabled = [&](const DeepSpeedValue<bool> &v, StringRef key,
                       PrecisionKind k) -> std::optional<bool> {
      if (!v.isAuto)
        return v.value;
      bool on = kind == k;
      resolved(v, key, on,
               "the precision " + stringifyPrecisionKind(kind) +
                   " of train step @" + step.getSymName());
      return on;
    };
    std::optional<bool> fp16 =
        enabled(cfg->fp16, "fp16.enabled", PrecisionKind::fp16);
    std::optional<bool> bf16 =
        enabled(cfg->bf16, "bf16.enabled", PrecisionKind::bf16);
    if (fp16.value_or(false) && bf16.value_or(false))
      return errorAt(cfg->fp16) << "fp16.enabled and bf16.enabled are both "
                                   "true";
    if (given->dtype.hasValue())
      return success();
    if (fp16.value_or(false))
      dtype = PrecisionKind::fp16;
    else if (bf16.value_or(false))
      dtype = PrecisionKind::bf16;
    else if (cfg->fp16.value || cfg->bf16.value)
      dtype = PrecisionKind::fp32; // Turned off in so many words.
    if (dtype)
      s.dtype = stringifyPrecisionKind(*dtype).str();
    return success();
  }

  /// The file's offload choices against the stage (DeepSpeed's rules) and
  /// what is implemented, at their places in the file. Options given
  /// explicitly are checked by zero-optimizer.
  LogicalResult checkOffload(const ZeroPipelineOptions &s) {
    auto device = [](const DeepSpeedValue<std::string> &v) {
      return v.value ? symbolizeOffloadDevice(*v.value).value_or(
                           OffloadDevice::none)
                     : OffloadDevice::none;
    };
    OffloadDevice optimizer = device(cfg->offloadOptimizer);
    OffloadDevice param = device(cfg->offloadParam);
    bool fileOptimizer =
        optimizer != OffloadDevice::none &&
        s.offloadOptimizer.getValue() == *cfg->offloadOptimizer.value;
    bool fileParam = param != OffloadDevice::none &&
                     s.offloadParam.getValue() == *cfg->offloadParam.value;
    if (fileOptimizer && s.stage < 1)
      return errorAt(cfg->offloadOptimizer)
             << "zero_optimization.offload_optimizer: optimizer offload needs "
                "ZeRO stage 1, 2 or 3, the stage is "
             << s.stage.getValue();
    if (fileParam && s.stage != 3)
      return errorAt(cfg->offloadParam)
             << "zero_optimization.offload_param: parameter offload needs "
                "ZeRO stage 3, the stage is "
             << s.stage.getValue();
    // DeepSpeed's qwZ quantizes the stage-3 gathers of the device shards.
    zrt_variant_config variants = variantsOf(s);
    variants.quantized_weights =
        cfg->quantizedWeights.value.value_or(false) && s.quantizedWeights;
    if (zrt_variant_breaks(&variants, ZRT_QWZ_NEEDS_STAGE3))
      return errorAt(cfg->quantizedWeights)
             << "zero_optimization.zero_quantized_weights: qwZ quantizes the "
                "weights of ZeRO stage 3's gathers, the stage is "
             << s.stage.getValue();
    if (zrt_variant_breaks(&variants, ZRT_QWZ_EXCLUDES_PARAM_OFFLOAD))
      return errorAt(cfg->quantizedWeights)
             << "zero_optimization.zero_quantized_weights: qwZ gathers the "
                "shards on the device; it does not combine with offload_param";
    // The swap files' directory, from the file or the options.
    if (fileParam && param == OffloadDevice::nvme && s.paramNvmePath.empty() &&
        s.nvmePath.empty())
      return errorAt(cfg->offloadParam)
             << "zero_optimization.offload_param: device nvme needs an "
                "nvme_path (or the option param-nvme-path)";
    if (fileOptimizer && optimizer == OffloadDevice::nvme && s.nvmePath.empty())
      return errorAt(cfg->offloadOptimizer)
             << "zero_optimization.offload_optimizer: device nvme needs an "
                "nvme_path (or the option nvme-path)";
    return success();
  }

  /// muon-group-layers groups the layers of Muon's matrices at stage 3:
  /// given anywhere else it would change nothing, and is refused, as
  /// ep-size is on a step without experts.
  LogicalResult checkMuonGroupLayers(ModuleOp module,
                                     const ZeroPipelineOptions &s) {
    if (!given->muonGroupLayers.hasValue())
      return success();
    std::optional<OptimizerKind> fileKind;
    if (cfg->optimizer.value)
      fileKind = symbolizeOptimizerKind(*cfg->optimizer.value);
    std::optional<OptimizerKind> other;
    bool anyStep = false;
    for (TrainStepOp step : module.getOps<TrainStepOp>()) {
      anyStep = true;
      OptimizerKind kind = fileKind.value_or(step.getOptimizer().getKind());
      if (kind != OptimizerKind::muon)
        other = kind;
    }
    if (s.stage == 3 && anyStep && !other)
      return success();
    InFlightDiagnostic d = mlir::emitError(module.getLoc());
    d << "muon-group-layers " << s.muonGroupLayers.getValue()
      << " groups the layers of Muon's matrices at stage 3; ";
    if (s.stage != 3)
      d << "the stage is " << s.stage.getValue();
    else if (!anyStep)
      d << "the module has no train step";
    else
      d << "the train step's optimizer is " << stringifyOptimizerKind(*other);
    return d << " (leave the option out)";
  }

  /// What the optimizer cannot do with the precision and offload the file
  /// asks for, at the place of the file's key that asks (the passes and the
  /// lowering check the same rules, at the train step, when only options
  /// and the step decide): bf16 masters need the bf16-master update, a
  /// state precision the optimizer's row, and NVMe swaps fp32 states only.
  LogicalResult checkOptimizerKeys(TrainStepOp step,
                                   const ZeroPipelineOptions &s) {
    OptimizerAttr opt = step.getOptimizer();
    std::optional<OptimizerKind> fileKind;
    if (cfg->optimizer.value)
      fileKind = symbolizeOptimizerKind(*cfg->optimizer.value);
    OptimizerKind kind = fileKind.value_or(opt.getKind());
    std::optional<StatePrecision> states =
        s.optimizerStates.empty() ? opt.getStates()
                                  : symbolizeStatePrecision(s.optimizerStates);
    if (!states)
      return success(); // zero-optimizer names the bad option
    bool fileStates =
        cfg->optimizerStates.value &&
        s.optimizerStates.getValue() == *cfg->optimizerStates.value;
    // The state precision's key: bf16.bf16_optimizer_states sets it too.
    std::string statesKey =
        cfg->bf16OptimizerStates.value &&
                cfg->bf16OptimizerStates.line == cfg->optimizerStates.line &&
                cfg->bf16OptimizerStates.column == cfg->optimizerStates.column
            ? "bf16.bf16_optimizer_states"
            : dskeys::kOptimizerStates.str();
    std::string kindName = stringifyOptimizerKind(kind).str();
    std::string statesName = stringifyStatePrecision(*states).str();
    // Where the optimizer comes from, when the file does not say it.
    std::string kindSource =
        fileKind ? " (optimizer.type '" + cfg->optimizerType + "')"
                 : std::string(" (the train step's optimizer)");
    if (!hasOptimizerStatePrecision(kind, *states)) {
      if (fileStates)
        return errorAt(cfg->optimizerStates)
               << statesKey << ": " << kindName << " has no " << statesName
               << " states" << kindSource;
      if (fileKind)
        return errorAt(cfg->optimizer)
               << "optimizer.type: " << kindName << " has no " << statesName
               << " states (the option optimizer-states or the train "
                  "step's)";
    }
    bool masters = s.bf16Masters.empty() ? opt.getBf16Masters()
                                         : s.bf16Masters.getValue() == "true";
    if (masters && !hasBf16MasterUpdate(kind, *states)) {
      bool fileMasters = cfg->bf16Masters.value.value_or(false) &&
                         !given->bf16Masters.hasValue();
      // As #zero.optimizer's verifier says it.
      std::string why = "optimizer bf16_masters is implemented for adam and "
                        "adamw with f32 or bf16 states, got " +
                        kindName + " with " + statesName + " states";
      if (fileMasters)
        return errorAt(cfg->bf16Masters)
               << "bf16.bf16_master_weights_and_grads: " << why << kindSource;
      if (fileKind)
        return errorAt(cfg->optimizer)
               << "optimizer.type: " << why
               << " (bf16 masters: the option bf16-masters or the train "
                  "step's)";
      if (fileStates)
        return errorAt(cfg->optimizerStates) << statesKey << ": " << why;
    }
    bool nvme = s.offloadOptimizer.getValue() == "nvme";
    if (nvme && !canSwapOptimizerStates(*states)) {
      bool fileNvme =
          cfg->offloadOptimizer.value == std::optional<std::string>("nvme") &&
          !given->offloadOptimizer.hasValue();
      std::string why = "NVMe swaps the optimizer states in f32 only";
      if (fileNvme)
        return errorAt(cfg->offloadOptimizer)
               << "zero_optimization.offload_optimizer: device nvme: " << why
               << ", the states are in " << statesName
               << (fileStates ? " (" + statesKey + ")"
                              : std::string(" (the option optimizer-states "
                                            "or the train step's)"))
               << "; offload them to the cpu or keep them on the device";
      if (fileStates)
        return errorAt(cfg->optimizerStates)
               << statesKey << ": " << why
               << ", and the optimizer is offloaded to nvme (the option "
                  "offload-optimizer)";
    }
    return success();
  }

  /// What DeepSpeed's rules for the collective variants (zero_rt/variants.h)
  /// read, from the options the file resolved into.
  static zrt_variant_config variantsOf(const ZeroPipelineOptions &s) {
    zrt_variant_config v = {};
    v.stage = s.stage;
    v.world_size = s.worldSize;
    v.hpz_partition_size = s.hpzPartitionSize;
    v.mics_shard_size = s.micsShardSize;
    v.quantized_weights = s.quantizedWeights;
    v.quantized_gradients = s.quantizedGradients;
    v.reduce_scatter = s.reduceScatter;
    v.offload_param = s.offloadParam.getValue() != "none";
    v.offload_optimizer = s.offloadOptimizer.getValue() != "none";
    return v;
  }

  /// zero_hpz_partition_size: DeepSpeed's rules (ZeRO stage 3, ranks in
  /// groups of that many consecutive ranks, so a divisor of the world
  /// size); the secondary shards live on the device, so not with
  /// parameter offload.
  LogicalResult checkHpz(const ZeroPipelineOptions &s) {
    const DeepSpeedValue<int64_t> &h = cfg->hpzPartitionSize;
    if (!h.value || *h.value <= 1 || s.hpzPartitionSize.getValue() != *h.value)
      return success();
    zrt_variant_config variants = variantsOf(s);
    auto breaks = [&](zrt_variant_rule rule) {
      return zrt_variant_breaks(&variants, rule) != 0;
    };
    if (breaks(ZRT_HPZ_NEEDS_STAGE3))
      return errorAt(h) << "zero_optimization.zero_hpz_partition_size: hpZ "
                           "needs ZeRO stage 3, the stage is "
                        << s.stage.getValue();
    if (breaks(ZRT_HPZ_DIVIDES_WORLD))
      return errorAt(h) << "zero_optimization.zero_hpz_partition_size: "
                        << *h.value << " does not divide the world size "
                        << s.worldSize.getValue();
    if (breaks(ZRT_HPZ_EXCLUDES_PARAM_OFFLOAD))
      return errorAt(h) << "zero_optimization.zero_hpz_partition_size: hpZ "
                           "does not combine with offload_param (device "
                        << s.offloadParam.getValue()
                        << "): the secondary shards live on the device";
    return success();
  }

  /// DeepSpeed's rules for qgZ, at the place of zero_quantized_gradients:
  /// only its stage-3 optimizer reduces by the all-to-alls, and only with
  /// reduce_scatter; its MiCS optimizer never does. One node falls back to
  /// the plain reduce-scatter in zero-grad-sync, with a warning.
  LogicalResult checkQuantizedGradients(const ZeroPipelineOptions &s) {
    const DeepSpeedValue<bool> &q = cfg->quantizedGradients;
    if (!q.value.value_or(false) || !s.quantizedGradients)
      return success();
    auto fail = [&]() {
      InFlightDiagnostic d = errorAt(q);
      d << "zero_optimization.zero_quantized_gradients: ";
      return d;
    };
    zrt_variant_config variants = variantsOf(s);
    auto breaks = [&](zrt_variant_rule rule) {
      return zrt_variant_breaks(&variants, rule) != 0;
    };
    if (breaks(ZRT_QGZ_NEEDS_STAGE3))
      return fail() << "qgZ quantizes the gradient reduce-scatters of ZeRO "
                       "stage 3, the stage is "
                    << s.stage.getValue();
    if (breaks(ZRT_QGZ_NEEDS_REDUCE_SCATTER))
      return fail() << "qgZ replaces the gradient reduce-scatter; it does "
                       "not combine with reduce_scatter false";
    if (breaks(ZRT_QGZ_EXCLUDES_MICS))
      return fail() << "qgZ does not combine with MiCS (mics_shard_size "
                    << s.micsShardSize.getValue()
                    << "): DeepSpeed's MiCS reduces with the plain "
                       "reduce-scatter";
    return success();
  }

  /// DeepSpeed's rules for MiCS, at the place of mics_shard_size: stage 3,
  /// shard groups that divide the world, no offload (DeepSpeed refuses it)
  /// and no hpZ.
  LogicalResult checkMics(const ZeroPipelineOptions &s) {
    const DeepSpeedValue<int64_t> &m = cfg->micsShardSize;
    if (!m.value || *m.value <= 0 || s.micsShardSize != *m.value)
      return success();
    auto fail = [&]() {
      InFlightDiagnostic d = errorAt(m);
      d << "zero_optimization.mics_shard_size: ";
      return d;
    };
    // The file's hpZ, whatever the options say.
    zrt_variant_config variants = variantsOf(s);
    variants.hpz_partition_size = cfg->hpzPartitionSize.value.value_or(1);
    auto breaks = [&](zrt_variant_rule rule) {
      return zrt_variant_breaks(&variants, rule) != 0;
    };
    if (breaks(ZRT_MICS_NEEDS_STAGE3))
      return fail() << "MiCS needs ZeRO stage 3, the stage is "
                    << s.stage.getValue();
    if (s.worldSize >= 1 && breaks(ZRT_MICS_DIVIDES_WORLD))
      return fail() << "the shard groups of " << *m.value
                    << " ranks must divide the world size "
                    << s.worldSize.getValue();
    if (breaks(ZRT_MICS_EXCLUDES_OFFLOAD))
      for (auto [option, key] :
           {std::pair(&s.offloadOptimizer, "offload_optimizer"),
            std::pair(&s.offloadParam, "offload_param")})
        if (option->getValue() != "none")
          return fail() << "MiCS does not support offload (DeepSpeed refuses "
                           "it), but "
                        << key << " is on " << option->getValue();
    if (breaks(ZRT_HPZ_EXCLUDES_MICS))
      return fail() << "MiCS and hpZ exclude each other, but "
                       "zero_hpz_partition_size is "
                    << *cfg->hpzPartitionSize.value;
    return success();
  }

  /// Optimizer values and gradient_clipping "auto": the train step's own
  /// (the Trainer's --learning_rate, --adam_beta1, ...).
  void resolveOptimizer(TrainStepOp step, ZeroPipelineOptions &s) {
    OptimizerAttr opt = step.getOptimizer();
    StringRef why = "the train step's optimizer";
    if (cfg->lr.isAuto)
      resolved(cfg->lr, "optimizer.params.lr", opt.getLr().convertToDouble(),
               why);
    if (cfg->beta1.isAuto)
      mlir::emitRemark(locOf(cfg->beta1))
          << "\"auto\" resolved: optimizer.params.betas = ["
          << formatValue(opt.getBeta1().convertToDouble()) << ", "
          << formatValue(opt.getBeta2().convertToDouble()) << "] (" << why
          << ")";
    if (cfg->eps.isAuto)
      resolved(cfg->eps, "optimizer.params.eps", opt.getEps().convertToDouble(),
               why);
    if (cfg->weightDecay.isAuto)
      resolved(cfg->weightDecay, "optimizer.params.weight_decay",
               opt.getWeightDecay().convertToDouble(), why);
    // The option, neither given nor set by the file, keeps the train step's.
    if (cfg->gradientClipping.isAuto && !given->gradientClipping.hasValue())
      resolved(cfg->gradientClipping, "gradient_clipping",
               step.getGradientClipping().convertToDouble(),
               "the train step's gradient_clipping");
  }

  /// The `scheduler` section, "auto" resolved as Hugging Face's integration
  /// resolves it: warmup_min_lr 0, warmup_max_lr the optimizer's lr (the
  /// file's, else the train step's) and warmup_num_steps the Trainer's
  /// default warmup of 0 steps. total_num_steps "auto" is the Trainer's
  /// number of training steps: the schedule's `total_num_steps = auto`,
  /// which the executable sets to the run's --steps when it starts.
  LrScheduleAttr resolveSchedule(TrainStepOp step) {
    const DeepSpeedValue<std::string> &type = cfg->schedulerType;
    std::vector<LrScheduleParam> params;
    for (const DeepSpeedConfig::SchedulerParam &p : cfg->schedulerParams) {
      std::string key = "scheduler.params." + p.name;
      if (!p.value.isAuto) {
        params.emplace_back(p.name, *p.value.value);
        continue;
      }
      if (p.name == "warmup_min_lr" || p.name == "warmup_num_steps") {
        params.emplace_back(p.name, "0");
        resolved(p.value, key, int64_t(0),
                 p.name == "warmup_min_lr"
                     ? "as Hugging Face's integration sets it"
                     : "the Trainer's default warmup_steps");
      } else if (p.name == "warmup_max_lr") {
        double lr = cfg->lr.value.value_or(
            step.getOptimizer().getLr().convertToDouble());
        params.emplace_back(p.name, formatValue(lr));
        resolved(p.value, key, lr,
                 cfg->lr.value ? "optimizer.params.lr"
                               : "the train step's optimizer lr");
      } else if (p.name == "total_num_steps") {
        params.emplace_back(p.name, "auto");
        mlir::emitRemark(locOf(p.value))
            << "\"auto\" resolved: " << key
            << " = the length of the run (the executable's --steps, set when "
               "it starts)";
      } else {
        errorAt(p.value) << key
                         << ": cannot resolve \"auto\": Hugging Face's "
                            "integration resolves it only for warmup_min_lr, "
                            "warmup_max_lr, warmup_num_steps and "
                            "total_num_steps; give a value";
        return {};
      }
    }
    return buildLrSchedule(&getContext(), *type.value, params,
                           [&](int64_t param) -> InFlightDiagnostic {
                             if (param < 0)
                               return errorAt(type) << "scheduler: ";
                             return errorAt(cfg->schedulerParams[param].value);
                           });
  }

  //===--------------------------------------------------------------------===//
  // The train step's attributes
  //===--------------------------------------------------------------------===//

  /// Sets `field` of `result` to the file's value `v`, if it gives one,
  /// after `make` has checked that value alone in `original` (the
  /// attributes' verifiers check each parameter by itself), so that an
  /// error names the place of the value that is wrong.
  template <typename Params, typename Field, typename T, typename Make>
  bool take(const DeepSpeedValue<T> &v, const Params &original, Params &result,
            Field Params::*field, Make make) {
    if (!v.value)
      return true;
    Params alone = original;
    alone.*field = Field(*v.value);
    if (!make([&] { return errorAt(v); }, alone))
      return false;
    result.*field = Field(*v.value);
    return true;
  }

  /// Writes the file's optimizer, precision and logging into `step`.
  LogicalResult apply(TrainStepOp step) {
    MLIRContext *ctx = step.getContext();
    auto stepError = [&] { return step.emitOpError(); };
    OptimizerAttr opt = step.getOptimizer();
    struct OptParams {
      OptimizerKind kind;
      APFloat lr, beta1, beta2, eps, weightDecay;
      bool biasCorrection;
      APFloat momentum, dampening;
      bool nesterov;
      StatePrecision states;
      LrScheduleAttr schedule;
      APFloat muonLr, muonMomentum;
      bool muonNesterov;
      int64_t nsSteps;
      APFloat nsA, nsB, nsC, nsEps;
      MuonAdjustLr adjustLrFn;
      APFloat beta2Decay, eps1, eps2, d;
      bool maximize;
      bool bf16Masters;
    } o{opt.getKind(),
        opt.getLr(),
        opt.getBeta1(),
        opt.getBeta2(),
        opt.getEps(),
        opt.getWeightDecay(),
        opt.getBiasCorrection(),
        opt.getMomentum(),
        opt.getDampening(),
        opt.getNesterov(),
        opt.getStates(),
        opt.getSchedule(),
        opt.getMuonLr(),
        opt.getMuonMomentum(),
        opt.getMuonNesterov(),
        opt.getNsSteps(),
        opt.getNsA(),
        opt.getNsB(),
        opt.getNsC(),
        opt.getNsEps(),
        opt.getAdjustLrFn(),
        opt.getBeta2Decay(),
        opt.getEps1(),
        opt.getEps2(),
        opt.getD(),
        opt.getMaximize(),
        opt.getBf16Masters()};
    auto makeOpt = [&](auto emitError, const OptParams &p) {
      return OptimizerAttr::getChecked(
          emitError, ctx, p.kind, p.lr, p.beta1, p.beta2, p.eps, p.weightDecay,
          p.biasCorrection, p.momentum, p.dampening, p.nesterov, p.states,
          p.schedule, p.muonLr, p.muonMomentum, p.muonNesterov, p.nsSteps,
          p.nsA, p.nsB, p.nsC, p.nsEps, p.adjustLrFn, p.beta2Decay, p.eps1,
          p.eps2, p.d, p.maximize, p.bf16Masters);
    };
    // The file's optimizer, and the train step's values of what it does not
    // read (Lion's eps and bias_correction, SGD's betas, Adam's momentum)
    // back at their defaults, before each of the file's values is checked
    // on it.
    if (cfg->optimizer.value)
      if (std::optional<OptimizerKind> kind =
              symbolizeOptimizerKind(*cfg->optimizer.value))
        o.kind = *kind;
    if (!hasOptimizerParam(o.kind, "beta1"))
      o.beta1 = APFloat(0.9);
    if (!hasOptimizerParam(o.kind, "beta2"))
      o.beta2 = APFloat(0.999);
    if (!hasOptimizerParam(o.kind, "eps"))
      o.eps = APFloat(1e-8);
    if (!hasOptimizerParam(o.kind, "bias_correction"))
      o.biasCorrection = true;
    if (!hasOptimizerParam(o.kind, "momentum"))
      o.momentum = APFloat(0.0);
    if (!hasOptimizerParam(o.kind, "dampening"))
      o.dampening = APFloat(0.0);
    if (!hasOptimizerParam(o.kind, "nesterov"))
      o.nesterov = false;
    if (!hasOptimizerParam(o.kind, "muon_lr")) {
      o.muonLr = APFloat(1e-3);
      o.muonMomentum = APFloat(0.95);
      o.muonNesterov = true;
      o.nsSteps = 5;
      o.nsA = APFloat(3.4445);
      o.nsB = APFloat(-4.775);
      o.nsC = APFloat(2.0315);
      o.nsEps = APFloat(1e-7);
      o.adjustLrFn = MuonAdjustLr::original;
    }
    if (!hasOptimizerParam(o.kind, "beta2_decay")) {
      o.beta2Decay = APFloat(-0.8);
      o.eps1 = APFloat(-1.0);
      o.eps2 = APFloat(1e-3);
      o.d = APFloat(1.0);
      o.maximize = false;
    }
    // The file's Adafactor is torch.optim.Adafactor: its defaults for what
    // the file leaves out (lr and weight_decay 1e-2).
    bool fileAdafactor =
        cfg->optimizer.value && o.kind == OptimizerKind::adafactor;
    if (fileAdafactor) {
      o.lr = APFloat(1e-2);
      o.weightDecay = APFloat(1e-2);
      o.beta2Decay = APFloat(-0.8);
      o.eps1 = APFloat(-1.0);
      o.eps2 = APFloat(1e-3);
      o.d = APFloat(1.0);
      o.maximize = false;
    }
    // The file's Muon is DeepSpeed's MuonWithAuxAdam: its defaults for what
    // the file leaves out, not the train step's.
    bool fileMuon = cfg->optimizer.value && o.kind == OptimizerKind::muon;
    if (fileMuon) {
      o.lr = APFloat(3e-4);
      o.muonLr = APFloat(0.02);
      o.muonMomentum = APFloat(0.95);
      o.beta1 = APFloat(0.9);
      o.beta2 = APFloat(0.95);
      o.eps = APFloat(1e-10);
      o.weightDecay = APFloat(0.0);
    }
    OptParams newOpt = o;
    bool ok = take(cfg->lr, o, newOpt, &OptParams::lr, makeOpt);
    if (fileMuon) {
      // `lr` is both halves'; muon_lr and adam_lr override it for theirs.
      ok &= take(cfg->lr, o, newOpt, &OptParams::muonLr, makeOpt);
      ok &= take(cfg->muonLr, o, newOpt, &OptParams::muonLr, makeOpt);
      ok &= take(cfg->adamLr, o, newOpt, &OptParams::lr, makeOpt);
      ok &=
          take(cfg->muonMomentum, o, newOpt, &OptParams::muonMomentum, makeOpt);
    }
    ok &= take(cfg->beta2Decay, o, newOpt, &OptParams::beta2Decay, makeOpt);
    ok &= take(cfg->eps1, o, newOpt, &OptParams::eps1, makeOpt);
    ok &= take(cfg->eps2, o, newOpt, &OptParams::eps2, makeOpt);
    ok &= take(cfg->d, o, newOpt, &OptParams::d, makeOpt);
    ok &= take(cfg->maximize, o, newOpt, &OptParams::maximize, makeOpt);
    ok &= take(cfg->beta1, o, newOpt, &OptParams::beta1, makeOpt);
    ok &= take(cfg->beta2, o, newOpt, &OptParams::beta2, makeOpt);
    ok &= take(cfg->eps, o, newOpt, &OptParams::eps, makeOpt);
    ok &= take(cfg->weightDecay, o, newOpt, &OptParams::weightDecay, makeOpt);
    ok &= take(cfg->biasCorrection, o, newOpt, &OptParams::biasCorrection,
               makeOpt);
    ok &= take(cfg->momentum, o, newOpt, &OptParams::momentum, makeOpt);
    ok &= take(cfg->dampening, o, newOpt, &OptParams::dampening, makeOpt);
    // Nesterov is checked with the file's momentum and dampening (it needs
    // a momentum and no dampening).
    ok &= take(cfg->nesterov, OptParams(newOpt), newOpt, &OptParams::nesterov,
               makeOpt);
    if (schedule)
      newOpt.schedule = schedule;

    PrecisionAttr prec = step.getPrecision();
    struct PrecParams {
      PrecisionKind kind;
      int64_t initialScalePower, lossScaleWindow, hysteresis;
      APFloat minLossScale, lossScale;
    } p{dtype.value_or(prec.getKind()), prec.getInitialScalePower(),
        prec.getLossScaleWindow(),      prec.getHysteresis(),
        prec.getMinLossScale(),         prec.getLossScale()};
    auto makePrec = [&](auto emitError, const PrecParams &q) {
      return PrecisionAttr::getChecked(
          emitError, ctx, q.kind, q.initialScalePower, q.lossScaleWindow,
          q.hysteresis, q.minLossScale, q.lossScale);
    };
    PrecParams newPrec = p;
    ok &= take(cfg->initialScalePower, p, newPrec,
               &PrecParams::initialScalePower, makePrec);
    ok &= take(cfg->lossScaleWindow, p, newPrec, &PrecParams::lossScaleWindow,
               makePrec);
    ok &= take(cfg->hysteresis, p, newPrec, &PrecParams::hysteresis, makePrec);
    ok &= take(cfg->minLossScale, p, newPrec, &PrecParams::minLossScale,
               makePrec);
    ok &= take(cfg->lossScale, p, newPrec, &PrecParams::lossScale, makePrec);
    if (!ok)
      return failure();

    step.setOptimizerAttr(makeOpt(stepError, newOpt));
    step.setPrecisionAttr(makePrec(stepError, newPrec));
    if (cfg->stepsPerPrint.value || cfg->wallClockBreakdown.value)
      ctx->getLoadedDialect<ZeroDialect>()->getLoggingAttrHelper().setAttr(
          step,
          LoggingAttr::get(ctx, cfg->stepsPerPrint.value.value_or(1),
                           cfg->wallClockBreakdown.value.value_or(false)));
    return success();
  }

  std::shared_ptr<const DeepSpeedConfig> cfg;
  /// The options given explicitly: they win over the file.
  std::shared_ptr<const ZeroPipelineOptions> given;
  /// zero-pipeline's passes, run with the resolved options.
  AddPipelinePasses addPasses;
  /// The precision the file asks for, if any.
  std::optional<PrecisionKind> dtype;
  /// The file's learning-rate schedule, if it has a `scheduler`.
  LrScheduleAttr schedule;
};

} // namespace

std::unique_ptr<Pass>
pipeline::createApplyDeepSpeedConfigPass(const ZeroPipelineOptions &options,
                                         AddPipelinePasses addPasses) {
  return std::make_unique<ApplyDeepSpeedConfigPass>(
      std::make_shared<DeepSpeedConfig>(
          options.config.empty() ? DeepSpeedConfig()
                                 : parseDeepSpeedConfig(options.config)),
      options, addPasses);
}
