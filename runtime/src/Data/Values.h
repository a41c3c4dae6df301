//===- Values.h - Reading and checking the step's input values --*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// What the data files and the library's arrays share: integer element types
// and their values, the checks of index values against the program, and
// which input holds token ids, labels and positions.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_DATA_VALUES_H
#define ZERO_RT_DATA_VALUES_H

#include "Program/Manifest.h"

#include <cstdint>
#include <string>

namespace zrt {

bool isIndexType(const std::string &dtype);

/// Stores index `v` as element `i` of integer input `in` at `base`.
void storeIndex(const InputInfo &in, char *base, int64_t i, int64_t v);

/// The inputs of a token model by what the step reads them as (the
/// manifest's roles): token ids, labels and, for packed rows, positions
/// (-1: none). Ids and labels that no role names are the first inputs
/// left, in order (a program whose inputs carry no roles reads ids, then
/// labels).
struct TokenInputs {
  int ids = -1, labels = -1, positions = -1;

  explicit TokenInputs(const Manifest &m);
  /// Token ids and labels (and positions) are every input, each integer;
  /// ids are [B, T, ...] and labels [B, ...].
  bool fits(const Manifest &m) const;
};

/// Whether input `in` holds whole rows of `rowSize` values where the others
/// hold a sequence-parallel rank's shard (packed rows' positions, which
/// every rank of the group takes whole).
bool holdsWholeRows(const InputInfo &in, int64_t rowSize);

/// Why `v` cannot be a value of the integer input `in` (empty when it
/// can): it is the ignored index of the input's users (a loss's
/// ignore_index), or it fits the input's type and lies in [0, index_bound)
/// (or is >= 0 where there is no bound). `values` and `range` name the
/// input's values and the range in the message ("labels", "classes").
std::string indexProblem(const InputInfo &in, int64_t v, const char *values,
                         const char *range);

/// An integer element type of token files and arrays: NumPy's descriptor
/// and size, and the name messages use.
struct TokenType {
  const char *name, *descr;
  int64_t bytes;
  bool isSigned;
};

/// uint16, uint32, int32 and int64.
extern const TokenType kTokenTypes[4];

/// The integer type of NumPy descriptor `descr` (null: not one).
const TokenType *tokenTypeOf(const std::string &descr);

/// The integer of `type` at `p` (any alignment).
int64_t tokenAt(const char *p, const TokenType &type);

} // namespace zrt

#endif // ZERO_RT_DATA_VALUES_H
