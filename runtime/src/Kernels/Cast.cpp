//===- Cast.cpp - Element type conversion and fill ------------------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "Driver/Trace.h"
#include "Kernels/Kernels.h"

#include <algorithm>

using namespace zrt;

extern "C" void zrt_cast(int32_t srcDtype, const void *src, int32_t dstDtype,
                         void *dst, int64_t n) {
  KernelSpan span("zrt_cast");
  checkDims("zrt_cast", n);
  if (srcDtype == dstDtype) {
    zrt_copy(dst, src, n * dtypeSize(srcDtype));
    return;
  }
  dispatchFloat(srcDtype, [&](auto srcTag) {
    dispatchFloat(dstDtype, [&](auto dstTag) {
      using S = decltype(srcTag);
      using D = decltype(dstTag);
      const S *in = static_cast<const S *>(src);
      D *out = static_cast<D *>(dst);
      parallelFor(n, kGrain, [&](int64_t begin, int64_t end) {
        alignas(64) float buf[kBlock];
        for (int64_t i = begin; i < end; i += kBlock) {
          int64_t len = std::min(kBlock, end - i);
          fromFloat(loadF32(in + i, len, buf), out + i, len);
        }
      });
    });
  });
}

extern "C" void zrt_fill(int32_t dtype, void *dst, int64_t n, double value) {
  KernelSpan span("zrt_fill");
  checkDims("zrt_fill", n);
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    T v = fromFloat<T>(float(value));
    T *out = static_cast<T *>(dst);
    parallelFor(n, kGrain, [&](int64_t begin, int64_t end) {
      std::fill(out + begin, out + end, v);
    });
  });
}
