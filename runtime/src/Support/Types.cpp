//===- Types.cpp - Element sizes and scalar conversions -------------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "Support/Types.h"

using namespace zrt;

extern "C" int64_t zrt_dtype_size(int32_t dtype) { return dtypeSize(dtype); }

extern "C" uint16_t zrt_f32_to_bf16(float x) { return floatToBf16(x); }
extern "C" float zrt_bf16_to_f32(uint16_t x) { return bf16ToFloat(x); }
extern "C" uint16_t zrt_f32_to_f16(float x) { return floatToF16(x); }
extern "C" float zrt_f16_to_f32(uint16_t x) { return f16ToFloat(x); }
