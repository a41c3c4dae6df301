//===- Prefetch.cpp - Asynchronous stage-3 gathers within a budget --------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/Transforms/Passes.h"

#include "ScheduleUtils.h"

namespace mlir::zero {
#define GEN_PASS_DEF_ZEROPREFETCHPASS
#include "zero/Dialect/Zero/Transforms/Passes.h.inc"
} // namespace mlir::zero

using namespace mlir;
using namespace mlir::zero;
using namespace mlir::zero::schedule;

namespace {

/// Per-point values with range add and a search for the last point over a
/// limit, each O(log n): a step's gathers may span most of it.
class RangeMax {
public:
  explicit RangeMax(int64_t n)
      : n(n), maxOf(4 * n + 4, 0), pending(4 * n + 4, 0) {}
  /// Adds `v` to every point in [lo, hi).
  void add(int64_t lo, int64_t hi, int64_t v) { add(1, 0, n, lo, hi, v); }
  /// The last point j in [lo, hi) with value(j) + extra > limit, or -1.
  int64_t lastAbove(int64_t lo, int64_t hi, int64_t extra, int64_t limit) {
    return lastAbove(1, 0, n, lo, hi, extra, limit);
  }

private:
  void push(size_t node) {
    for (size_t c : {2 * node, 2 * node + 1}) {
      maxOf[c] += pending[node];
      pending[c] += pending[node];
    }
    pending[node] = 0;
  }
  void add(size_t node, int64_t l, int64_t r, int64_t lo, int64_t hi,
           int64_t v) {
    if (hi <= l || r <= lo)
      return;
    if (lo <= l && r <= hi) {
      maxOf[node] += v;
      pending[node] += v;
      return;
    }
    push(node);
    int64_t m = (l + r) / 2;
    add(2 * node, l, m, lo, hi, v);
    add(2 * node + 1, m, r, lo, hi, v);
    maxOf[node] = std::max(maxOf[2 * node], maxOf[2 * node + 1]);
  }
  int64_t lastAbove(size_t node, int64_t l, int64_t r, int64_t lo, int64_t hi,
                    int64_t extra, int64_t limit) {
    if (hi <= l || r <= lo || maxOf[node] + extra <= limit)
      return -1;
    if (r - l == 1)
      return l;
    push(node);
    int64_t m = (l + r) / 2;
    int64_t j = lastAbove(2 * node + 1, m, r, lo, hi, extra, limit);
    return j >= 0 ? j : lastAbove(2 * node, l, m, lo, hi, extra, limit);
  }

  int64_t n;
  std::vector<int64_t> maxOf, pending;
};

/// One stage-3 gather and the positions (op indices) that bound it.
struct Gather {
  AllGatherOp op;
  int64_t size;
  int64_t at;        // the synchronous gather
  int64_t firstUse;  // the wait goes right before this op
  int64_t free;      // the free of the buffer (end of block if none)
  int64_t lower = 0; // earliest allowed issue point
  int64_t issue = 0; // chosen issue point (insert before this op)
  /// Parameter offload: the copy staging the shard, its wait and the free
  /// of the staged buffer (null otherwise), and the shard's elements.
  TransferOp stage;
  WaitOp stageWait;
  FreeOp stageFree;
  int64_t shardSize = 0;
  int64_t stageIssue = 0; // where the copy is issued
  /// The earlier gather whose staging wait the copy is issued before (-1:
  /// at stageIssue, after the ops already placed there).
  int64_t stageBefore = -1;
  /// A gather of the first micro step kept across the others
  /// (frozen-gather=once): counted live, but left synchronous where it is,
  /// since a prefetch runs in every micro step.
  bool kept = false;
};

struct ZeroPrefetchPass
    : public mlir::zero::impl::ZeroPrefetchPassBase<ZeroPrefetchPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (prefetchBucketSize < 1 || maxLiveParameters < 1) {
      mlir::emitError(module.getLoc(),
                      "zero-prefetch: prefetch-bucket-size and "
                      "max-live-parameters must be positive, got ")
          << prefetchBucketSize.getValue() << " and "
          << maxLiveParameters.getValue();
      return signalPassFailure();
    }
    for (TrainStepOp step : module.getOps<TrainStepOp>())
      schedule(step);
  }

  void schedule(TrainStepOp step) {
    if (failed(scheduleStep(step)))
      signalPassFailure();
  }

  LogicalResult scheduleStep(TrainStepOp step) {
    Block &body = step.getBodyBlock();
    SmallVector<Operation *> ops;
    for (Operation &op : body)
      ops.push_back(&op);
    auto position = numberOps(body);
    int64_t end = ops.size();

    SmallVector<Gather> gathers;
    llvm::DenseMap<Attribute, int64_t> lastFreeOfGroup;
    // The staging ops move with their gathers: an insertion point on one of
    // them is taken at the next op that stays.
    llvm::SmallPtrSet<Operation *, 16> staging;
    for (Operation *op : ops) {
      auto gather = dyn_cast<AllGatherOp>(op);
      if (!gather || !gather.getResult() || gather.getToken())
        continue;
      Gather g{
          gather,
          cast<RankedTensorType>(gather.getResult().getType()).getNumElements(),
          position.lookup(op), end, end};
      g.kept = gather.getPhase() != Phase::micro_step;
      for (Operation *user : gather.getResult().getUsers()) {
        int64_t pos = position.lookup(user);
        g.firstUse = std::min(g.firstUse, pos);
        if (isa<FreeOp>(user))
          g.free = std::min(g.free, pos);
      }
      // An unused buffer is waited for at the end of the step.
      g.firstUse = std::min(g.firstUse, end - 1);
      // Never above the free of the same group's previous buffer: keeping
      // that one would have been cheaper than gathering twice.
      auto it = lastFreeOfGroup.find(gather.getGroupAttr());
      g.lower = it == lastFreeOfGroup.end() ? 0 : it->second + 1;
      lastFreeOfGroup[gather.getGroupAttr()] = g.free;
      g.issue = g.at;
      if (Value shard = gather.getShard()) {
        g.stage = shard.getDefiningOp<TransferOp>();
        g.shardSize = cast<RankedTensorType>(shard.getType()).getNumElements();
        for (Operation *user : g.stage.getToken().getUsers())
          g.stageWait = dyn_cast<WaitOp>(user);
        for (Operation *user : shard.getUsers())
          if (auto free = dyn_cast<FreeOp>(user))
            g.stageFree = free;
        if (!g.stageWait || !g.stageFree)
          return gather.emitOpError("reads a staged shard whose copy is not "
                                    "waited for or whose buffer is never "
                                    "freed");
        staging.insert(g.stage);
        staging.insert(g.stageWait);
        staging.insert(g.stageFree);
      }
      gathers.push_back(g);
    }
    if (gathers.empty())
      return success();

    // Live and in-flight elements are piecewise constant between these
    // points; a prefetch is best issued at the start of a piece.
    SmallVector<int64_t> coords = {0, end + 1};
    for (const Gather &g : gathers) {
      coords.append({g.at, g.firstUse, g.firstUse + 1, g.free + 1, g.lower});
    }
    llvm::sort(coords);
    coords.erase(std::unique(coords.begin(), coords.end()), coords.end());
    auto idx = [&](int64_t pos) {
      return std::lower_bound(coords.begin(), coords.end(), pos) -
             coords.begin();
    };
    RangeMax live(coords.size()), inflight(coords.size());
    // Every buffer is live from its gather to its free in any case.
    for (const Gather &g : gathers)
      live.add(idx(g.at), idx(g.free + 1), g.size);

    int64_t prevIssue = 0;
    // Parameter shards on NVMe: the gather whose staging wait frees each
    // swap buffer; a copy is not issued before the buffer it reads into is
    // free again.
    llvm::DenseMap<int64_t, int64_t> swapFreedBy;
    for (auto [i, g] : llvm::enumerate(gathers)) {
      // Nothing of every micro step goes above a kept gather (or its
      // staging).
      if (g.kept) {
        prevIssue =
            (g.stageFree ? position.lookup(g.stageFree) : g.at) + int64_t(1);
        continue;
      }
      g.lower = std::max(g.lower, prevIssue);
      int64_t at = idx(g.at), waitEnd = idx(g.firstUse + 1);
      bool fits =
          inflight.lastAbove(at, waitEnd, g.size, prefetchBucketSize) < 0;
      int64_t k = at;
      // Hoist to the start of the run of pieces before `at` that are at or
      // after `lower` and have room for the buffer.
      if (fits) {
        int64_t first = idx(g.lower);
        int64_t full =
            std::max(live.lastAbove(first, at, g.size, maxLiveParameters),
                     inflight.lastAbove(first, at, g.size, prefetchBucketSize));
        k = std::min(at, std::max(first, full + 1));
      }
      g.issue = k == at ? g.at : coords[k];
      live.add(k, at, g.size);
      inflight.add(k, waitEnd, g.size);
      // A staged shard is copied ahead when it fits the budgets from there
      // on, so that the copy overlaps compute; otherwise right before its
      // gather. A host copy is a memcpy, issued one gather ahead (at the
      // previous gather's issue point). A read from a parameter swap file
      // has a buffer of its own: it is issued up to one gather less than
      // there are buffers ahead, before the staging wait of that gather,
      // once its buffer is free, so that several reads are in flight on
      // the disk even where gathers share an issue point.
      g.stageIssue = g.issue;
      if (g.stage) {
        int64_t sk = k;
        ParamSwapAttr swap = g.stage.getSwapAttr();
        int64_t ahead = swap ? std::max<int64_t>(1, swap.getBuffers() - 1) : 1;
        int64_t freedBy =
            swap ? swapFreedBy.lookup_or(swap.getBuffer(), -1) : int64_t(-1);
        for (int64_t d = std::min<int64_t>(ahead, i); d >= 1; --d) {
          int64_t j = int64_t(i) - d;
          const Gather &earlier = gathers[j];
          // Kept gathers come first and nothing goes above them.
          if (earlier.kept)
            break;
          // With a swap buffer the copy goes before the earlier gather's
          // staging wait when that comes after the wait that frees the
          // buffer; otherwise after the ops at the earlier gather's issue
          // point (the freeing wait among them), which helps only where
          // that point is strictly earlier.
          if (j < freedBy)
            continue;
          bool before = swap && earlier.stageWait && j > freedBy;
          if (earlier.issue > g.issue || (!before && earlier.issue == g.issue))
            continue;
          int64_t pk = idx(earlier.issue);
          if (inflight.lastAbove(pk, waitEnd, g.shardSize, prefetchBucketSize) <
                  0 &&
              live.lastAbove(pk, waitEnd, g.shardSize, maxLiveParameters) < 0) {
            sk = pk;
            g.stageBefore = before ? j : -1;
            break;
          }
        }
        g.stageIssue = sk == k ? g.issue : coords[sk];
        if (swap)
          swapFreedBy[swap.getBuffer()] = int64_t(i);
        live.add(sk, waitEnd, g.shardSize);
        inflight.add(sk, waitEnd, g.shardSize);
      }
      prevIssue = g.issue;
    }
    auto anchor = [&](int64_t pos) {
      while (pos + 1 < end && staging.contains(ops[pos]))
        ++pos;
      return ops[pos];
    };

    OpBuilder b(&getContext());
    auto tokenType = TokenType::get(&getContext());
    for (Gather &g : gathers) {
      if (g.kept)
        continue;
      if (g.stage) {
        if (g.stageBefore >= 0)
          g.stage->moveBefore(gathers[g.stageBefore].stageWait);
        else
          g.stage->moveBefore(anchor(g.stageIssue));
        g.stageWait->moveBefore(anchor(g.issue));
      }
      b.setInsertionPoint(anchor(g.issue));
      auto prefetch = PrefetchOp::create(
          b, g.op.getLoc(), g.op.getResult().getType(), tokenType,
          g.op.getGroupAttr(), g.op.getPersistentAttr(), g.op.getShard(),
          g.op.getSecondaryAttr(), g.op.getQuantizedAttr());
      for (NamedAttribute attr : g.op->getDiscardableAttrs())
        prefetch->setAttr(attr.getName(), attr.getValue());
      b.setInsertionPoint(ops[g.firstUse]);
      auto wait = WaitOp::create(b, g.op.getLoc(), prefetch.getToken());
      // The staged shard is read until the gather completes.
      if (g.stageFree)
        g.stageFree->moveAfter(wait);
      g.op.getResult().replaceAllUsesWith(prefetch.getResult());
    }
    // Later prefetches may have been placed before these ops.
    for (Gather &g : gathers)
      if (!g.kept)
        g.op.erase();
    return success();
  }
};

} // namespace
