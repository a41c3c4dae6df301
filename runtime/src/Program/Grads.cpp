//===- Grads.cpp - Gradients: stored, reduced, bucketed -------------------===//
//
// Part of the zero-mlir project.
//
// The loss scale and the loss, the gradients' stores into the persistent
// buffer, and their reductions: all-reduce, reduce-scatter, the reduction
// to owners, buckets and qgZ's quantized reduce-scatter.
//
//===----------------------------------------------------------------------===//

#include "zero_rt/quantize.h"

#include "Program/Calls.h"

using namespace zrt;
using namespace zrt::program;

extern "C" void zrt_ctx_loss_scale(zrt_ctx *ctx, float *out) {
  device::storeF32(out, zrt_loss_scaler_scale(&ctx->scaler));
}

extern "C" void zrt_ctx_set_loss(zrt_ctx *ctx, const float *loss) {
  device::recordLoss(*ctx, loss);
}

extern "C" void zrt_ctx_store_grad(zrt_ctx *ctx, int32_t p, int64_t offset,
                                   const void *src, int64_t count) {
  const PartitionInfo &part = partition(ctx, p, "zrt_ctx_store_grad");
  checkRange(part, offset, offset + count, part.counts[kGrads],
             "zrt_ctx_store_grad");
  char *dst = element(ctx->buffer(p, kGrads), offset, part);
  if (dst == src)
    return;
  if (ctx->micro == 0)
    zrt_copy(dst, src, count * part.computeBytes);
  else
    zrt_add(part.computeDtype, dst, src, dst, count, count);
}

void program::allReduceGrads(zrt_ctx *ctx, int32_t p, int64_t begin,
                             int64_t end, int32_t slot) {
  const PartitionInfo &part = partition(ctx, p, "zrt_ctx_all_reduce_grads");
  checkRange(part, begin, end, part.counts[kGrads], "zrt_ctx_all_reduce_grads");
  char *g = element(ctx->buffer(p, kGrads), begin, part);
  Group &group = partitionGroup(ctx, part);
  const char *what = "all_reduce grads";
  int64_t seq =
      record(ctx, what, kAllReduce, group, (end - begin) * part.computeBytes);
  launch(
      ctx, slot, what,
      allReduce(group, kAllReduce, part.computeDtype, ZRT_SUM, g, end - begin),
      nullptr, seq);
}

void program::allReduceReplicas(zrt_ctx *ctx, int32_t p, int64_t begin,
                                int64_t end, int32_t slot) {
  const char *call = "zrt_ctx_all_reduce_replicas";
  const PartitionInfo &part = partition(ctx, p, call);
  if (ctx->manifest->stage != 3 || ctx->manifest->micsShardSize <= 0)
    fatal("%s: needs a stage-3 program with MiCS shard groups", call);
  checkRange(part, begin, end, part.numel, call);
  // Every replica owns the same shard, so the same elements of it.
  Range o = ctx->manifest->owned(part, ctx->rank);
  Range mine = ownedPart(ctx, part, ctx->rank, begin, end);
  Group &group = groupOf(ctx->comm, ZRT_RANKS_REPLICAS);
  const char *what = "all_reduce replicas";
  // Recorded on every rank, so that sequence numbers agree over the world.
  int64_t seq = record(ctx, what, kAllReduce, group,
                       std::max<int64_t>(0, mine.size()) * part.computeBytes);
  if (mine.size() <= 0) {
    launch(ctx, slot, what, {}, nullptr, seq);
    return;
  }
  char *g = element(ctx->buffer(p, kGrads), mine.begin - o.begin, part);
  launch(
      ctx, slot, what,
      allReduce(group, kAllReduce, part.computeDtype, ZRT_SUM, g, mine.size()),
      nullptr, seq);
}

namespace {
/// The in-place reduction of the persistent grads buffer's range [begin,
/// end): a reduce-scatter whose bytes count under `kind`.
void reduceGradsInPlace(zrt_ctx *ctx, int32_t p, int64_t begin, int64_t end,
                        int32_t slot, CommKind kind, const char *call) {
  const PartitionInfo &part = partition(ctx, p, call);
  checkRange(part, begin, end, part.counts[kGrads], call);
  std::vector<int> counts, displs;
  splitByOwner(ctx, part, begin, end, counts, displs, call);
  char *g = ctx->buffer(p, kGrads);
  int64_t eb = part.computeBytes;
  int64_t sumAt;
  Group &group = partitionGroup(ctx, part);
  const char *what = kind == kReduce ? "reduce grads" : "reduce_scatter grads";
  int64_t seq = record(ctx, what, kind, group, (end - begin) * eb);
  Tokens tokens = reduceScatter(group, kind, part.computeDtype,
                                element(g, begin, part), counts, displs, sumAt);
  // Move the sum to the owned slot of the full buffer if it landed elsewhere.
  Range mine = ownedPart(ctx, part, ctx->rank, begin, end);
  launch(
      ctx, slot, what, std::move(tokens),
      [=] {
        if (mine.size() > 0 && mine.begin != begin + sumAt)
          device::move(g + mine.begin * eb, g + (begin + sumAt) * eb,
                       mine.size() * eb);
      },
      seq);
}
} // namespace

void program::reduceScatterGrads(zrt_ctx *ctx, int32_t p, int64_t begin,
                                 int64_t end, int32_t slot) {
  reduceGradsInPlace(ctx, p, begin, end, slot, kReduceScatter,
                     "zrt_ctx_reduce_scatter_grads");
}

void program::reduceGrads(zrt_ctx *ctx, int32_t p, int64_t begin, int64_t end,
                          int32_t slot) {
  reduceGradsInPlace(ctx, p, begin, end, slot, kReduce, "zrt_ctx_reduce_grads");
}

extern "C" void zrt_ctx_bucket_add(zrt_ctx *ctx, int32_t p, void *bucket,
                                   int64_t at, const void *src, int64_t count) {
  const PartitionInfo &part = partition(ctx, p, "zrt_ctx_bucket_add");
  if (at < 0 || count < 0)
    fatal("zrt_ctx_bucket_add: negative offset or count");
  // The bucket holds gradients of one partition, in its compute dtype.
  char *dst = element(static_cast<char *>(bucket), at, part);
  // Contiguous gradients were computed in the bucket already.
  if (dst != src)
    device::move(dst, src, count * part.computeBytes);
}

void program::reduceBucket(zrt_ctx *ctx, int32_t p, int64_t begin, int64_t end,
                           const void *bucketIn, int32_t toOwners,
                           int32_t slot) {
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
  int32_t dt = part.computeDtype;
  std::vector<int> counts, displs;
  splitByOwner(ctx, part, begin, end, counts, displs, call);
  Tokens tokens;
  int64_t sumAt; // where this rank's sum is once complete
  Group &group = partitionGroup(ctx, part);
  const char *what = toOwners ? "reduce grads" : "reduce_scatter grads";
  int64_t seq = record(ctx, what, toOwners ? kReduce : kReduceScatter, group,
                       (end - begin) * part.computeBytes);
  Range mine = ownedPart(ctx, part, ctx->rank, begin, end);
  int64_t shardAt = mine.begin - ctx->manifest->owned(part, ctx->rank).begin;
  char *shard = ctx->buffer(p, kGrads);
  // Waited for here, the reduce-scatter may add the sum straight into the
  // shard (the bucket is not needed after it).
  if (!toOwners && slot < 0 &&
      reduceScatterAdd(group, kReduceScatter, dt, {{0, end - begin, bucket}},
                       counts, displs, element(shard, shardAt, part), tokens)) {
    launch(ctx, slot, what, std::move(tokens), nullptr, seq);
    return;
  }
  if (toOwners) {
    tokens = reduceToOwners(group, kReduce, dt, bucket, counts, displs);
    sumAt = displs[size_t(ctx->manifest->shardOf(part, ctx->rank))];
  } else {
    tokens =
        reduceScatter(group, kReduceScatter, dt, bucket, counts, displs, sumAt);
  }
  launch(
      ctx, slot, what, std::move(tokens),
      [=] {
        if (mine.size() > 0) {
          char *acc = element(shard, shardAt, part);
          zrt_add(dt, acc, element(bucket, sumAt, part), acc, mine.size(),
                  mine.size());
        }
      },
      seq);
}

void program::reduceBucketQuantized(zrt_ctx *ctx, int32_t p, int64_t begin,
                                    int64_t end, void *bucketIn, void *staging,
                                    int32_t slot) {
  const char *call = "zrt_ctx_reduce_bucket_quantized";
  const PartitionInfo &part = partition(ctx, p, call);
  checkRange(part, begin, end, part.paddedNumel, call);
  if (ctx->manifest->stage != 3)
    fatal("%s: qgZ reduces stage-3 gradients, the program is stage %d", call,
          int(ctx->manifest->stage));
  char *bucket = static_cast<char *>(bucketIn);
  int32_t dt = part.computeDtype;
  std::vector<int> counts, displs;
  splitByOwner(ctx, part, begin, end, counts, displs, call);
  Group &group = partitionGroup(ctx, part);
  const char *what = "reduce_scatter quantized grads";
  int64_t seq = record(ctx, what, kReduceScatter, group,
                       (end - begin) * part.computeBytes);
  Tokens tokens = quantizedReduceScatter(group, kReduceScatter, dt, bucket,
                                         counts, displs, staging);
  Range mine = ownedPart(ctx, part, ctx->rank, begin, end);
  int64_t shardAt = mine.begin - ctx->manifest->owned(part, ctx->rank).begin;
  char *shard = ctx->buffer(p, kGrads);
  // The fp32 sum, in the compute type in this rank's (no longer needed)
  // part of the bucket, added to the shard as the plain path adds its sum.
  char *sumAt = element(bucket, displs[size_t(group.me)], part);
  Group *g = &group;
  launch(
      ctx, slot, what, std::move(tokens),
      [=] {
        if (mine.size() == 0)
          return;
        float *sum = finishQuantizedReduceScatter(*g, counts, staging);
        zrt_cast(ZRT_F32, sum, dt, sumAt, mine.size());
        char *acc = element(shard, shardAt, part);
        zrt_add(dt, acc, sumAt, acc, mine.size(), mine.size());
      },
      seq);
}
