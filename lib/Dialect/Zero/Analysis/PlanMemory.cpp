//===- PlanMemory.cpp - Record the static arena plan in the IR ------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/Analysis/MemoryPlan.h"
#include "zero/Dialect/Zero/Analysis/Passes.h"

namespace mlir::zero {
#define GEN_PASS_DEF_ZEROPLANMEMORYPASS
#include "zero/Dialect/Zero/Analysis/Passes.h.inc"
} // namespace mlir::zero

using namespace mlir;
using namespace mlir::zero;

namespace {
struct ZeroPlanMemoryPass
    : public mlir::zero::impl::ZeroPlanMemoryPassBase<ZeroPlanMemoryPass> {
  using Base::Base;
  void runOnOperation() override {
    for (TrainStepOp step : getOperation().getOps<TrainStepOp>()) {
      FailureOr<MemoryPlan> plan = computeMemoryPlan(step);
      if (failed(plan))
        return signalPassFailure();
      recordMemoryPlan(*plan, step);
    }
  }
};
} // namespace
