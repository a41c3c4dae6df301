//===- PaddingOpInterface.h - Padding a dimension of an operand -*- C++ -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_INTERFACES_PADDINGOPINTERFACE_H
#define ZERO_INTERFACES_PADDINGOPINTERFACE_H

#include "mlir/IR/OpDefinition.h"
#include "llvm/ADT/SmallVector.h"

#include <utility>

namespace mlir::zero {

/// What an op does with one padded operand dimension.
struct PaddingEffect {
  /// (result number, dimension) of each result padded in turn.
  SmallVector<std::pair<unsigned, int64_t>, 1> paddedResults;
  /// The op masks the padding out: results do not depend on it.
  bool masks = false;
};

} // namespace mlir::zero

#include "zero/Interfaces/PaddingOpInterface.h.inc"

#endif // ZERO_INTERFACES_PADDINGOPINTERFACE_H
