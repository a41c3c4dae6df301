//===- Driver.cpp - zrt_train_main: the training executable --------------===//
//
// Part of the zero-mlir project.
//
// Every rank runs the same loop: load its slice of each micro batch into the
// step arena (DataSource.cpp), run the compiled micro step, then the compiled
// boundary; with evaluation data, every K steps and after the last, the
// compiled evaluation step (the forward only) over the held-out batches. All
// decisions that could differ between ranks (option errors, file errors, NaN
// losses) are agreed on collectively, so a failure ends every rank with a
// message and a non-zero exit instead of a hang.
//
// Faults outside the program's control: a rank that dies is noticed by the
// launcher (Open MPI's mpirun names it and kills the others); a rank that
// stops making progress without dying is noticed by the collective watchdog
// (Watchdog.cpp), a thread that aborts the job (MPI_Abort) when a collective
// wait of a training step exceeds --collective-timeout-s. Each rank tells
// its successor on a ring when it starts a step, so the watchdog can name
// the rank that did not arrive.
//
//===----------------------------------------------------------------------===//

#include "Checkpoint/Directory.h"
#include "Checkpoint/Rank.h"
#include "DataSource.h"
#include "Device.h"
#include "Files.h"
#include "Groups.h"
#include "Interrupt.h"
#include "Memory.h"
#include "Mpi.h"
#include "Nvme.h"
#include "Options.h"
#include "State.h"
#include "StepLog.h"
#include "Support.h"
#include "Trace.h"
#include "TraceFile.h"
#include "Watchdog.h"
#include "WeightFiles.h"

#include <mpi.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <stdexcept>
#include <sys/resource.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

using namespace zrt;

namespace {

/// The process's peak resident memory so far (bytes).
uint64_t hostPeakBytes() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return uint64_t(usage.ru_maxrss) * 1024;
}

//===----------------------------------------------------------------------===//
// The driver
//===----------------------------------------------------------------------===//

class Driver {
public:
  explicit Driver(const zrt_program *program) : program(program) {}
  ~Driver() {
    // The swap files' engines finish what is queued into the swap buffers
    // in the host arena, so they end before it does.
    paramSwapFile.reset();
    swapFile.reset();
    zrt_arena_destroy(ctx.persistentArena);
    zrt_arena_destroy(ctx.stepArena);
    zrt_arena_destroy(ctx.hostArena);
  }
  int run(int argc, char **argv);

private:
  /// Runs fn on every rank; true when it threw on none. Ranks where it threw
  /// print their message.
  template <typename Fn>
  bool everywhere(const Fn &fn);
  void error(const std::string &msg) const;
  void info(const char *fmt, ...) const __attribute__((format(printf, 2, 3)));

  bool setUp(int argc, char **argv, int &exitCode);
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
  bool save(const Progress &progress);
  bool exportWeights();
  bool writeTrace();
  /// The measured peaks of a run that trained against the plan (rank 0).
  void printMemoryReport();
  void noteProgress(int64_t step);

  const zrt_program *program;
  Options opts;
  LoadStats loaded{};
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
  bool commMeasured = false, commVaried = false;
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

void Driver::error(const std::string &msg) const {
  std::fflush(stdout);
  if (ctx.world > 1)
    std::fprintf(stderr, "zrt: error: rank %d: %s\n", ctx.rank, msg.c_str());
  else
    std::fprintf(stderr, "zrt: error: %s\n", msg.c_str());
  std::fflush(stderr);
}

void Driver::info(const char *fmt, ...) const {
  if (ctx.rank != 0 || opts.quiet)
    return;
  va_list args;
  va_start(args, fmt);
  std::vfprintf(stdout, fmt, args);
  va_end(args);
  std::fflush(stdout);
}

bool Driver::checkWorld() {
  // Every rank learns every rank's schedule before anything else happens,
  // so a mismatch stops all of them with the same verdict.
  uint64_t mine[2] = {manifest.hash, uint64_t(manifest.worldSize)};
  std::vector<uint64_t> all(size_t(2 * ctx.world));
  MPI_Allgather(mine, 2, MPI_UINT64_T, all.data(), 2, MPI_UINT64_T,
                MPI_COMM_WORLD);
  for (int r = 0; r < ctx.world; ++r) {
    uint64_t hash = all[size_t(2 * r)], world = all[size_t(2 * r + 1)];
    if (hash != manifest.hash || world != uint64_t(manifest.worldSize)) {
      char msg[320];
      std::snprintf(msg, sizeof(msg),
                    "schedule mismatch: this rank runs schedule 0x%016llx "
                    "(world size %d), rank %d runs schedule 0x%016llx (world "
                    "size %llu); every rank must run the same compiled "
                    "program",
                    (unsigned long long)manifest.hash, manifest.worldSize, r,
                    (unsigned long long)hash, (unsigned long long)world);
      error(msg);
      return false;
    }
  }
  if (ctx.world != manifest.worldSize) {
    error("this program was compiled for world size " +
          std::to_string(manifest.worldSize) + " (schedule " +
          manifest.hashText + ") but runs on " + std::to_string(ctx.world) +
          " rank(s): start it with mpirun -np " +
          std::to_string(manifest.worldSize) +
          " or recompile with --world-size " + std::to_string(ctx.world));
    return false;
  }
  return true;
}

void Driver::startTopology() {
  const Manifest &m = manifest;
  // A program without ranks_per_node runs on whatever nodes as one: its
  // collectives are the world's, in one level. An explicit --ranks-per-node
  // must still be its one node.
  if (m.ranksPerNode == 0 && opts.ranksPerNode == 0) {
    setTopology(ctx.comm, 0, m.hpzPartitionSize, m.micsShardSize);
    return;
  }
  int64_t run = runRanksPerNode(ctx.comm, opts.ranksPerNode);
  int64_t compiled = m.ranksPerNode > 0 ? m.ranksPerNode : m.worldSize;
  if (run != compiled) {
    std::string source =
        opts.ranksPerNode == 0 ? std::string("MPI's shared-memory nodes")
        : opts.ranksPerNodeFromEnv
            ? "ZRT_RANKS_PER_NODE=" + std::to_string(opts.ranksPerNode)
            : "--ranks-per-node " + std::to_string(opts.ranksPerNode);
    throw std::runtime_error(
        "this program was compiled for nodes of " + std::to_string(compiled) +
        " rank(s) (schedule " + m.hashText + ") but runs on nodes of " +
        std::to_string(run) + " rank(s) (" + source + "): start it on nodes " +
        "of " + std::to_string(compiled) + " ranks (--ranks-per-node " +
        std::to_string(compiled) +
        " simulates them) or recompile with ranks-per-node " +
        std::to_string(run));
  }
  setTopology(ctx.comm, m.ranksPerNode, m.hpzPartitionSize, m.micsShardSize);
}

void Driver::chooseThreads() {
  if (opts.threads > 0) {
    zrt_set_num_threads(opts.threads);
    return;
  }
  if (std::getenv("OMP_NUM_THREADS"))
    return;
  // Ranks on one node share its cores.
  int localRank = 0, local = 1;
  nodeRank(MPI_COMM_WORLD, localRank, local);
  int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  zrt_set_num_threads(std::max(1, cores / local));
}

bool Driver::setUp(int argc, char **argv, int &exitCode) {
  exitCode = 1;
  ctx.comm = zrt_comm_world();
  ctx.rank = zrt_comm_rank(ctx.comm);
  ctx.world = zrt_comm_size(ctx.comm);

  // Every rank parses the same command line, so they agree on the verdict;
  // rank 0 speaks for all.
  try {
    opts = parseOptions(argc, argv);
  } catch (const std::exception &e) {
    if (ctx.rank == 0)
      std::fprintf(stderr, "zrt: error: %s\n", e.what());
    exitCode = 2;
    return false;
  }
  if (opts.help) {
    if (ctx.rank == 0)
      std::printf(kUsage, argv[0]);
    exitCode = 0;
    return false;
  }
  if (opts.printManifest) {
    // What zero-ckpt reshard --for reads: the layout of this program.
    if (ctx.rank == 0)
      std::printf("%s\n", program->manifest);
    exitCode = 0;
    return false;
  }
  if (!flightSkip().error.empty()) {
    if (ctx.rank == 0)
      std::fprintf(stderr, "zrt: error: %s\n", flightSkip().error.c_str());
    exitCode = 2;
    return false;
  }
  for (int64_t r :
       {opts.injectKillRank, opts.injectHangRank, int64_t(flightSkip().rank)})
    if (r >= ctx.world) {
      if (ctx.rank == 0)
        std::fprintf(stderr,
                     "zrt: error: test hook rank %lld outside the world of %d "
                     "rank(s)\n",
                     (long long)r, ctx.world);
      exitCode = 2;
      return false;
    }
  if (program->version != ZRT_PROGRAM_VERSION) {
    error("the program was compiled for runtime program version " +
          std::to_string(program->version) + ", this runtime is version " +
          std::to_string(ZRT_PROGRAM_VERSION));
    return false;
  }
  if (!everywhere([&] { manifest = Manifest::parse(program->manifest); }))
    return false;
  if (!checkWorld())
    return false;
  if (!everywhere([&] { startTopology(); }))
    return false;
  chooseThreads();
  // The backend's device (a GPU per rank on a node for CUDA), before any
  // tensor memory exists.
  if (!everywhere([&] {
        int localRank = 0, localSize = 1;
        nodeRank(MPI_COMM_WORLD, localRank, localSize);
        device::initialize(localRank);
      }))
    return false;

  // Every output is checked before any work, so that a path that cannot be
  // written does not lose the training (rank 0 also locks --save).
  if (!everywhere([&] { checkOutputs(); }))
    return false;
  if (ctx.rank == 0 && !saveLock.takenOver().empty())
    std::fprintf(stderr,
                 "zrt: warning: took over the lock of '%s' from %s, which "
                 "has ended (a run that crashed or was killed)\n",
                 opts.save.c_str(), saveLock.takenOver().c_str());

  const Manifest &m = manifest;
  ctx.manifest = &manifest;
  ctx.injectOverflowFirst = opts.injectOverflowFirst;
  ctx.injectOverflowLast = opts.injectOverflowLast;
  installSaveHook();
  // fp16.loss_scale > 0: DeepSpeed's static LossScaler.
  bool fp16 = m.precision == "fp16";
  zrt_loss_scaler_init(&ctx.scaler, fp16 && m.lossScale == 0,
                       m.initialScalePower, m.lossScaleWindow, m.hysteresis,
                       m.minLossScale,
                       fp16 && m.lossScale > 0 ? m.lossScale : 1.0);
  // The plan's sizes are high-water marks of its allocator: count each arena
  // whole, so the measured peak is comparable with plan.peak_bytes.
  ctx.persistentArena = zrt_arena_create(m.persistentBytes);
  ctx.stepArena = zrt_arena_create(m.arenaBytes);
  ctx.persistent = static_cast<char *>(
      zrt_arena_at(ctx.persistentArena, 0, m.persistentBytes));
  ctx.step = static_cast<char *>(zrt_arena_at(ctx.stepArena, 0, m.arenaBytes));
  // An offloaded optimizer's pinned host arena, counted whole as well.
  if (m.hostBytes > 0) {
    ctx.hostArena = createHostArena(m.hostBytes);
    ctx.host = static_cast<char *>(zrt_arena_at(ctx.hostArena, 0, m.hostBytes));
    std::memset(ctx.host, 0, size_t(m.hostBytes));
  }
  // Deterministic contents: nothing may depend on what malloc returned.
  device::zero(ctx.persistent, m.persistentBytes);
  device::zero(ctx.step, m.arenaBytes);

  bool ok = everywhere([&] {
    // An optimizer on NVMe: the rank's swap file, checked (and its space
    // reserved) before anything else touches it.
    if (m.optimizerNvmeBytes() > 0) {
      swapFile = SwapFile::open(m.nvmePath, ctx.rank, m.optimizerNvmeBytes());
      ctx.nvme = swapFile.get();
      ctx.swap = ctx.host + m.swapOffset;
      ctx.swapBytes = m.swapBytes;
    }
    // Parameters on NVMe: their own swap file (DeepSpeed keeps separate
    // swap folders; the same directory works too).
    if (m.paramNvmeBytes > 0) {
      paramSwapFile =
          SwapFile::open(m.paramNvmePath, ctx.rank, m.paramNvmeBytes, "params",
                         "--param-nvme-path");
      ctx.paramNvme = paramSwapFile.get();
      ctx.paramSwap = ctx.host + m.paramSwapOffset;
      ctx.paramSwapBytes = m.paramSwapBytes;
    }
    int64_t rowsPerStep = batchRows().perStep;
    DataShard shard{ctx.rank, ctx.world};
    RawTokenType raw{opts.dataDtype == "u32" ? 4 : 2, !opts.dataDtype.empty()};
    if (!opts.data.empty())
      data = openTokenData(m, opts.data, rowsPerStep, shard, raw);
    else if (!opts.inputs.empty())
      data = openArrayData(m, opts.inputs, opts.labels, rowsPerStep, shard);
    if (!opts.evalData.empty())
      evalData = openTokenData(m, opts.evalData, rowsPerStep, shard, raw,
                               "--eval-data");
    else if (!opts.evalInputs.empty())
      evalData = openArrayData(m, opts.evalInputs, opts.evalLabels, rowsPerStep,
                               shard, "--eval-inputs/--eval-labels");
    if (evalData) {
      // Batches are laid out as the training stream's, without wrapping.
      int64_t whole = evalData->wholeRows() / rowsPerStep;
      evalBatches = opts.evalBatches > 0 ? opts.evalBatches : whole;
      if (evalBatches > whole)
        fail("--eval-batches " + std::to_string(evalBatches) +
             " exceeds what '" +
             (opts.evalData.empty() ? opts.evalInputs : opts.evalData) +
             "' holds: " + std::to_string(whole) + " global batch(es) of " +
             std::to_string(rowsPerStep) + " rows (" +
             std::to_string(evalData->wholeRows()) + " rows)");
    }
    if (!opts.resume.empty()) {
      progress = readCheckpoint(ctx, opts.resume);
      lastCheckpoint = opts.resume;
      return;
    }
    if (opts.initFrom.empty()) {
      initializeParameters(ctx, opts.seed, nullptr);
      return;
    }
    std::vector<WantedTensor> wanted;
    for (const ParamInfo &p : m.params)
      wanted.push_back({p.name, p.exportShape()});
    std::set<std::string> tied;
    if (m.hfModel)
      for (const manifest::TiedName &t : m.hfModel->tied)
        tied.insert(t.name);
    WeightFiles weights(opts.initFrom, wanted, tied);
    initializeParameters(ctx, opts.seed, &weights);
    loaded = {weights.dataBytesRead(), weights.headerBytesRead(),
              weights.totalBytes(), uint64_t(weights.fileCount()),
              hostPeakBytes()};
  });
  if (!ok)
    return false;
  if (!opts.initFrom.empty())
    reportLoading(loaded);
  if (opts.steps > progress.step && !data) {
    if (ctx.rank == 0)
      error("no training data: pass --data FILE or --inputs X.npy --labels "
            "Y.npy (or --steps 0)");
    return false;
  }
  if (!opts.resume.empty() && m.stage >= 1 && m.stage <= 2) {
    // The full params buffers: every rank's owned casts.
    for (int32_t p = 0; p < int32_t(m.partitions.size()); ++p)
      zrt_ctx_all_gather_params(&ctx, p, 0, m.partitions[size_t(p)].numel, -1);
  }
  if (!opts.resume.empty())
    info("resumed from '%s' at step %lld%s\n", opts.resume.c_str(),
         (long long)progress.step,
         progress.resharded.empty()
             ? ""
             : (" (resharded: " + progress.resharded + ")").c_str());

  stepLog = std::make_unique<StepLog>(manifest, ctx.rank, opts.quiet);
  if (!everywhere([&] {
        stepLog->open(opts.logJson, !opts.resume.empty(), progress.step);
      }))
    return false;
  // Which I/O ran, and why not O_DIRECT or io_uring, whatever --quiet.
  for (auto [file, what] :
       {std::make_pair(swapFile.get(), "optimizer states"),
        std::make_pair(paramSwapFile.get(), "parameter shards")})
    if (file && ctx.rank == 0) {
      if (!file->notice().empty())
        std::fprintf(stderr, "zrt: nvme: %s\n", file->notice().c_str());
      std::fprintf(stderr,
                   "zrt: nvme: %s in '%s' (%lld bytes per rank), %s, "
                   "%s\n",
                   what, file->path().c_str(), (long long)file->size(),
                   file->direct() ? "O_DIRECT" : "buffered",
                   file->engineName());
      std::fflush(stderr);
    }

  int64_t numel = 0;
  for (const ParamInfo &p : m.params)
    numel += p.numel;
  info("zero-mlir: stage %d, world size %d, %s, %d micro step(s), %lld "
       "parameters in %zu partition(s), schedule %s\n",
       m.stage, m.worldSize, m.precision.c_str(), m.accumulationSteps,
       (long long)numel, m.partitions.size(), m.hashText.c_str());
  // total_num_steps "auto": the length of the run, --steps (with --resume,
  // the whole run's, which --steps counts).
  if (manifest.scheduleRunLength && opts.steps > progress.step) {
    try {
      manifest.resolveRunLength(opts.steps);
    } catch (const std::exception &e) {
      if (ctx.rank == 0)
        error(e.what());
      return false;
    }
    info("learning-rate schedule: total_num_steps \"auto\" = %lld (the "
         "run's length, --steps)\n",
         (long long)opts.steps);
  }
  return true;
}

void Driver::checkOutputs() {
  if (!opts.save.empty()) {
    checkWritableDir(opts.save, "--save");
    if (ctx.rank == 0)
      claimSaveDirectory(saveLock, opts.save, opts.resume, opts.overwrite);
  }
  if (!opts.exportPath.empty() && ctx.rank == 0)
    checkWritableFile(opts.exportPath, "--export");
  if (!opts.exportHf.empty() && ctx.rank == 0) {
    hfModelOf(manifest.hfModel, "--export-hf");
    checkWritableDir(opts.exportHf, "--export-hf");
  }
  if (!opts.exportAdapters.empty() && ctx.rank == 0) {
    peftOf(manifest.peft, "--export-adapters");
    checkWritableDir(opts.exportAdapters, "--export-adapters");
  }
  if (!opts.logJson.empty() && ctx.rank == 0)
    checkWritableFile(opts.logJson, "--log-json");
  if (!opts.trace.empty())
    checkWritableFile(tracePath(opts.trace, ctx.rank), "--trace");
}

void Driver::noteProgress(int64_t step) {
  std::string note = "during step " + std::to_string(step) + "; ";
  if (lastCheckpoint.empty())
    note += "no checkpoint saved";
  else if (opts.save.empty() || lastCheckpoint == opts.resume)
    note += "resumed from '" + lastCheckpoint + "'";
  else
    note += "last checkpoint '" + lastCheckpoint + "' (--resume " + opts.save +
            " continues from it)";
  setInterruptNote(note + "\n");
}

void Driver::installSaveHook() {
  if (opts.injectKillDuringSave <= 0 || ctx.rank != opts.injectKillRank)
    return;
  std::string suffix = opts.injectKillAt == "latest"
                           ? "/latest"
                           : "/rank_" + std::to_string(ctx.rank) + ".bin";
  setBeforeRenameHook([this, suffix](const std::string &path) {
    if (savingStep != opts.injectKillDuringSave ||
        path.size() < suffix.size() ||
        path.compare(path.size() - suffix.size(), suffix.size(), suffix) != 0)
      return;
    // The temporary is written and fsynced; the rename never happens.
    std::fflush(stdout);
    stepLog->flush();
    std::raise(SIGKILL);
  });
}

bool Driver::save(const Progress &at) {
  savingStep = at.step;
  struct Reset {
    int64_t &v;
    ~Reset() { v = 0; }
  } reset{savingStep};
  std::string dir = checkpointDir(opts.save, at.step);
  // Under MiCS the first shard group holds every shard once: its ranks
  // write the checkpoint, as the same stage on that many ranks would.
  int savers = manifest.shardGroupSize();
  SavedFile file;
  if (!everywhere([&] {
        makeDirs(dir);
        if (ctx.rank < savers)
          file = writeRankCheckpoint(ctx, dir, at);
      }))
    return false;
  std::vector<SavedFile> files(static_cast<size_t>(savers));
  uint64_t mine[2] = {file.crc, file.bytes};
  std::vector<uint64_t> all(size_t(2 * ctx.world));
  MPI_Gather(mine, 2, MPI_UINT64_T, all.data(), 2, MPI_UINT64_T, 0,
             MPI_COMM_WORLD);
  for (int r = 0; r < savers; ++r)
    files[size_t(r)] = {uint32_t(all[size_t(2 * r)]), all[size_t(2 * r + 1)]};
  if (!everywhere([&] {
        if (ctx.rank == 0)
          writeCheckpointManifest(ctx, opts.save, dir, at, files);
      }))
    return false;
  info("saved checkpoint %s\n", dir.c_str());
  lastCheckpoint = dir;
  return true;
}

void Driver::reportLoading(const LoadStats &mine) {
  std::vector<uint64_t> all(mine.size() * size_t(ctx.world));
  MPI_Gather(mine.data(), int(mine.size()), MPI_UINT64_T, all.data(),
             int(mine.size()), MPI_UINT64_T, 0, MPI_COMM_WORLD);
  for (int r = 0; r < ctx.world; ++r) {
    const uint64_t *s = all.data() + size_t(r) * mine.size();
    info("init-from: rank %d read %llu bytes of tensor data and %llu of "
         "headers from %llu file(s) of %llu bytes; host peak (max RSS) "
         "%llu bytes\n",
         r, (unsigned long long)s[0], (unsigned long long)s[1],
         (unsigned long long)s[3], (unsigned long long)s[2],
         (unsigned long long)s[4]);
  }
}

bool Driver::exportWeights() {
  std::vector<Tensor> tensors = gatherParameters(ctx);
  // "format": "pt" as torch's safetensors writer marks its files.
  std::map<std::string, std::string> metadata = {
      {"format", "pt"}, {"step", std::to_string(progress.step)}};
  int files = 0;
  size_t params = tensors.size();
  if (!everywhere([&] {
        if (ctx.rank != 0)
          return;
        if (!opts.exportPath.empty())
          writeFileAtomic(opts.exportPath, writeSafetensors(tensors, metadata));
        if (!opts.exportAdapters.empty())
          writeAdapterDirectory(opts.exportAdapters, *manifest.peft, tensors,
                                metadata);
        if (opts.exportHf.empty())
          return;
        // A PEFT model exports merged, in place: its base model's weights.
        if (manifest.peft)
          tensors = mergeAdapters(*manifest.peft, std::move(tensors));
        files = writeHfDirectory(
            opts.exportHf, hfModelOf(manifest.hfModel, "--export-hf").config,
            tensors, opts.maxShardBytes, metadata);
      }))
    return false;
  if (!opts.exportPath.empty())
    info("exported %zu tensors to %s\n", params, opts.exportPath.c_str());
  if (!opts.exportAdapters.empty())
    info("exported the LoRA adapters of %zu layer(s) to %s (PEFT: "
         "adapter_config.json and adapter_model.safetensors)\n",
         manifest.peft->layers.size(), opts.exportAdapters.c_str());
  if (!opts.exportHf.empty())
    info("exported %zu tensors to %s (Hugging Face: config.json and %d "
         "safetensors file(s))\n",
         tensors.size(), opts.exportHf.c_str(), files);
  return true;
}

bool Driver::writeTrace() {
  std::string path = tracePath(opts.trace, ctx.rank);
  std::string trace = chromeTrace(ctx);
  try {
    writeFileAtomic(path, trace);
  } catch (const std::exception &e) {
    error(std::string("cannot write the trace: ") + e.what());
    return false;
  }
  int ranks = manifest.worldSize;
  if (ranks == 1)
    info("wrote the trace to %s\n", path.c_str());
  else
    info("wrote one trace per rank: %s ... %s\n", path.c_str(),
         tracePath(opts.trace, ranks - 1).c_str());
  return true;
}

Driver::BatchRows Driver::batchRows() const {
  const Manifest &m = manifest;
  int64_t local =
      m.inputs.empty() || m.inputs[0].shape.empty() ? 0 : m.inputs[0].shape[0];
  return {local, local * ctx.world, local * ctx.world * m.accumulationSteps};
}

Driver::Evaluation Driver::evaluate() {
  const Manifest &m = manifest;
  BatchRows rows = batchRows();
  double start = ctx.tracing ? ctx.nowUs() : 0.0;
  // The training step's loss of this step was read already; the next step
  // starts from zero again.
  ctx.lossSum = 0.0;
  ctx.lossCount = 0;
  ctx.evaluating = true;
  // The valid labels of the held-out batches, counted as a step's are (in
  // the slot of micro batch 0, which the step has finished with).
  int64_t labels = 0;
  int32_t micro0 = ctx.micro;
  if (program->count_labels)
    ctx.microLabels.assign(m.accumulationSteps, 0);
  for (int64_t batch = 0; batch < evalBatches; ++batch)
    for (int32_t micro = 0; micro < m.accumulationSteps; ++micro) {
      evalData->load(ctx, batch * rows.perStep + micro * rows.perMicro +
                              ctx.rank * rows.local);
      if (program->count_labels) {
        ctx.micro = 0;
        program->count_labels(&ctx);
        labels += ctx.microLabels[0];
        ctx.micro = micro0;
      }
      program->eval_step(&ctx);
    }
  ctx.evaluating = false;
  {
    WaitScope watched(ctx.waitState, "the evaluation's device work");
    device::finishStep(ctx);
  }
  // The same arithmetic as the training loss, so that a batch evaluated
  // before a step gives that step's loss bit for bit.
  double local = ctx.lossCount ? ctx.lossSum / ctx.lossCount : 0.0, sum = 0.0;
  int64_t tokens = -1;
  {
    WaitScope watched(ctx.waitState, "the evaluation loss all-reduce");
    MPI_Allreduce(&local, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (program->count_labels)
      MPI_Allreduce(&labels, &tokens, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  }
  if (ctx.tracing)
    ctx.trace.push_back({"eval", start, ctx.nowUs() - start});
  return {sum / ctx.world, tokens};
}

bool Driver::evaluateOnly() {
  Evaluation e = evaluate();
  stepLog->evaluation(progress.step, e.loss, e.tokens);
  return true;
}

bool Driver::train() {
  watchdog.start(ctx, opts.collectiveTimeoutS);
  bool ok = opts.steps > progress.step ? trainSteps() : evaluateOnly();
  // Every rank leaves trainSteps at the same step (its decisions are
  // collective), so the ring can be wound down collectively.
  watchdog.stop();
  return ok;
}

bool Driver::trainSteps() {
  ctx.tracing = !opts.trace.empty();
  ctx.traceStart = std::chrono::steady_clock::now();
  setKernelTracing(ctx.tracing);
  if (ctx.tracing)
    startMemoryTracing(zrt_scratch_bytes_in_use());
  for (int64_t step = progress.step + 1; step <= opts.steps; ++step) {
    // Test hooks: a rank that dies or stops making progress.
    if (step == opts.injectKillStep && ctx.rank == opts.injectKillRank) {
      std::fflush(stdout);
      stepLog->flush();
      std::raise(SIGKILL);
    }
    if (step == opts.injectHangStep && ctx.rank == opts.injectHangRank)
      for (;;)
        ::pause();
    watchdog.beginStep(step);
    // Without the watchdog's thread, a requested flight record is written
    // here, between steps.
    if (!watchdog.running() && takeFlightRequest())
      ctx.flight.dump("SIGUSR1");
    if (ctx.rank == 0)
      noteProgress(step);
    float scale = zrt_loss_scaler_scale(&ctx.scaler);
    resetCommCounters();
    StepTimes times = runStep(step);
    // Before an evaluation's gathers.
    const std::array<LinkBytes, kNumCommKinds> &comm = commCounters();
    commVaried |= commMeasured && comm != stepComm;
    stepComm = comm;
    commMeasured = true;
    // The count is all-reduced: every rank stops here together.
    if (ctx.noLabels) {
      if (ctx.rank == 0)
        error(noLabelsMessage(step));
      return false;
    }
    progress.step = step;
    progress.dataPosition += batchRows().perStep;

    bool last = step == opts.steps;
    bool evaluating =
        evalData &&
        (last || (opts.evalEvery > 0 && step % opts.evalEvery == 0));
    StepRecord record = agree(step, scale, times, evaluating);
    record.comm = stepComm;
    stepLog->write(record);
    if (std::isnan(record.loss) || std::isinf(record.loss)) {
      if (ctx.rank == 0)
        error("the loss is " +
              std::string(std::isnan(record.loss) ? "NaN" : "inf") +
              " at step " + std::to_string(step) +
              " (learning rate too high, or fp16 without loss scaling?)");
      return false;
    }
    stepLog->print(record);
    // Every rank has the same verdict: the stats are all-reduced and the
    // scalers identical.
    if (ctx.overflowAtMinScale && !continueAtMinScale(step, scale))
      return false;
    bool saving = !opts.save.empty() &&
                  ((opts.saveEvery > 0 && step % opts.saveEvery == 0) || last);
    if (saving && !save(progress))
      return false;
    if (stopAgreed && !last) {
      if (!opts.save.empty() && !saving && !save(progress))
        return false;
      if (ctx.rank == 0) {
        std::string where = opts.save.empty()
                                ? "no checkpoint written (no --save)"
                                : "checkpoint '" + lastCheckpoint +
                                      "' written (--resume " + opts.save +
                                      " continues from it)";
        // After the step's line.
        std::fflush(stdout);
        std::fprintf(stderr,
                     "zrt: stopped on request (SIGUSR2) after step %lld of "
                     "%lld; %s\n",
                     (long long)step, (long long)opts.steps, where.c_str());
        std::fflush(stderr);
      }
      stopped = true;
      return true;
    }
  }
  return true;
}

Driver::StepTimes Driver::runStep(int64_t step) {
  const Manifest &m = manifest;
  BatchRows rows = batchRows();
  // What the driver writes into the step arena before each micro step.
  std::vector<std::pair<int64_t, int64_t>> inputBytes;
  for (const InputInfo &in : m.inputs)
    inputBytes.push_back({in.offset, in.numel() * in.elementBytes()});
  ctx.stepIndex = step;
  ctx.lossSum = 0.0;
  ctx.lossCount = 0;
  ctx.skipped = ctx.overflow = ctx.noLabels = false;
  auto start = std::chrono::steady_clock::now();
  double stepStart = ctx.nowUs();
  // A mean over the valid labels of the global batch: every micro batch's
  // labels are counted before the first one trains (its first micro step
  // all-reduces the counts, before the backward).
  if (program->count_labels) {
    ctx.microLabels.assign(m.accumulationSteps, 0);
    for (int32_t micro = 0; micro < m.accumulationSteps; ++micro) {
      ctx.micro = micro;
      data->load(ctx, progress.dataPosition + micro * rows.perMicro +
                          ctx.rank * rows.local);
      program->count_labels(&ctx);
    }
  }
  for (int32_t micro = 0; micro < m.accumulationSteps; ++micro) {
    ctx.micro = micro;
    double microStart = ctx.tracing ? ctx.nowUs() : 0.0;
    traceMicroStep(inputBytes);
    data->load(ctx, progress.dataPosition + micro * rows.perMicro +
                        ctx.rank * rows.local);
    program->micro_step(&ctx);
    if (ctx.tracing)
      ctx.trace.push_back({"micro step " + std::to_string(micro), microStart,
                           ctx.nowUs() - microStart});
  }
  auto microEnd = std::chrono::steady_clock::now();
  double boundaryStart = ctx.tracing ? ctx.nowUs() : 0.0;
  program->boundary(&ctx);
  if (ctx.tracing)
    ctx.trace.push_back(
        {"boundary", boundaryStart, ctx.nowUs() - boundaryStart});
  if (ctx.drainSlots() > 0 && !warnedSlots) {
    warnedSlots = true;
    if (ctx.rank == 0)
      std::fprintf(stderr, "zrt: warning: the program left collectives "
                           "unwaited at the end of a step; completed "
                           "them\n");
  }
  {
    // A GPU backend has only enqueued the step so far.
    WaitScope watched(ctx.waitState, "the step's device work");
    device::finishStep(ctx);
  }
  auto end = std::chrono::steady_clock::now();
  if (ctx.tracing)
    ctx.trace.push_back(
        {"step " + std::to_string(step), stepStart, ctx.nowUs() - stepStart});
  // wall_clock_breakdown: the host's clock, which on a GPU backend sees the
  // micro steps enqueued and the boundary wait for the step's end.
  using Ms = std::chrono::duration<double, std::milli>;
  return {Ms(end - start).count(), Ms(microEnd - start).count(),
          Ms(end - microEnd).count()};
}

StepRecord Driver::agree(int64_t step, float scale, const StepTimes &local,
                         bool evaluating) {
  const Manifest &m = manifest;
  StepRecord r;
  r.step = step;
  r.scale = scale;
  // Global values: the mean of the ranks' losses, the slowest rank's
  // times, the largest peak, and whether any rank was asked to stop.
  double mine[5] = {ctx.lossCount ? ctx.lossSum / ctx.lossCount : 0.0, local.ms,
                    local.microMs, local.boundaryMs,
                    stopRequested() ? 1.0 : 0.0};
  double all[5];
  r.evaluated = evaluating;
  if (evaluating) {
    Evaluation e = evaluate();
    r.evalLoss = e.loss;
    r.evalTokens = e.tokens;
  }
  r.peakBytes = zrt_memory_peak_bytes();
  {
    WaitScope watched(ctx.waitState, "the step's loss/time/peak all-reduce");
    MPI_Allreduce(mine, all, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(mine + 1, all + 1, 4, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &r.peakBytes, 1, MPI_INT64_T, MPI_MAX,
                  MPI_COMM_WORLD);
  }
  maxPeak = std::max(maxPeak, r.peakBytes);
  r.loss = all[0] / ctx.world;
  r.ms = all[1];
  r.microMs = all[2];
  r.boundaryMs = all[3];
  stopAgreed = all[4] > 0.0;
  r.gradNorm = std::sqrt(double(ctx.stats[1]));
  r.rate = double(batchRows().perStep * data->itemsPerRow()) / (r.ms / 1000.0);
  r.unit = data->unit();
  r.nextScale = zrt_loss_scaler_scale(&ctx.scaler);
  r.dynamicScale = ctx.scaler.dynamic;
  r.skipped = ctx.skipped;
  // The count the loss divides by: the valid labels of the global batch,
  // or every label of it without ignore_index.
  r.tokens = program->count_labels ? ctx.stepLabels
                                   : batchRows().perStep * data->labelsPerRow();
  r.overflow = ctx.overflow;
  r.adamSteps = ctx.adamSteps;
  // The learning rate this step applied, or would have (a skipped step
  // does not advance the schedule, as in DeepSpeed's engine).
  bool scheduled = m.schedule.kind != ZRT_LR_CONSTANT;
  r.beta1 = m.beta1;
  r.beta2 = m.beta2;
  r.lr = zrt_lr_at(scheduled ? &m.schedule : nullptr, m.lr, &r.beta1, &r.beta2,
                   ctx.skipped ? ctx.adamSteps + 1 : ctx.adamSteps);
  return r;
}

std::string Driver::noLabelsMessage(int64_t step) const {
  const Manifest &m = manifest;
  BatchRows rows = batchRows();
  std::string ignored;
  for (const InputInfo &in : m.inputs)
    if (in.ignoredIndex && ignored.empty())
      ignored = " " + std::to_string(*in.ignoredIndex);
  return "step " + std::to_string(step) +
         ": every label of the global batch is ignore_index" + ignored +
         ", so its loss, the mean over its valid labels, is 0/0: " +
         data->describeRows(progress.dataPosition, rows.perStep) + " (" +
         std::to_string(ctx.world) + " rank(s) x " +
         std::to_string(m.accumulationSteps) + " micro step(s) x " +
         std::to_string(rows.local) +
         " rows); give each global batch at least one label to learn";
}

bool Driver::continueAtMinScale(int64_t step, float scale) {
  if (opts.stopAtMinLossScale) {
    char msg[320];
    std::snprintf(msg, sizeof(msg),
                  "step %lld: Current loss scale already at minimum - "
                  "cannot decrease scale anymore. Exiting run. (loss "
                  "scale %g = min_loss_scale and the gradients "
                  "overflowed again; --on-min-loss-scale=continue skips "
                  "such steps instead)",
                  (long long)step, double(scale));
    if (ctx.rank == 0)
      error(msg);
    return false;
  }
  if (!warnedMinScale && ctx.rank == 0) {
    std::fprintf(stderr,
                 "zrt: warning: step %lld: gradient overflow with the "
                 "loss scale already at its minimum %g; skipping the "
                 "step and continuing (--on-min-loss-scale=continue)\n",
                 (long long)step, double(scale));
    std::fflush(stderr);
  }
  warnedMinScale = true;
  return true;
}

void Driver::printMemoryReport() {
  int64_t scratch = zrt_scratch_peak_bytes();
  std::printf("peak memory: measured %lld bytes (kernel scratch %lld), "
              "planned %lld bytes (persistent %lld + step arena %lld + "
              "scratch %lld)%s\n",
              (long long)maxPeak, (long long)scratch,
              (long long)manifest.peakBytes,
              (long long)manifest.persistentBytes,
              (long long)manifest.arenaBytes, (long long)manifest.scratchBytes,
              maxPeak == manifest.peakBytes ? "" : ": MISMATCH");
  if (manifest.hostBytes > 0) {
    int64_t host = hostMemoryPeakBytes();
    bool optimizer = false, params = false;
    for (const PartitionInfo &p : manifest.partitions) {
      optimizer |= p.offloaded();
      params |= p.paramsOffloaded();
    }
    std::printf("host memory: measured %lld bytes, planned %lld bytes "
                "(offloaded %s)%s\n",
                (long long)host, (long long)manifest.hostBytes,
                optimizer && params ? "optimizer and parameters"
                : params            ? "parameters"
                                    : "optimizer",
                host == manifest.hostBytes ? "" : ": MISMATCH");
  }
  if (swapFile || paramSwapFile) {
    // The files as the file system sees them, against the plan.
    int64_t size = 0;
    for (SwapFile *file : {swapFile.get(), paramSwapFile.get()}) {
      struct stat st;
      if (file)
        size = size < 0 || ::stat(file->path().c_str(), &st) != 0
                   ? -1
                   : size + int64_t(st.st_size);
    }
    std::printf("nvme swap file%s: measured %lld bytes, planned %lld bytes "
                "(nvme_bytes)%s\n",
                swapFile && paramSwapFile ? "s" : "", (long long)size,
                (long long)manifest.nvmeBytes,
                size == manifest.nvmeBytes ? "" : ": MISMATCH");
  }
  std::fflush(stdout);
}

void Driver::printCommReport() {
  for (int k = 0; k < kNumCommKinds; ++k) {
    const LinkBytes &measured = stepComm[size_t(k)];
    const LinkBytes &planned = manifest.plannedComm[size_t(k)];
    if (measured == LinkBytes{} && planned == LinkBytes{})
      continue;
    std::printf("communication %s: measured intra %lld inter %lld bytes per "
                "step, planned intra %lld inter %lld%s\n",
                kCommKindNames[k], (long long)measured.intraNode,
                (long long)measured.interNode, (long long)planned.intraNode,
                (long long)planned.interNode,
                commVaried            ? ": MISMATCH (differs by step)"
                : measured == planned ? ""
                                      : ": MISMATCH");
  }
  std::fflush(stdout);
}

int Driver::run(int argc, char **argv) {
  int exitCode = 1;
  if (!setUp(argc, argv, exitCode))
    return exitCode;
  bool ok = true;
  installInterruptHandlers();
  std::string flightDir = opts.flightDir;
  if (flightDir.empty() && !opts.logJson.empty()) {
    size_t slash = opts.logJson.rfind('/');
    flightDir =
        slash == std::string::npos ? "." : opts.logJson.substr(0, slash);
  }
  ctx.flight.setOutput(flightDir.empty() ? "." : flightDir, ctx.rank,
                       ctx.world);
  installFlightSignal();
  if (ctx.rank == 0)
    noteProgress(progress.step + 1);
  bool training = opts.steps > progress.step;
  if (!training && !evalData && !opts.resume.empty() && ctx.rank == 0)
    // --steps counts from the start of training, not from the checkpoint.
    std::fprintf(stderr,
                 "zrt: warning: nothing to train: the checkpoint is at step "
                 "%lld and --steps %lld is not beyond it (--steps counts "
                 "the checkpoint's steps)\n",
                 (long long)progress.step, (long long)opts.steps);
  if (training || evalData)
    ok = train();
  if (ok && !training && !opts.save.empty() && opts.resume.empty() &&
      opts.steps == 0)
    ok = save(progress);
  // A run stopped before --steps exports nothing: its checkpoint resumes.
  if (ok && !stopped &&
      (!opts.exportPath.empty() || !opts.exportHf.empty() ||
       !opts.exportAdapters.empty()))
    ok = exportWeights();
  if (!opts.trace.empty() && !writeTrace())
    ok = false;
  stepLog->close();
  // After a run that trained: an evaluation alone runs only the forward's
  // part of the plan.
  if (ok && ctx.rank == 0 && maxPeak > 0)
    printMemoryReport();
  if (ok && ctx.rank == 0 && commMeasured && manifest.hasPlannedComm)
    printCommReport();
  // Repeated at the very end (stdout, after everything else rank 0
  // prints), where a reader of the output looks first.
  stepLog->printSkips();
  return ok ? 0 : 1;
}

} // namespace

extern "C" int zrt_train_main(int argc, char **argv,
                              const zrt_program *program) {
  int code;
  {
    Driver driver(program);
    try {
      code = driver.run(argc, argv);
    } catch (const std::exception &e) {
      // Only a rank-local surprise gets here; end every rank.
      std::fprintf(stderr, "zrt: error: %s\n", e.what());
      MPI_Abort(MPI_COMM_WORLD, 1);
      return 1;
    } catch (...) {
      std::fprintf(stderr, "zrt: error: unexpected exception\n");
      MPI_Abort(MPI_COMM_WORLD, 1);
      return 1;
    }
  }
  zrt_finalize();
  return code;
}
