//===- ModelPlan.cpp - The compiler's plans of an estimated model ---------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//
//
// countModel: S and L read off a model file, the buckets of the plan
// zero-pipeline makes of it at the estimate's options, and with --zeropp the
// plan and report of each ZeRO++ and MiCS option beside the papers' figures.
//
//===----------------------------------------------------------------------===//

#include "zero/Estimate/Estimate.h"

#include "zero/Dialect/Zero/Analysis/MemoryPlan.h"
#include "zero/Dialect/Zero/Analysis/Report.h"
#include "zero/Dialect/Zero/Analysis/Schedule.h"
#include "zero/Dialect/Zero/IR/ZeroDialect.h"
#include "zero/Pipelines/Pipeline.h"
#include "zero_rt/optimizers.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"

#include <algorithm>
#include <type_traits>

using namespace llvm;
using namespace zero::estimate;
using mlir::zero::ZeroPipelineOptions;

namespace {

/// Sets `option` to `value` and appends `name=value` to `text`: the options
/// as the output names the pipeline, from the option's own name.
template <typename OptionT, typename T>
void setOption(OptionT &option, const T &value, std::string &text) {
  option = value;
  raw_string_ostream os(text);
  if (!text.empty())
    os << ' ';
  os << option.ArgStr << '=';
  if constexpr (std::is_same_v<T, bool>)
    os << (value ? "true" : "false");
  else
    os << value;
}

/// The estimate's stage, ranks (with `perNode`, the ranks per node too),
/// alignment, dtype and reduce buckets as zero-pipeline options.
void setPlanOptions(ZeroPipelineOptions &pipeline, int64_t stage, bool perNode,
                    const EstimateOptions &options, std::string &text) {
  setOption(pipeline.stage, stage, text);
  setOption(pipeline.worldSize, options.gpusPerNode * options.nodes, text);
  if (perNode)
    setOption(pipeline.ranksPerNode, options.gpusPerNode, text);
  setOption(pipeline.alignment, options.alignment, text);
  setOption(pipeline.dtype, options.dtype, text);
  setOption(pipeline.reduceBucketSize, options.reduceBucketSize, text);
  setOption(pipeline.overlapComm, options.overlapComm, text);
  if (options.target != "cpu")
    setOption(pipeline.target, options.target, text);
}

/// Keeps the first error the context reports in `error` (unless it is set
/// already) while alive, in place of printing it.
struct FirstErrorCapture : mlir::ScopedDiagnosticHandler {
  FirstErrorCapture(mlir::MLIRContext *context, std::string &error)
      : ScopedDiagnosticHandler(context, [&error](mlir::Diagnostic &d) {
          if (d.getSeverity() == mlir::DiagnosticSeverity::Error &&
              error.empty())
            error = d.str();
          return mlir::success();
        }) {}
};

/// Runs zero-pipeline with `pipeline` on `module`; where it fails without
/// an error of its own, `error` says so.
bool runPipeline(mlir::ModuleOp module, const ZeroPipelineOptions &pipeline,
                 std::string &error) {
  mlir::PassManager pm(module.getContext());
  mlir::zero::buildZeroPipeline(pm, pipeline);
  if (succeeded(pm.run(module)))
    return true;
  if (error.empty())
    error = "zero-pipeline failed";
  return false;
}

/// Runs zero-pipeline on `module` with the estimate's options and records
/// the plan's buckets in `counts` (or, where the pipeline refuses the model,
/// its first error, e.g. a batch that the ranks do not divide).
void planBuckets(mlir::ModuleOp module, ModelCounts &counts,
                 const EstimateOptions &options) {
  ZeroPipelineOptions pipeline;
  std::string text;
  setPlanOptions(pipeline, options.stage, /*perNode=*/false, options, text);
  if (options.deepspeed.cpuOffload)
    setOption(pipeline.offloadOptimizer, "cpu", text);
  if (options.deepspeed.cpuOffloadParams)
    setOption(pipeline.offloadParam, "cpu", text);
  counts.planPipeline = text;
  FirstErrorCapture capture(module.getContext(), counts.planError);
  if (!runPipeline(module, pipeline, counts.planError))
    return;
  if (module.getOps<mlir::zero::TrainStepOp>().empty()) {
    counts.planError = "the model has no train step";
    return;
  }
  for (auto step : module.getOps<mlir::zero::TrainStepOp>()) {
    FailureOr<mlir::zero::StepSchedule> schedule =
        mlir::zero::StepSchedule::get(step);
    if (failed(schedule))
      return;
    FailureOr<mlir::zero::MemoryPlan> plan =
        mlir::zero::computeMemoryPlan(*schedule);
    if (failed(plan))
      return;
    counts.planHostBytes = std::max(counts.planHostBytes, plan->hostBytes);
    // The states the layout sizes (factored, or kept by part): the plan's
    // bytes, not the table's per parameter.
    int64_t factored = 0;
    bool anyFactored = false;
    std::map<unsigned, int64_t> parts;
    for (const mlir::zero::PartitionBuffers &p : schedule->getPartitions())
      for (unsigned k = 0; k < mlir::zero::kNumBufferKinds; ++k) {
        if (!p.optimizer || !p.hasBuffer(static_cast<mlir::zero::BufferKind>(k)))
          continue;
        auto kind = static_cast<zrt::optimizers::Kind>(p.optimizer.getKind());
        auto buffer = static_cast<zrt::BufferKind>(k);
        if (zrt::optimizers::isFactored(kind, buffer)) {
          factored += p.bytes[k];
          anyFactored = true;
        } else if (zrt::optimizers::statePart(kind, buffer) !=
                   zrt::optimizers::StatePart::All) {
          parts[k] += p.bytes[k];
        }
      }
    if (anyFactored)
      counts.planFactoredStateBytes =
          std::max(counts.planFactoredStateBytes.value_or(0), factored);
    for (auto [k, bytes] : parts)
      counts.planPartStateBytes[k] =
          std::max(counts.planPartStateBytes[k], bytes);
    counts.planBucketPeakBytes =
        std::max(counts.planBucketPeakBytes,
                 plan->peakByCategory[static_cast<unsigned>(
                     mlir::zero::MemoryCategory::ReduceBuckets)]);
    step.walk([&](mlir::Operation *op) {
      int64_t size = 0;
      if (auto coll = dyn_cast<mlir::zero::CollectiveOpInterface>(op);
          coll && coll.reducesBucket()) {
        auto [begin, end] = *coll.getElementRange();
        size = end - begin;
      }
      counts.planLargestBucket = std::max(counts.planLargestBucket, size);
    });
  }
}

/// The ZeRO++ paper's and MiCS's figures for `o` (ZeroPPOption's theirs):
/// S parameters of c bytes on n ranks, K per node, with hpZ (h > 1), MiCS
/// shard groups of m > 0 ranks, qwZ and qgZ as given.
void setTheirs(ZeroPPOption &o, int64_t s, int64_t n, int64_t k, int64_t c,
               int64_t h, int64_t m, bool qwz, bool qgz) {
  // Model states: 16 bytes per parameter over the partition's ranks
  // (DeepSpeed's memory.rst, at n = m under MiCS), plus hpZ's secondary
  // copy of the c-byte weights over h ranks.
  int64_t ranks = m > 0 ? m : n;
  o.theirMemoryFormula = m > 0 ? "16S/m" : "16S/n";
  o.theirMemoryBytes = 16 * s / ranks;
  if (h > 1) {
    o.theirMemoryFormula += " + " + std::to_string(c) + "S/h";
    o.theirMemoryBytes += c * s / h;
  }
  // Across nodes, in M: the forward gather, the backward gather and the
  // gradient reduce-scatter move M each (ZeRO-3's 3M); qwZ halves the
  // gathers, hpZ keeps the backward one in the node and qgZ sends a
  // quarter of the gradients (ZeRO++'s 0.75M). MiCS's groups within a node
  // cross nothing but the all-reduce of each rank's M/m over the R = n/m
  // replicas, 2M(R-1)/(Rm).
  double coefficient = 0;
  if (!(m > 0 && m <= k)) {
    coefficient += qwz ? 0.5 : 1;
    coefficient += h > 1 ? 0 : qwz ? 0.5 : 1;
    coefficient += qgz ? 0.25 : 1;
  }
  std::string formula;
  if (coefficient > 0) {
    raw_string_ostream os(formula);
    os << format("%g", coefficient) << "M";
  }
  o.theirVolume = coefficient;
  if (m > 0 && m < n) {
    int64_t r = n / m;
    o.theirVolume += 2.0 * double(r - 1) / double(r * m);
    formula += (formula.empty() ? "" : " + ") + std::string("2M(R-1)/(Rm)");
  }
  o.theirVolumeFormula = formula.empty() ? "0" : formula;
}

/// One ZeRO++ or MiCS choice of --zeropp.
struct ZeroPPChoice {
  int64_t hpz, mics;
  bool qwz, qgz = false;
};

/// The choices --zeropp compiles: ZeRO-3, hpZ over `h` and MiCS over `m`
/// ranks, each without and with qwZ, and across nodes qgZ.
SmallVector<ZeroPPChoice> getZeroPPChoices(const EstimateOptions &options,
                                           int64_t h, int64_t m) {
  int64_t n = options.gpusPerNode * options.nodes;
  // hpZ over one rank and MiCS over the world are ZeRO-3 itself.
  SmallVector<ZeroPPChoice> choices;
  for (bool qwz : {false, true}) {
    choices.push_back({1, 0, qwz});
    if (h > 1)
      choices.push_back({h, 0, qwz});
    if (m < n)
      choices.push_back({1, m, qwz});
  }
  // qgZ only across nodes (on one node DeepSpeed reduces as ZeRO-3 does):
  // alone, with qwZ, and as all of ZeRO++.
  if (options.nodes > 1) {
    choices.push_back({1, 0, false, true});
    choices.push_back({1, 0, true, true});
    if (h > 1)
      choices.push_back({h, 0, true, true});
  }
  return choices;
}

/// The memory plan's and the report's numbers of the step in `module`,
/// scheduled, into `o`.
void recordReport(mlir::ModuleOp module, const mlir::zero::HardwarePreset &hw,
                  bool step, ZeroPPOption &o) {
  auto steps = module.getOps<mlir::zero::TrainStepOp>();
  if (steps.empty())
    return;
  FailureOr<mlir::zero::StepSchedule> schedule =
      mlir::zero::StepSchedule::get(*steps.begin());
  FailureOr<mlir::zero::MemoryPlan> plan = failure();
  FailureOr<mlir::zero::StepReport> report = failure();
  if (succeeded(schedule))
    plan = mlir::zero::computeMemoryPlan(*schedule);
  if (succeeded(plan))
    report = mlir::zero::computeReport(*schedule, *plan, hw);
  if (failed(report))
    return;
  o.modelStateBytes = report->modelStateBytes;
  o.secondaryBytes = report->hpzSecondaryBytes;
  o.peakBytes = report->peakBytes;
  o.intraNodeBytes = report->intraNodeBytesPerRank;
  o.interNodeBytes = report->interNodeBytesPerRank;
  if (step)
    o.predictedStepMs = report->predictedStepMs;
}

/// Compiles `module` (stage 3 at the estimate's ranks, dtype and buckets)
/// under ZeRO-3 and each ZeRO++ and MiCS option into `counts.zeropp`: the
/// memory plan's and the report's numbers of each, as zero-report gives
/// them.
void compileZeroPP(mlir::ModuleOp module, ModelCounts &counts,
                   const EstimateOptions &options) {
  int64_t k = options.gpusPerNode, n = k * options.nodes;
  int64_t h = options.hpzPartitionSize ? options.hpzPartitionSize : k;
  int64_t m = options.micsShardSize ? options.micsShardSize : k;
  int64_t c = options.dtype == "fp32" ? 4 : 2;
  mlir::zero::HardwarePreset hw = *mlir::zero::lookupHardwarePreset(
      options.hardware.empty() ? "cpu" : options.hardware);
  std::string ignored;
  (void)mlir::zero::applyInterNodeBandwidth(hw, options.interNodeBandwidth,
                                            ignored);
  for (const ZeroPPChoice &choice : getZeroPPChoices(options, h, m)) {
    ZeroPPOption o;
    ZeroPipelineOptions pipeline;
    std::string base;
    setPlanOptions(pipeline, /*stage=*/3, /*perNode=*/true, options, base);
    SmallVector<std::string> names;
    if (choice.hpz > 1) {
      names.push_back("hpZ " + std::to_string(choice.hpz));
      setOption(pipeline.hpzPartitionSize, choice.hpz, o.pipeline);
    }
    if (choice.mics > 0) {
      names.push_back("MiCS " + std::to_string(choice.mics));
      setOption(pipeline.micsShardSize, choice.mics, o.pipeline);
    }
    if (choice.qwz) {
      names.push_back("qwZ");
      setOption(pipeline.quantizedWeights, true, o.pipeline);
    }
    if (choice.qgz) {
      names.push_back("qgZ");
      setOption(pipeline.quantizedGradients, true, o.pipeline);
    }
    o.name = names.empty() ? "ZeRO-3" : join(names, " + ");
    setTheirs(o, counts.params, n, k, c, choice.hpz, choice.mics, choice.qwz,
              choice.qgz);
    {
      mlir::OwningOpRef<mlir::ModuleOp> copy = module.clone();
      FirstErrorCapture capture(module.getContext(), o.error);
      if (runPipeline(*copy, pipeline, o.error))
        recordReport(*copy, hw, !options.hardware.empty(), o);
    }
    if (o.peakBytes == 0 && o.error.empty())
      o.error = "zero-pipeline failed";
    counts.zeropp.push_back(std::move(o));
  }
}

} // namespace

std::optional<ModelCounts>
zero::estimate::countModel(mlir::ModuleOp module, StringRef file,
                           const EstimateOptions &options) {
  ModelCounts counts;
  counts.file = file.str();
  // The model zero-compile --target trains: its padded vocabulary counts.
  {
    ZeroPipelineOptions pipeline;
    pipeline.target = options.target;
    pipeline.dtype = options.dtype;
    mlir::PassManager pm(module.getContext());
    mlir::zero::addPadVocabPass(pm, pipeline);
    if (failed(pm.run(module)))
      return std::nullopt;
  }
  mlir::OwningOpRef<mlir::ModuleOp> planned = module.clone();
  mlir::OwningOpRef<mlir::ModuleOp> pristine = module.clone();
  for (auto p : module.getOps<mlir::zero::ParamOp>()) {
    ++counts.paramTensors;
    if (p.getFrozen())
      counts.frozenParams += p.getNumElements();
    counts.largestParam = std::max(counts.largestParam, p.getNumElements());
    if (__builtin_add_overflow(counts.params, p.getNumElements(),
                               &counts.params) ||
        counts.params > kMaxParams) {
      p.emitError("zero-estimate: the model has more than ")
          << kMaxParams << " parameters";
      return std::nullopt;
    }
  }
  counts.experts = mlir::zero::countExpertParams(module);
  // The states the step's optimizer keeps with its own hyper-parameters
  // (DeepSpeed's AdamW for a module without a step).
  counts.optimizerStates = mlir::zero::getOptimizerStates(counts.optimizer);
  for (auto step : module.getOps<mlir::zero::TrainStepOp>()) {
    mlir::zero::OptimizerAttr opt = step.getOptimizer();
    counts.optimizer = opt.getKind();
    counts.optimizerStates = mlir::zero::getOptimizerStates(opt);
    // States in another precision (optimizers.def's ZRT_OPTIMIZER_PRECISION
    // rows) count an element's bytes in it; a block-quantized one adds its
    // fp32 absmaxes, which the estimate counts per state over a rank's run.
    counts.statePrecision = opt.getStates();
    counts.bf16Masters = opt.getBf16Masters();
    counts.absmaxBlock = mlir::zero::getOptimizerAbsmaxBlock(opt);
    for (mlir::zero::OptimizerState &state : counts.optimizerStates)
      state.bytes = zrt::optimizers::elementBytes(
          static_cast<zrt::optimizers::Kind>(opt.getKind()),
          static_cast<zrt::optimizers::StatePrecision>(opt.getStates()),
          static_cast<zrt::BufferKind>(state.buffer));
  }
  // Stage 3 on one rank forms the groups without padding them apart.
  mlir::PassManager pm(module.getContext());
  mlir::zero::ZeroPartitionPassOptions partition;
  partition.stage = 3;
  partition.worldSize = 1;
  pm.addPass(mlir::zero::createZeroPartitionPass(partition));
  if (failed(pm.run(module)))
    return std::nullopt;
  for (auto group : module.getOps<mlir::zero::PartitionOp>())
    if (group.getNumelValue() > counts.largestGroup) {
      counts.largestGroup = group.getNumelValue();
      // A group of one parameter is named after it (the partition's own
      // symbol then carries a suffix).
      auto refs = group.getParams();
      counts.largestGroupName =
          refs.size() == 1
              ? cast<mlir::FlatSymbolRefAttr>(refs[0]).getValue().str()
              : group.getSymName().str();
    }
  // Adafactor's state follows the tensors' shapes: the plan sizes it.
  if (options.stage >= 2 ||
      counts.optimizer == mlir::zero::OptimizerKind::adafactor)
    planBuckets(*planned, counts, options);
  if (options.zeropp)
    compileZeroPP(*pristine, counts, options);
  return counts;
}
