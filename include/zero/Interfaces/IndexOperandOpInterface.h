//===- IndexOperandOpInterface.h - Integer index operands -------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_INTERFACES_INDEXOPERANDOPINTERFACE_H
#define ZERO_INTERFACES_INDEXOPERANDOPINTERFACE_H

#include "mlir/IR/OpDefinition.h"

#include <optional>

namespace mlir::zero {
/// What an op reads an integer operand as: token ids (an embedding's rows,
/// router indices), a loss's labels, or the per-token positions of packed
/// rows.
enum class IndexRole { none, token, label, position };
} // namespace mlir::zero

#include "zero/Interfaces/IndexOperandOpInterface.h.inc"

namespace mlir::zero {

/// The smallest index bound any user of `value` puts on its values
/// (IndexOperandOpInterface), or std::nullopt when no user reads it as
/// indices.
std::optional<int64_t> getIndexBound(Value value);

/// The value every index user of `value` ignores (IndexOperandOpInterface's
/// getIgnoredIndex), or std::nullopt when some user ignores none or users
/// differ.
std::optional<int64_t> getIgnoredIndex(Value value);

/// What the users of `value` read it as: a label where any user reads it
/// as labels, else a position where any reads positions (a table of
/// positions is an embedding of them), else a token where any reads
/// indices, else none.
IndexRole getIndexRole(Value value);

} // namespace mlir::zero

#endif // ZERO_INTERFACES_INDEXOPERANDOPINTERFACE_H
