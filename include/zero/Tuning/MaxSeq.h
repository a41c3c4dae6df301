//===- MaxSeq.h - The longest sequence that fits ----------------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// zero-tune --max-seq: the tuner's search at sequence lengths the model is
// built again at (from the options zero-model-gen recorded on it), doubling
// from the model's own length until nothing fits, then bisecting between
// the last length that fits and the first that does not.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_TUNING_MAXSEQ_H
#define ZERO_TUNING_MAXSEQ_H

#include "zero/ModelGen/ModelGen.h"
#include "zero/Tuning/Tuner.h"

#include <optional>
#include <string>
#include <vector>

namespace mlir::zero {

/// One length searched.
struct MaxSeqProbe {
  int64_t seq = 0;
  bool fits = false;
  /// The best configuration's peak where one fits, else the smallest peak
  /// found (0 where no configuration's model states fit).
  int64_t peakBytes = 0;
};

struct MaxSeqResult {
  /// The lengths are multiples of this.
  int64_t multiple = 0;
  /// The longest length that fits (0: none, not even `multiple`).
  int64_t maxSeq = 0;
  /// Whether every length up to the limit fits.
  bool reachedLimit = false;
  /// The lengths searched, in order.
  std::vector<MaxSeqProbe> probes;
  /// The search at maxSeq (where one fits), and at the shortest length
  /// that does not fit (where one was searched).
  std::optional<TuneResult> best;
  std::optional<TuneResult> firstMiss;
  int64_t firstMissSeq = 0;
};

/// The longest sequence, a multiple of `multiple`, at which the model that
/// `spec` builds (at its sequence length `seq`) has a configuration that
/// fits, searched up to `limit` tokens. Lengths below the spec's own are
/// searched where it does not fit itself. Fails after emitting the
/// generator's or the tuner's errors on `ctx`.
FailureOr<MaxSeqResult> findMaxSequence(MLIRContext *ctx,
                                        const ModelGenOptions &spec,
                                        const TuneOptions &options,
                                        int64_t multiple, int64_t limit);

/// How the parameters and train step inputs of `file` differ from those of
/// `built`, the model its model_gen.spec builds at the same length; empty
/// where they agree.
std::string describeSpecMismatch(ModuleOp file, ModuleOp built);

} // namespace mlir::zero

#endif // ZERO_TUNING_MAXSEQ_H
