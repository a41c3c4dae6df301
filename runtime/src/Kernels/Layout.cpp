//===- Layout.cpp - Transpose, split, concat and the label shift ----------===//
//
// Part of the zero-mlir project.
//
// Pure data movement: elements are moved as 2- or 4-byte words (labels as
// their 4- or 8-byte integers), without conversion.
//
//===----------------------------------------------------------------------===//

#include "Driver/Trace.h"
#include "Kernels/Kernels.h"
#include "Support/Permutation.h"

#include <cstring>

using namespace zrt;

namespace {

constexpr int64_t kTile = 32;

/// Input offset of the output element whose index in the dims other than
/// `skipA` and `skipB` is `linear` (row-major over those dims).
int64_t inOffset(const Permutation &p, int64_t linear, int skipA, int skipB) {
  int64_t off = 0;
  for (int i = p.rank - 1; i >= 0; --i) {
    if (i == skipA || i == skipB)
      continue;
    off += (linear % p.size[i]) * p.inStride[i];
    linear /= p.size[i];
  }
  return off;
}

int64_t outOffset(const Permutation &p, int64_t linear, int skipA, int skipB) {
  int64_t off = 0;
  for (int i = p.rank - 1; i >= 0; --i) {
    if (i == skipA || i == skipB)
      continue;
    off += (linear % p.size[i]) * p.outStride[i];
    linear /= p.size[i];
  }
  return off;
}

template <typename W>
void permute(const W *in, W *out, const Permutation &p, int64_t n) {
  int last = p.rank - 1;
  if (p.rank == 0 || p.inStride[last] == 1) {
    // Contiguous innermost run in both: copy rows.
    int64_t len = p.rank ? p.size[last] : 1;
    parallelFor(n / len, rowGrain(len), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r)
        std::memcpy(out + r * len, in + inOffset(p, r, last, last),
                    size_t(len) * sizeof(W));
    });
    return;
  }
  // Tiled 2-D transpose between the output's innermost dim b and the dim a
  // with the smallest input stride: reads run along a, writes along b.
  int a = 0;
  for (int i = 1; i < last; ++i)
    if (p.inStride[i] < p.inStride[a])
      a = i;
  int64_t sizeA = p.size[a], sizeB = p.size[last];
  int64_t strideA = p.inStride[a], strideB = p.inStride[last];
  int64_t outA = p.outStride[a];
  int64_t tilesA = ceilDiv(sizeA, kTile);
  int64_t items = n / (sizeA * sizeB) * tilesA;
  parallelFor(items, rowGrain(kTile * sizeB), [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      int64_t outer = item / tilesA, ta = item % tilesA;
      const W *src = in + inOffset(p, outer, a, last);
      W *dst = out + outOffset(p, outer, a, last);
      int64_t a1 = std::min(sizeA, (ta + 1) * kTile);
      for (int64_t b0 = 0; b0 < sizeB; b0 += kTile) {
        int64_t b1 = std::min(sizeB, b0 + kTile);
        for (int64_t ia = ta * kTile; ia < a1; ++ia)
          for (int64_t ib = b0; ib < b1; ++ib)
            dst[ia * outA + ib] = src[ia * strideA + ib * strideB];
      }
    }
  });
}

/// Copies between [outer, sum(sizes), inner] and the parts [outer, sizes[p],
/// inner]; `toParts` chooses the direction.
void segmentCopy(int64_t elemSize, char *whole, char *const *parts,
                 const int64_t *sizes, int32_t num, int64_t outer,
                 int64_t inner, bool toParts, const char *kernel) {
  int64_t total = checkParts(kernel, sizes, num, outer, inner);
  auto copy = [&](int64_t o, int32_t p, int64_t offset) {
    int64_t bytes = sizes[p] * inner * elemSize;
    char *w = whole + (o * total + offset) * inner * elemSize;
    char *part = parts[p] + o * bytes;
    return toParts ? std::make_pair(part, w) : std::make_pair(w, part);
  };
  if (outer < availableThreads()) {
    // Few long runs: parallelize each copy instead.
    for (int64_t o = 0; o < outer; ++o) {
      int64_t offset = 0;
      for (int32_t p = 0; p < num; offset += sizes[p++]) {
        auto [dst, src] = copy(o, p, offset);
        zrt_copy(dst, src, sizes[p] * inner * elemSize);
      }
    }
    return;
  }
  parallelFor(outer, rowGrain(total * inner), [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      int64_t offset = 0;
      for (int32_t p = 0; p < num; offset += sizes[p++]) {
        auto [dst, src] = copy(o, p, offset);
        std::memcpy(dst, src, size_t(sizes[p] * inner * elemSize));
      }
    }
  });
}

} // namespace

extern "C" void zrt_transpose(int32_t dtype, const void *in, void *out,
                              int32_t rank, const int64_t *inShape,
                              const int64_t *perm) {
  KernelSpan span("zrt_transpose");
  Permutation p = simplifyPermutation(rank, inShape, perm);
  int64_t n = 1;
  for (int i = 0; i < rank; ++i)
    n *= inShape[i];
  if (n == 0)
    return;
  if (dtypeSize(dtype) == 4)
    permute(static_cast<const uint32_t *>(in), static_cast<uint32_t *>(out), p,
            n);
  else
    permute(static_cast<const uint16_t *>(in), static_cast<uint16_t *>(out), p,
            n);
}

extern "C" void zrt_split(int32_t dtype, const void *in, void *const *outs,
                          const int64_t *sizes, int32_t num, int64_t outer,
                          int64_t inner) {
  KernelSpan span("zrt_split");
  segmentCopy(dtypeSize(dtype), static_cast<char *>(const_cast<void *>(in)),
              reinterpret_cast<char *const *>(outs), sizes, num, outer, inner,
              true, "zrt_split");
}

extern "C" void zrt_concat(int32_t dtype, const void *const *ins,
                           const int64_t *sizes, int32_t num, void *out,
                           int64_t outer, int64_t inner) {
  KernelSpan span("zrt_concat");
  segmentCopy(
      dtypeSize(dtype), static_cast<char *>(out),
      const_cast<char *const *>(reinterpret_cast<const char *const *>(ins)),
      sizes, num, outer, inner, false, "zrt_concat");
}

extern "C" void zrt_shift_labels(int32_t labelType, const void *labels,
                                 void *out, int64_t rows, int64_t cols,
                                 int64_t fill) {
  KernelSpan span("zrt_shift_labels");
  checkDims("zrt_shift_labels", rows, cols);
  dispatchIndex(labelType, [&](auto tag) {
    using I = decltype(tag);
    if (int64_t(I(fill)) != fill)
      fatal("zrt_shift_labels: fill %lld does not fit the labels' type",
            (long long)fill);
    const I *in = static_cast<const I *>(labels);
    I *dst = static_cast<I *>(out);
    parallelFor(rows, rowGrain(cols), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        if (cols == 0)
          continue;
        std::memcpy(dst + r * cols, in + r * cols + 1,
                    size_t(cols - 1) * sizeof(I));
        dst[r * cols + cols - 1] = I(fill);
      }
    });
  });
}

extern "C" void zrt_document_ids(int32_t positionType, const void *positions,
                                 int32_t *ids, int64_t rows, int64_t cols) {
  KernelSpan span("zrt_document_ids");
  checkDims("zrt_document_ids", rows, cols);
  dispatchIndex(positionType, [&](auto tag) {
    using I = decltype(tag);
    const I *pos = static_cast<const I *>(positions);
    parallelFor(rows, rowGrain(cols), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r)
        documentIdsRow(pos + r * cols, ids + r * cols, cols);
    });
  });
}
