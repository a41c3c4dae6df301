//===- Moe.cpp - Mixture of experts: routing, dispatch, grouped products --===//
//
// Part of the zero-mlir project.
//
// The top-k selection calls the standard algorithms torch.topk's CPU kernel
// calls, with its comparator, so that tied scores select the experts torch
// selects. Dispatch is a counting sort without scratch: the offsets buffer
// holds the counts, then the bucket cursors, then the ends. Every per-token
// sum runs over k in order in fp32.
//
//===----------------------------------------------------------------------===//

#include "Device/Memory.h"
#include "Driver/Trace.h"
#include "Kernels/Kernels.h"
#include "zero_rt/scratch.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

using namespace zrt;

namespace {

using ScoreIndex = std::pair<float, int64_t>;
static_assert(sizeof(ScoreIndex) == 16, "zrt_scratch_moe_router's pairs");

/// torch.topk(largest, sorted) over queue[0, n): NaN first, then larger.
void topk(ScoreIndex *queue, int64_t n, int64_t k) {
  auto comp = [](const ScoreIndex &x, const ScoreIndex &y) {
    return (std::isnan(x.first) && !std::isnan(y.first)) || x.first > y.first;
  };
  if (k * 64 <= n) {
    std::partial_sort(queue, queue + k, queue + n, comp);
  } else {
    std::nth_element(queue, queue + k - 1, queue + n, comp);
    std::sort(queue, queue + k - 1, comp);
  }
}

/// The fp32 scores of one row of logits: softmax, or sigmoid.
template <typename T>
void scoresOf(const T *row, int64_t experts, bool sigmoid, float *s) {
  if (sigmoid) {
    for (int64_t e = 0; e < experts; ++e)
      s[e] = 1.0f / (1.0f + std::exp(-toFloat(row[e])));
    return;
  }
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t e = 0; e < experts; ++e)
    m = std::max(m, toFloat(row[e]));
  float sum = 0.0f;
  for (int64_t e = 0; e < experts; ++e) {
    s[e] = std::exp(toFloat(row[e]) - m);
    sum += s[e];
  }
  for (int64_t e = 0; e < experts; ++e)
    s[e] /= sum;
}

/// The scratch of zrt_moe_aux_loss: counts and probability sums (double),
/// the selection queue and one row's scores.
struct AuxScratch {
  double *counts, *sums;
  ScoreIndex *queue;
  float *scores;
  explicit AuxScratch(const Scratch &s, int64_t experts)
      : counts(s.as<double>()), sums(counts + experts),
        queue(reinterpret_cast<ScoreIndex *>(sums + experts)),
        scores(reinterpret_cast<float *>(queue + experts)) {}
};

/// The load-balancing loss's gradient in the logits [rows, experts] when
/// d loss / d p[n, e] is a.sums[e] for every row: through each row's
/// softmax, dl = p * (a.sums - p . a.sums).
template <typename T>
void auxGradRows(const T *l, T *dl, int64_t rows, int64_t experts,
                 const AuxScratch &a) {
  for (int64_t r = 0; r < rows; ++r) {
    scoresOf(l + r * experts, experts, false, a.scores);
    double dot = 0.0;
    for (int64_t e = 0; e < experts; ++e)
      dot += double(a.scores[e]) * a.sums[e];
    for (int64_t e = 0; e < experts; ++e)
      dl[r * experts + e] =
          fromFloat<T>(float(double(a.scores[e]) * (a.sums[e] - dot)));
  }
}

/// Counts each expert's rows in the top k of logits [rows, experts] into
/// a.counts, and, with `sums`, adds up the probabilities into a.sums.
template <typename T>
void countSelections(const T *logits, int64_t rows, int64_t experts, int64_t k,
                     bool sums, const AuxScratch &a) {
  std::fill(a.counts, a.counts + 2 * experts, 0.0);
  for (int64_t n = 0; n < rows; ++n) {
    scoresOf(logits + n * experts, experts, false, a.scores);
    for (int64_t e = 0; e < experts; ++e) {
      a.queue[e] = {a.scores[e], e};
      if (sums)
        a.sums[e] += a.scores[e];
    }
    topk(a.queue, experts, k);
    for (int64_t j = 0; j < k; ++j)
      a.counts[a.queue[j].second] += 1.0;
  }
}

} // namespace

extern "C" void zrt_moe_router(int32_t dtype, const void *logits,
                               const void *bias, void *weights,
                               int32_t indexType, void *indices, int64_t tokens,
                               int64_t experts, int64_t k, int32_t sigmoid,
                               int32_t normalize, double scale, int64_t groups,
                               int64_t topk_group, double eps) {
  const char *kernel = "zrt_moe_router";
  KernelSpan span(kernel);
  checkRouting(kernel, tokens, experts, k);
  checkGroups(kernel, experts, k, groups, topk_group);
  Scratch scratch(groups > 0 ? zrt_scratch_moe_router_grouped(experts, groups)
                             : zrt_scratch_moe_router(experts));
  // The experts' queue, the groups' queue, the scores, the kept groups.
  ScoreIndex *queue = scratch.as<ScoreIndex>();
  ScoreIndex *groupQueue = queue + experts;
  float *s = reinterpret_cast<float *>(groupQueue + groups);
  bool *kept = reinterpret_cast<bool *>(s + experts);
  int64_t size = groups > 0 ? experts / groups : experts;
  float factor = float(scale), epsilon = float(eps);
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    dispatchIndex(indexType, [&](auto idTag) {
      using I = decltype(idTag);
      const T *l = static_cast<const T *>(logits);
      const T *b = static_cast<const T *>(bias);
      T *w = static_cast<T *>(weights);
      I *idx = static_cast<I *>(indices);
      for (int64_t t = 0; t < tokens; ++t) {
        scoresOf(l + t * experts, experts, sigmoid, s);
        for (int64_t e = 0; e < experts; ++e)
          queue[e] = {b ? s[e] + toFloat(b[e]) : s[e], e};
        if (groups > 0) {
          // As transformers' DeepSeek-V3 router: a group's score is the sum
          // of its 2 largest keys, the best topk_group groups by the same
          // selection as torch.topk's, every other expert's key -inf in
          // the full queue (its length decides nth_element's tie order).
          for (int64_t g = 0; g < groups; ++g) {
            float first = -std::numeric_limits<float>::infinity();
            float second = first;
            for (int64_t e = g * size; e < (g + 1) * size; ++e) {
              float v = queue[e].first;
              if (v > first) {
                second = first;
                first = v;
              } else if (v > second) {
                second = v;
              }
            }
            groupQueue[g] = {first + second, g};
            kept[g] = false;
          }
          topk(groupQueue, groups, topk_group);
          for (int64_t j = 0; j < topk_group; ++j)
            kept[groupQueue[j].second] = true;
          for (int64_t e = 0; e < experts; ++e)
            if (!kept[e / size])
              queue[e].first = -std::numeric_limits<float>::infinity();
        }
        topk(queue, experts, k);
        float sum = 0.0f;
        for (int64_t j = 0; j < k; ++j)
          sum += s[queue[j].second];
        sum += epsilon;
        for (int64_t j = 0; j < k; ++j) {
          int64_t e = queue[j].second;
          float v = normalize ? s[e] / sum : s[e];
          w[t * k + j] = fromFloat<T>(v * factor);
          idx[t * k + j] = I(e);
        }
      }
    });
  });
}

extern "C" void zrt_moe_router_grad(int32_t dtype, const void *logits,
                                    int32_t indexType, const void *indices,
                                    const void *dweights, void *dlogits,
                                    int64_t tokens, int64_t experts, int64_t k,
                                    int32_t sigmoid, int32_t normalize,
                                    double scale, double eps) {
  const char *kernel = "zrt_moe_router_grad";
  KernelSpan span(kernel);
  checkRouting(kernel, tokens, experts, k);
  Scratch scratch(zrt_scratch_moe_router(experts));
  float *s = scratch.as<float>();
  float factor = float(scale);
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    dispatchIndex(indexType, [&](auto idTag) {
      using I = decltype(idTag);
      const T *l = static_cast<const T *>(logits);
      const I *idx = static_cast<const I *>(indices);
      const T *dw = static_cast<const T *>(dweights);
      T *dl = static_cast<T *>(dlogits);
      for (int64_t t = 0; t < tokens; ++t) {
        scoresOf(l + t * experts, experts, sigmoid, s);
        const I *sel = idx + t * k;
        // d selected score: through the scale, then the normalization
        // w_j = s_j / Z (dw_i / Z - sum_j dw_j s_j / Z^2).
        float sum = 0.0f, dot = 0.0f;
        for (int64_t j = 0; j < k; ++j) {
          int64_t e =
              checkedIndex(sel, j, experts, kernel, "expert", "at selection");
          sum += s[e];
          dot += toFloat(dw[t * k + j]) * factor * s[e];
        }
        sum += float(eps);
        auto dscore = [&](int64_t j) {
          float g = toFloat(dw[t * k + j]) * factor;
          return normalize ? (g - dot / sum) / sum : g;
        };
        T *row = dl + t * experts;
        if (sigmoid) {
          for (int64_t e = 0; e < experts; ++e)
            row[e] = fromFloat<T>(0.0f);
          for (int64_t j = 0; j < k; ++j) {
            int64_t e = int64_t(sel[j]);
            row[e] = fromFloat<T>(dscore(j) * s[e] * (1.0f - s[e]));
          }
          continue;
        }
        // Softmax: dl_e = s_e (dp_e - sum_e' s_e' dp_e'), dp nonzero only
        // at the selected experts.
        float sdp = 0.0f;
        for (int64_t j = 0; j < k; ++j)
          sdp += s[int64_t(sel[j])] * dscore(j);
        for (int64_t e = 0; e < experts; ++e)
          row[e] = fromFloat<T>(-s[e] * sdp);
        for (int64_t j = 0; j < k; ++j) {
          int64_t e = int64_t(sel[j]);
          row[e] = fromFloat<T>(s[e] * (dscore(j) - sdp));
        }
      }
    });
  });
}

extern "C" void zrt_moe_dispatch(int32_t dtype, const void *x,
                                 int32_t indexType, const void *indices,
                                 void *rows, void *positions, void *offsets,
                                 int64_t tokens, int64_t dim, int64_t k,
                                 int64_t experts) {
  const char *kernel = "zrt_moe_dispatch";
  KernelSpan span(kernel);
  checkDims(kernel, tokens, dim, k, experts);
  int64_t pairs = tokens * k;
  int64_t rowBytes = dim * dtypeSize(dtype);
  dispatchIndex(indexType, [&](auto idTag) {
    using I = decltype(idTag);
    const I *idx = static_cast<const I *>(indices);
    I *pos = static_cast<I *>(positions);
    I *offs = static_cast<I *>(offsets);
    std::fill(offs, offs + experts, I(0));
    for (int64_t p = 0; p < pairs; ++p)
      ++offs[checkedIndex(idx, p, experts, kernel, "expert", "at pair")];
    for (int64_t e = 1; e < experts; ++e)
      offs[e] += offs[e - 1];
    // Backwards from each bucket's end keeps the pairs' order within it;
    // the cursors end at the buckets' starts.
    for (int64_t p = pairs - 1; p >= 0; --p)
      pos[p] = --offs[int64_t(idx[p])];
    for (int64_t e = 0; e + 1 < experts; ++e)
      offs[e] = offs[e + 1];
    if (experts > 0)
      offs[experts - 1] = I(pairs);
    parallelFor(pairs, rowGrain(dim), [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p)
        std::memcpy(static_cast<char *>(rows) + int64_t(pos[p]) * rowBytes,
                    static_cast<const char *>(x) + (p / k) * rowBytes,
                    size_t(rowBytes));
    });
  });
}

namespace {
/// out[t] = sum over t's k pairs of weight * rows[position]: the combine,
/// and with no weights (each 1, which changes no bit) the dispatch's
/// gradient.
void sumPairs(const char *kernel, int32_t dtype, const void *rows,
              int32_t indexType, const void *positions, const void *weights,
              void *out, int64_t tokens, int64_t dim, int64_t k) {
  KernelSpan span(kernel);
  checkDims(kernel, tokens, dim, k);
  int64_t pairs = tokens * k;
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    dispatchIndex(indexType, [&](auto idTag) {
      using I = decltype(idTag);
      const T *r = static_cast<const T *>(rows);
      const I *pos = static_cast<const I *>(positions);
      const T *w = static_cast<const T *>(weights);
      T *o = static_cast<T *>(out);
      parallelFor(tokens, rowGrain(dim * k), [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t)
          for (int64_t c = 0; c < dim; ++c) {
            float acc = 0.0f;
            for (int64_t j = 0; j < k; ++j) {
              int64_t p = checkedIndex(pos, t * k + j, pairs, kernel,
                                       "position", "at pair");
              float v = toFloat(r[p * dim + c]);
              acc += w ? toFloat(w[t * k + j]) * v : v;
            }
            o[t * dim + c] = fromFloat<T>(acc);
          }
      });
    });
  });
}
} // namespace

extern "C" void zrt_moe_dispatch_grad(int32_t dtype, const void *drows,
                                      int32_t indexType, const void *positions,
                                      void *dx, int64_t tokens, int64_t dim,
                                      int64_t k) {
  sumPairs("zrt_moe_dispatch_grad", dtype, drows, indexType, positions,
           /*weights=*/nullptr, dx, tokens, dim, k);
}

namespace {
/// Expert e's rows [start, end) of a grouped product, checked: offsets
/// non-decreasing and at most `rows`.
template <typename I>
std::pair<int64_t, int64_t> expertRows(const char *kernel, const I *offs,
                                       int64_t e, int64_t rows) {
  int64_t start = e == 0 ? 0 : int64_t(offs[e - 1]);
  int64_t end = int64_t(offs[e]);
  if (end < start || end > rows)
    fatal("%s: offsets[%lld] = %lld is outside [%lld, %lld]", kernel,
          (long long)e, (long long)end, (long long)start, (long long)rows);
  return {start, end};
}

void checkGrouped(const char *kernel, int64_t rows, int64_t in, int64_t out,
                  int64_t experts) {
  checkDims(kernel, rows, in, out, experts);
}

/// c [m, n] = op(a) op(b): in place for f32, through `panels` for 16 bits.
template <typename T>
void gemmOf(const T *a, const T *b, T *c, int64_t m, int64_t n, int64_t k,
            bool ta, bool tb, float *panels) {
  if constexpr (std::is_same_v<T, float>)
    gemmF32(a, b, c, m, n, k, ta, tb, false);
  else
    gemm16(a, b, c, m, n, k, ta, tb, panels);
}
} // namespace

extern "C" void zrt_grouped_matmul(int32_t dtype, const void *x, const void *w,
                                   int32_t indexType, const void *offsets,
                                   void *y, int64_t rows, int64_t inDim,
                                   int64_t outDim, int64_t experts,
                                   int32_t transposeW) {
  const char *kernel = "zrt_grouped_matmul";
  KernelSpan span(kernel);
  checkGrouped(kernel, rows, inDim, outDim, experts);
  // Sized for the worst expert up front: the plan cannot know the routing.
  Scratch scratch(zrt_scratch_grouped_matmul(dtype, rows, inDim, outDim));
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *xv = static_cast<const T *>(x);
    const T *wv = static_cast<const T *>(w);
    T *yv = static_cast<T *>(y);
    dispatchIndex(indexType, [&](auto idTag) {
      using I = decltype(idTag);
      const I *offs = static_cast<const I *>(offsets);
      int64_t done = 0;
      for (int64_t e = 0; e < experts; ++e) {
        auto [start, end] = expertRows(kernel, offs, e, rows);
        if (end > start)
          gemmOf(xv + start * inDim, wv + e * inDim * outDim,
                 yv + start * outDim, end - start, outDim, inDim, false,
                 transposeW, scratch.as<float>());
        done = end;
      }
      std::fill(yv + done * outDim, yv + rows * outDim, fromFloat<T>(0.0f));
    });
  });
}

extern "C" void
zrt_grouped_matmul_weight_grad(int32_t dtype, const void *x, const void *dy,
                               int32_t indexType, const void *offsets, void *dw,
                               int64_t rows, int64_t inDim, int64_t outDim,
                               int64_t experts, int32_t transposeW) {
  const char *kernel = "zrt_grouped_matmul_weight_grad";
  KernelSpan span(kernel);
  checkGrouped(kernel, rows, inDim, outDim, experts);
  Scratch scratch(
      zrt_scratch_grouped_matmul_weight_grad(dtype, rows, inDim, outDim));
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *xv = static_cast<const T *>(x);
    const T *gv = static_cast<const T *>(dy);
    T *dwv = static_cast<T *>(dw);
    dispatchIndex(indexType, [&](auto idTag) {
      using I = decltype(idTag);
      const I *offs = static_cast<const I *>(offsets);
      for (int64_t e = 0; e < experts; ++e) {
        auto [start, end] = expertRows(kernel, offs, e, rows);
        T *dwe = dwv + e * inDim * outDim;
        const T *xe = xv + start * inDim, *ge = gv + start * outDim;
        // A contraction over no rows writes zeros; 16-bit sums stay fp32
        // over all of the expert's rows and round once.
        if (transposeW)
          gemmOf(ge, xe, dwe, outDim, inDim, end - start, true, false,
                 scratch.as<float>());
        else
          gemmOf(xe, ge, dwe, inDim, outDim, end - start, true, false,
                 scratch.as<float>());
      }
    });
  });
}

extern "C" void zrt_moe_combine(int32_t dtype, const void *rows,
                                int32_t indexType, const void *positions,
                                const void *weights, void *out, int64_t tokens,
                                int64_t dim, int64_t k) {
  sumPairs("zrt_moe_combine", dtype, rows, indexType, positions, weights, out,
           tokens, dim, k);
}

extern "C" void zrt_moe_combine_grad(int32_t dtype, const void *rows,
                                     int32_t indexType, const void *positions,
                                     const void *weights, const void *dout,
                                     void *drows, void *dweights,
                                     int64_t tokens, int64_t dim, int64_t k) {
  const char *kernel = "zrt_moe_combine_grad";
  KernelSpan span(kernel);
  checkDims(kernel, tokens, dim, k);
  int64_t pairs = tokens * k;
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    dispatchIndex(indexType, [&](auto idTag) {
      using I = decltype(idTag);
      const T *r = static_cast<const T *>(rows);
      const I *pos = static_cast<const I *>(positions);
      const T *w = static_cast<const T *>(weights);
      const T *g = static_cast<const T *>(dout);
      T *dr = static_cast<T *>(drows);
      T *dwv = static_cast<T *>(dweights);
      // Positions are a permutation of the pairs: each row of drows is
      // written by exactly one (t, j).
      parallelFor(tokens, rowGrain(dim * k), [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t)
          for (int64_t j = 0; j < k; ++j) {
            int64_t p = checkedIndex(pos, t * k + j, pairs, kernel, "position",
                                     "at pair");
            float wj = toFloat(w[t * k + j]), dot = 0.0f;
            for (int64_t c = 0; c < dim; ++c) {
              float gc = toFloat(g[t * dim + c]);
              dr[p * dim + c] = fromFloat<T>(wj * gc);
              dot += gc * toFloat(r[p * dim + c]);
            }
            dwv[t * k + j] = fromFloat<T>(dot);
          }
      });
    });
  });
}

extern "C" void zrt_moe_aux_loss(int32_t dtype, const void *logits, float *loss,
                                 int64_t rows, int64_t experts, int64_t k) {
  const char *kernel = "zrt_moe_aux_loss";
  KernelSpan span(kernel);
  checkRouting(kernel, rows, experts, k);
  Scratch scratch(zrt_scratch_moe_aux_loss(experts));
  AuxScratch a(scratch, experts);
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    countSelections(static_cast<const T *>(logits), rows, experts, k, true, a);
  });
  double sum = 0.0, n = double(rows);
  for (int64_t e = 0; e < experts; ++e)
    sum += (a.counts[e] / n) * (a.sums[e] / n);
  *loss = rows ? float(sum * double(experts)) : 0.0f;
}

extern "C" void zrt_moe_aux_loss_grad(int32_t dtype, const void *logits,
                                      const float *dloss, void *dlogits,
                                      int64_t rows, int64_t experts,
                                      int64_t k) {
  const char *kernel = "zrt_moe_aux_loss_grad";
  KernelSpan span(kernel);
  checkRouting(kernel, rows, experts, k);
  Scratch scratch(zrt_scratch_moe_aux_loss(experts));
  AuxScratch a(scratch, experts);
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *l = static_cast<const T *>(logits);
    T *dl = static_cast<T *>(dlogits);
    countSelections(l, rows, experts, k, false, a);
    // d loss / d p[n, e] = E c[e] / N^2, the same for every row.
    double n = double(rows);
    for (int64_t e = 0; e < experts; ++e)
      a.sums[e] = double(*dloss) * double(experts) * a.counts[e] / (n * n);
    auxGradRows(l, dl, rows, experts, a);
  });
}

extern "C" void zrt_moe_expert_counts(int32_t dtype, const void *logits,
                                      int64_t *counts, int64_t rows,
                                      int64_t experts, int64_t k) {
  const char *kernel = "zrt_moe_expert_counts";
  KernelSpan span(kernel);
  checkRouting(kernel, rows, experts, k);
  Scratch scratch(zrt_scratch_moe_aux_loss(experts));
  AuxScratch a(scratch, experts);
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    countSelections(static_cast<const T *>(logits), rows, experts, k, false, a);
  });
  for (int64_t e = 0; e < experts; ++e)
    counts[e] = int64_t(a.counts[e]);
}

extern "C" void zrt_moe_aux_loss_counts(int32_t dtype, const void *logits,
                                        const int64_t *counts, float *loss,
                                        int64_t rows, int64_t experts,
                                        int64_t k, int64_t globalRows) {
  const char *kernel = "zrt_moe_aux_loss_counts";
  KernelSpan span(kernel);
  checkRouting(kernel, rows, experts, k);
  Scratch scratch(zrt_scratch_moe_aux_loss(experts));
  AuxScratch a(scratch, experts);
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    countSelections(static_cast<const T *>(logits), rows, experts, k, true, a);
  });
  double sum = 0.0, n = double(rows), g = double(globalRows);
  for (int64_t e = 0; e < experts; ++e)
    sum += (double(counts[e]) / g) * (a.sums[e] / n);
  *loss = rows && globalRows ? float(sum * double(experts)) : 0.0f;
}

extern "C" void zrt_moe_aux_loss_counts_grad(int32_t dtype, const void *logits,
                                             const int64_t *counts,
                                             const float *dloss, void *dlogits,
                                             int64_t rows, int64_t experts,
                                             int64_t k, int64_t globalRows) {
  const char *kernel = "zrt_moe_aux_loss_counts_grad";
  KernelSpan span(kernel);
  checkRouting(kernel, rows, experts, k);
  if (rows == 0 || globalRows == 0)
    return;
  Scratch scratch(zrt_scratch_moe_aux_loss(experts));
  AuxScratch a(scratch, experts);
  // d loss / d p[n, e] = E counts[e] / (G N), the same for every row.
  double scale =
      double(*dloss) * double(experts) / (double(globalRows) * double(rows));
  for (int64_t e = 0; e < experts; ++e)
    a.sums[e] = scale * double(counts[e]);
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *l = static_cast<const T *>(logits);
    T *dl = static_cast<T *>(dlogits);
    auxGradRows(l, dl, rows, experts, a);
  });
}
