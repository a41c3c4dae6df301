//===- BiasFusionOpInterface.cpp - Absorbing a bias add -------------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Interfaces/BiasFusionOpInterface.h"

using namespace mlir;

#include "zero/Interfaces/BiasFusionOpInterface.cpp.inc"
