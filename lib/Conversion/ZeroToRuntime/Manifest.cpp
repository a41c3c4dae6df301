//===- Manifest.cpp - The JSON manifest of a lowered step -----------------===//
//
// Part of the zero-mlir project.
//
// What the runtime's driver needs to know about the program besides its
// code: the layout of the parameters and partitions, the initializers, the
// inputs, the optimizer and loss scaler, the plan's arena sizes and its
// memory over the step, and a hash of the schedule. The runtime reads it in
// runtime/src/Manifest.cpp; runtime/README.md ("Training executables") lists
// the keys it reads.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "zero/Interfaces/IndexOperandOpInterface.h"
#include "zero_rt/program.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/xxhash.h"

using namespace mlir;
using namespace mlir::zero;
using namespace mlir::zero::lowering;

static StringRef dtypeName(Type t) {
  if (t.isBF16())
    return "bf16";
  if (t.isF16())
    return "f16";
  if (t.isF32())
    return "f32";
  if (t.isInteger(32))
    return "i32";
  return "i64";
}

/// The optimizer attribute; its schedule with every parameter, by
/// DeepSpeed's names.
static llvm::json::Object optimizerObject(OptimizerAttr opt) {
  using llvm::json::Object;
  Object o{{"kind", stringifyOptimizerKind(opt.getKind())},
           {"lr", opt.getLr().convertToDouble()},
           {"beta1", opt.getBeta1().convertToDouble()},
           {"beta2", opt.getBeta2().convertToDouble()},
           {"eps", opt.getEps().convertToDouble()},
           {"weight_decay", opt.getWeightDecay().convertToDouble()},
           {"bias_correction", opt.getBiasCorrection()}};
  if (LrScheduleAttr s = opt.getSchedule()) {
    auto d = [](const APFloat &v) { return v.convertToDouble(); };
    o["schedule"] =
        Object{{"kind", stringifyLrScheduleKind(s.getKind())},
               {"warmup_min_lr", d(s.getWarmupMinLr())},
               {"warmup_max_lr", d(s.getWarmupMaxLr())},
               {"warmup_num_steps", s.getWarmupNumSteps()},
               {"warmup_type", stringifyWarmupType(s.getWarmupType())},
               {"total_num_steps", s.getTotalNumSteps()},
               {"warmup_min_ratio", d(s.getWarmupMinRatio())},
               {"cos_min_ratio", d(s.getCosMinRatio())},
               {"cycle_min_lr", d(s.getCycleMinLr())},
               {"cycle_max_lr", d(s.getCycleMaxLr())},
               {"decay_lr_rate", d(s.getDecayLrRate())},
               {"cycle_first_step_size", s.getCycleFirstStepSize()},
               {"cycle_second_step_size", s.getCycleSecondStepSize()},
               {"decay_step_size", s.getDecayStepSize()},
               {"cycle_momentum", s.getCycleMomentum()},
               {"cycle_min_mom", d(s.getCycleMinMom())},
               {"cycle_max_mom", d(s.getCycleMaxMom())},
               {"decay_mom_rate", d(s.getDecayMomRate())},
               {"lr_range_test_min_lr", d(s.getLrRangeTestMinLr())},
               {"lr_range_test_step_size", s.getLrRangeTestStepSize()},
               {"lr_range_test_step_rate", d(s.getLrRangeTestStepRate())},
               {"lr_range_test_staircase", s.getLrRangeTestStaircase()}};
  }
  return o;
}

std::string Lowering::buildManifest() {
  TrainStepOp step = s.getStep();
  using llvm::json::Array;
  using llvm::json::Object;
  Array params, partitions, inputs;
  for (ParamOp p : module.getOps<ParamOp>()) {
    const ParamLocation *loc = s.lookupParam(p.getSymName());
    Array shape;
    for (int64_t d : p.getTensorType().getShape())
      shape.push_back(d);
    Object o{{"name", p.getSymName()},
             {"shape", std::move(shape)},
             {"numel", p.getNumElements()},
             {"init", stringifyInitKind(p.getInit())},
             {"std", p.getStd() ? p.getStd()->convertToDouble() : 0.0},
             {"partition", loc ? partitionIndex(loc->partition) : -1},
             {"offset", loc ? loc->offset : -1}};
    if (std::optional<APFloat> decay = p.getWeightDecay())
      o["weight_decay"] = decay->convertToDouble();
    // Rows the user sees; the rest are zero-padding (zero-pad-vocab).
    if (std::optional<int64_t> rows = p.getRows())
      o["rows"] = *rows;
    params.push_back(std::move(o));
  }
  for (const PartitionBuffers &pb : s.getPartitions()) {
    PartitionOp p = pb.partition;
    Object buffers, sizes;
    Array hostBuffers, nvmeBuffers;
    // fp32 parameters are their own masters: no "master" entry. An
    // offloaded optimizer's buffers are at offsets of the host arena.
    for (unsigned k = 0; k <= getMaxEnumValForBufferKind(); ++k) {
      auto kind = static_cast<BufferKind>(k);
      if (!pb.hasBuffer(kind))
        continue;
      buffers[stringifyBufferKind(kind)] = persistentOffset(p, kind);
      sizes[stringifyBufferKind(kind)] = pb.numel[k];
      if (pb.getMemory(kind) == MemoryKind::host)
        hostBuffers.push_back(stringifyBufferKind(kind));
      else if (pb.getMemory(kind) == MemoryKind::nvme)
        nvmeBuffers.push_back(stringifyBufferKind(kind));
    }
    Array names;
    for (Attribute a : p.getParams())
      names.push_back(cast<SymbolRefAttr>(a).getLeafReference().getValue());
    partitions.push_back(Object{{"name", p.getSymName()},
                                {"numel", p.getNumelValue()},
                                {"padded_numel", p.getPaddedNumelValue()},
                                {"shard_numel", p.getShardNumel()},
                                {"params", std::move(names)},
                                {"buffers", std::move(buffers)},
                                {"buffer_numel", std::move(sizes)}});
    if (!hostBuffers.empty())
      (*partitions.back().getAsObject())["host_buffers"] =
          std::move(hostBuffers);
    // Offsets in the rank's swap files (params: the parameters' file).
    if (!nvmeBuffers.empty())
      (*partitions.back().getAsObject())["nvme_buffers"] =
          std::move(nvmeBuffers);
  }
  for (BlockArgument arg : step.getBodyBlock().getArguments()) {
    Array shape;
    for (int64_t d : tensorType(arg).getShape())
      shape.push_back(d);
    Object input{{"shape", std::move(shape)},
                 {"dtype", dtypeName(elemType(arg))},
                 {"offset", inputOffsets[arg.getArgNumber()]}};
    // Token ids and labels: the range the data must lie in, checked by
    // the driver before the first step.
    if (std::optional<int64_t> bound = getIndexBound(arg))
      input["index_bound"] = *bound;
    inputs.push_back(std::move(input));
  }
  OptimizerAttr opt = step.getOptimizer();
  PrecisionAttr prec = step.getPrecision();
  int64_t globalBatch = 0;
  if (ScheduleAttr schedule = step.getScheduleAttr())
    globalBatch = schedule.getGlobalBatch();
  PartitionOp first = s.getPartitions().front().partition;
  // The plan over the step, for plotting the runtime's measured memory
  // (--trace) against it: live step-arena bytes and kernel scratch by op
  // index.
  Array liveBytes, scratchBytes;
  for (const auto &live : plan.liveByCategory) {
    int64_t sum = 0;
    for (int64_t v : live)
      sum += v;
    liveBytes.push_back(sum);
  }
  for (int64_t v : plan.scratchByOp)
    scratchBytes.push_back(v);
  auto logging = step->getContext()
                     ->getLoadedDialect<ZeroDialect>()
                     ->getLoggingAttrHelper()
                     .getAttr(step);
  if (!logging)
    logging = LoggingAttr::get(step->getContext(), 1, false);
  Object manifest{
      {"version", ZRT_PROGRAM_VERSION},
      {"stage", s.getStage()},
      {"world_size", s.getWorldSize()},
      {"accumulation_steps", s.getAccumulationSteps()},
      {"global_batch", globalBatch},
      {"compute_dtype", dtypeName(s.getPartitions().front().computeType)},
      {"precision",
       Object{{"kind", stringifyPrecisionKind(prec.getKind())},
              {"initial_scale_power", prec.getInitialScalePower()},
              {"loss_scale_window", prec.getLossScaleWindow()},
              {"hysteresis", prec.getHysteresis()},
              {"min_loss_scale", prec.getMinLossScale().convertToDouble()},
              {"loss_scale", prec.getLossScale().convertToDouble()}}},
      {"optimizer", optimizerObject(opt)},
      {"gradient_clipping", step.getGradientClipping().convertToDouble()},
      {"logging",
       Object{{"steps_per_print", logging.getStepsPerPrint()},
              {"wall_clock_breakdown", logging.getWallClockBreakdown()}}},
      {"alignment", static_cast<int64_t>(first.getAlignment())},
      {"token_slots", static_cast<int64_t>(slots.size())},
      {"inputs", std::move(inputs)},
      {"params", std::move(params)},
      {"partitions", std::move(partitions)},
      {"memory_timeline", Object{{"live_bytes", std::move(liveBytes)},
                                 {"scratch_bytes", std::move(scratchBytes)},
                                 {"backward_start", plan.backwardStart}}},
      {"plan", Object{{"persistent_bytes", plan.persistentBytes},
                      {"arena_bytes", plan.arenaBytes},
                      {"scratch_bytes", plan.scratchBytes},
                      {"peak_bytes", plan.peakBytes}}},
  };
  if (plan.hostBytes > 0)
    (*manifest.getObject("plan"))["host_bytes"] = plan.hostBytes;
  if (plan.nvmeBytes > 0) {
    // nvme_bytes is the total of the rank's swap files: the optimizer's
    // (under nvme_path) and the parameters' (param_nvme_bytes of it, under
    // param_nvme_path).
    Object &planObject = *manifest.getObject("plan");
    planObject["nvme_bytes"] = plan.nvmeBytes;
    auto offload = step->getContext()
                       ->getLoadedDialect<ZeroDialect>()
                       ->getOffloadAttrHelper()
                       .getAttr(step);
    if (plan.swapBytes > 0) {
      planObject["swap_offset"] = plan.swapOffset;
      planObject["swap_bytes"] = plan.swapBytes;
      manifest["nvme_path"] = offload.getNvmePath();
    }
    if (plan.paramNvmeBytes > 0) {
      planObject["param_nvme_bytes"] = plan.paramNvmeBytes;
      planObject["param_swap_offset"] = plan.paramSwapOffset;
      planObject["param_swap_bytes"] = plan.paramSwapBytes;
      manifest["param_nvme_path"] = offload.getParamNvmePath();
    }
  }
  // The hash covers the manifest and the schedule itself, so executables
  // compiled from different schedules refuse to run together.
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::json::Value(Object(manifest));
  std::string ir;
  llvm::raw_string_ostream irs(ir);
  step->print(irs, OpPrintingFlags().elideLargeElementsAttrs());
  uint64_t hash = llvm::xxh3_64bits(StringRef(text + ir));
  manifest["hash"] = llvm::formatv("{0:x16}", hash).str();
  std::string out;
  llvm::raw_string_ostream mos(out);
  mos << llvm::json::Value(std::move(manifest));
  return out;
}
