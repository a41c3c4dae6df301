//===- TiledMlp.cpp - Each SwiGLU MLP fused, in tiles of rows -------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/Transforms/Passes.h"

#include "zero/Dialect/NN/IR/NNDialect.h"
#include "zero/Dialect/Zero/IR/ZeroDialect.h"

#include "mlir/IR/Verifier.h"

namespace mlir::zero {
#define GEN_PASS_DEF_ZEROTILEDMLPPASS
#include "zero/Dialect/Zero/Transforms/Passes.h.inc"
} // namespace mlir::zero

using namespace mlir;
using namespace mlir::zero;

namespace {

/// `v` as a bias-free projection `nn.matmul %x, %w transpose_rhs` with a
/// [out, in] weight, or null.
nn::MatmulOp getProjection(Value v) {
  auto mm = v.getDefiningOp<nn::MatmulOp>();
  if (!mm || mm.getTransposeLhs() || !mm.getTransposeRhs() || mm.getColumns() ||
      mm.getContract() ||
      cast<RankedTensorType>(mm.getRhs().getType()).getRank() != 2)
    return {};
  return mm;
}

/// Replaces the MLP around `act` by one nn.tiled_mlp, or reports at the op
/// why it cannot.
LogicalResult tileMlp(nn::SwigluOp act, int64_t tiles) {
  auto gate = getProjection(act.getGate());
  auto up = getProjection(act.getUp());
  if (!gate || !up)
    return act.emitOpError("reads a gate or up that is not a bias-free "
                           "projection (nn.matmul with transpose_rhs); "
                           "tiled-mlp tiles Llama's MLP only");
  if (gate.getLhs() != up.getLhs())
    return act.emitOpError("reads gate and up projections of different "
                           "inputs; tiled-mlp tiles Llama's MLP only");
  if (!act.getGate().hasOneUse() || !act.getUp().hasOneUse())
    return act.emitOpError("reads a gate or up used beside the MLP; "
                           "tiled-mlp would need it whole");
  if (!act.getResult().hasOneUse())
    return act.emitOpError("computes an activation used beside the down "
                           "projection; tiled-mlp would need it whole");
  Operation *user = *act.getResult().getUsers().begin();
  nn::MatmulOp down = user->getNumResults() == 1
                          ? getProjection(user->getResult(0))
                          : nn::MatmulOp();
  if (!down || down.getLhs() != act.getResult())
    return act.emitOpError("is not read by a bias-free down projection "
                           "(nn.matmul with transpose_rhs); tiled-mlp tiles "
                           "Llama's MLP only");
  if (down.getResult().getType() != gate.getLhs().getType())
    return down.emitOpError("projects back to a shape other than the MLP's "
                            "input; tiled-mlp tiles Llama's MLP only");
  for (Value v : SmallVector<Value, 4>{gate.getLhs(), gate.getRhs(),
                                       up.getRhs(), down.getRhs()})
    if (!cast<RankedTensorType>(v.getType()).getElementType().isF32())
      return act.emitOpError("is not f32; tiled-mlp computes in f32 only");

  OpBuilder b(down);
  auto fused = nn::TiledMlpOp::create(
      b, down.getLoc(), down.getResult().getType(), gate.getLhs(),
      gate.getRhs(), up.getRhs(), down.getRhs(), b.getI64IntegerAttr(tiles));
  // Other shapes than the verifier's are reported at the fused op.
  if (failed(mlir::verify(fused)))
    return failure();
  down.getResult().replaceAllUsesWith(fused.getResult());
  down.erase();
  act.erase();
  gate.erase();
  up.erase();
  return success();
}

struct ZeroTiledMlpPass
    : public mlir::zero::impl::ZeroTiledMlpPassBase<ZeroTiledMlpPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (tiles < 1) {
      mlir::emitError(module.getLoc(),
                      "zero-tiled-mlp: tiled-mlp must be at least 1, got ")
          << tiles.getValue();
      return signalPassFailure();
    }
    for (TrainStepOp step : module.getOps<TrainStepOp>()) {
      // The backward is derived from the fused forward.
      if (!step.getBody().front().getOps<GradOp>().empty()) {
        step.emitOpError("zero-tiled-mlp runs on the forward, before "
                         "zero-autodiff; this step already has its backward");
        return signalPassFailure();
      }
      SmallVector<nn::SwigluOp> mlps;
      step.walk([&](nn::SwigluOp op) { mlps.push_back(op); });
      if (mlps.empty()) {
        step.emitOpError("has no SwiGLU MLP (gate and up projections, "
                         "nn.swiglu, down projection) for tiled-mlp to tile; "
                         "GPT-2's MLP (fc with bias, GELU, proj with bias) "
                         "is not tiled");
        return signalPassFailure();
      }
      for (nn::SwigluOp act : mlps)
        if (failed(tileMlp(act, tiles)))
          return signalPassFailure();
    }
  }
};

} // namespace
