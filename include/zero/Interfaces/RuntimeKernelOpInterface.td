//===- RuntimeKernelOpInterface.td - An op's runtime kernel -*- tablegen -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_INTERFACES_RUNTIMEKERNELOPINTERFACE
#define ZERO_INTERFACES_RUNTIMEKERNELOPINTERFACE

include "mlir/IR/OpBase.td"

def RuntimeKernelOpInterface : OpInterface<"RuntimeKernelOpInterface"> {
  let cppNamespace = "::mlir::zero";
  let description = [{
    What the runtime does for one compute op: the kernel it calls (and with
    which arguments), the heap scratch that kernel allocates, and its work.
    The lowering (`convert-zero-to-runtime`), the memory planner and the cost
    model ask the op through this interface instead of switching over op
    kinds, so adding an op means writing its model once.

    The compute dialect stays free of the runtime: the models are external
    models that `registerRuntimeKernelModels` (ZeroToRuntime) attaches, as
    upstream attaches `BufferizableOpInterface`. A consumer that meets a
    compute op without a model reports it by name.

    `buildKernelCall` emits the call through a `KernelCallBuilder`, which
    hands out the pointers of the op's operand and result buffers and checks
    the call against the runtime's ABI table (`zero_rt/abi.def`).
    `getKernelScratchBytes` must equal what the kernel allocates (the
    runtime's `zero_rt/scratch.h`): the planned peak includes it.
  }];
  let methods = [
    InterfaceMethod<
      "Emit the runtime call computing the op's results.",
      "::llvm::LogicalResult", "buildKernelCall",
      (ins "::mlir::zero::KernelCallBuilder &":$builder)>,
    InterfaceMethod<
      "Bytes of heap scratch the kernel allocates while it runs.",
      "int64_t", "getKernelScratchBytes", (ins), [{}],
      /*defaultImplementation=*/[{ return 0; }]>,
    InterfaceMethod<
      "The kernel's work (bytes moved, FLOPs, kind) for the cost model.",
      "::mlir::zero::KernelCost", "getKernelCost", (ins), [{}],
      /*defaultImplementation=*/[{
        return ::mlir::zero::KernelCost::memory(
            ::mlir::zero::getOperandAndResultBytes($_op));
      }]>,
  ];
}

#endif // ZERO_INTERFACES_RUNTIMEKERNELOPINTERFACE
