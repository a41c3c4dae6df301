//===- Support.cpp - Errors and threads -----------------------------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "Support.h"
#include "Parallel.h"
#include "zero_rt/zrt.h"

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

extern "C" void zrt_set_num_threads(int32_t n) {
  if (n < 1)
    zrt::fatal("zrt_set_num_threads: %d threads", int(n));
#ifdef _OPENMP
  omp_set_num_threads(n);
#endif
}

extern "C" int32_t zrt_num_threads(void) {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}
