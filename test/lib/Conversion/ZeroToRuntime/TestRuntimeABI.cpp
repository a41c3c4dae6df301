//===- TestRuntimeABI.cpp - Runtime calls with the types a test chooses ---===//
//
// Part of the zero-mlir project.
//
// The lowering builds every runtime call in C++ with fixed types, so no input
// of convert-zero-to-runtime reaches RuntimeCallBuilder's checks against the
// runtime's ABI table. This pass builds the calls a test names, with the
// argument types it chooses.
//
//===----------------------------------------------------------------------===//

#include "zero/Conversion/ZeroToRuntime.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Pass/Pass.h"

using namespace mlir;

namespace {

/// The attribute of an llvm.func that names the runtime function to call.
constexpr StringLiteral kRuntimeCallAttr = "test.runtime_call";

/// Calls, at the start of every llvm.func that carries `test.runtime_call`,
/// the runtime function it names with the llvm.func's arguments.
struct TestRuntimeABIPass
    : public PassWrapper<TestRuntimeABIPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(TestRuntimeABIPass)

  StringRef getArgument() const final { return "test-zero-runtime-abi"; }
  StringRef getDescription() const final {
    return "Call the runtime function that an llvm.func names in "
           "`test.runtime_call` with its arguments, through the lowering's "
           "checks against the runtime's ABI table";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<LLVM::LLVMDialect>();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    zero::RuntimeCallBuilder calls(module);
    OpBuilder b(module.getContext());
    bool anyFailed = false;
    // The calls declare runtime functions in the module: walk a copy.
    SmallVector<LLVM::LLVMFuncOp> funcs(module.getOps<LLVM::LLVMFuncOp>());
    for (LLVM::LLVMFuncOp func : funcs) {
      Attribute attr = func->getAttr(kRuntimeCallAttr);
      if (!attr)
        continue;
      auto callee = dyn_cast<StringAttr>(attr);
      if (!callee) {
        func.emitOpError() << "expects '" << kRuntimeCallAttr
                           << "' to be a string, got " << attr;
        anyFailed = true;
        continue;
      }
      if (func.isExternal()) {
        func.emitOpError() << "has no body to call '" << callee.getValue()
                           << "' from";
        anyFailed = true;
        continue;
      }
      b.setInsertionPointToStart(&func.getBody().front());
      if (failed(calls.call(b, func.getLoc(), callee.getValue(),
                            func.getArguments(),
                            [&] { return func.emitOpError(); })))
        anyFailed = true;
    }
    if (anyFailed)
      signalPassFailure();
  }
};

} // namespace

namespace mlir::zero::test {
void registerTestRuntimeABIPass() { PassRegistration<TestRuntimeABIPass>(); }
} // namespace mlir::zero::test
