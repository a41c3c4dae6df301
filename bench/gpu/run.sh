#!/usr/bin/env bash
# The GPU benchmarks of docs/benchmarks.md (not a test; needs an NVIDIA GPU),
# all on the same GPU in one run:
#   kernels  zrt-cuda-bench: the CUDA fused Adam and overflow check, the
#            memory-bound kernels of a GPT-2 step (cross-entropy, the norms,
#            bias gradient, head split) against a device-to-device copy, and
#            the fused attention's forward + backward TFLOP/s ->
#            bench/results/gpu_kernels.json (KERNEL_PARTS: its --only, a
#            subset of adam,overflow,attention,memory, default all;
#            ATTENTION_SEQS: its --attention-seqs, 1024,2048,4096,8192)
#   torch    bench/gpu/gpt2_torch.py: a GPT-2 124M training step in PyTorch
#            eager and torch.compile'd -> bench/results/
#            gpu_gpt2_torch_DTYPE.json, gpu_gpt2_torch_compile_DTYPE.json
#   zero     the same step from zero-model-gen gpt2 | zero-compile --target
#            cuda, trained with --log-json on the same tokens ->
#            bench/results/gpu_gpt2_zero_DTYPE.json; a 16-bit DTYPE again
#            with --attention-precision 16bit -> gpu_gpt2_zero_DTYPE_p16.json
#            and with --cuda-graphs too -> ..._p16_graphs.json
#   llama    a Llama-3.2-1B-shaped step in bf16 at sequence 2048, PyTorch
#            eager, torch.compile and zero-mlir, each at the largest micro
#            batch that fits -> bench/results/gpu_llama_{torch_eager,
#            torch_compile,zero}.json (LLAMA_SEQ, LLAMA_STEPS 10,
#            LLAMA_MAX_BATCH 32, LLAMA_BATCHES "4 8 16 32"; zero-mlir's
#            LLAMA_ATTENTION_PRECISION, default 16bit as PyTorch's flash)
#   offload  (only when ONLY names it) bench/gpu/offload_capacity.py: the
#            largest GPT-2 whose plan fits the GPU, host memory and disk with
#            each offload mode, trained a few steps -> bench/results/
#            gpu_offload.json (OFFLOAD_MODES: a subset of none opt_cpu
#            opt_nvme both_cpu both_nvme; OFFLOAD_STEPS, 3; OFFLOAD_WORK,
#            the directory of the swap files, $TMPDIR)
# then re-renders the docs' gpu tables (bench/update_docs.py --only
# gpu,gpu_offload). With
# RESULTS=$OUT on a lent GPU machine, copy the gpu_*.json files it returns
# into bench/results/ and run `bench/update_docs.py --only gpu` here.
#
#   bench/gpu/run.sh [build-dir]
#
# build-dir (default build/) must be configured with
# -DZRT_BUILD_BENCHMARKS=ON; without a build.ninja there it is configured
# here (Release, benchmarks on). The targets each part needs are built
# first; a part whose tools are not in the build (e.g. no MLIR on the GPU
# machine, so no zero-compile) records why it was skipped and the others
# still run.
#
# Environment: ONLY (a subset of "kernels torch zero llama offload", default
# the first four), DTYPES (of bf16 and
# fp32, default both), BATCH (8), SEQ (1024), STEPS (timed steps, 20),
# WARMUP (3), LOG2_PARAMS (kernel sizes, 24,28), REPS (20), RESULTS (bench/results).
# On a GPU machine without the toolchain, PREBUILT=DIR takes the programs
# from an unpacked scripts/gpu-bundle.sh archive instead of a build:
# DIR/bin/zrt-cuda-bench, DIR/gpt2/gpt2_{bf16,f32} (GPT-2 124M, batch 8,
# seq 1024), DIR/llama (llama_bB per planned batch B and plans.json, their
# planned peaks) and DIR/capacity (the offload part's sizes.json and
# programs).
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
results=${RESULTS:-$root/bench/results}
mkdir -p "$results"
results=$(cd "$results" && pwd)
only=${ONLY:-kernels torch zero llama}
want() { [[ " $only " == *" $1 "* ]]; }
dtypes=${DTYPES:-bf16 fp32}
batch=${BATCH:-8}
seq=${SEQ:-1024}
steps=${STEPS:-20}
warmup=${WARMUP:-3}
gen_dtype() {
  case $1 in
    bf16) echo bf16 ;;
    fp32) echo f32 ;;
    *) echo "run.sh: DTYPES are bf16 and fp32, not '$1'" >&2; return 1 ;;
  esac
}
for dtype in $dtypes; do gen_dtype "$dtype" >/dev/null || exit 1; done

if ! gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total \
    --format=csv,noheader 2>/dev/null) || [[ -z $gpu ]]; then
  echo "run.sh: no NVIDIA GPU here (nvidia-smi found none); nothing measured" >&2
  exit 2
fi
echo "== GPU: $gpu"
cat >"$results/gpu_machine.json" <<JSON
{
  "gpu": "$(echo "$gpu" | head -1 | tr -d '"')",
  "gpus": $(echo "$gpu" | wc -l),
  "cpu": "$(lscpu | sed -n 's/^Model name: *//p' | head -1)",
  "date": "$(date -u +%Y-%m-%d)"
}
JSON

prebuilt=${PREBUILT:-}
build=$(cd "${1:-$root/build}" 2>/dev/null && pwd || echo "${1:-$root/build}")
if [[ -n $prebuilt ]]; then
  echo "== programs from $prebuilt"
elif [[ ! -f $build/build.ninja ]]; then
  echo "== configuring $build"
  cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release \
    -DZRT_BUILD_BENCHMARKS=ON -DZERO_ENABLE_CUDA=ON || exit 1
fi
targets=""
[[ -z $prebuilt ]] &&
  targets=$(ninja -C "$build" -t targets all 2>/dev/null | sed 's/:.*//')
have_target() { grep -qx "$1" <<<"$targets"; }
build_targets() {
  local t missing=()
  for t in "$@"; do
    have_target "$t" || missing+=("$t")
  done
  if [[ ${#missing[@]} -gt 0 ]]; then
    echo "not in the build: ${missing[*]}"
    return 1
  fi
  ninja -C "$build" -j"$(nproc)" "$@" >&2 || { echo "build failed"; return 1; }
}

# skipped FILE REASON: the part's result file says why it was not measured.
skipped() {
  python3 - "$1" "$2" <<'PY'
import json, sys
json.dump({"skipped": sys.argv[2]}, open(sys.argv[1], "w"), indent=2)
PY
  echo "-- skipped: $2" >&2
}

failed=()

# The training data of both GPT-2 runs: the bytes of this repository's docs
# and sources as uint16 tokens (ids < 256 of the 50257), so that the loss
# falls and the two runs' losses compare.
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
python3 - "$data/tokens.bin" "$root" <<'PY' || exit 1
import pathlib, struct, sys
root = pathlib.Path(sys.argv[2])
text = b"".join(p.read_bytes() for pat in ("docs/*.md", "runtime/src/**/*.cpp")
                for p in sorted(root.glob(pat)))
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<%dH" % len(text), *text))
PY

if want kernels; then
  echo "== CUDA kernels: optimizer and memory-bound vs device copy, attention"
  rm -f "$results/gpu_kernels.json"
  bin=""
  if [[ -n $prebuilt ]]; then
    if [[ -x $prebuilt/bin/zrt-cuda-bench ]]; then
      bin=$prebuilt/bin/zrt-cuda-bench
    else
      why="not in the bundle (built with -DZRT_BUILD_BENCHMARKS=OFF)"
    fi
  elif why=$(build_targets zrt-cuda-bench); then
    bin=$(find "$build" -name zrt-cuda-bench -type f -perm -u+x | head -1)
  fi
  if [[ -n $bin ]]; then
    # Passed only when set: the program's defaults are the same.
    subset=()
    [[ -n ${KERNEL_PARTS:-} ]] && subset+=(--only "$KERNEL_PARTS")
    [[ -n ${ATTENTION_SEQS:-} ]] && subset+=(--attention-seqs "$ATTENTION_SEQS")
    if ! "$bin" \
        --log2-params "${LOG2_PARAMS:-24,28}" --reps "${REPS:-20}" \
        "${subset[@]}" --json "$results/gpu_kernels.json"; then
      failed+=(kernels)
    fi
  else
    skipped "$results/gpu_kernels.json" "zrt-cuda-bench: $why"
  fi
fi

# zero_step WORK DTYPE: generates, compiles and trains the zero-mlir GPT-2
# step in WORK and writes its result file.
zero_step() {
  local work=$1 dtype=$2 gen_dtype
  gen_dtype=$(gen_dtype "$2")
  if [[ -n $prebuilt ]]; then
    if [[ $batch != 8 || $seq != 1024 ]]; then
      echo "PREBUILT has GPT-2 at batch 8, seq 1024 only" >&2
      return 1
    fi
    cp "$prebuilt/gpt2/gpt2_$gen_dtype" "$work/gpt2-cuda" || return 1
  else
    "$build/bin/zero-model-gen" gpt2 --layers 12 --hidden 768 --heads 12 \
      --vocab 50257 --seq "$seq" --batch "$batch" --dtype "$gen_dtype" \
      -o "$work/gpt2.mlir" || return 1
    "$build/bin/zero-compile" --target cuda "$work/gpt2.mlir" \
      -o "$work/gpt2-cuda" || return 1
  fi
  # 16-bit steps also with FlashAttention's 16-bit probabilities, as
  # PyTorch's flash kernels compute them (gpu_gpt2_zero_DTYPE_p16.json),
  # and so with CUDA graphs (..._p16_graphs.json).
  local variant precision suffix graphs
  for variant in fp32: 16bit:_p16 16bit:_p16_graphs; do
    precision=${variant%%:*} suffix=${variant#*:}
    [[ $precision == fp32 || $dtype != fp32 ]] || continue
    graphs=(); [[ $suffix != *_graphs ]] || graphs=(--cuda-graphs)
    rm -f "$work/log.jsonl"
    "$work/gpt2-cuda" --steps "$((warmup + steps))" \
      --data "$data/tokens.bin" --attention-precision "$precision" \
      "${graphs[@]}" --log-json "$work/log.jsonl" --quiet || return 1
    python3 "$here/zero_result.py" "$work/log.jsonl" \
      "$results/gpu_gpt2_zero_$dtype$suffix.json" --warmup "$warmup" \
      --batch "$batch" --seq "$seq" --dtype "$dtype" --model gpt2 \
      --layers 12 --hidden 768 --heads 12 --vocab 50257 --gpu "$gpu" \
      --attention-precision "$precision" "${graphs[@]}" || return 1
  done
}

for dtype in $dtypes; do
  if want torch; then
    for mode in eager compile; do
      echo "== GPT-2 step, PyTorch $mode, $dtype"
      out=$results/gpu_gpt2_torch_$dtype.json
      flags=()
      [[ $mode == compile ]] &&
        { out=$results/gpu_gpt2_torch_compile_$dtype.json; flags=(--compile); }
      rm -f "$out"
      if ! python3 "$here/gpt2_torch.py" --batch "$batch" --seq "$seq" \
          --steps "$steps" --warmup "$warmup" --dtype "$dtype" \
          --data "$data/tokens.bin" "${flags[@]}" --json "$out"; then
        failed+=("torch $mode $dtype")
      fi
    done
  fi
  if want zero; then
    echo "== GPT-2 step, zero-mlir --target cuda, $dtype"
    rm -f "$results/gpu_gpt2_zero_$dtype.json" \
      "$results/gpu_gpt2_zero_${dtype}_p16.json" \
      "$results/gpu_gpt2_zero_${dtype}_p16_graphs.json"
    # The CUDA runtime libraries that an executable of --target cuda links,
    # whichever of them this build defines.
    cuda_libs=()
    for t in zero_runtime_cuda zero_runtime_cuda_kernels; do
      have_target "$t" && cuda_libs+=("$t")
    done
    if [[ -n $prebuilt ]] || why=$(build_targets zero-model-gen zero-compile \
        zero_runtime zero_runtime_main "${cuda_libs[@]}"); then
      work=$(mktemp -d)
      zero_step "$work" "$dtype" || failed+=("zero $dtype")
      rm -rf "$work"
    else
      skipped "$results/gpu_gpt2_zero_$dtype.json" "zero-mlir GPT-2: $why"
    fi
  fi
done

# A Llama-3.2-1B-shaped model (16 layers, hidden 2048, 32 heads, 8 KV
# heads, MLP 8192, vocabulary 128256, tied, RoPE base 500000) at sequence
# 2048 in bf16, each implementation at the largest micro batch that fits
# the GPU: PyTorch eager and torch.compile find theirs by running out of
# memory (--batch auto), zero-mlir's is the largest of LLAMA_BATCHES whose
# planned peak fits the GPU's memory less 2 GiB (the CUDA context).
llama_dims=(--layers 16 --hidden 2048 --heads 32 --kv-heads 8 --ffn 8192
  --vocab 128256)
llama_seq=${LLAMA_SEQ:-2048}
# 16-bit attention probabilities, as torch.compile's flash attention.
llama_precision=${LLAMA_ATTENTION_PRECISION:-16bit}
llama_steps=${LLAMA_STEPS:-10}
if want llama; then
  for mode in eager compile; do
    echo "== Llama-3.2-1B-shaped step, PyTorch $mode, bf16"
    out=$results/gpu_llama_torch_$mode.json
    flags=()
    [[ $mode == compile ]] && flags=(--compile)
    rm -f "$out"
    python3 "$here/gpt2_torch.py" --model llama "${llama_dims[@]}" --tied \
      --rope-theta 500000 --seq "$llama_seq" --batch auto \
      --max-batch "${LLAMA_MAX_BATCH:-32}" --steps "$llama_steps" \
      --warmup "$warmup" --dtype bf16 --data "$data/tokens.bin" \
      "${flags[@]}" --json "$out" || failed+=("llama torch $mode")
  done
  echo "== Llama-3.2-1B-shaped step, zero-mlir --target cuda, bf16"
  rm -f "$results/gpu_llama_zero.json"
  llama=""
  if [[ -n $prebuilt ]]; then
    [[ -f $prebuilt/llama/plans.json ]] && llama=$prebuilt/llama
    why="not in the bundle"
  elif why=$(build_targets zero-model-gen zero-opt zero-compile); then
    llama=$data/llama
    # shellcheck disable=SC2086
    "$here/llama_programs.sh" "$build/bin" "$llama" "$llama_seq" \
      ${LLAMA_BATCHES:-} || { llama=""; failed+=("llama zero"); }
    why="compile failed"
  fi
  if [[ -n $llama ]]; then
    total=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits |
      head -1)
    b=$(python3 -c 'import json,sys
plans = {int(k): v for k, v in json.load(open(sys.argv[1])).items()}
fit = [b for b, peak in plans.items() if peak <= int(sys.argv[2]) * 2**20 - 2 * 2**30]
print(max(fit) if fit else 0)' "$llama/plans.json" "$total")
    if [[ $b == 0 ]]; then
      skipped "$results/gpu_llama_zero.json" "no planned batch fits ${total} MiB"
    else
      work=$(mktemp -d)
      if "$llama/llama_b$b" --steps "$((warmup + llama_steps))" \
          --data "$data/tokens.bin" --attention-precision "$llama_precision" \
          --log-json "$work/log.jsonl" --quiet; then
        python3 "$here/zero_result.py" "$work/log.jsonl" \
          "$results/gpu_llama_zero.json" --warmup "$warmup" --batch "$b" \
          --seq "$llama_seq" --dtype bf16 --model llama --tied \
          "${llama_dims[@]}" --gpu "$gpu" \
          --attention-precision "$llama_precision" \
          --planned-batches "$(cat "$llama/plans.json")" ||
          failed+=("llama zero")
      else
        failed+=("llama zero")
      fi
      rm -rf "$work"
    fi
  elif [[ ! -f $results/gpu_llama_zero.json ]]; then
    skipped "$results/gpu_llama_zero.json" "zero-mlir Llama: $why"
  fi
fi

# The largest GPT-2 per offload mode (bench/gpu/offload_capacity.py): its
# sizes planned here (or the bundle's), each trained OFFLOAD_STEPS steps
# after one warm-up step, its swap files under OFFLOAD_WORK.
if want offload; then
  echo "== largest GPT-2 per offload mode"
  capacity=""
  if [[ -n $prebuilt ]]; then
    capacity=$prebuilt/capacity
  elif why=$(build_targets zero-model-gen zero-opt zero-compile); then
    capacity=$data/capacity
    mkdir -p "$capacity"
    python3 "$here/offload_capacity.py" plan --bin "$build/bin" \
        -o "$capacity/sizes.json" &&
      python3 "$here/offload_capacity.py" compile --bin "$build/bin" \
        --sizes "$capacity/sizes.json" --out "$capacity" ||
      { failed+=(offload); capacity=""; }
  else
    skipped "$results/gpu_offload.json" "offload capacity: $why"
  fi
  if [[ -n $capacity ]]; then
    # shellcheck disable=SC2086
    python3 "$here/offload_capacity.py" run --sizes "$capacity/sizes.json" \
      --programs "$capacity" --data "$data/tokens.bin" --results "$results" \
      --steps "${OFFLOAD_STEPS:-3}" --warmup 1 \
      --work "${OFFLOAD_WORK:-${TMPDIR:-/tmp}}" \
      ${OFFLOAD_MODES:+--modes $OFFLOAD_MODES} || failed+=(offload)
  fi
fi

# Only the gpu tables: the other tables' results come from the CPU runs.
python3 "$root/bench/update_docs.py" --results "$results" --only gpu,gpu_offload
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "run.sh: failed: ${failed[*]}" >&2
  exit 1
fi
