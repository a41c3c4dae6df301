//===- ExpertOpInterface.cpp - Ops over a layer's experts -----------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Interfaces/ExpertOpInterface.h"

using namespace mlir;

#include "zero/Interfaces/ExpertOpInterface.cpp.inc"
