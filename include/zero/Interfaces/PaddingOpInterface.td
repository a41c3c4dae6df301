//===- PaddingOpInterface.td - Padded operand dimensions -*- tablegen -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_INTERFACES_PADDINGOPINTERFACE
#define ZERO_INTERFACES_PADDINGOPINTERFACE

include "mlir/IR/OpBase.td"

def PaddingOpInterface : OpInterface<"PaddingOpInterface"> {
  let cppNamespace = "::mlir::zero";
  let description = [{
    How an op takes one dimension of an operand growing with trailing zero
    entries that must not change what the op means: a table padded with zero
    rows, the logits padded with extra classes. `zero-pad-vocab` pads a
    parameter's rows and follows the padding through the ops that use it; an
    op that does not implement this interface, or answers failure, stops it,
    and the parameter is left as it is.

    `getPaddingEffect` says what the op does with the padding of dimension
    `dim` of `operand`: which of its results are then padded in which
    dimension (they carry the padding on to their users), and whether the op
    masks the padding out (a loss over the valid classes only). An op that
    neither passes the padding on nor masks it, such as an embedding lookup
    whose indices never reach the padded rows, absorbs it. `padOperand`
    applies it once the operand's type has its padded size: it updates the
    result types and records `size`, the valid extent, where it needs it.
  }];
  let methods = [
    InterfaceMethod<
      "What padding dimension `dim` of `operand` does to the op, or failure "
      "when the op cannot take it.",
      "::mlir::FailureOr<::mlir::zero::PaddingEffect>", "getPaddingEffect",
      (ins "::mlir::OpOperand &":$operand, "int64_t":$dim)>,
    InterfaceMethod<
      "Updates the op after dimension `dim` of `operand` was padded from "
      "`size` entries to its type's size.",
      "void", "padOperand",
      (ins "::mlir::OpOperand &":$operand, "int64_t":$dim, "int64_t":$size)>,
  ];
}

#endif // ZERO_INTERFACES_PADDINGOPINTERFACE
