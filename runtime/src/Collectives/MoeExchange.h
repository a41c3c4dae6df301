//===- MoeExchange.h - The rows an MoE exchange moves -----------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// zrt_ctx_moe_exchange and zrt_ctx_moe_return (abi.def) move the dispatched
// rows of an MoE layer between the P members of an expert-parallel set:
// member q owns local experts [q * E_l, (q + 1) * E_l) of the E experts.
// What moves where follows from counts alone, computed here on the host the
// same way on every member and on every backend (Program.cpp drives both
// through Collectives.h), so that the members agree without asking:
//  - a member's dispatch order holds its rows sorted by global expert, the
//    rows of expert e in [offsets[e - 1], offsets[e]);
//  - member q lays the rows it receives out expert-major: local expert l,
//    from member 0, 1, ..., P - 1, each source's rows in its dispatch
//    order; with a capacity of `cap` rows and drops, the first cap rows of
//    that order are kept and the rest dropped.
// Every (receiver, local expert, source) block is contiguous on both sides,
// so local expert l's blocks move as one all-to-all with per-member counts:
// E_l of them, and no staging copy.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_MOE_EXCHANGE_H
#define ZERO_RT_MOE_EXCHANGE_H

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace zrt {

/// This member's side of one exchange, in rows. Indices are q * E_l + l
/// for the send side (local expert l of receiver q) and s * E_l + l for the
/// receive side (local expert l of this member, from source s): the layout
/// of the exchange's `counts` [P, E_l].
struct MoeRoute {
  int64_t members = 1, localExperts = 0;
  /// Rows of this member's dispatch order routed to local expert l of
  /// member q, where they start, and how many q keeps.
  std::vector<int64_t> sendRouted, sendStart, sendKept;
  /// Rows this member keeps from source s for its local expert l, and
  /// where they start in its receive buffer.
  std::vector<int64_t> recvKept, recvStart;
  /// Rows received in all (the receive buffer's used front).
  int64_t recvRows = 0;

  int64_t index(int64_t member, int64_t local) const {
    return member * localExperts + local;
  }
};

/// Per-expert row counts of a dispatch order from its cumulative ends
/// `offsets` [E]; an error message (and no counts) unless they are
/// non-decreasing from 0 and end within `n` rows.
inline std::string moeCountsOf(const int32_t *offsets, int64_t experts,
                               int64_t n, std::vector<int64_t> &counts) {
  counts.assign(size_t(experts), 0);
  int64_t at = 0;
  for (int64_t e = 0; e < experts; ++e) {
    if (offsets[e] < at || offsets[e] > n) {
      counts.clear();
      return "offsets[" + std::to_string(e) +
             "] = " + std::to_string(offsets[e]) + " after " +
             std::to_string(at) + " in a dispatch of " + std::to_string(n) +
             " rows";
    }
    counts[size_t(e)] = offsets[e] - at;
    at = offsets[e];
  }
  return "";
}

/// A route between `members` members of experts / members local experts
/// each, every block's counts and starts zero.
inline MoeRoute zeroMoeRoute(int64_t members, int64_t experts) {
  MoeRoute r;
  r.members = members;
  r.localExperts = experts / members;
  size_t blocks = size_t(members * r.localExperts);
  r.sendRouted.assign(blocks, 0);
  r.sendStart.assign(blocks, 0);
  r.sendKept.assign(blocks, 0);
  r.recvKept.assign(blocks, 0);
  r.recvStart.assign(blocks, 0);
  return r;
}

/// What every member learns from the all-gathered counts: `routed`
/// [P * E], member s's rows for global expert e at s * E + e.
struct MoeExchangePlan {
  MoeRoute route;
  /// Rows routed to each member (before any drop).
  std::vector<int64_t> arriving;
  /// The first member more rows than `cap` would arrive at (-1: none).
  int64_t overflowMember = -1;
  /// Rows dropped at this member, and the most rows routed to one of its
  /// local experts.
  int64_t dropped = 0, maxExpertRows = 0;
};

/// The plan of member `me` of `members`, `experts` (a multiple of members)
/// experts, a capacity of `cap` rows per member and drops allowed or not
/// (without drops every routed row is kept, even past cap: the caller stops
/// at overflowMember first).
inline MoeExchangePlan planMoeExchange(int64_t members, int64_t me,
                                       int64_t experts, int64_t cap, bool drop,
                                       const std::vector<int64_t> &routed) {
  MoeExchangePlan plan;
  plan.route = zeroMoeRoute(members, experts);
  MoeRoute &r = plan.route;
  int64_t el = r.localExperts;
  plan.arriving.assign(size_t(members), 0);
  // This member's dispatch segments: expert e starts after experts < e.
  std::vector<int64_t> segment(size_t(experts), 0);
  for (int64_t e = 1; e < experts; ++e)
    segment[size_t(e)] =
        segment[size_t(e - 1)] + routed[size_t(me * experts + e - 1)];
  for (int64_t q = 0; q < members; ++q) {
    // Receiver q's layout, (local expert, source) order.
    int64_t used = 0;
    for (int64_t l = 0; l < el; ++l) {
      int64_t expertRows = 0;
      for (int64_t s = 0; s < members; ++s) {
        int64_t e = q * el + l;
        int64_t c = routed[size_t(s * experts + e)];
        int64_t kept = drop ? std::clamp<int64_t>(cap - used, 0, c) : c;
        plan.arriving[size_t(q)] += c;
        expertRows += c;
        if (s == me) {
          r.sendRouted[size_t(r.index(q, l))] = c;
          r.sendStart[size_t(r.index(q, l))] = segment[size_t(e)];
          r.sendKept[size_t(r.index(q, l))] = kept;
        }
        if (q == me) {
          r.recvKept[size_t(r.index(s, l))] = kept;
          r.recvStart[size_t(r.index(s, l))] = used;
          plan.dropped += c - kept;
        }
        used += kept;
      }
      if (q == me)
        plan.maxExpertRows = std::max(plan.maxExpertRows, expertRows);
    }
    if (q == me)
      r.recvRows = used;
    if (plan.arriving[size_t(q)] > cap && plan.overflowMember < 0)
      plan.overflowMember = q;
  }
  return plan;
}

/// The route of a later call that reuses an exchange's counts (its
/// backward, or the return): the receive side from `counts` [P, E_l] (the
/// kept rows, as the exchange wrote them), the send side from this
/// member's dispatch counts `routed` [E], of which receiver q kept
/// `sendKept` (null: all of them, an exchange that dropped none of this
/// member's rows).
inline MoeRoute moeRouteOf(int64_t members, int64_t experts,
                           const std::vector<int64_t> &routed,
                           const std::vector<int64_t> &counts,
                           const std::vector<int64_t> *sendKept) {
  MoeRoute r = zeroMoeRoute(members, experts);
  int64_t el = r.localExperts;
  int64_t at = 0;
  for (int64_t e = 0; e < experts; ++e) {
    r.sendStart[size_t(e)] = at;
    r.sendRouted[size_t(e)] = routed[size_t(e)];
    at += routed[size_t(e)];
  }
  r.sendKept = sendKept ? *sendKept : r.sendRouted;
  for (int64_t l = 0; l < el; ++l)
    for (int64_t s = 0; s < members; ++s) {
      r.recvStart[size_t(r.index(s, l))] = r.recvRows;
      r.recvKept[size_t(r.index(s, l))] = counts[size_t(r.index(s, l))];
      r.recvRows += counts[size_t(r.index(s, l))];
    }
  return r;
}

} // namespace zrt

#endif // ZERO_RT_MOE_EXCHANGE_H
