//===- KernelBench.cu - Bandwidth of the CUDA optimizer kernels -----------===//
//
// Part of the zero-mlir project.
//
// zrt-cuda-bench [--json FILE] [--log2-params 24,28] [--reps 20]
//                [--warmup 3] [--copy-bytes N]
//
// Measures, in one process on one GPU, a device-to-device copy
// (cudaMemcpyAsync, read + write bytes counted) as the reference bandwidth,
// then cuda::optimizerStep's AdamW and cuda::checkOverflow over flat shards of
// 2^k parameters, and prints one JSON object (stdout, and FILE): the device,
// the copy's GB/s, and per kernel its bytes per parameter, median time,
// params/s, GB/s and ratio over the copy. Times are CUDA events on the compute
// stream around runs of back-to-back launches of about 2 ms (per-launch
// overheads amortized), the median of --reps runs after --warmup launches
// and at least 50 ms of warm-up work. Inputs
// are random, never zeros; where one call's buffers would fit in L2, the
// launches rotate over enough buffer sets that each reads from HBM. Exits
// with status 2 and a one-line reason when no GPU is usable.
//
//===----------------------------------------------------------------------===//

#include "Kernels/CudaKernels.h"
#include "Support/CudaSupport.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

using namespace zrt::cuda;

namespace {

struct Options {
  std::string json;
  std::vector<int> log2Params = {24, 28};
  int reps = 20;
  int warmup = 3;
  int64_t copyBytes = int64_t(1) << 30;
};

[[noreturn]] void usage(const char *why) {
  std::fprintf(stderr,
               "zrt-cuda-bench: %s\nusage: zrt-cuda-bench [--json FILE] "
               "[--log2-params 24,28] [--reps N] [--warmup N] "
               "[--copy-bytes N]\n",
               why);
  std::exit(1);
}

Options parse(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        usage((a + " needs a value").c_str());
      return argv[++i];
    };
    if (a == "--json") {
      o.json = value();
    } else if (a == "--log2-params") {
      o.log2Params.clear();
      std::string list = value();
      for (size_t pos = 0; pos <= list.size();) {
        size_t comma = std::min(list.find(',', pos), list.size());
        int k = std::atoi(list.substr(pos, comma - pos).c_str());
        if (k < 10 || k > 34)
          usage("--log2-params: each value must be in [10, 34]");
        o.log2Params.push_back(k);
        pos = comma + 1;
      }
    } else if (a == "--reps") {
      o.reps = std::atoi(value().c_str());
    } else if (a == "--warmup") {
      o.warmup = std::atoi(value().c_str());
    } else if (a == "--copy-bytes") {
      o.copyBytes = std::atoll(value().c_str());
    } else if (a == "--help") {
      usage("measures the optimizer kernels against a device copy");
    } else {
      usage(("unknown argument " + a).c_str());
    }
  }
  if (o.reps < 1 || o.warmup < 0 || o.copyBytes < (1 << 20))
    usage("--reps >= 1, --warmup >= 0 and --copy-bytes >= 1 MiB");
  return o;
}

/// Uniform values in [lo, hi) from a hash of the index: cheap, random
/// enough, never all zeros.
template <typename T>
__global__ void fillKernel(T *p, int64_t n, uint32_t seed, float lo, float hi) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = (uint32_t(i) * 0x9e3779b9u) ^ uint32_t(i >> 32) ^ seed;
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    float u = float(h >> 8) * (1.0f / 16777216.0f);
    p[i] = fromF32<T>(lo + (hi - lo) * u);
  }
}

void fill(int32_t dtype, void *p, int64_t n, uint32_t seed, float lo,
          float hi) {
  dispatch(dtype, "fill", [&](auto tag) {
    using T = decltype(tag);
    fillKernel<T><<<gridFor(n), 256, 0, computeStream()>>>(static_cast<T *>(p),
                                                           n, seed, lo, hi);
    checkLaunch("fill");
  });
}

class DeviceMemory {
public:
  explicit DeviceMemory(int64_t bytes) {
    ZRT_CUDA_CHECK(cudaMalloc(&ptr, size_t(bytes)));
  }
  ~DeviceMemory() { cudaFree(ptr); }
  DeviceMemory(const DeviceMemory &) = delete;
  DeviceMemory &operator=(const DeviceMemory &) = delete;
  template <typename T = void>
  T *get() const {
    return static_cast<T *>(ptr);
  }

private:
  void *ptr = nullptr;
};

/// Median milliseconds per call of fn(call) over `reps` samples, after
/// `warmup` untimed calls and at least 50 ms of untimed work (clocks up).
/// A sample is a run of back-to-back calls between two events on the
/// compute stream, as many as take about 2 ms, so that launch and event
/// overheads do not count against kernels of a few microseconds.
template <typename Fn>
double medianMs(const Options &o, Fn &&fn) {
  cudaStream_t s = computeStream();
  cudaEvent_t start, stop;
  ZRT_CUDA_CHECK(cudaEventCreate(&start));
  ZRT_CUDA_CHECK(cudaEventCreate(&stop));
  auto timed = [&](int first, int calls) {
    ZRT_CUDA_CHECK(cudaEventRecord(start, s));
    for (int c = 0; c < calls; ++c)
      fn(first + c);
    ZRT_CUDA_CHECK(cudaEventRecord(stop, s));
    ZRT_CUDA_CHECK(cudaEventSynchronize(stop));
    float t = 0;
    ZRT_CUDA_CHECK(cudaEventElapsedTime(&t, start, stop));
    return double(t);
  };
  int call = 0;
  for (; call < o.warmup; ++call)
    fn(call);
  double one = timed(call++, 1);
  for (double spent = one; spent < 50.0; spent += one)
    one = timed(call++, 1);
  int calls = int(std::min(100.0, std::max(1.0, std::ceil(2.0 / one))));
  std::vector<double> ms;
  for (int r = 0; r < o.reps; ++r, call += calls)
    ms.push_back(timed(call, calls) / calls);
  ZRT_CUDA_CHECK(cudaEventDestroy(start));
  ZRT_CUDA_CHECK(cudaEventDestroy(stop));
  std::sort(ms.begin(), ms.end());
  size_t k = ms.size();
  return k % 2 ? ms[k / 2] : 0.5 * (ms[k / 2 - 1] + ms[k / 2]);
}

const char *dtypeName(int32_t dtype) {
  return dtype == ZRT_F32 ? "f32" : dtype == ZRT_BF16 ? "bf16" : "f16";
}

struct Result {
  std::string name;
  int log2Params;
  int64_t params;
  int bytesPerParam;
  int bufferSets;
  double ms;
  std::string skipped; // why, if not measured
};

struct Bench {
  Options opts;
  int64_t l2Bytes = 0;
  std::vector<Result> results;

  /// Buffer sets to rotate over so that each launch's data was evicted
  /// from L2 since its last use (3x L2 between reuses), if memory allows.
  int bufferSets(int64_t bytesPerSet) const {
    int64_t sets = (3 * l2Bytes + bytesPerSet - 1) / bytesPerSet;
    return int(std::max<int64_t>(1, sets));
  }

  /// Whether `bytes` more fit (with a margin for the copy buffers and
  /// the runtime).
  static bool fits(int64_t bytes) {
    size_t freeBytes = 0, total = 0;
    ZRT_CUDA_CHECK(cudaMemGetInfo(&freeBytes, &total));
    return double(bytes) < 0.9 * double(freeBytes);
  }

  void adamCase(int32_t dtype, bool paramIsMaster, int k) {
    int64_t n = int64_t(1) << k;
    int64_t g = zrt_dtype_size(dtype);
    // grad read, master/exp_avg/exp_avg_sq read and written, copy written.
    int bytesPerParam = int(g + 24 + (paramIsMaster ? 0 : g));
    std::string name = std::string("adam_") + dtypeName(dtype) +
                       (paramIsMaster ? "_param_is_master" : "");
    int64_t setBytes = n * (g + 12 + (paramIsMaster ? 0 : g));
    int sets = bufferSets(setBytes);
    if (!fits(sets * setBytes)) {
      results.push_back({name, k, n, bytesPerParam, sets, 0, "memory"});
      return;
    }
    std::vector<std::unique_ptr<DeviceMemory>> mem;
    struct Set {
      void *grad, *param;
      float *master, *m, *v;
    };
    std::vector<Set> bufs;
    for (int s = 0; s < sets; ++s) {
      mem.push_back(std::make_unique<DeviceMemory>(setBytes));
      char *base = mem.back()->get<char>();
      Set b;
      b.master = reinterpret_cast<float *>(base);
      b.m = b.master + n;
      b.v = b.m + n;
      b.grad = b.v + n;
      b.param = paramIsMaster
                    ? static_cast<void *>(b.master)
                    : static_cast<void *>(static_cast<char *>(b.grad) + n * g);
      uint32_t seed = 1000 * uint32_t(s);
      fill(dtype, b.grad, n, seed + 1, -1e-2f, 1e-2f);
      fill(ZRT_F32, b.master, n, seed + 2, -5e-2f, 5e-2f);
      fill(ZRT_F32, b.m, n, seed + 3, -1e-3f, 1e-3f);
      fill(ZRT_F32, b.v, n, seed + 4, 1e-6f, 1e-4f);
      bufs.push_back(b);
    }
    // Clipping on (coefficient 1 / (1 + 1e-6)), loss scale 1: the full
    // arithmetic of a training step.
    DeviceMemory scalars(3 * sizeof(float));
    float host[3] = {0.0f, 1.0f, 1.0f};
    ZRT_CUDA_CHECK(
        cudaMemcpy(scalars.get(), host, sizeof(host), cudaMemcpyHostToDevice));
    const float *stats = scalars.get<float>(), *lossScale = stats + 2;
    // AdamW, optimizers.def's second row, with clipping at 1.
    zrt_optimizer opt{};
    opt.kind = 1;
    opt.params.adamw = {1e-4, 0.9, 0.95, 1e-8, 0.1, 1.0};
    auto update = [&](const Set &b, int64_t step, const float *st) {
      zrt_update u{};
      u.dtype = dtype;
      u.grad = b.grad;
      u.master = b.master;
      u.param = b.param;
      u.states[0] = b.m;
      u.states[1] = b.v;
      u.n = n;
      u.step = step;
      u.max_grad_norm = 1.0;
      u.stats = st;
      return u;
    };
    double ms = medianMs(opts, [&](int rep) {
      const Set &b = bufs[size_t(rep % sets)];
      optimizerStep(opt, update(b, 10 + rep, stats), lossScale, 1.0);
    });
    results.push_back({name, k, n, bytesPerParam, sets, ms, ""});
  }

  void overflowCase(int32_t dtype, int k) {
    int64_t n = int64_t(1) << k;
    int64_t g = zrt_dtype_size(dtype);
    std::string name = std::string("overflow_") + dtypeName(dtype);
    int sets = bufferSets(n * g);
    if (!fits(sets * n * g)) {
      results.push_back({name, k, n, int(g), sets, 0, "memory"});
      return;
    }
    std::vector<std::unique_ptr<DeviceMemory>> grads;
    for (int s = 0; s < sets; ++s) {
      grads.push_back(std::make_unique<DeviceMemory>(n * g));
      fill(dtype, grads.back()->get(), n, 77u + uint32_t(s), -1.0f, 1.0f);
    }
    DeviceMemory scalars(3 * sizeof(float));
    float host[3] = {0.0f, 0.0f, 1.0f};
    ZRT_CUDA_CHECK(
        cudaMemcpy(scalars.get(), host, sizeof(host), cudaMemcpyHostToDevice));
    float *stats = scalars.get<float>();
    double ms = medianMs(opts, [&](int rep) {
      checkOverflow(dtype, grads[size_t(rep % sets)]->get(), n, stats + 2, 1.0,
                    1, stats);
    });
    // The pass must have seen finite values only.
    ZRT_CUDA_CHECK(
        cudaMemcpy(host, stats, 2 * sizeof(float), cudaMemcpyDeviceToHost));
    if (host[0] != 0.0f || !(host[1] > 0.0f)) {
      std::fprintf(stderr, "zrt-cuda-bench: %s: unexpected stats {%g, %g}\n",
                   name.c_str(), double(host[0]), double(host[1]));
      std::exit(1);
    }
    results.push_back({name, k, n, int(g), sets, ms, ""});
  }
};

std::string jsonString(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20)
      out += c;
  }
  return out + "\"";
}

} // namespace

int main(int argc, char **argv) {
  Options opts = parse(argc, argv);
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    std::fprintf(stderr, "zrt-cuda-bench: no usable CUDA GPU (%s)\n",
                 err != cudaSuccess ? cudaGetErrorString(err)
                                    : "no device found");
    return 2;
  }

  int device = 0;
  ZRT_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop;
  ZRT_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  int memClockKHz = 0, busBits = 0, driver = 0, runtime = 0;
  ZRT_CUDA_CHECK(
      cudaDeviceGetAttribute(&memClockKHz, cudaDevAttrMemoryClockRate, device));
  ZRT_CUDA_CHECK(cudaDeviceGetAttribute(
      &busBits, cudaDevAttrGlobalMemoryBusWidth, device));
  ZRT_CUDA_CHECK(cudaDriverGetVersion(&driver));
  ZRT_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  // HBM transfers twice per clock.
  double theoreticalGBps = 2.0 * memClockKHz * 1e3 * (busBits / 8) / 1e9;

  Bench bench;
  bench.opts = opts;
  bench.l2Bytes = prop.l2CacheSize;

  // The reference: a device-to-device copy, read + write bytes.
  double copyMs;
  {
    DeviceMemory src(opts.copyBytes), dst(opts.copyBytes);
    fill(ZRT_F32, src.get(), opts.copyBytes / 4, 5u, -1.0f, 1.0f);
    copyMs = medianMs(opts, [&](int) {
      ZRT_CUDA_CHECK(
          cudaMemcpyAsync(dst.get(), src.get(), size_t(opts.copyBytes),
                          cudaMemcpyDeviceToDevice, computeStream()));
    });
  }
  double copyGBps = 2.0 * double(opts.copyBytes) / (copyMs * 1e-3) / 1e9;

  for (int k : opts.log2Params) {
    for (int32_t dtype : {ZRT_BF16, ZRT_F16, ZRT_F32})
      bench.adamCase(dtype, false, k);
    bench.adamCase(ZRT_F32, true, k);
    for (int32_t dtype : {ZRT_BF16, ZRT_F16, ZRT_F32})
      bench.overflowCase(dtype, k);
  }
  ZRT_CUDA_CHECK(cudaStreamSynchronize(computeStream()));
  ZRT_CUDA_CHECK(cudaGetLastError());

  std::string out = "{\n  \"machine\": {";
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "\"device\": %s, \"sms\": %d, \"compute_capability\": "
                "\"%d.%d\", \"memory_bytes\": %zu, \"l2_bytes\": %d, "
                "\"memory_clock_mhz\": %.0f, \"bus_width_bits\": %d, "
                "\"theoretical_gbps\": %.1f, \"driver_version\": %d, "
                "\"runtime_version\": %d},\n",
                jsonString(prop.name).c_str(), prop.multiProcessorCount,
                prop.major, prop.minor, prop.totalGlobalMem, prop.l2CacheSize,
                memClockKHz / 1e3, busBits, theoreticalGBps, driver, runtime);
  out += buf;
  std::snprintf(buf, sizeof(buf),
                "  \"reps\": %d, \"warmup\": %d,\n  \"copy\": {\"bytes\": "
                "%lld, \"bytes_moved\": %lld, \"ms_median\": %.4f, \"gbps\": "
                "%.1f, \"fraction_of_theoretical\": %.3f},\n  \"kernels\": [",
                opts.reps, opts.warmup, (long long)opts.copyBytes,
                2 * (long long)opts.copyBytes, copyMs, copyGBps,
                copyGBps / theoreticalGBps);
  out += buf;
  for (size_t i = 0; i < bench.results.size(); ++i) {
    const Result &r = bench.results[i];
    out += i ? ",\n    " : "\n    ";
    if (!r.skipped.empty()) {
      std::snprintf(buf, sizeof(buf),
                    "{\"name\": \"%s\", \"log2_params\": %d, \"params\": "
                    "%lld, \"bytes_per_param\": %d, \"skipped\": \"%s\"}",
                    r.name.c_str(), r.log2Params, (long long)r.params,
                    r.bytesPerParam, r.skipped.c_str());
    } else {
      double seconds = r.ms * 1e-3;
      double gbps = double(r.params) * r.bytesPerParam / seconds / 1e9;
      std::snprintf(
          buf, sizeof(buf),
          "{\"name\": \"%s\", \"log2_params\": %d, \"params\": %lld, "
          "\"bytes_per_param\": %d, \"buffer_sets\": %d, \"ms_median\": "
          "%.4f, \"params_per_s\": %.4g, \"gbps\": %.1f, \"ratio_to_copy\": "
          "%.3f}",
          r.name.c_str(), r.log2Params, (long long)r.params, r.bytesPerParam,
          r.bufferSets, r.ms, double(r.params) / seconds, gbps,
          gbps / copyGBps);
    }
    out += buf;
  }
  out += "\n  ]\n}\n";

  if (!opts.json.empty()) {
    FILE *f = std::fopen(opts.json.c_str(), "w");
    if (!f || std::fputs(out.c_str(), f) < 0 || std::fclose(f) != 0) {
      std::fprintf(stderr, "zrt-cuda-bench: cannot write %s\n",
                   opts.json.c_str());
      return 1;
    }
  }
  std::fputs(out.c_str(), stdout);
  return 0;
}
