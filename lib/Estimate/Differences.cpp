//===- Differences.cpp - Why the estimates differ, line by line -----------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "EstimateDetail.h"
#include "zero_rt/optimizers.h"

#include "zero_rt/optimizers.h"

#include "llvm/Support/Format.h"

#include <string>

using namespace llvm;
using namespace zero::estimate;
using namespace zero::estimate::detail;

namespace {

/// Bytes in the largest binary unit that keeps them >= 1.
std::string human(int64_t bytes) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB"};
  unsigned u = 0;
  double v = double(bytes);
  while (u < 3 && v >= 1024) {
    v /= 1024;
    ++u;
  }
  std::string s;
  raw_string_ostream os(s);
  if (u == 0)
    os << bytes << " B";
  else
    os << format("%.2f ", v) << units[u];
  return s;
}

std::string signedHuman(int64_t bytes) {
  return (bytes < 0 ? "-" : "+") + human(bytes < 0 ? -bytes : bytes);
}

/// Offload, the totals, and DeepSpeed's host figure.
void explainOffload(Estimate &e, const Terms &t) {
  const EstimateOptions &options = e.options;
  const std::optional<ModelCounts> &model = e.model;
  const DeepSpeedOptions &dsOptions = options.deepspeed;
  const int64_t stage = t.stage, c = t.c, nodes = options.nodes,
                gpusPerNode = options.gpusPerNode;
  const bool cpuOffload = dsOptions.cpuOffload,
             cpuOffloadParams = dsOptions.cpuOffloadParams,
             oursOffloaded = t.oursOffloaded,
             paramsOffloaded = t.paramsOffloaded;
  auto &why = e.differences;
  if (oursOffloaded) {
    std::string where = cpuOffloadParams
                            ? "offload_optimizer=cpu and offload_param=cpu"
                            : "offload_optimizer=cpu";
    std::string text =
        "Offload: DeepSpeed's figure is with " + where + " (" +
        human(*e.deepspeed.bytes) + " per GPU, " +
        human(*e.deepspeedCpu.bytes) +
        " of host memory per node); ours offloaded keeps the params, "
        "grads and buffers on the device (" +
        human(e.offloadDeviceBytes) + ") and the fp32 masters, " +
        statesText(e) +
        " and the copies of the "
        "owned gradient" +
        (c == 4 ? "" : " and parameter") + " shard in pinned host memory (" +
        human(e.offloadHostBytes) + " per rank, " +
        human(e.offloadHostBytes * gpusPerNode) + " per node)";
    if (paramsOffloaded)
      text += "; with offload_param=cpu the owned parameter shard is in the "
              "same host arena in place of " +
              std::string(c == 4 ? "the fp32 masters (it is the masters "
                                   "again)"
                                 : "its copy") +
              ", and the device keeps the grads, the buffers and a staged "
              "copy of the largest group's shard (" +
              human(e.offloadParamDeviceBytes) + "): " +
              signedHuman(e.offloadParamDeviceBytes - *e.deepspeed.bytes) +
              " per GPU against DeepSpeed's.";
    else
      text += ": " + signedHuman(e.offloadDeviceBytes - *e.deepspeed.bytes) +
              " per GPU against DeepSpeed's.";
    if (model && model->planError.empty())
      text += " This model's plan (zero-pipeline " + model->planPipeline +
              ") has a pinned host arena of " +
              std::to_string(model->planHostBytes) + " bytes, " +
              signedHuman(model->planHostBytes - e.offloadHostBytes) +
              " against ours offloaded" +
              (stage == 3 ? " (each stage-3 group is padded and aligned "
                            "separately)."
                          : ".");
    why.push_back(text);
  }
  if (e.deepspeedNoOffloadBytes)
    why.push_back("In all: ours " + human(e.ourTotal) + " (model states " +
                  human(e.ourStates) + " + buffers) against DeepSpeed's " +
                  human(*e.deepspeedNoOffloadBytes) +
                  (cpuOffload ? " without offload" : "") + ": " +
                  signedHuman(e.ourTotal - *e.deepspeedNoOffloadBytes) + ".");
  if (stage >= 2) {
    const DeepSpeedOptions &o = dsOptions;
    std::string factor = o.additionalBufferFactor.str();
    std::string text = "DeepSpeed's host figure (" +
                       human(*e.deepspeedCpu.bytes) + " per node, " +
                       e.deepspeedCpu.formula + " with factor = " + factor +
                       ") ";
    if (!o.cpuOffload)
      text += std::string("is the memory to build the model on the host "
                          "before it moves to the GPUs: 4 bytes (fp32) per "
                          "parameter ") +
              (stage == 3 && o.zeroInit
                   ? "of the largest layer only (zero.Init partitions as it "
                     "builds)"
                   : "of the whole model") +
              " in each GPU's process";
    else if (stage == 2)
      text += "holds the fp32 master, gradients and Adam moments on the "
              "host, at least 16 bytes per parameter, 4 per parameter and "
              "GPU when that is more" +
              std::string(nodes > 1 ? " (DeepSpeed's code multiplies by the "
                                      "GPUs of all nodes where its docs say "
                                      "per node, so it grows with --nodes)"
                                    : "");
    else
      text += std::string("holds the node's share of the fp32 master, "
                          "gradients and Adam moments") +
              (o.cpuOffloadParams ? " and of the 16-bit parameters (18 "
                                    "bytes per parameter)"
                                  : " (16 bytes per parameter)") +
              (o.zeroInit ? ""
                          : ", or the whole fp32 model in each GPU's "
                            "process while it is built, if more");
    text += oursOffloaded ? "; ours is the pinned host arena, per rank."
                          : "; we plan device memory only.";
    why.push_back(text);
  }
}

/// fp32, the stages without a DeepSpeed estimator, frozen parameters, the
/// bytes per sharded parameter, the largest layer and the padding.
void explainModelStates(Estimate &e, const Terms &t) {
  const EstimateOptions &options = e.options;
  const std::optional<ModelCounts> &model = e.model;
  const int64_t stage = t.stage, s = t.s, n = t.n, c = t.c, frozen = t.frozen,
                alignment = options.alignment;
  const std::string &cs = t.cs;
  auto &why = e.differences;
  bool fp32 = options.dtype == "fp32";
  bool f32States = e.statePrecision == mlir::zero::StatePrecision::f32;
  if (e.bf16Masters && !fp32)
    why.push_back("Masters: the bf16 parameters are their own masters "
                  "(bf16_master_weights_and_grads), so ours keeps no fp32 "
                  "copy: " +
                  signedHuman(-4 * t.tshard) +
                  " a rank against 4 bytes per trainable parameter, which "
                  "DeepSpeed's estimators and the paper's K still count.");
  if (!f32States) {
    // DeepSpeed's estimators count fp32 Adam states whatever the precision
    // (bf16_optimizer_states does not reach them); ours counts an element's
    // bytes in the step's precision and a block-quantized state's absmaxes.
    int64_t absmaxes = int64_t(e.optimizerStates.size()) * t.absmaxBytes;
    why.push_back(
        "Optimizer: " + mlir::zero::stringifyOptimizerKind(e.optimizer).str() +
        " keeps " + statesText(e) + " (" + std::to_string(t.stateBytes) +
        " bytes per trainable parameter" +
        (e.absmaxBlock > 0 ? ", and each state an fp32 absmax per " +
                                 std::to_string(e.absmaxBlock) +
                                 " elements: " + human(absmaxes) + " a rank"
                           : std::string()) +
        "), where DeepSpeed's estimators count fp32 Adam's m and v (8 "
        "bytes) and stay as DeepSpeed computes them; the paper's K is 4 + " +
        std::to_string(t.stateBytes) + " = " +
        std::to_string(4 + t.stateBytes) +
        " here: " + signedHuman((t.stateBytes - 8) * t.tshard + absmaxes) +
        " for us against fp32 Adam states.");
  } else if (zrt::optimizers::hasStateParts(
                 static_cast<zrt::optimizers::Kind>(e.optimizer))) {
    // Muon keeps its momentum on its matrices and AdamW's moments on the
    // rest: which elements are which needs the layout, which a formula
    // does not have.
    auto kind = static_cast<zrt::optimizers::Kind>(e.optimizer);
    why.push_back(
        "Optimizer: " + mlir::zero::stringifyOptimizerKind(e.optimizer).str() +
        " keeps each state on its part of the parameters only (" +
        std::to_string(zrt::optimizers::partBytes(
            kind, zrt::optimizers::StatePart::Matrices)) +
        " bytes per element of its matrices, " +
        std::to_string(zrt::optimizers::partBytes(
            kind, zrt::optimizers::StatePart::Others)) +
        " per other element); " +
        (e.model && !e.model->planPartStateBytes.empty()
             ? std::string("the lines above count each part on the elements "
                           "a rank owns in this model's plan, as the "
                           "compiler's report does.")
             : "the lines above count every state on every parameter (" +
                   std::to_string(t.stateBytes) +
                   " bytes), an upper bound: `zero-opt --zero-report` counts "
                   "each part on the elements a rank owns.") +
        " DeepSpeed's estimators count Adam's m and v (8 bytes) and stay as "
        "DeepSpeed computes them.");
  } else if (!keepsAdamStates(e)) {
    // DeepSpeed's estimators and the paper's 16 bytes per parameter count
    // Adam's 8 bytes of states; ours counts the optimizer's own, on each of
    // a rank's trainable parameters.
    why.push_back(
        "Optimizer: " + mlir::zero::stringifyOptimizerKind(e.optimizer).str() +
        " keeps " + statesText(e) + " (" + std::to_string(t.stateBytes) +
        " bytes per trainable parameter), where "
        "DeepSpeed's estimators count Adam's m and v (8 bytes) and stay as "
        "DeepSpeed computes them; the paper's K is 4 + " +
        std::to_string(t.stateBytes) + " = " +
        std::to_string(4 + t.stateBytes) +
        " here: " + signedHuman((t.stateBytes - 8) * t.tshard) +
        " for us against Adam's states.");
    // A factored state (Adafactor's) keeps each matrix's row and column
    // statistics: the plan counts them by shape, numbers alone cannot.
    bool factored = llvm::any_of(e.optimizerStates, [&](const auto &state) {
      return zrt::optimizers::isFactored(
          static_cast<zrt::optimizers::Kind>(e.optimizer),
          static_cast<zrt::BufferKind>(state.buffer));
    });
    if (factored && model && model->planFactoredStateBytes)
      why.back() += " Its factored statistics (each matrix's row and column "
                    "means, each vector's elements) are " +
                    human(*model->planFactoredStateBytes) +
                    " a rank in this model's plan, " +
                    signedHuman(*model->planFactoredStateBytes -
                                t.stateBytes * t.tshard) +
                    " against those bytes per parameter; ours counts the "
                    "plan's.";
    else if (factored)
      why.back() += " Those bytes per parameter bound its factored "
                    "statistics (each matrix's row and column means), which "
                    "only a model file's plan counts by the tensors' shapes.";
  }
  if (fp32 && keepsAdamStates(e) && f32States)
    why.push_back("fp32: the parameters are the fp32 masters (no separate "
                  "copy): 4 (params) + 4 (grads) + 8 (Adam m, v) = 16 bytes "
                  "per parameter as in mixed precision (2 + 2 + 12), split "
                  "differently over the stages: 16S, 8S + 8S'/n, "
                  "4S + 12S'/n, 16S'/n (mixed precision: 16S, 4S + 12S'/n, "
                  "2S + 14S'/n, 16S'/n). DeepSpeed's estimators and the "
                  "paper assume fp16/bf16 mixed precision; their figures are "
                  "not comparable.");
  else if (fp32)
    why.push_back("fp32: the parameters are the fp32 masters (no separate "
                  "copy): 4 (params) + 4 (grads) + " +
                  std::to_string(t.stateBytes) + " (" + statesText(e) +
                  ") bytes per parameter. DeepSpeed's estimators and the "
                  "paper assume fp16/bf16 mixed precision; their figures are "
                  "not comparable.");
  if (stage <= 1)
    why.push_back(
        stage == 0
            ? std::string("DeepSpeed has no estimator for stage 0 (plain "
                          "data parallelism); the ZeRO paper counts 16 bytes "
                          "per parameter: 2 (16-bit params) + 2 (16-bit "
                          "grads) + 12 (fp32 master, m, v).")
            : std::string("DeepSpeed has no estimator for ZeRO-1 "
                          "(deepspeedai/DeepSpeed issue #5102); the paper's "
                          "4S + 12S/n is ") +
                  (fp32 ? "the mixed-precision split."
                        : "ours without padding."));
  if (frozen > 0)
    why.push_back(
        "Frozen parameters: " + std::to_string(frozen) +
        " of the S parameters are frozen; DeepSpeed's estimators count "
        "every parameter as trainable, the paper's formula frozen apart and "
        "ours give only the St trainable ones gradients, fp32 masters and " +
        (keepsAdamStates(e) ? std::string("Adam moments")
                            : "the optimizer's states") +
        " (ours pads them as one run; the compiler's report "
        "pads each run of them).");
  if (stage >= 2 && !fp32) {
    // DeepSpeed's 18 bytes per sharded parameter against our c + 4 + the
    // states (stage 2) or 2c + 4 + the states (stage 3).
    int64_t shardBytes = modelStateSplit(stage, c, t.optimizerBytes()).second;
    int64_t dsShard = 18 * s / n;
    int64_t ourShard = shardBytes * s / n;
    why.push_back(
        std::string("18 vs ") + std::to_string(shardBytes) +
        " bytes per sharded parameter: DeepSpeed counts an fp32 gradient "
        "copy (4 bytes) that we do not keep (the 16-bit gradient is unscaled "
        "and clipped inside the fused " +
        (keepsAdamStates(e)
             ? std::string("Adam")
             : mlir::zero::stringifyOptimizerKind(e.optimizer).str() +
                   " update") +
        ")" +
        (stage == 3 ? ", and no 16-bit gradient shard, which we keep (2 bytes)"
                    : "") +
        ": " + signedHuman(ourShard - dsShard) + " for us.");
  }
  if (stage >= 2) {
    if (stage == 3)
      why.push_back(
          "4L: DeepSpeed adds 2 bytes of gathered 16-bit parameters and 2 of "
          "16-bit gradients for the largest layer (" +
          human(4 * e.l) +
          "); we count the gathered buffer under gather buffers (" + cs +
          "L', padded) and the layer's gradients inside the reduce bucket.");
    // The older formula differs only without offload.
    if (stage == 2 && e.deepspeedDocs.bytes)
      why.push_back("The older formula in DeepSpeed's memory.rst, 4S + 16S/n "
                    "(" +
                    human(*e.deepspeedDocs.bytes) +
                    "), counted 4-byte "
                    "params and grads; PR #5099 changed the code to 2S + 18S/n "
                    "but not the docs.");
  }
  if (model && stage == 3)
    why.push_back("L is the model's largest stage-3 group (the unit "
                  "zero-partition gathers); DeepSpeed's all_live estimators "
                  "take the largest module's own parameters instead, so "
                  "their table for the same model in PyTorch can show "
                  "another L.");
  if (e.sPadded != e.s)
    why.push_back(
        "Padding: each rank owns S'/n with S' = " + std::to_string(e.sPadded) +
        " (S rounded up to a multiple "
        "of n * alignment = " +
        std::to_string(e.n * alignment) + "): " +
        signedHuman(e.ourStates -
                    modelStateBytes(stage, s, s, n, c, t.optimizerBytes())) +
        (stage == 3 ? " (every layer's group is padded "
                      "separately, so a real model pads a little "
                      "more)."
                    : "."));
}

/// The reduce buckets, the all-gather buckets and the prefetch window.
void explainBuffers(Estimate &e, const Terms &t) {
  const EstimateOptions &options = e.options;
  const std::optional<ModelCounts> &model = e.model;
  const int64_t stage = t.stage, c = t.c, bucketBytes = t.bucketBytes,
                buffers = t.buffers;
  const int64_t reduceBucketSize = options.reduceBucketSize,
                allgatherBucketSize = options.allgatherBucketSize,
                prefetchBucketSize = options.prefetchBucketSize;
  const bool overlapComm = options.overlapComm;
  const std::string &cs = t.cs;
  auto &why = e.differences;
  if (stage >= 2) {
    std::string text =
        "Reduce buckets (" + human(bucketBytes) + "): an upper bound, " +
        std::to_string(buffers) +
        " x min(reduce_bucket_size = " + std::to_string(reduceBucketSize) +
        ", S') elements of " + cs + " bytes, the buffer" +
        (overlapComm ? "s" : "") +
        " DeepSpeed allocates and its estimator ignores. The compiler's plan "
        "closes a bucket at reduce_bucket_size elements or earlier, when the "
        "next gradient to complete is not adjacent in the layout (a bias "
        "whose gradient completes before its weight's, tied weights, another "
        "stage-3 group), so its buckets follow the model's layers and are "
        "usually far smaller";
    if (model && model->planError.empty())
      text += ": this model's plan (zero-pipeline " + model->planPipeline +
              ") has buckets of at most " +
              std::to_string(model->planLargestBucket) +
              " elements and a bucket-buffer peak of " +
              human(model->planBucketPeakBytes) + ", " +
              signedHuman(model->planBucketPeakBytes - bucketBytes) +
              " against this line.";
    else if (model)
      text += "; this model's plan could not be formed at these options (" +
              model->planError + ").";
    else
      text += " (GPT-2 1.5B on 8 ranks at stage 2: 82052800 elements, the "
              "tied token embedding's gradient with the position embedding's "
              "and the first layer norm's, 156.50 MiB against 0.93 GiB "
              "here); `zero-estimate model.mlir` or `zero-opt --zero-report` "
              "gives a real model's.";
    why.push_back(text);
  } else
    why.push_back("Reduce buckets: at stages 0-1 gradients are reduced in "
                  "place in the persistent grads buffer, so there are none.");
  if (stage >= 1 && stage <= 2)
    why.push_back("All-gather buckets (allgather_bucket_size = " +
                  std::to_string(allgatherBucketSize) +
                  "): DeepSpeed ignores its buffer; we gather in place into "
                  "the params buffer, so we need none.");
  if (stage == 3 && prefetchBucketSize)
    why.push_back("Prefetch window: " + std::to_string(prefetchBucketSize) +
                  " elements gathered ahead of use (" +
                  human(c * prefetchBucketSize) +
                  "), which DeepSpeed's estimator ignores.");
  why.push_back("Neither counts activations, temporaries or NCCL buffers; "
                "`zero-opt --zero-report` gives the exact peak of a real "
                "step.");
}

} // namespace

bool zero::estimate::detail::keepsAdamStates(const Estimate &e) {
  return e.optimizerStates.size() == 2 &&
         e.optimizerStates[0].buffer == mlir::zero::BufferKind::exp_avg &&
         e.optimizerStates[1].buffer == mlir::zero::BufferKind::exp_avg_sq;
}

std::string zero::estimate::detail::statesText(const Estimate &e) {
  if (e.optimizerStates.empty())
    return "no state of " +
           mlir::zero::stringifyOptimizerKind(e.optimizer).str();
  std::string text;
  if (keepsAdamStates(e))
    text = "Adam's m and v";
  else
    for (size_t i = 0; i < e.optimizerStates.size(); ++i)
      text += (i == 0                              ? ""
               : i + 1 == e.optimizerStates.size() ? " and "
                                                   : ", ") +
              e.optimizerStates[i].label.str();
  if (e.statePrecision != mlir::zero::StatePrecision::f32)
    text +=
        " in " + mlir::zero::stringifyStatePrecision(e.statePrecision).str();
  return text;
}

void zero::estimate::detail::explainDifferences(Estimate &e, const Terms &t) {
  explainOffload(e, t);
  explainModelStates(e, t);
  explainBuffers(e, t);
}
