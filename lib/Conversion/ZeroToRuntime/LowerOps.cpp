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
  LogicalResult call(StringRef callee, ArrayRef<Value> args) override {
    return l.call(callee, args);
  }

private:
  Lowering &l;
  ArrayRef<Value> in, out;
};

} // namespace mlir::zero::lowering

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

template <typename OpT>
LogicalResult Lowering::lowerBucketReduction(OpT op, bool toOwners) {
  Value bucket = ctxPtr(false, tempOffsets.lookup(op));
  int32_t part = partitionIndex(op.getGroupAttr());
  int64_t at = 0, total = op.getEnd() - op.getBegin();
  for (auto [src, off] : llvm::zip(op.getSources(), op.getSourceOffsets())) {
    int64_t take = std::min(numel(src) - off, total - at);
    FailureOr<Value> base = ptr(src);
    if (failed(base))
      return failure();
    Value from = LLVM::GEPOp::create(
        b, loc, ptrType(), b.getI8Type(), *base,
        ArrayRef<LLVM::GEPArg>{i64(off * getElementBytes(elemType(src)))});
    callVoid("zrt_ctx_bucket_add",
             {ctx, i32(part), bucket, i64(at), from, i64(take)});
    at += take;
  }
  if (cast<CollectiveOpInterface>(op.getOperation()).getQuantizationBits()) {
    // qgZ: the staging follows the bucket in the same temporary.
    FailureOr<StepSchedule::ReductionTemp> temp =
        s.getReductionTemp(op.getOperation());
    if (failed(temp))
      return op.emitOpError("its bucket and staging overflow int64");
    Value staging = ctxPtr(false, tempOffsets.lookup(op) + temp->stagingOffset);
    callVoid("zrt_ctx_reduce_bucket_quantized",
             {ctx, i32(part), i64(op.getBegin()), i64(op.getEnd()), bucket,
              staging, i32(slotOf(op.getToken()))});
    return success();
  }
  callVoid("zrt_ctx_reduce_bucket",
           {ctx, i32(part), i64(op.getBegin()), i64(op.getEnd()), bucket,
            i32(toOwners), i32(slotOf(op.getToken()))});
  return success();
}

LogicalResult Lowering::lowerStage3Gather(Operation *op, int32_t part,
                                          Value shard, Value result,
                                          int32_t slot) {
  FailureOr<Value> out = ptr(result);
  if (failed(out))
    return failure();
  if (cast<CollectiveOpInterface>(op).getQuantizationBits()) {
    Value staging = ctxPtr(false, tempOffsets.lookup(op));
    callVoid("zrt_ctx_gather_quantized",
             {ctx, i32(part), staging, *out, i32(slot)});
    return success();
  }
  if (!shard) {
    callVoid("zrt_ctx_gather_partition", {ctx, i32(part), *out, i32(slot)});
    return success();
  }
  FailureOr<Value> in = ptr(shard);
  if (failed(in))
    return failure();
  callVoid("zrt_ctx_gather_staged", {ctx, i32(part), *in, *out, i32(slot)});
  return success();
}

LogicalResult Lowering::lowerSecondaryGather(int32_t part, Value result,
                                             int32_t slot) {
  FailureOr<Value> out = ptr(result);
  if (failed(out))
    return failure();
  callVoid("zrt_ctx_gather_secondary", {ctx, i32(part), *out, i32(slot)});
  return success();
}

LogicalResult Lowering::lowerOp(Operation *op) {
  loc = op->getLoc();
  current = op;
  if (isViewOp(op) || isa<FreeOp>(op))
    return success();
  if (auto kernel = dyn_cast<RuntimeKernelOpInterface>(op))
    return lowerCompute(kernel);
  if (!isa<ZeroDialect>(op->getDialect()))
    return op->emitOpError(
        "has no runtime kernel model (RuntimeKernelOpInterface), so "
        "convert-zero-to-runtime cannot lower it");
  auto p = [&](Value v) -> Value {
    FailureOr<Value> r = ptr(v);
    return succeeded(r) ? *r : Value();
  };
  return TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](GradOp g) -> LogicalResult {
        if (s.getStage() >= 2 || s.isGradientInPlace(g))
          return success();
        const ParamLocation *pl = s.lookupParam(g.getParam());
        const PartitionBuffers *pb =
            s.lookupPartition(pl->partition.getSymName());
        if (elemType(g.getGrad()) != pb->computeType)
          return g.emitOpError("gradient element type differs from the "
                               "partition's compute type");
        Value src = p(g.getGrad());
        if (!src)
          return failure();
        callVoid("zrt_ctx_store_grad",
                 {ctx, i32(partitionIndex(pl->partition)), i64(pl->offset), src,
                  i64(numel(g.getGrad()))});
        return success();
      })
      .Case([&](LossScaleOp o) -> LogicalResult {
        Value out = p(o.getResult());
        if (!out)
          return failure();
        callVoid("zrt_ctx_loss_scale", {ctx, out});
        return success();
      })
      .Case([&](CountLabelsOp o) -> LogicalResult {
        // The label count function counts each micro batch's labels; the
        // first micro step sums the counts over the ranks.
        if (countingLabels) {
          Value labels = p(o.getLabels());
          if (!labels)
            return failure();
          callVoid("zrt_ctx_count_labels",
                   {ctx, dtype(elemType(o.getLabels())), labels,
                    i64(numel(o.getLabels())), i64(o.getIgnoreIndex())});
          return success();
        }
        Value out = p(o.getCount());
        if (!out)
          return failure();
        callVoid("zrt_ctx_all_reduce_labels", {ctx, out});
        return success();
      })
      .Case([&](LabelShareOp o) -> LogicalResult {
        Value out = p(o.getResult());
        if (!out)
          return failure();
        callVoid("zrt_ctx_label_share",
                 {ctx, f64(o.getDivisor().convertToDouble()), out});
        return success();
      })
      .Case<ReduceScatterOp, ReduceOp>([&](auto o) -> LogicalResult {
        // In place (stage 1; with reduce-scatter=false too, since the owners
        // end up with the same sums) the runtime reduce-scatters the range of
        // the persistent grads buffer; a reduce's bytes count as a reduce.
        if (o.getBuffer()) {
          callVoid(std::is_same_v<decltype(o), ReduceOp>
                       ? "zrt_ctx_reduce_grads"
                       : "zrt_ctx_reduce_scatter_grads",
                   {ctx, i32(partitionIndex(o.getGroupAttr())),
                    i64(o.getBegin()), i64(o.getEnd()),
                    i32(slotOf(o.getToken()))});
          return success();
        }
        return lowerBucketReduction(
            o, /*toOwners=*/std::is_same_v<decltype(o), ReduceOp>);
      })
      .Case([&](AllReduceOp o) -> LogicalResult {
        int32_t slot = slotOf(o.getToken());
        if (o.getOverReplicas()) {
          callVoid("zrt_ctx_all_reduce_replicas",
                   {ctx, i32(partitionIndex(o.getGroupAttr())),
                    i64(*o.getBegin()), i64(*o.getEnd()), i32(slot)});
          return success();
        }
        if (o.getBuffer()) {
          callVoid("zrt_ctx_all_reduce_grads",
                   {ctx, i32(partitionIndex(o.getGroupAttr())),
                    i64(*o.getBegin()), i64(*o.getEnd()), i32(slot)});
          return success();
        }
        if (o.getKind() != ReduceKind::overflow_norm)
          return o.emitOpError("only the overflow_norm value form lowers to "
                               "the runtime");
        Value in = p(o.getInput()), out = p(o.getResult());
        if (!in || !out)
          return failure();
        callVoid("zrt_ctx_all_reduce_stats", {ctx, in, out, i32(slot)});
        return success();
      })
      .Case([&](StoreSecondaryOp o) -> LogicalResult {
        Value full = p(o.getFull());
        if (!full)
          return failure();
        callVoid("zrt_ctx_store_secondary",
                 {ctx, i32(partitionIndex(o.getGroupAttr())), full});
        return success();
      })
      .Case([&](AllGatherOp o) -> LogicalResult {
        int32_t part = partitionIndex(o.getGroupAttr());
        int32_t slot = slotOf(o.getToken());
        if (o.getSecondary())
          return lowerSecondaryGather(part, o.getResult(), slot);
        if (o.getBuffer()) {
          callVoid("zrt_ctx_all_gather_params",
                   {ctx, i32(part), i64(*o.getBegin()), i64(*o.getEnd()),
                    i32(slot)});
          return success();
        }
        return lowerStage3Gather(o, part, o.getShard(), o.getResult(), slot);
      })
      .Case([&](PrefetchOp o) -> LogicalResult {
        if (o.getSecondary())
          return lowerSecondaryGather(partitionIndex(o.getGroupAttr()),
                                      o.getResult(), slotOf(o.getToken()));
        return lowerStage3Gather(o, partitionIndex(o.getGroupAttr()),
                                 o.getShard(), o.getResult(),
                                 slotOf(o.getToken()));
      })
      .Case([&](WaitOp o) -> LogicalResult {
        callVoid("zrt_ctx_wait", {ctx, i32(slotOf(o.getToken()))});
        return success();
      })
      .Case([&](CheckOverflowOp o) -> LogicalResult {
        Value scale = p(o.getLossScale()), out = p(o.getResult());
        if (!scale || !out)
          return failure();
        for (auto [i, g] : llvm::enumerate(o.getGroups()))
          callVoid("zrt_ctx_check_overflow",
                   {ctx, i32(partitionIndex(cast<SymbolRefAttr>(g))),
                    i32(i == 0), scale, f64(o.getDivisor().convertToDouble()),
                    out});
        return success();
      })
      .Case([&](UpdateLossScaleOp o) -> LogicalResult {
        Value stats = p(o.getStats());
        if (!stats)
          return failure();
        FailureOr<Value> skip = call("zrt_ctx_update_loss_scale", {ctx, stats});
        if (failed(skip))
          return failure();
        ptrCache[o.getSkip()] = *skip;
        return success();
      })
      .Case([&](AdamOp o) -> LogicalResult {
        Value stats = p(o.getStats()), scale = p(o.getLossScale());
        auto skip = ptrCache.find(o.getSkip());
        if (!stats || !scale || skip == ptrCache.end())
          return o.emitOpError("needs its zero.update_loss_scale in the same "
                               "function (both run at the step boundary)");
        SmallVector<Value> args = {
            ctx,          i32(partitionIndex(o.getGroupAttr())), stats, scale,
            skip->second, f64(o.getDivisor().convertToDouble())};
        if (o.getNewParams()) {
          Value out = p(o.getNewParams());
          if (!out)
            return failure();
          args.push_back(out);
          callVoid("zrt_ctx_adam_staged", args);
          return success();
        }
        if (NvmeSwapAttr swap = o.getSwapAttr()) {
          args.append({i64(swap.getChunk()),
                       i32(static_cast<int32_t>(swap.getBuffers()))});
          callVoid("zrt_ctx_adam_nvme", args);
          return success();
        }
        callVoid(o.getHost() ? "zrt_ctx_adam_host" : "zrt_ctx_adam", args);
        return success();
      })
      .Case([&](TransferOp o) -> LogicalResult {
        // A parameter shard on NVMe: through its swap buffer, from or to
        // the staged device buffer or a host buffer.
        if (ParamSwapAttr swap = o.getSwapAttr()) {
          Value ptr;
          if (Value staged = o.getStagedValue()) {
            ptr = p(staged);
            if (!ptr)
              return failure();
          } else {
            ptr = LLVM::ZeroOp::create(b, loc, ptrType());
          }
          bool toFile = o.getTarget() == BufferKind::params;
          int32_t from = toFile && o.getSource()
                             ? static_cast<int32_t>(*o.getSource())
                             : -1;
          callVoid("zrt_ctx_swap_params",
                   {ctx, i32(partitionIndex(o.getGroupAttr())), ptr, i32(from),
                    i32(toFile ? 1 : 0),
                    i32(static_cast<int32_t>(swap.getBuffer())),
                    i64(swap.getBufferBytes()), i32(slotOf(o.getToken()))});
          return success();
        }
        if (Value staged = o.getStagedValue()) {
          Value ptr = p(staged);
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
                  i32(static_cast<int32_t>(*o.getTarget())), i64(begin),
                  i64(end), i32(slotOf(o.getToken()))});
        return success();
      })
      .Case([&](ReturnOp o) -> LogicalResult {
        Value loss = p(o.getLoss());
        if (!loss)
          return failure();
        callVoid("zrt_ctx_set_loss", {ctx, loss});
        return success();
      })
      .Default([&](Operation *op) {
        return op->emitOpError("has no lowering to the runtime");
      });
}
