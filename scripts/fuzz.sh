#!/usr/bin/env bash
# Fuzzes the compiler with libFuzzer (tools/zero-fuzz) under AddressSanitizer
# and UndefinedBehaviorSanitizer; see docs/reliability.md.
#
#   scripts/fuzz.sh                 # configure + build build-fuzz/, fuzz 300 s
#   FUZZ_SECONDS=3600 scripts/fuzz.sh
#   scripts/fuzz.sh CRASH_FILE...   # replay inputs (no fuzzing), verbosely
#
# The project's code is compiled with clang-22 and
# -fsanitize=fuzzer-no-link,address,undefined (MLIR itself is Debian's static
# libraries, not instrumented). Seeds are every .mlir file under test/ and
# examples/, split at `// -----` lines, the tests' ds_configs and their
# --zero-pipeline option lines (scripts/fuzz-seeds.py). The corpus grows in
# build-fuzz/fuzz/corpus across runs; findings land in build-fuzz/fuzz/findings.
# Exits non-zero on any finding (crash, assertion, sanitizer report, leak,
# timeout of -timeout=10 s per input, out-of-memory).
# Runs one fuzzing process (one core); FUZZ_ARGS adds libFuzzer flags.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${ZERO_FUZZ_BUILD_DIR:-$ROOT/build-fuzz}"
SECONDS_BUDGET="${FUZZ_SECONDS:-300}"
LLVM_BIN=/usr/lib/llvm-22/bin

# shellcheck source=packages.sh
source "$ROOT/scripts/packages.sh"
ensure_packages llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools \
  clang-22 lld-22 libclang-rt-22-dev cmake ninja-build nlohmann-json3-dev

SAN="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined"
if [ ! -f "$BUILD/build.ninja" ]; then
  # No -DNDEBUG: the project's asserts (and those MLIR's headers inline, e.g.
  # llvm::cast) stay on. -O1 keeps the fuzzer fast enough.
  cmake -G Ninja -S "$ROOT" -B "$BUILD" \
    -DCMAKE_BUILD_TYPE=Fuzz \
    -DCMAKE_C_COMPILER="$LLVM_BIN/clang" -DCMAKE_CXX_COMPILER="$LLVM_BIN/clang++" \
    "-DCMAKE_C_FLAGS=$SAN -O1 -g -fno-omit-frame-pointer" \
    "-DCMAKE_CXX_FLAGS=$SAN -O1 -g -fno-omit-frame-pointer" \
    -DLLVM_USE_LINKER=lld \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT="$LLVM_BIN/lit" \
    -DZERO_BUILD_RUNTIME=OFF -DZERO_ENABLE_FUZZER=ON
fi
# zero-opt too: a finding replays with build-fuzz/bin/zero-opt (see -v output).
cmake --build "$BUILD" --parallel "${ZERO_JOBS:-2}" --target zero-fuzz zero-opt

FUZZER="$BUILD/bin/zero-fuzz"
# allow_user_poisoning=0: LLVM's headers poison BumpPtrAllocator slabs when
# compiled with ASan, but MLIR's (uninstrumented) libraries allocate from
# them without unpoisoning: false use-after-poison reports otherwise.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allow_user_poisoning=0:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export LLVM_SYMBOLIZER_PATH="$LLVM_BIN/llvm-symbolizer"
export ASAN_SYMBOLIZER_PATH="$LLVM_BIN/llvm-symbolizer"

if (($#)); then
  # Replay: run each input once and print its diagnostics.
  ZERO_FUZZ_VERBOSE=1 exec "$FUZZER" "$@"
fi

WORK="$BUILD/fuzz"
SEEDS="$WORK/seeds"
CORPUS="$WORK/corpus"
FINDINGS="$WORK/findings"
rm -rf "$SEEDS"
mkdir -p "$SEEDS" "$CORPUS" "$FINDINGS"
python3 "$ROOT/scripts/fuzz-seeds.py" "$ROOT" "$SEEDS"

echo "fuzz: $FUZZER for ${SECONDS_BUDGET}s (corpus $CORPUS, findings $FINDINGS)"
set +e
"$FUZZER" "$CORPUS" "$SEEDS" \
  -dict="$ROOT/tools/zero-fuzz/mlir.dict" \
  -max_len=65536 -timeout=10 -rss_limit_mb=4096 \
  -max_total_time="$SECONDS_BUDGET" -print_final_stats=1 \
  -artifact_prefix="$FINDINGS/" ${FUZZ_ARGS:-}
rc=$?
set -e
if [ $rc -ne 0 ]; then
  echo "fuzz: FINDING (exit $rc); inputs in $FINDINGS:"
  ls -l "$FINDINGS"
  echo "replay one with: scripts/fuzz.sh $FINDINGS/<file>"
  exit $rc
fi
echo "fuzz: no finding in ${SECONDS_BUDGET}s"

# Then the tools' command lines and input files (scripts/fuzz-cli.py):
# zero-compile, zero-tune and zero-estimate with their ds_configs, and,
# where the venv has torch and transformers, zero-data and zero-import
# --hf's config.json. They run from the regular build (build-fuzz builds
# only zero-fuzz and zero-opt); the seeds replay first. A finding is saved
# as a case under $WORK/cli/findings; replay one with
#   scripts/fuzz-cli.py --replay FILE
CLI_SECONDS="${FUZZ_CLI_SECONDS:-$SECONDS_BUDGET}"
CLI_BUILD="${FUZZ_CLI_BUILD_DIR:-$ROOT/build}"
CLI_PYTHON="${ZERO_PYTHON:-$ROOT/.venv/bin/python}"
[ -x "$CLI_PYTHON" ] || CLI_PYTHON=python3
CLI_SURFACES=compile,tune,estimate
CLI_SEEDS=("$ROOT/test/Fuzz/Inputs/cli-seeds")
if "$CLI_PYTHON" -c "import torch, transformers, tokenizers" 2>/dev/null; then
  CLI_SURFACES+=,data,import
  CLI_SEEDS+=("$ROOT/test/Import/Inputs/config-seeds")
fi
CLI_SEED="${FUZZ_CLI_SEED:-$RANDOM}"
echo "fuzz: scripts/fuzz-cli.py on $CLI_SURFACES for ${CLI_SECONDS}s, seed $CLI_SEED (tools of $CLI_BUILD)"
set +e
"$CLI_PYTHON" "$ROOT/scripts/fuzz-cli.py" --build "$CLI_BUILD" \
  --work "$WORK/cli" --surfaces "$CLI_SURFACES" --seed "$CLI_SEED" \
  --seconds "$CLI_SECONDS" --replay "${CLI_SEEDS[@]}"
rc=$?
set -e
if [ $rc -ne 0 ]; then
  echo "fuzz: fuzz-cli FINDING (exit $rc); cases in $WORK/cli/findings"
  exit $rc
fi
echo "fuzz: no command-line finding in ${CLI_SECONDS}s"
