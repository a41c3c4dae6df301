//===- RuntimeABI.cpp - The runtime's C entry points and their calls ------===//
//
// Part of the zero-mlir project.
//
// The lowering declares every runtime function with the LLVM type derived
// here from the C prototype in the runtime's own ABI table, and builds its
// calls here, so a call whose arguments disagree with the runtime is a
// compile-time error, not memory corruption at run time.
//
//===----------------------------------------------------------------------===//

#include "zero/Conversion/ZeroToRuntime.h"

#include "zero_rt/program.h"

#include "llvm/ADT/StringMap.h"

using namespace mlir;

namespace {

/// The LLVM type of a C type of the ABI.
template <typename T>
struct CType;
template <>
struct CType<void> {
  static Type get(MLIRContext *c) { return LLVM::LLVMVoidType::get(c); }
};
template <>
struct CType<int32_t> {
  static Type get(MLIRContext *c) { return IntegerType::get(c, 32); }
};
template <>
struct CType<int64_t> {
  static Type get(MLIRContext *c) { return IntegerType::get(c, 64); }
};
template <>
struct CType<double> {
  static Type get(MLIRContext *c) { return Float64Type::get(c); }
};
template <typename T>
struct CType<T *> {
  static Type get(MLIRContext *c) { return LLVM::LLVMPointerType::get(c); }
};

template <typename F>
struct CFunction;
template <typename R, typename... Args>
struct CFunction<R(Args...)> {
  static LLVM::LLVMFunctionType get(MLIRContext *c) {
    return LLVM::LLVMFunctionType::get(CType<R>::get(c),
                                       {CType<Args>::get(c)...});
  }
};

using TypeBuilder = LLVM::LLVMFunctionType (*)(MLIRContext *);

const llvm::StringMap<TypeBuilder> &getCallableFunctions() {
  static const llvm::StringMap<TypeBuilder> functions = {
#define ZRT_KERNEL(name, impl, ret, params, args)                              \
  {#name, &CFunction<decltype(name)>::get},
#define ZRT_CTX(name, ret, params) {#name, &CFunction<decltype(name)>::get},
#include "zero_rt/abi.def"
  };
  return functions;
}

} // namespace

LLVM::LLVMFunctionType mlir::zero::getRuntimeFunctionType(MLIRContext *context,
                                                          StringRef name) {
  const llvm::StringMap<TypeBuilder> &functions = getCallableFunctions();
  auto it = functions.find(name);
  if (it == functions.end())
    return {};
  return it->second(context);
}

LLVM::LLVMStructType mlir::zero::getRuntimeStructType(MLIRContext *context,
                                                      StringRef name) {
  if (name != "zrt_attention_desc")
    return {};
  return LLVM::LLVMStructType::getLiteral(context, {
#define ZRT_ATTENTION_FIELD(type, field) CType<type>::get(context),
#include "zero_rt/attention.def"
                                                   });
}

FailureOr<Value> mlir::zero::RuntimeCallBuilder::call(
    OpBuilder &b, Location loc, StringRef name, ValueRange args,
    llvm::function_ref<InFlightDiagnostic()> emitError) {
  LLVM::LLVMFunctionType type = getRuntimeFunctionType(b.getContext(), name);
  if (!type) {
    emitError() << "calls '" << name
                << "', which the runtime's ABI table (zero_rt/abi.def) does "
                   "not list as callable from generated code";
    return failure();
  }
  if (type.getNumParams() != args.size()) {
    emitError() << "calls '" << name << "' with " << args.size()
                << " arguments; the runtime's ABI table has "
                << type.getNumParams();
    return failure();
  }
  for (auto [i, a] : llvm::enumerate(args))
    if (a.getType() != type.getParamType(i)) {
      emitError() << "calls '" << name << "' with " << a.getType()
                  << " as argument " << i << "; the runtime's ABI table has "
                  << type.getParamType(i);
      return failure();
    }
  LLVM::LLVMFuncOp &fn = decls[name];
  if (!fn) {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToEnd(module.getBody());
    fn = LLVM::LLVMFuncOp::create(b, loc, name, type);
  }
  auto c = LLVM::CallOp::create(b, loc, fn, args);
  if (isa<LLVM::LLVMVoidType>(type.getReturnType()))
    return Value();
  return c.getResult();
}
