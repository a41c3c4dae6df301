//===- CommDirect.cpp - Reduce-scatter by reading peers' memory -----------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "Collectives/CommDirect.h"
#include "Support/Support.h"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

using namespace zrt;

namespace {

/// Bytes of a peer's segment read per system call: a few chunks stay in
/// the L2 cache while they are summed.
constexpr int64_t kChunkBytes = 64 * 1024;

/// The protocol's tags: each operation's sequence number picks a pair, so
/// that messages of operations in flight together never match each other's
/// receives, whatever order the members advance them in.
constexpr int kTagPairs = 8192;

/// What a peer reads to check that it may read this process's memory.
constexpr uint64_t kProbeValue = 0x7a72742d64697263ull;
volatile uint64_t probeWord = kProbeValue;

/// Reads `bytes` at `from` in process `pid` to `to`; false if the system
/// refuses (another host's pid, no permission to trace the process).
bool readPeer(pid_t pid, void *to, uint64_t from, size_t bytes) {
  char *dst = static_cast<char *>(to);
  while (bytes > 0) {
    iovec local{dst, bytes};
    iovec remote{reinterpret_cast<void *>(from), bytes};
    ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (n <= 0) {
      if (n < 0 && errno == EINTR)
        continue;
      return false;
    }
    dst += n;
    from += uint64_t(n);
    bytes -= size_t(n);
  }
  return true;
}

} // namespace

std::unique_ptr<DirectPeers> DirectPeers::probe(MPI_Comm comm) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  if (size < 2)
    return nullptr;
  int usable = 1;
  if (const char *v = std::getenv("ZRT_REDUCE_SCATTER")) {
    if (!std::strcmp(v, "mpi"))
      usable = 0;
    else if (std::strcmp(v, "direct"))
      fatal("ZRT_REDUCE_SCATTER is '%s'; expected 'direct' or 'mpi'", v);
  }
  MPI_Comm host;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &host);
  int hostSize;
  MPI_Comm_size(host, &hostSize);
  MPI_Comm_free(&host);
  usable = usable && hostSize == size;

  int64_t id[2] = {int64_t(getpid()),
                   int64_t(reinterpret_cast<uintptr_t>(&probeWord))};
  std::vector<int64_t> ids(size_t(2 * size));
  MPI_Allgather(id, 2, MPI_INT64_T, ids.data(), 2, MPI_INT64_T, comm);
  for (int q = 0; usable && q < size; ++q) {
    uint64_t seen = 0;
    if (q != rank && (!readPeer(pid_t(ids[size_t(2 * q)]), &seen,
                                uint64_t(ids[size_t(2 * q + 1)]), 8) ||
                      seen != kProbeValue))
      usable = 0;
  }
  MPI_Allreduce(MPI_IN_PLACE, &usable, 1, MPI_INT, MPI_MIN, comm);
  if (!usable)
    return nullptr;

  std::unique_ptr<DirectPeers> peers(new DirectPeers);
  MPI_Comm_dup(comm, &peers->control);
  peers->me = rank;
  for (int q = 0; q < size; ++q)
    peers->pids.push_back(pid_t(ids[size_t(2 * q)]));
  peers->chunks.resize(size_t(size) * kChunkBytes);
  return peers;
}

DirectPeers::~DirectPeers() {
  if (control != MPI_COMM_NULL)
    MPI_Comm_free(&control);
}

DirectReduceScatter::DirectReduceScatter(DirectPeers &peers,
                                         std::vector<BufferPiece> pieces,
                                         int64_t elemSize, CombineFn combine,
                                         std::vector<int> counts,
                                         std::vector<int> displs, void *out,
                                         bool accumulate)
    : peers(peers), pieces(std::move(pieces)), elemSize(elemSize),
      combine(combine), counts(std::move(counts)), displs(std::move(displs)),
      out(static_cast<char *>(out)), accumulate(accumulate) {
  const int p = peers.size();
  const int n = int(this->pieces.size());
  for (const BufferPiece &piece : this->pieces)
    mine.push_back(uint64_t(reinterpret_cast<uintptr_t>(piece.data)));
  remote.assign(size_t(p) * size_t(n), 0);
  int tag = 2 * int(peers.sequence++ % kTagPairs);
  readTag = tag + 1;
  for (int q = 0; q < p; ++q)
    if (q != peers.me) {
      MPI_Request r;
      MPI_Irecv(&remote[size_t(q) * size_t(n)], n, MPI_UINT64_T, q, tag,
                peers.control, &r);
      announce.push_back(r);
      MPI_Irecv(nullptr, 0, MPI_BYTE, q, readTag, peers.control, &r);
      read.push_back(r);
    }
  for (int q = 0; q < p; ++q)
    if (q != peers.me) {
      MPI_Request r;
      MPI_Isend(mine.data(), n, MPI_UINT64_T, q, tag, peers.control, &r);
      announce.push_back(r);
    }
}

bool DirectReduceScatter::advance() {
  if (complete)
    return true;
  int done = 0;
  if (!reduced) {
    MPI_Testall(int(announce.size()), announce.data(), &done,
                MPI_STATUSES_IGNORE);
    if (!done)
      return false;
    reduce();
    reduced = true;
    for (int q = 0; q < peers.size(); ++q)
      if (q != peers.me) {
        MPI_Request r;
        MPI_Isend(nullptr, 0, MPI_BYTE, q, readTag, peers.control, &r);
        read.push_back(r);
      }
  }
  MPI_Testall(int(read.size()), read.data(), &done, MPI_STATUSES_IGNORE);
  complete = done != 0;
  return complete;
}

namespace {
/// The index of the piece holding element `at`.
size_t pieceOf(const std::vector<BufferPiece> &pieces, int64_t at) {
  auto it = std::upper_bound(
      pieces.begin(), pieces.end(), at,
      [](int64_t x, const BufferPiece &piece) { return x < piece.at; });
  return size_t(it - pieces.begin()) - 1;
}
} // namespace

void DirectReduceScatter::readRange(int q, int64_t at, int64_t n,
                                    char *to) const {
  const uint64_t *base = &remote[size_t(q) * pieces.size()];
  for (size_t k = pieceOf(pieces, at); n > 0; ++k) {
    const BufferPiece &piece = pieces[k];
    int64_t take = std::min(n, piece.at + piece.count - at);
    if (!readPeer(peers.pids[size_t(q)], to,
                  base[k] + uint64_t((at - piece.at) * elemSize),
                  size_t(take * elemSize)))
      fatal("reduce-scatter: cannot read rank %d's buffer (%s)", q,
            std::strerror(errno));
    to += take * elemSize;
    at += take;
    n -= take;
  }
}

const char *DirectReduceScatter::ownRange(int64_t at, int64_t n,
                                          char *scratch) const {
  size_t k = pieceOf(pieces, at);
  const BufferPiece *piece = &pieces[k];
  if (at + n <= piece->at + piece->count)
    return static_cast<const char *>(piece->data) + (at - piece->at) * elemSize;
  char *to = scratch;
  for (; n > 0; piece = &pieces[++k]) {
    int64_t take = std::min(n, piece->at + piece->count - at);
    std::memcpy(to,
                static_cast<const char *>(piece->data) +
                    (at - piece->at) * elemSize,
                size_t(take * elemSize));
    to += take * elemSize;
    at += take;
    n -= take;
  }
  return scratch;
}

void DirectReduceScatter::reduce() {
  const int p = peers.size(), me = peers.me;
  const int64_t count = counts[size_t(me)];
  const int64_t chunk = kChunkBytes / elemSize;
  std::vector<char *> at(static_cast<size_t>(p));
  for (int q = 0; q < p; ++q)
    at[size_t(q)] = peers.chunks.data() + int64_t(q) * kChunkBytes;
  for (int64_t begin = 0; begin < count; begin += chunk) {
    const int64_t n = std::min(chunk, count - begin);
    const int64_t first = displs[size_t(me)] + begin;
    for (int q = 0; q < p; ++q)
      if (q != me)
        readRange(q, first, n, at[size_t(q)]);
    const char *own = ownRange(first, n, at[size_t(me)]);
    const char *sum;
    if (p == 2) {
      // The one pairwise step.
      combine(own, at[size_t(1 - me)], n);
      sum = at[size_t(1 - me)];
    } else {
      if (own != at[size_t(me)])
        std::memcpy(at[size_t(me)], own, size_t(n * elemSize));
      // libnbc's binomial tree: in round s, member b (a multiple of 2s)
      // adds the partial sum of member b + s.
      for (int s = 1; s < p; s *= 2)
        for (int b = 0; b + s < p; b += 2 * s)
          combine(at[size_t(b + s)], at[size_t(b)], n);
      sum = at[0];
    }
    char *to = out + begin * elemSize;
    if (accumulate)
      combine(sum, to, n);
    else
      std::memcpy(to, sum, size_t(n * elemSize));
  }
}
