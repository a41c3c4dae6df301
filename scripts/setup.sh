#!/usr/bin/env bash
# Installs what zero-mlir needs on Debian 12 (skipping what is there), makes
# the project's Python environment (.venv: PyTorch, transformers, NumPy from
# PyPI, pinned in scripts/requirements.txt; ZERO_VENV=DIR puts it elsewhere),
# then configures and builds into build/. Idempotent; quick when nothing
# changed.
#   scripts/setup.sh             # builds everything
#   scripts/setup.sh TARGET...   # builds those targets only (scripts/demo.sh:
#                                # zero-demo, the tools and the CPU runtime)
# ccache caches the compiles when it is installed (it is one of the packages
# below; CCACHE_DIR chooses its cache).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${ZERO_BUILD_DIR:-$ROOT/build}"

PACKAGES=(
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools lld-22 clang-22
  cmake ninja-build ccache g++ python3 python3-venv python3-numpy
  # Python's headers, for the zero_mlir package's extension (nanobind).
  python3-dev
  libopenmpi-dev openmpi-bin libopenblas-dev nlohmann-json3-dev
  libbenchmark-dev libgtest-dev liburing-dev pkg-config
  # test/Cluster starts a private Slurm (about 3 MB to download).
  munge slurmctld slurmd slurm-client
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

# The venv is rebuilt from the pins whenever they change (the copy of
# requirements.txt inside it says what it holds). Debian's python3 makes it;
# nothing is installed into the system Python.
VENV="${ZERO_VENV:-$ROOT/.venv}"
REQ="$ROOT/scripts/requirements.txt"
if [ ! -x "$VENV/bin/python" ] || ! cmp -s "$REQ" "$VENV/zero-requirements.txt"; then
  echo "setup: installing the Python environment into $VENV (scripts/requirements.txt)"
  /usr/bin/python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    --no-input -r "$REQ"
  cp "$REQ" "$VENV/zero-requirements.txt"
fi
PY="$VENV/bin/python"

LLVM_BIN=/usr/lib/llvm-22/bin
if [ -f "$BUILD/CMakeCache.txt" ] &&
   ! grep -qxF "ZERO_PYTHON:FILEPATH=$PY" "$BUILD/CMakeCache.txt"; then
  cmake "$BUILD" "-DZERO_PYTHON=$PY" > /dev/null
fi
if [ ! -f "$BUILD/build.ninja" ]; then
  linker_flags=()
  if [ -x "$LLVM_BIN/ld.lld" ]; then
    # lld links the statically linked MLIR tools several times faster.
    linker_flags=(-DLLVM_USE_LINKER=lld "-DCMAKE_EXE_LINKER_FLAGS=-B$LLVM_BIN"
                  "-DCMAKE_SHARED_LINKER_FLAGS=-B$LLVM_BIN")
  fi
  launcher_flags=()
  if command -v ccache > /dev/null; then
    # ccache caches a compile that uses the precompiled header
    # (ZERO_PRECOMPILED_HEADERS) only with these sloppinesses.
    ccache="/usr/bin/env;CCACHE_SLOPPINESS=pch_defines,time_macros;ccache"
    launcher_flags=("-DCMAKE_C_COMPILER_LAUNCHER=$ccache"
                    "-DCMAKE_CXX_COMPILER_LAUNCHER=$ccache"
                    "-DCMAKE_CUDA_COMPILER_LAUNCHER=$ccache")
  fi
  cmake -G Ninja -S "$ROOT" -B "$BUILD" \
    -DCMAKE_BUILD_TYPE="${ZERO_BUILD_TYPE:-Release}" \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT="$LLVM_BIN/lit" \
    "-DZERO_PYTHON=$PY" \
    -DZERO_ENABLE_PYTHON=ON \
    "${linker_flags[@]}" "${launcher_flags[@]}" ${ZERO_CMAKE_ARGS:-}
fi
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build "$BUILD" "${targets[@]}"

# The zero_mlir package (python/CMakeLists.txt) is built into
# $BUILD/python_packages; a .pth file in the venv's site-packages puts that
# folder on its path, as an editable install does, so that the venv's python
# imports zero_mlir from any directory. The last build set up this way wins.
if [ -d "$BUILD/python_packages/zero_mlir" ]; then
  SITE="$("$PY" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"
  (cd "$BUILD/python_packages" && pwd) > "$SITE/zero_mlir.pth"
fi
