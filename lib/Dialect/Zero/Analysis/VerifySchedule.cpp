//===- VerifySchedule.cpp - Prove a schedule consistent on every rank -----===//
//
// Part of the zero-mlir project.
//
// DeepSpeed warns that ranks issuing different collectives hang or silently
// mix data. Here the schedule is static, so these mistakes are rejected at
// compile time, each with a diagnostic at the op that causes it.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/Analysis/MemoryPlan.h"
#include "zero/Dialect/Zero/Analysis/Passes.h"

#include "VerifySchedule.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"

#include <map>

namespace mlir::zero {
#define GEN_PASS_DEF_ZEROVERIFYSCHEDULEPASS
#include "zero/Dialect/Zero/Analysis/Passes.h.inc"
} // namespace mlir::zero

using namespace mlir;
using namespace mlir::zero;
using namespace mlir::zero::verifier;

std::string ScheduleVerifier::describe(PartitionOp p, ElementRange r) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "elements [" << r.first << ", " << r.second << ") of partition @"
     << p.getSymName() << " (";
  bool first = true;
  for (auto [ref, off] : llvm::zip(p.getParams(), p.getOffsets())) {
    StringRef name = cast<SymbolRefAttr>(ref).getLeafReference().getValue();
    const ParamLocation *loc = schedule.lookupParam(name);
    if (!loc || !overlaps({off, off + loc->numel}, r))
      continue;
    os << (first ? "" : ", ") << "@" << name;
    first = false;
  }
  os << ")";
  return s;
}

LogicalResult ScheduleVerifier::checkControlFlow() {
  TrainStepOp step = schedule.getStep();
  WalkResult result = step.getBody().walk([&](Operation *op) {
    if (isa<CollectiveOpInterface>(op) &&
        op->getParentOp() != step.getOperation()) {
      op->emitOpError("is nested in control flow: whether it runs could "
                      "depend on the rank, and a collective that some ranks "
                      "skip hangs the others");
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return failure(result.wasInterrupted());
}

PartitionOp ScheduleVerifier::findGroup(SymbolRefAttr ref) {
  const PartitionBuffers *p = schedule.lookupPartition(ref);
  return p ? p->partition : PartitionOp();
}

namespace {
/// The ranges of one buffer freed so far. They are disjoint (a second free of
/// an element is rejected), so those overlapping a range are found in
/// O(log n) by their begin.
class FreedRanges {
public:
  struct Freed {
    ElementRange range;
    mutable FreeOp op;
    size_t order;
  };
  /// The earliest free overlapping `r`, or null.
  const Freed *findFirstOverlap(ElementRange r) const {
    auto it = byBegin.upper_bound(r.first);
    if (it != byBegin.begin())
      --it;
    const Freed *first = nullptr;
    for (; it != byBegin.end() && it->first < r.second; ++it)
      if (overlaps(it->second.range, r) &&
          (!first || it->second.order < first->order))
        first = &it->second;
    return first;
  }
  void add(ElementRange r, FreeOp op) {
    byBegin.insert({r.first, Freed{r, op, byBegin.size()}});
  }

private:
  std::multimap<int64_t, Freed> byBegin;
};
} // namespace

LogicalResult ScheduleVerifier::checkFrees() {
  Block &body = schedule.getStep().getBodyBlock();
  DenseMap<Value, FreedRanges> freed;
  for (Operation &op : body) {
    if (auto f = dyn_cast<FreeOp>(op)) {
      Value root = getViewRoot(f.getBuffer());
      if (!root)
        return op.emitOpError("frees persistent memory (a parameter view of "
                              "the persistent buffers)");
      int64_t n =
          cast<RankedTensorType>(f.getBuffer().getType()).getNumElements();
      ElementRange r = {0, n};
      if (f.getOffset())
        r = {static_cast<int64_t>(*f.getOffset()),
             static_cast<int64_t>(*f.getOffset() + *f.getSize())};
      FreedRanges &ranges = freed[root];
      if (const FreedRanges::Freed *prev = ranges.findFirstOverlap(r)) {
        InFlightDiagnostic d = op.emitOpError("frees elements [")
                               << std::max(prev->range.first, r.first) << ", "
                               << std::min(prev->range.second, r.second)
                               << ") a second time";
        d.attachNote(prev->op.getLoc()) << "first freed here";
        return failure();
      }
      ranges.add(r, f);
      continue;
    }
    // What each operand reads.
    SmallVector<std::pair<Value, ElementRange>> reads = getInFlightReads(&op);
    llvm::SmallDenseSet<Value, 8> seen;
    for (auto &read : reads)
      seen.insert(read.first);
    for (Value operand : op.getOperands()) {
      if (!seen.insert(operand).second)
        continue;
      int64_t n =
          isa<RankedTensorType>(operand.getType())
              ? cast<RankedTensorType>(operand.getType()).getNumElements()
              : 0;
      reads.push_back({operand, {0, n}});
    }
    for (auto [v, r] : reads) {
      Value root = getViewRoot(v);
      auto it = root ? freed.find(root) : freed.end();
      if (it == freed.end())
        continue;
      // Views cover all of their root.
      ElementRange used = root == v ? r : ElementRange{0, INT64_MAX};
      if (const FreedRanges::Freed *prev = it->second.findFirstOverlap(used)) {
        InFlightDiagnostic d = op.emitOpError("uses a buffer after zero.free");
        d.attachNote(prev->op.getLoc()) << "freed here";
        return failure();
      }
    }
  }
  return success();
}

LogicalResult ScheduleVerifier::checkFrozen() {
  auto frozen = [&](SymbolRefAttr ref) -> PartitionOp {
    const PartitionBuffers *p = schedule.lookupPartition(ref);
    return p && p->frozen ? p->partition : PartitionOp();
  };
  auto fail = [](Operation *op, StringRef what, PartitionOp p) {
    return op->emitOpError()
           << what << " frozen partition @" << p.getSymName()
           << ", which has params only (no gradients, optimizer states or "
              "master)";
  };
  WalkResult result = schedule.getStep().getBody().walk([&](Operation *op) {
    if (auto adam = dyn_cast<OptimizerStepOp>(op)) {
      if (PartitionOp p = frozen(adam.getGroupAttr()))
        return fail(op, "updates", p), WalkResult::interrupt();
    } else if (auto check = dyn_cast<CheckOverflowOp>(op)) {
      for (Attribute a : check.getGroups())
        if (PartitionOp p = frozen(cast<SymbolRefAttr>(a)))
          return fail(op, "reads the gradients of", p), WalkResult::interrupt();
    } else if (auto t = dyn_cast<TransferOpInterface>(op)) {
      PartitionOp p = frozen(t.getGroupAttr());
      for (std::optional<BufferKind> kind :
           {t.getSourceBuffer(), t.getTargetBuffer()})
        if (p && kind && *kind != BufferKind::params)
          return fail(
                     op,
                     ("copies the " + stringifyBufferKind(*kind) + " of").str(),
                     p),
                 WalkResult::interrupt();
    } else if (auto coll = dyn_cast<CollectiveOpInterface>(op)) {
      PartitionOp p = frozen(coll.getGroupAttr());
      if (!p)
        return WalkResult::advance();
      CollectiveKind kind = coll.getCollectiveKind();
      std::optional<BufferKind> inPlace = coll.getInPlaceBuffer();
      if (kind == CollectiveKind::reduce_scatter ||
          kind == CollectiveKind::reduce ||
          (inPlace && *inPlace != BufferKind::params))
        return fail(op, "reduces the gradients of", p), WalkResult::interrupt();
      // Stages 1-2 gather what the optimizer updated; a frozen partition
      // is never updated and every rank holds it whole.
      if (inPlace && kind == CollectiveKind::all_gather)
        return fail(op, "gathers the updated parameters of", p),
               WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return failure(result.wasInterrupted());
}

LogicalResult ScheduleVerifier::checkPlan() {
  TrainStepOp step = schedule.getStep();
  auto *dialect = step->getContext()->getLoadedDialect<ZeroDialect>();
  if (!dialect->getPlanAttrHelper().isAttrPresent(step))
    return success();
  FailureOr<MemoryPlan> plan = computeMemoryPlan(schedule);
  if (failed(plan))
    return failure();
  DenseI64ArrayAttr inputs = dialect->getInputOffsetsAttrHelper().getAttr(step);
  auto temp = dialect->getTempAttrHelper();
  auto alloc = dialect->getAllocAttrHelper();
  struct Placed {
    int64_t begin, end, start, stop;
    const ArenaBuffer *buffer;
  };
  std::vector<Placed> placed;
  for (const ArenaBuffer &b : plan->buffers) {
    int64_t base = -1;
    if (b.argIndex >= 0) {
      if (inputs && b.argIndex < static_cast<int>(inputs.size()))
        base = inputs[b.argIndex];
    } else if (b.resultIndex < 0) {
      if (IntegerAttr t = temp.getAttr(b.op))
        base = t.getInt();
    } else if (DenseI64ArrayAttr a = alloc.getAttr(b.op)) {
      if (b.resultIndex < static_cast<int>(a.size()))
        base = a[b.resultIndex];
    }
    if (base < 0) {
      if (b.op)
        return b.op->emitOpError("has no offset in the memory plan; run "
                                 "zero-plan-memory again");
      return step.emitOpError("input #") << b.argIndex << " has no offset";
    }
    for (const ArenaPiece &piece : b.pieces)
      placed.push_back({base + piece.offset - b.offset,
                        base + piece.offset - b.offset + piece.bytes,
                        piece.start, piece.end, &b});
  }
  // Sweep over time; the live set is ordered by address.
  llvm::sort(placed, [](const Placed &a, const Placed &b) {
    return a.start < b.start;
  });
  std::multimap<int64_t, const Placed *> live;
  std::multimap<int64_t, const Placed *> byEnd;
  for (const Placed &p : placed) {
    // Retire what ended before p starts.
    while (!byEnd.empty() && byEnd.begin()->first < p.start) {
      const Placed *q = byEnd.begin()->second;
      for (auto it = live.lower_bound(q->begin); it != live.end(); ++it)
        if (it->second == q) {
          live.erase(it);
          break;
        }
      byEnd.erase(byEnd.begin());
    }
    auto next = live.lower_bound(p.begin);
    auto check = [&](const Placed *q) -> LogicalResult {
      if (q->buffer == p.buffer || q->end <= p.begin || p.end <= q->begin ||
          p.begin == p.end || q->begin == q->end)
        return success();
      Operation *at = p.buffer->op ? p.buffer->op : step.getOperation();
      InFlightDiagnostic d =
          at->emitOpError("buffer at bytes [")
          << p.begin << ", " << p.end << ") of the step arena overlaps a live "
          << "buffer at [" << q->begin << ", " << q->end << ")";
      if (q->buffer->op)
        d.attachNote(q->buffer->op->getLoc()) << "the other buffer";
      return failure();
    };
    if (next != live.end() && failed(check(next->second)))
      return failure();
    if (next != live.begin() && failed(check(std::prev(next)->second)))
      return failure();
    live.insert({p.begin, &p});
    byEnd.insert({p.stop, &p});
  }
  return success();
}

/// When ops of `phase` run: 0 in every micro step, 1 in the last micro step
/// only (among the micro step's ops), 2 in the boundary function after it,
/// 3 in the first micro step only.
static int runsWhen(Phase phase) {
  if (runsAtBoundary(phase))
    return 2;
  if (phase == Phase::first_micro_step)
    return 3;
  return phase == Phase::last_micro_step ? 1 : 0;
}

/// The lowering emits the ops that run in every micro step (and, guarded,
/// those of the last micro step only) into the micro step function and
/// those that run after the last one (the boundary) into another, and the
/// optimizer updates each shard once per optimizer step, so the phases must
/// agree with what the ops do.
LogicalResult ScheduleVerifier::checkPhases() {
  Block &body = schedule.getStep().getBodyBlock();
  // Buffers the first micro step gathers and the others read
  // (frozen-gather=once). Its step-arena place holds the values across the
  // micro steps only if no op of a later micro step can reuse it: no op that
  // runs in every micro step comes before the gather, the buffer is freed
  // once, after the last micro step, and no op of a micro step after that
  // free produces a buffer.
  llvm::SmallPtrSet<Operation *, 4> kept;
  bool everyMicroStepBefore = false;
  for (Operation &op : body) {
    auto gather = dyn_cast<AllGatherOp>(op);
    if (gather && gather.getResult() && gather.getPersistent() &&
        gather.getPhase() == Phase::first_micro_step && !everyMicroStepBefore) {
      Operation *free = nullptr;
      bool once = true;
      for (Operation *user : gather.getResult().getUsers())
        if (isa<FreeOp>(user)) {
          once &= !free && runsWhen(getStepPhase(user)) == 2;
          free = user;
        }
      for (Operation *after = free ? free->getNextNode() : nullptr;
           once && after; after = after->getNextNode())
        once =
            runsWhen(getStepPhase(after)) == 2 || after->getNumResults() == 0;
      if (free && once)
        kept.insert(gather);
    }
    everyMicroStepBefore |= getStepPhase(&op) != Phase::first_micro_step;
  }
  Operation *afterOptimizer = nullptr;
  for (Operation &op : body) {
    Phase phase = getStepPhase(&op);
    int when = runsWhen(phase);
    auto collective = dyn_cast<CollectiveOpInterface>(&op);
    // Transfers check their own phase (zero.transfer's verifier): the
    // gradients may stream to the host in the last micro step, and a staged
    // parameter fetch runs before each gather, in any phase.
    auto transfer = dyn_cast<TransferOp>(op);
    bool optimizer =
        isa<CheckOverflowOp, UpdateLossScaleOp, OptimizerStepOp>(op) ||
        (isa<AllReduceOp>(op) && cast<AllReduceOp>(op).reducesOptimizerStats());
    if (optimizer && phase != Phase::boundary)
      return op.emitOpError("belongs to the optimizer, which runs once per "
                            "optimizer step: its phase must be boundary, not ")
             << stringifyPhase(phase);
    if ((optimizer || (transfer && !transfer.getStaged())) && afterOptimizer) {
      InFlightDiagnostic d =
          op.emitOpError(
              "belongs to the optimizer but comes after an op of phase ")
          << stringifyPhase(getStepPhase(afterOptimizer));
      d.attachNote(afterOptimizer->getLoc()) << "that op";
      return failure();
    }
    if (isAfterOptimizer(phase) && !afterOptimizer)
      afterOptimizer = &op;
    if (collective && collective.getInPlaceBuffer() == BufferKind::grads &&
        when == 0)
      return op.emitOpError("reduces the accumulated gradients in place, "
                            "which happens once per optimizer step: its phase "
                            "must be boundary or last_micro_step, not ")
             << stringifyPhase(phase);
    if (collective && collective.getInPlaceBuffer() == BufferKind::params &&
        phase != Phase::post_step)
      return op.emitOpError("gathers the updated parameters in place, after "
                            "the optimizer: its phase must be post_step, not ")
             << stringifyPhase(phase);
    if (auto wait = dyn_cast<WaitOp>(op)) {
      Operation *issue = wait.getToken().getDefiningOp();
      if (!issue)
        continue;
      int issued = runsWhen(getStepPhase(issue));
      // A token of the last micro step may be waited at the boundary.
      if (issued == when || (issued == 1 && when == 2))
        continue;
      InFlightDiagnostic d = op.emitOpError("runs in phase ")
                             << stringifyPhase(phase)
                             << " but waits for a collective of phase "
                             << stringifyPhase(getStepPhase(issue));
      if ((issued == 0) != (when == 0))
        d << ": one runs in every micro step, the other once per optimizer "
             "step";
      else
        d << ", which is issued after the last micro step";
      d.attachNote(issue->getLoc()) << "the collective";
      return failure();
    }
    if (when == 2)
      continue;
    for (Value v : op.getOperands()) {
      Operation *def = v.getDefiningOp();
      if (!def || def->getBlock() != &body)
        continue;
      int defined = runsWhen(getStepPhase(def));
      // The first micro step reads what every micro step computes; what it
      // computes is read there only.
      if (when == 3 ? defined == 0 || defined == 3
                    : defined != 3 && defined <= when)
        continue;
      if (defined == 3 && kept.contains(def))
        continue;
      InFlightDiagnostic d =
          defined == 3
              ? op.emitOpError("uses a value that only the first micro step "
                               "computes (phase ")
          : when == 0
              ? op.emitOpError("runs in every micro step but uses a value "
                               "that only the last micro step computes (phase ")
              : op.emitOpError("runs in the " +
                               Twine(when == 3 ? "first" : "last") +
                               " micro step but uses a value computed after "
                               "it (phase ");
      d << stringifyPhase(getStepPhase(def)) << ")";
      d.attachNote(def->getLoc()) << "computed here";
      if (defined == 3 && isa<AllGatherOp>(def))
        d.attachNote(def->getLoc())
            << "the other micro steps may read a buffer the first one "
               "gathers only when no op of every micro step comes before the "
               "gather, the buffer is freed once, after the last micro step, "
               "and no op of a micro step after that free produces a buffer";
      return failure();
    }
  }
  return success();
}

/// Parameter shards on NVMe: every transfer of a shard goes through a
/// swap buffer of the one region the plan reserves (all transfers agree on
/// the buffers), and a buffer serves one transfer at a time, from its issue
/// to the zero.wait of its token (the runtime reads into and writes from
/// it until then).
LogicalResult ScheduleVerifier::checkSwapBuffers() {
  ParamSwapAttr first;
  DenseMap<int64_t, Operation *> inFlight;
  for (Operation &op : schedule.getStep().getBodyBlock()) {
    if (auto wait = dyn_cast<WaitOp>(op)) {
      Operation *issuer = wait.getToken().getDefiningOp();
      auto t = dyn_cast_or_null<TransferOpInterface>(issuer);
      if (ParamSwapAttr swap = t ? t.getSwapAttr() : ParamSwapAttr())
        inFlight.erase(swap.getBuffer());
      continue;
    }
    auto t = dyn_cast<TransferOpInterface>(op);
    ParamSwapAttr swap = t ? t.getSwapAttr() : ParamSwapAttr();
    if (!swap)
      continue;
    if (!first)
      first = swap;
    if (swap.getBuffers() != first.getBuffers() ||
        swap.getBufferBytes() != first.getBufferBytes())
      return op.emitOpError("swaps through ")
             << swap << ", but the step's parameter swap buffers are " << first;
    if (Operation *user = inFlight.lookup(swap.getBuffer())) {
      InFlightDiagnostic d =
          op.emitOpError("uses parameter swap buffer ")
          << swap.getBuffer()
          << " while an earlier transfer still uses it (issue it after the "
             "zero.wait of that transfer's token)";
      d.attachNote(user->getLoc()) << "the earlier transfer is issued here";
      return failure();
    }
    if (t.getToken())
      inFlight[swap.getBuffer()] = &op;
  }
  return success();
}

/// ZeRO++ hpZ: a gather of a group's secondary shards reads what this
/// optimizer step stored there, never a value of the previous step: the
/// zero.store_secondary of the group (of its own gather of the parameter
/// shards) comes before it, and it comes before the optimizer changes the
/// parameters.
LogicalResult ScheduleVerifier::checkSecondary() {
  llvm::DenseMap<StringAttr, Operation *> stored;
  Operation *afterOptimizer = nullptr;
  for (Operation &op : schedule.getStep().getBodyBlock()) {
    if (auto store = dyn_cast<StoreSecondaryOp>(op)) {
      Value root = getViewRoot(store.getFull());
      Operation *def = root ? root.getDefiningOp() : nullptr;
      auto gather = dyn_cast_or_null<CollectiveOpInterface>(def);
      if (!gather || gather.getCollectiveKind() != CollectiveKind::all_gather ||
          gather.getRankSetKind() != RankSetKind::group ||
          gather.getGroupAttr() != store.getGroupAttr())
        return store.emitOpError("stores into the secondary shard of ")
               << store.getGroupAttr()
               << " a buffer that is not that group's gather of its "
                  "parameter shards";
      stored.try_emplace(store.getGroupAttr().getAttr(), &op);
      continue;
    }
    if (isAfterOptimizer(getStepPhase(&op)) && !afterOptimizer)
      afterOptimizer = &op;
    auto gather = dyn_cast<CollectiveOpInterface>(op);
    if (!gather || gather.getRankSetKind() != RankSetKind::hpz)
      continue;
    if (!stored.count(gather.getGroupAttr().getAttr()))
      return op.emitOpError("gathers the hpZ secondary shards of ")
             << gather.getGroupAttr()
             << " before any zero.store_secondary of the group fills them in "
                "this optimizer step";
    if (afterOptimizer) {
      InFlightDiagnostic d =
          op.emitOpError("gathers the hpZ secondary shards of ")
          << gather.getGroupAttr()
          << " after the optimizer changed the parameters (they are stale)";
      d.attachNote(afterOptimizer->getLoc()) << "the optimizer's place";
      return failure();
    }
  }
  return success();
}

LogicalResult ScheduleVerifier::run() {
  int64_t i = 0;
  SmallVector<Operation *> ops;
  for (Operation &op : schedule.getStep().getBodyBlock()) {
    index[&op] = i++;
    ops.push_back(&op);
  }
  // The evaluation step runs the forward's collectives without the rest of
  // the step, so they must be complete and waited on their own.
  return failure(failed(checkControlFlow()) ||
                 failed(checkTokens(ops, "the step")) || failed(checkFrees()) ||
                 failed(checkSecondary()) || failed(checkFrozen()) ||
                 failed(checkCoverage()) || failed(checkPlan()) ||
                 failed(checkPhases()) || failed(checkSwapBuffers()) ||
                 failed(checkTokens(getEvaluationOps(schedule.getStep()),
                                    "the evaluation step")));
}

namespace {
struct ZeroVerifySchedulePass
    : public mlir::zero::impl::ZeroVerifySchedulePassBase<
          ZeroVerifySchedulePass> {
  using Base::Base;
  void runOnOperation() override {
    for (TrainStepOp step : getOperation().getOps<TrainStepOp>()) {
      FailureOr<StepSchedule> schedule = StepSchedule::get(step);
      if (failed(schedule) || failed(ScheduleVerifier(*schedule).run()))
        return signalPassFailure();
    }
    // An analysis: the IR needs no verification after it.
    markAllAnalysesPreserved();
  }
};
} // namespace
