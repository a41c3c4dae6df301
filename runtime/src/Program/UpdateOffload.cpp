//===- UpdateOffload.cpp - The optimizer's step on the host and NVMe ------===//
//
// Part of the zero-mlir project.
//
// The update of a partition whose optimizer is offloaded: on the host
// (zrt_ctx_optimizer_step_host) and over its NVMe swap file
// (zrt_ctx_optimizer_step_nvme).
//
//===----------------------------------------------------------------------===//

#include "zero_rt/optimizers.h"

#include "Optimizer/Nvme.h"
#include "Program/Calls.h"

#include <algorithm>
#include <memory>
#include <vector>

using namespace zrt;
using namespace zrt::program;

extern "C" void zrt_ctx_optimizer_step_host(zrt_ctx *ctx, int32_t p,
                                            const float *stats,
                                            const float *lossScale,
                                            int32_t skip, double divisor) {
  const char *call = "zrt_ctx_optimizer_step_host";
  const PartitionInfo &part = partition(ctx, p, call);
  if (ctx->manifest->optimizer == optimizers::Kind::Muon)
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
  // The same weight-decay runs and schedule as the device update, over the
  // same owned elements (at offset 0 of the host copies), and the unscale
  // factor exactly as device::optimizerStep forms it.
  DecayRanges decay = decayRanges(*ctx, p, part);
  zrt_update u = updateOf(*ctx, part, hostStats, skip, decay);
  u.grad = ctx->buffer(p, kHostGrads);
  u.master = masters;
  u.param = params;
  u.n = n;
  u.loss_scale = float(double(scale) * divisor);
  setStates(*ctx, p, u);
  hostOptimizerStep(optimizerOf(m), u);
  zrt_fill(part.computeDtype, ctx->buffer(p, kGrads), part.counts[kGrads], 0.0);
}

extern "C" void zrt_ctx_optimizer_step_nvme(zrt_ctx *ctx, int32_t p,
                                            const float *stats,
                                            const float *lossScale,
                                            int32_t skip, double divisor,
                                            int64_t chunk, int32_t buffers) {
  const char *call = "zrt_ctx_optimizer_step_nvme";
  const PartitionInfo &part = partition(ctx, p, call);
  const Manifest &m = *ctx->manifest;
  if (m.optimizer == optimizers::Kind::Muon)
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
  const zrt_optimizer optimizer = optimizerOf(m);
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
  // so that a chunk's write and the next chunk's read overlap its update.
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
    DecayRanges own;
    for (size_t r = 0; r < decay.decays.size(); ++r) {
      int64_t lo = std::max(decay.ranges[2 * r], begin);
      int64_t hi = std::min(decay.ranges[2 * r + 1], begin + len);
      if (lo < hi) {
        own.ranges.push_back(lo - begin);
        own.ranges.push_back(hi - begin);
        own.decays.push_back(decay.decays[r]);
      }
    }
    // The chunk's master, then its states in their swap regions.
    zrt_update u = updateOf(*ctx, part, hostStats, skip, own);
    u.grad = grads + begin * cb;
    u.master = reinterpret_cast<float *>(region(c, 0));
    u.param = params + begin * cb;
    u.n = len;
    u.loss_scale = float(double(scale) * divisor);
    for (int s = 1; s < numStates; ++s)
      u.states[zrt::optimizers::stateIndex(m.optimizer, states[size_t(s)])] =
          region(c, s);
    hostOptimizerStep(optimizer, u);
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
