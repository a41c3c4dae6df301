//===- Program.cpp - The calls generated step functions make --------------===//
//
// Part of the zero-mlir project.
//
// Generated code names layout ranges of partitions, never ranks; every
// rank-dependent detail is derived from the manifest (Manifest.cpp), so the
// last ranks may own fewer elements or none.
//
// Written once for both backends: tensors are reached through zrt.h's
// kernels and Device.h, collectives through Collectives.h. On the CPU every
// call runs to completion or starts MPI requests; on the GPU it only
// enqueues (kernels on the compute stream, collectives on the communication
// stream), and the host waits twice per step: for the overflow flag (the
// loss-scale decision, as in DeepSpeed) and at the end of the step.
//
// Collectives work in place wherever the backend allows it, so no buffer
// beyond the compiler's plan is allocated: an in-place reduce-scatter leaves
// a rank's sum where Collectives.h says, from where the completion moves or
// adds it.
//
//===----------------------------------------------------------------------===//

#include "zero_rt/program.h"
#include "zero_rt/optimizers.h"
#include "zero_rt/quantize.h"

#include "Adafactor.h"
#include "Collectives.h"
#include "Device.h"
#include "Groups.h"
#include "Kernels.h"
#include "Manifest.h"
#include "MoeExchange.h"
#include "Nvme.h"
#include "Support.h"
#include "Trace.h"

#include <mpi.h>

#include <algorithm>
#include <array>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <type_traits>
#include <vector>

using namespace zrt;

namespace {

/// Element n of a buffer in partition `part`'s compute dtype.
char *element(char *base, int64_t n, const PartitionInfo &part) {
  return base + n * part.computeBytes;
}

/// The parameters of partition p with a weight decay of their own, as
/// zrt_adam's ranges of this rank's owned elements (parameters are laid out
/// in offset order).
struct DecayRanges {
  std::vector<int64_t> ranges;
  std::vector<double> decays;
};

DecayRanges decayRanges(const zrt_ctx &ctx, int32_t p,
                        const PartitionInfo &part) {
  const Manifest &m = *ctx.manifest;
  Range owned = m.owned(part, ctx.rank);
  std::vector<std::pair<Range, double>> own;
  for (const ParamInfo &info : m.params) {
    if (info.partition != p || info.weightDecay < 0)
      continue;
    Range r{std::max(info.offset, owned.begin),
            std::min(info.offset + info.numel, owned.end)};
    if (r.size() > 0)
      own.push_back({r, info.weightDecay});
  }
  std::sort(own.begin(), own.end(), [](const auto &x, const auto &y) {
    return x.first.begin < y.first.begin;
  });
  DecayRanges out;
  for (const auto &[r, decay] : own) {
    out.ranges.push_back(r.begin - owned.begin);
    out.ranges.push_back(r.end - owned.begin);
    out.decays.push_back(decay);
  }
  return out;
}

/// The Group the step's collectives run over: the world, in one level or
/// two (Groups.h).
Group &worldGroup(zrt_ctx *ctx) { return groupOf(ctx->comm, ZRT_RANKS_GROUP); }

/// The Group partition `part`'s collectives run over: an expert partition's
/// over the rank's expert replica set (the ranks holding the same experts,
/// member j owning shard j), the others over worldGroup.
Group &partitionGroup(zrt_ctx *ctx, const PartitionInfo &part) {
  return part.expert ? groupOf(ctx->comm, ZRT_RANKS_EXPERT_REPLICAS)
                     : worldGroup(ctx);
}

/// Records a collective over `group` in the flight recorder before it is
/// issued; returns its sequence number. The test hook ZRT_TEST_SKIP_COLLECTIVE
/// stops this rank here instead, waiting (as the watchdog sees it) forever.
int64_t record(zrt_ctx *ctx, const char *what, CommKind kind, int32_t setKind,
               zrt_rank_set set, int64_t bytes) {
  const FlightSkip &skip = flightSkip();
  if (skip.rank == ctx->rank && skip.seq == ctx->flight.next()) {
    std::fprintf(stderr,
                 "zrt: test hook: ZRT_TEST_SKIP_COLLECTIVE: rank %d stops "
                 "before its collective %lld (%s, step %lld)\n",
                 ctx->rank, (long long)skip.seq, what,
                 (long long)ctx->stepIndex);
    std::fflush(stderr);
    WaitScope watched(ctx->waitState, "the collective the test hook skips");
    for (;;)
      std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  return ctx->flight.issue(what, kind, setKind, set, bytes, ctx->stepIndex,
                           ctx->micro);
}

int64_t record(zrt_ctx *ctx, const char *what, CommKind kind,
               const Group &group, int64_t bytes) {
  return record(ctx, what, kind, group.kind, group.set, bytes);
}

/// zrt_adam's schedule argument: null for a constant learning rate.
const zrt_lr_schedule *lrSchedule(const Manifest &m) {
  return m.schedule.kind == ZRT_LR_CONSTANT ? nullptr : &m.schedule;
}

} // namespace

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

static void allReduceGrads(zrt_ctx *ctx, int32_t p, int64_t begin, int64_t end,
                           int32_t slot) {
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

static void allReduceReplicas(zrt_ctx *ctx, int32_t p, int64_t begin,
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

static void reduceScatterGrads(zrt_ctx *ctx, int32_t p, int64_t begin,
                               int64_t end, int32_t slot) {
  reduceGradsInPlace(ctx, p, begin, end, slot, kReduceScatter,
                     "zrt_ctx_reduce_scatter_grads");
}

static void reduceGrads(zrt_ctx *ctx, int32_t p, int64_t begin, int64_t end,
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

static void reduceBucket(zrt_ctx *ctx, int32_t p, int64_t begin, int64_t end,
                         const void *bucketIn, int32_t toOwners, int32_t slot) {
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

static void reduceBucketQuantized(zrt_ctx *ctx, int32_t p, int64_t begin,
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

static void allGatherParams(zrt_ctx *ctx, int32_t p, int64_t begin, int64_t end,
                            int32_t slot) {
  const char *call = "zrt_ctx_all_gather_params";
  const PartitionInfo &part = partition(ctx, p, call);
  checkRange(part, begin, end, part.counts[kParams], call);
  std::vector<int> counts, displs;
  splitByOwner(ctx, part, begin, end, counts, displs, call);
  char *params = element(ctx->buffer(p, kParams), begin, part);
  Group &group = partitionGroup(ctx, part);
  const char *what = "all_gather params";
  int64_t seq =
      record(ctx, what, kAllGather, group, (end - begin) * part.computeBytes);
  launch(
      ctx, slot, what,
      allGather(group, kAllGather, part.computeDtype, params, counts, displs),
      nullptr, seq);
}

static void gatherPartition(zrt_ctx *ctx, int32_t p, void *out, int32_t slot) {
  const PartitionInfo &part = partition(ctx, p, "zrt_ctx_gather_partition");
  if (ctx->manifest->stage != 3)
    fatal("zrt_ctx_gather_partition: needs a stage-3 program");
  Group &group = partitionGroup(ctx, part);
  int64_t seq = record(ctx, "gather params", kAllGather, group,
                       part.shardNumel * group.size() * part.computeBytes);
  launch(ctx, slot, "gather params",
         allGather(group, kAllGather, part.computeDtype,
                   ctx->buffer(p, kParams), out, part.shardNumel),
         nullptr, seq);
}

/// Calls fn(begin, end, offset) for each nonempty piece [begin, end) of the
/// shard [lo, lo + shard) between the parameter starts `starts`, with the
/// byte offset of its chunk in the quantized slot (zero_rt/quantize.h).
template <typename Fn>
static void forEachQuantPiece(const std::vector<int64_t> &starts, int64_t lo,
                              int64_t shard, int32_t bits, Fn fn) {
  int64_t hi = lo + shard, begin = lo, offset = 0;
  for (auto it = std::upper_bound(starts.begin(), starts.end(), lo);
       it != starts.end() && *it < hi; ++it) {
    if (*it > begin) {
      fn(begin, *it, offset);
      offset += zrt_quant_bytes(*it - begin, bits);
    }
    begin = *it;
  }
  fn(begin, hi, offset);
}

static void gatherQuantized(zrt_ctx *ctx, int32_t p, void *staging, void *out,
                            int32_t slot) {
  const char *call = "zrt_ctx_gather_quantized";
  const PartitionInfo &part = partition(ctx, p, call);
  if (ctx->manifest->stage != 3)
    fatal("%s: needs a stage-3 program", call);
  if (part.computeDtype == ZRT_F32)
    fatal("%s: partition '%s' computes in fp32; qwZ quantizes 16-bit weights",
          call, part.name.c_str());
  const int32_t bits = 8;
  const int64_t shard = part.shardNumel;
  // Over the step's Group (the world or this rank's MiCS shard group), in
  // one level or two, its bytes counted as an all-gather's.
  Group &group = partitionGroup(ctx, part);
  const std::vector<int64_t> *starts = &part.paramStarts;
  const int64_t members = group.size();
  const int64_t slotBytes = zrt_quant_slot_bytes(
      starts->data(), int64_t(starts->size()), shard, members, bits);
  int64_t seq = record(ctx, "gather quantized params", kAllGather, group,
                       slotBytes * members);
  // Each parameter's piece of the shard is quantized on its own; the rest of
  // the slot is zero.
  const int32_t dtype = part.computeDtype;
  const int64_t eb = part.computeBytes;
  char *mine = static_cast<char *>(staging) + group.me * slotBytes;
  const char *params = static_cast<const char *>(ctx->buffer(p, kParams));
  const int64_t lo = group.me * shard;
  int64_t used = 0;
  forEachQuantPiece(*starts, lo, shard, bits,
                    [&](int64_t begin, int64_t end, int64_t offset) {
                      zrt_quantize(dtype, params + (begin - lo) * eb,
                                   end - begin, 1, bits, mine + offset);
                      used = offset + zrt_quant_bytes(end - begin, bits);
                    });
  if (slotBytes > used)
    zrt_fill(ZRT_F32, mine + used, (slotBytes - used) / 4, 0.0);
  // The slots are whole 4-byte words, moved as fp32 words without
  // arithmetic.
  Tokens tokens =
      allGather(group, kAllGather, ZRT_F32, mine, staging, slotBytes / 4);
  launch(
      ctx, slot, "gather quantized params", std::move(tokens),
      [=] {
        const char *in = static_cast<const char *>(staging);
        char *y = static_cast<char *>(out);
        for (int64_t m = 0; m < members; ++m)
          forEachQuantPiece(*starts, m * shard, shard, bits,
                            [&](int64_t begin, int64_t end, int64_t offset) {
                              zrt_dequantize(dtype, in + m * slotBytes + offset,
                                             end - begin, 1, bits,
                                             y + begin * eb);
                            });
      },
      seq);
}

static void gatherStaged(zrt_ctx *ctx, int32_t p, const void *shard, void *out,
                         int32_t slot) {
  const char *call = "zrt_ctx_gather_staged";
  const PartitionInfo &part = partition(ctx, p, call);
  if (!part.paramsOffloaded())
    fatal("%s: partition '%s' keeps its params shard on the device", call,
          part.name.c_str());
  Group &group = partitionGroup(ctx, part);
  int64_t seq = record(ctx, "gather params", kAllGather, group,
                       part.shardNumel * group.size() * part.computeBytes);
  launch(ctx, slot, "gather params",
         allGather(group, kAllGather, part.computeDtype, shard, out,
                   part.shardNumel),
         nullptr, seq);
}

/// hpZ: the elements of a slice of partition `part`'s secondary shard,
/// checked against the program's hpZ group.
static int64_t secondaryNumel(zrt_ctx *ctx, const PartitionInfo &part,
                              const char *call) {
  int64_t h = ctx->manifest->hpzPartitionSize;
  if (h <= 1 || !part.hasBuffer(kSecondary))
    fatal("%s: partition '%s' has no hpZ secondary buffer", call,
          part.name.c_str());
  return part.paddedNumel / h;
}

extern "C" void zrt_ctx_store_secondary(zrt_ctx *ctx, int32_t p,
                                        const void *full) {
  const char *call = "zrt_ctx_store_secondary";
  const PartitionInfo &part = partition(ctx, p, call);
  int64_t n = secondaryNumel(ctx, part, call);
  int64_t j = groupOf(ctx->comm, ZRT_RANKS_HPZ).me;
  device::move(ctx->buffer(p, kSecondary),
               static_cast<const char *>(full) + j * n * part.computeBytes,
               n * part.computeBytes);
}

static void gatherSecondary(zrt_ctx *ctx, int32_t p, void *out, int32_t slot) {
  const char *call = "zrt_ctx_gather_secondary";
  const PartitionInfo &part = partition(ctx, p, call);
  int64_t n = secondaryNumel(ctx, part, call);
  Group &group = groupOf(ctx->comm, ZRT_RANKS_HPZ);
  int64_t seq = record(ctx, "gather secondary", kAllGather, group,
                       n * group.size() * part.computeBytes);
  launch(ctx, slot, "gather secondary",
         allGather(group, kAllGather, part.computeDtype,
                   ctx->buffer(p, kSecondary), out, n),
         nullptr, seq);
}

extern "C" void zrt_ctx_stage_params(zrt_ctx *ctx, int32_t p, void *staged,
                                     int32_t toHost, int32_t slot) {
  const char *call = "zrt_ctx_stage_params";
  const PartitionInfo &part = partition(ctx, p, call);
  if (!part.paramsOnHost())
    fatal("%s: partition '%s' keeps its params shard %s", call,
          part.name.c_str(),
          part.paramsOffloaded() ? "on NVMe (zrt_ctx_swap_params)"
                                 : "on the device");
  // The gather sends the whole shard; Adam wrote only the owned elements
  // (the rest of the host shard is padding, zero since initialization).
  char *host = ctx->buffer(p, kParams);
  int64_t n =
      toHost ? ctx->manifest->owned(part, ctx->rank).size() : part.shardNumel;
  int64_t bytes = n * part.computeBytes;
  const char *what = toHost ? "copy params to host" : "copy params to device";
  // Traced as zrt_ctx_transfer's copies are.
  double start = ctx->tracing ? ctx->nowUs() : 0.0;
  std::function<void()> done =
      toHost ? device::transfer(host, staged, bytes, true)
             : device::transfer(staged, host, bytes, false);
  if (ctx->tracing)
    ctx->trace.push_back({what, start, ctx->nowUs() - start});
  launch(ctx, slot, what, {}, std::move(done));
}

extern "C" void zrt_ctx_copy_activation(zrt_ctx *ctx, void *device,
                                        int64_t hostOffset, int64_t bytes,
                                        int32_t toHost, int32_t slot) {
  const char *call = "zrt_ctx_copy_activation";
  int64_t hostBytes = ctx->manifest->hostBytes;
  if (!ctx->host || hostOffset < 0 || bytes < 0 ||
      hostOffset > hostBytes - bytes)
    fatal("%s: [%lld, %lld) is outside the host arena of %lld bytes", call,
          (long long)hostOffset, (long long)(hostOffset + bytes),
          (long long)hostBytes);
  char *host = ctx->host + hostOffset;
  const char *what =
      toHost ? "copy activation to host" : "copy activation to device";
  // Traced as zrt_ctx_transfer's copies are.
  double start = ctx->tracing ? ctx->nowUs() : 0.0;
  std::function<void()> done =
      toHost ? device::transfer(host, device, bytes, true)
             : device::transfer(device, host, bytes, false);
  if (ctx->tracing)
    ctx->trace.push_back({what, start, ctx->nowUs() - start});
  launch(ctx, slot, what, {}, std::move(done));
}

extern "C" void zrt_ctx_swap_params(zrt_ctx *ctx, int32_t p, void *staged,
                                    int32_t from, int32_t toFile,
                                    int32_t buffer, int64_t bufferBytes,
                                    int32_t slot) {
  const char *call = "zrt_ctx_swap_params";
  const PartitionInfo &part = partition(ctx, p, call);
  const Manifest &m = *ctx->manifest;
  if (!part.onNvme[kParams] || !ctx->paramNvme)
    fatal("%s: partition '%s' keeps its params shard %s", call,
          part.name.c_str(),
          part.paramsOnHost() ? "in host memory" : "on the device");
  // The buffer is one of the plan's, and holds the shard in whole blocks
  // (the compiler's verifier checks the same).
  int64_t shardBytes = part.shardNumel * part.computeBytes;
  int64_t blocks = ceilDiv(shardBytes, kSwapAlignment) * kSwapAlignment;
  if (buffer < 0 || bufferBytes < blocks || bufferBytes % kSwapAlignment ||
      (int64_t(buffer) + 1) * bufferBytes > ctx->paramSwapBytes)
    fatal("%s: swap buffer %d of %lld bytes does not fit the plan's %lld "
          "bytes of parameter swap buffers or the %lld-byte shard of '%s'",
          call, int(buffer), (long long)bufferBytes,
          (long long)ctx->paramSwapBytes, (long long)blocks, part.name.c_str());
  char *swap = ctx->paramSwap + int64_t(buffer) * bufferBytes;
  // A shard over one transfer's limit (a 70B model's embedding on one rank
  // is 2 GiB of bf16) moves as several transfers, all in flight at once.
  auto ios = std::make_shared<std::vector<SwapIo>>();
  int64_t limit = swapTransferLimit();
  for (int64_t at = 0; at < blocks; at += limit) {
    SwapIo &io = ios->emplace_back();
    io.buffer = swap + at;
    io.bytes = std::min(limit, blocks - at);
    io.offset = part.offsets[kParams] + at;
  }
  static bool told = false;
  if (limit != kMaxTransfer && ios->size() > 1 && !told) {
    told = true;
    std::fprintf(stderr,
                 "zrt: test hook: ZRT_TEST_NVME_MAX_TRANSFER: the %lld-byte "
                 "shard of '%s' moves as %zu transfers of at most %lld "
                 "bytes\n",
                 (long long)blocks, part.name.c_str(), ios->size(),
                 (long long)limit);
  }
  SwapFile *file = ctx->paramNvme;
  file->setStep(ctx->stepIndex);
  double start = ctx->tracing ? ctx->nowUs() : 0.0;
  if (!toFile) {
    // The read runs while the step computes; at the wait the shard goes
    // from the swap buffer into the staged device buffer (the gather sends
    // all of it).
    if (!staged)
      fatal("%s: reading the shard of '%s' needs a staged buffer", call,
            part.name.c_str());
    for (SwapIo &io : *ios)
      file->submit(io);
    if (ctx->tracing)
      ctx->trace.push_back(
          {"read params from nvme", start, ctx->nowUs() - start});
    // The completion blocks on the disk and copies: both are transfer time,
    // traced as such (zrt_ctx_wait's own span covers only its tokens).
    launch(ctx, slot, "read params from nvme", {},
           [ctx, file, ios, staged, swap, shardBytes] {
             double waitStart = ctx->tracing ? ctx->nowUs() : 0.0;
             for (SwapIo &io : *ios)
               file->wait(io);
             double copyStart = ctx->tracing ? ctx->nowUs() : 0.0;
             if (auto copied =
                     device::transfer(staged, swap, shardBytes, false))
               copied();
             if (ctx->tracing) {
               ctx->trace.push_back(
                   {"wait disk read params", waitStart, copyStart - waitStart});
               ctx->trace.push_back({"copy params to device", copyStart,
                                     ctx->nowUs() - copyStart});
             }
           });
    return;
  }
  // The owned new parameters at the front of the shard, the rest of its
  // blocks zero (the shard's padding is zero since initialization).
  int64_t ownedBytes = m.owned(part, ctx->rank).size() * part.computeBytes;
  if (staged) {
    if (auto copied = device::transfer(swap, staged, ownedBytes, true))
      copied();
  } else if (from == kHostParams && part.hasBuffer(kHostParams)) {
    std::memcpy(swap, ctx->buffer(p, kHostParams), size_t(ownedBytes));
  } else if (from == kMaster && part.hasBuffer(kMaster) && part.offloaded() &&
             !part.onNvme[kMaster] && part.computeDtype == ZRT_F32) {
    std::memcpy(swap, ctx->buffer(p, kMaster), size_t(ownedBytes));
  } else {
    fatal("%s: partition '%s' has no copy from buffer %d to its parameter "
          "swap file",
          call, part.name.c_str(), int(from));
  }
  std::memset(swap + ownedBytes, 0, size_t(blocks - ownedBytes));
  // The test hook kills the rank once a parameter write of its step landed.
  file->setKillOnWrite(nvmeKillStep() > 0 && ctx->stepIndex == nvmeKillStep());
  for (SwapIo &io : *ios) {
    io.write = true;
    file->submit(io);
  }
  if (ctx->tracing)
    ctx->trace.push_back({"write params to nvme", start, ctx->nowUs() - start});
  launch(ctx, slot, "write params to nvme", {}, [ctx, file, ios] {
    double waitStart = ctx->tracing ? ctx->nowUs() : 0.0;
    for (SwapIo &io : *ios)
      file->wait(io);
    if (ctx->tracing)
      ctx->trace.push_back(
          {"wait disk write params", waitStart, ctx->nowUs() - waitStart});
  });
}

extern "C" void zrt_ctx_check_overflow(zrt_ctx *ctx, int32_t p, int32_t first,
                                       const float *lossScale, double divisor,
                                       float *stats) {
  const PartitionInfo &part = partition(ctx, p, "zrt_ctx_check_overflow");
  auto [grads, n] = ownedGrads(ctx, p, part);
  // Each partition's gradients in its own dtype, into one set of stats: a
  // non-finite value anywhere skips the whole step.
  device::checkOverflow(part.computeDtype, grads, n, lossScale, divisor, first,
                        stats);
}

static void allReduceOverflowNorm(zrt_ctx *ctx, int32_t ranks, const float *in,
                                  float *out, int32_t slot) {
  // The group, or the set the program names: the expert-parallel set for
  // the expert partitions' stats at stage 0 under expert parallelism.
  Group &group = groupOf(ctx->comm, ranks);
  int64_t seq = record(ctx, "all_reduce stats", kAllReduce, group,
                       2 * int64_t(sizeof(float)));
  launch(ctx, slot, "all_reduce stats", allReduceStats(group, in, out), nullptr,
         seq);
}

namespace {
/// Moves the P chunks of an (outer, P, inner) view of `view` to or from P
/// contiguous chunks of outer * inner elements at `chunks`.
void moveChunks(char *view, char *chunks, int64_t outer, int64_t p,
                int64_t inner, int64_t es, bool pack) {
  int64_t row = inner * es;
  for (int64_t j = 0; j < p; ++j)
    for (int64_t o = 0; o < outer; ++o) {
      char *v = view + (o * p + j) * row;
      char *c = chunks + (j * outer + o) * row;
      if (pack)
        device::move(c, v, row);
      else
        device::move(v, c, row);
    }
}

/// Where an all-to-all sends from and receives into (zrt_ctx_all_to_all's
/// views and staging), and the unpack that completes it.
struct AllToAllPlan {
  const char *send;
  char *recv;
  int64_t chunkBytes;
  std::function<void()> unpack;
};

AllToAllPlan planAllToAll(const char *call, int p, int32_t dtype,
                          const void *in, void *out, void *staging,
                          int64_t splitOuter, int64_t splitInner,
                          int64_t concatOuter, int64_t concatInner) {
  if (splitOuter < 1 || splitInner < 0 || concatOuter < 1 || concatInner < 0 ||
      splitOuter * splitInner != concatOuter * concatInner)
    fatal("%s: views (%lld, %d, %lld) and (%lld, %d, %lld) differ in size",
          call, (long long)splitOuter, p, (long long)splitInner,
          (long long)concatOuter, p, (long long)concatInner);
  int64_t es = zrt_dtype_size(dtype);
  AllToAllPlan plan;
  plan.chunkBytes = splitOuter * splitInner * es;
  char *st = static_cast<char *>(staging);
  plan.send = static_cast<const char *>(in);
  if (splitOuter > 1) {
    moveChunks(const_cast<char *>(plan.send), st, splitOuter, p, splitInner, es,
               /*pack=*/true);
    plan.send = st;
    st += plan.chunkBytes * p;
  }
  plan.recv = static_cast<char *>(out);
  if (concatOuter > 1) {
    plan.recv = st;
    char *to = static_cast<char *>(out);
    plan.unpack = [to, st, concatOuter, p, concatInner, es] {
      moveChunks(to, st, concatOuter, p, concatInner, es, /*pack=*/false);
    };
  }
  return plan;
}
} // namespace

static void allToAllTensor(zrt_ctx *ctx, int32_t ranks, int32_t dtype,
                           const void *in, void *out, void *staging,
                           int64_t splitOuter, int64_t splitInner,
                           int64_t concatOuter, int64_t concatInner,
                           int32_t slot) {
  Group &group = groupOf(ctx->comm, ranks);
  AllToAllPlan plan =
      planAllToAll("zrt_ctx_all_to_all", group.size(), dtype, in, out, staging,
                   splitOuter, splitInner, concatOuter, concatInner);
  const char *what = "all_to_all";
  int64_t seq =
      record(ctx, what, kAllToAll, group, plan.chunkBytes * group.size());
  launch(ctx, slot, what,
         allToAll(group, kAllToAll, plan.send, plan.recv, plan.chunkBytes),
         plan.unpack, seq);
}

extern "C" void zrt_all_to_all(zrt_comm *comm, int32_t dtype, const void *in,
                               void *out, void *staging, int64_t splitOuter,
                               int64_t splitInner, int64_t concatOuter,
                               int64_t concatInner) {
  int p = comm->size;
  AllToAllPlan plan =
      planAllToAll("zrt_all_to_all", p, dtype, in, out, staging, splitOuter,
                   splitInner, concatOuter, concatInner);
  std::vector<int64_t> counts(size_t(p), plan.chunkBytes), displs;
  for (int m = 0; m < p; ++m)
    displs.push_back(int64_t(m) * plan.chunkBytes);
  for (int64_t t : allToAllBytes(comm, plan.send, counts, displs, plan.recv,
                                 counts, displs))
    zrt_wait(t);
  if (plan.unpack)
    plan.unpack();
}

namespace {
/// `n` i32 values of tensor memory, widened on the host.
std::vector<int64_t> downloadI32(zrt_ctx *ctx, const int32_t *src, int64_t n,
                                 const char *what) {
  std::vector<int32_t> host(size_t(std::max<int64_t>(n, 0)));
  {
    WaitScope watched(ctx->waitState, what);
    device::download(host.data(), src, n * int64_t(sizeof(int32_t)));
  }
  return std::vector<int64_t>(host.begin(), host.end());
}

void uploadI32(void *dst, const std::vector<int64_t> &values) {
  std::vector<int32_t> host(values.begin(), values.end());
  device::upload(dst, host.data(), int64_t(host.size() * sizeof(int32_t)));
}

/// The expert-parallel Group of an MoE call, after checking its shapes.
Group &moeGroup(zrt_ctx *ctx, const char *call, int32_t dtype, int64_t n,
                int64_t width, int64_t experts, int64_t cap) {
  Group &g = groupOf(ctx->comm, ZRT_RANKS_EXPERT);
  if (n < 0 || width < 0 || cap < 0 || experts < 1 || experts % g.size())
    fatal("%s: %lld rows of width %lld, capacity %lld, %lld experts over an "
          "expert-parallel group of %d ranks",
          call, (long long)n, (long long)width, (long long)cap,
          (long long)experts, g.size());
  if (zrt_dtype_size(dtype) <= 0)
    fatal("%s: unknown dtype %d", call, int(dtype));
  return g;
}

/// This rank's dispatch counts per expert from its offsets [E].
std::vector<int64_t> moeDispatchCounts(zrt_ctx *ctx, const char *call,
                                       const int32_t *offsets, int64_t experts,
                                       int64_t n) {
  std::vector<int64_t> ends =
      downloadI32(ctx, offsets, experts, "the MoE dispatch offsets");
  std::vector<int32_t> ends32(ends.begin(), ends.end());
  std::vector<int64_t> counts;
  std::string error = moeCountsOf(ends32.data(), experts, n, counts);
  if (!error.empty())
    fatal("%s: %s", call, error.c_str());
  return counts;
}

/// The rows this member's `route` moves to each member, in bytes, each way.
std::vector<int64_t> moeBytesTo(const MoeRoute &route, bool sendSide,
                                int64_t rowBytes) {
  std::vector<int64_t> bytes(size_t(route.members), 0);
  for (int64_t m = 0; m < route.members; ++m)
    for (int64_t l = 0; l < route.localExperts; ++l)
      bytes[size_t(m)] +=
          (sendSide ? route.sendKept
                    : route.recvKept)[size_t(route.index(m, l))] *
          rowBytes;
  return bytes;
}

/// Local expert l's blocks: `from` [P * E_l] rows at `fromStart` to each
/// member, `to` rows at `toStart` from each member, as allToAllBytes's
/// byte counts and displacements.
Tokens moeAllToAll(Group &g, const MoeRoute &route, int64_t l, int64_t rowBytes,
                   const void *send, const std::vector<int64_t> &sendRows,
                   const std::vector<int64_t> &sendStart, void *recv,
                   const std::vector<int64_t> &recvRows,
                   const std::vector<int64_t> &recvStart) {
  size_t p = size_t(route.members);
  std::vector<int64_t> sc(p), sd(p), rc(p), rd(p);
  for (int64_t m = 0; m < route.members; ++m) {
    size_t i = size_t(route.index(m, l));
    sc[size_t(m)] = sendRows[i] * rowBytes;
    sd[size_t(m)] = sendStart[i] * rowBytes;
    rc[size_t(m)] = recvRows[i] * rowBytes;
    rd[size_t(m)] = recvStart[i] * rowBytes;
  }
  return allToAllBytes(g.members, send, sc, sd, recv, rc, rd);
}

/// Prints "zrt: error: ..." as fatal does, without ending the process.
void printErrorf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void printErrorf(const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  printError(fmt, args);
  va_end(args);
}

/// More rows than the capacity would arrive at a member and drops are off:
/// every member of the group knows it from the same counts and stops here,
/// before the step's optimizer update. The group's members print the
/// message before the job ends (other groups may be elsewhere in the step,
/// so only an abort ends them).
[[noreturn]] void moeOverflow(zrt_ctx *ctx, Group &g, int32_t layer,
                              int64_t experts, int64_t cap,
                              const MoeExchangePlan &plan,
                              const std::vector<int64_t> &routed) {
  int64_t q = plan.overflowMember, el = experts / g.size();
  std::string rows;
  for (int64_t l = 0; l < el; ++l) {
    int64_t e = q * el + l;
    rows += (l ? "; expert " : "expert ") + std::to_string(e) + ":";
    for (int64_t s = 0; s < g.size(); ++s)
      rows += " " + std::to_string(routed[size_t(s * experts + e)]);
  }
  printErrorf("MoE layer %d, step %lld: %lld rows would arrive at rank %d "
              "(member %lld of the expert-parallel ranks %lld..%lld), more "
              "than its capacity of %lld rows (rows from each member for "
              "each of its experts: %s); the step stops before its "
              "optimizer update: raise --moe-capacity-factor, or pass "
              "--moe-drop-tokens to drop the rows past the capacity",
              int(layer), (long long)ctx->stepIndex,
              (long long)plan.arriving[size_t(q)], g.rankOf(int(q)),
              (long long)q, (long long)g.set.first,
              (long long)(g.set.first + (g.set.size - 1) * g.set.stride),
              (long long)cap, rows.c_str());
  std::fflush(stderr);
  MPI_Barrier(g.members->comm);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}
} // namespace

static void moeExchange(zrt_ctx *ctx, int32_t dtype, const void *rows,
                        int64_t n, int64_t width, const int32_t *offsets,
                        int64_t experts, void *recv, int64_t cap,
                        int32_t *counts, int32_t *localOffsets,
                        int32_t countsKnown, int32_t layer, int32_t drop,
                        int32_t slot) {
  const char *call = "zrt_ctx_moe_exchange";
  Group &g = moeGroup(ctx, call, dtype, n, width, experts, cap);
  if ((countsKnown != 0 && countsKnown != 1) || (drop != 0 && drop != 1))
    fatal("%s: counts_known %d and drop %d are flags", call, int(countsKnown),
          int(drop));
  int64_t p = g.size(), el = experts / p;
  int64_t rowBytes = width * zrt_dtype_size(dtype);
  std::vector<int64_t> mine = moeDispatchCounts(ctx, call, offsets, experts, n);
  MoeRoute route;
  if (!countsKnown) {
    // Every member's counts, so that all decide alike.
    std::vector<int64_t> routed(size_t(p * experts));
    {
      const char *what = "the MoE count all-gather";
      int64_t seq =
          record(ctx, what, kAllGather, g, experts * int64_t(sizeof(int64_t)));
      WaitScope watched(ctx->waitState, what);
      ctx->flight.waited(seq);
      MPI_Allgather(mine.data(), mpiInt(experts, call), MPI_INT64_T,
                    routed.data(), mpiInt(experts, call), MPI_INT64_T,
                    g.members->comm);
      ctx->flight.done(seq);
    }
    MoeExchangePlan plan =
        planMoeExchange(p, g.me, experts, cap, drop != 0, routed);
    if (plan.overflowMember >= 0 && !drop)
      moeOverflow(ctx, g, layer, experts, cap, plan, routed);
    route = std::move(plan.route);
    ctx->moeExchanged = true;
    ctx->moeMaxExpertRows = std::max(ctx->moeMaxExpertRows, plan.maxExpertRows);
    ctx->moeDroppedRows += plan.dropped;
    if (route.sendKept != route.sendRouted)
      ctx->moeSendKept[counts] = route.sendKept;
    else
      ctx->moeSendKept.erase(counts);
    uploadI32(counts, route.recvKept);
    std::vector<int64_t> ends(size_t(el), 0);
    int64_t at = 0;
    for (int64_t l = 0; l < el; ++l) {
      for (int64_t s = 0; s < p; ++s)
        at += route.recvKept[size_t(route.index(s, l))];
      ends[size_t(l)] = at;
    }
    uploadI32(localOffsets, ends);
  } else {
    std::vector<int64_t> known =
        downloadI32(ctx, counts, p * el, "the MoE exchange's counts");
    auto kept = ctx->moeSendKept.find(counts);
    route =
        moeRouteOf(p, experts, mine, known,
                   kept == ctx->moeSendKept.end() ? nullptr : &kept->second);
    for (int64_t c : known)
      if (c < 0)
        fatal("%s: negative count %lld", call, (long long)c);
    if (route.recvRows > cap)
      fatal("%s: counts of %lld rows for a capacity of %lld", call,
            (long long)route.recvRows, (long long)cap);
  }
  if (route.recvRows < cap)
    device::zero(static_cast<char *>(recv) + route.recvRows * rowBytes,
                 (cap - route.recvRows) * rowBytes);
  std::vector<int64_t> bytes = moeBytesTo(route, true, rowBytes);
  int64_t sent = 0;
  for (int64_t m = 0; m < p; ++m)
    sent += m == g.me ? 0 : bytes[size_t(m)];
  const char *what = "moe_exchange";
  int64_t seq = record(ctx, what, kAllToAll, g, sent);
  countAllToAll(g, kAllToAll, bytes);
  Tokens tokens;
  for (int64_t l = 0; l < el; ++l)
    for (int64_t t :
         moeAllToAll(g, route, l, rowBytes, rows, route.sendKept,
                     route.sendStart, recv, route.recvKept, route.recvStart))
      tokens.push_back(t);
  launch(ctx, slot, what, std::move(tokens), nullptr, seq);
}

static void moeReturn(zrt_ctx *ctx, int32_t dtype, const void *recv,
                      int64_t cap, int64_t width, const int32_t *counts,
                      const int32_t *localOffsets, const int32_t *offsets,
                      int64_t experts, void *rows, int64_t n, int32_t slot) {
  const char *call = "zrt_ctx_moe_return";
  Group &g = moeGroup(ctx, call, dtype, n, width, experts, cap);
  int64_t p = g.size(), el = experts / p;
  int64_t rowBytes = width * zrt_dtype_size(dtype);
  std::vector<int64_t> mine = moeDispatchCounts(ctx, call, offsets, experts, n);
  std::vector<int64_t> known =
      downloadI32(ctx, counts, p * el, "the MoE exchange's counts");
  std::vector<int64_t> ends =
      downloadI32(ctx, localOffsets, el, "the MoE exchange's offsets");
  auto kept = ctx->moeSendKept.find(counts);
  MoeRoute route =
      moeRouteOf(p, experts, mine, known,
                 kept == ctx->moeSendKept.end() ? nullptr : &kept->second);
  int64_t at = 0;
  for (int64_t l = 0; l < el; ++l) {
    for (int64_t s = 0; s < p; ++s)
      at += known[size_t(route.index(s, l))];
    if (ends[size_t(l)] != at)
      fatal("%s: local_offsets[%lld] = %lld, but the counts end local "
            "expert %lld at %lld",
            call, (long long)l, (long long)ends[size_t(l)], (long long)l,
            (long long)at);
  }
  if (route.recvRows > cap)
    fatal("%s: counts of %lld rows for a capacity of %lld", call,
          (long long)route.recvRows, (long long)cap);
  // Dropped rows come back as zeros, and so do rows past the dispatch.
  char *out = static_cast<char *>(rows);
  int64_t dispatched = 0;
  for (int64_t e = 0; e < experts; ++e) {
    int64_t from = route.sendStart[size_t(e)] + route.sendKept[size_t(e)];
    int64_t to = route.sendStart[size_t(e)] + route.sendRouted[size_t(e)];
    if (to > from)
      device::zero(out + from * rowBytes, (to - from) * rowBytes);
    dispatched = to;
  }
  if (n > dispatched)
    device::zero(out + dispatched * rowBytes, (n - dispatched) * rowBytes);
  std::vector<int64_t> bytes = moeBytesTo(route, false, rowBytes);
  int64_t sent = 0;
  for (int64_t m = 0; m < p; ++m)
    sent += m == g.me ? 0 : bytes[size_t(m)];
  const char *what = "moe_return";
  int64_t seq = record(ctx, what, kAllToAll, g, sent);
  countAllToAll(g, kAllToAll, bytes);
  Tokens tokens;
  for (int64_t l = 0; l < el; ++l)
    for (int64_t t :
         moeAllToAll(g, route, l, rowBytes, recv, route.recvKept,
                     route.recvStart, rows, route.sendKept, route.sendStart))
      tokens.push_back(t);
  launch(ctx, slot, what, std::move(tokens), nullptr, seq);
}

extern "C" int32_t zrt_ctx_update_loss_scale(zrt_ctx *ctx, const float *stats) {
  float host[2];
  {
    WaitScope watched(ctx->waitState, "the overflow flag");
    device::download(host, stats, sizeof(host));
  }
  return updateLossScale(ctx, host);
}

namespace {
/// The device Adam of partition p, writing the new parameters to `params`.
void deviceAdam(zrt_ctx *ctx, int32_t p, const PartitionInfo &part,
                const float *stats, const float *lossScale, int32_t skip,
                double divisor, void *params);
} // namespace

extern "C" void zrt_ctx_adam(zrt_ctx *ctx, int32_t p, const float *stats,
                             const float *lossScale, int32_t skip,
                             double divisor) {
  const PartitionInfo &part = partition(ctx, p, "zrt_ctx_adam");
  if (part.paramsOffloaded())
    fatal("zrt_ctx_adam: partition '%s' keeps its params shard on the host: "
          "its device Adam writes a staged buffer (zrt_ctx_adam_staged)",
          part.name.c_str());
  deviceAdam(ctx, p, part, stats, lossScale, skip, divisor,
             ownedParams(*ctx, p));
}

extern "C" void zrt_ctx_adam_staged(zrt_ctx *ctx, int32_t p, const float *stats,
                                    const float *lossScale, int32_t skip,
                                    double divisor, void *newParams) {
  const PartitionInfo &part = partition(ctx, p, "zrt_ctx_adam_staged");
  if (!part.paramsOffloaded() || part.offloaded())
    fatal("zrt_ctx_adam_staged: partition '%s' needs offloaded parameters "
          "and a device optimizer",
          part.name.c_str());
  deviceAdam(ctx, p, part, stats, lossScale, skip, divisor, newParams);
}

namespace {
/// A Muon matrix of a rank's owned range: its place there and its param.
struct OwnedMatrix {
  Range range;
  const ParamInfo *param;
};

/// The parameters of partition p in the rank's owned range, in layout
/// order: each Muon matrix (`param` set), which must lie whole in it
/// (Newton-Schulz needs the whole matrix), and each run of AdamW's
/// parameters (`param` null; adjacent ones merged). Elements of no
/// parameter (owner-computes' gaps) are in neither.
std::vector<OwnedMatrix> ownedMatrices(const zrt_ctx &ctx, int32_t p,
                                       const PartitionInfo &part) {
  const Manifest &m = *ctx.manifest;
  Range owned = m.owned(part, ctx.rank);
  std::vector<OwnedMatrix> out;
  for (const ParamInfo &info : m.params) {
    if (info.partition != p)
      continue;
    int64_t lo = std::max(info.offset, owned.begin),
            hi = std::min(info.offset + info.numel, owned.end);
    if (lo >= hi)
      continue;
    if (!info.muon) {
      out.push_back({{lo - owned.begin, hi - owned.begin}, nullptr});
      continue;
    }
    if (lo != info.offset || hi != info.offset + info.numel)
      fatal("zrt_ctx_adam: Muon matrix '%s' of partition '%s' crosses rank "
            "%d's owned elements [%lld, %lld): its Newton-Schulz needs it "
            "whole on one rank",
            info.name.c_str(), part.name.c_str(), int(ctx.rank),
            (long long)owned.begin, (long long)owned.end);
    out.push_back({{lo - owned.begin, hi - owned.begin}, &info});
  }
  std::sort(out.begin(), out.end(), [](const auto &x, const auto &y) {
    return x.range.begin < y.range.begin;
  });
  std::vector<OwnedMatrix> merged;
  for (const OwnedMatrix &x : out)
    if (!x.param && !merged.empty() && !merged.back().param &&
        merged.back().range.end == x.range.begin)
      merged.back().range.end = x.range.end;
    else
      merged.push_back(x);
  return merged;
}

/// Muon's step of partition p: zrt_muon on each Muon matrix (whole in the
/// owned range), AdamW on each run of AdamW's parameters, with the same
/// weight-decay runs, schedule and clipping as zrt_ctx_adam. The momentum
/// holds the matrices' elements and Adam's moments the AdamW parameters',
/// each packed in layout order (the plan sizes them so, by part); the
/// gaps of owner-computes' enlarged slots have neither and stay zero.
void deviceMuon(zrt_ctx *ctx, int32_t p, const PartitionInfo &part,
                const float *stats, const float *lossScale, int32_t skip,
                double divisor, void *params) {
  const Manifest &m = *ctx->manifest;
  const manifest::MuonParams &mu = *m.muon;
  auto grads = ownedGrads(ctx, p, part).first;
  int64_t cb = part.computeBytes;
  float *masters = ownedMasters(*ctx, p);
  float *expAvg = ctx->buffer<float>(p, kExpAvg),
        *expAvgSq = ctx->buffer<float>(p, kExpAvgSq);
  DecayRanges decay = decayRanges(*ctx, p, part);
  auto at = [&](void *base, int64_t i) -> void * {
    return base ? static_cast<char *>(base) + i * cb : nullptr;
  };
  // The next packed element of Adam's moments and of the momentum.
  int64_t adamAt = 0, momentumAt = 0;
  auto adamw = [&](int64_t begin, int64_t end) {
    if (begin >= end)
      return;
    std::vector<int64_t> ranges;
    std::vector<double> decays;
    for (size_t r = 0; r < decay.decays.size(); ++r) {
      int64_t lo = std::max(decay.ranges[2 * r], begin),
              hi = std::min(decay.ranges[2 * r + 1], end);
      if (lo < hi) {
        ranges.insert(ranges.end(), {lo - begin, hi - begin});
        decays.push_back(decay.decays[r]);
      }
    }
    device::adam(part.computeDtype, grads + begin * cb, masters + begin,
                 expAvg + adamAt, expAvgSq + adamAt, at(params, begin),
                 end - begin, ctx->adamSteps, m.lr, m.beta1, m.beta2, m.eps,
                 m.weightDecay, 1, m.biasCorrection, lrSchedule(m),
                 ranges.data(), decays.data(), int32_t(decays.size()),
                 m.gradientClipping, stats, lossScale, divisor, skip);
    adamAt += end - begin;
  };
  for (const OwnedMatrix &mat : ownedMatrices(*ctx, p, part)) {
    if (!mat.param) {
      adamw(mat.range.begin, mat.range.end);
      continue;
    }
    const ParamInfo &info = *mat.param;
    int64_t begin = mat.range.begin, rows = info.shape[0];
    int64_t matrix[3] = {0, rows, info.numel / rows};
    double wd = info.weightDecay >= 0 ? info.weightDecay : m.weightDecay;
    device::muon(part.computeDtype, grads + begin * cb, masters + begin,
                 momentumBuffer(*ctx, p) + momentumAt, at(params, begin),
                 matrix, ctx->adamSteps, mu.lr, mu.momentum, wd, mu.nesterov,
                 mu.nsA, mu.nsB, mu.nsC, mu.nsEps, int32_t(mu.nsSteps),
                 mu.adjustLrFn, lrSchedule(m), m.gradientClipping, stats,
                 lossScale, divisor, skip);
    momentumAt += info.numel;
  }
}

/// The trainable tensors of partition p, by offset, as Adafactor sees
/// them (every rank lists all of them: the sums' layout is the same on
/// each), and each one's weight decay.
std::vector<AdafactorTensor> adafactorTensors(const zrt_ctx &ctx, int32_t p,
                                              const PartitionInfo &part,
                                              std::vector<double> &decays) {
  const Manifest &m = *ctx.manifest;
  std::vector<const ParamInfo *> infos;
  for (const ParamInfo &info : m.params)
    if (info.partition == p && !info.frozen)
      infos.push_back(&info);
  std::sort(infos.begin(), infos.end(),
            [](const auto *x, const auto *y) { return x->offset < y->offset; });
  std::vector<AdafactorTensor> tensors;
  decays.clear();
  for (const ParamInfo *info : infos) {
    // Padding rows would count in the means of the columns and the RMS.
    if (info->rows >= 0 && !info->shape.empty() && info->rows != info->shape[0])
      fatal("zrt_ctx_adam: Adafactor's statistics of parameter '%s' of "
            "partition '%s' would count its %lld padding rows",
            info->name.c_str(), part.name.c_str(),
            (long long)(info->shape[0] - info->rows));
    tensors.push_back(
        {info->offset,
         adafactorShape(info->shape.data(), int32_t(info->shape.size()))});
    decays.push_back(info->weightDecay >= 0 ? info->weightDecay
                                            : m.weightDecay);
  }
  return tensors;
}

/// Sums `n` doubles of host memory in place over the ranks that share
/// partition `part`, counted as the plan counts the step's all-reduces of
/// Adafactor's sums (an even split, two passes).
void allReduceSums(zrt_ctx *ctx, const PartitionInfo &part, double *sums,
                   int64_t n, const char *what) {
  Group &group = partitionGroup(ctx, part);
  int64_t seq =
      record(ctx, what, kAllReduce, group, n * int64_t(sizeof(double)));
  countAllReduce(group, n, int64_t(sizeof(double)));
  WaitScope watched(ctx->waitState, what);
  ctx->flight.waited(seq);
  MPI_Allreduce(MPI_IN_PLACE, sums, mpiInt(n, "zrt_ctx_adam"), MPI_DOUBLE,
                MPI_SUM, group.members->comm);
  ctx->flight.done(seq);
}

/// torch.optim.Adafactor's step of the rank's owned elements of partition
/// p: Adafactor.h's phases on each tensor it holds a piece of, with the
/// sums of the pieces all-reduced among the ranks sharing the partition
/// (stages 1-3; at stage 0 every rank holds every tensor whole). The state
/// buffer holds, tensor by tensor, the factors or the held variance
/// (zero_rt/adafactor.h); the sums live in accounted scratch.
void deviceAdafactor(zrt_ctx *ctx, int32_t p, const PartitionInfo &part,
                     const float *stats, const float *lossScale, int32_t skip,
                     double divisor, void *params) {
  const Manifest &m = *ctx->manifest;
  auto [grads, n] = ownedGrads(ctx, p, part);
  float *masters = ownedMasters(*ctx, p);
  if (skip) {
    // A skipped step (fp16 overflow) changes nothing but gives the params
    // their masters back; every update kernel's skip path does only that,
    // and SGD's takes no state, so its call with skip set is that copy.
    device::sgd(part.computeDtype, grads, masters, nullptr, params, n,
                ctx->adamSteps, m.lr, 0.0, 0.0, 0.0, 0, nullptr, nullptr,
                nullptr, 0, m.gradientClipping, stats, lossScale, divisor, 1);
    return;
  }
  if (part.expert || m.micsShardSize > 0)
    fatal("zrt_ctx_adam: partition '%s': Adafactor reduces its sums over the "
          "world, not over %s",
          part.name.c_str(),
          part.expert ? "an expert replica set" : "a MiCS shard group");
  const manifest::AdafactorParams &af = *m.adafactor;
  std::vector<double> decays;
  std::vector<AdafactorTensor> tensors =
      adafactorTensors(*ctx, p, part, decays);
  int32_t num = int32_t(tensors.size());
  Range owned = m.owned(part, ctx->rank);
  float hostStats[2], scale;
  device::download(hostStats, stats, sizeof(hostStats));
  device::download(&scale, lossScale, sizeof(scale));
  float gradScale =
      float(double(zrt_clip_coefficient(hostStats, m.gradientClipping)) /
            double(float(double(scale) * divisor)));
  double lr = zrt_lr_at(lrSchedule(m), m.lr, nullptr, nullptr, ctx->adamSteps);
  int64_t total = adafactorShardSumsCount(tensors.data(), num),
          first = adafactorFirstReduceCount(tensors.data(), num);
  if (adafactorStateCount(tensors.data(), num, owned.begin, owned.end) >
      part.counts[kExpAvgSq])
    fatal("zrt_ctx_adam: partition '%s': Adafactor's state of rank %d's "
          "shard exceeds its exp_avg_sq buffer of %lld elements",
          part.name.c_str(), int(ctx->rank), (long long)part.counts[kExpAvgSq]);
  bool shared = m.stage > 0 && m.shardGroupSize(part) > 1;
  int64_t bytes = total * int64_t(sizeof(double));
  auto *sums = static_cast<double *>(device::allocateScratch(bytes));
  device::zero(sums, bytes);
  std::vector<double> host(static_cast<size_t>(total));
  int64_t cb = part.computeBytes;
  // Calls fn(i, lo, hi, at, state, k) for each tensor the shard holds a
  // piece [lo, hi) of: `at` its place in the owned range, `state` its
  // state, k its constants; sums + offsets[i] its sums.
  std::vector<int64_t> offsets(size_t(num) + 1, 0);
  for (int32_t i = 0; i < num; ++i)
    offsets[size_t(i) + 1] =
        offsets[size_t(i)] + adafactorSumsCount(tensors[size_t(i)].shape);
  auto forPieces = [&](const auto &fn) {
    float *state = ctx->buffer<float>(p, kExpAvgSq);
    for (int32_t i = 0; i < num; ++i) {
      int64_t lo, hi;
      const AdafactorTensor &t = tensors[size_t(i)];
      adafactorPiece(t, owned.begin, owned.end, lo, hi);
      if (lo == hi)
        continue;
      AdafactorConstants k =
          adafactorConstants(lr, af.beta2Decay, af.eps1, af.eps2, af.d,
                             decays[size_t(i)], af.maximize, ctx->adamSteps);
      fn(i, lo, hi, t.offset + lo - owned.begin, state, k);
      state += t.shape.factored ? t.shape.factorCount() : hi - lo;
    }
  };
  auto reduce = [&](int64_t begin, int64_t count, const char *what) {
    if (!shared || count == 0)
      return;
    device::download(host.data(), sums + begin, count * 8);
    allReduceSums(ctx, part, host.data(), count, what);
    device::upload(sums + begin, host.data(), count * 8);
  };
  auto at = [&](void *base, int64_t i) -> char * {
    return base ? static_cast<char *>(base) + i * cb : nullptr;
  };
  forPieces([&](int32_t i, int64_t lo, int64_t hi, int64_t off, float *,
                const AdafactorConstants &) {
    device::adafactorSums(part.computeDtype, at(grads, off), masters + off,
                          tensors[size_t(i)].shape, lo, hi, gradScale,
                          sums + offsets[size_t(i)]);
  });
  reduce(0, first, "all_reduce adafactor sums");
  forPieces([&](int32_t i, int64_t lo, int64_t hi, int64_t off, float *state,
                const AdafactorConstants &k) {
    const AdafactorShape &sh = tensors[size_t(i)].shape;
    double *s = sums + offsets[size_t(i)];
    float *colVar = state + (sh.factored ? sh.batch * sh.rows : 0);
    device::adafactorFactors(sh, k, state, colVar, s);
    device::adafactorUpdateSums(part.computeDtype, at(grads, off), sh, lo, hi,
                                gradScale, k, state, colVar, state, s);
    device::move(sums + first + i, s + 1, sizeof(double));
  });
  reduce(first, num, "all_reduce adafactor update sums");
  forPieces([&](int32_t i, int64_t lo, int64_t hi, int64_t off, float *state,
                const AdafactorConstants &k) {
    const AdafactorShape &sh = tensors[size_t(i)].shape;
    double *s = sums + offsets[size_t(i)];
    float *colVar = state + (sh.factored ? sh.batch * sh.rows : 0);
    device::move(s + 1, sums + first + i, sizeof(double));
    device::adafactorApply(part.computeDtype, at(grads, off), masters + off,
                           at(params, off), sh, lo, hi, gradScale, k, state,
                           colVar, state, s);
  });
  device::releaseScratch(sums, bytes);
}

void deviceAdam(zrt_ctx *ctx, int32_t p, const PartitionInfo &part,
                const float *stats, const float *lossScale, int32_t skip,
                double divisor, void *params) {
  const Manifest &m = *ctx->manifest;
  auto [grads, n] = ownedGrads(ctx, p, part);
  // Masters and moments hold the owned range: at offset 0 of the full
  // buffers at stage 0 (everything is owned) and of the shards otherwise.
  // fp32 params are their own masters, updated in place (the kernels allow
  // the alias).
  DecayRanges decay = decayRanges(*ctx, p, part);
  if (m.int8States()) {
    Int8State expAvg = int8State(*ctx, p, kExpAvg),
              expAvgSq = int8State(*ctx, p, kExpAvgSq);
    device::adam8bit(part.computeDtype, grads, ownedMasters(*ctx, p),
                     expAvg.codes, expAvg.absmax, expAvgSq.codes,
                     expAvgSq.absmax, params, n, ctx->adamSteps, m.lr, m.beta1,
                     m.beta2, m.eps, m.weightDecay,
                     zrt::optimizers::isDecoupled(m.optimizer),
                     m.biasCorrection, lrSchedule(m), decay.ranges.data(),
                     decay.decays.data(), int32_t(decay.decays.size()),
                     m.gradientClipping, stats, lossScale, divisor, skip);
  } else if (m.bf16States())
    device::adamBf16(part.computeDtype, grads, ownedMasters(*ctx, p),
                     ctx->buffer<uint16_t>(p, kExpAvg),
                     ctx->buffer<uint16_t>(p, kExpAvgSq), params, n,
                     ctx->adamSteps, m.lr, m.beta1, m.beta2, m.eps,
                     m.weightDecay, zrt::optimizers::isDecoupled(m.optimizer),
                     m.biasCorrection, lrSchedule(m), decay.ranges.data(),
                     decay.decays.data(), int32_t(decay.decays.size()),
                     m.gradientClipping, stats, lossScale, divisor, skip);
  else if (m.optimizer == zrt::optimizers::Kind::SGD)
    device::sgd(part.computeDtype, grads, ownedMasters(*ctx, p),
                momentumBuffer(*ctx, p), params, n, ctx->adamSteps, m.lr,
                m.momentum, m.dampening, m.weightDecay, m.nesterov,
                lrSchedule(m), decay.ranges.data(), decay.decays.data(),
                int32_t(decay.decays.size()), m.gradientClipping, stats,
                lossScale, divisor, skip);
  else if (m.optimizer == zrt::optimizers::Kind::Muon)
    deviceMuon(ctx, p, part, stats, lossScale, skip, divisor, params);
  else if (m.optimizer == zrt::optimizers::Kind::Adafactor)
    deviceAdafactor(ctx, p, part, stats, lossScale, skip, divisor, params);
  else if (m.optimizer == zrt::optimizers::Kind::Lion)
    device::lion(part.computeDtype, grads, ownedMasters(*ctx, p),
                 ctx->buffer<float>(p, kExpAvg), params, n, ctx->adamSteps,
                 m.lr, m.beta1, m.beta2, m.weightDecay, lrSchedule(m),
                 decay.ranges.data(), decay.decays.data(),
                 int32_t(decay.decays.size()), m.gradientClipping, stats,
                 lossScale, divisor, skip);
  else
    device::adam(part.computeDtype, grads, ownedMasters(*ctx, p),
                 ctx->buffer<float>(p, kExpAvg),
                 ctx->buffer<float>(p, kExpAvgSq), params, n, ctx->adamSteps,
                 m.lr, m.beta1, m.beta2, m.eps, m.weightDecay,
                 zrt::optimizers::isDecoupled(m.optimizer), m.biasCorrection,
                 lrSchedule(m), decay.ranges.data(), decay.decays.data(),
                 int32_t(decay.decays.size()), m.gradientClipping, stats,
                 lossScale, divisor, skip);
  // Stage 2-3 shards accumulate; stage 0-1 slots are overwritten by the
  // next step, but an unused parameter's slot must not keep stale values.
  zrt_fill(part.computeDtype, ctx->buffer(p, kGrads), part.counts[kGrads], 0.0);
}
} // namespace

extern "C" int32_t zrt_ctx_last_micro_step(zrt_ctx *ctx) {
  return ctx->micro + 1 >= ctx->manifest->accumulationSteps ? 1 : 0;
}

extern "C" int32_t zrt_ctx_first_micro_step(zrt_ctx *ctx) {
  return ctx->micro == 0 ? 1 : 0;
}

extern "C" void zrt_ctx_count_labels(zrt_ctx *ctx, int32_t labelType,
                                     const void *labels, int64_t n,
                                     int64_t ignoreIndex) {
  if (n < 0)
    fatal("zrt_ctx_count_labels: %lld labels", (long long)n);
  // The labels are small; a GPU backend counts a host copy.
  int64_t bytes = n * (labelType == ZRT_I32 ? 4 : 8);
  std::vector<char> host(static_cast<size_t>(bytes));
  {
    WaitScope watched(ctx->waitState, "the labels to count");
    device::download(host.data(), labels, bytes);
  }
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) {
    int64_t label =
        labelType == ZRT_I32
            ? int64_t(reinterpret_cast<const int32_t *>(host.data())[i])
            : reinterpret_cast<const int64_t *>(host.data())[i];
    count += ignoredLabel(label, 1, ignoreIndex) ? 0 : 1;
  }
  if (ctx->micro < 0 ||
      ctx->micro >= static_cast<int32_t>(ctx->microLabels.size()))
    fatal("zrt_ctx_count_labels: micro batch %d of %zu", int(ctx->micro),
          ctx->microLabels.size());
  ctx->microLabels[ctx->micro] = count;
}

static void allReduceLabels(zrt_ctx *ctx, int64_t *count) {
  int64_t local = 0;
  for (int64_t c : ctx->microLabels)
    local += c;
  {
    const char *what = "the label count all-reduce";
    int64_t seq = record(ctx, what, kAllReduce, ZRT_RANKS_WORLD,
                         zrt_rank_set{0, 1, ctx->world}, sizeof(int64_t));
    WaitScope watched(ctx->waitState, what);
    ctx->flight.waited(seq);
    MPI_Allreduce(&local, &ctx->stepLabels, 1, MPI_INT64_T, MPI_SUM,
                  MPI_COMM_WORLD);
    ctx->flight.done(seq);
  }
  ctx->noLabels = ctx->stepLabels == 0;
  device::upload(count, &ctx->stepLabels, sizeof(int64_t));
}

/// A few int64 values (a router's expert counts) summed over the world
/// through the host, as the label count: exact, and small.
static void allReduceCounts(zrt_ctx *ctx, const int64_t *in, int64_t *out,
                            int64_t n, int32_t slot) {
  if (n < 0 || slot >= 0)
    fatal("zrt_ctx_all_reduce_counts: %lld values, slot %d", (long long)n,
          int(slot));
  std::vector<int64_t> local(static_cast<size_t>(n)),
      total(static_cast<size_t>(n));
  int64_t bytes = n * int64_t(sizeof(int64_t));
  const char *what = "the expert count all-reduce";
  {
    WaitScope watched(ctx->waitState, "the expert counts");
    device::download(local.data(), in, bytes);
  }
  {
    int64_t seq = record(ctx, what, kAllReduce, ZRT_RANKS_WORLD,
                         zrt_rank_set{0, 1, ctx->world}, bytes);
    // Counted as the plan counts zero.all_reduce over the world.
    countAllReduce(groupOf(ctx->comm, ZRT_RANKS_WORLD), n,
                   int64_t(sizeof(int64_t)));
    WaitScope watched(ctx->waitState, what);
    ctx->flight.waited(seq);
    MPI_Allreduce(local.data(), total.data(), int(n), MPI_INT64_T, MPI_SUM,
                  MPI_COMM_WORLD);
    ctx->flight.done(seq);
  }
  device::upload(out, total.data(), bytes);
}

extern "C" void zrt_ctx_label_share(zrt_ctx *ctx, double divisor, float *out) {
  float share = 1.0f;
  if (!ctx->evaluating) {
    if (ctx->micro < 0 ||
        ctx->micro >= static_cast<int32_t>(ctx->microLabels.size()))
      fatal("zrt_ctx_label_share: micro batch %d of %zu", int(ctx->micro),
            ctx->microLabels.size());
    int64_t c = ctx->microLabels[ctx->micro];
    share = ctx->stepLabels
                ? float(double(c) * divisor / double(ctx->stepLabels))
                : 0.0f;
  }
  device::storeF32(out, share);
}

extern "C" void zrt_ctx_transfer(zrt_ctx *ctx, int32_t p, int32_t from,
                                 int32_t to, int64_t begin, int64_t end,
                                 int32_t slot) {
  const char *call = "zrt_ctx_transfer";
  const PartitionInfo &part = partition(ctx, p, call);
  const Manifest &m = *ctx->manifest;
  checkRange(part, begin, end, part.numel, call);
  // The owned elements of [begin, end): `skip` elements into the front of
  // the host copies and into the owned slice of the device buffers
  // (ownedGrads, ownedParams).
  Range mine = ownedPart(ctx, part, ctx->rank, begin, end);
  int64_t n = mine.size();
  int64_t skip = n > 0 ? mine.begin - m.owned(part, ctx->rank).begin : 0;
  int64_t elementBytes = part.computeBytes;
  const char *src = nullptr;
  char *dst = nullptr;
  bool toHost = false;
  if (from == kGrads && to == kHostGrads && part.hasBuffer(kHostGrads)) {
    src = ownedGrads(ctx, p, part).first;
    dst = ctx->buffer(p, kHostGrads);
    toHost = true;
  } else if (from == kHostParams && to == kParams &&
             part.hasBuffer(kHostParams)) {
    src = ctx->buffer(p, kHostParams);
    dst = ownedParams(*ctx, p);
  } else if (from == kMaster && to == kParams && part.offloaded() &&
             part.computeDtype == ZRT_F32) {
    src = ctx->buffer(p, kMaster);
    dst = ownedParams(*ctx, p);
    elementBytes = 4;
  } else {
    fatal("%s: partition '%s' has no copy from buffer %d to buffer %d", call,
          part.name.c_str(), int(from), int(to));
  }
  const char *what = toHost ? "copy to host" : "copy to device";
  // The span is the copy on the CPU backend (a memcpy), its enqueueing on a
  // GPU; its wait is traced by zrt_ctx_wait.
  double start = ctx->tracing ? ctx->nowUs() : 0.0;
  std::function<void()> done =
      device::transfer(dst + skip * elementBytes, src + skip * elementBytes,
                       n * elementBytes, toHost);
  if (ctx->tracing)
    ctx->trace.push_back({what, start, ctx->nowUs() - start});
  launch(ctx, slot, what, {}, std::move(done));
}

extern "C" void zrt_ctx_adam_host(zrt_ctx *ctx, int32_t p, const float *stats,
                                  const float *lossScale, int32_t skip,
                                  double divisor) {
  const char *call = "zrt_ctx_adam_host";
  const PartitionInfo &part = partition(ctx, p, call);
  if (ctx->manifest->muon)
    fatal("%s: partition '%s': Muon has no host update (optimizer offload)",
          call, part.name.c_str());
  if (!part.offloaded())
    fatal("%s: partition '%s' keeps its optimizer on the device", call,
          part.name.c_str());
  const Manifest &m = *ctx->manifest;
  int64_t n = m.owned(part, ctx->rank).size();
  // The statistics and the scale are tensors of the step (device memory).
  float hostStats[2], scale;
  device::download(hostStats, stats, sizeof(hostStats));
  device::download(&scale, lossScale, sizeof(scale));
  // fp32 parameters: the masters are the copy that goes back (the kernel
  // allows the alias), as when the parameters are their own masters.
  // Offloaded parameter shards are written in place (and are the masters
  // with fp32 compute).
  void *params = part.paramsOnHost()           ? ctx->buffer(p, kParams)
                 : part.hasBuffer(kHostParams) ? ctx->buffer(p, kHostParams)
                                               : ctx->buffer(p, kMaster);
  float *masters = part.paramsAreMasters ? ctx->buffer<float>(p, kParams)
                                         : ctx->buffer<float>(p, kMaster);
  // The same weight-decay runs and schedule as zrt_ctx_adam, over the same
  // owned elements (at offset 0 of the host copies).
  DecayRanges decay = decayRanges(*ctx, p, part);
  // The unscale factor exactly as device::adam forms it.
  if (m.int8States()) {
    Int8State expAvg = int8State(*ctx, p, kExpAvg),
              expAvgSq = int8State(*ctx, p, kExpAvgSq);
    hostAdam8bit(part.computeDtype, ctx->buffer(p, kHostGrads), masters,
                 expAvg.codes, expAvg.absmax, expAvgSq.codes, expAvgSq.absmax,
                 params, n, ctx->adamSteps, m.lr, m.beta1, m.beta2, m.eps,
                 m.weightDecay, zrt::optimizers::isDecoupled(m.optimizer),
                 m.biasCorrection, lrSchedule(m), decay.ranges.data(),
                 decay.decays.data(), int32_t(decay.decays.size()),
                 m.gradientClipping, hostStats, float(double(scale) * divisor),
                 skip);
  } else if (m.bf16States())
    hostAdamBf16(part.computeDtype, ctx->buffer(p, kHostGrads), masters,
                 ctx->buffer<uint16_t>(p, kExpAvg),
                 ctx->buffer<uint16_t>(p, kExpAvgSq), params, n, ctx->adamSteps,
                 m.lr, m.beta1, m.beta2, m.eps, m.weightDecay,
                 zrt::optimizers::isDecoupled(m.optimizer), m.biasCorrection,
                 lrSchedule(m), decay.ranges.data(), decay.decays.data(),
                 int32_t(decay.decays.size()), m.gradientClipping, hostStats,
                 float(double(scale) * divisor), skip);
  else if (m.optimizer == zrt::optimizers::Kind::SGD)
    hostSgd(part.computeDtype, ctx->buffer(p, kHostGrads), masters,
            momentumBuffer(*ctx, p), params, n, ctx->adamSteps, m.lr,
            m.momentum, m.dampening, m.weightDecay, m.nesterov, lrSchedule(m),
            decay.ranges.data(), decay.decays.data(),
            int32_t(decay.decays.size()), m.gradientClipping, hostStats,
            float(double(scale) * divisor), skip);
  else if (m.optimizer == zrt::optimizers::Kind::Lion)
    hostLion(part.computeDtype, ctx->buffer(p, kHostGrads), masters,
             ctx->buffer<float>(p, kExpAvg), params, n, ctx->adamSteps, m.lr,
             m.beta1, m.beta2, m.weightDecay, lrSchedule(m),
             decay.ranges.data(), decay.decays.data(),
             int32_t(decay.decays.size()), m.gradientClipping, hostStats,
             float(double(scale) * divisor), skip);
  else
    hostAdam(part.computeDtype, ctx->buffer(p, kHostGrads), masters,
             ctx->buffer<float>(p, kExpAvg), ctx->buffer<float>(p, kExpAvgSq),
             params, n, ctx->adamSteps, m.lr, m.beta1, m.beta2, m.eps,
             m.weightDecay, zrt::optimizers::isDecoupled(m.optimizer),
             m.biasCorrection, lrSchedule(m), decay.ranges.data(),
             decay.decays.data(), int32_t(decay.decays.size()),
             m.gradientClipping, hostStats, float(double(scale) * divisor),
             skip);
  zrt_fill(part.computeDtype, ctx->buffer(p, kGrads), part.counts[kGrads], 0.0);
}

extern "C" void zrt_ctx_adam_nvme(zrt_ctx *ctx, int32_t p, const float *stats,
                                  const float *lossScale, int32_t skip,
                                  double divisor, int64_t chunk,
                                  int32_t buffers) {
  const char *call = "zrt_ctx_adam_nvme";
  const PartitionInfo &part = partition(ctx, p, call);
  const Manifest &m = *ctx->manifest;
  if (m.muon)
    fatal("%s: partition '%s': Muon has no NVMe update (optimizer offload)",
          call, part.name.c_str());
  if (!part.offloaded() || !part.onNvme[kMaster] || !ctx->nvme)
    fatal("%s: partition '%s' keeps its optimizer states off NVMe", call,
          part.name.c_str());
  // The swap buffers stream 4 bytes per element of each state.
  if (m.statePrecision != zrt::optimizers::StatePrecision::F32)
    fatal("%s: partition '%s': %s optimizer states are not swapped to NVMe",
          call, part.name.c_str(),
          zrt::optimizers::precisionName(m.statePrecision));
  // The fp32 masters, then the optimizer's states in the table's order.
  std::vector<BufferKind> states{kMaster};
  for (const zrt::optimizers::State &st : zrt::optimizers::kStates)
    if (st.kind == m.optimizer && m.keepsState(st.buffer))
      states.push_back(st.buffer);
  const int numStates = int(states.size());
  const int64_t perElement = 4 * int64_t(numStates);
  if (chunk <= 0 || chunk % (kSwapAlignment / 4) || buffers < 1 ||
      perElement * chunk * int64_t(buffers) > ctx->swapBytes)
    fatal("%s: %d swap buffers of %lld elements do not fit the plan's %lld "
          "bytes of swap buffers",
          call, int(buffers), (long long)chunk, (long long)ctx->swapBytes);
  int64_t n = m.owned(part, ctx->rank).size();
  float hostStats[2], scale;
  device::download(hostStats, stats, sizeof(hostStats));
  device::download(&scale, lossScale, sizeof(scale));
  DecayRanges decay = decayRanges(*ctx, p, part);
  const char *grads = ctx->buffer(p, kHostGrads);
  // The new parameters go to the host copy that is uploaded, or straight
  // into an offloaded parameter shard.
  char *params = ctx->buffer(p, part.paramsOnHost() ? kParams : kHostParams);
  int64_t cb = part.computeBytes;
  int64_t chunks = ceilDiv(n, chunk);
  // Chunk c lives in buffer c % buffers: the master and the states of its
  // elements one after another. Each read and write covers whole
  // 4096-byte blocks: a partial last chunk moves the padding of its state,
  // which the plan made part of the file.
  size_t count = static_cast<size_t>(buffers);
  std::vector<std::vector<SwapIo>> reads(
      count, std::vector<SwapIo>(size_t(numStates))),
      writes(count, std::vector<SwapIo>(size_t(numStates)));
  std::vector<bool> writing(count, false);
  auto region = [&](int64_t c, int s) {
    return ctx->swap + (c % buffers) * perElement * chunk + s * 4 * chunk;
  };
  auto ioFor = [&](SwapIo &io, int64_t c, int s, bool write) {
    int64_t len = std::min(chunk, n - c * chunk) * 4;
    io = SwapIo{};
    io.write = write;
    io.buffer = region(c, s);
    io.bytes = ceilDiv(len, kSwapAlignment) * kSwapAlignment;
    io.offset = part.offsets[states[size_t(s)]] + c * chunk * 4;
  };
  auto finishWrites = [&](int64_t b) {
    if (!writing[size_t(b)])
      return;
    for (SwapIo &io : writes[size_t(b)])
      ctx->nvme->wait(io);
    writing[size_t(b)] = false;
  };
  // With three or more buffers, reads run up to buffers - 2 chunks ahead
  // so that a chunk's write and the next chunk's read overlap its Adam.
  int64_t ahead = buffers >= 3 ? buffers - 2 : buffers - 1;
  ctx->nvme->setKillOnWrite(nvmeKillStep() > 0 &&
                            ctx->stepIndex == nvmeKillStep());
  ctx->nvme->setStep(ctx->stepIndex);
  int64_t issued = 0;
  for (int64_t c = 0; c < chunks; ++c) {
    for (; issued < chunks && issued <= c + ahead; ++issued) {
      int64_t b = issued % buffers;
      finishWrites(b);
      for (int s = 0; s < numStates; ++s) {
        ioFor(reads[size_t(b)][size_t(s)], issued, s, false);
        ctx->nvme->submit(reads[size_t(b)][size_t(s)]);
      }
    }
    int64_t b = c % buffers;
    for (SwapIo &io : reads[size_t(b)])
      ctx->nvme->wait(io);
    int64_t begin = c * chunk, len = std::min(chunk, n - begin);
    // The weight-decay runs of this chunk, relative to it.
    std::vector<int64_t> ranges;
    std::vector<double> decays;
    for (size_t r = 0; r < decay.decays.size(); ++r) {
      int64_t lo = std::max(decay.ranges[2 * r], begin);
      int64_t hi = std::min(decay.ranges[2 * r + 1], begin + len);
      if (lo < hi) {
        ranges.push_back(lo - begin);
        ranges.push_back(hi - begin);
        decays.push_back(decay.decays[r]);
      }
    }
    if (m.optimizer == zrt::optimizers::Kind::SGD)
      hostSgd(part.computeDtype, grads + begin * cb,
              reinterpret_cast<float *>(region(c, 0)),
              numStates > 1 ? reinterpret_cast<float *>(region(c, 1)) : nullptr,
              params + begin * cb, len, ctx->adamSteps, m.lr, m.momentum,
              m.dampening, m.weightDecay, m.nesterov, lrSchedule(m),
              ranges.data(), decays.data(), int32_t(decays.size()),
              m.gradientClipping, hostStats, float(double(scale) * divisor),
              skip);
    else if (m.optimizer == zrt::optimizers::Kind::Lion)
      hostLion(part.computeDtype, grads + begin * cb,
               reinterpret_cast<float *>(region(c, 0)),
               reinterpret_cast<float *>(region(c, 1)), params + begin * cb,
               len, ctx->adamSteps, m.lr, m.beta1, m.beta2, m.weightDecay,
               lrSchedule(m), ranges.data(), decays.data(),
               int32_t(decays.size()), m.gradientClipping, hostStats,
               float(double(scale) * divisor), skip);
    else
      hostAdam(part.computeDtype, grads + begin * cb,
               reinterpret_cast<float *>(region(c, 0)),
               reinterpret_cast<float *>(region(c, 1)),
               reinterpret_cast<float *>(region(c, 2)), params + begin * cb,
               len, ctx->adamSteps, m.lr, m.beta1, m.beta2, m.eps,
               m.weightDecay, zrt::optimizers::isDecoupled(m.optimizer),
               m.biasCorrection, lrSchedule(m), ranges.data(), decays.data(),
               int32_t(decays.size()), m.gradientClipping, hostStats,
               float(double(scale) * divisor), skip);
    // A skipped step changes no state: nothing to write back.
    if (!skip) {
      for (int s = 0; s < numStates; ++s) {
        ioFor(writes[size_t(b)][size_t(s)], c, s, true);
        ctx->nvme->submit(writes[size_t(b)][size_t(s)]);
      }
      writing[size_t(b)] = true;
    }
  }
  for (int64_t b = 0; b < buffers; ++b)
    finishWrites(b);
  zrt_fill(part.computeDtype, ctx->buffer(p, kGrads), part.counts[kGrads], 0.0);
}

// Lion's entries: Adam's, whose bodies call the manifest's optimizer's
// kernel (hostLion, device::lion) over its states.

extern "C" void zrt_ctx_lion(zrt_ctx *ctx, int32_t p, const float *stats,
                             const float *lossScale, int32_t skip,
                             double divisor) {
  zrt_ctx_adam(ctx, p, stats, lossScale, skip, divisor);
}

extern "C" void zrt_ctx_lion_staged(zrt_ctx *ctx, int32_t p, const float *stats,
                                    const float *lossScale, int32_t skip,
                                    double divisor, void *newParams) {
  zrt_ctx_adam_staged(ctx, p, stats, lossScale, skip, divisor, newParams);
}

extern "C" void zrt_ctx_lion_host(zrt_ctx *ctx, int32_t p, const float *stats,
                                  const float *lossScale, int32_t skip,
                                  double divisor) {
  zrt_ctx_adam_host(ctx, p, stats, lossScale, skip, divisor);
}

extern "C" void zrt_ctx_lion_nvme(zrt_ctx *ctx, int32_t p, const float *stats,
                                  const float *lossScale, int32_t skip,
                                  double divisor, int64_t chunk,
                                  int32_t buffers) {
  zrt_ctx_adam_nvme(ctx, p, stats, lossScale, skip, divisor, chunk, buffers);
}

// SGD's entries: Adam's, whose bodies call the manifest's optimizer's
// kernel (device::sgd) over its states. An offloaded SGD runs Adam's host
// and NVMe entries (hostSgd), which its row names.

extern "C" void zrt_ctx_sgd(zrt_ctx *ctx, int32_t p, const float *stats,
                            const float *lossScale, int32_t skip,
                            double divisor) {
  zrt_ctx_adam(ctx, p, stats, lossScale, skip, divisor);
}

extern "C" void zrt_ctx_sgd_staged(zrt_ctx *ctx, int32_t p, const float *stats,
                                   const float *lossScale, int32_t skip,
                                   double divisor, void *newParams) {
  zrt_ctx_adam_staged(ctx, p, stats, lossScale, skip, divisor, newParams);
}

// The memory of --trace: where the step is and which bytes of its arena are
// live, as the generated code declares them.

extern "C" void zrt_ctx_trace_op(zrt_ctx *, int64_t position) {
  traceOp(position);
}

extern "C" void zrt_ctx_trace_live(zrt_ctx *ctx, int64_t offset,
                                   int64_t bytes) {
  traceLive(offset, bytes, ctx->manifest->arenaBytes);
}

extern "C" void zrt_ctx_trace_dead(zrt_ctx *ctx, int64_t offset,
                                   int64_t bytes) {
  traceDead(offset, bytes, ctx->manifest->arenaBytes);
}

// The collectives' C entry points, each a call of its implementation above,
// generated from the ABI table.
#define ZRT_COLLECTIVE(name, impl, ret, params, args)                          \
  extern "C" ret name params { return impl args; }
#include "zero_rt/abi.def"

// Each optimizer's update entries are abi.def's, called as Adam's are: the
// lowering emits them with zrt_ctx_adam's operands.
#define ZRT_OPTIMIZER(id, name, decoupled, bytes, update, staged, host, nvme)  \
  static_assert(                                                               \
      std::is_same_v<decltype(&update), decltype(&zrt_ctx_adam)> &&            \
          std::is_same_v<decltype(&staged), decltype(&zrt_ctx_adam_staged)> && \
          std::is_same_v<decltype(&host), decltype(&zrt_ctx_adam_host)> &&     \
          std::is_same_v<decltype(&nvme), decltype(&zrt_ctx_adam_nvme)>,       \
      "optimizers.def: " #name "'s entries do not take Adam's operands");
#include "zero_rt/optimizers.def"
