//===- Groups.cpp - Rank sets, nodes and two-level collectives ------------===//
//
// Part of the zero-mlir project.
//
// What both backends share: the run's nodes, the Groups' MPI communicators,
// the choice between one level (Collectives.h, as the world always ran)
// and two (the backend's twoLevel* functions), and the byte counters.
//
//===----------------------------------------------------------------------===//

#include "Collectives/Groups.h"
#include "Collectives/Mpi.h"
#include "Device/Device.h"
#include "Support/Support.h"

#include <mpi.h>

#include <memory>
#include <mutex>
#include <stdexcept>

using namespace zrt;

namespace {

struct Groups {
  std::mutex mutex;
  int64_t ranksPerNode = 0;
  /// The ranks' axes; none until setTopology.
  zrt_mesh mesh = {};
  /// By kind; null until created.
  std::array<std::unique_ptr<Group>, ZRT_RANKS_EXPERT_REPLICAS + 1> groups;
  /// The communicators the Groups own (not the world).
  std::vector<zrt_comm *> owned;
  std::array<LinkBytes, kNumCommKinds> counters{};
};

Groups &groups() {
  static Groups g;
  return g;
}

/// The mesh the rank sets are taken from: the topology's, or one data axis
/// of the world before it is set.
zrt_mesh meshOf(zrt_comm *world) {
  zrt_mesh mesh = groups().mesh;
  if (mesh.num_axes == 0) {
    mesh.num_axes = 1;
    mesh.axes[0] = ZRT_AXIS_DATA;
    mesh.sizes[0] = world->size;
  }
  return mesh;
}

/// A communicator of the Groups, split from `parent` by (color, key).
zrt_comm *newComm(MPI_Comm comm, zrt_comm *parent, int color, int key) {
  auto *c = new zrt_comm;
  c->comm = comm;
  MPI_Comm_rank(comm, &c->rank);
  MPI_Comm_size(comm, &c->size);
  startGroupBackend(parent, c, color, key);
  groups().owned.push_back(c);
  return c;
}

/// A split of `parent` (collective over it).
zrt_comm *split(zrt_comm *parent, int color, int key) {
  MPI_Comm comm;
  MPI_Comm_split(parent->comm, color, key, &comm);
  return newComm(comm, parent, color, key);
}

/// Creates the Group of `kind`. Collective over the world unless the set
/// is this rank alone.
std::unique_ptr<Group> makeGroup(zrt_comm *world, int32_t kind) {
  Groups &gs = groups();
  zrt_mesh mesh = meshOf(world);
  auto setOf = [&](int64_t rank) { return zrt_rank_set_of(kind, rank, &mesh); };
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
    // This rank alone: a split of the world by rank for the backend.
    MPI_Comm self;
    MPI_Comm_dup(MPI_COMM_SELF, &self);
    g->members = newComm(self, world, world->rank, 0);
  } else {
    // The sets of one kind partition the world: the first member names it.
    g->members = split(world, int(g->set.first), g->me);
  }
  if (g->twoLevel()) {
    g->node =
        split(g->members, g->me / int(g->membersPerNode), g->localIndex());
    g->cross =
        split(g->members, g->localIndex(), g->me / int(g->membersPerNode));
    for (auto [from, to] : {std::pair{g->node, &g->nodeLate},
                            std::pair{g->cross, &g->crossLate}}) {
      MPI_Comm dup;
      MPI_Comm_dup(from->comm, &dup);
      *to = newComm(dup, from, 0, from->rank);
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
std::vector<int64_t> evenChunks(int64_t n, int size) {
  std::vector<int64_t> chunks;
  for (int m = 0; m < size; ++m)
    chunks.push_back(n / size + (m < n % size ? 1 : 0));
  return chunks;
}

/// evenChunks as MPI counts, and their displacements.
std::vector<int> evenCounts(int64_t n, int size, std::vector<int> &displs) {
  if (n < 0 || n > INT32_MAX)
    fatal("a collective of %lld elements is outside the MPI int range",
          (long long)n);
  std::vector<int> counts;
  displs.clear();
  int at = 0;
  for (int64_t c : evenChunks(n, size)) {
    counts.push_back(int(c));
    displs.push_back(at);
    at += int(c);
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
                      const zrt_mesh &mesh) {
  Groups &gs = groups();
  std::lock_guard<std::mutex> lock(gs.mutex);
  // A library's host may open sessions one after another, not two at once:
  // the rank sets (and the device, arenas and tokens) are the process's.
  if (gs.groups[ZRT_RANKS_GROUP])
    throw std::runtime_error(
        "another session of this process is open: close it before opening "
        "one more (one session at a time)");
  if (zrt_mesh_size(&mesh) != world->size)
    fatal("setTopology: a mesh of %lld ranks for a world of %d",
          (long long)zrt_mesh_size(&mesh), world->size);
  gs.ranksPerNode = ranksPerNode;
  gs.mesh = mesh;
  // Every kind, so that no collective creation happens during a step (the
  // sequence- and expert-parallel groups only where there are any: no
  // all-to-all or MoE exchange runs without them).
  for (int32_t kind :
       {ZRT_RANKS_GROUP, ZRT_RANKS_HPZ, ZRT_RANKS_REPLICAS, ZRT_RANKS_WORLD})
    gs.groups[size_t(kind)] = makeGroup(world, kind);
  if (zrt_mesh_sequence_parallel(&mesh) > 1)
    gs.groups[ZRT_RANKS_SEQUENCE] = makeGroup(world, ZRT_RANKS_SEQUENCE);
  if (zrt_mesh_expert_parallel(&mesh) > 1)
    for (int32_t kind : {ZRT_RANKS_EXPERT, ZRT_RANKS_EXPERT_REPLICAS})
      gs.groups[size_t(kind)] = makeGroup(world, kind);
}

int64_t zrt::topologyRanksPerNode() { return groups().ranksPerNode; }

Group &zrt::groupOf(zrt_comm *world, int32_t kind) {
  Groups &gs = groups();
  if (kind < ZRT_RANKS_GROUP || kind > ZRT_RANKS_EXPERT_REPLICAS)
    fatal("groupOf: unknown rank set kind %d", int(kind));
  std::lock_guard<std::mutex> lock(gs.mutex);
  std::unique_ptr<Group> &g = gs.groups[size_t(kind)];
  if (!g) {
    // Without a topology: the world, and this rank alone for the others
    // (no collective call).
    if (kind == ZRT_RANKS_GROUP && zrt_mesh_find(&gs.mesh, ZRT_AXIS_MICS) < 0) {
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
  // Splits before what they were split from.
  for (auto it = gs.owned.rbegin(); it != gs.owned.rend(); ++it) {
    zrt_comm *c = *it;
    stopGroupBackend(c);
    MPI_Comm_free(&c->comm);
    delete c;
  }
  gs.owned.clear();
  gs.ranksPerNode = 0;
  gs.mesh = zrt_mesh{};
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
  add(g, kind,
      std::vector<int64_t>(size_t(g.size()), count * zrt_dtype_size(dtype)), 1);
  if (!g.twoLevel())
    return {zrt_all_gather(g.members, dtype, in, out, count)};
  // Two levels address the output by per-member displacements.
  if (count < 0 || count * g.set.size > INT32_MAX)
    fatal("allGather: %lld elements per member of %d are outside the MPI int "
          "range",
          (long long)count, g.size());
  std::vector<int> counts(size_t(g.size()), int(count)), displs;
  for (int m = 0; m < g.size(); ++m)
    displs.push_back(int(m * count));
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

bool zrt::reduceScatterAdd(Group &g, CommKind kind, int32_t dtype,
                           const std::vector<BufferPiece> &pieces,
                           const std::vector<int> &counts,
                           const std::vector<int> &displs, void *acc,
                           Tokens &tokens) {
  checkMembers(g, counts, displs, "reduceScatterAdd");
  if (g.twoLevel() || !reduceScatterAddPieces(g.members, dtype, pieces, counts,
                                              displs, acc, tokens))
    return false;
  add(g, kind, bytesOf(counts, dtype), 1);
  return true;
}

namespace {
/// The parts of a quantized reduce-scatter, and this member's staging.
zrt_qgz_staging qgzStaging(const Group &g, const std::vector<int> &counts,
                           std::vector<int64_t> &parts) {
  parts.assign(counts.begin(), counts.end());
  return zrt_quantized_reduce_scatter_staging(parts.data(), 0, g.set.size,
                                              g.membersPerNode, g.me);
}
} // namespace

Tokens zrt::quantizedReduceScatter(Group &g, CommKind kind, int32_t dtype,
                                   const void *buf,
                                   const std::vector<int> &counts,
                                   const std::vector<int> &displs,
                                   void *staging) {
  const char *call = "quantizedReduceScatter";
  checkMembers(g, counts, displs, call);
  if (!g.twoLevel())
    fatal("%s: qgZ runs across nodes, but the %d members are on one node", call,
          g.size());
  std::vector<int64_t> parts;
  zrt_qgz_staging s = qgzStaging(g, counts, parts);
  zrt_link_bytes b = zrt_quantized_reduce_scatter_link_bytes(
      parts.data(), 0, g.set.size, g.membersPerNode, g.me);
  LinkBytes &c = groups().counters[size_t(kind)];
  c.intraNode += b.intra_node;
  c.interNode += b.inter_node;

  int q = int(g.membersPerNode), nodes = g.nodes(), l = g.localIndex();
  auto chunk = [&](int m) { return zrt_quant_bytes(parts[size_t(m)], 4); };
  char *st = static_cast<char *>(staging);
  const char *in = static_cast<const char *>(buf);
  int64_t es = zrt_dtype_size(dtype);
  // Level 1: every part quantized on its own, by destination local index
  // (node order within each), to the node's other members. The parts of
  // this member's own local index are summed here: its contribution to
  // them stays exact (its region of send1 and recv1 is unused).
  std::vector<int64_t> sendCounts, sendDispls, recvCounts, recvDispls;
  int64_t at = 0, mine = 0;
  for (int m = 0; m < nodes; ++m)
    mine += chunk(m * q + l);
  for (int dest = 0; dest < q; ++dest) {
    sendDispls.push_back(at);
    for (int m = 0; m < nodes; ++m) {
      int j = m * q + dest;
      if (dest != l && parts[size_t(j)] > 0)
        zrt_quantize(dtype, in + int64_t(displs[size_t(j)]) * es,
                     parts[size_t(j)], 1, 4, st + s.send1 + at);
      at += chunk(j);
    }
    sendCounts.push_back(dest == l ? 0 : at - sendDispls.back());
    recvCounts.push_back(dest == l ? 0 : mine);
    recvDispls.push_back(int64_t(dest) * mine);
  }
  // Distinct send and receive bases: MPI libraries take equal ones for
  // MPI_IN_PLACE.
  for (int64_t t : allToAllBytes(g.node, st + s.send1, sendCounts, sendDispls,
                                 st + s.recv1, recvCounts, recvDispls))
    zrt_wait(t);
  // The node's contributions to each part of this local index, summed in
  // fp32 (this member's exact one first, then the others in local-index
  // order) and requantized for its owner's node; this member's own part's
  // node sum stays in fp32 (finishQuantizedReduceScatter).
  sendCounts.clear();
  sendDispls.clear();
  recvCounts.clear();
  recvDispls.clear();
  int myNode = g.me / q;
  int64_t chunkAt = 0, sumAt = 0;
  for (int m = 0; m < nodes; ++m) {
    int j = m * q + l;
    float *sum = reinterpret_cast<float *>(st + s.sums) + sumAt;
    if (parts[size_t(j)] > 0) {
      zrt_cast(dtype, in + int64_t(displs[size_t(j)]) * es, ZRT_F32, sum,
               parts[size_t(j)]);
      for (int k = 0; k < q; ++k)
        if (k != l)
          zrt_dequantize_add(st + s.recv1 + int64_t(k) * mine + chunkAt,
                             parts[size_t(j)], 4, sum);
      if (m != myNode)
        zrt_quantize(ZRT_F32, sum, parts[size_t(j)], 1, 4,
                     st + s.send2 + chunkAt);
    }
    sendDispls.push_back(chunkAt);
    sendCounts.push_back(m == myNode ? 0 : chunk(j));
    recvDispls.push_back(int64_t(m) * chunk(g.me));
    recvCounts.push_back(m == myNode ? 0 : chunk(g.me));
    chunkAt += chunk(j);
    sumAt += parts[size_t(j)];
  }
  // Level 2: each sum to its owner, among the members of this local index.
  return allToAllBytes(g.cross, st + s.send2, sendCounts, sendDispls,
                       st + s.recv2, recvCounts, recvDispls);
}

float *zrt::finishQuantizedReduceScatter(Group &g,
                                         const std::vector<int> &counts,
                                         void *staging) {
  std::vector<int64_t> parts;
  zrt_qgz_staging s = qgzStaging(g, counts, parts);
  char *st = static_cast<char *>(staging);
  float *sum = reinterpret_cast<float *>(st + s.sums);
  int64_t n = parts[size_t(g.me)], bytes = zrt_quant_bytes(n, 4);
  if (n == 0)
    return sum;
  // This node's exact sum of the part (among the sums of this local index,
  // moved to the front), then the other nodes' sums in node order.
  int q = int(g.membersPerNode), l = g.localIndex(), myNode = g.me / q;
  int64_t ownAt = 0;
  for (int m = 0; m < myNode; ++m)
    ownAt += parts[size_t(m * q + l)];
  if (ownAt > 0)
    device::move(sum, sum + ownAt, n * int64_t(sizeof(float)));
  for (int m = 0; m < g.nodes(); ++m)
    if (m != myNode)
      zrt_dequantize_add(st + s.recv2 + int64_t(m) * bytes, n, 4, sum);
  return sum;
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
  std::vector<int64_t> chunks = evenChunks(count, g.size());
  for (int64_t &c : chunks)
    c *= zrt_dtype_size(dtype);
  add(g, kind, chunks, 2);
  if (!g.twoLevel())
    return {zrt_all_reduce(g.members, dtype, op, buf, buf, count)};
  std::vector<int> displs;
  std::vector<int> counts = evenCounts(count, g.size(), displs);
  return twoLevelAllReduce(g, dtype, buf, buf, counts, displs,
                           std::vector<int32_t>(size_t(g.size()), op));
}

Tokens zrt::allToAll(Group &g, CommKind kind, const void *send, void *recv,
                     int64_t chunkBytes) {
  zrt_link_bytes b =
      zrt_all_to_all_link_bytes(chunkBytes, g.set.size, g.membersPerNode, g.me);
  LinkBytes &c = groups().counters[size_t(kind)];
  c.intraNode += b.intra_node;
  c.interNode += b.inter_node;
  std::vector<int64_t> counts(size_t(g.size()), chunkBytes), displs;
  for (int m = 0; m < g.size(); ++m)
    displs.push_back(int64_t(m) * chunkBytes);
  return allToAllBytes(g.members, send, counts, displs, recv, counts, displs);
}

void zrt::countAllToAll(Group &g, CommKind kind,
                        const std::vector<int64_t> &bytes) {
  if (int(bytes.size()) != g.size())
    fatal("countAllToAll: %zu counts for a group of %d ranks", bytes.size(),
          g.size());
  zrt_link_bytes b = zrt_all_to_all_v_link_bytes(bytes.data(), g.set.size,
                                                 g.membersPerNode, g.me);
  LinkBytes &c = groups().counters[size_t(kind)];
  c.intraNode += b.intra_node;
  c.interNode += b.inter_node;
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

void zrt::countAllReduce(Group &g, int64_t n, int64_t elementBytes) {
  std::vector<int64_t> chunks = evenChunks(n, g.size());
  for (int64_t &c : chunks)
    c *= elementBytes;
  add(g, kAllReduce, chunks, 2);
}

//===----------------------------------------------------------------------===//
// The counters
//===----------------------------------------------------------------------===//

const std::array<LinkBytes, kNumCommKinds> &zrt::commCounters() {
  return groups().counters;
}

void zrt::resetCommCounters() { groups().counters = {}; }
