//===- Muon.cpp - torch.optim.Muon's step on the CPU ----------------------===//
//
// Part of the zero-mlir project.
//
// torch's CPU Newton-Schulz in bf16, operation for operation: the momentum
// and the parameter in fp32 (KernelMath.h), X rounded to bf16, its
// Frobenius norm rounded to bf16, and each bf16 product one fp32 sum of
// exact products rounded once (oneDNN's bf16 GEMM; addmm's beta * C fused
// into alpha times that sum). The sums run through OpenBLAS's sgemm on the
// bf16 values widened to fp32, so only their order differs from torch's:
// an element rounds to another bf16 only when its fp32 sum lies within an
// fp32 rounding of a bf16 tie.
//
//===----------------------------------------------------------------------===//

#include "Optimizer/Muon.h"
#include "Driver/Trace.h"
#include "Kernels/Kernels.h"

#include <cmath>

using namespace zrt;

void zrt::muonStep(int32_t dtype, const void *grad, float *master,
                   float *momentum, void *param, int64_t rows, int64_t cols,
                   const MuonConstants &k, int32_t nsSteps, void *scratch,
                   float gradScale) {
  KernelSpan span("zrt_muon");
  if (rows <= 0 || cols <= 0)
    fatal("zrt_muon: the matrix [%lld, %lld] is empty", (long long)rows,
          (long long)cols);
  if (nsSteps < 0 || nsSteps >= 100)
    fatal("zrt_muon: %d Newton-Schulz steps; expected 0 to 99", int(nsSteps));
  MuonShape s = muonShape(rows, cols);
  int64_t m = s.m, n = s.n;
  float *x = static_cast<float *>(scratch);
  float *prod = x + m * n;
  float *gram = prod + m * n;
  float *update = gram + m * m;

  // The momentum, and the matrix to orthogonalize in bf16 ([m, n]).
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *g = static_cast<const T *>(grad);
    parallelFor(rows, rowGrain(cols), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        for (int64_t j = 0; j < cols; ++j) {
          int64_t at = i * cols + j;
          // One rounded multiply, never contracted into the lerp (this
          // file is built with -ffp-contract=off).
          float u = muonMomentum(toFloat(g[at]) * gradScale, momentum[at], k);
          x[s.transposed ? j * rows + i : at] = u;
        }
    });
  });

  // X / max(||X||_F, eps): the bf16 norm is the square root of the fp32-or-
  // better sum of squares rounded to bf16 (the sum here in double).
  double sumSquares = 0.0;
  for (int64_t i = 0; i < m * n; ++i)
    sumSquares += double(x[i]) * double(x[i]);
  float norm = roundBf16(float(std::sqrt(sumSquares)));
  float eps = roundBf16(k.eps);
  norm = norm < eps ? eps : norm;
  parallelFor(m * n, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      x[i] = roundBf16(x[i] / norm);
  });

  for (int32_t step = 0; step < nsSteps; ++step) {
    // gram = X X^T; update = b gram + c gram gram; X = a X + update X.
    gemmF32(x, x, gram, m, m, n, false, true, false);
    parallelFor(m * m, kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        gram[i] = roundBf16(gram[i]);
    });
    gemmF32(gram, gram, update, m, m, m, false, false, false);
    parallelFor(m * m, kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        update[i] = addmmBf16(k.b, gram[i], k.c, update[i]);
    });
    gemmF32(update, x, prod, m, n, m, false, false, false);
    parallelFor(m * n, kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        x[i] = addmmBf16(k.a, x[i], 1.0f, prod[i]);
    });
  }

  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    T *p = param == master ? nullptr : static_cast<T *>(param);
    parallelFor(rows, rowGrain(cols), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        for (int64_t j = 0; j < cols; ++j) {
          int64_t at = i * cols + j;
          float u = x[s.transposed ? j * rows + i : at];
          master[at] = muonApply(master[at], u, k);
          if (p)
            p[at] = fromFloat<T>(master[at]);
        }
    });
  });
}

extern "C" void
zrt_muon(int32_t dtype, const void *grad, float *master, float *momentumBuffer,
         void *param, const int64_t *matrices, int32_t numMatrices,
         int64_t step, double lr, double momentum, double weightDecay,
         int32_t nesterov, double nsA, double nsB, double nsC, double eps,
         int32_t nsSteps, int32_t adjustLrFn, const zrt_lr_schedule *schedule,
         double maxGradNorm, const float *stats, float lossScale, int32_t skip,
         void *scratch, int64_t scratchBytes) {
  if (!skip && step < 1)
    fatal("zrt_muon: step %lld must be >= 1", (long long)step);
  float gradScale = 1.0f;
  if (!skip) {
    // As zrt_optimizer_step's: the clip coefficient over the loss scale, in
    // double, rounded once.
    gradScale =
        float(zrt_clip_coefficient(stats, maxGradNorm) / double(lossScale));
    lr = zrt_lr_at(schedule, lr, momentum != 0.0 ? &momentum : nullptr, nullptr,
                   step);
  }
  muonSlot(
      dtype, grad, master, momentumBuffer, param, matrices, numMatrices, lr,
      momentum, weightDecay, nesterov != 0, nsA, nsB, nsC, eps, nsSteps,
      adjustLrFn, gradScale, skip != 0, scratch, scratchBytes, dtypeSize(dtype),
      [](int32_t dtype, const void *grad, float *master, float *momentum,
         void *param, int64_t rows, int64_t cols, const MuonConstants &k,
         int32_t nsSteps, void *scratch, float gradScale) {
        muonStep(dtype, grad, master, momentum, param, rows, cols, k, nsSteps,
                 scratch, gradScale);
      },
      [&](const float *w, void *p, int64_t n) {
        zrt_cast(ZRT_F32, w, dtype, p, n);
      });
}
