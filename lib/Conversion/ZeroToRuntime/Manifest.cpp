//===- Manifest.cpp - The JSON manifest of a lowered step -----------------===//
//
// Part of the zero-mlir project.
//
// What the runtime's driver needs to know about the program besides its
// code: the layout of the parameters and partitions, the initializers, the
// inputs, the optimizer and loss scaler, the plan's arena sizes and its
// memory over the step, and a hash of the schedule. Its keys and types are
// runtime/include/zero_rt/manifest.def's, from which the writer here and the
// runtime's reader (runtime/src/Program/Manifest.cpp) are generated.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"
#include "zero/Dialect/Zero/Analysis/Muon.h"
#include "zero/Dialect/Zero/Analysis/Report.h"
#include "zero/Dialect/Zero/IR/Optimizers.h"

#include "zero/Interfaces/IndexOperandOpInterface.h"
#include "zero/Support/UTF8.h"
#include "zero_rt/manifest.h"
#include "zero_rt/program.h"

#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/xxhash.h"

using namespace mlir;
using namespace mlir::zero;
using namespace mlir::zero::lowering;

//===----------------------------------------------------------------------===//
// The writer, generated from manifest.def
//===----------------------------------------------------------------------===//

namespace {
namespace manifest = zrt::manifest;
using llvm::json::Array;
using llvm::json::Object;
using llvm::json::Value;

#define ZRT_MANIFEST_OBJECT(name) Object toJson(const manifest::name &v);
#include "zero_rt/manifest.def"

/// An object keyed by the names of the buffers the map has.
Object toJson(const manifest::BufferMap &v) {
  Object o;
  for (int k = 0; k < zrt::kNumBufferKinds; ++k)
    if (v[k])
      o[zrt::kBufferNames[k]] = *v[k];
  return o;
}

/// The manifest's first string that is not UTF-8, if any. Its strings come
/// from verified IR, whose verifiers refuse names and paths that are not
/// UTF-8 (zero/Support/UTF8.h); should one slip through, it is noted here
/// rather than handed to llvm::json, which asserts, and buildManifest fails.
thread_local std::optional<std::string> invalidString;

Value toJson(const std::string &v) {
  if (!::zero::findInvalidUTF8(v))
    return Value(v);
  if (!invalidString)
    invalidString = v;
  return Value(llvm::json::fixUTF8(v));
}

template <typename T>
Value toJson(const T &v) {
  if constexpr (std::is_enum_v<T>)
    return Value(manifest::valueOf(v));
  else
    return Value(v);
}

template <typename T>
Value toJson(const std::vector<T> &v) {
  Array a;
  for (const T &e : v)
    a.push_back(toJson(e));
  return a;
}

template <typename T>
void writeField(Object &o, const char *key, const T &v) {
  o[key] = toJson(v);
}

template <typename T>
void writeField(Object &o, const char *key, const std::optional<T> &v) {
  if (v)
    o[key] = toJson(*v);
}

#define ZRT_MANIFEST_OBJECT(name)                                              \
  Object toJson(const manifest::name &v) {                                     \
    Object o;
#define ZRT_MANIFEST_FIELD(type, name, key, presence, init)                    \
  writeField(o, key, v.name);
#define ZRT_MANIFEST_END(name)                                                 \
  return o;                                                                    \
  }
#include "zero_rt/manifest.def"

} // namespace

//===----------------------------------------------------------------------===//
// The manifest of a step
//===----------------------------------------------------------------------===//

/// The manifest's value of a case of the compiler's enums: the one
/// written alike.
template <typename E>
static E toManifest(StringRef value) {
  if (std::optional<E> e = manifest::enumOf<E>(value))
    return *e;
  llvm::report_fatal_error("'" + value + "' is not in zero_rt/manifest.def");
}

static manifest::Dtype toManifest(Type t) {
  if (t.isBF16())
    return manifest::Dtype::BF16;
  if (t.isF16())
    return manifest::Dtype::F16;
  if (t.isF32())
    return manifest::Dtype::F32;
  if (t.isInteger(32))
    return manifest::Dtype::I32;
  return manifest::Dtype::I64;
}

/// Sets `field` to `opt`'s hyper-parameter `name`, converted to the field's
/// type (true is 1, an enum's value its number).
template <typename T>
static void setHyperParam(OptimizerAttr opt, StringRef name, T &field) {
  std::optional<double> value = getOptimizerParamValue(opt, name);
  if (!value)
    llvm::report_fatal_error("optimizers.def: #zero.optimizer has no " +
                             Twine(name));
  field = static_cast<T>(*value);
}

/// The optimizer attribute; its schedule with every parameter, by
/// DeepSpeed's names.
static manifest::Optimizer optimizerManifest(OptimizerAttr opt) {
  auto d = [](const APFloat &v) { return v.convertToDouble(); };
  manifest::Optimizer o;
  o.kind = toManifest<manifest::OptimizerKind>(
      stringifyOptimizerKind(opt.getKind()));
  o.lr = d(opt.getLr());
  // Every ZRT_HYPER_PARAM row, whatever the kind (one the kind does not
  // read is at its default).
#define ZRT_HYPER_PARAM(name, type, default, check)                            \
  setHyperParam(opt, #name, o.name);
#include "zero_rt/optimizers.def"
  // Absent for f32, so that programs with f32 states keep their manifest.
  if (opt.getStates() != StatePrecision::f32)
    o.states = toManifest<manifest::StatePrecision>(
        stringifyStatePrecision(opt.getStates()));
  // Absent when off, as the states.
  if (opt.getBf16Masters())
    o.bf16Masters = true;
  if (LrScheduleAttr s = opt.getSchedule()) {
    manifest::Schedule &m = o.schedule.emplace();
    m.kind = toManifest<manifest::LrScheduleKind>(
        stringifyLrScheduleKind(s.getKind()));
    m.warmupMinLr = d(s.getWarmupMinLr());
    m.warmupMaxLr = d(s.getWarmupMaxLr());
    m.warmupNumSteps = s.getWarmupNumSteps();
    m.warmupType = toManifest<manifest::WarmupType>(
        stringifyWarmupType(s.getWarmupType()));
    // "auto" is left out: the run's length, which the driver sets.
    if (!s.isTotalNumStepsAuto())
      m.totalNumSteps = s.getTotalNumSteps();
    m.warmupMinRatio = d(s.getWarmupMinRatio());
    m.cosMinRatio = d(s.getCosMinRatio());
    m.cycleMinLr = d(s.getCycleMinLr());
    m.cycleMaxLr = d(s.getCycleMaxLr());
    m.decayLrRate = d(s.getDecayLrRate());
    m.cycleFirstStepSize = s.getCycleFirstStepSize();
    m.cycleSecondStepSize = s.getCycleSecondStepSize();
    m.decayStepSize = s.getDecayStepSize();
    m.cycleMomentum = s.getCycleMomentum();
    m.cycleMinMom = d(s.getCycleMinMom());
    m.cycleMaxMom = d(s.getCycleMaxMom());
    m.decayMomRate = d(s.getDecayMomRate());
    m.lrRangeTestMinLr = d(s.getLrRangeTestMinLr());
    m.lrRangeTestStepSize = s.getLrRangeTestStepSize();
    m.lrRangeTestStepRate = d(s.getLrRangeTestStepRate());
    m.lrRangeTestStaircase = s.getLrRangeTestStaircase();
  }
  return o;
}

/// The bytes of `comm`'s collectives of kind `name`, if the step runs any.
static std::optional<manifest::CommBytes> getCommBytes(const CommPlan &comm,
                                                       StringRef name) {
  auto it = comm.bytesByKind.find(name.str());
  if (it == comm.bytesByKind.end())
    return std::nullopt;
  manifest::CommBytes bytes;
  bytes.intraNodeBytes = it->second.intraNode;
  bytes.interNodeBytes = it->second.interNode;
  return bytes;
}

/// The step's settings: sizes, topology, precision, optimizer, labels and
/// logging.
static void addStepSettings(const StepSchedule &s, manifest::Program &m) {
  TrainStepOp step = s.getStep();
  m.version = ZRT_PROGRAM_VERSION;
  m.stage = s.getStage();
  m.worldSize = s.getWorldSize();
  m.accumulationSteps = s.getAccumulationSteps();
  if (ScheduleAttr schedule = step.getScheduleAttr()) {
    m.globalBatch = schedule.getGlobalBatch();
    m.sequenceParallel = schedule.getSequenceParallel();
    if (schedule.getExpertParallel() > 1)
      m.expertParallel = schedule.getExpertParallel();
    // Only strided sets, so contiguous programs keep their hashes.
    if (schedule.getExpertPlacement() == ExpertPlacement::strided)
      m.expertPlacement = manifest::ExpertPlacement::Strided;
    // Only a topology other than one node without hpZ or MiCS, so
    // single-node programs keep their manifests and hashes.
    if (schedule.getRanksPerNode() != 0 ||
        schedule.getHpzPartitionSize() != 1 ||
        schedule.getMicsShardSize() != 0) {
      manifest::Topology &t = m.topology.emplace();
      t.ranksPerNode = schedule.getRanksPerNode();
      t.hpzPartitionSize = schedule.getHpzPartitionSize();
      t.micsShardSize = schedule.getMicsShardSize();
    }
  }

  PrecisionAttr prec = step.getPrecision();
  m.precision.kind = toManifest<manifest::PrecisionKind>(
      stringifyPrecisionKind(prec.getKind()));
  m.precision.initialScalePower = prec.getInitialScalePower();
  m.precision.lossScaleWindow = prec.getLossScaleWindow();
  m.precision.hysteresis = prec.getHysteresis();
  m.precision.minLossScale = prec.getMinLossScale().convertToDouble();
  m.precision.lossScale = prec.getLossScale().convertToDouble();
  m.optimizer = optimizerManifest(step.getOptimizer());
  m.gradientClipping = step.getGradientClipping().convertToDouble();
  m.labels = toManifest<manifest::LabelConvention>(
      stringifyLabelConvention(step.getLabels()));
  if (LoggingAttr logging = step->getContext()
                                ->getLoadedDialect<ZeroDialect>()
                                ->getLoggingAttrHelper()
                                .getAttr(step)) {
    m.logging.stepsPerPrint = logging.getStepsPerPrint();
    m.logging.wallClockBreakdown = logging.getWallClockBreakdown();
  }
}

/// The Hugging Face model and the PEFT adapters the module came from.
static void addModelOrigin(TrainStepOp step, manifest::Program &m) {
  auto module = step->getParentOfType<ModuleOp>();
  if (!module)
    return;
  if (HfModelAttr hf = step->getContext()
                           ->getLoadedDialect<ZeroDialect>()
                           ->getHfModelAttrHelper()
                           .getAttr(module)) {
    manifest::HfModel &out = m.hfModel.emplace();
    out.config = hf.getConfig().str();
    if (DictionaryAttr tied = hf.getTied())
      for (NamedAttribute entry : tied)
        out.tied.push_back(
            {entry.getName().str(),
             cast<StringAttr>(entry.getValue()).getValue().str()});
    if (DictionaryAttr buffers = hf.getBuffers()) {
      std::vector<manifest::HfBuffer> &list = out.buffers.emplace();
      for (NamedAttribute entry : buffers) {
        auto values = cast<DenseFPElementsAttr>(entry.getValue());
        manifest::HfBuffer &b = list.emplace_back();
        b.name = entry.getName().str();
        llvm::append_range(b.shape, values.getType().getShape());
        for (APFloat v : values.getValues<APFloat>())
          b.values.push_back(v.convertToDouble());
      }
    }
    if (ArrayAttr unused = hf.getUnused()) {
      std::vector<std::string> &list = out.unused.emplace();
      for (Attribute name : unused)
        list.push_back(cast<StringAttr>(name).getValue().str());
    }
  }
  if (PeftAttr peft = step->getContext()
                          ->getLoadedDialect<ZeroDialect>()
                          ->getPeftAttrHelper()
                          .getAttr(module)) {
    manifest::Peft &out = m.peft.emplace();
    out.config = peft.getConfig().str();
    out.prefix = peft.getPrefix().str();
    for (LoraAttr lora : peft.getLoras()) {
      manifest::Lora &layer = out.layers.emplace_back();
      layer.base = lora.getBase().str();
      layer.a = lora.getA().str();
      layer.b = lora.getB().str();
      layer.scaling = lora.getScaling().convertToDouble();
      layer.mergedKey = lora.getMergedKey().str();
      layer.aName = lora.getAKey().str();
      layer.bName = lora.getBKey().str();
    }
  }
}

void Lowering::addInputs(manifest::Program &m) {
  TrainStepOp step = s.getStep();
  ArrayAttr names = step.getInputNamesAttr();
  for (BlockArgument arg : step.getBodyBlock().getArguments()) {
    manifest::Input &in = m.inputs.emplace_back();
    // The traced forward's argument, by which the library's step takes it.
    if (names)
      in.name = cast<StringAttr>(names[arg.getArgNumber()]).str();
    llvm::append_range(in.shape, tensorType(arg).getShape());
    in.dtype = toManifest(elemType(arg));
    in.offset = inputOffsets[arg.getArgNumber()];
    // Token ids and labels: the range the data must lie in, checked by
    // the driver before the first step.
    in.indexBound = getIndexBound(arg);
    in.ignoredIndex = getIgnoredIndex(arg);
    // Which data file feeds it: token ids, labels or positions.
    switch (getIndexRole(arg)) {
    case IndexRole::none:
      break;
    case IndexRole::token:
      in.role = manifest::IndexRole::Tokens;
      break;
    case IndexRole::label:
      in.role = manifest::IndexRole::Labels;
      break;
    case IndexRole::position:
      in.role = manifest::IndexRole::Positions;
      break;
    }
  }
}

void Lowering::addParams(manifest::Program &m) {
  bool muon = s.getStep().getOptimizer().getKind() == OptimizerKind::muon;
  for (ParamOp p : module.getOps<ParamOp>()) {
    const ParamLocation *loc = s.lookupParam(p.getSymName());
    manifest::Param &param = m.params.emplace_back();
    param.name = p.getSymName().str();
    llvm::append_range(param.shape, p.getTensorType().getShape());
    param.numel = p.getNumElements();
    param.init = toManifest<manifest::InitKind>(stringifyInitKind(p.getInit()));
    param.std = p.getStd() ? p.getStd()->convertToDouble() : 0.0;
    param.partition = loc ? partitionIndex(loc->partition) : -1;
    param.offset = loc ? loc->offset : -1;
    if (std::optional<APFloat> decay = p.getWeightDecay())
      param.weightDecay = decay->convertToDouble();
    // Rows the user sees; the rest are zero-padding (zero-pad-vocab).
    param.rows = p.getRows();
    // Written only when set, so trainable steps keep their manifests.
    if (p.getFrozen())
      param.frozen = true;
    param.expertParallel = p.getExpertParallel();
    // Written only for Muon's matrices, so other steps keep their manifests.
    if (muon && isMuonMatrix(p))
      param.muon = true;
  }
}

void Lowering::addPartitions(manifest::Program &m) {
  for (const PartitionBuffers &pb : s.getPartitions()) {
    PartitionOp p = pb.partition;
    manifest::Partition &part = m.partitions.emplace_back();
    part.name = p.getSymName().str();
    part.numel = p.getNumelValue();
    part.paddedNumel = p.getPaddedNumelValue();
    part.shardNumel = p.getShardNumel();
    // Each group computes in its parameters' type; zero-partition starts
    // a new group where it changes.
    part.computeDtype = toManifest(pb.computeType);
    for (Attribute a : p.getParams())
      part.params.push_back(
          cast<SymbolRefAttr>(a).getLeafReference().getValue().str());
    // fp32 parameters are their own masters: no master buffer. An
    // offloaded optimizer's buffers are at offsets of the host arena, those
    // on NVMe at offsets in the rank's swap files (params: the parameters'
    // file).
    std::vector<zrt::BufferKind> host, nvme;
    for (unsigned k = 0; k <= getMaxEnumValForBufferKind(); ++k) {
      auto kind = static_cast<BufferKind>(k);
      if (!pb.hasBuffer(kind))
        continue;
      auto buffer = toManifest<zrt::BufferKind>(stringifyBufferKind(kind));
      part.buffers[buffer] = persistentOffset(p, kind);
      part.bufferNumel[buffer] = pb.numel[k];
      if (pb.getMemory(kind) == MemoryKind::host)
        host.push_back(buffer);
      else if (pb.getMemory(kind) == MemoryKind::nvme)
        nvme.push_back(buffer);
    }
    if (!host.empty())
      part.hostBuffers = std::move(host);
    if (!nvme.empty())
      part.nvmeBuffers = std::move(nvme);
    if (p.getExpert())
      part.expert = true;
  }
}

/// The memory plan and, with a topology, the communication plan.
static LogicalResult addPlan(const StepSchedule &s, const MemoryPlan &plan,
                             manifest::Program &m) {
  TrainStepOp step = s.getStep();
  // The plan over the step, for plotting the runtime's measured memory
  // (--trace) against it: live step-arena bytes and kernel scratch by op
  // index.
  manifest::MemoryTimeline &timeline = m.memoryTimeline.emplace();
  for (const auto &live : plan.liveByCategory) {
    int64_t sum = 0;
    for (int64_t v : live)
      sum += v;
    timeline.liveBytes.push_back(sum);
  }
  timeline.scratchBytes.assign(plan.scratchByOp.begin(),
                               plan.scratchByOp.end());
  timeline.backwardStart = plan.backwardStart;
  m.plan.persistentBytes = plan.persistentBytes;
  m.plan.arenaBytes = plan.arenaBytes;
  m.plan.scratchBytes = plan.scratchBytes;
  m.plan.peakBytes = plan.peakBytes;
  // With a topology, the bytes rank 0 sends by kind and link, as the report
  // plans them, for the run to compare with what its collectives count.
  if (m.topology) {
    FailureOr<CommPlan> comm = computeCommPlan(s);
    if (failed(comm))
      return failure();
    manifest::CommByKind &byKind = m.plan.comm.emplace();
    byKind.allGather = getCommBytes(
        *comm, stringifyCollectiveKind(CollectiveKind::all_gather));
    byKind.reduceScatter = getCommBytes(
        *comm, stringifyCollectiveKind(CollectiveKind::reduce_scatter));
    byKind.reduce =
        getCommBytes(*comm, stringifyCollectiveKind(CollectiveKind::reduce));
    byKind.allReduce = getCommBytes(
        *comm, stringifyCollectiveKind(CollectiveKind::all_reduce));
    byKind.allToAll = getCommBytes(
        *comm, stringifyCollectiveKind(CollectiveKind::all_to_all));
  }
  if (plan.hostBytes > 0)
    m.plan.hostBytes = plan.hostBytes;
  if (plan.nvmeBytes > 0) {
    // nvme_bytes is the total of the rank's swap files: the optimizer's
    // (under nvme_path) and the parameters' (param_nvme_bytes of it, under
    // param_nvme_path).
    m.plan.nvmeBytes = plan.nvmeBytes;
    OffloadAttr offload = step.getOffload();
    if (plan.swapBytes > 0) {
      m.plan.swapOffset = plan.swapOffset;
      m.plan.swapBytes = plan.swapBytes;
      m.nvmePath = offload.getNvmePath().str();
    }
    if (plan.paramNvmeBytes > 0) {
      m.plan.paramNvmeBytes = plan.paramNvmeBytes;
      m.plan.paramSwapOffset = plan.paramSwapOffset;
      m.plan.paramSwapBytes = plan.paramSwapBytes;
      m.paramNvmePath = offload.getParamNvmePath().str();
    }
  }
  return success();
}

/// The manifest's JSON text, with its hash.
static FailureOr<std::string> writeManifest(TrainStepOp step,
                                            manifest::Program &m) {
  // The hash covers the manifest and the schedule itself, so executables
  // compiled from different schedules refuse to run together.
  invalidString.reset();
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::json::Value(toJson(m));
  if (invalidString) {
    std::optional<size_t> bad = ::zero::findInvalidUTF8(*invalidString);
    return step.emitOpError()
           << ::zero::describeInvalidUTF8("the manifest's string ",
                                          *invalidString, *bad)
           << " (JSON is UTF-8)";
  }
  std::string ir;
  llvm::raw_string_ostream irs(ir);
  step->print(irs, OpPrintingFlags().elideLargeElementsAttrs());
  uint64_t hash = llvm::xxh3_64bits(StringRef(text + ir));
  m.hash = llvm::formatv("{0:x16}", hash).str();
  std::string out;
  llvm::raw_string_ostream mos(out);
  mos << llvm::json::Value(toJson(m));
  return out;
}

FailureOr<std::string> Lowering::buildManifest() {
  manifest::Program m;
  addStepSettings(s, m);
  addModelOrigin(s.getStep(), m);
  m.alignment =
      static_cast<int64_t>(s.getPartitions().front().partition.getAlignment());
  m.tokenSlots = static_cast<int64_t>(slots.size());
  addInputs(m);
  addParams(m);
  addPartitions(m);
  if (failed(addPlan(s, plan, m)))
    return failure();
  return writeManifest(s.getStep(), m);
}
