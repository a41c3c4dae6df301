//===- Schedule.h - Facts about a scheduled train step ----------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// The memory planner, the schedule verifier, the report, the cost model and
// the lowering all need the same facts about a step: its stage and world size,
// the partition and offset of each parameter, the size of each persistent
// buffer, and which values are views. They live here so that every consumer
// agrees on them.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_DIALECT_ZERO_ANALYSIS_SCHEDULE_H
#define ZERO_DIALECT_ZERO_ANALYSIS_SCHEDULE_H

#include "zero/Dialect/Zero/IR/Optimizers.h"
#include "zero/Dialect/Zero/IR/ZeroDialect.h"
#include "zero_rt/adafactor.h"
#include "zero_rt/topology.h"

#include "mlir/IR/SymbolTable.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Allocator.h"

namespace mlir::zero {

/// The stage-3 group of a parameter: up to and including the first all-digit
/// component (`transformer.h.3.attn.c_attn.weight` -> `transformer.h.3`),
/// else all but the last component (`transformer.ln_f.weight` ->
/// `transformer.ln_f`), else the whole name (`scale`).
inline std::string layerKey(StringRef name) {
  SmallVector<StringRef> parts;
  name.split(parts, '.');
  for (size_t i = 0; i < parts.size(); ++i)
    if (!parts[i].empty() && llvm::all_of(parts[i], llvm::isDigit))
      return llvm::join(ArrayRef(parts).take_front(i + 1), ".");
  if (parts.size() == 1)
    return name.str();
  return llvm::join(ArrayRef(parts).drop_back(), ".");
}

/// Whether a layer key names a transformer block (`transformer.h.3`,
/// `model.layers.3`): its last component is a number.
inline bool isBlockKey(llvm::StringRef key) {
  llvm::StringRef last = key.contains('.') ? key.rsplit('.').second : key;
  return !last.empty() && llvm::all_of(last, llvm::isDigit);
}

/// Bytes of one element of a float or integer type.
int64_t getElementBytes(Type elementType);
/// Bytes of a ranked tensor type.
int64_t getTensorBytes(Type tensorType);

/// Where a parameter lives in the layout.
struct ParamLocation {
  mutable PartitionOp partition;
  int64_t offset = 0;
  int64_t numel = 0;
};

/// The persistent buffers of one partition, per rank.
struct PartitionBuffers {
  mutable PartitionOp partition;
  Type computeType;
  /// Whether the partition holds frozen parameters: its only buffer is
  /// `params`, whatever the stage and offload.
  bool frozen = false;
  /// Whether the step offloads the optimizer: masters and moments live in
  /// host memory beside host_grads (and host_params with 16-bit compute),
  /// or in the rank's NVMe swap file (then host_params always exists,
  /// unless the parameter shards are in host memory too).
  bool offloaded = false;
  OffloadDevice optimizerDevice = OffloadDevice::none;
  /// The step's optimizer: which state buffers (optimizers.def) exist,
  /// its hyper-parameters deciding the gated ones.
  OptimizerAttr optimizer;
  /// Whether the step offloads its parameters (stage 3): the `params` shard
  /// lives in host memory or the rank's parameter swap file (paramDevice)
  /// and each gather reads a staged device copy.
  bool paramsOffloaded = false;
  OffloadDevice paramDevice = OffloadDevice::none;
  /// Whether the step keeps an hpZ secondary shard of the group (it stores
  /// one: zero.store_secondary), padded_numel / hpz_partition_size elements
  /// in the compute type on the device, frozen or not.
  bool secondary = false;
  /// Elements of each buffer kind (indexed by BufferKind).
  int64_t numel[kNumBufferKinds] = {};
  /// Bytes of each buffer kind.
  int64_t bytes[kNumBufferKinds] = {};

  /// Whether the fp32 parameters are their own masters (fp32 compute, and
  /// Adam runs where the parameter shard lives: both on the device, or both
  /// in host memory; never with the states or the parameters on NVMe): the
  /// partition then has no `master` buffer.
  bool areParamsMasters() const {
    return offloaded == paramsOffloaded && paramDevice != OffloadDevice::nvme &&
           optimizerDevice != OffloadDevice::nvme &&
           zero::areParamsMasters(computeType, optimizer);
  }
  /// Whether the partition has a buffer of kind `kind`.
  bool hasBuffer(BufferKind kind) const {
    if (kind == BufferKind::secondary)
      return secondary;
    if (frozen)
      return kind == BufferKind::params;
    switch (kind) {
    case BufferKind::master:
      return !areParamsMasters();
    case BufferKind::host_grads:
      return offloaded;
    case BufferKind::host_params:
      // With the parameter shards on the host too, the host Adam writes
      // them in place; otherwise states on NVMe return every compute type
      // through host_params.
      return offloaded && paramDevice != OffloadDevice::cpu &&
             (optimizerDevice == OffloadDevice::nvme ||
              !zero::areParamsMasters(computeType, optimizer));
    case BufferKind::params:
    case BufferKind::grads:
      return true;
    default:
      return optimizer ? hasOptimizerState(optimizer, kind)
                       : hasOptimizerState(OptimizerKind::adam, kind);
    }
  }
  /// The memory buffer `kind` lives in.
  MemoryKind getMemory(BufferKind kind) const {
    return getBufferMemory(kind, optimizerDevice, paramDevice);
  }
  /// Elements of the owned shard that the optimizer updates (padded; the
  /// whole group at stage 0; 0 when frozen), whether or not it keeps states.
  int64_t optimizerNumel = 0;
  int64_t getOptimizerNumel() const { return optimizerNumel; }
  /// Adafactor (zero_rt/adafactor.h): the partition's trainable tensors, and
  /// the doubles of its step's sums (the accounted scratch of its update)
  /// and of their two all-reduces (0 for other optimizers).
  int64_t adafactorTensors = 0;
  int64_t adafactorSums = 0;
  int64_t adafactorFirstReduce = 0;
};

/// The trainable parameters of `partition` as Adafactor's runtime step sees
/// them (the manifest's shapes and offsets), by offset.
SmallVector<zrt::AdafactorTensor> getAdafactorTensors(PartitionOp partition,
                                                      SymbolTable &symbols);

/// Facts about a train step after zero-partition.
class StepSchedule {
public:
  /// Collects the schedule of `step` (its #zero.schedule, partitions and
  /// parameter locations); fails with a diagnostic if it is not partitioned.
  static FailureOr<StepSchedule> get(TrainStepOp step);

  TrainStepOp getStep() const { return step; }
  int64_t getStage() const { return stage; }
  int64_t getWorldSize() const { return worldSize; }
  int64_t getAccumulationSteps() const { return accumulationSteps; }
  /// The topology: ranks per node (0: one node holds every rank), the hpZ
  /// partition size (1: none) and the MiCS shard size (0: none).
  int64_t getRanksPerNode() const { return ranksPerNode; }
  int64_t getHpzPartitionSize() const { return hpzPartitionSize; }
  int64_t getMicsShardSize() const { return micsShardSize; }
  int64_t getSequenceParallel() const { return sequenceParallel; }
  int64_t getExpertParallel() const { return expertParallel; }
  ExpertPlacement getExpertPlacement() const { return expertPlacement; }
  /// Ranks on one node: ranks per node, or the world on one node.
  int64_t getNodeSize() const {
    return ranksPerNode > 0 ? ranksPerNode : worldSize;
  }
  /// The members of the rank set `collective` runs over, as `rank` sees it
  /// (zrt_rank_set_of of its getRankSetKind()).
  zrt_rank_set getRankSet(CollectiveOpInterface collective, int64_t rank) const;
  /// Members of `set` on each node it spans (zrt_members_per_node): its
  /// size on one node, 0 when it does not split evenly by node.
  int64_t getMembersPerNode(zrt_rank_set set) const {
    return zrt_members_per_node(set, ranksPerNode);
  }
  /// Bytes of one element as `collective` moves it: the group's compute
  /// type for a layout range, the moved tensor's element type otherwise.
  /// The report and the cost model size every collective by it.
  int64_t getCollectiveElementBytes(CollectiveOpInterface collective) const;
  /// Each member's owned part of layout range [b, e) of `group`, in
  /// elements, in member order (what a reduce-scatter of the range sums
  /// into each member).
  SmallVector<int64_t> getOwnedParts(PartitionOp group, int64_t b,
                                     int64_t e) const;
  /// The step-arena temporary of a source-form reduction: its bucket (the
  /// range in the compute type) and, for a quantized reduce-scatter
  /// (ZeRO++ qgZ), the staging of zero_rt/topology.h's
  /// zrt_quantized_reduce_scatter_staging_bytes at `stagingOffset`, past the
  /// bucket rounded up to 16 bytes. Fails on an int64 overflow.
  struct ReductionTemp {
    int64_t bucketBytes = 0;
    int64_t stagingOffset = 0;
    int64_t stagingBytes = 0;
    int64_t getBytes() const { return stagingOffset + stagingBytes; }
  };
  FailureOr<ReductionTemp> getReductionTemp(Operation *reduction) const;
  /// The copies of each MiCS shard, one per shard group (1 without MiCS).
  int64_t getMicsReplicas() const {
    return micsShardSize > 0 ? worldSize / micsShardSize : 1;
  }
  /// Whether the optimizer states live in host memory or on NVMe (the
  /// step's offload): the Adam runs on the host.
  bool isOptimizerOffloaded() const { return optimizerOffloaded; }
  /// Whether they live in the ranks' NVMe swap files.
  bool isOptimizerOnNvme() const {
    return optimizerDevice == OffloadDevice::nvme;
  }
  /// Whether the stage-3 parameter shards live off the device, in host
  /// memory or on NVMe (the step's offload).
  bool areParamsOffloaded() const { return paramsOffloaded; }
  /// Whether they live in host memory (a host Adam updates them in place).
  bool areParamsOnHost() const { return paramDevice == OffloadDevice::cpu; }
  /// Whether they live in the ranks' parameter swap files.
  bool areParamsOnNvme() const { return paramDevice == OffloadDevice::nvme; }
  ArrayRef<PartitionBuffers> getPartitions() const { return partitions; }
  const PartitionBuffers *lookupPartition(StringRef name) const;
  /// Null for a null reference (a collective over a rank set alone).
  const PartitionBuffers *lookupPartition(SymbolRefAttr ref) const {
    if (!ref)
      return nullptr;
    return lookupPartition(ref.getLeafReference().getValue());
  }
  /// The location of a parameter, or null if it is in no partition.
  const ParamLocation *lookupParam(StringRef name) const;

  /// Parameter shards on NVMe: the swap buffer `buffer` of the step's
  /// `offload_param.buffer_count`, each the largest shard in whole
  /// 4096-byte blocks (null when the shards are not on NVMe).
  ParamSwapAttr getParamSwap(int64_t buffer) const;
  /// The step's parameter swap buffers (0 when the shards are not on NVMe).
  int64_t getParamSwapBufferCount() const;
  /// Optimizer states on NVMe: the swap buffers the host Adams stream them
  /// through, the step's `offload_optimizer.buffer_count` of them, each
  /// `buffer_size` elements per state or fewer when the largest owned
  /// shard fits in fewer whole 4096-byte blocks; every partition's Adam
  /// shares them (null when the states are not on NVMe).
  NvmeSwapAttr getOptimizerSwap() const;

  /// Unpadded parameter elements (S).
  int64_t getParamCount() const { return paramCount; }
  /// Unpadded elements of the frozen parameters (the frozen partitions').
  int64_t getFrozenParamCount() const { return frozenParamCount; }
  /// Unpadded elements of the trainable parameters.
  int64_t getTrainableParamCount() const {
    return paramCount - frozenParamCount;
  }
  /// The partitions that train (those with gradients and optimizer states).
  SmallVector<const PartitionBuffers *> getTrainablePartitions() const;
  /// Padded parameter elements (S').
  int64_t getPaddedParamCount() const { return paddedParamCount; }

  /// Whether gradient `value`, bound by `zero.grad`, is computed directly
  /// into its slot of the persistent `grads` buffer (stages 0-1, no
  /// accumulation, produced by an op that allocates it).
  bool isGradientInPlace(GradOp grad) const;

private:
  TrainStepOp step;
  int64_t stage = 0;
  int64_t worldSize = 1;
  int64_t accumulationSteps = 1;
  int64_t ranksPerNode = 0;
  int64_t hpzPartitionSize = 1;
  int64_t micsShardSize = 0;
  int64_t sequenceParallel = 1;
  int64_t expertParallel = 1;
  ExpertPlacement expertPlacement = ExpertPlacement::contiguous;
  /// The schedule's mesh, whose axes the rank sets are.
  zrt_mesh mesh = {};
  bool optimizerOffloaded = false;
  OffloadDevice optimizerDevice = OffloadDevice::none;
  bool paramsOffloaded = false;
  OffloadDevice paramDevice = OffloadDevice::none;
  int64_t paramCount = 0;
  int64_t frozenParamCount = 0;
  int64_t paddedParamCount = 0;
  SmallVector<PartitionBuffers> partitions;
  // Bump-allocated: a step's schedule is collected by most passes, and a
  // malloc per parameter entry was a tenth of that at 10,000 tensors.
  llvm::StringMap<unsigned, llvm::BumpPtrAllocator> partitionIndex;
  llvm::StringMap<ParamLocation, llvm::BumpPtrAllocator> params;
};

/// Ops whose results alias memory they do not own (ViewLikeOpInterface):
/// `nn.reshape` (of its input) and `zero.get_param` (of a persistent or
/// gathered buffer).
bool isViewOp(Operation *op);

/// The value whose memory `value` aliases through views, or `value` itself;
/// null when it aliases persistent memory.
Value getViewRoot(Value value);

/// The forward-only (evaluation) step of `step`: the top-level ops its loss
/// depends on, through operands and views, with the zero.wait of every
/// asynchronous collective among them, in program order (the terminator
/// excluded). It is a subsequence of the micro step that reads every value
/// where the training step wrote it, so it runs at the training plan's
/// offsets: it writes no gradient, optimizer state or loss scale, and its
/// live memory at each op is part of the training step's.
SmallVector<Operation *> getEvaluationOps(TrainStepOp step);

/// The top-level ops of `step` that `values` depend on, through operands and
/// views, with the zero.wait of every asynchronous collective among them,
/// in program order: getEvaluationOps of the loss, and the label count
/// function's ops of zero.count_labels' labels.
SmallVector<Operation *> getOpsComputing(TrainStepOp step,
                                         ArrayRef<Value> values);

} // namespace mlir::zero

#endif // ZERO_DIALECT_ZERO_ANALYSIS_SCHEDULE_H
