//===- State.cpp - Parameters, export and checkpoints ---------------------===//
//
// Part of the zero-mlir project.
//
// The 16-bit params are always the cast of the fp32 masters (initialization
// writes both, Adam writes the copy even for skipped steps), so checkpoints
// hold only each rank's master and moment shards; resuming casts them back
// and re-gathers the params as the step's post-step all-gather would. fp32
// params are their own masters: their owned part is saved as the "master"
// section (padded to the shard with zeros, as a master buffer's padding
// is) and restored in place.
//
//===----------------------------------------------------------------------===//

#include "Checkpoint.h"
#include "Device.h"
#include "Driver.h"
#include "Nvme.h"
#include "Support.h"
#include "Types.h"

#include <mpi.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <map>
#include <stdexcept>

using namespace zrt;
using nlohmann::json;

namespace {

void zeroBuffer(zrt_ctx &ctx, int32_t p, BufferKind kind) {
  const PartitionInfo &part = ctx.manifest->partitions[size_t(p)];
  if (!part.hasBuffer(kind))
    return;
  int64_t bytes =
      part.counts[kind] * bufferElementBytes(kind, ctx.computeBytes);
  if (ctx.onNvme(p, kind))
    ctx.swapFileOf(kind)->zero(part.offsets[kind], bytes,
                               ctx.swapBufferOf(kind), ctx.swapBytesOf(kind));
  else if (ctx.onHost(p, kind))
    std::memset(ctx.buffer(p, kind), 0, size_t(bytes));
  else
    device::zero(ctx.buffer(p, kind), bytes);
}

/// Copies between host memory and buffer `kind` of partition `p` (at
/// `at`), wherever the buffer lives: a buffer in the swap file is read or
/// written from its start (`at` is null) through the swap buffers.
void storeBuffer(zrt_ctx &ctx, int32_t p, BufferKind kind, void *at,
                 const void *src, int64_t bytes) {
  if (ctx.onNvme(p, kind))
    ctx.swapFileOf(kind)->write(
        ctx.manifest->partitions[size_t(p)].offsets[kind], src, bytes,
        ctx.swapBufferOf(kind), ctx.swapBytesOf(kind));
  else if (ctx.onHost(p, kind))
    std::memcpy(at, src, size_t(bytes));
  else
    device::upload(at, src, bytes);
}
void loadBuffer(const zrt_ctx &ctx, int32_t p, BufferKind kind, void *dst,
                const void *at, int64_t bytes) {
  if (ctx.onNvme(p, kind))
    ctx.swapFileOf(kind)->read(
        ctx.manifest->partitions[size_t(p)].offsets[kind], dst, bytes,
        ctx.swapBufferOf(kind), ctx.swapBytesOf(kind));
  else if (ctx.onHost(p, kind))
    std::memcpy(dst, at, size_t(bytes));
  else
    device::download(dst, at, bytes);
}

/// Casts this rank's owned masters into its params (the owned slice of the
/// full buffer at stages 0-2, the shard at stage 3), unless they are the
/// params.
void castOwnedParams(zrt_ctx &ctx, int32_t p) {
  const Manifest &m = *ctx.manifest;
  const PartitionInfo &part = m.partitions[size_t(p)];
  if (part.paramsAreMasters)
    return;
  int64_t n = m.owned(part, ctx.rank).size();
  if (part.paramsOffloaded()) {
    // The shard is in host memory or the parameter swap file: cast on the
    // host, from the masters wherever they are (host or swap file with an
    // offloaded optimizer, device otherwise), and store it there.
    std::vector<float> master(static_cast<size_t>(n), 0.0f);
    loadBuffer(ctx, p, kMaster, master.data(), ctx.buffer<float>(p, kMaster),
               n * 4);
    std::vector<char> cast;
    char *params = ctx.buffer(p, kParams);
    if (!params) {
      cast.resize(size_t(n * ctx.computeBytes));
      params = cast.data();
    }
    dispatchFloat(m.computeDtype, [&](auto tag) {
      fromFloat(master.data(), reinterpret_cast<decltype(tag) *>(params), n);
    });
    if (!cast.empty())
      storeBuffer(ctx, p, kParams, nullptr, params, n * ctx.computeBytes);
    return;
  }
  if (part.onNvme[kMaster]) {
    // The masters are in the swap file: read them through the swap
    // buffers a chunk at a time, cast into the host parameter copy, and
    // upload that.
    char *copy = ctx.buffer(p, kHostParams);
    int64_t chunk = ctx.swapBytes / 4;
    float *bounce = reinterpret_cast<float *>(ctx.swap);
    for (int64_t at = 0; at < n; at += chunk) {
      int64_t len = std::min(chunk, n - at);
      ctx.nvme->read(part.offsets[kMaster] + at * 4, bounce, len * 4, ctx.swap,
                     ctx.swapBytes);
      dispatchFloat(m.computeDtype, [&](auto tag) {
        fromFloat(bounce, reinterpret_cast<decltype(tag) *>(copy) + at, len);
      });
    }
    device::upload(ownedParams(ctx, p), copy, n * ctx.computeBytes);
    return;
  }
  if (part.offloaded()) {
    // The masters are on the host: cast there (into the parameter copy the
    // host Adam writes) and upload.
    const float *master = ctx.buffer<float>(p, kMaster);
    if (m.computeDtype == ZRT_F32) {
      device::upload(ownedParams(ctx, p), master, n * 4);
      return;
    }
    char *copy = ctx.buffer(p, kHostParams);
    dispatchFloat(m.computeDtype, [&](auto tag) {
      fromFloat(master, reinterpret_cast<decltype(tag) *>(copy), n);
    });
    device::upload(ownedParams(ctx, p), copy, n * ctx.computeBytes);
    return;
  }
  zrt_cast(ZRT_F32, ctx.buffer<float>(p, kMaster), m.computeDtype,
           ownedParams(ctx, p), n);
}

/// The buffer that holds partition `p`'s owned masters.
BufferKind masterKind(const zrt_ctx &ctx, int32_t p) {
  return ctx.manifest->partitions[size_t(p)].paramsAreMasters ? kParams
                                                              : kMaster;
}

} // namespace

//===----------------------------------------------------------------------===//
// Initialization and export
//===----------------------------------------------------------------------===//

void zrt::initializeParameters(zrt_ctx &ctx, uint64_t seed,
                               const std::vector<Tensor> *tensors) {
  const Manifest &m = *ctx.manifest;
  std::map<std::string, const Tensor *> byName;
  if (tensors) {
    for (const Tensor &t : *tensors)
      byName[t.name] = &t;
    for (const ParamInfo &p : m.params) {
      auto it = byName.find(p.name);
      if (it == byName.end())
        fail("the weights have no tensor '" + p.name + "'");
      if (it->second->shape != p.exportShape())
        fail("tensor '" + p.name + "' has shape " +
             shapeText(it->second->shape) + ", the program's parameter " +
             shapeText(p.exportShape()));
      byName.erase(it);
    }
    if (!byName.empty())
      fail("the weights have tensor '" + byName.begin()->first +
           "', which is no parameter of the program");
    for (const Tensor &t : *tensors)
      byName[t.name] = &t;
  }

  for (int32_t p = 0; p < int32_t(m.partitions.size()); ++p) {
    const PartitionInfo &part = m.partitions[size_t(p)];
    Range own = m.owned(part, ctx.rank);
    // Stages 0-2 hold every parameter's compute copy, stage 3 only a shard.
    Range need = m.stage <= 2 ? Range{0, part.numel} : own;
    std::vector<float> values(size_t(need.size()), 0.0f);
    for (size_t i = 0; i < m.params.size(); ++i) {
      const ParamInfo &param = m.params[i];
      if (param.partition != p)
        continue;
      // Padding rows (after the first exportNumel elements) stay zero.
      int64_t lo = std::max(need.begin, param.offset);
      int64_t hi = std::min(need.end, param.offset + param.exportNumel());
      const Tensor *t = tensors ? byName[param.name] : nullptr;
      for (int64_t e = lo; e < hi; ++e)
        values[size_t(e - need.begin)] =
            t ? t->data[size_t(e - param.offset)]
              : initValue(param, seed, i, uint64_t(e - param.offset));
    }
    for (int kind = 0; kind < kNumBufferKinds; ++kind)
      zeroBuffer(ctx, p, BufferKind(kind));
    // fp32 params are their own masters, written below.
    if (!part.paramsAreMasters)
      storeBuffer(ctx, p, kMaster, ctx.buffer<float>(p, kMaster),
                  values.data() + (own.begin - need.begin),
                  own.size() * int64_t(sizeof(float)));
    if (part.paramsOffloaded()) {
      // In host memory, or cast there and written to the swap file.
      std::vector<char> cast;
      char *params = ctx.buffer(p, kParams);
      if (!params) {
        cast.resize(size_t(need.size() * ctx.computeBytes));
        params = cast.data();
      }
      dispatchFloat(m.computeDtype, [&](auto tag) {
        fromFloat(values.data(), reinterpret_cast<decltype(tag) *>(params),
                  need.size());
      });
      if (!cast.empty())
        storeBuffer(ctx, p, kParams, nullptr, params,
                    need.size() * ctx.computeBytes);
    } else {
      device::uploadCast(values.data(), m.computeDtype, ctx.buffer(p, kParams),
                         need.size());
    }
  }
}

std::vector<Tensor> zrt::gatherParameters(zrt_ctx &ctx) {
  const Manifest &m = *ctx.manifest;
  std::vector<std::vector<float>> layouts(m.partitions.size());
  for (size_t p = 0; p < m.partitions.size(); ++p) {
    const PartitionInfo &part = m.partitions[p];
    const float *master = ownedMasters(ctx, int32_t(p));
    std::vector<float> &full = layouts[p];
    BufferKind kind = masterKind(ctx, int32_t(p));
    if (m.stage == 0) {
      if (ctx.rank == 0) {
        full.resize(size_t(part.numel));
        loadBuffer(ctx, int32_t(p), kind, full.data(), master,
                   part.numel * int64_t(sizeof(float)));
      }
      continue;
    }
    if (part.shardNumel > std::numeric_limits<int>::max())
      fatal("export: shard of %lld elements exceeds MPI's int counts",
            (long long)part.shardNumel);
    // Each rank's owned masters padded to a full shard.
    std::vector<float> shard(size_t(part.shardNumel), 0.0f);
    Range own = m.owned(part, ctx.rank);
    loadBuffer(ctx, int32_t(p), kind, shard.data(), master,
               own.size() * int64_t(sizeof(float)));
    if (ctx.rank == 0)
      full.resize(size_t(part.shardNumel) * size_t(ctx.world));
    MPI_Gather(shard.data(), int(part.shardNumel), MPI_FLOAT, full.data(),
               int(part.shardNumel), MPI_FLOAT, 0, MPI_COMM_WORLD);
  }
  std::vector<Tensor> tensors;
  if (ctx.rank != 0)
    return tensors;
  for (const ParamInfo &param : m.params) {
    // Without its padding rows, which follow the rest. Their gradient is
    // exactly zero, so they must still hold the zeros they started with.
    const float *src = layouts[size_t(param.partition)].data() + param.offset;
    for (int64_t e = param.exportNumel(); e < param.numel; ++e)
      if (src[e] != 0.0f)
        fatal("export: padding row %lld of '%s' holds %g, not 0: its "
              "gradient was not masked",
              (long long)(e / (param.numel / param.shape[0])),
              param.name.c_str(), double(src[e]));
    tensors.push_back({param.name, param.exportShape(),
                       std::vector<float>(src, src + param.exportNumel())});
  }
  return tensors;
}

//===----------------------------------------------------------------------===//
// Checkpoints
//===----------------------------------------------------------------------===//

namespace {

json scalerJson(const zrt_loss_scaler &s) {
  return {{"cur_scale", s.cur_scale},
          {"min_scale", s.min_scale},
          {"scale_factor", s.scale_factor},
          {"cur_iter", s.cur_iter},
          {"last_overflow_iter", s.last_overflow_iter},
          {"scale_window", s.scale_window},
          {"delayed_shift", s.delayed_shift},
          {"cur_hysteresis", s.cur_hysteresis},
          {"consecutive_hysteresis", s.consecutive_hysteresis},
          {"dynamic", s.dynamic}};
}

zrt_loss_scaler scalerFromJson(const json &j) {
  zrt_loss_scaler s{};
  s.cur_scale = j.at("cur_scale").get<double>();
  s.min_scale = j.at("min_scale").get<double>();
  s.scale_factor = j.at("scale_factor").get<double>();
  s.cur_iter = j.at("cur_iter").get<int64_t>();
  s.last_overflow_iter = j.at("last_overflow_iter").get<int64_t>();
  s.scale_window = j.at("scale_window").get<int64_t>();
  s.delayed_shift = j.at("delayed_shift").get<int64_t>();
  s.cur_hysteresis = j.at("cur_hysteresis").get<int64_t>();
  s.consecutive_hysteresis = j.at("consecutive_hysteresis").get<int32_t>();
  s.dynamic = j.at("dynamic").get<int32_t>();
  return s;
}

/// Where saved buffer `kind` of group `p` lives on this rank: the owned
/// masters when the params are the masters (the rest of the section is
/// padding), else the buffer.
float *savedBuffer(const zrt_ctx &ctx, int32_t p, BufferKind kind) {
  return kind == kMaster ? ownedMasters(ctx, p) : ctx.buffer<float>(p, kind);
}

} // namespace

SavedFile zrt::writeRankCheckpoint(const zrt_ctx &ctx, const std::string &dir,
                                   const Progress &progress) {
  const Manifest &m = *ctx.manifest;
  TrainingState state{progress.step, progress.dataPosition, ctx.adamSteps,
                      scalerJson(ctx.scaler)};
  std::string bytes =
      packRankFile(m, ctx.rank, ctx.world, state,
                   [&](int32_t p, BufferKind kind, char *dst, int64_t size) {
                     const PartitionInfo &part = m.partitions[size_t(p)];
                     int64_t have = kind == kMaster && part.paramsAreMasters
                                        ? m.owned(part, ctx.rank).size() * 4
                                        : size;
                     loadBuffer(ctx, p,
                                kind == kMaster ? masterKind(ctx, p) : kind,
                                dst, savedBuffer(ctx, p, kind), have);
                   });
  writeFileAtomic(dir + "/" + rankFileName(ctx.rank), bytes);
  return {rankFileCrc(bytes), bytes.size()};
}

void zrt::writeCheckpointManifest(const zrt_ctx &ctx, const std::string &root,
                                  const std::string &dir,
                                  const Progress &progress,
                                  const std::vector<SavedFile> &files) {
  writeFileAtomic(
      dir + "/manifest.json",
      checkpointManifest(*ctx.manifest, ctx.world, progress.step, files));
  // Only a complete checkpoint becomes the latest.
  std::string name = dir.substr(dir.find_last_of('/') + 1);
  writeFileAtomic(root + "/latest", name + "\n");
}

Progress zrt::readCheckpoint(zrt_ctx &ctx, const std::string &path) {
  const Manifest &m = *ctx.manifest;
  CheckpointReader ckpt(path);
  checkSameModel(ckpt, m);

  // The params are re-derived from the masters (or restored in place as
  // the masters) and re-gathered; the gradients start from zero. Each owned
  // range is read by parameter name from the ranks that saved it: the
  // rank's own file when the layout is the same.
  for (int32_t p = 0; p < int32_t(m.partitions.size()); ++p)
    for (int kind = 0; kind < kNumBufferKinds; ++kind)
      zeroBuffer(ctx, p, BufferKind(kind));
  std::vector<float> values;
  for (int32_t p = 0; p < int32_t(m.partitions.size()); ++p)
    for (BufferKind kind : kSavedBuffers) {
      remapOwned(ckpt, m, p, ctx.rank, kind, values);
      storeBuffer(ctx, p, kind == kMaster ? masterKind(ctx, p) : kind,
                  savedBuffer(ctx, p, kind), values.data(),
                  int64_t(values.size() * sizeof(float)));
    }
  // Every rank saved the same state; read it where this rank already read.
  TrainingState state = ckpt.state(ctx.rank < ckpt.world ? ctx.rank : 0);
  try {
    ctx.scaler = scalerFromJson(state.lossScaler);
  } catch (const json::exception &e) {
    fail(ckpt.where() + ": malformed loss scaler state: " + e.what());
  }
  ctx.adamSteps = state.adamSteps;
  Progress progress;
  progress.step = state.step;
  progress.dataPosition = state.dataPosition;
  if (ckpt.world != ctx.world || ckpt.stage != m.stage ||
      ckpt.scheduleHash != m.hashText)
    progress.resharded = "saved by a stage-" + std::to_string(ckpt.stage) +
                         " program on " + std::to_string(ckpt.world) +
                         " rank(s), schedule " + ckpt.scheduleHash;

  for (int32_t p = 0; p < int32_t(m.partitions.size()); ++p)
    castOwnedParams(ctx, p);
  return progress;
}
