//===- VerifyScheduleCoverage.cpp - Each element reduced and gathered once ===//
//
// Part of the zero-mlir project.
//
// The coverage rules of zero-verify-schedule: over each partition's layout,
// the gradient reductions, MiCS replica sums, offload copies and parameter
// gathers each cover every element once, in order around the partition's
// one zero.optimizer_step.
//
//===----------------------------------------------------------------------===//

#include "VerifySchedule.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::zero;
using namespace mlir::zero::verifier;

namespace mlir::zero::verifier {

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

} // namespace mlir::zero::verifier

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
