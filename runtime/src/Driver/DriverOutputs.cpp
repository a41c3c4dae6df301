//===- DriverOutputs.cpp - What the driver writes -------------------------===//
//
// Part of the zero-mlir project.
//
// The driver's outputs: checkpoints (--save, with the test hook that kills
// a rank while it writes one), the exported weights (--export,
// --export-hf, --export-adapters), the trace (--trace) and rank 0's
// reports of measured against planned memory and communication.
//
//===----------------------------------------------------------------------===//

#include "Checkpoint/Format.h"
#include "Data/Files.h"
#include "Data/WeightFiles.h"
#include "Device/Memory.h"
#include "Driver/Driver.h"
#include "Driver/State.h"
#include "Driver/Trace.h"
#include "Driver/TraceFile.h"

#include <mpi.h>

#include <csignal>
#include <cstdio>
#include <map>
#include <sys/stat.h>

using namespace zrt;

void Driver::installSaveHook() {
  if (opts.injectKillDuringSave <= 0 || ctx.rank != opts.injectKillRank)
    return;
  std::string suffix = opts.injectKillAt == "rank-file"
                           ? "/rank_" + std::to_string(ctx.rank) + ".bin"
                           : "/latest";
  // relink: the second rename of latest in the save, the first having
  // named the staging directory of --overwrite's first checkpoint.
  int skip = opts.injectKillAt == "relink" ? 1 : 0;
  setBeforeRenameHook([this, suffix, skip](const std::string &path) mutable {
    if (savingStep != opts.injectKillDuringSave ||
        path.size() < suffix.size() ||
        path.compare(path.size() - suffix.size(), suffix.size(), suffix) != 0)
      return;
    if (skip-- > 0)
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
  bool replacing = replaced.pending;
  if (replacing && !stageReplacement(at.step, dir))
    return false;
  // Under MiCS the first shard group holds every shard once: its ranks
  // write the checkpoint, as the same stage on that many ranks would.
  int savers = manifest.shardGroupSize();
  SavedFile file;
  if (!everywhere([&] {
        makeDirs(dir);
        if (ctx.rank < savers)
          file = writeRankCheckpoint(ctx, dir, at);
      })) {
    // The earlier run's checkpoints stay as they were, `latest` with them.
    if (replacing && ctx.rank == 0)
      try {
        clearStagingDirectory(dir);
      } catch (const std::exception &) {
      }
    return false;
  }
  std::vector<SavedFile> files(static_cast<size_t>(savers));
  uint64_t mine[2] = {file.crc, file.bytes};
  std::vector<uint64_t> all(size_t(2 * ctx.world));
  MPI_Gather(mine, 2, MPI_UINT64_T, all.data(), 2, MPI_UINT64_T, 0,
             MPI_COMM_WORLD);
  for (int r = 0; r < savers; ++r)
    files[size_t(r)] = {uint32_t(all[size_t(2 * r)]), all[size_t(2 * r + 1)]};
  if (!everywhere([&] {
        if (ctx.rank != 0)
          return;
        // `latest` names the staging directory once it is complete: from
        // then on this run's checkpoint is the one a --resume loads.
        writeCheckpointManifest(ctx, opts.save, dir, at, files);
        if (replacing)
          finishReplacing(opts.save, dir, at.step, replaced);
      }))
    return false;
  if (replacing) {
    replaced.pending = false;
    dir = checkpointDir(opts.save, at.step);
  }
  info("saved checkpoint %s\n", dir.c_str());
  lastCheckpoint = dir;
  return true;
}

bool Driver::stageReplacement(int64_t step, std::string &dir) {
  dir = stagingDirectory(opts.save, step, replaced.staging);
  // What a replacing run that crashed left there goes before any rank
  // writes into it.
  return everywhere([&] {
    if (ctx.rank == 0)
      clearStagingDirectory(dir);
  });
}

bool Driver::exportWeights() {
  std::vector<Tensor> tensors = gatherParameters(ctx);
  // "format": "pt" as torch's safetensors writer marks its files.
  std::map<std::string, std::string> metadata = {
      {"format", "pt"}, {"step", std::to_string(progress.step)}};
  int files = 0;
  size_t params = tensors.size();
  std::vector<std::string> notCarried;
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
        const manifest::HfModel &hf =
            hfModelOf(manifest.hfModel, "--export-hf");
        notCarried = appendUntrained(hf, carried, tensors);
        files = writeHfDirectory(opts.exportHf, hf.config, tensors,
                                 opts.maxShardBytes, metadata);
      }))
    return false;
  if (!notCarried.empty())
    std::fprintf(stderr,
                 "zrt: warning: --export-hf: %zu tensor(s) of the model that "
                 "the step never uses (%s%s) were not in --init-from's "
                 "weights, so the export leaves them out\n",
                 notCarried.size(), notCarried[0].c_str(),
                 notCarried.size() > 1 ? ", ..." : "");
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
                : optimizer         ? "optimizer"
                                    : "activations",
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
    // An MoE exchange sends the rows the router sent to other ranks'
    // experts, which vary by step; the plan counts a balanced routing (the
    // report's all-to-all: a member keeps 1/P of its rows and sends the
    // rest), which a skewed routing exceeds.
    // With expert parallelism the all-to-all bytes are reported, not
    // compared (sequence parallelism's, if any, with them); the other
    // kinds still compare exactly.
    bool routed = k == kAllToAll && manifest.expertParallel > 1;
    std::printf("communication %s: measured intra %lld inter %lld bytes per "
                "step%s, planned intra %lld inter %lld%s\n",
                kCommKindNames[k], (long long)measured.intraNode,
                (long long)measured.interNode,
                routed ? " (MoE exchanges: by the routing, last step)" : "",
                (long long)planned.intraNode, (long long)planned.interNode,
                routed                  ? " (a balanced routing)"
                : commVaried[size_t(k)] ? ": MISMATCH (differs by step)"
                : measured == planned   ? ""
                                        : ": MISMATCH");
  }
  std::fflush(stdout);
}
