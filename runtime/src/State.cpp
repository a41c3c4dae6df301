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

#include "Driver.h"
#include "Device.h"
#include "Support.h"

#include <mpi.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <dirent.h>
#include <map>
#include <stdexcept>
#include <sys/stat.h>

using namespace zrt;
using nlohmann::json;

namespace {

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

/// Casts this rank's owned masters into its params (the owned slice of the
/// full buffer at stages 0-2, the shard at stage 3), unless they are the
/// params.
void castOwnedParams(zrt_ctx &ctx, int32_t p) {
  const Manifest &m = *ctx.manifest;
  const PartitionInfo &part = m.partitions[size_t(p)];
  if (part.paramsAreMasters)
    return;
  zrt_cast(ZRT_F32, ctx.buffer<float>(p, kMaster), m.computeDtype,
           ownedParams(ctx, p), m.owned(part, ctx.rank).size());
}

void zeroBuffer(zrt_ctx &ctx, int32_t p, BufferKind kind) {
  const PartitionInfo &part = ctx.manifest->partitions[size_t(p)];
  if (!part.hasBuffer(kind))
    return;
  int64_t bytes = part.counts[kind] * (kind <= kGrads ? ctx.computeBytes : 4);
  device::zero(ctx.buffer(p, kind), bytes);
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
      if (it->second->shape != p.shape)
        fail("tensor '" + p.name + "' has shape " +
             shapeText(it->second->shape) + ", the program's parameter " +
             shapeText(p.shape));
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
      int64_t lo = std::max(need.begin, param.offset);
      int64_t hi = std::min(need.end, param.offset + param.numel);
      const Tensor *t = tensors ? byName[param.name] : nullptr;
      for (int64_t e = lo; e < hi; ++e)
        values[size_t(e - need.begin)] =
            t ? t->data[size_t(e - param.offset)]
              : initValue(param, seed, i, uint64_t(e - param.offset));
    }
    for (BufferKind kind : {kParams, kGrads, kMaster, kExpAvg, kExpAvgSq})
      zeroBuffer(ctx, p, kind);
    // fp32 params are their own masters, written below.
    if (!part.paramsAreMasters)
      device::upload(ctx.buffer<float>(p, kMaster),
                     values.data() + (own.begin - need.begin),
                     own.size() * int64_t(sizeof(float)));
    device::uploadCast(values.data(), m.computeDtype, ctx.buffer(p, kParams),
                       need.size());
  }
}

std::vector<Tensor> zrt::gatherParameters(zrt_ctx &ctx) {
  const Manifest &m = *ctx.manifest;
  std::vector<std::vector<float>> layouts(m.partitions.size());
  for (size_t p = 0; p < m.partitions.size(); ++p) {
    const PartitionInfo &part = m.partitions[p];
    const float *master = ownedMasters(ctx, int32_t(p));
    std::vector<float> &full = layouts[p];
    if (m.stage == 0) {
      if (ctx.rank == 0) {
        full.resize(size_t(part.numel));
        device::download(full.data(), master,
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
    device::download(shard.data(), master, own.size() * int64_t(sizeof(float)));
    if (ctx.rank == 0)
      full.resize(size_t(part.shardNumel) * size_t(ctx.world));
    MPI_Gather(shard.data(), int(part.shardNumel), MPI_FLOAT, full.data(),
               int(part.shardNumel), MPI_FLOAT, 0, MPI_COMM_WORLD);
  }
  std::vector<Tensor> tensors;
  if (ctx.rank != 0)
    return tensors;
  for (const ParamInfo &param : m.params) {
    const float *src = layouts[size_t(param.partition)].data() + param.offset;
    tensors.push_back(
        {param.name, param.shape, std::vector<float>(src, src + param.numel)});
  }
  return tensors;
}

//===----------------------------------------------------------------------===//
// Checkpoints
//===----------------------------------------------------------------------===//

namespace {

/// 2: manifest.json carries its own checksum (manifest_crc32).
constexpr int kCheckpointFormat = 2;
/// The buffers a checkpoint keeps; params are re-derived from the masters
/// (or are the masters).
constexpr BufferKind kSavedBuffers[] = {kMaster, kExpAvg, kExpAvgSq};
constexpr const char *kManifestCrcKey = "manifest_crc32";

std::string rankFileName(int rank) {
  return "rank_" + std::to_string(rank) + ".bin";
}

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

/// The layout a checkpoint must match, as recorded in its manifest.
json layoutJson(const Manifest &m) {
  json parts = json::array();
  for (const PartitionInfo &p : m.partitions) {
    json counts;
    for (int k = 0; k < kNumBufferKinds; ++k)
      if (p.hasBuffer(BufferKind(k)))
        counts[kBufferNames[k]] = p.counts[k];
    parts.push_back({{"name", p.name},
                     {"numel", p.numel},
                     {"padded_numel", p.paddedNumel},
                     {"shard_numel", p.shardNumel},
                     {"buffer_numel", counts}});
  }
  return parts;
}

/// The bytes of a saved fp32 buffer; masters are the padded shard (the
/// whole group at stage 0) also when the params are the masters.
int64_t sectionBytes(const PartitionInfo &p, BufferKind kind) {
  return (kind == kMaster ? p.shardNumel : p.counts[kind]) * 4;
}

/// Where a saved buffer lives on this rank and how many of its bytes: the
/// owned params when they are the masters (the rest of the section is
/// padding), else the whole buffer.
std::pair<char *, int64_t> savedBuffer(const zrt_ctx &ctx, int32_t p,
                                       BufferKind kind) {
  const Manifest &m = *ctx.manifest;
  const PartitionInfo &part = m.partitions[size_t(p)];
  if (kind == kMaster && part.paramsAreMasters)
    return {reinterpret_cast<char *>(ownedMasters(ctx, p)),
            m.owned(part, ctx.rank).size() * int64_t(sizeof(float))};
  return {ctx.buffer(p, kind), sectionBytes(part, kind)};
}

/// The CRC-32 of a rank file without its trailer (which is this value): a
/// CRC over data and its own CRC is a constant, useless in the manifest.
uint32_t contentCrc(const std::string &bytes) {
  return crc32(bytes.data(), bytes.size() >= 4 ? bytes.size() - 4 : 0);
}

bool isFile(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

/// Whether `dir` holds rank files or their temporaries.
bool hasRankFiles(const std::string &dir) {
  DIR *d = ::opendir(dir.c_str());
  if (!d)
    return false;
  bool found = false;
  while (dirent *e = ::readdir(d))
    if (std::strncmp(e->d_name, "rank_", 5) == 0)
      found = true;
  ::closedir(d);
  return found;
}

} // namespace

std::string zrt::sealManifest(nlohmann::json manifest) {
  manifest.erase(kManifestCrcKey);
  std::string body = manifest.dump();
  manifest[kManifestCrcKey] = crc32(body.data(), body.size());
  return manifest.dump(2) + "\n";
}

nlohmann::json zrt::openManifest(const std::string &text,
                                 const std::string &where) {
  json manifest;
  try {
    manifest = json::parse(text);
  } catch (const json::exception &e) {
    fail(where +
         ": malformed manifest.json (corrupt or truncated): " + e.what());
  }
  if (!manifest.is_object())
    fail(where + ": manifest.json is not a JSON object");
  auto it = manifest.find(kManifestCrcKey);
  if (it == manifest.end() || !it->is_number_unsigned()) {
    // Format 1 had no checksum: say so rather than "corrupt".
    auto format = manifest.find("format");
    if (format != manifest.end() && *format != kCheckpointFormat)
      fail(where + " has format " + format->dump() +
           ", this runtime reads format " + std::to_string(kCheckpointFormat));
    fail(where + ": manifest.json has no " + kManifestCrcKey +
         " checksum; the file is corrupt");
  }
  uint32_t recorded = it->get<uint32_t>();
  // The checksum covers the compact dump of everything else: any change of
  // a key or value (a flipped bit that leaves valid JSON) changes it.
  json rest = manifest;
  rest.erase(kManifestCrcKey);
  std::string body = rest.dump();
  uint32_t actual = crc32(body.data(), body.size());
  if (actual != recorded || it->get<uint64_t>() != recorded)
    fail(where + ": manifest.json fails its checksum (crc32 " +
         std::to_string(actual) + ", recorded " + it->dump() +
         "); the manifest is corrupt");
  return rest;
}

std::string zrt::checkpointDir(const std::string &root, int64_t step) {
  return root + "/step_" + std::to_string(step);
}

SavedFile zrt::writeRankCheckpoint(const zrt_ctx &ctx, const std::string &dir,
                                   const Progress &progress) {
  const Manifest &m = *ctx.manifest;
  CheckpointFile file;
  json sections = json::array();
  for (size_t p = 0; p < m.partitions.size(); ++p)
    for (BufferKind kind : kSavedBuffers) {
      const PartitionInfo &part = m.partitions[p];
      int64_t bytes = sectionBytes(part, kind);
      sections.push_back({{"partition", part.name},
                          {"buffer", kBufferNames[kind]},
                          {"offset", file.payload.size()},
                          {"bytes", bytes}});
      size_t at = file.payload.size();
      file.payload.resize(at + size_t(bytes));
      auto [src, have] = savedBuffer(ctx, int32_t(p), kind);
      device::download(&file.payload[at], src, have);
    }
  json header = {{"format", kCheckpointFormat},
                 {"rank", ctx.rank},
                 {"world_size", ctx.world},
                 {"stage", m.stage},
                 {"schedule_hash", m.hashText},
                 {"step", progress.step},
                 {"data_position", progress.dataPosition},
                 {"adam_steps", ctx.adamSteps},
                 {"loss_scaler", scalerJson(ctx.scaler)},
                 {"sections", sections}};
  file.header = header.dump();
  std::string bytes = packCheckpoint(file);
  writeFileAtomic(dir + "/" + rankFileName(ctx.rank), bytes);
  return {contentCrc(bytes), bytes.size()};
}

void zrt::writeCheckpointManifest(const zrt_ctx &ctx, const std::string &root,
                                  const std::string &dir,
                                  const Progress &progress,
                                  const std::vector<SavedFile> &files) {
  const Manifest &m = *ctx.manifest;
  json list = json::array();
  for (size_t r = 0; r < files.size(); ++r)
    list.push_back({{"rank", r},
                    {"file", rankFileName(int(r))},
                    {"bytes", files[r].bytes},
                    {"crc32", files[r].crc}});
  json manifest = {{"format", kCheckpointFormat},
                   {"schedule_hash", m.hashText},
                   {"world_size", ctx.world},
                   {"stage", m.stage},
                   {"compute_dtype", m.computeDtypeName},
                   {"step", progress.step},
                   {"partitions", layoutJson(m)},
                   {"files", list}};
  writeFileAtomic(dir + "/manifest.json", sealManifest(manifest));
  // Only a complete checkpoint becomes the latest.
  std::string name = dir.substr(dir.find_last_of('/') + 1);
  writeFileAtomic(root + "/latest", name + "\n");
}

Progress zrt::readCheckpoint(zrt_ctx &ctx, const std::string &path) {
  const Manifest &m = *ctx.manifest;
  std::string dir = path;
  while (dir.size() > 1 && dir.back() == '/')
    dir.pop_back();
  if (!isFile(dir + "/manifest.json")) {
    if (!isFile(dir + "/latest")) {
      if (hasRankFiles(dir))
        fail("'" + path +
             "' is an incomplete checkpoint: it has rank files but no "
             "manifest.json (its save was interrupted); resume from the "
             "checkpoint directory (its latest) or an earlier step");
      fail("'" + path +
           "' is no checkpoint: it has neither manifest.json "
           "nor latest");
    }
    std::string name = readFile(dir + "/latest");
    while (!name.empty() &&
           std::isspace(static_cast<unsigned char>(name.back())))
      name.pop_back();
    // writeFileAtomic never leaves it empty: something else wrote it.
    if (name.empty() || name.find('/') != std::string::npos)
      fail("'" + dir + "/latest' " +
           (name.empty() ? std::string("is empty")
                         : "names '" + name + "', not a step directory") +
           "; it should name the newest complete checkpoint (e.g. step_10): "
           "--resume a step directory of '" +
           dir + "' instead");
    dir += "/" + name;
  }
  std::string where = "checkpoint '" + dir + "'";
  json manifest = openManifest(readFile(dir + "/manifest.json"), where);

  Progress progress;
  try {
    if (manifest.at("format").get<int>() != kCheckpointFormat)
      fail(where + " has format " + manifest.at("format").dump() +
           ", this runtime reads format " + std::to_string(kCheckpointFormat));
    std::string hash = manifest.at("schedule_hash").get<std::string>();
    int world = manifest.at("world_size").get<int>();
    int stage = manifest.at("stage").get<int>();
    if (world != ctx.world || stage != m.stage)
      fail(where + " was saved by a stage-" + std::to_string(stage) +
           " program on " + std::to_string(world) + " ranks; this is a stage-" +
           std::to_string(m.stage) + " program on " +
           std::to_string(ctx.world) +
           " ranks (export and --init-from move weights between layouts)");
    if (manifest.at("partitions") != layoutJson(m))
      fail(where + " has a different partition layout: saved " +
           manifest.at("partitions").dump() + ", this program " +
           layoutJson(m).dump());
    if (hash != m.hashText)
      fail(where + " was saved by schedule " + hash +
           ", this program is schedule " + m.hashText +
           ": resume with the executable that saved it");
    const json &files = manifest.at("files");
    if (!files.is_array() || files.size() != size_t(ctx.world))
      fail(where + ": manifest.json lists " + std::to_string(files.size()) +
           " rank files for " + std::to_string(ctx.world) + " ranks");
    const json &entry = files.at(size_t(ctx.rank));
    std::string name = dir + "/" + entry.at("file").get<std::string>();
    std::string bytes = readFile(name);
    uint32_t crc = contentCrc(bytes);
    if (bytes.size() != entry.at("bytes").get<uint64_t>() ||
        crc != entry.at("crc32").get<uint32_t>())
      fail(name + " does not match manifest.json (" +
           std::to_string(bytes.size()) + " bytes, crc32 " +
           std::to_string(crc) + "; manifest: " + entry.dump() +
           "); the checkpoint is corrupt or mixed from two saves");
    CheckpointFile file = unpackCheckpoint(bytes, name);
    json header = json::parse(file.header);
    if (header.at("rank").get<int>() != ctx.rank ||
        header.at("schedule_hash").get<std::string>() != m.hashText ||
        header.at("step") != manifest.at("step"))
      fail(name + " belongs to another rank, schedule or step: " +
           file.header.substr(0, 200));

    // The params are re-derived from the masters (or restored in place as
    // the masters) and re-gathered; the gradients start from zero.
    for (int32_t p = 0; p < int32_t(m.partitions.size()); ++p) {
      zeroBuffer(ctx, p, kGrads);
      zeroBuffer(ctx, p, kParams);
    }
    // Every saved buffer, exactly once.
    std::map<std::pair<std::string, std::string>, json> sections;
    for (const json &s : header.at("sections"))
      sections[{s.at("partition").get<std::string>(),
                s.at("buffer").get<std::string>()}] = s;
    for (size_t p = 0; p < m.partitions.size(); ++p)
      for (BufferKind kind : kSavedBuffers) {
        const PartitionInfo &part = m.partitions[p];
        auto it = sections.find({part.name, kBufferNames[kind]});
        if (it == sections.end())
          fail(name + " lacks buffer " + kBufferNames[kind] + " of '" +
               part.name + "'");
        uint64_t offset = it->second.at("offset").get<uint64_t>();
        uint64_t size = it->second.at("bytes").get<uint64_t>();
        if (int64_t(size) != sectionBytes(part, kind) ||
            offset + size > file.payload.size())
          fail(name + ": buffer " + kBufferNames[kind] + " of '" + part.name +
               "' has the wrong size");
        auto [dst, have] = savedBuffer(ctx, int32_t(p), kind);
        device::upload(dst, file.payload.data() + offset, have);
      }
    ctx.scaler = scalerFromJson(header.at("loss_scaler"));
    ctx.adamSteps = header.at("adam_steps").get<int64_t>();
    progress.step = header.at("step").get<int64_t>();
    progress.dataPosition = header.at("data_position").get<int64_t>();
  } catch (const json::exception &e) {
    fail(where + ": malformed checkpoint metadata: " + e.what());
  }

  for (int32_t p = 0; p < int32_t(m.partitions.size()); ++p)
    castOwnedParams(ctx, p);
  return progress;
}
