//===- Env.h - The environment a job's ranks get ----------------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// What zero-run exports to every rank, as DeepSpeed's launcher does: the
// variables of zero-run's own environment whose names start with a known
// prefix (ZRT_, OMP_, NCCL_, UCX_), then the lines of the `.deepspeed_env`
// files (~/.deepspeed_env, then ./.deepspeed_env; DS_ENV_FILE replaces the
// name, and an absolute DS_ENV_FILE is the file itself), then every
// --env NAME=VALUE. A later one replaces an earlier one of the same name.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RUN_ENV_H
#define ZERO_RUN_ENV_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace zero {
namespace run {

struct EnvVar {
  std::string name, value;
  /// Where it came from, for messages: "--env", "PATH:LINE" or "environment".
  std::string origin;
};

/// An ordered set of variables; setting a name again replaces its value.
class Environment {
public:
  void set(EnvVar var);
  const std::vector<EnvVar> &vars() const { return list; }
  const EnvVar *find(llvm::StringRef name) const;

private:
  std::vector<EnvVar> list;
};

/// Parses `NAME=VALUE` (from `origin`, for the message).
llvm::Expected<EnvVar> parseAssignment(llvm::StringRef text,
                                       llvm::StringRef origin);

/// Adds the lines of an env file: NAME=VALUE each, blank lines and `#`
/// comments skipped; errors read `PATH:LINE: ...`.
llvm::Error readEnvFile(llvm::StringRef path, Environment &env);

/// The env files DeepSpeed's launcher reads, those that exist, in order.
std::vector<std::string> envFiles();

/// The variables of this process's environment that zero-run passes on.
void addExportedEnvironment(Environment &env);

} // namespace run
} // namespace zero

#endif // ZERO_RUN_ENV_H
