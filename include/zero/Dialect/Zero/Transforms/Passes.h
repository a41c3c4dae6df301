//===- Passes.h - ZeRO passes -----------------------------------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_DIALECT_ZERO_TRANSFORMS_PASSES_H
#define ZERO_DIALECT_ZERO_TRANSFORMS_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "zero/Dialect/NN/IR/NNDialect.h"
#include "zero/Dialect/Zero/IR/ZeroDialect.h"

namespace mlir::zero {

#define GEN_PASS_DECL
#include "zero/Dialect/Zero/Transforms/Passes.h.inc"

/// Attaches the derivative of zero.all_to_all (the inverse exchange), which
/// zero-sequence-parallel emits before zero-autodiff, as an external model
/// (registerAllDialects attaches it): the zero dialect itself does not
/// depend on the derivative interface.
void registerAllToAllDerivativeModel(DialectRegistry &registry);

/// The derivatives of zero.moe_exchange and zero.moe_return, which
/// zero-expert-parallel emits before zero-autodiff (an external model, as
/// above).
void registerMoeExchangeDerivativeModels(DialectRegistry &registry);

#define GEN_PASS_REGISTRATION
#include "zero/Dialect/Zero/Transforms/Passes.h.inc"

} // namespace mlir::zero

#endif // ZERO_DIALECT_ZERO_TRANSFORMS_PASSES_H
