//===- KernelBench.cu - Speed of the CUDA kernels against their goals -----===//
//
// Part of the zero-mlir project.
//
// zrt-cuda-bench [--json FILE] [--only adam,overflow,attention,memory]
//                [--log2-params 24,28] [--attention-seqs 1024,2048,4096,8192]
//                [--reps 20] [--warmup 3] [--copy-bytes N]
//
// Measures, in one process on one GPU, a device-to-device copy
// (cudaMemcpyAsync, read + write bytes counted) as the reference bandwidth,
// then the parts that --only names (default all), and prints one JSON object
// (stdout, and FILE): the device, the copy's GB/s, "parts" (those run) and
//  * adam, overflow ("kernels"): cuda::optimizerStep's AdamW and
//    cuda::checkOverflow over flat shards of 2^k parameters; per kernel its
//    bytes per parameter, median time, params/s, GB/s and ratio over the
//    copy.
//  * attention ("attention"): cuda::attentionForward and attentionBackward,
//    bf16, causal, head dim 64 and 128 at each --attention-seqs length S,
//    batch max(1, 16384 / S) and heads 2048 / head dim: 16K tokens of a
//    hidden-2048 model, the same work at every length. FLOPs as
//    FlashAttention's benchmark counts them: forward 4 B H S^2 D, halved
//    for causal, backward 2.5x the forward. The backward's time includes
//    what it redoes because the forward keeps no log-sum-exp (a forward
//    pass without o, delta = rowsum(dO * O), its stream-ordered scratch).
//    Each case runs at both --attention-precision settings (fp32: P and dS
//    as two 16-bit halves; 16bit: one, as FlashAttention). Per case
//    forward and backward median ms and TFLOP/s, and forward + backward
//    TFLOP/s (all FLOPs over both times). A non-finite or all-zero
//    o, dq, dk or dv exits with status 1.
//  * memory ("memory_kernels"): the memory-bound kernels at GPT-2 124M's
//    shapes, bf16, 8 x 1024 tokens: softmax cross-entropy and its gradient
//    (int32 labels) at vocabulary 50257 and at 50304 columns padding 50257
//    classes, layer norm, RMS norm and their gradients at [8192, 768], the
//    bias gradient (reduce_sum of [8192, 768] to [768]) and the attention
//    head split and merge (zero-model-gen's transposes of [8, 1024, 12, 64]
//    and [8, 12, 1024, 64] by {0, 2, 1, 3}). Per kernel the bytes it must
//    move (each input read once, each output written once, in its dtype;
//    a padded row's padding columns are not counted as read, the norm
//    gradients' per-row statistics not at all), median time, GB/s and ratio
//    over the copy.
//
// Times are CUDA events on the compute stream around runs of back-to-back
// launches of about 2 ms (per-launch overheads amortized), the median of
// --reps runs after --warmup launches and at least 50 ms of warm-up work.
// Inputs are random, never zeros; where one call's buffers would fit in
// L2, the launches rotate over enough buffer sets that each reads from HBM
// (attention's operands, 64 MiB each, never fit). A case whose buffers do
// not fit in device memory is recorded as skipped. Exits with status 2 and
// a one-line reason when no GPU is usable.
//
//===----------------------------------------------------------------------===//

#include "Kernels/CudaKernels.h"
#include "Support/CudaSupport.h"

#include "zero_rt/scratch.h"

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

/// The parts of --only, in the order they run.
const char *const kParts[] = {"adam", "overflow", "attention", "memory"};

struct Options {
  std::string json;
  std::vector<int> log2Params = {24, 28};
  std::vector<int> attentionSeqs = {1024, 2048, 4096, 8192};
  std::vector<std::string> only = {kParts, kParts + 4};
  int reps = 20;
  int warmup = 3;
  int64_t copyBytes = int64_t(1) << 30;

  bool runs(const char *part) const {
    return std::find(only.begin(), only.end(), part) != only.end();
  }
};

[[noreturn]] void usage(const char *why) {
  std::fprintf(stderr,
               "zrt-cuda-bench: %s\nusage: zrt-cuda-bench [--json FILE] "
               "[--only adam,overflow,attention,memory] [--log2-params 24,28] "
               "[--attention-seqs 1024,2048,4096,8192] [--reps N] "
               "[--warmup N] [--copy-bytes N]\n",
               why);
  std::exit(1);
}

std::vector<std::string> splitList(const std::string &list) {
  std::vector<std::string> items;
  for (size_t pos = 0; pos <= list.size();) {
    size_t comma = std::min(list.find(',', pos), list.size());
    items.push_back(list.substr(pos, comma - pos));
    pos = comma + 1;
  }
  return items;
}

/// The integers of a comma-separated list, each in [lo, hi].
std::vector<int> intList(const std::string &option, const std::string &list,
                         int lo, int hi) {
  std::vector<int> values;
  for (const std::string &item : splitList(list)) {
    int v = std::atoi(item.c_str());
    if (v < lo || v > hi)
      usage((option + ": each value must be in [" + std::to_string(lo) + ", " +
             std::to_string(hi) + "]")
                .c_str());
    values.push_back(v);
  }
  return values;
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
      o.log2Params = intList(a, value(), 10, 34);
    } else if (a == "--attention-seqs") {
      o.attentionSeqs = intList(a, value(), 16, 1 << 16);
    } else if (a == "--only") {
      o.only = splitList(value());
      for (const std::string &part : o.only)
        if (std::find(kParts, kParts + 4, part) == kParts + 4)
          usage(("--only: unknown part '" + part +
                 "' (adam, overflow, attention, memory)")
                    .c_str());
    } else if (a == "--reps") {
      o.reps = std::atoi(value().c_str());
    } else if (a == "--warmup") {
      o.warmup = std::atoi(value().c_str());
    } else if (a == "--copy-bytes") {
      o.copyBytes = std::atoll(value().c_str());
    } else if (a == "--help") {
      usage("measures the CUDA kernels against a device copy");
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

/// Labels in [0, classes) from the same hash: every one valid, so the
/// loss kernels never take their error path.
__global__ void labelsKernel(int32_t *p, int64_t n, uint32_t seed,
                             int64_t classes) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = (uint32_t(i) * 0x9e3779b9u) ^ seed;
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    p[i] = int32_t(h % uint32_t(classes));
  }
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
  /// A memory-bound kernel's: its zrt kernel, its shape in words and the
  /// bytes one call must move (0: an optimizer case's, which moves params *
  /// bytesPerParam).
  std::string kernel = "", shape = "";
  int64_t bytes = 0;
};

/// One attention case: bf16, causal.
struct AttentionResult {
  int64_t headDim, seq, batch, heads;
  bool splitProbs; // setAttentionSplitProbs: precision fp32, else 16bit
  double fwdMs, bwdMs;
  std::string skipped; // why, if not measured

  /// Forward FLOPs as FlashAttention's benchmark counts them: 4 B H S^2 D
  /// (two products of S x S x D), halved for causal.
  double fwdFlops() const {
    return 4.0 * double(batch * heads) * double(seq) * double(seq) *
           double(headDim) / 2.0;
  }
  double bwdFlops() const { return 2.5 * fwdFlops(); }
};

/// One operand of a memory-bound case: `count` elements of `dtype`, an
/// input filled uniformly in [lo, hi) (lo == hi: that constant), int32
/// labels in [0, classes) when classes > 0, or an output left as allocated.
struct Operand {
  int32_t dtype;
  int64_t count;
  bool input;
  float lo, hi;
  int64_t classes;

  int64_t bytes() const {
    return count * (classes > 0 ? 4 : zrt_dtype_size(dtype));
  }
  /// Where the next operand starts: 256-byte aligned, as cudaMalloc's.
  int64_t span() const { return (bytes() + 255) / 256 * 256; }
};

Operand input(int32_t dtype, int64_t count, float lo, float hi) {
  return {dtype, count, true, lo, hi, 0};
}
Operand output(int32_t dtype, int64_t count) {
  return {dtype, count, false, 0, 0, 0};
}
Operand labels(int64_t count, int64_t classes) {
  return {ZRT_F32, count, true, 0, 0, classes};
}

// The memory-bound cases' shapes: GPT-2 124M in bf16, 8 x 1024 tokens.
constexpr int64_t kBatch = 8, kSeq = 1024, kTokens = kBatch * kSeq;
constexpr int64_t kHidden = 768, kHeads = 12, kHeadDim = 64;
constexpr int64_t kVocab = 50257, kPaddedVocab = 50304;

// The attention cases' work: tokens of a model of this width (heads =
// width / head dim).
constexpr int64_t kAttentionTokens = 16384, kAttentionWidth = 2048;

struct Bench {
  Options opts;
  int64_t l2Bytes = 0;
  std::vector<Result> results;
  std::vector<AttentionResult> attention;

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

  /// Times call(pointers) of a memory-bound kernel that moves `bytes` per
  /// call, over rotating sets of the operands `ops`.
  template <typename Call>
  void memoryCase(const std::string &name, const char *kernel,
                  const std::string &shape, int64_t bytes,
                  const std::vector<Operand> &ops, Call &&call) {
    int64_t setBytes = 0;
    for (const Operand &op : ops)
      setBytes += op.span();
    int sets = bufferSets(setBytes);
    Result r{name, 0, 0, 0, sets, 0, "", kernel, shape, bytes};
    if (!fits(sets * setBytes)) {
      r.skipped = "memory";
      results.push_back(r);
      return;
    }
    std::vector<std::unique_ptr<DeviceMemory>> mem;
    std::vector<std::vector<void *>> ptrs;
    for (int s = 0; s < sets; ++s) {
      mem.push_back(std::make_unique<DeviceMemory>(setBytes));
      char *at = mem.back()->get<char>();
      ptrs.emplace_back();
      for (size_t i = 0; i < ops.size(); ++i) {
        const Operand &op = ops[i];
        uint32_t seed = 1000 * uint32_t(s) + 10 * uint32_t(i) + 1;
        if (op.classes > 0) {
          labelsKernel<<<gridFor(op.count), 256, 0, computeStream()>>>(
              reinterpret_cast<int32_t *>(at), op.count, seed, op.classes);
          checkLaunch("labels");
        } else if (op.input) {
          fill(op.dtype, at, op.count, seed, op.lo, op.hi);
        }
        ptrs.back().push_back(at);
        at += op.span();
      }
    }
    r.ms = medianMs(opts, [&](int rep) { call(ptrs[size_t(rep % sets)]); });
    results.push_back(r);
  }

  void lossCases() {
    const int32_t bf16 = ZRT_BF16;
    const int64_t rows = kTokens;
    for (int64_t cols : {kVocab, kPaddedVocab}) {
      std::string v = "_v" + std::to_string(cols);
      std::string shape = std::to_string(rows) + " x " + std::to_string(cols);
      if (cols != kVocab)
        shape += " (" + std::to_string(kVocab) + " classes)";
      // Logits of a few units: softmax rows neither flat nor one-hot.
      Operand logits = input(bf16, rows * cols, -4.0f, 4.0f);
      Operand ids = labels(rows, kVocab);
      // The classes' logits and the labels; the loss needs no padding.
      int64_t read = rows * kVocab * 2 + ids.bytes();
      memoryCase("cross_entropy" + v, "zrt_softmax_cross_entropy", shape,
                 read + 4, {logits, ids, output(ZRT_F32, 1)},
                 [&](const std::vector<void *> &p) {
                   softmaxCrossEntropy(bf16, p[0], ZRT_I32, p[1],
                                       static_cast<float *>(p[2]), rows, kVocab,
                                       cols, 0, -100);
                 });
      memoryCase("cross_entropy_grad" + v, "zrt_softmax_cross_entropy_grad",
                 shape, read + 4 + rows * cols * 2,
                 {logits, ids, input(ZRT_F32, 1, 1.0f, 1.0f),
                  output(bf16, rows * cols)},
                 [&](const std::vector<void *> &p) {
                   softmaxCrossEntropyGrad(bf16, p[0], ZRT_I32, p[1],
                                           static_cast<const float *>(p[2]),
                                           p[3], rows, kVocab, cols, 0, -100);
                 });
    }
  }

  void normCases() {
    const int32_t bf16 = ZRT_BF16;
    const int64_t rows = kTokens, cols = kHidden, n = rows * cols;
    const double eps = 1e-5;
    std::string shape = std::to_string(rows) + " x " + std::to_string(cols);
    Operand x = input(bf16, n, -2.0f, 2.0f), dy = input(bf16, n, -1.0f, 1.0f);
    Operand w = input(bf16, cols, 0.5f, 1.5f);
    Operand b = input(bf16, cols, -0.5f, 0.5f);
    Operand y = output(bf16, n), vec = output(bf16, cols);
    using Ptrs = const std::vector<void *> &;
    memoryCase("layer_norm", "zrt_layer_norm", shape, 2 * n * 2 + 2 * cols * 2,
               {x, w, b, y}, [&](Ptrs p) {
                 layerNorm(bf16, p[0], p[1], p[2], p[3], rows, cols, eps);
               });
    memoryCase("layer_norm_grad", "zrt_layer_norm_grad", shape,
               3 * n * 2 + 3 * cols * 2, {x, w, dy, y, vec, vec}, [&](Ptrs p) {
                 layerNormGrad(bf16, p[0], p[1], p[2], p[3], p[4], p[5], rows,
                               cols, eps);
               });
    memoryCase(
        "rms_norm", "zrt_rms_norm", shape, 2 * n * 2 + cols * 2, {x, w, y},
        [&](Ptrs p) { rmsNorm(bf16, p[0], p[1], p[2], rows, cols, eps); });
    memoryCase("rms_norm_grad", "zrt_rms_norm_grad", shape,
               3 * n * 2 + 2 * cols * 2, {x, w, dy, y, vec}, [&](Ptrs p) {
                 rmsNormGrad(bf16, p[0], p[1], p[2], p[3], p[4], rows, cols,
                             eps);
               });
    memoryCase("bias_grad", "zrt_reduce_sum",
               shape + " -> " + std::to_string(cols), n * 2 + cols * 2,
               {dy, vec},
               [&](Ptrs p) { reduceSum(bf16, p[0], p[1], rows, cols); });
  }

  /// The attention head split [B, S, H, D] -> [B, H, S, D] and its merge
  /// back, both the permutation {0, 2, 1, 3}.
  void layoutCases() {
    const int64_t n = kTokens * kHidden;
    const int64_t perm[4] = {0, 2, 1, 3};
    const int64_t split[4] = {kBatch, kSeq, kHeads, kHeadDim};
    const int64_t merge[4] = {kBatch, kHeads, kSeq, kHeadDim};
    for (const int64_t *in : {split, merge}) {
      std::string shape = "[" + std::to_string(in[0]);
      for (int i = 1; i < 4; ++i)
        shape += ", " + std::to_string(in[i]);
      shape += "] by {0, 2, 1, 3}";
      memoryCase(in == split ? "transpose_to_heads" : "transpose_from_heads",
                 "zrt_transpose", shape, 2 * n * 2,
                 {input(ZRT_BF16, n, -1.0f, 1.0f), output(ZRT_BF16, n)},
                 [&](const std::vector<void *> &p) {
                   transpose(ZRT_BF16, p[0], p[1], 4, in, perm);
                 });
    }
  }

  /// Exits with status 1 unless each of `tensors` (n bf16 values each) is
  /// finite and not all zeros: a fast kernel must still compute.
  static void
  requireUsable(const std::string &name,
                const std::vector<std::pair<const char *, void *>> &tensors,
                int64_t n) {
    DeviceMemory stats(2 * sizeof(float));
    for (const auto &t : tensors) {
      checkOverflow(ZRT_BF16, t.second, n, nullptr, 1.0, 1, stats.get<float>());
      float host[2];
      ZRT_CUDA_CHECK(
          cudaMemcpy(host, stats.get(), sizeof(host), cudaMemcpyDeviceToHost));
      if (host[0] != 0.0f || !(host[1] > 0.0f)) {
        std::fprintf(stderr, "zrt-cuda-bench: %s: %s is %s (stats {%g, %g})\n",
                     name.c_str(), t.first,
                     host[0] != 0.0f ? "not finite" : "all zeros",
                     double(host[0]), double(host[1]));
        std::exit(1);
      }
    }
  }

  void attentionCase(int64_t headDim, int64_t seq, bool splitProbs) {
    AttentionResult r{};
    r.headDim = headDim;
    r.seq = seq;
    r.batch = std::max<int64_t>(1, kAttentionTokens / seq);
    r.heads = kAttentionWidth / headDim;
    r.splitProbs = splitProbs;
    int64_t n = r.batch * r.heads * seq * headDim, bytes = n * 2;
    // q, k, v, o, dO, dq, dk, dv and the backward's scratch.
    if (!fits(8 * bytes +
              zrt_scratch_attention_grad(r.batch, r.heads, seq, headDim))) {
      r.skipped = "memory";
      attention.push_back(r);
      return;
    }
    std::vector<std::unique_ptr<DeviceMemory>> mem;
    void *t[8];
    for (int i = 0; i < 8; ++i) {
      mem.push_back(std::make_unique<DeviceMemory>(bytes));
      t[i] = mem.back()->get();
    }
    void *q = t[0], *k = t[1], *v = t[2], *o = t[3], *dO = t[4], *dq = t[5],
         *dk = t[6], *dv = t[7];
    // Scores of a few units, as the tests': peaked but not one-hot rows.
    fill(ZRT_BF16, q, n, 11u, -2.0f, 2.0f);
    fill(ZRT_BF16, k, n, 12u, -2.0f, 2.0f);
    fill(ZRT_BF16, v, n, 13u, -1.0f, 1.0f);
    fill(ZRT_BF16, dO, n, 14u, -1.0f, 1.0f);
    zrt_attention_desc d{};
    d.dtype = ZRT_BF16;
    d.causal = 1;
    d.batch = r.batch;
    d.heads = d.kv_heads = r.heads;
    d.seq = seq;
    d.head_dim = headDim;
    d.scale = 0; // 1 / sqrt(head_dim)
    setAttentionSplitProbs(splitProbs);
    r.fwdMs = medianMs(opts, [&](int) { attentionForward(&d, q, k, v, o); });
    r.bwdMs = medianMs(
        opts, [&](int) { attentionBackward(&d, q, k, v, o, dO, dq, dk, dv); });
    setAttentionSplitProbs(true);
    requireUsable("attention d" + std::to_string(headDim) + " s" +
                      std::to_string(seq) + (splitProbs ? " fp32" : " 16bit"),
                  {{"o", o}, {"dq", dq}, {"dk", dk}, {"dv", dv}}, n);
    attention.push_back(r);
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

/// An optimizer case as "kernels" has always held it (bench/
/// update_docs_gpu.py reads these fields).
std::string optimizerJson(const Result &r, double copyGBps) {
  char buf[512];
  if (!r.skipped.empty()) {
    std::snprintf(buf, sizeof(buf),
                  "{\"name\": \"%s\", \"log2_params\": %d, \"params\": "
                  "%lld, \"bytes_per_param\": %d, \"skipped\": \"%s\"}",
                  r.name.c_str(), r.log2Params, (long long)r.params,
                  r.bytesPerParam, r.skipped.c_str());
    return buf;
  }
  double seconds = r.ms * 1e-3;
  double gbps = double(r.params) * r.bytesPerParam / seconds / 1e9;
  std::snprintf(buf, sizeof(buf),
                "{\"name\": \"%s\", \"log2_params\": %d, \"params\": %lld, "
                "\"bytes_per_param\": %d, \"buffer_sets\": %d, \"ms_median\": "
                "%.4f, \"params_per_s\": %.4g, \"gbps\": %.1f, "
                "\"ratio_to_copy\": %.3f}",
                r.name.c_str(), r.log2Params, (long long)r.params,
                r.bytesPerParam, r.bufferSets, r.ms, double(r.params) / seconds,
                gbps, gbps / copyGBps);
  return buf;
}

/// A memory-bound case of "memory_kernels".
std::string memoryJson(const Result &r, double copyGBps) {
  std::string out = "{\"name\": " + jsonString(r.name) +
                    ", \"kernel\": " + jsonString(r.kernel) +
                    ", \"dtype\": \"bf16\", \"shape\": " + jsonString(r.shape);
  char buf[256];
  if (!r.skipped.empty()) {
    std::snprintf(buf, sizeof(buf), ", \"bytes\": %lld, \"skipped\": \"%s\"}",
                  (long long)r.bytes, r.skipped.c_str());
    return out + buf;
  }
  double gbps = double(r.bytes) / (r.ms * 1e-3) / 1e9;
  std::snprintf(buf, sizeof(buf),
                ", \"bytes\": %lld, \"buffer_sets\": %d, \"ms_median\": %.4f, "
                "\"gbps\": %.1f, \"ratio_to_copy\": %.3f}",
                (long long)r.bytes, r.bufferSets, r.ms, gbps, gbps / copyGBps);
  return out + buf;
}

std::string attentionJson(const AttentionResult &r) {
  char buf[640];
  int len = std::snprintf(
      buf, sizeof(buf),
      "{\"name\": \"attention_bf16_causal_d%lld_s%lld_%s\", \"dtype\": "
      "\"bf16\", \"causal\": true, \"precision\": \"%s\", \"head_dim\": "
      "%lld, \"seq\": %lld, \"batch\": %lld, \"heads\": %lld, "
      "\"fwd_flops\": %.0f, \"bwd_flops\": %.0f",
      (long long)r.headDim, (long long)r.seq, r.splitProbs ? "fp32" : "16bit",
      r.splitProbs ? "fp32" : "16bit", (long long)r.headDim, (long long)r.seq,
      (long long)r.batch, (long long)r.heads, r.fwdFlops(), r.bwdFlops());
  std::string out(buf, size_t(len));
  if (!r.skipped.empty())
    return out + ", \"skipped\": " + jsonString(r.skipped) + "}";
  auto tflops = [](double flops, double ms) { return flops / ms * 1e-9; };
  std::snprintf(buf, sizeof(buf),
                ", \"fwd_ms_median\": %.4f, \"bwd_ms_median\": %.4f, "
                "\"fwd_tflops\": %.1f, \"bwd_tflops\": %.1f, "
                "\"total_tflops\": %.1f}",
                r.fwdMs, r.bwdMs, tflops(r.fwdFlops(), r.fwdMs),
                tflops(r.bwdFlops(), r.bwdMs),
                tflops(r.fwdFlops() + r.bwdFlops(), r.fwdMs + r.bwdMs));
  return out + buf;
}

/// `items` as the body of a JSON array, one per line.
std::string jsonArray(const std::vector<std::string> &items) {
  if (items.empty())
    return "[]";
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i)
    out += (i ? ",\n    " : "\n    ") + items[i];
  return out + "\n  ]";
}

/// The device's description, the "machine" object; sets the memory's
/// theoretical GB/s.
std::string machineJson(int device, const cudaDeviceProp &prop,
                        double &theoreticalGBps) {
  int memClockKHz = 0, busBits = 0, driver = 0, runtime = 0;
  ZRT_CUDA_CHECK(
      cudaDeviceGetAttribute(&memClockKHz, cudaDevAttrMemoryClockRate, device));
  ZRT_CUDA_CHECK(cudaDeviceGetAttribute(
      &busBits, cudaDevAttrGlobalMemoryBusWidth, device));
  ZRT_CUDA_CHECK(cudaDriverGetVersion(&driver));
  ZRT_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  // HBM transfers twice per clock.
  theoreticalGBps = 2.0 * memClockKHz * 1e3 * (busBits / 8) / 1e9;
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "{\"device\": %s, \"sms\": %d, \"compute_capability\": "
                "\"%d.%d\", \"memory_bytes\": %zu, \"l2_bytes\": %d, "
                "\"memory_clock_mhz\": %.0f, \"bus_width_bits\": %d, "
                "\"theoretical_gbps\": %.1f, \"driver_version\": %d, "
                "\"runtime_version\": %d}",
                jsonString(prop.name).c_str(), prop.multiProcessorCount,
                prop.major, prop.minor, prop.totalGlobalMem, prop.l2CacheSize,
                memClockKHz / 1e3, busBits, theoreticalGBps, driver, runtime);
  return buf;
}

/// The parts of --only that run, in their order.
void runParts(const Options &opts, Bench &bench) {
  for (int k : opts.log2Params) {
    if (opts.runs("adam")) {
      for (int32_t dtype : {ZRT_BF16, ZRT_F16, ZRT_F32})
        bench.adamCase(dtype, false, k);
      bench.adamCase(ZRT_F32, true, k);
    }
    if (opts.runs("overflow"))
      for (int32_t dtype : {ZRT_BF16, ZRT_F16, ZRT_F32})
        bench.overflowCase(dtype, k);
  }
  if (opts.runs("attention"))
    for (bool splitProbs : {true, false})
      for (int64_t dim : {64, 128})
        for (int seq : opts.attentionSeqs)
          bench.attentionCase(dim, seq, splitProbs);
  if (opts.runs("memory")) {
    bench.lossCases();
    bench.normCases();
    bench.layoutCases();
  }
  ZRT_CUDA_CHECK(cudaStreamSynchronize(computeStream()));
  ZRT_CUDA_CHECK(cudaGetLastError());
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
  double theoreticalGBps = 0;
  std::string machine = machineJson(device, prop, theoreticalGBps);

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

  runParts(opts, bench);

  std::vector<std::string> optimizer, memory, attention, parts;
  for (const Result &r : bench.results) {
    if (r.bytes)
      memory.push_back(memoryJson(r, copyGBps));
    else
      optimizer.push_back(optimizerJson(r, copyGBps));
  }
  for (const AttentionResult &r : bench.attention)
    attention.push_back(attentionJson(r));
  for (const char *part : kParts)
    if (opts.runs(part))
      parts.push_back(std::string("\"") + part + "\"");

  std::string out = "{\n  \"machine\": " + machine + ",\n";
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "  \"reps\": %d, \"warmup\": %d,\n  \"copy\": {\"bytes\": "
                "%lld, \"bytes_moved\": %lld, \"ms_median\": %.4f, \"gbps\": "
                "%.1f, \"fraction_of_theoretical\": %.3f},\n",
                opts.reps, opts.warmup, (long long)opts.copyBytes,
                2 * (long long)opts.copyBytes, copyMs, copyGBps,
                copyGBps / theoreticalGBps);
  out += buf;
  std::string partList;
  for (size_t i = 0; i < parts.size(); ++i)
    partList += (i ? ", " : "") + parts[i];
  out += "  \"parts\": [" + partList + "],\n";
  out += "  \"kernels\": " + jsonArray(optimizer);
  if (opts.runs("attention"))
    out += ",\n  \"attention\": " + jsonArray(attention);
  if (opts.runs("memory"))
    out += ",\n  \"memory_kernels\": " + jsonArray(memory);
  out += "\n}\n";

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
