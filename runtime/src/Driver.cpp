//===- Driver.cpp - zrt_train_main: the training executable --------------===//
//
// Part of the zero-mlir project.
//
// Every rank runs the same loop: load its slice of each micro batch into the
// step arena, run the compiled micro step, then the compiled boundary. All
// decisions that could differ between ranks (option errors, file errors,
// NaN losses) are agreed on collectively, so a failure ends every rank with
// a message and a non-zero exit instead of a hang.
//
// Faults outside the program's control: a rank that dies is noticed by the
// launcher (Open MPI's mpirun names it and kills the others); a rank that
// stops making progress without dying is noticed by the collective
// watchdog, a thread that aborts the job (MPI_Abort) when a collective wait
// of a training step exceeds --collective-timeout-s. Each rank tells its
// successor on a ring when it starts a step, so the watchdog can name the
// rank that did not arrive.
//
//===----------------------------------------------------------------------===//

#include "Driver.h"
#include "Device.h"
#include "Mpi.h"
#include "Trace.h"
#include "Support.h"

#include <mpi.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <sys/mman.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

using namespace zrt;

namespace {

[[noreturn]] void fail(const std::string &msg) {
  throw std::runtime_error(msg);
}

//===----------------------------------------------------------------------===//
// Options
//===----------------------------------------------------------------------===//

const char *const kUsage =
    "usage: %s [options]   (under mpirun -np <world size> for several ranks)\n"
    "\n"
    "Trains the compiled step. Options:\n"
    "  --steps N               train until step N (default 10; counts the\n"
    "                          steps of a resumed checkpoint)\n"
    "  --seed S                initialization seed (default 1234)\n"
    "  --data FILE             uint16 token file (nanoGPT train.bin) for a\n"
    "                          model with inputs tokens and targets [B, T]\n"
    "  --inputs X.npy --labels Y.npy\n"
    "                          float32 features [N, ...] and int32/int64\n"
    "                          labels [N] for a classifier\n"
    "  --log-json FILE         one JSON object per step (rank 0)\n"
    "  --init-from FILE        initial weights from fp32 safetensors\n"
    "  --export FILE           write the fp32 weights as safetensors at the\n"
    "                          end (--steps 0: the initial weights)\n"
    "  --save DIR              write a sharded checkpoint at the end\n"
    "  --save-every K          ... and every K steps (needs --save)\n"
    "  --resume DIR            continue from DIR/latest or a step directory\n"
    "  --trace FILE            Chrome trace per rank (FILE.rank<R>.json)\n"
    "  --threads N             OpenMP threads per rank (default: cores /\n"
    "                          ranks on the node, or OMP_NUM_THREADS)\n"
    "  --collective-timeout-s S\n"
    "                          abort every rank when a collective of a\n"
    "                          training step waits longer than S seconds\n"
    "                          (a peer rank is stuck or lost; default 60,\n"
    "                          0: never)\n"
    "  --on-min-loss-scale stop|continue\n"
    "                          fp16: a gradient overflow when the loss scale\n"
    "                          already is at min_loss_scale stops training\n"
    "                          as DeepSpeed does (default stop), or skips\n"
    "                          the step and goes on (continue)\n"
    "  --quiet                 no per-step progress lines\n"
    "  --help                  this text\n"
    "Test hooks (fault injection):\n"
    "  --inject-overflow-step K | K-L | K-\n"
    "                          a gradient overflow at step K (at steps K to\n"
    "                          L, at every step from K)\n"
    "  --inject-kill-rank R --inject-kill-step K\n"
    "                          rank R kills itself (SIGKILL) at the start\n"
    "                          of step K\n"
    "  --inject-kill-during-save K [--inject-kill-rank R]\n"
    "      [--inject-kill-at rank-file|latest]\n"
    "                          rank R (default 0) kills itself while saving\n"
    "                          step K's checkpoint: with its rank file\n"
    "                          written but not renamed (rank-file, the\n"
    "                          default), or (rank 0) with manifest.json in\n"
    "                          place but latest not updated (latest)\n"
    "  --inject-hang-rank R --inject-hang-step K\n"
    "                          rank R stops making progress (sleeps\n"
    "                          forever) at the start of step K\n";

struct Options {
  int64_t steps = 10;
  uint64_t seed = 1234;
  std::string data, inputs, labels, logJson, initFrom, exportPath, save, resume,
      trace;
  int64_t saveEvery = 0;
  int64_t collectiveTimeoutS = 60;
  bool stopAtMinLossScale = true;
  // Test hooks; rank -1 and step 0 mean none.
  int64_t injectOverflowFirst = 0, injectOverflowLast = 0;
  int64_t injectKillRank = -1, injectKillStep = 0, injectKillDuringSave = 0;
  std::string injectKillAt = "rank-file";
  int64_t injectHangRank = -1, injectHangStep = 0;
  int threads = 0;
  bool quiet = false;
  bool help = false;
};

int64_t parseCount(const std::string &opt, const std::string &text) {
  errno = 0;
  char *end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE || v < 0)
    fail("option " + opt + " needs a non-negative integer, got '" + text + "'");
  return v;
}

/// K (one step), K-L (steps K to L) or K- (every step from K), K >= 1.
void parseStepRange(const std::string &opt, const std::string &text,
                    int64_t &first, int64_t &last) {
  auto number = [](const std::string &t, int64_t &v) {
    errno = 0;
    char *end = nullptr;
    long long x = std::strtoll(t.c_str(), &end, 10);
    if (t.empty() || *end != '\0' || errno == ERANGE || x < 1)
      return false;
    v = x;
    return true;
  };
  size_t dash = text.find('-');
  bool ok;
  if (dash == std::string::npos) {
    ok = number(text, first);
    last = first;
  } else {
    ok = number(text.substr(0, dash), first);
    last = INT64_MAX;
    if (ok && dash + 1 < text.size())
      ok = number(text.substr(dash + 1), last) && last >= first;
  }
  if (!ok)
    fail("option " + opt + " needs a step K >= 1, a range K-L or K-, got '" +
         text + "'");
}

Options parseOptions(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0)
      fail("unexpected argument '" + arg + "' (options start with --)");
    std::string name = arg, value;
    bool inlineValue = false;
    if (size_t eq = arg.find('='); eq != std::string::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      inlineValue = true;
    }
    auto flag = [&](bool &target) {
      if (inlineValue)
        fail("option " + name + " takes no value");
      target = true;
    };
    auto next = [&]() -> std::string {
      if (inlineValue)
        return value;
      if (i + 1 >= argc)
        fail("option " + name + " needs a value");
      return argv[++i];
    };
    auto text = [&](std::string &target) {
      target = next();
      if (target.empty())
        fail("option " + name + " needs a non-empty value");
    };
    if (name == "--help")
      flag(o.help);
    else if (name == "--quiet")
      flag(o.quiet);
    else if (name == "--steps")
      o.steps = parseCount(name, next());
    else if (name == "--seed")
      o.seed = uint64_t(parseCount(name, next()));
    else if (name == "--save-every")
      o.saveEvery = parseCount(name, next());
    else if (name == "--inject-overflow-step")
      parseStepRange(name, next(), o.injectOverflowFirst, o.injectOverflowLast);
    else if (name == "--inject-kill-rank")
      o.injectKillRank = parseCount(name, next());
    else if (name == "--inject-kill-step")
      o.injectKillStep = parseCount(name, next());
    else if (name == "--inject-kill-during-save")
      o.injectKillDuringSave = parseCount(name, next());
    else if (name == "--inject-kill-at") {
      o.injectKillAt = next();
      if (o.injectKillAt != "rank-file" && o.injectKillAt != "latest")
        fail("option --inject-kill-at needs rank-file or latest, got '" +
             o.injectKillAt + "'");
    } else if (name == "--inject-hang-rank")
      o.injectHangRank = parseCount(name, next());
    else if (name == "--inject-hang-step")
      o.injectHangStep = parseCount(name, next());
    else if (name == "--collective-timeout-s")
      o.collectiveTimeoutS = parseCount(name, next());
    else if (name == "--on-min-loss-scale") {
      std::string v = next();
      if (v != "stop" && v != "continue")
        fail("option --on-min-loss-scale needs stop or continue, got '" + v +
             "'");
      o.stopAtMinLossScale = v == "stop";
    } else if (name == "--threads") {
      int64_t t = parseCount(name, next());
      if (t < 1 || t > 4096)
        fail("option --threads needs a count in [1, 4096]");
      o.threads = int(t);
    } else if (name == "--data")
      text(o.data);
    else if (name == "--inputs")
      text(o.inputs);
    else if (name == "--labels")
      text(o.labels);
    else if (name == "--log-json")
      text(o.logJson);
    else if (name == "--init-from")
      text(o.initFrom);
    else if (name == "--export")
      text(o.exportPath);
    else if (name == "--save")
      text(o.save);
    else if (name == "--resume")
      text(o.resume);
    else if (name == "--trace")
      text(o.trace);
    else
      fail("unknown option '" + name + "' (see --help)");
  }
  if (o.help)
    return o;
  if (!o.data.empty() && (!o.inputs.empty() || !o.labels.empty()))
    fail("--data (tokens) and --inputs/--labels (features) exclude each other");
  if (o.inputs.empty() != o.labels.empty())
    fail("--inputs and --labels go together");
  if (o.saveEvery > 0 && o.save.empty())
    fail("--save-every needs --save DIR");
  if (!o.initFrom.empty() && !o.resume.empty())
    fail("--init-from and --resume exclude each other");
  if (o.injectKillStep > 0 && o.injectKillRank < 0)
    fail("--inject-kill-step needs --inject-kill-rank R");
  if (o.injectKillRank >= 0 && o.injectKillStep == 0 &&
      o.injectKillDuringSave == 0)
    fail("--inject-kill-rank needs --inject-kill-step K or "
         "--inject-kill-during-save K");
  if (o.injectKillDuringSave > 0 && o.save.empty())
    fail("--inject-kill-during-save needs --save DIR");
  if (o.injectKillDuringSave > 0 && o.injectKillRank < 0)
    o.injectKillRank = 0;
  if (o.injectKillAt == "latest" && o.injectKillDuringSave == 0)
    fail("--inject-kill-at needs --inject-kill-during-save K");
  if (o.injectKillAt == "latest" && o.injectKillRank != 0)
    fail("--inject-kill-at latest needs --inject-kill-rank 0 (rank 0 writes "
         "latest)");
  if ((o.injectHangRank >= 0) != (o.injectHangStep > 0))
    fail("--inject-hang-rank and --inject-hang-step go together");
  if (o.collectiveTimeoutS > 1000000000)
    fail("option --collective-timeout-s needs at most 1e9 seconds");
  return o;
}

//===----------------------------------------------------------------------===//
// Data
//===----------------------------------------------------------------------===//

bool isIndexType(const std::string &dtype) {
  return dtype == "i32" || dtype == "i64";
}

void storeIndex(const InputInfo &in, char *base, int64_t i, int64_t v) {
  if (in.dtype == "i32") {
    int32_t x = int32_t(v);
    std::memcpy(base + i * 4, &x, 4);
  } else {
    std::memcpy(base + i * 8, &v, 8);
  }
}

/// A stream of rows (samples or token windows) that wraps around; rank r of
/// a micro batch takes `rows` consecutive rows at its offset.
class DataSource {
public:
  virtual ~DataSource() = default;
  /// Writes rows [first, first + local batch) into the inputs.
  virtual void load(zrt_ctx &ctx, int64_t first) = 0;
  /// Items (tokens or samples) per row, and their name for throughput.
  virtual int64_t itemsPerRow() const = 0;
  virtual const char *unit() const = 0;
};

/// nanoGPT-style uint16 tokens: row k is the window starting at k * T; the
/// targets are the tokens shifted by one.
class TokenData : public DataSource {
public:
  /// `rowsPerStep`: the rows of one global batch (every rank, micro step).
  TokenData(const Manifest &m, const std::string &path, int64_t rowsPerStep)
      : m(m) {
    if (m.inputs.size() != 2 || !isIndexType(m.inputs[0].dtype) ||
        !isIndexType(m.inputs[1].dtype) || m.inputs[0].shape.size() != 2 ||
        m.inputs[0].shape != m.inputs[1].shape)
      fail("--data needs a model whose inputs are integer tokens and "
           "targets of the same shape [B, T]");
    rows = m.inputs[0].shape[0];
    seq = m.inputs[0].shape[1];
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      fail("cannot open '" + path + "': " + std::strerror(errno));
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      ::close(fd);
      fail("cannot stat '" + path + "'");
    }
    bytes = size_t(st.st_size);
    if (!S_ISREG(st.st_mode) || bytes % 2 != 0) {
      ::close(fd);
      fail("'" + path + "' is not a uint16 token file (" +
           (S_ISREG(st.st_mode)
                ? "an odd size of " + std::to_string(bytes) + " bytes"
                : std::string("not a regular file")) +
           ")");
    }
    // One global batch must not wrap around: its rows are distinct windows
    // of T tokens, and the last target is the token after them.
    int64_t need = rowsPerStep * seq + 1;
    if (int64_t(bytes / 2) < need) {
      ::close(fd);
      fail("'" + path + "' holds " + std::to_string(bytes / 2) +
           " tokens; one global batch of " + std::to_string(rowsPerStep) +
           " rows x " + std::to_string(seq) + " tokens needs at least " +
           std::to_string(need) + " (targets are shifted by one)");
    }
    map = ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (map == MAP_FAILED)
      fail("cannot map '" + path + "': " + std::strerror(errno));
    tokens = static_cast<const uint16_t *>(map);
    length = int64_t(bytes / 2);
  }
  ~TokenData() override { ::munmap(map, bytes); }

  void load(zrt_ctx &ctx, int64_t first) override {
    const InputInfo &xi = m.inputs[0], &yi = m.inputs[1];
    x.resize(size_t(xi.numel() * xi.elementBytes()));
    y.resize(size_t(yi.numel() * yi.elementBytes()));
    for (int64_t r = 0; r < rows; ++r) {
      int64_t start = ((first + r) % length) * seq % length;
      for (int64_t t = 0; t < seq; ++t) {
        storeIndex(xi, x.data(), r * seq + t, tokens[(start + t) % length]);
        storeIndex(yi, y.data(), r * seq + t, tokens[(start + t + 1) % length]);
      }
    }
    device::upload(ctx.step + xi.offset, x.data(), int64_t(x.size()));
    device::upload(ctx.step + yi.offset, y.data(), int64_t(y.size()));
  }
  int64_t itemsPerRow() const override { return seq; }
  const char *unit() const override { return "tok/s"; }

private:
  const Manifest &m;
  int64_t rows = 0, seq = 0, length = 0;
  void *map = nullptr;
  size_t bytes = 0;
  const uint16_t *tokens = nullptr;
  /// Host staging of the inputs (the arena may be device memory).
  std::vector<char> x, y;
};

/// Features [N, ...] and labels [N] from .npy files; row k is sample k % N.
class ArrayData : public DataSource {
public:
  ArrayData(const Manifest &m, const std::string &xPath,
            const std::string &yPath, int64_t rowsPerStep)
      : m(m) {
    if (m.inputs.size() != 2 || isIndexType(m.inputs[0].dtype) ||
        !isIndexType(m.inputs[1].dtype) || m.inputs[0].shape.empty() ||
        m.inputs[1].shape.size() != 1 ||
        m.inputs[0].shape[0] != m.inputs[1].shape[0])
      fail("--inputs/--labels need a model whose inputs are float features "
           "[B, ...] and integer labels [B]");
    rows = m.inputs[0].shape[0];
    rowSize = m.inputs[0].numel() / std::max<int64_t>(rows, 1);
    x = parseNpy(readFile(xPath), xPath);
    y = parseNpy(readFile(yPath), yPath);
    if (x.descr != "<f4")
      fail(xPath + ": features must be float32 ('<f4'), found '" + x.descr +
           "'");
    if (y.descr != "<i4" && y.descr != "<i8")
      fail(yPath + ": labels must be int32 or int64, found '" + y.descr + "'");
    if (x.shape.empty() || x.shape[0] < 1 || x.numel() / x.shape[0] != rowSize)
      fail(xPath + ": expected " + std::to_string(rowSize) +
           " features per sample (the model's input is [" +
           std::to_string(rows) + ", ...]), shape is " + shape(x));
    if (y.shape.size() != 1 || y.shape[0] != x.shape[0])
      fail(yPath + ": expected labels of shape [" + std::to_string(x.shape[0]) +
           "], found " + shape(y));
    samples = x.shape[0];
    // One global batch must not take a sample twice.
    if (samples < rowsPerStep)
      fail(xPath + ": " + std::to_string(samples) +
           " samples, fewer than one global batch of " +
           std::to_string(rowsPerStep) + " (" + std::to_string(rows) +
           " per rank and micro step, " + std::to_string(m.worldSize) +
           " rank(s), " + std::to_string(m.accumulationSteps) +
           " micro step(s))");
  }

  void load(zrt_ctx &ctx, int64_t first) override {
    const InputInfo &xi = m.inputs[0], &yi = m.inputs[1];
    int32_t dtype = xi.dtype == "f32"    ? ZRT_F32
                    : xi.dtype == "bf16" ? ZRT_BF16
                                         : ZRT_F16;
    xs.resize(size_t(rows * rowSize));
    ys.resize(size_t(yi.numel() * yi.elementBytes()));
    char *yo = ys.data();
    for (int64_t r = 0; r < rows; ++r) {
      int64_t k = (first + r) % samples;
      std::memcpy(xs.data() + r * rowSize, x.data.data() + k * rowSize * 4,
                  size_t(rowSize) * 4);
      int64_t label;
      if (y.itemSize == 4) {
        int32_t v;
        std::memcpy(&v, y.data.data() + k * 4, 4);
        label = v;
      } else {
        std::memcpy(&label, y.data.data() + k * 8, 8);
      }
      storeIndex(yi, yo, r, label);
    }
    device::uploadCast(xs.data(), dtype, ctx.step + xi.offset, rows * rowSize);
    device::upload(ctx.step + yi.offset, ys.data(), int64_t(ys.size()));
  }
  int64_t itemsPerRow() const override { return 1; }
  const char *unit() const override { return "samples/s"; }

private:
  static std::string shape(const NpyArray &a) {
    std::string s = "(";
    for (size_t i = 0; i < a.shape.size(); ++i)
      s += (i ? ", " : "") + std::to_string(a.shape[i]);
    return s + ")";
  }

  const Manifest &m;
  NpyArray x, y;
  int64_t rows = 0, rowSize = 0, samples = 0;
  /// Host staging of the inputs (the arena may be device memory).
  std::vector<float> xs;
  std::vector<char> ys;
};

//===----------------------------------------------------------------------===//
// Collective watchdog
//===----------------------------------------------------------------------===//

int64_t steadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// A thread that ends the job when the main thread has waited in one
/// collective of a training step for longer than the timeout: a peer rank
/// is stuck (or lost without the launcher noticing), and without it every
/// other rank would wait forever in MPI_Wait.
///
/// To name the suspect, every rank sends the number of each step it starts
/// to its successor on a ring (rank + 1 mod world) over its own
/// communicator; the receive lands while the main thread blocks in MPI (Open
/// MPI progresses every request there). The watchdog reads the last step
/// number received from its predecessor: behind the current step, the
/// predecessor never arrived and is named. Otherwise the rank waits a grace
/// period so the suspect's successor, which knows more, reports first.
/// This read of a receive buffer before MPI reports completion is a
/// diagnostic only; the abort does not depend on it.
class Watchdog {
public:
  ~Watchdog() {
    // Only reached without stop() on paths that end the job anyway: no MPI.
    if (thread.joinable()) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        stopping = true;
      }
      wake.notify_all();
      thread.join();
    }
  }

  /// Collective. No-op for one rank or timeout 0.
  void start(zrt_ctx &ctx, int64_t timeoutS) {
    if (ctx.world < 2 || timeoutS <= 0)
      return;
    rank = ctx.rank;
    world = ctx.world;
    timeoutNs = timeoutS * 1000000000;
    MPI_Comm_dup(MPI_COMM_WORLD, &ring);
    ctx.waitState = &state;
    waitState = &ctx.waitState;
    thread = std::thread([this] { loop(); });
  }

  /// Start of step `step` (main thread): completes the previous step's ring
  /// messages and announces this one.
  void beginStep(int64_t step) {
    if (ring == MPI_COMM_NULL)
      return;
    finishRing("the ring messages of the previous step");
    current.store(step, std::memory_order_relaxed);
    sent = step;
    MPI_Irecv(&arrival, 1, MPI_INT64_T, (rank + world - 1) % world, 0, ring,
              &requests[0]);
    MPI_Isend(&sent, 1, MPI_INT64_T, (rank + 1) % world, 0, ring, &requests[1]);
  }

  /// Collective: completes the ring and joins the thread.
  void stop() {
    if (ring == MPI_COMM_NULL)
      return;
    finishRing("the ring messages of the last step");
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    wake.notify_all();
    thread.join();
    *waitState = nullptr;
    MPI_Comm_free(&ring);
  }

private:
  void finishRing(const char *what) {
    WaitScope watched(&state, what);
    MPI_Waitall(2, requests, MPI_STATUSES_IGNORE);
  }

  void loop() {
    int64_t poll = std::clamp<int64_t>(timeoutNs / 20, 10000000, 250000000);
    int64_t graceNs =
        std::clamp<int64_t>(timeoutNs / 2, 2000000000, 10000000000);
    std::unique_lock<std::mutex> lock(mutex);
    while (!wake.wait_for(lock, std::chrono::nanoseconds(poll),
                          [this] { return stopping; })) {
      const char *what = state.what.load(std::memory_order_acquire);
      if (!what)
        continue;
      int64_t waited =
          steadyNs() - state.sinceNs.load(std::memory_order_relaxed);
      if (waited <= timeoutNs)
        continue;
      int64_t step = current.load(std::memory_order_relaxed);
      int64_t seen = __atomic_load_n(&arrival, __ATOMIC_ACQUIRE);
      int left = (rank + world - 1) % world;
      char msg[768];
      if (seen < step) {
        std::snprintf(
            msg, sizeof(msg),
            "zrt: error: rank %d: step %lld: %s has not completed after %lld "
            "s (--collective-timeout-s %lld): rank %d has not started step "
            "%lld (the last step it started is %lld); it is stuck or lost. "
            "Aborting every rank.\n",
            rank, (long long)step, what, (long long)(waited / 1000000000),
            (long long)(timeoutNs / 1000000000), left, (long long)step,
            (long long)seen);
      } else if (world == 2) {
        std::snprintf(
            msg, sizeof(msg),
            "zrt: error: rank %d: step %lld: %s has not completed after %lld "
            "s (--collective-timeout-s %lld): rank %d, the only other rank, "
            "started the step and is stuck inside it or lost. Aborting every "
            "rank.\n",
            rank, (long long)step, what, (long long)(waited / 1000000000),
            (long long)(timeoutNs / 1000000000), left);
      } else if (waited <= timeoutNs + graceNs) {
        continue; // let the suspect's successor name it
      } else {
        std::snprintf(
            msg, sizeof(msg),
            "zrt: error: rank %d: step %lld: %s has not completed after %lld "
            "s (--collective-timeout-s %lld): a rank is stuck inside the "
            "step or lost (rank %d, which this rank watches, started it). "
            "Aborting every rank.\n",
            rank, (long long)step, what, (long long)(waited / 1000000000),
            (long long)(timeoutNs / 1000000000), left);
      }
      std::fputs(msg, stderr);
      std::fflush(stderr);
      // The main thread is inside a collective wait; Open MPI's MPI_Abort
      // from this thread still ends the job (the launcher kills every
      // rank), though MPI_THREAD_FUNNELED does not promise it.
      MPI_Abort(MPI_COMM_WORLD, 1);
      std::_Exit(1);
    }
  }

  int rank = 0, world = 1;
  int64_t timeoutNs = 0;
  MPI_Comm ring = MPI_COMM_NULL;
  MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  int64_t arrival = 0, sent = 0;
  std::atomic<int64_t> current{0};
  WaitState state;
  zrt::WaitState **waitState = nullptr;
  std::thread thread;
  std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;
};

//===----------------------------------------------------------------------===//
// The driver
//===----------------------------------------------------------------------===//

class Driver {
public:
  explicit Driver(const zrt_program *program) : program(program) {}
  ~Driver() {
    zrt_arena_destroy(ctx.persistentArena);
    zrt_arena_destroy(ctx.stepArena);
  }
  int run(int argc, char **argv);

private:
  /// Runs fn on every rank; true when it threw on none. Ranks where it threw
  /// print their message.
  template <typename Fn>
  bool everywhere(const Fn &fn);
  void error(const std::string &msg) const;
  void info(const char *fmt, ...) const __attribute__((format(printf, 2, 3)));

  bool setUp(int argc, char **argv, int &exitCode);
  bool checkWorld();
  void chooseThreads();
  bool train();
  bool trainSteps();
  void installSaveHook();
  bool save(const Progress &progress);
  bool exportWeights();
  void writeTrace();

  const zrt_program *program;
  Options opts;
  Manifest manifest;
  zrt_ctx ctx;
  std::unique_ptr<DataSource> data;
  Progress progress;
  std::FILE *log = nullptr;
  int64_t maxPeak = 0;
  /// Steps skipped for non-finite gradients at fp32/bf16 (no loss scaler
  /// explains them), and the first of them.
  int64_t nonFiniteSkips = 0, firstNonFiniteSkip = 0;
  Watchdog watchdog;
  /// The step whose checkpoint is being written (0: none), for test hooks.
  int64_t savingStep = 0;
};

template <typename Fn>
bool Driver::everywhere(const Fn &fn) {
  std::string err;
  try {
    fn();
  } catch (const std::exception &e) {
    err = e.what();
  }
  int bad = !err.empty(), any = 0;
  MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (bad)
    error(err);
  return !any;
}

void Driver::error(const std::string &msg) const {
  std::fflush(stdout);
  if (ctx.world > 1)
    std::fprintf(stderr, "zrt: error: rank %d: %s\n", ctx.rank, msg.c_str());
  else
    std::fprintf(stderr, "zrt: error: %s\n", msg.c_str());
  std::fflush(stderr);
}

void Driver::info(const char *fmt, ...) const {
  if (ctx.rank != 0 || opts.quiet)
    return;
  va_list args;
  va_start(args, fmt);
  std::vfprintf(stdout, fmt, args);
  va_end(args);
  std::fflush(stdout);
}

bool Driver::checkWorld() {
  // Every rank learns every rank's schedule before anything else happens,
  // so a mismatch stops all of them with the same verdict.
  uint64_t mine[2] = {manifest.hash, uint64_t(manifest.worldSize)};
  std::vector<uint64_t> all(size_t(2 * ctx.world));
  MPI_Allgather(mine, 2, MPI_UINT64_T, all.data(), 2, MPI_UINT64_T,
                MPI_COMM_WORLD);
  for (int r = 0; r < ctx.world; ++r) {
    uint64_t hash = all[size_t(2 * r)], world = all[size_t(2 * r + 1)];
    if (hash != manifest.hash || world != uint64_t(manifest.worldSize)) {
      char msg[320];
      std::snprintf(msg, sizeof(msg),
                    "schedule mismatch: this rank runs schedule 0x%016llx "
                    "(world size %d), rank %d runs schedule 0x%016llx (world "
                    "size %llu); every rank must run the same compiled "
                    "program",
                    (unsigned long long)manifest.hash, manifest.worldSize, r,
                    (unsigned long long)hash, (unsigned long long)world);
      error(msg);
      return false;
    }
  }
  if (ctx.world != manifest.worldSize) {
    error("this program was compiled for world size " +
          std::to_string(manifest.worldSize) + " (schedule " +
          manifest.hashText + ") but runs on " + std::to_string(ctx.world) +
          " rank(s): start it with mpirun -np " +
          std::to_string(manifest.worldSize) +
          " or recompile with --world-size " + std::to_string(ctx.world));
    return false;
  }
  return true;
}

void Driver::chooseThreads() {
  if (opts.threads > 0) {
    zrt_set_num_threads(opts.threads);
    return;
  }
  if (std::getenv("OMP_NUM_THREADS"))
    return;
  // Ranks on one node share its cores.
  int localRank = 0, local = 1;
  nodeRank(MPI_COMM_WORLD, localRank, local);
  int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  zrt_set_num_threads(std::max(1, cores / local));
}

bool Driver::setUp(int argc, char **argv, int &exitCode) {
  exitCode = 1;
  ctx.comm = zrt_comm_world();
  ctx.rank = zrt_comm_rank(ctx.comm);
  ctx.world = zrt_comm_size(ctx.comm);

  // Every rank parses the same command line, so they agree on the verdict;
  // rank 0 speaks for all.
  try {
    opts = parseOptions(argc, argv);
  } catch (const std::exception &e) {
    if (ctx.rank == 0)
      std::fprintf(stderr, "zrt: error: %s\n", e.what());
    exitCode = 2;
    return false;
  }
  if (opts.help) {
    if (ctx.rank == 0)
      std::printf(kUsage, argv[0]);
    exitCode = 0;
    return false;
  }
  for (int64_t r : {opts.injectKillRank, opts.injectHangRank})
    if (r >= ctx.world) {
      if (ctx.rank == 0)
        std::fprintf(stderr,
                     "zrt: error: test hook rank %lld outside the world of %d "
                     "rank(s)\n",
                     (long long)r, ctx.world);
      exitCode = 2;
      return false;
    }
  if (program->version != ZRT_PROGRAM_VERSION) {
    error("the program was compiled for runtime program version " +
          std::to_string(program->version) + ", this runtime is version " +
          std::to_string(ZRT_PROGRAM_VERSION));
    return false;
  }
  if (!everywhere([&] { manifest = Manifest::parse(program->manifest); }))
    return false;
  if (!checkWorld())
    return false;
  chooseThreads();
  // The backend's device (a GPU per rank on a node for CUDA), before any
  // tensor memory exists.
  if (!everywhere([&] {
        int localRank = 0, localSize = 1;
        nodeRank(MPI_COMM_WORLD, localRank, localSize);
        device::initialize(localRank);
      }))
    return false;

  const Manifest &m = manifest;
  ctx.manifest = &manifest;
  ctx.computeBytes = zrt_dtype_size(m.computeDtype);
  ctx.injectOverflowFirst = opts.injectOverflowFirst;
  ctx.injectOverflowLast = opts.injectOverflowLast;
  installSaveHook();
  zrt_loss_scaler_init(&ctx.scaler, m.precision == "fp16", m.initialScalePower,
                       m.lossScaleWindow, m.hysteresis, m.minLossScale);
  // The plan's sizes are high-water marks of its allocator: count each arena
  // whole, so the measured peak is comparable with plan.peak_bytes.
  ctx.persistentArena = zrt_arena_create(m.persistentBytes);
  ctx.stepArena = zrt_arena_create(m.arenaBytes);
  ctx.persistent = static_cast<char *>(
      zrt_arena_at(ctx.persistentArena, 0, m.persistentBytes));
  ctx.step = static_cast<char *>(zrt_arena_at(ctx.stepArena, 0, m.arenaBytes));
  // Deterministic contents: nothing may depend on what malloc returned.
  device::zero(ctx.persistent, m.persistentBytes);
  device::zero(ctx.step, m.arenaBytes);

  bool ok = everywhere([&] {
    int64_t rowsPerStep =
        (m.inputs.empty() || m.inputs[0].shape.empty() ? 0
                                                       : m.inputs[0].shape[0]) *
        ctx.world * m.accumulationSteps;
    if (!opts.data.empty())
      data = std::make_unique<TokenData>(m, opts.data, rowsPerStep);
    else if (!opts.inputs.empty())
      data =
          std::make_unique<ArrayData>(m, opts.inputs, opts.labels, rowsPerStep);
    if (!opts.resume.empty()) {
      progress = readCheckpoint(ctx, opts.resume);
      return;
    }
    std::vector<Tensor> tensors;
    if (!opts.initFrom.empty())
      tensors = parseSafetensors(readFile(opts.initFrom), opts.initFrom);
    initializeParameters(ctx, opts.seed,
                         opts.initFrom.empty() ? nullptr : &tensors);
  });
  if (!ok)
    return false;
  if (opts.steps > progress.step && !data) {
    if (ctx.rank == 0)
      error("no training data: pass --data FILE or --inputs X.npy --labels "
            "Y.npy (or --steps 0)");
    return false;
  }
  if (!opts.resume.empty() && m.stage >= 1 && m.stage <= 2) {
    // The full params buffers: every rank's owned casts.
    for (int32_t p = 0; p < int32_t(m.partitions.size()); ++p)
      zrt_ctx_all_gather_params(&ctx, p, 0, m.partitions[size_t(p)].numel, -1);
  }
  if (!opts.resume.empty())
    info("resumed from '%s' at step %lld\n", opts.resume.c_str(),
         (long long)progress.step);

  if (!opts.logJson.empty() && ctx.rank == 0 &&
      !(log = std::fopen(opts.logJson.c_str(), "w"))) {
    error("cannot write '" + opts.logJson + "': " + std::strerror(errno));
  }
  int logOk = ctx.rank != 0 || opts.logJson.empty() || log;
  MPI_Bcast(&logOk, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!logOk)
    return false;

  int64_t numel = 0;
  for (const ParamInfo &p : m.params)
    numel += p.numel;
  info("zero-mlir: stage %d, world size %d, %s, %d micro step(s), %lld "
       "parameters in %zu partition(s), schedule %s\n",
       m.stage, m.worldSize, m.precision.c_str(), m.accumulationSteps,
       (long long)numel, m.partitions.size(), m.hashText.c_str());
  return true;
}

void Driver::installSaveHook() {
  if (opts.injectKillDuringSave <= 0 || ctx.rank != opts.injectKillRank)
    return;
  std::string suffix = opts.injectKillAt == "latest"
                           ? "/latest"
                           : "/rank_" + std::to_string(ctx.rank) + ".bin";
  setBeforeRenameHook([this, suffix](const std::string &path) {
    if (savingStep != opts.injectKillDuringSave ||
        path.size() < suffix.size() ||
        path.compare(path.size() - suffix.size(), suffix.size(), suffix) != 0)
      return;
    // The temporary is written and fsynced; the rename never happens.
    std::fflush(stdout);
    if (log)
      std::fflush(log);
    std::raise(SIGKILL);
  });
}

bool Driver::save(const Progress &at) {
  savingStep = at.step;
  struct Reset {
    int64_t &v;
    ~Reset() { v = 0; }
  } reset{savingStep};
  std::string dir = checkpointDir(opts.save, at.step);
  SavedFile file;
  if (!everywhere([&] {
        makeDirs(dir);
        file = writeRankCheckpoint(ctx, dir, at);
      }))
    return false;
  std::vector<SavedFile> files(size_t(ctx.world));
  uint64_t mine[2] = {file.crc, file.bytes};
  std::vector<uint64_t> all(size_t(2 * ctx.world));
  MPI_Gather(mine, 2, MPI_UINT64_T, all.data(), 2, MPI_UINT64_T, 0,
             MPI_COMM_WORLD);
  for (int r = 0; r < ctx.world; ++r)
    files[size_t(r)] = {uint32_t(all[size_t(2 * r)]), all[size_t(2 * r + 1)]};
  if (!everywhere([&] {
        if (ctx.rank == 0)
          writeCheckpointManifest(ctx, opts.save, dir, at, files);
      }))
    return false;
  info("saved checkpoint %s\n", dir.c_str());
  return true;
}

bool Driver::exportWeights() {
  std::vector<Tensor> tensors = gatherParameters(ctx);
  if (!everywhere([&] {
        if (ctx.rank == 0)
          writeFileAtomic(opts.exportPath, writeSafetensors(tensors));
      }))
    return false;
  info("exported %zu tensors to %s\n", tensors.size(), opts.exportPath.c_str());
  return true;
}

void Driver::writeTrace() {
  std::string path = opts.trace;
  std::string suffix = ".rank" + std::to_string(ctx.rank);
  if (path.size() > 5 && path.compare(path.size() - 5, 5, ".json") == 0)
    path.insert(path.size() - 5, suffix);
  else
    path += suffix + ".json";
  nlohmann::json events = nlohmann::json::array();
  for (const TraceEvent &e : ctx.trace)
    events.push_back({{"name", e.name},
                      {"ph", "X"},
                      {"ts", e.startUs},
                      {"dur", e.durUs},
                      {"pid", ctx.rank},
                      {"tid", 0}});
  // Kernel calls (the CPU backend's entry points record them; a GPU
  // backend's calls only enqueue, so it records none).
  int64_t originNs = std::chrono::duration_cast<std::chrono::nanoseconds>(
                         ctx.traceStart.time_since_epoch())
                         .count();
  for (const KernelSpanRecord &k : takeKernelSpans())
    events.push_back({{"name", k.name},
                      {"cat", "kernel"},
                      {"ph", "X"},
                      {"ts", double(k.startNs - originNs) / 1e3},
                      {"dur", double(k.endNs - k.startNs) / 1e3},
                      {"pid", ctx.rank},
                      {"tid", 0}});
  nlohmann::json doc = {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
  if (int64_t dropped = droppedKernelSpans())
    doc["droppedKernelSpans"] = dropped;
  try {
    writeFileAtomic(path, doc.dump() + "\n");
  } catch (const std::exception &e) {
    error(std::string("cannot write the trace: ") + e.what());
  }
}

bool Driver::train() {
  watchdog.start(ctx, opts.collectiveTimeoutS);
  bool ok = trainSteps();
  // Every rank leaves trainSteps at the same step (its decisions are
  // collective), so the ring can be wound down collectively.
  watchdog.stop();
  return ok;
}

bool Driver::trainSteps() {
  const Manifest &m = manifest;
  int64_t localRows = m.inputs.empty() ? 0 : m.inputs[0].shape[0];
  int64_t rowsPerMicro = localRows * ctx.world;
  int64_t rowsPerStep = rowsPerMicro * m.accumulationSteps;
  ctx.tracing = !opts.trace.empty();
  ctx.traceStart = std::chrono::steady_clock::now();
  setKernelTracing(ctx.tracing);
  bool warnedSlots = false;
  bool warnedMinScale = false;
  for (int64_t step = progress.step + 1; step <= opts.steps; ++step) {
    // Test hooks: a rank that dies or stops making progress.
    if (step == opts.injectKillStep && ctx.rank == opts.injectKillRank) {
      std::fflush(stdout);
      if (log)
        std::fflush(log);
      std::raise(SIGKILL);
    }
    if (step == opts.injectHangStep && ctx.rank == opts.injectHangRank)
      for (;;)
        ::pause();
    watchdog.beginStep(step);
    ctx.stepIndex = step;
    ctx.lossSum = 0.0;
    ctx.lossCount = 0;
    ctx.skipped = ctx.overflow = false;
    float scale = zrt_loss_scaler_scale(&ctx.scaler);
    auto start = std::chrono::steady_clock::now();
    double stepStart = ctx.nowUs();
    for (int32_t micro = 0; micro < m.accumulationSteps; ++micro) {
      ctx.micro = micro;
      double microStart = ctx.tracing ? ctx.nowUs() : 0.0;
      data->load(ctx, progress.dataPosition + micro * rowsPerMicro +
                          ctx.rank * localRows);
      program->micro_step(&ctx);
      if (ctx.tracing)
        ctx.trace.push_back({"micro step " + std::to_string(micro), microStart,
                             ctx.nowUs() - microStart});
    }
    double boundaryStart = ctx.tracing ? ctx.nowUs() : 0.0;
    program->boundary(&ctx);
    if (ctx.tracing)
      ctx.trace.push_back(
          {"boundary", boundaryStart, ctx.nowUs() - boundaryStart});
    if (ctx.drainSlots() > 0 && !warnedSlots) {
      warnedSlots = true;
      if (ctx.rank == 0)
        std::fprintf(stderr, "zrt: warning: the program left collectives "
                             "unwaited at the end of a step; completed "
                             "them\n");
    }
    {
      // A GPU backend has only enqueued the step so far.
      WaitScope watched(ctx.waitState, "the step's device work");
      device::finishStep(ctx);
    }
    double ms = std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - start)
                    .count();
    if (ctx.tracing)
      ctx.trace.push_back(
          {"step " + std::to_string(step), stepStart, ctx.nowUs() - stepStart});
    progress.step = step;
    progress.dataPosition += rowsPerStep;

    // Global values: the mean of the ranks' losses, the slowest rank's
    // time, the largest peak.
    double local[2] = {ctx.lossCount ? ctx.lossSum / ctx.lossCount : 0.0, ms};
    double sum[2];
    int64_t peak = zrt_memory_peak_bytes();
    {
      WaitScope watched(ctx.waitState, "the step's loss/time/peak all-reduce");
      MPI_Allreduce(local, sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      MPI_Allreduce(local + 1, sum + 1, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      MPI_Allreduce(MPI_IN_PLACE, &peak, 1, MPI_INT64_T, MPI_MAX,
                    MPI_COMM_WORLD);
    }
    maxPeak = std::max(maxPeak, peak);
    double loss = sum[0] / ctx.world;
    ms = sum[1];
    double gradNorm = std::sqrt(double(ctx.stats[1]));
    double rate = double(rowsPerStep * data->itemsPerRow()) / (ms / 1000.0);
    float nextScale = zrt_loss_scaler_scale(&ctx.scaler);

    if (log) {
      nlohmann::json line = {{"step", step},
                             {"loss", loss},
                             {"loss_scale", scale},
                             {"next_loss_scale", nextScale},
                             {"skipped", ctx.skipped},
                             {"overflow", ctx.overflow},
                             {"grad_norm", gradNorm},
                             {"step_ms", ms},
                             {"peak_bytes", peak},
                             {"planned_peak_bytes", m.peakBytes},
                             {"scratch_peak_bytes", zrt_scratch_peak_bytes()},
                             {"planned_scratch_bytes", m.scratchBytes},
                             {"adam_steps", ctx.adamSteps}};
      std::fprintf(log, "%s\n", line.dump().c_str());
      std::fflush(log);
    }
    if (std::isnan(loss) || std::isinf(loss)) {
      if (ctx.rank == 0)
        error("the loss is " + std::string(std::isnan(loss) ? "NaN" : "inf") +
              " at step " + std::to_string(step) +
              " (learning rate too high, or fp16 without loss scaling?)");
      return false;
    }
    info("step %lld | loss %.4f | scale %g | %.1f ms | %.0f %s | peak %.1f "
         "MiB\n",
         (long long)step, loss, double(scale), ms, rate, data->unit(),
         double(peak) / (1 << 20));
    if (ctx.skipped && ctx.rank == 0) {
      // Never silent, not even with --quiet.
      if (ctx.scaler.dynamic)
        std::printf("step %lld skipped: gradient overflow, loss scale %g -> "
                    "%g\n",
                    (long long)step, double(scale), double(nextScale));
      else
        std::printf("step %lld SKIPPED: non-finite gradients (inf/NaN) at %s "
                    "precision; parameters unchanged\n",
                    (long long)step, m.precision.c_str());
      if (!ctx.scaler.dynamic && nonFiniteSkips++ == 0)
        firstNonFiniteSkip = step;
      std::fflush(stdout);
    }
    // Every rank has the same verdict: the stats are all-reduced and the
    // scalers identical.
    if (ctx.overflowAtMinScale) {
      if (opts.stopAtMinLossScale) {
        char msg[320];
        std::snprintf(msg, sizeof(msg),
                      "step %lld: Current loss scale already at minimum - "
                      "cannot decrease scale anymore. Exiting run. (loss "
                      "scale %g = min_loss_scale and the gradients "
                      "overflowed again; --on-min-loss-scale=continue skips "
                      "such steps instead)",
                      (long long)step, double(scale));
        if (ctx.rank == 0)
          error(msg);
        return false;
      }
      if (!warnedMinScale && ctx.rank == 0) {
        std::fprintf(stderr,
                     "zrt: warning: step %lld: gradient overflow with the "
                     "loss scale already at its minimum %g; skipping the "
                     "step and continuing (--on-min-loss-scale=continue)\n",
                     (long long)step, double(scale));
        std::fflush(stderr);
      }
      warnedMinScale = true;
    }
    bool last = step == opts.steps;
    if (!opts.save.empty() &&
        ((opts.saveEvery > 0 && step % opts.saveEvery == 0) || last))
      if (!save(progress))
        return false;
  }
  return true;
}

int Driver::run(int argc, char **argv) {
  int exitCode = 1;
  if (!setUp(argc, argv, exitCode))
    return exitCode;
  bool ok = true;
  if (opts.steps > progress.step)
    ok = train();
  else if (!opts.save.empty() && opts.resume.empty() && opts.steps == 0)
    ok = save(progress);
  if (ok && !opts.exportPath.empty())
    ok = exportWeights();
  if (!opts.trace.empty())
    writeTrace();
  if (log)
    std::fclose(log);
  if (ok && ctx.rank == 0 && opts.steps > 0) {
    int64_t scratch = zrt_scratch_peak_bytes();
    std::printf(
        "peak memory: measured %lld bytes (kernel scratch %lld), "
        "planned %lld bytes (persistent %lld + step arena %lld + "
        "scratch %lld)%s\n",
        (long long)maxPeak, (long long)scratch, (long long)manifest.peakBytes,
        (long long)manifest.persistentBytes, (long long)manifest.arenaBytes,
        (long long)manifest.scratchBytes,
        maxPeak == manifest.peakBytes ? "" : ": MISMATCH");
    std::fflush(stdout);
  }
  if (nonFiniteSkips > 0) {
    // Repeated at the very end (stdout, after everything else rank 0
    // prints), where a reader of the output looks first.
    std::printf("zrt: warning: %lld step(s) skipped for non-finite gradients "
                "at %s precision, the first at step %lld\n",
                (long long)nonFiniteSkips, manifest.precision.c_str(),
                (long long)firstNonFiniteSkip);
    std::fflush(stdout);
  }
  return ok ? 0 : 1;
}

} // namespace

extern "C" int zrt_train_main(int argc, char **argv,
                              const zrt_program *program) {
  int code;
  {
    Driver driver(program);
    try {
      code = driver.run(argc, argv);
    } catch (const std::exception &e) {
      // Only a rank-local surprise gets here; end every rank.
      std::fprintf(stderr, "zrt: error: %s\n", e.what());
      MPI_Abort(MPI_COMM_WORLD, 1);
      return 1;
    } catch (...) {
      std::fprintf(stderr, "zrt: error: unexpected exception\n");
      MPI_Abort(MPI_COMM_WORLD, 1);
      return 1;
    }
  }
  zrt_finalize();
  return code;
}
