//===- HostDevice.h - Code shared by the CPU and CUDA kernels ---*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// Headers included by both backends mark their functions ZRT_HOST_DEVICE:
// `__host__ __device__` under nvcc, nothing for the host compiler. Each
// function keeps the primitives of the side it is compiled for (memcpy or
// __float_as_uint, nearbyint or rintf), so sharing the source changes no
// instruction on either side.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_HOST_DEVICE_H
#define ZERO_RT_HOST_DEVICE_H

#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#define ZRT_HOST_DEVICE __host__ __device__
#else
#define ZRT_HOST_DEVICE
#endif

namespace zrt {

ZRT_HOST_DEVICE inline uint32_t floatBits(float x) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  return u;
#endif
}

ZRT_HOST_DEVICE inline float bitsFloat(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, sizeof(x));
  return x;
#endif
}

} // namespace zrt

#endif // ZERO_RT_HOST_DEVICE_H
