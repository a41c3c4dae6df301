//===- Elasticity.cpp - Splitting a global batch over a world size --------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Pipelines/Elasticity.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <numeric>
#include <set>

using namespace mlir;
using namespace mlir::zero;

std::optional<BatchSplit>
mlir::zero::splitGlobalBatch(int64_t globalBatch, int64_t worldSize,
                             int64_t preferredMicroBatch) {
  if (globalBatch < 1 || worldSize < 1 || preferredMicroBatch < 1 ||
      globalBatch % worldSize != 0)
    return std::nullopt;
  int64_t perRank = globalBatch / worldSize;
  // Micro batch 1 always divides, so the loop ends.
  for (int64_t micro = std::min(preferredMicroBatch, perRank);; --micro)
    if (perRank % micro == 0)
      return BatchSplit{micro, perRank / micro};
}

namespace {

/// DeepSpeed's list: the smallest highly composite numbers, enough for
/// train batches up to 720K per base.
constexpr int64_t kHighlyComposite[] = {
    1,      2,      4,      6,      12,     24,     36,     48,
    60,     120,    180,    240,    360,    720,    840,    1260,
    1680,   2520,   5040,   7560,   10080,  15120,  20160,  25200,
    27720,  45360,  50400,  55440,  83160,  110880, 166320, 221760,
    277200, 332640, 498960, 554400, 665280, 720720};

/// The world sizes in [minWorld, maxWorld] that some micro batch splits
/// `batch` over: every divisor of batch / micro (DeepSpeed's
/// get_valid_gpus).
std::vector<int64_t> validWorldSizes(int64_t batch,
                                     ArrayRef<int64_t> microBatches,
                                     int64_t minWorld, int64_t maxWorld) {
  std::set<int64_t> valid;
  for (int64_t micro : microBatches) {
    if (batch % micro != 0)
      continue;
    int64_t n = batch / micro;
    for (int64_t i = 1; i <= n / i; ++i) {
      if (n % i != 0)
        continue;
      for (int64_t d : {i, n / i})
        if (d >= minWorld && d <= maxWorld)
          valid.insert(d);
    }
  }
  return {valid.begin(), valid.end()};
}

} // namespace

std::optional<ElasticBatch> mlir::zero::computeElasticBatch(
    ArrayRef<int64_t> microBatches, int64_t maxTrainBatch, int64_t minWorld,
    int64_t maxWorld, bool preferLarger, int64_t limit) {
  if (microBatches.empty())
    return std::nullopt;
  int64_t lcm = 1;
  for (int64_t micro : microBatches) {
    lcm = std::lcm(lcm, micro);
    if (lcm > limit)
      return std::nullopt;
  }
  std::vector<int64_t> bases(microBatches.begin(), microBatches.end());
  bases.push_back(lcm);
  // get_candidate_batch_sizes: each base, scaled as far as the maximum
  // allows (a base above it stays itself).
  std::set<int64_t> candidates;
  for (int64_t base : bases) {
    int64_t batch = base;
    for (int64_t hcn : kHighlyComposite) {
      int64_t scaled;
      if (__builtin_mul_overflow(base, hcn, &scaled) || scaled > maxTrainBatch)
        break;
      batch = scaled;
    }
    candidates.insert(batch);
  }
  // get_best_candidates; DeepSpeed iterates a set, which its tie rule
  // makes independent of the order.
  ElasticBatch best;
  best.trainBatch = *llvm::min_element(microBatches);
  size_t most = 0;
  for (int64_t batch : candidates) {
    std::vector<int64_t> valid =
        validWorldSizes(batch, microBatches, minWorld, maxWorld);
    if (valid.size() > most ||
        (valid.size() == most &&
         (preferLarger ? batch > best.trainBatch : batch < best.trainBatch))) {
      most = valid.size();
      best.validWorldSizes = std::move(valid);
      best.trainBatch = batch;
    }
  }
  return best;
}

std::optional<int64_t>
mlir::zero::elasticMicroBatch(ArrayRef<int64_t> microBatches,
                              int64_t trainBatch, int64_t worldSize) {
  std::optional<int64_t> best;
  for (int64_t micro : microBatches)
    if ((trainBatch / worldSize) % micro == 0 && (!best || micro > *best))
      best = micro;
  return best;
}
