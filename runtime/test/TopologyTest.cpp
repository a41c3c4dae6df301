//===- TopologyTest.cpp - zero_rt/topology.h compiled as C++ --------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "TopologyTest.c"
