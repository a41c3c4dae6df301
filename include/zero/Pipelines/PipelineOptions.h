//===- PipelineOptions.h - The options of zero-pipeline ---------*- C++ -*-===//
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

#ifndef ZERO_PIPELINES_PIPELINEOPTIONS_H
#define ZERO_PIPELINES_PIPELINEOPTIONS_H

#include "zero/Dialect/Zero/Transforms/Passes.h"

#include "mlir/Pass/PassOptions.h"

namespace mlir::zero {

#define GEN_PASS_PIPELINE_DECL
#include "zero/Pipelines/Pipeline.h.inc"

} // namespace mlir::zero

#endif // ZERO_PIPELINES_PIPELINEOPTIONS_H
