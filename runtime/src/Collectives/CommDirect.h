//===- CommDirect.h - Reduce-scatter by reading peers' memory ---*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// Open MPI's nonblocking reduce-scatter (libnbc) reduces the whole buffer
// at rank 0 into a buffer it allocates, then sends every other rank its
// part: rank 0 reads and sums p times the data of the others, and every
// round waits for both sides to enter MPI. When all members of a
// communicator run on one host and may read each other's memory
// (process_vm_readv, the cross-memory attach Open MPI's shared-memory
// transport uses for large messages), each member instead reads its own
// segment of every peer's buffer, chunk by chunk into a small buffer, and
// sums it in place: each rank reads (p-1)/p of the data once, no rank
// waits for another's rounds, and no memory is allocated per call. The
// buffer may also be given as pieces stored apart, read where they are,
// and the sum added to an accumulator (a bucket's sum straight into the
// gradient shard, with no pass of its own).
//
// The sum is libnbc's, bit for bit: its binomial tree adds rank i + 2^k's
// partial sum into rank i's in rounds k = 0, 1, ..., so segment m's sum is
// ((x0 + x1) + (x2 + x3)) + ... over the ranks' values x, each pairwise
// step rounding to the element type as the MPI op does.
//
// Small messages on a duplicate of the communicator carry the protocol:
// each member announces its buffer's address to every peer, reads once
// every announcement has arrived, then tells every peer it has read; its
// operation completes once it has summed its segment and every peer has
// read its buffer (which may then be reused).
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_COMMDIRECT_H
#define ZERO_RT_COMMDIRECT_H

#include "Collectives/Collectives.h"

#include <mpi.h>

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace zrt {

/// inout[i] = in[i] + inout[i] over n elements, rounded to the element type
/// (the MPI op of the dtype).
using CombineFn = void (*)(const void *in, void *inout, int64_t n);

/// What a communicator needs to reduce directly: the members' process ids
/// and the duplicate communicator of the protocol's messages.
class DirectPeers {
public:
  /// Collective over `comm`: the peers if every member runs on this host,
  /// can read the others' memory and has not turned the path off
  /// (ZRT_REDUCE_SCATTER=mpi), else null on every member alike.
  static std::unique_ptr<DirectPeers> probe(MPI_Comm comm);
  ~DirectPeers();

  int rank() const { return me; }
  int size() const { return int(pids.size()); }

private:
  friend class DirectReduceScatter;
  DirectPeers() = default;
  MPI_Comm control = MPI_COMM_NULL;
  int me = 0;
  /// Operations started on this communicator (the same on every member).
  uint64_t sequence = 0;
  std::vector<pid_t> pids;
  /// Where peers' chunks are read to: one chunk per member.
  std::vector<char> chunks;
};

/// One reduce-scatter: segment r of a buffer (counts[r] elements at
/// displs[r]) summed over the members, at member r stored to `out`, or
/// added to it if `accumulate`. The buffer is `pieces`, which cover it in
/// order, each member's at the same places; `out` may be the member's own
/// segment of a buffer given as one piece (the in-place form).
class DirectReduceScatter {
public:
  DirectReduceScatter(DirectPeers &peers, std::vector<BufferPiece> pieces,
                      int64_t elemSize, CombineFn combine,
                      std::vector<int> counts, std::vector<int> displs,
                      void *out, bool accumulate);
  DirectReduceScatter(const DirectReduceScatter &) = delete;
  DirectReduceScatter &operator=(const DirectReduceScatter &) = delete;

  /// Advances without blocking (tests the messages, reads and sums once
  /// every peer has announced its buffer); true once complete.
  bool advance();

private:
  void reduce();
  /// Reads elements [at, at + n) of member q's buffer to `to`.
  void readRange(int q, int64_t at, int64_t n, char *to) const;
  /// Elements [at, at + n) of this member's buffer: where they are if one
  /// piece holds them, else copied to `scratch`.
  const char *ownRange(int64_t at, int64_t n, char *scratch) const;

  DirectPeers &peers;
  std::vector<BufferPiece> pieces;
  int64_t elemSize;
  CombineFn combine;
  std::vector<int> counts, displs;
  char *out;
  bool accumulate;
  /// The pieces' addresses: this member's, and every member's as announced
  /// (member q's piece k at q * pieces + k).
  std::vector<uint64_t> mine, remote;
  int readTag = 0;
  /// The announcements (receives then sends), and then the "read"
  /// messages (receives then sends).
  std::vector<MPI_Request> announce, read;
  bool reduced = false, complete = false;
};

} // namespace zrt

#endif // ZERO_RT_COMMDIRECT_H
