//===- Reader.cpp - Reading checkpoints of any layout ---------------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "Checkpoint/Reader.h"
#include "Checkpoint/Directory.h"
#include "Data/Files.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <dirent.h>
#include <string_view>

using namespace zrt;
using nlohmann::json;

namespace {

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

/// A double as the shortest text that reads back as itself.
std::string numberText(double v) { return json(v).dump(); }

/// How the saved learning-rate schedule `a` differs from this program's
/// `b` (optimizerJson's texts: "none" or the manifest's schedule object),
/// naming the kind or the first parameter that differs; empty when equal.
std::string scheduleDifference(const std::string &a, const std::string &b) {
  if (a == b)
    return "";
  const char *kKind = manifest::Schedule::kindKey;
  if (a == "none" || b == "none")
    return a == "none" ? "none, this program's is " +
                             json::parse(b).at(kKind).get<std::string>()
                       : json::parse(a).at(kKind).get<std::string>() +
                             ", this program has none";
  json x = json::parse(a), y = json::parse(b);
  // A total_num_steps of "auto" (the run's length) is left out.
  for (json *o : {&x, &y})
    if (!o->contains(manifest::Schedule::totalNumStepsKey))
      (*o)[manifest::Schedule::totalNumStepsKey] = "auto";
  std::string kind = x.at(kKind).get<std::string>();
  if (kind != y.at(kKind).get<std::string>())
    return kind + ", this program's is " + y.at(kKind).get<std::string>();
  for (const auto &[key, value] : x.items()) {
    const json &mine = y.at(key);
    auto text = [](const json &v) {
      return v.is_number_float() ? numberText(v.get<double>()) : v.dump();
    };
    if (value.is_number() && mine.is_number()
            ? value.get<double>() != mine.get<double>()
            : value != mine)
      return kind + " with " + key + " " + text(value) +
             ", this program's has " + key + " " + text(mine);
  }
  return kind + ", this program's has other parameters";
}

/// The index of the first NaN or infinity among the `n` floats at `bytes`
/// (any alignment), or -1.
int64_t firstNonFinite(const char *bytes, int64_t n) {
  for (int64_t k = 0; k < n; ++k) {
    float v;
    std::memcpy(&v, bytes + 4 * k, 4);
    if (!std::isfinite(v))
      return k;
  }
  return -1;
}

/// Names a non-finite saved value: training from it would make the first
/// loss NaN, which the driver would blame on the learning rate.
std::string nonFiniteText(const std::string &file, const std::string &what,
                          BufferKind kind, int64_t element, const char *at) {
  float v;
  std::memcpy(&v, at, 4);
  return file + ": " + what + " " + kBufferNames[kind] + " element " +
         std::to_string(element) + " is " +
         (std::isnan(v) ? "NaN" : "infinite") +
         "; a checkpoint's masters and Adam moments must be finite";
}

/// Each rank's file holds its own experts under the same names: only the
/// layout that saved them resumes them. Which side splits experts is
/// named: the checkpoint's record, or a parameter that holds every expert
/// of one that program `m` splits.
void checkExpertLayout(const CheckpointReader &ckpt, const Manifest &m) {
  if ((m.expertParallel == 1 && ckpt.expertParallel == 1) ||
      (ckpt.scheduleHash == m.hashText && ckpt.world == m.worldSize &&
       ckpt.stage == m.stage))
    return;
  std::string saved = ckpt.where() + " was saved by a stage-" +
                      std::to_string(ckpt.stage) + " program on " +
                      std::to_string(ckpt.world) + " rank(s), schedule " +
                      ckpt.scheduleHash;
  const char *move = ": resume with the program and world that saved it, "
                     "or consolidate it (zero-ckpt consolidate -o) and "
                     "start this program from the weights with --init-from";
  if (ckpt.expertParallel > 1 && m.expertParallel == 1)
    fail(saved + ", its " + ckpt.expertText() +
         "; this program has no expert parallelism, and resharding an "
         "expert-parallel checkpoint is not supported" +
         move);
  for (const ParamInfo &p : m.params) {
    int64_t src = ckpt.find(p.name);
    if (ckpt.expertParallel > 1 || p.expertParallel == 1 || src < 0)
      continue;
    const std::vector<int64_t> &shape = ckpt.params[size_t(src)].shape;
    if (!p.shape.empty() && shape.size() == p.shape.size() &&
        shape[0] == p.shape[0] * p.expertParallel)
      fail(saved + " without expert parallelism (its parameter '" + p.name +
           "' " + shapeText(shape) +
           " holds every expert); this program splits experts over " +
           std::to_string(m.expertParallel) + " ranks (expert_parallel, " +
           shapeText(p.shape) +
           " a rank), and moving a checkpoint into expert parallelism is "
           "not supported" +
           move);
  }
  fail(saved + (ckpt.expertParallel > 1 ? ", its " + ckpt.expertText() : "") +
       "; this program splits experts over " +
       std::to_string(m.expertParallel) +
       " ranks (expert_parallel), and resharding an expert-parallel "
       "checkpoint is not supported" +
       move);
}

} // namespace

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

CheckpointReader::CheckpointReader(const std::string &path) {
  std::string dir = path;
  while (dir.size() > 1 && dir.back() == '/')
    dir.pop_back();
  if (!isRegularFile(dir + "/manifest.json")) {
    if (!isRegularFile(dir + "/latest")) {
      if (hasRankFiles(dir))
        fail("'" + path +
             "' is an incomplete checkpoint: it has rank files but no "
             "manifest.json (its save was interrupted); resume from the "
             "checkpoint directory (its latest) or an earlier step");
      fail("'" + path +
           "' is no checkpoint: it has neither manifest.json "
           "nor latest");
    }
    std::string name = readLatest(dir);
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
  stepDir = dir;
  whereText = "checkpoint '" + dir + "'";
  json_ = openManifest(readFile(dir + "/manifest.json"), whereText);
  using checkpoint::ManifestFile;
  try {
    format = json_.at(ManifestFile::format).get<int>();
    if (format != 2 && format != kCheckpointFormat)
      fail(whereText + " has format " + json_.at(ManifestFile::format).dump() +
           ", this runtime reads formats 2 and " +
           std::to_string(kCheckpointFormat));
    scheduleHash = json_.at(ManifestFile::scheduleHash).get<std::string>();
    world = json_.at(ManifestFile::worldSize).get<int>();
    stage = json_.at(ManifestFile::stage).get<int>();
    step = json_.at(ManifestFile::step).get<int64_t>();
    // Format 2 may record no optimizer; only int8 states write `states`.
    auto optimizer = json_.find(ManifestFile::optimizer);
    int8States =
        optimizer != json_.end() &&
        optimizer->value(checkpoint::Optimizer::states, json()) ==
            optimizers::precisionName(optimizers::StatePrecision::Int8);
    if (optimizer != json_.end())
      if (std::optional<manifest::OptimizerKind> kind =
              manifest::enumOf<manifest::OptimizerKind>(optimizer->value(
                  checkpoint::Optimizer::kind, std::string()))) {
        this->optimizer = static_cast<optimizers::Kind>(*kind);
        layoutStates = optimizers::layoutStatesText(this->optimizer);
      }
    if (world < 1 || stage < 0 || stage > 3)
      fail(whereText + ": manifest.json has world size " +
           std::to_string(world) + " and stage " + std::to_string(stage));
    const json &files = json_.at(ManifestFile::files);
    if (!files.is_array() || files.size() != size_t(world))
      fail(whereText + ": manifest.json lists " + std::to_string(files.size()) +
           " rank files for " + std::to_string(world) + " ranks");
    expertParallel = json_.value(ManifestFile::expertParallel, int64_t(1));
    if (json_.contains(ManifestFile::expertParallel) &&
        (expertParallel < 2 || world % expertParallel != 0))
      fail(whereText + ": manifest.json has expert_parallel " +
           std::to_string(expertParallel) + " on " + std::to_string(world) +
           " ranks (a divisor of the world size above 1)");
    if (json_.contains(ManifestFile::expertPlacement)) {
      std::string text =
          json_.at(ManifestFile::expertPlacement).get<std::string>();
      std::optional<manifest::ExpertPlacement> placement =
          manifest::enumOf<manifest::ExpertPlacement>(text);
      if (!placement || expertParallel < 2)
        fail(whereText + ": manifest.json has expert_placement '" + text + "'" +
             (placement ? " without expert_parallel"
                        : " (contiguous or strided)"));
      expertPlacement = *placement == manifest::ExpertPlacement::Strided
                            ? ZRT_EXPERT_STRIDED
                            : ZRT_EXPERT_CONTIGUOUS;
    }
    for (const json &g : json_.at(ManifestFile::partitions)) {
      using checkpoint::Partition;
      SavedGroup group{g.at(Partition::name).get<std::string>(),
                       g.at(Partition::numel).get<int64_t>(),
                       g.at(Partition::shardNumel).get<int64_t>(), 0,
                       g.value(Partition::expert, false)};
      // Only checkExpertsRecorded reads it; a checkpoint without it tells
      // nothing.
      group.paddedNumel =
          g.value(Partition::paddedNumel, group.shardNumel * world);
      if (group.expert && expertParallel < 2)
        fail(whereText + ": group '" + group.name +
             "' is an expert partition, but manifest.json records no "
             "expert_parallel above 1");
      // An expert group is sharded over each expert replica set.
      int64_t ranks = group.expert ? world / expertParallel : world;
      if (group.numel < 0 || group.shardNumel < 0 ||
          (stage > 0 && group.shardNumel * ranks < group.numel))
        fail(whereText + ": group '" + group.name +
             "' has an inconsistent layout");
      groups.push_back(group);
    }
    // Each parameter records the dtype it computes in; checkpoints from
    // before that recorded one for the whole step.
    auto dtypeOf = [&](const json &p) {
      return p.contains(checkpoint::Param::computeDtype)
                 ? p.at(checkpoint::Param::computeDtype).get<std::string>()
                 : json_.at(ManifestFile::computeDtype).get<std::string>();
    };
    // The dtype of each group's first parameter, which the others share.
    std::vector<const SavedParam *> firstOfGroup(groups.size(), nullptr);
    // Format 2 did not record the parameters; only the program that saved
    // it can load it (checkSameModel).
    if (format >= 3)
      for (const json &p : json_.at(ManifestFile::params)) {
        using checkpoint::Param;
        SavedParam param{p.at(Param::name).get<std::string>(),
                         p.at(Param::shape).get<std::vector<int64_t>>(),
                         1,
                         p.at(Param::partition).get<int32_t>(),
                         p.at(Param::offset).get<int64_t>(),
                         p.value(Param::rows, int64_t(-1)),
                         dtypeOf(p),
                         p.value(Param::frozen, false),
                         p.value(Param::muon, false),
                         p.value(Param::expertParallel, int64_t(1))};
        for (int64_t d : param.shape)
          param.numel *= d;
        // Its experts are split as the expert groups' sets.
        if (param.expertParallel != 1 &&
            (param.expertParallel != expertParallel || param.shape.empty() ||
             param.rows >= 0 || param.group < 0 ||
             param.group >= int32_t(groups.size()) ||
             !groups[size_t(param.group)].expert))
          fail(whereText + ": parameter '" + param.name +
               "' has expert_parallel " + std::to_string(param.expertParallel) +
               ", which needs expert_parallel " +
               std::to_string(param.expertParallel) +
               " in manifest.json, a shape without padding rows and an "
               "expert partition (expert_parallel here: " +
               std::to_string(expertParallel) + ")");
        if (param.group < 0 || param.group >= int32_t(groups.size()) ||
            param.offset < 0 ||
            param.offset + param.numel > groups[size_t(param.group)].numel ||
            (param.rows >= 0 &&
             (param.shape.empty() || param.rows >= param.shape[0])))
          fail(whereText + ": parameter '" + param.name +
               "' lies outside its group");
        if (computeDtypeOf(param.computeDtype) < 0)
          fail(whereText + ": parameter '" + param.name +
               "' has compute dtype '" + param.computeDtype +
               "' (f32, bf16 or f16)");
        params.push_back(std::move(param));
      }
    for (size_t i = 0; i < params.size(); ++i) {
      const SavedParam &param = params[i];
      const SavedParam *&first = firstOfGroup[size_t(param.group)];
      if (first && first->computeDtype != param.computeDtype)
        fail(whereText + ": parameter '" + param.name + "' computes in " +
             param.computeDtype + ", but '" + first->name +
             "' of the same group '" + groups[size_t(param.group)].name +
             "' in " + first->computeDtype + "; a group computes in one dtype");
      if (first && first->frozen != param.frozen)
        fail(whereText + ": parameter '" + param.name + "' is " +
             (param.frozen ? "frozen" : "trainable") + ", but '" + first->name +
             "' of the same group '" + groups[size_t(param.group)].name +
             "' is " + (first->frozen ? "frozen" : "trainable") +
             "; a group is frozen or trains as a whole");
      if (!first)
        first = &param;
      byName[param.name] = i;
    }
  } catch (const json::exception &e) {
    fail(whereText + ": malformed checkpoint metadata: " + e.what());
  }
}

void CheckpointReader::setParams(std::vector<SavedParam> table) {
  params = std::move(table);
  byName.clear();
  for (size_t i = 0; i < params.size(); ++i)
    byName[params[i].name] = i;
}

int64_t CheckpointReader::find(const std::string &name) const {
  auto it = byName.find(name);
  return it == byName.end() ? -1 : int64_t(it->second);
}

std::string CheckpointReader::computeDtypes() const {
  // A format-2 checkpoint has no parameter table, only the step's dtype.
  if (params.empty())
    return json_.value(checkpoint::ManifestFile::computeDtype,
                       std::string("unknown"));
  std::vector<std::pair<std::string, int64_t>> counts;
  for (const SavedParam &p : params) {
    auto it = std::find_if(counts.begin(), counts.end(), [&](const auto &c) {
      return c.first == p.computeDtype;
    });
    if (it == counts.end())
      counts.push_back({p.computeDtype, 1});
    else
      ++it->second;
  }
  if (counts.size() == 1)
    return counts.front().first;
  std::string text;
  for (const auto &[dtype, n] : counts)
    text += (text.empty() ? "" : ", ") + dtype + " for " + std::to_string(n) +
            (n == 1 ? " parameter" : " parameters");
  return text;
}

std::string CheckpointReader::rankPath(int rank) const {
  return stepDir + "/" +
         json_.at(checkpoint::ManifestFile::files)
             .at(size_t(rank))
             .at(checkpoint::RankFile::file)
             .get<std::string>();
}

std::string CheckpointReader::check(int rank) const {
  CheckpointFile file;
  return verify(rank, file);
}

std::string CheckpointReader::verify(int rank, CheckpointFile &file) const {
  try {
    std::string name = rankPath(rank);
    std::string bytes = readFile(name);
    const json &entry =
        json_.at(checkpoint::ManifestFile::files).at(size_t(rank));
    uint32_t crc = rankFileCrc(bytes);
    if (bytes.size() != entry.at(checkpoint::RankFile::bytes).get<uint64_t>() ||
        crc != entry.at(checkpoint::RankFile::crc32).get<uint32_t>())
      return name + " does not match manifest.json (" +
             std::to_string(bytes.size()) + " bytes, crc32 " +
             std::to_string(crc) + "; manifest: " + entry.dump() +
             "); the checkpoint is corrupt or mixed from two saves";
    file = unpackCheckpoint(bytes, name);
    json header = json::parse(file.header);
    using checkpoint::Header;
    if (header.at(Header::rank).get<int>() != rank ||
        header.at(Header::scheduleHash) !=
            json_.at(checkpoint::ManifestFile::scheduleHash) ||
        header.at(Header::step) != json_.at(checkpoint::ManifestFile::step))
      return name + " belongs to another rank, schedule or step: " +
             file.header.substr(0, 200);
  } catch (const std::runtime_error &e) {
    return e.what();
  } catch (const json::exception &e) {
    return whereText + ": malformed checkpoint metadata: " + e.what();
  }
  return "";
}

CheckpointReader::RankFile &CheckpointReader::load(int rank) {
  auto found = ranks.find(rank);
  if (found != ranks.end())
    return found->second;
  CheckpointFile file;
  std::string problem = verify(rank, file);
  if (!problem.empty())
    fail(problem);
  std::string name = rankPath(rank);
  RankFile loaded;
  try {
    loaded.header = json::parse(file.header);
    std::map<std::string, int32_t> groupIndex;
    for (size_t g = 0; g < groups.size(); ++g)
      groupIndex[groups[g].name] = int32_t(g);
    using checkpoint::Section;
    for (const json &s : loaded.header.at(checkpoint::Header::sections)) {
      auto g = groupIndex.find(s.at(Section::partition).get<std::string>());
      std::string buffer = s.at(Section::buffer).get<std::string>();
      int kind = -1;
      for (BufferKind k : kSavedBuffers)
        if (buffer == kBufferNames[k])
          kind = k;
      uint64_t offset = s.at(Section::offset).get<uint64_t>();
      uint64_t bytes = s.at(Section::bytes).get<uint64_t>();
      if (g == groupIndex.end() || kind < 0 || offset > file.payload.size() ||
          bytes > file.payload.size() - offset)
        fail(name + ": section " + s.dump() +
             " names no saved buffer of a group or lies outside the file");
      loaded.sections[{g->second, kind}] = {offset, bytes};
    }
  } catch (const json::exception &e) {
    fail(name + ": malformed checkpoint header: " + e.what());
  }
  loaded.payload = std::move(file.payload);
  return ranks[rank] = std::move(loaded);
}

TrainingState CheckpointReader::state(int rank) {
  const json &h = load(rank).header;
  TrainingState s;
  try {
    using checkpoint::Header;
    s.step = h.at(Header::step).get<int64_t>();
    s.dataPosition = h.at(Header::dataPosition).get<int64_t>();
    s.adamSteps = h.at(Header::adamSteps).get<int64_t>();
    s.lossScaler = h.at(Header::lossScaler);
  } catch (const json::exception &e) {
    fail(rankPath(rank) + ": malformed checkpoint header: " + e.what());
  }
  return s;
}

std::string CheckpointReader::nonFinite(int rank) {
  RankFile &file = load(rank);
  for (const auto &[section, place] : file.sections) {
    auto [group, kind] = section;
    const SavedGroup &g = groups[size_t(group)];
    const char *data = file.payload.data() + place.first;
    int64_t base = stage > 0 ? shardIndex(group, rank) * g.shardNumel : 0;
    int64_t end = base + int64_t(place.second / 4);
    // An 8-bit state's codes are bytes, not floats: only its absmaxes can
    // be NaN or infinite.
    if (int8States && optimizers::isStateBuffer(BufferKind(kind))) {
      int64_t blocks = absmaxBlocks(int64_t(place.second));
      int64_t bad = firstNonFinite(data, blocks);
      if (bad >= 0)
        return nonFiniteText(rankPath(rank),
                             "the absmax of block " + std::to_string(bad) +
                                 " of group '" + g.name + "'",
                             BufferKind(kind), bad, data + 4 * bad);
      continue;
    }
    // The padding (elements no parameter covers) too: it is saved as zeros.
    int64_t bad = firstNonFinite(data, end - base);
    if (bad < 0)
      continue;
    // A layout state's values are packed: its runs name the parameter.
    if (layoutStates && optimizers::isStateBuffer(BufferKind(kind)))
      for (const StateRun &r : stateRuns(rank, group, BufferKind(kind)))
        if (bad >= r.at && bad < r.at + r.count)
          return nonFiniteText(
              rankPath(rank), "parameter '" + params[r.param].name + "'",
              BufferKind(kind), r.begin + bad - r.at, data + 4 * bad);
    int64_t at = base + bad;
    for (const SavedParam &p : params)
      if (p.group == group && at >= p.offset && at < p.offset + p.numel)
        return nonFiniteText(rankPath(rank), "parameter '" + p.name + "'",
                             BufferKind(kind), at - p.offset, data + 4 * bad);
    // A format-2 checkpoint has no parameter table; otherwise `at` is in
    // the padding after the group's parameters.
    return nonFiniteText(rankPath(rank),
                         std::string(params.empty() ? "" : "the padding of ") +
                             "group '" + g.name + "'",
                         BufferKind(kind), at, data + 4 * bad);
  }
  return "";
}

zrt_mesh CheckpointReader::mesh() const {
  zrt_mesh m;
  zrt_mesh_from_sizes(&m, world, 1, 0, 1, expertParallel, expertPlacement);
  return m;
}

int64_t CheckpointReader::shardIndex(int32_t group, int rank) const {
  zrt_mesh m = mesh();
  return groups[size_t(group)].expert
             ? zrt_member_index(ZRT_RANKS_EXPERT_REPLICAS, rank, &m)
             : rank;
}

zrt_rank_set CheckpointReader::expertHolders(int64_t member) const {
  zrt_mesh m = mesh();
  zrt_rank_set set = zrt_rank_set_of(ZRT_RANKS_EXPERT, 0, &m);
  return zrt_rank_set_of(ZRT_RANKS_EXPERT_REPLICAS,
                         set.first + member * set.stride, &m);
}

std::string CheckpointReader::expertText() const {
  if (expertParallel < 2)
    return "";
  return "experts split over " + std::to_string(expertParallel) +
         " ranks (expert_parallel, " +
         (expertPlacement == ZRT_EXPERT_STRIDED ? "strided" : "contiguous") +
         " sets)";
}

void CheckpointReader::checkExpertsRecorded(const std::string &command) const {
  if (expertParallel > 1 || stage == 0)
    return;
  // A dense group's padded layout is its shards on every rank.
  for (const SavedGroup &g : groups)
    if (g.paddedNumel < g.shardNumel * world)
      fail(command + ": " + whereText + ": group '" + g.name + "' pads to " +
           std::to_string(g.paddedNumel) + " elements in shards of " +
           std::to_string(g.shardNumel) + ", sharded over fewer than its " +
           std::to_string(world) +
           " ranks: an expert partition of a checkpoint saved before "
           "checkpoints recorded expert parallelism, whose rank files hold "
           "their own experts under the same names; resume it with the "
           "program that saved it and save again");
}

std::vector<int64_t> CheckpointReader::wholeShape(size_t param) const {
  const SavedParam &p = params.at(param);
  std::vector<int64_t> shape = unpaddedShape(p.shape, p.rows);
  if (p.expertParallel > 1)
    shape[0] *= p.expertParallel;
  return shape;
}

void CheckpointReader::readWhole(size_t param, BufferKind kind, int64_t begin,
                                 int64_t end, float *out) {
  const SavedParam &p = params.at(param);
  if (p.expertParallel <= 1) {
    read(param, kind, begin, end, out);
    return;
  }
  // Member q's experts are elements [q * numel, (q + 1) * numel) of the
  // whole tensor (experts are its dimension 0).
  while (begin < end) {
    int64_t q = begin / p.numel;
    int64_t lo = begin - q * p.numel, hi = std::min(end - q * p.numel, p.numel);
    zrt_rank_set holders = expertHolders(q);
    read(param, kind, lo, hi, out, int(holders.first), int(holders.first),
         int(holders.stride));
    out += hi - lo;
    begin += hi - lo;
  }
}

const char *CheckpointReader::section(int rank, int32_t group,
                                     BufferKind kind, int64_t values) {
  RankFile &file = load(rank);
  const SavedGroup &g = groups[size_t(group)];
  auto it = file.sections.find({group, int(kind)});
  if (it == file.sections.end())
    fail(rankPath(rank) + " lacks buffer " + kBufferNames[kind] + " of '" +
         g.name + "'");
  auto [offset, bytes] = it->second;
  if (uint64_t(values) * 4 > bytes)
    fail(rankPath(rank) + ": buffer " + kBufferNames[kind] + " of '" + g.name +
         "' has the wrong size");
  return file.payload.data() + offset;
}

void CheckpointReader::read(size_t param, BufferKind kind, int64_t begin,
                            int64_t end, float *out, int prefer, int first,
                            int stride) {
  const SavedParam &p = params.at(param);
  const SavedGroup &g = groups[size_t(p.group)];
  int64_t pos = p.offset + begin, stop = p.offset + end;
  while (pos < stop) {
    // The rank that holds `pos`, and where its range starts.
    int rank = prefer >= 0 && prefer < world ? prefer : 0;
    int64_t base = 0, limit = stop;
    if (stage > 0) {
      int64_t shard = pos / g.shardNumel;
      rank = first + int(shard) * stride;
      base = shard * g.shardNumel;
      limit = std::min(stop, base + g.shardNumel);
    }
    const char *src =
        section(rank, p.group, kind, limit - base) + (pos - base) * 4;
    int64_t bad = firstNonFinite(src, limit - pos);
    if (bad >= 0)
      fail(nonFiniteText(rankPath(rank), "parameter '" + p.name + "'", kind,
                         pos - p.offset + bad, src + 4 * bad));
    std::memcpy(out, src, size_t(limit - pos) * 4);
    out += limit - pos;
    pos = limit;
  }
}

const std::vector<StateRun> &
CheckpointReader::stateRuns(int rank, int32_t group, BufferKind kind) {
  auto key = std::make_tuple(rank, group, int(kind));
  auto it = runs.find(key);
  if (it != runs.end())
    return it->second;
  const SavedGroup &g = groups[size_t(group)];
  int64_t begin = stage > 0 ? shardIndex(group, rank) * g.shardNumel : 0;
  int64_t end = stage > 0 ? begin + g.shardNumel : g.numel;
  return runs[key] =
             layoutStateRuns(optimizer, kind, params, group, begin, end);
}

void CheckpointReader::readState(size_t param, BufferKind kind, int64_t begin,
                                 int64_t end, float *out, int64_t member) {
  const SavedParam &p = params.at(param);
  const SavedGroup &g = groups[size_t(p.group)];
  // A factored tensor's statistics are whole on every rank that holds any
  // of its elements: the first element's owner is one.
  bool whole = optimizers::isFactored(optimizer, kind) && p.shape.size() >= 2;
  zrt_rank_set holders =
      g.expert ? expertHolders(member) : zrt_rank_set{0, 1, 1};
  int64_t pos = begin;
  while (pos < end) {
    int rank =
        int(holders.first +
            (stage > 0 ? (p.offset + (whole ? 0 : pos)) / g.shardNumel : 0) *
                holders.stride);
    const StateRun *run = nullptr;
    for (const StateRun &r : stateRuns(rank, p.group, kind))
      if (r.param == param && r.begin <= pos && pos < r.begin + r.count)
        run = &r;
    if (!run)
      fail(rankPath(rank) + " holds no " + kBufferNames[kind] +
           " of parameter '" + p.name + "' at its value " +
           std::to_string(pos) + " (" + (layoutStates ? layoutStates : "") +
           ")");
    int64_t n = std::min(end, run->begin + run->count) - pos;
    const char *src = section(rank, p.group, kind, run->at + run->count) +
                      (run->at + pos - run->begin) * 4;
    int64_t bad = firstNonFinite(src, n);
    if (bad >= 0)
      fail(nonFiniteText(rankPath(rank), "parameter '" + p.name + "'", kind,
                         pos + bad, src + 4 * bad));
    std::memcpy(out, src, size_t(n) * 4);
    out += n;
    pos += n;
  }
}

std::string_view CheckpointReader::rawSection(int rank,
                                              const std::string &group,
                                              BufferKind kind, int64_t bytes) {
  RankFile &file = load(rank);
  int32_t g = 0;
  while (size_t(g) < groups.size() && groups[size_t(g)].name != group)
    ++g;
  auto it = file.sections.find({g, int(kind)});
  if (it == file.sections.end())
    fail(rankPath(rank) + " lacks buffer " + kBufferNames[kind] + " of '" +
         group + "'");
  auto [offset, size] = it->second;
  if (size != uint64_t(bytes))
    fail(rankPath(rank) + ": buffer " + kBufferNames[kind] + " of '" + group +
         "' has " + std::to_string(size) + " bytes, this program's " +
         std::to_string(bytes));
  return std::string_view(file.payload.data() + offset, size_t(size));
}

int64_t zrt::absmaxBlocks(int64_t bytes) {
  // bytes = numel + 4 * ceil(numel / block): the smallest block count whose
  // elements fill the rest. Adam's and AdamW's are the table's only int8
  // rows, with one block size.
  static_assert(optimizers::absmaxBlock(optimizers::Kind::Adam,
                                        optimizers::StatePrecision::Int8) ==
                optimizers::absmaxBlock(optimizers::Kind::AdamW,
                                        optimizers::StatePrecision::Int8));
  const int64_t block = optimizers::absmaxBlock(
      optimizers::Kind::Adam, optimizers::StatePrecision::Int8);
  int64_t blocks = bytes / (block + 4);
  while (bytes - 4 * blocks > blocks * block)
    ++blocks;
  return blocks;
}

void zrt::checkSameModel(CheckpointReader &ckpt, const Manifest &m) {
  const std::string &where = ckpt.where();
  // 8-bit states are their codes and absmaxes, blocked over each shard:
  // only the layout that saved them reads them back (re-quantising
  // dequantized values is not exact), and fp32 states are not quantised
  // into them.
  if (ckpt.int8States != m.int8States())
    fail(
        where +
        (ckpt.int8States
             ? std::string(" holds int8 optimizer states (codes and "
                           "absmaxes), which resume only into int8 states; "
                           "this program keeps them in ") +
                   optimizers::precisionName(m.statePrecision)
             : std::string(" holds fp32 optimizer states; this program "
                           "keeps them in int8, which are resumed only from "
                           "an int8 checkpoint (quantising is not a resume)")));
  if (m.int8States() &&
      (ckpt.scheduleHash != m.hashText || ckpt.world != m.shardGroupSize() ||
       ckpt.stage != m.stage))
    fail(where + " was saved by a stage-" + std::to_string(ckpt.stage) +
         " program on " + std::to_string(ckpt.world) + " rank(s), schedule " +
         ckpt.scheduleHash +
         ": int8 optimizer states are not resharded (each rank's shard "
         "blocks its own 2048 elements, and re-quantising dequantized values "
         "is not exact); resume with the program and world that saved it");
  // Layout states (Muon's packed by part, Adafactor's factored) move
  // between layouts by parameter (loadLayoutState) from a checkpoint that
  // records which parameters are Muon's.
  if (const char *layoutStates = optimizers::layoutStatesText(m.optimizer);
      layoutStates && ckpt.format < 3 &&
      (ckpt.scheduleHash != m.hashText || ckpt.world != m.shardGroupSize() ||
       ckpt.stage != m.stage))
    fail(where + " has format 2, which records no parameters: " + layoutStates +
         " resume only with the program and world that saved "
         "it");
  if (ckpt.format < 3) {
    // No parameter table: only the very layout that saved it.
    if (ckpt.scheduleHash != m.hashText || ckpt.world != m.worldSize ||
        ckpt.stage != m.stage ||
        ckpt.manifest().at(checkpoint::ManifestFile::partitions) !=
            layoutJson(m))
      fail(where +
           " has format 2, which records no parameters: only the "
           "program that saved it (schedule " +
           ckpt.scheduleHash + ", stage " + std::to_string(ckpt.stage) +
           " on " + std::to_string(ckpt.world) +
           " ranks) can resume it; resume with that program and save again "
           "to move it");
    ckpt.setParams(savedParams(m));
    return;
  }
  checkExpertLayout(ckpt, m);
  const std::vector<SavedParam> &saved = ckpt.params;
  size_t n = std::min(saved.size(), m.params.size());
  for (size_t i = 0; i < n; ++i) {
    const SavedParam &s = saved[i];
    const ParamInfo &p = m.params[i];
    std::string nth = std::to_string(i + 1) + " of ";
    if (s.name != p.name)
      fail(where + " is of another model: its parameter " + nth +
           std::to_string(saved.size()) + " is '" + s.name + "' " +
           shapeText(s.shape) + ", this program's parameter " + nth +
           std::to_string(m.params.size()) + " is '" + p.name + "' " +
           shapeText(p.shape));
    // The same table padded otherwise (zero-pad-vocab): say so.
    auto padding = [](const std::vector<int64_t> &shape, int64_t rows) {
      return shapeText(unpaddedShape(shape, rows)) +
             (rows >= 0 ? " padded to " + shapeText(shape) : " unpadded");
    };
    if (unpaddedShape(s.shape, s.rows) == unpaddedShape(p.shape, p.rows) &&
        (s.shape != p.shape || s.rows != p.rows))
      fail(where + " holds parameter '" + s.name + "' as " +
           padding(s.shape, s.rows) + ", this program as " +
           padding(p.shape, p.rows) +
           ": compile it with the vocabulary padding of the run that saved "
           "the checkpoint (zero-compile --pad-vocab)");
    if (s.shape != p.shape)
      fail(where + " is of another model: its parameter '" + s.name +
           "' has shape " + shapeText(s.shape) + ", this program's " +
           shapeText(p.shape));
    if (s.rows != p.rows)
      fail(where + " is of another model: its parameter '" + s.name +
           "' has shape " + shapeText(unpaddedShape(s.shape, s.rows)) +
           " padded to " + shapeText(s.shape) + ", this program's " +
           shapeText(unpaddedShape(p.shape, p.rows)) + " padded to " +
           shapeText(p.shape));
  }
  if (saved.size() > n)
    fail(where + " is of another model: its parameter " +
         std::to_string(n + 1) + " of " + std::to_string(saved.size()) + " '" +
         saved[n].name + "' is beyond this program's " +
         std::to_string(m.params.size()) + " parameters");
  if (m.params.size() > n)
    fail(where + " is of another model: this program's parameter " +
         std::to_string(n + 1) + " of " + std::to_string(m.params.size()) +
         " '" + m.params[n].name + "' is beyond the checkpoint's " +
         std::to_string(saved.size()) + " parameters");
  // The first parameter, in the program's order, computing in another
  // dtype: its fp32 master would be restored, but the step around it
  // computes otherwise.
  for (size_t i = 0; i < n; ++i) {
    const std::string &mine =
        m.partitions[size_t(m.params[i].partition)].computeDtypeName;
    if (saved[i].computeDtype != mine)
      fail(where + " was saved with compute dtype " + saved[i].computeDtype +
           ", this program's is " + mine + " for parameter '" +
           m.params[i].name +
           "' (export and --init-from move weights between dtypes)");
  }
  // The first parameter, in the program's order, frozen on one side only:
  // a frozen one has no moments to resume, and one that trained would be
  // held still.
  for (size_t i = 0; i < n; ++i)
    if (saved[i].frozen != m.params[i].frozen)
      fail(where + ": parameter '" + m.params[i].name + "' " +
           (saved[i].frozen ? "is frozen in the checkpoint but trains in this "
                              "program"
                            : "trains in the checkpoint but is frozen in "
                              "this program") +
           " (resume with the same frozen parameters; --init-from an export "
           "starts a run with others)");
  try {
    using checkpoint::Optimizer;
    const json &savedOptimizer =
        ckpt.manifest().at(checkpoint::ManifestFile::optimizer);
    json mine = optimizerJson(m);
    // Checkpoints from before schedules had none, and a model without
    // weight-decay groups has none. A checkpoint from before a
    // hyper-parameter's row did not record it (Muon's and Adafactor's
    // before the rows were saved, whose ds_config defaults are not the
    // rows'): it cannot disagree, and the kind, compared too, tells
    // optimizers apart.
    json saved = savedOptimizer;
    if (!saved.contains(Optimizer::lrSchedule))
      saved[Optimizer::lrSchedule] = "none";
    for (const optimizers::HyperParamRow &p : optimizers::kHyperParams)
      if (!saved.contains(p.name))
        saved[p.name] = mine.at(p.name);
    for (json *o : {&saved, &mine})
      if (!o->contains(Optimizer::paramWeightDecay))
        (*o)[Optimizer::paramWeightDecay] = json::object();
    for (auto [key, what] : checkpoint::Keys<Optimizer>::values) {
      // Checked above.
      if (std::string_view(key) == Optimizer::states)
        continue;
      const json &a = saved.at(key);
      const json &b = mine.at(key);
      if (std::string_view(key) == Optimizer::lrSchedule) {
        std::string diff =
            scheduleDifference(a.get<std::string>(), b.get<std::string>());
        if (!diff.empty())
          fail(where + " was saved with " + what + " " + diff);
        continue;
      }
      if (std::string_view(key) == Optimizer::paramWeightDecay) {
        // The first parameter, in the program's order, whose decay differs.
        auto decay = [](const json &groups, const std::string &name) {
          return groups.contains(name)
                     ? numberText(groups.at(name).get<double>())
                     : std::string("the optimizer's");
        };
        for (const ParamInfo &p : m.params)
          if (decay(a, p.name) != decay(b, p.name))
            fail(where + " was saved with weight decay " + decay(a, p.name) +
                 " for parameter '" + p.name + "', this program's is " +
                 decay(b, p.name) + " (another weight-decay group)");
        continue;
      }
      if (a.is_number() && b.is_number() ? a.get<double>() != b.get<double>()
                                         : a != b)
        fail(where + " was saved with " + what + " " +
             (a.is_number() ? numberText(a.get<double>()) : a.dump()) +
             ", this program's is " +
             (b.is_number() ? numberText(b.get<double>()) : b.dump()));
    }
  } catch (const json::exception &e) {
    fail(where + ": malformed checkpoint metadata: " + e.what());
  }
}

std::vector<float> zrt::loadLayoutState(CheckpointReader &ckpt,
                                        const Manifest &m, int32_t p, int rank,
                                        BufferKind kind) {
  const PartitionInfo &part = m.partitions[size_t(p)];
  Range own = m.owned(part, rank);
  std::vector<float> state(size_t(m.bufferBytes(part, kind) / 4), 0.0f);
  std::vector<SavedParam> mine = savedParams(m);
  for (const StateRun &r :
       layoutStateRuns(m.optimizer, kind, mine, p, own.begin, own.end)) {
    const std::string &name = mine[r.param].name;
    int64_t src = ckpt.find(name);
    if (src < 0)
      fail(ckpt.where() + " has no parameter '" + name + "'");
    if (r.at + r.count > int64_t(state.size()))
      fail("group '" + part.name + "': parameter '" + name + "''s " +
           kBufferNames[kind] + " exceeds the buffer's " +
           std::to_string(state.size()) + " values");
    ckpt.readState(size_t(src), kind, r.begin, r.begin + r.count,
                   state.data() + r.at);
  }
  return state;
}

void zrt::remapOwned(CheckpointReader &ckpt, const Manifest &m, int32_t p,
                     int rank, BufferKind kind, std::vector<float> &out) {
  const PartitionInfo &part = m.partitions[size_t(p)];
  Range own = m.owned(part, rank);
  out.assign(size_t(own.size()), 0.0f);
  for (const ParamInfo &param : m.params) {
    if (param.partition != p)
      continue;
    int64_t lo = std::max(own.begin, param.offset);
    int64_t hi = std::min(own.end, param.offset + param.numel);
    if (lo >= hi)
      continue;
    int64_t src = ckpt.find(param.name);
    if (src < 0)
      fail(ckpt.where() + " has no parameter '" + param.name + "'");
    // checkSameModel let only the saving layout resume expert partitions.
    int first = 0, stride = 1;
    if (part.expert) {
      zrt_rank_set replicas = m.expertReplicas(rank);
      first = int(replicas.first);
      stride = int(replicas.stride);
    }
    ckpt.read(size_t(src), kind, lo - param.offset, hi - param.offset,
              out.data() + (lo - own.begin), rank, first, stride);
  }
}
