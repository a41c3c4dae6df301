//===- Files.cpp - File formats of the training driver --------------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "Data/Files.h"
#include "Support/Half.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <sys/stat.h>
#include <unistd.h>

using namespace zrt;

void zrt::fail(const std::string &msg) { throw std::runtime_error(msg); }

namespace {

std::string errnoText() { return std::strerror(errno); }

std::function<void(const std::string &)> &beforeRenameHook() {
  static std::function<void(const std::string &)> hook;
  return hook;
}

} // namespace

void zrt::writeAll(int fd, const char *p, size_t n, const std::string &path) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      fail("cannot write '" + path + "': " + errnoText());
    }
    p += w;
    n -= size_t(w);
  }
}

std::string zrt::dirOf(const std::string &path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string zrt::readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    fail("cannot open '" + path + "': " + errnoText());
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad())
    fail("cannot read '" + path + "'");
  return ss.str();
}

void zrt::writeFileAtomic(const std::string &path, const std::string &data) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    fail("cannot create '" + tmp + "': " + errnoText());
  try {
    writeAll(fd, data.data(), data.size(), tmp);
    if (::fsync(fd) != 0)
      fail("cannot fsync '" + tmp + "': " + errnoText());
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  ::close(fd);
  if (beforeRenameHook())
    beforeRenameHook()(path);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string err = errnoText();
    ::unlink(tmp.c_str());
    fail("cannot rename '" + tmp + "' to '" + path + "': " + err);
  }
  // The rename itself is durable only once the directory is synced.
  int dir = ::open(dirOf(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

void zrt::setBeforeRenameHook(
    std::function<void(const std::string &path)> hook) {
  beforeRenameHook() = std::move(hook);
}

void zrt::makeDirs(const std::string &path) {
  for (size_t pos = 1; pos <= path.size(); ++pos) {
    if (pos != path.size() && path[pos] != '/')
      continue;
    std::string prefix = path.substr(0, pos);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST)
      fail("cannot create directory '" + prefix + "': " + errnoText());
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    fail("'" + path + "' is not a directory");
}

bool zrt::isDirectory(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

namespace {

/// Creates and removes a file in `dir`: the only test that also sees
/// read-only file systems and, for root, every other reason.
void probeDirectory(const std::string &dir, const std::string &what) {
  std::string probe = dir + "/.zrt-write-test." + std::to_string(::getpid());
  int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    fail(what + ": cannot create a file in '" + dir + "': " + errnoText());
  ::close(fd);
  ::unlink(probe.c_str());
}

} // namespace

void zrt::checkWritableFile(const std::string &path,
                            const std::string &option) {
  std::string what = "cannot write " + option + " '" + path + "'";
  if (isDirectory(path))
    fail(what + ": it is a directory");
  std::string dir = dirOf(path);
  if (!isDirectory(dir))
    fail(what + ": '" + dir + "' is not a directory");
  probeDirectory(dir, what);
}

void zrt::checkWritableDir(const std::string &dir, const std::string &option) {
  std::string what = "cannot write " + option + " '" + dir + "'";
  try {
    makeDirs(dir);
  } catch (const std::runtime_error &e) {
    fail(what + ": " + e.what());
  }
  probeDirectory(dir, what);
}

bool zrt::isRegularFile(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

uint32_t zrt::crc32(const void *data, size_t size, uint32_t crc) {
  static const auto table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k)
        c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  const auto *p = static_cast<const unsigned char *>(data);
  crc = ~crc;
  for (size_t i = 0; i < size; ++i)
    crc = table[(crc ^ p[i]) & 0xffu] ^ (crc >> 8);
  return ~crc;
}

//===----------------------------------------------------------------------===//
// .npy
//===----------------------------------------------------------------------===//

int64_t NpyArray::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

namespace {

/// A reader of the Python dict literal in an .npy header, e.g.
/// {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
class DictReader {
public:
  DictReader(const std::string &text, const std::string &name)
      : s(text), name(name) {}

  void skipSpace() {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i])))
      ++i;
  }
  bool consume(char c) {
    skipSpace();
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!consume(c))
      error(std::string("expected '") + c + "'");
  }
  std::string string() {
    skipSpace();
    if (i >= s.size() || (s[i] != '\'' && s[i] != '"'))
      error("expected a string");
    char quote = s[i++];
    size_t end = s.find(quote, i);
    if (end == std::string::npos)
      error("unterminated string");
    std::string v = s.substr(i, end - i);
    i = end + 1;
    return v;
  }
  bool boolean() {
    skipSpace();
    for (const char *word : {"True", "False"})
      if (s.compare(i, std::strlen(word), word) == 0) {
        i += std::strlen(word);
        return word[0] == 'T';
      }
    error("expected True or False");
  }
  std::vector<int64_t> tuple() {
    expect('(');
    std::vector<int64_t> dims;
    while (!consume(')')) {
      skipSpace();
      size_t start = i;
      while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])))
        ++i;
      if (start == i)
        error("expected a dimension");
      std::string digits = s.substr(start, i - start);
      int64_t d = 0;
      for (char c : digits)
        if (__builtin_mul_overflow(d, int64_t(10), &d) ||
            __builtin_add_overflow(d, int64_t(c - '0'), &d))
          fail(name + ": the .npy header's 'shape' has a dimension " + digits +
               " beyond 2^63");
      dims.push_back(d);
      if (!consume(',')) {
        expect(')');
        break;
      }
    }
    return dims;
  }
  [[noreturn]] void error(const std::string &what) {
    fail(name + ": malformed .npy header (" + what + " at offset " +
         std::to_string(i) + "): " + s);
  }

private:
  const std::string &s;
  const std::string &name;
  size_t i = 0;
};

} // namespace

bool zrt::isNpy(const char *bytes, size_t size) {
  return size >= 6 && std::memcmp(bytes, "\x93NUMPY", 6) == 0;
}

int64_t NpyHeader::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

NpyHeader zrt::parseNpyHeader(const char *bytes, size_t size,
                              const std::string &name) {
  if (size < 10 || !isNpy(bytes, size))
    fail(name + ": not a .npy file (bad magic)");
  int major = static_cast<unsigned char>(bytes[6]);
  size_t headerLen, headerStart;
  auto byteAt = [&](size_t k) {
    return size_t(static_cast<unsigned char>(bytes[k]));
  };
  if (major == 1) {
    headerLen = byteAt(8) | byteAt(9) << 8;
    headerStart = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12)
      fail(name + ": truncated .npy header");
    headerLen =
        byteAt(8) | byteAt(9) << 8 | byteAt(10) << 16 | byteAt(11) << 24;
    headerStart = 12;
  } else {
    fail(name + ": unsupported .npy format version " + std::to_string(major));
  }
  if (size < headerStart + headerLen)
    fail(name + ": truncated .npy header");
  std::string header(bytes + headerStart, headerLen);

  NpyHeader array;
  bool haveDescr = false, haveOrder = false, haveShape = false, fortran = false;
  DictReader r(header, name);
  r.expect('{');
  while (!r.consume('}')) {
    std::string key = r.string();
    r.expect(':');
    if (key == "descr") {
      array.descr = r.string();
      haveDescr = true;
    } else if (key == "fortran_order") {
      fortran = r.boolean();
      haveOrder = true;
    } else if (key == "shape") {
      array.shape = r.tuple();
      haveShape = true;
    } else {
      r.error("unknown key '" + key + "'");
    }
    if (!r.consume(',')) {
      r.expect('}');
      break;
    }
  }
  if (!haveDescr || !haveOrder || !haveShape)
    fail(name + ": .npy header lacks descr, fortran_order or shape");
  if (fortran)
    fail(name + ": Fortran-order arrays are not supported; save a C-order "
                "array (numpy.ascontiguousarray)");

  // Normalize the byte order: '=' is native (little endian here), '|' is
  // for one-byte types.
  std::string &d = array.descr;
  if (d.size() < 3)
    fail(name + ": unsupported dtype '" + d + "'");
  if (d[0] == '=')
    d[0] = '<';
  if (d[0] == '>' && d.substr(1) != "u1" && d.substr(1) != "i1")
    fail(name + ": big-endian dtype '" + d + "' is not supported");
  if (d[0] == '|' || d[0] == '>')
    d[0] = '<';
  static const std::pair<const char *, int64_t> kinds[] = {
      {"<f4", 4}, {"<f8", 8}, {"<f2", 2}, {"<i1", 1}, {"<i2", 2}, {"<i4", 4},
      {"<i8", 8}, {"<u1", 1}, {"<u2", 2}, {"<u4", 4}, {"<u8", 8}, {"<b1", 1}};
  for (auto [kind, size] : kinds)
    if (d == kind)
      array.itemSize = size;
  if (array.itemSize == 0)
    fail(name + ": unsupported dtype '" + d + "'");

  size_t dataStart = headerStart + headerLen;
  // The product must not wrap: a wrapped count could match the data size.
  int64_t expected = array.itemSize;
  for (int64_t dim : array.shape)
    if (__builtin_mul_overflow(expected, dim, &expected)) {
      std::string shape;
      for (size_t k = 0; k < array.shape.size(); ++k)
        shape += (k ? ", " : "") + std::to_string(array.shape[k]);
      fail(name + ": the .npy header's 'shape' (" + shape +
           ") has more bytes than a file can hold");
    }
  if (int64_t(size - dataStart) != expected)
    fail(name + ": expected " + std::to_string(expected) +
         " data bytes for the shape in the header, found " +
         std::to_string(size - dataStart));
  array.dataOffset = dataStart;
  return array;
}

NpyArray zrt::parseNpy(const std::string &bytes, const std::string &name) {
  NpyHeader header = parseNpyHeader(bytes.data(), bytes.size(), name);
  NpyArray array;
  array.descr = std::move(header.descr);
  array.shape = std::move(header.shape);
  array.itemSize = header.itemSize;
  array.data = bytes.substr(header.dataOffset);
  return array;
}

std::string zrt::writeNpy(const NpyArray &array) {
  std::string header =
      "{'descr': '" + array.descr + "', 'fortran_order': False, 'shape': (";
  for (size_t k = 0; k < array.shape.size(); ++k)
    header += (k ? ", " : "") + std::to_string(array.shape[k]);
  // A 1-tuple is written (n,) as Python does.
  header += array.shape.size() == 1 ? ",), }" : "), }";
  // The data starts at a multiple of 64 bytes; the header ends in '\n'.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += char(header.size() & 0xff);
  out += char(header.size() >> 8);
  return out + header + array.data;
}

//===----------------------------------------------------------------------===//
// safetensors
//===----------------------------------------------------------------------===//

// The names are the manifest's or a checkpoint's, both parsed JSON and so
// UTF-8, which dump() needs.
std::string
zrt::writeSafetensors(const std::vector<Tensor> &tensors,
                      const std::map<std::string, std::string> &metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty())
    header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const Tensor &t : tensors) {
    if (t.dtype != ZRT_F32 && t.dtype != ZRT_BF16 && t.dtype != ZRT_F16)
      fail("tensor '" + t.name + "' has dtype " + std::to_string(t.dtype) +
           ", not F32, BF16 or F16");
    uint64_t bytes = t.data.size() * (t.dtype == ZRT_F32 ? 4 : 2);
    header[t.name] = {{"dtype", t.dtype == ZRT_F32    ? "F32"
                                : t.dtype == ZRT_BF16 ? "BF16"
                                                      : "F16"},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  uint64_t len = text.size();
  for (int k = 0; k < 8; ++k)
    out[k] = char((len >> (8 * k)) & 0xff);
  out += text;
  out.reserve(out.size() + offset);
  for (const Tensor &t : tensors) {
    if (t.dtype == ZRT_F32) {
      out.append(reinterpret_cast<const char *>(t.data.data()),
                 t.data.size() * sizeof(float));
      continue;
    }
    for (float v : t.data) {
      uint16_t h = t.dtype == ZRT_BF16 ? floatToBf16(v) : floatToF16Soft(v);
      out += char(h & 0xff);
      out += char(h >> 8);
    }
  }
  return out;
}

namespace {

/// The JSON text of a value, shortened for a message.
std::string shortDump(const nlohmann::ordered_json &v) {
  std::string text = v.dump();
  return text.size() > 80 ? text.substr(0, 77) + "..." : text;
}

/// A non-negative integer of a safetensors header field ("shape",
/// "data_offsets"): JSON integers only, so that 8.9 or 1e300 is refused
/// rather than truncated.
uint64_t headerCount(const nlohmann::ordered_json &v, const std::string &where,
                     const char *field) {
  if (v.is_number_unsigned())
    return v.get<uint64_t>();
  if (v.is_number_integer())
    fail(where + ": " + field + " has a negative entry " + v.dump());
  fail(where + ": " + field + " has an entry " + shortDump(v) +
       " that is not an integer");
}

} // namespace

uint64_t zrt::safetensorsHeaderLength(const char *first8, uint64_t fileSize,
                                      const std::string &name) {
  if (fileSize < 8)
    fail(name + ": not a safetensors file (shorter than 8 bytes)");
  uint64_t len = 0;
  for (int k = 0; k < 8; ++k)
    len |= uint64_t(static_cast<unsigned char>(first8[k])) << (8 * k);
  if (len > fileSize - 8)
    fail(name + ": not a safetensors file (header length " +
         std::to_string(len) + " exceeds the file)");
  return len;
}

std::vector<Tensor>
zrt::parseSafetensors(const std::string &bytes, const std::string &name,
                      const std::function<bool(const std::string &)> &skip) {
  uint64_t len = safetensorsHeaderLength(bytes.data(), bytes.size(), name);
  uint64_t dataSize = bytes.size() - 8 - len;
  const char *data = bytes.data() + 8 + len;
  std::vector<SafetensorsEntry> entries =
      parseSafetensorsHeader(bytes.substr(8, len), dataSize, name, skip);
  std::vector<Tensor> tensors;
  for (const SafetensorsEntry &e : entries) {
    if (skip && skip(e.name))
      continue;
    Tensor t;
    t.name = e.name;
    t.shape = e.shape;
    t.data.resize(size_t(e.numel()));
    convertToFloat(e.dtype, data + e.begin, t.data.size(), t.data.data());
    tensors.push_back(std::move(t));
  }
  return tensors;
}

int64_t SafetensorsEntry::itemSize() const { return dtype == "F32" ? 4 : 2; }

int64_t SafetensorsEntry::numel() const {
  return int64_t((end - begin) / uint64_t(itemSize()));
}

void zrt::convertToFloat(const std::string &dtype, const char *src, size_t n,
                         float *dst) {
  if (dtype == "F32") {
    std::memcpy(dst, src, n * 4);
    return;
  }
  // Both widen to fp32 exactly.
  bool bf16 = dtype == "BF16";
  for (size_t k = 0; k < n; ++k) {
    uint16_t h;
    std::memcpy(&h, src + 2 * k, 2);
    dst[k] = bf16 ? bf16ToFloat(h) : f16ToFloatSoft(h);
  }
}

std::vector<SafetensorsEntry> zrt::parseSafetensorsHeader(
    const std::string &text, uint64_t dataSize, const std::string &name,
    const std::function<bool(const std::string &)> &skip) {
  // JSON allows duplicate keys (the last one wins); the format does not: a
  // tensor named twice would be read from one of two places.
  std::vector<std::set<std::string>> keysOfOpenObjects;
  std::string duplicate;
  auto checkKeys = [&](int, nlohmann::ordered_json::parse_event_t event,
                       nlohmann::ordered_json &parsed) {
    using Event = nlohmann::ordered_json::parse_event_t;
    if (event == Event::object_start)
      keysOfOpenObjects.emplace_back();
    else if (event == Event::object_end)
      keysOfOpenObjects.pop_back();
    else if (event == Event::key && duplicate.empty() &&
             !keysOfOpenObjects.back().insert(parsed.get<std::string>()).second)
      duplicate = parsed.get<std::string>();
    return true;
  };
  nlohmann::ordered_json header;
  try {
    header = nlohmann::ordered_json::parse(text, checkKeys);
  } catch (const nlohmann::json::exception &e) {
    fail(name + ": malformed safetensors header: " + e.what());
  }
  if (!duplicate.empty())
    fail(name + ": the safetensors header has the key '" + duplicate +
         "' twice in one object (names and fields must be unique)");
  if (!header.is_object())
    fail(name + ": the safetensors header is not a JSON object");

  // Every entry first, read or skipped: the format requires the tensors to
  // cover the data section exactly, without overlaps or holes.
  std::vector<SafetensorsEntry> entries;
  for (auto &[key, entry] : header.items()) {
    if (key == "__metadata__") {
      if (!entry.is_object())
        fail(name + ": __metadata__ is not a JSON object");
      continue;
    }
    std::string where = name + ": tensor '" + key + "'";
    if (!entry.is_object())
      fail(where + " is not a JSON object");
    for (const char *field : {"dtype", "shape", "data_offsets"})
      if (!entry.contains(field))
        fail(where + " lacks \"" + field + "\"");
    SafetensorsEntry e;
    e.name = key;
    if (!entry["dtype"].is_string())
      fail(where + ": dtype " + shortDump(entry["dtype"]) + " is not a string");
    e.dtype = entry["dtype"].get<std::string>();
    const auto &shape = entry["shape"];
    if (!shape.is_array())
      fail(where + ": shape " + shortDump(shape) + " is not an array");
    // Element count and bytes, refusing overflow (a shape whose product
    // wraps could otherwise match small data_offsets).
    uint64_t numel = 1;
    for (const auto &d : shape) {
      uint64_t v = headerCount(d, where, "shape");
      if (v > uint64_t(INT64_MAX) || __builtin_mul_overflow(numel, v, &numel) ||
          numel > uint64_t(INT64_MAX))
        fail(where + ": shape " + shortDump(shape) +
             " has more elements than a file can hold");
      e.shape.push_back(int64_t(v));
    }
    const auto &offsets = entry["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2)
      fail(where + ": data_offsets " + shortDump(offsets) +
           " is not a pair [begin, end]");
    e.begin = headerCount(offsets[0], where, "data_offsets");
    e.end = headerCount(offsets[1], where, "data_offsets");
    if (e.begin > e.end || e.end > dataSize)
      fail(where + " has data_offsets " + offsets.dump() +
           " outside the data section (" + std::to_string(dataSize) +
           " bytes)");
    bool skipped = skip && skip(key);
    if (!skipped) {
      uint64_t itemSize = 0;
      if (e.dtype == "F32")
        itemSize = 4;
      else if (e.dtype == "BF16" || e.dtype == "F16")
        itemSize = 2;
      else
        fail(where + " has dtype " + e.dtype +
             "; only F32, BF16 and F16 are supported");
      uint64_t need;
      if (__builtin_mul_overflow(numel, itemSize, &need) ||
          e.end - e.begin != need)
        fail(where + ": data_offsets span " + std::to_string(e.end - e.begin) +
             " bytes, the shape needs " +
             (need / itemSize == numel ? std::to_string(need)
                                       : std::string("more than 2^64")));
    }
    entries.push_back(std::move(e));
  }
  std::vector<const SafetensorsEntry *> byOffset;
  for (const SafetensorsEntry &e : entries)
    byOffset.push_back(&e);
  std::stable_sort(byOffset.begin(), byOffset.end(),
                   [](const SafetensorsEntry *a, const SafetensorsEntry *b) {
                     return a->begin < b->begin;
                   });
  uint64_t covered = 0;
  const SafetensorsEntry *previous = nullptr;
  for (const SafetensorsEntry *e : byOffset) {
    if (e->begin < covered)
      fail(name + ": tensors '" + previous->name + "' (data_offsets [" +
           std::to_string(previous->begin) + ", " +
           std::to_string(previous->end) + "]) and '" + e->name + "' ([" +
           std::to_string(e->begin) + ", " + std::to_string(e->end) +
           "]) overlap");
    if (e->begin > covered)
      fail(name + ": bytes [" + std::to_string(covered) + ", " +
           std::to_string(e->begin) +
           ") of the data section belong to no tensor (the format allows "
           "no holes)");
    covered = e->end;
    previous = e;
  }
  if (covered != dataSize)
    fail(name + ": the data section has " + std::to_string(dataSize) +
         " bytes, the tensors end at byte " + std::to_string(covered));
  return entries;
}

size_t zrt::editDistance(const std::string &a, const std::string &b) {
  std::vector<std::vector<size_t>> d(a.size() + 1,
                                     std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i)
    d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j)
    d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] =
          std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

namespace {

constexpr char kTransformerPrefix[] = "transformer.";

/// `name` without Hugging Face's `transformer.` prefix, or empty.
std::string baseModelName(const std::string &name) {
  size_t n = sizeof(kTransformerPrefix) - 1;
  return name.compare(0, n, kTransformerPrefix) == 0 ? name.substr(n) : "";
}

/// Whether `name` is a GPT-2 attention-mask buffer: [transformer.]h.N.attn.
/// bias or masked_bias (constants, not parameters).
bool isAttentionBuffer(const std::string &name) {
  std::string base = baseModelName(name);
  const std::string &s = base.empty() ? name : base;
  if (s.compare(0, 2, "h.") != 0)
    return false;
  size_t i = 2;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])))
    ++i;
  if (i == 2)
    return false;
  std::string rest = s.substr(i);
  return rest == ".attn.bias" || rest == ".attn.masked_bias";
}

/// Whether `name` is a buffer Hugging Face files may hold beside the
/// parameters: GPT-2's attention masks or Llama's rotary inverse frequencies
/// (model.layers.N.self_attn.rotary_emb.inv_freq, model.rotary_emb.inv_freq),
/// constants the program computes itself.
bool isConstantBuffer(const std::string &name) {
  static const std::string kInvFreq = "rotary_emb.inv_freq";
  if (name.size() >= kInvFreq.size() &&
      name.compare(name.size() - kInvFreq.size(), kInvFreq.size(), kInvFreq) ==
          0)
    return true;
  return isAttentionBuffer(name);
}

/// The token embeddings a tied `lm_head.weight` shares (GPT-2, Llama).
bool isTiedEmbedding(const std::string &name) {
  return name == "transformer.wte.weight" ||
         name == "model.embed_tokens.weight";
}

} // namespace

std::string zrt::shapeText(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

namespace {

/// For each wanted tensor, the index of the tensor of `tensors` (read from
/// `file`; anything with a name and a shape) that supplies it, by
/// matchWeights' rules. A tensor left over is allowed when it is a buffer,
/// when it is named in `tied` (another name of a wanted parameter, saved
/// twice), or when it is an `lm_head.weight` for which `equalsEmbedding(i,
/// j)` says it holds the values of the tied embedding, tensor j.
template <typename T>
std::vector<size_t>
pickTensors(const std::vector<T> &tensors,
            const std::vector<WantedTensor> &wanted, const std::string &file,
            const std::set<std::string> &tied,
            const std::function<bool(size_t, size_t)> &equalsEmbedding) {
  std::map<std::string, size_t> byName;
  for (size_t i = 0; i < tensors.size(); ++i)
    if (!byName.emplace(tensors[i].name, i).second)
      fail(file + ": tensor '" + tensors[i].name + "' appears twice");
  std::vector<size_t> pick(wanted.size(), SIZE_MAX);
  std::vector<bool> used(tensors.size(), false);
  for (size_t w = 0; w < wanted.size(); ++w) {
    auto it = byName.find(wanted[w].name);
    if (it == byName.end()) {
      std::string base = baseModelName(wanted[w].name);
      if (!base.empty())
        it = byName.find(base);
    }
    if (it != byName.end() && !used[it->second]) {
      pick[w] = it->second;
      used[it->second] = true;
    }
  }
  for (size_t w = 0; w < wanted.size(); ++w) {
    if (pick[w] != SIZE_MAX)
      continue;
    // The closest name nothing else took is most likely the one meant.
    const std::string &name = wanted[w].name;
    std::string base = baseModelName(name);
    const std::string *closest = nullptr;
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (used[i] || isConstantBuffer(tensors[i].name))
        continue;
      size_t d = editDistance(name, tensors[i].name);
      if (!base.empty())
        d = std::min(d, editDistance(base, tensors[i].name));
      if (d < best) {
        best = d;
        closest = &tensors[i].name;
      }
    }
    fail(file + ": the weights have no tensor '" + name + "'" +
         (closest ? "; closest: '" + *closest + "'" : std::string()));
  }
  for (size_t w = 0; w < wanted.size(); ++w) {
    const T &t = tensors[pick[w]];
    if (t.shape != wanted[w].shape)
      fail(file + ": tensor '" + t.name + "' has shape " + shapeText(t.shape) +
           ", the program's parameter '" + wanted[w].name + "' has shape " +
           shapeText(wanted[w].shape));
  }
  // A tied head saved next to the embedding it shares.
  size_t wte = SIZE_MAX;
  bool wantsHead = false;
  for (size_t w = 0; w < wanted.size(); ++w) {
    wantsHead |= wanted[w].name == "lm_head.weight";
    if (isTiedEmbedding(wanted[w].name))
      wte = pick[w];
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    const T &t = tensors[i];
    if (used[i] || isConstantBuffer(t.name) || tied.count(t.name))
      continue;
    if (t.name == "lm_head.weight" && !wantsHead && wte != SIZE_MAX &&
        t.shape == tensors[wte].shape && equalsEmbedding(i, wte))
      continue;
    fail(file + ": the weights have tensor '" + t.name +
         "', which is no parameter of the program");
  }
  return pick;
}

} // namespace

std::vector<Tensor> zrt::matchWeights(std::vector<Tensor> tensors,
                                      const std::vector<WantedTensor> &wanted,
                                      const std::string &file) {
  std::vector<size_t> pick =
      pickTensors(tensors, wanted, file, {}, [&](size_t head, size_t wte) {
        return std::memcmp(tensors[head].data.data(), tensors[wte].data.data(),
                           tensors[head].data.size() * sizeof(float)) == 0;
      });
  std::vector<Tensor> out;
  out.reserve(wanted.size());
  for (size_t w = 0; w < wanted.size(); ++w) {
    out.push_back(std::move(tensors[pick[w]]));
    out.back().name = wanted[w].name;
  }
  return out;
}

std::vector<size_t>
zrt::matchEntries(const std::vector<SafetensorsEntry> &entries,
                  const std::vector<WantedTensor> &wanted,
                  const std::string &file, const std::set<std::string> &tied,
                  const std::function<bool(size_t, size_t)> &equalsEmbedding) {
  return pickTensors(entries, wanted, file, tied, equalsEmbedding);
}

bool zrt::isWeightsBuffer(const std::string &name,
                          const std::vector<WantedTensor> &wanted) {
  if (!isConstantBuffer(name))
    return false;
  for (const WantedTensor &w : wanted)
    if (w.name == name || w.name == kTransformerPrefix + name)
      return false;
  return true;
}
