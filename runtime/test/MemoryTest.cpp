//===- MemoryTest.cpp - Arena, scratch accounting, determinism ------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "Device/Memory.h"
#include "Driver/Trace.h"
#include "Program/Manifest.h"
#include "TestUtil.h"
#include "zero_rt/scratch.h"

#include <cstring>

using namespace zrt_test;

namespace {

TEST(ArenaTest, AlignmentBoundsAndHighWater) {
  zrt_memory_reset_peak();
  zrt_arena *arena = zrt_arena_create(1000);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(zrt_arena_base(arena)) % 64, 0u);
  EXPECT_EQ(zrt_arena_size(arena), 1000);
  EXPECT_EQ(zrt_arena_high_water_bytes(arena), 0);
  char *base = static_cast<char *>(zrt_arena_base(arena));
  EXPECT_EQ(zrt_arena_at(arena, 0, 100), base);
  EXPECT_EQ(zrt_arena_high_water_bytes(arena), 100);
  EXPECT_EQ(zrt_arena_at(arena, 600, 400), base + 600);
  EXPECT_EQ(zrt_arena_at(arena, 10, 10), base + 10);
  EXPECT_EQ(zrt_arena_high_water_bytes(arena), 1000);
  std::memset(base, 1, 1000);
  EXPECT_EQ(zrt_memory_peak_bytes(), 1000);
  zrt_arena_destroy(arena);
  zrt_memory_reset_peak();
  EXPECT_EQ(zrt_memory_peak_bytes(), 0);
}

TEST(ArenaDeathTest, OutOfBounds) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  zrt_arena *arena = zrt_arena_create(256);
  EXPECT_DEATH(zrt_arena_at(arena, 200, 57), "outside the arena");
  EXPECT_DEATH(zrt_arena_at(arena, -1, 1), "outside the arena");
  zrt_arena_destroy(arena);
}

/// Resets the peaks, runs `kernel` and returns the scratch peak it caused.
template <typename Fn>
int64_t scratchOf(const Fn &kernel) {
  zrt_memory_reset_peak();
  kernel();
  EXPECT_EQ(zrt_scratch_bytes_in_use(), 0);
  return zrt_scratch_peak_bytes();
}

class ScratchTest : public ::testing::TestWithParam<int32_t> {
protected:
  int32_t dtype() const { return GetParam(); }
  std::mt19937 rng{99};
};

TEST_P(ScratchTest, ReportedScratchIsExact) {
  // matmul: 0 for f32, fp32 panels for 16-bit; both foldings, several
  // panels.
  struct Case {
    int64_t batch, m, n, k;
    int ta, tb, bBatched;
  };
  for (Case c : {Case{2, 300, 600, 40, 0, 1, 0}, Case{3, 20, 30, 10, 1, 0, 1},
                 Case{1, 700, 5, 3, 0, 0, 1}}) {
    Buffer a = randomBuffer(dtype(), rng, c.batch * c.m * c.k),
           b = randomBuffer(dtype(), rng, c.batch * c.k * c.n),
           out(dtype(), c.batch * c.m * c.n);
    int64_t want =
        zrt_scratch_matmul(dtype(), c.batch, c.m, c.n, c.k, c.ta, c.bBatched);
    EXPECT_EQ(want == 0, dtype() == ZRT_F32);
    EXPECT_EQ(scratchOf([&] {
                zrt_matmul(dtype(), a.data(), b.data(), out.data(), c.batch,
                           c.m, c.n, c.k, c.ta, c.tb, c.bBatched, c.k);
              }),
              want);
  }

  int64_t rows = 50, cols = 300;
  Buffer x = randomBuffer(dtype(), rng, rows * cols),
         w = randomBuffer(dtype(), rng, cols),
         dy = randomBuffer(dtype(), rng, rows * cols);
  Buffer dx(dtype(), rows * cols), dw(dtype(), cols), db(dtype(), cols);
  EXPECT_EQ(scratchOf([&] {
              zrt_layer_norm_grad(dtype(), x.data(), w.data(), dy.data(),
                                  dx.data(), dw.data(), db.data(), rows, cols,
                                  1e-5);
            }),
            zrt_scratch_layer_norm_grad(rows, cols));
  EXPECT_EQ(scratchOf([&] {
              zrt_rms_norm_grad(dtype(), x.data(), w.data(), dy.data(),
                                dx.data(), dw.data(), rows, cols, 1e-5);
            }),
            zrt_scratch_rms_norm_grad(rows, cols));
  EXPECT_EQ(zrt_scratch_rms_norm_grad(rows, cols), 4 * rows);

  int64_t batch = 2, heads = 3, seq = 40, dim = 8,
          n = batch * heads * seq * dim;
  Buffer q = randomBuffer(dtype(), rng, n), o(dtype(), n), g(dtype(), n);
  EXPECT_EQ(scratchOf([&] {
              zrt_attention_backward(
                  AttentionDesc(dtype(), batch, heads, heads, seq, dim, 1, 0),
                  q.data(), q.data(), q.data(), q.data(), q.data(), o.data(),
                  g.data(), dx.data());
            }),
            zrt_scratch_attention_grad(batch, heads, seq, dim));

  std::vector<int32_t> ids = {3, 1, 3, 0};
  Buffer table(dtype(), 5 * 7);
  EXPECT_EQ(scratchOf([&] {
              zrt_embedding_grad(dtype(), dy.data(), ZRT_I32, ids.data(),
                                 table.data(), 4, 5, 7, -1);
            }),
            zrt_scratch_embedding_grad(4, 5, 7));
}

TEST_P(ScratchTest, OtherKernelsUseNoScratch) {
  int64_t rows = 40, cols = 1100, n = rows * cols;
  Buffer x = randomBuffer(dtype(), rng, n), y = randomBuffer(dtype(), rng, n),
         z(dtype(), n), w = randomBuffer(dtype(), rng, cols),
         b = randomBuffer(dtype(), rng, cols), c(dtype(), cols);
  std::vector<int64_t> labels(static_cast<size_t>(rows), 3);
  std::vector<int64_t> shape = {rows, cols}, perm = {1, 0};
  float loss, one = 1.0f;
  int64_t sizes[] = {500, 600};
  void *parts[] = {z.data(), static_cast<char *>(z.data()) +
                                 rows * 500 * zrt_dtype_size(dtype())};
  const void *cparts[] = {parts[0], parts[1]};
  float stats[2];
  const void *grads[] = {x.data()};
  std::vector<float> master(static_cast<size_t>(n)), m(static_cast<size_t>(n)),
      v(static_cast<size_t>(n));
  EXPECT_EQ(
      scratchOf([&] {
        zrt_add(dtype(), x.data(), w.data(), z.data(), n, cols);
        zrt_mul(dtype(), x.data(), y.data(), z.data(), n, n);
        zrt_scale(dtype(), x.data(), z.data(), n, 2.0);
        zrt_gelu(dtype(), x.data(), z.data(), n);
        zrt_gelu_grad(dtype(), x.data(), y.data(), z.data(), n);
        zrt_relu(dtype(), x.data(), z.data(), n);
        zrt_relu_grad(dtype(), x.data(), y.data(), z.data(), n);
        zrt_reduce_sum(dtype(), x.data(), c.data(), rows, cols);
        zrt_softmax(dtype(), x.data(), z.data(), rows, cols);
        zrt_softmax_grad(dtype(), x.data(), y.data(), z.data(), rows, cols);
        zrt_layer_norm(dtype(), x.data(), w.data(), b.data(), z.data(), rows,
                       cols, 1e-5);
        zrt_rms_norm(dtype(), x.data(), w.data(), z.data(), rows, cols, 1e-5);
        zrt_attention_forward(AttentionDesc(dtype(), 2, 2, 2, 110, 100, 1, 0),
                              x.data(), y.data(), x.data(), z.data());
        zrt_embedding(dtype(), x.data(), ZRT_I64, labels.data(), z.data(), rows,
                      rows, cols);
        zrt_softmax_cross_entropy(dtype(), x.data(), ZRT_I64, labels.data(),
                                  &loss, rows, cols, cols, 0, 0);
        zrt_softmax_cross_entropy_grad(dtype(), x.data(), ZRT_I64,
                                       labels.data(), &one, z.data(), rows,
                                       cols, cols, 0, 0);
        zrt_transpose(dtype(), x.data(), z.data(), 2, shape.data(),
                      perm.data());
        zrt_split(dtype(), x.data(), parts, sizes, 2, rows, 1);
        zrt_concat(dtype(), cparts, sizes, 2, y.data(), rows, 1);
        zrt_cast(dtype(), x.data(), ZRT_F32, master.data(), n);
        zrt_fill(dtype(), z.data(), n, 1.0);
        zrt_check_overflow(dtype(), grads, &n, 1, 1.0f, stats);
        zrt_test::adamStep(dtype(), x.data(), master.data(), m.data(), v.data(),
                           z.data(), n, 1, 1e-3, 0.9, 0.999, 1e-8, 0.01, 1, 1,
                           nullptr, nullptr, nullptr, 0, 1.0, stats, 1.0f, 0);
      }),
      0);
  EXPECT_EQ(scratchOf([&] {
              zrt_matmul(ZRT_F32, master.data(), master.data(), m.data(), 4, 30,
                         40, 50, 1, 1, 0, 50);
            }),
            0);
}

TEST_P(ScratchTest, PeakIsArenaPlusScratch) {
  zrt_memory_reset_peak();
  zrt_arena *arena = zrt_arena_create(1 << 16);
  zrt_arena_at(arena, 0, 4096);
  int64_t m = 64, n = 48, k = 32;
  Buffer a = randomBuffer(dtype(), rng, m * k),
         b = randomBuffer(dtype(), rng, k * n), c(dtype(), m * n);
  zrt_matmul(dtype(), a.data(), b.data(), c.data(), 1, m, n, k, 0, 0, 1, k);
  EXPECT_EQ(zrt_memory_peak_bytes(),
            4096 + zrt_scratch_matmul(dtype(), 1, m, n, k, 0, 1));
  zrt_arena_destroy(arena);
}

TEST(MemoryTraceTest, SamplesLiveBytesAndScratch) {
  zrt::Manifest manifest;
  manifest.arenaBytes = 1024;
  zrt_ctx ctx;
  ctx.manifest = &manifest;
  // Off: nothing is recorded.
  zrt::takeMemorySamples();
  zrt_ctx_trace_op(&ctx, 0);
  zrt_ctx_trace_live(&ctx, 0, 100);
  EXPECT_TRUE(zrt::takeMemorySamples().empty());

  zrt::startMemoryTracing(zrt_scratch_bytes_in_use());
  zrt::traceMicroStep({{0, 64}, {64, 0}});
  zrt_ctx_trace_op(&ctx, 3);
  zrt_ctx_trace_live(&ctx, 128, 256); // [128, 384)
  zrt_ctx_trace_live(&ctx, 128, 256); // the same bytes again: counted once
  zrt_ctx_trace_live(&ctx, 500, 0);   // no bytes
  {
    zrt::Scratch scratch(40);
    zrt_ctx_trace_dead(&ctx, 200, 100); // a slice: [128, 200) + [300, 384)
  }
  zrt_ctx_trace_op(&ctx, 4);
  zrt_ctx_trace_dead(&ctx, 0, 1024); // everything
  zrt::traceMicroStep({});
  zrt::stopMemoryTracing();
  zrt_ctx_trace_live(&ctx, 0, 8);

  struct Expect {
    int64_t position, live, scratch;
  };
  std::vector<Expect> expect = {{-1, 0, 0},   {-1, 64, 0},  {3, 64, 0},
                                {3, 320, 0},  {3, 320, 0},  {3, 320, 0},
                                {3, 320, 40}, {3, 220, 40}, {3, 220, 0},
                                {4, 220, 0},  {4, 0, 0},    {-1, 0, 0}};
  std::vector<zrt::MemorySample> got = zrt::takeMemorySamples();
  ASSERT_EQ(got.size(), expect.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].position, expect[i].position) << "sample " << i;
    EXPECT_EQ(got[i].arenaLiveBytes, expect[i].live) << "sample " << i;
    EXPECT_EQ(got[i].scratchBytes, expect[i].scratch) << "sample " << i;
    if (i > 0)
      EXPECT_GE(got[i].ns, got[i - 1].ns);
  }
  EXPECT_EQ(zrt::droppedMemorySamples(), 0);
}

TEST(MemoryTraceTest, RangesOutsideTheArenaAbort) {
  zrt::Manifest manifest;
  manifest.arenaBytes = 1024;
  zrt_ctx ctx;
  ctx.manifest = &manifest;
  zrt::startMemoryTracing(zrt_scratch_bytes_in_use());
  EXPECT_DEATH(zrt_ctx_trace_live(&ctx, 1000, 25), "outside the step arena");
  EXPECT_DEATH(zrt_ctx_trace_dead(&ctx, -1, 2), "outside the step arena");
  zrt::stopMemoryTracing();
  zrt::takeMemorySamples();
}

TEST_P(ScratchTest, ReductionsIndependentOfThreadCount) {
  int64_t rows = 3000, cols = 700, n = rows * cols;
  Buffer x = randomBuffer(dtype(), rng, n);
  std::vector<int32_t> labels(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r)
    labels[r] = int32_t(r % cols);
  auto run = [&](int32_t threads, Buffer &sums, Buffer &dw, Buffer &rmsDw,
                 float *loss, float *stats) {
    int32_t saved = zrt_num_threads();
    zrt_set_num_threads(threads);
    Buffer dx(dtype(), n), db(dtype(), cols);
    zrt_reduce_sum(dtype(), x.data(), sums.data(), rows, cols);
    zrt_layer_norm_grad(dtype(), x.data(), x.data(), x.data(), dx.data(),
                        dw.data(), db.data(), rows, cols, 1e-5);
    zrt_rms_norm_grad(dtype(), x.data(), x.data(), x.data(), dx.data(),
                      rmsDw.data(), rows, cols, 1e-5);
    zrt_softmax_cross_entropy(dtype(), x.data(), ZRT_I32, labels.data(), loss,
                              rows, cols, cols, 0, 0);
    const void *g[] = {x.data()};
    zrt_check_overflow(dtype(), g, &n, 1, 1.0f, stats);
    zrt_set_num_threads(saved);
  };
  Buffer s1(dtype(), cols), s3(dtype(), cols), w1(dtype(), cols),
      w3(dtype(), cols), r1(dtype(), cols), r3(dtype(), cols);
  float l1, l3, st1[2], st3[2];
  run(1, s1, w1, r1, &l1, st1);
  run(3, s3, w3, r3, &l3, st3);
  EXPECT_EQ(s1.values(), s3.values());
  EXPECT_EQ(w1.values(), w3.values());
  EXPECT_EQ(r1.values(), r3.values());
  EXPECT_EQ(l1, l3);
  EXPECT_EQ(st1[1], st3[1]);
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, ScratchTest,
                         ::testing::Values(ZRT_F32, ZRT_BF16, ZRT_F16),
                         [](const auto &info) {
                           return std::string(dtypeName(info.param));
                         });

} // namespace

// An offloaded optimizer's streamed gradient copies (stage 2, 10 elements
// over 2 ranks): a layout range copies this rank's owned part of it from the
// front of its grads shard to the same place in host_grads; a range this
// rank owns nothing of copies nothing but still completes at its wait.
TEST(OffloadTransferTest, RangesCopyTheOwnedPart) {
  zrt::Manifest manifest;
  manifest.stage = 2;
  manifest.accumulationSteps = 2;
  zrt::PartitionInfo part;
  part.name = "flat";
  part.numel = part.paddedNumel = 10;
  part.shardNumel = 5;
  part.offsets.fill(-1);
  for (zrt::BufferKind kind : {zrt::kGrads, zrt::kHostGrads}) {
    part.present[kind] = true;
    part.offsets[kind] = 0;
    part.counts[kind] = 5;
  }
  part.onHost[zrt::kHostGrads] = true;
  manifest.partitions.push_back(part);
  std::vector<float> grads = {5, 6, 7, 8, 9}, host(5, 0.0f);
  zrt_ctx ctx;
  ctx.manifest = &manifest;
  ctx.rank = 1;
  ctx.world = 2;
  ctx.persistent = reinterpret_cast<char *>(grads.data());
  ctx.host = reinterpret_cast<char *>(host.data());
  // Rank 1 owns [5, 10): of [3, 7) elements 5 and 6, the shard's first two.
  zrt_ctx_transfer(&ctx, 0, zrt::kGrads, zrt::kHostGrads, 3, 7, -1);
  EXPECT_EQ(host, (std::vector<float>{5, 6, 0, 0, 0}));
  zrt_ctx_transfer(&ctx, 0, zrt::kGrads, zrt::kHostGrads, 0, 4, 0);
  zrt_ctx_wait(&ctx, 0);
  EXPECT_EQ(host, (std::vector<float>{5, 6, 0, 0, 0}));
  zrt_ctx_transfer(&ctx, 0, zrt::kGrads, zrt::kHostGrads, 7, 10, 1);
  zrt_ctx_wait(&ctx, 1);
  EXPECT_EQ(host, (std::vector<float>{5, 6, 7, 8, 9}));
  // The whole layout: the whole owned part.
  std::fill(host.begin(), host.end(), 0.0f);
  zrt_ctx_transfer(&ctx, 0, zrt::kGrads, zrt::kHostGrads, 0, 10, -1);
  EXPECT_EQ(host, grads);
  EXPECT_EQ(ctx.liveSlots, 0);
  // The flag of the last micro step.
  ctx.micro = 0;
  EXPECT_EQ(zrt_ctx_last_micro_step(&ctx), 0);
  ctx.micro = 1;
  EXPECT_EQ(zrt_ctx_last_micro_step(&ctx), 1);
  EXPECT_DEATH(
      zrt_ctx_transfer(&ctx, 0, zrt::kGrads, zrt::kHostGrads, 8, 12, -1),
      "range \\[8, 12\\) outside partition 'flat'");
}

// Partitions of one program compute in their own dtypes: a group's
// gradients are read, summed and moved in its dtype. An fp32 value whose low
// half is a bf16 infinity (0x3f807f80, 1.0039) is finite; the bf16 group's
// infinity is found after the fp32 group's check, into the same stats.
TEST(MixedComputeDtypeTest, EachPartitionInItsOwnDtype) {
  zrt::Manifest manifest;
  manifest.stage = 0;
  auto group = [&](const char *name, int32_t dtype, int64_t offset) {
    zrt::PartitionInfo part;
    part.name = name;
    part.numel = part.paddedNumel = part.shardNumel = 4;
    part.computeDtype = dtype;
    part.computeBytes = zrt_dtype_size(dtype);
    part.offsets.fill(-1);
    part.present[zrt::kGrads] = true;
    part.offsets[zrt::kGrads] = offset;
    part.counts[zrt::kGrads] = 4;
    manifest.partitions.push_back(part);
  };
  group("fp32", ZRT_F32, 0);
  group("bf16", ZRT_BF16, 16);
  alignas(64) unsigned char arena[24] = {};
  const uint32_t f32[4] = {0x3f807f80u, 0x40000000u, 0, 0}; // 1.0039, 2
  const uint16_t bf16[4] = {0x3f80, 0x4000, 0x3f00, 0};     // 1, 2, 0.5, 0
  std::memcpy(arena, f32, sizeof(f32));
  std::memcpy(arena + 16, bf16, sizeof(bf16));
  zrt_ctx ctx;
  ctx.manifest = &manifest;
  ctx.persistent = reinterpret_cast<char *>(arena);
  float scale = 1.0f, stats[2] = {-1, -1};
  auto check = [&] {
    zrt_ctx_check_overflow(&ctx, 0, 1, &scale, 1.0, stats);
    zrt_ctx_check_overflow(&ctx, 1, 0, &scale, 1.0, stats);
  };
  check();
  float v0;
  std::memcpy(&v0, &f32[0], 4);
  EXPECT_EQ(stats[0], 0.0f);
  EXPECT_FLOAT_EQ(stats[1], v0 * v0 + 4.0f + 1.0f + 4.0f + 0.25f);
  const uint16_t inf = 0x7f80;
  std::memcpy(arena + 22, &inf, 2);
  check();
  EXPECT_EQ(stats[0], 1.0f);

  // A later micro step adds in bf16; a bucket takes 2-byte elements.
  const uint16_t ones[2] = {0x3f80, 0x3f80};
  ctx.micro = 1;
  zrt_ctx_store_grad(&ctx, 1, 1, ones, 2);
  uint16_t sums[2];
  std::memcpy(sums, arena + 18, 4);
  EXPECT_EQ(sums[0], 0x4040); // 2 + 1 = 3
  EXPECT_EQ(sums[1], 0x3fc0); // 0.5 + 1 = 1.5
  uint16_t bucket[4] = {};
  zrt_ctx_bucket_add(&ctx, 1, bucket, 1, ones, 2);
  EXPECT_EQ(bucket[0], 0);
  EXPECT_EQ(bucket[1], 0x3f80);
  EXPECT_EQ(bucket[2], 0x3f80);
  EXPECT_EQ(bucket[3], 0);
}
