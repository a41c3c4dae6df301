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
 * replicas, a sequence-parallel group). When the members span several
 * nodes, each node holding the same number q of consecutive members, it
 * runs in two levels:
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
 * A quantized reduce-scatter (ZeRO++ qgZ) runs as two all-to-alls of INT4
 * parts instead (zrt_quantized_reduce_scatter_link_bytes).
 *
 *===----------------------------------------------------------------------===*/

#ifndef ZERO_RT_TOPOLOGY_H
#define ZERO_RT_TOPOLOGY_H

#include "quantize.h"

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
  ZRT_RANKS_GROUP = 0,           /* the ranks a group is sharded over */
  ZRT_RANKS_HPZ = 1,             /* the rank's hpZ group */
  ZRT_RANKS_REPLICAS = 2,        /* the ranks holding the rank's MiCS shard */
  ZRT_RANKS_WORLD = 3,           /* every rank */
  ZRT_RANKS_SEQUENCE = 4,        /* the rank's sequence-parallel group */
  ZRT_RANKS_EXPERT = 5,          /* the rank's expert-parallel group */
  ZRT_RANKS_EXPERT_REPLICAS = 6, /* the ranks holding the rank's experts */
};

/* Where expert-parallel sets lie (the compiler's ExpertPlacement, in its
 * order): P consecutive ranks whose replicas stride P (DeepSpeed's E + D),
 * or ranks striding world / P whose replicas are consecutive (D + E). */
enum {
  ZRT_EXPERT_CONTIGUOUS = 0,
  ZRT_EXPERT_STRIDED = 1,
};

/* The members of `rank`'s set of `kind` in a world of `world_size` ranks
 * with hpZ groups of `hpz_partition_size` (1: none) and MiCS shard groups
 * of `mics_shard_size` (0: none), both consecutive ranks. The group is the
 * MiCS shard group with MiCS, the world otherwise; an hpZ set without hpZ
 * is the rank alone, and so is a replica set without MiCS. The world set is
 * every rank, whatever the groups. The sequence set is the rank's group of
 * `sequence_parallel` consecutive ranks (Ulysses; 1: the rank alone), which
 * read the same rows. The expert set holds the `expert_parallel` ranks
 * (1: the rank alone) that split each MoE layer's experts, the expert
 * replica set the ranks of the same member index in every expert set (the
 * world without expert parallelism), which hold the same experts. With
 * `expert_placement` ZRT_EXPERT_CONTIGUOUS an expert set is consecutive
 * ranks and the replicas stride expert_parallel (first rank %
 * expert_parallel); with ZRT_EXPERT_STRIDED an expert set strides
 * world_size / expert_parallel (first rank % that) and the replicas are
 * consecutive. A size of 0 means an unknown kind or placement. */
static inline zrt_rank_set
zrt_rank_set_of(int32_t kind, int64_t rank, int64_t world_size,
                int64_t hpz_partition_size, int64_t mics_shard_size,
                int64_t sequence_parallel, int64_t expert_parallel,
                int32_t expert_placement) {
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
  case ZRT_RANKS_WORLD:
    s.first = 0;
    s.size = world_size;
    return s;
  case ZRT_RANKS_SEQUENCE:
    if (sequence_parallel > 1) {
      s.first = rank / sequence_parallel * sequence_parallel;
      s.size = sequence_parallel;
    }
    return s;
  case ZRT_RANKS_EXPERT:
  case ZRT_RANKS_EXPERT_REPLICAS: {
    if (expert_placement != ZRT_EXPERT_CONTIGUOUS &&
        expert_placement != ZRT_EXPERT_STRIDED)
      break;
    if (expert_parallel < 1)
      return s;
    /* The expert sets are the columns of a [replicas, P] grid of the ranks
     * in row-major order (contiguous) or of its transpose (strided). */
    int64_t replicas = world_size / expert_parallel;
    int64_t inner =
        expert_placement == ZRT_EXPERT_CONTIGUOUS ? expert_parallel : replicas;
    int64_t outer = world_size / inner;
    int expert_inner = expert_placement == ZRT_EXPERT_CONTIGUOUS;
    if ((kind == ZRT_RANKS_EXPERT) == expert_inner) {
      s.first = rank / inner * inner;
      s.size = inner;
    } else {
      s.first = rank % inner;
      s.stride = inner;
      s.size = outer;
    }
    return s;
  }
  }
  s.size = 0;
  return s;
}

/* `rank`'s member index in its expert set (the experts it holds of a
 * parameter split over the set) and in its expert replica set (the shard
 * it owns of an expert partition), for zrt_rank_set_of's placements. */
static inline int64_t zrt_expert_member(int64_t rank, int64_t world_size,
                                        int64_t expert_parallel,
                                        int32_t expert_placement) {
  if (expert_parallel <= 1)
    return 0;
  return expert_placement == ZRT_EXPERT_STRIDED
             ? rank / (world_size / expert_parallel)
             : rank % expert_parallel;
}
static inline int64_t zrt_expert_replica_index(int64_t rank, int64_t world_size,
                                               int64_t expert_parallel,
                                               int32_t expert_placement) {
  if (expert_parallel <= 1)
    return rank;
  return expert_placement == ZRT_EXPERT_STRIDED
             ? rank % (world_size / expert_parallel)
             : rank / expert_parallel;
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

/* The bytes member `me` of a rank set of `size` sends in an all-to-all of
 * `chunk` bytes to each member: directly, every chunk but its own; those to
 * the members of its node (members_per_node consecutive members) within
 * the node, the rest across nodes. */
static inline zrt_link_bytes zrt_all_to_all_link_bytes(int64_t chunk,
                                                       int64_t size,
                                                       int64_t members_per_node,
                                                       int64_t me) {
  zrt_link_bytes out = {0, 0};
  if (size <= 1 || me < 0 || me >= size || members_per_node <= 0)
    return out;
  int64_t local = members_per_node < size ? members_per_node : size;
  out.intra_node = (local - 1) * chunk;
  out.inter_node = (size - local) * chunk;
  return out;
}

/* The bytes member `me` of a rank set of `size` sends in an all-to-all of
 * bytes[j] bytes to each member j (an MoE exchange's rows, which differ by
 * member): every chunk but its own, those to the members of its node
 * (members_per_node consecutive members) within the node, the rest across
 * nodes. */
static inline zrt_link_bytes
zrt_all_to_all_v_link_bytes(const int64_t *bytes, int64_t size,
                            int64_t members_per_node, int64_t me) {
  zrt_link_bytes out = {0, 0};
  if (size <= 1 || me < 0 || me >= size || members_per_node <= 0)
    return out;
  for (int64_t j = 0; j < size; ++j) {
    if (j == me)
      continue;
    if (j / members_per_node == me / members_per_node)
      out.intra_node += bytes[j];
    else
      out.inter_node += bytes[j];
  }
  return out;
}

/* Member j's part of a quantized reduce-scatter: parts[j], or the even
 * share of n elements when parts is null (n / size, one more for the first
 * n % size members). */
static inline int64_t zrt_quantized_part(const int64_t *parts, int64_t n,
                                         int64_t size, int64_t j) {
  if (parts)
    return parts[j];
  return n / size + (j < n % size ? 1 : 0);
}

/* What member `me` of a set of `size` members, `members_per_node` on each
 * node it spans, sends at each level of a quantized reduce-scatter (ZeRO++
 * qgZ) in which member j owns zrt_quantized_part(parts, n, size, j)
 * elements. Every part travels as its own INT4 chunk of
 * zrt_quant_bytes(part, 4) bytes:
 *  - within the node, a member sends to each node peer the chunks of the
 *    parts owned at that peer's local index, on every node: every part not
 *    owned at its own local index;
 *  - across nodes, it sends its node's requantized sums of the parts owned
 *    at its local index to their owners: those parts but its own.
 * With K members on each of N nodes and equal parts m = n / (K N), that is
 * (K - 1) N Q(m) within and (N - 1) Q(m) across nodes. On one node (which
 * qgZ falls back from) it would be a single all-to-all: every part but its
 * own, within the node. */
static inline zrt_link_bytes
zrt_quantized_reduce_scatter_link_bytes(const int64_t *parts, int64_t n,
                                        int64_t size, int64_t members_per_node,
                                        int64_t me) {
  zrt_link_bytes out = {0, 0};
  if (size <= 1 || me < 0 || me >= size || members_per_node <= 0)
    return out;
  for (int64_t j = 0; j < size; ++j) {
    if (j == me)
      continue;
    int64_t bytes = zrt_quant_bytes(zrt_quantized_part(parts, n, size, j), 4);
    if (members_per_node < size &&
        j % members_per_node == me % members_per_node)
      out.inter_node += bytes;
    else
      out.intra_node += bytes;
  }
  return out;
}

/* Where member `me` of a quantized reduce-scatter keeps its staging, in
 * bytes from the start of its staging buffer (every region a multiple of 4
 * bytes, in this order). With q members per node, its local index
 * l = me % q and N = size / q nodes:
 *  - send1: the INT4 chunk of every part, by destination: for each local
 *    index l' the parts l', q + l', ..., (N - 1) q + l' (node order);
 *  - recv1: from each member of its node, by local index, the chunks of the
 *    parts l, q + l, ... of its local index;
 *  - sums:  those N parts summed in fp32, one after the other; at the end,
 *    the first parts[me] floats hold this member's sum;
 *  - send2: the N sums requantized, in node order (the destinations);
 *  - recv2: from each node, in node order, the chunk of this member's part.
 * A member's own contributions never travel: its chunks for its own local
 * index (in send1 and recv1) and its node's sum of its own part (in send2
 * and recv2) are left unused, and those sums are taken exact instead.
 * `total` is the bytes it uses. Parts are as in
 * zrt_quantized_reduce_scatter_link_bytes (n and parts). */
typedef struct zrt_qgz_staging {
  int64_t send1, recv1, sums, send2, recv2, total;
} zrt_qgz_staging;

/* The regions from their sizes: `all` bytes of every part's chunk, q
 * members per node on `nodes` nodes, `mine` bytes and `mine_elems`
 * elements of the parts of the member's local index, `own` bytes of its
 * own part's chunk. */
static inline zrt_qgz_staging zrt_qgz_regions(int64_t all, int64_t q,
                                              int64_t nodes, int64_t mine,
                                              int64_t mine_elems, int64_t own) {
  zrt_qgz_staging s;
  s.send1 = 0;
  s.recv1 = s.send1 + all;
  s.sums = s.recv1 + q * mine;
  s.send2 = s.sums + 4 * mine_elems;
  s.recv2 = s.send2 + mine;
  s.total = s.recv2 + nodes * own;
  return s;
}

/* The chunk bytes of every part. */
static inline int64_t zrt_qgz_all_bytes(const int64_t *parts, int64_t n,
                                        int64_t size) {
  int64_t all = 0;
  for (int64_t j = 0; j < size; ++j)
    all += zrt_quant_bytes(zrt_quantized_part(parts, n, size, j), 4);
  return all;
}

static inline zrt_qgz_staging
zrt_quantized_reduce_scatter_staging(const int64_t *parts, int64_t n,
                                     int64_t size, int64_t members_per_node,
                                     int64_t me) {
  zrt_qgz_staging s = {0, 0, 0, 0, 0, 0};
  if (size < 1 || me < 0 || me >= size || members_per_node <= 0)
    return s;
  int64_t q = members_per_node < size ? members_per_node : size;
  int64_t nodes = size / q, l = me % q, mine = 0, mineElems = 0;
  for (int64_t m = 0; m < nodes; ++m) {
    int64_t part = zrt_quantized_part(parts, n, size, m * q + l);
    mine += zrt_quant_bytes(part, 4);
    mineElems += part;
  }
  return zrt_qgz_regions(
      zrt_qgz_all_bytes(parts, n, size), q, nodes, mine, mineElems,
      zrt_quant_bytes(zrt_quantized_part(parts, n, size, me), 4));
}

/* The staging a quantized reduce-scatter plans: the most any member uses
 * (the program is the same on every rank). */
static inline int64_t zrt_quantized_reduce_scatter_staging_bytes(
    const int64_t *parts, int64_t n, int64_t size, int64_t members_per_node) {
  if (size < 1 || members_per_node <= 0)
    return 0;
  int64_t q = members_per_node < size ? members_per_node : size;
  int64_t nodes = size / q, all = zrt_qgz_all_bytes(parts, n, size), most = 0;
  for (int64_t l = 0; l < q; ++l) {
    int64_t mine = 0, mineElems = 0;
    for (int64_t m = 0; m < nodes; ++m) {
      int64_t part = zrt_quantized_part(parts, n, size, m * q + l);
      mine += zrt_quant_bytes(part, 4);
      mineElems += part;
    }
    for (int64_t m = 0; m < nodes; ++m) {
      int64_t own =
          zrt_quant_bytes(zrt_quantized_part(parts, n, size, m * q + l), 4);
      int64_t t = zrt_qgz_regions(all, q, nodes, mine, mineElems, own).total;
      if (t > most)
        most = t;
    }
  }
  return most;
}

#ifdef __cplusplus
}
#endif

#endif /* ZERO_RT_TOPOLOGY_H */
