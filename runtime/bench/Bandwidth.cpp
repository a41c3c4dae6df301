//===- Bandwidth.cpp - Streaming kernels against a STREAM triad -----------===//
//
// Part of the zero-mlir project.
//
// Achieved bandwidth of the bandwidth-bound optimizer kernels
// (zrt_optimizer_step's AdamW, zrt_check_overflow), elementwise kernels
// (zrt_swiglu, zrt_swiglu_grad, zrt_rope) and row normalizations (zrt_rms_norm
// and its gradient) divided by that of a STREAM triad measured in the same
// process, on the same threads, interleaved with it: each round times every
// kernel once (in alternating order), the ratio of a round is the kernel's
// bytes/s over the triad's bytes/s of that round, and the reported ratio is
// the median over rounds. This keeps the ratios meaningful on a shared
// machine where absolute numbers drift.
//
// Bytes follow the STREAM convention: what the kernel reads plus what it
// writes, no write-allocate traffic (triad 12 B/element, Adam 28 B/param with
// 16-bit gradients and parameter copies, the overflow check 2 B/param, the
// RMS norm x and y, its gradient x, dy and dx: 2 and 3 elements per element,
// the per-column weight and dw not counted).
//
//   zrt-bench-bandwidth [--params N] [--rounds R] [--only KERNEL]
//                       [--json FILE]
//
//===----------------------------------------------------------------------===//

#include "BenchSupport.h"
#include "zero_rt/zrt.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

using namespace zrt::bench;

namespace {

/// Uninitialized 64-byte aligned storage, first touched by the threads that
/// will stream it (static schedule), as STREAM does.
template <typename T>
struct Array {
  T *data;
  int64_t n;
  explicit Array(int64_t n) : n(n) {
    size_t bytes = (size_t(n) * sizeof(T) + 63) / 64 * 64;
    data = static_cast<T *>(std::aligned_alloc(64, bytes));
    if (!data) {
      std::fprintf(stderr, "out of memory (%zu bytes)\n", bytes);
      std::exit(1);
    }
  }
  ~Array() { std::free(data); }
  Array(const Array &) = delete;
  Array &operator=(const Array &) = delete;
};

template <typename T>
void fillF32(Array<T> &a, float value) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < a.n; ++i)
    a.data[i] = value;
}

/// A buffer of dtype `dtype` filled with small pseudo-random values (so the
/// sum of squares is not trivially constant), converted by zrt_cast in
/// parallel chunks.
std::unique_ptr<Array<uint8_t>> randomTyped(int32_t dtype, int64_t n) {
  auto out = std::make_unique<Array<uint8_t>>(n * zrt_dtype_size(dtype));
  const int64_t chunk = 1 << 16;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < (n + chunk - 1) / chunk; ++c) {
    float tmp[1 << 16];
    int64_t lo = c * chunk, len = std::min(chunk, n - lo);
    uint32_t s = uint32_t(c) * 2654435761u + 1;
    for (int64_t i = 0; i < len; ++i) {
      s = s * 1664525u + 1013904223u;
      tmp[i] = float(int32_t(s >> 8) - (1 << 23)) / float(1 << 23);
    }
    zrt_cast(ZRT_F32, tmp, dtype, out->data + lo * zrt_dtype_size(dtype), len);
  }
  return out;
}

struct Kernel {
  std::string name;
  double bytes; // per call
  std::function<void()> run;
  int calls = 1; // per timed sample
  std::vector<double> seconds;
};

struct Options {
  int64_t params = int64_t(64) << 20;
  int rounds = 15;
  std::string only;
  std::string json;
};

} // namespace

int main(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--params")
      o.params = std::atoll(value().c_str());
    else if (a == "--rounds")
      o.rounds = std::atoi(value().c_str());
    else if (a == "--only")
      o.only = value();
    else if (a == "--json")
      o.json = value();
    else {
      std::fprintf(stderr,
                   "usage: %s [--params N] [--rounds R] [--only KERNEL] "
                   "[--json FILE]\n",
                   argv[0]);
      return 2;
    }
  }
  const int64_t n = o.params;
  const int threads = omp_get_max_threads();
  zrt_set_num_threads(threads);

  // STREAM triad a = b + s * c over three fp32 arrays of n elements.
  Array<float> ta(n), tb(n), tc(n);
  fillF32(ta, 0.0f);
  fillF32(tb, 1.0f);
  fillF32(tc, 2.0f);
  // Adam (bf16 and f32) over n parameters.
  Array<float> master(n), m(n), v(n);
  fillF32(master, 0.5f);
  fillF32(m, 0.0f);
  fillF32(v, 0.0f);
  auto gradBf16 = randomTyped(ZRT_BF16, n),
       paramBf16 = randomTyped(ZRT_BF16, n);
  auto gradF32 = randomTyped(ZRT_F32, n);
  auto gradF16 = randomTyped(ZRT_F16, n);
  float stats[2] = {0.0f, 1.0f};
  int64_t adamStep = 0;

  std::vector<Kernel> kernels;
  kernels.push_back({"triad", 12.0 * double(n), [&] {
                       float *a = ta.data;
                       const float *b = tb.data, *c = tc.data;
                       const float s = 3.0f;
#pragma omp parallel for schedule(static)
                       for (int64_t i = 0; i < n; ++i)
                         a[i] = b[i] + s * c[i];
                     }});
  kernels.push_back(
      {"copy", 8.0 * double(n), [&] { zrt_copy(ta.data, tb.data, n * 4); }});
  kernels.push_back({"adam_bf16", 28.0 * double(n), [&] {
                       adamwStep(ZRT_BF16, gradBf16->data, master.data, m.data,
                                 v.data, paramBf16->data, n,
                                 ++adamStep % 1000 + 1, stats);
                     }});
  // f32: the parameter copy is the master itself (as the compiler emits).
  kernels.push_back({"adam_f32", 28.0 * double(n), [&] {
                       adamwStep(ZRT_F32, gradF32->data, master.data, m.data,
                                 v.data, master.data, n, ++adamStep % 1000 + 1,
                                 stats);
                     }});
  auto overflow = [&](const char *name, int32_t dtype, const uint8_t *data) {
    kernels.push_back(
        {name, double(zrt_dtype_size(dtype)) * double(n), [&, dtype, data] {
           const void *ptr = data;
           float st[2];
           int64_t count = n;
           zrt_check_overflow(dtype, &ptr, &count, 1, 1.0f, st);
         }});
  };
  overflow("overflow_bf16", ZRT_BF16, gradBf16->data);
  overflow("overflow_f16", ZRT_F16, gradF16->data);
  overflow("overflow_f32", ZRT_F32, gradF32->data);
  // Llama's fused elementwise kernels on bf16 activations: SwiGLU reads gate
  // and up and writes y (6 B/element), its gradient reads gate, up and dy
  // and writes dgate and dup (10 B/element); the rotary embedding reads and
  // writes [batch * heads = 32, seq, head_dim = 128] (4 B/element, 8 in
  // f32), its cosines and sines computed once per position.
  auto dyBf16 = randomTyped(ZRT_BF16, n), outBf16 = randomTyped(ZRT_BF16, n),
       out2Bf16 = randomTyped(ZRT_BF16, n);
  kernels.push_back({"swiglu_bf16", 6.0 * double(n), [&] {
                       zrt_swiglu(ZRT_BF16, gradBf16->data, paramBf16->data,
                                  outBf16->data, n);
                     }});
  kernels.push_back({"swiglu_grad_bf16", 10.0 * double(n), [&] {
                       zrt_swiglu_grad(ZRT_BF16, gradBf16->data,
                                       paramBf16->data, dyBf16->data,
                                       outBf16->data, out2Bf16->data, n);
                     }});
  const int64_t ropeRows = 32, ropeDim = 128;
  const int64_t ropeSeq = n / (ropeRows * ropeDim);
  const double ropeElems = double(ropeRows * ropeSeq * ropeDim);
  kernels.push_back({"rope_bf16", 4.0 * ropeElems, [&] {
                       zrt_rope(ZRT_BF16, paramBf16->data, outBf16->data, 1,
                                ropeRows, ropeSeq, ropeDim, 1e4, 0, 0, nullptr,
                                1.0);
                     }});
  kernels.push_back({"rope_f32", 8.0 * ropeElems, [&] {
                       zrt_rope(ZRT_F32, gradF32->data, ta.data, 1, ropeRows,
                                ropeSeq, ropeDim, 1e4, 0, 0, nullptr, 1.0);
                     }});
  // A plain read-only reduction (sum of squares of fp32 data, 4 B/element):
  // the read bandwidth the overflow check could reach at best.
  kernels.push_back({"read_f32", 4.0 * double(n), [&] {
                       const float *x =
                           reinterpret_cast<float *>(gradF32->data);
                       float s = 0.0f;
#pragma omp parallel for simd schedule(static) reduction(+ : s)
                       for (int64_t i = 0; i < n; ++i)
                         s += x[i] * x[i];
                       static volatile float sink;
                       sink = s;
                     }});

  // RMS norm over rows of a Llama-7B width (4096), forward and backward:
  // x is the gradient buffer, dy the parameter copy.
  const int64_t normCols = 4096, normRows = n / normCols;
  auto normW = randomTyped(ZRT_BF16, normCols),
       normDw = randomTyped(ZRT_BF16, normCols);
  auto normWF32 = randomTyped(ZRT_F32, normCols);
  auto normOut = randomTyped(ZRT_BF16, normRows * normCols);
  auto normOutF32 = randomTyped(ZRT_F32, normRows * normCols);
  double normElems = double(normRows * normCols);
  kernels.push_back({"rms_norm_bf16", 4.0 * normElems, [&] {
                       zrt_rms_norm(ZRT_BF16, gradBf16->data, normW->data,
                                    normOut->data, normRows, normCols, 1e-5);
                     }});
  kernels.push_back({"rms_norm_f32", 8.0 * normElems, [&] {
                       zrt_rms_norm(ZRT_F32, gradF32->data, normWF32->data,
                                    normOutF32->data, normRows, normCols, 1e-5);
                     }});
  kernels.push_back({"rms_norm_grad_bf16", 6.0 * normElems, [&] {
                       zrt_rms_norm_grad(ZRT_BF16, gradBf16->data, normW->data,
                                         paramBf16->data, normOut->data,
                                         normDw->data, normRows, normCols,
                                         1e-5);
                     }});

  if (!o.only.empty()) {
    std::vector<Kernel> keep;
    for (Kernel &k : kernels)
      if (k.name == o.only || k.name == "triad")
        keep.push_back(std::move(k));
    kernels = std::move(keep);
  }

  // Warm up and pick calls per sample so that a sample takes >= 50 ms.
  for (Kernel &k : kernels) {
    k.run();
    double t0 = now();
    k.run();
    double t = now() - t0;
    k.calls = std::max(1, int(0.05 / std::max(t, 1e-6)));
  }

  for (int r = 0; r < o.rounds; ++r) {
    // Alternate the order so that no kernel always follows the same one.
    std::vector<Kernel *> order;
    for (Kernel &k : kernels)
      order.push_back(&k);
    if (r % 2)
      std::reverse(order.begin(), order.end());
    for (Kernel *k : order) {
      double t0 = now();
      for (int c = 0; c < k->calls; ++c)
        k->run();
      k->seconds.push_back((now() - t0) / k->calls);
    }
  }

  const Kernel &triad = kernels.front();
  std::string json = "{\n  \"threads\": " + std::to_string(threads) +
                     ",\n  \"params\": " + std::to_string(n) +
                     ",\n  \"rounds\": " + std::to_string(o.rounds) +
                     ",\n  \"kernels\": [";
  std::printf("%d threads, %lld elements per array, %d rounds (median)\n",
              threads, (long long)n, o.rounds);
  std::printf("%-18s %12s %10s %14s\n", "kernel", "bytes/call", "GB/s",
              "ratio to triad");
  bool first = true;
  for (const Kernel &k : kernels) {
    std::vector<double> gbps, ratio;
    for (int r = 0; r < o.rounds; ++r) {
      gbps.push_back(k.bytes / k.seconds[r] / 1e9);
      ratio.push_back((k.bytes / k.seconds[r]) /
                      (triad.bytes / triad.seconds[r]));
    }
    std::vector<double> sorted = ratio;
    std::sort(sorted.begin(), sorted.end());
    double q1 = sorted[sorted.size() / 4], q3 = sorted[(3 * sorted.size()) / 4];
    std::printf("%-18s %12.0f %10.2f %14.3f  [%.3f, %.3f]\n", k.name.c_str(),
                k.bytes, median(gbps), median(ratio), q1, q3);
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "%s\n    {\"name\": \"%s\", \"bytes_per_call\": %.0f, "
                  "\"calls_per_sample\": %d, \"gbps_median\": %.3f, "
                  "\"ratio_to_triad_median\": %.4f, \"ratio_q1\": %.4f, "
                  "\"ratio_q3\": %.4f}",
                  first ? "" : ",", k.name.c_str(), k.bytes, k.calls,
                  median(gbps), median(ratio), q1, q3);
    json += buf;
    first = false;
  }
  json += "\n  ]\n}\n";
  if (!o.json.empty() && !writeText(o.json, json))
    return 1;
  return 0;
}
