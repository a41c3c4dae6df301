//===- Options.h - The training driver's command line -----------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_OPTIONS_H
#define ZERO_RT_OPTIONS_H

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace zrt {

/// --help's text; a printf format taking the program name.
extern const char *const kUsage;

struct Options {
  int64_t steps = 10;
  uint64_t seed = 1234;
  std::string data, inputs, labels, logJson, initFrom, exportPath, save, resume,
      trace;
  /// --data-dtype of raw token files: "u16" or "u32" (empty: not given,
  /// u16).
  std::string dataDtype;
  /// --export-hf DIR and its --max-shard-size (empty: save_pretrained's
  /// default), in bytes once parsed.
  std::string exportHf, maxShardSize;
  /// --export-adapters DIR: a PEFT program's adapter directory.
  std::string exportAdapters;
  int64_t maxShardBytes = 0;
  int64_t saveEvery = 0;
  /// Evaluation: --eval-data (tokens) or --eval-inputs/--eval-labels
  /// (features), every K steps (0: after the last step only) on M global
  /// batches (0: every whole batch the files hold).
  std::string evalData, evalInputs, evalLabels;
  /// Packed rows' positions [N, T] (--positions, --eval-positions).
  std::string positions, evalPositions;
  int64_t evalEvery = 0, evalBatches = 0;
  int64_t collectiveTimeoutS = 60;
  /// Where each rank writes its flight record (flight-rank<R>.json) on a
  /// watchdog timeout or SIGUSR1 (empty: the --log-json file's directory,
  /// else the working directory).
  std::string flightDir;
  bool stopAtMinLossScale = true;
  // Test hooks; rank -1 and step 0 mean none.
  int64_t injectOverflowFirst = 0, injectOverflowLast = 0;
  int64_t injectKillRank = -1, injectKillStep = 0, injectKillDuringSave = 0;
  std::string injectKillAt = "rank-file";
  int64_t injectHangRank = -1, injectHangStep = 0;
  /// ZRT_TEST_KILL_AT_STEP: (step, rank) pairs; the rank kills itself once
  /// that step, and its checkpoint, is complete on every rank.
  std::vector<std::pair<int64_t, int64_t>> killAfterStep;
  int threads = 0;
  /// --collectives, else ZRT_COLLECTIVES (empty: the backend's default).
  std::string collectives;
  /// --attention-precision, else ZRT_ATTENTION_PRECISION (empty: fp32).
  std::string attentionPrecision;
  /// --cuda-graphs, or ZRT_CUDA_GRAPHS=1.
  bool cudaGraphs = false;
  /// --ranks-per-node, else ZRT_RANKS_PER_NODE (0: MPI's shared-memory
  /// nodes).
  int64_t ranksPerNode = 0;
  bool ranksPerNodeFromEnv = false;
  bool quiet = false;
  bool help = false;
  bool printManifest = false;
  /// Replace the checkpoints of an earlier run in the --save directory.
  bool overwrite = false;
};

/// Parses and cross-checks the command line; throws std::runtime_error.
Options parseOptions(int argc, char **argv);

} // namespace zrt

#endif // ZERO_RT_OPTIONS_H
