//===- NNInterfaces.h - Roles of compute ops --------------------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_DIALECT_NN_IR_NNINTERFACES_H
#define ZERO_DIALECT_NN_IR_NNINTERFACES_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "zero/Dialect/NN/IR/NNTraits.h"

#include "zero/Dialect/NN/IR/NNInterfaces.h.inc"

#endif // ZERO_DIALECT_NN_IR_NNINTERFACES_H
