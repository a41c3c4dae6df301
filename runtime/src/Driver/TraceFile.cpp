//===- TraceFile.cpp - The Chrome trace of --trace ------------------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "Driver/TraceFile.h"
#include "Driver/Trace.h"

#include <nlohmann/json.hpp>

#include <chrono>

using namespace zrt;

std::string zrt::tracePath(const std::string &base, int rank) {
  std::string path = base;
  std::string suffix = ".rank" + std::to_string(rank);
  if (path.size() > 5 && path.compare(path.size() - 5, 5, ".json") == 0)
    path.insert(path.size() - 5, suffix);
  else
    path += suffix + ".json";
  return path;
}

std::string zrt::chromeTrace(const zrt_ctx &ctx) {
  nlohmann::json events = nlohmann::json::array();
  for (const TraceEvent &e : ctx.trace)
    events.push_back({{"name", e.name},
                      {"ph", "X"},
                      {"ts", e.startUs},
                      {"dur", e.durUs},
                      {"pid", ctx.rank},
                      {"tid", 0}});
  // Kernel calls (the CPU backend's entry points record them; a GPU
  // backend's calls only enqueue, so it records none).
  int64_t originNs = std::chrono::duration_cast<std::chrono::nanoseconds>(
                         ctx.traceStart.time_since_epoch())
                         .count();
  // Memory over time as counter tracks: "memory" stacks what the rank holds
  // (both arenas, allocated whole, the step arena split into its live and
  // unused bytes, and the kernel scratch in use), so its top is the
  // allocated total whose maximum is the measured peak; "op index" is the
  // position in the step of each sample, to align it with the plan.
  const Manifest &m = *ctx.manifest;
  stopMemoryTracing();
  for (const MemorySample &s : takeMemorySamples()) {
    double ts = double(s.ns - originNs) / 1e3;
    events.push_back({{"name", "memory"},
                      {"ph", "C"},
                      {"ts", ts},
                      {"pid", ctx.rank},
                      {"args",
                       {{"persistent", m.persistentBytes},
                        {"step_arena_live", s.arenaLiveBytes},
                        {"step_arena_unused", m.arenaBytes - s.arenaLiveBytes},
                        {"kernel_scratch", s.scratchBytes}}}});
    events.push_back({{"name", "op index"},
                      {"ph", "C"},
                      {"ts", ts},
                      {"pid", ctx.rank},
                      {"args", {{"op", s.position}}}});
  }
  for (const KernelSpanRecord &k : takeKernelSpans())
    events.push_back({{"name", k.name},
                      {"cat", "kernel"},
                      {"ph", "X"},
                      {"ts", double(k.startNs - originNs) / 1e3},
                      {"dur", double(k.endNs - k.startNs) / 1e3},
                      {"pid", ctx.rank},
                      {"tid", 0}});
  nlohmann::json doc = {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
  if (int64_t dropped = droppedKernelSpans())
    doc["droppedKernelSpans"] = dropped;
  if (int64_t dropped = droppedMemorySamples())
    doc["droppedMemorySamples"] = dropped;
  // The compiler's plan over the step, what scripts/memory-plot.py draws
  // the measurement against.
  if (!m.plannedLiveBytes.empty())
    doc["zeroMemoryPlan"] = {{"rank", ctx.rank},
                             {"schedule", m.hashText},
                             {"persistent_bytes", m.persistentBytes},
                             {"arena_bytes", m.arenaBytes},
                             {"scratch_bytes", m.scratchBytes},
                             {"peak_bytes", m.peakBytes},
                             {"backward_start", m.backwardStart},
                             {"live_bytes", m.plannedLiveBytes},
                             {"op_scratch_bytes", m.plannedScratchBytes}};
  return doc.dump() + "\n";
}
