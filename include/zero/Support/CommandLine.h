//===- CommandLine.h - Flags and values on command lines --------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// Every tool reads a boolean option as --help shows it, a flag: `--name`
// sets it, `--name=false` clears it, and so does `--name false` (a literal
// true or false after it, which zero-compile's documented examples write);
// any other argument after a flag is not its value. zero-compile and
// zero-run split their own command lines (PipelineFlags.h names
// zero-pipeline's flags); the llvm::cl tools join such a value to its flag
// (FlagArgs) before llvm::cl, which would take it for a positional
// argument.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_SUPPORT_COMMANDLINE_H
#define ZERO_SUPPORT_COMMANDLINE_H

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/CommandLine.h"

#include <deque>
#include <optional>
#include <string>
#include <vector>

namespace zero {

/// The value `arg` gives a flag, as llvm::cl reads a bool (true, false, 1,
/// 0), or none.
inline std::optional<bool> parseFlagValue(llvm::StringRef arg) {
  return llvm::StringSwitch<std::optional<bool>>(arg)
      .Cases({"true", "TRUE", "True", "1"}, true)
      .Cases({"false", "FALSE", "False", "0"}, false)
      .Default(std::nullopt);
}

/// Whether `arg`, after an option that takes a value, is another option
/// instead of its value (`--stage --overlap-comm`): it starts with a dash
/// and is not a number.
inline bool looksLikeOption(llvm::StringRef arg) {
  return arg.size() > 1 && arg[0] == '-' &&
         !(llvm::isDigit(arg[1]) || arg[1] == '.');
}

/// A command line with each llvm::cl flag (an option whose value is
/// optional: a bool) and a true or false after it joined, `--zeropp false`
/// as `--zeropp=false`. Built after the tool's options are registered, for
/// cl::ParseCommandLineOptions.
class FlagArgs {
public:
  FlagArgs(int argc, char **argv) {
    const auto &options = llvm::cl::getRegisteredOptions();
    for (int i = 0; i < argc; ++i) {
      llvm::StringRef arg = argv[i];
      if (i > 0 && i + 1 < argc && arg.size() > 1 && arg[0] == '-' &&
          !arg.contains('=') && arg != "--") {
        auto it = options.find(arg.ltrim('-'));
        if (it != options.end() &&
            it->second->getValueExpectedFlag() == llvm::cl::ValueOptional &&
            parseFlagValue(argv[i + 1])) {
          joined.push_back((arg + "=" + argv[i + 1]).str());
          args.push_back(joined.back().c_str());
          ++i;
          continue;
        }
      }
      args.push_back(argv[i]);
    }
  }

  int argc() const { return static_cast<int>(args.size()); }
  const char *const *argv() const { return args.data(); }

private:
  /// The joined arguments (a deque: their addresses stay put).
  std::deque<std::string> joined;
  std::vector<const char *> args;
};

} // namespace zero

#endif // ZERO_SUPPORT_COMMANDLINE_H
