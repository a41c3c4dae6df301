//===- SequenceParallel.cpp - Ulysses sequence parallelism ----------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/Transforms/Passes.h"

#include "zero/Dialect/NN/IR/NNDialect.h"
#include "zero/Dialect/Zero/IR/ZeroDialect.h"
#include "zero/Interfaces/DerivativeInterface.h"
#include "zero/Interfaces/IndexOperandOpInterface.h"

#include "DivideShapes.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/DenseMap.h"

namespace mlir::zero {
#define GEN_PASS_DEF_ZEROSEQUENCEPARALLELPASS
#include "zero/Dialect/Zero/Transforms/Passes.h.inc"
} // namespace mlir::zero

using namespace mlir;
using namespace mlir::zero;

namespace {

/// The derivative of an all-to-all is the inverse exchange: the result's
/// gradient goes back split along the concat dimension and concatenated
/// along the split dimension, over the same ranks.
struct AllToAllDerivative
    : public DerivativeOpInterface::ExternalModel<AllToAllDerivative,
                                                  AllToAllOp> {
  LogicalResult buildDerivative(Operation *op, OpBuilder &b,
                                ArrayRef<Value> grads,
                                SmallVectorImpl<Value> &out) const {
    auto a2a = cast<AllToAllOp>(op);
    if (!grads[0]) {
      out.push_back(Value());
      return success();
    }
    out.push_back(AllToAllOp::create(b, a2a.getLoc(), a2a.getInput().getType(),
                                     Type(), grads[0], a2a.getConcatDimAttr(),
                                     a2a.getSplitDimAttr(),
                                     a2a.getRankSetAttr())
                      .getResult());
    return success();
  }
};

/// The element counts after and up to dimension `d` of `shape`.
int64_t productFrom(ArrayRef<int64_t> shape, size_t d) {
  int64_t n = 1;
  for (size_t i = d; i < shape.size(); ++i)
    n *= shape[i];
  return n;
}

/// A reshape: a view (no kernel) of its source's elements in another
/// shape, which its result type gives rather than inference.
bool isReshape(Operation *op) {
  return isa<ViewLikeOpInterface>(op) &&
         op->hasTrait<nn::OpTrait::TensorView>();
}

/// A reshape's result type once one dimension of its source shrank by
/// `factor`: the result dimension that holds the same span of elements
/// (the same product after it and up to it) shrinks by it.
FailureOr<RankedTensorType>
reshapeResult(ViewLikeOpInterface op, RankedTensorType oldIn, int64_t factor) {
  ArrayRef<int64_t> in = oldIn.getShape();
  auto newIn = cast<RankedTensorType>(op.getViewSource().getType()).getShape();
  auto out = cast<RankedTensorType>(op->getResult(0).getType());
  size_t d = 0;
  while (d < in.size() && in[d] == newIn[d])
    ++d;
  int64_t inner = productFrom(in, d + 1), through = productFrom(in, d);
  for (size_t e = 0; e < size_t(out.getRank()); ++e) {
    if (productFrom(out.getShape(), e + 1) != inner ||
        productFrom(out.getShape(), e) % through != 0 ||
        out.getDimSize(e) % factor != 0)
      continue;
    SmallVector<int64_t> shape(out.getShape());
    shape[e] /= factor;
    return RankedTensorType::get(shape, out.getElementType());
  }
  return op.emitOpError("cannot split its sequence dimension across ranks: ")
         << oldIn << " -> " << out;
}

/// Packed rows' positions (an input the step reads as positions): every
/// rank of a sequence-parallel group takes them whole, a row's worth of
/// integers, so that its documents and rotations see the whole row once
/// attention does (after the exchange).
bool isWholeRow(BlockArgument arg) {
  return getIndexRole(arg) == IndexRole::position;
}

/// The users of whole-row positions, which must read the whole row: the
/// documents (nn.document_ids, whose ids only attention reads) and a
/// rotation of an attention's query or key, which moves past the exchange.
LogicalResult checkWholeRowUsers(BlockArgument arg, StringRef option) {
  for (OpOperand &use : arg.getUses()) {
    Operation *user = use.getOwner();
    bool ok = false;
    if (auto ids = dyn_cast<nn::DocumentIdsOp>(user))
      ok = llvm::all_of(ids->getUsers(), [&](Operation *u) {
        auto att = dyn_cast<nn::AttentionOp>(u);
        return att && att.getSegments() == ids.getResult();
      });
    else if (auto rope = dyn_cast<nn::RopeOp>(user))
      ok = rope.getPositions() == arg &&
           llvm::all_of(rope->getUses(), [](OpOperand &u) {
             auto att = dyn_cast<nn::AttentionOp>(u.getOwner());
             return att && u.getOperandNumber() < 2;
           });
    if (!ok)
      return user->emitOpError("reads packed rows' positions on a sequence "
                               "shard, which ")
             << option
             << " does not give it (the rows' documents and the rotations "
                "of attention's query and key see the whole row)";
  }
  return success();
}

/// Divides the sequence dimension (dim 1) of every input of `step` by `p`
/// and re-infers the types of the values derived from them, as
/// zero-partition divides the batch: ops with InferTypeOpInterface are
/// re-inferred, a result with an operand's old shape takes its new one
/// (elementwise ops, attention, rope), and a reshape shrinks the dimension
/// that holds the sequence.
LogicalResult divideSequence(TrainStepOp step, int64_t p) {
  Block &body = step.getBodyBlock();
  llvm::DenseMap<Value, RankedTensorType> oldTypes;
  for (BlockArgument arg : body.getArguments()) {
    // Packed rows' positions stay whole on every rank (isWholeRow).
    if (isWholeRow(arg))
      continue;
    auto t = cast<RankedTensorType>(arg.getType());
    SmallVector<int64_t> shape(t.getShape());
    shape[1] /= p;
    oldTypes[arg] = t;
    arg.setType(RankedTensorType::get(shape, t.getElementType()));
  }
  auto rule = [&](Operation *opPtr,
                  SmallVectorImpl<Type> &newTypes) -> LogicalResult {
    Operation &op = *opPtr;
    if (isReshape(&op)) {
      auto reshape = cast<ViewLikeOpInterface>(op);
      auto t = reshapeResult(reshape, oldTypes[reshape.getViewSource()], p);
      if (failed(t))
        return failure();
      newTypes.push_back(*t);
    } else {
      // A result of an operand's rank whose extent along the operand's
      // shrunk dimension was the operand's shrinks with it (elementwise
      // ops, attention, rope, a split along another dimension).
      for (Value r : op.getResults()) {
        Type nt = r.getType();
        auto rt = dyn_cast<RankedTensorType>(nt);
        for (Value o : op.getOperands()) {
          auto it = oldTypes.find(o);
          if (!rt || it == oldTypes.end() ||
              it->second.getRank() != rt.getRank())
            continue;
          ArrayRef<int64_t> was = it->second.getShape();
          ArrayRef<int64_t> now =
              cast<RankedTensorType>(o.getType()).getShape();
          size_t d = 0;
          while (d < was.size() && was[d] == now[d])
            ++d;
          if (d == was.size() || rt.getDimSize(d) != was[d])
            continue;
          SmallVector<int64_t> shape(rt.getShape());
          shape[d] = now[d];
          nt = RankedTensorType::get(shape, rt.getElementType());
          break;
        }
        if (nt == r.getType() && rt && rt.getRank() > 0)
          return op.emitOpError("has no rule for its shape on a sequence "
                                "shard (sequence parallelism)");
        newTypes.push_back(nt);
      }
    }
    return success();
  };
  return divideDerivedShapes(body.begin(), body.end(), oldTypes,
                             {"for the sequence shard", rule});
}

/// `x` exchanged over the sequence-parallel group: [B, H, T / P, D]
/// sequence shards to [B, H / P, T, D] head shards (`toHeads`) or back.
Value exchange(OpBuilder &b, Location loc, Value x, int64_t p, bool toHeads) {
  auto t = cast<RankedTensorType>(x.getType());
  SmallVector<int64_t> shape(t.getShape());
  int64_t split = toHeads ? 1 : 2, concat = toHeads ? 2 : 1;
  shape[split] /= p;
  shape[concat] *= p;
  return AllToAllOp::create(
             b, loc, RankedTensorType::get(shape, t.getElementType()), Type(),
             x, b.getI64IntegerAttr(split), b.getI64IntegerAttr(concat),
             RankSetKindAttr::get(b.getContext(), RankSetKind::sequence))
      .getResult();
}

/// Key/value heads fewer than P repeated so that each of the P ranks gets
/// the head its query heads read (head h / (P / kv) on rank h), as
/// DeepSpeed replicates them.
Value replicateHeads(OpBuilder &b, Location loc, Value x, int64_t p) {
  auto t = cast<RankedTensorType>(x.getType());
  int64_t kv = t.getDimSize(1);
  if (kv >= p)
    return x;
  SmallVector<Value> heads;
  if (kv == 1) {
    heads.push_back(x);
  } else {
    SmallVector<int64_t> shape(t.getShape());
    shape[1] = 1;
    SmallVector<Type> types(kv,
                            RankedTensorType::get(shape, t.getElementType()));
    auto split = nn::SplitOp::create(b, loc, types, x, uint64_t(1));
    heads.append(split.getResults().begin(), split.getResults().end());
  }
  SmallVector<Value> parts;
  for (Value h : heads)
    parts.append(p / kv, h);
  return nn::ConcatOp::create(b, loc, parts, uint64_t(1)).getResult();
}

/// An nn.rope of `x`'s exchanged value in place of `rope`, or the value
/// itself where `x` was not rotated.
Value rotate(OpBuilder &b, nn::RopeOp rope, Value exchanged) {
  if (!rope)
    return exchanged;
  IRMapping map;
  map.map(rope.getInput(), exchanged);
  Operation *clone = b.clone(*rope, map);
  clone->getResult(0).setType(exchanged.getType());
  return clone->getResult(0);
}

/// Runs `att` on head shards of the whole sequence, between two
/// all-to-alls.
LogicalResult parallelizeAttention(nn::AttentionOp att, int64_t p,
                                   StringRef option) {
  if (att.getAlibi())
    return att.emitOpError("adds per-head ALiBi slopes, which sequence "
                           "parallelism (")
           << option << ") would give to other heads on each rank";
  if (att.getSinks())
    return att.emitOpError("has per-head sinks, which sequence parallelism (")
           << option << ") would give to other heads on each rank";
  // Its heads see the whole sequence after the exchange: so must the
  // documents, the ids of the whole rows' positions.
  if (Value segments = att.getSegments()) {
    auto ids = segments.getDefiningOp<nn::DocumentIdsOp>();
    auto pos = ids ? dyn_cast<BlockArgument>(ids.getPositions()) : nullptr;
    if (!pos || !isWholeRow(pos))
      return att.emitOpError("reads packed documents' segments that are not "
                             "the document ids of the step's positions, "
                             "which sequence parallelism (")
             << option << ") would cut at each rank's shard";
  }
  auto q = cast<RankedTensorType>(att.getQuery().getType());
  auto k = cast<RankedTensorType>(att.getKey().getType());
  int64_t heads = q.getDimSize(1), kv = k.getDimSize(1);
  if (heads % p != 0)
    return att.emitOpError("has ")
           << heads << " heads, not divisible by " << option << " " << p;
  if (kv % p != 0 && p % kv != 0)
    return att.emitOpError("has ")
           << kv << " key/value heads, which neither divide " << option << " "
           << p << " nor are divisible by it";
  auto qRope = att.getQuery().getDefiningOp<nn::RopeOp>();
  auto kRope = att.getKey().getDefiningOp<nn::RopeOp>();
  Value qIn = qRope ? qRope.getInput() : att.getQuery();
  Value kIn = kRope ? kRope.getInput() : att.getKey();

  OpBuilder b(att);
  Location loc = att.getLoc();
  // The rotation moves after the exchange: on the whole sequence, positions
  // 0..T-1 (or the whole rows' positions) are the same on every rank.
  Value qh = rotate(b, qRope, exchange(b, loc, qIn, p, /*toHeads=*/true));
  Value kh = rotate(b, kRope,
                    exchange(b, loc, replicateHeads(b, loc, kIn, p), p, true));
  // A value that is the unrotated key itself is exchanged once.
  Value vh = !kRope && att.getValue() == att.getKey()
                 ? kh
                 : exchange(b, loc, replicateHeads(b, loc, att.getValue(), p),
                            p, /*toHeads=*/true);
  // The query, key and value exchanged; the documents (whole rows) kept.
  Operation *full = b.clone(*att);
  Value exchanged[] = {qh, kh, vh};
  for (auto [i, v] : llvm::enumerate(exchanged))
    full->setOperand(unsigned(i), v);
  full->getResult(0).setType(qh.getType());
  if (failed(mlir::verify(full)))
    return failure();
  Value back = exchange(b, loc, full->getResult(0), p, /*toHeads=*/false);
  att.getResult().replaceAllUsesWith(back);
  att.erase();
  for (nn::RopeOp rope : {qRope, kRope})
    if (rope && rope->use_empty())
      rope.erase();
  return success();
}

struct ZeroSequenceParallelPass
    : public zero::impl::ZeroSequenceParallelPassBase<
          ZeroSequenceParallelPass> {
  using ZeroSequenceParallelPassBase::ZeroSequenceParallelPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    int64_t p = spSize.getValue();
    if (p < 1) {
      mlir::emitError(module.getLoc())
          << "zero-sequence-parallel: sp-size must be at least 1, got " << p;
      return signalPassFailure();
    }
    if (p == 1)
      return;
    std::string option = "sp-size";
    for (TrainStepOp step : module.getOps<TrainStepOp>()) {
      Block &body = step.getBodyBlock();
      for (BlockArgument arg : body.getArguments()) {
        auto t = cast<RankedTensorType>(arg.getType());
        if (t.getRank() < 2 || t.getDimSize(1) % p != 0) {
          mlir::emitError(step.getLoc())
              << "train step @" << step.getSymName() << ": input #"
              << arg.getArgNumber() << " " << t
              << " has no sequence dimension (dim 1) divisible by " << option
              << " " << p;
          return signalPassFailure();
        }
      }
      SmallVector<nn::AttentionOp> attentions(body.getOps<nn::AttentionOp>());
      if (attentions.empty()) {
        mlir::emitError(step.getLoc())
            << "train step @" << step.getSymName() << " has no nn.attention; "
            << option << " shards the sequence around attention";
        return signalPassFailure();
      }
      // A MoE block routes the flattened tokens [B * T, H] of the whole
      // sequence; its rows carry no sequence dimension to shard.
      auto moe = body.getOps<nn::MoeDispatchOp>();
      if (!moe.empty()) {
        (*moe.begin())
                .emitOpError("routes the tokens of a MoE block, which "
                             "sequence parallelism (")
            << option << " " << p
            << ") does not split; train a MoE model without " << option
            << " (ep-size splits its experts instead)";
        return signalPassFailure();
      }
      // A loss that shifts its labels inside would shift each shard alone:
      // the driver shifts whole rows instead.
      for (auto shift :
           llvm::make_early_inc_range(body.getOps<nn::ShiftLabelsOp>())) {
        if (step.getLabels() != LabelConvention::same_tokens ||
            !isa<BlockArgument>(shift.getLabels())) {
          shift.emitOpError("shifts labels that are not the step's "
                            "same_tokens input; ")
              << option << " needs the driver to shift whole rows";
          return signalPassFailure();
        }
        shift.getResult().replaceAllUsesWith(shift.getLabels());
        shift.erase();
        step.setLabels(LabelConvention::shifted);
      }
      for (BlockArgument arg : body.getArguments())
        if (isWholeRow(arg) && failed(checkWholeRowUsers(arg, option)))
          return signalPassFailure();
      if (failed(divideSequence(step, p)))
        return signalPassFailure();
      for (nn::AttentionOp att : attentions)
        if (failed(parallelizeAttention(att, p, option)))
          return signalPassFailure();
    }
  }
};

} // namespace

void mlir::zero::registerAllToAllDerivativeModel(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, ZeroDialect *) {
    AllToAllOp::attachInterface<AllToAllDerivative>(*ctx);
  });
}
