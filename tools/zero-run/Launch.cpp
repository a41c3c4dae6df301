//===- Launch.cpp - Starts a job's ranks through mpirun -------------------===//
//
// Part of the zero-mlir project.
//
// mpirun runs with --tag-output, so every line of a rank comes back as
// `[JOB,RANK]<stdout>:text`; lines without a tag are mpirun's own. mpirun
// runs in its own process group, so a Ctrl-C at the terminal reaches
// zero-run only, which forwards it as SIGUSR2: mpirun passes SIGUSR2 on to
// every rank, and the training program stops at the end of its step with a
// checkpoint (SIGTERM or SIGINT to mpirun would kill the ranks at once). A
// second SIGINT or SIGTERM ends the job: zero-run sends mpirun SIGTERM.
//
//===----------------------------------------------------------------------===//

#include "Launch.h"
#include "Slurm.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Regex.h"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <map>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

extern char **environ;

using namespace llvm;
using namespace zero::run;

std::string LaunchPlan::hostOf(int64_t rank) const {
  int64_t first = 0;
  for (const Host &h : hosts) {
    int64_t n = static_cast<int64_t>(h.slots.size());
    if (rank < first + n)
      return h.name;
    first += n;
  }
  return "";
}

/// Whether a host's slots are 0..k-1 (its ranks use the first k devices).
static bool leadingSlots(const Host &h) {
  for (auto [i, s] : enumerate(h.slots))
    if (s != static_cast<int64_t>(i))
      return false;
  return true;
}

std::vector<std::string> zero::run::programCommand(const LaunchPlan &plan) {
  std::vector<std::string> program = {plan.program};
  if (plan.ranksPerNode)
    program.insert(program.end(),
                   {"--ranks-per-node", std::to_string(plan.ranksPerNode)});
  program.insert(program.end(), plan.programArgs.begin(),
                 plan.programArgs.end());
  return program;
}

std::vector<std::string> zero::run::launchCommand(const LaunchPlan &plan) {
  return plan.launcher == Launcher::Srun ? srunCommand(plan)
                                         : mpirunCommand(plan);
}

std::vector<std::string> zero::run::mpirunCommand(const LaunchPlan &plan) {
  std::vector<std::string> cmd = {plan.mpirun};
  cmd.insert(cmd.end(), plan.mpirunOptions.begin(), plan.mpirunOptions.end());
  cmd.push_back("--tag-output");
  for (const EnvVar &v : plan.env.vars())
    cmd.insert(cmd.end(), {"-x", v.name + "=" + v.value});
  std::vector<std::string> program = programCommand(plan);
  if (plan.hosts.empty()) {
    cmd.insert(cmd.end(), {"-np", std::to_string(plan.ranks)});
    cmd.insert(cmd.end(), program.begin(), program.end());
    return cmd;
  }
  if (all_of(plan.hosts, leadingSlots)) {
    std::string hosts;
    int64_t ranks = 0;
    for (const Host &h : plan.hosts) {
      hosts += (hosts.empty() ? "" : ",") + h.name + ":" +
               std::to_string(h.slots.size());
      ranks += h.slots.size();
    }
    cmd.insert(cmd.end(), {"--host", hosts, "-np", std::to_string(ranks)});
    cmd.insert(cmd.end(), program.begin(), program.end());
    return cmd;
  }
  // Slots chosen by --include/--exclude name devices: each host is an app
  // context of its own that sees only its slots' devices, in order, so its
  // local rank i runs on its i-th slot.
  for (auto [i, h] : enumerate(plan.hosts)) {
    if (i)
      cmd.push_back(":");
    std::string n = std::to_string(h.slots.size());
    std::string devices;
    for (int64_t s : h.slots)
      devices += (devices.empty() ? "" : ",") + std::to_string(s);
    cmd.insert(cmd.end(), {"--host", h.name + ":" + n, "-np", n, "-x",
                           "CUDA_VISIBLE_DEVICES=" + devices});
    cmd.insert(cmd.end(), program.begin(), program.end());
  }
  return cmd;
}

namespace {

std::atomic<int> pendingSignal{0};
std::atomic<int> signalCount{0};

extern "C" void onSignal(int sig) {
  pendingSignal.store(sig);
  signalCount.fetch_add(1);
}

/// Sorts mpirun's output: rank 0's lines through, the others' kept.
class OutputRouter {
public:
  OutputRouter(raw_ostream &out, raw_ostream &err, Launcher launcher)
      : out(out), err(err), launcher(launcher) {}

  /// Takes a chunk read from mpirun's stdout (`fromErr` false) or stderr.
  void take(StringRef chunk, bool fromErr) {
    std::string &partial = fromErr ? partialErr : partialOut;
    partial += chunk.str();
    size_t nl;
    while ((nl = partial.find('\n')) != std::string::npos) {
      line(StringRef(partial).take_front(nl), fromErr);
      partial.erase(0, nl + 1);
    }
  }
  void finish() {
    if (!partialOut.empty())
      line(partialOut, false);
    if (!partialErr.empty())
      line(partialErr, true);
    partialOut.clear();
    partialErr.clear();
  }

  /// The other ranks' kept lines, each prefixed with its rank.
  void printKept() {
    for (auto &[rank, lines] : kept)
      for (const std::string &l : lines)
        err << "[rank " << rank << "] " << l << "\n";
    err.flush();
  }

  std::string launcherText;
  bool watchdog = false;
  std::vector<int64_t> hungRanks;

private:
  void line(StringRef text, bool fromErr) {
    // mpirun --tag-output: `[JOB,RANK]<stdout>:text`; srun --label: `RANK:
    // text`, on the stream the rank wrote it to.
    static const Regex tag("^\\[([0-9]+),([0-9]+)\\]<(stdout|stderr)>:(.*)$");
    static const Regex label("^ *([0-9]+): (.*)$");
    SmallVector<StringRef> m;
    bool srun = launcher == Launcher::Srun;
    if (!(srun ? label : tag).match(text, &m)) {
      // The launcher's own words: kept to find the failed ranks, shown on
      // stderr (mpirun's forwarding note is zero-run's business).
      if (!text.starts_with("mpirun: Forwarding signal")) {
        err << text << "\n";
        err.flush();
      }
      launcherText += text.str() + "\n";
      return;
    }
    int64_t rank = 0;
    m[srun ? 1 : 2].getAsInteger(10, rank);
    StringRef body = m[srun ? 2 : 4];
    bool isErr = srun ? fromErr : m[3] == "stderr";
    if (body.contains("(--collective-timeout-s ") &&
        body.contains("Aborting every rank.")) {
      watchdog = true;
      // The runtime's words for the rank that never started the step.
      static const Regex culprit("rank ([0-9]+)(, the only other rank,| has "
                                 "not started step)");
      SmallVector<StringRef> c;
      int64_t hung = 0;
      if (culprit.match(body, &c) && !c[1].getAsInteger(10, hung) &&
          !llvm::is_contained(hungRanks, hung))
        hungRanks.push_back(hung);
    }
    if (rank == 0) {
      raw_ostream &os = isErr ? err : out;
      os << body << "\n";
      os.flush();
      return;
    }
    std::deque<std::string> &lines = kept[rank];
    lines.push_back(body.str());
    if (lines.size() > kKeptLines)
      lines.pop_front();
  }

  static constexpr size_t kKeptLines = 50;
  raw_ostream &out, &err;
  Launcher launcher;
  std::string partialOut, partialErr;
  std::map<int64_t, std::deque<std::string>> kept;
};

/// The failed ranks mpirun names in its own output.
std::vector<RankFailure> failuresIn(StringRef text, const LaunchPlan &plan) {
  std::vector<RankFailure> failures;
  auto add = [&](RankFailure f) {
    for (const RankFailure &g : failures)
      if (g.rank == f.rank)
        return;
    f.host = plan.hostOf(f.rank);
    failures.push_back(std::move(f));
  };
  SmallVector<StringRef> lines;
  text.split(lines, '\n');
  static const Regex signalled("process rank ([0-9]+) with PID [0-9]+ on "
                               "node ([^ ]+) exited on signal ([0-9]+) "
                               "\\(([^)]*)\\)");
  static const Regex process("Process name: \\[\\[[0-9]+,[0-9]+\\],([0-9]+)"
                             "\\]");
  static const Regex exitCode("Exit code: *([0-9]+)");
  static const Regex aborted("MPI_ABORT was invoked on rank ([0-9]+)");
  static const Regex errorCode("with errorcode ([0-9]+)");
  for (size_t i = 0; i < lines.size(); ++i) {
    SmallVector<StringRef> m;
    if (signalled.match(lines[i], &m)) {
      RankFailure f;
      m[1].getAsInteger(10, f.rank);
      f.kind = RankFailure::Signal;
      m[3].getAsInteger(10, f.code);
      f.detail = m[4].str();
      add(f);
    } else if (process.match(lines[i], &m)) {
      RankFailure f;
      m[1].getAsInteger(10, f.rank);
      SmallVector<StringRef> c;
      if (i + 1 < lines.size() && exitCode.match(lines[i + 1], &c))
        c[1].getAsInteger(10, f.code);
      add(f);
    } else if (aborted.match(lines[i], &m)) {
      RankFailure f;
      m[1].getAsInteger(10, f.rank);
      f.kind = RankFailure::Abort;
      SmallVector<StringRef> c;
      if (errorCode.match(lines[i], &c) ||
          (i + 1 < lines.size() && errorCode.match(lines[i + 1], &c)))
        c[1].getAsInteger(10, f.code);
      add(f);
    }
  }
  return failures;
}

} // namespace

LaunchResult zero::run::launch(const LaunchPlan &plan, raw_ostream &out,
                               raw_ostream &err) {
  LaunchResult result;
  std::vector<std::string> cmd = launchCommand(plan);
  std::vector<char *> argv;
  for (std::string &a : cmd)
    argv.push_back(a.data());
  argv.push_back(nullptr);

  int outPipe[2], errPipe[2];
  if (::pipe(outPipe) != 0 || ::pipe(errPipe) != 0) {
    result.startError = std::string("pipe: ") + std::strerror(errno);
    result.status = 1;
    return result;
  }
  struct sigaction action = {}, oldInt = {}, oldTerm = {};
  action.sa_handler = onSignal;
  sigemptyset(&action.sa_mask);
  pendingSignal.store(0);
  signalCount.store(0);
  ::sigaction(SIGINT, &action, &oldInt);
  ::sigaction(SIGTERM, &action, &oldTerm);
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid == 0) {
    // Its own process group: a terminal's Ctrl-C is zero-run's to forward.
    ::setpgid(0, 0);
#ifdef __linux__
    // mpirun ends the job when zero-run itself dies.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent)
      ::_exit(127);
#endif
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    // srun passes its own environment on to every task (--export=ALL).
    if (plan.launcher == Launcher::Srun)
      for (const EnvVar &v : plan.env.vars())
        ::setenv(v.name.c_str(), v.value.c_str(), 1);
    ::dup2(outPipe[1], STDOUT_FILENO);
    ::dup2(errPipe[1], STDERR_FILENO);
    ::close(outPipe[0]);
    ::close(outPipe[1]);
    ::close(errPipe[0]);
    ::close(errPipe[1]);
    ::execvp(argv[0], argv.data());
    std::string msg = std::string("zero-run: error: cannot run ") + argv[0] +
                      ": " + std::strerror(errno) + "\n";
    ssize_t ignored = ::write(STDERR_FILENO, msg.data(), msg.size());
    (void)ignored;
    ::_exit(127);
  }
  ::close(outPipe[1]);
  ::close(errPipe[1]);
  if (pid < 0) {
    result.startError = std::string("fork: ") + std::strerror(errno);
    result.status = 1;
    ::close(outPipe[0]);
    ::close(errPipe[0]);
    return result;
  }

  OutputRouter router(out, err, plan.launcher);
  struct pollfd fds[2] = {{outPipe[0], POLLIN, 0}, {errPipe[0], POLLIN, 0}};
  int open = 2, forwarded = 0, status = 0;
  bool ended = false;
  // Once mpirun has ended, a process it left behind may still hold the
  // pipes: what is left is read for a while, not waited for.
  auto drainUntil = std::chrono::steady_clock::time_point::max();
  char buffer[65536];
  while (open > 0 && std::chrono::steady_clock::now() < drainUntil) {
    if (!ended && ::waitpid(pid, &status, WNOHANG) == pid) {
      ended = true;
      drainUntil = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    }
    int seen = signalCount.load();
    if (seen > forwarded && !ended) {
      int sig = pendingSignal.load();
      if (forwarded == 0) {
        result.forwardedSignal = sig;
        err << "zero-run: " << (sig == SIGINT ? "SIGINT" : "SIGTERM")
            << ": asking every rank to stop after its step and write a "
               "checkpoint (again to stop at once)\n";
        err.flush();
        ::kill(pid, SIGUSR2);
      } else {
        err << "zero-run: " << (sig == SIGINT ? "SIGINT" : "SIGTERM")
            << " again: ending the job now\n";
        err.flush();
        ::kill(pid, SIGTERM);
      }
      forwarded = seen;
    }
    int n = ::poll(fds, 2, 200);
    if (n < 0 && errno != EINTR)
      break;
    for (int i = 0; i < 2 && n > 0; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
        continue;
      ssize_t got = ::read(fds[i].fd, buffer, sizeof(buffer));
      if (got > 0) {
        router.take(StringRef(buffer, got), i == 1);
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open;
      }
    }
  }
  for (struct pollfd &f : fds)
    if (f.fd >= 0)
      ::close(f.fd);
  router.finish();
  while (!ended && ::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  ::sigaction(SIGINT, &oldInt, nullptr);
  ::sigaction(SIGTERM, &oldTerm, nullptr);
  if (WIFEXITED(status))
    result.status = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    result.status = 128 + WTERMSIG(status);
  if (result.status == 127 && StringRef(router.launcherText)
                                  .starts_with("zero-run: error: cannot run "))
    result.startError = StringRef(router.launcherText).trim().str();
  result.watchdog = router.watchdog;
  result.hungRanks = router.hungRanks;
  result.failures = plan.launcher == Launcher::Srun
                        ? srunFailures(router.launcherText, plan)
                        : failuresIn(router.launcherText, plan);
  if (result.status != 0 && result.startError.empty())
    router.printKept();
  return result;
}
