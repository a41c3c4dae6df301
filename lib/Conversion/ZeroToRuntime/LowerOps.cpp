//===- LowerOps.cpp - The runtime call of each op of the step -------------===//
//
// Part of the zero-mlir project.
//
// A compute op is lowered by its RuntimeKernelOpInterface model over the
// pointers of its operands and results; the ZeRO ops (gradient stores,
// collectives, token waits, the loss scaler, the optimizer) are lowered to
// the `zrt_ctx_*` calls of the runtime's context. Views and frees emit
// nothing.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"
#include "zero/Dialect/Zero/Analysis/Muon.h"
#include "zero/Dialect/Zero/IR/Optimizers.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::zero;
using namespace mlir::zero::lowering;

//===----------------------------------------------------------------------===//
// Compute ops
//===----------------------------------------------------------------------===//

namespace mlir::zero::lowering {

/// A compute op's view of the lowering: its planned buffers and the checked
/// runtime calls.
class KernelCalls : public KernelCallBuilder {
public:
  KernelCalls(Lowering &l, ArrayRef<Value> in, ArrayRef<Value> out)
      : l(l), in(in), out(out) {}
  Value operand(unsigned i) override { return in[i]; }
  Value result(unsigned i) override { return out[i]; }
  ArrayRef<Value> operands() override { return in; }
  ArrayRef<Value> results() override { return out; }
  Value i32(int64_t v) override { return l.i32(v); }
  Value i64(int64_t v) override { return l.i64(v); }
  Value f64(double v) override { return l.f64(v); }
  Value dtype(Type elementType) override { return l.dtype(elementType); }
  Value i64Array(ArrayRef<int64_t> values) override {
    return l.i64Array(values);
  }
  Value f32Array(ArrayRef<float> values) override { return l.f32Array(values); }
  Value ptrArray(ArrayRef<Value> ptrs) override { return l.ptrArray(ptrs); }
  Value nullPtr() override {
    return LLVM::ZeroOp::create(l.b, l.loc, l.ptrType());
  }
  FailureOr<Value> record(StringRef name, ArrayRef<Value> fields) override {
    return l.record(name, fields);
  }
  LogicalResult call(StringRef callee, ArrayRef<Value> args) override {
    return l.call(callee, args);
  }

private:
  Lowering &l;
  ArrayRef<Value> in, out;
};

/// A collective's view of the lowering: the planned buffers, its temporary
/// in the step arena, partition indices, token slots and checked calls.
class CollectiveCalls : public CollectiveCallBuilder {
public:
  CollectiveCalls(Lowering &l, Operation *op) : l(l), op(op) {}
  Value context() override { return l.ctx; }
  Value pointer(Value v) override { return l.ptrOrNull(v); }
  Value offsetPointer(Value base, int64_t bytes) override {
    return LLVM::GEPOp::create(l.b, l.loc, l.ptrType(), l.b.getI8Type(), base,
                               ArrayRef<LLVM::GEPArg>{l.i64(bytes)});
  }
  Value temporary(int64_t offset) override {
    return l.ctxPtr(false, l.tempOffsets.lookup(op) + offset);
  }
  int32_t partitionIndex(SymbolRefAttr group) override {
    return l.partitionIndex(group);
  }
  int32_t slotOf(Value token) override { return l.slotOf(token); }
  Value i32(int64_t v) override { return l.i32(v); }
  Value i64(int64_t v) override { return l.i64(v); }
  Value f64(double v) override { return l.f64(v); }
  Value dtype(Type elementType) override { return l.dtype(elementType); }
  const StepSchedule &getSchedule() override { return l.s; }
  bool isCountingLabels() override { return l.countingLabels; }
  LogicalResult call(StringRef callee, ArrayRef<Value> args) override {
    return l.call(callee, args);
  }

private:
  Lowering &l;
  Operation *op;
};

} // namespace mlir::zero::lowering

LogicalResult Lowering::lowerCollective(RuntimeCollectiveOpInterface op) {
  CollectiveCalls calls(*this, op);
  return op.buildCollectiveCall(calls);
}

LogicalResult Lowering::lowerCompute(RuntimeKernelOpInterface op) {
  SmallVector<Value> in, out;
  for (Value v : op->getOperands()) {
    FailureOr<Value> p = ptr(v);
    if (failed(p))
      return failure();
    in.push_back(*p);
  }
  for (Value v : op->getResults()) {
    FailureOr<Value> p = ptr(v);
    if (failed(p))
      return failure();
    out.push_back(*p);
  }
  KernelCalls calls(*this, in, out);
  return op.buildKernelCall(calls);
}

//===----------------------------------------------------------------------===//
// ZeRO ops
//===----------------------------------------------------------------------===//

Value Lowering::ptrOrNull(Value v) {
  FailureOr<Value> r = ptr(v);
  return succeeded(r) ? *r : Value();
}

/// A gradient store into the persistent grads buffer (stages 0-1).
LogicalResult Lowering::lowerGrad(GradOp g) {
  if (s.getStage() >= 2 || s.isGradientInPlace(g))
    return success();
  const ParamLocation *pl = s.lookupParam(g.getParam());
  const PartitionBuffers *pb = s.lookupPartition(pl->partition.getSymName());
  if (elemType(g.getGrad()) != pb->computeType)
    return g.emitOpError("gradient element type differs from the "
                         "partition's compute type");
  Value src = ptrOrNull(g.getGrad());
  if (!src)
    return failure();
  callVoid("zrt_ctx_store_grad",
           {ctx, i32(partitionIndex(pl->partition)), i64(pl->offset), src,
            i64(numel(g.getGrad()))});
  return success();
}

/// The loss scale, the label share, the global sums and the micro share,
/// and the loss returned.
LogicalResult Lowering::lowerLossOp(Operation *op) {
  return TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](LossScaleOp o) -> LogicalResult {
        Value out = ptrOrNull(o.getResult());
        if (!out)
          return failure();
        callVoid("zrt_ctx_loss_scale", {ctx, out});
        return success();
      })
      .Case([&](LabelShareOp o) -> LogicalResult {
        Value out = ptrOrNull(o.getResult());
        if (!out)
          return failure();
        callVoid("zrt_ctx_label_share",
                 {ctx, f64(o.getDivisor().convertToDouble()), out});
        return success();
      })
      .Case([&](StepSumOp o) -> LogicalResult {
        Value out = ptrOrNull(o.getResult());
        if (!out)
          return failure();
        callVoid("zrt_ctx_step_sum", {ctx, i32(o.getIndex()), out});
        return success();
      })
      .Case([&](MicroShareOp o) -> LogicalResult {
        Value out = ptrOrNull(o.getResult());
        if (!out)
          return failure();
        callVoid("zrt_ctx_micro_share",
                 {ctx, f64(o.getDivisor().convertToDouble()), out});
        return success();
      })
      .Case([&](ReturnOp o) -> LogicalResult {
        Value loss = ptrOrNull(o.getLoss());
        if (!loss)
          return failure();
        callVoid("zrt_ctx_set_loss", {ctx, loss});
        return success();
      });
}

/// Muon runs on the device, on matrices each whole in one rank's owned
/// elements: at stage 0 or on one rank every matrix is, and at stages 1-3
/// the partitioner lays each group out so that every matrix lies whole in
/// its owner's shard (`owners`), without gaps when it can and in enlarged
/// slots with gaps otherwise. A matrix across a shard boundary (a partition
/// laid out without owners) is refused with the padding whole-matrix slots
/// would need, as are the offloaded updates, which have no Muon kernel.
LogicalResult Lowering::checkMuonStep(OptimizerStepOp o) {
  if (o.getHost() || o.getSwapAttr() || o.getNewParams())
    return o.emitOpError("muon with offload (its ")
           << (o.getNewParams() ? "staged parameter" : "host optimizer")
           << " update) is not supported: Muon's Newton-Schulz runs on the "
              "device only";
  StringRef group = o.getGroupAttr().getRootReference().getValue();
  std::optional<MuonCrossing> crossing = findMuonCrossing(s, module, group);
  if (!crossing)
    return success();
  // What owner-computes with gaps would pad: layoutMuonSlots over the
  // group's matrices and the rest of its elements.
  PartitionOp part = crossing->group;
  SmallVector<int64_t> elements, flops;
  int64_t muonElements = 0;
  for (ParamOp q : getMuonParams(module)) {
    const ParamLocation *ql = s.lookupParam(q.getSymName());
    if (!ql || ql->partition.getSymName() != group)
      continue;
    ArrayRef<int64_t> shape = q.getComputeTensorType().getShape();
    elements.push_back(q.getNumElements());
    flops.push_back(
        getMuonStepFlops(shape[0], shape[1], o.getOptimizer().getNsSteps()));
    muonElements += q.getNumElements();
  }
  MuonSlotLayout slots =
      layoutMuonSlots(elements, flops, part.getNumelValue() - muonElements,
                      part.getWorldSizeValue(), int64_t(part.getAlignment()));
  int64_t slot = crossing->slot, begin = crossing->begin;
  return o.emitOpError("muon at ZeRO stage ")
         << s.getStage() << " on " << s.getWorldSize() << " ranks: matrix @"
         << crossing->param.getSymName() << " (elements [" << begin << ", "
         << crossing->end << ")) crosses the shard boundary at "
         << (begin / slot + 1) * slot << " of group @" << group
         << ": its order does not put each Muon matrix whole in one rank's "
            "shard of "
         << slot
         << " elements, and it has no owners (zero-partition lays "
            "such a group out with gaps: slots of "
         << slots.slot << ", " << slots.padding << " elements of padding)";
}

/// Adafactor runs on the device over each rank's owned elements, its sums
/// all-reduced over the world: the offloaded updates (no host or NVMe
/// kernel), MiCS shard groups and expert partitions (other rank sets), and
/// padded parameters (their padding rows would count in the statistics)
/// are refused.
LogicalResult Lowering::checkAdafactorStep(OptimizerStepOp o) {
  if (o.getHost() || o.getSwapAttr() || o.getNewParams())
    return o.emitOpError("adafactor with offload (its ")
           << (o.getNewParams()  ? "staged parameter"
               : o.getSwapAttr() ? "NVMe optimizer"
                                 : "host optimizer")
           << " update) is not supported: Adafactor's phases run on the "
              "device only";
  if (s.getMicsShardSize() > 0 || s.getExpertParallel() > 1)
    return o.emitOpError("adafactor with ")
           << (s.getMicsShardSize() > 0 ? "MiCS shard groups"
                                        : "expert parallelism")
           << " is not supported: its sums are all-reduced over the world";
  for (ParamOp p : module.getOps<ParamOp>()) {
    const ParamLocation *loc = s.lookupParam(p.getSymName());
    if (!loc || p.getFrozen() ||
        loc->partition.getSymName() !=
            o.getGroupAttr().getRootReference().getValue())
      continue;
    if (p.getRows())
      return o.emitOpError("adafactor: parameter @")
             << p.getSymName()
             << " is padded; its padding rows would count in Adafactor's "
                "row and column statistics";
  }
  return success();
}

/// The overflow check, the loss scaler update and the Adam update.
LogicalResult Lowering::lowerOptimizerOp(Operation *op) {
  return TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](CheckOverflowOp o) -> LogicalResult {
        Value scale = ptrOrNull(o.getLossScale()),
              out = ptrOrNull(o.getResult());
        if (!scale || !out)
          return failure();
        // Combined statistics: the partial ones first, then each
        // partition's accumulated onto them (flag by max, norm by sum).
        bool combined = o.getPartial() != nullptr;
        if (combined) {
          Value partial = ptrOrNull(o.getPartial());
          if (!partial)
            return failure();
          Type f32 = Float32Type::get(o.getContext());
          callVoid("zrt_cast", {dtype(f32), partial, dtype(f32), out, i64(2)});
        }
        for (auto [i, g] : llvm::enumerate(o.getGroups()))
          callVoid("zrt_ctx_check_overflow",
                   {ctx, i32(partitionIndex(cast<SymbolRefAttr>(g))),
                    i32(i == 0 && !combined), scale,
                    f64(o.getDivisor().convertToDouble()), out});
        return success();
      })
      .Case([&](UpdateLossScaleOp o) -> LogicalResult {
        Value stats = ptrOrNull(o.getStats());
        if (!stats)
          return failure();
        FailureOr<Value> skip = call("zrt_ctx_update_loss_scale", {ctx, stats});
        if (failed(skip))
          return failure();
        ptrCache[o.getSkip()] = *skip;
        return success();
      })
      .Case([&](OptimizerStepOp o) -> LogicalResult {
        Value stats = ptrOrNull(o.getStats()),
              scale = ptrOrNull(o.getLossScale());
        auto skip = ptrCache.find(o.getSkip());
        if (!stats || !scale || skip == ptrCache.end())
          return o.emitOpError("needs its zero.update_loss_scale in the same "
                               "function (both run at the step boundary)");
        SmallVector<Value> args = {
            ctx,          i32(partitionIndex(o.getGroupAttr())), stats, scale,
            skip->second, f64(o.getDivisor().convertToDouble())};
        // Muon's entries are AdamW's, whose device body runs zrt_muon on
        // the manifest's Muon matrices (each whole on the rank).
        if (o.getOptimizerKind() == OptimizerKind::muon &&
            failed(checkMuonStep(o)))
          return failure();
        // Adafactor's entries are Adam's, whose device body runs
        // Adafactor.h's phases on the manifest's tensors.
        if (o.getOptimizerKind() == OptimizerKind::adafactor &&
            failed(checkAdafactorStep(o)))
          return failure();
        // The optimizer's entries (optimizers.def) take Adam's operands.
        OptimizerEntries entries = getOptimizerEntries(o.getOptimizerKind());
        if (o.getNewParams()) {
          Value out = ptrOrNull(o.getNewParams());
          if (!out)
            return failure();
          args.push_back(out);
          callVoid(entries.staged, args);
          return success();
        }
        if (NvmeSwapAttr swap = o.getSwapAttr()) {
          args.append({i64(swap.getChunk()),
                       i32(static_cast<int32_t>(swap.getBuffers()))});
          callVoid(entries.nvme, args);
          return success();
        }
        callVoid(o.getHost() ? entries.host : entries.device, args);
        return success();
      });
}

/// Copies between memories (optimizer and parameter offload).
LogicalResult Lowering::lowerTransfer(TransferOp o) {
  // A parameter shard on NVMe: through its swap buffer, from or to
  // the staged device buffer or a host buffer.
  if (ParamSwapAttr swap = o.getSwapAttr()) {
    Value ptr;
    if (Value staged = o.getStagedValue()) {
      ptr = ptrOrNull(staged);
      if (!ptr)
        return failure();
    } else {
      ptr = LLVM::ZeroOp::create(b, loc, ptrType());
    }
    bool toFile = o.getTarget() == BufferKind::params;
    int32_t from =
        toFile && o.getSource() ? static_cast<int32_t>(*o.getSource()) : -1;
    callVoid("zrt_ctx_swap_params",
             {ctx, i32(partitionIndex(o.getGroupAttr())), ptr, i32(from),
              i32(toFile ? 1 : 0), i32(static_cast<int32_t>(swap.getBuffer())),
              i64(swap.getBufferBytes()), i32(slotOf(o.getToken()))});
    return success();
  }
  if (Value staged = o.getStagedValue()) {
    Value ptr = ptrOrNull(staged);
    if (!ptr)
      return failure();
    callVoid("zrt_ctx_stage_params",
             {ctx, i32(partitionIndex(o.getGroupAttr())), ptr,
              i32(o.getInput() ? 1 : 0), i32(slotOf(o.getToken()))});
    return success();
  }
  // Without a range, the whole layout: the rank's whole owned part.
  const PartitionBuffers *part = s.lookupPartition(o.getGroupAttr());
  if (!part)
    return o.emitOpError("copies a partition the schedule lacks");
  auto [begin, end] = o.getElementRange().value_or(
      std::make_pair(int64_t(0), part->partition.getNumelValue()));
  callVoid("zrt_ctx_transfer",
           {ctx, i32(partitionIndex(o.getGroupAttr())),
            i32(static_cast<int32_t>(*o.getSource())),
            i32(static_cast<int32_t>(*o.getTarget())), i64(begin), i64(end),
            i32(slotOf(o.getToken()))});
  return success();
}

/// Copies of saved activations between the step arena and their places in
/// the host arena (activation offload).
LogicalResult Lowering::lowerActivationCopy(ActivationCopyOpInterface o) {
  Value host = o.getHostValue();
  auto place = plan.hostActivations.find(host.getDefiningOp());
  if (place == plan.hostActivations.end())
    return o->emitOpError("has no place in the host arena's plan");
  Value device = ptrOrNull(o.getDeviceValue());
  if (!device)
    return failure();
  callVoid("zrt_ctx_copy_activation",
           {ctx, device, i64(place->second),
            i64(getTensorBytes(host.getType())), i32(o.copiesToHost() ? 1 : 0),
            i32(slotOf(o.getToken()))});
  return success();
}

LogicalResult Lowering::lowerOp(Operation *op) {
  loc = op->getLoc();
  current = op;
  if (isViewOp(op) || isa<FreeOp>(op))
    return success();
  if (auto kernel = dyn_cast<RuntimeKernelOpInterface>(op))
    return lowerCompute(kernel);
  if (auto collective = dyn_cast<RuntimeCollectiveOpInterface>(op))
    return lowerCollective(collective);
  if (!isa<ZeroDialect>(op->getDialect()))
    return op->emitOpError(
        "has no runtime kernel model (RuntimeKernelOpInterface), so "
        "convert-zero-to-runtime cannot lower it");
  return TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](GradOp o) { return lowerGrad(o); })
      .Case<LossScaleOp, LabelShareOp, StepSumOp, MicroShareOp, ReturnOp>(
          [&](Operation *o) { return lowerLossOp(o); })
      .Case([&](WaitOp o) -> LogicalResult {
        callVoid("zrt_ctx_wait", {ctx, i32(slotOf(o.getToken()))});
        return success();
      })
      .Case<CheckOverflowOp, UpdateLossScaleOp, OptimizerStepOp>(
          [&](Operation *o) { return lowerOptimizerOp(o); })
      .Case([&](TransferOp o) { return lowerTransfer(o); })
      .Case<OffloadActivationOp, ReloadActivationOp>([&](Operation *o) {
        return lowerActivationCopy(cast<ActivationCopyOpInterface>(o));
      })
      .Default([&](Operation *op) {
        return op->emitOpError("has no lowering to the runtime");
      });
}
