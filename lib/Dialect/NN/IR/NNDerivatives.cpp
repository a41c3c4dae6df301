//===- NNDerivatives.cpp - Reverse-mode derivative rules of nn ops --------===//
//
// Part of the zero-mlir project.
//
// Each rule receives the gradients of an op's results (null where none flows;
// zero-autodiff asks only an op with at least one) and emits the ops
// computing the gradients of its operands. Rules only use the op's own
// operands and results, so what the backward keeps alive is visible in the
// IR.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/NN/IR/NNDialect.h"

using namespace mlir;
using namespace mlir::nn;

static RankedTensorType ranked(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// Swaps the last two dimensions.
static Value transposeLast2(OpBuilder &b, Location loc, Value v) {
  int64_t r = ranked(v).getRank();
  SmallVector<int64_t> perm;
  for (int64_t i = 0; i < r; ++i)
    perm.push_back(i);
  std::swap(perm[r - 1], perm[r - 2]);
  return TransposeOp::create(b, loc, v, perm);
}

/// Collapses all but the last dimension: [..., K] -> [prod(...), K].
static Value flattenTo2D(OpBuilder &b, Location loc, Value v) {
  auto t = ranked(v);
  if (t.getRank() == 2)
    return v;
  int64_t k = t.getShape().back();
  auto type = RankedTensorType::get({t.getNumElements() / k, k},
                                    t.getElementType());
  return ReshapeOp::create(b, loc, type, v);
}

/// Sums `grad` down to `type` when `type` was broadcast.
static Value reduceTo(OpBuilder &b, Location loc, Value grad, Type type) {
  if (grad.getType() == type)
    return grad;
  return ReduceSumOp::create(b, loc, type, grad);
}

LogicalResult MatmulOp::buildDerivative(OpBuilder &b, ArrayRef<Value> grads,
                                        SmallVectorImpl<Value> &out) {
  Location loc = getLoc();
  Value dy = grads[0];
  Value a = getLhs(), w = getRhs();
  bool ta = getTransposeLhs(), tb = getTransposeRhs();
  // With A' = op(A) and B' = op(B): dA' = dY B'^T and dB' = A'^T dY.
  // dY's padded columns (`columns`) hold zeros: leave them out of dA's sums,
  // which then round as the unpadded product's.
  auto daOp = MatmulOp::create(b, loc, dy, w, false, !tb);
  if (std::optional<int64_t> columns = getColumns())
    daOp.setContract(*columns);
  Value da = daOp;
  if (ta)
    da = transposeLast2(b, loc, da);
  Value dw;
  if (ranked(w).getRank() == ranked(a).getRank()) {
    dw = tb ? MatmulOp::create(b, loc, dy, a, true, ta)
            : MatmulOp::create(b, loc, a, dy, !ta, false);
  } else {
    // A weight shared over the batch: contract over every leading dimension.
    Value a2 = flattenTo2D(b, loc, ta ? transposeLast2(b, loc, a) : a);
    Value dy2 = flattenTo2D(b, loc, dy);
    dw = tb ? MatmulOp::create(b, loc, dy2, a2, true, false)
            : MatmulOp::create(b, loc, a2, dy2, true, false);
  }
  out.append({da, dw});
  return success();
}

LogicalResult AddOp::buildDerivative(OpBuilder &b, ArrayRef<Value> grads,
                                     SmallVectorImpl<Value> &out) {
  Value dy = grads[0];
  out.push_back(dy);
  out.push_back(reduceTo(b, getLoc(), dy, getRhs().getType()));
  return success();
}

LogicalResult MulOp::buildDerivative(OpBuilder &b, ArrayRef<Value> grads,
                                     SmallVectorImpl<Value> &out) {
  Value dy = grads[0];
  Location loc = getLoc();
  out.push_back(MulOp::create(b, loc, dy, getRhs()));
  Value prod = MulOp::create(b, loc, dy, getLhs());
  out.push_back(reduceTo(b, loc, prod, getRhs().getType()));
  return success();
}

LogicalResult ScaleOp::buildDerivative(OpBuilder &b, ArrayRef<Value> grads,
                                       SmallVectorImpl<Value> &out) {
  out.push_back(ScaleOp::create(b, getLoc(), grads[0], getFactorAttr()));
  return success();
}

LogicalResult ReduceSumOp::buildDerivative(OpBuilder &b, ArrayRef<Value> grads,
                                           SmallVectorImpl<Value> &out) {
  out.push_back(ReduceSumGradOp::create(b, getLoc(), getInput(), grads[0]));
  return success();
}

LogicalResult GeluOp::buildDerivative(OpBuilder &b, ArrayRef<Value> grads,
                                      SmallVectorImpl<Value> &out) {
  out.push_back(GeluGradOp::create(b, getLoc(), getInput(), grads[0]));
  return success();
}

LogicalResult BiasGeluOp::buildDerivative(OpBuilder &b, ArrayRef<Value> grads,
                                          SmallVectorImpl<Value> &out) {
  Value dy = grads[0];
  Location loc = getLoc();
  Value dx = BiasGeluGradOp::create(b, loc, getInput(), getBias(), dy);
  out.push_back(dx);
  out.push_back(reduceTo(b, loc, dx, getBias().getType()));
  return success();
}

LogicalResult GeluErfOp::buildDerivative(OpBuilder &b, ArrayRef<Value> grads,
                                         SmallVectorImpl<Value> &out) {
  out.push_back(GeluErfGradOp::create(b, getLoc(), getInput(), grads[0]));
  return success();
}

LogicalResult SiluOp::buildDerivative(OpBuilder &b, ArrayRef<Value> grads,
                                      SmallVectorImpl<Value> &out) {
  out.push_back(SiluGradOp::create(b, getLoc(), getInput(), grads[0]));
  return success();
}

LogicalResult SwigluOp::buildDerivative(OpBuilder &b, ArrayRef<Value> grads,
                                        SmallVectorImpl<Value> &out) {
  auto g = SwigluGradOp::create(b, getLoc(), getGate(), getUp(), grads[0]);
  out.push_back(g.getGateGrad());
  out.push_back(g.getUpGrad());
  return success();
}

LogicalResult ClampedSwigluOp::buildDerivative(OpBuilder &b,
                                               ArrayRef<Value> grads,
                                               SmallVectorImpl<Value> &out) {
  auto g =
      ClampedSwigluGradOp::create(b, getLoc(), getGate(), getUp(), grads[0],
                                  getAlphaAttr(), getLimitAttr());
  out.push_back(g.getGateGrad());
  out.push_back(g.getUpGrad());
  return success();
}

/// Sums a per-element term to the type of its [1] `coefficient`: over the
/// leading dimensions, then over the last (reduce_sum sums leading
/// dimensions only), both in fp32 and in a fixed order.
static Value sumToCoefficient(OpBuilder &b, Location loc, Value term,
                              Value coefficient) {
  auto t = ranked(term);
  Type elem = t.getElementType();
  int64_t last = t.getShape().back();
  if (t.getRank() > 1)
    term =
        ReduceSumOp::create(b, loc, RankedTensorType::get({last}, elem), term);
  if (last != 1)
    term = ReduceSumOp::create(
        b, loc, coefficient.getType(),
        ReshapeOp::create(b, loc, RankedTensorType::get({last, 1}, elem),
                          term));
  return term;
}

LogicalResult XieluOp::buildDerivative(OpBuilder &b, ArrayRef<Value> grads,
                                       SmallVectorImpl<Value> &out) {
  auto g =
      XieluGradOp::create(b, getLoc(), getInput(), getAlphaP(), getAlphaN(),
                          grads[0], getBetaAttr(), getEpsAttr());
  out.push_back(g.getInputGrad());
  out.push_back(sumToCoefficient(b, getLoc(), g.getAlphaPPart(), getAlphaP()));
  out.push_back(sumToCoefficient(b, getLoc(), g.getAlphaNPart(), getAlphaN()));
  return success();
}

LogicalResult ReluOp::buildDerivative(OpBuilder &b, ArrayRef<Value> grads,
                                      SmallVectorImpl<Value> &out) {
  // The mask comes from the result, so the input need not stay alive.
  out.push_back(ReluGradOp::create(b, getLoc(), getResult(), grads[0]));
  return success();
}

LogicalResult TanhOp::buildDerivative(OpBuilder &b, ArrayRef<Value> grads,
                                      SmallVectorImpl<Value> &out) {
  // 1 - tanh(x)^2 from the result, as PyTorch's tanh_backward.
  out.push_back(TanhGradOp::create(b, getLoc(), getResult(), grads[0]));
  return success();
}

LogicalResult ExpOp::buildDerivative(OpBuilder &b, ArrayRef<Value> grads,
                                     SmallVectorImpl<Value> &out) {
  // dy * exp(x) from the result, as PyTorch's exp backward.
  out.push_back(ExpGradOp::create(b, getLoc(), getResult(), grads[0]));
  return success();
}

LogicalResult LogOp::buildDerivative(OpBuilder &b, ArrayRef<Value> grads,
                                     SmallVectorImpl<Value> &out) {
  out.push_back(LogGradOp::create(b, getLoc(), getInput(), grads[0]));
  return success();
}

LogicalResult SoftplusOp::buildDerivative(OpBuilder &b, ArrayRef<Value> grads,
                                          SmallVectorImpl<Value> &out) {
  // From the input, as PyTorch's softplus_backward.
  out.push_back(SoftplusGradOp::create(b, getLoc(), getInput(), grads[0],
                                       getBetaAttr(), getThresholdAttr()));
  return success();
}

LogicalResult LogsumexpOp::buildDerivative(OpBuilder &b, ArrayRef<Value> grads,
                                           SmallVectorImpl<Value> &out) {
  // dy * exp(x - y): the input and the result stay alive for the backward.
  out.push_back(
      LogsumexpGradOp::create(b, getLoc(), getInput(), getResult(), grads[0]));
  return success();
}

LogicalResult ReduceMaxOp::buildDerivative(OpBuilder &b, ArrayRef<Value> grads,
                                           SmallVectorImpl<Value> &out) {
  // The ties with the maximum are found again from the input and result.
  out.push_back(
      ReduceMaxGradOp::create(b, getLoc(), getInput(), getResult(), grads[0]));
  return success();
}

LogicalResult SoftmaxOp::buildDerivative(OpBuilder &b, ArrayRef<Value> grads,
                                         SmallVectorImpl<Value> &out) {
  out.push_back(SoftmaxGradOp::create(b, getLoc(), getResult(), grads[0]));
  return success();
}

LogicalResult RopeOp::buildDerivative(OpBuilder &b, ArrayRef<Value> grads,
                                      SmallVectorImpl<Value> &out) {
  // A rotation's adjoint is its inverse (a scaled one's, scaled alike):
  // rotate the gradient back. Neither the input nor the result stays alive
  // for the backward.
  out.push_back(RopeOp::create(b, getLoc(), grads[0], getThetaAttr(),
                               getInvFreqAttr(), getScaleAttr(),
                               getInverse() ? UnitAttr() : b.getUnitAttr(),
                               getInterleavedAttr(), getPositions()));
  if (getPositions())
    out.push_back(Value()); // positions are not differentiable
  return success();
}

LogicalResult LayerNormOp::buildDerivative(OpBuilder &b, ArrayRef<Value> grads,
                                           SmallVectorImpl<Value> &out) {
  auto g = LayerNormGradOp::create(b, getLoc(), getInput(), getWeight(),
                                   grads[0], getEpsAttr());
  out.push_back(g.getInputGrad());
  out.push_back(g.getWeightGrad());
  out.push_back(g.getBiasGrad());
  return success();
}

LogicalResult RmsNormOp::buildDerivative(OpBuilder &b, ArrayRef<Value> grads,
                                         SmallVectorImpl<Value> &out) {
  // One op: the weight gradient is summed over the leading dimensions inside
  // the kernel, from the per-row scale it computes for dx anyway.
  auto g = RmsNormGradOp::create(b, getLoc(), getInput(), getWeight(), grads[0],
                                 getEpsAttr());
  out.push_back(g.getInputGrad());
  out.push_back(g.getWeightGrad());
  return success();
}

LogicalResult AttentionOp::buildDerivative(OpBuilder &b, ArrayRef<Value> grads,
                                           SmallVectorImpl<Value> &out) {
  auto g = AttentionGradOp::create(
      b, getLoc(), getQuery(), getKey(), getValue(), getResult(), grads[0],
      getCausalAttr(), b.getF64FloatAttr(getScaleValue()), getWindowAttr(),
      getSoftcapAttr(), getAlibiAttr(), getSinks(), getSegments());
  out.push_back(g.getQueryGrad());
  out.push_back(g.getKeyGrad());
  out.push_back(g.getValueGrad());
  if (getSinks())
    out.push_back(AttentionSinksGradOp::create(
        b, getLoc(), getQuery(), getKey(), getSinks(), getResult(), grads[0],
        getCausalAttr(), b.getF64FloatAttr(getScaleValue()), getWindowAttr(),
        getSegments()));
  if (getSegments())
    out.push_back(Value()); // document ids are not differentiable
  return success();
}

LogicalResult EmbeddingOp::buildDerivative(OpBuilder &b, ArrayRef<Value> grads,
                                           SmallVectorImpl<Value> &out) {
  out.push_back(EmbeddingGradOp::create(b, getLoc(), getTable().getType(),
                                        grads[0], getIds(),
                                        getPaddingIdxAttr()));
  out.push_back(Value()); // token ids are not differentiable
  return success();
}

LogicalResult ReshapeOp::buildDerivative(OpBuilder &b, ArrayRef<Value> grads,
                                         SmallVectorImpl<Value> &out) {
  out.push_back(ReshapeOp::create(b, getLoc(), getInput().getType(), grads[0]));
  return success();
}

LogicalResult TransposeOp::buildDerivative(OpBuilder &b, ArrayRef<Value> grads,
                                           SmallVectorImpl<Value> &out) {
  ArrayRef<int64_t> perm = getPermutation();
  SmallVector<int64_t> inverse(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inverse[p] = i;
  out.push_back(TransposeOp::create(b, getLoc(), grads[0], inverse));
  return success();
}

LogicalResult SplitOp::buildDerivative(OpBuilder &b, ArrayRef<Value> grads,
                                       SmallVectorImpl<Value> &out) {
  SmallVector<Value> parts;
  for (auto [g, r] : llvm::zip(grads, getResults()))
    parts.push_back(g ? g
                      : FillOp::create(b, getLoc(), r.getType(),
                                       b.getF64FloatAttr(0.0)));
  out.push_back(ConcatOp::create(b, getLoc(), parts, getAxis()));
  return success();
}

LogicalResult ConcatOp::buildDerivative(OpBuilder &b, ArrayRef<Value> grads,
                                        SmallVectorImpl<Value> &out) {
  auto split =
      SplitOp::create(b, getLoc(), getInputs().getTypes(), grads[0], getAxis());
  out.append(split.getResults().begin(), split.getResults().end());
  return success();
}

LogicalResult SoftmaxCrossEntropyOp::buildDerivative(
    OpBuilder &b, ArrayRef<Value> grads, SmallVectorImpl<Value> &out) {
  out.push_back(SoftmaxCrossEntropyGradOp::create(
      b, getLoc(), getLogits(), getLabels(), grads[0], getClassesAttr(),
      getIgnoreIndexAttr()));
  out.push_back(Value()); // labels are not differentiable
  return success();
}

LogicalResult
LinearCrossEntropyOp::buildDerivative(OpBuilder &b, ArrayRef<Value> grads,
                                      SmallVectorImpl<Value> &out) {
  // The logits are recomputed chunk by chunk in the backward rather than
  // kept: keeping them is what the op exists to avoid.
  auto grad = LinearCrossEntropyGradOp::create(
      b, getLoc(), getInput().getType(), getWeight().getType(), getInput(),
      getWeight(), getLabels(), grads[0], getChunkAttr(), getIgnoreIndexAttr());
  out.append({grad.getInputGrad(), grad.getWeightGrad(), Value()});
  return success();
}

LogicalResult TiledMlpOp::buildDerivative(OpBuilder &b, ArrayRef<Value> grads,
                                          SmallVectorImpl<Value> &out) {
  // Each tile's gate and up are recomputed in the backward rather than
  // kept: keeping them is what the op exists to avoid.
  auto grad = TiledMlpGradOp::create(
      b, getLoc(), getInput().getType(), getGateWeight().getType(),
      getUpWeight().getType(), getDownWeight().getType(), getInput(),
      getGateWeight(), getUpWeight(), getDownWeight(), grads[0],
      getTilesAttr());
  out.append({grad.getInputGrad(), grad.getGateWeightGrad(),
              grad.getUpWeightGrad(), grad.getDownWeightGrad()});
  return success();
}

LogicalResult CastOp::buildDerivative(OpBuilder &b, ArrayRef<Value> grads,
                                      SmallVectorImpl<Value> &out) {
  out.push_back(CastOp::create(b, getLoc(), getInput().getType(), grads[0]));
  return success();
}

LogicalResult MoeRouterOp::buildDerivative(OpBuilder &b, ArrayRef<Value> grads,
                                           SmallVectorImpl<Value> &out) {
  // Only the weights carry a gradient: the selection (indices) and the
  // correction bias, which only selects, get none.
  Value dlogits;
  if (grads[0])
    dlogits = MoeRouterGradOp::create(
        b, getLoc(), getLogits().getType(), getLogits(), getIndices(), grads[0],
        getSigmoidAttr(), getNormalizeAttr(), getNormEpsAttr(), getScaleAttr());
  out.push_back(dlogits);
  if (getBias())
    out.push_back(Value());
  return success();
}

LogicalResult MoeDispatchOp::buildDerivative(OpBuilder &b,
                                             ArrayRef<Value> grads,
                                             SmallVectorImpl<Value> &out) {
  Value dx;
  if (grads[0])
    dx = MoeDispatchGradOp::create(b, getLoc(), getInput().getType(), grads[0],
                                   getPositions());
  out.append({dx, Value()}); // the experts are not differentiable
  return success();
}

LogicalResult GroupedMatmulOp::buildDerivative(OpBuilder &b,
                                               ArrayRef<Value> grads,
                                               SmallVectorImpl<Value> &out) {
  // dx_e = dy_e op(W_e)^T: the grouped product with the other layout.
  Location loc = getLoc();
  Value dx =
      GroupedMatmulOp::create(b, loc, getInput().getType(), grads[0],
                              getWeight(), getOffsets(), !getTransposeRhs());
  Value dw = GroupedMatmulWeightGradOp::create(b, loc, getWeight().getType(),
                                               getInput(), grads[0],
                                               getOffsets(), getTransposeRhs());
  out.append({dx, dw, Value()});
  return success();
}

LogicalResult MoeCombineOp::buildDerivative(OpBuilder &b, ArrayRef<Value> grads,
                                            SmallVectorImpl<Value> &out) {
  auto grad = MoeCombineGradOp::create(b, getLoc(), getRows().getType(),
                                       getWeights().getType(), getRows(),
                                       getPositions(), getWeights(), grads[0]);
  out.append({grad.getRowsGrad(), Value(), grad.getWeightsGrad()});
  return success();
}

LogicalResult MoeAuxLossOp::buildDerivative(OpBuilder &b, ArrayRef<Value> grads,
                                            SmallVectorImpl<Value> &out) {
  out.push_back(MoeAuxLossGradOp::create(b, getLoc(), getLogits().getType(),
                                         getLogits(), grads[0], getCounts(),
                                         getRowsAttr(), getTopKAttr()));
  // The counts are a top k's, without a gradient.
  if (getCounts())
    out.push_back(Value());
  return success();
}

LogicalResult ClampOp::buildDerivative(OpBuilder &b, ArrayRef<Value> grads,
                                       SmallVectorImpl<Value> &out) {
  // The mask comes from the input: min <= x <= max, as torch's.
  out.push_back(ClampGradOp::create(b, getLoc(), getInput().getType(),
                                    getInput(), grads[0], getMinAttr(),
                                    getMaxAttr()));
  return success();
}

LogicalResult MinimumOp::buildDerivative(OpBuilder &b, ArrayRef<Value> grads,
                                         SmallVectorImpl<Value> &out) {
  Type t = getLhs().getType();
  auto g =
      MinimumGradOp::create(b, getLoc(), t, t, getLhs(), getRhs(), grads[0]);
  out.push_back(g.getLhsGrad());
  out.push_back(g.getRhsGrad());
  return success();
}

LogicalResult MaximumOp::buildDerivative(OpBuilder &b, ArrayRef<Value> grads,
                                         SmallVectorImpl<Value> &out) {
  Type t = getLhs().getType();
  auto g =
      MaximumGradOp::create(b, getLoc(), t, t, getLhs(), getRhs(), grads[0]);
  out.push_back(g.getLhsGrad());
  out.push_back(g.getRhsGrad());
  return success();
}

LogicalResult WhereOp::buildDerivative(OpBuilder &b, ArrayRef<Value> grads,
                                       SmallVectorImpl<Value> &out) {
  Type t = getResult().getType();
  auto g = WhereGradOp::create(b, getLoc(), t, t, getCondition(), grads[0]);
  out.push_back(Value()); // the condition is a mask, not differentiable
  out.push_back(g.getTrueGrad());
  out.push_back(g.getFalseGrad());
  return success();
}

LogicalResult StopGradientOp::buildDerivative(OpBuilder &, ArrayRef<Value>,
                                              SmallVectorImpl<Value> &out) {
  out.push_back(Value()); // detach(): no gradient flows
  return success();
}

LogicalResult GatherOp::buildDerivative(OpBuilder &b, ArrayRef<Value> grads,
                                        SmallVectorImpl<Value> &out) {
  // Only the indices stay alive for the backward.
  out.push_back(GatherGradOp::create(b, getLoc(), getInput().getType(),
                                     getIndices(), grads[0]));
  out.push_back(Value()); // indices are not differentiable
  return success();
}

LogicalResult ReciprocalOp::buildDerivative(OpBuilder &b, ArrayRef<Value> grads,
                                            SmallVectorImpl<Value> &out) {
  // -dy * y * y from the result, as PyTorch's.
  out.push_back(ReciprocalGradOp::create(b, getLoc(), getResult(), grads[0]));
  return success();
}
