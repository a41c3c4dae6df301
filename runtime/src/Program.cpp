//===- Program.cpp - The calls generated step functions make (CPU) --------===//
//
// Part of the zero-mlir project.
//
// Generated code names layout ranges of partitions, never ranks; every
// rank-dependent detail is derived from the manifest (Manifest.cpp), so the
// last ranks may own fewer elements or none.
//
// Collectives work in place wherever MPI allows it, so no buffer beyond the
// compiler's plan is allocated: in-place reduce-scatters leave a rank's sum
// at the start of the buffer, from where the completion moves or adds it.
//
//===----------------------------------------------------------------------===//

#include "Program.h"
#include "Collectives.h"
#include "Support.h"

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace zrt;

extern "C" void zrt_ctx_loss_scale(zrt_ctx *ctx, float *out) {
  *out = zrt_loss_scaler_scale(&ctx->scaler);
}

extern "C" void zrt_ctx_set_loss(zrt_ctx *ctx, const float *loss) {
  ctx->lossSum += double(*loss);
  ++ctx->lossCount;
}

extern "C" void zrt_ctx_store_grad(zrt_ctx *ctx, int32_t p, int64_t offset,
                                   const void *src, int64_t count) {
  const PartitionInfo &part = partition(ctx, p, "zrt_ctx_store_grad");
  checkRange(part, offset, offset + count, part.counts[kGrads],
             "zrt_ctx_store_grad");
  char *dst = ctx->buffer(p, kGrads) + offset * ctx->computeBytes;
  if (dst == src)
    return;
  int32_t dt = ctx->manifest->computeDtype;
  if (ctx->micro == 0)
    zrt_copy(dst, src, count * ctx->computeBytes);
  else
    zrt_add(dt, dst, src, dst, count, count);
}


extern "C" void zrt_ctx_all_reduce_grads(zrt_ctx *ctx, int32_t p, int64_t begin,
                                         int64_t end, int32_t slot) {
  const PartitionInfo &part = partition(ctx, p, "zrt_ctx_all_reduce_grads");
  checkRange(part, begin, end, part.counts[kGrads], "zrt_ctx_all_reduce_grads");
  char *g = ctx->buffer(p, kGrads) + begin * ctx->computeBytes;
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
  char *g = ctx->buffer(p, kGrads);
  int64_t eb = ctx->computeBytes;
  int64_t token = reduceScatterInPlace(ctx->comm, ctx->manifest->computeDtype,
                                       g + begin * eb, counts);
  // The sum lands at the front of the range; move it to the owned slot.
  Range mine = ownedPart(ctx, part, ctx->rank, begin, end);
  launch(ctx, slot, "reduce_scatter grads", {token}, [=] {
    if (mine.size() > 0 && mine.begin != begin)
      std::memmove(g + mine.begin * eb, g + begin * eb,
                   size_t(mine.size() * eb));
  });
}

extern "C" void zrt_ctx_bucket_add(zrt_ctx *ctx, void *bucket, int64_t at,
                                   const void *src, int64_t count) {
  if (at < 0 || count < 0)
    fatal("zrt_ctx_bucket_add: negative offset or count");
  char *dst = static_cast<char *>(bucket) + at * ctx->computeBytes;
  // Contiguous gradients were computed in the bucket already.
  if (dst != src)
    std::memmove(dst, src, size_t(count * ctx->computeBytes));
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
  // The bucket is this op's step-arena temporary: reducing in place costs
  // no memory beyond the plan.
  char *bucket = const_cast<char *>(static_cast<const char *>(bucketIn));
  int32_t dt = ctx->manifest->computeDtype;
  int64_t eb = ctx->computeBytes;
  std::vector<int> counts, displs;
  splitByOwner(ctx, part, begin, end, counts, displs, call);
  std::vector<int64_t> tokens;
  int64_t sumAt; // where this rank's sum is once complete
  if (toOwners) {
    for (int r = 0; r < ctx->world; ++r)
      if (counts[size_t(r)] > 0) {
        char *slice = bucket + displs[size_t(r)] * eb;
        tokens.push_back(
            zrt_reduce(ctx->comm, dt, slice, slice, counts[size_t(r)], r));
      }
    sumAt = displs[size_t(ctx->rank)];
  } else {
    tokens.push_back(reduceScatterInPlace(ctx->comm, dt, bucket, counts));
    sumAt = 0;
  }
  Range mine = ownedPart(ctx, part, ctx->rank, begin, end);
  int64_t shardAt = mine.begin - ctx->manifest->owned(part, ctx->rank).begin;
  char *shard = ctx->buffer(p, kGrads);
  launch(ctx, slot, toOwners ? "reduce grads" : "reduce_scatter grads",
         std::move(tokens), [=] {
           if (mine.size() > 0) {
             char *acc = shard + shardAt * eb;
             zrt_add(dt, acc, bucket + sumAt * eb, acc, mine.size(),
                     mine.size());
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
  char *params = ctx->buffer(p, kParams) + begin * ctx->computeBytes;
  int64_t token = allGatherInPlace(ctx->comm, ctx->manifest->computeDtype,
                                   params, counts, displs);
  launch(ctx, slot, "all_gather params", {token}, nullptr);
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
  if (first)
    stats[0] = stats[1] = 0.0f;
  auto [grads, n] = ownedGrads(ctx, p, part);
  const void *buffers[1] = {grads};
  float local[2];
  zrt_check_overflow(ctx->manifest->computeDtype, buffers, &n, 1,
                     float(double(*lossScale) * divisor), local);
  stats[0] = std::max(stats[0], local[0]);
  stats[1] += local[1];
}

extern "C" void zrt_ctx_all_reduce_stats(zrt_ctx *ctx, const float *in,
                                         float *out, int32_t slot) {
  int64_t flag = zrt_all_reduce(ctx->comm, ZRT_F32, ZRT_MAX, in, out, 1);
  int64_t norm =
      zrt_all_reduce(ctx->comm, ZRT_F32, ZRT_SUM, in + 1, out + 1, 1);
  launch(ctx, slot, "all_reduce stats", {flag, norm}, nullptr);
}


extern "C" void zrt_ctx_adam(zrt_ctx *ctx, int32_t p, const float *stats,
                             const float *lossScale, int32_t skip,
                             double divisor) {
  const PartitionInfo &part = partition(ctx, p, "zrt_ctx_adam");
  const Manifest &m = *ctx->manifest;
  auto [grads, n] = ownedGrads(ctx, p, part);
  Range o = m.owned(part, ctx->rank);
  // Masters and moments hold the owned range: at offset 0 of the full
  // buffers at stage 0 (everything is owned) and of the shards otherwise.
  char *params = ctx->buffer(p, kParams);
  if (m.stage <= 2)
    params += o.begin * ctx->computeBytes;
  zrt_adam(m.computeDtype, grads, ctx->buffer<float>(p, kMaster),
           ctx->buffer<float>(p, kExpAvg), ctx->buffer<float>(p, kExpAvgSq),
           params, n, ctx->adamSteps, m.lr, m.beta1, m.beta2, m.eps,
           m.weightDecay, m.adamw, m.gradientClipping, stats,
           float(double(*lossScale) * divisor), skip);
  // Stage 2-3 shards accumulate; stage 0-1 slots are overwritten by the
  // next step, but an unused parameter's slot must not keep stale values.
  zrt_fill(m.computeDtype, ctx->buffer(p, kGrads), part.counts[kGrads], 0.0);
}

extern "C" int32_t zrt_ctx_update_loss_scale(zrt_ctx *ctx, const float *stats) {
  return updateLossScale(ctx, stats);
}
