//===- VerifySchedule.h - The schedule verifier's rules ---------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//
//
// Private to lib/Dialect/Zero/Analysis: the verifier that
// zero-verify-schedule runs, whose rules are in three files:
// VerifySchedule.cpp (control flow, frees, frozen partitions, the memory
// plan, phases, swap buffers, hpZ, and the pass), VerifyScheduleTokens.cpp
// (the asynchronous ops in flight) and VerifyScheduleCoverage.cpp (what
// reduces, updates and gathers each partition).
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_LIB_DIALECT_ZERO_ANALYSIS_VERIFYSCHEDULE_H
#define ZERO_LIB_DIALECT_ZERO_ANALYSIS_VERIFYSCHEDULE_H

#include "zero/Dialect/Zero/Analysis/Schedule.h"

#include "llvm/ADT/DenseMap.h"

#include <string>
#include <utility>

namespace mlir::zero::verifier {

using ElementRange = std::pair<int64_t, int64_t>; // [begin, end)

inline bool overlaps(ElementRange a, ElementRange b) {
  return a.first < b.second && b.first < a.second;
}

/// The completion token of an asynchronous collective or transfer.
inline Value getToken(Operation *op) {
  if (auto coll = dyn_cast<CollectiveOpInterface>(op))
    return coll.getToken();
  if (auto t = dyn_cast<TransferOpInterface>(op))
    return t.getToken();
  return {};
}

/// What a collective or transfer reads until it completes.
inline SmallVector<std::pair<Value, ElementRange>>
getInFlightReads(Operation *op) {
  if (auto coll = dyn_cast<CollectiveOpInterface>(op))
    return coll.getInFlightReads();
  if (auto t = dyn_cast<TransferOpInterface>(op))
    return t.getInFlightReads();
  return {};
}

inline bool isGradReduction(Operation *op) {
  auto coll = dyn_cast<CollectiveOpInterface>(op);
  return coll && coll.getCoverageRole() == CoverageRole::grad_reduction;
}

/// One gradient reduction or parameter gather over a layout range.
struct RangeOp {
  Operation *op;
  ElementRange range;
};

/// What checkTokens tracks (VerifyScheduleTokens.cpp) and what checkCoverage
/// collects (VerifyScheduleCoverage.cpp).
struct InFlightOps;
struct CoverageOps;

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

} // namespace mlir::zero::verifier

#endif // ZERO_LIB_DIALECT_ZERO_ANALYSIS_VERIFYSCHEDULE_H
