//===- ProgramDescriptor.cpp - The zero_program global --------------------===//
//
// Part of the zero-mlir project.
//
// The `zrt_program` (runtime/include/zero_rt/program.h) that the runtime's
// `main` trains with: the ABI version, the manifest and the entry points
// of the step (micro step, boundary, evaluation step, and the label count
// function or null).
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "zero_rt/program.h"

using namespace mlir;
using namespace mlir::zero;
using namespace mlir::zero::lowering;

void Lowering::emitProgramDescriptor(std::string manifest, bool countLabels) {
  manifest.push_back('\0');
  b.setInsertionPointToEnd(module.getBody());
  auto manifestType = LLVM::LLVMArrayType::get(b.getI8Type(), manifest.size());
  LLVM::GlobalOp::create(b, loc, manifestType, /*isConstant=*/true,
                         LLVM::Linkage::Internal, "zero_manifest",
                         b.getStringAttr(manifest));
  auto programType = LLVM::LLVMStructType::getLiteral(
      b.getContext(),
      {b.getI32Type(), ptrType(), ptrType(), ptrType(), ptrType(), ptrType()});
  auto program =
      LLVM::GlobalOp::create(b, loc, programType,
                             /*isConstant=*/true, LLVM::Linkage::External,
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
  v = LLVM::InsertValueOp::create(
      b, loc, v, LLVM::AddressOfOp::create(b, loc, ptrType(), "zero_eval_step"),
      ArrayRef<int64_t>{4});
  Value count =
      countLabels
          ? LLVM::AddressOfOp::create(b, loc, ptrType(), "zero_count_labels")
                .getResult()
          : LLVM::ZeroOp::create(b, loc, ptrType()).getResult();
  v = LLVM::InsertValueOp::create(b, loc, v, count, ArrayRef<int64_t>{5});
  LLVM::ReturnOp::create(b, loc, v);
}
