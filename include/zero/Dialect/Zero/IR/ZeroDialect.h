//===- ZeroDialect.h - Model structure and ZeRO schedule ops ----*- C++ -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_DIALECT_ZERO_IR_ZERODIALECT_H
#define ZERO_DIALECT_ZERO_IR_ZERODIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/RegionKindInterface.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

#include "zero_rt/constants.h"
#include "zero_rt/topology.h"

namespace mlir::zero {
/// The most elements a tensor of a train step may have (2^48, a PiB of
/// fp32). Element and byte counts, their sums in the memory plan and the
/// runtime kernels' scratch formulas then stay far from int64 overflow.
constexpr int64_t kMaxTensorElements = int64_t(1) << 48;
/// The most data-parallel ranks a schedule may have (2^20); the report and
/// the cost model visit every rank's part of a collective.
constexpr int64_t kMaxWorldSize = int64_t(1) << 20;
/// The most micro steps per optimizer step (2^16); the cost model simulates
/// every one of them.
constexpr int64_t kMaxAccumulationSteps = int64_t(1) << 16;
/// Alignment of every byte offset of the memory plan, in both arenas.
constexpr int64_t kArenaAlignment = ZRT_ARENA_ALIGNMENT;
} // namespace mlir::zero

#include "zero/Dialect/Zero/IR/ZeroEnums.h.inc"

// Before the attributes: #zero.optimizer is built from it.
#include "zero/Dialect/Zero/IR/OptimizerParams.h"

// Before the dialect: its discardable-attribute helpers name these classes.
#define GET_ATTRDEF_CLASSES
#include "zero/Dialect/Zero/IR/ZeroAttrs.h.inc"

#include "zero/Dialect/Zero/IR/ZeroOpsDialect.h.inc"

#define GET_TYPEDEF_CLASSES
#include "zero/Dialect/Zero/IR/ZeroOpsTypes.h.inc"

namespace mlir::zero {
/// The ranks a collective of partition `group` runs over by default:
/// `expert_replicas` for an `expert` partition, else `group`.
RankSetKind getPartitionRankSet(Operation *op, FlatSymbolRefAttr group);
} // namespace mlir::zero

#include "zero/Dialect/Zero/IR/ZeroOpInterfaces.h.inc"

#define GET_OP_CLASSES
#include "zero/Dialect/Zero/IR/ZeroOps.h.inc"

namespace mlir::zero {

/// The phase of an op of a train step; ops without one (compute ops) run in
/// every micro step, before the optimizer.
inline Phase getStepPhase(Operation *op) {
  if (auto phased = dyn_cast<StepPhaseOpInterface>(op))
    return phased.getPhase();
  return Phase::micro_step;
}
/// Whether ops of `phase` run in the boundary function, once per optimizer
/// step after its last micro step.
inline bool runsAtBoundary(Phase phase) {
  return phase == Phase::boundary || phase == Phase::post_step;
}
/// Whether ops of `phase` run once per optimizer step (in its first or last
/// micro step or at the boundary after it), not in every micro step.
inline bool runsOncePerStep(Phase phase) {
  return runsAtBoundary(phase) || phase == Phase::last_micro_step ||
         phase == Phase::first_micro_step;
}
/// Whether `op` is the seed of the backward that zero-autodiff emits (it
/// carries the dialect's `zero.loss_seed`).
inline bool isLossSeed(Operation *op) {
  auto *dialect = op->getContext()->getLoadedDialect<ZeroDialect>();
  return dialect && dialect->getLossSeedAttrHelper().isAttrPresent(op);
}
/// Whether parameters whose compute copy has element type `computeType` are
/// their own masters under optimizer `opt` (null: any): fp32 ones, and
/// bf16 ones with `bf16_masters` (DeepSpeed's
/// bf16_master_weights_and_grads). Adam then updates them in place and
/// their partition has no `master` buffer.
inline bool areParamsMasters(Type computeType, OptimizerAttr opt = {}) {
  return computeType.isF32() ||
         (computeType.isBF16() && opt && opt.getBf16Masters());
}
/// Where train step `step` keeps its optimizer states (its offload):
/// device memory (none), pinned host memory (cpu) or swap files (nvme).
inline OffloadDevice getOptimizerOffload(TrainStepOp step) {
  return step.getOffload().getOptimizer();
}
/// Whether train step `step` offloads its optimizer (to host or NVMe): the
/// Adam runs on the host.
inline bool offloadsOptimizer(TrainStepOp step) {
  return getOptimizerOffload(step) != OffloadDevice::none;
}
/// Where train step `step` keeps its stage-3 parameter shards (its
/// offload): device memory (none), pinned host memory (cpu) or a swap file
/// (nvme).
inline OffloadDevice getParamOffload(TrainStepOp step) {
  return step.getOffload().getParam();
}
/// Whether train step `step` keeps its stage-3 parameter shards off the
/// device (host memory or NVMe): its gathers read staged device copies.
inline bool offloadsParams(TrainStepOp step) {
  return getParamOffload(step) != OffloadDevice::none;
}
/// Whether they are in host memory, where a host Adam updates them in
/// place.
inline bool keepsParamsOnHost(TrainStepOp step) {
  return getParamOffload(step) == OffloadDevice::cpu;
}
/// The alignment of offsets and sizes in an NVMe swap file and of the
/// swap buffers (O_DIRECT's logical block on common file systems).
constexpr int64_t kNvmeAlignment = ZRT_NVME_BLOCK_BYTES;
/// The largest swap chunk in elements: the fp32 elements of one state
/// that one read or write moves (1 GiB).
constexpr int64_t kMaxSwapChunk = ZRT_MAX_TRANSFER_BYTES / 4;
/// The memory an offload device keeps what it holds in.
inline MemoryKind getOffloadMemory(OffloadDevice device) {
  switch (device) {
  case OffloadDevice::none:
    return MemoryKind::device;
  case OffloadDevice::cpu:
    return MemoryKind::host;
  case OffloadDevice::nvme:
    return MemoryKind::nvme;
  }
  return MemoryKind::device;
}
/// The memory a partition's persistent buffer of kind `kind` lives in when
/// the optimizer is offloaded to `optimizer` and the parameter shards to
/// `param`.
inline MemoryKind getBufferMemory(BufferKind kind, OffloadDevice optimizer,
                                  OffloadDevice param = OffloadDevice::none) {
  switch (kind) {
  case BufferKind::params:
    return getOffloadMemory(param);
  case BufferKind::grads:
  case BufferKind::secondary:
    return MemoryKind::device;
  case BufferKind::master:
  case BufferKind::exp_avg:
  case BufferKind::exp_avg_sq:
  case BufferKind::momentum_buffer:
    return getOffloadMemory(optimizer);
  case BufferKind::host_grads:
  case BufferKind::host_params:
    return MemoryKind::host;
  }
  return MemoryKind::device;
}
/// Persistent buffer kinds, in BufferKind order.
constexpr unsigned kNumBufferKinds = 9;
/// Whether ops of `phase` come after the optimizer.
inline bool isAfterOptimizer(Phase phase) {
  return phase == Phase::step_end || phase == Phase::post_step;
}
} // namespace mlir::zero

#endif // ZERO_DIALECT_ZERO_IR_ZERODIALECT_H
