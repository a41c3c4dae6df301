//===- DataSource.cpp - The training driver's input data ------------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "Data/DataSource.h"
#include "Data/Files.h"
#include "Data/Values.h"
#include "Device/Device.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <functional>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

using namespace zrt;

namespace {

/// [begin, end) of `n` items: the share that `shard` checks.
std::pair<int64_t, int64_t> shareOf(int64_t n, DataShard shard) {
  return {n * shard.rank / shard.world, n * (shard.rank + 1) / shard.world};
}

/// Items [begin, end) as `a-b` (or `a` alone), for messages.
std::string spanText(int64_t begin, int64_t end) {
  return end - begin == 1
             ? std::to_string(begin)
             : std::to_string(begin) + "-" + std::to_string(end - 1);
}

/// Items [first, first + count) of `n` that wrap around, as `a-b` (or
/// `a-b and c-d` where they wrap), for messages.
std::string wrappedRange(int64_t first, int64_t count, int64_t n) {
  int64_t begin = first % n, end = begin + count;
  if (end <= n)
    return spanText(begin, end);
  return spanText(begin, n) + " and " + spanText(0, end - n);
}

/// One global batch of `rowsPerStep` rows must not take a sample of the
/// `samples` in `path` twice.
void checkSamples(const Manifest &m, const std::string &path, int64_t samples,
                  int64_t rowsPerStep) {
  if (samples < rowsPerStep)
    fail(path + ": " + std::to_string(samples) +
         " samples, fewer than one global batch of " +
         std::to_string(rowsPerStep) + " (" +
         std::to_string(m.inputs[0].shape[0]) + " per rank and micro step, " +
         std::to_string(m.worldSize) + " rank(s), " +
         std::to_string(m.accumulationSteps) + " micro step(s))");
}

/// The data files' mappings (training and held-out data), for the SIGBUS
/// handler: reading a page of a mapped file that was truncated after mmap
/// raises SIGBUS, which would otherwise end the rank without a word.
struct BusErrorInfo {
  std::atomic<const char *> begin{nullptr};
  size_t bytes = 0;
  char message[640] = {};
  size_t length = 0;
};
BusErrorInfo busErrors[8];
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

/// A data file mapped read-only, whole: the pages a step reads come in
/// from the page cache, so a file larger than memory trains.
class MappedFile {
public:
  /// `what` names the file in messages ("token file"), `type` the type of
  /// its elements where known; `checkSize` refuses a size before the file
  /// is mapped.
  MappedFile(const std::string &path, const char *what, DataShard shard,
             const std::function<void(size_t)> &checkSize = {},
             const char *type = nullptr)
      : path(path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      fail("cannot open '" + path + "': " + std::strerror(errno));
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      ::close(fd);
      fail("cannot stat '" + path + "'");
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd);
      fail("'" + path + "' is not a " + (type ? type + std::string(" ") : "") +
           what + " (not a regular file)");
    }
    bytes = size_t(st.st_size);
    try {
      if (checkSize)
        checkSize(bytes);
    } catch (...) {
      ::close(fd);
      throw;
    }
    if (bytes > 0) {
      map = ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
      if (map == MAP_FAILED) {
        int err = errno;
        ::close(fd);
        fail("cannot map '" + path + "': " + std::strerror(err));
      }
    }
    ::close(fd);
    watchForTruncation(what, shard);
  }
  MappedFile(const MappedFile &) = delete;
  MappedFile &operator=(const MappedFile &) = delete;
  ~MappedFile() {
    if (watch)
      watch->begin.store(nullptr);
    if (map)
      ::munmap(map, bytes);
  }

  const char *data() const { return static_cast<const char *>(map); }
  size_t size() const { return bytes; }

  const std::string path;

private:
  void watchForTruncation(const char *what, DataShard shard) {
    if (!map)
      return;
    std::string who = shard.world > 1 ? "zrt: error: rank " +
                                            std::to_string(shard.rank) + ": "
                                      : "zrt: error: ";
    std::string msg =
        who + "the " + what + " '" + path + "' shrank below its " +
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
    watch->begin.store(data());
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

  void *map = nullptr;
  size_t bytes = 0;
  BusErrorInfo *watch = nullptr;
};

/// The integer .npy array of `file`: its header, checked to hold one of
/// the token types; `role` names what it holds in messages.
const TokenType &npyTokenType(const MappedFile &file, const NpyHeader &header,
                              const char *role) {
  for (const TokenType &t : kTokenTypes)
    if (header.descr == t.descr)
      return t;
  fail("'" + file.path + "': " + role +
       " must be uint16, uint32, int32 or int64 ('<u2', '<u4', '<i4', "
       "'<i8'), found '" +
       header.descr + "'");
}

/// A stream of tokens: a raw file of --data-dtype (nanoGPT's uint16
/// train.bin by default) or a 1-D .npy array. Row k is the window starting
/// at k * T; its labels are the tokens after the inputs (next_token) or
/// the inputs' own (same_tokens).
class TokenData : public DataSource {
public:
  /// `rowsPerStep`: the rows of one global batch (every rank, micro step).
  TokenData(const Manifest &m, const std::string &path, int64_t rowsPerStep,
            DataShard shard, RawTokenType raw, const char *option)
      : m(m), roles(m) {
    if (!roles.fits(m) || m.inputs[roles.ids].shape.size() != 2 ||
        m.inputs[roles.ids].shape != m.inputs[roles.labels].shape)
      fail(std::string(option) +
           " needs a model whose inputs are integer tokens and targets of "
           "the same shape [B, T]");
    rows = m.inputs[roles.ids].shape[0];
    // A window is a whole row; a rank of a sequence-parallel group takes
    // its shard of `shard` tokens.
    sp = m.sequenceParallel;
    segment = m.inputs[roles.ids].shape[1];
    seq = segment * sp;
    shift = m.sameTokenLabels ? 0 : 1;
    if (m.shiftedLabels && !m.inputs[roles.labels].ignoredIndex)
      fail(std::string(option) +
           ": the model's labels are shifted over "
           "whole rows, but no loss names their ignored index");
    const TokenType &rawType = kTokenTypes[raw.bytes == 4 ? 1 : 0];
    bool npyName =
        path.size() >= 4 && path.compare(path.size() - 4, 4, ".npy") == 0;
    // A raw file's size must be whole tokens; checked before mapping it.
    file = std::make_unique<MappedFile>(
        path, "token file", shard,
        [&](size_t bytes) {
          if (npyName || bytes % size_t(rawType.bytes) == 0)
            return;
          fail("'" + path + "' is not a " + rawType.name + " token file (" +
               (rawType.bytes == 2
                    ? "an odd size of " + std::to_string(bytes) + " bytes"
                    : "a size of " + std::to_string(bytes) +
                          " bytes, not a multiple of " +
                          std::to_string(rawType.bytes)) +
               ")");
        },
        npyName ? nullptr : rawType.name);
    if (npyName || isNpy(file->data(), file->size()))
      openNpy(raw);
    else
      openRaw(rawType, raw.given);
    // One global batch must not wrap around: its rows are distinct windows
    // of T tokens, and with next_token the last label is the token after
    // them.
    int64_t need = rowsPerStep * seq + shift;
    if (length < need)
      fail("'" + path + "' holds " + std::to_string(length) +
           " tokens; one global batch of " + std::to_string(rowsPerStep) +
           " rows x " + std::to_string(seq) + " tokens needs at least " +
           std::to_string(need) +
           (shift ? " (targets are shifted by one)" : ""));
    checkTokens(shard);
  }

  void load(zrt_ctx &ctx, int64_t first) override {
    const InputInfo &xi = m.inputs[roles.ids], &yi = m.inputs[roles.labels];
    x.resize(size_t(xi.numel() * xi.elementBytes()));
    y.resize(size_t(yi.numel() * yi.elementBytes()));
    int64_t from = ctx.rank % sp * segment;
    // A window is one document: positions 0..T-1 (this rank's shard, or
    // the whole row a sequence-parallel rank takes whole).
    if (roles.positions >= 0) {
      const InputInfo &pi = m.inputs[roles.positions];
      bool whole = holdsWholeRows(pi, seq);
      int64_t n = whole ? seq : segment, at = whole ? 0 : from;
      p.resize(size_t(pi.numel() * pi.elementBytes()));
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t t = 0; t < n; ++t)
          storeIndex(pi, p.data(), r * n + t, at + t);
      device::upload(ctx.step + pi.offset, p.data(), int64_t(p.size()));
    }
    for (int64_t r = 0; r < rows; ++r) {
      int64_t start = ((first + r) % length) * seq % length;
      for (int64_t t = 0; t < segment; ++t) {
        int64_t pos = from + t;
        storeIndex(xi, x.data(), r * segment + t,
                   token((start + pos) % length));
        int64_t label = !m.shiftedLabels ? token((start + pos + shift) % length)
                        : pos + 1 < seq  ? token((start + pos + 1) % length)
                                         : *yi.ignoredIndex;
        storeIndex(yi, y.data(), r * segment + t, label);
      }
    }
    device::upload(ctx.step + xi.offset, x.data(), int64_t(x.size()));
    device::upload(ctx.step + yi.offset, y.data(), int64_t(y.size()));
  }
  /// Windows of T tokens (and, with next_token, the label after them).
  int64_t wholeRows() const override { return (length - shift) / seq; }
  int64_t itemsPerRow() const override { return seq; }
  const char *unit() const override { return "tok/s"; }
  int64_t labelsPerRow() const override { return seq; }
  /// Window k starts at token k * T (as load reads it); the windows'
  /// tokens and, with next_token, the label after them.
  std::string describeRows(int64_t first, int64_t count) const override {
    int64_t start = (first % length) * seq % length;
    return (count == 1 ? "window " : "windows ") +
           spanText(first, first + count) + " of '" + file->path +
           "', tokens " + wrappedRange(start, count * seq + shift, length);
  }

private:
  void openNpy(RawTokenType raw) {
    const std::string &path = file->path;
    NpyHeader header = parseNpyHeader(file->data(), file->size(), path);
    type = &npyTokenType(*file, header, "tokens");
    if (header.shape.size() != 1)
      fail("'" + path + "': a token file holds a 1-D array of tokens, its " +
           ".npy shape is " + shapeText(header.shape));
    if (raw.given && raw.bytes != type->bytes)
      fail("'" + path + "' is an .npy array of " + type->name +
           " tokens, but --data-dtype says u" + std::to_string(8 * raw.bytes) +
           " (it applies to raw token files; an .npy file says its own)");
    base = file->data() + header.dataOffset;
    length = header.shape[0];
  }

  void openRaw(const TokenType &rawType, bool given) {
    const std::string &path = file->path;
    type = &rawType;
    base = file->data();
    length = int64_t(file->size() / size_t(rawType.bytes));
    // The model's ids must fit the file's type: a raw file of another type
    // would otherwise be read as garbage tokens.
    int64_t bound = vocabulary();
    if (bound > (int64_t(1) << (8 * rawType.bytes)))
      fail("'" + path + "': a raw " + rawType.name +
           " token file cannot hold the model's vocabulary of " +
           std::to_string(bound) + " tokens (ids up to " +
           std::to_string(bound - 1) +
           "); write the tokens as uint32 and pass --data-dtype u32, or "
           "save them as a .npy array");
    if (rawType.bytes == 2 && !given)
      refuseWideTokens();
  }

  /// uint32 tokens read as uint16 come in pairs of the token and zero (the
  /// high half of ids below 65536), each a valid id of a small vocabulary:
  /// a file whose first words alternate with zeros is refused, naming the
  /// way out. The same words on every rank, so every rank agrees.
  void refuseWideTokens() const {
    int64_t n = std::min<int64_t>(length, 4096) & ~int64_t(1);
    if (n < 64)
      return;
    bool evenNonzero = false;
    for (int64_t i = 0; i < n; i += 2) {
      if (token(i + 1) != 0)
        return;
      evenNonzero |= token(i) != 0;
    }
    if (evenNonzero)
      fail("'" + file->path + "' looks like uint32 tokens read as uint16: " +
           "its first " + std::to_string(n) +
           " 16-bit words alternate with zeros (the high halves of uint32 "
           "tokens); pass --data-dtype u32 (or --data-dtype u16 if they "
           "really are uint16 tokens)");
  }

  /// The smallest index bound of the token ids and labels (-1: none).
  int64_t vocabulary() const {
    int64_t bound = -1;
    for (int i : {roles.ids, roles.labels})
      if (const InputInfo &in = m.inputs[i]; in.indexBound > 0)
        bound = bound < 0 ? in.indexBound : std::min(bound, in.indexBound);
    return bound;
  }

  /// Every token is read as an input id and as a label: each must be a
  /// value both inputs take, or a kernel would stop the run at the step
  /// that first reads the bad one. This rank checks its share.
  void checkTokens(DataShard shard) const {
    // A token the labels ignore is still an input id.
    std::vector<InputInfo> strict = {m.inputs[roles.ids],
                                     m.inputs[roles.labels]};
    for (InputInfo &in : strict)
      in.ignoredIndex.reset();
    auto [begin, end] = shareOf(length, shard);
    for (int64_t i = begin; i < end; ++i) {
      int64_t v = token(i);
      for (const InputInfo &in : strict) {
        std::string problem = indexProblem(in, v, "token ids", "vocabulary");
        if (!problem.empty())
          fail("'" + file->path + "': token " + std::to_string(v) +
               " at offset " + std::to_string(i) + " (byte " +
               std::to_string(size_t(base - file->data()) +
                              size_t(i * type->bytes)) +
               ") " + problem);
      }
    }
  }

  int64_t token(int64_t i) const {
    return tokenAt(base + i * type->bytes, *type);
  }

  const Manifest &m;
  TokenInputs roles;
  int64_t rows = 0, seq = 0, length = 0, sp = 1, segment = 0;
  /// 1: labels are the next tokens; 0: the same tokens.
  int64_t shift = 1;
  std::unique_ptr<MappedFile> file;
  const TokenType *type = nullptr;
  const char *base = nullptr;
  /// Host staging of the inputs (the arena may be device memory).
  std::vector<char> x, y, p;
};

/// Token ids [N, ...] and labels [N, ...] from integer .npy arrays, for a
/// model whose inputs are both integer: row k is sample k % N.
class TokenArrayData : public DataSource {
public:
  TokenArrayData(const Manifest &m, const std::string &xPath,
                 const std::string &yPath, const std::string &pPath,
                 int64_t rowsPerStep, DataShard shard, const char *option)
      : m(m), roles(m), x(xPath, "data file", shard),
        y(yPath, "data file", shard), sp(m.sequenceParallel) {
    const InputInfo &xi = m.inputs[roles.ids], &yi = m.inputs[roles.labels];
    rows = xi.shape[0];
    NpyHeader xh = parseNpyHeader(x.data(), x.size(), xPath);
    NpyHeader yh = parseNpyHeader(y.data(), y.size(), yPath);
    xType = &npyTokenType(x, xh, "token ids");
    yType = &npyTokenType(y, yh, "labels");
    checkShape(xh, xi, x.path, "token ids");
    checkShape(yh, yi, y.path, "labels");
    samples = xh.shape[0];
    if (yh.shape[0] != samples)
      fail("'" + yPath + "': " + std::to_string(yh.shape[0]) +
           " rows of labels for the " + std::to_string(samples) +
           " rows of token ids in '" + xPath + "'");
    checkSamples(m, xPath, samples, rowsPerStep);
    xs = x.data() + xh.dataOffset;
    ys = y.data() + yh.dataOffset;
    xRow = xi.numel() / rows * sp;
    yRow = yi.numel() / rows * sp;
    if (m.shiftedLabels && !yi.ignoredIndex)
      fail("'" + yPath +
           "': the model's labels are shifted over whole "
           "rows, but no loss names their ignored index");
    auto [begin, end] = shareOf(samples, shard);
    check(x, xs, *xType, xi, xRow, begin, end, "token", "token ids",
          "vocabulary");
    check(y, ys, *yType, yi, yRow, begin, end, "label", "labels", "classes");
    openPositions(pPath, xPath, xh, option, shard, begin, end);
  }

  void load(zrt_ctx &ctx, int64_t first) override {
    upload(ctx, first, m.inputs[roles.ids], xs, *xType, xRow, xStage, false);
    upload(ctx, first, m.inputs[roles.labels], ys, *yType, yRow, yStage,
           m.shiftedLabels);
    if (p)
      upload(ctx, first, m.inputs[roles.positions], ps, *pType, xRow, pStage,
             false);
  }
  int64_t wholeRows() const override { return samples; }
  int64_t itemsPerRow() const override { return xRow; }
  const char *unit() const override { return "tok/s"; }
  int64_t labelsPerRow() const override { return yRow; }
  std::string describeRows(int64_t first, int64_t count) const override {
    return "rows " + wrappedRange(first, count, samples) + " of '" + x.path +
           "' and '" + y.path + "'";
  }

private:
  void checkShape(const NpyHeader &h, const InputInfo &in,
                  const std::string &path, const char *role) const {
    std::vector<int64_t> want(in.shape.begin() + 1, in.shape.end());
    // Whole rows: a sequence-parallel rank holds 1/P of each.
    if (!want.empty())
      want[0] *= sp;
    if (h.shape.size() != in.shape.size() || h.shape[0] < 1 ||
        !std::equal(want.begin(), want.end(), h.shape.begin() + 1))
      fail("'" + path + "': expected " + role + " of shape [N" +
           (want.empty() ? std::string() : ", ") +
           shapeText(want).substr(1, shapeText(want).size() - 2) +
           "] (the model's input is " + shapeText(in.shape) + "), found " +
           shapeText(h.shape));
  }

  /// The positions of packed rows, where the model reads them: a file of
  /// the ids' shape whose values the model takes (>= 0, below its bound).
  void openPositions(const std::string &pPath, const std::string &xPath,
                     const NpyHeader &xh, const char *option, DataShard shard,
                     int64_t begin, int64_t end) {
    if (roles.positions < 0) {
      if (!pPath.empty())
        fail("'" + pPath +
             "': the model reads no positions (its attention sees one "
             "document a row); import it with zero-import --hf DIR --packed "
             "to train on packed rows");
      return;
    }
    if (pPath.empty())
      fail(std::string(option) +
           ": the model reads the positions of packed rows (an input of " +
           shapeText(m.inputs[roles.positions].shape) + "); pass " +
           (std::string(option).rfind("--eval", 0) == 0 ? "--eval-positions"
                                                        : "--positions") +
           " P.npy (zero-data tokens --pack writes positions.npy)");
    p = std::make_unique<MappedFile>(pPath, "data file", shard);
    NpyHeader ph = parseNpyHeader(p->data(), p->size(), pPath);
    pType = &npyTokenType(*p, ph, "positions");
    if (ph.shape != xh.shape)
      fail("'" + pPath + "': positions of shape " + shapeText(ph.shape) +
           ", the token ids in '" + xPath + "' are " + shapeText(xh.shape) +
           " (one position per token)");
    ps = p->data() + ph.dataOffset;
    check(*p, ps, *pType, m.inputs[roles.positions], xRow, begin, end,
          "position", "positions", "positions");
  }

  /// Values the model takes, in rows [begin, end) of this rank's share.
  void check(const MappedFile &file, const char *data, const TokenType &type,
             const InputInfo &in, int64_t rowSize, int64_t begin, int64_t end,
             const char *noun, const char *values, const char *range) const {
    for (int64_t i = begin * rowSize; i < end * rowSize; ++i) {
      int64_t v = tokenAt(data + i * type.bytes, type);
      std::string problem = indexProblem(in, v, values, range);
      if (!problem.empty())
        fail("'" + file.path + "': " + noun + " " + std::to_string(v) +
             " at row " + std::to_string(i / rowSize) + ", column " +
             std::to_string(i % rowSize) + " " + problem);
    }
  }

  /// This rank's shard of rows [first, first + rows) of the file, which
  /// holds `rowSize` values a row; `shifted`: each value is the row's next
  /// one, the last the input's ignored index.
  void upload(zrt_ctx &ctx, int64_t first, const InputInfo &in,
              const char *data, const TokenType &type, int64_t rowSize,
              std::vector<char> &stage, bool shifted) {
    stage.resize(size_t(in.numel() * in.elementBytes()));
    // A sequence-parallel rank's shard of each row, or the whole row.
    bool whole = holdsWholeRows(in, rowSize);
    int64_t segment = whole ? rowSize : rowSize / sp,
            from = whole ? 0 : ctx.rank % sp * segment;
    for (int64_t r = 0; r < rows; ++r) {
      int64_t k = (first + r) % samples;
      for (int64_t t = 0; t < segment; ++t) {
        int64_t pos = from + t + (shifted ? 1 : 0);
        storeIndex(in, stage.data(), r * segment + t,
                   pos < rowSize
                       ? tokenAt(data + (k * rowSize + pos) * type.bytes, type)
                       : *in.ignoredIndex);
      }
    }
    device::upload(ctx.step + in.offset, stage.data(), int64_t(stage.size()));
  }

  const Manifest &m;
  TokenInputs roles;
  MappedFile x, y;
  /// Positions, where the model reads them.
  std::unique_ptr<MappedFile> p;
  const TokenType *xType = nullptr, *yType = nullptr, *pType = nullptr;
  const char *xs = nullptr, *ys = nullptr, *ps = nullptr;
  int64_t rows = 0, samples = 0, xRow = 0, yRow = 0, sp = 1;
  /// Host staging of the inputs (the arena may be device memory).
  std::vector<char> xStage, yStage, pStage;
};

/// Features [N, ...] and labels [N] from .npy files; row k is sample k % N.
class ArrayData : public DataSource {
public:
  ArrayData(const Manifest &m, const std::string &xPath,
            const std::string &yPath, int64_t rowsPerStep, DataShard shard,
            const char *option)
      : m(m), xFile(xPath), yFile(yPath) {
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
    checkSamples(m, xPath, samples, rowsPerStep);
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
  int64_t labelsPerRow() const override { return 1; }
  std::string describeRows(int64_t first, int64_t count) const override {
    return "rows " + wrappedRange(first, count, samples) + " of '" + xFile +
           "' and '" + yFile + "'";
  }

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
      std::string problem = indexProblem(yi, label, "labels", "classes");
      if (!problem.empty())
        fail("'" + yPath + "': label " + std::to_string(label) + " at index " +
             std::to_string(k) + " " + problem);
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
  std::string xFile, yFile;
  NpyArray x, y;
  int64_t rows = 0, rowSize = 0, samples = 0;
  /// Host staging of the inputs (the arena may be device memory).
  std::vector<float> xs;
  std::vector<char> ys;
};

} // namespace

std::unique_ptr<DataSource>
zrt::openTokenData(const Manifest &m, const std::string &path,
                   int64_t rowsPerStep, DataShard shard, RawTokenType raw,
                   const char *option) {
  return std::make_unique<TokenData>(m, path, rowsPerStep, shard, raw, option);
}

std::unique_ptr<DataSource>
zrt::openArrayData(const Manifest &m, const std::string &xPath,
                   const std::string &yPath, const std::string &pPath,
                   int64_t rowsPerStep, DataShard shard, const char *option) {
  // Token ids and labels (a language model's), or features and labels.
  if (TokenInputs(m).fits(m))
    return std::make_unique<TokenArrayData>(m, xPath, yPath, pPath, rowsPerStep,
                                            shard, option);
  if (!pPath.empty())
    fail("'" + pPath +
         "': positions are for a token model's packed rows, but the "
         "model's inputs are features");
  return std::make_unique<ArrayData>(m, xPath, yPath, rowsPerStep, shard,
                                     option);
}
