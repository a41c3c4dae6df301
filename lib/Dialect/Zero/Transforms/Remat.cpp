//===- Remat.cpp - Recompute forward values before their backward uses ----===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/Transforms/Remat.h"
#include "zero/Dialect/Zero/Transforms/Passes.h"

#include "ScheduleUtils.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"

namespace mlir::zero {
#define GEN_PASS_DEF_ZEROREMATPASS
#include "zero/Dialect/Zero/Transforms/Passes.h.inc"
} // namespace mlir::zero

using namespace mlir;
using namespace mlir::zero;
using namespace mlir::zero::schedule;

namespace {

/// The forward ops from the first get_param of a parameter group to the
/// first get_param of the next group.
struct Segment {
  std::string key;
  bool isBlock = false;
  SmallVector<Operation *> ops;
};

/// Cuts the forward (the ops before `backwardStart`) into segments. A group
/// seen again later (a tied weight) starts a segment that is not a block.
SmallVector<Segment> getSegments(Block &body, Operation *backwardStart) {
  SmallVector<Segment> segments;
  llvm::StringSet<> seen;
  for (Operation &op : body) {
    if (&op == backwardStart)
      break;
    if (auto get = dyn_cast<GetParamOp>(op)) {
      std::string key = layerKey(get.getParam());
      if (segments.empty() || segments.back().key != key) {
        bool isNew = seen.insert(key).second;
        segments.push_back({key, isNew && isBlockKey(key), {}});
      }
    }
    if (!segments.empty())
      segments.back().ops.push_back(&op);
  }
  return segments;
}

enum class Policy { none, layer, selective, op };

struct ZeroRematPass
    : public mlir::zero::impl::ZeroRematPassBase<ZeroRematPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<Policy> p = llvm::StringSwitch<std::optional<Policy>>(policy)
                                  .Case("none", Policy::none)
                                  .Case("layer", Policy::layer)
                                  .Case("selective", Policy::selective)
                                  .Case("op", Policy::op)
                                  .Default(std::nullopt);
    if (!p) {
      mlir::emitError(module.getLoc())
          << "zero-remat: policy must be none, layer, selective or op, got '"
          << policy << "'"
          << (policy == "auto" ? " (auto is zero-pipeline's remat=auto, which "
                                 "needs a memory-budget)"
                               : "");
      return signalPassFailure();
    }
    if (*p == Policy::none)
      return;
    for (TrainStepOp step : module.getOps<TrainStepOp>())
      if (failed(runOnStep(step, *p)))
        return signalPassFailure();
  }

  LogicalResult runOnStep(TrainStepOp step, Policy p);
};

LogicalResult ZeroRematPass::runOnStep(TrainStepOp step, Policy p) {
  Block &body = step.getBodyBlock();
  Operation *backwardStart = findBackwardStart(body);
  if (!backwardStart)
    return mlir::emitError(step.getLoc())
           << "train step @" << step.getSymName()
           << ": zero-remat needs a differentiated train step (run "
              "zero-autodiff first)";
  if (step.getScheduleAttr())
    return mlir::emitError(step.getLoc())
           << "train step @" << step.getSymName()
           << ": zero-remat runs before zero-partition (the recomputed ops "
              "must get their stage-3 gathers from zero-param-gather)";

  SmallVector<Segment> segments = getSegments(body, backwardStart);
  SmallVector<Segment *> blocks;
  for (Segment &s : segments)
    if (s.isBlock)
      blocks.push_back(&s);
  if (blocks.empty()) {
    mlir::emitWarning(step.getLoc())
        << "train step @" << step.getSymName()
        << ": zero-remat found no transformer block (a parameter group "
           "named like transformer.h.N) to recompute";
    return success();
  }
  if (firstBlocks < -1)
    return mlir::emitError(step.getLoc())
           << "train step @" << step.getSymName()
           << ": zero-remat: first-blocks must be >= 0 (or -1: unset), got "
           << firstBlocks.getValue();
  if (firstBlocks >= 0 && !this->blocks.empty())
    return mlir::emitError(step.getLoc())
           << "train step @" << step.getSymName()
           << ": zero-remat: give blocks or first-blocks, not both";
  SmallVector<Segment *> chosen;
  if (firstBlocks >= 0)
    chosen.assign(blocks.begin(),
                  blocks.begin() +
                      std::min<int64_t>(firstBlocks, blocks.size()));
  else if (this->blocks.empty())
    chosen = blocks;
  for (int64_t b : this->blocks) {
    if (b < 0 || b >= static_cast<int64_t>(blocks.size()))
      return mlir::emitError(step.getLoc())
             << "train step @" << step.getSymName() << ": zero-remat: block "
             << b << " does not exist (the step has " << blocks.size()
             << " blocks, 0-" << blocks.size() - 1 << ")";
    if (!llvm::is_contained(chosen, blocks[b]))
      chosen.push_back(blocks[b]);
  }

  llvm::DenseSet<Operation *> forward;
  for (Operation &op : body) {
    if (&op == backwardStart)
      break;
    forward.insert(&op);
  }
  llvm::DenseMap<Operation *, int64_t> position = numberOps(body);
  auto *dialect = step->getContext()->getLoadedDialect<ZeroDialect>();

  for (Segment *seg : chosen) {
    llvm::DenseSet<Operation *> inSegment(seg->ops.begin(), seg->ops.end());
    // torchtitan's op-level policy counts the block's matrix products in
    // forward order and saves the first, third, ... and attention's output:
    // every second product is recomputed to drop its output.
    llvm::DenseSet<Operation *> opKept;
    if (p == Policy::op) {
      int64_t matmuls = 0;
      for (Operation *op : seg->ops)
        if (op->hasTrait<nn::OpTrait::Attention>() ||
            (op->hasTrait<nn::OpTrait::MatrixProduct>() && matmuls++ % 2 == 0))
          opKept.insert(op);
    }
    // Values kept from the forward to the backward: parameters, the block's
    // outputs, what the policy keeps, and what cannot be cloned.
    auto isKept = [&](Operation *op) {
      if (!nn::isNNOp(op) || op->getNumRegions() != 0 ||
          !isMemoryEffectFree(op))
        return true;
      // A tiled MLP is products too (and recomputes its tiles already), and
      // so are an MoE block's grouped products.
      if (p == Policy::selective &&
          (op->hasTrait<nn::OpTrait::MatrixProduct>() ||
           op->hasTrait<nn::OpTrait::GroupedMatrixProducts>()))
        return true;
      if (opKept.contains(op))
        return true;
      for (Operation *user : op->getUsers())
        if (forward.contains(user) && !inSegment.contains(user))
          return true;
      return false;
    };
    llvm::DenseSet<Operation *> recomputable;
    for (Operation *op : seg->ops)
      if (!isKept(op))
        recomputable.insert(op);

    // The recomputed ops: those with a backward use, and what they need.
    llvm::DenseSet<Operation *> needed;
    SmallVector<Operation *> worklist;
    Operation *insertionPoint = nullptr;
    for (Operation *op : seg->ops) {
      if (!recomputable.contains(op))
        continue;
      for (Operation *user : op->getUsers()) {
        if (forward.contains(user))
          continue;
        if (needed.insert(op).second)
          worklist.push_back(op);
        // Clones are never users here: they use clones of this segment.
        if (!insertionPoint ||
            position.lookup(user) < position.lookup(insertionPoint))
          insertionPoint = user;
      }
    }
    while (!worklist.empty()) {
      Operation *op = worklist.pop_back_val();
      for (Value v : op->getOperands())
        if (Operation *def = v.getDefiningOp();
            def && recomputable.contains(def) && needed.insert(def).second)
          worklist.push_back(def);
    }
    if (needed.empty())
      continue;

    OpBuilder b(insertionPoint);
    IRMapping mapping;
    for (Operation *op : seg->ops) {
      if (!needed.contains(op))
        continue;
      Operation *clone = b.clone(*op, mapping);
      dialect->getRecomputeAttrHelper().setAttr(clone, b.getUnitAttr());
      for (auto [from, to] : llvm::zip(op->getResults(), clone->getResults()))
        from.replaceUsesWithIf(to, [&](OpOperand &use) {
          return !forward.contains(use.getOwner()) && use.getOwner() != clone;
        });
    }
  }
  return success();
}

} // namespace

SmallVector<std::string> mlir::zero::getRematBlocks(TrainStepOp step) {
  SmallVector<std::string> keys;
  Block &body = step.getBodyBlock();
  for (const Segment &s : getSegments(body, findBackwardStart(body)))
    if (s.isBlock)
      keys.push_back(s.key);
  return keys;
}
