//===- Choices.cpp - The choices the tuner searches -----------------------===//
//
// Part of the zero-mlir project.
//
// What each group of the search may be: the offload, MiCS and ZeRO++
// choices of a stage and the model states zero-partition gives them, the
// loss chunks, tiles and sequence- and expert-parallel sizes, and the
// differentiated step each of those needs.
//
//===----------------------------------------------------------------------===//

#include "Search.h"

#include "zero/Dialect/NN/IR/NNDialect.h"
#include "zero/Dialect/Zero/Analysis/Schedule.h"
#include "zero/Dialect/Zero/Transforms/Passes.h"
#include "zero/Pipelines/Pipeline.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::zero;
using namespace mlir::zero::tuning;

SmallVector<TuneConfig> Tuner::getOffloadChoices(int64_t stage) const {
  SmallVector<OffloadDevice> devices;
  for (OffloadDevice d :
       {OffloadDevice::none, OffloadDevice::cpu, OffloadDevice::nvme})
    if (d <= options.offload)
      devices.push_back(d);
  SmallVector<TuneConfig> choices;
  ModuleOp module = model;
  StatePrecision stepStates =
      (*module.getOps<TrainStepOp>().begin()).getOptimizer().getStates();
  // DeepSpeed's rules of the stage, as zero-optimizer checks them; a
  // choice they reject is not one.
  ScopedDiagnosticHandler quiet(ctx, [](Diagnostic &) { return success(); });
  for (OffloadDevice param : devices) {
    for (OffloadDevice optimizer : devices) {
      TuneConfig c;
      c.stage = stage;
      c.offloadOptimizer = optimizer;
      c.offloadParam = param;
      if (c.isOnNvme())
        c.nvmePath = options.nvmePath;
      if (failed(getOffloadAttr(c).verifyStage(
              [&] { return mlir::emitError(UnknownLoc::get(ctx)); }, stage)))
        continue;
      choices.push_back(c);
      // The lower precision, where the lowering takes it: int8 and bf16
      // states are not swapped through NVMe.
      if (lowerStates && *options.optimizerStates != stepStates &&
          !(*options.optimizerStates != StatePrecision::f32 &&
            optimizer == OffloadDevice::nvme)) {
        c.optimizerStates = options.optimizerStates;
        choices.push_back(c);
      }
    }
  }
  return choices;
}

SmallVector<int64_t> Tuner::getMicsChoices(int64_t stage) const {
  SmallVector<int64_t> sizes = {0};
  // DeepSpeed's MiCS takes any shard size that divides the data-parallel
  // world; m = n is plain ZeRO-3 and m = 1 shards nothing, so neither is a
  // choice of its own.
  if (options.zeropp && stage == 3)
    llvm::append_range(sizes, getProperDivisors(options.worldSize));
  return sizes;
}

SmallVector<TuneConfig>
Tuner::getZeroPPChoices(const TuneConfig &choice) const {
  SmallVector<TuneConfig> choices = {choice};
  if (!options.zeropp || choice.stage != 3)
    return choices;
  // hpZ keeps its secondary partition within a node, so it is searched
  // across nodes only, over the divisors of the ranks per node (the whole
  // node included); it excludes MiCS and, here, parameter offload, whose
  // shards are not on the device.
  int64_t perNode = options.ranksPerNode;
  if (perNode > 0 && perNode < options.worldSize && choice.micsShardSize == 0 &&
      choice.offloadParam == OffloadDevice::none)
    for (int64_t h = 2; h <= perNode; ++h)
      if (perNode % h == 0) {
        TuneConfig c = choice;
        c.hpzPartitionSize = h;
        choices.push_back(c);
      }
  // qwZ gathers the device shards (not with parameter offload); the
  // pipeline refuses it for weights that are not 16-bit.
  if (choice.offloadParam == OffloadDevice::none)
    for (int64_t i = 0, e = choices.size(); i < e; ++i) {
      TuneConfig c = choices[i];
      c.quantizedWeights = true;
      choices.push_back(c);
    }
  // qgZ quantizes the reduce-scatters across nodes only (on one node the
  // pipeline falls back to the plain one) and, as DeepSpeed's MiCS reduces
  // with the plain reduce-scatter, not beside MiCS.
  if (perNode > 0 && perNode < options.worldSize && choice.micsShardSize == 0)
    for (int64_t i = 0, e = choices.size(); i < e; ++i) {
      TuneConfig c = choices[i];
      c.quantizedGradients = true;
      choices.push_back(c);
    }
  return choices;
}

OffloadAttr Tuner::getOffloadAttr(const TuneConfig &c) const {
  // The swap buffers zero-pipeline builds at its defaults, which the
  // candidates keep.
  ZeroPipelineOptions defaults;
  StringRef path = c.nvmePath;
  return OffloadAttr::get(ctx, c.offloadOptimizer, c.offloadParam,
                          c.offloadOptimizer == OffloadDevice::nvme ? path : "",
                          defaults.nvmeBufferCount, defaults.nvmeBufferSize,
                          c.offloadParam == OffloadDevice::nvme ? path : "",
                          defaults.paramBufferCount, defaults.paramBufferSize);
}

FailureOr<std::pair<SmallVector<TuneModelStates>, int64_t>>
Tuner::partitionStage(int64_t stage, int64_t mics, int64_t sp, int64_t ep) {
  // The loss chunk and the MLP tiles change no parameter; the
  // sequence-parallel step divides its batch over fewer ranks, the
  // expert-parallel one keeps E / ep experts of each expert parameter.
  OwningOpRef<ModuleOp> module = getFront(0, 0, sp, ep).clone();
  PassManager pm(ctx);
  ZeroPartitionPassOptions part;
  part.stage = stage;
  part.worldSize = options.worldSize;
  part.spSize = sp;
  part.epSize = ep;
  part.ranksPerNode = options.ranksPerNode;
  part.micsShardSize = mics;
  pm.addPass(createZeroPartitionPass(part));
  if (failed(pm.run(*module)))
    return failure();
  TrainStepOp step = *module->getOps<TrainStepOp>().begin();
  OptimizerAttr stepOptimizer = step.getOptimizer();
  SmallVector<TuneModelStates> states;
  int64_t padded = 0;
  for (TuneConfig choice : getOffloadChoices(stage)) {
    // DeepSpeed refuses MiCS with either offload.
    if (mics > 0 && choice.isOffloaded())
      continue;
    choice.micsShardSize = mics;
    choice.epSize = ep;
    // The buffers' memories follow the step's offload, as zero-optimizer
    // records it.
    if (choice.isOffloaded())
      step.setOffloadAttr(getOffloadAttr(choice));
    else
      step.removeOffloadAttr();
    // And the states' bytes their precision.
    step.setOptimizerAttr(
        choice.optimizerStates
            ? withStates(stepOptimizer, *choice.optimizerStates)
            : stepOptimizer);
    FailureOr<StepSchedule> schedule = StepSchedule::get(step);
    if (failed(schedule))
      return failure();
    TuneModelStates s;
    s.config = choice;
    for (const PartitionBuffers &p : schedule->getPartitions()) {
      for (unsigned k = 0; k < kNumBufferKinds; ++k) {
        MemoryKind memory = p.getMemory(static_cast<BufferKind>(k));
        if (memory == MemoryKind::device)
          s.deviceBytes += p.bytes[k];
        else if (memory == MemoryKind::host)
          s.hostBytes += p.bytes[k];
      }
    }
    // States on NVMe: the host arena holds their swap buffers, as many and
    // as large as the plan reserves for the step's Adams and transfers.
    if (NvmeSwapAttr swap = schedule->getOptimizerSwap())
      s.hostBytes += swap.getBuffers() * swap.getBufferBytes();
    if (ParamSwapAttr swap = schedule->getParamSwap(0))
      s.hostBytes += swap.getBuffers() * swap.getBufferBytes();
    padded = schedule->getPaddedParamCount();
    states.push_back(s);
  }
  return std::make_pair(std::move(states), padded);
}

ModuleOp Tuner::getFront(int64_t chunk, int64_t tiles, int64_t sp, int64_t ep) {
  auto [it, inserted] = fronts.try_emplace({chunk, tiles, sp, ep}, nullptr);
  if (!inserted)
    return it->second;
  OwningOpRef<ModuleOp> module = model.clone();
  PassManager pm(ctx);
  // In zero-pipeline's order: the target's vocabulary padding (none with a
  // chunked loss) first.
  ZeroPipelineOptions padding;
  padding.target = options.target;
  padding.lossChunk = chunk;
  addPadVocabPass(pm, padding);
  if (chunk != 0) {
    ZeroLossChunkPassOptions fuse;
    fuse.chunk = chunk;
    pm.addPass(createZeroLossChunkPass(fuse));
  }
  if (tiles != 0) {
    ZeroTiledMlpPassOptions tiled;
    tiled.tiles = tiles;
    pm.addPass(createZeroTiledMlpPass(tiled));
  }
  if (sp != 1) {
    ZeroSequenceParallelPassOptions seq;
    seq.spSize = sp;
    pm.addPass(createZeroSequenceParallelPass(seq));
  }
  if (ep != 1) {
    ZeroExpertParallelPassOptions experts;
    experts.epSize = ep;
    pm.addPass(createZeroExpertParallelPass(experts));
  }
  pm.addPass(createZeroAutodiffPass());
  pm.addPass(createZeroMixedPrecisionPass());
  // A refusal (a 16-bit step, say) leaves the chunk out of the search.
  ScopedDiagnosticHandler quiet(ctx, [](Diagnostic &) { return success(); });
  if (failed(pm.run(*module)))
    return nullptr;
  it->second = *module;
  ownedFronts.push_back(std::move(module));
  return it->second;
}

SmallVector<int64_t> Tuner::getLossChunks(int64_t accumulation, int64_t tiles,
                                          int64_t sp, int64_t ep) {
  if (options.lossChunk)
    return {*options.lossChunk};
  SmallVector<int64_t> chunks = {0};
  if (!head)
    return chunks;
  // One chunk as large as the micro batch's rows is the whole logits. A
  // rank holds as many rows with sequence parallelism as without: more
  // sequences, each a part.
  int64_t rows = head->rows / (options.worldSize * accumulation);
  int64_t chunk = getDefaultLossChunk(rows, *head);
  if (chunk < rows && getFront(chunk, tiles, sp, ep))
    chunks.push_back(chunk);
  return chunks;
}

SmallVector<int64_t> Tuner::getEpSizes() const {
  if (options.epSize)
    return {*options.epSize};
  SmallVector<int64_t> experts;
  ModuleOp module = model;
  module.walk([&](nn::MoeDispatchOp d) { experts.push_back(d.getExperts()); });
  SmallVector<int64_t> sizes = {1};
  if (experts.empty())
    return sizes;
  for (int64_t p = 2; p <= options.worldSize; ++p)
    if (options.worldSize % p == 0 &&
        llvm::all_of(experts, [&](int64_t e) { return e % p == 0; }))
      sizes.push_back(p);
  return sizes;
}

SmallVector<int64_t> Tuner::getSpSizes() const {
  SmallVector<int64_t> sizes;
  for (int64_t p = 1; p <= options.worldSize; ++p)
    if (options.worldSize % p == 0 &&
        result.globalBatch % (options.worldSize / p) == 0)
      sizes.push_back(p);
  return sizes;
}

int64_t Tuner::getDefaultTiles(int64_t sp) const {
  if (hidden < 1 || seqLen < 1)
    return 0;
  int64_t tiles = llvm::divideCeil(seqLen / sp, hidden);
  return tiles > 1 ? tiles : 0;
}
