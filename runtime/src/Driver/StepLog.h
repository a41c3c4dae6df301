//===- StepLog.h - What the training loop reports ---------------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// The training loop's reports, written by rank 0 for every rank: the
// progress line on stdout (every steps_per_print steps and at evaluations,
// unless --quiet), one --log-json line per step, and a note for every
// skipped step (whatever --quiet says).
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_STEP_LOG_H
#define ZERO_RT_STEP_LOG_H

#include "Program/Manifest.h"

#include <array>
#include <cstdint>
#include <cstdio>
#include <string>

namespace zrt {

/// What one training step did, the same on every rank: the ranks' losses,
/// times and peaks are agreed on collectively.
struct StepRecord {
  int64_t step = 0;
  /// The mean of the ranks' losses.
  double loss = 0.0;
  /// The loss scale the step ran with, and the next step's.
  float scale = 0.0f, nextScale = 0.0f;
  /// Whether the loss scale is dynamic (the scaler's mode).
  bool dynamicScale = false;
  bool skipped = false, overflow = false;
  /// The labels the loss averages over: the valid labels of the global
  /// batch (every rank and micro step).
  int64_t tokens = 0;
  double gradNorm = 0.0;
  /// The slowest rank's wall times (ms): the step, its micro steps and its
  /// boundary.
  double ms = 0.0, microMs = 0.0, boundaryMs = 0.0;
  /// Items (tokens or samples) per second, and their unit.
  double rate = 0.0;
  const char *unit = "";
  /// The largest peak of the ranks.
  int64_t peakBytes = 0;
  int64_t adamSteps = 0;
  /// The learning rate (and, for OneCycle's momentum cycle, the betas) this
  /// step applied, or would have (a skipped step does not advance the
  /// schedule).
  double lr = 0.0, beta1 = 0.0, beta2 = 0.0;
  /// Whether the step ended with an evaluation, its loss and, for a loss
  /// over valid labels, their count over the held-out batches (-1: not
  /// one).
  bool evaluated = false;
  double evalLoss = 0.0;
  int64_t evalTokens = -1;
  /// Whether the step exchanged MoE rows between expert-parallel ranks;
  /// then the most rows routed to one expert in one layer, and the rows
  /// dropped past a capacity, over every rank.
  bool moe = false;
  int64_t moeMaxExpertRows = 0, moeDroppedRows = 0;
  /// What this rank's collectives sent in the step, by kind and level.
  std::array<LinkBytes, kNumCommKinds> comm{};
};

class StepLog {
public:
  /// Rank `rank` of a run of program `m` (only rank 0 writes).
  StepLog(const Manifest &m, int rank, bool quiet);
  ~StepLog() { close(); }
  StepLog(const StepLog &) = delete;
  StepLog &operator=(const StepLog &) = delete;

  /// Opens the --log-json file `path` (rank 0; throws). A run resumed at
  /// step `resumedAt` continues the log: the lines of the steps up to the
  /// checkpoint are kept, those after it (logged by a run that went on past
  /// the checkpoint and crashed) dropped, so that the log stays one line
  /// per step.
  void open(const std::string &path, bool resume, int64_t resumedAt);
  /// Flushes the --log-json file (before a test hook kills the process).
  void flush();
  void close();

  /// The --log-json line of a step.
  void write(const StepRecord &r);
  /// That line's JSON, whether or not there is a --log-json file.
  std::string json(const StepRecord &r) const;
  /// The progress line of a step and a skipped step's note.
  void print(const StepRecord &r);
  /// The report of an evaluation without training, as that of step `step`
  /// (`tokens` as StepRecord's evalTokens).
  void evaluation(int64_t step, double loss, int64_t tokens);
  /// At the end of the run: how many steps were skipped for non-finite
  /// gradients at fp32/bf16 (no loss scaler explains them), where a reader
  /// of the output looks first.
  void printSkips();

private:
  const Manifest &manifest;
  /// Rank 0: writes the log and the notes; and the progress lines unless
  /// --quiet.
  bool writes, talks;
  std::FILE *log = nullptr;
  /// Steps skipped for non-finite gradients, and the first of them.
  int64_t nonFiniteSkips = 0, firstNonFiniteSkip = 0;
};

} // namespace zrt

#endif // ZERO_RT_STEP_LOG_H
