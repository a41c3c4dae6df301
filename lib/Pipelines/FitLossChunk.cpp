//===- FitLossChunk.cpp - zero-pipeline's loss chunk under a budget -------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/IR/ZeroDialect.h"
#include "zero/Dialect/Zero/Transforms/LossChunk.h"

#include "PipelineDetail.h"

#include "mlir/IR/Diagnostics.h"

using namespace mlir;
using namespace mlir::zero;
using namespace mlir::zero::pipeline;

namespace {

/// A diagnostic of a pipeline run on a copy, to be reported for the module
/// once the run is chosen.
struct HeldDiagnostic {
  Location loc;
  DiagnosticSeverity severity;
  std::string message;
};

/// With a memory budget and no loss-chunk given, computes the loss in chunks
/// (zero-loss-chunk) only when the plan needs it to fit: the rest of
/// zero-pipeline runs on a copy of the module with the logits whole; if no
/// plan fits, on another with the loss in the chunks getDefaultLossChunk
/// gives the micro batch's rows; the first that succeeds replaces the
/// module's contents. When neither does, the pipeline with the logits whole
/// runs on the module itself, so that its error is the one reported.
/// Created only by zero-pipeline.
struct FitLossChunkPass
    : public PassWrapper<FitLossChunkPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(FitLossChunkPass)

  FitLossChunkPass(const ZeroPipelineOptions &options,
                   std::optional<int64_t> rematBlocks,
                   AddPipelinePasses addPasses)
      : options(copyOptions(options)), rematBlocks(rematBlocks),
        addPasses(addPasses) {}

  StringRef getArgument() const override { return "zero-fit-loss-chunk"; }
  StringRef getDescription() const override {
    return "Compute the loss in chunks when the memory budget needs it "
           "(zero-pipeline)";
  }

  void getDependentDialects(DialectRegistry &registry) const override {
    OpPassManager pm(ModuleOp::getOperationName());
    addPasses(pm, *withChunk(1), rematBlocks);
    pm.getDependentDialects(registry);
  }

  /// The pipeline's options with loss-chunk given as `chunk`.
  std::unique_ptr<ZeroPipelineOptions> withChunk(int64_t chunk) const {
    std::unique_ptr<ZeroPipelineOptions> o = copyOptions(*options);
    o->lossChunk = chunk;
    return o;
  }

  /// The module scheduled on a copy with loss chunk `chunk` (0: the logits
  /// whole), or null; its diagnostics are held in `held`.
  OwningOpRef<ModuleOp> attempt(int64_t chunk,
                                SmallVectorImpl<HeldDiagnostic> &held) {
    OwningOpRef<ModuleOp> copy = getOperation().clone();
    PassManager pm(&getContext(), ModuleOp::getOperationName());
    addPasses(pm, *withChunk(chunk), rematBlocks);
    ScopedDiagnosticHandler hold(&getContext(), [&](Diagnostic &d) {
      held.push_back({d.getLocation(), d.getSeverity(), d.str()});
      return success();
    });
    if (failed(pm.run(*copy)))
      return nullptr;
    return copy;
  }

  /// The chunk of the micro batch's rows, when the one train step's loss
  /// can be fused with its head.
  std::optional<int64_t> getChunk() {
    auto steps = getOperation().getOps<TrainStepOp>();
    if (steps.empty() || std::next(steps.begin()) != steps.end())
      return std::nullopt;
    ScopedDiagnosticHandler quiet(&getContext(),
                                  [](Diagnostic &) { return success(); });
    FailureOr<LossHead> head = matchLossHead(*steps.begin());
    if (failed(head))
      return std::nullopt;
    int64_t rows = head->rows /
                   std::max<int64_t>(1, options->worldSize *
                                            options->gradientAccumulationSteps);
    int64_t chunk = getDefaultLossChunk(rows, *head);
    // One chunk as large as the rows is the logits whole.
    if (chunk >= rows)
      return std::nullopt;
    return chunk;
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<HeldDiagnostic> whole, chunked;
    OwningOpRef<ModuleOp> scheduled = attempt(0, whole);
    std::optional<int64_t> chunk;
    if (!scheduled) {
      chunk = getChunk();
      if (chunk)
        scheduled = attempt(*chunk, chunked);
    }
    if (!scheduled) {
      OpPassManager pm(ModuleOp::getOperationName());
      addPasses(pm, *withChunk(0), rematBlocks);
      if (failed(runPipeline(pm, module))) {
        // What the chunk tried needed, beside the whole logits' error.
        for (const HeldDiagnostic &d : chunked)
          if (d.severity == DiagnosticSeverity::Error)
            mlir::emitRemark(d.loc)
                << "with the output projection and the loss in chunks of "
                << *chunk << " rows (zero-loss-chunk): " << d.message;
        return signalPassFailure();
      }
      // Neither copy succeeded but the module did: not expected, and then
      // its own result stands.
      return;
    }
    Block *body = module.getBody();
    body->clear();
    body->getOperations().splice(body->end(),
                                 scheduled->getBody()->getOperations());
    for (const HeldDiagnostic &d : scheduled &&chunk ? chunked : whole) {
      InFlightDiagnostic out =
          getContext().getDiagEngine().emit(d.loc, d.severity);
      out << d.message;
    }
    if (chunk)
      mlir::emitRemark(module.getLoc())
          << "memory budget " << options->memoryBudget.getValue()
          << ": the output projection and the loss in chunks of " << *chunk
          << " rows (zero-loss-chunk), without which no plan fits";
  }

  std::shared_ptr<const ZeroPipelineOptions> options;
  std::optional<int64_t> rematBlocks;
  AddPipelinePasses addPasses;
};

} // namespace

std::unique_ptr<Pass>
pipeline::createFitLossChunkPass(const ZeroPipelineOptions &options,
                                 std::optional<int64_t> rematBlocks,
                                 AddPipelinePasses addPasses) {
  return std::make_unique<FitLossChunkPass>(options, rematBlocks, addPasses);
}
