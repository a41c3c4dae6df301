#!/usr/bin/env bash
# The zero-mlir side of bench/gpu/run.sh's llama part, compiled where MLIR
# is (a build, or scripts/gpu-bundle.sh for a GPU machine without one): a
# Llama-3.2-1B-shaped step (16 layers, hidden 2048, 32 heads, 8 KV heads,
# MLP 8192, vocabulary 128256, tied, RoPE base 500000) in bf16 at each
# micro batch, compiled with --target cuda as OUT/llama_bB, and OUT/plans.json
# mapping each batch to its planned peak bytes (zero-report), from which
# run.sh takes the largest batch that fits the GPU.
#
#   bench/gpu/llama_programs.sh BIN-DIR OUT-DIR [SEQ [BATCH ...]]
#
# (SEQ 2048, batches 4 8 16 32 by default.)
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: bench/gpu/llama_programs.sh BIN-DIR OUT-DIR [SEQ [BATCH ...]]" >&2
  exit 2
fi
bin=$1 out=$2
seq=${3:-2048}
shift $(($# < 3 ? $# : 3))
batches=${*:-4 8 16 32}
mkdir -p "$out"
plans="{"
sep=""
for b in $batches; do
  "$bin/zero-model-gen" llama --layers 16 --hidden 2048 --heads 32 \
    --kv-heads 8 --ffn 8192 --vocab 128256 --tied --rope-theta 500000 \
    --seq "$seq" --batch "$b" --dtype bf16 -o "$out/b$b.mlir"
  peak=$("$bin/zero-opt" "$out/b$b.mlir" \
    --zero-pipeline="stage=0 world-size=1 target=cuda" \
    --zero-report=format=json -o /dev/null |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["peak_bytes"])')
  "$bin/zero-compile" --target cuda "$out/b$b.mlir" -o "$out/llama_b$b"
  rm -f "$out/b$b.mlir"
  plans+="$sep\"$b\": $peak"
  sep=", "
done
echo "$plans}" >"$out/plans.json"
