//===- Adafactor.h - torch.optim.Adafactor on any slice ---------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// Adafactor factors a matrix's second moment into a row vector and a column
// vector (the means of grad^2 over each row and each column) and scales its
// step by the parameter's and the update's whole-tensor RMS, so one element's
// update reads the whole matrix. Under ZeRO a rank's flat shard holds any
// slice [begin, end) of a tensor's elements; the step splits into phases
// around two all-reduces of small sums, so that each rank updates its slice
// with the statistics of the whole tensor:
//
//   1. adafactorSums: this slice's sums of squares (double) of each row's
//      and each column's gradient and of the parameter;
//   -  all-reduce sums[0, adafactorReducedCount) over the ranks that hold
//      a slice of the tensor (a rank without one adds zeros);
//   2. adafactorFactors (factored only): every holder moves its copy of
//      row_var and col_var, the same on every rank;
//   3. adafactorUpdateSums: this slice's sum of squares of the update
//      (a vector's variance moves here);
//   -  all-reduce sums[1];
//   4. adafactorApply: the slice's parameters move.
//
// The squares of fp32 values are exact in double and each sum is one
// double, rounded to fp32 once where torch holds it: the result does not
// depend on where the slices are cut, unless a double sum lands within a
// double rounding of an fp32 tie.
//
// A tensor of two or more dims is factored over its last two, the leading
// ones a batch of matrices (torch's row_var [..., rows, 1], col_var
// [..., 1, cols]); a vector keeps torch's full `variance`, one element per
// parameter of the slice.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_ADAFACTOR_H
#define ZERO_RT_ADAFACTOR_H

#include "Optimizer/OptimizerMath.h"
#include "zero_rt/adafactor.h"

#include <algorithm>
#include <cstdint>

namespace zrt {

/// Phase 1: `sums` = this slice's sums. `grad` (of `dtype`, multiplied by
/// `gradScale` in fp32, the unscale and clip) and `master` hold elements
/// [begin, end) of the tensor.
void adafactorSums(int32_t dtype, const void *grad, const float *master,
                   const AdafactorShape &s, int64_t begin, int64_t end,
                   float gradScale, double *sums);

/// Phase 2, factored only: row_var and col_var (each whole, fp32) lerp to
/// the all-reduced means of grad^2; the clamped means of row_var go into
/// `sums`.
void adafactorFactors(const AdafactorShape &s, const AdafactorConstants &k,
                      float *rowVar, float *colVar, double *sums);

/// Phase 3: sums[1] = this slice's sum of the update's squares; a vector's
/// `variance` (the slice's) lerps to grad^2. rowVar and colVar are unused
/// for a vector, `variance` for a factored tensor.
void adafactorUpdateSums(int32_t dtype, const void *grad,
                         const AdafactorShape &s, int64_t begin, int64_t end,
                         float gradScale, const AdafactorConstants &k,
                         const float *rowVar, const float *colVar,
                         float *variance, double *sums);

/// Phase 4: the slice's `master` moves by the all-reduced sums; `param`,
/// unless null or `master` itself, gets the new weights in `dtype`.
void adafactorApply(int32_t dtype, const void *grad, float *master, void *param,
                    const AdafactorShape &s, int64_t begin, int64_t end,
                    float gradScale, const AdafactorConstants &k,
                    const float *rowVar, const float *colVar,
                    const float *variance, const double *sums);

/// The four phases on a whole tensor held by one rank (nothing to reduce).
void adafactorStep(int32_t dtype, const void *grad, float *master, void *param,
                   const AdafactorShape &s, float gradScale,
                   const AdafactorConstants &k, float *rowVar, float *colVar,
                   float *variance, double *sums);

/// A rank's step over shard [begin, end) of a partition, the phases over
/// all its tensors at once: `grad`, `master` and `param` hold the shard's
/// elements, `state` adafactorStateCount floats (zeros before the first
/// step), `sums` adafactorShardSumsCount doubles. Between the calls, the
/// ranks that share the partition all-reduce (sum) the first
/// adafactorShardSumsCount - num doubles of `sums`, then its last num.
void adafactorShardSums(int32_t dtype, const void *grad, const float *master,
                        const AdafactorTensor *tensors, int32_t num,
                        int64_t begin, int64_t end, float gradScale,
                        double *sums);
void adafactorShardUpdateSums(int32_t dtype, const void *grad,
                              const AdafactorTensor *tensors, int32_t num,
                              int64_t begin, int64_t end, float gradScale,
                              const AdafactorConstants &k, float *state,
                              double *sums);
void adafactorShardApply(int32_t dtype, const void *grad, float *master,
                         void *param, const AdafactorTensor *tensors,
                         int32_t num, int64_t begin, int64_t end,
                         float gradScale, const AdafactorConstants &k,
                         const float *state, double *sums);

namespace cuda {
/// The phases on the device (cuda/src/Optimizer/Adafactor.cu): every pointer is
/// device memory, `sums` too (NCCL all-reduces it in place), and no phase waits
/// for the host.
void adafactorSums(int32_t dtype, const void *grad, const float *master,
                   const AdafactorShape &s, int64_t begin, int64_t end,
                   float gradScale, double *sums);
void adafactorFactors(const AdafactorShape &s, const AdafactorConstants &k,
                      float *rowVar, float *colVar, double *sums);
void adafactorUpdateSums(int32_t dtype, const void *grad,
                         const AdafactorShape &s, int64_t begin, int64_t end,
                         float gradScale, const AdafactorConstants &k,
                         const float *rowVar, const float *colVar,
                         float *variance, double *sums);
void adafactorApply(int32_t dtype, const void *grad, float *master, void *param,
                    const AdafactorShape &s, int64_t begin, int64_t end,
                    float gradScale, const AdafactorConstants &k,
                    const float *rowVar, const float *colVar,
                    const float *variance, const double *sums);
} // namespace cuda

} // namespace zrt

#endif // ZERO_RT_ADAFACTOR_H
