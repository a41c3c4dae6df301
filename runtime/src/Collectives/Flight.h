//===- Flight.h - The flight recorder of a rank's collectives ---*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// Every rank keeps its last kFlightEntries collectives in a fixed ring: the
// sequence number (per rank, in issue order; the schedule is SPMD, so the
// same collective has the same number on every rank), the op, its bytes, the
// rank set it runs over, the step and micro step, and when it was issued,
// waited for and done. Recording is a few relaxed stores into the ring, no
// allocation; the ring is only read when it is dumped (the watchdog thread on
// a timeout or SIGUSR1), so every field is atomic and an entry overwritten
// during a dump is left out. What a dump writes is zero_rt/flight.def's.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_FLIGHT_IMPL_H
#define ZERO_RT_FLIGHT_IMPL_H

#include "zero_rt/flight.h"
#include "zero_rt/topology.h"

#include <atomic>
#include <cstdint>
#include <string>

namespace zrt {

/// The steady clock in nanoseconds (the recorder's and the watchdog's).
int64_t steadyNs();

constexpr int64_t kFlightEntries = 256;

class FlightRecorder {
public:
  /// Records a new collective; returns its sequence number.
  int64_t issue(const char *what, int kind, int32_t setKind, zrt_rank_set set,
                int64_t bytes, int64_t step, int32_t micro);
  /// The main thread starts waiting for collective `seq` / has completed it.
  void waited(int64_t seq);
  void done(int64_t seq);
  /// The sequence number the next collective gets.
  int64_t next() const { return count.load(std::memory_order_relaxed); }

  /// Where dump() writes: `<dir>/flight-rank<R>.json`.
  void setOutput(const std::string &dir, int rank, int world);
  /// Writes the ring (from any thread but a signal handler); `reason` says
  /// why. Returns false, after a message on stderr, if the file cannot be
  /// written.
  bool dump(const char *reason);

private:
  struct Entry {
    std::atomic<int64_t> seq{-1};
    std::atomic<const char *> what{nullptr};
    std::atomic<int32_t> kind{0}, setKind{0}, micro{0}, state{0};
    std::atomic<int64_t> first{0}, stride{1}, size{1}, bytes{0}, step{0};
    std::atomic<int64_t> issuedNs{0}, waitedNs{0}, doneNs{0};
  };
  Entry *entry(int64_t seq);

  Entry ring[kFlightEntries];
  std::atomic<int64_t> count{0};
  int64_t startNs = 0;
  std::string path;
  int rank = 0, world = 1;
};

/// The SIGUSR1 handler's request: the handler only sets the flag (async-
/// signal-safe); the watchdog thread, or the driver between steps, dumps.
void installFlightSignal();
/// Whether a dump was requested since the last call (clears the request).
bool takeFlightRequest();

/// The test hook ZRT_TEST_SKIP_COLLECTIVE=R:N: rank R never issues its
/// collective N (it stops before it, as a rank stuck in compute would), so
/// the other ranks wait in it. {-1, -1} when unset; `error` says why a set
/// value is malformed.
struct FlightSkip {
  int rank = -1;
  int64_t seq = -1;
  std::string error;
};
const FlightSkip &flightSkip();

} // namespace zrt

#endif // ZERO_RT_FLIGHT_IMPL_H
