//===- Collectives.h - The communicator of both backends --------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// The zrt_ctx_* calls (Program.cpp) and the world's lifetime (World.cpp) are
// written once; what differs between MPI and NCCL is behind these functions,
// which each backend implements (Comm.cpp, cuda/src/Collectives/CommCuda.cpp).
// Every collective returns the tokens zrt_wait consumes, one or more: MPI
// starts a request per call, NCCL groups the calls and records one event.
//
// Layout ranges split unevenly over ranks (the last shard is clipped to
// numel), so the in-place forms take per-rank counts: buf holds every rank's
// segment of counts[r] elements at displs[r], consecutive in rank order.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_COLLECTIVES_H
#define ZERO_RT_COLLECTIVES_H

#include "Support/Support.h"
#include "zero_rt/zrt.h"

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

namespace zrt {
/// What a backend keeps per communicator besides MPI's (the CUDA backend's
/// NCCL communicator and stream); each backend defines it.
struct CommBackend;
struct Group;
} // namespace zrt

/// The data-parallel world: MPI carries the bootstrap and the driver's host
/// agreements, the backend moves tensors.
struct zrt_comm {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 1;
  zrt::CommBackend *backend = nullptr;
};

namespace zrt {

using Tokens = std::vector<int64_t>;

//===----------------------------------------------------------------------===//
// Implemented by each backend
//===----------------------------------------------------------------------===//

/// Sets up and tears down the backend's part of the world (zrt_comm_world,
/// zrt_finalize after every token was waited for).
void startBackend(zrt_comm *world);
void stopBackend(zrt_comm *world);

/// Chooses how tensors move (train --collectives, else ZRT_COLLECTIVES),
/// before the device and the first collective: "host" is MPI over host
/// memory (the CPU backend's only way; the CUDA backend stages device
/// buffers through it), "nccl" the CUDA backend's default; empty keeps the
/// backend's default. A one-line reason when the backend has no such way,
/// else empty.
std::string selectCollectives(const std::string &kind);

/// Sums segment r over ranks into rank r. `sumAt` is where this rank's sum
/// lands, in elements from buf: its own segment displs[rank] over NCCL and
/// over MPI's direct path (CommDirect.h), else the front (Open MPI's
/// in-place MPI_Ireduce_scatter).
Tokens reduceScatterInPlace(zrt_comm *comm, int32_t dtype, void *buf,
                            const std::vector<int> &counts,
                            const std::vector<int> &displs, int64_t &sumAt);
/// Elements [at, at + count) of a buffer that are stored at `data` rather
/// than in the buffer itself.
struct BufferPiece {
  int64_t at, count;
  const void *data;
};
/// Adds the sum over ranks of segment r of a buffer into rank r's `acc`
/// (counts[r] elements), reading the buffer from `pieces`, which cover it
/// in order, where they are: a reduce-scatter whose completion adds, with
/// no copy of the pieces into one buffer. False, having started nothing,
/// where the backend cannot read them in place (every backend but MPI's
/// direct path); the caller then copies them and calls
/// reduceScatterInPlace.
bool reduceScatterAddPieces(zrt_comm *comm, int32_t dtype,
                            const std::vector<BufferPiece> &pieces,
                            const std::vector<int> &counts,
                            const std::vector<int> &displs, void *acc,
                            Tokens &tokens);
/// Whether reduce-scatters over `comm` read the members' buffers where
/// they are (the MPI backend's direct path: every member on this host,
/// cross-memory reads allowed, not turned off by ZRT_REDUCE_SCATTER=mpi).
bool readsPeersDirectly(const zrt_comm *comm);
/// One reduce per owner (DeepSpeed's reduce-to-owner buckets): segment r is
/// summed in place at rank r, so this rank's sum is at displs[rank].
Tokens reduceToOwners(zrt_comm *comm, int32_t dtype, void *buf,
                      const std::vector<int> &counts,
                      const std::vector<int> &displs);
/// Every rank's segment to every rank.
Tokens allGatherInPlace(zrt_comm *comm, int32_t dtype, void *buf,
                        const std::vector<int> &counts,
                        const std::vector<int> &displs);
/// The overflow statistics (fp32 {flag, squared norm}): the flag by max,
/// the norm by sum.
Tokens allReduceStats(zrt_comm *comm, const float *in, float *out);
/// Bytes from every rank to every rank: sendCounts[r] bytes at
/// sendDispls[r] of `send` to rank r, recvCounts[r] bytes from rank r to
/// recvDispls[r] of `recv` (ZeRO++ qgZ's quantized all-to-alls).
Tokens allToAllBytes(zrt_comm *comm, const void *send,
                     const std::vector<int64_t> &sendCounts,
                     const std::vector<int64_t> &sendDispls, void *recv,
                     const std::vector<int64_t> &recvCounts,
                     const std::vector<int64_t> &recvDispls);
/// allToAllBytes's shared argument check: one count and one displacement
/// per rank of the world, each way.
inline void checkAllToAllCounts(const char *call, int worldSize,
                                const std::vector<int64_t> &sendCounts,
                                const std::vector<int64_t> &sendDispls,
                                const std::vector<int64_t> &recvCounts,
                                const std::vector<int64_t> &recvDispls) {
  size_t n = size_t(worldSize);
  if (sendCounts.size() != n || sendDispls.size() != n ||
      recvCounts.size() != n || recvDispls.size() != n)
    fatal("%s: counts for %zu ranks in a world of %d", call, sendCounts.size(),
          worldSize);
}

/// Sets up and tears down the backend's part of a Group's communicator
/// (Groups.cpp), split from `parent` as MPI_Comm_split(parent, color, key)
/// split it. The backend may create its side at the first collective on
/// `comm`, which every rank of `parent` reaches together.
void startGroupBackend(zrt_comm *parent, zrt_comm *comm, int color, int key);
void stopGroupBackend(zrt_comm *comm);

/// The collectives of a Group whose members span several nodes, in the two
/// levels of zero_rt/topology.h over g.node and g.cross; the in-place forms'
/// per-member counts and displacements as above. The tokens are the last
/// level's.
/// All-gather: across nodes, then within the node. `in`, unless null, is
/// this member's segment (else it is at displs[g.me] of buf already).
Tokens twoLevelAllGather(Group &g, int32_t dtype, const void *in, void *buf,
                         const std::vector<int> &counts,
                         const std::vector<int> &displs);
/// Reduce to owners: segment m, reduced by ops[m] (ZRT_SUM, ZRT_MAX), within
/// each node to the member of m's local index, then across nodes to m; the
/// sum is in place at displs[m] of member m.
Tokens twoLevelReduce(Group &g, int32_t dtype, void *buf,
                      const std::vector<int> &counts,
                      const std::vector<int> &displs,
                      const std::vector<int32_t> &ops);
/// All-reduce: twoLevelReduce, then twoLevelAllGather, from `in` (which may
/// be `out`) into `out`.
Tokens twoLevelAllReduce(Group &g, int32_t dtype, const void *in, void *out,
                         const std::vector<int> &counts,
                         const std::vector<int> &displs,
                         const std::vector<int32_t> &ops);

//===----------------------------------------------------------------------===//
// Shared (World.cpp)
//===----------------------------------------------------------------------===//

/// Aborts, naming `call`, unless there is a count and a displacement per
/// rank.
void checkPerRank(const zrt_comm *comm, const std::vector<int> &counts,
                  const std::vector<int> &displs, const char *call);
/// Aborts unless `root` is a rank of `comm`.
void checkRoot(const zrt_comm *comm, int32_t root, const char *call);

} // namespace zrt

#endif // ZERO_RT_COLLECTIVES_H
