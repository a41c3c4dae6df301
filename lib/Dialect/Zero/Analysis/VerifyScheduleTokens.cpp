//===- VerifyScheduleTokens.cpp - Asynchronous ops and their tokens -------===//
//
// Part of the zero-mlir project.
//
// The token rules of zero-verify-schedule: each asynchronous collective or
// transfer is waited exactly once, and nothing reads its result, frees what
// it reads or touches what it writes before that wait.
//
//===----------------------------------------------------------------------===//

#include "VerifySchedule.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::zero;
using namespace mlir::zero::verifier;

namespace mlir::zero::verifier {

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

} // namespace mlir::zero::verifier

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
