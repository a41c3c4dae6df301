//===- Manifest.h - Compiled programs: manifest and context -----*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// The runtime's view of a zrt_program (Manifest.cpp): its parsed manifest,
// the per-rank layout arithmetic of ZeRO partitions, and the zrt_ctx that
// generated code addresses buffers and collectives through. The driver
// (Driver.cpp) owns the context; Program.cpp implements the zrt_ctx_* calls
// of zero_rt/program.h on top of this header.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_MANIFEST_IMPL_H
#define ZERO_RT_MANIFEST_IMPL_H

#include "Collectives/Flight.h"
#include "zero_rt/manifest.h"
#include "zero_rt/optimizers.h"
#include "zero_rt/program.h"
#include "zero_rt/topology.h"

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace zrt {

class SwapFile;

using InitKind = manifest::InitKind;

/// The shape weights files hold for a parameter of `shape`: with `rows`
/// rows when it is padded (rows >= 0; zero-pad-vocab appends zero rows that
/// no weights file shows), else `shape`.
inline std::vector<int64_t> unpaddedShape(std::vector<int64_t> shape,
                                          int64_t rows) {
  if (rows >= 0 && !shape.empty())
    shape[0] = rows;
  return shape;
}

/// The number of elements of `shape`.
inline int64_t numelOf(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

struct ParamInfo {
  std::string name;
  std::vector<int64_t> shape;
  int64_t numel = 0;
  InitKind init = InitKind::Zeros;
  double std = 0.0;
  int32_t partition = -1;
  /// Element offset in the partition's flat layout.
  int64_t offset = 0;
  /// Its own weight decay; negative: the optimizer's.
  double weightDecay = -1.0;
  /// Rows without padding (-1: not padded); the padding rows follow them.
  int64_t rows = -1;
  /// It does not train: no gradient, optimizer state or master copy.
  bool frozen = false;
  /// Expert parallelism: it holds experts [q * E / P, (q + 1) * E / P) of a
  /// tensor whose dimension 0 is P times shape[0] (1: the whole tensor), q
  /// the rank's index in its expert set.
  int64_t expertParallel = 1;
  /// Muon updates it whole, as [shape[0], numel / shape[0]] (optimizer muon).
  bool muon = false;
  /// The shape and element count of its weights in weights files.
  std::vector<int64_t> exportShape() const {
    return unpaddedShape(shape, rows);
  }
  int64_t exportNumel() const { return numelOf(exportShape()); }
};

/// The zrt_dtype of a partition computing in `name` ("f32", "bf16" or
/// "f16", the manifest's names), or -1 for another name.
int32_t computeDtypeOf(const std::string &name);

/// [begin, end) of a partition's layout.
struct Range {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end > begin ? end - begin : 0; }
};

struct PartitionInfo {
  std::string name;
  int64_t numel = 0, paddedNumel = 0, shardNumel = 0;
  /// The zrt_dtype its parameters compute in: of params, grads, their host
  /// copies and the collectives that move them. Partitions of one program
  /// may differ (a module kept in fp32 beside bf16 ones). Its manifest name
  /// ("f32", "bf16", "f16") and its element bytes.
  int32_t computeDtype = ZRT_F32;
  std::string computeDtypeName = "f32";
  int64_t computeBytes = 4;
  std::vector<std::string> params;
  /// The element offsets of its parameters in the flat layout, ascending:
  /// where a quantized shard is cut (zrt_quant_slot_bytes).
  std::vector<int64_t> paramStarts;
  /// Byte offsets in the persistent arena and element counts, by BufferKind.
  /// A buffer the partition lacks has offset -1 and count 0.
  std::array<int64_t, kNumBufferKinds> offsets{}, counts{};
  /// fp32 parameters are their own masters: there is no master buffer and
  /// the owned part of params is what Adam updates, exports and saves.
  bool paramsAreMasters = false;
  /// Its parameters are frozen: it has only a params buffer, which no step
  /// changes. Its owned values are what exports and checkpoints read:
  /// fp32 params as the masters, 16-bit ones widened exactly (there are no
  /// fp32 masters to round them from).
  bool frozen = false;
  /// Whether its owned masters are the 16-bit params themselves (bf16
  /// masters, #zero.optimizer's bf16_masters): there is no fp32 copy, so
  /// exports and checkpoints read them widened exactly and write them
  /// rounded to nearest even, as frozen 16-bit params.
  bool masters16() const { return paramsAreMasters && computeDtype != ZRT_F32; }
  /// Sharded over the rank's expert replica set (the ranks holding the
  /// same experts) instead of the world.
  bool expert = false;
  /// Which buffers the manifest lists, and which of them live in the host
  /// arena (an offloaded optimizer) or, at offsets[kind] of the rank's swap
  /// file, on NVMe.
  std::array<bool, kNumBufferKinds> present{}, onHost{}, onNvme{};

  bool hasBuffer(BufferKind kind) const { return present[kind]; }
  /// Whether the optimizer of this partition runs on the host.
  bool offloaded() const { return present[kHostGrads]; }
  /// Whether its stage-3 params shard lives off the device (parameter
  /// offload), in host memory or in the rank's parameter swap file:
  /// gathers read a staged device copy of it.
  bool paramsOffloaded() const { return onHost[kParams] || onNvme[kParams]; }
  /// Whether that shard is in host memory (a host Adam writes it in place).
  bool paramsOnHost() const { return onHost[kParams]; }
  /// Bytes of one element of buffer `kind`: the compute type's for the
  /// parameters, gradients and their host copies, fp32 otherwise.
  int64_t elementBytes(BufferKind kind) const {
    return kind == kParams || kind == kGrads || kind == kHostGrads ||
                   kind == kHostParams || kind == kSecondary
               ? computeBytes
               : 4;
  }
};

struct InputInfo {
  /// The name the library's step takes it by: the manifest's, else its
  /// role's (input_ids, labels, position_ids), else input<k>; unique.
  std::string name;
  /// The local micro-batch shape.
  std::vector<int64_t> shape;
  /// "f32", "bf16", "f16", "i32" or "i64".
  std::string dtype;
  int64_t offset = 0;
  /// Integer inputs read as indices (token ids, labels): their values must
  /// lie in [0, indexBound); -1 when the program puts no bound on them.
  int64_t indexBound = -1;
  /// The one value outside that range its users ignore (a loss's
  /// ignore_index), if any.
  std::optional<int64_t> ignoredIndex;
  /// What the step reads an integer input as (token ids, labels,
  /// positions), if any of its users reads it as indices.
  std::optional<manifest::IndexRole> role;

  int64_t numel() const;
  int64_t elementBytes() const;
};

/// The least time between two progress calls of zrt_ctx_step: shorter
/// than all but the smallest kernels.
constexpr int64_t kProgressIntervalNs = 20000;

/// The collective kinds of the communication accounting, the report's
/// CollectiveKind names in its order.
enum CommKind : int {
  kAllGather,
  kReduceScatter,
  kReduce,
  kAllReduce,
  kAllToAll
};
constexpr int kNumCommKinds = 5;
constexpr const char *kCommKindNames[kNumCommKinds] = {
    "all_gather", "reduce_scatter", "reduce", "all_reduce", "all_to_all"};

/// Bytes a rank sends within its node and between nodes.
struct LinkBytes {
  int64_t intraNode = 0, interNode = 0;
  bool operator==(const LinkBytes &o) const {
    return intraNode == o.intraNode && interNode == o.interNode;
  }
};

struct Manifest {
  int32_t version = 0;
  int32_t stage = 0;
  int32_t worldSize = 1;
  int32_t accumulationSteps = 1;
  int64_t globalBatch = 0;
  /// The compiled topology (zero_rt/topology.h): ranks per node (0: one
  /// node, the manifest has no topology), hpZ group size (1: none), MiCS
  /// shard group size (0: none).
  int64_t ranksPerNode = 0, hpzPartitionSize = 1, micsShardSize = 0;
  /// The loss scaler's kind, for the whole step (each partition has its
  /// own compute dtype).
  std::string precision; // fp32, bf16, fp16
  int64_t initialScalePower = 16, lossScaleWindow = 1000, hysteresis = 2;
  double minLossScale = 1.0;
  double lossScale = 0.0; // > 0: a static fp16 loss scale
  // DeepSpeed's steps_per_print and wall_clock_breakdown.
  int64_t stepsPerPrint = 1;
  bool wallClockBreakdown = false;
  /// The optimizer (optimizers.def).
  manifest::OptimizerKind optimizer = manifest::OptimizerKind::Adam;
  /// The precision its states are kept in (optimizers.def).
  optimizers::StatePrecision statePrecision = optimizers::StatePrecision::F32;
  /// bf16 params are their own masters (#zero.optimizer's bf16_masters).
  bool bf16Masters = false;
  double lr = 0;
  /// Every other hyper-parameter (optimizers.def's ZRT_HYPER_PARAM rows),
  /// by optimizers::HyperParam: true is 1, an enum's value its number.
  std::array<double, optimizers::kNumHyperParams> hyperParams =
      optimizers::hyperParamDefaults();
  /// The value of hyper-parameter `p`.
  double hyperParam(optimizers::HyperParam p) const {
    return hyperParams[static_cast<size_t>(p)];
  }
  /// The learning-rate schedule (kind ZRT_LR_CONSTANT without one), and
  /// the manifest's text of it (empty without one) that checkpoints record.
  zrt_lr_schedule schedule{};
  std::string scheduleText;
  /// total_num_steps "auto": the run's length, which the driver sets
  /// (resolveRunLength) before the first step.
  bool scheduleRunLength = false;
  /// A token file's windows feed the labels the tokens after the inputs
  /// (false) or the inputs' own tokens (true).
  bool sameTokenLabels = false;
  /// The loader shifts each whole row's labels left by one, the last one the
  /// labels' ignored index (labels `shifted`; implies sameTokenLabels).
  bool shiftedLabels = false;
  /// Ranks per sequence-parallel group (1: none).
  int64_t sequenceParallel = 1;
  /// Ranks per expert-parallel group (1: none) and where the groups lie
  /// (zero_rt/topology.h's ZRT_EXPERT_*).
  int64_t expertParallel = 1;
  int32_t expertPlacement = ZRT_EXPERT_CONTIGUOUS;
  double gradientClipping = 0;
  int64_t tokenSlots = 0;
  /// The schedule hash the compiler embedded, and its text ("0x...").
  uint64_t hash = 0;
  std::string hashText;
  std::vector<InputInfo> inputs;
  std::vector<ParamInfo> params;
  std::vector<PartitionInfo> partitions;
  /// The plan: peak = persistent + arena + the largest kernel scratch.
  int64_t persistentBytes = 0, arenaBytes = 0, scratchBytes = 0, peakBytes = 0;
  /// The pinned host arena of an offloaded optimizer (0: none).
  int64_t hostBytes = 0;
  /// An optimizer offloaded to NVMe: the size of each rank's swap file
  /// under nvmePath (0: none) and the swap buffers' region of the host
  /// arena.
  int64_t nvmeBytes = 0, swapOffset = 0, swapBytes = 0;
  std::string nvmePath;
  /// Parameters offloaded to NVMe: the size of each rank's parameter swap
  /// file under paramNvmePath (part of nvmeBytes, the total of the rank's
  /// swap files; 0: none) and its swap buffers' region of the host arena.
  int64_t paramNvmeBytes = 0, paramSwapOffset = 0, paramSwapBytes = 0;
  std::string paramNvmePath;
  /// The optimizer's swap file (0: none).
  int64_t optimizerNvmeBytes() const { return nvmeBytes - paramNvmeBytes; }
  /// A model imported from Hugging Face: its config.json text and its tied
  /// names, each a parameter's (absent: no Hugging Face export).
  std::optional<manifest::HfModel> hfModel;
  /// A PEFT LoRA model: adapter_config.json's text, the prefix of its
  /// other parameters and each adapted weight (absent: none).
  std::optional<manifest::Peft> peft;
  /// The index of the parameter named `name`, or -1.
  int64_t findParam(const std::string &name) const;
  /// The plan over the step (memory_timeline; empty when absent): live
  /// step-arena bytes and kernel scratch by op index, and the index of the
  /// first backward op (-1: none). --trace copies it next to the measurement.
  std::vector<int64_t> plannedLiveBytes, plannedScratchBytes;
  int64_t backwardStart = -1;
  /// The plan's communication of rank 0 per optimizer step by CommKind
  /// (plan.comm; hasPlannedComm false when absent, a kind the step does not
  /// run plans zero bytes).
  bool hasPlannedComm = false;
  std::array<LinkBytes, kNumCommKinds> plannedComm{};

  /// Parses and validates a manifest; throws std::runtime_error.
  static Manifest parse(const std::string &text);
  /// Sets a total_num_steps of "auto" (scheduleRunLength) to the run's
  /// length `steps`; throws when the schedule cannot be that long.
  void resolveRunLength(int64_t steps);

  /// The value of the optimizer's hyper-parameter `name` (`lr` or a
  /// ZRT_HYPER_PARAM row's name; true is 1), none for another name.
  std::optional<double> optimizerParam(std::string_view name) const;
  /// Whether the optimizer keeps state buffer `kind`: its row has it and
  /// its gate (ZRT_OPTIMIZER_STATE_GATE), if any, is not 0.
  bool keepsState(BufferKind kind) const;
  /// The bytes of buffer `kind` of partition `p`: its elements times their
  /// bytes, an optimizer state's in the states' precision (with its
  /// absmaxes: optimizers::stateBufferBytes).
  int64_t bufferBytes(const PartitionInfo &p, BufferKind kind) const;
  /// Whether the states are block-wise 8-bit (zrt_adam8bit's).
  bool int8States() const {
    return statePrecision == optimizers::StatePrecision::Int8;
  }
  /// Whether the states are bf16 (hostAdamBf16's).
  bool bf16States() const {
    return statePrecision == optimizers::StatePrecision::BF16;
  }

  /// The layout range rank `rank` owns: everything at stage 0, else
  /// [i * shard, (i + 1) * shard) clipped to numel for its shard index i.
  Range owned(const PartitionInfo &p, int rank) const;

  /// Shard `shard` of partition `p`: everything at stage 0.
  Range shardRange(const PartitionInfo &p, int64_t shard) const;
  /// The ranks a partition is sharded over: a MiCS shard group, the world,
  /// or an expert partition's expert replica set.
  int shardGroupSize(const PartitionInfo &p) const {
    return p.expert ? worldSize / int(expertParallel) : shardGroupSize();
  }
  /// The ranks the dense partitions are sharded over: a MiCS shard group,
  /// or the world.
  int shardGroupSize() const {
    return micsShardSize > 0 ? int(micsShardSize) : worldSize;
  }
  /// The shard rank `rank` owns of partition `p`: its index in its MiCS
  /// shard group (the replicas of a shard are the ranks with the same
  /// index), its index in its expert replica set, or the rank.
  int shardOf(const PartitionInfo &p, int rank) const {
    zrt_mesh m = mesh();
    return p.expert ? int(zrt_member_index(ZRT_RANKS_EXPERT_REPLICAS, rank, &m))
                    : shardOf(rank);
  }
  int shardOf(int rank) const {
    return micsShardSize > 0 ? rank % int(micsShardSize) : rank;
  }
  /// Rank `rank`'s index in its expert set: the experts it holds of a
  /// parameter split over the set.
  int64_t expertMember(int rank) const {
    zrt_mesh m = mesh();
    return zrt_member_index(ZRT_RANKS_EXPERT, rank, &m);
  }
  /// The ranks holding the same experts as `rank`, member j owning shard j.
  zrt_rank_set expertReplicas(int rank) const {
    zrt_mesh m = mesh();
    return zrt_rank_set_of(ZRT_RANKS_EXPERT_REPLICAS, rank, &m);
  }
  /// The ranks' axes, from the topology's sizes (zrt_mesh_from_sizes; the
  /// loader checked that they form one).
  zrt_mesh mesh() const {
    zrt_mesh m;
    zrt_mesh_from_sizes(&m, worldSize, hpzPartitionSize, micsShardSize,
                        sequenceParallel, expertParallel, expertPlacement);
    return m;
  }
};

/// The deterministic initializer: element `element` of parameter `param`
/// (its index in the manifest) for `seed`, independent of ranks and stages.
/// Normal values come from a counter-based generator (a SplitMix64 hash of
/// the triple, Box-Muller).
float initValue(const ParamInfo &p, uint64_t seed, uint64_t param,
                uint64_t element);
/// A standard normal sample keyed by (seed, stream, counter).
double counterNormal(uint64_t seed, uint64_t stream, uint64_t counter);

/// What the main thread is blocked on, for the driver's collective watchdog
/// (another thread): `what` is null while it is not waiting in an MPI call
/// the watchdog covers; `sinceNs` is when the wait began (steady clock).
struct WaitState {
  std::atomic<const char *> what{nullptr};
  std::atomic<int64_t> sinceNs{0};
};

/// Marks the main thread as blocked in `what` for its lifetime (no-op when
/// `state` is null). Nested scopes keep the outermost.
class WaitScope {
public:
  WaitScope(WaitState *state, const char *what);
  ~WaitScope();
  WaitScope(const WaitScope &) = delete;
  WaitScope &operator=(const WaitScope &) = delete;

private:
  WaitState *state = nullptr;
};

/// One span of a Chrome trace.
struct TraceEvent {
  std::string name;
  double startUs, durUs;
};

} // namespace zrt

/// The per-process state of a running program.
struct zrt_ctx {
  const zrt::Manifest *manifest = nullptr;
  zrt_comm *comm = nullptr;
  int rank = 0, world = 1;
  zrt_arena *persistentArena = nullptr, *stepArena = nullptr;
  char *persistent = nullptr, *step = nullptr;
  /// The pinned host arena of an offloaded optimizer (null: none).
  zrt_arena *hostArena = nullptr;
  char *host = nullptr;
  /// An optimizer on NVMe: the rank's swap file (owned by the driver) and
  /// the swap buffers in the host arena.
  zrt::SwapFile *nvme = nullptr;
  char *swap = nullptr;
  int64_t swapBytes = 0;
  /// Parameters on NVMe: the rank's parameter swap file (owned by the
  /// driver) and its swap buffers in the host arena.
  zrt::SwapFile *paramNvme = nullptr;
  char *paramSwap = nullptr;
  int64_t paramSwapBytes = 0;

  zrt_loss_scaler scaler{};
  /// Optimizer steps taken (skipped steps do not count), Adam's `t`
  /// (checkpoints and logs call it adam_steps).
  int64_t optimizerSteps = 0;
  /// The current step (1-based) and micro step (0-based).
  int64_t stepIndex = 0;
  int32_t micro = 0;
  /// Test hook: the steps [first, last] whose overflow flag is forced
  /// (first 0: none).
  int64_t injectOverflowFirst = 0, injectOverflowLast = 0;

  /// Waits on collectives the driver's watchdog watches (null: none).
  zrt::WaitState *waitState = nullptr;
  /// This rank's last collectives (Flight.h).
  zrt::FlightRecorder flight;

  /// A loss over the valid labels of the global batch (zero.count_labels):
  /// the count of each of this rank's micro batches of the step (the
  /// program's label count function), and their sum over the ranks.
  std::vector<int64_t> microLabels;
  int64_t stepLabels = 0;
  /// Whether the step counts labels (the count function has a
  /// zero.count_labels): the step's tokens are then stepLabels.
  bool countsLabels = false;
  /// Sums of the inputs over the global batch (zero.count_sum): sum k of
  /// each of this rank's micro batches, microSums[k][micro], and their
  /// total over the micro batches and ranks, stepSums[k].
  std::vector<std::vector<double>> microSums;
  std::vector<double> stepSums;
  /// Whether the evaluation step runs (zero.label_share reads 1 then).
  bool evaluating = false;

  /// The step's MoE figures (zrt_ctx_moe_exchange, counted by the forward
  /// exchanges that learn the counts): whether any ran, the most rows
  /// routed to one of this rank's experts in one layer, and the rows
  /// dropped at this rank past a capacity.
  bool moeExchanged = false;
  int64_t moeMaxExpertRows = 0, moeDroppedRows = 0;
  /// Where an exchange dropped rows of this rank: the rows each member kept
  /// of each of its local experts (MoeRoute::sendKept), by the exchange's
  /// `counts` tensor, for the return and the backward exchange that reuse
  /// those counts (the counts say what this rank received, not what the
  /// other members kept of its rows).
  std::map<const void *, std::vector<int64_t>> moeSendKept;

  // Results of the current step, for the driver.
  double lossSum = 0.0;
  int32_t lossCount = 0;
  float stats[2] = {0, 0};
  bool overflow = false, skipped = false;
  /// No valid label in the global batch: the step takes no optimizer step
  /// and the driver stops the run.
  bool noLabels = false;
  /// An overflow while the loss scale already was at its minimum and the
  /// hysteresis exhausted: where DeepSpeed raises.
  bool overflowAtMinScale = false;

  /// Outstanding asynchronous collectives by token slot.
  struct Pending {
    bool live = false;
    const char *what = "";
    /// The flight recorder's sequence number of the collective (-1: none).
    int64_t flight = -1;
    std::vector<int64_t> tokens;
    std::function<void()> done;
  };
  std::vector<Pending> slots;
  int32_t liveSlots = 0;
  /// When zrt_ctx_step last let the collectives progress (steadyNs).
  int64_t progressNs = 0;

  /// Chrome-trace spans when tracing; times relative to traceStart.
  bool tracing = false;
  std::chrono::steady_clock::time_point traceStart;
  std::vector<zrt::TraceEvent> trace;

  /// Pointer to buffer `kind` of partition `p`; null for a buffer in the
  /// swap file (onNvme), which is reached through `nvme`.
  template <typename T = char>
  T *buffer(int32_t p, zrt::BufferKind kind) const {
    const zrt::PartitionInfo &part = manifest->partitions[size_t(p)];
    if (part.onNvme[kind])
      return nullptr;
    return reinterpret_cast<T *>((part.onHost[kind] ? host : persistent) +
                                 part.offsets[kind]);
  }
  /// Whether buffer `kind` of partition `p` is in a swap file.
  bool onNvme(int32_t p, zrt::BufferKind kind) const {
    return manifest->partitions[size_t(p)].onNvme[kind];
  }
  /// The swap file a buffer of kind `kind` on NVMe lives in (the
  /// parameters' for params, else the optimizer's), and the swap buffers
  /// that go with it.
  zrt::SwapFile *swapFileOf(zrt::BufferKind kind) const {
    return kind == zrt::kParams ? paramNvme : nvme;
  }
  char *swapBufferOf(zrt::BufferKind kind) const {
    return kind == zrt::kParams ? paramSwap : swap;
  }
  int64_t swapBytesOf(zrt::BufferKind kind) const {
    return kind == zrt::kParams ? paramSwapBytes : swapBytes;
  }
  /// Whether buffer `kind` of partition `p` is in the host arena.
  bool onHost(int32_t p, zrt::BufferKind kind) const {
    return manifest->partitions[size_t(p)].onHost[kind];
  }
  double nowUs() const;
  /// Completes every outstanding slot; returns how many there were.
  int drainSlots();
};

namespace zrt {

// Helpers of the backends' zrt_ctx_* calls (Manifest.cpp).

/// Partition `p`; aborts naming `call` if it does not exist.
const PartitionInfo &partition(zrt_ctx *ctx, int32_t p, const char *call);
/// Rank `rank`'s owned part of [begin, end).
Range ownedPart(zrt_ctx *ctx, const PartitionInfo &p, int rank, int64_t begin,
                int64_t end);
/// Aborts unless [begin, end) lies in [0, limit).
void checkRange(const PartitionInfo &p, int64_t begin, int64_t end,
                int64_t limit, const char *call);
/// n as an int; aborts if it does not fit (MPI and NCCL counts).
int mpiInt(int64_t n, const char *call);
/// Per-member counts (and displacements from `begin`) of the owned parts of
/// [begin, end).
void splitByOwner(zrt_ctx *ctx, const PartitionInfo &p, int64_t begin,
                  int64_t end, std::vector<int> &counts,
                  std::vector<int> &displs, const char *call);
/// Records a collective's tokens in `slot` and runs `done` after
/// zrt_ctx_wait has waited for them (or now, after waiting, when slot < 0).
void launch(zrt_ctx *ctx, int32_t slot, const char *what,
            std::vector<int64_t> tokens, std::function<void()> done,
            int64_t flight = -1);
/// This rank's owned parameters in the compute type: the owned slice of the
/// full params buffer at stages 0-2, the front of the shard at stage 3.
char *ownedParams(const zrt_ctx &ctx, int32_t p);
/// This rank's fp32 masters (as many as it owns): the master buffer, or its
/// owned params when those are the masters.
float *ownedMasters(const zrt_ctx &ctx, int32_t p);
/// SGD's momentum buffer of partition `p`, null when the partition has none
/// (momentum 0).
float *momentumBuffer(const zrt_ctx &ctx, int32_t p);
/// A block-wise 8-bit state buffer (Manifest::int8States): its fp32
/// absmaxes, one per block of its elements, first (so that they are as
/// aligned as the buffer), then one code per element.
struct Int8State {
  float *absmax;
  uint8_t *codes;
};
Int8State int8State(const zrt_ctx &ctx, int32_t p, BufferKind kind);
/// The first gradient element this rank owns and how many: the owned range
/// of the full buffer at stages 0-1, the front of the shard at 2-3.
std::pair<char *, int64_t> ownedGrads(zrt_ctx *ctx, int32_t p,
                                      const PartitionInfo &part);
/// The loss-scale update of a step from the all-reduced host stats
/// {overflow flag, squared norm}: records them in the context, applies the
/// overflow test hook, and returns 1 when the step is skipped.
int32_t updateLossScale(zrt_ctx *ctx, const float *stats);

} // namespace zrt

#endif // ZERO_RT_MANIFEST_IMPL_H
