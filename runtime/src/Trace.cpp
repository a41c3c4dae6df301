//===- Trace.cpp - Kernel spans for the driver's --trace ------------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "Trace.h"

#include <chrono>
#include <mutex>

using namespace zrt;

std::atomic<bool> zrt::kernelTracing{false};

namespace {

struct SpanBuffer {
  std::mutex mutex;
  std::vector<KernelSpanRecord> spans;
  int64_t dropped = 0;
};

SpanBuffer &buffer() {
  static SpanBuffer b;
  return b;
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

std::vector<KernelSpanRecord> zrt::takeKernelSpans() {
  SpanBuffer &b = buffer();
  std::lock_guard<std::mutex> lock(b.mutex);
  std::vector<KernelSpanRecord> out;
  out.swap(b.spans);
  return out;
}

int64_t zrt::droppedKernelSpans() {
  SpanBuffer &b = buffer();
  std::lock_guard<std::mutex> lock(b.mutex);
  return b.dropped;
}

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
  SpanBuffer &b = buffer();
  std::lock_guard<std::mutex> lock(b.mutex);
  if (int64_t(b.spans.size()) >= kMaxKernelSpans) {
    ++b.dropped;
    return;
  }
  b.spans.push_back({name, startNs, endNs});
}
