//===- Elementwise.cpp - Pointwise kernels and reduce_sum -----------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "Driver/Trace.h"
#include "Kernels/Kernels.h"

using namespace zrt;

namespace {

/// out[i] = op(in[i]); out may alias in.
template <typename T, typename Op>
void unaryMap(const void *inPtr, void *outPtr, int64_t n, const Op &op) {
  const T *in = static_cast<const T *>(inPtr);
  T *out = static_cast<T *>(outPtr);
  parallelFor(n, kGrain, [&](int64_t begin, int64_t end) {
    alignas(64) float bufIn[kBlock], bufOut[kBlock];
    for (int64_t i = begin; i < end; i += kBlock) {
      int64_t len = std::min(kBlock, end - i);
      const float *x = loadF32(in + i, len, bufIn);
      float *y = outF32(out + i, bufOut);
#pragma omp simd
      for (int64_t t = 0; t < len; ++t)
        y[t] = op(x[t]);
      storeF32(y, out + i, len);
    }
  });
}

/// Checks that n elements broadcast over rhsN (rhsN divides n); false when
/// there is nothing to do.
bool checkBroadcast(const char *kernel, int64_t n, int64_t rhsN) {
  checkDims(kernel, n, rhsN);
  if (n == 0)
    return false;
  if (rhsN == 0 || n % rhsN != 0)
    fatal("%s: %lld elements do not broadcast over %lld", kernel, (long long)n,
          (long long)rhsN);
  return true;
}

/// The fp32 values rhs[i % rhsN .. +len) of a broadcast operand, block by
/// block. A short rhs is expanded once into a periodic fp32 tile, so that
/// every block reads its values contiguously from tile + (i % rhsN).
template <typename T>
class BroadcastRhs {
public:
  BroadcastRhs(const T *rhs, int64_t rhsN)
      : rhs(rhs), rhsN(rhsN), tiled(rhsN < kBlock) {
    if (tiled) {
      toFloat(rhs, tile, rhsN);
      for (int64_t i = rhsN; i < 2 * kBlock; ++i)
        tile[i] = tile[i - rhsN];
    }
  }
  /// The block at i of len <= kBlock elements; buf holds kBlock floats.
  const float *at(int64_t i, int64_t len, float *buf) const {
    int64_t j = i % rhsN;
    if (tiled)
      return tile + j;
    if (j + len <= rhsN)
      return loadF32(rhs + j, len, buf);
    // rhsN >= kBlock >= len: wraps at most once.
    toFloat(rhs + j, buf, rhsN - j);
    toFloat(rhs, buf + (rhsN - j), len - (rhsN - j));
    return buf;
  }

private:
  const T *rhs;
  int64_t rhsN;
  bool tiled;
  alignas(64) float tile[2 * kBlock];
};

/// out[i] = op(lhs[i], rhs[i % rhsN]); out may alias lhs.
template <typename T, typename Op>
void broadcastMap(const char *kernel, const void *lhsPtr, const void *rhsPtr,
                  void *outPtr, int64_t n, int64_t rhsN, const Op &op) {
  if (!checkBroadcast(kernel, n, rhsN))
    return;
  const T *lhs = static_cast<const T *>(lhsPtr);
  T *out = static_cast<T *>(outPtr);
  BroadcastRhs<T> rhs(static_cast<const T *>(rhsPtr), rhsN);
  parallelFor(n, kGrain, [&](int64_t begin, int64_t end) {
    alignas(64) float bufL[kBlock], bufR[kBlock], bufOut[kBlock];
    for (int64_t i = begin; i < end; i += kBlock) {
      int64_t len = std::min(kBlock, end - i);
      const float *y = rhs.at(i, len, bufR);
      const float *x = loadF32(lhs + i, len, bufL);
      float *o = outF32(out + i, bufOut);
#pragma omp simd
      for (int64_t t = 0; t < len; ++t)
        o[t] = op(x[t], y[t]);
      storeF32(o, out + i, len);
    }
  });
}

/// out[i] = op(a[i], rhs[i % rhsN], c[i]); out may alias a or c.
template <typename T, typename Op>
void broadcastMap3(const char *kernel, const void *aPtr, const void *rhsPtr,
                   const void *cPtr, void *outPtr, int64_t n, int64_t rhsN,
                   const Op &op) {
  if (!checkBroadcast(kernel, n, rhsN))
    return;
  const T *a = static_cast<const T *>(aPtr);
  const T *c = static_cast<const T *>(cPtr);
  T *out = static_cast<T *>(outPtr);
  BroadcastRhs<T> rhs(static_cast<const T *>(rhsPtr), rhsN);
  parallelFor(n, kGrain, [&](int64_t begin, int64_t end) {
    alignas(64) float bufA[kBlock], bufR[kBlock], bufC[kBlock], bufOut[kBlock];
    for (int64_t i = begin; i < end; i += kBlock) {
      int64_t len = std::min(kBlock, end - i);
      const float *y = rhs.at(i, len, bufR);
      const float *x = loadF32(a + i, len, bufA);
      const float *z = loadF32(c + i, len, bufC);
      float *o = outF32(out + i, bufOut);
#pragma omp simd
      for (int64_t t = 0; t < len; ++t)
        o[t] = op(x[t], y[t], z[t]);
      storeF32(o, out + i, len);
    }
  });
}

/// x rounded to the storage type T and back, as a kernel that stores x and
/// another that loads it would see it.
template <typename T>
inline float roundTo(float x) {
  return toFloat(fromFloat<T>(x));
}

/// (outA[i], outB[i]) = op(a[i], b[i], c[i]); each output may alias an
/// input (every index is read before it is written).
template <typename T, typename Op>
void ternaryMap2(const void *aPtr, const void *bPtr, const void *cPtr,
                 void *outAPtr, void *outBPtr, int64_t n, const Op &op) {
  const T *a = static_cast<const T *>(aPtr);
  const T *b = static_cast<const T *>(bPtr);
  const T *c = static_cast<const T *>(cPtr);
  T *outA = static_cast<T *>(outAPtr);
  T *outB = static_cast<T *>(outBPtr);
  parallelFor(n, kGrain, [&](int64_t begin, int64_t end) {
    alignas(64) float bufA[kBlock], bufB[kBlock], bufC[kBlock], bufOutA[kBlock],
        bufOutB[kBlock];
    for (int64_t i = begin; i < end; i += kBlock) {
      int64_t len = std::min(kBlock, end - i);
      const float *x = loadF32(a + i, len, bufA);
      const float *y = loadF32(b + i, len, bufB);
      const float *z = loadF32(c + i, len, bufC);
      float *u = outF32(outA + i, bufOutA);
      float *v = outF32(outB + i, bufOutB);
#pragma omp simd
      for (int64_t t = 0; t < len; ++t)
        op(x[t], y[t], z[t], u[t], v[t]);
      storeF32(u, outA + i, len);
      storeF32(v, outB + i, len);
    }
  });
}

/// (outA[i], outB[i], outC[i]) = op(a[i], b[i]); each output may alias an
/// input (every index is read before it is written).
template <typename T, typename Op>
void binaryMap3(const void *aPtr, const void *bPtr, void *outAPtr,
                void *outBPtr, void *outCPtr, int64_t n, const Op &op) {
  const T *a = static_cast<const T *>(aPtr);
  const T *b = static_cast<const T *>(bPtr);
  T *outA = static_cast<T *>(outAPtr);
  T *outB = static_cast<T *>(outBPtr);
  T *outC = static_cast<T *>(outCPtr);
  parallelFor(n, kGrain, [&](int64_t begin, int64_t end) {
    alignas(64) float bufA[kBlock], bufB[kBlock], bufOutA[kBlock],
        bufOutB[kBlock], bufOutC[kBlock];
    for (int64_t i = begin; i < end; i += kBlock) {
      int64_t len = std::min(kBlock, end - i);
      const float *x = loadF32(a + i, len, bufA);
      const float *y = loadF32(b + i, len, bufB);
      float *u = outF32(outA + i, bufOutA);
      float *v = outF32(outB + i, bufOutB);
      float *w = outF32(outC + i, bufOutC);
#pragma omp simd
      for (int64_t t = 0; t < len; ++t)
        op(x[t], y[t], u[t], v[t], w[t]);
      storeF32(u, outA + i, len);
      storeF32(v, outB + i, len);
      storeF32(w, outC + i, len);
    }
  });
}

/// (outA[i], outB[i]) = op(a[i], b[i]); each output may alias an input
/// (every index is read before it is written).
template <typename T, typename Op>
void binaryMap2(const void *aPtr, const void *bPtr, void *outAPtr,
                void *outBPtr, int64_t n, const Op &op) {
  const T *a = static_cast<const T *>(aPtr);
  const T *b = static_cast<const T *>(bPtr);
  T *outA = static_cast<T *>(outAPtr);
  T *outB = static_cast<T *>(outBPtr);
  parallelFor(n, kGrain, [&](int64_t begin, int64_t end) {
    alignas(64) float bufA[kBlock], bufB[kBlock], bufOutA[kBlock],
        bufOutB[kBlock];
    for (int64_t i = begin; i < end; i += kBlock) {
      int64_t len = std::min(kBlock, end - i);
      const float *x = loadF32(a + i, len, bufA);
      const float *y = loadF32(b + i, len, bufB);
      float *u = outF32(outA + i, bufOutA);
      float *v = outF32(outB + i, bufOutB);
#pragma omp simd
      for (int64_t t = 0; t < len; ++t)
        op(x[t], y[t], u[t], v[t]);
      storeF32(u, outA + i, len);
      storeF32(v, outB + i, len);
    }
  });
}

/// The kernel `name`: y[i] = op(x[i]).
template <typename Op>
void unaryKernel(const char *name, int32_t dtype, const void *x, void *y,
                 int64_t n, const Op &op) {
  KernelSpan span(name);
  checkDims(name, n);
  dispatchFloat(dtype, [&](auto tag) { unaryMap<decltype(tag)>(x, y, n, op); });
}

/// The kernel `name` of two operands of n elements: out[i] = op(a[i],
/// b[i]) (SwiGLU, and the pointwise gradients from the forward input or
/// result and the incoming gradient).
template <typename Op>
void binaryKernel(const char *name, int32_t dtype, const void *a, const void *b,
                  void *out, int64_t n, const Op &op) {
  KernelSpan span(name);
  dispatchFloat(dtype, [&](auto tag) {
    broadcastMap<decltype(tag)>(name, a, b, out, n, n, op);
  });
}

} // namespace

extern "C" void zrt_add(int32_t dtype, const void *lhs, const void *rhs,
                        void *out, int64_t n, int64_t rhsN) {
  KernelSpan span("zrt_add");
  dispatchFloat(dtype, [&](auto tag) {
    broadcastMap<decltype(tag)>("zrt_add", lhs, rhs, out, n, rhsN,
                                [](float x, float y) { return x + y; });
  });
}

extern "C" void zrt_mul(int32_t dtype, const void *lhs, const void *rhs,
                        void *out, int64_t n, int64_t rhsN) {
  KernelSpan span("zrt_mul");
  dispatchFloat(dtype, [&](auto tag) {
    broadcastMap<decltype(tag)>("zrt_mul", lhs, rhs, out, n, rhsN,
                                [](float x, float y) { return x * y; });
  });
}

extern "C" void zrt_scale(int32_t dtype, const void *in, void *out, int64_t n,
                          double factor) {
  float f = float(factor);
  unaryKernel("zrt_scale", dtype, in, out, n, [f](float x) { return x * f; });
}

extern "C" void zrt_gelu(int32_t dtype, const void *x, void *y, int64_t n) {
  unaryKernel("zrt_gelu", dtype, x, y, n, [](float v) { return gelu(v); });
}

extern "C" void zrt_gelu_grad(int32_t dtype, const void *x, const void *dy,
                              void *dx, int64_t n) {
  binaryKernel("zrt_gelu_grad", dtype, x, dy, dx, n,
               [](float v, float g) { return geluGrad(v, g); });
}

extern "C" void zrt_bias_gelu(int32_t dtype, const void *x, const void *bias,
                              void *y, int64_t n, int64_t biasN) {
  KernelSpan span("zrt_bias_gelu");
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    broadcastMap<T>("zrt_bias_gelu", x, bias, y, n, biasN,
                    [](float v, float b) { return gelu(roundTo<T>(v + b)); });
  });
}

extern "C" void zrt_bias_gelu_grad(int32_t dtype, const void *x,
                                   const void *bias, const void *dy, void *dx,
                                   int64_t n, int64_t biasN) {
  KernelSpan span("zrt_bias_gelu_grad");
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    broadcastMap3<T>("zrt_bias_gelu_grad", x, bias, dy, dx, n, biasN,
                     [](float v, float b, float g) {
                       return geluGrad(roundTo<T>(v + b), g);
                     });
  });
}

extern "C" void zrt_gelu_erf(int32_t dtype, const void *x, void *y, int64_t n) {
  unaryKernel("zrt_gelu_erf", dtype, x, y, n,
              [](float v) { return geluErf(v); });
}

extern "C" void zrt_gelu_erf_grad(int32_t dtype, const void *x, const void *dy,
                                  void *dx, int64_t n) {
  binaryKernel("zrt_gelu_erf_grad", dtype, x, dy, dx, n,
               [](float v, float g) { return geluErfGrad(v, g); });
}

extern "C" void zrt_silu(int32_t dtype, const void *x, void *y, int64_t n) {
  unaryKernel("zrt_silu", dtype, x, y, n, [](float v) { return silu(v); });
}

extern "C" void zrt_silu_grad(int32_t dtype, const void *x, const void *dy,
                              void *dx, int64_t n) {
  binaryKernel("zrt_silu_grad", dtype, x, dy, dx, n,
               [](float v, float g) { return siluGrad(v, g); });
}

extern "C" void zrt_swiglu(int32_t dtype, const void *gate, const void *up,
                           void *y, int64_t n) {
  binaryKernel("zrt_swiglu", dtype, gate, up, y, n,
               [](float g, float u) { return swiglu(g, u); });
}

extern "C" void zrt_swiglu_grad(int32_t dtype, const void *gate, const void *up,
                                const void *dy, void *dgate, void *dup,
                                int64_t n) {
  KernelSpan span("zrt_swiglu_grad");
  checkDims("zrt_swiglu_grad", n);
  dispatchFloat(dtype, [&](auto tag) {
    ternaryMap2<decltype(tag)>(gate, up, dy, dgate, dup, n,
                               [](float g, float u, float d, float &dg,
                                  float &du) { swigluGrad(g, u, d, dg, du); });
  });
}

extern "C" void zrt_clamped_swiglu(int32_t dtype, const void *gate,
                                   const void *up, void *y, int64_t n,
                                   double alpha, double limit) {
  float a = static_cast<float>(alpha), l = static_cast<float>(limit);
  binaryKernel("zrt_clamped_swiglu", dtype, gate, up, y, n,
               [a, l](float g, float u) { return clampedSwiglu(g, u, a, l); });
}

extern "C" void zrt_clamped_swiglu_grad(int32_t dtype, const void *gate,
                                        const void *up, const void *dy,
                                        void *dgate, void *dup, int64_t n,
                                        double alpha, double limit) {
  KernelSpan span("zrt_clamped_swiglu_grad");
  checkDims("zrt_clamped_swiglu_grad", n);
  float a = static_cast<float>(alpha), l = static_cast<float>(limit);
  dispatchFloat(dtype, [&](auto tag) {
    ternaryMap2<decltype(tag)>(
        gate, up, dy, dgate, dup, n,
        [a, l](float g, float u, float d, float &dg, float &du) {
          clampedSwigluGrad(g, u, d, a, l, dg, du);
        });
  });
}

extern "C" void zrt_relu(int32_t dtype, const void *x, void *y, int64_t n) {
  unaryKernel("zrt_relu", dtype, x, y, n, [](float v) { return relu(v); });
}

extern "C" void zrt_relu_grad(int32_t dtype, const void *y, const void *dy,
                              void *dx, int64_t n) {
  binaryKernel("zrt_relu_grad", dtype, y, dy, dx, n,
               [](float v, float g) { return reluGrad(v, g); });
}

extern "C" void zrt_tanh(int32_t dtype, const void *x, void *y, int64_t n) {
  unaryKernel("zrt_tanh", dtype, x, y, n, [](float v) { return zrt::tanh(v); });
}

extern "C" void zrt_tanh_grad(int32_t dtype, const void *y, const void *dy,
                              void *dx, int64_t n) {
  binaryKernel("zrt_tanh_grad", dtype, y, dy, dx, n,
               [](float v, float g) { return tanhGrad(v, g); });
}

extern "C" void zrt_exp(int32_t dtype, const void *x, void *y, int64_t n) {
  unaryKernel("zrt_exp", dtype, x, y, n, [](float v) { return zrt::exp(v); });
}

extern "C" void zrt_exp_grad(int32_t dtype, const void *y, const void *dy,
                             void *dx, int64_t n) {
  binaryKernel("zrt_exp_grad", dtype, y, dy, dx, n,
               [](float v, float g) { return expGrad(v, g); });
}

extern "C" void zrt_log(int32_t dtype, const void *x, void *y, int64_t n) {
  unaryKernel("zrt_log", dtype, x, y, n, [](float v) { return zrt::log(v); });
}

extern "C" void zrt_log_grad(int32_t dtype, const void *x, const void *dy,
                             void *dx, int64_t n) {
  binaryKernel("zrt_log_grad", dtype, x, dy, dx, n,
               [](float v, float g) { return logGrad(v, g); });
}

extern "C" void zrt_xielu(int32_t dtype, const void *x, const void *alpha_p,
                          const void *alpha_n, void *y, int64_t n, double beta,
                          double eps) {
  KernelSpan span("zrt_xielu");
  checkDims("zrt_xielu", n);
  // torch holds beta and eps as fp32 buffers.
  float b = float(beta), e = float(eps);
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    if (n == 0)
      return;
    float ap = toFloat(*static_cast<const T *>(alpha_p));
    float an = toFloat(*static_cast<const T *>(alpha_n));
    unaryMap<T>(x, y, n, [=](float v) { return xielu(v, ap, an, b, e); });
  });
}

extern "C" void zrt_xielu_grad(int32_t dtype, const void *x,
                               const void *alpha_p, const void *alpha_n,
                               const void *dy, void *dx, void *pp, void *pn,
                               int64_t n, double beta, double eps) {
  KernelSpan span("zrt_xielu_grad");
  checkDims("zrt_xielu_grad", n);
  float b = float(beta), e = float(eps);
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    if (n == 0)
      return;
    float ap = toFloat(*static_cast<const T *>(alpha_p));
    float an = toFloat(*static_cast<const T *>(alpha_n));
    binaryMap3<T>(x, dy, dx, pp, pn, n,
                  [=](float v, float g, float &d, float &p, float &q) {
                    xieluGrad(v, ap, an, b, e, g, d, p, q);
                  });
  });
}

extern "C" void zrt_softplus(int32_t dtype, const void *x, void *y, int64_t n,
                             double beta, double threshold) {
  // PyTorch converts both to the tensor's fp32 computation type.
  float b = float(beta), t = float(threshold);
  unaryKernel("zrt_softplus", dtype, x, y, n,
              [b, t](float v) { return softplus(v, b, t); });
}

extern "C" void zrt_softplus_grad(int32_t dtype, const void *x, const void *dy,
                                  void *dx, int64_t n, double beta,
                                  double threshold) {
  float b = float(beta), t = float(threshold);
  binaryKernel("zrt_softplus_grad", dtype, x, dy, dx, n,
               [b, t](float v, float g) { return softplusGrad(v, g, b, t); });
}

extern "C" void zrt_reduce_sum(int32_t dtype, const void *in, void *out,
                               int64_t rows, int64_t cols) {
  KernelSpan span("zrt_reduce_sum");
  checkDims("zrt_reduce_sum", rows, cols);
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *src = static_cast<const T *>(in);
    T *dst = static_cast<T *>(out);
    columnReduce<1>(
        rows, cols,
        [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1, float *const *acc) {
          alignas(64) float buf[kColBlock];
          for (int64_t r = r0; r < r1; ++r) {
            const float *x = loadF32(src + r * cols + c0, c1 - c0, buf);
#pragma omp simd
            for (int64_t c = 0; c < c1 - c0; ++c)
              acc[0][c] += x[c];
          }
        },
        [&](int64_t c0, int64_t c1, const float *const *sums) {
          fromFloat(sums[0], dst + c0, c1 - c0);
        });
  });
}

extern "C" void zrt_copy(void *dst, const void *src, int64_t bytes) {
  KernelSpan span("zrt_copy");
  if (bytes < 0)
    fatal("zrt_copy: negative size");
  parallelFor(bytes, int64_t(1) << 20, [&](int64_t begin, int64_t end) {
    std::memcpy(static_cast<char *>(dst) + begin,
                static_cast<const char *>(src) + begin, size_t(end - begin));
  });
}

// Reinforcement learning's losses (GRPO): clamp, minimum/maximum, where.

extern "C" void zrt_reciprocal(int32_t dtype, const void *x, void *y,
                               int64_t n) {
  unaryKernel("zrt_reciprocal", dtype, x, y, n,
              [](float v) { return zrt::reciprocal(v); });
}

extern "C" void zrt_reciprocal_grad(int32_t dtype, const void *y,
                                    const void *dy, void *dx, int64_t n) {
  binaryKernel("zrt_reciprocal_grad", dtype, y, dy, dx, n,
               [](float v, float g) { return reciprocalGrad(v, g); });
}

extern "C" void zrt_clamp(int32_t dtype, const void *x, void *y, int64_t n,
                          double lo, double hi) {
  KernelSpan span("zrt_clamp");
  checkDims("zrt_clamp", n);
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    // torch converts a number bound to the tensor's dtype.
    float l = roundTo<T>(float(lo)), h = roundTo<T>(float(hi));
    unaryMap<T>(x, y, n, [=](float v) { return zrt::clamp(v, l, h); });
  });
}

extern "C" void zrt_clamp_grad(int32_t dtype, const void *x, const void *dy,
                               void *dx, int64_t n, double lo, double hi) {
  KernelSpan span("zrt_clamp_grad");
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    float l = roundTo<T>(float(lo)), h = roundTo<T>(float(hi));
    broadcastMap<T>("zrt_clamp_grad", x, dy, dx, n, n,
                    [=](float v, float g) { return clampGrad(v, l, h, g); });
  });
}

extern "C" void zrt_minimum(int32_t dtype, const void *a, const void *b,
                            void *y, int64_t n) {
  binaryKernel("zrt_minimum", dtype, a, b, y, n,
               [](float u, float v) { return zrt::minimum(u, v); });
}

extern "C" void zrt_maximum(int32_t dtype, const void *a, const void *b,
                            void *y, int64_t n) {
  binaryKernel("zrt_maximum", dtype, a, b, y, n,
               [](float u, float v) { return zrt::maximum(u, v); });
}

extern "C" void zrt_minimum_grad(int32_t dtype, const void *a, const void *b,
                                 const void *dy, void *da, void *db,
                                 int64_t n) {
  KernelSpan span("zrt_minimum_grad");
  checkDims("zrt_minimum_grad", n);
  dispatchFloat(dtype, [&](auto tag) {
    ternaryMap2<decltype(tag)>(a, b, dy, da, db, n,
                               [](float u, float v, float g, float &du,
                                  float &dv) { minimumGrad(u, v, g, du, dv); });
  });
}

extern "C" void zrt_maximum_grad(int32_t dtype, const void *a, const void *b,
                                 const void *dy, void *da, void *db,
                                 int64_t n) {
  KernelSpan span("zrt_maximum_grad");
  checkDims("zrt_maximum_grad", n);
  dispatchFloat(dtype, [&](auto tag) {
    ternaryMap2<decltype(tag)>(a, b, dy, da, db, n,
                               [](float u, float v, float g, float &du,
                                  float &dv) { maximumGrad(u, v, g, du, dv); });
  });
}

extern "C" void zrt_where(int32_t dtype, const void *cond, const void *a,
                          const void *b, void *y, int64_t n) {
  KernelSpan span("zrt_where");
  dispatchFloat(dtype, [&](auto tag) {
    broadcastMap3<decltype(tag)>(
        "zrt_where", cond, a, b, y, n, n,
        [](float c, float u, float v) { return zrt::where(c, u, v); });
  });
}

extern "C" void zrt_where_grad(int32_t dtype, const void *cond, const void *dy,
                               void *dt, void *df, int64_t n) {
  KernelSpan span("zrt_where_grad");
  checkDims("zrt_where_grad", n);
  dispatchFloat(dtype, [&](auto tag) {
    binaryMap2<decltype(tag)>(
        cond, dy, dt, df, n,
        [](float c, float g, float &t, float &f) { whereGrad(c, g, t, f); });
  });
}
