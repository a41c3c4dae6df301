//===- NormLossTest.cpp - Softmax, norms, embeddings and losses -----------===//
//
// Part of the zero-mlir project.
//
// Softmax and log-sum-exp, layer and RMS norms (and Hugging Face's
// rounding), embeddings, the cross-entropy losses (ignored labels, padded
// logits, the chunked linear loss) and the tiled MLP, against Reference.h.
//
//===----------------------------------------------------------------------===//

#include "KernelTestUtil.h"

using namespace zrt_test;

namespace {

TEST_P(KernelTest, SoftmaxAndGrad) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{5, 1500}, {64, 10}}) {
    Buffer x = randomBuffer(dtype(), rng, rows * cols, -8, 8);
    Buffer y(dtype(), rows * cols),
        dy = randomBuffer(dtype(), rng, rows * cols), dx(dtype(), rows * cols);
    zrt_softmax(dtype(), x.data(), y.data(), rows, cols);
    expectClose(y, ref::softmax(x.values(), rows, cols), u() + 1e-5, 1e-9,
                "softmax");
    zrt_softmax_grad(dtype(), y.data(), dy.data(), dx.data(), rows, cols);
    ref::Vec want = ref::softmaxGrad(y.values(), dy.values(), rows, cols);
    expectClose(dx, want, u() + 1e-5, 1e-6 * maxAbs(want), "softmax_grad");
  }
}

TEST_P(KernelTest, LogsumexpReduceMaxAndGrad) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{5, 1500}, {64, 10}}) {
    int64_t n = rows * cols;
    Buffer x = randomBuffer(dtype(), rng, n, -8, 8);
    Buffer y(dtype(), rows), dy = randomBuffer(dtype(), rng, rows),
                             dx(dtype(), n);
    ref::Vec xv = x.values(), dyv = dy.values();
    // The sum of exponentials in fp32, its log then added to the maximum.
    zrt_logsumexp(dtype(), x.data(), y.data(), rows, cols);
    expectClose(y, ref::logsumexp(xv, rows, cols), u() + 1e-6, cols * kF32 * 4,
                "logsumexp");
    ref::Vec yv = y.values(), want(xv.size());
    zrt_logsumexp_grad(dtype(), x.data(), y.data(), dy.data(), dx.data(), rows,
                       cols);
    for (int64_t i = 0; i < n; ++i)
      want[i] = dyv[i / cols] * std::exp(xv[i] - yv[i / cols]);
    expectClose(dx, want, u() + 1e-6, 1e-7, "logsumexp_grad");

    zrt_reduce_max(dtype(), x.data(), y.data(), rows, cols);
    expectClose(y, ref::reduceMax(xv, rows, cols), 0, 0, "reduce_max");
    // Integers from -3 to 3: rows whose maximum is tied, the gradient split
    // among the ties.
    ref::Vec ints(xv.size());
    for (int64_t i = 0; i < n; ++i)
      ints[i] = std::round(xv[i] * 0.375);
    Buffer xi(dtype(), ints);
    zrt_reduce_max(dtype(), xi.data(), y.data(), rows, cols);
    zrt_reduce_max_grad(dtype(), xi.data(), y.data(), dy.data(), dx.data(),
                        rows, cols);
    expectClose(dx, ref::reduceMaxGrad(ints, dyv, rows, cols), u(), 0,
                "reduce_max_grad");
  }
  // A row holding NaN has a NaN maximum, as torch.amax's.
  Buffer x = randomBuffer(dtype(), rng, 8), y(dtype(), 2);
  x.set(5, std::nan(""));
  zrt_reduce_max(dtype(), x.data(), y.data(), 2, 4);
  EXPECT_FALSE(std::isnan(y.get(0)));
  EXPECT_TRUE(std::isnan(y.get(1)));
}

TEST_P(KernelTest, LayerNormAndGrad) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{6, 1100}, {70, 64}}) {
    double eps = 1e-5;
    Buffer x = randomBuffer(dtype(), rng, rows * cols, 1, 4);
    Buffer w = randomBuffer(dtype(), rng, cols, 0.5, 1.5);
    Buffer b = randomBuffer(dtype(), rng, cols);
    Buffer dy = randomBuffer(dtype(), rng, rows * cols);
    Buffer y(dtype(), rows * cols), dx(dtype(), rows * cols), dw(dtype(), cols),
        db(dtype(), cols);
    zrt_layer_norm(dtype(), x.data(), w.data(), b.data(), y.data(), rows, cols,
                   eps);
    expectClose(
        y, ref::layerNorm(x.values(), w.values(), b.values(), rows, cols, eps),
        u(), 1e-5, "layer_norm");
    zrt_layer_norm_grad(dtype(), x.data(), w.data(), dy.data(), dx.data(),
                        dw.data(), db.data(), rows, cols, eps);
    ref::Vec wantDx, wantDw, wantDb;
    ref::layerNormGrad(x.values(), w.values(), dy.values(), rows, cols, eps,
                       wantDx, wantDw, wantDb);
    expectClose(dx, wantDx, u(), 1e-4 * maxAbs(wantDx), "layer_norm_grad dx");
    expectClose(dw, wantDw, u(), rows * 1e-6, "layer_norm_grad dw");
    expectClose(db, wantDb, u(), rows * 1e-6, "layer_norm_grad db");
  }
}

// RMS norm, y = w * round(n) with n = x * rsqrt(mean(x^2) + eps) and round
// to the dtype, as Hugging Face's LlamaRMSNorm. For 16-bit dtypes w *
// round(n) is exact in fp32 (8- or 11-bit significands), so y must be the
// reference's round(w * round(n)) bit for bit except where the kernel's
// fp32 n and the double n round to neighbouring values (n within a few fp32
// ulps of a rounding boundary: rare, and then one ulp of the dtype apart).
// Rounding only once, round(w * n), would differ in many more elements; the
// test checks that these inputs tell the two apart.
TEST_P(KernelTest, RmsNormAndGrad) {
  const std::pair<int64_t, int64_t> shapes[] = {{6, 1100}, {70, 64}, {0, 8}};
  for (auto [rows, cols] : shapes) {
    double eps = 1e-5;
    int64_t n = rows * cols;
    Buffer x = randomBuffer(dtype(), rng, n, -3, 3);
    Buffer w = randomBuffer(dtype(), rng, cols, 0.5, 1.5);
    Buffer dy = randomBuffer(dtype(), rng, n);
    Buffer y(dtype(), n), dx(dtype(), n), dw = randomBuffer(dtype(), rng, cols);
    std::string what = std::string("rms_norm ") + dtypeName(dtype()) + " " +
                       std::to_string(rows) + "x" + std::to_string(cols);
    zrt_rms_norm(dtype(), x.data(), w.data(), y.data(), rows, cols, eps);
    ref::Vec normed = ref::rmsNormalized(x.values(), rows, cols, eps);
    ref::Vec wv = w.values();
    auto round = [&](double v) {
      return dtype() == ZRT_F32 ? v : roundTo(dtype(), v);
    };
    ref::Vec want(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      want[i] = round(round(normed[i]) * wv[i % cols]);
    if (dtype() == ZRT_F32) {
      // rstd from an fp32 sum of squares, then two products.
      expectClose(y, want, u() + 1e-6, 1e-7, what);
    } else {
      int64_t differ = 0, onceDiffers = 0;
      for (int64_t i = 0; i < n; ++i) {
        onceDiffers += roundTo(dtype(), normed[i] * wv[i % cols]) != want[i];
        if (y.get(i) == want[i])
          continue;
        ++differ;
        EXPECT_NEAR(y.get(i), want[i],
                    2 * u() * std::fabs(want[i]) +
                        2 * subnormalRoundoff(dtype()))
            << what << " at " << i;
      }
      EXPECT_LE(differ, n / 500 + 1) << what;
      if (n > 0)
        EXPECT_GE(onceDiffers, n / 20) << what;
    }

    zrt_rms_norm_grad(dtype(), x.data(), w.data(), dy.data(), dx.data(),
                      dw.data(), rows, cols, eps);
    ref::Vec wantDx, wantDw;
    ref::rmsNormGrad(x.values(), wv, dy.values(), rows, cols, eps, wantDx,
                     wantDw, round);
    expectClose(dx, wantDx, u(), 1e-4 * maxAbs(wantDx), what + " dx");
    // dw sums dy * round(n) in fp32; a rare n rounded to the neighbouring
    // value moves one term by an ulp of the dtype.
    expectClose(dw, wantDw, u(), rows * 1e-6 + 4 * u(), what + " dw");
  }
}

// Bit for bit the output of Hugging Face's LlamaRMSNorm forward (its code,
// run with PyTorch 1.13 on the CPU) in bf16 and f16, on inputs exactly
// representable in both: x[i] = ((37 i) % 101 - 50) / 16 over [2, 64],
// w[c] = 0.5 + ((13 c) % 17) / 16, eps 1e-5. The tables were printed by
//   h = x.float(); h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-5)
//   (w * h.to(x.dtype)).view(torch.int16)
// Rounding w * n only once differs from them in 30 (bf16) and 32 (f16) of
// the 128 elements.
TEST(RmsNormTest, MatchesHuggingFaceBitForBit) {
  const int64_t rows = 2, cols = 64;
  const uint16_t bf16[] = {
      0xbf59, 0xbf14, 0x3f5d, 0xbf8d, 0xbd6a, 0x3fca, 0xbf92, 0x3e55, 0x3f6f,
      0xbf79, 0x3f2f, 0xbfbf, 0xbe6e, 0x3fb0, 0xbfc8, 0x0000, 0x3f70, 0xbeea,
      0x3ee3, 0x3fd9, 0xbeef, 0x3ec3, 0xc003, 0xbe89, 0x3f64, 0xbf38, 0x3e16,
      0x3fcd, 0xbf43, 0x3e9b, 0x4023, 0xbf18, 0x3f47, 0xbf86, 0xbd8b, 0x3fbc,
      0xbf8e, 0x3e29, 0x3f51, 0xbf7a, 0x3f1c, 0xbfb6, 0xbe6f, 0x3fa2, 0xbfc4,
      0xbd02, 0x3f56, 0xbfb6, 0x3ec3, 0x3fc7, 0xbeea, 0x3ea5, 0xc000, 0xbe94,
      0x3f4c, 0xbf2b, 0x3dbf, 0x3fbe, 0xbf3e, 0x3e82, 0x4018, 0xbf1a, 0x3f33,
      0xbf7a, 0xbdb2, 0x3fba, 0xbf97, 0x3e11, 0x3f52, 0xbf86, 0x3f16, 0xbfbf,
      0xbe85, 0x3fa0, 0xbfcd, 0xbd85, 0x3f56, 0xbfc2, 0x3eb2, 0x3fc8, 0xbefe,
      0x3ea0, 0xc006, 0xbeaa, 0x3f4a, 0xbf34, 0x3d43, 0x3fbe, 0xbf4a, 0x3e74,
      0x4019, 0xbf29, 0x3f2f, 0xbf83, 0xbea0, 0x3fac, 0xbf93, 0x3dd5, 0x3f36,
      0xbf86, 0x3f04, 0xbfb4, 0xbe82, 0x3f92, 0xbfc8, 0xbdba, 0x3f3d, 0xbfbf,
      0x3e94, 0x3fb7, 0xbef5, 0x3f62, 0xc003, 0xbeb2, 0x3f34, 0xbf24, 0x0000,
      0x3fae, 0xbf43, 0x3e48, 0x4010, 0xbf2a, 0x3f1c, 0xbf74, 0xbeb3, 0x3f9e,
      0xbf8e, 0x3d92};
  const uint16_t f16[] = {
      0xbac5, 0xb89f, 0x3ae8, 0xbc66, 0xab50, 0x3e54, 0xbc92, 0x32a2, 0x3b72,
      0xbbc8, 0x3977, 0xbdf7, 0xb372, 0x3d7c, 0xbe42, 0x0000, 0x3b83, 0xb750,
      0x371b, 0x3ec3, 0xb77a, 0x3617, 0xc018, 0xb444, 0x3b1c, 0xb9c0, 0x30ac,
      0x3e6e, 0xba18, 0x34d7, 0x4114, 0xb8bd, 0x3a3a, 0xbc2a, 0xac55, 0x3dde,
      0xbc75, 0x3148, 0x3a8c, 0xbbd2, 0x38e0, 0xbdb0, 0xb372, 0x3d0f, 0xbe1c,
      0xa810, 0x3ab4, 0xbdb0, 0x3618, 0x3e3a, 0xb750, 0x3525, 0xc000, 0xb49a,
      0x3a61, 0xb955, 0x2df5, 0x3df1, 0xb9ec, 0x3410, 0x40c4, 0xb8d3, 0x3996,
      0xbbd2, 0xad8e, 0x3dd4, 0xbcb8, 0x3083, 0x3a90, 0xbc33, 0x38af, 0xbdf4,
      0xb42a, 0x3cfd, 0xbe6e, 0xac2a, 0x3aae, 0xbe0a, 0x358d, 0x3e3f, 0xb7ea,
      0x3500, 0xc031, 0xb550, 0x3a51, 0xb9a0, 0x2a1b, 0x3df0, 0xba51, 0x33a3,
      0x40ca, 0xb946, 0x3978, 0xbc1a, 0xb500, 0x3d62, 0xbc95, 0x2eaa, 0x39b1,
      0xbc31, 0x3821, 0xbda4, 0xb410, 0x3c95, 0xbe40, 0xadd5, 0x39e6, 0xbdfc,
      0x349e, 0x3dba, 0xb7a3, 0x3b14, 0xc014, 0xb58e, 0x399f, 0xb923, 0x0000,
      0x3d75, 0xba17, 0x3240, 0x407d, 0xb94f, 0x38dc, 0xbba3, 0xb596, 0x3cf2,
      0xbc6c, 0x2c95};
  for (int32_t dtype : {ZRT_BF16, ZRT_F16}) {
    const uint16_t *want = dtype == ZRT_BF16 ? bf16 : f16;
    Buffer x(dtype, rows * cols), w(dtype, cols), y(dtype, rows * cols);
    for (int64_t i = 0; i < rows * cols; ++i)
      x.set(i, double((37 * i) % 101 - 50) / 16);
    for (int64_t c = 0; c < cols; ++c)
      w.set(c, 0.5 + double((13 * c) % 17) / 16);
    zrt_rms_norm(dtype, x.data(), w.data(), y.data(), rows, cols, 1e-5);
    const uint16_t *got = static_cast<const uint16_t *>(y.data());
    for (int64_t i = 0; i < rows * cols; ++i)
      EXPECT_EQ(got[i], want[i])
          << dtypeName(dtype) << " element " << i << ": " << y.get(i);
  }
}

TEST_P(KernelTest, EmbeddingAndGrad) {
  int64_t vocab = 50, dim = 1030, numIds = 40;
  Buffer table = randomBuffer(dtype(), rng, vocab * dim);
  Buffer dy = randomBuffer(dtype(), rng, numIds * dim);
  std::vector<int64_t> ids(numIds);
  std::uniform_int_distribution<int64_t> pick(0, 9); // many repeats
  for (int64_t &id : ids)
    id = pick(rng) * 5;
  std::vector<int32_t> ids32(ids.begin(), ids.end());
  for (int32_t idType : {ZRT_I32, ZRT_I64}) {
    const void *idp = idType == ZRT_I32
                          ? static_cast<const void *>(ids32.data())
                          : ids.data();
    Buffer out(dtype(), numIds * dim), dtable(dtype(), vocab * dim);
    zrt_embedding(dtype(), table.data(), idType, idp, out.data(), numIds, vocab,
                  dim);
    expectClose(out, ref::embedding(table.values(), ids, dim), 0, 0,
                "embedding");
    dtable.set(1, 123.0); // must be overwritten with 0
    zrt_embedding_grad(dtype(), dy.data(), idType, idp, dtable.data(), numIds,
                       vocab, dim, -1);
    expectClose(dtable, ref::embeddingGrad(dy.values(), ids, vocab, dim), u(),
                numIds * kF32, "embedding_grad");
    // Row 10, which ids select, as the padding row: it stays zero (over the
    // 123 written before), the others are unchanged.
    ASSERT_NE(std::count(ids.begin(), ids.end(), 10), 0);
    dtable.set(10 * dim, 123.0);
    zrt_embedding_grad(dtype(), dy.data(), idType, idp, dtable.data(), numIds,
                       vocab, dim, 10);
    ref::Vec want = ref::embeddingGrad(dy.values(), ids, vocab, dim, 10);
    EXPECT_TRUE(std::all_of(want.begin() + 10 * dim, want.begin() + 11 * dim,
                            [](double x) { return x == 0; }));
    expectClose(dtable, want, u(), numIds * kF32, "embedding_grad padding_idx");
  }
}

TEST_P(KernelTest, SoftmaxCrossEntropyAndGrad) {
  for (auto [rows, classes] :
       {std::pair<int64_t, int64_t>{7, 1500}, {100, 10}}) {
    Buffer logits = randomBuffer(dtype(), rng, rows * classes, -5, 5);
    std::vector<int64_t> labels(rows);
    std::uniform_int_distribution<int64_t> pick(0, classes - 1);
    for (int64_t &l : labels)
      l = pick(rng);
    std::vector<int32_t> labels32(labels.begin(), labels.end());
    for (int32_t labelType : {ZRT_I32, ZRT_I64}) {
      const void *lp = labelType == ZRT_I32
                           ? static_cast<const void *>(labels32.data())
                           : labels.data();
      float loss = 0;
      zrt_softmax_cross_entropy(dtype(), logits.data(), labelType, lp, &loss,
                                rows, classes, classes, 0, 0);
      double want = ref::crossEntropy(logits.values(), labels, classes);
      EXPECT_NEAR(loss, want, 1e-5 * std::fabs(want)) << dtypeName(dtype());
      float dloss = 1.7f;
      Buffer dlogits(dtype(), rows * classes);
      zrt_softmax_cross_entropy_grad(dtype(), logits.data(), labelType, lp,
                                     &dloss, dlogits.data(), rows, classes,
                                     classes, 0, 0);
      ref::Vec wantGrad =
          ref::crossEntropyGrad(logits.values(), labels, classes, dloss);
      expectClose(dlogits, wantGrad, u() + 1e-5, 1e-6 * maxAbs(wantGrad),
                  "softmax_cross_entropy_grad");
    }
  }
}

// Rows labelled ignore_index (-100, or a class) leave the loss and the
// count of its mean; their gradient rows are 0. With every row ignored the
// loss and the gradient are 0, not NaN.
TEST_P(KernelTest, SoftmaxCrossEntropyIgnoreIndex) {
  for (auto [rows, classes, ignoreIndex] :
       {std::tuple<int64_t, int64_t, int64_t>{7, 1500, -100},
        {100, 10, -100},
        {100, 10, 3}}) {
    Buffer logits = randomBuffer(dtype(), rng, rows * classes, -5, 5);
    std::vector<int64_t> labels(rows);
    std::uniform_int_distribution<int64_t> pick(0, classes - 1);
    for (int64_t &l : labels)
      l = pick(rng);
    // Every third row, and the first, ignored.
    for (int64_t r = 0; r < rows; r += 3)
      labels[r] = ignoreIndex;
    std::vector<int32_t> labels32(labels.begin(), labels.end());
    for (int32_t labelType : {ZRT_I32, ZRT_I64}) {
      const void *lp = labelType == ZRT_I32
                           ? static_cast<const void *>(labels32.data())
                           : labels.data();
      float loss = 0;
      zrt_softmax_cross_entropy(dtype(), logits.data(), labelType, lp, &loss,
                                rows, classes, classes, 1, ignoreIndex);
      double want =
          ref::crossEntropy(logits.values(), labels, classes, ignoreIndex);
      EXPECT_NEAR(loss, want, 1e-5 * std::fabs(want)) << dtypeName(dtype());
      float dloss = 1.7f;
      Buffer dlogits(dtype(), rows * classes);
      for (int64_t i = 0; i < rows * classes; ++i)
        dlogits.set(i, 123.0); // must be overwritten
      zrt_softmax_cross_entropy_grad(dtype(), logits.data(), labelType, lp,
                                     &dloss, dlogits.data(), rows, classes,
                                     classes, 1, ignoreIndex);
      ref::Vec wantGrad = ref::crossEntropyGrad(logits.values(), labels,
                                                classes, dloss, ignoreIndex);
      expectClose(dlogits, wantGrad, u() + 1e-5, 1e-6 * maxAbs(wantGrad),
                  "softmax_cross_entropy_grad ignore_index");
    }
  }
  // No row counts.
  int64_t rows = 4, classes = 10;
  Buffer logits = randomBuffer(dtype(), rng, rows * classes, -5, 5);
  std::vector<int64_t> labels(rows, -100);
  float loss = 1.0f, dloss = 1.0f;
  zrt_softmax_cross_entropy(dtype(), logits.data(), ZRT_I64, labels.data(),
                            &loss, rows, classes, classes, 1, -100);
  EXPECT_EQ(loss, 0.0f);
  Buffer dlogits(dtype(), rows * classes);
  for (int64_t i = 0; i < rows * classes; ++i)
    dlogits.set(i, 123.0);
  zrt_softmax_cross_entropy_grad(dtype(), logits.data(), ZRT_I64, labels.data(),
                                 &dloss, dlogits.data(), rows, classes, classes,
                                 1, -100);
  for (int64_t i = 0; i < rows * classes; ++i)
    EXPECT_EQ(dlogits.get(i), 0.0) << i;
}

// The chunked output projection and loss: for chunks that divide the rows,
// that do not, of one row and of more than all rows, the loss and both
// gradients are those of zrt_matmul then the unchunked loss (f32; the
// loss to rounding of the sums, the gradients to the rounding of BLAS's
// blocking of a chunk's products and of dw's sum over chunks), with
// ignored rows, and against the float64 reference.
TEST(LinearCrossEntropy, MatchesMatmulThenLoss) {
  std::mt19937 rng(7);
  int64_t rows = 23, hidden = 16, vocab = 300;
  Buffer x = randomBuffer(ZRT_F32, rng, rows * hidden, -1, 1);
  Buffer w = randomBuffer(ZRT_F32, rng, vocab * hidden, -1, 1);
  std::vector<int64_t> labels(rows);
  std::uniform_int_distribution<int64_t> pick(0, vocab - 1);
  for (int64_t &l : labels)
    l = pick(rng);
  for (int64_t r = 0; r < rows; r += 4)
    labels[r] = -100;
  for (int32_t ignore : {0, 1}) {
    std::vector<int64_t> used = labels;
    if (!ignore)
      for (int64_t &l : used)
        l = l < 0 ? 5 : l;
    // Unchunked: the logits whole, then the loss and its gradient.
    Buffer logits(ZRT_F32, rows * vocab), dlogits(ZRT_F32, rows * vocab);
    zrt_matmul(ZRT_F32, x.data(), w.data(), logits.data(), 1, rows, vocab,
               hidden, 0, 1, 0, hidden);
    float want = 0, dloss = 1.3f;
    zrt_softmax_cross_entropy(ZRT_F32, logits.data(), ZRT_I64, used.data(),
                              &want, rows, vocab, vocab, ignore, -100);
    zrt_softmax_cross_entropy_grad(ZRT_F32, logits.data(), ZRT_I64, used.data(),
                                   &dloss, dlogits.data(), rows, vocab, vocab,
                                   ignore, -100);
    Buffer wantDx(ZRT_F32, rows * hidden), wantDw(ZRT_F32, vocab * hidden);
    zrt_matmul(ZRT_F32, dlogits.data(), w.data(), wantDx.data(), 1, rows,
               hidden, vocab, 0, 0, 0, vocab);
    zrt_matmul(ZRT_F32, dlogits.data(), x.data(), wantDw.data(), 1, vocab,
               hidden, rows, 1, 0, 0, rows);
    std::optional<int64_t> ignored;
    if (ignore)
      ignored = -100;
    double ref =
        ref::crossEntropy(ref::matmul(x.values(), w.values(), 1, rows, vocab,
                                      hidden, false, true, false),
                          used, vocab, ignored);
    EXPECT_NEAR(want, ref, 1e-5 * std::fabs(ref));
    for (int64_t chunk : {int64_t(1), int64_t(4), int64_t(7), rows, rows + 5}) {
      float loss = 0;
      zrt_linear_cross_entropy(ZRT_F32, x.data(), w.data(), ZRT_I64,
                               used.data(), &loss, rows, hidden, vocab, chunk,
                               ignore, -100);
      EXPECT_NEAR(loss, want, 1e-6 * std::fabs(want))
          << "chunk " << chunk << " ignore " << ignore;
      Buffer dx(ZRT_F32, rows * hidden), dw(ZRT_F32, vocab * hidden);
      for (int64_t i = 0; i < vocab * hidden; ++i)
        dw.set(i, 123.0); // must be overwritten, not added to
      zrt_linear_cross_entropy_grad(ZRT_F32, x.data(), w.data(), ZRT_I64,
                                    used.data(), &dloss, dx.data(), dw.data(),
                                    rows, hidden, vocab, chunk, ignore, -100);
      // A chunk's product may be blocked differently by BLAS: rounding of
      // sums over the vocabulary.
      expectClose(dx, wantDx.values(), 1e-5, 1e-6 * maxAbs(wantDx.values()),
                  "linear_cross_entropy_grad dx");
      expectClose(dw, wantDw.values(), 1e-5, 1e-6 * maxAbs(wantDw.values()),
                  "linear_cross_entropy_grad dw");
    }
  }
}

// The 16-bit chunked loss computes as the unchunked 16-bit program:
// zrt_matmul's rounded logits, the loss in fp32 from them, the logits'
// gradient rounded to 16 bits, dx the 16-bit matmul of it and dw one fp32
// sum over all rows rounded once. The loss and dx agree to the rounding of
// BLAS's blocking of a chunk's products (which can move a 16-bit logit or
// dx element by one unit in the last place); dw to its fp32 sum's order
// over chunks, then one rounding: a unit in the last place at most.
TEST(LinearCrossEntropy, SixteenBitMatchesMatmulThenLoss) {
  std::mt19937 rng(17);
  int64_t rows = 23, hidden = 16, vocab = 300;
  for (int32_t dtype : {ZRT_BF16, ZRT_F16}) {
    double ulp = dtype == ZRT_BF16 ? std::ldexp(1.0, -7) : std::ldexp(1.0, -10);
    Buffer x = randomBuffer(dtype, rng, rows * hidden, -1, 1);
    Buffer w = randomBuffer(dtype, rng, vocab * hidden, -1, 1);
    std::vector<int64_t> labels(rows);
    std::uniform_int_distribution<int64_t> pick(0, vocab - 1);
    for (int64_t &l : labels)
      l = pick(rng);
    for (int64_t r = 0; r < rows; r += 4)
      labels[r] = -100;
    Buffer logits(dtype, rows * vocab), dlogits(dtype, rows * vocab);
    zrt_matmul(dtype, x.data(), w.data(), logits.data(), 1, rows, vocab, hidden,
               0, 1, 0, hidden);
    float want = 0, dloss = 1.3f;
    zrt_softmax_cross_entropy(dtype, logits.data(), ZRT_I64, labels.data(),
                              &want, rows, vocab, vocab, 1, -100);
    zrt_softmax_cross_entropy_grad(dtype, logits.data(), ZRT_I64, labels.data(),
                                   &dloss, dlogits.data(), rows, vocab, vocab,
                                   1, -100);
    Buffer wantDx(dtype, rows * hidden), wantDw(dtype, vocab * hidden);
    zrt_matmul(dtype, dlogits.data(), w.data(), wantDx.data(), 1, rows, hidden,
               vocab, 0, 0, 0, vocab);
    zrt_matmul(dtype, dlogits.data(), x.data(), wantDw.data(), 1, vocab, hidden,
               rows, 1, 0, 0, rows);
    for (int64_t chunk : {int64_t(1), int64_t(4), int64_t(7), rows, rows + 5}) {
      std::string what =
          "dtype " + std::to_string(dtype) + " chunk " + std::to_string(chunk);
      float loss = 0;
      zrt_linear_cross_entropy(dtype, x.data(), w.data(), ZRT_I64,
                               labels.data(), &loss, rows, hidden, vocab, chunk,
                               1, -100);
      EXPECT_NEAR(loss, want, 1e-5 * std::fabs(want)) << what;
      Buffer dx(dtype, rows * hidden), dw(dtype, vocab * hidden);
      for (int64_t i = 0; i < vocab * hidden; ++i)
        dw.set(i, 123.0); // must be overwritten, not added to
      zrt_linear_cross_entropy_grad(dtype, x.data(), w.data(), ZRT_I64,
                                    labels.data(), &dloss, dx.data(), dw.data(),
                                    rows, hidden, vocab, chunk, 1, -100);
      expectClose(dx, wantDx.values(), ulp, 1e-3 * maxAbs(wantDx.values()),
                  what + " dx");
      expectClose(dw, wantDw.values(), ulp, 1e-3 * maxAbs(wantDw.values()),
                  what + " dw");
    }
  }
}

// The scratch is what zero_rt/scratch.h plans: one chunk of fp32 logits at
// f32; at 16 bits one chunk of 16-bit logits and a 16-bit matmul's panels,
// and for the gradient also the chunk's gradient and rows in fp32 and the
// fp32 sum of dw.
TEST(LinearCrossEntropy, ScratchIsPlanned) {
  std::mt19937 rng(8);
  int64_t rows = 50, hidden = 8, vocab = 1000;
  std::vector<int32_t> labels(rows, 3);
  float loss = 0, dloss = 1.0f;
  for (int32_t dtype : {ZRT_F32, ZRT_BF16}) {
    Buffer x = randomBuffer(dtype, rng, rows * hidden, -1, 1);
    Buffer w = randomBuffer(dtype, rng, vocab * hidden, -1, 1);
    Buffer dx(dtype, rows * hidden), dw(dtype, vocab * hidden);
    for (int64_t chunk : {int64_t(16), int64_t(64)}) {
      int64_t n = std::min(chunk, rows);
      int64_t fwd = zrt_scratch_linear_cross_entropy(dtype, rows, hidden, vocab,
                                                     chunk, 0);
      int64_t bwd = zrt_scratch_linear_cross_entropy(dtype, rows, hidden, vocab,
                                                     chunk, 1);
      if (dtype == ZRT_F32) {
        EXPECT_EQ(fwd, n * vocab * 4);
        EXPECT_EQ(bwd, n * vocab * 4);
      } else {
        EXPECT_EQ(fwd, n * vocab * 2 + zrt_scratch_matmul(dtype, 1, n, vocab,
                                                          hidden, 0, 0));
        EXPECT_GT(bwd, n * vocab * 6 + vocab * hidden * 4);
      }
      zrt_memory_reset_peak();
      zrt_linear_cross_entropy(dtype, x.data(), w.data(), ZRT_I32,
                               labels.data(), &loss, rows, hidden, vocab, chunk,
                               0, 0);
      EXPECT_EQ(zrt_scratch_peak_bytes(), fwd);
      zrt_memory_reset_peak();
      zrt_linear_cross_entropy_grad(dtype, x.data(), w.data(), ZRT_I32,
                                    labels.data(), &dloss, dx.data(), dw.data(),
                                    rows, hidden, vocab, chunk, 0, 0);
      EXPECT_EQ(zrt_scratch_peak_bytes(), bwd);
      EXPECT_EQ(zrt_scratch_bytes_in_use(), 0);
    }
  }
}

// The tiled SwiGLU MLP: for tile counts that divide the rows, that do not,
// of one tile, of one row a tile and of more tiles than rows, the output
// and all four gradients are those of the untiled kernels (zrt_matmul,
// zrt_swiglu, their gradients; f32, the weight gradients to the order of
// their sums over tiles).
TEST(TiledMlp, MatchesUntiledKernels) {
  std::mt19937 rng(9);
  int64_t rows = 23, hidden = 12, inter = 20;
  Buffer x = randomBuffer(ZRT_F32, rng, rows * hidden, -1, 1);
  Buffer wg = randomBuffer(ZRT_F32, rng, inter * hidden, -1, 1);
  Buffer wu = randomBuffer(ZRT_F32, rng, inter * hidden, -1, 1);
  Buffer wd = randomBuffer(ZRT_F32, rng, hidden * inter, -1, 1);
  Buffer dy = randomBuffer(ZRT_F32, rng, rows * hidden, -1, 1);
  // Untiled: the Hugging Face import's ops and their derivatives.
  Buffer g(ZRT_F32, rows * inter), u(ZRT_F32, rows * inter),
      a(ZRT_F32, rows * inter), y(ZRT_F32, rows * hidden);
  zrt_matmul(ZRT_F32, x.data(), wg.data(), g.data(), 1, rows, inter, hidden, 0,
             1, 0, hidden);
  zrt_matmul(ZRT_F32, x.data(), wu.data(), u.data(), 1, rows, inter, hidden, 0,
             1, 0, hidden);
  zrt_swiglu(ZRT_F32, g.data(), u.data(), a.data(), rows * inter);
  zrt_matmul(ZRT_F32, a.data(), wd.data(), y.data(), 1, rows, hidden, inter, 0,
             1, 0, inter);
  Buffer da(ZRT_F32, rows * inter), dg(ZRT_F32, rows * inter),
      du(ZRT_F32, rows * inter), wantDwd(ZRT_F32, hidden * inter),
      wantDwg(ZRT_F32, inter * hidden), wantDwu(ZRT_F32, inter * hidden),
      dx1(ZRT_F32, rows * hidden), dx2(ZRT_F32, rows * hidden);
  zrt_matmul(ZRT_F32, dy.data(), wd.data(), da.data(), 1, rows, inter, hidden,
             0, 0, 0, hidden);
  zrt_matmul(ZRT_F32, dy.data(), a.data(), wantDwd.data(), 1, hidden, inter,
             rows, 1, 0, 0, rows);
  zrt_swiglu_grad(ZRT_F32, g.data(), u.data(), da.data(), dg.data(), du.data(),
                  rows * inter);
  zrt_matmul(ZRT_F32, dg.data(), x.data(), wantDwg.data(), 1, inter, hidden,
             rows, 1, 0, 0, rows);
  zrt_matmul(ZRT_F32, du.data(), x.data(), wantDwu.data(), 1, inter, hidden,
             rows, 1, 0, 0, rows);
  zrt_matmul(ZRT_F32, dg.data(), wg.data(), dx1.data(), 1, rows, hidden, inter,
             0, 0, 0, inter);
  zrt_matmul(ZRT_F32, du.data(), wu.data(), dx2.data(), 1, rows, hidden, inter,
             0, 0, 0, inter);
  std::vector<double> wantDx = dx1.values();
  for (size_t i = 0; i < wantDx.size(); ++i)
    wantDx[i] += dx2.values()[i];
  for (int64_t tiles : {int64_t(1), int64_t(2), int64_t(5), rows, rows + 4}) {
    std::string what = "tiles " + std::to_string(tiles);
    Buffer got(ZRT_F32, rows * hidden);
    zrt_tiled_mlp(ZRT_F32, x.data(), wg.data(), wu.data(), wd.data(),
                  got.data(), rows, hidden, inter, tiles);
    expectClose(got, y.values(), 1e-6, 1e-7 * maxAbs(y.values()),
                "tiled_mlp y " + what);
    Buffer dx(ZRT_F32, rows * hidden), dwg(ZRT_F32, inter * hidden),
        dwu(ZRT_F32, inter * hidden), dwd(ZRT_F32, hidden * inter);
    for (Buffer *b : {&dwg, &dwu, &dwd})
      for (int64_t i = 0; i < inter * hidden; ++i)
        b->set(i, 123.0); // must be overwritten, not added to
    zrt_tiled_mlp_grad(ZRT_F32, x.data(), wg.data(), wu.data(), wd.data(),
                       dy.data(), dx.data(), dwg.data(), dwu.data(), dwd.data(),
                       rows, hidden, inter, tiles);
    expectClose(dx, wantDx, 1e-5, 1e-6 * maxAbs(wantDx), "dx " + what);
    expectClose(dwg, wantDwg.values(), 1e-5, 1e-6 * maxAbs(wantDwg.values()),
                "dwg " + what);
    expectClose(dwu, wantDwu.values(), 1e-5, 1e-6 * maxAbs(wantDwu.values()),
                "dwu " + what);
    expectClose(dwd, wantDwd.values(), 1e-5, 1e-6 * maxAbs(wantDwd.values()),
                "dwd " + what);
  }
}

// The only scratch is one tile's intermediates, as planned: two [tile,
// inter] fp32 blocks forward, three backward.
TEST(TiledMlp, ScratchIsOneTile) {
  std::mt19937 rng(10);
  int64_t rows = 50, hidden = 8, inter = 40;
  Buffer x = randomBuffer(ZRT_F32, rng, rows * hidden, -1, 1);
  Buffer w = randomBuffer(ZRT_F32, rng, inter * hidden, -1, 1);
  Buffer y(ZRT_F32, rows * hidden), dx(ZRT_F32, rows * hidden),
      dwg(ZRT_F32, inter * hidden), dwu(ZRT_F32, inter * hidden),
      dwd(ZRT_F32, inter * hidden);
  for (int64_t tiles : {int64_t(3), int64_t(7)}) {
    int64_t tile = (rows + tiles - 1) / tiles;
    int64_t want = zrt_scratch_tiled_mlp(rows, inter, tiles);
    EXPECT_EQ(want, 2 * tile * inter * 4);
    zrt_memory_reset_peak();
    zrt_tiled_mlp(ZRT_F32, x.data(), w.data(), w.data(), w.data(), y.data(),
                  rows, hidden, inter, tiles);
    EXPECT_EQ(zrt_scratch_peak_bytes(), want);
    int64_t wantGrad = zrt_scratch_tiled_mlp_grad(rows, inter, tiles);
    EXPECT_EQ(wantGrad, 3 * tile * inter * 4);
    zrt_memory_reset_peak();
    zrt_tiled_mlp_grad(ZRT_F32, x.data(), w.data(), w.data(), w.data(),
                       x.data(), dx.data(), dwg.data(), dwu.data(), dwd.data(),
                       rows, hidden, inter, tiles);
    EXPECT_EQ(zrt_scratch_peak_bytes(), wantGrad);
    EXPECT_EQ(zrt_scratch_bytes_in_use(), 0);
  }
}

// Logits padded to `cols` columns give the loss and gradient of the first
// `classes` bit for bit, whatever the padding holds; its gradient is 0.
TEST_P(KernelTest, SoftmaxCrossEntropyPadded) {
  for (auto [rows, classes, cols] :
       {std::tuple<int64_t, int64_t, int64_t>{7, 1500, 1536}, {100, 10, 128}}) {
    Buffer logits = randomBuffer(dtype(), rng, rows * classes, -5, 5);
    Buffer padded(dtype(), rows * cols);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        padded.set(r * cols + c,
                   c < classes ? logits.get(r * classes + c) : 30.0 + c);
    std::vector<int64_t> labels(rows);
    std::uniform_int_distribution<int64_t> pick(0, classes - 1);
    for (int64_t &l : labels)
      l = pick(rng);
    float loss = 0, paddedLoss = 1;
    zrt_softmax_cross_entropy(dtype(), logits.data(), ZRT_I64, labels.data(),
                              &loss, rows, classes, classes, 0, 0);
    zrt_softmax_cross_entropy(dtype(), padded.data(), ZRT_I64, labels.data(),
                              &paddedLoss, rows, classes, cols, 0, 0);
    EXPECT_EQ(std::memcmp(&loss, &paddedLoss, sizeof(float)), 0)
        << loss << " vs " << paddedLoss;
    float dloss = 1.7f;
    Buffer grad(dtype(), rows * classes), paddedGrad(dtype(), rows * cols);
    for (int64_t i = 0; i < rows * cols; ++i)
      paddedGrad.set(i, 123.0); // must be overwritten
    zrt_softmax_cross_entropy_grad(dtype(), logits.data(), ZRT_I64,
                                   labels.data(), &dloss, grad.data(), rows,
                                   classes, classes, 0, 0);
    zrt_softmax_cross_entropy_grad(dtype(), padded.data(), ZRT_I64,
                                   labels.data(), &dloss, paddedGrad.data(),
                                   rows, classes, cols, 0, 0);
    int64_t mismatches = 0;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        double got = paddedGrad.get(r * cols + c);
        double want = c < classes ? grad.get(r * classes + c) : 0.0;
        mismatches += std::memcmp(&got, &want, sizeof(double)) != 0;
      }
    EXPECT_EQ(mismatches, 0) << dtypeName(dtype());
  }
}

} // namespace
