//===- CommCuda.cpp - Collectives of the CUDA backend over NCCL -----------===//
//
// Part of the zero-mlir project.
//
// MPI starts the processes and carries the bootstrap (NCCL's unique id) and
// the driver's host-side agreement; tensors move only through NCCL on the
// communication stream. 16-bit sums are NCCL's own (fp32 arithmetic per
// element pair, like the CPU backend's MPI user ops).
//
//===----------------------------------------------------------------------===//

#include "Collectives/CommCuda.h"
#include "Collectives/Groups.h"
#include "Collectives/Mpi.h"
#include "Collectives/Tokens.h"
#include "Support/CudaGraphs.h"
#include "Support/CudaSupport.h"
#include "Support/Support.h"

#include <mutex>
#include <stdexcept>
#include <string>

using namespace zrt;
using namespace zrt::cuda;

struct zrt::CommBackend {
  ncclComm_t nccl = nullptr;
  cudaStream_t stream = nullptr;
  /// Marks the compute stream's position for commAfterCompute.
  cudaEvent_t computeDone = nullptr;
  /// A Group's communicator (Groups.h): ncclCommSplit of the parent's.
  zrt_comm *parent = nullptr;
  int color = 0, key = 0;
};

namespace {

struct CommState {
  std::mutex mutex;
  zrt_comm *world = nullptr;
  bool deviceChosen = false;
  /// A token's event, recorded again when the token is reused.
  TokenTable<cudaEvent_t> tokens;
};

CommState &state() {
  static CommState s;
  return s;
}

size_t elementSize(int32_t dtype) { return size_t(zrt_dtype_size(dtype)); }

char *at(void *base, int64_t elements, int32_t dtype) {
  return static_cast<char *>(base) + size_t(elements) * elementSize(dtype);
}

/// The communicator's stream and event, once it has its NCCL communicator.
void createStream(CommBackend &b) {
  ZRT_CUDA_CHECK(cudaStreamCreateWithFlags(&b.stream, cudaStreamNonBlocking));
  ZRT_CUDA_CHECK(
      cudaEventCreateWithFlags(&b.computeDone, cudaEventDisableTiming));
}

void createNccl(zrt_comm *comm) {
  CommBackend &b = *comm->backend;
  ncclUniqueId id;
  if (comm->rank == 0)
    ZRT_NCCL_CHECK(ncclGetUniqueId(&id));
  MPI_Bcast(&id, int(sizeof(id)), MPI_BYTE, 0, comm->comm);
  ZRT_NCCL_CHECK(ncclCommInitRank(&b.nccl, comm->size, id, comm->rank));
  createStream(b);
}

/// Whether segment r of every rank is counts[0] elements at r * counts[0]
/// (NCCL's collectives), not clipped.
bool evenSegments(const zrt_comm *comm, const std::vector<int> &counts,
                  const std::vector<int> &displs) {
  bool even = true;
  for (int r = 0; r < comm->size; ++r)
    even &=
        counts[size_t(r)] == counts[0] && displs[size_t(r)] == r * counts[0];
  return even;
}

} // namespace

void zrt::cuda::ncclFatal(ncclResult_t result, const char *expr,
                          const char *file, int line) {
  fatal("NCCL: %s failed: %s (%s:%d)", expr, ncclGetErrorString(result), file,
        line);
}

ncclDataType_t zrt::cuda::ncclType(int32_t dtype, const char *call) {
  switch (dtype) {
  case ZRT_F32:
    return ncclFloat32;
  case ZRT_BF16:
    return ncclBfloat16;
  case ZRT_F16:
    return ncclFloat16;
  default:
    badDtype(call, dtype);
  }
}

void zrt::cuda::initializeWorld(int localRank) {
  zrt_comm *comm = zrt_comm_world();
  CommState &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.deviceChosen) {
    // A later session of the process that moves tensors through NCCL after
    // one that moved them through host memory: every rank opens it alike.
    if (!hostCollectives() && !comm->backend->nccl)
      createNccl(comm);
    return;
  }
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err == cudaSuccess && count > 0)
    err = cudaSetDevice(localRank % count);
  bool usable = err == cudaSuccess && count > 0;
  // Agree before NCCL's bootstrap: a rank without a GPU must not leave the
  // others blocked in the unique id's broadcast or in ncclCommInitRank.
  int mine = usable ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, comm->comm);
  if (!usable)
    throw std::runtime_error(
        std::string("no usable CUDA GPU (") +
        (err != cudaSuccess ? cudaGetErrorString(err) : "no device found") +
        "); this program was compiled with --target cuda, recompile it "
        "with --target cpu to run without a GPU");
  // Another rank has no GPU and reports it; this one creates nothing (its
  // caller ends every rank after the same agreement).
  if (!all)
    return;
  s.deviceChosen = true;
  // Over host memory, ranks may share a GPU: no NCCL communicator.
  if (!hostCollectives())
    createNccl(comm);
}

ncclComm_t zrt::cuda::ncclOf(zrt_comm *comm) {
  if (hostCollectives())
    fatal("NCCL: no communicator with --collectives host");
  // A group's communicator may start here, in the middle of a step.
  graphs::pause();
  CommState &s = state();
  if (!comm->backend->nccl && comm != s.world) {
    // A Group's communicator (Groups.h): split from its parent's at its
    // first collective, which every rank of the parent reaches together
    // (each for its own set of the same kind), with a stream of its own.
    CommBackend &b = *comm->backend;
    ZRT_NCCL_CHECK(
        ncclCommSplit(ncclOf(b.parent), b.color, b.key, &b.nccl, nullptr));
    createStream(b);
  }
  if (!comm->backend->nccl) {
    int localRank, localSize;
    nodeRank(comm->comm, localRank, localSize);
    initializeWorld(localRank);
    if (!comm->backend->nccl)
      fatal("NCCL: no communicator (a rank has no usable CUDA GPU)");
  }
  return comm->backend->nccl;
}

cudaStream_t zrt::cuda::commStream(zrt_comm *comm) {
  // Every collective starts here: with --cuda-graphs, what the compute
  // stream captured so far runs before it.
  graphs::pause();
  // Host collectives run their copies on the compute stream.
  if (hostCollectives())
    return computeStream();
  ncclOf(comm);
  return comm->backend->stream;
}

void zrt::cuda::commAfterCompute(zrt_comm *comm) {
  cudaStream_t stream = commStream(comm);
  cudaEvent_t computeDone = comm->backend->computeDone;
  ZRT_CUDA_CHECK(cudaEventRecord(computeDone, computeStream()));
  ZRT_CUDA_CHECK(cudaStreamWaitEvent(stream, computeDone, 0));
}

int64_t zrt::cuda::recordToken(zrt_comm *comm) {
  // A token is waited for outside the capture that would record it.
  graphs::pause();
  cudaStream_t stream = comm ? comm->backend->stream : computeStream();
  return state().tokens.start([&](cudaEvent_t &event, bool fresh) {
    if (fresh)
      ZRT_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    ZRT_CUDA_CHECK(cudaEventRecord(event, stream));
  });
}

//===----------------------------------------------------------------------===//
// The communicator interface (Collectives.h)
//===----------------------------------------------------------------------===//

void zrt::startBackend(zrt_comm *world) {
  // NCCL starts on first use, once the driver has chosen the GPU.
  world->backend = new CommBackend;
  CommState &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.world = world;
}

/// Frees a communicator's NCCL side, once its work is done.
static void destroyBackend(zrt_comm *comm) {
  CommBackend &b = *comm->backend;
  if (b.nccl) {
    ZRT_CUDA_CHECK(cudaDeviceSynchronize());
    ncclCommDestroy(b.nccl);
    cudaStreamDestroy(b.stream);
    cudaEventDestroy(b.computeDone);
  }
  delete comm->backend;
  comm->backend = nullptr;
}

void zrt::stopBackend(zrt_comm *world) {
  CommState &s = state();
  s.tokens.clear([](cudaEvent_t event) { cudaEventDestroy(event); });
  destroyBackend(world);
  std::lock_guard<std::mutex> lock(s.mutex);
  s.world = nullptr;
}

void zrt::startGroupBackend(zrt_comm *parent, zrt_comm *comm, int color,
                            int key) {
  comm->backend = new CommBackend;
  comm->backend->parent = parent;
  comm->backend->color = color;
  comm->backend->key = key;
}

void zrt::stopGroupBackend(zrt_comm *comm) { destroyBackend(comm); }

/// Segment r summed in place at rank r, one ncclReduce per owner, grouped so
/// that NCCL runs them as one operation.
static void reduceEach(zrt_comm *comm, int32_t dtype, void *buf,
                       const std::vector<int> &counts,
                       const std::vector<int> &displs, ncclDataType_t type,
                       cudaStream_t stream) {
  ZRT_NCCL_CHECK(ncclGroupStart());
  for (int r = 0; r < comm->size; ++r)
    if (counts[size_t(r)] > 0) {
      char *segment = at(buf, displs[size_t(r)], dtype);
      ZRT_NCCL_CHECK(ncclReduce(segment, segment, size_t(counts[size_t(r)]),
                                type, ncclSum, r, ncclOf(comm), stream));
    }
  ZRT_NCCL_CHECK(ncclGroupEnd());
}

Tokens zrt::reduceScatterInPlace(zrt_comm *comm, int32_t dtype, void *buf,
                                 const std::vector<int> &counts,
                                 const std::vector<int> &displs,
                                 int64_t &sumAt) {
  const char *call = "reduceScatterInPlace";
  checkPerRank(comm, counts, displs, call);
  if (hostCollectives())
    return host::reduceScatterInPlace(comm, dtype, buf, counts, displs, sumAt);
  ncclComm_t nccl = ncclOf(comm);
  ncclDataType_t type = ncclType(dtype, call);
  cudaStream_t stream = commStream(comm);
  commAfterCompute(comm);
  // NCCL's in-place forms leave the result in this rank's own segment.
  sumAt = displs[size_t(comm->rank)];
  if (evenSegments(comm, counts, displs)) {
    if (counts[0] > 0)
      ZRT_NCCL_CHECK(ncclReduceScatter(
          buf, at(buf, int64_t(comm->rank) * counts[0], dtype),
          size_t(counts[0]), type, ncclSum, nccl, stream));
  } else {
    reduceEach(comm, dtype, buf, counts, displs, type, stream);
  }
  return {recordToken(comm)};
}

bool zrt::readsPeersDirectly(const zrt_comm *) { return false; }

std::string zrt::selectCollectives(const std::string &kind) {
  if (!kind.empty() && kind != "nccl" && kind != "host")
    return "collectives '" + kind + "': expected nccl or host";
  hostCollectives(kind.empty() ? "nccl" : kind.c_str());
  return "";
}

bool zrt::reduceScatterAddPieces(zrt_comm *, int32_t,
                                 const std::vector<BufferPiece> &,
                                 const std::vector<int> &,
                                 const std::vector<int> &, void *, Tokens &) {
  // NCCL reduces one buffer: the caller copies the pieces into it.
  return false;
}

Tokens zrt::reduceToOwners(zrt_comm *comm, int32_t dtype, void *buf,
                           const std::vector<int> &counts,
                           const std::vector<int> &displs) {
  const char *call = "reduceToOwners";
  checkPerRank(comm, counts, displs, call);
  if (hostCollectives())
    return host::reduceToOwners(comm, dtype, buf, counts, displs);
  ncclDataType_t type = ncclType(dtype, call);
  cudaStream_t stream = commStream(comm);
  commAfterCompute(comm);
  reduceEach(comm, dtype, buf, counts, displs, type, stream);
  return {recordToken(comm)};
}

Tokens zrt::allToAllBytes(zrt_comm *comm, const void *send,
                          const std::vector<int64_t> &sendCounts,
                          const std::vector<int64_t> &sendDispls, void *recv,
                          const std::vector<int64_t> &recvCounts,
                          const std::vector<int64_t> &recvDispls) {
  const char *call = "allToAllBytes";
  checkAllToAllCounts(call, comm->size, sendCounts, sendDispls, recvCounts,
                      recvDispls);
  if (hostCollectives())
    return host::allToAllBytes(comm, send, sendCounts, sendDispls, recv,
                               recvCounts, recvDispls);
  size_t n = size_t(comm->size);
  ncclComm_t nccl = ncclOf(comm);
  cudaStream_t stream = commStream(comm);
  commAfterCompute(comm);
  // Grouped point-to-point calls: NCCL's all-to-all.
  ZRT_NCCL_CHECK(ncclGroupStart());
  for (size_t r = 0; r < n; ++r) {
    if (sendCounts[r] > 0)
      ZRT_NCCL_CHECK(ncclSend(static_cast<const char *>(send) + sendDispls[r],
                              size_t(sendCounts[r]), ncclUint8, int(r), nccl,
                              stream));
    if (recvCounts[r] > 0)
      ZRT_NCCL_CHECK(ncclRecv(static_cast<char *>(recv) + recvDispls[r],
                              size_t(recvCounts[r]), ncclUint8, int(r), nccl,
                              stream));
  }
  ZRT_NCCL_CHECK(ncclGroupEnd());
  return {recordToken(comm)};
}

Tokens zrt::allGatherInPlace(zrt_comm *comm, int32_t dtype, void *buf,
                             const std::vector<int> &counts,
                             const std::vector<int> &displs) {
  const char *call = "allGatherInPlace";
  checkPerRank(comm, counts, displs, call);
  if (hostCollectives())
    return host::allGatherInPlace(comm, dtype, buf, counts, displs);
  ncclComm_t nccl = ncclOf(comm);
  ncclDataType_t type = ncclType(dtype, call);
  cudaStream_t stream = commStream(comm);
  commAfterCompute(comm);
  if (evenSegments(comm, counts, displs)) {
    if (counts[0] > 0)
      ZRT_NCCL_CHECK(
          ncclAllGather(at(buf, int64_t(comm->rank) * counts[0], dtype), buf,
                        size_t(counts[0]), type, nccl, stream));
    return {recordToken(comm)};
  }
  ZRT_NCCL_CHECK(ncclGroupStart());
  for (int r = 0; r < comm->size; ++r)
    if (counts[size_t(r)] > 0) {
      char *segment = at(buf, displs[size_t(r)], dtype);
      ZRT_NCCL_CHECK(ncclBroadcast(segment, segment, size_t(counts[size_t(r)]),
                                   type, r, nccl, stream));
    }
  ZRT_NCCL_CHECK(ncclGroupEnd());
  return {recordToken(comm)};
}

Tokens zrt::allReduceStats(zrt_comm *comm, const float *in, float *out) {
  if (hostCollectives())
    return host::allReduceStats(comm, in, out);
  ncclComm_t nccl = ncclOf(comm);
  cudaStream_t stream = commStream(comm);
  commAfterCompute(comm);
  ZRT_NCCL_CHECK(ncclGroupStart());
  ZRT_NCCL_CHECK(ncclAllReduce(in, out, 1, ncclFloat32, ncclMax, nccl, stream));
  ZRT_NCCL_CHECK(
      ncclAllReduce(in + 1, out + 1, 1, ncclFloat32, ncclSum, nccl, stream));
  ZRT_NCCL_CHECK(ncclGroupEnd());
  return {recordToken(comm)};
}

//===----------------------------------------------------------------------===//
// zrt.h
//===----------------------------------------------------------------------===//

extern "C" int64_t zrt_all_gather(zrt_comm *comm, int32_t dtype, const void *in,
                                  void *out, int64_t count) {
  checkDims("zrt_all_gather", count);
  ncclDataType_t type = ncclType(dtype, "zrt_all_gather");
  if (hostCollectives())
    return host::allGather(comm, dtype, in, out, count);
  commAfterCompute(comm);
  if (count > 0)
    ZRT_NCCL_CHECK(ncclAllGather(in, out, size_t(count), type, ncclOf(comm),
                                 comm->backend->stream));
  return recordToken(comm);
}

extern "C" int64_t zrt_reduce_scatter(zrt_comm *comm, int32_t dtype,
                                      const void *in, void *out,
                                      int64_t count) {
  checkDims("zrt_reduce_scatter", count);
  ncclDataType_t type = ncclType(dtype, "zrt_reduce_scatter");
  size_t eb = elementSize(dtype);
  const char *lo = static_cast<const char *>(in);
  const char *o = static_cast<const char *>(out);
  if (count > 0 && o + size_t(count) * eb > lo &&
      o < lo + size_t(comm->size) * size_t(count) * eb)
    fatal("zrt_reduce_scatter: the output overlaps the input");
  if (hostCollectives())
    return host::reduceScatter(comm, dtype, in, out, count);
  commAfterCompute(comm);
  if (count > 0)
    ZRT_NCCL_CHECK(ncclReduceScatter(in, out, size_t(count), type, ncclSum,
                                     ncclOf(comm), comm->backend->stream));
  return recordToken(comm);
}

extern "C" int64_t zrt_reduce(zrt_comm *comm, int32_t dtype, const void *in,
                              void *out, int64_t count, int32_t root) {
  checkDims("zrt_reduce", count);
  checkRoot(comm, root, "zrt_reduce");
  ncclDataType_t type = ncclType(dtype, "zrt_reduce");
  if (hostCollectives())
    return host::reduce(comm, dtype, in, out, count, root);
  commAfterCompute(comm);
  if (count > 0)
    ZRT_NCCL_CHECK(ncclReduce(in, out, size_t(count), type, ncclSum, root,
                              ncclOf(comm), comm->backend->stream));
  return recordToken(comm);
}

extern "C" int64_t zrt_all_reduce(zrt_comm *comm, int32_t dtype, int32_t op,
                                  const void *in, void *out, int64_t count) {
  checkDims("zrt_all_reduce", count);
  ncclDataType_t type = ncclType(dtype, "zrt_all_reduce");
  if (op != ZRT_SUM && op != ZRT_MAX)
    fatal("zrt_all_reduce: unknown reduce op %d", int(op));
  if (hostCollectives())
    return host::allReduce(comm, dtype, op, in, out, count);
  commAfterCompute(comm);
  if (count > 0)
    ZRT_NCCL_CHECK(ncclAllReduce(in, out, size_t(count), type,
                                 op == ZRT_SUM ? ncclSum : ncclMax,
                                 ncclOf(comm), comm->backend->stream));
  return recordToken(comm);
}

extern "C" void zrt_wait(int64_t token) {
  graphs::pause();
  CommState &s = state();
  // The compute stream waits, not the host: the event's current record is
  // captured now, so the event can be recorded again for another token.
  ZRT_CUDA_CHECK(
      cudaStreamWaitEvent(computeStream(), s.tokens.handle(token), 0));
  s.tokens.finish(token);
}

extern "C" void zrt_wait_all(void) {
  graphs::pause();
  CommState &s = state();
  s.tokens.waitAll(zrt_wait);
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.world && s.world->backend->stream)
    ZRT_CUDA_CHECK(cudaStreamSynchronize(s.world->backend->stream));
}

// NCCL progresses on the GPU: nothing to drive from the host.
extern "C" void zrt_progress(void) {}

//===----------------------------------------------------------------------===//
// Two levels (Groups.h)
//===----------------------------------------------------------------------===//
//
// Both levels go on the members' communication stream, one NCCL group per
// level over g.cross and g.node, so the stream orders the second level
// after the first without the host waiting.

namespace {

ncclRedOp_t ncclOp(int32_t op) {
  if (op != ZRT_SUM && op != ZRT_MAX)
    fatal("two-level collective: unknown reduce op %d", int(op));
  return op == ZRT_SUM ? ncclSum : ncclMax;
}

/// Every member's segment to every member, on `stream`: across nodes (one
/// broadcast per segment of this local index, rooted at its node), then
/// within each node (one per segment, rooted at its local index).
void gatherLevels(Group &g, int32_t dtype, void *buf,
                  const std::vector<int> &counts,
                  const std::vector<int> &displs, cudaStream_t stream) {
  ncclDataType_t type = ncclType(dtype, "twoLevelAllGather");
  int q = int(g.membersPerNode), l = g.localIndex();
  ncclComm_t cross = ncclOf(g.cross), node = ncclOf(g.node);
  ZRT_NCCL_CHECK(ncclGroupStart());
  for (int b = 0; b < g.nodes(); ++b) {
    int m = b * q + l;
    if (counts[size_t(m)] > 0) {
      char *seg = at(buf, displs[size_t(m)], dtype);
      ZRT_NCCL_CHECK(ncclBroadcast(seg, seg, size_t(counts[size_t(m)]), type, b,
                                   cross, stream));
    }
  }
  ZRT_NCCL_CHECK(ncclGroupEnd());
  ZRT_NCCL_CHECK(ncclGroupStart());
  for (int m = 0; m < g.size(); ++m)
    if (counts[size_t(m)] > 0) {
      char *seg = at(buf, displs[size_t(m)], dtype);
      ZRT_NCCL_CHECK(ncclBroadcast(seg, seg, size_t(counts[size_t(m)]), type,
                                   m % q, node, stream));
    }
  ZRT_NCCL_CHECK(ncclGroupEnd());
}

/// Segment m reduced within each node to local index m % q, then across
/// nodes to member m, in place.
void reduceLevels(Group &g, int32_t dtype, void *buf,
                  const std::vector<int> &counts,
                  const std::vector<int> &displs,
                  const std::vector<int32_t> &ops, cudaStream_t stream) {
  ncclDataType_t type = ncclType(dtype, "twoLevelReduce");
  int q = int(g.membersPerNode), l = g.localIndex();
  ncclComm_t cross = ncclOf(g.cross), node = ncclOf(g.node);
  ZRT_NCCL_CHECK(ncclGroupStart());
  for (int m = 0; m < g.size(); ++m)
    if (counts[size_t(m)] > 0) {
      char *seg = at(buf, displs[size_t(m)], dtype);
      ZRT_NCCL_CHECK(ncclReduce(seg, seg, size_t(counts[size_t(m)]), type,
                                ncclOp(ops[size_t(m)]), m % q, node, stream));
    }
  ZRT_NCCL_CHECK(ncclGroupEnd());
  ZRT_NCCL_CHECK(ncclGroupStart());
  for (int b = 0; b < g.nodes(); ++b) {
    int m = b * q + l;
    if (counts[size_t(m)] > 0) {
      char *seg = at(buf, displs[size_t(m)], dtype);
      ZRT_NCCL_CHECK(ncclReduce(seg, seg, size_t(counts[size_t(m)]), type,
                                ncclOp(ops[size_t(m)]), b, cross, stream));
    }
  }
  ZRT_NCCL_CHECK(ncclGroupEnd());
}

} // namespace

Tokens zrt::twoLevelAllGather(Group &g, int32_t dtype, const void *in,
                              void *buf, const std::vector<int> &counts,
                              const std::vector<int> &displs) {
  if (hostCollectives())
    return host::twoLevelAllGather(g, dtype, in, buf, counts, displs);
  cudaStream_t stream = commStream(g.members);
  commAfterCompute(g.members);
  char *mine = at(buf, displs[size_t(g.me)], dtype);
  if (in && in != mine && counts[size_t(g.me)] > 0)
    ZRT_CUDA_CHECK(cudaMemcpyAsync(
        mine, in, size_t(counts[size_t(g.me)]) * elementSize(dtype),
        cudaMemcpyDeviceToDevice, stream));
  gatherLevels(g, dtype, buf, counts, displs, stream);
  return {recordToken(g.members)};
}

Tokens zrt::twoLevelReduce(Group &g, int32_t dtype, void *buf,
                           const std::vector<int> &counts,
                           const std::vector<int> &displs,
                           const std::vector<int32_t> &ops) {
  if (hostCollectives())
    return host::twoLevelReduce(g, dtype, buf, counts, displs, ops);
  cudaStream_t stream = commStream(g.members);
  commAfterCompute(g.members);
  reduceLevels(g, dtype, buf, counts, displs, ops, stream);
  return {recordToken(g.members)};
}

Tokens zrt::twoLevelAllReduce(Group &g, int32_t dtype, const void *in,
                              void *out, const std::vector<int> &counts,
                              const std::vector<int> &displs,
                              const std::vector<int32_t> &ops) {
  if (hostCollectives())
    return host::twoLevelAllReduce(g, dtype, in, out, counts, displs, ops);
  cudaStream_t stream = commStream(g.members);
  commAfterCompute(g.members);
  if (in != out) {
    size_t total = 0;
    for (int c : counts)
      total += size_t(c);
    ZRT_CUDA_CHECK(cudaMemcpyAsync(out, in, total * elementSize(dtype),
                                   cudaMemcpyDeviceToDevice, stream));
  }
  reduceLevels(g, dtype, out, counts, displs, ops, stream);
  gatherLevels(g, dtype, out, counts, displs, stream);
  return {recordToken(g.members)};
}
