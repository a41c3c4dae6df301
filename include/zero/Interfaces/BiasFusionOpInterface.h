//===- BiasFusionOpInterface.h - Absorbing a bias add -----------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_INTERFACES_BIASFUSIONOPINTERFACE_H
#define ZERO_INTERFACES_BIASFUSIONOPINTERFACE_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpDefinition.h"

#include "zero/Interfaces/BiasFusionOpInterface.h.inc"

#endif // ZERO_INTERFACES_BIASFUSIONOPINTERFACE_H
