//===- OptimizerParams.h - #zero.optimizer's hyper-parameters by row -----===//
//
// Part of the zero-mlir project.
//
// The hyper-parameters of #zero.optimizer are optimizers.def's
// ZRT_HYPER_PARAM rows: ODS declares them from ZeroOptimizerTable.td, which
// the build writes from the table, and this struct holds one value of each,
// so that code which builds or rewrites an attribute names a parameter by
// its row, never by its place in the attribute's parameter list.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_DIALECT_ZERO_IR_OPTIMIZERPARAMS_H
#define ZERO_DIALECT_ZERO_IR_OPTIMIZERPARAMS_H

#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/StringRef.h"
#include <cstdint>
#include <optional>
#include <type_traits>

namespace mlir::zero {

enum class MuonAdjustLr : uint32_t;

namespace detail {
// A row's `type` as OptimizerParams keeps it and as the attribute's
// parameter (and its generated verifier) takes it.
using HyperParamDouble = double;
using HyperParamBool = bool;
using HyperParamInt = int64_t;
using HyperParamMuonAdjustLr = MuonAdjustLr;
using HyperParamArgDouble = ::llvm::APFloat;
using HyperParamArgBool = bool;
using HyperParamArgInt = int64_t;
using HyperParamArgMuonAdjustLr = MuonAdjustLr;

/// A row's value as OptimizerParams keeps it, from the attribute's
/// parameter (an APFloat is a double), and the attribute's parameter from it.
inline double hyperParamValue(const ::llvm::APFloat &v) {
  return v.convertToDouble();
}
template <typename T>
T hyperParamValue(T v) {
  return v;
}
template <typename Arg, typename T>
Arg hyperParamArg(T v) {
  if constexpr (std::is_same_v<Arg, ::llvm::APFloat>)
    return ::llvm::APFloat(double(v));
  else
    return v;
}

/// A row's value as a double (true is 1, an enum its number), and back.
template <typename T>
double hyperParamToDouble(T v) {
  if constexpr (std::is_enum_v<T>)
    return static_cast<double>(static_cast<std::underlying_type_t<T>>(v));
  else
    return static_cast<double>(v);
}
template <typename T>
T hyperParamFromDouble(double v) {
  if constexpr (std::is_same_v<T, bool>)
    return v != 0.0;
  else if constexpr (std::is_enum_v<T>)
    return static_cast<T>(static_cast<std::underlying_type_t<T>>(v));
  else
    return static_cast<T>(v);
}
} // namespace detail

/// One value of each ZRT_HYPER_PARAM row, its default unless set. Members
/// are named as the rows (#zero.optimizer's parameters).
struct OptimizerParams {
#define ZRT_HYPER_PARAM(name, type, default, check)                            \
  detail::HyperParam##type name = detail::HyperParam##type(default);
#include "zero_rt/optimizers.def"

  /// The value of parameter `name` (true is 1, an enum its number); none
  /// for a name that is not a row.
  std::optional<double> get(llvm::StringRef name) const;
  /// Sets parameter `name` to `value` (converted to its type); false for a
  /// name that is not a row.
  bool set(llvm::StringRef name, double value);
  /// Sets parameter `name` back to its row's default; false for a name
  /// that is not a row.
  bool reset(llvm::StringRef name);
};

/// Whether `name` is a ZRT_HYPER_PARAM row of type Bool.
bool isBoolHyperParam(llvm::StringRef name);

} // namespace mlir::zero

#endif // ZERO_DIALECT_ZERO_IR_OPTIMIZERPARAMS_H
