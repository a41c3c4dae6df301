//===- IndexOperandOpInterface.td - Integer index operands -*- tablegen -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_INTERFACES_INDEXOPERANDOPINTERFACE
#define ZERO_INTERFACES_INDEXOPERANDOPINTERFACE

include "mlir/IR/OpBase.td"

def IndexOperandOpInterface : OpInterface<"IndexOperandOpInterface"> {
  let cppNamespace = "::mlir::zero";
  let description = [{
    An op that reads the values of an integer operand as indices: token ids
    into an embedding table, class labels of a loss. Each such operand's
    values must lie in `[0, bound)`, where the op knows `bound` from its
    other types (the table's rows, the logits' classes).

    An op may also take one value outside `[0, bound)` that marks a
    position it ignores (a loss's `ignore_index`).

    Its role says what the values are to the op (`IndexRole`): token ids,
    a loss's labels, or the positions of packed rows (which rotary
    embeddings read without a bound), so that the training driver knows
    which of its data files feeds which input.

    `convert-zero-to-runtime` records the bound of each integer input of the
    step in the program's manifest (`index_bound`, the smallest bound of the
    input's users, and `ignored_index` when every user ignores the same
    value), so that the training driver checks the data files against it
    before the first step instead of a kernel stopping the run midway.
  }];
  let methods = [
    InterfaceMethod<
      "The exclusive upper bound of the values of `operand` if the op reads "
      "it as indices, std::nullopt otherwise.",
      "std::optional<int64_t>", "getIndexBound",
      (ins "::mlir::OpOperand &":$operand)>,
    InterfaceMethod<
      "The value of `operand` that marks an ignored position, if the op "
      "has one.",
      "std::optional<int64_t>", "getIgnoredIndex",
      (ins "::mlir::OpOperand &":$operand), [{}],
      [{ return std::nullopt; }]>,
    InterfaceMethod<
      "What the op reads `operand` as; by default a token where it reads "
      "the operand as indices, nothing otherwise.",
      "::mlir::zero::IndexRole", "getIndexRole",
      (ins "::mlir::OpOperand &":$operand), [{}],
      [{
        return $_op.getIndexBound(operand) ? ::mlir::zero::IndexRole::token
                                           : ::mlir::zero::IndexRole::none;
      }]>,
  ];
}

#endif // ZERO_INTERFACES_INDEXOPERANDOPINTERFACE
