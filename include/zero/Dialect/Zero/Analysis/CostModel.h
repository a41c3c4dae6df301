//===- CostModel.h - Predicted step time of a scheduled step ----*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// An alpha-beta model of the collectives and a roofline model of the compute
// ops, per hardware preset, simulated on one compute and one communication
// stream with the schedule's dependencies (async collectives run on the
// communication stream from their issue to their zero.wait).
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_DIALECT_ZERO_ANALYSIS_COSTMODEL_H
#define ZERO_DIALECT_ZERO_ANALYSIS_COSTMODEL_H

#include "zero/Dialect/Zero/Analysis/DocumentLengths.h"
#include "zero/Dialect/Zero/Analysis/MemoryPlan.h"
#include "zero/Dialect/Zero/Analysis/Schedule.h"

#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>
#include <vector>

namespace mlir::zero {

/// The rates of one rank while `ranks` ranks share a node's cores (the
/// `cpu` preset: its ranks are processes on one machine, so each gets less
/// of it the more there are).
struct RankShare {
  int64_t ranks = 1;
  double gemmFlops = 0;
  double memoryBandwidth = 0;
  double kernelOverhead = 0;
  /// 0: the preset's (a single rank has no collectives to calibrate).
  double linkBandwidth = 0;
  double collectiveLatency = 0;
  /// Fused attention FLOP rate (0: the GEMM rate).
  double attentionFlops = 0;
  /// Output elements per second of the compute-bound pointwise and
  /// normalization kernels (0: bandwidth-bound only).
  double activationElements = 0;
  /// Latency of a ring step issued back to back, and the compute time after
  /// which `collectiveLatency` was measured (see HardwarePreset).
  double backToBackLatency = 0;
  double skewCompute = 0;
  /// Bus bandwidth of reduce-scatters and all-gathers (0: linkBandwidth,
  /// which all-reduces use).
  double reduceScatterBandwidth = 0;
  double allGatherBandwidth = 0;
};

/// The rates a fused attention kernel reaches, as published for one GPU, by
/// direction, head dimension, causality and query length
/// (docs/HardwarePresets.md): TFLOP/s on a reference GPU of dense 16-bit
/// peak `referencePeak`, counted as the cost model counts attention FLOPs.
struct AttentionRates {
  /// Query lengths of the measurements, ascending.
  ArrayRef<double> seqLens;
  /// Forward without a mask at head dimension 64 and 128, forward with a
  /// causal mask at 128, and backward without a mask at 64 and 128.
  ArrayRef<double> forward64, forward128, forwardCausal128, backward64,
      backward128;
  double referencePeak = 0;
  /// What a preset of another architecture reaches of its own peak, over
  /// what the reference reaches of its peak, at their best (1: the same
  /// architecture as the reference).
  double forwardScale = 1, backwardScale = 1;

  /// The fraction of the dense 16-bit peak a kernel of this shape reaches:
  /// interpolated in log2 of the query length (clamped to the measured
  /// ones) and linearly in the head dimension between 64 and 128 (clamped);
  /// a causal mask scales the unmasked rate by the forward's causal over
  /// unmasked ratio at head dimension 128 and that length.
  double getPeakFraction(int64_t headDim, int64_t seqLen, bool causal,
                         bool backward) const;
};

/// The bus bandwidth NCCL reaches on one node by message size, as a
/// published nccl-tests sweep on `ranks` GPUs reports it
/// (docs/HardwarePresets.md): the full array's bytes and the busbw at each.
/// Small sizes are latency-bound, so the curve holds the collective's
/// latency as well as its bandwidth.
struct BusBandwidthCurve {
  /// Full-array sizes of the sweep in bytes, ascending, and the bus
  /// bandwidth at each in GB/s.
  ArrayRef<double> bytes, gbps;
  int64_t ranks = 8;

  /// The bus bandwidth in bytes/s of a ring step that sends `chunkBytes`
  /// (the full array over the ring's members): under the ring's alpha-beta
  /// time, busbw depends on that chunk alone, so it reads the sweep at
  /// `ranks` chunks, interpolated in log2 of the size between the sweep's
  /// points. Below the smallest the time stays that point's (latency);
  /// above the largest the busbw stays its last. At most `peak`.
  double getBusBandwidth(double chunkBytes, double peak) const;
};

/// Machine parameters of the cost model.
struct HardwarePreset {
  StringRef name;
  StringRef description;
  /// Dense GEMM throughput in FLOP/s for 16-bit and fp32 operands.
  double gemmFlops16 = 0;
  double gemmFlops32 = 0;
  /// Sustained device-memory bandwidth in bytes/s (elementwise ops, Adam).
  double memoryBandwidth = 0;
  /// Per-rank bandwidth of the collective ring in bytes/s (NVLink/NVSwitch
  /// bus bandwidth as NCCL reports it, or shared memory for `cpu`).
  double linkBandwidth = 0;
  /// Latency of one ring step of a collective, seconds.
  double collectiveLatency = 0;
  /// Fixed cost of launching one kernel, seconds.
  double kernelOverhead = 0;
  /// The fabric between nodes: network links per node (0: none; the nodes
  /// of the `cpu` preset are groups of processes on one machine, so their
  /// cross-node level runs over shared memory like the one within a node,
  /// at linkBandwidth and collectiveLatency), the line rate of each in
  /// bytes/s each way, and the latency of one cross-node ring step, seconds.
  int64_t interNodeLinks = 0;
  double interNodeLinkBandwidth = 0;
  double interNodeLatency = 0;
  /// Device memory one rank may use, in bytes: the data sheet's capacity in
  /// decimal units (80 GB = 80e9 B; see docs/HardwarePresets.md). 0: none
  /// known (`cpu`), so a report gives no fit verdict unless told one.
  int64_t deviceMemoryBytes = 0;
  /// Calibrated per-rank rates by ranks per node, ascending (empty: the
  /// rates above hold for any world size, one device per rank).
  ArrayRef<RankShare> shares = {};
  /// FLOP rate of the fused attention kernels (0: the GEMM rate), as the
  /// model counts their FLOPs (QK^T and PV; 2.5x that backward).
  double attentionFlops = 0;
  /// Output elements per second of GELU, its gradient and the layer-norm
  /// backward, which a tanh polynomial or row statistics per element make
  /// compute-bound on a CPU core (0: their bytes at memoryBandwidth only).
  double activationElements = 0;
  /// Ranks that share cores drift apart while they compute, and a blocking
  /// collective waits for the slowest: `collectiveLatency` was measured
  /// after `skewCompute` seconds of compute. A collective issued after less
  /// compute than that (since the previous one) pays the back-to-back
  /// latency plus that fraction of the difference. 0: a constant latency.
  double backToBackLatency = 0;
  double skewCompute = 0;
  /// Bus bandwidth of reduce-scatters (and reduces to owners) and of
  /// all-gathers, where the collective library runs them slower or faster
  /// than all-reduces (0: linkBandwidth).
  double reduceScatterBandwidth = 0;
  double allGatherBandwidth = 0;
  /// Optimizer offload: the copy rate between device and pinned host memory
  /// in one direction, bytes/s (PCIe; 0: a memcpy that reads and writes
  /// each byte at memoryBandwidth, the `cpu` preset), and the rate at which the
  /// CPU Adam streams its 28-32 bytes per parameter through host memory (0:
  /// memoryBandwidth).
  double hostLinkBandwidth = 0;
  double hostMemoryBandwidth = 0;
  /// Optimizer offload to NVMe: the sequential read and write rates of the
  /// swap files' disk, bytes/s (assumed; see docs/HardwarePresets.md).
  double nvmeReadBandwidth = 0;
  double nvmeWriteBandwidth = 0;
  /// Whether device-host copies run on the compute stream (the CPU
  /// backend's memcpy on the calling thread) rather than on a copy engine
  /// beside it: then none of their time overlaps compute.
  bool copiesOnComputeStream = false;
  /// Whether every rank's swap files are on one disk (the `cpu` preset's
  /// ranks are processes on one machine) rather than one disk per rank:
  /// then the ranks, which reach their swap-file I/O at the same points of
  /// the step, share its rates.
  bool nvmeSharedByRanks = false;
  /// The data sheet's dense 16-bit tensor peak, FLOP/s (0: none; the rates
  /// by kernel shape below are fractions of it).
  double peakFlops16 = 0;
  /// Streaming multiprocessors (compute units) that the tiles of a GEMM are
  /// spread over in waves (0: no tile model; the `cpu` preset).
  int64_t multiprocessors = 0;
  /// The rate of a 16-bit GEMM with a dimension that is not a multiple of
  /// 16 bytes, as a fraction of gemmFlops16 (0: no such penalty).
  double misalignedGemmFraction = 0;
  /// Fused attention rates by shape (null: attentionFlops, or the GEMM
  /// rate).
  const AttentionRates *attention = nullptr;
  /// All-gathers' and reduce-scatters' bus bandwidth within a node by
  /// message size (null: the flat bandwidth above plus collectiveLatency
  /// per ring step).
  const BusBandwidthCurve *busbwCurve = nullptr;

  /// The bandwidth each way, bytes/s, that a cross-node ring gets from all
  /// of a node's links together: the fraction of the line rate NCCL's ring
  /// bus bandwidth reaches, as for the links within a node.
  double getInterNodeBandwidth() const;

  /// The rates of a rank in a world of `worldSize` ranks: the share row of
  /// the largest calibrated `ranks` <= worldSize, its compute rates divided
  /// further when more ranks than that share the node; a disk the ranks
  /// share divides its rates among all of them.
  HardwarePreset forWorldSize(int64_t worldSize) const;
};

/// The known presets (a100-40gb, ..., mi300x, cpu).
ArrayRef<HardwarePreset> getHardwarePresets();
/// The preset named `name` (or one of its aliases), or null.
const HardwarePreset *lookupHardwarePreset(StringRef name);
/// The preset names, comma-separated, for diagnostics and help.
std::string getHardwarePresetNames();

/// How far the cost model's predictions on one GPU were from published
/// training runs (docs/CostModel.md): each run's ratio of predicted to
/// published throughput, which is also the published step over the
/// predicted one. A measured step is expected between `minRatio` and
/// `maxRatio` times the predicted step.
struct ValidationBand {
  /// The GPU the runs ran on (A100, H100) and how many there were.
  StringRef gpu;
  int64_t runs = 0;
  double minRatio = 0, maxRatio = 0;
};
/// The band of the GPU of preset `name` (or an alias), or none where no
/// published run was compared on one of its presets.
std::optional<ValidationBand> lookupValidationBand(StringRef name);

/// Applies `--inter-node-bandwidth` (`text`: Gb/s per link each way, a
/// positive decimal number, optionally followed by `Gb/s` or `Gbps`) to
/// `hw`, replacing its links' line rate; an empty `text` changes nothing.
/// On failure `error` says what is wrong.
LogicalResult applyInterNodeBandwidth(HardwarePreset &hw, StringRef text,
                                      std::string &error);

/// A byte count such as `24GiB`, `80 GB`, `1.5MiB` or `4096`: a decimal
/// number and an optional unit, binary (KiB, MiB, GiB, TiB) or decimal (B,
/// KB, MB, GB, TB), case-insensitive. A fractional result is rounded down.
/// None for a malformed, zero or negative count, or one above 2^62 bytes.
std::optional<int64_t> parseByteSize(StringRef text);

/// A memory budget (zero-pipeline's `memory-budget=`, zero-compile's and
/// zero-tune's `--memory-budget`): a whole or decimal number of bytes,
/// optionally followed without a space by KiB, MiB, GiB, TiB or decimal KB,
/// MB, GB, TB (or B). On failure `error` says what is wrong with `text`.
std::optional<int64_t> parseMemoryBudget(StringRef text, std::string &error);

/// Whether `arg`, a command-line argument left over, is the unit of a memory
/// budget written with a space: `--memory-budget 40 GB` leaves `GB`.
bool isStrayByteUnit(StringRef arg);

/// `bytes` in the largest binary unit that keeps the number >= 1, with two
/// decimals (`512 B`, `1.50 KiB`, `37.25 GiB`).
std::string formatByteSize(int64_t bytes);

/// Whether a step whose peak is `peakBytes` fits in `deviceMemoryBytes`.
struct FitVerdict {
  int64_t deviceMemoryBytes = 0;
  /// deviceMemoryBytes - peakBytes: negative when it does not fit.
  int64_t freeBytes = 0;
  bool fits = false;
  /// The biggest contributor to the peak and its bytes.
  std::string largestItem;
  int64_t largestItemBytes = 0;
};

/// "fits: X free of Y" or "does not fit by X; largest item: NAME SIZE".
void printFitVerdict(const FitVerdict &fit, llvm::raw_ostream &os);

/// One interval of the predicted timeline.
struct TimelineEvent {
  std::string name;
  std::string category; ///< "compute", "comm", "copy" or "wait"
  /// 0 compute, 1 communication, 2 device-host copies, 3 the swap files'
  /// disk (parameter shards on NVMe).
  unsigned stream = 0;
  double startUs = 0;
  double durationUs = 0;
  Operation *op = nullptr;
  /// Bytes the op moves (memory traffic of a kernel, or the full array of a
  /// collective) and the FLOPs it performs (trace arguments).
  double bytes = 0;
  double flops = 0;
  /// Micro step of a gradient-accumulation window (0 without accumulation).
  int64_t microStep = 0;
};

/// The predicted timeline of one step on one rank (all ranks are alike).
struct StepTimeline {
  double stepMs = 0;
  /// Time the compute stream spends waiting for communication.
  double exposedCommMs = 0;
  /// Time it spends waiting for device-host copies (optimizer offload),
  /// and their total time on the copy stream.
  double exposedTransferMs = 0;
  double transferMs = 0;
  double computeMs = 0;
  double commMs = 0;
  /// Compute time of the ops zero-remat cloned (`zero.recompute`), part of
  /// computeMs.
  double recomputeMs = 0;
  std::vector<TimelineEvent> events;
};

/// Whose kernels the compute ops run as (docs/CostModel.md).
enum class KernelRuntime {
  /// Each op as one fused kernel: ours, or a well-tuned or compiled peer's.
  Fused,
  /// As an eager PyTorch peer runs the ops whose reference modules are
  /// chains of unfused kernels (RMSNorm, RoPE, SwiGLU, the fp32 loss): the
  /// ops' KernelCost::eagerBytes and eagerLaunches; with FSDP2's copies
  /// around its collectives and PyTorch's foreach AdamW.
  Eager,
  /// As that eager peer with each transformer block compiled
  /// (`torch.compile` of each block, torchtitan's `apply_compile`): the
  /// blocks' ops fused, and what runs outside them eager (the loss, and the
  /// FSDP2 copies and optimizer of the eager profile).
  Compiled,
};
/// `fused`, `eager` or `compiled`; none for another name.
std::optional<KernelRuntime> parseKernelRuntime(StringRef name);

/// How a published peer runs the step where it differs from our schedule in
/// the time it takes but not in what the plan holds (docs/CostModel.md): the
/// options of a report that compares with its runs.
struct PeerOptions {
  PeerOptions(KernelRuntime runtime = KernelRuntime::Fused)
      : runtime(runtime) {}
  KernelRuntime runtime;
  /// Element bytes of the gradients the peer's reduce-scatters move and its
  /// copy-in writes (FSDP2's `reduce_dtype=float32`: 4), 0: the schedule's.
  int64_t reduceElementBytes = 0;
};

/// Predicts the step time of `schedule` on `hw`, run as `peer` runs it;
/// with `documents`, its attention over packed rows by their documents'
/// lengths.
FailureOr<StepTimeline>
simulateStep(const StepSchedule &schedule, const HardwarePreset &hw,
             const PeerOptions &peer = {},
             const DocumentLengths *documents = nullptr);

/// Chrome-trace JSON (opens in Perfetto): one process per rank, a compute and
/// a communication thread each.
void writeChromeTrace(const StepTimeline &timeline, int64_t worldSize,
                      llvm::raw_ostream &os);

} // namespace mlir::zero

#endif // ZERO_DIALECT_ZERO_ANALYSIS_COSTMODEL_H
