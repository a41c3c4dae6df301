//===- Hostfile.h - DeepSpeed hostfiles and host selection ------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// The hosts a job runs on, from a hostfile in DeepSpeed's format (one
// `hostname slots=N` a line, `#` comments, blank lines) narrowed by
// DeepSpeed's --include/--exclude syntax (`host1@host2:0,2`: every slot of
// host1, slots 0 and 2 of host2). Every refusal names the hostfile and line.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RUN_HOSTFILE_H
#define ZERO_RUN_HOSTFILE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace zero {
namespace run {

/// One host of a job and the slots (local ranks, and on GPUs the device
/// indices) it runs.
struct Host {
  std::string name;
  /// The slots used, ascending (all of the hostfile's by default).
  std::vector<int64_t> slots;
  /// Where the host is listed (0: not from a hostfile).
  int64_t line = 0;
};

/// A parsed hostfile: its hosts in file order, each with all its slots.
struct Hostfile {
  std::string path;
  std::vector<Host> hosts;

  const Host *find(llvm::StringRef name) const;
};

/// Parses a hostfile's text; errors read `PATH:LINE: ...`.
llvm::Expected<Hostfile> parseHostfile(llvm::StringRef text,
                                       llvm::StringRef path);
/// Reads and parses the hostfile at `path`.
llvm::Expected<Hostfile> readHostfile(llvm::StringRef path);

/// The hosts and slots an --include or --exclude filter leaves (at most one
/// of them non-empty), in hostfile order. A host or slot the hostfile does
/// not list, and a filter that leaves nothing, are errors.
llvm::Expected<std::vector<Host>> selectHosts(const Hostfile &file,
                                              llvm::StringRef include,
                                              llvm::StringRef exclude);

/// The ranks per node of `hosts`: every host must run the same number of
/// slots (the schedule's topology places ranks in equal blocks by node).
llvm::Expected<int64_t> ranksPerNode(const std::vector<Host> &hosts,
                                     llvm::StringRef path);

} // namespace run
} // namespace zero

#endif // ZERO_RUN_HOSTFILE_H
