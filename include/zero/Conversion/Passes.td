//===- Passes.td - Conversions out of the zero dialects ----*- tablegen -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_CONVERSION_PASSES
#define ZERO_CONVERSION_PASSES

include "mlir/Pass/PassBase.td"

def ConvertZeroToRuntimePass : Pass<"convert-zero-to-runtime", "::mlir::ModuleOp"> {
  let summary = "Lower a scheduled train step to LLVM-dialect calls of the zrt_* runtime";
  let description = [{
    Replaces the model (`zero.param`, `zero.partition`) and its scheduled
    `zero.train_step` by a `zero_program` (see `runtime/include/zero_rt/program.h`):

    * `zero_micro_step(ctx)` and `zero_boundary(ctx)`: LLVM-dialect functions
      that run the step's ops in program order as calls of the runtime's
      kernels (`zrt_matmul`, `zrt_layer_norm`, ...) and context functions
      (`zrt_ctx_reduce_bucket`, `zrt_ctx_adam`, ...), with every buffer
      addressed by the offsets of the memory plan (`zero-plan-memory`'s
      algorithm, recomputed here); ops marked `zero.boundary` go to the
      boundary function, the others run once per micro step;
    * a JSON manifest with the layout, the parameters and their
      initializers, the inputs, the optimizer, the loss scaler and the plan,
      and the schedule hash every rank compares at start-up.

    Views (`nn.reshape`, `zero.get_param`) become pointers; `zero.free` and
    `zero.grad` of in-place gradients emit nothing.

    A phase longer than `max-function-ops` LLVM operations is split into
    internal functions `zero_micro_step_<k>(ctx, carry)` (and
    `zero_boundary_<k>`) of about that size, which the entry function calls
    in order: LLVM's register allocator is superlinear in the size of a
    function, so this keeps compile time linear in the step. Each function
    recomputes its pointers; `carry` passes the few other values a later
    function reads (the loss-scale skip flag). The calls run the same kernels
    in the same order.
  }];
  let options = [
    Option<"maxFunctionOps", "max-function-ops", "int64_t",
           /*default=*/"1000",
           "LLVM operations per function before a phase is continued in the "
           "next internal function (0: one function per phase)">,
  ];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

#endif // ZERO_CONVERSION_PASSES
