//===- Elastic.h - zero-run --elastic: restarts on fewer nodes --*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// With --elastic, a job whose launch fails (a rank killed by a signal, a
// non-zero exit, a collective watchdog) is restarted on the nodes that are
// left: the failed ranks' nodes are dropped, the model is recompiled for the
// smaller world with the same global batch (zero-pipeline's
// elastic-micro-batch: the accumulation grows first, then the micro batch
// shrinks), and the program resumes from the save directory's latest
// complete checkpoint, which the runtime reshards for the new world as it
// loads it. Below --min-nodes, or after --max-restarts restarts, zero-run
// stops and the checkpoint stays loadable.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RUN_ELASTIC_H
#define ZERO_RUN_ELASTIC_H

#include "Job.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace zero {
namespace run {

struct ElasticOptions {
  bool enabled = false;
  /// The fewest nodes a restart runs on.
  int64_t minNodes = 1;
  /// The most restarts; a failure after them ends the job.
  int64_t maxRestarts = 3;
};

/// The value of a training option (`--name V` or `--name=V`) in `args`, the
/// last one given; empty when absent.
std::string trainOption(const std::vector<std::string> &args,
                        llvm::StringRef name);

/// `args` without the option `name` (and its value when `valued`).
std::vector<std::string>
withoutTrainOption(const std::vector<std::string> &args, llvm::StringRef name,
                   bool valued);

/// The training arguments of a restart: the job's, resuming from the save
/// directory `save` when `latest` (the step directory its `latest` names)
/// is not empty; --resume, --init-from and --overwrite of the first launch
/// give way to it.
std::vector<std::string> restartArgs(const std::vector<std::string> &args,
                                     const std::string &save,
                                     const std::string &latest);

/// The micro batch (rows per rank and micro step) of a compiled program,
/// from the scheduled program the compile cache keeps beside it.
llvm::Expected<int64_t> microBatchOf(const CompiledProgram &program);

/// Checks what --elastic needs before anything starts: a hostfile, a
/// --min-nodes the hosts reach, and a --save directory to resume from.
llvm::Error checkElastic(const JobOptions &options,
                         const ElasticOptions &elastic);

/// The job under --elastic; returns zero-run's exit status.
int runElastic(const JobOptions &options, const ElasticOptions &elastic);

} // namespace run
} // namespace zero

#endif // ZERO_RUN_ELASTIC_H
