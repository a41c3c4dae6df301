//===- Calibrate.cpp - Per-rank numbers for the `cpu` cost-model preset ---===//
//
// Part of the zero-mlir project.
//
// The `cpu` hardware preset of the cost model (lib/Dialect/Zero/Analysis/
// CostModel.cpp) describes one rank. On this machine a rank gets one core
// (the training driver gives each of the N local ranks cores / N OpenMP
// threads), and small models run GEMMs far below the large-GEMM rate, so
// this program measures what one rank achieves on the kernels of the small
// models it trains (examples/mlp.mlir, examples/gpt2-tiny.mlir), through the
// runtime's own entry points, with one thread:
//
//   gemm        zrt_matmul f32 at the shapes of gpt2-tiny (256 tokens per
//               rank: forward, and the transposed backward products) and
//               the mlp, or at the shapes `--gemm-shapes` lists (a model's
//               own products, each as often as its step runs it): total
//               FLOPs / total time.
//   fma peak    independent vector FMAs on registers only: the core's
//               arithmetic ceiling, which no GEMM exceeds (best round).
//   attention   zrt_attention_forward and _backward at gpt2-tiny's
//               per-rank shapes, FLOPs as the cost model counts them.
//   activation  output elements per second of GELU, its gradient and the
//               layer-norm backward (compute-bound on one core).
//   memory      the runtime's streaming kernels at those sizes (bias add,
//               GELU and its gradient, layer norm, softmax, Adam over the
//               gpt2-tiny parameters), bytes as the cost model counts them
//               (operands + results; Adam 24 + 2 * 4 = 32 B per f32
//               parameter): total bytes / time.
//   overhead    one call of a tiny kernel (zrt_add of 64 elements).
//   link        with 2+ ranks: zrt_all_reduce, zrt_reduce_scatter and
//               zrt_all_gather busbw on the gpt2-tiny gradient size (4 MiB
//               of f32; Open MPI's non-blocking reduce-scatter runs slower
//               than its all-reduce here) and per-step latency of an
//               8-byte all-reduce, as the preset's alpha-beta ring model
//               uses them.
//
// Every number is the median of interleaved rounds, so that it carries the
// same background load as the step times it is compared with.
//
//   OMP_NUM_THREADS=1 mpirun -np 2 zrt-bench-calibrate [--rounds R]
//       [--json FILE] [--gemm-shapes M,N,K,TA,TB,COUNT[;...]]
//
//===----------------------------------------------------------------------===//

#include "BenchSupport.h"
#include "zero_rt/zrt.h"

#include <mpi.h>

#if defined(__AVX512F__) || defined(__FMA__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

using namespace zrt::bench;

namespace {

std::vector<float> filled(int64_t n, float scale = 0.01f) {
  std::vector<float> v(size_t(std::max<int64_t>(n, 1)));
  uint32_t s = 12345;
  for (float &x : v) {
    s = s * 1664525u + 1013904223u;
    x = scale * (float(int32_t(s >> 8) - (1 << 23)) / float(1 << 23));
  }
  return v;
}

struct Item {
  double amount; // FLOPs or bytes per call
  std::function<void()> run;
};

/// Sum of amounts over the median time of one pass over all items, per
/// round: a rate. Returns the median over rounds.
double measureRate(std::vector<Item> &items, int rounds, int reps) {
  for (Item &it : items)
    it.run(); // warm-up
  std::vector<double> rates;
  double amount = 0;
  for (Item &it : items)
    amount += it.amount;
  for (int r = 0; r < rounds; ++r) {
    double t0 = now();
    for (int k = 0; k < reps; ++k)
      for (Item &it : items)
        it.run();
    rates.push_back(amount * reps / (now() - t0));
  }
  return median(rates);
}

/// FLOP/s of independent FMAs on registers: twelve accumulators hide the
/// FMA latency on every x86 core, the widest vectors the build targets. A
/// ceiling: the best of the rounds, as any other process on the core only
/// lowers a round's rate.
double fmaPeak(int rounds) {
#if defined(__AVX512F__)
  using Vec = __m512;
  constexpr int kLanes = 16;
  auto splat = [](float x) { return _mm512_set1_ps(x); };
  auto fma = [](Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); };
  auto sum = [](Vec a) { return _mm512_reduce_add_ps(a); };
#elif defined(__FMA__)
  using Vec = __m256;
  constexpr int kLanes = 8;
  auto splat = [](float x) { return _mm256_set1_ps(x); };
  auto fma = [](Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); };
  auto sum = [](Vec a) {
    alignas(32) float l[8];
    _mm256_store_ps(l, a);
    return l[0] + l[1] + l[2] + l[3] + l[4] + l[5] + l[6] + l[7];
  };
#else
  using Vec = float;
  constexpr int kLanes = 1;
  auto splat = [](float x) { return x; };
  auto fma = [](Vec a, Vec b, Vec c) { return std::fma(a, b, c); };
  auto sum = [](Vec a) { return a; };
#endif
  constexpr int kAcc = 12;
  const int64_t iters = 4000000;
  std::vector<double> rates;
  volatile float sink = 0;
  for (int r = 0; r < 2 * rounds + 1; ++r) {
    Vec acc[kAcc];
    for (int i = 0; i < kAcc; ++i)
      acc[i] = splat(0.001f * float(i));
    Vec x = splat(0.9999f), y = splat(1e-5f);
    double t0 = now();
    for (int64_t it = 0; it < iters; ++it)
#pragma GCC unroll 12
      for (int i = 0; i < kAcc; ++i)
        acc[i] = fma(acc[i], x, y);
    double t = now() - t0;
    float s = 0;
    for (int i = 0; i < kAcc; ++i)
      s += sum(acc[i]);
    sink = sink + s;
    if (r > 0) // the first round warms the core's clock up
      rates.push_back(2.0 * kLanes * kAcc * double(iters) / t);
  }
  return *std::max_element(rates.begin(), rates.end());
}

struct Shape {
  int64_t m, n, k;
  int ta, tb;
  int64_t count = 1;
};

/// `M,N,K,TA,TB,COUNT[;...]`: the products of one step, each `COUNT` times;
/// false (after saying why on rank 0) if the text is not that.
bool parseShapes(const std::string &text, int rank,
                 std::vector<Shape> &shapes) {
  shapes.clear();
  size_t at = 0;
  while (at <= text.size()) {
    size_t end = text.find(';', at);
    if (end == std::string::npos)
      end = text.size();
    std::string item = text.substr(at, end - at);
    Shape s;
    long long m, n, k, count;
    int ta, tb, used = 0;
    if (std::sscanf(item.c_str(), "%lld,%lld,%lld,%d,%d,%lld%n", &m, &n, &k,
                    &ta, &tb, &count, &used) != 6 ||
        size_t(used) != item.size() || m <= 0 || n <= 0 || k <= 0 ||
        count <= 0 || (ta != 0 && ta != 1) || (tb != 0 && tb != 1)) {
      if (rank == 0)
        std::fprintf(stderr,
                     "zrt-bench-calibrate: --gemm-shapes: '%s' is not "
                     "M,N,K,TA,TB,COUNT (positive sizes and count, TA and TB "
                     "0 or 1)\n",
                     item.c_str());
      return false;
    }
    s.m = m, s.n = n, s.k = k, s.ta = ta, s.tb = tb, s.count = count;
    shapes.push_back(s);
    at = end + 1;
  }
  return true;
}

} // namespace

int main(int argc, char **argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  zrt_comm *comm = zrt_comm_world();
  int rank = zrt_comm_rank(comm), world = zrt_comm_size(comm);
  int rounds = 9;
  std::string json, gemmShapes;
  // Every rank reads the same arguments, so all of them stop together.
  auto usage = [&](const char *what, const std::string &arg) {
    if (rank == 0)
      std::fprintf(stderr,
                   "zrt-bench-calibrate: %s '%s' (expected --rounds R >= 1, "
                   "--json FILE, --gemm-shapes M,N,K,TA,TB,COUNT[;...])\n",
                   what, arg.c_str());
    zrt_finalize();
    MPI_Finalize();
    return 2;
  };
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--rounds" && i + 1 < argc) {
      char *end = nullptr;
      long r = std::strtol(argv[++i], &end, 10);
      if (*argv[i] == '\0' || *end != '\0' || r < 1 || r > 1000)
        return usage("--rounds needs a count from 1 to 1000, not", argv[i]);
      rounds = int(r);
    } else if (a == "--json" && i + 1 < argc)
      json = argv[++i];
    else if (a == "--gemm-shapes" && i + 1 < argc)
      gemmShapes = argv[++i];
    else
      return usage("unknown or incomplete argument", a);
  }
  zrt_set_num_threads(1);

  // --- GEMM -----------------------------------------------------------------
  const int64_t tok = 256, h = 128;
  const std::vector<Shape> smallModels = {
      // gpt2-tiny forward (qkv, proj, fc, fc-proj, lm head)
      {tok, 3 * h, h, 0, 0},
      {tok, h, h, 0, 0},
      {tok, 4 * h, h, 0, 0},
      {tok, h, 4 * h, 0, 0},
      {tok, 256, h, 0, 1},
      // backward: dX = dY W^T, dW = X^T dY
      {tok, h, 3 * h, 0, 1},
      {h, 3 * h, tok, 1, 0},
      {tok, h, 4 * h, 0, 1},
      {4 * h, h, tok, 1, 0},
      // mlp, 32 rows per rank at 2 ranks
      {32, 256, 784, 0, 0},
      {784, 256, 32, 1, 0},
      {32, 256, 256, 0, 0}};
  std::vector<Shape> shapes = smallModels;
  if (!gemmShapes.empty() && !parseShapes(gemmShapes, rank, shapes)) {
    zrt_finalize();
    MPI_Finalize();
    return 2;
  }
  std::vector<std::vector<float>> keep;
  auto products = [&](const std::vector<Shape> &list) {
    std::vector<Item> items;
    for (const Shape &s : list) {
      keep.push_back(filled(s.m * s.k));
      float *a = keep.back().data();
      keep.push_back(filled(s.k * s.n));
      float *b = keep.back().data();
      keep.push_back(filled(s.m * s.n));
      float *c = keep.back().data();
      items.push_back({2.0 * s.m * s.n * s.k * s.count, [=] {
                         for (int64_t i = 0; i < s.count; ++i)
                           zrt_matmul(ZRT_F32, a, b, c, 1, s.m, s.n, s.k, s.ta,
                                      s.tb, 0, s.k);
                       }});
    }
    return items;
  };
  std::vector<Item> gemms = products(shapes);
  // The compute before the latency probe below: gpt2-tiny's first three
  // forward products, whatever --gemm-shapes lists.
  std::vector<Item> beforeSync =
      products({smallModels.begin(), smallModels.begin() + 3});
  // A model's own list is one step's products already: fewer repetitions.
  double gemmFlops = measureRate(gemms, rounds, gemmShapes.empty() ? 20 : 2);
  double fmaPeakFlops = fmaPeak(rounds);
  if (std::getenv("ZRT_CALIBRATE_VERBOSE") && rank == 0)
    for (size_t i = 0; i < gemms.size(); ++i) {
      std::vector<Item> one = {gemms[i]};
      std::printf("  gemm %lldx%lldx%lld ta=%d tb=%d: %.1f GFLOP/s\n",
                  (long long)shapes[i].m, (long long)shapes[i].n,
                  (long long)shapes[i].k, shapes[i].ta, shapes[i].tb,
                  measureRate(one, 3, 20) / 1e9);
    }

  // --- fused attention at gpt2-tiny's per-rank shapes (4 x 4 heads x 64
  // tokens x 32, causal), FLOPs as the cost model counts them: QK^T and PV
  // halved by the mask, 2.5x that for the backward.
  std::vector<Item> attention;
  const int64_t ab = 4, ah = 4, at = 64, ad = 32;
  const int64_t aelems = ab * ah * at * ad;
  auto q = filled(aelems, 0.5f), kk = filled(aelems, 0.5f),
       vv = filled(aelems, 0.5f), o = filled(aelems), dO = filled(aelems),
       dq = filled(aelems), dk = filled(aelems), dv = filled(aelems);
  const double attFlops = 4.0 * double(aelems) * double(at) / 2;
  // Causal, the default scale, no window, softcap, ALiBi, sinks or segments.
  const zrt_attention_desc desc = {
      ZRT_F32, 1, ab, ah, ah, at, ad, 0.0, 0, 0.0, nullptr, nullptr, nullptr};
  attention.push_back({attFlops, [&] {
                         zrt_attention_forward(&desc, q.data(), kk.data(),
                                               vv.data(), o.data());
                       }});
  attention.push_back({2.5 * attFlops, [&] {
                         zrt_attention_backward(
                             &desc, q.data(), kk.data(), vv.data(), o.data(),
                             dO.data(), dq.data(), dk.data(), dv.data());
                       }});
  double attentionFlops = measureRate(attention, rounds, 20);

  // --- streaming kernels
  // ------------------------------------------------------
  std::vector<Item> streams;
  const int64_t act = tok * 4 * h; // [256, 512]
  auto x = filled(act), y = filled(act), dy = filled(act), bias = filled(4 * h);
  auto lnx = filled(tok * h), lny = filled(tok * h), lnw = filled(h, 1.0f),
       lnb = filled(h);
  auto att = filled(4 * 64 * 64 * 2); // softmax rows of a head block
  auto att2 = filled(att.size());
  streams.push_back(
      {4.0 * (2 * act + 4 * h),
       [&] { zrt_add(ZRT_F32, x.data(), bias.data(), y.data(), act, 4 * h); }});
  streams.push_back(
      {4.0 * 2 * act, [&] { zrt_gelu(ZRT_F32, x.data(), y.data(), act); }});
  streams.push_back(
      {4.0 * 3 * act,
       [&] { zrt_gelu_grad(ZRT_F32, x.data(), dy.data(), y.data(), act); }});
  streams.push_back({4.0 * (2 * tok * h + 2 * h), [&] {
                       zrt_layer_norm(ZRT_F32, lnx.data(), lnw.data(),
                                      lnb.data(), lny.data(), tok, h, 1e-5);
                     }});
  streams.push_back({4.0 * 2 * att.size(), [&] {
                       zrt_softmax(ZRT_F32, att.data(), att2.data(),
                                   int64_t(att.size()) / 64, 64);
                     }});
  // Adam over a rank's half of gpt2-tiny's ~1.0M parameters (f32: the
  // cost model counts 24 + 2 * 4 bytes per parameter).
  const int64_t params = 1 << 19;
  auto g = filled(params), w = filled(params), m = filled(params, 0),
       v = filled(params, 0);
  float stats[2] = {0, 1};
  streams.push_back({32.0 * params, [&] {
                       adamwStep(ZRT_F32, g.data(), w.data(), m.data(),
                                 v.data(), w.data(), params, 1, stats);
                     }});
  double memoryBandwidth = measureRate(streams, rounds, 20);

  // --- compute-bound pointwise and normalization kernels: output elements
  // per second of GELU, its gradient and the layer-norm backward (a tanh
  // polynomial, or row statistics, per element).
  std::vector<Item> activations;
  auto lndx = filled(tok * h), lndw = filled(h), lndb = filled(h);
  activations.push_back(
      {double(act), [&] { zrt_gelu(ZRT_F32, x.data(), y.data(), act); }});
  activations.push_back(
      {double(act),
       [&] { zrt_gelu_grad(ZRT_F32, x.data(), dy.data(), y.data(), act); }});
  activations.push_back({double(tok * h), [&] {
                           zrt_layer_norm_grad(ZRT_F32, lnx.data(), lnw.data(),
                                               lny.data(), lndx.data(),
                                               lndw.data(), lndb.data(), tok, h,
                                               1e-5);
                         }});
  double activationElements = measureRate(activations, rounds, 20);

  // --- per-kernel overhead
  // ------------------------------------------------------
  std::vector<double> overheads;
  {
    auto a = filled(64), b = filled(64), c = filled(64);
    const int calls = 20000;
    for (int r = 0; r < rounds; ++r) {
      double t0 = now();
      for (int i = 0; i < calls; ++i)
        zrt_add(ZRT_F32, a.data(), b.data(), c.data(), 64, 64);
      overheads.push_back((now() - t0) / calls);
    }
  }
  double kernelOverhead = median(overheads);

  // --- link
  // ---------------------------------------------------------------------
  double linkBandwidth = 0, latency = 0, syncLatency = 0, syncCompute = 0;
  double reduceScatterBandwidth = 0, allGatherBandwidth = 0;
  if (world > 1) {
    const int64_t count = int64_t(1) << 20; // 4 MiB of f32
    auto in = filled(count), out = filled(count);
    enum { AllReduce, ReduceScatter, AllGather };
    // Slowest rank's time per call of a collective over `n` elements of the
    // full array (split over the ranks for reduce-scatter and all-gather).
    auto timed = [&](int kind, int64_t n, int calls) {
      int64_t part = std::max<int64_t>(1, n / world);
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      for (int i = 0; i < calls; ++i) {
        int64_t token =
            kind == AllReduce ? zrt_all_reduce(comm, ZRT_F32, ZRT_SUM,
                                               in.data(), out.data(), n)
            : kind == ReduceScatter
                ? zrt_reduce_scatter(comm, ZRT_F32, in.data(), out.data(), part)
                : zrt_all_gather(comm, ZRT_F32, in.data(), out.data(), part);
        zrt_wait(token);
      }
      double t = (MPI_Wtime() - t0) / calls, slowest;
      MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      return slowest;
    };
    for (int kind : {AllReduce, ReduceScatter, AllGather}) {
      timed(kind, count, 2);
      timed(kind, 2 * world, 100);
    }
    // Ring passes: all-reduce 2, reduce-scatter and all-gather 1.
    std::vector<double> bw[3], lat;
    for (int r = 0; r < rounds; ++r) {
      for (int kind : {AllReduce, ReduceScatter, AllGather}) {
        double passes = kind == AllReduce ? 2.0 : 1.0;
        double tBig = timed(kind, count, 5);
        double tSmall = timed(kind, 2 * world, 200);
        if (kind == AllReduce)
          lat.push_back(tSmall / (2.0 * (world - 1)));
        // T(B) = p(n-1) alpha + p(n-1)/n B / busbw
        double beta = tBig - tSmall; // minus the p(n-1) latency steps
        bw[kind].push_back(passes * (world - 1) / world * 4.0 * count /
                           std::max(beta, 1e-9));
      }
    }
    linkBandwidth = median(bw[AllReduce]);
    reduceScatterBandwidth = median(bw[ReduceScatter]);
    allGatherBandwidth = median(bw[AllGather]);
    latency = median(lat);
    // Between kernels, ranks that share cores with each other and with
    // other processes are rarely in step: a blocking collective issued
    // after compute also waits for the slowest rank. Time an 8-byte
    // all-reduce after ~1 ms of GEMMs, as a step issues them.
    std::vector<double> sync, between;
    for (int r = 0; r < rounds; ++r) {
      MPI_Barrier(MPI_COMM_WORLD);
      double total = 0, computed = 0;
      const int iters = 50;
      for (int i = 0; i < iters; ++i) {
        double c0 = MPI_Wtime();
        for (Item &it : beforeSync)
          it.run();
        computed += MPI_Wtime() - c0;
        double t0 = MPI_Wtime();
        zrt_wait(
            zrt_all_reduce(comm, ZRT_F32, ZRT_SUM, in.data(), out.data(), 2));
        total += MPI_Wtime() - t0;
      }
      double t = total / iters, mean;
      MPI_Allreduce(&t, &mean, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      sync.push_back(mean / world / (2.0 * (world - 1)));
      between.push_back(computed / iters);
    }
    syncLatency = median(sync);
    syncCompute = median(between);
  }

  if (rank == 0) {
    std::printf("one rank, 1 thread, %d ranks, median of %d rounds\n", world,
                rounds);
    std::printf("  gemmFlops       %8.1f GFLOP/s (zrt_matmul f32, %s)\n",
                gemmFlops / 1e9,
                gemmShapes.empty() ? "small-model shapes"
                                   : "the --gemm-shapes products");
    std::printf("  fmaPeak         %8.1f GFLOP/s (register-only vector FMAs)\n",
                fmaPeakFlops / 1e9);
    std::printf(
        "  attentionFlops  %8.1f GFLOP/s (zrt_attention_forward and its "
        "gradient f32, gpt2-tiny shapes)\n",
        attentionFlops / 1e9);
    std::printf("  activation      %8.1f M elements/s (gelu, gelu_grad, "
                "layer_norm_grad)\n",
                activationElements / 1e6);
    std::printf("  memoryBandwidth %8.2f GB/s (streaming kernels, model's "
                "byte count)\n",
                memoryBandwidth / 1e9);
    std::printf("  kernelOverhead  %8.3f us (zrt_add of 64 elements)\n",
                kernelOverhead * 1e6);
    if (world > 1)
      std::printf("  linkBandwidth   %8.3f GB/s (zrt_all_reduce 4 MiB busbw)\n"
                  "  reduceScatter   %8.3f GB/s (zrt_reduce_scatter 4 MiB "
                  "busbw)\n"
                  "  allGather       %8.3f GB/s (zrt_all_gather 4 MiB busbw)\n"
                  "  latency         %8.2f us per ring step (8-byte "
                  "all-reduce / 2(n-1))\n"
                  "  syncLatency     %8.2f us per ring step (the same after "
                  "%.2f ms of compute, mean over ranks)\n",
                  linkBandwidth / 1e9, reduceScatterBandwidth / 1e9,
                  allGatherBandwidth / 1e9, latency * 1e6, syncLatency * 1e6,
                  syncCompute * 1e3);
    if (!json.empty()) {
      FILE *f = std::fopen(json.c_str(), "w");
      if (f) {
        std::fprintf(f,
                     "{\n  \"ranks\": %d,\n  \"rounds\": %d,\n"
                     "  \"gemm_flops\": %.6g,\n  \"gemm_shapes\": \"%s\",\n"
                     "  \"fma_peak_flops\": %.6g,\n"
                     "  \"attention_flops\": %.6g,\n"
                     "  \"activation_elements\": %.6g,\n"
                     "  \"memory_bandwidth\": %.6g,\n"
                     "  \"kernel_overhead_s\": %.6g,\n"
                     "  \"link_bandwidth\": %.6g,\n"
                     "  \"reduce_scatter_bandwidth\": %.6g,\n"
                     "  \"all_gather_bandwidth\": %.6g,\n"
                     "  \"collective_latency_s\": %.6g,\n"
                     "  \"sync_latency_s\": %.6g,\n"
                     "  \"sync_compute_s\": %.6g\n}\n",
                     world, rounds, gemmFlops,
                     gemmShapes.empty() ? "default" : gemmShapes.c_str(),
                     fmaPeakFlops, attentionFlops, activationElements,
                     memoryBandwidth, kernelOverhead, linkBandwidth,
                     reduceScatterBandwidth, allGatherBandwidth, latency,
                     syncLatency, syncCompute);
        std::fclose(f);
      }
    }
  }
  zrt_finalize();
  MPI_Finalize();
  return 0;
}
