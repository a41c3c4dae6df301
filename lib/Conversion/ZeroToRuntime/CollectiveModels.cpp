//===- CollectiveModels.cpp - The runtime call of each collective ---------===//
//
// Part of the zero-mlir project.
//
// The RuntimeCollectiveOpInterface model of each collective of the `zero`
// dialect (and of hpZ's zero.store_secondary): the `zrt_ctx_*` call the
// runtime makes for it. A new collective, or a new variant of one, adds its
// call here and its entry in `zero_rt/abi.def`; the lowering asks the op.
//
//===----------------------------------------------------------------------===//

#include "zero/Conversion/ZeroToRuntime.h"
#include "zero/Dialect/Zero/Analysis/Schedule.h"
#include "zero/Dialect/Zero/IR/ZeroDialect.h"
#include "zero/Interfaces/RuntimeCollectiveOpInterface.h"

using namespace mlir;
using namespace mlir::zero;

namespace {

int64_t numel(Value v) {
  return cast<RankedTensorType>(v.getType()).getNumElements();
}
Type elemType(Value v) {
  return cast<RankedTensorType>(v.getType()).getElementType();
}

/// Packs the source gradients of a reduction into its bucket (the op's
/// temporary) and reduces it; a quantized one (ZeRO++ qgZ) through the
/// staging that follows the bucket in the same temporary.
template <typename OpT>
LogicalResult buildBucketReduction(OpT op, CollectiveCallBuilder &b,
                                   bool toOwners) {
  Value bucket = b.temporary();
  int32_t part = b.partitionIndex(op.getGroupAttr());
  int64_t at = 0, total = op.getEnd() - op.getBegin();
  for (auto [src, off] : llvm::zip(op.getSources(), op.getSourceOffsets())) {
    int64_t take = std::min(numel(src) - off, total - at);
    Value base = b.pointer(src);
    if (!base)
      return failure();
    Value from = b.offsetPointer(base, off * getElementBytes(elemType(src)));
    if (failed(b.call("zrt_ctx_bucket_add", {b.context(), b.i32(part), bucket,
                                             b.i64(at), from, b.i64(take)})))
      return failure();
    at += take;
  }
  if (cast<CollectiveOpInterface>(op.getOperation()).getQuantizationBits()) {
    FailureOr<StepSchedule::ReductionTemp> temp =
        b.getSchedule().getReductionTemp(op.getOperation());
    if (failed(temp))
      return op.emitOpError("its bucket and staging overflow int64");
    Value staging = b.temporary(temp->stagingOffset);
    return b.call("zrt_ctx_reduce_bucket_quantized",
                  {b.context(), b.i32(part), b.i64(op.getBegin()),
                   b.i64(op.getEnd()), bucket, staging,
                   b.i32(b.slotOf(op.getToken()))});
  }
  return b.call("zrt_ctx_reduce_bucket",
                {b.context(), b.i32(part), b.i64(op.getBegin()),
                 b.i64(op.getEnd()), bucket, b.i32(toOwners),
                 b.i32(b.slotOf(op.getToken()))});
}

/// A gradient reduction. In place (stage 1; with reduce-scatter=false too,
/// since the owners end up with the same sums) the runtime reduce-scatters
/// the range of the persistent grads buffer; a reduce's bytes count as a
/// reduce.
template <typename OpT>
LogicalResult buildReduction(OpT op, CollectiveCallBuilder &b,
                             StringRef inPlaceCallee, bool toOwners) {
  if (op.getBuffer())
    return b.call(inPlaceCallee,
                  {b.context(), b.i32(b.partitionIndex(op.getGroupAttr())),
                   b.i64(op.getBegin()), b.i64(op.getEnd()),
                   b.i32(b.slotOf(op.getToken()))});
  return buildBucketReduction(op, b, toOwners);
}

LogicalResult buildCall(ReduceScatterOp op, CollectiveCallBuilder &b) {
  return buildReduction(op, b, "zrt_ctx_reduce_scatter_grads",
                        /*toOwners=*/false);
}

LogicalResult buildCall(ReduceOp op, CollectiveCallBuilder &b) {
  return buildReduction(op, b, "zrt_ctx_reduce_grads", /*toOwners=*/true);
}

/// In place: the gradients of the group (stage 0) or, MiCS, of the shard
/// over the replicas; else the optimizer's statistics or a router's counts.
LogicalResult buildCall(AllReduceOp op, CollectiveCallBuilder &b) {
  int32_t slot = b.slotOf(op.getToken());
  if (op.getBuffer())
    return b.call(op.getOverReplicas() ? "zrt_ctx_all_reduce_replicas"
                                       : "zrt_ctx_all_reduce_grads",
                  {b.context(), b.i32(b.partitionIndex(op.getGroupAttr())),
                   b.i64(*op.getBegin()), b.i64(*op.getEnd()), b.i32(slot)});
  Value in = b.pointer(op.getInput()), out = b.pointer(op.getResult());
  if (!in || !out)
    return failure();
  // A router's expert counts (int64, summed exactly).
  if (!op.reducesOptimizerStats())
    return b.call(
        "zrt_ctx_all_reduce_counts",
        {b.context(), in, out, b.i64(numel(op.getInput())), b.i32(slot)});
  if (op.getKind() != ReduceKind::overflow_norm)
    return op.emitOpError("only the overflow_norm value form lowers to "
                          "the runtime");
  return b.call("zrt_ctx_all_reduce_stats",
                {b.context(), b.i32(static_cast<int32_t>(op.getRankSetKind())),
                 in, out, b.i32(slot)});
}

/// A stage-3 gather of a whole group into its result: hpZ's of the
/// secondary shards over this rank's hpZ group; through the planned staging
/// of a quantized one (ZeRO++ qwZ); from the params shard, or from a
/// staged copy of it (parameter offload).
LogicalResult buildGroupGather(CollectiveOpInterface op, bool secondary,
                               CollectiveCallBuilder &b) {
  int32_t part = b.partitionIndex(op.getGroupAttr());
  int32_t slot = b.slotOf(op.getToken());
  Value out = b.pointer(op.getMovedValue());
  if (!out)
    return failure();
  if (secondary)
    return b.call("zrt_ctx_gather_secondary",
                  {b.context(), b.i32(part), out, b.i32(slot)});
  if (op.getQuantizationBits()) {
    Value staging = b.temporary();
    return b.call("zrt_ctx_gather_quantized",
                  {b.context(), b.i32(part), staging, out, b.i32(slot)});
  }
  Value shard = op.getStagedShard();
  if (!shard)
    return b.call("zrt_ctx_gather_partition",
                  {b.context(), b.i32(part), out, b.i32(slot)});
  Value in = b.pointer(shard);
  if (!in)
    return failure();
  return b.call("zrt_ctx_gather_staged",
                {b.context(), b.i32(part), in, out, b.i32(slot)});
}

LogicalResult buildCall(AllGatherOp op, CollectiveCallBuilder &b) {
  if (op.getBuffer() && !op.getSecondary())
    return b.call("zrt_ctx_all_gather_params",
                  {b.context(), b.i32(b.partitionIndex(op.getGroupAttr())),
                   b.i64(*op.getBegin()), b.i64(*op.getEnd()),
                   b.i32(b.slotOf(op.getToken()))});
  return buildGroupGather(op, op.getSecondary(), b);
}

LogicalResult buildCall(PrefetchOp op, CollectiveCallBuilder &b) {
  return buildGroupGather(op, op.getSecondary(), b);
}

LogicalResult buildCall(StoreSecondaryOp op, CollectiveCallBuilder &b) {
  Value full = b.pointer(op.getFull());
  if (!full)
    return failure();
  return b.call(
      "zrt_ctx_store_secondary",
      {b.context(), b.i32(b.partitionIndex(op.getGroupAttr())), full});
}

/// The input and result as (outer, P, inner) views at the split and the
/// concat dimension; the runtime packs and unpacks scattered chunks through
/// the op's planned staging (AllToAllOp::getStagingBytes).
LogicalResult buildCall(AllToAllOp op, CollectiveCallBuilder &b) {
  int64_t members = op.getMembers();
  auto [splitOuter, splitInner] = AllToAllOp::getChunkView(
      op.getInput().getType().getShape(), op.getSplitDim(), members);
  auto [concatOuter, concatInner] = AllToAllOp::getChunkView(
      op.getResult().getType().getShape(), op.getConcatDim(), members);
  Value in = b.pointer(op.getInput()), out = b.pointer(op.getResult());
  if (!in || !out)
    return failure();
  return b.call("zrt_ctx_all_to_all",
                {b.context(), b.i32(static_cast<int32_t>(op.getRankSet())),
                 b.dtype(elemType(op.getInput())), in, out, b.temporary(),
                 b.i64(splitOuter), b.i64(splitInner), b.i64(concatOuter),
                 b.i64(concatInner), b.i32(b.slotOf(op.getToken()))});
}

/// The label count function counts each micro batch's labels; the first
/// micro step sums the counts over the ranks.
LogicalResult buildCall(CountLabelsOp op, CollectiveCallBuilder &b) {
  if (b.isCountingLabels()) {
    Value labels = b.pointer(op.getLabels());
    if (!labels)
      return failure();
    return b.call("zrt_ctx_count_labels",
                  {b.context(), b.dtype(elemType(op.getLabels())), labels,
                   b.i64(numel(op.getLabels())), b.i64(op.getIgnoreIndex())});
  }
  Value out = b.pointer(op.getCount());
  if (!out)
    return failure();
  return b.call("zrt_ctx_all_reduce_labels", {b.context(), out});
}

/// The rows of this rank's dispatch go to their experts' members over the
/// `expert` set; the backward's exchange reads the forward's counts.
LogicalResult buildCall(MoeExchangeOp op, CollectiveCallBuilder &b) {
  auto rows = cast<RankedTensorType>(op.getRows().getType());
  Value in = b.pointer(op.getRows()), offsets = b.pointer(op.getOffsets());
  Value recv = b.pointer(op.getRecv());
  Value counts = b.pointer(op.hasKnownCounts() ? op.getKnown()[0]
                                               : op.getCounts());
  Value local = b.pointer(op.hasKnownCounts() ? op.getKnown()[1]
                                              : op.getLocalOffsets());
  if (!in || !offsets || !recv || !counts || !local)
    return failure();
  return b.call(
      "zrt_ctx_moe_exchange",
      {b.context(), b.dtype(rows.getElementType()), in,
       b.i64(rows.getDimSize(0)), b.i64(rows.getDimSize(1)), offsets,
       b.i64(numel(op.getOffsets())), recv, b.i64(op.getCapacity()), counts,
       local, b.i32(op.hasKnownCounts()), b.i32(int32_t(op.getLayer())),
       b.i32(op.getDrop()), b.i32(-1)});
}

/// The received rows go back to their sources, in their dispatch order.
LogicalResult buildCall(MoeReturnOp op, CollectiveCallBuilder &b) {
  auto recvType = cast<RankedTensorType>(op.getRecv().getType());
  Value recv = b.pointer(op.getRecv()), counts = b.pointer(op.getCounts());
  Value local = b.pointer(op.getLocalOffsets());
  Value offsets = b.pointer(op.getOffsets()), rows = b.pointer(op.getRows());
  if (!recv || !counts || !local || !offsets || !rows)
    return failure();
  return b.call("zrt_ctx_moe_return",
                {b.context(), b.dtype(recvType.getElementType()), recv,
                 b.i64(recvType.getDimSize(0)), b.i64(recvType.getDimSize(1)),
                 counts, local, offsets, b.i64(numel(op.getOffsets())), rows,
                 b.i64(cast<RankedTensorType>(op.getRows().getType())
                           .getDimSize(0)),
                 b.i32(-1)});
}

/// The count function records each micro batch's sum; the first micro
/// step sums them over the ranks.
LogicalResult buildCall(CountSumOp op, CollectiveCallBuilder &b) {
  if (b.isCountingLabels()) {
    Value value = b.pointer(op.getValue());
    if (!value)
      return failure();
    return b.call("zrt_ctx_count_sum",
                  {b.context(), value, b.i32(op.getIndex())});
  }
  Value out = b.pointer(op.getSum());
  if (!out)
    return failure();
  return b.call("zrt_ctx_all_reduce_sum",
                {b.context(), b.i32(op.getIndex()), out});
}

template <typename OpT>
struct CollectiveModel
    : public RuntimeCollectiveOpInterface::ExternalModel<CollectiveModel<OpT>,
                                                         OpT> {
  LogicalResult buildCollectiveCall(Operation *op,
                                    CollectiveCallBuilder &builder) const {
    return buildCall(cast<OpT>(op), builder);
  }
};

template <typename... OpTs>
void attach(MLIRContext *context) {
  (OpTs::template attachInterface<CollectiveModel<OpTs>>(*context), ...);
}

} // namespace

void mlir::zero::registerRuntimeCollectiveModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *context, ZeroDialect *) {
    attach<AllGatherOp, PrefetchOp, ReduceScatterOp, ReduceOp, AllReduceOp,
           AllToAllOp, CountLabelsOp, CountSumOp, StoreSecondaryOp,
           MoeExchangeOp, MoeReturnOp>(context);
  });
}
