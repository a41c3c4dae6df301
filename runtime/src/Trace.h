//===- Trace.h - Kernel spans for the driver's --trace ----------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// Generated code calls the kernels directly, so the driver cannot see them;
// each kernel entry point opens a KernelSpan instead, which costs one
// relaxed load unless the driver turned kernel tracing on (--trace).
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_TRACE_H
#define ZERO_RT_TRACE_H

#include <atomic>
#include <cstdint>
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

} // namespace zrt

#endif // ZERO_RT_TRACE_H
