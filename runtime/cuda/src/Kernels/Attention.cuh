//===- Attention.cuh - The attention kernels' shared pieces -----*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// What the attention files share (see Attention.cu): the problem's shape,
// the launch helpers, and the entry points of the two implementations,
// CUDA cores (AttentionSimt.cu) and tensor cores (AttentionTcForward.cu,
// AttentionTcGrad.cu, with AttentionFragments.cuh).
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_CUDA_ATTENTION_CUH
#define ZERO_RT_CUDA_ATTENTION_CUH

#include "Kernels/AttentionShape.h"
#include "Support/CudaSupport.h"
#include "Support/Support.h"

#include <cstdint>

namespace zrt {
namespace cuda {
namespace attn {

constexpr int kThreads = 256;
/// Rows a block owns: queries (forward, dQ) or keys (dK, dV).
constexpr int kRowTile = 64;
/// The most heads whose ALiBi slopes a launch carries (in Shape, by value:
/// no device copy to allocate or plan).
constexpr int kMaxAlibiHeads = 256;

struct Shape {
  int64_t seq;
  int group; // query heads per key/value head
  int dim;
  int64_t tiles; // row tiles per head
  bool causal;
  float scale;     // of the scores
  float scaleLog2; // scale * log2(e)
  int64_t window;  // as Attn's: 0 when none or when it cuts nothing
  float softcap;   // 0 when none
  float capInv;    // 1 / softcap
  float capLog2;   // softcap * log2(e)
  int alibiHeads;  // slopes in alibiLog2; 0 when no ALiBi
  float alibiLog2[kMaxAlibiHeads]; // ALiBi slope * log2(e) per head
  bool vec;  // dim % 4 == 0 and every tensor 4-element aligned
  bool vec8; // dim % 8 == 0 and every tensor 16-byte aligned
  // Tensor cores: P and dS enter their products as two 16-bit halves
  // (fp32's bits) or, as in FlashAttention, as one (AttentionFragments.cuh).
  bool splitProbs;
  // Packed rows' document ids [batch, seq] (device memory, each row's
  // non-decreasing), null when none; the query and key/value heads of a
  // batch element.
  const int32_t *segments;
  int64_t headsPerBatch, kvHeadsPerBatch;
};

/// Bit patterns of 16-bit storage types.
__device__ inline unsigned short bitsOf(__nv_bfloat16 x) {
  return __bfloat16_as_ushort(x);
}
__device__ inline unsigned short bitsOf(__half x) {
  return __half_as_ushort(x);
}

/// The head and row tile of this block. With a causal mask, tiles of late
/// queries have the most keys: heavyLast runs them first.
__device__ inline void blockTile(const Shape &s, bool heavyLast, int64_t &head,
                                 int64_t &tile) {
  int64_t x = blockIdx.x;
  head = x / s.tiles;
  tile = x % s.tiles;
  if (s.causal && heavyLast)
    tile = s.tiles - 1 - tile;
}

/// The key/value head that query head `head` reads (both counted over
/// batch * heads; grid.x bounds them, so they fit an int).
__device__ inline int64_t kvHeadOf(const Shape &s, int64_t head) {
  return int(head) / s.group;
}

/// Whether query i sees key j.
__device__ inline bool visible(const Shape &s, int64_t i, int64_t j) {
  return i < s.seq && j < s.seq && attentionSees(s.causal, s.window, i, j);
}

/// The document ids of the row of `head` (counted over batch * heads, of
/// which `perBatch` a batch element: s.headsPerBatch for query heads,
/// s.kvHeadsPerBatch for key/value heads), or null without documents.
__device__ inline const int32_t *documentsOf(const Shape &s, int64_t head,
                                             int64_t perBatch) {
  return s.segments ? s.segments + head / perBatch * s.seq : nullptr;
}

/// Whether query i sees key j, also of one document where `docs` holds
/// the row's document ids.
__device__ inline bool visible(const Shape &s, const int32_t *docs, int64_t i,
                               int64_t j) {
  return visible(s, i, j) && (!docs || docs[i] == docs[j]);
}

/// The first position of the document of position i < seq (the row's ids
/// do not decrease: a binary search).
__device__ inline int64_t documentStart(const int32_t *docs, int64_t i) {
  int32_t id = docs[i];
  int64_t lo = 0, hi = i;
  while (lo < hi) {
    int64_t mid = (lo + hi) / 2;
    if (docs[mid] < id)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/// One past the last position of the document of position i < seq.
__device__ inline int64_t documentEnd(const int32_t *docs, int64_t seq,
                                      int64_t i) {
  int32_t id = docs[i];
  int64_t lo = i + 1, hi = seq;
  while (lo < hi) {
    int64_t mid = (lo + hi) / 2;
    if (docs[mid] <= id)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/// [begin, end) narrowed to the positions the documents of rows [r0, r0 +
/// n) hold (the keys queries there can see, or the queries that can see
/// keys there), `begin` kept a multiple of `step`; unchanged without
/// documents.
__device__ inline void documentRange(const Shape &s, const int32_t *docs,
                                     int64_t r0, int n, int step,
                                     int64_t &begin, int64_t &end) {
  if (!docs || r0 >= s.seq)
    return;
  int64_t last = min(s.seq, r0 + n) - 1;
  begin = max(begin, documentStart(docs, r0) / step * step);
  end = min(end, documentEnd(docs, s.seq, last));
}

/// The first of the steps of `step` keys that queries from i0 on see: with
/// a window, the steps before it are hidden from all of them (they would
/// add exact zeros).
__device__ inline int64_t firstKeyStep(const Shape &s, int64_t i0, int step) {
  return s.window ? max(i0 - s.window + 1, int64_t(0)) / step * step : 0;
}

/// The end of the queries that see a key of [j0, j0 + n): all of them
/// unless a window hides the later ones.
__device__ inline int64_t queryEnd(const Shape &s, int64_t j0, int n) {
  return s.window ? min(s.seq, j0 + n - 1 + s.window) : s.seq;
}

/// The log2-domain logit of a raw score q . k: scaled, soft-capped when
/// s.softcap (AttentionShape.h's softcapTanh; t is then the tanh), times
/// log2(e).
__device__ inline float cappedLogit2(const Shape &s, float dot, float &t) {
  t = softcapTanh(dot * s.scale, s.capInv);
  return s.capLog2 * t;
}

/// Head `head`'s ALiBi slope times log2(e) (0 without ALiBi).
__device__ inline float alibiSlope2(const Shape &s, int64_t head) {
  return s.alibiHeads ? s.alibiLog2[head % s.alibiHeads] : 0.0f;
}

/// The log2-domain logit of query i and key j from their raw score q . k:
/// cappedLogit2 when s.softcap (setting t), else scaled; then ALiBi's bias
/// with the head's slope2 (alibiSlope2) when there is one.
__device__ inline float logit2(const Shape &s, float dot, float slope2,
                               int64_t i, int64_t j, float &t) {
  t = 0.0f;
  float x = s.softcap ? cappedLogit2(s, dot, t) : dot * s.scaleLog2;
  return s.alibiHeads ? alibiLogit(x, slope2, i, j) : x;
}

/// visible and logit2 where kExt says at compile time whether the problem
/// has a window, a soft-cap, ALiBi or documents: without them (kExt false) each
/// score is the causal test and one product, as before those existed. The
/// CUDA-core backward kernels are instruction-bound, and the general forms'
/// per-score work cost their plain instantiation a third of its time.
template <bool kExt>
__device__ inline bool visibleIf(const Shape &s, const int32_t *docs, int64_t i,
                                 int64_t j) {
  if constexpr (kExt)
    return visible(s, docs, i, j);
  return i < s.seq && j < s.seq && (!s.causal || j <= i);
}

template <bool kExt>
__device__ inline float logit2If(const Shape &s, float dot, float slope2,
                                 int64_t i, int64_t j, float &t) {
  if constexpr (kExt)
    return logit2(s, dot, slope2, i, j, t);
  t = 0.0f;
  return dot * s.scaleLog2;
}

//===----------------------------------------------------------------------===//
// Host side
//===----------------------------------------------------------------------===//

/// The device's opt-in shared memory per block (Attention.cu).
int maxSharedPerBlock();

/// Launches a kernel with `smem` bytes of dynamic shared memory, opting in
/// above the 48 KiB default once per kernel.
template <auto kKernel, int kBlock = kThreads, typename... Args>
void launch(const char *name, dim3 grid, size_t smem, Args... args) {
  static const bool optedIn = [&] {
    ZRT_CUDA_CHECK(cudaFuncSetAttribute(
        kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    return true;
  }();
  (void)optedIn;
  kKernel<<<grid, kBlock, smem, computeStream()>>>(args...);
  checkLaunch(name);
}

/// A block per row tile of each of `heads` heads (a.heads for the kernels
/// that own query rows, a.kvHeads() for those that own key rows), times
/// the output chunks when allChunks.
inline dim3 gridOf(int64_t heads, const Shape &s, int kD, bool allChunks) {
  return dim3(unsigned(heads * s.tiles),
              allChunks ? unsigned(ceilDiv(int64_t(s.dim), kD)) : 1u);
}

// CUDA cores, any dtype (AttentionSimt.cu). With kStats the forward only
// writes the log2-domain log-sum-exp of each row (`o` unused).
template <bool kStats, typename T>
void simtForward(const Attn &a, const Shape &s, const T *q, const T *k,
                 const T *v, T *o, float *lse);
template <typename T>
void simtGrads(const Attn &a, const Shape &s, const T *q, const T *k,
               const T *v, const T *dO, const float *lse, const float *delta,
               T *dq, T *dk, T *dv);

// Tensor cores, 16-bit dtypes (AttentionTcForward.cu, AttentionTcGrad.cu).
/// The tensor-core kernels' chunk for 16-bit inputs (64 or 128 columns), or
/// 0 where they do not apply: wider heads, or a device without the shared
/// memory (every sm_80+ part has it for 64).
int tcChunk(int dim);
template <bool kStats, typename T>
void tcForward(const Attn &a, const Shape &s, int chunk, const T *q, const T *k,
               const T *v, T *o, float *lse);
/// Also computes the log-sum-exp (into `lse`).
template <typename T>
void tcGrads(const Attn &a, const Shape &s, int chunk, const T *q, const T *k,
             const T *v, const T *dO, float *lse, const float *delta, T *dq,
             T *dk, T *dv);

} // namespace attn
} // namespace cuda
} // namespace zrt

#endif // ZERO_RT_CUDA_ATTENTION_CUH
