//===- ZeroDialect.cpp - Model structure and ZeRO schedule dialect --------===//
//
// Part of the zero-mlir project.
//
// The dialect's registration; its attributes are in ZeroAttributes.cpp and
// its ops in ZeroOps.cpp.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/IR/ZeroDialect.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::zero;

#include "zero/Dialect/Zero/IR/ZeroOpsDialect.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "zero/Dialect/Zero/IR/ZeroOpsTypes.cpp.inc"

void ZeroDialect::initialize() {
  registerAttributes();
  registerTypes();
  addOperations<
#define GET_OP_LIST
#include "zero/Dialect/Zero/IR/ZeroOps.cpp.inc"
      >();
}

void ZeroDialect::registerTypes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "zero/Dialect/Zero/IR/ZeroOpsTypes.cpp.inc"
      >();
}
