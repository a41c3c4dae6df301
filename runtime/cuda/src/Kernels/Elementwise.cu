//===- Elementwise.cu - Pointwise kernels, casts, fill and reduce_sum -----===//
//
// Part of the zero-mlir project.
//
// Grid-stride loops over 16-byte packs when every pointer allows it (scalar
// otherwise, and for the tail), fp32 arithmetic with the CPU backend's
// formulas: the results equal the CPU's except for FMA contraction in GELU
// and the SiLU gradients, and where CUDA's logf and log1pf (log, softplus)
// round otherwise than libm's.
//
//===----------------------------------------------------------------------===//

#include "Kernels/CudaKernels.h"
#include "Kernels/DeviceUtil.cuh"
#include "Support/Support.h"

#include <type_traits>

using namespace zrt;
using namespace zrt::cuda;

namespace {

constexpr int kThreads = 256;

struct AddOp {
  __device__ float operator()(float x, float y) const { return x + y; }
};
struct MulOp {
  __device__ float operator()(float x, float y) const { return x * y; }
};
struct ScaleOp {
  float factor;
  __device__ float operator()(float x) const { return x * factor; }
};
// The formulas of KernelMath.h, shared with the CPU backend (qualified:
// cuda::gelu and the others are the kernels).
struct GeluOp {
  __device__ float operator()(float x) const { return zrt::gelu(x); }
};
struct GeluGradOp {
  __device__ float operator()(float x, float g) const {
    return zrt::geluGrad(x, g);
  }
};
struct GeluErfOp {
  __device__ float operator()(float x) const { return zrt::geluErf(x); }
};
struct GeluErfGradOp {
  __device__ float operator()(float x, float g) const {
    return zrt::geluErfGrad(x, g);
  }
};
struct SiluOp {
  __device__ float operator()(float x) const { return zrt::silu(x); }
};
struct SiluGradOp {
  __device__ float operator()(float x, float g) const {
    return zrt::siluGrad(x, g);
  }
};
struct SwigluOp {
  __device__ float operator()(float g, float u) const {
    return zrt::swiglu(g, u);
  }
};
struct ClampedSwigluOp {
  float alpha, limit;
  __device__ float operator()(float g, float u) const {
    return zrt::clampedSwiglu(g, u, alpha, limit);
  }
};
struct ReluOp {
  __device__ float operator()(float x) const { return zrt::relu(x); }
};
struct ReluGradOp {
  __device__ float operator()(float y, float g) const {
    return zrt::reluGrad(y, g);
  }
};
struct TanhOp {
  __device__ float operator()(float x) const { return zrt::tanh(x); }
};
struct TanhGradOp {
  __device__ float operator()(float y, float g) const {
    return zrt::tanhGrad(y, g);
  }
};
struct ExpOp {
  __device__ float operator()(float x) const { return zrt::exp(x); }
};
struct ExpGradOp {
  __device__ float operator()(float y, float g) const {
    return zrt::expGrad(y, g);
  }
};
struct LogOp {
  __device__ float operator()(float x) const { return zrt::log(x); }
};
struct LogGradOp {
  __device__ float operator()(float x, float g) const {
    return zrt::logGrad(x, g);
  }
};
struct SoftplusOp {
  float beta, threshold;
  __device__ float operator()(float x) const {
    return zrt::softplus(x, beta, threshold);
  }
};
struct SoftplusGradOp {
  float beta, threshold;
  __device__ float operator()(float x, float g) const {
    return zrt::softplusGrad(x, g, beta, threshold);
  }
};

struct ReciprocalOp {
  __device__ float operator()(float x) const { return zrt::reciprocal(x); }
};
struct ReciprocalGradOp {
  __device__ float operator()(float y, float g) const {
    return zrt::reciprocalGrad(y, g);
  }
};
struct ClampOp {
  float lo, hi;
  __device__ float operator()(float x) const { return zrt::clamp(x, lo, hi); }
};
struct ClampGradOp {
  float lo, hi;
  __device__ float operator()(float x, float g) const {
    return zrt::clampGrad(x, lo, hi, g);
  }
};
struct MinimumOp {
  __device__ float operator()(float a, float b) const {
    return zrt::minimum(a, b);
  }
};
struct MaximumOp {
  __device__ float operator()(float a, float b) const {
    return zrt::maximum(a, b);
  }
};

/// out[i] = op(in[i]); out may alias in (each element is read, then
/// written, by the same thread).
template <typename T, int W, typename Op>
__global__ void __launch_bounds__(kThreads)
    unaryKernel(const T *in, T *out, int64_t n, Op op) {
  int64_t packs = n / W;
  for (int64_t p = globalThread(); p < packs; p += globalThreads()) {
    float v[W];
    loadPack<W>(in + p * W, v);
#pragma unroll
    for (int e = 0; e < W; ++e)
      v[e] = op(v[e]);
    storePack<W>(out + p * W, v);
  }
  for (int64_t i = packs * W + globalThread(); i < n; i += globalThreads())
    out[i] = fromF32<T>(op(toF32(in[i])));
}

/// How a binary kernel reads rhs: at the same index, as packs of a
/// broadcast rhs whose length is a multiple of the pack, or element by
/// element with wrap-around.
enum RhsMode { kSame, kRhsPack, kRhsScalar };

/// out[i] = op(lhs[i], rhs[i % rhsN]); out may alias lhs.
template <typename T, int W, RhsMode kMode, typename Op>
__global__ void __launch_bounds__(kThreads)
    binaryKernel(const T *lhs, const T *rhs, T *out, int64_t n, int64_t rhsN,
                 Op op) {
  int64_t packs = n / W;
  for (int64_t p = globalThread(); p < packs; p += globalThreads()) {
    int64_t i = p * W;
    float a[W], b[W];
    loadPack<W>(lhs + i, a);
    if constexpr (kMode == kSame) {
      loadPack<W>(rhs + i, b);
    } else if constexpr (kMode == kRhsPack) {
      loadPack<W>(rhs + i % rhsN, b);
    } else {
      int64_t j = i % rhsN;
#pragma unroll
      for (int e = 0; e < W; ++e) {
        b[e] = toF32(rhs[j]);
        j = j + 1 == rhsN ? 0 : j + 1;
      }
    }
#pragma unroll
    for (int e = 0; e < W; ++e)
      a[e] = op(a[e], b[e]);
    storePack<W>(out + i, a);
  }
  for (int64_t i = packs * W + globalThread(); i < n; i += globalThreads()) {
    int64_t j = kMode == kSame ? i : i % rhsN;
    out[i] = fromF32<T>(op(toF32(lhs[i]), toF32(rhs[j])));
  }
}

/// (dgate[i], dup[i]) = swigluGrad(gate[i], up[i], dy[i]); the outputs may
/// alias the inputs (each index is read, then written, by one thread).
template <typename T, int W>
__global__ void __launch_bounds__(kThreads)
    swigluGradKernel(const T *gate, const T *up, const T *dy, T *dgate, T *dup,
                     int64_t n) {
  int64_t packs = n / W;
  for (int64_t p = globalThread(); p < packs; p += globalThreads()) {
    int64_t i = p * W;
    float g[W], u[W], d[W];
    loadPack<W>(gate + i, g);
    loadPack<W>(up + i, u);
    loadPack<W>(dy + i, d);
#pragma unroll
    for (int e = 0; e < W; ++e)
      zrt::swigluGrad(g[e], u[e], d[e], g[e], u[e]);
    storePack<W>(dgate + i, g);
    storePack<W>(dup + i, u);
  }
  for (int64_t i = packs * W + globalThread(); i < n; i += globalThreads()) {
    float dg, du;
    zrt::swigluGrad(toF32(gate[i]), toF32(up[i]), toF32(dy[i]), dg, du);
    dgate[i] = fromF32<T>(dg);
    dup[i] = fromF32<T>(du);
  }
}

/// y[i] = xielu(x[i]) with the coefficients read from device memory.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    xieluKernel(const T *x, const T *alphaP, const T *alphaN, T *y, int64_t n,
                float beta, float eps) {
  float ap = toF32(alphaP[0]), an = toF32(alphaN[0]);
  for (int64_t i = globalThread(); i < n; i += globalThreads())
    y[i] = fromF32<T>(zrt::xielu(toF32(x[i]), ap, an, beta, eps));
}

/// (dx[i], pp[i], pn[i]) = xieluGrad(x[i], dy[i]); the outputs may alias
/// the inputs of the same index.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    xieluGradKernel(const T *x, const T *alphaP, const T *alphaN, const T *dy,
                    T *dx, T *pp, T *pn, int64_t n, float beta, float eps) {
  float ap = toF32(alphaP[0]), an = toF32(alphaN[0]);
  for (int64_t i = globalThread(); i < n; i += globalThreads()) {
    float d, p, q;
    zrt::xieluGrad(toF32(x[i]), ap, an, beta, eps, toF32(dy[i]), d, p, q);
    dx[i] = fromF32<T>(d);
    pp[i] = fromF32<T>(p);
    pn[i] = fromF32<T>(q);
  }
}

/// (da[i], db[i]) = minimumGrad or maximumGrad(a[i], b[i], dy[i]); the
/// outputs may alias the inputs of the same index.
template <typename T, bool kMax>
__global__ void __launch_bounds__(kThreads)
    minMaxGradKernel(const T *a, const T *b, const T *dy, T *da, T *db,
                     int64_t n) {
  for (int64_t i = globalThread(); i < n; i += globalThreads()) {
    float u, v;
    if constexpr (kMax)
      zrt::maximumGrad(toF32(a[i]), toF32(b[i]), toF32(dy[i]), u, v);
    else
      zrt::minimumGrad(toF32(a[i]), toF32(b[i]), toF32(dy[i]), u, v);
    da[i] = fromF32<T>(u);
    db[i] = fromF32<T>(v);
  }
}

/// y[i] = where(cond[i], a[i], b[i]); y may alias an input.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    whereKernel(const T *cond, const T *a, const T *b, T *y, int64_t n) {
  for (int64_t i = globalThread(); i < n; i += globalThreads())
    y[i] = fromF32<T>(zrt::where(toF32(cond[i]), toF32(a[i]), toF32(b[i])));
}

/// (dt[i], df[i]) = whereGrad(cond[i], dy[i]); the outputs may alias the
/// inputs of the same index.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    whereGradKernel(const T *cond, const T *dy, T *dt, T *df, int64_t n) {
  for (int64_t i = globalThread(); i < n; i += globalThreads()) {
    float t, f;
    zrt::whereGrad(toF32(cond[i]), toF32(dy[i]), t, f);
    dt[i] = fromF32<T>(t);
    df[i] = fromF32<T>(f);
  }
}

/// (dgate[i], dup[i]) = clampedSwigluGrad(gate[i], up[i], dy[i]); the
/// outputs may alias the inputs of the same index.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    clampedSwigluGradKernel(const T *gate, const T *up, const T *dy, T *dgate,
                            T *dup, int64_t n, float alpha, float limit) {
  for (int64_t i = globalThread(); i < n; i += globalThreads()) {
    float dg, du;
    zrt::clampedSwigluGrad(toF32(gate[i]), toF32(up[i]), toF32(dy[i]), alpha,
                           limit, dg, du);
    dgate[i] = fromF32<T>(dg);
    dup[i] = fromF32<T>(du);
  }
}

/// GELU of a biased input and its gradient: out[i] = gelu(s) or
/// geluGrad(s, dy[i]) with s = x[i] + bias[i % biasN] rounded to T, as
/// zrt_add stores it. out may alias x or dy.
template <typename T, int W, bool kGrad>
__global__ void __launch_bounds__(kThreads)
    biasGeluKernel(const T *x, const T *bias, const T *dy, T *out, int64_t n,
                   int64_t biasN) {
  auto value = [](float v, float b, float g) {
    float s = toF32(fromF32<T>(v + b));
    if constexpr (kGrad)
      return zrt::geluGrad(s, g);
    else
      return zrt::gelu(s);
  };
  int64_t packs = n / W;
  for (int64_t p = globalThread(); p < packs; p += globalThreads()) {
    int64_t i = p * W;
    float a[W], d[W] = {};
    loadPack<W>(x + i, a);
    if constexpr (kGrad)
      loadPack<W>(dy + i, d);
    int64_t j = i % biasN;
#pragma unroll
    for (int e = 0; e < W; ++e) {
      a[e] = value(a[e], toF32(bias[j]), d[e]);
      j = j + 1 == biasN ? 0 : j + 1;
    }
    storePack<W>(out + i, a);
  }
  for (int64_t i = packs * W + globalThread(); i < n; i += globalThreads())
    out[i] = fromF32<T>(value(toF32(x[i]), toF32(bias[i % biasN]),
                              kGrad ? toF32(dy[i]) : 0.0f));
}

template <typename S, typename D, int W>
__global__ void __launch_bounds__(kThreads)
    castKernel(const S *in, D *out, int64_t n) {
  int64_t packs = n / W;
  for (int64_t p = globalThread(); p < packs; p += globalThreads()) {
    float v[W];
    loadPack<W>(in + p * W, v);
    storePack<W>(out + p * W, v);
  }
  for (int64_t i = packs * W + globalThread(); i < n; i += globalThreads())
    out[i] = fromF32<D>(toF32(in[i]));
}

template <typename T, int W>
__global__ void __launch_bounds__(kThreads)
    fillKernel(T *out, int64_t n, float value) {
  float v[W];
#pragma unroll
  for (int e = 0; e < W; ++e)
    v[e] = value;
  int64_t packs = n / W;
  for (int64_t p = globalThread(); p < packs; p += globalThreads())
    storePack<W>(out + p * W, v);
  for (int64_t i = packs * W + globalThread(); i < n; i += globalThreads())
    out[i] = fromF32<T>(value);
}

template <typename T>
__global__ void __launch_bounds__(kColumnThreads)
    reduceSumKernel(const T *in, T *out, int64_t rows, int64_t cols) {
  columnReduce<1>(
      rows, cols,
      [&](int64_t r, int64_t c, float *acc) {
        acc[0] += toF32(in[r * cols + c]);
      },
      [&](int64_t c, const float *sums) { out[c] = fromF32<T>(sums[0]); });
}

unsigned packGrid(int64_t n, int w) {
  return gridFor((n + w - 1) / w, kThreads);
}

template <typename Op>
void unary(const char *kernel, int32_t dtype, const void *in, void *out,
           int64_t n, Op op) {
  checkDims(kernel, n);
  dispatch(dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    constexpr int kW = vecWidth<T>();
    if (n == 0)
      return;
    const T *x = static_cast<const T *>(in);
    T *y = static_cast<T *>(out);
    cudaStream_t stream = computeStream();
    if (isAligned(x, 16) && isAligned(y, 16))
      unaryKernel<T, kW><<<packGrid(n, kW), kThreads, 0, stream>>>(x, y, n, op);
    else
      unaryKernel<T, 1><<<packGrid(n, 1), kThreads, 0, stream>>>(x, y, n, op);
    checkLaunch(kernel);
  });
}

/// kBroadcast: rhs may be shorter than lhs (add, mul); otherwise rhsN == n
/// (the gradients), and only the same-index kernels are built.
template <bool kBroadcast, typename Op>
void binary(const char *kernel, int32_t dtype, const void *lhs, const void *rhs,
            void *out, int64_t n, int64_t rhsN, Op op) {
  checkDims(kernel, n, rhsN);
  dispatch(dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    constexpr int kW = vecWidth<T>();
    if (n == 0)
      return;
    if (rhsN == 0 || n % rhsN != 0)
      fatal("%s: %lld elements do not broadcast over %lld", kernel,
            (long long)n, (long long)rhsN);
    const T *a = static_cast<const T *>(lhs);
    const T *b = static_cast<const T *>(rhs);
    T *o = static_cast<T *>(out);
    cudaStream_t stream = computeStream();
    bool packed = isAligned(a, 16) && isAligned(o, 16);
    if (!kBroadcast || rhsN == n) {
      if (packed && isAligned(b, 16))
        binaryKernel<T, kW, kSame>
            <<<packGrid(n, kW), kThreads, 0, stream>>>(a, b, o, n, rhsN, op);
      else
        binaryKernel<T, 1, kSame>
            <<<packGrid(n, 1), kThreads, 0, stream>>>(a, b, o, n, rhsN, op);
    } else if constexpr (kBroadcast) {
      // Packs of rhs start at multiples of kW when rhsN is one.
      bool rhsPacked = isAligned(b, 16) && rhsN % kW == 0;
      if (packed && rhsPacked)
        binaryKernel<T, kW, kRhsPack>
            <<<packGrid(n, kW), kThreads, 0, stream>>>(a, b, o, n, rhsN, op);
      else if (packed)
        binaryKernel<T, kW, kRhsScalar>
            <<<packGrid(n, kW), kThreads, 0, stream>>>(a, b, o, n, rhsN, op);
      else
        binaryKernel<T, 1, kRhsScalar>
            <<<packGrid(n, 1), kThreads, 0, stream>>>(a, b, o, n, rhsN, op);
    }
    checkLaunch(kernel);
  });
}

template <bool kGrad>
void launchBiasGelu(const char *kernel, int32_t dtype, const void *x,
                    const void *bias, const void *dy, void *out, int64_t n,
                    int64_t biasN) {
  checkDims(kernel, n, biasN);
  dispatch(dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    constexpr int kW = vecWidth<T>();
    if (n == 0)
      return;
    if (biasN == 0 || n % biasN != 0)
      fatal("%s: %lld elements do not broadcast over %lld", kernel,
            (long long)n, (long long)biasN);
    const T *a = static_cast<const T *>(x);
    const T *b = static_cast<const T *>(bias);
    const T *d = static_cast<const T *>(dy);
    T *o = static_cast<T *>(out);
    cudaStream_t stream = computeStream();
    if (isAligned(a, 16) && isAligned(o, 16) && (!kGrad || isAligned(d, 16)))
      biasGeluKernel<T, kW, kGrad>
          <<<packGrid(n, kW), kThreads, 0, stream>>>(a, b, d, o, n, biasN);
    else
      biasGeluKernel<T, 1, kGrad>
          <<<packGrid(n, 1), kThreads, 0, stream>>>(a, b, d, o, n, biasN);
    checkLaunch(kernel);
  });
}

} // namespace

void zrt::cuda::copy(void *dst, const void *src, int64_t bytes) {
  if (bytes < 0)
    fatal("zrt_copy: negative size");
  if (bytes == 0)
    return;
  ZRT_CUDA_CHECK(cudaMemcpyAsync(dst, src, size_t(bytes),
                                 cudaMemcpyDeviceToDevice, computeStream()));
}

void zrt::cuda::cast(int32_t srcDtype, const void *src, int32_t dstDtype,
                     void *dst, int64_t n) {
  checkDims("zrt_cast", n);
  if (srcDtype == dstDtype) {
    copy(dst, src, n * elementSize(srcDtype, "zrt_cast"));
    return;
  }
  dispatch(srcDtype, "zrt_cast", [&](auto srcTag) {
    dispatch(dstDtype, "zrt_cast", [&](auto dstTag) {
      using S = decltype(srcTag);
      using D = decltype(dstTag);
      // Eight elements: whole uint4s on both sides (one or two).
      constexpr int kW = 8;
      // Equal dtypes were copied above.
      if constexpr (!std::is_same_v<S, D>) {
        if (n == 0)
          return;
        const S *in = static_cast<const S *>(src);
        D *out = static_cast<D *>(dst);
        cudaStream_t stream = computeStream();
        if (isAligned(in, 16) && isAligned(out, 16))
          castKernel<S, D, kW>
              <<<packGrid(n, kW), kThreads, 0, stream>>>(in, out, n);
        else
          castKernel<S, D, 1>
              <<<packGrid(n, 1), kThreads, 0, stream>>>(in, out, n);
        checkLaunch("zrt_cast");
      }
    });
  });
}

void zrt::cuda::fill(int32_t dtype, void *dst, int64_t n, double value) {
  checkDims("zrt_fill", n);
  dispatch(dtype, "zrt_fill", [&](auto tag) {
    using T = decltype(tag);
    constexpr int kW = vecWidth<T>();
    if (n == 0)
      return;
    T *out = static_cast<T *>(dst);
    cudaStream_t stream = computeStream();
    if (isAligned(out, 16))
      fillKernel<T, kW>
          <<<packGrid(n, kW), kThreads, 0, stream>>>(out, n, float(value));
    else
      fillKernel<T, 1>
          <<<packGrid(n, 1), kThreads, 0, stream>>>(out, n, float(value));
    checkLaunch("zrt_fill");
  });
}

void zrt::cuda::add(int32_t dtype, const void *lhs, const void *rhs, void *out,
                    int64_t n, int64_t rhsN) {
  binary<true>("zrt_add", dtype, lhs, rhs, out, n, rhsN, AddOp{});
}

void zrt::cuda::mul(int32_t dtype, const void *lhs, const void *rhs, void *out,
                    int64_t n, int64_t rhsN) {
  binary<true>("zrt_mul", dtype, lhs, rhs, out, n, rhsN, MulOp{});
}

void zrt::cuda::scale(int32_t dtype, const void *in, void *out, int64_t n,
                      double factor) {
  unary("zrt_scale", dtype, in, out, n, ScaleOp{float(factor)});
}

void zrt::cuda::gelu(int32_t dtype, const void *x, void *y, int64_t n) {
  unary("zrt_gelu", dtype, x, y, n, GeluOp{});
}

void zrt::cuda::geluGrad(int32_t dtype, const void *x, const void *dy, void *dx,
                         int64_t n) {
  binary<false>("zrt_gelu_grad", dtype, x, dy, dx, n, n, GeluGradOp{});
}

void zrt::cuda::biasGelu(int32_t dtype, const void *x, const void *bias,
                         void *y, int64_t n, int64_t biasN) {
  launchBiasGelu<false>("zrt_bias_gelu", dtype, x, bias, nullptr, y, n, biasN);
}

void zrt::cuda::biasGeluGrad(int32_t dtype, const void *x, const void *bias,
                             const void *dy, void *dx, int64_t n,
                             int64_t biasN) {
  launchBiasGelu<true>("zrt_bias_gelu_grad", dtype, x, bias, dy, dx, n, biasN);
}

void zrt::cuda::geluErf(int32_t dtype, const void *x, void *y, int64_t n) {
  unary("zrt_gelu_erf", dtype, x, y, n, GeluErfOp{});
}

void zrt::cuda::geluErfGrad(int32_t dtype, const void *x, const void *dy,
                            void *dx, int64_t n) {
  binary<false>("zrt_gelu_erf_grad", dtype, x, dy, dx, n, n, GeluErfGradOp{});
}

void zrt::cuda::silu(int32_t dtype, const void *x, void *y, int64_t n) {
  unary("zrt_silu", dtype, x, y, n, SiluOp{});
}

void zrt::cuda::siluGrad(int32_t dtype, const void *x, const void *dy, void *dx,
                         int64_t n) {
  binary<false>("zrt_silu_grad", dtype, x, dy, dx, n, n, SiluGradOp{});
}

void zrt::cuda::swiglu(int32_t dtype, const void *gate, const void *up, void *y,
                       int64_t n) {
  binary<false>("zrt_swiglu", dtype, gate, up, y, n, n, SwigluOp{});
}

void zrt::cuda::swigluGrad(int32_t dtype, const void *gate, const void *up,
                           const void *dy, void *dgate, void *dup, int64_t n) {
  checkDims("zrt_swiglu_grad", n);
  dispatch(dtype, "zrt_swiglu_grad", [&](auto tag) {
    using T = decltype(tag);
    constexpr int kW = vecWidth<T>();
    if (n == 0)
      return;
    const T *g = static_cast<const T *>(gate);
    const T *u = static_cast<const T *>(up);
    const T *d = static_cast<const T *>(dy);
    T *dg = static_cast<T *>(dgate);
    T *du = static_cast<T *>(dup);
    cudaStream_t stream = computeStream();
    if (isAligned(g, 16) && isAligned(u, 16) && isAligned(d, 16) &&
        isAligned(dg, 16) && isAligned(du, 16))
      swigluGradKernel<T, kW>
          <<<packGrid(n, kW), kThreads, 0, stream>>>(g, u, d, dg, du, n);
    else
      swigluGradKernel<T, 1>
          <<<packGrid(n, 1), kThreads, 0, stream>>>(g, u, d, dg, du, n);
    checkLaunch("zrt_swiglu_grad");
  });
}

void zrt::cuda::clampedSwiglu(int32_t dtype, const void *gate, const void *up,
                              void *y, int64_t n, double alpha, double limit) {
  binary<false>("zrt_clamped_swiglu", dtype, gate, up, y, n, n,
                ClampedSwigluOp{float(alpha), float(limit)});
}

void zrt::cuda::clampedSwigluGrad(int32_t dtype, const void *gate,
                                  const void *up, const void *dy, void *dgate,
                                  void *dup, int64_t n, double alpha,
                                  double limit) {
  checkDims("zrt_clamped_swiglu_grad", n);
  dispatch(dtype, "zrt_clamped_swiglu_grad", [&](auto tag) {
    using T = decltype(tag);
    if (n == 0)
      return;
    clampedSwigluGradKernel<T>
        <<<packGrid(n, 1), kThreads, 0, computeStream()>>>(
            static_cast<const T *>(gate), static_cast<const T *>(up),
            static_cast<const T *>(dy), static_cast<T *>(dgate),
            static_cast<T *>(dup), n, float(alpha), float(limit));
    checkLaunch("zrt_clamped_swiglu_grad");
  });
}

void zrt::cuda::xielu(int32_t dtype, const void *x, const void *alpha_p,
                      const void *alpha_n, void *y, int64_t n, double beta,
                      double eps) {
  checkDims("zrt_xielu", n);
  dispatch(dtype, "zrt_xielu", [&](auto tag) {
    using T = decltype(tag);
    if (n == 0)
      return;
    xieluKernel<T><<<packGrid(n, 1), kThreads, 0, computeStream()>>>(
        static_cast<const T *>(x), static_cast<const T *>(alpha_p),
        static_cast<const T *>(alpha_n), static_cast<T *>(y), n, float(beta),
        float(eps));
    checkLaunch("zrt_xielu");
  });
}

void zrt::cuda::xieluGrad(int32_t dtype, const void *x, const void *alpha_p,
                          const void *alpha_n, const void *dy, void *dx,
                          void *pp, void *pn, int64_t n, double beta,
                          double eps) {
  checkDims("zrt_xielu_grad", n);
  dispatch(dtype, "zrt_xielu_grad", [&](auto tag) {
    using T = decltype(tag);
    if (n == 0)
      return;
    xieluGradKernel<T><<<packGrid(n, 1), kThreads, 0, computeStream()>>>(
        static_cast<const T *>(x), static_cast<const T *>(alpha_p),
        static_cast<const T *>(alpha_n), static_cast<const T *>(dy),
        static_cast<T *>(dx), static_cast<T *>(pp), static_cast<T *>(pn), n,
        float(beta), float(eps));
    checkLaunch("zrt_xielu_grad");
  });
}

void zrt::cuda::relu(int32_t dtype, const void *x, void *y, int64_t n) {
  unary("zrt_relu", dtype, x, y, n, ReluOp{});
}

void zrt::cuda::reluGrad(int32_t dtype, const void *y, const void *dy, void *dx,
                         int64_t n) {
  binary<false>("zrt_relu_grad", dtype, y, dy, dx, n, n, ReluGradOp{});
}

void zrt::cuda::tanh(int32_t dtype, const void *x, void *y, int64_t n) {
  unary("zrt_tanh", dtype, x, y, n, TanhOp{});
}

void zrt::cuda::tanhGrad(int32_t dtype, const void *y, const void *dy, void *dx,
                         int64_t n) {
  binary<false>("zrt_tanh_grad", dtype, y, dy, dx, n, n, TanhGradOp{});
}

void zrt::cuda::exp(int32_t dtype, const void *x, void *y, int64_t n) {
  unary("zrt_exp", dtype, x, y, n, ExpOp{});
}

void zrt::cuda::expGrad(int32_t dtype, const void *y, const void *dy, void *dx,
                        int64_t n) {
  binary<false>("zrt_exp_grad", dtype, y, dy, dx, n, n, ExpGradOp{});
}

void zrt::cuda::log(int32_t dtype, const void *x, void *y, int64_t n) {
  unary("zrt_log", dtype, x, y, n, LogOp{});
}

void zrt::cuda::logGrad(int32_t dtype, const void *x, const void *dy, void *dx,
                        int64_t n) {
  binary<false>("zrt_log_grad", dtype, x, dy, dx, n, n, LogGradOp{});
}

void zrt::cuda::softplus(int32_t dtype, const void *x, void *y, int64_t n,
                         double beta, double threshold) {
  unary("zrt_softplus", dtype, x, y, n,
        SoftplusOp{float(beta), float(threshold)});
}

void zrt::cuda::softplusGrad(int32_t dtype, const void *x, const void *dy,
                             void *dx, int64_t n, double beta,
                             double threshold) {
  binary<false>("zrt_softplus_grad", dtype, x, dy, dx, n, n,
                SoftplusGradOp{float(beta), float(threshold)});
}

void zrt::cuda::reduceSum(int32_t dtype, const void *in, void *out,
                          int64_t rows, int64_t cols) {
  checkDims("zrt_reduce_sum", rows, cols);
  dispatch(dtype, "zrt_reduce_sum", [&](auto tag) {
    using T = decltype(tag);
    if (cols == 0)
      return;
    int64_t tiles = (cols + kColTile - 1) / kColTile;
    reduceSumKernel<T>
        <<<gridFor(tiles, 1), dim3(kColTile, kRowLanes), 0, computeStream()>>>(
            static_cast<const T *>(in), static_cast<T *>(out), rows, cols);
    checkLaunch("zrt_reduce_sum");
  });
}

// Reinforcement learning's losses (GRPO): clamp, minimum/maximum, where.

namespace {

/// A clamp bound as a tensor of `dtype` holds it: torch converts a number
/// bound to the tensor's dtype (as the CPU kernels' roundTo).
float boundIn(int32_t dtype, double v) {
  float f = float(v);
  if (dtype == ZRT_BF16)
    return __bfloat162float(__float2bfloat16_rn(f));
  if (dtype == ZRT_F16)
    return __half2float(__float2half_rn(f));
  return f;
}

template <bool kMax>
void minMaxGrad(const char *kernel, int32_t dtype, const void *a, const void *b,
                const void *dy, void *da, void *db, int64_t n) {
  checkDims(kernel, n);
  dispatch(dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    if (n == 0)
      return;
    minMaxGradKernel<T, kMax><<<packGrid(n, 1), kThreads, 0, computeStream()>>>(
        static_cast<const T *>(a), static_cast<const T *>(b),
        static_cast<const T *>(dy), static_cast<T *>(da), static_cast<T *>(db),
        n);
    checkLaunch(kernel);
  });
}

} // namespace

void zrt::cuda::reciprocal(int32_t dtype, const void *x, void *y, int64_t n) {
  unary("zrt_reciprocal", dtype, x, y, n, ReciprocalOp{});
}

void zrt::cuda::reciprocalGrad(int32_t dtype, const void *y, const void *dy,
                               void *dx, int64_t n) {
  binary<false>("zrt_reciprocal_grad", dtype, y, dy, dx, n, n,
                ReciprocalGradOp{});
}

void zrt::cuda::clamp(int32_t dtype, const void *x, void *y, int64_t n,
                      double lo, double hi) {
  unary("zrt_clamp", dtype, x, y, n,
        ClampOp{boundIn(dtype, lo), boundIn(dtype, hi)});
}

void zrt::cuda::clampGrad(int32_t dtype, const void *x, const void *dy,
                          void *dx, int64_t n, double lo, double hi) {
  binary<false>("zrt_clamp_grad", dtype, x, dy, dx, n, n,
                ClampGradOp{boundIn(dtype, lo), boundIn(dtype, hi)});
}

void zrt::cuda::minimum(int32_t dtype, const void *a, const void *b, void *y,
                        int64_t n) {
  binary<false>("zrt_minimum", dtype, a, b, y, n, n, MinimumOp{});
}

void zrt::cuda::maximum(int32_t dtype, const void *a, const void *b, void *y,
                        int64_t n) {
  binary<false>("zrt_maximum", dtype, a, b, y, n, n, MaximumOp{});
}

void zrt::cuda::minimumGrad(int32_t dtype, const void *a, const void *b,
                            const void *dy, void *da, void *db, int64_t n) {
  minMaxGrad<false>("zrt_minimum_grad", dtype, a, b, dy, da, db, n);
}

void zrt::cuda::maximumGrad(int32_t dtype, const void *a, const void *b,
                            const void *dy, void *da, void *db, int64_t n) {
  minMaxGrad<true>("zrt_maximum_grad", dtype, a, b, dy, da, db, n);
}

void zrt::cuda::where(int32_t dtype, const void *cond, const void *a,
                      const void *b, void *y, int64_t n) {
  checkDims("zrt_where", n);
  dispatch(dtype, "zrt_where", [&](auto tag) {
    using T = decltype(tag);
    if (n == 0)
      return;
    whereKernel<T><<<packGrid(n, 1), kThreads, 0, computeStream()>>>(
        static_cast<const T *>(cond), static_cast<const T *>(a),
        static_cast<const T *>(b), static_cast<T *>(y), n);
    checkLaunch("zrt_where");
  });
}

void zrt::cuda::whereGrad(int32_t dtype, const void *cond, const void *dy,
                          void *dt, void *df, int64_t n) {
  checkDims("zrt_where_grad", n);
  dispatch(dtype, "zrt_where_grad", [&](auto tag) {
    using T = decltype(tag);
    if (n == 0)
      return;
    whereGradKernel<T><<<packGrid(n, 1), kThreads, 0, computeStream()>>>(
        static_cast<const T *>(cond), static_cast<const T *>(dy),
        static_cast<T *>(dt), static_cast<T *>(df), n);
    checkLaunch("zrt_where_grad");
  });
}
