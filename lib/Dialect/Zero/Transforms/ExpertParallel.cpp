//===- ExpertParallel.cpp - Experts split over ranks ----------------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/Transforms/Passes.h"

#include "zero/Dialect/NN/IR/NNDialect.h"
#include "zero/Dialect/Zero/Analysis/Report.h"
#include "zero/Dialect/Zero/IR/ZeroDialect.h"
#include "zero/Interfaces/DerivativeInterface.h"
#include "zero/Interfaces/ExpertOpInterface.h"

#include "DivideShapes.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"

#include <cmath>

namespace mlir::zero {
#define GEN_PASS_DEF_ZEROEXPERTPARALLELPASS
#include "zero/Dialect/Zero/Transforms/Passes.h.inc"
} // namespace mlir::zero

using namespace mlir;
using namespace mlir::zero;

namespace {

/// The backward of an exchange returns the gradient of the received rows
/// to their sources, over the layout the exchange decided.
struct MoeExchangeDerivative
    : public DerivativeOpInterface::ExternalModel<MoeExchangeDerivative,
                                                  MoeExchangeOp> {
  LogicalResult buildDerivative(Operation *op, OpBuilder &b,
                                ArrayRef<Value> grads,
                                SmallVectorImpl<Value> &out) const {
    auto ex = cast<MoeExchangeOp>(op);
    Value drows;
    if (grads[0]) {
      Value counts = ex.hasKnownCounts() ? ex.getKnown()[0] : ex.getCounts();
      Value local =
          ex.hasKnownCounts() ? ex.getKnown()[1] : ex.getLocalOffsets();
      drows = MoeReturnOp::create(b, ex.getLoc(), ex.getRows().getType(),
                                  grads[0], counts, local, ex.getOffsets(),
                                  ex.getLayerAttr())
                  .getResult();
    }
    out.push_back(drows);
    // The offsets and counts are integers.
    out.append(op->getNumOperands() - 1, Value());
    return success();
  }
};

/// The backward of a return sends the gradient of the returned rows to
/// the experts again, reusing the forward exchange's counts (no second
/// count exchange, and the same rows dropped).
struct MoeReturnDerivative
    : public DerivativeOpInterface::ExternalModel<MoeReturnDerivative,
                                                  MoeReturnOp> {
  LogicalResult buildDerivative(Operation *op, OpBuilder &b,
                                ArrayRef<Value> grads,
                                SmallVectorImpl<Value> &out) const {
    auto ret = cast<MoeReturnOp>(op);
    Value drecv;
    if (grads[0]) {
      auto forward = ret.getCounts().getDefiningOp<MoeExchangeOp>();
      FloatAttr capacity = forward ? forward.getCapacityFactorAttr() : nullptr;
      UnitAttr drop = forward ? forward.getDropAttr() : nullptr;
      drecv = MoeExchangeOp::create(
                  b, ret.getLoc(), ret.getRecv().getType(),
                  ret.getCounts().getType(), ret.getLocalOffsets().getType(),
                  grads[0], ret.getOffsets(),
                  ValueRange{ret.getCounts(), ret.getLocalOffsets()},
                  ret.getLayerAttr(), capacity, drop)
                  .getRecv();
    }
    out.push_back(drecv);
    out.append(op->getNumOperands() - 1, Value());
    return success();
  }
};

struct ZeroExpertParallelPass
    : public zero::impl::ZeroExpertParallelPassBase<ZeroExpertParallelPass> {
  using ZeroExpertParallelPassBase::ZeroExpertParallelPassBase;

  /// Keeps E / P of the experts of the parameter whose view `gm` reads
  /// (the rank's share, dimension 0) and retypes every read of it.
  LogicalResult sliceWeight(ModuleOp module, ExpertOpInterface gm,
                            int64_t experts, int64_t p) {
    GetParamOp get = getExpertParam(gm.getExpertWeights().get());
    if (!get)
      return gm.emitOpError("reads expert weights that are not a parameter; "
                            "ep-size splits parameters of experts");
    auto param = module.lookupSymbol<ParamOp>(get.getParamAttr());
    if (!param)
      return get.emitOpError("reads no zero.param");
    if (param.getExpertParallel())
      return success(); // another product of the layer sliced it
    RankedTensorType t = param.getTensorType();
    if (t.getRank() < 1 || t.getDimSize(0) != experts)
      return gm.emitOpError("weights ")
             << t << " do not hold the layer's " << experts << " experts";
    if (param.getRows())
      return param.emitOpError("has padding rows; ep-size splits experts");
    SmallVector<int64_t> shape(t.getShape());
    shape[0] /= p;
    param.setType(RankedTensorType::get(shape, t.getElementType()));
    param.setExpertParallel(p);
    // Every read is a grouped product's weights or a view of them (a bias
    // copied and reshaped to [E, 1, F]), each sliced with the parameter
    // once all are found (a view is recognised by its unsliced types).
    SmallVector<Value> views;
    std::function<LogicalResult(Value)> collect =
        [&](Value v) -> LogicalResult {
      views.push_back(v);
      for (OpOperand &use : v.getUses()) {
        Operation *user = use.getOwner();
        if (auto expert = dyn_cast<ExpertOpInterface>(user);
            expert && &expert.getExpertWeights() == &use)
          continue;
        if (getExpertViewSource(user) == v && user->getNumResults() == 1) {
          if (failed(collect(user->getResult(0))))
            return failure();
          continue;
        }
        return user->emitOpError("reads expert parameter @")
               << param.getSymName()
               << " other than as a grouped product's weights; ep-size "
                  "splits its experts over the ranks";
      }
      return success();
    };
    WalkResult walk = module.walk([&](GetParamOp read) {
      if (read.getParam() != param.getSymName())
        return WalkResult::advance();
      return failed(collect(read.getResult())) ? WalkResult::interrupt()
                                               : WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
    for (Value v : views) {
      auto vt = cast<RankedTensorType>(v.getType());
      SmallVector<int64_t> vs(vt.getShape());
      vs[0] /= p;
      v.setType(RankedTensorType::get(vs, vt.getElementType()));
    }
    return success();
  }

  /// A grouped product's rows that do not come from the dispatched rows
  /// (gpt-oss's column of ones, whose product with [E, 1, F] adds each
  /// expert's bias) are in the dispatch's order too: they travel to the
  /// experts by an exchange of their own, with the layer's counts (no
  /// second count exchange), one per value.
  LogicalResult
  exchangeOtherRows(MoeExchangeOp exchange,
                    ArrayRef<ExpertOpInterface> products, int64_t n,
                    llvm::DenseMap<Value, RankedTensorType> &received) {
    SetVector<Operation *> onRows;
    getForwardSlice(exchange.getRecv(), &onRows);
    llvm::DenseMap<Value, Value> sent;
    for (ExpertOpInterface gm : products) {
      Value in = gm.getExpertRows().get();
      if (in == exchange.getRecv() ||
          (in.getDefiningOp() && onRows.contains(in.getDefiningOp())))
        continue;
      auto it = sent.find(in);
      if (it == sent.end()) {
        auto t = cast<RankedTensorType>(in.getType());
        if (t.getRank() != 2 || t.getDimSize(0) != n)
          return gm.emitOpError("reads rows ")
                 << t << " that are neither the dispatched rows nor " << n
                 << " rows in their order; ep-size sends a product's rows "
                    "to its experts";
        OpBuilder b(gm);
        Operation *def = in.getDefiningOp();
        if (def && def->getBlock() == exchange->getBlock() &&
            exchange->isBeforeInBlock(def))
          b.setInsertionPointAfter(def);
        else
          b.setInsertionPointAfter(exchange);
        auto recvType = cast<RankedTensorType>(exchange.getRecv().getType());
        auto other = MoeExchangeOp::create(
            b, gm.getLoc(),
            RankedTensorType::get({recvType.getDimSize(0), t.getDimSize(1)},
                                  t.getElementType()),
            exchange.getCounts().getType(),
            exchange.getLocalOffsets().getType(), in, exchange.getOffsets(),
            ValueRange{exchange.getCounts(), exchange.getLocalOffsets()},
            exchange.getLayerAttr(), exchange.getCapacityFactorAttr(),
            exchange.getDropAttr());
        it = sent.try_emplace(in, other.getRecv()).first;
        received[other.getRecv()] = recvType;
      }
      gm.getExpertRows().assign(it->second);
    }
    return success();
  }

  /// Rewrites one MoE layer: dispatch -> exchange -> the grouped products
  /// over the local experts -> return -> combine.
  LogicalResult parallelize(ModuleOp module, nn::MoeDispatchOp dispatch,
                            int64_t layer, int64_t p) {
    int64_t experts = dispatch.getExperts();
    if (experts % p != 0)
      return dispatch.emitOpError("has ")
             << experts << " experts, not divisible by ep-size " << p;
    Value rows = dispatch.getRows(), offsets = dispatch.getOffsets();
    SmallVector<ExpertOpInterface> products;
    for (Operation *user : offsets.getUsers()) {
      auto gm = dyn_cast<ExpertOpInterface>(user);
      if (!gm || gm.getExpertOffsets().get() != offsets)
        return user->emitOpError("reads a dispatch's offsets; ep-size "
                                 "supports grouped products of the experts "
                                 "only");
      products.push_back(gm);
    }
    if (products.empty())
      return dispatch.emitOpError("has no grouped product of experts for "
                                  "ep-size to split");
    auto rowsType = cast<RankedTensorType>(rows.getType());
    int64_t n = rowsType.getDimSize(0), local = experts / p;
    double factor = capacityFactor.getValue();

    OpBuilder b(dispatch->getContext());
    b.setInsertionPointAfter(dispatch);
    Location loc = dispatch.getLoc();
    Type i32 = b.getI32Type();
    auto exchange = MoeExchangeOp::create(
        b, loc,
        RankedTensorType::get({p * n, rowsType.getDimSize(1)},
                              rowsType.getElementType()),
        RankedTensorType::get({p, local}, i32),
        RankedTensorType::get({local}, i32), rows, offsets, ValueRange{},
        b.getI64IntegerAttr(layer),
        factor > 0 ? b.getF64FloatAttr(factor) : FloatAttr(),
        dropTokens ? b.getUnitAttr() : UnitAttr());
    // The receive rows the exchange plans for its rows and members.
    int64_t cap = exchange.getCapacityFor(n);
    auto planned = cast<RankedTensorType>(exchange.getRecv().getType());
    exchange.getRecv().setType(RankedTensorType::get(
        {cap, rowsType.getDimSize(1)}, rowsType.getElementType()));
    rows.replaceAllUsesExcept(exchange.getRecv(), exchange);
    llvm::DenseMap<Value, RankedTensorType> received{
        {exchange.getRecv(), planned}};
    if (failed(exchangeOtherRows(exchange, products, n, received)))
      return failure();
    for (ExpertOpInterface gm : products) {
      if (failed(sliceWeight(module, gm, experts, p)))
        return failure();
      gm.getExpertOffsets().assign(exchange.getLocalOffsets());
    }

    // The values of the received rows' layout, in block order: each op
    // that reads one is retyped from n rows to cap; the combine reads the
    // rows returned to the dispatch's order.
    auto handle = [&](Operation *op) -> FailureOr<bool> {
      if (auto combine = dyn_cast<ExpertCombineOpInterface>(op)) {
        Value h = combine.getRowsMutable().get();
        if (!received.count(h) ||
            combine.getPositions() != dispatch.getPositions())
          return combine.emitOpError("combines rows of another layout than "
                                     "its layer's dispatch");
        auto ht = cast<RankedTensorType>(h.getType());
        b.setInsertionPoint(combine);
        auto ret = MoeReturnOp::create(
            b, combine.getLoc(),
            RankedTensorType::get({n, ht.getDimSize(1)}, ht.getElementType()),
            h, exchange.getCounts(), exchange.getLocalOffsets(), offsets,
            b.getI64IntegerAttr(layer));
        combine.getRowsMutable().assign(ret.getRows());
        return true;
      }
      if (op->getNumResults() == 0 || isa<ReturnOp>(op))
        return op->emitOpError("reads an expert's rows outside its layer; "
                               "ep-size needs them combined (nn.moe_combine)");
      return false;
    };
    // Row-wise ops (a split of the last axis, an activation): a result of n
    // rows has cap rows.
    auto rule = [&](Operation *op,
                    SmallVectorImpl<Type> &types) -> LogicalResult {
      for (Value r : op->getResults()) {
        auto rt = dyn_cast<RankedTensorType>(r.getType());
        if (!rt || rt.getRank() < 1 || rt.getDimSize(0) != n)
          return op->emitOpError("reads an expert's rows outside its "
                                 "layer; ep-size needs them combined "
                                 "(nn.moe_combine)");
        SmallVector<int64_t> shape(rt.getShape());
        shape[0] = cap;
        types.push_back(RankedTensorType::get(shape, rt.getElementType()));
      }
      return success();
    };
    // Every value read from the received rows stays in their layout.
    return divideDerivedShapes(std::next(exchange->getIterator()),
                               exchange->getBlock()->end(), received,
                               {"on the received rows (expert parallelism)",
                                rule, handle,
                                [](Operation *) { return true; }});
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    int64_t p = epSize.getValue();
    if (p < 1) {
      mlir::emitError(module.getLoc())
          << "zero-expert-parallel: ep-size must be at least 1, got " << p;
      return signalPassFailure();
    }
    double factor = capacityFactor.getValue();
    if (!(factor >= 0.0) || !std::isfinite(factor)) {
      mlir::emitError(module.getLoc())
          << "zero-expert-parallel: moe-capacity-factor must be positive (or "
             "0: dropless), got "
          << factor;
      return signalPassFailure();
    }
    if (dropTokens && factor == 0.0) {
      mlir::emitError(module.getLoc())
          << "zero-expert-parallel: moe-drop-tokens needs a "
             "moe-capacity-factor (the dropless bound never drops)";
      return signalPassFailure();
    }
    if (p == 1) {
      if (factor > 0.0)
        mlir::emitError(module.getLoc())
            << "zero-expert-parallel: moe-capacity-factor needs ep-size > 1 "
               "(without expert parallelism nothing is exchanged)";
      return factor > 0.0 ? signalPassFailure() : void();
    }
    for (TrainStepOp step : module.getOps<TrainStepOp>()) {
      SmallVector<nn::MoeDispatchOp> dispatches(
          step.getBodyBlock().getOps<nn::MoeDispatchOp>());
      if (dispatches.empty()) {
        mlir::emitError(step.getLoc())
            << "train step @" << step.getSymName()
            << " has no MoE layer (nn.moe_dispatch); ep-size " << p
            << " splits experts";
        return signalPassFailure();
      }
      for (auto [layer, dispatch] : llvm::enumerate(dispatches))
        if (failed(parallelize(module, dispatch, int64_t(layer), p)))
          return signalPassFailure();
    }
  }
};

} // namespace

void mlir::zero::registerMoeExchangeDerivativeModels(
    DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, ZeroDialect *) {
    MoeExchangeOp::attachInterface<MoeExchangeDerivative>(*ctx);
    MoeReturnOp::attachInterface<MoeReturnDerivative>(*ctx);
  });
}
