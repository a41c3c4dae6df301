//===- Evaluate.cpp - One configuration, planned and costed ---------------===//
//
// Part of the zero-mlir project.
//
// A candidate runs the rest of zero-pipeline on a clone of its
// differentiated step, and the memory planner and the cost model judge it;
// the knobs of its group are descended coordinate by coordinate from it.
//
//===----------------------------------------------------------------------===//

#include "Search.h"

#include "zero/Dialect/Zero/Analysis/MemoryPlan.h"
#include "zero/Dialect/Zero/Analysis/Report.h"
#include "zero/Dialect/Zero/Analysis/Schedule.h"
#include "zero/Pipelines/Pipeline.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <set>

using namespace mlir;
using namespace mlir::zero;
using namespace mlir::zero::tuning;

const Evaluation &Tuner::evaluate(const TuneConfig &configRef, bool verify) {
  // A copy: `configRef` may be the memoized entry that is re-evaluated.
  TuneConfig config = configRef;
  auto it = memo.find(config);
  if (it != memo.end() && !verify)
    return it->second;
  if (it == memo.end())
    ++result.evaluated;
  Evaluation &e = memo[config];
  e = Evaluation();
  e.candidate.config = config;

  ModuleOp front =
      getFront(config.lossChunk, config.tiledMlp, config.spSize, config.epSize);
  if (!front) {
    e.error = "zero-loss-chunk, zero-tiled-mlp, zero-sequence-parallel or "
              "zero-expert-parallel refuses the step";
    return e;
  }
  OwningOpRef<ModuleOp> module = front.clone();
  std::string error;
  {
    // A candidate the passes reject is recorded, not reported.
    ScopedDiagnosticHandler handler(ctx, [&](Diagnostic &diag) {
      if (diag.getSeverity() == DiagnosticSeverity::Error && error.empty())
        error = diag.str();
      return success();
    });
    PassManager pm(ctx);
    // The op verifier after every pass costs a third of a candidate; the
    // winner is re-run with it and with the schedule verifier.
    pm.enableVerifier(verify);
    ZeroPipelineOptions pipeline;
    config.applyTo(pipeline);
    pipeline.worldSize = options.worldSize;
    pipeline.ranksPerNode = options.ranksPerNode;
    pipeline.verify = verify;
    buildZeroSchedulePipeline(pm, pipeline);
    bool ok = succeeded(pm.run(*module));
    FailureOr<StepSchedule> schedule = failure();
    FailureOr<MemoryPlan> plan = failure();
    FailureOr<StepReport> report = failure();
    if (ok)
      schedule = StepSchedule::get(*module->getOps<TrainStepOp>().begin());
    if (succeeded(schedule))
      plan = computeMemoryPlan(*schedule);
    if (succeeded(plan))
      report = computeReport(*schedule, *plan, *options.hardware, {},
                             options.documents);
    if (failed(report)) {
      e.error = error.empty() ? "the pipeline failed" : error;
      return e;
    }

    TuneCandidate &c = e.candidate;
    c.microBatch = result.globalBatch / (options.worldSize / config.spSize *
                                         config.accumulationSteps);
    c.peakBytes = plan->peakBytes;
    c.persistentBytes = plan->persistentBytes;
    c.hostPeakBytes = plan->hostBytes;
    c.nvmeBytes = plan->nvmeBytes;
    c.predictedStepMs = report->predictedStepMs;
    c.exposedCommMs = report->exposedCommMs;
    c.exposedTransferMs = report->exposedTransferMs;
    c.recomputeMs = report->recomputeMs;
    c.interNodeBytes = report->interNodeBytesPerRank;
    c.tokensPerSecond =
        report->predictedStepMs > 0
            ? result.tokensPerStep * 1e3 / report->predictedStepMs
            : 0;
    c.fit = computeFitVerdict(*plan, options.memoryBudget);
    c.hostFits = !options.hostBudget || plan->hostBytes <= *options.hostBudget;
    c.fits = c.fit.fits && c.hostFits;

    for (const TimelineEvent &ev : report->timeline.events)
      if (ev.stream == 0 && ev.category == "compute" &&
          !isa_and_nonnull<CollectiveOpInterface>(ev.op))
        e.computeBoundMs += ev.durationUs * 1e-3;
    // Summed here, accumulated along the stream there: no rounding may lift
    // the bound above a step it bounds.
    e.computeBoundMs *= 1 - 1e-9;
    e.memoryBound =
        plan->persistentBytes + plan->peakByCategory[static_cast<unsigned>(
                                    MemoryCategory::Activations)];
    for (const PartitionBuffers &p : schedule->getPartitions()) {
      e.groupNumels.push_back(p.partition.getNumelValue());
      e.frozenGroups |= p.partition.getFrozen();
    }
  }
  if (e.candidate.fits) {
    auto [slot, inserted] =
        groupBestMs.try_emplace(groupOf(config), e.candidate.predictedStepMs);
    if (!inserted)
      slot->second = std::min(slot->second, e.candidate.predictedStepMs);
  }
  return e;
}

bool Tuner::anyFits() const {
  return llvm::any_of(memo, [&](const auto &entry) {
    return entry.second.ok() && entry.second.candidate.fits &&
           (!options.offloadActivations ||
            entry.first.offloadActivations == *options.offloadActivations);
  });
}

double Tuner::getPruneMs() const {
  if (static_cast<int64_t>(groupBestMs.size()) < options.top)
    return INFINITY;
  std::vector<double> ms;
  for (const auto &[group, best] : groupBestMs)
    ms.push_back(best);
  std::nth_element(ms.begin(), ms.begin() + (options.top - 1), ms.end());
  return ms[options.top - 1];
}

double Tuner::getBoundMs(const TuneConfig &config) const {
  double ms = getPruneMs();
  auto it = groupBestMs.find(groupOf(config));
  return it == groupBestMs.end() ? ms : std::min(ms, it->second);
}

std::vector<Knob> Tuner::getKnobs(const TuneConfig &base,
                                  const Evaluation &e) const {
  // Bucket sizes from the whole model down by 4x: fewer, larger collectives
  // against smaller bucket buffers.
  std::vector<int64_t> buckets;
  for (int64_t b = base.reduceBucketSize, i = 0; i < 4; ++i, b /= 4)
    buckets.push_back(roundUpNice(std::max<int64_t>(b, 1)));
  std::vector<Knob> knobs;
  knobs.push_back(
      {buckets, [](TuneConfig &c, int64_t v) { c.reduceBucketSize = v; }});
  knobs.push_back(
      {{0, 1}, [](TuneConfig &c, int64_t v) { c.overlapComm = v != 0; }});
  if (base.stage == 1 || base.stage == 2)
    knobs.push_back(
        {buckets, [](TuneConfig &c, int64_t v) { c.allgatherBucketSize = v; }});
  if (base.stage != 3)
    return knobs;

  // Stage 3: windows in units of the largest group G (none, one, two, four
  // groups ahead), and persistence thresholds that change which groups are
  // gathered once per step.
  int64_t g = 1;
  for (int64_t n : e.groupNumels)
    g = std::max(g, n);
  TuneConfig defaults;
  std::vector<int64_t> prefetch = {1, roundUpNice(g), roundUpNice(2.0 * g),
                                   roundUpNice(4.0 * g),
                                   defaults.prefetchBucketSize};
  std::vector<int64_t> live = {roundUpNice(g), roundUpNice(2.0 * g),
                               roundUpNice(4.0 * g),
                               defaults.maxLiveParameters};
  std::vector<int64_t> persistence;
  std::set<int64_t> persistentSets;
  for (int64_t t : {int64_t(0), defaults.paramPersistenceThreshold,
                    int64_t(1000000), roundUpNice(g + 1.0)}) {
    int64_t count =
        llvm::count_if(e.groupNumels, [&](int64_t n) { return n < t; });
    if (persistentSets.insert(count).second)
      persistence.push_back(t);
  }
  knobs.push_back(
      {prefetch, [](TuneConfig &c, int64_t v) { c.prefetchBucketSize = v; }});
  knobs.push_back(
      {live, [](TuneConfig &c, int64_t v) { c.maxLiveParameters = v; }});
  knobs.push_back({persistence, [](TuneConfig &c, int64_t v) {
                     c.paramPersistenceThreshold = v;
                   }});
  // Frozen partitions gathered once per step: one gather instead of one per
  // micro step (or per use), for a buffer held the whole step.
  if (e.frozenGroups)
    knobs.push_back(
        {{0, 1}, [](TuneConfig &c, int64_t v) { c.frozenGatherOnce = v; }});
  return knobs;
}

void Tuner::descend(const TuneConfig &base) {
  TuneConfig current = base;
  const Evaluation *best = &evaluate(current);
  std::vector<Knob> knobs = getKnobs(base, *best);
  result.frozenGatherSearched |= base.stage == 3 && best->frozenGroups;
  for (int pass = 0; pass < 2; ++pass) {
    bool moved = false;
    for (const Knob &knob : knobs) {
      for (int64_t v : knob.values) {
        TuneConfig c = current;
        knob.set(c, v);
        if (c == current)
          continue;
        const Evaluation &e = evaluate(c);
        if (isBetter(e, *best)) {
          current = c;
          best = &e;
          moved = true;
        }
      }
    }
    if (!moved)
      break;
  }
}
