//===- Rank.cpp - This rank's part of a checkpoint ------------------------===//
//
// Part of the zero-mlir project.
//
// The 16-bit params are always the cast of the fp32 masters, so checkpoints
// hold only each rank's master and moment shards; resuming casts them back
// and re-gathers the params as the step's post-step all-gather would. fp32
// params are their own masters: their owned part is saved as the "master"
// section (padded to the shard with zeros, as a master buffer's padding
// is) and restored in place. A frozen partition has no moments; its owned
// params are saved as its "master" section, 16-bit ones widened exactly, and
// restored bitwise. bf16 optimizer states are saved widened exactly to the
// fp32 sections and rounded back on resume: bitwise the same states, under
// any resharding (a checkpoint of fp32 states resumed with bf16 ones rounds
// them to nearest even). Block-wise 8-bit states are saved as their own
// bytes (absmaxes and codes) and restored bitwise into the layout that
// saved them; they are not resharded.
//
//===----------------------------------------------------------------------===//

#include "Checkpoint/Rank.h"
#include "Checkpoint/Reader.h"
#include "Data/Files.h"
#include "Driver/State.h"
#include "Support/Half.h"

#include <nlohmann/json.hpp>

using namespace zrt;
using nlohmann::json;

namespace {

json scalerJson(const zrt_loss_scaler &s) {
  json j;
#define ZRT_CHECKPOINT_SCALER(member, key, presence, what) j[key] = s.member;
#include "zero_rt/checkpoint.def"
  return j;
}

zrt_loss_scaler scalerFromJson(const json &j) {
  zrt_loss_scaler s{};
#define ZRT_CHECKPOINT_SCALER(member, key, presence, what)                     \
  s.member = j.at(key).get<decltype(s.member)>();
#include "zero_rt/checkpoint.def"
  return s;
}

/// Where saved buffer `kind` of group `p` lives on this rank: the owned
/// masters when the params are the masters (the rest of the section is
/// padding), else the buffer.
float *savedBuffer(const zrt_ctx &ctx, int32_t p, BufferKind kind) {
  return kind == kMaster ? ownedMasters(ctx, p) : ctx.buffer<float>(p, kind);
}

/// Whether buffer `kind` holds bf16 optimizer states (saved as fp32).
bool isBf16State(const Manifest &m, BufferKind kind) {
  return m.bf16States() && optimizers::isStateBuffer(kind);
}

} // namespace

SavedFile zrt::writeRankCheckpoint(const zrt_ctx &ctx, const std::string &dir,
                                   const Progress &progress) {
  const Manifest &m = *ctx.manifest;
  TrainingState state{progress.step, progress.dataPosition, ctx.optimizerSteps,
                      scalerJson(ctx.scaler)};
  std::string bytes = packRankFile(
      m, ctx.rank, m.shardGroupSize(), state,
      [&](int32_t p, BufferKind kind, char *dst, int64_t size) {
        const PartitionInfo &part = m.partitions[size_t(p)];
        if (kind == kMaster && (part.frozen || part.masters16())) {
          loadOwnedMasters(ctx, p, reinterpret_cast<float *>(dst));
          return;
        }
        if (isRawState(m, kind)) {
          loadBuffer(ctx, p, kind, dst, ctx.buffer(p, kind), size);
          return;
        }
        if (isBf16State(m, kind)) {
          int64_t n = size / 4;
          std::vector<uint16_t> bits(static_cast<size_t>(n));
          loadBuffer(ctx, p, kind, bits.data(), ctx.buffer(p, kind), n * 2);
          float *out = reinterpret_cast<float *>(dst);
          for (int64_t i = 0; i < n; ++i)
            out[i] = bf16ToFloat(bits[size_t(i)]);
          return;
        }
        int64_t have = kind == kMaster && part.paramsAreMasters
                           ? m.owned(part, ctx.rank).size() * 4
                           : size;
        loadBuffer(ctx, p, kind == kMaster ? masterKind(ctx, p) : kind, dst,
                   savedBuffer(ctx, p, kind), have);
      });
  writeFileAtomic(dir + "/" + rankFileName(ctx.rank), bytes);
  return {rankFileCrc(bytes), bytes.size()};
}

void zrt::writeCheckpointManifest(const zrt_ctx &ctx, const std::string &root,
                                  const std::string &dir,
                                  const Progress &progress,
                                  const std::vector<SavedFile> &files) {
  writeFileAtomic(dir + "/manifest.json",
                  checkpointManifest(*ctx.manifest, int(files.size()),
                                     progress.step, files));
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
      const PartitionInfo &part = m.partitions[size_t(p)];
      if (!isSaved(part, kind))
        continue;
      if (isRawState(m, kind)) {
        int64_t bytes = m.bufferBytes(part, kind);
        // The saving program and world: this rank's own section is its
        // buffer (the only resume of 8-bit states, checkSameModel).
        if (ckpt.scheduleHash == m.hashText &&
            ckpt.world == m.shardGroupSize() && ckpt.stage == m.stage) {
          std::string_view raw =
              ckpt.rawSection(ctx.rank, part.name, kind, bytes);
          storeBuffer(ctx, p, kind, ctx.buffer(p, kind), raw.data(), bytes);
          continue;
        }
        // Another layout: each parameter's values by name, packed as this
        // rank's update walks them.
        std::vector<float> state = loadLayoutState(ckpt, m, p, ctx.rank, kind);
        storeBuffer(ctx, p, kind, ctx.buffer(p, kind), state.data(), bytes);
        continue;
      }
      remapOwned(ckpt, m, p, ctx.rank, kind, values);
      if (kind == kMaster && (part.frozen || part.masters16())) {
        storeOwnedMasters(ctx, p, values.data());
      } else if (isBf16State(m, kind)) {
        std::vector<uint16_t> bits(values.size());
        for (size_t i = 0; i < values.size(); ++i)
          bits[i] = floatToBf16(values[i]);
        storeBuffer(ctx, p, kind, ctx.buffer(p, kind), bits.data(),
                    int64_t(bits.size() * 2));
      } else
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
  ctx.optimizerSteps = state.adamSteps;
  Progress progress;
  progress.step = state.step;
  progress.dataPosition = state.dataPosition;
  if (ckpt.world != m.shardGroupSize() || ckpt.stage != m.stage ||
      ckpt.scheduleHash != m.hashText)
    progress.resharded = "saved by a stage-" + std::to_string(ckpt.stage) +
                         " program on " + std::to_string(ckpt.world) +
                         " rank(s), schedule " + ckpt.scheduleHash;

  for (int32_t p = 0; p < int32_t(m.partitions.size()); ++p)
    castOwnedParams(ctx, p);
  return progress;
}
