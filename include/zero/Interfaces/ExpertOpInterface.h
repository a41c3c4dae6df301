//===- ExpertOpInterface.h - Ops over a layer's experts ---------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_INTERFACES_EXPERTOPINTERFACE_H
#define ZERO_INTERFACES_EXPERTOPINTERFACE_H

#include "mlir/IR/OpDefinition.h"

#include "zero/Interfaces/ExpertOpInterface.h.inc"

#endif // ZERO_INTERFACES_EXPERTOPINTERFACE_H
