//===- CommCuda.h - NCCL communicators and stream tokens --------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// One NCCL communicator per process, bootstrapped through MPI (rank 0's
// unique id is broadcast), and one communication stream beside the compute
// stream. A collective first makes the communication stream wait for the
// compute work enqueued so far (its inputs), then records a CUDA event after
// itself: the event is the schedule's token, and zrt_wait makes the compute
// stream wait for it. Neither blocks the host.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_CUDA_COMM_H
#define ZERO_RT_CUDA_COMM_H

#include "zero_rt/zrt.h"

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
/// stream so far; zrt_wait consumes the token.
int64_t recordToken(zrt_comm *comm);

[[noreturn]] void ncclFatal(ncclResult_t result, const char *expr,
                            const char *file, int line);
#define ZRT_NCCL_CHECK(expr)                                                   \
  do {                                                                         \
    ncclResult_t zrtRes_ = (expr);                                             \
    if (zrtRes_ != ncclSuccess)                                                \
      ::zrt::cuda::ncclFatal(zrtRes_, #expr, __FILE__, __LINE__);              \
  } while (0)

ncclDataType_t ncclType(int32_t dtype, const char *call);

/// In place over buf, which holds every rank's contribution as segments of
/// counts[r] elements at displs[r] (consecutive, in rank order): afterwards
/// segment `rank` holds the sum of everyone's segment `rank`. Equal counts
/// use ncclReduceScatter; uneven ones (clipped last shards) one ncclReduce
/// per owner in a group.
void reduceScatterInPlace(zrt_comm *comm, int32_t dtype, void *buf,
                          const std::vector<int> &counts,
                          const std::vector<int> &displs);
/// In place: rank r's counts[r] elements sit at buf + displs[r]; afterwards
/// every rank has all of them (ncclAllGather, or one ncclBroadcast per
/// owner when the counts differ).
void allGatherInPlace(zrt_comm *comm, int32_t dtype, void *buf,
                      const std::vector<int> &counts,
                      const std::vector<int> &displs);

} // namespace cuda
} // namespace zrt

#endif // ZERO_RT_CUDA_COMM_H
