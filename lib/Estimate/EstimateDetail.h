//===- EstimateDetail.h - The terms of the estimate's formulas --*- C++ -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//
//
// Private to lib/Estimate: the quantities computeEstimate's formulas
// (Estimate.cpp) and its explanation of the differences (Differences.cpp)
// share.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_LIB_ESTIMATE_ESTIMATEDETAIL_H
#define ZERO_LIB_ESTIMATE_ESTIMATEDETAIL_H

#include "zero/Estimate/Estimate.h"

#include <cstdint>
#include <string>
#include <utility>

namespace zero::estimate::detail {

inline int64_t roundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/// Our model-state bytes per parameter kept whole on every rank and per
/// parameter sharded over the ranks: params and grads (c bytes each) are
/// whole or sharded by stage, the optimizer's `optimizerBytes` per
/// parameter (the master copy and the states, Terms::optimizerBytes) are
/// sharded from stage 1 on.
std::pair<int64_t, int64_t> modelStateSplit(int64_t stage, int64_t c,
                                            int64_t optimizerBytes);

/// Our model-state bytes per rank with `sharded` parameters split over the
/// n ranks.
int64_t modelStateBytes(int64_t stage, int64_t s, int64_t sharded, int64_t n,
                        int64_t c, int64_t optimizerBytes);

/// The bytes per parameter of `states`.
int64_t stateBytes(llvm::ArrayRef<mlir::zero::OptimizerState> states);

/// The estimate's inputs under the names its formulas use.
struct Terms {
  int64_t stage = 0, s = 0, n = 0, c = 0;
  /// The optimizer's state bytes per parameter (fp32 masters not counted),
  /// and a block-quantized state's fp32 absmax bytes per rank (each state
  /// keeps its own over the rank's tshard; 0 for other precisions).
  int64_t stateBytes = 0, absmaxBytes = 0;
  /// The master copy's bytes per parameter: 4 (fp32 masters of 16-bit
  /// parameters), or 0 where the parameters are their own masters (fp32
  /// training, and bf16 with bf16_master_weights_and_grads).
  int64_t masterBytes = 0;
  /// The bytes per trainable parameter the optimizer shards from stage 1 on.
  int64_t optimizerBytes() const { return masterBytes + stateBytes; }
  /// S', and the padding granule n * alignment.
  int64_t sp = 0, pad = 0;
  /// A rank's parameters (S at stage 0, else S'/n); the frozen and the St
  /// trainable parameters (St = S without frozen ones) and a rank's
  /// trainable ones (their runs padded as one).
  int64_t shard = 0, frozen = 0, st = 0, tshard = 0;
  /// c, and the names of shard, St and tshard in the formulas.
  std::string cs, shardName, tName, tshardName;
  /// The reduce-bucket buffers (2 with overlap_comm), their bytes and the
  /// gather buffers' bytes.
  int64_t buffers = 0, bucketBytes = 0, gatherBytes = 0;
  /// The plan the verdict and the comparison with DeepSpeed's figure use:
  /// ours with the optimizer offloaded as DeepSpeed's is, and with the
  /// parameters offloaded too.
  bool oursOffloaded = false, paramsOffloaded = false;
};

/// Whether the estimate's optimizer keeps Adam's states, which DeepSpeed's
/// estimators and the ZeRO paper assume.
bool keepsAdamStates(const Estimate &e);

/// The estimate's optimizer states in words: "Adam's m and v", or the
/// table's labels.
std::string statesText(const Estimate &e);

/// With --ep-size: fills `e.expertParallel`, our model states with the
/// expert parameters over the expert-parallel layout; an error where the
/// model or the ranks do not allow the size.
llvm::Error addExpertParallel(Estimate &e, const Terms &t);

/// Fills `e.differences`: why ours and DeepSpeed's and the paper's numbers
/// differ, line by line.
void explainDifferences(Estimate &e, const Terms &t);

} // namespace zero::estimate::detail

#endif // ZERO_LIB_ESTIMATE_ESTIMATEDETAIL_H
