//===- Muon.h - One torch.optim.Muon step of a whole matrix -----*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// Muon orthogonalizes each 2-D parameter's momentum with Newton-Schulz, so
// its update needs the whole matrix: under ZeRO one owner rank holds each
// Muon matrix's reduced gradient and momentum and runs this step on it
// (owner-computes; docs/MatrixOptimizers.md). Both backends take their
// scratch from the caller, muonScratchBytes(rows, cols) of it, so that the
// planner counts it as any other workspace.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_MUON_H
#define ZERO_RT_MUON_H

#include "Optimizer/OptimizerMath.h"
#include "Support/Support.h"
#include "zero_rt/scratch.h"
#include "zero_rt/zrt.h"

#include <cstdint>

namespace zrt {

/// Newton-Schulz works on [m, n] with m = min(rows, cols), n = max: the
/// transposed matrix when rows > cols, as torch does.
struct MuonShape {
  int64_t m, n;
  bool transposed;
};

inline MuonShape muonShape(int64_t rows, int64_t cols) {
  return rows > cols ? MuonShape{cols, rows, true}
                     : MuonShape{rows, cols, false};
}

/// Scratch bytes of one step on a [rows, cols] matrix, on either backend
/// (zero_rt/scratch.h, where the planner reads it). Every bf16 value torch
/// holds is kept widened to fp32, where it is exact, so that the GEMMs are
/// fp32 GEMMs with exact products.
inline int64_t muonScratchBytes(int64_t rows, int64_t cols) {
  return zrt_scratch_muon(rows, cols);
}

/// One step of torch.optim.Muon's single-tensor update on a row-major
/// [rows, cols] matrix: `grad` (of `dtype`) moves the fp32 `momentum`, whose
/// Newton-Schulz orthogonalization (`nsSteps` iterations in bf16) moves the
/// fp32 `master`; `param`, unless null or `master` itself, gets the new
/// weights in `dtype`. `scratch` holds muonScratchBytes(rows, cols) bytes,
/// aligned for fp32. `gradScale` (the unscale and clip factor) multiplies
/// each gradient element once, rounded, before the momentum; 1 is exact
/// (torch's Muon has no scale of its own).
void muonStep(int32_t dtype, const void *grad, float *master, float *momentum,
              void *param, int64_t rows, int64_t cols, const MuonConstants &k,
              int32_t nsSteps, void *scratch, float gradScale = 1.0f);

/// zrt_muon's checks and its loop over a slot's whole matrices, shared by
/// both backends: `step` is the backend's muonStep, `copy` writes `n` fp32
/// masters as the parameter dtype (a skipped step) and `gradScale` is the
/// step's unscale and clip factor (not read when skipping). `lr` is the
/// step's learning rate, after the schedule.
template <typename StepFn, typename CopyFn>
void muonSlot(int32_t dtype, const void *grad, float *master,
              float *momentumBuffer, void *param, const int64_t *matrices,
              int32_t numMatrices, double lr, double momentum,
              double weightDecay, bool nesterov, double a, double b, double c,
              double eps, int32_t nsSteps, int32_t adjustLrFn, float gradScale,
              bool skip, void *scratch, int64_t scratchBytes,
              int64_t elementBytes, const StepFn &step, const CopyFn &copy) {
  if (numMatrices < 0 || (numMatrices > 0 && !matrices))
    fatal("zrt_muon: %d matrices", int(numMatrices));
  if (adjustLrFn < 0 || adjustLrFn > 2)
    fatal("zrt_muon: adjust_lr_fn %d; expected 0 (original), 1 "
          "(match_rms_adamw) or 2 (spectral)",
          int(adjustLrFn));
  bool copies = param && param != master;
  for (int32_t i = 0; i < numMatrices; ++i) {
    int64_t offset = matrices[3 * i], rows = matrices[3 * i + 1],
            cols = matrices[3 * i + 2];
    if (offset < 0 || rows <= 0 || cols <= 0)
      fatal("zrt_muon: matrix %d is [%lld, %lld] at %lld", int(i),
            (long long)rows, (long long)cols, (long long)offset);
    float *w = master + offset;
    void *p = copies ? static_cast<char *>(param) + offset * elementBytes
                     : (param ? static_cast<void *>(w) : nullptr);
    if (skip) {
      if (copies)
        copy(w, p, rows * cols);
      continue;
    }
    if (muonScratchBytes(rows, cols) > scratchBytes)
      fatal("zrt_muon: matrix %d [%lld, %lld] needs %lld scratch bytes, "
            "given %lld",
            int(i), (long long)rows, (long long)cols,
            (long long)muonScratchBytes(rows, cols), (long long)scratchBytes);
    MuonConstants k =
        muonConstants(lr, momentum, weightDecay, nesterov, a, b, c, eps,
                      MuonAdjustLr(adjustLrFn), rows, cols);
    step(dtype, static_cast<const char *>(grad) + offset * elementBytes, w,
         momentumBuffer + offset, p, rows, cols, k, nsSteps, scratch,
         gradScale);
  }
}

namespace cuda {
/// muonStep on the device (cuda/src/Optimizer/Muon.cu): every pointer is device
/// memory, the scratch too.
void muonStep(int32_t dtype, const void *grad, float *master, float *momentum,
              void *param, int64_t rows, int64_t cols, const MuonConstants &k,
              int32_t nsSteps, void *scratch, float gradScale = 1.0f);

/// zrt_muon on the device (AbiCuda.cpp's entry calls it): `grad`, `master`,
/// `momentumBuffer`, `param`, `stats` and `scratch` are device memory,
/// `matrices` and `schedule` host memory.
void muon(int32_t dtype, const void *grad, float *master, float *momentumBuffer,
          void *param, const int64_t *matrices, int32_t numMatrices,
          int64_t step, double lr, double momentum, double weightDecay,
          int32_t nesterov, double nsA, double nsB, double nsC, double eps,
          int32_t nsSteps, int32_t adjustLrFn, const zrt_lr_schedule *schedule,
          double maxGradNorm, const float *stats, float lossScale, int32_t skip,
          void *scratch, int64_t scratchBytes);
} // namespace cuda

} // namespace zrt

#endif // ZERO_RT_MUON_H
