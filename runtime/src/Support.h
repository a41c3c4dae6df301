//===- Support.h - Errors and small helpers of the runtime ------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_SUPPORT_H
#define ZERO_RT_SUPPORT_H

#include <cstdarg>
#include <cstdint>

namespace zrt {

/// Prints "zrt: error: <message>" to stderr and aborts. Kernels are called
/// by generated code through a C ABI, so invalid arguments cannot be
/// reported any other way.
[[noreturn]] void fatal(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
/// Prints "zrt: error: <message>" to stderr after flushing stdout, as fatal
/// does, for errors that end the run another way.
void printError(const char *fmt, va_list args)
    __attribute__((format(printf, 1, 0)));

inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// 64-byte aligned allocation, released by std::free; aborts when out of
/// memory.
void *alignedAlloc(int64_t bytes, int64_t alignment = 64);

/// Aborts unless every dimension is non-negative.
inline void checkDims(const char *kernel, int64_t a, int64_t b = 0,
                      int64_t c = 0, int64_t d = 0) {
  if (a < 0 || b < 0 || c < 0 || d < 0)
    fatal("%s: negative dimension", kernel);
}

/// Aborts unless attention's key/value heads divide its query heads (zero
/// only with zero query heads).
inline void checkKvHeads(const char *kernel, int64_t heads, int64_t kvHeads) {
  if (kvHeads < 0)
    fatal("%s: negative dimension", kernel);
  if (kvHeads == 0 ? heads != 0 : heads % kvHeads != 0)
    fatal("%s: kv_heads %lld does not divide heads %lld", kernel,
          (long long)kvHeads, (long long)heads);
}

} // namespace zrt

#endif // ZERO_RT_SUPPORT_H
