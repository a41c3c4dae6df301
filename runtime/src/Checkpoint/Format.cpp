//===- Format.cpp - The files of a checkpoint -----------------------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "Checkpoint/Format.h"
#include "Files.h"

#include <cctype>
#include <cstdio>
#include <cstring>

using namespace zrt;
using nlohmann::json;

namespace {

constexpr const char *kManifestCrcKey = "manifest_crc32";
constexpr char kCheckpointMagic[8] = {'Z', 'R', 'T', 'C', 'K', 'P', 'T', '1'};

void putLe(std::string &out, uint64_t v, int bytes) {
  for (int k = 0; k < bytes; ++k)
    out += char((v >> (8 * k)) & 0xff);
}

uint64_t getLe(const std::string &in, size_t at, int bytes) {
  uint64_t v = 0;
  for (int k = 0; k < bytes; ++k)
    v |= uint64_t(static_cast<unsigned char>(in[at + size_t(k)])) << (8 * k);
  return v;
}

/// The bytes of a saved buffer's section: masters are the padded shard (the
/// whole group at stage 0), also when the params are the masters.
int64_t sectionBytes(const PartitionInfo &p, BufferKind kind) {
  return (kind == kMaster ? p.shardNumel : p.counts[kind]) * 4;
}

} // namespace

std::string zrt::checkpointDir(const std::string &root, int64_t step) {
  return root + "/step_" + std::to_string(step);
}

std::string zrt::rankFileName(int rank) {
  return "rank_" + std::to_string(rank) + ".bin";
}

uint32_t zrt::rankFileCrc(const std::string &bytes) {
  // A CRC over data and its own CRC is a constant, useless in the manifest.
  return crc32(bytes.data(), bytes.size() >= 4 ? bytes.size() - 4 : 0);
}

bool zrt::isStepName(const char *name) {
  if (std::strncmp(name, "step_", 5) != 0 || !name[5])
    return false;
  for (const char *p = name + 5; *p; ++p)
    if (!std::isdigit(static_cast<unsigned char>(*p)))
      return false;
  return true;
}

//===----------------------------------------------------------------------===//
// Rank files
//===----------------------------------------------------------------------===//

std::string zrt::packCheckpoint(const CheckpointFile &file) {
  std::string out(kCheckpointMagic, sizeof(kCheckpointMagic));
  out.reserve(16 + file.header.size() + file.payload.size() + 4);
  putLe(out, file.header.size(), 8);
  out += file.header;
  out += file.payload;
  putLe(out, crc32(out.data(), out.size()), 4);
  return out;
}

CheckpointFile zrt::unpackCheckpoint(const std::string &bytes,
                                     const std::string &name) {
  if (bytes.size() < 20 ||
      bytes.compare(0, 8, kCheckpointMagic, sizeof(kCheckpointMagic)) != 0)
    fail(name + ": not a zero-mlir checkpoint file (bad magic or truncated)");
  uint32_t stored = uint32_t(getLe(bytes, bytes.size() - 4, 4));
  uint32_t actual = crc32(bytes.data(), bytes.size() - 4);
  if (stored != actual) {
    char msg[96];
    std::snprintf(msg, sizeof(msg),
                  ": checksum mismatch (stored %08x, computed %08x)", stored,
                  actual);
    fail(name + msg + "; the file is corrupt or truncated");
  }
  uint64_t headerLen = getLe(bytes, 8, 8);
  if (headerLen > bytes.size() - 20)
    fail(name + ": header length exceeds the file");
  CheckpointFile file;
  file.header = bytes.substr(16, headerLen);
  file.payload = bytes.substr(16 + headerLen, bytes.size() - 20 - headerLen);
  return file;
}

std::string zrt::packRankFile(
    const Manifest &m, int rank, int world, const TrainingState &state,
    const std::function<void(int32_t, BufferKind, char *, int64_t)> &fill) {
  CheckpointFile file;
  json sections = json::array();
  for (size_t p = 0; p < m.partitions.size(); ++p)
    for (BufferKind kind : kSavedBuffers) {
      const PartitionInfo &part = m.partitions[p];
      if (!isSaved(part, kind))
        continue;
      int64_t bytes = sectionBytes(part, kind);
      sections.push_back({{"partition", part.name},
                          {"buffer", kBufferNames[kind]},
                          {"offset", file.payload.size()},
                          {"bytes", bytes}});
      size_t at = file.payload.size();
      file.payload.resize(at + size_t(bytes));
      fill(int32_t(p), kind, &file.payload[at], bytes);
    }
  json header = {{"format", kCheckpointFormat},
                 {"rank", rank},
                 {"world_size", world},
                 {"stage", m.stage},
                 {"schedule_hash", m.hashText},
                 {"step", state.step},
                 {"data_position", state.dataPosition},
                 {"adam_steps", state.adamSteps},
                 {"loss_scaler", state.lossScaler},
                 {"sections", sections}};
  file.header = header.dump();
  return packCheckpoint(file);
}

//===----------------------------------------------------------------------===//
// manifest.json
//===----------------------------------------------------------------------===//

// The checkpoint files' strings are names from the program's manifest or a
// checkpoint's, both parsed JSON and so UTF-8 (dump() throws on anything
// else); no path of the command line goes into them.
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
    if (format != manifest.end() && format->is_number_integer() && *format < 2)
      fail(where + " has format " + format->dump() +
           ", this runtime reads formats 2 and " +
           std::to_string(kCheckpointFormat));
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

std::vector<SavedParam> zrt::savedParams(const Manifest &m) {
  std::vector<SavedParam> params;
  for (const ParamInfo &p : m.params)
    params.push_back({p.name, p.shape, p.numel, p.partition, p.offset, p.rows,
                      m.partitions[size_t(p.partition)].computeDtypeName,
                      p.frozen});
  return params;
}

json zrt::layoutJson(const Manifest &m) {
  json parts = json::array();
  for (const PartitionInfo &p : m.partitions) {
    json counts;
    // The host copies of an offloaded optimizer hold no state.
    for (int k = 0; k <= kExpAvgSq; ++k)
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

json zrt::optimizerJson(const Manifest &m) {
  json o = {{"kind", m.adamw ? "adamw" : "adam"},
            {"lr", m.lr},
            {"beta1", m.beta1},
            {"beta2", m.beta2},
            {"eps", m.eps},
            {"weight_decay", m.weightDecay},
            {"bias_correction", m.biasCorrection},
            {"lr_schedule", m.scheduleText.empty() ? "none" : m.scheduleText}};
  json groups = json::object();
  for (const ParamInfo &p : m.params)
    if (p.weightDecay >= 0)
      groups[p.name] = p.weightDecay;
  if (!groups.empty())
    o["param_weight_decay"] = std::move(groups);
  return o;
}

std::string zrt::checkpointManifest(const Manifest &m, int world, int64_t step,
                                    const std::vector<SavedFile> &files) {
  json list = json::array();
  for (size_t r = 0; r < files.size(); ++r)
    list.push_back({{"rank", r},
                    {"file", rankFileName(int(r))},
                    {"bytes", files[r].bytes},
                    {"crc32", files[r].crc}});
  json params = json::array();
  for (const SavedParam &p : savedParams(m)) {
    json param = {{"name", p.name},
                  {"shape", p.shape},
                  {"partition", p.group},
                  {"offset", p.offset},
                  {"compute_dtype", p.computeDtype}};
    if (p.rows >= 0)
      param["rows"] = p.rows;
    if (p.frozen)
      param["frozen"] = true;
    params.push_back(std::move(param));
  }
  json manifest = {{"format", kCheckpointFormat},
                   {"schedule_hash", m.hashText},
                   {"world_size", world},
                   {"stage", m.stage},
                   {"precision", m.precision},
                   {"optimizer", optimizerJson(m)},
                   {"step", step},
                   {"partitions", layoutJson(m)},
                   {"params", params},
                   {"files", list}};
  if (m.hfModel) {
    json tied = json::array();
    for (const manifest::TiedName &t : m.hfModel->tied)
      tied.push_back({{"name", t.name}, {"param", t.param}});
    manifest["hf_model"] = {{"config", m.hfModel->config}, {"tied", tied}};
  }
  if (m.peft) {
    json layers = json::array();
    for (const manifest::Lora &l : m.peft->layers)
      layers.push_back({{"base", l.base},
                        {"a", l.a},
                        {"b", l.b},
                        {"scaling", l.scaling},
                        {"merged_key", l.mergedKey},
                        {"a_key", l.aName},
                        {"b_key", l.bName}});
    manifest["peft"] = {{"config", m.peft->config},
                        {"prefix", m.peft->prefix},
                        {"layers", layers}};
  }
  return sealManifest(manifest);
}

std::optional<manifest::HfModel>
zrt::savedHfModel(const nlohmann::json &manifest, const std::string &where) {
  if (!manifest.contains("hf_model"))
    return std::nullopt;
  manifest::HfModel hf;
  try {
    const json &saved = manifest.at("hf_model");
    hf.config = saved.at("config").get<std::string>();
    for (const json &t : saved.at("tied"))
      hf.tied.push_back(
          {t.at("name").get<std::string>(), t.at("param").get<std::string>()});
  } catch (const json::exception &e) {
    fail(where + ": malformed hf_model: " + e.what());
  }
  return hf;
}

std::optional<manifest::Peft> zrt::savedPeft(const nlohmann::json &manifest,
                                             const std::string &where) {
  if (!manifest.contains("peft"))
    return std::nullopt;
  manifest::Peft peft;
  try {
    const json &saved = manifest.at("peft");
    peft.config = saved.at("config").get<std::string>();
    peft.prefix = saved.at("prefix").get<std::string>();
    for (const json &l : saved.at("layers")) {
      manifest::Lora &layer = peft.layers.emplace_back();
      layer.base = l.at("base").get<std::string>();
      layer.a = l.at("a").get<std::string>();
      layer.b = l.at("b").get<std::string>();
      layer.scaling = l.at("scaling").get<double>();
      layer.mergedKey = l.at("merged_key").get<std::string>();
      layer.aName = l.at("a_key").get<std::string>();
      layer.bName = l.at("b_key").get<std::string>();
    }
  } catch (const json::exception &e) {
    fail(where + ": malformed peft: " + e.what());
  }
  return peft;
}
