//===- OptimizerRules.h - What an optimizer can keep, and where -*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// The rules on an optimizer's precision that more than the verifier
// enforces: #zero.optimizer's verifier and the lowering ask them, and so do
// the tools that take the same choices before there is an attribute
// (zero-estimate's --bf16-masters, a ds_config's keys), so that each refuses
// what the compiler refuses, by the same predicate. Beside Optimizers.h,
// whose table they complete.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_DIALECT_ZERO_IR_OPTIMIZERRULES_H
#define ZERO_DIALECT_ZERO_IR_OPTIMIZERRULES_H

#include "zero/Dialect/Zero/IR/ZeroDialect.h"

namespace mlir::zero {

/// Whether `kind` with its states in `precision` can keep bf16 parameters
/// as their own masters (#zero.optimizer's bf16_masters, DeepSpeed's
/// bf16_master_weights_and_grads): the bf16-master update exists for Adam
/// and AdamW with f32 or bf16 states.
bool hasBf16MasterUpdate(OptimizerKind kind, StatePrecision precision);

/// Whether states in `precision` can be swapped to NVMe: the NVMe update
/// streams 4 bytes per element of each state through the swap buffers, so
/// f32 only.
bool canSwapOptimizerStates(StatePrecision precision);

} // namespace mlir::zero

#endif // ZERO_DIALECT_ZERO_IR_OPTIMIZERRULES_H
