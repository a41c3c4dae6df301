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
// The calls live one concern per file of this folder, around what Calls.h
// shares; this file defines those shared pieces, --trace's calls and the
// collectives' C entries, generated from abi.def.
//
//===----------------------------------------------------------------------===//

#include "Program/Calls.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <type_traits>

using namespace zrt;
using namespace zrt::program;

DecayRanges program::decayRanges(const zrt_ctx &ctx, int32_t p,
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

int64_t program::record(zrt_ctx *ctx, const char *what, CommKind kind,
                        int32_t setKind, zrt_rank_set set, int64_t bytes) {
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

// Each optimizer's update entries are abi.def's, called with the operands of
// zrt_ctx_optimizer_step and its variants, as the lowering emits them.
#define ZRT_OPTIMIZER(id, name, decoupled, bytes, update, staged, host, nvme)  \
  static_assert(                                                               \
      std::is_same_v<decltype(&update), decltype(&zrt_ctx_optimizer_step)> &&  \
          std::is_same_v<decltype(&staged),                                    \
                         decltype(&zrt_ctx_optimizer_step_staged)> &&          \
          std::is_same_v<decltype(&host),                                      \
                         decltype(&zrt_ctx_optimizer_step_host)> &&            \
          std::is_same_v<decltype(&nvme),                                      \
                         decltype(&zrt_ctx_optimizer_step_nvme)>,              \
      "optimizers.def: " #name "'s entries do not take the update's "          \
      "operands");
#include "zero_rt/optimizers.def"
