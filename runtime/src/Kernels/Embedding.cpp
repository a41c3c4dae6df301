//===- Embedding.cpp - Table lookup and its scatter-add gradient ----------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "Device/Memory.h"
#include "Driver/Trace.h"
#include "Kernels/KernelMath.h"
#include "Kernels/Kernels.h"
#include "zero_rt/scratch.h"

#include <cstring>

using namespace zrt;

extern "C" void zrt_embedding(int32_t dtype, const void *table, int32_t idType,
                              const void *ids, void *out, int64_t numIds,
                              int64_t vocab, int64_t dim) {
  KernelSpan span("zrt_embedding");
  checkDims("zrt_embedding", numIds, vocab, dim);
  int64_t rowBytes = dim * dtypeSize(dtype);
  dispatchIndex(idType, [&](auto idTag) {
    using I = decltype(idTag);
    const I *idv = static_cast<const I *>(ids);
    parallelFor(numIds, rowGrain(dim), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        int64_t id =
            checkedIndex(idv, i, vocab, "zrt_embedding", "id", "at position");
        std::memcpy(static_cast<char *>(out) + i * rowBytes,
                    static_cast<const char *>(table) + id * rowBytes,
                    size_t(rowBytes));
      }
    });
  });
}

extern "C" void zrt_embedding_grad(int32_t dtype, const void *dy,
                                   int32_t idType, const void *ids,
                                   void *dtable, int64_t numIds, int64_t vocab,
                                   int64_t dim, int64_t paddingIdx) {
  KernelSpan span("zrt_embedding_grad");
  checkDims("zrt_embedding_grad", numIds, vocab, dim);
  // Grouping positions by id lets each table row be summed by one thread in
  // fp32 and stored once: no atomics, no 16-bit partial sums, and a fixed
  // summation order.
  Scratch scratch(zrt_scratch_embedding_grad(numIds, vocab, dim));
  int64_t *ends = scratch.as<int64_t>();
  int64_t *order = ends + vocab + 1;
  dispatchIndex(idType, [&](auto idTag) {
    using I = decltype(idTag);
    const I *idv = static_cast<const I *>(ids);
    std::fill(ends, ends + vocab + 1, int64_t(0));
    for (int64_t i = 0; i < numIds; ++i)
      ++ends[checkedIndex(idv, i, vocab, "zrt_embedding_grad", "id",
                          "at position") +
             1];
    for (int64_t v = 0; v < vocab; ++v)
      ends[v + 1] += ends[v];
    // Filling advances ends[id] from the start of bucket id to its end.
    for (int64_t i = 0; i < numIds; ++i)
      order[ends[int64_t(idv[i])]++] = i;
  });
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *g = static_cast<const T *>(dy);
    T *out = static_cast<T *>(dtable);
    // Each table row costs a store plus its share of the ids' rows.
    int64_t rowCost = dim * (1 + numIds / std::max<int64_t>(vocab, 1));
    parallelFor(vocab, rowGrain(rowCost), [&](int64_t begin, int64_t end) {
      alignas(64) float acc[kBlock], buf[kBlock];
      for (int64_t v = begin; v < end; ++v) {
        int64_t first = v == 0 ? 0 : ends[v - 1], last = ends[v];
        if (v == paddingIdx)
          first = last; // the padding row gets no gradient

        for (int64_t c0 = 0; c0 < dim; c0 += kBlock) {
          int64_t len = std::min(kBlock, dim - c0);
          std::fill(acc, acc + len, 0.0f);
          for (int64_t p = first; p < last; ++p) {
            const float *x = loadF32(g + order[p] * dim + c0, len, buf);
#pragma omp simd
            for (int64_t t = 0; t < len; ++t)
              acc[t] += x[t];
          }
          fromFloat(acc, out + v * dim + c0, len);
        }
      }
    });
  });
}

// torch.gather along the last dimension (a policy-gradient loss's
// per-token log-probabilities) and its scatter-add.

extern "C" void zrt_gather(int32_t dtype, const void *x, int32_t indexType,
                           const void *indices, void *y, int64_t rows,
                           int64_t cols, int64_t k) {
  KernelSpan span("zrt_gather");
  checkDims("zrt_gather", rows, cols, k);
  int64_t size = dtypeSize(dtype);
  dispatchIndex(indexType, [&](auto idTag) {
    using I = decltype(idTag);
    const I *idx = static_cast<const I *>(indices);
    parallelFor(rows, rowGrain(k), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r)
        for (int64_t j = 0; j < k; ++j) {
          int64_t c = checkedIndex(idx, r * k + j, cols, "zrt_gather", "index",
                                   "at position");
          std::memcpy(static_cast<char *>(y) + (r * k + j) * size,
                      static_cast<const char *>(x) + (r * cols + c) * size,
                      size_t(size));
        }
    });
  });
}

extern "C" void zrt_gather_grad(int32_t dtype, int32_t indexType,
                                const void *indices, const void *dy, void *dx,
                                int64_t rows, int64_t cols, int64_t k) {
  KernelSpan span("zrt_gather_grad");
  checkDims("zrt_gather_grad", rows, cols, k);
  dispatchIndex(indexType, [&](auto idTag) {
    using I = decltype(idTag);
    const I *idx = static_cast<const I *>(indices);
    dispatchFloat(dtype, [&](auto tag) {
      using T = decltype(tag);
      const T *g = static_cast<const T *>(dy);
      T *out = static_cast<T *>(dx);
      // A row's zeros, then each distinct index's sum of its gradients in
      // fp32 in the order of j, stored once (k is small: the quadratic
      // search beats a sort).
      parallelFor(rows, rowGrain(cols + k * k),
                  [&](int64_t begin, int64_t end) {
                    for (int64_t r = begin; r < end; ++r) {
                      const I *ir = idx + r * k;
                      const T *gr = g + r * k;
                      T *o = out + r * cols;
                      for (int64_t j = 0; j < k; ++j)
                        checkedIndex(ir, j, cols, "zrt_gather_grad", "index",
                                     "at position");
                      std::fill(o, o + cols, fromFloat<T>(0.0f));
                      gatherGradRow(
                          ir, k, [&](int64_t p) { return toFloat(gr[p]); },
                          [&](int64_t c, float sum) {
                            o[c] = fromFloat<T>(sum);
                          });
                    }
                  });
    });
  });
}
