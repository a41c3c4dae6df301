//===- Nvme.cpp - The swap file of an optimizer offloaded to NVMe ---------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "Optimizer/Nvme.h"
#include "Collectives/Mpi.h"
#include "Data/Files.h"
#include "Support/Support.h"

#include <liburing.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <mutex>
#include <stdexcept>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <thread>
#include <unistd.h>
#include <unordered_map>
#include <vector>

using namespace zrt;

namespace zrt {

/// The faults ZRT_TEST_NVME_FAULT injects into one swap file (Nvme.h).
/// Both engines ask `next` before each read or write they issue; the
/// thread pool's two workers ask concurrently.
struct NvmeFaults {
  struct Fault {
    enum Kind { None, Error, Short, Eof } kind = None;
    bool write = false;
    int64_t index = 0, step = 0;
    int error = 0;
  };
  std::vector<Fault> faults;
  bool noDirect = false;
  /// io_uring as before Linux 5.6: a ring without IORING_OP_READ/WRITE.
  bool noReadWriteOps = false;
  std::string path;
  std::atomic<int64_t> step{0};

  /// Counts one read or write about to be issued; returns the fault it
  /// gets (kind None: none).
  Fault next(bool write) {
    std::lock_guard<std::mutex> lock(mutex);
    int64_t now = step.load();
    if (now != 0)
      ++issued[write][now];
    ++issued[write][0];
    for (const Fault &f : faults)
      if (f.write == write && issued[write][f.step] == f.index &&
          (f.step == 0 || f.step == now)) {
        std::fprintf(stderr,
                     "zrt: test hook: ZRT_TEST_NVME_FAULT: %s %lld%s%s of "
                     "'%s' gets %s\n",
                     write ? "write" : "read", (long long)f.index,
                     f.step ? " of step " : "",
                     f.step ? std::to_string(f.step).c_str() : "", path.c_str(),
                     f.kind == Fault::Short ? "a short transfer"
                     : f.kind == Fault::Eof ? "the end of the file"
                                            : errnoName(f.error));
        std::fflush(stderr);
        return f;
      }
    return Fault{};
  }

  static const char *errnoName(int err);

private:
  std::mutex mutex;
  /// Reads and writes issued, per step (0: in all).
  std::unordered_map<int64_t, int64_t> issued[2];
};

/// Runs swap-file reads and writes asynchronously.
class SwapEngine {
public:
  explicit SwapEngine(NvmeFaults &faults) : faults(faults) {}
  virtual ~SwapEngine() = default;
  virtual const char *name() const = 0;
  virtual void submit(SwapIo &io) = 0;
  /// Returns once `io.done`.
  virtual void wait(SwapIo &io) = 0;

protected:
  NvmeFaults &faults;
};

} // namespace zrt

namespace {

using Fault = NvmeFaults::Fault;

/// Ends the run after a swap-file transfer failed: the disk, not the
/// program, is at fault, so one line and exit status 1 rather than
/// fatal's abort, and every rank ends (MPI_Abort) rather than waiting in
/// the step's next collective for this one.
[[noreturn]] __attribute__((format(printf, 1, 2))) void
ioFailed(const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  printError(fmt, args);
  va_end(args);
  std::fflush(nullptr);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized)
    MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
}

/// The length an injected short transfer of `remaining` bytes moves: half,
/// whole 4096-byte blocks, as O_DIRECT needs them; 512 bytes (the smallest
/// logical block) of a single block.
unsigned shortLength(int64_t remaining) {
  return unsigned(remaining >= 2 * kSwapAlignment
                      ? remaining / 2 / kSwapAlignment * kSwapAlignment
                      : 512);
}

/// pread/pwrite until all of `io` moved, retrying partial transfers and
/// EINTR/EAGAIN; the result is the bytes moved (fewer only where the file
/// ended or a write moved nothing) or -errno.
int64_t transferAll(int fd, SwapIo &io, NvmeFaults &faults) {
  int64_t moved = 0;
  while (moved < io.bytes) {
    size_t len = size_t(io.bytes - moved);
    Fault f = faults.next(io.write);
    if (f.kind == Fault::Short)
      len = std::min<size_t>(len, shortLength(io.bytes - moved));
    else if (f.kind == Fault::Eof)
      len = 0;
    ssize_t n;
    if (f.kind == Fault::Error) {
      n = -1;
      errno = f.error;
    } else {
      n = io.write ? ::pwrite(fd, io.buffer + moved, len, io.offset + moved)
                   : ::pread(fd, io.buffer + moved, len, io.offset + moved);
    }
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (n < 0)
      return -errno;
    if (n == 0)
      break;
    moved += n;
  }
  return moved;
}

/// io_uring: one ring per rank; completions are matched to their SwapIo
/// through user_data. Only the training thread submits and waits.
class UringEngine final : public SwapEngine {
public:
  static std::unique_ptr<UringEngine> create(int fd, NvmeFaults &faults,
                                             std::string &why) {
    auto e = std::unique_ptr<UringEngine>(new UringEngine(fd, faults));
    int rc = io_uring_queue_init(kDepth, &e->ring, 0);
    if (rc < 0) {
      why = std::string("io_uring_queue_init: ") + std::strerror(-rc);
      return nullptr;
    }
    e->live = true;
    // Before Linux 5.6 a ring sets up but has no plain reads and writes:
    // every transfer would complete with EINVAL.
    io_uring_probe *probe = io_uring_get_probe_ring(&e->ring);
    bool usable = probe && io_uring_opcode_supported(probe, IORING_OP_READ) &&
                  io_uring_opcode_supported(probe, IORING_OP_WRITE);
    if (probe)
      io_uring_free_probe(probe);
    if (!usable || faults.noReadWriteOps) {
      why = "io_uring has no IORING_OP_READ/IORING_OP_WRITE (Linux 5.6 or "
            "newer has them)";
      return nullptr;
    }
    return e;
  }
  ~UringEngine() override {
    if (live)
      io_uring_queue_exit(&ring);
  }
  const char *name() const override { return "io_uring"; }
  void submit(SwapIo &io) override {
    io.done = false;
    moved[&io] = 0;
    queue(io, 0);
  }
  void wait(SwapIo &io) override {
    while (!io.done)
      reapOne();
  }

private:
  static constexpr unsigned kDepth = 64;
  UringEngine(int fd, NvmeFaults &faults) : SwapEngine(faults), fd(fd) {}

  /// Waits for one completion and records it; a partial transfer (a
  /// signal, a device limit) and -EINTR/-EAGAIN are resubmitted for the
  /// rest.
  void reapOne() {
    io_uring_cqe *cqe = nullptr;
    int rc;
    do
      rc = io_uring_wait_cqe(&ring, &cqe);
    while (rc == -EINTR);
    if (rc < 0)
      ioFailed("nvme: io_uring_wait_cqe for the swap file '%s': %s",
               faults.path.c_str(), std::strerror(-rc));
    auto *io = static_cast<SwapIo *>(io_uring_cqe_get_data(cqe));
    int res = cqe->res;
    io_uring_cqe_seen(&ring, cqe);
    --inFlight;
    // An injected error replaces the result of the no-op that stood in
    // for the transfer.
    auto inj = injected.find(io);
    if (inj != injected.end()) {
      res = inj->second;
      injected.erase(inj);
    }
    int64_t &sofar = moved[io];
    if (res == -EINTR || res == -EAGAIN) {
      queue(*io, sofar);
      return;
    }
    if (res > 0 && sofar + res < io->bytes) {
      sofar += res;
      queue(*io, sofar);
      return;
    }
    io->result = res < 0 ? res : sofar + res;
    io->done = true;
    moved.erase(io);
  }

  void queue(SwapIo &io, int64_t from) {
    // Never more in flight than the completion queue holds.
    while (inFlight >= int(kDepth))
      reapOne();
    io_uring_sqe *sqe = io_uring_get_sqe(&ring);
    if (!sqe)
      fatal("nvme: io_uring submission queue full");
    unsigned len = unsigned(io.bytes - from);
    Fault f = faults.next(io.write);
    if (f.kind == Fault::Short)
      len = std::min(len, shortLength(io.bytes - from));
    else if (f.kind == Fault::Eof)
      len = 0;
    if (f.kind == Fault::Error) {
      io_uring_prep_nop(sqe);
      injected[&io] = -f.error;
    } else if (io.write) {
      io_uring_prep_write(sqe, fd, io.buffer + from, len, io.offset + from);
    } else {
      io_uring_prep_read(sqe, fd, io.buffer + from, len, io.offset + from);
    }
    io_uring_sqe_set_data(sqe, &io);
    int rc = io_uring_submit(&ring);
    if (rc < 0)
      ioFailed("nvme: io_uring_submit for the swap file '%s': %s",
               faults.path.c_str(), std::strerror(-rc));
    ++inFlight;
  }

  int fd;
  io_uring ring{};
  bool live = false;
  int inFlight = 0;
  /// Bytes already moved by each pending transfer.
  std::unordered_map<SwapIo *, int64_t> moved;
  /// The results ZRT_TEST_NVME_FAULT gives pending transfers' no-ops.
  std::unordered_map<SwapIo *, int> injected;
};

/// The fallback: two threads running pread/pwrite (a read and a write can
/// proceed at once, as with io_uring).
class ThreadPoolEngine final : public SwapEngine {
public:
  ThreadPoolEngine(int fd, NvmeFaults &faults) : SwapEngine(faults), fd(fd) {
    for (int i = 0; i < 2; ++i)
      workers.emplace_back([this] { work(); });
  }
  ~ThreadPoolEngine() override {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    wake.notify_all();
    for (std::thread &t : workers)
      t.join();
  }
  const char *name() const override { return "thread pool"; }
  void submit(SwapIo &io) override {
    {
      std::lock_guard<std::mutex> lock(mutex);
      io.done = false;
      queue.push_back(&io);
    }
    wake.notify_one();
  }
  void wait(SwapIo &io) override {
    std::unique_lock<std::mutex> lock(mutex);
    finished.wait(lock, [&] { return io.done; });
  }

private:
  void work() {
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      wake.wait(lock, [&] { return stopping || !queue.empty(); });
      if (queue.empty())
        return;
      SwapIo *io = queue.front();
      queue.pop_front();
      lock.unlock();
      int64_t result = transferAll(fd, *io, faults);
      lock.lock();
      io->result = result;
      io->done = true;
      finished.notify_all();
    }
  }

  int fd;
  std::mutex mutex;
  std::condition_variable wake, finished;
  std::deque<SwapIo *> queue;
  bool stopping = false;
  std::vector<std::thread> workers;
};

std::string errnoText(int err) { return std::strerror(err); }

/// The errors ZRT_TEST_NVME_FAULT can inject: what a failing, full or
/// over-quota disk answers, and the transient ones the engines retry.
constexpr struct {
  const char *name;
  int error;
} kInjectableErrors[] = {{"ENOSPC", ENOSPC}, {"EIO", EIO},
                         {"EDQUOT", EDQUOT}, {"EFBIG", EFBIG},
                         {"EINTR", EINTR},   {"EAGAIN", EAGAIN}};

/// Parses ZRT_TEST_NVME_FAULT (Nvme.h) into `faults`.
void parseFaults(const std::string &spec, NvmeFaults &faults) {
  size_t at = 0;
  while (at <= spec.size()) {
    size_t end = std::min(spec.find(',', at), spec.size());
    std::string entry = spec.substr(at, end - at);
    at = end + 1;
    auto bad = [&](const std::string &why) {
      fail("ZRT_TEST_NVME_FAULT: '" + entry + "': " + why +
           " (expected nodirect, nouringrw or OP:N:FAULT[@S], OP read or "
           "write, FAULT an errno name, short or eof)");
    };
    if (entry == "nodirect") {
      faults.noDirect = true;
      continue;
    }
    if (entry == "nouringrw") {
      faults.noReadWriteOps = true;
      continue;
    }
    NvmeFaults::Fault f;
    size_t c1 = entry.find(':'), c2 = entry.find(':', c1 + 1);
    if (c1 == std::string::npos || c2 == std::string::npos)
      bad("not OP:N:FAULT");
    std::string op = entry.substr(0, c1);
    if (op != "read" && op != "write")
      bad("OP is '" + op + "'");
    f.write = op == "write";
    std::string what = entry.substr(c2 + 1);
    size_t atStep = what.find('@');
    auto count = [&](const std::string &text, const char *name) {
      char *stop = nullptr;
      long long v = std::strtoll(text.c_str(), &stop, 10);
      if (text.empty() || *stop || v < 1)
        bad(std::string(name) + " is '" + text + "', not a positive integer");
      return int64_t(v);
    };
    f.index = count(entry.substr(c1 + 1, c2 - c1 - 1), "N");
    if (atStep != std::string::npos) {
      f.step = count(what.substr(atStep + 1), "S");
      what.resize(atStep);
    }
    if (what == "short") {
      f.kind = NvmeFaults::Fault::Short;
    } else if (what == "eof") {
      f.kind = NvmeFaults::Fault::Eof;
    } else {
      f.kind = NvmeFaults::Fault::Error;
      for (const auto &e : kInjectableErrors)
        if (what == e.name)
          f.error = e.error;
      if (!f.error)
        bad("FAULT is '" + what + "'");
    }
    faults.faults.push_back(f);
  }
}

} // namespace

const char *NvmeFaults::errnoName(int err) {
  for (const auto &e : kInjectableErrors)
    if (e.error == err)
      return e.name;
  return "an error";
}

int64_t zrt::nvmeKillStep() {
  static const int64_t step = [] {
    const char *v = std::getenv("ZRT_TEST_NVME_KILL_AT_STEP");
    return v ? std::strtoll(v, nullptr, 10) : 0;
  }();
  return step;
}

int64_t zrt::swapTransferLimit() {
  static const int64_t limit = [] {
    const char *v = std::getenv("ZRT_TEST_NVME_MAX_TRANSFER");
    if (!v)
      return kMaxTransfer;
    char *end = nullptr;
    long long bytes = std::strtoll(v, &end, 10);
    if (end == v || *end || bytes <= 0 || bytes % kSwapAlignment ||
        bytes > kMaxTransfer)
      fail("ZRT_TEST_NVME_MAX_TRANSFER: '" + std::string(v) +
           "' is not a multiple of " + std::to_string(kSwapAlignment) +
           " bytes up to " + std::to_string(kMaxTransfer));
    return int64_t(bytes);
  }();
  return limit;
}

std::unique_ptr<SwapFile> SwapFile::open(const std::string &dir, int rank,
                                         int64_t bytes, const std::string &kind,
                                         const std::string &option) {
  std::string where =
      (kind == "params" ? "param nvme_path '" : "nvme_path '") + dir + "'";
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0)
    fail(where +
         (errno == ENOENT ? " does not exist" : ": " + errnoText(errno)) +
         ": create it, or compile with another " + option);
  if (!S_ISDIR(st.st_mode))
    fail(where + " is not a directory");
  std::unique_ptr<SwapFile> f(new SwapFile);
  f->filePath = dir + "/zero-" + kind + ".rank" + std::to_string(rank) + ".swp";
  f->fileBytes = bytes;
  f->faults = std::make_unique<NvmeFaults>();
  f->faults->path = f->filePath;
  if (const char *spec = std::getenv("ZRT_TEST_NVME_FAULT"))
    if (*spec)
      parseFaults(spec, *f->faults);
  // A bad test hook is refused here, before any step.
  (void)swapTransferLimit();
  // The file exists from an earlier run (swap files are kept, as
  // DeepSpeed keeps them): its blocks count as room.
  int64_t existing = 0;
  bool existed = ::stat(f->filePath.c_str(), &st) == 0;
  if (existed && S_ISREG(st.st_mode))
    existing = int64_t(st.st_blocks) * 512;
  int flags = O_RDWR | O_CREAT | O_CLOEXEC;
  if (f->faults->noDirect) {
    std::fprintf(stderr,
                 "zrt: test hook: ZRT_TEST_NVME_FAULT: open(O_DIRECT) "
                 "of '%s' gets EINVAL\n",
                 f->filePath.c_str());
    errno = EINVAL;
  } else {
    f->fd = ::open(f->filePath.c_str(), flags | O_DIRECT, 0644);
  }
  f->directIo = f->fd >= 0;
  if (f->fd < 0 && errno == EINVAL) {
    // The file system refuses O_DIRECT (ramfs; tmpfs before Linux 6.6):
    // buffered I/O.
    f->fd = ::open(f->filePath.c_str(), flags, 0644);
    if (f->fd >= 0)
      f->fallbackNotice =
          "the file system of " + where + " refuses O_DIRECT: buffered I/O";
  }
  if (f->fd < 0)
    fail("cannot create the swap file '" + f->filePath + "' under " + where +
         ": " + errnoText(errno));
  if (::flock(f->fd, LOCK_EX | LOCK_NB) != 0)
    fail("the swap file '" + f->filePath +
         "' is in use by another run (each run needs its own nvme_path)");
  // A refused file does not stay behind (nor one sized but not allocated).
  auto refuse = [&](const std::string &message) {
    if (existed)
      (void)::ftruncate(f->fd, 0);
    else
      ::unlink(f->filePath.c_str());
    fail(message);
  };
  // A file system that reports no size (f_blocks 0: ramfs) has no free
  // count to check either; the reservation below still fails if it is
  // full.
  struct statvfs vfs;
  if (::fstatvfs(f->fd, &vfs) == 0 && vfs.f_blocks > 0) {
    int64_t avail = int64_t(vfs.f_bavail) * int64_t(vfs.f_frsize);
    if (avail + existing < bytes)
      refuse(where + " has " + std::to_string(avail + existing) +
             " bytes free for the swap file '" + f->filePath +
             "', which needs " + std::to_string(bytes) +
             " bytes (the plan's nvme_bytes)");
  }
  // Reserve the blocks now, so a full disk is an error before step 1.
  if (::ftruncate(f->fd, 0) != 0 || ::ftruncate(f->fd, bytes) != 0)
    refuse("cannot size the swap file '" + f->filePath + "' to " +
           std::to_string(bytes) + " bytes: " + errnoText(errno));
  int rc = ::posix_fallocate(f->fd, 0, bytes);
  if (rc != 0 && rc != EOPNOTSUPP && rc != EINVAL)
    refuse("cannot allocate " + std::to_string(bytes) +
           " bytes for the swap file '" + f->filePath + "': " + errnoText(rc));
  // ZRT_NVME_ENGINE=thread-pool chooses the fallback (where io_uring is
  // slow or untrusted); anything else tries io_uring first.
  std::string why = "ZRT_NVME_ENGINE=thread-pool";
  const char *choice = std::getenv("ZRT_NVME_ENGINE");
  bool threads = choice && std::string(choice) == "thread-pool";
  if (auto uring =
          threads ? nullptr : UringEngine::create(f->fd, *f->faults, why)) {
    f->engine = std::move(uring);
  } else {
    f->engine = std::make_unique<ThreadPoolEngine>(f->fd, *f->faults);
    std::string note = std::string(threads ? "io_uring is not used ("
                                           : "io_uring is "
                                             "unavailable (") +
                       why + "): a thread pool of pread/pwrite";
    f->fallbackNotice += (f->fallbackNotice.empty() ? "" : "; ") + note;
  }
  return f;
}

SwapFile::~SwapFile() {
  engine.reset();
  if (fd >= 0)
    ::close(fd);
}

const char *SwapFile::engineName() const { return engine->name(); }

void SwapFile::setStep(int64_t step) { faults->step = step; }

void SwapFile::submit(SwapIo &io) {
  if (io.offset % kSwapAlignment || io.bytes % kSwapAlignment ||
      reinterpret_cast<uintptr_t>(io.buffer) % kSwapAlignment ||
      io.offset < 0 || io.bytes < 0 || io.bytes > kMaxTransfer ||
      io.offset + io.bytes > fileBytes)
    fatal("nvme: unaligned or out-of-range %s of %lld bytes at offset %lld "
          "of '%s' (%lld bytes; the buffer is %lld bytes past a %lld-byte "
          "boundary)",
          io.write ? "write" : "read", (long long)io.bytes,
          (long long)io.offset, filePath.c_str(), (long long)fileBytes,
          (long long)(reinterpret_cast<uintptr_t>(io.buffer) % kSwapAlignment),
          (long long)kSwapAlignment);
  io.done = false;
  engine->submit(io);
}

void SwapFile::wait(SwapIo &io) {
  engine->wait(io);
  if (io.result < 0)
    ioFailed("nvme: %s of %lld bytes at offset %lld of the swap file '%s' "
             "failed (%s): %s%s",
             io.write ? "write" : "read", (long long)io.bytes,
             (long long)io.offset, filePath.c_str(), engineName(),
             std::strerror(int(-io.result)),
             io.result == -ENOSPC ? " (the disk is full)" : "");
  // Both engines retried partial transfers: a short one moved nothing at
  // its end.
  if (io.result != io.bytes)
    ioFailed("nvme: short %s of the swap file '%s' (%s): %lld of %lld bytes "
             "at offset %lld, then %s",
             io.write ? "write" : "read", filePath.c_str(), engineName(),
             (long long)io.result, (long long)io.bytes, (long long)io.offset,
             io.write ? "a write that moved nothing"
                      : "the end of the file (was it truncated?)");
  if (io.write && killOnWrite) {
    std::fprintf(stderr,
                 "zrt: test hook: killed during the swap-file writes of "
                 "step %lld\n",
                 (long long)nvmeKillStep());
    std::fflush(stderr);
    ::raise(SIGKILL);
  }
}

void SwapFile::read(int64_t offset, void *dst, int64_t bytes, char *bounce,
                    int64_t bounceBytes) {
  bounceBytes = std::min(bounceBytes, kMaxTransfer);
  for (int64_t at = 0; at < bytes; at += bounceBytes) {
    int64_t len = std::min(bounceBytes, bytes - at);
    SwapIo io;
    io.buffer = bounce;
    io.bytes = ceilDiv(len, kSwapAlignment) * kSwapAlignment;
    io.offset = offset + at;
    submit(io);
    wait(io);
    // Reading into the bounce buffer itself needs no copy.
    if (static_cast<char *>(dst) + at != bounce)
      std::memcpy(static_cast<char *>(dst) + at, bounce, size_t(len));
  }
}

void SwapFile::write(int64_t offset, const void *src, int64_t bytes,
                     char *bounce, int64_t bounceBytes) {
  bounceBytes = std::min(bounceBytes, kMaxTransfer);
  for (int64_t at = 0; at < bytes; at += bounceBytes) {
    int64_t len = std::min(bounceBytes, bytes - at);
    SwapIo io;
    io.write = true;
    io.buffer = bounce;
    io.bytes = ceilDiv(len, kSwapAlignment) * kSwapAlignment;
    io.offset = offset + at;
    if (src)
      std::memcpy(bounce, static_cast<const char *>(src) + at, size_t(len));
    else
      std::memset(bounce, 0, size_t(len));
    std::memset(bounce + len, 0, size_t(io.bytes - len));
    submit(io);
    wait(io);
  }
}

void SwapFile::zero(int64_t offset, int64_t bytes, char *bounce,
                    int64_t bounceBytes) {
  write(offset, nullptr, bytes, bounce, bounceBytes);
}
