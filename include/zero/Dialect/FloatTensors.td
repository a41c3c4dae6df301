//===- FloatTensors.td - Float tensor type constraints ------*- tablegen -*-===//
//
// Part of the zero-mlir project.
//
// RankedTensorOf<[F32, F16, BF16]> and 1DTensorOf<[F32, F16, BF16]>, with
// the same summaries (and so the same diagnostics) and C++ type, checked on
// RankedTensorType directly. ODS's ShapedContainerType reads the element type
// through the ShapedType interface, an interface lookup per operand and
// result in every verification, and the verifier runs after every pass.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_DIALECT_FLOATTENSORS_TD
#define ZERO_DIALECT_FLOATTENSORS_TD

include "mlir/IR/OpBase.td"

class Zero_RankedFloatTensorOf<list<Pred> rankPreds, string summary>
    : Type<And<!listconcat(
               [CPred<"::llvm::isa<::mlir::RankedTensorType>($_self)">],
               rankPreds,
               [CPred<"::llvm::isa<::mlir::Float32Type, ::mlir::Float16Type, "
                      "::mlir::BFloat16Type>(::llvm::cast<::mlir::"
                      "RankedTensorType>($_self).getElementType())">])>,
           summary # " of 32-bit float or 16-bit float or bfloat16 type values",
           "::mlir::RankedTensorType">;

/// RankedTensorOf<[F32, F16, BF16]>.
class Zero_AnyRankFloatTensor : Zero_RankedFloatTensorOf<[], "ranked tensor">;

/// 1DTensorOf<[F32, F16, BF16]>.
class Zero_1DFloatTensor : Zero_RankedFloatTensorOf<
    [CPred<"::llvm::cast<::mlir::RankedTensorType>($_self).getRank() == 1">],
    "1D tensor">;

#endif // ZERO_DIALECT_FLOATTENSORS_TD
