//===- NvmeTest.cpp - The swap file of an optimizer on NVMe ---------------===//
//
// Part of the zero-mlir project.
//
// SwapFile (runtime/src/Nvme.h) on a temporary directory: asynchronous
// writes and reads round-trip with both engines (io_uring and the thread
// pool), several in flight; the synchronous transfers pad partial blocks
// with zeros; the file has exactly the requested size; and a missing
// directory, a regular file and a file another SwapFile holds are refused
// with the path in the message. The parameters' swap file lives beside the
// optimizer's under its own name.
//
//===----------------------------------------------------------------------===//

#include "Nvme.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
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

} // namespace
