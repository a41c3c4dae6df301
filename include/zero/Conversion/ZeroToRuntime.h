//===- ZeroToRuntime.h - Lowering to the runtime ----------------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_CONVERSION_ZEROTORUNTIME_H
#define ZERO_CONVERSION_ZEROTORUNTIME_H

#include "mlir/Dialect/LLVMIR/LLVMTypes.h"
#include "mlir/IR/DialectRegistry.h"

namespace mlir::zero {

/// Attaches the runtime kernel models (RuntimeKernelOpInterface) of every
/// compute op of the `nn` dialect and of `zero.cast`.
void registerRuntimeKernelModels(DialectRegistry &registry);

/// The LLVM type of runtime function `name`, derived from its C prototype in
/// the runtime's ABI table (`zero_rt/abi.def`); null unless `name` is a
/// function generated code may call (a kernel or a `zrt_ctx_*` call).
LLVM::LLVMFunctionType getRuntimeFunctionType(MLIRContext *context,
                                              StringRef name);

} // namespace mlir::zero

#endif // ZERO_CONVERSION_ZEROTORUNTIME_H
