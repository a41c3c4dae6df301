//===- ProgramCuda.cpp - The calls generated step functions make (CUDA) ---===//
//
// Part of the zero-mlir project.
//
// The same zrt_ctx_* contract as the CPU backend (Program.cpp), with tensors
// in device memory. Each call only enqueues: kernels on the compute stream,
// collectives on the communication stream after an event that orders them
// behind their inputs (CommCuda.h). NCCL's in-place collectives leave every
// rank's sum in its own segment, so completions need no moves. The host
// waits for the GPU twice per step: for the overflow flag (the loss-scale
// decision, as in DeepSpeed) and at the end of the step.
//
//===----------------------------------------------------------------------===//

#include "CommCuda.h"
#include "CudaKernels.h"
#include "CudaSupport.h"
#include "Device.h"
#include "Program.h"
#include "Support.h"

#include <algorithm>
#include <mutex>

using namespace zrt;
using namespace zrt::cuda;

namespace {

/// Pinned host slots the micro steps' losses are copied into.
struct LossSlots {
  float *host = nullptr;
  int32_t capacity = 0;
};

LossSlots &lossSlots() {
  static LossSlots s;
  return s;
}

char *elements(char *base, int64_t n, const zrt_ctx *ctx) {
  return base + n * ctx->computeBytes;
}

/// memmove on the compute stream: cudaMemcpyAsync forbids overlapping
/// ranges, so overlapping ones move in stream-ordered pieces no longer than
/// the distance between them (front first when moving down, back first
/// when moving up), each piece free of overlap.
void moveBytes(char *dst, const char *src, int64_t bytes) {
  if (bytes <= 0 || dst == src)
    return;
  int64_t gap = dst > src ? dst - src : src - dst;
  if (gap >= bytes) {
    cuda::copy(dst, src, bytes);
    return;
  }
  if (dst < src) {
    for (int64_t at = 0; at < bytes; at += gap)
      cuda::copy(dst + at, src + at, std::min(gap, bytes - at));
  } else {
    for (int64_t end = bytes; end > 0; end -= gap) {
      int64_t at = std::max<int64_t>(0, end - gap);
      cuda::copy(dst + at, src + at, end - at);
    }
  }
}

} // namespace

void device::finishStep(zrt_ctx &ctx) {
  ZRT_CUDA_CHECK(cudaStreamSynchronize(computeStream()));
  ZRT_CUDA_CHECK(cudaStreamSynchronize(commStream(ctx.comm)));
  checkDeviceErrors();
  const LossSlots &s = lossSlots();
  for (int32_t i = 0; i < ctx.lossCount && i < s.capacity; ++i)
    ctx.lossSum += double(s.host[i]);
}


extern "C" void zrt_ctx_loss_scale(zrt_ctx *ctx, float *out) {
  cuda::fill(ZRT_F32, out, 1, double(zrt_loss_scaler_scale(&ctx->scaler)));
}

extern "C" void zrt_ctx_set_loss(zrt_ctx *ctx, const float *loss) {
  LossSlots &s = lossSlots();
  if (ctx->lossCount >= s.capacity) {
    // Pending copies target the old slots: let them land first.
    ZRT_CUDA_CHECK(cudaStreamSynchronize(computeStream()));
    int32_t grown = std::max<int32_t>(64, 2 * s.capacity);
    float *host = nullptr;
    ZRT_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void **>(&host),
                                  size_t(grown) * sizeof(float)));
    for (int32_t i = 0; i < s.capacity; ++i)
      host[i] = s.host[i];
    if (s.host)
      ZRT_CUDA_CHECK(cudaFreeHost(s.host));
    s.host = host;
    s.capacity = grown;
  }
  ZRT_CUDA_CHECK(cudaMemcpyAsync(s.host + ctx->lossCount, loss, sizeof(float),
                                 cudaMemcpyDeviceToHost, computeStream()));
  ++ctx->lossCount;
}

extern "C" void zrt_ctx_store_grad(zrt_ctx *ctx, int32_t p, int64_t offset,
                                   const void *src, int64_t count) {
  const PartitionInfo &part = partition(ctx, p, "zrt_ctx_store_grad");
  checkRange(part, offset, offset + count, part.counts[kGrads],
             "zrt_ctx_store_grad");
  char *dst = elements(ctx->buffer(p, kGrads), offset, ctx);
  if (dst == src)
    return;
  if (ctx->micro == 0)
    cuda::copy(dst, src, count * ctx->computeBytes);
  else
    cuda::add(ctx->manifest->computeDtype, dst, src, dst, count, count);
}

extern "C" void zrt_ctx_all_reduce_grads(zrt_ctx *ctx, int32_t p, int64_t begin,
                                         int64_t end, int32_t slot) {
  const PartitionInfo &part = partition(ctx, p, "zrt_ctx_all_reduce_grads");
  checkRange(part, begin, end, part.counts[kGrads], "zrt_ctx_all_reduce_grads");
  char *g = elements(ctx->buffer(p, kGrads), begin, ctx);
  int64_t token = zrt_all_reduce(ctx->comm, ctx->manifest->computeDtype,
                                 ZRT_SUM, g, g, end - begin);
  launch(ctx, slot, "all_reduce grads", {token}, nullptr);
}

extern "C" void zrt_ctx_reduce_scatter_grads(zrt_ctx *ctx, int32_t p,
                                             int64_t begin, int64_t end,
                                             int32_t slot) {
  const char *call = "zrt_ctx_reduce_scatter_grads";
  const PartitionInfo &part = partition(ctx, p, call);
  checkRange(part, begin, end, part.counts[kGrads], call);
  std::vector<int> counts, displs;
  splitByOwner(ctx, part, begin, end, counts, displs, call);
  commAfterCompute(ctx->comm);
  // The owned sums land in place, in this rank's slot of the full buffer.
  reduceScatterInPlace(ctx->comm, ctx->manifest->computeDtype,
                       elements(ctx->buffer(p, kGrads), begin, ctx), counts,
                       displs);
  launch(ctx, slot, "reduce_scatter grads", {recordToken(ctx->comm)}, nullptr);
}

extern "C" void zrt_ctx_bucket_add(zrt_ctx *ctx, void *bucket, int64_t at,
                                   const void *src, int64_t count) {
  if (at < 0 || count < 0)
    fatal("zrt_ctx_bucket_add: negative offset or count");
  char *dst = elements(static_cast<char *>(bucket), at, ctx);
  // Contiguous gradients were computed in the bucket already. The CPU
  // backend moves (memmove); so does this one.
  moveBytes(dst, static_cast<const char *>(src), count * ctx->computeBytes);
}

extern "C" void zrt_ctx_reduce_bucket(zrt_ctx *ctx, int32_t p, int64_t begin,
                                      int64_t end, const void *bucketIn,
                                      int32_t toOwners, int32_t slot) {
  const char *call = "zrt_ctx_reduce_bucket";
  const PartitionInfo &part = partition(ctx, p, call);
  checkRange(part, begin, end, part.paddedNumel, call);
  if (ctx->manifest->stage < 2)
    fatal("%s: bucketed reductions need a gradient shard (stage 2-3), the "
          "program is stage %d",
          call, int(ctx->manifest->stage));
  char *bucket = const_cast<char *>(static_cast<const char *>(bucketIn));
  int32_t dt = ctx->manifest->computeDtype;
  std::vector<int> counts, displs;
  splitByOwner(ctx, part, begin, end, counts, displs, call);
  commAfterCompute(ctx->comm);
  if (toOwners) {
    // One reduce per owner (DeepSpeed's reduce-to-owner buckets), grouped so
    // that NCCL runs them as one operation.
    ncclComm_t nccl = ncclOf(ctx->comm);
    ncclDataType_t type = ncclType(dt, call);
    ZRT_NCCL_CHECK(ncclGroupStart());
    for (int r = 0; r < ctx->world; ++r)
      if (counts[size_t(r)] > 0) {
        char *slice = elements(bucket, displs[size_t(r)], ctx);
        ZRT_NCCL_CHECK(ncclReduce(slice, slice, size_t(counts[size_t(r)]),
                                  type, ncclSum, r, nccl,
                                  commStream(ctx->comm)));
      }
    ZRT_NCCL_CHECK(ncclGroupEnd());
  } else {
    reduceScatterInPlace(ctx->comm, dt, bucket, counts, displs);
  }
  int64_t token = recordToken(ctx->comm);
  Range mine = ownedPart(ctx, part, ctx->rank, begin, end);
  int64_t shardAt = mine.begin - ctx->manifest->owned(part, ctx->rank).begin;
  char *sum = elements(bucket, displs[size_t(ctx->rank)], ctx);
  char *shard = ctx->buffer(p, kGrads);
  launch(ctx, slot, toOwners ? "reduce grads" : "reduce_scatter grads", {token},
         [=] {
           if (mine.size() > 0) {
             char *acc = elements(shard, shardAt, ctx);
             cuda::add(dt, acc, sum, acc, mine.size(), mine.size());
           }
         });
}

extern "C" void zrt_ctx_all_gather_params(zrt_ctx *ctx, int32_t p,
                                          int64_t begin, int64_t end,
                                          int32_t slot) {
  const char *call = "zrt_ctx_all_gather_params";
  const PartitionInfo &part = partition(ctx, p, call);
  checkRange(part, begin, end, part.counts[kParams], call);
  std::vector<int> counts, displs;
  splitByOwner(ctx, part, begin, end, counts, displs, call);
  commAfterCompute(ctx->comm);
  allGatherInPlace(ctx->comm, ctx->manifest->computeDtype,
                   elements(ctx->buffer(p, kParams), begin, ctx), counts,
                   displs);
  launch(ctx, slot, "all_gather params", {recordToken(ctx->comm)}, nullptr);
}

extern "C" void zrt_ctx_gather_partition(zrt_ctx *ctx, int32_t p, void *out,
                                         int32_t slot) {
  const PartitionInfo &part = partition(ctx, p, "zrt_ctx_gather_partition");
  if (ctx->manifest->stage != 3)
    fatal("zrt_ctx_gather_partition: needs a stage-3 program");
  int64_t token = zrt_all_gather(ctx->comm, ctx->manifest->computeDtype,
                                 ctx->buffer(p, kParams), out, part.shardNumel);
  launch(ctx, slot, "gather params", {token}, nullptr);
}

extern "C" void zrt_ctx_check_overflow(zrt_ctx *ctx, int32_t p, int32_t first,
                                       const float *lossScale, double divisor,
                                       float *stats) {
  const PartitionInfo &part = partition(ctx, p, "zrt_ctx_check_overflow");
  auto [grads, n] = ownedGrads(ctx, p, part);
  cuda::checkOverflow(ctx->manifest->computeDtype, grads, n, lossScale,
                      divisor, first, stats);
}

extern "C" void zrt_ctx_all_reduce_stats(zrt_ctx *ctx, const float *in,
                                         float *out, int32_t slot) {
  ncclComm_t nccl = ncclOf(ctx->comm);
  cudaStream_t stream = commStream(ctx->comm);
  commAfterCompute(ctx->comm);
  ZRT_NCCL_CHECK(ncclGroupStart());
  ZRT_NCCL_CHECK(ncclAllReduce(in, out, 1, ncclFloat32, ncclMax, nccl, stream));
  ZRT_NCCL_CHECK(
      ncclAllReduce(in + 1, out + 1, 1, ncclFloat32, ncclSum, nccl, stream));
  ZRT_NCCL_CHECK(ncclGroupEnd());
  launch(ctx, slot, "all_reduce stats", {recordToken(ctx->comm)}, nullptr);
}

extern "C" int32_t zrt_ctx_update_loss_scale(zrt_ctx *ctx, const float *stats) {
  float host[2];
  {
    WaitScope watched(ctx->waitState, "the overflow flag");
    device::download(host, stats, sizeof(host));
  }
  return updateLossScale(ctx, host);
}

extern "C" void zrt_ctx_adam(zrt_ctx *ctx, int32_t p, const float *stats,
                             const float *lossScale, int32_t skip,
                             double divisor) {
  const PartitionInfo &part = partition(ctx, p, "zrt_ctx_adam");
  const Manifest &m = *ctx->manifest;
  auto [grads, n] = ownedGrads(ctx, p, part);
  Range o = m.owned(part, ctx->rank);
  char *params = ctx->buffer(p, kParams);
  if (m.stage <= 2)
    params = elements(params, o.begin, ctx);
  cuda::adam(m.computeDtype, grads, ctx->buffer<float>(p, kMaster),
             ctx->buffer<float>(p, kExpAvg), ctx->buffer<float>(p, kExpAvgSq),
             params, n, ctx->adamSteps, m.lr, m.beta1, m.beta2, m.eps,
             m.weightDecay, m.adamw, m.gradientClipping, stats, lossScale,
             divisor, skip);
  cuda::fill(m.computeDtype, ctx->buffer(p, kGrads), part.counts[kGrads], 0.0);
}
