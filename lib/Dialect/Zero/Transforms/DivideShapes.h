//===- DivideShapes.h - Retyping what divided values flow into -*- C++ -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//
//
// The one walk that divides shapes over a parallel axis: once a pass has
// divided some values (the step's inputs over the data-parallel ranks or
// the sequence-parallel group, an expert exchange's rows over the expert
// set), every op that reads one is retyped in block order. zero-partition
// and zero-grad-sync (divideBatch), zero-sequence-parallel and
// zero-expert-parallel differ only in the rules for the ops that cannot
// infer their types.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_LIB_DIALECT_ZERO_TRANSFORMS_DIVIDESHAPES_H
#define ZERO_LIB_DIALECT_ZERO_TRANSFORMS_DIVIDESHAPES_H

#include "mlir/IR/Block.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"

namespace mlir::zero {

/// How one division retypes the ops that read a divided value.
struct ShapeDivision {
  /// Ends "cannot re-infer its types " in the error of a failed inference
  /// ("for the local batch").
  StringRef what;
  /// The result types of an op without InferTypeOpInterface; fails after a
  /// diagnostic.
  function_ref<LogicalResult(Operation *, SmallVectorImpl<Type> &)> rule;
  /// Optional: an op the pass rewrites itself, before inference: true when
  /// it did (its results are not divided); fails after a diagnostic.
  function_ref<FailureOr<bool>(Operation *)> handle = nullptr;
  /// Optional: whether the results of an op stay divided though their types
  /// did not change (an expert exchange's rows, whose capacity may not).
  function_ref<bool(Operation *)> keepsUnchanged = nullptr;
};

/// Retypes, in block order over [begin, end), every op that reads a value
/// of `divided` (each mapped to its type before the division): ops with
/// InferTypeOpInterface are re-inferred, the others take `division.rule`'s
/// types. A result whose type changes joins `divided`.
inline LogicalResult
divideDerivedShapes(Block::iterator begin, Block::iterator end,
                    llvm::DenseMap<Value, RankedTensorType> &divided,
                    const ShapeDivision &division) {
  for (Operation &op : llvm::make_range(begin, end)) {
    if (!llvm::any_of(op.getOperands(),
                      [&](Value v) { return divided.count(v); }))
      continue;
    if (division.handle) {
      FailureOr<bool> handled = division.handle(&op);
      if (failed(handled))
        return failure();
      if (*handled)
        continue;
    }
    SmallVector<Type> newTypes;
    if (auto infer = dyn_cast<InferTypeOpInterface>(op)) {
      if (failed(infer.inferReturnTypes(
              op.getContext(), op.getLoc(), op.getOperands(),
              op.getRawDictionaryAttrs(), op.getPropertiesStorage(),
              op.getRegions(), newTypes)))
        return op.emitOpError("cannot re-infer its types ") << division.what;
    } else if (failed(division.rule(&op, newTypes))) {
      return failure();
    }
    bool keep = division.keepsUnchanged && division.keepsUnchanged(&op);
    for (auto [r, t] : llvm::zip(op.getResults(), newTypes)) {
      if (r.getType() == t && !keep)
        continue;
      divided[r] = dyn_cast<RankedTensorType>(r.getType());
      r.setType(t);
    }
  }
  return success();
}

} // namespace mlir::zero

#endif // ZERO_LIB_DIALECT_ZERO_TRANSFORMS_DIVIDESHAPES_H
