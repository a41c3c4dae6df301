//===- KernelModelsLoss.cpp - The losses and the tiled MLP ----------------===//
//
// Part of the zero-mlir project.
//
// The runtime kernels of the cross-entropy losses (plain and chunked over
// the output projection), the tiled MLP and the label shift, with their
// scratch and their work for the cost model.
//
//===----------------------------------------------------------------------===//

#include "KernelModels.h"

#include "zero_rt/scratch.h"

using namespace mlir;
using namespace mlir::zero;

namespace mlir::zero::kernels {

LogicalResult buildCall(nn::SoftmaxCrossEntropyOp op, KernelCallBuilder &b) {
  int64_t cols = innerDim(op.getLogits());
  return b.call("zrt_softmax_cross_entropy",
                {b.dtype(elemType(op.getLogits())), b.operand(0),
                 b.dtype(elemType(op.getLabels())), b.operand(1), b.result(0),
                 b.i64(numel(op.getLogits()) / cols), b.i64(op.getNumClasses()),
                 b.i64(cols), b.i32(op.getIgnoreIndex() ? 1 : 0),
                 b.i64(op.getIgnoreIndex().value_or(0))});
}
/// Eager: cross_entropy(logits.float(), labels): the fp32 copy,
/// log_softmax, and nll_loss reading one log-probability a row.
KernelCost cost(nn::SoftmaxCrossEntropyOp op) {
  Value logits = op.getLogits();
  double n = numel(logits), rows = n / innerDim(logits), e = elemBytes(logits),
         f = kEagerFloat;
  EagerKernels k;
  k.convert(n, e, f);
  k.run(n * f, n * f);
  k.run(rows * f + getValueBytes(op.getLabels()), f);
  return k.into(KernelCost::memory(getOperandAndResultBytes(op)));
}
LogicalResult buildCall(nn::SoftmaxCrossEntropyGradOp op,
                        KernelCallBuilder &b) {
  int64_t cols = innerDim(op.getLogits());
  return b.call("zrt_softmax_cross_entropy_grad",
                {b.dtype(elemType(op.getLogits())), b.operand(0),
                 b.dtype(elemType(op.getLabels())), b.operand(1), b.operand(2),
                 b.result(0), b.i64(numel(op.getLogits()) / cols),
                 b.i64(op.getNumClasses()), b.i64(cols),
                 b.i32(op.getIgnoreIndex() ? 1 : 0),
                 b.i64(op.getIgnoreIndex().value_or(0))});
}

/// Eager: nll_loss's backward zeroes an fp32 gradient of the logits and
/// scatters into it at the labels, log_softmax's backward reads it and the
/// saved log-probabilities, and the fp32 copy's backward converts back.
KernelCost cost(nn::SoftmaxCrossEntropyGradOp op) {
  Value logits = op.getLogits();
  double n = numel(logits), rows = n / innerDim(logits), e = elemBytes(logits),
         f = kEagerFloat;
  EagerKernels k;
  k.run(0, n * f);
  k.run(getValueBytes(op.getLabels()) + f, rows * f);
  k.run(2 * n * f, n * f);
  k.convert(n, f, e);
  return k.into(KernelCost::memory(getOperandAndResultBytes(op)));
}

/// The rows, hidden size and vocabulary of a chunked output projection.
struct LinearLossShape {
  int64_t rows, hidden, vocab;
};
template <typename OpT>
LinearLossShape getLinearLossShape(OpT op) {
  int64_t hidden = innerDim(op.getInput());
  return {numel(op.getInput()) / hidden, hidden,
          tensorType(op.getWeight()).getDimSize(0)};
}
LogicalResult buildCall(nn::LinearCrossEntropyOp op, KernelCallBuilder &b) {
  LinearLossShape s = getLinearLossShape(op);
  return b.call("zrt_linear_cross_entropy",
                {b.dtype(elemType(op.getInput())), b.operand(0), b.operand(1),
                 b.dtype(elemType(op.getLabels())), b.operand(2), b.result(0),
                 b.i64(s.rows), b.i64(s.hidden), b.i64(s.vocab),
                 b.i64(op.getChunk()), b.i32(op.getIgnoreIndex() ? 1 : 0),
                 b.i64(op.getIgnoreIndex().value_or(0))});
}
LogicalResult buildCall(nn::LinearCrossEntropyGradOp op, KernelCallBuilder &b) {
  LinearLossShape s = getLinearLossShape(op);
  return b.call("zrt_linear_cross_entropy_grad",
                {b.dtype(elemType(op.getInput())), b.operand(0), b.operand(1),
                 b.dtype(elemType(op.getLabels())), b.operand(2), b.operand(3),
                 b.result(0), b.result(1), b.i64(s.rows), b.i64(s.hidden),
                 b.i64(s.vocab), b.i64(op.getChunk()),
                 b.i32(op.getIgnoreIndex() ? 1 : 0),
                 b.i64(op.getIgnoreIndex().value_or(0))});
}
int64_t scratchBytes(nn::LinearCrossEntropyOp op) {
  LinearLossShape s = getLinearLossShape(op);
  return zrt_scratch_linear_cross_entropy(dtypeCode(elemType(op.getInput())),
                                          s.rows, s.hidden, s.vocab,
                                          op.getChunk(), /*grad=*/0);
}
int64_t scratchBytes(nn::LinearCrossEntropyGradOp op) {
  LinearLossShape s = getLinearLossShape(op);
  return zrt_scratch_linear_cross_entropy(dtypeCode(elemType(op.getInput())),
                                          s.rows, s.hidden, s.vocab,
                                          op.getChunk(), /*grad=*/1);
}
/// The work of an op that runs `flops` of matrix products over its `rows`
/// rows in chunks of `chunkRows` (the chunked loss, the tiled MLP), as its
/// kernels run them: the products shaped as one chunk's [chunkRows, k] x
/// [k, n], `scratchPasses` passes over [rows, n] fp32 scratch, the weight
/// (or a weight of the same size) streamed `weightPasses(chunks)` times in
/// all, of which the op's operands and results count `counted`, and
/// `launches(chunks)` kernels.
KernelCost chunkedGemmCost(Operation *op, Value input, Value weight,
                           int64_t rows, int64_t chunkRows, int64_t n,
                           int64_t k, double flops, int64_t scratchPasses,
                           function_ref<int64_t(int64_t)> weightPasses,
                           int64_t counted,
                           function_ref<int64_t(int64_t)> launches) {
  int64_t chunks = chunkRows > 0 ? llvm::divideCeil(rows, chunkRows) : 0;
  double bytes = getOperandAndResultBytes(op) + scratchPasses * rows * n * 4.0 +
                 double(std::max<int64_t>(weightPasses(chunks) - counted, 0)) *
                     getValueBytes(weight);
  KernelCost c = KernelCost::compute(KernelCost::Kind::Gemm, bytes, flops,
                                     elemType(input));
  c.batch = chunks;
  c.m = chunkRows;
  c.n = n;
  c.k = k;
  c.launches = std::max<int64_t>(launches(chunks), 1);
  return c;
}
/// The chunked loss: each product's chunk of logits is its scratch.
template <typename OpT>
KernelCost linearLossCost(OpT op, int64_t products,
                          function_ref<int64_t(int64_t)> weightPasses,
                          int64_t counted,
                          function_ref<int64_t(int64_t)> launches) {
  LinearLossShape s = getLinearLossShape(op);
  int64_t rows = std::min(static_cast<int64_t>(op.getChunk()), s.rows);
  return chunkedGemmCost(op, op.getInput(), op.getWeight(), s.rows, rows,
                         s.vocab, s.hidden,
                         2.0 * products * s.rows * s.vocab * s.hidden, products,
                         weightPasses, counted, launches);
}
// Forward: each chunk's logits product reads the weight, then its loss
// kernel; the sum at the end. 16-bit logits are half the fp32 scratch.
KernelCost cost(nn::LinearCrossEntropyOp op) {
  KernelCost c = linearLossCost(
      op, /*products=*/1, [](int64_t chunks) { return chunks; },
      /*counted=*/1, [](int64_t chunks) { return 2 * chunks + 1; });
  LinearLossShape s = getLinearLossShape(op);
  if (!elemType(op.getInput()).isF32())
    c.bytes -= 2.0 * s.rows * s.vocab;
  return c;
}
// Backward, after the label count: each chunk's logits again and d hidden
// read the weight, their gradient in place, and d weight is written by the
// first chunk and read and written by the others. 16-bit: the logits are
// 16-bit; the chunk's gradient and rows are converted to fp32 (read 16-bit,
// written and read again in fp32), d weight's sum is the fp32 scratch (the
// result's passes counted at 4 bytes instead of 2), and one last pass
// rounds it into the result (2 launches a chunk and 1 more).
KernelCost cost(nn::LinearCrossEntropyGradOp op) {
  bool wide = elemType(op.getInput()).isF32();
  KernelCost c = linearLossCost(
      op, /*products=*/3, [](int64_t chunks) { return 4 * chunks - 1; },
      /*counted=*/2,
      [wide](int64_t chunks) {
        return wide ? 4 * chunks + 1 : 6 * chunks + 2;
      });
  if (wide)
    return c;
  LinearLossShape s = getLinearLossShape(op);
  double weight = double(s.vocab) * s.hidden;
  double chunks = double(c.batch);
  c.bytes += -3.0 * 2.0 * s.rows * s.vocab                       // logits
             + (2.0 + 4.0 + 4.0) * s.rows * (s.vocab + s.hidden) // to fp32
             + (2.0 * chunks - 1.0) * 2.0 * weight               // fp32 sum
             + (4.0 + 2.0) * weight;                             // rounding
  return c;
}

/// The rows, hidden size and intermediate size of a tiled MLP.
struct TiledMlpShape {
  int64_t rows, hidden, inter;
};
template <typename OpT>
TiledMlpShape getTiledMlpShape(OpT op) {
  int64_t hidden = innerDim(op.getInput());
  return {numel(op.getInput()) / hidden, hidden,
          tensorType(op.getGateWeight()).getDimSize(0)};
}
LogicalResult buildCall(nn::TiledMlpOp op, KernelCallBuilder &b) {
  TiledMlpShape s = getTiledMlpShape(op);
  return b.call("zrt_tiled_mlp",
                {b.dtype(elemType(op.getInput())), b.operand(0), b.operand(1),
                 b.operand(2), b.operand(3), b.result(0), b.i64(s.rows),
                 b.i64(s.hidden), b.i64(s.inter), b.i64(op.getTiles())});
}
LogicalResult buildCall(nn::TiledMlpGradOp op, KernelCallBuilder &b) {
  TiledMlpShape s = getTiledMlpShape(op);
  return b.call("zrt_tiled_mlp_grad",
                {b.dtype(elemType(op.getInput())), b.operand(0), b.operand(1),
                 b.operand(2), b.operand(3), b.operand(4), b.result(0),
                 b.result(1), b.result(2), b.result(3), b.i64(s.rows),
                 b.i64(s.hidden), b.i64(s.inter), b.i64(op.getTiles())});
}
int64_t scratchBytes(nn::TiledMlpOp op) {
  TiledMlpShape s = getTiledMlpShape(op);
  return zrt_scratch_tiled_mlp(s.rows, s.inter, op.getTiles());
}
int64_t scratchBytes(nn::TiledMlpGradOp op) {
  TiledMlpShape s = getTiledMlpShape(op);
  return zrt_scratch_tiled_mlp_grad(s.rows, s.inter, op.getTiles());
}
/// `products` [rows, hidden] x [hidden, inter] products (forward: gate, up,
/// down; backward: gate and up recomputed, as ALST's TiledMLP does, then the
/// activation's gradient, three weight gradients and two input gradients),
/// tile by tile, shaped as one tile's gate, with `passes` passes over the
/// tiles' [rows, inter] fp32 scratch and the three [hidden, inter] weights
/// or their gradients streamed (chunkedGemmCost).
template <typename OpT>
KernelCost tiledMlpCost(OpT op, int64_t products, int64_t passes,
                        function_ref<int64_t(int64_t)> weightPasses,
                        int64_t counted,
                        function_ref<int64_t(int64_t)> launches) {
  TiledMlpShape s = getTiledMlpShape(op);
  int64_t rows = llvm::divideCeil(s.rows, std::max<int64_t>(op.getTiles(), 1));
  return chunkedGemmCost(op, op.getInput(), op.getGateWeight(), s.rows, rows,
                         s.inter, s.hidden,
                         2.0 * products * s.rows * s.hidden * s.inter, passes,
                         weightPasses, counted, launches);
}
// Forward, a tile: the gate, up and down products read their weights, and
// the SwiGLU between them.
KernelCost cost(nn::TiledMlpOp op) {
  return tiledMlpCost(
      op, /*products=*/3, /*passes=*/6, [](int64_t tiles) { return 3 * tiles; },
      /*counted=*/3, [](int64_t tiles) { return 4 * tiles; });
}
// Backward, a tile: gate and up again, the SwiGLU, d down, d activation,
// the SwiGLU's gradient, d gate, d up and the two halves of d input; the
// gate and up weights are read twice and the down weight once, and each
// weight gradient is written by the first tile and read and written by the
// others.
KernelCost cost(nn::TiledMlpGradOp op) {
  return tiledMlpCost(
      op, /*products=*/8, /*passes=*/16,
      [](int64_t tiles) { return 5 * tiles + 6 * tiles - 3; }, /*counted=*/6,
      [](int64_t tiles) { return 10 * tiles; });
}

LogicalResult buildCall(nn::ShiftLabelsOp op, KernelCallBuilder &b) {
  int64_t cols = innerDim(op.getLabels());
  return b.call("zrt_shift_labels",
                {b.dtype(elemType(op.getLabels())), b.operand(0), b.result(0),
                 b.i64(cols ? numel(op.getLabels()) / cols : 0), b.i64(cols),
                 b.i64(op.getFill())});
}

LogicalResult buildCall(nn::DocumentIdsOp op, KernelCallBuilder &b) {
  auto shape = tensorType(op.getPositions()).getShape();
  return b.call("zrt_document_ids",
                {b.dtype(elemType(op.getPositions())), b.operand(0),
                 b.result(0), b.i64(shape[0]), b.i64(shape[1])});
}

} // namespace mlir::zero::kernels
