//===- ZeroToRuntime.h - Lowering to the runtime ----------------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_CONVERSION_ZEROTORUNTIME_H
#define ZERO_CONVERSION_ZEROTORUNTIME_H

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::zero {

/// Attaches the runtime kernel models (RuntimeKernelOpInterface) of every
/// compute op of the `nn` dialect and of `zero.cast`.
void registerRuntimeKernelModels(DialectRegistry &registry);

/// Attaches the runtime collective models (RuntimeCollectiveOpInterface) of
/// the `zero` dialect's collectives.
void registerRuntimeCollectiveModels(DialectRegistry &registry);

/// The LLVM type of runtime function `name`, derived from its C prototype in
/// the runtime's ABI table (`zero_rt/abi.def`); null unless `name` is a
/// function generated code may call (a kernel or a `zrt_ctx_*` call).
LLVM::LLVMFunctionType getRuntimeFunctionType(MLIRContext *context,
                                              StringRef name);

/// The LLVM struct of runtime struct `name`, derived from its table
/// (`zrt_attention_desc`: `zero_rt/attention.def`) field by field; null
/// unless `name` is a struct generated code passes.
LLVM::LLVMStructType getRuntimeStructType(MLIRContext *context, StringRef name);

/// Builds the calls of runtime functions in a module: each function is
/// declared once, with the type of the runtime's ABI table, and a call the
/// table does not allow (an unlisted function, another number or type of
/// arguments) is an error instead of a mismatch at run time.
class RuntimeCallBuilder {
public:
  explicit RuntimeCallBuilder(ModuleOp module) : module(module) {}

  /// Calls runtime function `name` with `args` at `b`'s insertion point,
  /// declaring it at the end of the module on its first call. On a call the
  /// ABI table does not allow, appends the reason to `emitError()` and
  /// fails. Returns the call's result, or a null value for a void function.
  FailureOr<Value> call(OpBuilder &b, Location loc, StringRef name,
                        ValueRange args,
                        llvm::function_ref<InFlightDiagnostic()> emitError);

private:
  ModuleOp module;
  llvm::StringMap<LLVM::LLVMFuncOp> decls;
};

} // namespace mlir::zero

#endif // ZERO_CONVERSION_ZEROTORUNTIME_H
