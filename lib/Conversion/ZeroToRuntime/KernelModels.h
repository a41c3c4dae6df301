//===- KernelModels.h - The kernel models of the compute ops ----*- C++ -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//
//
// Private to lib/Conversion/ZeroToRuntime: the helpers of the compute ops'
// RuntimeKernelOpInterface models and the models that live outside
// KernelModels.cpp, which registers them all: the losses and the tiled MLP
// (KernelModelsLoss.cpp) and the mixture of experts (KernelModelsMoe.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_LIB_CONVERSION_ZEROTORUNTIME_KERNELMODELS_H
#define ZERO_LIB_CONVERSION_ZEROTORUNTIME_KERNELMODELS_H

#include "zero/Dialect/NN/IR/NNDialect.h"
#include "zero/Interfaces/RuntimeKernelOpInterface.h"

#include "zero_rt/zrt.h"

namespace mlir::zero::kernels {

inline RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}
inline int64_t numel(Value v) { return tensorType(v).getNumElements(); }
inline Type elemType(Value v) { return tensorType(v).getElementType(); }
inline int64_t innerDim(Value v) { return tensorType(v).getShape().back(); }

inline int32_t dtypeCode(Type t) {
  if (t.isBF16())
    return ZRT_BF16;
  if (t.isF16())
    return ZRT_F16;
  return ZRT_F32;
}

/// What the per-op models (KernelModels.cpp) default to: no scratch, and one
/// pass over the operands and results.
template <typename OpT>
int64_t scratchBytes(OpT) {
  return 0;
}
template <typename OpT>
KernelCost cost(OpT op) {
  return KernelCost::memory(getOperandAndResultBytes(op));
}

// Eager decompositions. An eager PyTorch peer (a reference Llama's modules
// run without torch.compile) computes some ops as a chain of unfused kernels,
// each reading and writing whole tensors, over fp32 copies of 16-bit
// activations; autograd runs the backward of each. docs/CostModel.md names
// the code each chain is read from.

/// The kernels of one eager chain, added one at a time.
struct EagerKernels {
  double bytes = 0;
  int64_t launches = 0;
  /// One kernel reading `read` bytes and writing `written`.
  void run(double read, double written) {
    bytes += read + written;
    ++launches;
  }
  /// A dtype conversion of `n` elements from `from` to `to` bytes each:
  /// none when they are the same (`x.float()` of an fp32 tensor is itself).
  void convert(double n, double from, double to) {
    if (from != to)
      run(n * from, n * to);
  }
  KernelCost into(KernelCost c) const {
    c.eagerBytes = bytes;
    c.eagerLaunches = launches;
    return c;
  }
};
/// The eager chains compute in fp32.
inline constexpr double kEagerFloat = 4;
inline double elemBytes(Value v) {
  return llvm::divideCeil(elemType(v).getIntOrFloatBitWidth(), 8);
}

// KernelModelsLoss.cpp.
LogicalResult buildCall(nn::SoftmaxCrossEntropyOp op, KernelCallBuilder &b);
KernelCost cost(nn::SoftmaxCrossEntropyOp op);
LogicalResult buildCall(nn::SoftmaxCrossEntropyGradOp op, KernelCallBuilder &b);
KernelCost cost(nn::SoftmaxCrossEntropyGradOp op);
LogicalResult buildCall(nn::LinearCrossEntropyOp op, KernelCallBuilder &b);
LogicalResult buildCall(nn::LinearCrossEntropyGradOp op, KernelCallBuilder &b);
int64_t scratchBytes(nn::LinearCrossEntropyOp op);
int64_t scratchBytes(nn::LinearCrossEntropyGradOp op);
KernelCost cost(nn::LinearCrossEntropyOp op);
KernelCost cost(nn::LinearCrossEntropyGradOp op);
LogicalResult buildCall(nn::TiledMlpOp op, KernelCallBuilder &b);
LogicalResult buildCall(nn::TiledMlpGradOp op, KernelCallBuilder &b);
int64_t scratchBytes(nn::TiledMlpOp op);
int64_t scratchBytes(nn::TiledMlpGradOp op);
KernelCost cost(nn::TiledMlpOp op);
KernelCost cost(nn::TiledMlpGradOp op);
LogicalResult buildCall(nn::ShiftLabelsOp op, KernelCallBuilder &b);
LogicalResult buildCall(nn::DocumentIdsOp op, KernelCallBuilder &b);

// KernelModelsMoe.cpp.
LogicalResult buildCall(nn::MoeRouterOp op, KernelCallBuilder &b);
int64_t scratchBytes(nn::MoeRouterOp op);
KernelCost cost(nn::MoeRouterOp op);
LogicalResult buildCall(nn::MoeRouterGradOp op, KernelCallBuilder &b);
int64_t scratchBytes(nn::MoeRouterGradOp op);
KernelCost cost(nn::MoeRouterGradOp op);
LogicalResult buildCall(nn::MoeDispatchOp op, KernelCallBuilder &b);
LogicalResult buildCall(nn::MoeDispatchGradOp op, KernelCallBuilder &b);
LogicalResult buildCall(nn::GroupedMatmulOp op, KernelCallBuilder &b);
int64_t scratchBytes(nn::GroupedMatmulOp op);
KernelCost cost(nn::GroupedMatmulOp op);
LogicalResult buildCall(nn::GroupedMatmulWeightGradOp op, KernelCallBuilder &b);
int64_t scratchBytes(nn::GroupedMatmulWeightGradOp op);
KernelCost cost(nn::GroupedMatmulWeightGradOp op);
LogicalResult buildCall(nn::MoeCombineOp op, KernelCallBuilder &b);
LogicalResult buildCall(nn::MoeCombineGradOp op, KernelCallBuilder &b);
LogicalResult buildCall(nn::MoeAuxLossOp op, KernelCallBuilder &b);
int64_t scratchBytes(nn::MoeAuxLossOp op);
KernelCost cost(nn::MoeAuxLossOp op);
LogicalResult buildCall(nn::MoeAuxLossGradOp op, KernelCallBuilder &b);
int64_t scratchBytes(nn::MoeAuxLossGradOp op);
KernelCost cost(nn::MoeAuxLossGradOp op);
LogicalResult buildCall(nn::MoeExpertCountsOp op, KernelCallBuilder &b);
int64_t scratchBytes(nn::MoeExpertCountsOp op);
KernelCost cost(nn::MoeExpertCountsOp op);

} // namespace mlir::zero::kernels

#endif // ZERO_LIB_CONVERSION_ZEROTORUNTIME_KERNELMODELS_H
