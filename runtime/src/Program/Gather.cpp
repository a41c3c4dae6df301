//===- Gather.cpp - Parameters gathered for the step ----------------------===//
//
// Part of the zero-mlir project.
//
// The parameter all-gathers of stages 1-3: plain, whole partitions, qwZ's
// quantized, from a staged (offloaded) shard and hpZ's secondary shard, and
// the staging of a host shard to the device.
//
//===----------------------------------------------------------------------===//

#include "zero_rt/quantize.h"

#include "Program/Calls.h"

#include <algorithm>
#include <functional>

using namespace zrt;
using namespace zrt::program;

void program::allGatherParams(zrt_ctx *ctx, int32_t p, int64_t begin,
                              int64_t end, int32_t slot) {
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

void program::gatherPartition(zrt_ctx *ctx, int32_t p, void *out,
                              int32_t slot) {
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

void program::gatherQuantized(zrt_ctx *ctx, int32_t p, void *staging, void *out,
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

void program::gatherStaged(zrt_ctx *ctx, int32_t p, const void *shard,
                           void *out, int32_t slot) {
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

void program::gatherSecondary(zrt_ctx *ctx, int32_t p, void *out,
                              int32_t slot) {
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
