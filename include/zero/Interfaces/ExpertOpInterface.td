//===- ExpertOpInterface.td - Ops over a layer's experts -*- tablegen -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_INTERFACES_EXPERTOPINTERFACE
#define ZERO_INTERFACES_EXPERTOPINTERFACE

include "mlir/IR/OpBase.td"

def ExpertOpInterface : OpInterface<"ExpertOpInterface"> {
  let cppNamespace = "::mlir::zero";
  let description = [{
    An op that computes with the weights of a layer's E experts, each token
    reaching k of them (a mixture of experts' grouped product). The report
    and zero-estimate read it: the parameters behind `getExpertWeights` are
    expert parameters, the others dense, and one token computes with
    k / E of each expert tensor, so the active parameters per token are
    the dense ones plus k / E of the experts'. The op is priced at a
    balanced load, T * k / E rows an expert, which is also what the active
    parameters assume.
  }];
  let methods = [
    InterfaceMethod<
      "The operand holding the experts' weights, [E, ...] ([E / P, ...] on "
      "a rank under expert parallelism, the `expert_parallel` P of its "
      "zero.param): the parameter or a view of it that keeps dimension 0 "
      "(getExpertParam in Report.h finds the parameter).",
      "::mlir::OpOperand &", "getExpertWeights">,
    InterfaceMethod<
      "E, the experts of the layer.",
      "int64_t", "getNumExperts">,
    InterfaceMethod<
      "k, the experts each token's rows go to, or 0 when the op cannot tell "
      "(then every expert counts as active).",
      "int64_t", "getExpertsPerToken">,
    InterfaceMethod<
      "The operand holding the rows the experts compute with, in the "
      "dispatch's order (grouped by expert).",
      "::mlir::OpOperand &", "getExpertRows">,
    InterfaceMethod<
      "The operand holding the experts' end offsets into those rows, [E] "
      "(the local experts' under expert parallelism).",
      "::mlir::OpOperand &", "getExpertOffsets">,
  ];
}

#endif // ZERO_INTERFACES_EXPERTOPINTERFACE
