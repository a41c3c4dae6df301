//===- Pipeline.h - The zero-pipeline pass pipeline -------------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_PIPELINES_PIPELINE_H
#define ZERO_PIPELINES_PIPELINE_H

#include "zero/Pipelines/PipelineOptions.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

namespace mlir::zero {

/// Adds the passes of zero-pipeline to `pm`.
void buildZeroPipeline(OpPassManager &pm, const ZeroPipelineOptions &options);

/// Adds the vocabulary padding zero-pipeline starts with, if `options` ask
/// for any: pad-vocab, or the cuda target's multiple of 64 rows for a 16-bit
/// step whose loss is not chunked. zero-estimate and zero-tune count and
/// search the padded model that zero-compile --target cuda will train.
void addPadVocabPass(OpPassManager &pm, const ZeroPipelineOptions &options);

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
