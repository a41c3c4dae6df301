//===- Trace.h - Kernel spans and memory of --trace -------------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// Generated code calls the kernels directly, so the driver cannot see them;
// each kernel entry point opens a KernelSpan instead, which costs one
// relaxed load unless the driver turned kernel tracing on (--trace).
//
// Memory over time is sampled the same way: whenever the step arena's live
// bytes or the kernel scratch in use change, one relaxed load decides
// whether a MemorySample is recorded.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_TRACE_H
#define ZERO_RT_TRACE_H

#include <atomic>
#include <cstdint>
#include <utility>
#include <vector>

namespace zrt {

/// One kernel call: its entry point and steady-clock times (ns).
struct KernelSpanRecord {
  const char *name;
  int64_t startNs, endNs;
};

extern std::atomic<bool> kernelTracing;

/// Turns recording on or off (the driver, for --trace).
void setKernelTracing(bool on);
/// Takes the spans recorded so far (at most kMaxKernelSpans are kept).
std::vector<KernelSpanRecord> takeKernelSpans();
/// Spans dropped because the buffer was full.
int64_t droppedKernelSpans();
constexpr int64_t kMaxKernelSpans = int64_t(1) << 22;

/// Records the call it scopes; only the outermost of nested kernel calls.
class KernelSpan {
public:
  explicit KernelSpan(const char *name) {
    if (kernelTracing.load(std::memory_order_relaxed))
      begin(name);
  }
  ~KernelSpan() {
    if (active)
      end();
  }
  KernelSpan(const KernelSpan &) = delete;
  KernelSpan &operator=(const KernelSpan &) = delete;

private:
  void begin(const char *name);
  void end();
  bool active = false;
  /// Set only on the outermost span, the one that records.
  const char *name = nullptr;
  int64_t startNs = 0;
};

/// The memory a rank has in use at one moment of a traced run: the live
/// bytes of the step arena (as the generated code declares them with
/// zrt_ctx_trace_live/dead) and the kernel scratch in use, at op `position`
/// of the step (-1: before its first op).
struct MemorySample {
  int64_t ns;
  int64_t position;
  int64_t arenaLiveBytes;
  int64_t scratchBytes;
};

extern std::atomic<bool> memoryTracing;

/// Turns memory sampling on (the driver, for --trace) and takes a first
/// sample, with `scratchInUse` bytes of kernel scratch in use
/// (zrt_scratch_bytes_in_use()).
void startMemoryTracing(int64_t scratchInUse);
void stopMemoryTracing();
/// A micro step starts: nothing of the previous one is live in the step
/// arena but the input batch, [offset, offset + bytes) for each input.
void traceMicroStep(const std::vector<std::pair<int64_t, int64_t>> &inputs);
/// The step reaches op `position` (zrt_ctx_trace_op).
void traceOp(int64_t position);
/// Bytes [offset, offset + bytes) of the step arena of `arenaBytes` become
/// live (zrt_ctx_trace_live) or dead (zrt_ctx_trace_dead); while sampling,
/// a range outside the arena aborts.
void traceLive(int64_t offset, int64_t bytes, int64_t arenaBytes);
void traceDead(int64_t offset, int64_t bytes, int64_t arenaBytes);
void recordScratch(int64_t inUse);
/// Records the scratch now in use (Memory.cpp, after each change).
inline void traceScratch(int64_t inUse) {
  if (memoryTracing.load(std::memory_order_relaxed))
    recordScratch(inUse);
}
/// Takes the samples recorded so far (at most kMaxMemorySamples are kept).
std::vector<MemorySample> takeMemorySamples();
/// Samples dropped because the buffer was full.
int64_t droppedMemorySamples();
constexpr int64_t kMaxMemorySamples = int64_t(1) << 21;

} // namespace zrt

#endif // ZERO_RT_TRACE_H
