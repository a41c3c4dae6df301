//===- Lowering.cpp - Values and runtime calls of the lowering ------------===//
//
// Part of the zero-mlir project.
//
// Every value of the step becomes a pointer into the persistent arena or the
// step arena at the offset the memory plan gives it (views point into what
// they view), and every runtime function is declared and called with the
// type of the runtime's ABI table.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "zero/Conversion/ZeroToRuntime.h"

using namespace mlir;
using namespace mlir::zero;
using namespace mlir::zero::lowering;

Lowering::Lowering(ModuleOp module, const StepSchedule &schedule,
                   const MemoryPlan &plan, int64_t maxFunctionOps)
    : module(module), s(schedule), plan(plan), maxFunctionOps(maxFunctionOps),
      b(module.getContext()), runtimeCalls(module) {
  for (auto [i, p] : llvm::enumerate(s.getPartitions()))
    partitionIndices.try_emplace(p.partition.getSymNameAttr(), i);
  for (const PersistentBuffer &buf : plan.persistent)
    persistentOffsets.try_emplace({buf.partition, buf.kind}, buf.offset);
}

//===----------------------------------------------------------------------===//
// Runtime calls and constants
//===----------------------------------------------------------------------===//

FailureOr<Value> Lowering::call(StringRef name, ArrayRef<Value> args) {
  return runtimeCalls.call(b, loc, name, args, [&]() -> InFlightDiagnostic {
    callFailed = true;
    return current ? current->emitOpError() : emitError(loc) << "the lowering ";
  });
}

Value Lowering::constantArray(DenseElementsAttr values) {
  auto arrayType = LLVM::LLVMArrayType::get(values.getElementType(),
                                            values.getNumElements());
  std::string name = "zero_const_" + std::to_string(numGlobals++);
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(module.getBody());
    LLVM::GlobalOp::create(b, loc, arrayType, /*isConstant=*/true,
                           LLVM::Linkage::Internal, name, values);
  }
  return LLVM::AddressOfOp::create(b, loc, ptrType(), name);
}

Value Lowering::i64Array(ArrayRef<int64_t> values) {
  return constantArray(DenseElementsAttr::get(
      RankedTensorType::get({static_cast<int64_t>(values.size())},
                            b.getI64Type()),
      values));
}

Value Lowering::f32Array(ArrayRef<float> values) {
  if (values.empty())
    return LLVM::ZeroOp::create(b, loc, ptrType());
  return constantArray(DenseElementsAttr::get(
      RankedTensorType::get({static_cast<int64_t>(values.size())},
                            b.getF32Type()),
      values));
}

Value Lowering::ptrArray(ArrayRef<Value> ptrs) {
  auto arrayType = LLVM::LLVMArrayType::get(ptrType(), ptrs.size());
  Value count = i64(1);
  Value array = LLVM::AllocaOp::create(b, loc, ptrType(), arrayType, count);
  for (auto [i, p] : llvm::enumerate(ptrs)) {
    Value slot =
        LLVM::GEPOp::create(b, loc, ptrType(), arrayType, array,
                            ArrayRef<LLVM::GEPArg>{0, static_cast<int32_t>(i)});
    LLVM::StoreOp::create(b, loc, p, slot);
  }
  return array;
}

FailureOr<Value> Lowering::record(StringRef name, ArrayRef<Value> fields) {
  auto fail = [&]() -> InFlightDiagnostic {
    callFailed = true;
    InFlightDiagnostic d =
        current ? current->emitOpError() : emitError(loc) << "the lowering ";
    d << "builds '" << name << "'";
    return d;
  };
  LLVM::LLVMStructType type = getRuntimeStructType(b.getContext(), name);
  if (!type) {
    fail() << ", which is no struct of the runtime's tables";
    return failure();
  }
  ArrayRef<Type> body = type.getBody();
  if (body.size() != fields.size()) {
    fail() << " with " << fields.size() << " fields; the runtime's table has "
           << body.size();
    return failure();
  }
  Value value = LLVM::UndefOp::create(b, loc, type);
  for (auto [i, field] : llvm::enumerate(fields)) {
    if (field.getType() != body[i]) {
      fail() << " with " << field.getType() << " as field " << i
             << "; the runtime's table has " << body[i];
      return failure();
    }
    value = LLVM::InsertValueOp::create(b, loc, value, field, i);
  }
  Value ptr = LLVM::AllocaOp::create(b, loc, ptrType(), type, i64(1));
  LLVM::StoreOp::create(b, loc, value, ptr);
  return ptr;
}

//===----------------------------------------------------------------------===//
// Token slots
//===----------------------------------------------------------------------===//

int32_t Lowering::slotOf(Value token) {
  if (!token)
    return -1;
  auto [it, inserted] = slots.try_emplace(token, slots.size());
  return it->second;
}

//===----------------------------------------------------------------------===//
// Storage of values
//===----------------------------------------------------------------------===//

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
    return Storage{true, persistentOffset(loc->partition, BufferKind::params) +
                             loc->offset * eb};
  }
  if (auto view = dyn_cast<ViewLikeOpInterface>(def))
    return storageOf(view.getViewSource());
  for (Operation *user : v.getUsers())
    if (auto g = dyn_cast<GradOp>(user); g && s.isGradientInPlace(g)) {
      const ParamLocation *loc = s.lookupParam(g.getParam());
      const PartitionBuffers *pb =
          s.lookupPartition(loc->partition.getSymName());
      return Storage{true, persistentOffset(loc->partition, BufferKind::grads) +
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
Value Lowering::ctxPtr(bool persistent, int64_t offset) {
  return *call(persistent ? "zrt_ctx_persistent" : "zrt_ctx_step",
               {ctx, i64(offset)});
}
