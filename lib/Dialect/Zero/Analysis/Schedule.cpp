//===- Schedule.cpp - Facts about a scheduled train step ------------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/Analysis/Schedule.h"

#include "zero/Dialect/NN/IR/NNDialect.h"
#include "zero/Dialect/Zero/Analysis/Muon.h"
#include "zero_rt/adafactor.h"
#include "zero_rt/optimizers.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/Support/MathExtras.h"

#include <cstdint>

using namespace mlir;
using namespace mlir::zero;

/// An optimizer whose states differ between matrices and the other
/// parameters (optimizers.def's state parts: Muon's momentum for its
/// matrices, AdamW's moments for the rest) keeps each part's states for
/// that part's owned elements only, packed in layout order: a buffer holds
/// the most elements of its part that any rank owns.
static void setStatePartNumel(PartitionBuffers &buffers, PartitionOp p,
                              SymbolTable &symbols) {
  namespace table = zrt::optimizers;
  auto kind = static_cast<table::Kind>(buffers.optimizer.getKind());
  if (!table::hasStateParts(kind))
    return;
  int64_t ranks = p.getStageValue() == 0 ? 1 : p.getWorldSizeValue();
  int64_t matrices = 0, others = 0;
  for (int64_t r = 0; r < ranks; ++r) {
    auto [begin, end] = p.getOwnedRange(r);
    // Owner-computes' gaps are in neither part.
    int64_t mine = 0, adamw = 0;
    for (auto [ref, offset] : llvm::zip(p.getParams(), p.getOffsets())) {
      auto param =
          symbols.lookup<ParamOp>(cast<SymbolRefAttr>(ref).getLeafReference());
      if (!param)
        continue;
      int64_t lo = std::max<int64_t>(offset, begin),
              hi = std::min<int64_t>(offset + param.getNumElements(), end);
      (isMuonMatrix(param) ? mine : adamw) += std::max<int64_t>(0, hi - lo);
    }
    matrices = std::max(matrices, mine);
    others = std::max(others, adamw);
  }
  for (unsigned i = 0; i <= getMaxEnumValForBufferKind(); ++i) {
    auto k = static_cast<BufferKind>(i);
    if (!isOptimizerState(k) || !buffers.hasBuffer(k))
      continue;
    switch (table::statePart(kind, static_cast<zrt::BufferKind>(k))) {
    case table::StatePart::Matrices:
      buffers.numel[i] = matrices;
      break;
    case table::StatePart::Others:
      buffers.numel[i] = others;
      break;
    case table::StatePart::All:
      break;
    }
  }
}

int64_t mlir::zero::getElementBytes(Type elementType) {
  unsigned bits = elementType.getIntOrFloatBitWidth();
  return bits <= 8 ? 1 : bits / 8;
}

int64_t mlir::zero::getTensorBytes(Type tensorType) {
  auto t = cast<RankedTensorType>(tensorType);
  return t.getNumElements() * getElementBytes(t.getElementType());
}

static_assert(
    static_cast<int32_t>(RankSetKind::group) == ZRT_RANKS_GROUP &&
        static_cast<int32_t>(RankSetKind::hpz) == ZRT_RANKS_HPZ &&
        static_cast<int32_t>(RankSetKind::replicas) == ZRT_RANKS_REPLICAS &&
        static_cast<int32_t>(RankSetKind::world) == ZRT_RANKS_WORLD &&
        static_cast<int32_t>(RankSetKind::sequence) == ZRT_RANKS_SEQUENCE &&
        static_cast<int32_t>(RankSetKind::expert) == ZRT_RANKS_EXPERT &&
        static_cast<int32_t>(RankSetKind::expert_replicas) ==
            ZRT_RANKS_EXPERT_REPLICAS,
    "RankSetKind follows zero_rt/topology.h's kinds");
static_assert(static_cast<int32_t>(ExpertPlacement::contiguous) ==
                      ZRT_EXPERT_CONTIGUOUS &&
                  static_cast<int32_t>(ExpertPlacement::strided) ==
                      ZRT_EXPERT_STRIDED,
              "ExpertPlacement follows zero_rt/topology.h's placements");

zrt_rank_set StepSchedule::getRankSet(CollectiveOpInterface collective,
                                      int64_t rank) const {
  return zrt_rank_set_of(static_cast<int32_t>(collective.getRankSetKind()),
                         rank, &mesh);
}

int64_t StepSchedule::getCollectiveElementBytes(
    CollectiveOpInterface collective) const {
  if (int64_t wire = collective.getWireElementBytes())
    return wire;
  if (!collective.getElementRange())
    if (Value moved = collective.getMovedValue())
      return getElementBytes(
          cast<RankedTensorType>(moved.getType()).getElementType());
  const PartitionBuffers *p = lookupPartition(collective.getGroupAttr());
  return p ? getElementBytes(p->computeType) : 2;
}

SmallVector<int64_t> StepSchedule::getOwnedParts(PartitionOp group, int64_t b,
                                                 int64_t e) const {
  SmallVector<int64_t> parts;
  for (int64_t r = 0; r < group.getWorldSizeValue(); ++r) {
    auto [ob, oe] = group.getOwnedRange(r);
    parts.push_back(std::max<int64_t>(0, std::min(oe, e) - std::max(ob, b)));
  }
  return parts;
}

FailureOr<StepSchedule::ReductionTemp>
StepSchedule::getReductionTemp(Operation *reduction) const {
  auto coll = cast<CollectiveOpInterface>(reduction);
  ReductionTemp t;
  auto [b, e] = *coll.getElementRange();
  const PartitionBuffers *p = lookupPartition(coll.getGroupAttr());
  if (__builtin_mul_overflow(e - b, getElementBytes(p->computeType),
                             &t.bucketBytes))
    return failure();
  t.stagingOffset = t.bucketBytes;
  if (!coll.getQuantizationBits())
    return t;
  // The parts of a group over the world (qgZ runs without MiCS) are at
  // most the shard, so the staging below fits int64 when the shard does.
  t.stagingOffset = llvm::alignTo(t.bucketBytes, 16);
  SmallVector<int64_t> parts = getOwnedParts(p->partition, b, e);
  zrt_rank_set set = getRankSet(coll, /*rank=*/0);
  t.stagingBytes = zrt_quantized_reduce_scatter_staging_bytes(
      parts.data(), /*n=*/0, set.size, getMembersPerNode(set));
  if (t.stagingBytes > INT64_MAX - t.stagingOffset)
    return failure();
  return t;
}

FailureOr<StepSchedule> StepSchedule::get(TrainStepOp step) {
  StepSchedule s;
  s.step = step;
  auto module = step->getParentOfType<ModuleOp>();
  // The step's verified #zero.schedule is the one source of stage, world
  // size and accumulation steps; its verifier checked the partitions agree.
  ScheduleAttr schedule = step.getScheduleAttr();
  if (!schedule)
    return step.emitOpError("has no partitions: run zero-partition first");
  s.stage = schedule.getStage();
  s.worldSize = schedule.getWorldSize();
  s.accumulationSteps = schedule.getAccumulationSteps();
  s.ranksPerNode = schedule.getRanksPerNode();
  s.hpzPartitionSize = schedule.getHpzPartitionSize();
  s.micsShardSize = schedule.getMicsShardSize();
  s.sequenceParallel = schedule.getSequenceParallel();
  s.expertParallel = schedule.getExpertParallel();
  s.expertPlacement = schedule.getExpertPlacement();
  s.mesh = schedule.getRuntimeMesh();
  // The groups whose hpZ secondary shard the step keeps.
  llvm::SmallDenseSet<StringRef, 8> secondary;
  if (s.hpzPartitionSize > 1)
    for (auto store : step.getBodyBlock().getOps<StoreSecondaryOp>())
      secondary.insert(store.getGroup());
  s.optimizerDevice = getOptimizerOffload(step);
  s.optimizerOffloaded = s.optimizerDevice != OffloadDevice::none;
  s.paramDevice = getParamOffload(step);
  s.paramsOffloaded = s.paramDevice != OffloadDevice::none;
  // One symbol table: a lookup per parameter must not scan the module.
  SymbolTable symbols(module);
  unsigned numParams = 0, numPartitions = 0;
  for (PartitionOp p : module.getOps<PartitionOp>()) {
    numParams += p.getParams().size();
    ++numPartitions;
  }
  s.params = decltype(s.params)(numParams);
  s.partitionIndex = decltype(s.partitionIndex)(numPartitions);
  s.partitions.reserve(numPartitions);
  for (PartitionOp p : module.getOps<PartitionOp>()) {
    PartitionBuffers buffers;
    buffers.partition = p;
    buffers.offloaded = s.optimizerOffloaded;
    buffers.optimizerDevice = s.optimizerDevice;
    buffers.optimizer = step.getOptimizer();
    buffers.paramsOffloaded = s.paramsOffloaded;
    buffers.paramDevice = s.paramDevice;
    buffers.frozen = p.getFrozen();
    buffers.secondary = secondary.contains(p.getSymName());
    for (auto [ref, offset] : llvm::zip(p.getParams(), p.getOffsets())) {
      auto paramOp =
          symbols.lookup<ParamOp>(cast<SymbolRefAttr>(ref).getLeafReference());
      if (!paramOp)
        return p.emitOpError("references unknown parameter ") << ref;
      if (!buffers.computeType)
        buffers.computeType = paramOp.getComputeTensorType().getElementType();
      s.params[paramOp.getSymName()] =
          ParamLocation{p, offset, paramOp.getNumElements()};
    }
    if (!buffers.computeType)
      return p.emitOpError("has no parameters");
    SmallVector<zrt::AdafactorTensor> adafactor;
    if (buffers.optimizer &&
        buffers.optimizer.getKind() == OptimizerKind::adafactor &&
        !buffers.frozen)
      adafactor = getAdafactorTensors(p, symbols);
    int64_t numel = p.getNumelValue(), shard = p.getShardNumel();
    bool shardedParams = s.stage == 3, shardedGrads = s.stage >= 2;
    buffers.numel[static_cast<unsigned>(BufferKind::params)] =
        shardedParams ? shard : numel;
    if (buffers.hasBuffer(BufferKind::grads))
      buffers.numel[static_cast<unsigned>(BufferKind::grads)] =
          shardedGrads ? shard : numel;
    // fp32 parameters are their own masters: no master buffer. The
    // optimizer's states (optimizers.def) and the host copies of an
    // offloaded optimizer hold the owned shard.
    for (unsigned i = 0; i <= getMaxEnumValForBufferKind(); ++i)
      if (auto k = static_cast<BufferKind>(i);
          k != BufferKind::params && k != BufferKind::grads &&
          k != BufferKind::secondary && buffers.hasBuffer(k))
        buffers.numel[i] = shard;
    if (!buffers.frozen)
      buffers.optimizerNumel = shard;
    if (buffers.optimizer && !buffers.frozen)
      setStatePartNumel(buffers, p, symbols);
    // Adafactor's state is its factors, not a float per element: the
    // largest rank's (every rank plans the same buffers).
    if (!adafactor.empty()) {
      auto n = static_cast<int32_t>(adafactor.size());
      int64_t state = 0;
      for (int64_t r = 0; r < (s.stage == 0 ? 1 : p.getWorldSizeValue()); ++r) {
        auto [ob, oe] = p.getOwnedRange(r);
        state = std::max(state,
                         zrt::adafactorStateCount(adafactor.data(), n, ob, oe));
      }
      buffers.numel[static_cast<unsigned>(BufferKind::exp_avg_sq)] = state;
      buffers.adafactorTensors = n;
      buffers.adafactorSums = zrt::adafactorShardSumsCount(adafactor.data(), n);
      buffers.adafactorFirstReduce =
          zrt::adafactorFirstReduceCount(adafactor.data(), n);
    }
    if (buffers.secondary)
      buffers.numel[static_cast<unsigned>(BufferKind::secondary)] =
          p.getPaddedNumelValue() / s.hpzPartitionSize;
    int64_t cbytes = getElementBytes(buffers.computeType);
    bool overflow = false;
    for (unsigned k = 0; k < kNumBufferKinds; ++k) {
      auto kind = static_cast<BufferKind>(k);
      bool compute = kind == BufferKind::params || kind == BufferKind::grads ||
                     kind == BufferKind::host_grads ||
                     kind == BufferKind::host_params ||
                     kind == BufferKind::secondary;
      overflow |= __builtin_mul_overflow(buffers.numel[k], compute ? cbytes : 4,
                                         &buffers.bytes[k]);
      // An optimizer's state in its #zero.optimizer precision (the table's
      // bytes per element and absmaxes; f32 is the 4 bytes above).
      if (buffers.optimizer && isOptimizerState(kind) && buffers.numel[k] > 0)
        buffers.bytes[k] = getOptimizerStateBufferBytes(buffers.optimizer, kind,
                                                        buffers.numel[k]);
    }
    overflow |= __builtin_add_overflow(s.paramCount, numel, &s.paramCount);
    if (buffers.frozen)
      s.frozenParamCount += numel;
    overflow |= __builtin_add_overflow(
        s.paddedParamCount, p.getPaddedNumelValue(), &s.paddedParamCount);
    if (overflow)
      return p.emitOpError("buffer sizes overflow int64 (")
             << p.getPaddedNumelValue() << " padded elements"
             << (s.partitions.empty() ? ")" : " after the earlier partitions)");
    s.partitionIndex[p.getSymName()] = s.partitions.size();
    s.partitions.push_back(buffers);
  }
  if (s.partitions.empty())
    return step.emitOpError("has no partitions: run zero-partition first");
  return s;
}

SmallVector<zrt::AdafactorTensor>
mlir::zero::getAdafactorTensors(PartitionOp partition, SymbolTable &symbols) {
  SmallVector<zrt::AdafactorTensor> tensors;
  for (auto [ref, offset] :
       llvm::zip(partition.getParams(), partition.getOffsets())) {
    auto param =
        symbols.lookup<ParamOp>(cast<SymbolRefAttr>(ref).getLeafReference());
    if (!param || param.getFrozen())
      continue;
    // The manifest's shape, the runtime's view of the tensor.
    ArrayRef<int64_t> shape = param.getTensorType().getShape();
    tensors.push_back(
        {offset, zrt::adafactorShape(shape.data(),
                                     static_cast<int32_t>(shape.size()))});
  }
  llvm::sort(tensors,
             [](const auto &a, const auto &b) { return a.offset < b.offset; });
  return tensors;
}

const PartitionBuffers *StepSchedule::lookupPartition(StringRef name) const {
  auto it = partitionIndex.find(name);
  return it == partitionIndex.end() ? nullptr : &partitions[it->second];
}

SmallVector<const PartitionBuffers *>
StepSchedule::getTrainablePartitions() const {
  SmallVector<const PartitionBuffers *> trainable;
  for (const PartitionBuffers &p : partitions)
    if (!p.frozen)
      trainable.push_back(&p);
  return trainable;
}

const ParamLocation *StepSchedule::lookupParam(StringRef name) const {
  auto it = params.find(name);
  return it == params.end() ? nullptr : &it->second;
}

bool StepSchedule::isGradientInPlace(GradOp grad) const {
  if (stage >= 2 || accumulationSteps != 1)
    return false;
  Value g = grad.getGrad();
  Operation *def = g.getDefiningOp();
  TrainStepOp self = step;
  if (!def || isViewOp(def) || def->getParentOp() != self.getOperation())
    return false;
  // The slot has the compute type; a value of another type needs a cast.
  const ParamLocation *loc = lookupParam(grad.getParam());
  if (!loc)
    return false;
  PartitionOp partition = loc->partition;
  const PartitionBuffers *buffers = lookupPartition(partition.getSymName());
  if (cast<RankedTensorType>(g.getType()).getElementType() !=
      buffers->computeType)
    return false;
  // One slot per value: a value bound to two parameters needs a copy.
  int64_t binds =
      llvm::count_if(g.getUsers(), [](Operation *u) { return isa<GradOp>(u); });
  return binds == 1;
}

bool mlir::zero::isViewOp(Operation *op) {
  return isa<ViewLikeOpInterface>(op);
}

Value mlir::zero::getViewRoot(Value value) {
  while (Operation *def = value.getDefiningOp()) {
    auto view = dyn_cast<ViewLikeOpInterface>(def);
    if (!view)
      break;
    value = view.getViewSource();
    if (!value)
      return Value();
  }
  return value;
}

SmallVector<Operation *> mlir::zero::getEvaluationOps(TrainStepOp step) {
  return getOpsComputing(step, {step.getLoss()});
}

SmallVector<Operation *> mlir::zero::getOpsComputing(TrainStepOp step,
                                                     ArrayRef<Value> values) {
  Block &body = step.getBodyBlock();
  llvm::SmallPtrSet<Operation *, 32> needed;
  SmallVector<Operation *> work;
  auto need = [&](Operation *op) {
    // Values defined inside an op's regions belong to that op.
    while (op && op->getBlock() != &body)
      op = op->getParentOp();
    if (op && needed.insert(op).second)
      work.push_back(op);
  };
  for (Value v : values)
    need(v.getDefiningOp());
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    op->walk([&](Operation *nested) {
      for (Value v : nested->getOperands())
        need(v.getDefiningOp());
    });
    // A collective the values depend on completes before they are read,
    // as in training.
    for (Value r : op->getResults())
      if (isa<TokenType>(r.getType()))
        for (Operation *user : r.getUsers())
          if (isa<WaitOp>(user))
            need(user);
  }
  SmallVector<Operation *> ops;
  for (Operation &op : body)
    if (needed.contains(&op))
      ops.push_back(&op);
  return ops;
}

int64_t StepSchedule::getParamSwapBufferCount() const {
  if (!areParamsOnNvme())
    return 0;
  return getStep().getOffload().getParamBufferCount();
}

NvmeSwapAttr StepSchedule::getOptimizerSwap() const {
  if (!isOptimizerOnNvme())
    return {};
  OffloadAttr offload = getStep().getOffload();
  constexpr int64_t kBlock = kNvmeAlignment / 4;
  int64_t largest = kBlock;
  for (const PartitionBuffers &p : partitions)
    largest = std::max(largest, p.getOptimizerNumel());
  int64_t chunk = std::min<int64_t>(offload.getBufferSize(),
                                    llvm::alignTo(largest, kBlock));
  return NvmeSwapAttr::get(step->getContext(), chunk, offload.getBufferCount());
}

ParamSwapAttr StepSchedule::getParamSwap(int64_t buffer) const {
  int64_t buffers = getParamSwapBufferCount();
  if (buffers == 0)
    return {};
  int64_t bytes = kNvmeAlignment;
  for (const PartitionBuffers &p : partitions)
    bytes = std::max<int64_t>(
        bytes, llvm::alignTo(p.bytes[static_cast<unsigned>(BufferKind::params)],
                             kNvmeAlignment));
  return ParamSwapAttr::get(step->getContext(), buffer % buffers, buffers,
                            bytes);
}
