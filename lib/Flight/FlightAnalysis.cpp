//===- FlightAnalysis.cpp - Reads and compares the ranks' flight records --===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Flight/FlightAnalysis.h"

#include "zero_rt/flight.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

using namespace llvm;

namespace {

using zrt::flight::Entry;
using zrt::flight::State;

/// One rank's record and its file.
struct Record : zrt::flight::Record {
  std::string file;

  const Entry *find(int64_t seq) const {
    for (const Entry &e : entries)
      if (e.seq == seq)
        return &e;
    return nullptr;
  }
  /// The oldest collective not yet done.
  const Entry *firstPending() const {
    for (const Entry &e : entries)
      if (e.state != State::Done)
        return &e;
    return nullptr;
  }
};

std::string members(const Entry &e) {
  std::string out;
  raw_string_ostream os(out);
  const zrt_rank_set &s = e.ranks;
  if (s.size <= 8) {
    for (int64_t i = 0; i < s.size; ++i)
      os << (i ? "," : "") << s.first + i * s.stride;
  } else {
    os << s.first << "," << s.first + s.stride << ",...,"
       << s.first + (s.size - 1) * s.stride;
  }
  return out;
}

/// `#seq op 'what' over group (ranks ...), N bytes, step S micro M`.
std::string describe(const Entry &e) {
  return formatv("#{0} {1} '{2}' over {3} (ranks {4}), {5} bytes, step {6} "
                 "micro step {7}",
                 e.seq, e.op, e.what, zrt::flight::valueOf(e.group), members(e),
                 e.bytes, e.step, e.micro)
      .str();
}

std::string rankList(ArrayRef<int64_t> ranks) {
  std::string out;
  for (auto [i, r] : enumerate(ranks))
    out +=
        (i ? (i + 1 == ranks.size() ? " and " : ", ") : "") + std::to_string(r);
  return out;
}

/// Line and column of byte `offset` in `text`.
std::pair<int, int> lineCol(StringRef text, size_t offset) {
  int line = 1, col = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return {line, col};
}

/// Reads `v` from `j` as zero_rt/flight.def lays it out; false when it is
/// not there as such, with `path` naming the key.
bool read(const json::Value &j, int64_t &v, std::string &) {
  std::optional<int64_t> i = j.getAsInteger();
  if (i)
    v = *i;
  return i.has_value();
}

bool read(const json::Value &j, std::string &v, std::string &) {
  std::optional<StringRef> s = j.getAsString();
  if (s)
    v = s->str();
  return s.has_value();
}

template <typename E, std::enable_if_t<std::is_enum_v<E>, int> = 0>
bool read(const json::Value &j, E &v, std::string &path) {
  std::string value;
  if (!read(j, value, path))
    return false;
  std::optional<E> e = zrt::flight::enumOf<E>(value);
  if (e)
    v = *e;
  return e.has_value();
}

bool read(const json::Value &j, zrt_rank_set &v, std::string &path) {
  const json::Array *a = j.getAsArray();
  return a && a->size() == 3 && read((*a)[0], v.first, path) &&
         read((*a)[1], v.stride, path) && read((*a)[2], v.size, path);
}

bool read(const json::Value &j, Entry &v, std::string &path);

template <typename T>
bool read(const json::Value &j, std::vector<T> &v, std::string &path) {
  const json::Array *a = j.getAsArray();
  if (!a)
    return false;
  for (const json::Value &element : *a) {
    std::string at = formatv("{0}[{1}]", path, v.size()).str();
    if (!read(element, v.emplace_back(), at)) {
      path = at;
      return false;
    }
  }
  return true;
}

/// An object of the record: every member of the table.
template <typename T>
bool readFields(const json::Value &j, T &v, std::string &path) {
  const json::Object *o = j.getAsObject();
  bool ok = o != nullptr;
  zrt::flight::visitFields(v, [&](const char *key, auto &field) {
    if (!ok)
      return;
    std::string at = path.empty() ? key : path + "." + key;
    const json::Value *member = o->get(key);
    ok = member && read(*member, field, at);
    if (!ok)
      path = at;
  });
  return ok;
}

bool read(const json::Value &j, Entry &v, std::string &path) {
  return readFields(j, v, path);
}

/// Reads and checks one record; on failure returns the message that names
/// the file and what is wrong with it.
Expected<Record> readRecord(const std::string &file) {
  auto buffer = MemoryBuffer::getFile(file);
  if (!buffer)
    return createStringError(buffer.getError(), "%s: cannot read: %s",
                             file.c_str(), buffer.getError().message().c_str());
  StringRef text = (*buffer)->getBuffer();
  auto bad = [&](size_t at, const Twine &what) {
    auto [line, col] = lineCol(text, at);
    return createStringError(inconvertibleErrorCode(), "%s:%d:%d: %s",
                             file.c_str(), line, col, what.str().c_str());
  };
  // The checksum covers every byte before its own key.
  std::string key = (Twine("\"") + zrt::flight::kChecksumKey + "\": \"").str();
  size_t at = text.rfind(key);
  if (at == StringRef::npos)
    return bad(text.size(),
               "truncated flight record: it ends before its checksum");
  StringRef rest = text.drop_front(at + key.size());
  StringRef hex = rest.take_while([](char c) { return isHexDigit(c); });
  uint64_t stored = 0;
  if (hex.size() != 16 || hex.getAsInteger(16, stored) ||
      !rest.drop_front(16).starts_with("\"}"))
    return bad(at, "truncated flight record: its checksum is cut short");
  uint64_t actual = zrt::flight::checksum(text.take_front(at));
  if (actual != stored)
    return bad(at, formatv("corrupt flight record: checksum {0:x-16} of its "
                           "contents, {1} recorded",
                           actual, hex)
                       .str());
  auto parsed = json::parse(text);
  if (!parsed)
    return bad(0, "corrupt flight record: " + toString(parsed.takeError()));
  Record r;
  r.file = file;
  // A record of another version is named as such, whatever it holds.
  using zrt::flight::kVersion;
  const json::Object *o = parsed->getAsObject();
  std::optional<int64_t> version =
      o ? o->getInteger(Record::versionKey) : std::nullopt;
  if (!version || *version != kVersion)
    return bad(0,
               formatv("flight record version {0}, this tool reads {1}",
                       version ? std::to_string(*version) : "missing", kVersion)
                   .str());
  std::string path;
  if (!readFields(*parsed, static_cast<zrt::flight::Record &>(r), path))
    return bad(0,
               "corrupt flight record: " + path + " is missing or malformed");
  if (r.world < 1 || r.rank < 0 || r.rank >= r.world)
    return bad(0, formatv("corrupt flight record: rank {0} of a world of {1}",
                          r.rank, r.world)
                      .str());
  return r;
}

/// The analysis of the whole records; returns whether it found nothing to
/// report beyond the hang itself.
void analyze(std::vector<Record> &records, raw_ostream &os,
             std::vector<int64_t> &behind) {
  llvm::sort(records,
             [](const Record &a, const Record &b) { return a.rank < b.rank; });
  for (const Record &r : records) {
    os << "rank " << r.rank << ": issued " << r.nextSeq << " collective(s)";
    if (const Entry *e = r.firstPending())
      os << "; waits in " << describe(*e) << " ("
         << zrt::flight::valueOf(e->state) << ")";
    else if (!r.entries.empty())
      os << "; completed them all (last " << describe(r.entries.back()) << ")";
    os << " [record: " << r.reason << "]\n";
  }
  if (records.empty())
    return;
  // Collectives every rank issued must agree (the schedule is SPMD).
  int64_t common = records.front().nextSeq, capacity = 0;
  for (const Record &r : records) {
    common = std::min(common, r.nextSeq);
    capacity = std::max(capacity, r.capacity);
  }
  for (int64_t seq = std::max<int64_t>(0, common - capacity); seq < common;
       ++seq) {
    const Entry *ref = nullptr;
    int64_t refRank = 0;
    for (const Record &r : records) {
      const Entry *e = r.find(seq);
      if (!e)
        continue;
      if (!ref) {
        ref = e;
        refRank = r.rank;
      } else if (e->op != ref->op || e->bytes != ref->bytes ||
                 e->ranks.first != ref->ranks.first ||
                 e->ranks.stride != ref->ranks.stride ||
                 e->ranks.size != ref->ranks.size) {
        os << "mismatch at sequence number " << seq << ": rank " << refRank
           << " has " << describe(*ref) << ", rank " << r.rank << " has "
           << describe(*e) << "\n";
      }
    }
  }
  std::vector<int64_t> stopped, ahead;
  for (const Record &r : records)
    (r.nextSeq == common ? stopped : ahead).push_back(r.rank);
  if (!ahead.empty()) {
    behind = stopped;
    const Entry *waitedIn = nullptr;
    for (const Record &r : records)
      if (!waitedIn && r.nextSeq > common)
        waitedIn = r.find(common);
    os << "divergence at sequence number " << common << ": rank"
       << (stopped.size() > 1 ? "s " : " ") << rankList(stopped)
       << " stopped before it; rank" << (ahead.size() > 1 ? "s " : " ")
       << rankList(ahead) << " issued it";
    if (waitedIn)
      os << ": " << describe(*waitedIn);
    os << "\n";
    for (int64_t rank : stopped)
      for (const Record &r : records)
        if (r.rank == rank && r.find(common - 1))
          os << "rank " << rank
             << "'s last collective: " << describe(*r.find(common - 1)) << " ("
             << zrt::flight::valueOf(r.find(common - 1)->state) << ")\n";
  } else {
    // Every rank issued the same collectives: the oldest one not done.
    std::vector<int64_t> waiting;
    const Entry *pending = nullptr;
    for (const Record &r : records)
      if (const Entry *e = r.firstPending()) {
        if (!pending || e->seq < pending->seq)
          pending = e;
      }
    if (!pending) {
      os << "no divergence: every rank issued and completed " << common
         << " collective(s)\n";
    } else {
      for (const Record &r : records)
        if (const Entry *e = r.find(pending->seq); e && e->state != State::Done)
          waiting.push_back(r.rank);
      os << "no divergence in issue order: every rank issued " << common
         << " collective(s); rank" << (waiting.size() > 1 ? "s " : " ")
         << rankList(waiting) << " wait in " << describe(*pending) << "\n";
    }
  }
  if (llvm::any_of(records,
                   [](const Record &r) { return r.reason == "SIGUSR1"; }))
    os << "note: records written on SIGUSR1 are taken at slightly different "
          "moments on each rank; a difference there is progress, not a "
          "hang\n";
}

/// The records in `dir` by rank.
std::map<int64_t, std::string> recordsByRank(StringRef dir,
                                             std::error_code &ec) {
  std::map<int64_t, std::string> files;
  for (sys::fs::directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec)) {
    StringRef name = sys::path::filename(it->path());
    int64_t rank;
    if (name.consume_front("flight-rank") && name.consume_back(".json") &&
        !name.getAsInteger(10, rank) && rank >= 0)
      files[rank] = it->path();
  }
  return files;
}

} // namespace

std::vector<std::string> zero::flight::findRecords(StringRef dir) {
  std::error_code ec;
  std::vector<std::string> paths;
  for (auto &[rank, path] : recordsByRank(dir, ec))
    paths.push_back(path);
  return paths;
}

int zero::flight::analyzeDirectory(StringRef dir, StringRef tool,
                                   raw_ostream &out, raw_ostream &err,
                                   std::vector<int64_t> *stoppedEarly) {
  std::error_code ec;
  std::map<int64_t, std::string> files = recordsByRank(dir, ec);
  if (ec) {
    err << tool << ": error: " << dir << ": " << ec.message() << "\n";
    return 1;
  }
  if (files.empty()) {
    err << tool << ": error: " << dir
        << ": no flight record (flight-rank<R>.json) in it\n";
    return 1;
  }
  bool whole = true;
  std::vector<Record> records;
  int64_t world = 0;
  for (auto &[rank, file] : files) {
    Expected<Record> r = readRecord(file);
    if (!r) {
      err << tool << ": error: " << toString(r.takeError()) << "\n";
      whole = false;
      continue;
    }
    if (r->rank != rank) {
      err << tool << ": error: " << file << ": holds the record of rank "
          << r->rank << "\n";
      whole = false;
      continue;
    }
    if (world && r->world != world) {
      err << tool << ": error: " << file << ": a world of " << r->world
          << " rank(s), other records have " << world << "\n";
      whole = false;
      continue;
    }
    world = r->world;
    records.push_back(std::move(*r));
  }
  // A missing record is named by the path the rank would have written.
  for (int64_t rank = 0; rank < world; ++rank)
    if (!files.count(rank)) {
      SmallString<256> path(dir);
      sys::path::append(path, formatv("flight-rank{0}.json", rank).str());
      err << tool << ": error: " << path << ": missing: rank " << rank << " of "
          << world << " wrote no flight record\n";
      whole = false;
    }
  for (auto &[rank, file] : files)
    if (world && rank >= world) {
      err << tool << ": error: " << file << ": rank " << rank
          << " is outside the world of " << world << "\n";
      whole = false;
    }
  out << tool << ": " << records.size() << " of "
      << (world ? world : int64_t(files.size()))
      << " rank(s) have a whole flight record\n";
  std::vector<int64_t> behind;
  analyze(records, out, behind);
  if (stoppedEarly)
    *stoppedEarly = behind;
  return whole ? 0 : 1;
}
