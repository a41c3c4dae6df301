//===- NNInterfaces.td - Roles of compute ops -------------*- tablegen -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//
//
// What the ZeRO passes, the report and the tuner ask of an `nn` op beyond its
// shapes: whether it is a loss, a product, a view, ... An op declares its
// roles here (traits in NNTraits.h, interfaces below) so that no code outside
// the dialect names ops to learn them.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_DIALECT_NN_IR_NNINTERFACES
#define ZERO_DIALECT_NN_IR_NNINTERFACES

include "mlir/IR/OpBase.td"

//===----------------------------------------------------------------------===//
// Traits
//===----------------------------------------------------------------------===//

class NN_Trait<string name> : NativeOpTrait<name> {
  let cppNamespace = "::mlir::nn::OpTrait";
}

// The result holds operand 0's elements, converted, reshaped or permuted,
// and nothing else (nn.cast, nn.reshape, nn.transpose): a parameter read
// through it is still that parameter.
def NN_TensorView : NN_Trait<"TensorView">;

// One (batched) matrix product of two operands (nn.matmul).
def NN_MatrixProduct : NN_Trait<"MatrixProduct">;

// Several matrix products in one op (a tiled MLP's, an MoE layer's grouped
// product): priced and kept as products, but not counted as one.
def NN_GroupedMatrixProducts : NN_Trait<"GroupedMatrixProducts">;

// Scaled dot-product attention (forward).
def NN_Attention : NN_Trait<"Attention">;

// A kernel of the model's loss or of its gradient, which runs after the
// transformer blocks (a peer that compiles each block runs it eager).
def NN_LossKernel : NN_Trait<"LossKernel">;

// A result whose shape is written in its type rather than inferred (a
// reshape, a split) and that may keep an operand's rows (dim 0): a pass that
// divides the rows (the local batch) keeps such a result's rows the
// operand's.
def NN_KeepsLeadingRows : NN_Trait<"KeepsLeadingRows">;

// A result linear in each operand taken alone (a sum, a product, a scaling,
// a reshape): a loss reached from a value through such ops only is a sum of
// terms proportional to it, which is what lets zero-token-mean split a sum
// over the global batch into the micro batches' parts.
def NN_LinearInOperands : NN_Trait<"LinearInOperands">;

//===----------------------------------------------------------------------===//
// Interfaces
//===----------------------------------------------------------------------===//

def NN_LossOpInterface : OpInterface<"LossOpInterface"> {
  let cppNamespace = "::mlir::zero";
  let description = [{
    A loss over the step's class labels (a cross entropy): a scalar whose
    gradient zero-autodiff seeds in its backward ops. zero-tune counts the
    labels as the step's tokens, zero-token-mean rescales the loss and the
    seeds when it ignores a label value, and Muon's parameter split reads
    the output head.
  }];
  let methods = [
    InterfaceMethod<"The integer labels the loss reads.",
      "::mlir::TypedValue<::mlir::RankedTensorType>", "getLabels">,
    InterfaceMethod<"The label value the loss ignores, if any.",
      "::std::optional<uint64_t>", "getIgnoreIndex">,
    InterfaceMethod<
      "The loss-gradient operands of this loss's backward ops: those of the "
      "users of its forward operands that read the same operands, labels "
      "and ignored label (one once zero-autodiff has run).",
      "::llvm::SmallVector<::mlir::OpOperand *>", "getGradSeeds">,
    InterfaceMethod<
      "The operands of the output head, the product into the logits: the "
      "fused head's weight, or both operands of the nn.matmul that computes "
      "the logits (through reshapes); none when it is not a product.",
      "::llvm::SmallVector<::mlir::Value>", "getHeadOperands">,
  ];
}

def NN_ProjectionOpInterface : OpInterface<"ProjectionOpInterface"> {
  let cppNamespace = "::mlir::zero";
  let description = [{
    A product of activations with weight matrices (a linear layer, a fused
    MLP). Muon updates a 2-D parameter read as such a weight with its
    orthogonalized step.
  }];
  let methods = [
    InterfaceMethod<
      "The operands that may hold a weight matrix: both of a matmul's "
      "(either may be the parameter), each weight of a fused MLP.",
      "::llvm::SmallVector<::mlir::Value>", "getWeightOperands">,
  ];
}

def NN_NormOpInterface : OpInterface<"NormOpInterface"> {
  let cppNamespace = "::mlir::zero";
  let description = [{
    A normalization over the innermost dimension with a learned 1-D scale
    (layer norm, RMS norm): its width is the model's hidden size.
  }];
  let methods = [
    InterfaceMethod<"The 1-D scale over the normalized dimension.",
      "::mlir::TypedValue<::mlir::RankedTensorType>", "getWeight">,
  ];
}

def NN_EmbeddingOpInterface : OpInterface<"EmbeddingOpInterface"> {
  let cppNamespace = "::mlir::zero";
  let description = [{
    A row lookup in a [vocab, hidden] table of token embeddings.
  }];
  let methods = [
    InterfaceMethod<"The table operand.",
      "::mlir::OpOperand &", "getTableMutable">,
  ];
}

def NN_LeadingDimOpInterface : OpInterface<"LeadingDimOpInterface"> {
  let cppNamespace = "::mlir::zero";
  let description = [{
    An op whose result's slice i along dimension 0 comes from one operand's
    slice i alone (and from operands that are the same for every slice): a
    cast, a reshape keeping dimension 0, a bias broadcast over it. Expert
    parallelism slices an expert parameter ([E, ...]) through such ops, and
    the report follows them back to it.
  }];
  let methods = [
    InterfaceMethod<
      "That operand, or null when the op does not keep dimension 0 so.",
      "::mlir::Value", "getLeadingDimSource">,
  ];
}

def NN_ExpertCombineOpInterface : OpInterface<"ExpertCombineOpInterface"> {
  let cppNamespace = "::mlir::zero";
  let description = [{
    The end of a mixture of experts' layer: it takes the experts' rows in
    the dispatch's order back to the tokens'. Expert parallelism returns
    the rows to their rank before it.
  }];
  let methods = [
    InterfaceMethod<"The experts' rows, in the dispatch's order.",
      "::mlir::OpOperand &", "getRowsMutable">,
    InterfaceMethod<"The dispatch's positions of the token's rows.",
      "::mlir::Value", "getPositions">,
  ];
}

#endif // ZERO_DIALECT_NN_IR_NNINTERFACES
