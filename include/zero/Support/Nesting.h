//===- Nesting.h - Reject input nested too deeply to parse ------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// MLIR's parser is recursive descent: every level of `[`, `{`, `(` or `<`
// costs about a kilobyte of stack, and a file of ~7000 nested `[` (14 KB)
// overflows the default 8 MB stack: a crash, in mlir-opt as well (found by
// zero-fuzz). The tools check their input first and reject deeper nesting
// with a diagnostic; real IR nests a few dozen levels at most.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_SUPPORT_NESTING_H
#define ZERO_SUPPORT_NESTING_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/LogicalResult.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <array>
#include <optional>
#include <string>

namespace zero {

/// The deepest nesting of brackets the tools accept.
constexpr unsigned kMaxNestingDepth = 1000;

/// The offset of the first opening bracket deeper than `maxDepth`, if any.
/// Brackets in string literals and `//` comments do not count, nor the `>`
/// of `->`; a stray closing bracket only lowers the depth, so the check never
/// rejects what the parser would accept within the limit.
inline std::optional<size_t>
findExcessiveNesting(llvm::StringRef text,
                     unsigned maxDepth = kMaxNestingDepth) {
  // Most bytes are none of `"`, `/` or a bracket: one table lookup skips
  // them (the check reads every byte of inputs of megabytes).
  static constexpr auto kSpecial = [] {
    std::array<bool, 256> special{};
    for (unsigned char c : {'"', '/', '(', '[', '{', '<', ')', ']', '}', '>'})
      special[c] = true;
    return special;
  }();
  unsigned depth = 0;
  for (size_t i = 0, e = text.size(); i < e; ++i) {
    char c = text[i];
    if (!kSpecial[static_cast<unsigned char>(c)])
      continue;
    if (c == '"') {
      for (++i; i < e && text[i] != '"'; ++i)
        if (text[i] == '\\')
          ++i;
      continue;
    }
    if (c == '/' && i + 1 < e && text[i + 1] == '/') {
      i = text.find('\n', i);
      if (i == llvm::StringRef::npos)
        break;
      continue;
    }
    if (c == '(' || c == '[' || c == '{' || c == '<') {
      if (++depth > maxDepth)
        return i;
    } else if (c == ')' || c == ']' || c == '}' ||
               (c == '>' && !(i > 0 && text[i - 1] == '-'))) {
      if (depth > 0)
        --depth;
    }
  }
  return std::nullopt;
}

/// Prints `file:line:col: error: ...` for input nested too deeply and fails.
inline llvm::LogicalResult checkNesting(const llvm::MemoryBuffer &buffer) {
  std::optional<size_t> at = findExcessiveNesting(buffer.getBuffer());
  if (!at)
    return llvm::success();
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBuffer(buffer.getMemBufferRef(),
                                       /*RequiresNullTerminator=*/false),
      llvm::SMLoc());
  sourceMgr.PrintMessage(
      llvm::errs(), llvm::SMLoc::getFromPointer(buffer.getBufferStart() + *at),
      llvm::SourceMgr::DK_Error,
      "brackets nested deeper than " + std::to_string(kMaxNestingDepth) +
          " levels (the parser would overflow its stack)");
  return llvm::failure();
}

} // namespace zero

#endif // ZERO_SUPPORT_NESTING_H
