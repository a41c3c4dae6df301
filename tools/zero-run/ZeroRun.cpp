//===- ZeroRun.cpp - Compiles and launches a job on a cluster -------------===//
//
// Part of the zero-mlir project.
//
//   zero-run [--hostfile FILE | --np N] [--include S | --exclude S]
//            [--env NAME=VALUE]... model.mlir --config ds_config.json
//            [zero-compile options] -- [training options]
//   zero-run --analyze DIR
//
// compiles the model for the world the hosts give (ranks per node = the
// hostfile's slots), cached by schedule hash, and launches it through
// Open MPI's mpirun (Job.h). --analyze reads the flight records a hung
// job's ranks wrote.
//
//===----------------------------------------------------------------------===//

#include "Elastic.h"
#include "Job.h"

#include "zero/Flight/FlightAnalysis.h"
#include "zero/Pipelines/PipelineFlags.h"
#include "zero/Support/CommandLine.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

using namespace llvm;
using namespace zero::run;

static const char *const kUsage =
    "usage: zero-run [--hostfile FILE | --np N] [--include S | --exclude S]\n"
    "                [--env NAME=VALUE]... [--cache-dir DIR] [--mpirun PATH]\n"
    "                [--launcher mpirun|srun]\n"
    "                [--dry-run] model.mlir [--config ds_config.json]\n"
    "                [zero-compile options] -- [training options]\n"
    "       zero-run --analyze DIR\n"
    "\n"
    "  --hostfile FILE    hosts in DeepSpeed's format: 'hostname slots=N' a\n"
    "                     line; every host runs N ranks (ranks per node)\n"
    "  --np N             N ranks on this machine (in a Slurm allocation:\n"
    "                     its first N tasks)\n"
    "  --include S        only these hosts and slots: host1@host2:0,2\n"
    "  --exclude S        all but these hosts and slots\n"
    "  --env NAME=VALUE   set in every rank's environment (after the\n"
    "                     .deepspeed_env files; DS_ENV_FILE names them)\n"
    "  --cache-dir DIR    where compiled programs are kept by schedule hash\n"
    "                     (default $ZERO_RUN_CACHE, else ~/.cache/zero-run)\n"
    "  --mpirun PATH      the mpirun to launch with (default: mpirun)\n"
    "  --launcher L       mpirun or srun (or slurm); inside a Slurm\n"
    "                     allocation the hosts are its nodes and tasks\n"
    "                     (--np N: the first N), started by srun --mpi=pmix\n"
    "                     where srun has PMIx, else by mpirun\n"
    "  --dry-run          compile, then print the launcher's command line\n"
    "  --elastic          on a failure, drop the failed node(s), recompile\n"
    "                     for the smaller world (same global batch) and\n"
    "                     resume from the latest checkpoint of --save\n"
    "  --min-nodes K      --elastic stops below K nodes (default 1)\n"
    "  --max-restarts R   --elastic restarts at most R times (default 3)\n"
    "  --analyze DIR      report where the flight records in DIR diverge\n"
    "\n"
    "As root (a container, a CI runner), zero-run passes --allow-run-as-root\n"
    "to Open MPI's mpirun, which otherwise refuses to start; the ranks then\n"
    "run as root, as the launcher does. Nothing else changes.\n";

static int usageError(const Twine &msg) {
  WithColor::error(errs(), "zero-run") << msg << "\n";
  errs() << kUsage;
  return 2;
}

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  JobOptions options;
  std::string analyze;
  std::vector<std::string> positional;
  // zero-run's own options take a value, except --dry-run, --elastic and
  // --help.
  llvm::StringSet<> valued = {"hostfile",  "np",          "include",
                              "exclude",   "env",         "cache-dir",
                              "mpirun",    "launcher",    "analyze",
                              "min-nodes", "max-restarts"};
  ElasticOptions elastic;
  bool elasticCounts = false;
  // zero-run decides these from the hosts.
  llvm::StringSet<> worldFlags = {"world-size", "ranks-per-node", "o", "emit"};
  int i = 1;
  for (; i < argc; ++i) {
    StringRef arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (!arg.starts_with("-") || arg == "-") {
      positional.push_back(arg.str());
      continue;
    }
    StringRef body = arg.ltrim('-');
    auto [name, inlineValue] = body.split('=');
    bool hasValue = body.contains('=');
    if (name == "help" || name == "h") {
      outs() << kUsage;
      return 0;
    }
    // zero-run's flags and zero-pipeline's (bools) take no value after a
    // space, except a literal true or false (--overlap-comm false).
    bool flag = name == "dry-run" || name == "elastic" ||
                mlir::zero::isZeroPipelineFlag(name);
    if (!flag && !valued.contains(name) && !worldFlags.contains(name) &&
        name != "target" && !mlir::zero::isZeroPipelineOption(name))
      return usageError("unknown option '" + arg.split('=').first +
                        "' (zero-run's are listed below, zero-compile's "
                        "in zero-compile --help)");
    std::string value = inlineValue.str();
    if (flag) {
      std::optional<bool> on = ::zero::parseFlagValue(value);
      if (!hasValue) {
        on = true;
        if (i + 1 < argc)
          if (std::optional<bool> given = ::zero::parseFlagValue(argv[i + 1])) {
            on = given;
            ++i;
          }
      }
      if (!on)
        return usageError("option --" + name + " is a flag: --" + name +
                          " sets it, --" + name + "=false clears it; got '" +
                          value + "'");
      if (name == "dry-run")
        options.dryRun = *on;
      else if (name == "elastic")
        elastic.enabled = *on;
      else
        options.compileOptions.push_back("--" + name.str() + "=" +
                                         (*on ? "true" : "false"));
      continue;
    }
    if (!hasValue) {
      if (i + 1 >= argc)
        return usageError("option --" + name + " needs a value");
      if (::zero::looksLikeOption(argv[i + 1]))
        return usageError("option --" + name +
                          " needs a value, got the option '" + argv[i + 1] +
                          "' (write --" + name +
                          "=VALUE for a value that starts with '-')");
      value = argv[++i];
    }
    if (name == "world-size" || name == "ranks-per-node")
      return usageError("--" + name +
                        " is zero-run's to choose: the world is the "
                        "hostfile's slots (or --np)");
    if (name == "o" || name == "emit")
      return usageError(arg.split('=').first +
                        ": zero-run builds the program into its cache "
                        "(--cache-dir)");
    if (name == "hostfile") {
      options.hostfile = value;
    } else if (name == "np") {
      if (StringRef(value).getAsInteger(10, options.np) || options.np < 1)
        return usageError("--np needs a positive number of ranks, got '" +
                          value + "'");
    } else if (name == "include") {
      options.include = value;
    } else if (name == "exclude") {
      options.exclude = value;
    } else if (name == "env") {
      auto var = parseAssignment(value, "--env");
      if (!var)
        return usageError(toString(var.takeError()));
      options.env.push_back(std::move(*var));
    } else if (name == "cache-dir") {
      options.cacheDir = value;
    } else if (name == "mpirun") {
      options.mpirun = value;
    } else if (name == "launcher") {
      // `slurm` is DeepSpeed's name for srun.
      if (value == "slurm")
        value = "srun";
      if (value != "mpirun" && value != "srun")
        return usageError("--launcher is mpirun or srun (or slurm), got '" +
                          value + "'");
      options.launcher = value;
    } else if (name == "analyze") {
      analyze = value;
    } else if (name == "min-nodes" || name == "max-restarts") {
      int64_t n = 0;
      bool nodes = name == "min-nodes";
      if (StringRef(value).getAsInteger(10, n) || n < (nodes ? 1 : 0))
        return usageError("--" + name + " needs " +
                          (nodes ? "a positive number of nodes"
                                 : "a number of restarts (0 or more)") +
                          ", got '" + value + "'");
      (nodes ? elastic.minNodes : elastic.maxRestarts) = n;
      elasticCounts = true;
    } else {
      // zero-compile's option, passed on as given.
      options.compileOptions.push_back("--" + name.str());
      options.compileOptions.push_back(value);
    }
  }
  options.trainArgs.assign(argv + i, argv + argc);

  if (!analyze.empty()) {
    if (!positional.empty() || !options.hostfile.empty() || options.np)
      return usageError("--analyze DIR takes nothing else");
    return zero::flight::analyzeDirectory(analyze, "zero-run", outs(), errs());
  }
  if (!options.hostfile.empty() && options.np)
    return usageError("--hostfile and --np are mutually exclusive");
  if ((!options.include.empty() || !options.exclude.empty()) &&
      options.hostfile.empty())
    return usageError("--include and --exclude select from a --hostfile");
  if (positional.size() != 1)
    return usageError(positional.empty()
                          ? "no model file"
                          : "one model file expected, got '" + positional[0] +
                                "' and '" + positional[1] + "'");
  options.model = positional[0];
  for (const std::string &a : options.trainArgs) {
    StringRef flag = StringRef(a).split('=').first;
    if (flag == "--ranks-per-node")
      return usageError("--ranks-per-node after '--' is zero-run's to pass: "
                        "it is the hostfile's slots");
  }
  // The Slurm backend (Slurm.h) gives resolveHosts the allocation's nodes
  // when zero-run runs inside one; --elastic runs its restart loop
  // (Elastic.h) over Job.h's steps instead of runJob's single pass.
  if (elasticCounts && !elastic.enabled)
    return usageError("--min-nodes and --max-restarts go with --elastic");
  if (elastic.enabled) {
    if (options.dryRun)
      return usageError("--elastic restarts a job it runs; not with --dry-run");
    return runElastic(options, elastic);
  }
  return runJob(options);
}
