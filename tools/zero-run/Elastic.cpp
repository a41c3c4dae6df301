//===- Elastic.cpp - zero-run --elastic: restarts on fewer nodes ----------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "Elastic.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/WithColor.h"

#include <atomic>
#include <chrono>
#include <optional>
#include <set>
#include <sys/stat.h>
#include <thread>

using namespace llvm;
using namespace zero::run;

using Clock = std::chrono::steady_clock;

static Error fail(const Twine &msg) {
  return createStringError(inconvertibleErrorCode(), msg.str());
}

std::string zero::run::trainOption(const std::vector<std::string> &args,
                                   StringRef name) {
  std::string value;
  for (size_t i = 0; i < args.size(); ++i) {
    StringRef a = args[i];
    if (a == name && i + 1 < args.size())
      value = args[++i];
    else if (a.starts_with(name) && a.drop_front(name.size()).starts_with("="))
      value = a.drop_front(name.size() + 1).str();
  }
  return value;
}

std::vector<std::string>
zero::run::withoutTrainOption(const std::vector<std::string> &args,
                              StringRef name, bool valued) {
  std::vector<std::string> kept;
  for (size_t i = 0; i < args.size(); ++i) {
    StringRef a = args[i];
    if (a == name) {
      i += valued ? 1 : 0;
      continue;
    }
    if (valued && a.starts_with(name) &&
        a.drop_front(name.size()).starts_with("="))
      continue;
    kept.push_back(args[i]);
  }
  return kept;
}

std::vector<std::string>
zero::run::restartArgs(const std::vector<std::string> &args,
                       const std::string &save, const std::string &latest) {
  if (latest.empty())
    return args;
  std::vector<std::string> restart = withoutTrainOption(
      withoutTrainOption(withoutTrainOption(args, "--resume", true),
                         "--init-from", true),
      "--overwrite", false);
  restart.insert(restart.end(), {"--resume", save});
  return restart;
}

Expected<int64_t> zero::run::microBatchOf(const CompiledProgram &program) {
  SmallString<256> path(sys::path::parent_path(program.executable));
  sys::path::append(path, "schedule.mlir");
  auto text = MemoryBuffer::getFile(path);
  if (!text)
    return fail("cannot read the scheduled program '" + path +
                "' to find its micro batch: " + text.getError().message());
  // The train step's first input: its leading dimension is the micro batch.
  static const Regex input(
      "zero\\.train_step @[^(]*\\(%[^:]*: tensor<([0-9]+)[x>]");
  SmallVector<StringRef> m;
  int64_t micro = 0;
  if (!input.match((*text)->getBuffer(), &m) || m[1].getAsInteger(10, micro) ||
      micro < 1)
    return fail("the scheduled program '" + path +
                "' has no train step with a batched input");
  return micro;
}

Error zero::run::checkElastic(const JobOptions &options,
                              const ElasticOptions &elastic) {
  if (options.hostfile.empty())
    return fail("--elastic needs --hostfile FILE: it restarts on the nodes "
                "that a hostfile lists (--np runs on this machine only)");
  if (trainOption(options.trainArgs, "--save").empty())
    return fail("--elastic needs the training program's --save DIR (with "
                "--save-every N): a restart resumes from its latest "
                "checkpoint");
  auto hosts = resolveHosts(options);
  if (!hosts)
    return hosts.takeError();
  if (static_cast<int64_t>(hosts->hosts.size()) < elastic.minNodes)
    return fail(formatv("--min-nodes {0} is more than the {1} node(s) of "
                        "'{2}'{3}",
                        elastic.minNodes, hosts->hosts.size(), hosts->source,
                        options.include.empty() && options.exclude.empty()
                            ? ""
                            : " (after --include/--exclude)"));
  return Error::success();
}

namespace {

/// Watches the --log-json file while a launch runs: when it first grew
/// (the first step logged) and when it last grew (the last step logged).
class LogWatch {
public:
  explicit LogWatch(std::string path) : path(std::move(path)) {
    if (this->path.empty())
      return;
    startSize = size();
    thread = std::thread([this] {
      int64_t seen = startSize;
      while (!stopping.load()) {
        int64_t now = size();
        if (now != seen) {
          Clock::time_point t = Clock::now();
          if (!first)
            first = t;
          last = t;
          seen = now;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    });
  }
  ~LogWatch() { stop(); }

  void stop() {
    stopping.store(true);
    if (thread.joinable())
      thread.join();
  }

  /// The step of the first line written during the launch (0: none).
  int64_t firstStep() const {
    auto text = MemoryBuffer::getFile(path);
    if (!text || startSize < 0 ||
        static_cast<int64_t>((*text)->getBufferSize()) <= startSize)
      return 0;
    StringRef line =
        (*text)->getBuffer().drop_front(startSize).split('\n').first;
    static const Regex step("\"step\":([0-9]+)");
    SmallVector<StringRef> m;
    int64_t s = 0;
    if (step.match(line, &m))
      m[1].getAsInteger(10, s);
    return s;
  }

  std::optional<Clock::time_point> first, last;

private:
  int64_t size() const {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0 ? int64_t(st.st_size) : -1;
  }

  std::string path;
  int64_t startSize = -1;
  std::atomic<bool> stopping{false};
  std::thread thread;
};

double secondsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

std::string readText(StringRef path) {
  auto buffer = MemoryBuffer::getFile(path);
  return buffer ? (*buffer)->getBuffer().str() : std::string();
}

/// The step directory the save directory's `latest` names, as a restart
/// resumes it (empty: none). With --overwrite the directory keeps an
/// earlier run's checkpoints until the job's first checkpoint replaces
/// them (a new `latest` renamed into place): until then it names none, so
/// that a restart starts over as the first launch did instead of resuming
/// the earlier run.
class LatestCheckpoint {
public:
  LatestCheckpoint(StringRef save, bool overwrite) : path(save) {
    sys::path::append(path, "latest");
    if (overwrite)
      earlier = file();
  }
  std::string operator()() const {
    if (earlier && file() == earlier)
      return "";
    return StringRef(readText(path)).trim().str();
  }

private:
  using FileId = std::pair<sys::fs::UniqueID, sys::TimePoint<>>;
  std::optional<FileId> file() const {
    sys::fs::file_status st;
    if (sys::fs::status(path, st))
      return std::nullopt;
    return FileId(st.getUniqueID(), st.getLastModificationTime());
  }
  SmallString<256> path;
  /// The earlier run's `latest` when the job started (--overwrite).
  std::optional<FileId> earlier;
};

} // namespace

int zero::run::runElastic(const JobOptions &options,
                          const ElasticOptions &elastic) {
  auto error = [](const Twine &msg) {
    WithColor::error(errs(), "zero-run") << msg << "\n";
    return 1;
  };
  if (Error e = checkElastic(options, elastic))
    return error(toString(std::move(e)));
  auto env = jobEnvironment(options);
  if (!env)
    return error(toString(env.takeError()));
  std::string save = trainOption(options.trainArgs, "--save");
  std::string logJson = trainOption(options.trainArgs, "--log-json");
  LatestCheckpoint latestCheckpoint(
      save, is_contained(options.trainArgs, "--overwrite"));
  // What the stop leaves behind, for the messages that end the job.
  auto leftBehind = [&] {
    std::string latest = latestCheckpoint();
    if (latest.empty())
      return "no checkpoint was saved in '" + save + "'";
    SmallString<256> dir(save);
    sys::path::append(dir, latest);
    return "the latest checkpoint is '" + std::string(dir) + "' (--resume " +
           save + " continues from it)";
  };

  llvm::StringSet<> dropped;
  std::string hostfileText = readText(options.hostfile);
  std::vector<std::string> args = options.trainArgs;
  std::vector<std::string> compileOptions = options.compileOptions;
  int64_t micro = 0, restarts = 0;
  int lastStatus = 0;
  std::string cause;
  std::optional<Clock::time_point> detectedAt, lastStepAt;
  for (;;) {
    auto hosts = resolveHosts(options);
    if (!hosts)
      return error(toString(hosts.takeError()));
    HostSet left = *hosts;
    left.hosts.clear();
    for (const Host &h : hosts->hosts)
      if (!dropped.contains(h.name))
        left.hosts.push_back(h);
    left.ranks = left.ranksPerNode * static_cast<int64_t>(left.hosts.size());
    if (static_cast<int64_t>(left.hosts.size()) < elastic.minNodes) {
      WithColor::error(errs(), "zero-run")
          << "elastic: " << cause << "; " << left.hosts.size()
          << " node(s) left, fewer than --min-nodes " << elastic.minNodes
          << ": stopping; " << leftBehind() << "\n";
      return lastStatus ? lastStatus : 1;
    }
    if (restarts > 0) {
      std::string names;
      for (const Host &h : left.hosts)
        names += (names.empty() ? "" : ", ") + h.name;
      std::string latest = latestCheckpoint();
      outs() << formatv("zero-run: elastic: restart {0} of at most {1}: {2}; "
                        "{3} node(s) left ({4}), {5} rank(s); {6}\n",
                        restarts, elastic.maxRestarts, cause, left.hosts.size(),
                        names, left.ranks,
                        latest.empty()
                            ? "no checkpoint yet, starting over"
                            : "resuming from " + save + "/" + latest);
      if (logJson.empty() && restarts == 1)
        outs() << "zero-run: elastic: the time to the first resumed step is "
                  "measured on the training program's --log-json file; "
                  "none was given\n";
      outs().flush();
    }
    JobOptions job = options;
    job.trainArgs = args;
    job.compileOptions = compileOptions;
    Clock::time_point compileStart = Clock::now();
    auto program = compileFor(job, left, outs());
    if (!program) {
      std::string why = toString(program.takeError());
      if (restarts == 0)
        return error(why);
      return error(why + "\nelastic: cannot continue on " +
                   std::to_string(left.ranks) + " rank(s): stopping; " +
                   leftBehind());
    }
    double compileS = secondsBetween(compileStart, Clock::now());
    if (micro == 0) {
      auto m = microBatchOf(*program);
      if (!m)
        return error(toString(m.takeError()));
      micro = *m;
      // Every restart keeps the first launch's global batch, with its
      // micro batch as long as it divides the rows per rank.
      compileOptions = withoutTrainOption(
          withoutTrainOption(compileOptions, "--gradient-accumulation-steps",
                             true),
          "--elastic-micro-batch", true);
      compileOptions.insert(compileOptions.end(),
                            {"--elastic-micro-batch", std::to_string(micro)});
    }
    LaunchPlan plan = planFor(job, left, *env, *program);
    LogWatch watch(logJson);
    LaunchResult result = launchOn(plan, outs(), errs());
    watch.stop();
    if (restarts > 0 && detectedAt) {
      if (watch.first)
        outs() << formatv(
            "zero-run: elastic: step {0} at world size {1}: {2:f1} s after "
            "the failed run's last step, {3:f1} s after mpirun reported the "
            "failure (recompiling {4:f1} s)\n",
            watch.firstStep(), left.ranks,
            lastStepAt ? secondsBetween(*lastStepAt, *watch.first) : 0.0,
            secondsBetween(*detectedAt, *watch.first), compileS);
      outs().flush();
      detectedAt.reset();
    }
    if (!result.startError.empty())
      return 127;
    if (result.status == 0 && result.failures.empty())
      return result.forwardedSignal ? 128 + result.forwardedSignal : 0;
    lastStatus = result.status ? result.status : 1;
    // A stop the user asked for is not a failure.
    if (result.forwardedSignal)
      return lastStatus;
    std::set<std::string> failedHosts;
    std::string causes;
    if (result.watchdog) {
      // The rank that aborted the job only waited for the one that hung:
      // the watchdog's line names a rank that never started the step, else
      // the flight records name the ranks that stopped before the
      // collective the others issued.
      bool named = !result.hungRanks.empty();
      for (int64_t rank : named ? result.hungRanks : result.stalledRanks) {
        std::string host = plan.hostOf(rank);
        causes += (causes.empty() ? "" : ", ") +
                  ("rank " + std::to_string(rank) + " (host " + host + ") " +
                   (named ? "hung" : "stopped before the others' collective") +
                   " (the collective watchdog ended the job)");
        if (!host.empty())
          failedHosts.insert(host);
      }
      if (failedHosts.empty()) {
        WithColor::error(errs(), "zero-run")
            << "elastic: a collective watchdog ended the job, and neither "
               "its line nor the flight records name the rank that hung: "
               "which node failed is not known, not restarting; "
            << leftBehind() << "\n";
        return lastStatus;
      }
    } else {
      for (const RankFailure &f : result.failures) {
        causes += (causes.empty() ? "" : ", ") + describeFailure(f);
        if (!f.host.empty())
          failedHosts.insert(f.host);
      }
    }
    if (failedHosts.empty()) {
      WithColor::error(errs(), "zero-run")
          << "elastic: the job failed (status " << result.status
          << ") and mpirun named no failed rank on a node: not restarting; "
          << leftBehind() << "\n";
      return lastStatus;
    }
    // A hostfile changed since the last failure lists the nodes to use
    // now, a repaired node listed again among them; the nodes that have
    // just failed are dropped from it.
    std::string text = readText(options.hostfile);
    if (text != hostfileText) {
      outs() << "zero-run: elastic: '" << options.hostfile
             << "' changed: the nodes dropped before are used again\n";
      dropped.clear();
      hostfileText = text;
    }
    std::string nodes;
    for (const std::string &h : failedHosts) {
      nodes += (nodes.empty() ? "" : ", ") + h;
      dropped.insert(h);
    }
    cause = causes + ": dropping node(s) " + nodes;
    if (restarts == elastic.maxRestarts) {
      WithColor::error(errs(), "zero-run")
          << "elastic: " << cause << "; --max-restarts " << elastic.maxRestarts
          << " reached: stopping; " << leftBehind() << "\n";
      return lastStatus;
    }
    ++restarts;
    detectedAt = Clock::now();
    lastStepAt = watch.last;
    args = restartArgs(options.trainArgs, save, latestCheckpoint());
  }
}
