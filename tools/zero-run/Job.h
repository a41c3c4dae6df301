//===- Job.h - One zero-run job: hosts, program, launch ---------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// What zero-run's command line asks for, and the three steps of running
// it: the hosts (resolveHosts), the program compiled for them
// (compileFor) and one launch on them (launchOn). runJob does the three
// once. The restart loop of --elastic (Elastic.h) calls the same steps
// again after a failure: launchOn's result names the failed ranks and
// their hosts, the loop drops those hosts, compiles for the world that is
// left and relaunches from the last checkpoint.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RUN_JOB_H
#define ZERO_RUN_JOB_H

#include "Compile.h"
#include "Env.h"
#include "Hostfile.h"
#include "Launch.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>
#include <vector>

namespace zero {
namespace run {

struct JobOptions {
  std::string hostfile;
  /// --np: ranks on this machine (0: not given).
  int64_t np = 0;
  std::string include, exclude;
  std::string model;
  /// zero-compile's options (the world comes from the hosts).
  std::vector<std::string> compileOptions;
  /// The training program's options (after `--`).
  std::vector<std::string> trainArgs;
  /// --env NAME=VALUE, in order.
  std::vector<EnvVar> env;
  std::string cacheDir;
  std::string mpirun = "mpirun";
  /// --launcher: "mpirun", "srun", or "" (srun inside a Slurm allocation
  /// whose srun has the PMIx plugin, else mpirun).
  std::string launcher;
  /// Print mpirun's command line instead of running it.
  bool dryRun = false;
};

/// The hosts the job runs on, in rank order, and the ranks per node (0: no
/// topology, every rank on this machine). The Slurm backend (Slurm.h) adds
/// its source here: the nodes of the allocation zero-run runs in.
struct HostSet {
  std::vector<Host> hosts;
  int64_t ranks = 0;
  int64_t ranksPerNode = 0;
  /// Where the hosts came from, for messages (the hostfile's path).
  std::string source;
  /// What starts the ranks on them.
  Launcher launcher = Launcher::Mpirun;
  /// Lines zero-run prints about them before it compiles (Slurm's).
  std::vector<std::string> notes;
};
llvm::Expected<HostSet> resolveHosts(const JobOptions &options);

/// The environment every rank gets (Env.h's order).
llvm::Expected<Environment> jobEnvironment(const JobOptions &options);

/// The program compiled for `hosts`, cached by schedule hash; prints the
/// cache line to `log`.
llvm::Expected<CompiledProgram> compileFor(const JobOptions &options,
                                           const HostSet &hosts,
                                           llvm::raw_ostream &log);

/// The directory the ranks write their flight records to: the training
/// program's --flight-dir, else its --log-json file's directory, else the
/// working directory.
std::string flightDirOf(const std::vector<std::string> &trainArgs);

/// The launch plan of `program` on `hosts`.
LaunchPlan planFor(const JobOptions &options, const HostSet &hosts,
                   const Environment &env, const CompiledProgram &program);

/// How a rank failed, in words: "rank 2 (host node2) was killed by signal
/// 9 (Killed)".
std::string describeFailure(const RankFailure &f);

/// Launches the plan once, then reports on `err` how each failed rank
/// ended and, when a collective watchdog ended the job and the ranks wrote
/// flight records, their analysis on `out`.
LaunchResult launchOn(const LaunchPlan &plan, llvm::raw_ostream &out,
                      llvm::raw_ostream &err);

/// The whole job, once; returns zero-run's exit status.
int runJob(const JobOptions &options);

} // namespace run
} // namespace zero

#endif // ZERO_RUN_JOB_H
