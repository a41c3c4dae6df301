//===- PipelineDetail.h - The passes only zero-pipeline creates -*- C++ -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//
//
// Private to lib/Pipelines: the passes that zero-pipeline (Pipeline.cpp)
// creates and that run some of its passes themselves, which Pipeline.cpp
// hands them: the memory-budget search (FitMemoryBudget.cpp), the loss in
// chunks when the budget needs it (FitLossChunk.cpp) and the resolution of
// a ds_config against the train steps (ApplyDeepSpeedConfig.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_LIB_PIPELINES_PIPELINEDETAIL_H
#define ZERO_LIB_PIPELINES_PIPELINEDETAIL_H

#include "zero/Pipelines/PipelineOptions.h"

#include "mlir/Pass/PassManager.h"

#include <memory>
#include <optional>

namespace mlir::zero::pipeline {

/// A copy of `options` (PassOptions cannot be copied), with the marks of
/// the options given explicitly.
inline std::unique_ptr<ZeroPipelineOptions>
copyOptions(const ZeroPipelineOptions &options) {
  auto copy = std::make_unique<ZeroPipelineOptions>();
  copy->copyOptionValuesFrom(options);
  return copy;
}

/// Whether `target` names a runtime backend (zero-pipeline's `target`).
inline bool isKnownTarget(StringRef target) {
  return target == "cpu" || target == "cuda";
}

/// What zero-remat recomputes: `layer` on blocks [0, layerBlocks), then
/// `selective` on the next `selectiveBlocks`, then `op` on the next
/// `opBlocks` (early blocks first: their activations live longest).
struct RematChoice {
  int64_t layerBlocks = 0, selectiveBlocks = 0, opBlocks = 0;
};

/// Adds zero-remat as `remat` says, then partition to optimizer.
using AddZeroPasses = void (*)(OpPassManager &pm, const ZeroPipelineOptions &o,
                               const RematChoice &remat);

/// Adds all of zero-pipeline's passes, zero-remat on the first `rematBlocks`
/// blocks when given.
using AddPipelinePasses = void (*)(OpPassManager &pm,
                                   const ZeroPipelineOptions &o,
                                   std::optional<int64_t> rematBlocks);

/// The memory-budget search (with memory-budget or remat=auto): each
/// candidate schedules a copy of the module with `addZeroPasses`;
/// `rematBlocks` limits the remat policy given to the first blocks.
std::unique_ptr<Pass>
createFitMemoryBudgetPass(const ZeroPipelineOptions &options,
                          std::optional<int64_t> rematBlocks,
                          AddZeroPasses addZeroPasses);

/// With memory-budget and no loss-chunk given: `addPasses` with the logits
/// whole on a copy of the module, and when no plan fits, with the loss in
/// chunks (getDefaultLossChunk); the first that succeeds is the module.
std::unique_ptr<Pass> createFitLossChunkPass(const ZeroPipelineOptions &options,
                                             std::optional<int64_t> rematBlocks,
                                             AddPipelinePasses addPasses);

/// Reads the ds_config file of `options` when created (its diagnostics are
/// reported when the pass runs), resolves it against the train steps and
/// runs `addPasses` with the options it gives.
std::unique_ptr<Pass>
createApplyDeepSpeedConfigPass(const ZeroPipelineOptions &options,
                               AddPipelinePasses addPasses);

} // namespace mlir::zero::pipeline

#endif // ZERO_LIB_PIPELINES_PIPELINEDETAIL_H
