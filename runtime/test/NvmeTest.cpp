//===- NvmeTest.cpp - The swap file of an optimizer on NVMe ---------------===//
//
// Part of the zero-mlir project.
//
// SwapFile (runtime/src/Optimizer/Nvme.h) on a temporary directory:
// asynchronous writes and reads round-trip with both engines (io_uring and the
// thread pool), several in flight; the synchronous transfers pad partial blocks
// with zeros; the file has exactly the requested size; and a missing
// directory, a regular file and a file another SwapFile holds are refused
// with the path in the message. I/O faults, with each engine: an error at
// write or read time (injected ENOSPC, EIO; a real EFBIG from the file size
// limit) and a file that ends early (really truncated; injected) abort
// naming the file, the offset, the length, the engine and the error;
// partial transfers, EINTR and EAGAIN are retried and the data read back
// bitwise; O_DIRECT refused at open falls back to buffered I/O, bitwise.
// The parameters' swap file lives beside the optimizer's under its own
// name.
//
//===----------------------------------------------------------------------===//

#include "Optimizer/Nvme.h"

#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <stdexcept>
#include <string>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

using namespace zrt;

namespace {

std::string tempDir() {
  char name[] = "/tmp/zrt-nvme-test-XXXXXX";
  const char *dir = ::mkdtemp(name);
  EXPECT_NE(dir, nullptr);
  return dir ? dir : "";
}

struct Aligned {
  explicit Aligned(size_t bytes)
      : p(static_cast<char *>(std::aligned_alloc(kSwapAlignment, bytes))) {}
  ~Aligned() { std::free(p); }
  char *p;
};

std::string errorOf(const std::string &dir, int rank, int64_t bytes) {
  try {
    SwapFile::open(dir, rank, bytes);
  } catch (const std::runtime_error &e) {
    return e.what();
  }
  return "";
}

void roundTrip(const char *engine) {
  if (engine)
    ::setenv("ZRT_NVME_ENGINE", engine, 1);
  else
    ::unsetenv("ZRT_NVME_ENGINE");
  std::string dir = tempDir();
  constexpr int64_t kBlocks = 16, kBytes = kBlocks * kSwapAlignment;
  {
    auto file = SwapFile::open(dir, 3, kBytes);
    EXPECT_EQ(file->path(), dir + "/zero-optimizer.rank3.swp");
    if (engine)
      EXPECT_STREQ(file->engineName(), "thread pool");
    struct stat st;
    ASSERT_EQ(::stat(file->path().c_str(), &st), 0);
    EXPECT_EQ(st.st_size, kBytes);

    // Four transfers of two blocks in flight at a time.
    Aligned out(kBytes), in(kBytes);
    for (int64_t i = 0; i < kBytes; ++i)
      out.p[i] = char(i * 7 + 3);
    std::vector<SwapIo> ios(kBlocks / 2);
    for (size_t i = 0; i < ios.size(); ++i) {
      SwapIo &io = ios[i];
      io.write = true;
      io.buffer = out.p + i * 2 * kSwapAlignment;
      io.bytes = 2 * kSwapAlignment;
      io.offset = int64_t(i) * 2 * kSwapAlignment;
      file->submit(io);
      if (i >= 4)
        file->wait(ios[i - 4]);
    }
    for (size_t i = ios.size() - 4; i < ios.size(); ++i)
      file->wait(ios[i]);
    for (size_t i = 0; i < ios.size(); ++i) {
      SwapIo &io = ios[i];
      io = SwapIo{};
      io.buffer = in.p + i * 2 * kSwapAlignment;
      io.bytes = 2 * kSwapAlignment;
      io.offset = int64_t(i) * 2 * kSwapAlignment;
      file->submit(io);
    }
    for (SwapIo &io : ios) {
      file->wait(io);
      EXPECT_TRUE(io.done);
      EXPECT_EQ(io.result, io.bytes);
    }
    EXPECT_EQ(std::memcmp(out.p, in.p, kBytes), 0);

    // A synchronous write of 5000 bytes at block 2 through a one-block
    // bounce buffer: the rest of its second block becomes zeros, the
    // blocks around it keep their bytes.
    Aligned bounce(kSwapAlignment);
    std::vector<char> data(5000, 'x');
    file->write(2 * kSwapAlignment, data.data(), 5000, bounce.p,
                kSwapAlignment);
    std::vector<char> back(4 * kSwapAlignment);
    file->read(kSwapAlignment, back.data(), int64_t(back.size()), bounce.p,
               kSwapAlignment);
    EXPECT_EQ(std::memcmp(back.data(), out.p + kSwapAlignment, kSwapAlignment),
              0);
    for (int64_t i = 0; i < 5000; ++i)
      ASSERT_EQ(back[size_t(kSwapAlignment + i)], 'x') << i;
    for (int64_t i = kSwapAlignment + 5000; i < 3 * kSwapAlignment; ++i)
      ASSERT_EQ(back[size_t(i)], 0) << i;
    EXPECT_EQ(std::memcmp(back.data() + 3 * kSwapAlignment,
                          out.p + 4 * kSwapAlignment, kSwapAlignment),
              0);
    file->zero(0, kBytes, bounce.p, kSwapAlignment);
    file->read(0, back.data(), int64_t(back.size()), bounce.p, kSwapAlignment);
    for (char c : back)
      ASSERT_EQ(c, 0);

    // The file is locked while open.
    EXPECT_NE(errorOf(dir, 3, kBytes).find("is in use by another run"),
              std::string::npos);
  }
  // Closed, it opens again (a later run reuses it).
  EXPECT_EQ(errorOf(dir, 3, kBytes), "");
  ::unlink((dir + "/zero-optimizer.rank3.swp").c_str());
  ::rmdir(dir.c_str());
  ::unsetenv("ZRT_NVME_ENGINE");
}

TEST(SwapFileTest, RoundTripIoUring) { roundTrip(nullptr); }

TEST(SwapFileTest, RoundTripThreadPool) { roundTrip("thread-pool"); }

TEST(SwapFileTest, RefusesBadPaths) {
  std::string dir = tempDir();
  std::string missing = errorOf(dir + "/missing", 0, 4096);
  EXPECT_NE(missing.find("nvme_path '" + dir + "/missing' does not exist"),
            std::string::npos)
      << missing;
  std::string file = dir + "/file";
  FILE *f = std::fopen(file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  std::string notDir = errorOf(file, 0, 4096);
  EXPECT_NE(notDir.find("nvme_path '" + file + "' is not a directory"),
            std::string::npos)
      << notDir;
  std::string under = errorOf(file + "/sub", 0, 4096);
  EXPECT_NE(under.find("Not a directory"), std::string::npos) << under;
  // More than any disk holds: refused before anything is written.
  std::string huge = errorOf(dir, 0, int64_t(1) << 62);
  EXPECT_NE(huge.find("bytes free for the swap file"), std::string::npos)
      << huge;
  struct stat st;
  EXPECT_NE(::stat((dir + "/zero-optimizer.rank0.swp").c_str(), &st), 0)
      << "a refused swap file stayed behind";
  ::unlink(file.c_str());
  ::unlink((dir + "/zero-optimizer.rank0.swp").c_str());
  ::rmdir(dir.c_str());
}

// The parameters' swap file shares a directory with the optimizer's under
// its own name, and a missing directory names the option that chose it.
TEST(SwapFileTest, ParameterFileBesideOptimizerFile) {
  std::string dir = tempDir();
  {
    auto states = SwapFile::open(dir, 1, 2 * kSwapAlignment);
    auto params = SwapFile::open(dir, 1, 3 * kSwapAlignment, "params",
                                 "--param-nvme-path");
    EXPECT_EQ(states->path(), dir + "/zero-optimizer.rank1.swp");
    EXPECT_EQ(params->path(), dir + "/zero-params.rank1.swp");
    EXPECT_EQ(params->size(), 3 * kSwapAlignment);
    // A write to one is not seen in the other.
    Aligned out(kSwapAlignment), in(kSwapAlignment);
    std::memset(out.p, 0x5a, kSwapAlignment);
    params->write(kSwapAlignment, out.p, kSwapAlignment, in.p, kSwapAlignment);
    states->read(0, out.p, kSwapAlignment, in.p, kSwapAlignment);
    EXPECT_EQ(out.p[0], 0);
    params->read(kSwapAlignment, out.p, kSwapAlignment, in.p, kSwapAlignment);
    EXPECT_EQ(out.p[kSwapAlignment - 1], 0x5a);
  }
  std::string missing;
  try {
    SwapFile::open(dir + "/missing", 0, 4096, "params", "--param-nvme-path");
  } catch (const std::runtime_error &e) {
    missing = e.what();
  }
  EXPECT_NE(missing.find("param nvme_path '" + dir +
                         "/missing' does not exist: create it, or compile "
                         "with another --param-nvme-path"),
            std::string::npos)
      << missing;
  ::unlink((dir + "/zero-optimizer.rank1.swp").c_str());
  ::unlink((dir + "/zero-params.rank1.swp").c_str());
  ::rmdir(dir.c_str());
}

/// Sets ZRT_NVME_ENGINE and ZRT_TEST_NVME_FAULT for the next open (nullptr:
/// unset).
void setHooks(const char *engine, const char *faults) {
  if (engine)
    ::setenv("ZRT_NVME_ENGINE", engine, 1);
  else
    ::unsetenv("ZRT_NVME_ENGINE");
  if (faults)
    ::setenv("ZRT_TEST_NVME_FAULT", faults, 1);
  else
    ::unsetenv("ZRT_TEST_NVME_FAULT");
}

constexpr int64_t kFaultBytes = 8 * kSwapAlignment;

/// A pattern no two nearby blocks share, `salt` apart.
void fill(char *p, int64_t bytes, int salt) {
  for (int64_t i = 0; i < bytes; ++i)
    p[i] = char(i * 13 + i / 4096 + salt);
}

/// The file's bytes as another process would see them (not through
/// SwapFile).
std::vector<char> onDisk(const std::string &path, int64_t bytes) {
  std::vector<char> out(size_t(bytes), 0);
  int fd = ::open(path.c_str(), O_RDONLY);
  EXPECT_GE(fd, 0) << path;
  EXPECT_EQ(::pread(fd, out.data(), out.size(), 0), ssize_t(bytes));
  ::close(fd);
  return out;
}

/// Writes and reads all of a file as two transfers each (4 blocks, one
/// block at a time with the synchronous calls in between) and checks the
/// bytes, both read back and on disk.
void writeReadBack(SwapFile &file) {
  Aligned out(kFaultBytes), in(kFaultBytes), bounce(kSwapAlignment);
  fill(out.p, kFaultBytes, 5);
  for (int64_t half = 0; half < 2; ++half) {
    SwapIo io;
    io.write = true;
    io.buffer = out.p + half * kFaultBytes / 2;
    io.bytes = kFaultBytes / 2;
    io.offset = half * kFaultBytes / 2;
    file.submit(io);
    file.wait(io);
    EXPECT_EQ(io.result, io.bytes);
  }
  EXPECT_EQ(onDisk(file.path(), kFaultBytes),
            std::vector<char>(out.p, out.p + kFaultBytes));
  for (int64_t half = 0; half < 2; ++half) {
    SwapIo io;
    io.buffer = in.p + half * kFaultBytes / 2;
    io.bytes = kFaultBytes / 2;
    io.offset = half * kFaultBytes / 2;
    file.submit(io);
    file.wait(io);
    EXPECT_EQ(io.result, io.bytes);
  }
  EXPECT_EQ(std::memcmp(out.p, in.p, kFaultBytes), 0);
  // The synchronous transfers, one block a call.
  std::vector<char> back(static_cast<size_t>(kFaultBytes));
  file.read(0, back.data(), kFaultBytes, bounce.p, kSwapAlignment);
  EXPECT_EQ(std::memcmp(out.p, back.data(), kFaultBytes), 0);
}

/// Removes a directory tempDir made and the swap file of rank 0 in it.
void removeDir(const std::string &dir) {
  ::unlink((dir + "/zero-optimizer.rank0.swp").c_str());
  ::rmdir(dir.c_str());
}

/// Opens a swap file under `dir` with the hooks set and runs
/// writeReadBack, which must abort (the body of a death test) or pass.
void runFaulty(const char *engine, const char *faults, const std::string &dir) {
  setHooks(engine, faults);
  {
    auto file = SwapFile::open(dir, 0, kFaultBytes);
    writeReadBack(*file);
  }
  setHooks(nullptr, nullptr);
}

/// runFaulty where it passes; returns what it printed (the hook lines).
std::string faulty(const char *engine, const char *faults) {
  std::string dir = tempDir();
  ::testing::internal::CaptureStderr();
  runFaulty(engine, faults, dir);
  removeDir(dir);
  return ::testing::internal::GetCapturedStderr();
}

/// io_uring, or the thread pool.
class SwapFaultTest : public ::testing::TestWithParam<const char *> {
protected:
  const char *engine() const { return GetParam(); }
  /// The engine's name in messages, as a regular expression.
  std::string name() const { return GetParam() ? "thread pool" : "io_uring"; }
};

TEST_P(SwapFaultTest, ErrorsAbortNamingFileOffsetEngineAndErrno) {
  std::string dir = tempDir();
  // The second write (blocks 4-7) fails: ENOSPC on a thin or copy-on-write
  // file system whose reserved blocks were not enough.
  EXPECT_DEATH(runFaulty(engine(), "write:2:ENOSPC", dir),
               "zrt: test hook: ZRT_TEST_NVME_FAULT: write 2 of "
               "'.*/zero-optimizer.rank0.swp' gets ENOSPC\n"
               "zrt: error: nvme: write of 16384 bytes at offset 16384 of "
               "the swap file '.*/zero-optimizer.rank0.swp' failed \\(" +
                   name() +
                   "\\): No space left on device \\(the disk is full\\)");
  EXPECT_DEATH(runFaulty(engine(), "read:1:EIO", dir),
               "zrt: error: nvme: read of 16384 bytes at offset 0 of the "
               "swap file '.*/zero-optimizer.rank0.swp' failed \\(" +
                   name() + "\\): Input/output error");
  // Step 3's first write, not the file's first.
  EXPECT_DEATH(
      {
        setHooks(engine(), "write:1:EDQUOT@3");
        auto file = SwapFile::open(dir, 0, kFaultBytes);
        Aligned bounce(kSwapAlignment);
        file->setStep(2);
        file->zero(0, kFaultBytes, bounce.p, kSwapAlignment);
        std::fprintf(stderr, "step 2 written\n");
        file->setStep(3);
        file->zero(0, kFaultBytes, bounce.p, kSwapAlignment);
      },
      "step 2 written\n.*write 1 of step 3 of '.*' gets EDQUOT\n"
      "zrt: error: nvme: write of 4096 bytes at offset 0 of the swap file "
      "'.*' failed \\(" +
          name() + "\\): Disk quota exceeded");
  removeDir(dir);
}

TEST_P(SwapFaultTest, RealWriteErrorAborts) {
  std::string dir = tempDir();
  // A real error from the kernel at write time: past the file size limit
  // (RLIMIT_FSIZE, SIGXFSZ ignored) a write fails with EFBIG. The file is
  // truncated behind SwapFile's back so that its writes extend it.
  EXPECT_DEATH(
      {
        setHooks(engine(), nullptr);
        auto file = SwapFile::open(dir, 0, kFaultBytes);
        ASSERT_EQ(::truncate(file->path().c_str(), 0), 0);
        std::signal(SIGXFSZ, SIG_IGN);
        struct rlimit limit;
        limit.rlim_cur = limit.rlim_max = 4096;
        ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limit), 0);
        Aligned bounce(2 * kSwapAlignment);
        file->zero(kSwapAlignment, kSwapAlignment, bounce.p, kSwapAlignment);
      },
      "zrt: error: nvme: write of 4096 bytes at offset 4096 of the swap "
      "file '.*/zero-optimizer.rank0.swp' failed \\(" +
          name() + "\\): File too large");
  removeDir(dir);
}

TEST_P(SwapFaultTest, FileThatEndsIsAShortRead) {
  std::string dir = tempDir();
  // Really truncated by another program: the read moves nothing.
  EXPECT_DEATH(
      {
        setHooks(engine(), nullptr);
        auto file = SwapFile::open(dir, 0, kFaultBytes);
        ASSERT_EQ(::truncate(file->path().c_str(), 3 * kSwapAlignment), 0);
        Aligned buffer(kFaultBytes);
        SwapIo io;
        io.buffer = buffer.p;
        io.bytes = 4 * kSwapAlignment;
        io.offset = 2 * kSwapAlignment;
        file->submit(io);
        file->wait(io);
      },
      "zrt: error: nvme: short read of the swap file "
      "'.*/zero-optimizer.rank0.swp' \\(" +
          name() +
          "\\): 4096 of 16384 bytes at offset 8192, then the end of the "
          "file \\(was it truncated\\?\\)");
  // Injected: half of the first read, then nothing.
  EXPECT_DEATH(runFaulty(engine(), "read:1:short,read:2:eof", dir),
               "short read of the swap file '.*' \\(" + name() +
                   "\\): 8192 of 16384 bytes at offset 0");
  EXPECT_DEATH(runFaulty(engine(), "write:1:eof", dir),
               "short write of the swap file '.*' \\(" + name() +
                   "\\): 0 of 16384 bytes at offset 0, then a write that "
                   "moved nothing");
  removeDir(dir);
}

TEST_P(SwapFaultTest, PartialTransfersAndInterruptsAreRetried) {
  // Each fault fires (its hook line) and the bytes still arrive whole.
  std::string err =
      faulty(engine(), "write:1:short,write:3:short,read:2:short,"
                       "read:3:short,write:4:EINTR,read:5:EAGAIN");
  EXPECT_NE(err.find("write 1 of '"), std::string::npos) << err;
  EXPECT_NE(err.find("write 3 of '"), std::string::npos) << err;
  EXPECT_NE(err.find("read 2 of '"), std::string::npos) << err;
  EXPECT_NE(err.find("read 3 of '"), std::string::npos) << err;
  EXPECT_NE(err.find("write 4 of '"), std::string::npos) << err;
  EXPECT_NE(err.find("gets EAGAIN"), std::string::npos) << err;
  EXPECT_EQ(err.find("error"), std::string::npos) << err;
}

TEST_P(SwapFaultTest, ODirectRefusedIsBuffered) {
  setHooks(engine(), "nodirect");
  std::string dir = tempDir();
  ::testing::internal::CaptureStderr();
  {
    auto file = SwapFile::open(dir, 0, kFaultBytes);
    EXPECT_FALSE(file->direct());
    EXPECT_NE(file->notice().find("refuses O_DIRECT: buffered I/O"),
              std::string::npos)
        << file->notice();
    writeReadBack(*file);
  }
  EXPECT_NE(::testing::internal::GetCapturedStderr().find(
                "open(O_DIRECT) of '" + dir +
                "/zero-optimizer.rank0.swp' gets EINVAL"),
            std::string::npos);
  setHooks(engine(), nullptr);
  {
    auto file = SwapFile::open(dir, 0, kFaultBytes);
    writeReadBack(*file);
  }
  ::unlink((dir + "/zero-optimizer.rank0.swp").c_str());
  ::rmdir(dir.c_str());
  setHooks(nullptr, nullptr);
}

TEST(SwapFileTest, IoUringWithoutReadWriteFallsBackToThreadPool) {
  // A kernel before 5.6 sets a ring up but completes every read and write
  // with EINVAL: the probe sees that and the thread pool moves the bytes.
  setHooks(nullptr, "nouringrw");
  std::string dir = tempDir();
  {
    auto file = SwapFile::open(dir, 0, kFaultBytes);
    EXPECT_STREQ(file->engineName(), "thread pool");
    EXPECT_NE(file->notice().find("io_uring has no IORING_OP_READ/"
                                  "IORING_OP_WRITE"),
              std::string::npos)
        << file->notice();
    writeReadBack(*file);
  }
  setHooks(nullptr, nullptr);
  {
    auto file = SwapFile::open(dir, 0, kFaultBytes);
    EXPECT_STREQ(file->engineName(), "io_uring");
  }
  ::unlink((dir + "/zero-optimizer.rank0.swp").c_str());
  ::rmdir(dir.c_str());
}

INSTANTIATE_TEST_SUITE_P(Engines, SwapFaultTest,
                         ::testing::Values(nullptr, "thread-pool"),
                         [](const auto &info) {
                           return std::string(info.param ? "ThreadPool"
                                                         : "IoUring");
                         });

TEST(SwapFileTest, RefusesBadFaultHooks) {
  std::string dir = tempDir();
  auto refused = [&](const char *spec) {
    setHooks(nullptr, spec);
    std::string e = errorOf(dir, 0, 4096);
    setHooks(nullptr, nullptr);
    return e;
  };
  EXPECT_NE(refused("write:0:ENOSPC")
                .find("ZRT_TEST_NVME_FAULT: 'write:0:ENOSPC': N is '0', not a "
                      "positive integer"),
            std::string::npos);
  EXPECT_NE(refused("read:1:EPERM").find("'read:1:EPERM': FAULT is 'EPERM'"),
            std::string::npos);
  EXPECT_NE(refused("nodirect,fsync:1:EIO").find("OP is 'fsync'"),
            std::string::npos);
  EXPECT_NE(refused("write:1:EIO@x").find("S is 'x'"), std::string::npos);
  EXPECT_NE(refused("nodirect,").find("'': not OP:N:FAULT"), std::string::npos);
  EXPECT_EQ(refused("nodirect,write:2:short@4"), "");
  ::unlink((dir + "/zero-optimizer.rank0.swp").c_str());
  ::rmdir(dir.c_str());
}

} // namespace
