//===- CommCuda.h - NCCL communicators and stream tokens --------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// One NCCL communicator per process, bootstrapped through MPI (rank 0's
// unique id is broadcast), and one communication stream beside the compute
// stream. A collective first makes the communication stream wait for the
// compute work enqueued so far (its inputs), then records a CUDA event after
// itself: the event is the schedule's token, and zrt_wait makes the compute
// stream wait for it. Neither blocks the host. The collectives the zrt_ctx_*
// calls need are Collectives.h's, implemented in CommCuda.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_CUDA_COMM_H
#define ZERO_RT_CUDA_COMM_H

#include "Collectives/Collectives.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdint>
#include <vector>

namespace zrt {
namespace cuda {

/// Chooses GPU `localRank` modulo the visible GPUs and creates the world's
/// NCCL communicator. Throws std::runtime_error with a one-line reason when
/// no GPU is usable.
void initializeWorld(int localRank);

/// The communicator of `comm` (created on first use).
ncclComm_t ncclOf(zrt_comm *comm);
cudaStream_t commStream(zrt_comm *comm);

/// Orders the communication stream after all compute work enqueued so far.
void commAfterCompute(zrt_comm *comm);
/// Records the completion of everything enqueued on the communication
/// stream so far (the compute stream's, when `comm` is null); zrt_wait
/// consumes the token.
int64_t recordToken(zrt_comm *comm);

/// Whether collectives go through MPI over host memory (CommCudaHost.cpp)
/// instead of NCCL; `kind`, when not null, chooses first ("host" or
/// "nccl").
bool hostCollectives(const char *kind = nullptr);

/// The collectives of Collectives.h and zrt.h over host memory, for
/// --collectives host (CommCudaHost.cpp): each completes before it returns.
namespace host {
int64_t completeToken();
Tokens reduceScatterInPlace(zrt_comm *comm, int32_t dtype, void *buf,
                            const std::vector<int> &counts,
                            const std::vector<int> &displs, int64_t &sumAt);
Tokens reduceToOwners(zrt_comm *comm, int32_t dtype, void *buf,
                      const std::vector<int> &counts,
                      const std::vector<int> &displs);
Tokens allGatherInPlace(zrt_comm *comm, int32_t dtype, void *buf,
                        const std::vector<int> &counts,
                        const std::vector<int> &displs);
Tokens allReduceStats(zrt_comm *comm, const float *in, float *out);
Tokens allToAllBytes(zrt_comm *comm, const void *send,
                     const std::vector<int64_t> &sendCounts,
                     const std::vector<int64_t> &sendDispls, void *recv,
                     const std::vector<int64_t> &recvCounts,
                     const std::vector<int64_t> &recvDispls);
int64_t allGather(zrt_comm *comm, int32_t dtype, const void *in, void *out,
                  int64_t count);
int64_t reduceScatter(zrt_comm *comm, int32_t dtype, const void *in, void *out,
                      int64_t count);
int64_t reduce(zrt_comm *comm, int32_t dtype, const void *in, void *out,
               int64_t count, int32_t root);
int64_t allReduce(zrt_comm *comm, int32_t dtype, int32_t op, const void *in,
                  void *out, int64_t count);
Tokens twoLevelAllGather(Group &g, int32_t dtype, const void *in, void *buf,
                         const std::vector<int> &counts,
                         const std::vector<int> &displs);
Tokens twoLevelReduce(Group &g, int32_t dtype, void *buf,
                      const std::vector<int> &counts,
                      const std::vector<int> &displs,
                      const std::vector<int32_t> &ops);
Tokens twoLevelAllReduce(Group &g, int32_t dtype, const void *in, void *out,
                         const std::vector<int> &counts,
                         const std::vector<int> &displs,
                         const std::vector<int32_t> &ops);
} // namespace host

[[noreturn]] void ncclFatal(ncclResult_t result, const char *expr,
                            const char *file, int line);
#define ZRT_NCCL_CHECK(expr)                                                   \
  do {                                                                         \
    ncclResult_t zrtRes_ = (expr);                                             \
    if (zrtRes_ != ncclSuccess)                                                \
      ::zrt::cuda::ncclFatal(zrtRes_, #expr, __FILE__, __LINE__);              \
  } while (0)

ncclDataType_t ncclType(int32_t dtype, const char *call);

} // namespace cuda
} // namespace zrt

#endif // ZERO_RT_CUDA_COMM_H
