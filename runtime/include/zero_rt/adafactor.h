/*===- adafactor.h - Adafactor's state and sums of a shard ------*- C++ -*-===*
 *
 * Part of the zero-mlir project.
 *
 * How many fp32 state elements and double sums Adafactor keeps for a rank's
 * shard of a partition, as inline functions with no dependency: the one
 * home of the formulas. The runtime's step (runtime/src/Optimizer/Adafactor.h)
 *lays out its state and sums by them, and the compiler's planner sizes the
 * state buffer, the sums' scratch and the sums' all-reduces by them, so
 * that the planned bytes are the run's.
 *
 *===----------------------------------------------------------------------===*/

#ifndef ZERO_RT_ADAFACTOR_COUNTS_H
#define ZERO_RT_ADAFACTOR_COUNTS_H

#include <stdint.h>

#ifdef __CUDACC__
#define ZRT_ADAFACTOR_HD __host__ __device__
#else
#define ZRT_ADAFACTOR_HD
#endif

namespace zrt {

/// How Adafactor sees a tensor: `batch` matrices [rows, cols] (factored), or
/// a vector of `cols` elements (batch = rows = 1, not factored).
struct AdafactorShape {
  int64_t batch, rows, cols;
  bool factored;

  ZRT_ADAFACTOR_HD int64_t numel() const { return batch * rows * cols; }
  /// fp32 elements of row_var and col_var (factored), 0 for a vector.
  ZRT_ADAFACTOR_HD int64_t factorCount() const {
    return factored ? batch * (rows + cols) : 0;
  }
};

/// The shape of a tensor of `rank` dims: torch factors a tensor of two or
/// more dims over its last two, the leading ones a batch of matrices.
inline AdafactorShape adafactorShape(const int64_t *dims, int32_t rank) {
  if (rank < 2) {
    int64_t n = rank == 1 ? dims[0] : 1;
    return {1, 1, n, false};
  }
  int64_t batch = 1;
  for (int32_t i = 0; i + 2 < rank; ++i)
    batch *= dims[i];
  return {batch, dims[rank - 2], dims[rank - 1], true};
}

/// The doubles of the sums the ranks all-reduce after adafactorSums:
/// [0] the parameter's squares, [1] the update's (0 until
/// adafactorUpdateSums), then each row's and each column's squares of the
/// gradient (factored).
inline int64_t adafactorReducedCount(const AdafactorShape &s) {
  return 2 + s.factorCount();
}

/// The doubles of the `sums` every phase takes: the reduced ones, then each
/// matrix's clamped mean of row_var (factored), which adafactorFactors
/// writes.
inline int64_t adafactorSumsCount(const AdafactorShape &s) {
  return adafactorReducedCount(s) + (s.factored ? s.batch : 0);
}

/// One tensor of a partition's flat buffer: the offset of its first element
/// and its shape. A partition's tensors are sorted by offset and do not
/// overlap; elements outside every tensor (padding) are left alone.
struct AdafactorTensor {
  int64_t offset;
  AdafactorShape shape;
};

/// The elements [lo, hi) of `t` that shard [begin, end) of the partition
/// holds, in the tensor's numbering; lo == hi when none.
inline void adafactorPiece(const AdafactorTensor &t, int64_t begin, int64_t end,
                           int64_t &lo, int64_t &hi) {
  int64_t n = t.shape.numel();
  lo = begin - t.offset;
  lo = lo < 0 ? 0 : lo > n ? n : lo;
  hi = end - t.offset;
  hi = hi > n ? n : hi;
  hi = hi < lo ? lo : hi;
}

/// The fp32 state elements of shard [begin, end): for each tensor it holds
/// any element of, in order, row_var and col_var whole (factored) or the
/// held elements' variance (a vector). This, not a number of bytes per
/// parameter, is Adafactor's optimizer state per rank.
inline int64_t adafactorStateCount(const AdafactorTensor *tensors, int32_t num,
                                   int64_t begin, int64_t end) {
  int64_t count = 0;
  for (int32_t i = 0; i < num; ++i) {
    int64_t lo, hi;
    adafactorPiece(tensors[i], begin, end, lo, hi);
    if (lo < hi)
      count +=
          tensors[i].shape.factored ? tensors[i].shape.factorCount() : hi - lo;
  }
  return count;
}

/// The doubles of a shard's sums: every tensor's adafactorSumsCount, the
/// same layout on every rank (one all-reduce covers them), then one update
/// sum per tensor (the second all-reduce's).
inline int64_t adafactorShardSumsCount(const AdafactorTensor *tensors,
                                       int32_t num) {
  int64_t count = num;
  for (int32_t i = 0; i < num; ++i)
    count += adafactorSumsCount(tensors[i].shape);
  return count;
}

/// The doubles of the step's first all-reduce (every tensor's sums but the
/// update sums) and of its second (one update sum per tensor).
inline int64_t adafactorFirstReduceCount(const AdafactorTensor *tensors,
                                         int32_t num) {
  return adafactorShardSumsCount(tensors, num) - num;
}

} // namespace zrt

#undef ZRT_ADAFACTOR_HD

#endif // ZERO_RT_ADAFACTOR_COUNTS_H
