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
// options: bucket sizes may depend on the model's hidden size.
//
//===----------------------------------------------------------------------===//

#include "zero/Pipelines/Pipeline.h"
#include "zero/Dialect/NN/IR/NNDialect.h"
#include "zero/Dialect/Zero/Analysis/CostModel.h"
#include "zero/Dialect/Zero/Analysis/MemoryPlan.h"
#include "zero/Dialect/Zero/Analysis/Passes.h"
#include "zero/Dialect/Zero/Analysis/Report.h"
#include "zero/Dialect/Zero/IR/ZeroDialect.h"
#include "zero/Dialect/Zero/Transforms/LrSchedule.h"
#include "zero/Dialect/Zero/Transforms/Passes.h"
#include "zero/Dialect/Zero/Transforms/Remat.h"
#include "zero/Pipelines/DeepSpeedConfig.h"

#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/FormatVariadic.h"

#include <cstdio>
#include <memory>

using namespace mlir;
using namespace mlir::zero;

namespace {

/// The options of the passes zero-pipeline runs.
struct PipelineSettings {
  int64_t stage, worldSize, alignment;
  std::string dtype;
  int64_t reduceBucketSize;
  bool reduceScatter, overlapComm, contiguousGradients;
  int64_t accumulation, allgatherBucketSize, paramPersistenceThreshold,
      maxReuseDistance, prefetchBucketSize, maxLiveParameters;
  double gradientClipping;
  /// zero-optimizer's offload options.
  std::string offloadOptimizer, offloadParam, nvmePath, paramNvmePath;
  int64_t nvmeBufferCount, nvmeBufferSize, paramBufferCount, paramBufferSize;
  bool verify;
  /// zero-pad-vocab's multiple; 0 leaves the vocabulary as it is.
  int64_t padVocab;
  /// zero-remat's policy, whether it was given (by option or config), the
  /// blocks it covers (-1: all) and the memory budget to fit.
  std::string remat;
  bool rematGiven;
  int64_t rematFirstBlocks;
  std::string memoryBudget, hardware;
  /// zero-optimizer's settings of #zero.optimizer and the weight-decay
  /// groups (empty: the train step's).
  std::string lrSchedule, biasCorrection;
  bool noDecayBiasNorm, noDecayEmbeddings;
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
void addZeroPasses(OpPassManager &pm, const PipelineSettings &s,
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
  ZeroPartitionPassOptions part;
  part.stage = s.stage;
  part.worldSize = s.worldSize;
  part.alignment = s.alignment;
  pm.addPass(createZeroPartitionPass(part));

  ZeroGradSyncPassOptions sync;
  sync.reduceBucketSize = s.reduceBucketSize;
  sync.reduceScatter = s.reduceScatter;
  sync.overlapComm = s.overlapComm;
  sync.contiguousGradients = s.contiguousGradients;
  sync.gradientAccumulationSteps = s.accumulation;
  pm.addPass(createZeroGradSyncPass(sync));

  ZeroParamGatherPassOptions gather;
  gather.allgatherBucketSize = s.allgatherBucketSize;
  gather.paramPersistenceThreshold = s.paramPersistenceThreshold;
  gather.maxReuseDistance = s.maxReuseDistance;
  gather.offloadParam = s.offloadParam;
  gather.nvmePath = s.nvmePath;
  gather.paramNvmePath = s.paramNvmePath;
  gather.paramBufferCount = s.paramBufferCount;
  gather.paramBufferSize = s.paramBufferSize;
  pm.addPass(createZeroParamGatherPass(gather));

  if (s.stage == 3) {
    ZeroPrefetchPassOptions prefetch;
    prefetch.prefetchBucketSize = s.prefetchBucketSize;
    prefetch.maxLiveParameters = s.maxLiveParameters;
    pm.addPass(createZeroPrefetchPass(prefetch));
  }

  ZeroOptimizerPassOptions opt;
  opt.gradientClipping = s.gradientClipping;
  opt.lrSchedule = s.lrSchedule;
  opt.biasCorrection = s.biasCorrection;
  opt.noDecayBiasNorm = s.noDecayBiasNorm;
  opt.noDecayEmbeddings = s.noDecayEmbeddings;
  opt.offloadOptimizer = s.offloadOptimizer;
  opt.offloadParam = s.offloadParam;
  opt.nvmePath = s.nvmePath;
  opt.nvmeBufferCount = s.nvmeBufferCount;
  opt.nvmeBufferSize = s.nvmeBufferSize;
  pm.addPass(createZeroOptimizerPass(opt));
}

/// Fits the plan's peak within a memory budget: the schedule passes run on
/// a copy of the module for each candidate (recomputation first, then
/// smaller buckets and prefetch windows), the planner and the cost model
/// judge it, and the fastest candidate that fits is applied. Created only
/// by zero-pipeline (with memory-budget or remat=auto).
struct FitMemoryBudgetPass
    : public PassWrapper<FitMemoryBudgetPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(FitMemoryBudgetPass)

  FitMemoryBudgetPass(PipelineSettings options, std::string policy,
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

  PipelineSettings optionsOf(const Candidate &c) const {
    PipelineSettings o = options;
    if (c.divisor == 1)
      return o;
    // Sizes above the model's elements all act alike.
    auto shrink = [&](int64_t v) {
      return std::max<int64_t>(1, std::min(v, modelElements) / c.divisor);
    };
    o.reduceBucketSize = shrink(o.reduceBucketSize);
    o.allgatherBucketSize = shrink(o.allgatherBucketSize);
    o.prefetchBucketSize = shrink(o.prefetchBucketSize);
    o.maxLiveParameters = shrink(o.maxLiveParameters);
    o.maxReuseDistance = shrink(o.maxReuseDistance);
    return o;
  }

  /// Schedules a copy of `module` as `c` says, then plans and costs it.
  FailureOr<Outcome> evaluate(ModuleOp module, const Candidate &c) {
    auto copy = std::make_shared<OwningOpRef<ModuleOp>>(module.clone());
    // A copy is not nested under the module, so it gets a pass manager of
    // its own.
    PassManager pm(&getContext(), ModuleOp::getOperationName());
    addZeroPasses(pm, optionsOf(c), c.remat);
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
               << options.stage << " on " << options.worldSize
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

  PipelineSettings options;
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
/// them, then the verifier.
void addSchedulePasses(OpPassManager &pm, const PipelineSettings &s) {
  if (!s.memoryBudget.empty() || s.remat == "auto") {
    pm.addPass(std::make_unique<FitMemoryBudgetPass>(
        s, s.remat, s.rematGiven, s.rematFirstBlocks, s.memoryBudget,
        s.hardware));
  } else {
    if (s.remat != "none") {
      ZeroRematPassOptions r;
      r.policy = s.remat;
      r.firstBlocks = s.rematFirstBlocks;
      pm.addPass(createZeroRematPass(r));
    }
    addZeroPasses(pm, s, RematChoice());
  }
  if (s.verify)
    pm.addPass(createZeroVerifySchedulePass());
}

void addPasses(OpPassManager &pm, const PipelineSettings &s) {
  if (s.padVocab != 0) {
    ZeroPadVocabPassOptions pad;
    pad.multiple = s.padVocab;
    pm.addPass(createZeroPadVocabPass(pad));
  }
  pm.addPass(createZeroAutodiffPass());

  ZeroMixedPrecisionPassOptions mp;
  mp.dtype = s.dtype;
  pm.addPass(createZeroMixedPrecisionPass(mp));
  addSchedulePasses(pm, s);
}

/// Which of the options that "auto" or the batch arithmetic may set were
/// given explicitly (they win over the file).
struct ExplicitOptions {
  bool dtype, reduceBucketSize, accumulation, paramPersistenceThreshold,
      prefetchBucketSize, gradientClipping;
};

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
    if (isa<nn::LayerNormOp, nn::RmsNormOp>(op)) {
      norm = {cast<ShapedType>(op->getOperand(1).getType()).getDimSize(0), op};
      return WalkResult::interrupt();
    }
    if (auto e = dyn_cast<nn::EmbeddingOp>(op); e && !embedding)
      embedding = {e.getTable().getType().getDimSize(1), op};
    return WalkResult::advance();
  });
  return norm ? norm : embedding;
}

std::string formatValue(double v) { return formatDeepSpeedNumber(v); }
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
                           PipelineSettings settings, ExplicitOptions given)
      : cfg(std::move(cfg)), settings(std::move(settings)), given(given) {}

  StringRef getArgument() const override { return "zero-apply-ds-config"; }
  StringRef getDescription() const override {
    return "Apply a DeepSpeed config to the train steps and run the ZeRO "
           "passes (zero-pipeline)";
  }

  void getDependentDialects(DialectRegistry &registry) const override {
    OpPassManager pm(ModuleOp::getOperationName());
    PipelineSettings s = settings;
    s.stage = 3; // Every pass.
    addPasses(pm, s);
    pm.getDependentDialects(registry);
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
    PipelineSettings s = settings;
    auto steps = llvm::to_vector(module.getOps<TrainStepOp>());
    if (!steps.empty() &&
        (failed(resolveBatch(steps, s)) || failed(resolveSizes(module, s)) ||
         failed(resolvePrecision(steps.front(), s))))
      return signalPassFailure();
    if (failed(checkOffload(s)))
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
    addPasses(pm, s);
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

  /// DeepSpeed's batch arithmetic (_set_batch_related_parameters and
  /// _batch_assertion) over train_batch_size, train_micro_batch_size_per_gpu,
  /// gradient_accumulation_steps and the world size, the "auto" values
  /// filled first as the Hugging Face Trainer fills them. The train step's
  /// batch is the global batch, and stands for train_batch_size when the
  /// file gives neither it nor the micro batch.
  LogicalResult resolveBatch(ArrayRef<TrainStepOp> steps, PipelineSettings &s) {
    TrainStepOp first = steps.front();
    int64_t batch = globalBatch(first);
    int64_t world = s.worldSize;
    if (world < 1)
      return success(); // zero-partition says why.
    const DeepSpeedValue<int64_t> &cfgTrain = cfg->trainBatchSize;
    const DeepSpeedValue<int64_t> &cfgMicro = cfg->trainMicroBatchSizePerGpu;
    const DeepSpeedValue<int64_t> &cfgAcc = cfg->gradientAccumulationSteps;
    std::optional<int64_t> train = cfgTrain.value, micro = cfgMicro.value,
                           acc = cfgAcc.value;
    if (given.accumulation || cfgAcc.isAuto)
      acc = s.accumulation;
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
      int64_t k = acc.value_or(s.accumulation);
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
    s.accumulation = *acc;
    return success();
  }

  /// Bucket sizes from the hidden size, as the Trainer's
  /// trainer_config_finalize sets them (the stage-3 ones at stage 3 only).
  LogicalResult resolveSizes(ModuleOp module, PipelineSettings &s) {
    struct Auto {
      const DeepSpeedValue<int64_t> &value;
      bool explicitOption;
      bool stage3Only;
      StringRef key;
      int64_t &setting;
    } autos[] = {
        {cfg->reduceBucketSize, given.reduceBucketSize, false,
         "zero_optimization.reduce_bucket_size", s.reduceBucketSize},
        {cfg->prefetchBucketSize, given.prefetchBucketSize, true,
         "zero_optimization.stage3_prefetch_bucket_size", s.prefetchBucketSize},
        {cfg->paramPersistenceThreshold, given.paramPersistenceThreshold, true,
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
        resolved(a.value, a.key, a.setting, "hidden^2, " + from);
      } else if (a.key.ends_with("prefetch_bucket_size")) {
        a.setting = static_cast<int64_t>(0.9 * h * h);
        resolved(a.value, a.key, a.setting, "int(0.9 * hidden^2), " + from);
      } else {
        a.setting = 10 * h;
        resolved(a.value, a.key, a.setting, "10 * hidden, " + from);
      }
    }
    return success();
  }

  /// fp16/bf16 "enabled": "auto" from the train step's precision (the
  /// Trainer's --fp16/--bf16), then the precision the file asks for.
  LogicalResult resolvePrecision(TrainStepOp step, PipelineSettings &s) {
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
    if (given.dtype)
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
  LogicalResult checkOffload(const PipelineSettings &s) {
    auto device = [](const DeepSpeedValue<std::string> &v) {
      return v.value ? symbolizeOffloadDevice(*v.value).value_or(
                           OffloadDevice::none)
                     : OffloadDevice::none;
    };
    OffloadDevice optimizer = device(cfg->offloadOptimizer);
    OffloadDevice param = device(cfg->offloadParam);
    bool fileOptimizer = optimizer != OffloadDevice::none &&
                         s.offloadOptimizer == *cfg->offloadOptimizer.value;
    bool fileParam = param != OffloadDevice::none &&
                     s.offloadParam == *cfg->offloadParam.value;
    if (fileOptimizer && s.stage < 1)
      return errorAt(cfg->offloadOptimizer)
             << "zero_optimization.offload_optimizer: optimizer offload needs "
                "ZeRO stage 1, 2 or 3, the stage is "
             << s.stage;
    if (fileParam && s.stage != 3)
      return errorAt(cfg->offloadParam)
             << "zero_optimization.offload_param: parameter offload needs "
                "ZeRO stage 3, the stage is "
             << s.stage;
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

  /// Optimizer values and gradient_clipping "auto": the train step's own
  /// (the Trainer's --learning_rate, --adam_beta1, ...).
  void resolveOptimizer(TrainStepOp step, PipelineSettings &s) {
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
    if (cfg->gradientClipping.isAuto && !given.gradientClipping) {
      s.gradientClipping = -1.0; // The train step's.
      resolved(cfg->gradientClipping, "gradient_clipping",
               step.getGradientClipping().convertToDouble(),
               "the train step's gradient_clipping");
    }
  }

  /// The `scheduler` section, "auto" resolved as Hugging Face's integration
  /// resolves it: warmup_min_lr 0, warmup_max_lr the optimizer's lr (the
  /// file's, else the train step's) and warmup_num_steps the Trainer's
  /// default warmup of 0 steps. total_num_steps "auto" is the Trainer's
  /// number of training steps, which a compiled step cannot know (the
  /// executable's --steps is chosen when it runs), so it is an error.
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
        errorAt(p.value) << key
                         << ": cannot resolve \"auto\": it is the length of "
                            "the run, which Hugging Face's Trainer knows and "
                            "a compiled step does not; give the number of "
                            "optimizer steps";
        return {};
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
      LrScheduleAttr schedule;
    } o{opt.getKind(),           opt.getLr(),      opt.getBeta1(),
        opt.getBeta2(),          opt.getEps(),     opt.getWeightDecay(),
        opt.getBiasCorrection(), opt.getSchedule()};
    auto makeOpt = [&](auto emitError, const OptParams &p) {
      return OptimizerAttr::getChecked(emitError, ctx, p.kind, p.lr, p.beta1,
                                       p.beta2, p.eps, p.weightDecay,
                                       p.biasCorrection, p.schedule);
    };
    OptParams newOpt = o;
    bool ok = take(cfg->lr, o, newOpt, &OptParams::lr, makeOpt);
    ok &= take(cfg->beta1, o, newOpt, &OptParams::beta1, makeOpt);
    ok &= take(cfg->beta2, o, newOpt, &OptParams::beta2, makeOpt);
    ok &= take(cfg->eps, o, newOpt, &OptParams::eps, makeOpt);
    ok &= take(cfg->weightDecay, o, newOpt, &OptParams::weightDecay, makeOpt);
    ok &= take(cfg->biasCorrection, o, newOpt, &OptParams::biasCorrection,
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

    if (cfg->adamW.value)
      newOpt.kind =
          *cfg->adamW.value ? OptimizerKind::adamw : OptimizerKind::adam;
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
  PipelineSettings settings;
  ExplicitOptions given;
  /// The precision the file asks for, if any.
  std::optional<PrecisionKind> dtype;
  /// The file's learning-rate schedule, if it has a `scheduler`.
  LrScheduleAttr schedule;
};

/// The explicit option if given, else the config's value, else the default.
template <typename T, typename U>
T choose(const mlir::detail::PassOptions::Option<T> &opt,
         const DeepSpeedValue<U> &v) {
  if (opt.hasValue() || !v.value)
    return opt;
  return static_cast<T>(*v.value);
}

/// The pass options: the explicit options win over `cfg`'s values.
PipelineSettings settingsFor(const ZeroPipelineOptions &o,
                             const DeepSpeedConfig &cfg) {
  PipelineSettings s;
  s.stage = choose(o.stage, cfg.stage);
  s.worldSize = o.worldSize;
  s.alignment = o.alignment;
  s.dtype = o.dtype;
  s.reduceBucketSize = choose(o.reduceBucketSize, cfg.reduceBucketSize);
  s.reduceScatter = choose(o.reduceScatter, cfg.reduceScatter);
  s.overlapComm = choose(o.overlapComm, cfg.overlapComm);
  s.contiguousGradients =
      choose(o.contiguousGradients, cfg.contiguousGradients);
  s.accumulation = o.gradientAccumulationSteps;
  s.allgatherBucketSize =
      choose(o.allgatherBucketSize, cfg.allgatherBucketSize);
  s.paramPersistenceThreshold =
      choose(o.paramPersistenceThreshold, cfg.paramPersistenceThreshold);
  s.maxReuseDistance = choose(o.maxReuseDistance, cfg.maxReuseDistance);
  s.prefetchBucketSize = choose(o.prefetchBucketSize, cfg.prefetchBucketSize);
  s.maxLiveParameters = choose(o.maxLiveParameters, cfg.maxLiveParameters);
  s.gradientClipping = choose(o.gradientClipping, cfg.gradientClipping);
  s.offloadOptimizer = choose(o.offloadOptimizer, cfg.offloadOptimizer);
  s.offloadParam = choose(o.offloadParam, cfg.offloadParam);
  // DeepSpeed reads nvme_path only for a device "nvme" (Hugging Face's
  // examples give one beside "cpu").
  auto onNvme = [](const DeepSpeedValue<std::string> &device) {
    return device.value == std::optional<std::string>("nvme");
  };
  s.nvmePath = o.nvmePath.hasValue() || !onNvme(cfg.offloadOptimizer)
                   ? o.nvmePath.getValue()
                   : cfg.nvmePath.value.value_or("");
  s.paramNvmePath = o.paramNvmePath.hasValue() || !onNvme(cfg.offloadParam)
                        ? o.paramNvmePath.getValue()
                        : cfg.paramNvmePath.value.value_or("");
  s.nvmeBufferCount = choose(o.nvmeBufferCount, cfg.optimizerBufferCount);
  s.nvmeBufferSize = o.nvmeBufferSize;
  s.paramBufferCount = choose(o.paramBufferCount, cfg.paramBufferCount);
  s.paramBufferSize = choose(o.paramBufferSize, cfg.paramBufferSize);
  s.verify = o.verify;
  s.padVocab = o.padVocab;
  s.remat =
      o.remat.hasValue() ? o.remat.getValue() : cfg.remat.value_or("none");
  s.rematGiven = o.remat.hasValue() || cfg.remat;
  s.rematFirstBlocks =
      o.remat.hasValue() ? -1 : cfg.rematBlocks.value.value_or(-1);
  s.memoryBudget = o.memoryBudget;
  s.hardware = o.hardware;
  s.lrSchedule = o.lrSchedule;
  s.biasCorrection = o.biasCorrection;
  s.noDecayBiasNorm = o.noDecayBiasNorm;
  s.noDecayEmbeddings = o.noDecayEmbeddings;
  return s;
}

} // namespace

void mlir::zero::buildZeroPipeline(OpPassManager &pm,
                                   const ZeroPipelineOptions &o) {
  auto cfg = std::make_shared<DeepSpeedConfig>();
  if (!o.config.empty())
    *cfg = parseDeepSpeedConfig(o.config);
  PipelineSettings s = settingsFor(o, *cfg);
  if (o.config.empty())
    return addPasses(pm, s);
  ExplicitOptions given{o.dtype.hasValue(),
                        o.reduceBucketSize.hasValue(),
                        o.gradientAccumulationSteps.hasValue(),
                        o.paramPersistenceThreshold.hasValue(),
                        o.prefetchBucketSize.hasValue(),
                        o.gradientClipping.hasValue()};
  pm.addPass(std::make_unique<ApplyDeepSpeedConfigPass>(cfg, s, given));
}

void mlir::zero::buildZeroSchedulePipeline(OpPassManager &pm,
                                           const ZeroPipelineOptions &o) {
  addSchedulePasses(pm, settingsFor(o, DeepSpeedConfig()));
}

void mlir::zero::registerZeroPipeline() {
  PassPipelineRegistration<ZeroPipelineOptions>(
      "zero-pipeline",
      "Autodiff, mixed precision and the ZeRO passes (partition, grad-sync, "
      "param-gather, prefetch at stage 3, optimizer), optionally driven by a "
      "DeepSpeed ds_config file",
      buildZeroPipeline);
}
