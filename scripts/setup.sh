#!/usr/bin/env bash
# Installs what zero-mlir needs on Debian 12 (skipping what is there), then
# configures and builds into build/. Idempotent; quick when nothing changed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${ZERO_BUILD_DIR:-$ROOT/build}"

PACKAGES=(
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools lld-22 clang-22
  cmake ninja-build g++ python3 python3-numpy python3-torch
  libopenmpi-dev openmpi-bin libopenblas-dev nlohmann-json3-dev
  libbenchmark-dev libgtest-dev liburing-dev pkg-config
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

LLVM_BIN=/usr/lib/llvm-22/bin
if [ ! -f "$BUILD/build.ninja" ]; then
  linker_flags=()
  if [ -x "$LLVM_BIN/ld.lld" ]; then
    # lld links the statically linked MLIR tools several times faster.
    linker_flags=(-DLLVM_USE_LINKER=lld "-DCMAKE_EXE_LINKER_FLAGS=-B$LLVM_BIN"
                  "-DCMAKE_SHARED_LINKER_FLAGS=-B$LLVM_BIN")
  fi
  cmake -G Ninja -S "$ROOT" -B "$BUILD" \
    -DCMAKE_BUILD_TYPE="${ZERO_BUILD_TYPE:-Release}" \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT="$LLVM_BIN/lit" \
    "${linker_flags[@]}" ${ZERO_CMAKE_ARGS:-}
fi
cmake --build "$BUILD"
