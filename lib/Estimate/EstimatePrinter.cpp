//===- EstimatePrinter.cpp - zero-estimate's text and JSON output ---------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "EstimateDetail.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"

#include <algorithm>

using namespace llvm;
using namespace zero::estimate;
using namespace zero::estimate::detail;

namespace {

/// "offload_optimizer=cpu, offload_param=none, zero_init=1,
/// additional_buffer_factor=1.5" (no zero_init or offload_param at stage 2).
std::string deepspeedOptionsLine(int64_t stage,
                                 const DeepSpeedOptions &options) {
  std::string text =
      std::string("offload_optimizer=") + (options.cpuOffload ? "cpu" : "none");
  if (stage == 3)
    text += std::string(", offload_param=") +
            (options.cpuOffloadParams ? "cpu" : "none") +
            ", zero_init=" + (options.zeroInit ? "1" : "0");
  return text +
         ", additional_buffer_factor=" + options.additionalBufferFactor.str();
}

/// What the table's ours columns say of a row: our device total and pinned
/// host arena per rank, without offload, with the optimizer offloaded or
/// with the parameters offloaded too.
struct OursForRow {
  int64_t device = 0, host = 0;
};
std::optional<OursForRow> oursForRow(const Estimate &e,
                                     const DeepSpeedRow &row) {
  if (row.options.cpuOffloadParams)
    return OursForRow{e.offloadParamDeviceBytes, e.offloadHostBytes};
  if (row.options.cpuOffload)
    return OursForRow{e.offloadDeviceBytes, e.offloadHostBytes};
  return OursForRow{e.ourTotal, 0};
}

std::string oursNote(const Estimate &e) {
  return "ours: our exact total per GPU (model states + buffers) and pinned "
         "host arena per rank, without offload, with offload_optimizer=cpu "
         "(the fp32 masters, " +
         statesText(e) +
         " and the gradient and parameter copies in host memory, laid out as "
         "zero-plan-memory does) and at stage 3 with offload_param=cpu too "
         "(the parameter shard in host memory in place of its copy, a staged "
         "copy of the largest group's shard on the device); zero_init "
         "changes neither.";
}

/// DeepSpeed's *_all_cold output, each row with its exact bytes, its GPU
/// formula and ours beside.
void printDeepSpeedTable(const Estimate &e, raw_ostream &os) {
  os << "\nDeepSpeed's estimate_zero" << e.options.stage
     << "_model_states_mem_needs_all_cold prints (additional_buffer_factor = "
     << e.options.deepspeed.additionalBufferFactor.str()
     << "), with the exact bytes beside:\n";
  const auto &header = e.deepspeedTableHeader;
  for (const std::string &line : ArrayRef(header).drop_back())
    os << line << "\n";
  size_t lineW = header.back().size(), cpuW = 9, gpuW = 9, formulaW = 11;
  auto formula = [](const DeepSpeedRow &row) {
    return row.estimate.gpuFormula +
           (row.older ? " (before PR #5099, memory.rst)" : "");
  };
  for (const DeepSpeedRow &row : e.deepspeedTable) {
    lineW = std::max(lineW, row.line.size());
    cpuW = std::max(cpuW, std::to_string(row.estimate.cpuBytes).size());
    gpuW = std::max(gpuW, std::to_string(row.estimate.gpuBytes).size());
    formulaW = std::max(formulaW, formula(row).size());
  }
  size_t oursW = 12;
  for (const DeepSpeedRow &row : e.deepspeedTable)
    if (std::optional<OursForRow> ours = oursForRow(e, row))
      oursW = std::max(oursW, std::to_string(ours->device).size());
  os << left_justify(header.back(), lineW) << " | "
     << right_justify("CPU bytes", cpuW) << " | "
     << right_justify("GPU bytes", gpuW) << " | "
     << left_justify("GPU formula", formulaW) << " | "
     << right_justify("ours per GPU", oursW) << " | ours host\n";
  for (const DeepSpeedRow &row : e.deepspeedTable) {
    std::optional<OursForRow> ours = oursForRow(e, row);
    os << left_justify(row.line, lineW) << " | "
       << right_justify(std::to_string(row.estimate.cpuBytes), cpuW) << " | "
       << right_justify(std::to_string(row.estimate.gpuBytes), gpuW) << " | "
       << left_justify(formula(row), formulaW) << " | "
       << right_justify(ours ? std::to_string(ours->device) : "n/a", oursW)
       << " | " << (ours ? std::to_string(ours->host) : std::string("n/a"))
       << "\n";
  }
  os << oursNote(e) << "\n";
}

/// A Python number as JSON: an int stays an integer.
json::Value pyJson(const PyNumber &x) {
  if (x.isInt())
    return static_cast<int64_t>(x.getInt());
  return x.getFloat();
}

/// zero-estimate --zeropp's table: each option's plan beside the papers'.
void printZeroPPText(const Estimate &e, raw_ostream &os) {
  const ModelCounts &model = *e.model;
  const ZeroPPOption *zero3 = &model.zeropp.front();
  bool step = !e.options.hardware.empty();
  os << "\nZeRO++ and MiCS at stage 3 (" << e.options.nodes
     << " nodes of K = " << e.options.gpusPerNode << ", n = " << e.n
     << "), per rank and step; ours: zero-pipeline's plan of the model under "
        "each option, as zero-report counts it; theirs: DeepSpeed's 16S/n, "
        "the ZeRO++ paper's secondary partition and cross-node volume (M = "
     << e.c << "S bytes) and MiCS's all-reduce over R = n/m replicas:\n";
  size_t nameW = 6, formulaW = 14, volumeW = 12;
  for (const ZeroPPOption &o : model.zeropp) {
    nameW = std::max(nameW, o.name.size());
    formulaW = std::max(formulaW, o.theirMemoryFormula.size());
    volumeW = std::max(volumeW, o.theirVolumeFormula.size());
  }
  os << "  " << left_justify("option", nameW) << "  "
     << right_justify("model states", 14) << "  "
     << right_justify("secondary", 12) << "  " << right_justify("peak", 14)
     << "  " << right_justify("intra-node", 14) << "  "
     << right_justify("inter-node", 14) << "  " << right_justify("x ZeRO-3", 8)
     << format("%s", step ? "     step ms" : "") << "  |  "
     << left_justify("their states", formulaW) << "  "
     << right_justify("bytes", 14) << "  "
     << left_justify("cross-node", volumeW) << "  "
     << right_justify("x ZeRO-3", 8) << "\n";
  auto ratio = [](double a, double b) {
    std::string text;
    raw_string_ostream os(text);
    if (b > 0)
      os << format("%.3f", a / b);
    else
      os << "-";
    return text;
  };
  for (const ZeroPPOption &o : model.zeropp) {
    os << "  " << left_justify(o.name, nameW) << "  ";
    if (!o.error.empty()) {
      os << "refused: " << o.error << "\n";
      continue;
    }
    os << right_justify(std::to_string(o.modelStateBytes), 14) << "  "
       << right_justify(std::to_string(o.secondaryBytes), 12) << "  "
       << right_justify(std::to_string(o.peakBytes), 14) << "  "
       << right_justify(std::to_string(o.intraNodeBytes), 14) << "  "
       << right_justify(std::to_string(o.interNodeBytes), 14) << "  "
       << right_justify(
              ratio(double(o.interNodeBytes), double(zero3->interNodeBytes)),
              8);
    if (step)
      os << "  " << format("%10.1f", o.predictedStepMs);
    os << "  |  " << left_justify(o.theirMemoryFormula, formulaW) << "  "
       << right_justify(std::to_string(o.theirMemoryBytes), 14) << "  "
       << left_justify(o.theirVolumeFormula, volumeW) << "  "
       << right_justify(ratio(o.theirVolume, zero3->theirVolume), 8) << "\n";
  }
  os << "  (model states: params, grads, masters and moments; secondary: "
        "hpZ's partition; peak: the memory plan's; intra-node and "
        "inter-node: the bytes rank 0 sends within its node and across "
        "nodes; our collectives run in two levels across nodes, so only 1/K "
        "of a gather crosses nodes where the papers count a flat ring: "
        "compare the x ZeRO-3 columns)\n";
}

/// With --ep-size: the expert-parallel layout and our model states under it,
/// beside ours without it and DeepSpeed's (which counts every expert).
void printExpertParallelText(const Estimate &e, raw_ostream &os) {
  const ExpertParallelEstimate &ep = *e.expertParallel;
  os << "\nexpert parallel P = " << ep.size
     << ": each rank holds E/P = " << ep.expertsPerRank << " of the "
     << ep.experts << " experts of a layer, X/P = " << ep.expertParamsPerRank
     << " of the X = " << ep.expertParams
     << " expert params, partitioned over the n/P = " << ep.replicas
     << " ranks holding the same experts (expert data parallel); the D = "
     << ep.denseParams << " dense params over all n = " << e.n;
  if (e.options.stage > 0)
    os << " (padded: D' = " << ep.densePadded
       << ", (X/P)' = " << ep.expertPadded << ")";
  os << ":\n";
  size_t labelW = 0, formulaW = 0;
  for (const Line &line : ep.lines) {
    labelW = std::max(labelW, line.label.size());
    formulaW = std::max(formulaW, line.formula.size());
  }
  for (const Line &line : ep.lines)
    os << "  " << left_justify(line.label, labelW) << "  "
       << left_justify(line.formula, formulaW) << "  "
       << right_justify(std::to_string(*line.bytes), 15) << "  "
       << format("%9.2f", double(*line.bytes) / double(int64_t(1) << 30))
       << "\n";
  os << "  (ours without expert parallelism: " << e.ourStates
     << "; DeepSpeed's estimators know no experts nor expert parallelism "
        "and print ";
  if (e.deepspeed.bytes)
    os << *e.deepspeed.bytes << " (" << e.deepspeed.formula
       << ") for this model at any P";
  else
    os << "nothing at stage " << e.options.stage;
  os << ")\n";
}

} // namespace

void zero::estimate::printEstimateText(const Estimate &e, raw_ostream &os) {
  const EstimateOptions &options = e.options;
  const std::optional<ModelCounts> &model = e.model;
  const int64_t stage = options.stage;
  const bool cpuOffload = options.deepspeed.cpuOffload,
             cpuOffloadParams = options.deepspeed.cpuOffloadParams;
  os << "zero-estimate: S = " << e.s << " params";
  if (e.l)
    os << " (largest layer L = " << e.l << ")";
  os << ", " << options.nodes << " node(s) x " << options.gpusPerNode
     << " GPU(s) = n = " << e.n << " ranks, ZeRO stage " << stage << ", "
     << options.dtype << ", optimizer "
     << mlir::zero::stringifyOptimizerKind(e.optimizer) << " (" << statesText(e)
     << ")\n";
  if (model)
    os << "read from " << model->file << ": S = the elements of its "
       << model->paramTensors << " zero.params, L = its largest stage-3 "
       << "group '" << model->largestGroupName
       << "' (the unit stage 3 gathers; the largest single parameter has "
       << model->largestParam << " elements)\n";
  if (model && model->experts) {
    const mlir::zero::ExpertParamCounts &x = *model->experts;
    os << "experts: " << x.expertParams << " of S in " << x.expertTensors
       << " zero.params (top " << x.maxExpertsPerToken << " of " << x.maxExperts
       << " experts a layer), dense: " << x.denseParams
       << "; active per token: " << x.activeParams
       << " (dense + k/E of the experts'). DeepSpeed's estimators know no "
          "experts: S counts them all, as ZeRO without expert parallelism "
          "keeps a shard of every expert on every rank, and so do the lines "
          "below\n";
  }
  if (model && model->frozenParams > 0)
    os << "trainable: St = " << e.s - model->frozenParams
       << ", frozen: Sf = " << model->frozenParams
       << " (no gradients, optimizer states or masters)\n";
  if (stage > 0) {
    os << "padded: S' = " << e.sPadded;
    if (e.l)
      os << ", L' = " << e.lPadded;
    os << " (multiples of n * alignment = " << e.n * options.alignment << ")\n";
  }
  if (stage >= 2)
    os << "DeepSpeed's options: "
       << deepspeedOptionsLine(stage, options.deepspeed) << "\n";
  os << "\n";

  SmallVector<const Line *> lines = {&e.deepspeed};
  if (e.deepspeedDocs.bytes)
    lines.push_back(&e.deepspeedDocs);
  lines.push_back(&e.paper);
  if (e.paperFrozen)
    lines.push_back(&*e.paperFrozen);
  for (const Line &line : e.ours)
    lines.push_back(&line);
  // With --cpu-offload, ours with the optimizer in host memory (the host
  // lines are bytes per rank, the process of one GPU).
  if (cpuOffload && e.offloadDevice) {
    lines.push_back(&*e.offloadDevice);
    for (const Line &line : e.offloadHost)
      lines.push_back(&line);
    if (cpuOffloadParams && e.offloadParamDevice)
      lines.push_back(&*e.offloadParamDevice);
  }
  size_t labelW = 0, formulaW = 0;
  for (const Line *line : lines) {
    labelW = std::max(labelW, line->label.size());
    formulaW = std::max(formulaW, line->formula.size());
  }
  os << left_justify("", labelW) << "  " << left_justify("formula", formulaW)
     << "  " << right_justify("bytes per GPU", 15) << "  "
     << right_justify("GiB", 9) << "\n";
  for (const Line *line : lines) {
    os << left_justify(line->label, labelW) << "  "
       << left_justify(line->formula, formulaW) << "  ";
    if (line->bytes)
      os << right_justify(std::to_string(*line->bytes), 15) << "  "
         << format("%9.2f", double(*line->bytes) / double(int64_t(1) << 30));
    else
      os << right_justify("n/a", 15) << "  " << right_justify("n/a", 9);
    os << "\n";
  }
  if (e.deepspeedCpu.bytes)
    os << "\nDeepSpeed's host memory per node (" << e.deepspeedCpu.label
       << "'s cpu_mem; "
       << (cpuOffload ? "ours is the host arena above, per rank"
                      : "we plan device memory only")
       << "): " << e.deepspeedCpu.formula << " = " << *e.deepspeedCpu.bytes
       << " bytes ("
       << format("%.2f",
                 double(*e.deepspeedCpu.bytes) / double(int64_t(1) << 30))
       << " GiB)\n";
  if (e.expertParallel)
    printExpertParallelText(e, os);
  if (!e.deepspeedTable.empty())
    printDeepSpeedTable(e, os);
  if (e.fit) {
    os << "\ndevice memory (" << e.deviceMemorySource
       << "): " << e.fit->deviceMemoryBytes
       << " bytes; the verdict counts our total"
       << (e.expertParallel ? " under expert parallelism (ep model states "
                              "+ buffers)"
                            : "")
       << (cpuOffloadParams ? " offloaded (offload_optimizer=cpu, "
                              "offload_param=cpu)"
           : cpuOffload     ? " offloaded (offload_optimizer=cpu)"
                            : "")
       << ", not activations:\n";
    mlir::zero::printFitVerdict(*e.fit, os);
  }
  if (options.nodes > 1) {
    os << "\nper-link traffic of rank 0 per step (" << options.nodes
       << " nodes of K = " << options.gpusPerNode << " GPUs, n = " << e.n
       << "; each collective within the node and across nodes as "
          "zero_rt/topology.h runs it):\n";
    size_t kindW = 5, intraW = 0, interW = 0;
    for (const LinkTraffic &t : e.traffic) {
      kindW = std::max(kindW, t.kind.size() + 5);
      intraW = std::max(intraW, t.intraFormula.size());
      interW = std::max(interW, t.interFormula.size());
    }
    os << "  " << left_justify("", kindW) << "  "
       << left_justify("within the node", intraW + 17) << "  "
       << "across nodes\n";
    for (const LinkTraffic &t : e.traffic)
      os << "  "
         << left_justify(t.kind + " x " + std::to_string(t.count), kindW)
         << "  " << left_justify(t.intraFormula, intraW) << " "
         << right_justify(std::to_string(t.intraBytes), 16) << "  "
         << left_justify(t.interFormula, interW) << " "
         << right_justify(std::to_string(t.interBytes), 16) << "\n";
    os << "  " << left_justify("total", kindW) << "  "
       << left_justify("", intraW) << " "
       << right_justify(std::to_string(e.trafficIntraBytes), 16) << "  "
       << left_justify("", interW) << " "
       << right_justify(std::to_string(e.trafficInterBytes), 16) << "\n";
    if (e.trafficInterBandwidth > 0)
      os << "  across nodes at "
         << format("%.2f", e.trafficInterBandwidth / 1e9) << " GB/s per rank ("
         << options.hardware
         << "'s network shared by the K ranks of a node): at least "
         << format("%.3f", e.trafficInterSeconds * 1e3) << " ms per step\n";
  }
  if (model && !model->zeropp.empty())
    printZeroPPText(e, os);
  os << "\ndifferences:\n";
  for (const std::string &d : e.differences)
    os << "  - " << d << "\n";
}

/// The inputs' `moe` object: a mixture of experts' parameter counts.
static void writeMoeJson(json::OStream &j,
                         const mlir::zero::ExpertParamCounts &x) {
  j.attributeObject("moe", [&] {
    j.attribute("expert_params", x.expertParams);
    j.attribute("expert_param_tensors", x.expertTensors);
    j.attribute("dense_params", x.denseParams);
    j.attribute("active_params", x.activeParams);
    j.attribute("experts", x.maxExperts);
    j.attribute("experts_per_token", x.maxExpertsPerToken);
  });
}

/// inputs.optimizer_states, and the states' precision and absmax block only
/// when not f32 (so that f32 estimates keep their bytes).
static void writeOptimizerStatesJson(json::OStream &j, const Estimate &e) {
  j.attributeArray("optimizer_states", [&] {
    for (const mlir::zero::OptimizerState &state : e.optimizerStates)
      j.object([&] {
        j.attribute("key", state.reportKey);
        j.attribute("bytes_per_param", state.bytes);
      });
  });
  if (e.statePrecision == mlir::zero::StatePrecision::f32)
    return;
  j.attribute("optimizer_state_precision",
              mlir::zero::stringifyStatePrecision(e.statePrecision));
  if (e.absmaxBlock > 0)
    j.attribute("absmax_block", e.absmaxBlock);
}

/// The `ours_expert_parallel` object: the layout and its lines.
static void writeExpertParallelJson(json::OStream &j,
                                    const ExpertParallelEstimate &ep) {
  j.attributeObject("ours_expert_parallel", [&] {
    j.attribute("ep_size", ep.size);
    j.attribute("experts_per_rank", ep.expertsPerRank);
    j.attribute("expert_params_per_rank", ep.expertParamsPerRank);
    j.attribute("expert_replicas", ep.replicas);
    j.attribute("padded_dense_params", ep.densePadded);
    j.attribute("padded_expert_params_per_rank", ep.expertPadded);
    for (const Line &l : ep.lines)
      j.attributeObject(l.key, [&] {
        j.attribute("formula", l.formula);
        j.attribute("bytes", *l.bytes);
      });
  });
}

void zero::estimate::printEstimateJson(const Estimate &e, raw_ostream &os) {
  const EstimateOptions &options = e.options;
  const std::optional<ModelCounts> &model = e.model;
  const int64_t stage = options.stage;
  json::OStream j(os, 2);
  auto line = [&](const Line &l) {
    j.attributeObject(l.key, [&] {
      j.attribute("formula", l.formula);
      j.attribute("bytes",
                  l.bytes ? json::Value(*l.bytes) : json::Value(nullptr));
    });
  };
  j.object([&] {
    j.attributeObject("inputs", [&] {
      j.attribute("params", e.s);
      j.attribute("largest_layer_params", e.l);
      j.attribute("gpus_per_node", options.gpusPerNode);
      j.attribute("nodes", options.nodes);
      j.attribute("world_size", e.n);
      j.attribute("stage", stage);
      j.attribute("dtype", options.dtype);
      j.attribute("optimizer", mlir::zero::stringifyOptimizerKind(e.optimizer));
      writeOptimizerStatesJson(j, e);
      j.attribute("alignment", options.alignment);
      j.attribute("reduce_bucket_size", options.reduceBucketSize);
      j.attribute("allgather_bucket_size", options.allgatherBucketSize);
      j.attribute("prefetch_bucket_size", options.prefetchBucketSize);
      j.attribute("overlap_comm", options.overlapComm);
      int64_t frozen = model ? model->frozenParams : 0;
      j.attribute("trainable_params", e.s - frozen);
      j.attribute("frozen_params", frozen);
      j.attribute("padded_params", e.sPadded);
      j.attribute("padded_largest_layer_params", e.lPadded);
      // UTF-8: zero-estimate refuses --format json for another path (the
      // names are verified IR's, the rest are ASCII).
      j.attribute("model_file", model ? json::Value(model->file) : nullptr);
      j.attribute("largest_layer_group",
                  model ? json::Value(model->largestGroupName) : nullptr);
      if (model && model->experts)
        writeMoeJson(j, *model->experts);
      j.attribute("hardware", options.hardware.empty()
                                  ? json::Value(nullptr)
                                  : json::Value(options.hardware));
      const DeepSpeedOptions &o = e.options.deepspeed;
      j.attribute("cpu_offload", o.cpuOffload);
      j.attribute("cpu_offload_params", o.cpuOffloadParams);
      j.attribute("zero_init", o.zeroInit);
      j.attribute("additional_buffer_factor", pyJson(o.additionalBufferFactor));
    });
    j.attributeObject("deepspeed", [&] {
      j.attribute("formula", e.deepspeed.formula);
      j.attribute("bytes", e.deepspeed.bytes ? json::Value(*e.deepspeed.bytes)
                                             : json::Value(nullptr));
      j.attribute("cpu_formula", e.deepspeedCpu.bytes
                                     ? json::Value(e.deepspeedCpu.formula)
                                     : json::Value(nullptr));
      j.attribute("cpu_bytes", e.deepspeedCpu.bytes
                                   ? json::Value(*e.deepspeedCpu.bytes)
                                   : json::Value(nullptr));
      j.attribute("largest_layer_memory",
                  e.deepspeedLargestLayerMemory
                      ? json::Value(*e.deepspeedLargestLayerMemory)
                      : json::Value(nullptr));
    });
    if (e.deepspeedDocs.bytes)
      line(e.deepspeedDocs);
    line(e.paper);
    if (e.paperFrozen)
      line(*e.paperFrozen);
    j.attributeObject("ours", [&] {
      for (const Line &l : e.ours)
        line(l);
    });
    // Only with --ep-size: the keys of other estimates stay as they were.
    if (e.expertParallel)
      writeExpertParallelJson(j, *e.expertParallel);
    if (e.offloadDevice)
      j.attributeObject("ours_offload_optimizer", [&] {
        line(*e.offloadDevice);
        for (const Line &l : e.offloadHost)
          line(l);
      });
    else
      j.attribute("ours_offload_optimizer", nullptr);
    // The host arena is ours_offload_optimizer's host_total.
    if (e.offloadParamDevice)
      j.attributeObject("ours_offload_param",
                        [&] { line(*e.offloadParamDevice); });
    else
      j.attribute("ours_offload_param", nullptr);
    if (e.deepspeedTable.empty())
      j.attribute("deepspeed_table", nullptr);
    else
      j.attributeObject("deepspeed_table", [&] {
        j.attribute("function", "estimate_zero" + std::to_string(stage) +
                                    "_model_states_mem_needs_all_cold");
        j.attributeArray("header", [&] {
          for (const std::string &line : e.deepspeedTableHeader)
            j.value(line);
        });
        j.attributeArray("rows", [&] {
          for (const DeepSpeedRow &row : e.deepspeedTable)
            j.object([&] {
              const DeepSpeedOptions &o = row.options;
              j.attribute("offload_optimizer", o.cpuOffload ? "cpu" : "none");
              if (stage == 3) {
                j.attribute("offload_param",
                            o.cpuOffloadParams ? "cpu" : "none");
                j.attribute("zero_init", o.zeroInit);
              }
              j.attribute("estimator",
                          row.older ? "before PR #5099" : "current");
              j.attribute("cpu_bytes", row.estimate.cpuBytes);
              j.attribute("gpu_bytes", row.estimate.gpuBytes);
              j.attribute("cpu_formula", row.estimate.cpuFormula);
              j.attribute("gpu_formula", row.estimate.gpuFormula);
              std::optional<OursForRow> ours = oursForRow(e, row);
              j.attribute("ours_gpu_bytes", ours ? json::Value(ours->device)
                                                 : json::Value(nullptr));
              j.attribute("ours_host_bytes", ours ? json::Value(ours->host)
                                                  : json::Value(nullptr));
              j.attribute("line", row.line);
            });
        });
        j.attribute("ours_note", oursNote(e));
      });
    if (e.fit)
      j.attributeObject("fit", [&] {
        j.attribute("device_memory_bytes", e.fit->deviceMemoryBytes);
        j.attribute("free_bytes", e.fit->freeBytes);
        j.attribute("fits", e.fit->fits);
        j.attributeObject("largest_item", [&] {
          j.attribute("name", e.fit->largestItem);
          j.attribute("bytes", e.fit->largestItemBytes);
        });
      });
    else
      j.attribute("fit", nullptr);
    // On one node too, every byte within it: the keys stay the same.
    j.attributeObject("traffic", [&] {
      j.attribute("ranks_per_node", options.gpusPerNode);
      j.attribute("nodes", options.nodes);
      j.attribute("intra_node_bytes", e.trafficIntraBytes);
      j.attribute("inter_node_bytes", e.trafficInterBytes);
      j.attribute("inter_node_bytes_per_s", e.trafficInterBandwidth);
      j.attribute("inter_node_ms", e.trafficInterSeconds * 1e3);
      j.attributeObject("by_kind", [&] {
        for (const LinkTraffic &t : e.traffic)
          j.attributeObject(t.kind, [&] {
            j.attribute("count", t.count);
            j.attribute("intra_node_formula", t.intraFormula);
            j.attribute("intra_node_bytes", t.intraBytes);
            j.attribute("inter_node_formula", t.interFormula);
            j.attribute("inter_node_bytes", t.interBytes);
          });
      });
    });
    // Only with --zeropp: the keys of other estimates stay as they were.
    if (model && !model->zeropp.empty())
      j.attributeArray("zeropp", [&] {
        for (const ZeroPPOption &o : model->zeropp)
          j.object([&] {
            j.attribute("option", o.name);
            j.attribute("pipeline", o.pipeline);
            j.attribute("error",
                        o.error.empty() ? json::Value(nullptr) : o.error);
            if (o.error.empty())
              j.attributeObject("ours", [&] {
                j.attribute("model_state_bytes", o.modelStateBytes);
                j.attribute("hpz_secondary_bytes", o.secondaryBytes);
                j.attribute("peak_bytes", o.peakBytes);
                j.attribute("intra_node_bytes_per_rank", o.intraNodeBytes);
                j.attribute("inter_node_bytes_per_rank", o.interNodeBytes);
                if (!options.hardware.empty())
                  j.attribute("predicted_step_ms", o.predictedStepMs);
              });
            j.attributeObject("theirs", [&] {
              j.attribute("model_state_formula", o.theirMemoryFormula);
              j.attribute("model_state_bytes", o.theirMemoryBytes);
              j.attribute("cross_node_volume_formula", o.theirVolumeFormula);
              j.attribute("cross_node_volume_m", o.theirVolume);
            });
          });
      });
    j.attributeArray("differences", [&] {
      for (const std::string &d : e.differences)
        j.value(d);
    });
  });
  os << "\n";
}
