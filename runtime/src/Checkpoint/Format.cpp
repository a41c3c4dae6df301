//===- Format.cpp - The files of a checkpoint -----------------------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "Checkpoint/Format.h"
#include "Data/Files.h"
#include "zero_rt/adafactor.h"
#include "zero_rt/optimizers.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <optional>
#include <type_traits>

using namespace zrt;
using nlohmann::json;

namespace {

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
/// whole group at stage 0), also when the params are the masters; 8-bit
/// states are the buffer's own bytes (absmaxes and codes).
int64_t sectionBytes(const Manifest &m, const PartitionInfo &p,
                     BufferKind kind) {
  if (isRawState(m, kind))
    return m.bufferBytes(p, kind);
  return (kind == kMaster ? p.shardNumel : p.counts[kind]) * 4;
}

template <typename T>
struct IsVector : std::false_type {};
template <typename T>
struct IsVector<std::vector<T>> : std::true_type {};
template <typename T>
struct IsOptional : std::false_type {};
template <typename T>
struct IsOptional<std::optional<T>> : std::true_type {};

/// A manifest.def object (hf_model, peft) as the program's manifest writes
/// it: numbers, strings, vectors and objects of them, an empty optional
/// field left out.
template <typename T>
json toJson(const T &v) {
  if constexpr (std::is_arithmetic_v<T> || std::is_same_v<T, std::string>) {
    return v;
  } else if constexpr (IsVector<T>::value) {
    json array = json::array();
    for (const auto &element : v)
      array.push_back(toJson(element));
    return array;
  } else {
    json object = json::object();
    manifest::visitFields(
        v, [&](const char *key, manifest::Presence, const auto &field) {
          using F = std::decay_t<decltype(field)>;
          if constexpr (IsOptional<F>::value) {
            if (field)
              object[key] = toJson(*field);
          } else {
            object[key] = toJson(field);
          }
        });
    return object;
  }
}

/// Reads what toJson wrote; throws json::exception where `j` differs.
template <typename T>
void fromJson(const json &j, T &v) {
  if constexpr (std::is_arithmetic_v<T> || std::is_same_v<T, std::string>) {
    v = j.get<T>();
  } else if constexpr (IsVector<T>::value) {
    for (const json &element : j)
      fromJson(element, v.emplace_back());
  } else {
    manifest::visitFields(v, [&](const char *key, manifest::Presence presence,
                                 auto &field) {
      using F = std::decay_t<decltype(field)>;
      if constexpr (IsOptional<F>::value) {
        if (j.contains(key))
          fromJson(j.at(key), field.emplace());
      } else if (presence == manifest::Presence::Required || j.contains(key)) {
        fromJson(j.at(key), field);
      }
    });
  }
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
      int64_t bytes = sectionBytes(m, part, kind);
      sections.push_back({{checkpoint::Section::partition, part.name},
                          {checkpoint::Section::buffer, kBufferNames[kind]},
                          {checkpoint::Section::offset, file.payload.size()},
                          {checkpoint::Section::bytes, bytes}});
      size_t at = file.payload.size();
      file.payload.resize(at + size_t(bytes));
      fill(int32_t(p), kind, &file.payload[at], bytes);
    }
  using checkpoint::Header;
  json header = {{Header::format, kCheckpointFormat},
                 {Header::rank, rank},
                 {Header::worldSize, world},
                 {Header::stage, m.stage},
                 {Header::scheduleHash, m.hashText},
                 {Header::step, state.step},
                 {Header::dataPosition, state.dataPosition},
                 {Header::adamSteps, state.adamSteps},
                 {Header::lossScaler, state.lossScaler},
                 {Header::sections, sections}};
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
  manifest.erase(checkpoint::ManifestFile::crc32);
  std::string body = manifest.dump();
  manifest[checkpoint::ManifestFile::crc32] = crc32(body.data(), body.size());
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
  auto it = manifest.find(checkpoint::ManifestFile::crc32);
  if (it == manifest.end() || !it->is_number_unsigned()) {
    // Format 1 had no checksum: say so rather than "corrupt".
    auto format = manifest.find(checkpoint::ManifestFile::format);
    if (format != manifest.end() && format->is_number_integer() && *format < 2)
      fail(where + " has format " + format->dump() +
           ", this runtime reads formats 2 and " +
           std::to_string(kCheckpointFormat));
    fail(where + ": manifest.json has no " + checkpoint::ManifestFile::crc32 +
         " checksum; the file is corrupt");
  }
  uint32_t recorded = it->get<uint32_t>();
  // The checksum covers the compact dump of everything else: any change of
  // a key or value (a flipped bit that leaves valid JSON) changes it.
  json rest = manifest;
  rest.erase(checkpoint::ManifestFile::crc32);
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
                      p.frozen, p.muon, p.expertParallel});
  return params;
}

static AdafactorShape adafactorShapeOf(const SavedParam &p) {
  return adafactorShape(p.shape.data(), int32_t(p.shape.size()));
}

int64_t zrt::layoutStateValues(optimizers::Kind optimizer, BufferKind kind,
                               const SavedParam &p) {
  if (p.frozen)
    return 0;
  if (optimizers::isFactored(optimizer, kind)) {
    AdafactorShape shape = adafactorShapeOf(p);
    return shape.factored ? shape.factorCount() : p.numel;
  }
  switch (optimizers::statePart(optimizer, kind)) {
  case optimizers::StatePart::Matrices:
    return p.muon ? p.numel : 0;
  case optimizers::StatePart::Others:
    return p.muon ? 0 : p.numel;
  case optimizers::StatePart::All:
    break;
  }
  return p.numel;
}

std::vector<StateRun>
zrt::layoutStateRuns(optimizers::Kind optimizer, BufferKind kind,
                     const std::vector<SavedParam> &params, int32_t group,
                     int64_t begin, int64_t end) {
  std::vector<size_t> order;
  for (size_t i = 0; i < params.size(); ++i)
    if (params[i].group == group && !params[i].frozen)
      order.push_back(i);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return params[a].offset < params[b].offset;
  });
  bool factored = optimizers::isFactored(optimizer, kind);
  optimizers::StatePart part = optimizers::statePart(optimizer, kind);
  std::vector<StateRun> runs;
  // Adafactor: each tensor the range touches, in order, its statistics
  // whole or its held elements. Muon: each part's held elements (its
  // matrices', or AdamW's parameters'), in order.
  int64_t at = 0;
  for (size_t i : order) {
    const SavedParam &p = params[i];
    int64_t lo = std::max(begin, p.offset),
            hi = std::min(end, p.offset + p.numel);
    if (lo >= hi)
      continue;
    if (factored && adafactorShapeOf(p).factored) {
      int64_t count = adafactorShapeOf(p).factorCount();
      runs.push_back({i, 0, count, at});
      at += count;
    } else if (factored ||
               p.muon == (part == optimizers::StatePart::Matrices)) {
      runs.push_back({i, lo - p.offset, hi - lo, at});
      at += hi - lo;
    }
  }
  return runs;
}

json zrt::layoutJson(const Manifest &m) {
  json parts = json::array();
  for (const PartitionInfo &p : m.partitions) {
    json counts;
    // The host copies of an offloaded optimizer hold no state.
    for (int k = 0; k < kNumBufferKinds; ++k)
      if ((k <= kMaster || optimizers::isStateBuffer(BufferKind(k))) &&
          p.hasBuffer(BufferKind(k)))
        counts[kBufferNames[k]] = p.counts[k];
    using checkpoint::Partition;
    parts.push_back({{Partition::name, p.name},
                     {Partition::numel, p.numel},
                     {Partition::paddedNumel, p.paddedNumel},
                     {Partition::shardNumel, p.shardNumel},
                     {Partition::bufferNumel, counts}});
    if (p.expert && m.expertParallel > 1)
      parts.back()[Partition::expert] = true;
  }
  return parts;
}

json zrt::optimizerJson(const Manifest &m) {
  using checkpoint::Optimizer;
  json o = {{Optimizer::kind, manifest::valueOf(m.optimizer)},
            {Optimizer::lr, m.lr},
            {Optimizer::lrSchedule,
             m.scheduleText.empty() ? "none" : m.scheduleText}};
  // Every row, whatever the kind.
#define ZRT_HYPER_PARAM(name, type, default, check)                            \
  o[Optimizer::name] =                                                         \
      hyperParamJson(optimizers::HyperParam::name,                             \
                     m.hyperParam(optimizers::HyperParam::name));
#include "zero_rt/optimizers.def"
  json groups = json::object();
  for (const ParamInfo &p : m.params)
    if (p.weightDecay >= 0)
      groups[p.name] = p.weightDecay;
  if (!groups.empty())
    o[Optimizer::paramWeightDecay] = std::move(groups);
  if (m.int8States())
    o[Optimizer::states] = optimizers::precisionName(m.statePrecision);
  return o;
}

json zrt::hyperParamJson(optimizers::HyperParam p, double value) {
  switch (optimizers::hyperParamRow(p).type) {
  case optimizers::HyperParamType::Bool:
    return value != 0;
  case optimizers::HyperParamType::Int:
  case optimizers::HyperParamType::MuonAdjustLr:
    return int64_t(value);
  case optimizers::HyperParamType::Double:
    break;
  }
  return value;
}

double zrt::hyperParamValue(const json &j) {
  return j.is_boolean() ? double(j.get<bool>()) : j.get<double>();
}

std::string zrt::checkpointManifest(const Manifest &m, int world, int64_t step,
                                    const std::vector<SavedFile> &files) {
  json list = json::array();
  for (size_t r = 0; r < files.size(); ++r)
    list.push_back({{checkpoint::RankFile::rank, r},
                    {checkpoint::RankFile::file, rankFileName(int(r))},
                    {checkpoint::RankFile::bytes, files[r].bytes},
                    {checkpoint::RankFile::crc32, files[r].crc}});
  json params = json::array();
  for (const SavedParam &p : savedParams(m)) {
    using checkpoint::Param;
    json param = {{Param::name, p.name},
                  {Param::shape, p.shape},
                  {Param::partition, p.group},
                  {Param::offset, p.offset},
                  {Param::computeDtype, p.computeDtype}};
    if (p.rows >= 0)
      param[Param::rows] = p.rows;
    if (p.frozen)
      param[Param::frozen] = true;
    if (p.muon)
      param[Param::muon] = true;
    if (p.expertParallel > 1)
      param[Param::expertParallel] = p.expertParallel;
    params.push_back(std::move(param));
  }
  using checkpoint::ManifestFile;
  json manifest = {{ManifestFile::format, kCheckpointFormat},
                   {ManifestFile::scheduleHash, m.hashText},
                   {ManifestFile::worldSize, world},
                   {ManifestFile::stage, m.stage},
                   {ManifestFile::precision, m.precision},
                   {ManifestFile::optimizer, optimizerJson(m)},
                   {ManifestFile::step, step},
                   {ManifestFile::partitions, layoutJson(m)},
                   {ManifestFile::params, params},
                   {ManifestFile::files, list}};
  if (m.hfModel)
    manifest[ManifestFile::hfModel] = toJson(*m.hfModel);
  if (m.peft)
    manifest[ManifestFile::peft] = toJson(*m.peft);
  // Each rank file holds its expert set member's experts under the shared
  // names: without these, a reader would take rank 0's for all of them.
  if (m.expertParallel > 1) {
    manifest[ManifestFile::expertParallel] = m.expertParallel;
    manifest[ManifestFile::expertPlacement] =
        manifest::valueOf(m.expertPlacement == ZRT_EXPERT_STRIDED
                              ? manifest::ExpertPlacement::Strided
                              : manifest::ExpertPlacement::Contiguous);
  }
  return sealManifest(manifest);
}

std::optional<manifest::HfModel>
zrt::savedHfModel(const nlohmann::json &manifest, const std::string &where) {
  auto it = manifest.find(checkpoint::ManifestFile::hfModel);
  if (it == manifest.end())
    return std::nullopt;
  manifest::HfModel hf;
  try {
    fromJson(*it, hf);
  } catch (const json::exception &e) {
    fail(where + ": malformed " + checkpoint::ManifestFile::hfModel + ": " +
         e.what());
  }
  return hf;
}

std::optional<manifest::Peft> zrt::savedPeft(const nlohmann::json &manifest,
                                             const std::string &where) {
  auto it = manifest.find(checkpoint::ManifestFile::peft);
  if (it == manifest.end())
    return std::nullopt;
  manifest::Peft peft;
  try {
    fromJson(*it, peft);
  } catch (const json::exception &e) {
    fail(where + ": malformed " + checkpoint::ManifestFile::peft + ": " +
         e.what());
  }
  return peft;
}
