//===- Memory.h - Accounted kernel scratch ----------------------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_MEMORY_H
#define ZERO_RT_MEMORY_H

#include <cstdint>

struct zrt_arena;

namespace zrt {

/// A heap temporary of a kernel, 64-byte aligned. Its size is added to the
/// runtime's scratch accounting while it lives, so the measured peak can be
/// compared with the compiler's plan (zero_rt/scratch.h).
class Scratch {
public:
  explicit Scratch(int64_t bytes);
  ~Scratch();
  Scratch(const Scratch &) = delete;
  Scratch &operator=(const Scratch &) = delete;

  template <typename T>
  T *as() const {
    return static_cast<T *>(ptr);
  }

private:
  void *ptr = nullptr;
  int64_t bytes = 0;
};

/// Adds delta bytes (negative: releases) to the scratch in use and raises
/// its peak: for backends whose scratch is not a Scratch (device memory).
void accountScratch(int64_t delta);

/// zrt_arena_create, but throws OutOfMemory when the device memory is not
/// there (the driver's setup, where every rank agrees on the failure).
/// `what` names the arena in the error.
zrt_arena *createArena(int64_t bytes, const char *what);
/// An arena of pinned host memory (an offloaded optimizer's masters,
/// moments and copies), released by zrt_arena_destroy. Its high-water mark
/// counts toward hostMemoryPeakBytes, not toward zrt_memory_peak_bytes.
/// Throws OutOfMemory.
zrt_arena *createHostArena(int64_t bytes);
/// Peak of the sum of live host arenas' high-water marks.
int64_t hostMemoryPeakBytes();

} // namespace zrt

#endif // ZERO_RT_MEMORY_H
