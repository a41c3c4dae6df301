//===- RuntimeCollectiveOpInterface.cpp - A collective's runtime call -----===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Interfaces/RuntimeCollectiveOpInterface.h"

using namespace mlir;
using namespace mlir::zero;

CollectiveCallBuilder::~CollectiveCallBuilder() = default;

#include "zero/Interfaces/RuntimeCollectiveOpInterface.cpp.inc"
