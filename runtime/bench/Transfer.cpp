//===- Transfer.cpp - The offload copy path against plain memcpy ----------===//
//
// Part of the zero-mlir project.
//
// Bandwidth of the runtime's device <-> host transfer, the path an offloaded
// optimizer's gradient and parameter copies take (device::transfer between a
// device::allocate arena and a device::allocateHost arena, completed by the
// function it returns), divided by that of a plain std::memcpy of the same
// bytes between the same two buffers, for sizes from 1 MiB to 1 GiB. Each
// round times every size and direction once, with the memcpy next to it (in
// alternating order); the ratio of a round is the transfer's bytes/s over
// the memcpy's of that round, and the reported ratio the median over
// rounds, so that drift on a shared machine cancels. Bytes are the bytes
// copied (counted once). On the CPU backend the "device" arena is host
// memory too and a transfer is a memcpy: the ratio is the runtime's overhead
// on that copy.
//
//   zrt-bench-transfer [--min-mib M] [--max-mib M] [--rounds R]
//                      [--json FILE]
//
//===----------------------------------------------------------------------===//

#include "BenchSupport.h"
#include "Device/Device.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

using namespace zrt;
using namespace zrt::bench;

namespace {

struct Options {
  int64_t minMiB = 1, maxMiB = 1024;
  int rounds = 11;
  std::string json;
};

/// One timed case: `calls` copies of `bytes` per sample.
struct Case {
  std::string name;
  int64_t bytes;
  int calls;
  std::function<void()> run;
  std::vector<double> seconds;
};

} // namespace

int main(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char * {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--min-mib")
      o.minMiB = std::atoll(value());
    else if (a == "--max-mib")
      o.maxMiB = std::atoll(value());
    else if (a == "--rounds")
      o.rounds = std::atoi(value());
    else if (a == "--json")
      o.json = value();
    else {
      std::fprintf(stderr,
                   "usage: %s [--min-mib M] [--max-mib M] [--rounds R] "
                   "[--json FILE]\n",
                   argv[0]);
      return 2;
    }
  }
  if (o.minMiB < 1 || o.maxMiB < o.minMiB || o.rounds < 1) {
    std::fprintf(stderr,
                 "need 1 <= --min-mib <= --max-mib and --rounds >= 1\n");
    return 2;
  }

  device::initialize(0);
  const int64_t maxBytes = o.maxMiB << 20;
  char *dev = static_cast<char *>(device::allocate(maxBytes));
  char *host = static_cast<char *>(device::allocateHost(maxBytes));
  if (!dev || !host) {
    std::fprintf(stderr, "out of memory (2 x %lld bytes)\n",
                 (long long)maxBytes);
    return 1;
  }
  // Touch every page first: the timed copies do not fault.
  std::memset(dev, 1, size_t(maxBytes));
  std::memset(host, 2, size_t(maxBytes));

  std::vector<Case> cases;
  for (int64_t mib = o.minMiB; mib <= o.maxMiB; mib *= 2) {
    int64_t bytes = mib << 20;
    // At least 256 MiB per sample, so that small copies are not timer noise.
    int calls = int(std::max<int64_t>(1, (int64_t(256) << 20) / bytes));
    auto transfer = [=](void *dst, const void *src, bool toHost) {
      return [=] {
        if (std::function<void()> done =
                device::transfer(dst, src, bytes, toHost))
          done();
      };
    };
    std::string size = std::to_string(mib);
    cases.push_back({"memcpy_to_host/" + size,
                     bytes,
                     calls,
                     [=] { std::memcpy(host, dev, size_t(bytes)); },
                     {}});
    cases.push_back({"transfer_to_host/" + size,
                     bytes,
                     calls,
                     transfer(host, dev, true),
                     {}});
    cases.push_back({"memcpy_to_device/" + size,
                     bytes,
                     calls,
                     [=] { std::memcpy(dev, host, size_t(bytes)); },
                     {}});
    cases.push_back({"transfer_to_device/" + size,
                     bytes,
                     calls,
                     transfer(dev, host, false),
                     {}});
  }

  // Warm up once, then the rounds, alternating the order.
  for (Case &c : cases)
    c.run();
  for (int r = 0; r < o.rounds; ++r) {
    std::vector<Case *> order;
    for (Case &c : cases)
      order.push_back(&c);
    if (r % 2)
      std::reverse(order.begin(), order.end());
    for (Case *c : order) {
      double t0 = now();
      for (int k = 0; k < c->calls; ++k)
        c->run();
      c->seconds.push_back((now() - t0) / c->calls);
    }
  }

  std::string json =
      "{\n  \"backend\": \"" + std::string(device::backendName()) +
      "\",\n  \"rounds\": " + std::to_string(o.rounds) + ",\n  \"sizes\": [";
  std::printf("%s backend, %d rounds (median [quartiles])\n",
              device::backendName(), o.rounds);
  std::printf("%9s %-10s %14s %14s %22s\n", "MiB", "direction", "memcpy GB/s",
              "transfer GB/s", "transfer / memcpy");
  bool first = true;
  // Cases come in fours per size: memcpy and transfer to host, then to
  // device.
  for (size_t i = 0; i < cases.size(); i += 4) {
    for (int d = 0; d < 2; ++d) {
      const Case &ref = cases[i + 2 * d], &run = cases[i + 2 * d + 1];
      std::vector<double> refGbps, runGbps, ratio;
      for (int r = 0; r < o.rounds; ++r) {
        refGbps.push_back(double(ref.bytes) / ref.seconds[r] / 1e9);
        runGbps.push_back(double(run.bytes) / run.seconds[r] / 1e9);
        ratio.push_back(ref.seconds[r] / run.seconds[r]);
      }
      const char *direction = d == 0 ? "to_host" : "to_device";
      int64_t mib = run.bytes >> 20;
      std::printf("%9lld %-10s %14.2f %14.2f %8.3f [%.3f, %.3f]\n",
                  (long long)mib, direction, median(refGbps), median(runGbps),
                  median(ratio), quantile(ratio, 0.25), quantile(ratio, 0.75));
      char buf[512];
      std::snprintf(buf, sizeof buf,
                    "%s\n    {\"mib\": %lld, \"direction\": \"%s\", "
                    "\"calls_per_sample\": %d, \"memcpy_gbps_median\": %.3f, "
                    "\"transfer_gbps_median\": %.3f, \"ratio_median\": %.4f, "
                    "\"ratio_q1\": %.4f, \"ratio_q3\": %.4f}",
                    first ? "" : ",", (long long)mib, direction, run.calls,
                    median(refGbps), median(runGbps), median(ratio),
                    quantile(ratio, 0.25), quantile(ratio, 0.75));
      json += buf;
      first = false;
    }
  }
  json += "\n  ]\n}\n";
  device::release(dev);
  device::releaseHost(host);
  if (!o.json.empty() && !writeText(o.json, json))
    return 1;
  return 0;
}
