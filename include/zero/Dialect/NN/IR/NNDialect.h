//===- NNDialect.h - Compute dialect ----------------------------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_DIALECT_NN_IR_NNDIALECT_H
#define ZERO_DIALECT_NN_IR_NNDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "zero/Dialect/NN/IR/NNInterfaces.h"
#include "zero/Interfaces/BiasFusionOpInterface.h"
#include "zero/Interfaces/DerivativeInterface.h"
#include "zero/Interfaces/IndexOperandOpInterface.h"
#include "zero/Interfaces/PaddingOpInterface.h"

#include "zero/Dialect/NN/IR/NNOpsDialect.h.inc"

#define GET_OP_CLASSES
#include "zero/Dialect/NN/IR/NNOps.h.inc"

namespace mlir::nn {
/// Whether `op` is a compute op of this dialect.
bool isNNOp(Operation *op);
} // namespace mlir::nn

#endif // ZERO_DIALECT_NN_IR_NNDIALECT_H
