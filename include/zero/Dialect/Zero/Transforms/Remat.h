//===- Remat.h - Transformer blocks that zero-remat recomputes --*- C++ -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_DIALECT_ZERO_TRANSFORMS_REMAT_H
#define ZERO_DIALECT_ZERO_TRANSFORMS_REMAT_H

#include "zero/Dialect/Zero/IR/ZeroDialect.h"

#include "llvm/ADT/SmallVector.h"

#include <string>

namespace mlir::zero {

/// The transformer blocks of a train step that `zero-remat` can recompute,
/// by layer key (`transformer.h.0`, ...) in forward order; the index of a key
/// is its number in zero-remat's `blocks` option.
SmallVector<std::string> getRematBlocks(TrainStepOp step);

} // namespace mlir::zero

#endif // ZERO_DIALECT_ZERO_TRANSFORMS_REMAT_H
