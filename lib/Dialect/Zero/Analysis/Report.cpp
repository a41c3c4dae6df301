//===- Report.cpp - Per-rank memory, communication and time of a step -----===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/Analysis/Report.h"
#include "zero/Dialect/NN/IR/NNDialect.h"
#include "zero/Dialect/Zero/Analysis/CostModel.h"
#include "zero/Dialect/Zero/Analysis/DeepSpeedEstimators.h"
#include "zero/Dialect/Zero/Analysis/MemoryPlan.h"
#include "zero/Dialect/Zero/Analysis/Muon.h"
#include "zero/Dialect/Zero/Analysis/Passes.h"
#include "zero/Dialect/Zero/IR/Optimizers.h"
#include "zero/Interfaces/ExpertOpInterface.h"
#include "zero/Interfaces/RuntimeKernelOpInterface.h"
#include "zero_rt/optimizers.h"
#include "zero_rt/quantize.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/ToolOutputFile.h"

#include <map>

namespace mlir::zero {
#define GEN_PASS_DEF_ZEROREPORTPASS
#include "zero/Dialect/Zero/Analysis/Passes.h.inc"
} // namespace mlir::zero

using namespace mlir;
using namespace mlir::zero;

/// How often an op runs per optimizer step: micro-step ops run once per
/// accumulation step, boundary and last-micro-step ops once.
static int64_t multiplicity(Operation *op, const StepSchedule &s) {
  return runsOncePerStep(getStepPhase(op)) ? 1 : s.getAccumulationSteps();
}

namespace {
/// int64 arithmetic that records an overflow instead of wrapping around; the
/// report is then an error.
struct CheckedInt {
  bool overflow = false;
  int64_t add(int64_t a, int64_t b) {
    int64_t r = 0;
    overflow |= __builtin_add_overflow(a, b, &r);
    return r;
  }
  int64_t mul(int64_t a, int64_t b) {
    int64_t r = 0;
    overflow |= __builtin_mul_overflow(a, b, &r);
    return r;
  }
};
} // namespace

/// Equal parts of an array of `n` elements (the padded stage-3 shards, or a
/// small value split by the ring).
static SmallVector<int64_t> evenChunks(int64_t n, int64_t ranks) {
  SmallVector<int64_t> chunks;
  for (int64_t r = 0; r < ranks; ++r)
    chunks.push_back(n / ranks + (r < n % ranks ? 1 : 0));
  return chunks;
}

/// Adafactor's update all-reduces its sums twice among the ranks that share
/// a group (stages 1-3; zero_rt/adafactor.h's counts, doubles): inside its
/// zero.optimizer_step, so counted here, as the runtime counts them (an
/// even split, two passes): in the bytes and the collectives, not in the
/// volume, which counts the model's elements.
static LogicalResult addAdafactorReductions(const StepSchedule &s,
                                            CommPlan &comm, CheckedInt &c) {
  if (s.getStage() == 0 || s.getWorldSize() == 1)
    return success();
  for (auto o : s.getStep().getBodyBlock().getOps<OptimizerStepOp>()) {
    const PartitionBuffers *group = s.lookupPartition(o.getGroupAttr());
    if (o.getOptimizerKind() != OptimizerKind::adafactor || !group)
      continue;
    zrt_rank_set set{0, 1, s.getWorldSize()};
    int64_t members = set.size, perNode = s.getMembersPerNode(set);
    if (perNode == 0)
      return o.emitOpError("report: its ")
             << members << " ranks do not split evenly over nodes of "
             << s.getNodeSize() << " ranks";
    for (int64_t count : {group->adafactorFirstReduce,
                          group->adafactorSums - group->adafactorFirstReduce}) {
      SmallVector<int64_t> chunks = evenChunks(count, members);
      zrt_link_bytes link = zrt_collective_link_bytes(
          chunks.data(), members, perNode, /*me=*/0, /*passes=*/2);
      int64_t intra = c.mul(link.intra_node, 8),
              inter = c.mul(link.inter_node, 8);
      comm.intraNodeBytes = c.add(comm.intraNodeBytes, intra);
      comm.interNodeBytes = c.add(comm.interNodeBytes, inter);
      comm.bytesPerRank = c.add(comm.bytesPerRank, c.add(intra, inter));
      std::string name =
          stringifyCollectiveKind(CollectiveKind::all_reduce).str();
      comm.collectives[name] = c.add(comm.collectives[name], 1);
      LinkBytes &byKind = comm.bytesByKind[name];
      byKind.intraNode = c.add(byKind.intraNode, intra);
      byKind.interNode = c.add(byKind.interNode, inter);
    }
  }
  return success();
}

FailureOr<CommPlan> mlir::zero::computeCommPlan(const StepSchedule &s) {
  CommPlan comm;
  TrainStepOp step = s.getStep();
  CheckedInt c;
  for (Operation &op : step.getBodyBlock()) {
    int64_t times = multiplicity(&op, s);
    auto collective = dyn_cast<CollectiveOpInterface>(op);
    if (!collective)
      continue;
    // The members of rank 0's set, and each member's part of the array in
    // elements: its owned part of a layout range, or an even share.
    zrt_rank_set set = s.getRankSet(collective, /*rank=*/0);
    int64_t members = set.size;
    int64_t volume = 0, passes = 1;
    SmallVector<int64_t> chunks;
    CollectiveKind kind = collective.getCollectiveKind();
    PartitionOp p;
    if (const PartitionBuffers *group =
            s.lookupPartition(collective.getGroupAttr()))
      p = group->partition;
    int64_t eb = s.getCollectiveElementBytes(collective);
    std::optional<std::pair<int64_t, int64_t>> range =
        collective.getElementRange();
    switch (kind) {
    case CollectiveKind::all_gather:
      if (range) {
        volume = range->second - range->first;
        chunks = s.getOwnedParts(p, range->first, range->second);
      } else if (int32_t bits = collective.getQuantizationBits()) {
        // A quantized group (qwZ): each member's shard as one quantized
        // slot, counted in bytes.
        volume = p.getNumelValue();
        chunks.assign(members, p.getQuantizedSlotBytes(bits));
        eb = 1;
      } else {
        // A whole group (stage 3): the padded shards.
        volume = p.getNumelValue();
        chunks = evenChunks(p.getPaddedNumelValue(), members);
      }
      break;
    case CollectiveKind::reduce_scatter:
    case CollectiveKind::reduce:
      // A reduce per owner: a rank sends every part but its own, as in a
      // reduce-scatter.
      volume = range->second - range->first;
      chunks = s.getOwnedParts(p, range->first, range->second);
      break;
    case CollectiveKind::all_to_all: {
      // Each member keeps one of its P chunks and sends the others.
      auto t = cast<RankedTensorType>(collective.getMovedValue().getType());
      volume = t.getNumElements();
      chunks = evenChunks(t.getNumElements(), members);
      break;
    }
    case CollectiveKind::all_reduce:
      passes = 2;
      if (range && collective.getRankSetKind() == RankSetKind::replicas) {
        // Rank 0's owned part of the range, summed over its replicas.
        auto [ob, oe] = p.getOwnedRange(0);
        int64_t owned = std::max<int64_t>(0, std::min(oe, range->second) -
                                                 std::max(ob, range->first));
        volume = c.mul(2, owned);
        chunks = evenChunks(owned, members);
      } else if (range) {
        volume = c.mul(2, range->second - range->first);
        chunks = evenChunks(range->second - range->first, members);
      } else {
        auto t = cast<RankedTensorType>(collective.getMovedValue().getType());
        volume = 2 * t.getNumElements();
        chunks = evenChunks(t.getNumElements(), members);
        comm.constantVolumeElements =
            c.add(comm.constantVolumeElements, c.mul(volume, times));
      }
      break;
    }
    if (static_cast<int64_t>(chunks.size()) != members)
      return op.emitOpError("report: its parts are those of ")
             << chunks.size() << " ranks, but its rank set has " << members
             << " members";
    int64_t perNode = s.getMembersPerNode(set);
    if (perNode == 0)
      return op.emitOpError("report: its ")
             << members << " ranks do not split evenly over nodes of "
             << s.getNodeSize() << " ranks";
    // Rank 0 is the first member of each of its sets. A quantized
    // reduce-scatter (qgZ) sends each part as an INT4 chunk in two
    // all-to-alls, counted in bytes.
    bool quantizedParts = kind == CollectiveKind::reduce_scatter &&
                          collective.getQuantizationBits() != 0;
    if (quantizedParts)
      eb = 1;
    zrt_link_bytes link =
        kind == CollectiveKind::all_to_all
            ? zrt_all_to_all_link_bytes(chunks[0], members, perNode, /*me=*/0)
        : quantizedParts
            ? zrt_quantized_reduce_scatter_link_bytes(
                  chunks.data(), /*n=*/0, members, perNode, /*me=*/0)
            : zrt_collective_link_bytes(chunks.data(), members, perNode,
                                        /*me=*/0, passes);
    int64_t intra = c.mul(c.mul(link.intra_node, eb), times);
    int64_t inter = c.mul(c.mul(link.inter_node, eb), times);
    comm.volumeElements = c.add(comm.volumeElements, c.mul(volume, times));
    comm.intraNodeBytes = c.add(comm.intraNodeBytes, intra);
    comm.interNodeBytes = c.add(comm.interNodeBytes, inter);
    comm.bytesPerRank = c.add(comm.bytesPerRank, c.add(intra, inter));
    std::string name = stringifyCollectiveKind(kind).str();
    comm.collectives[name] = c.add(comm.collectives[name], times);
    LinkBytes &byKind = comm.bytesByKind[name];
    byKind.intraNode = c.add(byKind.intraNode, intra);
    byKind.interNode = c.add(byKind.interNode, inter);
  }
  if (failed(addAdafactorReductions(s, comm, c)))
    return failure();
  if (c.overflow)
    return step.emitOpError("report: parameter or communication counts "
                            "overflow int64");
  return comm;
}

Value mlir::zero::getExpertViewSource(Operation *op) {
  if (auto view = dyn_cast<LeadingDimOpInterface>(op))
    return view.getLeadingDimSource();
  return Value();
}

GetParamOp mlir::zero::getExpertParam(Value w) {
  while (Operation *def = w.getDefiningOp()) {
    if (auto get = dyn_cast<GetParamOp>(def))
      return get;
    w = getExpertViewSource(def);
    if (!w)
      break;
  }
  return nullptr;
}

std::optional<ExpertParamCounts>
mlir::zero::countExpertParams(ModuleOp module) {
  // Each expert tensor once, with the k and E of the ops that read it (the
  // forward product and the backward's product by its transpose agree).
  llvm::MapVector<StringAttr, std::pair<int64_t, int64_t>> experts;
  module.walk([&](ExpertOpInterface op) {
    GetParamOp get = getExpertParam(op.getExpertWeights().get());
    if (!get)
      return;
    auto [it, inserted] = experts.try_emplace(
        get.getParamAttr().getAttr(),
        std::make_pair(op.getExpertsPerToken(), op.getNumExperts()));
    if (!inserted && it->second.first != op.getExpertsPerToken())
      it->second.first = 0;
  });
  if (experts.empty())
    return std::nullopt;
  ExpertParamCounts c;
  bool first = true;
  for (ParamOp p : module.getOps<ParamOp>()) {
    int64_t numel = p.getNumElements();
    auto it = experts.find(p.getSymNameAttr());
    if (it == experts.end()) {
      c.denseParams += numel;
      c.activeParams += numel;
      continue;
    }
    auto [k, e] = it->second;
    // Under expert parallelism the rank declares E / P of the experts; the
    // counts are of the whole model.
    numel *= p.getExpertParallel().value_or(1);
    ++c.expertTensors;
    c.expertParams += numel;
    // numel is E expert slices; a token computes with k of them.
    c.activeParams += k > 0 && e > 0 && k <= e ? numel / e * k : numel;
    c.minExpertsPerToken = first ? k : std::min(c.minExpertsPerToken, k);
    c.maxExpertsPerToken = std::max(c.maxExpertsPerToken, k);
    c.minExperts = first ? e : std::min(c.minExperts, e);
    c.maxExperts = std::max(c.maxExperts, e);
    first = false;
  }
  return c;
}

/// DeepSpeed's ZeRO-3 with the step's optimizer (DeepSpeedEstimators.h),
/// where its accounting is of the same training: stage 3, 16-bit compute,
/// every parameter trainable, no offload, MiCS or hpZ.
static std::optional<StepReport::DeepSpeedOptimizerFigures>
deepspeedWithOptimizer(const StepReport &r, OptimizerAttr opt) {
  if (r.stage != 3 || (r.paramDtype != "bf16" && r.paramDtype != "fp16") ||
      r.optimizerOffloaded || r.paramsOffloaded || r.micsShardSize > 0 ||
      r.hpzPartitionSize > 1 || r.frozenParamCount > 0 ||
      r.paramCount > (int64_t(1) << 58))
    return std::nullopt;
  namespace table = zrt::optimizers;
  ::zero::estimate::DeepSpeedOptimizerInputs in;
  in.totalParams = r.paramCount;
  in.largestLayerParams = r.largestParam;
  in.ranks = r.worldSize;
  // The table's bytes per parameter: also Adafactor's 4, since DeepSpeed
  // hands a client optimizer each group's flat fp32 partition, a 1-D
  // tensor, which torch's Adafactor does not factor.
  in.stateBytes = r.optimizerBytesPerParam;
  // DeepSpeed keeps bf16 states only with bf16 masters and gradients.
  in.sixteenBitMasters =
      opt.getBf16Masters() || opt.getStates() == StatePrecision::bf16;
  in.elementBytes = 2;
  if (opt.getKind() == OptimizerKind::muon) {
    auto kind = static_cast<table::Kind>(opt.getKind());
    in.muon = true;
    in.matrixParams = r.muonMatrixParams;
    in.stateBytes = table::partBytes(kind, table::StatePart::Others);
    in.matrixStateBytes = table::partBytes(kind, table::StatePart::Matrices);
  }
  ::zero::estimate::DeepSpeedOptimizerCost cost =
      ::zero::estimate::estimateDeepSpeedZero3Optimizer(in);
  return StepReport::DeepSpeedOptimizerFigures{
      cost.modelStateBytes, cost.bytesPerRank, cost.modelStateFormula};
}

static void addMuonGaps(const StepSchedule &s, StepReport &r, CheckedInt &c);
static void addMuonLayerGroups(const StepSchedule &s, StepReport &r,
                               CheckedInt &c);

/// Muon's figures: its matrices' elements, a refusal (a matrix across a
/// shard boundary) and its gaps' padding.
static void addMuonFigures(const StepSchedule &s, ModuleOp module,
                           StepReport &r, CheckedInt &c) {
  for (ParamOp p : getMuonParams(module))
    r.muonMatrixParams = c.add(r.muonMatrixParams, p.getNumElements());
  if (std::optional<MuonCrossing> x = findMuonCrossing(s, module))
    r.muonRefusal = llvm::formatv(
        "matrix @{0} (elements [{1}, {2})) crosses the shard boundary at "
        "{3} of group @{4}",
        x->param.getSymName(), x->begin, x->end,
        (x->begin / x->slot + 1) * x->slot, x->group.getSymName());
  addMuonGaps(s, r, c);
  addMuonLayerGroups(s, r, c);
}

/// The stage-3 groups with owners that hold several layers (StepReport's
/// muonLayerGroups...), the layers told apart by their keys.
static void addMuonLayerGroups(const StepSchedule &s, StepReport &r,
                               CheckedInt &c) {
  for (const PartitionBuffers &pb : s.getPartitions()) {
    PartitionOp part = pb.partition;
    if (!part.getOwners() || part.getStageValue() != 3)
      continue;
    llvm::StringSet<> layers;
    for (Attribute ref : part.getParams()) {
      std::string key = layerKey(cast<FlatSymbolRefAttr>(ref).getValue());
      if (isBlockKey(key))
        layers.insert(key);
    }
    int64_t count = layers.size();
    if (count < 2)
      continue;
    ++r.muonLayerGroups;
    r.muonGroupedLayers = c.add(r.muonGroupedLayers, count);
    if (count > r.muonGroupMostLayers) {
      r.muonGroupMostLayers = count;
      r.muonGroupMostName = part.getSymName().str();
      r.muonGroupMostElements = part.getNumelValue();
    }
  }
}

/// What Muon's owner-computes gaps add to the layout (StepReport's
/// muonGap*): per gapped group its padding over the ranks and, per rank,
/// the bytes of the buffers sized by the layout (a whole buffer holds the
/// gaps inside numel, a shard its share of the enlarged slots). Muon's
/// states are packed by part, which no gap is in.
static void addMuonGaps(const StepSchedule &s, StepReport &r, CheckedInt &c) {
  for (const PartitionBuffers &pb : s.getPartitions()) {
    PartitionOp part = pb.partition;
    int64_t gap = getMuonGapPadding(part);
    if (gap == 0)
      continue;
    int64_t elements = 0;
    for (Attribute ref : part.getParams())
      if (const ParamLocation *loc =
              s.lookupParam(cast<FlatSymbolRefAttr>(ref).getValue()))
        elements += loc->numel;
    int64_t inside = part.getNumelValue() - elements;
    int64_t perRank = gap / part.getWorldSizeValue();
    ++r.muonGapGroups;
    r.muonGapElements = c.add(r.muonGapElements, gap);
    r.muonGapRankElements = c.add(r.muonGapRankElements, perRank);
    for (unsigned k = 0; k <= getMaxEnumValForBufferKind(); ++k) {
      auto kind = static_cast<BufferKind>(k);
      if (!pb.hasBuffer(kind) || pb.numel[k] == 0 || isOptimizerState(kind))
        continue;
      int64_t added = pb.numel[k] >= part.getNumelValue() ? inside : perRank;
      r.muonGapBytes =
          c.add(r.muonGapBytes, c.mul(added, pb.bytes[k] / pb.numel[k]));
    }
  }
}

/// The packed rows' figures of `documents`, checked against the step's
/// first packed attention (its row length).
static FailureOr<StepReport::PackingFigures>
computePacking(TrainStepOp step, const DocumentLengths &documents) {
  std::optional<KernelCost> packed;
  step.walk([&](RuntimeKernelOpInterface op) {
    KernelCost cost = op.getKernelCost();
    if (cost.kind != KernelCost::Kind::Attention || !cost.documents)
      return WalkResult::advance();
    packed = cost;
    return WalkResult::interrupt();
  });
  if (!packed)
    return step.emitOpError("report: doc-lengths describe packed rows, but "
                            "the step's attention reads no document ids "
                            "(zero-import --hf DIR --packed makes one that "
                            "does)");
  if (packed->seqLen != documents.seq)
    return step.emitOpError("report: doc-lengths describe rows of ")
           << documents.seq << " tokens, but the step's packed attention "
           << "reads rows of " << packed->seqLen;
  StepReport::PackingFigures p;
  p.seq = documents.seq;
  p.rows = documents.rows;
  p.documents = documents.documents;
  p.tokens = documents.tokens;
  p.savedSlots = documents.getSavedSlots();
  p.fill = documents.getFill();
  p.paddedFill = documents.getPaddedFill();
  p.attentionFraction = documents.getAttentionFraction(
      packed->seqLen, packed->causal, packed->window);
  return p;
}

FailureOr<StepReport>
mlir::zero::computeReport(const StepSchedule &s, const MemoryPlan &plan,
                          const HardwarePreset &hw, const PeerOptions &peer,
                          const DocumentLengths *documents) {
  StepReport r;
  TrainStepOp step = s.getStep();
  auto module = step->getParentOfType<ModuleOp>();
  r.stage = s.getStage();
  r.worldSize = s.getWorldSize();
  r.micsShardSize = s.getMicsShardSize();
  r.hpzPartitionSize = s.getHpzPartitionSize();
  r.accumulationSteps = s.getAccumulationSteps();
  r.ranksPerNode = s.getNodeSize();
  CheckedInt c;
  for (ParamOp p : module.getOps<ParamOp>()) {
    ++r.paramTensors;
    r.paramCount = c.add(r.paramCount, p.getNumElements());
    r.largestParam = std::max(r.largestParam, p.getNumElements());
  }
  r.paddedParamCount = s.getPaddedParamCount();
  r.experts = countExpertParams(module);
  r.frozenParamCount = s.getFrozenParamCount();
  r.trainableParamCount = s.getTrainableParamCount();
  for (const PartitionBuffers *p : s.getTrainablePartitions())
    r.paddedTrainableParamCount += p->partition.getPaddedNumelValue();
  for (ParamOp p : module.getOps<ParamOp>()) {
    std::optional<int64_t> rows = p.getRows();
    const ParamLocation *loc = s.lookupParam(p.getSymName());
    if (!rows || !loc)
      continue;
    // The padding rows follow the others in the flat layout.
    int64_t all = p.getTensorType().getDimSize(0);
    int64_t b = loc->offset + loc->numel / all * *rows;
    int64_t e = loc->offset + loc->numel;
    r.vocabPaddingRows += all - *rows;
    r.vocabPaddingElements += e - b;
    const PartitionBuffers *pb = s.lookupPartition(loc->partition.getSymName());
    SmallVector<int64_t> chunks = s.getOwnedParts(loc->partition, b, e);
    SmallVector<int64_t> perRank(chunks.size(), 0);
    for (unsigned k = 0; k <= getMaxEnumValForBufferKind(); ++k) {
      auto kind = static_cast<BufferKind>(k);
      if (!pb->hasBuffer(kind) || pb->numel[k] == 0)
        continue;
      // A buffer holds the whole layout on every rank, or a shard of it.
      bool whole = pb->numel[k] >= loc->partition.getNumelValue();
      for (size_t rank = 0; rank < chunks.size(); ++rank)
        perRank[rank] +=
            (whole ? e - b : chunks[rank]) * (pb->bytes[k] / pb->numel[k]);
    }
    r.vocabPaddingBytes += *llvm::max_element(perRank);
  }
  auto cat = [&](MemoryCategory c) {
    return plan.persistentByCategory[static_cast<unsigned>(c)];
  };
  r.params = cat(MemoryCategory::Params);
  r.grads = cat(MemoryCategory::Grads);
  r.masterParams = cat(MemoryCategory::MasterParams);
  r.modelStateBytes = r.params + r.grads + r.masterParams;
  r.optimizerBytesPerParam = getOptimizerStateBytes(step.getOptimizer());
  r.optimizerAbsmaxBlock = getOptimizerAbsmaxBlock(step.getOptimizer());
  r.optimizerStatePrecision =
      stringifyStatePrecision(step.getOptimizer().getStates()).str();
  r.optimizer = stringifyOptimizerKind(step.getOptimizer().getKind()).str();
  if (step.getOptimizer().getKind() == OptimizerKind::muon)
    addMuonFigures(s, module, r, c);
  {
    namespace table = zrt::optimizers;
    auto kind = static_cast<table::Kind>(step.getOptimizer().getKind());
    if (table::hasStateParts(kind)) {
      r.matrixStateBytes = table::partBytes(kind, table::StatePart::Matrices);
      r.otherStateBytes = table::partBytes(kind, table::StatePart::Others);
    }
    for (const PartitionBuffers &pb : s.getPartitions())
      for (const OptimizerState &state :
           getOptimizerStates(step.getOptimizer()))
        if (table::isFactored(kind, static_cast<zrt::BufferKind>(state.buffer)))
          r.factoredStateBytes =
              c.add(r.factoredStateBytes,
                    pb.bytes[static_cast<unsigned>(state.buffer)]);
    // Each part's states hold the same elements (Adam's m and v): a
    // partition's part is its largest buffer of it.
    for (const PartitionBuffers &pb : s.getPartitions()) {
      if (!table::hasStateParts(kind))
        break;
      int64_t matrices = 0, others = 0;
      for (const OptimizerState &state :
           getOptimizerStates(step.getOptimizer())) {
        int64_t numel = pb.numel[static_cast<unsigned>(state.buffer)];
        auto part =
            table::statePart(kind, static_cast<zrt::BufferKind>(state.buffer));
        if (part == table::StatePart::Matrices)
          matrices = std::max(matrices, numel);
        else if (part == table::StatePart::Others)
          others = std::max(others, numel);
      }
      r.matrixStateElements = c.add(r.matrixStateElements, matrices);
      r.otherStateElements = c.add(r.otherStateElements, others);
    }
  }
  for (const OptimizerState &state : getOptimizerStates(step.getOptimizer())) {
    // By buffer, not by category: Muon's momentum_buffer shares Adam m's
    // category with its AdamW half's exp_avg.
    int64_t bytes = 0;
    for (const PersistentBuffer &b : plan.persistent)
      if (b.kind == state.buffer && b.memory == MemoryKind::device)
        bytes = c.add(bytes, b.bytes);
    r.optimizerStates.push_back({state.reportKey.str(), state.label.str(),
                                 stringifyBufferKind(state.buffer).str(),
                                 bytes});
    r.modelStateBytes += bytes;
  }
  r.hpzSecondaryBytes = cat(MemoryCategory::SecondaryParams);
  // Each partition's compute type; a step whose groups differ (a module
  // kept in fp32) lists them in order of first use: "bf16+fp32".
  for (const PartitionBuffers &p : s.getPartitions()) {
    Type t = p.computeType;
    std::string name = t.isF32() ? "fp32" : t.isBF16() ? "bf16" : "fp16";
    if (r.paramDtype.empty())
      r.paramDtype = name;
    else if (("+" + r.paramDtype + "+").find("+" + name + "+") ==
             std::string::npos)
      r.paramDtype += "+" + name;
  }
  r.bf16Masters = step.getOptimizer().getBf16Masters();
  r.paramsAreMasters =
      llvm::all_of(s.getPartitions(), [](const PartitionBuffers &p) {
        return p.areParamsMasters();
      });
  auto peak = [&](MemoryCategory c) {
    return plan.peakByCategory[static_cast<unsigned>(c)];
  };
  r.reduceBucketBytes = peak(MemoryCategory::ReduceBuckets);
  r.gatherBufferBytes = peak(MemoryCategory::GatherBuffers);
  r.activationBytes = peak(MemoryCategory::Activations);
  r.persistentBytes = plan.persistentBytes;
  r.arenaBytes = plan.arenaBytes;
  r.scratchBytes = plan.scratchBytes;
  r.peakBytes = plan.peakBytes;
  r.optimizerOffloaded = s.isOptimizerOffloaded();
  r.paramsOffloaded = s.areParamsOffloaded();
  r.hostPeakBytes = plan.hostBytes;
  r.offloadedActivationBytes = plan.activationBytes;
  r.nvmeBytes = plan.nvmeBytes;
  r.swapBytes = plan.swapBytes;
  r.paramsOnNvme = s.areParamsOnNvme();
  r.paramNvmeBytes = plan.paramNvmeBytes;
  r.paramSwapBytes = plan.paramSwapBytes;
  if (r.nvmeBytes > 0) {
    HardwarePreset rates = hw.forWorldSize(r.worldSize);
    r.nvmeReadBandwidth = rates.nvmeReadBandwidth;
    r.nvmeWriteBandwidth = rates.nvmeWriteBandwidth;
    if (hw.nvmeSharedByRanks)
      r.ranksPerDisk = r.worldSize;
  }
  for (const PersistentBuffer &b : plan.persistent) {
    std::string kind = stringifyBufferKind(b.kind).str();
    if (b.memory == MemoryKind::host)
      r.hostBuffers[kind] = c.add(r.hostBuffers[kind], b.bytes);
    else if (b.memory == MemoryKind::nvme)
      r.nvmeBuffers[kind] = c.add(r.nvmeBuffers[kind], b.bytes);
  }

  FailureOr<CommPlan> comm = computeCommPlan(s);
  if (failed(comm))
    return failure();
  r.volumeElements = comm->volumeElements;
  r.constantVolumeElements = comm->constantVolumeElements;
  r.bytesPerRank = comm->bytesPerRank;
  r.intraNodeBytesPerRank = comm->intraNodeBytes;
  r.interNodeBytesPerRank = comm->interNodeBytes;
  r.collectives = std::move(comm->collectives);
  r.bytesByKind = std::move(comm->bytesByKind);
  if (c.overflow)
    return step.emitOpError("report: parameter or communication counts "
                            "overflow int64");

  if (documents) {
    FailureOr<StepReport::PackingFigures> packing =
        computePacking(step, *documents);
    if (failed(packing))
      return failure();
    r.packing = *packing;
  }
  FailureOr<StepTimeline> timeline = simulateStep(s, hw, peer, documents);
  if (failed(timeline))
    return failure();
  r.hardware = hw.name.str();
  r.predictedStepMs = timeline->stepMs;
  r.exposedCommMs = timeline->exposedCommMs;
  r.exposedTransferMs = timeline->exposedTransferMs;
  r.recomputeMs = timeline->recomputeMs;
  r.timeline = std::move(*timeline);
  r.runtime = peer.runtime;
  r.reduceElementBytes = peer.reduceElementBytes;
  if (peer.runtime == KernelRuntime::Fused)
    r.band = lookupValidationBand(hw.name);
  r.deepspeed = deepspeedWithOptimizer(r, step.getOptimizer());
  return r;
}

FitVerdict mlir::zero::computeFitVerdict(const MemoryPlan &plan,
                                         int64_t deviceMemoryBytes) {
  FitVerdict fit;
  fit.deviceMemoryBytes = deviceMemoryBytes;
  fit.freeBytes = deviceMemoryBytes - plan.peakBytes;
  fit.fits = fit.freeBytes >= 0;
  auto consider = [&](StringRef name, int64_t bytes) {
    if (bytes > fit.largestItemBytes) {
      fit.largestItem = name.str();
      fit.largestItemBytes = bytes;
    }
  };
  for (auto c : {MemoryCategory::Params, MemoryCategory::Grads,
                 MemoryCategory::MasterParams, MemoryCategory::AdamM,
                 MemoryCategory::AdamV, MemoryCategory::SecondaryParams})
    consider(stringifyMemoryCategory(c),
             plan.persistentByCategory[static_cast<unsigned>(c)]);
  // The op after which the step arena holds the most live bytes.
  const std::array<int64_t, kNumMemoryCategories> *atPeak = nullptr;
  int64_t most = -1;
  for (const auto &live : plan.liveByCategory) {
    int64_t sum = 0;
    for (int64_t bytes : live)
      sum += bytes;
    if (sum > most) {
      most = sum;
      atPeak = &live;
    }
  }
  if (atPeak)
    for (unsigned c = 0; c < kNumMemoryCategories; ++c)
      if (c > static_cast<unsigned>(MemoryCategory::AdamV) &&
          c != static_cast<unsigned>(MemoryCategory::SecondaryParams))
        consider(stringifyMemoryCategory(static_cast<MemoryCategory>(c)),
                 (*atPeak)[c]);
  consider("kernel_scratch", plan.scratchBytes);
  return fit;
}

namespace {

LogicalResult writeFile(StringRef path, Operation *anchor,
                        function_ref<void(llvm::raw_ostream &)> fn) {
  std::error_code ec;
  llvm::ToolOutputFile file(path, ec, llvm::sys::fs::OF_Text);
  if (ec)
    return anchor->emitError("cannot write '") << path << "': " << ec.message();
  fn(file.os());
  file.keep();
  return success();
}

struct ZeroReportPass
    : public mlir::zero::impl::ZeroReportPassBase<ZeroReportPass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    const HardwarePreset *preset = lookupHardwarePreset(hardware);
    if (!preset) {
      module.emitError("zero-report: unknown hardware preset '")
          << hardware << "' (known: " << getHardwarePresetNames() << ")";
      return signalPassFailure();
    }
    HardwarePreset rates = *preset;
    std::string error;
    if (failed(applyInterNodeBandwidth(rates, interNodeBandwidth, error))) {
      module.emitError("zero-report: inter-node-bandwidth: ") << error;
      return signalPassFailure();
    }
    const HardwarePreset *hw = &rates;
    std::optional<KernelRuntime> kernels = parseKernelRuntime(runtime);
    if (!kernels) {
      module.emitError("zero-report: unknown runtime '")
          << runtime << "' (expected fused, eager or compiled)";
      return signalPassFailure();
    }
    std::optional<DocumentLengths> documents;
    if (!docLengths.empty()) {
      llvm::Expected<DocumentLengths> read = readDocumentLengths(docLengths);
      if (!read) {
        module.emitError("zero-report: doc-lengths: ")
            << llvm::toString(read.takeError());
        return signalPassFailure();
      }
      documents = std::move(*read);
    }
    PeerOptions peer(*kernels);
    if (reduceDtype == "f32")
      peer.reduceElementBytes = 4;
    else if (!reduceDtype.empty()) {
      module.emitError("zero-report: unknown reduce-dtype '")
          << reduceDtype << "' (expected f32)";
      return signalPassFailure();
    }
    int64_t deviceMemoryBytes = hw->deviceMemoryBytes;
    if (!deviceMemory.empty()) {
      std::optional<int64_t> bytes = parseByteSize(deviceMemory);
      if (!bytes) {
        module.emitError("zero-report: bad device-memory '")
            << deviceMemory
            << "' (expected a positive byte count with an optional unit B, "
               "KiB, MiB, GiB, TiB, KB, MB, GB or TB, e.g. 24GiB)";
        return signalPassFailure();
      }
      deviceMemoryBytes = *bytes;
    }
    if (format != "json" && format != "text") {
      module.emitError("zero-report: unknown format '")
          << format << "' (expected json or text)";
      return signalPassFailure();
    }
    for (TrainStepOp step : module.getOps<TrainStepOp>()) {
      FailureOr<StepSchedule> schedule = StepSchedule::get(step);
      if (failed(schedule))
        return signalPassFailure();
      FailureOr<MemoryPlan> plan = computeMemoryPlan(*schedule);
      if (failed(plan))
        return signalPassFailure();
      FailureOr<StepReport> report = computeReport(
          *schedule, *plan, *hw, peer, documents ? &*documents : nullptr);
      if (failed(report))
        return signalPassFailure();
      if (deviceMemoryBytes > 0)
        report->fit = computeFitVerdict(*plan, deviceMemoryBytes);
      LogicalResult ok = writeFile(out, step, [&](llvm::raw_ostream &os) {
        if (format == "json")
          os << llvm::formatv("{0:2}", reportToJson(*report)) << "\n";
        else
          printTextReport(*report, os);
      });
      if (failed(ok))
        return signalPassFailure();
      if (!trace.empty() &&
          failed(writeFile(trace, step, [&](llvm::raw_ostream &os) {
            writeChromeTrace(report->timeline, report->worldSize, os);
          })))
        return signalPassFailure();
      if (!memorySvg.empty() &&
          failed(writeFile(memorySvg, step, [&](llvm::raw_ostream &os) {
            writeMemorySvg(*plan, *schedule, os);
          })))
        return signalPassFailure();
    }
    markAllAnalysesPreserved();
  }
};

} // namespace
