//===- MemoryPlan.cpp - Static arena plan of a scheduled step -------------===//
//
// Part of the zero-mlir project.
//
// The step arena is planned by simulating, in program order, the first-fit
// allocator the runtime would need: results are allocated when their op runs
// and released after their last use (or slice by slice at zero.free). Offsets
// are therefore deterministic and the high-water mark is exactly the memory
// the runtime allocates.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/Analysis/MemoryPlan.h"

#include "zero/Dialect/NN/IR/NNDialect.h"

#include "zero/Dialect/Zero/Analysis/Muon.h"
#include "zero/Interfaces/RuntimeKernelOpInterface.h"
#include "zero_rt/quantize.h"
#include "zero_rt/scratch.h"

#include "llvm/ADT/DenseMap.h"

#include <limits>
#include <map>

using namespace mlir;
using namespace mlir::zero;

StringRef mlir::zero::stringifyMemoryCategory(MemoryCategory c) {
  switch (c) {
  case MemoryCategory::Params:
    return "params";
  case MemoryCategory::Grads:
    return "grads";
  case MemoryCategory::MasterParams:
    return "master_params";
  case MemoryCategory::AdamM:
    return "adam_m";
  case MemoryCategory::AdamV:
    return "adam_v";
  case MemoryCategory::Inputs:
    return "inputs";
  case MemoryCategory::Activations:
    return "activations";
  case MemoryCategory::Gradients:
    return "gradients";
  case MemoryCategory::ReduceBuckets:
    return "reduce_buckets";
  case MemoryCategory::GatherBuffers:
    return "gather_buffers";
  case MemoryCategory::Optimizer:
    return "optimizer";
  case MemoryCategory::SecondaryParams:
    return "secondary_params";
  }
  llvm_unreachable("unknown memory category");
}

static int64_t alignTo64(int64_t x) {
  return (x + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

namespace {

/// First-fit allocator over [0, top) with coalescing free intervals.
class ArenaAllocator {
public:
  int64_t allocate(int64_t bytes) {
    for (auto it = free.begin(); it != free.end(); ++it) {
      int64_t start = alignTo64(it->first);
      int64_t end = it->first + it->second;
      if (start + bytes > end)
        continue;
      int64_t begin = it->first;
      free.erase(it);
      if (start > begin)
        free[begin] = start - begin;
      if (end > start + bytes)
        free[start + bytes] = end - start - bytes;
      return start;
    }
    // Grow the arena, reusing a free tail.
    int64_t start = alignTo64(top);
    if (!free.empty()) {
      auto last = std::prev(free.end());
      if (last->first + last->second == top) {
        start = alignTo64(last->first);
        int64_t begin = last->first;
        free.erase(last);
        if (start > begin)
          free[begin] = start - begin;
      }
    }
    top = std::max(top, start + bytes);
    highWater = std::max(highWater, top);
    return start;
  }

  void release(int64_t offset, int64_t bytes) {
    if (bytes <= 0)
      return;
    auto [it, inserted] = free.emplace(offset, bytes);
    assert(inserted && "double free in the arena plan");
    (void)inserted;
    // Merge with the next interval, then with the previous one.
    auto next = std::next(it);
    if (next != free.end() && it->first + it->second == next->first) {
      it->second += next->second;
      free.erase(next);
    }
    if (it != free.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        free.erase(it);
      }
    }
  }

  int64_t getHighWater() const { return highWater; }

private:
  std::map<int64_t, int64_t> free;
  int64_t top = 0;
  int64_t highWater = 0;
};

/// Sizes are int64 bytes; a plan that does not fit is an error, not a
/// wrapped-around offset.
constexpr int64_t kMaxBytes =
    std::numeric_limits<int64_t>::max() - kArenaAlignment;

/// Plans one step, in the order of `run`: the persistent arenas and swap
/// buffers, the live ranges of the step's values, their buffers, the kernel
/// scratch, then the simulation of the arena.
class Planner {
public:
  Planner(const StepSchedule &schedule, MemoryPlan &plan)
      : schedule(schedule), plan(plan), step(schedule.getStep()),
        body(step.getBodyBlock()) {}

  LogicalResult run();

private:
  InFlightDiagnostic tooLarge(StringRef what);
  LogicalResult planPersistent();
  template <typename OpRange>
  LogicalResult reserveSwap(OpRange ops, StringRef what, int64_t &at,
                            int64_t &size);
  LogicalResult planSwapBuffers();
  LogicalResult planHostActivations();
  void indexOps();
  void collectExtraUses();
  void collectLastUses();
  bool isInPlaceGrad(Value v) const;
  void addBuffer(ArenaBuffer b, int64_t start, Value value);
  void addResultBuffers(Operation &op, int64_t i);
  LogicalResult addTempBuffer(Operation &op, int64_t i);
  LogicalResult planBuffers();
  LogicalResult planScratch();
  void simulate();

  const StepSchedule &schedule;
  MemoryPlan &plan;
  TrainStepOp step;
  Block &body;
  DenseMap<Operation *, int64_t> index;
  int64_t numOps = 0;
  /// End of the host arena so far (the persistent host buffers, then the
  /// swap buffers).
  int64_t hostOffset = 0;
  /// Extra uses: an asynchronous reduction reads its sources until its wait.
  DenseMap<Value, int64_t> extraUse;
  /// The last op index at which each allocated value (through its views) is
  /// used, and its partial and whole frees.
  DenseMap<Value, int64_t> lastUse;
  DenseMap<Value, SmallVector<std::pair<FreeOp, int64_t>>> frees;
  /// Buffers starting at each op index; slot 0 holds the inputs.
  std::vector<SmallVector<unsigned, 2>> startsAt;
};

} // namespace

MemoryCategory mlir::zero::persistentCategory(BufferKind k) {
  switch (k) {
  case BufferKind::params:
    return MemoryCategory::Params;
  case BufferKind::grads:
    return MemoryCategory::Grads;
  case BufferKind::master:
    return MemoryCategory::MasterParams;
  case BufferKind::exp_avg:
    return MemoryCategory::AdamM;
  case BufferKind::exp_avg_sq:
    return MemoryCategory::AdamV;
  case BufferKind::momentum_buffer:
    return MemoryCategory::AdamM;
  case BufferKind::host_grads:
    return MemoryCategory::Grads;
  case BufferKind::host_params:
    return MemoryCategory::Params;
  case BufferKind::secondary:
    return MemoryCategory::SecondaryParams;
  }
  llvm_unreachable("unknown buffer kind");
}

/// The wait of an asynchronous collective's token, if any.
static Operation *getWait(Value token) {
  if (!token)
    return nullptr;
  for (Operation *user : token.getUsers())
    if (isa<WaitOp>(user))
      return user;
  return nullptr;
}

InFlightDiagnostic Planner::tooLarge(StringRef what) {
  return step.emitOpError("memory plan: the bytes of ")
         << what << " overflow int64";
}

/// Persistent arenas: the device one, the pinned host one of an offloaded
/// optimizer, and the swap file of one on NVMe, whose buffers start and end
/// at 4096-byte boundaries for O_DIRECT (the padding is part of the file).
/// Parameter shards on NVMe have a swap file of their own.
LogicalResult Planner::planPersistent() {
  int64_t offset = 0, nvmeOffset = 0, paramNvmeOffset = 0;
  auto alignment = [](MemoryKind memory) {
    return memory == MemoryKind::nvme ? kNvmeAlignment : kArenaAlignment;
  };
  for (const PartitionBuffers &p : schedule.getPartitions()) {
    for (unsigned k = 0; k < kNumBufferKinds; ++k) {
      auto kind = static_cast<BufferKind>(k);
      if (!p.hasBuffer(kind))
        continue;
      MemoryKind memory = p.getMemory(kind);
      int64_t &at =
          memory == MemoryKind::host ? hostOffset
          : memory == MemoryKind::nvme
              ? (kind == BufferKind::params ? paramNvmeOffset : nvmeOffset)
              : offset;
      at = llvm::alignTo(at, alignment(memory));
      plan.persistent.push_back({p.partition, kind, at, p.bytes[k], memory});
      if (memory == MemoryKind::device)
        plan.persistentByCategory[static_cast<unsigned>(
            persistentCategory(kind))] += p.bytes[k];
      if (__builtin_add_overflow(at, p.bytes[k], &at) || at > kMaxBytes)
        return tooLarge("the persistent buffers");
    }
  }
  plan.persistentBytes = alignTo64(offset);
  plan.nvmeBytes = llvm::alignTo(nvmeOffset, kNvmeAlignment);
  plan.paramNvmeBytes = llvm::alignTo(paramNvmeOffset, kNvmeAlignment);
  return success();
}

/// Swap buffers in the host arena, each region after the host buffers at a
/// 4096-byte boundary (the arena itself is page-aligned): the largest
/// `buffers * buffer_bytes` over the ops in `ops` whose swap attribute is set
/// (they share the region), or none.
template <typename OpRange>
LogicalResult Planner::reserveSwap(OpRange ops, StringRef what, int64_t &at,
                                   int64_t &size) {
  for (auto op : ops)
    if (auto swap = op.getSwapAttr()) {
      int64_t bytes;
      if (__builtin_mul_overflow(swap.getBufferBytes(), swap.getBuffers(),
                                 &bytes) ||
          bytes > kMaxBytes)
        return tooLarge(what);
      size = std::max(size, bytes);
    }
  if (size == 0)
    return success();
  at = llvm::alignTo(hostOffset, kNvmeAlignment);
  if (__builtin_add_overflow(at, size, &hostOffset) || hostOffset > kMaxBytes)
    return tooLarge("the host arena");
  return success();
}

LogicalResult Planner::planSwapBuffers() {
  // The host Adams stream the NVMe states through theirs, one after
  // another.
  if (failed(reserveSwap(step.getOps<OptimizerStepOp>(), "the swap buffers",
                         plan.swapOffset, plan.swapBytes)))
    return failure();
  if ((plan.swapBytes > 0) != (plan.nvmeBytes > 0))
    return step.emitOpError("memory plan: the optimizer states are ")
           << (plan.swapBytes > 0
                   ? "in host memory, but its Adam swaps them with NVMe"
                   : "on NVMe, but no host Adam swaps them ('swap')");
  // Every transfer of a parameter shard on NVMe goes through the
  // parameters'.
  if (failed(reserveSwap(step.getOps<TransferOp>(),
                         "the parameter swap buffers", plan.paramSwapOffset,
                         plan.paramSwapBytes)))
    return failure();
  if ((plan.paramSwapBytes > 0) != (plan.paramNvmeBytes > 0))
    return step.emitOpError("memory plan: the parameter shards are ")
           << (plan.paramSwapBytes > 0
                   ? "not on NVMe, but a transfer swaps them"
                   : "on NVMe, but no transfer swaps them ('swap')");
  if (__builtin_add_overflow(plan.nvmeBytes, plan.paramNvmeBytes,
                             &plan.nvmeBytes))
    return tooLarge("the swap files");
  plan.hostBytes = alignTo64(hostOffset);
  return success();
}

/// Offloaded activations after the swap buffers, one place each: their
/// lifetimes span the forward's end, where they all are in host memory, so
/// sharing places would lower the host peak little.
LogicalResult Planner::planHostActivations() {
  hostOffset = alignTo64(hostOffset);
  plan.activationOffset = hostOffset;
  for (auto copy : step.getOps<OffloadActivationOp>()) {
    hostOffset = alignTo64(hostOffset);
    plan.hostActivations[copy] = hostOffset;
    if (__builtin_add_overflow(hostOffset, getTensorBytes(copy.getType(0)),
                               &hostOffset) ||
        hostOffset > kMaxBytes)
      return tooLarge("the offloaded activations");
  }
  plan.activationBytes = alignTo64(hostOffset) - plan.activationOffset;
  plan.hostBytes = alignTo64(hostOffset);
  return success();
}

void Planner::indexOps() {
  for (Operation &op : body) {
    index[&op] = plan.ops.size();
    plan.ops.push_back(&op);
  }
  numOps = plan.ops.size();
  if (Operation *lossDef = step.getLoss().getDefiningOp())
    if (lossDef->getBlock() == &body)
      plan.backwardStart = index[lossDef] + 1;
}

void Planner::collectExtraUses() {
  for (Operation &op : body) {
    // A reduction reads its sources, a gather its staged shard (parameter
    // offload), a copy its staged new parameters, until their waits.
    Value token;
    SmallVector<std::pair<Value, std::pair<int64_t, int64_t>>> reads;
    if (auto coll = dyn_cast<CollectiveOpInterface>(op)) {
      token = coll.getToken();
      reads = coll.getInFlightReads();
    } else if (auto t = dyn_cast<TransferOpInterface>(op)) {
      token = t.getToken();
      reads = t.getInFlightReads();
    } else if (auto copy = dyn_cast<ActivationCopyOpInterface>(op)) {
      // An offload reads its device buffer until its wait.
      token = copy.getToken();
      if (copy.copiesToHost()) {
        Value device = copy.getDeviceValue();
        reads.push_back({device, {0, getTensorBytes(device.getType())}});
      }
    }
    Operation *wait = getWait(token);
    if (!wait)
      continue;
    for (auto [s, range] : reads)
      extraUse[getViewRoot(s)] =
          std::max(extraUse.lookup(getViewRoot(s)), index[wait]);
    // Its results are written until the wait, read after it or not.
    for (Value r : op.getResults())
      if (isa<RankedTensorType>(r.getType()))
        extraUse[r] = std::max(extraUse.lookup(r), index[wait]);
  }
}

void Planner::collectLastUses() {
  for (Operation &op : body) {
    int64_t i = index[&op];
    if (auto f = dyn_cast<FreeOp>(op)) {
      Value root = getViewRoot(f.getBuffer());
      if (root)
        frees[root].push_back({f, i});
      continue;
    }
    for (Value operand : op.getOperands()) {
      Value root = getViewRoot(operand);
      if (root)
        lastUse[root] = std::max(lastUse.lookup(root), i);
    }
  }
}

bool Planner::isInPlaceGrad(Value v) const {
  for (Operation *user : v.getUsers())
    if (auto g = dyn_cast<GradOp>(user))
      if (schedule.isGradientInPlace(g))
        return true;
  return false;
}

void Planner::addBuffer(ArenaBuffer b, int64_t start, Value value) {
  // Pieces: slices freed by zero.free end there; the rest at the last use.
  int64_t end = start;
  if (value) {
    end = std::max(end, lastUse.lookup(value));
    end = std::max(end, extraUse.lookup(value));
  }
  int64_t elemBytes = 1;
  if (value)
    elemBytes = getElementBytes(
        cast<RankedTensorType>(value.getType()).getElementType());
  // [begin, end) in bytes, disjoint and non-empty: a slice is freed once.
  std::map<int64_t, int64_t> freed;
  auto it = value ? frees.find(value) : frees.end();
  if (it != frees.end()) {
    for (auto [f, at] : it->second) {
      int64_t fb = 0, fe = b.bytes;
      if (f.getOffset()) {
        fb = static_cast<int64_t>(*f.getOffset()) * elemBytes;
        fe = fb + static_cast<int64_t>(*f.getSize()) * elemBytes;
      }
      // Slices already freed are skipped (the verifier rejects double
      // frees); the remainder of this range ends here.
      auto o = freed.upper_bound(fb);
      if (o != freed.begin() && std::prev(o)->second > fb)
        --o;
      if (fb == fe) {
        // An empty buffer's free: one empty piece.
        b.pieces.push_back({fb, 0, start, at});
        continue;
      }
      SmallVector<std::pair<int64_t, int64_t>> rest;
      int64_t cursor = fb;
      for (; o != freed.end() && o->first < fe; ++o) {
        if (o->first > cursor)
          rest.push_back({cursor, o->first});
        cursor = std::max(cursor, o->second);
      }
      if (cursor < fe)
        rest.push_back({cursor, fe});
      for (auto [rb, re] : rest) {
        b.pieces.push_back({rb, re - rb, start, at});
        freed[rb] = re;
      }
    }
  }
  // What was never freed explicitly ends at the last use.
  int64_t cursor = 0;
  for (auto [fb, fe] : freed) {
    if (fb > cursor)
      b.pieces.push_back({cursor, fb - cursor, start, end});
    cursor = std::max(cursor, fe);
  }
  if (cursor < b.bytes)
    b.pieces.push_back({cursor, b.bytes - cursor, start, end});
  plan.buffers.push_back(std::move(b));
  startsAt[start + 1].push_back(plan.buffers.size() - 1);
}

void Planner::addResultBuffers(Operation &op, int64_t i) {
  auto copy = dyn_cast<ActivationCopyOpInterface>(op);
  for (OpResult r : op.getResults()) {
    if (!isa<RankedTensorType>(r.getType()) || isInPlaceGrad(r))
      continue;
    // An offloaded activation's host copy is in the host arena.
    if (copy && r == copy.getHostValue())
      continue;
    ArenaBuffer b;
    b.op = &op;
    b.resultIndex = r.getResultNumber();
    b.bytes = getTensorBytes(r.getType());
    // A staged parameter shard belongs to its gather; the device Adam's
    // staged new parameters to the optimizer.
    auto coll = dyn_cast<CollectiveOpInterface>(op);
    if ((coll && coll.getCollectiveKind() == CollectiveKind::all_gather) ||
        isa<TransferOpInterface>(op))
      b.category = MemoryCategory::GatherBuffers;
    else if (isa<LossScaleOp, CheckOverflowOp, OptimizerStepOp>(op) ||
             (isa<AllReduceOp>(op) &&
              cast<AllReduceOp>(op).reducesOptimizerStats()))
      b.category = MemoryCategory::Optimizer;
    else if (copy)
      b.category = MemoryCategory::Activations;
    else if (plan.backwardStart >= 0 && i >= plan.backwardStart)
      b.category = MemoryCategory::Gradients;
    else
      b.category = MemoryCategory::Activations;
    addBuffer(std::move(b), i, r);
  }
}

LogicalResult Planner::addTempBuffer(Operation &op, int64_t i) {
  // Bucket buffer of a source-form reduction, with a quantized
  // reduce-scatter's staging after it: from the op to its wait.
  int64_t bucketBytes = 0;
  auto coll = dyn_cast<CollectiveOpInterface>(op);
  if (!coll)
    return success();
  Value token = coll.getToken();
  if (coll.reducesBucket()) {
    FailureOr<StepSchedule::ReductionTemp> temp =
        schedule.getReductionTemp(&op);
    if (failed(temp))
      return tooLarge("a bucket buffer");
    bucketBytes = temp->getBytes();
  }
  // Staging buffer of a quantized gather: every member's quantized shard,
  // from the op to its completion.
  MemoryCategory tempCategory = MemoryCategory::ReduceBuckets;
  if (coll.getQuantizationBits() &&
      coll.getCollectiveKind() == CollectiveKind::all_gather) {
    PartitionOp g = schedule.lookupPartition(coll.getGroupAttr())->partition;
    if (__builtin_mul_overflow(
            schedule.getRankSet(coll, /*rank=*/0).size,
            g.getQuantizedSlotBytes(coll.getQuantizationBits()), &bucketBytes))
      return tooLarge("a quantized gather's staging buffer");
    tempCategory = MemoryCategory::GatherBuffers;
  }
  // Staging the op asks for itself (an all-to-all's packed chunks).
  if (int64_t staging = coll.getStagingBytes()) {
    bucketBytes = staging;
    tempCategory = MemoryCategory::Activations;
  }
  if (bucketBytes) {
    ArenaBuffer b;
    b.op = &op;
    b.category = tempCategory;
    b.bytes = bucketBytes;
    int64_t end = i;
    if (Operation *wait = getWait(token))
      end = index[wait];
    b.pieces.push_back({0, bucketBytes, i, end});
    plan.buffers.push_back(std::move(b));
    startsAt[i + 1].push_back(plan.buffers.size() - 1);
  }
  return success();
}

LogicalResult Planner::planBuffers() {
  startsAt.resize(numOps + 1);
  // Inputs of the step.
  for (BlockArgument arg : body.getArguments()) {
    ArenaBuffer b;
    b.argIndex = arg.getArgNumber();
    b.category = MemoryCategory::Inputs;
    b.bytes = getTensorBytes(arg.getType());
    addBuffer(std::move(b), -1, arg);
  }
  for (Operation &op : body) {
    int64_t i = index[&op];
    if (isViewOp(&op))
      continue;
    addResultBuffers(op, i);
    if (failed(addTempBuffer(op, i)))
      return failure();
  }
  return success();
}

/// Muon's step runs its matrices one after another, each through
/// zrt_scratch_muon of it: the largest is the step's scratch (any rank may
/// own any matrix).
static int64_t getMuonScratchBytes(OptimizerStepOp step) {
  int64_t bytes = 0;
  if (auto module = step->getParentOfType<ModuleOp>())
    for (ParamOp p : getMuonParams(module)) {
      int64_t rows = p.getTensorType().getDimSize(0);
      bytes =
          std::max(bytes, zrt_scratch_muon(rows, p.getNumElements() / rows));
    }
  return bytes;
}

/// Every offset, live sum and the peak below are at most the persistent
/// bytes plus the aligned sizes of all buffers plus the kernel scratch: if
/// that fits, nothing in the simulation overflows.
LogicalResult Planner::planScratch() {
  plan.scratchByOp.assign(numOps, 0);
  for (auto [i, op] : llvm::enumerate(plan.ops)) {
    if (auto kernel = dyn_cast<RuntimeKernelOpInterface>(op)) {
      plan.scratchByOp[i] = kernel.getKernelScratchBytes();
      plan.scratchBytes = std::max(plan.scratchBytes, plan.scratchByOp[i]);
    } else if (auto step = dyn_cast<OptimizerStepOp>(op);
               step && step.getOptimizerKind() == OptimizerKind::muon) {
      plan.scratchByOp[i] = getMuonScratchBytes(step);
      plan.scratchBytes = std::max(plan.scratchBytes, plan.scratchByOp[i]);
    } else if (step && step.getOptimizerKind() == OptimizerKind::adafactor) {
      // Adafactor's sums of its group's tensors, doubles.
      const PartitionBuffers *group =
          schedule.lookupPartition(step.getGroupAttr());
      plan.scratchByOp[i] = group ? 8 * group->adafactorSums : 0;
      plan.scratchBytes = std::max(plan.scratchBytes, plan.scratchByOp[i]);
    } else if (!isa<ZeroDialect>(op->getDialect()) && !isViewOp(op))
      return op->emitOpError(
          "has no runtime kernel model (RuntimeKernelOpInterface), so its "
          "kernel scratch cannot be planned");
  }
  int64_t bound = plan.persistentBytes;
  bool overflow = __builtin_add_overflow(bound, plan.scratchBytes, &bound);
  for (const ArenaBuffer &b : plan.buffers)
    overflow |= b.bytes > kMaxBytes ||
                __builtin_add_overflow(bound, alignTo64(b.bytes), &bound) ||
                bound > kMaxBytes;
  if (overflow)
    return tooLarge("the step's buffers");
  return success();
}

/// At each op, allocates what starts there, then releases the pieces that
/// end there.
void Planner::simulate() {
  std::vector<SmallVector<std::pair<unsigned, unsigned>, 2>> endsAt(numOps + 1);
  for (auto [bi, b] : llvm::enumerate(plan.buffers))
    for (auto [pi, piece] : llvm::enumerate(b.pieces))
      endsAt[std::max<int64_t>(piece.end, 0)].push_back({bi, pi});
  ArenaAllocator arena;
  std::array<int64_t, kNumMemoryCategories> live{};
  plan.liveByCategory.resize(numOps);
  for (int64_t slot = 0; slot <= numOps; ++slot) {
    for (unsigned bi : startsAt[slot]) {
      ArenaBuffer &b = plan.buffers[bi];
      b.offset = arena.allocate(b.bytes);
      for (ArenaPiece &piece : b.pieces)
        piece.offset += b.offset;
      live[static_cast<unsigned>(b.category)] += b.bytes;
    }
    if (slot == 0)
      continue; // inputs: released with their pieces below
    int64_t i = slot - 1;
    plan.liveByCategory[i] = live;
    for (unsigned c = 0; c < kNumMemoryCategories; ++c)
      plan.peakByCategory[c] = std::max(plan.peakByCategory[c], live[c]);
    for (auto [bi, pi] : endsAt[i]) {
      ArenaBuffer &b = plan.buffers[bi];
      ArenaPiece &piece = b.pieces[pi];
      arena.release(piece.offset, piece.bytes);
      live[static_cast<unsigned>(b.category)] -= piece.bytes;
    }
  }
  plan.arenaBytes = alignTo64(arena.getHighWater());
  plan.peakBytes = plan.persistentBytes + plan.arenaBytes + plan.scratchBytes;
}

LogicalResult Planner::run() {
  if (failed(planPersistent()) || failed(planSwapBuffers()) ||
      failed(planHostActivations()))
    return failure();
  indexOps();
  collectExtraUses();
  collectLastUses();
  if (failed(planBuffers()) || failed(planScratch()))
    return failure();
  simulate();
  return success();
}

FailureOr<MemoryPlan>
mlir::zero::computeMemoryPlan(const StepSchedule &schedule) {
  MemoryPlan plan;
  Planner planner(schedule, plan);
  if (failed(planner.run()))
    return failure();
  return plan;
}

FailureOr<MemoryPlan> mlir::zero::computeMemoryPlan(TrainStepOp step) {
  FailureOr<StepSchedule> schedule = StepSchedule::get(step);
  if (failed(schedule))
    return failure();
  return computeMemoryPlan(*schedule);
}

void mlir::zero::recordMemoryPlan(const MemoryPlan &plan, TrainStepOp step) {
  MLIRContext *ctx = step.getContext();
  auto *dialect = ctx->getLoadedDialect<ZeroDialect>();
  Builder b(ctx);
  DenseMap<Operation *, SmallVector<int64_t>> results;
  SmallVector<int64_t> inputs(step.getBodyBlock().getNumArguments(), -1);
  for (const ArenaBuffer &buf : plan.buffers) {
    if (buf.argIndex >= 0) {
      inputs[buf.argIndex] = buf.offset;
      continue;
    }
    if (buf.resultIndex < 0) {
      dialect->getTempAttrHelper().setAttr(buf.op,
                                           b.getI64IntegerAttr(buf.offset));
      continue;
    }
    auto &offsets = results[buf.op];
    offsets.resize(buf.op->getNumResults(), -1);
    offsets[buf.resultIndex] = buf.offset;
  }
  auto alloc = dialect->getAllocAttrHelper();
  for (Operation *op : plan.ops) {
    op->removeAttr(alloc.getName());
    auto it = results.find(op);
    if (it != results.end())
      alloc.setAttr(op, b.getDenseI64ArrayAttr(it->second));
  }
  dialect->getInputOffsetsAttrHelper().setAttr(step,
                                               b.getDenseI64ArrayAttr(inputs));
  DenseMap<Operation *, std::array<std::optional<int64_t>, kNumBufferKinds>>
      partitions;
  for (const PersistentBuffer &p : plan.persistent)
    partitions[p.partition][static_cast<unsigned>(p.kind)] = p.offset;
  for (auto &[op, o] : partitions)
    dialect->getBuffersAttrHelper().setAttr(
        op, BufferOffsetsAttr::get(ctx, *o[0], o[1], o[2], o[3], o[4], o[5],
                                   o[6], o[7], o[8]));
  dialect->getPlanAttrHelper().setAttr(
      step, MemoryPlanAttr::get(ctx, plan.persistentBytes, plan.arenaBytes,
                                plan.scratchBytes, plan.peakBytes,
                                plan.hostBytes, plan.nvmeBytes, plan.swapOffset,
                                plan.swapBytes, plan.paramNvmeBytes,
                                plan.paramSwapOffset, plan.paramSwapBytes));
}
