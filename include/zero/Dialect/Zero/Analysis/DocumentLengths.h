//===- DocumentLengths.h - Packed rows' document lengths --------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//
//
// The lengths of the documents packed into rows of T tokens, as
// `zero-data --pack --doc-lengths FILE` writes them: what attention over
// packed rows costs (each document attends to itself only) and what the
// packing saves against one document a padded row.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_DIALECT_ZERO_ANALYSIS_DOCUMENTLENGTHS_H
#define ZERO_DIALECT_ZERO_ANALYSIS_DOCUMENTLENGTHS_H

#include "mlir/Support/LLVM.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <utility>

namespace mlir::zero {

struct DocumentLengths {
  /// The tokens of a row (T), the rows, the documents (or pieces of them)
  /// and their tokens.
  int64_t seq = 0, rows = 0, documents = 0, tokens = 0;
  /// (length, count): `count` documents of `length` tokens, 1 <= length <= T.
  SmallVector<std::pair<int64_t, int64_t>> lengths;

  /// The attention work of a row's documents, each attending to itself
  /// only, as a fraction of a full row's of `seq` tokens: the query-key
  /// pairs the mask keeps (all, causal, or causal within `window`; 0: no
  /// window), averaged over the rows. The padding after a row's last
  /// document is left out.
  double getAttentionFraction(int64_t seq, bool causal, int64_t window) const;
  /// Real tokens over the rows' slots.
  double getFill() const;
  /// The fill of the same documents padded one to a row.
  double getPaddedFill() const;
  /// The slots one document a row takes beyond the packed rows': the
  /// padding the packing saves, in tokens (none where whole empty rows
  /// complete the last step).
  int64_t getSavedSlots() const {
    return documents > rows ? (documents - rows) * seq : 0;
  }
};

/// The document lengths in the JSON file at `path` (zero-data's
/// --doc-lengths): an object with `seq`, `rows`, `documents`, `tokens` and
/// `lengths`, a list of [length, count] pairs that must add up to them.
/// An error names the file and the key.
llvm::Expected<DocumentLengths> readDocumentLengths(StringRef path);

} // namespace mlir::zero

#endif // ZERO_DIALECT_ZERO_ANALYSIS_DOCUMENTLENGTHS_H
