//===- MaxSeq.cpp - The longest sequence that fits ------------------------===//
//
// Part of the zero-mlir project.
//
// The peak grows with the sequence (the activations, the logits), so a
// length fits or not monotonically and bisection finds the longest that
// does: the doubling brackets it, each halving of the bracket costs one
// search.
//
//===----------------------------------------------------------------------===//

#include "zero/Tuning/MaxSeq.h"

using namespace mlir;
using namespace mlir::zero;

FailureOr<MaxSeqResult> mlir::zero::findMaxSequence(MLIRContext *ctx,
                                                    const ModelGenOptions &spec,
                                                    const TuneOptions &options,
                                                    int64_t multiple,
                                                    int64_t limit) {
  MaxSeqResult result;
  result.multiple = multiple;
  // Whether the model fits at `seq`, recorded.
  auto probe = [&](int64_t seq) -> FailureOr<bool> {
    ModelGenOptions at = spec;
    at.seq = seq;
    at.recordSpec = false;
    OwningOpRef<ModuleOp> module = generateModel(ctx, at);
    if (!module)
      return failure();
    FailureOr<TuneResult> tuned = tuneTrainStep(*module, options);
    if (failed(tuned))
      return failure();
    MaxSeqProbe p;
    p.seq = seq;
    p.fits = !tuned->ranked.empty();
    if (p.fits)
      p.peakBytes = tuned->ranked.front().peakBytes;
    else if (tuned->closest)
      p.peakBytes = tuned->closest->peakBytes;
    result.probes.push_back(p);
    if (p.fits && seq > result.maxSeq) {
      result.maxSeq = seq;
      result.best = std::move(*tuned);
    } else if (!p.fits && (!result.firstMissSeq || seq < result.firstMissSeq)) {
      result.firstMissSeq = seq;
      result.firstMiss = std::move(*tuned);
    }
    return p.fits;
  };

  // The model's own length, as a multiple.
  int64_t start =
      std::max<int64_t>(multiple, (spec.seq.value_or(multiple) + multiple - 1) /
                                      multiple * multiple);
  start = std::min(start, limit / multiple * multiple);
  FailureOr<bool> fits = probe(start);
  if (failed(fits))
    return failure();
  // The bracket: lo fits (0: nothing yet), hi does not (0: unknown).
  int64_t lo = 0, hi = 0;
  if (*fits) {
    lo = start;
    while (!hi) {
      if (lo > limit / 2) {
        result.reachedLimit = true;
        return result;
      }
      FailureOr<bool> f = probe(lo * 2);
      if (failed(f))
        return failure();
      (*f ? lo : hi) = lo * 2;
    }
  } else {
    hi = start;
    while (!lo) {
      int64_t half = hi / 2 / multiple * multiple;
      if (half < multiple)
        return result;
      FailureOr<bool> f = probe(half);
      if (failed(f))
        return failure();
      (*f ? lo : hi) = half;
    }
  }
  while (hi - lo > multiple) {
    int64_t mid = lo + (hi - lo) / multiple / 2 * multiple;
    FailureOr<bool> f = probe(mid);
    if (failed(f))
      return failure();
    (*f ? lo : hi) = mid;
  }
  return result;
}
