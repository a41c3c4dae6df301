//===- ApplyDeepSpeedConfig.h - The ds_config pass's members ----*- C++ -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//
//
// Private to lib/Pipelines: the pass that applies a ds_config, whose
// members are in three files: ApplyDeepSpeedConfig.cpp (the pass, and
// what it writes into the train steps), ApplyDeepSpeedConfigResolve.cpp
// (what the file leaves to the train steps) and
// ApplyDeepSpeedConfigChecks.cpp (DeepSpeed's rules for the options it
// resolved).
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_LIB_PIPELINES_APPLYDEEPSPEEDCONFIG_H
#define ZERO_LIB_PIPELINES_APPLYDEEPSPEEDCONFIG_H

#include "zero/Dialect/Zero/IR/ZeroDialect.h"
#include "zero/Pipelines/DeepSpeedConfig.h"
#include "zero/Pipelines/Elasticity.h"

#include "DeepSpeedJson.h"
#include "PipelineDetail.h"

#include "mlir/Pass/Pass.h"

#include <memory>
#include <optional>
#include <string>

namespace mlir::zero::pipeline {

inline std::string formatValue(double v) {
  return deepspeed::formatDeepSpeedNumber(v);
}
inline std::string formatValue(int64_t v) { return std::to_string(v); }
inline std::string formatValue(bool v) { return v ? "true" : "false"; }

/// Reports the config's diagnostics, resolves what it leaves to the train
/// steps, writes its optimizer and precision settings into them and runs
/// the passes of the pipeline. Created only by zero-pipeline, which read
/// the file when the pipeline was built.
struct ApplyDeepSpeedConfigPass
    : public PassWrapper<ApplyDeepSpeedConfigPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(ApplyDeepSpeedConfigPass)

  ApplyDeepSpeedConfigPass(std::shared_ptr<const DeepSpeedConfig> cfg,
                           const ZeroPipelineOptions &options,
                           AddPipelinePasses addPasses)
      : cfg(std::move(cfg)), given(copyOptions(options)), addPasses(addPasses) {
  }

  StringRef getArgument() const override { return "zero-apply-ds-config"; }
  StringRef getDescription() const override {
    return "Apply a DeepSpeed config to the train steps and run the ZeRO "
           "passes (zero-pipeline)";
  }

  void getDependentDialects(DialectRegistry &registry) const override;
  std::unique_ptr<ZeroPipelineOptions> withFile() const;
  std::optional<int64_t> getRematBlocks() const;
  void runOnOperation() override;

  //===--------------------------------------------------------------------===//
  // Diagnostics at the file's places
  //===--------------------------------------------------------------------===//

  template <typename T>
  Location locOf(const DeepSpeedValue<T> &v) {
    return locAt(v.line, v.column);
  }
  Location locAt(unsigned line, unsigned column) {
    if (line == 0)
      return getOperation().getLoc();
    return FileLineColLoc::get(&getContext(), cfg->path, line, column);
  }

  void emitAt(const DeepSpeedConfig::Diagnostic &d, DiagnosticSeverity sev) {
    Location loc = locAt(d.line, d.column);
    InFlightDiagnostic diag = sev == DiagnosticSeverity::Error
                                  ? mlir::emitError(loc)
                                  : mlir::emitWarning(loc);
    if (d.line == 0)
      diag << cfg->path << ": ";
    diag << d.message;
  }

  template <typename T>
  InFlightDiagnostic errorAt(const DeepSpeedValue<T> &v) {
    InFlightDiagnostic d = mlir::emitError(locOf(v));
    if (v.line == 0)
      d << cfg->path << ": ";
    return d;
  }

  /// Says once what an "auto" became, at its place in the file.
  template <typename T, typename U>
  void resolved(const DeepSpeedValue<T> &v, StringRef key, U value,
                const Twine &why) {
    mlir::emitRemark(locOf(v)) << "\"auto\" resolved: " << key << " = "
                               << formatValue(value) << " (" << why << ")";
  }

  //===--------------------------------------------------------------------===//
  // Resolution (ApplyDeepSpeedConfigResolve.cpp)
  //===--------------------------------------------------------------------===//

  int64_t dataParallelRanks(const ZeroPipelineOptions &s);
  LogicalResult checkSequenceParallel(const ZeroPipelineOptions &s);
  LogicalResult resolveBatch(ArrayRef<TrainStepOp> steps,
                             ZeroPipelineOptions &s);
  FailureOr<int64_t> sharedGlobalBatch(ArrayRef<TrainStepOp> steps);
  LogicalResult checkTrainBatch(int64_t batch, TrainStepOp step);
  LogicalResult takeSplit(BatchSplit split, int64_t batch, int64_t world,
                          Location loc, StringRef why, ZeroPipelineOptions &s);
  LogicalResult resolveElasticMicroBatch(ArrayRef<TrainStepOp> steps,
                                         ZeroPipelineOptions &s);
  LogicalResult resolveElasticity(ArrayRef<TrainStepOp> steps,
                                  ZeroPipelineOptions &s);
  LogicalResult resolveSizes(ModuleOp module, ZeroPipelineOptions &s);
  LogicalResult resolvePrecision(TrainStepOp step, ZeroPipelineOptions &s);
  void resolveOptimizer(TrainStepOp step, ZeroPipelineOptions &s);
  LrScheduleAttr resolveSchedule(TrainStepOp step);

  //===--------------------------------------------------------------------===//
  // DeepSpeed's rules (ApplyDeepSpeedConfigChecks.cpp)
  //===--------------------------------------------------------------------===//

  LogicalResult checkOffload(const ZeroPipelineOptions &s);
  LogicalResult checkMuonGroupLayers(ModuleOp module,
                                     const ZeroPipelineOptions &s);
  LogicalResult checkOptimizerKeys(TrainStepOp step,
                                   const ZeroPipelineOptions &s);
  LogicalResult checkHpz(const ZeroPipelineOptions &s);
  LogicalResult checkQuantizedGradients(const ZeroPipelineOptions &s);
  LogicalResult checkMics(const ZeroPipelineOptions &s);

  //===--------------------------------------------------------------------===//
  // The train step's attributes
  //===--------------------------------------------------------------------===//

  /// Sets `field` of `result` to the file's value `v`, if it gives one,
  /// after `make` has checked that value alone in `original` (the
  /// attributes' verifiers check each parameter by itself), so that an
  /// error names the place of the value that is wrong.
  template <typename Params, typename Field, typename T, typename Make>
  bool take(const DeepSpeedValue<T> &v, const Params &original, Params &result,
            Field Params::*field, Make make) {
    if (!v.value)
      return true;
    Params alone = original;
    alone.*field = Field(*v.value);
    if (!make([&] { return errorAt(v); }, alone))
      return false;
    result.*field = Field(*v.value);
    return true;
  }

  /// As `take`, for the optimizer hyper-parameter `name` (a
  /// ZRT_HYPER_PARAM row) of `Params::params`.
  template <typename Params, typename T, typename Make>
  bool takeParam(const DeepSpeedValue<T> &v, const Params &original,
                 Params &result, StringRef name, Make make) {
    if (!v.value)
      return true;
    Params alone = original;
    alone.params.set(name, double(*v.value));
    if (!make([&] { return errorAt(v); }, alone))
      return false;
    result.params.set(name, double(*v.value));
    return true;
  }

  LogicalResult apply(TrainStepOp step);

  std::shared_ptr<const DeepSpeedConfig> cfg;
  /// The options given explicitly: they win over the file.
  std::shared_ptr<const ZeroPipelineOptions> given;
  /// zero-pipeline's passes, run with the resolved options.
  AddPipelinePasses addPasses;
  /// The precision the file asks for, if any.
  std::optional<PrecisionKind> dtype;
  /// The file's learning-rate schedule, if it has a `scheduler`.
  LrScheduleAttr schedule;
};

} // namespace mlir::zero::pipeline

#endif // ZERO_LIB_PIPELINES_APPLYDEEPSPEEDCONFIG_H
