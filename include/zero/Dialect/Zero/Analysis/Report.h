//===- Report.h - Per-rank memory, communication and time of a step -*- C++
//-*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_DIALECT_ZERO_ANALYSIS_REPORT_H
#define ZERO_DIALECT_ZERO_ANALYSIS_REPORT_H

#include "zero/Dialect/Zero/Analysis/CostModel.h"

#include "llvm/Support/JSON.h"

#include <map>
#include <optional>
#include <string>

namespace mlir::zero {

/// Bytes a rank sends within its node and across nodes.
struct LinkBytes {
  int64_t intraNode = 0, interNode = 0;
};

/// The communication of one optimizer step (every micro step) as rank 0
/// sees it: its collectives with ring algorithms, two-level ones across
/// nodes (zero_rt/topology.h). The report prints it; the lowering writes
/// its bytes into the manifest's plan for the run to compare with what its
/// collectives measure.
struct CommPlan {
  /// Sum over collectives of the full array's elements (all-reduce twice),
  /// and the part that does not scale with the model.
  int64_t volumeElements = 0, constantVolumeElements = 0;
  /// Bytes rank 0 sends, and their split between the links within its node
  /// and those between nodes (intraNodeBytes + interNodeBytes).
  int64_t bytesPerRank = 0, intraNodeBytes = 0, interNodeBytes = 0;
  /// By CollectiveKind name: how many run, and the bytes rank 0 sends.
  std::map<std::string, int64_t> collectives;
  std::map<std::string, LinkBytes> bytesByKind;
};

/// The communication of `schedule`'s step; fails with a diagnostic on a
/// collective whose rank set does not split evenly by node, or counts that
/// overflow int64.
FailureOr<CommPlan> computeCommPlan(const StepSchedule &schedule);

/// The source of `op` when it is a view of expert weights that keeps
/// dimension 0 the experts': a cast, a reshape keeping dimension 0, or an
/// nn.add / nn.mul of a tensor broadcast over it (a bias [E, F] copied and
/// reshaped to [E, 1, F] for a grouped product); null otherwise. Slicing
/// the experts of its source slices its result the same way.
Value getExpertViewSource(Operation *op);

/// The zero.get_param that the expert weights `w` (an ExpertOpInterface
/// op's operand) are a view of, through getExpertViewSource; null when
/// they are not one.
GetParamOp getExpertParam(Value w);

/// A mixture of experts' parameters: those the ops of ExpertOpInterface
/// read (expert), the others (dense), and what one token computes with:
/// the dense ones and k / E of each expert tensor (k of a layer's E experts).
struct ExpertParamCounts {
  int64_t expertParams = 0, expertTensors = 0, denseParams = 0;
  int64_t activeParams = 0;
  /// The smallest and largest k and E over the expert tensors.
  int64_t minExpertsPerToken = 0, maxExpertsPerToken = 0;
  int64_t minExperts = 0, maxExperts = 0;
};

/// The expert split of `module`'s parameters; none when no op reads experts.
/// The counts are of the whole model: under expert parallelism a rank's
/// E / P slice of an expert tensor counts P times.
/// An expert tensor whose op cannot tell k counts as wholly active.
std::optional<ExpertParamCounts> countExpertParams(ModuleOp module);

/// Everything zero-report prints; byte and element counts are exact.
struct StepReport {
  int64_t stage = 0, worldSize = 1, accumulationSteps = 1;
  /// MiCS: the ranks of a shard group, which the model states are
  /// partitioned over (0 without MiCS).
  int64_t micsShardSize = 0;
  /// hpZ: the ranks of an hpZ group, which hold the secondary shards (1
  /// without hpZ, DeepSpeed's default).
  int64_t hpzPartitionSize = 1;
  /// Ranks on one node (the world size on one node).
  int64_t ranksPerNode = 1;
  int64_t paramCount = 0, paddedParamCount = 0, paramTensors = 0,
          largestParam = 0;
  /// Unpadded elements of the trainable and the frozen parameters (their
  /// sum is paramCount), and the padded elements of the trainable ones.
  int64_t trainableParamCount = 0, frozenParamCount = 0,
          paddedTrainableParamCount = 0;
  int64_t modelStateBytes = 0;
  /// Expert and dense parameters, active ones per token (none without
  /// experts).
  std::optional<ExpertParamCounts> experts;
  /// The vocabulary padding (zero-pad-vocab): rows and elements added, and
  /// the most bytes they take in one rank's model states.
  int64_t vocabPaddingRows = 0, vocabPaddingElements = 0, vocabPaddingBytes = 0;
  /// Model states by buffer; params and grads are in the compute type.
  int64_t params = 0, grads = 0, masterParams = 0;
  /// The optimizer's states (optimizers.def), in its table's order.
  struct OptimizerStateBytes {
    std::string key, label, buffer;
    int64_t bytes = 0;
  };
  std::vector<OptimizerStateBytes> optimizerStates;
  /// The optimizer's state bytes per parameter (optimizers.def: 8 for Adam,
  /// 4 for Lion), fp32 masters not counted.
  int64_t optimizerBytesPerParam = 8;
  /// The elements of each state that share one fp32 absmax (int8 states:
  /// 2048), 0 without absmaxes; the states' precision (#zero.optimizer's
  /// `states`).
  int64_t optimizerAbsmaxBlock = 0;
  std::string optimizerStatePrecision = "f32";
  /// The optimizer (#zero.optimizer's kind), and the elements of the
  /// parameters Muon updates (0 for another optimizer).
  std::string optimizer;
  int64_t muonMatrixParams = 0;
  /// An optimizer with state parts (Muon): the elements its states keep for
  /// each part on a rank, summed over the partitions (each partition's
  /// buffers hold the most of the part any rank owns), 0 otherwise.
  int64_t matrixStateElements = 0, otherStateElements = 0;
  /// Their bytes per element (optimizers.def's parts: Muon's 4 and 8).
  int64_t matrixStateBytes = 0, otherStateBytes = 0;
  /// A factored state's bytes on a rank (Adafactor's: the largest rank's
  /// per partition, summed), 0 without one.
  int64_t factoredStateBytes = 0;
  /// Muon: why zero-compile refuses the step (a matrix across a shard
  /// boundary, findMuonCrossing), empty when it lowers.
  std::string muonRefusal;
  /// Muon's owner-computes with gaps: the groups laid out with them, the
  /// elements their gaps add over the ranks (getMuonGapPadding) and to
  /// each rank's shard, the
  /// device bytes they add on a rank (parameters, gradients and masters:
  /// Muon's states are packed by part, which no gap is in).
  int64_t muonGapGroups = 0, muonGapElements = 0, muonGapRankElements = 0,
          muonGapBytes = 0;
  /// Muon at stage 3, groups of several layers (zero-partition's
  /// muon-group-layers): how many such groups, the layers they hold, the
  /// most layers one holds and the name and elements of the first of those.
  int64_t muonLayerGroups = 0, muonGroupedLayers = 0, muonGroupMostLayers = 0,
          muonGroupMostElements = 0;
  std::string muonGroupMostName;
  /// DeepSpeed's ZeRO-3 with the same optimizer (DeepSpeedEstimators.h):
  /// at stage 3 with 16-bit compute and no offload, none otherwise.
  struct DeepSpeedOptimizerFigures {
    int64_t modelStateBytes = 0, bytesPerRank = 0;
    std::string modelStateFormula;
  };
  std::optional<DeepSpeedOptimizerFigures> deepspeed;
  /// ZeRO++ hpZ: the persistent secondary shards (2 padded Psi / h bytes
  /// per rank with 16-bit compute), beside the model states.
  int64_t hpzSecondaryBytes = 0;
  /// The compute type of the parameters and gradients: fp32, bf16 or fp16.
  std::string paramDtype;
  /// Whether the parameters are their own masters (no master buffer): fp32
  /// ones, or bf16 ones with bf16Masters.
  bool paramsAreMasters = false;
  /// #zero.optimizer's bf16_masters (DeepSpeed's
  /// bf16_master_weights_and_grads).
  bool bf16Masters = false;
  int64_t reduceBucketBytes = 0, gatherBufferBytes = 0, activationBytes = 0;
  int64_t persistentBytes = 0, arenaBytes = 0, scratchBytes = 0, peakBytes = 0;
  /// Optimizer offload: the pinned host arena (its peak: it holds only
  /// persistent buffers and the swap buffers) by buffer kind, and the
  /// bytes of the rank's NVMe swap file (0 unless offloaded to nvme) by
  /// buffer kind (unpadded).
  bool optimizerOffloaded = false;
  /// Parameter offload (stage 3): the parameter shards are in the host arena.
  bool paramsOffloaded = false;
  /// Parameter offload to NVMe: the shards are in the ranks' parameter swap
  /// files (paramNvmeBytes of nvmeBytes) and move through paramSwapBytes of
  /// host swap buffers.
  bool paramsOnNvme = false;
  int64_t hostPeakBytes = 0, nvmeBytes = 0, swapBytes = 0;
  /// Activation offload: the host copies of the saved activations (part of
  /// hostPeakBytes).
  int64_t offloadedActivationBytes = 0;
  int64_t paramNvmeBytes = 0, paramSwapBytes = 0;
  /// With swap files: the rates one rank's swap-file I/O is predicted at,
  /// bytes/s (the preset's, shared where its ranks share a disk), and how
  /// many ranks share the disk (1: one disk per rank).
  double nvmeReadBandwidth = 0, nvmeWriteBandwidth = 0;
  int64_t ranksPerDisk = 1;
  std::map<std::string, int64_t> hostBuffers, nvmeBuffers;
  /// Sum over collectives of the full array's elements (all-reduce twice).
  int64_t volumeElements = 0;
  /// The part of volumeElements that does not scale with the model (the
  /// overflow flag and norm reduction).
  int64_t constantVolumeElements = 0;
  /// Bytes rank 0 sends with ring algorithms (two-level ones across nodes,
  /// zero_rt/topology.h), and their split between the links within its
  /// node and those between nodes (they add up to bytesPerRank).
  int64_t bytesPerRank = 0;
  int64_t intraNodeBytesPerRank = 0, interNodeBytesPerRank = 0;
  /// Collectives of each kind per step, and the bytes rank 0 sends in them.
  std::map<std::string, int64_t> collectives;
  std::map<std::string, LinkBytes> bytesByKind;
  std::string hardware;
  double predictedStepMs = 0, exposedCommMs = 0;
  /// Time compute waits for device-host copies (optimizer offload).
  double exposedTransferMs = 0;
  /// Compute time of recomputed forward ops (zero-remat), part of the step.
  double recomputeMs = 0;
  StepTimeline timeline;
  /// Whether the peak fits the device memory (none: no device memory known).
  std::optional<FitVerdict> fit;
  /// How far published runs on the preset's GPU were from their predictions
  /// (none: no run was compared on it).
  std::optional<ValidationBand> band;
  /// Whose kernels the prediction assumes; the band validates the fused
  /// runtime's predictions only, so an eager report has none.
  KernelRuntime runtime = KernelRuntime::Fused;
  /// The peer's gradient reduction width in bytes (0: the schedule's).
  int64_t reduceElementBytes = 0;
  /// Packed rows whose document lengths the report was given: the
  /// documents, the fill against one a padded row, the padding that saves
  /// and the attention work against full rows (the step's first packed
  /// attention's mask).
  struct PackingFigures {
    int64_t seq = 0, rows = 0, documents = 0, tokens = 0, savedSlots = 0;
    double fill = 0, paddedFill = 0, attentionFraction = 0;
  };
  std::optional<PackingFigures> packing;
};

/// The report of `schedule`; with `documents`, of its packed rows of those
/// documents (an error where the step attends over no packed rows of their
/// length).
FailureOr<StepReport> computeReport(const StepSchedule &schedule,
                                    const MemoryPlan &plan,
                                    const HardwarePreset &hw,
                                    const PeerOptions &peer = {},
                                    const DocumentLengths *documents = nullptr);
/// The fit verdict of `plan` in `deviceMemoryBytes`: its largest item is
/// the biggest of the persistent model states, the step-arena categories
/// live at the moment the arena holds the most, and the kernel scratch.
FitVerdict computeFitVerdict(const MemoryPlan &plan, int64_t deviceMemoryBytes);
llvm::json::Value reportToJson(const StepReport &report);
void printTextReport(const StepReport &report, llvm::raw_ostream &os);

} // namespace mlir::zero

#endif // ZERO_DIALECT_ZERO_ANALYSIS_REPORT_H
