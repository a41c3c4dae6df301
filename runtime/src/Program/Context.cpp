//===- Context.cpp - The shared zrt_ctx of a running program --------------===//
//
// Part of the zero-mlir project.
//
// What the zrt_ctx_* calls of both backends share: the context's clock
// and waits, its token slots, partition and range checks, the owned
// slices of the persistent buffers, the arenas' entries and the loss
// scale's update. The calls themselves are in the files beside it.
//
//===----------------------------------------------------------------------===//

#include "Device/Device.h"
#include "Program/Manifest.h"
#include "Support/Support.h"

#include <algorithm>
#include <chrono>
#include <cstring>

using namespace zrt;

double zrt_ctx::nowUs() const {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now() - traceStart)
      .count();
}

zrt::WaitScope::WaitScope(WaitState *state, const char *what) {
  // Nested scopes (a driver wait around zrt_ctx_wait) keep the outer one.
  if (!state || state->what.load(std::memory_order_relaxed))
    return;
  this->state = state;
  state->sinceNs.store(std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::steady_clock::now().time_since_epoch())
                           .count(),
                       std::memory_order_relaxed);
  state->what.store(what, std::memory_order_release);
}

zrt::WaitScope::~WaitScope() {
  if (state)
    state->what.store(nullptr, std::memory_order_release);
}

int zrt_ctx::drainSlots() {
  int n = 0;
  for (size_t s = 0; s < slots.size(); ++s)
    if (slots[s].live) {
      zrt_ctx_wait(this, int32_t(s));
      ++n;
    }
  return n;
}

const PartitionInfo &zrt::partition(zrt_ctx *ctx, int32_t p, const char *call) {
  if (p < 0 || p >= int32_t(ctx->manifest->partitions.size()))
    fatal("%s: partition %d does not exist", call, int(p));
  return ctx->manifest->partitions[size_t(p)];
}

/// Rank r's owned part of [begin, end).
Range zrt::ownedPart(zrt_ctx *ctx, const PartitionInfo &p, int rank,
                     int64_t begin, int64_t end) {
  Range o = ctx->manifest->owned(p, rank);
  return {std::max(begin, o.begin), std::min(end, o.end)};
}

void zrt::checkRange(const PartitionInfo &p, int64_t begin, int64_t end,
                     int64_t limit, const char *call) {
  if (begin < 0 || begin > end || end > limit)
    fatal("%s: range [%lld, %lld) outside partition '%s' (%lld elements)", call,
          (long long)begin, (long long)end, p.name.c_str(), (long long)limit);
}

int zrt::mpiInt(int64_t n, const char *call) {
  if (n > std::numeric_limits<int>::max())
    fatal("%s: %lld elements exceed MPI's int counts", call, (long long)n);
  return int(n);
}

/// Per-member counts (and displacements from `begin`) of the owned parts of
/// [begin, end), over the ranks the partition is sharded over (member r of
/// a shard group owns shard r).
void zrt::splitByOwner(zrt_ctx *ctx, const PartitionInfo &p, int64_t begin,
                       int64_t end, std::vector<int> &counts,
                       std::vector<int> &displs, const char *call) {
  int members = ctx->manifest->shardGroupSize(p);
  counts.assign(size_t(members), 0);
  displs.assign(size_t(members), 0);
  for (int r = 0; r < members; ++r) {
    Range shard = ctx->manifest->shardRange(p, r);
    Range part{std::max(begin, shard.begin), std::min(end, shard.end)};
    if (part.size() > 0) {
      counts[size_t(r)] = mpiInt(part.size(), call);
      displs[size_t(r)] = mpiInt(part.begin - begin, call);
    }
  }
}

/// Runs a collective's completion now (slot < 0) or at zrt_ctx_wait.
void zrt::launch(zrt_ctx *ctx, int32_t slot, const char *what,
                 std::vector<int64_t> tokens, std::function<void()> done,
                 int64_t flight) {
  if (slot < 0) {
    // A synchronous collective: the whole call is exposed communication.
    double start = ctx->tracing ? ctx->nowUs() : 0.0;
    {
      WaitScope watched(ctx->waitState, what);
      ctx->flight.waited(flight);
      for (int64_t t : tokens)
        zrt_wait(t);
      ctx->flight.done(flight);
    }
    // The span is the wait; the completion is compute.
    if (ctx->tracing)
      ctx->trace.push_back(
          {std::string("wait ") + what, start, ctx->nowUs() - start});
    if (done)
      done();
    return;
  }
  if (size_t(slot) >= ctx->slots.size())
    ctx->slots.resize(size_t(slot) + 1);
  zrt_ctx::Pending &pending = ctx->slots[size_t(slot)];
  if (pending.live)
    fatal("%s: token slot %d is still outstanding (%s)", what, int(slot),
          pending.what);
  pending.live = true;
  ++ctx->liveSlots;
  pending.what = what;
  pending.flight = flight;
  pending.tokens = std::move(tokens);
  pending.done = std::move(done);
}

char *zrt::ownedParams(const zrt_ctx &ctx, int32_t p) {
  const Manifest &m = *ctx.manifest;
  const PartitionInfo &part = m.partitions[size_t(p)];
  char *params = ctx.buffer(p, kParams);
  if (m.stage <= 2)
    params += m.owned(part, ctx.rank).begin * part.computeBytes;
  return params;
}

float *zrt::ownedMasters(const zrt_ctx &ctx, int32_t p) {
  const PartitionInfo &part = ctx.manifest->partitions[size_t(p)];
  // bf16 masters: the update reads and writes the params alone.
  if (part.masters16())
    return nullptr;
  if (part.paramsAreMasters)
    return reinterpret_cast<float *>(ownedParams(ctx, p));
  return ctx.buffer<float>(p, kMaster);
}

float *zrt::momentumBuffer(const zrt_ctx &ctx, int32_t p) {
  if (!ctx.manifest->partitions[size_t(p)].hasBuffer(kMomentumBuffer))
    return nullptr;
  return ctx.buffer<float>(p, kMomentumBuffer);
}

Int8State zrt::int8State(const zrt_ctx &ctx, int32_t p, BufferKind kind) {
  const Manifest &m = *ctx.manifest;
  int64_t block = optimizers::absmaxBlock(m.optimizer, m.statePrecision);
  int64_t count = m.partitions[size_t(p)].counts[kind];
  char *at = ctx.buffer(p, kind);
  int64_t blocks = block > 0 ? (count + block - 1) / block : 0;
  return {reinterpret_cast<float *>(at),
          reinterpret_cast<uint8_t *>(at + 4 * blocks)};
}

std::pair<char *, int64_t> zrt::ownedGrads(zrt_ctx *ctx, int32_t p,
                                           const PartitionInfo &part) {
  Range o = ctx->manifest->owned(part, ctx->rank);
  char *g = ctx->buffer(p, kGrads);
  if (ctx->manifest->stage <= 1)
    g += o.begin * part.computeBytes;
  return {g, o.size()};
}

extern "C" void *zrt_ctx_step(zrt_ctx *ctx, int64_t offset) {
  // Generated code asks for its operands between kernels: the moment to let
  // MPI advance asynchronous collectives, which Open MPI does only inside
  // MPI calls. A kernel asks for several operands in a row; one progress
  // call per kProgressIntervalNs is enough.
  if (ctx->liveSlots > 0) {
    int64_t now = steadyNs();
    if (now - ctx->progressNs >= kProgressIntervalNs) {
      ctx->progressNs = now;
      zrt_progress();
    }
  }
  if (offset < 0 || offset > ctx->manifest->arenaBytes)
    fatal("zrt_ctx_step: offset %lld outside the step arena of %lld bytes",
          (long long)offset, (long long)ctx->manifest->arenaBytes);
  return ctx->step + offset;
}
extern "C" void *zrt_ctx_persistent(zrt_ctx *ctx, int64_t offset) {
  if (offset < 0 || offset > ctx->manifest->persistentBytes)
    fatal("zrt_ctx_persistent: offset %lld outside the persistent arena of "
          "%lld bytes",
          (long long)offset, (long long)ctx->manifest->persistentBytes);
  return ctx->persistent + offset;
}
extern "C" void zrt_ctx_wait(zrt_ctx *ctx, int32_t slot) {
  if (slot < 0)
    return;
  if (size_t(slot) >= ctx->slots.size() || !ctx->slots[size_t(slot)].live)
    fatal("zrt_ctx_wait: token slot %d has no outstanding collective",
          int(slot));
  zrt_ctx::Pending &pending = ctx->slots[size_t(slot)];
  double start = ctx->tracing ? ctx->nowUs() : 0.0;
  {
    WaitScope watched(ctx->waitState, pending.what);
    ctx->flight.waited(pending.flight);
    for (int64_t t : pending.tokens)
      zrt_wait(t);
    ctx->flight.done(pending.flight);
  }
  // The span is the wait; the completion is compute.
  if (ctx->tracing)
    ctx->trace.push_back(
        {std::string("wait ") + pending.what, start, ctx->nowUs() - start});
  if (pending.done)
    pending.done();
  pending = zrt_ctx::Pending();
  --ctx->liveSlots;
}

int32_t zrt::updateLossScale(zrt_ctx *ctx, const float *stats) {
  ctx->stats[0] = stats[0];
  ctx->stats[1] = stats[1];
  float seen[2] = {stats[0], stats[1]};
  if (ctx->injectOverflowFirst > 0 &&
      ctx->stepIndex >= ctx->injectOverflowFirst &&
      ctx->stepIndex <= ctx->injectOverflowLast)
    seen[0] = std::numeric_limits<float>::infinity();
  ctx->overflow = seen[0] != 0.0f;
  // DeepSpeed's DynamicLossScaler.update_scale raises here ("Current loss
  // scale already at minimum"); zrt_loss_scaler_update clamps, and the
  // driver decides (--on-min-loss-scale).
  const zrt_loss_scaler &s = ctx->scaler;
  ctx->overflowAtMinScale = ctx->overflow && s.dynamic &&
                            (s.delayed_shift == 1 || s.cur_hysteresis == 1) &&
                            s.cur_scale == s.min_scale;
  // A global batch without a valid label has no loss: its optimizer step
  // is not taken, the loss scale unchanged (its zero gradient is no
  // overflow), and the driver stops the run at it.
  int32_t skip = ctx->noLabels ? 1 : zrt_update_loss_scale(&ctx->scaler, seen);
  ctx->skipped = skip != 0;
  if (!skip)
    ++ctx->optimizerSteps;
  return skip;
}
