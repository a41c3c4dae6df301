//===- ParamGather.cpp - Parameter all-gathers of a ZeRO train step -------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/Transforms/Passes.h"

#include "ScheduleUtils.h"
#include "zero/Support/UTF8.h"
#include "zero_rt/variants.h"

#include "llvm/ADT/MapVector.h"

namespace mlir::zero {
#define GEN_PASS_DEF_ZEROPARAMGATHERPASS
#include "zero/Dialect/Zero/Transforms/Passes.h.inc"
} // namespace mlir::zero

using namespace mlir;
using namespace mlir::zero;
using namespace mlir::zero::schedule;

namespace {

/// Prefix sums over op positions.
class Fenwick {
public:
  explicit Fenwick(size_t n) : tree(n + 1, 0) {}
  void add(int64_t pos, int64_t v) {
    for (size_t i = pos + 1; i < tree.size(); i += i & -i)
      tree[i] += v;
  }
  /// Sum over positions [0, pos].
  int64_t prefix(int64_t pos) const {
    int64_t s = 0;
    for (int64_t i = std::min<int64_t>(pos + 1, tree.size() - 1); i > 0;
         i -= i & -i)
      s += tree[i];
    return s;
  }

private:
  std::vector<int64_t> tree;
};

/// The uses of one stage-3 group in program order.
struct GroupUses {
  PartitionOp group;
  bool persistent = false;
  /// A frozen group gathered in the first micro step and kept to the end
  /// of the optimizer step (frozen-gather=once).
  bool once = false;
  /// Ops using a view of the group, each once, in program order.
  SmallVector<Operation *> events;
  SmallVector<int64_t> positions;
  /// Index into `events` where each live interval starts.
  SmallVector<size_t> intervalStarts;
  /// The group's get_param ops, in program order.
  SmallVector<GetParamOp> gets;
  /// The element type of the gathered buffer.
  Type elementType;
};

class Stage3Gather {
public:
  Stage3Gather(const StepSchedule &schedule, int64_t persistenceThreshold,
               int64_t maxReuseDistance, bool frozenOnce, bool quantized)
      : schedule(schedule), step(schedule.getStep()),
        persistenceThreshold(persistenceThreshold),
        maxReuseDistance(maxReuseDistance), frozenOnce(frozenOnce),
        hpz(schedule.getHpzPartitionSize() > 1), quantized(quantized) {}
  LogicalResult run();

private:
  /// Splits each group's uses where the reuse distance is exceeded.
  void computeIntervals();
  /// A persistent gather of `g` after `after` (at the top of the step when
  /// null) that every get_param of the group reads, freed before the first
  /// post-step op; with `once` it runs in the first micro step only and is
  /// freed after the last. Returns its last op (the staged shard's free with
  /// offloaded parameters).
  Operation *emitKeptGather(GroupUses &g, Operation *after, bool once);
  void emitPersistent(GroupUses &g);
  void emitOnce(GroupUses &g);
  void emitIntervals(GroupUses &g);
  /// A value-form gather of `g` at `b`'s insertion point; with offloaded
  /// parameters its shard is first staged from host memory (a transfer and
  /// its wait before the gather, the staged buffer freed after it). A
  /// `secondary` one gathers the hpZ secondary shards.
  AllGatherOp createGather(OpBuilder &b, Location loc, GroupUses &g,
                           bool secondary = false);

  const StepSchedule &schedule;
  TrainStepOp step;
  int64_t persistenceThreshold, maxReuseDistance;
  bool frozenOnce;
  /// ZeRO++ hpZ: a group gathered again later in the step keeps a
  /// secondary shard after its first gather, and the later gathers collect
  /// those over the hpZ group.
  bool hpz;
  bool quantized;
  llvm::DenseMap<Operation *, int64_t> position;
  llvm::MapVector<Operation *, GroupUses> groups;      // PartitionOp -> uses
  llvm::DenseMap<Operation *, Operation *> groupOfGet; // GetParamOp -> group
  /// Where the next persistent gather and its free go; kept across groups
  /// so that placing each is O(1) instead of a scan of the step.
  Operation *lastPersistentGather = nullptr;
  /// The last op of the gathers kept across micro steps, which come first.
  Operation *lastOnceOp = nullptr;
  Operation *postStepPoint = nullptr;
};

} // namespace

void Stage3Gather::computeIntervals() {
  // Distance between consecutive uses (a, b) of a group: elements of the
  // other non-persistent groups used strictly in between. Offline sweep over
  // `a` from the end with a Fenwick tree holding, for each group, its next
  // use after `a`: O((uses + queries) log ops).
  struct Query {
    int64_t a, b;
    GroupUses *g;
    size_t idx; // event index of b
    int64_t distance = 0;
  };
  std::vector<Query> queries;
  std::vector<std::pair<int64_t, GroupUses *>> events;
  for (auto &[op, g] : groups) {
    if (g.persistent || g.once || g.events.empty())
      continue;
    for (size_t i = 0; i < g.positions.size(); ++i) {
      events.push_back({g.positions[i], &g});
      if (i > 0)
        queries.push_back({g.positions[i - 1], g.positions[i], &g, i});
    }
  }
  llvm::sort(events, [](auto &x, auto &y) { return x.first > y.first; });
  llvm::sort(queries, [](auto &x, auto &y) { return x.a > y.a; });
  Fenwick tree(position.size() + 1);
  llvm::DenseMap<GroupUses *, int64_t> next;
  size_t e = 0;
  for (Query &q : queries) {
    for (; e < events.size() && events[e].first > q.a; ++e) {
      auto [pos, g] = events[e];
      int64_t numel = g->group.getPaddedNumelValue();
      auto it = next.find(g);
      if (it != next.end())
        tree.add(it->second, -numel);
      next[g] = pos;
      tree.add(pos, numel);
    }
    q.distance = tree.prefix(q.b - 1);
  }
  for (auto &[op, g] : groups)
    if (!g.events.empty())
      g.intervalStarts.push_back(0);
  llvm::sort(queries, [](auto &x, auto &y) { return x.a < y.a; });
  for (Query &q : queries)
    if (q.distance > maxReuseDistance)
      q.g->intervalStarts.push_back(q.idx);
  for (auto &[op, g] : groups)
    llvm::sort(g.intervalStarts);
}

AllGatherOp Stage3Gather::createGather(OpBuilder &b, Location loc, GroupUses &g,
                                       bool secondary) {
  auto type =
      RankedTensorType::get({g.group.getPaddedNumelValue()}, g.elementType);
  auto groupRef = FlatSymbolRefAttr::get(g.group.getSymNameAttr());
  Value shard;
  if (secondary) {
    auto gather =
        AllGatherOp::create(b, loc, type, Type(), groupRef, BufferKindAttr(),
                            IntegerAttr(), IntegerAttr(), UnitAttr(), Value());
    gather.setSecondary(true);
    return gather;
  }
  if (schedule.areParamsOffloaded()) {
    auto shardType =
        RankedTensorType::get({g.group.getShardNumel()}, g.elementType);
    auto stage = TransferOp::create(
        b, loc, shardType, TokenType::get(b.getContext()), groupRef,
        BufferKindAttr::get(b.getContext(), BufferKind::params),
        BufferKindAttr(), Value(), IntegerAttr(), IntegerAttr(),
        ParamSwapAttr(), PhaseAttr());
    WaitOp::create(b, loc, stage.getToken());
    shard = stage.getStaged();
  }
  auto gather =
      AllGatherOp::create(b, loc, type, Type(), groupRef, BufferKindAttr(),
                          IntegerAttr(), IntegerAttr(), UnitAttr(), shard);
  if (quantized)
    gather.setQuantized(true);
  if (shard) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointAfter(gather);
    FreeOp::create(b, loc, shard, IntegerAttr(), IntegerAttr());
  }
  return gather;
}

Operation *Stage3Gather::emitKeptGather(GroupUses &g, Operation *after,
                                        bool once) {
  Block &body = step.getBodyBlock();
  OpBuilder b = OpBuilder::atBlockBegin(&body);
  if (after)
    b.setInsertionPointAfter(after);
  AllGatherOp gather = createGather(b, g.group.getLoc(), g);
  gather.setPersistent(true);
  Operation *last = gather;
  if (Value shard = gather.getShard())
    for (Operation *user : shard.getUsers())
      if (isa<FreeOp>(user))
        last = user;
  // Gathered once per optimizer step: the gather and its staging run in
  // the first micro step only.
  if (once)
    for (Operation *op = after ? after->getNextNode() : &body.front();
         op != last->getNextNode(); op = op->getNextNode())
      if (auto phased = dyn_cast<StepPhaseOpInterface>(op))
        phased.setPhase(Phase::first_micro_step);
  for (GetParamOp get : g.gets)
    get.getSourceMutable().assign(gather.getResult());
  // Each free goes before the first post-step op, which is then this free:
  // at the end of every micro step, or once after the last one.
  if (!postStepPoint)
    postStepPoint = getOptimizerInsertionPoint(body);
  b.setInsertionPoint(postStepPoint);
  auto free = FreeOp::create(b, g.group.getLoc(), gather.getResult(),
                             IntegerAttr(), IntegerAttr());
  free.setPhase(once ? Phase::post_step : Phase::step_end);
  postStepPoint = free;
  return last;
}

void Stage3Gather::emitPersistent(GroupUses &g) {
  // In group order at the top of the step, after those kept across micro
  // steps.
  lastPersistentGather = emitKeptGather(
      g, lastPersistentGather ? lastPersistentGather : lastOnceOp,
      /*once=*/false);
}

void Stage3Gather::emitOnce(GroupUses &g) {
  // First in the step, so that no op of a later micro step runs before the
  // buffer is live in the plan (and could reuse its place).
  lastOnceOp = emitKeptGather(g, lastOnceOp, /*once=*/true);
}

void Stage3Gather::emitIntervals(GroupUses &g) {
  OpBuilder b(step.getContext());
  // The first user of each get_param of the group decides which interval
  // owns it (and may keep it as its view).
  size_t numIntervals = g.intervalStarts.size();
  // The last interval starting at or before `pos` (the first if none).
  auto intervalOf = [&](int64_t pos) -> size_t {
    auto it =
        llvm::upper_bound(g.intervalStarts, pos, [&](int64_t p, size_t start) {
          return p < g.positions[start];
        });
    size_t k = it - g.intervalStarts.begin();
    return k == 0 ? 0 : k - 1;
  };
  llvm::DenseMap<Operation *, size_t> owner;
  llvm::DenseMap<Operation *, int64_t> firstUse;
  for (size_t i = 0; i < g.events.size(); ++i)
    for (Value v : g.events[i]->getOperands())
      if (auto get = v.getDefiningOp<GetParamOp>();
          get && groupOfGet.lookup(get) == g.group.getOperation())
        firstUse.try_emplace(get, g.positions[i]);
  // The get_params whose first use falls in each interval.
  std::vector<SmallVector<GetParamOp, 2>> firstUsedIn(numIntervals);
  for (GetParamOp get : g.gets) {
    auto it = firstUse.find(get);
    if (it != firstUse.end())
      firstUsedIn[intervalOf(it->second)].push_back(get);
  }
  for (size_t k = 0; k < numIntervals; ++k) {
    size_t first = g.intervalStarts[k];
    size_t last = k + 1 < numIntervals ? g.intervalStarts[k + 1] - 1
                                       : g.events.size() - 1;
    int64_t prevEnd = k == 0 ? -1 : g.positions[first - 1];
    // A get_param keeps serving as the view of the interval of its first use
    // if it sits after the previous interval.
    Operation *start = g.events[first];
    SmallVector<GetParamOp> owned;
    for (GetParamOp get : firstUsedIn[k])
      if (position.lookup(get) > prevEnd) {
        owned.push_back(get);
        owner[get] = k;
        if (position.lookup(get) < position.lookup(start))
          start = get;
      }
    b.setInsertionPoint(start);
    // hpZ: the first gather of a group gathered again fills the secondary
    // shard (once per optimizer step: the parameters change only at the
    // optimizer), which every later gather of the step collects within the
    // hpZ group.
    bool again = hpz && numIntervals > 1;
    AllGatherOp gather = createGather(b, start->getLoc(), g, again && k > 0);
    if (again && k == 0) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointAfter(gather);
      auto store = StoreSecondaryOp::create(
          b, start->getLoc(), gather.getResult(), gather.getGroupAttr());
      store.setPhase(Phase::first_micro_step);
    }
    for (GetParamOp get : owned)
      get.getSourceMutable().assign(gather.getResult());
    // Uses of views owned by other intervals get fresh views.
    llvm::DenseMap<StringAttr, Value> views;
    OpBuilder vb(step.getContext());
    vb.setInsertionPointAfter(gather);
    if (Value shard = gather.getShard())
      vb.setInsertionPointAfter(*llvm::find_if(
          shard.getUsers(), [](Operation *u) { return isa<FreeOp>(u); }));
    for (size_t i = first; i <= last; ++i)
      for (OpOperand &operand : g.events[i]->getOpOperands()) {
        auto get = operand.get().getDefiningOp<GetParamOp>();
        if (!get || groupOfGet.lookup(get) != g.group.getOperation())
          continue;
        auto it = owner.find(get);
        if (it != owner.end() && it->second == k)
          continue;
        Value &view = views[get.getParamAttr().getAttr()];
        if (!view)
          view = GetParamOp::create(vb, get.getLoc(), get.getType(),
                                    get.getParamAttr(), gather.getResult());
        operand.set(view);
      }
    b.setInsertionPointAfter(g.events[last]);
    FreeOp::create(b, g.events[last]->getLoc(), gather.getResult(),
                   IntegerAttr(), IntegerAttr());
  }
}

LogicalResult Stage3Gather::run() {
  Block &body = step.getBodyBlock();
  auto module = step->getParentOfType<ModuleOp>();
  position = numberOps(body);
  for (Operation &op : body) {
    auto gather = dyn_cast<AllGatherOp>(op);
    if (!gather || !gather.getPersistent())
      break;
    lastPersistentGather = gather;
  }
  // One symbol table: a lookup per group must not scan the module.
  SymbolTable symbols(module);
  for (PartitionOp part : module.getOps<PartitionOp>()) {
    GroupUses &g = groups[part];
    g.group = part;
    auto first = cast<SymbolRefAttr>(part.getParams()[0]);
    g.elementType = symbols.lookup<ParamOp>(first.getLeafReference())
                        .getComputeTensorType()
                        .getElementType();
    g.once = frozenOnce && part.getFrozen();
    g.persistent = !g.once && part.getNumelValue() < persistenceThreshold;
  }
  SmallVector<GetParamOp> unused;
  for (GetParamOp get : body.getOps<GetParamOp>()) {
    if (get.getSource())
      return get.emitOpError("is already a view of a gathered buffer");
    const ParamLocation *loc =
        schedule.lookupParam(get.getParamAttr().getValue());
    if (!loc)
      return get.emitOpError("parameter ")
             << get.getParamAttr() << " is in no zero.partition";
    groupOfGet[get] = loc->partition;
    groups[loc->partition].gets.push_back(get);
    if (get.use_empty())
      unused.push_back(get);
  }
  // Uses in program order; an op using several views of a group counts once.
  for (Operation &op : body) {
    SmallVector<Operation *, 2> seen;
    for (Value v : op.getOperands()) {
      auto get = v.getDefiningOp<GetParamOp>();
      if (!get)
        continue;
      Operation *grp = groupOfGet.lookup(get);
      if (!grp || llvm::is_contained(seen, grp))
        continue;
      seen.push_back(grp);
      GroupUses &g = groups[grp];
      g.events.push_back(&op);
      g.positions.push_back(position.lookup(&op));
    }
  }
  computeIntervals();
  for (auto &[op, g] : groups) {
    if (g.events.empty())
      continue;
    if (g.once)
      emitOnce(g);
    else if (g.persistent)
      emitPersistent(g);
    else
      emitIntervals(g);
  }
  // Views nobody reads need no gathered buffer.
  for (GetParamOp get : unused)
    get.erase();
  for (GetParamOp get : llvm::make_early_inc_range(body.getOps<GetParamOp>()))
    if (get.use_empty())
      get.erase();
  return success();
}

namespace {
struct ZeroParamGatherPass
    : public mlir::zero::impl::ZeroParamGatherPassBase<ZeroParamGatherPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (allgatherBucketSize < 1) {
      mlir::emitError(module.getLoc(),
                      "zero-param-gather: allgather-bucket-size must be "
                      "positive, got ")
          << allgatherBucketSize.getValue();
      return signalPassFailure();
    }
    if (frozenGather != "per-use" && frozenGather != "once") {
      mlir::emitError(module.getLoc(),
                      "zero-param-gather: frozen-gather must be per-use or "
                      "once, got '")
          << frozenGather.getValue() << "'";
      return signalPassFailure();
    }
    if (paramPersistenceThreshold < 0 || maxReuseDistance < 0) {
      mlir::emitError(module.getLoc(),
                      "zero-param-gather: param-persistence-threshold and "
                      "max-reuse-distance must be >= 0");
      return signalPassFailure();
    }
    for (TrainStepOp step : module.getOps<TrainStepOp>()) {
      FailureOr<StepSchedule> schedule =
          getPartitionedSchedule(step, "zero-param-gather");
      if (failed(schedule))
        return signalPassFailure();
      if (failed(recordParamOffload(step, *schedule)))
        return signalPassFailure();
      zrt_variant_config variants = variantsOf(*schedule);
      variants.offload_param = getParamOffload(step) != OffloadDevice::none;
      if (zrt_variant_breaks(&variants, ZRT_HPZ_EXCLUDES_PARAM_OFFLOAD)) {
        mlir::emitError(step.getLoc())
            << "zero-param-gather: hpZ (hpz_partition_size "
            << schedule->getHpzPartitionSize()
            << ") does not combine with offload-param: the secondary shards "
               "live on the device";
        return signalPassFailure();
      }
      if (quantizedWeights && failed(checkQuantizedWeights(*schedule)))
        return signalPassFailure();
      if (schedule->getStage() == 3) {
        // The buffers' memories follow the step's offload.
        schedule = StepSchedule::get(step);
        if (failed(schedule))
          return signalPassFailure();
        if (failed(Stage3Gather(*schedule, paramPersistenceThreshold,
                                maxReuseDistance, frozenGather == "once",
                                quantizedWeights)
                       .run()))
          return signalPassFailure();
        assignSwapBuffers(step, *schedule);
        continue;
      }
      if (schedule->getStage() == 0)
        continue;
      emitPostStepGathers(module, step);
    }
  }

  /// What DeepSpeed's rules for the collective variants read of the step
  /// (zero_rt/variants.h).
  static zrt_variant_config variantsOf(const StepSchedule &schedule) {
    zrt_variant_config variants = {};
    variants.stage = schedule.getStage();
    variants.world_size = schedule.getWorldSize();
    variants.hpz_partition_size = schedule.getHpzPartitionSize();
    variants.mics_shard_size = schedule.getMicsShardSize();
    return variants;
  }

  /// quantized-weights (ZeRO++ qwZ): DeepSpeed's rules, stage 3 with
  /// 16-bit weights and the shards on the device.
  LogicalResult checkQuantizedWeights(const StepSchedule &schedule) {
    TrainStepOp step = schedule.getStep();
    zrt_variant_config variants = variantsOf(schedule);
    variants.quantized_weights = 1;
    variants.offload_param = offloadParam != "none";
    if (zrt_variant_breaks(&variants, ZRT_QWZ_NEEDS_STAGE3))
      return step.emitOpError("zero-param-gather: quantized-weights (qwZ) "
                              "needs stage 3, the step is stage ")
             << schedule.getStage();
    if (zrt_variant_breaks(&variants, ZRT_QWZ_EXCLUDES_PARAM_OFFLOAD))
      return step.emitOpError("zero-param-gather: quantized-weights (qwZ) "
                              "gathers the shards on the device; it does not "
                              "combine with offload-param=")
             << offloadParam.getValue();
    for (const PartitionBuffers &p : schedule.getPartitions())
      if (!p.computeType.isBF16() && !p.computeType.isF16())
        return p.partition.emitOpError(
                   "zero-param-gather: quantized-weights (qwZ) quantizes "
                   "16-bit weights, partition @")
               << p.partition.getSymName() << " computes in " << p.computeType;
    return success();
  }

  /// offload-param=cpu|nvme: records `param` in the step's offload
  /// (DeepSpeed's rule: stage 3 only); the gathers then stage each shard.
  LogicalResult recordParamOffload(TrainStepOp step,
                                   const StepSchedule &schedule) {
    std::optional<OffloadDevice> device = symbolizeOffloadDevice(offloadParam);
    auto fail = [&]() {
      return mlir::emitError(step.getLoc()) << "zero-param-gather: ";
    };
    if (!device)
      return fail() << "offload-param must be none, cpu or nvme, got '"
                    << offloadParam << "'";
    if (*device == OffloadDevice::none)
      return success();
    // The optimizer's part is zero-optimizer's (none without one).
    OffloadAttr old = step.getOffload();
    bool nvme = *device == OffloadDevice::nvme;
    // The parameters' swap folder defaults to the optimizer's.
    StringRef path = nvme ? StringRef(paramNvmePath.getValue()) : StringRef();
    if (nvme && path.empty())
      path = nvmePath;
    if (failed(::zero::checkUTF8(
            fail, paramNvmePath.empty() ? "nvme-path " : "param-nvme-path ",
            path, "the path goes into the program's JSON manifest")))
      return failure();
    OffloadAttr attr = OffloadAttr::getChecked(
        [&] { return fail(); }, &getContext(), old.getOptimizer(), *device,
        old.getNvmePath(), old.getBufferCount(), old.getBufferSize(), path,
        int64_t(paramBufferCount), int64_t(paramBufferSize));
    if (!attr || failed(attr.verifyStage(fail, schedule.getStage())))
      return failure();
    // DeepSpeed's swapper asserts that a buffer holds a whole parameter;
    // here a swap buffer holds a whole shard.
    if (nvme)
      for (const PartitionBuffers &p : schedule.getPartitions())
        if (p.partition.getShardNumel() > paramBufferSize)
          return fail() << "param-buffer-size (offload_param.buffer_size) of "
                        << paramBufferSize.getValue()
                        << " elements cannot hold the "
                        << p.partition.getShardNumel()
                        << "-element parameter shard of @"
                        << p.partition.getSymName()
                        << ": a swap buffer holds a whole shard";
    step.setOffloadAttr(attr);
    return success();
  }

  /// Parameter shards on NVMe: each staging copy goes through swap buffer
  /// i mod buffer_count, i counting the copies in program order (so that
  /// up to buffer_count consecutive copies can be in flight at once;
  /// zero-prefetch issues them ahead only once their buffer is free).
  void assignSwapBuffers(TrainStepOp step, const StepSchedule &schedule) {
    if (!schedule.areParamsOnNvme())
      return;
    int64_t i = 0;
    for (TransferOp op : step.getBodyBlock().getOps<TransferOp>())
      if (op.getSource() == BufferKind::params)
        op.setSwapAttr(schedule.getParamSwap(i++));
  }

  /// Stages 1-2: every rank updated its shard of the 16-bit parameters;
  /// gather the other ranks' shards in place, in buckets. Frozen
  /// partitions were not updated: every rank holds them whole.
  void emitPostStepGathers(ModuleOp module, TrainStepOp step) {
    Block &body = step.getBodyBlock();
    OpBuilder b(&getContext());
    SmallVector<OptimizerStepOp> adams(body.getOps<OptimizerStepOp>());
    if (!adams.empty())
      b.setInsertionPointAfter(adams.back());
    else
      b.setInsertionPoint(getOptimizerInsertionPoint(body));
    auto params = BufferKindAttr::get(&getContext(), BufferKind::params);
    for (PartitionOp group : module.getOps<PartitionOp>())
      for (int64_t lo = 0, hi; !group.getFrozen() && lo < group.getNumelValue();
           lo = hi) {
        // lo + allgatherBucketSize may overflow int64: clamp the size first.
        hi = lo +
             std::min<int64_t>(allgatherBucketSize, group.getNumelValue() - lo);
        auto op =
            AllGatherOp::create(b, step.getLoc(), Type(), Type(),
                                FlatSymbolRefAttr::get(group.getSymNameAttr()),
                                params, b.getI64IntegerAttr(lo),
                                b.getI64IntegerAttr(hi), UnitAttr(), Value());
        op.setPhase(Phase::post_step);
      }
  }
};
} // namespace
