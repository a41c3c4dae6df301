//===- WeightFiles.cpp - Weights in and out, by byte ranges ---------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "Data/WeightFiles.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <regex>
#include <sys/stat.h>
#include <unistd.h>

using namespace zrt;

namespace {

constexpr char kConfig[] = "config.json";
constexpr char kWeights[] = "model.safetensors";
constexpr char kIndex[] = "model.safetensors.index.json";

std::string joinPath(const std::string &dir, const std::string &name) {
  return dir.empty() || dir.back() == '/' ? dir + name : dir + "/" + name;
}

/// save_pretrained's name of shard `k` (from 1) of `n`.
std::string shardName(size_t k, size_t n) {
  char name[64];
  std::snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors", k, n);
  return name;
}

/// The shards a tensor list is split into, by huggingface_hub's
/// split_state_dict_into_shards: in order, a new shard where the next
/// tensor would take the current one over the limit, and a tensor above
/// the limit alone in a shard of its own (placed when it is met).
std::vector<std::vector<size_t>> splitShards(const std::vector<Tensor> &tensors,
                                             int64_t maxBytes) {
  std::vector<std::vector<size_t>> shards;
  std::vector<size_t> current;
  int64_t currentBytes = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    int64_t bytes =
        int64_t(tensors[i].data.size()) * (tensors[i].dtype == ZRT_F32 ? 4 : 2);
    if (bytes > maxBytes) {
      shards.push_back({i});
      continue;
    }
    if (currentBytes + bytes > maxBytes) {
      shards.push_back(std::move(current));
      current.clear();
      currentBytes = 0;
    }
    current.push_back(i);
    currentBytes += bytes;
  }
  if (!current.empty())
    shards.push_back(std::move(current));
  return shards;
}

/// Weight files an earlier save may have left in `dir`: model.safetensors,
/// the index and model-NNNNN-of-NNNNN.safetensors.
std::vector<std::string> weightFilesIn(const std::string &dir) {
  std::vector<std::string> names;
  DIR *d = ::opendir(dir.c_str());
  if (!d)
    return names;
  static const std::regex shard("model-[0-9]{5}-of-[0-9]{5}\\.safetensors");
  while (dirent *e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name == kWeights || name == kIndex || std::regex_match(name, shard))
      names.push_back(name);
  }
  ::closedir(d);
  return names;
}

} // namespace

int64_t zrt::parseShardSize(const std::string &text,
                            const std::string &option) {
  std::string why = option + " '" + text +
                    "': expected a size in bytes, or with a unit KB, MB, GB "
                    "or TB (as save_pretrained's max_shard_size)";
  if (text.empty())
    fail(why);
  static const std::pair<const char *, double> kUnits[] = {
      {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}};
  double multiplier = 1;
  std::string number = text;
  if (text.size() > 2) {
    std::string unit = text.substr(text.size() - 2);
    for (char &c : unit)
      c = char(std::toupper(static_cast<unsigned char>(c)));
    for (auto [name, value] : kUnits)
      if (unit == name) {
        multiplier = value;
        number = text.substr(0, text.size() - 2);
      }
  }
  char *end = nullptr;
  errno = 0;
  double value = std::strtod(number.c_str(), &end);
  if (number.empty() || *end != '\0' || errno != 0 || !(value > 0) ||
      !std::isfinite(value) || value * multiplier >= 9.2e18 ||
      (multiplier == 1 && value != std::floor(value)))
    fail(why);
  // As int(value * multiplier).
  return int64_t(value * multiplier);
}

const manifest::HfModel &
zrt::hfModelOf(const std::optional<manifest::HfModel> &hf,
               const std::string &what) {
  if (!hf)
    fail(what + " writes a Hugging Face model, but this program was not "
                "imported from one: import it with `zero-import --hf DIR` "
                "(which records its config.json), then compile and train it");
  return *hf;
}

const manifest::Peft &zrt::peftOf(const std::optional<manifest::Peft> &peft,
                                  const std::string &what) {
  if (!peft)
    fail(what + " writes a PEFT model's LoRA adapters, but this program has "
                "none: import a model made with peft.get_peft_model (or "
                "zero-import --hf DIR --lora ...), then compile and train it");
  return *peft;
}

namespace {

/// The index of the tensor named `name` among `tensors`; throws naming the
/// export `what` when there is none.
size_t tensorNamed(const std::vector<Tensor> &tensors, const std::string &name,
                   const char *what) {
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].name == name)
      return i;
  fail(std::string(what) + ": no parameter '" + name + "'");
}

} // namespace

void zrt::writeAdapterDirectory(
    const std::string &dir, const manifest::Peft &peft,
    const std::vector<Tensor> &tensors,
    const std::map<std::string, std::string> &metadata) {
  std::vector<Tensor> adapters;
  for (const manifest::Lora &l : peft.layers)
    for (auto [param, key] : {std::pair{&l.a, &l.aName}, {&l.b, &l.bName}}) {
      adapters.push_back(tensors[tensorNamed(tensors, *param, "adapters")]);
      adapters.back().name = *key;
    }
  makeDirs(dir);
  writeFileAtomic(joinPath(dir, "adapter_model.safetensors"),
                  writeSafetensors(adapters, metadata));
  writeFileAtomic(joinPath(dir, "adapter_config.json"), peft.config);
}

std::vector<Tensor> zrt::mergeAdapters(const manifest::Peft &peft,
                                       std::vector<Tensor> tensors) {
  enum class Role { Other, Base, Adapter };
  std::vector<Role> role(tensors.size(), Role::Other);
  for (const manifest::Lora &l : peft.layers) {
    size_t w = tensorNamed(tensors, l.base, "merge"),
           ia = tensorNamed(tensors, l.a, "merge"),
           ib = tensorNamed(tensors, l.b, "merge");
    role[w] = Role::Base;
    role[ia] = role[ib] = Role::Adapter;
    const Tensor &a = tensors[ia], &b = tensors[ib];
    Tensor &base = tensors[w];
    int64_t out = base.shape[0], in = base.shape[1], r = a.shape[0];
    // W + scaling * (B @ A) in fp32, each dot product in order of k.
    float scaling = float(l.scaling);
    for (int64_t i = 0; i < out; ++i)
      for (int64_t j = 0; j < in; ++j) {
        float dot = 0.0f;
        for (int64_t k = 0; k < r; ++k)
          dot += b.data[size_t(i * r + k)] * a.data[size_t(k * in + j)];
        base.data[size_t(i * in + j)] += scaling * dot;
      }
    base.name = l.mergedKey;
  }
  std::vector<Tensor> merged;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (role[i] == Role::Adapter)
      continue;
    Tensor &t = tensors[i];
    if (role[i] == Role::Other) {
      // merge_and_unload puts each adapted module's base layer in its
      // place: its other weights (a bias) lose the ".base_layer".
      t.name = t.name.substr(peft.prefix.size());
      size_t at = t.name.rfind(".base_layer.");
      if (at != std::string::npos)
        t.name.erase(at, std::strlen(".base_layer"));
    }
    merged.push_back(std::move(t));
  }
  return merged;
}

int zrt::writeHfDirectory(const std::string &dir, const std::string &config,
                          const std::vector<Tensor> &tensors,
                          int64_t maxShardBytes,
                          const std::map<std::string, std::string> &metadata) {
  makeDirs(dir);
  std::vector<std::string> stale = weightFilesIn(dir);
  std::vector<std::vector<size_t>> shards = splitShards(tensors, maxShardBytes);
  if (shards.empty())
    shards.emplace_back();
  std::vector<std::string> written;
  nlohmann::json weightMap = nlohmann::json::object();
  int64_t totalSize = 0, totalParameters = 0;
  for (size_t k = 0; k < shards.size(); ++k) {
    std::string name =
        shards.size() == 1 ? kWeights : shardName(k + 1, shards.size());
    std::vector<Tensor> part;
    for (size_t i : shards[k]) {
      part.push_back(tensors[i]);
      weightMap[tensors[i].name] = name;
      totalParameters += int64_t(tensors[i].data.size());
      totalSize += int64_t(tensors[i].data.size()) *
                   (tensors[i].dtype == ZRT_F32 ? 4 : 2);
    }
    writeFileAtomic(joinPath(dir, name), writeSafetensors(part, metadata));
    written.push_back(name);
  }
  if (shards.size() > 1) {
    // json.dumps(index, indent=2, sort_keys=True) + "\n", as save_pretrained.
    nlohmann::json index = {
        {"metadata",
         {{"total_parameters", totalParameters}, {"total_size", totalSize}}},
        {"weight_map", weightMap}};
    writeFileAtomic(joinPath(dir, kIndex), index.dump(2) + "\n");
    written.push_back(kIndex);
  }
  writeFileAtomic(joinPath(dir, kConfig), config);
  for (const std::string &name : stale)
    if (std::find(written.begin(), written.end(), name) == written.end() &&
        ::unlink(joinPath(dir, name).c_str()) != 0 && errno != ENOENT)
      fail("cannot remove '" + joinPath(dir, name) +
           "' of an earlier export: " + std::strerror(errno));
  return int(shards.size());
}

std::vector<std::string>
zrt::appendUntrained(const manifest::HfModel &hf,
                     const std::vector<Tensor> &carried,
                     std::vector<Tensor> &tensors) {
  for (const manifest::HfBuffer &b :
       hf.buffers.value_or(std::vector<manifest::HfBuffer>()))
    tensors.push_back({b.name, b.shape,
                       std::vector<float>(b.values.begin(), b.values.end())});
  std::vector<std::string> missing;
  for (const std::string &name :
       hf.unused.value_or(std::vector<std::string>())) {
    auto it = std::find_if(carried.begin(), carried.end(),
                           [&](const Tensor &t) { return t.name == name; });
    if (it == carried.end())
      missing.push_back(name);
    else
      tensors.push_back(*it);
  }
  return missing;
}

namespace {

/// The zrt_dtype that writes a safetensors dtype back (F32, BF16, F16).
int32_t zrtDtypeOf(const std::string &dtype) {
  return dtype == "BF16" ? ZRT_BF16 : dtype == "F16" ? ZRT_F16 : ZRT_F32;
}

/// Checks that `values`, read from `file` for the model's buffer `b`, are
/// the values the step was traced with, bit for bit: the step holds them
/// as constants, so other values would train another model.
void checkBuffer(const manifest::HfBuffer &b, const SafetensorsEntry &e,
                 const std::vector<float> &values, const std::string &file) {
  if (e.shape != b.shape)
    fail(file + ": buffer '" + e.name + "' has shape " + shapeText(e.shape) +
         "; the compiled step holds it as a constant of shape " +
         shapeText(b.shape));
  for (size_t i = 0; i < values.size(); ++i) {
    float want = float(b.values[i]);
    if (std::memcmp(&values[i], &want, sizeof(float)) == 0)
      continue;
    char text[128];
    std::snprintf(text, sizeof(text), "holds %.9g at element %zu",
                  double(values[i]), i);
    char assumed[64];
    std::snprintf(assumed, sizeof(assumed), "%.9g", double(want));
    fail(file + ": buffer '" + e.name + "' " + text +
         ", but the compiled step was traced with " + assumed +
         " there and holds it as a constant; import the model from these "
         "weights (zero-import --hf) and compile it again");
  }
}

/// The per-expert names save_pretrained writes a fused experts tensor
/// under, for each family's naming: the projections whose experts'
/// tensors make it, in order (Mixtral's w1, w3 and w2; the Qwen-MoE
/// families' gate_proj, up_proj and down_proj).
const std::vector<std::vector<std::string>> &
expertProjections(const std::string &fused) {
  static const std::vector<std::vector<std::string>> kGateUp = {
      {"w1", "w3"}, {"gate_proj", "up_proj"}};
  static const std::vector<std::vector<std::string>> kDown = {{"w2"},
                                                              {"down_proj"}};
  static const std::vector<std::vector<std::string>> kNone;
  return fused == "gate_up_proj" ? kGateUp
         : fused == "down_proj"  ? kDown
                                 : kNone;
}

/// The entries (indices into `entries`) that make the fused experts tensor
/// `w` (`P.experts.gate_up_proj` [E, 2I, H] or `P.experts.down_proj`
/// [E, H, I]) where the files keep one tensor per expert and projection, as
/// save_pretrained writes them (`P.experts.e.w1.weight`, ...): expert by
/// expert, its projections in order, which is the fused tensor's element
/// order (transformers' loader stacks each projection's experts and
/// concatenates the projections on dimension 1). Empty when the files have
/// no such set; throws, naming `where`, for a part of another shape.
std::vector<size_t> expertEntries(const WantedTensor &w,
                                  const std::vector<SafetensorsEntry> &entries,
                                  const std::map<std::string, size_t> &byName,
                                  const std::string &where) {
  static const std::string kExperts = ".experts.";
  size_t at = w.name.rfind(kExperts);
  if (at == std::string::npos || w.shape.size() != 3 || w.shape[0] <= 0)
    return {};
  std::string prefix = w.name.substr(0, at + kExperts.size());
  for (const std::vector<std::string> &projs :
       expertProjections(w.name.substr(at + kExperts.size()))) {
    std::vector<size_t> parts;
    for (int64_t e = 0; e < w.shape[0]; ++e)
      for (const std::string &p : projs) {
        auto it = byName.find(prefix + std::to_string(e) + "." + p + ".weight");
        if (it != byName.end())
          parts.push_back(it->second);
      }
    if (parts.size() != size_t(w.shape[0]) * projs.size())
      continue;
    int64_t n = int64_t(projs.size());
    std::vector<int64_t> part = {w.shape[1] / n, w.shape[2]};
    for (size_t i : parts)
      if (entries[i].shape != part || part[0] * n != w.shape[1])
        fail(where + ": tensor '" + entries[i].name + "' has shape " +
             shapeText(entries[i].shape) + "; the program's parameter '" +
             w.name + "' " + shapeText(w.shape) + " takes " +
             std::to_string(n) + " of " + shapeText(part) + " per expert");
    return parts;
  }
  return {};
}

} // namespace

//===----------------------------------------------------------------------===//
// WeightFiles
//===----------------------------------------------------------------------===//

WeightFiles::WeightFiles(const std::string &path,
                         const std::vector<WantedTensor> &wanted,
                         const std::set<std::string> &tied,
                         const manifest::HfModel *hf)
    : path(path) {
  // The files: one, or a directory's single file or shards.
  std::vector<std::string> paths;
  std::map<std::string, std::string> indexed; // tensor -> file, of the index
  std::string where = path;
  if (isDirectory(path)) {
    std::string index = joinPath(path, kIndex);
    if (isRegularFile(index)) {
      where = index;
      std::string text = readFile(index);
      headerBytes += text.size();
      nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
      if (!j.is_object() || !j.contains("weight_map") ||
          !j["weight_map"].is_object())
        fail(index + ": not a safetensors index (a JSON object with a "
                     "\"weight_map\" object)");
      for (auto &[tensor, file] : j["weight_map"].items()) {
        if (!file.is_string() ||
            file.get<std::string>().find('/') != std::string::npos)
          fail(index + ": weight_map[\"" + tensor + "\"] is not a file name");
        std::string f = joinPath(path, file.get<std::string>());
        indexed[tensor] = f;
        if (std::find(paths.begin(), paths.end(), f) == paths.end())
          paths.push_back(f);
      }
    } else if (isRegularFile(joinPath(path, kWeights))) {
      paths.push_back(joinPath(path, kWeights));
    } else {
      fail(path + ": a directory without " + kWeights + " or " + kIndex +
           " (--init-from takes a safetensors file or a Hugging Face model "
           "directory)");
    }
  } else {
    paths.push_back(path);
  }

  // Every header, then one match over all the files' tensors.
  std::vector<SafetensorsEntry> entries;
  std::vector<size_t> fileOf;
  auto skip = [&](const std::string &name) {
    return isWeightsBuffer(name, wanted);
  };
  for (const std::string &p : paths) {
    File f;
    f.path = p;
    f.fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    if (f.fd < 0)
      fail("cannot open '" + p + "': " + std::strerror(errno));
    struct stat st;
    if (::fstat(f.fd, &st) != 0) {
      ::close(f.fd);
      fail("cannot stat '" + p + "': " + std::strerror(errno));
    }
    f.size = uint64_t(st.st_size);
    files.push_back(f);
    char first8[8] = {};
    if (f.size >= 8)
      readBytes(f, 0, 8, first8);
    uint64_t len = safetensorsHeaderLength(first8, f.size, p);
    std::string header(len, '\0');
    readBytes(f, 8, len, header.data());
    headerBytes += 8 + len;
    files.back().dataStart = 8 + len;
    for (SafetensorsEntry &e :
         parseSafetensorsHeader(header, f.size - 8 - len, p, skip)) {
      auto it = indexed.find(e.name);
      if (!indexed.empty() && it != indexed.end() && it->second != p)
        fail(where + ": names '" + it->second + "' for tensor '" + e.name +
             "', which is in '" + p + "'");
      entries.push_back(std::move(e));
      fileOf.push_back(files.size() - 1);
    }
  }
  for (const auto &[tensor, file] : indexed) {
    bool found = false;
    for (const SafetensorsEntry &e : entries)
      found |= e.name == tensor;
    if (!found)
      fail(where + ": tensor '" + tensor + "' is not in '" + file + "'");
  }
  // What each entry is read from: itself, but for a fused experts tensor
  // that the files keep per expert and projection, which becomes one entry
  // read from its parts.
  std::vector<std::vector<Part>> partsOf;
  {
    std::map<std::string, size_t> byName;
    for (size_t i = 0; i < entries.size(); ++i)
      byName.emplace(entries[i].name, i);
    std::vector<bool> fused(entries.size(), false);
    std::vector<SafetensorsEntry> fusedEntries;
    std::vector<std::vector<Part>> fusedParts;
    for (const WantedTensor &w : wanted) {
      if (byName.count(w.name))
        continue;
      std::vector<size_t> parts = expertEntries(w, entries, byName, where);
      if (parts.empty())
        continue;
      SafetensorsEntry e;
      e.name = w.name;
      e.dtype = entries[parts[0]].dtype;
      e.shape = w.shape;
      fusedEntries.push_back(std::move(e));
      fusedParts.emplace_back();
      for (size_t i : parts) {
        fused[i] = true;
        fusedParts.back().push_back({fileOf[i], entries[i]});
      }
    }
    std::vector<SafetensorsEntry> kept;
    for (size_t i = 0; i < entries.size(); ++i)
      if (!fused[i]) {
        kept.push_back(std::move(entries[i]));
        partsOf.push_back({{fileOf[i], kept.back()}});
      }
    for (size_t k = 0; k < fusedEntries.size(); ++k) {
      kept.push_back(std::move(fusedEntries[k]));
      partsOf.push_back(std::move(fusedParts[k]));
    }
    entries = std::move(kept);
  }
  // The model's tensors that are no parameter may be left over too.
  std::set<std::string> others = tied;
  std::map<std::string, const manifest::HfBuffer *> buffers;
  std::set<std::string> unusedNames;
  if (hf && hf->buffers)
    for (const manifest::HfBuffer &b : *hf->buffers)
      buffers[b.name] = &b;
  if (hf && hf->unused)
    unusedNames.insert(hf->unused->begin(), hf->unused->end());
  for (const auto &[name, b] : buffers)
    others.insert(name);
  others.insert(unusedNames.begin(), unusedNames.end());
  // Only an entry of the files (one part) can be an embedding, a buffer or
  // an unused tensor: a fused one is a parameter's.
  std::vector<size_t> pick = matchEntries(
      entries, wanted, where, others, [&](size_t head, size_t wte) {
        const Part &h = partsOf[head][0], &t = partsOf[wte][0];
        return readAll(h.file, h.entry) == readAll(t.file, t.entry);
      });
  std::vector<bool> picked(entries.size(), false);
  for (size_t w = 0; w < wanted.size(); ++w) {
    sources.push_back(partsOf[pick[w]]);
    wantedNames.push_back(wanted[w].name);
    picked[pick[w]] = true;
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    if (picked[i])
      continue;
    const auto &[f, e] = partsOf[i][0];
    if (auto it = buffers.find(e.name); it != buffers.end())
      checkBuffer(*it->second, e, readAll(f, e), files[f].path);
    else if (unusedNames.count(e.name))
      unused.push_back({f, e});
  }
}

std::vector<Tensor> WeightFiles::readUnused() {
  std::vector<Tensor> out;
  for (const auto &[f, e] : unused)
    out.push_back({e.name, e.shape, readAll(f, e), zrtDtypeOf(e.dtype)});
  return out;
}

WeightFiles::~WeightFiles() {
  for (File &f : files)
    ::close(f.fd);
}

uint64_t WeightFiles::totalBytes() const {
  uint64_t total = 0;
  for (const File &f : files)
    total += f.size;
  return total;
}

void WeightFiles::readBytes(const File &f, uint64_t offset, uint64_t n,
                            char *dst) {
  while (n > 0) {
    ssize_t got = ::pread(f.fd, dst, n, off_t(offset));
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      fail("cannot read '" + f.path + "' at byte " + std::to_string(offset) +
           ": " + (got < 0 ? std::strerror(errno) : "unexpected end"));
    dst += got;
    offset += uint64_t(got);
    n -= uint64_t(got);
  }
}

std::vector<float> WeightFiles::readAll(size_t f, const SafetensorsEntry &e) {
  std::string bytes(e.end - e.begin, '\0');
  readBytes(files[f], files[f].dataStart + e.begin, bytes.size(), bytes.data());
  dataBytes += bytes.size();
  std::vector<float> values(size_t(e.numel()));
  convertToFloat(e.dtype, bytes.data(), values.size(), values.data());
  return values;
}

void WeightFiles::read(size_t w, int64_t begin, int64_t end, float *dst) {
  // The parts' elements, one after the other, are the tensor's.
  int64_t first = 0;
  for (const auto &[f, e] : sources[w]) {
    int64_t n = e.numel();
    int64_t lo = std::max(begin, first), hi = std::min(end, first + n);
    if (lo < hi)
      readPart(f, e, lo - first, hi - first, dst + (lo - begin));
    first += n;
  }
}

void WeightFiles::readPart(size_t f, const SafetensorsEntry &e, int64_t begin,
                           int64_t end, float *dst) {
  uint64_t item = uint64_t(e.itemSize());
  std::string bytes(size_t(end - begin) * item, '\0');
  readBytes(files[f], files[f].dataStart + e.begin + uint64_t(begin) * item,
            bytes.size(), bytes.data());
  dataBytes += bytes.size();
  convertToFloat(e.dtype, bytes.data(), size_t(end - begin), dst);
  // A non-finite initial weight makes the first loss NaN or inf.
  for (int64_t k = 0; k < end - begin; ++k)
    if (!std::isfinite(dst[k]))
      fail(files[f].path + ": tensor '" + e.name + "' element " +
           std::to_string(begin + k) + " is " +
           (std::isnan(dst[k]) ? "NaN" : "infinite") +
           "; initial weights must be finite");
}
