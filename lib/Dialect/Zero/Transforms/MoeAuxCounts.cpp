//===- MoeAuxCounts.cpp - A load-balancing loss over the global batch -----===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/Transforms/Passes.h"

#include "zero/Dialect/NN/IR/NNDialect.h"
#include "zero/Dialect/Zero/Analysis/Schedule.h"
#include "zero/Dialect/Zero/IR/ZeroDialect.h"

namespace mlir::zero {
#define GEN_PASS_DEF_ZEROMOEAUXCOUNTSPASS
#include "zero/Dialect/Zero/Transforms/Passes.h.inc"
} // namespace mlir::zero

using namespace mlir;
using namespace mlir::zero;

namespace {

/// Why the step's batch cannot give each part the global batch's loss, or
/// an empty string.
std::string unsupported(const StepSchedule &schedule) {
  if (schedule.getAccumulationSteps() > 1)
    return "gradient accumulation (a micro step's backward would need the "
           "later micro steps' expert counts)";
  if (schedule.getSequenceParallel() > 1)
    return "sequence parallelism";
  if (schedule.getMicsShardSize() > 0)
    return "MiCS";
  return "";
}

/// `changed` is set when the step is rewritten.
LogicalResult rewriteStep(TrainStepOp step, bool &changed) {
  SmallVector<nn::MoeAuxLossOp> losses;
  step.walk([&](nn::MoeAuxLossOp op) {
    if (!op.getCounts())
      losses.push_back(op);
  });
  if (losses.empty())
    return success();
  if (!step.getScheduleAttr())
    return step.emitOpError("zero-moe-aux-counts needs the step's "
                            "#zero.schedule (zero-partition and "
                            "zero-grad-sync first)");
  FailureOr<StepSchedule> schedule = StepSchedule::get(step);
  if (failed(schedule))
    return failure();
  int64_t world = schedule->getWorldSize();
  if (world == 1 && schedule->getAccumulationSteps() == 1)
    return success();
  changed = true;
  std::string why = unsupported(*schedule);
  if (!why.empty())
    return losses.front().emitOpError(
               "(the load-balancing loss) is the global batch's: its expert "
               "counts are summed over the ranks, which is not supported "
               "with ")
           << why;
  // The counts are summed over every rank (the runtime's world): the group
  // of a dense partition, not an expert partition's replicas.
  const PartitionBuffers *dense =
      llvm::find_if(schedule->getPartitions(), [](const PartitionBuffers &p) {
        return !p.partition.getExpert();
      });
  if (dense == schedule->getPartitions().end())
    return step.emitOpError("zero-moe-aux-counts needs a dense (non-expert) "
                            "partition, whose data-parallel world sums the "
                            "counts");
  auto group = FlatSymbolRefAttr::get(dense->partition.getSymNameAttr());

  OpBuilder b(step.getContext());
  for (nn::MoeAuxLossOp loss : losses) {
    Value logits = loss.getLogits();
    Location loc = loss.getLoc();
    b.setInsertionPoint(loss);
    Value local =
        nn::MoeExpertCountsOp::create(b, loc, logits, loss.getTopKAttr());
    Value global = AllReduceOp::create(
                       b, loc, local.getType(), Type(),
                       ReduceKindAttr::get(b.getContext(), ReduceKind::sum),
                       local, group, BufferKindAttr(), IntegerAttr(),
                       IntegerAttr(), UnitAttr(), RankSetKindAttr())
                       .getResult();
    int64_t rows =
        cast<RankedTensorType>(logits.getType()).getDimSize(0) * world;
    IntegerAttr rowsAttr = b.getI64IntegerAttr(rows);
    loss.getCountsMutable().assign(global);
    loss.setRowsAttr(rowsAttr);
    // Its gradients (zero-autodiff's) take the same counts.
    for (nn::MoeAuxLossGradOp grad : loss.getGrads())
      if (!grad.getCounts()) {
        if (!global.getDefiningOp()->isBeforeInBlock(grad))
          return grad.emitOpError("comes before the expert counts of its "
                                  "forward");
        grad.getCountsMutable().assign(global);
        grad.setRowsAttr(rowsAttr);
      }
  }
  return success();
}

struct ZeroMoeAuxCountsPass
    : public zero::impl::ZeroMoeAuxCountsPassBase<ZeroMoeAuxCountsPass> {
  using Base::Base;
  void runOnOperation() override {
    bool changed = false;
    for (TrainStepOp step : getOperation().getOps<TrainStepOp>())
      if (failed(rewriteStep(step, changed)))
        return signalPassFailure();
    // Unchanged IR needs no verification after the pass.
    if (!changed)
      markAllAnalysesPreserved();
  }
};

} // namespace
