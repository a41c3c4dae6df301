//===- Slurm.h - Runs a job inside a Slurm allocation -----------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// Inside a Slurm allocation (SLURM_JOB_ID set: an sbatch script or salloc)
// the hosts and slots come from the allocation: SLURM_JOB_NODELIST expanded
// by `scontrol show hostnames`, the tasks on each node from
// SLURM_TASKS_PER_NODE (`2(x3),1`) or SLURM_NTASKS_PER_NODE. The ranks start
// through `srun --mpi=pmix` (Open MPI gets its world from Slurm's PMIx
// plugin), or through mpirun on the allocation's nodes (Open MPI's Slurm
// support starts its daemons with srun).
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RUN_SLURM_H
#define ZERO_RUN_SLURM_H

#include "Hostfile.h"
#include "Job.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace zero {
namespace run {

struct LaunchPlan;
struct RankFailure;

/// A Slurm job's nodes, each with the slots of the tasks it runs (0..n-1).
struct SlurmJob {
  std::string id;
  /// SLURM_JOB_NODELIST as Slurm wrote it, for messages.
  std::string nodeList;
  std::vector<Host> nodes;

  int64_t tasks() const;
  const Host *find(llvm::StringRef name) const;
  /// "node1: 2, node2: 2", for messages.
  std::string describe() const;
};

/// The Slurm job zero-run runs in (SLURM_JOB_ID), "" outside one.
std::string slurmJobId();

/// The tasks of the job step zero-run runs in (`srun zero-run`), 0 outside
/// one (a batch script, salloc's shell). Started as one of several tasks,
/// each would start every rank.
int64_t slurmStepTasks();

/// Tasks per node in Slurm's compressed form (`2(x3),1` is 2, 2, 2, 1);
/// errors name `var`.
llvm::Expected<std::vector<int64_t>> parseTasksPerNode(llvm::StringRef value,
                                                       llvm::StringRef var);

/// The job of the environment: its node list expanded by `scontrol show
/// hostnames` (`scontrol` names the command), its tasks per node.
llvm::Expected<SlurmJob> readSlurmJob(llvm::StringRef scontrol = "scontrol");

/// The first `ranks` tasks of the job (all of them when 0), node by node.
llvm::Expected<std::vector<Host>> slurmHosts(const SlurmJob &job,
                                             int64_t ranks);

/// Checks that every host of a hostfile used inside the job is one of its
/// nodes with at least as many tasks as the slots it gets.
llvm::Error checkHostsInJob(const std::vector<Host> &hosts, const SlurmJob &job,
                            llvm::StringRef hostfile);

/// The hosts of a job inside a Slurm allocation (or asked for with
/// --launcher srun): the allocation's nodes and tasks, the first --np of
/// them, or a --hostfile's hosts, which win as in DeepSpeed's launcher but
/// must be nodes of the allocation; and the launcher, srun with its PMIx
/// plugin unless --launcher mpirun or srun has no such plugin.
llvm::Expected<HostSet> resolveSlurmHosts(const JobOptions &options);

/// Why srun cannot start Open MPI's ranks ("" when `srun --mpi=list`
/// offers pmix; `srun` names the command): no such command, a failure, or
/// no PMIx plugin.
std::string srunWithoutPmix(llvm::StringRef srun = "srun");

/// srun's command line for `plan`: one task per rank, node by node, with
/// Slurm's PMIx plugin, each line labelled with its task (its rank), and
/// the step ended when a task fails.
std::vector<std::string> srunCommand(const LaunchPlan &plan);

/// The failed ranks srun names in its own lines (`srun: error: node2:
/// tasks 2-3: Exited with exit code 1`), up to the point where it ends the
/// step's other tasks: those after it failed because srun stopped them.
std::vector<RankFailure> srunFailures(llvm::StringRef text,
                                      const LaunchPlan &plan);

} // namespace run
} // namespace zero

#endif // ZERO_RUN_SLURM_H
