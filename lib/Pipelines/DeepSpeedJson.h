//===- DeepSpeedJson.h - The syntax of ds_config files ----------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//
//
// The reader of ds_config files as DeepSpeed's hjson loader takes real
// files (JSON with comments and trailing commas), keeping the place of
// every value, and the printer of values as DeepSpeed's messages echo them.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_LIB_PIPELINES_DEEPSPEEDJSON_H
#define ZERO_LIB_PIPELINES_DEEPSPEEDJSON_H

#include "mlir/Support/LLVM.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/JSON.h"

#include <optional>
#include <string>
#include <vector>

namespace mlir::zero::deepspeed {

/// A place in the file: 1-based line and column, in bytes.
struct Position {
  unsigned line = 0, column = 0;
};

struct SyntaxError {
  Position at;
  std::string message;
};

/// Where each value of the file is: its path of keys (and array indices),
/// joined by kPathSeparator, to the place of the value.
using Positions = llvm::StringMap<Position>;
constexpr char kPathSeparator = '\x1f';

/// Reads `text` into `root` and the place of each value into `positions`.
std::optional<SyntaxError> parseJson(StringRef text, Positions &positions,
                                     llvm::json::Value &root);

/// The keys of `obj`, sorted.
std::vector<StringRef> sortedKeys(const llvm::json::Object &obj);

/// `d` as DeepSpeed's messages print a JSON number: the shortest digits
/// that read back as `d` (0.0006, 1e-08, 1.0).
std::string formatDeepSpeedNumber(double d);

/// `v` in compact JSON as nlohmann/json's dump() wrote it, keys sorted.
void dump(const llvm::json::Value &v, llvm::raw_ostream &os);
std::string dump(const llvm::json::Value &v);

} // namespace mlir::zero::deepspeed

#endif // ZERO_LIB_PIPELINES_DEEPSPEEDJSON_H
