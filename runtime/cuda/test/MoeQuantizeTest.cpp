//===- MoeQuantizeTest.cpp - CUDA MoE and quantization against the CPU ----===//
//
// Part of the zero-mlir project.
//
// Grouped products, block quantization and the mixture-of-experts kernels
// (router, dispatch, combine and their gradients) of the CUDA backend
// against the CPU's, with KernelsTest.cpp's tolerances.
//
//===----------------------------------------------------------------------===//

#include "CudaKernelsTestUtil.h"

using namespace zrt::cuda;
using namespace zrt::cuda::test;

namespace {

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
