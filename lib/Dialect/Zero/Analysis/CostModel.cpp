//===- CostModel.cpp - Predicted step time of a scheduled step ------------===//
//
// Part of the zero-mlir project.
//
// Compute ops follow a roofline: launch overhead plus the larger of their
// FLOPs at the GEMM rate and their bytes at the memory bandwidth. Collectives
// follow the alpha-beta ring model of nccl-tests (doc/PERFORMANCE.md), where
// the link bandwidth is the bus bandwidth NCCL reports, so
//   all_reduce(B)              = 2(n-1) alpha + 2(n-1)/n B / busbw
//   all_gather, reduce_scatter = (n-1) alpha  +  (n-1)/n B / busbw
// with B the bytes of the full array and n the members of its rank set.
// A set that spans several nodes runs in two levels (zero_rt/topology.h):
// a ring of the q members within each node, at the link bandwidth above,
// and a ring among the members of the same local index across the N nodes,
// at the node's inter-node bandwidth shared by its ranks, which all cross
// at once:
//   within the node  = p(q-1) alpha        + p(q-1)/q B / busbw
//   across the nodes = p(N-1) alpha_inter  + p(N-1)/n B / (inter bw / ranks)
// with p the passes (2 for all-reduce). On one node q = n and the second
// term vanishes. On presets with a published busbw curve by message size
// (HardwarePreset::busbwCurve), an all-gather's or reduce-scatter's ring
// within a node takes p(q-1)/q B / busbw(B / q) instead, latency included.
// One compute and one communication stream are simulated in program order;
// see simulateStep.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/Analysis/CostModel.h"
#include "zero/Dialect/Zero/IR/Optimizers.h"

#include "zero/Dialect/NN/IR/NNDialect.h"
#include "zero/Interfaces/RuntimeKernelOpInterface.h"
#include "zero_rt/quantize.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace mlir::zero;

//===----------------------------------------------------------------------===//
// Simulation
//===----------------------------------------------------------------------===//

/// Bytes of a value; non-tensor values (flags, tokens) count as nothing.
static double valueBytes(Value v) {
  return isa<RankedTensorType>(v.getType()) ? getTensorBytes(v.getType()) : 0;
}

static double sumBytes(ValueRange values) {
  double bytes = 0;
  for (Value v : values)
    bytes += valueBytes(v);
  return bytes;
}

namespace {

/// The work of one op: kernel FLOPs and bytes, or a collective's full array.
struct Work {
  enum Kind { Free, Kernel, Collective, Transfer } kind = Free;
  /// Kernels: run by the host CPU on host memory (the offloaded Adam).
  bool onHost = false;
  /// Host Adams of an optimizer on NVMe: the swap file bytes read and
  /// written, in `chunks` pipelined chunks.
  double nvmeRead = 0, nvmeWrite = 0;
  int64_t chunks = 0;
  /// Transfers: between two host buffers (a memcpy, not over the host link).
  bool hostCopy = false;
  double flops = 0;
  double bytes = 0;
  /// Kernels: GEMM element type (decides the FLOP rate).
  Type gemmType;
  /// Collectives: ring steps per (n-1) and bandwidth factor per (n-1)/n.
  unsigned ringPasses = 1;
  /// Collectives: the members of the rank set and those on each node.
  int64_t members = 1, membersPerNode = 1;
  /// Collectives: which bus bandwidth of the preset they move at.
  enum Pattern {
    AllReduce,
    ReduceScatter,
    AllGather,
    AllToAll
  } pattern = AllReduce;
  /// Collectives: bytes of the kernel the compute stream runs once the
  /// collective is complete (a bucket reduction's add into the gradient
  /// shard), at its wait.
  double completionBytes = 0;
  /// Collectives: bytes a copy on the communication stream reads and
  /// writes before the collective (a runtime's staging of its input).
  double copyInBytes = 0;
  /// Kernels: a fused attention (its own FLOP rate where the preset has one).
  bool attention = false;
  /// Kernels: the GEMM's or attention's shape (KernelCost).
  int64_t batch = 0, m = 0, n = 0, k = 0, headDim = 0, seqLen = 0;
  bool causal = false, backward = false;
  /// Kernels: how many launches the op's work takes.
  int64_t launches = 1;
  /// Kernels: the bytes of the all-reduces the kernel waits on between
  /// its passes (Adafactor's sums), over `members` ranks.
  SmallVector<double, 2> blockingAllReduceBytes;
  /// Kernels: output elements of a compute-bound pointwise or normalization
  /// kernel (timed at the preset's activation rate where it has one).
  double activationElements = 0;

  static Work kernel(double bytes, double flops = 0, Type gemmType = {}) {
    Work w;
    w.kind = Kernel;
    w.bytes = bytes;
    w.flops = flops;
    w.gemmType = gemmType;
    return w;
  }
  static Work transfer(double bytes) {
    Work w;
    w.kind = Transfer;
    w.bytes = bytes;
    return w;
  }
  static Work collective(double bytes, unsigned passes, Pattern pattern) {
    Work w;
    w.kind = Collective;
    w.bytes = bytes;
    w.ringPasses = passes;
    w.pattern = pattern;
    return w;
  }
};

class Simulator {
public:
  Simulator(const StepSchedule &schedule, const HardwarePreset &hw,
            const PeerOptions &peer, const DocumentLengths *documents)
      : schedule(schedule), hw(hw), runtime(peer.runtime),
        reduceElementBytes(peer.reduceElementBytes), documents(documents),
        n(schedule.getWorldSize()) {}

  FailureOr<StepTimeline> run();

private:
  FailureOr<Work> getWork(Operation *op) const;
  // The work of the ZeRO ops by family.
  FailureOr<Work> getCollectiveWork(CollectiveOpInterface collective) const;
  Work getTransferWork(TransferOpInterface transfer) const;
  Work getOptimizerStepWork(OptimizerStepOp adam) const;
  /// The update's own passes over memory (getOptimizerStepWork adds what
  /// it waits on).
  Work getOptimizerUpdateWork(OptimizerStepOp adam) const;
  Work getKernelWork(RuntimeKernelOpInterface op) const;
  /// Element bytes of group `ref`'s compute type.
  int64_t getGroupElementBytes(SymbolRefAttr ref) const;
  /// Elements of group `ref` this rank owns (its gradients' owned range at
  /// stages 0-1, the shard accumulator at 2-3; its optimizer shard).
  double getOwnedElements(SymbolRefAttr ref) const;
  double seconds(const Work &w) const;
  /// Runs the completion kernel of collective `op` (if any) on the compute
  /// stream, now that it is done.
  void complete(Operation *op, const Work &w);
  void record(Operation *op, std::string name, const Work &w,
              StringRef category, unsigned stream, double start,
              double duration);
  /// Blocks the compute stream until `until`, recording the wait.
  void blockUntil(Operation *op, std::string name, double until);
  LogicalResult step(Operation *op);

  const StepSchedule &schedule;
  const HardwarePreset &hw;
  KernelRuntime runtime;
  int64_t reduceElementBytes;
  /// The packed rows' documents (null: attention over packed rows priced
  /// as full rows).
  const DocumentLengths *documents;
  int64_t n;
  int64_t microStep = 0;
  /// diskFree: the swap files' disk (parameter shards on NVMe).
  double computeFree = 0, commFree = 0, copyFree = 0, diskFree = 0;
  /// Compute-stream time when the last collective was issued, and the
  /// compute since then at the collective being timed (the ranks' skew).
  double lastCollective = 0, computeSinceCollective = 0;
  /// Whether the wait being recorded is one of a device-host copy.
  bool transferWait = false;
  llvm::DenseMap<Value, double> tokenDone;
  /// Tokens of device-host copies (their waits are exposed transfer time).
  llvm::DenseSet<Value> transferTokens;
  /// The collectives whose completion kernel runs at their token's wait.
  llvm::DenseMap<Value, std::pair<Operation *, Work>> tokenCompletion;
  /// Reads of parameter shards on NVMe: the copy into the staged buffer
  /// that runs at their token's wait.
  llvm::DenseMap<Value, std::pair<Operation *, Work>> swapCopyAtWait;
  /// Runs the copy of a transfer through a swap buffer on the compute
  /// stream (the runtime does it on the host, synchronously), exposed.
  void swapCopy(Operation *op, const Work &w);
  StepTimeline timeline;
};

} // namespace

int64_t Simulator::getGroupElementBytes(SymbolRefAttr ref) const {
  const PartitionBuffers *p = schedule.lookupPartition(ref);
  return p ? getElementBytes(p->computeType) : 2;
}

double Simulator::getOwnedElements(SymbolRefAttr ref) const {
  const PartitionBuffers *p = schedule.lookupPartition(ref);
  // The Adam moments are exactly the owned shard.
  return p ? p->getOptimizerNumel() : 0;
}

Work Simulator::getKernelWork(RuntimeKernelOpInterface op) const {
  KernelCost cost = op.getKernelCost();
  Work w = Work::kernel(cost.bytes, cost.flops,
                        cost.kind == KernelCost::Kind::Gemm ||
                                cost.kind == KernelCost::Kind::Attention
                            ? cost.computeType
                            : Type());
  w.attention = cost.kind == KernelCost::Kind::Attention;
  // Each packed document attends to itself only: the pairs its mask keeps.
  if (w.attention && cost.documents && documents)
    w.flops *=
        documents->getAttentionFraction(cost.seqLen, cost.causal, cost.window);
  w.activationElements = cost.activationElements;
  w.batch = cost.batch;
  w.launches = cost.launches;
  // An eager peer's unfused kernels in place of the fused one; a peer that
  // compiles each transformer block runs the loss, outside them, eager.
  bool eager = runtime == KernelRuntime::Eager ||
               (runtime == KernelRuntime::Compiled &&
                op->hasTrait<nn::OpTrait::LossKernel>());
  if (eager && cost.eagerLaunches > 0) {
    w.bytes = cost.eagerBytes;
    w.launches = cost.eagerLaunches;
  }
  w.m = cost.m;
  w.n = cost.n;
  w.k = cost.k;
  w.headDim = cost.headDim;
  w.seqLen = cost.seqLen;
  w.causal = cost.causal;
  w.backward = cost.backward;
  return w;
}

FailureOr<Work>
Simulator::getCollectiveWork(CollectiveOpInterface collective) const {
  Operation *op = collective.getOperation();
  // The full array: a layout range or the tensor moved, in the elements
  // the collective moves.
  double bytes;
  int64_t eb = schedule.getCollectiveElementBytes(collective);
  if (std::optional<std::pair<int64_t, int64_t>> range =
          collective.getElementRange()) {
    int64_t elements = range->second - range->first;
    // Over the MiCS replicas: the rank's owned part of the range (the
    // most any rank owns).
    const PartitionBuffers *group =
        schedule.lookupPartition(collective.getGroupAttr());
    if (collective.getRankSetKind() == RankSetKind::replicas && group)
      elements = std::min(elements, std::min(group->partition.getShardNumel(),
                                             group->partition.getNumelValue()));
    bytes = double(elements) * eb;
  } else if (Value moved = collective.getMovedValue())
    bytes =
        double(cast<RankedTensorType>(moved.getType()).getNumElements()) * eb;
  else
    return op->emitOpError("cost model: a collective without a range or "
                           "a value");
  zrt_rank_set set = schedule.getRankSet(collective, /*rank=*/0);
  int64_t perNode = schedule.getMembersPerNode(set);
  if (perNode == 0)
    return op->emitOpError("cost model: its ")
           << set.size << " ranks do not split evenly over nodes of "
           << schedule.getNodeSize() << " ranks";
  Work w;
  if (collective.getQuantizationBits() &&
      collective.getCollectiveKind() == CollectiveKind::reduce_scatter) {
    // qgZ: each member's part travels as an INT4 chunk; its two
    // all-to-alls send at each level what a two-level ring of those
    // chunks sends (zrt_quantized_reduce_scatter_link_bytes). Quantizing
    // the bucket, the node sums and the final sum stream through the
    // staging, written and read once, and the sum is added to the shard.
    auto [b, e] = *collective.getElementRange();
    PartitionOp g =
        schedule.lookupPartition(collective.getGroupAttr())->partition;
    SmallVector<int64_t> parts = schedule.getOwnedParts(g, b, e);
    FailureOr<StepSchedule::ReductionTemp> temp = schedule.getReductionTemp(op);
    if (failed(temp))
      return op->emitOpError("cost model: its staging overflows int64");
    w = Work::collective(double(zrt_qgz_all_bytes(parts.data(), 0, set.size)),
                         1, Work::ReduceScatter);
    w.completionBytes =
        bytes + 2.0 * double(temp->stagingBytes) + 3.0 * bytes / set.size;
    w.members = set.size;
    w.membersPerNode = perNode;
    return w;
  }
  if (int32_t bits = collective.getQuantizationBits()) {
    // qwZ: the members' quantized shards travel; quantizing this rank's
    // shard and dequantizing the gathered buffer stream on completion.
    PartitionOp g =
        schedule.lookupPartition(collective.getGroupAttr())->partition;
    double chunk = double(g.getQuantizedSlotBytes(bits));
    double elems = getGroupElementBytes(collective.getGroupAttr());
    double members = double(set.size);
    w = Work::collective(members * chunk, 1, Work::AllGather);
    w.completionBytes =
        double(g.getShardNumel()) * elems + chunk + members * chunk + bytes;
    w.members = set.size;
    w.membersPerNode = perNode;
    return w;
  }
  switch (collective.getCollectiveKind()) {
  case CollectiveKind::all_gather:
    w = Work::collective(bytes, 1, Work::AllGather);
    break;
  case CollectiveKind::all_reduce:
    w = Work::collective(bytes, 2, Work::AllReduce);
    break;
  case CollectiveKind::all_to_all:
    // Each member sends (P - 1) / P of the tensor, one chunk per peer.
    w = Work::collective(bytes, 1, Work::AllToAll);
    break;
  case CollectiveKind::reduce_scatter:
  case CollectiveKind::reduce: {
    // A reduce to each owner moves what a reduce-scatter does. A bucket
    // reduction of stages 2-3 ends with the add of this rank's sum into
    // its gradient shard (read both, write one) once complete. A peer that
    // reduces in a wider type (FSDP2's reduce_dtype) moves and adds its
    // elements at that width.
    double reduced = bytes;
    if (reduceElementBytes > eb)
      reduced = bytes / double(eb) * double(reduceElementBytes);
    w = Work::collective(reduced, 1, Work::ReduceScatter);
    if (schedule.getStage() >= 2)
      w.completionBytes = 3.0 * reduced / double(set.size);
    break;
  }
  }
  // FSDP2, the eager peer's runtime (also where it compiles the blocks),
  // gathers into a buffer of its own and copies the parameters out of it
  // on the compute stream once gathered, and copies the gradients into a
  // buffer to reduce on the communication stream, converting them to the
  // reduction's type: a pass over the full array each.
  bool fsdp2 = runtime != KernelRuntime::Fused;
  if (fsdp2 && w.pattern == Work::AllGather)
    w.completionBytes += 2.0 * bytes;
  if (fsdp2 && w.pattern == Work::ReduceScatter)
    w.copyInBytes = bytes + w.bytes;
  w.members = set.size;
  w.membersPerNode = perNode;
  return w;
}

Work Simulator::getTransferWork(TransferOpInterface transfer) const {
  // The rank's owned elements of the source buffer; of a range, the
  // ranks' mean share of it (a range within one shard is copied by its
  // owner alone, but every rank copies as many elements over the step).
  const PartitionBuffers *p = schedule.lookupPartition(transfer.getGroupAttr());
  std::optional<BufferKind> from = transfer.getSourceBuffer();
  int64_t eb = from == BufferKind::master
                   ? 4
                   : getGroupElementBytes(transfer.getGroupAttr());
  // A staged parameter shard is fetched whole (the all-gather sends all
  // of it); the new parameters go back as the owned elements.
  Work w;
  if (transfer.getStagedValue() && from == BufferKind::params) {
    w = Work::transfer(getTensorBytes(transfer.getStagedValue().getType()));
  } else {
    double elements = p ? p->getOptimizerNumel() : 0;
    if (std::optional<std::pair<int64_t, int64_t>> range =
            transfer.getElementRange())
      elements = double(range->second - range->first) / double(n);
    w = Work::transfer(elements * double(eb));
  }
  // A parameter shard on NVMe: the whole shard's blocks are read from or
  // written to the swap file, through a host swap buffer; from host
  // memory (a host Adam's result) the copy into that buffer is a memcpy.
  if (transfer.getSwapAttr() && p) {
    double blocks = double(llvm::alignTo(
        p->bytes[static_cast<unsigned>(BufferKind::params)], kNvmeAlignment));
    (from == BufferKind::params ? w.nvmeRead : w.nvmeWrite) = blocks;
    w.hostCopy = from && p->getMemory(*from) == MemoryKind::host;
  }
  return w;
}

/// PyTorch's foreach AdamW step after foreach gradient clipping
/// (torch/optim/adamw.py `_multi_tensor_adamw`, torch/nn/utils/clip_grad.py
/// `clip_grad_norm_`): the fp32 values each op reads and writes an element,
/// and the ops. Clipping: `_foreach_norm` (g), `_foreach_mul_` (g, g).
/// AdamW: `_foreach_mul_` (p, p), `_foreach_lerp_` (m, g, m), `_foreach_mul_`
/// (v, v), `_foreach_addcmul_` (v, g, g, v), `_foreach_sqrt` (v, d),
/// `_foreach_div_` (d, d), `_foreach_add_` (d, d), `_foreach_addcdiv_` (p, m,
/// d, p).
constexpr double kForeachAdamWFloats = 3 + 21;
constexpr int64_t kForeachAdamWOps = 2 + 8;

Work Simulator::getOptimizerStepWork(OptimizerStepOp adam) const {
  Work w = getOptimizerUpdateWork(adam);
  // Adafactor's update all-reduces its sums twice among the group's ranks
  // (stages 1-3; zero_rt/adafactor.h's counts, doubles) and waits on each:
  // small, so mostly their latency.
  const PartitionBuffers *p = schedule.lookupPartition(adam.getGroupAttr());
  if (adam.getOptimizerKind() == OptimizerKind::adafactor && p &&
      schedule.getStage() > 0 && schedule.getWorldSize() > 1) {
    zrt_rank_set set{0, 1, schedule.getWorldSize()};
    w.members = set.size;
    w.membersPerNode = schedule.getMembersPerNode(set);
    // Ranks that do not split evenly over nodes: the report refuses them.
    if (w.membersPerNode > 0)
      for (int64_t count : {p->adafactorFirstReduce,
                            p->adafactorSums - p->adafactorFirstReduce})
        if (count > 0)
          w.blockingAllReduceBytes.push_back(8.0 * double(count));
  }
  return w;
}

Work Simulator::getOptimizerUpdateWork(OptimizerStepOp adam) const {
  // Each update reads and writes the fp32 master and the optimizer's states
  // (optimizers.def): 24 B per element for Adam, 16 B for Lion.
  const int64_t states =
      2 * (4 + (adam.getOptimizer()
                    ? getOptimizerStateBytes(adam.getOptimizer())
                    : getOptimizerStateBytes(adam.getOptimizerKind())));
  if (adam.getHost()) {
    // The CPU update streams the host masters, states (`states`), the host
    // gradient copy and the 16-bit parameter copy it writes; the device
    // gradients are cleared by a device kernel, which this neglects.
    SymbolRefAttr group = adam.getGroupAttr();
    int64_t c = getGroupElementBytes(group);
    const PartitionBuffers *p = schedule.lookupPartition(group);
    // With offloaded parameter shards it writes the 16-bit shard in place
    // (any shard when the masters are on NVMe).
    int64_t copy = p && (p->hasBuffer(BufferKind::host_params) ||
                         (p->paramsOffloaded && !p->areParamsMasters()))
                       ? c
                       : 0;
    double owned = getOwnedElements(group);
    Work w = Work::kernel(owned * (states + c + copy));
    w.onHost = true;
    if (NvmeSwapAttr swap = adam.getSwapAttr()) {
      // It reads the masters and states from the swap file and writes them
      // back, in whole 4096-byte blocks.
      w.nvmeRead = w.nvmeWrite =
          double(adam.getNvmeBytes(static_cast<int64_t>(owned)));
      w.chunks = std::max<int64_t>(
          1, llvm::divideCeil(static_cast<int64_t>(owned), swap.getChunk()));
    }
    return w;
  }
  // The eager peer's AdamW (torchtitan's default, PyTorch's foreach
  // implementation) after its foreach gradient clipping, on the fp32
  // sharded parameters, gradients and moments: one pass of each foreach op
  // over the owned elements, each op launching once per 320 chunks of
  // 65,536 elements (multi_tensor_apply). An Adam step is priced alike.
  SymbolRefAttr group = adam.getGroupAttr();
  OptimizerKind kind = adam.getOptimizerKind();
  if (runtime != KernelRuntime::Fused &&
      (kind == OptimizerKind::adam || kind == OptimizerKind::adamw)) {
    double owned = getOwnedElements(group);
    Work w = Work::kernel(owned * kForeachAdamWFloats * 4.0);
    w.launches =
        kForeachAdamWOps *
        std::max<int64_t>(1, llvm::divideCeil(static_cast<int64_t>(owned),
                                              int64_t(320) * 65536));
    return w;
  }
  // Read and write the fp32 master and states (Adam's m and v: 24 B) and
  // read the gradient
  // in the compute type; a 16-bit parameter copy is written too (28 B/param
  // at 16 bits), while fp32 parameters are the masters themselves (28 B).
  // The runtime then zeroes the rank's gradient buffer for the next step.
  int64_t c = getGroupElementBytes(group);
  const PartitionBuffers *p = schedule.lookupPartition(group);
  double grads = p ? p->numel[static_cast<unsigned>(BufferKind::grads)] : 0;
  int64_t copy = p && p->areParamsMasters() ? 0 : c;
  return Work::kernel(getOwnedElements(group) * (states + c + copy) +
                      grads * c);
}

FailureOr<Work> Simulator::getWork(Operation *op) const {
  if (isViewOp(op) || isa<FreeOp, WaitOp, ReturnOp, LossScaleOp, LabelShareOp,
                          StepSumOp, MicroShareOp>(op))
    return Work();
  if (auto kernel = dyn_cast<RuntimeKernelOpInterface>(op))
    return getKernelWork(kernel);
  if (!isa<ZeroDialect>(op->getDialect()))
    return op->emitOpError(
        "has no runtime kernel model (RuntimeKernelOpInterface), so the cost "
        "model cannot time it");

  if (auto collective = dyn_cast<CollectiveOpInterface>(op))
    return getCollectiveWork(collective);
  if (auto grad = dyn_cast<GradOp>(op)) {
    // Stages 2-3: a marker. Stages 0-1: added into the persistent `grads`
    // slot unless computed there directly.
    if (schedule.getStage() >= 2 || schedule.isGradientInPlace(grad))
      return Work();
    double g = valueBytes(grad.getGrad());
    return Work::kernel(schedule.getAccumulationSteps() > 1 ? 3 * g : 2 * g);
  }
  if (auto check = dyn_cast<CheckOverflowOp>(op)) {
    // One read-only pass over the owned gradients.
    double bytes = 0;
    for (Attribute g : check.getGroups()) {
      auto ref = cast<SymbolRefAttr>(g);
      bytes += getOwnedElements(ref) * getGroupElementBytes(ref);
    }
    return Work::kernel(bytes);
  }
  if (auto transfer = dyn_cast<TransferOpInterface>(op))
    return getTransferWork(transfer);
  // An offloaded activation crosses the host link whole, either way.
  if (auto copy = dyn_cast<ActivationCopyOpInterface>(op))
    return Work::transfer(valueBytes(copy.getHostValue()));
  if (auto store = dyn_cast<StoreSecondaryOp>(op)) {
    // A copy of this rank's hpZ slice: read and write it.
    return Work::kernel(2.0 * valueBytes(store.getFull()) /
                        double(schedule.getHpzPartitionSize()));
  }
  if (auto update = dyn_cast<OptimizerStepOp>(op))
    return getOptimizerStepWork(update);
  // zero.update_loss_scale and other zero ops: memory-bound;
  // an op without tensors is host-side scalar work.
  double bytes = sumBytes(op->getOperands()) + sumBytes(op->getResults());
  if (bytes == 0)
    return Work();
  return Work::kernel(bytes);
}

/// The fraction of its full-tile rate a GEMM of `batch` M x N products keeps
/// once its output tiles are spread over `sms` multiprocessors in waves:
/// cuBLAS picks among tile shapes, a partial tile costs a whole one (tile
/// quantization) and a partial last wave costs a whole wave (wave
/// quantization); NVIDIA's Matrix Multiplication Background guide.
static double getTileEfficiency(int64_t batch, int64_t m, int64_t n,
                                int64_t sms) {
  static constexpr int64_t kTiles[][2] = {{256, 128}, {128, 256}, {128, 128}};
  double best = 0;
  for (auto [tileM, tileN] : kTiles) {
    int64_t tiles =
        batch * llvm::divideCeil(m, tileM) * llvm::divideCeil(n, tileN);
    int64_t slots = llvm::divideCeil(tiles, sms) * sms;
    best =
        std::max(best, double(batch) * m * n / (double(slots) * tileM * tileN));
  }
  return best;
}

/// Whether a 16-bit GEMM has a dimension that is not a multiple of 16 bytes,
/// which leaves cuBLAS/CUTLASS only their unaligned (align1) kernels.
static bool isMisaligned(const Work &w) {
  return w.m % 8 || w.n % 8 || w.k % 8;
}

double Simulator::seconds(const Work &w) const {
  switch (w.kind) {
  case Work::Free:
    return 0;
  case Work::Kernel: {
    double rate = hw.gemmFlops32;
    bool sixteenBit = w.gemmType && w.gemmType.getIntOrFloatBitWidth() <= 16;
    if (sixteenBit)
      rate = hw.gemmFlops16;
    if (!w.attention && w.gemmType && w.m > 0 && hw.multiprocessors > 0) {
      if (sixteenBit && hw.misalignedGemmFraction > 0 && isMisaligned(w))
        rate *= hw.misalignedGemmFraction;
      rate *= getTileEfficiency(w.batch, w.m, w.n, hw.multiprocessors);
    }
    if (w.attention && hw.attentionFlops > 0)
      rate = hw.attentionFlops;
    if (w.attention && sixteenBit && hw.attention && w.seqLen > 0)
      rate = hw.peakFlops16 * hw.attention->getPeakFraction(
                                  w.headDim, w.seqLen, w.causal, w.backward);
    double compute = w.flops > 0 ? w.flops / rate : 0;
    if (w.activationElements > 0 && hw.activationElements > 0)
      compute = std::max(compute, w.activationElements / hw.activationElements);
    double bandwidth = w.onHost && hw.hostMemoryBandwidth > 0
                           ? hw.hostMemoryBandwidth
                           : hw.memoryBandwidth;
    double reductions = 0;
    for (double bytes : w.blockingAllReduceBytes) {
      Work reduce = Work::collective(bytes, 2, Work::AllReduce);
      reduce.members = w.members;
      reduce.membersPerNode = w.membersPerNode;
      reductions += seconds(reduce);
    }
    return hw.kernelOverhead * w.launches +
           std::max(compute, w.bytes / bandwidth) + reductions;
  }
  case Work::Transfer: {
    // Without a host link the copy is a memcpy: it reads and writes each
    // byte through memory; so is a copy between host buffers. (The swap
    // file I/O of a parameter shard on NVMe is timed apart, in step.)
    double hostBandwidth = hw.hostMemoryBandwidth > 0 ? hw.hostMemoryBandwidth
                                                      : hw.memoryBandwidth;
    return hw.kernelOverhead + (w.hostCopy ? 2 * w.bytes / hostBandwidth
                                : hw.hostLinkBandwidth > 0
                                    ? w.bytes / hw.hostLinkBandwidth
                                    : 2 * w.bytes / hw.memoryBandwidth);
  }
  case Work::Collective: {
    int64_t m = w.members, q = w.membersPerNode;
    if (m <= 1)
      return 0;
    double copyIn = w.copyInBytes > 0
                        ? hw.kernelOverhead + w.copyInBytes / hw.memoryBandwidth
                        : 0;
    double passes = double(w.ringPasses);
    double latency = hw.collectiveLatency;
    if (hw.skewCompute > 0 && hw.collectiveLatency > hw.backToBackLatency)
      latency = hw.backToBackLatency +
                (hw.collectiveLatency - hw.backToBackLatency) *
                    std::min(1.0, computeSinceCollective / hw.skewCompute);
    double bandwidth = hw.linkBandwidth;
    if (w.pattern == Work::ReduceScatter && hw.reduceScatterBandwidth > 0)
      bandwidth = hw.reduceScatterBandwidth;
    if (w.pattern == Work::AllGather && hw.allGatherBandwidth > 0)
      bandwidth = hw.allGatherBandwidth;
    if (w.pattern == Work::AllToAll) {
      // One chunk of bytes / m to each peer: the node's q - 1 over the
      // links within it, the m - q others across nodes, at once.
      double within =
          (std::min(q, m) - 1) * (latency + w.bytes / m / bandwidth);
      if (q >= m)
        return copyIn + within;
      double interLatency = latency, interBandwidth = bandwidth;
      if (hw.interNodeLinks > 0) {
        interLatency = hw.interNodeLatency;
        interBandwidth =
            hw.getInterNodeBandwidth() / double(schedule.getNodeSize());
      }
      return copyIn + within + interLatency +
             double(m - q) / m * w.bytes / interBandwidth;
    }
    // The ring within a node: a published busbw curve for all-gathers and
    // reduce-scatters holds its latency already (its small sizes are
    // latency-bound), so it replaces latency and flat bandwidth both.
    auto withinNode = [&](int64_t ranks) {
      double bytes = passes * double(ranks - 1) / ranks * w.bytes;
      if (hw.busbwCurve &&
          (w.pattern == Work::AllGather || w.pattern == Work::ReduceScatter))
        return bytes /
               hw.busbwCurve->getBusBandwidth(w.bytes / ranks, bandwidth);
      return passes * (ranks - 1) * latency + bytes / bandwidth;
    };
    if (q >= m)
      return copyIn + withinNode(m);
    // Two levels: within each node, then across nodes, where every rank of
    // a node runs its own cross-node ring over the node's links at once.
    double nodes = double(m / q);
    double within = withinNode(q);
    double interLatency = latency, interBandwidth = bandwidth;
    if (hw.interNodeLinks > 0) {
      interLatency = hw.interNodeLatency;
      interBandwidth =
          hw.getInterNodeBandwidth() / double(schedule.getNodeSize());
    }
    double across = passes * (nodes - 1) * interLatency +
                    passes * (nodes - 1) / m * w.bytes / interBandwidth;
    return copyIn + within + across;
  }
  }
  llvm_unreachable("unknown work kind");
}

/// A short event name: the op name and, for collectives, the group.
static std::string describe(Operation *op) {
  std::string name = op->getName().getStringRef().str();
  if (auto group = op->getAttrOfType<FlatSymbolRefAttr>("group"))
    name += " @" + group.getValue().str();
  return name;
}

void Simulator::record(Operation *op, std::string name, const Work &w,
                       StringRef category, unsigned stream, double start,
                       double duration) {
  TimelineEvent e;
  e.name = std::move(name);
  e.category = category.str();
  e.stream = stream;
  e.startUs = start * 1e6;
  e.durationUs = duration * 1e6;
  e.op = op;
  e.bytes = w.bytes;
  e.flops = w.flops;
  e.microStep = microStep;
  timeline.events.push_back(std::move(e));
}

void Simulator::complete(Operation *op, const Work &w) {
  if (w.completionBytes <= 0 || w.members <= 1)
    return;
  Work add = Work::kernel(w.completionBytes);
  double d = seconds(add);
  record(op, "complete " + describe(op), add, "compute", 0, computeFree, d);
  computeFree += d;
  timeline.computeMs += d * 1e3;
}

void Simulator::swapCopy(Operation *op, const Work &w) {
  double d = seconds(w);
  record(op, describe(op), w, "copy", 0, computeFree, d);
  computeFree += d;
  timeline.exposedTransferMs += d * 1e3;
}

void Simulator::blockUntil(Operation *op, std::string name, double until) {
  if (until <= computeFree)
    return;
  record(op, std::move(name), Work(), "wait", 0, computeFree,
         until - computeFree);
  (transferWait ? timeline.exposedTransferMs : timeline.exposedCommMs) +=
      (until - computeFree) * 1e3;
  computeFree = until;
}

LogicalResult Simulator::step(Operation *op) {
  if (auto wait = dyn_cast<WaitOp>(op)) {
    auto it = tokenDone.find(wait.getToken());
    if (it == tokenDone.end())
      return op->emitOpError("cost model: waits for a token no simulated "
                             "collective produced");
    transferWait = transferTokens.contains(wait.getToken());
    blockUntil(op, "wait " + describe(wait.getToken().getDefiningOp()),
               it->second);
    transferWait = false;
    auto done = tokenCompletion.find(wait.getToken());
    if (done != tokenCompletion.end())
      complete(done->second.first, done->second.second);
    if (auto copy = swapCopyAtWait.find(wait.getToken());
        copy != swapCopyAtWait.end())
      swapCopy(copy->second.first, copy->second.second);
    return success();
  }

  FailureOr<Work> work = getWork(op);
  if (failed(work))
    return failure();
  if (work->kind == Work::Collective) {
    computeSinceCollective = computeFree - lastCollective;
    lastCollective = computeFree;
  }
  double d = seconds(*work);
  if (work->kind == Work::Kernel && work->chunks > 0) {
    // The host Adam of NVMe-resident states: chunk i's Adam overlaps the
    // read of chunk i+1 and the write of chunk i-1, which share the disk,
    // so over k chunks it takes (disk + adam) / k + (k - 1) / k * max(disk,
    // adam). What exceeds the Adam alone is exposed transfer time.
    auto rate = [](double bytes, double bandwidth) {
      return bandwidth > 0 ? bytes / bandwidth : 0.0;
    };
    double disk = rate(work->nvmeRead, hw.nvmeReadBandwidth) +
                  rate(work->nvmeWrite, hw.nvmeWriteBandwidth);
    double k = double(work->chunks);
    double total = (disk + d) / k + (k - 1) / k * std::max(disk, d);
    record(op, describe(op), *work, "compute", 0, computeFree, total);
    computeFree += total;
    timeline.computeMs += d * 1e3;
    timeline.transferMs += disk * 1e3;
    timeline.exposedTransferMs += (total - d) * 1e3;
    return success();
  }
  if (work->kind == Work::Kernel) {
    record(op, describe(op), *work, "compute", 0, computeFree, d);
    computeFree += d;
    timeline.computeMs += d * 1e3;
    if (auto *zero = op->getContext()->getLoadedDialect<ZeroDialect>();
        zero && zero->getRecomputeAttrHelper().isAttrPresent(op))
      timeline.recomputeMs += d * 1e3;
    return success();
  }
  if (work->kind == Work::Transfer &&
      (work->nvmeRead > 0 || work->nvmeWrite > 0)) {
    // A parameter shard on NVMe, as the runtime moves it: the swap file
    // I/O runs asynchronously on the disk from the issue; the copy between
    // the swap buffer and the staged (or host) buffer runs on the host,
    // synchronously: a write's at its issue, before the disk, a read's at
    // its wait, after it.
    auto rate = [](double bytes, double bandwidth) {
      return bandwidth > 0 ? bytes / bandwidth : 0.0;
    };
    double disk = rate(work->nvmeRead, hw.nvmeReadBandwidth) +
                  rate(work->nvmeWrite, hw.nvmeWriteBandwidth);
    timeline.transferMs += (disk + d) * 1e3;
    bool read = work->nvmeRead > 0;
    if (!read)
      swapCopy(op, *work);
    double start = std::max(computeFree, diskFree);
    diskFree = start + disk;
    record(op, "nvme " + describe(op), Work(), "copy", 3, start, disk);
    Value token = cast<TransferOpInterface>(op).getToken();
    if (token) {
      tokenDone[token] = diskFree;
      transferTokens.insert(token);
      if (read)
        swapCopyAtWait[token] = {op, *work};
      return success();
    }
    transferWait = true;
    blockUntil(op, "wait " + describe(op), diskFree);
    transferWait = false;
    if (read)
      swapCopy(op, *work);
    return success();
  }
  if (work->kind == Work::Transfer) {
    timeline.transferMs += d * 1e3;
    auto copy = dyn_cast<ActivationCopyOpInterface>(op);
    Value token =
        copy ? copy.getToken() : cast<TransferOpInterface>(op).getToken();
    if (hw.copiesOnComputeStream) {
      // The compute stream copies: all of it is exposed, and its token is
      // complete when the copy returns.
      record(op, describe(op), *work, "copy", 0, computeFree, d);
      computeFree += d;
      timeline.exposedTransferMs += d * 1e3;
      if (token) {
        tokenDone[token] = computeFree;
        transferTokens.insert(token);
      }
      return success();
    }
    // Its own copy stream (a copy engine), from its issue to its wait.
    double start = std::max(computeFree, copyFree);
    copyFree = start + d;
    record(op, describe(op), *work, "copy", 2, start, d);
    if (token) {
      tokenDone[token] = copyFree;
      transferTokens.insert(token);
      return success();
    }
    transferWait = true;
    blockUntil(op, "wait " + describe(op), copyFree);
    transferWait = false;
    return success();
  }
  if (work->kind != Work::Collective)
    return success();

  // Issued in program order by the compute stream; runs when the
  // communication stream is free.
  double start = std::max(computeFree, commFree);
  double end = start + d;
  commFree = end;
  timeline.commMs += d * 1e3;
  if (d > 0)
    record(op, describe(op), *work, "comm", 1, start, d);
  Value token;
  if (op->getNumResults() && isa<TokenType>(op->getResults().back().getType()))
    token = op->getResults().back();
  if (token) {
    tokenDone[token] = end;
    tokenCompletion[token] = {op, *work};
    return success();
  }
  // Synchronous: the compute stream blocks until it is done.
  blockUntil(op, "wait " + describe(op), end);
  complete(op, *work);
  return success();
}

FailureOr<StepTimeline> Simulator::run() {
  Block &body = schedule.getStep().getBodyBlock();
  // Micro steps of an accumulation window: the whole body each time except
  // the ops that run once per step: first_micro_step in the first one, the
  // others (the boundary phases, last_micro_step) in the last one.
  int64_t k = std::max<int64_t>(1, schedule.getAccumulationSteps());
  for (microStep = 0; microStep < k; ++microStep) {
    for (Operation &op : body) {
      Phase phase = getStepPhase(&op);
      if (phase == Phase::first_micro_step
              ? microStep != 0
              : microStep + 1 < k && runsOncePerStep(phase))
        continue;
      if (failed(step(&op)))
        return failure();
    }
  }
  timeline.stepMs = std::max({computeFree, commFree, copyFree, diskFree}) * 1e3;
  return std::move(timeline);
}

FailureOr<StepTimeline>
mlir::zero::simulateStep(const StepSchedule &schedule, const HardwarePreset &hw,
                         const PeerOptions &peer,
                         const DocumentLengths *documents) {
  HardwarePreset rates = hw.forWorldSize(schedule.getWorldSize());
  return Simulator(schedule, rates, peer, documents).run();
}

std::optional<KernelRuntime> mlir::zero::parseKernelRuntime(StringRef name) {
  if (name == "fused")
    return KernelRuntime::Fused;
  if (name == "eager")
    return KernelRuntime::Eager;
  if (name == "compiled")
    return KernelRuntime::Compiled;
  return std::nullopt;
}
