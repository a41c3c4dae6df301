//===- CommCudaHost.cpp - CUDA collectives through MPI over host memory ---===//
//
// Part of the zero-mlir project.
//
// `train --collectives host` (ZRT_COLLECTIVES=host): the CUDA backend moves
// tensors as the CPU backend does, through MPI over host memory, instead of
// NCCL. Each collective waits for the compute stream (its inputs), copies
// the device buffers it reads into pinned host memory, runs the blocking MPI
// collective there, and copies what it writes back; its token is complete
// when it returns. Nothing overlaps, but no NCCL communicator exists, so
// several ranks may share one GPU (NCCL refuses two ranks on a device) and
// a machine without NCCL runs the CUDA kernels. 16-bit sums add each element
// pair in fp32 and round back, as NCCL and the CPU backend's MPI ops do.
//
//===----------------------------------------------------------------------===//

#include "Collectives/CommCuda.h"
#include "Collectives/Groups.h"
#include "Support/CudaGraphs.h"
#include "Support/CudaSupport.h"
#include "Support/Support.h"
#include "Support/Types.h"

#include <algorithm>
#include <climits>
#include <cstring>

using namespace zrt;
using namespace zrt::cuda;

namespace {

/// Pinned host memory that grows to the largest collective's bytes; `Which`
/// tells the two buffers of a collective apart.
template <int Which>
char *staging(size_t bytes) {
  graphs::pause();
  static char *buffer = nullptr;
  static size_t capacity = 0;
  if (bytes > capacity) {
    if (buffer)
      ZRT_CUDA_CHECK(cudaFreeHost(buffer));
    buffer = nullptr;
    capacity = std::max(bytes, capacity * 2);
    if (cudaMallocHost(reinterpret_cast<void **>(&buffer), capacity) !=
        cudaSuccess)
      fatal("--collectives host: cannot pin %zu bytes of host memory for a "
            "collective",
            capacity);
  }
  return buffer;
}

size_t elementSize(int32_t dtype) { return size_t(zrt_dtype_size(dtype)); }

/// The device's work so far (a collective's inputs) is complete.
void afterCompute() {
  graphs::pause();
  ZRT_CUDA_CHECK(cudaStreamSynchronize(computeStream()));
}

/// `bytes` copied on the compute stream, and waited for.
void copyWaited(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
  graphs::pause();
  if (bytes)
    ZRT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, computeStream()));
  ZRT_CUDA_CHECK(cudaStreamSynchronize(computeStream()));
}

void toHost(void *host, const void *device, size_t bytes) {
  copyWaited(host, device, bytes, cudaMemcpyDeviceToHost);
}

/// Waited for, so that the pinned staging is free for the next
/// collective's copy in.
void toDevice(void *device, const void *host, size_t bytes) {
  copyWaited(device, host, bytes, cudaMemcpyHostToDevice);
}

/// `bytes` of device memory at `device` in staging buffer `Which`, read once
/// the compute stream's work so far (the collective's inputs) is complete.
template <int Which>
char *stageIn(const void *device, size_t bytes) {
  char *host = staging<Which>(bytes);
  afterCompute();
  toHost(host, device, bytes);
  return host;
}

int mpiCount(int64_t count, const char *call) {
  if (count < 0 || count > INT_MAX)
    fatal("%s: count %lld is outside the MPI int range", call,
          (long long)count);
  return int(count);
}

// NaN wins in a max, as in the CPU backend's ops and torch.maximum.
float reduceAdd(float x, float y) { return x + y; }
float reduceMax(float x, float y) { return x != x || x > y ? x : y; }

template <typename T, float (*Op)(float, float)>
void userOp(void *in, void *inout, int *len, MPI_Datatype *) {
  const T *a = static_cast<const T *>(in);
  T *b = static_cast<T *>(inout);
  for (int i = 0; i < *len; ++i)
    b[i] = fromFloat<T>(Op(toFloat(a[i]), toFloat(b[i])));
}

struct Typed {
  MPI_Datatype type;
  MPI_Op op;
};

/// MPI's type and op for `dtype` reduced by `reduceOp` (ZRT_SUM, ZRT_MAX).
Typed typed(int32_t dtype, int32_t reduceOp, const char *call) {
  if (reduceOp != ZRT_SUM && reduceOp != ZRT_MAX)
    fatal("%s: unknown reduce op %d", call, int(reduceOp));
  bool sum = reduceOp == ZRT_SUM;
  static MPI_Op ops[4] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
  if (ops[0] == MPI_OP_NULL) {
    MPI_Op_create(userOp<BF16, reduceAdd>, /*commute=*/1, &ops[0]);
    MPI_Op_create(userOp<BF16, reduceMax>, 1, &ops[1]);
    MPI_Op_create(userOp<F16, reduceAdd>, 1, &ops[2]);
    MPI_Op_create(userOp<F16, reduceMax>, 1, &ops[3]);
  }
  switch (dtype) {
  case ZRT_F32:
    return {MPI_FLOAT, sum ? MPI_SUM : MPI_MAX};
  case ZRT_BF16:
    return {MPI_UINT16_T, ops[sum ? 0 : 1]};
  case ZRT_F16:
    return {MPI_UINT16_T, ops[sum ? 2 : 3]};
  default:
    badDtype(call, dtype);
  }
}

/// The segments' extent in elements: [displs[0], end).
int64_t extentOf(const std::vector<int> &counts,
                 const std::vector<int> &displs) {
  int64_t end = 0;
  for (size_t r = 0; r < counts.size(); ++r)
    end = std::max<int64_t>(end, int64_t(displs[r]) + counts[r]);
  return end;
}

/// The segments of a layout (Collectives.h) at `buf`, in staging buffer 0,
/// and their bytes.
struct Staged {
  char *host;
  size_t bytes;
};
Staged stageSegments(const void *buf, int32_t dtype,
                     const std::vector<int> &counts,
                     const std::vector<int> &displs) {
  size_t bytes = size_t(extentOf(counts, displs)) * elementSize(dtype);
  return {stageIn<0>(buf, bytes), bytes};
}

/// Segment r summed (by ops[r]) at rank r of `comm`, in place in `host`.
void reduceToEach(zrt_comm *comm, int32_t dtype, char *host,
                  const std::vector<int> &counts,
                  const std::vector<int> &displs,
                  const std::vector<int32_t> &ops, const char *call) {
  size_t eb = elementSize(dtype);
  for (int r = 0; r < comm->size; ++r) {
    if (counts[size_t(r)] == 0)
      continue;
    Typed t = typed(dtype, ops[size_t(r)], call);
    char *segment = host + size_t(displs[size_t(r)]) * eb;
    MPI_Reduce(comm->rank == r ? MPI_IN_PLACE : segment, segment,
               counts[size_t(r)], t.type, t.op, r, comm->comm);
  }
}

} // namespace

bool zrt::cuda::hostCollectives(const char *kind) {
  static bool host = false;
  if (kind)
    host = !std::strcmp(kind, "host");
  return host;
}

int64_t zrt::cuda::host::completeToken() {
  // Recorded after the copies back, on the stream that reads them.
  return recordToken(nullptr);
}

Tokens zrt::cuda::host::reduceScatterInPlace(zrt_comm *comm, int32_t dtype,
                                             void *buf,
                                             const std::vector<int> &counts,
                                             const std::vector<int> &displs,
                                             int64_t &sumAt) {
  const char *call = "reduceScatterInPlace";
  size_t eb = elementSize(dtype);
  char *in = stageSegments(buf, dtype, counts, displs).host;
  char *out = staging<1>(size_t(counts[size_t(comm->rank)]) * eb);
  Typed t = typed(dtype, ZRT_SUM, call);
  // MPI_Reduce_scatter reads the segments consecutively from the first.
  MPI_Reduce_scatter(in + size_t(displs[0]) * eb, out, counts.data(), t.type,
                     t.op, comm->comm);
  sumAt = displs[size_t(comm->rank)];
  toDevice(static_cast<char *>(buf) + size_t(sumAt) * eb, out,
           size_t(counts[size_t(comm->rank)]) * eb);
  return {completeToken()};
}

Tokens zrt::cuda::host::reduceToOwners(zrt_comm *comm, int32_t dtype, void *buf,
                                       const std::vector<int> &counts,
                                       const std::vector<int> &displs) {
  size_t eb = elementSize(dtype);
  char *host = stageSegments(buf, dtype, counts, displs).host;
  reduceToEach(comm, dtype, host, counts, displs,
               std::vector<int32_t>(size_t(comm->size), ZRT_SUM),
               "reduceToOwners");
  size_t at = size_t(displs[size_t(comm->rank)]) * eb;
  toDevice(static_cast<char *>(buf) + at, host + at,
           size_t(counts[size_t(comm->rank)]) * eb);
  return {completeToken()};
}

Tokens zrt::cuda::host::allGatherInPlace(zrt_comm *comm, int32_t dtype,
                                         void *buf,
                                         const std::vector<int> &counts,
                                         const std::vector<int> &displs) {
  Staged in = stageSegments(buf, dtype, counts, displs);
  MPI_Datatype type = dtype == ZRT_F32 ? MPI_FLOAT : MPI_UINT16_T;
  MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, in.host, counts.data(),
                 displs.data(), type, comm->comm);
  toDevice(buf, in.host, in.bytes);
  return {completeToken()};
}

Tokens zrt::cuda::host::allReduceStats(zrt_comm *comm, const float *in,
                                       float *out) {
  // {flag, norm} in, their reductions at host + 2.
  float *host = reinterpret_cast<float *>(staging<0>(4 * sizeof(float)));
  afterCompute();
  toHost(host, in, 2 * sizeof(float));
  MPI_Allreduce(&host[0], &host[2], 1, MPI_FLOAT, MPI_MAX, comm->comm);
  MPI_Allreduce(&host[1], &host[3], 1, MPI_FLOAT, MPI_SUM, comm->comm);
  toDevice(out, host + 2, 2 * sizeof(float));
  return {completeToken()};
}

Tokens zrt::cuda::host::allToAllBytes(zrt_comm *comm, const void *send,
                                      const std::vector<int64_t> &sendCounts,
                                      const std::vector<int64_t> &sendDispls,
                                      void *recv,
                                      const std::vector<int64_t> &recvCounts,
                                      const std::vector<int64_t> &recvDispls) {
  const char *call = "allToAllBytes";
  size_t n = size_t(comm->size);
  std::vector<int> sc(n), sd(n), rc(n), rd(n);
  int64_t sendEnd = 0, recvEnd = 0;
  for (size_t r = 0; r < n; ++r) {
    sc[r] = mpiCount(sendCounts[r], call);
    sd[r] = mpiCount(sendDispls[r], call);
    rc[r] = mpiCount(recvCounts[r], call);
    rd[r] = mpiCount(recvDispls[r], call);
    sendEnd = std::max(sendEnd, sendDispls[r] + sendCounts[r]);
    recvEnd = std::max(recvEnd, recvDispls[r] + recvCounts[r]);
  }
  char *hostSend = stageIn<0>(send, size_t(sendEnd));
  // What lies between the received pieces is copied back unchanged.
  char *hostRecv = stageIn<1>(recv, size_t(recvEnd));
  MPI_Alltoallv(hostSend, sc.data(), sd.data(), MPI_BYTE, hostRecv, rc.data(),
                rd.data(), MPI_BYTE, comm->comm);
  toDevice(recv, hostRecv, size_t(recvEnd));
  return {completeToken()};
}

int64_t zrt::cuda::host::allGather(zrt_comm *comm, int32_t dtype,
                                   const void *in, void *out, int64_t count) {
  size_t bytes = size_t(count) * elementSize(dtype);
  char *hostIn = stageIn<0>(in, bytes);
  char *hostOut = staging<1>(bytes * size_t(comm->size));
  MPI_Datatype type = dtype == ZRT_F32 ? MPI_FLOAT : MPI_UINT16_T;
  int n = mpiCount(count, "zrt_all_gather");
  MPI_Allgather(hostIn, n, type, hostOut, n, type, comm->comm);
  toDevice(out, hostOut, bytes * size_t(comm->size));
  return completeToken();
}

int64_t zrt::cuda::host::reduceScatter(zrt_comm *comm, int32_t dtype,
                                       const void *in, void *out,
                                       int64_t count) {
  size_t bytes = size_t(count) * elementSize(dtype);
  char *hostIn = stageIn<0>(in, bytes * size_t(comm->size));
  char *hostOut = staging<1>(bytes);
  Typed t = typed(dtype, ZRT_SUM, "zrt_reduce_scatter");
  MPI_Reduce_scatter_block(hostIn, hostOut,
                           mpiCount(count, "zrt_reduce_scatter"), t.type, t.op,
                           comm->comm);
  toDevice(out, hostOut, bytes);
  return completeToken();
}

int64_t zrt::cuda::host::reduce(zrt_comm *comm, int32_t dtype, const void *in,
                                void *out, int64_t count, int32_t root) {
  size_t bytes = size_t(count) * elementSize(dtype);
  char *hostIn = stageIn<0>(in, bytes);
  char *hostOut = staging<1>(bytes);
  Typed t = typed(dtype, ZRT_SUM, "zrt_reduce");
  MPI_Reduce(hostIn, hostOut, mpiCount(count, "zrt_reduce"), t.type, t.op, root,
             comm->comm);
  if (comm->rank == root)
    toDevice(out, hostOut, bytes);
  return completeToken();
}

int64_t zrt::cuda::host::allReduce(zrt_comm *comm, int32_t dtype, int32_t op,
                                   const void *in, void *out, int64_t count) {
  size_t bytes = size_t(count) * elementSize(dtype);
  char *hostIn = stageIn<0>(in, bytes);
  char *hostOut = staging<1>(bytes);
  Typed t = typed(dtype, op, "zrt_all_reduce");
  MPI_Allreduce(hostIn, hostOut, mpiCount(count, "zrt_all_reduce"), t.type,
                t.op, comm->comm);
  toDevice(out, hostOut, bytes);
  return completeToken();
}

//===----------------------------------------------------------------------===//
// Two levels (Groups.h), as the NCCL path runs them
//===----------------------------------------------------------------------===//

namespace {

/// Every member's segment to every member: across nodes (one broadcast per
/// segment of this local index, rooted at its node), then within each node
/// (one per segment, rooted at its local index).
void gatherLevels(Group &g, int32_t dtype, char *host,
                  const std::vector<int> &counts,
                  const std::vector<int> &displs) {
  size_t eb = elementSize(dtype);
  MPI_Datatype type = dtype == ZRT_F32 ? MPI_FLOAT : MPI_UINT16_T;
  int q = int(g.membersPerNode), l = g.localIndex();
  for (int b = 0; b < g.nodes(); ++b) {
    int m = b * q + l;
    if (counts[size_t(m)] > 0)
      MPI_Bcast(host + size_t(displs[size_t(m)]) * eb, counts[size_t(m)], type,
                b, g.cross->comm);
  }
  for (int m = 0; m < g.size(); ++m)
    if (counts[size_t(m)] > 0)
      MPI_Bcast(host + size_t(displs[size_t(m)]) * eb, counts[size_t(m)], type,
                m % q, g.node->comm);
}

/// Segment m reduced within each node to local index m % q, then across
/// nodes to member m, in place.
void reduceLevels(Group &g, int32_t dtype, char *host,
                  const std::vector<int> &counts,
                  const std::vector<int> &displs,
                  const std::vector<int32_t> &ops) {
  size_t eb = elementSize(dtype);
  int q = int(g.membersPerNode), l = g.localIndex();
  for (int m = 0; m < g.size(); ++m) {
    if (counts[size_t(m)] == 0)
      continue;
    Typed t = typed(dtype, ops[size_t(m)], "twoLevelReduce");
    char *seg = host + size_t(displs[size_t(m)]) * eb;
    MPI_Reduce(g.node->rank == m % q ? MPI_IN_PLACE : seg, seg,
               counts[size_t(m)], t.type, t.op, m % q, g.node->comm);
  }
  for (int b = 0; b < g.nodes(); ++b) {
    int m = b * q + l;
    if (counts[size_t(m)] == 0)
      continue;
    Typed t = typed(dtype, ops[size_t(m)], "twoLevelReduce");
    char *seg = host + size_t(displs[size_t(m)]) * eb;
    MPI_Reduce(g.cross->rank == b ? MPI_IN_PLACE : seg, seg, counts[size_t(m)],
               t.type, t.op, b, g.cross->comm);
  }
}

} // namespace

Tokens zrt::cuda::host::twoLevelAllGather(Group &g, int32_t dtype,
                                          const void *in, void *buf,
                                          const std::vector<int> &counts,
                                          const std::vector<int> &displs) {
  size_t eb = elementSize(dtype);
  Staged staged = stageSegments(buf, dtype, counts, displs);
  if (in && counts[size_t(g.me)] > 0)
    toHost(staged.host + size_t(displs[size_t(g.me)]) * eb, in,
           size_t(counts[size_t(g.me)]) * eb);
  gatherLevels(g, dtype, staged.host, counts, displs);
  toDevice(buf, staged.host, staged.bytes);
  return {completeToken()};
}

Tokens zrt::cuda::host::twoLevelReduce(Group &g, int32_t dtype, void *buf,
                                       const std::vector<int> &counts,
                                       const std::vector<int> &displs,
                                       const std::vector<int32_t> &ops) {
  Staged staged = stageSegments(buf, dtype, counts, displs);
  reduceLevels(g, dtype, staged.host, counts, displs, ops);
  toDevice(buf, staged.host, staged.bytes);
  return {completeToken()};
}

Tokens zrt::cuda::host::twoLevelAllReduce(Group &g, int32_t dtype,
                                          const void *in, void *out,
                                          const std::vector<int> &counts,
                                          const std::vector<int> &displs,
                                          const std::vector<int32_t> &ops) {
  Staged staged = stageSegments(in, dtype, counts, displs);
  reduceLevels(g, dtype, staged.host, counts, displs, ops);
  gatherLevels(g, dtype, staged.host, counts, displs);
  toDevice(out, staged.host, staged.bytes);
  return {completeToken()};
}
