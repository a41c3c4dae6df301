//===- AdafactorTest.cpp - The CUDA Adafactor phases against the CPU's ----===//
//
// Part of the zero-mlir project.
//
// Both backends apply OptimizerMath.h's fp32 formulas; only the order of the
// double sums of squares differs, which moves an fp32 value only when a sum
// lies within a double rounding of an fp32 tie. Each shape runs 5 steps on
// two slices cut inside a row, the sums added on the host between the
// phases as the ranks' all-reduce does, with bf16 gradients and working
// weights too.
//
//===----------------------------------------------------------------------===//

#include "Optimizer/Adafactor.h"
#include "CudaTestUtil.h"

#include <cmath>
#include <cstdio>
#include <random>

using zrt::cuda::test::DeviceBuffer;

namespace {

struct Shape {
  int64_t dims[3];
  int32_t rank;
  bool maximize;
  double weightDecay;
};

void checkShape(const Shape &sh, int32_t dtype) {
  zrt::AdafactorShape s = zrt::adafactorShape(sh.dims, sh.rank);
  int64_t n = s.numel(), cut = n / 2 + (s.cols > 2 ? 1 : 0);
  int64_t slices[3] = {0, cut, n};
  std::mt19937 rng(static_cast<unsigned>(n));
  std::normal_distribution<float> normal;
  std::vector<float> p0(n);
  for (float &v : p0)
    v = 0.05f * normal(rng);
  int64_t sumsCount = zrt::adafactorSumsCount(s);
  int64_t reduced = zrt::adafactorReducedCount(s);
  int64_t rowCount = s.batch * s.rows, colCount = s.batch * s.cols;

  std::vector<float> pCpu = p0, rowCpu(rowCount, 0.0f), colCpu(colCount, 0.0f),
                     varCpu(n, 0.0f);
  std::vector<double> sumsCpu[2] = {std::vector<double>(sumsCount),
                                    std::vector<double>(sumsCount)};
  std::vector<uint16_t> paramCpu(n);
  DeviceBuffer master(p0), rowVar(std::vector<float>(rowCount, 0.0f)),
      colVar(std::vector<float>(colCount, 0.0f)),
      variance(std::vector<float>(n, 0.0f));
  DeviceBuffer grad(size_t(n) * 4), param(size_t(n) * 2);
  DeviceBuffer sums[2] = {DeviceBuffer(size_t(sumsCount) * 8),
                          DeviceBuffer(size_t(sumsCount) * 8)};
  size_t elem = dtype == ZRT_F32 ? 4 : 2;
  for (int step = 1; step <= 5; ++step) {
    zrt::AdafactorConstants k = zrt::adafactorConstants(
        1e-2, -0.8, -1.0, 1e-3, 1.0, sh.weightDecay, sh.maximize, step);
    std::vector<float> g(n);
    for (float &v : g)
      v = (0.01f + 0.3f * float(step)) * normal(rng);
    std::vector<uint16_t> g16(n);
    for (int64_t i = 0; i < n; ++i)
      g16[i] = zrt::floatToBf16(g[i]);
    const char *gHost = dtype == ZRT_F32
                            ? reinterpret_cast<const char *>(g.data())
                            : reinterpret_cast<const char *>(g16.data());
    if (dtype == ZRT_F32)
      grad.upload(g);
    else
      grad.upload(g16);
    const char *gDev = static_cast<const char *>(grad.get());

    // Phase 1 on both slices, the sums added on the host.
    std::vector<double> totalCpu(reduced, 0.0), totalGpu(reduced, 0.0);
    for (int r = 0; r < 2; ++r) {
      int64_t b = slices[r], e = slices[r + 1];
      zrt::adafactorSums(dtype, gHost + b * elem, pCpu.data() + b, s, b, e,
                         1.0f, sumsCpu[r].data());
      zrt::cuda::adafactorSums(dtype, gDev + b * elem, master.get<float>() + b,
                               s, b, e, 1.0f, sums[r].get<double>());
      std::vector<double> got = sums[r].download<double>();
      for (int64_t i = 0; i < reduced; ++i) {
        totalCpu[i] += sumsCpu[r][i];
        totalGpu[i] += got[i];
      }
    }
    double updateCpu = 0.0, updateGpu = 0.0;
    for (int r = 0; r < 2; ++r) {
      int64_t b = slices[r], e = slices[r + 1];
      std::copy(totalCpu.begin(), totalCpu.end(), sumsCpu[r].begin());
      std::vector<double> devSums = sums[r].download<double>();
      std::copy(totalGpu.begin(), totalGpu.end(), devSums.begin());
      sums[r].upload(devSums);
      if (r == 0)
        zrt::adafactorFactors(s, k, rowCpu.data(), colCpu.data(),
                              sumsCpu[r].data());
      else
        std::copy(sumsCpu[0].begin() + reduced, sumsCpu[0].end(),
                  sumsCpu[r].begin() + reduced);
      // One device copy of the factors serves both slices here: move it
      // once, but let each slice's sums get the row means.
      if (r == 0)
        zrt::cuda::adafactorFactors(s, k, rowVar.get<float>(),
                                    colVar.get<float>(), sums[r].get<double>());
      else {
        std::vector<double> first = sums[0].download<double>();
        std::vector<double> mine = sums[r].download<double>();
        std::copy(first.begin() + reduced, first.end(), mine.begin() + reduced);
        sums[r].upload(mine);
      }
      zrt::adafactorUpdateSums(dtype, gHost + b * elem, s, b, e, 1.0f, k,
                               rowCpu.data(), colCpu.data(), varCpu.data() + b,
                               sumsCpu[r].data());
      zrt::cuda::adafactorUpdateSums(dtype, gDev + b * elem, s, b, e, 1.0f, k,
                                     rowVar.get<float>(), colVar.get<float>(),
                                     variance.get<float>() + b,
                                     sums[r].get<double>());
      updateCpu += sumsCpu[r][1];
      updateGpu += sums[r].download<double>()[1];
    }
    for (int r = 0; r < 2; ++r) {
      int64_t b = slices[r], e = slices[r + 1];
      sumsCpu[r][1] = updateCpu;
      std::vector<double> devSums = sums[r].download<double>();
      devSums[1] = updateGpu;
      sums[r].upload(devSums);
      zrt::adafactorApply(dtype, gHost + b * elem, pCpu.data() + b,
                          dtype == ZRT_F32 ? nullptr : paramCpu.data() + b, s,
                          b, e, 1.0f, k, rowCpu.data(), colCpu.data(),
                          varCpu.data() + b, sumsCpu[r].data());
      zrt::cuda::adafactorApply(
          dtype, gDev + b * elem, master.get<float>() + b,
          dtype == ZRT_F32 ? nullptr : static_cast<char *>(param.get()) + b * 2,
          s, b, e, 1.0f, k, rowVar.get<float>(), colVar.get<float>(),
          variance.get<float>() + b, sums[r].get<double>());
    }
  }
  std::vector<float> pGpu = master.download<float>();
  std::vector<uint16_t> paramGpu = param.download<uint16_t>();
  double maxDiff = 0.0, maxMove = 0.0;
  int64_t equal = 0, paramDiffs = 0;
  for (int64_t i = 0; i < n; ++i) {
    equal += pGpu[i] == pCpu[i];
    maxDiff = std::max(maxDiff, std::fabs(double(pGpu[i]) - pCpu[i]));
    maxMove = std::max(maxMove, std::fabs(double(pCpu[i]) - p0[i]));
    if (dtype != ZRT_F32)
      paramDiffs += paramGpu[i] != zrt::floatToBf16(pGpu[i]);
  }
  std::printf("[%lld, %lld, %lld] %s: bitwise equal %.1f%%, max |diff| / max "
              "|move| %.3g\n",
              (long long)s.batch, (long long)s.rows, (long long)s.cols,
              dtype == ZRT_F32 ? "f32" : "bf16",
              100.0 * double(equal) / double(n), maxDiff / maxMove);
  EXPECT_LT(maxDiff / maxMove, 1e-5);
  EXPECT_EQ(paramDiffs, 0) << "the working copy is the master rounded";
  if (s.factored) {
    std::vector<float> rowGpu = rowVar.download<float>();
    for (int64_t i = 0; i < rowCount; ++i)
      EXPECT_NEAR(rowGpu[i], rowCpu[i], 1e-6 * std::fabs(rowCpu[i])) << i;
  }
}

TEST(CudaAdafactor, MatchesCpu) {
  ZRT_REQUIRE_GPU();
  Shape shapes[] = {
      {{64, 64}, 2, false, 0.0}, {{172, 64}, 2, false, 0.1},
      {{64, 172}, 2, true, 0.0}, {{3, 5, 7}, 3, false, 0.0},
      {{64}, 1, false, 0.0},     {{37}, 1, true, 0.1},
  };
  for (const Shape &sh : shapes) {
    checkShape(sh, ZRT_F32);
    checkShape(sh, ZRT_BF16);
  }
}

} // namespace
