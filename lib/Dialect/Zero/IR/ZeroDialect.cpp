//===- ZeroDialect.cpp - Model structure and ZeRO schedule ops ------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/IR/ZeroDialect.h"

#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/JSON.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::zero;

#include "zero/Dialect/Zero/IR/ZeroEnums.cpp.inc"
#include "zero/Dialect/Zero/IR/ZeroOpInterfaces.cpp.inc"
#include "zero/Dialect/Zero/IR/ZeroOpsDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "zero/Dialect/Zero/IR/ZeroAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "zero/Dialect/Zero/IR/ZeroOpsTypes.cpp.inc"

void ZeroDialect::initialize() {
  registerAttributes();
  registerTypes();
  addOperations<
#define GET_OP_LIST
#include "zero/Dialect/Zero/IR/ZeroOps.cpp.inc"
      >();
}

void ZeroDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "zero/Dialect/Zero/IR/ZeroAttrs.cpp.inc"
      >();
}

void ZeroDialect::registerTypes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "zero/Dialect/Zero/IR/ZeroOpsTypes.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

LogicalResult ScheduleAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   int64_t stage, int64_t worldSize,
                                   int64_t globalBatch,
                                   int64_t accumulationSteps) {
  if (stage < 0 || stage > 3)
    return emitError() << "stage must be 0, 1, 2 or 3, got " << stage;
  if (worldSize < 1 || worldSize > kMaxWorldSize)
    return emitError() << "world_size must be between 1 and " << kMaxWorldSize
                       << ", got " << worldSize;
  if (accumulationSteps < 1 || accumulationSteps > kMaxAccumulationSteps)
    return emitError() << "accumulation_steps must be between 1 and "
                       << kMaxAccumulationSteps << ", got "
                       << accumulationSteps;
  if (globalBatch < 1 || globalBatch % (worldSize * accumulationSteps) != 0)
    return emitError() << "global_batch " << globalBatch
                       << " must be a positive multiple of world_size x "
                          "accumulation_steps = "
                       << worldSize * accumulationSteps;
  return success();
}

LogicalResult LrScheduleAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, LrScheduleKind kind,
    APFloat warmupMinLr, APFloat warmupMaxLr, int64_t warmupNumSteps,
    WarmupType warmupType, int64_t totalNumSteps, APFloat warmupMinRatio,
    APFloat cosMinRatio, APFloat cycleMinLr, APFloat cycleMaxLr,
    APFloat decayLrRate, int64_t cycleFirstStepSize,
    int64_t cycleSecondStepSize, int64_t decayStepSize, bool cycleMomentum,
    APFloat cycleMinMom, APFloat cycleMaxMom, APFloat decayMomRate,
    APFloat lrRangeTestMinLr, int64_t lrRangeTestStepSize,
    APFloat lrRangeTestStepRate, bool lrRangeTestStaircase) {
  // Which parameters each kind reads (DeepSpeed's constructor arguments);
  // a parameter of another kind would be silently ignored, so it is an
  // error.
  bool warmup = kind == LrScheduleKind::warmup_lr ||
                kind == LrScheduleKind::warmup_decay_lr;
  bool cosine = kind == LrScheduleKind::warmup_cosine_lr;
  bool cycle = kind == LrScheduleKind::one_cycle;
  bool range = kind == LrScheduleKind::lr_range_test;
  struct Used {
    const char *name;
    bool isDefault, usedBy;
  };
  auto same = [](const APFloat &v, double d) {
    return v.bitwiseIsEqual(APFloat(d));
  };
  const Used params[] = {
      {"warmup_min_lr", same(warmupMinLr, 0.0), warmup},
      {"warmup_max_lr", same(warmupMaxLr, 0.001), warmup},
      {"warmup_num_steps", warmupNumSteps == 1000, warmup || cosine},
      {"warmup_type", warmupType == WarmupType::log, warmup || cosine},
      {"total_num_steps", totalNumSteps == 0,
       kind == LrScheduleKind::warmup_decay_lr || cosine},
      {"warmup_min_ratio", same(warmupMinRatio, 0.0), cosine},
      {"cos_min_ratio", same(cosMinRatio, 0.0001), cosine},
      {"cycle_min_lr", same(cycleMinLr, 0.0), cycle},
      {"cycle_max_lr", same(cycleMaxLr, 0.0), cycle},
      {"decay_lr_rate", same(decayLrRate, 0.0), cycle},
      {"cycle_first_step_size", cycleFirstStepSize == 2000, cycle},
      {"cycle_second_step_size", cycleSecondStepSize == 0, cycle},
      {"decay_step_size", decayStepSize == 0, cycle},
      {"cycle_momentum", cycleMomentum, cycle},
      {"cycle_min_mom", same(cycleMinMom, 0.8), cycle},
      {"cycle_max_mom", same(cycleMaxMom, 0.9), cycle},
      {"decay_mom_rate", same(decayMomRate, 0.0), cycle},
      {"lr_range_test_min_lr", same(lrRangeTestMinLr, 0.001), range},
      {"lr_range_test_step_size", lrRangeTestStepSize == 2000, range},
      {"lr_range_test_step_rate", same(lrRangeTestStepRate, 1.0), range},
      {"lr_range_test_staircase", !lrRangeTestStaircase, range}};
  for (const Used &u : params)
    if (!u.isDefault && !u.usedBy)
      return emitError() << "lr_schedule " << stringifyLrScheduleKind(kind)
                         << " has no parameter " << u.name;
  auto finiteNonNegative = [&](APFloat v, const char *name) -> LogicalResult {
    double d = v.convertToDouble();
    if (!(d >= 0.0) || !std::isfinite(d))
      return emitError() << "lr_schedule " << name
                         << " must be finite and >= 0, got " << d;
    return success();
  };
  for (auto [v, name] : {std::pair{warmupMinLr, "warmup_min_lr"},
                         {warmupMaxLr, "warmup_max_lr"},
                         {warmupMinRatio, "warmup_min_ratio"},
                         {cosMinRatio, "cos_min_ratio"},
                         {cycleMinLr, "cycle_min_lr"},
                         {cycleMaxLr, "cycle_max_lr"},
                         {decayLrRate, "decay_lr_rate"},
                         {cycleMinMom, "cycle_min_mom"},
                         {cycleMaxMom, "cycle_max_mom"},
                         {decayMomRate, "decay_mom_rate"},
                         {lrRangeTestMinLr, "lr_range_test_min_lr"},
                         {lrRangeTestStepRate, "lr_range_test_step_rate"}})
    if (failed(finiteNonNegative(v, name)))
      return failure();
  // DeepSpeed warms up over max(2, warmup_num_steps) steps.
  if (warmupNumSteps < 0)
    return emitError() << "lr_schedule warmup_num_steps must be >= 0, got "
                       << warmupNumSteps;
  if ((kind == LrScheduleKind::warmup_decay_lr || cosine) && totalNumSteps < 1)
    return emitError() << "lr_schedule " << stringifyLrScheduleKind(kind)
                       << " needs total_num_steps >= 1, got " << totalNumSteps;
  // DeepSpeed raises the warmup to 2 steps; the cosine's length is the rest.
  if (cosine && totalNumSteps <= std::max<int64_t>(2, warmupNumSteps))
    return emitError() << "lr_schedule warmup_cosine_lr needs total_num_steps "
                          "> warmup_num_steps (at least 2), got "
                       << totalNumSteps << " and " << warmupNumSteps;
  if (cycle) {
    if (cycleFirstStepSize < 1 || cycleSecondStepSize < 0 || decayStepSize < 0)
      return emitError() << "lr_schedule one_cycle needs "
                            "cycle_first_step_size >= 1 and "
                            "cycle_second_step_size, decay_step_size >= 0";
    if (!(cycleMaxLr.convertToDouble() > 0.0))
      return emitError() << "lr_schedule one_cycle needs cycle_max_lr > 0";
    if (cycleMomentum && !(cycleMaxMom.convertToDouble() < 1.0 &&
                           cycleMinMom.convertToDouble() < 1.0))
      return emitError() << "lr_schedule one_cycle momentum must be < 1";
  }
  if (range && lrRangeTestStepSize < 1)
    return emitError() << "lr_schedule lr_range_test_step_size must be >= 1, "
                          "got "
                       << lrRangeTestStepSize;
  return success();
}

LogicalResult
OptimizerAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                      OptimizerKind kind, APFloat lrF, APFloat beta1F,
                      APFloat beta2F, APFloat epsF, APFloat weightDecayF,
                      bool biasCorrection, LrScheduleAttr schedule) {
  double lr = lrF.convertToDouble(), beta1 = beta1F.convertToDouble(),
         beta2 = beta2F.convertToDouble(), eps = epsF.convertToDouble(),
         weightDecay = weightDecayF.convertToDouble();
  if (!(lr > 0.0) || !std::isfinite(lr))
    return emitError() << "optimizer lr must be positive, got " << lr;
  if (!(beta1 >= 0.0 && beta1 < 1.0))
    return emitError() << "optimizer beta1 must be in [0, 1), got " << beta1;
  if (!(beta2 >= 0.0 && beta2 < 1.0))
    return emitError() << "optimizer beta2 must be in [0, 1), got " << beta2;
  if (!(eps > 0.0))
    return emitError() << "optimizer eps must be positive, got " << eps;
  if (!(weightDecay >= 0.0))
    return emitError() << "optimizer weight_decay must be >= 0, got "
                       << weightDecay;
  return success();
}

LogicalResult LoggingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                  int64_t stepsPerPrint,
                                  bool wallClockBreakdown) {
  if (stepsPerPrint < 1)
    return emitError() << "steps_per_print must be >= 1, got " << stepsPerPrint;
  return success();
}

LogicalResult OffloadAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                  OffloadDevice optimizer, OffloadDevice param,
                                  StringRef nvmePath, int64_t bufferCount,
                                  int64_t bufferSize, StringRef paramNvmePath,
                                  int64_t paramBufferCount,
                                  int64_t paramBufferSize) {
  bool nvme = optimizer == OffloadDevice::nvme;
  if (nvme && nvmePath.empty())
    return emitError() << "optimizer offload to nvme needs an nvme_path";
  if (!nvme && !nvmePath.empty())
    return emitError() << "nvme_path '" << nvmePath
                       << "' is given but the optimizer is not offloaded to "
                          "nvme";
  bool paramNvme = param == OffloadDevice::nvme;
  if (paramNvme && paramNvmePath.empty())
    return emitError() << "parameter offload to nvme needs a param_nvme_path";
  if (!paramNvme && !paramNvmePath.empty())
    return emitError() << "param_nvme_path '" << paramNvmePath
                       << "' is given but the parameters are not offloaded "
                          "to nvme";
  if (paramBufferCount < 1)
    return emitError() << "param_buffer_count must be >= 1, got "
                       << paramBufferCount;
  if (paramBufferSize < 1)
    return emitError() << "param_buffer_size must be >= 1, got "
                       << paramBufferSize;
  if (bufferCount < 1)
    return emitError() << "buffer_count must be >= 1, got " << bufferCount;
  if (bufferSize < 1 || bufferSize % (kNvmeAlignment / 4))
    return emitError() << "buffer_size must be a positive multiple of "
                       << kNvmeAlignment / 4 << " elements (" << kNvmeAlignment
                       << " bytes of fp32), got " << bufferSize;
  if (bufferSize > kMaxSwapChunk)
    return emitError() << "buffer_size must be at most " << kMaxSwapChunk
                       << " elements (1 GiB of fp32, one transfer), got "
                       << bufferSize;
  return success();
}

LogicalResult NvmeSwapAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   int64_t chunk, int64_t buffers) {
  if (chunk < 1 || chunk % (kNvmeAlignment / 4))
    return emitError() << "nvme_swap chunk must be a positive multiple of "
                       << kNvmeAlignment / 4 << " elements (" << kNvmeAlignment
                       << " bytes of fp32), got " << chunk;
  if (chunk > kMaxSwapChunk)
    return emitError() << "nvme_swap chunk must be at most " << kMaxSwapChunk
                       << " elements (1 GiB of fp32, one transfer), got "
                       << chunk;
  if (buffers < 1)
    return emitError() << "nvme_swap buffers must be >= 1, got " << buffers;
  if (chunk > std::numeric_limits<int64_t>::max() / (12 * buffers))
    return emitError() << "nvme_swap buffers overflow int64";
  return success();
}

LogicalResult
ParamSwapAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                      int64_t buffer, int64_t buffers, int64_t bufferBytes) {
  if (buffers < 1)
    return emitError() << "param_swap buffers must be >= 1, got " << buffers;
  if (buffer < 0 || buffer >= buffers)
    return emitError() << "param_swap buffer " << buffer
                       << " is not one of its " << buffers << " buffers";
  if (bufferBytes < kNvmeAlignment || bufferBytes % kNvmeAlignment)
    return emitError() << "param_swap buffer_bytes must be a positive "
                          "multiple of "
                       << kNvmeAlignment << " (O_DIRECT's alignment), got "
                       << bufferBytes;
  if (bufferBytes > std::numeric_limits<int64_t>::max() / buffers)
    return emitError() << "param_swap buffers overflow int64";
  return success();
}

LogicalResult
OffloadAttr::verifyStage(function_ref<InFlightDiagnostic()> emitError,
                         int64_t stage) const {
  // DeepSpeed's rules: the optimizer states are offloaded from their
  // partitions (stages 1-3), the parameters only when they are partitioned
  // too (stage 3).
  if (offloadsOptimizer() && stage < 1)
    return emitError() << "optimizer offload (offload_optimizer) needs ZeRO "
                          "stage 1, 2 or 3, the stage is "
                       << stage;
  if (getParam() != OffloadDevice::none && stage != 3)
    return emitError() << "parameter offload (offload_param) needs ZeRO "
                          "stage 3, the stage is "
                       << stage;
  return success();
}

LogicalResult
PrecisionAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                      PrecisionKind kind, int64_t initialScalePower,
                      int64_t lossScaleWindow, int64_t hysteresis,
                      APFloat minLossScaleF, APFloat lossScaleF) {
  double minLossScale = minLossScaleF.convertToDouble();
  double lossScale = lossScaleF.convertToDouble();
  if (initialScalePower < 0 || initialScalePower > 64)
    return emitError() << "initial_scale_power must be in [0, 64], got "
                       << initialScalePower;
  if (lossScaleWindow < 1)
    return emitError() << "loss_scale_window must be >= 1, got "
                       << lossScaleWindow;
  if (hysteresis < 1)
    return emitError() << "hysteresis must be >= 1, got " << hysteresis;
  if (!(minLossScale > 0.0))
    return emitError() << "min_loss_scale must be positive, got "
                       << minLossScale;
  if (!(lossScale >= 0.0) || !std::isfinite(lossScale))
    return emitError() << "loss_scale must be 0 (dynamic) or a positive "
                          "static scale, got "
                       << lossScale;
  return success();
}

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
  if (!llvm::json::isUTF8(op.getSymName()))
    return op.emitOpError("name @\"")
           << llvm::json::fixUTF8(op.getSymName())
           << "\" is not valid UTF-8 (names go into the JSON manifest and "
              "reports)";
  return success();
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
                        [&](BlockArgument a) {
                          p.printRegionArgument(a);
                        });
  p << ") optimizer " << getOptimizer() << " precision " << getPrecision();
  if (getGradientClipping().convertToDouble() != 0.0)
    p << " gradient_clipping " << getGradientClipping();
  if (ScheduleAttr schedule = getScheduleAttr())
    p << " schedule " << schedule;
  p.printOptionalAttrDictWithKeyword(
      (*this)->getAttrs(),
      {getSymNameAttrName(), getOptimizerAttrName(), getPrecisionAttrName(),
       getGradientClippingAttrName(), getScheduleAttrName()});
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
  WalkResult walk = getBody().walk([&](Operation *op) {
    for (OpResult r : op->getResults())
      if (failed(checkStepTensor(
              [&] {
                return op->emitOpError("result #") << r.getResultNumber()
                                                   << " ";
              },
              r.getType())))
        return WalkResult::interrupt();
    for (Region &region : op->getRegions())
      for (Block &block : region)
        for (BlockArgument a : block.getArguments())
          if (failed(checkStepTensor(
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
    int64_t batch = cast<RankedTensorType>(getBodyBlock().getArgument(0).getType())
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

LogicalResult TrainStepOp::verifySchedulePartitions() {
  ScheduleAttr schedule = getScheduleAttr();
  auto module = (*this)->getParentOfType<ModuleOp>();
  if (!module)
    return success();
  for (PartitionOp p : module.getOps<PartitionOp>()) {
    if (!schedule)
      return emitOpError("has no #zero.schedule, but the module has ")
             << "zero.partition @" << p.getSymName()
             << " (zero-partition records both)";
    if (p.getStageValue() != schedule.getStage() ||
        p.getWorldSizeValue() != schedule.getWorldSize())
      return emitOpError("schedule has stage ")
             << schedule.getStage() << " and world size "
             << schedule.getWorldSize() << ", but zero.partition @"
             << p.getSymName() << " has stage " << p.getStageValue()
             << " and world size " << p.getWorldSizeValue();
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

CollectiveKind ReduceOp::getCollectiveKind() { return CollectiveKind::reduce; }
std::optional<std::pair<int64_t, int64_t>> ReduceOp::getElementRange() {
  return std::make_pair(static_cast<int64_t>(getBegin()),
                        static_cast<int64_t>(getEnd()));
}
std::optional<BufferKind> ReduceOp::getInPlaceBuffer() { return getBuffer(); }
Value ReduceOp::getMovedValue() { return Value(); }

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
           << sourceType.getElementType()
           << " differs from the compute type " << expected.getElementType()
           << " of parameter " << getParamAttr();
  auto module = (*this)->getParentOfType<ModuleOp>();
  // The gather that produced the source names the partition: look it up in
  // the symbol table instead of scanning the module for every view (that
  // scan made verification quadratic in the number of layers).
  SmallVector<PartitionOp, 1> candidates;
  Operation *def = getSource().getDefiningOp();
  FlatSymbolRefAttr gatherGroup =
      isa_and_nonnull<AllGatherOp>(def)   ? cast<AllGatherOp>(def).getGroupAttr()
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
  if (stage == 0) {
    if (padded != numel)
      return emitOpError("a stage-0 partition is not sharded: padded size must "
                         "equal numel ")
             << numel;
    return success();
  }
  if (padded % unit != 0)
    return emitOpError("padded size ")
           << padded << " is not a multiple of world_size * alignment = "
           << unit;
  if (padded - numel >= unit)
    return emitOpError("padding ") << padded - numel
                                   << " is not minimal (world_size * alignment = "
                                   << unit << ")";
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
    if (offset != next)
      return emitOpError("parameter ")
             << sym << " is at offset " << offset << ", expected " << next
             << " (parameters are contiguous in declaration order)";
    if (__builtin_add_overflow(next, param.getNumElements(), &next))
      return emitOpError("parameters hold more than ")
             << std::numeric_limits<int64_t>::max()
             << " elements (int64 overflows)";
  }
  if (next != static_cast<int64_t>(getNumel()))
    return emitOpError("parameters hold ")
           << next << " elements but numel is " << getNumel();
  // The memory plan's buffers: a master copy exactly when the parameters
  // are not their own masters.
  auto *dialect = getContext()->getLoadedDialect<ZeroDialect>();
  if (BufferOffsetsAttr buffers =
          dialect->getBuffersAttrHelper().getAttr(*this)) {
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
      for (BufferKind kind :
           {BufferKind::master, BufferKind::exp_avg, BufferKind::exp_avg_sq})
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
      bool masters = areParamsMasters(compute);
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
               << (masters ? " (fp32 parameters are their own masters)"
                           : " (16-bit parameters need fp32 masters)");
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

static FailureOr<PartitionOp> lookupGroup(Operation *op,
                                          SymbolTableCollection &tables,
                                          SymbolRefAttr ref) {
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
static Type computeElementType(PartitionOp group, SymbolTableCollection &tables) {
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
  return success();
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
                                   "(zero.offload): it must read a staged "
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

/// The value form of a stage-3 gather (zero.all_gather, zero.prefetch): a
/// stage-3 partition gathered whole into a buffer of the compute type.
static LogicalResult verifyStage3Gather(Operation *op, PartitionOp group,
                                        TypedValue<RankedTensorType> result,
                                        SymbolTableCollection &tables,
                                        StringRef wrongStage) {
  if (group.getStageValue() != 3)
    return op->emitOpError(wrongStage)
           << group.getSymName() << " is stage " << group.getStageValue();
  if (!result.getType().hasStaticShape() ||
      result.getType().getNumElements() != group.getPaddedNumelValue())
    return op->emitOpError("result ")
           << result.getType() << " must hold the "
           << group.getPaddedNumelValue()
           << " (padded) elements of partition @" << group.getSymName();
  Type et = computeElementType(group, tables);
  Type resultEt = result.getType().getElementType();
  if (et && resultEt != et)
    return op->emitOpError("result element type must be the compute type ")
           << et << ", got " << resultEt;
  return success();
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
                                "stage 3, @")))
    return failure();
  return verifyStagedShard(*this, *group, getShard(), getResult());
}

LogicalResult PrefetchOp::verifySymbolUses(SymbolTableCollection &tables) {
  auto group = lookupGroup(*this, tables, getGroupAttr());
  if (failed(group))
    return failure();
  if (failed(verifyStage3Gather(*this, *group, getResult(), tables,
                                "prefetches only stage-3 partitions, @")))
    return failure();
  return verifyStagedShard(*this, *group, getShard(), getResult());
}

/// Shared checks of zero.reduce_scatter and zero.reduce.
template <typename OpT>
static LogicalResult verifyGradReduction(OpT op) {
  bool inPlace = op.getBuffer().has_value();
  if (inPlace && !op.getSources().empty())
    return op.emitOpError("has either a buffer (in place) or sources, not both");
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
      return op.emitOpError("source ") << src.getType()
                                       << " must have a static shape";
    if (off < 0 || off >= n)
      return op.emitOpError("source offset ")
             << off << " is outside a source of " << n << " elements";
    total += n - off;
  }
  int64_t begin = static_cast<int64_t>(op.getBegin());
  int64_t end = static_cast<int64_t>(op.getEnd());
  // Every source but the last is used to its end; the last may stop early.
  if (!inPlace) {
    int64_t lastLen = numel(op.getSources().back()) - op.getSourceOffsets().back();
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

LogicalResult ReduceScatterOp::verify() { return verifyGradReduction(*this); }
LogicalResult ReduceScatterOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyGradReductionSymbols(*this, tables);
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
  }
  return success();
}

LogicalResult AllReduceOp::verifySymbolUses(SymbolTableCollection &tables) {
  auto group = lookupGroup(*this, tables, getGroupAttr());
  if (failed(group))
    return failure();
  if (!getBuffer())
    return success();
  if (group->getStageValue() != 0)
    return emitOpError("all-reduces the 'grads' buffer in place only at stage "
                       "0, @")
           << group->getSymName() << " is stage " << group->getStageValue();
  return verifyRange(*this, *group, static_cast<int64_t>(*getBegin()),
                     static_cast<int64_t>(*getEnd()));
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
    result.addAttribute(getOffsetAttrName(result.name), b.getI64IntegerAttr(offset));
    result.addAttribute(getSizeAttrName(result.name), b.getI64IntegerAttr(size));
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

LogicalResult AdamOp::verify() {
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
                                   "offloads the optimizer (zero.offload): "
                                   "it must be 'host'");
  if (getSwap() && !getHost())
    return emitOpError("swaps its states with NVMe, so it must be 'host'");
  if (step && getHost() &&
      (getOptimizerOffload(step) == OffloadDevice::nvme) != bool(getSwap()))
    return emitOpError(getSwap()
                           ? "swaps its states with NVMe, but the train step "
                             "keeps them in host memory"
                           : "needs 'swap': the train step keeps the "
                             "optimizer states on nvme (zero.offload)");
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

int64_t AdamOp::getNvmeBytes(int64_t owned) {
  NvmeSwapAttr swap = getSwapAttr();
  if (!swap || owned <= 0)
    return 0;
  // Every chunk's read is whole 4096-byte blocks; only the last chunk can
  // be partial.
  int64_t bytes = 0, chunk = swap.getChunk();
  for (int64_t at = 0; at < owned; at += chunk)
    bytes += llvm::alignTo(std::min(chunk, owned - at) * 4, kNvmeAlignment);
  return 3 * bytes;
}

//===----------------------------------------------------------------------===//
// Transfers
//===----------------------------------------------------------------------===//

std::optional<BufferKind> TransferOp::getSourceBuffer() { return getSource(); }
std::optional<BufferKind> TransferOp::getTargetBuffer() { return getTarget(); }
Value TransferOp::getStagedValue() {
  return getInput() ? getInput() : getStaged();
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
                         "not offload its parameters (zero.offload)");
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
                       "step does not offload the optimizer (zero.offload)");
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
             << " bytes in whole 4096-byte blocks)";
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

LogicalResult AdamOp::verifySymbolUses(SymbolTableCollection &tables) {
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

//===----------------------------------------------------------------------===//
// Memory plan attributes
//===----------------------------------------------------------------------===//

static bool isPlanOffset(int64_t offset) {
  return offset >= 0 && offset % kArenaAlignment == 0;
}

LogicalResult MemoryPlanAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, int64_t persistentBytes,
    int64_t arenaBytes, int64_t scratchBytes, int64_t peakBytes,
    int64_t hostBytes, int64_t nvmeBytes, int64_t swapOffset, int64_t swapBytes,
    int64_t paramNvmeBytes, int64_t paramSwapOffset, int64_t paramSwapBytes) {
  if (persistentBytes < 0 || arenaBytes < 0 || scratchBytes < 0 ||
      hostBytes < 0 || nvmeBytes < 0 || swapOffset < 0 || swapBytes < 0 ||
      paramNvmeBytes < 0 || paramSwapOffset < 0 || paramSwapBytes < 0)
    return emitError() << "memory_plan byte counts must be non-negative";
  if (nvmeBytes % kNvmeAlignment || swapOffset % kNvmeAlignment ||
      swapBytes % kNvmeAlignment || paramNvmeBytes % kNvmeAlignment ||
      paramSwapOffset % kNvmeAlignment || paramSwapBytes % kNvmeAlignment)
    return emitError() << "memory_plan nvme_bytes, swap_offset, swap_bytes, "
                          "param_nvme_bytes, param_swap_offset and "
                          "param_swap_bytes must be multiples of "
                       << kNvmeAlignment << " (O_DIRECT's alignment)";
  if (paramNvmeBytes > nvmeBytes)
    return emitError() << "memory_plan param_nvme_bytes " << paramNvmeBytes
                       << " exceeds nvme_bytes " << nvmeBytes
                       << ", the total of the rank's swap files";
  int64_t optimizerNvmeBytes = nvmeBytes - paramNvmeBytes;
  if ((optimizerNvmeBytes > 0) != (swapBytes > 0))
    return emitError() << "memory_plan has "
                       << (optimizerNvmeBytes > 0
                               ? "an optimizer swap file but no swap_bytes"
                               : "swap_bytes but no optimizer swap file")
                       << ": NVMe-resident states move through swap buffers";
  if ((paramNvmeBytes > 0) != (paramSwapBytes > 0))
    return emitError() << "memory_plan has "
                       << (paramNvmeBytes > 0
                               ? "param_nvme_bytes but no param_swap_bytes"
                               : "param_swap_bytes but no param_nvme_bytes")
                       << ": NVMe-resident parameter shards move through "
                          "swap buffers";
  if (swapBytes > 0 && (swapOffset > hostBytes - swapBytes))
    return emitError() << "memory_plan swap buffers [" << swapOffset << ", "
                       << swapOffset + swapBytes
                       << ") must lie in the host arena of host_bytes "
                       << hostBytes;
  if (paramSwapBytes > 0 && (paramSwapOffset > hostBytes - paramSwapBytes))
    return emitError() << "memory_plan parameter swap buffers ["
                       << paramSwapOffset << ", "
                       << paramSwapOffset + paramSwapBytes
                       << ") must lie in the host arena of host_bytes "
                       << hostBytes;
  if (swapBytes > 0 && paramSwapBytes > 0 &&
      paramSwapOffset < swapOffset + swapBytes &&
      swapOffset < paramSwapOffset + paramSwapBytes)
    return emitError() << "memory_plan parameter swap buffers overlap the "
                          "optimizer's";
  if (hostBytes % kArenaAlignment)
    return emitError() << "memory_plan host_bytes must be a multiple of "
                       << kArenaAlignment << " (the arenas' alignment)";
  if (persistentBytes % kArenaAlignment || arenaBytes % kArenaAlignment)
    return emitError() << "memory_plan persistent_bytes and arena_bytes must "
                          "be multiples of "
                       << kArenaAlignment << " (the arenas' alignment)";
  int64_t sum;
  if (__builtin_add_overflow(persistentBytes, arenaBytes, &sum) ||
      __builtin_add_overflow(sum, scratchBytes, &sum))
    return emitError() << "memory_plan byte counts overflow int64";
  if (peakBytes != sum)
    return emitError() << "memory_plan peak_bytes " << peakBytes
                       << " must be persistent_bytes + arena_bytes + "
                          "scratch_bytes = "
                       << sum;
  return success();
}

LogicalResult BufferOffsetsAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, int64_t params, int64_t grads,
    std::optional<int64_t> master, int64_t expAvg, int64_t expAvgSq,
    std::optional<int64_t> hostGrads, std::optional<int64_t> hostParams) {
  std::optional<int64_t> offsets[] = {params,   grads,     master,    expAvg,
                                      expAvgSq, hostGrads, hostParams};
  for (auto [kind, offset] : llvm::enumerate(offsets))
    if (offset && !isPlanOffset(*offset))
      return emitError() << "buffer_offsets "
                         << stringifyBufferKind(static_cast<BufferKind>(kind))
                         << " must be a non-negative multiple of "
                         << kArenaAlignment << ", got " << *offset;
  return success();
}

std::optional<int64_t> BufferOffsetsAttr::getOffset(BufferKind kind) const {
  switch (kind) {
  case BufferKind::params:
    return getParams();
  case BufferKind::grads:
    return getGrads();
  case BufferKind::master:
    return getMaster();
  case BufferKind::exp_avg:
    return getExpAvg();
  case BufferKind::exp_avg_sq:
    return getExpAvgSq();
  case BufferKind::host_grads:
    return getHostGrads();
  case BufferKind::host_params:
    return getHostParams();
  }
  llvm_unreachable("unknown buffer kind");
}

using EmitFn = function_ref<InFlightDiagnostic()>;

static LogicalResult verifyInputOffsets(Operation *op, Attribute value,
                                        EmitFn emit) {
  auto offsets = dyn_cast<DenseI64ArrayAttr>(value);
  if (!offsets)
    return emit() << "must be an array<i64: ...>, got " << value;
  auto step = dyn_cast<TrainStepOp>(op);
  if (!step)
    return emit() << "is only valid on zero.train_step";
  int64_t numInputs =
      step.getBody().empty() ? 0 : step.getBodyBlock().getNumArguments();
  if (offsets.size() != numInputs)
    return emit() << "has " << offsets.size() << " offsets, but the step has "
                  << numInputs << " inputs (one offset per input)";
  for (auto [i, offset] : llvm::enumerate(offsets.asArrayRef()))
    if (!isPlanOffset(offset))
      return emit() << "offset of input #" << i
                    << " must be a non-negative multiple of " << kArenaAlignment
                    << ", got " << offset;
  return success();
}

/// A gradient computed into the persistent `grads` buffer owns no step
/// memory; only a value bound by zero.grad can be one.
static bool isBoundGradient(Value v) {
  return llvm::any_of(v.getUsers(),
                      [](Operation *user) { return isa<GradOp>(user); });
}

static LogicalResult verifyAlloc(Operation *op, Attribute value, EmitFn emit) {
  auto offsets = dyn_cast<DenseI64ArrayAttr>(value);
  if (!offsets)
    return emit() << "must be an array<i64: ...>, got " << value;
  if (!isa_and_nonnull<TrainStepOp>(op->getParentOp()))
    return emit() << "is only valid on an op of a zero.train_step's body";
  if (offsets.size() != op->getNumResults())
    return emit() << "has " << offsets.size() << " offsets, but the op has "
                  << op->getNumResults() << " results (one offset per result)";
  bool view = isa<ViewLikeOpInterface>(op);
  for (auto [i, offset] : llvm::enumerate(offsets.asArrayRef())) {
    Value result = op->getResult(i);
    bool ownsNothing = view || !isa<RankedTensorType>(result.getType());
    if (offset == -1) {
      if (!ownsNothing && !isBoundGradient(result))
        return emit() << "offset of result #" << i
                      << " is -1, but only views, gradients bound by "
                         "zero.grad and values that are not tensors own no "
                         "step memory";
      continue;
    }
    if (!isPlanOffset(offset))
      return emit() << "offset of result #" << i
                    << " must be -1 or a non-negative multiple of "
                    << kArenaAlignment << ", got " << offset;
    if (ownsNothing)
      return emit() << "offset of result #" << i << " must be -1: "
                    << (view ? "a view" : "a value that is not a tensor")
                    << " owns no step memory";
  }
  return success();
}

static LogicalResult verifyTemp(Operation *op, Attribute value, EmitFn emit) {
  auto offset = dyn_cast<IntegerAttr>(value);
  if (!offset || !offset.getType().isSignlessInteger(64))
    return emit() << "must be an i64 integer, got " << value;
  bool fromSources = false;
  if (auto rs = dyn_cast<ReduceScatterOp>(op))
    fromSources = !rs.getSources().empty();
  else if (auto r = dyn_cast<ReduceOp>(op))
    fromSources = !r.getSources().empty();
  if (!fromSources)
    return emit() << "is only valid on a zero.reduce_scatter or zero.reduce "
                     "of gradient values (`from`), which has a bucket buffer";
  if (!isPlanOffset(offset.getInt()))
    return emit() << "must be a non-negative multiple of " << kArenaAlignment
                  << ", got " << offset.getInt();
  return success();
}

LogicalResult ZeroDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  StringAttr name = attr.getName();
  Attribute value = attr.getValue();
  auto emit = [&] {
    return op->emitOpError("attribute '") << name.getValue() << "' ";
  };
  // An attribute of one kind on one kind of op.
  auto expect = [&](bool isAttr, StringRef attrKind, bool isOp,
                    StringRef opName) -> LogicalResult {
    if (!isAttr)
      return emit() << "must be a " << attrKind << ", got " << value;
    if (!isOp)
      return emit() << "is only valid on " << opName;
    return success();
  };
  if (name == getPlanAttrHelper().getName())
    return expect(isa<MemoryPlanAttr>(value), "#zero.memory_plan",
                  isa<TrainStepOp>(op), "zero.train_step");
  if (name == getBuffersAttrHelper().getName())
    return expect(isa<BufferOffsetsAttr>(value), "#zero.buffer_offsets",
                  isa<PartitionOp>(op), "zero.partition");
  if (name == getLoggingAttrHelper().getName())
    return expect(isa<LoggingAttr>(value), "#zero.logging",
                  isa<TrainStepOp>(op), "zero.train_step");
  if (name == getOffloadAttrHelper().getName()) {
    if (failed(expect(isa<OffloadAttr>(value), "#zero.offload",
                      isa<TrainStepOp>(op), "zero.train_step")))
      return failure();
    if (ScheduleAttr schedule = cast<TrainStepOp>(op).getScheduleAttr())
      return cast<OffloadAttr>(value).verifyStage(emit, schedule.getStage());
    return success();
  }
  if (name == getInputOffsetsAttrHelper().getName())
    return verifyInputOffsets(op, value, emit);
  if (name == getAllocAttrHelper().getName())
    return verifyAlloc(op, value, emit);
  if (name == getTempAttrHelper().getName())
    return verifyTemp(op, value, emit);
  if (name == getLossSeedAttrHelper().getName()) {
    // zero-autodiff seeds the backward with d(loss)/d(loss) = 1.
    auto scalar = op->getNumResults() == 1
                      ? dyn_cast<RankedTensorType>(op->getResult(0).getType())
                      : RankedTensorType();
    if (!isa<UnitAttr>(value) || !scalar || scalar.getRank() != 0)
      return emit() << "marks the backward's seed: a unit attribute on an op "
                       "with one scalar tensor result";
    return success();
  }
  if (name == getRecomputeAttrHelper().getName()) {
    // zero-remat's clones of forward compute ops.
    if (!isa<UnitAttr>(value) || !op->getDialect() ||
        op->getDialect()->getNamespace() != "nn" ||
        !isa_and_nonnull<TrainStepOp>(op->getParentOp()))
      return emit() << "marks a recomputed forward op: a unit attribute on "
                       "an nn op of a train step's body";
    return success();
  }
  // The dialect's other discardable attributes are checked where they are
  // read.
  return success();
}

#define GET_OP_CLASSES
#include "zero/Dialect/Zero/IR/ZeroOps.cpp.inc"
