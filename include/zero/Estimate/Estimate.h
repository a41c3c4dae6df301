//===- Estimate.h - Model-state memory of a hypothetical model --*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// zero-estimate's accounting: DeepSpeed's
// estimate_zero{2,3}_model_states_mem_needs answer for a model given as
// numbers (S, L) or read off a model file, with DeepSpeed's offload options
// and its *_all_cold table over them, byte for byte (DeepSpeedEstimators.h),
// beside our per-rank accounting of the same inputs (the buffers
// zero-partition and zero-plan-memory create, without offload and with the
// optimizer offloaded to host memory) and a line-by-line explanation of
// every difference, and whether that fits a device. A real step gets the
// exact peak from `zero-opt --zero-report`.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_ESTIMATE_ESTIMATE_H
#define ZERO_ESTIMATE_ESTIMATE_H

#include "zero/Dialect/Zero/Analysis/CostModel.h"
#include "zero/Dialect/Zero/Analysis/DeepSpeedEstimators.h"
#include "zero/Dialect/Zero/Analysis/Report.h"
#include "zero/Dialect/Zero/IR/Optimizers.h"

#include "mlir/IR/BuiltinOps.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace zero::estimate {

/// Above this the byte counts (at most 20 bytes per parameter) could overflow.
constexpr int64_t kMaxParams = int64_t(1) << 58;

/// What an estimate is asked for; zero-estimate's options, checked.
struct EstimateOptions {
  /// The ZeRO stage: 0, 1, 2 or 3.
  int64_t stage = 0;
  int64_t gpusPerNode = 0, nodes = 0;
  /// The training precision: "bf16", "fp16" or "fp32".
  std::string dtype;
  /// The backend the model will train on, as zero-compile's --target: "cpu"
  /// or "cuda" (which pads a 16-bit step's vocabulary to 64 rows; a model
  /// file is counted and planned padded).
  std::string target = "cpu";
  /// The optimizer of a model given as numbers (--optimizer): every state
  /// its optimizers.def row may keep. A model file's own train step names
  /// its optimizer instead (ModelCounts::optimizer).
  mlir::zero::OptimizerKind optimizer = mlir::zero::OptimizerKind::adamw;
  /// The bf16 parameters of a model given as numbers are their own masters
  /// (--bf16-masters, DeepSpeed's bf16_master_weights_and_grads); a model
  /// file's train step says so itself (ModelCounts::bf16Masters).
  bool bf16Masters = false;
  /// Partition padding: S is rounded up to a multiple of ranks * alignment.
  int64_t alignment = 0;
  /// DeepSpeed's reduce_bucket_size, allgather_bucket_size and (stage 3)
  /// stage3_prefetch_bucket_size, in elements, and its overlap_comm.
  int64_t reduceBucketSize = 0, allgatherBucketSize = 0, prefetchBucketSize = 0;
  bool overlapComm = false;
  /// DeepSpeed's offload options (stages 2-3); the offloaded plans of ours
  /// that the verdict counts follow them.
  DeepSpeedOptions deepspeed;
  /// The device memory of the fit verdict: a hardware preset's name, and a
  /// byte count (e.g. "24GiB") that overrides it; both empty: no verdict.
  std::string hardware, deviceMemory;
  /// Overrides the preset's inter-node line rate (Gb/s per link; see
  /// mlir::zero::applyInterNodeBandwidth), for the time of the traffic
  /// across nodes.
  std::string interNodeBandwidth;
  /// Stage 3 with a model file: compile it under ZeRO-3 and each ZeRO++ and
  /// MiCS option (ZeroPPOption; qgZ across nodes only), with the hpZ
  /// partition size and the MiCS shard size given here (0: the ranks per
  /// node).
  bool zeropp = false;
  int64_t hpzPartitionSize = 0, micsShardSize = 0;
  /// Expert parallelism (zero-compile --ep-size): the ranks that split each
  /// MoE layer's experts (1: off; a model file with experts otherwise).
  int64_t epSize = 1;
};

/// One ZeRO++ or MiCS option of zero-estimate --zeropp: ours is the
/// compiler's plan of the model under it (the memory plan and the report's
/// communication, as zero-report prints them), theirs the papers' formulas
/// in S (the parameters) and M = cS (their bytes): the per-rank model
/// states (DeepSpeed's 16S/n, the ZeRO++ paper's secondary partition, MiCS's
/// states over its shard group) and the communication volume across nodes
/// per rank and step (the ZeRO++ paper's 3M of ZeRO-3, 0.75M of ZeRO++, and
/// MiCS's all-reduce over the replicas).
struct ZeroPPOption {
  std::string name;
  /// The zero-pipeline options beyond the estimate's own.
  std::string pipeline;
  /// The pipeline's refusal, if it refused; the numbers are then unset.
  std::string error;
  int64_t modelStateBytes = 0, secondaryBytes = 0, peakBytes = 0;
  int64_t intraNodeBytes = 0, interNodeBytes = 0;
  /// With --hardware: the predicted step.
  double predictedStepMs = 0;
  std::string theirMemoryFormula;
  int64_t theirMemoryBytes = 0;
  std::string theirVolumeFormula;
  /// The volume across nodes in units of M.
  double theirVolume = 0;
};

/// S and L as the model file gives them.
struct ModelCounts {
  /// The model file, as named on the command line.
  std::string file;
  int64_t params = 0, paramTensors = 0, largestParam = 0;
  /// The elements of its frozen parameters (Sf; St = params - Sf).
  int64_t frozenParams = 0;
  /// A mixture of experts' split of S: expert and dense parameters and the
  /// active ones per token (none without experts).
  std::optional<mlir::zero::ExpertParamCounts> experts;
  /// The optimizer of its train step and the states it keeps with the
  /// step's hyper-parameters (SGD without momentum keeps none).
  mlir::zero::OptimizerKind optimizer = mlir::zero::OptimizerKind::adamw;
  llvm::SmallVector<mlir::zero::OptimizerState> optimizerStates;
  /// The step's state precision (#zero.optimizer's `states`): each state's
  /// `bytes` above are an element's in it, and a block-quantized one also
  /// keeps an fp32 absmax per `absmaxBlock` elements of each state (0: none).
  mlir::zero::StatePrecision statePrecision = mlir::zero::StatePrecision::f32;
  int64_t absmaxBlock = 0;
  /// #zero.optimizer's bf16_masters: the bf16 parameters are their own
  /// masters (no fp32 copy).
  bool bf16Masters = false;
  /// The largest stage-3 gather group (zero-partition's per-layer groups) and
  /// its name.
  int64_t largestGroup = 0;
  std::string largestGroupName;
  /// The compiler's plan of the step at the estimate's stage, ranks, dtype
  /// and bucket options (stages 2-3, where gradients go through bucket
  /// buffers): its largest bucket in elements and the peak bytes of bucket
  /// buffers, or why there is none.
  int64_t planLargestBucket = 0, planBucketPeakBytes = 0;
  /// With --cpu-offload, the plan's pinned host arena (offload-optimizer=cpu,
  /// and offload-param=cpu with --cpu-offload-params).
  int64_t planHostBytes = 0;
  /// A factored optimizer state (Adafactor's): the bytes per rank of its
  /// buffers in the plan, which sizes them by the tensors' shapes (absent
  /// when the plan could not be formed: the estimate keeps the table's
  /// bytes per parameter, a bound).
  std::optional<int64_t> planFactoredStateBytes;
  /// The states an optimizer keeps by part (Muon's momentum on its
  /// matrices, AdamW's moments on the rest): each buffer's bytes per rank
  /// in the plan, by BufferKind (empty when the plan could not be formed).
  std::map<unsigned, int64_t> planPartStateBytes;
  std::string planPipeline, planError;
  /// With --zeropp: each option compiled.
  llvm::SmallVector<ZeroPPOption> zeropp;
};

/// One line of the report: a named byte count and the formula behind it.
struct Line {
  std::string key;
  std::string label;
  std::string formula;
  std::optional<int64_t> bytes; ///< none: no such estimator
};

/// The bytes rank 0 sends per step in the collectives of one kind that
/// plain ZeRO runs over the model states, split between the links within
/// its node and those between nodes (zero_rt/topology.h's two-level
/// collectives), with the formulas in S' (S at stage 0), K ranks per node,
/// N nodes and n ranks.
struct LinkTraffic {
  std::string kind;
  /// Collectives of the kind over the whole model per step.
  int64_t count = 0;
  std::string intraFormula, interFormula;
  int64_t intraBytes = 0, interBytes = 0;
};

/// Our model states under expert parallelism P (zero-estimate --ep-size):
/// each rank holds E/P experts of a layer, X/P of the X expert parameters,
/// partitioned over the n/P ranks holding the same experts (expert data
/// parallel), and the D dense parameters partitioned over all n, as
/// zero-partition places them. DeepSpeed's estimators know no experts.
struct ExpertParallelEstimate {
  int64_t size = 1;
  /// E and E/P (the largest layer's), X, X/P, n/P and D.
  int64_t experts = 0, expertsPerRank = 0;
  int64_t expertParams = 0, expertParamsPerRank = 0, replicas = 0;
  int64_t denseParams = 0;
  /// D' and (X/P)' padded to multiples of n and n/P times the alignment
  /// (unpadded at stage 0).
  int64_t densePadded = 0, expertPadded = 0;
  /// The dense states, the expert states and their sum, per rank.
  llvm::SmallVector<Line> lines;
  int64_t modelStateBytes = 0;
};

/// An estimate: its inputs, DeepSpeed's figures and the paper's, ours, why
/// they differ and the fit verdict.
struct Estimate {
  EstimateOptions options;
  /// The model file S and L were read from; none for numbers.
  std::optional<ModelCounts> model;
  /// S, L, the ranks n, the bytes c of a 16-bit or fp32 element, and S and L
  /// padded to multiples of n * alignment (S unpadded at stage 0).
  int64_t s, l, n, c, sPadded, lPadded;
  /// The optimizer counted (the model file's, else --optimizer's) and the
  /// states it keeps, each a line of ours.
  mlir::zero::OptimizerKind optimizer;
  llvm::SmallVector<mlir::zero::OptimizerState> optimizerStates;
  /// The model file's state precision and absmax block (ModelCounts); f32
  /// and none for numbers.
  mlir::zero::StatePrecision statePrecision = mlir::zero::StatePrecision::f32;
  int64_t absmaxBlock = 0;
  /// The bf16 parameters are their own masters (the model file's
  /// bf16_masters, else --bf16-masters): no fp32 master copy.
  bool bf16Masters = false;
  Line deepspeed, deepspeedDocs, paper;
  /// A model with frozen parameters: the paper's formula with only the
  /// trainable ones carrying gradients and optimizer states.
  std::optional<Line> paperFrozen;
  /// Stages 2-3: DeepSpeed's host-memory estimate at its options (per node),
  /// the third value estimate_zero3 returns, its GPU bytes at the same
  /// options without offload, and its *_all_cold table.
  Line deepspeedCpu;
  std::optional<int64_t> deepspeedLargestLayerMemory;
  std::optional<int64_t> deepspeedNoOffloadBytes;
  llvm::SmallVector<std::string> deepspeedTableHeader;
  llvm::SmallVector<DeepSpeedRow> deepspeedTable;
  llvm::SmallVector<Line> ours;
  int64_t ourStates = 0, ourTotal = 0;
  /// Stages 2-3: our plan with the optimizer in host memory
  /// (offload_optimizer=cpu, the compiler's offload-optimizer=cpu): the
  /// device total without the masters and moments, and the pinned host
  /// buffers as zero-plan-memory lays them out, with the arena's total.
  std::optional<Line> offloadDevice;
  llvm::SmallVector<Line> offloadHost;
  int64_t offloadDeviceBytes = 0, offloadHostBytes = 0;
  /// Stage 3: our plan with the parameters offloaded too (offload_param=cpu,
  /// the compiler's offload-param=cpu): the device total without the
  /// persistent parameter shard but with the staged device copy of the
  /// largest group's shard. The host arena is offloadHost's: the parameter
  /// shard takes the place of the parameter copy (or, in fp32, of the
  /// masters, which the parameters are again).
  std::optional<Line> offloadParamDevice;
  int64_t offloadParamDeviceBytes = 0;
  llvm::SmallVector<std::string> differences;
  /// The per-link traffic of the stage's collectives, by kind (on one node
  /// all within it; the text prints it only across nodes).
  llvm::SmallVector<LinkTraffic> traffic;
  int64_t trafficIntraBytes = 0, trafficInterBytes = 0;
  /// With --hardware (a preset with a network between nodes): the bytes/s
  /// across nodes one rank gets while the node's ranks all cross at once,
  /// and the seconds trafficInterBytes takes at that rate (0: no preset).
  double trafficInterBandwidth = 0, trafficInterSeconds = 0;
  /// With --ep-size: our model states under expert parallelism.
  std::optional<ExpertParallelEstimate> expertParallel;
  /// The verdict for the device memory of --hardware / --device-memory.
  std::optional<mlir::zero::FitVerdict> fit;
  std::string deviceMemorySource;
};

/// S and the largest stage-3 group of `module`, read from `file`, as
/// zero-partition forms the groups (it runs on `module` at stage 3 on one
/// rank), and at stages 2-3 the buckets of the plan zero-pipeline makes of
/// a copy at `options` (and with --zeropp the plan of each option). Errors
/// are reported through the context's diagnostics.
std::optional<ModelCounts> countModel(mlir::ModuleOp module,
                                      llvm::StringRef file,
                                      const EstimateOptions &options);

/// Our accounting of S = `sParams` and L = `lParams` (of the model `counts`
/// come from, when given) beside DeepSpeed's and the paper's; an error where
/// DeepSpeed's estimate has no 64-bit byte count.
llvm::Expected<Estimate> computeEstimate(int64_t sParams, int64_t lParams,
                                         std::optional<ModelCounts> counts,
                                         const EstimateOptions &options);

/// zero-estimate's text output: the lines, DeepSpeed's table, the verdict
/// and the differences.
void printEstimateText(const Estimate &e, llvm::raw_ostream &os);

/// zero-estimate's JSON output.
void printEstimateJson(const Estimate &e, llvm::raw_ostream &os);

} // namespace zero::estimate

#endif // ZERO_ESTIMATE_ESTIMATE_H
