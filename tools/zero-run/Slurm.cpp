//===- Slurm.cpp - Runs a job inside a Slurm allocation -------------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "Slurm.h"
#include "Launch.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/Regex.h"

#include <csignal>
#include <cstring>
#include <optional>

using namespace llvm;
using namespace zero::run;

int64_t SlurmJob::tasks() const {
  int64_t n = 0;
  for (const Host &h : nodes)
    n += static_cast<int64_t>(h.slots.size());
  return n;
}

const Host *SlurmJob::find(StringRef name) const {
  for (const Host &h : nodes)
    if (h.name == name)
      return &h;
  return nullptr;
}

std::string SlurmJob::describe() const {
  std::string text;
  for (const Host &h : nodes)
    text += (text.empty() ? "" : ", ") + h.name + ": " +
            std::to_string(h.slots.size());
  return text;
}

static std::string getEnv(const char *name) {
  std::optional<std::string> v = sys::Process::GetEnv(name);
  return v ? *v : std::string();
}

std::string zero::run::slurmJobId() {
  std::string id = getEnv("SLURM_JOB_ID");
  return id.empty() ? getEnv("SLURM_JOBID") : id;
}

int64_t zero::run::slurmStepTasks() {
  // A batch script or salloc's shell is in no step; srun's tasks are.
  int64_t n = 0;
  if (getEnv("SLURM_STEP_ID").empty() ||
      StringRef(getEnv("SLURM_STEP_NUM_TASKS")).getAsInteger(10, n))
    return 0;
  return n;
}

Expected<std::vector<int64_t>> zero::run::parseTasksPerNode(StringRef value,
                                                            StringRef var) {
  std::vector<int64_t> tasks;
  SmallVector<StringRef> items;
  value.split(items, ',');
  for (StringRef item : items) {
    StringRef text = item.trim();
    int64_t count = 0, repeat = 1;
    size_t paren = text.find('(');
    StringRef countText = text.take_front(paren);
    bool bad = countText.getAsInteger(10, count) || count < 1;
    if (!bad && paren != StringRef::npos) {
      StringRef rest = text.drop_front(paren);
      bad = !rest.consume_front("(x") || !rest.consume_back(")") ||
            rest.getAsInteger(10, repeat) || repeat < 1;
    }
    if (bad)
      return createStringError(
          inconvertibleErrorCode(),
          formatv("{0}='{1}': '{2}' is not a task count (N or N(xM))", var,
                  value, item)
              .str());
    tasks.insert(tasks.end(), repeat, count);
  }
  return tasks;
}

/// Runs `argv`, returning its standard output; an error says what failed.
static Expected<std::string> captureOutput(ArrayRef<std::string> argv) {
  ErrorOr<std::string> program = sys::findProgramByName(argv[0]);
  if (!program)
    return createStringError(inconvertibleErrorCode(),
                             "'" + argv[0] + "' is not on PATH");
  SmallString<128> out, err;
  if (sys::fs::createTemporaryFile("zero-run-out", "txt", out) ||
      sys::fs::createTemporaryFile("zero-run-err", "txt", err))
    return createStringError(inconvertibleErrorCode(),
                             "cannot create a temporary file");
  SmallVector<StringRef> args;
  for (const std::string &a : argv)
    args.push_back(a);
  std::optional<StringRef> redirects[] = {StringRef(""), StringRef(out),
                                          StringRef(err)};
  std::string message;
  int status = sys::ExecuteAndWait(*program, args, std::nullopt, redirects,
                                   /*SecondsToWait=*/60, 0, &message);
  ErrorOr<std::unique_ptr<MemoryBuffer>> outText = MemoryBuffer::getFile(out);
  ErrorOr<std::unique_ptr<MemoryBuffer>> errText = MemoryBuffer::getFile(err);
  sys::fs::remove(out);
  sys::fs::remove(err);
  if (status != 0) {
    std::string why = errText ? (*errText)->getBuffer().trim().str() : "";
    if (why.empty())
      why = message.empty() ? "exit status " + std::to_string(status) : message;
    return createStringError(inconvertibleErrorCode(),
                             "'" + join(argv, " ") + "' failed: " + why);
  }
  return outText ? (*outText)->getBuffer().str() : std::string();
}

Expected<SlurmJob> zero::run::readSlurmJob(StringRef scontrol) {
  SlurmJob job;
  job.id = slurmJobId();
  if (job.id.empty())
    return createStringError(inconvertibleErrorCode(),
                             "not inside a Slurm allocation (SLURM_JOB_ID is "
                             "not set): run zero-run in an sbatch script or "
                             "under salloc");
  job.nodeList = getEnv("SLURM_JOB_NODELIST");
  if (job.nodeList.empty())
    job.nodeList = getEnv("SLURM_NODELIST");
  if (job.nodeList.empty())
    return createStringError(inconvertibleErrorCode(),
                             "Slurm job " + job.id +
                                 ": SLURM_JOB_NODELIST is not set");
  Expected<std::string> names =
      captureOutput({scontrol.str(), "show", "hostnames", job.nodeList});
  if (!names)
    return createStringError(
        inconvertibleErrorCode(),
        "Slurm job " + job.id +
            ": cannot expand its node list: " + toString(names.takeError()));
  SmallVector<StringRef> lines;
  StringRef(*names).split(lines, '\n', -1, /*KeepEmpty=*/false);
  for (StringRef l : lines)
    if (!l.trim().empty())
      job.nodes.push_back(Host{l.trim().str(), {}, 0});
  if (job.nodes.empty())
    return createStringError(inconvertibleErrorCode(),
                             "Slurm job " + job.id + ": its node list '" +
                                 job.nodeList + "' names no node");

  // The tasks per node: SLURM_TASKS_PER_NODE (--ntasks, --ntasks-per-node),
  // else --ntasks-per-node alone.
  std::vector<int64_t> tasks;
  std::string perNode = getEnv("SLURM_TASKS_PER_NODE");
  if (!perNode.empty()) {
    Expected<std::vector<int64_t>> parsed =
        parseTasksPerNode(perNode, "SLURM_TASKS_PER_NODE");
    if (!parsed)
      return createStringError(inconvertibleErrorCode(),
                               "Slurm job " + job.id + ": " +
                                   toString(parsed.takeError()));
    tasks = std::move(*parsed);
  } else if (std::string n = getEnv("SLURM_NTASKS_PER_NODE"); !n.empty()) {
    int64_t k = 0;
    if (StringRef(n).getAsInteger(10, k) || k < 1)
      return createStringError(inconvertibleErrorCode(),
                               "Slurm job " + job.id +
                                   ": SLURM_NTASKS_PER_NODE='" + n +
                                   "' is not a task count");
    tasks.assign(job.nodes.size(), k);
  } else {
    return createStringError(inconvertibleErrorCode(),
                             "Slurm job " + job.id +
                                 ": neither SLURM_TASKS_PER_NODE nor "
                                 "SLURM_NTASKS_PER_NODE is set");
  }
  if (tasks.size() != job.nodes.size())
    return createStringError(
        inconvertibleErrorCode(),
        formatv("Slurm job {0}: SLURM_TASKS_PER_NODE='{1}' gives {2} nodes, "
                "its node list '{3}' {4}",
                job.id, perNode, tasks.size(), job.nodeList, job.nodes.size())
            .str());
  for (auto [h, n] : zip(job.nodes, tasks))
    for (int64_t s = 0; s < n; ++s)
      h.slots.push_back(s);
  return job;
}

Expected<std::vector<Host>> zero::run::slurmHosts(const SlurmJob &job,
                                                  int64_t ranks) {
  int64_t total = job.tasks();
  if (ranks > total)
    return createStringError(
        inconvertibleErrorCode(),
        formatv("--np {0} asks for more ranks than Slurm job {1} has tasks: "
                "{2} ({3}); ask sbatch/salloc for more (--nodes, "
                "--ntasks-per-node)",
                ranks, job.id, total, job.describe())
            .str());
  if (ranks <= 0)
    return job.nodes;
  std::vector<Host> hosts;
  int64_t left = ranks;
  for (const Host &h : job.nodes) {
    if (left == 0)
      break;
    int64_t n = std::min<int64_t>(left, h.slots.size());
    Host used = h;
    used.slots.resize(n);
    hosts.push_back(std::move(used));
    left -= n;
  }
  return hosts;
}

Error zero::run::checkHostsInJob(const std::vector<Host> &hosts,
                                 const SlurmJob &job, StringRef hostfile) {
  for (const Host &h : hosts) {
    const Host *node = job.find(h.name);
    std::string where =
        h.line ? formatv("{0}:{1}: ", hostfile, h.line).str() : "";
    if (!node)
      return createStringError(
          inconvertibleErrorCode(),
          formatv("{0}host '{1}' is not a node of Slurm job {2} ({3}); inside "
                  "an allocation the hostfile's hosts must be its nodes",
                  where, h.name, job.id, job.nodeList)
              .str());
    if (h.slots.size() > node->slots.size())
      return createStringError(
          inconvertibleErrorCode(),
          formatv("{0}host '{1}' gets {2} ranks, Slurm job {3} has {4} tasks "
                  "on it",
                  where, h.name, h.slots.size(), job.id, node->slots.size())
              .str());
  }
  return Error::success();
}

std::string zero::run::srunWithoutPmix(StringRef srun) {
  Expected<std::string> out = captureOutput({srun.str(), "--mpi=list"});
  if (!out)
    return toString(out.takeError());
  SmallVector<StringRef> lines;
  StringRef(*out).split(lines, '\n');
  if (any_of(lines, [](StringRef l) { return l.trim() == "pmix"; }))
    return "";
  return "srun has no PMIx plugin ('" + srun.str() +
         " --mpi=list' lists no pmix)";
}

std::vector<std::string> zero::run::srunCommand(const LaunchPlan &plan) {
  std::vector<std::string> cmd = {plan.srun, "--mpi=pmix", "--label",
                                  "--kill-on-bad-exit=1", "--export=ALL"};
  std::string nodes;
  for (const Host &h : plan.hosts)
    nodes += (nodes.empty() ? "" : ",") + h.name;
  cmd.push_back("--nodes=" + std::to_string(plan.hosts.size()));
  cmd.push_back("--ntasks=" + std::to_string(plan.ranks));
  if (!plan.hosts.empty())
    cmd.push_back("--ntasks-per-node=" +
                  std::to_string(plan.hosts.front().slots.size()));
  cmd.push_back("--nodelist=" + nodes);
  std::vector<std::string> program = programCommand(plan);
  cmd.insert(cmd.end(), program.begin(), program.end());
  return cmd;
}

/// The signal whose description (strsignal's, as srun prints it) is `text`.
static int signalNamed(StringRef text) {
  text.consume_back(" (core dumped)");
  for (int sig = 1; sig < NSIG; ++sig)
    if (const char *name = ::strsignal(sig); name && text == name)
      return sig;
  return 0;
}

std::vector<RankFailure> zero::run::srunFailures(StringRef text,
                                                 const LaunchPlan &plan) {
  static const Regex failed("^srun: error: ([^:]+): tasks? ([0-9,-]+): (.*)$");
  static const Regex exited("^Exited with exit code ([0-9]+)$");
  std::vector<RankFailure> failures;
  SmallVector<StringRef> lines;
  text.split(lines, '\n');
  for (StringRef line : lines) {
    // srun ends the other tasks once one fails (--kill-on-bad-exit).
    if (line.contains("Terminating StepId") ||
        line.contains("Terminating job step"))
      break;
    SmallVector<StringRef> m;
    if (!failed.match(line, &m))
      continue;
    RankFailure f;
    f.host = m[1].str();
    SmallVector<StringRef> c;
    if (exited.match(m[3], &c)) {
      f.kind = RankFailure::ExitCode;
      c[1].getAsInteger(10, f.code);
    } else {
      f.kind = RankFailure::Signal;
      f.code = signalNamed(m[3]);
      f.detail = m[3].str();
    }
    // Task ids: `3`, `0-1` or `0,2-3`.
    SmallVector<StringRef> ranges;
    m[2].split(ranges, ',');
    for (StringRef r : ranges) {
      auto [lo, hi] = r.split('-');
      int64_t first = 0, last = 0;
      if (lo.getAsInteger(10, first))
        continue;
      if (hi.empty() || hi.getAsInteger(10, last))
        last = first;
      for (int64_t t = first; t <= last; ++t) {
        if (any_of(failures, [&](const RankFailure &g) { return g.rank == t; }))
          continue;
        RankFailure one = f;
        one.rank = t;
        if (one.host.empty())
          one.host = plan.hostOf(t);
        failures.push_back(one);
      }
    }
  }
  return failures;
}

/// Whether every host's slots are 0..k-1: srun places tasks by count, it
/// cannot give a rank a chosen device.
static bool leadingSlotsOnly(const std::vector<Host> &hosts) {
  for (const Host &h : hosts)
    for (auto [i, s] : enumerate(h.slots))
      if (s != static_cast<int64_t>(i))
        return false;
  return true;
}

Expected<HostSet> zero::run::resolveSlurmHosts(const JobOptions &options) {
  auto fail = [](const Twine &msg) -> Error {
    return createStringError(inconvertibleErrorCode(), msg.str());
  };
  if (slurmJobId().empty())
    return fail("--launcher srun: not inside a Slurm allocation "
                "(SLURM_JOB_ID is not set); run zero-run in an sbatch script "
                "or under salloc");
  if (int64_t n = slurmStepTasks(); n > 1)
    return fail(formatv("zero-run runs as one of {0} tasks of a Slurm job "
                        "step (srun zero-run): each would start every rank; "
                        "run it once, in the batch script or under salloc",
                        n));
  Expected<SlurmJob> job = readSlurmJob();
  if (!job)
    return job.takeError();

  HostSet set;
  if (!options.hostfile.empty()) {
    Expected<Hostfile> file = readHostfile(options.hostfile);
    if (!file)
      return file.takeError();
    Expected<std::vector<Host>> hosts =
        selectHosts(*file, options.include, options.exclude);
    if (!hosts)
      return hosts.takeError();
    if (Error e = checkHostsInJob(*hosts, *job, options.hostfile))
      return std::move(e);
    Expected<int64_t> perNode = ranksPerNode(*hosts, options.hostfile);
    if (!perNode)
      return perNode.takeError();
    set.hosts = std::move(*hosts);
    set.ranksPerNode = *perNode;
    set.source = options.hostfile;
    set.notes.push_back(formatv("--hostfile {0} inside Slurm job {1}: the "
                                "hostfile's hosts are used, not all of the "
                                "allocation's (as DeepSpeed's launcher does)",
                                options.hostfile, job->id)
                            .str());
  } else {
    Expected<std::vector<Host>> hosts = slurmHosts(*job, options.np);
    if (!hosts)
      return hosts.takeError();
    for (const Host &h : *hosts)
      if (h.slots.size() != hosts->front().slots.size())
        return fail(formatv(
            "Slurm job {0}{1} places {2} rank(s) on node '{3}' but {4} on "
            "'{5}'; every node must run the same number of ranks, because "
            "the schedule places ranks in equal blocks by node (ask sbatch "
            "or salloc for --ntasks-per-node, or give --np a multiple of it)",
            job->id,
            options.np ? formatv(" with --np {0}", options.np).str()
                       : std::string(),
            hosts->front().slots.size(), hosts->front().name, h.slots.size(),
            h.name));
    set.hosts = std::move(*hosts);
    set.ranksPerNode = static_cast<int64_t>(set.hosts.front().slots.size());
    set.source = "Slurm job " + job->id;
  }
  set.ranks = set.ranksPerNode * static_cast<int64_t>(set.hosts.size());

  // The launcher: srun with PMIx, unless told otherwise or it has none.
  std::string how, noPmix;
  if (options.launcher == "mpirun") {
    set.launcher = Launcher::Mpirun;
    how = "mpirun on its nodes (--launcher mpirun)";
  } else if ((noPmix = srunWithoutPmix()).empty()) {
    set.launcher = Launcher::Srun;
    how = "srun --mpi=pmix";
  } else if (options.launcher == "srun") {
    return fail("--launcher srun: " + noPmix +
                ", and Open MPI's ranks need it; use --launcher mpirun");
  } else {
    set.launcher = Launcher::Mpirun;
    how = "mpirun on its nodes: " + noPmix;
  }
  if (set.launcher == Launcher::Srun && !leadingSlotsOnly(set.hosts))
    return fail("srun places a node's tasks by count and cannot run a rank "
                "on a chosen slot: select whole hosts with --include/"
                "--exclude, or use --launcher mpirun");
  std::string where;
  for (const Host &h : set.hosts)
    where += (where.empty() ? "" : ", ") + h.name;
  set.notes.push_back(formatv("Slurm job {0}: {1} rank(s) on {2} node(s) of "
                              "{3} ({4}), started by {5}",
                              job->id, set.ranks, set.hosts.size(),
                              set.ranksPerNode, where, how)
                          .str());
  return set;
}
