//===- MixedPrecision.cpp - fp32 masters, 16-bit compute, loss scaling ----===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/Transforms/Passes.h"

namespace mlir::zero {
#define GEN_PASS_DEF_ZEROMIXEDPRECISIONPASS
#include "zero/Dialect/Zero/Transforms/Passes.h.inc"
} // namespace mlir::zero

using namespace mlir;
using namespace mlir::zero;

namespace {

/// The 16-bit version of a non-scalar f32 tensor type; null if unchanged.
RankedTensorType lower(Type type, Type compute) {
  auto t = dyn_cast<RankedTensorType>(type);
  if (!t || t.getRank() == 0 || !t.getElementType().isF32())
    return {};
  return RankedTensorType::get(t.getShape(), compute);
}

struct ZeroMixedPrecisionPass
    : public mlir::zero::impl::ZeroMixedPrecisionPassBase<
          ZeroMixedPrecisionPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<PrecisionKind> forced;
    if (dtype != "auto") {
      forced = symbolizePrecisionKind(dtype);
      if (!forced) {
        module.emitError("zero-mixed-precision: unknown dtype '")
            << dtype << "' (expected auto, fp32, bf16 or fp16)";
        return signalPassFailure();
      }
    }
    // The parameters, hence their compute type, are shared by every train
    // step of the module: the steps must agree on the precision.
    TrainStepOp first;
    for (TrainStepOp step : module.getOps<TrainStepOp>()) {
      if (!first) {
        first = step;
        continue;
      }
      PrecisionKind a = first.getPrecision().getKind();
      PrecisionKind b = step.getPrecision().getKind();
      if (!forced && a != b) {
        InFlightDiagnostic d =
            step.emitOpError("precision ")
            << stringifyPrecisionKind(b) << " differs from the precision "
            << stringifyPrecisionKind(a) << " of train step @"
            << first.getSymName()
            << " (the parameters and their compute type are shared by every "
               "train step)";
        d.attachNote(first.getLoc()) << "train step @" << first.getSymName();
        return signalPassFailure();
      }
    }
    // A module whose parameters already carry compute types was written (or
    // converted) in mixed precision, possibly keeping some modules in fp32
    // as Hugging Face's _keep_in_fp32_modules does: its types stay as they
    // are, and a parameter without a compute type computes in fp32.
    bool typed = llvm::any_of(module.getOps<ParamOp>(), [](ParamOp p) {
      return p.getComputeAttr() != nullptr;
    });
    bool changed = false;
    for (TrainStepOp step : module.getOps<TrainStepOp>())
      if (failed(convert(module, step, forced, typed, changed)))
        return signalPassFailure();
    // An fp32 step is left as it was: the IR needs no verification.
    if (!changed)
      markAllAnalysesPreserved();
  }

  /// Sets `changed` when it rewrites anything.
  LogicalResult convert(ModuleOp module, TrainStepOp step,
                        std::optional<PrecisionKind> forced, bool typed,
                        bool &changed) {
    MLIRContext *ctx = module.getContext();
    PrecisionAttr prec = step.getPrecision();
    if (forced && *forced != prec.getKind()) {
      prec = PrecisionAttr::get(ctx, *forced, prec.getInitialScalePower(),
                                prec.getLossScaleWindow(), prec.getHysteresis(),
                                prec.getMinLossScale(), prec.getLossScale());
      step.setPrecisionAttr(prec);
      changed = true;
    }
    if (prec.getKind() == PrecisionKind::fp32)
      return success();
    changed = true;
    Type compute = prec.getKind() == PrecisionKind::bf16
                       ? Type(BFloat16Type::get(ctx))
                       : Type(Float16Type::get(ctx));

    // Masters stay fp32; forward and backward see the compute copy.
    for (ParamOp param : module.getOps<ParamOp>()) {
      if (!param.getTensorType().getElementType().isF32())
        return param.emitOpError("master parameters must be f32 for ")
               << stringifyPrecisionKind(prec.getKind())
               << " mixed precision, got " << param.getTensorType();
      if (auto c = param.getComputeAttr();
          c && c.getValue() != compute && !c.getValue().isF32())
        return param.emitOpError("already has compute type ")
               << c.getValue() << ", cannot convert to " << compute;
      if (!typed)
        param.setComputeAttr(TypeAttr::get(compute));
    }
    Block &body = step.getBodyBlock();
    if (typed)
      return scaleLossSeed(body, prec);

    OpBuilder b = OpBuilder::atBlockBegin(&body);
    // Float inputs (features) are cast once at the top of the step.
    for (BlockArgument arg : body.getArguments()) {
      RankedTensorType t = lower(arg.getType(), compute);
      if (!t || arg.use_empty())
        continue;
      auto cast = nn::CastOp::create(b, step.getLoc(), t, arg);
      arg.replaceAllUsesExcept(cast, cast);
    }
    // Every non-scalar f32 value of the step becomes 16-bit; the scalar loss
    // and the loss seed stay fp32 (kernels accumulate in fp32 anyway).
    // That includes the results of the model's own casts to f32: kept in
    // f32, they met 16-bit values in the ops that use them and in the
    // backward (e.g. softmax_cross_entropy_grad of f32 logits with a 16-bit
    // result), which no longer verified.
    for (Operation &op : body.without_terminator()) {
      for (OpResult r : op.getResults())
        if (RankedTensorType t = lower(r.getType(), compute))
          r.setType(t);
    }
    return scaleLossSeed(body, prec);
  }

  /// At fp16, the backward's seed d loss / d loss = 1 becomes the dynamic
  /// loss scale.
  static LogicalResult scaleLossSeed(Block &body, PrecisionAttr prec) {
    if (prec.getKind() != PrecisionKind::fp16)
      return success();
    for (Operation &op : llvm::make_early_inc_range(body)) {
      if (!isLossSeed(&op))
        continue;
      OpBuilder sb(&op);
      auto scale =
          LossScaleOp::create(sb, op.getLoc(), op.getResult(0).getType());
      op.getResult(0).replaceAllUsesWith(scale);
      op.erase();
    }
    return success();
  }
};

} // namespace
