//===- Groups.h - Rank sets, nodes and two-level collectives ----*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// The run's topology and the collectives over a rank set (a Group: the
// world, an hpZ group, a MiCS shard group or its replicas), run as
// zero_rt/topology.h describes: on one node as the world's collectives always
// ran (the same calls, the same sums), across nodes in two levels, each over
// a communicator of its own (the members on this rank's node; the members
// of this rank's local index on the other nodes). Every collective adds the
// bytes this rank hands to each level, by topology.h's ring rule, to the
// counters of its kind, which the driver compares with the plan.
//
// The Groups are created collectively when the topology is set, for every
// rank set the manifest's topology implies, so no communicator is created
// during a step.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_GROUPS_H
#define ZERO_RT_GROUPS_H

#include "Collectives/Collectives.h"
#include "Program/Manifest.h"

#include "zero_rt/topology.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace zrt {

/// A rank set's communicators. `members` orders the members by member
/// index; `node` holds the members on this rank's node by local index, and
/// `cross` the members of this rank's local index by node (both null when
/// the set runs in one level).
struct Group {
  zrt_rank_set set{0, 1, 1};
  int32_t kind = ZRT_RANKS_GROUP;
  /// This rank's member index, and members per node (topology.h's q).
  int me = 0;
  int64_t membersPerNode = 1;
  zrt_comm *members = nullptr;
  zrt_comm *node = nullptr;
  zrt_comm *cross = nullptr;
  /// Duplicates of node and cross for the levels that start after another
  /// has completed (the CPU backend's), so that they never interleave with
  /// the first levels of later collectives.
  zrt_comm *nodeLate = nullptr;
  zrt_comm *crossLate = nullptr;

  int size() const { return int(set.size); }
  /// Whether the members span several nodes: the collectives run in two
  /// levels.
  bool twoLevel() const { return membersPerNode < set.size; }
  int nodes() const { return int(set.size / membersPerNode); }
  int localIndex() const { return int(me % membersPerNode); }
  /// The world rank of member `member`.
  int rankOf(int member) const { return int(set.first + member * set.stride); }
};

/// The ranks per node this run has: `override` when positive (--ranks-per-
/// node, ZRT_RANKS_PER_NODE), else MPI's shared-memory nodes, which must
/// hold consecutive ranks in blocks of one size (rank r on node r / K);
/// throws a message saying how to launch otherwise. Collective over the
/// world.
int64_t runRanksPerNode(zrt_comm *world, int64_t override);

/// Sets the topology the step's collectives run by and creates a Group for
/// every rank set of this rank that it implies. `ranksPerNode` 0 runs every
/// collective in one level, as a program without a topology always ran.
/// `mesh` (of the world's size) gives every rank set (zrt_rank_set_of).
/// Collective over the world; called once, before the first step, and
/// again only after freeGroups (a library's next session). Throws
/// std::runtime_error when the topology is already set.
void setTopology(zrt_comm *world, int64_t ranksPerNode, const zrt_mesh &mesh);

/// The ranks per node the collectives run by (0: one node).
int64_t topologyRanksPerNode();

/// This rank's Group of rank-set kind `kind` (ZRT_RANKS_*): the world
/// without a topology.
Group &groupOf(zrt_comm *world, int32_t kind);

/// Frees every Group (zrt_finalize, before the world; a library session's
/// close, so that the next session sets its own topology).
void freeGroups();

//===----------------------------------------------------------------------===//
// Collectives over a Group
//===----------------------------------------------------------------------===//
// Each takes the CommKind its bytes count under. The in-place forms take
// per-member counts and displacements as Collectives.h's do.

/// Every member's segment to every member.
Tokens allGather(Group &g, CommKind kind, int32_t dtype, void *buf,
                 const std::vector<int> &counts,
                 const std::vector<int> &displs);
/// `count` elements of every member, from `in`, into `out` in member order
/// (`in` may be this member's place in `out`).
Tokens allGather(Group &g, CommKind kind, int32_t dtype, const void *in,
                 void *out, int64_t count);
/// Sums segment m over the members into member m; `sumAt` is where this
/// member's sum is, in elements from buf.
Tokens reduceScatter(Group &g, CommKind kind, int32_t dtype, void *buf,
                     const std::vector<int> &counts,
                     const std::vector<int> &displs, int64_t &sumAt);
/// Adds the sum over the members of segment m of a buffer given as
/// `pieces` into member m's `acc`, reading the pieces where they are
/// (Collectives.h's reduceScatterAddPieces); false, having started and
/// counted nothing, where the Group's backend or levels cannot.
bool reduceScatterAdd(Group &g, CommKind kind, int32_t dtype,
                      const std::vector<BufferPiece> &pieces,
                      const std::vector<int> &counts,
                      const std::vector<int> &displs, void *acc,
                      Tokens &tokens);
/// ZeRO++ qgZ across nodes: sums segment m of `buf` (dtype) over the
/// members into member m as INT4 all-to-alls, first within the node, then
/// of the node sums across nodes, in `staging` laid out by
/// zrt_quantized_reduce_scatter_staging (zero_rt/topology.h). The first
/// level completes before it returns; when the tokens complete, the
/// member's chunks from every node are in the staging's recv2, for
/// finishQuantizedReduceScatter. Counts topology.h's quantized bytes.
Tokens quantizedReduceScatter(Group &g, CommKind kind, int32_t dtype,
                              const void *buf, const std::vector<int> &counts,
                              const std::vector<int> &displs, void *staging);
/// The member's fp32 sum of a completed quantizedReduceScatter: the first
/// counts[me] floats of the staging's sums.
float *finishQuantizedReduceScatter(Group &g, const std::vector<int> &counts,
                                    void *staging);
/// Sums segment m in place at member m (at displs[m]).
Tokens reduceToOwners(Group &g, CommKind kind, int32_t dtype, void *buf,
                      const std::vector<int> &counts,
                      const std::vector<int> &displs);
/// Sums `count` elements in place over the members (op ZRT_SUM or ZRT_MAX).
Tokens allReduce(Group &g, CommKind kind, int32_t dtype, int32_t op, void *buf,
                 int64_t count);
/// The overflow statistics (fp32 {flag, squared norm}): the flag by max,
/// the norm by sum, counted as one all-reduce of two elements.
Tokens allReduceStats(Group &g, const float *in, float *out);
/// Counts an all-reduce of `n` elements of `elementBytes` over the members
/// that the caller runs outside the group's communicators (a router's int64
/// counts through the host), as the plan counts it: an even split, two
/// passes.
void countAllReduce(Group &g, int64_t n, int64_t elementBytes);
/// `chunkBytes` bytes at chunk m of `send` to member m, whose chunk lands
/// at chunk g.me of its `recv` (a direct exchange, every pair of members
/// once: topology.h's zrt_all_to_all_link_bytes).
Tokens allToAll(Group &g, CommKind kind, const void *send, void *recv,
                int64_t chunkBytes);
/// Counts an all-to-all in which this member sends bytes[m] bytes to member
/// m (zrt_all_to_all_v_link_bytes: every chunk but its own), run by its
/// caller over g.members with allToAllBytes (an MoE exchange's rows).
void countAllToAll(Group &g, CommKind kind, const std::vector<int64_t> &bytes);

//===----------------------------------------------------------------------===//
// The counters
//===----------------------------------------------------------------------===//

/// The bytes this rank handed to each level since the last reset, by kind.
const std::array<LinkBytes, kNumCommKinds> &commCounters();
void resetCommCounters();

} // namespace zrt

#endif // ZERO_RT_GROUPS_H
