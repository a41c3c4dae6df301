#!/usr/bin/env bash
# Compile time of zero-pipeline at stage 3, world size 64 (not a test).
#
#   bench/compile_time.sh [build-dir]      (default: build)
#
# Generates GPT-2 124M, 1.5B and a 175B-shaped step with zero-model-gen,
# plus a depth series (12, 96, 960 layers at a fixed small width) to check
# that compile time grows linearly with depth. Each point is the best of
# three runs of `zero-opt --zero-pipeline=...` (wall time, parse and print
# included). Then the cases with a goal: the pipeline at stage 3 on 8 ranks
# for 10,000 parameter tensors (goal 1 s), `zero-compile` of a 20,000-op
# step into an executable (goal 20 s), and gpt2-tiny with
# reduce-bucket-size=1 (a 2-million-op schedule; the seconds of
# zero-verify-schedule are reported). Writes bench/results/compile_time.json.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
gen=$build/bin/zero-model-gen
opt=$build/bin/zero-opt
out=$here/results
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"

pipeline="--zero-pipeline=stage=3 world-size=64 dtype=bf16"
batch=64

# name|zero-model-gen arguments
models=(
  "gpt2-124M|--layers 12 --hidden 768 --heads 12 --vocab 50257 --seq 1024"
  "gpt2-1.5B|--layers 48 --hidden 1600 --heads 25 --vocab 50257 --seq 1024"
  "gpt3-175B-shaped|--layers 96 --hidden 12288 --heads 96 --vocab 50257 --seq 2048"
  "depth-12|--layers 12 --hidden 256 --heads 4 --vocab 1024 --seq 128"
  "depth-96|--layers 96 --hidden 256 --heads 4 --vocab 1024 --seq 128"
  "depth-960|--layers 960 --hidden 256 --heads 4 --vocab 1024 --seq 128"
)

now() { date +%s.%N; }

json="["
sep=""
printf '%-18s %8s %10s %10s\n' model layers ops seconds
for entry in "${models[@]}"; do
  name=${entry%%|*}
  args=${entry#*|}
  # shellcheck disable=SC2086
  "$gen" gpt2 $args --batch $batch -o "$tmp/$name.mlir"
  layers=$(sed -E 's/.*--layers ([0-9]+).*/\1/' <<<"$args")
  best=""
  for _ in 1 2 3; do
    t0=$(now)
    "$opt" "$tmp/$name.mlir" "$pipeline" -o "$tmp/$name.out.mlir"
    t1=$(now)
    t=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", b - a }')
    if [[ -z $best ]] || awk -v a="$t" -v b="$best" 'BEGIN { exit !(a < b) }'; then
      best=$t
    fi
  done
  ops=$(grep -c '^    ' "$tmp/$name.out.mlir" || true)
  printf '%-18s %8s %10s %10s\n' "$name" "$layers" "$ops" "$best"
  json+="$sep{\"model\": \"$name\", \"layers\": $layers, \"step_ops\": $ops, \"seconds\": $best, \"args\": \"$args --batch $batch\"}"
  sep=", "
done
json+="]"

# Best wall time of three runs of a command, in seconds.
best_of_3() {
  local best="" t0 t1 t
  for _ in 1 2 3; do
    t0=$(now)
    "$@" >/dev/null
    t1=$(now)
    t=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", b - a }')
    if [[ -z $best ]] || awk -v a="$t" -v b="$best" 'BEGIN { exit !(a < b) }'; then
      best=$t
    fi
  done
  echo "$best"
}
widths() { python3 -c "print(','.join(['16'] * $1))"; }

goal_pipeline="--zero-pipeline=stage=3 world-size=8"
goals="["

# 10,000 parameter tensors: an MLP of 5,000 layers of width 16.
"$gen" mlp --sizes "$(widths 5001)" --batch 8 -o "$tmp/params-10k.mlir"
tensors=$(grep -c 'zero.param @' "$tmp/params-10k.mlir")
"$opt" "$tmp/params-10k.mlir" "$goal_pipeline" -o "$tmp/params-10k.out.mlir"
ops=$(grep -c '^    ' "$tmp/params-10k.out.mlir" || true)
t=$(best_of_3 "$opt" "$tmp/params-10k.mlir" "$goal_pipeline" -o /dev/null)
printf '%-18s %8s tensors %10s ops %10s s (goal 1 s)\n' params-10k "$tensors" "$ops" "$t"
goals+="{\"case\": \"params-10k\", \"tool\": \"zero-opt\", \"args\": \"zero-model-gen mlp --sizes 16,...,16 (5001 widths) --batch 8\", \"tensors\": $tensors, \"step_ops\": $ops, \"seconds\": $t, \"goal_seconds\": 1}"

# 20,000 parameter tensors: the pipeline stays linear (goal: under 2.2x the
# 10,000-tensor time).
"$gen" mlp --sizes "$(widths 10001)" --batch 8 -o "$tmp/params-20k.mlir"
tensors20=$(grep -c 'zero.param @' "$tmp/params-20k.mlir")
"$opt" "$tmp/params-20k.mlir" "$goal_pipeline" -o "$tmp/params-20k.out.mlir"
ops20=$(grep -c '^    ' "$tmp/params-20k.out.mlir" || true)
t20=$(best_of_3 "$opt" "$tmp/params-20k.mlir" "$goal_pipeline" -o /dev/null)
ratio=$(awk -v a="$t" -v b="$t20" 'BEGIN { printf "%.3f", b / a }')
printf '%-18s %8s tensors %10s ops %10s s (%sx params-10k, goal 2.2x)\n' params-20k "$tensors20" "$ops20" "$t20" "$ratio"
goals+=", {\"case\": \"params-20k\", \"tool\": \"zero-opt\", \"args\": \"zero-model-gen mlp --sizes 16,...,16 (10001 widths) --batch 8\", \"tensors\": $tensors20, \"step_ops\": $ops20, \"seconds\": $t20, \"ratio_to\": \"params-10k\", \"ratio\": $ratio, \"goal_ratio\": 2.2}"

# A 20,000-op step compiled and linked: an MLP of 1,111 layers.
"$gen" mlp --sizes "$(widths 1112)" --batch 8 -o "$tmp/ops-20k.mlir"
tensors=$(grep -c 'zero.param @' "$tmp/ops-20k.mlir")
ops=$("$opt" "$tmp/ops-20k.mlir" "$goal_pipeline" | grep -c '^    ' || true)
t=$(best_of_3 "$build/bin/zero-compile" "$tmp/ops-20k.mlir" --stage 3 --world-size 8 -o "$tmp/ops-20k.exe")
printf '%-18s %8s tensors %10s ops %10s s (goal 20 s)\n' ops-20k "$tensors" "$ops" "$t"
goals+=", {\"case\": \"ops-20k\", \"tool\": \"zero-compile\", \"args\": \"zero-model-gen mlp --sizes 16,...,16 (1112 widths) --batch 8\", \"tensors\": $tensors, \"step_ops\": $ops, \"seconds\": $t, \"goal_seconds\": 20}"

# One gradient element per bucket: every reduction, free and wait of the
# schedule is its own op.
bucket_pipeline="--zero-pipeline=stage=3 world-size=8 reduce-bucket-size=1"
"$opt" "$here/../examples/gpt2-tiny.mlir" "$bucket_pipeline" -o "$tmp/bucket-1.mlir"
ops=$(grep -c '^    ' "$tmp/bucket-1.mlir" || true)
verify=""
for _ in 1 2 3; do
  v=$("$opt" "$tmp/bucket-1.mlir" --zero-plan-memory --zero-verify-schedule \
        --mlir-timing -o /dev/null 2>&1 |
      awk '/ZeroVerifySchedulePass/ { print $1 }')
  if [[ -z $verify ]] || awk -v a="$v" -v b="$verify" 'BEGIN { exit !(a < b) }'; then
    verify=$v
  fi
done
printf '%-18s %8s %10s ops %10s s in zero-verify-schedule\n' bucket-1 "" "$ops" "$verify"
goals+=", {\"case\": \"bucket-1\", \"tool\": \"zero-verify-schedule\", \"args\": \"examples/gpt2-tiny.mlir, ${bucket_pipeline#--zero-pipeline=}\", \"step_ops\": $ops, \"seconds\": $verify}"
goals+="]"

machine=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
cat >"$out/compile_time.json" <<JSON
{
  "pipeline": "${pipeline#--zero-pipeline=}",
  "machine": {"nproc": $(nproc), "cpu": "$machine"},
  "results": $json,
  "goals": $goals
}
JSON
echo "wrote $out/compile_time.json"
