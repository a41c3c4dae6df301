//===- FlightAnalysis.h - Reads and compares the ranks' flight records ----===//
//
// Part of the zero-mlir project.
//
// The ranks of a run write their last collectives to flight-rank<R>.json
// when the collective watchdog fires or on SIGUSR1
// (runtime/src/Collectives/Flight.cpp; their keys are
// runtime/include/zero_rt/flight.def's). This library reads those records back
// and reports which ranks stopped at which sequence number, the collective
// where they diverge and which collective the others wait in. zero-flight and
// zero-run share it.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_FLIGHT_FLIGHTANALYSIS_H
#define ZERO_FLIGHT_FLIGHTANALYSIS_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>
#include <vector>

namespace zero {
namespace flight {

/// The flight records (flight-rank<R>.json) in `dir`, by rank.
std::vector<std::string> findRecords(llvm::StringRef dir);

/// Reads every flight record in `dir` and writes the analysis to `out`.
/// A missing, truncated or corrupt record is named on `err` as
/// `<tool>: error: ...`; the analysis then covers the whole records.
/// Returns 0 when every record of the world is whole, else 1.
/// `stoppedEarly`, when given, receives the ranks that stopped before the
/// collective the others issued (empty: no divergence).
int analyzeDirectory(llvm::StringRef dir, llvm::StringRef tool,
                     llvm::raw_ostream &out, llvm::raw_ostream &err,
                     std::vector<int64_t> *stoppedEarly = nullptr);

} // namespace flight
} // namespace zero

#endif // ZERO_FLIGHT_FLIGHTANALYSIS_H
