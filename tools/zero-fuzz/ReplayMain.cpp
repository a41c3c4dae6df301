//===- ReplayMain.cpp - zero-fuzz without libFuzzer -----------------------===//
//
// Part of the zero-mlir project.
//
// The main of zero-fuzz when it is not linked to libFuzzer: runs the fuzz
// target once on each input file named on the command line, as libFuzzer
// does with file arguments (and LLVM's own fuzzers without libFuzzer). A
// finding aborts, so the exit status says whether every input passed.
// (LLVM's FuzzerCLI library does the same, but linking it drags in
// LLVMSupport's optional zstd dependency, absent on Debian.)
//
//===----------------------------------------------------------------------===//

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
extern "C" int LLVMFuzzerInitialize(int *argc, char ***argv);

int main(int argc, char **argv) {
  llvm::errs() << "zero-fuzz: not linked to libFuzzer; running each input "
                  "once (no fuzzing)\n";
  if (int rc = LLVMFuzzerInitialize(&argc, &argv))
    return rc;
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef arg(argv[i]);
    if (arg.starts_with("-")) // libFuzzer's flags
      continue;
    auto buffer = llvm::MemoryBuffer::getFile(arg, /*IsText=*/false,
                                              /*RequiresNullTerminator=*/false);
    if (!buffer) {
      llvm::errs() << "zero-fuzz: cannot read '" << arg
                   << "': " << buffer.getError().message() << "\n";
      return 1;
    }
    llvm::errs() << "Running: " << arg << " (" << (*buffer)->getBufferSize()
                 << " bytes)\n";
    LLVMFuzzerTestOneInput(
        reinterpret_cast<const uint8_t *>((*buffer)->getBufferStart()),
        (*buffer)->getBufferSize());
  }
  return 0;
}
