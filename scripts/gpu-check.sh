#!/usr/bin/env bash
# Runs the GPU checks of a scripts/gpu-bundle.sh archive on a machine with an
# NVIDIA GPU but no build toolchain, and collects everything it measured:
#
#   scripts/gpu-check.sh BUNDLE-DIR RESULTS-DIR [part ...]
#
# parts (default all): unit (the GPU unit tests, gtest JSON), e2e (the steps
# of test/E2E/cuda on the bundle's precompiled programs; the checks of their
# logs run afterwards on the build machine: scripts/gpu-verify.py), models
# (with --cuda-graphs too)
# (the bundle's e2e/models cases: a Llama with the chunked loss, the tiled
# MLP, Lion, SGD, and a Mixtral; checked the same way), shared (stage 3
# and expert parallelism on 2 ranks sharing the GPU, --collectives host,
# started by the bundle's mpirun; checked the same way), offload
# (every offload mode of those steps, 10 steps each, with its NVMe swap
# files' sizes; needs the e2e part's logs to be verified), library (each
# dtype's step as an executable and through zero_rt/session.h, offloaded
# and reloaded, compared bit for bit here by scripts/gpu-session.py),
# capacity (not
# by default: bench/gpu/run.sh ONLY=offload, the largest GPT-2 per offload
# mode, OFFLOAD_MODES of them, see bench/gpu/offload_capacity.py), bench
# (bench/gpu/run.sh with PREBUILT: the kernels and GPT-2 124M in PyTorch
# eager, torch.compile and zero-mlir, bf16 and fp32), llama (run.sh's llama
# part: a Llama-3.2-1B-shaped step the same three ways), profile (Nsight Compute's
# time of every kernel of two GPT-2 124M steps, and torch.profiler's of the
# PyTorch baseline; bench/gpu/kernel_table.py sums them). One rank: Open MPI
# starts as an isolated singleton, so no mpirun is needed. Exits non-zero if
# any part failed; RESULTS-DIR/summary.txt says which.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ $# -lt 2 ]; then
  echo "usage: scripts/gpu-check.sh BUNDLE-DIR RESULTS-DIR" \
    "[unit|e2e|models|shared|offload|library|capacity|bench|llama|profile ...]" >&2
  exit 2
fi
BUNDLE=$(cd "$1" && pwd)
R=$2
mkdir -p "$R"
R=$(cd "$R" && pwd)
shift 2
parts=${*:-unit e2e models shared offload library bench llama profile}
want() { [[ " $parts " == *" $1 "* ]]; }

# The GPU machine's CUDA libraries: the toolkit's, else the ones pip installed
# beside PyTorch (nvidia-cublas, nvidia-nccl).
cuda_dirs=()
for lib in libcublasLt.so.13 libnccl.so.2; do
  d=""
  for c in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/lib/x86_64-linux-gnu; do
    [ -e "$c/$lib" ] && { d=$c; break; }
  done
  if [ -z "$d" ]; then
    f=$(find / -xdev -name "$lib" -not -path "*/proc/*" 2>/dev/null | head -1)
    [ -n "$f" ] && d=$(dirname "$f")
  fi
  if [ -z "$d" ]; then echo "gpu-check: $lib not found on this machine" >&2
  elif [[ " ${cuda_dirs[*]} " != *" $d "* ]]; then cuda_dirs+=("$d"); fi
done
export LD_LIBRARY_PATH="$BUNDLE/lib$(printf ':%s' "${cuda_dirs[@]}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_MCA_mca_base_component_path=$BUNDLE/lib/openmpi3
export OPAL_PKGDATADIR=$BUNDLE/share/openmpi
export OMPI_MCA_ess_singleton_isolated=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

summary=$R/summary.txt
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm \
    --format=csv,noheader
  lscpu | sed -n 's/^Model name: *//p' | head -1
  echo "nproc $(nproc)"
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  for lib in libcublasLt.so.13 libnccl.so.2; do
    for d in "${cuda_dirs[@]}"; do
      [ -e "$d/$lib" ] && echo "$lib: $(readlink -f "$d/$lib")"
    done
  done
  cat "$BUNDLE/MANIFEST"
} >"$R/machine.txt" 2>&1
cat "$R/machine.txt"

if want unit; then
  for f in "$BUNDLE"/bin/zrt-cuda-*-test; do
    t=$(basename "$f")
    if "$BUNDLE/bin/$t" --gtest_output="json:$R/$t.json" >"$R/$t.log" 2>&1; then
      note "PASS unit $t: $(grep -E '^\[  PASSED  \]' "$R/$t.log")" \
        "$(grep -E '^\[  SKIPPED \]' "$R/$t.log" | head -1)"
    else
      note "FAIL unit $t (exit $?):"
      grep -E '^\[  FAILED  \]|Failure|error' "$R/$t.log" | head -20 | tee -a "$summary"
    fi
  done
fi

# run NAME CMD...: one program run of the E2E steps, its output kept.
e2e_run() {
  local name=$1; shift
  if "$@" >"$R/e2e/$name.out" 2>&1; then
    note "RAN e2e $name"
  else
    note "FAIL e2e $name (exit $?): $(tail -3 "$R/e2e/$name.out" | tr '\n' ' ')"
  fi
}
if want e2e; then
  mkdir -p "$R/e2e"
  E=$BUNDLE/e2e
  cp "$E"/cpu_*.json "$R/e2e/"
  for dt in f32 bf16; do
    for s in 0 1 2 3; do
      e2e_run "${dt}_s$s" "$E/${dt}_s$s" --quiet --steps 10 \
        --data "$E/tokens64.bin" --log-json "$R/e2e/${dt}_s$s.json"
    done
  done
  for dt in f32 bf16; do
    # The GPT-2-width steps are a part of their own (GPU_BUNDLE_PARTS).
    if [ ! -x "$E/wide_${dt}_s3" ]; then
      note "SKIP e2e wide_${dt}_s3: not in the bundle"
      continue
    fi
    e2e_run "wide_${dt}_s3" "$E/wide_${dt}_s3" --quiet --steps 5 \
      --data "$E/tokens50257.bin" --log-json "$R/e2e/wide_${dt}_s3.json"
  done
  # --cuda-graphs: the same programs' launches as graphs, bit for bit the
  # plain runs' losses, and their trace shows the graphs.
  for c in f32_s0 bf16_s0 bf16_s3; do
    e2e_run "graphs_$c" "$E/$c" --quiet --steps 10 --cuda-graphs \
      --data "$E/tokens64.bin" --log-json "$R/e2e/graphs_$c.json" \
      --trace "$R/e2e/graphs_$c.trace.json"
  done
  # test/E2E/cuda/fp16-overflow.test
  work=$(mktemp -d)
  e2e_run f16_30 "$E/f16_s2" --data "$E/tokens64.bin" --steps 30 \
    --log-json "$R/e2e/f16_30.json" --quiet
  e2e_run f16_save "$E/f16_s2" --data "$E/tokens64.bin" --steps 2 \
    --save "$work/ck" --quiet
  e2e_run f16_skip "$E/f16_s2" --data "$E/tokens64.bin" --steps 6 \
    --inject-overflow-step 3 --save "$work/ck6" --save-every 3 \
    --log-json "$R/e2e/f16_skip.json"
  if python3 "$ROOT/test/E2E/Inputs/zrt_e2e.py" same-state "$work/ck/step_2" \
      "$work/ck6/step_3" >"$R/e2e/f16_same_state.out" 2>&1; then
    note "RAN e2e f16_same_state: $(cat "$R/e2e/f16_same_state.out")"
  else
    note "FAIL e2e f16_same_state: $(tail -2 "$R/e2e/f16_same_state.out")"
  fi
  rm -rf "$work"
fi

# The models cases, each as cases.txt says, beside the CPU backend's logs.
if want models; then
  M=$BUNDLE/e2e/models
  if [ -f "$M/cases.txt" ]; then
    mkdir -p "$R/models"
    cp "$M"/cpu_*.json "$M/cases.txt" "$R/models/"
    while read -r name steps args; do
      # shellcheck disable=SC2086
      if "$M/$name" --quiet --steps "$steps" ${args//@M@/$M} \
          --log-json "$R/models/$name.json" >"$R/models/$name.out" 2>&1; then
        note "RAN models $name"
      else
        note "FAIL models $name (exit $?): $(tail -3 "$R/models/$name.out" | tr '\n' ' ')"
      fi
    done <"$M/cases.txt"
  else
    note "FAIL models: the bundle has no e2e/models/cases.txt"
  fi
fi

# Ranks sharing the GPU: each shared/ case on 2 ranks started by the
# bundle's mpirun, collectives through MPI over host memory (train
# --collectives host); gpu-verify.py compares them with the CPU backend's.
if want shared; then
  S=$BUNDLE/shared
  if [ -f "$S/cases.txt" ] && [ -x "$BUNDLE/bin/mpirun" ]; then
    mkdir -p "$R/shared"
    cp "$S"/cpu_*.json "$S/cases.txt" "$R/shared/"
    while read -r name steps args; do
      # shellcheck disable=SC2086
      if (cd "$R/shared" && "$BUNDLE/bin/mpirun" -np 2 --oversubscribe \
          -x LD_LIBRARY_PATH -x OMPI_MCA_mca_base_component_path \
          -x OPAL_PKGDATADIR "$S/$name" --collectives host --quiet \
          --steps "$steps" ${args//@S@/$S} --log-json "$R/shared/$name.json") \
          </dev/null >"$R/shared/$name.out" 2>&1; then
        note "RAN shared $name"
      else
        note "FAIL shared $name (exit $?): $(tail -3 "$R/shared/$name.out" | tr '\n' ' ')"
      fi
    done <"$S/cases.txt"
  else
    note "FAIL shared: the bundle has no shared/cases.txt or bin/mpirun"
  fi
fi

# Offload: each off_* program of the bundle, and each same stage without
# offload that they are compared with, for 10 steps in a directory of its
# own (the NVMe swap files in ./nvme there), the swap files' sizes kept
# beside its log; gpu-verify.py compares the two logs and the plan.
if want offload; then
  mkdir -p "$R/offload"
  E=$BUNDLE/e2e
  cp "$E"/offload/off_*.plan.json "$R/offload/"
  work=$(mktemp -d)
  bases=$(sed -n 's/.*"baseline": "\(.*\)".*/\1/p' "$E"/offload/*.plan.json |
    sort -u)
  for prog in $(printf "$E/%s\n" $bases) "$E"/off_*_s?; do
    name=$(basename "$prog")
    mkdir -p "$work/$name/nvme"
    if (cd "$work/$name" && "$prog" --quiet --steps 10 \
        --data "$E/tokens64.bin" --log-json "$R/offload/$name.log.json") \
        >"$R/offload/$name.out" 2>&1; then
      note "RAN offload $name"
    else
      note "FAIL offload $name (exit $?): $(tail -3 "$R/offload/$name.out" | tr '\n' ' ')"
    fi
    (cd "$work/$name/nvme" && for f in *; do
       [ -f "$f" ] && echo "$f $(stat -c %s "$f")"
     done) >"$R/offload/$name.swap"
    rm -rf "${work:?}/$name"
  done
  rm -rf "$work"
fi

# The step as a library: each library/*_s3 trains 6 steps as the executable
# and through its --emit shared twin (offloaded and reloaded half way), and
# scripts/gpu-session.py compares every record and the weights' bytes.
if want library; then
  mkdir -p "$R/library"
  L=$BUNDLE/library
  for prog in "$L"/*_s3; do
    [ -x "$prog" ] || continue
    name=$(basename "$prog")
    out=$R/library/$name.out
    if "$prog" --quiet --steps 6 --inputs "$L/ids.npy" \
        --labels "$L/labels.npy" --log-json "$R/library/$name.exe.json" \
        --export "$R/library/$name.exe.safetensors" >"$out" 2>&1 &&
      python3 "$ROOT/scripts/gpu-session.py" "$prog.so" "$L/ids.npy" \
        "$L/labels.npy" 6 "$R/library/$name.lib.json" \
        "$R/library/$name.lib.safetensors" >>"$out" 2>&1 &&
      python3 "$ROOT/scripts/gpu-session.py" --compare \
        "$R/library/$name.exe.json" "$R/library/$name.lib.json" \
        "$R/library/$name.exe.safetensors" \
        "$R/library/$name.lib.safetensors" >>"$out" 2>&1; then
      note "PASS library $name: $(tail -2 "$out" | tr '\n' ' ')"
    else
      note "FAIL library $name: $(tail -3 "$out" | tr '\n' ' ')"
    fi
  done
fi

if want bench; then
  mkdir -p "$R/bench"
  if ONLY="kernels torch zero" DTYPES="bf16 fp32" PREBUILT=$BUNDLE \
      RESULTS=$R/bench "$ROOT/bench/gpu/run.sh" >"$R/bench/run.log" 2>&1; then
    note "RAN bench: $(grep -E 'median step' "$R/bench/run.log" | tr '\n' ' ')"
  else
    note "FAIL bench: $(tail -5 "$R/bench/run.log" | tr '\n' ' ')"
  fi
fi

# The Llama-3.2-1B-shaped step in PyTorch eager, torch.compile and
# zero-mlir, each at the largest micro batch that fits (bench/gpu/run.sh
# ONLY=llama): a call of its own, for a command's time limit.
if want llama; then
  mkdir -p "$R/bench"
  if ONLY=llama PREBUILT=$BUNDLE RESULTS=$R/bench \
      "$ROOT/bench/gpu/run.sh" >"$R/bench/llama.log" 2>&1; then
    note "RAN llama: $(grep -E 'tokens/s|median step' "$R/bench/llama.log" | tr '\n' ' ')"
  else
    note "FAIL llama: $(tail -5 "$R/bench/llama.log" | tr '\n' ' ')"
  fi
fi

# Not in the default parts: the largest GPT-2 per offload mode (bench/gpu/
# offload_capacity.py through bench/gpu/run.sh ONLY=offload) takes minutes
# per mode; OFFLOAD_MODES picks some, so that each call stays within a
# command's time limit (results merge into bench/gpu_offload.json).
if want capacity; then
  mkdir -p "$R/bench"
  if ONLY=offload PREBUILT=$BUNDLE RESULTS=$R/bench \
      "$ROOT/bench/gpu/run.sh" >>"$R/bench/offload.log" 2>&1; then
    note "RAN capacity: $(grep -E ' tokens/s|skipped' "$R/bench/offload.log" | tr '\n' ' ')"
  else
    note "FAIL capacity: $(tail -5 "$R/bench/offload.log" | tr '\n' ' ')"
  fi
fi

if want profile; then
  ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu \
    /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
  for dt in bf16 f32; do
    if [ -z "$ncu" ]; then note "FAIL profile: no ncu"; break; fi
    if "$ncu" --csv --metrics gpu__time_duration.sum --clock-control none \
        "$BUNDLE/gpt2/gpt2_$dt" --steps 2 --quiet \
        --data "$BUNDLE/e2e/tokens50257.bin" >"$R/ncu_gpt2_$dt.csv" \
        2>"$R/ncu_gpt2_$dt.err"; then
      note "RAN profile ncu gpt2_$dt: $(grep -c gpu__time_duration "$R/ncu_gpt2_$dt.csv") kernels"
    else
      note "FAIL profile ncu gpt2_$dt: $(tail -3 "$R/ncu_gpt2_$dt.err" | tr '\n' ' ')"
    fi
  done
  for dt in bf16 fp32; do
    if python3 "$ROOT/bench/gpu/gpt2_torch.py" --dtype $dt --steps 3 \
        --warmup 2 --data "$BUNDLE/e2e/tokens50257.bin" \
        --profile "$R/torch_profile_$dt.txt" >"$R/torch_profile_$dt.log" 2>&1; then
      note "RAN profile torch $dt"
    else
      note "FAIL profile torch $dt: $(tail -3 "$R/torch_profile_$dt.log" | tr '\n' ' ')"
    fi
  done
  mkdir -p "$R/bench"
  python3 "$ROOT/bench/gpu/kernel_table.py" "$R" -o "$R/bench/gpu_profile.json" ||
    note "FAIL profile: kernel_table.py"
fi

! grep -q '^FAIL' "$summary"
