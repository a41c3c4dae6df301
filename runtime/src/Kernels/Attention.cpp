//===- Attention.cpp - Fused scaled dot-product attention -----------------===//
//
// Part of the zero-mlir project.
//
// Blocked as flash attention: per (batch * head, block of B rows), blocks of
// q/k/v rows are converted to fp32 in a per-thread stack workspace, scores
// and probabilities live only for one B x B tile, and the forward keeps a
// running max and sum (online softmax). Nothing of size seq x seq is ever
// stored. The tile products are chain products (AttentionTiles.h): our
// own FMA chains, not a BLAS call, so the bits do not depend on the BLAS
// kernel the CPU gets, and the causal mask's zeros are skipped.
//
// The backward recomputes the probabilities from the row log-sum-exp, which
// it derives from q and k along with delta = rowsum(dO * O); those
// 2 * batch * heads * seq floats are the only heap scratch. When a block of
// query rows' scores against every key fits the workspace (seq up to 378
// for f32 at head_dim 64), one pass per key/value head derives the
// scores of each query block once and, from them, lse, dV, dK and dQ.
// Otherwise three passes do: lse and delta first, then dK and dV per key
// block over all query blocks, and dQ per query block over all key blocks,
// recomputing q k^T and dO v^T. Either way every output tile has one owner
// (no atomics, no per-thread copies) and each sum runs over the same blocks
// in the same order, so both give the same bits at every thread count.
//
// Grouped-query attention: query head h (of batch * heads) reads key/value
// head h / group, group = heads / kv_heads. The item that owns a key block
// of a key/value head walks the group's query heads in order inside its
// loop, so the group's sum of dK and dV keeps one owner and a fixed order
// (and needs no scratch). With group 1 this is the multi-head loop.
//
//===----------------------------------------------------------------------===//

#include "Driver/Trace.h"
#include "Kernels/AttentionTiles.h"

#include <algorithm>
#include <cmath>

using namespace zrt;
using namespace zrt::attn;

namespace {

template <typename T>
void forward(const Attn &all, const T *q, const T *k, const T *v, T *o) {
  int64_t d = all.dim;
  int64_t bs = blockSize([&](int64_t b) { return 4 * b * d + b * b + 2 * b; });
  int64_t blocks = ceilDiv(all.seq, bs);
  parallelForEach(all.heads * blocks, itemWork(all, bs, 2), [&](int64_t item) {
    int64_t h = item / blocks, i0 = (item % blocks) * bs;
    const Attn a = all.forHead(h);
    int64_t nr = std::min(bs, a.seq - i0);
    int64_t kvh = h / a.group;
    const T *qh = q + h * a.seq * d, *kh = k + kvh * a.seq * d,
            *vh = v + kvh * a.seq * d;
    alignas(64) float ws[kWorkspaceFloats];
    float *qBuf = ws, *kBuf = qBuf + bs * d, *vBuf = kBuf + bs * d;
    float *oBuf = vBuf + bs * d, *s = oBuf + bs * d, *rowMax = s + bs * bs,
          *rowSum = rowMax + bs;
    T *oRows = o + (h * a.seq + i0) * d;
    float *ob = outF32(oRows, oBuf);
    const float *qb = loadRows(qh + i0 * d, nr, d, qBuf, a.scale);
    std::fill(ob, ob + nr * d, 0.0f);
    std::fill(rowMax, rowMax + nr, -std::numeric_limits<float>::infinity());
    std::fill(rowSum, rowSum + nr, 0.0f);
    for (int64_t j0 = keyBegin(a, i0, bs), end = keyEnd(a, i0, nr); j0 < end;
         j0 += bs) {
      int64_t nc = std::min(bs, end - j0);
      const float *kb = loadRows(kh + j0 * d, nc, d, kBuf);
      const float *vb = loadRows(vh + j0 * d, nc, d, vBuf);
      dotRows(qb, nr, kb, nc, d, s, bs, a.causal && j0 == i0);
      if (a.softcap)
        capScores(a, s, bs, i0, nr, j0, nc);
      if (a.alibi)
        addAlibi(a, h, s, bs, i0, nr, j0, nc);
      for (int64_t r = 0; r < nr; ++r) {
        float *sr = s + r * bs;
        int64_t first = firstKey(a, i0, r, j0, nc);
        int64_t visible = visibleKeys(a, i0, r, j0, nc);
        if (first >= visible) {
          // A row the window hides this block from: it adds nothing.
          std::fill(sr, sr + nc, 0.0f);
          continue;
        }
        float mx = rowMax[r];
#pragma omp simd reduction(max : mx)
        for (int64_t c = first; c < visible; ++c)
          mx = sr[c] > mx ? sr[c] : mx;
        // Rescale what earlier key blocks accumulated to the new max.
        float alpha = expApprox(rowMax[r] - mx);
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int64_t c = 0; c < nc; ++c) {
          float e = c >= first && c < visible ? expApprox(sr[c] - mx) : 0.0f;
          sr[c] = e;
          sum += e;
        }
        rowSum[r] = rowSum[r] * alpha + sum;
        rowMax[r] = mx;
        if (alpha != 1.0f) {
          float *orow = ob + r * d;
#pragma omp simd
          for (int64_t t = 0; t < d; ++t)
            orow[t] *= alpha;
        }
      }
      accumulate(s, bs, nr, nc, vb, d, ob, a.causal && j0 == i0);
    }
    for (int64_t r = 0; r < nr; ++r) {
      float inv = 1.0f / rowSum[r];
      float *orow = ob + r * d;
#pragma omp simd
      for (int64_t t = 0; t < d; ++t)
        orow[t] *= inv;
    }
    storeF32(ob, oRows, nr * d);
  });
}

/// The checked problem `a` on the dtype's data.
void runForward(const Attn &a, int32_t dtype, const void *q, const void *k,
                const void *v, void *o) {
  if (a.heads == 0 || a.seq == 0 || a.dim == 0)
    return;
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    forward(a, static_cast<const T *>(q), static_cast<const T *>(k),
            static_cast<const T *>(v), static_cast<T *>(o));
  });
}

} // namespace

//===----------------------------------------------------------------------===//
// Attention sinks (gpt-oss)
//===----------------------------------------------------------------------===//
//
// One learned logit per query head joins each row's softmax denominator
// without a value. Plain f32 loops without heap scratch: the scores are
// recomputed rather than kept, which the tiny models that use them afford.

namespace {

struct SinkAttn {
  Attn a;
  int64_t heads; // query heads of one batch element
  const float *q, *k, *v, *sinks;

  const float *query(int64_t bh, int64_t i) const {
    return q + (bh * a.seq + i) * a.dim;
  }
  const float *key(int64_t bh, int64_t j) const {
    return k + ((bh / a.group) * a.seq + j) * a.dim;
  }
  const float *value(int64_t bh, int64_t j) const {
    return v + ((bh / a.group) * a.seq + j) * a.dim;
  }
  float sink(int64_t bh) const { return sinks[bh % heads]; }
  /// The keys query i of head bh sees: [first, last].
  int64_t first(int64_t bh, int64_t i) const {
    int64_t f = a.window > 0 ? std::max<int64_t>(0, i - a.window + 1) : 0;
    return a.docStart ? std::max(f, a.forHead(bh).docStart[i]) : f;
  }
  int64_t last(int64_t bh, int64_t i) const {
    int64_t l = a.causal ? i : a.seq - 1;
    return a.docEnd ? std::min(l, a.forHead(bh).docEnd[i] - 1) : l;
  }
  float score(int64_t bh, int64_t i, int64_t j) const {
    const float *x = query(bh, i), *y = key(bh, j);
    float s = 0;
    for (int64_t d = 0; d < a.dim; ++d)
      s += x[d] * y[d];
    return s * a.scale;
  }
  /// The log of the row's denominator, the sink's term included.
  float lse(int64_t bh, int64_t i) const {
    float m = sink(bh);
    for (int64_t j = first(bh, i); j <= last(bh, i); ++j)
      m = std::max(m, score(bh, i, j));
    float sum = std::exp(sink(bh) - m);
    for (int64_t j = first(bh, i); j <= last(bh, i); ++j)
      sum += std::exp(score(bh, i, j) - m);
    return m + std::log(sum);
  }
};

SinkAttn makeSinkAttn(const char *name, const zrt_attention_desc *d,
                      const AttnDocuments &docs, const void *q, const void *k,
                      const void *v) {
  if (d->dtype != ZRT_F32)
    fatal("%s: attention sinks need f32 tensors", name);
  if (d->softcap != 0.0 || d->alibi)
    fatal("%s: attention sinks take no softcap or ALiBi", name);
  return {docs.apply(attentionProblem(name, d), d->heads),
          d->heads,
          static_cast<const float *>(q),
          static_cast<const float *>(k),
          static_cast<const float *>(v),
          d->sinks};
}

/// dot(d_o, o) of row i of head bh.
float rowDelta(const SinkAttn &s, const float *o, const float *dO, int64_t bh,
               int64_t i) {
  const float *x = o + (bh * s.a.seq + i) * s.a.dim;
  const float *y = dO + (bh * s.a.seq + i) * s.a.dim;
  float d = 0;
  for (int64_t e = 0; e < s.a.dim; ++e)
    d += x[e] * y[e];
  return d;
}

void sinksForward(const char *name, const zrt_attention_desc *d,
                  const AttnDocuments &docs, const void *q, const void *k,
                  const void *v, void *o) {
  SinkAttn s = makeSinkAttn(name, d, docs, q, k, v);
  float *out = static_cast<float *>(o);
  int64_t rows = s.a.heads * s.a.seq;
  parallelFor(rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      int64_t bh = r / s.a.seq, i = r % s.a.seq;
      float l = s.lse(bh, i);
      float *y = out + r * s.a.dim;
      std::fill(y, y + s.a.dim, 0.0f);
      for (int64_t j = s.first(bh, i); j <= s.last(bh, i); ++j) {
        float p = std::exp(s.score(bh, i, j) - l);
        const float *x = s.value(bh, j);
        for (int64_t d = 0; d < s.a.dim; ++d)
          y[d] += p * x[d];
      }
    }
  });
}

void sinksBackward(const char *name, const zrt_attention_desc *d,
                   const AttnDocuments &docs, const void *q, const void *k,
                   const void *v, const void *o, const void *dO, void *dq,
                   void *dk, void *dv) {
  SinkAttn s = makeSinkAttn(name, d, docs, q, k, v);
  const float *outs = static_cast<const float *>(o);
  const float *dOut = static_cast<const float *>(dO);
  float *dQ = static_cast<float *>(dq), *dK = static_cast<float *>(dk),
        *dV = static_cast<float *>(dv);
  int64_t dim = s.a.dim, t = s.a.seq;
  // One key/value head (of one batch element) per task: it alone writes
  // its dK and dV rows and the dQ rows of its query heads.
  parallelFor(s.a.kvHeads(), 1, [&](int64_t begin, int64_t end) {
    for (int64_t kv = begin; kv < end; ++kv) {
      std::fill(dK + kv * t * dim, dK + (kv + 1) * t * dim, 0.0f);
      std::fill(dV + kv * t * dim, dV + (kv + 1) * t * dim, 0.0f);
      for (int64_t bh = kv * s.a.group; bh < (kv + 1) * s.a.group; ++bh) {
        for (int64_t i = 0; i < t; ++i) {
          float l = s.lse(bh, i);
          float delta = rowDelta(s, outs, dOut, bh, i);
          const float *g = dOut + (bh * t + i) * dim;
          const float *x = s.query(bh, i);
          float *gq = dQ + (bh * t + i) * dim;
          std::fill(gq, gq + dim, 0.0f);
          for (int64_t j = s.first(bh, i); j <= s.last(bh, i); ++j) {
            float p = std::exp(s.score(bh, i, j) - l);
            const float *y = s.key(bh, j), *z = s.value(bh, j);
            float dp = 0;
            for (int64_t d = 0; d < dim; ++d)
              dp += g[d] * z[d];
            float ds = p * (dp - delta) * s.a.scale;
            float *gk = dK + (kv * t + j) * dim, *gv = dV + (kv * t + j) * dim;
            for (int64_t d = 0; d < dim; ++d) {
              gv[d] += p * g[d];
              gq[d] += ds * y[d];
              gk[d] += ds * x[d];
            }
          }
        }
      }
    }
  });
}

} // namespace

extern "C" void zrt_attention_forward(const zrt_attention_desc *desc,
                                      const void *q, const void *k,
                                      const void *v, void *o) {
  const char *name = "zrt_attention_forward";
  KernelSpan span(name);
  Attn a = attentionProblem(name, desc);
  AttnDocuments docs(name, desc);
  if (desc->sinks)
    return sinksForward(name, desc, docs, q, k, v, o);
  a = docs.apply(a, desc->heads);
  runForward(a, desc->dtype, q, k, v, o);
}

extern "C" void zrt_attention_backward(const zrt_attention_desc *desc,
                                       const void *q, const void *k,
                                       const void *v, const void *o,
                                       const void *dO, void *dq, void *dk,
                                       void *dv) {
  const char *name = "zrt_attention_backward";
  KernelSpan span(name);
  Attn a = attentionProblem(name, desc);
  AttnDocuments docs(name, desc);
  if (desc->sinks)
    return sinksBackward(name, desc, docs, q, k, v, o, dO, dq, dk, dv);
  a = docs.apply(a, desc->heads);
  runGrads(a, desc->dtype, q, k, v, o, dO, dq, dk, dv, desc->batch, desc->heads,
           desc->seq, desc->head_dim);
}

extern "C" void zrt_attention_dsinks(const zrt_attention_desc *desc,
                                     const void *q, const void *k,
                                     const void *o, const void *dO,
                                     void *dsinks) {
  const char *name = "zrt_attention_dsinks";
  KernelSpan span(name);
  attentionProblem(name, desc);
  if (!desc->sinks)
    fatal("%s: the descriptor has no sinks", name);
  // The values are not read: the sink's probability needs only the scores.
  AttnDocuments docs(name, desc);
  SinkAttn s = makeSinkAttn(name, desc, docs, q, k, nullptr);
  const float *outs = static_cast<const float *>(o);
  const float *dOut = static_cast<const float *>(dO);
  float *out = static_cast<float *>(dsinks);
  int64_t batch = desc->batch, heads = desc->heads, seq = desc->seq;
  // Summed in a fixed order (batch, then rows) per head.
  parallelFor(heads, 1, [&](int64_t begin, int64_t end) {
    for (int64_t h = begin; h < end; ++h) {
      float sum = 0;
      for (int64_t b = 0; b < batch; ++b) {
        int64_t bh = b * heads + h;
        for (int64_t i = 0; i < seq; ++i)
          sum += std::exp(s.sink(bh) - s.lse(bh, i)) *
                 rowDelta(s, outs, dOut, bh, i);
      }
      out[h] = -sum;
    }
  });
}
