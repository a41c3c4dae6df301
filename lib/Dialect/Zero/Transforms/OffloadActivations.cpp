//===- OffloadActivations.cpp - Saved activations to pinned host memory ---===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/Transforms/Passes.h"

#include "zero/Dialect/NN/IR/NNDialect.h"
#include "zero/Dialect/Zero/Analysis/CostModel.h"
#include "zero/Dialect/Zero/Analysis/MemoryPlan.h"
#include "zero/Dialect/Zero/Analysis/Schedule.h"
#include "zero/Dialect/Zero/IR/ZeroDialect.h"
#include "zero/Interfaces/RuntimeKernelOpInterface.h"

namespace mlir::zero {
#define GEN_PASS_DEF_ZEROOFFLOADACTIVATIONSPASS
#include "zero/Dialect/Zero/Transforms/Passes.h.inc"
} // namespace mlir::zero

using namespace mlir;
using namespace mlir::zero;

namespace {

/// A saved activation: where its forward uses end and its backward ones
/// begin (op indices of the step's body).
struct Saved {
  Value value;
  int64_t lastForward;
  int64_t firstBackward;
};

/// The saved activations of `body`, whose backward starts at op index
/// `backwardStart`, in forward order.
SmallVector<Saved> collectSaved(Block &body, ArrayRef<Operation *> ops,
                                const DenseMap<Operation *, int64_t> &index,
                                int64_t backwardStart) {
  SmallVector<Saved> saved;
  for (int64_t i = 0; i < backwardStart; ++i) {
    Operation *def = ops[i];
    if (!nn::isNNOp(def) || isViewOp(def))
      continue;
    for (Value r : def->getResults()) {
      if (!isa<RankedTensorType>(r.getType()))
        continue;
      Saved s{r, i, INT64_MAX};
      bool movable = true;
      for (Operation *user : r.getUsers()) {
        Operation *top = body.findAncestorOpInBlock(*user);
        // Views alias the buffer and the other zero ops (the loss's
        // zero.return, frees) are not kernels that could read a reload.
        if (!top || isViewOp(top) || isa<FreeOp>(top)) {
          movable = false;
          break;
        }
        int64_t at = index.lookup(top);
        if (at < backwardStart) {
          s.lastForward = std::max(s.lastForward, at);
          continue;
        }
        if (!isa<RuntimeKernelOpInterface>(top) ||
            isa<ZeroDialect>(top->getDialect())) {
          movable = false;
          break;
        }
        s.firstBackward = std::min(s.firstBackward, at);
      }
      // A backward use within two ops of the last forward one leaves
      // nothing for the copies to overlap or the arena to reuse.
      if (movable && s.firstBackward != INT64_MAX &&
          s.firstBackward - s.lastForward > 2)
        saved.push_back(s);
    }
  }
  return saved;
}

/// The ops one offload inserted, to undo it.
struct Offload {
  Value value;
  SmallVector<Operation *, 4> ops;
  Value reloaded;
};

/// Offloads `s`, whose indices are in `ops`, the step's original ops.
Offload offload(const Saved &s, Block &body, ArrayRef<Operation *> ops,
                const DenseMap<Operation *, int64_t> &index,
                int64_t backwardStart) {
  OpBuilder b(s.value.getContext());
  auto tokenType = TokenType::get(s.value.getContext());
  Location loc = s.value.getLoc();
  // Out after the last forward use, waited after the next kernel, which
  // the copy overlaps (the device buffer is released at the wait); back
  // before the last kernel ahead of the first backward use, after the copy
  // out completed (collectSaved leaves room), waited right before the use.
  auto isKernel = [&](int64_t i) {
    return isa<RuntimeKernelOpInterface>(ops[i]);
  };
  int64_t outWait = s.lastForward + 1;
  while (outWait + 1 < s.firstBackward - 1 && !isKernel(outWait))
    ++outWait;
  int64_t issue = s.firstBackward - 1;
  while (issue - 1 > outWait && !isKernel(issue))
    --issue;
  b.setInsertionPointAfter(ops[s.lastForward]);
  auto out = OffloadActivationOp::create(b, loc, s.value.getType(), tokenType,
                                         s.value);
  b.setInsertionPointAfter(ops[outWait]);
  auto waitOut = WaitOp::create(b, loc, out.getToken());
  b.setInsertionPoint(ops[issue]);
  auto back = ReloadActivationOp::create(b, loc, s.value.getType(), tokenType,
                                         out.getHost());
  b.setInsertionPoint(ops[s.firstBackward]);
  auto waitBack = WaitOp::create(b, loc, back.getToken());
  Value value = s.value;
  value.replaceUsesWithIf(back.getResult(), [&](OpOperand &use) {
    Operation *top = body.findAncestorOpInBlock(*use.getOwner());
    return top && index.lookup(top) >= backwardStart;
  });
  return {s.value, {waitBack, back, waitOut, out}, back.getResult()};
}

void undo(Offload &o) {
  o.reloaded.replaceAllUsesWith(o.value);
  for (Operation *op : o.ops)
    op->erase();
}

/// The device peak of `step`'s plan as it is scheduled now.
FailureOr<int64_t> planPeak(TrainStepOp step) {
  FailureOr<MemoryPlan> plan = computeMemoryPlan(step);
  if (failed(plan))
    return failure();
  return plan->peakBytes;
}

/// Offloads the saved activations of `step`: all of them, or with a
/// budget the fewest first ones whose offload brings the device peak
/// within it (all when none does).
LogicalResult offloadStep(TrainStepOp step, std::optional<int64_t> budget) {
  Block &body = step.getBodyBlock();
  Operation *lossDef = step.getLoss().getDefiningOp();
  if (!lossDef || lossDef->getBlock() != &body)
    return success();
  SmallVector<Operation *> ops;
  DenseMap<Operation *, int64_t> index;
  for (Operation &op : body) {
    index[&op] = ops.size();
    ops.push_back(&op);
  }
  int64_t backwardStart = index[lossDef] + 1;
  SmallVector<Saved> saved = collectSaved(body, ops, index, backwardStart);
  SmallVector<Offload> done;
  // Offloads the first k, undoing any beyond.
  auto offloadFirst = [&](size_t k) {
    while (done.size() > k) {
      undo(done.back());
      done.pop_back();
    }
    while (done.size() < k)
      done.push_back(
          offload(saved[done.size()], body, ops, index, backwardStart));
  };
  if (!budget) {
    offloadFirst(saved.size());
    return success();
  }
  // The peak falls, by and large, with each activation offloaded: the
  // fewest that fit by bisection, checked at the end.
  FailureOr<int64_t> peak = planPeak(step);
  if (failed(peak))
    return failure();
  if (*peak <= *budget)
    return success();
  size_t lo = 0, hi = saved.size();
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    offloadFirst(mid);
    if (failed(peak = planPeak(step)))
      return failure();
    (*peak <= *budget ? hi : lo) = mid;
  }
  offloadFirst(hi);
  return success();
}

struct ZeroOffloadActivationsPass
    : public mlir::zero::impl::ZeroOffloadActivationsPassBase<
          ZeroOffloadActivationsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (device == "none")
      return;
    if (device != "cpu" && device != "auto") {
      module.emitError("zero-offload-activations: device must be none, cpu "
                       "or auto, got '")
          << device << "'";
      return signalPassFailure();
    }
    std::optional<int64_t> bytes;
    if (device == "auto") {
      std::string why;
      if (budget.empty()) {
        module.emitError("zero-offload-activations: device=auto offloads "
                         "what a memory budget needs: give budget "
                         "(zero-pipeline: memory-budget)");
        return signalPassFailure();
      }
      if (!(bytes = parseMemoryBudget(budget, why))) {
        module.emitError("zero-offload-activations: bad budget '")
            << budget << "': " << why;
        return signalPassFailure();
      }
    }
    for (TrainStepOp step : module.getOps<TrainStepOp>())
      if (failed(offloadStep(step, bytes)))
        return signalPassFailure();
  }
};

} // namespace
