//===- ApplyDeepSpeedConfigChecks.cpp - DeepSpeed's rules for a ds_config -===//
//
// Part of the zero-mlir project.
//
// The file's offload, hpZ, MiCS, qgZ, optimizer and Muon keys against
// DeepSpeed's rules and what is implemented, each error at its place in
// the file.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/IR/OptimizerRules.h"
#include "zero/Dialect/Zero/IR/Optimizers.h"
#include "zero/Pipelines/DeepSpeedKeys.h"

#include "ApplyDeepSpeedConfig.h"

#include "zero_rt/variants.h"

using namespace mlir;
using namespace mlir::zero;
using namespace mlir::zero::pipeline;

/// What DeepSpeed's rules for the collective variants (zero_rt/variants.h)
/// read, from the options the file resolved into.
static zrt_variant_config variantsOf(const ZeroPipelineOptions &s) {
  zrt_variant_config v = {};
  v.stage = s.stage;
  v.world_size = s.worldSize;
  v.hpz_partition_size = s.hpzPartitionSize;
  v.mics_shard_size = s.micsShardSize;
  v.quantized_weights = s.quantizedWeights;
  v.quantized_gradients = s.quantizedGradients;
  v.reduce_scatter = s.reduceScatter;
  v.offload_param = s.offloadParam.getValue() != "none";
  v.offload_optimizer = s.offloadOptimizer.getValue() != "none";
  return v;
}

/// The file's offload choices against the stage (DeepSpeed's rules) and
/// what is implemented, at their places in the file. Options given
/// explicitly are checked by zero-optimizer.
LogicalResult
ApplyDeepSpeedConfigPass::checkOffload(const ZeroPipelineOptions &s) {
  auto device = [](const DeepSpeedValue<std::string> &v) {
    return v.value
               ? symbolizeOffloadDevice(*v.value).value_or(OffloadDevice::none)
               : OffloadDevice::none;
  };
  OffloadDevice optimizer = device(cfg->offloadOptimizer);
  OffloadDevice param = device(cfg->offloadParam);
  bool fileOptimizer =
      optimizer != OffloadDevice::none &&
      s.offloadOptimizer.getValue() == *cfg->offloadOptimizer.value;
  bool fileParam = param != OffloadDevice::none &&
                   s.offloadParam.getValue() == *cfg->offloadParam.value;
  if (fileOptimizer && s.stage < 1)
    return errorAt(cfg->offloadOptimizer)
           << "zero_optimization.offload_optimizer: optimizer offload needs "
              "ZeRO stage 1, 2 or 3, the stage is "
           << s.stage.getValue();
  if (fileParam && s.stage != 3)
    return errorAt(cfg->offloadParam)
           << "zero_optimization.offload_param: parameter offload needs "
              "ZeRO stage 3, the stage is "
           << s.stage.getValue();
  // DeepSpeed's qwZ quantizes the stage-3 gathers of the device shards.
  zrt_variant_config variants = variantsOf(s);
  variants.quantized_weights =
      cfg->quantizedWeights.value.value_or(false) && s.quantizedWeights;
  if (zrt_variant_breaks(&variants, ZRT_QWZ_NEEDS_STAGE3))
    return errorAt(cfg->quantizedWeights)
           << "zero_optimization.zero_quantized_weights: qwZ quantizes the "
              "weights of ZeRO stage 3's gathers, the stage is "
           << s.stage.getValue();
  if (zrt_variant_breaks(&variants, ZRT_QWZ_EXCLUDES_PARAM_OFFLOAD))
    return errorAt(cfg->quantizedWeights)
           << "zero_optimization.zero_quantized_weights: qwZ gathers the "
              "shards on the device; it does not combine with offload_param";
  // The swap files' directory, from the file or the options.
  if (fileParam && param == OffloadDevice::nvme && s.paramNvmePath.empty() &&
      s.nvmePath.empty())
    return errorAt(cfg->offloadParam)
           << "zero_optimization.offload_param: device nvme needs an "
              "nvme_path (or the option param-nvme-path)";
  if (fileOptimizer && optimizer == OffloadDevice::nvme && s.nvmePath.empty())
    return errorAt(cfg->offloadOptimizer)
           << "zero_optimization.offload_optimizer: device nvme needs an "
              "nvme_path (or the option nvme-path)";
  return success();
}

/// muon-group-layers groups the layers of Muon's matrices at stage 3:
/// given anywhere else it would change nothing, and is refused, as
/// ep-size is on a step without experts.
LogicalResult
ApplyDeepSpeedConfigPass::checkMuonGroupLayers(ModuleOp module,
                                               const ZeroPipelineOptions &s) {
  if (!given->muonGroupLayers.hasValue())
    return success();
  std::optional<OptimizerKind> fileKind;
  if (cfg->optimizer.value)
    fileKind = symbolizeOptimizerKind(*cfg->optimizer.value);
  std::optional<OptimizerKind> other;
  bool anyStep = false;
  for (TrainStepOp step : module.getOps<TrainStepOp>()) {
    anyStep = true;
    OptimizerKind kind = fileKind.value_or(step.getOptimizer().getKind());
    if (kind != OptimizerKind::muon)
      other = kind;
  }
  if (s.stage == 3 && anyStep && !other)
    return success();
  InFlightDiagnostic d = mlir::emitError(module.getLoc());
  d << "muon-group-layers " << s.muonGroupLayers.getValue()
    << " groups the layers of Muon's matrices at stage 3; ";
  if (s.stage != 3)
    d << "the stage is " << s.stage.getValue();
  else if (!anyStep)
    d << "the module has no train step";
  else
    d << "the train step's optimizer is " << stringifyOptimizerKind(*other);
  return d << " (leave the option out)";
}

/// What the optimizer cannot do with the precision and offload the file
/// asks for, at the place of the file's key that asks (the passes and the
/// lowering check the same rules, at the train step, when only options
/// and the step decide): bf16 masters need the bf16-master update, a
/// state precision the optimizer's row, and NVMe swaps fp32 states only.
LogicalResult
ApplyDeepSpeedConfigPass::checkOptimizerKeys(TrainStepOp step,
                                             const ZeroPipelineOptions &s) {
  OptimizerAttr opt = step.getOptimizer();
  std::optional<OptimizerKind> fileKind;
  if (cfg->optimizer.value)
    fileKind = symbolizeOptimizerKind(*cfg->optimizer.value);
  OptimizerKind kind = fileKind.value_or(opt.getKind());
  std::optional<StatePrecision> states =
      s.optimizerStates.empty() ? opt.getStates()
                                : symbolizeStatePrecision(s.optimizerStates);
  if (!states)
    return success(); // zero-optimizer names the bad option
  bool fileStates = cfg->optimizerStates.value &&
                    s.optimizerStates.getValue() == *cfg->optimizerStates.value;
  // The state precision's key: bf16.bf16_optimizer_states sets it too.
  std::string statesKey =
      cfg->bf16OptimizerStates.value &&
              cfg->bf16OptimizerStates.line == cfg->optimizerStates.line &&
              cfg->bf16OptimizerStates.column == cfg->optimizerStates.column
          ? "bf16.bf16_optimizer_states"
          : dskeys::kOptimizerStates.str();
  std::string kindName = stringifyOptimizerKind(kind).str();
  std::string statesName = stringifyStatePrecision(*states).str();
  // Where the optimizer comes from, when the file does not say it.
  std::string kindSource =
      fileKind ? " (optimizer.type '" + cfg->optimizerType + "')"
               : std::string(" (the train step's optimizer)");
  if (!hasOptimizerStatePrecision(kind, *states)) {
    if (fileStates)
      return errorAt(cfg->optimizerStates)
             << statesKey << ": " << kindName << " has no " << statesName
             << " states" << kindSource;
    if (fileKind)
      return errorAt(cfg->optimizer)
             << "optimizer.type: " << kindName << " has no " << statesName
             << " states (the option optimizer-states or the train "
                "step's)";
  }
  bool masters = s.bf16Masters.empty() ? opt.getBf16Masters()
                                       : s.bf16Masters.getValue() == "true";
  if (masters && !hasBf16MasterUpdate(kind, *states)) {
    bool fileMasters = cfg->bf16Masters.value.value_or(false) &&
                       !given->bf16Masters.hasValue();
    // As #zero.optimizer's verifier says it.
    std::string why = "optimizer bf16_masters is implemented for adam and "
                      "adamw with f32 or bf16 states, got " +
                      kindName + " with " + statesName + " states";
    if (fileMasters)
      return errorAt(cfg->bf16Masters)
             << "bf16.bf16_master_weights_and_grads: " << why << kindSource;
    if (fileKind)
      return errorAt(cfg->optimizer)
             << "optimizer.type: " << why
             << " (bf16 masters: the option bf16-masters or the train "
                "step's)";
    if (fileStates)
      return errorAt(cfg->optimizerStates) << statesKey << ": " << why;
  }
  bool nvme = s.offloadOptimizer.getValue() == "nvme";
  if (nvme && !canSwapOptimizerStates(*states)) {
    bool fileNvme =
        cfg->offloadOptimizer.value == std::optional<std::string>("nvme") &&
        !given->offloadOptimizer.hasValue();
    std::string why = "NVMe swaps the optimizer states in f32 only";
    if (fileNvme)
      return errorAt(cfg->offloadOptimizer)
             << "zero_optimization.offload_optimizer: device nvme: " << why
             << ", the states are in " << statesName
             << (fileStates ? " (" + statesKey + ")"
                            : std::string(" (the option optimizer-states "
                                          "or the train step's)"))
             << "; offload them to the cpu or keep them on the device";
    if (fileStates)
      return errorAt(cfg->optimizerStates)
             << statesKey << ": " << why
             << ", and the optimizer is offloaded to nvme (the option "
                "offload-optimizer)";
  }
  return success();
}

/// zero_hpz_partition_size: DeepSpeed's rules (ZeRO stage 3, ranks in
/// groups of that many consecutive ranks, so a divisor of the world
/// size); the secondary shards live on the device, so not with
/// parameter offload.
LogicalResult ApplyDeepSpeedConfigPass::checkHpz(const ZeroPipelineOptions &s) {
  const DeepSpeedValue<int64_t> &h = cfg->hpzPartitionSize;
  if (!h.value || *h.value <= 1 || s.hpzPartitionSize.getValue() != *h.value)
    return success();
  zrt_variant_config variants = variantsOf(s);
  auto breaks = [&](zrt_variant_rule rule) {
    return zrt_variant_breaks(&variants, rule) != 0;
  };
  if (breaks(ZRT_HPZ_NEEDS_STAGE3))
    return errorAt(h) << "zero_optimization.zero_hpz_partition_size: hpZ "
                         "needs ZeRO stage 3, the stage is "
                      << s.stage.getValue();
  if (breaks(ZRT_HPZ_DIVIDES_WORLD))
    return errorAt(h) << "zero_optimization.zero_hpz_partition_size: "
                      << *h.value << " does not divide the world size "
                      << s.worldSize.getValue();
  if (breaks(ZRT_HPZ_EXCLUDES_PARAM_OFFLOAD))
    return errorAt(h) << "zero_optimization.zero_hpz_partition_size: hpZ "
                         "does not combine with offload_param (device "
                      << s.offloadParam.getValue()
                      << "): the secondary shards live on the device";
  return success();
}

/// DeepSpeed's rules for qgZ, at the place of zero_quantized_gradients:
/// only its stage-3 optimizer reduces by the all-to-alls, and only with
/// reduce_scatter; its MiCS optimizer never does. One node falls back to
/// the plain reduce-scatter in zero-grad-sync, with a warning.
LogicalResult ApplyDeepSpeedConfigPass::checkQuantizedGradients(
    const ZeroPipelineOptions &s) {
  const DeepSpeedValue<bool> &q = cfg->quantizedGradients;
  if (!q.value.value_or(false) || !s.quantizedGradients)
    return success();
  auto fail = [&]() {
    InFlightDiagnostic d = errorAt(q);
    d << "zero_optimization.zero_quantized_gradients: ";
    return d;
  };
  zrt_variant_config variants = variantsOf(s);
  auto breaks = [&](zrt_variant_rule rule) {
    return zrt_variant_breaks(&variants, rule) != 0;
  };
  if (breaks(ZRT_QGZ_NEEDS_STAGE3))
    return fail() << "qgZ quantizes the gradient reduce-scatters of ZeRO "
                     "stage 3, the stage is "
                  << s.stage.getValue();
  if (breaks(ZRT_QGZ_NEEDS_REDUCE_SCATTER))
    return fail() << "qgZ replaces the gradient reduce-scatter; it does "
                     "not combine with reduce_scatter false";
  if (breaks(ZRT_QGZ_EXCLUDES_MICS))
    return fail() << "qgZ does not combine with MiCS (mics_shard_size "
                  << s.micsShardSize.getValue()
                  << "): DeepSpeed's MiCS reduces with the plain "
                     "reduce-scatter";
  return success();
}

/// DeepSpeed's rules for MiCS, at the place of mics_shard_size: stage 3,
/// shard groups that divide the world, no offload (DeepSpeed refuses it)
/// and no hpZ.
LogicalResult
ApplyDeepSpeedConfigPass::checkMics(const ZeroPipelineOptions &s) {
  const DeepSpeedValue<int64_t> &m = cfg->micsShardSize;
  if (!m.value || *m.value <= 0 || s.micsShardSize != *m.value)
    return success();
  auto fail = [&]() {
    InFlightDiagnostic d = errorAt(m);
    d << "zero_optimization.mics_shard_size: ";
    return d;
  };
  // The file's hpZ, whatever the options say.
  zrt_variant_config variants = variantsOf(s);
  variants.hpz_partition_size = cfg->hpzPartitionSize.value.value_or(1);
  auto breaks = [&](zrt_variant_rule rule) {
    return zrt_variant_breaks(&variants, rule) != 0;
  };
  if (breaks(ZRT_MICS_NEEDS_STAGE3))
    return fail() << "MiCS needs ZeRO stage 3, the stage is "
                  << s.stage.getValue();
  if (s.worldSize >= 1 && breaks(ZRT_MICS_DIVIDES_WORLD))
    return fail() << "the shard groups of " << *m.value
                  << " ranks must divide the world size "
                  << s.worldSize.getValue();
  if (breaks(ZRT_MICS_EXCLUDES_OFFLOAD))
    for (auto [option, key] :
         {std::pair(&s.offloadOptimizer, "offload_optimizer"),
          std::pair(&s.offloadParam, "offload_param")})
      if (option->getValue() != "none")
        return fail() << "MiCS does not support offload (DeepSpeed refuses "
                         "it), but "
                      << key << " is on " << option->getValue();
  if (breaks(ZRT_HPZ_EXCLUDES_MICS))
    return fail() << "MiCS and hpZ exclude each other, but "
                     "zero_hpz_partition_size is "
                  << *cfg->hpzPartitionSize.value;
  return success();
}
