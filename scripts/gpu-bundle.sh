#!/usr/bin/env bash
# Packs what the GPU checks need into one archive, for a GPU machine that has
# the NVIDIA driver, CUDA's cuBLASLt and NCCL but neither MLIR nor Open MPI
# nor OpenBLAS (a bare cloud GPU image). scripts/gpu-check.sh runs it there.
#
#   scripts/gpu-bundle.sh [build-dir] OUT.tar.xz
#   scripts/gpu-bundle.sh [build-dir] OUT-DIR/    (the bundle's folder, as is)
#
# GPU_BUNDLE_PARTS picks what is compiled (default all: e2e offload wide
# models shared gpt2 llama capacity library); GPU_BUNDLE_DTYPES the dtypes of the e2e, models
# and offload steps (default f32 bf16); CAPACITY_ARGS are passed to
# bench/gpu/offload_capacity.py plan (e.g. another GPU's --device-memory).
# GPU_BUNDLE_TARGET=cpu compiles the offload and models parts for the CPU
# backend instead, so that gpu-check.sh and gpu-verify.py run here on the same
# layout (test/Scripts/gpu-bundle.test).
#
# build-dir (default build/) must have the CUDA backend, and for the whole
# bundle -DZRT_BUILD_BENCHMARKS=ON; a bundle of chosen GPU_BUNDLE_PARTS
# carries zrt-cuda-bench only where it was built (bench/gpu/run.sh then
# records the kernels part as skipped). The archive holds:
#   bin/    the GPU unit tests (runtime/cuda/test) and zrt-cuda-bench; with
#           the shared part, Open MPI's mpirun
#   shared/ stage 3 and expert parallelism on 2 ranks, run on one GPU with
#           --collectives host, each with the CPU backend's log of the same
#           compile (cases.txt)
#   e2e/    the steps of test/E2E/cuda compiled here with --target cuda
#           (zero-compile links with mpicxx, which the GPU machine lacks),
#           their tokens, and the CPU backend's reference logs run here;
#           also GPT-2 124M's widths on a short batch (wide_*)
#           models/: a tiny Llama (RoPE, GQA, RMSNorm, SwiGLU) with the
#           chunked loss, the tiled MLP, Lion, SGD and 8-bit Adam states,
#           bf16 with 16-bit attention probabilities on the GPU,
#           and tiny Mixtral
#           (with and without the load-balancing loss) and Qwen2-MoE
#           imported from transformers (the MoE ops), each with the CPU
#           backend's log of the same compile run here (cases.txt)
#           off_*: the same steps with each offload mode (optimizer cpu or
#           nvme at stages 1-3; parameters, or both, cpu or nvme at stage 3)
#           and e2e/offload/off_*.plan.json their planned device peak,
#           host peak and NVMe bytes (zero-opt's report, the programs' own
#           plans)
#   capacity/ the largest GPT-2 per offload mode that fits an H100's
#           memory, host memory and disk by the plan (sizes.json, from
#           bench/gpu/offload_capacity.py plan) compiled with --target cuda,
#           for bench/gpu/run.sh ONLY=offload
#   gpt2/   GPT-2 124M compiled with --target cuda (bf16 and fp32), the
#           zero-mlir side of bench/gpu/run.sh
#   llama/  a Llama-3.2-1B-shaped step (bf16, sequence 2048) compiled with
#           --target cuda at micro batches 4, 8, 16 and 32, and plans.json
#           their planned peaks (bench/gpu/llama_programs.sh), the zero-mlir
#           side of bench/gpu/run.sh's llama part
#   lib/    every shared library those programs load that is not part of
#           glibc, libstdc++ or the CUDA/NCCL stack (Open MPI with its MCA
#           components, OpenBLAS, libgomp, ...), found with ldd here
# The CUDA libraries (libcublasLt, libnccl) are the GPU machine's own:
# gpu-check.sh looks for them there.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ $# -eq 1 ]; then BUILD="$ROOT/build"; OUTFILE=$1
elif [ $# -eq 2 ]; then BUILD=$1; OUTFILE=$2
else echo "usage: scripts/gpu-bundle.sh [build-dir] OUT.tar.xz" >&2; exit 2; fi
BUILD=$(cd "$BUILD" && pwd)
to_dir=0
[[ $OUTFILE == */ ]] && to_dir=1
OUTFILE=$(realpath -m "$OUTFILE")
BIN=$BUILD/bin
for t in zero-model-gen zero-compile zero-opt; do
  [ -x "$BIN/$t" ] || { echo "gpu-bundle: $BIN/$t is missing" >&2; exit 1; }
done
# Every GPU unit test program the build has (runtime/cuda/test), at least
# the first three.
for t in kernels matmul-attention optimizer; do
  [ -x "$BUILD/runtime/cuda/test/zrt-cuda-$t-test" ] || { echo "gpu-bundle:" \
    "$BUILD/runtime/cuda/test/zrt-cuda-$t-test is missing (CUDA backend" \
    "needed)" >&2; exit 1; }
done
GPU_PROGRAMS=()
for t in "$BUILD"/runtime/cuda/test/zrt-cuda-*-test; do
  [ -x "$t" ] && GPU_PROGRAMS+=("runtime/cuda/test/$(basename "$t")")
done
# The kernel benchmark is only built with -DZRT_BUILD_BENCHMARKS=ON: the
# whole bundle needs it, a partial one (GPU_BUNDLE_PARTS) goes without.
BENCH_PROGRAM=runtime/cuda/bench/zrt-cuda-bench
if [ -x "$BUILD/$BENCH_PROGRAM" ]; then
  GPU_PROGRAMS+=("$BENCH_PROGRAM")
elif [ -z "${GPU_BUNDLE_PARTS:-}" ]; then
  echo "gpu-bundle: $BUILD/$BENCH_PROGRAM is missing (the whole bundle" \
    "needs -DZRT_BUILD_BENCHMARKS=ON; or choose GPU_BUNDLE_PARTS)" >&2
  exit 1
else
  echo "gpu-bundle: no $BENCH_PROGRAM (-DZRT_BUILD_BENCHMARKS=OFF):" \
    "the bundle goes without the kernel benchmark" >&2
fi

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
B=$stage/bundle
mkdir -p "$B/bin" "$B/e2e" "$B/gpt2" "$B/lib"
parts=${GPU_BUNDLE_PARTS:-e2e offload wide models shared gpt2 llama capacity library}
want() { [[ " $parts " == *" $1 "* ]]; }
dtypes=${GPU_BUNDLE_DTYPES:-f32 bf16}
target=${GPU_BUNDLE_TARGET:-cuda}
for t in "${GPU_PROGRAMS[@]}"; do
  cp "$BUILD/$t" "$B/bin/"
done

# --- test/E2E/cuda, compiled here ----------------------------------------
E2E=$ROOT/test/E2E/Inputs/zrt_e2e.py
gen() { "$BIN/zero-model-gen" gpt2 --layers 2 --heads 2 "$@"; }
python3 "$E2E" tokens "$B/e2e/tokens64.bin" "$ROOT/test/Inputs/training-text.md" \
  --vocab 64 >/dev/null
gen --hidden 64 --vocab 64 --seq 32 --batch 8 --dtype f32 -o "$stage/f32.mlir"
gen --hidden 64 --vocab 64 --seq 32 --batch 8 --dtype bf16 -o "$stage/bf16.mlir"
gen --hidden 32 --vocab 64 --seq 16 --batch 8 --dtype f16 -o "$stage/f16.mlir"
export OMPI_MCA_ess_singleton_isolated=1 OMP_NUM_THREADS=1
want e2e && for dt in $dtypes; do
  "$BIN/zero-compile" "$stage/$dt.mlir" --stage 0 --world-size 1 \
    -o "$stage/cpu_$dt"
  "$stage/cpu_$dt" --quiet --steps 10 --data "$B/e2e/tokens64.bin" \
    --log-json "$B/e2e/cpu_$dt.json" >/dev/null
  for s in 0 1 2 3; do
    "$BIN/zero-compile" --target cuda "$stage/$dt.mlir" --stage $s \
      --world-size 1 -o "$B/e2e/${dt}_s$s"
  done
done
want e2e && "$BIN/zero-compile" "$stage/f16.mlir" --target cuda --stage 2 \
  --world-size 1 --config "$ROOT/test/E2E/Inputs/fp16-hysteresis1.json" \
  -o "$B/e2e/f16_s2"

# GPT-2 124M's widths (hidden 768, 12 heads, vocab 50257) on a short batch:
# the CPU backend's 5 steps here, the CUDA backend's there. --target cuda
# pads bf16's vocabulary to 50304 rows and the CPU compile does not, so
# gpu-verify.py's comparison of their losses also checks that the padding
# leaves them those of the unpadded model.
python3 "$E2E" tokens "$B/e2e/tokens50257.bin" "$ROOT"/docs/*.md \
  --vocab 50257 >/dev/null
want wide && for dt in f32 bf16; do
  "$BIN/zero-model-gen" gpt2 --layers 12 --hidden 768 --heads 12 \
    --vocab 50257 --seq 64 --batch 2 --dtype $dt -o "$stage/wide_$dt.mlir"
  "$BIN/zero-compile" "$stage/wide_$dt.mlir" --stage 3 --world-size 1 \
    -o "$stage/cpu_wide_$dt"
  OMP_NUM_THREADS=$(nproc) "$stage/cpu_wide_$dt" --quiet --steps 5 \
    --data "$B/e2e/tokens50257.bin" --log-json "$B/e2e/cpu_wide_$dt.json" \
    >/dev/null
  "$BIN/zero-compile" --target cuda "$stage/wide_$dt.mlir" --stage 3 \
    --world-size 1 -o "$B/e2e/wide_${dt}_s3"
done

# bundle_case DIR TAG RANKS NAME MLIR STEPS RUN [zero-compile args]: compiles
# a case for RANKS ranks, runs it STEPS steps on the CPU here with RUN (TAG
# in it stands for DIR wherever the bundle is unpacked) for the reference
# log DIR/cpu_NAME.json, compiles it for the target as DIR/NAME, and lists
# it in DIR/cases.txt.
bundle_case() {
  local dir=$1 tag=$2 ranks=$3 name=$4 mlir=$5 steps=$6 run=$7; shift 7
  local launch=()
  [ "$ranks" = 1 ] || launch=(env OMPI_ALLOW_RUN_AS_ROOT=1
    OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -np "$ranks" --oversubscribe)
  "$BIN/zero-compile" "$mlir" --world-size "$ranks" "$@" -o "$stage/cpu_$name"
  # shellcheck disable=SC2086
  (cd "$dir" && "${launch[@]}" "$stage/cpu_$name" --quiet --steps "$steps" \
    ${run//$tag/$dir} --log-json "$dir/cpu_$name.json" >/dev/null)
  # For the CPU backend (GPU_BUNDLE_TARGET=cpu) the bundle's program is the
  # compile above: zero-compile --target cpu writes the same bytes.
  if [ "$target" = cpu ]; then
    cp "$stage/cpu_$name" "$dir/$name"
  else
    "$BIN/zero-compile" --target "$target" "$mlir" --world-size "$ranks" \
      "$@" -o "$dir/$name"
  fi
  # gpu_args (set for the call): train options of the GPU run alone.
  echo "$name $steps $run${gpu_args:+ $gpu_args}" >>"$dir/cases.txt"
}

# The ops and options that came after the steps above, each beside the CPU
# backend's run of the same compile: cases.txt holds one line per program,
# "NAME STEPS ARGS", with @M@ for the models folder wherever it is unpacked.
M=$B/e2e/models
want models && {
  mkdir -p "$M"
  cp "$B/e2e/tokens64.bin" "$M/"
  : >"$M/cases.txt"
  model() { bundle_case "$M" @M@ 1 "$@"; }
  llama() {
    "$BIN/zero-model-gen" llama --layers 2 --hidden 64 --heads 4 \
      --kv-heads 2 --ffn 172 --vocab 64 --seq 32 --batch 8 "$@"
  }
  tok="--data @M@/tokens64.bin"
  for dt in $dtypes; do
    llama --dtype $dt -o "$stage/llama_$dt.mlir"
    model llama_${dt}_s0 "$stage/llama_$dt.mlir" 10 "$tok" --stage 0
    model llama_${dt}_s3 "$stage/llama_$dt.mlir" 10 "$tok" --stage 3
    # 48 rows per chunk: 256 tokens leave a short last chunk.
    model llama_${dt}_chunk_s3 "$stage/llama_$dt.mlir" 10 "$tok" --stage 3 \
      --loss-chunk 48
  done
  model llama_f32_tiled_s3 "$stage/llama_f32.mlir" 10 "$tok" --stage 3 \
    --tiled-mlp 2
  llama --dtype f32 --optimizer lion --lr 1e-4 -o "$stage/llama_lion.mlir"
  model llama_f32_lion_s2 "$stage/llama_lion.mlir" 10 "$tok" --stage 2
  llama --dtype f32 --optimizer sgd --momentum 0.9 --nesterov --lr 0.05 \
    -o "$stage/llama_sgd.mlir"
  model llama_f32_sgd_s1 "$stage/llama_sgd.mlir" 10 "$tok" --stage 1
  # 8-bit Adam states (bitsandbytes' block-wise quantisation).
  llama --dtype f32 --optimizer-states int8 -o "$stage/llama_int8.mlir"
  model llama_f32_int8_s2 "$stage/llama_int8.mlir" 10 "$tok" --stage 2
  # Muon (Newton-Schulz on the hidden matrices, AdamW on the rest; at stage
  # 3 its states packed by part) and Adafactor (factored second moments).
  llama --dtype f32 --optimizer muon --lr 1e-3 --weight-decay 0.01 \
    -o "$stage/llama_muon.mlir"
  model llama_f32_muon_s0 "$stage/llama_muon.mlir" 10 "$tok" --stage 0
  model llama_f32_muon_s3 "$stage/llama_muon.mlir" 10 "$tok" --stage 3
  for dt in $dtypes; do
    llama --dtype $dt --optimizer adafactor --lr 1e-2 --weight-decay 0.01 \
      -o "$stage/llama_adafactor_$dt.mlir"
    model llama_${dt}_adafactor_s3 "$stage/llama_adafactor_$dt.mlir" 10 \
      "$tok" --stage 3
  done
  model llama_f32_adafactor_s0 "$stage/llama_adafactor_f32.mlir" 10 "$tok" \
    --stage 0
  # bf16 parameters as their own masters, with fp32 and with bf16 moments;
  # and the stage 3 step with FlashAttention's 16-bit probabilities on the
  # GPU (train --attention-precision 16bit, CUDA only) against the CPU's
  # fp32 attention.
  if [[ " $dtypes " == *" bf16 "* ]]; then
    [ "$target" = cpu ] ||
      gpu_args="--attention-precision 16bit" model llama_bf16_p16_s3 \
        "$stage/llama_bf16.mlir" 10 "$tok" --stage 3
    llama --dtype bf16 --bf16-masters -o "$stage/llama_bf16m.mlir"
    model llama_bf16_masters_s2 "$stage/llama_bf16m.mlir" 10 "$tok" --stage 2
    llama --dtype bf16 --bf16-masters --optimizer-states bf16 \
      -o "$stage/llama_bf16ms.mlir"
    model llama_bf16_masters_states_s3 "$stage/llama_bf16ms.mlir" 10 "$tok" \
      --stage 3
  fi
  # A tiny Mixtral from transformers' own class (needs the project's venv:
  # torch and transformers), its -100 labels and its initial weights.
  py=${ZERO_PYTHON:-$ROOT/.venv/bin/python}
  if "$py" -c "import torch, transformers" 2>/dev/null; then
    H=$ROOT/test/Import/Inputs/hf_models.py
    # Mixtral, Mixtral with the load-balancing loss, and Qwen2-MoE (its
    # shared expert), each from its initial weights as the import wrote them.
    # One Python process (test/Import/Inputs/in_process.py: each case's
    # output in $stage/NAME.out) saves and imports them all, and gpt-oss
    # below: torch and transformers are imported once, not once a command.
    cases=(batches: "$H" batches "$M/ids.npy" "$M/labels.npy" --rows 24
           --seq 32)
    for kind in mixtral mixtral_aux qwen2_moe; do
      cases+=(:: "save_$kind:" "$H" save "$kind" "$kind"
              :: "import_$kind:" zero-import --hf "$kind" --batch 8 --seq 32
                 -o "$kind.mlir" --lr 3e-3)
    done
    # gpt-oss (attention sinks, a sliding window, YaRN, expert biases, the
    # clamped SwiGLU) in fp32, and saved and imported in bf16: the bf16
    # grouped products.
    if [[ " $dtypes " == *" bf16 "* ]]; then
      cases+=(:: save_gpt_oss: "$H" save gpt_oss gpt_oss
              :: import_gpt_oss: zero-import --hf gpt_oss --batch 8 --seq 32
                 -o gpt_oss.mlir --lr 3e-3
              :: save_gpt_oss_bf16: "$H" save gpt_oss_bf16 gpt_oss_bf16
                 --dtype bfloat16
              :: import_gpt_oss_bf16: zero-import --hf gpt_oss_bf16 --batch 8
                 --seq 32 --dtype bf16 -o gpt_oss_bf16.mlir --lr 3e-3)
    fi
    (cd "$stage" &&
     "$py" "$ROOT/test/Import/Inputs/in_process.py" "${cases[@]}") || exit 1
    data="--inputs @M@/ids.npy --labels @M@/labels.npy"
    for kind in mixtral mixtral_aux qwen2_moe; do
      cp "$stage/$kind.safetensors" "$M/"
      init="$data --init-from @M@/$kind.safetensors"
      model ${kind}_f32_s0 "$stage/$kind.mlir" 5 "$init" --stage 0
      [ $kind = mixtral_aux ] ||
        model ${kind}_f32_s3 "$stage/$kind.mlir" 5 "$init" --stage 3
    done
    # gpt-oss, saved and imported above.
    if [[ " $dtypes " == *" bf16 "* ]]; then
      cp -r "$stage/gpt_oss" "$stage/gpt_oss_bf16" "$M/"
      model gpt_oss_f32_s0 "$stage/gpt_oss.mlir" 5 \
        "$data --init-from @M@/gpt_oss" --stage 0
      model gpt_oss_bf16_s3 "$stage/gpt_oss_bf16.mlir" 5 \
        "$data --init-from @M@/gpt_oss_bf16" --stage 3
    fi
  else
    echo "gpu-bundle: no torch/transformers on $py: the bundle goes" \
      "without the Mixtral steps" >&2
  fi
}

# Offload (issue 19) on the same steps: each mode beside the same stage
# without offload (e2e/${dt}_s$s above), NVMe swap files in ./nvme of the
# directory the program runs in (gpu-check.sh gives each run its own), and
# the plan of each as zero-opt's report gives it (offload/*.plan.json),
# checked here against the program's own manifest.
OFFLOAD_CASES=(
  "opt_cpu:1 2 3:--offload-optimizer cpu:offload-optimizer=cpu"
  "opt_nvme:1 2 3:--offload-optimizer nvme --nvme-path nvme:offload-optimizer=nvme nvme-path=nvme"
  "param_cpu:3:--offload-param cpu:offload-param=cpu"
  "param_nvme:3:--offload-param nvme --nvme-path nvme:offload-param=nvme nvme-path=nvme"
  "both_cpu:3:--offload-param cpu --offload-optimizer cpu:offload-param=cpu offload-optimizer=cpu"
  "both_nvme:3:--offload-param nvme --offload-optimizer nvme --nvme-path nvme:offload-param=nvme offload-optimizer=nvme nvme-path=nvme"
)
want offload && mkdir -p "$B/e2e/offload" && for dt in $dtypes; do
  # The same stages without offload, unless the e2e part compiled them.
  for s in 1 2 3; do
    [ -x "$B/e2e/${dt}_s$s" ] && [ "$target" = cuda ] ||
      "$BIN/zero-compile" --target "$target" "$stage/$dt.mlir" --stage $s \
        --world-size 1 -o "$B/e2e/${dt}_s$s"
  done
  for c in "${OFFLOAD_CASES[@]}"; do
    IFS=: read -r mode stages flags pipeline <<<"$c"
    for s in $stages; do
      name=off_${dt}_${mode}_s$s
      # shellcheck disable=SC2086
      "$BIN/zero-compile" --target "$target" "$stage/$dt.mlir" --stage $s \
        --world-size 1 $flags -o "$B/e2e/$name"
      "$BIN/zero-opt" "$stage/$dt.mlir" \
        --zero-pipeline="stage=$s world-size=1 target=$target $pipeline" \
        --zero-report=format=json -o /dev/null >"$stage/report.json"
      "$B/e2e/$name" --print-manifest >"$stage/manifest.json"
      python3 - "$stage/report.json" "$stage/manifest.json" \
        "$B/e2e/offload/$name.plan.json" "$name" "$dt" "$mode" "$s" <<'PY'
import json, sys
report, manifest, out, name, dt, mode, stage = sys.argv[1:]
r = json.load(open(report))
plan = json.load(open(manifest))["plan"]
got = {k: r[k] for k in ("peak_bytes", "host_peak_bytes", "nvme_bytes")}
want = {"peak_bytes": plan["peak_bytes"], "host_peak_bytes":
        plan.get("host_bytes", 0), "nvme_bytes": plan.get("nvme_bytes", 0)}
if got != want:
    sys.exit("gpu-bundle: %s: zero-opt's report %r != the program's plan %r"
             % (name, got, want))
json.dump(dict(got, name=name, dtype=dt, mode=mode, stage=int(stage),
               baseline="%s_s%s" % (dt, stage)), open(out, "w"), indent=1)
PY
    done
  done
done

# --- ranks sharing one GPU (train --collectives host) ----------------------
# Stage 3 on 2 ranks for each dtype (and in f32 with the parameters and the
# optimizer offloaded to the host), and expert parallelism over 2 ranks (the
# Mixtral block of test/E2E/Inputs/moe_model.mlir), which gpu-check.sh runs
# with both ranks on the one GPU, collectives through MPI over host memory
# (NCCL refuses two ranks on a device). The CPU backend's run of the same
# compile here is each one's reference (cases.txt: NAME STEPS ARGS, @S@ for
# the folder wherever it is unpacked); the bundle carries mpirun.
S=$B/shared
want shared && {
  mkdir -p "$S"
  cp "$B/e2e/tokens64.bin" "$S/"
  python3 "$E2E" npy "$S/x.npy" "$S/y.npy" --rows 32 --features 8 --classes 5 \
    --label-dtype i4 >/dev/null
  : >"$S/cases.txt"
  shared_case() { bundle_case "$S" @S@ 2 "$1" "$2" 10 "${@:3}"; }
  for dt in $dtypes; do
    shared_case "${dt}_s3_w2" "$stage/$dt.mlir" "--data @S@/tokens64.bin" \
      --stage 3
  done
  # Prefetch and release with the parameters and the optimizer on the host.
  shared_case f32_s3_w2_offload "$stage/f32.mlir" "--data @S@/tokens64.bin" \
    --stage 3 --offload-param cpu --offload-optimizer cpu
  shared_case moe_ep2_s2_w2 "$ROOT/test/E2E/Inputs/moe_model.mlir" \
    "--inputs @S@/x.npy --labels @S@/y.npy" --stage 2 --ep-size 2
  # Open MPI's launcher (orterun), which starts local ranks itself.
  cp "$(readlink -f "$(command -v mpirun)")" "$B/bin/mpirun"
}

# --- GPT-2 124M for bench/gpu/run.sh ---------------------------------------
want gpt2 && for dt in bf16 f32; do
  "$BIN/zero-model-gen" gpt2 --layers 12 --hidden 768 --heads 12 \
    --vocab 50257 --seq 1024 --batch 8 --dtype $dt -o "$stage/gpt2_$dt.mlir"
  "$BIN/zero-compile" --target cuda "$stage/gpt2_$dt.mlir" \
    -o "$B/gpt2/gpt2_$dt"
done

# --- a Llama-3.2-1B-shaped step per micro batch, for bench/gpu/run.sh -------
# (its llama part runs the largest whose plan fits the GPU)
want llama && "$ROOT/bench/gpu/llama_programs.sh" "$BIN" "$B/llama" >/dev/null

# --- the largest GPT-2 per offload mode, for bench/gpu/run.sh ONLY=offload --
if want capacity; then
  mkdir -p "$B/capacity"
  # shellcheck disable=SC2086
  python3 "$ROOT/bench/gpu/offload_capacity.py" plan --bin "$BIN" \
    -o "$B/capacity/sizes.json" ${CAPACITY_ARGS:-}
  python3 "$ROOT/bench/gpu/offload_capacity.py" compile --bin "$BIN" \
    --sizes "$B/capacity/sizes.json" --out "$B/capacity"
fi

# --- the step as a library (zero_rt/session.h) -------------------------------
# Each dtype's step at stage 3, as an executable and as `--emit shared`, and
# token rows of both as .npy: gpu-check.sh trains each way and
# scripts/gpu-session.py (ctypes: the GPU machine has no zero_mlir build)
# compares the records and the weights, across an offload and reload.
if want library; then
  mkdir -p "$B/library"
  python3 "$ROOT/scripts/gpu-session.py" --tokens 64 32 64 \
    "$B/library/ids.npy" "$B/library/labels.npy"
  for dt in $dtypes; do
    "$BIN/zero-compile" --target "$target" "$stage/$dt.mlir" --stage 3 \
      --world-size 1 -o "$B/library/${dt}_s3"
    "$BIN/zero-compile" --target "$target" "$stage/$dt.mlir" --stage 3 \
      --world-size 1 --emit shared -o "$B/library/${dt}_s3.so"
  done
fi

# --- shared libraries -------------------------------------------------------
# glibc, the C++ runtime (the GPU machine's is newer) and the CUDA stack (the
# GPU machine's driver decides which of those work) are not carried.
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libstdc\+\+|libgcc_s|libcuda\.|libnccl|libcublas|libcudart)'
mapfile -t programs < <(find "$B/e2e" "$B/gpt2" "$B/llama" "$B/capacity" "$B/library" "$B/shared" -type f \
  -perm -u+x 2>/dev/null | sort)
[ ${#programs[@]} -gt 0 ] || { echo "gpu-bundle: no programs" \
  "(GPU_BUNDLE_PARTS='$parts')" >&2; exit 1; }
ompi=$(dirname "$(readlink -f "$(ldd "${programs[0]}" |
  awk '/libmpi\.so/ {print $3}')")")
mkdir -p "$B/lib/openmpi3"
cp "$ompi"/openmpi/lib/openmpi3/*.so "$B/lib/openmpi3/" 2>/dev/null ||
  cp /usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/*.so "$B/lib/openmpi3/"
mkdir -p "$B/share"
cp -r /usr/share/openmpi "$B/share/openmpi"
for f in "$B"/bin/* "${programs[@]}" "$B"/lib/openmpi3/*.so; do
  ldd "$f" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  if ! [[ $name =~ $skip ]] && [ ! -e "$B/lib/$name" ]; then
    cp -L "$path" "$B/lib/$name"
  fi
done
strip --strip-unneeded "$B"/bin/* "${programs[@]}" 2>/dev/null || true
cat >"$B/MANIFEST" <<EOF
built $(date -u +%FT%TZ) from $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown) on $(uname -m)
EOF
if [ $to_dir = 1 ]; then
  mkdir -p "$OUTFILE"
  cp -a "$B"/. "$OUTFILE"/
  echo "gpu-bundle: $OUTFILE ($(du -sh "$OUTFILE" | cut -f1))"
  exit 0
fi
mkdir -p "$(dirname "$OUTFILE")"
# xz with a 192 MiB window and a fast match finder: every program carries
# the same ~65 MB of CUDA kernels, which a window of two programs then
# stores once (about 10 MB and a few seconds, where -9's 64 MiB window
# stored them again in each program).
(cd "$stage" && find bundle -type f | sort |
  XZ_OPT="--lzma2=preset=1,dict=192MiB" tar -cJf "$OUTFILE" -T -)
echo "gpu-bundle: $OUTFILE ($(du -h "$OUTFILE" | cut -f1))"
