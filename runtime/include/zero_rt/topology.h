/*===- topology.h - Ranks, nodes and the bytes each link carries ---------===*
 *
 * Part of the zero-mlir project.
 *
 * The one home of how a collective splits its traffic between the links
 * inside a node and the links between nodes, as inline functions with no
 * dependency: the runtime runs its collectives by it and counts the bytes
 * it hands to each level, and the compiler's report and cost model plan the
 * same numbers with it, so planned and measured bytes agree exactly.
 *
 * Rank r lives on node r / ranks_per_node (ranks are placed by node in
 * blocks; ranks_per_node 0 means one node holds every rank). A collective
 * runs over a rank set, the members {first + i * stride : 0 <= i < size}
 * in member order (the world, an hpZ group, a MiCS shard group or its
 * replicas). When the members span several nodes, each node holding the
 * same number q of consecutive members, it runs in two levels:
 *  - all-gather: across nodes first, among the members of the same local
 *    index (member i with i % q equal), then within each node, where every
 *    member contributes what its cross-node level gathered;
 *  - reduce-scatter: within each node first (the member of local index l
 *    receives its node's sums of the parts of every member of local index
 *    l), then across nodes among the members of the same local index;
 *  - all-reduce: a reduce-scatter, then an all-gather (two passes).
 * Each level is a ring in which a member sends every part of that level but
 * its own, once per pass. A set on one node runs in one level, all of it
 * within the node.
 *
 *===----------------------------------------------------------------------===*/

#ifndef ZERO_RT_TOPOLOGY_H
#define ZERO_RT_TOPOLOGY_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The members {first + i * stride : 0 <= i < size} of a collective's rank
 * set, in member order. */
typedef struct zrt_rank_set {
  int64_t first;
  int64_t stride;
  int64_t size;
} zrt_rank_set;

/* The kinds of rank set (the compiler's RankSetKind, in its order). */
enum {
  ZRT_RANKS_GROUP = 0,    /* the ranks a group is sharded over */
  ZRT_RANKS_HPZ = 1,      /* the rank's hpZ group */
  ZRT_RANKS_REPLICAS = 2, /* the ranks holding the rank's MiCS shard */
};

/* The members of `rank`'s set of `kind` in a world of `world_size` ranks
 * with hpZ groups of `hpz_partition_size` (1: none) and MiCS shard groups
 * of `mics_shard_size` (0: none), both consecutive ranks. The group is the
 * MiCS shard group with MiCS, the world otherwise; an hpZ set without hpZ
 * is the rank alone, and so is a replica set without MiCS. A size of 0
 * means an unknown kind. */
static inline zrt_rank_set zrt_rank_set_of(int32_t kind, int64_t rank,
                                           int64_t world_size,
                                           int64_t hpz_partition_size,
                                           int64_t mics_shard_size) {
  zrt_rank_set s = {rank, 1, 1};
  switch (kind) {
  case ZRT_RANKS_GROUP:
    if (mics_shard_size > 0) {
      s.first = rank / mics_shard_size * mics_shard_size;
      s.size = mics_shard_size;
    } else {
      s.first = 0;
      s.size = world_size;
    }
    return s;
  case ZRT_RANKS_HPZ:
    if (hpz_partition_size > 1) {
      s.first = rank / hpz_partition_size * hpz_partition_size;
      s.size = hpz_partition_size;
    }
    return s;
  case ZRT_RANKS_REPLICAS:
    if (mics_shard_size > 0) {
      s.first = rank % mics_shard_size;
      s.stride = mics_shard_size;
      s.size = world_size / mics_shard_size;
    }
    return s;
  }
  s.size = 0;
  return s;
}

/* The node of `rank` (0 for every rank when ranks_per_node is 0). */
static inline int64_t zrt_node_of(int64_t rank, int64_t ranks_per_node) {
  return ranks_per_node > 0 ? rank / ranks_per_node : 0;
}

/* Members of `set` on each node it spans: set.size when it spans one node,
 * q when every node it spans holds q consecutive members, 0 when the set is
 * empty or does not split evenly by node (the two-level collectives need
 * the same q on every node). */
static inline int64_t zrt_members_per_node(zrt_rank_set set,
                                           int64_t ranks_per_node) {
  if (set.size <= 0 || set.first < 0 || (set.size > 1 && set.stride <= 0))
    return 0;
  int64_t q = 0, run = 0, node = -1;
  for (int64_t i = 0; i < set.size; ++i) {
    int64_t n = zrt_node_of(set.first + i * set.stride, ranks_per_node);
    if (n != node) {
      if (node >= 0 && (n < node || (q != 0 && run != q)))
        return 0;
      if (node >= 0 && q == 0)
        q = run;
      node = n;
      run = 0;
    }
    ++run;
  }
  if (q == 0)
    return run; /* one node */
  return run == q ? q : 0;
}

/* Bytes a member sends at each level of one collective. */
typedef struct zrt_link_bytes {
  int64_t intra_node;
  int64_t inter_node;
} zrt_link_bytes;

/* What member `me` of a set of `size` members, `members_per_node` on each
 * node it spans (zrt_members_per_node), sends in a collective whose member
 * j contributes (all-gather) or owns (reduce-scatter, all-reduce) part
 * chunks[j], in bytes; `passes` is 1 for an all-gather or a reduce-scatter
 * (or a reduce per owner), 2 for an all-reduce. Across nodes a member sends
 * the parts of its cross-node level (the members of its local index) but
 * its own; within the node, every other part. On one node the sum is the
 * ring's: every part but its own. */
static inline zrt_link_bytes zrt_collective_link_bytes(const int64_t *chunks,
                                                       int64_t size,
                                                       int64_t members_per_node,
                                                       int64_t me,
                                                       int64_t passes) {
  zrt_link_bytes out = {0, 0};
  if (size <= 1 || me < 0 || me >= size || members_per_node <= 0)
    return out;
  int64_t total = 0, cross = 0;
  for (int64_t j = 0; j < size; ++j) {
    total += chunks[j];
    if (j % members_per_node == me % members_per_node)
      cross += chunks[j];
  }
  if (members_per_node >= size) {
    out.intra_node = passes * (total - chunks[me]);
    return out;
  }
  out.intra_node = passes * (total - cross);
  out.inter_node = passes * (cross - chunks[me]);
  return out;
}

#ifdef __cplusplus
}
#endif

#endif /* ZERO_RT_TOPOLOGY_H */
