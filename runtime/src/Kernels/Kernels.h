//===- Kernels.h - Shared pieces of the compute kernels ---------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_KERNELS_H
#define ZERO_RT_KERNELS_H

#include "Kernels/KernelMath.h"
#include "Support/Parallel.h"
#include "Support/Support.h"
#include "Support/Types.h"
#include "zero_rt/zrt.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace zrt {

/// Elements of one fp32 block that streaming kernels convert at a time (4 KiB
/// per stream: stays in L1 while it is used).
constexpr int64_t kBlock = 1024;
/// Minimum elements per thread for streaming kernels: below this, starting
/// threads costs more than it saves.
constexpr int64_t kGrain = int64_t(1) << 15;

/// Makes OpenBLAS run single-threaded: kernels call cblas_sgemm from inside
/// their own OpenMP regions.
void useSingleThreadedBlas();

/// c [m, n] = op(a) op(b), or c += op(a) op(b) with `accumulate`, in f32 with
/// op(a) [m, k] and op(b) [k, n]: zrt_matmul's tiling, for kernels that sum
/// products over pieces (Matmul.cpp).
void gemmF32(const float *a, const float *b, float *c, int64_t m, int64_t n,
             int64_t k, bool ta, bool tb, bool accumulate);

/// c [m, n] = op(a) op(b) for 16-bit T as zrt_matmul computes it (fp32
/// panels, fp32 sums, c rounded once), in caller-owned panels of at least
/// zrt_scratch_matmul(1, 1, m, n, k, ta, 0) bytes: a caller running several
/// products sizes them once for the largest m and k (Matmul.cpp).
template <typename T>
void gemm16(const T *a, const T *b, T *c, int64_t m, int64_t n, int64_t k,
            bool ta, bool tb, float *panels);

/// Minimum rows per thread for row-wise kernels over rows of `cols`.
inline int64_t rowGrain(int64_t cols) {
  return std::max<int64_t>(1, kGrain / std::max<int64_t>(cols, 1));
}

/// values[i] as an index, checked to lie in [0, bound): aborts naming the
/// kernel, `what` the value is and `where` it stands ("id 7 at position 3").
template <typename I>
int64_t checkedIndex(const I *values, int64_t i, int64_t bound,
                     const char *kernel, const char *what, const char *where) {
  int64_t v = int64_t(values[i]);
  if (v < 0 || v >= bound)
    fatal("%s: %s %lld %s %lld is outside [0, %lld)", kernel, what,
          (long long)v, where, (long long)i, (long long)bound);
  return v;
}

/// Calls fn(x, offset, len) on the fp32 values of src[0, n) block by block.
template <typename T, typename Fn>
void forBlocks(const T *src, int64_t n, float *buf, const Fn &fn) {
  for (int64_t off = 0; off < n; off += kBlock) {
    int64_t len = std::min(kBlock, n - off);
    fn(loadF32(src + off, len, buf), off, len);
  }
}

//===----------------------------------------------------------------------===//
// Column reductions
//===----------------------------------------------------------------------===//

constexpr int64_t kColBlock = 256;
constexpr int64_t kMaxRowChunks = 32;

/// Sums row contributions into kOuts fp32 column vectors of [rows, cols]
/// data, deterministically: columns go in blocks of kColBlock, rows in a
/// number of chunks that depends on `rows` only, and chunk partials are added
/// in order. rowsBody(r0, r1, c0, c1, acc) adds rows [r0, r1) of columns
/// [c0, c1) into acc[o][0 .. c1 - c0); finish(c0, c1, sums) consumes the
/// totals. Parallel over column blocks when there are enough, else over row
/// chunks; the rounding is the same either way.
template <int kOuts, typename RowsBody, typename Finish>
void columnReduce(int64_t rows, int64_t cols, const RowsBody &rowsBody,
                  const Finish &finish) {
  int64_t chunks = std::clamp<int64_t>(ceilDiv(rows, 32), 1, kMaxRowChunks);
  int64_t colBlocks = ceilDiv(cols, kColBlock);
  auto block = [&](int64_t cb, bool parallelChunks) {
    int64_t c0 = cb * kColBlock, c1 = std::min(cols, c0 + kColBlock);
    alignas(64) float part[kMaxRowChunks][kOuts][kColBlock];
    auto chunk = [&](int64_t begin, int64_t end) {
      for (int64_t ch = begin; ch < end; ++ch) {
        float *acc[kOuts];
        for (int o = 0; o < kOuts; ++o) {
          acc[o] = part[ch][o];
          std::fill(acc[o], acc[o] + (c1 - c0), 0.0f);
        }
        rowsBody(rows * ch / chunks, rows * (ch + 1) / chunks, c0, c1, acc);
      }
    };
    if (parallelChunks)
      parallelFor(chunks, 1, chunk);
    else
      chunk(0, chunks);
    float *sums[kOuts];
    for (int o = 0; o < kOuts; ++o) {
      sums[o] = part[0][o];
      for (int64_t ch = 1; ch < chunks; ++ch)
#pragma omp simd
        for (int64_t c = 0; c < c1 - c0; ++c)
          sums[o][c] += part[ch][o][c];
    }
    finish(c0, c1, static_cast<const float *const *>(sums));
  };
  if (colBlocks >= availableThreads() || chunks == 1) {
    int64_t grain = std::max<int64_t>(1, kGrain / (rows * kColBlock + 1));
    parallelFor(colBlocks, grain, [&](int64_t begin, int64_t end) {
      for (int64_t cb = begin; cb < end; ++cb)
        block(cb, false);
    });
  } else {
    for (int64_t cb = 0; cb < colBlocks; ++cb)
      block(cb, true);
  }
}

/// One optimizer step on host memory (zrt_optimizer_step's contract): the
/// CPU backend's zrt_optimizer_step and, on both backends, the host update
/// of an offloaded optimizer (HostStep.cpp, in the shared core).
void hostOptimizerStep(const zrt_optimizer &optimizer,
                       const zrt_update &update);

/// Adam/AdamW with bitsandbytes' block-wise 8-bit states on host memory
/// (zrt_optimizer_step's int8 states).
void hostAdam8bit(int32_t dtype, const void *grad, float *master,
                  uint8_t *expAvg, float *expAvgAbsmax, uint8_t *expAvgSq,
                  float *expAvgSqAbsmax, void *param, int64_t n, int64_t step,
                  double lr, double beta1, double beta2, double eps,
                  double weightDecay, int32_t adamw, int32_t biasCorrection,
                  const zrt_lr_schedule *schedule, const int64_t *decayRanges,
                  const double *rangeDecays, int32_t numDecayRanges,
                  double maxGradNorm, const float *stats, float lossScale,
                  int32_t skip);

/// Adam/AdamW with bf16 moments (DeepSpeed's bf16_optimizer_states) on host
/// memory: each element's moments are widened to fp32, updated with
/// OptimizerMath.h's adam8bitElement (each operation rounded once, as the CUDA
/// kernel) and rounded back to bf16 to nearest even, as torch's
/// .to(torch.bfloat16). The parameter moves with the fp32 moments. `master`
/// null: the parameter (dtype) is its own master, widened and rounded back.
/// The rest is zrt_optimizer_step's contract.
void hostAdamBf16(int32_t dtype, const void *grad, float *master,
                  uint16_t *expAvg, uint16_t *expAvgSq, void *param, int64_t n,
                  int64_t step, double lr, double beta1, double beta2,
                  double eps, double weightDecay, int32_t adamw,
                  int32_t biasCorrection, const zrt_lr_schedule *schedule,
                  const int64_t *decayRanges, const double *rangeDecays,
                  int32_t numDecayRanges, double maxGradNorm,
                  const float *stats, float lossScale, int32_t skip);

} // namespace zrt

#endif // ZERO_RT_KERNELS_H
