#!/usr/bin/env bash
# The main job: builds zero-mlir, generates a GPT-2-style model and runs it
# through the compiler.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${ZERO_BUILD_DIR:-$ROOT/build}"
# The demo builds what it runs (the zero-demo target: zero-model-gen,
# zero-opt, zero-compile and the CPU runtime), not the unit tests or the CUDA
# kernels, which scripts/test.sh builds and checks.
build_start=$SECONDS
"$ROOT/scripts/setup.sh" zero-demo
echo "== setup and build of the demo's tools and CPU runtime: $((SECONDS - build_start)) s"
BIN="$BUILD/bin"
OUT="${ZERO_DEMO_DIR:-$BUILD/demo}"
mkdir -p "$OUT"

echo "== zero-model-gen: gpt2-tiny (5 layers, hidden 128, 4 heads, byte vocabulary)"
"$BIN/zero-model-gen" gpt2 --layers 5 --hidden 128 --heads 4 --vocab 256 \
  --seq 64 --batch 8 -o "$OUT/gpt2-tiny.mlir"
grep -c "zero.param" "$OUT/gpt2-tiny.mlir" | sed 's/^/parameters tensors: /'

echo "== zero-opt: parse, verify and print the forward step"
# Through a file: `| head` would end zero-opt with SIGPIPE under pipefail.
"$BIN/zero-opt" "$OUT/gpt2-tiny.mlir" -o "$OUT/gpt2-tiny.verified.mlir"
head -40 "$OUT/gpt2-tiny.verified.mlir"
echo "   ..."

echo "== zero-opt --zero-autodiff --zero-mixed-precision=dtype=bf16: forward + backward"
"$BIN/zero-opt" "$OUT/gpt2-tiny.mlir" --zero-autodiff \
  --zero-mixed-precision=dtype=bf16 -o "$OUT/gpt2-tiny.step.mlir"
# grep -m stops by itself: `| head` would kill grep with SIGPIPE under pipefail.
grep -m 12 -E "zero.grad" "$OUT/gpt2-tiny.step.mlir"
echo "   ... $(grep -c zero.grad "$OUT/gpt2-tiny.step.mlir") gradients in total; full IR in $OUT/gpt2-tiny.step.mlir"

echo "== training data: the bytes of this repository's docs and examples (byte-level, vocabulary 256)"
cat "$ROOT"/docs/*.md "$ROOT"/examples/*.mlir > "$OUT/corpus.txt"
python3 - "$OUT/corpus.txt" "$OUT/tokens.bin" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
open(sys.argv[2], "wb").write(struct.pack("<%dH" % len(data), *data))
print("tokens: %d" % len(data))
PY

MODEL="$ROOT/examples/gpt2-tiny.mlir"
if [ ! -f "$MODEL" ]; then
  MODEL="$OUT/gpt2-tiny.mlir"
fi
echo "== zero-opt --zero-report: what one of 4 ranks stores and sends at ZeRO stage 3"
"$BIN/zero-opt" "$MODEL" --zero-pipeline="stage=3 world-size=4 dtype=bf16" \
  --zero-report="format=text" -o /dev/null

echo "== zero-compile --stage 3 --world-size 4 --dtype bf16: a training executable"
"$BIN/zero-compile" "$MODEL" --stage 3 --world-size 4 --dtype bf16 \
  -o "$OUT/train"

echo "== mpirun -np 4 train: 200 steps on the token stream"
(cd "$OUT" && mpirun --allow-run-as-root --oversubscribe -np 4 ./train \
  --data tokens.bin --steps 200 --log-json train.json \
  | awk '/^step/ && ($2 <= 5 || $2 % 20 == 0) || !/^step/')
python3 - "$OUT/train.json" <<'PY'
import json, math, sys
log = [json.loads(line) for line in open(sys.argv[1])]
last = sum(l["loss"] for l in log[-20:]) / 20
uniform = math.log(256)
print("mean loss of the last 20 steps: %.3f, uniform baseline ln(256) = %.3f"
      % (last, uniform))
if last > uniform - 1.5:
    sys.exit("the model did not learn: the loss is not well below the baseline")
print("the model learned the byte statistics of the repository: the loss is "
      "%.2f nats below the uniform baseline" % (uniform - last))
PY
