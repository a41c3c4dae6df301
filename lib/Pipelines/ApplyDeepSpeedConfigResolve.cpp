//===- ApplyDeepSpeedConfigResolve.cpp - What a ds_config leaves open -----===//
//
// Part of the zero-mlir project.
//
// DeepSpeed's batch arithmetic and the file's "auto" values, resolved
// against the train steps as the Hugging Face Trainer resolves them.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/NN/IR/NNDialect.h"
#include "zero/Dialect/Zero/Transforms/LrSchedule.h"
#include "zero/Pipelines/Elasticity.h"

#include "ApplyDeepSpeedConfig.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::zero;
using namespace mlir::zero::pipeline;

namespace {

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

} // namespace

/// DeepSpeed's batch arithmetic counts data-parallel ranks: the world
/// over the sequence-parallel groups (0 where they do not divide it, which
/// checkSequenceParallel reports).
int64_t
ApplyDeepSpeedConfigPass::dataParallelRanks(const ZeroPipelineOptions &s) {
  int64_t sp = s.spSize.getValue(), world = s.worldSize.getValue();
  if (sp < 1 || world % sp != 0)
    return sp == 1 ? world : 0;
  return world / sp;
}

/// sequence_parallel_size divides the world, at its place in the file.
LogicalResult
ApplyDeepSpeedConfigPass::checkSequenceParallel(const ZeroPipelineOptions &s) {
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
LogicalResult
ApplyDeepSpeedConfigPass::resolveBatch(ArrayRef<TrainStepOp> steps,
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
FailureOr<int64_t>
ApplyDeepSpeedConfigPass::sharedGlobalBatch(ArrayRef<TrainStepOp> steps) {
  TrainStepOp first = steps.front();
  int64_t batch = globalBatch(first);
  for (TrainStepOp step : steps)
    if (globalBatch(step) != batch)
      return step.emitOpError()
             << "has the global batch " << globalBatch(step) << ", train step @"
             << first.getSymName() << " " << batch
             << ": an elastic split keeps one global batch";
  return batch;
}

/// The file's train_batch_size, when given, is the global batch.
LogicalResult ApplyDeepSpeedConfigPass::checkTrainBatch(int64_t batch,
                                                        TrainStepOp step) {
  const DeepSpeedValue<int64_t> &train = cfg->trainBatchSize;
  if (train.value && *train.value != batch)
    return errorAt(train) << "train_batch_size " << *train.value
                          << " does not match the global batch " << batch
                          << " of train step @" << step.getSymName();
  return success();
}

/// Sets the accumulation of `split` and says what it became.
LogicalResult ApplyDeepSpeedConfigPass::takeSplit(BatchSplit split,
                                                  int64_t batch, int64_t world,
                                                  Location loc, StringRef why,
                                                  ZeroPipelineOptions &s) {
  if (split.accumulationSteps > kMaxAccumulationSteps)
    return mlir::emitError(loc)
           << why << ": gradient accumulation " << split.accumulationSteps
           << " (global batch " << batch << " / world size " << world
           << " / micro batch " << split.microBatch << ") is more than "
           << kMaxAccumulationSteps;
  mlir::emitRemark(loc) << why << ": global batch " << batch
                        << " = micro batch " << split.microBatch
                        << " x gradient accumulation "
                        << split.accumulationSteps << " x world size " << world;
  s.gradientAccumulationSteps = split.accumulationSteps;
  return success();
}

/// elastic-micro-batch: the global batch kept on this world size, the
/// accumulation changed first, then the micro batch. The file's micro
/// batch and accumulation describe the split of another world size.
LogicalResult
ApplyDeepSpeedConfigPass::resolveElasticMicroBatch(ArrayRef<TrainStepOp> steps,
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
  return takeSplit(*split, *batch, world, first.getLoc(), "elastic-micro-batch",
                   s);
}

/// DeepSpeed's elasticity (compute_elastic_config, version 0.1): its
/// train batch must be the train step's global batch (the model fixes
/// it), the world size one it splits over, and the micro batch is the
/// largest of micro_batch_sizes that divides the rows per rank.
LogicalResult
ApplyDeepSpeedConfigPass::resolveElasticity(ArrayRef<TrainStepOp> steps,
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
           << *cfg->elasticMaxTrainBatchSize.value << " and micro_batch_sizes "
           << list(*micros.value) << "), the global batch of train step @"
           << first.getSymName() << " is " << *batch
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
LogicalResult ApplyDeepSpeedConfigPass::resolveSizes(ModuleOp module,
                                                     ZeroPipelineOptions &s) {
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
    std::optional<std::pair<int64_t, Operation *>> hidden = hiddenSize(module);
    if (!hidden)
      return errorAt(a.value)
             << a.key
             << ": cannot resolve \"auto\": the model has no layer_norm, "
                "rms_norm or embedding to take the hidden size from";
    int64_t h = hidden->first;
    std::string from =
        llvm::formatv("hidden size {0}, from {1}", h, hidden->second->getName())
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
LogicalResult
ApplyDeepSpeedConfigPass::resolvePrecision(TrainStepOp step,
                                           ZeroPipelineOptions &s) {
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

/// Optimizer values and gradient_clipping "auto": the train step's own
/// (the Trainer's --learning_rate, --adam_beta1, ...).
void ApplyDeepSpeedConfigPass::resolveOptimizer(TrainStepOp step,
                                                ZeroPipelineOptions &s) {
  OptimizerAttr opt = step.getOptimizer();
  StringRef why = "the train step's optimizer";
  if (cfg->lr.isAuto)
    resolved(cfg->lr, "optimizer.params.lr", opt.getLr().convertToDouble(),
             why);
  if (cfg->beta1.isAuto)
    mlir::emitRemark(locOf(cfg->beta1))
        << "\"auto\" resolved: optimizer.params.betas = ["
        << formatValue(opt.getBeta1().convertToDouble()) << ", "
        << formatValue(opt.getBeta2().convertToDouble()) << "] (" << why << ")";
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
LrScheduleAttr ApplyDeepSpeedConfigPass::resolveSchedule(TrainStepOp step) {
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
      double lr =
          cfg->lr.value.value_or(step.getOptimizer().getLr().convertToDouble());
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
