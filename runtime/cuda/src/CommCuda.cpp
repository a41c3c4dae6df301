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

#include "CommCuda.h"
#include "CudaSupport.h"
#include "Mpi.h"
#include "Support.h"

#include <mutex>
#include <stdexcept>
#include <string>

using namespace zrt;
using namespace zrt::cuda;

struct zrt_comm {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 1;
  ncclComm_t nccl = nullptr;
  cudaStream_t stream = nullptr;
  /// Marks the compute stream's position for commAfterCompute.
  cudaEvent_t computeDone = nullptr;
};

namespace {

struct Token {
  cudaEvent_t event = nullptr;
  bool live = false;
};

struct CommState {
  std::mutex mutex;
  zrt_comm *world = nullptr;
  bool ownsMpi = false;
  bool deviceChosen = false;
  std::vector<Token> tokens;
  std::vector<int64_t> freeTokens;
};

CommState &state() {
  static CommState s;
  return s;
}

size_t elementSize(int32_t dtype) { return size_t(zrt_dtype_size(dtype)); }

char *at(void *base, int64_t elements, int32_t dtype) {
  return static_cast<char *>(base) + size_t(elements) * elementSize(dtype);
}

void createNccl(zrt_comm *comm) {
  ncclUniqueId id;
  if (comm->rank == 0)
    ZRT_NCCL_CHECK(ncclGetUniqueId(&id));
  MPI_Bcast(&id, int(sizeof(id)), MPI_BYTE, 0, comm->comm);
  ZRT_NCCL_CHECK(ncclCommInitRank(&comm->nccl, comm->size, id, comm->rank));
  ZRT_CUDA_CHECK(cudaStreamCreateWithFlags(&comm->stream, cudaStreamNonBlocking));
  ZRT_CUDA_CHECK(
      cudaEventCreateWithFlags(&comm->computeDone, cudaEventDisableTiming));
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
  if (s.deviceChosen)
    return;
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
  createNccl(comm);
}

ncclComm_t zrt::cuda::ncclOf(zrt_comm *comm) {
  if (!comm->nccl) {
    int localRank, localSize;
    nodeRank(comm->comm, localRank, localSize);
    initializeWorld(localRank);
    if (!comm->nccl)
      fatal("NCCL: no communicator (a rank has no usable CUDA GPU)");
  }
  return comm->nccl;
}

cudaStream_t zrt::cuda::commStream(zrt_comm *comm) {
  ncclOf(comm);
  return comm->stream;
}

void zrt::cuda::commAfterCompute(zrt_comm *comm) {
  cudaStream_t stream = commStream(comm);
  ZRT_CUDA_CHECK(cudaEventRecord(comm->computeDone, computeStream()));
  ZRT_CUDA_CHECK(cudaStreamWaitEvent(stream, comm->computeDone, 0));
}

int64_t zrt::cuda::recordToken(zrt_comm *comm) {
  CommState &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  int64_t token;
  if (s.freeTokens.empty()) {
    token = int64_t(s.tokens.size());
    s.tokens.emplace_back();
    ZRT_CUDA_CHECK(cudaEventCreateWithFlags(&s.tokens.back().event,
                                            cudaEventDisableTiming));
  } else {
    token = s.freeTokens.back();
    s.freeTokens.pop_back();
  }
  Token &t = s.tokens[size_t(token)];
  ZRT_CUDA_CHECK(cudaEventRecord(t.event, comm->stream));
  t.live = true;
  return token;
}

void zrt::cuda::reduceScatterInPlace(zrt_comm *comm, int32_t dtype, void *buf,
                                     const std::vector<int> &counts,
                                     const std::vector<int> &displs) {
  const char *call = "reduceScatterInPlace";
  if (int(counts.size()) != comm->size || int(displs.size()) != comm->size)
    fatal("%s: %zu counts for %d ranks", call, counts.size(), comm->size);
  ncclComm_t nccl = ncclOf(comm);
  ncclDataType_t type = ncclType(dtype, call);
  bool even = true;
  for (int r = 0; r < comm->size; ++r)
    even &= counts[size_t(r)] == counts[0] && displs[size_t(r)] == r * counts[0];
  if (even) {
    // NCCL's in-place form: the result lands in this rank's own segment.
    if (counts[0] > 0)
      ZRT_NCCL_CHECK(ncclReduceScatter(
          buf, at(buf, int64_t(comm->rank) * counts[0], dtype),
          size_t(counts[0]), type, ncclSum, nccl, comm->stream));
    return;
  }
  ZRT_NCCL_CHECK(ncclGroupStart());
  for (int r = 0; r < comm->size; ++r)
    if (counts[size_t(r)] > 0) {
      char *segment = at(buf, displs[size_t(r)], dtype);
      ZRT_NCCL_CHECK(ncclReduce(segment, segment, size_t(counts[size_t(r)]),
                                type, ncclSum, r, nccl, comm->stream));
    }
  ZRT_NCCL_CHECK(ncclGroupEnd());
}

void zrt::cuda::allGatherInPlace(zrt_comm *comm, int32_t dtype, void *buf,
                                 const std::vector<int> &counts,
                                 const std::vector<int> &displs) {
  const char *call = "allGatherInPlace";
  if (int(counts.size()) != comm->size || int(displs.size()) != comm->size)
    fatal("%s: %zu counts for %d ranks", call, counts.size(), comm->size);
  ncclComm_t nccl = ncclOf(comm);
  ncclDataType_t type = ncclType(dtype, call);
  bool even = true;
  for (int r = 0; r < comm->size; ++r)
    even &= counts[size_t(r)] == counts[0] && displs[size_t(r)] == r * counts[0];
  if (even) {
    if (counts[0] > 0)
      ZRT_NCCL_CHECK(ncclAllGather(
          at(buf, int64_t(comm->rank) * counts[0], dtype), buf,
          size_t(counts[0]), type, nccl, comm->stream));
    return;
  }
  ZRT_NCCL_CHECK(ncclGroupStart());
  for (int r = 0; r < comm->size; ++r)
    if (counts[size_t(r)] > 0) {
      char *segment = at(buf, displs[size_t(r)], dtype);
      ZRT_NCCL_CHECK(ncclBroadcast(segment, segment, size_t(counts[size_t(r)]),
                                   type, r, nccl, comm->stream));
    }
  ZRT_NCCL_CHECK(ncclGroupEnd());
}

//===----------------------------------------------------------------------===//
// zrt.h
//===----------------------------------------------------------------------===//

extern "C" zrt_comm *zrt_comm_world(void) {
  CommState &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.world)
    return s.world;
  s.ownsMpi = initializeMpi();
  auto *world = new zrt_comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &world->comm);
  MPI_Comm_rank(world->comm, &world->rank);
  MPI_Comm_size(world->comm, &world->size);
  s.world = world;
  return world;
}

extern "C" int32_t zrt_comm_rank(const zrt_comm *comm) { return comm->rank; }
extern "C" int32_t zrt_comm_size(const zrt_comm *comm) { return comm->size; }

extern "C" void zrt_comm_barrier(zrt_comm *comm) { MPI_Barrier(comm->comm); }

extern "C" int64_t zrt_all_gather(zrt_comm *comm, int32_t dtype, const void *in,
                                  void *out, int64_t count) {
  checkDims("zrt_all_gather", count);
  ncclDataType_t type = ncclType(dtype, "zrt_all_gather");
  commAfterCompute(comm);
  if (count > 0)
    ZRT_NCCL_CHECK(ncclAllGather(in, out, size_t(count), type, ncclOf(comm),
                                 comm->stream));
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
  commAfterCompute(comm);
  if (count > 0)
    ZRT_NCCL_CHECK(ncclReduceScatter(in, out, size_t(count), type, ncclSum,
                                     ncclOf(comm), comm->stream));
  return recordToken(comm);
}

extern "C" int64_t zrt_reduce(zrt_comm *comm, int32_t dtype, const void *in,
                              void *out, int64_t count, int32_t root) {
  checkDims("zrt_reduce", count);
  if (root < 0 || root >= comm->size)
    fatal("zrt_reduce: root %d outside a world of %d", int(root), comm->size);
  ncclDataType_t type = ncclType(dtype, "zrt_reduce");
  commAfterCompute(comm);
  if (count > 0)
    ZRT_NCCL_CHECK(ncclReduce(in, out, size_t(count), type, ncclSum, root,
                              ncclOf(comm), comm->stream));
  return recordToken(comm);
}

extern "C" int64_t zrt_all_reduce(zrt_comm *comm, int32_t dtype, int32_t op,
                                  const void *in, void *out, int64_t count) {
  checkDims("zrt_all_reduce", count);
  ncclDataType_t type = ncclType(dtype, "zrt_all_reduce");
  if (op != ZRT_SUM && op != ZRT_MAX)
    fatal("zrt_all_reduce: unknown reduce op %d", int(op));
  commAfterCompute(comm);
  if (count > 0)
    ZRT_NCCL_CHECK(ncclAllReduce(in, out, size_t(count), type,
                                 op == ZRT_SUM ? ncclSum : ncclMax,
                                 ncclOf(comm), comm->stream));
  return recordToken(comm);
}

extern "C" void zrt_wait(int64_t token) {
  CommState &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (token < 0 || token >= int64_t(s.tokens.size()) ||
      !s.tokens[size_t(token)].live)
    fatal("zrt_wait: token %lld is not outstanding", (long long)token);
  Token &t = s.tokens[size_t(token)];
  // The compute stream waits, not the host: the event's current record is
  // captured now, so the event can be recorded again for another token.
  ZRT_CUDA_CHECK(cudaStreamWaitEvent(computeStream(), t.event, 0));
  t.live = false;
  s.freeTokens.push_back(token);
}

extern "C" void zrt_wait_all(void) {
  CommState &s = state();
  int64_t n;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    n = int64_t(s.tokens.size());
  }
  for (int64_t token = 0; token < n; ++token) {
    bool live;
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      live = s.tokens[size_t(token)].live;
    }
    if (live)
      zrt_wait(token);
  }
  if (s.world && s.world->stream)
    ZRT_CUDA_CHECK(cudaStreamSynchronize(s.world->stream));
}

// NCCL progresses on the GPU: nothing to drive from the host.
extern "C" void zrt_progress(void) {}

extern "C" void zrt_finalize(void) {
  CommState &s = state();
  if (!s.world)
    return;
  zrt_wait_all();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.world->nccl) {
    ZRT_CUDA_CHECK(cudaDeviceSynchronize());
    ncclCommDestroy(s.world->nccl);
    cudaStreamDestroy(s.world->stream);
    cudaEventDestroy(s.world->computeDone);
  }
  for (Token &t : s.tokens)
    cudaEventDestroy(t.event);
  s.tokens.clear();
  s.freeTokens.clear();
  MPI_Comm_free(&s.world->comm);
  delete s.world;
  s.world = nullptr;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (s.ownsMpi && !finalized)
    MPI_Finalize();
  s.ownsMpi = false;
}
