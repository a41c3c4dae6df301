//===- Print.h - zero-tune's results in words, tables and JSON --*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// What zero-tune prints of a search (TuneResult) under its options.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_TUNING_PRINT_H
#define ZERO_TUNING_PRINT_H

#include "zero/Tuning/MaxSeq.h"
#include "zero/Tuning/Tuner.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace mlir::zero {

/// `bytes` exactly and in a readable unit.
std::string formatTuneBytes(int64_t bytes);

/// The configuration in words, for messages.
std::string describeTuneConfig(const TuneConfig &config);

/// The candidate ranked `rank` as JSON; the fields of an axis only when
/// `result` or `options` say it was searched.
llvm::json::Value tuneCandidateToJson(const TuneCandidate &candidate,
                                      int64_t rank, const TuneResult &result,
                                      const TuneOptions &options);

/// What the validation band of the preset's GPU says of the ranking: how
/// many of the top candidates it cannot tell apart from the fastest, and
/// that the one with the smallest peak of them was picked (empty when
/// there is nothing to say).
std::string getTuneBandNote(const TuneResult &result);

/// What the search found at each expert-parallel size (empty without MoE
/// layers): the receive buffers are planned dropless, and a size at which
/// nothing fits is said to be so.
std::string getTuneEpNote(const TuneResult &result);

/// Why no configuration was ranked: the budgets below every
/// configuration's model states, or the closest configuration's overshoot.
std::string describeTuneNoFit(const TuneResult &result,
                              const TuneOptions &options);

/// What was searched, how much was pruned and how long it took.
std::string describeTuneSearch(const TuneResult &result,
                               const TuneOptions &options, double seconds);

/// The text output: the search (`summary`), the table and the best
/// configuration, and where it was written (`outputFile`, if any).
void printTuneText(const TuneResult &result, const TuneOptions &options,
                   llvm::StringRef summary, llvm::StringRef outputFile,
                   llvm::raw_ostream &os);

/// --max-seq: each length searched and whether it fits, and the time the
/// search took.
std::string describeMaxSeqProbes(const MaxSeqResult &found, double seconds);

/// --max-seq: the longest length that fits, and the shortest that does not.
std::string describeMaxSeqVerdict(const MaxSeqResult &found);

/// --max-seq as JSON: the lengths searched and the candidates at the
/// longest (`found` has one that fits).
llvm::json::Value maxSeqToJson(const MaxSeqResult &found,
                               const TuneOptions &options);

} // namespace mlir::zero

#endif // ZERO_TUNING_PRINT_H
