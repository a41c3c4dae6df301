/*===- TopologyTest.c - zero_rt/topology.h on hand-computed cases ---------===*
 *
 * Part of the zero-mlir project.
 *
 * The header is C with no dependency, included by the C++ compiler and
 * runtime: this file is compiled as C and, through TopologyTest.cpp, as
 * C++. Every expected value is worked out by hand from the header's rules.
 *
 *===----------------------------------------------------------------------===*/

#include "zero_rt/topology.h"

#include <stdio.h>

static int failures = 0;

static void expect(int64_t got, int64_t want, const char *what, int line) {
  if (got != want) {
    fprintf(stderr, "TopologyTest line %d: %s: got %lld, want %lld\n", line,
            what, (long long)got, (long long)want);
    ++failures;
  }
}
#define EXPECT(got, want) expect((got), (want), #got, __LINE__)

static zrt_rank_set set(int64_t first, int64_t stride, int64_t size) {
  zrt_rank_set s;
  s.first = first;
  s.stride = stride;
  s.size = size;
  return s;
}

static void expectSet(zrt_rank_set got, int64_t first, int64_t stride,
                      int64_t size, int line) {
  expect(got.first, first, "first", line);
  expect(got.stride, stride, "stride", line);
  expect(got.size, size, "size", line);
}

static void expectLinks(zrt_link_bytes got, int64_t intra, int64_t inter,
                        int line) {
  expect(got.intra_node, intra, "intra_node", line);
  expect(got.inter_node, inter, "inter_node", line);
}

/* zrt_rank_set_of over the mesh of the sizes (zrt_mesh_from_sizes); an
 * empty set when they form none. */
static zrt_rank_set setOf(int32_t kind, int64_t rank, int64_t world,
                          int64_t hpz, int64_t mics, int64_t sp, int64_t ep,
                          int32_t placement) {
  zrt_mesh mesh;
  if (zrt_mesh_from_sizes(&mesh, world, hpz, mics, sp, ep, placement))
    return set(rank, 1, 0);
  return zrt_rank_set_of(kind, rank, &mesh);
}

static int64_t memberOf(int32_t kind, int64_t rank, int64_t world, int64_t ep,
                        int32_t placement) {
  zrt_mesh mesh;
  zrt_mesh_from_sizes(&mesh, world, 1, 0, 1, ep, placement);
  return zrt_member_index(kind, rank, &mesh);
}

static void membersPerNode(void) {
  /* One node: every member. */
  EXPECT(zrt_members_per_node(set(0, 1, 4), 0), 4);
  EXPECT(zrt_members_per_node(set(0, 1, 4), 4), 4);
  /* 2 nodes x 2, 4 nodes x 1. */
  EXPECT(zrt_members_per_node(set(0, 1, 4), 2), 2);
  EXPECT(zrt_members_per_node(set(0, 1, 4), 1), 1);
  /* An hpZ group within node 1 of 2 x 2. */
  EXPECT(zrt_members_per_node(set(2, 1, 2), 2), 2);
  /* MiCS replicas {1, 3} of 2 x 2: one member on each node. */
  EXPECT(zrt_members_per_node(set(1, 2, 2), 2), 1);
  /* Ranks 1 and 2 straddle nodes 0 and 1, one member on each. */
  EXPECT(zrt_members_per_node(set(1, 1, 2), 2), 1);
  /* Sets that do not split evenly: 1 + 2 members, 4 + 2 members. */
  EXPECT(zrt_members_per_node(set(1, 1, 3), 2), 0);
  EXPECT(zrt_members_per_node(set(0, 1, 6), 4), 0);
  /* Empty or malformed sets. */
  EXPECT(zrt_members_per_node(set(0, 1, 0), 2), 0);
  EXPECT(zrt_members_per_node(set(-1, 1, 2), 2), 0);
  EXPECT(zrt_members_per_node(set(0, 0, 2), 2), 0);
}

static void rankSets(void) {
  expectSet(setOf(ZRT_RANKS_GROUP, 5, 8, 1, 0, 1, 1, ZRT_EXPERT_CONTIGUOUS), 0,
            1, 8, __LINE__);
  expectSet(setOf(ZRT_RANKS_GROUP, 5, 8, 1, 4, 1, 1, ZRT_EXPERT_CONTIGUOUS), 4,
            1, 4, __LINE__);
  expectSet(setOf(ZRT_RANKS_HPZ, 5, 8, 2, 0, 1, 1, ZRT_EXPERT_CONTIGUOUS), 4, 1,
            2, __LINE__);
  expectSet(setOf(ZRT_RANKS_HPZ, 5, 8, 1, 0, 1, 1, ZRT_EXPERT_CONTIGUOUS), 5, 1,
            1, __LINE__);
  expectSet(setOf(ZRT_RANKS_REPLICAS, 5, 8, 1, 4, 1, 1, ZRT_EXPERT_CONTIGUOUS),
            1, 4, 2, __LINE__);
  expectSet(setOf(ZRT_RANKS_REPLICAS, 5, 8, 1, 0, 1, 1, ZRT_EXPERT_CONTIGUOUS),
            5, 1, 1, __LINE__);
  expectSet(setOf(ZRT_RANKS_WORLD, 5, 8, 2, 4, 1, 1, ZRT_EXPERT_CONTIGUOUS), 0,
            1, 8, __LINE__);
  expectSet(setOf(ZRT_RANKS_WORLD, 5, 8, 1, 0, 1, 1, ZRT_EXPERT_CONTIGUOUS), 0,
            1, 8, __LINE__);
  /* Sequence-parallel groups of 4 consecutive ranks; 1: the rank alone. */
  expectSet(setOf(ZRT_RANKS_SEQUENCE, 5, 8, 2, 0, 4, 1, ZRT_EXPERT_CONTIGUOUS),
            4, 1, 4, __LINE__);
  expectSet(setOf(ZRT_RANKS_SEQUENCE, 2, 8, 1, 0, 2, 1, ZRT_EXPERT_CONTIGUOUS),
            2, 1, 2, __LINE__);
  expectSet(setOf(ZRT_RANKS_SEQUENCE, 5, 8, 1, 0, 1, 1, ZRT_EXPERT_CONTIGUOUS),
            5, 1, 1, __LINE__);
  expectSet(setOf(ZRT_RANKS_WORLD, 5, 8, 1, 0, 4, 1, ZRT_EXPERT_CONTIGUOUS), 0,
            1, 8, __LINE__);
  /* Expert-parallel groups of 2 consecutive ranks and the ranks holding the
   * same experts (every second rank); without expert parallelism the rank
   * alone and the world. */
  expectSet(setOf(ZRT_RANKS_EXPERT, 5, 8, 1, 0, 1, 2, ZRT_EXPERT_CONTIGUOUS), 4,
            1, 2, __LINE__);
  expectSet(setOf(ZRT_RANKS_EXPERT, 5, 8, 1, 0, 1, 4, ZRT_EXPERT_CONTIGUOUS), 4,
            1, 4, __LINE__);
  expectSet(setOf(ZRT_RANKS_EXPERT, 5, 8, 1, 0, 1, 1, ZRT_EXPERT_CONTIGUOUS), 5,
            1, 1, __LINE__);
  expectSet(
      setOf(ZRT_RANKS_EXPERT_REPLICAS, 5, 8, 1, 0, 1, 2, ZRT_EXPERT_CONTIGUOUS),
      1, 2, 4, __LINE__);
  expectSet(
      setOf(ZRT_RANKS_EXPERT_REPLICAS, 6, 8, 1, 0, 1, 4, ZRT_EXPERT_CONTIGUOUS),
      2, 4, 2, __LINE__);
  expectSet(
      setOf(ZRT_RANKS_EXPERT_REPLICAS, 5, 8, 1, 0, 1, 1, ZRT_EXPERT_CONTIGUOUS),
      0, 1, 8, __LINE__);
  /* The other kinds ignore the expert-parallel size. */
  expectSet(setOf(ZRT_RANKS_GROUP, 5, 8, 1, 0, 1, 2, ZRT_EXPERT_CONTIGUOUS), 0,
            1, 8, __LINE__);
  EXPECT(setOf(7, 5, 8, 1, 0, 1, 1, ZRT_EXPERT_CONTIGUOUS).size, 0);
  /* Strided expert sets of 2 on 8 ranks: {r % 4, r % 4 + 4}, the replicas
   * the 4 consecutive ranks of r's half; ep 4: stride 2, replicas pairs. */
  expectSet(setOf(ZRT_RANKS_EXPERT, 5, 8, 1, 0, 1, 2, ZRT_EXPERT_STRIDED), 1, 4,
            2, __LINE__);
  expectSet(
      setOf(ZRT_RANKS_EXPERT_REPLICAS, 5, 8, 1, 0, 1, 2, ZRT_EXPERT_STRIDED), 4,
      1, 4, __LINE__);
  expectSet(setOf(ZRT_RANKS_EXPERT, 5, 8, 1, 0, 1, 4, ZRT_EXPERT_STRIDED), 1, 2,
            4, __LINE__);
  expectSet(
      setOf(ZRT_RANKS_EXPERT_REPLICAS, 5, 8, 1, 0, 1, 4, ZRT_EXPERT_STRIDED), 4,
      1, 2, __LINE__);
  /* ep 8 of 64 ranks, 8 per node: contiguous sets are one node each and
   * their replicas one rank per node; strided sets one rank per node and
   * their replicas one node. */
  EXPECT(zrt_members_per_node(
             setOf(ZRT_RANKS_EXPERT, 13, 64, 1, 0, 1, 8, ZRT_EXPERT_CONTIGUOUS),
             8),
         8);
  EXPECT(zrt_members_per_node(setOf(ZRT_RANKS_EXPERT_REPLICAS, 13, 64, 1, 0, 1,
                                    8, ZRT_EXPERT_CONTIGUOUS),
                              8),
         1);
  EXPECT(
      zrt_members_per_node(
          setOf(ZRT_RANKS_EXPERT, 13, 64, 1, 0, 1, 8, ZRT_EXPERT_STRIDED), 8),
      1);
  EXPECT(zrt_members_per_node(setOf(ZRT_RANKS_EXPERT_REPLICAS, 13, 64, 1, 0, 1,
                                    8, ZRT_EXPERT_STRIDED),
                              8),
         8);
  /* Member and shard indices follow the sets: rank 5 is member 1 of {1, 5}
   * and index 1 of {4..7}; contiguous, member 1 of {4, 5} and index 2 of
   * {1, 3, 5, 7}. An unknown placement is an empty set. */
  EXPECT(memberOf(ZRT_RANKS_EXPERT, 5, 8, 2, ZRT_EXPERT_STRIDED), 1);
  EXPECT(memberOf(ZRT_RANKS_EXPERT_REPLICAS, 5, 8, 2, ZRT_EXPERT_STRIDED), 1);
  EXPECT(memberOf(ZRT_RANKS_EXPERT, 5, 8, 2, ZRT_EXPERT_CONTIGUOUS), 1);
  EXPECT(memberOf(ZRT_RANKS_EXPERT_REPLICAS, 5, 8, 2, ZRT_EXPERT_CONTIGUOUS),
         2);
  EXPECT(setOf(ZRT_RANKS_EXPERT, 5, 8, 1, 0, 1, 2, 7).size, 0);
  /* Nested groups: MiCS 4 holding sequence groups of 2 is [data = 2,
   * mics = 2, sequence = 2]; MiCS 2 inside sequence groups of 4 is
   * [data = 2, sequence = 2, mics = 2], its replicas {data, sequence}. */
  expectSet(setOf(ZRT_RANKS_GROUP, 5, 8, 1, 4, 2, 1, ZRT_EXPERT_CONTIGUOUS), 4,
            1, 4, __LINE__);
  expectSet(setOf(ZRT_RANKS_SEQUENCE, 5, 8, 1, 4, 2, 1, ZRT_EXPERT_CONTIGUOUS),
            4, 1, 2, __LINE__);
  expectSet(setOf(ZRT_RANKS_GROUP, 5, 8, 1, 2, 4, 1, ZRT_EXPERT_CONTIGUOUS), 4,
            1, 2, __LINE__);
  expectSet(setOf(ZRT_RANKS_REPLICAS, 5, 8, 1, 2, 4, 1, ZRT_EXPERT_CONTIGUOUS),
            1, 2, 4, __LINE__);
  expectSet(setOf(ZRT_RANKS_SEQUENCE, 5, 8, 1, 2, 4, 1, ZRT_EXPERT_CONTIGUOUS),
            4, 1, 4, __LINE__);
  /* Equal groups: [data = 2, hpz = 1, sequence = 4]. */
  expectSet(setOf(ZRT_RANKS_HPZ, 5, 8, 4, 0, 4, 1, ZRT_EXPERT_CONTIGUOUS), 4, 1,
            4, __LINE__);
  expectSet(setOf(ZRT_RANKS_SEQUENCE, 5, 8, 4, 0, 4, 1, ZRT_EXPERT_CONTIGUOUS),
            4, 1, 4, __LINE__);
  /* Groups of which neither holds the other form no mesh. */
  zrt_mesh mesh;
  EXPECT(zrt_mesh_from_sizes(&mesh, 12, 6, 0, 4, 1, ZRT_EXPERT_CONTIGUOUS), 1);
  EXPECT(zrt_mesh_from_sizes(&mesh, 8, 2, 0, 1, 2, ZRT_EXPERT_CONTIGUOUS), 1);
  /* The sizes come back from the mesh. */
  EXPECT(zrt_mesh_from_sizes(&mesh, 16, 1, 2, 4, 1, ZRT_EXPERT_CONTIGUOUS), 0);
  EXPECT(zrt_mesh_size(&mesh), 16);
  EXPECT(zrt_mesh_mics_shard_size(&mesh), 2);
  EXPECT(zrt_mesh_sequence_parallel(&mesh), 4);
  EXPECT(zrt_mesh_hpz_partition_size(&mesh), 1);
  EXPECT(zrt_mesh_from_sizes(&mesh, 8, 1, 0, 1, 4, ZRT_EXPERT_STRIDED), 0);
  EXPECT(zrt_mesh_expert_parallel(&mesh), 4);
  EXPECT(zrt_mesh_expert_placement(&mesh), ZRT_EXPERT_STRIDED);
  /* Axes that are not one run are no arithmetic progression: {data,
   * sequence} of [data = 2, hpz = 2, sequence = 2]. */
  EXPECT(zrt_mesh_from_sizes(&mesh, 8, 4, 0, 2, 1, ZRT_EXPERT_CONTIGUOUS), 0);
  EXPECT(zrt_mesh_rank_set(&mesh, 5, 3).size, 0);
  expectSet(zrt_mesh_rank_set(&mesh, 6, 3), 0, 1, 4, __LINE__);
  EXPECT(zrt_node_of(5, 2), 2);
  EXPECT(zrt_node_of(5, 0), 0);
}

static void linkBytes(void) {
  const int64_t chunks[4] = {10, 20, 30, 40};
  /* One node: the ring's every part but the member's own. */
  expectLinks(zrt_collective_link_bytes(chunks, 4, 4, 0, 1), 90, 0, __LINE__);
  expectLinks(zrt_collective_link_bytes(chunks, 4, 4, 2, 1), 70, 0, __LINE__);
  /* 2 x 2: member 0 crosses with member 2 (10 + 30), member 1 with 3. */
  expectLinks(zrt_collective_link_bytes(chunks, 4, 2, 0, 1), 60, 30, __LINE__);
  expectLinks(zrt_collective_link_bytes(chunks, 4, 2, 1, 1), 40, 40, __LINE__);
  expectLinks(zrt_collective_link_bytes(chunks, 4, 2, 3, 1), 40, 20, __LINE__);
  /* An all-reduce: two passes. */
  expectLinks(zrt_collective_link_bytes(chunks, 4, 2, 0, 2), 120, 60, __LINE__);
  /* 4 nodes x 1: everything crosses nodes. */
  expectLinks(zrt_collective_link_bytes(chunks, 4, 1, 0, 1), 0, 90, __LINE__);
  /* Uneven layout chunks (the last ranks own less or nothing). */
  {
    const int64_t uneven[4] = {3, 3, 2, 0};
    expectLinks(zrt_collective_link_bytes(uneven, 4, 2, 2, 1), 3, 3, __LINE__);
    expectLinks(zrt_collective_link_bytes(uneven, 4, 2, 3, 1), 5, 3, __LINE__);
  }
  /* A set that does not split evenly, a single member, a bad member. */
  expectLinks(zrt_collective_link_bytes(chunks, 4, 0, 0, 1), 0, 0, __LINE__);
  expectLinks(zrt_collective_link_bytes(chunks, 1, 1, 0, 1), 0, 0, __LINE__);
  expectLinks(zrt_collective_link_bytes(chunks, 4, 2, 4, 1), 0, 0, __LINE__);
}

static void quantizedReduceScatter(void) {
  /* 2 x 2, 4096 elements: parts of 1024 = 8 blocks of 128, 512 payload
   * bytes, so Q = 32 + 512 = 544. Within the node (K - 1) N Q = 2 Q, across
   * (N - 1) Q = Q, for every member. */
  expectLinks(zrt_quantized_reduce_scatter_link_bytes(0, 4096, 4, 2, 0), 1088,
              544, __LINE__);
  expectLinks(zrt_quantized_reduce_scatter_link_bytes(0, 4096, 4, 2, 3), 1088,
              544, __LINE__);
  /* 2 nodes x 4 (K 4, N 2), parts of 1000: 8 scales, 500 payload bytes,
   * Q = 532; within (4 - 1) * 2 * Q, across Q. */
  expectLinks(zrt_quantized_reduce_scatter_link_bytes(0, 8000, 8, 4, 5),
              6 * 532, 532, __LINE__);
  /* 4 nodes x 1: every part crosses nodes. */
  expectLinks(zrt_quantized_reduce_scatter_link_bytes(0, 4096, 4, 1, 2), 0,
              3 * 544, __LINE__);
  /* One node: one all-to-all, within the node. */
  expectLinks(zrt_quantized_reduce_scatter_link_bytes(0, 4096, 4, 4, 1),
              3 * 544, 0, __LINE__);
  /* Uneven layout parts: 300 (3 scales, 150 payload: 162 -> 164), 1 (4 + 1
   * -> 8), 0 (nothing) and 513 (5 scales, 257 payload: 277 -> 280).
   * Member 0 on 2 x 2: within 8 + 280, across 0 (part 2 is empty). */
  {
    const int64_t parts[4] = {300, 1, 0, 513};
    expectLinks(zrt_quantized_reduce_scatter_link_bytes(parts, 0, 4, 2, 0), 288,
                0, __LINE__);
    expectLinks(zrt_quantized_reduce_scatter_link_bytes(parts, 0, 4, 2, 1), 164,
                280, __LINE__);
  }
  /* Even shares of 10 over 4: 3, 3, 2, 2 (Q 8 each; 4 + 2 payload bytes). */
  EXPECT(zrt_quantized_part(0, 10, 4, 0), 3);
  EXPECT(zrt_quantized_part(0, 10, 4, 3), 2);
  expectLinks(zrt_quantized_reduce_scatter_link_bytes(0, 10, 4, 2, 0), 16, 8,
              __LINE__);
  /* Staging of member 0 of 2 x 2, 4096 elements: send1 every chunk
   * (4 x 544), recv1 2 peers x 2 chunks, sums 2 x 1024 floats, send2 2
   * chunks, recv2 2 chunks. Equal parts: every member plans the same. */
  {
    zrt_qgz_staging s = zrt_quantized_reduce_scatter_staging(0, 4096, 4, 2, 0);
    EXPECT(s.send1, 0);
    EXPECT(s.recv1, 2176);
    EXPECT(s.sums, 4352);
    EXPECT(s.send2, 12544);
    EXPECT(s.recv2, 13632);
    EXPECT(s.total, 14720);
    EXPECT(zrt_quantized_reduce_scatter_staging(0, 4096, 4, 2, 3).total, 14720);
    EXPECT(zrt_quantized_reduce_scatter_staging_bytes(0, 4096, 4, 2), 14720);
  }
  /* Uneven parts {300, 1, 0, 513} (chunks 164, 8, 0, 280; 452 in all):
   * local index 0 holds parts 0 and 2 (164 bytes, 300 elements), local
   * index 1 parts 1 and 3 (288 bytes, 514 elements). Member 3 uses the
   * most: 452 + 2 x 288 + 4 x 514 + 288 + 2 x 280 = 3932. */
  {
    const int64_t parts[4] = {300, 1, 0, 513};
    EXPECT(zrt_quantized_reduce_scatter_staging(parts, 0, 4, 2, 0).total, 2472);
    EXPECT(zrt_quantized_reduce_scatter_staging(parts, 0, 4, 2, 1).total, 3388);
    EXPECT(zrt_quantized_reduce_scatter_staging(parts, 0, 4, 2, 2).total, 2144);
    EXPECT(zrt_quantized_reduce_scatter_staging(parts, 0, 4, 2, 3).total, 3932);
    EXPECT(zrt_quantized_reduce_scatter_staging_bytes(parts, 0, 4, 2), 3932);
  }
  EXPECT(zrt_quantized_reduce_scatter_staging(0, 4096, 4, 2, 4).total, 0);
  EXPECT(zrt_quantized_reduce_scatter_staging_bytes(0, 4096, 4, 0), 0);
  /* Nothing to send: a single member, a bad member, an uneven set. */
  expectLinks(zrt_quantized_reduce_scatter_link_bytes(0, 4096, 1, 1, 0), 0, 0,
              __LINE__);
  expectLinks(zrt_quantized_reduce_scatter_link_bytes(0, 4096, 4, 2, 4), 0, 0,
              __LINE__);
  expectLinks(zrt_quantized_reduce_scatter_link_bytes(0, 4096, 4, 0, 0), 0, 0,
              __LINE__);
}

/* An all-to-all whose chunks differ by member: every chunk but the
 * member's own, split by node. */
static void allToAllVLinkBytes(void) {
  const int64_t bytes[4] = {10, 20, 30, 40};
  zrt_link_bytes b = zrt_all_to_all_v_link_bytes(bytes, 4, 4, 1);
  EXPECT(b.intra_node, 80);
  EXPECT(b.inter_node, 0);
  b = zrt_all_to_all_v_link_bytes(bytes, 4, 2, 1);
  EXPECT(b.intra_node, 10);
  EXPECT(b.inter_node, 70);
  b = zrt_all_to_all_v_link_bytes(bytes, 4, 2, 2);
  EXPECT(b.intra_node, 40);
  EXPECT(b.inter_node, 30);
  b = zrt_all_to_all_v_link_bytes(bytes, 1, 1, 0);
  EXPECT(b.intra_node, 0);
  EXPECT(b.inter_node, 0);
}

int main(void) {
  membersPerNode();
  rankSets();
  linkBytes();
  allToAllVLinkBytes();
  quantizedReduceScatter();
  if (failures)
    fprintf(stderr, "TopologyTest: %d failures\n", failures);
  return failures ? 1 : 0;
}
