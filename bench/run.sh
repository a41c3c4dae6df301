#!/usr/bin/env bash
# Every benchmark of docs/benchmarks.md, then the docs' tables (not a test;
# scripts/test.sh does not run it).
#
#   bench/run.sh [build-dir]
#
# Without a build directory, configures and builds build-bench (Release,
# ZRT_BUILD_BENCHMARKS=ON). With one, builds the targets it needs there
# (the directory must have been configured with -DZRT_BUILD_BENCHMARKS=ON).
# Writes bench/results/*.json (git-ignored) and rewrites the generated parts
# of docs/benchmarks.md (bench/update_docs.py).
#
# BASELINE_BUILD=DIR: also run DIR's zrt-bench-bandwidth alternately with
# this one, for the before/after table. DIR is a standalone runtime build of
# an earlier version with this tree's benchmarks, e.g. (OLD = ad1f866, the
# commit before the overflow-check change):
#   git archive OLD runtime | tar -x -C /tmp/old
#   cp runtime/bench/* /tmp/old/runtime/bench/
#   cmake -G Ninja -S /tmp/old/runtime -B /tmp/old/build \
#     -DCMAKE_BUILD_TYPE=Release -DZRT_BUILD_BENCHMARKS=ON
#   ninja -C /tmp/old/build zrt-bench-bandwidth
#
# Other settings (environment): ONLY (a subset of "machine compile_time
# kernels comm calibrate e2e tune offload nvme gather_once quant zeropp
# long_context packing streaming", the default, and "peers", which runs only when named: it
# installs its own Python environment from PyPI, bench/peers/venv.sh),
# BENCH_PARAMS (elements per array of the kernel benchmark, 64M),
# BENCH_ROUNDS (15),
# COMM_COUNT (full-array elements of the collective benchmark, 8M),
# COMM_ROUNDS (40), E2E_ROUNDS (5), E2E_STEPS (40), TUNE_ROUNDS (4),
# OFFLOAD_ROUNDS (3), NVME_ROUNDS (5), GATHER_ONCE_ROUNDS (5), QUANT_MIB
# (MiB of values of the quantization benchmark, 64), QUANT_ROUNDS (11),
# ZEROPP_ROUNDS (5), ZEROPP_STEPS (20), LONG_CONTEXT_ROUNDS (3),
# LONG_CONTEXT_STEPS (8), PACKING_ROUNDS (3), PACKING_STEPS (8), NVME_DIR
# (the directory on the disk to measure; bench/results/nvme), MPIRUN
# (mpirun --allow-run-as-root --oversubscribe), PEERS_ROUNDS (2),
# PEERS_STEPS (20), PEERS_SIZES (tiny,small,large).
# A full run takes about 12 minutes on the 2-core development machine.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
out=$here/results
mkdir -p "$out"
mpirun_cmd=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe}
only=${ONLY:-machine compile_time kernels comm calibrate e2e tune offload nvme gather_once quant zeropp long_context packing streaming}
want() { [[ " $only " == *" $1 "* ]]; }

targets=(zero-opt zero-compile zero-model-gen zero-tune zero_runtime zero_runtime_main)
# ONLY=peers needs only the calibration among the benchmark binaries (its
# roofline is measured at each size's own matmuls).
if [[ " $only " != " peers " ]]; then
  targets+=(zrt-bench-bandwidth zrt-bench-comm zrt-bench-calibrate
            zrt-bench-transfer zrt-bench-nvme zrt-bench-quantize)
else
  targets+=(zrt-bench-calibrate)
  if [[ $# -ge 1 && -f $1/build.ninja ]] &&
    ! ninja -C "$1" -t targets all | grep -q '^zrt-bench-calibrate:'; then
    echo "bench/run.sh: ONLY=peers needs zrt-bench-calibrate; configure $1" \
      "with -DZRT_BUILD_BENCHMARKS=ON, or give no build directory" >&2
    exit 2
  fi
fi
if [[ $# -ge 1 ]]; then
  build=$(cd "$1" && pwd)
else
  build=$root/build-bench
  if [[ ! -f $build/build.ninja ]]; then
    llvm_dir=$(ls -d /usr/lib/llvm-*/bin 2>/dev/null | sort -V | tail -1)
    extra=()
    if [[ -n $llvm_dir ]]; then
      extra+=(-DLLVM_EXTERNAL_LIT="$llvm_dir/lit")
      [[ -x $llvm_dir/ld.lld ]] && extra+=(-DLLVM_USE_LINKER=lld
        -DCMAKE_EXE_LINKER_FLAGS="-B$llvm_dir")
    fi
    cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release \
      -DZRT_BUILD_BENCHMARKS=ON "${extra[@]}"
  fi
fi
if [[ -f $build/build.ninja ]]; then
  ninja -C "$build" -j"$(nproc)" "${targets[@]}"
fi
bin=$build/bin
bandwidth=$build/runtime/bench/zrt-bench-bandwidth
comm=$build/runtime/bench/zrt-bench-comm
calibrate=$build/runtime/bench/zrt-bench-calibrate
transfer=$build/runtime/bench/zrt-bench-transfer

if want machine; then
  cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
  virt=$(lscpu | sed -n 's/^Hypervisor vendor: *//p' | head -1)
  mem_kib=$(awk '/^MemTotal/ { print $2 }' /proc/meminfo)
  mpi=$(mpirun --version 2>/dev/null | head -1 || true)
  cat >"$out/machine.json" <<JSON
{
  "nproc": $(nproc),
  "cpu": "$cpu",
  "mem_gib": $(awk -v k="$mem_kib" 'BEGIN { printf "%.1f", k / 1048576 }'),
  "virtualization": "${virt:+$virt virtual machine}",
  "mpi": "$mpi",
  "kernel": "$(uname -r)",
  "date": "$(date -u +%Y-%m-%d)",
  "loadavg": "$(cut -d' ' -f1-3 /proc/loadavg)"
}
JSON
  echo "== machine: $(nproc) cores, $cpu, load $(cut -d' ' -f1-3 /proc/loadavg)"
fi

if want compile_time; then
  echo "== compile time"
  "$here/compile_time.sh" "$build"
fi

if want kernels; then
  echo "== optimizer kernels vs STREAM triad"
  kernels() {
    OMP_NUM_THREADS=$(nproc) "$1" --params "${BENCH_PARAMS:-67108864}" \
      --rounds "${BENCH_ROUNDS:-15}" --json "$2"
  }
  if [[ -n ${BASELINE_BUILD:-} ]]; then
    # Before/after: the same benchmark linked with another runtime (e.g.
    # the previous commit's), three processes each, alternated.
    base=$BASELINE_BUILD/bench/zrt-bench-bandwidth
    [[ -x $base ]] || base=$BASELINE_BUILD/runtime/bench/zrt-bench-bandwidth
    for i in 1 2 3; do
      echo "-- baseline run $i"; kernels "$base" "$out/kernels_before.$i.json"
      echo "-- run $i"; kernels "$bandwidth" "$out/kernels.$i.json"
    done
    python3 "$here/merge_kernels.py" "$out/kernels_before.json" \
      "$out"/kernels_before.[123].json
    python3 "$here/merge_kernels.py" "$out/kernels.json" \
      "$out"/kernels.[123].json
    rm -f "$out"/kernels_before.[123].json "$out"/kernels.[123].json
  else
    kernels "$bandwidth" "$out/kernels.json"
  fi
  echo "-- one thread"
  OMP_NUM_THREADS=1 "$bandwidth" --params "${BENCH_PARAMS:-67108864}" \
    --rounds "${BENCH_ROUNDS:-15}" --json "$out/kernels_1t.json"
fi

if want comm; then
  for np in 2 4; do
    echo "== collectives, $np ranks"
    # shellcheck disable=SC2086
    OMP_NUM_THREADS=1 $mpirun_cmd -np $np "$comm" \
      --count "${COMM_COUNT:-8388608}" --rounds "${COMM_ROUNDS:-40}" \
      --json "$out/comm_np$np.json"
  done
fi

if want calibrate; then
  for np in 1 2 4; do
    echo "== per-rank numbers for the cpu cost-model preset, $np ranks"
    # shellcheck disable=SC2086
    OMP_NUM_THREADS=1 $mpirun_cmd -np $np "$calibrate" \
      --json "$out/calibration_np$np.json"
  done
  # The cpu preset takes the new rows; the e2e predictions need them built.
  python3 "$here/cpu_preset.py" --results "$out"
  if [[ -f $build/build.ninja ]]; then
    ninja -C "$build" -j"$(nproc)" zero-opt
  fi
fi

if want e2e; then
  echo "== end to end and cost model"
  python3 "$here/e2e.py" --build "$build" --out "$out/e2e.json" \
    --rounds "${E2E_ROUNDS:-5}" --steps "${E2E_STEPS:-40}" \
    --mpirun "$mpirun_cmd"
fi

if want tune; then
  echo "== zero-tune's ranking against measured steps"
  python3 "$here/tune.py" --build "$build" --out "$out/tune.json" \
    --rounds "${TUNE_ROUNDS:-4}" --mpirun "$mpirun_cmd"
fi

if want offload; then
  echo "== offload: the copy path against memcpy, exposed transfers"
  python3 "$here/offload.py" --build "$build" --out "$out/offload.json" \
    --transfer-bench "$transfer" --rounds "${OFFLOAD_ROUNDS:-3}" \
    --mpirun "$mpirun_cmd"
fi

if want nvme; then
  echo "== NVMe swap files against dd"
  python3 "$here/nvme.py" --tool "$build/runtime/bench/zrt-bench-nvme" \
    --out "$out/nvme.json" --rounds "${NVME_ROUNDS:-5}" \
    ${NVME_DIR:+--dir "$NVME_DIR"}
fi

if want gather_once; then
  echo "== stage 3: frozen partitions gathered per use or once per step"
  python3 "$here/gather_once.py" --build "$build" \
    --out "$out/gather_once.json" --rounds "${GATHER_ONCE_ROUNDS:-5}" \
    --mpirun "$mpirun_cmd"
fi

if want quant; then
  echo "== ZeRO++ quantization kernels against memcpy"
  python3 "$here/quant.py" --tool "$build/runtime/bench/zrt-bench-quantize" \
    --out "$out/quant.json" --mib "${QUANT_MIB:-64}" \
    --rounds "${QUANT_ROUNDS:-11}"
fi

if want zeropp; then
  echo "== ZeRO++ and MiCS step times on 2 x 2 simulated nodes"
  python3 "$here/zeropp.py" --build "$build" --out "$out/zeropp.json" \
    --rounds "${ZEROPP_ROUNDS:-5}" --steps "${ZEROPP_STEPS:-20}" \
    --mpirun "$mpirun_cmd"
fi

if want long_context; then
  echo "== long context: sequence parallelism and the chunked loss on 2 ranks"
  python3 "$here/long_context.py" --build "$build" \
    --out "$out/long_context.json" --rounds "${LONG_CONTEXT_ROUNDS:-3}" \
    --steps "${LONG_CONTEXT_STEPS:-8}" --mpirun "$mpirun_cmd"
fi

if want packing; then
  echo "== packed rows against one document a padded row on 2 ranks"
  python3 "$here/packing.py" --build "$build" --out "$out/packing.json" \
    --rounds "${PACKING_ROUNDS:-3}" --steps "${PACKING_STEPS:-8}" \
    --mpirun "$mpirun_cmd"
fi

if want streaming; then
  echo "== a 124M model's weights streamed out of a session on 2 ranks"
  python3 "$here/streaming.py" --build "$build" --out "$out/streaming.json" \
    --rounds "${STREAMING_ROUNDS:-3}" --mpirun "$mpirun_cmd"
fi

if want peers; then
  echo "== against DeepSpeed and PyTorch; the roofline of our step"
  python3 "$here/peers/peers.py" --build "$build" --out "$out/peers.json" \
    --rounds "${PEERS_ROUNDS:-2}" --steps "${PEERS_STEPS:-20}" \
    --sizes "${PEERS_SIZES:-tiny,small,large}" --mpirun "$mpirun_cmd"
fi

python3 "$here/update_docs.py" --results "$out"
