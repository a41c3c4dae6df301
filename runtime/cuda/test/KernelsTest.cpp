//===- KernelsTest.cpp - CUDA kernels against the CPU backend -------------===//
//
// Part of the zero-mlir project.
//
// The kernels of Elementwise.cu, Layout.cu, Softmax.cu, Rope.cu, LayerNorm.cu
// and Embedding.cu against the CPU backend's zrt_* kernels on the same inputs,
// for f32, bf16 and f16: odd sizes, broadcasts, aliasing, empty tensors, and
// pointers one element off alignment (the scalar paths, which must give
// bitwise the results of the 16-byte paths).
//
// Tolerances. Kernels that move data or apply one fp32 operation per element
// (copy, cast, fill, add, mul, scale, relu and its gradient, layout,
// embedding) must match bitwise (any NaN matches any NaN: the backends quiet
// NaNs differently). Everything else is computed in fp32 by both from the
// same inputs, in another summation order (and GELU with another FMA
// contraction). runtime/test/KernelTest.cpp bounds the CPU's error against a
// double reference with an fp32 term per kernel; the GPU's summation chains
// are shorter than the CPU's, so it is within the same term, and the two
// differ by at most twice it. A 16-bit result may differ by one more ulp
// where the two fp32 values straddle a rounding boundary: 2u relative to
// the result plus the subnormal spacing. Reductions must also be bitwise
// reproducible: run twice, and aligned against misaligned.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"
#include "TestUtil.h"
#include "zero_rt/quantize.h"
#include "zero_rt/scratch.h"
#include "zero_rt/zrt.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

using namespace zrt::cuda;
using namespace zrt::cuda::test;
using zrt_test::Buffer;
using zrt_test::dtypeName;
using zrt_test::randomBuffer;

namespace {

constexpr double kF32 = 0x1p-24;

int64_t elemSize(int32_t dtype) { return zrt_dtype_size(dtype); }

/// Waits for everything on the device: cudaMemcpy runs on the legacy
/// stream, which does not order the non-blocking compute stream.
void settle() { ZRT_CUDA_CHECK(cudaDeviceSynchronize()); }

/// A device copy of host ids or labels.
template <typename T>
std::unique_ptr<DeviceBuffer> deviceCopy(const std::vector<T> &host) {
  auto d = std::make_unique<DeviceBuffer>(host);
  settle();
  return d;
}

/// Bitwise equality, except that any NaN matches any NaN.
void expectSame(const Buffer &got, const Buffer &want,
                const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int64_t size = elemSize(got.dtype);
  int failures = 0;
  for (int64_t i = 0; i < got.size(); ++i) {
    const char *g = static_cast<const char *>(got.data()) + i * size;
    const char *w = static_cast<const char *>(want.data()) + i * size;
    if (std::memcmp(g, w, size_t(size)) == 0 ||
        (std::isnan(got.get(i)) && std::isnan(want.get(i))))
      continue;
    ADD_FAILURE() << what << ": element " << i << " is " << got.get(i)
                  << ", expected " << want.get(i);
    if (++failures == 5)
      return;
  }
}

/// Exact equality of the bits (two runs, or two code paths, of the GPU).
void expectBitwise(const Buffer &a, const Buffer &b, const std::string &what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  EXPECT_EQ(
      0, std::memcmp(a.data(), b.data(), size_t(a.size() * elemSize(a.dtype))))
      << what << " is not bitwise reproducible";
}

/// |got - want| <= atol + rtol |want|, plus one ulp of a 16-bit result.
void expectNear(const Buffer &got, const Buffer &want, double rtol, double atol,
                const std::string &what) {
  bool f32 = got.dtype == ZRT_F32;
  double ulpRel = f32 ? 0.0 : 2 * zrt_test::unitRoundoff(got.dtype);
  double ulpAbs = f32 ? 0.0 : 2 * zrt_test::subnormalRoundoff(got.dtype);
  zrt_test::expectClose(got.values(), want.values(), rtol + ulpRel,
                        atol + ulpAbs, what);
}

double maxAbs(const Buffer &b) {
  double m = 0;
  for (int64_t i = 0; i < b.size(); ++i)
    m = std::max(m, std::fabs(b.get(i)));
  return m;
}

/// The largest 1/sqrt(biased variance + eps) over the rows of x, in double.
double maxRstd(const Buffer &x, int64_t rows, int64_t cols, double eps) {
  double m = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t c = 0; c < cols; ++c)
      mean += x.get(r * cols + c);
    mean /= double(cols);
    for (int64_t c = 0; c < cols; ++c)
      var += (x.get(r * cols + c) - mean) * (x.get(r * cols + c) - mean);
    m = std::max(m, 1.0 / std::sqrt(var / double(cols) + eps));
  }
  return m;
}

std::string label(const char *kernel, int32_t dtype, int64_t a, int64_t b = -1,
                  int64_t offset = 0) {
  std::string s =
      std::string(kernel) + " " + dtypeName(dtype) + " " + std::to_string(a);
  if (b >= 0)
    s += "x" + std::to_string(b);
  if (offset)
    s += " misaligned";
  return s;
}

class CudaKernelsTest : public ::testing::TestWithParam<int32_t> {
protected:
  int32_t dtype() const { return GetParam(); }
  std::mt19937 rng{2024};
};

//===----------------------------------------------------------------------===//
// Copy, cast, fill
//===----------------------------------------------------------------------===//

TEST(CudaCopyCastTest, CopyAndEveryCast) {
  ZRT_REQUIRE_GPU();
  std::mt19937 rng(7);
  std::vector<uint8_t> bytes(1001);
  for (uint8_t &b : bytes)
    b = uint8_t(rng());
  auto src = deviceCopy(bytes);
  DeviceBuffer dst(bytes.size());
  copy(dst.get(), src->get(), int64_t(bytes.size()));
  copy(dst.get(), src->get(), 0);
  EXPECT_EQ(dst.download<uint8_t>(), bytes);

  const int32_t dtypes[] = {ZRT_F32, ZRT_BF16, ZRT_F16};
  for (int32_t from : dtypes) {
    for (int32_t to : dtypes) {
      for (int64_t n : {0, 1, 7, 8, 4099}) {
        for (int64_t offset : {0, 1}) {
          // Overflow to f16 infinity, ties, subnormals of every type.
          Buffer in = randomBuffer(from, rng, n, -70000, 70000);
          const double specials[] = {INFINITY, -INFINITY,    NAN,  1e-6,
                                     65519.0,  65520.0,      3e-8, -0.0,
                                     1e-40,    1.00048828125};
          for (int64_t i = 0; i < n && i < 10; ++i)
            in.set(i, specials[i]);
          Buffer want(to, n);
          zrt_cast(from, in.data(), to, want.data(), n);
          DeviceArray din(in, offset), dout(to, n, offset);
          cast(from, din.get(), to, dout.get(), n);
          expectSame(dout.download(), want,
                     std::string("cast ") + dtypeName(from) + " -> " +
                         dtypeName(to) + " n " + std::to_string(n) +
                         (offset ? " misaligned" : ""));
        }
      }
    }
  }
}

TEST_P(CudaKernelsTest, Fill) {
  ZRT_REQUIRE_GPU();
  for (int64_t n : {0, 1, 9, 4099}) {
    for (int64_t offset : {0, 1}) {
      for (double value : {0.1, -3.5, 1e10}) {
        Buffer want(dtype(), n);
        zrt_fill(dtype(), want.data(), n, value);
        DeviceArray d(dtype(), n, offset);
        fill(dtype(), d.get(), n, value);
        expectSame(d.download(), want, label("fill", dtype(), n, -1, offset));
      }
    }
  }
}

//===----------------------------------------------------------------------===//
// Pointwise
//===----------------------------------------------------------------------===//

TEST_P(CudaKernelsTest, AddMulBroadcastAndInPlace) {
  ZRT_REQUIRE_GPU();
  struct Case {
    int64_t n, rhsN;
  };
  struct Offsets {
    int64_t lhs, rhs;
  };
  // Same shape, rhs lengths that are and are not multiples of a pack, a
  // scalar rhs, and n = 0.
  for (Case c : {Case{1, 1}, Case{7, 7}, Case{7, 1}, Case{1000, 1000},
                 Case{4104, 4104}, Case{4104, 8}, Case{4104, 24}, Case{4104, 3},
                 Case{4104, 1}, Case{999, 333}, Case{4096, 1024}, Case{0, 5}}) {
    // Everything aligned, everything misaligned, and only rhs misaligned.
    for (Offsets off : {Offsets{0, 0}, Offsets{1, 1}, Offsets{0, 1}}) {
      for (bool inPlace : {false, true}) {
        for (bool isAdd : {true, false}) {
          Buffer lhs = randomBuffer(dtype(), rng, c.n);
          Buffer rhs = randomBuffer(dtype(), rng, c.rhsN);
          Buffer want(dtype(), c.n);
          (isAdd ? zrt_add : zrt_mul)(dtype(), lhs.data(), rhs.data(),
                                      want.data(), c.n, c.rhsN);
          DeviceArray dl(lhs, off.lhs), dr(rhs, off.rhs),
              dout(dtype(), c.n, off.lhs);
          void *out = inPlace ? dl.get() : dout.get();
          (isAdd ? add : mul)(dtype(), dl.get(), dr.get(), out, c.n, c.rhsN);
          std::string what = label(isAdd ? "add" : "mul", dtype(), c.n, c.rhsN,
                                   off.lhs + off.rhs) +
                             (inPlace ? " in place" : "");
          expectSame(inPlace ? dl.download() : dout.download(), want, what);
        }
      }
    }
  }
}

TEST_P(CudaKernelsTest, ScaleReluExact) {
  ZRT_REQUIRE_GPU();
  for (int64_t n : {1, 7, 5003}) {
    Buffer x = randomBuffer(dtype(), rng, n, -6, 6);
    // NaN propagates through relu; relu_grad passes dy where y is NaN.
    const double specials[] = {NAN, INFINITY, -INFINITY, -0.0, 0.0};
    for (int64_t i = 0; i < n && i < 5; ++i)
      x.set(i, specials[i]);
    Buffer dy = randomBuffer(dtype(), rng, n);
    Buffer wantScale(dtype(), n), wantRelu(dtype(), n), wantGrad(dtype(), n);
    zrt_scale(dtype(), x.data(), wantScale.data(), n, 0.3);
    zrt_relu(dtype(), x.data(), wantRelu.data(), n);
    zrt_relu_grad(dtype(), wantRelu.data(), dy.data(), wantGrad.data(), n);
    for (int64_t offset : {0, 1}) {
      DeviceArray dx(x, offset), dout(dtype(), n, offset);
      scale(dtype(), dx.get(), dout.get(), n, 0.3);
      expectSame(dout.download(), wantScale,
                 label("scale", dtype(), n, -1, offset));
      relu(dtype(), dx.get(), dout.get(), n);
      expectSame(dout.download(), wantRelu,
                 label("relu", dtype(), n, -1, offset));
      DeviceArray dyv(dy, offset);
      reluGrad(dtype(), dout.get(), dyv.get(), dyv.get(), n); // in place
      expectSame(dyv.download(), wantGrad,
                 label("relu_grad", dtype(), n, -1, offset));
      scale(dtype(), dx.get(), dx.get(), n, 0.3); // in place
      expectSame(dx.download(), wantScale,
                 label("scale in place", dtype(), n, -1, offset));
    }
  }
  scale(dtype(), nullptr, nullptr, 0, 2.0);
  relu(dtype(), nullptr, nullptr, 0);
}

// GELU, SiLU and tanh: the same fp32 formulas (KernelMath.h); FMA
// contraction may differ, which the exponential amplifies by |2u| <= 20 ulp
// over [-5, 5] (GELU; |x| for SiLU, |2x| for tanh): 4e-6 relative is twice
// the CPU test's 1e-6 with room for that. The gradients cross zero (GELU
// near x = -0.75, SiLU near -1.28; tanh's, fed x here, at |x| = 1), hence an
// absolute term as in the CPU test (2 * 1e-6).
TEST_P(CudaKernelsTest, ActivationsAndGrads) {
  ZRT_REQUIRE_GPU();
  using Kernel = void (*)(int32_t, const void *, void *, int64_t);
  using GradKernel = void (*)(int32_t, const void *, const void *, void *,
                              int64_t);
  struct Activation {
    const char *name;
    Kernel cpu, gpu;
    GradKernel cpuGrad, gpuGrad;
  };
  const Activation activations[] = {
      {"gelu", zrt_gelu, gelu, zrt_gelu_grad, geluGrad},
      {"gelu_erf", zrt_gelu_erf, geluErf, zrt_gelu_erf_grad, geluErfGrad},
      {"silu", zrt_silu, silu, zrt_silu_grad, siluGrad},
      {"tanh", zrt_tanh, zrt::cuda::tanh, zrt_tanh_grad, tanhGrad},
  };
  for (const Activation &a : activations) {
    std::string grad = std::string(a.name) + "_grad";
    for (int64_t n : {1, 7, 5003}) {
      Buffer x = randomBuffer(dtype(), rng, n, -5, 5);
      const double extremes[] = {100.0, -100.0, 30.0, -30.0};
      for (int64_t i = 0; i < n && i < 4; ++i)
        x.set(n - 1 - i, extremes[i]);
      Buffer dy = randomBuffer(dtype(), rng, n);
      Buffer wantY(dtype(), n), wantDx(dtype(), n);
      a.cpu(dtype(), x.data(), wantY.data(), n);
      a.cpuGrad(dtype(), x.data(), dy.data(), wantDx.data(), n);
      for (int64_t offset : {0, 1}) {
        DeviceArray dx(x, offset), dg(dy, offset), dout(dtype(), n, offset);
        a.gpu(dtype(), dx.get(), dout.get(), n);
        expectNear(dout.download(), wantY, 4e-6, 2e-7,
                   label(a.name, dtype(), n, -1, offset));
        a.gpuGrad(dtype(), dx.get(), dg.get(), dout.get(), n);
        expectNear(dout.download(), wantDx, 4e-6, 2e-6,
                   label(grad.c_str(), dtype(), n, -1, offset));
      }
    }
  }
}

// exp, log and softplus: the same fp32 formulas (KernelMath.h: expApprox,
// then CUDA's logf and log1pf against libm's, within an ulp each), so the
// GELU tolerances above; exp up to e^10 (f16's range ends at e^11), log of
// positive inputs, softplus at PyTorch's defaults and at beta 2, threshold
// 5 (inputs on both sides of it).
TEST_P(CudaKernelsTest, ExpLogSoftplusAndGrads) {
  ZRT_REQUIRE_GPU();
  using Kernel = std::function<void(int32_t, const void *, void *, int64_t)>;
  using GradKernel =
      std::function<void(int32_t, const void *, const void *, void *, int64_t)>;
  struct Case {
    std::string name;
    double lo, hi;
    Kernel cpu, gpu;
    GradKernel cpuGrad, gpuGrad;
    bool gradFromResult;
  };
  auto softplusCase = [](double beta, double threshold) {
    return Case{
        "softplus beta " + std::to_string(beta),
        -15,
        15,
        [=](int32_t d, const void *x, void *y, int64_t n) {
          zrt_softplus(d, x, y, n, beta, threshold);
        },
        [=](int32_t d, const void *x, void *y, int64_t n) {
          softplus(d, x, y, n, beta, threshold);
        },
        [=](int32_t d, const void *x, const void *g, void *dx, int64_t n) {
          zrt_softplus_grad(d, x, g, dx, n, beta, threshold);
        },
        [=](int32_t d, const void *x, const void *g, void *dx, int64_t n) {
          softplusGrad(d, x, g, dx, n, beta, threshold);
        },
        false};
  };
  const Case cases[] = {
      {"exp", -10, 10, zrt_exp, zrt::cuda::exp, zrt_exp_grad, expGrad, true},
      {"log", 1e-3, 20, zrt_log, zrt::cuda::log, zrt_log_grad, logGrad, false},
      softplusCase(1.0, 20.0),
      softplusCase(2.0, 5.0),
  };
  for (const Case &c : cases) {
    for (int64_t n : {1, 7, 5003}) {
      Buffer x = randomBuffer(dtype(), rng, n, c.lo, c.hi);
      Buffer dy = randomBuffer(dtype(), rng, n);
      Buffer wantY(dtype(), n), wantDx(dtype(), n);
      c.cpu(dtype(), x.data(), wantY.data(), n);
      // exp's gradient reads its result, the others their input.
      const Buffer &fwd = c.gradFromResult ? wantY : x;
      c.cpuGrad(dtype(), fwd.data(), dy.data(), wantDx.data(), n);
      for (int64_t offset : {0, 1}) {
        DeviceArray dx(x, offset), df(fwd, offset), dg(dy, offset),
            dout(dtype(), n, offset);
        c.gpu(dtype(), dx.get(), dout.get(), n);
        expectNear(dout.download(), wantY, 4e-6, 2e-7,
                   label(c.name.c_str(), dtype(), n, -1, offset));
        c.gpuGrad(dtype(), df.get(), dg.get(), dout.get(), n);
        expectNear(dout.download(), wantDx, 4e-6, 2e-7,
                   label((c.name + " grad").c_str(), dtype(), n, -1, offset));
      }
    }
  }
}

// xIELU and its gradient: the same fp32 formulas (KernelMath.h, CUDA's
// expm1f against libm's within an ulp), with the coefficients read from
// device memory; inputs on both branches and at x == eps, both zeros.
TEST_P(CudaKernelsTest, XieluAndGrad) {
  ZRT_REQUIRE_GPU();
  const double beta = 0.5, eps = -0x1p-20;
  Buffer ap(dtype(), std::vector<double>{0.8}),
      an(dtype(), std::vector<double>{1.3});
  DeviceArray dap(ap), dan(an);
  for (int64_t n : {1, 7, 5003}) {
    Buffer x = randomBuffer(dtype(), rng, n, -6, 6);
    const double edges[] = {eps, 0.0, -0.0, eps / 2};
    for (int64_t i = 0; i < n && i < 4; ++i)
      x.set(n - 1 - i, edges[i]);
    Buffer dy = randomBuffer(dtype(), rng, n);
    Buffer wantY(dtype(), n), wantDx(dtype(), n), wantPp(dtype(), n),
        wantPn(dtype(), n);
    zrt_xielu(dtype(), x.data(), ap.data(), an.data(), wantY.data(), n, beta,
              eps);
    zrt_xielu_grad(dtype(), x.data(), ap.data(), an.data(), dy.data(),
                   wantDx.data(), wantPp.data(), wantPn.data(), n, beta, eps);
    for (int64_t offset : {0, 1}) {
      DeviceArray dx(x, offset), dg(dy, offset), dout(dtype(), n, offset),
          dp(dtype(), n, offset), dq(dtype(), n, offset);
      xielu(dtype(), dx.get(), dap.get(), dan.get(), dout.get(), n, beta, eps);
      expectNear(dout.download(), wantY, 4e-6, 2e-7,
                 label("xielu", dtype(), n, -1, offset));
      xieluGrad(dtype(), dx.get(), dap.get(), dan.get(), dg.get(), dout.get(),
                dp.get(), dq.get(), n, beta, eps);
      expectNear(dout.download(), wantDx, 4e-6, 2e-6,
                 label("xielu_grad dx", dtype(), n, -1, offset));
      expectNear(dp.download(), wantPp, 4e-6, 2e-7,
                 label("xielu_grad pp", dtype(), n, -1, offset));
      expectNear(dq.download(), wantPn, 4e-6, 2e-7,
                 label("xielu_grad pn", dtype(), n, -1, offset));
    }
  }
}

// The bias-fused GELU and its gradient against the CPU's, which equal
// zrt_add then zrt_gelu bit for bit: GELU's tolerances above, for a bias of
// one element, one that is not a multiple of the pack, and a long one;
// unaligned pointers take the scalar kernel.
TEST_P(CudaKernelsTest, BiasGeluAndGrad) {
  ZRT_REQUIRE_GPU();
  for (auto [n, biasN] :
       {std::pair<int64_t, int64_t>{7, 1}, {5005, 5}, {6000, 3000}}) {
    Buffer x = randomBuffer(dtype(), rng, n, -5, 5);
    Buffer bias = randomBuffer(dtype(), rng, biasN, -1, 1);
    Buffer dy = randomBuffer(dtype(), rng, n);
    Buffer wantY(dtype(), n), wantDx(dtype(), n);
    zrt_bias_gelu(dtype(), x.data(), bias.data(), wantY.data(), n, biasN);
    zrt_bias_gelu_grad(dtype(), x.data(), bias.data(), dy.data(), wantDx.data(),
                       n, biasN);
    for (int64_t offset : {0, 1}) {
      DeviceArray dx(x, offset), db(bias, offset), dg(dy, offset),
          dout(dtype(), n, offset);
      biasGelu(dtype(), dx.get(), db.get(), dout.get(), n, biasN);
      expectNear(dout.download(), wantY, 4e-6, 2e-7,
                 label("bias_gelu", dtype(), n, biasN, offset));
      biasGeluGrad(dtype(), dx.get(), db.get(), dg.get(), dout.get(), n, biasN);
      expectNear(dout.download(), wantDx, 4e-6, 2e-6,
                 label("bias_gelu_grad", dtype(), n, biasN, offset));
    }
  }
  biasGelu(dtype(), nullptr, nullptr, nullptr, 0, 1);
}

// SwiGLU: SiLU's formula times up (in [-2, 2]), so the tolerances above
// with twice the absolute terms; the outputs may alias the inputs.
TEST_P(CudaKernelsTest, SwigluAndGrad) {
  ZRT_REQUIRE_GPU();
  for (int64_t n : {0, 1, 7, 5003}) {
    Buffer gate = randomBuffer(dtype(), rng, n, -5, 5);
    const double extremes[] = {100.0, -100.0, 30.0, -30.0};
    for (int64_t i = 0; i < n && i < 4; ++i)
      gate.set(n - 1 - i, extremes[i]);
    Buffer up = randomBuffer(dtype(), rng, n, -2, 2);
    Buffer dy = randomBuffer(dtype(), rng, n);
    Buffer wantY(dtype(), n), wantDg(dtype(), n), wantDu(dtype(), n);
    zrt_swiglu(dtype(), gate.data(), up.data(), wantY.data(), n);
    zrt_swiglu_grad(dtype(), gate.data(), up.data(), dy.data(), wantDg.data(),
                    wantDu.data(), n);
    for (int64_t offset : {0, 1}) {
      DeviceArray dg(gate, offset), du(up, offset), ddy(dy, offset),
          out(dtype(), n, offset), out2(dtype(), n, offset);
      swiglu(dtype(), dg.get(), du.get(), out.get(), n);
      expectNear(out.download(), wantY, 4e-6, 4e-7,
                 label("swiglu", dtype(), n, -1, offset));
      swigluGrad(dtype(), dg.get(), du.get(), ddy.get(), out.get(), out2.get(),
                 n);
      expectNear(out.download(), wantDg, 4e-6, 4e-6,
                 label("swiglu_grad dgate", dtype(), n, -1, offset));
      expectNear(out2.download(), wantDu, 4e-6, 4e-7,
                 label("swiglu_grad dup", dtype(), n, -1, offset));
      // In place: dgate over gate, dup over up.
      swigluGrad(dtype(), dg.get(), du.get(), ddy.get(), dg.get(), du.get(), n);
      expectBitwise(
          dg.download(), out.download(),
          label("swiglu_grad dgate in place", dtype(), n, -1, offset));
      expectBitwise(du.download(), out2.download(),
                    label("swiglu_grad dup in place", dtype(), n, -1, offset));
    }
  }
}

//===----------------------------------------------------------------------===//
// reduce_sum
//===----------------------------------------------------------------------===//

// The CPU test allows 4 * rows * 2^-24 absolute (inputs in [-1, 1]); twice
// that here.
TEST_P(CudaKernelsTest, ReduceSum) {
  ZRT_REQUIRE_GPU();
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 1},
                            {1, 37},
                            {37, 1},
                            {129, 77},
                            {1000, 16},
                            {333, 1030},
                            {2048, 300},
                            {5000, 3},
                            {0, 5},
                            {5, 0}}) {
    Buffer in = randomBuffer(dtype(), rng, rows * cols);
    Buffer want(dtype(), cols);
    zrt_reduce_sum(dtype(), in.data(), want.data(), rows, cols);
    DeviceArray din(in), dout(dtype(), cols);
    // Garbage first: rows = 0 must still write zeros.
    dout.upload(randomBuffer(dtype(), rng, cols));
    reduceSum(dtype(), din.get(), dout.get(), rows, cols);
    Buffer got = dout.download();
    std::string what = label("reduce_sum", dtype(), rows, cols);
    expectNear(got, want, 0, 8 * rows * kF32, what);
    reduceSum(dtype(), din.get(), dout.get(), rows, cols);
    expectBitwise(dout.download(), got, what);
    DeviceArray din1(in, 1), dout1(dtype(), cols, 1);
    reduceSum(dtype(), din1.get(), dout1.get(), rows, cols);
    expectBitwise(dout1.download(), got, what + " misaligned");
  }
}

//===----------------------------------------------------------------------===//
// Layout
//===----------------------------------------------------------------------===//

TEST_P(CudaKernelsTest, Transpose) {
  ZRT_REQUIRE_GPU();
  struct Case {
    std::vector<int64_t> shape, perm;
  };
  // Tiled (2-D and batched), contiguous runs of 16-byte and narrower words,
  // size-1 dims, identity, rank 0 and rank 8, empty.
  const Case cases[] = {
      {{37, 53}, {1, 0}},
      {{3, 40, 70}, {0, 2, 1}},
      {{3, 4, 5}, {2, 1, 0}},
      {{5, 6, 8}, {1, 0, 2}},
      {{5, 6, 3}, {1, 0, 2}},
      {{2, 3, 4, 5}, {3, 1, 0, 2}},
      {{2, 3, 4, 5}, {2, 0, 1, 3}},
      {{2, 3, 4, 5}, {0, 2, 1, 3}},
      {{4, 64, 12, 16}, {0, 2, 1, 3}},
      {{1, 4, 1, 6, 7}, {3, 0, 4, 2, 1}},
      {{5, 1, 7, 1}, {3, 2, 1, 0}},
      {{4, 6}, {0, 1}},
      {{}, {}},
      {{2, 1, 2, 3, 1, 2, 2, 3}, {7, 2, 0, 5, 1, 3, 6, 4}},
      {{3, 0, 2}, {2, 1, 0}},
  };
  for (const Case &c : cases) {
    int64_t n = 1;
    for (int64_t d : c.shape)
      n *= d;
    int32_t rank = int32_t(c.shape.size());
    Buffer in = randomBuffer(dtype(), rng, n), want(dtype(), n);
    zrt_transpose(dtype(), in.data(), want.data(), rank, c.shape.data(),
                  c.perm.data());
    for (int64_t offset : {0, 1}) {
      DeviceArray din(in, offset), dout(dtype(), n, offset);
      transpose(dtype(), din.get(), dout.get(), rank, c.shape.data(),
                c.perm.data());
      std::string what = "transpose " + std::string(dtypeName(dtype())) +
                         " rank " + std::to_string(rank) + " n " +
                         std::to_string(n) + (offset ? " misaligned" : "");
      expectBitwise(dout.download(), want, what);
    }
  }
}

TEST_P(CudaKernelsTest, SplitConcat) {
  ZRT_REQUIRE_GPU();
  struct Case {
    int64_t outer, inner;
    std::vector<int64_t> sizes;
  };
  for (const Case &c :
       {Case{3, 5, {4, 7, 2}}, Case{1, 3, {1000, 24}}, Case{64, 1, {8, 8, 8}},
        Case{2, 8, {2, 0, 3}}, Case{5, 16, {1, 3}}, Case{0, 4, {1, 2}},
        Case{3, 4, {}}}) {
    int64_t total = std::accumulate(c.sizes.begin(), c.sizes.end(), int64_t(0));
    int32_t num = int32_t(c.sizes.size());
    Buffer whole = randomBuffer(dtype(), rng, c.outer * total * c.inner);
    std::vector<Buffer> want;
    std::vector<void *> hostOuts;
    for (int64_t s : c.sizes)
      want.emplace_back(dtype(), c.outer * s * c.inner);
    for (Buffer &w : want)
      hostOuts.push_back(w.data());
    zrt_split(dtype(), whole.data(), hostOuts.data(), c.sizes.data(), num,
              c.outer, c.inner);
    for (int64_t offset : {0, 1}) {
      std::string what = label("split", dtype(), c.outer, c.inner, offset);
      DeviceArray dwhole(whole, offset);
      std::vector<std::unique_ptr<DeviceArray>> parts;
      std::vector<void *> outs;
      for (int64_t s : c.sizes) {
        parts.push_back(std::make_unique<DeviceArray>(
            dtype(), c.outer * s * c.inner, offset));
        outs.push_back(parts.back()->get());
      }
      split(dtype(), dwhole.get(), outs.data(), c.sizes.data(), num, c.outer,
            c.inner);
      for (int32_t p = 0; p < num; ++p)
        expectBitwise(parts[p]->download(), want[p],
                      what + " part " + std::to_string(p));
      DeviceArray back(dtype(), c.outer * total * c.inner, offset);
      std::vector<const void *> ins(outs.begin(), outs.end());
      concat(dtype(), ins.data(), c.sizes.data(), num, back.get(), c.outer,
             c.inner);
      expectBitwise(back.download(), whole, what + " concat");
    }
  }
}

//===----------------------------------------------------------------------===//
// Softmax and cross-entropy
//===----------------------------------------------------------------------===//

const std::pair<int64_t, int64_t> kRowShapes[] = {
    {1, 1},   {3, 7},    {17, 32},  {64, 10},  {5, 100},  {9, 257},
    {4, 768}, {4, 1024}, {3, 1025}, {5, 1500}, {2, 3001}, {0, 5}};

// Softmax: the CPU test allows 1e-5 relative (the sum of exponentials);
// twice that. Its gradient cancels in dy - sum(y dy): the CPU test's
// 1e-6 * max|dx| absolute term, twice.
TEST_P(CudaKernelsTest, SoftmaxAndGrad) {
  ZRT_REQUIRE_GPU();
  for (auto [rows, cols] : kRowShapes) {
    Buffer x = randomBuffer(dtype(), rng, rows * cols, -8, 8);
    if (rows * cols > 2)
      x.set(1, -INFINITY);
    Buffer y(dtype(), rows * cols);
    zrt_softmax(dtype(), x.data(), y.data(), rows, cols);
    Buffer dy = randomBuffer(dtype(), rng, rows * cols);
    Buffer dx(dtype(), rows * cols);
    zrt_softmax_grad(dtype(), y.data(), dy.data(), dx.data(), rows, cols);

    std::string what = label("softmax", dtype(), rows, cols);
    Buffer got(dtype(), 0), gotGrad(dtype(), 0);
    for (int64_t offset : {0, 1}) {
      DeviceArray dxv(x, offset), dyv(dtype(), rows * cols, offset);
      softmax(dtype(), dxv.get(), dyv.get(), rows, cols);
      DeviceArray yv(y, offset), gv(dy, offset),
          out(dtype(), rows * cols, offset);
      softmaxGrad(dtype(), yv.get(), gv.get(), out.get(), rows, cols);
      if (offset == 0) {
        got = dyv.download();
        gotGrad = out.download();
        expectNear(got, y, 2e-5, 2e-9, what);
        expectNear(gotGrad, dx, 2e-5, 2e-6 * maxAbs(dx), what + " grad");
      } else {
        expectBitwise(dyv.download(), got, what + " misaligned");
        expectBitwise(out.download(), gotGrad, what + " grad misaligned");
      }
    }
  }
}

// logsumexp: the CPU test allows u + 1e-6 relative and 4 cols 2^-24
// absolute (the sum of exponentials), twice here; its gradient is one
// expApprox per element (the GELU tolerances). reduce_max and its gradient
// (the ties' share, one quotient) must match bitwise, on integer inputs
// whose maxima tie. Each must be reproducible on misaligned rows.
TEST_P(CudaKernelsTest, LogsumexpReduceMaxAndGrad) {
  ZRT_REQUIRE_GPU();
  for (auto [rows, cols] : kRowShapes) {
    int64_t n = rows * cols;
    Buffer x = randomBuffer(dtype(), rng, n, -8, 8);
    if (n > 2)
      x.set(1, -INFINITY);
    Buffer ints(dtype(), n);
    for (int64_t i = 0; i < n; ++i)
      ints.set(i, std::round(x.get(i) * 0.375));
    Buffer dy = randomBuffer(dtype(), rng, rows);
    Buffer lse(dtype(), rows), dlse(dtype(), n), mx(dtype(), rows),
        dmx(dtype(), n);
    zrt_logsumexp(dtype(), x.data(), lse.data(), rows, cols);
    zrt_logsumexp_grad(dtype(), x.data(), lse.data(), dy.data(), dlse.data(),
                       rows, cols);
    zrt_reduce_max(dtype(), ints.data(), mx.data(), rows, cols);
    zrt_reduce_max_grad(dtype(), ints.data(), mx.data(), dy.data(), dmx.data(),
                        rows, cols);

    std::string what = label("logsumexp", dtype(), rows, cols);
    std::string whatMax = label("reduce_max", dtype(), rows, cols);
    Buffer got(dtype(), 0), gotGrad(dtype(), 0);
    for (int64_t offset : {0, 1}) {
      DeviceArray dx(x, offset), di(ints, offset), dl(lse, offset),
          dm(mx, offset), dg(dy, offset), out(dtype(), rows, offset),
          outGrad(dtype(), n, offset);
      logsumexp(dtype(), dx.get(), out.get(), rows, cols);
      logsumexpGrad(dtype(), dx.get(), dl.get(), dg.get(), outGrad.get(), rows,
                    cols);
      if (offset == 0) {
        got = out.download();
        gotGrad = outGrad.download();
        expectNear(got, lse, 2e-6, 8 * cols * kF32, what);
        expectNear(gotGrad, dlse, 4e-6, 2e-7, what + " grad");
      } else {
        expectBitwise(out.download(), got, what + " misaligned");
        expectBitwise(outGrad.download(), gotGrad, what + " grad misaligned");
      }
      reduceMax(dtype(), di.get(), out.get(), rows, cols);
      expectSame(out.download(), mx, whatMax);
      reduceMaxGrad(dtype(), di.get(), dm.get(), dg.get(), outGrad.get(), rows,
                    cols);
      expectSame(outGrad.download(), dmx, whatMax + " grad");
    }
  }
}

// Rotary embedding: both backends round the same fp32 steps (the products
// pinned on the GPU, uncontracted on the CPU) from cosines, sines and powers
// rounded once from double, so they agree but where a double result lies
// within its own error of an fp32 rounding boundary: one fp32 ulp of a
// cosine or sine, or of an inverse frequency times the position. 4 * 2^-24
// * (seq + 2) * max|x| bounds that; a 16-bit result may take one more ulp.
TEST_P(CudaKernelsTest, Rope) {
  ZRT_REQUIRE_GPU();
  struct Case {
    int64_t batch, heads, seq, dim;
    double theta;
  };
  // Fewer and more rows than a block takes, a head_dim over the shared
  // table, one pair, a long sequence (large angles), empty.
  const Case cases[] = {{2, 3, 37, 16, 1e4},   {1, 40, 9, 128, 5e5},
                        {3, 1, 5, 2, 1e4},     {1, 2, 3, 2060, 1e4},
                        {1, 1, 4097, 64, 1e4}, {0, 2, 3, 8, 1e4},
                        {2, 2, 0, 8, 1e4}};
  for (const Case &c : cases) {
    int64_t n = c.batch * c.heads * c.seq * c.dim;
    Buffer x = randomBuffer(dtype(), rng, n, -2, 2);
    // A table (transformers' own inverse frequencies) over several launches
    // where head_dim / 2 exceeds what one launch takes.
    std::vector<float> table(static_cast<size_t>(c.dim / 2));
    for (size_t i = 0; i < table.size(); ++i)
      table[i] = float(std::pow(c.theta, -double(2 * i) / double(c.dim)) /
                       (i % 3 ? 1.0 : 4.0));
    for (int mode = 0; mode < 8; ++mode) {
      int inverse = mode & 1, interleaved = (mode >> 1) & 1;
      const float *invFreq = mode >> 2 ? table.data() : nullptr;
      double scale = mode >> 2 ? 1.2079441541679836 : 1.0;
      Buffer want(dtype(), n);
      zrt_rope(dtype(), x.data(), want.data(), c.batch, c.heads, c.seq, c.dim,
               c.theta, inverse, interleaved, invFreq, scale);
      const char *kernel[] = {"rope", "rope inverse", "rope interleaved",
                              "rope inverse interleaved"};
      std::string what = label(kernel[mode & 3], dtype(), c.seq, c.dim) +
                         (invFreq ? " table" : "");
      DeviceArray dx(x), dy(dtype(), n);
      rope(dtype(), dx.get(), dy.get(), c.batch, c.heads, c.seq, c.dim, c.theta,
           inverse, interleaved, invFreq, scale);
      Buffer got = dy.download();
      expectNear(got, want, 0, 4 * kF32 * double(c.seq + 2) * 2 * scale, what);
      rope(dtype(), dx.get(), dy.get(), c.batch, c.heads, c.seq, c.dim, c.theta,
           inverse, interleaved, invFreq, scale);
      expectBitwise(dy.download(), got, what + " rerun");
      DeviceArray in1(x, 1);
      rope(dtype(), in1.get(), in1.get(), c.batch, c.heads, c.seq, c.dim,
           c.theta, inverse, interleaved, invFreq, scale);
      expectBitwise(in1.download(), got, what + " in place misaligned");
    }
  }
}

// The loss: 1e-5 relative in the CPU test, twice. The gradient: as the
// softmax (the CPU test's 1e-5 relative and 1e-6 * max absolute, twice).
TEST_P(CudaKernelsTest, SoftmaxCrossEntropyAndGrad) {
  ZRT_REQUIRE_GPU();
  for (auto [rows, classes] : {std::pair<int64_t, int64_t>{1, 1},
                               {7, 10},
                               {100, 10},
                               {7, 1500},
                               {3, 5000},
                               {1100, 37},
                               {0, 3}}) {
    for (int32_t ignore : {0, 1}) {
      Buffer logits = randomBuffer(dtype(), rng, rows * classes, -5, 5);
      std::vector<int64_t> labels(static_cast<size_t>(rows));
      std::uniform_int_distribution<int64_t> pick(0, classes - 1);
      for (int64_t &l : labels)
        l = pick(rng);
      // ignore_index -100 on every third row.
      for (int64_t r = 0; ignore && r < rows; r += 3)
        labels[r] = -100;
      std::vector<int32_t> labels32(labels.begin(), labels.end());
      auto dLabels64 = deviceCopy(labels);
      auto dLabels32 = deviceCopy(labels32);
      auto dLoss = deviceCopy(std::vector<float>{5.0f});
      auto dDloss = deviceCopy(std::vector<float>{1.7f});
      float dloss = 1.7f;
      for (int32_t labelType : {ZRT_I32, ZRT_I64}) {
        const void *hostLabels =
            labelType == ZRT_I32 ? static_cast<const void *>(labels32.data())
                                 : labels.data();
        const void *devLabels =
            labelType == ZRT_I32 ? dLabels32->get() : dLabels64->get();
        float wantLoss = 0;
        zrt_softmax_cross_entropy(dtype(), logits.data(), labelType, hostLabels,
                                  &wantLoss, rows, classes, classes, ignore,
                                  -100);
        Buffer wantGrad(dtype(), rows * classes);
        zrt_softmax_cross_entropy_grad(dtype(), logits.data(), labelType,
                                       hostLabels, &dloss, wantGrad.data(),
                                       rows, classes, classes, ignore, -100);
        std::string what =
            label("softmax_cross_entropy", dtype(), rows, classes) +
            (labelType == ZRT_I32 ? " i32" : " i64") +
            (ignore ? " ignore_index" : "");
        float gotLoss = 0;
        Buffer gotGrad(dtype(), 0);
        for (int64_t offset : {0, 1}) {
          DeviceArray dx(logits, offset), dg(dtype(), rows * classes, offset);
          softmaxCrossEntropy(dtype(), dx.get(), labelType, devLabels,
                              dLoss->get<float>(), rows, classes, classes,
                              ignore, -100);
          float loss = dLoss->download<float>()[0];
          softmaxCrossEntropyGrad(dtype(), dx.get(), labelType, devLabels,
                                  dDloss->get<float>(), dg.get(), rows, classes,
                                  classes, ignore, -100);
          Buffer grad = dg.download();
          if (offset == 0) {
            gotLoss = loss;
            gotGrad = grad;
            EXPECT_NEAR(loss, wantLoss, 2e-5 * std::fabs(wantLoss) + 1e-7)
                << what;
            expectNear(grad, wantGrad, 2e-5, 2e-6 * maxAbs(wantGrad),
                       what + " grad");
            softmaxCrossEntropy(dtype(), dx.get(), labelType, devLabels,
                                dLoss->get<float>(), rows, classes, classes,
                                ignore, -100);
            EXPECT_EQ(dLoss->download<float>()[0], gotLoss)
                << what << " is not bitwise reproducible";
          } else {
            EXPECT_EQ(loss, gotLoss) << what << " misaligned";
            expectBitwise(grad, gotGrad, what + " grad misaligned");
          }
        }
      }
    }
  }
}

// The chunked output projection and loss against the CPU kernels, for
// chunks that divide the rows, that do not and that exceed them, with and
// without ignored labels, at f32 and bf16 (16-bit logits and gradients may
// round one unit in the last place apart where cuBLASLt and the CPU's BLAS
// sum a product in another order).
TEST(CudaLinearCrossEntropyTest, MatchesCpu) {
  ZRT_REQUIRE_GPU();
  std::mt19937 rng(11);
  int64_t rows = 37, hidden = 24, vocab = 1500;
  for (int32_t dtype : {ZRT_F32, ZRT_BF16}) {
    bool f32 = dtype == ZRT_F32;
    Buffer x = randomBuffer(dtype, rng, rows * hidden, -1, 1);
    Buffer w = randomBuffer(dtype, rng, vocab * hidden, -1, 1);
    std::vector<int64_t> labels(static_cast<size_t>(rows));
    std::uniform_int_distribution<int64_t> pick(0, vocab - 1);
    for (int64_t &l : labels)
      l = pick(rng);
    auto dLoss = deviceCopy(std::vector<float>{5.0f});
    auto dDloss = deviceCopy(std::vector<float>{1.7f});
    float dloss = 1.7f;
    for (int32_t ignore : {0, 1}) {
      std::vector<int64_t> used = labels;
      for (int64_t r = 0; ignore && r < rows; r += 3)
        used[r] = -100;
      auto dLabels = deviceCopy(used);
      for (int64_t chunk :
           {int64_t(1), int64_t(8), int64_t(37), int64_t(50)}) {
        std::string what = "linear_cross_entropy dtype " +
                           std::to_string(dtype) + " chunk " +
                           std::to_string(chunk) +
                           (ignore ? " ignore_index" : "");
        float wantLoss = 0;
        zrt_linear_cross_entropy(dtype, x.data(), w.data(), ZRT_I64,
                                 used.data(), &wantLoss, rows, hidden, vocab,
                                 chunk, ignore, -100);
        Buffer wantDx(dtype, rows * hidden), wantDw(dtype, vocab * hidden);
        zrt_linear_cross_entropy_grad(dtype, x.data(), w.data(), ZRT_I64,
                                      used.data(), &dloss, wantDx.data(),
                                      wantDw.data(), rows, hidden, vocab,
                                      chunk, ignore, -100);
        DeviceArray dx(x, 0), dw(w, 0), gx(dtype, rows * hidden, 0),
            gw(dtype, vocab * hidden, 0);
        linearCrossEntropy(dtype, dx.get(), dw.get(), ZRT_I64,
                           dLabels->get(), dLoss->get<float>(), rows, hidden,
                           vocab, chunk, ignore, -100);
        EXPECT_NEAR(dLoss->download<float>()[0], wantLoss,
                    (f32 ? 2e-5 : 1e-3) * std::fabs(wantLoss))
            << what;
        linearCrossEntropyGrad(dtype, dx.get(), dw.get(), ZRT_I64,
                               dLabels->get(), dDloss->get<float>(), gx.get(),
                               gw.get(), rows, hidden, vocab, chunk, ignore,
                               -100);
        double atol = f32 ? 2e-5 : 2e-3;
        expectNear(gx.download(), wantDx, 2e-4, atol * maxAbs(wantDx),
                   what + " dx");
        expectNear(gw.download(), wantDw, 2e-4, atol * maxAbs(wantDw),
                   what + " dw");
      }
    }
  }
}

// The tiled SwiGLU MLP and its gradients against the CPU kernels, for tile
// counts that divide the rows, that do not and that exceed them (f32 only).
TEST(CudaTiledMlpTest, MatchesCpu) {
  ZRT_REQUIRE_GPU();
  std::mt19937 rng(12);
  int64_t rows = 37, hidden = 24, inter = 72;
  Buffer x = randomBuffer(ZRT_F32, rng, rows * hidden, -1, 1);
  Buffer wg = randomBuffer(ZRT_F32, rng, inter * hidden, -1, 1);
  Buffer wu = randomBuffer(ZRT_F32, rng, inter * hidden, -1, 1);
  Buffer wd = randomBuffer(ZRT_F32, rng, hidden * inter, -1, 1);
  Buffer dy = randomBuffer(ZRT_F32, rng, rows * hidden, -1, 1);
  for (int64_t tiles : {int64_t(1), int64_t(4), int64_t(37), int64_t(50)}) {
    std::string what = "tiled_mlp tiles " + std::to_string(tiles);
    Buffer wantY(ZRT_F32, rows * hidden), wantDx(ZRT_F32, rows * hidden),
        wantDwg(ZRT_F32, inter * hidden), wantDwu(ZRT_F32, inter * hidden),
        wantDwd(ZRT_F32, hidden * inter);
    zrt_tiled_mlp(ZRT_F32, x.data(), wg.data(), wu.data(), wd.data(),
                  wantY.data(), rows, hidden, inter, tiles);
    zrt_tiled_mlp_grad(ZRT_F32, x.data(), wg.data(), wu.data(), wd.data(),
                       dy.data(), wantDx.data(), wantDwg.data(), wantDwu.data(),
                       wantDwd.data(), rows, hidden, inter, tiles);
    DeviceArray gx(x, 0), gwg(wg, 0), gwu(wu, 0), gwd(wd, 0), gdy(dy, 0),
        y(ZRT_F32, rows * hidden, 0), dx(ZRT_F32, rows * hidden, 0),
        dwg(ZRT_F32, inter * hidden, 0), dwu(ZRT_F32, inter * hidden, 0),
        dwd(ZRT_F32, hidden * inter, 0);
    tiledMlp(ZRT_F32, gx.get(), gwg.get(), gwu.get(), gwd.get(), y.get(), rows,
             hidden, inter, tiles);
    tiledMlpGrad(ZRT_F32, gx.get(), gwg.get(), gwu.get(), gwd.get(), gdy.get(),
                 dx.get(), dwg.get(), dwu.get(), dwd.get(), rows, hidden, inter,
                 tiles);
    expectNear(y.download(), wantY, 2e-4, 2e-5 * maxAbs(wantY), what + " y");
    expectNear(dx.download(), wantDx, 2e-4, 2e-5 * maxAbs(wantDx),
               what + " dx");
    expectNear(dwg.download(), wantDwg, 2e-4, 2e-5 * maxAbs(wantDwg),
               what + " dwg");
    expectNear(dwu.download(), wantDwu, 2e-4, 2e-5 * maxAbs(wantDwu),
               what + " dwu");
    expectNear(dwd.download(), wantDwd, 2e-4, 2e-5 * maxAbs(wantDwd),
               what + " dwd");
  }
}

// Logits padded to `cols` columns (zero-pad-vocab) give the unpadded loss
// and gradient bit for bit, whatever the padding holds; its gradient is 0.
TEST_P(CudaKernelsTest, SoftmaxCrossEntropyPadded) {
  ZRT_REQUIRE_GPU();
  for (auto [rows, classes, cols] :
       {std::tuple<int64_t, int64_t, int64_t>{7, 10, 128},
        {100, 1500, 1536},
        {3, 5001, 5120}}) {
    Buffer logits = randomBuffer(dtype(), rng, rows * classes, -5, 5);
    Buffer padded(dtype(), rows * cols);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        padded.set(r * cols + c,
                   c < classes ? logits.get(r * classes + c) : 30.0 + c % 7);
    std::vector<int64_t> labels(static_cast<size_t>(rows));
    std::uniform_int_distribution<int64_t> pick(0, classes - 1);
    for (int64_t &l : labels)
      l = pick(rng);
    auto dLabels = deviceCopy(labels);
    auto dLoss = deviceCopy(std::vector<float>{5.0f});
    auto dDloss = deviceCopy(std::vector<float>{1.7f});
    std::string what =
        label("softmax_cross_entropy padded", dtype(), rows, classes);
    DeviceArray dx(logits, 0), dg(dtype(), rows * classes, 0);
    DeviceArray px(padded, 0), pg(dtype(), rows * cols, 0);
    softmaxCrossEntropy(dtype(), dx.get(), ZRT_I64, dLabels->get(),
                        dLoss->get<float>(), rows, classes, classes, 0, 0);
    float want = dLoss->download<float>()[0];
    softmaxCrossEntropy(dtype(), px.get(), ZRT_I64, dLabels->get(),
                        dLoss->get<float>(), rows, classes, cols, 0, 0);
    EXPECT_EQ(dLoss->download<float>()[0], want) << what;
    softmaxCrossEntropyGrad(dtype(), dx.get(), ZRT_I64, dLabels->get(),
                            dDloss->get<float>(), dg.get(), rows, classes,
                            classes, 0, 0);
    softmaxCrossEntropyGrad(dtype(), px.get(), ZRT_I64, dLabels->get(),
                            dDloss->get<float>(), pg.get(), rows, classes, cols,
                            0, 0);
    Buffer grad = dg.download(), paddedGrad = pg.download();
    int64_t mismatches = 0;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        mismatches += paddedGrad.get(r * cols + c) !=
                      (c < classes ? grad.get(r * classes + c) : 0.0);
    EXPECT_EQ(mismatches, 0) << what << " grad";
  }
}

//===----------------------------------------------------------------------===//
// Layer norm
//===----------------------------------------------------------------------===//

// y: the CPU test's 1e-5 absolute, twice. dx cancels: the CPU test's 1e-4
// * max|dx|, twice. dw, db: column sums over rows, the CPU test's rows *
// 1e-6, twice.
TEST_P(CudaKernelsTest, LayerNormAndGrad) {
  ZRT_REQUIRE_GPU();
  const std::pair<int64_t, int64_t> shapes[] = {
      {1, 1},    {3, 7},    {70, 64},  {5, 768}, {9, 1000}, {4, 1024},
      {3, 1025}, {6, 1100}, {2, 2049}, {0, 8},   {4, 0}};
  double eps = 1e-5;
  for (auto [rows, cols] : shapes) {
    Buffer x = randomBuffer(dtype(), rng, rows * cols, 1, 4);
    Buffer w = randomBuffer(dtype(), rng, cols, 0.5, 1.5);
    Buffer b = randomBuffer(dtype(), rng, cols);
    Buffer dy = randomBuffer(dtype(), rng, rows * cols);
    Buffer y(dtype(), rows * cols), dx(dtype(), rows * cols), dw(dtype(), cols),
        db(dtype(), cols);
    zrt_layer_norm(dtype(), x.data(), w.data(), b.data(), y.data(), rows, cols,
                   eps);
    zrt_layer_norm_grad(dtype(), x.data(), w.data(), dy.data(), dx.data(),
                        dw.data(), db.data(), rows, cols, eps);
    std::string what = label("layer_norm", dtype(), rows, cols);
    std::vector<Buffer> got;
    for (int64_t offset : {0, 1}) {
      DeviceArray dxv(x, offset), dwv(w, offset), dbv(b, offset),
          dyv(dy, offset), out(dtype(), rows * cols, offset),
          gx(dtype(), rows * cols, offset), gw(dtype(), cols, offset),
          gb(dtype(), cols, offset);
      // Garbage first: with no rows, dw and db must become zero.
      gw.upload(randomBuffer(dtype(), rng, cols));
      gb.upload(randomBuffer(dtype(), rng, cols));
      layerNorm(dtype(), dxv.get(), dwv.get(), dbv.get(), out.get(), rows, cols,
                eps);
      layerNormGrad(dtype(), dxv.get(), dwv.get(), dyv.get(), gx.get(),
                    gw.get(), gb.get(), rows, cols, eps);
      Buffer now[4] = {out.download(), gx.download(), gw.download(),
                       gb.download()};
      if (cols == 0)
        continue;
      if (offset == 0) {
        expectNear(now[0], y, 0, 2e-5, what);
        // dx is rstd times a difference of terms of size |w dy|: rounding
        // (the CPU fuses w * dy - mean into one FMA, the GPU need not)
        // leaves up to a few ulps of rstd |w dy| even where dx is 0, as in a
        // row of one column (rstd = 1/sqrt(eps)).
        double termScale = maxRstd(x, rows, cols, eps) * maxAbs(w) * maxAbs(dy);
        expectNear(now[1], dx, 0, 2e-4 * maxAbs(dx) + 1e-6 * termScale,
                   what + " dx");
        expectNear(now[2], dw, 0, 2e-6 * double(rows), what + " dw");
        expectNear(now[3], db, 0, 2e-6 * double(rows), what + " db");
        got.assign(now, now + 4);
      } else {
        const char *names[] = {" y", " dx", " dw", " db"};
        for (int i = 0; i < 4; ++i)
          expectBitwise(now[i], got[i], what + names[i] + " misaligned");
      }
    }
  }
}

//===----------------------------------------------------------------------===//
// RMS norm
//===----------------------------------------------------------------------===//

/// The largest rsqrt(mean(x^2) + eps) over the rows of x, in double.
double maxRmsRstd(const Buffer &x, int64_t rows, int64_t cols, double eps) {
  double m = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double sq = 0;
    for (int64_t c = 0; c < cols; ++c)
      sq += x.get(r * cols + c) * x.get(r * cols + c);
    m = std::max(m, 1.0 / std::sqrt(sq / double(cols) + eps));
  }
  return m;
}

// y: both backends round the same fp32 formula, from sums of squares added
// in another order; a 16-bit normalized value can round to the neighbouring
// value (2u relative before the weight, then each side rounds its product:
// 6u relative in all with expectNear's 2u). dx as the layer norm's (a row of
// one column cancels to about rstd |w dy| ulps), dw the CPU test's
// rows * 1e-6 + 4u, twice.
TEST_P(CudaKernelsTest, RmsNormAndGrad) {
  ZRT_REQUIRE_GPU();
  const std::pair<int64_t, int64_t> shapes[] = {
      {1, 1},    {3, 7},    {70, 64},  {5, 768}, {9, 1000}, {4, 1024},
      {3, 1025}, {6, 1100}, {2, 4096}, {0, 8},   {4, 0}};
  double eps = 1e-6;
  bool f32 = dtype() == ZRT_F32;
  double u = zrt_test::unitRoundoff(dtype());
  for (auto [rows, cols] : shapes) {
    Buffer x = randomBuffer(dtype(), rng, rows * cols, -3, 3);
    Buffer w = randomBuffer(dtype(), rng, cols, 0.5, 1.5);
    Buffer dy = randomBuffer(dtype(), rng, rows * cols);
    Buffer y(dtype(), rows * cols), dx(dtype(), rows * cols), dw(dtype(), cols);
    zrt_rms_norm(dtype(), x.data(), w.data(), y.data(), rows, cols, eps);
    zrt_rms_norm_grad(dtype(), x.data(), w.data(), dy.data(), dx.data(),
                      dw.data(), rows, cols, eps);
    std::string what = label("rms_norm", dtype(), rows, cols);
    std::vector<Buffer> got;
    for (int64_t offset : {0, 1}) {
      DeviceArray dxv(x, offset), dwv(w, offset), dyv(dy, offset),
          out(dtype(), rows * cols, offset), gx(dtype(), rows * cols, offset),
          gw(dtype(), cols, offset);
      // Garbage first: with no rows, dw must become zero.
      gw.upload(randomBuffer(dtype(), rng, cols));
      rmsNorm(dtype(), dxv.get(), dwv.get(), out.get(), rows, cols, eps);
      rmsNormGrad(dtype(), dxv.get(), dwv.get(), dyv.get(), gx.get(), gw.get(),
                  rows, cols, eps);
      Buffer now[3] = {out.download(), gx.download(), gw.download()};
      if (cols == 0)
        continue;
      if (offset == 0) {
        expectNear(now[0], y, f32 ? 4e-6 : 4 * u, 0, what);
        double termScale =
            maxRmsRstd(x, rows, cols, eps) * maxAbs(w) * maxAbs(dy);
        expectNear(now[1], dx, 0, 2e-4 * maxAbs(dx) + 1e-6 * termScale,
                   what + " dx");
        expectNear(now[2], dw, 0, 2e-6 * double(rows) + (f32 ? 0 : 8 * u),
                   what + " dw");
        got.assign(now, now + 3);
      } else {
        const char *names[] = {" y", " dx", " dw"};
        for (int i = 0; i < 3; ++i)
          expectBitwise(now[i], got[i], what + names[i] + " misaligned");
      }
    }
  }
  ZRT_CUDA_CHECK(cudaStreamSynchronize(computeStream()));
  checkDeviceErrors();
}

//===----------------------------------------------------------------------===//
// Embedding
//===----------------------------------------------------------------------===//

TEST_P(CudaKernelsTest, Embedding) {
  ZRT_REQUIRE_GPU();
  int64_t vocab = 50, numIds = 40;
  std::vector<int64_t> ids(static_cast<size_t>(numIds));
  std::uniform_int_distribution<int64_t> pick(0, vocab - 1);
  for (int64_t &id : ids)
    id = pick(rng);
  std::vector<int32_t> ids32(ids.begin(), ids.end());
  auto dIds64 = deviceCopy(ids);
  auto dIds32 = deviceCopy(ids32);
  for (int64_t dim : {1030, 1, 7, 8, 64}) {
    Buffer table = randomBuffer(dtype(), rng, vocab * dim);
    for (int32_t idType : {ZRT_I32, ZRT_I64}) {
      const void *hostIds = idType == ZRT_I32
                                ? static_cast<const void *>(ids32.data())
                                : ids.data();
      const void *devIds = idType == ZRT_I32 ? dIds32->get() : dIds64->get();
      Buffer want(dtype(), numIds * dim);
      zrt_embedding(dtype(), table.data(), idType, hostIds, want.data(), numIds,
                    vocab, dim);
      for (int64_t offset : {0, 1}) {
        DeviceArray dt(table, offset), dout(dtype(), numIds * dim, offset);
        embedding(dtype(), dt.get(), idType, devIds, dout.get(), numIds, vocab,
                  dim);
        expectSame(dout.download(), want,
                   label("embedding", dtype(), numIds, dim, offset));
      }
    }
  }
  embedding(dtype(), nullptr, ZRT_I64, nullptr, nullptr, 0, vocab, 8);
  ZRT_CUDA_CHECK(cudaStreamSynchronize(computeStream()));
  checkDeviceErrors();
}

// The label shift moves integers: bitwise the CPU's, whatever the float
// dtype of the suite.
TEST(CudaShiftLabelsTest, MatchesTheCpu) {
  ZRT_REQUIRE_GPU();
  std::mt19937 rng{7};
  std::uniform_int_distribution<int64_t> pick(-100, 50000);
  for (auto [rows, cols] :
       {std::pair<int64_t, int64_t>{3, 7}, {64, 1025}, {5, 1}, {0, 4}}) {
    std::vector<int64_t> labels(static_cast<size_t>(rows * cols));
    for (int64_t &l : labels)
      l = pick(rng);
    std::vector<int32_t> labels32(labels.begin(), labels.end());
    std::vector<int64_t> want(labels.size());
    zrt_shift_labels(ZRT_I64, labels.data(), want.data(), rows, cols, -100);
    std::vector<int32_t> want32(labels.size());
    zrt_shift_labels(ZRT_I32, labels32.data(), want32.data(), rows, cols, -100);
    auto d64 = deviceCopy(labels);
    auto d32 = deviceCopy(labels32);
    DeviceBuffer out64(labels.size() * 8), out32(labels.size() * 4);
    shiftLabels(ZRT_I64, d64->get(), out64.get(), rows, cols, -100);
    shiftLabels(ZRT_I32, d32->get(), out32.get(), rows, cols, -100);
    EXPECT_EQ(out64.download<int64_t>(), want) << rows << "x" << cols;
    EXPECT_EQ(out32.download<int32_t>(), want32) << rows << "x" << cols;
  }
}

// Per-id sums of dy rows: the CPU test allows numIds * 2^-24 absolute
// (inputs in [-1, 1]); four times that, as one id here takes 3000 of
// 5000 rows and so a long sum on both sides.
TEST_P(CudaKernelsTest, EmbeddingGrad) {
  ZRT_REQUIRE_GPU();
  struct Case {
    int64_t vocab, dim, numIds;
    // Ids: hot takes the first hotCount positions, shuffled among the
    // others, which are uniform in [0, vocab).
    int64_t hot, hotCount;
    int64_t paddingIdx = -1;
  };
  // Short buckets (a thread per column), a bucket split over warps and
  // sorted in shared memory, one sorted in place in the scratch (> 2048),
  // odd dims, a single id, and no ids; a padding row, hot (its long bucket
  // is skipped by every warp) or not.
  for (Case c :
       {Case{50, 1030, 40, 5, 10}, Case{300, 24, 5000, 7, 3000},
        Case{300, 24, 500, 3, 100}, Case{5, 1, 77, 0, 0}, Case{1, 9, 33, 0, 33},
        Case{40, 16, 0, 0, 0}, Case{300, 24, 5000, 7, 3000, 7},
        Case{50, 1030, 40, 5, 10, 2}}) {
    std::vector<int64_t> ids(static_cast<size_t>(c.numIds));
    std::uniform_int_distribution<int64_t> pick(0, c.vocab - 1);
    for (int64_t i = 0; i < c.numIds; ++i)
      ids[i] = i < c.hotCount ? c.hot : pick(rng);
    std::shuffle(ids.begin(), ids.end(), rng);
    std::vector<int32_t> ids32(ids.begin(), ids.end());
    auto dIds64 = deviceCopy(ids);
    auto dIds32 = deviceCopy(ids32);
    Buffer dy = randomBuffer(dtype(), rng, c.numIds * c.dim);
    for (int32_t idType : {ZRT_I32, ZRT_I64}) {
      const void *hostIds = idType == ZRT_I32
                                ? static_cast<const void *>(ids32.data())
                                : ids.data();
      const void *devIds = idType == ZRT_I32 ? dIds32->get() : dIds64->get();
      Buffer want(dtype(), c.vocab * c.dim);
      zrt_embedding_grad(dtype(), dy.data(), idType, hostIds, want.data(),
                         c.numIds, c.vocab, c.dim, c.paddingIdx);
      std::string what = label("embedding_grad", dtype(), c.numIds, c.dim) +
                         (idType == ZRT_I32 ? " i32" : " i64");
      Buffer got(dtype(), 0);
      for (int64_t offset : {0, 1}) {
        DeviceArray dg(dy, offset), dt(dtype(), c.vocab * c.dim, offset);
        // Garbage first: every row must be written (zero when unused).
        dt.upload(randomBuffer(dtype(), rng, c.vocab * c.dim));
        embeddingGrad(dtype(), dg.get(), idType, devIds, dt.get(), c.numIds,
                      c.vocab, c.dim, c.paddingIdx);
        Buffer now = dt.download();
        if (offset == 0) {
          got = now;
          expectNear(now, want, 0, 4 * double(c.numIds) * kF32, what);
          embeddingGrad(dtype(), dg.get(), idType, devIds, dt.get(), c.numIds,
                        c.vocab, c.dim, c.paddingIdx);
          expectBitwise(dt.download(), got, what);
        } else {
          expectBitwise(now, got, what + " misaligned");
        }
      }
    }
  }
  ZRT_CUDA_CHECK(cudaStreamSynchronize(computeStream()));
  checkDeviceErrors();
}

//===----------------------------------------------------------------------===//
// Scratch accounting and errors
//===----------------------------------------------------------------------===//

/// The scratch peak a kernel causes (it must be freed when it returns).
template <typename Fn>
int64_t scratchOf(const Fn &kernel) {
  ZRT_CUDA_CHECK(cudaDeviceSynchronize());
  zrt_memory_reset_peak();
  kernel();
  EXPECT_EQ(zrt_scratch_bytes_in_use(), 0);
  ZRT_CUDA_CHECK(cudaDeviceSynchronize());
  return zrt_scratch_peak_bytes();
}

TEST(CudaScratchTest, ExactlyThePlannedScratch) {
  ZRT_REQUIRE_GPU();
  std::mt19937 rng(3);
  int32_t dt = ZRT_BF16;
  int64_t rows = 9, cols = 1100, vocab = 50, numIds = 40;
  DeviceArray x(randomBuffer(dt, rng, rows * cols)),
      w(randomBuffer(dt, rng, cols)), b(randomBuffer(dt, rng, cols)),
      g(randomBuffer(dt, rng, rows * cols)), out(dt, rows * cols), dw(dt, cols),
      db(dt, cols), table(dt, vocab * cols);
  std::vector<int64_t> ids(static_cast<size_t>(numIds));
  for (int64_t i = 0; i < numIds; ++i)
    ids[i] = i % 7;
  auto dIds = deviceCopy(ids);
  auto loss = deviceCopy(std::vector<float>{0.0f});

  EXPECT_EQ(scratchOf([&] {
              layerNormGrad(dt, x.get(), w.get(), g.get(), out.get(), dw.get(),
                            db.get(), rows, cols, 1e-5);
            }),
            zrt_scratch_layer_norm_grad(rows, cols));
  EXPECT_EQ(scratchOf([&] {
              rmsNormGrad(dt, x.get(), w.get(), g.get(), out.get(), dw.get(),
                          rows, cols, 1e-5);
            }),
            zrt_scratch_rms_norm_grad(rows, cols));
  EXPECT_EQ(scratchOf([&] {
              embeddingGrad(dt, g.get(), ZRT_I64, dIds->get(), table.get(),
                            numIds, vocab, 8, -1);
            }),
            zrt_scratch_embedding_grad(numIds, vocab, 8));
  EXPECT_EQ(scratchOf([&] {
              embeddingGrad(dt, g.get(), ZRT_I64, dIds->get(), table.get(), 0,
                            vocab, 8, -1);
            }),
            zrt_scratch_embedding_grad(0, vocab, 8));
  // Everything else allocates none.
  EXPECT_EQ(
      scratchOf([&] {
        layerNorm(dt, x.get(), w.get(), b.get(), out.get(), rows, cols, 1e-5);
        rmsNorm(dt, x.get(), w.get(), out.get(), rows, cols, 1e-5);
        softmax(dt, x.get(), out.get(), rows, cols);
        softmaxGrad(dt, x.get(), g.get(), out.get(), rows, cols);
        softmaxCrossEntropy(dt, x.get(), ZRT_I64, dIds->get(),
                            loss->get<float>(), rows, cols, cols, 0, 0);
        softmaxCrossEntropyGrad(dt, x.get(), ZRT_I64, dIds->get(),
                                loss->get<float>(), out.get(), rows, cols, cols,
                                0, 0);
        reduceSum(dt, x.get(), dw.get(), rows, cols);
        embedding(dt, table.get(), ZRT_I64, dIds->get(), out.get(), rows, vocab,
                  8);
        int64_t shape[] = {rows, cols}, perm[] = {1, 0};
        transpose(dt, x.get(), out.get(), 2, shape, perm);
        gelu(dt, x.get(), out.get(), rows * cols);
        add(dt, x.get(), w.get(), out.get(), rows * cols, cols);
        cast(dt, x.get(), ZRT_F16, out.get(), rows * cols);
      }),
      0);
  ZRT_CUDA_CHECK(cudaStreamSynchronize(computeStream()));
  checkDeviceErrors();
}

// Ids and labels are checked on the device: the kernel skips the element
// and sets the error word, which checkDeviceErrors turns into the usual
// fatal error after a synchronization. Death tests run in a fresh process
// ("threadsafe"): a forked child cannot use the parent's CUDA context.
TEST(CudaKernelsDeathTest, IdsAndLabelsOutOfRange) {
  ZRT_REQUIRE_GPU();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  int32_t dt = ZRT_F32;
  int64_t vocab = 10, dim = 4, numIds = 3;
  std::mt19937 rng(5);
  DeviceArray table(randomBuffer(dt, rng, vocab * dim)), out(dt, numIds * dim),
      grad(dt, vocab * dim);
  auto good = deviceCopy(std::vector<int64_t>{0, 9, 3});
  auto high = deviceCopy(std::vector<int64_t>{0, 10, 3});
  auto low = deviceCopy(std::vector<int32_t>{0, -1, 3});
  auto loss = deviceCopy(std::vector<float>{1.0f});
  auto sync = [] {
    ZRT_CUDA_CHECK(cudaStreamSynchronize(computeStream()));
    checkDeviceErrors();
  };
  embedding(dt, table.get(), ZRT_I64, good->get(), out.get(), numIds, vocab,
            dim);
  embeddingGrad(dt, out.get(), ZRT_I64, good->get(), grad.get(), numIds, vocab,
                dim, -1);
  softmaxCrossEntropy(dt, table.get(), ZRT_I64, good->get(), loss->get<float>(),
                      numIds, vocab, vocab, 0, 0);
  sync();
  EXPECT_DEATH(
      {
        embedding(dt, table.get(), ZRT_I64, high->get(), out.get(), numIds,
                  vocab, dim);
        sync();
      },
      "id is out of range");
  EXPECT_DEATH(
      {
        embeddingGrad(dt, out.get(), ZRT_I32, low->get(), grad.get(), numIds,
                      vocab, dim, -1);
        sync();
      },
      "id is out of range");
  EXPECT_DEATH(
      {
        softmaxCrossEntropy(dt, table.get(), ZRT_I64, high->get(),
                            loss->get<float>(), numIds, vocab, vocab, 0, 0);
        sync();
      },
      "label is out of range");
  EXPECT_DEATH(
      {
        softmaxCrossEntropyGrad(dt, table.get(), ZRT_I32, low->get(),
                                loss->get<float>(), grad.get(), numIds, vocab,
                                vocab, 0, 0);
        sync();
      },
      "label is out of range");
}

TEST(CudaKernelsDeathTest, InvalidArguments) {
  ZRT_REQUIRE_GPU();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  DeviceBuffer a(64), b(64);
  int64_t shape[] = {2, 3}, badPerm[] = {0, 0}, negative[] = {2, -1};
  EXPECT_DEATH(add(ZRT_F32, a.get(), b.get(), a.get(), 6, 4),
               "do not broadcast");
  EXPECT_DEATH(mul(ZRT_BF16, a.get(), b.get(), a.get(), 6, 0),
               "do not broadcast");
  EXPECT_DEATH(copy(a.get(), b.get(), -1), "negative size");
  EXPECT_DEATH(cast(ZRT_F32, a.get(), ZRT_F16, b.get(), -2),
               "negative dimension");
  EXPECT_DEATH(fill(7, a.get(), 4, 1.0), "unknown dtype");
  EXPECT_DEATH(transpose(ZRT_F32, a.get(), b.get(), 2, shape, badPerm),
               "invalid permutation");
  EXPECT_DEATH(transpose(ZRT_F32, a.get(), b.get(), 9, shape, badPerm),
               "rank 9");
  void *outs[] = {a.get(), b.get()};
  EXPECT_DEATH(split(ZRT_F32, a.get(), outs, negative, 2, 1, 1),
               "negative part size");
  EXPECT_DEATH(softmaxCrossEntropy(ZRT_F32, a.get(), ZRT_I64, b.get(),
                                   a.get<float>(), 2, 0, 0, 0, 0),
               "no classes");
  EXPECT_DEATH(embedding(ZRT_F32, a.get(), 5, b.get(), a.get(), 1, 1, 1),
               "unknown index type");
  EXPECT_DEATH(
      rope(ZRT_F32, a.get(), b.get(), 1, 1, 2, 3, 1e4, 0, 0, nullptr, 1.0),
      "head_dim 3 is odd");
  EXPECT_DEATH(
      rope(ZRT_BF16, a.get(), b.get(), 1, 1, 2, 4, 0.0, 1, 1, nullptr, 1.0),
      "theta 0 is not positive");
  const float badTable[] = {1.0f, INFINITY};
  EXPECT_DEATH(
      rope(ZRT_F32, a.get(), b.get(), 1, 1, 2, 4, 1e4, 0, 0, badTable, 1.0),
      "inv_freq\\[1\\] is not finite");
  EXPECT_DEATH(
      rope(ZRT_F32, a.get(), b.get(), 1, 1, 2, 4, 1e4, 0, 0, nullptr, 0.0),
      "scale 0 is not positive");
}

//===----------------------------------------------------------------------===//
// Block quantization
//===----------------------------------------------------------------------===//

// The GPU's quantized buffers and dequantized values are the CPU's bit for
// bit (test/E2E/quantize-numpy.test holds the CPU to a numpy model), NaNs
// included: a non-finite block dequantizes to the type's one quiet NaN.
// Both backends sum in fp32 and round once (in different orders): the CPU's
// panels and the device's registers agree within fp32 summation error plus
// expectNear's two 16-bit roundoffs for a rounding boundary between them.
TEST_P(CudaKernelsTest, GroupedMatmulIsTheCpus) {
  ZRT_REQUIRE_GPU();
  std::mt19937 rng(11);
  int32_t dt = dtype();
  const int64_t rows = 70, in = 24, out = 530, experts = 4;
  std::vector<int32_t> offs{20, 20, 45, 60}; // expert 1 empty, 10 rows none
  DeviceBuffer gOffs(offs);
  for (int32_t t : {0, 1}) {
    Buffer x = randomBuffer(dt, rng, rows * in),
           w = randomBuffer(dt, rng, experts * in * out),
           dy = randomBuffer(dt, rng, rows * out);
    Buffer y(dt, rows * out), dw(dt, experts * in * out);
    zrt_grouped_matmul(dt, x.data(), w.data(), ZRT_I32, offs.data(), y.data(),
                       rows, in, out, experts, t);
    zrt_grouped_matmul_weight_grad(dt, x.data(), dy.data(), ZRT_I32,
                                   offs.data(), dw.data(), rows, in, out,
                                   experts, t);
    DeviceArray gx(x), gw(w), gdy(dy), gy(dt, rows * out),
        gdw(dt, experts * in * out);
    EXPECT_EQ(scratchOf([&] {
                groupedMatmul(dt, gx.get(), gw.get(), ZRT_I32, gOffs.get(),
                              gy.get(), rows, in, out, experts, t);
              }),
              zrt_scratch_grouped_matmul(dt, rows, in, out));
    EXPECT_EQ(scratchOf([&] {
                groupedMatmulWeightGrad(dt, gx.get(), gdy.get(), ZRT_I32,
                                        gOffs.get(), gdw.get(), rows, in, out,
                                        experts, t);
              }),
              zrt_scratch_grouped_matmul_weight_grad(dt, rows, in, out));
    expectNear(gy.download(), y, 1e-5, 1e-4, label("grouped_matmul", dt, t));
    expectNear(gdw.download(), dw, 1e-5, 1e-4,
               label("grouped_matmul_weight_grad", dt, t));
  }
}

TEST_P(CudaKernelsTest, QuantizeIsTheCpus) {
  ZRT_REQUIRE_GPU();
  for (int32_t bits : {8, 4}) {
    for (int64_t n : {1, 7, 2048, 2049, 5001, 12288}) {
      for (int64_t chunks : {1, 3}) {
        Buffer in = randomBuffer(dtype(), rng, n * chunks, -2, 2);
        // One block of each kind: zeros, tiny, huge, NaN, infinity.
        auto setBlock = [&](int64_t k, auto value) {
          int64_t block = zrt_quant_block(bits);
          for (int64_t i = k * block; i < (k + 1) * block && i < n * chunks;
               ++i)
            in.set(i, value(i, in.get(i)));
        };
        setBlock(0, [](int64_t, double) { return 0.0; });
        setBlock(1, [](int64_t, double x) { return 1e-6 * x; });
        setBlock(2, [](int64_t, double x) { return 1.5e4 * x; });
        setBlock(3, [](int64_t i, double x) { return i % 7 ? x : NAN; });
        setBlock(4, [](int64_t i, double x) { return i % 9 ? x : -INFINITY; });
        size_t bytes = size_t(chunks * zrt_quant_bytes(n, bits));
        std::vector<uint8_t> want(bytes);
        zrt_quantize(dtype(), in.data(), n, chunks, bits, want.data());
        DeviceArray din(in);
        DeviceBuffer dq(std::vector<uint8_t>(bytes, 0x5a));
        quantize(dtype(), din.get(), n, chunks, bits, dq.get());
        std::string what = label("quantize", dtype(), n, chunks) + " int" +
                           std::to_string(bits);
        EXPECT_EQ(dq.download<uint8_t>(), want) << what;

        Buffer deq(dtype(), n * chunks);
        zrt_dequantize(dtype(), want.data(), n, chunks, bits, deq.data());
        DeviceBuffer dsrc(want);
        DeviceArray dout(dtype(), n * chunks);
        dequantize(dtype(), dsrc.get(), n, chunks, bits, dout.get());
        Buffer got = dout.download();
        EXPECT_EQ(std::memcmp(got.data(), deq.data(),
                              size_t(n * chunks * elemSize(dtype()))),
                  0)
            << "de" << what;
      }
    }
  }
}

TEST(CudaQuantizeDeathTest, RejectsBadWidths) {
  ZRT_REQUIRE_GPU();
  DeviceBuffer a(64), b(64);
  EXPECT_DEATH(quantize(ZRT_F32, a.get(), 4, 1, 2, b.get()),
               "2-bit quantization is not supported");
  EXPECT_DEATH(dequantize(ZRT_F32, a.get(), -1, 1, 8, b.get()),
               "negative dimension");
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, CudaKernelsTest,
                         ::testing::Values(ZRT_F32, ZRT_BF16, ZRT_F16),
                         [](const auto &info) {
                           return std::string(dtypeName(info.param));
                         });

} // namespace

//===----------------------------------------------------------------------===//
// Mixture of experts (f32; scores without ties, whose order the backends
// break differently)
//===----------------------------------------------------------------------===//

namespace {

std::vector<float> normalFloats(std::mt19937 &rng, int64_t n) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float &x : v)
    x = dist(rng);
  return v;
}

void expectClose(const std::vector<float> &got, const std::vector<float> &want,
                 double tol, const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i])))
        << what << " at " << i;
}

} // namespace

// DeepSeek-V3's group-limited sigmoid router with a correction bias and
// eps, and its gradient, against the CPU's on random logits (no ties, where
// the backends' orders differ).
TEST(CudaMoeTest, GroupLimitedRouter) {
  ZRT_REQUIRE_GPU();
  std::mt19937 rng(9);
  const int64_t tokens = 41, experts = 16, groups = 4, topGroups = 2, k = 4;
  const int64_t pairs = tokens * k;
  std::vector<float> logits = normalFloats(rng, tokens * experts);
  std::vector<float> bias = normalFloats(rng, experts);
  std::vector<float> w(pairs), dl(tokens * experts);
  std::vector<int32_t> idx(pairs);
  zrt_moe_router(ZRT_F32, logits.data(), bias.data(), w.data(), ZRT_I32,
                 idx.data(), tokens, experts, k, 1, 1, 2.5, groups, topGroups,
                 1e-20);
  std::vector<float> dw = normalFloats(rng, pairs);
  zrt_moe_router_grad(ZRT_F32, logits.data(), ZRT_I32, idx.data(), dw.data(),
                      dl.data(), tokens, experts, k, 1, 1, 2.5, 1e-20);
  DeviceBuffer dLogits(logits), dBias(bias), dW(w), dIdx(idx), dDw(dw), dDl(dl);
  zrt::cuda::moeRouter(ZRT_F32, dLogits.get(), dBias.get(), dW.get(), ZRT_I32,
                       dIdx.get(), tokens, experts, k, 1, 1, 2.5, groups,
                       topGroups, 1e-20);
  EXPECT_EQ(dIdx.download<int32_t>(), idx);
  expectClose(dW.download<float>(), w, 1e-6, "grouped moe_router weights");
  zrt::cuda::moeRouterGrad(ZRT_F32, dLogits.get(), ZRT_I32, dIdx.get(),
                           dDw.get(), dDl.get(), tokens, experts, k, 1, 1, 2.5,
                           1e-20);
  expectClose(dDl.download<float>(), dl, 1e-5, "grouped moe_router_grad");
}

TEST(CudaMoeTest, RouteDispatchGroupedCombineAndGradients) {
  ZRT_REQUIRE_GPU();
  std::mt19937 rng(7);
  const int64_t tokens = 37, experts = 5, k = 2, dim = 24, inter = 10;
  const int64_t pairs = tokens * k;
  std::vector<float> logits = normalFloats(rng, tokens * experts);
  std::vector<float> bias = normalFloats(rng, experts);
  for (int32_t sigmoid : {0, 1}) {
    // Router and its gradient.
    std::vector<float> w(pairs), dl(tokens * experts);
    std::vector<int32_t> idx(pairs);
    zrt_moe_router(ZRT_F32, logits.data(), bias.data(), w.data(), ZRT_I32,
                   idx.data(), tokens, experts, k, sigmoid, 1, 2.0, 0, 0, 0.0);
    std::vector<float> dw = normalFloats(rng, pairs);
    zrt_moe_router_grad(ZRT_F32, logits.data(), ZRT_I32, idx.data(), dw.data(),
                        dl.data(), tokens, experts, k, sigmoid, 1, 2.0, 0.0);
    DeviceBuffer dLogits(logits), dBias(bias), dW(w), dIdx(idx), dDw(dw),
        dDl(dl);
    zrt::cuda::moeRouter(ZRT_F32, dLogits.get(), dBias.get(), dW.get(), ZRT_I32,
                         dIdx.get(), tokens, experts, k, sigmoid, 1, 2.0, 0, 0,
                         0.0);
    EXPECT_EQ(dIdx.download<int32_t>(), idx) << "sigmoid " << sigmoid;
    expectClose(dW.download<float>(), w, 1e-6, "moe_router weights");
    zrt::cuda::moeRouterGrad(ZRT_F32, dLogits.get(), ZRT_I32, dIdx.get(),
                             dDw.get(), dDl.get(), tokens, experts, k, sigmoid,
                             1, 2.0, 0.0);
    expectClose(dDl.download<float>(), dl, 1e-5, "moe_router_grad");
  }
  // Dispatch, the grouped products, combine and their gradients, on the
  // CPU's routing.
  std::vector<float> w(pairs);
  std::vector<int32_t> idx(pairs);
  zrt_moe_router(ZRT_F32, logits.data(), nullptr, w.data(), ZRT_I32, idx.data(),
                 tokens, experts, k, 0, 1, 1.0, 0, 0, 0.0);
  std::vector<float> x = normalFloats(rng, tokens * dim);
  std::vector<float> rows(pairs * dim), y(pairs * inter), out(tokens * dim);
  std::vector<int32_t> pos(pairs), offs(experts);
  std::vector<float> wt = normalFloats(rng, experts * inter * dim);
  zrt_moe_dispatch(ZRT_F32, x.data(), ZRT_I32, idx.data(), rows.data(),
                   pos.data(), offs.data(), tokens, dim, k, experts);
  zrt_grouped_matmul(ZRT_F32, rows.data(), wt.data(), ZRT_I32, offs.data(),
                     y.data(), pairs, dim, inter, experts, 1);
  std::vector<float> dwt(experts * inter * dim);
  zrt_grouped_matmul_weight_grad(ZRT_F32, rows.data(), y.data(), ZRT_I32,
                                 offs.data(), dwt.data(), pairs, dim, inter,
                                 experts, 1);
  std::vector<float> back(pairs * dim);
  zrt_grouped_matmul(ZRT_F32, y.data(), wt.data(), ZRT_I32, offs.data(),
                     back.data(), pairs, inter, dim, experts, 0);
  zrt_moe_combine(ZRT_F32, back.data(), ZRT_I32, pos.data(), w.data(),
                  out.data(), tokens, dim, k);
  std::vector<float> drows(pairs * dim), dweights(pairs), dx(tokens * dim);
  zrt_moe_combine_grad(ZRT_F32, back.data(), ZRT_I32, pos.data(), w.data(),
                       out.data(), drows.data(), dweights.data(), tokens, dim,
                       k);
  zrt_moe_dispatch_grad(ZRT_F32, drows.data(), ZRT_I32, pos.data(), dx.data(),
                        tokens, dim, k);
  float aux = 0, one = 1;
  std::vector<float> daux(tokens * experts);
  zrt_moe_aux_loss(ZRT_F32, logits.data(), &aux, tokens, experts, k);
  zrt_moe_aux_loss_grad(ZRT_F32, logits.data(), &one, daux.data(), tokens,
                        experts, k);

  DeviceBuffer gX(x), gIdx(idx), gW(w), gWt(wt), gRows(rows), gPos(pos),
      gOffs(offs), gY(y), gDwt(dwt), gBack(back), gOut(out), gDrows(drows),
      gDweights(dweights), gDx(dx), gLogits(logits), gAux(sizeof(float)),
      gOne(std::vector<float>{1.0f}), gDaux(daux);
  zrt::cuda::moeDispatch(ZRT_F32, gX.get(), ZRT_I32, gIdx.get(), gRows.get(),
                         gPos.get(), gOffs.get(), tokens, dim, k, experts);
  EXPECT_EQ(gPos.download<int32_t>(), pos);
  EXPECT_EQ(gOffs.download<int32_t>(), offs);
  EXPECT_EQ(gRows.download<float>(), rows);
  zrt::cuda::groupedMatmul(ZRT_F32, gRows.get(), gWt.get(), ZRT_I32,
                           gOffs.get(), gY.get(), pairs, dim, inter, experts,
                           1);
  expectClose(gY.download<float>(), y, 1e-5, "grouped_matmul");
  zrt::cuda::groupedMatmulWeightGrad(ZRT_F32, gRows.get(), gY.get(), ZRT_I32,
                                     gOffs.get(), gDwt.get(), pairs, dim, inter,
                                     experts, 1);
  expectClose(gDwt.download<float>(), dwt, 1e-4, "grouped_matmul_weight_grad");
  zrt::cuda::groupedMatmul(ZRT_F32, gY.get(), gWt.get(), ZRT_I32, gOffs.get(),
                           gBack.get(), pairs, inter, dim, experts, 0);
  zrt::cuda::moeCombine(ZRT_F32, gBack.get(), ZRT_I32, gPos.get(), gW.get(),
                        gOut.get(), tokens, dim, k);
  expectClose(gOut.download<float>(), out, 1e-4, "moe_combine");
  zrt::cuda::moeCombineGrad(ZRT_F32, gBack.get(), ZRT_I32, gPos.get(), gW.get(),
                            gOut.get(), gDrows.get(), gDweights.get(), tokens,
                            dim, k);
  expectClose(gDrows.download<float>(), drows, 1e-4, "moe_combine_grad rows");
  expectClose(gDweights.download<float>(), dweights, 1e-4,
              "moe_combine_grad weights");
  zrt::cuda::moeDispatchGrad(ZRT_F32, gDrows.get(), ZRT_I32, gPos.get(),
                             gDx.get(), tokens, dim, k);
  expectClose(gDx.download<float>(), dx, 1e-4, "moe_dispatch_grad");
  zrt::cuda::moeAuxLoss(ZRT_F32, gLogits.get(), gAux.get<float>(), tokens,
                        experts, k);
  expectClose(gAux.download<float>(), {aux}, 1e-6, "moe_aux_loss");
  zrt::cuda::moeAuxLossGrad(ZRT_F32, gLogits.get(), gOne.get<float>(),
                            gDaux.get(), tokens, experts, k);
  expectClose(gDaux.download<float>(), daux, 1e-5, "moe_aux_loss_grad");

  // A rank's part of a batch divided over two ranks that hold the same rows:
  // the counts summed over both, over twice the rows.
  std::vector<int64_t> counts(experts);
  zrt_moe_expert_counts(ZRT_F32, logits.data(), counts.data(), tokens, experts,
                        k);
  for (int64_t &c : counts)
    c *= 2;
  float part = 0;
  std::vector<float> dpart(tokens * experts);
  zrt_moe_aux_loss_counts(ZRT_F32, logits.data(), counts.data(), &part, tokens,
                          experts, k, 2 * tokens);
  zrt_moe_aux_loss_counts_grad(ZRT_F32, logits.data(), counts.data(), &one,
                               dpart.data(), tokens, experts, k, 2 * tokens);
  DeviceBuffer gCounts(experts * sizeof(int64_t)), gGlobal(counts),
      gPart(sizeof(float)), gDpart(dpart);
  zrt::cuda::moeExpertCounts(ZRT_F32, gLogits.get(), gCounts.get<int64_t>(),
                             tokens, experts, k);
  std::vector<int64_t> local = gCounts.download<int64_t>();
  for (int64_t &c : local)
    c *= 2;
  EXPECT_EQ(local, counts);
  zrt::cuda::moeAuxLossCounts(ZRT_F32, gLogits.get(), gGlobal.get<int64_t>(),
                              gPart.get<float>(), tokens, experts, k,
                              2 * tokens);
  expectClose(gPart.download<float>(), {part}, 1e-6, "moe_aux_loss_counts");
  zrt::cuda::moeAuxLossCountsGrad(ZRT_F32, gLogits.get(),
                                  gGlobal.get<int64_t>(), gOne.get<float>(),
                                  gDpart.get(), tokens, experts, k, 2 * tokens);
  expectClose(gDpart.download<float>(), dpart, 1e-5,
              "moe_aux_loss_counts_grad");
}
