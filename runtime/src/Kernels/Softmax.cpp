//===- Softmax.cpp - Softmax, cross-entropy and row reductions ------------===//
//
// Part of the zero-mlir project.
//
// Row-wise kernels parallel over rows. Each row is streamed in fp32 blocks
// (max, sum of exponentials, output), recomputing exp instead of keeping a
// row buffer, so that no row-wise kernel here needs scratch. The chunked
// output projection and loss (zrt_linear_cross_entropy) keeps one chunk's
// logits in scratch.
//
//===----------------------------------------------------------------------===//

#include "Device/Memory.h"
#include "Driver/Trace.h"
#include "Kernels/Kernels.h"

#include "zero_rt/scratch.h"

#include <algorithm>
#include <limits>

using namespace zrt;

namespace {

struct RowStats {
  float max;
  float sum; // sum of exp(x - max)
};

/// The maximum of a row, -inf for none. NaNs are skipped here and propagate
/// through the sum of exponentials instead.
template <typename T>
float rowMax(const T *row, int64_t n, float *buf) {
  float m = -std::numeric_limits<float>::infinity();
  forBlocks(row, n, buf, [&](const float *x, int64_t, int64_t len) {
    // A local accumulator and a plain select: GCC 12 does not vectorize a
    // std::max reduction on a captured reference.
    float mx = m;
#pragma omp simd reduction(max : mx)
    for (int64_t t = 0; t < len; ++t)
      mx = x[t] > mx ? x[t] : mx;
    m = mx;
  });
  return m;
}

/// The sum of exp(x - shift) over a row.
template <typename T>
float rowExpSum(const T *row, int64_t n, float shift, float *buf) {
  float s = 0.0f;
  forBlocks(row, n, buf, [&](const float *x, int64_t, int64_t len) {
#pragma omp simd reduction(+ : s)
    for (int64_t t = 0; t < len; ++t)
      s += expApprox(x[t] - shift);
  });
  return s;
}

template <typename T>
RowStats rowStats(const T *row, int64_t n, float *buf) {
  float m = rowMax(row, n, buf);
  return {m, rowExpSum(row, n, m, buf)};
}

/// out[t] = (exp(x[t] - max) / sum + shift at `hot`) * factor over a row;
/// the softmax (hot = -1) and cross-entropy gradient share it.
template <typename T>
void writeProbabilities(const T *row, T *out, int64_t n, RowStats st,
                        float factor, int64_t hot, float hotShift) {
  alignas(64) float bufIn[kBlock], bufOut[kBlock];
  float scale = factor / st.sum;
  forBlocks(row, n, bufIn, [&](const float *x, int64_t off, int64_t len) {
    float *y = outF32(out + off, bufOut);
#pragma omp simd
    for (int64_t t = 0; t < len; ++t)
      y[t] = expApprox(x[t] - st.max) * scale;
    if (hot >= off && hot < off + len)
      y[hot - off] -= hotShift;
    storeF32(y, out + off, len);
  });
}

} // namespace

extern "C" void zrt_softmax(int32_t dtype, const void *x, void *y, int64_t rows,
                            int64_t cols) {
  KernelSpan span("zrt_softmax");
  checkDims("zrt_softmax", rows, cols);
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *in = static_cast<const T *>(x);
    T *out = static_cast<T *>(y);
    parallelFor(rows, rowGrain(cols), [&](int64_t begin, int64_t end) {
      alignas(64) float buf[kBlock];
      for (int64_t r = begin; r < end; ++r) {
        RowStats st = rowStats(in + r * cols, cols, buf);
        writeProbabilities(in + r * cols, out + r * cols, cols, st, 1.0f, -1,
                           0.0f);
      }
    });
  });
}

extern "C" void zrt_softmax_grad(int32_t dtype, const void *y, const void *dy,
                                 void *dx, int64_t rows, int64_t cols) {
  KernelSpan span("zrt_softmax_grad");
  checkDims("zrt_softmax_grad", rows, cols);
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *yv = static_cast<const T *>(y);
    const T *dyv = static_cast<const T *>(dy);
    T *dxv = static_cast<T *>(dx);
    parallelFor(rows, rowGrain(cols), [&](int64_t begin, int64_t end) {
      alignas(64) float bufY[kBlock], bufG[kBlock], bufOut[kBlock];
      for (int64_t r = begin; r < end; ++r) {
        const T *yr = yv + r * cols, *gr = dyv + r * cols;
        T *outr = dxv + r * cols;
        float dot = 0.0f;
        forBlocks(yr, cols, bufY,
                  [&](const float *p, int64_t off, int64_t len) {
                    const float *g = loadF32(gr + off, len, bufG);
#pragma omp simd reduction(+ : dot)
                    for (int64_t t = 0; t < len; ++t)
                      dot += p[t] * g[t];
                  });
        forBlocks(yr, cols, bufY,
                  [&](const float *p, int64_t off, int64_t len) {
                    const float *g = loadF32(gr + off, len, bufG);
                    float *o = outF32(outr + off, bufOut);
#pragma omp simd
                    for (int64_t t = 0; t < len; ++t)
                      o[t] = p[t] * (g[t] - dot);
                    storeF32(o, outr + off, len);
                  });
      }
    });
  });
}

extern "C" void zrt_logsumexp(int32_t dtype, const void *x, void *y,
                              int64_t rows, int64_t cols) {
  KernelSpan span("zrt_logsumexp");
  checkDims("zrt_logsumexp", rows, cols);
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *in = static_cast<const T *>(x);
    T *out = static_cast<T *>(y);
    parallelFor(rows, rowGrain(cols), [&](int64_t begin, int64_t end) {
      alignas(64) float buf[kBlock];
      for (int64_t r = begin; r < end; ++r) {
        const T *row = in + r * cols;
        float shift = logsumexpShift(rowMax(row, cols, buf));
        out[r] =
            fromFloat<T>(logsumexp(rowExpSum(row, cols, shift, buf), shift));
      }
    });
  });
}

extern "C" void zrt_logsumexp_grad(int32_t dtype, const void *x, const void *y,
                                   const void *dy, void *dx, int64_t rows,
                                   int64_t cols) {
  KernelSpan span("zrt_logsumexp_grad");
  checkDims("zrt_logsumexp_grad", rows, cols);
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *xv = static_cast<const T *>(x);
    const T *yv = static_cast<const T *>(y);
    const T *dyv = static_cast<const T *>(dy);
    T *dxv = static_cast<T *>(dx);
    parallelFor(rows, rowGrain(cols), [&](int64_t begin, int64_t end) {
      alignas(64) float bufX[kBlock], bufOut[kBlock];
      for (int64_t r = begin; r < end; ++r) {
        float yr = toFloat(yv[r]), g = toFloat(dyv[r]);
        T *outr = dxv + r * cols;
        forBlocks(xv + r * cols, cols, bufX,
                  [&](const float *p, int64_t off, int64_t len) {
                    float *o = outF32(outr + off, bufOut);
#pragma omp simd
                    for (int64_t t = 0; t < len; ++t)
                      o[t] = logsumexpGrad(p[t], yr, g);
                    storeF32(o, outr + off, len);
                  });
      }
    });
  });
}

extern "C" void zrt_reduce_max(int32_t dtype, const void *x, void *y,
                               int64_t rows, int64_t cols) {
  KernelSpan span("zrt_reduce_max");
  checkDims("zrt_reduce_max", rows, cols);
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *in = static_cast<const T *>(x);
    T *out = static_cast<T *>(y);
    parallelFor(rows, rowGrain(cols), [&](int64_t begin, int64_t end) {
      alignas(64) float buf[kBlock];
      for (int64_t r = begin; r < end; ++r) {
        // Exact in any order: the maximum is one of the values.
        float m = -std::numeric_limits<float>::infinity();
        forBlocks(in + r * cols, cols, buf,
                  [&](const float *p, int64_t, int64_t len) {
                    for (int64_t t = 0; t < len; ++t)
                      m = maxNaN(m, p[t]);
                  });
        out[r] = fromFloat<T>(m);
      }
    });
  });
}

extern "C" void zrt_reduce_max_grad(int32_t dtype, const void *x, const void *y,
                                    const void *dy, void *dx, int64_t rows,
                                    int64_t cols) {
  KernelSpan span("zrt_reduce_max_grad");
  checkDims("zrt_reduce_max_grad", rows, cols);
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *xv = static_cast<const T *>(x);
    const T *yv = static_cast<const T *>(y);
    const T *dyv = static_cast<const T *>(dy);
    T *dxv = static_cast<T *>(dx);
    parallelFor(rows, rowGrain(cols), [&](int64_t begin, int64_t end) {
      alignas(64) float bufX[kBlock], bufOut[kBlock];
      for (int64_t r = begin; r < end; ++r) {
        const T *xr = xv + r * cols;
        T *outr = dxv + r * cols;
        float yr = toFloat(yv[r]);
        float ties = 0.0f;
        forBlocks(xr, cols, bufX, [&](const float *p, int64_t, int64_t len) {
#pragma omp simd reduction(+ : ties)
          for (int64_t t = 0; t < len; ++t)
            ties += p[t] == yr ? 1.0f : 0.0f;
        });
        float g = toFloat(dyv[r]) / ties;
        forBlocks(xr, cols, bufX,
                  [&](const float *p, int64_t off, int64_t len) {
                    float *o = outF32(outr + off, bufOut);
#pragma omp simd
                    for (int64_t t = 0; t < len; ++t)
                      o[t] = reduceMaxGrad(p[t], yr, g);
                    storeF32(o, outr + off, len);
                  });
      }
    });
  });
}

namespace {
/// The rows of a loss that count: those whose label is not ignored.
template <typename I>
int64_t countedRows(const I *labels, int64_t rows, int32_t ignore,
                    int64_t ignoreIndex) {
  if (!ignore)
    return rows;
  int64_t n = 0;
  for (int64_t r = 0; r < rows; ++r)
    n += ignoredLabel(int64_t(labels[r]), ignore, ignoreIndex) ? 0 : 1;
  return n;
}
} // namespace

/// The padding columns of a loss over [rows, cols] logits whose first
/// `classes` columns are the classes.
// Padded rows are read with stride `cols` and reduced over exactly the
// `classes` leading entries, in the same blocks and with the same row grain
// as an unpadded row: the loss and gradient are bitwise those of the
// unpadded logits.
namespace {
/// The sum over rows of logsumexp(x[r, :classes]) - x[r, label], in double,
/// skipping ignored rows: the loss of zrt_softmax_cross_entropy before its
/// mean, shared with the chunks of zrt_linear_cross_entropy.
template <typename T, typename I>
double crossEntropySum(const char *kernel, const T *x, const I *y, int64_t rows,
                       int64_t classes, int64_t cols, int32_t ignore,
                       int64_t ignoreIndex) {
  return deterministicSum<double>(
      rows, rowGrain(classes), [&](int64_t begin, int64_t end) {
        alignas(64) float buf[kBlock];
        double sum = 0.0;
        for (int64_t r = begin; r < end; ++r) {
          if (ignoredLabel(int64_t(y[r]), ignore, ignoreIndex))
            continue;
          int64_t label =
              checkedIndex(y, r, classes, kernel, "label", "of row");
          const T *row = x + r * cols;
          RowStats st = rowStats(row, classes, buf);
          sum += std::log(double(st.sum)) + double(st.max) -
                 double(toFloat(row[label]));
        }
        return sum;
      });
}

/// dx = (softmax(x) - onehot(y)) * g over rows, zero on ignored rows and
/// padding columns: zrt_softmax_cross_entropy_grad once g = dloss / count.
/// dx may be x (each row is read before it is written).
template <typename T, typename I>
void crossEntropyGradRows(const char *kernel, const T *x, const I *y, float g,
                          T *dx, int64_t rows, int64_t classes, int64_t cols,
                          int32_t ignore, int64_t ignoreIndex) {
  parallelFor(rows, rowGrain(cols), [&](int64_t begin, int64_t end) {
    alignas(64) float buf[kBlock];
    for (int64_t r = begin; r < end; ++r) {
      if (ignoredLabel(int64_t(y[r]), ignore, ignoreIndex)) {
        std::fill(dx + r * cols, dx + (r + 1) * cols, fromFloat<T>(0.0f));
        continue;
      }
      int64_t label = checkedIndex(y, r, classes, kernel, "label", "of row");
      RowStats st = rowStats(x + r * cols, classes, buf);
      writeProbabilities(x + r * cols, dx + r * cols, classes, st, g, label, g);
      std::fill(dx + r * cols + classes, dx + (r + 1) * cols,
                fromFloat<T>(0.0f));
    }
  });
}
} // namespace

extern "C" void zrt_softmax_cross_entropy(int32_t dtype, const void *logits,
                                          int32_t labelType, const void *labels,
                                          float *loss, int64_t rows,
                                          int64_t classes, int64_t cols,
                                          int32_t ignore, int64_t ignoreIndex) {
  const char *kernel = "zrt_softmax_cross_entropy";
  KernelSpan span(kernel);
  checkLoss(kernel, rows, classes, cols);
  if (rows > 0 && classes == 0)
    fatal("zrt_softmax_cross_entropy: no classes");
  dispatchFloat(dtype, [&](auto tag) {
    dispatchIndex(labelType, [&](auto labelTag) {
      using T = decltype(tag);
      using I = decltype(labelTag);
      const I *y = static_cast<const I *>(labels);
      double total = crossEntropySum(kernel, static_cast<const T *>(logits), y,
                                     rows, classes, cols, ignore, ignoreIndex);
      *loss = lossMean(total, countedRows(y, rows, ignore, ignoreIndex));
    });
  });
}

extern "C" void zrt_softmax_cross_entropy_grad(
    int32_t dtype, const void *logits, int32_t labelType, const void *labels,
    const float *dloss, void *dlogits, int64_t rows, int64_t classes,
    int64_t cols, int32_t ignore, int64_t ignoreIndex) {
  const char *kernel = "zrt_softmax_cross_entropy_grad";
  KernelSpan span(kernel);
  checkLoss(kernel, rows, classes, cols);
  if (rows == 0)
    return;
  dispatchFloat(dtype, [&](auto tag) {
    dispatchIndex(labelType, [&](auto labelTag) {
      using T = decltype(tag);
      using I = decltype(labelTag);
      const I *y = static_cast<const I *>(labels);
      float g = lossRowGrad(*dloss, countedRows(y, rows, ignore, ignoreIndex));
      crossEntropyGradRows(kernel, static_cast<const T *>(logits), y, g,
                           static_cast<T *>(dlogits), rows, classes, cols,
                           ignore, ignoreIndex);
    });
  });
}

namespace {
/// Checks a chunked loss's shape, then calls fn(T(), I()) with its element
/// and labels' types.
template <typename Fn>
void dispatchLinearLoss(const char *kernel, int32_t dtype, int32_t labelType,
                        int64_t rows, int64_t hidden, int64_t vocab,
                        int64_t chunk, const Fn &fn) {
  checkDims(kernel, rows, hidden);
  checkLoss(kernel, rows, vocab, vocab);
  if (rows > 0 && vocab == 0)
    fatal("%s: no classes", kernel);
  if (chunk < 1)
    fatal("%s: chunk %lld is not positive", kernel, (long long)chunk);
  dispatchFloat(dtype, [&](auto tag) {
    dispatchIndex(labelType, [&](auto labelTag) { fn(tag, labelTag); });
  });
}

/// dst[i] = src[i] in fp32 over n elements.
template <typename T>
void convertToFloat(const T *src, float *dst, int64_t n) {
  parallelFor(n, kBlock, [&](int64_t begin, int64_t end) {
    toFloat(src + begin, dst + begin, end - begin);
  });
}

/// dst[i] = src[i] rounded to T over n elements.
template <typename T>
void convertFromFloat(const float *src, T *dst, int64_t n) {
  parallelFor(n, kBlock, [&](int64_t begin, int64_t end) {
    fromFloat(src + begin, dst + begin, end - begin);
  });
}
} // namespace

// The logits of one chunk of rows at a time, in the scratch the compiler
// plans (zrt_scratch_linear_cross_entropy). The rows of a chunk are
// reduced as the unchunked kernel reduces them; the sums over chunks are in
// double, so the loss matches the unchunked one to fp32 rounding. 16-bit
// logits are those of zrt_matmul (rounded to 16 bits, as the unchunked
// matmul rounds them) and the loss is taken from them in fp32.
extern "C" void zrt_linear_cross_entropy(int32_t dtype, const void *x,
                                         const void *w, int32_t labelType,
                                         const void *labels, float *loss,
                                         int64_t rows, int64_t hidden,
                                         int64_t vocab, int64_t chunk,
                                         int32_t ignore, int64_t ignoreIndex) {
  const char *kernel = "zrt_linear_cross_entropy";
  KernelSpan span(kernel);
  dispatchLinearLoss(
      kernel, dtype, labelType, rows, hidden, vocab, chunk,
      [&](auto tag, auto labelTag) {
        using T = decltype(tag);
        using I = decltype(labelTag);
        const T *xv = static_cast<const T *>(x);
        const I *y = static_cast<const I *>(labels);
        // The 16-bit matmul's own scratch follows the chunk's logits.
        int64_t n0 = std::min(chunk, rows);
        Scratch scratch(n0 * vocab * int64_t(sizeof(T)));
        T *logits = scratch.as<T>();
        double total = 0.0;
        for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
          int64_t n = std::min(chunk, rows - r0);
          if constexpr (std::is_same_v<T, float>)
            gemmF32(xv + r0 * hidden, static_cast<const float *>(w), logits, n,
                    vocab, hidden, false, true, false);
          else
            zrt_matmul(dtype, xv + r0 * hidden, w, logits, 1, n, vocab, hidden,
                       0, 1, 0, hidden);
          total += crossEntropySum(kernel, logits, y + r0, n, vocab, vocab,
                                   ignore, ignoreIndex);
        }
        *loss = lossMean(total, countedRows(y, rows, ignore, ignoreIndex));
      });
}

// f32: dw is summed over chunks by BLAS into the result. 16-bit: each
// chunk's logits gradient is rounded to 16 bits as the unchunked loss's
// gradient is, dx's rows are the 16-bit matmul of it, and dw is summed in
// fp32 scratch and rounded once, as the unchunked 16-bit matmul sums over
// all rows in fp32 before rounding.
extern "C" void zrt_linear_cross_entropy_grad(
    int32_t dtype, const void *x, const void *w, int32_t labelType,
    const void *labels, const float *dloss, void *dx, void *dw, int64_t rows,
    int64_t hidden, int64_t vocab, int64_t chunk, int32_t ignore,
    int64_t ignoreIndex) {
  const char *kernel = "zrt_linear_cross_entropy_grad";
  KernelSpan span(kernel);
  dispatchLinearLoss(
      kernel, dtype, labelType, rows, hidden, vocab, chunk,
      [&](auto tag, auto labelTag) {
        using T = decltype(tag);
        using I = decltype(labelTag);
        const T *xv = static_cast<const T *>(x);
        const T *wv = static_cast<const T *>(w);
        const I *y = static_cast<const I *>(labels);
        T *dxv = static_cast<T *>(dx);
        T *dwv = static_cast<T *>(dw);
        if (rows == 0) {
          std::fill(dwv, dwv + vocab * hidden, fromFloat<T>(0.0f));
          return;
        }
        float g =
            lossRowGrad(*dloss, countedRows(y, rows, ignore, ignoreIndex));
        if constexpr (std::is_same_v<T, float>) {
          Scratch scratch(zrt_scratch_linear_cross_entropy(
              dtype, rows, hidden, vocab, chunk, /*grad=*/1));
          float *dlogits = scratch.as<float>();
          for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
            int64_t n = std::min(chunk, rows - r0);
            gemmF32(xv + r0 * hidden, wv, dlogits, n, vocab, hidden, false,
                    true, false);
            crossEntropyGradRows(kernel, dlogits, y + r0, g, dlogits, n, vocab,
                                 vocab, ignore, ignoreIndex);
            // dx rows = dlogits w; dw (+)= dlogits^T x rows.
            gemmF32(dlogits, wv, dxv + r0 * hidden, n, hidden, vocab, false,
                    false, false);
            gemmF32(dlogits, xv + r0 * hidden, dwv, vocab, hidden, n, true,
                    false, r0 > 0);
          }
        } else {
          int64_t n0 = std::min(chunk, rows);
          // dw's fp32 sum, the chunk's logits gradient and input rows in
          // fp32, then its 16-bit logits; the 16-bit matmuls' own scratch
          // follows.
          Scratch scratch((vocab * hidden + n0 * vocab + n0 * hidden) * 4 +
                          n0 * vocab * int64_t(sizeof(T)));
          float *acc = scratch.as<float>();
          float *dlogits32 = acc + vocab * hidden;
          float *x32 = dlogits32 + n0 * vocab;
          T *dlogits = reinterpret_cast<T *>(x32 + n0 * hidden);
          for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
            int64_t n = std::min(chunk, rows - r0);
            zrt_matmul(dtype, xv + r0 * hidden, wv, dlogits, 1, n, vocab,
                       hidden, 0, 1, 0, hidden);
            crossEntropyGradRows(kernel, dlogits, y + r0, g, dlogits, n, vocab,
                                 vocab, ignore, ignoreIndex);
            zrt_matmul(dtype, dlogits, wv, dxv + r0 * hidden, 1, n, hidden,
                       vocab, 0, 0, 0, vocab);
            convertToFloat(dlogits, dlogits32, n * vocab);
            convertToFloat(xv + r0 * hidden, x32, n * hidden);
            gemmF32(dlogits32, x32, acc, vocab, hidden, n, true, false, r0 > 0);
          }
          convertFromFloat(acc, dwv, vocab * hidden);
        }
      });
}
