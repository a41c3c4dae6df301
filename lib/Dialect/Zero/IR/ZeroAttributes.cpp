//===- ZeroAttributes.cpp - Zero dialect attributes -----------------------===//
//
// Part of the zero-mlir project.
//
// The verifiers of the step-wide and memory-plan attributes, and of the
// dialect's discardable attributes on ops.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/IR/OptimizerRules.h"
#include "zero/Dialect/Zero/IR/Optimizers.h"
#include "zero/Dialect/Zero/IR/ZeroDialect.h"
#include "zero/Support/UTF8.h"
#include "zero_rt/variants.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/JSON.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::zero;

#include "zero/Dialect/Zero/IR/ZeroEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "zero/Dialect/Zero/IR/ZeroAttrs.cpp.inc"

void ZeroDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "zero/Dialect/Zero/IR/ZeroAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

static_assert(static_cast<int32_t>(MeshAxis::data) == ZRT_AXIS_DATA &&
                  static_cast<int32_t>(MeshAxis::hpz) == ZRT_AXIS_HPZ &&
                  static_cast<int32_t>(MeshAxis::mics) == ZRT_AXIS_MICS &&
                  static_cast<int32_t>(MeshAxis::sequence) ==
                      ZRT_AXIS_SEQUENCE &&
                  static_cast<int32_t>(MeshAxis::expert) == ZRT_AXIS_EXPERT,
              "MeshAxis follows zero_rt/topology.h's axes");

Attribute MeshAttr::parse(AsmParser &parser, Type) {
  SmallVector<MeshAxis> axes;
  SmallVector<int64_t> sizes;
  auto parseAxis = [&]() -> ParseResult {
    StringRef name;
    SMLoc loc = parser.getCurrentLocation();
    int64_t size;
    if (parser.parseKeyword(&name) || parser.parseEqual() ||
        parser.parseInteger(size))
      return failure();
    std::optional<MeshAxis> axis = symbolizeMeshAxis(name);
    if (!axis)
      return parser.emitError(loc) << "unknown mesh axis '" << name << "'";
    axes.push_back(*axis);
    sizes.push_back(size);
    return success();
  };
  if (parser.parseLess() ||
      parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, parseAxis) ||
      parser.parseGreater())
    return {};
  return getChecked([&] { return parser.emitError(parser.getNameLoc()); },
                    parser.getContext(), axes, sizes);
}

void MeshAttr::print(AsmPrinter &printer) const {
  printer << "<[";
  llvm::interleaveComma(llvm::zip(getAxes(), getSizes()), printer,
                        [&](auto axis) {
                          printer << stringifyMeshAxis(std::get<0>(axis))
                                  << " = " << std::get<1>(axis);
                        });
  printer << "]>";
}

LogicalResult MeshAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               ArrayRef<MeshAxis> axes,
                               ArrayRef<int64_t> sizes) {
  if (axes.size() != sizes.size() || axes.size() > ZRT_MESH_MAX_AXES)
    return emitError() << "a mesh has at most " << int(ZRT_MESH_MAX_AXES)
                       << " axes, each with a size";
  int64_t ranks = 1;
  for (auto [i, axis] : llvm::enumerate(axes)) {
    if (llvm::count(axes, axis) > 1)
      return emitError() << "mesh axis " << stringifyMeshAxis(axis)
                         << " appears twice";
    if (sizes[i] < 1 || sizes[i] > kMaxWorldSize)
      return emitError() << "mesh axis " << stringifyMeshAxis(axis)
                         << " has size " << sizes[i] << ", not 1 to "
                         << kMaxWorldSize;
    // Checked axis by axis, so that the product cannot overflow.
    ranks *= sizes[i];
    if (ranks > kMaxWorldSize)
      return emitError() << "a mesh has at most " << kMaxWorldSize << " ranks";
  }
  if (!llvm::is_contained(axes, MeshAxis::data))
    return emitError() << "a mesh has a data axis";
  // Each kind's axes must be one run for its ranks to be {first + i *
  // stride} (zrt_rank_set_of).
  zrt_mesh mesh = {};
  mesh.num_axes = int32_t(axes.size());
  for (auto [i, axis] : llvm::enumerate(axes)) {
    mesh.axes[i] = static_cast<int32_t>(axis);
    mesh.sizes[i] = sizes[i];
  }
  for (int32_t kind = 0;
       kind <= static_cast<int32_t>(RankSetKind::expert_replicas); ++kind)
    if (zrt_rank_set_of(kind, 0, &mesh).size == 0)
      return emitError() << "the " << stringifyRankSetKind(RankSetKind(kind))
                         << " rank set of the mesh is no arithmetic "
                            "progression of ranks: its axes are not one run";
  return success();
}

zrt_mesh MeshAttr::toRuntime() const {
  zrt_mesh mesh = {};
  mesh.num_axes = int32_t(getAxes().size());
  for (auto [i, axis, size] : llvm::enumerate(getAxes(), getSizes())) {
    mesh.axes[i] = static_cast<int32_t>(axis);
    mesh.sizes[i] = size;
  }
  return mesh;
}

MeshAttr MeshAttr::get(MLIRContext *context, const zrt_mesh &mesh) {
  SmallVector<MeshAxis> axes;
  for (int32_t i = 0; i < mesh.num_axes; ++i)
    axes.push_back(static_cast<MeshAxis>(mesh.axes[i]));
  return get(context, axes, ArrayRef(mesh.sizes, size_t(mesh.num_axes)));
}

/// The rules of the sizes a ds_config, a command line or a mesh gives, in
/// the words of the options that give them.
static LogicalResult
verifyScheduleSizes(function_ref<InFlightDiagnostic()> emitError, int64_t stage,
                    int64_t worldSize, int64_t globalBatch,
                    int64_t accumulationSteps, int64_t ranksPerNode,
                    int64_t hpzPartitionSize, int64_t micsShardSize,
                    int64_t sequenceParallel, int64_t expertParallel,
                    ExpertPlacement expertPlacement) {
  if (stage < 0 || stage > 3)
    return emitError() << "stage must be 0, 1, 2 or 3, got " << stage;
  if (worldSize < 1 || worldSize > kMaxWorldSize)
    return emitError() << "world_size must be between 1 and " << kMaxWorldSize
                       << ", got " << worldSize;
  if (accumulationSteps < 1 || accumulationSteps > kMaxAccumulationSteps)
    return emitError() << "accumulation_steps must be between 1 and "
                       << kMaxAccumulationSteps << ", got "
                       << accumulationSteps;
  if (sequenceParallel < 1 || worldSize % sequenceParallel != 0)
    return emitError() << "sequence_parallel " << sequenceParallel
                       << " must be a positive divisor of world_size "
                       << worldSize;
  // The ranks of a sequence-parallel group share their samples.
  int64_t dataParallel = worldSize / sequenceParallel;
  if (globalBatch < 1 || globalBatch % (dataParallel * accumulationSteps) != 0)
    return emitError() << "global_batch " << globalBatch
                       << " must be a positive multiple of world_size"
                       << (sequenceParallel > 1 ? " / sequence_parallel" : "")
                       << " x accumulation_steps = "
                       << dataParallel * accumulationSteps;
  if (ranksPerNode < 0 || (ranksPerNode > 0 && worldSize % ranksPerNode != 0))
    return emitError() << "ranks_per_node " << ranksPerNode
                       << " must divide world_size " << worldSize;
  // DeepSpeed's rules for hpZ and MiCS (zero_rt/variants.h).
  zrt_variant_config variants = {};
  variants.stage = stage;
  variants.world_size = worldSize;
  variants.hpz_partition_size = hpzPartitionSize;
  variants.mics_shard_size = micsShardSize;
  auto breaks = [&](zrt_variant_rule rule) {
    return zrt_variant_breaks(&variants, rule) != 0;
  };
  if (breaks(ZRT_HPZ_DIVIDES_WORLD))
    return emitError() << "hpz_partition_size " << hpzPartitionSize
                       << " must be a positive divisor of world_size "
                       << worldSize;
  if (breaks(ZRT_MICS_DIVIDES_WORLD))
    return emitError() << "mics_shard_size " << micsShardSize
                       << " must divide world_size " << worldSize;
  if (breaks(ZRT_HPZ_NEEDS_STAGE3) || breaks(ZRT_MICS_NEEDS_STAGE3))
    return emitError() << (micsShardSize > 0 ? "mics_shard_size"
                                             : "hpz_partition_size")
                       << " needs stage 3, got stage " << stage;
  if (breaks(ZRT_HPZ_EXCLUDES_MICS))
    return emitError() << "hpz_partition_size and mics_shard_size exclude "
                          "each other";
  if (expertParallel < 1 || worldSize % expertParallel != 0)
    return emitError() << "expert_parallel " << expertParallel
                       << " must be a positive divisor of world_size "
                       << worldSize;
  // Without expert sets there is nothing to place.
  if (expertPlacement == ExpertPlacement::strided && expertParallel == 1)
    return emitError() << "expert_placement strided needs expert_parallel "
                          "> 1";
  // Expert partitions are sharded over the expert replicas; the other
  // layouts of the world are not combined with them yet.
  if (expertParallel > 1 &&
      (sequenceParallel > 1 || micsShardSize > 0 || hpzPartitionSize > 1))
    return emitError() << "expert_parallel excludes "
                       << (sequenceParallel > 1 ? "sequence_parallel"
                           : micsShardSize > 0  ? "mics_shard_size"
                                                : "hpz_partition_size");
  return success();
}

ScheduleAttr ScheduleAttr::getChecked(
    function_ref<InFlightDiagnostic()> emitError, MLIRContext *context,
    int64_t stage, int64_t worldSize, int64_t globalBatch,
    int64_t accumulationSteps, int64_t ranksPerNode, int64_t hpzPartitionSize,
    int64_t micsShardSize, int64_t sequenceParallel, int64_t expertParallel,
    ExpertPlacement expertPlacement) {
  if (failed(verifyScheduleSizes(
          emitError, stage, worldSize, globalBatch, accumulationSteps,
          ranksPerNode, hpzPartitionSize, micsShardSize, sequenceParallel,
          expertParallel, expertPlacement)))
    return {};
  zrt_mesh mesh;
  if (zrt_mesh_from_sizes(&mesh, worldSize, hpzPartitionSize, micsShardSize,
                          sequenceParallel, expertParallel,
                          static_cast<int32_t>(expertPlacement))) {
    // hpZ and MiCS exclude each other and expert parallelism excludes
    // both: only groups of which neither holds the other are left.
    emitError() << "sequence_parallel " << sequenceParallel << " and "
                << (micsShardSize > 0 ? "mics_shard_size "
                                      : "hpz_partition_size ")
                << (micsShardSize > 0 ? micsShardSize : hpzPartitionSize)
                << " must nest: one must divide the other";
    return {};
  }
  MeshAttr meshAttr;
  if (mesh.num_axes > 1)
    meshAttr = MeshAttr::get(context, mesh);
  return Base::getChecked(emitError, context, stage, worldSize, globalBatch,
                          accumulationSteps, ranksPerNode, meshAttr);
}

LogicalResult ScheduleAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   int64_t stage, int64_t worldSize,
                                   int64_t globalBatch,
                                   int64_t accumulationSteps,
                                   int64_t ranksPerNode, MeshAttr meshAttr) {
  if (!meshAttr)
    return verifyScheduleSizes(emitError, stage, worldSize, globalBatch,
                               accumulationSteps, ranksPerNode, 1, 0, 1, 1,
                               ExpertPlacement::contiguous);
  zrt_mesh mesh = meshAttr.toRuntime();
  if (zrt_mesh_size(&mesh) != worldSize)
    return emitError() << "mesh " << meshAttr << " has " << zrt_mesh_size(&mesh)
                       << " ranks, not world_size " << worldSize;
  int64_t hpz = zrt_mesh_hpz_partition_size(&mesh);
  int64_t mics = zrt_mesh_mics_shard_size(&mesh);
  int64_t sp = zrt_mesh_sequence_parallel(&mesh);
  int64_t ep = zrt_mesh_expert_parallel(&mesh);
  auto placement = ExpertPlacement(zrt_mesh_expert_placement(&mesh));
  if (failed(verifyScheduleSizes(emitError, stage, worldSize, globalBatch,
                                 accumulationSteps, ranksPerNode, hpz, mics, sp,
                                 ep, placement)))
    return failure();
  // One spelling per schedule: the mesh its sizes build.
  zrt_mesh canonical;
  if (zrt_mesh_from_sizes(&canonical, worldSize, hpz, mics, sp, ep,
                          static_cast<int32_t>(placement)))
    return emitError() << "mesh " << meshAttr
                       << " combines axes no schedule combines";
  if (canonical.num_axes == 1)
    return emitError() << "mesh " << meshAttr
                       << " is one data axis: a schedule without a mesh";
  MeshAttr want = MeshAttr::get(meshAttr.getContext(), canonical);
  if (want != meshAttr)
    return emitError() << "mesh " << meshAttr << " must be written " << want;
  return success();
}

zrt_mesh ScheduleAttr::getRuntimeMesh() const {
  if (MeshAttr mesh = getMesh())
    return mesh.toRuntime();
  zrt_mesh mesh = {};
  mesh.num_axes = 1;
  mesh.axes[0] = ZRT_AXIS_DATA;
  mesh.sizes[0] = getWorldSize();
  return mesh;
}

int64_t ScheduleAttr::getHpzPartitionSize() const {
  zrt_mesh mesh = getRuntimeMesh();
  return zrt_mesh_hpz_partition_size(&mesh);
}

int64_t ScheduleAttr::getMicsShardSize() const {
  zrt_mesh mesh = getRuntimeMesh();
  return zrt_mesh_mics_shard_size(&mesh);
}

int64_t ScheduleAttr::getSequenceParallel() const {
  zrt_mesh mesh = getRuntimeMesh();
  return zrt_mesh_sequence_parallel(&mesh);
}

int64_t ScheduleAttr::getExpertParallel() const {
  zrt_mesh mesh = getRuntimeMesh();
  return zrt_mesh_expert_parallel(&mesh);
}

ExpertPlacement ScheduleAttr::getExpertPlacement() const {
  zrt_mesh mesh = getRuntimeMesh();
  return ExpertPlacement(zrt_mesh_expert_placement(&mesh));
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
  // `auto` is checked against the schedule when the run's length is known.
  bool autoSteps = totalNumSteps == LrScheduleAttr::kAutoSteps;
  if ((kind == LrScheduleKind::warmup_decay_lr || cosine) && !autoSteps &&
      totalNumSteps < 1)
    return emitError() << "lr_schedule " << stringifyLrScheduleKind(kind)
                       << " needs total_num_steps >= 1, got " << totalNumSteps;
  // DeepSpeed raises the warmup to 2 steps; the cosine's length is the rest.
  if (cosine && !autoSteps &&
      totalNumSteps <= std::max<int64_t>(2, warmupNumSteps))
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

OptimizerParams OptimizerAttr::getParams() const {
  OptimizerParams p;
#define ZRT_HYPER_PARAM(name, type, default, check)                            \
  p.name = detail::hyperParamValue(getImpl()->name);
#include "zero_rt/optimizers.def"
  return p;
}

LogicalResult LoggingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                  int64_t stepsPerPrint,
                                  bool wallClockBreakdown) {
  if (stepsPerPrint < 1)
    return emitError() << "steps_per_print must be >= 1, got " << stepsPerPrint;
  return success();
}

/// Each of `buffers` a tensor of finite f32 values under a UTF-8 name, and
/// each of `unused` a UTF-8 name of neither, named once.
static LogicalResult
verifyUntrainedTensors(function_ref<InFlightDiagnostic()> emitError,
                       DictionaryAttr buffers, ArrayAttr unused) {
  StringRef why = "it goes into the program's JSON manifest";
  for (NamedAttribute entry :
       buffers ? buffers.getValue() : ArrayRef<NamedAttribute>()) {
    StringRef name = entry.getName().getValue();
    if (failed(::zero::checkUTF8(emitError, "buffer name ", name, why)))
      return failure();
    auto values = dyn_cast<DenseFPElementsAttr>(entry.getValue());
    if (!values || !values.getElementType().isF32())
      return emitError() << "buffer '" << name
                         << "' must be a dense tensor of f32 values, got "
                         << entry.getValue();
    for (APFloat v : values.getValues<APFloat>())
      if (!v.isFinite())
        return emitError() << "buffer '" << name
                           << "' holds a value that is not finite";
  }
  llvm::StringSet<> seen;
  for (Attribute a : unused ? unused.getValue() : ArrayRef<Attribute>()) {
    auto name = dyn_cast<StringAttr>(a);
    if (!name)
      return emitError() << "unused must hold tensor names (strings), got "
                         << a;
    if (failed(::zero::checkUTF8(emitError, "unused tensor name ",
                                 name.getValue(), why)))
      return failure();
    if (!seen.insert(name.getValue()).second || (buffers && buffers.get(name)))
      return emitError() << "tensor '" << name.getValue()
                         << "' is named twice among buffers and unused";
  }
  return success();
}

LogicalResult HfModelAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                  StringRef config, DictionaryAttr tied,
                                  DictionaryAttr buffers, ArrayAttr unused) {
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(config);
  if (!parsed)
    return emitError() << "config is not valid JSON: "
                       << llvm::toString(parsed.takeError());
  const llvm::json::Object *object = parsed->getAsObject();
  if (!object)
    return emitError() << "config must be a JSON object (config.json)";
  if (!object->getString("model_type"))
    return emitError() << "config has no \"model_type\" string";
  if (failed(verifyUntrainedTensors(emitError, buffers, unused)))
    return failure();
  if (!tied)
    return success();
  for (NamedAttribute entry : tied) {
    if (failed(::zero::checkUTF8(emitError, "tied name ",
                                 entry.getName().getValue(),
                                 "it goes into the program's JSON manifest")))
      return failure();
    auto target = dyn_cast<StringAttr>(entry.getValue());
    if (!target)
      return emitError() << "tied name '" << entry.getName().getValue()
                         << "' must map to a parameter name (a string), got "
                         << entry.getValue();
    if (failed(::zero::checkUTF8(emitError, "tied name's parameter ",
                                 target.getValue(),
                                 "it goes into the program's JSON manifest")))
      return failure();
    if (target == entry.getName())
      return emitError() << "tied name '" << target.getValue()
                         << "' maps to itself";
  }
  return success();
}

LogicalResult PeftAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               StringRef config, StringRef prefix,
                               ArrayAttr layers) {
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(config);
  if (!parsed)
    return emitError() << "config is not valid JSON: "
                       << llvm::toString(parsed.takeError());
  if (!parsed->getAsObject())
    return emitError() << "config must be a JSON object (adapter_config.json)";
  // The names go into the program's JSON manifest, its checkpoints and the
  // exported adapters' safetensors header.
  StringRef why = "names go into the program's JSON manifest";
  if (failed(::zero::checkUTF8(emitError, "prefix ", prefix, why)))
    return failure();
  // Each parameter adapted once, and each key written once.
  llvm::StringSet<> params, adapterKeys, mergedKeys;
  for (Attribute layer : layers) {
    auto lora = dyn_cast<LoraAttr>(layer);
    if (!lora)
      return emitError() << "layers must be #zero.lora attributes, got "
                         << layer;
    for (auto [value, what] : {std::pair{lora.getBase(), "a layer's base "},
                               {lora.getA(), "a layer's a "},
                               {lora.getB(), "a layer's b "},
                               {lora.getMergedKey(), "a layer's merged_key "},
                               {lora.getAKey(), "a layer's a_key "},
                               {lora.getBKey(), "a layer's b_key "}})
      if (failed(::zero::checkUTF8(emitError, what, value, why)))
        return failure();
    StringRef base = lora.getBase(), a = lora.getA(), b = lora.getB();
    if (base.empty() || a.empty() || b.empty() || base == a || base == b ||
        a == b)
      return emitError() << "a layer's base, a and b must name three "
                            "parameters, got '"
                         << base << "', '" << a << "' and '" << b << "'";
    if (!lora.getScaling().isFinite())
      return emitError() << "the scaling of '" << base << "' must be finite";
    for (auto [key, what] : {std::pair{lora.getMergedKey(), "merged_key"},
                             {lora.getAKey(), "a_key"},
                             {lora.getBKey(), "b_key"}})
      if (key.empty())
        return emitError() << "the " << what << " of '" << base
                           << "' must not be empty";
    for (StringRef name : {lora.getBase(), lora.getA(), lora.getB()})
      if (!params.insert(name).second)
        return emitError() << "parameter '" << name
                           << "' appears in two layers";
    for (StringRef key : {lora.getAKey(), lora.getBKey()})
      if (!adapterKeys.insert(key).second)
        return emitError() << "adapter key '" << key << "' appears twice";
    if (!mergedKeys.insert(lora.getMergedKey()).second)
      return emitError() << "merged_key '" << lora.getMergedKey()
                         << "' appears twice";
  }
  return success();
}

LogicalResult OffloadAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                  OffloadDevice optimizer, OffloadDevice param,
                                  StringRef nvmePath, int64_t bufferCount,
                                  int64_t bufferSize, StringRef paramNvmePath,
                                  int64_t paramBufferCount,
                                  int64_t paramBufferSize) {
  for (auto [path, what] :
       {std::pair{nvmePath, "nvme_path "}, {paramNvmePath, "param_nvme_path "}})
    if (failed(::zero::checkUTF8(emitError, what, path,
                                 "the path goes into the program's JSON "
                                 "manifest")))
      return failure();
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
    function_ref<InFlightDiagnostic()> emitError, int64_t params,
    std::optional<int64_t> grads, std::optional<int64_t> master,
    std::optional<int64_t> expAvg, std::optional<int64_t> expAvgSq,
    std::optional<int64_t> momentumBuffer, std::optional<int64_t> hostGrads,
    std::optional<int64_t> hostParams, std::optional<int64_t> secondary) {
  // In BufferKind order.
  std::optional<int64_t> offsets[] = {params,    grads,      master,
                                      expAvg,    expAvgSq,   momentumBuffer,
                                      hostGrads, hostParams, secondary};
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
  case BufferKind::momentum_buffer:
    return getMomentumBuffer();
  case BufferKind::host_grads:
    return getHostGrads();
  case BufferKind::host_params:
    return getHostParams();
  case BufferKind::secondary:
    return getSecondary();
  }
  llvm_unreachable("unknown buffer kind");
}

//===----------------------------------------------------------------------===//
// Discardable attributes on ops
//===----------------------------------------------------------------------===//

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
  auto coll = dyn_cast<CollectiveOpInterface>(op);
  if (!fromSources &&
      !(coll && (coll.getQuantizationBits() || coll.getStagingBytes())))
    return emit() << "is only valid on a zero.reduce_scatter or zero.reduce "
                     "of gradient values (`from`), which has a bucket buffer, "
                     "or on a quantized gather, which has a staging buffer, "
                     "or on a collective with staging of its own "
                     "(getStagingBytes)";
  if (!isPlanOffset(offset.getInt()))
    return emit() << "must be a non-negative multiple of " << kArenaAlignment
                  << ", got " << offset.getInt();
  return success();
}

/// zero.peft against the module's parameters: each layer's base [out, in]
/// frozen, a [r, in] and b [out, r] trainable (r > 0), and every other
/// parameter under the prefix. A lowered module has no parameters left (the
/// manifest's reader checks the same there).
template <typename EmitFn>
static LogicalResult verifyPeft(ModuleOp module, PeftAttr peft, EmitFn &&emit) {
  if (module.getOps<ParamOp>().empty())
    return success();
  llvm::StringSet<> adapted;
  for (LoraAttr lora : peft.getLoras()) {
    auto lookup = [&](StringRef name) {
      return dyn_cast_or_null<ParamOp>(
          SymbolTable::lookupSymbolIn(module, name));
    };
    ParamOp base = lookup(lora.getBase()), a = lookup(lora.getA()),
            b = lookup(lora.getB());
    for (auto [param, name] :
         {std::pair{base, lora.getBase()}, {a, lora.getA()}, {b, lora.getB()}})
      if (!param)
        return emit() << "adapts '" << name
                      << "', which is no zero.param of the module";
    ArrayRef<int64_t> w = base.getTensorType().getShape(),
                      sa = a.getTensorType().getShape(),
                      sb = b.getTensorType().getShape();
    if (w.size() != 2 || sa.size() != 2 || sb.size() != 2 || sa[0] < 1 ||
        sa[0] != sb[1] || sa[1] != w[1] || sb[0] != w[0])
      return emit() << "adapts '" << lora.getBase() << "' "
                    << base.getTensorType() << " with a " << a.getTensorType()
                    << " and b " << b.getTensorType()
                    << ": a must be [r, in] and b [out, r] of a base [out, "
                       "in], r > 0";
    if (!base.getFrozen())
      return emit() << "adapts '" << lora.getBase()
                    << "', which trains: a LoRA base must be frozen";
    for (ParamOp adapter : {a, b})
      if (adapter.getFrozen())
        return emit() << "has adapter '" << adapter.getSymName()
                      << "' frozen: LoRA adapters train";
    adapted.insert(lora.getA());
    adapted.insert(lora.getB());
  }
  for (ParamOp p : module.getOps<ParamOp>())
    if (!adapted.contains(p.getSymName()) &&
        !p.getSymName().starts_with(peft.getPrefix()))
      return emit() << "has prefix '" << peft.getPrefix()
                    << "', which parameter '" << p.getSymName()
                    << "' does not start with";
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
  if (name == getHfModelAttrHelper().getName()) {
    if (failed(expect(isa<HfModelAttr>(value), "#zero.hf_model",
                      isa<ModuleOp>(op), "a module")))
      return failure();
    // Each tied name shares a parameter of the module and is none itself.
    // The lowering moves the parameters into the manifest, whose reader
    // checks the names there.
    auto hf = cast<HfModelAttr>(value);
    DictionaryAttr tied = hf.getTied();
    bool hasParams = !cast<ModuleOp>(op).getOps<ParamOp>().empty();
    for (NamedAttribute entry :
         tied &&hasParams ? tied.getValue() : ArrayRef<NamedAttribute>()) {
      StringRef target = cast<StringAttr>(entry.getValue()).getValue();
      if (!isa_and_nonnull<ParamOp>(SymbolTable::lookupSymbolIn(op, target)))
        return emit() << "ties '" << entry.getName().getValue() << "' to '"
                      << target << "', which is no zero.param of the module";
      if (SymbolTable::lookupSymbolIn(op, entry.getName()))
        return emit() << "ties '" << entry.getName().getValue()
                      << "', which is a symbol of the module itself";
    }
    // A buffer or an unused tensor is a tensor of the checkpoint that is no
    // parameter: --init-from would find it twice.
    SmallVector<StringAttr> untrained;
    if (DictionaryAttr buffers = hf.getBuffers())
      for (NamedAttribute entry : buffers)
        untrained.push_back(entry.getName());
    if (ArrayAttr unused = hf.getUnused())
      for (Attribute a : unused)
        untrained.push_back(cast<StringAttr>(a));
    for (StringAttr name : untrained)
      if ((tied && tied.get(name)) ||
          (hasParams && SymbolTable::lookupSymbolIn(op, name)))
        return emit() << "names '" << name.getValue()
                      << "' as no parameter of the step, but it is one or a "
                         "tied name";
    return success();
  }
  if (name == getPeftAttrHelper().getName()) {
    if (failed(expect(isa<PeftAttr>(value), "#zero.peft", isa<ModuleOp>(op),
                      "a module")))
      return failure();
    return verifyPeft(cast<ModuleOp>(op), cast<PeftAttr>(value), emit);
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
