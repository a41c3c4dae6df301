//===- PipelineDetail.h - zero-pipeline's builders and passes ---*- C++ -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//
//
// Private to lib/Pipelines: how zero-pipeline adds its passes
// (Pipeline.cpp), and the two passes only it creates, the memory-budget
// search (FitMemoryBudget.cpp) and the resolution of a ds_config against
// the train steps (ApplyDeepSpeedConfig.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_LIB_PIPELINES_PIPELINEDETAIL_H
#define ZERO_LIB_PIPELINES_PIPELINEDETAIL_H

#include "zero/Pipelines/Pipeline.h"

#include <memory>
#include <optional>

namespace mlir::zero::pipeline {

/// A copy of `options` (PassOptions cannot be copied), with the marks of
/// the options given explicitly.
std::unique_ptr<ZeroPipelineOptions>
copyOptions(const ZeroPipelineOptions &options);

/// What zero-remat recomputes: `layer` on blocks [0, layerBlocks), then
/// `selective` on the next `selectiveBlocks` (early blocks first: their
/// activations live longest).
struct RematChoice {
  int64_t layerBlocks = 0, selectiveBlocks = 0;
};

/// zero-remat as `remat` says, then partition, gradient sync, gathers,
/// prefetch (stage 3) and the optimizer.
void addZeroPasses(OpPassManager &pm, const ZeroPipelineOptions &o,
                   const RematChoice &remat);

/// The passes after mixed precision, what the ZeRO options decide:
/// zero-remat (on the first `rematBlocks` blocks, when given: a ds_config's
/// activation_checkpointing.number_checkpoints) and partition to optimizer,
/// or the memory-budget search over them, then the verifier.
void addSchedulePasses(OpPassManager &pm, const ZeroPipelineOptions &o,
                       std::optional<int64_t> rematBlocks);

/// zero-pipeline's passes with the options `o` (a ds_config's resolved):
/// zero-pad-vocab, autodiff, mixed precision and addSchedulePasses.
void addPasses(OpPassManager &pm, const ZeroPipelineOptions &o,
               std::optional<int64_t> rematBlocks);

/// The memory-budget search over the passes from zero-remat on (with
/// memory-budget or remat=auto); `rematBlocks` limits the remat policy
/// given to the first blocks.
std::unique_ptr<Pass>
createFitMemoryBudgetPass(const ZeroPipelineOptions &options,
                          std::optional<int64_t> rematBlocks);

/// Reads the ds_config file of `options` when created (its diagnostics are
/// reported when the pass runs), resolves it against the train steps and
/// runs addPasses with the options it gives.
std::unique_ptr<Pass>
createApplyDeepSpeedConfigPass(const ZeroPipelineOptions &options);

} // namespace mlir::zero::pipeline

#endif // ZERO_LIB_PIPELINES_PIPELINEDETAIL_H
