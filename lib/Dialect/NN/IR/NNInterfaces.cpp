//===- NNInterfaces.cpp - Roles of compute ops ----------------------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/NN/IR/NNInterfaces.h"

using namespace mlir;

#include "zero/Dialect/NN/IR/NNInterfaces.cpp.inc"
