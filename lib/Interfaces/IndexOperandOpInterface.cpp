//===- IndexOperandOpInterface.cpp - Integer index operands ---------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Interfaces/IndexOperandOpInterface.h"

#include <algorithm>

using namespace mlir;

#include "zero/Interfaces/IndexOperandOpInterface.cpp.inc"

std::optional<int64_t> mlir::zero::getIndexBound(Value value) {
  std::optional<int64_t> bound;
  for (OpOperand &use : value.getUses()) {
    auto op = dyn_cast<IndexOperandOpInterface>(use.getOwner());
    if (!op)
      continue;
    if (std::optional<int64_t> b = op.getIndexBound(use))
      bound = bound ? std::min(*bound, *b) : *b;
  }
  return bound;
}

std::optional<int64_t> mlir::zero::getIgnoredIndex(Value value) {
  std::optional<int64_t> ignored;
  for (OpOperand &use : value.getUses()) {
    auto op = dyn_cast<IndexOperandOpInterface>(use.getOwner());
    if (!op || !op.getIndexBound(use))
      continue;
    // A user that reads every value as an index ignores none.
    std::optional<int64_t> i = op.getIgnoredIndex(use);
    if (!i || (ignored && *ignored != *i))
      return std::nullopt;
    ignored = i;
  }
  return ignored;
}

zero::IndexRole mlir::zero::getIndexRole(Value value) {
  IndexRole role = IndexRole::none;
  for (OpOperand &use : value.getUses())
    if (auto op = dyn_cast<IndexOperandOpInterface>(use.getOwner()))
      role = std::max(role, op.getIndexRole(use), [](IndexRole a, IndexRole b) {
        // label > position > token > none.
        static constexpr int kRank[] = {0, 1, 3, 2};
        return kRank[int(a)] < kRank[int(b)];
      });
  return role;
}
