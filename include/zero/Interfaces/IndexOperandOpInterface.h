//===- IndexOperandOpInterface.h - Integer index operands -------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_INTERFACES_INDEXOPERANDOPINTERFACE_H
#define ZERO_INTERFACES_INDEXOPERANDOPINTERFACE_H

#include "mlir/IR/OpDefinition.h"

#include <optional>

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

} // namespace mlir::zero

#endif // ZERO_INTERFACES_INDEXOPERANDOPINTERFACE_H
