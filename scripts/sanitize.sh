#!/usr/bin/env bash
# Builds everything (compiler, tools, runtime and its tests) with
# AddressSanitizer, UndefinedBehaviorSanitizer and LeakSanitizer into
# build-asan/ and runs the whole lit suite and the runtime's ctest on it.
# Exits non-zero on any failure; a sanitizer report fails the test that
# triggered it. See docs/reliability.md.
#
#   scripts/sanitize.sh
#   ZERO_JOBS=4 scripts/sanitize.sh
#
# Compiled with clang-22 and -fsanitize=address,undefined
# -fno-sanitize-recover=undefined (every UB report aborts). MLIR and LLVM are
# Debian's uninstrumented static libraries.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${ZERO_ASAN_BUILD_DIR:-$ROOT/build-asan}"
LLVM_BIN=/usr/lib/llvm-22/bin
start=$(date +%s)

# shellcheck source=packages.sh
source "$ROOT/scripts/packages.sh"
# The sanitizer runtimes and clang's OpenMP (the runtime uses -fopenmp);
# scripts/setup.sh installs the rest.
ensure_packages clang-22 lld-22 libclang-rt-22-dev libomp-22-dev

SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
if [ ! -f "$BUILD/build.ninja" ]; then
  # No -DNDEBUG: asserts stay on. Line tables only: symbolized reports
  # without the link time of full debug info. No CUDA backend: nvcc does not
  # take the sanitizer flags, and none of it runs without a GPU.
  if ! cmake -G Ninja -S "$ROOT" -B "$BUILD" \
      -DCMAKE_BUILD_TYPE=Sanitize \
      -DCMAKE_C_COMPILER="$LLVM_BIN/clang" -DCMAKE_CXX_COMPILER="$LLVM_BIN/clang++" \
      "-DCMAKE_C_FLAGS=$SAN -O1 -gline-tables-only" \
      "-DCMAKE_CXX_FLAGS=$SAN -O1 -gline-tables-only" \
      -DLLVM_USE_LINKER=lld \
      -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
      -DLLVM_EXTERNAL_LIT="$LLVM_BIN/lit" \
      -DZERO_ENABLE_CUDA=OFF; then
    echo "sanitize: configure failed"
    exit 1
  fi
fi
if ! CMAKE_BUILD_PARALLEL_LEVEL="${ZERO_JOBS:-2}" ZERO_BUILD_DIR="$BUILD" \
    "$ROOT/scripts/setup.sh"; then
  echo "sanitize: build failed"
  exit 1
fi
built=$(date +%s)

# allow_user_poisoning=0: LLVM's headers poison BumpPtrAllocator slabs when
# compiled with ASan, but MLIR's uninstrumented libraries allocate from them
# without unpoisoning (false use-after-poison reports otherwise).
# abort_on_error=1: a report is a crash, so that `not cmd` in a test that
# expects an error does not hide it (lit's `not` fails on a crash).
# Leaks are detected everywhere. Programs that use MPI (the end-to-end tests
# and the runtime's tests) need Open MPI's allocations that live until exit
# suppressed (scripts/lsan.supp), which needs the slow unwinder: the fast one
# stops in Open MPI's dlopen'ed components, unloaded before the leak check.
# The slow unwinder makes MLIR-heavy tools ~10x slower, so the compiler's
# tests run with the fast one; the training programs that some of them run
# (Import/, zero-tune/) choose the slow one themselves
# (__asan_default_options in runtime/src/Driver/Main.cpp).
ASAN_COMMON="detect_leaks=1:allow_user_poisoning=0:abort_on_error=1"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$ROOT/scripts/lsan.supp:print_suppressions=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:abort_on_error=1}"
export ASAN_SYMBOLIZER_PATH="$LLVM_BIN/llvm-symbolizer"
export LLVM_SYMBOLIZER_PATH="$LLVM_BIN/llvm-symbolizer"
# zero-compile links programs through mpicxx: with clang and the sanitizer
# runtimes, as the instrumented runtime library needs.
export OMPI_CXX="$LLVM_BIN/clang++ -fsanitize=address,undefined"
export OMPI_CC="$LLVM_BIN/clang -fsanitize=address,undefined"

passed=0
failed=0
count() { # lit's xunit file -> passed/failed
  read -r t f s < <(python3 "$ROOT/scripts/lit-count.py" "$1")
  passed=$((passed + t - f - s))
  failed=$((failed + f))
}
lit() { # name, ASAN_OPTIONS, lit arguments...
  local name=$1 opts=$2
  shift 2
  local xml="$BUILD/test/sanitize-$name.xml"
  rm -f "$xml"
  ASAN_OPTIONS="${ASAN_OPTIONS:-$opts}" "$LLVM_BIN/lit" -sv \
    --xunit-xml-output="$xml" "$@"
  local rc=$?
  if [ -f "$xml" ]; then count "$xml"; fi
  if [ $rc -ne 0 ] && [ ! -f "$xml" ]; then failed=$((failed + 1)); fi
}

# The integration tier (tests that train under mpirun) needs the slow
# unwinder for the Open MPI leak suppressions; the compiler tier runs no
# mpirun.
lit compiler "$ASAN_COMMON" -D tier=compiler "$BUILD/test"
lit integration "$ASAN_COMMON:fast_unwind_on_malloc=0" -D tier=integration \
  "$BUILD/test"
if [ -f "$BUILD/runtime/CTestTestfile.cmake" ]; then
  log="$BUILD/runtime/ctest-sanitize.log"
  (cd "$BUILD/runtime" &&
   ASAN_OPTIONS="${ASAN_OPTIONS:-$ASAN_COMMON:fast_unwind_on_malloc=0}" \
   ctest --output-on-failure) | tee "$log"
  rc=${PIPESTATUS[0]}
  line=$(grep -E "tests passed, [0-9]+ tests failed out of" "$log" | tail -1)
  if [ -n "$line" ]; then
    total=$(echo "$line" | sed -E 's/.* out of ([0-9]+).*/\1/')
    nf=$(echo "$line" | sed -E 's/.*passed, ([0-9]+) tests failed.*/\1/')
    passed=$((passed + total - nf))
    failed=$((failed + nf))
  elif [ $rc -ne 0 ]; then
    failed=$((failed + 1))
  fi
fi

end=$(date +%s)
echo
echo "$passed passed, $failed failed"
echo "sanitize: $((end - start)) s ($((built - start)) s configure + build, $((end - built)) s tests)"
[ $failed -eq 0 ]
