#!/usr/bin/env python3
"""Regenerates the measured tables of docs/benchmarks.md from the JSON files
that bench/run.sh writes under bench/results/.

Each generated part sits between `<!-- bench:NAME -->` and
`<!-- /bench:NAME -->`; only those parts are rewritten, the prose around
them is kept. A part whose results file is missing is left as it is.

  bench/update_docs.py [--results DIR] [--doc FILE] [--only NAME,...]
"""

import argparse
import os
import re
import sys

from update_docs_cpu import (sec_calibration, sec_comm, sec_compile_time,
                             sec_cost_model, sec_e2e, sec_kernels, sec_machine,
                             sec_tune)
from update_docs_gpu import (sec_gather_once, sec_gpu, sec_gpu_offload,
                             sec_gpu_profile, sec_nvme, sec_offload, sec_quant,
                             sec_transfer)
from update_docs_peers import (sec_long_context, sec_packing, sec_peers,
                               sec_streaming,
                               sec_zeropp)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# What a section without results says when the doc holds no measured table
# yet (results are not committed: a table measured once stays until new
# results replace it).
UNMEASURED = {
    "gpu": "GPU: unmeasured. No GPU was lent to the sessions that ran the "
           "benchmarks; `bench/gpu/run.sh` on a machine with an NVIDIA GPU "
           "writes `bench/results/gpu_*.json` and fills this section.",
}

SECTIONS = {
    "machine": sec_machine,
    "compile_time": sec_compile_time,
    "kernels": sec_kernels,
    "comm": sec_comm,
    "e2e": sec_e2e,
    "calibration": sec_calibration,
    "cost_model": sec_cost_model,
    "tune": sec_tune,
    "transfer": sec_transfer,
    "offload": sec_offload,
    "gpu": sec_gpu,
    "gpu_profile": sec_gpu_profile,
    "gpu_offload": sec_gpu_offload,
    "nvme": sec_nvme,
    "gather_once": sec_gather_once,
    "quant": sec_quant,
    "peers": sec_peers,
    "zeropp": sec_zeropp,
    "long_context": sec_long_context,
    "packing": sec_packing,
    "streaming": sec_streaming,
}


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--results", default=os.path.join(HERE, "results"))
    p.add_argument("--doc", default=os.path.join(ROOT, "docs",
                                                 "benchmarks.md"))
    p.add_argument("--only", help="comma-separated sections to render "
                   "(default: all), e.g. gpu from a GPU machine's results")
    args = p.parse_args()
    only = set(args.only.split(",")) if args.only else set(SECTIONS)
    with open(args.doc) as f:
        text = f.read()
    for name, fn in SECTIONS.items():
        if name not in only:
            continue
        pattern = re.compile(r"(<!-- bench:%s -->\n)(.*?)(<!-- /bench:%s -->)"
                             % (name, name), re.S)
        if not pattern.search(text):
            print("update_docs: no markers for '%s' in %s" % (name, args.doc),
                  file=sys.stderr)
            continue
        body = fn(args.results)
        if body is None and name in UNMEASURED and \
                "|" not in pattern.search(text).group(2):
            body = UNMEASURED[name]
        if body is None:
            print("update_docs: no results for '%s'; left as is" % name,
                  file=sys.stderr)
            continue
        text = pattern.sub(lambda m: m.group(1) + body + "\n" + m.group(3),
                           text)
    with open(args.doc, "w") as f:
        f.write(text)
    print("updated " + args.doc)


if __name__ == "__main__":
    main()
