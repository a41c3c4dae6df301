//===- RuntimeCollectiveOpInterface.h - Runtime calls -----------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_INTERFACES_RUNTIMECOLLECTIVEOPINTERFACE_H
#define ZERO_INTERFACES_RUNTIMECOLLECTIVEOPINTERFACE_H

#include "mlir/IR/OpDefinition.h"

namespace mlir::zero {

class StepSchedule;

/// What a collective model emits its calls with. The lowering implements it:
/// pointers are the planned buffers, the temporary is the step-arena buffer
/// the memory plan gave the op (a reduction's bucket, a quantized
/// collective's staging), and `call` checks the callee and its argument
/// types against the runtime's ABI table.
class CollectiveCallBuilder {
public:
  virtual ~CollectiveCallBuilder();

  /// The `zrt_ctx *` every `zrt_ctx_*` call takes first.
  virtual Value context() = 0;
  /// Pointer to the planned buffer of `value`; null (with a diagnostic)
  /// where the plan has none.
  virtual Value pointer(Value value) = 0;
  /// `pointer` advanced by `bytes` bytes.
  virtual Value offsetPointer(Value pointer, int64_t bytes) = 0;
  /// Pointer `offset` bytes into the op's planned step-arena temporary.
  virtual Value temporary(int64_t offset = 0) = 0;
  /// The index of partition `group` in the schedule (and the manifest).
  virtual int32_t partitionIndex(SymbolRefAttr group) = 0;
  /// The token slot of `token` (-1: synchronous).
  virtual int32_t slotOf(Value token) = 0;
  /// Constants of the C types int32_t, int64_t and double.
  virtual Value i32(int64_t value) = 0;
  virtual Value i64(int64_t value) = 0;
  virtual Value f64(double value) = 0;
  /// The zrt_dtype / zrt_index_type code of an element type, as an int32_t.
  virtual Value dtype(Type elementType) = 0;
  /// The step's schedule (stage, partitions, topology).
  virtual const StepSchedule &getSchedule() = 0;
  /// Whether the label count function is being lowered (each micro batch's
  /// labels are counted there, not all-reduced).
  virtual bool isCountingLabels() = 0;

  /// Calls runtime function `callee` (returning void) with `args`.
  virtual LogicalResult call(StringRef callee, ArrayRef<Value> args) = 0;
};

} // namespace mlir::zero

#include "zero/Interfaces/RuntimeCollectiveOpInterface.h.inc"

#endif // ZERO_INTERFACES_RUNTIMECOLLECTIVEOPINTERFACE_H
