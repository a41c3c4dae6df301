//===- version.cpp - ABI version of the runtime ---------------------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero_rt/zrt.h"

extern "C" int32_t zrt_abi_version(void) { return ZRT_ABI_VERSION; }
