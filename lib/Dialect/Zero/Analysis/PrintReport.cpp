//===- PrintReport.cpp - A step report as JSON and as text ----------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/Analysis/DeepSpeedEstimators.h"
#include "zero/Dialect/Zero/Analysis/Report.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

using namespace mlir;
using namespace mlir::zero;

llvm::json::Value mlir::zero::reportToJson(const StepReport &r) {
  llvm::json::Object collectives;
  for (auto &[k, v] : r.collectives)
    collectives[k] = v;
  llvm::json::Object bytesByKind;
  for (auto &[k, v] : r.bytesByKind)
    bytesByKind[k] = llvm::json::Object{{"intra_node", v.intraNode},
                                        {"inter_node", v.interNode}};
  llvm::json::Value fit = nullptr;
  if (r.fit)
    fit = llvm::json::Object{
        {"device_memory_bytes", r.fit->deviceMemoryBytes},
        {"free_bytes", r.fit->freeBytes},
        {"fits", r.fit->fits},
        {"largest_item",
         llvm::json::Object{{"name", r.fit->largestItem},
                            {"bytes", r.fit->largestItemBytes}}}};
  llvm::json::Object breakdown{{"params", r.params},
                               {"grads", r.grads},
                               {"master_params", r.masterParams}};
  for (const StepReport::OptimizerStateBytes &state : r.optimizerStates)
    breakdown[state.key] = state.bytes;
  llvm::json::Value moe = nullptr;
  if (r.experts)
    moe = llvm::json::Object{
        {"expert_param_count", r.experts->expertParams},
        {"expert_param_tensors", r.experts->expertTensors},
        {"dense_param_count", r.experts->denseParams},
        {"active_param_count", r.experts->activeParams},
        {"experts", r.experts->maxExperts},
        {"experts_per_token", r.experts->maxExpertsPerToken}};
  llvm::json::Value deepspeed = nullptr;
  if (r.deepspeed)
    deepspeed =
        llvm::json::Object{{"model_state_bytes", r.deepspeed->modelStateBytes},
                           {"bytes_per_rank", r.deepspeed->bytesPerRank}};
  llvm::json::Value packing = nullptr;
  if (r.packing)
    packing = llvm::json::Object{
        {"seq", r.packing->seq},
        {"rows", r.packing->rows},
        {"documents", r.packing->documents},
        {"tokens", r.packing->tokens},
        {"fill", r.packing->fill},
        {"padded_fill", r.packing->paddedFill},
        {"saved_slots", r.packing->savedSlots},
        {"attention_fraction", r.packing->attentionFraction}};
  llvm::json::Object json{
      {"fit", std::move(fit)},
      {"packing", std::move(packing)},
      {"optimizer", r.optimizer},
      {"optimizer_states", r.optimizerStatePrecision},
      {"deepspeed", std::move(deepspeed)},
      {"moe", std::move(moe)},
      {"stage", r.stage},
      {"world_size", r.worldSize},
      {"gradient_accumulation_steps", r.accumulationSteps},
      {"param_count", r.paramCount},
      {"trainable_param_count", r.trainableParamCount},
      {"frozen_param_count", r.frozenParamCount},
      {"padded_param_count", r.paddedParamCount},
      {"param_tensors", r.paramTensors},
      {"largest_param", r.largestParam},
      {"model_state_bytes", r.modelStateBytes},
      {"param_dtype", r.paramDtype},
      {"model_state_breakdown", std::move(breakdown)},
      {"buffer_bytes",
       llvm::json::Object{{"reduce_buckets", r.reduceBucketBytes},
                          {"gather_buffers", r.gatherBufferBytes}}},
      {"activation_bytes", r.activationBytes},
      {"persistent_bytes", r.persistentBytes},
      {"step_arena_bytes", r.arenaBytes},
      {"kernel_scratch_bytes", r.scratchBytes},
      {"peak_bytes", r.peakBytes},
      {"host_peak_bytes", r.hostPeakBytes},
      {"nvme_bytes", r.nvmeBytes},
      {"nvme_swap_buffer_bytes", r.swapBytes},
      {"nvme_param_bytes", r.paramNvmeBytes},
      {"nvme_param_swap_buffer_bytes", r.paramSwapBytes},
      {"offloaded_activation_bytes", r.offloadedActivationBytes},
      {"nvme_read_bytes_per_s", r.nvmeReadBandwidth},
      {"nvme_write_bytes_per_s", r.nvmeWriteBandwidth},
      // On one node every byte stays within it: the split is all intra-node.
      {"comm",
       llvm::json::Object{
           {"volume_elements", r.volumeElements},
           {"constant_volume_elements", r.constantVolumeElements},
           {"bytes_per_rank", r.bytesPerRank},
           {"intra_node_bytes_per_rank", r.intraNodeBytesPerRank},
           {"inter_node_bytes_per_rank", r.interNodeBytesPerRank},
           {"bytes_by_kind", std::move(bytesByKind)},
           {"collectives", std::move(collectives)}}},
      {"hardware", r.hardware},
      {"predicted_step_ms", r.predictedStepMs},
      {"exposed_comm_ms", r.exposedCommMs},
      {"exposed_transfer_ms", r.exposedTransferMs},
      {"recompute_ms", r.recomputeMs},
      {"predicted_step_band",
       r.band ? llvm::json::Value(llvm::json::Object{
                    {"gpu", r.band->gpu},
                    {"runs", r.band->runs},
                    {"min_ratio", r.band->minRatio},
                    {"max_ratio", r.band->maxRatio},
                    {"low_ms", r.predictedStepMs * r.band->minRatio},
                    {"high_ms", r.predictedStepMs * r.band->maxRatio}})
              : llvm::json::Value(nullptr)},
      // Every key in every report, whatever the topology and options: the
      // values DeepSpeed's defaults mean where a feature is off (hpZ over 1
      // rank, no MiCS shard group, no vocabulary padding).
      {"ranks_per_node", r.ranksPerNode},
      {"hpz_partition_size", r.hpzPartitionSize},
      {"hpz_secondary_bytes", r.hpzSecondaryBytes},
      {"mics_shard_size", r.micsShardSize},
      {"vocab_padding",
       llvm::json::Object{{"rows", r.vocabPaddingRows},
                          {"elements", r.vocabPaddingElements},
                          {"model_state_bytes", r.vocabPaddingBytes}}},
  };
  return json;
}

/// DeepSpeed's estimator at the report's stage (2 or 3; none otherwise),
/// S, largest parameter as L, ranks and offload options. Its GPU figure
/// depends on the total GPUs only; the host figure, which needs the GPUs per
/// node the step does not know, is left to zero-estimate. None past 2^58
/// parameters, where DeepSpeed's byte counts may leave int64.
/// The ranks the model states are partitioned over: a MiCS shard group's,
/// whose states are ZeRO-3's at that world size, or the world's.
static int64_t modelStateRanks(const StepReport &r) {
  return r.micsShardSize > 0 ? r.micsShardSize : r.worldSize;
}

static std::optional<::zero::estimate::DeepSpeedEstimate>
estimateDeepSpeedGpu(const StepReport &r) {
  if ((r.stage != 2 && r.stage != 3) || r.paramCount > (int64_t(1) << 58))
    return std::nullopt;
  ::zero::estimate::DeepSpeedOptions options;
  options.cpuOffload = r.optimizerOffloaded;
  options.cpuOffloadParams = r.paramsOffloaded;
  llvm::Expected<::zero::estimate::DeepSpeedEstimate> estimate =
      ::zero::estimate::estimateDeepSpeed(r.stage, r.paramCount, r.largestParam,
                                          /*gpusPerNode=*/1,
                                          /*nodes=*/modelStateRanks(r),
                                          options);
  if (!estimate) {
    llvm::consumeError(estimate.takeError());
    return std::nullopt;
  }
  return *estimate;
}

/// "2S + int(18S/n)" as the report's label writes it: "2S+18S/n".
static std::string compactFormula(StringRef formula) {
  std::string out;
  int depth = 0;
  for (size_t i = 0; i < formula.size(); ++i) {
    if (formula.substr(i).starts_with("int(")) {
      i += 3;
      ++depth;
    } else if (formula[i] == ')' && depth > 0) {
      --depth;
    } else if (formula[i] != ' ') {
      out += formula[i];
    }
  }
  return out;
}

static std::string bytesStr(int64_t b) {
  std::string s;
  llvm::raw_string_ostream os(s);
  double gib = static_cast<double>(b) / (1024.0 * 1024.0 * 1024.0);
  if (gib >= 1.0)
    os << llvm::format("%.2f GiB", gib);
  else
    os << llvm::format("%.2f MiB", static_cast<double>(b) / (1024.0 * 1024.0));
  return s;
}

/// Whether the report prints DeepSpeed's figures with the step's optimizer:
/// where they are not its estimator's (Adam's fp32 moments), whose row the
/// memory table has already.
static bool printsDeepSpeedOptimizer(const StepReport &r) {
  return r.deepspeed && (r.bf16Masters ||
                         !((r.optimizer == "adam" || r.optimizer == "adamw") &&
                           r.optimizerStatePrecision == "f32"));
}

/// "muon", "adamw int8": the optimizer and its states' precision.
static std::string optimizerName(const StepReport &r) {
  return r.optimizer +
         (r.optimizerStatePrecision == "f32"
              ? ""
              : " " + r.optimizerStatePrecision) +
         (r.bf16Masters ? " bf16-masters" : "");
}

/// One row of the memory tables.
static void printRow(llvm::raw_ostream &os, StringRef name, int64_t v) {
  os << llvm::format("  %-35s %16lld  %12s\n", name.str().c_str(),
                     static_cast<long long>(v), bytesStr(v).c_str());
}

/// The stage, ranks and parameter counts.
static void printReportHeader(const StepReport &r, llvm::raw_ostream &os) {
  int64_t S = r.paramCount, Sp = r.paddedParamCount, n = r.worldSize;
  os << "ZeRO stage " << r.stage << " on " << n << " ranks";
  if (r.micsShardSize > 0)
    os << " (MiCS: shard groups of " << r.micsShardSize << ", "
       << n / r.micsShardSize << " replicas)";
  os << ": " << S << " parameters in " << r.paramTensors << " tensors (largest "
     << r.largestParam << "), " << Sp << " after padding\n";
  if (const std::optional<ExpertParamCounts> &e = r.experts) {
    auto range = [&](int64_t lo, int64_t hi) {
      return lo == hi ? std::to_string(hi)
                      : std::to_string(lo) + "-" + std::to_string(hi);
    };
    os << "Experts: " << e->expertParams << " parameters in "
       << e->expertTensors << " tensors, dense: " << e->denseParams
       << "; active per token: " << e->activeParams << " (top "
       << range(e->minExpertsPerToken, e->maxExpertsPerToken) << " of "
       << range(e->minExperts, e->maxExperts)
       << " experts a layer; the grouped products priced at a balanced "
          "load)\n";
  }
  if (r.frozenParamCount > 0)
    os << "Trainable: " << r.trainableParamCount
       << " parameters (St), frozen: " << r.frozenParamCount
       << " (Sf; no gradients, optimizer states or master copies)\n";
  if (r.vocabPaddingRows > 0)
    os << "Vocabulary padded by " << r.vocabPaddingRows << " rows ("
       << r.vocabPaddingElements << " parameters, counted above; "
       << r.vocabPaddingBytes
       << " bytes of model states on the rank holding the most), "
       << "masked out of the loss\n";
  os << "\n";
}

/// The per-rank device memory, with DeepSpeed's estimate for comparison.
static void printDeviceMemory(
    const StepReport &r,
    const std::optional<::zero::estimate::DeepSpeedEstimate> &deepspeed,
    llvm::raw_ostream &os) {
  // The label column fits the longest label, the peak row's.
  os << llvm::format("%-37s %16s  %12s\n", "Per-rank memory", "bytes", "size");
  // Parameters and gradients in their compute type; fp32 parameters are
  // their own masters, so only 16-bit ones have a master row.
  printRow(os, r.paramDtype + " parameters", r.params);
  printRow(os, r.paramDtype + " gradients", r.grads);
  // Offloaded masters and moments are listed with the host memory below.
  if (!r.optimizerOffloaded) {
    if (!r.paramsAreMasters)
      printRow(os, "fp32 master parameters", r.masterParams);
    for (const StepReport::OptimizerStateBytes &state : r.optimizerStates)
      printRow(os, state.label, state.bytes);
  }
  printRow(os, "= model states", r.modelStateBytes);
  if (r.hpzSecondaryBytes > 0)
    printRow(os, "hpZ secondary shards", r.hpzSecondaryBytes);
  printRow(os, "reduce buckets (peak)", r.reduceBucketBytes);
  printRow(os, "gathered parameters (peak)", r.gatherBufferBytes);
  printRow(os, "activations (peak)", r.activationBytes);
  printRow(os, "kernel scratch (peak)", r.scratchBytes);
  printRow(os, "peak (persistent + arena + scratch)", r.peakBytes);
  if (deepspeed)
    printRow(os,
             "DeepSpeed estimate (" + compactFormula(deepspeed->gpuFormula) +
                 ")",
             deepspeed->gpuBytes);
  if (printsDeepSpeedOptimizer(r))
    printRow(os,
             "DeepSpeed " + optimizerName(r) + " (" +
                 r.deepspeed->modelStateFormula + ")",
             r.deepspeed->modelStateBytes);
  // Its formulas with only the trainable parameters carrying gradients and
  // optimizer states.
  if (r.frozenParamCount > 0) {
    ::zero::estimate::FrozenModelStates states =
        ::zero::estimate::modelStatesWithFrozen(r.stage, r.trainableParamCount,
                                                r.frozenParamCount,
                                                modelStateRanks(r));
    printRow(os, "ZeRO formula (" + compactFormula(states.formula) + ")",
             states.bytes);
  }
}

/// ZeRO-Offload: the optimizer states and the copies of the owned gradients
/// and parameters live in pinned host memory; with parameter offload the
/// stage-3 parameter shards too.
static void printHostMemory(const StepReport &r, llvm::raw_ostream &os) {
  os << llvm::format("%-37s %16s  %12s\n", "Per-rank pinned host memory",
                     "bytes", "size");
  if (auto it = r.hostBuffers.find("params"); it != r.hostBuffers.end())
    printRow(os, r.paramDtype + " parameter shards", it->second);
  SmallVector<std::pair<std::string, std::string>> hostRows = {
      {"master", "fp32 master parameters"}};
  for (const StepReport::OptimizerStateBytes &state : r.optimizerStates)
    hostRows.push_back({state.buffer, state.label});
  hostRows.append(
      {{"host_grads", "gradient copy"}, {"host_params", "parameter copy"}});
  for (const auto &[kind, label] : hostRows)
    if (auto it = r.hostBuffers.find(kind); it != r.hostBuffers.end())
      printRow(os, label, it->second);
  if (r.swapBytes > 0)
    printRow(os, "NVMe swap buffers", r.swapBytes);
  if (r.paramSwapBytes > 0)
    printRow(os, "NVMe parameter swap buffers", r.paramSwapBytes);
  if (r.offloadedActivationBytes > 0)
    printRow(os, "offloaded activations", r.offloadedActivationBytes);
  printRow(os, "host peak", r.hostPeakBytes);
  // ZeRO-Infinity: the states and parameter shards in the rank's swap
  // files, each padded to 4096 bytes (the files' total is nvme_bytes).
  if (auto it = r.nvmeBuffers.find("params"); it != r.nvmeBuffers.end())
    printRow(os, ("NVMe " + r.paramDtype + " parameter shards").c_str(),
             it->second);
  for (const auto &[kind, label] : hostRows)
    if (auto it = r.nvmeBuffers.find(kind); it != r.nvmeBuffers.end())
      printRow(os, ("NVMe " + label).c_str(), it->second);
  printRow(os, "NVMe files", r.nvmeBytes);
}

/// Where the model states of an offloaded step live.
static void printOffloadNote(
    const StepReport &r,
    const std::optional<::zero::estimate::DeepSpeedEstimate> &deepspeed,
    llvm::raw_ostream &os) {
  if (r.optimizerOffloaded)
    os << "\nModel states on the device are the "
       << (r.paramsOffloaded ? "" : "parameters and ")
       << "gradients only: the fp32 masters and Adam moments live in "
       << (r.nvmeBytes > r.paramNvmeBytes
               ? "the ranks' NVMe swap files (ZeRO-Infinity)."
               : "pinned host memory (ZeRO-Offload).");
  if (r.paramsOnNvme)
    os << "\nThe stage-3 parameter shards live in the ranks' parameter "
          "swap files (offload_param to nvme, ZeRO-Infinity): each gather "
          "reads a device copy of its shard (counted with the gathered "
          "parameters), read from the file through a pinned host swap "
          "buffer, and the "
       << (r.optimizerOffloaded
               ? "host Adam's new parameters are written back through one."
               : "device Adam's new parameters are written back through "
                 "one; the fp32 masters stay on the device (also with fp32 "
                 "compute).");
  else if (r.paramsOffloaded)
    os << "\nThe stage-3 parameter shards live in pinned host memory "
          "(offload_param): each gather reads a device copy of its shard "
          "(counted with the gathered parameters)"
       << (r.optimizerOffloaded
               ? ", and the host Adam updates them in place."
               : ", and the device Adam's new parameters go back to them; "
                 "the fp32 masters stay on the device (also with fp32 "
                 "compute).");
  if (deepspeed && r.optimizerOffloaded)
    os << " The DeepSpeed estimate is its estimator's with cpu_offload"
       << (r.paramsOffloaded ? " and cpu_offload_params" : "")
       << "; its host figure needs the GPUs per node "
          "(zero-estimate --cpu-offload gives it).";
  else if (deepspeed)
    os << " DeepSpeed's estimator has no branch for parameters offloaded "
          "without the optimizer (it ignores cpu_offload_params without "
          "cpu_offload): its row is the estimate without offload.";
  os << "\n\n";
}

/// The formula the model states follow, against DeepSpeed's.
static void printModelStateNote(
    const StepReport &r,
    const std::optional<::zero::estimate::DeepSpeedEstimate> &deepspeed,
    llvm::raw_ostream &os) {
  int64_t S = r.paramCount, Sp = r.paddedParamCount;
  // Bytes per parameter of params + grads (full or shard) + master and the
  // optimizer's states (b: Adam's m and v, 8; Lion's m, 4); K = 4 + b, or
  // b with bf16 masters (the 16-bit parameters are the masters).
  const int64_t b = r.optimizerBytesPerParam, K = (r.bf16Masters ? 0 : 4) + b;
  // fp32 training's formulas: fp32 parameters that are their masters.
  const bool fp32 = r.paramsAreMasters && !r.bf16Masters;
  const std::string mixedFormulas[] = {
      llvm::formatv("{0}S", 4 + K).str(),
      llvm::formatv("4S + {0}S'/n", K).str(),
      llvm::formatv("2S + {0}S'/n", 2 + K).str(),
      llvm::formatv("{0}S'/n", 4 + K).str()};
  const std::string fp32Formulas[] = {
      llvm::formatv("{0}S", 8 + b).str(),
      llvm::formatv("8S + {0}S'/n", b).str(),
      llvm::formatv("4S + {0}S'/n", 4 + b).str(),
      llvm::formatv("{0}S'/n", 8 + b).str()};
  // Parameters, gradients and masters without the optimizer's states:
  // 16-bit ones with fp32 masters, or fp32 ones that are their own.
  const struct {
    const char *mixed[4], *full[4];
  } stateless = {{"8S", "4S + 4S'/n", "2S + 6S'/n", "8S'/n"},
                 {"8S", "8S", "4S + 4S'/n", "8S'/n"}};
  if (r.optimizerOffloaded || r.paramsOffloaded) {
    printOffloadNote(r, deepspeed, os);
  } else if (r.frozenParamCount > 0) {
    // Only the trainable parameters carry gradients and optimizer states.
    const std::string mixedFrozen[] = {
        llvm::formatv("2S + 2St + {0}St", K).str(),
        llvm::formatv("2S + 2St + {0}St'/n", K).str(),
        llvm::formatv("2S + {0}St'/n", 2 + K).str(),
        llvm::formatv("(2S' + {0}St')/n", 2 + K).str()};
    const std::string fp32Frozen[] = {
        llvm::formatv("4S + {0}St", 4 + b).str(),
        llvm::formatv("4S + 4St + {0}St'/n", b).str(),
        llvm::formatv("4S + {0}St'/n", 4 + b).str(),
        llvm::formatv("(4S' + {0}St')/n", 4 + b).str()};
    bool mixed = r.paramDtype.find('+') != std::string::npos;
    os << "\nModel states follow "
       << (mixed ? mixedFrozen[r.stage] + " for 16-bit groups, " +
                       fp32Frozen[r.stage] + " for fp32 ones"
                 : (fp32 ? fp32Frozen : mixedFrozen)[r.stage])
       << " (S = " << S << ", St = " << r.trainableParamCount
       << " trainable, S' = " << Sp << ", St' = " << r.paddedTrainableParamCount
       << ", n = " << modelStateRanks(r)
       << "): only the trainable parameters carry gradients and optimizer "
          "states ("
       << b << " bytes of fp32 "
       << (b == 8 ? "Adam moments" : "optimizer states") << " each, " << K
       << (r.bf16Masters ? " with the bf16 parameter as its master"
                         : " with an fp32 master")
       << (r.optimizer == "adafactor"
               ? "; Adafactor's counted at its bound, the breakdown above "
                 "holding its factored statistics"
               : "")
       << "), the frozen ones are held in their compute type alone. "
          "DeepSpeed's estimator counts every parameter as trainable; "
          "docs/Report.md gives the formulas with a frozen part.\n\n";
  } else if (r.paramDtype.find('+') != std::string::npos) {
    os << "\nModel states add up each group's in its own compute type ("
       << r.paramDtype << "): " << mixedFormulas[r.stage]
       << " for 16-bit groups, " << fp32Formulas[r.stage]
       << " for fp32 ones, their own masters (S, S' the group's); "
          "DeepSpeed's estimator assumes 16-bit parameters and an fp32 "
          "gradient copy throughout (18 bytes per parameter), and ignores "
          "buckets, gathered parameters and activations, which are counted "
          "above.\n\n";
  } else if (r.factoredStateBytes > 0) {
    // A factored state (Adafactor's): its bytes follow the tensors' shapes.
    os << "\nModel states follow "
       << (fp32 ? stateless.full : stateless.mixed)[r.stage]
       << " + F (S = " << S << ", S' = " << Sp << ", n = " << modelStateRanks(r)
       << "; F = " << r.factoredStateBytes << " bytes, " << r.optimizer
       << "'s factored statistics of the tensors a rank's shards touch, each "
          "matrix's row and column means and each vector's elements, the "
          "most any rank keeps, summed over the partitions); DeepSpeed's "
          "estimator counts Adam's states on every parameter and an fp32 "
          "gradient copy (18 bytes per parameter), and ignores buckets, "
          "gathered parameters and activations, which are counted above.\n\n";
  } else if (r.matrixStateBytes > 0) {
    // States by part (Muon): not a number of bytes per parameter.
    os << "\nModel states follow "
       << (fp32 ? stateless.full : stateless.mixed)[r.stage] << " + "
       << r.matrixStateBytes << "M + " << r.otherStateBytes << "O (S = " << S
       << ", S' = " << Sp << ", n = " << modelStateRanks(r)
       << "; M = " << r.matrixStateElements
       << " and O = " << r.otherStateElements << ", the most elements of "
       << r.optimizer
       << "'s matrices and of the other parameters a rank owns, summed over "
          "the partitions: each part keeps its own states); DeepSpeed's "
          "estimator counts Adam's states on every parameter and an fp32 "
          "gradient copy (18 bytes per parameter), and ignores buckets, "
          "gathered parameters and activations, which are counted above.\n\n";
  } else {
    os << "\nModel states follow "
       << (fp32 ? fp32Formulas : mixedFormulas)[r.stage] << " (S = " << S
       << ", S' = " << Sp << ", n = " << modelStateRanks(r)
       << (r.micsShardSize > 0 ? ", the MiCS shard group" : "") << ")";
    if (r.optimizerAbsmaxBlock > 0)
      os << ", each " << r.optimizerStatePrecision
         << " optimizer state adding one fp32 absmax per "
         << r.optimizerAbsmaxBlock << " elements of its shard";
    if (r.bf16Masters)
      os << ", the bf16 parameters being their own masters and the "
            "gradients bf16 (DeepSpeed's bf16_master_weights_and_grads); "
            "DeepSpeed's estimator assumes fp32 masters and an fp32 gradient "
            "copy (18 bytes per parameter),";
    else if (r.paramsAreMasters)
      os << ", the fp32 parameters being their own masters; DeepSpeed's "
            "estimator assumes mixed precision (16-bit parameters and "
            "gradients, an fp32 gradient copy: 18 bytes per parameter) even "
            "for fp32 training,";
    else
      os << "; DeepSpeed's estimator adds an fp32 gradient copy (18 bytes per "
            "parameter) that this schedule never allocates,";
    os << " and ignores buckets, gathered parameters and activations, which "
          "are counted above.";
    os << "\n\n";
  }
}

/// The communication volume per step and per collective kind.
static void printCommunication(const StepReport &r, llvm::raw_ostream &os) {
  os << "Communication: " << r.volumeElements << " elements ("
     << r.constantVolumeElements << " of them the overflow/norm reduction), "
     << r.bytesPerRank << " bytes sent by rank 0 per step\n";
  // Across nodes, the bytes each level of the two-level collectives sends.
  bool nodes = r.ranksPerNode < r.worldSize;
  if (nodes)
    os << "  " << r.intraNodeBytesPerRank << " bytes within its node, "
       << r.interNodeBytesPerRank << " across nodes ("
       << r.worldSize / r.ranksPerNode << " nodes of " << r.ranksPerNode
       << " ranks)\n";
  for (auto &[k, v] : r.collectives) {
    os << "  " << k << ": " << v;
    if (auto it = r.bytesByKind.find(k); nodes && it != r.bytesByKind.end())
      os << " (" << it->second.intraNode << " bytes within the node, "
         << it->second.interNode << " across)";
    os << "\n";
  }
  if (printsDeepSpeedOptimizer(r))
    os << "  DeepSpeed's ZeRO-3 with " << optimizerName(r) << ": "
       << r.deepspeed->bytesPerRank << " bytes sent per rank"
       << (r.optimizer == "muon"
               ? " (reduce_scatter false: every gradient all-reduced, each "
                 "matrix's fp32 momentum and update all-gathered)\n"
               : "\n");
}

/// The predicted step time and what is exposed of it.
static void printPredictedStep(const StepReport &r, llvm::raw_ostream &os) {
  os << llvm::format("\nPredicted step on %s%s%s: %.3f ms, %.3f ms of it "
                     "exposed communication",
                     r.hardware.c_str(),
                     r.runtime == KernelRuntime::Eager
                         ? " with eager PyTorch's unfused kernels"
                     : r.runtime == KernelRuntime::Compiled
                         ? " with compiled blocks and eager PyTorch's loss"
                         : "",
                     r.reduceElementBytes == 4 ? ", gradients reduced in f32"
                                               : "",
                     r.predictedStepMs, r.exposedCommMs);
  if (r.recomputeMs > 0)
    os << llvm::format(", %.3f ms recomputing activations (zero-remat)",
                       r.recomputeMs);
  if (r.optimizerOffloaded || r.paramsOffloaded)
    os << llvm::format(", %.3f ms exposed %s transfers (of %.3f ms copying)",
                       r.exposedTransferMs,
                       r.nvmeBytes > 0 ? "device-host and NVMe" : "device-host",
                       r.timeline.transferMs);
  if (r.nvmeBytes > 0) {
    os << llvm::format("; the swap files' disk at %.2f GB/s reading and "
                       "%.2f GB/s writing per rank",
                       r.nvmeReadBandwidth / 1e9, r.nvmeWriteBandwidth / 1e9);
    if (r.ranksPerDisk > 1)
      os << " (one disk shared by " << r.ranksPerDisk << " ranks)";
  }
  os << "\n";
  if (const std::optional<StepReport::PackingFigures> &p = r.packing)
    os << llvm::format(
        "Packed rows: %lld documents (%lld tokens) in %lld rows of %lld, "
        "fill %.1f%% (one document a padded row: %.1f%%); padding saved: "
        "%lld token slots; attention work %.1f%% of full rows\n",
        (long long)p->documents, (long long)p->tokens, (long long)p->rows,
        (long long)p->seq, 100 * p->fill, 100 * p->paddedFill,
        (long long)p->savedSlots, 100 * p->attentionFraction);
  if (r.band)
    os << llvm::format("Validation band: published runs on %s took %.2f to "
                       "%.2f times their predicted step (%lld runs, "
                       "docs/CostModel.md): %.3f to %.3f ms\n",
                       r.band->gpu.str().c_str(), r.band->minRatio,
                       r.band->maxRatio, (long long)r.band->runs,
                       r.predictedStepMs * r.band->minRatio,
                       r.predictedStepMs * r.band->maxRatio);
}

void mlir::zero::printTextReport(const StepReport &r, llvm::raw_ostream &os) {
  printReportHeader(r, os);
  // DeepSpeed's estimate_zero{2,3}_model_states_mem_needs for the same model
  // with the step's offload options, for comparison; it has none for stages
  // 0 and 1.
  std::optional<::zero::estimate::DeepSpeedEstimate> deepspeed =
      estimateDeepSpeedGpu(r);
  printDeviceMemory(r, deepspeed, os);
  if (r.optimizerOffloaded || r.paramsOffloaded ||
      r.offloadedActivationBytes > 0)
    printHostMemory(r, os);
  if (r.fit) {
    os << "\n";
    printFitVerdict(*r.fit, os);
  }
  printModelStateNote(r, deepspeed, os);
  if (!r.muonRefusal.empty())
    os << "Muon's owner-computes needs each matrix whole in one rank's "
          "shard, and here "
       << r.muonRefusal
       << ": zero-compile refuses this step (its partition has no owners), "
          "so these figures are of a schedule that does not run yet.\n\n";
  if (r.muonLayerGroups > 0)
    os << "Muon's owner-computes groups " << r.muonGroupedLayers
       << " layers into " << r.muonLayerGroups << " stage-3 group(s) of up to "
       << r.muonGroupMostLayers << " layers (@" << r.muonGroupMostName << ": "
       << r.muonGroupMostElements
       << " elements): no layer alone puts each matrix whole in one rank's "
          "shard without gaps, so each group is gathered and reduce-scattered "
          "as one, with AdamW's padding (zero-partition's "
          "muon-group-layers; 1 keeps a group per layer, with gaps).\n\n";
  if (r.muonGapGroups > 0)
    os << "Muon's owner-computes lays out " << r.muonGapGroups
       << " group(s) with gaps (no order of their parameters puts each "
          "matrix whole in one rank's shard of AdamW's layout): "
       << r.muonGapElements << " elements of padding beyond AdamW's layout ("
       << r.muonGapRankElements << " a rank's shard), " << r.muonGapBytes
       << " bytes a rank of parameters, gradients and masters (Muon's "
          "states hold no gap); the reduce-scatter and gathers move the "
          "enlarged slots "
          "(each rank its owned part up to the last parameter), so the "
          "bytes below are not AdamW's at this stage: the fullest slot sends "
          "more, a slot ending in padding less.\n\n";
  printCommunication(r, os);
  printPredictedStep(r, os);
}
