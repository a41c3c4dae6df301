//===- AttentionShape.h - An attention problem ------------------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// The descriptor of zrt_attention_forward and its gradients, checked and
// described once for the CPU and CUDA kernels, so that both accept the same
// problems, and the per-score formulas of its mask, soft-capping and ALiBi,
// which both compile.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_ATTENTION_SHAPE_H
#define ZERO_RT_ATTENTION_SHAPE_H

#include "Kernels/HostDevice.h"
#include "Support/Support.h"
#include "zero_rt/zrt.h"

#include <cmath>
#include <cstdint>

namespace zrt {

/// The largest head_dim either backend accepts: the CPU backend's backward
/// keeps 6 * head_dim + 2 floats of a key or query in a 128 KiB workspace.
constexpr int64_t kMaxAttentionHeadDim = 5461;

struct Attn {
  int64_t heads; // batch * heads
  int64_t group; // query heads per key/value head
  int64_t seq;
  int64_t dim;
  bool causal;
  float scale;
  /// A causal sliding window (query i sees keys (i - window, i]); 0 when
  /// none or when it is at least seq, which leaves the causal mask.
  int64_t window = 0;
  /// Logits become softcap * tanh(logits / softcap); 0 when none.
  float softcap = 0;
  /// ALiBi: one slope per head of a batch element (alibiHeads of them);
  /// query i's logit of key j gains slope * (j - i) after the softcap.
  /// Null when none.
  const float *alibi = nullptr;
  int64_t alibiHeads = 1;
  /// Packed rows' documents (the descriptor's segments): for each position
  /// of a batch element, the first position of its document and the end of
  /// it (exclusive); query i sees key j only within [docStart[i],
  /// docEnd[i]). Null when none. forHead points them at a head's batch
  /// element (headsPerBatch query heads each).
  const int64_t *docStart = nullptr;
  const int64_t *docEnd = nullptr;
  int64_t headsPerBatch = 1;

  int64_t kvHeads() const { return heads / group; } // batch * kv_heads
  /// This problem as query head h (of batch * heads) sees it.
  Attn forHead(int64_t h) const {
    Attn r = *this;
    if (docStart) {
      int64_t b = h / headsPerBatch;
      r.docStart += b * seq;
      r.docEnd += b * seq;
    }
    return r;
  }
};

/// Checks the arguments (aborting with a message that names `kernel`): the
/// dimensions, kv_heads dividing heads (zero only with zero heads) and
/// head_dim; a scale of 0 is 1/sqrt(head_dim).
inline Attn makeAttn(const char *kernel, int64_t batch, int64_t heads,
                     int64_t kvHeads, int64_t seq, int64_t dim, int32_t causal,
                     double scale) {
  checkDims(kernel, batch, heads, seq, dim);
  if (kvHeads < 0)
    fatal("%s: negative dimension", kernel);
  if (kvHeads == 0 ? heads != 0 : heads % kvHeads != 0)
    fatal("%s: kv_heads %lld does not divide heads %lld", kernel,
          (long long)kvHeads, (long long)heads);
  if (dim > kMaxAttentionHeadDim)
    fatal("%s: head_dim %lld exceeds the supported %lld", kernel,
          (long long)dim, (long long)kMaxAttentionHeadDim);
  float s = scale > 0 ? float(scale) : float(1.0 / std::sqrt(double(dim)));
  int64_t group = heads == 0 ? 1 : heads / kvHeads;
  return {batch * heads, group, seq, dim, causal != 0, s};
}

/// Adds a descriptor's window, softcap and ALiBi slopes (`heads` of
/// them, or null) to `a` (aborting with a message that names `kernel` on a
/// negative window, a window without causal, or a softcap that is negative
/// or not finite).
inline Attn withMask(const char *kernel, Attn a, int64_t window, double softcap,
                     const float *alibi, int64_t heads) {
  if (window < 0)
    fatal("%s: negative window %lld", kernel, (long long)window);
  if (window > 0 && !a.causal)
    fatal("%s: a window requires causal", kernel);
  if (!(softcap >= 0) || !std::isfinite(softcap))
    fatal("%s: softcap %g is not a positive number", kernel, softcap);
  a.window = window < a.seq ? window : 0;
  a.softcap = float(softcap);
  a.alibi = alibi;
  a.alibiHeads = heads > 0 ? heads : 1;
  return a;
}

/// The checked problem of descriptor `d` (zero_rt/attention.def), its mask
/// included, for entry `kernel`: both backends read a descriptor so.
inline Attn attentionProblem(const char *kernel, const zrt_attention_desc *d) {
  if (!d)
    fatal("%s: null descriptor", kernel);
  return withMask(kernel,
                  makeAttn(kernel, d->batch, d->heads, d->kv_heads, d->seq,
                           d->head_dim, d->causal, d->scale),
                  d->window, d->softcap, d->alibi, d->heads);
}

/// Whether query i sees key j: the causal mask, then the sliding window
/// (`window` as in Attn, 0 for none). Documents restrict it further
/// (Attn::docStart).
ZRT_HOST_DEVICE inline bool attentionSees(bool causal, int64_t window,
                                          int64_t i, int64_t j) {
  return (!causal || j <= i) && (window == 0 || i - j < window);
}

/// t = tanh(x / softcap) of a scaled logit x, with inv = 1 / softcap: the
/// capped logit is softcap * t, and its derivative in x softcapSlope(t).
ZRT_HOST_DEVICE inline float softcapTanh(float x, float inv) {
#ifdef __CUDA_ARCH__
  return tanhf(x * inv);
#else
  return std::tanh(x * inv);
#endif
}

ZRT_HOST_DEVICE inline float softcapSlope(float t) { return 1.0f - t * t; }

/// A logit x of query i and key j with its ALiBi bias: one fused
/// multiply-add, rounded once whatever the compiler contracts.
ZRT_HOST_DEVICE inline float alibiLogit(float x, float slope, int64_t i,
                                        int64_t j) {
#ifdef __CUDA_ARCH__
  return fmaf(slope, float(j - i), x);
#else
  return std::fma(slope, float(j - i), x);
#endif
}

} // namespace zrt

#endif // ZERO_RT_ATTENTION_SHAPE_H
