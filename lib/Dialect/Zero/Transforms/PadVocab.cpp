//===- PadVocab.cpp - Vocabulary tables padded to a multiple of rows ------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/Transforms/Passes.h"

#include "zero/Interfaces/PaddingOpInterface.h"

namespace mlir::zero {
#define GEN_PASS_DEF_ZEROPADVOCABPASS
#include "zero/Dialect/Zero/Transforms/Passes.h.inc"
} // namespace mlir::zero

using namespace mlir;
using namespace mlir::zero;

namespace {

/// One use that takes the padding: the operand, its padded dimension and
/// that dimension's size before padding.
struct PaddedUse {
  OpOperand *operand;
  int64_t dim, size;
};

/// The uses a parameter's row padding reaches, in the order they are
/// reached (so each operand's producer comes first), or std::nullopt when
/// some op cannot take it or none masks it out.
std::optional<SmallVector<PaddedUse>> followPadding(ArrayRef<GetParamOp> gets) {
  SmallVector<std::pair<Value, int64_t>> worklist;
  for (GetParamOp get : gets)
    worklist.push_back({get.getResult(), 0});
  SmallVector<PaddedUse> uses;
  bool masked = false;
  for (size_t i = 0; i < worklist.size(); ++i) {
    auto [value, dim] = worklist[i];
    int64_t size = cast<RankedTensorType>(value.getType()).getDimSize(dim);
    for (OpOperand &use : value.getUses()) {
      auto op = dyn_cast<PaddingOpInterface>(use.getOwner());
      if (!op)
        return std::nullopt;
      FailureOr<PaddingEffect> effect = op.getPaddingEffect(use, dim);
      if (failed(effect))
        return std::nullopt;
      masked |= effect->masks;
      for (auto [result, resultDim] : effect->paddedResults)
        worklist.push_back({use.getOwner()->getResult(result), resultDim});
      uses.push_back({&use, dim, size});
    }
  }
  if (!masked)
    return std::nullopt;
  return uses;
}

struct ZeroPadVocabPass
    : public mlir::zero::impl::ZeroPadVocabPassBase<ZeroPadVocabPass> {
  using Base::Base;

  /// Whether the module's train steps will compute in bf16 or fp16: the
  /// `dtype` given, else the steps' own precision (zero-mixed-precision
  /// refuses steps that disagree).
  FailureOr<bool> computesIn16Bit(ModuleOp module) {
    auto is16Bit = [](PrecisionKind k) { return k != PrecisionKind::fp32; };
    if (dtype != "auto") {
      std::optional<PrecisionKind> kind = symbolizePrecisionKind(dtype);
      if (!kind)
        return mlir::emitError(module.getLoc(),
                               "zero-pad-vocab: unknown dtype '")
               << dtype << "' (expected auto, fp32, bf16 or fp16)";
      return is16Bit(*kind);
    }
    auto steps = module.getOps<TrainStepOp>();
    return !steps.empty() && is16Bit((*steps.begin()).getPrecision().getKind());
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (multiple <= 0) {
      mlir::emitError(module.getLoc(),
                      "zero-pad-vocab: multiple must be positive, got ")
          << multiple.getValue();
      return signalPassFailure();
    }
    // The backward is derived from the padded forward; padding after it
    // would leave the gradients' shapes behind.
    for (TrainStepOp step : module.getOps<TrainStepOp>()) {
      if (step.getBody().front().getOps<GradOp>().empty())
        continue;
      step.emitOpError("zero-pad-vocab runs on the forward, before "
                       "zero-autodiff; this step already has its backward");
      return signalPassFailure();
    }
    if (only16Bit) {
      FailureOr<bool> sixteen = computesIn16Bit(module);
      if (failed(sixteen))
        return signalPassFailure();
      if (!*sixteen) {
        markAllAnalysesPreserved();
        return;
      }
    }
    // Each parameter's reads, collected in one walk of the steps.
    llvm::DenseMap<StringAttr, SmallVector<GetParamOp>> readsOf;
    for (TrainStepOp step : module.getOps<TrainStepOp>())
      step.walk([&](GetParamOp get) {
        readsOf[get.getParamAttr().getAttr()].push_back(get);
      });
    for (ParamOp param : module.getOps<ParamOp>()) {
      RankedTensorType type = param.getTensorType();
      if (type.getRank() != 2 || param.getRows())
        continue;
      int64_t rows = type.getDimSize(0);
      int64_t padded = (rows + multiple - 1) / multiple * multiple;
      if (padded == rows)
        continue;
      ArrayRef<GetParamOp> gets = readsOf.lookup(param.getSymNameAttr());
      std::optional<SmallVector<PaddedUse>> uses = followPadding(gets);
      if (!uses)
        continue;
      SmallVector<int64_t> shape(type.getShape());
      shape[0] = padded;
      param.setType(type.clone(shape));
      param.setRows(rows);
      for (GetParamOp get : gets)
        get.getResult().setType(
            cast<RankedTensorType>(get.getType()).clone(shape));
      for (const PaddedUse &use : *uses)
        cast<PaddingOpInterface>(use.operand->getOwner())
            .padOperand(*use.operand, use.dim, use.size);
    }
  }
};

} // namespace
