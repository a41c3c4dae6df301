//===- CommTest.cpp - Collectives on 1, 2 and 4 ranks ---------------------===//
//
// Part of the zero-mlir project.
//
// Run directly (a singleton world) and under mpirun. Inputs are small
// integers where the result must be exact (every partial sum is
// representable in bf16 and f16), and random values where only fp32-like
// accuracy per pairwise step can be asked of 16-bit sums.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"
#include "zero_rt/quantize.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

using namespace zrt_test;

namespace {

zrt_comm *world() { return zrt_comm_world(); }
int rank() { return zrt_comm_rank(world()); }
int size() { return zrt_comm_size(world()); }

class CommTest : public ::testing::TestWithParam<int32_t> {
protected:
  int32_t dtype() const { return GetParam(); }
};

TEST_P(CommTest, AllGather) {
  int64_t count = 1001;
  Buffer in(dtype(), count), out(dtype(), count * size());
  for (int64_t i = 0; i < count; ++i)
    in.set(i, rank() * 8 + i % 8);
  zrt_wait(zrt_all_gather(world(), dtype(), in.data(), out.data(), count));
  for (int r = 0; r < size(); ++r)
    for (int64_t i = 0; i < count; ++i)
      ASSERT_EQ(out.get(r * count + i), r * 8 + i % 8) << r << " " << i;

  // In place: the shard already sits at its slot of the output.
  Buffer full(dtype(), count * size());
  for (int64_t i = 0; i < count; ++i)
    full.set(rank() * count + i, -rank() - 1);
  char *mine = static_cast<char *>(full.data()) +
               rank() * count * zrt_dtype_size(dtype());
  zrt_wait(zrt_all_gather(world(), dtype(), mine, full.data(), count));
  for (int r = 0; r < size(); ++r)
    ASSERT_EQ(full.get(r * count + count - 1), -r - 1);
}

// qwZ's gather: each rank quantizes its own shard into its slot of a
// staging buffer, one all-gather of the 4-byte words moves the quantized
// chunks, and dequantizing them gives every rank the values of quantizing
// the whole gathered buffer chunk by chunk (zero_rt/quantize.h's layout).
TEST_P(CommTest, QuantizedAllGather) {
  const int64_t shard = 3001; // a ragged last block
  const int64_t chunkBytes = zrt_quant_bytes(shard, 8);
  ASSERT_EQ(chunkBytes % 4, 0);
  Buffer full(dtype(), shard * size());
  for (int64_t i = 0; i < shard * size(); ++i)
    full.set(i, std::sin(double(i)) * (1 + i / shard));
  const char *mine = static_cast<const char *>(full.data()) +
                     rank() * shard * zrt_dtype_size(dtype());
  std::vector<uint8_t> staging(size_t(chunkBytes * size()));
  uint8_t *slot = staging.data() + rank() * chunkBytes;
  zrt_quantize(dtype(), mine, shard, 1, 8, slot);
  zrt_wait(
      zrt_all_gather(world(), ZRT_F32, slot, staging.data(), chunkBytes / 4));
  std::vector<uint8_t> want(staging.size());
  zrt_quantize(dtype(), full.data(), shard, size(), 8, want.data());
  ASSERT_EQ(staging, want);
  Buffer got(dtype(), shard * size()), local(dtype(), shard * size());
  zrt_dequantize(dtype(), staging.data(), shard, size(), 8, got.data());
  zrt_dequantize(dtype(), want.data(), shard, size(), 8, local.data());
  ASSERT_EQ(std::memcmp(got.data(), local.data(),
                        size_t(shard * size() * zrt_dtype_size(dtype()))),
            0);
  // Within half a quantization step (and the rounding to the dtype).
  for (int64_t i = 0; i < shard * size(); ++i)
    ASSERT_NEAR(got.get(i), full.get(i),
                (1 + i / shard) / 127.0 * 0.5 + 0.01 * (1 + i / shard))
        << i;
}

TEST_P(CommTest, ReduceScatter) {
  int64_t count = 777;
  Buffer in(dtype(), count * size()), out(dtype(), count);
  for (int64_t i = 0; i < count * size(); ++i)
    in.set(i, (rank() + 1) * (1 + i % 5));
  zrt_wait(zrt_reduce_scatter(world(), dtype(), in.data(), out.data(), count));
  double ranks = size() * (size() + 1) / 2.0;
  for (int64_t i = 0; i < count; ++i)
    ASSERT_EQ(out.get(i), ranks * (1 + (rank() * count + i) % 5)) << i;
}

TEST_P(CommTest, ReduceToEachRoot) {
  int64_t count = 300;
  for (int root = 0; root < size(); ++root) {
    Buffer in(dtype(), count), out(dtype(), count);
    for (int64_t i = 0; i < count; ++i)
      in.set(i, rank() + i % 3);
    zrt_wait(zrt_reduce(world(), dtype(), in.data(),
                        rank() == root ? out.data() : nullptr, count, root));
    if (rank() == root) {
      for (int64_t i = 0; i < count; ++i)
        ASSERT_EQ(out.get(i), size() * (size() - 1) / 2.0 + size() * (i % 3));
    }
    // In place at the root.
    zrt_wait(zrt_reduce(world(), dtype(), in.data(), in.data(), count, root));
    if (rank() == root) {
      ASSERT_EQ(in.get(4), size() * (size() - 1) / 2.0 + size() * 1.0);
    }
  }
}

TEST_P(CommTest, AllReduceSumAndMax) {
  int64_t count = 2049;
  Buffer in(dtype(), count), sum(dtype(), count), max(dtype(), count);
  for (int64_t i = 0; i < count; ++i)
    in.set(i, (i % 2 ? 1 : -1) * (rank() + 1) * (i % 7));
  zrt_wait(
      zrt_all_reduce(world(), dtype(), ZRT_SUM, in.data(), sum.data(), count));
  zrt_wait(
      zrt_all_reduce(world(), dtype(), ZRT_MAX, in.data(), max.data(), count));
  double ranks = size() * (size() + 1) / 2.0;
  for (int64_t i = 0; i < count; ++i) {
    double sign = i % 2 ? 1 : -1;
    ASSERT_EQ(sum.get(i), sign * ranks * (i % 7)) << i;
    ASSERT_EQ(max.get(i), sign > 0 ? size() * (i % 7) : -1.0 * (i % 7)) << i;
  }
  // In place, as the overflow statistics are reduced.
  zrt_wait(
      zrt_all_reduce(world(), dtype(), ZRT_SUM, in.data(), in.data(), count));
  ASSERT_EQ(in.get(13), ranks * 6);
}

TEST_P(CommTest, SixteenBitSumsAreAccurate) {
  // Random values: each pairwise step rounds once, so the error is at most
  // about (size - 1) roundings of partial sums.
  int64_t count = 5000;
  std::mt19937 rng(17);
  std::vector<std::vector<double>> all;
  for (int r = 0; r < size(); ++r)
    all.push_back(randomValues(rng, count));
  Buffer in(dtype(), all[rank()]), out(dtype(), count);
  zrt_wait(
      zrt_all_reduce(world(), dtype(), ZRT_SUM, in.data(), out.data(), count));
  for (int64_t i = 0; i < count; ++i) {
    double want = 0, mag = 0;
    for (int r = 0; r < size(); ++r) {
      double v = roundTo(dtype(), all[r][i]);
      want += v;
      mag += std::fabs(v);
    }
    ASSERT_NEAR(out.get(i), want, size() * unitRoundoff(dtype()) * mag) << i;
  }
}

TEST_P(CommTest, OverlappingOperations) {
  int64_t count = 4096;
  Buffer shard(dtype(), count), gathered(dtype(), count * size());
  Buffer bucket(dtype(), count * size()), mine(dtype(), count);
  Buffer stats(ZRT_F32, 2), statsOut(ZRT_F32, 2);
  for (int64_t i = 0; i < count; ++i)
    shard.set(i, rank() + 1);
  for (int64_t i = 0; i < count * size(); ++i)
    bucket.set(i, i % 4);
  stats.set(0, rank() == 0 ? 1 : 0);
  stats.set(1, 2);
  int64_t a =
      zrt_all_gather(world(), dtype(), shard.data(), gathered.data(), count);
  int64_t b =
      zrt_reduce_scatter(world(), dtype(), bucket.data(), mine.data(), count);
  int64_t c = zrt_all_reduce(world(), ZRT_F32, ZRT_MAX, stats.data(),
                             statsOut.data(), 2);
  EXPECT_NE(a, b);
  EXPECT_NE(b, c);
  zrt_progress();
  zrt_wait(c);
  zrt_wait(a);
  zrt_wait(b);
  EXPECT_EQ(statsOut.get(0), 1.0);
  EXPECT_EQ(statsOut.get(1), 2.0);
  for (int r = 0; r < size(); ++r)
    ASSERT_EQ(gathered.get(r * count + 5), r + 1);
  for (int64_t i = 0; i < count; ++i)
    ASSERT_EQ(mine.get(i), size() * ((rank() * count + i) % 4));

  // zrt_wait_all completes whatever is outstanding; tokens are reused.
  zrt_all_reduce(world(), dtype(), ZRT_SUM, shard.data(), mine.data(), count);
  zrt_all_gather(world(), dtype(), shard.data(), gathered.data(), count);
  zrt_wait_all();
  ASSERT_EQ(mine.get(7), size() * (size() + 1) / 2.0);
}

// zrt_all_to_all (zero.all_to_all's exchange): each rank splits its tensor
// along one dimension into P chunks, sends chunk j to rank j and
// concatenates what it receives in rank order along another, packing and
// unpacking scattered chunks through the staging. Checked element by
// element against the reference below, for several split and concat
// dimensions (the same one included) and sizes; the values are integers
// below 256, exact in every dtype.
TEST_P(CommTest, AllToAll) {
  const int64_t p = size(), me = rank();
  struct Case {
    std::vector<int64_t> shape;
    int64_t split, concat;
  };
  const std::vector<Case> cases = {
      {{2, 2 * p, 3, 5}, 1, 2},   // scattered both ways
      {{3, 2 * p, 4}, 1, 0},      // contiguous result chunks
      {{3 * p, 5}, 0, 1},         // contiguous input chunks
      {{2, 4 * p, 3}, 1, 1},      // the same dimension: a permutation
      {{4, 64 * p, 8, 16}, 1, 2}, // Ulysses' sequence to heads, larger
      {{4, 64, 8 * p, 16}, 2, 1}, // and back
  };
  auto value = [](int64_t r, int64_t flat) {
    return double((r * 61 + flat * 7) % 256);
  };
  for (const Case &c : cases) {
    const std::vector<int64_t> &in = c.shape;
    int64_t dims = int64_t(in.size()), numel = 1;
    for (int64_t d : in)
      numel *= d;
    std::vector<int64_t> chunk = in, out = in;
    chunk[size_t(c.split)] /= p;
    out[size_t(c.split)] /= p;
    out[size_t(c.concat)] *= p;
    auto view = [&](const std::vector<int64_t> &shape, int64_t dim) {
      int64_t outer = 1, inner = chunk[size_t(dim)];
      for (int64_t d = 0; d < dim; ++d)
        outer *= shape[size_t(d)];
      for (int64_t d = dim + 1; d < dims; ++d)
        inner *= shape[size_t(d)];
      return std::pair<int64_t, int64_t>{outer, inner};
    };
    auto [splitOuter, splitInner] = view(in, c.split);
    auto [concatOuter, concatInner] = view(out, c.concat);
    Buffer x(dtype(), numel), y(dtype(), numel), staging(dtype(), 2 * numel);
    for (int64_t i = 0; i < numel; ++i)
      x.set(i, value(me, i));
    zrt_all_to_all(world(), dtype(), x.data(), y.data(), staging.data(),
                   splitOuter, splitInner, concatOuter, concatInner);
    // Output element o came from rank j = o[concat] / chunk[concat], out of
    // its split chunk number `me`.
    std::vector<int64_t> o(size_t(dims), 0);
    for (int64_t flat = 0; flat < numel; ++flat) {
      int64_t rest = flat;
      for (int64_t d = dims - 1; d >= 0; --d) {
        o[size_t(d)] = rest % out[size_t(d)];
        rest /= out[size_t(d)];
      }
      std::vector<int64_t> i = o;
      int64_t j = o[size_t(c.concat)] / chunk[size_t(c.concat)];
      i[size_t(c.concat)] = o[size_t(c.concat)] % chunk[size_t(c.concat)];
      i[size_t(c.split)] += me * chunk[size_t(c.split)];
      int64_t src = 0;
      for (int64_t d = 0; d < dims; ++d)
        src = src * in[size_t(d)] + i[size_t(d)];
      ASSERT_EQ(y.get(flat), value(j, src))
          << "split " << c.split << " concat " << c.concat << " element "
          << flat << " of " << numel;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, CommTest,
                         ::testing::Values(ZRT_F32, ZRT_BF16, ZRT_F16),
                         [](const auto &info) {
                           return std::string(dtypeName(info.param));
                         });

} // namespace

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  zrt_comm *comm = zrt_comm_world();
  std::string banner =
      "zrt-comm-test: " + std::to_string(zrt_comm_size(comm)) + " rank(s)";
  return zrt_test::runOnRanks(comm, banner);
}
