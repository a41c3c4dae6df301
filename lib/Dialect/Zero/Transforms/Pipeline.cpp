//===- Pipeline.cpp - The zero-pipeline pass pipeline ---------------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/Transforms/Pipeline.h"
#include "zero/Dialect/Zero/Analysis/Passes.h"
#include "zero/Dialect/Zero/Transforms/LrSchedule.h"
#include "zero/Dialect/Zero/Transforms/Passes.h"

#include "mlir/Pass/PassRegistry.h"

#include <cstdio>
#include <memory>

using namespace mlir;
using namespace mlir::zero;

namespace {

/// Reports the config's diagnostics and writes its optimizer, loss-scaler
/// and batch settings into the train steps. Created only by zero-pipeline,
/// which read the file when the pipeline was built.
struct ApplyDeepSpeedConfigPass
    : public PassWrapper<ApplyDeepSpeedConfigPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(ApplyDeepSpeedConfigPass)

  ApplyDeepSpeedConfigPass(std::shared_ptr<const DeepSpeedConfig> cfg,
                           int64_t worldSize, int64_t accumulation)
      : cfg(std::move(cfg)), worldSize(worldSize), accumulation(accumulation) {}

  StringRef getArgument() const override { return "zero-apply-ds-config"; }
  StringRef getDescription() const override {
    return "Apply a DeepSpeed config to the train steps (zero-pipeline)";
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (const std::string &w : cfg->warnings)
      mlir::emitWarning(module.getLoc()) << cfg->path << ": " << w;
    if (!cfg->errors.empty()) {
      for (const std::string &e : cfg->errors)
        mlir::emitError(module.getLoc()) << cfg->path << ": " << e;
      return signalPassFailure();
    }
    for (TrainStepOp step : module.getOps<TrainStepOp>())
      if (failed(apply(step)))
        return signalPassFailure();
  }

  LogicalResult apply(TrainStepOp step) {
    MLIRContext *ctx = step.getContext();
    int64_t batch = 0;
    if (step.getBodyBlock().getNumArguments() != 0)
      batch =
          cast<RankedTensorType>(step.getBodyBlock().getArgument(0).getType())
              .getDimSize(0);
    if (cfg->trainBatchSize && *cfg->trainBatchSize != batch)
      return mlir::emitError(step.getLoc())
             << "train step @" << step.getSymName() << ": " << cfg->path
             << ": train_batch_size " << *cfg->trainBatchSize
             << " does not match the train step's global batch " << batch;
    if (cfg->trainMicroBatchSizePerGpu) {
      int64_t micro = *cfg->trainMicroBatchSizePerGpu;
      int64_t product;
      bool overflow =
          __builtin_mul_overflow(micro, accumulation, &product) ||
          __builtin_mul_overflow(product, worldSize, &product);
      if (overflow || product != batch) {
        InFlightDiagnostic d = mlir::emitError(step.getLoc());
        d << "train step @" << step.getSymName() << ": " << cfg->path
          << ": train_micro_batch_size_per_gpu " << micro
          << " x gradient_accumulation_steps " << accumulation
          << " x world size " << worldSize << " = ";
        if (overflow)
          d << "a product that overflows int64, which";
        else
          d << product;
        return d << " does not match the global batch " << batch
                 << (cfg->trainBatchSize ? " (train_batch_size)" : "");
      }
    }

    OptimizerAttr opt = step.getOptimizer();
    auto pick = [](std::optional<double> v, APFloat old) {
      return v ? APFloat(*v) : old;
    };
    OptimizerKind kind = opt.getKind();
    if (cfg->optimizerType)
      kind = *cfg->optimizerType == "adamw" ? OptimizerKind::adamw
                                            : OptimizerKind::adam;
    auto emitError = [&]() -> InFlightDiagnostic {
      InFlightDiagnostic diag = mlir::emitError(step.getLoc());
      diag << "train step @" << step.getSymName() << ": " << cfg->path << ": ";
      return diag;
    };
    APFloat lr = pick(cfg->lr, opt.getLr());
    LrScheduleAttr sched = opt.getSchedule();
    if (cfg->schedulerType &&
        !(sched = readSchedule(ctx, lr.convertToDouble(), emitError)))
      return failure();
    auto newOpt = OptimizerAttr::getChecked(
        emitError, ctx, kind, lr, pick(cfg->beta1, opt.getBeta1()),
        pick(cfg->beta2, opt.getBeta2()), pick(cfg->eps, opt.getEps()),
        pick(cfg->weightDecay, opt.getWeightDecay()),
        cfg->biasCorrection.value_or(opt.getBiasCorrection()), sched);
    if (!newOpt)
      return failure();
    step.setOptimizerAttr(newOpt);

    PrecisionAttr prec = step.getPrecision();
    auto newPrec = PrecisionAttr::getChecked(
        emitError, ctx, prec.getKind(),
        cfg->initialScalePower.value_or(prec.getInitialScalePower()),
        cfg->lossScaleWindow.value_or(prec.getLossScaleWindow()),
        cfg->hysteresis.value_or(prec.getHysteresis()),
        pick(cfg->minLossScale, prec.getMinLossScale()));
    if (!newPrec)
      return failure();
    step.setPrecisionAttr(newPrec);
    return success();
  }

  /// The `scheduler` section with "auto" resolved as Hugging Face's
  /// DeepSpeed integration does: warmup_min_lr 0, warmup_max_lr the
  /// optimizer's lr, warmup_num_steps its default warmup of 0 steps.
  LrScheduleAttr readSchedule(MLIRContext *ctx, double lr,
                              function_ref<InFlightDiagnostic()> emitError) {
    std::vector<LrScheduleParam> params;
    for (auto [name, value] : cfg->schedulerParams) {
      if (value == "auto") {
        if (name == "warmup_min_lr" || name == "warmup_num_steps") {
          value = "0";
        } else if (name == "warmup_max_lr") {
          char text[32];
          std::snprintf(text, sizeof(text), "%.17g", lr);
          value = text;
        } else if (name == "total_num_steps") {
          emitError() << "scheduler.params.total_num_steps: \"auto\" is the "
                         "length of the run, which Hugging Face's Trainer "
                         "knows and a compiled step does not; give the "
                         "number of optimizer steps";
          return {};
        } else {
          emitError() << "scheduler.params." << name
                      << ": \"auto\" is only resolved for warmup_min_lr, "
                         "warmup_max_lr, warmup_num_steps (as Hugging Face "
                         "does); give a value";
          return {};
        }
      }
      params.emplace_back(name, value);
    }
    return buildLrSchedule(ctx, *cfg->schedulerType, params, [&]() {
      InFlightDiagnostic d = emitError();
      d << "scheduler: ";
      return d;
    });
  }

  std::shared_ptr<const DeepSpeedConfig> cfg;
  int64_t worldSize, accumulation;
};

/// The explicit option if given, else the config's value, else the default.
template <typename T, typename U>
T choose(const mlir::detail::PassOptions::Option<T> &opt,
         const std::optional<U> &v) {
  if (opt.hasValue() || !v)
    return opt;
  return static_cast<T>(*v);
}

/// The passes after mixed precision: what the ZeRO options decide. The
/// explicit options win over `cfg`'s values.
void addSchedulePasses(OpPassManager &pm, const ZeroPipelineOptions &o,
                       const DeepSpeedConfig &cfg, int64_t accumulation) {
  ZeroPartitionPassOptions part;
  part.stage = choose(o.stage, cfg.stage);
  part.worldSize = o.worldSize;
  part.alignment = o.alignment;
  pm.addPass(createZeroPartitionPass(part));

  ZeroGradSyncPassOptions sync;
  sync.reduceBucketSize = choose(o.reduceBucketSize, cfg.reduceBucketSize);
  sync.reduceScatter = choose(o.reduceScatter, cfg.reduceScatter);
  sync.overlapComm = choose(o.overlapComm, cfg.overlapComm);
  sync.contiguousGradients =
      choose(o.contiguousGradients, cfg.contiguousGradients);
  sync.gradientAccumulationSteps = accumulation;
  pm.addPass(createZeroGradSyncPass(sync));

  ZeroParamGatherPassOptions gather;
  gather.allgatherBucketSize =
      choose(o.allgatherBucketSize, cfg.allgatherBucketSize);
  gather.paramPersistenceThreshold =
      choose(o.paramPersistenceThreshold, cfg.paramPersistenceThreshold);
  gather.maxReuseDistance = choose(o.maxReuseDistance, cfg.maxReuseDistance);
  pm.addPass(createZeroParamGatherPass(gather));

  if (part.stage == 3) {
    ZeroPrefetchPassOptions prefetch;
    prefetch.prefetchBucketSize =
        choose(o.prefetchBucketSize, cfg.prefetchBucketSize);
    prefetch.maxLiveParameters =
        choose(o.maxLiveParameters, cfg.maxLiveParameters);
    pm.addPass(createZeroPrefetchPass(prefetch));
  }

  ZeroOptimizerPassOptions opt;
  opt.gradientClipping = choose(o.gradientClipping, cfg.gradientClipping);
  opt.lrSchedule = o.lrSchedule;
  opt.biasCorrection = o.biasCorrection;
  opt.noDecayBiasNorm = o.noDecayBiasNorm;
  opt.noDecayEmbeddings = o.noDecayEmbeddings;
  pm.addPass(createZeroOptimizerPass(opt));
  if (o.verify)
    pm.addPass(createZeroVerifySchedulePass());
}

} // namespace

void mlir::zero::buildZeroPipeline(OpPassManager &pm,
                                   const ZeroPipelineOptions &o) {
  auto cfg = std::make_shared<DeepSpeedConfig>();
  if (!o.config.empty())
    *cfg = parseDeepSpeedConfig(o.config);

  int64_t worldSize = o.worldSize;
  int64_t accumulation =
      choose(o.gradientAccumulationSteps, cfg->gradientAccumulationSteps);
  if (!o.config.empty())
    pm.addPass(std::make_unique<ApplyDeepSpeedConfigPass>(cfg, worldSize,
                                                          accumulation));
  pm.addPass(createZeroAutodiffPass());

  ZeroMixedPrecisionPassOptions mp;
  mp.dtype = choose(o.dtype, cfg->dtype);
  pm.addPass(createZeroMixedPrecisionPass(mp));
  addSchedulePasses(pm, o, *cfg, accumulation);
}

void mlir::zero::buildZeroSchedulePipeline(OpPassManager &pm,
                                           const ZeroPipelineOptions &o) {
  addSchedulePasses(pm, o, DeepSpeedConfig(), o.gradientAccumulationSteps);
}

void mlir::zero::registerZeroPipeline() {
  PassPipelineRegistration<ZeroPipelineOptions>(
      "zero-pipeline",
      "Autodiff, mixed precision and the ZeRO passes (partition, grad-sync, "
      "param-gather, prefetch at stage 3, optimizer), optionally driven by a "
      "DeepSpeed ds_config.json",
      buildZeroPipeline);
}
