//===- Optimizers.h - The optimizers' table, in the compiler's terms -----===//
//
// Part of the zero-mlir project.
//
// What the compiler reads from runtime/include/zero_rt/optimizers.def: an
// OptimizerKind's state buffers, their bytes per parameter and report keys,
// and the runtime entries that update a shard. OptimizerKind and BufferKind
// are ODS enums that cannot include the table; Optimizers.cpp checks them
// against it when it compiles.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_DIALECT_ZERO_IR_OPTIMIZERS_H
#define ZERO_DIALECT_ZERO_IR_OPTIMIZERS_H

#include "zero/Dialect/Zero/IR/ZeroDialect.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <optional>

namespace mlir::zero {

/// One state buffer of an optimizer.
struct OptimizerState {
  BufferKind buffer;
  /// Bytes per parameter.
  int64_t bytes;
  /// Its key in the report's model_state_breakdown, and its row there.
  llvm::StringRef reportKey, label;
};

/// The state buffers `kind` may keep, in the table's order: every state
/// row, gated or not (ZRT_OPTIMIZER_STATE_GATE).
llvm::SmallVector<OptimizerState> getOptimizerStates(OptimizerKind kind);

/// The state buffers `opt` keeps: its kind's, less those whose gate (a
/// hyper-parameter of `opt`) is 0.
llvm::SmallVector<OptimizerState> getOptimizerStates(OptimizerAttr opt);

/// The bytes per parameter of `kind`'s states (fp32 masters not counted),
/// the most it keeps.
int64_t getOptimizerStateBytes(OptimizerKind kind);

/// The bytes per parameter of the states `opt` keeps, in its state
/// precision (absmaxes not counted).
int64_t getOptimizerStateBytes(OptimizerAttr opt);

/// Whether `kind` can keep its states in `precision` (f32 always; another
/// when its row declares it, ZRT_OPTIMIZER_PRECISION).
bool hasOptimizerStatePrecision(OptimizerKind kind, StatePrecision precision);

/// The bytes of `opt`'s state `buffer` over a shard of `numel` elements in
/// `opt`'s state precision: the elements at the precision's bytes each and
/// its fp32 absmax per block, if any.
int64_t getOptimizerStateBufferBytes(OptimizerAttr opt, BufferKind buffer,
                                     int64_t numel);

/// The elements of a state that share one fp32 absmax in `opt`'s state
/// precision, 0 when it keeps none (f32).
int64_t getOptimizerAbsmaxBlock(OptimizerAttr opt);

/// The bytes of every state `opt` keeps over a shard of `numel` elements.
int64_t getOptimizerStateBytes(OptimizerAttr opt, int64_t numel);

/// The value of `opt`'s numeric or boolean hyper-parameter `name` (a
/// #zero.optimizer parameter; true is 1), none for another name.
std::optional<double> getOptimizerParamValue(OptimizerAttr opt,
                                             llvm::StringRef name);

/// The names of #zero.optimizer's hyper-parameters besides `lr`, one per
/// ZRT_HYPER_PARAM row, in the table's order.
llvm::ArrayRef<llvm::StringRef> getOptimizerHyperParams();
/// Whether `buffer` is a state of some optimizer.
bool isOptimizerState(BufferKind buffer);

/// Whether `kind` reads the #zero.optimizer parameter `name` (its table
/// rows' ZRT_OPTIMIZER_PARAM).
bool hasOptimizerParam(OptimizerKind kind, llvm::StringRef name);

/// Whether `kind` may keep a state buffer of kind `buffer`.
bool hasOptimizerState(OptimizerKind kind, BufferKind buffer);

/// Whether `opt` keeps a state buffer of kind `buffer` (its gate, if any,
/// is not 0).
bool hasOptimizerState(OptimizerAttr opt, BufferKind buffer);

/// The runtime entries (abi.def) that update a shard with `kind`.
struct OptimizerEntries {
  llvm::StringRef device, staged, host, nvme;
};
OptimizerEntries getOptimizerEntries(OptimizerKind kind);

/// The ds_config `optimizer.type` names, as DeepSpeed spells them.
llvm::SmallVector<llvm::StringRef> getDeepSpeedOptimizerTypes();

/// The value of `kind`'s hyper-parameter `name` when a ds_config's
/// `optimizer.params` leave it out, where the class the ds_config names
/// defaults otherwise than #zero.optimizer (the table's
/// ZRT_OPTIMIZER_DS_DEFAULT rows); none where it does not.
std::optional<double> getDeepSpeedOptimizerDefault(OptimizerKind kind,
                                                   llvm::StringRef name);

} // namespace mlir::zero

#endif // ZERO_DIALECT_ZERO_IR_OPTIMIZERS_H
