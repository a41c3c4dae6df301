//===- MemoryPlan.h - Static arena plan of a scheduled step -----*- C++ -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_DIALECT_ZERO_ANALYSIS_MEMORYPLAN_H
#define ZERO_DIALECT_ZERO_ANALYSIS_MEMORYPLAN_H

#include "zero/Dialect/Zero/Analysis/Schedule.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/raw_ostream.h"

#include <array>
#include <vector>

namespace mlir::zero {

/// What a buffer holds; the report and the memory picture sum by category.
enum class MemoryCategory : unsigned {
  Params,          ///< persistent parameters in the compute type
  Grads,           ///< persistent gradients in the compute type
  MasterParams,    ///< fp32 master parameters (none with fp32 compute)
  AdamM,           ///< fp32 first moments
  AdamV,           ///< fp32 second moments
  Inputs,          ///< the step's input batch
  Activations,     ///< forward values (those alive into backward are kept)
  Gradients,       ///< backward values, including transient parameter gradients
  ReduceBuckets,   ///< bucket buffers of gradient reductions
  GatherBuffers,   ///< stage-3 gathered parameters
  Optimizer,       ///< loss scale, overflow statistics
  SecondaryParams, ///< hpZ secondary shards of the gathered groups
};
constexpr unsigned kNumMemoryCategories = 12;
StringRef stringifyMemoryCategory(MemoryCategory c);
/// The category of a partition's persistent buffer of kind `k`.
MemoryCategory persistentCategory(BufferKind k);

/// One piece of a step-arena buffer: bytes [offset, offset + bytes) live from
/// op index `start` to `end` (inclusive). A buffer freed slice by slice has
/// several pieces with the same start.
struct ArenaPiece {
  int64_t offset = 0;
  int64_t bytes = 0;
  int64_t start = 0;
  int64_t end = 0;
};

/// A buffer of the step arena.
struct ArenaBuffer {
  /// The defining op (null for an input of the step).
  Operation *op = nullptr;
  /// The result it holds, or -1 for a temporary of `op` (a bucket buffer).
  int resultIndex = -1;
  /// The block argument number for inputs, else -1.
  int argIndex = -1;
  MemoryCategory category = MemoryCategory::Activations;
  int64_t offset = 0;
  int64_t bytes = 0;
  SmallVector<ArenaPiece, 1> pieces;
};

/// A persistent buffer of one partition, at `offset` of the persistent
/// arena of its memory (device, the pinned host arena of an offloaded
/// optimizer, or the rank's swap file of one on NVMe).
struct PersistentBuffer {
  mutable PartitionOp partition;
  BufferKind kind;
  int64_t offset = 0;
  int64_t bytes = 0;
  MemoryKind memory = MemoryKind::device;
};

/// The plan of one train step on one rank (identical on every rank).
struct MemoryPlan {
  /// Every persistent buffer, in device or host memory.
  std::vector<PersistentBuffer> persistent;
  /// The device persistent arena.
  int64_t persistentBytes = 0;
  /// The pinned host arena (optimizer, parameter or activation offload; 0
  /// otherwise): every place in it is reserved for the whole step, so this
  /// is the host peak.
  int64_t hostBytes = 0;
  /// The total of the rank's NVMe swap files (0 without NVMe offload): the
  /// optimizer's, with the states at 4096-byte aligned offsets, padded to
  /// 4096 bytes, and the parameters' (paramNvmeBytes), laid out alike.
  int64_t nvmeBytes = 0, paramNvmeBytes = 0;
  /// The swap buffers' regions of the host arena (part of hostBytes): the
  /// optimizer's and the parameters'.
  int64_t swapOffset = 0, swapBytes = 0;
  int64_t paramSwapOffset = 0, paramSwapBytes = 0;
  /// The offloaded activations' region of the host arena (part of
  /// hostBytes, after the swap buffers), and the offset in it of each
  /// zero.offload_activation's host copy (each has its own place).
  int64_t activationOffset = 0, activationBytes = 0;
  llvm::DenseMap<Operation *, int64_t> hostActivations;
  std::vector<ArenaBuffer> buffers;
  /// High-water mark of the step arena.
  int64_t arenaBytes = 0;
  /// The largest heap scratch of one runtime kernel of the step (kernels run
  /// one at a time; see zero_rt/scratch.h).
  int64_t scratchBytes = 0;
  /// persistentBytes + arenaBytes + scratchBytes: what a rank allocates.
  int64_t peakBytes = 0;
  /// The top-level ops of the step in program order (op index = position).
  std::vector<Operation *> ops;
  /// Live step-arena bytes by category after each op (index = op index).
  std::vector<std::array<int64_t, kNumMemoryCategories>> liveByCategory;
  /// The heap scratch of each op's runtime kernel (index = op index).
  std::vector<int64_t> scratchByOp;
  /// Maximum over time of the live bytes of each category.
  std::array<int64_t, kNumMemoryCategories> peakByCategory{};
  /// Exact (unaligned) persistent device bytes by category.
  std::array<int64_t, kNumMemoryCategories> persistentByCategory{};
  /// Op index of the first backward op (the loss seed), or -1.
  int64_t backwardStart = -1;
};

/// Plans `step`. Diagnostics go to the step.
FailureOr<MemoryPlan> computeMemoryPlan(const StepSchedule &schedule);

/// Schedules `step` (StepSchedule::get) and plans it, for a caller that
/// needs only the plan. Diagnostics go to the step.
FailureOr<MemoryPlan> computeMemoryPlan(TrainStepOp step);

/// Records the plan in the IR (see zero-plan-memory's description).
void recordMemoryPlan(const MemoryPlan &plan, TrainStepOp step);

/// A stacked-area picture of the step-arena and persistent memory over the
/// step, by category, with the peak marked.
void writeMemorySvg(const MemoryPlan &plan, const StepSchedule &schedule,
                    llvm::raw_ostream &os);

} // namespace mlir::zero

#endif // ZERO_DIALECT_ZERO_ANALYSIS_MEMORYPLAN_H
