//===- TraceFile.h - The Chrome trace of --trace ----------------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// What each rank writes at the end of a run traced with --trace: the
// driver's spans (micro steps, boundaries, steps, evaluations, collective
// waits), the kernel spans and memory samples of Trace.h, and the
// compiler's plan over the step to draw the measurement against.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_TRACE_FILE_H
#define ZERO_RT_TRACE_FILE_H

#include "Program/Manifest.h"

#include <string>

namespace zrt {

/// Where rank `rank` writes the trace asked for with --trace `base`:
/// BASE.rankR.json (the rank goes before a .json suffix).
std::string tracePath(const std::string &base, int rank);

/// Ends the recording of memory samples and returns this rank's Chrome
/// trace, the text of its file.
std::string chromeTrace(const zrt_ctx &ctx);

} // namespace zrt

#endif // ZERO_RT_TRACE_FILE_H
