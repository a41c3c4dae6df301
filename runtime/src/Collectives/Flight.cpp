//===- Flight.cpp - The flight recorder of a rank's collectives -----------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "Collectives/Flight.h"

#include "Program/Manifest.h"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>

using namespace zrt;

namespace {

static_assert(int(flight::RankSetKind::Group) == ZRT_RANKS_GROUP &&
                  int(flight::RankSetKind::Hpz) == ZRT_RANKS_HPZ &&
                  int(flight::RankSetKind::Replicas) == ZRT_RANKS_REPLICAS &&
                  int(flight::RankSetKind::World) == ZRT_RANKS_WORLD &&
                  int(flight::RankSetKind::Sequence) == ZRT_RANKS_SEQUENCE &&
                  int(flight::RankSetKind::Expert) == ZRT_RANKS_EXPERT &&
                  int(flight::RankSetKind::ExpertReplicas) ==
                      ZRT_RANKS_EXPERT_REPLICAS,
              "flight.def's rank set kinds follow zero_rt/topology.h's");

/// The record's JSON, as zero_rt/flight.def lays it out.
void write(std::string &out, int64_t v) { out += std::to_string(v); }

void write(std::string &out, const std::string &v) {
  out += '"';
  out += v;
  out += '"';
}

template <typename E, std::enable_if_t<std::is_enum_v<E>, int> = 0>
void write(std::string &out, E v) {
  write(out, std::string(flight::valueOf(v)));
}

void write(std::string &out, const zrt_rank_set &v) {
  out += "[" + std::to_string(v.first) + ", " + std::to_string(v.stride) +
         ", " + std::to_string(v.size) + "]";
}

template <typename T>
void write(std::string &out, const std::vector<T> &v);

/// The members of object `v`, without its closing brace.
template <typename T>
void writeFields(std::string &out, const T &v) {
  const char *sep = "{";
  flight::visitFields(v, [&](const char *key, const auto &field) {
    out += sep;
    out += '"';
    out += key;
    out += "\": ";
    write(out, field);
    sep = ", ";
  });
}

void write(std::string &out, const flight::Entry &v) {
  writeFields(out, v);
  out += '}';
}

/// One entry a line.
template <typename T>
void write(std::string &out, const std::vector<T> &v) {
  out += '[';
  for (size_t i = 0; i < v.size(); ++i) {
    out += i ? ",\n  " : "\n  ";
    write(out, v[i]);
  }
  out += "\n]";
}

std::atomic<int> flightRequested{0};
static_assert(std::atomic<int>::is_always_lock_free,
              "the signal handler needs a lock-free flag");

extern "C" void onFlightSignal(int) {
  flightRequested.store(1, std::memory_order_relaxed);
}

} // namespace

int64_t zrt::steadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

FlightRecorder::Entry *FlightRecorder::entry(int64_t seq) {
  Entry &e = ring[seq % kFlightEntries];
  return e.seq.load(std::memory_order_relaxed) == seq ? &e : nullptr;
}

int64_t FlightRecorder::issue(const char *what, int kind, int32_t setKind,
                              zrt_rank_set set, int64_t bytes, int64_t step,
                              int32_t micro) {
  int64_t seq = count.load(std::memory_order_relaxed);
  Entry &e = ring[seq % kFlightEntries];
  // Invalidate first so that a dump never pairs old fields with the new seq.
  e.seq.store(-1, std::memory_order_release);
  e.what.store(what, std::memory_order_relaxed);
  e.kind.store(kind, std::memory_order_relaxed);
  e.setKind.store(setKind, std::memory_order_relaxed);
  e.first.store(set.first, std::memory_order_relaxed);
  e.stride.store(set.stride, std::memory_order_relaxed);
  e.size.store(set.size, std::memory_order_relaxed);
  e.bytes.store(bytes, std::memory_order_relaxed);
  e.step.store(step, std::memory_order_relaxed);
  e.micro.store(micro, std::memory_order_relaxed);
  e.state.store(int32_t(flight::State::Issued), std::memory_order_relaxed);
  e.issuedNs.store(steadyNs(), std::memory_order_relaxed);
  e.waitedNs.store(0, std::memory_order_relaxed);
  e.doneNs.store(0, std::memory_order_relaxed);
  e.seq.store(seq, std::memory_order_release);
  count.store(seq + 1, std::memory_order_release);
  return seq;
}

void FlightRecorder::waited(int64_t seq) {
  if (Entry *e = seq >= 0 ? entry(seq) : nullptr) {
    e->waitedNs.store(steadyNs(), std::memory_order_relaxed);
    e->state.store(int32_t(flight::State::Waited), std::memory_order_release);
  }
}

void FlightRecorder::done(int64_t seq) {
  if (Entry *e = seq >= 0 ? entry(seq) : nullptr) {
    e->doneNs.store(steadyNs(), std::memory_order_relaxed);
    e->state.store(int32_t(flight::State::Done), std::memory_order_release);
  }
}

void FlightRecorder::setOutput(const std::string &dir, int rank, int world) {
  path = (dir.empty() ? std::string(".") : dir) + "/flight-rank" +
         std::to_string(rank) + ".json";
  this->rank = rank;
  this->world = world;
  startNs = steadyNs();
}

bool FlightRecorder::dump(const char *reason) {
  if (path.empty())
    return true;
  auto us = [&](int64_t ns) -> int64_t {
    return ns ? (ns - startNs) / 1000 : -1;
  };
  int64_t next = count.load(std::memory_order_acquire);
  int64_t from = next > kFlightEntries ? next - kFlightEntries : 0;
  flight::Record record;
  record.version = flight::kVersion;
  record.rank = rank;
  record.world = world;
  record.reason = reason;
  record.capacity = kFlightEntries;
  record.nextSeq = next;
  record.entries.reserve(size_t(next - from));
  for (int64_t seq = from; seq < next; ++seq) {
    Entry &e = ring[seq % kFlightEntries];
    if (e.seq.load(std::memory_order_acquire) != seq)
      continue;
    const char *what = e.what.load(std::memory_order_relaxed);
    int32_t kind = e.kind.load(std::memory_order_relaxed);
    int32_t setKind = e.setKind.load(std::memory_order_relaxed);
    int32_t state = e.state.load(std::memory_order_acquire);
    flight::Entry out;
    out.seq = seq;
    out.op =
        kind >= 0 && kind < kNumCommKinds ? kCommKindNames[kind] : "unknown";
    out.what = what ? what : "";
    // An unknown kind or state reads as the first.
    out.group =
        setKind > 0 && setKind < flight::EnumValues<flight::RankSetKind>::size
            ? flight::RankSetKind(setKind)
            : flight::RankSetKind::Group;
    out.ranks = {e.first.load(std::memory_order_relaxed),
                 e.stride.load(std::memory_order_relaxed),
                 e.size.load(std::memory_order_relaxed)};
    out.bytes = e.bytes.load(std::memory_order_relaxed);
    out.step = e.step.load(std::memory_order_relaxed);
    out.micro = e.micro.load(std::memory_order_relaxed);
    out.state = state > 0 && state < flight::EnumValues<flight::State>::size
                    ? flight::State(state)
                    : flight::State::Issued;
    out.issuedUs = us(e.issuedNs.load(std::memory_order_relaxed));
    out.waitedUs = us(e.waitedNs.load(std::memory_order_relaxed));
    out.doneUs = us(e.doneNs.load(std::memory_order_relaxed));
    // Overwritten while it was read: left out.
    if (e.seq.load(std::memory_order_acquire) != seq)
      continue;
    record.entries.push_back(std::move(out));
  }
  // The record's members, then its checksum of them.
  std::string text;
  writeFields(text, record);
  text += ",\n";
  char line[64];
  std::snprintf(line, sizeof(line), "\"%s\": \"%016llx\"}\n",
                flight::kChecksumKey,
                (unsigned long long)flight::checksum(text));
  text += line;
  std::string tmp = path + ".tmp";
  FILE *f = std::fopen(tmp.c_str(), "wb");
  bool ok = f && std::fwrite(text.data(), 1, text.size(), f) == text.size();
  ok = f && std::fclose(f) == 0 && ok;
  ok = ok && std::rename(tmp.c_str(), path.c_str()) == 0;
  std::fprintf(stderr,
               ok ? "zrt: rank %d: flight record (%s) written to %s\n"
                  : "zrt: error: rank %d: cannot write the flight record "
                    "(%s) to %s: %s\n",
               rank, reason, path.c_str(), std::strerror(errno));
  std::fflush(stderr);
  return ok;
}

void zrt::installFlightSignal() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_handler = onFlightSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &sa, nullptr);
}

bool zrt::takeFlightRequest() {
  return flightRequested.exchange(0, std::memory_order_relaxed) != 0;
}

const FlightSkip &zrt::flightSkip() {
  static const FlightSkip skip = [] {
    FlightSkip s;
    const char *v = std::getenv("ZRT_TEST_SKIP_COLLECTIVE");
    if (!v)
      return s;
    char *end = nullptr;
    long rank = std::strtol(v, &end, 10);
    const char *seqAt = end + 1;
    long long seq = -1;
    if (end != v && *end == ':' && rank >= 0)
      seq = std::strtoll(seqAt, &end, 10);
    if (seq < 0 || end == seqAt || *end) {
      s.error = std::string("ZRT_TEST_SKIP_COLLECTIVE needs RANK:SEQ (two "
                            "non-negative integers), got '") +
                v + "'";
      return s;
    }
    s.rank = int(rank);
    s.seq = seq;
    return s;
  }();
  return skip;
}
