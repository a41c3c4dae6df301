//===- Axes.h - zero-tune's search axes as a table --------------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// The rows of Axes.def as data: each axis's option and how its value
// restricts the search (the TuneOptions field it sets).
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_TUNING_AXES_H
#define ZERO_TUNING_AXES_H

#include "zero/Tuning/Tuner.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace mlir::zero {

/// One row of Axes.def.
struct TuneAxis {
  llvm::StringLiteral flag;
  /// The value when the option is not given; "" leaves the field unset.
  llvm::StringLiteral init;
  /// The values the option takes, as its error says them ({0}: the world
  /// size).
  llvm::StringLiteral expected;
  /// Sets `options`' field from `text`; false when `text` is no value of
  /// the axis (the world size is set before).
  bool (*parse)(llvm::StringRef text, TuneOptions &options);
};

/// Every axis, in Axes.def's order.
llvm::ArrayRef<TuneAxis> getTuneAxes();

/// Sets `options`' field of `axis` from `text`, its option's value (`given`:
/// whether the option was on the command line); the error message
/// otherwise. "auto" and an unset value not given leave the field alone.
LogicalResult parseTuneAxis(const TuneAxis &axis, llvm::StringRef text,
                            bool given, TuneOptions &options,
                            std::string &error);

} // namespace mlir::zero

#endif // ZERO_TUNING_AXES_H
