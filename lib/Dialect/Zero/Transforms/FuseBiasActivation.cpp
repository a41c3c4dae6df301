//===- FuseBiasActivation.cpp - Bias adds folded into their users ---------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/Transforms/Passes.h"

#include "zero/Dialect/NN/IR/NNDialect.h"
#include "zero/Dialect/Zero/IR/ZeroDialect.h"
#include "zero/Interfaces/BiasFusionOpInterface.h"

namespace mlir::zero {
#define GEN_PASS_DEF_ZEROFUSEBIASACTIVATIONPASS
#include "zero/Dialect/Zero/Transforms/Passes.h.inc"
} // namespace mlir::zero

using namespace mlir;
using namespace mlir::zero;

namespace {

/// Whether every use of `add`'s sum can take it as (lhs, rhs) instead.
bool allUsesAbsorb(nn::AddOp add) {
  Value sum = add.getResult();
  if (sum.use_empty())
    return false;
  for (OpOperand &use : sum.getUses()) {
    auto fusable = dyn_cast<BiasFusionOpInterface>(use.getOwner());
    if (!fusable || !fusable.canAbsorbBias(use))
      return false;
  }
  return true;
}

/// Rewrites every user of `add` to add the bias itself and erases the add.
void fold(nn::AddOp add) {
  Value sum = add.getResult();
  OpBuilder b(add.getContext());
  // Each use is rewritten once; the users' list changes as they go.
  SmallVector<OpOperand *> uses;
  for (OpOperand &use : sum.getUses())
    uses.push_back(&use);
  for (OpOperand *use : uses) {
    Operation *user = use->getOwner();
    b.setInsertionPoint(user);
    ValueRange fused = cast<BiasFusionOpInterface>(user).buildWithBias(
        b, *use, add.getLhs(), add.getRhs());
    user->replaceAllUsesWith(fused);
    user->erase();
  }
  add.erase();
}

struct ZeroFuseBiasActivationPass
    : public zero::impl::ZeroFuseBiasActivationPassBase<
          ZeroFuseBiasActivationPass> {
  using Base::Base;

  void runOnOperation() override {
    bool failedStep = false;
    getOperation().walk([&](TrainStepOp step) {
      if (step.getScheduleAttr()) {
        step.emitOpError("is already scheduled: zero-fuse-bias-activation "
                         "runs before zero-partition (the memory plan counts "
                         "the sums it removes)");
        failedStep = true;
        return;
      }
      SmallVector<nn::AddOp> adds;
      step.walk([&](nn::AddOp add) {
        if (allUsesAbsorb(add))
          adds.push_back(add);
      });
      for (nn::AddOp add : adds)
        fold(add);
    });
    if (failedStep)
      signalPassFailure();
  }
};

} // namespace
