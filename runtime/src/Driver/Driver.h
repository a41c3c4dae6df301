//===- Driver.h - The training driver behind zrt_train_main -----*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// The driver of one rank, whose parts are in three files: Driver.cpp sets
// up the run and runs it, DriverSteps.cpp is the step loop (each step, its
// collective record, evaluation) and DriverOutputs.cpp what the run writes
// (checkpoints, exports, the trace, the memory and communication reports).
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_DRIVER_H
#define ZERO_RT_DRIVER_H

#include "Checkpoint/Directory.h"
#include "Checkpoint/Rank.h"
#include "Data/DataSource.h"
#include "Data/Files.h"
#include "Driver/Options.h"
#include "Driver/StepLog.h"
#include "Driver/Watchdog.h"
#include "Optimizer/Nvme.h"
#include "Program/Manifest.h"

#include <mpi.h>

#include <array>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace zrt {

/// The training run of one rank, which zrt_train_main runs.
class Driver {
public:
  explicit Driver(const zrt_program *program) : program(program) {}
  ~Driver();
  int run(int argc, char **argv);

  /// The library's session (zero_rt/session.h), whose calls are
  /// collective. Sets up a run that the host steps: the command line's
  /// options but data, --steps (the schedule's length where it is "auto")
  /// and outputs; false after printing and keeping why (lastError).
  bool open(int argc, char **argv);
  /// One optimizer step on `arrays`: its --log-json line. Throws
  /// InvalidInput, on every rank, before anything changes; other
  /// exceptions leave the session broken.
  std::string stepArrays(const std::vector<HostArray> &arrays, bool local);
  /// The source of one step's `arrays`, refused (InvalidInput) on every
  /// rank when any rank's do not fit.
  std::unique_ptr<DataSource> openArrays(const std::vector<HostArray> &arrays,
                                         bool local);
  /// The forward only on `arrays`: JSON with the loss and, for a mean over
  /// valid labels, their count.
  std::string evaluateArrays(const std::vector<HostArray> &arrays, bool local);
  /// Writes a --save checkpoint of the current step into `dir`.
  bool saveTo(const std::string &dir);
  /// Reads --resume's checkpoint `dir` (the latest one in it).
  bool loadFrom(const std::string &dir);
  /// Writes --export-hf's directory `dir`.
  bool exportHfTo(const std::string &dir);
  /// Starts streaming the parameters as --export-hf writes them, about
  /// `bucketBytes` gathered at a time, to `root` (-1: every rank).
  void parametersBegin(int64_t bucketBytes, int32_t root);
  /// The next tensor of the stream (without data on ranks that do not
  /// receive it); null past the last.
  const Tensor *parametersNext();
  /// Moves the arenas to host memory and back (bitwise). reload is false,
  /// on every rank, when some rank's device memory cannot hold the arenas
  /// again: the session stays offloaded.
  void offload();
  bool reload();
  bool isOffloaded() const { return offloaded; }
  int64_t streamPeakBytes() const { return streamPeak; }
  int64_t offloadedBytes() const { return int64_t(held.size()); }
  /// Ends the session's threads and frees the rank sets it set up
  /// (collective), so that the process can open another session.
  void close();
  /// Frees the rank sets this driver set up, if it did (collective).
  void releaseTopology();
  /// Why the last call failed on this rank ("" if it did not say).
  const std::string &lastError() const { return lastMessage; }
  const char *manifestText() const { return program->manifest; }
  int64_t stepsTaken() const { return progress.step; }
  int32_t rank() const { return ctx.rank; }
  int32_t worldSize() const { return ctx.world; }
  int64_t peakBytes() const { return maxPeak; }
  /// The shape and dtype input `index` takes in stepArrays.
  std::vector<int64_t> inputShape(int32_t index, bool local) const;
  int32_t numInputs() const { return int32_t(manifest.inputs.size()); }
  const InputInfo &input(int32_t index) const {
    return manifest.inputs[size_t(index)];
  }

private:
  /// Runs fn on every rank; true when it threw on none. Ranks where it threw
  /// print their message.
  template <typename Fn>
  bool everywhere(const Fn &fn);
  void error(const std::string &msg) const;
  void info(const char *fmt, ...) const __attribute__((format(printf, 2, 3)));

  bool setUp(int argc, char **argv, int &exitCode);
  /// Parses the command line and handles what ends the run before it
  /// starts (--help, --print-manifest, a test hook outside the world): rank
  /// 0 speaks for all, and `exitCode` says how it ends.
  bool parseCommandLine(int argc, char **argv, int &exitCode);
  /// The program against this runtime and the world (collective), then its
  /// topology, threads and device.
  bool startProgram();
  /// The context's test hooks, loss scaler and arenas, zeroed.
  void createContext();
  /// This rank's NVMe swap files (throws).
  void openSwapFiles();
  /// The training and evaluation data (throws).
  void openData();
  /// The parameters and optimizer states: --resume's checkpoint,
  /// --init-from's weights or the initializer (throws).
  void loadState();
  /// Reports --init-from, checks that there is data to train on, and after
  /// --resume gathers the full parameters.
  bool finishLoading();
  /// The progress lines and --log-json, and which NVMe I/O runs.
  bool startLog();
  /// The run's banner, and the length of a schedule whose total_num_steps
  /// is "auto".
  bool announceRun();
  void checkOutputs();
  bool checkWorld();
  /// The run's nodes against the compiled topology, and the Groups of the
  /// step's collectives (throws on every rank alike).
  void startTopology();
  void chooseThreads();
  /// Rows of the global batch: this rank's and every rank's per micro
  /// step, and every rank's per step.
  struct BatchRows {
    int64_t local, perMicro, perStep;
    /// This rank's first row of a micro batch.
    int64_t rankFirst;
  };
  BatchRows batchRows() const;
  bool train();
  bool trainSteps();
  /// Wall times of one step on this rank (ms): the step, its micro steps
  /// and its boundary.
  struct StepTimes {
    double ms, microMs, boundaryMs;
  };
  /// Runs step `step` on this rank: each micro step on its slice of the
  /// batch, then the boundary, until the device is done.
  StepTimes runStep(int64_t step);
  /// Trains step `step` on `data` and agrees on its record, which the
  /// --log-json file gets (evaluating after it when `evaluating`); none
  /// when the global batch has no valid label (said on rank 0).
  std::optional<StepRecord> trainOne(int64_t step, bool evaluating);
  /// Collective: what step `step`, which ran with loss scale `scale`, did on
  /// every rank (evaluating first when `evaluating`).
  StepRecord agree(int64_t step, float scale, const StepTimes &local,
                   bool evaluating);
  /// Whether training goes on after step `step` overflowed with the loss
  /// scale `scale` already at its minimum (--on-min-loss-scale); every rank
  /// decides the same.
  bool continueAtMinScale(int64_t step, float scale);
  /// Why step `step`, whose global batch has no valid label, stops the run:
  /// the rows it read and where they come from.
  std::string noLabelsMessage(int64_t step) const;
  /// The mean loss of the evaluation step over the held-out batches, their
  /// micro steps and the ranks, and for a loss over valid labels their
  /// count (-1 otherwise) (collective).
  struct Evaluation {
    double loss;
    int64_t tokens;
  };
  Evaluation evaluate();
  /// Evaluates the initial or resumed weights when there is no step to
  /// train, and logs it as the current step.
  bool evaluateOnly();
  /// What --init-from read on a rank: tensor data and header bytes, the
  /// files' total size and count, and the host peak after it (bytes).
  using LoadStats = std::array<uint64_t, 5>;
  /// Prints every rank's LoadStats (collective).
  void reportLoading(const LoadStats &mine);
  void installSaveHook();
  /// ZRT_TEST_KILL_AT_STEP: the ranks it names for `step` kill themselves
  /// once the step and its checkpoint are complete.
  void killAfter(int64_t step);
  bool save(const Progress &progress);
  /// The first save of a run replacing an earlier run's checkpoints: the
  /// staging directory `dir` that every rank writes into (collective).
  bool stageReplacement(int64_t step, std::string &dir);
  bool exportWeights();
  bool writeTrace();
  /// The measured peaks of a run that trained against the plan (rank 0).
  void printMemoryReport();
  void noteProgress(int64_t step);

  const zrt_program *program;
  Options opts;
  /// A library session (open) rather than the executable (run).
  bool library = false;
  /// The library's: --steps was given.
  bool stepsGiven = false;
  /// This driver set the process's topology (setTopology); close frees it.
  bool setTheTopology = false;
  /// The last error this rank printed.
  mutable std::string lastMessage;
  /// The library's parameter stream: groups of parameters gathered
  /// together (a LoRA layer's base and adapters in one), the next bucket's
  /// first group, the gathered tensors not yet handed out and the one that
  /// was.
  std::vector<std::vector<int32_t>> streamGroups;
  size_t streamNext = 0;
  int64_t streamBucketBytes = 0;
  int32_t streamRoot = -1;
  std::vector<Tensor> streamReady;
  size_t streamAt = 0;
  Tensor streamCurrent;
  /// The most bytes of gathered tensors the stream held at once.
  int64_t streamPeak = 0;
  /// The arenas' contents while offloaded.
  std::vector<char> held;
  bool offloaded = false;
  LoadStats loaded{};
  /// The tensors of a Hugging Face model that the step never uses, as
  /// --init-from read them (rank 0, for --export-hf).
  std::vector<Tensor> carried;
  Manifest manifest;
  zrt_ctx ctx;
  /// The swap file of an optimizer on NVMe (null: none).
  std::unique_ptr<SwapFile> swapFile;
  /// The swap file of parameters on NVMe (null: none).
  std::unique_ptr<SwapFile> paramSwapFile;
  std::unique_ptr<DataSource> data, evalData;
  /// Global batches of evalData that an evaluation runs.
  int64_t evalBatches = 0;
  Progress progress;
  /// The progress lines and --log-json (set up by setUp).
  std::unique_ptr<StepLog> stepLog;
  int64_t maxPeak = 0;
  /// Rank 0's communication per step by kind: the last trained step's, and
  /// whether an earlier step's differed.
  std::array<LinkBytes, kNumCommKinds> stepComm{};
  bool commMeasured = false;
  /// By CommKind: whether its bytes differed between steps.
  std::array<bool, kNumCommKinds> commVaried{};
  void printCommReport();
  /// Whether the program left collectives unwaited at the end of a step,
  /// and whether an overflow at the minimum loss scale was warned about.
  bool warnedSlots = false, warnedMinScale = false;
  /// Some rank was asked to stop (SIGUSR2) by the end of the last step:
  /// agreed on by every rank. Then whether the run stopped for it.
  bool stopAgreed = false, stopped = false;
  Watchdog watchdog;
  /// The step whose checkpoint is being written (0: none), for test hooks.
  int64_t savingStep = 0;
  /// Rank 0's lock of the --save directory.
  DirectoryLock saveLock;
  /// The earlier run's checkpoints in --save that this run's first
  /// checkpoint replaces (--overwrite); every rank knows `pending` and
  /// `staging`, rank 0 `latest`.
  Replaced replaced;
  /// The last checkpoint this run saved or resumed from (empty: none).
  std::string lastCheckpoint;
};

template <typename Fn>
bool Driver::everywhere(const Fn &fn) {
  std::string err;
  try {
    fn();
  } catch (const std::exception &e) {
    err = e.what();
  }
  int bad = !err.empty(), any = 0;
  MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (bad)
    error(err);
  return !any;
}

} // namespace zrt

#endif // ZERO_RT_DRIVER_H
