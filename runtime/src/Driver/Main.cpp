//===- Main.cpp - main() of training executables --------------------------===//
//
// Part of the zero-mlir project.
//
// libzero_runtime_main: linked after the object zero-compile emits, which
// defines `zero_program`.
//
//===----------------------------------------------------------------------===//

#include "zero_rt/program.h"

extern "C" const zrt_program zero_program;

int main(int argc, char **argv) {
  return zrt_train_main(argc, argv, &zero_program);
}

#if defined(__SANITIZE_ADDRESS__)
#define ZRT_ADDRESS_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ZRT_ADDRESS_SANITIZER 1
#endif
#endif

#ifdef ZRT_ADDRESS_SANITIZER
// Built with AddressSanitizer (scripts/sanitize.sh): Open MPI keeps
// allocations until exit, which scripts/lsan.supp suppresses by library.
// Matching them needs the slow unwinder: the fast one stops in Open MPI's
// dlopen'ed components, unloaded before the leak check. Set here, every
// training program unwinds so, whichever test runs it, while the compiler's
// tools keep the fast unwinder; ASAN_OPTIONS still overrides it.
extern "C" const char *__asan_default_options() {
  return "fast_unwind_on_malloc=0";
}
#endif
