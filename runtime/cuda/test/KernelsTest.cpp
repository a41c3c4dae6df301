//===- KernelsTest.cpp - CUDA kernels against the CPU backend -------------===//
//
// Part of the zero-mlir project.
//
// The kernels of Elementwise.cu, Layout.cu, Softmax.cu, Rope.cu, LayerNorm.cu
// and Embedding.cu against the CPU backend's zrt_* kernels on the same inputs,
// for f32, bf16 and f16: odd sizes, broadcasts, aliasing, empty tensors, and
// pointers one element off alignment (the scalar paths, which must give
// bitwise the results of the 16-byte paths). The norms and losses
// (NormLossTest.cpp) and the MoE and quantization kernels
// (MoeQuantizeTest.cpp) are the files beside it, in the same executable.
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

#include "CudaKernelsTestUtil.h"

using namespace zrt::cuda;
using namespace zrt::cuda::test;

namespace {

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

// A policy-gradient loss's ops against the CPU's, bit for bit (selects,
// comparisons and exact halves; the bounds rounded to the dtype alike; the
// gather's scatter-add sums in the same order): clamp with both bounds and
// one, minimum/maximum with ties and NaN, where with a float mask, gather
// and its gradient with repeated indices.
TEST_P(CudaKernelsTest, ClampMinMaxWhereGather) {
  ZRT_REQUIRE_GPU();
  const double inf = std::numeric_limits<double>::infinity();
  for (int64_t n : {1, 7, 5003}) {
    Buffer a = randomBuffer(dtype(), rng, n, -2, 2),
           b = randomBuffer(dtype(), rng, n, -2, 2),
           dy = randomBuffer(dtype(), rng, n), c(dtype(), n);
    for (int64_t i = 0; i < n; i += 3)
      b.set(i, a.values()[i]);
    a.set(n - 1, std::nan(""));
    for (int64_t i = 0; i < n; ++i)
      c.set(i, i % 3 == 0 ? 0.0 : (i % 3 == 1 ? 1.0 : std::nan("")));
    DeviceArray da(a), db(b), ddy(dy), dc(c), o1(dtype(), n), o2(dtype(), n);
    Buffer w1(dtype(), n), w2(dtype(), n);
    std::string sz = std::to_string(n);
    for (auto [lo, hi] :
         {std::make_pair(0.8, 1.2), std::make_pair(-inf, 0.3)}) {
      zrt_clamp(dtype(), a.data(), w1.data(), n, lo, hi);
      clamp(dtype(), da.get(), o1.get(), n, lo, hi);
      expectBitwise(o1.download(), w1, "clamp " + sz);
      zrt_clamp_grad(dtype(), a.data(), dy.data(), w1.data(), n, lo, hi);
      clampGrad(dtype(), da.get(), ddy.get(), o1.get(), n, lo, hi);
      expectBitwise(o1.download(), w1, "clamp_grad " + sz);
    }
    zrt_minimum(dtype(), a.data(), b.data(), w1.data(), n);
    minimum(dtype(), da.get(), db.get(), o1.get(), n);
    expectBitwise(o1.download(), w1, "minimum " + sz);
    zrt_maximum(dtype(), a.data(), b.data(), w1.data(), n);
    maximum(dtype(), da.get(), db.get(), o1.get(), n);
    expectBitwise(o1.download(), w1, "maximum " + sz);
    zrt_minimum_grad(dtype(), a.data(), b.data(), dy.data(), w1.data(),
                     w2.data(), n);
    minimumGrad(dtype(), da.get(), db.get(), ddy.get(), o1.get(), o2.get(), n);
    expectBitwise(o1.download(), w1, "minimum_grad a " + sz);
    expectBitwise(o2.download(), w2, "minimum_grad b " + sz);
    zrt_maximum_grad(dtype(), a.data(), b.data(), dy.data(), w1.data(),
                     w2.data(), n);
    maximumGrad(dtype(), da.get(), db.get(), ddy.get(), o1.get(), o2.get(), n);
    expectBitwise(o1.download(), w1, "maximum_grad a " + sz);
    expectBitwise(o2.download(), w2, "maximum_grad b " + sz);
    zrt_where(dtype(), c.data(), a.data(), b.data(), w1.data(), n);
    where(dtype(), dc.get(), da.get(), db.get(), o1.get(), n);
    expectBitwise(o1.download(), w1, "where " + sz);
    zrt_where_grad(dtype(), c.data(), dy.data(), w1.data(), w2.data(), n);
    whereGrad(dtype(), dc.get(), ddy.get(), o1.get(), o2.get(), n);
    expectBitwise(o1.download(), w1, "where_grad true " + sz);
    expectBitwise(o2.download(), w2, "where_grad false " + sz);
  }
  const int64_t rows = 37, cols = 50, k = 3;
  Buffer x = randomBuffer(dtype(), rng, rows * cols),
         g = randomBuffer(dtype(), rng, rows * k);
  std::vector<int64_t> idx(rows * k);
  for (int64_t i = 0; i < rows * k; ++i)
    idx[size_t(i)] = (i * 13 + i / k) % cols;
  for (int64_t r = 0; r < rows; r += 2)
    idx[size_t(r * k + 2)] = idx[size_t(r * k)];
  Buffer y(dtype(), rows * k), dx(dtype(), rows * cols);
  zrt_gather(dtype(), x.data(), ZRT_I64, idx.data(), y.data(), rows, cols, k);
  zrt_gather_grad(dtype(), ZRT_I64, idx.data(), g.data(), dx.data(), rows, cols,
                  k);
  DeviceBuffer dIdx(idx);
  DeviceArray dX(x), dG(g), dY(dtype(), rows * k), dDx(dtype(), rows * cols);
  gather(dtype(), dX.get(), ZRT_I64, dIdx.get(), dY.get(), rows, cols, k);
  expectBitwise(dY.download(), y, "gather");
  gatherGrad(dtype(), ZRT_I64, dIdx.get(), dG.get(), dDx.get(), rows, cols, k);
  expectBitwise(dDx.download(), dx, "gather_grad");
  ZRT_CUDA_CHECK(cudaStreamSynchronize(computeStream()));
  checkDeviceErrors();
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
// Scratch accounting and errors
//===----------------------------------------------------------------------===//

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

INSTANTIATE_TEST_SUITE_P(AllDtypes, CudaKernelsTest,
                         ::testing::Values(ZRT_F32, ZRT_BF16, ZRT_F16),
                         [](const auto &info) {
                           return std::string(dtypeName(info.param));
                         });

} // namespace
