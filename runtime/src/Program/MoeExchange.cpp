//===- MoeExchange.cpp - Rows to their experts and back -------------------===//
//
// Part of the zero-mlir project.
//
// The MoE exchange of expert parallelism: each member's routed rows to the
// members holding their experts (zrt_ctx_moe_exchange) and the results back
// (zrt_ctx_moe_return), with the capacity the plan sized.
//
//===----------------------------------------------------------------------===//

#include "Collectives/MoeExchange.h"
#include "Program/Calls.h"

#include <mpi.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace zrt;
using namespace zrt::program;

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

void program::moeExchange(zrt_ctx *ctx, int32_t dtype, const void *rows,
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

void program::moeReturn(zrt_ctx *ctx, int32_t dtype, const void *recv,
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
