//===- LossChunk.h - The head zero-loss-chunk fuses -------------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_DIALECT_ZERO_TRANSFORMS_LOSSCHUNK_H
#define ZERO_DIALECT_ZERO_TRANSFORMS_LOSSCHUNK_H

#include "zero/Dialect/Zero/IR/ZeroDialect.h"

namespace mlir::zero {

/// The output projection of a train step that zero-loss-chunk fuses into
/// its loss: the [vocab, hidden] weight, and the rows of one step over the
/// global batch.
struct LossHead {
  int64_t vocab = 0, hidden = 0, rows = 0;
};

/// The head of `step`'s loss that zero-loss-chunk would fuse, or failure
/// after reporting at the op why it cannot (the step is not changed).
FailureOr<LossHead> matchLossHead(TrainStepOp step);

/// The rows of a loss chunk for `rows` rows of a micro step over `head`, as
/// Liger-Kernel's fused linear cross-entropy picks them: the power of two at
/// or above rows / ceil(vocab / hidden), so that a chunk's logits are about
/// the size of the hidden states they come from; but at least 128 rows, the
/// height of a GEMM tile, so that the chunk's products fill whole tiles.
int64_t getDefaultLossChunk(int64_t rows, const LossHead &head);

} // namespace mlir::zero

#endif // ZERO_DIALECT_ZERO_TRANSFORMS_LOSSCHUNK_H
