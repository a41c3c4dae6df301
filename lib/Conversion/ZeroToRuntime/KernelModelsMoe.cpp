//===- KernelModelsMoe.cpp - The mixture of experts -----------------------===//
//
// Part of the zero-mlir project.
//
// The runtime kernels of the mixture of experts: the router, the dispatch
// and combine, the grouped matmuls, the auxiliary loss and the expert
// counts, with their scratch and their work for the cost model.
//
//===----------------------------------------------------------------------===//

#include "KernelModels.h"

#include "zero_rt/scratch.h"

using namespace mlir;
using namespace mlir::zero;

namespace mlir::zero::kernels {

// Mixture of experts. The routing decides only values (positions,
// offsets), never sizes: each model is its kernel at a balanced load.

int64_t dimOf(Value v, int64_t i) { return tensorType(v).getDimSize(i); }
double scaleOf(std::optional<APFloat> scale) {
  return scale ? scale->convertToDouble() : 1.0;
}
double epsOf(std::optional<APFloat> eps) {
  return eps ? eps->convertToDouble() : 0.0;
}
/// A score (an exponential) per logit, and one pass over the operands and
/// results.
KernelCost scoreCost(Operation *op, Value logits) {
  return KernelCost::activation(getOperandAndResultBytes(op), numel(logits));
}

LogicalResult buildCall(nn::MoeRouterOp op, KernelCallBuilder &b) {
  Value logits = op.getLogits();
  return b.call(
      "zrt_moe_router",
      {b.dtype(elemType(logits)), b.operand(0),
       op.getBias() ? b.operand(1) : b.nullPtr(), b.result(0),
       b.dtype(elemType(op.getIndices())), b.result(1), b.i64(dimOf(logits, 0)),
       b.i64(dimOf(logits, 1)), b.i64(op.getTopK()), b.i32(op.getSigmoid()),
       b.i32(op.getNormalize()), b.f64(scaleOf(op.getScale())),
       b.i64(op.getNGroup().value_or(0)), b.i64(op.getTopkGroup().value_or(0)),
       b.f64(epsOf(op.getNormEps()))});
}
int64_t scratchBytes(nn::MoeRouterOp op) {
  int64_t experts = dimOf(op.getLogits(), 1);
  if (std::optional<int64_t> groups = op.getNGroup())
    return zrt_scratch_moe_router_grouped(experts, *groups);
  return zrt_scratch_moe_router(experts);
}
KernelCost cost(nn::MoeRouterOp op) { return scoreCost(op, op.getLogits()); }
LogicalResult buildCall(nn::MoeRouterGradOp op, KernelCallBuilder &b) {
  Value logits = op.getLogits();
  return b.call("zrt_moe_router_grad",
                {b.dtype(elemType(logits)), b.operand(0),
                 b.dtype(elemType(op.getIndices())), b.operand(1), b.operand(2),
                 b.result(0), b.i64(dimOf(logits, 0)), b.i64(dimOf(logits, 1)),
                 b.i64(dimOf(op.getIndices(), 1)), b.i32(op.getSigmoid()),
                 b.i32(op.getNormalize()), b.f64(scaleOf(op.getScale())),
                 b.f64(epsOf(op.getNormEps()))});
}
int64_t scratchBytes(nn::MoeRouterGradOp op) {
  return zrt_scratch_moe_router(dimOf(op.getLogits(), 1));
}
KernelCost cost(nn::MoeRouterGradOp op) {
  return scoreCost(op, op.getLogits());
}
LogicalResult buildCall(nn::MoeDispatchOp op, KernelCallBuilder &b) {
  Value x = op.getInput(), idx = op.getIndices();
  return b.call("zrt_moe_dispatch",
                {b.dtype(elemType(x)), b.operand(0), b.dtype(elemType(idx)),
                 b.operand(1), b.result(0), b.result(1), b.result(2),
                 b.i64(dimOf(x, 0)), b.i64(dimOf(x, 1)), b.i64(dimOf(idx, 1)),
                 b.i64(dimOf(op.getOffsets(), 0))});
}
LogicalResult buildCall(nn::MoeDispatchGradOp op, KernelCallBuilder &b) {
  Value pos = op.getPositions();
  return b.call("zrt_moe_dispatch_grad",
                {b.dtype(elemType(op.getRowsGrad())), b.operand(0),
                 b.dtype(elemType(pos)), b.operand(1), b.result(0),
                 b.i64(dimOf(pos, 0)), b.i64(innerDim(op.getResult())),
                 b.i64(dimOf(pos, 1))});
}
/// A grouped product over `rows` rows: x [rows, in] by each expert's
/// [in, out], as E products of rows / E rows each (a balanced load; the
/// flops do not depend on the routing), every expert's weight read once.
KernelCost groupedCost(Operation *op, Value typed, int64_t rows, int64_t in,
                       int64_t out, int64_t experts) {
  KernelCost c = KernelCost::compute(
      KernelCost::Kind::Gemm, getOperandAndResultBytes(op),
      2.0 * double(rows) * double(in) * double(out), elemType(typed));
  c.batch = experts;
  c.m = llvm::divideCeil(rows, std::max<int64_t>(experts, 1));
  c.n = out;
  c.k = in;
  return c;
}
LogicalResult buildCall(nn::GroupedMatmulOp op, KernelCallBuilder &b) {
  Value x = op.getInput(), offs = op.getOffsets();
  return b.call("zrt_grouped_matmul",
                {b.dtype(elemType(x)), b.operand(0), b.operand(1),
                 b.dtype(elemType(offs)), b.operand(2), b.result(0),
                 b.i64(dimOf(x, 0)), b.i64(dimOf(x, 1)),
                 b.i64(innerDim(op.getResult())), b.i64(dimOf(offs, 0)),
                 b.i32(op.getTransposeRhs())});
}
/// 16-bit products convert fp32 panels sized for the worst expert.
int64_t scratchBytes(nn::GroupedMatmulOp op) {
  Value x = op.getInput();
  return zrt_scratch_grouped_matmul(dtypeCode(elemType(x)), dimOf(x, 0),
                                    dimOf(x, 1), innerDim(op.getResult()));
}
KernelCost cost(nn::GroupedMatmulOp op) {
  Value x = op.getInput();
  return groupedCost(op, x, dimOf(x, 0), dimOf(x, 1), innerDim(op.getResult()),
                     dimOf(op.getOffsets(), 0));
}
LogicalResult buildCall(nn::GroupedMatmulWeightGradOp op,
                        KernelCallBuilder &b) {
  Value x = op.getInput(), offs = op.getOffsets();
  return b.call("zrt_grouped_matmul_weight_grad",
                {b.dtype(elemType(x)), b.operand(0), b.operand(1),
                 b.dtype(elemType(offs)), b.operand(2), b.result(0),
                 b.i64(dimOf(x, 0)), b.i64(dimOf(x, 1)),
                 b.i64(innerDim(op.getResultGrad())), b.i64(dimOf(offs, 0)),
                 b.i32(op.getTransposeRhs())});
}
int64_t scratchBytes(nn::GroupedMatmulWeightGradOp op) {
  Value x = op.getInput();
  return zrt_scratch_grouped_matmul_weight_grad(dtypeCode(elemType(x)),
                                                dimOf(x, 0), dimOf(x, 1),
                                                innerDim(op.getResultGrad()));
}
// The same products contracted over the rows: each expert's [in, out]
// gradient from its share of the rows.
KernelCost cost(nn::GroupedMatmulWeightGradOp op) {
  Value x = op.getInput();
  int64_t experts = dimOf(op.getOffsets(), 0);
  KernelCost c = groupedCost(op, x, dimOf(x, 0), dimOf(x, 1),
                             innerDim(op.getResultGrad()), experts);
  c.m = dimOf(x, 1);
  c.n = innerDim(op.getResultGrad());
  c.k = llvm::divideCeil(dimOf(x, 0), std::max<int64_t>(experts, 1));
  return c;
}
LogicalResult buildCall(nn::MoeCombineOp op, KernelCallBuilder &b) {
  Value pos = op.getPositions();
  return b.call("zrt_moe_combine",
                {b.dtype(elemType(op.getRows())), b.operand(0),
                 b.dtype(elemType(pos)), b.operand(1), b.operand(2),
                 b.result(0), b.i64(dimOf(pos, 0)),
                 b.i64(innerDim(op.getResult())), b.i64(dimOf(pos, 1))});
}
LogicalResult buildCall(nn::MoeCombineGradOp op, KernelCallBuilder &b) {
  Value pos = op.getPositions();
  return b.call("zrt_moe_combine_grad",
                {b.dtype(elemType(op.getRows())), b.operand(0),
                 b.dtype(elemType(pos)), b.operand(1), b.operand(2),
                 b.operand(3), b.result(0), b.result(1), b.i64(dimOf(pos, 0)),
                 b.i64(innerDim(op.getResultGrad())), b.i64(dimOf(pos, 1))});
}
// With counts (zero-moe-aux-counts), a rank's part of the global batch's
// loss: the given counts over `rows`.
LogicalResult buildCall(nn::MoeAuxLossOp op, KernelCallBuilder &b) {
  Value logits = op.getLogits();
  if (op.getCounts())
    return b.call("zrt_moe_aux_loss_counts",
                  {b.dtype(elemType(logits)), b.operand(0), b.operand(1),
                   b.result(0), b.i64(dimOf(logits, 0)),
                   b.i64(dimOf(logits, 1)), b.i64(op.getTopK()),
                   b.i64(*op.getRows())});
  return b.call("zrt_moe_aux_loss",
                {b.dtype(elemType(logits)), b.operand(0), b.result(0),
                 b.i64(dimOf(logits, 0)), b.i64(dimOf(logits, 1)),
                 b.i64(op.getTopK())});
}
int64_t scratchBytes(nn::MoeAuxLossOp op) {
  return zrt_scratch_moe_aux_loss(dimOf(op.getLogits(), 1));
}
KernelCost cost(nn::MoeAuxLossOp op) { return scoreCost(op, op.getLogits()); }
LogicalResult buildCall(nn::MoeAuxLossGradOp op, KernelCallBuilder &b) {
  Value logits = op.getLogits();
  if (op.getCounts())
    return b.call("zrt_moe_aux_loss_counts_grad",
                  {b.dtype(elemType(logits)), b.operand(0), b.operand(2),
                   b.operand(1), b.result(0), b.i64(dimOf(logits, 0)),
                   b.i64(dimOf(logits, 1)), b.i64(op.getTopK()),
                   b.i64(*op.getRows())});
  return b.call("zrt_moe_aux_loss_grad",
                {b.dtype(elemType(logits)), b.operand(0), b.operand(1),
                 b.result(0), b.i64(dimOf(logits, 0)), b.i64(dimOf(logits, 1)),
                 b.i64(op.getTopK())});
}
int64_t scratchBytes(nn::MoeAuxLossGradOp op) {
  return zrt_scratch_moe_aux_loss(dimOf(op.getLogits(), 1));
}
KernelCost cost(nn::MoeAuxLossGradOp op) {
  return scoreCost(op, op.getLogits());
}
LogicalResult buildCall(nn::MoeExpertCountsOp op, KernelCallBuilder &b) {
  Value logits = op.getLogits();
  return b.call("zrt_moe_expert_counts",
                {b.dtype(elemType(logits)), b.operand(0), b.result(0),
                 b.i64(dimOf(logits, 0)), b.i64(dimOf(logits, 1)),
                 b.i64(op.getTopK())});
}
int64_t scratchBytes(nn::MoeExpertCountsOp op) {
  return zrt_scratch_moe_aux_loss(dimOf(op.getLogits(), 1));
}
KernelCost cost(nn::MoeExpertCountsOp op) {
  return scoreCost(op, op.getLogits());
}

} // namespace mlir::zero::kernels
