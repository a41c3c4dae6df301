//===- KernelModels.cpp - The runtime kernel of each compute op -----------===//
//
// Part of the zero-mlir project.
//
// One RuntimeKernelOpInterface model per compute op: the zrt_* kernel that
// computes it with its arguments, the kernel's heap scratch (zero_rt/
// scratch.h, which the runtime allocates by) and its work for the cost
// model. The lowering, the memory planner and the cost model read these and
// nothing else about compute ops.
//
//===----------------------------------------------------------------------===//

#include "zero/Conversion/ZeroToRuntime.h"

#include "zero/Dialect/NN/IR/NNDialect.h"
#include "zero/Dialect/Zero/IR/ZeroDialect.h"

#include "KernelModels.h"

#include "zero_rt/scratch.h"
#include "zero_rt/zrt.h"

#include <cmath>

using namespace mlir;
using namespace mlir::zero;
using namespace mlir::zero::kernels;

namespace mlir::zero::kernels {

//===----------------------------------------------------------------------===//
// Per-op models. Each op gets a `buildCall`; `scratchBytes` and `cost`
// default to none and to one pass over the operands and results. Pointwise
// ops need none of these: they are listed in registerRuntimeKernelModels
// (PointwiseModel).
//===----------------------------------------------------------------------===//

/// A kernel over `n` elements: (dtype, in..., out..., n).
LogicalResult pointwise(KernelCallBuilder &b, StringRef callee, Value typed,
                        unsigned numInputs) {
  SmallVector<Value> args{b.dtype(elemType(typed))};
  for (unsigned i = 0; i < numInputs; ++i)
    args.push_back(b.operand(i));
  args.push_back(b.result(0));
  args.push_back(b.i64(numel(typed)));
  return b.call(callee, args);
}

/// A kernel over the rows of the last dimension of the first operand:
/// (dtype, operands..., results..., rows, cols[, eps]).
LogicalResult rowwise(KernelCallBuilder &b, StringRef callee, Operation *op,
                      std::optional<APFloat> eps = std::nullopt) {
  Value typed = op->getOperand(0);
  int64_t cols = innerDim(typed);
  SmallVector<Value> args{b.dtype(elemType(typed))};
  llvm::append_range(args, b.operands());
  llvm::append_range(args, b.results());
  args.push_back(b.i64(numel(typed) / cols));
  args.push_back(b.i64(cols));
  if (eps)
    args.push_back(b.f64(eps->convertToDouble()));
  return b.call(callee, args);
}

// Matmul.

struct MatmulShape {
  int64_t batch, m, n, k;
  bool rhsBatched;
};
MatmulShape getMatmulShape(nn::MatmulOp op) {
  auto a = tensorType(op.getLhs()), w = tensorType(op.getRhs());
  int64_t r = a.getRank();
  MatmulShape s;
  s.m = a.getDimSize(r - 2);
  s.k = a.getDimSize(r - 1);
  s.batch = a.getNumElements() / (s.m * s.k);
  if (op.getTransposeLhs())
    std::swap(s.m, s.k);
  s.n = op.getTransposeRhs() ? w.getShape()[w.getRank() - 2]
                             : w.getShape().back();
  s.rhsBatched = w.getRank() == r;
  return s;
}
LogicalResult buildCall(nn::MatmulOp op, KernelCallBuilder &b) {
  MatmulShape s = getMatmulShape(op);
  return b.call("zrt_matmul",
                {b.dtype(elemType(op.getLhs())), b.operand(0), b.operand(1),
                 b.result(0), b.i64(s.batch), b.i64(s.m), b.i64(s.n),
                 b.i64(s.k), b.i32(op.getTransposeLhs()),
                 b.i32(op.getTransposeRhs()), b.i32(s.rhsBatched),
                 b.i64(op.getContract().value_or(s.k))});
}
int64_t scratchBytes(nn::MatmulOp op) {
  MatmulShape s = getMatmulShape(op);
  return zrt_scratch_matmul(dtypeCode(elemType(op.getLhs())), s.batch, s.m, s.n,
                            s.k, op.getTransposeLhs(), s.rhsBatched);
}
KernelCost cost(nn::MatmulOp op) {
  auto lhs = tensorType(op.getLhs());
  int64_t rank = lhs.getRank();
  int64_t k = lhs.getDimSize(op.getTransposeLhs() ? rank - 2 : rank - 1);
  // A contraction over padding sums its first `contract` entries only.
  k = op.getContract().value_or(k);
  // The result holds batch * M * N elements.
  double flops = 2.0 * numel(op.getResult()) * k;
  KernelCost c =
      KernelCost::compute(KernelCost::Kind::Gemm, getOperandAndResultBytes(op),
                          flops, lhs.getElementType());
  MatmulShape s = getMatmulShape(op);
  c.batch = s.batch;
  c.m = s.m;
  c.n = s.n;
  c.k = s.k;
  return c;
}

// Elementwise.

LogicalResult broadcastBinary(KernelCallBuilder &b, StringRef callee, Value lhs,
                              Value rhs) {
  return b.call(callee, {b.dtype(elemType(lhs)), b.operand(0), b.operand(1),
                         b.result(0), b.i64(numel(lhs)), b.i64(numel(rhs))});
}
LogicalResult buildCall(nn::AddOp op, KernelCallBuilder &b) {
  return broadcastBinary(b, "zrt_add", op.getLhs(), op.getRhs());
}
LogicalResult buildCall(nn::MulOp op, KernelCallBuilder &b) {
  return broadcastBinary(b, "zrt_mul", op.getLhs(), op.getRhs());
}
LogicalResult buildCall(nn::ScaleOp op, KernelCallBuilder &b) {
  return b.call("zrt_scale", {b.dtype(elemType(op.getInput())), b.operand(0),
                              b.result(0), b.i64(numel(op.getInput())),
                              b.f64(op.getFactor().convertToDouble())});
}

/// GELU, SiLU, tanh and their derivatives are compute-bound (an exponential
/// per element).
KernelCost activationCost(Operation *op) {
  return KernelCost::activation(getOperandAndResultBytes(op),
                                numel(op->getResult(0)));
}
/// The bias is broadcast as zrt_add's rhs: (dtype, x, bias[, dy], out, n,
/// bias_n).
LogicalResult buildCall(nn::BiasGeluOp op, KernelCallBuilder &b) {
  return b.call("zrt_bias_gelu",
                {b.dtype(elemType(op.getInput())), b.operand(0), b.operand(1),
                 b.result(0), b.i64(numel(op.getInput())),
                 b.i64(numel(op.getBias()))});
}
KernelCost cost(nn::BiasGeluOp op) { return activationCost(op); }
LogicalResult buildCall(nn::BiasGeluGradOp op, KernelCallBuilder &b) {
  return b.call("zrt_bias_gelu_grad",
                {b.dtype(elemType(op.getInput())), b.operand(0), b.operand(1),
                 b.operand(2), b.result(0), b.i64(numel(op.getInput())),
                 b.i64(numel(op.getBias()))});
}
KernelCost cost(nn::BiasGeluGradOp op) { return activationCost(op); }
LogicalResult buildCall(nn::SwigluGradOp op, KernelCallBuilder &b) {
  return b.call("zrt_swiglu_grad",
                {b.dtype(elemType(op.getGate())), b.operand(0), b.operand(1),
                 b.operand(2), b.result(0), b.result(1),
                 b.i64(numel(op.getGate()))});
}
/// Eager: silu(gate), then * up.
LogicalResult buildCall(nn::SwigluOp op, KernelCallBuilder &b) {
  return pointwise(b, "zrt_swiglu", op.getGate(), /*numInputs=*/2);
}
KernelCost cost(nn::SwigluOp op) {
  double n = numel(op.getGate()), e = elemBytes(op.getGate());
  EagerKernels k;
  k.run(n * e, n * e);
  k.run(2 * n * e, n * e);
  return k.into(activationCost(op));
}
/// Eager: the backward of silu(gate) * up: d silu = dy * up, d up =
/// dy * silu(gate) (autograd saved the product's operands), and
/// silu_backward(d silu, gate).
KernelCost cost(nn::SwigluGradOp op) {
  double n = numel(op.getGate()), e = elemBytes(op.getGate());
  EagerKernels k;
  for (int i = 0; i < 3; ++i)
    k.run(2 * n * e, n * e);
  return k.into(activationCost(op));
}
LogicalResult buildCall(nn::ClampedSwigluOp op, KernelCallBuilder &b) {
  return b.call("zrt_clamped_swiglu",
                {b.dtype(elemType(op.getGate())), b.operand(0), b.operand(1),
                 b.result(0), b.i64(numel(op.getGate())),
                 b.f64(op.getAlpha().convertToDouble()),
                 b.f64(op.getLimit().convertToDouble())});
}
KernelCost cost(nn::ClampedSwigluOp op) { return activationCost(op); }
LogicalResult buildCall(nn::ClampedSwigluGradOp op, KernelCallBuilder &b) {
  return b.call("zrt_clamped_swiglu_grad",
                {b.dtype(elemType(op.getGate())), b.operand(0), b.operand(1),
                 b.operand(2), b.result(0), b.result(1),
                 b.i64(numel(op.getGate())),
                 b.f64(op.getAlpha().convertToDouble()),
                 b.f64(op.getLimit().convertToDouble())});
}
KernelCost cost(nn::ClampedSwigluGradOp op) { return activationCost(op); }
LogicalResult buildCall(nn::SoftmaxOp op, KernelCallBuilder &b) {
  return rowwise(b, "zrt_softmax", op);
}
LogicalResult buildCall(nn::SoftmaxGradOp op, KernelCallBuilder &b) {
  return rowwise(b, "zrt_softmax_grad", op);
}
LogicalResult buildCall(nn::SoftplusOp op, KernelCallBuilder &b) {
  return b.call("zrt_softplus", {b.dtype(elemType(op.getInput())), b.operand(0),
                                 b.result(0), b.i64(numel(op.getInput())),
                                 b.f64(op.getBeta().convertToDouble()),
                                 b.f64(op.getThreshold().convertToDouble())});
}
KernelCost cost(nn::SoftplusOp op) { return activationCost(op); }
LogicalResult buildCall(nn::SoftplusGradOp op, KernelCallBuilder &b) {
  return b.call("zrt_softplus_grad",
                {b.dtype(elemType(op.getInput())), b.operand(0), b.operand(1),
                 b.result(0), b.i64(numel(op.getInput())),
                 b.f64(op.getBeta().convertToDouble()),
                 b.f64(op.getThreshold().convertToDouble())});
}
KernelCost cost(nn::SoftplusGradOp op) { return activationCost(op); }
LogicalResult buildCall(nn::XieluOp op, KernelCallBuilder &b) {
  return b.call("zrt_xielu",
                {b.dtype(elemType(op.getInput())), b.operand(0), b.operand(1),
                 b.operand(2), b.result(0), b.i64(numel(op.getInput())),
                 b.f64(op.getBeta().convertToDouble()),
                 b.f64(op.getEps().convertToDouble())});
}
KernelCost cost(nn::XieluOp op) { return activationCost(op); }
LogicalResult buildCall(nn::XieluGradOp op, KernelCallBuilder &b) {
  return b.call("zrt_xielu_grad",
                {b.dtype(elemType(op.getInput())), b.operand(0), b.operand(1),
                 b.operand(2), b.operand(3), b.result(0), b.result(1),
                 b.result(2), b.i64(numel(op.getInput())),
                 b.f64(op.getBeta().convertToDouble()),
                 b.f64(op.getEps().convertToDouble())});
}
KernelCost cost(nn::XieluGradOp op) { return activationCost(op); }
// Reinforcement learning's ops (nn.minimum, nn.maximum and nn.where are
// pointwise, listed below).
/// A bound left out as an infinite one, which always holds.
double clampBound(std::optional<APFloat> bound, double none) {
  return bound ? bound->convertToDouble() : none;
}
LogicalResult buildCall(nn::ClampOp op, KernelCallBuilder &b) {
  return b.call("zrt_clamp", {b.dtype(elemType(op.getInput())), b.operand(0),
                              b.result(0), b.i64(numel(op.getInput())),
                              b.f64(clampBound(op.getMin(), -INFINITY)),
                              b.f64(clampBound(op.getMax(), INFINITY))});
}
LogicalResult buildCall(nn::ClampGradOp op, KernelCallBuilder &b) {
  return b.call("zrt_clamp_grad",
                {b.dtype(elemType(op.getInput())), b.operand(0), b.operand(1),
                 b.result(0), b.i64(numel(op.getInput())),
                 b.f64(clampBound(op.getMin(), -INFINITY)),
                 b.f64(clampBound(op.getMax(), INFINITY))});
}
/// (dtype, operands..., both results, n) of a two-result pointwise kernel.
LogicalResult pointwise2(KernelCallBuilder &b, StringRef callee, Value typed) {
  SmallVector<Value> args{b.dtype(elemType(typed))};
  llvm::append_range(args, b.operands());
  llvm::append_range(args, b.results());
  args.push_back(b.i64(numel(typed)));
  return b.call(callee, args);
}
LogicalResult buildCall(nn::MinimumGradOp op, KernelCallBuilder &b) {
  return pointwise2(b, "zrt_minimum_grad", op.getLhs());
}
LogicalResult buildCall(nn::MaximumGradOp op, KernelCallBuilder &b) {
  return pointwise2(b, "zrt_maximum_grad", op.getLhs());
}
LogicalResult buildCall(nn::WhereGradOp op, KernelCallBuilder &b) {
  return pointwise2(b, "zrt_where_grad", op.getCondition());
}
/// Over the rows of x [rows, cols] and of the indices [rows, k]: (dtype, x,
/// index_type, indices, result, rows, cols, k).
LogicalResult buildCall(nn::GatherOp op, KernelCallBuilder &b) {
  int64_t cols = innerDim(op.getInput()), rows = numel(op.getInput()) / cols;
  return b.call("zrt_gather", {b.dtype(elemType(op.getInput())), b.operand(0),
                               b.dtype(elemType(op.getIndices())), b.operand(1),
                               b.result(0), b.i64(rows), b.i64(cols),
                               b.i64(numel(op.getIndices()) / rows)});
}
LogicalResult buildCall(nn::GatherGradOp op, KernelCallBuilder &b) {
  int64_t cols = innerDim(op.getResult()), rows = numel(op.getResult()) / cols;
  return b.call("zrt_gather_grad",
                {b.dtype(elemType(op.getResult())),
                 b.dtype(elemType(op.getIndices())), b.operand(0), b.operand(1),
                 b.result(0), b.i64(rows), b.i64(cols),
                 b.i64(numel(op.getIndices()) / rows)});
}
// The reductions over the last dimension: (dtype, operands..., result, rows,
// cols) over the rows of the input.
LogicalResult buildCall(nn::LogsumexpOp op, KernelCallBuilder &b) {
  return rowwise(b, "zrt_logsumexp", op);
}
/// An exponential per input element, forward and backward.
KernelCost cost(nn::LogsumexpOp op) {
  return KernelCost::activation(getOperandAndResultBytes(op),
                                numel(op.getInput()));
}
LogicalResult buildCall(nn::LogsumexpGradOp op, KernelCallBuilder &b) {
  return rowwise(b, "zrt_logsumexp_grad", op);
}
KernelCost cost(nn::LogsumexpGradOp op) { return activationCost(op); }
LogicalResult buildCall(nn::ReduceMaxOp op, KernelCallBuilder &b) {
  return rowwise(b, "zrt_reduce_max", op);
}
LogicalResult buildCall(nn::ReduceMaxGradOp op, KernelCallBuilder &b) {
  return rowwise(b, "zrt_reduce_max_grad", op);
}
/// The default cost, one pass over the input and the result, holds: the
/// kernel computes the cosines and sines once per position and pair, not per
/// element. A table of frequencies is a constant of the program.
LogicalResult buildCall(nn::RopeOp op, KernelCallBuilder &b) {
  ArrayRef<int64_t> sh = tensorType(op.getInput()).getShape();
  SmallVector<float> table = op.getInvFreqValues();
  SmallVector<Value> args = {
      b.dtype(elemType(op.getInput())),
      b.operand(0),
      b.result(0),
      b.i64(sh[0]),
      b.i64(sh[1]),
      b.i64(sh[2]),
      b.i64(sh[3]),
      b.f64(op.getTheta() ? op.getTheta()->convertToDouble() : 0.0),
      b.i32(op.getInverse()),
      b.i32(op.getInterleaved()),
      op.getInvFreq() ? b.f32Array(table) : b.nullPtr(),
      b.f64(op.getScaleOrOne())};
  // A packed row's positions: the kernel that reads them.
  if (Value positions = op.getPositions()) {
    args.push_back(b.dtype(elemType(positions)));
    args.push_back(b.operand(1));
    return b.call("zrt_rope_positions", args);
  }
  return b.call("zrt_rope", args);
}
/// Eager: the pairs as complex numbers of an fp32 copy times a table of
/// T x D/2 complex64 rotations, and a copy back to the input's type. The
/// backward (`inverse`) is the same three kernels: the gradient converted,
/// times the conjugate rotations, converted back.
KernelCost cost(nn::RopeOp op) {
  auto type = tensorType(op.getInput());
  double n = type.getNumElements(), e = elemBytes(op.getInput());
  double table = double(type.getDimSize(2)) * type.getDimSize(3) * kEagerFloat;
  EagerKernels k;
  k.convert(n, e, kEagerFloat);
  k.run(n * kEagerFloat + table, n * kEagerFloat);
  k.convert(n, kEagerFloat, e);
  return k.into(KernelCost::memory(getOperandAndResultBytes(op)));
}

// Casts and fills.

LogicalResult buildCast(KernelCallBuilder &b, Value in, Value out) {
  return b.call("zrt_cast",
                {b.dtype(elemType(in)), b.operand(0), b.dtype(elemType(out)),
                 b.result(0), b.i64(numel(in))});
}
LogicalResult buildCall(nn::CastOp op, KernelCallBuilder &b) {
  return buildCast(b, op.getInput(), op.getResult());
}
LogicalResult buildCall(zero::CastOp op, KernelCallBuilder &b) {
  return buildCast(b, op.getInput(), op.getResult());
}
LogicalResult buildCall(nn::FillOp op, KernelCallBuilder &b) {
  return b.call("zrt_fill", {b.dtype(elemType(op.getResult())), b.result(0),
                             b.i64(numel(op.getResult())),
                             b.f64(op.getValue().convertToDouble())});
}

// Normalization.

LogicalResult buildCall(nn::LayerNormOp op, KernelCallBuilder &b) {
  return rowwise(b, "zrt_layer_norm", op, op.getEps());
}
LogicalResult buildCall(nn::LayerNormGradOp op, KernelCallBuilder &b) {
  return rowwise(b, "zrt_layer_norm_grad", op, op.getEps());
}
int64_t scratchBytes(nn::LayerNormGradOp op) {
  int64_t cols = innerDim(op.getInput());
  return zrt_scratch_layer_norm_grad(numel(op.getInput()) / cols, cols);
}
KernelCost cost(nn::LayerNormGradOp op) { return activationCost(op); }
LogicalResult buildCall(nn::RmsNormOp op, KernelCallBuilder &b) {
  return rowwise(b, "zrt_rms_norm", op, op.getEps());
}
/// Eager: x.float(), pow(2), mean(-1), + eps, rsqrt, x * rsqrt, type_as(x)
/// and * weight, the row statistics over [rows, 1].
KernelCost cost(nn::RmsNormOp op) {
  Value x = op.getInput();
  double n = numel(x), d = innerDim(x), rows = n / d, e = elemBytes(x),
         we = elemBytes(op.getWeight()), f = kEagerFloat;
  EagerKernels k;
  k.convert(n, e, f);
  k.run(n * f, n * f);
  k.run(n * f, rows * f);
  k.run(rows * f, rows * f);
  k.run(rows * f, rows * f);
  k.run(n * f + rows * f, n * f);
  k.convert(n, f, e);
  k.run(n * e + d * we, n * e);
  return k.into(KernelCost::memory(getOperandAndResultBytes(op)));
}
LogicalResult buildCall(nn::RmsNormGradOp op, KernelCallBuilder &b) {
  return rowwise(b, "zrt_rms_norm_grad", op, op.getEps());
}
int64_t scratchBytes(nn::RmsNormGradOp op) {
  int64_t cols = innerDim(op.getInput());
  return zrt_scratch_rms_norm_grad(numel(op.getInput()) / cols, cols);
}
/// Like the layer-norm backward: a row pass for dx and a column pass for dw.
/// Eager: autograd's backward of the forward's chain (see cost(RmsNormOp)),
/// last op first.
KernelCost cost(nn::RmsNormGradOp op) {
  Value x = op.getInput();
  double n = numel(x), d = innerDim(x), rows = n / d, e = elemBytes(x),
         we = elemBytes(op.getWeight()), f = kEagerFloat;
  EagerKernels k;
  // * weight: dy * weight, and dy * normed summed over the rows for dw.
  k.run(n * e + d * we, n * e);
  k.run(2 * n * e, n * e);
  k.run(n * e, d * we);
  k.convert(n, e, f);
  // x * rsqrt: g * rsqrt, and g * x summed over the row.
  k.run(n * f + rows * f, n * f);
  k.run(2 * n * f, n * f);
  k.run(n * f, rows * f);
  // rsqrt: -0.5 * g * result.pow(3).
  k.run(rows * f, rows * f);
  k.run(rows * f, rows * f);
  k.run(2 * rows * f, rows * f);
  // mean: g expanded over the row, / d.
  k.run(rows * f, n * f);
  // pow(2): g * (2 * x.pow(1)), pow(1) a copy.
  k.run(n * f, n * f);
  k.run(n * f, n * f);
  k.run(2 * n * f, n * f);
  // The two gradients of the fp32 copy summed, converted back.
  k.run(2 * n * f, n * f);
  k.convert(n, f, e);
  return k.into(activationCost(op));
}

// Attention.

/// QK^T and PV: 2 * (2 B H T T D) over the query heads, whatever the
/// number of key/value heads they share; a causal mask skips half, a
/// sliding window of W < T keys all but W (T - W) + W^2 / 2 of the T^2
/// (the causal count at W = T). ALiBi's add per score is left out: one
/// flop beside the 4 * head_dim of the two products.
double attentionFlops(Value query, bool causal,
                      std::optional<uint64_t> window = std::nullopt) {
  auto q = tensorType(query);
  int64_t t = q.getDimSize(2);
  double flops = 4.0 * q.getNumElements() * t;
  if (window && int64_t(*window) < t) {
    double w = double(int64_t(*window));
    return flops * (w * (t - w) + w * w / 2) / (double(t) * t);
  }
  return causal ? flops / 2 : flops;
}
/// The cost of a fused attention kernel whose query is `query`.
KernelCost attentionCost(Operation *op, Value query, bool causal,
                         std::optional<uint64_t> window, bool backward,
                         bool documents) {
  // Recomputing QK^T and computing dV, dP, dQ, dK is ~2.5x the forward.
  double flops = attentionFlops(query, causal, window) * (backward ? 2.5 : 1);
  KernelCost c =
      KernelCost::compute(KernelCost::Kind::Attention,
                          getOperandAndResultBytes(op), flops, elemType(query));
  auto q = tensorType(query);
  c.seqLen = q.getDimSize(2);
  c.headDim = q.getDimSize(3);
  c.causal = causal || (window && int64_t(*window) < c.seqLen);
  c.backward = backward;
  c.documents = documents;
  c.window = int64_t(window.value_or(0));
  return c;
}
/// The zrt_attention_desc of an attention with query `query` and key `key`
/// (zero_rt/attention.def, field by field): its shape, knobs and the sinks
/// (null without them).
FailureOr<Value> attentionDesc(KernelCallBuilder &b, Value query, Value key,
                               bool causal, double scale,
                               std::optional<uint64_t> window,
                               std::optional<APFloat> softcap,
                               std::optional<ArrayRef<float>> alibi,
                               Value sinks, Value segments) {
  ArrayRef<int64_t> q = tensorType(query).getShape();
  return b.record(
      "zrt_attention_desc",
      {b.dtype(elemType(query)), b.i32(causal), b.i64(q[0]), b.i64(q[1]),
       b.i64(tensorType(key).getDimSize(1)), b.i64(q[2]), b.i64(q[3]),
       b.f64(scale), b.i64(window.value_or(0)),
       b.f64(softcap ? softcap->convertToDouble() : 0.0),
       b.f32Array(alibi.value_or(ArrayRef<float>())),
       sinks ? sinks : b.nullPtr(), segments ? segments : b.nullPtr()});
}
/// The lowered pointer of an attention op's optional operand, or null.
Value optionalOperand(KernelCallBuilder &b, MutableOperandRange operand) {
  return operand.empty() ? Value() : b.operand(operand[0].getOperandNumber());
}
LogicalResult buildCall(nn::AttentionOp op, KernelCallBuilder &b) {
  FailureOr<Value> desc =
      attentionDesc(b, op.getQuery(), op.getKey(), op.getCausal(),
                    op.getScaleValue(), op.getWindow(), op.getSoftcap(),
                    op.getAlibi(), optionalOperand(b, op.getSinksMutable()),
                    optionalOperand(b, op.getSegmentsMutable()));
  if (failed(desc))
    return failure();
  return b.call("zrt_attention_forward",
                {*desc, b.operand(0), b.operand(1), b.operand(2), b.result(0)});
}
KernelCost cost(nn::AttentionOp op) {
  return attentionCost(op, op.getQuery(), op.getCausal(), op.getWindow(),
                       /*backward=*/false, bool(op.getSegments()));
}
LogicalResult buildCall(nn::AttentionGradOp op, KernelCallBuilder &b) {
  FailureOr<Value> desc = attentionDesc(
      b, op.getQuery(), op.getKey(), op.getCausal(),
      op.getScale().convertToDouble(), op.getWindow(), op.getSoftcap(),
      op.getAlibi(), optionalOperand(b, op.getSinksMutable()),
      optionalOperand(b, op.getSegmentsMutable()));
  if (failed(desc))
    return failure();
  return b.call("zrt_attention_backward",
                {*desc, b.operand(0), b.operand(1), b.operand(2), b.operand(3),
                 b.operand(4), b.result(0), b.result(1), b.result(2)});
}
int64_t scratchBytes(nn::AttentionGradOp op) {
  // The sinks' kernels recompute the scores rather than keep any.
  if (op.getSinks())
    return 0;
  // One log-sum-exp and delta per query row; a group's dK and dV sums need
  // none (one block owns each key tile of a key/value head).
  ArrayRef<int64_t> s = tensorType(op.getQuery()).getShape();
  return zrt_scratch_attention_grad(s[0], s[1], s[2], s[3]);
}
KernelCost cost(nn::AttentionGradOp op) {
  return attentionCost(op, op.getQuery(), op.getCausal(), op.getWindow(),
                       /*backward=*/true, bool(op.getSegments()));
}
/// (desc, q, k, o, do, dsinks); the sinks (operand 2) in the descriptor.
LogicalResult buildCall(nn::AttentionSinksGradOp op, KernelCallBuilder &b) {
  FailureOr<Value> desc = attentionDesc(
      b, op.getQuery(), op.getKey(), op.getCausal(),
      op.getScale().convertToDouble(), op.getWindow(), std::nullopt,
      std::nullopt, b.operand(2), optionalOperand(b, op.getSegmentsMutable()));
  if (failed(desc))
    return failure();
  return b.call("zrt_attention_dsinks",
                {*desc, b.operand(0), b.operand(1), b.operand(3), b.operand(4),
                 b.result(0)});
}
KernelCost cost(nn::AttentionSinksGradOp op) {
  // The scores again (QK^T, half the forward's products) and a dot per row.
  return attentionCost(op, op.getQuery(), op.getCausal(), op.getWindow(),
                       /*backward=*/false, bool(op.getSegments()));
}

// Embedding and loss.

LogicalResult buildCall(nn::EmbeddingOp op, KernelCallBuilder &b) {
  auto t = tensorType(op.getTable());
  return b.call("zrt_embedding",
                {b.dtype(elemType(op.getTable())), b.operand(0),
                 b.dtype(elemType(op.getIds())), b.operand(1), b.result(0),
                 b.i64(numel(op.getIds())),
                 // Padding rows are out of range for the ids.
                 b.i64(op.getRows().value_or(t.getDimSize(0))),
                 b.i64(t.getDimSize(1))});
}
KernelCost cost(nn::EmbeddingOp op) {
  // Reads only the looked-up rows of the table.
  return KernelCost::memory(getValueBytes(op.getIds()) +
                            2 * getValueBytes(op.getResult()));
}
LogicalResult buildCall(nn::EmbeddingGradOp op, KernelCallBuilder &b) {
  auto t = tensorType(op.getResult());
  return b.call("zrt_embedding_grad",
                {b.dtype(elemType(op.getResult())), b.operand(0),
                 b.dtype(elemType(op.getIds())), b.operand(1), b.result(0),
                 b.i64(numel(op.getIds())), b.i64(t.getDimSize(0)),
                 b.i64(t.getDimSize(1)),
                 b.i64(op.getPaddingIdx().value_or(-1))});
}
int64_t scratchBytes(nn::EmbeddingGradOp op) {
  auto t = tensorType(op.getResult());
  return zrt_scratch_embedding_grad(numel(op.getIds()), t.getDimSize(0),
                                    t.getDimSize(1));
}
// Reductions and layout.

LogicalResult buildCall(nn::ReduceSumOp op, KernelCallBuilder &b) {
  int64_t cols = numel(op.getResult());
  return b.call("zrt_reduce_sum",
                {b.dtype(elemType(op.getInput())), b.operand(0), b.result(0),
                 b.i64(numel(op.getInput()) / cols), b.i64(cols)});
}
/// The broadcast back as zrt_add's: zeros plus the gradient repeated.
LogicalResult buildCall(nn::ReduceSumGradOp op, KernelCallBuilder &b) {
  Value dtype = b.dtype(elemType(op.getInput()));
  int64_t n = numel(op.getInput());
  if (failed(b.call("zrt_fill", {dtype, b.result(0), b.i64(n), b.f64(0.0)})))
    return failure();
  return b.call("zrt_add", {dtype, b.result(0), b.operand(1), b.result(0),
                            b.i64(n), b.i64(numel(op.getResultGrad()))});
}
LogicalResult buildCall(nn::TransposeOp op, KernelCallBuilder &b) {
  auto t = tensorType(op.getInput());
  return b.call("zrt_transpose",
                {b.dtype(elemType(op.getInput())), b.operand(0), b.result(0),
                 b.i32(t.getRank()), b.i64Array(t.getShape()),
                 b.i64Array(op.getPermutation())});
}
/// The [outer, axis, inner] view of `full` around `axis`.
std::pair<int64_t, int64_t> outerInner(Value full, int64_t axis) {
  auto t = tensorType(full);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= t.getDimSize(d);
  for (int64_t d = axis + 1; d < t.getRank(); ++d)
    inner *= t.getDimSize(d);
  return {outer, inner};
}
LogicalResult buildCall(nn::SplitOp op, KernelCallBuilder &b) {
  int64_t axis = op.getAxis();
  auto [outer, inner] = outerInner(op.getInput(), axis);
  SmallVector<int64_t> sizes;
  for (Value r : op.getResults())
    sizes.push_back(tensorType(r).getDimSize(axis));
  return b.call("zrt_split", {b.dtype(elemType(op.getInput())), b.operand(0),
                              b.ptrArray(b.results()), b.i64Array(sizes),
                              b.i32(sizes.size()), b.i64(outer), b.i64(inner)});
}
LogicalResult buildCall(nn::ConcatOp op, KernelCallBuilder &b) {
  int64_t axis = op.getAxis();
  auto [outer, inner] = outerInner(op.getResult(), axis);
  SmallVector<int64_t> sizes;
  for (Value v : op.getInputs())
    sizes.push_back(tensorType(v).getDimSize(axis));
  return b.call("zrt_concat",
                {b.dtype(elemType(op.getResult())), b.ptrArray(b.operands()),
                 b.i64Array(sizes), b.i32(sizes.size()), b.result(0),
                 b.i64(outer), b.i64(inner)});
}

//===----------------------------------------------------------------------===//
// Registration
//===----------------------------------------------------------------------===//

template <typename OpT>
struct KernelModel
    : public RuntimeKernelOpInterface::ExternalModel<KernelModel<OpT>, OpT> {
  LogicalResult buildKernelCall(Operation *op,
                                KernelCallBuilder &builder) const {
    return buildCall(cast<OpT>(op), builder);
  }
  int64_t getKernelScratchBytes(Operation *op) const {
    return scratchBytes(cast<OpT>(op));
  }
  KernelCost getKernelCost(Operation *op) const { return cost(cast<OpT>(op)); }
};

template <typename... OpTs>
void attach(MLIRContext *context) {
  (OpTs::template attachInterface<KernelModel<OpTs>>(*context), ...);
}

/// What a pointwise kernel costs: one pass over its operands and result, or
/// compute-bound (activationCost).
enum class PointwiseCost { Memory, Activation };

/// A pointwise op, one result of its first operand's type, computed by the
/// kernel `zrt_<mnemonic>(dtype, operands..., result, n)` over its n
/// elements with no scratch.
template <typename OpT, PointwiseCost Cost>
struct PointwiseModel
    : public RuntimeKernelOpInterface::ExternalModel<PointwiseModel<OpT, Cost>,
                                                     OpT> {
  LogicalResult buildKernelCall(Operation *op,
                                KernelCallBuilder &builder) const {
    std::string callee = ("zrt_" + op->getName().stripDialect()).str();
    return pointwise(builder, callee, op->getOperand(0), op->getNumOperands());
  }
  int64_t getKernelScratchBytes(Operation *) const { return 0; }
  KernelCost getKernelCost(Operation *op) const {
    if (Cost == PointwiseCost::Activation)
      return activationCost(op);
    return KernelCost::memory(getOperandAndResultBytes(op));
  }
};

template <PointwiseCost Cost, typename... OpTs>
void attachPointwise(MLIRContext *context) {
  (OpTs::template attachInterface<PointwiseModel<OpTs, Cost>>(*context), ...);
}

} // namespace mlir::zero::kernels

void mlir::zero::registerRuntimeKernelModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *context, nn::NNDialect *) {
    attach<
        nn::MatmulOp, nn::AddOp, nn::MulOp, nn::ScaleOp, nn::BiasGeluOp,
        nn::BiasGeluGradOp, nn::SwigluOp, nn::SwigluGradOp, nn::SoftmaxOp,
        nn::SoftmaxGradOp, nn::RopeOp, nn::CastOp, nn::FillOp, nn::LayerNormOp,
        nn::LayerNormGradOp, nn::RmsNormOp, nn::RmsNormGradOp, nn::AttentionOp,
        nn::AttentionGradOp, nn::EmbeddingOp, nn::EmbeddingGradOp,
        nn::SoftmaxCrossEntropyOp, nn::SoftmaxCrossEntropyGradOp,
        nn::LinearCrossEntropyOp, nn::LinearCrossEntropyGradOp, nn::TiledMlpOp,
        nn::TiledMlpGradOp, nn::ShiftLabelsOp, nn::DocumentIdsOp,
        nn::ReduceSumOp, nn::ReduceSumGradOp, nn::TransposeOp, nn::SplitOp,
        nn::ConcatOp, nn::MoeRouterOp, nn::MoeRouterGradOp, nn::MoeDispatchOp,
        nn::MoeDispatchGradOp, nn::GroupedMatmulOp,
        nn::GroupedMatmulWeightGradOp, nn::MoeCombineOp, nn::MoeCombineGradOp,
        nn::MoeAuxLossOp, nn::MoeAuxLossGradOp, nn::MoeExpertCountsOp>(context);
    // gpt-oss's.
    attach<nn::ClampedSwigluOp, nn::ClampedSwigluGradOp,
           nn::AttentionSinksGradOp>(context);
    attach<nn::SoftplusOp, nn::SoftplusGradOp, nn::LogsumexpOp,
           nn::LogsumexpGradOp, nn::ReduceMaxOp, nn::ReduceMaxGradOp>(context);
    // Apertus's.
    attach<nn::XieluOp, nn::XieluGradOp>(context);
    // Reinforcement learning's.
    attach<nn::ClampOp, nn::ClampGradOp, nn::MinimumGradOp, nn::MaximumGradOp,
           nn::WhereGradOp, nn::GatherOp, nn::GatherGradOp>(context);
    attachPointwise<PointwiseCost::Activation, nn::GeluOp, nn::GeluGradOp,
                    nn::GeluErfOp, nn::GeluErfGradOp, nn::SiluOp,
                    nn::SiluGradOp, nn::TanhOp, nn::TanhGradOp, nn::ExpOp,
                    nn::LogOp>(context);
    // The gradients of exp and log are a product and a quotient.
    attachPointwise<PointwiseCost::Memory, nn::ReluOp, nn::ReluGradOp,
                    nn::ExpGradOp, nn::LogGradOp>(context);
    attachPointwise<PointwiseCost::Memory, nn::MinimumOp, nn::MaximumOp,
                    nn::WhereOp, nn::ReciprocalOp, nn::ReciprocalGradOp>(
        context);
  });
  registry.addExtension(
      +[](MLIRContext *context, ZeroDialect *) { attach<CastOp>(context); });
}
