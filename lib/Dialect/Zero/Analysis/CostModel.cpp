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
// with B the bytes of the full array. One compute and one communication
// stream are simulated in program order; see simulateStep.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/Analysis/CostModel.h"

#include "zero/Dialect/NN/IR/NNDialect.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace mlir::zero;

//===----------------------------------------------------------------------===//
// Presets
//===----------------------------------------------------------------------===//

// GPU numbers: ../shared/design/anchors/performance.md (outside the
// repository) and the sources it cites, unless noted.
// - GEMM: 989 TFLOP/s dense BF16 tensor-core peak (NVIDIA Hopper whitepaper)
//   times 0.8, the maximum achievable matmul FLOPS measured on H100 SXM
//   (stas00/ml-engineering MAMF table: 792.1 TFLOP/s, 80.1%); H200 has the
//   same die and clocks. fp32: the 66.9 TFLOP/s non-tensor FMA peak times the
//   same 0.8 (cuBLAS without TF32).
// - Memory: the measured STREAM triad (Azure ND H100 v5 / ND H200 v5).
// - Link: ring all-gather / reduce-scatter bus bandwidth on 8 GPUs over
//   NVLink4 (NVIDIA/nccl-tests #212: ~370 GB/s on H100; stas00 H200 table:
//   361-363 GB/s), i.e. ~81% of the 450 GB/s line rate.
// - Latency: the ~25.6 us (H100) / ~30 us (H200) small-message all-reduce
//   floor of the 8-GPU sweeps divided by its 2(n-1) = 14 ring steps.
// - Kernel overhead: an assumed 3 us per launch (no citable number).
//
// `cpu`: one rank of the 2-core development machine (Xeon, AVX-512, KVM,
// shared with other builds) while another rank runs on the other core,
// measured by zrt-bench-calibrate (runtime/bench/Calibrate.cpp; bench/run.sh
// runs it and docs/benchmarks.md shows the numbers of the last run) with
// `OMP_NUM_THREADS=1 mpirun -np 2`, medians over rounds and of three runs:
//   zrt_matmul f32 at gpt2-tiny / mlp shapes, 1 thread     36 GFLOP/s
//   streaming kernels (bias add, GELU, layer norm, softmax, Adam) at those
//     sizes, bytes as the model counts them                  11 GB/s
//   one tiny kernel call                                       0.22 us
//   zrt_all_reduce 4 MiB, 2 ranks: bus bandwidth               0.86 GB/s
//   8-byte zrt_all_reduce issued after ~1 ms of compute on each rank:
//     0.41 ms per ring step. Back to back the same all-reduce takes ~1 us
//     per step; in a step the ranks reach a blocking collective out of step
//     (cores shared with each other and other processes), and the wait for
//     the slowest is what a step pays, so the latency is that one.
// The runtime converts 16-bit GEMM operands to fp32 panels and calls sgemm,
// so both GEMM rates are the sgemm rate. bench/calibrate_cpu.cpp measures
// the whole machine instead (2-thread 2048^3 sgemm 414 GFLOP/s, STREAM triad
// 27.8 GB/s, idle Open MPI busbw 2.2 GB/s, 0.18 us per step): the numbers of
// a single large rank, 3-10x off for the small models trained here.
// A rank's share of the machine moves every rate: 1 and 2 ranks get a core
// each, 4 ranks share 2 cores, and the wait for the slowest rank at a
// blocking collective grows with the ranks per core. So the `cpu` preset
// also carries rows by ranks per node, which simulateStep uses instead of
// the medians above: the last zrt-bench-calibrate run with 1, 2 and 4 ranks
// (one thread each; docs/benchmarks.md, calibration table). The CPU's fused
// attention runs at about 1/6 of the GEMM rate at gpt2-tiny's shapes (64 x
// 32 heads), and GELU and the layer-norm backward are compute-bound, so
// they have rates of their own. Open MPI's non-blocking reduce-scatter
// (coll/libnbc) moves 4 MiB at about 0.6x the all-reduce's bus bandwidth
// and its all-gather at about 1.5x, so each kind has its own. The machine
// is shared: under load the same calibration gave 3.5x lower 2-rank rates
// and 100x the 2-rank collective latency (a run of 2026-11-22 01:45: 32.5
// GFLOP/s, 393 us per ring step).
// The rows between the markers are written by bench/cpu_preset.py from
// bench/results/calibration_np{1,2,4}.json.
// bench:cpu-shares
static const RankShare kCpuShares[] = {
    {/*ranks=*/1, /*gemmFlops=*/1.189e+11, /*memoryBandwidth=*/3.183e+10,
     /*kernelOverhead=*/8.836e-08, /*linkBandwidth=*/0,
     /*collectiveLatency=*/0, /*attentionFlops=*/1.929e+10,
     /*activationElements=*/1.142e+09, /*backToBackLatency=*/0,
     /*skewCompute=*/0, /*reduceScatterBandwidth=*/0,
     /*allGatherBandwidth=*/0},
    {/*ranks=*/2, /*gemmFlops=*/1.211e+11, /*memoryBandwidth=*/3.314e+10,
     /*kernelOverhead=*/8.739e-08, /*linkBandwidth=*/4.314e+09,
     /*collectiveLatency=*/3.385e-06, /*attentionFlops=*/1.936e+10,
     /*activationElements=*/1.145e+09, /*backToBackLatency=*/4.64e-07,
     /*skewCompute=*/0.0004863, /*reduceScatterBandwidth=*/2.603e+09,
     /*allGatherBandwidth=*/6.303e+09},
    {/*ranks=*/4, /*gemmFlops=*/5.69e+10, /*memoryBandwidth=*/1.696e+10,
     /*kernelOverhead=*/9.2e-08, /*linkBandwidth=*/2.755e+09,
     /*collectiveLatency=*/9.483e-05, /*attentionFlops=*/9.382e+09,
     /*activationElements=*/5.48e+08, /*backToBackLatency=*/9.638e-07,
     /*skewCompute=*/0.0005264, /*reduceScatterBandwidth=*/1.329e+09,
     /*allGatherBandwidth=*/3.577e+09},
};
// /bench:cpu-shares

static const HardwarePreset kPresets[] = {
    {"h100-sxm",
     "NVIDIA H100 SXM 80GB, 8 GPUs on NVLink4/NVSwitch: GEMM at 80% of the "
     "989 TFLOP/s bf16 peak (measured MAMF), STREAM-triad HBM3 bandwidth, "
     "NCCL ring busbw 365 GB/s",
     /*gemmFlops16=*/0.8 * 989e12, /*gemmFlops32=*/0.8 * 66.9e12,
     /*memoryBandwidth=*/2.97e12, /*linkBandwidth=*/365e9,
     /*collectiveLatency=*/1.8e-6, /*kernelOverhead=*/3e-6},
    {"h200-sxm",
     "NVIDIA H200 SXM 141GB, 8 GPUs on NVLink4/NVSwitch: GEMM at 80% of the "
     "989 TFLOP/s bf16 peak (measured MAMF), STREAM-triad HBM3e bandwidth, "
     "NCCL ring busbw 362 GB/s",
     /*gemmFlops16=*/0.8 * 989e12, /*gemmFlops32=*/0.8 * 66.9e12,
     /*memoryBandwidth=*/4.15e12, /*linkBandwidth=*/362e9,
     /*collectiveLatency=*/2.1e-6, /*kernelOverhead=*/3e-6},
    {"cpu",
     "One rank of this 2-core development machine beside a second rank "
     "(measured by zrt-bench-calibrate): small-model zrt_matmul and "
     "streaming kernels on one thread, Open MPI shared-memory collectives "
     "between ranks on shared cores",
     /*gemmFlops16=*/36e9, /*gemmFlops32=*/36e9,
     /*memoryBandwidth=*/11e9, /*linkBandwidth=*/0.86e9,
     /*collectiveLatency=*/0.41e-3, /*kernelOverhead=*/0.22e-6,
     /*shares=*/kCpuShares},
};

HardwarePreset HardwarePreset::forWorldSize(int64_t worldSize) const {
  HardwarePreset hw = *this;
  const RankShare *row = nullptr;
  for (const RankShare &share : shares)
    if (share.ranks <= worldSize)
      row = &share;
  if (!row)
    return hw;
  // Beyond the last calibrated row, more processes divide the same cores.
  double crowd = worldSize > row->ranks ? double(row->ranks) / worldSize : 1;
  hw.gemmFlops16 = hw.gemmFlops32 = row->gemmFlops * crowd;
  hw.memoryBandwidth = row->memoryBandwidth * crowd;
  hw.kernelOverhead = row->kernelOverhead;
  if (row->linkBandwidth > 0)
    hw.linkBandwidth = row->linkBandwidth;
  if (row->collectiveLatency > 0)
    hw.collectiveLatency = row->collectiveLatency;
  hw.attentionFlops = row->attentionFlops * crowd;
  hw.activationElements = row->activationElements * crowd;
  hw.backToBackLatency = row->backToBackLatency;
  hw.skewCompute = row->skewCompute;
  hw.reduceScatterBandwidth = row->reduceScatterBandwidth;
  hw.allGatherBandwidth = row->allGatherBandwidth;
  hw.shares = {};
  return hw;
}

ArrayRef<HardwarePreset> mlir::zero::getHardwarePresets() { return kPresets; }

const HardwarePreset *mlir::zero::lookupHardwarePreset(StringRef name) {
  for (const HardwarePreset &hw : kPresets)
    if (hw.name == name)
      return &hw;
  return nullptr;
}

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

static Type getElementType(Value v) {
  return cast<RankedTensorType>(v.getType()).getElementType();
}

namespace {

/// The work of one op: kernel FLOPs and bytes, or a collective's full array.
struct Work {
  enum Kind { Free, Kernel, Collective } kind = Free;
  double flops = 0;
  double bytes = 0;
  /// Kernels: GEMM element type (decides the FLOP rate).
  Type gemmType;
  /// Collectives: ring steps per (n-1) and bandwidth factor per (n-1)/n.
  unsigned ringPasses = 1;
  /// Collectives: which bus bandwidth of the preset they move at.
  enum Pattern { AllReduce, ReduceScatter, AllGather } pattern = AllReduce;
  /// Collectives: bytes of the kernel the compute stream runs once the
  /// collective is complete (a bucket reduction's add into the gradient
  /// shard), at its wait.
  double completionBytes = 0;
  /// Kernels: a fused attention (its own FLOP rate where the preset has one).
  bool attention = false;
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
  Simulator(const StepSchedule &schedule, const HardwarePreset &hw)
      : schedule(schedule), hw(hw), n(schedule.getWorldSize()) {}

  FailureOr<StepTimeline> run();

private:
  FailureOr<Work> getWork(Operation *op) const;
  Work getNNWork(Operation *op) const;
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
  int64_t n;
  int64_t microStep = 0;
  double computeFree = 0, commFree = 0;
  /// Compute-stream time when the last collective was issued, and the
  /// compute since then at the collective being timed (the ranks' skew).
  double lastCollective = 0, computeSinceCollective = 0;
  llvm::DenseMap<Value, double> tokenDone;
  /// The collectives whose completion kernel runs at their token's wait.
  llvm::DenseMap<Value, std::pair<Operation *, Work>> tokenCompletion;
  StepTimeline timeline;
};

} // namespace

int64_t Simulator::getGroupElementBytes(SymbolRefAttr ref) const {
  const PartitionBuffers *p = schedule.lookupPartition(ref);
  return p ? getElementBytes(p->computeType) : 2;
}

double Simulator::getOwnedElements(SymbolRefAttr ref) const {
  const PartitionBuffers *p = schedule.lookupPartition(ref);
  // The fp32 master buffer is exactly the owned shard.
  return p ? p->numel[static_cast<unsigned>(BufferKind::master)] : 0;
}

Work Simulator::getNNWork(Operation *op) const {
  double bytes = sumBytes(op->getOperands()) + sumBytes(op->getResults());
  if (auto mm = dyn_cast<nn::MatmulOp>(op)) {
    auto lhs = cast<RankedTensorType>(mm.getLhs().getType());
    int64_t rank = lhs.getRank();
    int64_t k = lhs.getDimSize(mm.getTransposeLhs() ? rank - 2 : rank - 1);
    // The result holds batch * M * N elements.
    double flops =
        2.0 * cast<RankedTensorType>(mm.getType()).getNumElements() * k;
    return Work::kernel(bytes, flops, lhs.getElementType());
  }
  auto attentionFlops = [](Value query, bool causal) {
    // QK^T and PV: 2 * (2 B H T T D); a causal mask skips half.
    auto q = cast<RankedTensorType>(query.getType());
    int64_t t = q.getDimSize(2);
    double flops = 4.0 * q.getNumElements() * t;
    return causal ? flops / 2 : flops;
  };
  if (auto att = dyn_cast<nn::AttentionOp>(op)) {
    Work w =
        Work::kernel(bytes, attentionFlops(att.getQuery(), att.getCausal()),
                     getElementType(att.getQuery()));
    w.attention = true;
    return w;
  }
  if (auto att = dyn_cast<nn::AttentionGradOp>(op)) {
    // Recomputes QK^T and computes dV, dP, dQ, dK: ~2.5x the forward.
    Work w = Work::kernel(bytes,
                          2.5 * attentionFlops(att.getQuery(), att.getCausal()),
                          getElementType(att.getQuery()));
    w.attention = true;
    return w;
  }
  if (isa<nn::GeluOp, nn::GeluGradOp, nn::LayerNormGradOp>(op)) {
    Work w = Work::kernel(bytes);
    w.activationElements =
        cast<RankedTensorType>(op->getResult(0).getType()).getNumElements();
    return w;
  }
  if (auto emb = dyn_cast<nn::EmbeddingOp>(op))
    // Reads only the looked-up rows of the table.
    return Work::kernel(valueBytes(emb.getIds()) +
                        2 * valueBytes(emb.getResult()));
  return Work::kernel(bytes);
}

FailureOr<Work> Simulator::getWork(Operation *op) const {
  if (isViewOp(op) || isa<FreeOp, WaitOp, ReturnOp, LossScaleOp>(op))
    return Work();
  if (op->getDialect() && isa<nn::NNDialect>(op->getDialect()))
    return getNNWork(op);

  auto rangeBytes = [&](SymbolRefAttr group, int64_t begin, int64_t end) {
    return double(end - begin) * getGroupElementBytes(group);
  };
  if (auto ag = dyn_cast<AllGatherOp>(op)) {
    if (ag.getResult())
      return Work::collective(valueBytes(ag.getResult()), 1, Work::AllGather);
    if (!ag.getBegin() || !ag.getEnd())
      return op->emitOpError(
          "cost model: all_gather without a range or result");
    return Work::collective(
        rangeBytes(ag.getGroupAttr(), *ag.getBegin(), *ag.getEnd()), 1,
        Work::AllGather);
  }
  if (auto pf = dyn_cast<PrefetchOp>(op))
    return Work::collective(valueBytes(pf.getResult()), 1, Work::AllGather);
  // A bucket reduction of stages 2-3 ends with the add of this rank's sum
  // into its gradient shard (read both, write one) once complete.
  auto bucketReduction = [&](SymbolRefAttr group, int64_t begin, int64_t end) {
    Work w =
        Work::collective(rangeBytes(group, begin, end), 1, Work::ReduceScatter);
    if (schedule.getStage() >= 2)
      w.completionBytes = 3.0 * rangeBytes(group, begin, end) / double(n);
    return w;
  };
  // A reduce to each owner moves what a reduce-scatter does.
  if (auto rs = dyn_cast<ReduceScatterOp>(op))
    return bucketReduction(rs.getGroupAttr(), rs.getBegin(), rs.getEnd());
  if (auto r = dyn_cast<ReduceOp>(op))
    return bucketReduction(r.getGroupAttr(), r.getBegin(), r.getEnd());
  if (auto ar = dyn_cast<AllReduceOp>(op)) {
    if (ar.getInput())
      return Work::collective(valueBytes(ar.getInput()), 2, Work::AllReduce);
    if (!ar.getBegin() || !ar.getEnd())
      return op->emitOpError("cost model: all_reduce without a range or input");
    return Work::collective(
        rangeBytes(ar.getGroupAttr(), *ar.getBegin(), *ar.getEnd()), 2,
        Work::AllReduce);
  }

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
  if (auto adam = dyn_cast<AdamOp>(op)) {
    // Read and write the fp32 master, m and v (24 B), read the gradient and
    // write the parameter in the compute type: 28 B/param at 16 bits. The
    // runtime then zeroes the rank's gradient buffer for the next step.
    SymbolRefAttr group = adam.getGroupAttr();
    int64_t c = getGroupElementBytes(group);
    const PartitionBuffers *p = schedule.lookupPartition(group);
    double grads = p ? p->numel[static_cast<unsigned>(BufferKind::grads)] : 0;
    return Work::kernel(getOwnedElements(group) * (24 + 2 * c) + grads * c);
  }
  // zero.cast, zero.update_loss_scale and anything unknown: memory-bound;
  // an op without tensors is host-side scalar work.
  double bytes = sumBytes(op->getOperands()) + sumBytes(op->getResults());
  if (bytes == 0)
    return Work();
  return Work::kernel(bytes);
}

double Simulator::seconds(const Work &w) const {
  switch (w.kind) {
  case Work::Free:
    return 0;
  case Work::Kernel: {
    double rate = hw.gemmFlops32;
    if (w.gemmType && w.gemmType.getIntOrFloatBitWidth() <= 16)
      rate = hw.gemmFlops16;
    if (w.attention && hw.attentionFlops > 0)
      rate = hw.attentionFlops;
    double compute = w.flops > 0 ? w.flops / rate : 0;
    if (w.activationElements > 0 && hw.activationElements > 0)
      compute = std::max(compute, w.activationElements / hw.activationElements);
    return hw.kernelOverhead + std::max(compute, w.bytes / hw.memoryBandwidth);
  }
  case Work::Collective: {
    if (n <= 1)
      return 0;
    double steps = double(w.ringPasses) * (n - 1);
    double volume = double(w.ringPasses) * (n - 1) / n * w.bytes;
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
    return steps * latency + volume / bandwidth;
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
  if (w.completionBytes <= 0 || n <= 1)
    return;
  Work add = Work::kernel(w.completionBytes);
  double d = seconds(add);
  record(op, "complete " + describe(op), add, "compute", 0, computeFree, d);
  computeFree += d;
  timeline.computeMs += d * 1e3;
}

void Simulator::blockUntil(Operation *op, std::string name, double until) {
  if (until <= computeFree)
    return;
  record(op, std::move(name), Work(), "wait", 0, computeFree,
         until - computeFree);
  timeline.exposedCommMs += (until - computeFree) * 1e3;
  computeFree = until;
}

LogicalResult Simulator::step(Operation *op) {
  if (auto wait = dyn_cast<WaitOp>(op)) {
    auto it = tokenDone.find(wait.getToken());
    if (it == tokenDone.end())
      return op->emitOpError("cost model: waits for a token no simulated "
                             "collective produced");
    blockUntil(op, "wait " + describe(wait.getToken().getDefiningOp()),
               it->second);
    auto done = tokenCompletion.find(wait.getToken());
    if (done != tokenCompletion.end())
      complete(done->second.first, done->second.second);
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
  if (work->kind == Work::Kernel) {
    record(op, describe(op), *work, "compute", 0, computeFree, d);
    computeFree += d;
    timeline.computeMs += d * 1e3;
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
  // the ops tagged zero.boundary, which run in the last one only.
  int64_t k = std::max<int64_t>(1, schedule.getAccumulationSteps());
  for (microStep = 0; microStep < k; ++microStep) {
    for (Operation &op : body) {
      if (microStep + 1 < k && op.hasAttr("zero.boundary"))
        continue;
      if (failed(step(&op)))
        return failure();
    }
  }
  timeline.stepMs = std::max(computeFree, commFree) * 1e3;
  return std::move(timeline);
}

FailureOr<StepTimeline> mlir::zero::simulateStep(const StepSchedule &schedule,
                                                 const HardwarePreset &hw) {
  HardwarePreset rates = hw.forWorldSize(schedule.getWorldSize());
  return Simulator(schedule, rates).run();
}

//===----------------------------------------------------------------------===//
// Chrome trace
//===----------------------------------------------------------------------===//

/// Perfetto and chrome://tracing slow down with many processes; every rank
/// runs the same timeline, so a few of them show it.
static constexpr int64_t kMaxTraceRanks = 64;

void mlir::zero::writeChromeTrace(const StepTimeline &timeline,
                                  int64_t worldSize, llvm::raw_ostream &os) {
  int64_t ranks = std::clamp<int64_t>(worldSize, 1, kMaxTraceRanks);
  llvm::json::OStream j(os);
  auto metadata = [&](StringRef name, int64_t pid, int64_t tid,
                      llvm::json::Value value, StringRef key = "name") {
    j.object([&] {
      j.attribute("name", name);
      j.attribute("ph", "M");
      j.attribute("pid", pid);
      j.attribute("tid", tid);
      j.attributeObject("args", [&] { j.attribute(key, std::move(value)); });
    });
  };
  j.object([&] {
    j.attribute("displayTimeUnit", "ms");
    j.attributeObject("otherData", [&] {
      j.attribute("world_size", worldSize);
      j.attribute("ranks_shown", ranks);
      j.attribute("step_ms", timeline.stepMs);
      j.attribute("exposed_comm_ms", timeline.exposedCommMs);
      j.attribute("compute_ms", timeline.computeMs);
      j.attribute("comm_ms", timeline.commMs);
    });
    j.attributeArray("traceEvents", [&] {
      for (int64_t rank = 0; rank < ranks; ++rank) {
        std::string label = "rank " + std::to_string(rank);
        if (rank == 0 && ranks < worldSize)
          label += " (first " + std::to_string(ranks) + " of " +
                   std::to_string(worldSize) + " ranks shown; all alike)";
        metadata("process_name", rank, 0, label);
        metadata("process_sort_index", rank, 0, rank, "sort_index");
        metadata("thread_name", rank, 0, "compute");
        metadata("thread_name", rank, 1, "communication");
        for (const TimelineEvent &e : timeline.events) {
          j.object([&] {
            j.attribute("name", e.name);
            j.attribute("cat", e.category);
            j.attribute("ph", "X");
            j.attribute("ts", e.startUs);
            j.attribute("dur", e.durationUs);
            j.attribute("pid", rank);
            j.attribute("tid", int64_t(e.stream));
            j.attributeObject("args", [&] {
              if (e.bytes > 0)
                j.attribute("bytes", e.bytes);
              if (e.flops > 0)
                j.attribute("flops", e.flops);
              j.attribute("micro_step", e.microStep);
            });
          });
        }
      }
    });
  });
  os << "\n";
}

//===----------------------------------------------------------------------===//
// Memory picture
//===----------------------------------------------------------------------===//

namespace {

/// A binary byte unit for axis labels.
struct ByteUnit {
  double scale;
  StringRef name;
};

ByteUnit pickUnit(double bytes) {
  if (bytes >= double(1ll << 30))
    return {double(1ll << 30), "GiB"};
  if (bytes >= double(1 << 20))
    return {double(1 << 20), "MiB"};
  if (bytes >= 1024)
    return {1024, "KiB"};
  return {1, "B"};
}

std::string formatBytes(double bytes) {
  ByteUnit u = pickUnit(bytes);
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::format("%.2f ", bytes / u.scale) << u.name;
  return s;
}

/// A 1-2-5 step giving about `count` intervals over [0, max].
double niceStep(double max, int count) {
  double raw = max / count;
  double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (m * p >= raw)
      return m * p;
  return 10 * p;
}

std::string escapeXml(StringRef s) {
  std::string out;
  for (char c : s) {
    switch (c) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&quot;";
      break;
    default:
      out += c;
    }
  }
  return out;
}

// Tableau-like palette, one color per MemoryCategory.
constexpr const char *kCategoryColors[kNumMemoryCategories] = {
    "#4e79a7", "#59a14f", "#f28e2b", "#e15759", "#b07aa1", "#9c755f",
    "#76b7b2", "#edc948", "#ff9da7", "#17becf", "#bab0ac"};

} // namespace

void mlir::zero::writeMemorySvg(const MemoryPlan &plan,
                                const StepSchedule &schedule,
                                llvm::raw_ostream &os) {
  constexpr double width = 1060, height = 580;
  constexpr double left = 90, right = 270, top = 50, bottom = 60;
  constexpr double plotW = width - left - right, plotH = height - top - bottom;
  const int64_t numOps = plan.ops.size();

  // Downsample to at most one bin per pixel; a bin shows its op with the most
  // live bytes so that no peak is lost.
  int64_t bins = std::min<int64_t>(numOps, int64_t(plotW));
  struct Bin {
    int64_t lo, hi; // op index range [lo, hi)
    std::array<int64_t, kNumMemoryCategories> live;
  };
  std::vector<Bin> binned;
  double maxArena = 0;
  for (int64_t b = 0; b < bins; ++b) {
    int64_t lo = b * numOps / bins, hi = (b + 1) * numOps / bins;
    int64_t best = lo, bestTotal = -1;
    for (int64_t i = lo; i < hi; ++i) {
      int64_t total = 0;
      for (int64_t v : plan.liveByCategory[i])
        total += v;
      if (total > bestTotal) {
        best = i;
        bestTotal = total;
      }
    }
    binned.push_back({lo, hi, plan.liveByCategory[best]});
    maxArena = std::max(maxArena, double(bestTotal));
  }

  double persistentTotal = 0;
  for (int64_t v : plan.persistentByCategory)
    persistentTotal += v;
  double yMax =
      std::max({double(plan.peakBytes), persistentTotal + maxArena, 1.0}) * 1.1;
  ByteUnit unit = pickUnit(yMax);
  auto xOf = [&](double opIndex) {
    return left + (numOps ? opIndex / numOps : 0) * plotW;
  };
  auto yOf = [&](double bytes) { return top + plotH * (1 - bytes / yMax); };
  auto num = [](double v) { return llvm::format("%.1f", v); };

  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << num(width)
     << "\" height=\"" << num(height) << "\" viewBox=\"0 0 " << num(width)
     << " " << num(height)
     << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  os << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  os << "<text x=\"" << num(left) << "\" y=\"24\" font-size=\"15\" "
     << "font-weight=\"bold\">Memory per rank: @"
     << escapeXml(schedule.getStep().getSymName()) << " (ZeRO stage "
     << schedule.getStage() << ", " << schedule.getWorldSize()
     << " ranks)</text>\n";

  // Grid and y axis.
  double step = niceStep(yMax / unit.scale, 8);
  for (double v = 0; v * unit.scale <= yMax; v += step) {
    double y = yOf(v * unit.scale);
    os << "<line x1=\"" << num(left) << "\" y1=\"" << num(y) << "\" x2=\""
       << num(left + plotW) << "\" y2=\"" << num(y)
       << "\" stroke=\"#e0e0e0\"/>\n";
    os << "<text x=\"" << num(left - 6) << "\" y=\"" << num(y + 4)
       << "\" text-anchor=\"end\">" << llvm::format("%g", v) << "</text>\n";
  }
  os << "<text transform=\"translate(20," << num(top + plotH / 2)
     << ") rotate(-90)\" text-anchor=\"middle\">bytes per rank (" << unit.name
     << ")</text>\n";

  // x axis.
  if (numOps > 0) {
    double xs = std::max(1.0, niceStep(double(numOps), 8));
    for (double i = 0; i <= numOps; i += xs)
      os << "<text x=\"" << num(xOf(i)) << "\" y=\"" << num(top + plotH + 18)
         << "\" text-anchor=\"middle\">" << int64_t(i) << "</text>\n";
  }
  os << "<text x=\"" << num(left + plotW / 2) << "\" y=\"" << num(height - 16)
     << "\" text-anchor=\"middle\">op index in the step (program order; "
     << numOps << " ops)</text>\n";

  // Persistent bands at the bottom, then the stacked step arena.
  struct LegendEntry {
    unsigned category;
    bool persistent;
    double bytes;
  };
  std::vector<LegendEntry> legend;
  double base = 0;
  for (unsigned c = 0; c < kNumMemoryCategories; ++c) {
    double bytes = plan.persistentByCategory[c];
    if (bytes <= 0)
      continue;
    os << "<rect x=\"" << num(left) << "\" y=\"" << num(yOf(base + bytes))
       << "\" width=\"" << num(plotW) << "\" height=\""
       << num(yOf(base) - yOf(base + bytes)) << "\" fill=\""
       << kCategoryColors[c] << "\" fill-opacity=\"0.55\"/>\n";
    base += bytes;
    legend.push_back({c, true, bytes});
  }
  std::vector<double> below(binned.size(), base);
  for (unsigned c = 0; c < kNumMemoryCategories; ++c) {
    if (plan.peakByCategory[c] <= 0)
      continue;
    // Step outline: each bin holds its value over [lo, hi).
    std::string d;
    llvm::raw_string_ostream path(d);
    std::vector<double> above(binned.size());
    for (auto [b, bin] : llvm::enumerate(binned)) {
      above[b] = below[b] + bin.live[c];
      path << (b ? " L" : "M") << num(xOf(bin.lo)) << "," << num(yOf(above[b]))
           << " L" << num(xOf(bin.hi)) << "," << num(yOf(above[b]));
    }
    for (size_t b = binned.size(); b-- > 0;)
      path << " L" << num(xOf(binned[b].hi)) << "," << num(yOf(below[b]))
           << " L" << num(xOf(binned[b].lo)) << "," << num(yOf(below[b]));
    os << "<path d=\"" << d << " Z\" fill=\"" << kCategoryColors[c]
       << "\" fill-opacity=\"0.85\" stroke=\"none\"/>\n";
    below = std::move(above);
    legend.push_back({c, false, double(plan.peakByCategory[c])});
  }
  os << "<rect x=\"" << num(left) << "\" y=\"" << num(top) << "\" width=\""
     << num(plotW) << "\" height=\"" << num(plotH)
     << "\" fill=\"none\" stroke=\"#444\"/>\n";

  // Backward start and peak.
  if (plan.backwardStart >= 0 && numOps > 0) {
    double x = xOf(plan.backwardStart);
    os << "<line x1=\"" << num(x) << "\" y1=\"" << num(top) << "\" x2=\""
       << num(x) << "\" y2=\"" << num(top + plotH)
       << "\" stroke=\"#333\" stroke-dasharray=\"6,4\"/>\n";
    os << "<text x=\"" << num(x + 4) << "\" y=\"" << num(top + 14)
       << "\" fill=\"#333\">backward</text>\n";
  }
  double py = yOf(plan.peakBytes);
  os << "<line x1=\"" << num(left) << "\" y1=\"" << num(py) << "\" x2=\""
     << num(left + plotW) << "\" y2=\"" << num(py)
     << "\" stroke=\"#d62728\" stroke-width=\"1.5\" "
        "stroke-dasharray=\"8,4\"/>\n";
  os << "<text x=\"" << num(left + plotW - 4) << "\" y=\"" << num(py - 6)
     << "\" text-anchor=\"end\" fill=\"#d62728\">peak "
     << formatBytes(plan.peakBytes) << " (persistent "
     << formatBytes(plan.persistentBytes) << " + arena "
     << formatBytes(plan.arenaBytes) << ")</text>\n";

  // Legend.
  double lx = left + plotW + 20, ly = top;
  for (const LegendEntry &e : legend) {
    os << "<rect x=\"" << num(lx) << "\" y=\"" << num(ly) << "\" width=\"14\" "
       << "height=\"14\" fill=\"" << kCategoryColors[e.category]
       << "\" fill-opacity=\"" << (e.persistent ? "0.55" : "0.85") << "\"/>\n";
    os << "<text x=\"" << num(lx + 20) << "\" y=\"" << num(ly + 11) << "\">"
       << stringifyMemoryCategory(static_cast<MemoryCategory>(e.category))
       << "</text>\n";
    os << "<text x=\"" << num(lx + 20) << "\" y=\"" << num(ly + 25)
       << "\" fill=\"#666\" font-size=\"10\">"
       << (e.persistent ? "persistent " : "step arena, max ")
       << formatBytes(e.bytes) << "</text>\n";
    ly += 32;
  }
  os << "</svg>\n";
}
