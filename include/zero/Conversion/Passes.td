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
    Replaces the model (`zero.param`, `zero.partition`) and its scheduled,
    planned `zero.train_step` by a `zero_program` (see
    `runtime/include/zero_rt/program.h`):

    * `zero_micro_step(ctx)`, `zero_boundary(ctx)` and `zero_eval_step(ctx)`:
      LLVM-dialect functions that run the step's ops in program order as
      calls of the runtime's kernels (`zrt_matmul`, `zrt_layer_norm`, ...)
      and context functions (`zrt_ctx_reduce_bucket`, `zrt_ctx_optimizer_step`, ...),
      each call's types checked against the runtime's ABI table (`abi.def`),
      with every buffer addressed by the offsets of the memory plan
      (`computeMemoryPlan`, recomputed here). Each op's phase
      (`StepPhaseOpInterface`) places it: `boundary` and `post_step` ops go
      to the boundary function, which runs once per optimizer step after
      the last micro step; the others run in every micro step, except that
      `last_micro_step` and `first_micro_step` ops are guarded by the
      runtime's flag of the last or first micro step
      (`zrt_ctx_last_micro_step`, `zrt_ctx_first_micro_step`). The
      evaluation step is the forward cut at the loss (`getEvaluationOps`),
      with the same calls;
    * with a `zero.count_labels`, `zero_count_labels(ctx)`: the ops that
      compute its labels (`getOpsComputing`), with the same calls, and
      `zrt_ctx_count_labels`, which the driver runs on each micro batch of
      an optimizer step before the first;
    * a JSON manifest with the layout (and which buffers live in host
      memory or on NVMe), the parameters and their initializers, the inputs,
      the optimizer, the loss scaler, the logging, the plan and its memory
      timeline, and the schedule hash every rank compares at start-up.

    Each op's call is preceded by `zrt_ctx_trace_op` and the
    `zrt_ctx_trace_live`/`_dead` calls of the step-arena bytes its plan
    begins and ends (no-ops unless the run traces its memory).

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
