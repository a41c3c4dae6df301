//===- Elasticity.h - Splitting a global batch over a world size -*- C++
//-*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//
//
// The batch arithmetic of an elastic run: a global batch kept on another
// number of ranks (zero-run --elastic), and DeepSpeed's `elasticity` section
// (its version 0.1), which chooses the train batch and the world sizes it
// splits over from a list of micro batches.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_PIPELINES_ELASTICITY_H
#define ZERO_PIPELINES_ELASTICITY_H

#include "mlir/Support/LLVM.h"
#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace mlir::zero {

/// A global batch as micro batch x accumulation steps x world size.
struct BatchSplit {
  int64_t microBatch = 0, accumulationSteps = 0;
};

/// The split of `globalBatch` over `worldSize` ranks that changes the
/// accumulation first: `preferredMicroBatch` itself when it divides the
/// rows per rank, else the largest micro batch below it that does. None
/// when the world size does not divide the global batch.
std::optional<BatchSplit> splitGlobalBatch(int64_t globalBatch,
                                           int64_t worldSize,
                                           int64_t preferredMicroBatch);

/// What DeepSpeed's compute_elastic_config (version 0.1) chooses: the train
/// batch and the world sizes in [minWorld, maxWorld] it splits over.
struct ElasticBatch {
  int64_t trainBatch = 0;
  std::vector<int64_t> validWorldSizes;
};

/// DeepSpeed's _get_compatible_gpus_v01: each micro batch and their least
/// common multiple, scaled by the largest highly composite number that
/// keeps it within `maxTrainBatch`, are the candidates; the one with the
/// most valid world sizes wins, ties going to the larger (`preferLarger`)
/// or smaller batch. `microBatches` are positive and at most
/// `maxTrainBatch`; their least common multiple must fit `limit` (None
/// otherwise).
std::optional<ElasticBatch>
computeElasticBatch(ArrayRef<int64_t> microBatches, int64_t maxTrainBatch,
                    int64_t minWorld, int64_t maxWorld, bool preferLarger,
                    int64_t limit);

/// DeepSpeed's choice for one world size: the largest of `microBatches`
/// that divides trainBatch / worldSize (integer division), or None.
std::optional<int64_t> elasticMicroBatch(ArrayRef<int64_t> microBatches,
                                         int64_t trainBatch, int64_t worldSize);

} // namespace mlir::zero

#endif // ZERO_PIPELINES_ELASTICITY_H
