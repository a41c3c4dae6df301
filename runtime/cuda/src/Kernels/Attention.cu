//===- Attention.cu - Fused scaled dot-product attention on the device ----===//
//
// Part of the zero-mlir project.
//
// Flash attention: scores and probabilities live only for one tile, the
// forward keeps a running max and sum per row (online softmax), and nothing
// of size seq x seq is ever stored. Two implementations, chosen per call by
// dtype and head dim; both are deterministic.
//
// This file checks the arguments and picks the implementation per call:
// tensor cores for 16-bit inputs with head_dim <= 128 (AttentionTc*.cu),
// CUDA cores otherwise (AttentionSimt.cu).
//
// Scores are kept in the log2 domain (scale * log2(e) folded in) so that
// every exponential is one exp2. The backward stores that log2-domain
// log-sum-exp and delta = rowsum(dO * O) in the scratch zero_rt/scratch.h
// plans, then recomputes P = exp2(s - lse): dK and dV per key tile over the
// query tiles that see it, dQ per query tile over its key tiles. Every
// output element has one owner, so there are no atomics and results are
// deterministic. The forward allocates nothing.
//
// A descriptor's sliding window, soft-capping and ALiBi run on CUDA
// cores only (AttentionSimt.cu): the tensor-core kernels take none of them.
// The CUDA-core kernels compute in fp32 whatever setAttentionSplitProbs
// says; it chooses how the tensor-core kernels multiply P and dS.
//
// Grouped-query attention: query head h (of batch * heads) reads key/value
// head h / group, group = heads / kv_heads. The dK/dV kernels' grid covers
// the key tiles of the key/value heads, and each block walks the query
// tiles of its group's query heads in order, one after the other: a
// group's sum keeps one owner and a fixed order (no atomics, no scratch),
// and with group 1 the walk is the multi-head one.
//
//===----------------------------------------------------------------------===//

#include "Kernels/Attention.cuh"
#include "Kernels/CudaKernels.h"

#include "zero_rt/scratch.h"

#include <climits>
#include <cmath>
#include <initializer_list>
#include <type_traits>

using namespace zrt;
using namespace zrt::cuda;
using namespace zrt::cuda::attn;

namespace {
bool splitProbs = true;
} // namespace

void cuda::setAttentionSplitProbs(bool split) { splitProbs = split; }
bool cuda::attentionSplitProbs() { return splitProbs; }

namespace {

constexpr double kLog2e = 1.4426950408889634;

/// delta[row] = dot(o[row], dO[row]) in fp32, a warp per row.
template <typename T>
__global__ void __launch_bounds__(256)
    deltaKernel(const T *__restrict__ o, const T *__restrict__ dO,
                float *__restrict__ delta, int64_t rows, int dim) {
  const int laneId = threadIdx.x & 31;
  const int64_t warps = (int64_t(gridDim.x) * blockDim.x) >> 5;
  for (int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
       row < rows; row += warps) {
    const T *a = o + row * dim, *b = dO + row * dim;
    float sum = 0.0f;
    for (int d = laneId; d < dim; d += 32)
      sum = fmaf(toF32(a[d]), toF32(b[d]), sum);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1)
      sum += __shfl_xor_sync(0xffffffffu, sum, off);
    if (laneId == 0)
      delta[row] = sum;
  }
}

bool aligned4(const void *p, size_t elem) {
  return reinterpret_cast<uintptr_t>(p) % (4 * elem) == 0;
}

/// The kernels' view of the problem; `ptrs` are every tensor they access.
Shape makeShape(const char *kernel, const Attn &a, size_t elem,
                std::initializer_list<const void *> ptrs) {
  Shape s;
  s.seq = a.seq;
  s.group = int(a.group);
  s.dim = int(a.dim);
  s.tiles = ceilDiv(a.seq, kRowTile);
  s.causal = a.causal;
  s.scale = a.scale;
  s.scaleLog2 = float(double(a.scale) * kLog2e);
  s.window = a.window;
  s.softcap = a.softcap;
  s.capInv = a.softcap ? 1.0f / a.softcap : 0.0f;
  s.capLog2 = float(double(a.softcap) * kLog2e);
  s.alibiHeads = 0;
  if (a.alibi) {
    if (a.alibiHeads > kMaxAlibiHeads)
      fatal("%s: ALiBi over %lld heads exceeds the supported %d", kernel,
            (long long)a.alibiHeads, kMaxAlibiHeads);
    s.alibiHeads = int(a.alibiHeads);
    for (int h = 0; h < s.alibiHeads; ++h)
      s.alibiLog2[h] = float(double(a.alibi[h]) * kLog2e);
  }
  s.segments = nullptr;
  s.headsPerBatch = s.kvHeadsPerBatch = 1;
  s.splitProbs = attentionSplitProbs();
  s.vec = a.dim % 4 == 0;
  s.vec8 = a.dim % 8 == 0;
  for (const void *p : ptrs) {
    s.vec = s.vec && aligned4(p, elem);
    s.vec8 = s.vec8 && reinterpret_cast<uintptr_t>(p) % 16 == 0;
  }
  if (a.heads > INT_MAX / s.tiles)
    fatal("%s: batch * heads * ceil(seq / %d) exceeds the CUDA grid", kernel,
          kRowTile);
  return s;
}

/// The tensor-core chunk for `a` (tcChunk), 0 with a window, softcap,
/// ALiBi or documents.
int tcChunkFor(const Attn &a, const Shape &s, int dim) {
  return a.window || a.softcap || a.alibi || s.segments ? 0 : tcChunk(dim);
}

/// `s` with the documents of `d` (the CUDA-core kernels mask by them and
/// skip the blocks they hide).
void setDocuments(Shape &s, const zrt_attention_desc *d) {
  s.segments = d ? d->segments : nullptr;
  if (s.segments) {
    s.headsPerBatch = d->heads > 0 ? d->heads : 1;
    s.kvHeadsPerBatch = d->kv_heads > 0 ? d->kv_heads : 1;
  }
}

/// The forward of the checked problem `a`; `name` is the ABI kernel's.
void runForward(const char *name, const Attn &a, int32_t dtype, const void *q,
                const void *k, const void *v, void *o,
                const zrt_attention_desc *d) {
  if (a.heads == 0 || a.seq == 0 || a.dim == 0)
    return;
  dispatch(dtype, name, [&](auto tag) {
    using T = decltype(tag);
    Shape s = makeShape(name, a, sizeof(T), {q, k, v, o});
    setDocuments(s, d);
    const T *qv = static_cast<const T *>(q), *kv = static_cast<const T *>(k),
            *vv = static_cast<const T *>(v);
    T *ov = static_cast<T *>(o);
    if constexpr (!std::is_same_v<T, float>) {
      if (int chunk = tcChunkFor(a, s, s.dim)) {
        tcForward<false>(a, s, chunk, qv, kv, vv, ov, nullptr);
        return;
      }
    }
    simtForward<false>(a, s, qv, kv, vv, ov, nullptr);
  });
}

void runGrads(const char *name, const Attn &a, int32_t dtype, const void *q,
              const void *k, const void *v, const void *o, const void *dO,
              void *dq, void *dk, void *dv, int64_t batch, int64_t heads,
              int64_t seq, int64_t headDim, const zrt_attention_desc *d) {
  if (a.heads == 0 || a.seq == 0 || a.dim == 0)
    return;
  dispatch(dtype, name, [&](auto tag) {
    using T = decltype(tag);
    Shape s = makeShape(name, a, sizeof(T), {q, k, v, dO, dq, dk, dv});
    setDocuments(s, d);
    DeviceScratch scratch(
        zrt_scratch_attention_grad(batch, heads, seq, headDim));
    float *lse = scratch.as<float>();
    float *delta = lse + a.heads * a.seq;
    const T *qv = static_cast<const T *>(q), *kv = static_cast<const T *>(k),
            *vv = static_cast<const T *>(v), *ov = static_cast<const T *>(o),
            *gv = static_cast<const T *>(dO);
    int64_t rows = a.heads * a.seq;
    deltaKernel<T><<<gridFor(rows * 32), 256, 0, computeStream()>>>(
        ov, gv, delta, rows, s.dim);
    checkLaunch("attention_grad (delta)");
    T *dqv = static_cast<T *>(dq), *dkv = static_cast<T *>(dk),
      *dvv = static_cast<T *>(dv);
    if constexpr (!std::is_same_v<T, float>) {
      if (int chunk = tcChunkFor(a, s, s.dim)) {
        tcGrads(a, s, chunk, qv, kv, vv, gv, lse, delta, dqv, dkv, dvv);
        return;
      }
    }
    simtForward<true>(a, s, qv, kv, vv, static_cast<T *>(nullptr), lse);
    simtGrads(a, s, qv, kv, vv, gv, lse, delta, dqv, dkv, dvv);
  });
}

} // namespace

int attn::maxSharedPerBlock() {
  static const int bytes = [] {
    computeStream(); // selects the device
    int device = 0, value = 0;
    ZRT_CUDA_CHECK(cudaGetDevice(&device));
    ZRT_CUDA_CHECK(cudaDeviceGetAttribute(
        &value, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    return value;
  }();
  return bytes;
}

//===----------------------------------------------------------------------===//
// Attention sinks (gpt-oss)
//===----------------------------------------------------------------------===//
//
// One learned logit per query head joins each row's softmax denominator
// without a value. Plain f32 SIMT kernels, one thread per query row, that
// recompute the scores rather than keep them (no scratch), as the CPU's.

namespace {

__device__ inline int64_t sinkThread() {
  return int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline int64_t sinkThreads() {
  return int64_t(gridDim.x) * blockDim.x;
}

struct SinkRows {
  const float *q, *k, *v, *sinks;
  int64_t rows; // batch * heads * seq
  int64_t heads, group, seq, dim, window;
  bool causal;
  float scale;

  __device__ int64_t first(int64_t i) const {
    return window > 0 && i - window + 1 > 0 ? i - window + 1 : 0;
  }
  __device__ int64_t last(int64_t i) const { return causal ? i : seq - 1; }
  __device__ const float *key(const float *base, int64_t bh, int64_t j) const {
    return base + ((bh / group) * seq + j) * dim;
  }
  __device__ float score(int64_t bh, int64_t i, int64_t j) const {
    const float *x = q + (bh * seq + i) * dim, *y = key(k, bh, j);
    float s = 0;
    for (int64_t d = 0; d < dim; ++d)
      s += x[d] * y[d];
    return s * scale;
  }
  __device__ float sink(int64_t bh) const { return sinks[bh % heads]; }
  __device__ float lse(int64_t bh, int64_t i) const {
    float m = sink(bh);
    for (int64_t j = first(i); j <= last(i); ++j)
      m = fmaxf(m, score(bh, i, j));
    float sum = expf(sink(bh) - m);
    for (int64_t j = first(i); j <= last(i); ++j)
      sum += expf(score(bh, i, j) - m);
    return m + logf(sum);
  }
};

__device__ float sinkRowDelta(const SinkRows &s, const float *o,
                              const float *dO, int64_t r) {
  float d = 0;
  for (int64_t e = 0; e < s.dim; ++e)
    d += o[r * s.dim + e] * dO[r * s.dim + e];
  return d;
}

__global__ void __launch_bounds__(kThreads)
    sinkForwardKernel(SinkRows s, float *o) {
  for (int64_t r = sinkThread(); r < s.rows; r += sinkThreads()) {
    int64_t bh = r / s.seq, i = r % s.seq;
    float l = s.lse(bh, i);
    float *y = o + r * s.dim;
    for (int64_t d = 0; d < s.dim; ++d)
      y[d] = 0;
    for (int64_t j = s.first(i); j <= s.last(i); ++j) {
      float p = expf(s.score(bh, i, j) - l);
      const float *x = s.key(s.v, bh, j);
      for (int64_t d = 0; d < s.dim; ++d)
        y[d] += p * x[d];
    }
  }
}

/// dQ per row; dK and dV summed over the rows by atomics (zeroed first).
__global__ void __launch_bounds__(kThreads)
    sinkGradKernel(SinkRows s, const float *o, const float *dO, float *dq,
                   float *dk, float *dv) {
  for (int64_t r = sinkThread(); r < s.rows; r += sinkThreads()) {
    int64_t bh = r / s.seq, i = r % s.seq;
    float l = s.lse(bh, i);
    float delta = sinkRowDelta(s, o, dO, r);
    const float *g = dO + r * s.dim, *x = s.q + r * s.dim;
    float *gq = dq + r * s.dim;
    for (int64_t d = 0; d < s.dim; ++d)
      gq[d] = 0;
    for (int64_t j = s.first(i); j <= s.last(i); ++j) {
      float p = expf(s.score(bh, i, j) - l);
      const float *y = s.key(s.k, bh, j), *z = s.key(s.v, bh, j);
      float dp = 0;
      for (int64_t d = 0; d < s.dim; ++d)
        dp += g[d] * z[d];
      float ds = p * (dp - delta) * s.scale;
      int64_t kr = ((bh / s.group) * s.seq + j) * s.dim;
      for (int64_t d = 0; d < s.dim; ++d) {
        atomicAdd(dv + kr + d, p * g[d]);
        atomicAdd(dk + kr + d, ds * x[d]);
        gq[d] += ds * y[d];
      }
    }
  }
}

/// One thread per head: the sum over its rows in a fixed order.
__global__ void __launch_bounds__(kThreads)
    sinkDsinksKernel(SinkRows s, const float *o, const float *dO, float *dsinks,
                     int64_t batch) {
  for (int64_t h = sinkThread(); h < s.heads; h += sinkThreads()) {
    float sum = 0;
    for (int64_t b = 0; b < batch; ++b) {
      int64_t bh = b * s.heads + h;
      for (int64_t i = 0; i < s.seq; ++i)
        sum += expf(s.sink(bh) - s.lse(bh, i)) *
               sinkRowDelta(s, o, dO, bh * s.seq + i);
    }
    dsinks[h] = -sum;
  }
}

SinkRows makeSinkRows(const char *name, int32_t dtype, const void *q,
                      const void *k, const void *v, const void *sinks,
                      int64_t batch, int64_t heads, int64_t kvHeads,
                      int64_t seq, int64_t headDim, int32_t causal,
                      double scale, int64_t window) {
  if (dtype != ZRT_F32)
    fatal("%s: attention sinks need f32 tensors", name);
  checkDims(name, batch, heads, seq, headDim);
  if (kvHeads <= 0 ? heads != 0 : heads % kvHeads != 0)
    fatal("%s: kv_heads %lld does not divide heads %lld", name,
          (long long)kvHeads, (long long)heads);
  if (window < 0 || (window > 0 && !causal))
    fatal("%s: window %lld needs causal and must not be negative", name,
          (long long)window);
  float s = scale > 0 ? float(scale) : float(1.0 / std::sqrt(double(headDim)));
  return {static_cast<const float *>(q),
          static_cast<const float *>(k),
          static_cast<const float *>(v),
          static_cast<const float *>(sinks),
          batch * heads * seq,
          heads,
          kvHeads > 0 ? heads / kvHeads : 1,
          seq,
          headDim,
          window < seq ? window : 0,
          causal != 0,
          s};
}

} // namespace

namespace {

/// makeSinkRows of descriptor `d`: its sinks, none of the other knobs.
SinkRows sinkRowsOf(const char *name, const zrt_attention_desc *d,
                    const void *q, const void *k, const void *v) {
  if (d->softcap != 0.0 || d->alibi)
    fatal("%s: attention sinks take no softcap or ALiBi", name);
  return makeSinkRows(name, d->dtype, q, k, v, d->sinks, d->batch, d->heads,
                      d->kv_heads, d->seq, d->head_dim, d->causal, d->scale,
                      d->window);
}

void sinksForward(const char *name, const zrt_attention_desc *d, const void *q,
                  const void *k, const void *v, void *o) {
  SinkRows s = sinkRowsOf(name, d, q, k, v);
  if (s.rows * s.dim == 0)
    return;
  sinkForwardKernel<<<gridFor(s.rows, kThreads), kThreads, 0,
                      computeStream()>>>(s, static_cast<float *>(o));
  checkLaunch(name);
}

void sinksBackward(const char *name, const zrt_attention_desc *d, const void *q,
                   const void *k, const void *v, const void *o, const void *dO,
                   void *dq, void *dk, void *dv) {
  SinkRows s = sinkRowsOf(name, d, q, k, v);
  if (s.rows * s.dim == 0)
    return;
  size_t kvBytes =
      size_t(d->batch * d->kv_heads * d->seq * d->head_dim) * sizeof(float);
  cudaStream_t stream = computeStream();
  ZRT_CUDA_CHECK(cudaMemsetAsync(dk, 0, kvBytes, stream));
  ZRT_CUDA_CHECK(cudaMemsetAsync(dv, 0, kvBytes, stream));
  sinkGradKernel<<<gridFor(s.rows, kThreads), kThreads, 0, stream>>>(
      s, static_cast<const float *>(o), static_cast<const float *>(dO),
      static_cast<float *>(dq), static_cast<float *>(dk),
      static_cast<float *>(dv));
  checkLaunch(name);
}

/// The checked problem of `desc` for entry `kernel`; the sinks' kernels do
/// not read packed rows' documents (transformers masks no documents with
/// sinks either).
Attn cudaAttentionProblem(const char *kernel, const zrt_attention_desc *desc) {
  Attn a = attentionProblem(kernel, desc);
  if (desc->segments && desc->sinks)
    fatal("%s: per-token segment ids (packed documents) with sinks are not "
          "supported by the CUDA kernels",
          kernel);
  return a;
}

} // namespace

void zrt::cuda::attentionForward(const zrt_attention_desc *desc, const void *q,
                                 const void *k, const void *v, void *o) {
  const char *name = "zrt_attention_forward";
  Attn a = cudaAttentionProblem(name, desc);
  if (desc->sinks)
    return sinksForward(name, desc, q, k, v, o);
  runForward(name, a, desc->dtype, q, k, v, o, desc);
}

void zrt::cuda::attentionBackward(const zrt_attention_desc *desc, const void *q,
                                  const void *k, const void *v, const void *o,
                                  const void *dO, void *dq, void *dk,
                                  void *dv) {
  const char *name = "zrt_attention_backward";
  Attn a = cudaAttentionProblem(name, desc);
  if (desc->sinks)
    return sinksBackward(name, desc, q, k, v, o, dO, dq, dk, dv);
  runGrads(name, a, desc->dtype, q, k, v, o, dO, dq, dk, dv, desc->batch,
           desc->heads, desc->seq, desc->head_dim, desc);
}

void zrt::cuda::attentionDsinks(const zrt_attention_desc *desc, const void *q,
                                const void *k, const void *o, const void *dO,
                                void *dsinks) {
  const char *name = "zrt_attention_dsinks";
  cudaAttentionProblem(name, desc);
  if (!desc->sinks)
    fatal("%s: the descriptor has no sinks", name);
  SinkRows s = sinkRowsOf(name, desc, q, k, nullptr);
  if (desc->heads == 0)
    return;
  sinkDsinksKernel<<<gridFor(desc->heads, kThreads), kThreads, 0,
                     computeStream()>>>(
      s, static_cast<const float *>(o), static_cast<const float *>(dO),
      static_cast<float *>(dsinks), desc->batch);
  checkLaunch(name);
}
