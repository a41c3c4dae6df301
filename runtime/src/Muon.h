//===- Muon.h - One torch.optim.Muon step of a whole matrix -----*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// Muon orthogonalizes each 2-D parameter's momentum with Newton-Schulz, so
// its update needs the whole matrix: under ZeRO one owner rank holds each
// Muon matrix's reduced gradient and momentum and runs this step on it
// (owner-computes; docs/AddingAnOptimizer.md). Both backends take their
// scratch from the caller, muonScratchBytes(rows, cols) of it, so that the
// planner counts it as any other workspace.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_MUON_H
#define ZERO_RT_MUON_H

#include "KernelMath.h"
#include "zero_rt/scratch.h"

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
/// aligned for fp32.
void muonStep(int32_t dtype, const void *grad, float *master, float *momentum,
              void *param, int64_t rows, int64_t cols, const MuonConstants &k,
              int32_t nsSteps, void *scratch);

namespace cuda {
/// muonStep on the device (cuda/src/Muon.cu): every pointer is device
/// memory, the scratch too.
void muonStep(int32_t dtype, const void *grad, float *master, float *momentum,
              void *param, int64_t rows, int64_t cols, const MuonConstants &k,
              int32_t nsSteps, void *scratch);
} // namespace cuda

} // namespace zrt

#endif // ZERO_RT_MUON_H
