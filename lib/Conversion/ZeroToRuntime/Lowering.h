//===- Lowering.h - State of the lowering of one step -----------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//
//
// Private to convert-zero-to-runtime. The lowering of one scheduled, planned
// step: where each value lives (Lowering.cpp), the call of each op
// (LowerOps.cpp), the step's phases as bounded functions (LowerPhases.cpp),
// the manifest (Manifest.cpp) and the `zero_program` descriptor
// (ProgramDescriptor.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_LIB_CONVERSION_ZEROTORUNTIME_LOWERING_H
#define ZERO_LIB_CONVERSION_ZEROTORUNTIME_LOWERING_H

#include "zero/Conversion/ZeroToRuntime.h"
#include "zero/Dialect/Zero/Analysis/MemoryPlan.h"
#include "zero/Dialect/Zero/Analysis/Schedule.h"
#include "zero/Dialect/Zero/IR/ZeroDialect.h"
#include "zero/Interfaces/RuntimeCollectiveOpInterface.h"
#include "zero/Interfaces/RuntimeKernelOpInterface.h"

#include "zero_rt/zrt.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "llvm/ADT/DenseMap.h"

#include <string>

namespace zrt::manifest {
struct Program;
} // namespace zrt::manifest

namespace mlir::zero::lowering {

inline RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}
inline int64_t numel(Value v) { return tensorType(v).getNumElements(); }
inline Type elemType(Value v) { return tensorType(v).getElementType(); }

/// Where a value's bytes live.
struct Storage {
  bool persistent = false;
  int64_t offset = -1;
};

class Lowering {
public:
  Lowering(ModuleOp module, const StepSchedule &schedule,
           const MemoryPlan &plan, int64_t maxFunctionOps);

  LogicalResult run();

private:
  /// Lowers `ops` (the micro step, the boundary or the evaluation step, in
  /// program order) into `entry`, through internal functions of about
  /// `maxFunctionOps` operations each; with `trace`, with the memory-tracing
  /// calls of the plan.
  LogicalResult lowerPhase(LLVM::LLVMFuncOp entry, ArrayRef<Operation *> ops,
                           bool trace);

  // Declarations and constants.
  /// Calls runtime function `name`, declared with the type of the runtime's
  /// ABI table; a call the table does not allow is an error on the op being
  /// lowered.
  FailureOr<Value> call(StringRef name, ArrayRef<Value> args);
  void callVoid(StringRef name, ArrayRef<Value> args) {
    (void)call(name, args);
  }
  Value i32(int64_t v) {
    return LLVM::ConstantOp::create(b, loc, b.getI32Type(),
                                    b.getI32IntegerAttr(v));
  }
  Value i64(int64_t v) {
    return LLVM::ConstantOp::create(b, loc, b.getI64Type(),
                                    b.getI64IntegerAttr(v));
  }
  Value f64(double v) {
    return LLVM::ConstantOp::create(b, loc, b.getF64Type(),
                                    b.getF64FloatAttr(v));
  }
  Value dtype(Type elementType) {
    if (elementType.isBF16())
      return i32(ZRT_BF16);
    if (elementType.isF16())
      return i32(ZRT_F16);
    if (elementType.isInteger(64))
      return i32(ZRT_I64);
    return i32(ZRT_F32); // and ZRT_I32
  }
  Value i64Array(ArrayRef<int64_t> values);
  Value f32Array(ArrayRef<float> values);
  /// The address of a new internal constant global holding `values`.
  Value constantArray(DenseElementsAttr values);
  Value ptrArray(ArrayRef<Value> ptrs);
  /// KernelCallBuilder::record: the struct in stack memory, stored whole.
  FailureOr<Value> record(StringRef name, ArrayRef<Value> fields);
  Type ptrType() { return LLVM::LLVMPointerType::get(b.getContext()); }

  // Storage of values.
  FailureOr<Storage> storageOf(Value v);
  FailureOr<Value> ptr(Value v);
  Value ctxPtr(bool persistent, int64_t offset);

  LogicalResult lowerOp(Operation *op);
  /// `ptr(v)`, or null where it failed (with a diagnostic).
  Value ptrOrNull(Value v);
  // The ZeRO ops by family; each takes only the ops lowerOp gives it.
  LogicalResult lowerGrad(GradOp g);
  LogicalResult lowerLossOp(Operation *op);
  LogicalResult lowerOptimizerOp(Operation *op);
  LogicalResult checkMuonStep(OptimizerStepOp o);
  LogicalResult checkAdafactorStep(OptimizerStepOp o);
  LogicalResult lowerTransfer(TransferOp o);
  LogicalResult lowerActivationCopy(ActivationCopyOpInterface o);
  /// The memory-tracing calls around op `index` of the step: its position
  /// and the step-arena bytes that become live before it runs (`before`) or
  /// dead after it.
  void traceMemory(int64_t index, bool before);
  LogicalResult lowerCompute(RuntimeKernelOpInterface op);
  LogicalResult lowerCollective(RuntimeCollectiveOpInterface op);
  /// The index of a partition in the schedule (and the manifest), or -1.
  int32_t partitionIndex(SymbolRefAttr ref) {
    return partitionIndices.lookup_or(ref.getLeafReference(), -1);
  }
  int32_t partitionIndex(PartitionOp p) {
    return partitionIndices.lookup_or(p.getSymNameAttr(), -1);
  }
  int32_t slotOf(Value token);
  /// The byte offset of buffer `kind` of partition `p` in the persistent
  /// arena, or -1 if the plan has none.
  int64_t persistentOffset(PartitionOp p, BufferKind kind) {
    return persistentOffsets.lookup_or({p, kind}, -1);
  }

  /// The manifest's JSON text; fails (with a diagnostic) where the plan's
  /// communication cannot be counted.
  FailureOr<std::string> buildManifest();
  // The parts of the manifest that read the lowering's layout.
  void addInputs(zrt::manifest::Program &m);
  void addParams(zrt::manifest::Program &m);
  void addPartitions(zrt::manifest::Program &m);
  /// Emits the manifest as the global `zero_manifest` and the `zrt_program`
  /// descriptor `zero_program` that points to it and to the step's phases
  /// (`countLabels`: whether the step has a label count function).
  void emitProgramDescriptor(std::string manifest, bool countLabels);

  ModuleOp module;
  const StepSchedule &s;
  const MemoryPlan &plan;
  int64_t maxFunctionOps;
  OpBuilder b;
  RuntimeCallBuilder runtimeCalls;
  Location loc = UnknownLoc::get(module.getContext());
  Value ctx;
  DenseMap<Value, Value> ptrCache;
  DenseMap<std::pair<Operation *, int>, int64_t> resultOffsets;
  DenseMap<Operation *, int64_t> tempOffsets;
  SmallVector<int64_t> inputOffsets;
  /// By op index: the [offset, bytes) of the step arena that become live
  /// when it runs and dead after it.
  std::vector<SmallVector<std::pair<int64_t, int64_t>, 2>> liveAt, deadAt;
  DenseMap<Value, int32_t> slots;
  /// The index of each op of the step (its position in the plan).
  DenseMap<Operation *, int64_t> opIndices;
  unsigned numGlobals = 0;
  /// The index of each partition by name.
  DenseMap<StringAttr, int32_t> partitionIndices;
  /// The plan's offset of each persistent buffer.
  DenseMap<std::pair<Operation *, BufferKind>, int64_t> persistentOffsets;
  /// Whether the label count function is being lowered: zero.count_labels
  /// counts a micro batch's labels there instead of all-reducing the counts.
  bool countingLabels = false;
  /// Lowering the evaluation step, which runs on its own: the gathers the
  /// training step keeps from its first micro step run unguarded there.
  bool evaluating = false;
  /// The op being lowered (for diagnostics).
  Operation *current = nullptr;
  bool callFailed = false;

  friend class KernelCalls;
  friend class CollectiveCalls;
};

} // namespace mlir::zero::lowering

#endif // ZERO_LIB_CONVERSION_ZEROTORUNTIME_LOWERING_H
