//===- Bench.cpp - Micro-benchmarks of the runtime kernels ----------------===//
//
// Part of the zero-mlir project.
//
// Shapes are those of a GPT-2 small step on one rank (batch 8, sequence 256,
// width 768). Bandwidth-bound kernels report bytes/s, to compare with the
// parallel memcpy of the same machine (BM_Copy); compute-bound ones report
// FLOP/s as items/s.
//
//===----------------------------------------------------------------------===//

#include "BenchSupport.h"
#include "zero_rt/zrt.h"

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace {

/// An initialized buffer of n elements of a dtype, values in [-1, 1).
std::vector<uint8_t> randomBytes(int32_t dtype, int64_t n) {
  std::vector<float> f(static_cast<size_t>(n));
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (float &x : f)
    x = dist(rng);
  std::vector<uint8_t> out(static_cast<size_t>(n * zrt_dtype_size(dtype)));
  zrt_cast(ZRT_F32, f.data(), dtype, out.data(), n);
  return out;
}

/// Wall-clock milliseconds, as every benchmark here reports.
void wallMs(benchmark::internal::Benchmark *b) {
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}

/// f32 and bf16.
void dtypes(benchmark::internal::Benchmark *b) {
  b->Arg(ZRT_F32)->Arg(ZRT_BF16);
  wallMs(b);
}

/// f32, bf16 and f16.
void allDtypes(benchmark::internal::Benchmark *b) {
  b->Arg(ZRT_F32)->Arg(ZRT_BF16)->Arg(ZRT_F16);
  wallMs(b);
}

/// The forward (0) then the backward (1), each in f32 and bf16.
void passes(benchmark::internal::Benchmark *b) {
  for (int backward : {0, 1})
    for (int32_t dtype : {ZRT_F32, ZRT_BF16})
      b->Args({dtype, backward});
  wallMs(b);
}

void BM_Copy(benchmark::State &state) {
  int64_t bytes = int64_t(1) << 28;
  std::vector<uint8_t> a(static_cast<size_t>(bytes), 1), b(a.size());
  for (auto _ : state)
    zrt_copy(b.data(), a.data(), bytes);
  state.SetBytesProcessed(state.iterations() * 2 * bytes);
}
BENCHMARK(BM_Copy)->Apply(wallMs);

void BM_Adam(benchmark::State &state) {
  int32_t dtype = int32_t(state.range(0));
  int64_t n = int64_t(1) << 24;
  auto grad = randomBytes(dtype, n), param = randomBytes(dtype, n);
  std::vector<float> master(static_cast<size_t>(n), 0.5f), m(master.size()),
      v(master.size());
  float stats[2] = {0, 1};
  for (auto _ : state)
    zrt::bench::adamwStep(dtype, grad.data(), master.data(), m.data(), v.data(),
                          param.data(), n, 1, stats);
  int64_t es = zrt_dtype_size(dtype);
  state.SetBytesProcessed(state.iterations() * n * (2 * es + 24));
}
BENCHMARK(BM_Adam)->Apply(allDtypes);

void BM_CheckOverflow(benchmark::State &state) {
  int32_t dtype = int32_t(state.range(0));
  int64_t n = int64_t(1) << 25;
  auto grad = randomBytes(dtype, n);
  const void *ptr = grad.data();
  float stats[2];
  for (auto _ : state)
    zrt_check_overflow(dtype, &ptr, &n, 1, 1.0f, stats);
  state.SetBytesProcessed(state.iterations() * n * zrt_dtype_size(dtype));
}
BENCHMARK(BM_CheckOverflow)->Apply(allDtypes);

void BM_CastToF16(benchmark::State &state) {
  int64_t n = int64_t(1) << 25;
  auto src = randomBytes(ZRT_F32, n), dst = randomBytes(ZRT_F16, n);
  for (auto _ : state)
    zrt_cast(ZRT_F32, src.data(), ZRT_F16, dst.data(), n);
  state.SetBytesProcessed(state.iterations() * n * 6);
}
BENCHMARK(BM_CastToF16)->Apply(wallMs);

void BM_Matmul(benchmark::State &state) {
  int32_t dtype = int32_t(state.range(0));
  int64_t m = 8 * 256, k = 768, n = 2304; // the QKV projection
  auto a = randomBytes(dtype, m * k), b = randomBytes(dtype, k * n),
       c = randomBytes(dtype, m * n);
  for (auto _ : state)
    zrt_matmul(dtype, a.data(), b.data(), c.data(), 1, m, n, k, 0, 0, 1, k);
  state.SetItemsProcessed(state.iterations() * 2 * m * n * k);
}
BENCHMARK(BM_Matmul)->Apply(dtypes);

/// Times the forward or the backward of `desc` on random tensors.
void timeAttention(benchmark::State &state, const zrt_attention_desc &desc,
                   bool backward) {
  int64_t n = desc.batch * desc.heads * desc.seq * desc.head_dim,
          nkv = desc.batch * desc.kv_heads * desc.seq * desc.head_dim;
  int32_t dtype = desc.dtype;
  auto q = randomBytes(dtype, n), k = randomBytes(dtype, nkv),
       v = randomBytes(dtype, nkv), o = randomBytes(dtype, n),
       g = randomBytes(dtype, n), dq = randomBytes(dtype, n),
       dk = randomBytes(dtype, nkv), dv = randomBytes(dtype, nkv);
  zrt_attention_forward(&desc, q.data(), k.data(), v.data(), o.data());
  for (auto _ : state) {
    if (backward)
      zrt_attention_backward(&desc, q.data(), k.data(), v.data(), o.data(),
                             g.data(), dq.data(), dk.data(), dv.data());
    else
      zrt_attention_forward(&desc, q.data(), k.data(), v.data(), o.data());
  }
}

void BM_Attention(benchmark::State &state) {
  int32_t dtype = int32_t(state.range(0));
  bool backward = state.range(1);
  // Key/value heads: 12 is multi-head attention, 4 groups of 3 query heads.
  int64_t b = 8, h = 12, kvh = state.range(2), t = 256, d = 64;
  // Causal, the default scale, no window, softcap, ALiBi, sinks or segments.
  zrt_attention_desc desc = {dtype, 1, b,   h,       kvh,     t,      d,
                             0.0,   0, 0.0, nullptr, nullptr, nullptr};
  timeAttention(state, desc, backward);
  // Causal: half of the 2 (forward) or 5 (backward) t x t x d products.
  state.SetItemsProcessed(state.iterations() * (backward ? 5 : 2) * b * h * t *
                          t * d);
}
BENCHMARK(BM_Attention)
    ->Args({ZRT_F32, 0, 12})
    ->Args({ZRT_BF16, 0, 12})
    ->Args({ZRT_F32, 1, 12})
    ->Args({ZRT_BF16, 1, 12})
    ->Args({ZRT_BF16, 0, 4})
    ->Args({ZRT_BF16, 1, 4})
    ->Apply(wallMs);

/// Packed rows: 2048 tokens of documents of one length (the argument), the
/// work falling with the documents' squared lengths (items: the causal
/// score products that remain).
void BM_AttentionPacked(benchmark::State &state) {
  int32_t dtype = int32_t(state.range(0));
  bool backward = state.range(1);
  int64_t doc = state.range(2);
  int64_t b = 1, h = 12, t = 2048, d = 64;
  std::vector<int32_t> segments(static_cast<size_t>(t));
  for (int64_t i = 0; i < t; ++i)
    segments[static_cast<size_t>(i)] = int32_t(i / doc);
  zrt_attention_desc desc = {
      dtype, 1, b, h, h, t, d, 0.0, 0, 0.0, nullptr, nullptr, segments.data()};
  timeAttention(state, desc, backward);
  state.SetItemsProcessed(state.iterations() * (backward ? 5 : 2) * b * h *
                          (t / doc) * doc * doc * d);
}
BENCHMARK(BM_AttentionPacked)
    ->Args({ZRT_F32, 0, 2048})
    ->Args({ZRT_F32, 0, 512})
    ->Args({ZRT_F32, 0, 128})
    ->Args({ZRT_F32, 1, 2048})
    ->Args({ZRT_F32, 1, 512})
    ->Args({ZRT_F32, 1, 128})
    ->Apply(wallMs);

void BM_LayerNorm(benchmark::State &state) {
  int32_t dtype = int32_t(state.range(0));
  bool backward = state.range(1);
  int64_t rows = 8 * 256, cols = 768, n = rows * cols;
  auto x = randomBytes(dtype, n), w = randomBytes(dtype, cols),
       b = randomBytes(dtype, cols), y = randomBytes(dtype, n),
       dw = randomBytes(dtype, cols), db = randomBytes(dtype, cols);
  for (auto _ : state) {
    if (backward)
      zrt_layer_norm_grad(dtype, x.data(), w.data(), y.data(), x.data(),
                          dw.data(), db.data(), rows, cols, 1e-5);
    else
      zrt_layer_norm(dtype, x.data(), w.data(), b.data(), y.data(), rows, cols,
                     1e-5);
  }
  state.SetBytesProcessed(state.iterations() * n * zrt_dtype_size(dtype) *
                          (backward ? 3 : 2));
}
BENCHMARK(BM_LayerNorm)->Apply(passes);

/// At a Llama-7B width (4096).
void BM_RmsNorm(benchmark::State &state) {
  int32_t dtype = int32_t(state.range(0));
  bool backward = state.range(1);
  int64_t rows = 8 * 256, cols = 4096, n = rows * cols;
  auto x = randomBytes(dtype, n), w = randomBytes(dtype, cols),
       y = randomBytes(dtype, n), dx = randomBytes(dtype, n),
       dw = randomBytes(dtype, cols);
  for (auto _ : state) {
    if (backward)
      zrt_rms_norm_grad(dtype, x.data(), w.data(), y.data(), dx.data(),
                        dw.data(), rows, cols, 1e-5);
    else
      zrt_rms_norm(dtype, x.data(), w.data(), y.data(), rows, cols, 1e-5);
  }
  state.SetBytesProcessed(state.iterations() * n * zrt_dtype_size(dtype) *
                          (backward ? 3 : 2));
}
BENCHMARK(BM_RmsNorm)->Apply(passes);

void BM_Gelu(benchmark::State &state) {
  int32_t dtype = int32_t(state.range(0));
  int64_t n = 8 * 256 * 3072;
  auto x = randomBytes(dtype, n), y = randomBytes(dtype, n);
  for (auto _ : state)
    zrt_gelu(dtype, x.data(), y.data(), n);
  state.SetBytesProcessed(state.iterations() * n * 2 * zrt_dtype_size(dtype));
}
BENCHMARK(BM_Gelu)->Apply(dtypes);

void BM_CrossEntropyGrad(benchmark::State &state) {
  int32_t dtype = int32_t(state.range(0));
  int64_t rows = 256, classes = 50257, n = rows * classes;
  auto x = randomBytes(dtype, n), dx = randomBytes(dtype, n);
  std::vector<int32_t> labels(static_cast<size_t>(rows), 7);
  float dloss = 1;
  for (auto _ : state)
    zrt_softmax_cross_entropy_grad(dtype, x.data(), ZRT_I32, labels.data(),
                                   &dloss, dx.data(), rows, classes, classes, 0,
                                   0);
  state.SetBytesProcessed(state.iterations() * n * 2 * zrt_dtype_size(dtype));
}
BENCHMARK(BM_CrossEntropyGrad)->Apply(dtypes);

void BM_EmbeddingGrad(benchmark::State &state) {
  int32_t dtype = int32_t(state.range(0));
  int64_t ids = 8 * 256, vocab = 50257, dim = 768;
  auto dy = randomBytes(dtype, ids * dim),
       dtable = randomBytes(dtype, vocab * dim);
  std::vector<int32_t> tokens(static_cast<size_t>(ids));
  for (int64_t i = 0; i < ids; ++i)
    tokens[i] = int32_t((i * 7919) % vocab);
  for (auto _ : state)
    zrt_embedding_grad(dtype, dy.data(), ZRT_I32, tokens.data(), dtable.data(),
                       ids, vocab, dim, -1);
  state.SetBytesProcessed(state.iterations() * (ids + vocab) * dim *
                          zrt_dtype_size(dtype));
}
BENCHMARK(BM_EmbeddingGrad)->Apply(dtypes);

} // namespace

BENCHMARK_MAIN();
