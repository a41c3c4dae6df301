//===- GradSync.cpp - Gradient reduction of a ZeRO train step -------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/Transforms/Passes.h"

#include "ScheduleUtils.h"
#include "zero_rt/variants.h"

#include "llvm/ADT/DenseSet.h"

#include <deque>

namespace mlir::zero {
#define GEN_PASS_DEF_ZEROGRADSYNCPASS
#include "zero/Dialect/Zero/Transforms/Passes.h.inc"
} // namespace mlir::zero

using namespace mlir;
using namespace mlir::zero;
using namespace mlir::zero::schedule;

namespace {

/// Elements [offset, offset + size) of a gradient value.
struct Piece {
  Value grad;
  int64_t offset;
  int64_t size;
};

/// A contiguous layout range [lo, hi) of one group being filled.
struct Bucket {
  PartitionOp group;
  int64_t lo = 0, hi = 0;
  bool quantized = false;    // ZeRO++ qgZ
  SmallVector<Piece> pieces; // in layout order
  bool empty() const { return hi == lo; }
  int64_t size() const { return hi - lo; }
};

/// An issued asynchronous collective whose wait (and frees) are pending.
struct Pending {
  Value token;
  SmallVector<Piece> frees;
};

class StepSync {
public:
  StepSync(TrainStepOp step, const StepSchedule &schedule, int64_t bucketSize,
           bool reduceScatter, bool overlap, bool quantized)
      : step(step), schedule(schedule), bucketSize(bucketSize),
        reduceScatter(reduceScatter), overlap(overlap), quantized(quantized),
        b(step.getContext()) {}

  LogicalResult run();

private:
  /// Adds the gradient of `gradOp` to the bucket, flushing as it fills.
  void addGradient(GradOp gradOp, const ParamLocation &slot);
  void flush();
  /// Issues one collective on [lo, hi) at the builder's insertion point.
  void issue(PartitionOp group, int64_t lo, int64_t hi, ArrayRef<Piece> pieces,
             bool quantizedBucket = false);
  /// Whether qgZ quantizes the gradient of `gradOp` (DeepSpeed's rule per
  /// tensor: not 1-D, and a multiple of twice the world size).
  bool isQuantizable(GradOp gradOp) const;
  void emitWait(Pending &p);
  void emitFrees(ArrayRef<Piece> pieces);
  void tag(Operation *op) {
    // Stages 0-1 communicate only at the accumulation boundary.
    if (schedule.getStage() <= 1)
      markBoundary(op);
  }

  TrainStepOp step;
  const StepSchedule &schedule;
  int64_t bucketSize;
  bool reduceScatter, overlap, quantized;
  OpBuilder b;
  Bucket bucket;
  std::deque<Pending> pending;
  /// Gradients with users besides zero.grad are not freed by us.
  llvm::DenseSet<Value> sharedGrads;
};

} // namespace

void StepSync::emitFrees(ArrayRef<Piece> pieces) {
  for (const Piece &p : pieces) {
    if (sharedGrads.contains(p.grad))
      continue;
    int64_t n = cast<RankedTensorType>(p.grad.getType()).getNumElements();
    if (p.offset == 0 && p.size == n)
      FreeOp::create(b, p.grad.getLoc(), p.grad, IntegerAttr(), IntegerAttr());
    else
      FreeOp::create(b, p.grad.getLoc(), p.grad, b.getI64IntegerAttr(p.offset),
                     b.getI64IntegerAttr(p.size));
  }
}

void StepSync::emitWait(Pending &p) {
  auto wait = WaitOp::create(b, step.getLoc(), p.token);
  tag(wait);
  emitFrees(p.frees);
}

void StepSync::issue(PartitionOp group, int64_t lo, int64_t hi,
                     ArrayRef<Piece> pieces, bool quantizedBucket) {
  Location loc = pieces.empty() ? group.getLoc() : pieces.front().grad.getLoc();
  // Two bucket buffers: bucket k reuses the buffer of bucket k-2.
  if (overlap && pending.size() >= 2) {
    emitWait(pending.front());
    pending.pop_front();
  }
  Type tokenType = overlap ? TokenType::get(b.getContext()) : Type();
  auto groupRef = FlatSymbolRefAttr::get(group.getSymNameAttr());
  auto begin = b.getI64IntegerAttr(lo), end = b.getI64IntegerAttr(hi);
  auto grads = BufferKindAttr::get(b.getContext(), BufferKind::grads);
  Operation *op;
  if (schedule.getStage() == 0) {
    op = AllReduceOp::create(
        b, loc, Type(), tokenType,
        ReduceKindAttr::get(b.getContext(), ReduceKind::sum), Value(), groupRef,
        grads, begin, end, UnitAttr(), RankSetKindAttr());
  } else {
    SmallVector<Value> sources;
    SmallVector<int64_t> offsets;
    for (const Piece &p : pieces) {
      sources.push_back(p.grad);
      offsets.push_back(p.offset);
    }
    BufferKindAttr buffer = schedule.getStage() == 1 ? grads : BufferKindAttr();
    auto offsetsAttr = b.getDenseI64ArrayAttr(offsets);
    if (reduceScatter)
      op = ReduceScatterOp::create(
          b, loc, tokenType, groupRef, buffer, begin, end, sources, offsetsAttr,
          PhaseAttr::get(b.getContext(), Phase::micro_step),
          quantizedBucket ? b.getUnitAttr() : UnitAttr());
    else
      op = ReduceOp::create(b, loc, tokenType, groupRef, buffer, begin, end,
                            sources, offsetsAttr);
  }
  tag(op);
  SmallVector<Piece> frees(schedule.getStage() >= 2 ? pieces
                                                    : ArrayRef<Piece>());
  if (overlap)
    pending.push_back({op->getResult(op->getNumResults() - 1), frees});
  else
    emitFrees(frees);
}

void StepSync::flush() {
  if (bucket.empty())
    return;
  issue(bucket.group, bucket.lo, bucket.hi, bucket.pieces, bucket.quantized);
  bucket = Bucket();
}

bool StepSync::isQuantizable(GradOp gradOp) const {
  if (!quantized)
    return false;
  auto type = cast<RankedTensorType>(gradOp.getGrad().getType());
  return type.getRank() > 1 &&
         type.getNumElements() % (2 * schedule.getWorldSize()) == 0;
}

void StepSync::addGradient(GradOp gradOp, const ParamLocation &slot) {
  int64_t a = slot.offset, e = slot.offset + slot.numel;
  bool quantizable = isQuantizable(gradOp);
  bool sameKind = !bucket.empty() && bucket.group == slot.partition &&
                  bucket.quantized == quantizable;
  bool adjacentBelow = sameKind && e == bucket.lo;
  bool adjacentAbove = sameKind && a == bucket.hi;
  // Reduction ranges are contiguous: a gradient that does not extend the
  // bucket (tied weights, another group, one that qgZ quantizes while the
  // bucket's are not, or the reverse) closes it where the last one ended.
  if (!bucket.empty() && !adjacentBelow && !adjacentAbove)
    flush();
  b.setInsertionPointAfter(gradOp);
  Value g = gradOp.getGrad();
  // Gradients complete in reverse layout order, so buckets grow downward.
  bool downward = !adjacentAbove;
  while (a < e) {
    if (bucket.empty()) {
      bucket.group = slot.partition;
      bucket.quantized = quantizable;
      bucket.lo = bucket.hi = downward ? e : a;
    }
    int64_t take = std::min(bucketSize - bucket.size(), e - a);
    if (downward) {
      bucket.pieces.insert(bucket.pieces.begin(),
                           Piece{g, e - take - slot.offset, take});
      bucket.lo -= take;
      e -= take;
    } else {
      bucket.pieces.push_back(Piece{g, a - slot.offset, take});
      bucket.hi += take;
      a += take;
    }
    if (bucket.size() >= bucketSize)
      flush();
  }
}

LogicalResult StepSync::run() {
  auto module = step->getParentOfType<ModuleOp>();
  Block &body = step.getBodyBlock();
  SmallVector<GradOp> grads(body.getOps<GradOp>());
  if (grads.empty())
    return mlir::emitError(step.getLoc())
           << "train step @" << step.getSymName() << " "
           << ("has no zero.grad: run zero-autodiff before "
               "zero-grad-sync");
  for (GradOp g : grads) {
    if (!schedule.lookupParam(g.getParamAttr().getValue()))
      return g.emitOpError("parameter ")
             << g.getParamAttr() << " is in no zero.partition";
    for (Operation *user : g.getGrad().getUsers())
      if (!isa<GradOp>(user))
        sharedGrads.insert(g.getGrad());
  }

  if (schedule.getStage() == 1) {
    // Gradients stay whole in the full buffer until the backward is done;
    // frozen partitions have none.
    b.setInsertionPointAfter(grads.back());
    for (PartitionOp group : module.getOps<PartitionOp>())
      for (int64_t lo = 0, hi; !group.getFrozen() && lo < group.getNumelValue();
           lo = hi) {
        // lo + bucketSize may overflow int64: clamp the size first.
        hi = lo + std::min(bucketSize, group.getNumelValue() - lo);
        issue(group, lo, hi, {});
      }
  } else {
    for (GradOp g : grads)
      addGradient(g, *schedule.lookupParam(g.getParamAttr().getValue()));
    flush();
  }
  // The optimizer reads the reduced gradients: wait for everything first.
  b.setInsertionPoint(getOptimizerInsertionPoint(body));
  for (Pending &p : pending)
    emitWait(p);
  pending.clear();
  return success();
}

namespace {
struct ZeroGradSyncPass
    : public mlir::zero::impl::ZeroGradSyncPassBase<ZeroGradSyncPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (reduceBucketSize < 1) {
      mlir::emitError(module.getLoc(),
                      "zero-grad-sync: reduce-bucket-size must be positive, "
                      "got ")
          << reduceBucketSize.getValue();
      return signalPassFailure();
    }
    if (gradientAccumulationSteps < 1) {
      mlir::emitError(module.getLoc(),
                      "zero-grad-sync: gradient-accumulation-steps must be "
                      ">= 1, got ")
          << gradientAccumulationSteps.getValue();
      return signalPassFailure();
    }
    if (gradientAccumulationSteps > kMaxAccumulationSteps) {
      mlir::emitError(module.getLoc(),
                      "zero-grad-sync: gradient-accumulation-steps must be at "
                      "most ")
          << kMaxAccumulationSteps << ", got "
          << gradientAccumulationSteps.getValue();
      return signalPassFailure();
    }
    for (TrainStepOp step : module.getOps<TrainStepOp>()) {
      if (failed(getPartitionedSchedule(step, "zero-grad-sync")))
        return signalPassFailure();
      // Gradient reductions (not the optimizer's all-reduce of its stats).
      bool synchronized = false;
      step.getBodyBlock().walk([&](Operation *op) {
        auto allReduce = dyn_cast<AllReduceOp>(op);
        synchronized |= isa<ReduceScatterOp, ReduceOp>(op) ||
                        (allReduce && !allReduce.getInput());
      });
      if (synchronized) {
        mlir::emitError(step.getLoc())
            << "train step @" << step.getSymName() << " "
            << ("gradients are already synchronized");
        return signalPassFailure();
      }
      // Each micro step sees 1/K of the rank's batch.
      int64_t k = gradientAccumulationSteps;
      ScheduleAttr attr = step.getScheduleAttr();
      int64_t global = attr.getGlobalBatch(), n = attr.getWorldSize();
      int64_t dp = attr.getDataParallelSize();
      if (global % (dp * k) != 0) {
        mlir::emitError(step.getLoc())
            << "train step @" << step.getSymName() << " " << ("global batch ")
            << global << " is not divisible by world-size " << n
            << (dp != n ? " / sp-size " + std::to_string(n / dp) : "")
            << " x gradient-accumulation-steps " << k << " = " << dp * k;
        return signalPassFailure();
      }
      if (failed(divideBatch(step, k)))
        return signalPassFailure();
      step.setScheduleAttr(ScheduleAttr::get(&getContext(), attr.getStage(), n,
                                             global, k, attr.getRanksPerNode(),
                                             attr.getMesh()));
      FailureOr<StepSchedule> schedule = StepSchedule::get(step);
      if (failed(schedule))
        return signalPassFailure();
      FailureOr<bool> quantize = resolveQuantizedGradients(*schedule);
      if (failed(quantize) ||
          failed(StepSync(step, *schedule, reduceBucketSize, reduceScatter,
                          overlapComm, *quantize)
                     .run()))
        return signalPassFailure();
    }
  }

  /// quantized-gradients (ZeRO++ qgZ): DeepSpeed's rules. Stage 3 with
  /// reduce-scatter, not with MiCS (DeepSpeed's MiCS optimizer never takes
  /// the all-to-all path). On one node
  /// DeepSpeed reduces with the plain reduce-scatter, and so do we, with a
  /// warning.
  FailureOr<bool> resolveQuantizedGradients(const StepSchedule &schedule) {
    if (!quantizedGradients)
      return false;
    TrainStepOp step = schedule.getStep();
    auto fail = [&]() {
      return step.emitOpError("zero-grad-sync: quantized-gradients (qgZ) ");
    };
    // DeepSpeed's rules for qgZ (zero_rt/variants.h).
    zrt_variant_config variants = {};
    variants.stage = schedule.getStage();
    variants.world_size = schedule.getWorldSize();
    variants.hpz_partition_size = schedule.getHpzPartitionSize();
    variants.mics_shard_size = schedule.getMicsShardSize();
    variants.quantized_gradients = 1;
    variants.reduce_scatter = reduceScatter;
    auto breaks = [&](zrt_variant_rule rule) {
      return zrt_variant_breaks(&variants, rule) != 0;
    };
    if (breaks(ZRT_QGZ_NEEDS_STAGE3)) {
      fail() << "needs stage 3, the step is stage " << schedule.getStage();
      return failure();
    }
    if (breaks(ZRT_QGZ_NEEDS_REDUCE_SCATTER)) {
      fail() << "replaces the gradient reduce-scatter; it does not combine "
                "with reduce-scatter=false";
      return failure();
    }
    if (breaks(ZRT_QGZ_EXCLUDES_MICS)) {
      fail() << "does not combine with MiCS (mics_shard_size "
             << schedule.getMicsShardSize()
             << "): DeepSpeed's MiCS reduces with the plain reduce-scatter";
      return failure();
    }
    zrt_rank_set world = {0, 1, schedule.getWorldSize()};
    if (schedule.getMembersPerNode(world) >= world.size) {
      mlir::emitWarning(step.getLoc(),
                        "zero-grad-sync: quantized-gradients (qgZ) falls back "
                        "to the plain reduce-scatter: the ")
          << world.size << " ranks are on one node";
      return false;
    }
    return true;
  }
};
} // namespace
