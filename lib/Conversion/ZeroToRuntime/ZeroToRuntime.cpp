//===- ZeroToRuntime.cpp - Lower a scheduled step to runtime calls --------===//
//
// Part of the zero-mlir project.
//
// The scheduled step is straight-line code over buffers whose offsets the
// memory plan fixes, so it lowers directly to LLVM-dialect calls of the
// runtime: every value becomes a pointer computed from the plan, every op a
// call. The model's structure (layout, initializers, optimizer, plan) goes
// into a JSON manifest that the runtime's driver reads. This file holds the
// pass; the lowering itself is the `Lowering` class of Lowering.h.
//
//===----------------------------------------------------------------------===//

#include "zero/Conversion/ZeroToRuntime.h"
#include "zero/Conversion/Passes.h"

#include "Lowering.h"

namespace mlir::zero {
#define GEN_PASS_DEF_CONVERTZEROTORUNTIMEPASS
#include "zero/Conversion/Passes.h.inc"
} // namespace mlir::zero

using namespace mlir;
using namespace mlir::zero;

namespace {
struct ConvertZeroToRuntimePass
    : public mlir::zero::impl::ConvertZeroToRuntimePassBase<
          ConvertZeroToRuntimePass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (maxFunctionOps < 0) {
      module.emitError("convert-zero-to-runtime: max-function-ops must be "
                       ">= 0, got ")
          << maxFunctionOps.getValue();
      return signalPassFailure();
    }
    auto steps = llvm::to_vector(module.getOps<TrainStepOp>());
    if (steps.size() != 1) {
      module.emitError("convert-zero-to-runtime: expected exactly one "
                       "zero.train_step, found ")
          << steps.size();
      return signalPassFailure();
    }
    FailureOr<StepSchedule> schedule = StepSchedule::get(steps.front());
    if (failed(schedule))
      return signalPassFailure();
    FailureOr<MemoryPlan> plan = computeMemoryPlan(*schedule);
    if (failed(plan))
      return signalPassFailure();
    if (failed(
            lowering::Lowering(module, *schedule, *plan, maxFunctionOps).run()))
      return signalPassFailure();
    // The model and its step now live in the program and its manifest.
    for (Operation &op : llvm::make_early_inc_range(*module.getBody()))
      if (isa<TrainStepOp>(op))
        op.erase();
    for (Operation &op : llvm::make_early_inc_range(*module.getBody()))
      if (isa<ParamOp, PartitionOp>(op))
        op.erase();
  }
};
} // namespace
