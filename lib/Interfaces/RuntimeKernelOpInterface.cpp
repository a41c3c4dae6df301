//===- RuntimeKernelOpInterface.cpp - An op's runtime kernel --------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Interfaces/RuntimeKernelOpInterface.h"

#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;
using namespace mlir::zero;

KernelCallBuilder::~KernelCallBuilder() = default;

double mlir::zero::getValueBytes(Value value) {
  auto tensor = dyn_cast<RankedTensorType>(value.getType());
  if (!tensor)
    return 0;
  unsigned bits = tensor.getElementTypeBitWidth();
  return double(tensor.getNumElements() * (bits <= 8 ? 1 : bits / 8));
}

double mlir::zero::getOperandAndResultBytes(Operation *op) {
  double sum = 0;
  for (Value v : op->getOperands())
    sum += getValueBytes(v);
  for (Value v : op->getResults())
    sum += getValueBytes(v);
  return sum;
}

#include "zero/Interfaces/RuntimeKernelOpInterface.cpp.inc"
