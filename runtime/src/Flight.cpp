//===- Flight.cpp - The flight recorder of a rank's collectives -----------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "Flight.h"

#include "Manifest.h"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

using namespace zrt;

namespace {

const char *setKindName(int32_t kind) {
  switch (kind) {
  case ZRT_RANKS_HPZ:
    return "hpz";
  case ZRT_RANKS_REPLICAS:
    return "replicas";
  case ZRT_RANKS_WORLD:
    return "world";
  default:
    return "group";
  }
}

const char *stateName(int32_t state) {
  switch (state) {
  case kFlightWaited:
    return "waited";
  case kFlightDone:
    return "done";
  default:
    return "issued";
  }
}

/// FNV-1a, 64 bits: the dump's checksum (the analyzer computes the same).
uint64_t fnv1a(const std::string &s) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
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
  e.state.store(kFlightIssued, std::memory_order_relaxed);
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
    e->state.store(kFlightWaited, std::memory_order_release);
  }
}

void FlightRecorder::done(int64_t seq) {
  if (Entry *e = seq >= 0 ? entry(seq) : nullptr) {
    e->doneNs.store(steadyNs(), std::memory_order_relaxed);
    e->state.store(kFlightDone, std::memory_order_release);
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
  auto us = [&](int64_t ns) {
    return ns ? (long long)((ns - startNs) / 1000) : -1LL;
  };
  int64_t next = count.load(std::memory_order_acquire);
  int64_t from = next > kFlightEntries ? next - kFlightEntries : 0;
  std::string text;
  char line[768];
  std::snprintf(line, sizeof(line),
                "{\"version\": %d, \"rank\": %d, \"world\": %d, \"reason\": "
                "\"%s\", \"capacity\": %lld, \"next_seq\": %lld, "
                "\"entries\": [",
                kFlightVersion, rank, world, reason, (long long)kFlightEntries,
                (long long)next);
  text += line;
  bool firstEntry = true;
  for (int64_t seq = from; seq < next; ++seq) {
    Entry &e = ring[seq % kFlightEntries];
    if (e.seq.load(std::memory_order_acquire) != seq)
      continue;
    const char *what = e.what.load(std::memory_order_relaxed);
    int32_t kind = e.kind.load(std::memory_order_relaxed);
    std::snprintf(
        line, sizeof(line),
        "%s\n  {\"seq\": %lld, \"op\": \"%s\", \"what\": \"%s\", \"group\": "
        "\"%s\", \"ranks\": [%lld, %lld, %lld], \"bytes\": %lld, \"step\": "
        "%lld, \"micro\": %d, \"state\": \"%s\", \"issued_us\": %lld, "
        "\"waited_us\": %lld, \"done_us\": %lld}",
        firstEntry ? "" : ",", (long long)seq,
        kind >= 0 && kind < kNumCommKinds ? kCommKindNames[kind] : "unknown",
        what ? what : "",
        setKindName(e.setKind.load(std::memory_order_relaxed)),
        (long long)e.first.load(std::memory_order_relaxed),
        (long long)e.stride.load(std::memory_order_relaxed),
        (long long)e.size.load(std::memory_order_relaxed),
        (long long)e.bytes.load(std::memory_order_relaxed),
        (long long)e.step.load(std::memory_order_relaxed),
        int(e.micro.load(std::memory_order_relaxed)),
        stateName(e.state.load(std::memory_order_acquire)),
        us(e.issuedNs.load(std::memory_order_relaxed)),
        us(e.waitedNs.load(std::memory_order_relaxed)),
        us(e.doneNs.load(std::memory_order_relaxed)));
    // Overwritten while it was read: left out.
    if (e.seq.load(std::memory_order_acquire) != seq)
      continue;
    text += line;
    firstEntry = false;
  }
  text += "\n],\n";
  std::snprintf(line, sizeof(line), "\"checksum\": \"%016llx\"}\n",
                (unsigned long long)fnv1a(text));
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
