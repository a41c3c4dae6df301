//===- Support.cpp - Errors -----------------------------------------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "Support/Support.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>

void zrt::printError(const char *fmt, va_list args) {
  std::fflush(stdout);
  std::fputs("zrt: error: ", stderr);
  std::vfprintf(stderr, fmt, args);
  std::fputc('\n', stderr);
}

void zrt::fatal(const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  printError(fmt, args);
  va_end(args);
  std::abort();
}

void *zrt::tryAlignedAlloc(int64_t bytes, int64_t alignment) noexcept {
  // aligned_alloc wants a multiple of the alignment; never ask for 0 bytes.
  int64_t rounded = std::max<int64_t>(bytes, 1);
  if (rounded > INT64_MAX - alignment)
    return nullptr;
  rounded = (rounded + alignment - 1) / alignment * alignment;
  return std::aligned_alloc(size_t(alignment), size_t(rounded));
}

void *zrt::alignedAlloc(int64_t bytes, int64_t alignment) {
  void *p = tryAlignedAlloc(bytes, alignment);
  if (!p)
    fatal("out of memory allocating %lld bytes", (long long)bytes);
  return p;
}
