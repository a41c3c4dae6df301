//===- MoeExchangeTest.cpp - Expert-parallel row exchanges ----------------===//
//
// Part of the zero-mlir project.
//
// Run under mpirun as `K P [strided|overflow]` (ranks per node,
// expert-parallel size, strided expert sets rather than consecutive ones):
// zrt_ctx_moe_exchange and zrt_ctx_moe_return over the expert sets of the
// world, on routings every rank can rebuild for every rank (seeded
// by rank), so each rank computes what it must receive directly, with no
// communication, and compares. Rows hold small integers, exact in bf16.
// `overflow` routes every row to expert 0 with a capacity of one rank's
// rows and no drops: every rank must stop with the message (ctest checks
// the output and the exit status).
//
//===----------------------------------------------------------------------===//

#include "Collectives/MoeExchange.h"
#include "Collectives/Groups.h"
#include "Program/Manifest.h"
#include "TestUtil.h"

#include "zero_rt/program.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

using namespace zrt_test;

namespace {

int64_t ranksPerNode = 0, expertParallel = 1;
int32_t expertPlacement = ZRT_EXPERT_CONTIGUOUS;

zrt_comm *world() { return zrt_comm_world(); }

/// How a rank routes its rows.
enum class Routing {
  Random,      // each row to a random expert
  OneExpert,   // every row of every rank to the last expert
  ByRank,      // every row of rank r to expert r % E
  FirstMember, // every row to the experts of member 0
};

constexpr int64_t kRows = 12;

/// One rank's dispatch: its rows sorted by expert (stably), their
/// cumulative ends per expert, and the rows' values.
struct Dispatch {
  std::vector<int32_t> offsets;
  std::vector<int64_t> counts;
  std::vector<float> rows;
};

Dispatch dispatchOf(int64_t rank, int64_t experts, int64_t width,
                    Routing routing, unsigned seed) {
  std::mt19937 gen(seed * 1000 + unsigned(rank));
  std::vector<int64_t> expert(static_cast<size_t>(kRows));
  for (int64_t i = 0; i < kRows; ++i) {
    switch (routing) {
    case Routing::Random:
      expert[size_t(i)] = int64_t(gen() % uint32_t(experts));
      break;
    case Routing::OneExpert:
      expert[size_t(i)] = experts - 1;
      break;
    case Routing::ByRank:
      expert[size_t(i)] = rank % experts;
      break;
    case Routing::FirstMember:
      expert[size_t(i)] = int64_t(gen() % uint32_t(experts / expertParallel));
      break;
    }
  }
  std::stable_sort(expert.begin(), expert.end());
  Dispatch d;
  d.counts.assign(size_t(experts), 0);
  for (int64_t e : expert)
    ++d.counts[size_t(e)];
  int32_t at = 0;
  for (int64_t e = 0; e < experts; ++e)
    d.offsets.push_back(at += int32_t(d.counts[size_t(e)]));
  for (int64_t i = 0; i < kRows; ++i)
    for (int64_t c = 0; c < width; ++c)
      d.rows.push_back(c == 0   ? float(rank + 1)
                       : c == 1 ? float(i + 1)
                       : c == 2 ? float(expert[size_t(i)] + 1)
                                : float((i * 7 + rank + c) % 13));
  return d;
}

/// Values in `dtype` (bf16: rounded; the test's values are exact).
std::vector<char> toBytes(const std::vector<float> &v, int32_t dtype) {
  std::vector<char> out(v.size() * size_t(zrt_dtype_size(dtype)));
  for (size_t i = 0; i < v.size(); ++i) {
    if (dtype == ZRT_F32) {
      std::memcpy(out.data() + 4 * i, &v[i], 4);
    } else {
      uint16_t b = zrt_f32_to_bf16(v[i]);
      std::memcpy(out.data() + 2 * i, &b, 2);
    }
  }
  return out;
}

std::vector<float> toFloats(const std::vector<char> &b, int32_t dtype) {
  size_t size = size_t(zrt_dtype_size(dtype));
  std::vector<float> out(b.size() / size);
  for (size_t i = 0; i < out.size(); ++i) {
    if (dtype == ZRT_F32) {
      std::memcpy(&out[i], b.data() + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, b.data() + 2 * i, 2);
      out[i] = zrt_bf16_to_f32(h);
    }
  }
  return out;
}

/// The rows member q of this rank's expert set keeps of source s for its
/// local expert l, [l][s], by the definition: (local expert, source) order,
/// up to cap when dropping.
std::vector<std::vector<int64_t>> keptAt(const std::vector<Dispatch> &set,
                                         int64_t q, int64_t el, int64_t cap,
                                         bool drop) {
  int64_t p = int64_t(set.size()), used = 0;
  std::vector<std::vector<int64_t>> kept(
      static_cast<size_t>(el), std::vector<int64_t>(static_cast<size_t>(p)));
  for (int64_t l = 0; l < el; ++l)
    for (int64_t s = 0; s < p; ++s) {
      int64_t c = set[size_t(s)].counts[size_t(q * el + l)];
      int64_t k = drop ? std::max<int64_t>(0, std::min(c, cap - used)) : c;
      kept[size_t(l)][size_t(s)] = k;
      used += k;
    }
  return kept;
}

int64_t nodeOf(int64_t rank) {
  return ranksPerNode > 0 ? rank / ranksPerNode : 0;
}

struct Case {
  int32_t dtype;
  Routing routing;
  int64_t width;
  /// The capacity in rows (0: the dropless bound P * n) and drops.
  int64_t cap;
  bool drop;
};

class MoeExchangeTest : public ::testing::TestWithParam<Case> {};

TEST_P(MoeExchangeTest, MovesTheRowsTheCountsSay) {
  const Case &c = GetParam();
  int64_t p = expertParallel, experts = 2 * p, el = 2;
  int64_t rank = zrt_comm_rank(world());
  zrt_mesh mesh;
  zrt_mesh_from_sizes(&mesh, zrt_comm_size(world()), 1, 0, 1, p,
                      expertPlacement);
  zrt_rank_set members = zrt_rank_set_of(ZRT_RANKS_EXPERT, rank, &mesh);
  int64_t first = members.first, stride = members.stride;
  int64_t me = (rank - first) / stride;
  int64_t cap = c.cap ? c.cap : p * kRows;
  int64_t rowBytes = c.width * zrt_dtype_size(c.dtype);
  for (unsigned seed = 1; seed <= 3; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::vector<Dispatch> set;
    for (int64_t s = 0; s < p; ++s)
      set.push_back(
          dispatchOf(first + s * stride, experts, c.width, c.routing, seed));
    const Dispatch &mine = set[size_t(me)];
    std::vector<char> rows = toBytes(mine.rows, c.dtype);

    zrt_ctx ctx;
    ctx.comm = world();
    ctx.rank = int(rank);
    ctx.world = zrt_comm_size(world());
    ctx.stepIndex = 3;
    zrt::resetCommCounters();
    std::vector<char> recv(size_t(cap * rowBytes), char(0x7f));
    std::vector<int32_t> counts(size_t(p * el), -1), ends(size_t(el), -1);
    zrt_ctx_moe_exchange(&ctx, c.dtype, rows.data(), kRows, c.width,
                         mine.offsets.data(), experts, recv.data(), cap,
                         counts.data(), ends.data(), 0, 5, c.drop ? 1 : 0, -1);

    // The counts and the layout, from the definition.
    std::vector<std::vector<int64_t>> kept = keptAt(set, me, el, cap, c.drop);
    std::vector<float> want(size_t(cap * c.width), 0.0f);
    int64_t used = 0, dropped = 0, most = 0;
    for (int64_t l = 0; l < el; ++l) {
      int64_t routed = 0;
      for (int64_t s = 0; s < p; ++s) {
        const Dispatch &d = set[size_t(s)];
        int64_t e = me * el + l, k = kept[size_t(l)][size_t(s)];
        int64_t start = e ? d.offsets[size_t(e - 1)] : 0;
        EXPECT_EQ(counts[size_t(s * el + l)], k)
            << "member " << s << " expert " << l;
        std::copy(d.rows.begin() + start * c.width,
                  d.rows.begin() + (start + k) * c.width,
                  want.begin() + used * c.width);
        used += k;
        routed += d.counts[size_t(e)];
        dropped += d.counts[size_t(e)] - k;
      }
      most = std::max(most, routed);
      EXPECT_EQ(ends[size_t(l)], used) << "local expert " << l;
    }
    EXPECT_EQ(toFloats(recv, c.dtype), want);
    EXPECT_EQ(ctx.moeDroppedRows, dropped);
    EXPECT_EQ(ctx.moeMaxExpertRows, most);
    EXPECT_TRUE(ctx.moeExchanged);
    if (c.cap && c.routing != Routing::Random) {
      // Every member of the set drops, or some member does.
      int64_t setDropped = 0;
      for (int64_t q = 0; q < p; ++q) {
        std::vector<std::vector<int64_t>> at = keptAt(set, q, el, cap, true);
        for (int64_t l = 0; l < el; ++l)
          for (int64_t s = 0; s < p; ++s)
            setDropped += set[size_t(s)].counts[size_t(q * el + l)] -
                          at[size_t(l)][size_t(s)];
      }
      EXPECT_GT(setDropped, 0) << "a case meant to drop rows drops none";
    }

    // The bytes actually sent: the kept rows to every other member.
    zrt::LinkBytes sent;
    for (int64_t q = 0; q < p; ++q) {
      if (q == me)
        continue;
      std::vector<std::vector<int64_t>> at = keptAt(set, q, el, cap, c.drop);
      for (int64_t l = 0; l < el; ++l)
        (nodeOf(first + q * stride) == nodeOf(rank) ? sent.intraNode
                                                    : sent.interNode) +=
            at[size_t(l)][size_t(me)] * rowBytes;
    }
    const zrt::LinkBytes &counted = zrt::commCounters()[zrt::kAllToAll];
    EXPECT_EQ(counted.intraNode, sent.intraNode);
    EXPECT_EQ(counted.interNode, sent.interNode);

    // The return lands every kept row where it was, dropped rows as zeros.
    std::vector<char> back(rows.size(), char(0x7f));
    zrt_ctx_moe_return(&ctx, c.dtype, recv.data(), cap, c.width, counts.data(),
                       ends.data(), mine.offsets.data(), experts, back.data(),
                       kRows, -1);
    std::vector<float> wantBack(mine.rows.size(), 0.0f);
    for (int64_t e = 0; e < experts; ++e) {
      int64_t q = e / el, l = e % el;
      int64_t k = keptAt(set, q, el, cap, c.drop)[size_t(l)][size_t(me)];
      int64_t start = e ? mine.offsets[size_t(e - 1)] : 0;
      std::copy(mine.rows.begin() + start * c.width,
                mine.rows.begin() + (start + k) * c.width,
                wantBack.begin() + start * c.width);
    }
    EXPECT_EQ(toFloats(back, c.dtype), wantBack);
    if (!c.drop) {
      EXPECT_EQ(back, rows) << "exchange then return is not the identity";
    }

    // The backward's exchange reuses the counts: the same movement.
    // (The same counts tensor: what other members kept of this rank's rows
    // is remembered by it.)
    std::vector<char> again(recv.size(), char(0x11));
    std::vector<int32_t> countsBefore = counts, endsBefore = ends;
    zrt_ctx_moe_exchange(&ctx, c.dtype, rows.data(), kRows, c.width,
                         mine.offsets.data(), experts, again.data(), cap,
                         counts.data(), ends.data(), 1, 5, c.drop ? 1 : 0, -1);
    EXPECT_EQ(again, recv);
    EXPECT_EQ(counts, countsBefore);
    EXPECT_EQ(ends, endsBefore);
    EXPECT_EQ(ctx.moeDroppedRows, dropped) << "a reused count counted again";
  }
}

/// The layout computation alone, on a hand-checked case: two members, two
/// local experts each, member 1 sending 3 rows to expert 1 and member 0 one,
/// a capacity of 3 at member 0.
TEST(MoeExchangePlanTest, KeepsTheFirstRowsInExpertThenSourceOrder) {
  // routed[s * E + e]
  std::vector<int64_t> routed = {2, 1, 0, 1, /* member 1 */ 0, 3, 1, 0};
  zrt::MoeExchangePlan plan = zrt::planMoeExchange(2, 0, 4, 3, true, routed);
  // Member 0 receives expert 0: 2 (from 0) + 0; expert 1: 1 (from 0) + 3
  // (from 1), of which the capacity keeps 1 and 0.
  EXPECT_EQ(plan.route.recvKept, (std::vector<int64_t>{2, 1, 0, 0}));
  EXPECT_EQ(plan.route.recvStart, (std::vector<int64_t>{0, 2, 2, 3}));
  EXPECT_EQ(plan.route.recvRows, 3);
  EXPECT_EQ(plan.dropped, 3);
  EXPECT_EQ(plan.maxExpertRows, 4);
  EXPECT_EQ(plan.arriving, (std::vector<int64_t>{6, 2}));
  EXPECT_EQ(plan.overflowMember, 0);
  // Its own rows: experts 0-1 kept at member 0, 2-3 at member 1.
  EXPECT_EQ(plan.route.sendKept, (std::vector<int64_t>{2, 1, 0, 1}));
  EXPECT_EQ(plan.route.sendStart, (std::vector<int64_t>{0, 2, 3, 3}));
  zrt::MoeExchangePlan one = zrt::planMoeExchange(2, 1, 4, 3, true, routed);
  EXPECT_EQ(one.route.sendKept, (std::vector<int64_t>{0, 0, 1, 0}));
  EXPECT_EQ(one.dropped, 0);
  // Without drops every row is kept and the overflow named.
  zrt::MoeExchangePlan all = zrt::planMoeExchange(2, 0, 4, 3, false, routed);
  EXPECT_EQ(all.route.recvRows, 6);
  EXPECT_EQ(all.overflowMember, 0);
  std::vector<int64_t> counts;
  const int32_t bad[2] = {3, 2};
  EXPECT_FALSE(zrt::moeCountsOf(bad, 2, 4, counts).empty());
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (int32_t dtype : {ZRT_F32, ZRT_BF16})
    for (Routing r : {Routing::Random, Routing::OneExpert, Routing::ByRank,
                      Routing::FirstMember}) {
      out.push_back({dtype, r, 3, 0, false});
      out.push_back({dtype, r, 5, 0, true});
      // A capacity of half a rank's rows.
      out.push_back({dtype, r, 4, kRows / 2, true});
    }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Routings, MoeExchangeTest,
                         ::testing::ValuesIn(cases()), [](const auto &info) {
                           const Case &c = info.param;
                           const char *routing =
                               c.routing == Routing::Random      ? "random"
                               : c.routing == Routing::OneExpert ? "one_expert"
                               : c.routing == Routing::ByRank    ? "by_rank"
                                                              : "first_member";
                           return std::string(routing) + "_" +
                                  dtypeName(c.dtype) + "_w" +
                                  std::to_string(c.width) +
                                  (c.cap ? "_cap" : "") +
                                  (c.drop ? "_drop" : "");
                         });

/// Every row to expert 0, more than its capacity, no drops: stops.
int overflow() {
  int64_t p = expertParallel, experts = 2 * p, width = 3;
  zrt_ctx ctx;
  ctx.comm = world();
  ctx.rank = zrt_comm_rank(world());
  ctx.world = zrt_comm_size(world());
  ctx.stepIndex = 4;
  std::vector<int32_t> offsets(static_cast<size_t>(experts), int32_t(kRows));
  std::vector<float> rows(size_t(kRows * width), 1.0f), recv(rows.size());
  std::vector<int32_t> counts(size_t(2 * p)), ends(2);
  zrt_ctx_moe_exchange(&ctx, ZRT_F32, rows.data(), kRows, width, offsets.data(),
                       experts, recv.data(), kRows, counts.data(), ends.data(),
                       0, 7, 0, -1);
  std::printf("zrt-moe-exchange-test: rank %d went past the overflow\n",
              ctx.rank);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc != 3 && argc != 4) {
    std::fprintf(stderr, "usage: %s K P [strided|overflow]\n", argv[0]);
    return 2;
  }
  ranksPerNode = std::atoll(argv[1]);
  expertParallel = std::atoll(argv[2]);
  bool strided = argc == 4 && std::string(argv[3]) == "strided";
  if (strided)
    expertPlacement = ZRT_EXPERT_STRIDED;
  zrt_comm *comm = zrt_comm_world();
  zrt_mesh mesh;
  if (zrt_mesh_from_sizes(&mesh, zrt_comm_size(comm), 1, 0, 1, expertParallel,
                          expertPlacement)) {
    std::fprintf(stderr, "P must divide the world size\n");
    return 2;
  }
  zrt::setTopology(comm, ranksPerNode, mesh);
  if (argc == 4 && !strided) {
    int code = overflow();
    zrt_finalize();
    return code;
  }
  return runOnRanks(
      comm, "zrt-moe-exchange-test: " + std::to_string(zrt_comm_size(comm)) +
                " rank(s), expert parallel " + std::to_string(expertParallel));
}
