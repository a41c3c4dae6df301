//===- Parallel.cpp - The kernels' thread count ---------------------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "Support/Parallel.h"
#include "Support/Support.h"
#include "zero_rt/zrt.h"

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
