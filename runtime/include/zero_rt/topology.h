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
 * replicas, a sequence-parallel group: a subset of the axes of the ranks'
 * zrt_mesh). When the members span several
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

/* The named axes of a mesh (the compiler's MeshAxis, in its order). */
enum {
  ZRT_AXIS_DATA = 0,     /* the data-parallel replicas */
  ZRT_AXIS_HPZ = 1,      /* ZeRO++ hpZ's secondary partition */
  ZRT_AXIS_MICS = 2,     /* MiCS's shard groups */
  ZRT_AXIS_SEQUENCE = 3, /* Ulysses sequence parallelism */
  ZRT_AXIS_EXPERT = 4,   /* expert parallelism */
  ZRT_AXIS_COUNT = 5,
};

enum { ZRT_MESH_MAX_AXES = 8 };

/* The ranks as a grid of named axes, outermost first: rank r's index on
 * each axis is its digit in the mixed radix of `sizes`, the last axis
 * varying fastest (upstream MLIR shard.grid's linear index). Each axis
 * appears at most once; the world size is the product of the sizes. A
 * rank set is a subset of the axes: the ranks whose indices differ from
 * r's on those axes only. */
typedef struct zrt_mesh {
  int32_t num_axes;
  int32_t axes[ZRT_MESH_MAX_AXES];
  int64_t sizes[ZRT_MESH_MAX_AXES];
} zrt_mesh;

/* The position of `axis` in `mesh`, or -1. */
static inline int32_t zrt_mesh_find(const zrt_mesh *mesh, int32_t axis) {
  for (int32_t i = 0; i < mesh->num_axes; ++i)
    if (mesh->axes[i] == axis)
      return i;
  return -1;
}

/* The ranks of `mesh`: the product of its sizes. */
static inline int64_t zrt_mesh_size(const zrt_mesh *mesh) {
  int64_t n = 1;
  for (int32_t i = 0; i < mesh->num_axes; ++i)
    n *= mesh->sizes[i];
  return n;
}

/* The axis at position `pos` of `mesh` and every axis inside it, as
 * zrt_mesh_axes_of's bits (none for a position of -1). */
static inline int64_t zrt_mesh_inner_axes(const zrt_mesh *mesh, int32_t pos) {
  if (pos < 0)
    return 0;
  return ((INT64_C(1) << mesh->num_axes) - 1) & ~((INT64_C(1) << pos) - 1);
}

/* The axes of a rank set of `kind` in `mesh`, as a bit per position (bit
 * i: mesh->axes[i]), or -1 for an unknown kind. The hpZ, MiCS and
 * sequence axes nest inside the data axis, each set holding its axis and
 * every axis inside it: a MiCS group of 4 with sequence groups of 2 is
 * [data, mics = 2, sequence = 2], its shard group {mics, sequence}. So:
 *  - world: every axis;
 *  - group: the MiCS axis and those inside it, every axis without MiCS;
 *  - replicas: the axes outside the MiCS axis (none without MiCS);
 *  - hpz, sequence: that axis and those inside it (none without it);
 *  - expert: the expert axis alone; it lies inside the data axis for
 *    contiguous sets (DeepSpeed's E + D) and outside for strided (D + E);
 *  - expert replicas: every axis but the expert axis. */
static inline int64_t zrt_mesh_axes_of(int32_t kind, const zrt_mesh *mesh) {
  int64_t all = (INT64_C(1) << mesh->num_axes) - 1;
  int32_t mics = zrt_mesh_find(mesh, ZRT_AXIS_MICS);
  int32_t expert = zrt_mesh_find(mesh, ZRT_AXIS_EXPERT);
  switch (kind) {
  case ZRT_RANKS_WORLD:
    return all;
  case ZRT_RANKS_GROUP:
    return mics < 0 ? all : zrt_mesh_inner_axes(mesh, mics);
  case ZRT_RANKS_REPLICAS:
    return mics < 0 ? 0 : all & ~zrt_mesh_inner_axes(mesh, mics);
  case ZRT_RANKS_HPZ:
    return zrt_mesh_inner_axes(mesh, zrt_mesh_find(mesh, ZRT_AXIS_HPZ));
  case ZRT_RANKS_SEQUENCE:
    return zrt_mesh_inner_axes(mesh, zrt_mesh_find(mesh, ZRT_AXIS_SEQUENCE));
  case ZRT_RANKS_EXPERT:
    return expert < 0 ? 0 : INT64_C(1) << expert;
  case ZRT_RANKS_EXPERT_REPLICAS:
    return expert < 0 ? all : all & ~(INT64_C(1) << expert);
  }
  return -1;
}

/* The ranks of `rank`'s set over the axes `axes` (zrt_mesh_axes_of's
 * bits) in member order. They are an arithmetic progression when the
 * axes are one run of the mesh's axes, axes of size 1 aside: a size of 0
 * says they are not. No axes: the rank alone. */
static inline zrt_rank_set zrt_mesh_rank_set(const zrt_mesh *mesh, int64_t axes,
                                             int64_t rank) {
  zrt_rank_set s = {rank, 1, 1};
  int64_t inner = 1;
  int32_t i = mesh->num_axes - 1;
  /* Axes inside the run, then the run, then no more of it. */
  for (; i >= 0 && !((axes >> i) & 1); --i)
    inner *= mesh->sizes[i];
  int64_t size = 1;
  for (; i >= 0 && (((axes >> i) & 1) || mesh->sizes[i] == 1); --i)
    size *= mesh->sizes[i];
  for (; i >= 0; --i)
    if ((axes >> i) & 1) {
      s.size = 0;
      return s;
    }
  if (axes == 0)
    return s;
  s.first = rank / (size * inner) * (size * inner) + rank % inner;
  s.stride = inner;
  s.size = size;
  return s;
}

/* The members of `rank`'s set of `kind` in `mesh`. The world set is every
 * rank; the group is the MiCS shard group with MiCS, the world otherwise;
 * an hpZ, sequence or expert set without its axis is the rank alone, and
 * so is a replica set without MiCS. A size of 0 means an unknown kind. */
static inline zrt_rank_set zrt_rank_set_of(int32_t kind, int64_t rank,
                                           const zrt_mesh *mesh) {
  int64_t axes = zrt_mesh_axes_of(kind, mesh);
  if (axes < 0) {
    zrt_rank_set none = {rank, 1, 0};
    return none;
  }
  return zrt_mesh_rank_set(mesh, axes, rank);
}

/* The mesh of the sizes a ds_config or command line gives: a world of
 * `world_size` ranks with hpZ groups of `hpz_partition_size` (1: none),
 * MiCS shard groups of `mics_shard_size` (0: none) and sequence-parallel
 * groups of `sequence_parallel` (1: none), each of consecutive ranks, and
 * expert sets of `expert_parallel` (1: none) placed by `expert_placement`.
 * The hpZ, MiCS and sequence axes nest inside the data axis, the larger
 * groups outside (a tie puts hpZ or MiCS outside, of size 1); an expert
 * axis comes with a data axis alone, inside it or outside it by the
 * placement. Returns 0, or 1 when the sizes form no mesh: one that does
 * not divide the world size, groups of which neither holds the other
 * (hpZ groups of 6 and sequence groups of 4 in 12 ranks), or an expert
 * axis with another, or an unknown placement. */
static inline int32_t zrt_mesh_from_sizes(zrt_mesh *out, int64_t world_size,
                                          int64_t hpz_partition_size,
                                          int64_t mics_shard_size,
                                          int64_t sequence_parallel,
                                          int64_t expert_parallel,
                                          int32_t expert_placement) {
  out->num_axes = 0;
  if (world_size < 1)
    return 1;
  if (expert_parallel > 1) {
    if (hpz_partition_size > 1 || mics_shard_size > 0 ||
        sequence_parallel > 1 || world_size % expert_parallel != 0 ||
        (expert_placement != ZRT_EXPERT_CONTIGUOUS &&
         expert_placement != ZRT_EXPERT_STRIDED))
      return 1;
    int32_t strided = expert_placement == ZRT_EXPERT_STRIDED;
    out->num_axes = 2;
    out->axes[strided ? 1 : 0] = ZRT_AXIS_DATA;
    out->sizes[strided ? 1 : 0] = world_size / expert_parallel;
    out->axes[strided ? 0 : 1] = ZRT_AXIS_EXPERT;
    out->sizes[strided ? 0 : 1] = expert_parallel;
    return 0;
  }
  /* The nested axes by group size, largest (outermost) first. */
  int32_t axes[3];
  int64_t groups[3];
  int32_t n = 0;
  if (hpz_partition_size > 1) {
    axes[n] = ZRT_AXIS_HPZ;
    groups[n++] = hpz_partition_size;
  }
  if (mics_shard_size > 0) {
    axes[n] = ZRT_AXIS_MICS;
    groups[n++] = mics_shard_size;
  }
  if (sequence_parallel > 1) {
    axes[n] = ZRT_AXIS_SEQUENCE;
    groups[n++] = sequence_parallel;
  }
  for (int32_t i = 1; i < n; ++i)
    for (int32_t j = i; j > 0 && groups[j] > groups[j - 1]; --j) {
      int32_t a = axes[j];
      int64_t g = groups[j];
      axes[j] = axes[j - 1];
      groups[j] = groups[j - 1];
      axes[j - 1] = a;
      groups[j - 1] = g;
    }
  int64_t outer = world_size;
  out->axes[0] = ZRT_AXIS_DATA;
  out->num_axes = n + 1;
  for (int32_t i = 0; i <= n; ++i) {
    int64_t g = i < n ? groups[i] : 1;
    if (g < 1 || outer % g != 0)
      return 1;
    out->sizes[i] = outer / g;
    if (i < n)
      out->axes[i + 1] = axes[i];
    outer = g;
  }
  return 0;
}

/* The sizes a mesh stands for, as zrt_mesh_from_sizes takes them. */
static inline int64_t zrt_mesh_hpz_partition_size(const zrt_mesh *mesh) {
  return zrt_rank_set_of(ZRT_RANKS_HPZ, 0, mesh).size;
}
static inline int64_t zrt_mesh_mics_shard_size(const zrt_mesh *mesh) {
  return zrt_mesh_find(mesh, ZRT_AXIS_MICS) < 0
             ? 0
             : zrt_rank_set_of(ZRT_RANKS_GROUP, 0, mesh).size;
}
static inline int64_t zrt_mesh_sequence_parallel(const zrt_mesh *mesh) {
  return zrt_rank_set_of(ZRT_RANKS_SEQUENCE, 0, mesh).size;
}
static inline int64_t zrt_mesh_expert_parallel(const zrt_mesh *mesh) {
  return zrt_rank_set_of(ZRT_RANKS_EXPERT, 0, mesh).size;
}
static inline int32_t zrt_mesh_expert_placement(const zrt_mesh *mesh) {
  int32_t expert = zrt_mesh_find(mesh, ZRT_AXIS_EXPERT);
  return expert >= 0 && expert < zrt_mesh_find(mesh, ZRT_AXIS_DATA)
             ? ZRT_EXPERT_STRIDED
             : ZRT_EXPERT_CONTIGUOUS;
}

/* `rank`'s index in its set of `kind` in `mesh`: in its expert set, the
 * experts it holds of a parameter split over the set; in its expert
 * replica set, the shard it owns of an expert partition. */
static inline int64_t zrt_member_index(int32_t kind, int64_t rank,
                                       const zrt_mesh *mesh) {
  zrt_rank_set s = zrt_rank_set_of(kind, rank, mesh);
  return s.size > 0 ? (rank - s.first) / s.stride : 0;
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
