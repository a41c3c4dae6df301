//===- RuntimeCollectiveOpInterface.td - Runtime calls -----*- tablegen -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_INTERFACES_RUNTIMECOLLECTIVEOPINTERFACE
#define ZERO_INTERFACES_RUNTIMECOLLECTIVEOPINTERFACE

include "mlir/IR/OpBase.td"

def RuntimeCollectiveOpInterface
    : OpInterface<"RuntimeCollectiveOpInterface"> {
  let cppNamespace = "::mlir::zero";
  let description = [{
    The `zrt_ctx_*` call (or calls) the runtime makes for one collective of
    the `zero` dialect, or for an op of a collective variant (hpZ's
    `zero.store_secondary`). `convert-zero-to-runtime` asks the op through
    this interface instead of switching over collectives, so a new
    collective or variant writes its lowering once, beside the others.

    The dialect stays free of the runtime: the models are external models
    that `registerRuntimeCollectiveModels` (ZeroToRuntime,
    `CollectiveModels.cpp`) attaches, as the compute ops'
    `RuntimeKernelOpInterface` models are. What the op moves, in flight and
    to its completion (its buffers, its staging, its token) is the dialect's
    `CollectiveOpInterface`; this is only the call.

    `buildCollectiveCall` emits the call through a `CollectiveCallBuilder`,
    which hands out the planned pointers, the op's temporary in the step
    arena, partition indices and token slots, and checks each call against
    the runtime's ABI table (`zero_rt/abi.def`).
  }];
  let methods = [
    InterfaceMethod<
      "Emit the runtime call(s) of the collective.",
      "::llvm::LogicalResult", "buildCollectiveCall",
      (ins "::mlir::zero::CollectiveCallBuilder &":$builder)>,
  ];
}

#endif // ZERO_INTERFACES_RUNTIMECOLLECTIVEOPINTERFACE
