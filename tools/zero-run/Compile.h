//===- Compile.h - Compiles a job's program, cached by schedule -*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// zero-run compiles the model for the world it is given through zero-compile
// and keeps the executable in a cache directory under a hash of the
// scheduled program (the step zero-pipeline, zero-plan-memory and
// zero-verify-schedule produce), the backend and the compiler and runtime
// it was built with: an unchanged schedule is not rebuilt, whatever the
// command line that produced it.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RUN_COMPILE_H
#define ZERO_RUN_COMPILE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace zero {
namespace run {

struct CompileRequest {
  /// The zero-compile executable.
  std::string zeroCompile;
  std::string model;
  /// zero-compile's options other than the world (--world-size,
  /// --ranks-per-node, -o and --emit are zero-run's).
  std::vector<std::string> options;
  int64_t worldSize = 1;
  /// 0: no topology (one node).
  int64_t ranksPerNode = 0;
  std::string cacheDir;
};

struct CompiledProgram {
  std::string executable;
  /// The schedule hash (hex), the name of its cache entry.
  std::string hash;
  /// Whether the executable was in the cache already.
  bool cached = false;
};

/// The default cache directory: $ZERO_RUN_CACHE, else
/// $XDG_CACHE_HOME/zero-run, else ~/.cache/zero-run.
std::string defaultCacheDir();

/// Schedules the model for the request's world and returns the cached
/// executable of that schedule, building it first when it is not there.
/// A schedule zero-compile refuses (a batch that does not split over the
/// world, say) is an error that carries zero-compile's own message.
llvm::Expected<CompiledProgram> compileCached(const CompileRequest &request);

} // namespace run
} // namespace zero

#endif // ZERO_RUN_COMPILE_H
