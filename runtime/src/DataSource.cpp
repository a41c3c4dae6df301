//===- DataSource.cpp - The training driver's input data ------------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "DataSource.h"
#include "Device.h"
#include "Files.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

using namespace zrt;

namespace {

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

/// [begin, end) of `n` items: the share that `shard` checks.
std::pair<int64_t, int64_t> shareOf(int64_t n, DataShard shard) {
  return {n * shard.rank / shard.world, n * (shard.rank + 1) / shard.world};
}

/// The smallest index bound of the inputs, or -1 for none.
int64_t tokenBound(const Manifest &m) {
  int64_t bound = -1;
  for (const InputInfo &in : m.inputs)
    if (in.indexBound > 0)
      bound = bound < 0 ? in.indexBound : std::min(bound, in.indexBound);
  return bound;
}

/// The token files' mappings (training and held-out data), for the SIGBUS
/// handler: reading a page of a mapped file that was truncated after mmap
/// raises SIGBUS, which would otherwise end the rank without a word.
struct BusErrorInfo {
  std::atomic<const char *> begin{nullptr};
  size_t bytes = 0;
  char message[640] = {};
  size_t length = 0;
};
BusErrorInfo busErrors[4];
struct sigaction previousBusAction;

void onBusError(int, siginfo_t *info, void *) {
  const char *addr = static_cast<const char *>(info->si_addr);
  for (BusErrorInfo &e : busErrors) {
    const char *begin = e.begin.load();
    if (begin && addr >= begin && addr < begin + e.bytes) {
      ssize_t ignored = ::write(STDERR_FILENO, e.message, e.length);
      (void)ignored;
      ::_exit(1);
    }
  }
  // Not ours: the previous action (by default, the signal's) on return.
  ::sigaction(SIGBUS, &previousBusAction, nullptr);
}

/// nanoGPT-style uint16 tokens: row k is the window starting at k * T; the
/// targets are the tokens shifted by one.
class TokenData : public DataSource {
public:
  /// `rowsPerStep`: the rows of one global batch (every rank, micro step).
  TokenData(const Manifest &m, const std::string &path, int64_t rowsPerStep,
            DataShard shard, const char *option)
      : m(m) {
    if (m.inputs.size() != 2 || !isIndexType(m.inputs[0].dtype) ||
        !isIndexType(m.inputs[1].dtype) || m.inputs[0].shape.size() != 2 ||
        m.inputs[0].shape != m.inputs[1].shape)
      fail(std::string(option) +
           " needs a model whose inputs are integer tokens and targets of "
           "the same shape [B, T]");
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
    watchForTruncation(path, shard);
    // Every token is read as an input id and (shifted) as a target: all of
    // them must be ids the model has, or a kernel would stop the run at the
    // step that first reads the bad one.
    if (int64_t bound = tokenBound(m); bound > 0 && bound <= 0xffff) {
      auto [begin, end] = shareOf(length, shard);
      for (int64_t i = begin; i < end; ++i)
        if (tokens[i] >= bound)
          fail("'" + path + "': token " + std::to_string(tokens[i]) +
               " at offset " + std::to_string(i) + " (byte " +
               std::to_string(2 * i) +
               ") is outside the model's vocabulary [0, " +
               std::to_string(bound) + ")");
    }
  }
  ~TokenData() override {
    if (watch)
      watch->begin.store(nullptr);
    ::munmap(map, bytes);
  }

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
  /// Windows of T tokens and the target after them.
  int64_t wholeRows() const override { return (length - 1) / seq; }
  int64_t itemsPerRow() const override { return seq; }
  const char *unit() const override { return "tok/s"; }

private:
  void watchForTruncation(const std::string &path, DataShard shard) {
    std::string who = shard.world > 1 ? "zrt: error: rank " +
                                            std::to_string(shard.rank) + ": "
                                      : "zrt: error: ";
    std::string msg =
        who + "the token file '" + path + "' shrank below its " +
        std::to_string(bytes) +
        " bytes while training (SIGBUS reading it); restore the file and "
        "--resume from the last checkpoint\n";
    for (BusErrorInfo &e : busErrors)
      if (!e.begin.load()) {
        watch = &e;
        break;
      }
    if (!watch)
      return;
    msg.resize(std::min(msg.size(), sizeof(watch->message) - 1));
    std::memcpy(watch->message, msg.data(), msg.size());
    watch->length = msg.size();
    watch->bytes = bytes;
    watch->begin.store(static_cast<const char *>(map));
    static bool installed = false;
    if (installed)
      return;
    installed = true;
    struct sigaction action = {};
    action.sa_sigaction = onBusError;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGBUS, &action, &previousBusAction);
  }

  BusErrorInfo *watch = nullptr;

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
            const std::string &yPath, int64_t rowsPerStep, DataShard shard,
            const char *option)
      : m(m) {
    if (m.inputs.size() != 2 || isIndexType(m.inputs[0].dtype) ||
        !isIndexType(m.inputs[1].dtype) || m.inputs[0].shape.empty() ||
        m.inputs[1].shape.size() != 1 ||
        m.inputs[0].shape[0] != m.inputs[1].shape[0])
      fail(std::string(option) +
           " need a model whose inputs are float features [B, ...] and "
           "integer labels [B]");
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
    checkValues(xPath, yPath, shard);
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
      storeIndex(yi, yo, r, labelAt(k));
    }
    device::uploadCast(xs.data(), dtype, ctx.step + xi.offset, rows * rowSize);
    device::upload(ctx.step + yi.offset, ys.data(), int64_t(ys.size()));
  }
  int64_t wholeRows() const override { return samples; }
  int64_t itemsPerRow() const override { return 1; }
  const char *unit() const override { return "samples/s"; }

private:
  /// Labels the model can take and finite features, in this rank's share
  /// of the samples: a NaN feature would make the first loss NaN, and a
  /// label outside the classes stop the run midway.
  void checkValues(const std::string &xPath, const std::string &yPath,
                   DataShard shard) const {
    const InputInfo &yi = m.inputs[1];
    auto [begin, end] = shareOf(samples, shard);
    for (int64_t k = begin; k < end; ++k) {
      int64_t label = labelAt(k);
      if (yi.dtype == "i32" && (label < INT32_MIN || label > INT32_MAX))
        fail("'" + yPath + "': label " + std::to_string(label) + " at index " +
             std::to_string(k) + " does not fit the model's i32 labels");
      if (yi.indexBound > 0 && (label < 0 || label >= yi.indexBound) &&
          label != yi.ignoredIndex)
        fail("'" + yPath + "': label " + std::to_string(label) + " at index " +
             std::to_string(k) + " is outside the model's classes [0, " +
             std::to_string(yi.indexBound) + ")");
    }
    const char *features = x.data.data();
    for (int64_t i = begin * rowSize; i < end * rowSize; ++i) {
      float v;
      std::memcpy(&v, features + 4 * i, 4);
      if (!std::isfinite(v))
        fail("'" + xPath + "': feature " + std::to_string(i % rowSize) +
             " of sample " + std::to_string(i / rowSize) + " is " +
             (std::isnan(v) ? "NaN" : "infinite") +
             "; the model's inputs must be finite");
    }
  }

  int64_t labelAt(int64_t k) const {
    if (y.itemSize == 4) {
      int32_t v;
      std::memcpy(&v, y.data.data() + k * 4, 4);
      return v;
    }
    int64_t v;
    std::memcpy(&v, y.data.data() + k * 8, 8);
    return v;
  }

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

} // namespace

std::unique_ptr<DataSource>
zrt::openTokenData(const Manifest &m, const std::string &path,
                   int64_t rowsPerStep, DataShard shard, const char *option) {
  return std::make_unique<TokenData>(m, path, rowsPerStep, shard, option);
}

std::unique_ptr<DataSource>
zrt::openArrayData(const Manifest &m, const std::string &xPath,
                   const std::string &yPath, int64_t rowsPerStep,
                   DataShard shard, const char *option) {
  return std::make_unique<ArrayData>(m, xPath, yPath, rowsPerStep, shard,
                                     option);
}
