//===- TokenMean.cpp - The mean over the valid labels of a global batch ---===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/Transforms/Passes.h"

#include "zero/Dialect/NN/IR/NNDialect.h"
#include "zero/Dialect/Zero/Analysis/Schedule.h"
#include "zero/Dialect/Zero/IR/ZeroDialect.h"

#include "mlir/IR/IRMapping.h"

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

/// Whether `v` is a sum over the batch of a tensor, zero-import's
/// `x.sum()`: its rows summed to a scalar by nn.reduce_sum.
bool isBatchSum(Value v) {
  auto sum = v.getDefiningOp<nn::ReduceSumOp>();
  return sum && cast<RankedTensorType>(sum.getType()).getRank() == 0;
}

/// Whether one of `ops` reads an input of the step (block `body`'s
/// arguments): what they compute depends on the batch.
bool readsStepInput(ArrayRef<Operation *> ops, Block &body) {
  return llvm::any_of(ops, [&](Operation *op) {
    return llvm::any_of(op->getOperands(), [&](Value v) {
      auto arg = dyn_cast<BlockArgument>(v);
      return arg && arg.getOwner() == &body;
    });
  });
}

/// Whether `ops` compute a value from the step's inputs alone: compute
/// ops, none of the zero dialect's (a parameter, a collective, a value the
/// runtime keeps), and at least one reads an input.
bool computesFromInputs(ArrayRef<Operation *> ops, Block &body) {
  return llvm::none_of(ops,
                       [](Operation *op) {
                         return isa<ZeroDialect>(op->getDialect());
                       }) &&
         readsStepInput(ops, body);
}

/// A scalar denominator of the loss computed from the step's inputs alone,
/// `g(s)`: `s` a sum over the micro batch (`x.sum()`), `g` the ops after it
/// that mean the global batch's value when applied to the global sum (a
/// lower bound by clamp, an added constant).
struct GlobalDenominator {
  Value denominator;
  Value sum;
  SmallVector<Operation *> after;
};

/// The reciprocal's operand as a GlobalDenominator; nothing when it is not
/// a scalar of the inputs; an error when it is one whose global batch's
/// value is unknown.
FailureOr<std::optional<GlobalDenominator>>
matchDenominator(TrainStepOp step, nn::ReciprocalOp reciprocal) {
  Value d = reciprocal.getInput();
  auto type = cast<RankedTensorType>(d.getType());
  if (type.getRank() != 0 ||
      !computesFromInputs(getOpsComputing(step, {d}), step.getBodyBlock()))
    return std::optional<GlobalDenominator>();
  GlobalDenominator m{d, d, {}};
  while (Operation *def = m.sum.getDefiningOp()) {
    if (auto clamp = dyn_cast<nn::ClampOp>(def)) {
      m.after.push_back(def);
      m.sum = clamp.getInput();
      continue;
    }
    if (auto add = dyn_cast<nn::AddOp>(def)) {
      auto constant = [](Value v) { return v.getDefiningOp<nn::FillOp>(); };
      if (constant(add.getRhs()) || constant(add.getLhs())) {
        m.after.push_back(def);
        m.sum = constant(add.getRhs()) ? add.getLhs() : add.getRhs();
        continue;
      }
    }
    break;
  }
  if (isBatchSum(m.sum) &&
      cast<RankedTensorType>(m.sum.getType()).getElementType().isF32())
    return std::optional<GlobalDenominator>(m);
  Operation *def = m.sum.getDefiningOp();
  return reciprocal.emitOpError(
             "divides the loss by a scalar computed from the step's inputs "
             "alone, whose value over the global batch (every rank and "
             "micro step) is known only for a sum, `x.sum()`, optionally "
             "clamped or plus a constant; got ")
         << (def ? def->getName().getStringRef() : StringRef("an input"));
}

/// The ops through which `from` reaches the step's loss, each linear in
/// its operands (nn.mul, nn.add, nn.scale, nn.reshape: the loss is a sum of
/// terms proportional to it); else the first other op.
FailureOr<SmallVector<Operation *>> linearPath(TrainStepOp step, Value from,
                                               Operation *&other) {
  SmallVector<Operation *> forward = getOpsComputing(step, {step.getLoss()});
  llvm::SmallPtrSet<Operation *, 32> inLoss(forward.begin(), forward.end());
  SmallVector<Value> work{from};
  llvm::SmallPtrSet<Operation *, 8> seen;
  SmallVector<Operation *> path;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    for (Operation *user : v.getUsers()) {
      if (!inLoss.contains(user) || isa<ReturnOp>(user) ||
          !seen.insert(user).second)
        continue;
      if (!user->hasTrait<nn::OpTrait::LinearInOperands>()) {
        other = user;
        return failure();
      }
      path.push_back(user);
      llvm::append_range(work, user->getResults());
    }
  }
  return path;
}

/// Checks that the loss is a sum of terms linear in the reciprocal's
/// result, the only form for which a micro batch's part of the global
/// ratio adds up to it.
LogicalResult checkLinear(TrainStepOp step, nn::ReciprocalOp reciprocal) {
  Operation *other = nullptr;
  if (succeeded(linearPath(step, reciprocal.getResult(), other)))
    return success();
  return reciprocal.emitOpError(
             "divides the loss by a sum over the global batch, which is "
             "exact only for a loss that is a sum of terms proportional to "
             "the quotient (nn.mul, nn.add, nn.scale, nn.reshape); the "
             "quotient reaches ")
         << other->getName().getStringRef();
}

/// Makes every scalar denominator of the inputs that the loss divides by
/// (`(x * mask).sum() / mask.sum().clamp(min=1)`) the global batch's: its
/// sum over every micro batch and rank (zero.count_sum, zero.step_sum),
/// times the micro batch's share 1 / (W * K) (zero.micro_share), so that
/// each micro batch's loss is its part of the global ratio times W * K, as
/// zero.label_share does for the mean over labels. `changed` is set when
/// the step is rewritten.
LogicalResult rewriteDenominators(TrainStepOp step, int64_t divisor,
                                  FlatSymbolRefAttr group,
                                  SmallVectorImpl<Value> &quotients,
                                  bool &changed) {
  SmallVector<nn::ReciprocalOp> reciprocals(
      step.getBodyBlock().getOps<nn::ReciprocalOp>());
  MLIRContext *ctx = step.getContext();
  int64_t index = 0;
  llvm::SmallPtrSet<Value, 4> done;
  for (nn::ReciprocalOp reciprocal : reciprocals) {
    FailureOr<std::optional<GlobalDenominator>> match =
        matchDenominator(step, reciprocal);
    if (failed(match))
      return failure();
    if (!*match)
      continue;
    if (failed(checkLinear(step, reciprocal)))
      return failure();
    GlobalDenominator &m = **match;
    quotients.push_back(reciprocal.getResult());
    if (!done.insert(m.denominator).second)
      continue;
    changed = true;
    Location loc = reciprocal.getLoc();
    OpBuilder b(ctx);
    b.setInsertionPointAfterValue(m.denominator);
    auto count =
        CountSumOp::create(b, loc, RankedTensorType::get({1}, b.getF32Type()),
                           m.sum, b.getI64IntegerAttr(index), group,
                           PhaseAttr::get(ctx, Phase::first_micro_step));
    Value global =
        StepSumOp::create(b, loc, m.sum.getType(), b.getI64IntegerAttr(index));
    ++index;
    IRMapping map;
    map.map(m.sum, global);
    for (Operation *op : llvm::reverse(m.after))
      global = b.clone(*op, map)->getResult(0);
    Value share = MicroShareOp::create(b, loc, global.getType(),
                                       b.getF64FloatAttr(divisor));
    Value scaled = nn::MulOp::create(b, loc, global, share);
    m.denominator.replaceUsesWithIf(
        scaled, [&](OpOperand &use) { return use.getOwner() != count; });
    // The micro batch's own clamp or constant is left to the count
    // function's sum.
    for (Operation *op : m.after)
      if (op->use_empty())
        op->erase();
  }
  return success();
}

/// Whether `from` reaches the loss through a product with one of
/// `quotients`.
bool isDivided(TrainStepOp step, Value from, ArrayRef<Value> quotients) {
  Operation *other = nullptr;
  FailureOr<SmallVector<Operation *>> path = linearPath(step, from, other);
  return succeeded(path) && llvm::any_of(*path, [&](Operation *op) {
           auto product = dyn_cast<nn::MulOp>(op);
           return product && llvm::any_of(op->getOperands(), [&](Value v) {
                    return llvm::is_contained(quotients, v);
                  });
         });
}

/// Multiplies by W * K each sum over the batch that the loss adds
/// (`x.sum()`, and `x.mean()`'s sum scaled by 1 / numel of the global
/// batch) and the gradient its backward broadcasts: a micro batch sums its
/// own rows, the global batch's sum is that of every micro batch, and the
/// driver and the optimizer take the mean of the W * K micro batches'
/// losses and gradients. A sum divided by a global denominator (`quotients`)
/// has its W * K in the denominator's share.
LogicalResult rewriteBatchSums(TrainStepOp step, int64_t divisor,
                               ArrayRef<Value> quotients, bool &changed) {
  Block &body = step.getBodyBlock();
  for (Operation *op : getOpsComputing(step, {step.getLoss()})) {
    auto sum = dyn_cast<nn::ReduceSumOp>(op);
    if (!sum || !isBatchSum(sum.getResult()))
      continue;
    // A sum of the parameters alone is every micro batch's.
    if (!readsStepInput(getOpsComputing(step, {sum.getResult()}), body) ||
        isDivided(step, sum.getResult(), quotients))
      continue;
    Operation *other = nullptr;
    if (failed(linearPath(step, sum.getResult(), other)))
      return sum.emitOpError(
                 "sums over the batch, whose global value is the sum of the "
                 "micro batches' only for a loss that is a sum of terms "
                 "proportional to it (nn.mul, nn.add, nn.scale, "
                 "nn.reshape); the sum reaches ")
             << other->getName().getStringRef();
    changed = true;
    OpBuilder b(step.getContext());
    b.setInsertionPointAfter(sum);
    auto factor = b.getF64FloatAttr(static_cast<double>(divisor));
    auto scaled = nn::ScaleOp::create(b, sum.getLoc(), sum.getResult(), factor);
    sum.getResult().replaceAllUsesExcept(scaled, scaled);
    // Its backward: the gradient broadcast back to the summed rows.
    for (Operation *user : sum.getInput().getUsers())
      if (auto grad = dyn_cast<nn::ReduceSumGradOp>(user)) {
        b.setInsertionPoint(grad);
        grad.getResultGradMutable().assign(nn::ScaleOp::create(
            b, grad.getLoc(), grad.getResultGrad(), factor));
      }
  }
  return success();
}

/// The global batch's denominators and sums of a step on W ranks with K
/// micro steps.
LogicalResult rewriteGlobalSums(TrainStepOp step, bool &changed) {
  // The verified #zero.schedule is enough here: the step schedule, which
  // maps every parameter, is not collected for the steps (most) that have
  // nothing to rewrite.
  ScheduleAttr schedule = step.getScheduleAttr();
  if (!schedule)
    return success();
  int64_t divisor = schedule.getWorldSize() * schedule.getAccumulationSteps();
  // One batch of one rank: its own sums are the global batch's.
  auto partitions = step->getParentOfType<ModuleOp>().getOps<PartitionOp>();
  if (divisor == 1 || partitions.empty())
    return success();
  auto group = FlatSymbolRefAttr::get((*partitions.begin()).getSymNameAttr());
  SmallVector<Value> quotients;
  if (failed(rewriteDenominators(step, divisor, group, quotients, changed)))
    return failure();
  return rewriteBatchSums(step, divisor, quotients, changed);
}

/// `changed` is set when the step is rewritten.
LogicalResult rewriteStep(TrainStepOp step, bool &changed) {
  SmallVector<Operation *> ignoring;
  step.walk([&](LossOpInterface loss) {
    if (loss.getIgnoreIndex())
      ignoring.push_back(loss);
  });
  if (failed(rewriteGlobalSums(step, changed)))
    return failure();
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
