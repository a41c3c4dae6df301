//===- MuonTest.cpp - The CUDA Muon step against the CPU's ----------------===//
//
// Part of the zero-mlir project.
//
// Both backends apply OptimizerMath.h's formulas, so the momentum agrees to
// the bit. The parameter goes through Newton-Schulz in bf16 whose fp32
// sums run in cuBLASLt's order on the GPU and OpenBLAS's on the CPU: it
// agrees within the bound the CPU meets against torch (runtime/test/
// MuonTest.cpp). bf16 gradients and working weights are covered too.
//
//===----------------------------------------------------------------------===//

#include "Optimizer/Muon.h"
#include "CudaTestUtil.h"
#include "zero_rt/zrt.h"

#include <cmath>
#include <cstdio>
#include <random>

using zrt::cuda::test::DeviceBuffer;

namespace {

struct Shape {
  int64_t rows, cols;
  bool nesterov;
  zrt::MuonAdjustLr adjust;
};

void checkShape(const Shape &sh, int32_t dtype) {
  int64_t n = sh.rows * sh.cols;
  std::mt19937 rng(unsigned(sh.rows * 1000 + sh.cols));
  std::normal_distribution<float> normal;
  std::vector<float> p0(n);
  for (float &v : p0)
    v = 0.05f * normal(rng);
  zrt::MuonConstants k =
      zrt::muonConstants(0.02, 0.95, 0.1, sh.nesterov, 3.4445, -4.7750, 2.0315,
                         1e-7, sh.adjust, sh.rows, sh.cols);
  int64_t scratchBytes = zrt::muonScratchBytes(sh.rows, sh.cols);

  std::vector<float> pCpu = p0, bufCpu(n, 0.0f);
  std::vector<float> scratch(size_t(scratchBytes / 4));
  std::vector<uint16_t> paramCpu(n);
  DeviceBuffer master(p0), buf(std::vector<float>(n, 0.0f));
  DeviceBuffer grad(size_t(n) * 4), param(size_t(n) * 2),
      devScratch(static_cast<size_t>(scratchBytes));
  for (int step = 0; step < 5; ++step) {
    std::vector<float> g(n);
    for (float &v : g)
      v = (0.1f + 0.3f * float(step)) * normal(rng);
    std::vector<uint16_t> g16(n);
    for (int64_t i = 0; i < n; ++i)
      g16[i] = zrt::floatToBf16(g[i]);
    const void *gHost =
        dtype == ZRT_F32 ? static_cast<const void *>(g.data()) : g16.data();
    if (dtype == ZRT_F32)
      grad.upload(g);
    else
      grad.upload(g16);
    zrt::muonStep(dtype, gHost, pCpu.data(), bufCpu.data(),
                  dtype == ZRT_F32 ? nullptr : paramCpu.data(), sh.rows,
                  sh.cols, k, 5, scratch.data());
    zrt::cuda::muonStep(dtype, grad.get(), master.get<float>(),
                        buf.get<float>(),
                        dtype == ZRT_F32 ? nullptr : param.get(), sh.rows,
                        sh.cols, k, 5, devScratch.get());
  }
  std::vector<float> pGpu = master.download<float>();
  std::vector<float> bufGpu = buf.download<float>();
  int64_t bufDiffs = 0, paramDiffs = 0;
  double maxDiff = 0.0, maxMove = 0.0;
  std::vector<uint16_t> paramGpu = param.download<uint16_t>();
  for (int64_t i = 0; i < n; ++i) {
    bufDiffs += bufGpu[i] != bufCpu[i];
    maxDiff = std::max(maxDiff, std::fabs(double(pGpu[i]) - pCpu[i]));
    maxMove = std::max(maxMove, std::fabs(double(pCpu[i]) - p0[i]));
    if (dtype != ZRT_F32)
      paramDiffs += paramGpu[i] != zrt::floatToBf16(pGpu[i]);
  }
  std::printf("[%lld, %lld] dtype %d: max |gpu - cpu| / max |move| %.3g\n",
              (long long)sh.rows, (long long)sh.cols, int(dtype),
              maxDiff / maxMove);
  EXPECT_EQ(bufDiffs, 0) << "the momentum follows the same formulas";
  EXPECT_EQ(paramDiffs, 0) << "the working copy is the master in bf16";
  EXPECT_LT(maxDiff / maxMove, 2e-2);
}

TEST(CudaMuon, MatchesCpu) {
  ZRT_REQUIRE_GPU();
  // The tiny Llama's q/k/gate/down, a tall and a wide matrix.
  const Shape shapes[] = {
      {64, 64, true, zrt::MuonAdjustLr::Original},
      {32, 64, false, zrt::MuonAdjustLr::MatchRmsAdamw},
      {172, 64, true, zrt::MuonAdjustLr::Original},
      {64, 172, true, zrt::MuonAdjustLr::MatchRmsAdamw},
      {300, 40, false, zrt::MuonAdjustLr::SpectralUnclamped},
      {40, 300, true, zrt::MuonAdjustLr::Original},
  };
  for (const Shape &sh : shapes) {
    checkShape(sh, ZRT_F32);
    checkShape(sh, ZRT_BF16);
  }
}

// zrt_muon's slot on the device (cuda::muon, AbiCuda.cpp's entry) against
// the CPU's zrt_muon: two matrices with a gap, a bf16 gradient scaled by the
// loss scale, clipped (the stats on the device), two steps. The momentum is
// the same formula on both, to the bit; the gap is not written.
TEST(CudaMuon, SlotMatchesCpu) {
  ZRT_REQUIRE_GPU();
  const std::vector<int64_t> matrices = {0, 64, 172, 11008 + 100, 32, 64};
  int64_t n = 11008 + 100 + 2048;
  int64_t scratchBytes = zrt::muonScratchBytes(64, 172);
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  std::vector<float> p0(n);
  for (float &v : p0)
    v = 0.05f * normal(rng);
  std::vector<float> pCpu = p0, bufCpu(n, 0.0f);
  std::vector<uint16_t> paramCpu(n, 0);
  std::vector<float> scratch(size_t(scratchBytes / 4));
  DeviceBuffer master(p0), buf(std::vector<float>(n, 0.0f));
  DeviceBuffer grad(size_t(n) * 2), param(std::vector<uint16_t>(n, 0)),
      devScratch(static_cast<size_t>(scratchBytes));
  const float stats[2] = {0.0f, 400.0f};
  DeviceBuffer devStats(std::vector<float>(stats, stats + 2));
  for (int step = 1; step <= 2; ++step) {
    std::vector<uint16_t> g16(n);
    for (int64_t i = 0; i < n; ++i)
      g16[i] = zrt::floatToBf16(4.0f * normal(rng));
    grad.upload(g16);
    zrt_muon(ZRT_BF16, g16.data(), pCpu.data(), bufCpu.data(), paramCpu.data(),
             matrices.data(), 2, step, 0.02, 0.95, 0.1, 1, 3.4445, -4.7750,
             2.0315, 1e-7, 5, 0, nullptr, 1.0, stats, 4.0f, 0, scratch.data(),
             scratchBytes);
    zrt::cuda::muon(ZRT_BF16, grad.get(), master.get<float>(), buf.get<float>(),
                    param.get(), matrices.data(), 2, step, 0.02, 0.95, 0.1, 1,
                    3.4445, -4.7750, 2.0315, 1e-7, 5, 0, nullptr, 1.0,
                    devStats.get<float>(), 4.0f, 0, devScratch.get(),
                    scratchBytes);
  }
  std::vector<float> pGpu = master.download<float>();
  std::vector<float> bufGpu = buf.download<float>();
  std::vector<uint16_t> paramGpu = param.download<uint16_t>();
  int64_t bufDiffs = 0, gapWrites = 0;
  double maxDiff = 0.0, maxMove = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    bufDiffs += bufGpu[i] != bufCpu[i];
    maxDiff = std::max(maxDiff, std::fabs(double(pGpu[i]) - pCpu[i]));
    maxMove = std::max(maxMove, std::fabs(double(pCpu[i]) - p0[i]));
    bool gap = i >= 11008 && i < 11008 + 100;
    gapWrites += gap && (paramGpu[i] != 0 || pGpu[i] != p0[i]);
  }
  EXPECT_EQ(bufDiffs, 0);
  EXPECT_EQ(gapWrites, 0);
  EXPECT_GT(maxMove, 0.0);
  EXPECT_LT(maxDiff / maxMove, 2e-2);
}

} // namespace
