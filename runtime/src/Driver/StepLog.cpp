//===- StepLog.cpp - What the training loop reports -----------------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "Driver/StepLog.h"
#include "Data/Files.h"
#include "Device/Memory.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <sstream>

using namespace zrt;

namespace {

/// The lines of a --log-json file kept and dropped by keepLogUpTo.
struct LogTrim {
  int64_t kept = 0, dropped = 0;
};

/// Rewrites the JSON-lines log `path` (atomically) with only its lines of
/// steps up to `step`: what a run resumed at `step` appends to. Lines that
/// are no JSON object with an integer "step" (a line cut by a crash) are
/// dropped too.
LogTrim keepLogUpTo(const std::string &path, int64_t step) {
  std::istringstream in(readFile(path));
  std::string line, kept;
  LogTrim trim;
  while (std::getline(in, line)) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr,
                                             /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("step") && j["step"].is_number_integer() &&
        j["step"].get<int64_t>() <= step) {
      kept += line + "\n";
      ++trim.kept;
    } else {
      ++trim.dropped;
    }
  }
  if (trim.dropped > 0)
    writeFileAtomic(path, kept);
  return trim;
}

/// A duration in the unit that fits it, so that small steps do not print
/// as 0.0 ms.
std::string formatDuration(double ms) {
  char buf[32];
  if (ms < 1.0)
    std::snprintf(buf, sizeof(buf), "%.1f \u00b5s", ms * 1e3);
  else if (ms < 1e4)
    std::snprintf(buf, sizeof(buf), "%.1f ms", ms);
  else
    std::snprintf(buf, sizeof(buf), "%.2f s", ms / 1e3);
  return buf;
}

/// Bytes in the binary unit that fits them (B, KiB, MiB, GiB).
std::string formatBytes(int64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof(buf), "%lld B", (long long)bytes);
  else
    std::snprintf(buf, sizeof(buf), "%.1f %s", v, units[u]);
  return buf;
}

} // namespace

StepLog::StepLog(const Manifest &m, int rank, bool quiet)
    : manifest(m), writes(rank == 0), talks(rank == 0 && !quiet) {}

void StepLog::open(const std::string &path, bool resume, int64_t resumedAt) {
  if (path.empty() || !writes)
    return;
  bool append = resume && isRegularFile(path);
  if (append) {
    LogTrim trim = keepLogUpTo(path, resumedAt);
    if (trim.dropped > 0)
      std::fprintf(stderr,
                   "zrt: --log-json: dropped %lld line(s) of '%s' after step "
                   "%lld, the checkpoint's\n",
                   (long long)trim.dropped, path.c_str(), (long long)resumedAt);
  }
  log = std::fopen(path.c_str(), append ? "a" : "w");
  if (!log)
    fail("cannot write '" + path + "': " + std::strerror(errno));
}

void StepLog::flush() {
  if (log)
    std::fflush(log);
}

void StepLog::close() {
  if (log)
    std::fclose(log);
  log = nullptr;
}

void StepLog::write(const StepRecord &r) {
  if (!log)
    return;
  std::fprintf(log, "%s\n", json(r).c_str());
  std::fflush(log);
}

std::string StepLog::json(const StepRecord &r) const {
  const Manifest &m = manifest;
  nlohmann::json line = {{"step", r.step},
                         {"world_size", m.worldSize},
                         {"loss", r.loss},
                         {"tokens", r.tokens},
                         {"loss_scale", r.scale},
                         {"next_loss_scale", r.nextScale},
                         {"skipped", r.skipped},
                         {"overflow", r.overflow},
                         {"grad_norm", r.gradNorm},
                         {"step_ms", r.ms},
                         {"peak_bytes", r.peakBytes},
                         {"planned_peak_bytes", m.peakBytes},
                         {"scratch_peak_bytes", zrt_scratch_peak_bytes()},
                         {"planned_scratch_bytes", m.scratchBytes},
                         {"adam_steps", r.adamSteps},
                         {"lr", r.lr}};
  if (m.schedule.kind == ZRT_LR_ONE_CYCLE && m.schedule.cycle_momentum) {
    line["beta1"] = r.beta1;
    line["beta2"] = r.beta2;
  }
  if (m.nvmeBytes > 0)
    line["planned_nvme_bytes"] = m.nvmeBytes;
  if (m.hostBytes > 0) {
    line["host_peak_bytes"] = hostMemoryPeakBytes();
    line["planned_host_peak_bytes"] = m.hostBytes;
  }
  if (m.wallClockBreakdown) {
    line["micro_steps_ms"] = r.microMs;
    line["boundary_ms"] = r.boundaryMs;
  }
  // Programs with a topology or a planned communication (others keep their
  // lines): rank 0's bytes by kind and level.
  if (m.ranksPerNode > 0 || m.hasPlannedComm) {
    nlohmann::json comm = nlohmann::json::object();
    for (int k = 0; k < kNumCommKinds; ++k) {
      const LinkBytes &b = r.comm[size_t(k)];
      if (b.intraNode != 0 || b.interNode != 0)
        comm[kCommKindNames[k]] = {{"intra_node_bytes", b.intraNode},
                                   {"inter_node_bytes", b.interNode}};
    }
    line["comm"] = comm;
  }
  // Expert-parallel programs (others keep their lines).
  if (r.moe) {
    line["moe_max_expert_rows"] = r.moeMaxExpertRows;
    line["moe_dropped_rows"] = r.moeDroppedRows;
  }
  if (r.evaluated)
    line["eval_loss"] = r.evalLoss;
  if (r.evaluated && r.evalTokens >= 0)
    line["eval_tokens"] = r.evalTokens;
  return line.dump();
}

void StepLog::print(const StepRecord &r) {
  const Manifest &m = manifest;
  // An evaluation's loss is printed whatever steps_per_print says.
  if (talks && (r.step % m.stepsPerPrint == 0 || r.evaluated)) {
    char evalText[48] = "", lrText[48] = "";
    if (r.evaluated)
      std::snprintf(evalText, sizeof(evalText), " | eval loss %.4f",
                    r.evalLoss);
    if (m.schedule.kind != ZRT_LR_CONSTANT)
      std::snprintf(lrText, sizeof(lrText), " | lr %.4g", r.lr);
    std::string breakdown;
    if (m.wallClockBreakdown)
      breakdown = " | micro steps " + formatDuration(r.microMs) +
                  " | boundary " + formatDuration(r.boundaryMs);
    std::printf("step %lld | loss %.4f%s | scale %g | %s | %.0f %s | peak "
                "%s%s%s\n",
                (long long)r.step, r.loss, evalText, double(r.scale),
                formatDuration(r.ms).c_str(), r.rate, r.unit,
                formatBytes(r.peakBytes).c_str(), lrText, breakdown.c_str());
    std::fflush(stdout);
  }
  if (r.skipped && writes) {
    // Never silent, not even with --quiet.
    bool staticScale = m.precision == "fp16" && !r.dynamicScale;
    if (r.dynamicScale)
      std::printf("step %lld skipped: gradient overflow, loss scale %g -> "
                  "%g\n",
                  (long long)r.step, double(r.scale), double(r.nextScale));
    else if (staticScale)
      std::printf("step %lld skipped: gradient overflow, static loss scale "
                  "%g unchanged\n",
                  (long long)r.step, double(r.scale));
    else
      std::printf("step %lld SKIPPED: non-finite gradients (inf/NaN) at %s "
                  "precision; parameters unchanged\n",
                  (long long)r.step, m.precision.c_str());
    if (!r.dynamicScale && !staticScale && nonFiniteSkips++ == 0)
      firstNonFiniteSkip = r.step;
    std::fflush(stdout);
  }
}

void StepLog::evaluation(int64_t step, double loss, int64_t tokens) {
  if (log) {
    nlohmann::json line = {{"step", step}, {"eval_loss", loss}};
    if (tokens >= 0)
      line["eval_tokens"] = tokens;
    std::fprintf(log, "%s\n", line.dump().c_str());
    std::fflush(log);
  }
  if (talks) {
    std::printf("step %lld | eval loss %.4f\n", (long long)step, loss);
    std::fflush(stdout);
  }
}

void StepLog::printSkips() {
  if (nonFiniteSkips == 0)
    return;
  std::printf("zrt: warning: %lld step(s) skipped for non-finite gradients "
              "at %s precision, the first at step %lld\n",
              (long long)nonFiniteSkips, manifest.precision.c_str(),
              (long long)firstNonFiniteSkip);
  std::fflush(stdout);
}
