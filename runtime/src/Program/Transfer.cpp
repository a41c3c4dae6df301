//===- Transfer.cpp - Copies between device, host and NVMe ----------------===//
//
// Part of the zero-mlir project.
//
// Activations to and from the host arena, parameter shards to and from
// their NVMe swap file, and the copies between a partition's device and
// host buffers (zrt_ctx_transfer).
//
//===----------------------------------------------------------------------===//

#include "Optimizer/Nvme.h"
#include "Program/Calls.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

using namespace zrt;
using namespace zrt::program;

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
