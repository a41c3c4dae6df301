//===- Watchdog.h - The collective watchdog of the driver -------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_WATCHDOG_H
#define ZERO_RT_WATCHDOG_H

#include "Program/Manifest.h"

#include <mpi.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace zrt {

/// A thread that ends the job when the main thread has waited in one
/// collective of a training step for longer than the timeout: a peer rank
/// is stuck (or lost without the launcher noticing), and without it every
/// other rank would wait forever in MPI_Wait.
///
/// To name the suspect, every rank sends the number of each step it starts
/// to its successor on a ring (rank + 1 mod world) over its own
/// communicator; the receive lands while the main thread blocks in MPI (Open
/// MPI progresses every request there). The watchdog reads the last step
/// number received from its predecessor: behind the current step, the
/// predecessor never arrived and is named. Otherwise the rank waits a grace
/// period so the suspect's successor, which knows more, reports first.
/// This read of a receive buffer before MPI reports completion is a
/// diagnostic only; the abort does not depend on it.
///
/// When the timeout passes, the rank first writes its flight record
/// (Flight.h); the rank that aborts waits a second before it does, so that
/// its peers, whose waits time out at about the same moment, write theirs.
/// The thread also writes the record when SIGUSR1 asks for it.
class Watchdog {
public:
  ~Watchdog();

  /// Collective. No-op for one rank or timeout 0.
  void start(zrt_ctx &ctx, int64_t timeoutS);

  /// Start of step `step` (main thread): completes the previous step's ring
  /// messages and announces this one.
  void beginStep(int64_t step);

  /// Collective: completes the ring and joins the thread.
  void stop();

  /// Whether the thread runs (it then also writes the flight record on
  /// SIGUSR1).
  bool running() const { return ring != MPI_COMM_NULL; }

private:
  void finishRing(const char *what);
  void loop();

  int rank = 0, world = 1;
  int64_t timeoutNs = 0;
  MPI_Comm ring = MPI_COMM_NULL;
  MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  int64_t arrival = 0, sent = 0;
  std::atomic<int64_t> current{0};
  WaitState state;
  zrt::WaitState **waitState = nullptr;
  FlightRecorder *flight = nullptr;
  std::thread thread;
  std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;
};

} // namespace zrt

#endif // ZERO_RT_WATCHDOG_H
