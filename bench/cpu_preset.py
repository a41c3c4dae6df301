#!/usr/bin/env python3
"""Writes the `cpu` cost-model preset's per-rank rows (kCpuShares in
lib/Dialect/Zero/Analysis/CostModel.cpp, between the bench:cpu-shares
markers) from zrt-bench-calibrate's results, so that the preset holds
exactly what the calibration measured.

    bench/cpu_preset.py [--results bench/results] [--check]

--check exits 1 if the file differs from what the results give (nothing is
written).
"""

import argparse
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SOURCE = os.path.join(ROOT, "lib", "Dialect", "Zero", "Analysis",
                      "CostModel.cpp")


def g(x):
    """A C++ double literal with 4 significant digits."""
    return "%.4g" % x


def row(doc):
    n = doc["ranks"]
    link = n > 1
    fields = [
        ("ranks", str(n)),
        ("gemmFlops", g(doc["gemm_flops"])),
        ("memoryBandwidth", g(doc["memory_bandwidth"])),
        ("kernelOverhead", g(doc["kernel_overhead_s"])),
        ("linkBandwidth", g(doc["link_bandwidth"]) if link else "0"),
        # Inside a step, ranks reach blocking collectives out of step: the
        # latency "after compute" is the one a step pays (see HardwarePreset).
        ("collectiveLatency", g(doc["sync_latency_s"]) if link else "0"),
        ("attentionFlops", g(doc["attention_flops"])),
        ("activationElements", g(doc["activation_elements"])),
        ("backToBackLatency", g(doc["collective_latency_s"]) if link else "0"),
        ("skewCompute", g(doc["sync_compute_s"]) if link else "0"),
        ("reduceScatterBandwidth",
         g(doc["reduce_scatter_bandwidth"]) if link else "0"),
        ("allGatherBandwidth", g(doc["all_gather_bandwidth"]) if link else "0"),
    ]
    lines, line = [], "    {"
    for i, (name, value) in enumerate(fields):
        item = "/*%s=*/%s%s" % (name, value,
                                "," if i + 1 < len(fields) else "},")
        if len(line) + len(item) + 1 > 80:
            lines.append(line.rstrip())
            line = "     "
        line += item + " "
    lines.append(line.rstrip())
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--results", default=os.path.join(HERE, "results"))
    p.add_argument("--check", action="store_true")
    args = p.parse_args()
    rows = []
    for n in (1, 2, 4):
        path = os.path.join(args.results, "calibration_np%d.json" % n)
        if not os.path.exists(path):
            sys.exit("cpu_preset: %s is missing (bench/run.sh with ONLY="
                     "calibrate writes it)" % path)
        rows.append(row(json.load(open(path))))
    text = open(SOURCE).read()
    pattern = re.compile(r"(// bench:cpu-shares\n"
                         r"static const RankShare kCpuShares\[\] = \{\n)"
                         r"(.*?)(\};\n// /bench:cpu-shares)", re.S)
    if not pattern.search(text):
        sys.exit("cpu_preset: no bench:cpu-shares markers in " + SOURCE)
    new = pattern.sub(lambda m: m.group(1) + "\n".join(rows) + "\n" +
                      m.group(3), text)
    if args.check:
        sys.exit(0 if new == text else 1)
    with open(SOURCE, "w") as f:
        f.write(new)
    print("cpu_preset: wrote %d rows into %s" % (len(rows), SOURCE))


if __name__ == "__main__":
    main()
