//===- BiasFusionOpInterface.td - Absorbing a bias add ---*- tablegen -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_INTERFACES_BIASFUSIONOPINTERFACE
#define ZERO_INTERFACES_BIASFUSIONOPINTERFACE

include "mlir/IR/OpBase.td"

def BiasFusionOpInterface : OpInterface<"BiasFusionOpInterface"> {
  let cppNamespace = "::mlir::zero";
  let description = [{
    An op that can read one of its operands as the sum of two values, `x`
    and a `bias` broadcast over its leading dimensions, adding them itself
    in the pass it already makes over `x`: `zero-fuse-bias-activation`
    removes an `nn.add` whose every user takes the sum this way, so that
    the sum is never written to memory or kept for the backward.

    The op that absorbs the bias computes the sum as `nn.add` does (in
    fp32, rounded to the element type) before using it, so the results are
    those of the unfused ops bit for bit.
  }];
  let methods = [
    InterfaceMethod<
      "Whether the op can take `operand` as the sum of an unbiased value "
      "and a broadcast bias.",
      "bool", "canAbsorbBias", (ins "::mlir::OpOperand &":$operand)>,
    InterfaceMethod<
      "Builds, at the op, the op computing its results from `input` + "
      "`bias` in place of `operand`, and returns its results (one per "
      "result of this op, of the same types).",
      "::mlir::ValueRange", "buildWithBias",
      (ins "::mlir::OpBuilder &":$builder, "::mlir::OpOperand &":$operand,
           "::mlir::Value":$input, "::mlir::Value":$bias)>,
  ];
}

#endif // ZERO_INTERFACES_BIASFUSIONOPINTERFACE
