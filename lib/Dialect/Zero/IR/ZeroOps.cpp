//===- ZeroOps.cpp - Model structure and ZeRO schedule ops ----------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/IR/OptimizerRules.h"
#include "zero/Dialect/Zero/IR/Optimizers.h"
#include "zero/Dialect/Zero/IR/ZeroDialect.h"
#include "zero/Interfaces/IndexOperandOpInterface.h"
#include "zero/Support/UTF8.h"
#include "zero_rt/quantize.h"
#include "zero_rt/topology.h"

#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::zero;

#include "zero/Dialect/Zero/IR/ZeroOpInterfaces.cpp.inc"

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

template <typename OpT>
static FailureOr<ParamOp> lookupParam(OpT op, SymbolTableCollection &tables,
                                      FlatSymbolRefAttr ref) {
  auto module = op->template getParentOfType<ModuleOp>();
  auto param = tables.lookupSymbolIn<ParamOp>(module, ref);
  if (!param)
    return op.emitOpError("references unknown parameter ") << ref;
  return param;
}

/// Symbol names end up in the runtime's JSON manifest, the report and the
/// trace, which are UTF-8.
template <typename OpT>
static LogicalResult verifyUTF8Name(OpT op) {
  return ::zero::checkUTF8([&] { return op.emitOpError(); }, "name @",
                           op.getSymName(),
                           "names go into the JSON manifest and reports");
}

//===----------------------------------------------------------------------===//
// ParamOp
//===----------------------------------------------------------------------===//

RankedTensorType ParamOp::getComputeTensorType() {
  RankedTensorType t = getTensorType();
  if (auto c = getComputeAttr())
    return RankedTensorType::get(t.getShape(), c.getValue());
  return t;
}

LogicalResult ParamOp::verify() {
  if (failed(verifyUTF8Name(*this)))
    return failure();
  auto type = dyn_cast<RankedTensorType>(getType());
  if (!type || !type.hasStaticShape())
    return emitOpError("type must be a statically shaped tensor, got ")
           << getType();
  if (!type.getElementType().isF32() && !type.getElementType().isF16() &&
      !type.getElementType().isBF16())
    return emitOpError("element type must be f32, f16 or bf16, got ")
           << type.getElementType();
  for (int64_t d : type.getShape())
    if (d <= 0)
      return emitOpError("dimensions must be positive, got ") << type;
  // Element counts are int64 in every later pass and in the runtime.
  int64_t n = 1;
  for (int64_t d : type.getShape())
    if (__builtin_mul_overflow(n, d, &n))
      return emitOpError("element count of ") << type << " overflows int64";
  // Its value, gradient and zero gradient are tensors of the train step.
  if (n > kMaxTensorElements)
    return emitOpError("element count of ")
           << type << " is above 2^48, the most a tensor may have";
  if (getInit() == InitKind::normal) {
    if (!getStd())
      return emitOpError("'normal' initializer needs a 'std'");
    double s = getStd()->convertToDouble();
    if (!(s > 0.0) || !std::isfinite(s))
      return emitOpError("std must be positive, got ") << s;
  } else if (getStd()) {
    return emitOpError("'std' only applies to the 'normal' initializer");
  }
  if (std::optional<APFloat> decay = getWeightDecay()) {
    double d = decay->convertToDouble();
    if (!(d >= 0.0) || !std::isfinite(d))
      return emitOpError("weight_decay must be finite and >= 0, got ") << d;
  }
  if (auto c = getComputeAttr()) {
    Type et = c.getValue();
    if (!et.isF32() && !et.isF16() && !et.isBF16())
      return emitOpError("compute type must be f32, f16 or bf16, got ") << et;
  }
  if (std::optional<int64_t> rows = getRows()) {
    int64_t all = type.getRank() ? type.getDimSize(0) : 0;
    if (*rows <= 0 || *rows >= all)
      return emitOpError("rows must lie in [1, ")
             << all << "), the parameter's rows without padding; got " << *rows;
  }
  if (std::optional<int64_t> ep = getExpertParallel()) {
    if (*ep < 2 || type.getRank() < 2)
      return emitOpError("expert_parallel must be at least 2 on a tensor of "
                         "experts (dimension 0), got ")
             << *ep << " on " << type;
    if (getRows())
      return emitOpError("holds a share of experts and padding rows");
  }
  return success();
}

SmallVector<int64_t> ParamOp::getUnpaddedShape() {
  SmallVector<int64_t> shape(getTensorType().getShape());
  if (std::optional<int64_t> rows = getRows())
    shape[0] = *rows;
  return shape;
}

//===----------------------------------------------------------------------===//
// TrainStepOp
//===----------------------------------------------------------------------===//

ParseResult TrainStepOp::parse(OpAsmParser &parser, OperationState &result) {
  StringAttr name;
  if (parser.parseSymbolName(name, getSymNameAttrName(result.name),
                             result.attributes))
    return failure();
  SmallVector<OpAsmParser::Argument> args;
  if (parser.parseArgumentList(args, OpAsmParser::Delimiter::Paren,
                               /*allowType=*/true))
    return failure();
  Attribute opt, prec;
  if (parser.parseKeyword("optimizer") || parser.parseAttribute(opt) ||
      parser.parseKeyword("precision") || parser.parseAttribute(prec))
    return failure();
  auto optAttr = dyn_cast<OptimizerAttr>(opt);
  auto precAttr = dyn_cast<PrecisionAttr>(prec);
  if (!optAttr || !precAttr)
    return parser.emitError(parser.getCurrentLocation(),
                            "expected #zero.optimizer and #zero.precision");
  result.addAttribute(getOptimizerAttrName(result.name), optAttr);
  result.addAttribute(getPrecisionAttrName(result.name), precAttr);
  if (succeeded(parser.parseOptionalKeyword("gradient_clipping"))) {
    double clip;
    if (parser.parseFloat(clip))
      return failure();
    result.addAttribute(getGradientClippingAttrName(result.name),
                        parser.getBuilder().getF64FloatAttr(clip));
  }
  if (succeeded(parser.parseOptionalKeyword("schedule"))) {
    ScheduleAttr schedule;
    if (parser.parseCustomAttributeWithFallback(schedule))
      return failure();
    result.addAttribute(getScheduleAttrName(result.name), schedule);
  }
  if (succeeded(parser.parseOptionalKeyword("offload"))) {
    OffloadAttr offload;
    if (parser.parseCustomAttributeWithFallback(offload))
      return failure();
    result.addAttribute(getOffloadAttrName(result.name), offload);
  }
  if (succeeded(parser.parseOptionalKeyword("labels"))) {
    StringRef keyword;
    SMLoc loc = parser.getCurrentLocation();
    if (parser.parseKeyword(&keyword))
      return failure();
    std::optional<LabelConvention> labels = symbolizeLabelConvention(keyword);
    if (!labels)
      return parser.emitError(loc,
                              "expected a token-label convention "
                              "(next_token, same_tokens or shifted), got '")
             << keyword << "'";
    result.addAttribute(getLabelsAttrName(result.name),
                        LabelConventionAttr::get(parser.getContext(), *labels));
  }
  if (parser.parseOptionalAttrDictWithKeyword(result.attributes))
    return failure();
  Region *body = result.addRegion();
  if (parser.parseRegion(*body, args))
    return failure();
  if (body->empty())
    return parser.emitError(parser.getCurrentLocation(), "expected a body");
  return success();
}

void TrainStepOp::print(OpAsmPrinter &p) {
  p << ' ';
  p.printSymbolName(getSymName());
  p << '(';
  llvm::interleaveComma(getBodyBlock().getArguments(), p,
                        [&](BlockArgument a) { p.printRegionArgument(a); });
  p << ") optimizer " << getOptimizer() << " precision " << getPrecision();
  if (getGradientClipping().convertToDouble() != 0.0)
    p << " gradient_clipping " << getGradientClipping();
  if (ScheduleAttr schedule = getScheduleAttr())
    p << " schedule " << schedule;
  if (OffloadAttr offload = getOffloadAttr())
    p << " offload " << offload;
  if (getLabels() != LabelConvention::next_token)
    p << " labels " << stringifyLabelConvention(getLabels());
  p.printOptionalAttrDictWithKeyword(
      (*this)->getAttrs(),
      {getSymNameAttrName(), getOptimizerAttrName(), getPrecisionAttrName(),
       getGradientClippingAttrName(), getScheduleAttrName(),
       getOffloadAttrName(), getLabelsAttrName()});
  p << ' ';
  p.printRegion(getBody(), /*printEntryBlockArgs=*/false,
                /*printBlockTerminators=*/true);
}

ReturnOp TrainStepOp::getReturnOp() {
  return cast<ReturnOp>(getBodyBlock().getTerminator());
}

Value TrainStepOp::getLoss() { return getReturnOp().getLoss(); }

/// Every tensor of a train step is statically shaped with positive
/// dimensions and at most kMaxTensorElements elements: the passes, the memory
/// plan, the cost model and the lowering divide by dimensions and multiply
/// sizes.
static LogicalResult checkStepTensor(function_ref<InFlightDiagnostic()> emit,
                                     Type type) {
  auto tensor = dyn_cast<TensorType>(type);
  if (!tensor)
    return success();
  auto t = dyn_cast<RankedTensorType>(type);
  if (!t || !t.hasStaticShape())
    return emit() << "of type " << type
                  << " must have a static shape (every tensor of a train "
                     "step does)";
  int64_t n = 1;
  for (int64_t d : t.getShape()) {
    if (d <= 0)
      return emit() << "of type " << type
                    << " must have positive dimensions (every tensor of a "
                       "train step does)";
    if (__builtin_mul_overflow(n, d, &n) || n > kMaxTensorElements)
      return emit() << "of type " << type
                    << " has more than 2^48 elements, the most a tensor of a "
                       "train step may have";
  }
  return success();
}

LogicalResult TrainStepOp::verify() {
  // Types are uniqued and a step has few distinct ones: each is checked
  // once, not once per value (this walk runs after every pass).
  llvm::SmallDenseSet<Type, 32> checked;
  // Neighbouring values mostly share a type: the last one checked is
  // compared before the set is hashed.
  Type last;
  WalkResult walk = getBody().walk([&](Operation *op) {
    for (OpResult r : op->getResults())
      if (r.getType() != last && (last = r.getType()) &&
          checked.insert(r.getType()).second &&
          failed(checkStepTensor(
              [&] {
                return op->emitOpError("result #")
                       << r.getResultNumber() << " ";
              },
              r.getType())))
        return WalkResult::interrupt();
    for (Region &region : op->getRegions())
      for (Block &block : region)
        for (BlockArgument a : block.getArguments())
          if (checked.insert(a.getType()).second &&
              failed(checkStepTensor(
                  [&] {
                    return op->emitOpError("block argument #")
                           << a.getArgNumber() << " ";
                  },
                  a.getType())))
            return WalkResult::interrupt();
    return WalkResult::advance();
  });
  if (walk.wasInterrupted() || failed(verifyUTF8Name(*this)))
    return failure();
  double clip = getGradientClipping().convertToDouble();
  if (!(clip >= 0.0) || !std::isfinite(clip))
    return emitOpError("gradient_clipping must be >= 0 (0 disables it), got ")
           << clip;
  if (failed(verifyOffload()) || failed(verifyLabels()) ||
      failed(verifyInputNames()))
    return failure();
  // The bf16-master update runs on the device, over device parameters.
  if (getOptimizer().getBf16Masters() && getOffloadAttr() &&
      (getOffload().offloadsOptimizer() || getOffload().offloadsParams()))
    return emitOpError("bf16_masters (bf16 parameters as their own masters) "
                       "is not implemented with optimizer or parameter "
                       "offload");
  // The NVMe swap streams f32 states (zero/Dialect/Zero/IR/OptimizerRules.h).
  if (getOffloadAttr() && getOffload().getOptimizer() == OffloadDevice::nvme &&
      !canSwapOptimizerStates(getOptimizer().getStates()))
    return emitOpError("optimizer states in ")
           << stringifyStatePrecision(getOptimizer().getStates())
           << " are not swapped to NVMe: offload the optimizer to the CPU or "
              "keep it on the device";
  for (BlockArgument arg : getBodyBlock().getArguments()) {
    auto t = dyn_cast<RankedTensorType>(arg.getType());
    if (!t || !t.hasStaticShape() || t.getRank() < 1)
      return emitOpError("input #")
             << arg.getArgNumber()
             << " must be a statically shaped tensor with a batch dimension, "
                "got "
             << arg.getType();
    if (failed(checkStepTensor(
            [&] { return emitOpError("input #") << arg.getArgNumber() << " "; },
            t)))
      return failure();
  }
  if (!getBodyBlock().getArguments().empty()) {
    int64_t batch =
        cast<RankedTensorType>(getBodyBlock().getArgument(0).getType())
            .getDimSize(0);
    for (BlockArgument arg : getBodyBlock().getArguments())
      if (cast<RankedTensorType>(arg.getType()).getDimSize(0) != batch)
        return emitOpError("inputs disagree on the batch dimension: input #0 "
                           "has batch ")
               << batch << ", input #" << arg.getArgNumber() << " "
               << arg.getType() << " has batch "
               << cast<RankedTensorType>(arg.getType()).getDimSize(0);
    if (ScheduleAttr schedule = getScheduleAttr();
        schedule && batch != schedule.getMicroBatch())
      return emitOpError("inputs hold a batch of ")
             << batch << ", but the schedule's global batch "
             << schedule.getGlobalBatch() << " over world size "
             << schedule.getWorldSize() << " x "
             << schedule.getAccumulationSteps() << " accumulation steps is "
             << schedule.getMicroBatch() << " per micro step";
  }
  return verifySchedulePartitions();
}

LogicalResult TrainStepOp::verifyInputNames() {
  ArrayAttr names = getInputNamesAttr();
  if (!names)
    return success();
  unsigned numInputs = getBodyBlock().getNumArguments();
  if (names.size() != numInputs)
    return emitOpError("input_names has ")
           << names.size() << " names for " << numInputs
           << " inputs (one per input)";
  llvm::StringMap<unsigned> seen;
  for (auto [k, attr] : llvm::enumerate(names)) {
    StringRef name = cast<StringAttr>(attr).getValue();
    if (name.empty())
      return emitOpError("input_names #") << k << " is empty";
    bool identifier =
        (llvm::isAlpha(name.front()) || name.front() == '_') &&
        llvm::all_of(name, [](char c) { return llvm::isAlnum(c) || c == '_'; });
    if (!identifier)
      return emitOpError("input_names #")
             << k << " '" << name
             << "' is not an identifier ([A-Za-z_][A-Za-z0-9_]*)";
    auto [it, inserted] = seen.try_emplace(name, k);
    if (!inserted)
      return emitOpError("input_names #")
             << k << " '" << name << "' repeats input_names #" << it->second;
  }
  return success();
}

LogicalResult TrainStepOp::verifyOffload() {
  ScheduleAttr schedule = getScheduleAttr();
  if (!schedule || !getOffloadAttr())
    return success();
  // DeepSpeed refuses MiCS with offload.
  OffloadAttr offload = getOffload();
  if (schedule.getMicsShardSize() > 0 &&
      (offload.offloadsOptimizer() || offload.offloadsParams()))
    return emitOpError("MiCS (mics_shard_size ")
           << schedule.getMicsShardSize()
           << ") does not support optimizer or parameter offload";
  return offload.verifyStage([&] { return emitOpError(); },
                             schedule.getStage());
}

LogicalResult TrainStepOp::verifyLabels() {
  if (getLabels() == LabelConvention::next_token)
    return success();
  // A token window fed as both inputs: token ids and labels of one shape.
  Block::BlockArgListType args = getBodyBlock().getArguments();
  auto isTokens = [](Type type) {
    auto t = dyn_cast<RankedTensorType>(type);
    return t && t.getRank() == 2 && t.getElementType().isSignlessInteger() &&
           (t.getElementType().isInteger(32) ||
            t.getElementType().isInteger(64));
  };
  // Packed rows add their positions, of the same shape, read as such (or
  // whole rows, under sequence parallelism, beside the tokens' shards).
  auto isPositions = [](BlockArgument a) {
    return getIndexRole(a) == IndexRole::position;
  };
  unsigned count = 2 + unsigned(llvm::count_if(args, isPositions));
  std::optional<ArrayRef<int64_t>> tokens;
  bool same = llvm::all_of(args, [&](BlockArgument a) {
    if (!isTokens(a.getType()))
      return false;
    ArrayRef<int64_t> shape = cast<RankedTensorType>(a.getType()).getShape();
    if (isPositions(a))
      return true;
    if (!tokens)
      tokens = shape;
    return shape == *tokens;
  });
  if (same && tokens)
    for (BlockArgument a : args) {
      ArrayRef<int64_t> shape = cast<RankedTensorType>(a.getType()).getShape();
      same &= !isPositions(a) ||
              (shape[0] == (*tokens)[0] && shape[1] % (*tokens)[1] == 0);
    }
  if (args.size() != count || count > 3 || !same) {
    InFlightDiagnostic diag =
        emitOpError("labels ")
        << stringifyLabelConvention(getLabels())
        << " needs two inputs, token ids and labels of one shape [B, T] of "
           "i32 or i64 (and packed rows' positions of that shape, or of "
           "whole rows, where the step reads them), got "
        << args.size() << " input(s)";
    if (!args.empty()) {
      diag << ": ";
      llvm::interleaveComma(args, diag,
                            [&](BlockArgument a) { diag << a.getType(); });
    }
    return diag;
  }
  return success();
}

LogicalResult TrainStepOp::verifySchedulePartitions() {
  ScheduleAttr schedule = getScheduleAttr();
  auto module = (*this)->getParentOfType<ModuleOp>();
  if (!module)
    return success();
  // expert_parallel splits the experts zero-expert-parallel sliced (a share
  // on each expert zero.param, their partitions, the exchanges): a step
  // without any would ignore it.
  if (schedule && schedule.getExpertParallel() > 1) {
    int64_t p = schedule.getExpertParallel();
    bool experts = false;
    for (ParamOp param : module.getOps<ParamOp>()) {
      std::optional<int64_t> share = param.getExpertParallel();
      if (share && *share != p)
        return emitOpError("schedule has expert_parallel ")
               << p << ", but zero.param @" << param.getSymName()
               << " holds experts split over " << *share << " ranks";
      experts |= share.has_value();
    }
    experts |= llvm::any_of(module.getOps<PartitionOp>(),
                            [](PartitionOp part) { return part.getExpert(); });
    experts |= !getBodyBlock().getOps<MoeExchangeOp>().empty();
    if (!experts)
      return emitOpError("schedule has expert_parallel ")
             << p
             << ", but the step has no experts split over ranks (no "
                "zero.param with expert_parallel, expert zero.partition or "
                "zero.moe_exchange; zero-expert-parallel's ep-size splits a "
                "MoE layer's experts): a step without them has "
                "expert_parallel 1";
  }
  for (PartitionOp p : module.getOps<PartitionOp>()) {
    if (!schedule)
      return emitOpError("has no #zero.schedule, but the module has ")
             << "zero.partition @" << p.getSymName()
             << " (zero-partition records both)";
    // Under MiCS a partition is sharded over the shard group, an expert
    // partition over the expert replicas.
    if (p.getExpert() && schedule.getExpertParallel() == 1)
      return emitOpError("schedule has no expert_parallel, but zero.partition "
                         "@")
             << p.getSymName() << " holds experts";
    int64_t ranks = p.getExpert()
                        ? schedule.getWorldSize() / schedule.getExpertParallel()
                        : schedule.getShardGroupSize();
    if (p.getStageValue() != schedule.getStage() ||
        p.getWorldSizeValue() != ranks)
      return emitOpError("schedule has stage ")
             << schedule.getStage() << " and world size "
             << schedule.getWorldSize()
             << (schedule.getMicsShardSize() > 0
                     ? " (MiCS shard groups of " +
                           std::to_string(schedule.getMicsShardSize()) + ")"
                     : std::string())
             << ", but zero.partition @" << p.getSymName() << " has stage "
             << p.getStageValue() << " and world size "
             << p.getWorldSizeValue();
  }
  return success();
}

//===----------------------------------------------------------------------===//
// CollectiveOpInterface
//===----------------------------------------------------------------------===//

template <typename OpT>
static std::optional<std::pair<int64_t, int64_t>> optionalRange(OpT op) {
  if (!op.getBegin() || !op.getEnd())
    return std::nullopt;
  return std::make_pair(static_cast<int64_t>(*op.getBegin()),
                        static_cast<int64_t>(*op.getEnd()));
}

CollectiveKind AllGatherOp::getCollectiveKind() {
  return CollectiveKind::all_gather;
}
std::optional<std::pair<int64_t, int64_t>> AllGatherOp::getElementRange() {
  return optionalRange(*this);
}
std::optional<BufferKind> AllGatherOp::getInPlaceBuffer() {
  return getBuffer();
}
Value AllGatherOp::getMovedValue() { return getResult(); }
RankSetKind AllGatherOp::getRankSetKind() {
  return getSecondary() ? RankSetKind::hpz
                        : getPartitionRankSet(getOperation(), getGroupAttr());
}
CoverageRole AllGatherOp::getCoverageRole() {
  return getBuffer() ? CoverageRole::param_gather : CoverageRole::none;
}
Value AllGatherOp::getStagedShard() { return getShard(); }

CollectiveKind PrefetchOp::getCollectiveKind() {
  return CollectiveKind::all_gather;
}
std::optional<std::pair<int64_t, int64_t>> PrefetchOp::getElementRange() {
  return std::nullopt;
}
std::optional<BufferKind> PrefetchOp::getInPlaceBuffer() {
  return std::nullopt;
}
Value PrefetchOp::getMovedValue() { return getResult(); }
RankSetKind PrefetchOp::getRankSetKind() {
  return getSecondary() ? RankSetKind::hpz
                        : getPartitionRankSet(getOperation(), getGroupAttr());
}
Value PrefetchOp::getStagedShard() { return getShard(); }

/// A reduction's sources, concatenated from their offsets, make up its
/// range; each is read over the elements it contributes.
template <typename OpT>
static SmallVector<std::pair<Value, std::pair<int64_t, int64_t>>>
getSourceReads(OpT op) {
  SmallVector<std::pair<Value, std::pair<int64_t, int64_t>>> reads;
  int64_t total = op.getEnd() - op.getBegin();
  for (auto [v, off] : llvm::zip(op.getSources(), op.getSourceOffsets())) {
    int64_t n = cast<RankedTensorType>(v.getType()).getNumElements();
    int64_t take = std::min(n - off, total);
    reads.push_back({v, {off, off + take}});
    total -= take;
  }
  return reads;
}

CollectiveKind ReduceScatterOp::getCollectiveKind() {
  return CollectiveKind::reduce_scatter;
}
std::optional<std::pair<int64_t, int64_t>> ReduceScatterOp::getElementRange() {
  return std::make_pair(static_cast<int64_t>(getBegin()),
                        static_cast<int64_t>(getEnd()));
}
std::optional<BufferKind> ReduceScatterOp::getInPlaceBuffer() {
  return getBuffer();
}
Value ReduceScatterOp::getMovedValue() { return Value(); }
CoverageRole ReduceScatterOp::getCoverageRole() {
  return CoverageRole::grad_reduction;
}
std::optional<BufferKind> ReduceScatterOp::getWrittenBuffer() {
  return BufferKind::grads;
}
SmallVector<std::pair<Value, std::pair<int64_t, int64_t>>>
ReduceScatterOp::getInFlightReads() {
  return getSourceReads(*this);
}

CollectiveKind ReduceOp::getCollectiveKind() { return CollectiveKind::reduce; }
std::optional<std::pair<int64_t, int64_t>> ReduceOp::getElementRange() {
  return std::make_pair(static_cast<int64_t>(getBegin()),
                        static_cast<int64_t>(getEnd()));
}
std::optional<BufferKind> ReduceOp::getInPlaceBuffer() { return getBuffer(); }
Value ReduceOp::getMovedValue() { return Value(); }
CoverageRole ReduceOp::getCoverageRole() {
  return CoverageRole::grad_reduction;
}
std::optional<BufferKind> ReduceOp::getWrittenBuffer() {
  return BufferKind::grads;
}
SmallVector<std::pair<Value, std::pair<int64_t, int64_t>>>
ReduceOp::getInFlightReads() {
  return getSourceReads(*this);
}

CollectiveKind AllReduceOp::getCollectiveKind() {
  return CollectiveKind::all_reduce;
}
std::optional<std::pair<int64_t, int64_t>> AllReduceOp::getElementRange() {
  return optionalRange(*this);
}
std::optional<BufferKind> AllReduceOp::getInPlaceBuffer() {
  return getBuffer();
}
Value AllReduceOp::getMovedValue() { return getInput(); }
CoverageRole AllReduceOp::getCoverageRole() {
  if (!getBuffer())
    return CoverageRole::none;
  return getOverReplicas() ? CoverageRole::replica_sum
                           : CoverageRole::grad_reduction;
}

RankSetKind mlir::zero::getPartitionRankSet(Operation *op,
                                            FlatSymbolRefAttr group) {
  // Only a step with expert parallelism has expert partitions: the common
  // case looks up no symbol.
  auto step = op->getParentOfType<TrainStepOp>();
  ScheduleAttr schedule = step ? step.getScheduleAttr() : ScheduleAttr();
  if (!group || !schedule || schedule.getExpertParallel() == 1)
    return RankSetKind::group;
  auto partition = SymbolTable::lookupNearestSymbolFrom<PartitionOp>(op, group);
  return partition && partition.getExpert() ? RankSetKind::expert_replicas
                                            : RankSetKind::group;
}

//===----------------------------------------------------------------------===//
// AllToAllOp
//===----------------------------------------------------------------------===//

CollectiveKind AllToAllOp::getCollectiveKind() {
  return CollectiveKind::all_to_all;
}
std::optional<std::pair<int64_t, int64_t>> AllToAllOp::getElementRange() {
  return std::nullopt;
}
std::optional<BufferKind> AllToAllOp::getInPlaceBuffer() {
  return std::nullopt;
}
Value AllToAllOp::getMovedValue() { return getResult(); }
FlatSymbolRefAttr AllToAllOp::getGroupAttr() { return {}; }
RankSetKind AllToAllOp::getRankSetKind() { return getRankSet(); }
SmallVector<std::pair<Value, std::pair<int64_t, int64_t>>>
AllToAllOp::getInFlightReads() {
  return {{getInput(), {0, getInput().getType().getNumElements()}}};
}

std::optional<int64_t> AllToAllOp::getKnownMembers() {
  auto step = (*this)->getParentOfType<TrainStepOp>();
  ScheduleAttr schedule = step ? step.getScheduleAttr() : ScheduleAttr();
  if (!schedule)
    return std::nullopt;
  return getRankSet() == RankSetKind::sequence ? schedule.getSequenceParallel()
                                               : schedule.getWorldSize();
}

std::pair<int64_t, int64_t> AllToAllOp::getChunkView(ArrayRef<int64_t> shape,
                                                     int64_t dim,
                                                     int64_t members) {
  int64_t outer = 1, inner = shape[dim] / members;
  for (int64_t d = 0; d < dim; ++d)
    outer *= shape[d];
  for (int64_t d = dim + 1, e = shape.size(); d < e; ++d)
    inner *= shape[d];
  return {outer, inner};
}

int64_t AllToAllOp::getMembers() {
  if (std::optional<int64_t> known = getKnownMembers())
    return *known;
  int64_t split = getSplitDim(), concat = getConcatDim();
  ArrayRef<int64_t> in = getInput().getType().getShape();
  ArrayRef<int64_t> out = getResult().getType().getShape();
  if (split == concat || in[concat] == 0)
    return 1;
  return out[concat] / in[concat];
}

int64_t AllToAllOp::getStagingBytes() {
  int64_t p = getMembers();
  auto type = getInput().getType();
  int64_t bytes = type.getNumElements() * (type.getElementTypeBitWidth() / 8);
  int64_t pieces =
      int64_t(getChunkView(type.getShape(), getSplitDim(), p).first > 1) +
      int64_t(getChunkView(getResult().getType().getShape(), getConcatDim(), p)
                  .first > 1);
  return pieces * bytes;
}

LogicalResult AllToAllOp::verify() {
  auto in = getInput().getType(), out = getResult().getType();
  if (in.getElementType() != out.getElementType())
    return emitOpError("result element type ")
           << out.getElementType() << " differs from the input's "
           << in.getElementType();
  if (!in.hasStaticShape() || !out.hasStaticShape())
    return emitOpError("needs static shapes");
  int64_t rank = in.getRank();
  if (out.getRank() != rank)
    return emitOpError("result rank ")
           << out.getRank() << " differs from the input's " << rank;
  int64_t split = getSplitDim(), concat = getConcatDim();
  for (auto [name, dim] :
       {std::pair<StringRef, int64_t>{"split", split}, {"concat", concat}})
    if (dim < 0 || dim >= rank)
      return emitOpError() << name << "_dim " << dim
                           << " is not a dimension of a rank-" << rank
                           << " tensor";
  if (getRankSet() != RankSetKind::world &&
      getRankSet() != RankSetKind::sequence)
    return emitOpError("runs over the world or the sequence-parallel group, "
                       "not ")
           << stringifyRankSetKind(getRankSet());
  // P is the rank set's size when the step's schedule says (the world size,
  // or its sequence_parallel), else what the shapes imply (the concat
  // dimension's growth).
  std::optional<int64_t> known = getKnownMembers();
  ArrayRef<int64_t> is = in.getShape(), os = out.getShape();
  int64_t p;
  if (known) {
    p = *known;
  } else if (split == concat) {
    p = 1;
  } else {
    if (is[concat] == 0 || os[concat] % is[concat])
      return emitOpError("result concat dimension ")
             << os[concat] << " is not a multiple of the input's "
             << is[concat];
    p = os[concat] / is[concat];
  }
  if (p < 1 || is[split] % p)
    return emitOpError("split dimension ")
           << split << " of extent " << is[split]
           << " does not divide by the rank set's " << p << " members";
  SmallVector<int64_t> expected(is);
  expected[split] /= p;
  expected[concat] *= p;
  if (ArrayRef<int64_t>(expected) != os)
    return emitOpError("result type ")
           << out << " is not the input's shape with dimension " << split
           << " divided and dimension " << concat << " multiplied by " << p
           << " members";
  return success();
}

//===----------------------------------------------------------------------===//
// GetParamOp / GradOp
//===----------------------------------------------------------------------===//

ParseResult GetParamOp::parse(OpAsmParser &parser, OperationState &result) {
  FlatSymbolRefAttr param;
  if (parser.parseAttribute(param, getParamAttrName(result.name).getValue(),
                            result.attributes))
    return failure();
  OpAsmParser::UnresolvedOperand source;
  bool hasSource = succeeded(parser.parseOptionalKeyword("from"));
  if (hasSource && parser.parseOperand(source))
    return failure();
  Type sourceType, type;
  if (parser.parseOptionalAttrDict(result.attributes) || parser.parseColon())
    return failure();
  if (hasSource) {
    if (parser.parseType(sourceType) || parser.parseArrow() ||
        parser.resolveOperand(source, sourceType, result.operands))
      return failure();
  }
  if (parser.parseType(type))
    return failure();
  result.addTypes(type);
  return success();
}

void GetParamOp::print(OpAsmPrinter &p) {
  p << ' ';
  p.printAttributeWithoutType(getParamAttr());
  if (getSource())
    p << " from " << getSource();
  p.printOptionalAttrDict((*this)->getAttrs(), {getParamAttrName()});
  p << " : ";
  if (getSource())
    p << getSource().getType() << " -> ";
  p << getResult().getType();
}

/// The gathered buffer it views at stage 3; null where it views the
/// persistent `params` buffer (no SSA value holds that).
Value GetParamOp::getViewSource() { return getSource(); }

LogicalResult GetParamOp::verifySymbolUses(SymbolTableCollection &tables) {
  auto param = lookupParam(*this, tables, getParamAttr());
  if (failed(param))
    return failure();
  RankedTensorType expected = param->getComputeTensorType();
  if (getResult().getType() != expected)
    return emitOpError("result type ")
           << getResult().getType() << " does not match parameter "
           << getParamAttr() << " of compute type " << expected;
  if (!getSource())
    return success();
  // A view of a gathered buffer: the full buffer of the stage-3 partition
  // that holds the parameter.
  auto sourceType = cast<RankedTensorType>(getSource().getType());
  if (sourceType.getElementType() != expected.getElementType())
    return emitOpError("source element type ")
           << sourceType.getElementType() << " differs from the compute type "
           << expected.getElementType() << " of parameter " << getParamAttr();
  auto module = (*this)->getParentOfType<ModuleOp>();
  // The gather that produced the source names the partition: look it up in
  // the symbol table instead of scanning the module for every view (that
  // scan made verification quadratic in the number of layers).
  SmallVector<PartitionOp, 1> candidates;
  Operation *def = getSource().getDefiningOp();
  FlatSymbolRefAttr gatherGroup =
      isa_and_nonnull<AllGatherOp>(def)  ? cast<AllGatherOp>(def).getGroupAttr()
      : isa_and_nonnull<PrefetchOp>(def) ? cast<PrefetchOp>(def).getGroupAttr()
                                         : FlatSymbolRefAttr();
  if (auto g = gatherGroup
                   ? tables.lookupSymbolIn<PartitionOp>(module, gatherGroup)
                   : PartitionOp())
    candidates.push_back(g);
  else
    candidates.append(module.getOps<PartitionOp>().begin(),
                      module.getOps<PartitionOp>().end());
  for (auto group : candidates) {
    if (!llvm::is_contained(group.getParams(), getParamAttr()))
      continue;
    if (group.getStageValue() != 3)
      return emitOpError("reads parameter ")
             << getParamAttr() << " from a gathered buffer, but its partition @"
             << group.getSymName() << " is stage " << group.getStageValue()
             << " (only stage 3 gathers)";
    // A dynamic shape has no element count (an assertion, and garbage in
    // a build without assertions).
    if (!sourceType.hasStaticShape() ||
        sourceType.getNumElements() != group.getPaddedNumelValue())
      return emitOpError("source ")
             << sourceType << " is not the gathered buffer of partition @"
             << group.getSymName() << " (" << group.getPaddedNumelValue()
             << " elements)";
    return success();
  }
  return emitOpError("reads parameter ")
         << getParamAttr()
         << " from a gathered buffer, but no partition holds it";
}

LogicalResult GradOp::verifySymbolUses(SymbolTableCollection &tables) {
  auto param = lookupParam(*this, tables, getParamAttr());
  if (failed(param))
    return failure();
  if (param->getFrozen())
    return emitOpError("binds a gradient of frozen parameter ")
           << getParamAttr() << " (a frozen parameter has no gradient)";
  auto gradType = cast<RankedTensorType>(getGrad().getType());
  RankedTensorType expected = param->getComputeTensorType();
  if (gradType.getShape() != expected.getShape())
    return emitOpError("gradient type ")
           << gradType << " does not match the shape of parameter "
           << getParamAttr() << " " << expected;
  return success();
}

//===----------------------------------------------------------------------===//
// PartitionOp
//===----------------------------------------------------------------------===//

LogicalResult PartitionOp::verify() {
  if (failed(verifyUTF8Name(*this)))
    return failure();
  int64_t ws = static_cast<int64_t>(getWorldSize());
  int64_t align = static_cast<int64_t>(getAlignment());
  int64_t numel = static_cast<int64_t>(getNumel());
  int64_t padded = static_cast<int64_t>(getPaddedNumel());
  int64_t stage = static_cast<int64_t>(getStage());
  if (stage < 0 || stage > 3)
    return emitOpError("stage must be 0, 1, 2 or 3, got ") << stage;
  if (ws < 1)
    return emitOpError("world_size must be >= 1, got ") << ws;
  if (ws > kMaxWorldSize)
    return emitOpError("world_size must be at most ")
           << kMaxWorldSize << " (2^20), got " << ws;
  if (align < 1)
    return emitOpError("alignment must be >= 1, got ") << align;
  if (getParams().empty())
    return emitOpError("needs at least one parameter");
  if (numel < 0)
    return emitOpError("numel must be >= 0, got ") << numel;
  if (padded < numel)
    return emitOpError("padded size ") << padded << " is below numel " << numel;
  if (getOffsets().size() != getParams().size())
    return emitOpError("has ") << getParams().size() << " params but "
                               << getOffsets().size() << " offsets";
  int64_t unit;
  if (__builtin_mul_overflow(ws, align, &unit))
    return emitOpError("world_size * alignment = ")
           << ws << " * " << align << " overflows int64";
  if (std::optional<ArrayRef<int64_t>> owners = getOwners()) {
    // Owner-computes shards Muon's matrices: nothing to own unsharded.
    if (stage == 0 || getFrozen())
      return emitOpError("owners need a sharded trainable partition (stage "
                         "1-3, not frozen)");
    if (owners->size() != getParams().size())
      return emitOpError("has ") << getParams().size() << " params but "
                                 << owners->size() << " owners";
    for (int64_t owner : *owners)
      if (owner < -1 || owner >= ws)
        return emitOpError("owner ")
               << owner << " is not a rank of " << ws << " (or -1: AdamW's)";
  }
  if (stage == 0) {
    if (padded != numel)
      return emitOpError("a stage-0 partition is not sharded: padded size must "
                         "equal numel ")
             << numel;
    return success();
  }
  if (padded % unit != 0)
    return emitOpError("padded size ")
           << padded
           << " is not a multiple of world_size * alignment = " << unit;
  // Owner-computes may enlarge the slots past the minimal padding (gaps).
  if (!getOwners() && padded - numel >= unit)
    return emitOpError("padding ")
           << padded - numel
           << " is not minimal (world_size * alignment = " << unit << ")";
  return success();
}

int64_t PartitionOp::getQuantizedSlotBytes(int32_t bits) {
  ArrayRef<int64_t> starts = getOffsets();
  return zrt_quant_slot_bytes(starts.data(), int64_t(starts.size()),
                              getShardNumel(), getWorldSizeValue(), bits);
}

/// Each owned parameter is a matrix whole in its owner's shard.
LogicalResult PartitionOp::verifyOwners(SymbolTableCollection &tables) {
  std::optional<ArrayRef<int64_t>> owners = getOwners();
  if (!owners)
    return success();
  auto module = (*this)->getParentOfType<ModuleOp>();
  int64_t shard = getShardNumel();
  for (auto [ref, offset, owner] :
       llvm::zip(getParams(), getOffsets(), *owners)) {
    if (owner < 0)
      continue;
    auto param =
        tables.lookupSymbolIn<ParamOp>(module, cast<SymbolRefAttr>(ref));
    if (param.getComputeTensorType().getRank() != 2)
      return emitOpError("owned parameter ")
             << ref << " is not a matrix (Muon's owners own 2-D parameters)";
    int64_t end = offset + param.getNumElements();
    if (offset < owner * shard || end > (owner + 1) * shard)
      return emitOpError("parameter ")
             << ref << " (elements [" << offset << ", " << end
             << ")) is not whole in its owner rank " << owner << "'s shard ["
             << owner * shard << ", " << (owner + 1) * shard << ")";
  }
  return success();
}

LogicalResult PartitionOp::verifySymbolUses(SymbolTableCollection &tables) {
  auto module = (*this)->getParentOfType<ModuleOp>();
  int64_t next = 0;
  llvm::SmallDenseSet<Attribute> seen;
  for (auto [ref, offset] : llvm::zip(getParams(), getOffsets())) {
    auto sym = cast<SymbolRefAttr>(ref);
    auto param = tables.lookupSymbolIn<ParamOp>(module, sym);
    if (!param)
      return emitOpError("references unknown parameter ") << sym;
    if (!seen.insert(sym).second)
      return emitOpError("lists parameter ") << sym << " twice";
    // A partition's buffers exist for all of it or none of it.
    if (param.getFrozen() != getFrozen())
      return emitOpError("parameter ")
             << sym << " is " << (param.getFrozen() ? "frozen" : "trainable")
             << ", but the partition is "
             << (getFrozen() ? "frozen" : "trainable")
             << " (a partition holds only trainable or only frozen "
                "parameters)";
    // Owner-computes' enlarged slots leave gaps between parameters.
    if (offset < next)
      return emitOpError("parameter ")
             << sym << " is at offset " << offset
             << ", which overlaps the parameter before it (ending at " << next
             << ")";
    if (offset != next && !getOwners())
      return emitOpError("parameter ")
             << sym << " is at offset " << offset << ", expected " << next
             << " (parameters are contiguous in the order listed; only "
                "Muon's owner-computes, with owners, leaves gaps)";
    next = offset;
    if (__builtin_add_overflow(next, param.getNumElements(), &next))
      return emitOpError("parameters hold more than ")
             << std::numeric_limits<int64_t>::max()
             << " elements (int64 overflows)";
  }
  if (next != static_cast<int64_t>(getNumel()))
    return emitOpError("parameters end at element ")
           << next << " but numel is " << getNumel();
  if (failed(verifyOwners(tables)))
    return failure();
  // The memory plan's buffers: a master copy exactly when the parameters
  // are not their own masters.
  auto *dialect = getContext()->getLoadedDialect<ZeroDialect>();
  if (BufferOffsetsAttr buffers =
          dialect->getBuffersAttrHelper().getAttr(*this)) {
    // A frozen partition keeps its parameters only; a trainable one has
    // gradients and its optimizer's states (optimizers.def).
    if (getFrozen()) {
      for (unsigned k = 0; k <= getMaxEnumValForBufferKind(); ++k)
        if (auto kind = static_cast<BufferKind>(k);
            kind != BufferKind::params && kind != BufferKind::secondary &&
            buffers.getOffset(kind))
          return emitOpError("buffers ")
                 << buffers << " of a frozen partition have "
                 << stringifyBufferKind(kind)
                 << " (a frozen partition has params only)";
      return success();
    }
    // The states of the module's optimizer (Adam's without a train step).
    SmallVector<OptimizerState> states =
        getOptimizerStates(OptimizerKind::adam);
    OptimizerAttr stepOptimizer;
    if (auto steps = module.getOps<TrainStepOp>(); !steps.empty()) {
      stepOptimizer = (*steps.begin()).getOptimizer();
      states = getOptimizerStates(stepOptimizer);
    }
    SmallVector<BufferKind> required = {BufferKind::grads};
    SmallVector<BufferKind> swapped = {BufferKind::master};
    for (const OptimizerState &state : states) {
      required.push_back(state.buffer);
      swapped.push_back(state.buffer);
    }
    for (BufferKind kind : required)
      if (!buffers.getOffset(kind))
        return emitOpError("buffers ")
               << buffers << " lack " << stringifyBufferKind(kind)
               << " (only a frozen partition has params only)";
    // States on NVMe: the updated parameters always come back through
    // host_params, and the states sit at aligned offsets of the swap file.
    bool nvme = llvm::any_of(module.getOps<TrainStepOp>(), [](TrainStepOp s) {
      return getOptimizerOffload(s) == OffloadDevice::nvme;
    });
    bool paramNvme =
        llvm::any_of(module.getOps<TrainStepOp>(), [](TrainStepOp s) {
          return getParamOffload(s) == OffloadDevice::nvme;
        });
    if (paramNvme && buffers.getParams() % kNvmeAlignment)
      return emitOpError("buffers ")
             << buffers
             << ": params lives in the parameter swap file, so its offset "
                "must be a multiple of "
             << kNvmeAlignment << ", got " << buffers.getParams();
    if (nvme)
      for (BufferKind kind : swapped)
        if (std::optional<int64_t> at = buffers.getOffset(kind);
            at && *at % kNvmeAlignment)
          return emitOpError("buffers ")
                 << buffers << ": " << stringifyBufferKind(kind)
                 << " lives in the NVMe swap file, so its offset must be a "
                    "multiple of "
                 << kNvmeAlignment << ", got " << *at;
    for (Attribute ref : getParams()) {
      auto param =
          tables.lookupSymbolIn<ParamOp>(module, cast<SymbolRefAttr>(ref));
      Type compute = param.getComputeTensorType().getElementType();
      bool masters = areParamsMasters(compute, stepOptimizer);
      // An offloaded optimizer (host_grads) keeps fp32 masters on the host
      // even for fp32 parameters.
      bool offloaded = buffers.getHostGrads().has_value();
      // Offloaded fp32 parameter shards need a device master for a device
      // optimizer (looked up only then: a scan of the module per partition
      // would make verification quadratic).
      auto paramsOffloaded = [&] {
        for (TrainStepOp step : module.getOps<TrainStepOp>())
          if (offloadsParams(step))
            return true;
        return false;
      };
      auto paramsOnHost = [&] {
        for (TrainStepOp step : module.getOps<TrainStepOp>())
          if (keepsParamsOnHost(step))
            return true;
        return false;
      };
      if (!offloaded && masters == buffers.getMaster().has_value() &&
          !(masters && paramsOffloaded()))
        return emitOpError("buffers ")
               << buffers << (masters ? " have" : " lack")
               << " a master buffer, but parameter " << ref << " computes in "
               << compute
               << (!masters ? " (16-bit parameters need fp32 masters)"
                   : compute.isF32()
                       ? " (fp32 parameters are their own masters)"
                       : " (bf16 parameters with bf16_masters are "
                         "their own masters)");
      // States on NVMe: a master for every compute type, and host_params
      // unless the host Adam writes offloaded parameter shards in place.
      if (offloaded && nvme && !buffers.getMaster())
        return emitOpError("buffers ")
               << buffers << " of an optimizer offloaded to nvme need a "
               << "master";
      if (offloaded && nvme &&
          buffers.getHostParams().has_value() == paramsOnHost())
        return emitOpError("buffers ")
               << buffers << " of an optimizer offloaded to nvme "
               << (paramsOnHost()
                       ? "have host_params, but the parameter shards are "
                         "offloaded too (the host Adam writes them in place)"
                       : "need host_params");
      // With the parameter shards offloaded too, the host Adam writes them
      // in place: no host_params, and fp32 parameters are their own masters.
      if (offloaded && !nvme && buffers.getHostParams() && masters)
        return emitOpError("buffers ")
               << buffers << " of an offloaded optimizer have host_params, "
               << "but parameter " << ref << " computes in " << compute
               << " (fp32 parameters go back from their master)";
      if (offloaded && !nvme && !buffers.getMaster() && !masters)
        return emitOpError("buffers ")
               << buffers << " of an offloaded optimizer lack a master, but "
               << "parameter " << ref << " computes in " << compute;
      if (!offloaded && buffers.getHostParams())
        return emitOpError("buffers ")
               << buffers << " have host_params but no host_grads";
    }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

static FailureOr<PartitionOp>
lookupGroup(Operation *op, SymbolTableCollection &tables, SymbolRefAttr ref) {
  auto module = op->getParentOfType<ModuleOp>();
  auto group = tables.lookupSymbolIn<PartitionOp>(module, ref);
  if (!group)
    return op->emitOpError("references unknown partition ") << ref;
  return group;
}

/// The element count of a statically shaped tensor; -1 for a dynamic shape.
static int64_t numel(Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  return t.hasStaticShape() ? t.getNumElements() : -1;
}

/// A buffer range `[begin, end)` is given exactly with a buffer kind.
static LogicalResult verifyBufferRangeAttrs(Operation *op,
                                            std::optional<BufferKind> buffer,
                                            bool hasBegin, bool hasEnd) {
  if (buffer && (!hasBegin || !hasEnd))
    return op->emitOpError("in-place form needs a range [begin, end)");
  if (!buffer && (hasBegin || hasEnd))
    return op->emitOpError("a range [begin, end) needs a buffer (in-place "
                           "form)");
  return success();
}

/// Checks `[begin, end)` against the group's layout.
static LogicalResult verifyRange(Operation *op, PartitionOp group,
                                 int64_t begin, int64_t end) {
  if (begin < 0 || end <= begin || end > group.getNumelValue())
    return op->emitOpError("range [")
           << begin << ", " << end << ") is empty or outside the "
           << group.getNumelValue() << " elements of partition @"
           << group.getSymName();
  return success();
}

/// The element type of the group's 16-bit (compute) buffers.
static Type computeElementType(PartitionOp group,
                               SymbolTableCollection &tables) {
  auto module = group->getParentOfType<ModuleOp>();
  for (Attribute a : group.getParams())
    if (auto p = tables.lookupSymbolIn<ParamOp>(module, cast<SymbolRefAttr>(a)))
      return p.getComputeTensorType().getElementType();
  return {};
}

LogicalResult AllGatherOp::verify() {
  if (failed(verifyBufferRangeAttrs(*this, getBuffer(), getBegin().has_value(),
                                    getEnd().has_value())))
    return failure();
  bool inPlace = getBuffer().has_value();
  if (inPlace != (getResult() == nullptr))
    return emitOpError("has either a buffer range (in place) or a result, "
                       "exactly one");
  if (inPlace && getBuffer() != BufferKind::params)
    return emitOpError("gathers the 'params' buffer, not '")
           << stringifyBufferKind(*getBuffer()) << "'";
  if (inPlace && getShard())
    return emitOpError("gathers in place, so it reads no staged shard");
  if (getSecondary() && inPlace)
    return emitOpError("gathers the hpZ secondary shards into a new buffer, "
                       "never in place");
  if (getSecondary() && getPersistent())
    return emitOpError("of the hpZ secondary shards cannot be persistent: a "
                       "kept gather is the first of the step, before any "
                       "secondary shard is stored");
  if (getSecondary() && getPhase() != Phase::micro_step)
    return emitOpError("of the hpZ secondary shards must run in every micro "
                       "step (phase micro_step), not ")
           << stringifyPhase(getPhase());
  if (inPlace && getQuantized())
    return emitOpError("quantizes only the value form of a stage-3 gather, "
                       "not an in-place gather");
  return success();
}

/// hpZ: the step of `op` keeps secondary shards over its hpZ groups.
static LogicalResult verifyHpzStep(Operation *op, StringRef what) {
  auto step = op->getParentOfType<TrainStepOp>();
  ScheduleAttr schedule = step ? step.getScheduleAttr() : ScheduleAttr();
  if (!schedule || schedule.getHpzPartitionSize() <= 1)
    return op->emitOpError(what)
           << ", but the train step's schedule has no hpZ "
              "(hpz_partition_size > 1)";
  if (offloadsParams(step))
    return op->emitOpError(what)
           << ", but the train step offloads its parameters, which hpZ does "
              "not support";
  return success();
}

LogicalResult StoreSecondaryOp::verify() {
  if (getPhase() != Phase::micro_step && getPhase() != Phase::first_micro_step)
    return emitOpError("stores the hpZ secondary shard before the gathers "
                       "that read it in the same optimizer step: its phase "
                       "must be micro_step or first_micro_step, not ")
           << stringifyPhase(getPhase());
  return verifyHpzStep(*this, "stores an hpZ secondary shard");
}

/// A staged shard (`from`) of a stage-3 gather: exactly when the step
/// offloads its parameter shards, the shard of `group` in the compute type.
static LogicalResult verifyStagedShard(Operation *op, PartitionOp group,
                                       TypedValue<RankedTensorType> shard,
                                       TypedValue<RankedTensorType> result) {
  auto step = op->getParentOfType<TrainStepOp>();
  if (step && offloadsParams(step) != (shard != nullptr))
    return op->emitOpError(shard ? "reads a staged shard, but the train step "
                                   "does not offload its parameters"
                                 : "reads the parameter shard in place, but "
                                   "the train step offloads its parameters "
                                   "(#zero.offload): it must read a staged "
                                   "shard ('from')");
  if (!shard)
    return success();
  if (!shard.getType().hasStaticShape() ||
      shard.getType().getNumElements() != group.getShardNumel() ||
      shard.getType().getElementType() != result.getType().getElementType())
    return op->emitOpError("staged shard ")
           << shard.getType() << " must hold the " << group.getShardNumel()
           << " elements of a shard of @" << group.getSymName() << " in "
           << result.getType().getElementType();
  if (!isa_and_nonnull<TransferOp>(shard.getDefiningOp()))
    return op->emitOpError("staged shard must be the result of a "
                           "zero.transfer ... params to staging");
  return success();
}

/// A quantized stage-3 gather (qwZ): 16-bit weights, read in place from
/// the device shard (a staged shard is an offloaded one).
static LogicalResult
verifyQuantizedGather(Operation *op, bool quantized,
                      TypedValue<RankedTensorType> shard,
                      TypedValue<RankedTensorType> result) {
  if (!quantized)
    return success();
  Type et = result.getType().getElementType();
  if (!et.isBF16() && !et.isF16())
    return op->emitOpError("quantizes 16-bit weights (bf16 or f16), not ")
           << et;
  if (shard)
    return op->emitOpError("is quantized, so it reads the params shard on "
                           "the device, not a staged shard");
  return success();
}

/// The value form of a stage-3 gather (zero.all_gather, zero.prefetch): a
/// stage-3 partition gathered whole into a buffer of the compute type.
static LogicalResult verifyStage3Gather(Operation *op, PartitionOp group,
                                        TypedValue<RankedTensorType> result,
                                        SymbolTableCollection &tables,
                                        StringRef wrongStage,
                                        StringRef what = "result") {
  if (group.getStageValue() != 3)
    return op->emitOpError(wrongStage)
           << group.getSymName() << " is stage " << group.getStageValue();
  if (!result.getType().hasStaticShape() ||
      result.getType().getNumElements() != group.getPaddedNumelValue())
    return op->emitOpError(what)
           << " " << result.getType() << " must hold the "
           << group.getPaddedNumelValue() << " (padded) elements of partition @"
           << group.getSymName();
  Type et = computeElementType(group, tables);
  Type resultEt = result.getType().getElementType();
  if (et && resultEt != et)
    return op->emitOpError(what) << " element type must be the compute type "
                                 << et << ", got " << resultEt;
  return success();
}

/// A gather of the hpZ secondary shards (`secondary`) reads the device
/// buffer zero.store_secondary filled, never a staged parameter shard.
static LogicalResult verifySecondaryGather(Operation *op, Value shard,
                                           bool quantized) {
  if (quantized)
    return op->emitOpError("gathers the 16-bit hpZ secondary shards, so it "
                           "cannot be quantized");
  if (shard)
    return op->emitOpError("gathers the hpZ secondary shards, so it reads no "
                           "staged parameter shard");
  return verifyHpzStep(op, "gathers the hpZ secondary shards");
}

LogicalResult AllGatherOp::verifySymbolUses(SymbolTableCollection &tables) {
  auto group = lookupGroup(*this, tables, getGroupAttr());
  if (failed(group))
    return failure();
  if (getBuffer()) {
    if (group->getStageValue() == 3 || group->getStageValue() == 0)
      return emitOpError("in-place gather of 'params' needs a stage 1 or 2 "
                         "partition, @")
             << group->getSymName() << " is stage " << group->getStageValue();
    return verifyRange(*this, *group, static_cast<int64_t>(*getBegin()),
                       static_cast<int64_t>(*getEnd()));
  }
  if (failed(verifyStage3Gather(*this, *group, getResult(), tables,
                                "gathers shards into a new buffer only at "
                                "stage 3, @")) ||
      failed(verifyQuantizedGather(*this, getQuantized(), getShard(),
                                   getResult())))
    return failure();
  if (getSecondary())
    return verifySecondaryGather(*this, getShard(), getQuantized());
  return verifyStagedShard(*this, *group, getShard(), getResult());
}

LogicalResult PrefetchOp::verifySymbolUses(SymbolTableCollection &tables) {
  auto group = lookupGroup(*this, tables, getGroupAttr());
  if (failed(group))
    return failure();
  if (failed(verifyStage3Gather(*this, *group, getResult(), tables,
                                "prefetches only stage-3 partitions, @")) ||
      failed(verifyQuantizedGather(*this, getQuantized(), getShard(),
                                   getResult())))
    return failure();
  if (getSecondary())
    return verifySecondaryGather(*this, getShard(), getQuantized());
  return verifyStagedShard(*this, *group, getShard(), getResult());
}

LogicalResult
StoreSecondaryOp::verifySymbolUses(SymbolTableCollection &tables) {
  auto group = lookupGroup(*this, tables, getGroupAttr());
  if (failed(group))
    return failure();
  return verifyStage3Gather(*this, *group, getFull(), tables,
                            "stores the secondary shard of stage-3 "
                            "partitions only, @",
                            "gathered buffer");
}

/// Shared checks of zero.reduce_scatter and zero.reduce.
template <typename OpT>
static LogicalResult verifyGradReduction(OpT op) {
  bool inPlace = op.getBuffer().has_value();
  if (inPlace && !op.getSources().empty())
    return op.emitOpError(
        "has either a buffer (in place) or sources, not both");
  if (!inPlace && op.getSources().empty())
    return op.emitOpError("needs a buffer (in place) or source gradients");
  if (inPlace && *op.getBuffer() != BufferKind::grads)
    return op.emitOpError("reduces the 'grads' buffer, not '")
           << stringifyBufferKind(*op.getBuffer()) << "'";
  if (op.getSourceOffsets().size() != op.getSources().size())
    return op.emitOpError("has ")
           << op.getSources().size() << " sources but "
           << op.getSourceOffsets().size() << " source offsets";
  int64_t total = 0;
  for (auto [src, off] : llvm::zip(op.getSources(), op.getSourceOffsets())) {
    int64_t n = numel(src);
    if (n < 0)
      return op.emitOpError("source ")
             << src.getType() << " must have a static shape";
    if (off < 0 || off >= n)
      return op.emitOpError("source offset ")
             << off << " is outside a source of " << n << " elements";
    total += n - off;
  }
  int64_t begin = static_cast<int64_t>(op.getBegin());
  int64_t end = static_cast<int64_t>(op.getEnd());
  // Every source but the last is used to its end; the last may stop early.
  if (!inPlace) {
    int64_t lastLen =
        numel(op.getSources().back()) - op.getSourceOffsets().back();
    if (total < end - begin || total - lastLen >= end - begin)
      return op.emitOpError("sources provide ")
             << total << " elements (the last one " << lastLen
             << "), which does not cover the range of " << end - begin
             << " elements exactly";
  }
  return success();
}

template <typename OpT>
static LogicalResult verifyGradReductionSymbols(OpT op,
                                                SymbolTableCollection &tables) {
  auto group = lookupGroup(op, tables, op.getGroupAttr());
  if (failed(group))
    return failure();
  if (op.getBuffer() && group->getStageValue() != 1)
    return op.emitOpError("reduces the full 'grads' buffer in place only at "
                          "stage 1, @")
           << group->getSymName() << " is stage " << group->getStageValue();
  if (!op.getBuffer() && group->getStageValue() < 2)
    return op.emitOpError("reduces source gradients only at stages 2-3, @")
           << group->getSymName() << " is stage " << group->getStageValue();
  return verifyRange(op, *group, static_cast<int64_t>(op.getBegin()),
                     static_cast<int64_t>(op.getEnd()));
}

/// A quantized reduce-scatter (ZeRO++ qgZ): gradient values (bf16, f16 or
/// f32, as every source is), reduced over the world of a train step that
/// spans several nodes (its two all-to-alls are the node's and the
/// cross-node level's).
static LogicalResult verifyQuantizedReduceScatter(ReduceScatterOp op) {
  if (op.getSources().empty())
    return op.emitOpError("is quantized, so it reduces gradient values "
                          "('from'), not the 'grads' buffer in place");
  auto step = op->getParentOfType<TrainStepOp>();
  ScheduleAttr schedule = step ? step.getScheduleAttr() : ScheduleAttr();
  if (!schedule)
    return op.emitOpError("is quantized, so it must be in a zero.train_step "
                          "with a #zero.schedule");
  if (schedule.getMicsShardSize() > 0)
    return op.emitOpError("is quantized, but the train step partitions over "
                          "MiCS shard groups (mics_shard_size ")
           << schedule.getMicsShardSize() << "), which qgZ does not";
  zrt_rank_set world = {0, 1, schedule.getWorldSize()};
  int64_t perNode = zrt_members_per_node(world, schedule.getRanksPerNode());
  if (perNode == 0 || perNode >= world.size)
    return op.emitOpError("is quantized, so its ranks must span several "
                          "nodes; the train step's ")
           << world.size << " ranks are on one node (ranks_per_node "
           << schedule.getRanksPerNode() << ")";
  return success();
}

LogicalResult ReduceScatterOp::verify() {
  if (failed(verifyGradReduction(*this)))
    return failure();
  return getQuantized() ? verifyQuantizedReduceScatter(*this) : success();
}
LogicalResult ReduceScatterOp::verifySymbolUses(SymbolTableCollection &tables) {
  if (failed(verifyGradReductionSymbols(*this, tables)))
    return failure();
  if (!getQuantized())
    return success();
  PartitionOp group = *lookupGroup(*this, tables, getGroupAttr());
  if (group.getStageValue() != 3)
    return emitOpError("is quantized (ZeRO++ qgZ), which reduces stage-3 "
                       "gradients only, @")
           << group.getSymName() << " is stage " << group.getStageValue();
  return success();
}
LogicalResult ReduceOp::verify() { return verifyGradReduction(*this); }
LogicalResult ReduceOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyGradReductionSymbols(*this, tables);
}

LogicalResult AllReduceOp::verify() {
  if (failed(verifyBufferRangeAttrs(*this, getBuffer(), getBegin().has_value(),
                                    getEnd().has_value())))
    return failure();
  bool inPlace = getBuffer().has_value();
  if (inPlace == (getInput() != nullptr))
    return emitOpError("has either a buffer range (in place) or an input, "
                       "exactly one");
  if (inPlace) {
    if (*getBuffer() != BufferKind::grads)
      return emitOpError("reduces the 'grads' buffer in place, not '")
             << stringifyBufferKind(*getBuffer()) << "'";
    if (getKind() != ReduceKind::sum)
      return emitOpError("in-place gradient reduction must be 'sum', got '")
             << stringifyReduceKind(getKind()) << "'";
    if (getResult())
      return emitOpError("in-place form has no result value");
  } else if (getOverReplicas()) {
    return emitOpError("sums gradients over the MiCS replicas in place: it "
                       "needs a 'grads' range, not an input");
  } else {
    if (!getResult())
      return emitOpError("value form needs a result of the input's type ")
             << getInput().getType();
    if (getResult().getType() != getInput().getType())
      return emitOpError("result type ")
             << getResult().getType() << " must be the input type "
             << getInput().getType();
    if (getKind() == ReduceKind::overflow_norm && numel(getInput()) != 2)
      return emitOpError("'overflow_norm' reduces a tensor<2xf32> (flag, "
                         "squared norm), got ")
             << getInput().getType();
    if (!reducesOptimizerStats() && getKind() != ReduceKind::sum)
      return emitOpError("an integer value (a router's expert counts) is "
                         "reduced by 'sum', not '")
             << stringifyReduceKind(getKind()) << "'";
    if (!reducesOptimizerStats() && getToken())
      return emitOpError("an integer value (a router's expert counts) is "
                         "reduced synchronously: it has no token");
  }
  return verifyNamedRankSet();
}

/// `across expert`: only the expert partitions' statistics at stage 0 under
/// expert parallelism name their rank set.
LogicalResult AllReduceOp::verifyNamedRankSet() {
  std::optional<RankSetKind> set = getRankSet();
  if (!set)
    return success();
  if (*set != RankSetKind::expert)
    return emitOpError("names only the 'expert' rank set (the expert "
                       "partitions' statistics), not '")
           << stringifyRankSetKind(*set) << "'";
  if (getBuffer() || getKind() != ReduceKind::overflow_norm)
    return emitOpError("reduces over the expert-parallel set only the "
                       "'overflow_norm' value form (the expert partitions' "
                       "statistics)");
  auto step = (*this)->getParentOfType<TrainStepOp>();
  if (ScheduleAttr schedule = step ? step.getScheduleAttr() : ScheduleAttr();
      schedule && schedule.getExpertParallel() == 1)
    return emitOpError("reduces over the expert-parallel set, but the "
                       "schedule's expert_parallel is 1");
  return success();
}

LogicalResult AllReduceOp::verifySymbolUses(SymbolTableCollection &tables) {
  auto group = lookupGroup(*this, tables, getGroupAttr());
  if (failed(group))
    return failure();
  if (getRankSet() && !group->getExpert())
    return emitOpError("reduces over the expert-parallel set the statistics "
                       "of an expert partition, but @")
           << group->getSymName() << " is not one";
  if (getRankSet() && group->getStageValue() != 0)
    return emitOpError("reduces the expert statistics over the "
                       "expert-parallel set only at stage 0 (each rank holds "
                       "its experts whole), @")
           << group->getSymName() << " is stage " << group->getStageValue();
  if (!getBuffer())
    return success();
  // In place: the full buffer at stage 0, or a stage-3 shard over its MiCS
  // replicas.
  if (getOverReplicas() && group->getStageValue() != 3)
    return emitOpError("sums gradient shards over the MiCS replicas only at "
                       "stage 3, @")
           << group->getSymName() << " is stage " << group->getStageValue();
  if (!getOverReplicas() && group->getStageValue() != 0)
    return emitOpError("all-reduces the 'grads' buffer in place only at stage "
                       "0, @")
           << group->getSymName() << " is stage " << group->getStageValue();
  return verifyRange(*this, *group, static_cast<int64_t>(*getBegin()),
                     static_cast<int64_t>(*getEnd()));
}

//===----------------------------------------------------------------------===//
// CountLabelsOp / LabelShareOp
//===----------------------------------------------------------------------===//

CollectiveKind CountLabelsOp::getCollectiveKind() {
  return CollectiveKind::all_reduce;
}
std::optional<std::pair<int64_t, int64_t>> CountLabelsOp::getElementRange() {
  return std::nullopt;
}
std::optional<BufferKind> CountLabelsOp::getInPlaceBuffer() {
  return std::nullopt;
}
Value CountLabelsOp::getMovedValue() { return getCount(); }
Value CountLabelsOp::getToken() { return Value(); }
RankSetKind CountLabelsOp::getRankSetKind() { return RankSetKind::world; }

LogicalResult CountLabelsOp::verify() {
  if (numel(getCount()) != 1)
    return emitOpError("the count is one int64, a tensor<1xi64>, got ")
           << getCount().getType();
  if (getPhase() != Phase::first_micro_step)
    return emitOpError("counts the labels before the first backward of the "
                       "optimizer step: its phase must be first_micro_step, "
                       "not ")
           << stringifyPhase(getPhase());
  return success();
}

LogicalResult CountLabelsOp::verifySymbolUses(SymbolTableCollection &tables) {
  return failure(failed(lookupGroup(*this, tables, getGroupAttr())));
}

LogicalResult LabelShareOp::verify() {
  if (!(getDivisor().convertToDouble() >= 1.0))
    return emitOpError("divisor must be at least 1 (world size times "
                       "accumulation steps), got ")
           << getDivisor().convertToDouble();
  auto step = (*this)->getParentOfType<TrainStepOp>();
  if (step && step.getBodyBlock().getOps<CountLabelsOp>().empty())
    return emitOpError("reads the step's label counts, but the step has no "
                       "zero.count_labels");
  return success();
}

//===----------------------------------------------------------------------===//
// CountSumOp / StepSumOp / MicroShareOp
//===----------------------------------------------------------------------===//

CollectiveKind CountSumOp::getCollectiveKind() {
  return CollectiveKind::all_reduce;
}
std::optional<std::pair<int64_t, int64_t>> CountSumOp::getElementRange() {
  return std::nullopt;
}
std::optional<BufferKind> CountSumOp::getInPlaceBuffer() {
  return std::nullopt;
}
Value CountSumOp::getMovedValue() { return getSum(); }
// The runtime sums the ranks' double-precision sums (zrt_ctx_all_reduce_sum).
int64_t CountSumOp::getWireElementBytes() { return sizeof(double); }
Value CountSumOp::getToken() { return Value(); }
RankSetKind CountSumOp::getRankSetKind() { return RankSetKind::world; }

LogicalResult CountSumOp::verify() {
  if (numel(getSum()) != 1)
    return emitOpError("the sum is one fp32, a tensor<1xf32>, got ")
           << getSum().getType();
  if (getPhase() != Phase::first_micro_step)
    return emitOpError("sums before the first backward of the optimizer "
                       "step: its phase must be first_micro_step, not ")
           << stringifyPhase(getPhase());
  auto step = (*this)->getParentOfType<TrainStepOp>();
  if (!step)
    return success();
  uint64_t before = 0;
  for (CountSumOp other : step.getBodyBlock().getOps<CountSumOp>()) {
    if (other == *this)
      break;
    ++before;
  }
  if (getIndex() != before)
    return emitOpError("is the step's zero.count_sum number ")
           << before << " but has index " << getIndex()
           << " (indices are 0, 1, ... in the order of the ops)";
  return success();
}

LogicalResult CountSumOp::verifySymbolUses(SymbolTableCollection &tables) {
  return failure(failed(lookupGroup(*this, tables, getGroupAttr())));
}

LogicalResult StepSumOp::verify() {
  auto step = (*this)->getParentOfType<TrainStepOp>();
  if (!step)
    return success();
  for (CountSumOp count : step.getBodyBlock().getOps<CountSumOp>())
    if (count.getIndex() == getIndex()) {
      if (count->getBlock() != (*this)->getBlock() ||
          !count->isBeforeInBlock(*this))
        return emitOpError("reads the sum of the zero.count_sum of index ")
               << getIndex() << ", which must come before it";
      return success();
    }
  return emitOpError("reads the sum of index ")
         << getIndex() << ", but the step has no zero.count_sum of it";
}

LogicalResult MicroShareOp::verify() {
  if (!(getDivisor().convertToDouble() >= 1.0))
    return emitOpError("divisor must be at least 1 (world size times "
                       "accumulation steps), got ")
           << getDivisor().convertToDouble();
  return success();
}

//===----------------------------------------------------------------------===//
// FreeOp
//===----------------------------------------------------------------------===//

/// `phase P` of the custom assembly formats (absent: the default).
static ParseResult parseOptionalPhase(OpAsmParser &parser,
                                      OperationState &result, StringAttr name) {
  if (failed(parser.parseOptionalKeyword("phase")))
    return success();
  StringRef keyword;
  SMLoc at = parser.getCurrentLocation();
  if (parser.parseKeyword(&keyword))
    return failure();
  std::optional<Phase> phase = symbolizePhase(keyword);
  if (!phase)
    return parser.emitError(at, "expected a phase (micro_step, "
                                "last_micro_step, step_end, boundary or "
                                "post_step), got '")
           << keyword << "'";
  result.addAttribute(name, PhaseAttr::get(parser.getContext(), *phase));
  return success();
}

ParseResult FreeOp::parse(OpAsmParser &parser, OperationState &result) {
  OpAsmParser::UnresolvedOperand buffer;
  if (parser.parseOperand(buffer))
    return failure();
  if (succeeded(parser.parseOptionalLSquare())) {
    int64_t offset, size;
    if (parser.parseInteger(offset) || parser.parseComma() ||
        parser.parseInteger(size) || parser.parseRSquare())
      return failure();
    Builder &b = parser.getBuilder();
    result.addAttribute(getOffsetAttrName(result.name),
                        b.getI64IntegerAttr(offset));
    result.addAttribute(getSizeAttrName(result.name),
                        b.getI64IntegerAttr(size));
  }
  if (failed(parseOptionalPhase(parser, result, getPhaseAttrName(result.name))))
    return failure();
  Type type;
  if (parser.parseOptionalAttrDict(result.attributes) || parser.parseColon() ||
      parser.parseType(type) ||
      parser.resolveOperand(buffer, type, result.operands))
    return failure();
  return success();
}

void FreeOp::print(OpAsmPrinter &p) {
  p << ' ' << getBuffer();
  if (getOffset())
    p << '[' << *getOffset() << ", " << *getSize() << ']';
  if (getPhase() != Phase::micro_step)
    p << " phase " << stringifyPhase(getPhase());
  p.printOptionalAttrDict(
      (*this)->getAttrs(),
      {getOffsetAttrName(), getSizeAttrName(), getPhaseAttrName()});
  p << " : " << getBuffer().getType();
}

LogicalResult FreeOp::verify() {
  if (getOffset().has_value() != getSize().has_value())
    return emitOpError("offset and size must be given together");
  if (getOffset()) {
    int64_t offset = static_cast<int64_t>(*getOffset());
    int64_t size = static_cast<int64_t>(*getSize());
    int64_t n = numel(getBuffer());
    if (n < 0)
      return emitOpError("freeing a range needs a statically shaped buffer, "
                         "got ")
             << getBuffer().getType();
    if (offset < 0 || size <= 0 || offset > n || size > n - offset)
      return emitOpError("range at offset ")
             << offset << " of size " << size
             << " is empty or outside the buffer of " << n << " elements";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Activation offload
//===----------------------------------------------------------------------===//

/// A token's users: at most one, a zero.wait.
static LogicalResult verifyCopyToken(Operation *op, Value token) {
  if (!token)
    return success();
  if (!token.hasOneUse() || !isa<WaitOp>(*token.getUsers().begin()))
    return op->emitOpError("token must be waited by exactly one zero.wait");
  return success();
}

LogicalResult OffloadActivationOp::verify() {
  // Kernels read step-arena memory only: the host copy comes back first.
  for (Operation *user : getHost().getUsers())
    if (!isa<ReloadActivationOp>(user))
      return emitOpError("host copy is read by '")
             << user->getName()
             << "'; only zero.reload_activation reads host memory";
  return verifyCopyToken(*this, getToken());
}

Value OffloadActivationOp::getDeviceValue() { return getInput(); }
Value OffloadActivationOp::getHostValue() { return getHost(); }
bool OffloadActivationOp::copiesToHost() { return true; }

LogicalResult ReloadActivationOp::verify() {
  if (!getHost().getDefiningOp<OffloadActivationOp>())
    return emitOpError("reads a value that zero.offload_activation did not "
                       "write to host memory");
  return verifyCopyToken(*this, getToken());
}

Value ReloadActivationOp::getDeviceValue() { return getResult(); }
Value ReloadActivationOp::getHostValue() { return getHost(); }
bool ReloadActivationOp::copiesToHost() { return false; }

//===----------------------------------------------------------------------===//
// Optimizer ops
//===----------------------------------------------------------------------===//

LogicalResult CheckOverflowOp::verify() {
  if (getGroups().empty())
    return emitOpError("needs at least one partition");
  if (numel(getResult()) != 2)
    return emitOpError("result must be tensor<2xf32> (overflow flag, squared "
                       "norm), got ")
           << getResult().getType();
  double divisor = getDivisor().convertToDouble();
  if (!(divisor >= 1.0) || !std::isfinite(divisor))
    return emitOpError("divisor must be finite and >= 1, got ") << divisor;
  if (getPartial() && getPartial().getType() != getResult().getType())
    return emitOpError("combines statistics of type ")
           << getPartial().getType() << " into a result of type "
           << getResult().getType() << ": they must be equal";
  return success();
}

LogicalResult CheckOverflowOp::verifySymbolUses(SymbolTableCollection &tables) {
  for (Attribute a : getGroups())
    if (failed(lookupGroup(*this, tables, cast<SymbolRefAttr>(a))))
      return failure();
  return success();
}

LogicalResult UpdateLossScaleOp::verify() {
  if (numel(getStats()) != 2)
    return emitOpError("stats must be tensor<2xf32> (overflow flag, squared "
                       "norm), got ")
           << getStats().getType();
  return success();
}

LogicalResult OptimizerStepOp::verify() {
  if (numel(getStats()) != 2)
    return emitOpError("stats must be tensor<2xf32> (overflow flag, squared "
                       "norm), got ")
           << getStats().getType();
  double divisor = getDivisor().convertToDouble();
  if (!(divisor >= 1.0) || !std::isfinite(divisor))
    return emitOpError("divisor must be finite and >= 1, got ") << divisor;
  auto step = (*this)->getParentOfType<TrainStepOp>();
  if (step && offloadsOptimizer(step) != getHost())
    return emitOpError(getHost() ? "runs on the host, but the train step does "
                                   "not offload the optimizer"
                                 : "runs on the device, but the train step "
                                   "offloads the optimizer (#zero.offload): "
                                   "it must be 'host'");
  if (getSwap() && !getHost())
    return emitOpError("swaps its states with NVMe, so it must be 'host'");
  if (step && getHost() &&
      (getOptimizerOffload(step) == OffloadDevice::nvme) != bool(getSwap()))
    return emitOpError(getSwap()
                           ? "swaps its states with NVMe, but the train step "
                             "keeps them in host memory"
                           : "needs 'swap': the train step keeps the "
                             "optimizer states on nvme (#zero.offload)");
  // The device Adam of offloaded parameter shards writes its new parameters
  // into a staged buffer; otherwise they are written in place.
  bool staged = step && offloadsParams(step) && !getHost();
  if (step && staged != (getNewParams() != nullptr))
    return emitOpError(staged ? "runs on the device while the train step "
                                "offloads its parameters: it must write the "
                                "new parameters into a staged buffer ('->')"
                              : "writes its new parameters into a staged "
                                "buffer, which only a device Adam of "
                                "offloaded parameters does");
  return success();
}

OptimizerAttr OptimizerStepOp::getOptimizer() {
  // Split into functions, the update is outside its step: the module's.
  auto step = (*this)->getParentOfType<TrainStepOp>();
  if (!step)
    if (auto module = (*this)->getParentOfType<ModuleOp>())
      if (auto steps = module.getOps<TrainStepOp>(); !steps.empty())
        step = *steps.begin();
  return step ? step.getOptimizer() : OptimizerAttr();
}

OptimizerKind OptimizerStepOp::getOptimizerKind() {
  OptimizerAttr opt = getOptimizer();
  return opt ? opt.getKind() : OptimizerKind::adam;
}

int64_t OptimizerStepOp::getNvmeBytes(int64_t owned) {
  NvmeSwapAttr swap = getSwapAttr();
  if (!swap || owned <= 0)
    return 0;
  // The fp32 masters and the optimizer's states (optimizers.def). Every
  // chunk's read is whole 4096-byte blocks; only the last chunk can be
  // partial.
  SmallVector<int64_t> widths = {4};
  OptimizerAttr opt = getOptimizer();
  for (const OptimizerState &state :
       opt ? getOptimizerStates(opt) : getOptimizerStates(getOptimizerKind()))
    widths.push_back(state.bytes);
  int64_t bytes = 0, chunk = swap.getChunk();
  for (int64_t width : widths)
    for (int64_t at = 0; at < owned; at += chunk)
      bytes +=
          llvm::alignTo(std::min(chunk, owned - at) * width, kNvmeAlignment);
  return bytes;
}

//===----------------------------------------------------------------------===//
// Transfers
//===----------------------------------------------------------------------===//

std::optional<BufferKind> TransferOp::getSourceBuffer() { return getSource(); }
std::optional<BufferKind> TransferOp::getTargetBuffer() { return getTarget(); }
Value TransferOp::getStagedValue() {
  return getInput() ? getInput() : getStaged();
}
SmallVector<std::pair<Value, std::pair<int64_t, int64_t>>>
TransferOp::getInFlightReads() {
  if (!getInput())
    return {};
  return {{getInput(), {0, getInput().getType().getNumElements()}}};
}
std::optional<std::pair<int64_t, int64_t>> TransferOp::getElementRange() {
  if (!getBegin() || !getEnd())
    return std::nullopt;
  return std::make_pair(static_cast<int64_t>(*getBegin()),
                        static_cast<int64_t>(*getEnd()));
}

// zero.transfer group @g SOURCE to TARGET [phase P] [attr-dict]
//     [: STAGED-TYPE] [-> !zero.token]
// where SOURCE is a buffer kind, optionally with a layout range
// (`grads[0, 4096)`), or a staged value (%v) and TARGET a buffer kind or
// `staging` (a new staged value).
ParseResult TransferOp::parse(OpAsmParser &parser, OperationState &result) {
  MLIRContext *ctx = parser.getContext();
  FlatSymbolRefAttr group;
  if (parser.parseKeyword("group") ||
      parser.parseAttribute(group, getGroupAttrName(result.name).getValue(),
                            result.attributes))
    return failure();
  auto parseKind = [&](StringRef keyword, SMLoc at,
                       StringAttr name) -> ParseResult {
    std::optional<BufferKind> kind = symbolizeBufferKind(keyword);
    if (!kind)
      return parser.emitError(at, "expected a buffer kind, got '")
             << keyword << "'";
    result.addAttribute(name, BufferKindAttr::get(ctx, *kind));
    return success();
  };
  OpAsmParser::UnresolvedOperand input;
  OptionalParseResult hasInput = parser.parseOptionalOperand(input);
  if (hasInput.has_value() && failed(*hasInput))
    return failure();
  StringRef keyword;
  SMLoc at = parser.getCurrentLocation();
  if (!hasInput.has_value() &&
      (parser.parseKeyword(&keyword) ||
       parseKind(keyword, at, getSourceAttrName(result.name))))
    return failure();
  if (succeeded(parser.parseOptionalLSquare())) {
    int64_t begin, end;
    if (parser.parseInteger(begin) || parser.parseComma() ||
        parser.parseInteger(end) || parser.parseRParen())
      return failure();
    Builder &b = parser.getBuilder();
    result.addAttribute(getBeginAttrName(result.name),
                        b.getI64IntegerAttr(begin));
    result.addAttribute(getEndAttrName(result.name), b.getI64IntegerAttr(end));
  }
  at = parser.getCurrentLocation();
  if (parser.parseKeyword("to") || parser.parseKeyword(&keyword))
    return failure();
  bool staging = keyword == "staging";
  if (!staging && parseKind(keyword, at, getTargetAttrName(result.name)))
    return failure();
  if (succeeded(parser.parseOptionalKeyword("swap"))) {
    Attribute swap = ParamSwapAttr::parse(parser, Type());
    if (!swap)
      return failure();
    result.addAttribute(getSwapAttrName(result.name), swap);
  }
  if (failed(parseOptionalPhase(parser, result, getPhaseAttrName(result.name))))
    return failure();
  if (parser.parseOptionalAttrDict(result.attributes))
    return failure();
  Type stagedType;
  if ((hasInput.has_value() || staging) &&
      (parser.parseColon() || parser.parseType(stagedType)))
    return failure();
  if (hasInput.has_value() &&
      parser.resolveOperand(input, stagedType, result.operands))
    return failure();
  bool token = succeeded(parser.parseOptionalArrow());
  if (token) {
    Type tokenType;
    at = parser.getCurrentLocation();
    if (parser.parseType(tokenType))
      return failure();
    if (!isa<TokenType>(tokenType))
      return parser.emitError(at, "expected !zero.token, got ") << tokenType;
  }
  if (staging)
    result.addTypes(stagedType);
  if (token)
    result.addTypes(TokenType::get(ctx));
  result.getOrAddProperties<TransferOp::Properties>().resultSegmentSizes = {
      staging ? 1 : 0, token ? 1 : 0};
  return success();
}

void TransferOp::print(OpAsmPrinter &p) {
  p << " group " << getGroupAttr() << ' ';
  if (getInput())
    p << getInput();
  else if (getSource())
    p << stringifyBufferKind(*getSource());
  std::optional<std::pair<int64_t, int64_t>> range = getElementRange();
  if (range)
    p << '[' << range->first << ", " << range->second << ')';
  p << " to ";
  if (getTarget())
    p << stringifyBufferKind(*getTarget());
  else
    p << "staging";
  if (ParamSwapAttr swap = getSwapAttr()) {
    p << " swap ";
    swap.print(p);
  }
  if (getPhase() != Phase::micro_step)
    p << " phase " << stringifyPhase(getPhase());
  SmallVector<StringRef, 8> elided = {
      getGroupAttrName(), getSourceAttrName(), getTargetAttrName(),
      getPhaseAttrName(), getSwapAttrName(),   "resultSegmentSizes"};
  // A half-given range stays in the attribute dictionary (the verifier
  // reports it).
  if (range)
    elided.append({getBeginAttrName(), getEndAttrName()});
  p.printOptionalAttrDict((*this)->getAttrs(), elided);
  if (Value staged = getStagedValue())
    p << " : " << staged.getType();
  if (getToken())
    p << " -> " << getToken().getType();
}

LogicalResult TransferOp::verify() {
  auto step = (*this)->getParentOfType<TrainStepOp>();
  if (getBegin().has_value() != getEnd().has_value())
    return emitOpError("begin and end of the range must be given together");
  std::optional<std::pair<int64_t, int64_t>> range = getElementRange();
  if (range && (range->first < 0 || range->first >= range->second))
    return emitOpError("range [")
           << range->first << ", " << range->second << ") is empty or negative";
  // Parameter shards on NVMe: every transfer from or to them goes through a
  // swap buffer, and only those.
  bool touchesParams =
      getSource() == BufferKind::params || getTarget() == BufferKind::params;
  if (step) {
    bool onNvme = touchesParams && getParamOffload(step) == OffloadDevice::nvme;
    if (onNvme && !getSwapAttr())
      return emitOpError("moves a parameter shard that lives in an NVMe swap "
                         "file: it needs 'swap' (the host swap buffer it goes "
                         "through)");
    if (!onNvme && getSwapAttr())
      return emitOpError("has 'swap', but it moves no parameter shard that "
                         "lives on nvme");
  }
  // Parameter offload: a staged copy of the params shard.
  if (getStagedValue()) {
    if (range)
      return emitOpError("stages a whole parameter shard: it takes no range");
    bool fetch = getStaged() && !getInput() &&
                 getSource() == BufferKind::params && !getTarget();
    bool store = getInput() && !getStaged() && !getSource() &&
                 getTarget() == BufferKind::params;
    if (!fetch && !store)
      return emitOpError("stages the parameter shard: it copies 'params to "
                         "staging' or a staged value 'to params'");
    if (step && !offloadsParams(step))
      return emitOpError("stages a parameter shard, but the train step does "
                         "not offload its parameters (#zero.offload)");
    if (store && getPhase() != Phase::boundary)
      return emitOpError("stores the new parameters of the optimizer step: "
                         "its phase must be boundary, not ")
             << stringifyPhase(getPhase());
    return success();
  }
  if (!getSource() || !getTarget())
    return emitOpError("copies between persistent buffers: it needs a source "
                       "and a target buffer");
  BufferKind from = *getSource(), to = *getTarget();
  bool download = from == BufferKind::grads && to == BufferKind::host_grads;
  bool upload = to == BufferKind::params &&
                (from == BufferKind::host_params || from == BufferKind::master);
  if (!download && !upload)
    return emitOpError("copies ")
           << stringifyBufferKind(from) << " to " << stringifyBufferKind(to)
           << "; an offloaded optimizer copies grads to host_grads and "
              "host_params (or, with fp32 compute, master) to params";
  if (step && !offloadsOptimizer(step))
    return emitOpError("copies between device and host memory, but the train "
                       "step does not offload the optimizer (#zero.offload)");
  if (upload && step && keepsParamsOnHost(step))
    return emitOpError("uploads parameters, but the train step keeps its "
                       "parameter shards in host memory: the host Adam writes "
                       "them in place");
  // The gradients may stream to the host during the last micro step; the
  // parameters come back after the host Adam, at the boundary.
  if (getPhase() != Phase::boundary &&
      !(download && getPhase() == Phase::last_micro_step))
    return emitOpError(download
                           ? "moves the gradients of the optimizer step, "
                             "which runs once per optimizer step: its phase "
                             "must be boundary or last_micro_step, not "
                           : "moves the parameters the host Adam updated: "
                             "its phase must be boundary, not ")
           << stringifyPhase(getPhase());
  return success();
}

LogicalResult TransferOp::verifySymbolUses(SymbolTableCollection &tables) {
  FailureOr<PartitionOp> group = lookupGroup(*this, tables, getGroupAttr());
  if (failed(group))
    return failure();
  if (std::optional<std::pair<int64_t, int64_t>> range = getElementRange();
      range && range->second > group->getNumelValue())
    return emitOpError("range [")
           << range->first << ", " << range->second << ") exceeds the "
           << group->getNumelValue() << " elements of partition "
           << getGroupAttr();
  ArrayAttr params = group->getParams();
  if (params.empty() || getSource() == BufferKind::grads)
    return success();
  auto module = (*this)->getParentOfType<ModuleOp>();
  auto param =
      tables.lookupSymbolIn<ParamOp>(module, cast<SymbolRefAttr>(params[0]));
  if (!param)
    return success(); // The partition's verifier reports it.
  Type compute = param.getComputeTensorType().getElementType();
  if (ParamSwapAttr swap = getSwapAttr()) {
    int64_t shardBytes = llvm::alignTo(
        group->getShardNumel() * (compute.getIntOrFloatBitWidth() / 8),
        kNvmeAlignment);
    if (swap.getBufferBytes() < shardBytes)
      return emitOpError("swap buffers of ")
             << swap.getBufferBytes() << " bytes cannot hold the "
             << group->getShardNumel() << "-element shard of @"
             << group->getSymName() << " in " << compute << " (" << shardBytes
             << " bytes in whole " << kNvmeAlignment << "-byte blocks)";
  }
  if (Value staged = getStagedValue()) {
    if (group->getStageValue() != 3)
      return emitOpError("stages a parameter shard of @")
             << group->getSymName() << ", which is stage "
             << group->getStageValue() << " (parameter offload: stage 3)";
    auto type = cast<RankedTensorType>(staged.getType());
    if (!type.hasStaticShape() ||
        type.getNumElements() != group->getShardNumel() ||
        type.getElementType() != compute)
      return emitOpError("staged buffer ")
             << type << " must hold the " << group->getShardNumel()
             << " elements of a shard of @" << group->getSymName() << " in "
             << compute;
    return success();
  }
  // Masters in the NVMe swap file are not in host memory: every compute
  // type comes back through host_params.
  auto step = (*this)->getParentOfType<TrainStepOp>();
  if (step && getOptimizerOffload(step) == OffloadDevice::nvme) {
    if (getSource() != BufferKind::host_params)
      return emitOpError("uploads ")
             << stringifyBufferKind(*getSource())
             << ", but the optimizer states are on nvme: the parameters are "
                "uploaded from host_params";
    return success();
  }
  bool masters = areParamsMasters(compute);
  if (masters != (getSource() == BufferKind::master))
    return emitOpError("uploads ")
           << stringifyBufferKind(*getSource()) << ", but partition "
           << getGroupAttr() << " computes in " << compute
           << (masters ? " (fp32 parameters are uploaded from their master)"
                       : " (16-bit parameters are uploaded from host_params)");
  return success();
}

LogicalResult OptimizerStepOp::verifySymbolUses(SymbolTableCollection &tables) {
  FailureOr<PartitionOp> group = lookupGroup(*this, tables, getGroupAttr());
  if (failed(group) || !getNewParams())
    return failure(failed(group));
  Type compute = computeElementType(*group, tables);
  auto type = getNewParams().getType();
  if (!type.hasStaticShape() ||
      type.getNumElements() != group->getShardNumel() ||
      (compute && type.getElementType() != compute))
    return emitOpError("staged new parameters ")
           << type << " must hold the " << group->getShardNumel()
           << " elements of a shard of @" << group->getSymName() << " in "
           << compute;
  return success();
}

LogicalResult CastOp::verify() {
  if (numel(getInput()) < 0 || numel(getInput()) != numel(getResult()))
    return emitOpError("element count must be preserved: ")
           << getInput().getType() << " -> " << getResult().getType();
  return success();
}

#define GET_OP_CLASSES
#include "zero/Dialect/Zero/IR/ZeroOps.cpp.inc"

//===----------------------------------------------------------------------===//
// MoeExchangeOp, MoeReturnOp
//===----------------------------------------------------------------------===//

/// The step's expert-parallel size where its schedule says, else none.
static std::optional<int64_t> knownExpertParallel(Operation *op) {
  auto step = op->getParentOfType<TrainStepOp>();
  if (ScheduleAttr schedule = step ? step.getScheduleAttr() : ScheduleAttr())
    return schedule.getExpertParallel();
  return std::nullopt;
}

/// The checks shared by an exchange and a return: `rows` [n, width] and
/// `recv` [cap, width] of one element type, `offsets` [E], `counts` [P, E_l]
/// and `local_offsets` [E_l] with P * E_l = E, and P the step's
/// expert_parallel where its schedule says.
static LogicalResult
verifyMoeLayout(Operation *op, RankedTensorType rows, RankedTensorType recv,
                RankedTensorType offsets, RankedTensorType counts,
                RankedTensorType localOffsets, int64_t layer) {
  for (RankedTensorType t : {rows, recv, offsets, counts, localOffsets})
    if (!t.hasStaticShape())
      return op->emitOpError("needs static shapes");
  if (rows.getRank() != 2 || recv.getRank() != 2)
    return op->emitOpError("moves rows of rank-2 tensors, got ")
           << rows << " and " << recv;
  if (rows.getElementType() != recv.getElementType() ||
      rows.getDimSize(1) != recv.getDimSize(1))
    return op->emitOpError("dispatch rows ")
           << rows << " and received rows " << recv
           << " differ in width or element type";
  int64_t p = counts.getDimSize(0), local = counts.getDimSize(1);
  int64_t experts = offsets.getDimSize(0);
  if (p < 1 || local < 1 || p * local != experts)
    return op->emitOpError("counts ")
           << counts << " are not [P, E / P] for " << experts << " experts";
  if (localOffsets.getDimSize(0) != local)
    return op->emitOpError("local offsets ")
           << localOffsets << " are not one per local expert (" << local << ")";
  if (std::optional<int64_t> known = knownExpertParallel(op);
      known && *known != p)
    return op->emitOpError("runs over ")
           << p << " members, but the step's expert_parallel is " << *known;
  if (layer < 0)
    return op->emitOpError("layer must be non-negative, got ") << layer;
  return success();
}

CollectiveKind MoeExchangeOp::getCollectiveKind() {
  return CollectiveKind::all_to_all;
}
std::optional<std::pair<int64_t, int64_t>> MoeExchangeOp::getElementRange() {
  return std::nullopt;
}
std::optional<BufferKind> MoeExchangeOp::getInPlaceBuffer() {
  return std::nullopt;
}
// The dispatch rows: at a balanced load each member sends (P - 1) / P of
// them and receives as many, as an all-to-all of that tensor (the report's
// and the cost model's pricing; the receive buffer is planned at `cap`).
Value MoeExchangeOp::getMovedValue() { return getRows(); }
Value MoeExchangeOp::getToken() { return Value(); }
FlatSymbolRefAttr MoeExchangeOp::getGroupAttr() { return {}; }
RankSetKind MoeExchangeOp::getRankSetKind() { return RankSetKind::expert; }

int64_t MoeExchangeOp::getCapacityFor(int64_t n) {
  // More rows than P * n can never arrive: a larger capacity is the
  // dropless bound (compared in double, as a huge factor's rows overflow
  // int64).
  int64_t dropless = getMembers() * n;
  std::optional<APFloat> c = getCapacityFactor();
  if (!c)
    return dropless;
  double rows = std::ceil(c->convertToDouble() * double(n));
  return rows < double(dropless) ? int64_t(rows) : dropless;
}

LogicalResult MoeExchangeOp::verify() {
  auto rows = cast<RankedTensorType>(getRows().getType());
  auto recv = cast<RankedTensorType>(getRecv().getType());
  auto counts = cast<RankedTensorType>(getCounts().getType());
  auto localOffsets = cast<RankedTensorType>(getLocalOffsets().getType());
  if (failed(verifyMoeLayout(*this, rows, recv,
                             cast<RankedTensorType>(getOffsets().getType()),
                             counts, localOffsets, getLayer())))
    return failure();
  if (!getKnown().empty()) {
    if (getKnown().size() != 2 || getKnown()[0].getType() != counts ||
        getKnown()[1].getType() != localOffsets)
      return emitOpError("known counts must be the counts ")
             << counts << " and local offsets " << localOffsets
             << " of the forward exchange";
  }
  if (std::optional<APFloat> c = getCapacityFactor()) {
    double f = c->convertToDouble();
    if (!(f > 0.0) || !std::isfinite(f))
      return emitOpError("capacity factor must be positive, got ") << f;
  } else if (getDrop()) {
    return emitOpError("drops rows past a capacity, but has none (the "
                       "dropless bound never overflows)");
  }
  int64_t cap = getCapacityFor(rows.getDimSize(0));
  if (recv.getDimSize(0) != cap)
    return emitOpError("receives ")
           << recv.getDimSize(0) << " rows, but its capacity for "
           << rows.getDimSize(0) << " dispatch rows is " << cap;
  return success();
}

CollectiveKind MoeReturnOp::getCollectiveKind() {
  return CollectiveKind::all_to_all;
}
std::optional<std::pair<int64_t, int64_t>> MoeReturnOp::getElementRange() {
  return std::nullopt;
}
std::optional<BufferKind> MoeReturnOp::getInPlaceBuffer() {
  return std::nullopt;
}
Value MoeReturnOp::getMovedValue() { return getRows(); }
Value MoeReturnOp::getToken() { return Value(); }
FlatSymbolRefAttr MoeReturnOp::getGroupAttr() { return {}; }
RankSetKind MoeReturnOp::getRankSetKind() { return RankSetKind::expert; }

LogicalResult MoeReturnOp::verify() {
  return verifyMoeLayout(*this, cast<RankedTensorType>(getRows().getType()),
                         cast<RankedTensorType>(getRecv().getType()),
                         cast<RankedTensorType>(getOffsets().getType()),
                         cast<RankedTensorType>(getCounts().getType()),
                         cast<RankedTensorType>(getLocalOffsets().getType()),
                         getLayer());
}
