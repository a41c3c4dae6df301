//===- Job.cpp - One zero-run job: hosts, program, launch -----------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "Job.h"
#include "Slurm.h"

#include "zero/Flight/FlightAnalysis.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/WithColor.h"

#include <chrono>

#include <unistd.h>

using namespace llvm;
using namespace zero::run;

static Error fail(const Twine &msg) {
  return createStringError(inconvertibleErrorCode(), msg.str());
}

Expected<HostSet> zero::run::resolveHosts(const JobOptions &options) {
  if (!slurmJobId().empty() || options.launcher == "srun")
    return resolveSlurmHosts(options);
  HostSet set;
  if (!options.hostfile.empty()) {
    auto file = readHostfile(options.hostfile);
    if (!file)
      return file.takeError();
    auto hosts = selectHosts(*file, options.include, options.exclude);
    if (!hosts)
      return hosts.takeError();
    auto perNode = ranksPerNode(*hosts, options.hostfile);
    if (!perNode)
      return perNode.takeError();
    set.hosts = std::move(*hosts);
    set.ranksPerNode = *perNode;
    set.ranks = *perNode * static_cast<int64_t>(set.hosts.size());
    set.source = options.hostfile;
    return set;
  }
  if (options.np > 0) {
    set.ranks = options.np;
    set.source = "--np";
    return set;
  }
  return fail("no hosts: give --hostfile FILE (one 'hostname slots=N' a "
              "line) or --np N (N ranks on this machine)");
}

Expected<Environment> zero::run::jobEnvironment(const JobOptions &options) {
  Environment env;
  addExportedEnvironment(env);
  for (const std::string &file : envFiles())
    if (Error e = readEnvFile(file, env))
      return std::move(e);
  for (const EnvVar &v : options.env)
    env.set(v);
  return env;
}

/// zero-compile beside this executable, else on PATH.
static std::string zeroCompilePath() {
  std::string self = sys::fs::getMainExecutable(
      nullptr, reinterpret_cast<void *>(&zeroCompilePath));
  SmallString<256> path(sys::path::parent_path(self));
  sys::path::append(path, "zero-compile");
  if (sys::fs::can_execute(path))
    return std::string(path);
  if (auto found = sys::findProgramByName("zero-compile"))
    return *found;
  return "zero-compile";
}

Expected<CompiledProgram> zero::run::compileFor(const JobOptions &options,
                                                const HostSet &hosts,
                                                raw_ostream &log) {
  CompileRequest request;
  request.zeroCompile = zeroCompilePath();
  request.model = options.model;
  request.options = options.compileOptions;
  request.worldSize = hosts.ranks;
  request.ranksPerNode = hosts.ranksPerNode;
  // Absolute: every host's mpirun daemon starts the same path.
  SmallString<256> cache(options.cacheDir.empty() ? defaultCacheDir()
                                                  : options.cacheDir);
  sys::fs::make_absolute(cache);
  request.cacheDir = std::string(cache);
  auto program = compileCached(request);
  if (!program)
    return program.takeError();
  log << "zero-run: schedule " << program->hash << " for " << hosts.ranks
      << " rank(s)";
  if (hosts.ranksPerNode)
    log << " on " << hosts.hosts.size() << " node(s) of " << hosts.ranksPerNode;
  log << ": " << (program->cached ? "cached" : "built") << " "
      << program->executable << "\n";
  log.flush();
  return program;
}

std::string zero::run::flightDirOf(const std::vector<std::string> &args) {
  std::string flightDir, logJson;
  for (size_t i = 0; i < args.size(); ++i) {
    StringRef a = args[i];
    for (auto [flag, out] :
         {std::pair<StringRef, std::string *>{"--flight-dir", &flightDir},
          {"--log-json", &logJson}}) {
      if (a == flag && i + 1 < args.size())
        *out = args[i + 1];
      else if (a.starts_with(flag) &&
               a.drop_front(flag.size()).starts_with("="))
        *out = a.drop_front(flag.size() + 1).str();
    }
  }
  if (!flightDir.empty())
    return flightDir;
  StringRef parent = sys::path::parent_path(logJson);
  return parent.empty() ? "." : parent.str();
}

LaunchPlan zero::run::planFor(const JobOptions &options, const HostSet &hosts,
                              const Environment &env,
                              const CompiledProgram &program) {
  LaunchPlan plan;
  plan.hosts = hosts.hosts;
  plan.ranks = hosts.ranks;
  plan.ranksPerNode = hosts.ranksPerNode;
  plan.env = env;
  plan.program = program.executable;
  plan.programArgs = options.trainArgs;
  plan.mpirun = options.mpirun;
  plan.launcher = hosts.launcher;
  // Open MPI refuses to start as root unless told; containers and CI
  // runners are root, and DeepSpeed's and torchrun's launchers run there.
  if (plan.launcher == Launcher::Mpirun && ::geteuid() == 0)
    plan.mpirunOptions.push_back("--allow-run-as-root");
  plan.flightDir = flightDirOf(options.trainArgs);
  return plan;
}

std::string zero::run::describeFailure(const RankFailure &f) {
  std::string where = "rank " + std::to_string(f.rank) +
                      (f.host.empty() ? "" : " (host " + f.host + ")");
  switch (f.kind) {
  case RankFailure::Signal:
    return where + " was killed by signal " + std::to_string(f.code) +
           (f.detail.empty() ? "" : " (" + f.detail + ")");
  case RankFailure::Abort:
    return where + " aborted the job (MPI_Abort, error code " +
           std::to_string(f.code) + ")";
  case RankFailure::ExitCode:
    break;
  }
  return where + " exited with status " + std::to_string(f.code);
}

LaunchResult zero::run::launchOn(const LaunchPlan &plan, raw_ostream &out,
                                 raw_ostream &err) {
  // A second's slack: file times may be coarser than the clock.
  auto start = std::chrono::system_clock::now() - std::chrono::seconds(1);
  LaunchResult result = launch(plan, out, err);
  if (!result.startError.empty())
    return result;
  for (const RankFailure &f : result.failures)
    err << "zero-run: " << describeFailure(f) << "\n";
  if (result.watchdog) {
    std::vector<std::string> fresh;
    for (const std::string &path : zero::flight::findRecords(plan.flightDir)) {
      sys::fs::file_status st;
      if (!sys::fs::status(path, st) && st.getLastModificationTime() >= start)
        fresh.push_back(path);
    }
    if (fresh.empty()) {
      err << "zero-run: a collective watchdog ended the job, and no rank "
             "wrote a flight record into '"
          << plan.flightDir << "'\n";
    } else {
      err << "zero-run: a collective watchdog ended the job; the ranks' "
             "flight records in '"
          << plan.flightDir << "' say:\n";
      err.flush();
      zero::flight::analyzeDirectory(plan.flightDir, "zero-run", out, err,
                                     &result.stalledRanks);
      out.flush();
      for (int64_t rank : result.stalledRanks)
        if (!plan.hostOf(rank).empty())
          err << "zero-run: rank " << rank << ", which stopped first, runs on "
              << "host " << plan.hostOf(rank) << "\n";
    }
  }
  err.flush();
  out.flush();
  return result;
}

static std::string shellQuote(StringRef s) {
  if (!s.empty() && all_of(s, [](char c) {
        return isAlnum(c) || StringRef("_-./:=,@%+").contains(c);
      }))
    return s.str();
  std::string q = "'";
  for (char c : s)
    q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

int zero::run::runJob(const JobOptions &options) {
  auto error = [](Error e) {
    WithColor::error(errs(), "zero-run") << toString(std::move(e)) << "\n";
    return 1;
  };
  auto hosts = resolveHosts(options);
  if (!hosts)
    return error(hosts.takeError());
  for (const std::string &note : hosts->notes)
    outs() << "zero-run: " << note << "\n";
  auto env = jobEnvironment(options);
  if (!env)
    return error(env.takeError());
  auto program = compileFor(options, *hosts, outs());
  if (!program)
    return error(program.takeError());
  LaunchPlan plan = planFor(options, *hosts, *env, *program);
  if (options.dryRun) {
    std::string line;
    for (const std::string &a : launchCommand(plan))
      line += (line.empty() ? "" : " ") + shellQuote(a);
    outs() << line << "\n";
    return 0;
  }
  LaunchResult result = launchOn(plan, outs(), errs());
  if (!result.startError.empty())
    return 127;
  if (result.forwardedSignal && result.status == 0)
    return 128 + result.forwardedSignal;
  return result.status;
}
