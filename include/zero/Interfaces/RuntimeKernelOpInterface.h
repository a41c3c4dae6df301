//===- RuntimeKernelOpInterface.h - An op's runtime kernel ------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_INTERFACES_RUNTIMEKERNELOPINTERFACE_H
#define ZERO_INTERFACES_RUNTIMEKERNELOPINTERFACE_H

#include "mlir/IR/OpDefinition.h"

namespace mlir::zero {

/// The work of one kernel, as the cost model times it.
struct KernelCost {
  enum class Kind {
    /// Memory-bound: `bytes` at the preset's memory bandwidth.
    Memory,
    /// Compute-bound GEMM: `flops` at the rate of `computeType`.
    Gemm,
    /// Fused attention: `flops` at the preset's attention rate, if any.
    Attention,
    /// Compute-bound pointwise or normalization kernel:
    /// `activationElements` outputs at the preset's activation rate, if any.
    Activation,
  };
  Kind kind = Kind::Memory;
  /// Bytes read and written.
  double bytes = 0;
  double flops = 0;
  /// GEMM and attention: the element type (selects the FLOP rate).
  Type computeType;
  double activationElements = 0;
  /// GEMM: the product's shape, `batch` products of M x K by K x N, which
  /// decides how well its tiles fill the device (0: not known).
  int64_t batch = 0, m = 0, n = 0, k = 0;
  /// Attention: the head dimension and query length, and whether the mask
  /// is causal (or a window) and the kernel the backward one, which decide
  /// the rate a fused attention kernel reaches (0: not known).
  int64_t headDim = 0, seqLen = 0;
  bool causal = false, backward = false;
  /// Attention over packed rows' documents (segments), whose `flops` are
  /// a full row's: a cost model that knows the documents' lengths scales
  /// them; its sliding window (0: none).
  bool documents = false;
  int64_t window = 0;
  /// The kernels the op launches, each paying the preset's launch and gap
  /// (an op that works in chunks launches some per chunk).
  int64_t launches = 1;
  /// What an eager PyTorch peer launches for the op where its decomposition
  /// differs from this kernel (an fp32 copy and one kernel per elementwise
  /// op, and autograd's backward of each): `eagerLaunches` memory-bound
  /// kernels moving `eagerBytes` in all, in place of `bytes` and `launches`
  /// (a GEMM's or attention's FLOPs, if any, stay). 0 launches: the peer
  /// runs a kernel like this one. The cost model uses them under its eager
  /// runtime profile only.
  double eagerBytes = 0;
  int64_t eagerLaunches = 0;

  static KernelCost memory(double bytes) {
    KernelCost c;
    c.bytes = bytes;
    return c;
  }
  static KernelCost compute(Kind kind, double bytes, double flops,
                            Type computeType) {
    KernelCost c;
    c.kind = kind;
    c.bytes = bytes;
    c.flops = flops;
    c.computeType = computeType;
    return c;
  }
  static KernelCost activation(double bytes, double elements) {
    KernelCost c;
    c.kind = Kind::Activation;
    c.bytes = bytes;
    c.activationElements = elements;
    return c;
  }
};

/// Bytes of a ranked-tensor value; 0 for other values (flags, tokens).
double getValueBytes(Value value);
/// Bytes of the op's ranked-tensor operands and results.
double getOperandAndResultBytes(Operation *op);

/// What a kernel model emits its call with. The lowering implements it: the
/// pointers are the planned buffers of the op's operands and results, and
/// `call` checks the callee and its argument types against the runtime's ABI
/// table, so a model cannot link a call with a wrong signature.
class KernelCallBuilder {
public:
  virtual ~KernelCallBuilder();

  /// Pointer to the buffer of operand / result `i`.
  virtual Value operand(unsigned i) = 0;
  virtual Value result(unsigned i) = 0;
  /// Pointers of all results, in order.
  virtual ArrayRef<Value> results() = 0;
  /// Pointers of all operands, in order.
  virtual ArrayRef<Value> operands() = 0;

  /// Constants of the C types int32_t, int64_t and double.
  virtual Value i32(int64_t value) = 0;
  virtual Value i64(int64_t value) = 0;
  virtual Value f64(double value) = 0;
  /// The zrt_dtype (float) or zrt_index_type (integer) code of an element
  /// type, as an int32_t.
  virtual Value dtype(Type elementType) = 0;
  /// A constant int64_t or float array / an array of pointers, passed by
  /// address (an empty float array: a null pointer); a null pointer.
  virtual Value i64Array(ArrayRef<int64_t> values) = 0;
  virtual Value f32Array(ArrayRef<float> values) = 0;
  virtual Value ptrArray(ArrayRef<Value> pointers) = 0;
  virtual Value nullPtr() = 0;
  /// A struct of the runtime's tables (`zrt_attention_desc`) holding
  /// `fields` in its order, in stack memory, passed by address; fails when
  /// their number or a type differs from the table's.
  virtual FailureOr<Value> record(StringRef name, ArrayRef<Value> fields) = 0;

  /// Calls runtime function `callee` (returning void) with `args`.
  virtual LogicalResult call(StringRef callee, ArrayRef<Value> args) = 0;
};

} // namespace mlir::zero

#include "zero/Interfaces/RuntimeKernelOpInterface.h.inc"

#endif // ZERO_INTERFACES_RUNTIMEKERNELOPINTERFACE_H
