//===- Optimizer.cpp - Overflow check, loss scale and fused Adam ----------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/Transforms/Passes.h"

#include "ScheduleUtils.h"
#include "zero/Dialect/NN/IR/NNDialect.h"
#include "zero/Dialect/Zero/Transforms/LrSchedule.h"
#include "zero/Support/UTF8.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::zero {
#define GEN_PASS_DEF_ZEROOPTIMIZERPASS
#include "zero/Dialect/Zero/Transforms/Passes.h.inc"
} // namespace mlir::zero

using namespace mlir;
using namespace mlir::zero;
using namespace mlir::zero::schedule;

namespace {

struct ZeroOptimizerPass
    : public mlir::zero::impl::ZeroOptimizerPassBase<ZeroOptimizerPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (gradientClipping < 0.0 && gradientClipping != -1.0) {
      mlir::emitError(module.getLoc(),
                      "zero-optimizer: gradient-clipping must be >= 0 (or -1 "
                      "to keep the train step's value), got ")
          << gradientClipping.getValue();
      return signalPassFailure();
    }
    FailureOr<OffloadAttr> offload = getOffload(module);
    if (failed(offload))
      return signalPassFailure();
    // Frozen partitions have no gradients or states: no overflow check,
    // norm, clipping or Adam reads them.
    SmallVector<Attribute> groups;
    for (PartitionOp part : module.getOps<PartitionOp>())
      if (!part.getFrozen())
        groups.push_back(FlatSymbolRefAttr::get(part.getSymNameAttr()));
    for (TrainStepOp step : module.getOps<TrainStepOp>()) {
      FailureOr<StepSchedule> schedule =
          getPartitionedSchedule(step, "zero-optimizer");
      if (failed(schedule))
        return signalPassFailure();
      if (groups.empty()) {
        mlir::emitError(step.getLoc())
            << "train step @" << step.getSymName() << " "
            << ("has no zero.partition to update");
        return signalPassFailure();
      }
      if (!step.getOps<OptimizerStepOp>().empty()) {
        mlir::emitError(step.getLoc())
            << "train step @" << step.getSymName() << " "
            << ("already has an optimizer step");
        return signalPassFailure();
      }
      // zero-param-gather recorded parameter offload (its gathers read
      // staged shards); the optimizer options add to it.
      OffloadAttr params = step.getOffload();
      if (requestedParam != OffloadDevice::none &&
          params.getParam() != requestedParam) {
        mlir::emitError(step.getLoc())
            << "zero-optimizer: parameter offload (offload_param) needs "
               "zero-param-gather's offload-param="
            << stringifyOffloadDevice(requestedParam)
            << ", whose gathers read staged shards";
        return signalPassFailure();
      }
      // The parameters' part is zero-param-gather's.
      OffloadAttr options = *offload;
      OffloadAttr stepOffload = OffloadAttr::get(
          &getContext(), options.getOptimizer(), params.getParam(),
          options.getNvmePath(), options.getBufferCount(),
          options.getBufferSize(), params.getParamNvmePath(),
          params.getParamBufferCount(), params.getParamBufferSize());
      if (stepOffload.offloadsOptimizer() || stepOffload.offloadsParams()) {
        if (failed(stepOffload.verifyStage(
                [&] {
                  return mlir::emitError(step.getLoc()) << "zero-optimizer: ";
                },
                schedule->getStage())))
          return signalPassFailure();
        step.setOffloadAttr(stepOffload);
        // The buffers' memories follow the attribute.
        schedule = StepSchedule::get(step);
        if (failed(schedule))
          return signalPassFailure();
      }
      if (gradientClipping >= 0.0)
        step.setGradientClippingAttr(
            FloatAttr::get(Float64Type::get(&getContext()), gradientClipping));
      if (failed(applyOptimizerOptions(step)))
        return signalPassFailure();
      // The states' bytes follow their precision, the masters' presence
      // bf16_masters.
      if (!optimizerStates.empty() || !bf16Masters.empty()) {
        schedule = StepSchedule::get(step);
        if (failed(schedule))
          return signalPassFailure();
      }
      emit(step, *schedule, groups);
    }
  }

  /// lr-schedule, bias-correction, optimizer-states and the weight-decay
  /// groups.
  LogicalResult applyOptimizerOptions(TrainStepOp step) {
    MLIRContext *ctx = &getContext();
    auto emitError = [&]() -> InFlightDiagnostic {
      return mlir::emitError(step.getLoc()) << "zero-optimizer: ";
    };
    OptimizerAttr opt = step.getOptimizer();
    bool bias = opt.getBiasCorrection();
    if (!biasCorrection.empty()) {
      if (biasCorrection != "true" && biasCorrection != "false")
        return emitError() << "bias-correction must be true or false, got '"
                           << biasCorrection << "'";
      bias = biasCorrection == "true";
    }
    LrScheduleAttr sched = opt.getSchedule();
    if (lrSchedule == "none") {
      sched = {};
    } else if (!lrSchedule.empty()) {
      sched = parseLrScheduleSpec(ctx, lrSchedule, emitError);
      if (!sched)
        return failure();
    }
    StatePrecision states = opt.getStates();
    if (!optimizerStates.empty()) {
      std::optional<StatePrecision> p =
          symbolizeStatePrecision(optimizerStates);
      if (!p)
        return emitError()
               << "optimizer-states must be f32, bf16 or int8, got '"
               << optimizerStates << "'";
      states = *p;
    }
    bool bf16 = opt.getBf16Masters();
    if (!bf16Masters.empty()) {
      if (bf16Masters != "true" && bf16Masters != "false")
        return emitError() << "bf16-masters must be true or false, got '"
                           << bf16Masters << "'";
      bf16 = bf16Masters == "true";
    }
    OptimizerParams params = opt.getParams();
    params.bias_correction = bias;
    OptimizerAttr updated = OptimizerAttr::getChecked(
        emitError, ctx, opt.getKind(), opt.getLr().convertToDouble(), params,
        states, sched, bf16);
    if (!updated)
      return failure();
    step.setOptimizerAttr(updated);

    if (!noDecayBiasNorm && !noDecayEmbeddings)
      return success();
    auto module = step->getParentOfType<ModuleOp>();
    llvm::StringSet<> tables;
    if (noDecayEmbeddings)
      step.walk([&](GetParamOp get) {
        for (OpOperand &use : get->getUses())
          if (auto e = dyn_cast<EmbeddingOpInterface>(use.getOwner());
              e && &e.getTableMutable() == &use)
            tables.insert(get.getParam());
      });
    Builder b(ctx);
    for (ParamOp p : module.getOps<ParamOp>())
      if ((noDecayBiasNorm && p.getTensorType().getRank() == 1) ||
          tables.contains(p.getSymName()))
        p.setWeightDecayAttr(b.getF64FloatAttr(0.0));
    return success();
  }

  /// The offload-param option: zero-param-gather must have recorded it.
  OffloadDevice requestedParam = OffloadDevice::none;

  /// The optimizer's offload options as an attribute (without offload:
  /// #zero.offload<>), or an error for a bad choice; the parameters' part
  /// is zero-param-gather's.
  FailureOr<OffloadAttr> getOffload(ModuleOp module) {
    auto fail = [&]() -> InFlightDiagnostic {
      InFlightDiagnostic d = mlir::emitError(module.getLoc());
      d << "zero-optimizer: ";
      return d;
    };
    auto parse = [&](StringRef option,
                     StringRef value) -> FailureOr<OffloadDevice> {
      if (std::optional<OffloadDevice> d = symbolizeOffloadDevice(value))
        return *d;
      return fail() << option << " must be none, cpu or nvme, got '" << value
                    << "'";
    };
    FailureOr<OffloadDevice> optimizer =
        parse("offload-optimizer", offloadOptimizer);
    FailureOr<OffloadDevice> param = parse("offload-param", offloadParam);
    if (failed(optimizer) || failed(param))
      return failure();
    requestedParam = *param;
    // Named here by its option; the attribute's verifier would name
    // nvme_path.
    if (failed(::zero::checkUTF8(fail, "nvme-path ", nvmePath.getValue(),
                                 "the path goes into the program's JSON "
                                 "manifest")))
      return failure();
    // nvme-path also names the parameters' swap folder (zero-param-gather's
    // default), so it only belongs to the optimizer when that is on nvme.
    StringRef path = *optimizer == OffloadDevice::nvme
                         ? StringRef(nvmePath.getValue())
                         : StringRef();
    if (*optimizer != OffloadDevice::nvme && *param != OffloadDevice::nvme &&
        !nvmePath.empty())
      path = nvmePath; // reported by the verifier below
    // The parameters' part is zero-param-gather's: none here.
    OffloadAttr none = OffloadAttr::get(&getContext());
    OffloadAttr attr = OffloadAttr::getChecked(
        [&] { return fail(); }, &getContext(), *optimizer, OffloadDevice::none,
        path, int64_t(nvmeBufferCount), int64_t(nvmeBufferSize), StringRef(),
        none.getParamBufferCount(), none.getParamBufferSize());
    if (!attr)
      return failure();
    if (*optimizer == OffloadDevice::none)
      return none;
    return attr;
  }

  /// The step's overflow flag and squared norm, the same on every rank.
  /// At stages 1-3 each rank owns a shard of every partition: the stats are
  /// summed over the group, which a dense partition names (an expert
  /// partition's rank set is its replicas). At stage 0 every rank already
  /// holds the fully reduced gradients and owns them all: summing the dense
  /// stats over ranks would be wrong. Under expert parallelism a rank holds
  /// only its expert-parallel member's experts, so their stats are reduced
  /// over the expert-parallel set (DeepSpeed's expert-parallel group) and
  /// combined with the dense ones, every expert counted once.
  Value emitStats(OpBuilder &b, Location loc, const StepSchedule &schedule,
                  ArrayRef<Attribute> groups,
                  ArrayRef<const PartitionBuffers *> trainable, Value scale,
                  FloatAttr divisor, SmallVectorImpl<Operation *> &created) {
    auto stats = RankedTensorType::get({2}, b.getF32Type());
    auto overflowNorm =
        ReduceKindAttr::get(b.getContext(), ReduceKind::overflow_norm);
    SmallVector<Attribute> dense, experts;
    for (auto [group, pb] : llvm::zip(groups, trainable))
      (pb->partition.getExpert() ? experts : dense).push_back(group);
    auto check = [&](ArrayRef<Attribute> checked, Value partial) {
      auto op = CheckOverflowOp::create(b, loc, stats, b.getArrayAttr(checked),
                                        scale, partial, divisor);
      created.push_back(op);
      return op.getResult();
    };
    auto reduce = [&](Value value, Attribute group, RankSetKindAttr set) {
      auto op =
          AllReduceOp::create(b, loc, stats, Type(), overflowNorm, value,
                              cast<FlatSymbolRefAttr>(group), BufferKindAttr(),
                              IntegerAttr(), IntegerAttr(), UnitAttr(), set);
      created.push_back(op);
      return op.getResult();
    };
    if (schedule.getStage() != 0)
      return reduce(check(groups, Value()),
                    dense.empty() ? groups.front() : dense.front(),
                    RankSetKindAttr());
    if (schedule.getExpertParallel() == 1 || experts.empty())
      return check(groups, Value());
    Value reduced =
        reduce(check(experts, Value()), experts.front(),
               RankSetKindAttr::get(b.getContext(), RankSetKind::expert));
    return dense.empty() ? reduced : check(dense, reduced);
  }

  void emit(TrainStepOp step, const StepSchedule &schedule,
            ArrayRef<Attribute> groups) {
    Block &body = step.getBodyBlock();
    OpBuilder b(getOptimizerInsertionPoint(body));
    Location loc = step.getLoc();
    // Reductions sum over ranks and micro steps; Adam needs the mean.
    auto divisor = b.getF64FloatAttr(static_cast<double>(
        schedule.getWorldSize() * schedule.getAccumulationSteps()));
    auto f32 = b.getF32Type();
    auto stats = RankedTensorType::get({2}, f32);
    bool offloaded = schedule.isOptimizerOffloaded();
    SmallVector<Operation *> created;
    auto tokenType = TokenType::get(b.getContext());
    SmallVector<Value> uploads;
    auto wait = [&](Value token) {
      created.push_back(WaitOp::create(b, loc, token));
    };
    // Parameter shards on NVMe: each write goes through swap buffer i mod
    // buffer_count, after the write that used that buffer before completed.
    int64_t swapBuffers = schedule.getParamSwapBufferCount(), writes = 0;
    SmallVector<Value> swapUser(swapBuffers);
    auto transfer = [&](Attribute group, std::optional<BufferKind> from,
                        BufferKind to, Value staged = {}) {
      auto kind = [&](std::optional<BufferKind> k) {
        return k ? BufferKindAttr::get(b.getContext(), *k) : BufferKindAttr();
      };
      ParamSwapAttr swap;
      if (to == BufferKind::params && swapBuffers > 0) {
        swap = schedule.getParamSwap(writes++);
        if (Value &previous = swapUser[swap.getBuffer()]) {
          wait(previous);
          llvm::erase(uploads, previous);
        }
      }
      auto op = TransferOp::create(
          b, loc, Type(), tokenType, cast<FlatSymbolRefAttr>(group), kind(from),
          kind(to), staged, IntegerAttr(), IntegerAttr(), swap,
          PhaseAttr::get(b.getContext(), Phase::boundary));
      created.push_back(op);
      if (swap)
        swapUser[swap.getBuffer()] = op.getToken();
      return op.getToken();
    };
    // Parameter offload with the optimizer on the device: Adam writes each
    // partition's new parameters into a staged buffer that goes to the host
    // shard while the next partition's Adam runs.
    bool storeParams = schedule.areParamsOffloaded() && !offloaded;
    SmallVector<const PartitionBuffers *> trainable =
        schedule.getTrainablePartitions();
    SmallVector<Value> staged;
    // Optimizer offload: the owned gradients stream to the host bucket by
    // bucket as their reductions complete; a partition without reductions
    // starts its whole copy here, so that it overlaps the overflow check and
    // the host Adam of the partitions before it.
    SmallVector<SmallVector<Value>> downloads(groups.size());
    if (offloaded) {
      llvm::DenseMap<StringRef, SmallVector<Value>> streamed =
          streamGradients(step);
      for (auto [i, group] : llvm::enumerate(groups)) {
        StringRef name = cast<FlatSymbolRefAttr>(group).getValue();
        if (auto it = streamed.find(name); it != streamed.end())
          downloads[i] = it->second;
        else
          downloads[i].push_back(
              transfer(group, BufferKind::grads, BufferKind::host_grads));
      }
    }
    // MiCS: each shard group reduced its own micro batches' gradients into
    // its shards; summing the shards over the replicas gives every replica
    // the gradients of the whole global batch, still divided by the world's
    // divisor. All are issued before the first is waited for.
    if (schedule.getMicsReplicas() > 1) {
      SmallVector<Value> replicaSums;
      for (const PartitionBuffers *pb : trainable) {
        PartitionOp part = pb->partition;
        auto sum = AllReduceOp::create(
            b, loc, Type(), tokenType,
            ReduceKindAttr::get(b.getContext(), ReduceKind::sum), Value(),
            FlatSymbolRefAttr::get(part.getSymNameAttr()),
            BufferKindAttr::get(b.getContext(), BufferKind::grads),
            b.getI64IntegerAttr(0), b.getI64IntegerAttr(part.getNumelValue()),
            b.getUnitAttr(), RankSetKindAttr());
        created.push_back(sum);
        replicaSums.push_back(sum.getToken());
      }
      for (Value token : replicaSums)
        wait(token);
    }
    auto scale = LossScaleOp::create(b, loc, RankedTensorType::get({}, f32));
    created.push_back(scale);
    Value global =
        emitStats(b, loc, schedule, groups, trainable, scale, divisor, created);
    auto skip = UpdateLossScaleOp::create(b, loc, b.getI1Type(), global);
    created.push_back(skip);
    for (auto [i, group] : llvm::enumerate(groups)) {
      // Only this partition's copies: the later partitions' may still run.
      for (Value token : downloads[i])
        wait(token);
      const PartitionBuffers &pb = *trainable[i];
      Type newParams;
      if (storeParams)
        newParams = RankedTensorType::get({pb.partition.getShardNumel()},
                                          pb.computeType);
      auto adam = OptimizerStepOp::create(
          b, loc, newParams, cast<FlatSymbolRefAttr>(group), global, scale,
          skip, divisor, offloaded ? b.getUnitAttr() : UnitAttr(),
          schedule.getOptimizerSwap());
      created.push_back(adam);
      if (storeParams) {
        staged.push_back(adam.getNewParams());
        uploads.push_back(transfer(group, std::nullopt, BufferKind::params,
                                   adam.getNewParams()));
      }
      // The updated parameters return while the next partition's Adam
      // runs (to the device, or through a swap buffer to the parameter
      // swap file); fp32 parameters come from their host masters. Shards in
      // host memory were updated in place by the host Adam.
      if (offloaded && !schedule.areParamsOnHost())
        uploads.push_back(transfer(group,
                                   pb.hasBuffer(BufferKind::host_params)
                                       ? BufferKind::host_params
                                       : BufferKind::master,
                                   BufferKind::params));
    }
    for (Value token : uploads)
      wait(token);
    for (Value v : staged)
      created.push_back(
          FreeOp::create(b, loc, v, IntegerAttr(), IntegerAttr()));
    for (Operation *op : created)
      markBoundary(op);
  }

  /// Streams the owned gradients of an offloaded optimizer to the host: a
  /// copy of each gradient reduction's layout range right after that
  /// reduction completed (its zero.wait, or the reduction itself when it is
  /// synchronous), in the phase that runs once per step there: a reduction
  /// of every micro step (stages 2-3) is copied in the last one only (phase
  /// last_micro_step), overlapping the backward of the later buckets; one at
  /// the boundary (stage 1) is copied at the boundary.
  /// The copies move the same bytes as one copy of the whole owned part.
  /// Returns each streamed partition's copy tokens, in issue order.
  llvm::DenseMap<StringRef, SmallVector<Value>>
  streamGradients(TrainStepOp step) {
    llvm::DenseMap<StringRef, SmallVector<Value>> tokens;
    SmallVector<Operation *> reductions;
    for (Operation &op : step.getBodyBlock())
      if (isa<ReduceScatterOp, ReduceOp>(op))
        reductions.push_back(&op);
    auto tokenType = TokenType::get(step.getContext());
    llvm::SmallPtrSet<Operation *, 16> copies;
    for (Operation *op : reductions) {
      auto coll = cast<CollectiveOpInterface>(op);
      Operation *done = op;
      if (Value token = coll.getToken())
        for (Operation *user : token.getUsers())
          if (isa<WaitOp>(user))
            done = user;
      auto [begin, end] = *coll.getElementRange();
      Phase phase = runsAtBoundary(getStepPhase(done)) ? Phase::boundary
                                                       : Phase::last_micro_step;
      OpBuilder b(done->getContext());
      b.setInsertionPointAfter(done);
      auto copy = TransferOp::create(
          b, op->getLoc(), Type(), tokenType, coll.getGroupAttr(),
          BufferKindAttr::get(b.getContext(), BufferKind::grads),
          BufferKindAttr::get(b.getContext(), BufferKind::host_grads), Value(),
          b.getI64IntegerAttr(begin), b.getI64IntegerAttr(end), ParamSwapAttr(),
          PhaseAttr::get(b.getContext(), phase));
      copies.insert(copy);
    }
    // In issue order, the order in which the copy stream completes them.
    for (Operation &op : step.getBodyBlock())
      if (auto copy = dyn_cast<TransferOp>(op); copy && copies.contains(copy))
        tokens[copy.getGroup()].push_back(copy.getToken());
    return tokens;
  }
};

} // namespace
