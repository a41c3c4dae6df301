//===- LossChunk.cpp - The output projection and loss fused, in chunks ----===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/Transforms/LossChunk.h"
#include "zero/Dialect/Zero/Transforms/Passes.h"

#include "zero/Dialect/NN/IR/NNDialect.h"
#include "zero/Dialect/Zero/IR/ZeroDialect.h"

#include "llvm/Support/MathExtras.h"

namespace mlir::zero {
#define GEN_PASS_DEF_ZEROLOSSCHUNKPASS
#include "zero/Dialect/Zero/Transforms/Passes.h.inc"
} // namespace mlir::zero

using namespace mlir;
using namespace mlir::zero;

namespace {

/// The loss of `step` and the head matmul feeding it, or failure after
/// reporting at the op why zero-loss-chunk cannot fuse them.
FailureOr<std::pair<nn::SoftmaxCrossEntropyOp, nn::MatmulOp>>
matchLoss(TrainStepOp step) {
  auto loss = step.getLoss().getDefiningOp<nn::SoftmaxCrossEntropyOp>();
  if (!loss)
    return step.emitOpError("zero-loss-chunk (loss-chunk) needs the step's "
                            "loss to be an nn.softmax_cross_entropy");
  if (loss.getClasses())
    return loss.emitOpError("has padded classes (zero-pad-vocab); "
                            "loss-chunk does not chunk a padded vocabulary");
  Value logits = loss.getLogits();
  Operation *def = logits.getDefiningOp();
  if (auto add = dyn_cast_or_null<nn::AddOp>(def))
    if (add.getLhs().getDefiningOp<nn::MatmulOp>())
      return add.emitOpError("adds a bias to the output projection; "
                             "loss-chunk fuses a bias-free head only");
  auto head = dyn_cast_or_null<nn::MatmulOp>(def);
  if (!head)
    return loss.emitOpError("reads logits that are not an nn.matmul; "
                            "loss-chunk fuses the output projection "
                            "into the loss");
  if (!logits.hasOneUse())
    return head.emitOpError("computes logits that are used beside the loss; "
                            "loss-chunk would need them whole");
  auto w = cast<RankedTensorType>(head.getRhs().getType());
  if (head.getTransposeLhs() || !head.getTransposeRhs() || w.getRank() != 2 ||
      head.getColumns() || head.getContract())
    return head.emitOpError("is not a [vocab, hidden] head applied with "
                            "transpose_rhs; loss-chunk fuses only that form");
  auto x = cast<RankedTensorType>(head.getLhs().getType());
  if (x.getElementType() != w.getElementType())
    return head.emitOpError("multiplies ")
           << x.getElementType() << " hidden states by a " << w.getElementType()
           << " head; loss-chunk fuses a head of the hidden states' type";
  return std::make_pair(loss, head);
}

/// Replaces the loss of `step` and the head matmul feeding it by one
/// nn.linear_cross_entropy, or reports at the op why it cannot.
LogicalResult fuseLoss(TrainStepOp step, int64_t chunk) {
  auto matched = matchLoss(step);
  if (failed(matched))
    return failure();
  auto [loss, head] = *matched;
  OpBuilder b(loss);
  auto fused = nn::LinearCrossEntropyOp::create(
      b, loss.getLoc(), head.getLhs(), head.getRhs(), loss.getLabels(),
      b.getI64IntegerAttr(chunk), loss.getIgnoreIndexAttr());
  loss.getResult().replaceAllUsesWith(fused.getResult());
  loss.erase();
  head.erase();
  return success();
}

struct ZeroLossChunkPass
    : public mlir::zero::impl::ZeroLossChunkPassBase<ZeroLossChunkPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (chunk < 1) {
      mlir::emitError(module.getLoc(),
                      "zero-loss-chunk: loss-chunk must be at least 1, got ")
          << chunk.getValue();
      return signalPassFailure();
    }
    for (TrainStepOp step : module.getOps<TrainStepOp>()) {
      // The backward is derived from the fused forward.
      if (!step.getBody().front().getOps<GradOp>().empty()) {
        step.emitOpError("zero-loss-chunk runs on the forward, before "
                         "zero-autodiff; this step already has its backward");
        return signalPassFailure();
      }
      if (failed(fuseLoss(step, chunk)))
        return signalPassFailure();
    }
  }
};

} // namespace

FailureOr<LossHead> mlir::zero::matchLossHead(TrainStepOp step) {
  auto matched = matchLoss(step);
  if (failed(matched))
    return failure();
  auto w = cast<RankedTensorType>(matched->second.getRhs().getType());
  auto labels = matched->first.getLabels().getType();
  return LossHead{w.getDimSize(0), w.getDimSize(1), labels.getNumElements()};
}

int64_t mlir::zero::getDefaultLossChunk(int64_t rows, const LossHead &head) {
  int64_t ratio =
      llvm::divideCeil(head.vocab, std::max<int64_t>(head.hidden, 1));
  int64_t liger = static_cast<int64_t>(
      llvm::PowerOf2Ceil(llvm::divideCeil(rows, std::max<int64_t>(ratio, 1))));
  return std::max<int64_t>(liger, 128);
}
