//===- DeviceCpu.cpp - Tensor memory of the CPU backend -------------------===//
//
// Part of the zero-mlir project.
//
// Tensors live in host memory: the device functions are plain copies, and a
// step is over when the step function returns.
//
//===----------------------------------------------------------------------===//

#include "Device.h"
#include "Memory.h"
#include "Program.h"

#include <cstdlib>
#include <cstring>

using namespace zrt;

const char *device::backendName() { return "cpu"; }

void device::initialize(int) {}

void *device::allocate(int64_t bytes) { return alignedAlloc(bytes); }

void device::release(void *ptr) { std::free(ptr); }

void device::upload(void *dst, const void *src, int64_t bytes) {
  if (bytes > 0 && dst != src)
    std::memcpy(dst, src, size_t(bytes));
}

void device::download(void *dst, const void *src, int64_t bytes) {
  if (bytes > 0 && dst != src)
    std::memcpy(dst, src, size_t(bytes));
}

void device::zero(void *dst, int64_t bytes) {
  if (bytes > 0)
    std::memset(dst, 0, size_t(bytes));
}

void device::uploadCast(const float *src, int32_t dtype, void *dst,
                        int64_t n) {
  zrt_cast(ZRT_F32, src, dtype, dst, n);
}

void device::downloadCast(const void *src, int32_t dtype, float *dst,
                          int64_t n) {
  zrt_cast(dtype, src, ZRT_F32, dst, n);
}

void device::finishStep(zrt_ctx &) {}
