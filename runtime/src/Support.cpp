//===- Support.cpp - Errors -----------------------------------------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "Support.h"

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
