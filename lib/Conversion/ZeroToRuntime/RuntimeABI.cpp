//===- RuntimeABI.cpp - LLVM types of the runtime's C entry points --------===//
//
// Part of the zero-mlir project.
//
// The lowering declares every runtime function with the LLVM type derived
// here from the C prototype in the runtime's own ABI table, so a call whose
// arguments disagree with the runtime is a compile-time error, not memory
// corruption at run time.
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
