//===- Pipeline.h - The zero-pipeline pass pipeline -------------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//
//
// zero-pipeline's options are generated (Pipeline.td, zero-tblgen) from the
// Option records of the passes it runs, so that each is declared once, in
// its pass's `options`: ZeroPipelineOptions has one option for each, and
// get<Pass>Options() fills that pass's generated options struct.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_PIPELINES_PIPELINE_H
#define ZERO_PIPELINES_PIPELINE_H

#include "zero/Dialect/Zero/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"

namespace mlir::zero {

#define GEN_PASS_PIPELINE_DECL
#include "zero/Pipelines/Pipeline.h.inc"

/// Adds the passes of zero-pipeline that follow autodiff and mixed
/// precision (partition to optimizer, and the verifier), with `options` and
/// no config file: the part the ZeRO configuration decides. zero-tune runs
/// it on clones of one differentiated step.
void buildZeroSchedulePipeline(OpPassManager &pm,
                               const ZeroPipelineOptions &options);

#define GEN_PASS_PIPELINE_REGISTRATION
#include "zero/Pipelines/Pipeline.h.inc"

} // namespace mlir::zero

#endif // ZERO_PIPELINES_PIPELINE_H
