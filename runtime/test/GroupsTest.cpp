//===- GroupsTest.cpp - Collectives over rank sets and nodes --------------===//
//
// Part of the zero-mlir project.
//
// Run under mpirun with a topology on the command line, `K H M [S [E [X]]]`
// (ranks per node, hpZ group size, MiCS shard size, sequence- and
// expert-parallel sizes, the expert placement: 0 contiguous, 1 strided;
// setTopology's arguments), so that
// the Groups of every kind run in one or two levels. Each collective runs
// over every kind's Group with uneven per-member counts (the last members
// own little or nothing) on small integers, whose sums are exact in every
// dtype: the results must be those of the definition, whatever the levels.
// The counters must hold topology.h's bytes.
//
//===----------------------------------------------------------------------===//

#include "Collectives/Groups.h"
#include "TestUtil.h"

#include <sys/uio.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

using namespace zrt_test;
using zrt::Group;

namespace {

zrt_comm *world() { return zrt_comm_world(); }

int64_t topologyArgs[6] = {0, 1, 0, 1, 1, ZRT_EXPERT_CONTIGUOUS};
/// The mesh of topologyArgs' sizes.
zrt_mesh mesh = {};

struct Case {
  int32_t dtype;
  int32_t kind;
};

class GroupsTest : public ::testing::TestWithParam<Case> {
protected:
  int32_t dtype() const { return GetParam().dtype; }
  Group &group() const { return zrt::groupOf(world(), GetParam().kind); }
};

/// Uneven segments: member m owns 3 + 2m elements, the last one none.
void segments(const Group &g, std::vector<int> &counts,
              std::vector<int> &displs) {
  counts.clear();
  displs.clear();
  int at = 0;
  for (int m = 0; m < g.size(); ++m) {
    int c = m + 1 == g.size() && g.size() > 1 ? 0 : 3 + 2 * m;
    counts.push_back(c);
    displs.push_back(at);
    at += c;
  }
}

volatile int64_t peerWord = 0x5ee;

/// Whether the group's reduce-scatters should read the members' buffers
/// directly: one level, several members, not turned off, and every member
/// able to read every other's memory, which this checks on its own (a
/// host may refuse cross-memory reads; the runtime then uses Open MPI).
bool expectDirect(const Group &g) {
  const char *path = std::getenv("ZRT_REDUCE_SCATTER");
  if (g.twoLevel() || g.size() < 2 || (path && std::string(path) == "mpi"))
    return false;
  int64_t mine[2] = {int64_t(getpid()),
                     int64_t(reinterpret_cast<uintptr_t>(&peerWord))};
  std::vector<int64_t> all(size_t(2 * g.size()));
  MPI_Allgather(mine, 2, MPI_INT64_T, all.data(), 2, MPI_INT64_T,
                g.members->comm);
  int ok = 1;
  for (int q = 0; q < g.size(); ++q) {
    int64_t seen = 0;
    iovec local{&seen, sizeof seen};
    iovec remote{reinterpret_cast<void *>(all[size_t(2 * q + 1)]), sizeof seen};
    if (q != g.me &&
        (process_vm_readv(pid_t(all[size_t(2 * q)]), &local, 1, &remote, 1,
                          0) != ssize_t(sizeof seen) ||
         seen != 0x5ee))
      ok = 0;
  }
  MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, g.members->comm);
  return ok != 0;
}

int total(const std::vector<int> &counts) {
  int t = 0;
  for (int c : counts)
    t += c;
  return t;
}

/// `segments` of g, and a buffer over them whose element i of member m's
/// segment is value(m, i).
template <typename Value>
Buffer segmentBuffer(const Group &g, int32_t dtype, std::vector<int> &counts,
                     std::vector<int> &displs, Value value) {
  segments(g, counts, displs);
  Buffer buf(dtype, total(counts));
  for (int m = 0; m < g.size(); ++m)
    for (int i = 0; i < counts[m]; ++i)
      buf.set(displs[m] + i, value(m, i));
  return buf;
}

TEST_P(GroupsTest, KnowsItsMembers) {
  const Group &g = group();
  zrt_rank_set want =
      zrt_rank_set_of(GetParam().kind, zrt_comm_rank(world()), &mesh);
  EXPECT_EQ(g.set.first, want.first);
  EXPECT_EQ(g.set.stride, want.stride);
  EXPECT_EQ(g.set.size, want.size);
  EXPECT_EQ(g.rankOf(g.me), zrt_comm_rank(world()));
  // The members in member order, as the world ranks see them.
  std::vector<int> ranks(size_t(g.size()));
  int mine = zrt_comm_rank(world());
  MPI_Allgather(&mine, 1, MPI_INT, ranks.data(), 1, MPI_INT, g.members->comm);
  for (int m = 0; m < g.size(); ++m)
    EXPECT_EQ(ranks[size_t(m)], g.rankOf(m));
  EXPECT_EQ(g.membersPerNode, zrt_members_per_node(want, topologyArgs[0]));
  EXPECT_EQ(g.members->size, g.size());
  EXPECT_EQ(g.members->rank, g.me);
  EXPECT_EQ(g.twoLevel(), g.node != nullptr);
  if (g.twoLevel()) {
    EXPECT_EQ(g.node->size, g.membersPerNode);
    EXPECT_EQ(g.node->rank, g.localIndex());
    EXPECT_EQ(g.cross->size, g.nodes());
    EXPECT_EQ(g.cross->rank, g.me / g.membersPerNode);
    // Node: this node's block of members; cross: this local index's
    // members, one per node; the late duplicates alike.
    int q = int(g.membersPerNode), node = g.me / q;
    for (zrt_comm *c : {g.node, g.cross, g.nodeLate, g.crossLate}) {
      std::vector<int> members(size_t(c->size));
      MPI_Allgather(&g.me, 1, MPI_INT, members.data(), 1, MPI_INT, c->comm);
      bool isNode = c == g.node || c == g.nodeLate;
      for (int i = 0; i < c->size; ++i)
        EXPECT_EQ(members[size_t(i)],
                  isNode ? node * q + i : i * q + g.localIndex());
    }
  }
}

TEST_P(GroupsTest, AllGatherInPlace) {
  Group &g = group();
  std::vector<int> counts, displs;
  Buffer buf = segmentBuffer(g, dtype(), counts, displs, [&](int m, int i) {
    return m == g.me ? (m + 1) * 8 + i % 8 : -1;
  });
  for (int64_t t :
       zrt::allGather(g, zrt::kAllGather, dtype(), buf.data(), counts, displs))
    zrt_wait(t);
  for (int m = 0; m < g.size(); ++m)
    for (int i = 0; i < counts[m]; ++i)
      ASSERT_EQ(buf.get(displs[m] + i), (m + 1) * 8 + i % 8) << m << " " << i;
}

TEST_P(GroupsTest, AllGatherFromShard) {
  Group &g = group();
  int64_t count = 1001;
  Buffer shard(dtype(), count), out(dtype(), count * g.size());
  for (int64_t i = 0; i < count; ++i)
    shard.set(i, g.me * 8 + i % 8);
  for (int64_t t : zrt::allGather(g, zrt::kAllGather, dtype(), shard.data(),
                                  out.data(), count))
    zrt_wait(t);
  for (int m = 0; m < g.size(); ++m)
    for (int64_t i = 0; i < count; ++i)
      ASSERT_EQ(out.get(m * count + i), m * 8 + i % 8) << m << " " << i;
}

TEST_P(GroupsTest, ReduceScatterAndToOwners) {
  Group &g = group();
  std::vector<int> counts, displs;
  segments(g, counts, displs);
  double members = g.size() * (g.size() + 1) / 2.0;
  for (bool toOwners : {false, true}) {
    Buffer buf(dtype(), total(counts));
    for (int i = 0; i < total(counts); ++i)
      buf.set(i, (g.me + 1) * (1 + i % 5));
    int64_t sumAt = displs[size_t(g.me)];
    zrt::Tokens tokens =
        toOwners ? zrt::reduceToOwners(g, zrt::kReduce, dtype(), buf.data(),
                                       counts, displs)
                 : zrt::reduceScatter(g, zrt::kReduceScatter, dtype(),
                                      buf.data(), counts, displs, sumAt);
    for (int64_t t : tokens)
      zrt_wait(t);
    for (int i = 0; i < counts[size_t(g.me)]; ++i)
      ASSERT_EQ(buf.get(sumAt + i),
                members * (1 + (displs[size_t(g.me)] + i) % 5))
          << toOwners << " " << i;
  }
}

/// Member m's value at element i: a spread of magnitudes and signs whose
/// sums round differently in every order of the additions.
double unevenValue(int m, int i) {
  int h = (i * 7919 + m * 104729) % 2003;
  return (h - 1001) * (1.0 + 0.37 * m) * (i % 3 == 0 ? 1e-3 : 1.7);
}

// Open MPI's reduce-scatter adds the members' values in a binomial tree
// (member b + s's partial sum into member b's, s = 1, 2, 4, ...), rounding
// each step to the dtype; the direct path, used when every member is on
// this host (ZRT_REDUCE_SCATTER=mpi turns it off), must give the same bits
// and leaves each member's sum in its own segment.
TEST_P(GroupsTest, ReduceScatterAddsInBinomialOrder) {
  Group &g = group();
  if (g.twoLevel())
    GTEST_SKIP() << "two levels reduce within nodes, then across";
  std::vector<int> counts, displs;
  segments(g, counts, displs);
  // Large enough for several chunks of the direct path.
  counts[0] = 40000 + 3;
  for (size_t m = 1; m < counts.size(); ++m)
    displs[m] = displs[m - 1] + counts[m - 1];
  Buffer buf(dtype(), total(counts)), one(dtype(), 1);
  for (int i = 0; i < total(counts); ++i)
    buf.set(i, unevenValue(g.me, i));
  int64_t sumAt = -1;
  for (int64_t t : zrt::reduceScatter(g, zrt::kReduceScatter, dtype(),
                                      buf.data(), counts, displs, sumAt))
    zrt_wait(t);
  bool direct = expectDirect(g);
  ASSERT_EQ(zrt::readsPeersDirectly(g.members), direct);
  EXPECT_EQ(sumAt, direct ? displs[size_t(g.me)] : 0);
  std::vector<double> partial(size_t(g.size()));
  for (int i = 0; i < counts[size_t(g.me)]; ++i) {
    int at = displs[size_t(g.me)] + i;
    for (int m = 0; m < g.size(); ++m) {
      one.set(0, unevenValue(m, at));
      partial[size_t(m)] = one.get(0);
    }
    for (int s = 1; s < g.size(); s *= 2)
      for (int b = 0; b + s < g.size(); b += 2 * s) {
        one.set(0, float(partial[size_t(b)]) + float(partial[size_t(b + s)]));
        partial[size_t(b)] = one.get(0);
      }
    ASSERT_EQ(buf.get(sumAt + i), partial[0]) << i;
  }
}

// The same sums read from pieces stored apart (and the buffer itself
// between them), added to an accumulator: where the direct path is used,
// the bits of reducing the copied buffer in place and adding the sum;
// elsewhere nothing starts and the caller copies.
TEST_P(GroupsTest, ReduceScatterAddReadsPieces) {
  Group &g = group();
  std::vector<int> counts, displs;
  segments(g, counts, displs);
  counts[0] = 20000 + 3;
  for (size_t m = 1; m < counts.size(); ++m)
    displs[m] = displs[m - 1] + counts[m - 1];
  int n = total(counts);
  // Pieces [0, n/3) and [n/2, n) apart, [n/3, n/2) in the buffer.
  Buffer whole(dtype(), n), bucket(dtype(), n), head(dtype(), n / 3),
      tail(dtype(), n - n / 2);
  for (int i = 0; i < n; ++i) {
    whole.set(i, unevenValue(g.me, i));
    bucket.set(i, i < n / 3 || i >= n / 2 ? -7.0 : whole.get(i));
  }
  for (int i = 0; i < n / 3; ++i)
    head.set(i, whole.get(i));
  for (int i = n / 2; i < n; ++i)
    tail.set(i - n / 2, whole.get(i));
  int64_t eb = zrt_dtype_size(dtype());
  std::vector<zrt::BufferPiece> pieces = {
      {0, n / 3, head.data()},
      {n / 3, n / 2 - n / 3, static_cast<char *>(bucket.data()) + (n / 3) * eb},
      {n / 2, n - n / 2, tail.data()}};
  int mine = counts[size_t(g.me)];
  Buffer acc(dtype(), mine), want(dtype(), mine);
  for (int i = 0; i < mine; ++i)
    acc.set(i, 0.25 * (i % 9) - 1);
  zrt::Tokens tokens;
  zrt::resetCommCounters();
  bool started = zrt::reduceScatterAdd(g, zrt::kReduceScatter, dtype(), pieces,
                                       counts, displs, acc.data(), tokens);
  zrt::LinkBytes counted = zrt::commCounters()[zrt::kReduceScatter];
  bool direct = expectDirect(g);
  ASSERT_EQ(started, direct);
  if (!started)
    return;
  for (int64_t t : tokens)
    zrt_wait(t);
  int64_t sumAt;
  zrt::resetCommCounters();
  for (int64_t t : zrt::reduceScatter(g, zrt::kReduceScatter, dtype(),
                                      whole.data(), counts, displs, sumAt))
    zrt_wait(t);
  // The bytes of the reduce-scatter it stands for.
  EXPECT_EQ(counted.intraNode,
            zrt::commCounters()[zrt::kReduceScatter].intraNode);
  EXPECT_EQ(counted.interNode,
            zrt::commCounters()[zrt::kReduceScatter].interNode);
  zrt::resetCommCounters();
  Buffer one(dtype(), 1);
  for (int i = 0; i < mine; ++i) {
    one.set(0, float(0.25 * (i % 9) - 1) + float(whole.get(sumAt + i)));
    ASSERT_EQ(acc.get(i), one.get(0)) << i;
  }
}

TEST_P(GroupsTest, AllReduceAndStats) {
  Group &g = group();
  int64_t count = 1001;
  Buffer sum(dtype(), count), max(dtype(), count);
  for (int64_t i = 0; i < count; ++i) {
    sum.set(i, (g.me + 1) * (1 + i % 3));
    max.set(i, g.me == int(i % g.size()) ? 5 + i % 7 : -3);
  }
  for (int64_t t :
       zrt::allReduce(g, zrt::kAllReduce, dtype(), ZRT_SUM, sum.data(), count))
    zrt_wait(t);
  for (int64_t t :
       zrt::allReduce(g, zrt::kAllReduce, dtype(), ZRT_MAX, max.data(), count))
    zrt_wait(t);
  double members = g.size() * (g.size() + 1) / 2.0;
  for (int64_t i = 0; i < count; ++i) {
    ASSERT_EQ(sum.get(i), members * (1 + i % 3)) << i;
    ASSERT_EQ(max.get(i), 5 + i % 7) << i;
  }
  // The flag by max, the norm by sum.
  float in[2] = {g.me + 1 == g.size() ? 1.0f : 0.0f, float(g.me + 1)}, out[2];
  for (int64_t t : zrt::allReduceStats(g, in, out))
    zrt_wait(t);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], float(members));
}

TEST_P(GroupsTest, CountsBytesByKindAndLevel) {
  Group &g = group();
  std::vector<int> counts, displs;
  Buffer buf = segmentBuffer(g, dtype(), counts, displs,
                             [](int m, int) { return m + 1; });
  zrt::resetCommCounters();
  for (int pass = 0; pass < 2; ++pass)
    for (int64_t t : zrt::allGather(g, zrt::kAllGather, dtype(), buf.data(),
                                    counts, displs))
      zrt_wait(t);
  std::vector<int64_t> bytes;
  for (int c : counts)
    bytes.push_back(int64_t(c) * zrt_dtype_size(dtype()));
  zrt_link_bytes want = zrt_collective_link_bytes(bytes.data(), g.size(),
                                                  g.membersPerNode, g.me, 1);
  const auto &got = zrt::commCounters();
  EXPECT_EQ(got[zrt::kAllGather].intraNode, 2 * want.intra_node);
  EXPECT_EQ(got[zrt::kAllGather].interNode, 2 * want.inter_node);
  EXPECT_EQ(got[zrt::kReduceScatter], zrt::LinkBytes{});
  // Whatever the levels, a member sends every part but its own.
  int64_t others = -bytes[size_t(g.me)];
  for (int64_t b : bytes)
    others += b;
  EXPECT_EQ(want.intra_node + want.inter_node, g.size() > 1 ? others : 0);
  zrt::resetCommCounters();
}

TEST_P(GroupsTest, OverlappingOperations) {
  Group &g = group();
  int64_t count = 4096;
  Buffer shard(dtype(), count), gathered(dtype(), count * g.size());
  Buffer sum(dtype(), count);
  for (int64_t i = 0; i < count; ++i) {
    shard.set(i, g.me + 1);
    sum.set(i, i % 4);
  }
  zrt::Tokens a = zrt::allGather(g, zrt::kAllGather, dtype(), shard.data(),
                                 gathered.data(), count);
  zrt::Tokens b =
      zrt::allReduce(g, zrt::kAllReduce, dtype(), ZRT_SUM, sum.data(), count);
  zrt_progress();
  for (int64_t t : b)
    zrt_wait(t);
  for (int64_t t : a)
    zrt_wait(t);
  for (int m = 0; m < g.size(); ++m)
    ASSERT_EQ(gathered.get(m * count + 5), m + 1);
  for (int64_t i = 0; i < count; ++i)
    ASSERT_EQ(sum.get(i), g.size() * (i % 4));

  // Several chains in flight, waited last first and by zrt_wait_all.
  std::vector<int> counts, displs;
  segments(g, counts, displs);
  Buffer owners(dtype(), total(counts)), again(dtype(), total(counts));
  for (int i = 0; i < total(counts); ++i) {
    owners.set(i, 1 + i % 3);
    again.set(i, 2);
  }
  zrt::Tokens c = zrt::reduceToOwners(g, zrt::kReduce, dtype(), owners.data(),
                                      counts, displs);
  zrt::Tokens d = zrt::allReduce(g, zrt::kAllReduce, dtype(), ZRT_MAX,
                                 again.data(), total(counts));
  zrt::Tokens e = zrt::allGather(g, zrt::kAllGather, dtype(), shard.data(),
                                 gathered.data(), count);
  for (int64_t t : d)
    zrt_wait(t);
  zrt_wait_all();
  for (int i = 0; i < counts[size_t(g.me)]; ++i)
    ASSERT_EQ(owners.get(displs[size_t(g.me)] + i),
              g.size() * (1 + (displs[size_t(g.me)] + i) % 3));
  for (int i = 0; i < total(counts); ++i)
    ASSERT_EQ(again.get(i), 2);
  ASSERT_EQ(gathered.get((g.size() - 1) * count), g.size());
  (void)c;
  (void)e;
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (int32_t kind :
       {ZRT_RANKS_GROUP, ZRT_RANKS_HPZ, ZRT_RANKS_REPLICAS, ZRT_RANKS_WORLD,
        ZRT_RANKS_SEQUENCE, ZRT_RANKS_EXPERT, ZRT_RANKS_EXPERT_REPLICAS})
    for (int32_t dtype : {ZRT_F32, ZRT_BF16, ZRT_F16})
      out.push_back({dtype, kind});
  return out;
}

const char *kindName(int32_t kind) {
  return kind == ZRT_RANKS_GROUP             ? "group"
         : kind == ZRT_RANKS_HPZ             ? "hpz"
         : kind == ZRT_RANKS_WORLD           ? "world"
         : kind == ZRT_RANKS_SEQUENCE        ? "sequence"
         : kind == ZRT_RANKS_EXPERT          ? "expert"
         : kind == ZRT_RANKS_EXPERT_REPLICAS ? "expert_replicas"
                                             : "replicas";
}

INSTANTIATE_TEST_SUITE_P(AllKinds, GroupsTest, ::testing::ValuesIn(cases()),
                         [](const auto &info) {
                           return std::string(kindName(info.param.kind)) + "_" +
                                  dtypeName(info.param.dtype);
                         });

} // namespace

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc < 4 || argc > 7) {
    std::fprintf(stderr, "usage: %s K H M [S [E [X]]]\n", argv[0]);
    return 2;
  }
  for (int i = 0; i < argc - 1; ++i)
    topologyArgs[i] = std::atoll(argv[i + 1]);
  zrt_comm *comm = zrt_comm_world();
  if (zrt_mesh_from_sizes(&mesh, zrt_comm_size(comm), topologyArgs[1],
                          topologyArgs[2], topologyArgs[3], topologyArgs[4],
                          int32_t(topologyArgs[5]))) {
    std::fprintf(stderr, "zrt-groups-test: the sizes form no mesh\n");
    zrt_finalize();
    return 2;
  }
  try {
    zrt::setTopology(comm, topologyArgs[0], mesh);
  } catch (const std::exception &e) {
    // A topology whose sets do not split evenly by node: every rank says so.
    std::printf("zrt-groups-test: rank %d: %s\n", zrt_comm_rank(comm),
                e.what());
    zrt_finalize();
    return 3;
  }
  char banner[128];
  std::snprintf(banner, sizeof(banner),
                "zrt-groups-test: %d rank(s), topology %lld %lld %lld",
                zrt_comm_size(comm), (long long)topologyArgs[0],
                (long long)topologyArgs[1], (long long)topologyArgs[2]);
  return zrt_test::runOnRanks(comm, banner);
}
