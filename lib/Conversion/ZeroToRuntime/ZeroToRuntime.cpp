//===- ZeroToRuntime.cpp - Lower a scheduled step to runtime calls --------===//
//
// Part of the zero-mlir project.
//
// The scheduled step is straight-line code over buffers whose offsets the
// memory plan fixes, so it lowers directly to LLVM-dialect calls of the
// runtime: every value becomes a pointer computed from the plan, every op a
// call. The model's structure (layout, initializers, optimizer, plan) goes
// into a JSON manifest that the runtime's driver reads.
//
//===----------------------------------------------------------------------===//

#include "zero/Conversion/ZeroToRuntime.h"
#include "zero/Conversion/Passes.h"

#include "zero/Dialect/NN/IR/NNDialect.h"
#include "zero/Dialect/Zero/Analysis/MemoryPlan.h"
#include "zero/Dialect/Zero/Analysis/Schedule.h"
#include "zero/Dialect/Zero/IR/ZeroDialect.h"
#include "zero/Interfaces/RuntimeKernelOpInterface.h"

#include "zero_rt/program.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/xxhash.h"

namespace mlir::zero {
#define GEN_PASS_DEF_CONVERTZEROTORUNTIMEPASS
#include "zero/Conversion/Passes.h.inc"
} // namespace mlir::zero

using namespace mlir;
using namespace mlir::zero;

namespace {

StringRef dtypeName(Type t) {
  if (t.isBF16())
    return "bf16";
  if (t.isF16())
    return "f16";
  if (t.isF32())
    return "f32";
  if (t.isInteger(32))
    return "i32";
  return "i64";
}

RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}
int64_t numel(Value v) { return tensorType(v).getNumElements(); }
Type elemType(Value v) { return tensorType(v).getElementType(); }

/// Where a value's bytes live.
struct Storage {
  bool persistent = false;
  int64_t offset = -1;
};

class Lowering {
public:
  Lowering(ModuleOp module, const StepSchedule &schedule,
           const MemoryPlan &plan, int64_t maxFunctionOps)
      : module(module), s(schedule), plan(plan), maxFunctionOps(maxFunctionOps),
        b(module.getContext()) {}

  LogicalResult run();

private:
  /// Lowers the ops of one phase (micro step or boundary) into `entry`,
  /// through internal functions of about `maxFunctionOps` operations each.
  LogicalResult lowerPhase(LLVM::LLVMFuncOp entry, bool isBoundary);

  // Declarations and constants.
  /// Calls runtime function `name`, declared with the type of the runtime's
  /// ABI table; a call the table does not allow is an error on the op being
  /// lowered.
  FailureOr<Value> call(StringRef name, ArrayRef<Value> args);
  void callVoid(StringRef name, ArrayRef<Value> args) {
    (void)call(name, args);
  }
  Value i32(int64_t v) {
    return LLVM::ConstantOp::create(b, loc, b.getI32Type(),
                                    b.getI32IntegerAttr(v));
  }
  Value i64(int64_t v) {
    return LLVM::ConstantOp::create(b, loc, b.getI64Type(),
                                    b.getI64IntegerAttr(v));
  }
  Value f64(double v) {
    return LLVM::ConstantOp::create(b, loc, b.getF64Type(),
                                    b.getF64FloatAttr(v));
  }
  Value dtype(Type elementType) {
    if (elementType.isBF16())
      return i32(ZRT_BF16);
    if (elementType.isF16())
      return i32(ZRT_F16);
    if (elementType.isInteger(64))
      return i32(ZRT_I64);
    return i32(ZRT_F32); // and ZRT_I32
  }
  Value i64Array(ArrayRef<int64_t> values);
  Value ptrArray(ArrayRef<Value> ptrs);
  Type ptrType() { return LLVM::LLVMPointerType::get(b.getContext()); }

  // Storage of values.
  FailureOr<Storage> storageOf(Value v);
  FailureOr<Value> ptr(Value v);
  Value ctxPtr(bool persistent, int64_t offset);

  LogicalResult lowerOp(Operation *op);
  /// Packs the source gradients of a reduction into its bucket and reduces
  /// it (zero.reduce_scatter from sources, or zero.reduce).
  template <typename OpT>
  LogicalResult lowerBucketReduction(OpT op, bool toOwners);
  LogicalResult lowerCompute(RuntimeKernelOpInterface op);
  int32_t partitionIndex(SymbolRefAttr ref);
  int32_t slotOf(Value token);

  std::string buildManifest();

  ModuleOp module;
  const StepSchedule &s;
  const MemoryPlan &plan;
  int64_t maxFunctionOps;
  OpBuilder b;
  Location loc = UnknownLoc::get(module.getContext());
  Value ctx;
  DenseMap<Value, Value> ptrCache;
  DenseMap<std::pair<Operation *, int>, int64_t> resultOffsets;
  DenseMap<Operation *, int64_t> tempOffsets;
  SmallVector<int64_t> inputOffsets;
  DenseMap<Value, int32_t> slots;
  llvm::StringMap<LLVM::LLVMFuncOp> decls;
  unsigned numGlobals = 0;
  /// The op being lowered (for diagnostics).
  Operation *current = nullptr;
  bool callFailed = false;

  friend class KernelCalls;
};

/// A compute op's view of the lowering: its planned buffers and the checked
/// runtime calls.
class KernelCalls : public KernelCallBuilder {
public:
  KernelCalls(Lowering &l, ArrayRef<Value> in, ArrayRef<Value> out)
      : l(l), in(in), out(out) {}
  Value operand(unsigned i) override { return in[i]; }
  Value result(unsigned i) override { return out[i]; }
  ArrayRef<Value> operands() override { return in; }
  ArrayRef<Value> results() override { return out; }
  Value i32(int64_t v) override { return l.i32(v); }
  Value i64(int64_t v) override { return l.i64(v); }
  Value f64(double v) override { return l.f64(v); }
  Value dtype(Type elementType) override { return l.dtype(elementType); }
  Value i64Array(ArrayRef<int64_t> values) override {
    return l.i64Array(values);
  }
  Value ptrArray(ArrayRef<Value> ptrs) override { return l.ptrArray(ptrs); }
  LogicalResult call(StringRef callee, ArrayRef<Value> args) override {
    return l.call(callee, args);
  }

private:
  Lowering &l;
  ArrayRef<Value> in, out;
};

} // namespace

FailureOr<Value> Lowering::call(StringRef name, ArrayRef<Value> args) {
  auto fail = [&]() -> InFlightDiagnostic {
    callFailed = true;
    return current ? current->emitOpError() : emitError(loc) << "the lowering ";
  };
  LLVM::LLVMFunctionType type = getRuntimeFunctionType(b.getContext(), name);
  if (!type) {
    fail() << "calls '" << name
           << "', which the runtime's ABI table (zero_rt/abi.def) does not "
              "list as callable from generated code";
    return failure();
  }
  if (type.getNumParams() != args.size()) {
    fail() << "calls '" << name << "' with " << args.size()
           << " arguments; the runtime's ABI table has " << type.getNumParams();
    return failure();
  }
  for (auto [i, a] : llvm::enumerate(args))
    if (a.getType() != type.getParamType(i)) {
      fail() << "calls '" << name << "' with " << a.getType() << " as argument "
             << i << "; the runtime's ABI table has " << type.getParamType(i);
      return failure();
    }
  LLVM::LLVMFuncOp &fn = decls[name];
  if (!fn) {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToEnd(module.getBody());
    fn = LLVM::LLVMFuncOp::create(b, loc, name, type);
  }
  auto c = LLVM::CallOp::create(b, loc, fn, args);
  if (isa<LLVM::LLVMVoidType>(type.getReturnType()))
    return Value();
  return c.getResult();
}

Value Lowering::i64Array(ArrayRef<int64_t> values) {
  auto arrayType = LLVM::LLVMArrayType::get(b.getI64Type(), values.size());
  std::string name = "zero_const_" + std::to_string(numGlobals++);
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(module.getBody());
    auto attr = DenseElementsAttr::get(
        RankedTensorType::get({static_cast<int64_t>(values.size())},
                              b.getI64Type()),
        values);
    LLVM::GlobalOp::create(b, loc, arrayType, /*isConstant=*/true,
                           LLVM::Linkage::Internal, name, attr);
  }
  return LLVM::AddressOfOp::create(b, loc, ptrType(), name);
}

Value Lowering::ptrArray(ArrayRef<Value> ptrs) {
  auto arrayType = LLVM::LLVMArrayType::get(ptrType(), ptrs.size());
  Value count = i64(1);
  Value array = LLVM::AllocaOp::create(b, loc, ptrType(), arrayType, count);
  for (auto [i, p] : llvm::enumerate(ptrs)) {
    Value slot = LLVM::GEPOp::create(
        b, loc, ptrType(), arrayType, array,
        ArrayRef<LLVM::GEPArg>{0, static_cast<int32_t>(i)});
    LLVM::StoreOp::create(b, loc, p, slot);
  }
  return array;
}

Value Lowering::ctxPtr(bool persistent, int64_t offset) {
  return *call(persistent ? "zrt_ctx_persistent" : "zrt_ctx_step",
               {ctx, i64(offset)});
}

int32_t Lowering::partitionIndex(SymbolRefAttr ref) {
  StringRef name = ref.getLeafReference().getValue();
  for (auto [i, p] : llvm::enumerate(s.getPartitions())) {
    PartitionOp op = p.partition;
    if (op.getSymName() == name)
      return i;
  }
  return -1;
}

int32_t Lowering::slotOf(Value token) {
  if (!token)
    return -1;
  auto [it, inserted] = slots.try_emplace(token, slots.size());
  return it->second;
}

static int64_t persistentOffset(const MemoryPlan &plan, PartitionOp p,
                                BufferKind kind) {
  for (const PersistentBuffer &buf : plan.persistent) {
    PartitionOp q = buf.partition;
    if (q == p && buf.kind == kind)
      return buf.offset;
  }
  return -1;
}

FailureOr<Storage> Lowering::storageOf(Value v) {
  if (auto arg = dyn_cast<BlockArgument>(v))
    return Storage{false, inputOffsets[arg.getArgNumber()]};
  Operation *def = v.getDefiningOp();
  if (auto get = dyn_cast<GetParamOp>(def)) {
    const ParamLocation *loc = s.lookupParam(get.getParam());
    if (!loc)
      return get.emitOpError("parameter is in no partition");
    const PartitionBuffers *pb = s.lookupPartition(loc->partition.getSymName());
    int64_t eb = getElementBytes(pb->computeType);
    if (get.getSource()) {
      FailureOr<Storage> src = storageOf(get.getSource());
      if (failed(src))
        return failure();
      return Storage{src->persistent, src->offset + loc->offset * eb};
    }
    if (s.getStage() == 3)
      return get.emitOpError("stage-3 parameters must be read from a gather");
    return Storage{true, persistentOffset(plan, loc->partition,
                                          BufferKind::params) +
                             loc->offset * eb};
  }
  if (auto view = dyn_cast<ViewLikeOpInterface>(def))
    return storageOf(view.getViewSource());
  for (Operation *user : v.getUsers())
    if (auto g = dyn_cast<GradOp>(user); g && s.isGradientInPlace(g)) {
      const ParamLocation *loc = s.lookupParam(g.getParam());
      const PartitionBuffers *pb =
          s.lookupPartition(loc->partition.getSymName());
      return Storage{true, persistentOffset(plan, loc->partition,
                                            BufferKind::grads) +
                               loc->offset * getElementBytes(pb->computeType)};
    }
  auto it = resultOffsets.find({def, cast<OpResult>(v).getResultNumber()});
  if (it == resultOffsets.end())
    return def->emitOpError("result has no buffer in the memory plan");
  return Storage{false, it->second};
}

FailureOr<Value> Lowering::ptr(Value v) {
  auto it = ptrCache.find(v);
  if (it != ptrCache.end())
    return it->second;
  FailureOr<Storage> st = storageOf(v);
  if (failed(st))
    return failure();
  Value p = ctxPtr(st->persistent, st->offset);
  ptrCache[v] = p;
  return p;
}

LogicalResult Lowering::lowerCompute(RuntimeKernelOpInterface op) {
  SmallVector<Value> in, out;
  for (Value v : op->getOperands()) {
    FailureOr<Value> p = ptr(v);
    if (failed(p))
      return failure();
    in.push_back(*p);
  }
  for (Value v : op->getResults()) {
    FailureOr<Value> p = ptr(v);
    if (failed(p))
      return failure();
    out.push_back(*p);
  }
  KernelCalls calls(*this, in, out);
  return op.buildKernelCall(calls);
}

template <typename OpT>
LogicalResult Lowering::lowerBucketReduction(OpT op, bool toOwners) {
  Value bucket = ctxPtr(false, tempOffsets.lookup(op));
  int64_t at = 0, total = op.getEnd() - op.getBegin();
  for (auto [src, off] : llvm::zip(op.getSources(), op.getSourceOffsets())) {
    int64_t take = std::min(numel(src) - off, total - at);
    FailureOr<Value> base = ptr(src);
    if (failed(base))
      return failure();
    Value from = LLVM::GEPOp::create(
        b, loc, ptrType(), b.getI8Type(), *base,
        ArrayRef<LLVM::GEPArg>{i64(off * getElementBytes(elemType(src)))});
    callVoid("zrt_ctx_bucket_add", {ctx, bucket, i64(at), from, i64(take)});
    at += take;
  }
  callVoid("zrt_ctx_reduce_bucket",
           {ctx, i32(partitionIndex(op.getGroupAttr())), i64(op.getBegin()),
            i64(op.getEnd()), bucket, i32(toOwners),
            i32(slotOf(op.getToken()))});
  return success();
}

LogicalResult Lowering::lowerOp(Operation *op) {
  loc = op->getLoc();
  current = op;
  if (isViewOp(op) || isa<FreeOp>(op))
    return success();
  if (auto kernel = dyn_cast<RuntimeKernelOpInterface>(op))
    return lowerCompute(kernel);
  if (!isa<ZeroDialect>(op->getDialect()))
    return op->emitOpError(
        "has no runtime kernel model (RuntimeKernelOpInterface), so "
        "convert-zero-to-runtime cannot lower it");
  auto p = [&](Value v) -> Value {
    FailureOr<Value> r = ptr(v);
    return succeeded(r) ? *r : Value();
  };
  return TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](GradOp g) -> LogicalResult {
        if (s.getStage() >= 2 || s.isGradientInPlace(g))
          return success();
        const ParamLocation *pl = s.lookupParam(g.getParam());
        const PartitionBuffers *pb =
            s.lookupPartition(pl->partition.getSymName());
        if (elemType(g.getGrad()) != pb->computeType)
          return g.emitOpError("gradient element type differs from the "
                               "partition's compute type");
        Value src = p(g.getGrad());
        if (!src)
          return failure();
        callVoid("zrt_ctx_store_grad",
                 {ctx, i32(partitionIndex(FlatSymbolRefAttr::get(
                           pl->partition.getSymNameAttr()))),
                  i64(pl->offset), src, i64(numel(g.getGrad()))});
        return success();
      })
      .Case([&](LossScaleOp o) -> LogicalResult {
        Value out = p(o.getResult());
        if (!out)
          return failure();
        callVoid("zrt_ctx_loss_scale", {ctx, out});
        return success();
      })
      .Case([&](ReduceScatterOp o) -> LogicalResult {
        if (o.getBuffer()) {
          callVoid("zrt_ctx_reduce_scatter_grads",
                   {ctx, i32(partitionIndex(o.getGroupAttr())),
                    i64(o.getBegin()), i64(o.getEnd()),
                    i32(slotOf(o.getToken()))});
          return success();
        }
        return lowerBucketReduction(o, /*toOwners=*/false);
      })
      .Case([&](ReduceOp o) -> LogicalResult {
        // In place (stage 1 with reduce-scatter=false) the owners end up with
        // the same sums as with a reduce-scatter of the range, which is how
        // the runtime delivers them.
        if (o.getBuffer()) {
          callVoid("zrt_ctx_reduce_scatter_grads",
                   {ctx, i32(partitionIndex(o.getGroupAttr())),
                    i64(o.getBegin()), i64(o.getEnd()),
                    i32(slotOf(o.getToken()))});
          return success();
        }
        return lowerBucketReduction(o, /*toOwners=*/true);
      })
      .Case([&](AllReduceOp o) -> LogicalResult {
        int32_t slot = slotOf(o.getToken());
        if (o.getBuffer()) {
          callVoid("zrt_ctx_all_reduce_grads",
                   {ctx, i32(partitionIndex(o.getGroupAttr())),
                    i64(*o.getBegin()), i64(*o.getEnd()), i32(slot)});
          return success();
        }
        if (o.getKind() != ReduceKind::overflow_norm)
          return o.emitOpError("only the overflow_norm value form lowers to "
                               "the runtime");
        Value in = p(o.getInput()), out = p(o.getResult());
        if (!in || !out)
          return failure();
        callVoid("zrt_ctx_all_reduce_stats", {ctx, in, out, i32(slot)});
        return success();
      })
      .Case([&](AllGatherOp o) -> LogicalResult {
        int32_t part = partitionIndex(o.getGroupAttr());
        int32_t slot = slotOf(o.getToken());
        if (o.getBuffer()) {
          callVoid("zrt_ctx_all_gather_params",
                   {ctx, i32(part), i64(*o.getBegin()), i64(*o.getEnd()),
                    i32(slot)});
          return success();
        }
        Value out = p(o.getResult());
        if (!out)
          return failure();
        callVoid("zrt_ctx_gather_partition", {ctx, i32(part), out, i32(slot)});
        return success();
      })
      .Case([&](PrefetchOp o) -> LogicalResult {
        Value out = p(o.getResult());
        if (!out)
          return failure();
        callVoid("zrt_ctx_gather_partition",
                 {ctx, i32(partitionIndex(o.getGroupAttr())), out,
                  i32(slotOf(o.getToken()))});
        return success();
      })
      .Case([&](WaitOp o) -> LogicalResult {
        callVoid("zrt_ctx_wait", {ctx, i32(slotOf(o.getToken()))});
        return success();
      })
      .Case([&](CheckOverflowOp o) -> LogicalResult {
        Value scale = p(o.getLossScale()), out = p(o.getResult());
        if (!scale || !out)
          return failure();
        for (auto [i, g] : llvm::enumerate(o.getGroups()))
          callVoid("zrt_ctx_check_overflow",
                   {ctx, i32(partitionIndex(cast<SymbolRefAttr>(g))),
                    i32(i == 0), scale, f64(o.getDivisor().convertToDouble()),
                    out});
        return success();
      })
      .Case([&](UpdateLossScaleOp o) -> LogicalResult {
        Value stats = p(o.getStats());
        if (!stats)
          return failure();
        FailureOr<Value> skip = call("zrt_ctx_update_loss_scale", {ctx, stats});
        if (failed(skip))
          return failure();
        ptrCache[o.getSkip()] = *skip;
        return success();
      })
      .Case([&](AdamOp o) -> LogicalResult {
        Value stats = p(o.getStats()), scale = p(o.getLossScale());
        auto skip = ptrCache.find(o.getSkip());
        if (!stats || !scale || skip == ptrCache.end())
          return o.emitOpError("needs its zero.update_loss_scale in the same "
                               "function (both run at the step boundary)");
        callVoid("zrt_ctx_adam",
                 {ctx, i32(partitionIndex(o.getGroupAttr())), stats, scale,
                  skip->second, f64(o.getDivisor().convertToDouble())});
        return success();
      })
      .Case([&](ReturnOp o) -> LogicalResult {
        Value loss = p(o.getLoss());
        if (!loss)
          return failure();
        callVoid("zrt_ctx_set_loss", {ctx, loss});
        return success();
      })
      .Default([&](Operation *op) {
        return op->emitOpError("has no lowering to the runtime");
      });
}

std::string Lowering::buildManifest() {
  TrainStepOp step = s.getStep();
  using llvm::json::Array;
  using llvm::json::Object;
  Array params, partitions, inputs;
  for (ParamOp p : module.getOps<ParamOp>()) {
    const ParamLocation *loc = s.lookupParam(p.getSymName());
    Array shape;
    for (int64_t d : p.getTensorType().getShape())
      shape.push_back(d);
    Object o{{"name", p.getSymName()},
             {"shape", std::move(shape)},
             {"numel", p.getNumElements()},
             {"init", stringifyInitKind(p.getInit())},
             {"std", p.getStd() ? p.getStd()->convertToDouble() : 0.0},
             {"partition", loc ? partitionIndex(FlatSymbolRefAttr::get(
                                     loc->partition.getSymNameAttr()))
                               : -1},
             {"offset", loc ? loc->offset : -1}};
    params.push_back(std::move(o));
  }
  for (const PartitionBuffers &pb : s.getPartitions()) {
    PartitionOp p = pb.partition;
    Object buffers, sizes;
    for (unsigned k = 0; k < 5; ++k) {
      auto kind = static_cast<BufferKind>(k);
      buffers[stringifyBufferKind(kind)] = persistentOffset(plan, p, kind);
      sizes[stringifyBufferKind(kind)] = pb.numel[k];
    }
    Array names;
    for (Attribute a : p.getParams())
      names.push_back(cast<SymbolRefAttr>(a).getLeafReference().getValue());
    partitions.push_back(Object{{"name", p.getSymName()},
                                {"numel", p.getNumelValue()},
                                {"padded_numel", p.getPaddedNumelValue()},
                                {"shard_numel", p.getShardNumel()},
                                {"params", std::move(names)},
                                {"buffers", std::move(buffers)},
                                {"buffer_numel", std::move(sizes)}});
  }
  for (BlockArgument arg : step.getBodyBlock().getArguments()) {
    Array shape;
    for (int64_t d : tensorType(arg).getShape())
      shape.push_back(d);
    inputs.push_back(Object{{"shape", std::move(shape)},
                            {"dtype", dtypeName(elemType(arg))},
                            {"offset", inputOffsets[arg.getArgNumber()]}});
  }
  OptimizerAttr opt = step.getOptimizer();
  PrecisionAttr prec = step.getPrecision();
  int64_t globalBatch = 0;
  if (ScheduleAttr schedule = step.getScheduleAttr())
    globalBatch = schedule.getGlobalBatch();
  PartitionOp first = s.getPartitions().front().partition;
  Object manifest{
      {"version", ZRT_PROGRAM_VERSION},
      {"stage", s.getStage()},
      {"world_size", s.getWorldSize()},
      {"accumulation_steps", s.getAccumulationSteps()},
      {"global_batch", globalBatch},
      {"compute_dtype", dtypeName(s.getPartitions().front().computeType)},
      {"precision",
       Object{{"kind", stringifyPrecisionKind(prec.getKind())},
              {"initial_scale_power", prec.getInitialScalePower()},
              {"loss_scale_window", prec.getLossScaleWindow()},
              {"hysteresis", prec.getHysteresis()},
              {"min_loss_scale", prec.getMinLossScale().convertToDouble()}}},
      {"optimizer",
       Object{{"kind", stringifyOptimizerKind(opt.getKind())},
              {"lr", opt.getLr().convertToDouble()},
              {"beta1", opt.getBeta1().convertToDouble()},
              {"beta2", opt.getBeta2().convertToDouble()},
              {"eps", opt.getEps().convertToDouble()},
              {"weight_decay", opt.getWeightDecay().convertToDouble()}}},
      {"gradient_clipping", step.getGradientClipping().convertToDouble()},
      {"alignment", static_cast<int64_t>(first.getAlignment())},
      {"token_slots", static_cast<int64_t>(slots.size())},
      {"inputs", std::move(inputs)},
      {"params", std::move(params)},
      {"partitions", std::move(partitions)},
      {"plan", Object{{"persistent_bytes", plan.persistentBytes},
                      {"arena_bytes", plan.arenaBytes},
                      {"scratch_bytes", plan.scratchBytes},
                      {"peak_bytes", plan.peakBytes}}},
  };
  // The hash covers the manifest and the schedule itself, so executables
  // compiled from different schedules refuse to run together.
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::json::Value(Object(manifest));
  std::string ir;
  llvm::raw_string_ostream irs(ir);
  step->print(irs, OpPrintingFlags().elideLargeElementsAttrs());
  uint64_t hash = llvm::xxh3_64bits(StringRef(text + ir));
  manifest["hash"] = llvm::formatv("{0:x16}", hash).str();
  std::string out;
  llvm::raw_string_ostream mos(out);
  mos << llvm::json::Value(std::move(manifest));
  return out;
}

namespace {
/// Counts the operations a builder inserts.
struct OpCounter : public OpBuilder::Listener {
  void notifyOperationInserted(Operation *, OpBuilder::InsertPoint) override {
    ++count;
  }
  int64_t count = 0;
};
} // namespace

LogicalResult Lowering::lowerPhase(LLVM::LLVMFuncOp entry, bool isBoundary) {
  // LLVM's register allocator is superlinear in the size of a function, so a
  // long phase becomes a sequence of internal functions `<entry>_<k>(ctx,
  // carry)` that the entry calls in order. Pointers are recomputed in each
  // function; other lowered values a later function reads (the loss-scale
  // skip flag) are passed through `carry`, one 8-byte slot each.
  TrainStepOp step = s.getStep();
  Block *entryBody = &entry.getBody().front();
  auto chunkType = LLVM::LLVMFunctionType::get(
      LLVM::LLVMVoidType::get(b.getContext()), {ptrType(), ptrType()});
  SmallVector<LLVM::LLVMFuncOp> chunks;
  SmallVector<std::pair<Value, Type>> carried;
  SmallVector<Operation *> chunkOps;
  Value carry;
  auto slot = [&](size_t i) -> Value {
    return LLVM::GEPOp::create(b, loc, ptrType(), b.getI64Type(), carry,
                               ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(i)});
  };
  OpCounter counter;
  b.setListener(&counter);
  auto openChunk = [&] {
    b.setInsertionPointToEnd(module.getBody());
    auto fn = LLVM::LLVMFuncOp::create(
        b, step.getLoc(), (entry.getName() + "_" + Twine(chunks.size())).str(),
        chunkType, LLVM::Linkage::Internal);
    chunks.push_back(fn);
    Block *body = fn.addEntryBlock(b);
    b.setInsertionPointToEnd(body);
    ctx = body->getArgument(0);
    carry = body->getArgument(1);
    ptrCache.clear();
    chunkOps.clear();
    loc = step.getLoc();
    for (auto [i, value] : llvm::enumerate(carried))
      ptrCache[value.first] =
          LLVM::LoadOp::create(b, loc, value.second, slot(i));
    counter.count = 0;
  };
  auto closeChunk = [&](bool more) {
    loc = step.getLoc();
    if (more)
      for (Operation *op : chunkOps)
        for (Value r : op->getResults()) {
          auto it = ptrCache.find(r);
          if (it == ptrCache.end() ||
              isa<LLVM::LLVMPointerType>(it->second.getType()))
            continue;
          LLVM::StoreOp::create(b, loc, it->second, slot(carried.size()));
          carried.push_back({r, it->second.getType()});
        }
    LLVM::ReturnOp::create(b, loc, ValueRange());
  };

  // The loss is recorded by the micro step; the terminator's position in the
  // boundary function does not matter.
  openChunk();
  for (Operation &op : step.getBodyBlock()) {
    bool opBoundary = runsAtBoundary(getStepPhase(&op));
    if (isa<ReturnOp>(op))
      opBoundary = false;
    if (opBoundary != isBoundary)
      continue;
    if (maxFunctionOps > 0 && counter.count >= maxFunctionOps) {
      closeChunk(/*more=*/true);
      openChunk();
    }
    if (failed(lowerOp(&op)) || callFailed) {
      b.setListener(nullptr);
      return failure();
    }
    chunkOps.push_back(&op);
  }
  closeChunk(/*more=*/false);
  b.setListener(nullptr);

  // A phase that fits in one function is emitted as the entry itself.
  loc = step.getLoc();
  if (chunks.size() == 1) {
    Block &body = chunks.front().getBody().front();
    body.getArgument(0).replaceAllUsesWith(entryBody->getArgument(0));
    entryBody->getOperations().splice(entryBody->end(), body.getOperations());
    chunks.front().erase();
    return success();
  }
  b.setInsertionPointToEnd(entryBody);
  Value carryArray;
  if (carried.empty()) {
    carryArray = LLVM::ZeroOp::create(b, loc, ptrType());
  } else {
    auto arrayType = LLVM::LLVMArrayType::get(b.getI64Type(), carried.size());
    carryArray = LLVM::AllocaOp::create(b, loc, ptrType(), arrayType, i64(1));
  }
  for (LLVM::LLVMFuncOp fn : chunks)
    LLVM::CallOp::create(b, loc, fn,
                         ValueRange{entryBody->getArgument(0), carryArray});
  LLVM::ReturnOp::create(b, loc, ValueRange());
  return success();
}

LogicalResult Lowering::run() {
  TrainStepOp step = s.getStep();
  for (const ArenaBuffer &buf : plan.buffers) {
    if (buf.argIndex >= 0) {
      if (inputOffsets.size() <= static_cast<size_t>(buf.argIndex))
        inputOffsets.resize(buf.argIndex + 1, -1);
      inputOffsets[buf.argIndex] = buf.offset;
    } else if (buf.resultIndex < 0) {
      tempOffsets[buf.op] = buf.offset;
    } else {
      resultOffsets[{buf.op, buf.resultIndex}] = buf.offset;
    }
  }
  inputOffsets.resize(step.getBodyBlock().getNumArguments(), -1);

  // Token slots in program order (also for the manifest).
  for (Operation &op : step.getBodyBlock())
    for (Value r : op.getResults())
      if (isa<TokenType>(r.getType()))
        slotOf(r);

  auto voidType = LLVM::LLVMVoidType::get(b.getContext());
  auto fnType = LLVM::LLVMFunctionType::get(voidType, {ptrType()});
  b.setInsertionPointToEnd(module.getBody());
  auto micro = LLVM::LLVMFuncOp::create(b, step.getLoc(), "zero_micro_step",
                                        fnType);
  auto boundary = LLVM::LLVMFuncOp::create(b, step.getLoc(), "zero_boundary",
                                           fnType);
  micro.addEntryBlock(b);
  boundary.addEntryBlock(b);
  if (failed(lowerPhase(micro, /*isBoundary=*/false)) ||
      failed(lowerPhase(boundary, /*isBoundary=*/true)))
    return failure();

  // The manifest and the program descriptor.
  std::string manifest = buildManifest();
  manifest.push_back('\0');
  b.setInsertionPointToEnd(module.getBody());
  auto manifestType =
      LLVM::LLVMArrayType::get(b.getI8Type(), manifest.size());
  LLVM::GlobalOp::create(b, loc, manifestType, /*isConstant=*/true,
                         LLVM::Linkage::Internal, "zero_manifest",
                         b.getStringAttr(manifest));
  auto programType = LLVM::LLVMStructType::getLiteral(
      b.getContext(), {b.getI32Type(), ptrType(), ptrType(), ptrType()});
  auto program = LLVM::GlobalOp::create(b, loc, programType,
                                        /*isConstant=*/true,
                                        LLVM::Linkage::External,
                                        "zero_program", Attribute());
  Block *init = b.createBlock(&program.getInitializerRegion());
  b.setInsertionPointToStart(init);
  Value v = LLVM::UndefOp::create(b, loc, programType);
  v = LLVM::InsertValueOp::create(b, loc, v, i32(ZRT_PROGRAM_VERSION),
                                  ArrayRef<int64_t>{0});
  v = LLVM::InsertValueOp::create(
      b, loc, v, LLVM::AddressOfOp::create(b, loc, ptrType(), "zero_manifest"),
      1);
  v = LLVM::InsertValueOp::create(
      b, loc, v,
      LLVM::AddressOfOp::create(b, loc, ptrType(), "zero_micro_step"),
      ArrayRef<int64_t>{2});
  v = LLVM::InsertValueOp::create(
      b, loc, v, LLVM::AddressOfOp::create(b, loc, ptrType(), "zero_boundary"),
      ArrayRef<int64_t>{3});
  LLVM::ReturnOp::create(b, loc, v);
  return success();
}

namespace {
struct ConvertZeroToRuntimePass
    : public mlir::zero::impl::ConvertZeroToRuntimePassBase<
          ConvertZeroToRuntimePass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (maxFunctionOps < 0) {
      module.emitError("convert-zero-to-runtime: max-function-ops must be "
                       ">= 0, got ")
          << maxFunctionOps.getValue();
      return signalPassFailure();
    }
    auto steps = llvm::to_vector(module.getOps<TrainStepOp>());
    if (steps.size() != 1) {
      module.emitError("convert-zero-to-runtime: expected exactly one "
                       "zero.train_step, found ")
          << steps.size();
      return signalPassFailure();
    }
    FailureOr<StepSchedule> schedule = StepSchedule::get(steps.front());
    if (failed(schedule))
      return signalPassFailure();
    FailureOr<MemoryPlan> plan = computeMemoryPlan(*schedule);
    if (failed(plan))
      return signalPassFailure();
    if (failed(Lowering(module, *schedule, *plan, maxFunctionOps).run()))
      return signalPassFailure();
    // The model and its step now live in the program and its manifest.
    for (Operation &op : llvm::make_early_inc_range(*module.getBody()))
      if (isa<TrainStepOp>(op))
        op.erase();
    for (Operation &op : llvm::make_early_inc_range(*module.getBody()))
      if (isa<ParamOp, PartitionOp>(op))
        op.erase();
  }
};
} // namespace
