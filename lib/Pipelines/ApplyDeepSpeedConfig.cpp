//===- ApplyDeepSpeedConfig.cpp - A ds_config against the train steps ----===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//
//
// The options a ds_config file gives (DeepSpeedConfig.cpp reads it) are
// those not given explicitly; what the file leaves to the model ("auto",
// DeepSpeed's batch arithmetic) is resolved against the train steps, each
// resolved value said once as a remark at its place in the file, and the
// file's optimizer, precision and logging are written into the steps.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/IR/Optimizers.h"

#include "ApplyDeepSpeedConfig.h"

using namespace mlir;
using namespace mlir::zero;
using namespace mlir::zero::pipeline;

namespace {

/// Sets `option` to the file's value `v`, unless the option was given.
template <typename T, typename U>
void takeFromFile(mlir::detail::PassOptions::Option<T> &option,
                  const DeepSpeedValue<U> &v) {
  if (!option.hasValue() && v.value)
    option = static_cast<T>(*v.value);
}

} // namespace

void ApplyDeepSpeedConfigPass::getDependentDialects(
    DialectRegistry &registry) const {
  OpPassManager pm(ModuleOp::getOperationName());
  std::unique_ptr<ZeroPipelineOptions> s = withFile();
  s->stage = 3; // Every pass.
  addPasses(pm, *s, getRematBlocks());
  pm.getDependentDialects(registry);
}

/// The options given explicitly, else the file's values (before those
/// that depend on the train steps are resolved).
std::unique_ptr<ZeroPipelineOptions>
ApplyDeepSpeedConfigPass::withFile() const {
  std::unique_ptr<ZeroPipelineOptions> s = copyOptions(*given);
  takeFromFile(s->stage, cfg->stage);
  takeFromFile(s->reduceBucketSize, cfg->reduceBucketSize);
  takeFromFile(s->reduceScatter, cfg->reduceScatter);
  takeFromFile(s->overlapComm, cfg->overlapComm);
  // DeepSpeed's overlap_comm, absent, follows the stage
  // (overlap_comm_valid): on at stage 3 only.
  if (!cfg->path.empty() && !given->overlapComm.hasValue() &&
      !cfg->overlapComm.value)
    s->overlapComm = s->stage == 3;
  takeFromFile(s->contiguousGradients, cfg->contiguousGradients);
  takeFromFile(s->allgatherBucketSize, cfg->allgatherBucketSize);
  takeFromFile(s->paramPersistenceThreshold, cfg->paramPersistenceThreshold);
  takeFromFile(s->hpzPartitionSize, cfg->hpzPartitionSize);
  takeFromFile(s->maxReuseDistance, cfg->maxReuseDistance);
  takeFromFile(s->frozenGather, cfg->frozenGather);
  takeFromFile(s->lossChunk, cfg->lossChunk);
  takeFromFile(s->tiledMlp, cfg->tiledMlp);
  takeFromFile(s->optimizerStates, cfg->optimizerStates);
  if (!s->bf16Masters.hasValue() && cfg->bf16Masters.value)
    s->bf16Masters = std::string(*cfg->bf16Masters.value ? "true" : "false");
  takeFromFile(s->micsShardSize, cfg->micsShardSize);
  takeFromFile(s->spSize, cfg->sequenceParallelSize);
  takeFromFile(s->epSize, cfg->expertParallelSize);
  takeFromFile(s->epPlacement, cfg->expertPlacement);
  takeFromFile(s->quantizedWeights, cfg->quantizedWeights);
  takeFromFile(s->quantizedGradients, cfg->quantizedGradients);
  takeFromFile(s->prefetchBucketSize, cfg->prefetchBucketSize);
  takeFromFile(s->maxLiveParameters, cfg->maxLiveParameters);
  takeFromFile(s->gradientClipping, cfg->gradientClipping);
  takeFromFile(s->offloadOptimizer, cfg->offloadOptimizer);
  takeFromFile(s->offloadParam, cfg->offloadParam);
  // DeepSpeed reads nvme_path only for a device "nvme" (Hugging Face's
  // examples give one beside "cpu").
  auto onNvme = [](const DeepSpeedValue<std::string> &device) {
    return device.value == std::optional<std::string>("nvme");
  };
  if (onNvme(cfg->offloadOptimizer))
    takeFromFile(s->nvmePath, cfg->nvmePath);
  if (onNvme(cfg->offloadParam))
    takeFromFile(s->paramNvmePath, cfg->paramNvmePath);
  takeFromFile(s->nvmeBufferCount, cfg->optimizerBufferCount);
  takeFromFile(s->paramBufferCount, cfg->paramBufferCount);
  takeFromFile(s->paramBufferSize, cfg->paramBufferSize);
  if (!s->remat.hasValue() && cfg->remat)
    s->remat = *cfg->remat;
  takeFromFile(s->offloadActivations, cfg->offloadActivations);
  return s;
}

/// The blocks the remat policy covers: activation_checkpointing's
/// number_checkpoints, unless the remat option was given.
std::optional<int64_t> ApplyDeepSpeedConfigPass::getRematBlocks() const {
  if (given->remat.hasValue())
    return std::nullopt;
  return cfg->rematBlocks.value;
}

void ApplyDeepSpeedConfigPass::runOnOperation() {
  ModuleOp module = getOperation();
  for (const DeepSpeedConfig::Diagnostic &w : cfg->warnings)
    emitAt(w, DiagnosticSeverity::Warning);
  if (!cfg->unimplemented.empty()) {
    InFlightDiagnostic d = mlir::emitWarning(module.getLoc());
    d << cfg->path << ": not implemented, ignored: ";
    llvm::interleaveComma(cfg->unimplemented, d);
  }
  if (!cfg->errors.empty()) {
    for (const DeepSpeedConfig::Diagnostic &e : cfg->errors)
      emitAt(e, DiagnosticSeverity::Error);
    return signalPassFailure();
  }
  std::unique_ptr<ZeroPipelineOptions> options = withFile();
  ZeroPipelineOptions &s = *options;
  auto steps = llvm::to_vector(module.getOps<TrainStepOp>());
  if (!isKnownTarget(s.target)) {
    module.emitError("zero-pipeline: unknown target '")
        << s.target << "' (expected cpu or cuda)";
    return signalPassFailure();
  }
  if (failed(checkSequenceParallel(s)))
    return signalPassFailure();
  if (!steps.empty() &&
      (failed(resolveBatch(steps, s)) || failed(resolveSizes(module, s)) ||
       failed(resolvePrecision(steps.front(), s))))
    return signalPassFailure();
  if (failed(checkOffload(s)) || failed(checkHpz(s)) || failed(checkMics(s)) ||
      failed(checkQuantizedGradients(s)))
    return signalPassFailure();
  for (TrainStepOp step : steps)
    if (failed(checkOptimizerKeys(step, s)))
      return signalPassFailure();
  if (failed(checkMuonGroupLayers(module, s)))
    return signalPassFailure();
  if (!steps.empty()) {
    resolveOptimizer(steps.front(), s);
    if (cfg->schedulerType.value &&
        !(schedule = resolveSchedule(steps.front())))
      return signalPassFailure();
    for (TrainStepOp step : steps)
      if (failed(apply(step)))
        return signalPassFailure();
  }
  OpPassManager pm(ModuleOp::getOperationName());
  addPasses(pm, s, getRematBlocks());
  if (failed(runPipeline(pm, module)))
    return signalPassFailure();
}

/// Writes the file's optimizer, precision and logging into `step`.
LogicalResult ApplyDeepSpeedConfigPass::apply(TrainStepOp step) {
  MLIRContext *ctx = step.getContext();
  auto stepError = [&] { return step.emitOpError(); };
  OptimizerAttr opt = step.getOptimizer();
  struct OptParams {
    OptimizerKind kind;
    double lr;
    OptimizerParams params;
    StatePrecision states;
    LrScheduleAttr schedule;
    bool bf16Masters;
  } o{opt.getKind(),     opt.getLr().convertToDouble(),
      opt.getParams(),   opt.getStates(),
      opt.getSchedule(), opt.getBf16Masters()};
  auto makeOpt = [&](auto emitError, const OptParams &p) {
    return OptimizerAttr::getChecked(emitError, ctx, p.kind, p.lr, p.params,
                                     p.states, p.schedule, p.bf16Masters);
  };
  // The file's optimizer, and the train step's values of what it does not
  // read (Lion's eps and bias_correction, SGD's betas, Adam's momentum)
  // back at their defaults, before each of the file's values is checked
  // on it.
  if (cfg->optimizer.value)
    if (std::optional<OptimizerKind> kind =
            symbolizeOptimizerKind(*cfg->optimizer.value))
      o.kind = *kind;
  for (StringRef name : getOptimizerHyperParams())
    if (!hasOptimizerParam(o.kind, name))
      o.params.reset(name);
  // The class the file names defaults otherwise than the train step for
  // what the file leaves out (the table's ZRT_OPTIMIZER_DS_DEFAULT rows):
  // torch.optim.Adafactor, and DeepSpeed's MuonWithAuxAdam. Their other
  // parameters start at #zero.optimizer's defaults.
  auto dsDefault = [&](StringRef name) {
    return *getDeepSpeedOptimizerDefault(o.kind, name);
  };
  bool fileAdafactor =
      cfg->optimizer.value && o.kind == OptimizerKind::adafactor;
  if (fileAdafactor) {
    o.lr = dsDefault("lr");
    o.params.weight_decay = dsDefault("weight_decay");
    for (StringRef name : {"beta2_decay", "eps1", "eps2", "d", "maximize"})
      o.params.reset(name);
  }
  bool fileMuon = cfg->optimizer.value && o.kind == OptimizerKind::muon;
  if (fileMuon) {
    o.lr = dsDefault("lr");
    o.params.muon_lr = dsDefault("muon_lr");
    o.params.reset("muon_momentum");
    o.params.reset("beta1");
    o.params.beta2 = dsDefault("beta2");
    o.params.eps = dsDefault("eps");
    o.params.weight_decay = 0.0;
  }
  OptParams newOpt = o;
  auto takeRow = [&](const auto &v, StringRef name, const OptParams &from) {
    return takeParam(v, from, newOpt, name, makeOpt);
  };
  bool ok = take(cfg->lr, o, newOpt, &OptParams::lr, makeOpt);
  if (fileMuon) {
    // `lr` is both halves'; muon_lr and adam_lr override it for theirs.
    ok &= takeRow(cfg->lr, "muon_lr", o);
    ok &= takeRow(cfg->muonLr, "muon_lr", o);
    ok &= take(cfg->adamLr, o, newOpt, &OptParams::lr, makeOpt);
    ok &= takeRow(cfg->muonMomentum, "muon_momentum", o);
  }
  ok &= takeRow(cfg->beta2Decay, "beta2_decay", o);
  ok &= takeRow(cfg->eps1, "eps1", o);
  ok &= takeRow(cfg->eps2, "eps2", o);
  ok &= takeRow(cfg->d, "d", o);
  ok &= takeRow(cfg->maximize, "maximize", o);
  ok &= takeRow(cfg->beta1, "beta1", o);
  ok &= takeRow(cfg->beta2, "beta2", o);
  ok &= takeRow(cfg->eps, "eps", o);
  ok &= takeRow(cfg->weightDecay, "weight_decay", o);
  ok &= takeRow(cfg->biasCorrection, "bias_correction", o);
  ok &= takeRow(cfg->momentum, "momentum", o);
  ok &= takeRow(cfg->dampening, "dampening", o);
  // The rows whose keys the reader takes by their type alone.
  for (const auto &[name, v] : cfg->hyperParams)
    ok &= takeRow(v, name, o);
  // Nesterov is checked with the file's momentum and dampening (it needs
  // a momentum and no dampening).
  ok &= takeRow(cfg->nesterov, "nesterov", OptParams(newOpt));
  if (schedule)
    newOpt.schedule = schedule;

  PrecisionAttr prec = step.getPrecision();
  struct PrecParams {
    PrecisionKind kind;
    int64_t initialScalePower, lossScaleWindow, hysteresis;
    APFloat minLossScale, lossScale;
  } p{dtype.value_or(prec.getKind()), prec.getInitialScalePower(),
      prec.getLossScaleWindow(),      prec.getHysteresis(),
      prec.getMinLossScale(),         prec.getLossScale()};
  auto makePrec = [&](auto emitError, const PrecParams &q) {
    return PrecisionAttr::getChecked(emitError, ctx, q.kind,
                                     q.initialScalePower, q.lossScaleWindow,
                                     q.hysteresis, q.minLossScale, q.lossScale);
  };
  PrecParams newPrec = p;
  ok &= take(cfg->initialScalePower, p, newPrec, &PrecParams::initialScalePower,
             makePrec);
  ok &= take(cfg->lossScaleWindow, p, newPrec, &PrecParams::lossScaleWindow,
             makePrec);
  ok &= take(cfg->hysteresis, p, newPrec, &PrecParams::hysteresis, makePrec);
  ok &=
      take(cfg->minLossScale, p, newPrec, &PrecParams::minLossScale, makePrec);
  ok &= take(cfg->lossScale, p, newPrec, &PrecParams::lossScale, makePrec);
  if (!ok)
    return failure();

  step.setOptimizerAttr(makeOpt(stepError, newOpt));
  step.setPrecisionAttr(makePrec(stepError, newPrec));
  if (cfg->stepsPerPrint.value || cfg->wallClockBreakdown.value)
    ctx->getLoadedDialect<ZeroDialect>()->getLoggingAttrHelper().setAttr(
        step, LoggingAttr::get(ctx, cfg->stepsPerPrint.value.value_or(1),
                               cfg->wallClockBreakdown.value.value_or(false)));
  return success();
}

std::unique_ptr<Pass>
pipeline::createApplyDeepSpeedConfigPass(const ZeroPipelineOptions &options,
                                         AddPipelinePasses addPasses) {
  return std::make_unique<ApplyDeepSpeedConfigPass>(
      std::make_shared<DeepSpeedConfig>(
          options.config.empty() ? DeepSpeedConfig()
                                 : parseDeepSpeedConfig(options.config)),
      options, addPasses);
}
