//===- NvmeBench.cpp - The swap file's sequential bandwidth --------------===//
//
// Part of the zero-mlir project.
//
// The bandwidth of the runtime's swap-file I/O (runtime/src/Optimizer/Nvme.h:
// the file of an optimizer offloaded to NVMe, O_DIRECT where the file system
// allows it, io_uring or the thread pool) as the host Adam drives it: the
// file is written, then read, sequentially in transfers of --chunk bytes
// with --buffers transfers in flight. bench/nvme.py compares it with dd
// (oflag=direct / iflag=direct) on the same directory. Each round writes
// and reads the whole file once; the JSON has every round's seconds.
//
//   zrt-bench-nvme --dir DIR [--bytes N] [--chunk BYTES] [--buffers B]
//                  [--rounds R] [--json FILE]
//
//===----------------------------------------------------------------------===//

#include "Optimizer/Nvme.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

using namespace zrt;

namespace {

double seconds() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Moves the whole file in `chunk`-byte transfers, `buffers` in flight.
double pass(SwapFile &file, bool write, char *buffer, int64_t chunk,
            int buffers) {
  int64_t n = file.size() / chunk;
  std::vector<SwapIo> ios(static_cast<size_t>(buffers));
  double start = seconds();
  for (int64_t i = 0; i < n; ++i) {
    SwapIo &io = ios[static_cast<size_t>(i % buffers)];
    if (i >= buffers)
      file.wait(io);
    io = SwapIo{};
    io.write = write;
    io.buffer = buffer + (i % buffers) * chunk;
    io.bytes = chunk;
    io.offset = i * chunk;
    file.submit(io);
  }
  for (int64_t i = std::max<int64_t>(0, n - buffers); i < n; ++i)
    file.wait(ios[static_cast<size_t>(i % buffers)]);
  return seconds() - start;
}

} // namespace

int main(int argc, char **argv) {
  std::string dir, json;
  int64_t bytes = int64_t(1) << 30, chunk = int64_t(4) << 20;
  int buffers = 4, rounds = 5;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "zrt-bench-nvme: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--dir")
      dir = next();
    else if (a == "--bytes")
      bytes = std::stoll(next());
    else if (a == "--chunk")
      chunk = std::stoll(next());
    else if (a == "--buffers")
      buffers = std::stoi(next());
    else if (a == "--rounds")
      rounds = std::stoi(next());
    else if (a == "--json")
      json = next();
    else {
      std::fprintf(stderr, "zrt-bench-nvme: unknown argument '%s'\n",
                   a.c_str());
      return 2;
    }
  }
  if (dir.empty() || chunk <= 0 || chunk % kSwapAlignment || buffers < 1 ||
      bytes < chunk || rounds < 1) {
    std::fprintf(stderr, "usage: zrt-bench-nvme --dir DIR [--bytes N] "
                         "[--chunk BYTES (multiple of 4096)] [--buffers B] "
                         "[--rounds R] [--json FILE]\n");
    return 2;
  }
  bytes = bytes / chunk * chunk;
  try {
    auto file = SwapFile::open(dir, 0, bytes);
    char *buffer = static_cast<char *>(
        std::aligned_alloc(kSwapAlignment, size_t(chunk) * size_t(buffers)));
    if (!buffer) {
      std::fprintf(stderr, "zrt-bench-nvme: out of memory\n");
      return 1;
    }
    for (int64_t i = 0; i < chunk * buffers; ++i)
      buffer[i] = char(i * 131);
    std::vector<double> writes, reads;
    for (int r = 0; r < rounds; ++r) {
      writes.push_back(pass(*file, true, buffer, chunk, buffers));
      reads.push_back(pass(*file, false, buffer, chunk, buffers));
      std::printf("round %d: write %.3f GB/s, read %.3f GB/s\n", r,
                  double(bytes) / writes.back() / 1e9,
                  double(bytes) / reads.back() / 1e9);
    }
    std::string engine = file->engineName();
    bool direct = file->direct();
    std::string path = file->path();
    file.reset();
    std::remove(path.c_str());
    std::free(buffer);
    if (!json.empty()) {
      FILE *f = std::fopen(json.c_str(), "w");
      if (!f) {
        std::fprintf(stderr, "zrt-bench-nvme: cannot write '%s'\n",
                     json.c_str());
        return 1;
      }
      auto list = [&](const std::vector<double> &v) {
        std::string s = "[";
        for (size_t i = 0; i < v.size(); ++i)
          s += (i ? ", " : "") + std::to_string(v[i]);
        return s + "]";
      };
      std::fprintf(f,
                   "{\"bytes\": %lld, \"chunk\": %lld, \"buffers\": %d, "
                   "\"engine\": \"%s\", \"direct\": %s, \"write_s\": %s, "
                   "\"read_s\": %s}\n",
                   (long long)bytes, (long long)chunk, buffers, engine.c_str(),
                   direct ? "true" : "false", list(writes).c_str(),
                   list(reads).c_str());
      std::fclose(f);
    }
  } catch (const std::exception &e) {
    std::fprintf(stderr, "zrt-bench-nvme: %s\n", e.what());
    return 1;
  }
  return 0;
}
