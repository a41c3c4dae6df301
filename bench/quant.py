#!/usr/bin/env python3
"""ZeRO++'s block quantization kernels against a memory copy of the same
bytes (not a test; bench/run.sh runs it with ONLY=quant).

Runs zrt-bench-quantize (runtime/bench/Quantize.cpp: zrt_quantize and
zrt_dequantize of --mib MiB of bf16, f16 and f32 values, INT8 and INT4,
each timed next to a std::memcpy of the values' bytes, medians over
interleaved rounds) and records the machine, its load and the date beside
its numbers.

Writes bench/results/quant.json (or --out); bench/update_docs.py turns it
into the table of docs/benchmarks.md.
"""

import argparse
import json
import os
import subprocess
import tempfile
import time

from gather_once import loadavg, save_json

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--tool", required=True, help="zrt-bench-quantize")
    p.add_argument("--out", default=os.path.join(HERE, "results",
                                                 "quant.json"))
    p.add_argument("--mib", type=int, default=64)
    p.add_argument("--rounds", type=int, default=11)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    cpu = "unknown"
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    for line in lscpu.splitlines():
        if line.startswith("Model name:"):
            cpu = line.split(":", 1)[1].strip()
    start = loadavg()
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    try:
        subprocess.run([args.tool, "--mib", str(args.mib), "--rounds",
                        str(args.rounds), "--threads", str(args.threads),
                        "--json", path], check=True)
        with open(path) as f:
            doc = json.load(f)
    finally:
        os.remove(path)
    doc["machine"] = {"cpu": cpu, "nproc": os.cpu_count()}
    doc["date"] = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    doc["loadavg"] = start
    doc["loadavg_end"] = loadavg()
    save_json(args.out, doc)
    print("wrote %s" % args.out)


if __name__ == "__main__":
    main()
