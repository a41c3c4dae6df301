//===- Watchdog.cpp - The collective watchdog of the driver ---------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "Driver/Watchdog.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

using namespace zrt;

Watchdog::~Watchdog() {
  // Only reached without stop() on paths that end the job anyway: no MPI.
  if (thread.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    wake.notify_all();
    thread.join();
  }
}

void Watchdog::start(zrt_ctx &ctx, int64_t timeoutS) {
  if (ctx.world < 2 || timeoutS <= 0)
    return;
  rank = ctx.rank;
  world = ctx.world;
  timeoutNs = timeoutS * 1000000000;
  MPI_Comm_dup(MPI_COMM_WORLD, &ring);
  ctx.waitState = &state;
  waitState = &ctx.waitState;
  flight = &ctx.flight;
  thread = std::thread([this] { loop(); });
}

void Watchdog::beginStep(int64_t step) {
  if (ring == MPI_COMM_NULL)
    return;
  finishRing("the ring messages of the previous step");
  current.store(step, std::memory_order_relaxed);
  sent = step;
  MPI_Irecv(&arrival, 1, MPI_INT64_T, (rank + world - 1) % world, 0, ring,
            &requests[0]);
  MPI_Isend(&sent, 1, MPI_INT64_T, (rank + 1) % world, 0, ring, &requests[1]);
}

void Watchdog::stop() {
  if (ring == MPI_COMM_NULL)
    return;
  finishRing("the ring messages of the last step");
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  wake.notify_all();
  thread.join();
  *waitState = nullptr;
  MPI_Comm_free(&ring);
}

void Watchdog::finishRing(const char *what) {
  WaitScope watched(&state, what);
  MPI_Waitall(2, requests, MPI_STATUSES_IGNORE);
}

void Watchdog::loop() {
  int64_t poll = std::clamp<int64_t>(timeoutNs / 20, 10000000, 250000000);
  int64_t graceNs = std::clamp<int64_t>(timeoutNs / 2, 2000000000, 10000000000);
  bool dumped = false;
  std::unique_lock<std::mutex> lock(mutex);
  while (!wake.wait_for(lock, std::chrono::nanoseconds(poll),
                        [this] { return stopping; })) {
    if (takeFlightRequest())
      flight->dump("SIGUSR1");
    const char *what = state.what.load(std::memory_order_acquire);
    if (!what)
      continue;
    int64_t waited = steadyNs() - state.sinceNs.load(std::memory_order_relaxed);
    if (waited <= timeoutNs)
      continue;
    if (!dumped) {
      dumped = true;
      flight->dump("watchdog");
    }
    int64_t step = current.load(std::memory_order_relaxed);
    int64_t seen = __atomic_load_n(&arrival, __ATOMIC_ACQUIRE);
    int left = (rank + world - 1) % world;
    char msg[768];
    if (seen < step) {
      std::snprintf(
          msg, sizeof(msg),
          "zrt: error: rank %d: step %lld: %s has not completed after %lld "
          "s (--collective-timeout-s %lld): rank %d has not started step "
          "%lld (the last step it started is %lld); it is stuck or lost. "
          "Aborting every rank.\n",
          rank, (long long)step, what, (long long)(waited / 1000000000),
          (long long)(timeoutNs / 1000000000), left, (long long)step,
          (long long)seen);
    } else if (world == 2) {
      std::snprintf(
          msg, sizeof(msg),
          "zrt: error: rank %d: step %lld: %s has not completed after %lld "
          "s (--collective-timeout-s %lld): rank %d, the only other rank, "
          "started the step and is stuck inside it or lost. Aborting every "
          "rank.\n",
          rank, (long long)step, what, (long long)(waited / 1000000000),
          (long long)(timeoutNs / 1000000000), left);
    } else if (waited <= timeoutNs + graceNs) {
      continue; // let the suspect's successor name it
    } else {
      std::snprintf(
          msg, sizeof(msg),
          "zrt: error: rank %d: step %lld: %s has not completed after %lld "
          "s (--collective-timeout-s %lld): a rank is stuck inside the "
          "step or lost (rank %d, which this rank watches, started it). "
          "Aborting every rank.\n",
          rank, (long long)step, what, (long long)(waited / 1000000000),
          (long long)(timeoutNs / 1000000000), left);
    }
    std::fputs(msg, stderr);
    std::fflush(stderr);
    std::this_thread::sleep_for(std::chrono::seconds(1));
    // The main thread is inside a collective wait; Open MPI's MPI_Abort
    // from this thread still ends the job (the launcher kills every
    // rank), though MPI_THREAD_FUNNELED does not promise it.
    MPI_Abort(MPI_COMM_WORLD, 1);
    std::_Exit(1);
  }
}
