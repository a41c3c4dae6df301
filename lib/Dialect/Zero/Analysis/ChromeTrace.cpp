//===- ChromeTrace.cpp - The predicted timeline as a Chrome trace ---------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/Analysis/CostModel.h"

#include "llvm/Support/JSON.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::zero;

//===----------------------------------------------------------------------===//
// Chrome trace
//===----------------------------------------------------------------------===//

/// Perfetto and chrome://tracing slow down with many processes; every rank
/// runs the same timeline, so a few of them show it.
static constexpr int64_t kMaxTraceRanks = 64;

void mlir::zero::writeChromeTrace(const StepTimeline &timeline,
                                  int64_t worldSize, llvm::raw_ostream &os) {
  int64_t ranks = std::clamp<int64_t>(worldSize, 1, kMaxTraceRanks);
  llvm::json::OStream j(os);
  auto metadata = [&](StringRef name, int64_t pid, int64_t tid,
                      llvm::json::Value value, StringRef key = "name") {
    j.object([&] {
      j.attribute("name", name);
      j.attribute("ph", "M");
      j.attribute("pid", pid);
      j.attribute("tid", tid);
      j.attributeObject("args", [&] { j.attribute(key, std::move(value)); });
    });
  };
  j.object([&] {
    j.attribute("displayTimeUnit", "ms");
    j.attributeObject("otherData", [&] {
      j.attribute("world_size", worldSize);
      j.attribute("ranks_shown", ranks);
      j.attribute("step_ms", timeline.stepMs);
      j.attribute("exposed_comm_ms", timeline.exposedCommMs);
      j.attribute("compute_ms", timeline.computeMs);
      j.attribute("comm_ms", timeline.commMs);
      if (timeline.transferMs > 0) {
        j.attribute("exposed_transfer_ms", timeline.exposedTransferMs);
        j.attribute("transfer_ms", timeline.transferMs);
      }
    });
    j.attributeArray("traceEvents", [&] {
      for (int64_t rank = 0; rank < ranks; ++rank) {
        std::string label = "rank " + std::to_string(rank);
        if (rank == 0 && ranks < worldSize)
          label += " (first " + std::to_string(ranks) + " of " +
                   std::to_string(worldSize) + " ranks shown; all alike)";
        metadata("process_name", rank, 0, label);
        metadata("process_sort_index", rank, 0, rank, "sort_index");
        metadata("thread_name", rank, 0, "compute");
        metadata("thread_name", rank, 1, "communication");
        if (timeline.transferMs > 0)
          metadata("thread_name", rank, 2, "device-host copies");
        if (llvm::any_of(timeline.events,
                         [](const TimelineEvent &e) { return e.stream == 3; }))
          metadata("thread_name", rank, 3, "NVMe swap file I/O");
        // Event names are op names and verified (UTF-8) symbols.
        for (const TimelineEvent &e : timeline.events) {
          j.object([&] {
            j.attribute("name", e.name);
            j.attribute("cat", e.category);
            j.attribute("ph", "X");
            j.attribute("ts", e.startUs);
            j.attribute("dur", e.durationUs);
            j.attribute("pid", rank);
            j.attribute("tid", int64_t(e.stream));
            j.attributeObject("args", [&] {
              if (e.bytes > 0)
                j.attribute("bytes", e.bytes);
              if (e.flops > 0)
                j.attribute("flops", e.flops);
              j.attribute("micro_step", e.microStep);
            });
          });
        }
      }
    });
  });
  os << "\n";
}
