//===- LowerPhases.cpp - The step's phases as bounded functions -----------===//
//
// Part of the zero-mlir project.
//
// The step becomes three entry points of the runtime's `zrt_program`:
// `zero_micro_step` (the ops of every micro step), `zero_boundary` (the
// ops that run once per optimizer step) and `zero_eval_step` (the forward
// cut at the loss, getEvaluationOps), and a fourth with a
// zero.count_labels or zero.count_sum, `zero_count_labels` (the ops
// computing the counted labels and sums, and the counts of one micro
// batch's). A phase longer than
// `max-function-ops` LLVM operations is emitted as internal functions that
// its entry calls in order.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

using namespace mlir;
using namespace mlir::zero;
using namespace mlir::zero::lowering;

namespace {
/// Counts the operations a builder inserts.
struct OpCounter : public OpBuilder::Listener {
  void notifyOperationInserted(Operation *, OpBuilder::InsertPoint) override {
    ++count;
  }
  int64_t count = 0;
};
} // namespace

LogicalResult Lowering::lowerPhase(LLVM::LLVMFuncOp entry,
                                   ArrayRef<Operation *> ops, bool trace) {
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

  openChunk();
  for (Operation *op : ops) {
    if (maxFunctionOps > 0 && counter.count >= maxFunctionOps) {
      closeChunk(/*more=*/true);
      openChunk();
    }
    int64_t index = opIndices.lookup(op);
    if (trace)
      traceMemory(index, /*before=*/true);
    // An op of the last or first micro step only runs when the runtime's
    // flag says so. What it computes inside the guard is not reused after
    // it. The evaluation step gathers (and stages) what it reads itself.
    Phase phase = getStepPhase(op);
    bool guarded =
        !countingLabels &&
        (phase == Phase::last_micro_step ||
         (phase == Phase::first_micro_step &&
          !(evaluating && isa<AllGatherOp, TransferOp, WaitOp, FreeOp>(op))));
    Block *after = nullptr;
    DenseMap<Value, Value> outerCache;
    if (guarded) {
      loc = op->getLoc();
      FailureOr<Value> runs =
          call(phase == Phase::first_micro_step ? "zrt_ctx_first_micro_step"
                                                : "zrt_ctx_last_micro_step",
               {ctx});
      if (failed(runs) || callFailed) {
        b.setListener(nullptr);
        return failure();
      }
      Value flag =
          LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::ne, *runs, i32(0));
      Region *region = b.getInsertionBlock()->getParent();
      Block *then = new Block();
      after = new Block();
      region->push_back(then);
      region->push_back(after);
      LLVM::CondBrOp::create(b, loc, flag, then, after);
      b.setInsertionPointToEnd(then);
      outerCache = ptrCache;
    }
    if (failed(lowerOp(op)) || callFailed) {
      b.setListener(nullptr);
      return failure();
    }
    if (guarded) {
      LLVM::BrOp::create(b, loc, after);
      b.setInsertionPointToEnd(after);
      ptrCache = std::move(outerCache);
    }
    if (trace)
      traceMemory(index, /*before=*/false);
    chunkOps.push_back(op);
  }
  closeChunk(/*more=*/false);
  b.setListener(nullptr);

  // A phase that fits in one function is emitted as the entry itself.
  loc = step.getLoc();
  if (chunks.size() == 1) {
    Region &chunkBody = chunks.front().getBody();
    Block &body = chunkBody.front();
    body.getArgument(0).replaceAllUsesWith(entryBody->getArgument(0));
    entryBody->getOperations().splice(entryBody->end(), body.getOperations());
    // The blocks of guarded ops (last_micro_step) follow the entry block.
    entry.getBody().getBlocks().splice(
        entry.getBody().end(), chunkBody.getBlocks(),
        std::next(chunkBody.begin()), chunkBody.end());
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

void Lowering::traceMemory(int64_t index, bool before) {
  if (plan.ops.size() <= static_cast<size_t>(index))
    return;
  Operation *op = plan.ops[index];
  ArrayRef<std::pair<int64_t, int64_t>> ranges =
      before ? liveAt[index] : deadAt[index];
  // Every op that runs something marks its position; views and frees only
  // when bytes change there.
  bool mark = before && ((!isViewOp(op) && !isa<FreeOp>(op)) ||
                         !liveAt[index].empty() || !deadAt[index].empty());
  if (ranges.empty() && !mark)
    return;
  loc = op->getLoc();
  current = op;
  // Straight-line calls with constant arguments: not counted toward
  // max-function-ops, so a phase splits where it would without them.
  OpBuilder::Listener *listener = b.getListener();
  b.setListener(nullptr);
  if (mark)
    callVoid("zrt_ctx_trace_op", {ctx, i64(index)});
  for (auto [offset, bytes] : ranges)
    callVoid(before ? "zrt_ctx_trace_live" : "zrt_ctx_trace_dead",
             {ctx, i64(offset), i64(bytes)});
  b.setListener(listener);
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

  // Lifetimes for memory tracing. Inputs become live before the first op
  // (the driver declares them when it loads the batch).
  liveAt.assign(plan.ops.size(), {});
  deadAt.assign(plan.ops.size(), {});
  for (const ArenaBuffer &buf : plan.buffers) {
    if (buf.bytes <= 0 || buf.pieces.empty())
      continue;
    // Every piece of a buffer starts with it.
    if (int64_t start = buf.pieces.front().start; start >= 0)
      liveAt[start].push_back({buf.offset, buf.bytes});
    for (const ArenaPiece &piece : buf.pieces)
      if (piece.bytes > 0)
        deadAt[std::max<int64_t>(piece.end, 0)].push_back(
            {piece.offset, piece.bytes});
  }

  // Token slots in program order (also for the manifest).
  for (Operation &op : step.getBodyBlock())
    for (Value r : op.getResults())
      if (isa<TokenType>(r.getType()))
        slotOf(r);

  // The ops of each entry point. The loss is recorded by the micro step
  // (the terminator's position in the boundary function would not matter)
  // and at the end of the evaluation step.
  SmallVector<Operation *> microOps, boundaryOps;
  for (auto [index, op] : llvm::enumerate(step.getBodyBlock())) {
    opIndices[&op] = index;
    bool atBoundary = !isa<ReturnOp>(op) && runsAtBoundary(getStepPhase(&op));
    (atBoundary ? boundaryOps : microOps).push_back(&op);
  }
  SmallVector<Operation *> evalOps = getEvaluationOps(step);
  evalOps.push_back(step.getReturnOp());

  auto voidType = LLVM::LLVMVoidType::get(b.getContext());
  auto fnType = LLVM::LLVMFunctionType::get(voidType, {ptrType()});
  b.setInsertionPointToEnd(module.getBody());
  auto micro =
      LLVM::LLVMFuncOp::create(b, step.getLoc(), "zero_micro_step", fnType);
  auto boundary =
      LLVM::LLVMFuncOp::create(b, step.getLoc(), "zero_boundary", fnType);
  auto eval =
      LLVM::LLVMFuncOp::create(b, step.getLoc(), "zero_eval_step", fnType);
  micro.addEntryBlock(b);
  boundary.addEntryBlock(b);
  eval.addEntryBlock(b);
  // The evaluation step traces no memory: its buffers end where the
  // training step's do, after ops it does not run.
  if (failed(lowerPhase(micro, microOps, /*trace=*/true)) ||
      failed(lowerPhase(boundary, boundaryOps, /*trace=*/true)))
    return failure();
  evaluating = true;
  LogicalResult evaluated = lowerPhase(eval, evalOps, /*trace=*/false);
  evaluating = false;
  if (failed(evaluated))
    return failure();

  // The count function (labels, sums of the inputs): like the evaluation
  // step, a cut of the step at the training step's offsets, whose ops the
  // micro step that follows writes again before it reads them.
  auto counts = step.getBodyBlock().getOps<CountLabelsOp>();
  SmallVector<Value> counted;
  SmallVector<Operation *> countOps;
  if (!counts.empty()) {
    CountLabelsOp count = *counts.begin();
    if (std::next(counts.begin()) != counts.end())
      return count.emitOpError("is one of several zero.count_labels of the "
                               "step; the runtime keeps one count");
    counted.push_back(count.getLabels());
    countOps.push_back(count);
  }
  for (CountSumOp sum : step.getBodyBlock().getOps<CountSumOp>()) {
    counted.push_back(sum.getValue());
    countOps.push_back(sum);
  }
  bool countLabels = !countOps.empty();
  if (countLabels) {
    SmallVector<Operation *> ops = getOpsComputing(step, counted);
    // The count ops in the order of the step, after what they read.
    llvm::SmallPtrSet<Operation *, 4> isCount(countOps.begin(), countOps.end());
    for (Operation &op : step.getBodyBlock())
      if (isCount.contains(&op))
        ops.push_back(&op);
    b.setInsertionPointToEnd(module.getBody());
    auto fn =
        LLVM::LLVMFuncOp::create(b, step.getLoc(), "zero_count_labels", fnType);
    fn.addEntryBlock(b);
    countingLabels = true;
    LogicalResult lowered = lowerPhase(fn, ops, /*trace=*/false);
    countingLabels = false;
    if (failed(lowered))
      return failure();
  }

  // The manifest and the program descriptor.
  FailureOr<std::string> manifest = buildManifest();
  if (failed(manifest))
    return failure();
  emitProgramDescriptor(*manifest, countLabels);
  return success();
}
