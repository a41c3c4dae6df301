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

} // namespace cuda
} // namespace zrt

#endif // ZERO_RT_CUDA_COMM_H
