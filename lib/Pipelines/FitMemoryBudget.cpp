//===- FitMemoryBudget.cpp - zero-pipeline's memory-budget search ---------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/Analysis/CostModel.h"
#include "zero/Dialect/Zero/Analysis/MemoryPlan.h"
#include "zero/Dialect/Zero/Analysis/Report.h"
#include "zero/Dialect/Zero/IR/ZeroDialect.h"
#include "zero/Dialect/Zero/Transforms/Remat.h"

#include "PipelineDetail.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::zero;
using namespace mlir::zero::pipeline;

namespace {

/// Fits the plan's peak within a memory budget: the schedule passes run on
/// a copy of the module for each candidate (recomputation first, then
/// smaller buckets and prefetch windows), the planner and the cost model
/// judge it, and the fastest candidate that fits is applied. Created only
/// by zero-pipeline (with memory-budget or remat=auto).
struct FitMemoryBudgetPass
    : public PassWrapper<FitMemoryBudgetPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(FitMemoryBudgetPass)

  /// `rematBlocks`: the remat policy given covers only the first blocks.
  FitMemoryBudgetPass(const ZeroPipelineOptions &options,
                      std::optional<int64_t> rematBlocks,
                      AddZeroPasses addZeroPasses)
      : options(copyOptions(options)), rematBlocks(rematBlocks),
        addZeroPasses(addZeroPasses) {}

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

  std::unique_ptr<ZeroPipelineOptions> optionsOf(const Candidate &c) const {
    std::unique_ptr<ZeroPipelineOptions> o = copyOptions(*options);
    if (c.divisor == 1)
      return o;
    // Sizes above the model's elements all act alike.
    auto shrink = [&](mlir::detail::PassOptions::Option<int64_t> &v) {
      v = std::max<int64_t>(1, std::min<int64_t>(v, modelElements) / c.divisor);
    };
    shrink(o->reduceBucketSize);
    shrink(o->allgatherBucketSize);
    shrink(o->prefetchBucketSize);
    shrink(o->maxLiveParameters);
    shrink(o->maxReuseDistance);
    return o;
  }

  /// Schedules a copy of `module` as `c` says, then plans and costs it.
  FailureOr<Outcome> evaluate(ModuleOp module, const Candidate &c) {
    auto copy = std::make_shared<OwningOpRef<ModuleOp>>(module.clone());
    // A copy is not nested under the module, so it gets a pass manager of
    // its own.
    PassManager pm(&getContext(), ModuleOp::getOperationName());
    addZeroPasses(pm, *optionsOf(c), c.remat);
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
    if (r.layerBlocks == 0 && r.selectiveBlocks == 0 && r.opBlocks == 0)
      os << "remat none";
    if (r.layerBlocks > 0) {
      os << "remat layer on ";
      range(0, r.layerBlocks);
    }
    if (r.selectiveBlocks > 0) {
      os << (r.layerBlocks > 0 ? ", selective on " : "remat selective on ");
      range(r.layerBlocks, r.layerBlocks + r.selectiveBlocks);
    }
    if (r.opBlocks > 0) {
      int64_t begin = r.layerBlocks + r.selectiveBlocks;
      os << "remat op on ";
      range(begin, begin + r.opBlocks);
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
    StringRef policy = options->remat, budgetText = options->memoryBudget,
              hardware = options->hardware;
    if (policy != "auto" && policy != "none" && policy != "layer" &&
        policy != "selective" && policy != "op") {
      fail() << "remat must be none, layer, selective, op or auto, got '"
             << policy << "'";
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
    const HardwarePreset *preset = lookupHardwarePreset(hardware);
    if (!preset) {
      fail() << "unknown hardware '" << hardware
             << "' (known: " << getHardwarePresetNames() << ")";
      return signalPassFailure();
    }
    rates = *preset;
    if (failed(
            applyInterNodeBandwidth(rates, options->interNodeBandwidth, why))) {
      fail() << "inter-node-bandwidth: " << why;
      return signalPassFailure();
    }
    hw = &rates;
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
    bool search = !options->remat.hasValue() || policy == "auto";
    int64_t given = rematBlocks ? std::min(*rematBlocks, numBlocks) : numBlocks;
    if (search || policy == "none" || given == 0)
      chain.push_back({});
    for (int64_t k = 1; k <= numBlocks; ++k)
      if (search || (k == given && policy == "selective"))
        chain.push_back({{0, k}});
    for (int64_t k = 1; k <= numBlocks; ++k)
      if (search || (k == given && policy == "layer"))
        chain.push_back({{k, search ? numBlocks - k : 0}});
    // The op policy is only tried when given: the search keeps Megatron's
    // two granularities.
    if (!search && policy == "op" && given > 0)
      chain.push_back({{0, 0, given}});

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
               << options->stage.getValue() << " on "
               << options->worldSize.getValue()
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
    // offload-activations=auto offloaded what each candidate needed.
    int64_t offloaded = 0;
    module.walk([&](OffloadActivationOp) { ++offloaded; });
    std::string offloads =
        offloaded
            ? llvm::formatv(", {0} activations offloaded", offloaded).str()
            : std::string();
    mlir::emitRemark(module.getLoc())
        << "memory budget " << budgetText << ": "
        << describe(chosen->candidate, numBlocks) << offloads << "; peak "
        << chosen->peakBytes << " bytes per rank ("
        << budget - chosen->peakBytes << " bytes free), predicted step "
        << llvm::formatv("{0:F3}", chosen->stepMs).str() << " ms on "
        << hw->name;
  }

  /// The options of the schedule passes; `remat` given or not, and
  /// `memory-budget` and `hardware`, steer the search.
  std::shared_ptr<const ZeroPipelineOptions> options;
  std::optional<int64_t> rematBlocks;
  AddZeroPasses addZeroPasses;
  int64_t budget = 0, modelElements = 0;
  const HardwarePreset *hw = nullptr;
  /// The preset with the pipeline's inter-node-bandwidth.
  HardwarePreset rates;
  static constexpr int64_t kMaxDivisor = 256;
};

} // namespace

std::unique_ptr<Pass>
pipeline::createFitMemoryBudgetPass(const ZeroPipelineOptions &options,
                                    std::optional<int64_t> rematBlocks,
                                    AddZeroPasses addZeroPasses) {
  return std::make_unique<FitMemoryBudgetPass>(options, rematBlocks,
                                               addZeroPasses);
}
