//===- PaddingOpInterface.cpp - Padding a dimension of an operand ---------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Interfaces/PaddingOpInterface.h"

using namespace mlir;

#include "zero/Interfaces/PaddingOpInterface.cpp.inc"
