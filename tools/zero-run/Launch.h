//===- Launch.h - Starts a job's ranks through mpirun -----------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// A LaunchPlan says where the ranks run (hosts with their slots, or N ranks
// on this machine), what they run and with which environment; launch()
// starts them through Open MPI's mpirun, streams rank 0's lines, keeps the
// other ranks' lines for when the job fails, forwards SIGINT and SIGTERM,
// and says which ranks failed and how.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RUN_LAUNCH_H
#define ZERO_RUN_LAUNCH_H

#include "Env.h"
#include "Hostfile.h"

#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>
#include <vector>

namespace zero {
namespace run {

/// What starts the ranks: Open MPI's mpirun, or Slurm's srun with its PMIx
/// plugin inside an allocation (Slurm.h).
enum class Launcher { Mpirun, Srun };

struct LaunchPlan {
  /// The hosts in rank order (ranks fill a host's slots, then the next
  /// host's); empty: `ranks` ranks on this machine.
  std::vector<Host> hosts;
  int64_t ranks = 1;
  /// Passed to the program as --ranks-per-node (0: not passed).
  int64_t ranksPerNode = 0;
  Environment env;
  std::string program;
  std::vector<std::string> programArgs;
  /// The launcher (mpirun, or a replacement named by --mpirun) and options
  /// of its own placed before the hosts.
  std::string mpirun = "mpirun";
  std::vector<std::string> mpirunOptions;
  Launcher launcher = Launcher::Mpirun;
  std::string srun = "srun";
  /// Where the ranks write their flight records on a watchdog timeout.
  std::string flightDir;

  /// The host rank `rank` runs on ("" on this machine).
  std::string hostOf(int64_t rank) const;
};

/// How one rank ended, when it did not end well.
struct RankFailure {
  enum Kind { ExitCode, Signal, Abort };
  int64_t rank = -1;
  std::string host;
  Kind kind = ExitCode;
  /// The exit code, the signal or MPI_Abort's error code.
  int code = 0;
  /// mpirun's words for it ("Killed", ...), if it gave them.
  std::string detail;
};

struct LaunchResult {
  /// The status zero-run exits with: mpirun's, or 128 + the signal that
  /// ended mpirun.
  int status = 0;
  std::vector<RankFailure> failures;
  /// A rank's collective watchdog ended the job.
  bool watchdog = false;
  /// The ranks the watchdog's line names as stuck or lost (it names one
  /// when a rank never started the step).
  std::vector<int64_t> hungRanks;
  /// After a watchdog: the ranks whose flight records stop before the
  /// collective the others issued (launchOn fills it), the likely culprits.
  std::vector<int64_t> stalledRanks;
  /// zero-run forwarded SIGINT or SIGTERM (the signal, 0: none).
  int forwardedSignal = 0;
  /// mpirun could not be started.
  std::string startError;
};

/// mpirun's command line for `plan`.
std::vector<std::string> mpirunCommand(const LaunchPlan &plan);

/// The launcher's command line for `plan` (mpirun's or srun's).
std::vector<std::string> launchCommand(const LaunchPlan &plan);

/// What every rank runs: the program, --ranks-per-node, its options.
std::vector<std::string> programCommand(const LaunchPlan &plan);

/// Runs the plan to its end; rank 0's lines go to `out` and `err` as it
/// prints them, the other ranks' lines (prefixed `[rank R]`) only when the
/// job fails.
LaunchResult launch(const LaunchPlan &plan, llvm::raw_ostream &out,
                    llvm::raw_ostream &err);

} // namespace run
} // namespace zero

#endif // ZERO_RUN_LAUNCH_H
