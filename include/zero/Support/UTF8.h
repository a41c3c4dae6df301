//===- UTF8.h - Refuse strings that JSON cannot carry -----------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// Names and paths reach the JSON files the compiler and the runtime write
// (the program's manifest, the reports, ds_config.json, checkpoints), and
// JSON strings are UTF-8: llvm::json asserts on anything else (and replaces
// it in release builds), nlohmann's dump() throws. A quoted MLIR string or a
// Linux path may hold any bytes, so each is checked where it enters, with the
// offset of its first bad byte, and refused there.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_SUPPORT_UTF8_H
#define ZERO_SUPPORT_UTF8_H

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/LogicalResult.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>

namespace zero {

/// The offset of the first byte of `s` that is not valid UTF-8 (as
/// llvm::json, nlohmann and Python decode it: no overlong forms, surrogates
/// or code points past U+10FFFF), if any.
inline std::optional<size_t> findInvalidUTF8(llvm::StringRef s) {
  size_t offset = 0;
  if (llvm::json::isUTF8(s, &offset))
    return std::nullopt;
  return offset;
}

/// `<what>"text" is not valid UTF-8: byte 0xFF at offset N`, the text
/// quoted as MLIR writes a string literal (bytes outside printable ASCII as
/// \XX), so the message itself is ASCII. `what` ends in a space (`nvme_path
/// `) or an `@` (`name @`).
inline std::string describeInvalidUTF8(const llvm::Twine &what,
                                       llvm::StringRef s, size_t offset) {
  std::string out;
  llvm::raw_string_ostream os(out);
  os << what << "\"";
  llvm::printEscapedString(s, os);
  os << "\" is not valid UTF-8: byte 0x"
     << llvm::format_hex_no_prefix(static_cast<unsigned char>(s[offset]), 2,
                                   /*Upper=*/true)
     << " at offset " << offset;
  return out;
}

/// Fails with `emitError() << describeInvalidUTF8(...) << " (" << why << ")"`
/// when `s` is not UTF-8. `emitError` returns something a string streams
/// into: an mlir::InFlightDiagnostic, or a tool's error stream.
template <typename EmitFn>
llvm::LogicalResult checkUTF8(EmitFn &&emitError, const llvm::Twine &what,
                              llvm::StringRef s, llvm::StringRef why) {
  std::optional<size_t> bad = findInvalidUTF8(s);
  if (!bad)
    return llvm::success();
  emitError() << describeInvalidUTF8(what, s, *bad) << " (" << why << ")";
  return llvm::failure();
}

} // namespace zero

#endif // ZERO_SUPPORT_UTF8_H
