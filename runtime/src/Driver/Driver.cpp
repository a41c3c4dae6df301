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

#include "Driver/Driver.h"
#include "Checkpoint/Directory.h"
#include "Checkpoint/Rank.h"
#include "Collectives/Flight.h"
#include "Collectives/Groups.h"
#include "Collectives/Mpi.h"
#include "Data/DataSource.h"
#include "Data/Files.h"
#include "Data/WeightFiles.h"
#include "Device/Device.h"
#include "Device/Memory.h"
#include "Driver/Interrupt.h"
#include "Driver/Options.h"
#include "Driver/State.h"
#include "Driver/StepLog.h"
#include "Driver/TraceFile.h"
#include "Optimizer/Nvme.h"

#include <mpi.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <stdexcept>
#include <sys/resource.h>
#include <thread>

using namespace zrt;

namespace {

/// The process's peak resident memory so far (bytes).
uint64_t hostPeakBytes() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return uint64_t(usage.ru_maxrss) * 1024;
}

} // namespace

Driver::~Driver() {
  // The swap files' engines finish what is queued into the swap buffers
  // in the host arena, so they end before it does.
  paramSwapFile.reset();
  swapFile.reset();
  zrt_arena_destroy(ctx.persistentArena);
  zrt_arena_destroy(ctx.stepArena);
  zrt_arena_destroy(ctx.hostArena);
}

void Driver::error(const std::string &msg) const {
  lastMessage = msg;
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
    setTopology(ctx.comm, 0, m.mesh());
    setTheTopology = true;
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
  setTopology(ctx.comm, m.ranksPerNode, m.mesh());
  setTheTopology = true;
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

  if (!parseCommandLine(argc, argv, exitCode))
    return false;
  if (!startProgram())
    return false;

  // Every output is checked before any work, so that a path that cannot be
  // written does not lose the training (rank 0 also locks --save).
  if (!everywhere([&] { checkOutputs(); }))
    return false;
  // Whether the first save replaces an earlier run's checkpoints, which
  // only rank 0 looked at.
  int replacing[2] = {replaced.pending, replaced.staging};
  MPI_Bcast(replacing, 2, MPI_INT, 0, MPI_COMM_WORLD);
  replaced.pending = replacing[0];
  replaced.staging = replacing[1];
  if (ctx.rank == 0 && !saveLock.takenOver().empty())
    std::fprintf(stderr,
                 "zrt: warning: took over the lock of '%s' from %s, which "
                 "has ended (a run that crashed or was killed)\n",
                 opts.save.c_str(), saveLock.takenOver().c_str());

  // An arena that does not fit fails the run on every rank, before any
  // collective that the others would wait in.
  if (!everywhere([&] { createContext(); }))
    return false;
  if (!everywhere([&] {
        openSwapFiles();
        openData();
        loadState();
      }))
    return false;
  if (!finishLoading())
    return false;
  if (!startLog())
    return false;
  return announceRun();
}

bool Driver::parseCommandLine(int argc, char **argv, int &exitCode) {
  // Every rank parses the same command line, so they agree on the verdict;
  // rank 0 speaks for all.
  try {
    opts = parseOptions(argc, argv);
  } catch (const std::exception &e) {
    lastMessage = e.what();
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
  return true;
}

bool Driver::startProgram() {
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
  // tensor memory exists, and how tensors move between ranks.
  if (!everywhere([&] {
        if (std::string why = selectCollectives(opts.collectives); !why.empty())
          throw std::runtime_error(why);
        if (std::string why =
                device::selectAttentionPrecision(opts.attentionPrecision);
            !why.empty())
          throw std::runtime_error(why);
        if (std::string why = device::selectGraphs(opts.cudaGraphs);
            !why.empty())
          throw std::runtime_error(why);
        int localRank = 0, localSize = 1;
        nodeRank(MPI_COMM_WORLD, localRank, localSize);
        device::initialize(localRank);
      }))
    return false;
  return true;
}

void Driver::createContext() {
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
  ctx.persistentArena = createArena(m.persistentBytes, "persistent arena");
  ctx.stepArena = createArena(m.arenaBytes, "step arena");
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
}

void Driver::openSwapFiles() {
  const Manifest &m = manifest;
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
    paramSwapFile = SwapFile::open(m.paramNvmePath, ctx.rank, m.paramNvmeBytes,
                                   "params", "--param-nvme-path");
    ctx.paramNvme = paramSwapFile.get();
    ctx.paramSwap = ctx.host + m.paramSwapOffset;
    ctx.paramSwapBytes = m.paramSwapBytes;
  }
}

void Driver::openData() {
  const Manifest &m = manifest;
  int64_t rowsPerStep = batchRows().perStep;
  DataShard shard{ctx.rank, ctx.world};
  RawTokenType raw{opts.dataDtype == "u32" ? 4 : 2, !opts.dataDtype.empty()};
  if (!opts.data.empty())
    data = openTokenData(m, opts.data, rowsPerStep, shard, raw);
  else if (!opts.inputs.empty())
    data = openArrayData(m, opts.inputs, opts.labels, opts.positions,
                         rowsPerStep, shard);
  if (!opts.evalData.empty())
    evalData =
        openTokenData(m, opts.evalData, rowsPerStep, shard, raw, "--eval-data");
  else if (!opts.evalInputs.empty())
    evalData =
        openArrayData(m, opts.evalInputs, opts.evalLabels, opts.evalPositions,
                      rowsPerStep, shard, "--eval-inputs/--eval-labels");
  if (evalData) {
    // Batches are laid out as the training stream's, without wrapping.
    int64_t whole = evalData->wholeRows() / rowsPerStep;
    evalBatches = opts.evalBatches > 0 ? opts.evalBatches : whole;
    if (evalBatches > whole)
      fail("--eval-batches " + std::to_string(evalBatches) + " exceeds what '" +
           (opts.evalData.empty() ? opts.evalInputs : opts.evalData) +
           "' holds: " + std::to_string(whole) + " global batch(es) of " +
           std::to_string(rowsPerStep) + " rows (" +
           std::to_string(evalData->wholeRows()) + " rows)");
  }
}

void Driver::loadState() {
  const Manifest &m = manifest;
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
  for (const ParamInfo &p : m.params) {
    // The files hold every expert of an expert-parallel parameter.
    std::vector<int64_t> shape = p.exportShape();
    shape[0] *= p.expertParallel;
    wanted.push_back({p.name, shape});
  }
  std::set<std::string> tied;
  if (m.hfModel)
    for (const manifest::TiedName &t : m.hfModel->tied)
      tied.insert(t.name);
  WeightFiles weights(opts.initFrom, wanted, tied,
                      m.hfModel ? &*m.hfModel : nullptr);
  initializeParameters(ctx, opts.seed, &weights);
  // Only rank 0 exports, after every rank has read its parameters.
  if (ctx.rank == 0 && (!opts.exportHf.empty() || (library && m.hfModel)))
    carried = weights.readUnused();
  loaded = {weights.dataBytesRead(), weights.headerBytesRead(),
            weights.totalBytes(), uint64_t(weights.fileCount()),
            hostPeakBytes()};
}

bool Driver::finishLoading() {
  const Manifest &m = manifest;
  if (!opts.initFrom.empty())
    reportLoading(loaded);
  if (!library && opts.steps > progress.step && !data) {
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
  return true;
}

bool Driver::startLog() {
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
  return true;
}

bool Driver::announceRun() {
  const Manifest &m = manifest;
  int64_t numel = 0;
  for (const ParamInfo &p : m.params)
    numel += p.numel;
  info("zero-mlir: stage %d, world size %d, %s, %d micro step(s), %lld "
       "parameters in %zu partition(s), schedule %s\n",
       m.stage, m.worldSize, m.precision.c_str(), m.accumulationSteps,
       (long long)numel, m.partitions.size(), m.hashText.c_str());
  // total_num_steps "auto": the length of the run, --steps (with --resume,
  // the whole run's, which --steps counts).
  if (library && manifest.scheduleRunLength && !stepsGiven) {
    error("the learning-rate schedule's total_num_steps is \"auto\": "
          "pass the run's length (--steps N)");
    return false;
  }
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
      replaced =
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
