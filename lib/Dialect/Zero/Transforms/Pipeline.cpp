//===- Pipeline.cpp - The zero-pipeline pass pipeline ---------------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/Transforms/Pipeline.h"
#include "zero/Dialect/Zero/Analysis/CostModel.h"
#include "zero/Dialect/Zero/Analysis/MemoryPlan.h"
#include "zero/Dialect/Zero/Analysis/Passes.h"
#include "zero/Dialect/Zero/Analysis/Report.h"
#include "zero/Dialect/Zero/Transforms/Passes.h"
#include "zero/Dialect/Zero/Transforms/Remat.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/FormatVariadic.h"

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
      bool overflow = __builtin_mul_overflow(micro, accumulation, &product) ||
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
    auto newOpt = OptimizerAttr::getChecked(
        emitError, ctx, kind, pick(cfg->lr, opt.getLr()),
        pick(cfg->beta1, opt.getBeta1()), pick(cfg->beta2, opt.getBeta2()),
        pick(cfg->eps, opt.getEps()),
        pick(cfg->weightDecay, opt.getWeightDecay()));
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

/// The resolved options of the passes after zero-mixed-precision.
struct ScheduleOptions {
  ZeroPartitionPassOptions part;
  ZeroGradSyncPassOptions sync;
  ZeroParamGatherPassOptions gather;
  ZeroPrefetchPassOptions prefetch;
  ZeroOptimizerPassOptions opt;
};

/// What zero-remat recomputes: `layer` on blocks [0, layerBlocks), then
/// `selective` on the next `selectiveBlocks` (early blocks first: their
/// activations live longest).
struct RematChoice {
  int64_t layerBlocks = 0, selectiveBlocks = 0;
};

SmallVector<int64_t> blockRange(int64_t begin, int64_t end) {
  SmallVector<int64_t> blocks;
  for (int64_t b = begin; b < end; ++b)
    blocks.push_back(b);
  return blocks;
}

/// zero-remat as `remat` says, then partition, gradient sync, gathers,
/// prefetch (stage 3) and the optimizer.
void addSchedulePasses(OpPassManager &pm, const ScheduleOptions &o,
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
  pm.addPass(createZeroPartitionPass(o.part));
  pm.addPass(createZeroGradSyncPass(o.sync));
  pm.addPass(createZeroParamGatherPass(o.gather));
  if (o.part.stage == 3)
    pm.addPass(createZeroPrefetchPass(o.prefetch));
  pm.addPass(createZeroOptimizerPass(o.opt));
}

/// Fits the plan's peak within a memory budget: the schedule passes run on
/// a copy of the module for each candidate (recomputation first, then
/// smaller buckets and prefetch windows), the planner and the cost model
/// judge it, and the fastest candidate that fits is applied. Created only
/// by zero-pipeline (with memory-budget or remat=auto).
struct FitMemoryBudgetPass
    : public PassWrapper<FitMemoryBudgetPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(FitMemoryBudgetPass)

  FitMemoryBudgetPass(ScheduleOptions options, std::string policy,
                      bool policyGiven, int64_t firstBlocks, std::string budget,
                      std::string hardware)
      : options(std::move(options)), policy(std::move(policy)),
        policyGiven(policyGiven), firstBlocks(firstBlocks),
        budgetText(std::move(budget)), hardware(std::move(hardware)) {}

  StringRef getArgument() const override { return "zero-fit-memory-budget"; }
  StringRef getDescription() const override {
    return "Fit the plan in a memory budget (zero-pipeline)";
  }

  struct Candidate {
    RematChoice remat;
    /// Bucket sizes, prefetch window, live-parameter cap and reuse
    /// distance, each at most the model's elements, divided by this.
    int64_t divisor = 1;
  };
  struct Outcome {
    Candidate candidate;
    int64_t peakBytes = 0, modelStateBytes = 0;
    double stepMs = 0;
    FitVerdict fit;
    /// The scheduled copy of the module.
    std::shared_ptr<OwningOpRef<ModuleOp>> module;
  };

  ScheduleOptions optionsOf(const Candidate &c) const {
    ScheduleOptions o = options;
    if (c.divisor == 1)
      return o;
    // Sizes above the model's elements all act alike.
    auto shrink = [&](int64_t v) {
      return std::max<int64_t>(1, std::min(v, modelElements) / c.divisor);
    };
    o.sync.reduceBucketSize = shrink(o.sync.reduceBucketSize);
    o.gather.allgatherBucketSize = shrink(o.gather.allgatherBucketSize);
    o.prefetch.prefetchBucketSize = shrink(o.prefetch.prefetchBucketSize);
    o.prefetch.maxLiveParameters = shrink(o.prefetch.maxLiveParameters);
    o.gather.maxReuseDistance = shrink(o.gather.maxReuseDistance);
    return o;
  }

  /// Schedules a copy of `module` as `c` says, then plans and costs it.
  FailureOr<Outcome> evaluate(ModuleOp module, const Candidate &c) {
    auto copy = std::make_shared<OwningOpRef<ModuleOp>>(module.clone());
    // A copy is not nested under the module, so it gets a pass manager of
    // its own.
    PassManager pm(&getContext(), ModuleOp::getOperationName());
    addSchedulePasses(pm, optionsOf(c), c.remat);
    if (failed(pm.run(**copy)))
      return failure();
    Outcome out;
    out.candidate = c;
    out.module = copy;
    for (TrainStepOp step : (**copy).getOps<TrainStepOp>()) {
      FailureOr<StepSchedule> schedule = StepSchedule::get(step);
      if (failed(schedule))
        return failure();
      FailureOr<MemoryPlan> plan = computeMemoryPlan(*schedule);
      if (failed(plan))
        return failure();
      FailureOr<StepTimeline> timeline = simulateStep(*schedule, *hw);
      if (failed(timeline))
        return failure();
      if (plan->peakBytes >= out.peakBytes) {
        out.peakBytes = plan->peakBytes;
        out.fit = computeFitVerdict(*plan, budget);
      }
      out.modelStateBytes =
          std::max(out.modelStateBytes, plan->persistentBytes);
      out.stepMs += timeline->stepMs;
    }
    return out;
  }

  static std::string describe(const Candidate &c, int64_t numBlocks) {
    std::string s;
    llvm::raw_string_ostream os(s);
    const RematChoice &r = c.remat;
    auto range = [&](int64_t begin, int64_t end) {
      if (begin == 0 && end == numBlocks)
        os << "all " << numBlocks << " blocks";
      else if (end - begin == 1)
        os << "block " << begin;
      else
        os << "blocks " << begin << "-" << end - 1;
    };
    if (r.layerBlocks == 0 && r.selectiveBlocks == 0)
      os << "remat none";
    if (r.layerBlocks > 0) {
      os << "remat layer on ";
      range(0, r.layerBlocks);
    }
    if (r.selectiveBlocks > 0) {
      os << (r.layerBlocks > 0 ? ", selective on " : "remat selective on ");
      range(r.layerBlocks, r.layerBlocks + r.selectiveBlocks);
    }
    if (c.divisor > 1)
      os << ", buckets, prefetch, live parameters and reuse distance / "
         << c.divisor;
    return s;
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fail = [&]() -> InFlightDiagnostic {
      InFlightDiagnostic d = mlir::emitError(module.getLoc());
      d << "zero-pipeline: ";
      return d;
    };
    if (policy != "auto" && policy != "none" && policy != "layer" &&
        policy != "selective") {
      fail() << "remat must be none, layer, selective or auto, got '" << policy
             << "'";
      return signalPassFailure();
    }
    if (budgetText.empty()) {
      fail() << "remat=auto picks the cheapest recomputation that fits a "
                "memory budget: give memory-budget (--memory-budget 40GiB)";
      return signalPassFailure();
    }
    std::string why;
    std::optional<int64_t> parsed = parseMemoryBudget(budgetText, why);
    if (!parsed) {
      fail() << "bad memory-budget '" << budgetText << "': " << why;
      return signalPassFailure();
    }
    budget = *parsed;
    hw = lookupHardwarePreset(hardware);
    if (!hw) {
      fail() << "unknown hardware '" << hardware
             << "' (known: " << getHardwarePresetNames() << ")";
      return signalPassFailure();
    }
    modelElements = 0;
    for (ParamOp p : module.getOps<ParamOp>())
      modelElements += cast<ShapedType>(p.getType()).getNumElements();
    int64_t numBlocks = 0;
    for (TrainStepOp step : module.getOps<TrainStepOp>())
      numBlocks = std::max<int64_t>(numBlocks, getRematBlocks(step).size());

    // The recomputations to try, cheapest first: none, selective on more
    // and more blocks, then layer on more and more of them (selective on
    // the rest). An explicit remat policy (on its first-blocks) is the only
    // one tried.
    SmallVector<Candidate> chain;
    bool search = !policyGiven || policy == "auto";
    int64_t given =
        firstBlocks < 0 ? numBlocks : std::min(firstBlocks, numBlocks);
    if (search || policy == "none" || given == 0)
      chain.push_back({});
    for (int64_t k = 1; k <= numBlocks; ++k)
      if (search || (k == given && policy == "selective"))
        chain.push_back({{0, k}});
    for (int64_t k = 1; k <= numBlocks; ++k)
      if (search || (k == given && policy == "layer"))
        chain.push_back({{k, search ? numBlocks - k : 0}});

    std::optional<Outcome> chosen, smallest;
    for (const Candidate &c : chain) {
      FailureOr<Outcome> out = evaluate(module, c);
      if (failed(out))
        return signalPassFailure();
      if (out->modelStateBytes > budget) {
        fail() << "memory budget " << budgetText << " (" << budget
               << " bytes) is below the model states alone: "
               << out->modelStateBytes
               << " bytes per rank of parameters, gradients and optimizer "
                  "states at stage "
               << options.part.stage << " on " << options.part.worldSize
               << " ranks, which no recomputation, bucket or prefetch "
                  "setting reduces (a higher stage or more ranks does)";
        return signalPassFailure();
      }
      if (!smallest || out->peakBytes < smallest->peakBytes)
        smallest = *out;
      if (out->peakBytes <= budget && (!chosen || out->stepMs < chosen->stepMs))
        chosen = *out;
    }
    // Then smaller buckets, prefetch window, live parameters and reuse
    // distance (stage 3 gathers again rather than keep) on the
    // recomputation that needs the least memory, down to 1/256 of the model
    // (smaller ones only multiply the collectives).
    for (int64_t divisor = 4; !chosen && divisor <= kMaxDivisor; divisor *= 4) {
      Candidate c{smallest->candidate.remat, divisor};
      FailureOr<Outcome> out = evaluate(module, c);
      if (failed(out))
        return signalPassFailure();
      if (out->peakBytes < smallest->peakBytes)
        smallest = *out;
      if (out->peakBytes <= budget)
        chosen = *out;
    }
    if (!chosen) {
      const Outcome &best = *smallest;
      fail() << "memory budget " << budgetText << " (" << budget
             << " bytes) cannot be met: the best plan ("
             << describe(best.candidate, numBlocks) << ") needs "
             << best.peakBytes << " bytes per rank, " << best.peakBytes - budget
             << " bytes (" << formatByteSize(best.peakBytes - budget)
             << ") over; largest item: " << best.fit.largestItem << " "
             << best.fit.largestItemBytes << " bytes";
      return signalPassFailure();
    }

    // The chosen copy replaces the module's contents.
    Block *body = module.getBody();
    body->clear();
    body->getOperations().splice(body->end(),
                                 (**chosen->module).getBody()->getOperations());
    mlir::emitRemark(module.getLoc())
        << "memory budget " << budgetText << ": "
        << describe(chosen->candidate, numBlocks) << "; peak "
        << chosen->peakBytes << " bytes per rank ("
        << budget - chosen->peakBytes << " bytes free), predicted step "
        << llvm::formatv("{0:F3}", chosen->stepMs).str() << " ms on "
        << hw->name;
  }

  ScheduleOptions options;
  std::string policy;
  bool policyGiven;
  int64_t firstBlocks;
  std::string budgetText, hardware;
  int64_t budget = 0, modelElements = 0;
  const HardwarePreset *hw = nullptr;
  static constexpr int64_t kMaxDivisor = 256;
};

/// The passes after mixed precision, what the ZeRO options decide:
/// zero-remat and partition to optimizer, or the memory-budget search over
/// them, then the verifier. The explicit options win over `cfg`'s values.
void addPassesAfterMixedPrecision(OpPassManager &pm,
                                  const ZeroPipelineOptions &o,
                                  const DeepSpeedConfig &cfg,
                                  int64_t accumulation) {
  ScheduleOptions sched;
  sched.part.stage = choose(o.stage, cfg.stage);
  sched.part.worldSize = o.worldSize;
  sched.part.alignment = o.alignment;

  sched.sync.reduceBucketSize =
      choose(o.reduceBucketSize, cfg.reduceBucketSize);
  sched.sync.reduceScatter = choose(o.reduceScatter, cfg.reduceScatter);
  sched.sync.overlapComm = choose(o.overlapComm, cfg.overlapComm);
  sched.sync.contiguousGradients =
      choose(o.contiguousGradients, cfg.contiguousGradients);
  sched.sync.gradientAccumulationSteps = accumulation;

  sched.gather.allgatherBucketSize =
      choose(o.allgatherBucketSize, cfg.allgatherBucketSize);
  sched.gather.paramPersistenceThreshold =
      choose(o.paramPersistenceThreshold, cfg.paramPersistenceThreshold);
  sched.gather.maxReuseDistance =
      choose(o.maxReuseDistance, cfg.maxReuseDistance);

  sched.prefetch.prefetchBucketSize =
      choose(o.prefetchBucketSize, cfg.prefetchBucketSize);
  sched.prefetch.maxLiveParameters =
      choose(o.maxLiveParameters, cfg.maxLiveParameters);

  sched.opt.gradientClipping = choose(o.gradientClipping, cfg.gradientClipping);

  std::string remat = choose(o.remat, cfg.remat);
  bool rematGiven = o.remat.hasValue() || cfg.remat;
  int64_t firstBlocks = o.remat.hasValue() ? -1 : cfg.rematBlocks.value_or(-1);
  if (!o.memoryBudget.empty() || remat == "auto") {
    pm.addPass(std::make_unique<FitMemoryBudgetPass>(
        sched, remat, rematGiven, firstBlocks, o.memoryBudget, o.hardware));
  } else {
    if (remat != "none") {
      ZeroRematPassOptions r;
      r.policy = remat;
      r.firstBlocks = firstBlocks;
      pm.addPass(createZeroRematPass(r));
    }
    addSchedulePasses(pm, sched, RematChoice());
  }
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
  addPassesAfterMixedPrecision(pm, o, *cfg, accumulation);
}

void mlir::zero::buildZeroSchedulePipeline(OpPassManager &pm,
                                           const ZeroPipelineOptions &o) {
  addPassesAfterMixedPrecision(pm, o, DeepSpeedConfig(),
                               o.gradientAccumulationSteps);
}

void mlir::zero::registerZeroPipeline() {
  PassPipelineRegistration<ZeroPipelineOptions>(
      "zero-pipeline",
      "Autodiff, mixed precision and the ZeRO passes (partition, grad-sync, "
      "param-gather, prefetch at stage 3, optimizer), optionally driven by a "
      "DeepSpeed ds_config.json",
      buildZeroPipeline);
}
