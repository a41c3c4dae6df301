//===- Matmul.cpp - (Batched) matrix products through OpenBLAS ------------===//
//
// Part of the zero-mlir project.
//
// Every product is cut into tiles that OpenMP threads hand to single-threaded
// cblas_sgemm calls, so OpenBLAS's own thread pool never competes with the
// kernels' one. f32 operands are used in place (no scratch). 16-bit operands
// are converted to fp32 panels of at most kPanel rows/columns: one panel of
// op(A), one of op(B) and one of C, reused across the loops; that is the
// scratch zrt_scratch_matmul (zero_rt/scratch.h) plans.
//
//===----------------------------------------------------------------------===//

#include "Device/Memory.h"
#include "Driver/Trace.h"
#include "Kernels/Kernels.h"

#include "zero_rt/scratch.h"

#include <cblas.h>

using namespace zrt;

namespace {

constexpr int64_t kPanel = ZRT_MATMUL_PANEL;

/// One row-major fp32 product C = op(A) op(B) with op(A) [m, k], op(B) [k, n].
struct Gemm {
  bool ta, tb;
  int64_t m, n, k;
  const float *a;
  int64_t lda;
  const float *b;
  int64_t ldb;
  float *c;
  int64_t ldc;
  float beta = 0.0f;
};

void runGemm(const Gemm &g, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  const float *a = g.ta ? g.a + r0 : g.a + r0 * g.lda;
  const float *b = g.tb ? g.b + c0 * g.ldb : g.b + c0;
  cblas_sgemm(CblasRowMajor, g.ta ? CblasTrans : CblasNoTrans,
              g.tb ? CblasTrans : CblasNoTrans, int(r1 - r0), int(c1 - c0),
              int(g.k), 1.0f, a, int(g.lda), b, int(g.ldb), g.beta,
              g.c + r0 * g.ldc + c0, int(g.ldc));
}

/// Runs `count` products of one shape, get(i) giving the i-th; each is cut
/// into enough row/column tiles that every thread has work.
template <typename Get>
void parallelGemms(int64_t count, int64_t m, int64_t n, int64_t k,
                   const Get &get) {
  useSingleThreadedBlas();
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX)
    fatal("zrt_matmul: dimensions exceed the BLAS int range");
  // Each thread gets at least about 4 MFLOP: below that, splitting costs
  // more than it gains.
  int64_t flops = 2 * m * n * k * count;
  int64_t threads = std::clamp<int64_t>(flops >> 22, 1, availableThreads());
  int64_t tm = 1, tn = 1;
  if (count < threads) {
    int64_t tiles = ceilDiv(threads, count);
    tm = std::clamp<int64_t>(tiles, 1, ceilDiv(m, 32));
    tn = std::clamp<int64_t>(ceilDiv(tiles, tm), 1, ceilDiv(n, 32));
  }
  auto item = [&](int64_t i) {
    int64_t g = i / (tm * tn), t = i % (tm * tn);
    int64_t im = t / tn, in = t % tn;
    Gemm gemm = get(g);
    runGemm(gemm, m * im / tm, m * (im + 1) / tm, n * in / tn,
            n * (in + 1) / tn);
  };
  if (threads == 1) {
    for (int64_t i = 0; i < count * tm * tn; ++i)
      item(i);
    return;
  }
  parallelForEach(count * tm * tn, flops / (count * tm * tn), item);
}

/// Rows of A are contiguous across the batch when the rhs is shared and A
/// is not transposed: the batch then folds into one product of batch * m
/// rows.
bool foldsBatch(int32_t ta, int32_t bBatched) { return !ta && !bBatched; }

struct PanelShape {
  int64_t mb, nb;
};

PanelShape panelShape(int64_t batch, int64_t m, int64_t n, int32_t ta,
                      int32_t bBatched) {
  int64_t rows = foldsBatch(ta, bBatched) ? batch * m : m;
  return {std::min(rows, kPanel), std::min(n, kPanel)};
}

/// dst[r * cols + c] = src[r * ld + c] in fp32.
template <typename T>
void convertRows(const T *src, int64_t ld, int64_t rows, int64_t cols,
                 float *dst) {
  parallelFor(rows, rowGrain(cols), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      toFloat(src + r * ld, dst + r * cols, cols);
  });
}

/// dst[r * ld + c] = src[r * cols + c] rounded to T.
template <typename T>
void storeRows(const float *src, int64_t rows, int64_t cols, T *dst,
               int64_t ld) {
  parallelFor(rows, rowGrain(cols), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      fromFloat(src + r * cols, dst + r * ld, cols);
  });
}

/// `k` is the operands' contraction extent, `ks` <= k the part summed.
void matmulF32(const float *a, const float *b, float *c, int64_t batch,
               int64_t m, int64_t n, int64_t k, int64_t ks, bool ta, bool tb,
               bool bBatched) {
  int64_t lda = ta ? m : k, ldb = tb ? k : n;
  if (foldsBatch(ta, bBatched)) {
    parallelGemms(1, batch * m, n, ks, [&](int64_t) {
      return Gemm{ta, tb, batch * m, n, ks, a, lda, b, ldb, c, n};
    });
    return;
  }
  parallelGemms(batch, m, n, ks, [&](int64_t i) {
    return Gemm{ta,  tb,
                m,   n,
                ks,  a + i * m * k,
                lda, b + (bBatched ? i * k * n : 0),
                ldb, c + i * m * n,
                n};
  });
}

/// matmul16 in caller-owned fp32 panels, laid out densely from `panels`:
/// any buffer of zrt_scratch_matmul bytes for a shape at least this large
/// holds them.
template <typename T>
void matmul16In(const T *a, const T *b, T *c, int64_t batch, int64_t m,
                int64_t n, int64_t k, int64_t ks, bool ta, bool tb,
                bool bBatched, float *panels) {
  bool fold = foldsBatch(ta, bBatched);
  int64_t rows = fold ? batch * m : m;
  int64_t batches = fold ? 1 : batch;
  PanelShape ps = panelShape(batch, m, n, ta, bBatched);
  float *aPanel = panels;
  float *bPanel = aPanel + ps.mb * k;
  float *cPanel = bPanel + k * ps.nb;
  for (int64_t j0 = 0; j0 < n; j0 += ps.nb) {
    int64_t nb = std::min(ps.nb, n - j0);
    for (int64_t bi = 0; bi < batches; ++bi) {
      // A shared rhs panel is converted once per column panel.
      if (bBatched || bi == 0) {
        const T *bb = b + (bBatched ? bi * k * n : 0);
        if (tb)
          convertRows(bb + j0 * k, k, nb, ks, bPanel);
        else
          convertRows(bb + j0, n, ks, nb, bPanel);
      }
      for (int64_t i0 = 0; i0 < rows; i0 += ps.mb) {
        int64_t mb = std::min(ps.mb, rows - i0);
        const T *ab = a + bi * m * k;
        if (ta)
          convertRows(ab + i0, m, ks, mb, aPanel);
        else
          convertRows(ab + i0 * k, k, mb, ks, aPanel);
        parallelGemms(1, mb, nb, ks, [&](int64_t) {
          return Gemm{ta,           tb,     mb,           nb,     ks, aPanel,
                      ta ? mb : ks, bPanel, tb ? ks : nb, cPanel, nb};
        });
        storeRows(cPanel, mb, nb, c + (bi * m + i0) * n + j0, n);
      }
    }
  }
}

template <typename T>
void matmul16(const T *a, const T *b, T *c, int64_t batch, int64_t m, int64_t n,
              int64_t k, int64_t ks, bool ta, bool tb, bool bBatched) {
  Scratch scratch(zrt_scratch_matmul(int32_t(sizeof(T) == 4 ? 0 : 1), batch, m,
                                     n, k, ta, bBatched));
  matmul16In(a, b, c, batch, m, n, k, ks, ta, tb, bBatched,
             scratch.as<float>());
}

} // namespace

void zrt::gemmF32(const float *a, const float *b, float *c, int64_t m,
                  int64_t n, int64_t k, bool ta, bool tb, bool accumulate) {
  if (m == 0 || n == 0)
    return;
  if (k == 0) {
    if (!accumulate)
      std::fill(c, c + m * n, 0.0f);
    return;
  }
  parallelGemms(1, m, n, k, [&](int64_t) {
    return Gemm{ta,         tb, m,          n, k, a,
                ta ? m : k, b,  tb ? k : n, c, n, accumulate ? 1.0f : 0.0f};
  });
}

template <typename T>
void zrt::gemm16(const T *a, const T *b, T *c, int64_t m, int64_t n, int64_t k,
                 bool ta, bool tb, float *panels) {
  if (m == 0 || n == 0)
    return;
  if (k == 0) {
    std::fill(c, c + m * n, fromFloat<T>(0.0f));
    return;
  }
  matmul16In(a, b, c, 1, m, n, k, k, ta, tb, false, panels);
}
template void zrt::gemm16<BF16>(const BF16 *, const BF16 *, BF16 *, int64_t,
                                int64_t, int64_t, bool, bool, float *);
template void zrt::gemm16<F16>(const F16 *, const F16 *, F16 *, int64_t,
                               int64_t, int64_t, bool, bool, float *);

void zrt::useSingleThreadedBlas() {
  static const bool once = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)once;
}

extern "C" void zrt_matmul(int32_t dtype, const void *a, const void *b, void *c,
                           int64_t batch, int64_t m, int64_t n, int64_t k,
                           int32_t transposeA, int32_t transposeB,
                           int32_t bIsBatched, int64_t kSum) {
  KernelSpan span("zrt_matmul");
  checkMatmul(batch, m, n, k, kSum);
  if (batch == 0 || m == 0 || n == 0)
    return;
  if (kSum == 0) {
    zrt_fill(dtype, c, batch * m * n, 0.0);
    return;
  }
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float>)
      matmulF32(static_cast<const float *>(a), static_cast<const float *>(b),
                static_cast<float *>(c), batch, m, n, k, kSum, transposeA,
                transposeB, bIsBatched);
    else
      matmul16(static_cast<const T *>(a), static_cast<const T *>(b),
               static_cast<T *>(c), batch, m, n, k, kSum, transposeA,
               transposeB, bIsBatched);
  });
}

namespace {
/// Checks a tiled MLP's sizes and its f32 dtype.
void checkTiledMlp(const char *kernel, int32_t dtype, int64_t rows,
                   int64_t hidden, int64_t inter, int64_t tiles) {
  if (dtype != ZRT_F32)
    fatal("%s: f32 only, got dtype %d", kernel, int(dtype));
  checkDims(kernel, rows, hidden, inter);
  if (tiles < 1)
    fatal("%s: tiles %lld is not positive", kernel, (long long)tiles);
}
} // namespace

// One tile's gate and up at a time in the scratch the compiler plans
// (zrt_scratch_tiled_mlp); each row's products are those of the untiled
// matmuls, with the activation of zrt_swiglu.
extern "C" void zrt_tiled_mlp(int32_t dtype, const void *x, const void *wg,
                              const void *wu, const void *wd, void *y,
                              int64_t rows, int64_t hidden, int64_t inter,
                              int64_t tiles) {
  const char *kernel = "zrt_tiled_mlp";
  KernelSpan span(kernel);
  checkTiledMlp(kernel, dtype, rows, hidden, inter, tiles);
  const float *xv = static_cast<const float *>(x);
  float *yv = static_cast<float *>(y);
  int64_t tile = zrt_tiled_mlp_tile_rows(rows, tiles);
  Scratch scratch(zrt_scratch_tiled_mlp(rows, inter, tiles));
  float *gate = scratch.as<float>(), *up = gate + tile * inter;
  for (int64_t r0 = 0; r0 < rows; r0 += tile) {
    int64_t n = std::min(tile, rows - r0);
    const float *xt = xv + r0 * hidden;
    gemmF32(xt, static_cast<const float *>(wg), gate, n, inter, hidden, false,
            true, false);
    gemmF32(xt, static_cast<const float *>(wu), up, n, inter, hidden, false,
            true, false);
    parallelFor(n * inter, kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        gate[i] = swiglu(gate[i], up[i]);
    });
    gemmF32(gate, static_cast<const float *>(wd), yv + r0 * hidden, n, hidden,
            inter, false, true, false);
  }
}

// Per tile: gate and up recomputed, the activation for dwd, then the
// activation's gradient written over it and turned, as zrt_swiglu_grad, into
// the gate's and up's gradients over them; weight gradients summed over the
// tiles in order.
extern "C" void zrt_tiled_mlp_grad(int32_t dtype, const void *x, const void *wg,
                                   const void *wu, const void *wd,
                                   const void *dy, void *dx, void *dwg,
                                   void *dwu, void *dwd, int64_t rows,
                                   int64_t hidden, int64_t inter,
                                   int64_t tiles) {
  const char *kernel = "zrt_tiled_mlp_grad";
  KernelSpan span(kernel);
  checkTiledMlp(kernel, dtype, rows, hidden, inter, tiles);
  const float *xv = static_cast<const float *>(x);
  const float *wgv = static_cast<const float *>(wg);
  const float *wuv = static_cast<const float *>(wu);
  const float *wdv = static_cast<const float *>(wd);
  const float *dyv = static_cast<const float *>(dy);
  float *dxv = static_cast<float *>(dx);
  float *dwgv = static_cast<float *>(dwg), *dwuv = static_cast<float *>(dwu),
        *dwdv = static_cast<float *>(dwd);
  if (rows == 0) {
    std::fill(dwgv, dwgv + inter * hidden, 0.0f);
    std::fill(dwuv, dwuv + inter * hidden, 0.0f);
    std::fill(dwdv, dwdv + hidden * inter, 0.0f);
    return;
  }
  int64_t tile = zrt_tiled_mlp_tile_rows(rows, tiles);
  Scratch scratch(zrt_scratch_tiled_mlp_grad(rows, inter, tiles));
  float *gate = scratch.as<float>(), *up = gate + tile * inter,
        *act = up + tile * inter;
  for (int64_t r0 = 0; r0 < rows; r0 += tile) {
    int64_t n = std::min(tile, rows - r0);
    bool accumulate = r0 > 0;
    const float *xt = xv + r0 * hidden, *dyt = dyv + r0 * hidden;
    gemmF32(xt, wgv, gate, n, inter, hidden, false, true, false);
    gemmF32(xt, wuv, up, n, inter, hidden, false, true, false);
    parallelFor(n * inter, kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        act[i] = swiglu(gate[i], up[i]);
    });
    // dwd [hidden, inter] += dy_t^T act.
    gemmF32(dyt, act, dwdv, hidden, inter, n, true, false, accumulate);
    // The activation's gradient dy_t wd, over the activation.
    gemmF32(dyt, wdv, act, n, inter, hidden, false, false, false);
    parallelFor(n * inter, kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        float dg, du;
        swigluGrad(gate[i], up[i], act[i], dg, du);
        gate[i] = dg;
        up[i] = du;
      }
    });
    gemmF32(gate, xt, dwgv, inter, hidden, n, true, false, accumulate);
    gemmF32(up, xt, dwuv, inter, hidden, n, true, false, accumulate);
    float *dxt = dxv + r0 * hidden;
    gemmF32(gate, wgv, dxt, n, hidden, inter, false, false, false);
    gemmF32(up, wuv, dxt, n, hidden, inter, false, false, true);
  }
}
