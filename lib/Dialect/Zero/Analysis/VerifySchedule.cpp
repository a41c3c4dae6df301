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

namespace {

using ElementRange = std::pair<int64_t, int64_t>; // [begin, end)

bool overlaps(ElementRange a, ElementRange b) {
  return a.first < b.second && b.first < a.second;
}

/// The completion token of an asynchronous collective or transfer.
Value getToken(Operation *op) {
  if (auto coll = dyn_cast<CollectiveOpInterface>(op))
    return coll.getToken();
  if (auto t = dyn_cast<TransferOpInterface>(op))
    return t.getToken();
  return {};
}

/// What a collective or transfer reads until it completes.
SmallVector<std::pair<Value, ElementRange>> getInFlightReads(Operation *op) {
  if (auto coll = dyn_cast<CollectiveOpInterface>(op))
    return coll.getInFlightReads();
  if (auto t = dyn_cast<TransferOpInterface>(op))
    return t.getInFlightReads();
  return {};
}

bool isGradReduction(Operation *op) {
  auto coll = dyn_cast<CollectiveOpInterface>(op);
  return coll && coll.getCoverageRole() == CoverageRole::grad_reduction;
}

/// One gradient reduction or parameter gather over a layout range.
struct RangeOp {
  Operation *op;
  ElementRange range;
};

/// What checkCoverage collects over the step, by partition.
struct CoverageOps {
  /// Ops of the micro step; the boundary function's run after them.
  int64_t numOps = 0;
  DenseMap<Operation *, SmallVector<RangeOp>> reductions, gathers, replicaSums;
  DenseMap<Operation *, SmallVector<OptimizerStepOp>> updates;
  SmallVector<Operation *> overflowChecks;
  DenseMap<Operation *, SmallVector<Operation *>> transfers;
  DenseMap<StringAttr, int64_t> gradWrittenAt;
  // The zero.grad ops binding each value. (Searching the users of a source
  // for each reduction was quadratic: with small buckets a large gradient
  // has thousands of reductions and frees among its users.)
  DenseMap<Value, SmallVector<GradOp, 1>> gradsOf;
};

/// The op at which a collective has completed: its zero.wait, or itself.
Operation *getCompletion(Operation *op) {
  if (Value token = getToken(op))
    for (Operation *user : token.getUsers())
      return user;
  return op;
}

/// The asynchronous operations in flight while checkTokens walks the ops,
/// and what they touch.
struct InFlightOps {
  struct Pending {
    Operation *op;
    PartitionOp group;
    /// Persistent buffers it accesses, and whether it writes them (reads
    /// of a buffer that is only read in flight do not conflict).
    SmallVector<std::pair<BufferKind, bool>, 2> buffers;
    ElementRange range; // of the layout
  };
  struct SourceRead {
    size_t pending;
    Value source;
    ElementRange range;
  };
  // In issue order; a waited entry is cleared, not erased, so that indices
  // stay valid.
  SmallVector<Pending> pending;
  DenseMap<Operation *, size_t> pendingIndex;
  // Entries on each persistent buffer, and the source reads of each root, so
  // that an access looks only at the collectives it could conflict with.
  DenseMap<std::pair<Operation *, unsigned>, SmallVector<size_t, 2>>
      pendingOnBuffer;
  DenseMap<Value, SmallVector<SourceRead, 2>> pendingReadsOf;
  DenseMap<Value, Operation *> resultPendingUntil; // value -> its collective
};

class ScheduleVerifier {
public:
  explicit ScheduleVerifier(const StepSchedule &s) : schedule(s) {}
  LogicalResult run();

private:
  LogicalResult checkControlFlow();
  /// The token rules over `ops`, a sequence that runs on every rank: the
  /// whole step, or the forward-only evaluation step cut from it.
  LogicalResult checkTokens(ArrayRef<Operation *> ops, StringRef what);
  // The token rules for one op, by what it does while others are in flight.
  PartitionOp findGroup(SymbolRefAttr ref);
  LogicalResult checkInFlightResultUses(Operation &op,
                                        const InFlightOps &inFlight);
  /// Fails at `op`, which `what`s elements `r` of `kind` of `group`, if a
  /// collective in flight writes them (or reads them, when `writes`).
  LogicalResult checkConflict(Operation &op, InFlightOps &inFlight,
                              PartitionOp group, BufferKind kind,
                              ElementRange r, StringRef what,
                              bool writes = true);
  LogicalResult checkInFlightAccess(Operation &op, InFlightOps &inFlight);
  LogicalResult checkParamAccess(Operation &op, InFlightOps &inFlight);
  LogicalResult checkOptimizerAccess(Operation &op, InFlightOps &inFlight);
  LogicalResult checkTransferAccess(TransferOpInterface t,
                                    InFlightOps &inFlight);
  LogicalResult checkInPlaceAccess(CollectiveOpInterface coll,
                                   InFlightOps &inFlight);
  LogicalResult checkFreeInFlight(FreeOp f, InFlightOps &inFlight);
  void retireWait(WaitOp wait, InFlightOps &inFlight);
  LogicalResult checkTokenUses(Operation &op, Value token);
  void issueAsync(Operation &op, InFlightOps &inFlight);
  LogicalResult checkFrees();
  /// Frozen partitions: only their parameters are touched (gathered at
  /// stage 3), never a gradient, state or master buffer, which they lack.
  LogicalResult checkFrozen();
  LogicalResult checkCoverage();
  // The coverage rules: what each op contributes, then each partition's
  // reductions, MiCS sums, update, offload copies and gathers.
  int64_t runAt(Operation *op, const CoverageOps &c);
  LogicalResult recordCoverage(Operation &op, int64_t i, CoverageOps &c);
  LogicalResult checkStagedShard(Operation &op);
  LogicalResult checkReductionSources(Operation &op, const CoverageOps &c);
  /// Fails unless `ranges` cover the layout of `p` exactly once.
  LogicalResult checkTiling(PartitionOp p, SmallVector<RangeOp> &ranges,
                            StringRef what, StringRef missing);
  LogicalResult checkPartitionCoverage(PartitionOp p, CoverageOps &c);
  LogicalResult checkGradsBeforeReduction(PartitionOp p, CoverageOps &c);
  LogicalResult checkReplicaSums(PartitionOp p, CoverageOps &c);
  LogicalResult checkUpdate(PartitionOp p, CoverageOps &c);
  LogicalResult checkOffloadCopies(PartitionOp p, CoverageOps &c);
  LogicalResult checkGathers(PartitionOp p, CoverageOps &c);
  LogicalResult checkPlan();
  LogicalResult checkPhases();
  LogicalResult checkSwapBuffers();
  LogicalResult checkSecondary();

  /// Describes layout elements [b, e) of a partition by parameter names.
  std::string describe(PartitionOp p, ElementRange r);

  const StepSchedule &schedule;
  DenseMap<Operation *, int64_t> index;
};

} // namespace

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

/// Uses of results of collectives still in flight.
LogicalResult
ScheduleVerifier::checkInFlightResultUses(Operation &op,
                                          const InFlightOps &inFlight) {
  for (Value operand : op.getOperands()) {
    Value root = getViewRoot(operand);
    auto it = root ? inFlight.resultPendingUntil.find(root)
                   : inFlight.resultPendingUntil.end();
    if (it != inFlight.resultPendingUntil.end() && !isa<FreeOp>(op)) {
      InFlightDiagnostic d = op.emitOpError(
          "uses the result of an asynchronous collective before its "
          "zero.wait");
      d.attachNote(it->second->getLoc()) << "collective issued here";
      return failure();
    }
  }
  return success();
}

LogicalResult ScheduleVerifier::checkConflict(Operation &op,
                                              InFlightOps &inFlight,
                                              PartitionOp group,
                                              BufferKind kind, ElementRange r,
                                              StringRef what, bool writes) {
  auto it = inFlight.pendingOnBuffer.find(
      {group.getOperation(), static_cast<unsigned>(kind)});
  if (it == inFlight.pendingOnBuffer.end())
    return success();
  for (size_t i : it->second) {
    InFlightOps::Pending &p = inFlight.pending[i];
    bool pendingWrites = llvm::any_of(
        p.buffers, [&](auto b) { return b.first == kind && b.second; });
    if ((writes || pendingWrites) && overlaps(p.range, r)) {
      InFlightDiagnostic d = op.emitOpError()
                             << what << " " << describe(group, r)
                             << " while an asynchronous collective on "
                             << stringifyBufferKind(kind)
                             << " is in flight (wait for its token first)";
      d.attachNote(p.op->getLoc()) << "collective issued here";
      return failure();
    }
  }
  return success();
}

/// Accesses to persistent buffers or sources of collectives in flight.
LogicalResult ScheduleVerifier::checkInFlightAccess(Operation &op,
                                                    InFlightOps &inFlight) {
  if (isa<GradOp, GetParamOp>(op))
    return checkParamAccess(op, inFlight);
  if (isa<OptimizerStepOp, CheckOverflowOp>(op))
    return checkOptimizerAccess(op, inFlight);
  if (auto t = dyn_cast<TransferOpInterface>(op))
    return checkTransferAccess(t, inFlight);
  if (auto coll = dyn_cast<CollectiveOpInterface>(op))
    return checkInPlaceAccess(coll, inFlight);
  if (auto f = dyn_cast<FreeOp>(op))
    return checkFreeInFlight(f, inFlight);
  return success();
}

LogicalResult ScheduleVerifier::checkParamAccess(Operation &op,
                                                 InFlightOps &inFlight) {
  if (auto grad = dyn_cast<GradOp>(op)) {
    if (const ParamLocation *loc = schedule.lookupParam(grad.getParam()))
      if (schedule.getStage() <= 1 &&
          failed(checkConflict(op, inFlight, loc->partition, BufferKind::grads,
                               {loc->offset, loc->offset + loc->numel},
                               "writes the gradient into")))
        return failure();
  } else if (auto get = dyn_cast<GetParamOp>(op); get && !get.getSource()) {
    if (const ParamLocation *loc = schedule.lookupParam(get.getParam()))
      if (failed(checkConflict(op, inFlight, loc->partition, BufferKind::params,
                               {loc->offset, loc->offset + loc->numel},
                               "reads")))
        return failure();
  }
  return success();
}

LogicalResult ScheduleVerifier::checkOptimizerAccess(Operation &op,
                                                     InFlightOps &inFlight) {
  if (auto adam = dyn_cast<OptimizerStepOp>(op)) {
    PartitionOp g = findGroup(adam.getGroupAttr());
    ElementRange all = {0, g.getNumelValue()};
    // Both clear the device gradients; the host Adam reads the host copy
    // and writes the host masters and parameters.
    if (failed(checkConflict(op, inFlight, g, BufferKind::grads, all,
                             "reads the gradients of")))
      return failure();
    // With offloaded parameter shards the host Adam writes them in place
    // and the device Adam writes a staged buffer (and its masters).
    // (A host Adam of shards not in host memory writes the host copy
    // that goes back to them.)
    BufferKind written = BufferKind::params;
    if (adam.getHost() && !schedule.areParamsOnHost())
      written = BufferKind::host_params;
    else if (!adam.getHost() && schedule.areParamsOffloaded())
      written = BufferKind::master;
    SmallVector<BufferKind, 3> updated = {written};
    if (adam.getHost())
      updated = {BufferKind::host_grads, BufferKind::master, written};
    for (BufferKind k : updated)
      if (failed(checkConflict(op, inFlight, g, k, all, "updates")))
        return failure();
    return success();
  }
  auto check = cast<CheckOverflowOp>(op);
  for (Attribute a : check.getGroups()) {
    PartitionOp g = findGroup(cast<SymbolRefAttr>(a));
    if (failed(checkConflict(op, inFlight, g, BufferKind::grads,
                             {0, g.getNumelValue()}, "reads the gradients of",
                             /*writes=*/false)))
      return failure();
  }
  return success();
}

LogicalResult ScheduleVerifier::checkTransferAccess(TransferOpInterface t,
                                                    InFlightOps &inFlight) {
  Operation &op = *t.getOperation();
  PartitionOp g = findGroup(t.getGroupAttr());
  ElementRange moved =
      t.getElementRange().value_or(ElementRange{0, g.getNumelValue()});
  if ((t.getSourceBuffer() &&
       failed(checkConflict(op, inFlight, g, *t.getSourceBuffer(), moved,
                            "copies",
                            /*writes=*/false))) ||
      (t.getTargetBuffer() &&
       failed(checkConflict(op, inFlight, g, *t.getTargetBuffer(), moved,
                            "copies into"))))
    return failure();
  return success();
}

/// An in-place collective on a buffer a transfer still copies.
LogicalResult ScheduleVerifier::checkInPlaceAccess(CollectiveOpInterface coll,
                                                   InFlightOps &inFlight) {
  if (!coll.getInPlaceBuffer() || !coll.getElementRange())
    return success();
  PartitionOp g = findGroup(coll.getGroupAttr());
  for (size_t i : inFlight.pendingOnBuffer.lookup(
           {g.getOperation(), static_cast<unsigned>(*coll.getInPlaceBuffer())}))
    if (isa<TransferOpInterface>(inFlight.pending[i].op) &&
        failed(checkConflict(*coll.getOperation(), inFlight, g,
                             *coll.getInPlaceBuffer(), *coll.getElementRange(),
                             "works in place on")))
      return failure();
  return success();
}

LogicalResult ScheduleVerifier::checkFreeInFlight(FreeOp f,
                                                  InFlightOps &inFlight) {
  Value root = getViewRoot(f.getBuffer());
  ElementRange freedRange = {0, INT64_MAX};
  if (f.getOffset() && root == f.getBuffer())
    freedRange = {static_cast<int64_t>(*f.getOffset()),
                  static_cast<int64_t>(*f.getOffset() + *f.getSize())};
  auto reads = inFlight.pendingReadsOf.find(root);
  if (reads != inFlight.pendingReadsOf.end())
    for (const InFlightOps::SourceRead &read : reads->second)
      if (read.source != root || overlaps(read.range, freedRange)) {
        Operation *issuer = inFlight.pending[read.pending].op;
        bool reduction = isGradReduction(issuer);
        InFlightDiagnostic d = f.emitOpError(
            reduction ? "frees a gradient that an asynchronous reduction "
                        "still reads (free it after the zero.wait of its "
                        "token)"
                      : "frees a staged shard that an asynchronous gather "
                        "or copy still reads (free it after the zero.wait "
                        "of its token)");
        d.attachNote(issuer->getLoc())
            << (reduction ? "reduction issued here" : "issued here");
        return failure();
      }
  if (inFlight.resultPendingUntil.count(root)) {
    f.emitOpError("frees the result of a collective still in flight");
    return failure();
  }
  return success();
}

void ScheduleVerifier::retireWait(WaitOp wait, InFlightOps &inFlight) {
  Operation *issuer = wait.getToken().getDefiningOp();
  auto it = inFlight.pendingIndex.find(issuer);
  if (it != inFlight.pendingIndex.end()) {
    size_t i = it->second;
    InFlightOps::Pending &p = inFlight.pending[i];
    for (auto [kind, writes] : p.buffers)
      llvm::erase(inFlight.pendingOnBuffer[{p.group.getOperation(),
                                            static_cast<unsigned>(kind)}],
                  i);
    for (auto [src, r] : getInFlightReads(p.op))
      llvm::erase_if(inFlight.pendingReadsOf[getViewRoot(src)],
                     [&](const InFlightOps::SourceRead &read) {
                       return read.pending == i;
                     });
    inFlight.pendingIndex.erase(it);
  }
  for (Value r : issuer->getResults())
    inFlight.resultPendingUntil.erase(r);
}

/// Exactly one wait, and nothing else consumes the token.
LogicalResult ScheduleVerifier::checkTokenUses(Operation &op, Value token) {
  int64_t waits = 0;
  for (Operation *user : token.getUsers()) {
    if (!isa<WaitOp>(user)) {
      user->emitOpError("consumes a !zero.token; only zero.wait may");
      return failure();
    }
    ++waits;
  }
  if (waits != 1)
    return op.emitOpError("is asynchronous but its token is waited ")
           << waits << " times (exactly once is required)";
  return success();
}

/// Records what an asynchronous op touches until its wait.
void ScheduleVerifier::issueAsync(Operation &op, InFlightOps &inFlight) {
  InFlightOps::Pending p{&op, {}, {}, {0, 0}};
  if (auto coll = dyn_cast<CollectiveOpInterface>(op)) {
    // In place or into the shard accumulator, the rank writes its owned
    // part of the range of the layout.
    p.group = findGroup(coll.getGroupAttr());
    if (std::optional<BufferKind> written = coll.getWrittenBuffer()) {
      p.buffers = {{*written, true}};
      p.range = *coll.getElementRange();
    }
  } else if (auto t = dyn_cast<TransferOpInterface>(op)) {
    p.group = findGroup(t.getGroupAttr());
    if (t.getSourceBuffer())
      p.buffers.push_back({*t.getSourceBuffer(), false});
    if (t.getTargetBuffer())
      p.buffers.push_back({*t.getTargetBuffer(), true});
    p.range =
        t.getElementRange().value_or(ElementRange{0, p.group.getNumelValue()});
  }
  // Its results (a gathered group, a staged shard) are ready at its wait.
  for (Value r : op.getResults())
    if (isa<RankedTensorType>(r.getType()))
      inFlight.resultPendingUntil[r] = &op;
  size_t i = inFlight.pending.size();
  inFlight.pendingIndex[&op] = i;
  for (auto [kind, writes] : p.buffers)
    inFlight
        .pendingOnBuffer[{p.group.getOperation(), static_cast<unsigned>(kind)}]
        .push_back(i);
  for (auto [src, r] : getInFlightReads(&op))
    inFlight.pendingReadsOf[getViewRoot(src)].push_back({i, src, r});
  inFlight.pending.push_back(p);
}

LogicalResult ScheduleVerifier::checkTokens(ArrayRef<Operation *> ops,
                                            StringRef what) {
  InFlightOps inFlight;
  for (Operation *opPtr : ops) {
    Operation &op = *opPtr;
    if (failed(checkInFlightResultUses(op, inFlight)) ||
        failed(checkInFlightAccess(op, inFlight)))
      return failure();
    if (auto wait = dyn_cast<WaitOp>(op)) {
      retireWait(wait, inFlight);
      continue;
    }
    Value token = getToken(&op);
    if (!token)
      continue;
    if (failed(checkTokenUses(op, token)))
      return failure();
    issueAsync(op, inFlight);
  }
  for (const InFlightOps::Pending &p : inFlight.pending)
    if (inFlight.pendingIndex.count(p.op))
      return p.op->emitOpError("is asynchronous but its zero.wait does not "
                               "run in ")
             << what << " (it must be a top-level op of the step)";
  return success();
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

/// Position in run order: the micro step's ops (last_micro_step ones
/// included) run before the boundary function's.
int64_t ScheduleVerifier::runAt(Operation *op, const CoverageOps &c) {
  return index[op] + (runsAtBoundary(getStepPhase(op)) ? c.numOps : 0);
}

/// Files a collective, update, overflow check or transfer under its
/// partition, and the op at which each gradient is written.
LogicalResult ScheduleVerifier::recordCoverage(Operation &op, int64_t i,
                                               CoverageOps &c) {
  auto partitionOf = [&](SymbolRefAttr ref) -> Operation * {
    return schedule.lookupPartition(ref)->partition;
  };
  if (auto g = dyn_cast<GradOp>(op)) {
    c.gradWrittenAt[g.getParamAttr().getAttr()] = i;
  } else if (auto coll = dyn_cast<CollectiveOpInterface>(op)) {
    CoverageRole role = coll.getCoverageRole();
    if (role == CoverageRole::replica_sum && schedule.getMicsReplicas() == 1)
      return op.emitOpError("sums gradients over the MiCS replicas, but "
                            "the schedule has none (no mics_shard_size "
                            "below the world size)");
    auto *ranges = role == CoverageRole::grad_reduction ? &c.reductions
                   : role == CoverageRole::replica_sum  ? &c.replicaSums
                   : role == CoverageRole::param_gather ? &c.gathers
                                                        : nullptr;
    if (ranges)
      (*ranges)[partitionOf(coll.getGroupAttr())].push_back(
          {&op, *coll.getElementRange()});
  } else if (isa<CheckOverflowOp>(op)) {
    c.overflowChecks.push_back(&op);
  } else if (auto adam = dyn_cast<OptimizerStepOp>(op)) {
    c.updates[partitionOf(adam.getGroupAttr())].push_back(adam);
  } else if (auto t = dyn_cast<TransferOpInterface>(op)) {
    // Staged fetches of parameter shards belong to their gathers.
    if (!t.getStagedValue() || t.getTargetBuffer())
      c.transfers[partitionOf(t.getGroupAttr())].push_back(&op);
  }
  return success();
}

/// A staged shard is a fetch of the gathered group's own shard.
LogicalResult ScheduleVerifier::checkStagedShard(Operation &op) {
  auto coll = dyn_cast<CollectiveOpInterface>(op);
  Value shard = coll ? coll.getStagedShard() : Value();
  if (auto fetch = shard ? shard.getDefiningOp<TransferOpInterface>()
                         : TransferOpInterface()) {
    if (fetch.getGroupAttr() != coll.getGroupAttr())
      return op.emitOpError("gathers @")
             << coll.getGroupAttr().getValue() << " from a staged shard of "
             << fetch.getGroupAttr();
  }
  return success();
}

/// Source-form reductions must read the gradients of the parameters at
/// their layout positions.
LogicalResult ScheduleVerifier::checkReductionSources(Operation &op,
                                                      const CoverageOps &c) {
  if (!isGradReduction(&op))
    return success();
  SmallVector<std::pair<Value, ElementRange>> reads = getInFlightReads(&op);
  for (auto [src, r] : reads) {
    if (!c.gradsOf.count(src))
      return op.emitOpError("reduces a value that is not bound to a "
                            "parameter by zero.grad");
    (void)r;
  }
  if (!reads.empty()) {
    int64_t pos = cast<CollectiveOpInterface>(op).getElementRange()->first;
    for (auto [src, r] : reads) {
      // A value bound to several parameters may be reduced for any of them.
      SmallVector<GradOp, 1> grads = c.gradsOf.find(src)->second;
      ElementRange range = r;
      auto at = [&](GradOp g) -> int64_t {
        const ParamLocation *loc = schedule.lookupParam(g.getParam());
        return loc ? loc->offset + range.first : -1;
      };
      if (llvm::none_of(grads, [&](GradOp g) { return at(g) == pos; }))
        return op.emitOpError("reduces the gradient of @")
               << grads.front().getParam() << " (elements [" << range.first
               << ", " << range.second << ")) at layout position " << pos
               << ", but they belong at " << at(grads.front());
      pos += range.second - range.first;
    }
  }
  return success();
}

LogicalResult ScheduleVerifier::checkTiling(PartitionOp p,
                                            SmallVector<RangeOp> &ranges,
                                            StringRef what, StringRef missing) {
  llvm::sort(ranges, [](const RangeOp &a, const RangeOp &b) {
    return a.range < b.range;
  });
  // Owner-computes' gaps hold no parameter (their zeros stay zero): a
  // range need not cover them.
  auto isGap = [&](int64_t lo, int64_t hi) {
    if (!p.getOwners())
      return false;
    for (Attribute ref : p.getParams()) {
      const ParamLocation *loc =
          schedule.lookupParam(cast<FlatSymbolRefAttr>(ref).getValue());
      if (loc && loc->offset < hi && loc->offset + loc->numel > lo)
        return false;
    }
    return true;
  };
  int64_t cursor = 0;
  for (RangeOp &r : ranges) {
    if (r.range.first < cursor) {
      InFlightDiagnostic d =
          r.op->emitOpError()
          << what << " "
          << describe(p, {r.range.first, std::min(cursor, r.range.second)})
          << " a second time in this step";
      return failure();
    }
    if (r.range.first > cursor && !isGap(cursor, r.range.first))
      return p.emitOpError()
             << describe(p, {cursor, r.range.first}) << " " << missing;
    cursor = r.range.second;
  }
  if (cursor < p.getNumelValue() && !isGap(cursor, p.getNumelValue()))
    return p.emitOpError() << describe(p, {cursor, p.getNumelValue()}) << " "
                           << missing;
  return success();
}

/// Gradients must be complete before an in-place reduction reads them.
LogicalResult ScheduleVerifier::checkGradsBeforeReduction(PartitionOp p,
                                                          CoverageOps &c) {
  SmallVector<StringAttr> names;
  SmallVector<int64_t> begins, ends;
  for (auto [ref, off] : llvm::zip(p.getParams(), p.getOffsets())) {
    names.push_back(cast<SymbolRefAttr>(ref).getLeafReference());
    begins.push_back(off);
    ends.push_back(off + schedule.lookupParam(names.back())->numel);
  }
  // The layout is in offset order, so the parameters a reduction covers
  // are found by binary search.
  bool sorted = llvm::is_sorted(begins) && llvm::is_sorted(ends);
  for (RangeOp &r : c.reductions[p]) {
    size_t lo = 0, hi = names.size();
    if (sorted) {
      lo = llvm::partition_point(
               ends, [&](int64_t e) { return e <= r.range.first; }) -
           ends.begin();
      hi = llvm::partition_point(
               begins, [&](int64_t b) { return b < r.range.second; }) -
           begins.begin();
    }
    for (size_t i = lo; i < hi; ++i) {
      StringAttr name = names[i];
      if (!overlaps({begins[i], ends[i]}, r.range))
        continue;
      auto it = c.gradWrittenAt.find(name);
      if (it == c.gradWrittenAt.end() || it->second > index[r.op])
        return r.op->emitOpError("reduces the gradient of @")
               << name.getValue() << " before its zero.grad (or it has none)";
    }
  }
  return success();
}

/// MiCS: the shard groups' gradients are summed over the replicas once per
/// step, each element once, after the group's reductions completed and
/// before the optimizer reads them.
LogicalResult ScheduleVerifier::checkReplicaSums(PartitionOp p,
                                                 CoverageOps &c) {
  if (failed(checkTiling(p, c.replicaSums[p],
                         "sums over the MiCS replicas the gradients of",
                         "are never summed over the MiCS replicas")))
    return failure();
  for (RangeOp &sum : c.replicaSums[p]) {
    for (RangeOp &r : c.reductions[p])
      if (runAt(getCompletion(r.op), c) > runAt(sum.op, c)) {
        InFlightDiagnostic d =
            sum.op->emitOpError("sums gradients of @")
            << p.getSymName()
            << " over the MiCS replicas before the shard group's "
               "reduction completed";
        d.attachNote(getCompletion(r.op)->getLoc())
            << "the reduction completes here";
        return failure();
      }
    Operation *done = getCompletion(sum.op);
    for (Operation *check : c.overflowChecks)
      if (runAt(check, c) < runAt(done, c)) {
        InFlightDiagnostic d =
            done->emitOpError("completes the MiCS replica sum of @")
            << p.getSymName() << " after the overflow check reads it";
        d.attachNote(check->getLoc()) << "the overflow check";
        return failure();
      }
  }
  return success();
}

/// One zero.optimizer_step per partition, after its MiCS replica sums
/// completed.
LogicalResult ScheduleVerifier::checkUpdate(PartitionOp p, CoverageOps &c) {
  SmallVector<OptimizerStepOp> &ups = c.updates[p];
  if (ups.empty())
    return p.emitOpError(
               "is never updated: no zero.optimizer_step for partition @")
           << p.getSymName();
  for (RangeOp &sum : c.replicaSums[p])
    if (runAt(ups[0], c) < runAt(getCompletion(sum.op), c))
      return ups[0].emitOpError("updates @")
             << p.getSymName()
             << " before the MiCS replica sum of its gradients completed";
  if (ups.size() > 1) {
    InFlightDiagnostic d = ups[1].emitOpError("updates partition @")
                           << p.getSymName() << " a second time in this step";
    d.attachNote(ups[0].getLoc()) << "first updated here";
    return failure();
  }
  return success();
}

/// An offloaded optimizer: the gradients go to the host before the host
/// Adam, each element once (in one copy or streamed range by range, each
/// after its reduction completed), and the parameters come back after it,
/// each element once. Offloaded parameter shards are updated in place by the
/// host Adam, or stored once from the device Adam's staged new parameters
/// after it.
LogicalResult ScheduleVerifier::checkOffloadCopies(PartitionOp p,
                                                   CoverageOps &c) {
  OptimizerStepOp update = c.updates[p][0];
  SmallVector<Operation *> &moves = c.transfers[p];
  bool paramsOff = schedule.areParamsOffloaded();
  if (paramsOff && !schedule.isOptimizerOffloaded()) {
    if (moves.size() != 1 ||
        cast<TransferOpInterface>(moves[0]).getStagedValue() !=
            update.getNewParams())
      return p.emitOpError(
                 "has offloaded parameters and a device "
                 "optimizer: its new parameters must be stored "
                 "from its zero.optimizer_step's staged buffer once per "
                 "step, found ")
             << moves.size() << " copies";
  }
  if (!schedule.isOptimizerOffloaded())
    return success();
  SmallVector<RangeOp> downloads, uploads;
  for (Operation *t : moves) {
    auto move = cast<TransferOpInterface>(t);
    ElementRange r =
        move.getElementRange().value_or(ElementRange{0, p.getNumelValue()});
    (move.getTargetBuffer() == BufferKind::host_grads ? downloads : uploads)
        .push_back({t, r});
  }
  bool inPlace = schedule.areParamsOnHost();
  if (downloads.empty() || uploads.empty() != inPlace)
    return p.emitOpError("has an offloaded optimizer: its gradients must "
                         "be copied to the host and its parameters back "
                         "in every step (never with parameter shards in "
                         "host memory), found ")
           << downloads.size() << " and " << uploads.size() << " copies";
  if (failed(checkTiling(p, downloads, "copies the gradients of",
                         "are never copied to the host")) ||
      (!inPlace && failed(checkTiling(p, uploads, "copies the parameters of",
                                      "are never copied back from the host"))))
    return failure();
  for (Operation *t : moves) {
    bool download = cast<TransferOpInterface>(t).getTargetBuffer() ==
                    BufferKind::host_grads;
    if (download != (runAt(t, c) < runAt(update, c)))
      return t->emitOpError(download ? "copies the gradients of @"
                                     : "copies the parameters of @")
             << p.getSymName()
             << (download ? " to the host after" : " to the device before")
             << " their host zero.optimizer_step";
  }
  for (RangeOp &d : downloads)
    for (RangeOp &r : c.reductions[p]) {
      if (!overlaps(d.range, r.range))
        continue;
      Operation *done = r.op;
      if (Value token = getToken(r.op))
        for (Operation *user : token.getUsers())
          done = user;
      if (runAt(done, c) > runAt(d.op, c)) {
        InFlightDiagnostic diag =
            d.op->emitOpError("copies the gradients of ")
            << describe(p, {std::max(d.range.first, r.range.first),
                            std::min(d.range.second, r.range.second)})
            << " to the host before their reduction completed";
        diag.attachNote(done->getLoc()) << "the reduction completes here";
        return failure();
      }
    }
  if (!c.gathers[p].empty())
    for (Operation *t : moves)
      for (RangeOp &g : c.gathers[p])
        if (index[g.op] < index[t])
          return g.op->emitOpError("gathers parameters of @")
                 << p.getSymName()
                 << " before they are copied back from the host";
  return success();
}

LogicalResult ScheduleVerifier::checkGathers(PartitionOp p, CoverageOps &c) {
  int64_t stage = schedule.getStage();
  if (!c.gathers[p].empty()) {
    if (failed(checkTiling(p, c.gathers[p], "gathers the parameters of",
                           "are never gathered after the update")))
      return failure();
    for (RangeOp &g : c.gathers[p])
      if (index[g.op] < index[c.updates[p][0]])
        return g.op->emitOpError("gathers parameters of @")
               << p.getSymName() << " before their zero.optimizer_step update";
  } else if (stage == 1 || stage == 2) {
    if (schedule.getWorldSize() > 1)
      return p.emitOpError("stage-")
             << stage << " partition @" << p.getSymName()
             << " is updated but its parameters are never gathered";
  }
  return success();
}

LogicalResult ScheduleVerifier::checkPartitionCoverage(PartitionOp p,
                                                       CoverageOps &c) {
  if (schedule.getWorldSize() > 1 || !c.reductions[p].empty())
    if (failed(checkTiling(p, c.reductions[p], "reduces the gradients of",
                           "are never reduced in this step")))
      return failure();
  if (schedule.getStage() <= 1 && failed(checkGradsBeforeReduction(p, c)))
    return failure();
  if (schedule.getMicsReplicas() > 1 && failed(checkReplicaSums(p, c)))
    return failure();
  if (failed(checkUpdate(p, c)) || failed(checkOffloadCopies(p, c)))
    return failure();
  return checkGathers(p, c);
}

LogicalResult ScheduleVerifier::checkCoverage() {
  Block &body = schedule.getStep().getBodyBlock();
  CoverageOps c;
  c.numOps = static_cast<int64_t>(index.size());
  schedule.getStep().getBody().walk(
      [&](GradOp g) { c.gradsOf[g.getGrad()].push_back(g); });
  for (Operation &op : body) {
    int64_t i = index[&op];
    if (failed(recordCoverage(op, i, c)) || failed(checkStagedShard(op)) ||
        failed(checkReductionSources(op, c)))
      return failure();
  }
  for (const PartitionBuffers &pb : schedule.getPartitions()) {
    // checkFrozen saw that nothing reduces or updates a frozen partition.
    if (pb.frozen)
      continue;
    if (failed(checkPartitionCoverage(pb.partition, c)))
      return failure();
  }
  return success();
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
