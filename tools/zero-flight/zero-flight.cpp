//===- zero-flight.cpp - Reads the ranks' flight records ------------------===//
//
// Part of the zero-mlir project.
//
// `zero-flight analyze DIR` reads every rank's flight-rank<R>.json (written by
// the runtime when its collective watchdog fires, or on SIGUSR1) and reports
// which ranks stopped at which sequence number, the collective where they
// diverge and which collective the others wait in. A missing, truncated or
// corrupt record is named and makes the exit status non-zero; the analysis
// then covers the records that are whole.
//
//===----------------------------------------------------------------------===//

#include "zero/Flight/FlightAnalysis.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  if (argc == 2 &&
      (StringRef(argv[1]) == "--help" || StringRef(argv[1]) == "-h")) {
    outs() << "usage: zero-flight analyze DIR\n"
              "  reads the flight records flight-rank<R>.json the ranks of "
              "a run wrote\n"
              "  into DIR and reports where the ranks' collectives "
              "diverge\n";
    return 0;
  }
  if (argc != 3 || StringRef(argv[1]) != "analyze") {
    errs() << "usage: zero-flight analyze DIR\n";
    return 2;
  }
  return zero::flight::analyzeDirectory(argv[2], "zero-flight", outs(), errs());
}
