//===- Quantize.cpp - Block quantization against a memory copy ------------===//
//
// Part of the zero-mlir project.
//
// Throughput of ZeRO++'s quantization kernels (zrt_quantize, zrt_dequantize)
// against std::memcpy of the same bytes: for each element type and width,
// the buffer of n values (`--mib` MiB of them) is quantized, dequantized,
// and copied; a kernel's ratio is the memcpy's time over the kernel's, so
// 1.0 means the kernel streams its values as fast as a copy moves them.
// Each round times every case once, alternating the order, and the reported
// numbers are medians over rounds, so that drift on a shared machine
// cancels. GB/s count the values' bytes (n * element size) once. The
// kernels run on --threads OpenMP threads (1 by default: memcpy copies on
// one, so the ratio compares one core's work with one core's).
//
//   zrt-bench-quantize [--mib M] [--rounds R] [--threads T] [--json FILE]
//
//===----------------------------------------------------------------------===//

#include "zero_rt/quantize.h"
#include "BenchSupport.h"
#include "zero_rt/zrt.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

using namespace zrt::bench;

namespace {

struct Case {
  std::string dtype;
  int bits;
  int64_t bytes; // the values' bytes
  std::function<void()> memcpyRun, quantize, dequantize;
  std::vector<double> memcpySeconds, quantizeSeconds, dequantizeSeconds;
};

const char *dtypeName(int32_t dtype) {
  return dtype == ZRT_F32 ? "f32" : dtype == ZRT_BF16 ? "bf16" : "f16";
}

} // namespace

int main(int argc, char **argv) {
  int64_t mib = 64;
  int rounds = 11, threads = 1;
  std::string jsonPath;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 < argc && a == "--mib")
      mib = std::atoll(argv[++i]);
    else if (i + 1 < argc && a == "--rounds")
      rounds = std::atoi(argv[++i]);
    else if (i + 1 < argc && a == "--threads")
      threads = std::atoi(argv[++i]);
    else if (i + 1 < argc && a == "--json")
      jsonPath = argv[++i];
    else {
      std::fprintf(stderr,
                   "usage: %s [--mib M] [--rounds R] [--threads T] "
                   "[--json FILE]\n",
                   argv[0]);
      return 2;
    }
  }
  if (mib < 1 || rounds < 1 || threads < 1) {
    std::fprintf(stderr, "need --mib >= 1, --rounds >= 1 and --threads >= 1\n");
    return 2;
  }
  zrt_set_num_threads(threads);

  const int64_t maxBytes = mib << 20;
  const size_t total = size_t(maxBytes);
  std::vector<char> values(total), copy(total), out(total);
  // The most values are 16-bit ones.
  std::vector<uint8_t> q(size_t(zrt_quant_bytes(maxBytes / 2, 8)));
  std::vector<Case> cases;
  for (int32_t dtype : {ZRT_BF16, ZRT_F16, ZRT_F32}) {
    int64_t size = zrt_dtype_size(dtype), n = maxBytes / size;
    // Weights of a trained model: normal, std 0.02.
    uint32_t state = 35;
    for (int64_t i = 0; i < n; ++i) {
      double u1 = ((state = state * 1664525u + 1013904223u) >> 8) / 16777216.0;
      double u2 = ((state = state * 1664525u + 1013904223u) >> 8) / 16777216.0;
      float x = float(0.02 * std::sqrt(-2.0 * std::log(u1 + 1e-12)) *
                      std::cos(6.283185307179586 * u2));
      if (dtype == ZRT_F32)
        std::memcpy(values.data() + 4 * i, &x, 4);
      else {
        uint16_t h = dtype == ZRT_BF16 ? zrt_f32_to_bf16(x) : zrt_f32_to_f16(x);
        std::memcpy(values.data() + 2 * i, &h, 2);
      }
    }
    for (int bits : {8, 4}) {
      // Each case quantizes from its own copy of the values.
      auto src = std::make_shared<std::vector<char>>(values);
      Case c;
      c.dtype = dtypeName(dtype);
      c.bits = bits;
      c.bytes = n * size;
      char *o = out.data(), *cp = copy.data();
      uint8_t *qp = q.data();
      // The lambdas hold the values alive.
      c.memcpyRun = [=] { std::memcpy(cp, src->data(), size_t(n * size)); };
      c.quantize = [=] { zrt_quantize(dtype, src->data(), n, 1, bits, qp); };
      c.dequantize = [=] { zrt_dequantize(dtype, qp, n, 1, bits, o); };
      c.quantize();
      c.dequantize();
      cases.push_back(std::move(c));
    }
  }

  auto timed = [](const std::function<void()> &run) {
    double t0 = now();
    run();
    return now() - t0;
  };
  for (int r = 0; r < rounds; ++r) {
    std::vector<Case *> order;
    for (Case &c : cases)
      order.push_back(&c);
    if (r % 2)
      std::reverse(order.begin(), order.end());
    for (Case *c : order) {
      // The memcpy next to each kernel, before and after it alternately.
      c->memcpySeconds.push_back(timed(c->memcpyRun));
      c->quantizeSeconds.push_back(timed(c->quantize));
      c->dequantizeSeconds.push_back(timed(c->dequantize));
    }
  }

  std::printf("%d threads, %lld MiB of values, %d rounds (medians)\n",
              int(zrt_num_threads()), (long long)mib, rounds);
  std::printf("%-5s %5s %12s %14s %16s %14s %16s\n", "dtype", "bits",
              "memcpy GB/s", "quantize GB/s", "quant / memcpy", "dequant GB/s",
              "dequant / memcpy");
  std::string json =
      "{\n  \"threads\": " + std::to_string(zrt_num_threads()) +
      ",\n  \"mib\": " + std::to_string(mib) +
      ",\n  \"rounds\": " + std::to_string(rounds) +
      ",\n  \"block\": " + std::to_string(ZRT_QUANT_BLOCK_INT8) +
      ",\n  \"block_int4\": " + std::to_string(ZRT_QUANT_BLOCK_INT4) +
      ",\n  \"cases\": [";
  bool first = true;
  for (const Case &c : cases) {
    std::vector<double> mGbps, qGbps, dGbps, qRatio, dRatio;
    for (int r = 0; r < rounds; ++r) {
      mGbps.push_back(double(c.bytes) / c.memcpySeconds[r] / 1e9);
      qGbps.push_back(double(c.bytes) / c.quantizeSeconds[r] / 1e9);
      dGbps.push_back(double(c.bytes) / c.dequantizeSeconds[r] / 1e9);
      qRatio.push_back(c.memcpySeconds[r] / c.quantizeSeconds[r]);
      dRatio.push_back(c.memcpySeconds[r] / c.dequantizeSeconds[r]);
    }
    std::printf("%-5s %5d %12.2f %14.2f %16.3f %14.2f %16.3f\n",
                c.dtype.c_str(), c.bits, median(mGbps), median(qGbps),
                median(qRatio), median(dGbps), median(dRatio));
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "%s\n    {\"dtype\": \"%s\", \"bits\": %d, "
                  "\"memcpy_gbps\": %.3f, \"quantize_gbps\": %.3f, "
                  "\"quantize_ratio\": %.4f, \"dequantize_gbps\": %.3f, "
                  "\"dequantize_ratio\": %.4f}",
                  first ? "" : ",", c.dtype.c_str(), c.bits, median(mGbps),
                  median(qGbps), median(qRatio), median(dGbps), median(dRatio));
    json += buf;
    first = false;
  }
  json += "\n  ]\n}\n";
  if (!jsonPath.empty() && !writeText(jsonPath, json))
    return 1;
  return 0;
}
