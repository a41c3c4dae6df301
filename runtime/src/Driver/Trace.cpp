//===- Trace.cpp - Kernel spans and memory of --trace ---------------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "Driver/Trace.h"
#include "Support/Support.h"

#include <chrono>
#include <iterator>
#include <map>
#include <mutex>

using namespace zrt;

std::atomic<bool> zrt::kernelTracing{false};

namespace {

/// What one kind of trace recorded, at most kMax records, under `mutex`.
template <typename Record, int64_t kMax>
struct Recorder {
  std::mutex mutex;
  std::vector<Record> records;
  /// Records that did not fit.
  int64_t dropped = 0;

  /// Adds a record; the caller holds `mutex`.
  void add(const Record &record) {
    if (int64_t(records.size()) >= kMax) {
      ++dropped;
      return;
    }
    records.push_back(record);
  }
  /// Takes the records so far.
  std::vector<Record> take() {
    std::lock_guard<std::mutex> lock(mutex);
    std::vector<Record> out;
    out.swap(records);
    return out;
  }
  int64_t droppedRecords() {
    std::lock_guard<std::mutex> lock(mutex);
    return dropped;
  }
};

using SpanRecorder = Recorder<KernelSpanRecord, kMaxKernelSpans>;

SpanRecorder &spans() {
  static SpanRecorder r;
  return r;
}

// Kernels called from inside a kernel are part of the outer span.
thread_local int depth = 0;

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

} // namespace

void zrt::setKernelTracing(bool on) {
  kernelTracing.store(on, std::memory_order_relaxed);
}

std::vector<KernelSpanRecord> zrt::takeKernelSpans() { return spans().take(); }

int64_t zrt::droppedKernelSpans() { return spans().droppedRecords(); }

void KernelSpan::begin(const char *kernel) {
  active = true;
  if (depth++ > 0)
    return;
  name = kernel;
  startNs = nowNs();
}

void KernelSpan::end() {
  --depth;
  if (!name)
    return;
  int64_t endNs = nowNs();
  SpanRecorder &r = spans();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.add({name, startNs, endNs});
}

//===----------------------------------------------------------------------===//
// Memory over time
//===----------------------------------------------------------------------===//

std::atomic<bool> zrt::memoryTracing{false};

namespace {

/// The step arena's live ranges (disjoint [begin, end) by begin) and the
/// samples taken so far.
struct MemoryTracker : Recorder<MemorySample, kMaxMemorySamples> {
  std::map<int64_t, int64_t> live;
  int64_t liveBytes = 0;
  int64_t position = -1;
  int64_t scratch = 0;

  /// Removes [begin, end) from the live ranges.
  void kill(int64_t begin, int64_t end) {
    auto it = live.upper_bound(begin);
    if (it != live.begin() && std::prev(it)->second > begin)
      --it;
    while (it != live.end() && it->first < end) {
      int64_t b = it->first, e = it->second;
      it = live.erase(it);
      liveBytes -= e - b;
      if (b < begin) {
        live[b] = begin;
        liveBytes += begin - b;
      }
      if (e > end) {
        live[end] = e;
        liveBytes += e - end;
      }
    }
  }
  /// Adds [begin, end); bytes already live are counted once.
  void revive(int64_t begin, int64_t end) {
    if (end <= begin)
      return;
    kill(begin, end);
    live[begin] = end;
    liveBytes += end - begin;
  }
  void sample() { add({nowNs(), position, liveBytes, scratch}); }
};

MemoryTracker &tracker() {
  static MemoryTracker t;
  return t;
}

bool tracingMemory() { return memoryTracing.load(std::memory_order_relaxed); }

} // namespace

void zrt::startMemoryTracing(int64_t scratchInUse) {
  MemoryTracker &t = tracker();
  std::lock_guard<std::mutex> lock(t.mutex);
  memoryTracing.store(true, std::memory_order_relaxed);
  t.scratch = scratchInUse;
  t.sample();
}

void zrt::stopMemoryTracing() {
  MemoryTracker &t = tracker();
  std::lock_guard<std::mutex> lock(t.mutex);
  memoryTracing.store(false, std::memory_order_relaxed);
}

void zrt::traceMicroStep(
    const std::vector<std::pair<int64_t, int64_t>> &inputs) {
  if (!tracingMemory())
    return;
  MemoryTracker &t = tracker();
  std::lock_guard<std::mutex> lock(t.mutex);
  t.live.clear();
  t.liveBytes = 0;
  t.position = -1;
  for (auto [offset, bytes] : inputs)
    if (bytes > 0)
      t.revive(offset, offset + bytes);
  t.sample();
}

void zrt::recordScratch(int64_t inUse) {
  MemoryTracker &t = tracker();
  std::lock_guard<std::mutex> lock(t.mutex);
  t.scratch = inUse;
  t.sample();
}

std::vector<MemorySample> zrt::takeMemorySamples() { return tracker().take(); }

int64_t zrt::droppedMemorySamples() { return tracker().droppedRecords(); }

void zrt::traceOp(int64_t position) {
  if (!tracingMemory())
    return;
  MemoryTracker &t = tracker();
  std::lock_guard<std::mutex> lock(t.mutex);
  t.position = position;
  t.sample();
}

namespace {

/// traceLive and traceDead: `update` applies the range, which `call` (the
/// generated code's entry point) must keep inside the step arena.
void traceRange(const char *call, int64_t offset, int64_t bytes,
                int64_t arenaBytes,
                void (MemoryTracker::*update)(int64_t, int64_t)) {
  if (!tracingMemory())
    return;
  if (offset < 0 || bytes < 0 || offset > arenaBytes - bytes)
    fatal("%s: [%lld, %lld) is outside the step arena of %lld bytes", call,
          (long long)offset, (long long)(offset + bytes),
          (long long)arenaBytes);
  MemoryTracker &t = tracker();
  std::lock_guard<std::mutex> lock(t.mutex);
  (t.*update)(offset, offset + bytes);
  t.sample();
}

} // namespace

void zrt::traceLive(int64_t offset, int64_t bytes, int64_t arenaBytes) {
  traceRange("zrt_ctx_trace_live", offset, bytes, arenaBytes,
             &MemoryTracker::revive);
}

void zrt::traceDead(int64_t offset, int64_t bytes, int64_t arenaBytes) {
  traceRange("zrt_ctx_trace_dead", offset, bytes, arenaBytes,
             &MemoryTracker::kill);
}
