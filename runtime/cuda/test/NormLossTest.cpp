//===- NormLossTest.cpp - CUDA norms and losses against the CPU -----------===//
//
// Part of the zero-mlir project.
//
// Softmax, log-sum-exp, rotary embedding, the cross-entropy losses (the
// chunked linear loss, padded logits), the tiled MLP, layer and RMS norms
// and embeddings of the CUDA backend against the CPU's, with
// KernelsTest.cpp's tolerances.
//
//===----------------------------------------------------------------------===//

#include "CudaKernelsTestUtil.h"
#include <array>

using namespace zrt::cuda;
using namespace zrt::cuda::test;

namespace {

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

// At packed rows' positions: the CPU's results within the same bound as
// positions 0..seq-1, over batch entries whose rows span several blocks.
TEST_P(CudaKernelsTest, RopeAtPackedPositions) {
  ZRT_REQUIRE_GPU();
  std::mt19937 prng{5};
  std::uniform_int_distribution<int64_t> restart(0, 6);
  for (auto [batch, heads, seq, dim] :
       {std::array<int64_t, 4>{2, 3, 37, 16}, {3, 40, 9, 128}, {1, 2, 5, 2}}) {
    int64_t n = batch * heads * seq * dim;
    std::vector<int64_t> positions(static_cast<size_t>(batch * seq));
    int64_t p = 0;
    for (int64_t &x : positions)
      x = restart(prng) == 0 ? (p = 0) : ++p;
    std::vector<int32_t> positions32(positions.begin(), positions.end());
    auto d64 = deviceCopy(positions);
    auto d32 = deviceCopy(positions32);
    Buffer x = randomBuffer(dtype(), rng, n, -2, 2);
    for (int mode = 0; mode < 4; ++mode) {
      int inverse = mode & 1, interleaved = mode >> 1;
      Buffer want(dtype(), n);
      zrt_rope_positions(dtype(), x.data(), want.data(), batch, heads, seq, dim,
                         1e4, inverse, interleaved, nullptr, 1.0, ZRT_I64,
                         positions.data());
      std::string what = label("rope at positions", dtype(), seq, dim) +
                         (inverse ? " inverse" : "") +
                         (interleaved ? " interleaved" : "");
      DeviceArray dx(x), dy(dtype(), n), dz(dtype(), n);
      ropePositions(dtype(), dx.get(), dy.get(), batch, heads, seq, dim, 1e4,
                    inverse, interleaved, nullptr, 1.0, ZRT_I64, d64->get());
      Buffer got = dy.download();
      expectNear(got, want, 0, 4 * kF32 * double(seq + 2) * 2, what);
      ropePositions(dtype(), dx.get(), dz.get(), batch, heads, seq, dim, 1e4,
                    inverse, interleaved, nullptr, 1.0, ZRT_I32, d32->get());
      expectBitwise(dz.download(), got, what + " int32");
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
      for (int64_t chunk : {int64_t(1), int64_t(8), int64_t(37), int64_t(50)}) {
        std::string what =
            "linear_cross_entropy dtype " + std::to_string(dtype) + " chunk " +
            std::to_string(chunk) + (ignore ? " ignore_index" : "");
        float wantLoss = 0;
        zrt_linear_cross_entropy(dtype, x.data(), w.data(), ZRT_I64,
                                 used.data(), &wantLoss, rows, hidden, vocab,
                                 chunk, ignore, -100);
        Buffer wantDx(dtype, rows * hidden), wantDw(dtype, vocab * hidden);
        zrt_linear_cross_entropy_grad(dtype, x.data(), w.data(), ZRT_I64,
                                      used.data(), &dloss, wantDx.data(),
                                      wantDw.data(), rows, hidden, vocab, chunk,
                                      ignore, -100);
        DeviceArray dx(x, 0), dw(w, 0), gx(dtype, rows * hidden, 0),
            gw(dtype, vocab * hidden, 0);
        linearCrossEntropy(dtype, dx.get(), dw.get(), ZRT_I64, dLabels->get(),
                           dLoss->get<float>(), rows, hidden, vocab, chunk,
                           ignore, -100);
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

TEST(CudaDocumentIdsTest, MatchesTheCpu) {
  ZRT_REQUIRE_GPU();
  std::mt19937 rng{11};
  std::uniform_int_distribution<int64_t> restart(0, 9);
  for (auto [rows, cols] :
       {std::pair<int64_t, int64_t>{3, 7}, {64, 1025}, {5, 1}, {0, 4}}) {
    std::vector<int64_t> positions(static_cast<size_t>(rows * cols));
    int64_t p = 0;
    for (int64_t &x : positions)
      x = restart(rng) == 0 ? (p = 0) : ++p;
    std::vector<int32_t> positions32(positions.begin(), positions.end());
    std::vector<int32_t> want(positions.size());
    zrt_document_ids(ZRT_I64, positions.data(), want.data(), rows, cols);
    auto d64 = deviceCopy(positions);
    auto d32 = deviceCopy(positions32);
    DeviceBuffer out64(positions.size() * 4), out32(positions.size() * 4);
    documentIds(ZRT_I64, d64->get(), static_cast<int32_t *>(out64.get()), rows,
                cols);
    documentIds(ZRT_I32, d32->get(), static_cast<int32_t *>(out32.get()), rows,
                cols);
    EXPECT_EQ(out64.download<int32_t>(), want) << rows << "x" << cols;
    EXPECT_EQ(out32.download<int32_t>(), want) << rows << "x" << cols;
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

} // namespace
