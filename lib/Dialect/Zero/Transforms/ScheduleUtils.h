//===- ScheduleUtils.h - Shared helpers of the ZeRO schedule passes -*- C++
//-*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//
//
// Private helpers shared by zero-partition, zero-grad-sync, zero-param-gather,
// zero-prefetch and zero-optimizer: the schedule of a partitioned step, the
// phase marker, the forward/backward split point, and the re-inference of
// batch-carrying types.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_LIB_DIALECT_ZERO_TRANSFORMS_SCHEDULEUTILS_H
#define ZERO_LIB_DIALECT_ZERO_TRANSFORMS_SCHEDULEUTILS_H

#include "zero/Dialect/NN/IR/NNDialect.h"
#include "zero/Dialect/Zero/Analysis/Schedule.h"
#include "zero/Dialect/Zero/IR/ZeroDialect.h"

#include "DivideShapes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"

namespace mlir::zero::schedule {

/// The schedule of a partitioned step (StepSchedule: its #zero.schedule,
/// partitions and parameter locations); an error naming `pass` when
/// zero-partition has not run.
inline FailureOr<StepSchedule> getPartitionedSchedule(TrainStepOp step,
                                                      llvm::StringRef pass) {
  if (!step.getScheduleAttr())
    return mlir::emitError(step.getLoc())
           << "train step @" << step.getSymName() << ": " << pass
           << " needs a partitioned train step (run "
              "zero-partition first)";
  return StepSchedule::get(step);
}

/// Runs only in the last micro step of an accumulation window.
inline void markBoundary(Operation *op) {
  cast<StepPhaseOpInterface>(op).setPhase(Phase::boundary);
}

/// The first op of the backward: the loss seed (`nn.fill {zero.loss_seed}`,
/// or the `zero.loss_scale` that replaced it at fp16). Null before autodiff.
inline Operation *findBackwardStart(Block &body) {
  for (Operation &op : body)
    if (isLossSeed(&op) || isa<LossScaleOp>(op))
      return &op;
  return nullptr;
}

/// The optimizer goes before the first op whose phase places it after the
/// optimizer, or before the terminator.
inline Operation *getOptimizerInsertionPoint(Block &body) {
  for (Operation &op : body)
    if (isAfterOptimizer(getStepPhase(&op)))
      return &op;
  return body.getTerminator();
}

/// Divides the batch dimension (dim 0) of every input of `step` by `factor`
/// and re-infers the type of every value derived from them. Ops with
/// InferTypeOpInterface are re-inferred; for the others a result takes the
/// new shape of an operand that had its old shape (elementwise ops, casts,
/// gradient ops), reshape/split results divide their dim 0 and an
/// all-to-all exchanges the new input's shape. Values not
/// derived from the inputs (parameters, their gradients) are untouched. The
/// caller has checked that the inputs' batch is divisible.
inline LogicalResult divideBatch(TrainStepOp step, int64_t factor) {
  if (factor == 1)
    return success();
  Block &body = step.getBodyBlock();
  llvm::DenseMap<Value, RankedTensorType> oldTypes;
  auto divideDim0 = [&](Operation *where,
                        RankedTensorType t) -> FailureOr<RankedTensorType> {
    if (t.getRank() == 0 || t.getDimSize(0) % factor != 0)
      return where->emitOpError("dimension 0 of ")
             << t << " is not divisible by " << factor
             << " (the batch must stay the outermost dimension)";
    SmallVector<int64_t> shape(t.getShape());
    shape[0] /= factor;
    return RankedTensorType::get(shape, t.getElementType());
  };
  for (BlockArgument arg : body.getArguments()) {
    auto t = cast<RankedTensorType>(arg.getType());
    auto nt = divideDim0(step, t);
    if (failed(nt))
      return failure();
    oldTypes[arg] = t;
    arg.setType(*nt);
  }
  auto rule = [&](Operation *opPtr,
                  SmallVectorImpl<Type> &newTypes) -> LogicalResult {
    Operation &op = *opPtr;
    if (auto a2a = dyn_cast<AllToAllOp>(op)) {
      // An exchange (sequence parallelism beside data parallelism) moves
      // the same P chunks of the smaller input: its result is the new
      // input's shape with the split and concat dimensions exchanged.
      ArrayRef<int64_t> was = oldTypes[a2a.getInput()].getShape();
      auto out = a2a.getResult().getType();
      int64_t split = a2a.getSplitDim(), concat = a2a.getConcatDim();
      SmallVector<int64_t> shape(a2a.getInput().getType().getShape());
      if (split != concat && was[concat] != 0) {
        int64_t p = out.getDimSize(concat) / was[concat];
        if (p == 0 || shape[split] % p != 0)
          return op.emitOpError("cannot exchange the local batch's ")
                 << a2a.getInput().getType() << " over " << p << " ranks";
        shape[split] /= p;
        shape[concat] *= p;
      }
      newTypes.push_back(RankedTensorType::get(shape, out.getElementType()));
      if (Value token = a2a.getToken())
        newTypes.push_back(token.getType());
    } else if (auto exchange = dyn_cast<MoeExchangeOp>(op)) {
      // The receive buffer is planned from the local rows (its capacity);
      // the counts are per expert.
      auto rows = cast<RankedTensorType>(exchange.getRows().getType());
      auto recv = cast<RankedTensorType>(exchange.getRecv().getType());
      newTypes.push_back(RankedTensorType::get(
          {exchange.getCapacityFor(rows.getDimSize(0)), recv.getDimSize(1)},
          recv.getElementType()));
      newTypes.push_back(exchange.getCounts().getType());
      newTypes.push_back(exchange.getLocalOffsets().getType());
    } else if (auto ret = dyn_cast<MoeReturnOp>(op)) {
      // The rows return to the local dispatch's order.
      auto d = divideDim0(&op, cast<RankedTensorType>(ret.getRows().getType()));
      if (failed(d))
        return failure();
      newTypes.push_back(*d);
    } else {
      for (Value r : op.getResults()) {
        auto rt = dyn_cast<RankedTensorType>(r.getType());
        Type nt = r.getType();
        if (rt && rt.getRank() > 0) {
          bool matched = false;
          for (Value o : op.getOperands()) {
            auto it = oldTypes.find(o);
            if (it == oldTypes.end() || it->second.getShape() != rt.getShape())
              continue;
            nt = RankedTensorType::get(
                cast<RankedTensorType>(o.getType()).getShape(),
                rt.getElementType());
            matched = true;
            break;
          }
          if (!matched && op.hasTrait<nn::OpTrait::KeepsLeadingRows>()) {
            // A result that keeps its operand's rows (dim 0, as a split of
            // the last axis does) keeps their new count: an expert
            // exchange's received rows are its capacity for the local rows,
            // not the global capacity divided.
            auto kept = llvm::find_if(op.getOperands(), [&](Value o) {
              auto it = oldTypes.find(o);
              return it != oldTypes.end() && it->second.getRank() > 0 &&
                     it->second.getDimSize(0) == rt.getDimSize(0);
            });
            if (kept != op.getOperands().end()) {
              SmallVector<int64_t> shape(rt.getShape());
              shape[0] =
                  cast<RankedTensorType>((*kept).getType()).getDimSize(0);
              nt = RankedTensorType::get(shape, rt.getElementType());
            } else {
              auto d = divideDim0(&op, rt);
              if (failed(d))
                return failure();
              nt = *d;
            }
          }
        }
        newTypes.push_back(nt);
      }
    }
    return success();
  };
  // A concat of divided values along another axis takes the local rows of
  // its constant operands too: the zeros nn.split's derivative fills in for
  // a part without a gradient (a slice of the sequence the loss never
  // reads) have the global batch's rows.
  auto localFills = [&](Operation *op) -> FailureOr<bool> {
    auto concat = dyn_cast<nn::ConcatOp>(op);
    if (!concat || concat.getAxis() == 0)
      return false;
    std::optional<std::pair<int64_t, int64_t>> rows;
    for (Value v : concat.getInputs())
      if (auto it = oldTypes.find(v);
          it != oldTypes.end() && it->second.getRank() > 0)
        rows = {it->second.getDimSize(0),
                cast<RankedTensorType>(v.getType()).getDimSize(0)};
    if (!rows)
      return false;
    for (OpOperand &use : concat->getOpOperands()) {
      auto fill = use.get().getDefiningOp<nn::FillOp>();
      auto t = dyn_cast<RankedTensorType>(use.get().getType());
      if (!fill || !t || t.getRank() == 0 || t.getDimSize(0) != rows->first)
        continue;
      SmallVector<int64_t> shape(t.getShape());
      shape[0] = rows->second;
      OpBuilder b(concat);
      Operation *local = b.clone(*fill);
      local->getResult(0).setType(
          RankedTensorType::get(shape, t.getElementType()));
      use.set(local->getResult(0));
      if (fill->use_empty())
        fill->erase();
    }
    return false;
  };
  // An exchange's results stay derived from the batch when a small
  // capacity keeps its received rows (ceil(C n) of 1 row): its return
  // brings back the local rows all the same.
  return divideDerivedShapes(
      body.begin(), body.end(), oldTypes,
      {"for the local batch", rule, localFills,
       [](Operation *op) { return isa<MoeExchangeOp>(op); }});
}

/// Op positions in a block, computed once (Operation::isBeforeInBlock would
/// renumber after every insertion).
inline llvm::DenseMap<Operation *, int64_t> numberOps(Block &body) {
  llvm::DenseMap<Operation *, int64_t> index;
  int64_t i = 0;
  for (Operation &op : body)
    index[&op] = i++;
  return index;
}

} // namespace mlir::zero::schedule

#endif // ZERO_LIB_DIALECT_ZERO_TRANSFORMS_SCHEDULEUTILS_H
