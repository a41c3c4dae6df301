//===- TokenMean.cpp - The mean over the valid labels of a global batch ---===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/Transforms/Passes.h"

#include "zero/Dialect/NN/IR/NNDialect.h"
#include "zero/Dialect/Zero/Analysis/Schedule.h"
#include "zero/Dialect/Zero/IR/ZeroDialect.h"

namespace mlir::zero {
#define GEN_PASS_DEF_ZEROTOKENMEANPASS
#include "zero/Dialect/Zero/Transforms/Passes.h.inc"
} // namespace mlir::zero

using namespace mlir;
using namespace mlir::zero;

namespace {

/// The loss-gradient operand of the one backward op of `loss` that reads
/// its labels with its ignore index and the same forward operands, or an
/// error counting them.
FailureOr<OpOperand *> findGradSeed(LossOpInterface loss) {
  SmallVector<OpOperand *> seeds = loss.getGradSeeds();
  if (seeds.size() == 1)
    return seeds.front();
  return loss.emitOpError("with ignore_index needs its one ")
         << loss->getName().getStringRef()
         << "_grad (zero-autodiff first), found " << seeds.size();
}

/// Scales the loss of `step` and its backward's seed by the micro batch's
/// share of the global batch's valid labels, counted by a zero.count_labels.
LogicalResult rewriteLoss(TrainStepOp step, LossOpInterface loss) {
  Value result = loss->getResult(0);
  if (!result.hasOneUse())
    return loss.emitOpError("with ignore_index is the step's loss and must "
                            "be used by zero.return (or the nn.add of a "
                            "term to it) only");
  FailureOr<OpOperand *> seed = findGradSeed(loss);
  if (failed(seed))
    return failure();
  if (!step.getScheduleAttr())
    return step.emitOpError("zero-token-mean needs the step's "
                            "#zero.schedule (zero-partition and "
                            "zero-grad-sync first)");
  FailureOr<StepSchedule> schedule = StepSchedule::get(step);
  if (failed(schedule))
    return failure();
  if (schedule->getPartitions().empty())
    return step.emitOpError("zero-token-mean needs a partition, whose "
                            "data-parallel world counts the labels");

  MLIRContext *ctx = step.getContext();
  Location loc = loss.getLoc();
  OpBuilder b(ctx);
  // Where the labels are computed, so that the count function runs no
  // more of the step than they need.
  Value labels = loss.getLabels();
  if (Operation *def = labels.getDefiningOp())
    b.setInsertionPointAfter(def);
  else
    b.setInsertionPointToStart(&step.getBodyBlock());
  CountLabelsOp::create(
      b, loc, RankedTensorType::get({1}, b.getI64Type()), labels,
      b.getI64IntegerAttr(*loss.getIgnoreIndex()),
      FlatSymbolRefAttr::get(
          schedule->getPartitions().front().partition.getSymNameAttr()),
      PhaseAttr::get(ctx, Phase::first_micro_step));

  b.setInsertionPointAfter(loss);
  double divisor = static_cast<double>(schedule->getWorldSize() *
                                       schedule->getAccumulationSteps());
  Value share = LabelShareOp::create(b, loc, result.getType(),
                                     b.getF64FloatAttr(divisor));
  Value scaled = nn::MulOp::create(b, loc, result, share);
  result.replaceAllUsesExcept(scaled, scaled.getDefiningOp());

  Operation *grad = (*seed)->getOwner();
  b.setInsertionPoint(grad);
  (*seed)->set(nn::MulOp::create(b, grad->getLoc(), (*seed)->get(), share));
  return success();
}

/// `changed` is set when the step is rewritten.
LogicalResult rewriteStep(TrainStepOp step, bool &changed) {
  SmallVector<Operation *> ignoring;
  step.walk([&](LossOpInterface loss) {
    if (loss.getIgnoreIndex())
      ignoring.push_back(loss);
  });
  if (ignoring.empty())
    return success();
  changed = true;
  Operation *loss = step.getLoss().getDefiningOp();
  // A term added to the model's loss (a mixture of experts' load-balancing
  // loss, `loss += coef * aux`): the cross entropy is the add's operand, and
  // only it is scaled by the micro batch's share.
  if (auto add = dyn_cast_or_null<nn::AddOp>(loss))
    for (Value v : add->getOperands())
      if (llvm::is_contained(ignoring, v.getDefiningOp()))
        loss = v.getDefiningOp();
  for (Operation *op : ignoring)
    if (op != loss)
      return op->emitOpError(
          "with ignore_index must be the train step's loss (zero.return's "
          "operand): the step's loss is then the mean over the valid labels "
          "of the global batch, which zero-token-mean computes from it");
  return rewriteLoss(step, cast<LossOpInterface>(loss));
}

struct ZeroTokenMeanPass
    : public zero::impl::ZeroTokenMeanPassBase<ZeroTokenMeanPass> {
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
