//===- Groups.cpp - Rank sets, nodes and two-level collectives ------------===//
//
// Part of the zero-mlir project.
//
// What both backends share: the run's nodes, the Groups' MPI communicators,
// the choice between one level (Collectives.h, as the world always ran)
// and two (the backend's twoLevel* functions), and the byte counters.
//
//===----------------------------------------------------------------------===//

#include "Groups.h"
#include "Mpi.h"
#include "Support.h"

#include <mpi.h>

#include <memory>
#include <mutex>
#include <stdexcept>

using namespace zrt;

namespace {

struct Groups {
  std::mutex mutex;
  int64_t ranksPerNode = 0, hpzPartitionSize = 1, micsShardSize = 0;
  /// By kind; null until created.
  std::array<std::unique_ptr<Group>, 3> groups;
  /// The communicators the Groups own (not the world).
  std::vector<zrt_comm *> owned;
  std::array<LinkBytes, kNumCommKinds> counters{};
};

Groups &groups() {
  static Groups g;
  return g;
}

zrt_comm *newComm(MPI_Comm comm, zrt_comm *world) {
  auto *c = new zrt_comm;
  c->comm = comm;
  MPI_Comm_rank(comm, &c->rank);
  MPI_Comm_size(comm, &c->size);
  startGroupBackend(world, c);
  groups().owned.push_back(c);
  return c;
}

/// A split of `parent` (collective over it).
zrt_comm *split(zrt_comm *parent, int color, int key, zrt_comm *world) {
  MPI_Comm comm;
  MPI_Comm_split(parent->comm, color, key, &comm);
  return newComm(comm, world);
}

/// Creates the Group of `kind`. Collective over the world unless the set
/// is this rank alone.
std::unique_ptr<Group> makeGroup(zrt_comm *world, int32_t kind) {
  Groups &gs = groups();
  auto setOf = [&](int64_t rank) {
    return zrt_rank_set_of(kind, rank, world->size, gs.hpzPartitionSize,
                           gs.micsShardSize);
  };
  // Every rank's verdict on every rank's set, so that all agree.
  for (int64_t r = 0; r < world->size; ++r)
    if (zrt_members_per_node(setOf(r), gs.ranksPerNode) == 0)
      throw std::runtime_error(
          "the ranks of rank " + std::to_string(r) + "'s set of kind " +
          std::to_string(kind) + " are not split evenly by nodes of " +
          std::to_string(gs.ranksPerNode) +
          " ranks; the collectives need as many members on every node");
  auto g = std::make_unique<Group>();
  g->set = setOf(world->rank);
  g->kind = kind;
  g->me = int((world->rank - g->set.first) / g->set.stride);
  g->membersPerNode = zrt_members_per_node(g->set, gs.ranksPerNode);
  if (g->set.size == world->size)
    g->members = world;
  else if (g->set.size == 1) {
    MPI_Comm self;
    MPI_Comm_dup(MPI_COMM_SELF, &self);
    g->members = newComm(self, world);
  } else {
    // The sets of one kind partition the world: the first member names it.
    g->members = split(world, int(g->set.first), g->me, world);
  }
  if (g->twoLevel()) {
    g->node = split(g->members, g->me / int(g->membersPerNode), g->localIndex(),
                    world);
    g->cross = split(g->members, g->localIndex(),
                     g->me / int(g->membersPerNode), world);
    for (auto [from, to] : {std::pair{g->node, &g->nodeLate},
                            std::pair{g->cross, &g->crossLate}}) {
      MPI_Comm dup;
      MPI_Comm_dup(from->comm, &dup);
      *to = newComm(dup, world);
    }
  }
  return g;
}

void add(Group &g, CommKind kind, const std::vector<int64_t> &chunks,
         int64_t passes) {
  zrt_link_bytes b = zrt_collective_link_bytes(chunks.data(), g.set.size,
                                               g.membersPerNode, g.me, passes);
  LinkBytes &c = groups().counters[size_t(kind)];
  c.intraNode += b.intra_node;
  c.interNode += b.inter_node;
}

std::vector<int64_t> bytesOf(const std::vector<int> &counts, int32_t dtype) {
  std::vector<int64_t> chunks;
  for (int c : counts)
    chunks.push_back(int64_t(c) * zrt_dtype_size(dtype));
  return chunks;
}

/// `n` elements split into one part per member, the first n % size parts
/// one larger (the report's even split of an all-reduce).
std::vector<int> evenCounts(int64_t n, int size, std::vector<int> &displs) {
  std::vector<int> counts;
  displs.clear();
  int64_t at = 0;
  for (int m = 0; m < size; ++m) {
    int64_t c = n / size + (m < n % size ? 1 : 0);
    if (c > INT32_MAX || at > INT32_MAX)
      fatal("a collective of %lld elements is outside the MPI int range",
            (long long)n);
    counts.push_back(int(c));
    displs.push_back(int(at));
    at += c;
  }
  return counts;
}

void checkMembers(const Group &g, const std::vector<int> &counts,
                  const std::vector<int> &displs, const char *call) {
  if (int(counts.size()) != g.size() || int(displs.size()) != g.size())
    fatal("%s: %zu counts for a group of %d ranks", call, counts.size(),
          g.size());
}

} // namespace

int64_t zrt::runRanksPerNode(zrt_comm *world, int64_t override) {
  if (override > 0) {
    if (world->size % override)
      throw std::runtime_error("--ranks-per-node " + std::to_string(override) +
                               " does not divide the world of " +
                               std::to_string(world->size) + " rank(s)");
    return override;
  }
  MPI_Comm node;
  MPI_Comm_split_type(world->comm, MPI_COMM_TYPE_SHARED, world->rank,
                      MPI_INFO_NULL, &node);
  int local[3] = {0, 1, 0};
  MPI_Comm_rank(node, &local[0]);
  MPI_Comm_size(node, &local[1]);
  // The node's first rank in the world.
  local[2] = world->rank;
  MPI_Bcast(&local[2], 1, MPI_INT, 0, node);
  MPI_Comm_free(&node);
  std::vector<int> all(size_t(3 * world->size));
  MPI_Allgather(local, 3, MPI_INT, all.data(), 3, MPI_INT, world->comm);
  int k = all[1];
  for (int r = 0; r < world->size; ++r) {
    const int *l = &all[size_t(3 * r)];
    if (l[1] != k || l[0] != r % k || l[2] != r - r % k)
      throw std::runtime_error(
          "the ranks are not placed by node in blocks of one size (rank " +
          std::to_string(r) + " is rank " + std::to_string(l[0]) + " of " +
          std::to_string(l[1]) + " on a node whose first rank is " +
          std::to_string(l[2]) + ", rank 0's node has " + std::to_string(k) +
          "): start the same number of ranks on every node, consecutive "
          "ranks together (mpirun --map-by slot), or give the nodes' size "
          "with --ranks-per-node K");
  }
  return k;
}

void zrt::setTopology(zrt_comm *world, int64_t ranksPerNode,
                      int64_t hpzPartitionSize, int64_t micsShardSize) {
  Groups &gs = groups();
  std::lock_guard<std::mutex> lock(gs.mutex);
  if (gs.groups[ZRT_RANKS_GROUP])
    fatal("setTopology: the topology is already set");
  gs.ranksPerNode = ranksPerNode;
  gs.hpzPartitionSize = hpzPartitionSize;
  gs.micsShardSize = micsShardSize;
  // Every kind, so that no collective creation happens during a step.
  for (int32_t kind : {ZRT_RANKS_GROUP, ZRT_RANKS_HPZ, ZRT_RANKS_REPLICAS})
    gs.groups[size_t(kind)] = makeGroup(world, kind);
}

int64_t zrt::topologyRanksPerNode() { return groups().ranksPerNode; }

Group &zrt::groupOf(zrt_comm *world, int32_t kind) {
  Groups &gs = groups();
  if (kind < ZRT_RANKS_GROUP || kind > ZRT_RANKS_REPLICAS)
    fatal("groupOf: unknown rank set kind %d", int(kind));
  std::lock_guard<std::mutex> lock(gs.mutex);
  std::unique_ptr<Group> &g = gs.groups[size_t(kind)];
  if (!g) {
    // Without a topology: the world, and this rank alone for the others
    // (no collective call).
    if (kind == ZRT_RANKS_GROUP && gs.micsShardSize == 0) {
      g = std::make_unique<Group>();
      g->set = {0, 1, world->size};
      g->me = world->rank;
      g->membersPerNode = world->size;
      g->members = world;
    } else if (kind != ZRT_RANKS_GROUP) {
      g = makeGroup(world, kind);
    } else {
      fatal("groupOf: the MiCS groups need the topology set first");
    }
  }
  return *g;
}

void zrt::freeGroups() {
  Groups &gs = groups();
  std::lock_guard<std::mutex> lock(gs.mutex);
  for (auto &g : gs.groups)
    g.reset();
  for (zrt_comm *c : gs.owned) {
    stopGroupBackend(c);
    MPI_Comm_free(&c->comm);
    delete c;
  }
  gs.owned.clear();
  gs.ranksPerNode = 0;
  gs.hpzPartitionSize = 1;
  gs.micsShardSize = 0;
}

//===----------------------------------------------------------------------===//
// Collectives over a Group
//===----------------------------------------------------------------------===//

Tokens zrt::allGather(Group &g, CommKind kind, int32_t dtype, void *buf,
                      const std::vector<int> &counts,
                      const std::vector<int> &displs) {
  checkMembers(g, counts, displs, "allGather");
  add(g, kind, bytesOf(counts, dtype), 1);
  if (!g.twoLevel())
    return allGatherInPlace(g.members, dtype, buf, counts, displs);
  return twoLevelAllGather(g, dtype, nullptr, buf, counts, displs);
}

Tokens zrt::allGather(Group &g, CommKind kind, int32_t dtype, const void *in,
                      void *out, int64_t count) {
  if (count < 0 || count > INT32_MAX || count * g.set.size > INT32_MAX)
    fatal("allGather: count %lld is outside the MPI int range",
          (long long)count);
  std::vector<int> counts(size_t(g.size()), int(count)), displs;
  for (int m = 0; m < g.size(); ++m)
    displs.push_back(int(m * count));
  add(g, kind, bytesOf(counts, dtype), 1);
  if (!g.twoLevel())
    return {zrt_all_gather(g.members, dtype, in, out, count)};
  return twoLevelAllGather(g, dtype, in, out, counts, displs);
}

Tokens zrt::reduceScatter(Group &g, CommKind kind, int32_t dtype, void *buf,
                          const std::vector<int> &counts,
                          const std::vector<int> &displs, int64_t &sumAt) {
  checkMembers(g, counts, displs, "reduceScatter");
  add(g, kind, bytesOf(counts, dtype), 1);
  if (!g.twoLevel())
    return reduceScatterInPlace(g.members, dtype, buf, counts, displs, sumAt);
  sumAt = displs[size_t(g.me)];
  return twoLevelReduce(g, dtype, buf, counts, displs,
                        std::vector<int32_t>(size_t(g.size()), ZRT_SUM));
}

Tokens zrt::reduceToOwners(Group &g, CommKind kind, int32_t dtype, void *buf,
                           const std::vector<int> &counts,
                           const std::vector<int> &displs) {
  checkMembers(g, counts, displs, "reduceToOwners");
  add(g, kind, bytesOf(counts, dtype), 1);
  if (!g.twoLevel())
    return reduceToOwners(g.members, dtype, buf, counts, displs);
  return twoLevelReduce(g, dtype, buf, counts, displs,
                        std::vector<int32_t>(size_t(g.size()), ZRT_SUM));
}

Tokens zrt::allReduce(Group &g, CommKind kind, int32_t dtype, int32_t op,
                      void *buf, int64_t count) {
  std::vector<int> displs;
  std::vector<int> counts = evenCounts(count, g.size(), displs);
  add(g, kind, bytesOf(counts, dtype), 2);
  if (!g.twoLevel())
    return {zrt_all_reduce(g.members, dtype, op, buf, buf, count)};
  return twoLevelAllReduce(g, dtype, buf, buf, counts, displs,
                           std::vector<int32_t>(size_t(g.size()), op));
}

Tokens zrt::allReduceStats(Group &g, const float *in, float *out) {
  std::vector<int> displs;
  std::vector<int> counts = evenCounts(2, g.size(), displs);
  add(g, kAllReduce, bytesOf(counts, ZRT_F32), 2);
  if (!g.twoLevel())
    return allReduceStats(g.members, in, out);
  // The flag is the first member's part, the norm the second's (a group
  // of two or more members).
  std::vector<int32_t> ops(size_t(g.size()), ZRT_SUM);
  ops[0] = ZRT_MAX;
  return twoLevelAllReduce(g, ZRT_F32, in, out, counts, displs, ops);
}

//===----------------------------------------------------------------------===//
// The counters
//===----------------------------------------------------------------------===//

const std::array<LinkBytes, kNumCommKinds> &zrt::commCounters() {
  return groups().counters;
}

void zrt::resetCommCounters() { groups().counters = {}; }
